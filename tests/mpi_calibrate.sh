#!/bin/bash
# calibrate --backend cpu under mpirun -np 2: the profile it writes holds the
# collective and all-to-all constants (coll_eff, a2a_lat, a2a_eff) as
# positive numbers in their ranges, the all-to-all sizes and their fit are
# printed, and predict reads the profile back.
set -u
command -v mpirun >/dev/null || { echo "mpirun not found: skipped"; exit 77; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1 OMP_NUM_THREADS=1
D=$(mktemp -d)
trap 'rm -rf "$D"' EXIT
U=$ULTRAPLAN
SRC=${SRC:-$(cd "$(dirname "$0")/.." && pwd)}
fails=0
. "$(dirname "$0")/lib.sh"   # ok, fail

# The planning binary links GSL, and with it libgslcblas; the executor module
# must bind cblas_sgemm to its own OpenBLAS (dlopen with RTLD_DEEPBIND), not to
# the reference CBLAS loaded first (which made calibrate's GEMM sweep take
# minutes). glibc's LD_DEBUG shows where the symbol went.
# (a one-process run of a 2-rank plan: the module loads, then the run stops)
printf 'x%.0s' $(seq 1 3000) > "$D/bytes.txt"
LD_DEBUG=bindings "$U" run "$SRC/tests/data/plan-2149dca.json" --data "$D/bytes.txt" --steps 1 > /dev/null 2> "$D/bind" || true
if grep -q "symbol \`cblas_sgemm'" "$D/bind"; then
    grep "symbol \`cblas_sgemm'" "$D/bind" | grep -q "libultraplan-exec.so.*libopenblas" &&
        ok "the exec module's cblas_sgemm is OpenBLAS's" ||
        fail "cblas_sgemm bound elsewhere: $(grep "symbol \`cblas_sgemm'" "$D/bind" | head -2)"
fi
pre=""
# shellcheck disable=SC2086
mpirun --oversubscribe -np 2 $pre "$U" calibrate --backend cpu -o "$D/cpu.json" > "$D/out" 2> "$D/err" ||
    { cat "$D/out" "$D/err"; echo "FAIL calibrate -np 2"; exit 1; }

# a number field of the written profile ("key": value, cJSON's layout)
field() { sed -nE "s/^[[:space:]]*\"$1\":[[:space:]]*([-0-9.eE+]+),?$/\1/p" "$D/cpu.json" | head -n 1; }
for k in coll_eff a2a_lat a2a_eff; do
    v=$(field $k)
    [ -n "$v" ] && awk -v v="$v" 'BEGIN { exit !(v > 0) }' && ok "$k = $v, positive" || fail "$k is \"$v\" in $D/cpu.json"
done
for k in coll_eff a2a_eff; do
    v=$(field $k)
    awk -v v="${v:-2}" 'BEGIN { exit !(v <= 1) }' && ok "$k <= 1" || fail "$k = $v above 1"
done
n=$(grep -c '^all-to-all .* B per rank .* us .* GB/s bus bandwidth (2 ranks)$' "$D/out")
[ "$n" -ge 4 ] && ok "$n all-to-all sizes printed" || fail "all-to-all sizes printed: $n"
grep -q '^all-to-all fit: a2a_lat .* us, a2a_eff .*% of the link' "$D/out" && ok "the fit printed" ||
    fail "no fit line in: $(cat "$D/out")"
grep -q '^calibrated .*all-to-all +.* us at .*% -> ' "$D/out" && ok "summary names the all-to-all" ||
    fail "summary: $(tail -n 1 "$D/out")"

# predict reads it (the loader validates every field), an MoE layout with ep 2
"$U" predict --profile "$D/cpu.json" --layers 2 --hidden 64 --heads 4 --seq 32 --vocab 256 --experts 4 --topk 2 \
    --gpus 2 --ep 2 --dp 2 --gbs 4 --mbs 2 --precision fp32 > "$D/pred" 2>&1 && ok "predict reads the profile" ||
    fail "predict --profile: $(head -c 300 "$D/pred")"

[ $fails -eq 0 ]
