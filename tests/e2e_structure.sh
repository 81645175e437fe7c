#!/usr/bin/env bash
# e2e_structure.sh — the layering docs/DESIGN.md promises, checked on the
# source tree and on the built binary: the planning binary needs no GPU,
# MPI or BLAS library; tui/ and planner/ include nothing of cli/; kernels/
# has no NCCL and no model/; each outside library has its one home; the
# fixed-knob bits are defined once.
set -u
SRC=${SRC:?}
U=${ULTRAPLAN:?}
fails=0
. "$(dirname "$0")/lib.sh"   # ok, fail

# the headers a folder includes, one per line
includes() {
    grep -rhE '^[[:space:]]*#[[:space:]]*include[[:space:]]*[<"]' "$@" 2>/dev/null |
        sed -E 's/^[^<"]*[<"]([^>"]+)[>"].*/\1/' | sort -u
}
# the files of the library folders that include <header>
includers() {
    (cd "$SRC" && grep -rlE "^[[:space:]]*#[[:space:]]*include[[:space:]]*<$1>" --include='*.c' --include='*.h' \
        --include='*.cu' --include='*.cuh' util model profiles scenario planner calib kernels executor tui cli |
        sort | tr '\n' ' ' | sed 's/ $//')
}

# 1. the planning binary
if command -v readelf >/dev/null 2>&1; then
    bad=$(readelf -d "$U" | grep NEEDED |
          grep -Eio 'lib(mpi|open-rte|open-pal|cuda|cudart|cublas|cublasLt|nccl|openblas|gomp)[^]]*' | tr '\n' ' ')
    [ -z "$bad" ] && ok "ultraplan needs no MPI, CUDA, NCCL, BLAS or OpenMP library" ||
        fail "ultraplan needs $bad"
else
    echo "skip readelf is missing: linkage not checked"
fi

# 2. nothing below cli/ includes a cli/ header
cli_headers=$(cd "$SRC/cli" && ls ./*.h | sed 's|^\./||')
for d in util model profiles scenario planner calib kernels executor tui; do
    hit=""
    for h in $cli_headers; do
        includes "$SRC/$d" | grep -qx "$h" && hit="$hit $h"
    done
    [ -z "$hit" ] && ok "$d/ includes nothing of cli/" || fail "$d/ includes cli/$hit"
done

# 3. kernels/: no communication, no model/
hit=$(includes "$SRC/kernels" | grep -Ex 'nccl\.h|mpi\.h|cost\.h|spec\.h|hw\.h|layout\.h|memory\.h|timing\.h|train\.h' |
      tr '\n' ' ')
[ -z "$hit" ] && ok "kernels/ includes no NCCL, MPI or model/ header" || fail "kernels/ includes $hit"

# 4. model/: libc, libm and its own headers only
own=$(cd "$SRC/model" && ls ./*.h | sed 's|^\./||' | tr '\n' '|' | sed 's/|$//; s/\./\\./g')
hit=$(includes "$SRC/model" | grep -Evx "$own|math\.h|stdbool\.h|stddef\.h|stdint\.h|stdio\.h|stdlib\.h|string\.h|strings\.h|float\.h|limits\.h|ctype\.h" |
      tr '\n' ' ')
[ -z "$hit" ] && ok "model/ is pure (libc, libm, its own headers)" || fail "model/ includes $hit"

# 5. each outside library in its one home
home() {
    local got
    got=$(includers "$1")
    [ "$got" = "$2" ] && ok "<$1> only in $2" || fail "<$1> is included by: $got (expected only $2)"
}
home glpk.h planner/ilp.c
home mpi.h executor/dist.h
home nccl.h executor/cuda/cucomm.c
home curses.h tui/draw.c
home gsl/gsl_multifit_nlinear.h calib/fit.c
hit=$(cd "$SRC" && grep -rlE '\bMPI_[A-Z][a-z_]+\(' --include='*.c' --include='*.h' util model profiles scenario planner \
      calib kernels executor tui cli | grep -v '^executor/dist\.[ch]$' | tr '\n' ' ')
[ -z "$hit" ] && ok "MPI is called from executor/dist.c only" || fail "MPI called in $hit"

# 6. the fixed-knob bits, once
n=$(cd "$SRC" && grep -rlE 'FIX_TP *= *1 *<<|FX_TP' --include='*.c' --include='*.h' . | grep -v '^\./build' | tr '\n' ' ')
[ "$n" = "./scenario/knobs.h " ] && ok "fix bits defined once (scenario/knobs.h)" || fail "fix bits defined in: $n"

# 7. docs/accuracy/NOTES.md's steps have one number each, and every "NOTES[.md] step N" / "steps N, M"
#    elsewhere names a step that exists (two steps were numbered 21 once)
steps=$(grep -oE '^[0-9]+[a-z]?\. \*\*' "$SRC/docs/accuracy/NOTES.md" | sed 's/\. .*//')
dup=$(printf '%s\n' "$steps" | sort | uniq -d | tr '\n' ' ')
[ -z "$dup" ] && ok "NOTES steps numbered once each" || fail "NOTES steps numbered twice: $dup"
refs=$(cd "$SRC" && grep -rhoE 'NOTES(\.md)?`?,? steps? [0-9]+[a-z]?([,–-] ?(and )?[0-9]+[a-z]?)*' --exclude-dir=build \
       --exclude-dir=.git . | grep -oE '[0-9]+[a-z]?' | sort -u)
missing=""
for r in $refs; do printf '%s\n' "$steps" | grep -qx "$r" || missing="$missing $r"; done
[ -z "$missing" ] && ok "NOTES step references resolve" || fail "NOTES step references to no step:$missing"

echo "$fails structure check(s) failed"
[ $fails -eq 0 ]
