/* cufp8.h — the precision switch of the CUDA executor's linear layers.
 * A plan whose layout has precision fp8 runs the transformer layers' GEMMs
 * (QKV, attention projection, FC1, FC2: forward, dgrad and wgrad) through
 * kernels/cuda/kc_fp8.h, Transformer Engine's Hopper recipe (E4M3
 * activations and weights, E5M2 output gradients, per-tensor current
 * scaling, fp32 accumulation); every other precision runs them in bf16.
 * Attention, the norms, the embedding and the output layer (the head's
 * GEMM and cross-entropy) stay bf16, the master weights and gradients
 * fp32, as Transformer Engine leaves them. */
#ifndef ULTRAPLAN_EXECUTOR_CUDA_CUFP8_H
#define ULTRAPLAN_EXECUTOR_CUDA_CUFP8_H

#include "cuexec.h"

/* 1 when e's linear layers run in fp8 (the plan's precision) */
int cufp8_on(const CuExec *e);
/* 1 when e's layers keep the forward's transposed fp8 inputs for the
 * backward (CuActs.f8) and the weights' fp8 copies for the step
 * (CuExec.f8w): fp8 plans, unless ULTRAPLAN_FP8_KEEP=0 (every call casts
 * its bf16 operands again: none of those bytes, more HBM traffic; for
 * timing the two). Any other value exits with an error. */
int cufp8_keep_on(const CuExec *e);
/* The four inputs of a layer's linear GEMMs whose transposed fp8 copy the
 * forward keeps for the backward's weight gradient (CuActs.f8): QKV's (the
 * normed, under SP gathered, input: N × C), proj's (attention output:
 * N × ql), FC1's (N × C) and FC2's (activation: N × F). */
enum { CUFP8_QKV, CUFP8_PROJ, CUFP8_FC1, CUFP8_FC2, CUFP8_NKEEP };
/* The six weight GEMMs of a layer whose fp8 weight copies are cast once a
 * step and reused by every micro-batch's forward and backward (CuExec.f8w):
 * the Q, K, V slices of the QKV weight, proj, FC1, FC2. */
enum { CUFP8_WQ, CUFP8_WK, CUFP8_WV, CUFP8_WPROJ, CUFP8_WFC1, CUFP8_WFC2, CUFP8_NW };
/* (OC, C) of weight site w for a layer of width C, ql attention columns,
 * kvl K/V columns, FC1 output F1, hidden F */
void cufp8_weight_shape(int w, int C, int ql, int kvl, int F1, int F, int *OC, int *IC);
/* elements (bytes: one an element) of kept copy k for a layer of N rows,
 * width C, ql attention columns and F hidden (the widest MLP's) */
size_t cufp8_keep_elems(int k, size_t N, size_t C, size_t ql, size_t F);
/* The layer's largest fp8 scratch (kc_fp8_scratch_bytes over QKV, proj,
 * FC1, FC2 with FC1's output F1): what cuexec.c lends the kernels. */
size_t cufp8_scratch_bytes(size_t N, size_t C, size_t ql, size_t F1, size_t F);
/* The linear layer of local layer li at weight site `site` (CUFP8_W*): in
 * fp8 when cufp8_on(e), with the weight's copies from CuExec.f8w (cast at
 * the step's first use) and inp's transposed copy kept in A->f8[k] when k
 * >= 0 and it is carved (fp8 keep), for cufp8_matmul_bwd_kept; again: inp
 * is the previous call's, its cast reused (the K and V projections). Else
 * kc_matmul_fwd. */
void cufp8_matmul_fwd_keep(const CuExec *e, CuActs *A, int k, int li, int site, int again, kc_bf16 *out,
                           const kc_bf16 *inp, const kc_bf16 *w, const kc_bf16 *bias, int BT, int C, int OC);
/* Its backward: dw from A->f8[k] when carved (else inp cast again, reusing
 * the previous call's cast when again), dgrad's weight from CuExec.f8w.
 * inp is the forward's input (fallbacks read it). */
void cufp8_matmul_bwd_kept(const CuExec *e, const CuActs *A, int k, int li, int site, int again, kc_bf16 *dinp,
                           float *dw, float *dbias, const kc_bf16 *dout, const kc_bf16 *inp, const kc_bf16 *w,
                           int BT, int C, int OC);

#endif
