#!/usr/bin/env bash
# e2e_hf.sh — `--hf-config FILE` end to end in predict, plan, sweep and tui,
# on the real config.json files of tests/data/hf/: the JSON contract, the
# same prediction as the matching preset, shape flags over the config, and
# refusals as one line on stderr with a non-zero exit.
set -u
U=${ULTRAPLAN:?set ULTRAPLAN to the binary}
D=${SRC:?set SRC to the source tree}/tests/data/hf
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
ok() { echo "ok   $*"; }
bad() { echo "FAIL $*"; fails=$((fails + 1)); }

# refused: non-zero exit, nothing on stdout, one stderr line containing $1
refused() {
  local want=$1; shift
  "$U" "$@" >"$tmp/out" 2>"$tmp/err"; local rc=$?
  if [ $rc -ne 0 ] && [ ! -s "$tmp/out" ] && [ "$(grep -c . "$tmp/err")" -eq 1 ] && grep -qF -- "$want" "$tmp/err"; then
    ok "refused: $(cat "$tmp/err")"
  else
    bad "$* -> rc=$rc, stderr: $(cat "$tmp/err"), stdout: $(head -c 200 "$tmp/out")"
  fi
}

# 1. predict --json: the model read from the file (8,030,261,248 parameters
#    by hand from the config, see test_hfconfig.c), seq from max_position_embeddings
if "$U" predict --hf-config "$D/Llama-3.1-8B.json" --gpus 8 --json >"$tmp/p.json" 2>"$tmp/err"; then
  python3 - "$tmp/p.json" <<'PY' && ok "predict --json" || bad "predict --json fields"
import json, sys
d = json.load(open(sys.argv[1]))
m = d["model"]
assert d["format"] == "ultraplan.predict/1"
assert m["name"] == "Llama-3.1-8B", m["name"]
assert m["params"] == 8030261248, m["params"]
assert (m["layers"], m["hidden"], m["heads"], m["kv_heads"], m["ffn"], m["vocab"], m["seq"]) == \
       (32, 4096, 32, 8, 14336, 128256, 131072)
assert (m["mlp"], m["norm"], m["pos"], m["tied"], m["bias"]) == ("swiglu", "rmsnorm", "rope", False, False)
assert "Hugging Face config" in m["rule"] and "Llama-3.1-8B.json" in m["rule"]
assert d["layout"]["dp"] == 8 and d["time"]["step_s"] > 0
PY
else
  bad "predict --hf-config exited non-zero: $(cat "$tmp/err")"
fi

# 2. the same prediction as the llama3.1-8b preset once seq is its 8192
"$U" predict --hf-config "$D/Llama-3.1-8B.json" --seq 8192 --gpus 8 --json >"$tmp/hf.json" 2>"$tmp/err" || bad "hf --seq 8192: $(cat "$tmp/err")"
"$U" predict --model llama3.1-8b --gpus 8 --json >"$tmp/preset.json" 2>"$tmp/err" || bad "preset: $(cat "$tmp/err")"
python3 - "$tmp/hf.json" "$tmp/preset.json" <<'PY' && ok "hf config = preset" || bad "hf config and preset differ"
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
assert a["model"]["name"] == "Llama-3.1-8B*" and a["model"]["seq"] == 8192
for k in ("name", "rule"):
    a["model"].pop(k, None); b["model"].pop(k, None)
assert a["model"] == b["model"], (a["model"], b["model"])
for k in ("layout", "memory", "time", "throughput", "training"):
    assert a[k] == b[k], k
PY

# 3. plan and sweep search the config's model
if "$U" plan --hf-config "$D/Qwen3-8B.json" --seq 8192 --gpus 64 --top 2 >"$tmp/plan.txt" 2>"$tmp/err" &&
   grep -qE "^Qwen3-8B\* \(8\.[0-9]+B params\) on 64 x" "$tmp/plan.txt"; then
  ok "plan"
else
  bad "plan: $(cat "$tmp/err") $(head -3 "$tmp/plan.txt")"
