# The executor under faults: killed and hung ranks, killed checkpoint writes,
# corrupted checkpoints, NaN loss, disk full, SIGTERM (tests/mpi_faults.sh).
if(TARGET up_executor)
  up_script_test(mpi_faults SCRIPT mpi_faults.sh LABELS mpi)
endif()
