/* train.h — FLOPs per token under the MFU conventions, training days, and
 * the price of failures: Poisson interruptions, the Young and Daly
 * checkpoint intervals, and the wall time lost to checkpoints, rework and
 * restarts. docs/COSTMODEL.md §5-6.
 */
#ifndef ULTRAPLAN_MODEL_TRAIN_H
#define ULTRAPLAN_MODEL_TRAIN_H

#include "hw.h"
#include "layout.h"
#include "spec.h"

/* Options of cost() that are not part of the layout; only the training
 * estimate reads them. cost_opts_default() (cost.h) sets them. */
typedef struct {
    double tokens;             // token budget for days; 0 = 20 tokens per parameter
    double mtbf_gpu_hours;     // per-GPU MTBF override; 0 = the profile's failure rate
    double restart_s;          // restart time override; < 0 = the profile's
    double price;              // dollars per GPU-hour; 0 = not priced
} CostOpts;

typedef struct {
    double tokens;             // token budget
    double steps;              // optimizer steps
    double days;               // ideal: no failures
    double gpu_hours;          // ideal
    double failures;           // expected interruptions over the ideal run
    double fail_per_day;       // expected interruptions per day
    double p_fail_day;         // P(at least one failure in a day)
    double job_mtbf_s;         // seconds between failures of the whole job
    double ckpt_bytes;         // bytes of one checkpoint (whole job)
    double ckpt_write_s;       // seconds one checkpoint stalls the job (delta)
    double young_s;            // Young interval, seconds
    double daly_s;             // Daly interval, seconds (used)
    double waste;              // fraction of wall time lost to checkpoints, rework, restarts
    double days_with_failures; // days including that loss
    double dollars;            // gpu_hours × price (0 when not priced)
    double dollars_with_failures;   // the GPU-hours of days_with_failures × price
} Training;

/* Model FLOPs per token under the layout's convention, and hardware FLOPs with its recomputation. */
double train_model_flops_per_token(const ModelSpec *m, const Layout *lo);
double train_hw_flops_per_token(const ModelSpec *m, const Layout *lo);
/* Days for a token budget: days = tokens · C / (gpus · peak · mfu · 86400). */
double train_days(double tokens, double flops_per_token, int gpus, double peak, double mfu);
/* Young and Daly optimal checkpoint intervals for stall delta and job MTBF M (seconds). */
double train_young(double delta, double M);
double train_daly(double delta, double M);
/* Poisson failures: expected count and P(>=1) for n GPUs over t seconds at rate lambda per GPU-second. */
double train_expected_failures(double lambda, int n, double t);
double train_p_any_failure(double lambda, int n, double t);
/* The training estimate of a layout whose step takes step_s seconds for
 * tokens_per_step tokens. */
void train_fill(const ModelSpec *m, const HwProfile *hw, const Layout *lo, const CostOpts *o,
                double tokens_per_step, double step_s, Training *out);

#endif
