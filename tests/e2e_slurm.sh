#!/bin/bash
# e2e_slurm.sh — the exported `--format slurm` script for a 2-rank CPU plan,
# run under an srun shim (mpirun with the tasks srun would start): a first
# submission with an empty checkpoint directory trains and commits a
# checkpoint; a resubmission resumes from it (steps continue, the checkpoint
# is the later one); run without --resume on a committed checkpoint fails
# and leaves it byte-identical. Also: export refuses what it can check.
set -u
command -v mpirun >/dev/null || { echo "mpirun not found: skipped"; exit 77; }
. "$SRC/tests/lib.sh"
fails=0
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1 OMP_NUM_THREADS=1
D=$(mktemp -d)
trap 'rm -rf "$D"' EXIT
U=$ULTRAPLAN
mkdir -p "$D/bin"
ln -s "$U" "$D/bin/ultraplan"
[ -f "$(dirname "$U")/libultraplan-exec.so" ] && export ULTRAPLAN_MODULE_DIR=$(dirname "$U")
# srun shim: --ntasks=N [other srun options] CMD... -> mpirun -np N CMD...
cat > "$D/bin/srun" <<'SH'
#!/bin/bash
n=1
while [ $# -gt 0 ]; do
    case $1 in
        --ntasks=*) n=${1#--ntasks=} ;;
        -n) n=$2; shift ;;
        --*) ;;
        *) break ;;
    esac
    shift
done
export SLURM_NTASKS=$n
exec mpirun --oversubscribe -np "$n" -x SLURM_NTASKS "$@"
SH
chmod +x "$D/bin/srun"
export PATH="$D/bin:$PATH"
for i in $(seq 1 40); do cat "$SRC/executor/exec.c"; done > "$D/text.txt"
cd "$D"
$U plan --gpus 2 --dp 2 --tp 1 --pp 1 --zero 1 --precision fp32 --gpu h100 --layers 2 --hidden 64 \
    --heads 4 --seq 32 --vocab 256 --gbs 4 --mbs 2 --no-dropout -o plan.json > /dev/null || fail "plan"

check "export slurm without --data" nz $U export plan.json --format slurm
check "export bad --time" nz $U export plan.json --format slurm --data text.txt --time 25:99:00
check "export bad --job-name" nz $U export plan.json --format slurm --data text.txt --job-name 'a;b'
check "export --data for megatron" nz $U export plan.json --format megatron --data text.txt

$U export plan.json --format slurm --data text.txt --backend cpu --steps 3 --checkpoint-dir ck -o job1.sh \
    || fail "export slurm (3 steps)"
grep -q -- "--backend cpu" job1.sh || fail "script lacks --backend cpu"
bash job1.sh > first.log 2>&1 || { cat first.log; fail "first submission"; }
grep -q resuming first.log && fail "first submission resumed from nothing"
[ -f ck/manifest.json ] && [ -d ck/step-000003 ] && ok "first submission: checkpoint at step 3" \
    || fail "first submission left no checkpoint at step 3"

# run without --resume on the committed checkpoint: refused, byte-identical
sum() { find ck -type f | sort | xargs cat | cksum; }
before=$(sum)
mpirun --oversubscribe -np 2 $U run plan.json --data text.txt --checkpoint-dir ck --steps 2 > refused.log 2>&1 \
    && fail "run over a committed checkpoint succeeded"
grep -q -- "--resume to continue it or --overwrite-checkpoints" refused.log && ok "run over a committed checkpoint refused" \
    || { cat refused.log; fail "refusal does not name --resume and --overwrite-checkpoints"; }
[ "$(sum)" = "$before" ] && ok "checkpoint byte-identical after the refused run" || fail "checkpoint changed"

# resubmission (a longer run): resumes at step 3, ends with a checkpoint at 6
$U export plan.json --format slurm --data text.txt --backend cpu --steps 6 --checkpoint-dir ck -o job2.sh \
    || fail "export slurm (6 steps)"
bash job2.sh > second.log 2>&1 || { cat second.log; fail "resubmission"; }
grep -q "resumed from ck at step 3" second.log && ok "resubmission resumed at step 3" \
    || { cat second.log; fail "resubmission did not resume"; }
[ -d ck/step-000006 ] && grep -q '"step":[[:space:]]*6' ck/manifest.json && ok "checkpoint now at step 6" \
    || fail "no checkpoint at step 6 after the resubmission"

# the script fails up front on what it can check
$U export plan.json --format slurm --data missing.bin --backend cpu -o job3.sh || fail "export (missing data)"
check "script with missing data" nz bash job3.sh

[ $fails -eq 0 ] || { echo "$fails failure(s)"; exit 1; }
echo "e2e_slurm: all ok"
