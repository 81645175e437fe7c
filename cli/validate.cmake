# validate, fit: measured runs, their errors and profile fitting (calib/);
# sweep: the scaling sweep (planner). Included by cli/CMakeLists.txt.
target_link_libraries(ultraplan PRIVATE up_calib)
# sweep runs the planner for every (model, GPU count)
target_link_libraries(ultraplan PRIVATE up_planner)
