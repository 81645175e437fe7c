#!/bin/bash
# e2e: validate and fit end to end. Accuracy regression against vTrain's
# measured runs (validation/vtrain/ in this repository; fails if the model
# gets worse), and bad inputs that must give one error line and a non-zero exit.
set -u
U=${ULTRAPLAN:?}
V=$(dirname "$0")/../validation/vtrain
fails=0
. "$(dirname "$0")/lib.sh"   # check()
# Published H100 runs (docs/accuracy/h100_published.csv, in this repository): 6.07 % since step 52 priced the
# Megatron-Bridge rows' fp8 current scaling as published; 5.52 % since steps 46-47 read the 24.09
# rows' gradients as bf16 (grad_sync_dtype: bf16 in NeMo 1.0's performance configs); 4.84 % since step 28 timed
# the CP ring's copies, 4.87 % since the nemo stack fuses the cross-entropy (ce_fused; 4.25 % before, since NOTES step 23; 4.75 % after steps 13
# and 16, 4.54 % after step 11); pinned with a small margin.
D=$(dirname "$0")/../docs/accuracy
check "published H100 runs MAPE <= 6.5%" 0 "$U" validate "$D/h100_published.csv" --gpu h100-sxm --summary --max-mape 6.5
# Blackwell runs, not fitted to (the H100 curves read at the same duration, NOTES steps 14, 16;
# GEMMs x0.834 from published B200 matmuls, step 25): 6.52 % and 9.94 % with nemo's fused
# cross-entropy (5.15 and 9.29 % without it, 12.78 and 16.69 % before step 25); GB200 7.90 % with the
# 25.04 page's fp8 current scaling (step 52)
check "published B200 runs MAPE <= 7%" 0 "$U" validate "$D/b200_published.csv" --gpu b200 --summary --max-mape 7
check "published GB200 runs MAPE <= 8.5%" 0 "$U" validate "$D/gb200_published.csv" --gpu gb200 --summary --max-mape 8.5
# MT-NLG 530B on Selene (A100, held out, nothing fitted; NOTES steps 24, 29): 28.95 % before the
# stacks, 24.50 % with megatron-2021, 23.93 % with megatron-deepspeed-2021 (DeepSpeed's serial p2p)
check "published A100 runs MAPE <= 24.4%" 0 "$U" validate "$D/a100_published.csv" --gpu a100-80g --summary --max-mape 24.4
# Korthikanti et al. 2022 Table 5 (docs/accuracy/korthikanti_a100_published.csv, NOTES step 23):
# 8 Megatron rows on Selene, full recomputation and selective + SP; 5.29 % before SP's backward
# re-gather and split calls and the pipeline gather without SP were modelled, 3.35 % after
# (Calculon: 3.65 % on these rows); target 3.5 %
check "Korthikanti Table 5 MAPE <= 3.5%" 0 "$U" validate "$D/korthikanti_a100_published.csv" --gpu a100-80g --summary --max-mape 3.5
# NeMo's long-sequence table, Llama 2 7B fp8 on H100, 4K-1M tokens, cp 1-32
# (docs/accuracy/longctx_h100_published.csv, NOTES step 23): 19.44 % before the CP ring was timed
# per block, 16.70 % after, 16.07 % with Transformer Engine's per-step copies and gradient
# sums (step 28); still optimistic at the longest sequences
check "published long-context H100 runs MAPE <= 16.7%" 0 "$U" validate "$D/longctx_h100_published.csv" --gpu h100-sxm --summary --max-mape 16.7
# the same table's Llama 3 8B fp8 on B200 (NeMo 25.04, 8K-1M tokens, cp 1-16), held out: transcribed after every
# constant was set (NOTES step 49), 7.26 %, optimistic by 2 % at 8K growing to 11 % at 1M; 5.93 % without the TP
# overlap NeMo's llama3_8b recipe turns off (step 52)
check "published long-context B200 runs (held out) MAPE <= 6.5%" 0 "$U" validate "$D/longctx_b200_published.csv" --gpu b200 --summary --max-mape 6.5
# Selene 2021 (Narayanan et al. Table 2): PTD-P under megatron-2021, ZeRO-3 under deepspeed-zero3
# (each fitted on part of its rows, NOTES step 24): 6.79 %
check "published Selene 2021 runs MAPE <= 8%" 0 "$U" validate "$D/selene2021_published.csv" --gpu a100-80g --summary --max-mape 8
# MosaicML's published FSDP runs (docs/accuracy/mosaic_*_published.csv, NOTES steps 15, 24): the
# composer-fsdp stack (fitted on the A100 rows below 8K tokens): 4.72 % on A100 (24.21 % before
# the stacks, 5.38 % before step 30 stopped the recompute before the down projection), 8.77 % on
# H100 (24.40 %; 12.93 % before step 28 put FA2-class kernels on Hopper at 0.62 of cuDNN; 9.13 %
# before step 30). A fit on the runs below 16K tokens predicts the 16K-64K
# runs: 3.50 % held out (A100; 4.11 % before step 30).
check "published MosaicML A100 runs MAPE <= 5.5%" 0 "$U" validate "$D/mosaic_a100_published.csv" --gpu a100-80g --summary --max-mape 5.5
check "published MosaicML H100 runs MAPE <= 9.5%" 0 "$U" validate "$D/mosaic_h100_published.csv" --gpu h100-sxm --summary --max-mape 9.5
# Megatron-LM's README weak-scaling table (9 runs, 48-6,144 H100s; NOTES step 35), held out: 6.62 %
check "Megatron-LM README H100 runs MAPE <= 7%" 0 "$U" validate "$D/megatron_readme_h100_published.csv" --gpu h100-sxm --summary --max-mape 7
# Megatron-Bridge 26.04-26.06 dense Llama 3.1 405B (NOTES step 37) and Llama 3 70B (step 41), held out:
# 6.28 / 4.26 / 4.83 % (405B alone 5.56 / 4.54 / 4.08 %; H100 4.64 % before the fp8 parameter gather, step 42);
# GB300 5.69 % with Blackwell Ultra's measured attention speed-up (step 57)
check "Megatron-Bridge dense GB300 MAPE <= 6.8%" 0 "$U" validate "$D/mbridge_gb300_published.csv" --gpu gb300 --summary --max-mape 6.8
check "Megatron-Bridge dense GB200 MAPE <= 5%" 0 "$U" validate "$D/mbridge_gb200_published.csv" --gpu gb200 --summary --max-mape 5
check "Megatron-Bridge dense H100 MAPE <= 5.2%" 0 "$U" validate "$D/mbridge_h100_published.csv" --gpu h100-sxm --summary --max-mape 5.2
# torchtitan's own H100 benchmark (Dec 2024; NOTES step 34), held out: nothing was fitted to it or to
# the torchtitan stack. 15.99 % with the SXM's peaks, 9.98 % with the NVL's (the GPUs' peak lies
# between, not stated); 17.83 / 11.82 % before the eager rows' unfused ops were priced (step 36);
# pinned so that a change cannot make the held-out figure worse unseen
# 14.30 / 10.19 % since torchtitan's per-op selective recomputation is priced (step 38), 14.91 / 9.15 % under
# its own version's stack, torchtitan-2412 (full AC stops early; step 40); 11.91 / 7.56 % since PyTorch's
# context parallelism and torchtitan's repeat_kv are priced (step 48)
check "torchtitan H100 benchmark (SXM peaks) MAPE <= 12.5%" 0 "$U" validate "$D/torchtitan_h100_published.csv" --profile "$D/profiles/grand-teton-h100.json" --summary --max-mape 12.5
# and its memory column, held out too: the peak per GPU within 4.48 % MAPE (4.20 % before step 45's FSDP states, 4.27 % before step 41, 5.63 % while a compiled block kept
# w2's output, step 40; 15.17 % before the loss's fp32 copies were counted, 27.06 % with Megatron's selective
# recomputation in place of the per-op policy; step 38)
check "torchtitan H100 benchmark peak memory MAPE <= 5%" 0 "$U" validate "$D/torchtitan_h100_published.csv" --profile "$D/profiles/grand-teton-h100.json" --summary --max-mem-mape 5
# Trainy's H200 runs of torchtitan (June 2025, WhiteFiber; step 40), held out: 3.65 % step, 11.71 % memory (12.45 % before step 45)
# (13.97 % before step 41)
check "torchtitan H200 (Trainy) MAPE <= 4.5%" 0 "$U" validate "$D/torchtitan_h200_published.csv" --gpu h200 --summary --max-mape 4.5 --max-mem-mape 15
# torchtitan's June-2025 async TP benchmark (step 40), held out: 9.97 / 8.48 % (SXM / NVL peaks); async TP unpriced;
# 9.85 / 8.74 % since step 48 (its Llama repeats K/V before the attention: a copy a layer)
check "torchtitan async TP benchmark (SXM peaks) MAPE <= 10.5%" 0 "$U" validate "$D/torchtitan_asynctp_h100_published.csv" --profile "$D/profiles/grand-teton-h100.json" --summary --max-mape 10.5
check "torchtitan async TP benchmark (NVL peaks) MAPE <= 9%" 0 "$U" validate "$D/torchtitan_asynctp_h100_published.csv" --profile "$D/profiles/grand-teton-h100-nvlpeak.json" --summary --max-mape 9
check "--max-mem-mape without a mem_gib column fails" 1 "$U" validate "$D/mbridge_h100_published.csv" --gpu h100-sxm --summary --max-mem-mape 50
check "torchtitan H100 benchmark (NVL peaks) MAPE <= 8%" 0 "$U" validate "$D/torchtitan_h100_published.csv" --profile "$D/profiles/grand-teton-h100-nvlpeak.json" --summary --max-mape 8
# every run in a corpus ran: NVIDIA's Megatron-Bridge fp8 H100 layouts (405B tp 8 pp 8 vp 8 cp 2, 70B tp 4 pp 8
# vp 5) must be predicted to fit their 80 GB (NOTES steps 41, 42: Transformer Engine's fp8 inputs, --fp8-param-gather);
# all four were predicted above it before (101.8 / 99.8 GiB)
# and PyTorch FSDP's runs: MosaicML's 30B on 8 GPUs (7 rows, 80.6-83.4 GiB predicted on 80 GB before step 45 counted
# FSDP's fp32 shard as the optimizer's master, 16 bytes a parameter, not 18)
for f in mbridge_h100_published:h100-sxm mosaic_a100_published:a100-80g mosaic_h100_published:h100-sxm; do
    n=$("$U" validate "$D/${f%%:*}.csv" --gpu "${f#*:}" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["summary"]["runs_predicted_unfit"])')
    if [ "$n" = 0 ]; then echo "ok   ${f%%:*}: every run predicted to fit"
    else echo "FAIL ${f%%:*}: $n runs predicted above the GPU's memory"; fails=$((fails + 1)); fi
