/* curun.h — `[mpirun -np N] ultraplan run --backend cuda`: a training run
 * on one GPU per rank, or the stage proxy of a larger plan on one GPU,
 * measured into a run.json document (ultraplan.run/1, the fields runlog.h
 * writes, backend "cuda"; the proxy adds a "proxy" object with predicted vs
 * measured seconds per micro-batch). A proxy's flops_per_token and mfu are
 * the rank's share (proxy_flops_per_token): its stage's layers at one tp
 * rank's shapes, not the whole model's FLOPs over one GPU's tokens.
 *
 * The summary is the median over the steps after the first (warm-up:
 * cuBLASLt heuristics, NCCL connections, first touch). Timers are CUDA
 * events per phase on each rank; a step reports the phases of the busiest
 * rank (most compute, as runlog.c) and the slowest rank's step time. Every
 * rank's memory is a row of the memory array: the slabs by category, the
 * device peak (total − least free from cudaMemGetInfo: context, cuBLASLt
 * workspace and NCCL buffers included) and, where NVML loads, the GPU's
 * busy percentage sampled after every step and averaged over the run (the
 * summary's gpu_util_pct: the mean over ranks; omitted without NVML).
 *
 * Checkpoints and stop signals as the CPU run loop (cmd_run.c,
 * docs/reliability/FAULTS.md): every ckpt_every steps, at the end, and after
 * the step on which stop() reports a signal, in the CPU's format (cuexec_save);
 * resume continues from the checkpoint up to `steps` in all. The summary
 * covers the steps this process ran.
 */
#ifndef ULTRAPLAN_EXECUTOR_CUDA_CURUN_H
#define ULTRAPLAN_EXECUTOR_CUDA_CURUN_H

#include <cjson/cJSON.h>
#include <stdio.h>

#include "exec.h"

typedef struct {
    const char *data;      // token shards or text (unused by the proxy)
    int steps;             // optimizer steps (proxy: repetitions of the m micro-batches)
    int proxy_stage;       // -1: train the whole model; else the stage to proxy
    TrainOpts opt;
    FILE *log;             // one progress line per step, nullable
    const char *ckpt_dir;  // checkpoint directory, NULL none (not with the proxy)
    int ckpt_every;        // steps between checkpoints, 0: only at the end
    int resume;            // continue from the checkpoint in ckpt_dir
    int (*stop)(void);     // nullable; collective: the stop signal any rank got (SIGTERM, SIGUSR1), or 0
} CuRunOpts;

/* 1 when this build can run several GPUs (NCCL). */
int curun_multi_gpu(void);

/* The run.json document on every rank (caller deletes; rank 0 writes it), or
 * NULL with err on the ranks that failed and an empty err on the others.
 * Collective under mpirun. */
cJSON *curun(const ModelSpec *m, const HwProfile *hw, const Layout *lo, const CuRunOpts *o, char *err, int errlen);

#endif
