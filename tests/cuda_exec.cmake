# executor/cuda/: the stage proxy's shapes against the cost model and the
# multi-GPU plan arithmetic (unit, no GPU), and the CUDA trainer's losses
# against the CPU executor's, one GPU and several under mpirun (gpu: exits
# 77 where too few GPUs are present).
if(TARGET up_proxy)
  up_test(test_cuda_exec_proxy SOURCES test_cuda_exec_proxy.c LIBS up_proxy up_executor up_profiles LABELS unit)
  if(CMOCKA_FOUND)
    up_test(test_cuda_plan SOURCES test_cuda_plan.c LIBS up_proxy up_executor PkgConfig::CMOCKA LABELS unit)
  endif()
endif()
if(TARGET up_executor_cuda)
  up_test(test_cuda_exec SOURCES test_cuda_exec.c LIBS up_executor_cuda up_executor LABELS gpu)
  # fp8 training (plan precision fp8) against bf16, 200 steps of a small GPT
  up_test(test_cuda_fp8 SOURCES test_cuda_fp8.c LIBS up_executor_cuda up_executor LABELS gpu)
  if(CMOCKA_FOUND)
    up_test(test_cuda_exec_errors SOURCES test_cuda_exec_errors.c LIBS up_executor_cuda up_executor
            PkgConfig::CMOCKA LABELS unit)
    # the fp8 plan's scratch and kept copies as cuexec.c carves them (arithmetic, no GPU)
    up_test(test_cuda_fp8_mem SOURCES test_cuda_fp8_mem.c LIBS up_executor_cuda up_executor
            PkgConfig::CMOCKA LABELS unit)
  endif()
endif()
if(TARGET up_executor_cuda)
  add_executable(test_cuda_exec_mpi test_cuda_exec_mpi.c)
  target_link_libraries(test_cuda_exec_mpi PRIVATE up_executor_cuda up_executor)
  # the routed MoE block (cumoe.h) against a host reference: one GPU here,
  # ep 2 and 4 under mpirun in mpi_cuda_layouts.sh
  up_test(test_cuda_exec_moe SOURCES test_cuda_exec_moe.c LIBS up_executor_cuda up_executor up_proxy up_executor
          LABELS gpu)   # up_executor again: cuplan.c (pulled in by cucomm) reads its param table
  up_script_test(mpi_cuda_layouts SCRIPT mpi_cuda_layouts.sh LABELS "gpu;mpi"
                 ARGS $<TARGET_FILE:test_cuda_exec_mpi> $<TARGET_FILE:test_cuda_exec_moe>)
endif()
