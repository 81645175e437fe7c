/* module.h — the entry tables of the two modules `run` and `calibrate`
 * load on demand, so that the planning binary links no MPI, BLAS, OpenMP,
 * CUDA or NCCL:
 *
 *   libultraplan-exec.so  the MPI executor, the CPU kernels and calibration
 *                         benchmarks, the one run loop (loop.h);
 *                         symbol ultraplan_exec_module (UpExecModule)
 *   libultraplan-cuda.so  the CUDA backend, its kernels and calibration;
 *                         linked against the exec module, loaded by it only
 *                         for --backend cuda; symbol ultraplan_cuda_module
 *                         (UpCudaModule)
 *
 * The caller parses the command line and the plan; the module does the
 * rest and returns the exit status. A table is accepted only when its abi
 * and the sizes of the structs it shares with the caller match this header
 * (a module of another build is refused by name, never called).
 *
 * Plain C, no MPI or CUDA types: cli/ includes it.
 */
#ifndef ULTRAPLAN_EXECUTOR_MODULE_H
#define ULTRAPLAN_EXECUTOR_MODULE_H

#include <stddef.h>

#include "planfile.h"

#define UP_MODULE_ABI 1
#define UP_EXEC_MODULE_FILE "libultraplan-exec.so"
#define UP_CUDA_MODULE_FILE "libultraplan-cuda.so"
#define UP_EXEC_MODULE_SYMBOL "ultraplan_exec_module"
#define UP_CUDA_MODULE_SYMBOL "ultraplan_cuda_module"

/* `ultraplan run`, parsed. */
typedef struct {
    const char *plan;            // the plan file's path (run.json's "plan")
    const PlanFile *pf;          // read by the caller
    const char *data;            // token shards or text; NULL with the proxy
    const char *ckpt_dir;        // NULL: no checkpoints
    const char *out;             // run.json, NULL: none
    int steps;                   // optimizer steps in all
    int ckpt_every;              // steps between checkpoints, 0: only at the end
    int resume;                  // continue from the checkpoint in ckpt_dir
    int cuda;                    // --backend cuda
    int proxy_stage;             // --proxy-stage S, -1 none
    double comm_timeout;         // seconds, 0 = no watchdog
    int has_lr, has_seed;        // given on the command line; else the executor's defaults
    float lr;
    unsigned long long seed;
} RunRequest;

/* `ultraplan calibrate`, parsed. */
typedef struct {
    int cuda;                    // --backend cuda
    const char *out;             // the profile to write
} CalibRequest;

typedef struct {
    int abi;                     // UP_MODULE_ABI
    size_t run_request_size, planfile_size, calib_request_size;
    int (*run)(const RunRequest *rq);          // exit status
    int (*calibrate)(const CalibRequest *rq);  // exit status
} UpExecModule;

struct ExecBackend;
typedef struct {
    int abi;                     // UP_MODULE_ABI
    size_t run_request_size, planfile_size;
    const struct ExecBackend *backend;   // loop.h
    int (*multi_gpu)(void);      // 1 when built with NCCL
    /* calibrate --backend cuda under MPI (up already); exit status */
    int (*calibrate)(const char *out, int rank, int world);
} UpCudaModule;

#endif
