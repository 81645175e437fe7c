/* timing.c — seconds of compute and communication (docs/COSTMODEL.md §4).
 *
 * GEMMs: FLOPs / (peak · η(size)), η from the profile's curve; with an SM
 * count in the profile also by shape (wave quantization of the output tiles,
 * HBM roofline), forward, dgrad and wgrad each at their own M, N, K. Memory-bound
 * ops: bytes / (HBM · η_mem(bytes)). Collectives: α–β ring within a node,
 * hierarchical (reduce-scatter in the node, all-reduce across nodes on 1/k
 * shards, all-gather in the node) when a group spans nodes. Rank order is
 * Megatron's tp-cp-dp-pp (tp fastest), which decides what spans nodes.
 *
 * What a step really costs beyond the arithmetic (docs/accuracy/NOTES.md):
 * every collective and p2p call pays a fixed coll_lat and reaches coll_eff of
 * the link bandwidth (nccl-tests on A100s); every kernel costs the host
 * kernel_lat to launch, so a layer pass lasts at least its kernel count times
 * kernel_lat however small its GEMMs (eager PyTorch is host-bound there).
 *
 * Overlap is a layout switch, the profile says how much of it is achieved:
 * TP collectives hide behind the GEMMs they feed only with tp_comm_overlap
 * (Megatron --tp-comm-overlap, which needs SP), at most hw->tp_overlap of
 * them and no longer than those GEMMs; without it nothing hides. The DP
 * switches are priced in cost.c.
 *
 * Mixture of experts (§4.6): an MoE layer's times sit beside the dense
 * layer's in LayerTime (router, permutation, grouped experts read at one
 * expert's size, shared expert, ETP and exposed EP all-to-all), and
 * time_stage_mb counts each kind of layer where the stage holds it. The
 * experts' MLP, the all-to-all and its dispatchers are in timing_moe.c.
 */
#include "timing.h"

#include <math.h>

#include "memory.h"
#include "timing_internal.h"

/* The efficiency curves are read at equal duration, not equal size: a
 * kernel's fixed costs (launch, prologue, epilogue, the last tiles' tail)
 * take the same time whatever its rate, t = t0 + F/R, so its efficiency is a
 * function of F/R. The GEMM and attention curves are indexed by FLOPs at the
 * bf16 rate of the reference GPU (eff_ref_peak; 0 = this GPU's bf16 peak): an
 * fp8 GEMM amortizes its fixed costs as a bf16 GEMM of half its FLOPs would
 * (eff_fp8(F) = eff_bf16(F/2)), TF32 the other way round, and a GPU twice as
 * fast as the reference reads the curve at half the size. The memory curve
 * likewise, by bytes at the reference's HBM bandwidth (eff_ref_hbm_bw). */
static double eff_flops(const HwProfile *hw, Precision p, double flops)
{
    double ref = hw->eff_ref_peak > 0 ? hw->eff_ref_peak : hw->peak[PREC_BF16];
    return ref > 0 && hw->peak[p] > 0 ? flops * ref / hw->peak[p] : flops;
}

static double gemm_s(const HwProfile *hw, Precision p, double flops)
{
    if (flops <= 0)
        return 0;
    return flops / (hw->peak[p] * hw_eff(&hw->gemm_eff, eff_flops(hw, p, flops)));
}

double time_mem_s(const HwProfile *hw, double bytes)
{
    if (bytes <= 0)
        return 0;
    double at = hw->eff_ref_hbm_bw > 0 && hw->hbm_bw > 0 ? bytes * hw->eff_ref_hbm_bw / hw->hbm_bw : bytes;
    return bytes / (hw->hbm_bw * hw_eff(&hw->mem_eff, at));
}

/* Fraction of the SMs a GEMM's last wave keeps busy: cuBLAS cuts the M x N
 * output into tiles, one per SM at a time, and runs them in waves; a last
 * wave of a few tiles idles the other SMs. The tile may lie either way round
 * (cuBLAS picks the better). 1 when the profile gives no SM count. */
static double wave_eff(const HwProfile *hw, double M, double N)
{
    double sm = hw->sm_count, tm = hw->gemm_tile_m, tn = hw->gemm_tile_n;
    if (sm < 1 || tm < 1 || tn < 1 || M <= 0 || N <= 0)
        return 1.0;
    double best = 0;
    for (int o = 0; o < 2; o++) {
        double a = o ? tn : tm, b = o ? tm : tn;
        double tiles = ceil(M / a) * ceil(N / b);
        double e = tiles / (ceil(tiles / sm) * sm);
        if (e > best)
            best = e;
    }
    return best;
}

/* One GEMM C[M x N] = A[M x K] B[K x N] by its shape: FLOPs at the curve's
 * efficiency for its size times the wave quantization of its tiles, and no
 * faster than its operands and result cross HBM (narrow N or K lowers the
 * FLOPs per byte below the roofline's ridge). With no SM count in the
 * profile this is gemm_s of its FLOPs. */
static double gemm_mnk_s(const HwProfile *hw, Precision p, double M, double N, double K)
{
    double flops = 2.0 * M * N * K;
    if (flops <= 0)
        return 0;
    if (!(hw->sm_count >= 1))
        return gemm_s(hw, p, flops);
    double t = flops / (hw->peak[p] * hw_eff(&hw->gemm_eff, eff_flops(hw, p, flops)) * wave_eff(hw, M, N));
    double bytes = hw_precision_bytes(p) * (M * K + K * N + M * N);
    return fmax(t, time_mem_s(hw, bytes));
}

/* Forward, input-gradient and weight-gradient GEMMs of a linear layer
 * Y[T x N] = X[T x K] W[K x N]: forward M = T, N, K; dgrad dX = dY W^T has
 * M = T, N = K, K = N; wgrad dW = X^T dY has M = K, N = N, K = T. */
double linear_fwd_s(const HwProfile *hw, Precision p, double T, double N, double K)
{
    return gemm_mnk_s(hw, p, T, N, K);
}

double linear_bwd_s(const HwProfile *hw, Precision p, double T, double N, double K)
{
    return gemm_mnk_s(hw, p, T, K, N) + gemm_mnk_s(hw, p, K, N, T);
}

/* Under fp8 training (Transformer Engine) only the linear layers' GEMMs run
 * in fp8: the attention core (TE's DotProductAttention; fp8 attention is
 * opt-in) and Megatron's output layer (a plain ColumnParallelLinear, not a TE
 * module) stay in bf16. */
Precision prec_bf16_if_fp8(const HwProfile *hw, Precision p)
{
    return p == PREC_FP8 && hw->peak[PREC_BF16] > 0 ? PREC_BF16 : p;
}

/* What Megatron's --fp8-recipe adds to fp8's casts (COSTMODEL.md §4.1),
 * bytes per element, at ab bytes for the unquantized element (Transformer
 * Engine, transformer_engine/pytorch/csrc: quantizer.cpp, normalization.cpp):
 *  - *amax: a cast of its own. Per-tensor current scaling ("tensorwise",
 *    Float8CurrentScalingQuantizer::quantize_impl) runs nvte_compute_amax
 *    over the input before the cast kernel, one more read (ab); delayed
 *    scaling records the amax in the cast kernel, MXFP8 and blockwise
 *    compute their block scales there: nothing.
 *  - *norm: a cast fed by a norm (TE's LayerNormLinear: QKV, a dense FC1).
 *    Only delayed scaling writes fp8 from the norm kernel (FULLY_FUSED);
 *    current scaling has the norm write bf16 with its amax
 *    (FUSED_NORM_AMAX_FP8), MXFP8 and blockwise write bf16 (UNFUSED, unless
 *    NVTE_NORM_FWD_USE_CUDNN), and the cast reads it back: a write and a
 *    read, 2·ab. */
void fp8_scale_bytes(const Layout *lo, double ab, double *amax, double *norm)
{
    *amax = *norm = 0;
    if (lo->prec != PREC_FP8)
        return;
    *amax = lo->fp8_recipe == FP8R_TENSORWISE ? ab : 0.0;
    *norm = lo->fp8_recipe == FP8R_DELAYED ? 0.0 : 2.0 * ab;
}

static double attn_s(const HwProfile *hw, Precision p, double flops)
{
    if (flops <= 0)
        return 0;
    return flops / (hw->peak[p] * hw_eff(&hw->attn_eff, eff_flops(hw, p, flops)));
}

/* Flash attention's rate by head dimension, relative to the profile's
 * curve (measured at d = 128). The FlashAttention-3 paper's benchmarks
 * (Shah et al. 2024, arXiv:2407.08608, Figs. 5 and 6, H100 SXM5, no mask,
 * 4K tokens) have cuDNN's forward at 408 TFLOP/s with d = 64 against 609
 * with d = 128 (0.67; FA3 476 / 638) and its backward at 417 against 499
 * (0.84; FA3 453 / 542): a d = 64 kernel does half the work per byte of Q,
 * K and V it loads and its softmax is twice the share, which the backward's
 * five GEMMs dilute. The factor at d <= 64, linear up to 1 at d = 128, 1
 * above; Hopper on (the profiles' curves there are cuDNN's). Before Hopper
 * no factor: not measured here. */
