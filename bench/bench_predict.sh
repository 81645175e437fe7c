#!/usr/bin/env bash
# bench_predict.sh — wall time of one `ultraplan predict` (process start to
# exit) for GPT-3 175B on 1024 A100s, averaged over N runs.
#   bench/bench_predict.sh [build/ultraplan] [N]
U=${1:-build/ultraplan}
N=${2:-200}
args=(predict --model gpt3-175b --gpu a100-80g --gpus 1024 --tp 8 --pp 8 --mbs 1 --gbs 1536 --json)
"$U" "${args[@]}" >/dev/null || exit 1
t0=$(date +%s.%N)
for ((i = 0; i < N; i++)); do "$U" "${args[@]}" >/dev/null; done
t1=$(date +%s.%N)
python3 -c "print(f'predict --json, 175B on 1024 A100: {($t1-$t0)/$N*1000:.2f} ms per run (mean of $N, process start to exit)')"
