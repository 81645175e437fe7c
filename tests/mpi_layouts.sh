#!/bin/bash
# Every layout reproduces the single-rank losses of the same model and data
# (and allocates what the cost model predicts): test_executor_mpi under mpirun.
# usage: mpi_layouts.sh PATH/test_executor_mpi
set -u
BIN=$1
command -v mpirun >/dev/null || { echo "mpirun not found: skipped"; exit 77; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
export OMPI_MCA_rmaps_base_oversubscribe=1
DIR=$(mktemp -d)
trap 'rm -rf "$DIR"' EXIT
fails=0
run() {   # run NP MODEL ARGS...
    local np=$1 model=$2; shift 2
    # the cost model counts 4f of SwiGLU activations, the executor keeps 3f (gate|up and the product)
    local tol=0.10; [ "$model" = llama ] && tol=0.15
    if ! mpirun --oversubscribe -np "$np" "$BIN" --model "$model" --dir "$DIR" --acts-tol $tol \
            --ref "$DIR/ref_$model.txt" "$@" > "$DIR/out" 2>&1; then
        echo "FAIL: np $np $model $*"; cat "$DIR/out"; fails=$((fails + 1))
    else
        tail -n 1 "$DIR/out"
    fi
}
for model in gpt llama; do
    "$BIN" --model $model --dir "$DIR" --write "$DIR/ref_$model.txt" \
        --acts-tol $([ $model = llama ] && echo 0.15 || echo 0.10) || { echo "single-rank $model failed"; exit 1; }
done
run 2 gpt --dp 2
run 2 gpt --tp 2
run 2 gpt --tp 2 --sp
run 2 gpt --pp 2
run 4 gpt --pp 4
run 2 gpt --pp 2 --vp 2 --mbs 1
run 2 gpt --pp 2 --stages 1,3 --full 1,2 --sel 0,1
run 2 gpt --dp 2 --zero1
run 2 gpt --dp 2 --no-overlap-grad
run 8 gpt --dp 2 --tp 2 --pp 2 --sp
run 2 llama --tp 2 --sp
run 2 llama --pp 2 --stages 3,1 --full 2,0
run 4 llama --dp 2 --tp 2 --zero1
run 4 llama --pp 2 --vp 2 --tp 2 --mbs 1
# ZeRO-2/3: per-layer buckets reduce-scattered every micro-batch, ZeRO-3 gathers
run 2 gpt --dp 2 --zero2
run 2 gpt --dp 2 --zero3
run 2 gpt --dp 2 --distopt
run 2 llama --dp 2 --zero3 --full 1
run 4 gpt --dp 2 --tp 2 --sp --zero3
run 4 llama --dp 4 --zero2
run 4 llama --dp 2 --tp 2 --zero2
run 8 gpt --dp 4 --tp 2 --zero3 --mbs 1
# context parallel: the load-balanced ring over cp ranks, with every other axis
run 2 gpt --cp 2
run 4 gpt --cp 4
run 2 llama --cp 2
run 4 llama --cp 2 --tp 2 --sp
run 4 gpt --cp 2 --pp 2
run 4 gpt --cp 2 --pp 2 --vp 2 --mbs 1
run 4 gpt --cp 2 --dp 2 --zero1
run 4 gpt --cp 2 --dp 2 --no-overlap-grad
run 8 llama --cp 2 --dp 2 --tp 2
run 4 llama --cp 4 --full 2 --sel 1
# ZeRO-2/3 with context parallel: sharded over dp·cp
run 4 gpt --cp 2 --dp 2 --zero3
run 4 llama --cp 2 --dp 2 --zero2
run 4 gpt --cp 2 --tp 2 --sp --zero3
# mixture of experts (llama-shaped, no biases): 4 experts, top 2; every EP
# layout against the single-rank run of the same variant (all experts on one
# rank), losses and the load-balancing loss; memory against model/memory.c
moe_ref() {   # moe_ref NAME MODEL ARGS...: the single-rank reference of a variant
    local name=$1 model=$2; shift 2
    "$BIN" --model "$model" --moe --dir "$DIR" --write "$DIR/ref_$name.txt" --acts-tol 0.15 "$@" \
        || { echo "single-rank $name failed"; fails=$((fails + 1)); }
}
run_moe() {   # run_moe NAME NP MODEL ARGS...
    local name=$1 np=$2 model=$3; shift 3
    if ! mpirun --oversubscribe -np "$np" "$BIN" --model "$model" --moe --dir "$DIR" --acts-tol 0.15 \
            --ref "$DIR/ref_$name.txt" "$@" > "$DIR/out" 2>&1; then
        echo "FAIL: np $np $name $*"; cat "$DIR/out"; fails=$((fails + 1))
    else
        tail -n 1 "$DIR/out"
    fi
}
moe_ref moe llama
moe_ref moe_sh llama --shared 64 --first-dense 1
moe_ref moe_cap llama --capacity 1.0
moe_ref moe_gpt gpt
run_moe moe 2 llama --dp 2 --ep 2
run_moe moe 4 llama --dp 4 --ep 4
run_moe moe 4 llama --dp 4 --ep 2 --etp 2
run_moe moe 2 llama --tp 2 --sp --ep 2 --etp 1
run_moe moe 4 llama --tp 2 --sp --dp 2 --ep 2
run_moe moe 4 llama --tp 2 --sp --dp 2 --ep 2 --etp 1
run_moe moe 4 llama --dp 2 --pp 2 --ep 2
run_moe moe 2 llama --dp 2 --ep 2 --zero1
run_moe moe 4 llama --dp 4 --ep 2 --zero1
run_moe moe 4 llama --dp 4 --ep 2 --distopt
run_moe moe 4 llama --cp 2 --dp 2 --ep 2 --full 2
run_moe moe_sh 2 llama --dp 2 --ep 2 --shared 64 --first-dense 1
run_moe moe_sh 4 llama --tp 2 --sp --dp 2 --ep 2 --shared 64 --first-dense 1
run_moe moe_cap 2 llama --dp 2 --ep 2 --capacity 1.0
run_moe moe_gpt 2 gpt --dp 2 --ep 2
# ZeRO-2/3 with routed experts: the dense part of a layer unit over dp·cp,
# its experts over edp (edp 2 with dp·cp 1 under tp 2 / etp 1; edp 4 over
# tp 2 · dp 2; edp 1 when ep takes every rank); weights, grads and
# optimizer bytes as memory.c's
run_moe moe 2 llama --dp 2 --ep 2 --zero2
run_moe moe 2 llama --dp 2 --zero3 --full 1
run_moe moe 2 llama --tp 2 --sp --ep 1 --etp 1 --zero3
run_moe moe 4 llama --dp 4 --ep 2 --zero3
run_moe moe 4 llama --tp 2 --sp --dp 2 --ep 2 --etp 1 --zero2
run_moe moe 4 llama --tp 2 --sp --dp 2 --etp 1 --zero3
run_moe moe 4 llama --cp 2 --dp 2 --ep 2 --etp 1 --zero3 --full 2
run_moe moe_sh 4 llama --dp 4 --ep 2 --shared 64 --first-dense 1 --zero3
run_moe moe_cap 2 llama --dp 2 --capacity 1.0 --zero3
# multi-head latent attention (llama-shaped, q_lora 32, kv_lora 32, qk 16+8, v 16):
# down-projections replicated, up-projections and output split by heads
run_mla() {   # run_mla NAME NP ARGS...
    local name=$1 np=$2; shift 2
    if ! mpirun --oversubscribe -np "$np" "$BIN" --model llama --dir "$DIR" --acts-tol 0.10 \
            --ref "$DIR/ref_$name.txt" "$@" > "$DIR/out" 2>&1; then
        echo "FAIL: np $np $name $*"; cat "$DIR/out"; fails=$((fails + 1))
    else
        tail -n 1 "$DIR/out"
    fi
}
for q in 32 0; do
    "$BIN" --model llama --mla $q --dir "$DIR" --write "$DIR/ref_mla$q.txt" --acts-tol 0.10 \
        || { echo "single-rank mla $q failed"; fails=$((fails + 1)); }
done
run_mla mla32 2 --mla 32 --tp 2
run_mla mla32 2 --mla 32 --tp 2 --sp
run_mla mla0 2 --mla 0 --tp 2 --sp
run_mla mla32 2 --mla 32 --pp 2
run_mla mla32 2 --mla 32 --dp 2 --zero1
run_mla mla32 2 --mla 32 --cp 2
run_mla mla32 2 --mla 32 --dp 2 --zero3 --full 1
run_mla mla32 4 --mla 32 --pp 2 --vp 2 --tp 2 --sp --mbs 1
run_mla mla32 8 --mla 32 --dp 2 --tp 2 --pp 2 --sp
# multi-token prediction on the last stage (untied: pp > 1 keeps an embedding copy there)
"$BIN" --model llama --mtp 2 --dir "$DIR" --write "$DIR/ref_mtp.txt" --acts-tol 0.10 \
    || { echo "single-rank mtp failed"; fails=$((fails + 1)); }
run_mla mtp 2 --mtp 2 --tp 2 --sp
run_mla mtp 2 --mtp 2 --pp 2
run_mla mtp 2 --mtp 2 --dp 2 --zero1
run_mla mtp 2 --mtp 2 --dp 2 --zero2 --full 1
run_mla mtp 4 --mtp 2 --dp 2 --tp 2 --sp --zero3
# interleaved, the last stage holds 2 micro-batches in flight: model/memory.c
# keeps MTP's activations for each (as Megatron-LM's autograd does), the
# executor runs MTP's backward at once and keeps one set (15 % fewer bytes)
run_mla mtp 4 --mtp 2 --pp 2 --vp 2 --mbs 1 --tp 2 --acts-tol 0.20
# DeepSeek-shaped: MLA, layer 0 dense, then 4 routed experts top 2 and a
# shared expert, one MTP module (an MoE layer, as the last layer is)
DS="--mla 32 --shared 64 --first-dense 1 --mtp 1"
moe_ref ds llama $DS
run_moe ds 2 llama $DS --dp 2 --ep 2
run_moe ds 2 llama $DS --tp 2 --sp --ep 2 --etp 1
run_moe ds 4 llama $DS --tp 2 --sp --dp 2 --ep 2
run_moe ds 4 llama $DS --pp 2 --dp 2 --ep 2 --zero1
run_moe ds 8 llama $DS --tp 2 --sp --pp 2 --dp 2 --ep 2
run_moe ds 4 llama $DS --dp 4 --ep 2 --zero3
run_moe ds 4 llama $DS --tp 2 --sp --dp 2 --ep 2 --zero2 --full 2
run_moe ds 8 llama $DS --tp 2 --sp --dp 4 --ep 4 --etp 1 --zero3
# group-limited routing: 8 experts in 4 groups of 2, a token's top 2 from
# its best group by the sum of its top 2 (plain top-2 would often pick from
# two groups; the groups span ep ranks at ep 4), against its single-rank run
moe_ref moe_grp llama --experts 8 --groups 4,1
run_moe moe_grp 2 llama --experts 8 --groups 4,1 --dp 2 --ep 2
run_moe moe_grp 4 llama --experts 8 --groups 4,1 --dp 4 --ep 4
# GPT-OSS's layer: a 5-key window on layers 0 and 2, sinks on every layer
# (split with the heads over tp), the clamped quick-GEGLU (clamp 0.5, so it
# bites), against its single-rank run
OSS="--window 4 --sinks --clamp 0.5"
"$BIN" --model llama $OSS --dir "$DIR" --write "$DIR/ref_oss.txt" --acts-tol 0.15 \
    || { echo "single-rank oss failed"; fails=$((fails + 1)); }
run_mla oss 2 $OSS --tp 2 --sp --acts-tol 0.15
run_mla oss 2 $OSS --pp 2 --acts-tol 0.15
run_mla oss 4 $OSS --dp 2 --tp 2 --zero1 --acts-tol 0.15
echo "$fails layout(s) failed"
[ $fails -eq 0 ]
