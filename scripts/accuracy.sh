#!/usr/bin/env bash
# accuracy.sh [ULTRAPLAN] — the MAPE of every shipped corpus, one line each,
# with the command that gives it (the figures of docs/accuracy/NOTES.md
# "Figures now" and docs/accuracy/MOE.md). Each file is predicted with the
# profile of its GPU and its own stack column (megatron-lm where it has none);
# the MoE files with --moe-imbalance 1 (their runs are force-balanced).
# Run from anywhere; paths are relative to the source tree.
set -u
here=$(cd "$(dirname "$0")/.." && pwd)
U=${1:-$here/build/ultraplan}
[ -x "$U" ] || { echo "accuracy.sh: $U is not an executable (build ultraplan first)" >&2; exit 2; }
cd "$here" || exit 1
m() {
    local r out mem
    out=$("$U" validate "$@" --summary 2>&1)
    r=$(printf '%s\n' "$out" | grep -m1 -o 'MAPE [0-9.]*%') || r="FAILED"
    printf '%-14s ultraplan validate %s\n' "$r" "$*"
    # files with a measured peak memory (column mem_gib): its MAPE on a line of its own
    mem=$(printf '%s\n' "$out" | grep -m1 '^memory:' | grep -o 'MAPE [0-9.]*%') &&
        printf '%-14s   (peak memory of the same runs)\n' "mem $mem"
}
m validation/vtrain/single_node.csv
m validation/vtrain/multi_node.csv
for f in h100:h100-sxm b200:b200 gb200:gb200 a100:a100-80g selene2021:a100-80g korthikanti_a100:a100-80g \
         longctx_h100:h100-sxm longctx_b200:b200 mosaic_a100:a100-80g mosaic_h100:h100-sxm megatron_readme_h100:h100-sxm \
         mbridge_gb300:gb300 mbridge_gb200:gb200 mbridge_h100:h100-sxm; do
    m "docs/accuracy/${f%%:*}_published.csv" --gpu "${f#*:}"
done
# torchtitan's Dec-2024 benchmark and its June-2025 async TP one (held out): their H100s' peak is not
# known, so they are predicted with both ends (docs/accuracy/NOTES.md steps 34, 40); Trainy's H200 runs
for f in torchtitan_h100 torchtitan_asynctp_h100; do
    for p in grand-teton-h100 grand-teton-h100-nvlpeak; do
        m "docs/accuracy/${f}_published.csv" --profile "docs/accuracy/profiles/$p.json"
    done
done
m docs/accuracy/torchtitan_h200_published.csv --gpu h200
# Llama 3 405B's Table 4 runs on Meta's H100s (stack llama3-meta, its column)
m docs/accuracy/llama3_h100_published.csv --gpu h100-sxm
for g in h100:h100-sxm b200:b200 gb200:gb200 b300:b300 gb300:gb300 h800:h100-sxm; do
    m "docs/accuracy/moe_${g%%:*}_published.csv" --gpu "${g#*:}" --moe-imbalance 1
done
