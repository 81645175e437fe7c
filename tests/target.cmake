# --target megatron|ultraplan|ultraplan-cuda and --mem-margin (issue 19): what Megatron-LM
# expresses, inner_megatron against brute force, the planner's plans under
# megatron and the margin (unit); the CLI, and --target ultraplan pinned to
# the search before the target existed (e2e).
if(CMOCKA_FOUND)
  up_test(test_target SOURCES test_target.c LIBS up_planner up_profiles up_scenario PkgConfig::CMOCKA LABELS unit)
  # the ultraplan targets offer only what their executor runs (executor/refuse.h)
  up_test(test_refuse SOURCES test_refuse.c LIBS up_planner up_refuse up_profiles up_scenario PkgConfig::CMOCKA
          LABELS unit)
endif()
up_script_test(e2e_target SCRIPT e2e_target.sh LABELS e2e)
