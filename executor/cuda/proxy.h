/* proxy.h — the stage proxy's arithmetic, without a GPU: which work one
 * tp rank of pipeline stage S of a plan does (its layers, tp-sharded widths,
 * the embedding on stage 0, the head on the last stage) and what the cost
 * model predicts that work costs per micro-batch, with the communication
 * (TP/SP collectives, PP send/recv) split out because the proxy doesn't run it,
 * and that work's share of the model's FLOPs (the proxy's MFU).
 *
 * The CUDA executor builds the stage from this (cuexec.h); the unit test holds
 * the shapes against model/memory.c's memory_stage_params.
 *
 * The new layouts (issue 22, item 4), each as one rank's compute:
 * - context parallel: the rank's T/cp tokens (two chunks of every
 *   sequence), attention as the load-balanced ring's cp blocks of cp rank
 *   0, the blocks that would arrive being random data already resident;
 * - ZeRO-3: the per-rank compute is the full layers' (the weights are
 *   gathered before use), so the proxy keeps ONE layer's weights and
 *   gradients, as the two gather buffers do, and every layer reads and
 *   accumulates into them (cuexec.c), which lets a 70B stage fit;
 * - mixture of experts: the rank's E/ep experts (etp 1) on the N·k rows an
 *   even routing brings them (the proxy routes its own N tokens over just
 *   those experts: N·k rows, the mean that ep ranks' dispatch delivers),
 *   the shared expert split over tp; the prediction is taken with balanced
 *   routing (moe_imbalance 1) and the EP all-to-all counted as
 *   communication.
 * MLA, etp > 1, biased MoE layers and a stage whose E/ep is below top-k are
 * refused by name.
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
    int cp;                       // context parallel: T = seq/cp tokens of each sequence here
    int moe;                      // the model has MoE layers (spec_layer_is_moe picks which)
    int El, K, Fe, Fs;            // MoE: experts on this rank (E/ep), top-k, one expert's width, shared width/tp
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
 * err naming what the proxy can't build (stage out of range, 2·cp not
 * dividing seq, heads or FFN not divisible by tp, the MoE cases above). */
int proxy_shape(const ModelSpec *m, const Layout *lo, int stage, ProxyShape *ps, char *err, int errlen);

/* The cost model's per-micro-batch prediction for that stage (MoE: with
 * balanced routing, the EP all-to-all in comm). */
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
