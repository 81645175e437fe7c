# plan and export commands need the planner library.
target_link_libraries(ultraplan PRIVATE up_planner)
