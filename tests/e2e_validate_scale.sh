#!/bin/bash
# e2e: validate on many rows in bounded memory (issue 17 item 12: a RunRow is
# 3 KB, so 1,000,000 rows took 3.7 GB, and ranking and grouping were
# quadratic). 100,000 rows of a few groups and 20,000 rows of a distinct model
# each, under a 120 MB address-space limit (a kept RunRow a row needs 330 MB
# for the first case alone); the counts and groups checked against how the
# rows were generated. Not timed (bench/bench_validate.sh prints the time).
set -u
U=${ULTRAPLAN:?}
fails=0
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL $*"; fails=$((fails + 1)); }

few=100000 distinct=20000 limit=120000
# ASan reserves terabytes of address space and is slower: no limit, fewer rows
if grep -q __asan_init "$U" 2>/dev/null; then few=20000 distinct=5000 limit=; fi

# few groups: 8 models (layers 16, 24, ... 72) on 8 GPUs (tp 2 pp 2 dp 2), measured 100..1096 ms
awk -v n=$few 'BEGIN { print "layers,hidden,heads,seq,tp,pp,dp,mbs,gbs,time_ms"
    for (i = 0; i < n; i++) printf "%d,2048,16,2048,2,2,2,1,64,%d\n", 16 + 8 * (i % 8), 100 + (i * 7919) % 997 }' > "$T/few.csv"
# a distinct model a row: layers 8..1007 by hidden 1024 + 128k (heads 16 divide every hidden size)
awk -v n=$distinct 'BEGIN { print "layers,hidden,heads,seq,tp,pp,dp,mbs,gbs,time_ms"
    for (i = 0; i < n; i++) printf "%d,%d,16,2048,1,1,8,1,64,%d\n", 8 + i % 1000, 1024 + 128 * int(i / 1000), 100 + i % 997 }' > "$T/distinct.csv"

# one BLAS thread: OpenBLAS threads that cannot map their arena under the limit hang at exit
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
run() {   # run FILE ARGS...: validate under the limit, output in $T/out
    ( [ -n "$limit" ] && ulimit -v $limit; exec "$U" validate "$@" --gpu h100-sxm ) > "$T/out" 2> "$T/err"
}
section() {   # the group lines of one "by KIND" section of $T/out
    awk -v k="by $1" '$0 == k || index($0, k " (") == 1 { on = 1; getline; next } /^$/ { on = 0 } on' "$T/out"
}

if run "$T/few.csv" --summary; then
    grep -q "^$few runs on profile h100-sxm" "$T/out" || fail "few groups: no \"$few runs\" line: $(head -1 "$T/out")"
    [ "$(section model | wc -l)" -eq 8 ] || fail "few groups: $(section model | wc -l) model groups, want 8"
    # every model holds n/8 rows
    bad=$(section model | awk -v want=$((few / 8)) '$(NF - 6) != want' | head -1)
    [ -z "$bad" ] || fail "few groups: a model group without $((few / 8)) rows: $bad"
    [ "$(section gpus)" != "" ] && [ "$(section gpus | wc -l)" -eq 1 ] || fail "few groups: want one GPU-count group"
    echo "ok   $few rows, 8 groups, under ${limit:-no} KB"
else
    fail "few groups: exit $?: $(cat "$T/err")"
fi

if run "$T/distinct.csv" --summary; then
    grep -q "^$distinct runs on profile h100-sxm" "$T/out" || fail "distinct: no \"$distinct runs\" line"
    for k in model model+gpus model+gpus+gbs; do
        [ "$(section $k | wc -l)" -eq $distinct ] || fail "distinct: $(section $k | wc -l) $k groups, want $distinct"
    done
    # first appearance order: the first and last model groups
    first=$(section model | head -1 | awk '{ print $1, $2, $3, $4 }')
    last=$(section model | tail -1 | awk '{ print $1, $2, $3, $4 }')
    want_last="h$((1024 + 128 * ((distinct - 1) / 1000))) L$((8 + (distinct - 1) % 1000)) a16 s2048"
    [ "$first" = "h1024 L8 a16 s2048" ] || fail "distinct: first model group \"$first\""
    [ "$last" = "$want_last" ] || fail "distinct: last model group \"$last\", want \"$want_last\""
    echo "ok   $distinct rows, a group each, under ${limit:-no} KB"
else
    fail "distinct: exit $?: $(cat "$T/err")"
fi

# --json streams its rows: every row once, and a document jq/python can read
if run "$T/distinct.csv" --json; then
    n=$(grep -c '^			"line":' "$T/out")
    [ "$n" -eq $distinct ] || fail "--json: $n rows, want $distinct"
    if command -v python3 > /dev/null; then
        python3 -c 'import json, sys; d = json.load(open(sys.argv[1])); assert len(d["rows"]) == int(sys.argv[2]); assert len(d["groups"]) == 3 * int(sys.argv[2]) + 2' "$T/out" $distinct ||
            fail "--json: not the document expected"
    fi
    echo "ok   --json of $distinct rows"
else
    fail "--json: exit $?: $(cat "$T/err")"
fi

[ $fails -eq 0 ] || { echo "$fails failures"; exit 1; }
echo "all ok"
