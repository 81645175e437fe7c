# The CUDA backend of run and calibrate lives in libultraplan-cuda.so
# (executor/cuda/), which the executor module opens on demand; the binary
# links none of it. ULTRAPLAN_HAVE_CUDA / _NCCL tell cmd_run.c and
# cmd_calibrate.c whether this build made that module (and with NCCL), for
# --help and for the error of a build without it.
set(HAVE_CUDA_EXECUTOR OFF)
if(TARGET ultraplan_cuda)
  set(HAVE_CUDA_EXECUTOR ON)
  add_dependencies(ultraplan ultraplan_cuda)
endif()
set(UP_CLI_NCCL OFF)
if(HAVE_CUDA_EXECUTOR AND HAVE_NCCL)
  set(UP_CLI_NCCL ON)
endif()
target_compile_definitions(ultraplan PRIVATE ULTRAPLAN_HAVE_CUDA=$<BOOL:${HAVE_CUDA_EXECUTOR}>
                           ULTRAPLAN_HAVE_NCCL=$<BOOL:${UP_CLI_NCCL}>)
report("CUDA executor (run --backend cuda, --proxy-stage)" HAVE_CUDA_EXECUTOR)
