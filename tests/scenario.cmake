# scenario/: the knob table against the parser, --help, plan.json and the TUI.
if(TARGET PkgConfig::CMOCKA)
  up_test(test_knobs SOURCES test_knobs.c LIBS up_cli up_tui PkgConfig::CMOCKA LABELS unit)
endif()
# the layering docs/DESIGN.md promises, on the tree and the built binary
up_script_test(e2e_structure SCRIPT e2e_structure.sh LABELS e2e)
