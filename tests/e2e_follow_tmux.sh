#!/usr/bin/env bash
# e2e_follow_tmux.sh — `ultraplan tui --follow run.json` is live: a real CPU
# run of a tiny plan (4 layers, hidden 64) trains while the TUI follows its
# run.json in a tmux pane; two captures during the run show the number of
# steps measured grow with the status "running", and the pane ends on
# "done" with every step once the run has finished (exit 0, run.json
# status "done" with its summary and memory).
#
# The run is sized from a short probe run so that it lasts about 8 s on this
# machine, however loaded; every wait polls with a deadline, no fixed sleeps.
# Needs tmux and python3 (77 = skipped without them, or without the
# executor module).
set -euo pipefail
: "${ULTRAPLAN:?set by CTest}"
command -v tmux >/dev/null || { echo "tmux not installed: skipped"; exit 77; }
command -v python3 >/dev/null || { echo "python3 not installed: skipped"; exit 77; }
command -v mpirun >/dev/null || { echo "mpirun not found: skipped"; exit 77; }
[ -e "$(dirname "$ULTRAPLAN")/libultraplan-exec.so" ] || { echo "no executor module in this build: skipped"; exit 77; }
export OMP_NUM_THREADS=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export LSAN_OPTIONS="${LSAN_OPTIONS:-}"

work=$(mktemp -d)
sock="up-follow-$$"
runpid=""
T() { tmux -L "$sock" -f /dev/null "$@"; }
cleanup() {
    [ -n "$runpid" ] && kill -9 "$runpid" 2>/dev/null || true
    T kill-server 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT

fail() {
    echo "FAIL: $*" >&2
    echo "---- screen ----" >&2
    T capture-pane -t follow -p >&2 2>/dev/null || true
    [ -f "$work/run.out" ] && { echo "---- run ----" >&2; tail -n 5 "$work/run.out" "$work/run.err" >&2; }
    exit 1
}

screen() { T capture-pane -t follow -p; }
# the number of steps the pane shows, empty when none yet
shown_steps() { screen | grep -Eo '[0-9]+ steps measured' | grep -Eo '^[0-9]+' | head -n 1 || true; }

cd "$work"
for i in $(seq 1 40); do cat "$SRC/executor/exec.c"; done > text.txt
"$ULTRAPLAN" plan --gpus 1 --dp 1 --tp 1 --pp 1 --precision fp32 --gpu h100 --layers 4 --hidden 64 \
    --heads 4 --seq 32 --vocab 256 --gbs 4 --mbs 2 --no-dropout -o plan.json > /dev/null || fail "plan"

# probe: the step time on this machine now
"$ULTRAPLAN" run plan.json --data text.txt --steps 10 -o probe.json > /dev/null 2>&1 || fail "probe run"
steps=$(python3 -c '
import json, math, sys
d = json.load(open(sys.argv[1]))
assert d["status"] == "done", d["status"]
s = max(d["summary"]["step_s"], 1e-4)
print(max(100, min(200000, math.ceil(8.0 / s))))' probe.json) || fail "probe run.json"
echo "run of $steps steps (about 8 s here)"

T new-session -d -s follow -x 120 -y 40 \
    "LSAN_OPTIONS='$LSAN_OPTIONS' '$ULTRAPLAN' tui --params 175B --gpu h100-sxm --gpus 512 --tp 8 --pp 8 --no-plans --follow '$work/run.json'; echo \$? > '$work/tui.rc'; sleep 60"
# the pane is up before the run starts: it says the file is not there yet
for _ in $(seq 600); do screen | grep -q 'run.json' && break; sleep 0.1; done
"$ULTRAPLAN" run plan.json --data text.txt --steps "$steps" -o run.json > run.out 2> run.err &
runpid=$!

# first capture: some steps, still running
first=""
for _ in $(seq 1200); do
    first=$(shown_steps)
    [ -n "$first" ] && [ "$first" -gt 0 ] && screen | grep -q 'run.json: running' && break
    kill -0 "$runpid" 2>/dev/null || fail "the run ended before the pane showed it running"
    first=""
    sleep 0.1
done
[ -n "$first" ] || fail "no steps shown while running within 120 s"
[ "$first" -lt "$steps" ] || fail "the first capture already shows the whole run ($first steps)"
# second capture: more steps, still running
second=""
for _ in $(seq 1200); do
    n=$(shown_steps)
    if [ -n "$n" ] && [ "$n" -gt "$first" ] && screen | grep -q 'run.json: running'; then second=$n; break; fi
    kill -0 "$runpid" 2>/dev/null || break
    sleep 0.1
done
[ -n "$second" ] || fail "the step count did not change while the run trained (stayed at $first)"
echo "ok: mid-run the pane went from $first to $second steps measured"

# the run finishes by itself; the pane shows all its steps and "done"
for _ in $(seq 1800); do kill -0 "$runpid" 2>/dev/null || break; sleep 0.1; done
kill -0 "$runpid" 2>/dev/null && fail "the run did not finish within 180 s"
rc=0; wait "$runpid" || rc=$?
runpid=""
[ "$rc" -eq 0 ] || fail "the run exited $rc"
for _ in $(seq 600); do screen | grep -q 'run.json: done' && break; sleep 0.1; done
screen | grep -q 'run.json: done' || fail "the pane never said done"
[ "$(shown_steps)" = "$steps" ] || fail "the pane shows $(shown_steps) steps, the run made $steps"
python3 - run.json "$steps" <<'EOF' || fail "final run.json"
import json, sys
d = json.load(open(sys.argv[1]))
n = int(sys.argv[2])
assert d["format"] == "ultraplan.run/1" and d["status"] == "done", (d["format"], d["status"])
assert len(d["steps"]) == n and d["steps"][-1]["step"] == n
assert d["summary"]["step_s"] > 0 and d["summary"]["steps_averaged"] == n - 1
assert len(d["memory"]) == 1 and d["memory"][0]["weights"] > 0
EOF
echo "ok: the run finished ($steps steps), the pane says done"
T send-keys -t follow q
for _ in $(seq 300); do [ -s "$work/tui.rc" ] && break; sleep 0.1; done
[ "$(cat "$work/tui.rc" 2>/dev/null)" = 0 ] || fail "the TUI exited $(cat "$work/tui.rc" 2>/dev/null)"
echo "PASS"
