#!/bin/bash
# ultraplan run under faults (docs/reliability/FAULTS.md), 2 ranks under mpirun:
#   1. a rank SIGKILLed mid-step: the job ends non-zero within 30 s naming
#      rank 1, and --resume continues bit-identically from the last checkpoint
#   2. a rank lost without the launcher noticing (mpirun --enable-recovery)
#      and a hung rank (SIGSTOP): the watchdog ends rank 0 non-zero, naming rank 1
#   3. killed while writing a checkpoint: the previous one is used, bit-identical;
#      killed while writing the manifest: its temporary is removed by the next
#      checkpoint
#   4. corrupted, truncated checkpoint files and a damaged manifest: refused;
#      a symlinked step directory: refused, and nothing outside DIR is touched;
#      --steps at or below the checkpoint's step: an error, not a run of nothing
#   5. a NaN loss: stops naming the step; no checkpoint of the bad step
#   6. disk full during a checkpoint (a small tmpfs; skipped if mount fails):
#      an error, the previous checkpoint still loads; full at the manifest
#      write: the uncommitted step directory is removed
#   7. SIGTERM to the ranks (Slurm) and SIGUSR1 to mpirun: checkpoint, exit 0,
#      --resume bit-identical
# Every run is bounded in time; a hang is a failure, not a stuck CI job.
set -u
command -v mpirun >/dev/null || { echo "mpirun not found: skipped"; exit 77; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
export UP_FAULTS_TAG="faults-$$"        # marks this test's ranks among other tests' processes
D=$(mktemp -d)
U=$ULTRAPLAN
BG=""                                   # pid of the background mpirun, if any
cleanup() {
    [ -n "$BG" ] && kill -9 "$BG" 2>/dev/null
    for p in $(our_pids); do kill -9 "$p" 2>/dev/null; done
    mountpoint -q "$D/full" 2>/dev/null && umount "$D/full"
    rm -rf "$D"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; for f in "$D"/out "$D"/err; do [ -f "$f" ] && { echo "--- $f"; tail -n 15 "$f"; }; done; exit 1; }

MPI="mpirun --oversubscribe -x UP_FAULTS_TAG -np 2"
RUN=(run "$D/plan.json" --data "$D/text.txt")
for i in $(seq 1 40); do cat "$SRC/executor/exec.c"; done > "$D/text.txt"
$U plan --gpus 2 --dp 2 --tp 1 --pp 1 --zero 1 --precision fp32 --gpu h100 --layers 2 --hidden 64 \
    --heads 4 --seq 32 --vocab 256 --gbs 4 --mbs 2 --no-dropout -o "$D/plan.json" > /dev/null || fail "plan"

losses() { grep -o '"loss":[^,]*' "$1" | tr -d '"loss:\t '; }
last_step() { grep -o '^step *[0-9]*' "$1" 2>/dev/null | tail -n 1 | grep -o '[0-9]*$'; }
manifest_step() { grep -o '"step":[[:space:]]*[0-9]*' "$1/manifest.json" | grep -o '[0-9]*$'; }
# pids of this test's ultraplan ranks: our_pids [RANK]
our_pids() {
    for p in $(pgrep -f "^$U run" 2>/dev/null); do
        env=$(tr '\0' '\n' < /proc/$p/environ 2>/dev/null) || continue
        grep -qx "UP_FAULTS_TAG=$UP_FAULTS_TAG" <<< "$env" || continue
        [ $# -eq 0 ] || grep -qx "OMPI_COMM_WORLD_RANK=$1" <<< "$env" && echo "$p"
    done
}
# start_bg ARGS...: mpirun in the background, output to $D/out and $D/err
start_bg() { "$@" > "$D/out" 2> "$D/err" & BG=$!; }
# until_step N DIR: wait (≤ 60 s) for step N to be printed and a checkpoint in DIR (if given)
until_step() {
    for _ in $(seq 1 600); do
        s=$(last_step "$D/out")
        if [ -n "$s" ] && [ "$s" -ge "$1" ] && { [ -z "${2:-}" ] || [ -f "$2/manifest.json" ]; }; then return 0; fi
        kill -0 "$BG" 2>/dev/null || fail "the run ended before step $1"
        sleep 0.1
    done
    fail "no step $1 within 60 s"
}
# finish SECS: wait for the background mpirun at most SECS; its status in $RC, seconds in $T
finish() {
    local t0=$SECONDS
    for _ in $(seq 1 $(($1 * 10))); do
        kill -0 "$BG" 2>/dev/null || break
        sleep 0.1
    done
    if kill -0 "$BG" 2>/dev/null; then kill -9 "$BG"; BG=""; fail "the job still ran after $1 s"; fi
    wait "$BG"; RC=$?; BG=""; T=$((SECONDS - t0))
}
# resume_matches DIR STEPS: --resume from DIR to STEPS gives the uninterrupted run's losses
resume_matches() {
    local from
    from=$(manifest_step "$1")
    timeout 120 $MPI $U "${RUN[@]}" --steps "$2" -o "$D/ref.json" > /dev/null 2>&1 || fail "reference run to $2"
    timeout 120 $MPI $U "${RUN[@]}" --steps "$2" --checkpoint-dir "$1" --resume -o "$D/res.json" > "$D/out" 2> "$D/err" \
        || fail "resume from $1"
    grep -q "resumed from $1 at step $from" "$D/out" || fail "did not resume at step $from"
    diff <(losses "$D/ref.json" | tail -n $(($2 - from))) <(losses "$D/res.json") > /dev/null \
        || fail "losses after resuming from step $from differ from the uninterrupted run"
}
# expect_err PATTERN CMD...: fails cleanly (no signal) saying PATTERN
expect_err() {
    local pat=$1; shift
    timeout 120 "$@" > "$D/out" 2> "$D/err"; local rc=$?
    [ $rc -ne 0 ] && [ $rc -lt 124 ] || fail "$* returned $rc"
    grep -q -- "$pat" "$D/out" "$D/err" || fail "$* did not say '$pat'"
}

# ---- 1. a rank SIGKILLed mid-step ------------------------------------------
start_bg $MPI $U "${RUN[@]}" --steps 100000 --checkpoint-dir "$D/ck1" --checkpoint-every 10
until_step 25 "$D/ck1"
victim=$(our_pids 1); survivor=$(our_pids 0)
[ -n "$victim" ] && [ -n "$survivor" ] || fail "rank pids not found"
kill -9 $victim
finish 30
[ $RC -ne 0 ] || fail "the job exited 0 after rank 1 was killed"
for _ in $(seq 1 20); do kill -0 $survivor 2>/dev/null || break; sleep 0.1; done
kill -0 $survivor 2>/dev/null && fail "rank 0 still runs after rank 1 was killed"
grep -q "rank 1" "$D/err" || fail "no message names the lost rank 1"
S=$(manifest_step "$D/ck1")
resume_matches "$D/ck1" $((S + 5))
echo "killed rank: job ended in ${T} s naming rank 1; resume from step $S bit-identical"

# ---- 2. a lost rank the launcher ignores, a hung rank: the watchdog ----------
cat > "$D/rank.sh" <<'EOF'
#!/bin/bash
# one rank: record the exit status of ultraplan
"$@"; echo $? > "$UP_RC_DIR/rc.$OMPI_COMM_WORLD_RANK"
EOF
chmod +x "$D/rank.sh"
export UP_RC_DIR=$D
watchdog_case() {   # watchdog_case NAME SIGNAL MPIRUN-OPTIONS...
    local name=$1 sig=$2; shift 2
    rm -f "$D"/rc.*
    start_bg mpirun --oversubscribe -np 2 "$@" -x UP_RC_DIR -x UP_FAULTS_TAG "$D/rank.sh" \
        $U "${RUN[@]}" --steps 100000 --comm-timeout 5
    until_step 10
    local victim
    victim=$(our_pids 1)
    [ -n "$victim" ] || fail "$name: rank 1 pid not found"
    kill -$sig $victim
    finish 30
    grep -q "rank 0: no progress in communication with rank(s) 1 for [0-9]* s (lost rank?) during MPI_[A-Za-z_]* on [a-z]* at step [0-9]*" \
        "$D/err" || fail "$name: no watchdog message naming rank 1"
    [ -f "$D/rc.0" ] && [ "$(cat "$D/rc.0")" -ne 0 ] || fail "$name: rank 0 did not exit non-zero"
    kill -9 $victim 2>/dev/null   # a stopped rank, if mpirun left it
    echo "$name: rank 0 exited $(cat "$D/rc.0") in ${T} s naming rank 1"
}
if mpirun --enable-recovery --oversubscribe -np 1 true > /dev/null 2>&1; then
    watchdog_case "lost rank (mpirun --enable-recovery)" KILL --enable-recovery
else
    echo "lost rank without launcher teardown: skipped (mpirun has no --enable-recovery)"
fi
watchdog_case "hung rank (SIGSTOP)" STOP

# ---- 3. killed while writing a checkpoint ------------------------------------
timeout 120 $MPI -x ULTRAPLAN_FAULT_INJECT=kill_in_ckpt:20 $U "${RUN[@]}" --steps 30 \
    --checkpoint-dir "$D/ck3" --checkpoint-every 10 > "$D/out" 2> "$D/err"
rc=$?
[ $rc -ne 0 ] && [ $rc -ne 124 ] || fail "kill_in_ckpt: returned $rc"
[ "$(manifest_step "$D/ck3")" = 10 ] || fail "kill_in_ckpt: the manifest no longer names step 10"
ls "$D"/ck3/step-000020/rank_00000.ckpt.tmp.* > /dev/null 2>&1 || fail "kill_in_ckpt: no half-written file"
resume_matches "$D/ck3" 30
echo "killed while writing: step 10 used, resume bit-identical"

cp -r "$D/ck3" "$D/ck3m"   # at step 30
timeout 120 $MPI -x ULTRAPLAN_FAULT_INJECT=kill_in_manifest:40 $U "${RUN[@]}" --steps 40 \
    --checkpoint-dir "$D/ck3m" --resume > "$D/out" 2> "$D/err"
rc=$?
[ $rc -ne 0 ] && [ $rc -ne 124 ] || fail "kill_in_manifest: returned $rc"
[ "$(manifest_step "$D/ck3m")" = 30 ] || fail "kill_in_manifest: the manifest no longer names step 30"
ls "$D"/ck3m/manifest.json.tmp.* > /dev/null 2>&1 || fail "kill_in_manifest: no half-written manifest"
timeout 120 $MPI $U "${RUN[@]}" --steps 40 --checkpoint-dir "$D/ck3m" --resume > "$D/out" 2> "$D/err" \
    || fail "kill_in_manifest: resume"
[ "$(manifest_step "$D/ck3m")" = 40 ] || fail "kill_in_manifest: no checkpoint of step 40 after resuming"
ls "$D"/ck3m/manifest.json.tmp.* > /dev/null 2>&1 && fail "kill_in_manifest: manifest.json.tmp.* left behind"
[ "$(ls "$D/ck3m")" = "$(printf 'manifest.json\nstep-000040')" ] || fail "kill_in_manifest: leftovers: $(ls "$D/ck3m")"
echo "killed while writing the manifest: step 30 used, the next checkpoint removes the leftovers"

# ---- 4. corrupted and truncated checkpoints -----------------------------------
good=$D/ck3      # now at step 30
corrupt() { rm -rf "$D/bad"; cp -r "$good" "$D/bad"; }
resume_bad() { expect_err "$1" $MPI $U "${RUN[@]}" --steps 40 --checkpoint-dir "$D/bad" --resume; }
corrupt; printf '\x55' | dd of="$D/bad/step-000030/rank_00001.ckpt" bs=1 seek=300000 conv=notrunc 2> /dev/null
resume_bad "checkpoint $D/bad/step-000030/rank_00001.ckpt: checksum mismatch (file corrupted or truncated); refusing to load"
corrupt; printf '\x01' | dd of="$D/bad/step-000030/rank_00000.ckpt" bs=1 seek=8 conv=notrunc 2> /dev/null
resume_bad "rank_00000.ckpt: checksum mismatch"
corrupt; truncate -s 100000 "$D/bad/step-000030/rank_00001.ckpt"
resume_bad "rank_00001.ckpt: 100000 bytes, the manifest says [0-9]* (file truncated"
corrupt; head -c 40 "$good/manifest.json" > "$D/bad/manifest.json"
resume_bad "manifest.json is not a readable ultraplan.checkpoint/3 manifest"
corrupt; rm "$D/bad/step-000030/rank_00000.ckpt"
resume_bad "rank_00000.ckpt: No such file"
echo "corrupted, truncated, missing checkpoint files: refused by name"

# a symlinked step directory (issue 17, item 1): refused; the files behind it stay
corrupt; mkdir "$D/outside"; mv "$D/bad/step-000030" "$D/outside/"; ln -s "$D/outside/step-000030" "$D/bad/step-000030"
echo precious > "$D/outside/rank_00007.ckpt"
mkdir "$D/bad/step-000010"; ln -s "$D/outside/rank_00007.ckpt" "$D/bad/step-000010/rank_00000.ckpt"
resume_bad "rank_00000.ckpt: its step directory is a symbolic link or not a directory; refusing to load"
[ -f "$D/outside/step-000030/rank_00000.ckpt" ] && [ "$(cat "$D/outside/rank_00007.ckpt")" = precious ] \
    || fail "symlinked step directory: files outside the checkpoint directory were touched"
# --steps at or below the checkpoint's step: nothing to run is an error (issue 17, item 9)
for steps in 20 30; do
    expect_err "resume: the checkpoint in $good is at step 30 and --steps is $steps: nothing left to run" \
        $MPI $U "${RUN[@]}" --steps $steps --checkpoint-dir "$good" --resume -o "$D/none.json"
    [ -e "$D/none.json" ] && fail "--steps $steps below the checkpoint wrote a run.json"
done
echo "symlinked step directory refused, outside files untouched; --steps <= checkpoint step refused"

# ---- 5. NaN loss ---------------------------------------------------------------
expect_err "loss is NaN (rank [0-9]*); stopping. Last good checkpoint: $D/ck5/step-" \
    $MPI $U "${RUN[@]}" --steps 20 --lr 1e30 --checkpoint-dir "$D/ck5" --checkpoint-every 1
bad=$(grep -o 'step [0-9]*: loss is NaN' "$D/err" | grep -o '[0-9]*' | head -n 1)
[ "$(manifest_step "$D/ck5")" = $((bad - 1)) ] || fail "NaN: the last checkpoint is not step $((bad - 1))"
[ -e "$D/ck5/step-$(printf %06d "$bad")" ] && fail "NaN: the bad step $bad was checkpointed"
echo "NaN loss: stopped at step $bad, last good checkpoint step $((bad - 1))"

# ---- 6. disk full during a checkpoint -----------------------------------------
one_ckpt_kb=$(du -sk "$good/step-000030" | cut -f1)
mkdir -p "$D/full"
if mount -t tmpfs -o size=$((one_ckpt_kb * 3 / 2))k tmpfs "$D/full" 2> /dev/null; then
    expect_err "checkpoint: cannot write $D/full/ck/step-000006/rank_0000[01].ckpt: No space left on device. The previous checkpoint is still valid: $D/full/ck/step-000003" \
        $MPI $U "${RUN[@]}" --steps 9 --checkpoint-dir "$D/full/ck" --checkpoint-every 3
    [ "$(manifest_step "$D/full/ck")" = 3 ] || fail "disk full: the manifest no longer names step 3"
    cp -r "$D/full/ck" "$D/ck6"
    umount "$D/full"
    resume_matches "$D/ck6" 9
    echo "disk full: error names the file, step 3 still valid, resume bit-identical"
    # room for step 3, its manifest and step 6's rank files, not step 6's manifest
    pages=$(( ($(stat -c %s "$good/step-000030/rank_00000.ckpt") + 4095) / 4096 ))
    mount -t tmpfs -o size=$(( (4 * pages + 1) * 4 ))k tmpfs "$D/full" || fail "disk full: remount"
    expect_err "checkpoint: cannot write $D/full/ck/manifest.json: No space left on device. The previous checkpoint is still valid: $D/full/ck/step-000003" \
        $MPI $U "${RUN[@]}" --steps 9 --checkpoint-dir "$D/full/ck" --checkpoint-every 3
    [ "$(manifest_step "$D/full/ck")" = 3 ] || fail "disk full at the manifest: it no longer names step 3"
    [ "$(ls -A "$D/full/ck")" = "$(printf 'manifest.json\nstep-000003')" ] \
        || fail "disk full at the manifest: leftovers: $(ls -A "$D/full/ck" | tr '\n' ' ')"
    umount "$D/full"
    echo "disk full at the manifest: the uncommitted step-000006 removed, step 3 still named"
else
    echo "disk full: skipped (cannot mount a tmpfs here)"
fi

# ---- 7. SIGTERM and SIGUSR1 ------------------------------------------------------
start_bg $MPI $U "${RUN[@]}" --steps 100000 --checkpoint-dir "$D/ck7"
until_step 15
pids=$(our_pids)
[ -n "$pids" ] || fail "SIGTERM: rank pids not found"
kill -TERM $pids
finish 30
[ $RC -eq 0 ] || fail "SIGTERM: the job exited $RC"
S=$(grep -o 'SIGTERM received: stopped after step [0-9]*' "$D/out" | grep -o '[0-9]*$')
[ -n "$S" ] || fail "SIGTERM: no message"
grep -q "checkpoint: $D/ck7/step-$(printf %06d "$S") (continue with --resume)" "$D/out" || fail "SIGTERM: message"
[ "$(manifest_step "$D/ck7")" = "$S" ] || fail "SIGTERM: no checkpoint of step $S"
resume_matches "$D/ck7" $((S + 5))
echo "SIGTERM: checkpoint at step $S, exit 0 in ${T} s, resume bit-identical"

start_bg $MPI $U "${RUN[@]}" --steps 100000
until_step 5
kill -USR1 "$BG"
finish 30
[ $RC -eq 0 ] || fail "SIGUSR1 to mpirun: the job exited $RC"
grep -q "SIGUSR1 received: stopped after step [0-9]*; checkpoint: none (no --checkpoint-dir)" "$D/out" \
    || fail "SIGUSR1: message"
echo "SIGUSR1 to mpirun: clean stop, says no checkpoint was requested"

# ---- 8. a data error on one DP rank (issue 17, item 7) ---------------------------
# An llm.c shard whose token 100 (in rank 1's slice of the first batch: B·T = 64,
# so rank 1 reads tokens 64..128) is outside the vocabulary (256). Every rank
# must meet in the same collective: the real message within seconds, even with
# the watchdog off (the old code hung there forever).
python3 - "$D/oov.bin" <<'PY' || fail "oov.bin"
import struct, sys
n = 4000
toks = [(7 * i) % 256 for i in range(n)]
toks[100] = 300
hdr = [20240520, 1, n] + [0] * 253
open(sys.argv[1], "wb").write(struct.pack("<256i", *hdr) + struct.pack("<%dH" % n, *toks))
PY
t0=$SECONDS
timeout 20 $MPI $U run "$D/plan.json" --data "$D/oov.bin" --steps 5 --comm-timeout 0 -o "$D/oov.json" \
    > "$D/out" 2> "$D/err"
rc=$?
[ $rc -ne 0 ] && [ $rc -ne 124 ] && [ $rc -lt 128 ] || fail "out-of-vocabulary token on rank 1: returned $rc (124: hung)"
[ $((SECONDS - t0)) -le 10 ] || fail "out-of-vocabulary token on rank 1: took $((SECONDS - t0)) s"
grep -q "ultraplan run: step 1: rank 1: data: '$D/oov.bin': token 300 at index 100 is outside the vocabulary (256)" \
    "$D/err" || fail "out-of-vocabulary token on rank 1: the real cause was not printed"
grep -q '"status":[[:space:]]*"failed"' "$D/oov.json" || fail "out-of-vocabulary token: run.json does not say failed"
echo "data error on rank 1: the job printed it and exited $rc in $((SECONDS - t0)) s (watchdog off)"

# ---- 9. a slow checkpoint is not a lost rank (issue 17, item 8) ------------------
# rank 0 takes 2 s longer over the checkpoint; --comm-timeout 1 would blame a
# lost rank after 1 s, but checkpoint I/O has its own limit (3 x the timeout +
# size / 50 MB/s, here ~3 s): the run ends 0 with its checkpoint.
timeout 60 $MPI -x ULTRAPLAN_FAULT_INJECT=slow_ckpt:2 $U "${RUN[@]}" --steps 3 --comm-timeout 1 \
    --checkpoint-dir "$D/ck9" > "$D/out" 2> "$D/err" || fail "slow checkpoint: the healthy job failed"
[ "$(manifest_step "$D/ck9")" = 3 ] || fail "slow checkpoint: no checkpoint of step 3"
# a checkpoint write past its own limit (hung storage) still ends the job, saying so
timeout 60 $MPI -x ULTRAPLAN_FAULT_INJECT=slow_ckpt:8 $U "${RUN[@]}" --steps 3 --comm-timeout 1 \
    --checkpoint-dir "$D/ck9b" > "$D/out" 2> "$D/err"
rc=$?
[ $rc -ne 0 ] && [ $rc -ne 124 ] || fail "hung checkpoint: returned $rc"
grep -q "rank 1: checkpoint I/O of rank(s) 0 took longer than its limit of [34] s" "$D/err" \
    || fail "hung checkpoint: no message naming the checkpoint limit"
echo "slow checkpoint (2 s, --comm-timeout 1): run completes; hung one (8 s): stopped at its limit"

# ---- 10. hostile plan files (issue 17, item 10) ------------------------------------
# products that overflow the step's ints (2·m·vp in sched.c, B·T in exec.c) are
# refused at load, naming the fields, before anything is allocated (the old code
# hung in the first case, and ran 10 s and 400 MB before a data error in the second)
python3 - "$D/plan.json" "$D" <<'PY' || fail "hostile plans"
import json, sys
p = json.load(open(sys.argv[1])); p["layout"]["gbs"] = 1073741824; p["layout"]["mbs"] = 1
json.dump(p, open(sys.argv[2] + "/gbs.json", "w"))
p = json.load(open(sys.argv[1])); p["model"]["seq"] = 1048576; p["layout"]["mbs"] = 4096; p["layout"]["gbs"] = 8192
json.dump(p, open(sys.argv[2] + "/seq.json", "w"))
PY
hostile() {   # hostile PLAN PATTERN
    t0=$SECONDS
    timeout 20 $MPI $U run "$D/$1" --data "$D/text.txt" --steps 2 -o "$D/h.json" > "$D/out" 2> "$D/err"
    rc=$?
    [ $rc -eq 1 ] || fail "hostile $1: returned $rc (124: hung)"
    [ $((SECONDS - t0)) -le 5 ] || fail "hostile $1: took $((SECONDS - t0)) s"
    grep -q "ultraplan run: plan: $2" "$D/err" || fail "hostile $1: the fields were not named"
}
hostile gbs.json "layout.gbs 1073741824 / (layout.dp 2 x layout.mbs 1) = 536870912 micro-batches x layout.vp 1 chunks is more than the 1048576"
hostile seq.json "layout.mbs x model.seq = 4096 x 1048576 = 4294967296 tokens per micro-batch; the executor takes at most 16777216"
echo "hostile plans: refused at load naming the fields"
