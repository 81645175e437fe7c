# util/: the atomic writer, output checks and the reader; output paths of the commands.
if(TARGET PkgConfig::CMOCKA)
  up_test(test_util SOURCES test_util.c LIBS up_util PkgConfig::CMOCKA LABELS unit)
endif()
up_script_test(e2e_outputs SCRIPT e2e_outputs.sh LABELS e2e)
up_script_test(e2e_readers SCRIPT e2e_readers.sh LABELS e2e)
up_script_test(e2e_numbers SCRIPT e2e_numbers.sh LABELS e2e)