done
# the MoE runs of four generations likewise (NOTES step 43: Transformer Engine's GroupedLinear keeps its
# inputs in fp8, Megatron-core >= 0.13 keeps no expert outputs, Blackwell's fp8 weight cache has no
# transpose); 10 of these 25 runs were predicted above their GPU's memory before
for f in moe_h100_published:h100-sxm moe_b200_published:b200 moe_gb200_published:gb200 moe_b300_published:b300; do
    n=$("$U" validate "$D/${f%%:*}.csv" --gpu "${f#*:}" --moe-imbalance 1 --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["summary"]["runs_predicted_unfit"])')
    if [ "$n" = 0 ]; then echo "ok   ${f%%:*}: every run predicted to fit"
    else echo "FAIL ${f%%:*}: $n runs predicted above the GPU's memory"; fails=$((fails + 1)); fi
done
# vTrain's runs are Megatron-DeepSpeed's, whose numbers the a100-80g profile is: 7.72 % without the
# stack, 7.38 % with it (DeepSpeed's pipeline p2p one blocking call at a time, NOTES step 29)
check "vTrain multi-node under --stack megatron-deepspeed MAPE <= 8%" 0 "$U" validate "$V/multi_node.csv" --stack megatron-deepspeed --summary --max-mape 8
mfit=$("$U" fit "$D/mosaic_a100_published.csv" --gpu a100-80g --params gemm_eff,attn_eff,mem_eff \
      --holdout-where 'seq>=16384' -o "${TMPDIR:-/tmp}/ultraplan-mfit-$$.json" 2>&1)
