#!/usr/bin/env bash
# e2e_readers.sh — what the readers and the command line say about bad input
# (issue 17 items 11, 13): a directory is "a directory", a file too large is
# refused at its limit, a JSON key given twice is refused naming the field,
# and a bad option value names its flag.
set -u
U=${ULTRAPLAN:?}
D=$(mktemp -d)
trap 'rm -rf "$D"' EXIT
fails=0
. "$(dirname "$0")/lib.sh"   # ok, fail
# expect NAME PATTERN CMD...: non-zero exit and PATTERN (grep -E) on stderr
expect() {
    local name=$1 pat=$2
    shift 2
    "$@" > /dev/null 2> "$D/err"
    local rc=$?
    if [ $rc -ne 0 ] && grep -Eq -- "$pat" "$D/err"; then ok "$name"; else fail "$name: rc=$rc, stderr: $(head -c 300 "$D/err")"; fi
}

"$U" plan --gpus 1 --layers 2 --hidden 64 --heads 2 --seq 32 --vocab 64 --gbs 2 --gpu h100-sxm -o "$D/plan.json" > /dev/null ||
    fail "a small plan"
mkdir -p "$D/dir"
echo "text to train on" > "$D/t.txt"

# ---- directories given as files ------------------------------------------------------
expect "compare PLAN DIR" "$D/dir: is a directory" "$U" compare "$D/plan.json" "$D/dir"
expect "export DIR" "$D/dir: is a directory" "$U" export "$D/dir" --format megatron
expect "predict --profile DIR" "profile $D/dir: is a directory" "$U" predict --params 7B --profile "$D/dir"
expect "validate DIR" "$D/dir: is a directory" "$U" validate "$D/dir" --gpu h100-sxm

# ---- sizes ---------------------------------------------------------------------------
expect "predict --profile /dev/zero: refused at the limit" "larger than [0-9]+ bytes" \
    timeout 20 "$U" predict --params 7B --profile /dev/zero
expect "validate /dev/zero: refused at the limit" "larger than [0-9]+ bytes" timeout 60 "$U" validate /dev/zero --gpu h100-sxm

# ---- a JSON key given twice ----------------------------------------------------------
python3 - "$D/plan.json" "$D/dup_plan.json" <<'PY'
import sys
t = open(sys.argv[1]).read()
open(sys.argv[2], "w").write(t.replace('"tp":', '"tp":\t16,\n\t\t"tp":', 1))
PY
expect "plan.json with layout.tp twice" 'field "layout.tp": appears twice' "$U" export "$D/dup_plan.json" --format megatron
"$U" models > /dev/null
python3 - "$D/plan.json" "$D/dup_prof.json" <<'PY'
import json, sys
hw = json.dumps(json.load(open(sys.argv[1]))["hardware"], indent=1)
open(sys.argv[2], "w").write(hw.replace('"hbm_bw":', '"hbm_bw": 1e9, "hbm_bw":', 1))
PY
expect "profile with hbm_bw twice" 'field "hbm_bw": appears twice' "$U" predict --params 7B --profile "$D/dup_prof.json"

# ---- option values name their flag ---------------------------------------------------
for a in "--steps 0:--steps" "--lr abc:--lr" "--backend tpu:--backend" "--checkpoint-every 0:--checkpoint-every" \
         "--comm-timeout -1:--comm-timeout" "--steps 99999999999999:--steps"; do
    flag=${a#*:}
    read -r -a args <<< "${a%%:*}"
    expect "run ${a%%:*}: names $flag" "ultraplan run: $flag: expected" "$U" run "$D/plan.json" --data "$D/t.txt" "${args[@]}"
done
expect "export --format without its value names --format" "option --format: unknown or missing its value" \
    "$U" export "$D/plan.json" --format

# ---- did you mean (item 25) -------------------------------------------------------------
expect "unknown command: did you mean" 'unknown command "predcit" \(did you mean predict\?\)' "$U" predcit
expect "unknown preset: did you mean" 'unknown model "gpt3-175" \(did you mean gpt3-175b\?\)' "$U" predict --model gpt3-175
expect "unknown GPU: did you mean" 'unknown GPU profile "h10-sxm" \(did you mean h100-sxm\?\)' "$U" predict --params 7B --gpu h10-sxm
expect "unknown flag: did you mean" 'option --tpp: unknown \(did you mean --tp\?\)' "$U" predict --params 7B --tpp 2
expect "nothing near: no suggestion" 'unknown command "zzzzzzzz" \(try' "$U" zzzzzzzz

# ---- models --json: every preset and GPU of the table, in the table's terms -----------------
"$U" models > "$D/models.txt" && "$U" models --json > "$D/models.json" || fail "models / models --json"
python3 - "$D/models.txt" "$D/models.json" <<'PY' && ok "models --json lists what models prints, with counts and sources" || fail "models --json"
import json, sys
text = open(sys.argv[1]).read().split("\n\n")
presets = [l.split()[0] for l in text[0].splitlines()[1:] if l.strip()]
gpus = [l.split()[0] for l in text[1].splitlines()[1:] if l.strip()]
d = json.load(open(sys.argv[2]))
assert d["format"] == "ultraplan.models/1"
assert [p["name"] for p in d["presets"]] == presets, ([p["name"] for p in d["presets"]], presets)
assert [g["name"] for g in d["gpus"]] == gpus
for p in d["presets"]:
    assert p["params"] > 1e8 and p["source"] and p["layers"] >= 1 and p["heads"] >= 1, p
# DeepSeek-V3 as published (arXiv:2412.19437 §1: 671B total, 37B activated, the MTP module apart)
ds = [l.split() for l in text[0].splitlines()[1:] if l.startswith("deepseek-v3 ")][0]
total, mtp, active = float(ds[1].rstrip("B")), ds[2], float(ds[3].rstrip("B"))
assert abs(total / 671 - 1) < 0.005, ds[:4]
assert abs(active / 37 - 1) < 0.02, ds[:4]
assert mtp != "-" and 5 < float(mtp.rstrip("B")) < 20, ds[:4]
# and so in JSON: params and params_active are the main model's, the MTP module's apart
dj = [p for p in d["presets"] if p["name"] == "deepseek-v3"][0]
assert abs(dj["params"] / 671e9 - 1) < 0.005, dj["params"]
assert abs(dj["params_active"] / 37e9 - 1) < 0.02, dj["params_active"]
assert abs(dj["params"] / 1e9 - total) < 0.01 and abs(dj["params_mtp"] / 1e9 - float(mtp.rstrip("B"))) < 0.05, dj
assert [l.split()[2] for l in text[0].splitlines()[1:] if l.startswith("gpt3-175b ")] == ["-"]   # no MTP
g175 = [p for p in d["presets"] if p["name"] == "gpt3-175b"][0]
assert (g175["layers"], g175["hidden"], g175["heads"]) == (96, 12288, 96), g175   # Brown et al. 2020, Table 2.1
PY

echo "$fails reader check(s) failed"
[ $fails -eq 0 ]
