# `cmake --install BUILD [--prefix P]`: RLX as a C++ library.
#   P/include/rlx/*.h                      the public API (include/rlx), op table as rlx/ops.def
#   P/lib/librlx_*.a                       every rlx_* library target (static)
#   P/lib/cmake/rlx/rlxConfig.cmake        find_package(rlx) -> target rlx::rlx (links everything)
#   P/lib/pkgconfig/rlx.pc                 pkg-config --cflags --libs rlx
#   P/bin/rlx, P/share/rlx/plot_training.py  the command and its plot script
# The library targets are found, not listed: every STATIC/SHARED/OBJECT/INTERFACE library named
# rlx_* in this project, so splitting the core into more libraries needs no change here. Their
# transitive link dependencies (OpenBLAS, LAPACKE, SuiteSparse, protobuf, ICU, libpng, zlib, threads, dl) travel in the export, so
# a consumer links `rlx::rlx` and nothing else.
# Under scikit-build-core (pip install .) only the command and its script are installed, into the
# environment's bin/ and share/ (python/ installs the module).
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

if(SKBUILD)
  if(TARGET rlx)
    install(TARGETS rlx RUNTIME DESTINATION ${SKBUILD_SCRIPTS_DIR})
    install(FILES ${CMAKE_SOURCE_DIR}/tools/plot_training.py DESTINATION ${SKBUILD_DATA_DIR}/share/rlx)
  endif()
  return()
endif()

# Library targets of this project (and its subdirectories) whose name starts with rlx_.
function(rlx_collect_libraries dir out)
  get_property(tgts DIRECTORY ${dir} PROPERTY BUILDSYSTEM_TARGETS)
  set(found)
  foreach(t ${tgts})
    get_target_property(type ${t} TYPE)
    if(t MATCHES "^rlx_" AND type MATCHES "^(STATIC|SHARED|OBJECT|INTERFACE)_LIBRARY$")
      get_target_property(excluded ${t} EXCLUDE_FROM_ALL)
      if(NOT excluded)
        list(APPEND found ${t})
      endif()
    endif()
  endforeach()
  get_property(subdirs DIRECTORY ${dir} PROPERTY SUBDIRECTORIES)
  foreach(sd ${subdirs})
    rlx_collect_libraries(${sd} sub)
    list(APPEND found ${sub})
  endforeach()
  set(${out} ${found} PARENT_SCOPE)
endfunction()
rlx_collect_libraries(${CMAKE_SOURCE_DIR} RLX_INSTALL_LIBS)
# The serve layer is the `rlx serve` command's server (linked to cpp-httplib); the package is the
# library, so it is not installed.
list(REMOVE_ITEM RLX_INSTALL_LIBS rlx_serve)

# Include directories under the source or build tree hold for the build only; installed consumers
# get P/include.
foreach(t ${RLX_INSTALL_LIBS})
  get_target_property(incs ${t} INTERFACE_INCLUDE_DIRECTORIES)
  if(incs)
    set(fixed)
    foreach(i ${incs})
      if(i MATCHES "^\\$<" OR NOT (i MATCHES "^${CMAKE_SOURCE_DIR}" OR i MATCHES "^${CMAKE_BINARY_DIR}"))
        list(APPEND fixed "${i}")
      else()
        list(APPEND fixed "$<BUILD_INTERFACE:${i}>")
      endif()
    endforeach()
    list(APPEND fixed "$<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>")
    list(REMOVE_DUPLICATES fixed)
    set_target_properties(${t} PROPERTIES INTERFACE_INCLUDE_DIRECTORIES "${fixed}")
  endif()
endforeach()

# One umbrella target: rlx::rlx links every library (a consumer need not know how the core is split).
add_library(rlx_all INTERFACE)
target_link_libraries(rlx_all INTERFACE ${RLX_INSTALL_LIBS})
set_target_properties(rlx_all PROPERTIES EXPORT_NAME rlx)
add_library(rlx::rlx ALIAS rlx_all)

