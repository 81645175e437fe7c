#!/bin/bash
# e2e: validate and fit end to end. Accuracy regression against vTrain's
# measured runs (fails if the model gets worse), and bad inputs that must
# give one error line and a non-zero exit.
set -u
U=${ULTRAPLAN:?}
V=${SHARED:?}/validation/vtrain
fails=0
check() {  # check NAME WANT_RC CMD...: WANT_RC "nz" = any non-zero
    local name=$1 want=$2; shift 2
    local out rc
    out=$("$@" 2>&1 >/dev/null); rc=$?
    if [ "$want" = nz ] && [ $rc -ne 0 ] && [ "$(printf '%s\n' "$out" | grep -c .)" -eq 1 ]; then
        echo "ok   $name: $out"
    elif [ "$want" != nz ] && [ $rc -eq "$want" ]; then
        echo "ok   $name"
    else
        echo "FAIL $name: rc=$rc, stderr: $out"; fails=$((fails + 1))
    fi
}
if [ ! -f "$V/single_node.csv" ]; then echo "no $V; skipped"; exit 77; fi

# Accuracy: the current figures plus a small margin (docs/accuracy/NOTES.md).
# Targets of issue 5 are 8 % on both; single-node meets it, multi-node does not yet.
check "vtrain single-node MAPE <= 8.5%" 0 "$U" validate "$V/single_node.csv" --summary --max-mape 8.5
check "vtrain multi-node MAPE <= 13.5%" 0 "$U" validate "$V/multi_node.csv" --summary --max-mape 13.5
out=$("$U" validate "$V/multi_node.csv" --json)
echo "$out" | grep -q '"mape"' || { echo "FAIL json has no summary mape"; fails=$((fails + 1)); }
echo "$out" | grep -q '"regret"' || { echo "FAIL json has no group regret"; fails=$((fails + 1)); }
check "fit with hold-out runs" 0 "$U" fit "$V/single_node.csv" "$V/multi_node.csv" --gpu a100-80g \
      --holdout-where 'gpus>=256' -o "${TMPDIR:-/tmp}/ultraplan-fit-$$.json"
check "fitted profile loads" 0 "$U" validate "$V/multi_node.csv" --profile "${TMPDIR:-/tmp}/ultraplan-fit-$$.json" --summary
rm -f "${TMPDIR:-/tmp}/ultraplan-fit-$$.json"

# Bad inputs: one line, non-zero exit.
bad=$(mktemp); printf 'layers,hidden,heads,seq,tp,pp,dp,mbs,gbs,time_ms\n24,1024,16,1024,1,1,x,1,8,100\n' > "$bad"
check "validate: missing file" nz "$U" validate /nonexistent/runs.csv
check "validate: bad CSV" nz "$U" validate "$bad"
check "validate: no file" nz "$U" validate
check "validate: bad flag" nz "$U" validate "$V/single_node.csv" --bogus
check "validate: bad --max-mape" nz "$U" validate "$V/single_node.csv" --max-mape x
check "validate: unknown gpu" nz "$U" validate "$V/single_node.csv" --gpu z100
check "validate: --gpu and --profile" nz "$U" validate "$V/single_node.csv" --gpu a100 --profile x.json
check "fit: missing file" nz "$U" fit /nonexistent/runs.csv
check "fit: bad CSV" nz "$U" fit "$bad"
check "fit: bad --params" nz "$U" fit "$V/single_node.csv" --params warp_drive
check "fit: bad --holdout" nz "$U" fit "$V/single_node.csv" --holdout 1.5
check "fit: bad --holdout-where" nz "$U" fit "$V/single_node.csv" --holdout-where 'colour>3'
check "fit: missing profile" nz "$U" fit "$V/single_node.csv" --profile /nonexistent.json
rm -f "$bad"
if "$U" --help | grep -q '^  sweep'; then
    check "sweep: bad flag" nz "$U" sweep --bogus
fi
[ $fails -eq 0 ] || { echo "$fails failed"; exit 1; }
echo "all passed"
