#!/bin/bash
# mpi_plans.sh — the plan the planner recommends is a plan that runs: for small
# models on 2, 4 and 8 CPU ranks, every one of the planner's top layouts
# (plan --pick K -o) trains for two steps under `mpirun ultraplan run`; none
# may be refused. The cases include ones where ZeRO-2/3 win by themselves and
# ones with context parallel forced (the planner searches cp only from 8K
# tokens), alone and with tp, pp and dp, and a model with MLA and MTP.
# usage: mpi_plans.sh PATH/ultraplan
set -u
B=$1
# first, without MPI: under --target ultraplan the planner offers nothing
# the executor refuses of an MoE / MLA / MTP model, and says why
TINY="--layers 4 --hidden 256 --heads 4 --vocab 256 --gpu a100-80g --seq 128 --gbs 8 --target ultraplan"
TMTP="$TINY --mlp swiglu --norm rmsnorm --pos rope --untied --mtp-layers 1"
refused() {   # refused WHAT PATTERN PLAN-ARGS...: plan exits non-zero with PATTERN in its message
    local what=$1 pat=$2; shift 2
    local out
    if out=$("$B" plan "$@" 2>&1); then echo "FAIL: $what: planned"; exit 1; fi
    echo "$out" | grep -q -- "$pat" || { echo "FAIL: $what: $out"; exit 1; }
    echo "ok: $what refused under --target ultraplan"
}
refused "MTP with cp 2" "multi-token prediction needs layout.cp 1" --gpus 4 $TMTP --cp 2
refused "MoE with biases" "mixture-of-experts layers have no biases" --gpus 4 $TINY --experts 4 --topk 2 --bias
refused "MoE with tp 2 and no SP" "needs sequence parallel (layout.sp)" --gpus 4 $TMTP --experts 4 --topk 2 --tp 2 --no-sp
refused "dropout" "has no dropout.*--no-dropout" --gpus 2 $TINY --dropout
refused "MLA with LayerNorm" "multi-head latent attention needs an RMSNorm, RoPE model" --gpus 2 $TINY --attn mla \
    --q-lora-rank 64 --kv-lora-rank 32 --qk-nope-dim 32 --qk-rope-dim 16 --v-head-dim 32
