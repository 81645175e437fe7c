#!/usr/bin/env bash
# e2e_outputs.sh — what the commands write for a user (issue 17, items 3–6):
# output paths are checked before any work; --plot names reach gnuplot as
# data, never as script; --csv and --plot replace a file atomically or not
# at all, with an error that says why.
set -u
U=${ULTRAPLAN:?}
SRC=${SRC:?}
D=$(mktemp -d)
cleanup() {
    mountpoint -q "$D/full" 2>/dev/null && umount "$D/full"
    rm -rf "$D"
}
trap cleanup EXIT
fails=0
. "$(dirname "$0")/lib.sh"   # ok, fail
CSV=$SRC/docs/accuracy/h100_published.csv
SWEEP=(sweep --params 7B --gpus 8,16 --gpu h100-sxm)
have_gnuplot=0
command -v gnuplot > /dev/null 2>&1 && have_gnuplot=1

# ---- output paths before the work ----------------------------------------------
out=$("$U" validate "$CSV" --gpu h100-sxm --json --plot "$D/nodir/x.png" 2> "$D/err"); rc=$?
if [ $rc -ne 0 ] && [ -z "$out" ] && grep -q -- "--plot: .*does not exist" "$D/err"; then
    ok "validate --plot into a missing directory: refused before the work, nothing on stdout"
else
    fail "validate --plot nodir/x.png: rc=$rc, $(wc -c <<< "$out") bytes on stdout, stderr: $(head -c 200 "$D/err")"
fi
out=$("$U" "${SWEEP[@]}" --csv "$D/nodir/x.csv" 2> "$D/err"); rc=$?
if [ $rc -ne 0 ] && [ -z "$out" ] && grep -q -- "--csv: .*does not exist" "$D/err"; then
    ok "sweep --csv into a missing directory: refused before the search"
else
    fail "sweep --csv nodir/x.csv: rc=$rc, stderr: $(head -c 200 "$D/err")"
fi
"$U" fit "$CSV" --gpu h100-sxm -o "$D/nodir/f.json" > /dev/null 2> "$D/err"; rc=$?
if [ $rc -ne 0 ] && grep -q -- "-o: .*does not exist" "$D/err"; then
    ok "fit -o into a missing directory: refused before the fit"
else
    fail "fit -o nodir/f.json: rc=$rc, stderr: $(head -c 200 "$D/err")"
fi
"$U" plan --gpus 1 --layers 2 --hidden 64 --heads 2 --seq 32 --vocab 64 --gbs 2 --gpu h100-sxm -o "$D/p1.json" > /dev/null
echo "some text to train on" > "$D/t.txt"
"$U" run "$D/p1.json" --data "$D/t.txt" --steps 2 -o "$D/nodir/run.json" > /dev/null 2> "$D/err"; rc=$?
[ $rc -ne 0 ] && grep -q -- "run: -o: .*does not exist" "$D/err" && ok "run -o into a missing directory: refused before training" ||
    fail "run -o nodir/run.json: rc=$rc, stderr: $(head -c 200 "$D/err")"
"$U" calibrate --backend cpu -o "$D/nodir/cpu.json" > /dev/null 2> "$D/err"; rc=$?
[ $rc -ne 0 ] && grep -q -- "calibrate: -o: .*does not exist" "$D/err" &&
    ok "calibrate -o into a missing directory: refused before measuring" ||
    fail "calibrate -o nodir/cpu.json: rc=$rc, stderr: $(head -c 200 "$D/err")"
mkdir -p "$D/adir"
"$U" predict --params 7B --gpus 8 -o "$D/adir" > /dev/null 2> "$D/err"; rc=$?
[ $rc -ne 0 ] && [ -d "$D/adir" ] && ok "predict -o DIR: refused, the directory left alone" ||
    fail "predict -o DIR: rc=$rc"

# ---- --plot names are data, not script --------------------------------------------
if [ $have_gnuplot -eq 1 ]; then
    (cd "$D" && "$U" validate "$CSV" --gpu h100-sxm --summary --plot "it's.png" > /dev/null 2> "$D/err"); rc=$?
    if [ $rc -eq 0 ] && [ -s "$D/it's.png" ] && [ ! -e "$D/it" ]; then
        ok "--plot \"it's.png\": the picture at that name, no stray file"
    else
        fail "--plot \"it's.png\": rc=$rc, $(ls "$D" | tr '\n' ' '), stderr: $(head -c 200 "$D/err")"
    fi
    evil="x'; system('touch pwned'); set output 'y.png"
    (cd "$D" && "$U" validate "$CSV" --gpu h100-sxm --summary --plot "$evil" > /dev/null 2>&1)
    [ ! -e "$D/pwned" ] && ok "a crafted --plot name runs nothing" || fail "a crafted --plot name ran a command"
    (cd "$D" && "$U" "${SWEEP[@]}" --models "gpt3-175b" --plot "$evil" > /dev/null 2>&1)
    [ ! -e "$D/pwned" ] && ok "sweep: a crafted --plot name runs nothing" || fail "sweep: a crafted --plot name ran a command"
else
    echo "skip gnuplot missing: --plot names not checked"
fi

# ---- atomic replacement on a full disk ----------------------------------------------
mkdir -p "$D/full"
if mount -t tmpfs -o size=64k tmpfs "$D/full" 2> /dev/null; then
    printf 'old csv\n' > "$D/full/s.csv"
    printf 'old png\n' > "$D/full/v.png"
    dd if=/dev/zero of="$D/full/filler" bs=1k count=200 2> /dev/null   # fills it: dd stops at ENOSPC
    "$U" "${SWEEP[@]}" --csv "$D/full/s.csv" > /dev/null 2> "$D/err"; rc=$?
    if [ $rc -ne 0 ] && [ "$(cat "$D/full/s.csv")" = "old csv" ] && grep -q "No space left" "$D/err" &&
        ! ls "$D/full"/s.csv.tmp.* > /dev/null 2>&1; then
        ok "sweep --csv on a full disk: error, the old CSV intact, no temporary left"
    else
        fail "sweep --csv on a full disk: rc=$rc, now \"$(head -c 40 "$D/full/s.csv")\", stderr: $(head -c 200 "$D/err")"
    fi
    if [ $have_gnuplot -eq 1 ]; then
        "$U" validate "$CSV" --gpu h100-sxm --summary --plot "$D/full/v.png" > /dev/null 2> "$D/err"; rc=$?
        if [ $rc -ne 0 ] && [ "$(cat "$D/full/v.png")" = "old png" ] && grep -q "No space left" "$D/err"; then
            ok "validate --plot on a full disk: error, the old PNG intact"
        else
            fail "validate --plot on a full disk: rc=$rc, stderr: $(head -c 200 "$D/err")"
        fi
    fi
    umount "$D/full"
else
    echo "skip full disk: cannot mount a tmpfs here"
fi

echo "$fails output check(s) failed"
[ $fails -eq 0 ]
