# tui --follow against a real run: the Run pane changes while a CPU run
# trains (tmux; needs the executor module, mpirun's Open MPI and tmux).
if(TARGET ultraplan_exec)
  up_script_test(e2e_follow_tmux SCRIPT e2e_follow_tmux.sh LABELS e2e)
  set_tests_properties(e2e_follow_tmux PROPERTIES TIMEOUT 600)
endif()