#define ATTN_D64_FWD 0.67
#define ATTN_D64_BWD 0.84
double time_attn_dim_eff(const ModelSpec *m, const HwProfile *hw, bool bwd)
{
    int d = m->attn == ATTN_MLA ? m->qk_nope_dim + m->qk_rope_dim : spec_head_dim(m);
    double f64 = bwd ? ATTN_D64_BWD : ATTN_D64_FWD;
    if (hw->peak[PREC_FP8] <= 0 || d >= 128)
        return 1.0;
    if (d <= 64)
        return f64;
    return f64 + (1.0 - f64) * (d - 64) / 64.0;
}

/* Keys a query of a windowed layer is computed against by a flash kernel:
 * it works in tiles of ATTN_TILE queries x ATTN_TILE keys and computes every
 * tile the band touches, so a window narrower than a tile still costs whole
 * tiles (W = 128: two tiles, 256 keys a query, for 129 kept). The mean over
 * the query tiles of s tokens. */
#define ATTN_TILE 128
double time_window_tile_keys(const ModelSpec *m)
{
    long long s = m->s, W = m->window, B = ATTN_TILE, nq = (s + B - 1) / B;
    double keys = 0;
    for (long long qb = 0; qb < nq; qb++) {
        long long lo_k = qb * B - W > 0 ? qb * B - W : 0;
        keys += (double)(qb - lo_k / B + 1) * B;
    }
    double full = 0.5 * (double)s;   /* what a full causal layer is costed at */
    return fmin(keys / (double)nq, full);
}

/* One layer's attention core forward on one GPU (tok tokens, qw = query
 * width per GPU), the mean over the L layers when some are windowed: each
 * kind timed on the attention curve at its own FLOPs (a 128-token band is
 * a small kernel and runs at a small kernel's rate), at the head
 * dimension's forward rate. Sinks (a per-head offset in the softmax) are fused in
 * cuDNN's and FA3's kernels: no pass of their own. */
static double attn_core_s(const ModelSpec *m, const HwProfile *hw, const Layout *lo, double tok, double qw,
                          double *full_out, double *win_out)
{
    Precision pa = prec_bf16_if_fp8(hw, lo->prec);
    double full = attn_s(hw, pa, 4.0 * tok * (double)m->s * qw * (lo->flash ? 0.5 : 1.0));
    *full_out = full, *win_out = 0;
    if (!lo->flash)
        return full;
    int nw = spec_windowed_layers(m);
    double dim = time_attn_dim_eff(m, hw, false);
    *full_out = full / dim;
    if (nw == 0 || m->window + 1 >= m->s)
        return *full_out;
    *win_out = attn_s(hw, pa, 4.0 * tok * time_window_tile_keys(m) * qw) / dim;
    return ((m->L - nw) * *full_out + nw * *win_out) / m->L;
}

/* --fp8-dot-product-attention: cuDNN's fp8 attention time over its bf16
 * time at the same shape, forward and backward, as NVIDIA's cudnn-frontend
 * publishes them (benchmark/sdpa_benchmark_training/results at 3929da2,
 * April 2026: cuDNN 9.22 on GB200 and GB300, 9.19 on H200; causal, batch
 * 2, the median over 2K, 4K and 8K tokens; docs/accuracy/NOTES.md step 58;
 * scripts/cudnn-sdpa-ratios.py recomputes them).
 * By compute capability (Hopper 9.x; Blackwell 10.0; Blackwell Ultra 10.3
 * and later), scaling (MXFP8 blocks, or one scale a tensor: delayed,
 * tensorwise, blockwise) and head dimension (d <= 128: Llama 3.1's GQA at
 * d = 128; wider: DeepSeek-V3's and Kimi K2's MLA at 192/128, their mean).
 * The fp8 backward gains nothing at d = 128 (MXFP8 loses 9 %): its
 * dequantize-and-requantize work is the larger share there. H200 publishes
 * per-tensor fp8 at d = 128 only, taken for every Hopper head dimension;
 * Hopper has no MXFP8 (layout_check_precision). */
typedef struct {
    double cc;   // from this compute capability up
    double f[2][2][2];   // [mxfp8][wide head][0 forward, 1 backward]
} Fp8AttnRatios;
static const Fp8AttnRatios FP8_ATTN[] = {
    {9.0, {{{0.69, 1.01}, {0.69, 1.01}}, {{0.69, 1.01}, {0.69, 1.01}}}},
    {10.0, {{{0.78, 0.97}, {0.66, 0.63}}, {{0.83, 1.09}, {0.71, 0.79}}}},
    {10.3, {{{0.67, 0.89}, {0.575, 0.58}}, {{0.75, 1.09}, {0.635, 0.765}}}},
};

bool time_fp8_attn(const ModelSpec *m, const HwProfile *hw, const Layout *lo, double *fwd, double *bwd)
{
    *fwd = *bwd = 1.0;
    if (!lo->fp8_dpa || lo->prec != PREC_FP8 || !lo->flash)
        return false;
    const Fp8AttnRatios *r = &FP8_ATTN[0];
    for (int i = 0; i < (int)(sizeof FP8_ATTN / sizeof FP8_ATTN[0]); i++)
        if (hw->compute_capability >= FP8_ATTN[i].cc)
            r = &FP8_ATTN[i];
    int d = m->attn == ATTN_MLA ? m->qk_nope_dim + m->qk_rope_dim : spec_head_dim(m);
    int mx = lo->fp8_recipe == FP8R_MXFP8, wide = d > 128;
    *fwd = r->f[mx][wide][0], *bwd = r->f[mx][wide][1];
    return true;
}

bool time_tp_overlap(const Layout *lo) { return lo->tp_comm_overlap && lo->tp > 1 && lo->sp; }

int time_members_per_node(const HwProfile *hw, int stride, int n)
{
    int k = hw->gpus_per_node / (stride > 0 ? stride : 1);
    if (k < 1)
        k = 1;
    return k < n ? k : n;
}

/* Kernels one layer launches, forward (Megatron's fusions: bias-GeLU,
 * bias-dropout-add, scale-mask-softmax): two norms, four GEMMs, two
 * bias-dropout-adds, the activation, the QKV split; the attention core is one
 * flash kernel, or unfused QK^T, softmax, dropout, AV and two layout copies.
 * The backward launches two GEMMs (dgrad, wgrad) per forward GEMM and about
 * one kernel per other forward kernel, plus its gradient reductions. */
enum {
    K_FWD_BASE = 10,      // norms 2, GEMMs 4, bias-dropout-add 2, activation 1, QKV split 1
    K_CORE_FLASH = 1,
    K_CORE_UNFUSED = 6,   // baddbmm, softmax, dropout, bmm, 2 permute copies
    K_GATED_EXTRA = 1,    // SwiGLU's multiply
};

/* Megatron's fused scale-mask-softmax kernel runs only when its warps can
 * cover the batch evenly (FusedScaleMaskSoftmax.is_kernel_available: 16 <
 * sk <= 4096, sq and sk multiples of 4, micro-batch x heads per TP rank a
 * multiple of 4). Otherwise PyTorch runs it as separate ops in fp32: cast
 * up, scale, masked fill, softmax, cast down, each a kernel and a pass over
 * the a·s^2 scores. With 16 heads that is tp 8 at micro-batch 1: the vTrain
 * rows measure ~0.9 ms more per layer there than at micro-batch 2, where
 * every other term says it should be cheaper (docs/accuracy/NOTES.md step 10). */
bool time_softmax_fused(const ModelSpec *m, const Layout *lo)
{
    long long sq = m->s / (lo->cp > 0 ? lo->cp : 1), sk = m->s;
    long long batches = (long long)lo->mbs * (m->a / (lo->tp > 0 ? lo->tp : 1));
    return sk > 16 && sk <= 4096 && sq % 4 == 0 && sk % 4 == 0 && batches % 4 == 0;
}

/* extra forward kernels of the unfused softmax: cast up, scale, mask, cast
 * down (the softmax itself replaces the fused kernel); the backward mirrors them */
enum { K_SOFTMAX_UNFUSED_EXTRA = 4 };

/* fp8: the projection's and FC2's inputs are quantized by kernels of their
 * own (the norms quantize QKV's and FC1's) */
enum { K_FP8_CAST = 2 };

