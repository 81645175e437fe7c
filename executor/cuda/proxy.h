/* proxy.h — the stage proxy's arithmetic, without a GPU: which work one
 * tp rank of pipeline stage S of a plan does (its layers, tp-sharded widths,
 * the embedding on stage 0, the head on the last stage) and what the cost
 * model predicts that work costs per micro-batch, with the communication
 * (TP/SP collectives, PP send/recv) split out because the proxy doesn't run it,
 * and that work's share of the model's FLOPs (the proxy's MFU).
 *
 * The CUDA executor builds the stage from this (cuexec.h); the unit test holds
 * the shapes against model/memory.c's memory_stage_params. Dense models
 * only: a mixture-of-experts or MLA plan is refused by name (its expert
 * shapes and their prediction are not here yet).
 */
#ifndef ULTRAPLAN_EXECUTOR_CUDA_PROXY_H
#define ULTRAPLAN_EXECUTOR_CUDA_PROXY_H

#include "cost.h"
#include "params.h"

typedef struct {
    int stage, nstages, tp;
    int layers;                   // transformer layers on the stage, all chunks
    int full_rc, sel_rc;          // fully / selectively recomputed layers
    int first, last;              // holds the embedding / the head and loss
    int B, T, N, C, HS;           // micro-batch shape: N = B·T tokens
    int NHl, NKVl, ql, kvl;       // query heads, kv heads per rank; widths NHl·HS, NKVl·HS
    int Fl, F1l;                  // FFN width per rank; FC1 output (2·Fl for SwiGLU)
    int Vl;                       // vocabulary rows per rank (padded vocab / tp)
    double layer_params;          // parameters of one layer on one rank
    double stage_params;          // all parameters of the stage on one rank
} ProxyShape;

typedef struct {
    double stage_mb_s;            // time_stage_mb: seconds per micro-batch, comm included
    double comm_mb_s;             // its exposed TP + CP + PP part
    double compute_mb_s;          // stage_mb_s − comm_mb_s: what the proxy measures
    double fwd_mb_s, bwd_mb_s, rc_mb_s;   // layer compute split (embedding/head not included)
    double edge_mb_s;             // embedding (stage 0) + head (last stage)
} ProxyPredict;

/* Shapes of one tp rank of stage `stage` of a checked layout. 0, or -1 with
 * err naming what the proxy can't build (stage out of range, cp > 1, heads or
 * FFN not divisible by tp). */
int proxy_shape(const ModelSpec *m, const Layout *lo, int stage, ProxyShape *ps, char *err, int errlen);

/* The cost model's per-micro-batch prediction for that stage. */
void proxy_predict(const ModelSpec *m, const HwProfile *hw, const Layout *lo, int stage, ProxyPredict *p);

/* Model FLOPs per token (forward + backward, no recomputation, the layout's
 * convention) that one tp rank of stage `stage` does: its layers with tp-
 * sharded shapes, plus the LM head on the last stage (the embedding lookup on
 * stage 0 counts none). The spec.c per-layer terms; under 6n or palm the
 * model's total split in the same proportion. Summed over the pp stages and
 * the tp ranks of each: train_model_flops_per_token. The proxy's MFU is this
 * over the peak of one GPU. */
double proxy_flops_per_token(const ModelSpec *m, const Layout *lo, int stage);

#endif
