# run and calibrate open libultraplan-exec.so (executor/: MPI, BLAS, OpenMP)
# at run time through up_modload (libdl); compare reads run.json through
# up_runfile (cJSON). The binary links no MPI, BLAS, OpenMP, CUDA or NCCL.
target_link_libraries(ultraplan PRIVATE up_runfile up_modload)
if(TARGET ultraplan_exec)
  add_dependencies(ultraplan ultraplan_exec)   # `make ultraplan` builds what `run` opens
endif()
