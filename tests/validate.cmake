# validate / fit: CSV parsing, error statistics, accuracy against vTrain, bad inputs.
if(TARGET PkgConfig::CMOCKA)
  up_test(test_validate SOURCES test_validate.c LIBS up_validate up_profiles PkgConfig::CMOCKA LABELS unit)
endif()
up_script_test(e2e_validate SCRIPT e2e_validate.sh LABELS e2e)
up_script_test(e2e_sweep SCRIPT e2e_sweep.sh LABELS e2e)