static double kernels_fwd(const ModelSpec *m, const Layout *lo)
{
    double k = K_FWD_BASE + (lo->flash ? K_CORE_FLASH : K_CORE_UNFUSED) + (m->mlp == MLP_SWIGLU ? K_GATED_EXTRA : 0);
    if (lo->prec == PREC_FP8)
        k += K_FP8_CAST;
    if (!lo->flash && !time_softmax_fused(m, lo))
        k += K_SOFTMAX_UNFUSED_EXTRA;
    return k;
}

/* The fraction of link bandwidth NCCL reaches (nccl-tests busbw / bw). */
double coll_eff(const HwProfile *hw) { return hw->coll_eff > 0 ? hw->coll_eff : 1.0; }

/* One NCCL call: fixed cost + alpha-beta on links at their achieved bandwidth. */
static double coll_call(const HwProfile *hw, double bytes, int n, int k, bool allreduce)
{
    if (n <= 1 || bytes <= 0)
        return 0;
    HwProfile v = *hw;
    v.intra.bw *= coll_eff(hw);
    v.inter.bw *= coll_eff(hw);
    return hw->coll_lat + (allreduce ? time_allreduce(&v, bytes, n, k) : time_allgather(&v, bytes, n, k));
}

double time_coll_allreduce(const HwProfile *hw, double bytes, int n, int k) { return coll_call(hw, bytes, n, k, true); }

double time_coll_allgather(const HwProfile *hw, double bytes, int n, int k) { return coll_call(hw, bytes, n, k, false); }

double time_allreduce(const HwProfile *hw, double bytes, int n, int k)
{
    if (n <= 1 || bytes <= 0)
        return 0;
    if (k >= n)
        return 2.0 * (n - 1) * hw->intra.lat + 2.0 * (n - 1) / n * bytes / hw->intra.bw;
    int nodes = (n + k - 1) / k;
    double inter = 2.0 * log2((double)nodes) * hw->inter.lat + 2.0 * (nodes - 1) / nodes * (bytes / k) / hw->inter.bw;
    if (k <= 1)
        return inter;
    double intra = (k - 1) * hw->intra.lat + (double)(k - 1) / k * bytes / hw->intra.bw;
    return 2.0 * intra + inter;
}

double time_allgather(const HwProfile *hw, double bytes, int n, int k)
{
    if (n <= 1 || bytes <= 0)
        return 0;
    if (k >= n)
        return (n - 1) * hw->intra.lat + (double)(n - 1) / n * bytes / hw->intra.bw;
    int nodes = (n + k - 1) / k;
    double inter = log2((double)nodes) * hw->inter.lat + (double)(nodes - 1) / nodes * (bytes / k) / hw->inter.bw;
    if (k <= 1)
        return inter;
    return (k - 1) * hw->intra.lat + (double)(k - 1) / k * bytes / hw->intra.bw + inter;
}

double time_p2p(const HwProfile *hw, double bytes, bool cross_node)
{
    if (bytes <= 0)
        return 0;
    const Link *l = cross_node ? &hw->inter : &hw->intra;
    return hw->coll_lat + l->lat + bytes / (l->bw * coll_eff(hw));
}

/* The width of K and V per GPU as the attention sees them: a stack whose
 * model code repeats K and V to every query head before the attention
 * (sdpa_repeat_kv) makes them as wide as Q. */
static double attn_kv_width(const ModelSpec *m, const HwProfile *hw, const Layout *lo)
{
    return (hw->sdpa_repeat_kv ? spec_q_width(m) : spec_kv_width(m)) / lo->tp;
}

/* PyTorch's context parallelism (hw->cp_pytorch: torchtitan's; torch
 * 2.5-2.7 torch/distributed/tensor/experimental/_attention.py,
 * _templated_ring_attention and _templated_ring_attention_backward), per
 * layer and micro-batch on one GPU. Chunks and steps as the ring of cp_attn_s below
 * (head-tail load balancing: cp steps of one kernel of 2c² score pairs),
 * for either rotate method: ALL_GATHER (--cp-comm all-gather, torchtitan's
 * default) gathers the K/V of every rank once, started before step 0 and
 * waited for at step 1; ALL_TO_ALL (ring) passes each step's K/V on, waited
 * for at the next step. What each step adds is eager PyTorch on the rank's
 * tokens, bytes per element of the output (width q) or of K or V (width
 * kv, attn_kv_width), at ab bytes for the 16-bit element:
 *  - forward: K and V made contiguous (the model hands them over
 *    transposed) and concatenated for the rotater before each step but the
 *    last (read and write, 2ab per K/V element each time); the merger takes each
 *    step's output to fp32 (ab + 4) and, from step 1 on, merges it:
 *    out - block (12), times the broadcast sigmoid of the lse difference
 *    (8), subtracted from out (12); a step that computes only the second Q
 *    chunk does that on half the rows and then concatenates the halves
 *    back (8). Last, the output back to 16 bits (4 + ab).
 *  - backward: fp32 zeros for dQ, dK, dV (4 each); the same K/V copies
 *    (contiguous, and the concat before each step but the last); each step's 16-bit gradients added
 *    into the fp32 sums (read 4 + ab, write 4), a half-width sum
 *    concatenated back (8); dK and dV concatenated in fp32 for the ring
 *    (8 each) and sent on every step; dQ, dK, dV back to 16 bits at the end
 *    (4 + ab each).
 * A rank computing the second Q chunk on a step (i > rank) merges half an
 * output but sums whole dK, dV; one with i <= rank the other way round.
 * The ranks meet at each layer's K/V collective, so each pass is priced
 * for the busier side: every later step full-width in the forward, and in
 * the backward the larger of the two sides. dK and dV travel in fp32
 * (8 bytes a K/V element) each step, waited for at the next one, the last
 * after the loop with nothing to hide behind. */
static void cp_pytorch_s(const ModelSpec *m, const HwProfile *hw, const Layout *lo, double step, double *fwd,
                         double *bwd, double *xf, double *xb, double *kern)
{
    Precision p = prec_bf16_if_fp8(hw, lo->prec);
    double ab = hw_precision_bytes(p), cp = lo->cp, b = lo->mbs;
    double qw = spec_q_width(m) / lo->tp, kvw = attn_kv_width(m, hw, lo);
    double tok = layout_mb_tokens(m, lo), later = cp - 1.0;
    double kv_cat = 2.0 * ab * 2.0 * tok * kvw;   /* K and V read and written */
    double merge = (ab + 36.0) * tok * qw;
    double f_bytes = cp * kv_cat + later * merge + (ab + 4.0) * tok * qw + (4.0 + ab) * tok * qw;
    double sum_full = (8.0 + ab), sum_half = 0.5 * (8.0 + ab) + 8.0;
    double grads = fmax(sum_full * qw + 2.0 * sum_half * kvw, sum_half * qw + 2.0 * sum_full * kvw);
    double b_bytes = 4.0 * tok * (qw + 2.0 * kvw) + cp * kv_cat + tok * (sum_full * (qw + 2.0 * kvw)) +
                     later * tok * grads + cp * 16.0 * tok * kvw + (4.0 + ab) * tok * (qw + 2.0 * kvw);
    *fwd = cp * step + time_mem_s(hw, f_bytes);
    *bwd = cp * 2.5 * step + time_mem_s(hw, b_bytes);
    bool cross = (long long)lo->tp * lo->cp > hw->gpus_per_node;
    double dkv = time_p2p(hw, 8.0 * tok * kvw, cross);
    *xb = later * fmax(0.0, dkv - 2.5 * step) + dkv;
    if (lo->cp_comm == CP_COMM_ALLGATHER) {
        int k_cp = time_members_per_node(hw, lo->tp, lo->cp);
        double ag = time_coll_allgather(hw, 2.0 * ab * b * (double)m->s * kvw, lo->cp, k_cp);
        *xf = fmax(0.0, ag - step);
        *xb += fmax(0.0, ag - 2.5 * step);
    } else {
        double send = time_p2p(hw, 2.0 * ab * tok * kvw, cross);
        *xf = later * fmax(0.0, send - step);
        *xb += later * fmax(0.0, send - 2.5 * step);
    }
    /* per later step: the concat, the exchange wait, the kernel and five merge ops */
    *kern = 8.0 * later + 2.0;
}