if [ $? -ne 0 ]; then echo "FAIL fit on MosaicML runs: $mfit"; fails=$((fails + 1)); fi
rm -f "${TMPDIR:-/tmp}/ultraplan-mfit-$$.json"
mheld=$(printf '%s\n' "$mfit" | awk '/held-out rows, after/ {print $5}')
if awk -v h="${mheld:-999}" 'BEGIN {exit !(h <= 6)}'; then echo "ok   MosaicML long-sequence runs from a short-sequence fit: $mheld% <= 6%"
else echo "FAIL MosaicML long-sequence runs from a short-sequence fit: ${mheld:-?}% > 6%"; fails=$((fails + 1)); fi
# Published MoE runs (docs/accuracy/moe_*_published.csv, MOE.md), force-balanced so --moe-imbalance 1,
# nothing fitted to any of them; the DeepSeek-V3 rows with the recipes' --pipeline-model-parallel-layout,
# group-limited routing (8 groups, 4 a token), the dispatcher, EP overlap and --recompute-modules per
# recipe, the flex dispatcher sorting only the received rows, the recipes' CUDA graphs and the EP overlap their
# full-iteration recipes set (MOE.md round 3), the rows' --fp8-recipe and the experts' fp8 padding (round 5):
# 15.51 % (H100), 13.81 % (B200), 10.28 % (GB200), 18.26 % (B300), 13.28 % (GB300); with the recipes' fp8
# parameter gather (NOTES step 42) 15.50, 13.88, 10.28, 18.87, 13.28 %; pinned with a small margin
# (the targets, 10 % / 12 %, are met on GB200 only). DeepSeek's own H800 run: 30.92 % with Megatron-Bridge's
# stage split (NOTES step 39), 17.74 % (too fast) under the DualPipe schedule it ran (step 50), 17.21 % under
# its own stack's storage (hai-llm) with fp32 gradients (step 53); its file has 67 columns, more than the
# reader took before step 47. With the recipe columns re-read at each summary's commit (step 51): 15.31, 9.66,
# 10.28, 19.19, 13.49 %. With DP overlap's window counted at the MoE layers' own times (step 54, a defect fixed;
# GPT-OSS's bf16 rows, already too fast, get faster): 15.37, 10.77, 10.28, 20.59, 13.49, 17.25 %. With
# Blackwell Ultra's measured attention (step 57) and the recipes' fp8 attention at cuDNN's published rates
# (step 58, column fp8_dot_product_attention): 15.37, 10.77, 9.81, 20.56, 10.15, 17.25 %.
for mg in h100:h100-sxm:16 b200:b200:11 gb200:gb200:10.5 b300:b300:21 gb300:gb300:11 h800:h100-sxm:18; do
    IFS=: read -r mf mp mx <<<"$mg"
    check "published MoE ${mf} runs MAPE <= ${mx}%" 0 "$U" validate "$D/moe_${mf}_published.csv" --gpu "$mp" \
        --moe-imbalance 1 --summary --max-mape "$mx"
