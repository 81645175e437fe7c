/* curun.h — `ultraplan run --backend cuda`: a training run on one GPU, or the
 * stage proxy of a larger plan, measured into a run.json document
 * (ultraplan.run/1, the fields runlog.h writes, backend "cuda"; the proxy
 * adds a "proxy" object with predicted vs measured seconds per micro-batch).
 *
 * The summary is the median over the steps after the first (warm-up:
 * cuBLASLt heuristics, first touch). Timers are CUDA events per phase; peak
 * device memory is both what the slabs allocated (by category) and the
 * least free memory cudaMemGetInfo reported (context and workspace included).
 * What it doesn't: NVML utilisation, checkpoints, several GPUs.
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
} CuRunOpts;

/* The run.json document (caller deletes), or NULL with err. */
cJSON *curun(const ModelSpec *m, const HwProfile *hw, const Layout *lo, const CuRunOpts *o, char *err, int errlen);

#endif
