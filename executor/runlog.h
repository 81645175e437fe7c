/* runlog.h — the measured side of a run as run.json (ultraplan.run/1):
 * per step the loss, wall time, tokens/s, MFU and the seconds of each phase
 * (the maximum over ranks: the critical path), and per rank the bytes
 * allocated by category and the process's peak RSS (VmHWM).
 *
 * The summary is the median over the steps after the first (warm-up: first
 * touch of the slabs, BLAS thread start); medians resist a noisy neighbour.
 */
#ifndef ULTRAPLAN_EXECUTOR_RUNLOG_H
#define ULTRAPLAN_EXECUTOR_RUNLOG_H

#include <cjson/cJSON.h>

#include "exec.h"

#define RUN_FORMAT "ultraplan.run/1"

typedef struct {
    cJSON *steps;          // rank 0 only
    double flops_per_token;   // model FLOPs per token (the plan's convention)
    double peak;           // FLOP/s of one rank (the profile's peak for the precision)
    double *hist;          // (cap, PH_COUNT + 1) phases and step time of the averaged steps
    int cap;
    double last_loss;
    int n, nsum;
} RunLog;

void runlog_init(RunLog *r, double flops_per_token, double peak);
/* Collective. Returns tokens/s and MFU of this step through the pointers (nullable). */
void runlog_step(RunLog *r, const Exec *e, const StepStats *st, double *tok_s, double *mfu);
/* Collective. The document on rank 0 (caller deletes), NULL on others. */
cJSON *runlog_finish(RunLog *r, const Exec *e);

/* Peak resident set of this process in bytes (VmHWM), 0 if unknown. */
double runlog_rss_peak(void);

/* The pieces of run.json both backends write (executor/cuda/curun.c too):
 * the phases object {fwd: s, ...}; the median of column k of n history rows
 * of PH_COUNT + 1 (phases, then step time); one rank's memory row (bytes by
 * XM_* category, their total, peak RSS; the caller may add fields). */
cJSON *runlog_phases_json(const double *t);
double runlog_median(const double *hist, int n, int k);
cJSON *runlog_memory_row(int rank, int stage, int tp_rank, int dp_rank, const double *mem, double rss_peak);

#endif
