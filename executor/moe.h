/* moe.h — the routed part of a mixture-of-experts layer on the CPU
 * executor: router, top-k, load-balancing loss, token permutation,
 * dispatch and combine over the ep group, the experts as GEMMs (split over
 * etp), and the backward of all of it. The shared expert is a dense MLP
 * and stays in net.c; so do the norms and the residual.
 *
 * Router (Megatron-core's defaults, moe/moe_utils.py
 * topk_softmax_with_capacity: score function softmax, pre-softmax off):
 * logits z = a2 · routerᵀ (fp32); the k largest logits, ties to the lower
 * expert index; combine weights w = softmax over those k logits (not
 * renormalised further: Megatron's softmax router with pre-softmax off
 * takes the softmax of the chosen logits, which already sums to 1).
 * Group-limited routing (model router_groups > 0, router_group_topk Kg;
 * Megatron's group_limited_topk, DeepSeek-V3 §2.1.2): the E experts form
 * router_groups contiguous groups; a group's score is the sum of its top
 * k / Kg logits (integer division as in Megatron: 0 when k < Kg, and every
 * group then ties); the Kg best groups are kept, ties to the lower group,
 * and the top k is taken over their experts only. The group score reads
 * the logits because the score function is softmax without pre-softmax
 * (DeepSeek-V3's sigmoid scores and expert bias are not run). The
 * selection is not differentiated, so the backward is the same. The
 * load-balancing loss is Megatron's "seq_aux_loss" form
 * (--moe-router-load-balancing-type seq_aux_loss, DeepSeek-V3's
 * sequence-wise balance loss): per sequence s and expert e,
 * f_se = count_se · E / (T · k) (tokens routing to e, before any capacity
 * drop), P_se = mean over the sequence of softmax(z)_e, and the objective
 * gains coeff · Σ_s Σ_e f_se · P_se / G (G = sequences in the global
 * batch, per MoE layer), with f constant. It is summed over the sequence's
 * tokens wherever they are (tp ranks under SP, cp ranks) through tpcp_comm,
 * so its value and gradient are the same for every layout (the usual
 * micro-batch "aux_loss" is not: it depends on mbs).
 *
 * Capacity (capacity_factor > 0): per expert ceil(cf · n · k / E) slots for
 * the n tokens this rank routes (Megatron's get_capacity over the local
 * tokens), filled by the highest combine weights, ties to the lower token
 * (drop policy "probs"); dropped pairs add nothing and the other weights
 * are not renormalised. Local tokens depend on sp and cp, so capacity runs
 * match single-rank runs only for layouts with the same local tokens (dp,
 * pp, ep, etp).
 *
 * Dispatch (forward): the kept (token, slot) pairs sorted by expert
 * (stable), counts exchanged with an all-to-all, rows with MPI_Alltoallv
 * over ep; then all-gathered over etp (each etp rank computes every token
 * of its experts on its column slice), permuted to expert-major order, FC1
 * / activation / FC2 per local expert as GEMMs, the partial outputs
 * reduce-scattered over etp and sent back with the reverse all-to-all
 * (combine). Backward runs the same path with the gradients. The ep/etp
 * communication is timed as PH_TP (run.json has no EP phase).
 *
 * Buffers: per (slot, layer) the expert input X, FC1 output and activation
 * (rows = tokens this rank's experts receive, sized at init for
 * moe_imbalance · Nl · etp · k and grown when a step routes more; the
 * growth shows in exec_memory as the peak), the router probabilities
 * (Nl, E), the top-k indices and weights (Nl, k) and the expert outputs as
 * they come back (Nl·k, C) carved from the activation slab, and the scratch
 * of moe.c (XM_BUFFERS).
 *
 * What it doesn't do: expert biases, router bias or score functions other
 * than softmax, pre-softmax, token-drop padding,
 * overlap of dispatch with computation, MLA, MTP.
 */
#ifndef ULTRAPLAN_EXECUTOR_MOE_H
#define ULTRAPLAN_EXECUTOR_MOE_H

#include <stddef.h>

#include "exec.h"

/* ---- pure routing functions (testable without MPI) -------------------- */

/* probs (n, E) = softmax(logits); idx (n, k) the top-k experts by logit,
 * largest first, ties to the lower index (stored as floats); w (n, k) the
 * softmax of the selected logits. */
void moe_route(const float *logits, int n, int E, int k, float *probs, float *idx, float *w);
/* The same with group-limited routing: idx only from the Kg best of G
 * contiguous expert groups (see above); G = 0 is moe_route, G = 1 picks
 * the same experts as moe_route. */
void moe_route_groups(const float *logits, int n, int E, int k, int G, int Kg, float *probs, float *idx, float *w);
/* dlogits (n, E) = d/dlogits of the combine weights' gradient dw (n, k)
 * through the top-k softmax plus dprobs (n, E) through the full softmax
 * (dprobs nullable). Overwrites dlogits. */
void moe_route_bwd(float *dlogits, const float *probs, const float *idx, const float *w, const float *dw,
                   const float *dprobs, int n, int E, int k);
/* keep (n·k) = 1 for the pairs that fit the capacity (all of them when
 * cf <= 0), 0 for the dropped; see above. */
void moe_capacity(int *keep, const float *idx, const float *w, int n, int E, int k, double cf);

/* ---- the layer on one rank -------------------------------------------- */

/* Expert buffers of one (slot, layer): grown on demand. */
typedef struct MoeBuf {
    float *x, *hpre, *hact;      // (cap, C), (cap, F1e), (cap, Fe): expert-major rows
    int cap;                     // rows allocated
    int *cnt;                    // (etp · ep · El) rows by (etp source, ep source, local expert)
} MoeBuf;

/* Shapes and scratch: after exec's shapes and dist_init_experts. 0, or -1. */
int moe_init(Exec *e, char *err, int errlen);
void moe_free(Exec *e);
/* A MoeBuf sized for the plan's imbalance; NULL when out of memory. */
MoeBuf *moe_buf_new(Exec *e);
void moe_buf_free(MoeBuf *b);
/* Bytes the MoE buffers hold now: the (slot, layer) buffers, the scratch. */
double moe_acts_bytes(const Exec *e);
double moe_scratch_bytes(const Exec *e);

/* out (Nl, C) += the routed experts of A->a2 (and the router's aux loss of
 * this micro-batch into e->aux_sum unless e->recomputing). */
void moe_fwd(Exec *e, int li, LayerActs *A, float *out);
/* e->dres holds d(out); adds d(a2) of the routed part and the router into
 * dx (Nl, C); router and expert gradients accumulate. */
void moe_bwd(Exec *e, int li, LayerActs *A, float *dx);

#endif
