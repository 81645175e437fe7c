# plan and sweep name the fixed knob at fault (issue 17 item 14); sweep's help
# says each flag once and its rows say when shape flags changed them (item 17).
up_script_test(e2e_plan_reasons SCRIPT e2e_plan_reasons.sh LABELS e2e)
