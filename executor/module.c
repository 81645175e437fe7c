/* module.c — the entry table of libultraplan-exec.so (module.h): `run` and
 * `calibrate` once the command line is parsed. MPI starts here, not in the
 * binary; the CUDA module is opened only when --backend cuda asks for it. */
#include "module.h"

#include <stdio.h>
#include <string.h>

#include "bench_cpu.h"
#include "dist.h"
#include "loop.h"
#include "modload.h"
#include "refuse.h"

#define CUDA_HINT "--backend cuda needs the CUDA 13 runtime, cuBLASLt and NCCL: install them (or put their " \
                  "directory on LD_LIBRARY_PATH), or use --backend cpu"

/* The CUDA module's table, or NULL with err. */
static const UpCudaModule *cuda_module(char *err, int errlen)
{
    char why[1024];
    const UpCudaModule *m = modload_symbol(UP_CUDA_MODULE_FILE, UP_CUDA_MODULE_SYMBOL, why, sizeof why);
    if (!m) {
        snprintf(err, errlen, "%s. %s", why, CUDA_HINT);
        return NULL;
    }
    if (m->abi != UP_MODULE_ABI || m->run_request_size != sizeof(RunRequest) ||
        m->planfile_size != sizeof(PlanFile)) {
        snprintf(err, errlen, "%s is of another ultraplan build (module ABI %d, this one %d): rebuild or "
                              "reinstall both together", UP_CUDA_MODULE_FILE, m->abi, UP_MODULE_ABI);
        return NULL;
    }
    return m;
}

static int module_run(const RunRequest *rq)
{
    int rank = 0, world = 1, rc = 1;
    dist_world_init(&rank, &world);
    dist_watchdog_start(rq->comm_timeout);
    char err[1400] = "";
    const ExecBackend *b = &exec_cpu_backend;
    if (rq->cuda) {
        const UpCudaModule *m = cuda_module(err, sizeof err);
        b = m ? m->backend : NULL;
    }
    if (b && refuse_overflow(&rq->pf->model, &rq->pf->layout, err, sizeof err) != 0)
        b = NULL;   // a hostile plan: refused by name on every rank, before any allocation
    if (b)
        rc = loop_run(b, rq, rank, world);
    else if (rank == 0)
        fprintf(stderr, "ultraplan run: %s\n", err);
    dist_watchdog_stop();
    dist_world_finalize();
    return rc;
}

static int module_calibrate(const CalibRequest *rq)
{
    int rank = 0, world = 1, rc = 1;
    dist_world_init(&rank, &world);
    if (!rq->cuda) {
        rc = bench_cpu_calibrate(rq->out, rank, world);
    } else {
        char err[1400] = "";
        const UpCudaModule *m = cuda_module(err, sizeof err);
        if (m)
            rc = m->calibrate(rq->out, rank, world);
        else if (rank == 0)
            fprintf(stderr, "ultraplan calibrate: %s\n", err);
    }
    dist_world_finalize();
    return rc;
}

const UpExecModule ultraplan_exec_module = {
    .abi = UP_MODULE_ABI,
    .run_request_size = sizeof(RunRequest),
    .planfile_size = sizeof(PlanFile),
    .calib_request_size = sizeof(CalibRequest),
    .run = module_run,
    .calibrate = module_calibrate,
};