/* Context parallelism's attention core on one GPU, per micro-batch
 * (COSTMODEL.md §4.4). The sequence is cut into 2·cp chunks of c = s/(2cp)
 * tokens and rank r holds chunks r and 2cp-1-r (Megatron's load balancing
 * for the causal mask), tok = 2c tokens per sequence.
 *
 * Ring (Megatron's default p2p, Transformer Engine): cp steps. Step 0 is
 * the resident block under the causal mask (2c x 2c, half of it); every
 * later step is 2c x c or c x 2c unmasked, the same c·2c score pairs. So
 * each step is one attention kernel of F = 4·b·2c²·q/t FLOPs, timed on the
 * attention curve at F: at 8K tokens and cp 16 a step is 256 x 512 tokens
 * and the kernel runs far below its large-size rate. Each later step's
 * partial output is merged into an fp32 accumulator (a memory-bound pass
 * over the rank's output and its log-sum-exp) and costs its own launches.
 * The K and V the next step needs (2·ab·b·2c·kv/t bytes) travel from the
 * ring neighbour while this step computes: cp-1 transfers, each exposed by
 * what it outlasts its step. Backward: the same steps at 2.5x the forward
 * kernel; K, V and their gradients travel (twice the bytes), and the last
 * dK, dV go home after the last step with nothing left to hide behind.
 *
 * All-gather (Llama 3's, --cp-comm all-gather): K and V of the whole
 * sequence all-gathered over cp before the attention (exposed), the two
 * resident chunks' attention as two kernels of half the rank's FLOPs each;
 * backward gathers K and V again and reduce-scatters dK, dV (exposed).
 *
 * *fwd and *bwd: the GPU time of the attention kernels and merges; *xf and
 * *xb: the exposed CP communication forward and backward; *kern: kernels
 * launched forward beyond one attention kernel. */
static void cp_attn_s(const ModelSpec *m, const HwProfile *hw, const Layout *lo, double *fwd, double *bwd, double *xf,
                      double *xb, double *kern)
{
    Precision p = prec_bf16_if_fp8(hw, lo->prec);
    double ab = hw_precision_bytes(p), t = lo->tp, cp = lo->cp, b = lo->mbs;
    double qw = spec_q_width(m) / t, kvw = attn_kv_width(m, hw, lo);
    double tok = layout_mb_tokens(m, lo), c = tok / (2.0 * b);   // tokens per chunk per sequence
    if (hw->cp_pytorch) {
        cp_pytorch_s(m, hw, lo, attn_s(hw, p, 4.0 * b * 2.0 * c * c * qw), fwd, bwd, xf, xb, kern);
        return;
    }
    double total = 4.0 * tok * (double)m->s * qw * 0.5;           // the rank's causal FLOPs
    int k_cp = time_members_per_node(hw, lo->tp, lo->cp);
    if (lo->cp_comm == CP_COMM_ALLGATHER) {
        double k1 = attn_s(hw, p, 0.5 * total);
        *fwd = 2.0 * k1;
        *bwd = 2.5 * *fwd;
        double ag = time_coll_allgather(hw, 2.0 * ab * b * (double)m->s * kvw, lo->cp, k_cp);
        *xf = ag;
        *xb = 2.0 * ag;   /* gather K, V again; reduce-scatter dK, dV */
        *kern = 2.0;      /* the gather and the second chunk's kernel */
        return;
    }
    double step = attn_s(hw, p, 4.0 * b * 2.0 * c * c * qw);
    double merge = time_mem_s(hw, (ab + 8.0) * tok * qw + 8.0 * tok * m->a / t);
    /* A later step reads either the rank's first K/V chunk against both
     * Q chunks or the second Q chunk against both K/V chunks (half the
     * steps each, averaged over the ring), and that half is first copied
     * into a dense buffer (read + write): ab·tok/2·(2kv) or ab·tok/2·q,
     * each on half the steps. Backward copies it again (the Q half with
     * its output and output gradient: 3 tensors of width q) and adds the
     * step's gradients into the running sums: dQ added (read the step's,
     * read and write the sum, 3ab), dK and dV concatenated (2ab each) and
     * added into the buffer that travels on (3ab each), over 3/4 of the
     * rank's rows on average (full on one side, half on the other).
     * Transformer Engine's AttnFuncWithCP (v1.3-1.5) does each as its own
     * PyTorch op. */
    double half = ab * tok * (kvw + 0.5 * qw), half_b = ab * tok * (kvw + 1.5 * qw);
    double accum = 0.75 * ab * tok * (3.0 * qw + 10.0 * kvw);
    *fwd = cp * step + (cp - 1.0) * (merge + time_mem_s(hw, half));
    *bwd = cp * 2.5 * step + (cp - 1.0) * time_mem_s(hw, half_b + accum);
    bool cross = (long long)lo->tp * lo->cp > hw->gpus_per_node;
    double kv_bytes = 2.0 * ab * tok * kvw;
    double send = time_p2p(hw, kv_bytes, cross), send_b = time_p2p(hw, 2.0 * kv_bytes, cross);
    *xf = (cp - 1.0) * fmax(0.0, send - step);
    *xb = (cp - 1.0) * fmax(0.0, send_b - 2.5 * step) + send;
    *kern = 4.0 * (cp - 1.0);   /* per later step: the send/receive, the copy, the kernel, the merge */
}

/* A layer's forward kernels by the parts --cuda-graph-modules names: the
 * attention part (TransformerLayer._forward_attention: input norm, QKV GEMM,
 * QKV split, core, projection GEMM, bias-dropout-add, fp8's cast of the
 * projection's input), the rest is the MLP part; an MoE layer's MLP part up
 * to the router (pre-MLP norm, router, the shared expert unless it overlaps
 * the dispatch) and its preprocess. */
enum { K_ATTN_PART = 5, K_PRE_MLP_NORM = 1 };

typedef struct {
    double fwd, bwd;   // host launches of one layer's forward and backward
} Launches;

/* Host launches under Megatron's CUDA graphs (--cuda-graph-impl,
 * --cuda-graph-modules). Eager: kf forward and 2·kf backward (dgrad and
 * wgrad per GEMM, about one kernel per other forward kernel). A graphed part
 * is replayed by one launch forward and one backward (Transformer Engine's
 * make_graphed_callables and Megatron's local graphs capture both), its
 * kernels still run on the GPU; no modules named: the whole layer is one
 * graph. full_iteration: the step is one graph, no launch per layer. */
static Launches layer_launches(const Layout *lo, bool moe, double kf, double kf_attn, double kf_router,
                               double kf_pre)
{
    if (lo->cuda_graph == CG_FULL_ITERATION)
        return (Launches){0, 0};
    if (lo->cuda_graph == CG_NONE)
        return (Launches){kf, 2.0 * kf};
    int cgm = layout_cg_modules(lo);
    if (!cgm)
        return (Launches){1, 1};
    double eager = kf, graphs = 0;
    if (cgm & CGM_ATTN)
        eager -= kf_attn, graphs++;
    if ((!moe && (cgm & CGM_MLP)) || (moe && (cgm & CGM_MOE)))
        eager -= kf - kf_attn, graphs++;
    if (moe && (cgm & CGM_MOE_ROUTER))
        eager -= kf_router + ((cgm & CGM_MOE_PREPROCESS) ? kf_pre : 0), graphs++;
    return (Launches){eager + graphs, 2.0 * eager + graphs};
}

/* The GEMMs of a torchtitan Llama block in the order its forward calls them
 * (models/llama3, models/common attention.py and feed_forward.py at
 * b5bcd76; the same at 9dec370): wq, wk, wv, then wo after the attention,
 * then w1, w3 (SwiGLU's up half) and w2 (w2(silu(w1(x)) * w3(x))), or w1,
 * w2 for a plain MLP. T x N x K per GPU; `spent` marks the two whose output
 * only a residual add reads (wo, the last MLP GEMM). Returns the count. */
typedef struct {
    double n, k;
    bool spent;
} OpGemm;

static int sel_op_gemms(const ModelSpec *m, const Layout *lo, OpGemm g[7])
{
    double t = lo->tp, h = m->h, q = spec_q_width(m) / t, kv = spec_kv_width(m) / t, f = m->f / t;
    int n = 0;
    g[n++] = (OpGemm){q, h, false};
    g[n++] = (OpGemm){kv, h, false};
    g[n++] = (OpGemm){kv, h, false};
    g[n++] = (OpGemm){h, q, true};
    g[n++] = (OpGemm){f, h, false};
    if (m->mlp == MLP_SWIGLU)
        g[n++] = (OpGemm){f, h, false};
    g[n++] = (OpGemm){h, f, true};
    return n;
}

/* Whether the op policy recomputes GEMM i (0-based) of sel_op_gemms:
 * SelectiveAC saves every matmul's output but every second one (the 2nd,
 * 4th, 6th of the block: wk, wo, w3), counting aten.mm only. Compiled, the
 * partitioner runs again only what the backward reads, so wo (read by
 * nothing the backward needs) is not run; eager, checkpoint replays the
 * block's forward and every op not saved runs again. fp8 the same:
 * torchao's Float8 and MX linears call torch.mm on their tensor subclasses,
 * and the policy's dispatch mode sees that aten.mm before the subclass
 * turns it into _scaled_mm (modes take precedence over subclasses), so the
 * count is the same. */
static bool sel_op_recomputes(const Layout *lo, const OpGemm *g, int i)
{
    return i % 2 == 1 && !(lo->torch_compile && g->spent);
}

