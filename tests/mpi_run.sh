#!/bin/bash
# ultraplan run end to end: resume gives bit-identical losses, compare reads
# the run, and bad input (world size, data, plan file) fails cleanly.
set -u
command -v mpirun >/dev/null || { echo "mpirun not found: skipped"; exit 77; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
D=$(mktemp -d)
trap 'rm -rf "$D"' EXIT
U=$ULTRAPLAN
MPI="mpirun --oversubscribe -np"
fail() { echo "FAIL: $*"; exit 1; }
for i in $(seq 1 40); do cat "$SRC/executor/exec.c"; done > "$D/text.txt"
$U plan --gpus 2 --dp 2 --tp 1 --pp 1 --zero 1 --precision fp32 --gpu h100 --layers 2 --hidden 64 \
    --heads 4 --seq 32 --vocab 256 --gbs 4 --mbs 2 --no-dropout -o "$D/plan.json" > /dev/null || fail "plan"
losses() { grep -o '"loss":[^,]*' "$1" | tr -d '"loss:\t '; }

# resume: 6 steps straight against 3 + 3 with a checkpoint in between
$MPI 2 $U run "$D/plan.json" --data "$D/text.txt" --steps 6 -o "$D/a.json" > /dev/null || fail "run 6 steps"
$MPI 2 $U run "$D/plan.json" --data "$D/text.txt" --steps 3 --checkpoint-dir "$D/ck" > /dev/null || fail "run 3 steps"
[ -f "$D/ck/manifest.json" ] && [ -f "$D/ck/step-000003/rank_00001.ckpt" ] || fail "checkpoint files"
$MPI 2 $U run "$D/plan.json" --data "$D/text.txt" --steps 6 --checkpoint-dir "$D/ck" --resume -o "$D/b.json" > /dev/null || fail "resume"
diff <(losses "$D/a.json" | tail -n 3) <(losses "$D/b.json") || fail "resumed losses differ"
echo "resume: bit-identical losses"

# ZeRO-3 resume: the file holds the full weights gathered from the shards, a
# load keeps each rank's slices (m and v stay in the shard's own order); two
# micro-batches so the gradient buckets accumulate
$U plan --gpus 2 --dp 2 --tp 1 --pp 1 --zero 3 --precision fp32 --gpu h100 --layers 2 --hidden 64 \
    --heads 4 --seq 32 --vocab 256 --gbs 8 --mbs 2 --no-dropout -o "$D/plan3.json" > /dev/null || fail "plan zero3"
grep -q '"optimizer":[[:space:]]*"zero3"' "$D/plan3.json" || fail "plan zero3: not ZeRO-3"
$MPI 2 $U run "$D/plan3.json" --data "$D/text.txt" --steps 6 -o "$D/a3.json" > /dev/null || fail "zero3: run 6 steps"
$MPI 2 $U run "$D/plan3.json" --data "$D/text.txt" --steps 3 --checkpoint-dir "$D/ck3" > /dev/null || fail "zero3: run 3 steps"
$MPI 2 $U run "$D/plan3.json" --data "$D/text.txt" --steps 6 --checkpoint-dir "$D/ck3" --resume -o "$D/b3.json" \
    > /dev/null || fail "zero3: resume"
diff <(losses "$D/a3.json" | tail -n 3) <(losses "$D/b3.json") || fail "zero3: resumed losses differ"
echo "resume under ZeRO-3: bit-identical losses"
# and with routed experts: their shards (over edp 2) gathered into the file and scattered back
$U plan --gpus 4 --dp 4 --tp 1 --pp 1 --ep 2 --zero 3 --precision fp32 --gpu h100 --layers 2 --hidden 64 \
    --heads 4 --seq 32 --vocab 256 --gbs 8 --mbs 2 --no-dropout --mlp swiglu --norm rmsnorm --pos rope \
    --experts 4 --topk 2 --moe-ffn 64 -o "$D/planx.json" > /dev/null || fail "plan moe zero3"
$MPI 4 $U run "$D/planx.json" --data "$D/text.txt" --steps 4 -o "$D/ax.json" > /dev/null || fail "moe zero3: run 4 steps"
$MPI 4 $U run "$D/planx.json" --data "$D/text.txt" --steps 2 --checkpoint-dir "$D/ckx" > /dev/null || fail "moe zero3: run 2"
$MPI 4 $U run "$D/planx.json" --data "$D/text.txt" --steps 4 --checkpoint-dir "$D/ckx" --resume -o "$D/bx.json" \
    > /dev/null || fail "moe zero3: resume"
diff <(losses "$D/ax.json" | tail -n 2) <(losses "$D/bx.json") || fail "moe zero3: resumed losses differ"
echo "resume of an MoE under ZeRO-3: bit-identical losses"

# compare
$U compare "$D/plan.json" "$D/a.json" --json > "$D/cmp.json" || fail "compare"
grep -q '"predicted_s"' "$D/cmp.json" && grep -q '"error_pct"' "$D/cmp.json" || fail "compare json"

# clean errors, never a crash
expect_err() {   # expect_err PATTERN CMD...
    local pat=$1; shift
    "$@" > "$D/err" 2>&1; local rc=$?
    [ $rc -ne 0 ] && [ $rc -lt 128 ] || fail "$* returned $rc"
    grep -q "$pat" "$D/err" || { cat "$D/err"; fail "$* did not say '$pat'"; }
}
expect_err "needs dp 2" $MPI 1 $U run "$D/plan.json" --data "$D/text.txt" --steps 1
expect_err "cannot open" $MPI 2 $U run "$D/plan.json" --data "$D/missing.bin" --steps 1
expect_err "no training data" $U run "$D/plan.json"
echo '{"format": "ultraplan.plan/1", "model": 3}' > "$D/bad.json"
expect_err "bad.json" $U run "$D/bad.json" --data "$D/text.txt"
expect_err "no checkpoint" $MPI 2 $U run "$D/plan.json" --data "$D/text.txt" --checkpoint-dir "$D/none" --resume
# a plan costed with Llama 3's all-gather context parallelism is refused: the
# executors run only the ring, and the plan that is run must be the plan made
$U plan --gpus 2 --dp 1 --cp 2 --tp 1 --pp 1 --precision fp32 --gpu h100 --layers 2 --hidden 64 \
    --heads 4 --seq 32 --vocab 256 --gbs 4 --mbs 2 --no-dropout --cp-comm all-gather -o "$D/plancp.json" \
    > /dev/null || fail "plan cp all-gather"
grep -q '"cp_comm":[[:space:]]*"all-gather"' "$D/plancp.json" || fail "plan cp all-gather: cp_comm not kept"
expect_err "cp_comm all-gather" $MPI 2 $U run "$D/plancp.json" --data "$D/text.txt" --steps 1
# a Megatron layout string with chunks of unequal layers is not what the
# executor runs (it splits each stage evenly): refused, not run as another plan
$U plan --gpus 2 --dp 1 --tp 1 --pp 2 --precision fp32 --gpu h100 --layers 8 --hidden 64 --heads 4 --seq 32 \
    --vocab 256 --gbs 4 --mbs 1 --no-dropout --pipeline-layout "Ettt|t|t|tttL" -o "$D/planppl.json" \
    > /dev/null || fail "plan --pipeline-layout"
expect_err "gives stage 0 chunk 0 3 layers" $MPI 2 $U run "$D/planppl.json" --data "$D/text.txt" --steps 1
echo "errors: clean"

# run.json: status "done"; one step is its own summary (was step_s 0: the
# only step was dropped as warm-up)
$U plan --gpus 1 --dp 1 --tp 1 --pp 1 --precision fp32 --gpu h100 --layers 2 --hidden 64 \
    --heads 4 --seq 32 --vocab 256 --gbs 4 --mbs 2 --no-dropout -o "$D/plan1.json" > /dev/null || fail "plan dp 1"
$U run "$D/plan1.json" --data "$D/text.txt" --steps 1 -o "$D/one.json" > /dev/null || fail "run 1 step"
grep -q '"status":[[:space:]]*"done"' "$D/one.json" || fail "run.json status"
grep -q '"steps_averaged":[[:space:]]*1,' "$D/one.json" || fail "one step: steps_averaged"
grep -Eq '"step_s":[[:space:]]*0,' "$D/one.json" && fail "one step: a summary step_s of 0"
echo "run.json: status done, one step summarised"

# the executor module is found beside the binary or in ULTRAPLAN_MODULE_DIR;
# missing, it is named with the loader's reason: exit 1, no crash
mkdir "$D/nomod" "$D/execonly"
ULTRAPLAN_MODULE_DIR="$D/nomod" expect_err "cannot load libultraplan-exec.so: not found in $D/nomod" \
    $U run "$D/plan1.json" --data "$D/text.txt" --steps 1
BUILDDIR=$(dirname "$U")
cp "$BUILDDIR/libultraplan-exec.so" "$D/execonly/"
ULTRAPLAN_MODULE_DIR="$D/execonly" $U run "$D/plan1.json" --data "$D/text.txt" --steps 1 > /dev/null \
    || fail "the CPU backend needs only the executor module"
if [ -e "$BUILDDIR/libultraplan-cuda.so" ]; then
    ULTRAPLAN_MODULE_DIR="$D/execonly" expect_err "cannot load libultraplan-cuda.so: not found in $D/execonly" \
        $U run "$D/plan1.json" --data "$D/text.txt" --steps 1 --backend cuda
else
    expect_err "this build has no CUDA backend" $U run "$D/plan1.json" --data "$D/text.txt" --steps 1 --backend cuda
fi
echo "modules: a missing one is named, a CPU run needs no CUDA module"

# CUDA graphs are a timing knob neither backend captures: the CUDA backend refuses such a plan by
# name (in any build, before looking for the CUDA module), the CPU backend runs it
$U plan --gpus 1 --dp 1 --tp 1 --pp 1 --zero 1 --precision fp32 --gpu h100 --layers 2 --hidden 64 \
    --heads 4 --seq 32 --vocab 256 --gbs 4 --mbs 2 --no-dropout --cuda-graph-impl local -o "$D/plang.json" \
    > /dev/null || fail "plan with CUDA graphs"
expect_err 'layout.cuda_graph_impl is "local".*--cuda-graph-impl none' \
    $U run "$D/plang.json" --data "$D/text.txt" --steps 1 --backend cuda
$U run "$D/plang.json" --data "$D/text.txt" --steps 1 > /dev/null || fail "the CPU backend refused CUDA graphs"
echo "CUDA graphs: the CUDA backend refuses them by name, the CPU backend runs the plan"

# GPT-OSS's layer (sliding window on every other layer, sinks, clamped
# quick-GEGLU) planned and run: the sinks round-trip a checkpoint (resume
# gives bit-identical losses), and the CUDA backend names what it lacks
$U plan --gpus 2 --dp 2 --tp 1 --pp 1 --zero 1 --precision fp32 --gpu h100 --layers 2 --hidden 64 \
    --heads 4 --seq 32 --vocab 256 --gbs 4 --mbs 2 --no-dropout --mlp swiglu --norm rmsnorm --pos rope \
    --window 8 --window-skip-freq 2 --attn-sinks --act-clamp 7 -o "$D/planoss.json" > /dev/null || fail "plan oss"
grep -q '"attn_sinks":[[:space:]]*true' "$D/planoss.json" || fail "plan oss: no sinks in plan.json"
$MPI 2 $U run "$D/planoss.json" --data "$D/text.txt" --steps 6 -o "$D/ao.json" > /dev/null || fail "oss: run 6 steps"
$MPI 2 $U run "$D/planoss.json" --data "$D/text.txt" --steps 3 --checkpoint-dir "$D/cko" > /dev/null || fail "oss: run 3"
$MPI 2 $U run "$D/planoss.json" --data "$D/text.txt" --steps 6 --checkpoint-dir "$D/cko" --resume -o "$D/bo.json" \
    > /dev/null || fail "oss: resume"
diff <(losses "$D/ao.json" | tail -n 3) <(losses "$D/bo.json") || fail "oss: resumed losses differ"
# another window is another model: its checkpoint is refused, naming both
$U plan --gpus 2 --dp 2 --tp 1 --pp 1 --zero 1 --precision fp32 --gpu h100 --layers 2 --hidden 64 \
    --heads 4 --seq 32 --vocab 256 --gbs 4 --mbs 2 --no-dropout --mlp swiglu --norm rmsnorm --pos rope \
    --window 4 --window-skip-freq 2 --attn-sinks --act-clamp 7 -o "$D/planoss4.json" > /dev/null || fail "plan oss 4"
expect_err "win8/2 sinks1 clamp7.*win4/2 sinks1 clamp7" $MPI 2 $U run "$D/planoss4.json" --data "$D/text.txt" \
    --steps 7 --checkpoint-dir "$D/cko" --resume
echo "GPT-OSS's layer: runs, resume bit-identical, another window's checkpoint refused"
