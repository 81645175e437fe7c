#!/usr/bin/env bash
# run.sh — build the libFuzzer harnesses with clang and run each one.
#
#   tests/fuzz/run.sh [SECONDS] [HARNESS...]
#
# SECONDS per harness (default 60). Builds into $FUZZ_BUILD (default
# build-fuzz at the top of the tree), runs each harness on a scratch copy
# of its seed corpus tests/fuzz/corpus/<harness>/ (so the checked-in corpus
# only grows by hand: copy interesting files from build-fuzz/corpus/), with
# tests/fuzz/dict/<harness>.dict when there is one. Crashes land in
# build-fuzz/crash/<harness>/. Exit 0 when nothing was found, 1 on a
# finding, 77 when clang or libFuzzer is missing (CTest: skipped).
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
secs=${1:-60}
shift || true
build=${FUZZ_BUILD:-$top/build-fuzz}
jobs=${FUZZ_JOBS:-2}

cc=${FUZZ_CC:-$(command -v clang || true)}
if [ -z "$cc" ]; then
  echo "fuzz: clang not found: skipped (apt-get install clang)"; exit 77
fi
probe=$(mktemp -d)
printf 'int LLVMFuzzerTestOneInput(const char *d, long n){return 0;}\n' >"$probe/p.c"
if ! "$cc" -fsanitize=fuzzer "$probe/p.c" -o "$probe/p" 2>/dev/null; then
  rm -rf "$probe"; echo "fuzz: $cc has no libFuzzer: skipped"; exit 77
fi
rm -rf "$probe"

cmake -S "$here" -B "$build" -DCMAKE_C_COMPILER="$cc" >"$build.configure.log" 2>&1 \
  || { cat "$build.configure.log"; exit 1; }
cmake --build "$build" -j "$jobs" >"$build.build.log" 2>&1 \
  || { grep -E 'error|Error' "$build.build.log" | head -40; exit 1; }

all=$(cd "$build" && ls fuzz_* 2>/dev/null | grep -v '\.' || true)
want=${*:-$all}
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
status=0
for h in $want; do
  [ -x "$build/$h" ] || { echo "fuzz: no harness $h"; status=1; continue; }
  work="$build/corpus/$h"; crash="$build/crash/$h"
  mkdir -p "$work" "$crash"
  [ -d "$here/corpus/$h" ] && cp -n "$here/corpus/$h"/* "$work"/ 2>/dev/null
  extra=()
  [ -f "$here/dict/$h.dict" ] && extra+=(-dict="$here/dict/$h.dict")
  # the commands print an error line per input: keep the log small (rerun a
  # crash file without this to see the harness's own message)
  [ "$h" = fuzz_cli ] && extra+=(-close_fd_mask=2)
  log="$build/$h.log"
  (cd "$build" && "./$h" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -max_len=8192 \
      -print_final_stats=1 -artifact_prefix="$crash/" "${extra[@]}" "$work" >"$log" 2>&1)
  rc=$?
  execs=$(grep -oE 'stat::number_of_executed_units: *[0-9]+' "$log" | grep -oE '[0-9]+$' || true)
  [ -z "$execs" ] && execs=$(grep -oE '#[0-9]+' "$log" | tail -1 | tr -d '#')
  if [ $rc -ne 0 ]; then
    echo "fuzz: $h FOUND A BUG after ${secs}s (see $log and $crash):"
    grep -E 'ERROR|runtime error|fuzz[_a-z]*:|SUMMARY' "$log" | head -8
    status=1
  else
    echo "fuzz: $h ok, ${secs}s, ${execs:-?} runs, corpus $(ls "$work" | wc -l)"
  fi
done
exit $status
