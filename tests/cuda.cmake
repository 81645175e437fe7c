# GPU kernels against their CPU twins (kernels/cuda/ vs kernels/cpu/).
# Builds wherever nvcc is found; exits 77 (skipped) where no GPU is present.
if(HAVE_CUDA AND TARGET up_kernels_cuda AND TARGET up_kernels_cpu)
  up_test(test_kernels_cuda SOURCES test_kernels_cuda.c
          LIBS up_kernels_cuda up_kernels_cpu LABELS gpu)
  target_include_directories(test_kernels_cuda PRIVATE ${CUDAToolkit_INCLUDE_DIRS})
endif()
