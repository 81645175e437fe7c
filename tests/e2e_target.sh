#!/bin/bash
# e2e_target.sh — --target and --mem-margin from the command line:
#  - --target ultraplan --mem-margin 0 gives the same top-5 as the search
#    did before --target existed (tests/data/target_ultraplan_top5.tsv,
#    computed by the tool at 94b4bd2, before --target: a pin of unchanged behaviour, not of
#    truth);
#  - under megatron (the default) plan.json records the target, every ranked
#    layout has one recompute count per model chunk and equal middle stages,
#    and the best plan leaves the default 5% margin free;
#  - predict says whether the margin is left and warns (exit 0) when
#    Megatron-LM cannot run the layout; plan with such a --stage-layers
#    names it; bad values are one-line errors.
set -u
B=${ULTRAPLAN:?set ULTRAPLAN to the ultraplan binary}
SRC=${SRC:-$(cd "$(dirname "$0")/.." && pwd)}
. "$SRC/tests/lib.sh"
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fails=0
command -v python3 >/dev/null || { echo "skip: no python3"; exit 77; }

cat >"$T/rows.py" <<'PY'
import json, sys
d = json.load(sys.stdin)
for r in d["ranked"]:
    l = r["layout"]
    j = lambda k: ",".join(str(x) for x in l[k])
    print("\t".join(str(x) for x in [l["tp"], l["pp"], l["dp"], l["cp"], l["vp"], l["mbs"], l["optimizer"],
          l["precision"], j("stage_layers"), j("full_recompute"), j("selective_recompute"), "%.6f" % r["step_s"],
          "%.0f" % r["peak_bytes"]]))
PY

# 1. --target ultraplan --mem-margin 0: today's search, top-5 for six requests
pins="$SRC/tests/data/target_ultraplan_top5.tsv"
grep '^# --' "$pins" | sed 's/^# //' | while IFS= read -r req; do
    echo "# $req"
    # shellcheck disable=SC2086
    "$B" plan $req --top 5 --json --target ultraplan --mem-margin 0 | python3 "$T/rows.py"
done >"$T/now.tsv"
if diff <(grep -v '^##' "$pins") "$T/now.tsv" >"$T/diff"; then
    ok "--target ultraplan: the top-5 of $(grep -c '^# --' "$pins") requests are the pinned ones"
else
    fail "--target ultraplan changed the search: $(head -20 "$T/diff")"
fi

