# The cpu JIT's generated C++ embeds vmath.h's text, so JIT and evaluator share one copy of the
# vector math (src/backends/cpu/jit.cpp includes gen/cpu_jit_vmath.inc). Included by CMakeLists.txt
# and scripts/device/CMakeLists.txt after the library that holds src/backends/cpu (RLX_VMATH_TARGET, default rlx_core) is defined, with RLX_ROOT = the repository root.
set(RLX_VMATH_H ${RLX_ROOT}/src/backends/cpu/vmath.h)
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${RLX_VMATH_H})  # re-generate on edits
file(READ ${RLX_VMATH_H} RLX_VMATH_TEXT)
file(CONFIGURE OUTPUT ${CMAKE_BINARY_DIR}/gen/cpu_jit_vmath.inc CONTENT "R\"RLXVMATH(${RLX_VMATH_TEXT})RLXVMATH\"\n" @ONLY)
if(NOT RLX_VMATH_TARGET)
  set(RLX_VMATH_TARGET rlx_core)  # the device build's single library
endif()
target_include_directories(${RLX_VMATH_TARGET} PRIVATE ${CMAKE_BINARY_DIR}/gen)
