/* loop.h — the one training loop of `ultraplan run`, over a backend table.
 *
 * A backend (CPU: backend_cpu.c; CUDA: executor/cuda/curun.c, in the CUDA
 * module) knows how to build one rank's part of a plan, take one optimizer
 * step, save and load a checkpoint and count its memory. The loop owns
 * everything around that, once for both: the progress line with its ETA on
 * rank 0, the checkpoint cadence (every K steps, at the end, after a stop
 * signal), SIGTERM/SIGUSR1 agreed over the ranks so that all stop after the
 * same step, failures reported by one rank (the lowest failing one's
 * message, with where the last good checkpoint is), the communication
 * watchdog's floor, the step view run.json records (the busiest rank's
 * phases, the slowest rank's step time) and run.json itself (runfile.h:
 * rewritten while it trains, status at the end).
 *
 * The backends are chosen at build time: the CUDA entry exists only in a
 * build with CUDA (the CUDA module), as nvtop builds only the GPU vendors
 * it finds.
 */
#ifndef ULTRAPLAN_EXECUTOR_LOOP_H
#define ULTRAPLAN_EXECUTOR_LOOP_H

#include <stdio.h>

#include "exec.h"
#include "module.h"
#include "planfile.h"
#include "runfile.h"

/* What a backend reports after init. */
typedef struct {
    const char *name;            // run.json "backend": "cpu", "cuda", "cuda-proxy"
    double tokens_per_step;      // the global batch's tokens (proxy: this GPU's micro-batches)
    double flops_per_token;      // MFU's numerator per token (proxy: the rank's share)
    double peak;                 // FLOP/s of one rank at the precision it computes in
    Layout lo;                   // the layout as run (run.json "layout")
    int checkpoints;             // 0: trains nothing to save (the stage proxy)
    int step;                    // optimizer steps done (after load: the checkpoint's)
} RunInfo;

typedef struct ExecBackend {
    const char *name;            // "cpu", "cuda"
    /* Build this rank's part of pf for rq (collective). 0, or -1 with err on
     * the ranks that failed; *state is set either way (free accepts it). log:
     * rank 0's stdout, NULL elsewhere. */
    int (*init)(void **state, const PlanFile *pf, const RunRequest *rq, const TrainOpts *opt, FILE *log,
                RunInfo *info, char *err, int errlen);
    void (*describe)(void *state, FILE *log);   // the header lines of the run, rank 0
    /* One optimizer step (collective). 0, or -1 with err. */
    int (*step)(void *state, StepStats *st, char *err, int errlen);
    /* Checkpoint (collective, the same result on every rank); load sets *step. */
    int (*save)(void *state, const char *dir, char *err, int errlen);
    int (*load)(void *state, const char *dir, int *step, char *err, int errlen);
    /* This rank's memory row (rank and rss_peak are the loop's). */
    void (*memory)(void *state, RunMem *row);
    /* Nullable: an object added to run.json at the end (rank 0; med: the
     * summary's phase medians), its lines on log. */
    cJSON *(*extra)(void *state, const PlanFile *pf, const double *med, FILE *log, const char **name);
    void (*free)(void *state);
} ExecBackend;

/* The CPU backend (backend_cpu.c). */
extern const ExecBackend exec_cpu_backend;

/* Run rq on backend b: MPI is up, the watchdog started. The exit status:
 * 0 when it ran to the end or stopped on a signal with its checkpoint
 * written, 1 on a failure (printed by one rank). Collective. */
int loop_run(const ExecBackend *b, const RunRequest *rq, int rank, int world);

/* Peak resident set of this process in bytes (VmHWM), 0 if unknown. */
double loop_rss_peak(void);

#endif
