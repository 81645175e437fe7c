# The cost model and the shared flags.
up_test(test_model SOURCES test_model.c LIBS up_model up_profiles PkgConfig::CMOCKA LABELS unit)
up_test(test_args SOURCES test_args.c LIBS up_cli PkgConfig::CMOCKA LABELS unit)
up_script_test(e2e_predict SCRIPT e2e_predict.sh LABELS e2e)
# Software stacks: the default changes nothing, each field by hand, the loader's errors.
up_test(test_stacks SOURCES test_stacks.c LIBS up_model up_profiles up_band PkgConfig::CMOCKA LABELS unit)