/* A selectively recomputed layer under torchtitan's per-op policy
 * (SelectiveAC; COSTMODEL.md §2.2.1), forward again per micro-batch: the
 * GEMMs sel_op_recomputes says, every memory-bound pass of the layer (norms,
 * RoPE, residual adds, the activation, fp8 casts: ew_s, none of them saved),
 * and the TP collectives whose outputs are not saved (the two all-gathers
 * under SP, or the two all-reduces; the policy saves reduce-scatters), as
 * exposed as in the forward. The attention core's output is saved: it does
 * not run again. Host-bound, the forward's launches less the GEMMs and the
 * core that do not run (fwd_launches: the forward's, layer_launches). */
static double sel_op_rc_s(const ModelSpec *m, const HwProfile *hw, const Layout *lo, double ew_s, double tp_call,
                          double ov, double fwd_launches)
{
    OpGemm g[7];
    int n = sel_op_gemms(m, lo, g), skipped = 0;
    double tok = layout_mb_tokens(m, lo), gemm = 0;
    for (int i = 0; i < n; i++) {
        if (sel_op_recomputes(lo, &g[i], i))
            gemm += linear_fwd_s(hw, lo->prec, tok, g[i].n, g[i].k);
        else
            skipped++;
    }
    double tpc = lo->tp > 1 ? 2.0 * tp_call : 0.0;
    double tp = tpc - fmin(ov * tpc, gemm);
    double launches = fmax(0.0, fwd_launches - skipped - (lo->flash ? K_CORE_FLASH : K_CORE_UNFUSED));
    return fmax(gemm + ew_s + tp, launches * hw->kernel_lat);
}

double time_sel_op_saved_width(const ModelSpec *m, const Layout *lo)
{
    OpGemm g[7];
    int n = sel_op_gemms(m, lo, g);
    double w = 0;
    /* saved: the odd-counted GEMMs' outputs (not run again); compiled, the
     * partitioner keeps only what the backward reads, so not a spent one
     * (w2's output feeds only the residual add), where eager SAC caches it */
    for (int i = 0; i < n; i++)
        if (i % 2 == 0 && !(lo->torch_compile && g[i].spent))
            w += g[i].n;
    return w;
}

double time_sel_op_gemm_flops(const ModelSpec *m, const Layout *lo)
{
    if (!layout_sel_op(m, lo))
        return 0;
    OpGemm g[7];
    int n = sel_op_gemms(m, lo, g);
    double f = 0;
    for (int i = 0; i < n; i++)
        if (sel_op_recomputes(lo, &g[i], i))
            f += 2.0 * g[i].n * g[i].k * lo->tp;   /* per token, over the layer's tp shards */
    return f;
}

