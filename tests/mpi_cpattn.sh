#!/bin/bash
# The context-parallel ring attention alone equals the full attention kernel,
# on rings of 2, 3 and 4 ranks: test_cpattn_mpi under mpirun.
# usage: mpi_cpattn.sh PATH/test_cpattn_mpi
set -u
BIN=$1
command -v mpirun >/dev/null || { echo "mpirun not found: skipped"; exit 77; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
export OMPI_MCA_rmaps_base_oversubscribe=1
fails=0
for np in 2 3 4; do
    mpirun --oversubscribe -np $np "$BIN" || { echo "FAIL: cp $np"; fails=$((fails + 1)); }
done
[ $fails -eq 0 ]
