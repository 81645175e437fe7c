/* timing_internal.h — what timing.c and timing_moe.c share and nothing
 * else uses: the linear-layer GEMM times, fp8's rules, NCCL's achieved
 * fraction of link bandwidth, the MoE layer's MLP part, and the MoE layer's
 * kernel counts for the host floor and CUDA graphs. Not part of the model's
 * interface (timing.h is). */
#ifndef ULTRAPLAN_MODEL_TIMING_INTERNAL_H
#define ULTRAPLAN_MODEL_TIMING_INTERNAL_H

#include "timing.h"

/* Forward, and input-gradient plus weight-gradient, seconds of a linear
 * layer Y[T x N] = X[T x K] W[K x N] in precision p, each GEMM at its shape. */
double linear_fwd_s(const HwProfile *hw, Precision p, double T, double N, double K);
double linear_bwd_s(const HwProfile *hw, Precision p, double T, double N, double K);

/* bf16 for what Transformer Engine keeps out of fp8 (attention core, output
 * layer, router) when the GPU has a bf16 rate; p otherwise. */
Precision prec_bf16_if_fp8(const HwProfile *hw, Precision p);

/* Bytes per element --fp8-recipe adds: *amax for a cast's amax pass, *norm
 * for a norm-fed cast done apart (0 and 0 outside fp8). */
void fp8_scale_bytes(const Layout *lo, double ab, double *amax, double *norm);

/* The fraction of link bandwidth NCCL reaches (the profile's coll_eff, 1 if unset). */
double coll_eff(const HwProfile *hw);

/* An MoE layer's MLP part on one GPU, per micro-batch: forward seconds in
 * *fwd, backward in *bwd (timing_moe.c). */
void time_moe_mlp_s(const ModelSpec *m, const HwProfile *hw, const Layout *lo, double *fwd, double *bwd);

/* An MoE layer's MLP part's weight-gradient GEMMs (router, experts, shared
 * expert), each timed as its forward GEMM (the same M·N·K). */
double time_moe_wgrad_s(const ModelSpec *m, const HwProfile *hw, const Layout *lo);

/* Biased experts' passes beyond the grouped GEMMs, added to *fwd and *bwd. */
void time_moe_bias_passes_s(const ModelSpec *m, const HwProfile *hw, const Layout *lo, double *fwd, double *bwd);

/* An MoE layer's forward kernels beyond a dense layer's, by the part of
 * Megatron's MoELayer that launches them: the router (its GEMM, softmax /
 * top-k, aux loss), the dispatcher's preprocess (tokens per expert, the
 * splits, their copy to the host), 2 permutes and 2 unpermutes, the two
 * grouped GEMMs' set-up; the shared expert 3 (FC1, activation, FC2). */
enum {
    K_MOE_ROUTER = 3,
    K_MOE_PREPROCESS = 3,
    K_MOE_PERMUTE = 4,
    K_MOE_GG_SETUP = 2,
    K_MOE_EXTRA = K_MOE_ROUTER + K_MOE_PREPROCESS + K_MOE_PERMUTE + K_MOE_GG_SETUP,
    K_SHARED_EXTRA = 3,
    K_MOE_FP8_PAD = 2,   /* Fp8Padding and Fp8Unpadding (time_moe_fp8_pad) */
};
_Static_assert(K_MOE_EXTRA == 12, "the MoE layer's extra kernels (the count the host floor was checked with)");

#endif