done
# Llama 3 405B's Table 4 runs (NOTES step 55, held out, nothing fitted): ZeRO-2 beside pp 16 under llama3-meta
# prices 3.9 s of per-micro-batch fp32 reduce-scatters the 8K runs hid (+21 / +19 %), and the 128K run is 27 % too
# fast as other long-context rows: 22.42 %; with the reduce-scatter stream running under the compute that
# follows each backward (step 59) the dp 64 row is +10 %: 18.81 %, pinned against getting worse
check "Llama 3 405B's published runs MAPE <= 19.5%" 0 "$U" validate "$D/llama3_h100_published.csv" --gpu h100-sxm \
    --summary --max-mape 19.5
# Bad inputs: one line, non-zero exit.
bad=$(mktemp); printf 'layers,hidden,heads,seq,tp,pp,dp,mbs,gbs,time_ms\n24,1024,16,1024,1,1,x,1,8,100\n' > "$bad"
check "validate: missing file" nz "$U" validate /nonexistent/runs.csv
check "validate: bad CSV" nz "$U" validate "$bad"
check "validate: no file" nz "$U" validate
check "validate: bad flag" nz "$U" validate "$D/h100_published.csv" --bogus
check "validate: bad --max-mape" nz "$U" validate "$D/h100_published.csv" --max-mape x
check "validate: unknown gpu" nz "$U" validate "$D/h100_published.csv" --gpu z100
check "validate: unknown --stack" nz "$U" validate "$D/h100_published.csv" --stack nemoo
badstack=$(mktemp); printf 'layers,hidden,heads,seq,tp,pp,dp,mbs,gbs,time_ms,stack\n24,1024,16,1024,1,1,8,1,8,100,fsdp\n' > "$badstack"
check "validate: unknown stack in a column" nz "$U" validate "$badstack"
rm -f "$badstack"
check "validate: --gpu and --profile" nz "$U" validate "$D/h100_published.csv" --gpu a100 --profile x.json
check "fit: missing file" nz "$U" fit /nonexistent/runs.csv
check "fit: bad CSV" nz "$U" fit "$bad"
check "fit: bad --params" nz "$U" fit "$D/h100_published.csv" --params warp_drive
check "fit: bad --holdout" nz "$U" fit "$D/h100_published.csv" --holdout 1.5
check "fit: bad --holdout-where" nz "$U" fit "$D/h100_published.csv" --holdout-where 'colour>3'
check "fit: missing profile" nz "$U" fit "$D/h100_published.csv" --profile /nonexistent.json
rm -f "$bad"
if "$U" --help | grep -q '^  sweep'; then
    check "sweep: bad flag" nz "$U" sweep --bogus