fi
if "$U" sweep --hf-config "$D/Qwen3-8B.json" --seq 8192 --gpus 64,256 --json >"$tmp/sweep.json" 2>"$tmp/err"; then
  python3 - "$tmp/sweep.json" <<'PY' && ok "sweep" || bad "sweep rows"
import json, sys
d = json.load(open(sys.argv[1]))
rows = d["cells"] if "cells" in d else d["rows"]
assert sorted(r["gpus"] for r in rows) == [64, 256], rows
assert all(r["model"] == "Qwen3-8B*" for r in rows), rows
PY
else
  bad "sweep: $(cat "$tmp/err")"
fi

# 4. the TUI opens on it
if "$U" tui --hf-config "$D/gemma-7b.json" --seq 8192 --gpus 8 --snapshot --rows 40 --cols 120 >"$tmp/tui.txt" 2>"$tmp/err" &&
   grep -q "gemma-7b\* on 8 x h100-sxm" "$tmp/tui.txt"; then
  ok "tui --snapshot"
else
  bad "tui: $(cat "$tmp/err") $(head -2 "$tmp/tui.txt")"
fi

# 4b. RoPE settings travel: a plan of an HF config keeps rope_theta and
# llama3 rope_scaling (plan.json), and export writes Megatron's flags for them
"$U" plan --hf-config "$D/Qwen2.5-7B.json" --gpus 8 --top 1 -o "$tmp/q.plan.json" >/dev/null &&
    "$U" export "$tmp/q.plan.json" --format megatron >"$tmp/q.mega" && grep -q -- "--rotary-base 1000000" "$tmp/q.mega" &&
    ! grep -q -- "--use-rope-scaling" "$tmp/q.mega" && ok "Qwen2.5 plan exports --rotary-base 1000000" ||
    bad "Qwen2.5 rope: $(grep -E 'rot|rope' "$tmp/q.mega" 2>/dev/null | tr '\n' ' ')"
"$U" plan --hf-config "$D/Llama-3.1-8B.json" --gpus 8 --top 1 -o "$tmp/l.plan.json" >/dev/null &&
    "$U" export "$tmp/l.plan.json" --format megatron >"$tmp/l.mega" && grep -q -- "--rotary-base 500000" "$tmp/l.mega" &&
    grep -q -- "--use-rope-scaling" "$tmp/l.mega" && ok "Llama 3.1 plan exports --rotary-base 500000 --use-rope-scaling" ||
    bad "Llama 3.1 rope: $(grep -E 'rot|rope' "$tmp/l.mega" 2>/dev/null | tr '\n' ' ')"

# 5. --help names it; refusals name the file and the field
"$U" predict --help | grep -q -- "--hf-config FILE" && ok "help" || bad "predict --help lacks --hf-config"
"$U" predict --hf-config "$D/Mixtral-8x7B-v0.1.json" --gpus 8 --json | grep -qE '"params_active":[[:space:]]*12[0-9]{9},' && ok "Mixtral config loads as MoE (12.9B active)" || bad "Mixtral config: no MoE active count"
sed 's/"num_local_experts": 8/"num_local_experts": "eight"/' "$D/Mixtral-8x7B-v0.1.json" >"$tmp/mx.json"
refused '"num_local_experts"' predict --hf-config "$tmp/mx.json" --gpus 8
refused "exclude each other" predict --hf-config "$D/Qwen3-8B.json" --model llama3.1-8b --gpus 8
refused "exclude each other" predict --hf-config "$D/Qwen3-8B.json" --params 7B --gpus 8
sed 's/GemmaForCausalLM/Gemma2ForCausalLM/' "$D/gemma-7b.json" >"$tmp/g2.json"
refused "Gemma2ForCausalLM" plan --hf-config "$tmp/g2.json" --gpus 8
grep -v intermediate_size "$D/Qwen2.5-7B.json" >"$tmp/q.json"
refused "$tmp/q.json: field \"intermediate_size\": missing" predict --hf-config "$tmp/q.json" --gpus 8
refused "$tmp/none.json" tui --hf-config "$tmp/none.json" --snapshot

[ $fails -eq 0 ] && echo "e2e_hf: all ok" || { echo "e2e_hf: $fails failed"; exit 1; }
