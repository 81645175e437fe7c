/* cunet.h — internal to executor/cuda: the decoder's math on one rank's
 * shards as cuexec.c runs it, mirroring executor/net.c on bf16 device
 * tensors (TP collectives on the compute stream, in net.c's places), and
 * the per-phase CUDA-event timers.
 *
 * Shapes: N = B·T tokens of a micro-batch (T = sh.T, this rank's T/cp
 * under context parallel: two chunks of each sequence, at their global
 * positions for RoPE and learned positions); Nl = e->Nl rows of the residual
 * stream on this rank: N/tp under sequence parallel (this rank's contiguous
 * slice, cuplan_sp_rows), else N. Parameters are reached through their unit
 * (e->wu, e->gu: the slabs, or ZeRO-3 gather buffers and ZeRO-2/3 gradient
 * buckets). Under cp > 1 attention is the ring over the cp group
 * (kc_attention_block_fwd/bwd on the compute stream, the blocks on the comm
 * stream).
 *
 * Also cuexec.c's weight transfers, for cuckpt.c.
 */
#ifndef ULTRAPLAN_EXECUTOR_CUDA_CUNET_H
#define ULTRAPLAN_EXECUTOR_CUDA_CUNET_H

#include "cuexec.h"

/* Close the open timer segment and open one for phase p (-1: none).
 * Returns the phase that was open (-1 none), to restore it. */
int cunet_tm_swap(CuExec *e, int p);
/* After the step's synchronisation: e->t by phase; resets the segments. */
void cunet_tm_sum(CuExec *e);
void cunet_tm_free(CuExec *e);

/* 1 when local layer li is a mixture-of-experts layer (spec_layer_is_moe). */
int cunet_layer_moe(const CuExec *e, int li);

/* Local layer li: reads A->x, fills the rest of A, writes out (Nl, C). An
 * MoE layer runs its shared expert (if any) as the dense MLP and its routed
 * experts through cumoe.h (A->moe). */
void cunet_layer_fwd(CuExec *e, int li, CuActs *A, kc_bf16 *out);
/* e->dres (Nl, C) holds d(out); on return it holds d(x). Grads accumulate
 * (under SP the replicated tensors' only this rank's rows: partial). */
void cunet_layer_bwd(CuExec *e, int li, CuActs *A);

/* out (Nl, C) = embedding of tok (N, device): this rank's rows under SP. */
void cunet_embed_fwd(CuExec *e, const int *tok, kc_bf16 *out);
/* Accumulates the embedding grads from e->dres (Nl, C; gathered under SP). */
void cunet_embed_bwd(CuExec *e, const int *tok);

/* Final norm, LM head and loss of micro-batch mb at e->head_in (per-token
 * losses into e->losses), then their backward with the gradient scale;
 * writes d(head_in) to dlast (Nl, C). */
void cunet_head(CuExec *e, int mb, float scale, kc_bf16 *dlast);

/* The full fp32 weights w (host, n_alloc) into the masters (this rank's
 * shard under ZeRO-1/2/3) and the bf16 copy (ZeRO-3: the bf16 shard).
 * 0, or -1 when host memory for the shard ran out. */
int cuexec_put_weights(CuExec *e, const float *w);
/* This rank's full fp32 view of its stage's weights into w (host, n_alloc):
 * the masters, all-gathered over dp·cp under ZeRO-1/2/3. Collective over
 * dp·cp when sharded. */
void cuexec_get_weights(CuExec *e, float *w);

#endif
