# calibrate: the all-to-all fit on synthetic timings (no MPI); the CPU
# calibration under mpirun writes a profile with every measured field.
if(TARGET PkgConfig::CMOCKA AND TARGET up_bench_fit)
  up_test(test_bench_fit SOURCES test_bench_fit.c LIBS up_bench_fit up_profiles PkgConfig::CMOCKA LABELS unit)
endif()
if(TARGET up_executor)
  up_script_test(mpi_calibrate SCRIPT mpi_calibrate.sh LABELS "mpi;slow")
endif()
