#!/usr/bin/env bash
# e2e_help.sh — --help says what each command does when a flag is left out,
# and contradicting or useless flags are refused (issue 17 item 18).
set -u
U=${ULTRAPLAN:?}
D=$(mktemp -d)
trap 'rm -rf "$D"' EXIT
fails=0
. "$(dirname "$0")/lib.sh"   # ok, fail
has() { grep -Eq -- "$2" <<< "$1"; }
# refused NAME PATTERN CMD...: non-zero exit, PATTERN on stderr
refused() {
    local name=$1 pat=$2
    shift 2
    "$@" > /dev/null 2> "$D/err"
    local rc=$?
    [ $rc -ne 0 ] && grep -Eq -- "$pat" "$D/err" && ok "$name" || fail "$name: rc=$rc, stderr: $(head -c 200 "$D/err")"
}

p=$("$U" plan --help) && r=$("$U" predict --help) && x=$("$U" export --help) && c=$("$U" calibrate --help) &&
    t=$("$U" tui --help) && fh=$("$U" fit --help) || fail "--help exits"
has "$p" '--tp N +tensor parallel size \(searched unless given\)' && ok "plan --help: searched knobs say so" ||
    fail "plan --help --tp: $(grep -- '--tp N' <<< "$p")"
has "$p" '--gpus N +GPUs in the job \(required\)' && ok "plan --help: --gpus required" || fail "plan --help --gpus"
has "$r" '--tp N +tensor parallel size \(default 1\)' && has "$r" '--gpus N +GPUs in the job \(default tp\*pp\*cp\*dp' &&
    ok "predict --help: defaults, --gpus from the layout" || fail "predict --help defaults"
has "$x" 'slurm formats:' && has "$x" '--time LIMIT +#SBATCH --time' && has "$x" '\(default 48:00:00\)' && ok "export --help: Slurm flags and defaults" ||
    fail "export --help"
has "$c" '--backend cpu\|cuda +what to measure \(default cpu\)' && ok "calibrate --help: default backend" || fail "calibrate --help"
! has "$t" '--json' && ! has "$t" '--output' && ok "tui --help: no --json or -o" || fail "tui --help lists --json/-o"
has "$fh" '\[--profile base.json \| --gpu NAME\]' && ok "fit --help: the profile is optional" || fail "fit --help marks --gpu required"

"$U" plan --gpus 1 --layers 2 --hidden 64 --heads 2 --seq 32 --vocab 64 --gbs 2 --gpu h100-sxm -o "$D/plan.json" > /dev/null
echo "text" > "$D/t.txt"
refused "--sp --no-sp" "--sp and --no-sp contradict each other" "$U" predict --params 7B --gpus 8 --tp 8 --sp --no-sp
refused "--tp 1 --sp" "--sp needs --tp > 1" "$U" predict --params 7B --gpus 8 --tp 1 --sp
refused "run --checkpoint-every without a directory" "--checkpoint-every needs --checkpoint-dir" \
    "$U" run "$D/plan.json" --data "$D/t.txt" --checkpoint-every 5
refused "export --format megatron --time" "--time is for --format slurm" "$U" export "$D/plan.json" --format megatron --time 1:00:00
refused "tui --json" "--json does nothing here" "$U" tui --params 7B --json --snapshot
refused "tui -o" "-o does nothing here" "$U" tui --params 7B -o "$D/x" --snapshot
refused "tui --snapshot too small" "too small; the TUI needs at least 64 columns by 22 rows" \
    "$U" tui --params 7B --gpus 8 --tp 8 --snapshot --rows 5 --cols 20

"$U" predict --params 175B > /dev/null 2> "$D/err" && grep -q "prediction for one GPU" "$D/err" &&
    ok "predict without --gpus or a layout says it is one GPU" || fail "predict --params 175B: $(cat "$D/err")"
out=$("$U" predict --layers 2 --hidden 64 --heads 2 --seq 32 --vocab 64 --gbs 2 --gpus 1 2> /dev/null)
has "$out" 'assumed .*--bias off.*--dropout off' && ok "an explicit shape says what it assumed" ||
    fail "explicit shape: $(sed -n 2p <<< "$out")"
out=$("$U" predict --layers 2 --hidden 64 --heads 2 --seq 32 --vocab 64 --gbs 2 --gpus 1 --bias --dropout 2> /dev/null)
! has "$out" '--bias off' && has "$out" 'assumed' && ok "... and not what was given" || fail "given flags listed as assumed"

# one default GPU: h100-sxm, as every command; vTrain's files are A100 runs and say so by their header
SRC=${SRC:-$(cd "$(dirname "$0")/.." && pwd)}
"$U" validate "$SRC/docs/accuracy/h100_published.csv" --summary | grep -q "runs on profile h100-sxm" &&
"$U" validate "$SRC/validation/vtrain/multi_node.csv" --summary | grep -q "runs on profile a100-80g" &&
    ok "validate's default profile: h100-sxm, a100-80g for vTrain's A100 runs" || fail "validate's default profile"

echo "$fails help check(s) failed"
[ $fails -eq 0 ]
