# up_calib: measured runs against the cost model. runs.c reads the CSVs of
# measured runs and predicts each row, stats.c says how far the predictions
# are, fit.c fits a profile's constants to the runs (GSL). Used by
# `validate`, `fit` and their tests; no GPU or MPI library.
if(NOT GSL_FOUND)
  message(FATAL_ERROR "GSL is required for `ultraplan fit` (apt-get install libgsl-dev)")
endif()
add_library(up_calib STATIC ${CMAKE_CURRENT_LIST_DIR}/runs.c ${CMAKE_CURRENT_LIST_DIR}/stats.c
            ${CMAKE_CURRENT_LIST_DIR}/fit.c)
target_include_directories(up_calib PUBLIC ${CMAKE_CURRENT_LIST_DIR})
target_link_libraries(up_calib PUBLIC up_model up_profiles up_scenario up_util PkgConfig::CJSON GSL::gsl m)
