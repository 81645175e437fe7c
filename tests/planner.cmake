# planner/: ILP against brute force, pruning against exhaustive search,
# infeasible requests, GLPK failure paths, export; plan/export CLI end to end.
if(CMOCKA_FOUND)
  up_test(test_ilp SOURCES test_ilp.c LIBS up_planner PkgConfig::CMOCKA LABELS unit)
  up_test(test_planner SOURCES test_planner.c LIBS up_planner up_profiles PkgConfig::CMOCKA LABELS unit)
endif()
up_script_test(e2e_plan SCRIPT e2e_plan.sh LABELS e2e)
