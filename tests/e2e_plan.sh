#!/bin/bash
# e2e_plan.sh — plan and export from the command line: the README's first
# command (its header's default-batch rule), plan files that export turns into Megatron arguments and a Slurm
# script, predict agreeing with plan, and clear one-line errors for bad input.
set -u
B=${ULTRAPLAN:?set ULTRAPLAN to the ultraplan binary}
SRC=${SRC:-$(cd "$(dirname "$0")/.." && pwd)}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

# expect_error NAME ARGS...: non-zero exit, exactly one line on stderr, nothing on stdout
expect_error() {
    local name=$1; shift
    "$B" "$@" >"$T/out" 2>"$T/err"
    local rc=$?
    [ $rc -ne 0 ] || fail "$name: exit 0"
    [ "$(wc -l <"$T/err")" -eq 1 ] || fail "$name: stderr is not one line: $(cat "$T/err")"
    [ ! -s "$T/out" ] || fail "$name: wrote to stdout"
    echo "ok: $name -> $(cat "$T/err")"
}

# the README's first command: a ranked table (its speed is bench/bench_plan's figure, not a
# timed assertion here: a loaded 2-core CI machine under ASan takes over a second)
start=$(date +%s%N)
"$B" plan --gpus 512 --params 175B >"$T/table" 2>"$T/err" || fail "plan 175B/512 exit $?"
echo "info: plan 175B/512 took $(( ($(date +%s%N) - start) / 1000000 )) ms"
grep -q "bottleneck" "$T/table" || fail "no table header"
[ "$(grep -cE '^ +[0-9]+ +[0-9]+ +[0-9]+ ' "$T/table")" -eq 10 ] || fail "table does not have 10 rows"
[ ! -s "$T/err" ] || fail "plan wrote to stderr: $(cat "$T/err")"
# its first line says the default batch and the rule that gave it (scenario.h: 3.2M tokens /
# 2048 = 1562.5 sequences -> 2^11); a given --gbs gets no rule; 3072 GPUs round to 3 x 2^k
head -1 "$T/table" | grep -qF "global batch 2048 x 2048 = 4.19M tokens (default: the larger of GPT-3's 3.2M tokens at 175B params and 1024 tokens per GPU, as 2^k sequences)" ||
    fail "plan header lacks the default batch rule: $(head -1 "$T/table")"
"$B" plan --gpus 512 --params 175B --gbs 1536 --top 1 | head -1 | grep -q "global batch 1536 x 2048 = 3.15M tokens; " ||
    fail "--gbs 1536: header not as given"
"$B" plan --gpus 3072 --model megatron-1t --top 1 | head -1 | grep -qF "global batch 1536 x 2048 = 3.15M tokens (default: the larger of GPT-3's 3.2M tokens at 175B params and 1024 tokens per GPU, as 3 x 2^k sequences)" ||
    fail "megatron-1t on 3072: default batch not 3 x 512"
# plan --json carries the same rule (default_batch: the batch, the rule in words and its numbers:
# 175B is GPT-3's 175B row, 3.2M tokens / 2048 = 1562.5 sequences above 512 x 1024 / 2048 = 256,
# nearest 2^k is 2048); with --gbs given there is no rule and no default_batch
"$B" plan --gpus 512 --params 175B --top 1 --json >"$T/db.json" || fail "plan --json (default batch)"
python3 - "$T/db.json" <<'PY' || fail "plan --json: default_batch missing or wrong"
import json, sys
d = json.load(open(sys.argv[1]))["default_batch"]
assert d["gbs"] == 2048, d
assert d["rule"] == "the larger of GPT-3's 3.2M tokens at 175B params and 1024 tokens per GPU, as 2^k sequences", d
assert (d["model_tokens"], d["row_params"], d["gpu_seqs"], d["unit"]) == (3.2e6, 175e9, 256, 1), d
PY
"$B" plan --gpus 512 --params 175B --gbs 1536 --top 1 --json |
    python3 -c 'import json, sys; assert "default_batch" not in json.load(sys.stdin)' || fail "--gbs given: default_batch in plan --json"

# -o plan.json, then export
"$B" plan --gpus 512 --params 175B --top 3 -o "$T/plan.json" >/dev/null || fail "plan -o"
grep -q '"format":[[:space:]]*"ultraplan.plan/1"' "$T/plan.json" || fail "plan file format"
grep -q '"ranked"' "$T/plan.json" || fail "plan file lacks ranked"
"$B" export "$T/plan.json" --format megatron >"$T/mega" || fail "export megatron"
for f in --tensor-model-parallel-size --pipeline-model-parallel-size --micro-batch-size "--global-batch-size 2048" \
         "--num-layers 96" "--hidden-size 12288" "--num-attention-heads 96" "--attention-backend flash"; do
    grep -q -- "$f" "$T/mega" || fail "megatron export lacks $f"