void time_layer(const ModelSpec *m, const HwProfile *hw, const Layout *lo, LayerTime *out)
{
    Precision p = lo->prec;
    double ab = hw_precision_bytes(p);
    double t = lo->tp;
    double tok = layout_mb_tokens(m, lo);           // tokens per GPU per micro-batch
    double h = m->h, q = spec_q_width(m), kv = spec_kv_width(m), f = m->f;
    double gated = m->mlp == MLP_SWIGLU ? 2.0 : 1.0;

    /* the four GEMMs of a layer, each timed at its own shape (T x N x K per
     * GPU): QKV T x (q+2kv)/t x h, projection T x h x q/t, FC1 T x gated f/t
     * x h, FC2 T x h x f/t; the backward's dgrad and wgrad have other shapes */
    double n_qkv = (q + 2 * kv) / t, k_proj = q / t, n_fc1 = f * gated / t, k_fc2 = f / t;
    double g_attn, g_attn_bwd, g_up = 0;   /* g_up: MLA's up projections forward (--recompute-modules mla_up_proj) */
    if (m->attn == ATTN_MLA) {
        /* MLA: q down (replicated over tp) and up, kv down (with the shared
         * RoPE key, replicated) and up, the output projection */
        double qn = m->qk_nope_dim + m->qk_rope_dim, ql = m->q_lora_rank, kl = m->kv_lora_rank;
        double nq = m->a * qn / t, nkv = m->a * ((double)m->qk_nope_dim + m->v_head_dim) / t;
        k_proj = m->a * (double)m->v_head_dim / t;
        g_attn = linear_fwd_s(hw, p, tok, kl + m->qk_rope_dim, h) + linear_fwd_s(hw, p, tok, nkv, kl) +
                 linear_fwd_s(hw, p, tok, h, k_proj);
        g_up = linear_fwd_s(hw, p, tok, nkv, kl) + (ql > 0 ? linear_fwd_s(hw, p, tok, nq, ql) : 0.0);
        g_attn_bwd = linear_bwd_s(hw, p, tok, kl + m->qk_rope_dim, h) + linear_bwd_s(hw, p, tok, nkv, kl) +
                     linear_bwd_s(hw, p, tok, h, k_proj);
        if (ql > 0) {
            g_attn += linear_fwd_s(hw, p, tok, ql, h) + linear_fwd_s(hw, p, tok, nq, ql);
            g_attn_bwd += linear_bwd_s(hw, p, tok, ql, h) + linear_bwd_s(hw, p, tok, nq, ql);
        } else {
            g_attn += linear_fwd_s(hw, p, tok, nq, h);
            g_attn_bwd += linear_bwd_s(hw, p, tok, nq, h);
        }
        n_qkv = nq + nkv;
    } else {
        g_attn = linear_fwd_s(hw, p, tok, n_qkv, h) + linear_fwd_s(hw, p, tok, h, k_proj);
        g_attn_bwd = linear_bwd_s(hw, p, tok, n_qkv, h) + linear_bwd_s(hw, p, tok, h, k_proj);
    }
    double g_mlp = linear_fwd_s(hw, p, tok, n_fc1, h) + linear_fwd_s(hw, p, tok, h, k_fc2);
    double g_mlp_bwd = linear_bwd_s(hw, p, tok, n_fc1, h) + linear_bwd_s(hw, p, tok, h, k_fc2);
    double gemm = g_attn + g_mlp, gemm_bwd = g_attn_bwd + g_mlp_bwd;

    /* attention core: flash skips the masked half (and outside a sliding
     * window); an unfused kernel computes it all */
    double core_full, core_win;   /* a full causal layer's core and a windowed one's, forward */
    double core = attn_core_s(m, hw, lo, tok, q / t, &core_full, &core_win);
    if (!lo->flash) {
        /* unfused QK^T and AV are batched GEMMs with K = d_head: they write and
         * read the a·s^2 scores, so below ~150 FLOP/byte they are bound by HBM */
        double scores = ab * m->a / t * tok * (double)m->s;
        double qkvo = 4.0 * ab * tok * q / t;
        core = fmax(core, time_mem_s(hw, 2.0 * scores + qkvo));
    }
    /* the backward at 2.5x the forward at d = 128, and at its own head-dimension rate */
    double core_bwd = lo->flash ? 2.5 * core * time_attn_dim_eff(m, hw, false) / time_attn_dim_eff(m, hw, true)
                                : 2.0 * core;
    double cp_xf = 0, cp_xb = 0, cp_kern = 0;
    if (lo->cp > 1)   /* context parallel: the core in blocks, with its K/V exchange */
        cp_attn_s(m, hw, lo, &core, &core_bwd, &cp_xf, &cp_xb, &cp_kern);
    if (lo->cp > 1 && lo->flash) {   /* its blocks at the head dimension's rate too (merges with them) */
        core /= time_attn_dim_eff(m, hw, false);
        core_bwd /= time_attn_dim_eff(m, hw, true);
    }
    /* --fp8-dot-product-attention: cuDNN's fp8 kernels at their measured
     * rates over bf16 (time_fp8_attn). A windowed layer's fp8 forward keeps
     * the window at about its bf16 time (0.83-1.0 measured); its fp8
     * backward does not skip the blocks outside the window: cudnn-frontend's
     * 128-token window on GB200 and GB300 takes 2.1-2.7x its bf16 time at
     * 2K tokens, 3.3-4.5x at 4K and 6.0-8.2x at 8K, growing with s^2 as a
     * causal kernel does, so it is priced as a full causal layer's. On
     * Hopper cuDNN 9.19 has no fp8 sliding window (the H200 results fail
     * it): the windowed layers stay in bf16. */
    double ffa, fba;
    if (time_fp8_attn(m, hw, lo, &ffa, &fba)) {
        int nw = spec_windowed_layers(m);
        double bw = core_bwd / (core > 0 ? core : 1.0);   /* backward over forward time, per layer */
        if (nw > 0 && core_win > 0 && lo->cp == 1) {
            double L = m->L, full_b = core_full * bw, win_b = core_win * bw;
            bool hopper = hw->compute_capability < 10.0;
            core = ((L - nw) * core_full * ffa + nw * core_win) / L;
            core_bwd = ((L - nw) * full_b * fba + nw * (hopper ? win_b : full_b * fba)) / L;
        } else {
            core *= ffa;
            core_bwd *= fba;
        }
    }
    double softmax = 0;
    if (!lo->flash) {  /* scale, mask, softmax, dropout passes over a s^2 scores */
        double el = m->a * tok * (double)m->s / t;
        softmax = time_mem_s(hw, 4.0 * ab * el);
        /* unfused fallback in fp32: cast (ab + 4), scale (8), mask (9), softmax
         * (8), cast (4 + ab) bytes per score instead of the fused kernel's 2ab */
        if (!time_softmax_fused(m, lo))
            softmax += time_mem_s(hw, (4.0 + 8 + 9 + 8 + 4) * el);
    }

    /* memory-bound ops: norms, residuals, dropout outside TP; activation inside */
    double rep = layout_sp_share(lo);
    double ew = ab * tok * (hw->act_bytes_per_layer * h * rep + (gated + 1.0) * f / t);
    double ew_attn = ab * tok * hw->act_bytes_per_layer * h * rep, gout_attn = 0;   /* an MoE layer's non-MLP part */
    if (hw->eager_elementwise && !lo->torch_compile) {   /* eager PyTorch model code (time_eager_bytes) */
        ew += tok * time_eager_bytes(m, lo, false);
        ew_attn += tok * time_eager_bytes(m, lo, true);
    }
    /* fp8: each GEMM's bf16 input is quantized into an fp8 copy and an fp8
     * transpose (kept for the weight gradient), read ab + write 2 bytes per
     * element; for QKV and FC1 the norm writes them (TE's LayerNormLinear),
     * so only the writes count. The backward casts and transposes each
     * GEMM's output gradient the same way. */
    if (p == PREC_FP8) {
        /* --fp8-recipe (fp8_scale_bytes): the norms before QKV and FC1
         * write bf16 and the cast reads it (h a row, on the SP shard); the
         * other casts (projection and FC2 inputs, the output gradients)
         * read their input once more for its amax. A norm computes its
         * output's amax itself (FUSED_NORM_AMAX_FP8). */
        double amax, norm;
        fp8_scale_bytes(lo, ab, &amax, &norm);
        double in = tok * (2.0 * 2.0 * h + (ab + 2.0) * (k_proj + k_fc2));
        double gout = (ab + 2.0) * tok * (n_qkv + h + n_fc1 + h);
        in += tok * (norm * 2.0 * h * rep + amax * (k_proj + k_fc2));
        gout += amax * tok * (n_qkv + h + n_fc1 + h);
        ew += in;
        gemm_bwd += time_mem_s(hw, gout);
        /* an MoE layer's pre-MLP norm is a plain norm (Megatron-core's MoE
         * spec: TENorm, not a LayerNormLinear): it writes bf16 for the router,
         * and the experts quantize their inputs after the permutation
         * (time_moe_mlp_s). Only the input norm writes fp8 here. */
        ew_attn += tok * (2.0 * h + (ab + 2.0) * k_proj + norm * h * rep + amax * k_proj);
        gout_attn = (ab + 2.0 + amax) * tok * (n_qkv + h);
    }
    double ew_s = time_mem_s(hw, ew);
    /* a stack whose model code repeats K and V to every query head before
     * the attention (sdpa_repeat_kv, torchtitan's repeat_kv): the copy
     * forward (read kv, write q, for K and for V), the sum over the repeats
     * backward (read q, write kv) */
    double rkv = hw->sdpa_repeat_kv && m->attn != ATTN_MLA && q > kv ? time_mem_s(hw, 2.0 * ab * tok * (q + kv) / t)
                                                                       : 0.0;

    double gpu_fwd = gemm + core + softmax + ew_s + rkv;
    double gpu_bwd = gemm_bwd + core_bwd + 2.0 * softmax + 2.0 * ew_s + rkv;

    /* TP without SP: 2 all-reduces of the layer's activations each way.
     * Under SP each all-reduce is a reduce-scatter and an all-gather, two
     * NCCL calls each paying the fixed call cost: forward AG before QKV and
     * FC1, RS after the projection and FC2; backward the conjugates (AG of
     * the output gradients of the projection and FC2, RS of the input
     * gradients of QKV and FC1), and the inputs of QKV and FC1 all-gathered
     * a second time for their weight gradients: Megatron keeps only the
     * sequence-sharded input (LinearWithGradAccumulationAndAsyncCommunication
     * re-gathers it in backward), 3 all-reduces' worth of bytes in six calls.
     * A reduce-scatter costs as the all-gather of the same tensor. */
    int k_tp = time_members_per_node(hw, 1, lo->tp);
    double msg = ab * tok * h;
    double ar = time_coll_allreduce(hw, msg, lo->tp, k_tp);
    bool sp_tp = lo->sp && lo->tp > 1;
    double ag_tp = sp_tp ? time_coll_allgather(hw, msg, lo->tp, k_tp) : 0.0;
    /* --tp-comm-overlap (Transformer Engine userbuffers, with SP): each
     * all-gather / reduce-scatter is cut into chunks pipelined with the GEMM
     * it feeds or drains. Hidden: the profile's achievable fraction of the
     * pass's TP collectives, and never more than that pass's GEMMs last.
     * Off, nothing hides: the collectives sit on the compute stream. */
    double tpc = sp_tp ? 4.0 * ag_tp : 2.0 * ar, tpc_bwd = sp_tp ? 6.0 * ag_tp : 2.0 * ar;
    double ov = time_tp_overlap(lo) ? hw->tp_overlap : 0.0;
    out->tp_fwd = tpc - fmin(ov * tpc, gemm);
    out->tp_bwd = tpc_bwd - fmin(ov * tpc_bwd, gemm_bwd);
    /* PyTorch's non-reentrant checkpoint (2.1 on) stops the recompute once
     * the last tensor backward saved is rebuilt (early stop): the down
     * projection's input is saved before its GEMM runs, so that GEMM, the
     * layer's last, and its TP reduction after it are not run again */
    double g_last = hw->rc_early_stop ? linear_fwd_s(hw, p, tok, h, k_fc2) : 0.0;
    double tpc_rc = tpc - (hw->rc_early_stop ? (sp_tp ? ag_tp : ar) : 0.0);
    out->tp_rc = tpc_rc - fmin(ov * tpc_rc, gemm - g_last);

    /* The GPU cannot run ahead of the host that launches its kernels: a pass
     * lasts max(host launches, GPU compute + its TP collectives), which the
     * compute terms carry (the collectives run on the GPU either way). */
    double kf = kernels_fwd(m, lo) + cp_kern, lat = hw->kernel_lat;
    double core_k = (lo->flash ? K_CORE_FLASH : K_CORE_UNFUSED) + cp_kern;
    double kf_attn = K_ATTN_PART + core_k + (p == PREC_FP8 ? 1 : 0) +
                     (!lo->flash && !time_softmax_fused(m, lo) ? K_SOFTMAX_UNFUSED_EXTRA : 0);
    Launches ld = layer_launches(lo, false, kf, kf_attn, 0, 0);
    out->fwd = fmax(gpu_fwd, ld.fwd * lat - out->tp_fwd);
    out->bwd = fmax(gpu_bwd, ld.bwd * lat - out->tp_bwd);
    /* a recomputed forward runs the attention core again, K/V exchange included */
    out->rc_full = fmax(gpu_fwd - g_last, ld.fwd * lat - out->tp_rc) + cp_xf;
    if (lo->cuda_graph == CG_FULL_ITERATION)
        core_k = 0;
    out->rc_sel = fmax(core + softmax, core_k * lat) + cp_xf;
    if (layout_sel_op(m, lo))
        out->rc_sel = sel_op_rc_s(m, hw, lo, ew_s, sp_tp ? ag_tp : ar, ov, ld.fwd) + cp_xf;

    /* CP: the exposed K/V exchange of the forward and the backward (cp_attn_s) */
    out->cp = cp_xf + cp_xb;

    /* --recompute-modules (Megatron's selective modules beyond core_attn):
     * each module's forward runs again before its backward, in every layer
     * not fully recomputed. layernorm: the two norms, a read and a write of
     * the (SP-sharded) hidden state each; mla_up_proj: the q and kv up
     * projections' GEMMs; mlp: a dense layer's MLP GEMMs and activation;
     * moe_act: the routed experts' activation over their rows; shared_experts:
     * the shared expert's GEMMs and activation. */
    int rcm = layout_rc_modules(lo);
    double rc_common = ((rcm & RCM_LAYERNORM) ? time_mem_s(hw, 2.0 * 2.0 * ab * tok * h * rep) : 0.0) +
                       ((rcm & RCM_MLA_UP_PROJ) ? g_up : 0.0);
    out->rc_mod = rc_common + ((rcm & RCM_MLP) ? g_mlp + time_mem_s(hw, ab * tok * (gated + 1.0) * f / t) : 0.0);

    /* an MoE layer: the attention part as above, the MLP replaced by router,
     * permutation, grouped experts and the shared expert (time_moe_mlp_s) */
    out->wgrad = g_attn + g_mlp;
    out->moe_wgrad = 0;
    out->moe_fwd = out->moe_bwd = out->moe_rc_full = out->moe_rc_sel = 0;
    out->moe_rc_mod = out->shared_fwd = out->shared_bwd = 0;
    out->moe_tp_fwd = out->moe_tp_bwd = out->moe_tp_rc = out->ep_fwd = out->ep_bwd = out->ep_rc = 0;
    if (!spec_is_moe(m))
        return;
    double mf, mb;
    time_moe_mlp_s(m, hw, lo, &mf, &mb);
    time_moe_bias_passes_s(m, hw, lo, &mf, &mb);
    out->moe_wgrad = g_attn + time_moe_wgrad_s(m, hw, lo);
    double ea = time_mem_s(hw, ew_attn);
    double mgpu_fwd = g_attn + core + softmax + ea + rkv + mf;
    double mgpu_bwd = g_attn_bwd + time_mem_s(hw, gout_attn) + core_bwd + 2.0 * softmax + 2.0 * ea + rkv + mb;
    /* TP: the attention's pair of collectives, the shared expert's (a dense
     * MLP over tp), and with etp > 1 the expert rows all-gathered over etp
     * before the experts and reduce-scattered after (Megatron's alltoall
     * dispatcher); each way */
    int etp = layout_etp(lo);
    double ag_etp = time_coll_allgather(hw, ab * layout_moe_rows(m, lo) * h, etp, time_members_per_node(hw, 1, etp));
    /* hidden as a dense layer's are: only with --tp-comm-overlap, the
     * profile's achievable fraction, no longer than the attention GEMMs */
    double mtpc = ar * (m->shared_ffn > 0 ? 2.0 : 1.0) + 2.0 * ag_etp;
    double mhide = time_tp_overlap(lo) ? hw->tp_overlap * mtpc : 0.0;
    out->moe_tp_fwd = mtpc - fmin(mhide, g_attn);
    out->moe_tp_bwd = mtpc - fmin(mhide, g_attn_bwd);
    out->moe_tp_rc = out->moe_tp_fwd;
    double shared_k = m->shared_ffn > 0 ? K_SHARED_EXTRA : 0;
    double mk = kf + K_MOE_EXTRA + shared_k + (time_moe_fp8_pad(lo) ? K_MOE_FP8_PAD : 0);
    double kf_router = K_PRE_MLP_NORM + K_MOE_ROUTER + (lo->moe_shared_overlap ? 0 : shared_k);
    Launches lm = layer_launches(lo, true, mk, kf_attn, kf_router, K_MOE_PREPROCESS);
    out->moe_fwd = fmax(mgpu_fwd, lm.fwd * lat - out->moe_tp_fwd) + time_moe_host_sync_s(m, hw, lo);
    out->moe_bwd = fmax(mgpu_bwd, lm.bwd * lat - out->moe_tp_bwd);
    out->moe_rc_full = out->moe_fwd;
    out->moe_rc_sel = out->rc_sel;
    /* EP: dispatch and combine, forward and backward (and again in a full
     * recompute's forward), exposed by default. With
     * --overlap-moe-expert-parallel-comm Megatron runs one micro-batch's
     * forward and another's backward layer by layer on two streams (the
     * interleaved 1F1B pairs them), so the four transfers hide under the
     * pair's compute: what is left of them is exposed, half each way.
     * Without it, --moe-shared-expert-overlap runs the shared expert on a
     * second stream while the dispatch and combine are in flight (Megatron's
     * SharedExpertMLP: FC1 under the dispatch, FC2 under the combine), so the
     * shared expert's GEMMs and activation hide that much of each way's two
     * transfers (a full recompute's forward pairs them again). */
    out->moe_rc_mod = rc_common;
    if (rcm & RCM_MOE_ACT) {
        double ef = (m->moe_ffn > 0 ? m->moe_ffn : m->f) / (double)etp;
        out->moe_rc_mod += time_mem_s(hw, ab * layout_moe_rows(m, lo) * (gated + 1.0) * ef);
    }
    if ((rcm & RCM_SHARED_EXPERTS) && m->shared_ffn > 0) {
        double sf = m->shared_ffn / t;
        out->moe_rc_mod += linear_fwd_s(hw, p, tok, gated * sf, h) + linear_fwd_s(hw, p, tok, h, sf) +
                           time_mem_s(hw, ab * tok * (gated + 1.0) * sf);
    }
    /* forward: dispatch (in its wire dtype) and combine (bf16); backward: the combine's gradient (in
     * its wire dtype) and the dispatch's (bf16); a full recompute replays the forward's pair */
    double a2a = time_moe_a2a_s(m, hw, lo);
    double a2a_f = time_moe_a2a_wire_s(m, hw, lo, lo->moe_dispatch_wire) + a2a;
    double a2a_b = time_moe_a2a_wire_s(m, hw, lo, lo->moe_combine_bwd_wire) + a2a;
    out->ep_fwd = out->ep_rc = a2a_f;
    out->ep_bwd = a2a_b;
    if (lo->moe_shared_overlap && m->shared_ffn > 0 && a2a > 0) {
        double sf = m->shared_ffn / t, sh_ew = time_mem_s(hw, ab * tok * (gated + 1.0) * sf);
        double sh_f = linear_fwd_s(hw, p, tok, gated * sf, h) + linear_fwd_s(hw, p, tok, h, sf) + sh_ew;
        double sh_b = linear_bwd_s(hw, p, tok, gated * sf, h) + linear_bwd_s(hw, p, tok, h, sf) + 2.0 * sh_ew;
        out->ep_fwd = out->ep_rc = fmax(0.0, a2a_f - sh_f);
        out->ep_bwd = fmax(0.0, a2a_b - sh_b);
        out->shared_fwd = sh_f, out->shared_bwd = sh_b;
    }
    if (time_moe_a2a_overlap(lo))
        out->ep_fwd = out->ep_bwd = 0.5 * fmax(0.0, a2a_f + a2a_b - (out->moe_fwd + out->moe_bwd));
}

