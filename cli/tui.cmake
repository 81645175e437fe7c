# The tui command needs the TUI library.
target_link_libraries(ultraplan PRIVATE up_tui)
