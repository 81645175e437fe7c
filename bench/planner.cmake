# Planner speed: wall time and layouts/s for ten cases, pruned and exhaustive.
add_executable(bench_plan ${CMAKE_CURRENT_LIST_DIR}/bench_plan.c)
target_link_libraries(bench_plan PRIVATE up_planner up_profiles up_scenario)
