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

/* Multi-token prediction for micro-batch mb (after net_head, last stage):
 * every module's forward, loss and backward; adds the gradient at the main
 * output (e->head_in) into dlast and the loss into e->mtp_sum (tp rank 0). */
void net_mtp(Exec *e, int mb, float *dlast);

#endif
