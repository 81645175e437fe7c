# The executor: loss equality of every layout under mpirun, memory against
# the cost model, gradients against finite differences, checkpoints, errors;
# the context-parallel ring attention alone.
if(TARGET up_executor)
  up_test(test_executor SOURCES test_executor.c LIBS up_executor LABELS unit)
  add_executable(test_executor_mpi test_executor_mpi.c)
  target_link_libraries(test_executor_mpi PRIVATE up_executor)
  up_script_test(mpi_layouts SCRIPT mpi_layouts.sh LABELS mpi
                 ARGS $<TARGET_FILE:test_executor_mpi>)
  # the context-parallel ring attention alone against the full kernel
  add_executable(test_cpattn_mpi test_cpattn_mpi.c)
  target_link_libraries(test_cpattn_mpi PRIVATE up_executor)
  up_script_test(mpi_cpattn SCRIPT mpi_cpattn.sh LABELS mpi
                 ARGS $<TARGET_FILE:test_cpattn_mpi>)
endif()
if(TARGET up_executor)
  up_script_test(mpi_run SCRIPT mpi_run.sh LABELS mpi)
endif()
if(TARGET up_executor)
  # every one of the planner's top layouts for small models runs (issue 18)
  up_script_test(mpi_plans SCRIPT mpi_plans.sh LABELS "mpi;slow"
                 ARGS $<TARGET_FILE:ultraplan>)
endif()
