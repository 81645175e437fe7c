/* net.h — the math of the decoder on one rank's shards: a transformer layer
 * forward and backward with Megatron's column/row-parallel linears (and
 * sequence parallel), the vocab-parallel embedding, and the fused final
 * norm + LM head + vocab-parallel cross-entropy. Internal to the executor.
 *
 * Shapes: N = B·Tl tokens of a micro-batch on this rank (Tl = T/cp: under
 * context parallel its two chunks of each sequence, at global positions
 * e->cpos); Nl = N/tp under sequence parallel (this rank's rows of the
 * residual stream), else N.
 */
#ifndef ULTRAPLAN_EXECUTOR_NET_H
#define ULTRAPLAN_EXECUTOR_NET_H

#include "exec.h"

/* Local layer li: reads A->x, fills the rest of A, writes out (Nl, C). */
void net_layer_fwd(Exec *e, int li, LayerActs *A, float *out);
/* e->dres (Nl, C) holds d(out); on return it holds d(x). Grads accumulate. */
void net_layer_bwd(Exec *e, int li, LayerActs *A);

/* out (Nl, C) = embedding of tok (N). */
void net_embed_fwd(Exec *e, const int *tok, float *out);
/* Accumulates the embedding grads from e->dres. */
void net_embed_bwd(Exec *e, const int *tok);

/* Final norm, LM head and loss of one micro-batch at e->head_in, then their
 * backward with the gradient scale; writes d(head_in) to dlast (Nl, C).
 * Returns the sum of the N token losses. */
double net_head(Exec *e, const int *targets, float scale, float *dlast);

/* Multi-token prediction, module k (1..D) of micro-batch mb, after net_head
 * on the last stage. The forward runs the module and its loss (into
 * e->mtp_sum on tp rank 0; the module's head gradients accumulate, d(out)
 * kept); the backward, run for k = D..1 after every forward, adds the
 * gradient at its input hidden state into the previous module's d(out) or,
 * for k = 1, into dlast (the main output's). */
void net_mtp_fwd(Exec *e, int mb, int k);
void net_mtp_bwd(Exec *e, int mb, int k, float *dlast);

#endif
