#!/usr/bin/env bash
# e2e_numbers.sh — numbers as people read them in predict's report (issue 17
# item 19): units on every size, durations in the unit that reads, no
# 20-digit figures, and the causal-FLOP throughput Megatron logs.
set -u
U=${ULTRAPLAN:?}
fails=0
. "$(dirname "$0")/lib.sh"   # ok, fail

tiny=$("$U" predict --layers 2 --hidden 64 --heads 2 --seq 32 --vocab 64 --gbs 2 --gpus 1) || fail "tiny predict"
grep -Eq 'checkpoint [0-9.]+ [KMGT]?B written' <<< "$tiny" && ok "checkpoint size has its unit" ||
    fail "checkpoint size: $(grep checkpoint <<< "$tiny")"
grep -Eq '[0-9.]+ (s|min|h) ideal' <<< "$tiny" && ! grep -q '0\.0 days' <<< "$tiny" && ok "a short run in minutes, not 0.0 days" ||
    fail "short run: $(grep training <<< "$tiny")"
grep -Eq 'MFU 0\.0[0-9]*[1-9][0-9]*%' <<< "$tiny" && ok "a tiny MFU keeps its digits" || fail "tiny MFU: $(grep throughput <<< "$tiny")"

huge=$("$U" predict --params 7B --gpus 8 --tokens 1e30) || fail "--tokens 1e30"
grep -Eq '[0-9]{10,}' <<< "$huge" && fail "a 10+ digit figure: $(grep -E '[0-9]{10,}' <<< "$huge" | head -2)" ||
    ok "--tokens 1e30: no 10-digit figures"
grep -q 'P tokens\|e+15P' <<< "$huge" && fail "SI prefix past P: $(grep training <<< "$huge")" || ok "no prefix past P"

# the causal count is the same run under --flops causal (an independent path through the cost model)
args=(--model llama3.1-70b --seq 8192 --gpus 64 --tp 8 --pp 2 --gbs 128)
full=$("$U" predict "${args[@]}" --json) && causal=$("$U" predict "${args[@]}" --flops causal --json) || fail "70B predict"
python3 - <<PY && ok "tflops_per_gpu_causal equals the --flops causal figure, 5-9 % below the full one" || fail "causal TFLOP/s"
import json
f = json.loads('''$full''')["throughput"]; c = json.loads('''$causal''')["throughput"]
assert abs(f["tflops_per_gpu_causal"] - c["tflops_per_gpu"]) < 1e-9 * c["tflops_per_gpu"], (f, c)
gap = 1 - f["tflops_per_gpu_causal"] / f["tflops_per_gpu"]
assert 0.05 < gap < 0.09, gap        # the issue: 7 % apart for Llama 70B at 8K
PY
"$U" predict "${args[@]}" | grep -q "Megatron's --log-throughput counts causal attention" && ok "the text names it" ||
    fail "no causal line in the text"

echo "$fails number check(s) failed"
[ $fails -eq 0 ]
