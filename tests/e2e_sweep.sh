#!/bin/bash
# e2e: `ultraplan sweep`. Bad flags give one error line and exit 2; a small
# sweep's CSV has one row per (model, GPU count), feasible cells carry a
# layout whose GPUs multiply to the cell's count and an MFU in (0, 1], and an
# infeasible cell keeps its reason.
set -u
U=${ULTRAPLAN:?}
fails=0
. "$(dirname "$0")/lib.sh"   # check()
fail() { echo "FAIL $*"; fails=$((fails + 1)); }

check "sweep: bad flag" nz "$U" sweep --bogus
check "sweep: bad --gpus" nz "$U" sweep --gpus 64,x
check "sweep: empty --gpus item" nz "$U" sweep --gpus 64,,128
check "sweep: zero --gpus" nz "$U" sweep --gpus 0
check "sweep: bad --params" nz "$U" sweep --params 7B,warp
check "sweep: unknown preset" nz "$U" sweep --models no-such-model
check "sweep: --params and --models" nz "$U" sweep --params 7B --models llama2-7b
check "sweep: unknown gpu" nz "$U" sweep --params 7B --gpus 8 --gpu z100
check "sweep: stray argument" nz "$U" sweep --params 7B extra
check "sweep: -o" nz "$U" sweep --params 7B -o x.json
check "sweep: help" 0 "$U" sweep --help

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# 1.3B and 13B on 8 and 16 A100s, plus 405B on 8 GPUs, which cannot fit
if ! "$U" sweep --params 1.3B,13B,405B --gpus 8,16 --gpu a100-80g --csv "$tmp/s.csv" > "$tmp/out.txt"; then
    fail "small sweep exited non-zero"
else
    [ "$(wc -l < "$tmp/s.csv")" -eq 7 ] || fail "csv has $(wc -l < "$tmp/s.csv") lines, want header + 6"
    head -1 "$tmp/s.csv" | grep -q '^model,params_b,gpus,gbs,seq,feasible,tp,pp,dp,cp,vp,mbs,' || fail "csv header"
    # feasible rows: tp*pp*dp*cp = gpus and 0 < mfu <= 1; the 405B rows are infeasible with a reason
    awk -F, 'NR > 1 && $1 != "405B" {
                 if ($6 != 1) { print "FAIL " $1 " on " $3 " not feasible"; bad++ ; next }
                 if ($7 * $8 * $9 * $10 != $3) { print "FAIL " $1 " on " $3 ": tp*pp*dp*cp = " $7*$8*$9*$10; bad++ }
                 if (!($17 > 0 && $17 <= 1)) { print "FAIL " $1 " on " $3 ": mfu " $17; bad++ }
                 if (!($18 > 0)) { print "FAIL " $1 " on " $3 ": tokens/s/GPU " $18; bad++ }
             }
             NR > 1 && $1 == "405B" && ($6 != 0 || $0 !~ /does not fit/) { print "FAIL 405B row: " $0; bad++ }
             END { exit bad > 0 }' "$tmp/s.csv" || fails=$((fails + 1))
    grep -q "—" "$tmp/out.txt" || fail "table shows no dash for the infeasible cell"
    grep -q "1.3B .* 8 " "$tmp/out.txt" || fail "table has no 1.3B row"
fi
# DeepSeek-V3's parameters as published: 671B main model, the MTP module apart
# (DeepSeek-V3 technical report, arXiv:2412.19437, §1 and §4.2: 671B total + 14B MTP)
"$U" sweep --models deepseek-v3 --gpus 1024 --csv "$tmp/ds.csv" > "$tmp/ds.txt" || fail "deepseek-v3 sweep exited non-zero"
awk -F, 'NR == 2 { d = $2 / 671 - 1; exit !(d > -0.005 && d < 0.005) }' "$tmp/ds.csv" \
    || fail "deepseek-v3 params_b $(awk -F, 'NR == 2 { print $2 }' "$tmp/ds.csv"), published 671 (+ MTP apart)"
grep -qE "^deepseek-v3 +671B " "$tmp/ds.txt" || fail "sweep table: deepseek-v3 is not 671B: $(grep deepseek "$tmp/ds.txt")"
"$U" sweep --params 1.3B,405B --gpus 8 --gpu a100-80g --json > "$tmp/s.json" || fail "json sweep exited non-zero"
python3 - "$tmp/s.json" <<'PY' || fails=$((fails + 1))
import json, sys
d = json.load(open(sys.argv[1]))
c = d["cells"]
assert len(c) == 2, c
assert c[0]["feasible"] and 0 < c[0]["mfu"] <= 1 and c[0]["layout"]["tp"] >= 1, c[0]
assert not c[1]["feasible"] and "fit" in c[1]["reason"], c[1]
PY
# the default batch follows each cell's GPU count (scenario.h): 7B is GPT-3's 6.7B row, 2M tokens =
# 488 sequences of 4096 -> 512 on 8 GPUs; on 24 (odd part 3) 488 / 3 = 163 -> 3 x 128 = 384
"$U" sweep --params 7B --gpus 8,24 --gpu h100-sxm --csv "$tmp/g.csv" > /dev/null || fail "gbs sweep exited non-zero"
[ "$(awk -F, 'NR > 1 { printf "%s ", $4 }' "$tmp/g.csv")" = "512 384 " ] ||
    fail "default gbs per GPU count: $(awk -F, 'NR > 1 { printf "%s ", $4 }' "$tmp/g.csv"), want 512 384"
# fp8: MFU is against the fp8 peak; mfu_bf16_peak (CSV's last column, JSON) is against bf16's,
# empty / absent when the cell is not fp8
"$U" sweep --params 1.3B --gpus 8 --gpu h100-sxm --precision fp8 --csv "$tmp/f8.csv" --json > "$tmp/f8.json" ||
    fail "fp8 sweep exited non-zero"
"$U" sweep --params 1.3B --gpus 8 --gpu h100-sxm --csv "$tmp/b16.csv" > "$tmp/b16.txt" || fail "bf16 sweep exited non-zero"
grep -q "against the bf16 peak" "$tmp/b16.txt" && fail "bf16 sweep prints the fp8 note"
python3 - "$tmp/f8.csv" "$tmp/f8.json" "$tmp/b16.csv" <<'PY' || fails=$((fails + 1))
import csv, json, sys
r = list(csv.DictReader(open(sys.argv[1])))[0]
assert abs(float(r["mfu_bf16_peak"]) / float(r["mfu"]) - 1979 / 989) < 1e-4, r
c = json.load(open(sys.argv[2]))["cells"][0]
assert abs(c["mfu_bf16_peak"] / c["mfu"] - 1979 / 989) < 1e-9, c
b = list(csv.DictReader(open(sys.argv[3])))[0]
assert b["mfu_bf16_peak"] == "" and float(b["mfu"]) > 0, b
PY
if command -v gnuplot > /dev/null; then
    "$U" sweep --params 1.3B --gpus 8,16 --gpu a100-80g --plot "$tmp/s.png" > /dev/null || fail "plot exited non-zero"
    [ -s "$tmp/s.png" ] || fail "no png written"
else
    check "sweep: --plot without gnuplot" nz "$U" sweep --params 1.3B --gpus 8 --plot "$tmp/s.png"
fi
[ $fails -eq 0 ] || { echo "$fails failed"; exit 1; }
echo "all passed"