fi

# fit keeps a constant the runs do not determine at its base value and says so.
# One-GPU runs do not depend on collective latency at all.
tiny=$(mktemp); ft="${TMPDIR:-/tmp}/ultraplan-tinyfit-$$.json"
printf 'layers,hidden,heads,seq,tp,pp,dp,mbs,gbs,time_ms\n' > "$tiny"
for m in 1 2 4 8; do printf '12,768,12,1024,1,1,1,%d,8,%d\n' $m $((400 - 20 * m)) >> "$tiny"; done
fout=$("$U" fit "$tiny" --gpu a100-80g --params gemm_eff,coll_lat -o "$ft" 2>&1)
rc=$?
num() { sed -n 's/.*"coll_lat":[[:space:]]*\([0-9.eE+-]*\).*/\1/p' "$1" | head -1; }
if [ $rc -eq 0 ] && printf '%s\n' "$fout" | grep -q '^  coll_lat .*kept: these runs do not depend on it' &&
   printf '%s\n' "$fout" | grep -q '^fit of 1 of 2 constants' &&
   awk -v a="$(num "$ft")" -v b="$(num "$(dirname "$0")/../profiles/gpus/a100-80g.json")" \
       'BEGIN {exit !(a > 0 && b > 0 && (a - b) / b < 1e-9 && (b - a) / b < 1e-9)}'; then
    echo "ok   fit: an undetermined constant is kept at its base value and named"
else echo "FAIL fit: undetermined constant (rc $rc): $fout"; fails=$((fails + 1)); fi
jout=$("$U" fit "$tiny" --gpu a100-80g --params gemm_eff,coll_lat --json 2>&1)
if printf '%s\n' "$jout" | grep -q '"format":[[:space:]]*"ultraplan.fit/1"' &&
   printf '%s\n' "$jout" | grep -q '"kept":[[:space:]]*"these runs do not depend on it"' &&
   printf '%s\n' "$jout" | grep -q '"factor_se":[[:space:]]*[0-9]' &&
   printf '%s\n' "$jout" | grep -q '"held_out_rows":[[:space:]]*null'; then echo "ok   fit --json"
else echo "FAIL fit --json: $jout"; fails=$((fails + 1)); fi
check "fit: no constant the runs depend on" nz "$U" fit "$tiny" --gpu a100-80g --params coll_lat
rm -f "$tiny" "$ft"

