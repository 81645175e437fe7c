#!/usr/bin/env bash
# test.sh — the whole test suite, as CI runs it:
#   1. install what is missing and build (Release) — scripts/setup.sh --no-run
#   2. every CTest test: unit, mpi, e2e (gpu tests skip with 77 without a GPU)
#   3. an AddressSanitizer + UBSan build and the whole suite again under it
# Exit status is non-zero if anything failed.
set -euo pipefail
cd "$(dirname "$0")/.."
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1 OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
jobs=$(nproc 2>/dev/null || echo 2)

scripts/setup.sh --no-run
echo "== tests (Release)"
ctest --test-dir build --output-on-failure -j "$jobs" --timeout 900

echo "== tests (AddressSanitizer + UBSan)"
BUILD_DIR=build-asan BUILD_TYPE=Asan scripts/setup.sh --no-run
# Open MPI keeps allocations past MPI_Finalize: tests/lsan.supp names only its
# libraries; full unwinding lets LSan see those frames (Open MPI has no frame pointers)
export LSAN_OPTIONS=suppressions=$PWD/tests/lsan.supp:print_suppressions=0:fast_unwind_on_malloc=0
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  ctest --test-dir build-asan --output-on-failure -j "$jobs" --timeout 1800 -LE 'slow|gpu'
