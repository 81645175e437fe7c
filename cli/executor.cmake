# run, calibrate and compare need the executor (MPI, BLAS kernels).
if(TARGET up_executor)
  target_link_libraries(ultraplan PRIVATE up_executor)
endif()
