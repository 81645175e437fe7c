#!/usr/bin/env bash
# e2e_diff.sh — `ultraplan diff` and `ultraplan tui PLAN.json` (issue 17 item 24).
set -u
U=${ULTRAPLAN:?}
D=$(mktemp -d)
trap 'rm -rf "$D"' EXIT
fails=0
. "$(dirname "$0")/lib.sh"   # ok, fail

"$U" plan --gpus 512 --params 175B -o "$D/a.json" > /dev/null &&
"$U" plan --gpus 1024 --params 175B -o "$D/b.json" > /dev/null &&
"$U" predict --params 175B --gpus 512 --tp 8 --pp 8 -o "$D/c.json" > /dev/null || fail "inputs"

# the rows say what each file holds, with the change from A to B
"$U" diff "$D/a.json" "$D/b.json" --json > "$D/ab.json" || fail "diff --json exit"
python3 - "$D/a.json" "$D/b.json" "$D/ab.json" <<'PY' && ok "diff --json: gpus, layout and step time as the two plans have them" || fail "diff --json rows"
import json, sys
a, b, d = (json.load(open(p)) for p in sys.argv[1:4])
rows = {(r["section"], r["field"]): r for r in d["rows"]}
assert d["format"] == "ultraplan.diff/1" and d["differing"] == len(d["rows"])
g = rows[("hardware", "gpus")]
assert (g["a"], g["b"], g["change_pct"]) == (512, 1024, 100), g
for k in ("dp", "tp", "pp"):
    if a["layout"][k] != b["layout"][k]:
        r = rows[("layout", k)]
        assert (r["a"], r["b"]) == (a["layout"][k], b["layout"][k]), r
s = rows[("time", "step_s")]
assert abs(s["a"] - a["prediction"]["time"]["step_s"]) < 1e-9 * s["a"], s
assert abs(s["b"] - b["prediction"]["time"]["step_s"]) < 1e-9 * s["b"], s
assert abs(s["change_pct"] - 100 * (s["b"] - s["a"]) / s["a"]) < 1e-6
PY
out=$("$U" diff "$D/a.json" "$D/b.json") && grep -Eq '^  hardware +gpus +512 +1024 +\+100\.0%$' <<< "$out" &&
    grep -q "field(s) differ" <<< "$out" && ok "diff text: gpus row and the count" || fail "diff text: $out"
out=$("$U" diff "$D/a.json" "$D/a.json") && grep -q "same in every field" <<< "$out" && ok "diff of a file with itself" ||
    fail "diff a a: $out"
"$U" diff "$D/a.json" "$D/c.json" > "$D/ac.txt" && grep -Eq '^  layout +tp +[1-7] +8 ' "$D/ac.txt" &&
    ok "diff of a plan and a prediction" || fail "diff plan vs predict: $(head -5 "$D/ac.txt")"
echo '{"format": "ultraplan.run/1"}' > "$D/run.json"
"$U" diff "$D/a.json" "$D/run.json" > /dev/null 2> "$D/err"; rc=$?
[ $rc -ne 0 ] && grep -q 'field "format": expected "ultraplan.plan/1" or "ultraplan.predict/1"' "$D/err" &&
    ok "diff of a run.json: refused, naming the field" || fail "diff of a run.json: rc=$rc $(cat "$D/err")"

# tui PLAN.json opens that plan
want=$(python3 -c 'import json,sys; l=json.load(open(sys.argv[1]))["layout"]; print("tp %d pp %d dp %d" % (l["tp"], l["pp"], l["dp"]))' "$D/b.json")
"$U" tui "$D/b.json" --snapshot --rows 24 --cols 80 > "$D/snap.txt" && head -1 "$D/snap.txt" | grep -q "on 1024 x h100-sxm  $want" &&
    ok "tui PLAN.json opens the plan ($want)" || fail "tui PLAN.json: $(head -1 "$D/snap.txt")"
"$U" tui "$D/b.json" --tp 2 --snapshot > /dev/null 2> "$D/err"; rc=$?
[ $rc -ne 0 ] && grep -q "give it alone" "$D/err" && ok "tui PLAN.json with model flags: refused" || fail "tui PLAN.json --tp: rc=$rc"

echo "$fails diff check(s) failed"
[ $fails -eq 0 ]
