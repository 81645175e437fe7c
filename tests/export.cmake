# planner/export.c: Megatron arguments that re-predict exactly, refusals,
# torchtitan keys, Slurm scripts; the exported Slurm script run end to end.
if(CMOCKA_FOUND)
  up_test(test_export SOURCES test_export.c LIBS up_planner up_profiles PkgConfig::CMOCKA LABELS unit)
endif()
up_script_test(e2e_slurm SCRIPT e2e_slurm.sh LABELS e2e mpi)
