#!/bin/bash
# The prediction check: calibrate this machine, plan a small model for 2
# ranks, run 20 steps, compare. Prints the step-time error.
# usage: bench/prediction_check.sh [path/to/ultraplan] [data file]
set -eu
U=${1:-./build/ultraplan}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
D=$(mktemp -d)
trap 'rm -rf "$D"' EXIT
DATA=${2:-}
if [ -z "$DATA" ]; then
    DATA=$D/text.txt
    for i in $(seq 1 20); do cat "$(dirname "$0")"/../executor/*.c; done > "$DATA"
fi
MPI="mpirun --oversubscribe -np 2"
$MPI "$U" calibrate --backend cpu -o "$D/cpu.json"
"$U" plan --gpus 2 --layers 4 --hidden 256 --heads 4 --seq 128 --vocab 256 --gbs 8 \
    --profile "$D/cpu.json" --precision fp32 -o "$D/plan.json" > /dev/null
$MPI "$U" run "$D/plan.json" --data "$DATA" --steps 20 -o "$D/run.json" | tail -n 3
"$U" compare "$D/plan.json" "$D/run.json"
"$U" compare "$D/plan.json" "$D/run.json" --json | grep -A4 '"step_time"'
