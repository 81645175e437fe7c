/* kc_fp8.h — fp8 training's kernels on Hopper (kernels/cuda/fp8.cu): the
 * per-tensor current-scaling quantizer, the fused cast-transpose, and the
 * linear layer's three GEMMs (forward, dgrad, wgrad) in fp8 through
 * cuBLASLt, as Transformer Engine runs them with its Hopper recipe: E4M3
 * for activations and weights, E5M2 for the output gradient (the "hybrid"
 * format), fp32 accumulation, bf16 (activations) or fp32 (weight gradient)
 * out, fp32 master weights untouched (the optimizer is kc_adamw).
 * ULTRAPLAN_FP8_GRAD=e4m3 casts the output gradient to E4M3 instead
 * (Transformer Engine's E4M3 recipe); e5m2, or unset, is the hybrid one.
 *
 * Current scaling: before each cast, the tensor's own amax (one reduction
 * kernel) gives scale = fmax / amax on the device; the cast writes the
 * bytes and scale_inv = 1/scale, which the GEMM reads through
 * CUBLASLT_MATMUL_DESC_{A,B}_SCALE_POINTER. No host sync, no history.
 * kernels/cpu/fp8.h is the byte-exact CPU twin of the cast.
 *
 * Hopper's fp8 GEMMs take only the "TN" form (both operands K-major): the
 * forward reads inp and w as they are; dgrad needs wᵀ and wgrad inpᵀ and
 * doutᵀ, which kc_fp8_cast_transpose writes in the same pass as the plain
 * cast. Shapes the fp8 GEMMs refuse (a dimension not a multiple of 16, an
 * unaligned pointer, no cuBLASLt algorithm) run the bf16 kc_matmul
 * instead; kc_fp8_fallbacks() counts them.
 *
 * The forward can keep its input's transposed copy (written in the same
 * pass as the plain one) for the backward's weight gradient
 * (kc_fp8_matmul_fwd_keep / _bwd_kept, in memory the caller owns: one byte
 * an element of activation), as Transformer Engine keeps its fp8 inputs.
 *
 * The weight's copies can likewise be cast once a step and reused by every
 * call (kc_fp8_cast_weight, the _cached calls), as Transformer Engine does
 * across micro-batches.
 *
 * What it doesn't do: delayed scaling (amax history), fp8 attention, fp8
 * communication. */
#ifndef ULTRAPLAN_KERNELS_CUDA_KC_FP8_H
#define ULTRAPLAN_KERNELS_CUDA_KC_FP8_H

#include "kernels_cuda.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { KC_E4M3 = 0, KC_E5M2 = 1 } KcFp8Fmt;   // same values as fp8.h's Fp8Format
typedef unsigned char kc_fp8;                           // one fp8 byte, device pointers only

/* amax (one device float) = max |x_i| over n bf16 (NaNs skipped); overwrites. */
void kc_fp8_amax(float *amax, const kc_bf16 *x, size_t n, cudaStream_t st);
/* x (R, C) bf16 -> out (R, C) and/or outT (C, R) fp8 (either nullable),
 * encode(x·scale) with scale = fmax / *amax (1 when amax is 0 or not
 * finite), round to nearest even, saturating; scale_inv (one device float)
 * = 1/scale. amax as kc_fp8_amax wrote it. */
void kc_fp8_cast_transpose(kc_fp8 *out, kc_fp8 *outT, float *scale_inv, const kc_bf16 *x, const float *amax,
                           int R, int C, KcFp8Fmt f, cudaStream_t st);
/* x (n) fp32 = decode(q)·(*scale_inv) (tests and the benchmark) */
void kc_fp8_dequantize(float *x, const kc_fp8 *q, const float *scale_inv, size_t n, KcFp8Fmt f,
                       cudaStream_t st);

/* D (m, n) = (sa·A)ᵀ·(sb·B) + beta·D in cuBLASLt's column-major terms: A
 * (k, m) and B (k, n) column-major fp8 (row-major: A (m, k), B (n, k), the
 * K-major "TN" form), sa, sb the device scale_inv floats; D bf16 (dtype 0)
 * or fp32 (dtype 1) with leading dimension m; bias (m) bf16 nullable (bf16
 * D only); fast_accum: Hopper's faster fp8 accumulation (Transformer
 * Engine uses it for the forward only). 0 done, -1 refused (the caller
 * falls back). */
int kc_fp8_gemm(void *D, int dtype, const kc_fp8 *A, KcFp8Fmt fa, const float *sa, const kc_fp8 *B,
                KcFp8Fmt fb, const float *sb, int m, int n, int k, float beta, const kc_bf16 *bias,
                int fast_accum, cudaStream_t st);

/* The linear layer in fp8, kc_matmul_fwd/bwd's contract (kernels_cuda.h):
 * out (BT, OC) = inp · wᵀ + bias; dinp += dout · w; dw += doutᵀ · inp;
 * dbias += column sums of dout (bf16, from dout itself). The fp8 copies
 * live in a scratch that grows to the largest layer seen (kc_free releases
 * it); like the cuBLASLt workspace it is one: not on two streams at once. */
