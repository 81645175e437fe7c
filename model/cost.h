/* cost.h — the cost of one layout: memory per pipeline stage, step time by
 * phase, throughput, MFU/HFU, training days and the price of failures.
 *
 * cost() is pure arithmetic over (ModelSpec, HwProfile, Layout); the planner
 * calls it in its inner loop and the TUI on every key, so it allocates
 * nothing. It assembles the modules below it: memory.h (bytes per stage),
 * timing.h (seconds per layer and micro-batch), train.h (FLOPs conventions,
 * days, failures); this file owns what is per step: the 1F1B or interleaved
 * bubble, the exposed DP collectives and the optimizer step. Including
 * cost.h gives all of model/. docs/COSTMODEL.md.
 */
#ifndef ULTRAPLAN_MODEL_COST_H
#define ULTRAPLAN_MODEL_COST_H

#include <stdbool.h>

#include "hw.h"
#include "layout.h"
#include "memory.h"
#include "spec.h"
#include "timing.h"
#include "train.h"

typedef enum {
    T_COMPUTE,       // forward + backward GEMMs, attention, memory-bound ops (critical-path stage)
    T_RECOMPUTE,     // extra forward for recomputation
    T_TP,            // exposed TP / SP collectives
    T_CP,            // exposed CP KV exchange
    T_PP,            // exposed PP send/recv
    T_BUBBLE,        // pipeline fill and drain
    T_DP,            // exposed DP gradient reduction / ZeRO gathers
    T_OPTIM,         // optimizer step
    T_EP,            // exposed EP all-to-all (MoE dispatch and combine)
    T_COUNT
} TimeKind;

typedef struct {
    double mfu;            // model FLOPs / (step · gpus · peak)
    double hfu;            // hardware FLOPs (with recompute) / (step · gpus · peak)
    double tokens_per_s;   // whole cluster
    double tflops_per_gpu; // model TFLOP/s per GPU
    double flops_per_token;   // model FLOPs per token under the layout's convention
} Throughput;

typedef struct {
    int pp;
    StageMem stage[LAYOUT_MAX_PP];
    double peak_bytes;         // max over stages
    int peak_stage;
    double capacity_bytes;     // HBM of one GPU
    bool fits;
    double time[T_COUNT];      // seconds per step, by phase (sum = step_s)
    double step_s;             // seconds per optimizer step
    double stage_mb_s[LAYOUT_MAX_PP]; // seconds per micro-batch (fwd+bwd+recompute+exposed tp/cp/pp) per stage
    Throughput thr;
    Training train;
    double tokens_per_step;
} Cost;

/* tokens 0 (20 per parameter), the profile's failure rate and restart time. */
void cost_opts_default(CostOpts *o);

/* The full cost of a checked layout (layout_check must have succeeded). */
void cost(const ModelSpec *m, const HwProfile *hw, const Layout *lo, const CostOpts *o, Cost *out);

/* The two per-stage terms that cost() takes the max of over stages, exposed
 * for the planner's ILP: exposed DP seconds per step of stage s (uses
 * lo->layers[s]) and optimizer seconds of a stage holding `params`. */
double cost_stage_dp_s(const ModelSpec *m, const HwProfile *hw, const Layout *lo, const LayerTime *lt, int s);
double cost_stage_optim_s(const HwProfile *hw, const Layout *lo, double params);
/* The optimizer seconds of stage s holding `layers` layers, routed experts
 * stepping on their 1/edp shard (equal to cost_stage_optim_s of the
 * stage's parameters for a dense model). */
double cost_stage_optim_n(const ModelSpec *m, const HwProfile *hw, const Layout *lo, int s, int layers);

/* An fp8 layout's MFU is against the fp8 peak; teams usually quote it against
 * the bf16 one. That figure, or -1 when the layout is not fp8 or the profile
 * has no bf16 peak. */
double cost_mfu_bf16_peak(const HwProfile *hw, const Layout *lo, const Cost *c);

const char *cost_mem_name(MemKind k);
const char *cost_time_name(TimeKind k);

#endif
