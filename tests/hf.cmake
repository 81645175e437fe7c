# --hf-config: the Hugging Face config.json reader (scenario/hfconfig.c) on
# the real configs of tests/data/hf/, and the flag in predict, plan, sweep and tui.
if(TARGET PkgConfig::CMOCKA)
  up_test(test_hfconfig SOURCES test_hfconfig.c LIBS up_scenario PkgConfig::CMOCKA LABELS unit
          ARGS ${PROJECT_SOURCE_DIR}/tests/data/hf)
endif()
up_script_test(e2e_hf SCRIPT e2e_hf.sh LABELS e2e)