double time_eager_bytes(const ModelSpec *m, const Layout *lo, bool attn_only)
{
    /* torchtitan's Llama block in eager PyTorch (models/llama3/model.py, models/norms.py at 9dec370 and
     * b5bcd76), bytes an element beyond what the fused kernels the model prices move, with 2-byte
     * activations (scaled by the precision's bytes):
     *  RMSNorm: x.float() (2 read + 4 written), pow (4 + 4), mean (4), x * rsqrt (4 + 4), type_as (4 + 2),
     *    * weight (2 + 2) = 36 against a fused norm's 4: 32, twice a layer, on the SP shard;
     *  RoPE on q and k: float (2 + 4), complex mul (4 + 4), type_as (4 + 2) = 20 against 4: 16 each;
     *  SwiGLU: silu (2 + 2) apart from the mul (4 + 2) = 10 against the fused 6: 4 on the FFN. */
    double t = lo->tp, sc = lo->prec == PREC_FP32 ? 2.0 : 1.0;   /* fp32 activations: twice the bytes */
    double b = 2.0 * 32.0 * m->h * layout_sp_share(lo) + 16.0 * (spec_q_width(m) + spec_kv_width(m)) / t;
    if (!attn_only && m->mlp == MLP_SWIGLU)
        b += 4.0 * m->f / t;
    return sc * b;
}

/* Kernels launched once per micro-batch outside the layers (Megatron GPT,
 * eager PyTorch), each costing the host kernel_lat like a layer's:
 * get_batch builds the causal mask, position ids and loss mask and slices
 * tokens and labels (6); embedding forward: word and position lookups, add,
 * dropout (4), backward: dropout and two dense embedding backwards, the tied
 * weight's gradient accumulation (4); final norm and output GEMM forward (2),
 * backward (3); the unfused vocab-parallel cross-entropy: cast to fp32, max,
 * subtract, target masking and gather, exp, sum, log, divide (12), backward:
 * index update, scale, cast (4); loss mask, mean, DP average, loss scale (4). */
enum {
    K_MB_EMBED = 6 + 4 + 4,
    K_MB_HEAD = 2 + 3 + 12 + 4 + 4,
    K_MB_HEAD_FUSED = 2 + 3 + 3 + 4,   /* the fused loss: 2 kernels forward, 1 backward (time_head) */
};

