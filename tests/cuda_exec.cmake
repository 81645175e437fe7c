# executor/cuda/: the stage proxy's shapes against the cost model (unit, no
# GPU), and the CUDA trainer's losses against the CPU executor's (gpu: exits
# 77 where no GPU is present).
if(TARGET up_proxy)
  up_test(test_cuda_exec_proxy SOURCES test_cuda_exec_proxy.c LIBS up_proxy up_profiles LABELS unit)
endif()
if(TARGET up_executor_cuda)
  up_test(test_cuda_exec SOURCES test_cuda_exec.c LIBS up_executor_cuda up_executor LABELS gpu)
endif()
