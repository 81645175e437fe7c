# Checkpoints: the format and commit protocol on host buffers (unit, MPI
# singleton, no GPU); the CUDA backend's resume against an uninterrupted run
# (gpu: exits 77 without a GPU; with 2 or more, also dp 2 ZeRO-1 under mpirun).
# The CPU backend's are in mpi_run.sh and mpi_faults.sh.
if(TARGET up_executor)
  up_test(test_ckpt SOURCES test_ckpt.c LIBS up_executor LABELS unit)
endif()
if(TARGET up_executor_cuda)
  up_script_test(cuda_ckpt SCRIPT cuda_ckpt.sh LABELS gpu ARGS $<TARGET_FILE:test_cuda_exec_mpi>)
endif()
