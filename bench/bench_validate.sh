#!/bin/sh
# bench_validate.sh — time and peak memory of `ultraplan validate` on large
# generated CSVs (issue 17 item 12: 1,000,000 rows took 9 min 20 s and 3.7 GB).
#
# usage: bench/bench_validate.sh [ULTRAPLAN] [ROWS ...]   (default: build/ultraplan, 100000 1000000)
#
# Two cases per row count, in the ultraplan CSV format:
#   few-groups  8 models x 16 layouts repeated, the measured time perturbed per row
#               (ties in rank correlation, a few large groups)
#   distinct    a distinct model per row (as many model groups as rows)
# Prints wall seconds, CPU seconds (user + system: on a shared machine the
# wall time is other people's load too) and peak RSS (/usr/bin/time -v when
# present) for `validate --summary` and `validate --json`, output to
# /dev/null. Prints figures; checks nothing.
set -eu
UP=${1:-build/ultraplan}
[ $# -gt 0 ] && shift
ROWS=${*:-100000 1000000}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

gen() {   # gen ROWS few|distinct > FILE
    awk -v n="$1" -v mode="$2" 'BEGIN {
        print "layers,hidden,heads,seq,tp,pp,dp,mbs,gbs,time_ms"
        split("1 1 8;2 1 4;4 1 2;8 1 1;1 2 4;2 2 2;4 2 1;1 4 2;2 4 1;1 8 1;8 1 1;4 1 2;2 1 4;1 1 8;2 2 2;1 2 4", lay, ";")
        for (i = 0; i < n; i++) {
            if (mode == "few") { L = 16 + 8 * (i % 8); h = 2048; }
            else { L = 8 + i % 1000; h = 1024 + 128 * int(i / 1000); }
            split(lay[1 + int(i / 8) % 16], t, " ")
            # a measured time from 100 to 1100 ms, repeating every 997 rows (ties)
            printf "%d,%d,16,2048,%d,%d,%d,1,64,%d\n", L, h, t[1], t[2], t[3], 100 + (i * 7919) % 997 * 1
        }
    }'
}

measure() {   # measure LABEL ARGS...
    label=$1; shift
    if [ -x /usr/bin/time ]; then
        /usr/bin/time -v -o "$TMP/time" "$UP" validate "$@" > /dev/null
        s=$(awk -F': ' '/Elapsed \(wall clock\)/ { n = split($2, p, ":"); t = 0; for (i = 1; i <= n; i++) t = t * 60 + p[i]; print t }' "$TMP/time")
        cpu=$(awk -F': ' '/User time|System time/ { t += $2 } END { print t }' "$TMP/time")
        kb=$(awk -F': ' '/Maximum resident set size/ { print $2 }' "$TMP/time")
        printf '%-40s %8.2f s wall %8.2f s cpu %8.1f MiB\n' "$label" "$s" "$cpu" "$(echo "$kb" | awk '{ print $1 / 1024 }')"
    else
        t0=$(date +%s.%N); "$UP" validate "$@" > /dev/null; t1=$(date +%s.%N)
        printf '%-40s %8.2f s   (no /usr/bin/time: RSS not measured)\n' "$label" "$(echo "$t0 $t1" | awk '{ print $2 - $1 }')"
    fi
}

for n in $ROWS; do
    for mode in few distinct; do
        gen "$n" "$mode" > "$TMP/runs.csv"
        measure "$n rows, $mode, --summary" "$TMP/runs.csv" --gpu h100-sxm --summary
        measure "$n rows, $mode, --json" "$TMP/runs.csv" --gpu h100-sxm --json
    done
done
