/* cpattn.h — context-parallel attention on the CPU: Megatron's load-balanced
 * ring attention over the cp group.
 *
 * The sequence of T tokens is cut into 2·cp chunks of c = T/(2·cp); cp rank r
 * holds chunks r and 2·cp−1−r, concatenated (Tl = T/cp local tokens, local t
 * < c at global r·c + t, t ≥ c at (2·cp−1−r)·c + t − c), so every rank does
 * the same share of causal work.
 *
 * Forward: K/V blocks travel around the ring (sent to cp rank r+1, received
 * from r−1, non-blocking, while the resident block is computed); at step i
 * rank r holds rank (r−i) mod cp's K/V and computes its queries' partial
 * attention on it (k_attention_block_fwd, masked by global positions), merged
 * into the output by log-sum-exp (k_attention_merge). Backward, in the same
 * ring order: each block's K/V travels with the accumulator of its dK/dV; a
 * rank computes the block's dq contribution and the block's dk/dv into a
 * local buffer while the accumulator is on its way, adds it in and sends it
 * on, so after cp hops every rank's dK/dV have come home. The backward reads
 * the saved q, k, v, the final output and lse (what the cost model counts for
 * s/cp tokens).
 *
 * Every blocking wait runs under the communication watchdog (dist_wait*);
 * exposed waits are added to *t. The buffers live in the executor's buffer
 * slab: cpattn_buf_floats says how many, cpattn_set_buf hands them over.
 *
 * What it doesn't do: cp 1 (the executor calls k_attention_* directly),
 * sequence positions that are not this two-chunk layout, the all-gather
 * (Llama 3) variant of CP.
 */
#ifndef ULTRAPLAN_EXECUTOR_CPATTN_H
#define ULTRAPLAN_EXECUTOR_CPATTN_H

#include <stddef.h>

#include "dist.h"

typedef struct {
    int cp, rank;                // ring size and this rank in comm
    int B, Tl, NH, NKV, HS;      // local shapes: B rows of Tl tokens, this rank's heads
    int *pos;                    // (cp, Tl) global position of every cp rank's tokens
    MPI_Comm comm;               // the cp group
    double *t;                   // exposed waits go here (seconds), may be NULL
    /* from the buffer slab */
    float *kv[2];                // two K|V blocks in flight, (B·Tl·NKV·HS) each half
    float *acc[2];               // two dK|dV accumulators in flight
    float *dloc;                 // this rank's dK|dV of the resident block
    float *ob, *lseb;            // a block's partial output and lse
} CpAttn;

/* The global positions of cp rank r's Tl = T/cp tokens (T % (2·cp) == 0). */
void cpattn_positions(int *pos, int T, int cp, int r);

/* Shapes and positions (T the full sequence). 0, or -1 when out of memory. */
int cpattn_init(CpAttn *a, MPI_Comm comm, int cp, int rank, int B, int T, int NH, int NKV, int HS,
                double *t);
size_t cpattn_buf_floats(const CpAttn *a);
void cpattn_set_buf(CpAttn *a, float *buf);
/* This rank's positions (Tl). */
const int *cpattn_local_pos(const CpAttn *a);
void cpattn_free(CpAttn *a);

/* out (B, Tl, NH, HS) and lse (B, NH, Tl) of this rank's queries q against
 * every rank's k, v (B, Tl, NKV, HS), causal by global position. Collective
 * over the cp group. */
void cpattn_fwd(CpAttn *a, float *out, float *lse, const float *q, const float *k, const float *v);

/* dq (B, Tl, NH, HS), dk, dv (B, Tl, NKV, HS) accumulate the gradients of
 * this rank's tokens, from dout and the forward's saved q, k, v, out, lse.
 * Collective over the cp group. */
void cpattn_bwd(CpAttn *a, float *dq, float *dk, float *dv, const float *dout, const float *q,
                const float *k, const float *v, const float *out, const float *lse);

#endif