install(TARGETS ${RLX_INSTALL_LIBS} rlx_all EXPORT rlxTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(EXPORT rlxTargets NAMESPACE rlx:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/rlx)

# Headers: include/rlx as is, except that op.h reaches the op table through the source tree
# (../../src/ir/ops.def); the installed copy includes rlx/ops.def, installed beside it.
file(GLOB RLX_PUBLIC_HEADERS CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/include/rlx/*.h)
set(RLX_STAGED_INCLUDE ${CMAKE_BINARY_DIR}/install_include/rlx)
file(MAKE_DIRECTORY ${RLX_STAGED_INCLUDE})
foreach(h ${RLX_PUBLIC_HEADERS})
  file(READ ${h} text)
  string(REPLACE "\"../../src/ir/ops.def\"" "\"rlx/ops.def\"" text "${text}")
  get_filename_component(n ${h} NAME)
  file(WRITE ${RLX_STAGED_INCLUDE}/${n}.tmp "${text}")
  configure_file(${RLX_STAGED_INCLUDE}/${n}.tmp ${RLX_STAGED_INCLUDE}/${n} COPYONLY)
endforeach()
configure_file(${CMAKE_SOURCE_DIR}/src/ir/ops.def ${RLX_STAGED_INCLUDE}/ops.def COPYONLY)
install(DIRECTORY ${RLX_STAGED_INCLUDE}/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/rlx
        FILES_MATCHING PATTERN "*.h" PATTERN "ops.def")

# rlxConfig.cmake: finds what the exported targets link against, then loads them.
set(RLX_CONFIG_DEPS "find_dependency(Threads)\nfind_dependency(ZLIB)\nfind_dependency(ICU COMPONENTS uc i18n)\nfind_dependency(PNG)\n")
if(TARGET protobuf::libprotobuf)
  string(APPEND RLX_CONFIG_DEPS "find_dependency(Protobuf)\n")
endif()

file(WRITE ${CMAKE_BINARY_DIR}/rlxConfig.cmake.in
     "@PACKAGE_INIT@\ninclude(CMakeFindDependencyMacro)\n${RLX_CONFIG_DEPS}"
     "include(\"\${CMAKE_CURRENT_LIST_DIR}/rlxTargets.cmake\")\ncheck_required_components(rlx)\n")
configure_package_config_file(${CMAKE_BINARY_DIR}/rlxConfig.cmake.in ${CMAKE_BINARY_DIR}/rlxConfig.cmake
                              INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/rlx)
write_basic_package_version_file(${CMAKE_BINARY_DIR}/rlxConfigVersion.cmake VERSION ${PROJECT_VERSION}
                                 COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_BINARY_DIR}/rlxConfig.cmake ${CMAKE_BINARY_DIR}/rlxConfigVersion.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/rlx)

# rlx.pc: the libraries are static, so Libs names them all and their dependencies (pkg-config's
# Requires brings protobuf, ICU, zlib and OpenBLAS flags).
set(RLX_PC_LIBS)
foreach(t ${RLX_INSTALL_LIBS})
  get_target_property(type ${t} TYPE)
  if(type MATCHES "^(STATIC|SHARED)_LIBRARY$")
    string(REGEX REPLACE "^lib" "" base "${t}")
    string(APPEND RLX_PC_LIBS " -l${base}")
  endif()
endforeach()
set(RLX_PC_REQUIRES "zlib icu-uc icu-i18n libpng")
if(TARGET protobuf::libprotobuf)
  string(APPEND RLX_PC_REQUIRES " protobuf")
endif()
if(RLX_OPENBLAS_LIB)
  string(APPEND RLX_PC_REQUIRES " openblas")
endif()
# Libraries without a .pc file (LAPACKE, SuiteSparse, oneDNN): named in Libs, after the rlx libraries.
set(RLX_PC_EXTRA_LIBS)
foreach(lib ${RLX_LAPACKE_LINKED} ${RLX_SUITESPARSE_LINKED} ${RLX_DNNL_LINKED})
  get_filename_component(n ${lib} NAME_WE)
  string(REGEX REPLACE "^lib" "" n "${n}")
  string(APPEND RLX_PC_EXTRA_LIBS " -l${n}")
endforeach()
# Shared libraries outside the system paths (MLX from its wheel) and MPI: by full path (+ rpath).
if(MLX_FOUND AND MLX_LIBRARY)
  string(APPEND RLX_PC_EXTRA_LIBS " ${MLX_LIBRARY} -Wl,-rpath,${MLX_LIBRARY_DIRS}")
endif()
foreach(lib ${MPI_C_LIBRARIES})
  string(APPEND RLX_PC_EXTRA_LIBS " ${lib}")
endforeach()
string(APPEND RLX_PC_LIBS "${RLX_PC_EXTRA_LIBS}")
# Relocatable: the prefix is found from the .pc file's own place, so `cmake --install --prefix P`
# works for any P chosen at install time.
file(RELATIVE_PATH RLX_PC_UP /${CMAKE_INSTALL_LIBDIR}/pkgconfig /)
string(REGEX REPLACE "/$" "" RLX_PC_UP "${RLX_PC_UP}")
file(WRITE ${CMAKE_BINARY_DIR}/rlx.pc.in
     "prefix=\${pcfiledir}/@RLX_PC_UP@\nexec_prefix=\${prefix}\nlibdir=\${prefix}/@CMAKE_INSTALL_LIBDIR@\n"
     "includedir=\${prefix}/@CMAKE_INSTALL_INCLUDEDIR@\n\nName: rlx\nDescription: RLX tensor compiler and runtime\n"
     "Version: @PROJECT_VERSION@\nRequires: @RLX_PC_REQUIRES@\nCflags: -I\${includedir} -std=c++20\n"
     "Libs: -L\${libdir}@RLX_PC_LIBS@ -ldl -pthread\n")
configure_file(${CMAKE_BINARY_DIR}/rlx.pc.in ${CMAKE_BINARY_DIR}/rlx.pc @ONLY)
install(FILES ${CMAKE_BINARY_DIR}/rlx.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

if(TARGET rlx)
  install(TARGETS rlx RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
  install(FILES ${CMAKE_SOURCE_DIR}/tools/plot_training.py DESTINATION ${CMAKE_INSTALL_DATADIR}/rlx)
endif()

# `make test` / ctest: install into a scratch prefix, build examples/cpp against the package with
# CMake and with pkg-config, run both (examples/cpp/check_package.sh).
if(RLX_TESTS AND TARGET rlx)
  add_test(NAME cpp_package_example COMMAND ${CMAKE_SOURCE_DIR}/examples/cpp/check_package.sh ${CMAKE_BINARY_DIR})
  set_tests_properties(cpp_package_example PROPERTIES TIMEOUT 600)
endif()
