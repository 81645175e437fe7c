# validate / fit (calib/): CSV parsing, error statistics, the fit, accuracy against vTrain, bad inputs.
if(TARGET PkgConfig::CMOCKA)
  up_test(test_validate SOURCES test_validate.c LIBS up_calib up_profiles PkgConfig::CMOCKA LABELS unit)
  # fit: recovers constants from runs generated with a known profile
  up_test(test_fit SOURCES test_fit.c LIBS up_calib up_profiles PkgConfig::CMOCKA LABELS unit)
endif()
up_script_test(e2e_validate SCRIPT e2e_validate.sh LABELS e2e)
up_script_test(e2e_sweep SCRIPT e2e_sweep.sh LABELS e2e)
# validate on 100,000 rows (and 20,000 distinct models) in a 120 MB address space
up_script_test(e2e_validate_scale SCRIPT e2e_validate_scale.sh LABELS e2e)
