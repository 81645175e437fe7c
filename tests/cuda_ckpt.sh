#!/bin/bash
# The CUDA backend's checkpoints: `ultraplan run --backend cuda` for 6 steps
# straight against 3 steps, a checkpoint, and --resume to 6, on one GPU and
# (mpirun, 2 or more GPUs) dp 2 ZeRO-1. The files are the CPU backend's
# format: the CPU backend resumes the CUDA checkpoint and its losses stay
# within bf16 tolerance of the CUDA run's.
#
# Losses: the embedding backward adds with fp32 atomics (kernels/cuda/linear.cu,
# executor/cuda/cutp.cu), so two uninterrupted runs may differ in the last
# bits. The straight run is made twice: if those two agree bit for bit the
# resumed losses must too; otherwise they must agree within 2e-3 nats (what
# a lost optimizer state or data position would exceed by far).
# usage: cuda_ckpt.sh PATH/test_cuda_exec_mpi   (for its --gpus)
set -u
NGPU=$("$1" --gpus 2>/dev/null || echo 0)
[ "${NGPU:-0}" -ge 1 ] || { echo "no GPU visible: skipped"; exit 77; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
D=$(mktemp -d)
trap 'rm -rf "$D"' EXIT
U=$ULTRAPLAN
fail() { echo "FAIL: $*"; exit 1; }
for i in $(seq 0 399); do echo "line $i: the quick brown fox jumps over the lazy dog $((i * 7 % 13)) times."; done > "$D/data.txt"
MODEL="--gpu h100 --precision bf16 --layers 2 --hidden 64 --heads 2 --seq 64 --vocab 256 --gbs 4 --mbs 2 --no-dropout"
losses() { grep -o '"loss":[^,]*' "$1" | tr -d '"loss:\t '; }

# compare A B: B's losses against the last lines of A's, exact or within tol
compare() {
    local a=$1 b=$2 tol=$3 name=$4
    local n; n=$(losses "$b" | wc -l)
    [ "$n" -eq 3 ] || fail "$name: $n resumed steps, expected 3"
    paste <(losses "$a" | tail -n 3) <(losses "$b") |
        awk -v tol="$tol" -v name="$name" '{ d = $1 - $2; if (d < 0) d = -d; if (d > m) m = d;
            if ((tol == 0 && $1 != $2) || d > tol) bad = 1; print "  " name ": " $1 " vs " $2 }
            END { printf "  %s: max |diff| %.3g (tolerance %s)\n", name, m, tol == 0 ? "0, bit-identical" : tol;
                  exit bad }' || fail "$name: resumed losses differ"
}

# case NAME LAUNCH PLANARGS: straight twice, 3 + resume 3, compare
case_run() {
    local name=$1 launch=$2 planargs=$3 dir=$D/$1
    mkdir -p "$dir"
    $U plan $planargs $MODEL -o "$dir/plan.json" > /dev/null || fail "$name: plan"
    local run="$launch $U run $dir/plan.json --backend cuda --data $D/data.txt"
    $run --steps 6 -o "$dir/a.json" > "$dir/log" 2>&1 || { cat "$dir/log"; fail "$name: 6 steps"; }
    $run --steps 6 -o "$dir/a2.json" > "$dir/log" 2>&1 || { cat "$dir/log"; fail "$name: 6 steps again"; }
    $run --steps 3 --checkpoint-dir "$dir/ck" > "$dir/log" 2>&1 || { cat "$dir/log"; fail "$name: 3 steps"; }
    [ -f "$dir/ck/manifest.json" ] && [ -f "$dir/ck/step-000003/rank_00000.ckpt" ] || fail "$name: checkpoint files"
    grep -q '"ultraplan.checkpoint/3"' "$dir/ck/manifest.json" || fail "$name: manifest format"
    cp -r "$dir/ck" "$dir/ck_cpu"
    $run --steps 6 --checkpoint-dir "$dir/ck" --resume -o "$dir/b.json" > "$dir/log" 2>&1 ||
        { cat "$dir/log"; fail "$name: resume"; }
    grep -q "resumed from .* at step 3" "$dir/log" || { cat "$dir/log"; fail "$name: no resume line"; }
    [ -f "$dir/ck/step-000006/rank_00000.ckpt" ] && [ ! -d "$dir/ck/step-000003" ] || fail "$name: step 6 files"
    if cmp -s <(losses "$dir/a.json") <(losses "$dir/a2.json"); then
        echo "$name: two straight runs agree bit for bit"
        compare "$dir/a.json" "$dir/b.json" 0 "$name"
    else
        echo "$name: two straight runs differ (embedding-backward atomics)"
        compare "$dir/a.json" "$dir/a2.json" 2e-3 "$name straight vs straight"
        compare "$dir/a.json" "$dir/b.json" 2e-3 "$name"
    fi
    # the same files on the CPU backend (fp32): within bf16 tolerance of the CUDA losses
    $launch $U run "$dir/plan.json" --data "$D/data.txt" --steps 6 --checkpoint-dir "$dir/ck_cpu" --resume \
        -o "$dir/c.json" > "$dir/log" 2>&1 || { cat "$dir/log"; fail "$name: CPU resume of the CUDA checkpoint"; }
    paste <(losses "$dir/a.json" | tail -n 3) <(losses "$dir/c.json") |
        awk '{ d = $1 - $2; if (d < 0) d = -d; t = 0.03 + 0.01 * ($1 < 0 ? -$1 : $1);
               print "  cpu resume: cuda " $1 " cpu " $2; if (d > t) bad = 1 } END { exit bad }' ||
        fail "$name: the CPU backend's losses from the CUDA checkpoint are off"
    echo "$name: ok"
}

case_run gpu1 "" "--gpus 1 --dp 1 --tp 1 --pp 1"
if [ "$NGPU" -ge 2 ] && command -v mpirun > /dev/null; then
    case_run dp2_zero1 "mpirun --oversubscribe -np 2" "--gpus 2 --dp 2 --tp 1 --pp 1 --zero 1"
else
    echo "dp2_zero1: skipped ($NGPU GPU(s) or no mpirun)"
fi
