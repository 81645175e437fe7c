#!/usr/bin/env bash
# e2e_compare.sh — `ultraplan compare` on hand-made run.json files, no
# executor or GPU: a 175B tp-8 pp-16 stage proxy's (figures from the H200
# device run of 2026-11-30) shows its activations and optimizer states as
# not comparable (one micro-batch of activations, no optimizer states) with
# no error, text and --json; the same run without its "proxy" object is read
# as a whole run, where rows measured as 0 but predicted non-zero say n/a
# (null in JSON), never +0 %.
set -u
U=${ULTRAPLAN:?set ULTRAPLAN to the binary}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
ok() { echo "ok   $*"; }
bad() { echo "FAIL $*"; fails=$((fails + 1)); }

"$U" plan --gpus 1024 --model gpt3-175b --tp 8 --pp 16 --gpu h200 -o "$tmp/plan.json" >/dev/null 2>"$tmp/err" ||
  { echo "FAIL plan: $(cat "$tmp/err")"; exit 1; }

# the stage proxy's run.json, trimmed to what compare reads
cat >"$tmp/proxy.json" <<'JSON'
{
  "format": "ultraplan.run/1", "backend": "cuda-proxy", "world": 1,
  "tokens_per_step": 65536, "flops_per_token": 8380219392, "peak_flops_per_rank": 989000000000000,
  "summary": {"steps_averaged": 2, "step_s": 0.98327969360351564, "tokens_per_s": 66650.4153663788,
    "mfu": 0.56475743512455256, "final_loss": 0,
    "phases_s": {"forward": 0.30887923240661619, "backward": 0.673129493713379, "recompute": 0,
      "tp_comm": 0, "pp_wait": 0, "dp_comm": 0, "optimizer": 0}},
  "memory": [{"rank": 0, "stage": 1, "tp_rank": 0, "dp_rank": 0, "weights": 2718922752,
    "grads": 5437845504, "optim": 0, "acts": 6848249856, "buffers": 881590272, "total": 15886608384,
    "rss_peak": 550977536}],
  "proxy": {"stage": 1, "pp": 16, "tp": 8, "layers": 6, "micro_batches_run": 8, "micro_batches_plan": 64,
    "predicted_compute_mb_s": 0.095721818962729049, "predicted_fwd_mb_s": 0.031583182425063971,
    "predicted_bwd_mb_s": 0.064138636537665064, "predicted_recompute_mb_s": 0,
    "measured_compute_mb_s": 0.12275109076499939, "measured_fwd_mb_s": 0.038609904050827024,
    "measured_bwd_mb_s": 0.084141186714172367, "measured_recompute_mb_s": 0}
}
JSON
# the same run read as a whole run of the plan (on its GPU count); and as
# runs that are not this plan's: another world size, another model
python3 -c '
import json, sys
d = json.load(open(sys.argv[1])); del d["proxy"]
d["world"] = json.load(open(sys.argv[2]))["gpus"]; json.dump(d, open(sys.argv[3], "w"))
d["world"] = 2; json.dump(d, open(sys.argv[4], "w"))
d["world"] = json.load(open(sys.argv[2]))["gpus"]; d["model"] = {"name": "tiny", "params": 1234567}
json.dump(d, open(sys.argv[5], "w"))
' "$tmp/proxy.json" "$tmp/plan.json" "$tmp/whole.json" "$tmp/world2.json" "$tmp/other.json"
if "$U" compare "$tmp/plan.json" "$tmp/world2.json" >/dev/null 2>"$tmp/err"; then
  bad "a 2-rank run compared against a $(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["gpus"])' "$tmp/plan.json")-GPU plan"
else
  grep -q "ran on 2 ranks, but .* is for [0-9]* GPUs" "$tmp/err" && ok "another world size: refused, named" ||
    bad "another world size: $(cat "$tmp/err")"
fi
if "$U" compare "$tmp/plan.json" "$tmp/other.json" >/dev/null 2>"$tmp/err"; then
  bad "a run of another model was compared"
else
  grep -q "is a run of another model" "$tmp/err" && ok "another model: refused, named" || bad "another model: $(cat "$tmp/err")"
fi

# 1. proxy, text: acts and optim without an error, the reason said once
if "$U" compare "$tmp/plan.json" "$tmp/proxy.json" >"$tmp/p.txt" 2>"$tmp/err"; then
  mem=$(grep -E '^  rank 0 +stage 1 ' "$tmp/p.txt")
  grep -q 'stage_compute_mb' "$tmp/p.txt" && ok "proxy rows" || bad "proxy rows: $(cat "$tmp/p.txt")"
  grep -q 'not comparable: the proxy holds one micro-batch of activations and no optimizer states' "$tmp/p.txt" &&
    ok "proxy memory note" || bad "proxy memory note: $(cat "$tmp/p.txt")"
  echo "$mem" | grep -Eq ' optim [0-9.]+/0\.00 \(not comparable\) ' && echo "$mem" | grep -Eq ' acts [0-9.]+/6531\.00 \(not comparable\) ' &&
    ok "proxy acts, optim: no error" || bad "proxy acts, optim: $mem"
  echo "$mem" | grep -Eq ' weights [0-9.]+/2592\.97 \([+-][0-9]+%\) ' && ok "proxy weights keep their error" ||
    bad "proxy weights: $mem"
else
  bad "compare proxy exited $?: $(cat "$tmp/err")"
fi