# Accuracy: the current figures plus a small margin (docs/accuracy/NOTES.md).
# Issue 5 targets 8 % on both and 3 % regret per group: both MAPEs meet it
# (single-node 6.96 %, multi-node 7.72 %); multi-node regret is 4.46 % at worst.
check "vtrain single-node MAPE <= 8%" 0 "$U" validate "$V/single_node.csv" --summary --max-mape 8
check "vtrain multi-node MAPE <= 8%" 0 "$U" validate "$V/multi_node.csv" --summary --max-mape 8
check "vtrain multi-node regret <= 5%" 0 "$U" validate "$V/multi_node.csv" --summary --max-regret 5
# the issue's ranking groups (one model on one GPU count, every global batch, ranked by time
# per sequence): single-node all 24 at 0 %, the target 3 % pinned
check "vtrain single-node model+gpus regret <= 3%" 0 "$U" validate "$V/single_node.csv" --summary --max-regret 3
# single-node ranking at a fixed global batch: groups (model, GPU count, global batch) with
# regret above 3 %: 31 of 144 since GEMM wave quantization (NOTES step 9; 32 before)
n3=$("$U" validate "$V/single_node.csv" --json |
     awk '/"by":/ {g = ($0 ~ /model\+gpus\+gbs/)} g && /"regret":/ {if ($2 + 0 > 3) n++} END {print n + 0}')
if [ "${n3:-999}" -le 31 ]; then echo "ok   vtrain single-node groups with regret > 3%: $n3 <= 31"
else echo "FAIL vtrain single-node groups with regret > 3%: ${n3:-?} > 31"; fails=$((fails + 1)); fi
out=$("$U" validate "$V/multi_node.csv" --json)
echo "$out" | grep -q '"mape"' || { echo "FAIL json has no summary mape"; fails=$((fails + 1)); }
echo "$out" | grep -q '"regret"' || { echo "FAIL json has no group regret"; fails=$((fails + 1)); }
fitout=$("$U" fit "$V/single_node.csv" "$V/multi_node.csv" --gpu a100-80g \
      --holdout-where 'gpus>=256' -o "${TMPDIR:-/tmp}/ultraplan-fit-$$.json" 2>&1)
if [ $? -ne 0 ]; then echo "FAIL fit with hold-out runs: $fitout"; fails=$((fails + 1)); fi
# the 256/512-GPU rows predicted from a fit on the rest: target 8 % (7.05 %)
held=$(printf '%s\n' "$fitout" | awk '/held-out rows, after/ {print $5}')
if awk -v h="${held:-999}" 'BEGIN {exit !(h <= 8)}'; then echo "ok   fit held-out MAPE $held% <= 8%"
else echo "FAIL fit held-out MAPE ${held:-?}% > 8%"; fails=$((fails + 1)); fi
check "fitted profile loads" 0 "$U" validate "$V/multi_node.csv" --profile "${TMPDIR:-/tmp}/ultraplan-fit-$$.json" --summary
rm -f "${TMPDIR:-/tmp}/ultraplan-fit-$$.json"
# A random fifth held out: these runs barely touch the flash-attention curve
# (unfused attention is mostly HBM-bound), and an unguarded fit ran it into
# its cap, writing attention at 100 % of peak into the profile.
rf="${TMPDIR:-/tmp}/ultraplan-rfit-$$.json"
rout=$("$U" fit "$V/single_node.csv" "$V/multi_node.csv" --gpu a100-80g --holdout 0.2 -o "$rf" 2>&1)
top=$(sed -n 's/.*"attn_eff":.*, \([0-9.eE+-]*\)\]\],$/\1/p' "$rf" 2>/dev/null)
if awk -v t="${top:-1}" 'BEGIN {exit !(t < 1)}'; then echo "ok   fit, random hold-out: attn_eff top point $top < 1"
else echo "FAIL fit, random hold-out: attn_eff top point ${top:-?}: $rout"; fails=$((fails + 1)); fi
rm -f "$rf"

[ $fails -eq 0 ] || { echo "$fails failed"; exit 1; }
echo "all passed"
