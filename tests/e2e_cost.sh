#!/usr/bin/env bash
# e2e_cost.sh — what a run costs (issue 17 item 23): --price on predict, plan
# and sweep; plan --rank-by time|cost; --budget-days and --budget-dollars.
set -u
U=${ULTRAPLAN:?}
D=$(mktemp -d)
trap 'rm -rf "$D"' EXIT
fails=0
. "$(dirname "$0")/lib.sh"   # ok, fail

"$U" predict --params 70B --gpus 512 --tp 8 --pp 4 --price 2.5 --json > "$D/p.json" &&
"$U" predict --params 70B --gpus 512 --tp 8 --pp 4 --json > "$D/np.json" || fail "predict"
python3 - "$D/p.json" "$D/np.json" <<'PY' && ok "predict --price: dollars are GPU-hours at the price, failures included" || fail "predict dollars"
import json, sys
t = json.load(open(sys.argv[1]))["training"]; n = json.load(open(sys.argv[2]))["training"]
assert abs(t["dollars"] - t["gpu_hours"] * 2.5) < 1e-6 * t["dollars"], t
assert abs(t["dollars_with_failures"] - t["days_with_failures"] * 24 * 512 * 2.5) < 1e-6 * t["dollars_with_failures"], t
assert "dollars" not in n      # not priced: no made-up price
PY
"$U" predict --params 70B --gpus 512 --tp 8 --pp 4 --price 2.5 | grep -Eq '^  cost \$[0-9.]+[KMB] ideal, \$[0-9.]+[KMB] with failures \(at \$2.50 per GPU-hour\)' &&
    ok "predict text: the cost line" || fail "predict text cost"

"$U" plan --gpus 512 --params 175B --price 2 --rank-by cost --top 5 --json > "$D/c.json" &&
"$U" plan --gpus 512 --params 175B --top 5 --json > "$D/t.json" || fail "plan"
python3 - "$D/c.json" "$D/t.json" <<'PY' && ok "plan --rank-by cost orders by days with failures, time by step" || fail "plan ranking"
import json, sys
c = json.load(open(sys.argv[1])); t = json.load(open(sys.argv[2]))
dw = [r["days_with_failures"] for r in c["ranked"]]; st = [r["step_s"] for r in t["ranked"]]
assert dw == sorted(dw) and st == sorted(st), (dw, st)
assert c["search"]["rank_by"] == "cost" and t["search"]["rank_by"] == "time"
for r in c["ranked"]:
    assert abs(r["dollars_with_failures"] - r["days_with_failures"] * 24 * 512 * 2) < 1e-6 * r["dollars_with_failures"]
assert c["options"]["price"] == 2                 # the plan file keeps its price
PY
best=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["ranked"][0]["days_with_failures"])' "$D/t.json")
"$U" plan --gpus 512 --params 175B --budget-days 100 > /dev/null 2> "$D/err"; rc=$?
[ $rc -ne 0 ] && grep -q "none within the budget (days): the best needs" "$D/err" && ok "--budget-days below the best: refused, with the best's figure" ||
    fail "--budget-days 100: rc=$rc $(cat "$D/err")"
"$U" plan --gpus 512 --params 175B --budget-days 180 --top 20 --json > "$D/b.json" || fail "--budget-days 180"
python3 -c '
import json, sys; d = json.load(open(sys.argv[1]))
assert d["ranked"] and all(r["days_with_failures"] <= 180 for r in d["ranked"]) and d["search"]["over_budget"] > 0
' "$D/b.json" && ok "--budget-days 180: every plan within, the rest counted" || fail "--budget-days 180 plans"
"$U" plan --gpus 512 --params 175B --budget-dollars 5M > /dev/null 2> "$D/err"; rc=$?
[ $rc -ne 0 ] && grep -q "needs --price" "$D/err" && ok "--budget-dollars without --price: refused" || fail "--budget-dollars alone: rc=$rc"
"$U" plan --gpus 512 --params 175B --price 2 --budget-dollars 4.4M --top 20 --json > "$D/d.json" || fail "--budget-dollars"
python3 -c '
import json, sys; d = json.load(open(sys.argv[1]))
assert d["ranked"] and all(r["dollars_with_failures"] <= 4.4e6 for r in d["ranked"])
' "$D/d.json" && ok "--budget-dollars: every plan within" || fail "--budget-dollars plans"

"$U" sweep --params 7B --gpus 8,64 --gpu h100-sxm --price 2 --json > "$D/s.json" || fail "sweep --price"
python3 -c '
import json, sys; d = json.load(open(sys.argv[1]))
cells = [c for row in d["rows"] for c in row["cells"]] if "rows" in d else d["cells"]
assert all(c.get("dollars_with_failures", 0) > 0 for c in cells if c.get("feasible", c.get("step_s")))
' "$D/s.json" && ok "sweep --price: each cell its cost" || fail "sweep --price json: $(head -c 300 "$D/s.json")"

echo "$fails cost check(s) failed"
[ $fails -eq 0 ]
