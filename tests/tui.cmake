# tui/: pure parts (layout, state, panes, run.json) and the real TUI in tmux.
if(TARGET PkgConfig::CMOCKA)
  up_test(test_tui_layout SOURCES test_tui_layout.c LIBS up_tui up_cli PkgConfig::CMOCKA LABELS unit)
endif()
up_script_test(e2e_tui_tmux SCRIPT e2e_tui_tmux.sh LABELS e2e)
