# scenario/: the knob table against the parser, --help, plan.json and the TUI.
if(TARGET PkgConfig::CMOCKA)
  up_test(test_knobs SOURCES test_knobs.c LIBS up_cli up_tui PkgConfig::CMOCKA LABELS unit)
endif()
