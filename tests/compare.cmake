# compare: plan.json against hand-made run.json files (a stage proxy's and a
# whole run's), text and --json; needs neither the executor nor a GPU.
up_script_test(e2e_compare SCRIPT e2e_compare.sh LABELS e2e)
