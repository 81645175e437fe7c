# The cost model and the shared flags.
up_test(test_model SOURCES test_model.c LIBS up_model up_profiles PkgConfig::CMOCKA LABELS unit)
up_test(test_args SOURCES test_args.c LIBS up_cli PkgConfig::CMOCKA LABELS unit)
up_script_test(e2e_predict SCRIPT e2e_predict.sh LABELS e2e)
