#!/usr/bin/env bash
# setup.sh — install what is missing, build, and run the main job.
#
#   scripts/setup.sh            install + build (Release, in ./build) + run `plan --gpus 512 --params 175B`
#   scripts/setup.sh --no-run   install + build only
#   BUILD_DIR=dir BUILD_TYPE=Asan scripts/setup.sh --no-run   another build
#
# Debian packages come from apt-get when run as root; otherwise the exact
# command to run is printed and the script stops.
set -euo pipefail
cd "$(dirname "$0")/.."

run_main=1
[ "${1:-}" = "--no-run" ] && run_main=0

pkgs=(cmake pkg-config gcc make libglpk-dev libcjson-dev libopenmpi-dev openmpi-bin libopenblas-dev
      libcmocka-dev libgsl-dev libncurses-dev gnuplot-nox tmux python3 clang)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" -eq 0 ]; then
    echo "setup: installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -q >/dev/null
    apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null
  else
    echo "setup: missing packages; run:" >&2
    echo "  sudo apt-get update && sudo apt-get install -y ${missing[*]}" >&2
    exit 1
  fi
fi

build=${BUILD_DIR:-build}
type=${BUILD_TYPE:-Release}
jobs=$(nproc 2>/dev/null || echo 2)
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE="$type" >"$build.configure.log" 2>&1 || { cat "$build.configure.log"; exit 1; }
grep -E '✓|✗' "$build.configure.log" | sed 's/^-- /setup: /'
if ! cmake --build "$build" -j "$jobs" >"$build.build.log" 2>&1; then
  grep -E 'error|Error' "$build.build.log" | head -40 >&2
  echo "setup: build failed (full log: $build.build.log)" >&2
  exit 1
fi
grep -E 'warning:' "$build.build.log" | head -20 || true
echo "setup: built $build/ultraplan"

if [ $run_main -eq 1 ]; then
  if "$build/ultraplan" --help | grep -q '^  plan '; then
    "$build/ultraplan" plan --gpus 512 --params 175B
  else
    "$build/ultraplan" predict --model gpt3-175b --gpu a100-80g --gpus 1024 --tp 8 --pp 8 --mbs 1 --gbs 1536
  fi
fi
