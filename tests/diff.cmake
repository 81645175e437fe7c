# cli/cmd_diff.c and tui PLAN.json
up_script_test(e2e_diff SCRIPT e2e_diff.sh LABELS e2e)