void kc_fp8_matmul_fwd(kc_bf16 *out, const kc_bf16 *inp, const kc_bf16 *w, const kc_bf16 *bias, int BT, int C,
                       int OC, cudaStream_t st);
void kc_fp8_matmul_bwd(kc_bf16 *dinp, float *dw, float *dbias, const kc_bf16 *dout, const kc_bf16 *inp,
                       const kc_bf16 *w, int BT, int C, int OC, cudaStream_t st);
/* The same, for a call whose inp is the previous call's inp, unchanged
 * since (the K and V projections after Q: one input, three GEMMs): its
 * cast (forward) or transposed cast (backward, for dw) is reused when it is
 * still in the scratch, else made again. Saves an amax and a cast pass over
 * inp a call. The caller vouches that the data did not change. */
void kc_fp8_matmul_fwd_again(kc_bf16 *out, const kc_bf16 *inp, const kc_bf16 *w, const kc_bf16 *bias, int BT,
                             int C, int OC, cudaStream_t st);
void kc_fp8_matmul_bwd_again(kc_bf16 *dinp, float *dw, float *dbias, const kc_bf16 *dout, const kc_bf16 *inp,
                             const kc_bf16 *w, int BT, int C, int OC, cudaStream_t st);
/* A weight's E4M3 copies kept across the fp8 calls of one optimizer step
 * (the weight does not change between them): plain (OC, C) for the
 * forward, transposed (C, OC) for dgrad, and its scale_inv; device memory
 * of the caller, 16-byte aligned. */
typedef struct {
    kc_fp8 *w8, *wT8;
    float *sinv;
} KcFp8Weight;
/* Cast w (OC, C) into c's copies (amax, then plain and transposed in one
 * pass): the bytes each fp8 call would cast from w itself. */
void kc_fp8_cast_weight(const KcFp8Weight *c, const kc_bf16 *w, int OC, int C, cudaStream_t st);
/* kc_fp8_matmul_fwd that also writes inp's transposed E4M3 copy (C, BT)
 * into keepT and its scale_inv into *keepS (device memory of the caller,
 * 16-byte aligned), whenever the shapes are fp8's (all multiples of 16),
 * even when this GEMM itself falls back. */
void kc_fp8_matmul_fwd_keep(kc_bf16 *out, const kc_bf16 *inp, const kc_bf16 *w, const kc_bf16 *bias, int BT,
                            int C, int OC, kc_fp8 *keepT, float *keepS, cudaStream_t st);
/* The same, the weight's copy taken from wc (kc_fp8_cast_weight of this w;
 * nullable: cast w here), and keepT/keepS nullable (nothing kept). */
void kc_fp8_matmul_fwd_cached(kc_bf16 *out, const kc_bf16 *inp, const kc_bf16 *w, const KcFp8Weight *wc,
                              const kc_bf16 *bias, int BT, int C, int OC, int again, kc_fp8 *keepT, float *keepS,
                              cudaStream_t st);
/* kc_fp8_matmul_bwd whose weight gradient reads the forward's kept copy
 * (keptT, keptS as kc_fp8_matmul_fwd_keep wrote them for this inp) instead
 * of casting inp again; inp is still read by a fallback. */
void kc_fp8_matmul_bwd_kept(kc_bf16 *dinp, float *dw, float *dbias, const kc_bf16 *dout, const kc_fp8 *keptT,
                            const float *keptS, const kc_bf16 *inp, const kc_bf16 *w, int BT, int C, int OC,
                            cudaStream_t st);
/* The same, dgrad's transposed weight from wc (nullable: cast w here) and
 * keptT/keptS nullable (cast inp here; again: reuse the previous call's
 * cast of the same inp, as kc_fp8_matmul_bwd_again). */
void kc_fp8_matmul_bwd_cached(kc_bf16 *dinp, float *dw, float *dbias, const kc_bf16 *dout, const kc_fp8 *keptT,
                              const float *keptS, const kc_bf16 *inp, const kc_bf16 *w, const KcFp8Weight *wc,
                              int BT, int C, int OC, int again, cudaStream_t st);
/* Bytes of scratch one fp8 linear layer of this shape needs (forward or
 * backward, whichever is larger, with the 256 bytes of scales): the size of
 * a buffer to lend with kc_fp8_use_scratch. */
size_t kc_fp8_scratch_bytes(int BT, int C, int OC);
/* Lend the fp8 layers a scratch buffer (device, 256-byte aligned, bytes as
 * the largest kc_fp8_scratch_bytes of the calls to come), so that it is
 * counted where the caller counts memory; NULL returns to the library's own,
 * grown on first use. A call needing more than the lent bytes allocates its
 * own from then on and kc_fp8_scratch_grown counts it. kc_free forgets the
 * loan (it does not free the buffer). */
void kc_fp8_use_scratch(void *buf, size_t bytes);
long kc_fp8_scratch_grown(void);
/* GEMMs that ran in bf16 instead (refused shapes), since the start. */
long kc_fp8_fallbacks(void);

#ifdef __cplusplus
}
#endif
#endif
