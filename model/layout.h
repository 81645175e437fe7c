/* layout.h — how a model is laid out on a cluster: parallel sizes, batch,
 * optimizer sharding, precision, recomputation and layers per stage.
 *
 * layout_check() is the one place that says whether a layout divides; it
 * names the numbers that clash.
 */
#ifndef ULTRAPLAN_MODEL_LAYOUT_H
#define ULTRAPLAN_MODEL_LAYOUT_H

#include <stdbool.h>

#include "hw.h"
#include "spec.h"

#define LAYOUT_MAX_PP 256

typedef enum {
    OPT_ZERO0,     // plain data parallel: every rank holds all optimizer state
    OPT_ZERO1,     // optimizer states sharded over dp·cp
    OPT_ZERO2,     // + gradients sharded
    OPT_ZERO3,     // + parameters sharded (gathered per layer)
    OPT_DISTOPT,   // Megatron distributed optimizer (= ZeRO-1 with fp32 main grads)
    OPT_COUNT
} OptimShard;

typedef struct {
    int dp, tp, pp, vp, cp;        // data, tensor, pipeline, virtual (interleave), context parallel sizes
    bool sp;                       // sequence parallel (only meaningful with tp > 1)
    int mbs;                       // micro-batch, sequences
    int gbs;                       // global batch, sequences
    OptimShard opt;
    Precision prec;                // compute / weight precision
    bool grad_fp32;                // gradients accumulated and reduced in fp32 (Megatron default)
    bool flash;                    // fused flash attention (no s^2 activations)
    bool overlap_grad;             // DP gradient reduction overlapped with backward (Megatron --overlap-grad-reduce)
    FlopConvention flops;          // convention for MFU and days
    int layers[LAYOUT_MAX_PP];     // layers per pipeline stage; all 0 = even split
    int full_rc[LAYOUT_MAX_PP];    // fully recomputed layers per stage
    int sel_rc[LAYOUT_MAX_PP];     // selectively recomputed layers per stage
} Layout;

/* A layout with everything at 1 / defaults for this model: bf16, flash,
 * ZeRO-0, grad_fp32, no recomputation. */
void layout_default(Layout *lo);

/* Apply one recomputation choice to every layer of every stage (after the
 * layer split is known: call layout_check first or set layers). */
void layout_set_recompute(Layout *lo, Recompute r);

/* Fill an even layer split if none is given and check that every number
 * divides. Returns 0, or -1 with a one-line reason in err. */
int layout_check(Layout *lo, const ModelSpec *m, const HwProfile *hw, char *err, int errlen);

int layout_gpus(const Layout *lo);                // dp·tp·pp·cp
int layout_microbatches(const Layout *lo);        // m = gbs / (dp·mbs)
/* Ranks that reduce gradients together and over which ZeRO shards model
 * states: dp·cp (Megatron forms its data-parallel group over dp × cp). */
int layout_dp_group(const Layout *lo);
/* Tokens one GPU processes per micro-batch: mbs · s / cp (its CP shard). */
double layout_mb_tokens(const ModelSpec *m, const Layout *lo);
/* The share of a non-TP-split activation one GPU holds or touches: 1/tp
 * under sequence parallelism, else 1 (replicated). */
double layout_sp_share(const Layout *lo);
Recompute layout_stage_recompute(const Layout *lo, int stage);  // dominant mode for display

const char *layout_opt_name(OptimShard o);
int layout_parse_opt(const char *s, OptimShard *out);

#endif
