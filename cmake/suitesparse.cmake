# SuiteSparse (Debian libsuitesparse-dev): KLU, UMFPACK and CHOLMOD for sparse_solve
# (src/sparse/direct.cpp). Optional: without it sparse_solve offers only method=dense and says so.
find_path(RLX_SUITESPARSE_INCLUDE klu.h PATH_SUFFIXES suitesparse)
find_library(RLX_KLU_LIB NAMES klu)
find_library(RLX_UMFPACK_LIB NAMES umfpack)
find_library(RLX_CHOLMOD_LIB NAMES cholmod)
find_library(RLX_SSCONFIG_LIB NAMES suitesparseconfig)
if(RLX_SUITESPARSE_INCLUDE AND RLX_KLU_LIB AND RLX_UMFPACK_LIB AND RLX_CHOLMOD_LIB AND RLX_SSCONFIG_LIB)
  message(STATUS "SuiteSparse: ${RLX_SUITESPARSE_INCLUDE} (KLU, UMFPACK, CHOLMOD)")
  set_source_files_properties(${CMAKE_SOURCE_DIR}/src/sparse/direct.cpp PROPERTIES
                              COMPILE_DEFINITIONS RLX_HAVE_SUITESPARSE INCLUDE_DIRECTORIES ${RLX_SUITESPARSE_INCLUDE})
  target_link_libraries(rlx_core PRIVATE ${RLX_KLU_LIB} ${RLX_UMFPACK_LIB} ${RLX_CHOLMOD_LIB} ${RLX_SSCONFIG_LIB})
  set(RLX_SUITESPARSE_LINKED ${RLX_KLU_LIB} ${RLX_UMFPACK_LIB} ${RLX_CHOLMOD_LIB} ${RLX_SSCONFIG_LIB})  # rlx.pc
else()
  message(STATUS "SuiteSparse not found: sparse_solve offers method=dense only (apt libsuitesparse-dev)")
endif()
