/* cost.h — the cost of one layout: memory per pipeline stage, step time by
 * phase, throughput, MFU/HFU, training days and the price of failures.
 *
 * cost() is pure arithmetic over (ModelSpec, HwProfile, Layout); the planner
 * calls it in its inner loop and the TUI on every key, so it allocates
 * nothing. The pieces (memory.c, time.c, train.c) are exposed for the ILP,
 * which needs per-layer terms, and for tests.
 */
#ifndef ULTRAPLAN_MODEL_COST_H
#define ULTRAPLAN_MODEL_COST_H

#include <stdbool.h>

#include "hw.h"
#include "layout.h"
#include "spec.h"

typedef enum {
    MEM_WEIGHTS,
    MEM_GRADS,
    MEM_OPTIM,
    MEM_ACTS,
    MEM_BUFFERS,     // communication buffers, ZeRO-3 gather buffers, PP send/recv
    MEM_OVERHEAD,    // CUDA context and allocator fragmentation
    MEM_COUNT
} MemKind;

typedef struct {
    double bytes[MEM_COUNT];   // bytes per GPU of this stage
    double total;              // bytes, sum of the above
    double inflight;           // micro-batches (of full stage size) whose activations are held
    int layers;                // transformer layers on this stage (all chunks)
    double params;             // parameters held by one GPU of this stage (before ZeRO sharding)
} StageMem;

typedef enum {
    T_COMPUTE,       // forward + backward GEMMs, attention, memory-bound ops (critical-path stage)
    T_RECOMPUTE,     // extra forward for recomputation
    T_TP,            // exposed TP / SP collectives
    T_CP,            // exposed CP KV exchange
    T_PP,            // exposed PP send/recv
    T_BUBBLE,        // pipeline fill and drain
    T_DP,            // exposed DP gradient reduction / ZeRO gathers
    T_OPTIM,         // optimizer step
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
} Training;

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

/* Options that are not part of the layout. */
typedef struct {
    double tokens;             // token budget for days; 0 = 20 tokens per parameter
    double mtbf_gpu_hours;     // per-GPU MTBF override; 0 = the profile's failure rate
    double restart_s;          // restart time override; < 0 = the profile's
} CostOpts;

void cost_opts_default(CostOpts *o);

/* The full cost of a checked layout (layout_check must have succeeded). */
void cost(const ModelSpec *m, const HwProfile *hw, const Layout *lo, const CostOpts *o, Cost *out);

/* ---- memory.c ---- */

/* Activation bytes of one transformer layer for one micro-batch, per GPU,
 * under tp, sp, cp, flash and a recomputation mode (Korthikanti terms). */
double memory_layer_acts(const ModelSpec *m, const Layout *lo, Recompute r);
/* Activations that stay live while one fully recomputed layer runs its
 * backward (the recompute working set). */
double memory_recompute_workspace(const ModelSpec *m, const Layout *lo);
/* Micro-batches whose activations stage `s` holds at the 1F1B peak,
 * counting interleaving (in units of the whole stage's layers). */
double memory_inflight(const Layout *lo, int stage);
/* Parameters held by one GPU of stage s (TP-sharded, before ZeRO). */
double memory_stage_params(const ModelSpec *m, const Layout *lo, int stage, int layers);
/* Bytes per parameter of weights, gradients and optimizer states for this
 * precision and sharding (ZeRO paper §5 / Megatron dist-opt table). */
void memory_state_bytes(const Layout *lo, double *w, double *g, double *o);
/* Fill one stage's memory. */
void memory_stage(const ModelSpec *m, const HwProfile *hw, const Layout *lo, int stage, StageMem *out);

/* ---- time.c ---- */

/* Seconds of one collective of `bytes` (the full buffer) over n ranks whose
 * group spans `nodes` nodes; hierarchical when it spans nodes. */
double time_allreduce(const HwProfile *hw, double bytes, int n, int per_node);
double time_allgather(const HwProfile *hw, double bytes, int n, int per_node);  // also reduce-scatter
double time_p2p(const HwProfile *hw, double bytes, bool cross_node);
/* Seconds of a memory-bound pass moving `bytes` (HBM at the mem_eff curve). */
double time_mem_s(const HwProfile *hw, double bytes);

/* Whether Megatron's fused scale-mask-softmax kernel serves this unfused
 * attention (micro-batch x heads per TP rank a multiple of 4, 16 < s <= 4096,
 * s a multiple of 4); else PyTorch runs it in fp32 as separate ops. */
bool time_softmax_fused(const ModelSpec *m, const Layout *lo);

/* Per-layer, per-micro-batch times on one GPU (seconds). */
typedef struct {
    double fwd;        // forward compute of one layer
    double bwd;        // backward compute of one layer
    double rc_full;    // extra forward when the layer is fully recomputed
    double rc_sel;     // extra forward when selectively recomputed
    double tp_fwd;     // exposed TP comm in forward
    double tp_bwd;     // exposed TP comm in backward
    double tp_rc;      // exposed TP comm of a full recompute
    double cp;         // exposed CP comm (fwd + bwd)
} LayerTime;

void time_layer(const ModelSpec *m, const HwProfile *hw, const Layout *lo, LayerTime *out);
/* Time of the first stage's extra work (embedding) and the last stage's
 * (final norm, LM head, loss) per micro-batch, forward + backward. */
double time_embed(const ModelSpec *m, const HwProfile *hw, const Layout *lo);
double time_head(const ModelSpec *m, const HwProfile *hw, const Layout *lo);
/* Per micro-batch time of a stage with n layers, f fully and e selectively recomputed. */
double time_stage_mb(const ModelSpec *m, const HwProfile *hw, const Layout *lo, const LayerTime *lt,
                     int stage, int n, int f, int e);
/* PP send/recv seconds per micro-batch per boundary (fwd + bwd), exposed. */
double time_pp_mb(const ModelSpec *m, const HwProfile *hw, const Layout *lo);

/* The two per-stage terms that cost() takes the max of over stages, exposed
 * for the planner's ILP: exposed DP seconds per step of stage s (uses
 * lo->layers[s]) and optimizer seconds of a stage holding `params`. */
double cost_stage_dp_s(const ModelSpec *m, const HwProfile *hw, const Layout *lo, const LayerTime *lt, int s);
double cost_stage_optim_s(const HwProfile *hw, const Layout *lo, double params);

/* An fp8 layout's MFU is against the fp8 peak; teams usually quote it against
 * the bf16 one. That figure, or -1 when the layout is not fp8 or the profile
 * has no bf16 peak. */
double cost_mfu_bf16_peak(const HwProfile *hw, const Layout *lo, const Cost *c);

/* ---- train.c ---- */

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
void train_fill(const ModelSpec *m, const HwProfile *hw, const Layout *lo, const CostOpts *o, Cost *c);

const char *cost_mem_name(MemKind k);
const char *cost_time_name(TimeKind k);

#endif