done
# every argument line but the last continues; comments only on top
awk '/^#/ { if (args) bad = 1; next } { args++; last = $0; if (!/ \\$/) nc++ } END { exit !(nc == 1 && last !~ / \\$/ && !bad) }' \
    "$T/mega" || fail "megatron export is not one continued command"
"$B" export "$T/plan.json" --format slurm --data "$T/data.bin" -o "$T/job.sbatch" || fail "export slurm"
grep -q '^#SBATCH --nodes=64$' "$T/job.sbatch" || fail "slurm nodes"
grep -q '^srun .*"$UP" run "$PLAN" --data "$DATA"' "$T/job.sbatch" || fail "slurm srun line"
bash -n "$T/job.sbatch" || fail "slurm script is not valid bash"

# predict with the plan's layout prints the plan's numbers (no recomputation so predict can express it)
"$B" plan --gpus 64 --model gpt3-13b --recompute none --top 1 --json >"$T/p.json" || fail "plan --json"
if command -v python3 >/dev/null; then
    args=$(python3 -c '
import json,sys
j=json.load(open(sys.argv[1])); l=j["layout"]
a=["--tp",l["tp"],"--pp",l["pp"],"--vp",l["vp"],"--cp",l["cp"],"--dp",l["dp"],"--mbs",l["mbs"],"--gbs",l["gbs"],
   "--stage-layers",",".join(map(str,l["stage_layers"]))]
o=l["optimizer"]; a+= ["--dist-opt"] if o=="distopt" else ["--zero",o[-1]]
a+= ["--sp"] if l["sp"] else ["--no-sp"]
print(" ".join(map(str,a)))' "$T/p.json")
    "$B" predict --gpus 64 --model gpt3-13b $args --json >"$T/pred.json" || fail "predict with the plan layout ($args)"
    python3 -c '
import json,sys
p=json.load(open(sys.argv[1])); q=json.load(open(sys.argv[2]))
a=p["prediction"]["time"]["step_s"]; b=q["time"]["step_s"]
sys.exit(0 if abs(a-b) <= 1e-9*b else 1)' "$T/p.json" "$T/pred.json" || fail "predict disagrees with plan"
fi

# infeasible: why, and the smallest GPU count
"$B" plan --gpus 8 --params 175B >"$T/out" 2>"$T/err" && fail "175B on 8 GPUs exited 0"
grep -q "does not fit" "$T/err" || fail "infeasible reason: $(cat "$T/err")"
grep -q "smallest GPU count" "$T/err" || fail "no minimum GPU count: $(cat "$T/err")"

# bad flags and files
expect_error "unknown flag" plan --gpus 8 --params 7B --frobnicate
expect_error "--top 0" plan --gpus 8 --params 7B --top 0
# a GPU that refuses the precision or fp8 recipe is named before any search, not "no layout divides"
expect_error "planner: --fp8-recipe mxfp8 needs compute capability 10.0" plan --gpus 8 --params 7B --gpu h100-sxm --precision fp8 --fp8-recipe mxfp8
expect_error "--top junk" plan --gpus 8 --params 7B --top many
expect_error "--pick 0" plan --gpus 8 --params 7B --pick 0
expect_error "--pick past --top" plan --gpus 8 --params 7B --top 3 --pick 4
expect_error "--pick past the layouts" plan --gpus 1 --layers 2 --hidden 64 --heads 2 --seq 64 --vocab 64 --gbs 1 \
    --tp 1 --pp 1 --mbs 1 --zero 0 --recompute none --precision bf16 --top 5 --pick 3
# a plan file written before the rope, MoE, overlap and split knobs existed (by the
# binary of 2149dca) still loads: every field added since is optional
"$B" export "$SRC/tests/data/plan-2149dca.json" --format megatron >"$T/old.mega" 2>"$T/err" &&
    grep -q -- "--tensor-model-parallel-size" "$T/old.mega" && echo "ok: a plan file of 2149dca loads" ||
    fail "plan file of 2149dca: $(cat "$T/err")"
# --pick K writes the K-th row of the ranked list as the plan: its layout is ranked[K-1]'s
TINY="--gpus 2 --layers 4 --hidden 256 --heads 4 --seq 128 --vocab 256 --gbs 8 --gpu a100-80g --top 6"
"$B" plan $TINY --json >"$T/all.json" || fail "plan --json (tiny)"
for k in 2 5; do
    "$B" plan $TINY --pick $k -o "$T/pick$k.json" >"$T/pick.out" || fail "plan --pick $k"
    grep -q "wrote plan #$k to" "$T/pick.out" || fail "--pick $k: no 'wrote plan #$k' line"
    # the plan's own layout block is its first "layout": {...} object; compare to ranked[k-1]'s
    want=$(awk -v k=$k '/"rank":/ { n++ } n == k && /"layout":/ { on = 1 } on { print } on && /^\t\t\t}/ { exit }' "$T/all.json" \
           | grep -E '"(tp|pp|dp|cp|vp|mbs|optimizer)":' | tr -d ' \t,')
    got=$(awk '/"layout":/ { on = 1 } on { print } on && /^\t}/ { exit }' "$T/pick$k.json" \
           | grep -E '"(tp|pp|dp|cp|vp|mbs|optimizer)":' | tr -d ' \t,')
    [ -n "$want" ] && [ "$want" = "$got" ] || fail "--pick $k: plan layout [$got] is not ranked #$k [$want]"
done
expect_error "missing --gpus" plan --params 7B
expect_error "stray argument" plan --gpus 8 --params 7B extra
expect_error "export missing file" export "$T/nope.json" --format megatron
echo '{"format": "ultraplan.plan/1", "model": 3' >"$T/corrupt.json"
expect_error "export corrupt file" export "$T/corrupt.json" --format megatron
echo '{"format": "something/1"}' >"$T/wrong.json"
expect_error "export wrong format" export "$T/wrong.json" --format slurm --data x.bin
expect_error "export bad --format" export "$T/plan.json" --format deepspeed
expect_error "export no --format" export "$T/plan.json"
# fp8 plans: MFU against the fp8 peak in the table, the bf16-peak figure in a note and in the JSON
"$B" plan --gpus 8 --params 1.3B --gpu h100-sxm --precision fp8 --top 2 >"$T/f8.txt" || fail "fp8 plan"
grep -q "^fp8 rows: .*against the bf16 peak (989): #1 " "$T/f8.txt" || fail "fp8 plan has no bf16-peak note"
"$B" plan --gpus 8 --params 1.3B --gpu h100-sxm --top 2 >"$T/b16.txt" || fail "bf16 plan"
grep -q "fp8 rows" "$T/b16.txt" && fail "bf16 plan prints the fp8 note"
"$B" plan --gpus 8 --params 1.3B --gpu h100-sxm --precision fp8 --top 2 --json >"$T/f8.json" || fail "fp8 plan --json"
python3 -c '
import json,sys
j=json.load(open(sys.argv[1])); r=1979/989
t=j["prediction"]["throughput"]
assert abs(t["mfu_bf16_peak"]/t["mfu"]-r) < 1e-9, t
for x in j["ranked"]:
    assert abs(x["mfu_bf16_peak"]/x["mfu"]-r) < 1e-9, x' "$T/f8.json" || fail "fp8 plan json mfu_bf16_peak"
expect_error "export no file" export --format megatron
expect_error "dump-lp bad path" plan --gpus 8 --params 7B --dump-lp /nonexistent-dir/x.lp
# --target torchtitan: what torchtitan runs as exported, under its stack unless --stack is given; every ranked plan
# exports (the default target's best at 128K recomputes 14 of the 32 layers, which torchtitan cannot express)
"$B" plan --model llama3.1-8b --gpus 8 --seq 131072 --gbs 8 --target torchtitan --top 4 -o "$T/tt.json" >"$T/tt.txt" ||
    fail "plan --target torchtitan"
grep -q '"stack":[[:space:]]*"torchtitan"' "$T/tt.json" || fail "--target torchtitan: not under the torchtitan stack"
for k in 1 2 3 4; do
    "$B" plan --model llama3.1-8b --gpus 8 --seq 131072 --gbs 8 --target torchtitan --top 4 --pick $k -o "$T/tt$k.json" \
        >/dev/null 2>&1 && "$B" export "$T/tt$k.json" --format torchtitan >/dev/null ||
        fail "--target torchtitan plan $k does not export"
done
"$B" plan --model llama3.1-8b --gpus 8 --seq 131072 --gbs 8 --stack torchtitan --top 1 -o "$T/mg.json" >/dev/null 2>&1
"$B" export "$T/mg.json" --format torchtitan >/dev/null 2>&1 && fail "the megatron target's plan exports to torchtitan (the case is moot)"
expect_error "--target torchtitan: the model is not the shape of a torchtitan Llama 3 flavor" plan --model gpt3-175b --gpus 512 --target torchtitan
# DualPipe is priced by predict but not searched: a clear refusal, not "does not fit"
expect_error "--pp-schedule dualpipe is not searched" plan --gpus 64 --params 7B --pp-schedule dualpipe
grep -q "planner searches 1F1B schedules" "$T/err" || fail "dualpipe refusal does not say why: $(cat "$T/err")"
# and predict prices it, saying so, while warning that Megatron-LM cannot run it
"$B" predict --model llama3.1-70b --gpus 64 --tp 4 --pp 8 --gbs 256 --pp-schedule dualpipe >"$T/dp" 2>"$T/err" ||
    fail "predict --pp-schedule dualpipe exit $?"
grep -q "schedule DualPipe: rank r holds stages r and 7-r" "$T/dp" || fail "predict does not name the DualPipe schedule"
grep -q "no DualPipe schedule" "$T/err" || fail "predict does not warn that Megatron-LM has no DualPipe"

[ $fails -eq 0 ] && echo "e2e_plan: all passed" || echo "e2e_plan: $fails failed"
exit $((fails > 0))
