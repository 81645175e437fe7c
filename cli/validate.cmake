# validate, fit, sweep: measured runs, their errors, profile fitting (GSL) and
# the scaling sweep (planner). Included by cli/CMakeLists.txt.
add_library(up_validate STATIC ${CMAKE_CURRENT_LIST_DIR}/validate_lib.c)
target_include_directories(up_validate PUBLIC ${CMAKE_CURRENT_LIST_DIR})
target_link_libraries(up_validate PUBLIC up_model m PkgConfig::CJSON)
if(NOT GSL_FOUND)
  message(FATAL_ERROR "GSL is required for `ultraplan fit` (apt-get install libgsl-dev)")
endif()
target_link_libraries(ultraplan PRIVATE up_validate GSL::gsl)
# sweep runs the planner for every (model, GPU count)
target_link_libraries(ultraplan PRIVATE up_planner)
