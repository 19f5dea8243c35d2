# The graph-API devices, both optional and both from pip wheels (scripts/bootstrap.sh installs them):
#   tpu  the PJRT C API header, pjrt_c_api.h, from the installed xla-cpu-pjrt wheel (or
#        RLX_PJRT_INCLUDE=<dir>); the plugin itself is dlopened at run time. Without the header the
#        tpu backend is compiled out and `rlx devices` says so.
#   mlx  find_package(MLX CONFIG) from the installed mlx-cpu wheel (or MLX_DIR); libmlx.so is linked
#        (with its directory in the build RPATH). Without it the mlx backend is compiled out.
# Included by CMakeLists.txt after the layer libraries exist; RLX_GRAPH_API_TARGET is the library that
# compiles src/backends (default rlx_backends) and RLX_GRAPH_API_LINK the one that links (rlx_core).
if(NOT RLX_GRAPH_API_TARGET)
  set(RLX_GRAPH_API_TARGET rlx_backends)
endif()
if(NOT RLX_GRAPH_API_LINK)
  set(RLX_GRAPH_API_LINK rlx_core)
endif()
if(Python_EXECUTABLE)
  set(_rlx_ga_py ${Python_EXECUTABLE})
else()
  find_program(_rlx_ga_py NAMES python3)
endif()
if(_rlx_ga_py)
  execute_process(COMMAND ${_rlx_ga_py} -c "import importlib.util as u,os; s=u.find_spec('xla_plugins.xla_cpu_pjrt'); print(os.path.join(s.submodule_search_locations[0],'include') if s else '')"
                  OUTPUT_VARIABLE _rlx_pjrt_hint OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
  execute_process(COMMAND ${_rlx_ga_py} -c "import importlib.util as u,os; s=u.find_spec('mlx'); print(os.path.join(s.submodule_search_locations[0],'share','cmake','MLX') if s else '')"
                  OUTPUT_VARIABLE _rlx_mlx_hint OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
endif()
find_path(RLX_PJRT_INCLUDE pjrt_c_api.h HINTS ${_rlx_pjrt_hint} NO_DEFAULT_PATH)
if(RLX_PJRT_INCLUDE)
  message(STATUS "tpu (PJRT): header ${RLX_PJRT_INCLUDE}/pjrt_c_api.h")
  target_include_directories(${RLX_GRAPH_API_TARGET} SYSTEM PRIVATE ${RLX_PJRT_INCLUDE})
  set_property(SOURCE ${RLX_ROOT}/src/backends/tpu/pjrt.cpp ${RLX_ROOT}/src/backends/tpu/executable.cpp
               APPEND PROPERTY COMPILE_DEFINITIONS RLX_HAVE_PJRT)
else()
  message(STATUS "tpu (PJRT): pjrt_c_api.h not found (pip install xla-cpu-pjrt): compiled out")
endif()
find_package(MLX CONFIG QUIET HINTS ${_rlx_mlx_hint})
if(MLX_FOUND AND MLX_LIBRARY)
  message(STATUS "mlx: ${MLX_LIBRARY}")
  target_include_directories(${RLX_GRAPH_API_TARGET} SYSTEM PRIVATE ${MLX_INCLUDE_DIRS})
  # PUBLIC: an installed rlx_core's users link it too, right after the archive (--as-needed).
  target_link_libraries(${RLX_GRAPH_API_LINK} PUBLIC ${MLX_LIBRARY})
  list(APPEND CMAKE_INSTALL_RPATH ${MLX_LIBRARY_DIRS})  # installed rlx / _rlx find the wheel's libmlx.so
  set_property(SOURCE ${RLX_ROOT}/src/backends/mlx/lower.cpp ${RLX_ROOT}/src/backends/mlx/executable.cpp
               APPEND PROPERTY COMPILE_DEFINITIONS RLX_HAVE_MLX)
else()
  message(STATUS "mlx: MLX not found (pip install mlx-cpu): compiled out")
endif()
