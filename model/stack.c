/* stack.c — a software stack applied to a hardware profile (see stack.h). */
#include "stack.h"

#include <math.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

void stack_default(Stack *st)
{
    memset(st, 0, sizeof *st);
    snprintf(st->name, sizeof st->name, "megatron-lm");
    st->gemm_scale = st->mem_scale = st->attn_scale = 1;
    st->attn_kernel = ATTN_KERNEL_PROFILE;
    st->kernel_lat_scale = 1;
    st->tp_overlap = st->dp_overlap = st->pp_overlap = -1;
    st->ce_fused = -1;
    st->cp_comm = -1;
    st->sel_ac = -1;
}

static const char *const kernel_names[ATTN_KERNEL_COUNT] = {"profile", "fa1", "fa2", "fa3", "cudnn"};

const char *stack_attn_kernel_name(AttnKernel k)
{
    return k >= 0 && k < ATTN_KERNEL_COUNT ? kernel_names[k] : "?";
}

int stack_parse_attn_kernel(const char *s, AttnKernel *out)
{
    for (int k = 0; k < ATTN_KERNEL_COUNT; k++)
        if (!strcasecmp(s, kernel_names[k])) {
            *out = (AttnKernel)k;
            return 0;
        }
    return -1;
}

/* Ratios of an attention kernel's forward+backward rate to the kernel the
 * profile's attn_eff curve describes: FA2 on A100 (a100-80g, 0.60-0.65 of
 * peak) and cuDNN's fused attention from Hopper on (h100-sxm is fitted on
 * NeMo, where Transformer Engine picks cuDNN on sm90).
 *  - A100: FlashAttention 25-40 %, FlashAttention-2 50-73 % of peak (Dao
 *    2023, arXiv:2307.08691, abstract): FA1 / FA2 = 32.5 / 61.5 = 0.53.
 *    LLM Foundry's "triton" kernel (the FA1 algorithm in pre-MLIR Triton)
 *    is of this class: FA2 is 1.3-2.5x faster than it (same paper, §4.1).
 *  - H100: the FlashAttention-3 paper (Shah et al. 2024, arXiv:2407.08608,
 *    H100 SXM5, head dim 128, 16K tokens) has FA2 / cuDNN / FA3 at
 *    335 / 539 / 616 TFLOP/s forward causal, 370 / 595 / 648 forward
 *    non-causal and 322 / 516 / 561 backward: FA2 runs at 0.62 of cuDNN
 *    both ways, FA3 at 1.09-1.14 (1.10 weighting the backward's 2.5x
 *    FLOPs). FA1-class kernels stay at 0.53 of FA2: neither they nor FA2
 *    use Hopper's wgmma/TMA, so both meet the same instruction ceiling. */
#define FA1_OVER_FA2 0.53
#define FA2_OVER_CUDNN_HOPPER 0.62
#define FA3_OVER_CUDNN_HOPPER 1.10

double stack_attn_ratio(AttnKernel k, const HwProfile *hw)
{
    bool hopper = hw->peak[PREC_FP8] > 0;   // fp8 tensor cores came with Hopper, as did FA3's wgmma/TMA
    double fa2 = hopper ? FA2_OVER_CUDNN_HOPPER : 1.0;
    switch (k) {
    case ATTN_KERNEL_FA1: return FA1_OVER_FA2 * fa2;
    case ATTN_KERNEL_FA2: return fa2;
    case ATTN_KERNEL_FA3: return hopper ? FA3_OVER_CUDNN_HOPPER : fa2;   // FA3 needs Hopper: FA2 runs instead
    case ATTN_KERNEL_CUDNN:
    case ATTN_KERNEL_PROFILE:
    default: return 1.0;
    }
}

/* Multiply a curve's efficiencies by f, capped at 1; an empty curve (which
 * reads as 1) becomes one point at f. */
static void scale_curve(EffCurve *c, double f)
{
    if (f == 1)
        return;
    if (c->n == 0) {
        c->n = 1;
        c->pt[0].size = 1;
        c->pt[0].eff = fmin(1.0, f);
        return;
    }
    for (int i = 0; i < c->n; i++)
        c->pt[i].eff = fmin(1.0, c->pt[i].eff * f);
}

void stack_apply(HwProfile *hw, const Stack *st)
{
    scale_curve(&hw->gemm_eff, st->gemm_scale);
    scale_curve(&hw->mem_eff, st->mem_scale);
    scale_curve(&hw->attn_eff, st->attn_scale * stack_attn_ratio(st->attn_kernel, hw));
    hw->kernel_lat *= st->kernel_lat_scale;
    stack_apply_settings(hw, st);
}

void stack_apply_settings(HwProfile *hw, const Stack *st)
{
    if (st->tp_overlap >= 0)
        hw->tp_overlap = st->tp_overlap;
    if (st->dp_overlap >= 0)
        hw->dp_overlap = st->dp_overlap;
    if (st->pp_overlap >= 0)
        hw->pp_overlap = st->pp_overlap;
    if (st->ce_fused >= 0)
        hw->ce_fused = st->ce_fused > 0;
    if (st->zero3_gathers_per_layer > 0)
        hw->zero3_gathers_per_layer = st->zero3_gathers_per_layer;
    if (st->zero3_flat_ring)
        hw->zero3_flat_ring = true;
    if (st->zero3_prefetch_params > 0)
        hw->zero3_prefetch_params = st->zero3_prefetch_params;
    if (st->zero3_max_live_params > 0)
        hw->zero3_max_live_params = st->zero3_max_live_params;
    if (st->zero3_reduce_bucket_params > 0)
        hw->zero3_reduce_bucket_params = st->zero3_reduce_bucket_params;
    if (st->zero3_call_s > 0)
        hw->zero3_call_s = st->zero3_call_s;
    if (st->zero3_rank_s > 0)
        hw->zero3_rank_s = st->zero3_rank_s;
    if (st->zero3_fp32_shard)
        hw->zero3_fp32_shard = true;
    if (st->pp_p2p_serial)
        hw->pp_p2p_serial = true;
    if (st->zero2_pp)
        hw->zero2_pp = true;
    if (st->rc_early_stop)
        hw->rc_early_stop = true;
    if (st->eager_elementwise)
        hw->eager_elementwise = true;
    if (st->ce_upcast)
        hw->ce_upcast = true;
    if (st->compile_loss)
        hw->compile_loss = true;
    if (st->cp_pytorch)
        hw->cp_pytorch = true;
    if (st->sdpa_repeat_kv)
        hw->sdpa_repeat_kv = true;
}