double time_embed(const ModelSpec *m, const HwProfile *hw, const Layout *lo)
{
    double ab = hw_precision_bytes(lo->prec);
    double tok = layout_mb_tokens(m, lo);
    double bytes = ab * tok * m->h;
    /* gather rows forward, scatter-add backward; vocab-parallel all-reduce of the output */
    double t = time_mem_s(hw, 2.0 * bytes) + time_mem_s(hw, 3.0 * bytes);
    /* the embedding backward is a dense V/tp x h gradient: zero-filled, then
     * accumulated into the tied weight's gradient (read two, write one) */
    double V = (double)spec_padded_vocab(m, lo->tp);
    t += time_mem_s(hw, 4.0 * ab * V / lo->tp * m->h);
    /* the embedding's TP collective feeds no GEMM: nothing hides it */
    t += time_coll_allreduce(hw, bytes, lo->tp, time_members_per_node(hw, 1, lo->tp));
    return t + (lo->cuda_graph == CG_FULL_ITERATION ? 0 : K_MB_EMBED) * hw->kernel_lat;
}

double time_head_gemm_s(const ModelSpec *m, const HwProfile *hw, const Layout *lo)
{
    double V = (double)spec_padded_vocab(m, lo->tp);
    return linear_fwd_s(hw, prec_bf16_if_fp8(hw, lo->prec), layout_mb_tokens(m, lo), V / lo->tp, m->h);
}

double time_head(const ModelSpec *m, const HwProfile *hw, const Layout *lo)
{
    double ab = hw_precision_bytes(lo->prec);
    double tok = layout_mb_tokens(m, lo);
    double V = (double)spec_padded_vocab(m, lo->tp);
    /* the output layer: logits T x V/tp x h, forward and both gradients */
    Precision p = prec_bf16_if_fp8(hw, lo->prec);
    double t = time_head_gemm_s(m, hw, lo) + linear_bwd_s(hw, p, tok, V / lo->tp, m->h);
    /* Megatron's vocab-parallel cross-entropy on fp32 logits, one unfused
     * pass per op, bytes per logit: cast (read ab, write 4), max (4),
     * subtract (8), exp (8), sum (4), divide (8); backward: scale (8), cast
     * back (4 + ab). Fused (a stack's ce_fused: Transformer Engine's
     * parallel_cross_entropy, Megatron's --cross-entropy-loss-fusion
     * --cross-entropy-fusion-impl te): the bf16 logits read once for the
     * running max and sum, read again to write the gradient in place, and
     * the backward scales it (read, write): 5 passes of 2 bytes (4 in fp32
     * training), no fp32 copy (the output layer is bf16 under fp8 too). */
    double lb = lo->prec == PREC_FP32 ? 4.0 : 2.0;   /* the logits' dtype */
    double ce = hw->ce_fused ? 5.0 * lb : 4.0 + 4 + 8 + 8 + 4 + 8 + 8 + 4 + 2.0 * ab;
    t += time_mem_s(hw, ce * tok * V / lo->tp);
    if (lo->tp > 1 && lo->sp)  /* gather the sequence-sharded hidden state, scatter its grad */
        t += 2.0 * time_coll_allgather(hw, ab * tok * m->h, lo->tp, time_members_per_node(hw, 1, lo->tp));
    /* the loss is where the schedule meets the host (loss scaling, the
     * backward's start): its kernels' launch time adds to the GPU time */
    double k = lo->cuda_graph == CG_FULL_ITERATION ? 0 : hw->ce_fused ? K_MB_HEAD_FUSED : K_MB_HEAD;
    return t + k * hw->kernel_lat;
}

double time_pp_mb(const ModelSpec *m, const HwProfile *hw, const Layout *lo)
{
    /* DualPipe sends a chunk's activations and gradients while the rank runs
     * its paired forward and backward chunks: "both all-to-all and PP
     * communication can be fully hidden" (DeepSeek-V3 report §3.2.1) */
    if (lo->pp <= 1 || lo->pp_sched == PP_SCHED_DUALPIPE)
        return 0;
    /* scatter-gather (or SP) sends 1/tp of the activation per GPU. Without
     * SP the receiver needs the whole activation: it all-gathers the tp
     * pieces over NVLink (Megatron's gather_split_1d_tensor, DeepSpeed's
     * partitioned activations), a TP collective SP does not have since its
     * layers take the sequence-sharded tensor as it comes */
    double bytes = memory_pp_msg_bytes(m, lo);
    bool cross = (long long)lo->tp * lo->cp * lo->dp >= hw->gpus_per_node;
    double gather = !lo->sp && lo->tp > 1
                        ? time_coll_allgather(hw, bytes * lo->tp, lo->tp, time_members_per_node(hw, 1, lo->tp))
                        : 0.0;
    /* transfers a stage waits on per micro-batch: Megatron pairs each send
     * with the receive of the other direction in one batched call (activation
     * out with gradient in, gradient out with activation in), two transfer
     * times on full-duplex links; DeepSpeed's pipeline engine issues the four
     * as separate blocking calls, one after another (pp_p2p_serial) */
    double calls = hw->pp_p2p_serial ? 4.0 : 2.0;
    return lo->vp * (calls * time_p2p(hw, bytes, cross) * (1.0 - hw->pp_overlap) + 2.0 * gather);
}

double time_stage_mb(const ModelSpec *m, const HwProfile *hw, const Layout *lo, const LayerTime *lt,
                     int stage, int n, int f, int e)
{
    double t;
    if (!spec_is_moe(m)) {
        t = n * (lt->fwd + lt->bwd + lt->tp_fwd + lt->tp_bwd + lt->cp) + f * (lt->rc_full + lt->tp_rc) + e * lt->rc_sel +
            (n - f) * lt->rc_mod;
    } else {
        int c[2][RECOMPUTE_COUNT];
        memory_stage_layer_mix(m, lo, stage, n, f, e, c);
        int nd = memory_mix_kind(c, 0), nm = memory_mix_kind(c, 1);
        t = nd * (lt->fwd + lt->bwd + lt->tp_fwd + lt->tp_bwd + lt->cp) + c[0][RECOMPUTE_FULL] * (lt->rc_full + lt->tp_rc) +
            c[0][RECOMPUTE_SELECTIVE] * lt->rc_sel;
        t += nm * time_moe_layer_s(lt) + c[1][RECOMPUTE_FULL] * (lt->moe_rc_full + lt->moe_tp_rc + lt->ep_rc) +
             c[1][RECOMPUTE_SELECTIVE] * lt->moe_rc_sel;
        t += (nd - c[0][RECOMPUTE_FULL]) * lt->rc_mod + (nm - c[1][RECOMPUTE_FULL]) * lt->moe_rc_mod;
    }
    if (stage == 0)
        t += time_embed(m, hw, lo);
    if (stage == lo->pp - 1)
        t += time_head(m, hw, lo);
    if (stage == layout_mtp_stage(lo)) {
        if (m->mtp_layers > 0)   /* each MTP module: its layer, its 2h x h projection, a second head and loss */
            t += m->mtp_layers * ((spec_layer_is_moe(m, m->L)
                                       ? time_moe_layer_s(lt) + lt->moe_rc_mod
                                       : lt->fwd + lt->bwd + lt->tp_fwd + lt->tp_bwd + lt->cp + lt->rc_mod) +
                                  3.0 * gemm_s(hw, lo->prec, 2.0 * 2.0 * m->h * m->h / lo->tp * layout_mb_tokens(m, lo)) +
                                  time_head(m, hw, lo));
    }
    return t + time_pp_mb(m, hw, lo);
}

void time_stage_fw(const ModelSpec *m, const HwProfile *hw, const Layout *lo, const LayerTime *lt, int stage,
                   double *fwd, double *wgrad)
{
    int n = lo->layers[stage], c[2][RECOMPUTE_COUNT];
    memory_stage_layer_mix(m, lo, stage, n, lo->full_rc[stage], lo->sel_rc[stage], c);
    int nd = memory_mix_kind(c, 0), nm = memory_mix_kind(c, 1);
    double f = nd * (lt->fwd + lt->tp_fwd) + nm * (lt->moe_fwd + lt->moe_tp_fwd + lt->ep_fwd);
    double w = nd * lt->wgrad + nm * lt->moe_wgrad;
    double head = time_head_gemm_s(m, hw, lo);
    if (stage == lo->pp - 1)
        f += head, w += head;
    if (stage == layout_mtp_stage(lo) && m->mtp_layers > 0) {
        bool moe = spec_layer_is_moe(m, m->L);
        f += m->mtp_layers * ((moe ? lt->moe_fwd + lt->moe_tp_fwd + lt->ep_fwd : lt->fwd + lt->tp_fwd) + head);
        w += m->mtp_layers * ((moe ? lt->moe_wgrad : lt->wgrad) + head);
    }
    *fwd = f;
    *wgrad = w;
}

static const char *const coll_names[] = {"all-reduce", "reduce-scatter", "all-gather", "send/recv"};
_Static_assert(sizeof coll_names / sizeof *coll_names == COLL_COUNT, "one name per CollKind");

const char *time_coll_name(CollKind k) { return k >= 0 && k < COLL_COUNT ? coll_names[k] : "?"; }
