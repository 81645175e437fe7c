#!/usr/bin/env bash
# e2e_tui_tmux.sh — drive the real TUI in a tmux pane: open it, change the
# GPU count and the layout, check that memory, MFU and days equal what
# `predict --json` gives for the same inputs (the 80 % band line's step and
# MFU ranges too), refuse a bad value, load a plan
# from the plans pane, save the plan, quit; then quit a second one with
# SIGTERM. Every wait polls capture-pane with a deadline (no fixed sleeps).
# Needs tmux and python3; skips (77) without tmux.
set -euo pipefail
: "${ULTRAPLAN:?set by CTest}"
# 0. (no terminal needed) started without layout knobs, the TUI opens on the
#    planner's plan 1, not on tp 1 pp 1 (3 TB over the GPU for 175B on 512)
snap=$("$ULTRAPLAN" tui --params 175B --gpus 512 --snapshot --rows 40 --cols 140) || { echo "FAIL snapshot"; exit 1; }
best=$("$ULTRAPLAN" plan --params 175B --gpus 512 --top 1 --json | python3 -c '
import json, sys; l = json.load(sys.stdin)["ranked"][0]["layout"]; print("tp %d pp %d dp %d" % (l["tp"], l["pp"], l["dp"]))')
if grep -q "$best" <<< "$snap" && grep -q "opened on plan 1" <<< "$snap" && ! grep -q "OVER by" <<< "$snap"; then
    echo "ok: opens on plan 1 ($best)"
else
    echo "FAIL: tui without layout knobs does not open on plan 1 ($best):"; head -3 <<< "$snap"; exit 1
fi

command -v tmux >/dev/null || { echo "tmux not installed: skipped"; exit 77; }
command -v python3 >/dev/null || { echo "python3 not installed: skipped"; exit 77; }

work=$(mktemp -d)
sock="up-tui-$$"
T() { tmux -L "$sock" -f /dev/null "$@"; }
cleanup() { T kill-server 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT

fail() {
    echo "FAIL: $*" >&2
    echo "---- screen ----" >&2
    T capture-pane -t tui -p >&2 2>/dev/null || true
    exit 1
}

screen() { T capture-pane -t "${1:-tui}" -p; }

# wait_for PATTERN [SESSION]: until the screen matches (extended regex), 60 s at most
wait_for() {
    local pat=$1 sess=${2:-tui}
    for _ in $(seq 600); do
        if screen "$sess" | grep -Eq -- "$pat"; then return 0; fi
        sleep 0.1
    done
    fail "timed out waiting for /$pat/"
}

wait_file() {
    for _ in $(seq 600); do [[ -s $1 ]] && return 0; sleep 0.1; done
    fail "timed out waiting for $1"
}

# check_predict FLAGS...: the screen's MFU, days, peak memory and 80 % band
# equal predict --json for these flags (to the decimals the TUI prints).
check_predict() {
    "$ULTRAPLAN" predict "$@" --json > "$work/predict.json"
    screen > "$work/screen.txt"
    python3 - "$work/predict.json" "$work/screen.txt" "$*" <<'EOF' || fail "numbers differ from predict"
import json, re, sys
p = json.load(open(sys.argv[1]))
s = open(sys.argv[2]).read()
def shown(pat):
    m = re.search(pat, s)
    if not m:
        sys.exit(f"not on screen: /{pat}/")
    return float(m.group(1))
want = {
    "MFU %": (100 * p["throughput"]["mfu"], shown(r"MFU\s+([\d.]+) %")),
    "days": (p["training"]["days"], shown(r"days\s+([\d.]+)")),
    "peak GiB": (p["memory"]["peak_bytes"] / 2**30, shown(r"peak ([\d.]+) GiB")),
    "step s": (p["time"]["step_s"], shown(r"step\s+([\d.]+) s")),
}
bad = [f"{k}: screen {got} vs predict {w:.4f}" for k, (w, got) in want.items() if abs(round(w, 2 if k != "step s" else 3) - got) > 0.0051]
# the 80 % band line: step and MFU ranges equal predict's time.step_s_range and
# throughput.mfu_range to the decimals shown
m = re.search(r"80% band +([\d.]+)-([\d.]+) s +MFU ([\d.]+)-([\d.]+) %", s)
if not m:
    sys.exit("no 80% band line on screen")
ranges = [p["time"]["step_s_range"][0], p["time"]["step_s_range"][1],
          100 * p["throughput"]["mfu_range"][0], 100 * p["throughput"]["mfu_range"][1]]
for name, text, w in zip(["step lo", "step hi", "MFU lo", "MFU hi"], m.groups(), ranges):
    dec = len(text.split(".")[1]) if "." in text else 0
    if abs(round(w, dec) - float(text)) > 0.51 * 10 ** -dec:
        bad.append(f"band {name}: screen {text} vs predict {w:.4f}")
    want["band " + name] = (w, float(text))
if bad:
    sys.exit(f"predict {sys.argv[3]}: " + "; ".join(bad))
print(f"ok: {sys.argv[3]}: " + ", ".join(f"{k} {got}" for k, (w, got) in want.items()))
EOF
}

# Under the sanitizer build: GLPK keeps one environment per thread that
# called it and frees it only on glp_free_env() from that thread, which the
# planner does not expose yet; the TUI's search thread leaves that behind.
export LSAN_OPTIONS="${LSAN_OPTIONS:-}"

model=(--params 175B --gpu h100-sxm)
cd "$work"
T new-session -d -s tui -x 120 -y 40 \
    "LSAN_OPTIONS='$LSAN_OPTIONS' TERM=xterm-256color '$ULTRAPLAN' tui ${model[*]} --gpus 512 --tp 8 --pp 8 --no-color; echo \$? > '$work/exit1'; sleep 60"

# 1. opens, shows the inputs given
wait_for 'gpt3-175b on 512 x h100-sxm  tp 8 pp 8 dp 8'
wait_for 'MFU +[0-9.]+ %'
check_predict "${model[@]}" --gpus 512 --tp 8 --pp 8

# 2. GPUs 512 -> 1024 with the + key (field 2)
T send-keys -t tui Down Right
wait_for 'on 1024 x h100-sxm  tp 8 pp 8 dp 16'
check_predict "${model[@]}" --gpus 1024 --tp 8 --pp 8

# 3. a value that does not divide is refused in place, with the reason
T send-keys -t tui 1 0 0 Enter
wait_for 'GPUs: refused: GPUs 100 is not a multiple of tp\*pp\*cp'
wait_for 'on 1024 x h100-sxm'

# 4. the layout: pp typed as 4 (8 fields down), then ZeRO stepped to zero1
T send-keys -t tui Down Down Down Down Down Down Down Down 4 Enter
wait_for 'tp 8 pp 4 dp 32'
T send-keys -t tui Down Down Down Down Down Right
wait_for 'ZeRO +zero1'
check_predict "${model[@]}" --gpus 1024 --tp 8 --pp 4 --zero 1
T send-keys -t tui Down Right
wait_for 'recompute +selective'
check_predict "${model[@]}" --gpus 1024 --tp 8 --pp 4 --zero 1 --recompute selective

# 5. pin, change, see a difference, unpin
T send-keys -t tui p
wait_for 'PINNED'
T send-keys -t tui Left
wait_for 'recompute +none +\(selective\)'
T send-keys -t tui p
wait_for 'baseline unpinned'

# 6. the plans pane fills in the background; Tab + Enter loads the best plan
wait_for 'Plans: top [0-9]+'
T send-keys -t tui Tab Enter
wait_for 'loaded plan 1: tp [0-9]+ pp [0-9]+'
loaded=$(screen | grep -Eo 'loaded plan 1: tp [0-9]+ pp [0-9]+ vp [0-9]+ cp [0-9]+ dp [0-9]+ mbs [0-9]+ [a-z0-9]+')
echo "ok: $loaded"
# the loaded plan's MFU on the Time pane is the plan row's MFU
mfu_plan=$(screen | grep -E '>1 ' | grep -Eo '[0-9]+\.[0-9]{2} +[0-9]+\.[0-9]{2} +[0-9]+\.[0-9]{2}' | head -1 | awk '{print $1}')
mfu_time=$(screen | grep -Eo 'MFU +[0-9.]+ %' | head -1 | awk '{print $2}')
[[ -n $mfu_plan && $mfu_plan == "$mfu_time" ]] || fail "plan row MFU '$mfu_plan' != time pane MFU '$mfu_time'"
echo "ok: plan 1 MFU $mfu_plan on both panes"

# 7. save the plan; it is a plan file predict's numbers can be checked against
T send-keys -t tui s
wait_for 'saved plan.json'
wait_file "$work/plan.json"
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["format"]=="ultraplan.plan/1", d["format"]' "$work/plan.json" \
    || fail "plan.json is not a plan file"
T send-keys -t tui m
wait_for 'saved Megatron-LM arguments to megatron_args.txt'
wait_file "$work/megatron_args.txt"
grep -q -- "--pipeline-model-parallel-size $(echo "$loaded" | awk '{print $7}')" "$work/megatron_args.txt" \
    || fail "megatron_args.txt does not carry the loaded plan's pp"
echo "ok: saved plan.json and megatron_args.txt"

# 8. resizing re-lays the panes out: compact at 80x24, a message when too small
T resize-window -t tui -x 80 -y 24
wait_for 'W=wts G=grd'
# at the least size (64x22) the Time pane keeps the band line, in its short form
# (`v` cycles the lower pane until it is the Time pane)
T resize-window -t tui -x 64 -y 22
wait_for 'W=wts G=grd'
band_seen=0
for _ in 1 2 3 4; do
    for _ in $(seq 20); do
        if screen | grep -Eq '80%: [0-9.]+-[0-9.]+ s, MFU [0-9]+-[0-9]+%'; then band_seen=1; break 2; fi
        sleep 0.1
    done
    T send-keys -t tui v
done
[[ $band_seen == 1 ]] || fail "no 80% band line on the Time pane at 64x22"
echo "ok: 64x22 shows the band line"
T resize-window -t tui -x 50 -y 15
wait_for 'too small'
T resize-window -t tui -x 120 -y 40
wait_for 'W weights G grads'
echo "ok: resize 120x40 -> 80x24 -> 50x15 -> 120x40"

# 9. help overlay opens and closes, q quits with status 0 and the screen restored
T send-keys -t tui '?'
wait_for 'any key closes this help'
T send-keys -t tui x
T send-keys -t tui q
wait_file "$work/exit1"
[[ $(cat "$work/exit1") == 0 ]] || fail "tui exited with $(cat "$work/exit1")"
screen | grep -q 'Inputs' && fail "the TUI's screen is still up after quitting"
echo "ok: q quits with 0, terminal restored"

# 10. SIGTERM (a signal handler only sets a flag) also restores the terminal
T new-session -d -s sig -x 80 -y 24 \
    "sh -c 'echo \$\$ > \"$work/pid\"; exec \"$ULTRAPLAN\" tui ${model[*]} --gpus 512 --tp 8 --pp 8 --no-plans'; echo \$? > '$work/exit2'; sleep 60"
wait_for 'MFU +[0-9.]+ %' sig
wait_file "$work/pid"
kill -TERM "$(cat "$work/pid")"
wait_file "$work/exit2"
screen sig | grep -q 'Inputs' && fail "the screen is still up after SIGTERM"
echo "ok: SIGTERM exits with $(cat "$work/exit2"), terminal restored"

# 11. --follow: the Run pane re-reads run.json as the run appends steps
run="$work/run.json"
step() { printf '{"step":%d,"time_s":%s,"loss":%s,"mfu":%s}' "$@"; }
printf '{"format":"ultraplan.run/1","status":"running","steps":[%s,%s]}\n' \
    "$(step 1 18.5 10.9 0.48)" "$(step 2 17.9 9.8 0.50)" > "$run.tmp" && mv "$run.tmp" "$run"
T new-session -d -s run -x 120 -y 40 \
    "LSAN_OPTIONS='$LSAN_OPTIONS' '$ULTRAPLAN' tui ${model[*]} --gpus 512 --tp 8 --pp 8 --no-plans --follow '$run'; echo \$? > '$work/exit3'; sleep 60"
wait_for '2 steps measured' run
wait_for 'MFU +49\.00 %  predicted' run
printf '{"format":"ultraplan.run/1","status":"done","steps":[%s,%s,%s]}\n' \
    "$(step 1 18.5 10.9 0.48)" "$(step 2 17.9 9.8 0.50)" "$(step 3 17.7 9.1 0.52)" > "$run.tmp" && mv "$run.tmp" "$run"
wait_for '3 steps measured' run
wait_for 'run.json: done' run
T send-keys -t run q
wait_file "$work/exit3"
echo "ok: --follow picks up new steps"
echo "PASS"
