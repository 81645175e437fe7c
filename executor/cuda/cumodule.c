/* cumodule.c — the entry table of libultraplan-cuda.so (module.h): the
 * CUDA backend of the run loop and `calibrate --backend cuda`. The exec
 * module opens it only when --backend cuda is asked for, so a CPU run needs
 * no CUDA library on the machine. */
#include "bench_cuda.h"
#include "curun.h"

const UpCudaModule ultraplan_cuda_module = {
    .abi = UP_MODULE_ABI,
    .run_request_size = sizeof(RunRequest),
    .planfile_size = sizeof(PlanFile),
    .backend = &curun_backend,
    .multi_gpu = curun_multi_gpu,
    .calibrate = bench_cuda_calibrate,
};