# searched, not fixed: from 8K tokens the search tries cp, but not with MTP
cps=$("$B" plan --gpus 8 --top 30 ${TMTP/--seq 128/--seq 8192} | awk '/^ *# +tp / { for (i = 1; i <= NF; i++) c[$i] = i; next }
    ("cp" in c) && $1 ~ /^[0-9]+$/ { print $(c["cp"]) }' | sort -u | tr '\n' ' ')
[ "$cps" = "1 " ] || { echo "FAIL: MTP at 8K tokens under --target ultraplan: cp of the top 30: $cps"; exit 1; }
echo "ok: MTP at 8K tokens: the top 30 under --target ultraplan all have cp 1"
command -v mpirun >/dev/null || { echo "mpirun not found: skipped"; exit 77; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
export OMPI_MCA_rmaps_base_oversubscribe=1
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
# any file is byte tokens (vocab 256)
for i in $(seq 0 2999); do echo "line $i: the quick brown fox jumps over the lazy dog $((i * 7 % 13)) times."; done > "$T/data.txt"
fails=0 ran=0
GPT="--layers 4 --hidden 256 --heads 4 --vocab 256 --gpu a100-80g"
LLAMA="--layers 4 --hidden 256 --heads 4 --kv-heads 2 --vocab 256 --mlp swiglu --norm rmsnorm --pos rope --untied --gpu a100-80g"
# case NAME GPUS TOP PLAN-ARGS...: run each of the top TOP layouts
case_() {
    local name=$1 gpus=$2 top=$3; shift 3
    if ! "$B" plan --gpus "$gpus" --top "$top" "$@" > "$T/table" 2> "$T/err"; then
        echo "FAIL: $name: plan: $(cat "$T/err")"; fails=$((fails + 1)); return
    fi
    local n k
    n=$(grep -cE '^ +[0-9]+ +[0-9]+ +[0-9]+ ' "$T/table")
    [ "$n" -ge 1 ] || { echo "FAIL: $name: no layouts"; fails=$((fails + 1)); return; }
    for k in $(seq 1 "$n"); do
        local row
        # the row's layout by the header's column names (MoE tables have ep and etp)
        row=$(awk -v k="$k" '/^ *# +tp / { for (i = 1; i <= NF; i++) col[$i] = i; next }
            $1 == k && ("tp" in col) { n = split("tp pp dp cp ep etp vp mbs optim", w, " ")
                for (j = 1; j <= n; j++) if (w[j] in col) printf "%s%s %s", (j > 1 ? " " : ""), w[j], $(col[w[j]])
                exit }' "$T/table")
        "$B" plan --gpus "$gpus" --top "$top" --pick "$k" "$@" -o "$T/plan.json" > /dev/null 2>&1 ||
            { echo "FAIL: $name #$k: plan --pick"; fails=$((fails + 1)); continue; }
        ran=$((ran + 1))
        if timeout 300 mpirun --oversubscribe -np "$gpus" "$B" run "$T/plan.json" --data "$T/data.txt" --steps 2 \
                -o "$T/run.json" > "$T/out" 2>&1 && grep -q '"format"' "$T/run.json"; then
            echo "ok: $name #$k ($row)"
        else
            echo "FAIL: $name #$k ($row):"; grep -vE '^(-+|  .*|)$' "$T/out" | head -n 5; fails=$((fails + 1))
        fi
        rm -f "$T/run.json"
    done
}
case_ "gpt 2 ranks (ZeRO-3 wins)" 2 6 $GPT --seq 128 --gbs 8
case_ "gpt 4 ranks, cp 2 forced" 4 3 $GPT --seq 128 --gbs 8 --cp 2
case_ "gpt 8 ranks" 8 3 $GPT --seq 128 --gbs 8
case_ "gpt 4 ranks, pp 2 x cp 2 forced" 4 2 $GPT --seq 128 --gbs 8 --pp 2 --cp 2
case_ "gpt 8 ranks, cp 4 forced" 8 2 $GPT --seq 128 --gbs 8 --cp 4
case_ "llama 4 ranks, tp 2 x cp 2 forced" 4 2 $LLAMA --seq 128 --gbs 8 --tp 2 --cp 2
case_ "llama 4 ranks, ZeRO-3 forced" 4 2 $LLAMA --seq 128 --gbs 8 --zero 3
# DeepSeek-shaped: MLA, one MTP module (ZeRO-3 wins, as for the dense models)
DS="$LLAMA --kv-heads 4 --attn mla --q-lora-rank 64 --kv-lora-rank 32 --qk-nope-dim 32 --qk-rope-dim 16 --v-head-dim 32 --mtp-layers 1"
case_ "mla + mtp 4 ranks" 4 4 $DS --seq 128 --gbs 8
# mixture of experts: a tiny Mixtral-like model (8 experts, top 2), and a
# tiny DeepSeek-like one (MLA, layer 0 dense, a shared expert, one MTP
# module); ep forced once so expert parallel runs too
MIX="$LLAMA --experts 8 --topk 2 --moe-ffn 128"
DSM="$DS --experts 8 --topk 2 --moe-ffn 128 --shared-ffn 128 --moe-first-dense 1"
case_ "mixtral-like 2 ranks" 2 4 $MIX --seq 128 --gbs 8
case_ "mixtral-like 4 ranks, ep 2 forced" 4 3 $MIX --seq 128 --gbs 8 --ep 2
case_ "mixtral-like 8 ranks" 8 4 $MIX --seq 128 --gbs 8
case_ "deepseek-like 2 ranks" 2 3 $DSM --seq 128 --gbs 8
case_ "deepseek-like 4 ranks, --target ultraplan" 4 3 $DSM --seq 128 --gbs 8 --target ultraplan
case_ "deepseek-like 8 ranks" 8 4 $DSM --seq 128 --gbs 8
echo "$ran plan(s) run, $fails failed"
[ $fails -eq 0 ] && [ $ran -gt 0 ]
