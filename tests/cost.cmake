# what a run costs: --price, plan --rank-by, budgets
up_script_test(e2e_cost SCRIPT e2e_cost.sh LABELS e2e)
