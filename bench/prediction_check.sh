#!/bin/bash
# The prediction check: calibrate this machine, plan a small model for 2
# ranks, run 20 steps, compare. Prints the step-time error of each run and
# their median.
# usage: bench/prediction_check.sh [path/to/ultraplan] [data file]
#   REPEAT=N     runs of 20 steps against the one calibration (default 3)
#   KEEP=DIR     keep cpu.json, plan.json and run*.json in DIR
#   PRIORITY=1   raise this script's own session group (autogroup nice -10, root
#                only) so that a neighbour's build or fuzzer in another session
#                cannot take one of the two cores the ranks run on; the figure
#                then describes the machine, not the neighbour
set -eu
U=${1:-./build/ultraplan}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
# with more than one thread a rank, spinning OpenMP threads would take the cores OpenBLAS needs
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}
if [ "${PRIORITY:-0}" = 1 ]; then
    echo -10 2>/dev/null > /proc/self/autogroup && echo "priority: $(cat /proc/self/autogroup)" \
        || echo "priority: unchanged (needs root and autogroup)"
fi
if [ -n "${KEEP:-}" ]; then
    D=$KEEP
    mkdir -p "$D"
else
    D=$(mktemp -d)
    trap 'rm -rf "$D"' EXIT
fi
DATA=${2:-}
if [ -z "$DATA" ]; then
    DATA=$D/text.txt
    for i in $(seq 1 20); do cat "$(dirname "$0")"/../executor/*.c; done > "$DATA"
fi
MPI="mpirun --oversubscribe -np 2"
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg), OMP_NUM_THREADS=$OMP_NUM_THREADS"
$MPI "$U" calibrate --backend cpu -o "$D/cpu.json"
"$U" plan --gpus 2 --layers 4 --hidden 256 --heads 4 --seq 128 --vocab 256 --gbs 8 \
    --profile "$D/cpu.json" --precision fp32 -o "$D/plan.json" > /dev/null
errs=()
for r in $(seq 1 "${REPEAT:-3}"); do
    $MPI "$U" run "$D/plan.json" --data "$DATA" --steps 20 -o "$D/run$r.json" > /dev/null
    e=$("$U" compare "$D/plan.json" "$D/run$r.json" --json | tr -d ' \t\n' \
        | sed -n 's/.*"step_time":{[^}]*"error_pct":\([-0-9.e+]*\).*/\1/p')
    printf "run %d: step-time error %+.1f %%\n" "$r" "$e"
    errs+=("$e $r")
done
mid=$(printf '%s\n' "${errs[@]}" | sort -g | sed -n "$(( (${#errs[@]} + 1) / 2 ))p")
printf "median step-time error %+.1f %% (run %s); load after: %s\n" "${mid% *}" "${mid#* }" \
    "$(cut -d' ' -f1-3 /proc/loadavg)"
"$U" compare "$D/plan.json" "$D/run${mid#* }.json"