# 2. proxy, --json: memory_comparable false, a note, null errors for acts and optim
if "$U" compare "$tmp/plan.json" "$tmp/proxy.json" --json >"$tmp/p.json" 2>"$tmp/err"; then
  python3 - "$tmp/p.json" <<'PY' && ok "proxy json" || bad "proxy json"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["format"] == "ultraplan.compare/1"
assert d["proxy"]["stage"] == 1 and d["proxy"]["stage_compute_mb"]["error_pct"] < 0
assert d["memory_comparable"] is False
assert "not comparable" in d["memory_note"] and "optimizer" in d["memory_note"]
m = d["memory"][0]
for k in ("acts", "optim"):
    assert m[k]["error_pct"] is None and m[k]["comparable"] is False, k
    assert m[k]["predicted"] > m[k]["measured"], k
for k in ("weights", "grads", "buffers"):
    assert isinstance(m[k]["error_pct"], (int, float)) and "comparable" not in m[k], k
PY
else
  bad "compare proxy --json exited $?: $(cat "$tmp/err")"
fi

# 3. whole run, text: measured 0, predicted not: n/a, never +0 %
if "$U" compare "$tmp/plan.json" "$tmp/whole.json" >"$tmp/w.txt" 2>"$tmp/err"; then
  grep -Eq '^  tp_comm +[0-9.]+ +0\.0000 +ms +n/a$' "$tmp/w.txt" && ok "whole run: n/a row" ||
    bad "whole run tp_comm row: $(cat "$tmp/w.txt")"
  mem=$(grep -E '^  rank 0 +stage 1 ' "$tmp/w.txt")
  echo "$mem" | grep -Eq ' optim [0-9.]+/0\.00 \(n/a\) ' && echo "$mem" | grep -Eq ' acts [0-9.]+/6531\.00 \([+-][0-9]+%\) ' &&
    ok "whole run memory: n/a, errors" || bad "whole run memory: $mem"
  grep -q 'not comparable' "$tmp/w.txt" && bad "whole run says not comparable" || ok "whole run: no proxy note"
else
  bad "compare whole exited $?: $(cat "$tmp/err")"
fi

# 4. whole run, --json: null where n/a, memory_comparable true, no note
if "$U" compare "$tmp/plan.json" "$tmp/whole.json" --json >"$tmp/w.json" 2>"$tmp/err"; then
  python3 - "$tmp/w.json" <<'PY' && ok "whole run json" || bad "whole run json"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["memory_comparable"] is True and "memory_note" not in d
assert d["phases"]["tp_comm"]["measured"] == 0 and d["phases"]["tp_comm"]["predicted"] > 0
assert d["phases"]["tp_comm"]["error_pct"] is None
assert isinstance(d["step_time"]["error_pct"], (int, float)) and d["step_time"]["measured_s"] > 0
m = d["memory"][0]
assert m["optim"]["error_pct"] is None and isinstance(m["acts"]["error_pct"], (int, float))
PY
else
  bad "compare whole --json exited $?: $(cat "$tmp/err")"
fi

# 5. an MoE plan made for Megatron, against a run of ultraplan's executor: Megatron-core weights the
# expert rows inside the activation and keeps no expert outputs, the executor weights them at the
# combine and keeps them (model/memory.h memory_moe_keeps_expert_out). compare must price the memory
# the executor keeps: a run that holds exactly the executor-target prediction is +0 % on every row.
moe="--model mixtral-8x7b --gpus 8 --gpu h200 --tp 1 --pp 1 --ep 8 --mbs 1 --gbs 8 --seq 1024 --dist-opt"
if "$U" plan $moe -o "$tmp/moe_meg.json" >/dev/null 2>"$tmp/err" &&
   "$U" plan $moe --target ultraplan -o "$tmp/moe_ex.json" >/dev/null 2>>"$tmp/err"; then
  python3 - "$tmp/moe_meg.json" "$tmp/moe_ex.json" "$tmp/proxy.json" "$tmp/moe_run.json" <<'PY' || bad "moe run file"
import json, sys
meg, ex, run = json.load(open(sys.argv[1])), json.load(open(sys.argv[2])), json.load(open(sys.argv[3]))
assert meg["layout"]["target"] == "megatron" and ex["layout"]["target"] == "ultraplan"
a, b = meg["prediction"]["memory"]["per_stage"][0], ex["prediction"]["memory"]["per_stage"][0]
assert a["activations"] < b["activations"], (a["activations"], b["activations"])   # the two accountings differ
del run["proxy"]
run["world"] = 8
run["memory"] = [{"rank": 0, "stage": 0, "tp_rank": 0, "dp_rank": 0, "weights": b["weights"], "grads": b["grads"],
                  "optim": b["optimizer"], "acts": b["activations"], "buffers": b["buffers"], "total": b["total"],
                  "rss_peak": 0}]
json.dump(run, open(sys.argv[4], "w"))
PY
  if "$U" compare "$tmp/moe_meg.json" "$tmp/moe_run.json" --json >"$tmp/m.json" 2>"$tmp/err"; then
    python3 - "$tmp/m.json" <<'PY' && ok "moe plan for megatron: priced as the executor keeps it" || bad "moe compare: $(cat "$tmp/m.json")"
import json, sys
m = json.load(open(sys.argv[1]))["memory"][0]
for k in ("weights", "grads", "optim", "acts", "buffers"):
    assert abs(m[k]["error_pct"]) < 1e-6, (k, m[k])
PY
  else
    bad "compare moe exited $?: $(cat "$tmp/err")"
  fi
else
  bad "predict moe: $(cat "$tmp/err")"
fi

[ $fails -eq 0 ] && echo "e2e_compare: all passed" || echo "e2e_compare: $fails failed"
[ $fails -eq 0 ]
