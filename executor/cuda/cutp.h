/* cutp.h — the kernels tensor parallelism adds to kernels_cuda.h's set, on
 * bf16 device tensors: the vocab-parallel embedding and the three local
 * pieces of the vocab-parallel cross-entropy of executor/net.c (row max,
 * then sum of exponentials and target logit, then loss and dlogits), which
 * the caller joins with all-reduces over tp (MAX of mx, SUM of red).
 *
 * A rank holds vocabulary rows vstart .. vstart + Vl − 1 of the padded
 * vocabulary; columns j >= valid (padding) are masked. Same semantics as
 * net.c's vocab_parallel_ce and net_embed_fwd/bwd; every pointer is a device
 * pointer; launches are asynchronous on st.
 */
#ifndef ULTRAPLAN_EXECUTOR_CUDA_CUTP_H
#define ULTRAPLAN_EXECUTOR_CUDA_CUTP_H

#include "kernels_cuda.h"

#ifdef __cplusplus
extern "C" {
#endif

/* out (N, C) = wte row (tok − vstart) when this rank holds it, else 0; plus
 * wpe (T, C) at the position when wpe is non-NULL (tp rank 0 only). */
void cutp_embed_fwd(kc_bf16 *out, const int *tok, const kc_bf16 *wte, const kc_bf16 *wpe, int N, int T, int C,
                    int vstart, int Vl, cudaStream_t st);
/* dwte (Vl, C) fp32 += dout rows of the tokens this rank holds (atomics). */
void cutp_embed_bwd(float *dwte, const kc_bf16 *dout, const int *tok, int N, int C, int vstart, int Vl,
                    cudaStream_t st);

/* mx (N) = max over the valid local columns (−FLT_MAX when none). */
void cutp_ce_max(float *mx, const kc_bf16 *logits, int N, int Vl, int valid, cudaStream_t st);
/* red (2N): red[i] = Σ_valid exp(l − mx[i]); red[N + i] = the target's logit
 * when this rank holds the target, else 0. */
void cutp_ce_sumexp(float *red, const kc_bf16 *logits, const float *mx, const int *targets, int vstart, int N,
                    int Vl, int valid, cudaStream_t st);
/* losses (N) = mx + log red − target logit; logits become (softmax − onehot)
 * · scale in place (0 on padding columns). */
void cutp_ce_finish(float *losses, kc_bf16 *logits, const float *mx, const float *red, const int *targets,
                    int vstart, float scale, int N, int Vl, int valid, cudaStream_t st);

#ifdef __cplusplus
}
#endif
#endif