# 2. megatron (the default): the plan file, the ranked layouts, the margin
"$B" plan --gpus 512 --params 175B --top 20 -o "$T/p.json" >/dev/null 2>"$T/err" || fail "plan 175B/512: $(cat "$T/err")"
python3 - "$T/p.json" <<'PY' && ok "megatron plan: target recorded, 20 expressible layouts, margin left" || fail "megatron plan file"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["layout"]["target"] == "megatron", d["layout"].get("target")
assert len(d["ranked"]) == 20
for r in d["ranked"]:
    l = r["layout"]
    n, f, e, v, p = l["stage_layers"], l["full_recompute"], l["selective_recompute"], l["vp"], l["pp"]
    assert len(set(n[1:-1])) <= 1, n                      # uneven only first and last
    assert not (any(f) and any(e)), (f, e)                # one granularity
    assert not any(e) or e == n, e                        # selective: every layer
    if any(f):                                            # full: one count per chunk on every stage
        ks = [x // v for x in f]
        assert all(x % v == 0 for x in f), f
        part = {k for k, m in zip(ks, n) if k < m // v}
        assert len(part) <= 1 and 0 not in part, (f, n)
        N = part.pop() if part else max(m // v for m in n)
        assert all(k == min(N, m // v) for k, m in zip(ks, n)), (f, n, N)
m = d["prediction"]["memory"]
assert m["capacity_bytes"] - m["peak_bytes"] >= 0.05 * m["capacity_bytes"] - 1, m["peak_bytes"]
PY
"$B" plan --gpus 512 --params 175B --top 1 --mem-margin 20% --json >"$T/m20.json" || fail "plan --mem-margin 20%"
python3 -c "
import json,sys; m=json.load(open('$T/m20.json'))['prediction']['memory']
assert m['capacity_bytes'] - m['peak_bytes'] >= 0.2 * m['capacity_bytes'] - 1" && ok "--mem-margin 20%: 20% left" \
    || fail "--mem-margin 20% not left free"
"$B" plan --gpus 512 --params 175B --top 1 --mem-margin 10 --json >"$T/m10.json" || fail "plan --mem-margin 10"
python3 -c "
import json,sys; m=json.load(open('$T/m10.json'))['prediction']['memory']
assert m['capacity_bytes'] - m['peak_bytes'] >= 10 * 2**30" && ok "--mem-margin 10 (GiB): 10 GiB left" \
    || fail "--mem-margin 10 not left free"

# 3. predict: the margin line, the Megatron warning, the JSON objects
out=$("$B" predict --params 175B --gpus 512 --tp 8 --pp 4 --stage-layers 20,28,24,24 2>"$T/err") || fail "predict uneven middle"
grep -q "^memory margin .*GiB" <<<"$out" && ok "predict prints the margin line" || fail "no margin line: $out"
grep -q "warning: Megatron-LM cannot run this layout.*first and last stage" "$T/err" \
    && ok "predict warns: $(cut -c1-120 "$T/err")" || fail "no Megatron warning: $(cat "$T/err")"
"$B" predict --params 175B --no-dropout --gpus 512 --tp 8 --pp 4 --stage-layers 20,28,24,24 --target ultraplan \
    >/dev/null 2>"$T/err" || fail "predict --target ultraplan"
[ ! -s "$T/err" ] && ok "--target ultraplan: no warning" || fail "--target ultraplan warned: $(cat "$T/err")"
# GPT-3's dropout: neither executor has it (executor/refuse.c), predict says so and plan offers nothing
"$B" predict --params 175B --gpus 512 --tp 8 --pp 4 --target ultraplan >/dev/null 2>"$T/err" || fail "predict dropout"
grep -q "executor of --target ultraplan refuses this layout: .*--no-dropout" "$T/err" \
    && ok "--target ultraplan: predict warns of dropout" || fail "no dropout warning: $(cat "$T/err")"
for t in ultraplan ultraplan-cuda; do
    "$B" plan --gpus 512 --params 175B --target $t >"$T/out" 2>&1 && fail "--target $t planned GPT-3's dropout"
    grep -q "runs no layout of it: .*dropout.*--no-dropout" "$T/out" && ok "--target $t: dropout refused by name" \
        || fail "--target $t dropout: $(cat "$T/out")"
done
"$B" predict --params 175B --gpus 640 --tp 8 --pp 5 --json 2>"$T/err" >"$T/pr.json" || fail "predict pp 5"
python3 - "$T/pr.json" <<'PY' && ok "predict --json: margin and target objects; the default pp-5 split is Megatron's" \
    || fail "predict --json margin/target"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["target"]["name"] == "megatron" and d["target"]["megatron_expressible"] is True, d["target"]
n = d["layout"]["stage_layers"]
assert len(set(n[1:-1])) == 1, n
mg = d["margin"]
assert abs(mg["margin_bytes"] - 0.05 * d["memory"]["capacity_bytes"]) < 1
assert mg["within_margin"] == (mg["free_bytes"] >= mg["margin_bytes"])
PY
[ ! -s "$T/err" ] || fail "predict pp 5 wrote to stderr: $(cat "$T/err")"

# 4. plan: a --stage-layers Megatron-LM cannot express is named; ultraplan plans it
"$B" plan --gpus 512 --params 175B --tp 8 --stage-layers 20,28,24,24 >"$T/out" 2>&1
grep -q -- "--stage-layers: .*first and last stage.*--target ultraplan" "$T/out" \
    && ok "plan names --stage-layers under megatron" || fail "plan --stage-layers: $(cat "$T/out")"
"$B" plan --gpus 512 --params 175B --no-dropout --tp 8 --stage-layers 20,28,24,24 --target ultraplan --top 1 >"$T/out" 2>&1 \
    && grep -q "20,28,24x2" "$T/out" && ok "--target ultraplan plans the uneven split" || fail "ultraplan split: $(cat "$T/out")"

# 5. bad values: one line on stderr, non-zero exit
check "--target bogus" nz "$B" plan --gpus 8 --params 7B --target bogus
check "--mem-margin -1" nz "$B" plan --gpus 8 --params 7B --mem-margin -1
check "--mem-margin 95%" nz "$B" plan --gpus 8 --params 7B --mem-margin 95%
check "--mem-margin 90GiB on 80 GiB" nz "$B" predict --params 7B --mem-margin 90GiB
check "--mem-margin junk" nz "$B" sweep --params 7B --gpus 8 --mem-margin lots

# 6. sweep and --help carry both
"$B" sweep --params 7B --gpus 8 --target ultraplan --mem-margin 2 >/dev/null 2>"$T/err" \
    && ok "sweep takes --target and --mem-margin" || fail "sweep: $(cat "$T/err")"
for c in plan sweep tui predict; do
    h=$("$B" $c --help)
    grep -q -- "--target megatron|ultraplan" <<<"$h" && grep -q -- "--mem-margin GiB|%" <<<"$h" \
        || fail "$c --help lacks --target or --mem-margin"
done
ok "--help of plan, sweep, tui and predict lists --target and --mem-margin"

[ "$fails" -eq 0 ] || { echo "$fails failure(s)"; exit 1; }
echo "all passed"
