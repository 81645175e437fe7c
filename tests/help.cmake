# --help of every command, contradicting and useless flags
up_script_test(e2e_help SCRIPT e2e_help.sh LABELS e2e)
