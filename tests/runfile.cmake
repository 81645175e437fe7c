# run.json's writer over a long run: medians without a per-step stack array,
# bounded memory per step (issue 17, item 9).
if(TARGET up_runfile)
  up_test(test_runfile SOURCES test_runfile.c LIBS up_runfile PkgConfig::CMOCKA LABELS unit)
endif()
