/* memory.c — bytes per GPU of each pipeline stage (docs/COSTMODEL.md §3).
 *
 * Activations follow Korthikanti et al. 2022 term by term (§4.1 of the
 * paper), generalised to GQA, SwiGLU, no-dropout models, flash attention
 * and context parallelism; model states follow the ZeRO paper and
 * Megatron's distributed-optimizer table. What the sources leave out and
 * we count: the recompute working set, PP send/recv buffers, NCCL buffers,
 * the CUDA context and allocator fragmentation (constants in the profile).
 *
 * Mixture of experts (§3.4): every layer's kind (dense or MoE) comes from
 * where the stage's layers lie in the model (memory_stage_layer_mix), the
 * routed experts' states shard over edp, not dp·cp, and MoE activations are
 * sized for the routed rows at the layout's moe_imbalance (or the padded
 * capacity). Recomputation modes are the three of a dense layer (full keeps
 * the input, selective drops the attention core); Megatron's finer
 * --recompute-modules (layernorm, mla_up_proj, mlp, moe_act,
 * shared_experts) drop what each module's checkpoint would have saved, in
 * every layer not fully recomputed (rc_module_saved). MTP modules live on
 * the last stage.
 */
#include "memory.h"

#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "timing.h"

double memory_weight_bytes(const Layout *lo) { return hw_precision_bytes(lo->prec); }

double memory_grad_bytes(const Layout *lo) { return lo->grad_fp32 ? 4.0 : memory_weight_bytes(lo); }

/* Adam's states per parameter: the fp32 master (none in an fp32 run: the
 * weights are it) and the two moments, fp32 unless the precision-aware
 * optimizer keeps them lower (--exp-avg-dtype, --exp-avg-sq-dtype; fp8
 * moments are 1 byte, their per-tensor scales negligible). That optimizer
 * also stores the master in 2 bytes where Transformer Engine's FusedAdam
 * keeps it (Megatron-core's store_param_remainders, default on since TE
 * 2.1: the low 16 bits of the fp32 master beside the bf16 parameter, its
 * high 16): bf16 parameters, with no fp8 or with delayed scaling, which
 * FusedAdam casts itself (use_precision_aware_optimizer_no_fp8_or_ds_fp8).
 * Other fp8 recipes and fp8 or fp16 parameters keep Megatron's fp32 main
 * copy. */
static double moment_bytes(Precision p) { return p == PREC_FP32 ? 4.0 : p == PREC_FP8 ? 1.0 : 2.0; }

static double master_bytes(const Layout *lo)
{
    if (!lo->precision_aware_opt)   /* Megatron's own distributed optimizer: an fp32 main copy */
        return 4.0;
    bool te_master = lo->prec == PREC_BF16 ||
                     (lo->prec == PREC_FP8 && lo->fp8_recipe == FP8R_DELAYED && !lo->fp8_param_gather);
    return te_master ? 2.0 : 4.0;
}

double memory_optim_bytes(const Layout *lo)
{
    if (lo->prec == PREC_FP32)
        return 8.0;
    return master_bytes(lo) + moment_bytes(lo->exp_avg_dtype) + moment_bytes(lo->exp_avg_sq_dtype);
}

static void state_bytes(const Layout *lo, double D, double *w, double *g, double *o)
{
    bool shard_o = lo->opt != OPT_ZERO0;                              // ZeRO-1, 2, 3, dist-opt
    bool shard_g = lo->opt == OPT_ZERO2 || lo->opt == OPT_ZERO3;
    bool shard_w = lo->opt == OPT_ZERO3;
    *w = memory_weight_bytes(lo) / (shard_w ? D : 1.0);
    *g = memory_grad_bytes(lo) / (shard_g ? D : 1.0);
    *o = memory_optim_bytes(lo) / (shard_o ? D : 1.0);
}

void memory_state_bytes(const Layout *lo, double *w, double *g, double *o) { state_bytes(lo, layout_dp_group(lo), w, g, o); }

/* PyTorch FSDP (FULL_SHARD, FSDP2's fully_shard) under a mixed-precision
 * policy keeps each rank's shard of the parameters in their own fp32 and
 * casts to the 16-bit param_dtype only in the all-gather (FSDP1's
 * low-precision shard is freed after it); that shard is what the optimizer
 * steps, so there is no separate master, and the sharded gradient is cast
 * to the parameter's fp32 after the reduce-scatter whatever reduce_dtype
 * was. A stack that says so (HwProfile.zero3_fp32_shard) under ZeRO-3 keeps
 * 4 + 4 + the moments a parameter, over the shard group, not 2 + g + 12. */
static bool fsdp_fp32_shard(const HwProfile *hw, const Layout *lo)
{
    return hw && hw->zero3_fp32_shard && lo->opt == OPT_ZERO3 && lo->prec != PREC_FP32;
}

static void stack_state_bytes(const HwProfile *hw, const Layout *lo, double D, double *w, double *g, double *o)
{
    state_bytes(lo, D, w, g, o);
    if (fsdp_fp32_shard(hw, lo)) {
        *w = 4.0 / D;
        *g = 4.0 / D;
        *o = (memory_optim_bytes(lo) - 4.0) / D;
    }
}

double memory_state_bytes_per_param(const HwProfile *hw, const Layout *lo)
{
    double w, g, o;
    stack_state_bytes(hw, lo, 1.0, &w, &g, &o);
    return w + g + o;
}

void memory_expert_state_bytes(const Layout *lo, double *w, double *g, double *o)
{
    int edp = layout_edp(lo);
    state_bytes(lo, edp > 0 ? edp : 1, w, g, o);
}

/* MLA (Megatron's MLASelfAttention): the down projections are replicated
 * over tp and their outputs, the compressed q (q_lora_rank) and kv
 * (kv_lora_rank) with the shared RoPE key (qk_rope_dim), are saved with
 * their normed copies (the up projections' inputs); the decompressed Q, K,
 * V are the q/kv widths memory_layer_acts counts already. 0 for MHA. */
static double mla_acts(const ModelSpec *m, const Layout *lo)
{
    if (m->attn != ATTN_MLA)
        return 0;
    double ab = hw_precision_bytes(lo->prec), tok = layout_mb_tokens(m, lo);
    return 2.0 * ab * tok * ((double)m->q_lora_rank + m->kv_lora_rank + m->qk_rope_dim);
}

/* What --recompute-modules frees in a layer not fully recomputed: the
 * tensors inside each checkpointed module (its input stays: it is the
 * checkpoint). layernorm: the two norms' outputs (the QKV and FC1 inputs);
 * mla_up_proj: Q, K, V and the normed compressed q and kv the up
 * projections read; mlp (dense layers): the MLP intermediates. The MoE
 * modules are memory_moe_layer_acts'. */
static double rc_module_saved(const ModelSpec *m, const Layout *lo, double mlp_bytes)
{
    int rcm = layout_rc_modules(lo);
    if (!rcm)
        return 0;
    double ab = hw_precision_bytes(lo->prec), tok = layout_mb_tokens(m, lo), t = lo->tp;
    double saved = 0;
    if (rcm & RCM_LAYERNORM)
        saved += 2.0 * ab * tok * m->h * layout_sp_share(lo);
    if ((rcm & RCM_MLA_UP_PROJ) && m->attn == ATTN_MLA)
        saved += ab * tok * ((spec_q_width(m) + 2.0 * spec_kv_width(m)) / t + (double)m->q_lora_rank + m->kv_lora_rank);
    if (rcm & RCM_MLP)
        saved += mlp_bytes;
    return saved;
}

bool memory_executor_accounting(const Layout *lo)
{
    return lo->target == TARGET_ULTRAPLAN || lo->target == TARGET_ULTRAPLAN_CUDA;
}

/* fp8: what a layer not fully recomputed keeps of its linear layers' inputs
 * beyond the 16-bit tensors memory_layer_acts counts (COSTMODEL.md §3.2).
 * ultraplan's executors (te false) keep a transposed fp8 copy (1 byte an
 * element) of each input beside the 16-bit one, for the weight gradient:
 * QKV and FC1 read the gathered micro-batch (h wide), the projection and
 * FC2 their tp shards. Transformer Engine (te) saves the quantized input in
 * place of the 16-bit one (Linear / LayerNormLinear forward: the fp8
 * tensor, columnwise only where no gather is needed, the sequence shard
 * under SP, gathered again for the weight gradient): the QKV and FC1 inputs
 * (the norms' outputs) and the FC2 input (the activation's output) are kept
 * in 1 byte, not ab, unless --recompute-modules layernorm / mlp freed the
 * 16-bit tensor already (then only the fp8 one is left, or nothing of a
 * recomputed MLP); the projection's input stays in 16 bits, which the
 * attention core keeps for its backward, and adds its fp8 copy. */
static double fp8_input_bytes(const ModelSpec *m, const Layout *lo, bool te)
{
    double tok = layout_mb_tokens(m, lo), t = lo->tp, h = m->h, q = spec_q_width(m) / t, f = (double)m->f / t;
    if (!te)
        return tok * (2.0 * h + q + f);
    double ab = hw_precision_bytes(lo->prec), rep = layout_sp_share(lo);
    int rcm = layout_rc_modules(lo);
    double norm_in = (rcm & RCM_LAYERNORM) ? 1.0 : 1.0 - ab;   /* per element of each norm's output */
    double fc2_in = (rcm & RCM_MLP) ? 0.0 : 1.0 - ab;
    return tok * (2.0 * norm_in * h * rep + q + fc2_in * f);
}

/* fp8_input_bytes(te) for an MoE layer (COSTMODEL.md §3.2). ultraplan's
 * executors carve the same four transposed copies in every layer, dense or
 * MoE (executor/cuda/cuexec.c carve_layer), so fp8_input_bytes(false)
 * serves them too. Transformer Engine under Megatron-core:
 *  - attention as in a dense layer: the QKV norm's output (a fused
 *    LayerNormLinear) in 1 byte, the projection's fp8 copy beside its
 *    16-bit input;
 *  - the pre-MLP norm is a plain TENorm writing 16 bits, which the router
 *    keeps for its weight gradient: no fp8 term;
 *  - the experts (GroupedLinear): FC1 keeps each expert's quantized input in
 *    place of the dispatched 16-bit rows, FC2 the quantized activation in
 *    place of the 16-bit one. Under --recompute-modules moe_act Megatron
 *    sets save_original_input on FC2 (moe/experts.py), whose 16-bit input
 *    the checkpoint discards: nothing of FC2's input is left;
 *  - the shared expert (TE Linear on the norm's output): FC1 adds its fp8
 *    copy of the sequence shard, FC2 keeps its input in 1 byte; nothing
 *    when --recompute-modules shared_experts checkpoints it whole. */
static double moe_fp8_input_bytes(const ModelSpec *m, const Layout *lo)
{
    double tok = layout_mb_tokens(m, lo), t = lo->tp, h = m->h, q = spec_q_width(m) / t;
    double ab = hw_precision_bytes(lo->prec), rep = layout_sp_share(lo);
    double ef = (m->moe_ffn > 0 ? m->moe_ffn : m->f) / (double)layout_etp(lo), rows = layout_moe_rows(m, lo);
    int rcm = layout_rc_modules(lo);
    double norm_in = (rcm & RCM_LAYERNORM) ? 1.0 : 1.0 - ab;
    double bytes = tok * (norm_in * h * rep + q) + (1.0 - ab) * rows * h;
    if (!(rcm & RCM_MOE_ACT))
        bytes += (1.0 - ab) * rows * ef;
    if (m->shared_ffn > 0 && !(rcm & RCM_SHARED_EXPERTS))
        bytes += tok * (h * rep + (1.0 - ab) * m->shared_ffn / t);
    return bytes;
}

/* DeepSeek-V3's low-precision storage (DeepSeek-V3 report §3.3.4, a
 * stack's act_fp8_cache): under fp8 training its framework caches each
 * Linear's input in fp8 for the backward, and two tensors in forms of their
 * own: the input of the Linear after the attention in E5M6 (12 bits), which
 * the attention's backward reads too, so it replaces both the 16-bit tensor
 * and the fp8 copy Transformer Engine keeps (memory_layer_acts,
 * fp8_input_bytes); and the SwiGLU's input in the MoE layers (the experts'
 * FC1 outputs, routed and shared) in fp8, its output recomputed in the
 * backward (what --recompute-modules moe_act frees, which the run's
 * recompute_modules names). Bytes saved against Transformer Engine's
 * storage in one layer not fully recomputed, in two parts below; the
 * ultraplan executors keep their own layout (0). */
static bool act_cache(const Layout *lo)
{
    return lo->act_fp8_cache && lo->prec == PREC_FP8 && !memory_executor_accounting(lo);
}

/* The attention output's share, every layer: counted at the query width in
 * 16 bits and in fp8, kept once in 12 bits at its own width (MLA's heads x
 * v_head_dim) */
static double attn_cache_saved(const ModelSpec *m, const Layout *lo)
{
    if (!act_cache(lo))
        return 0;
    double ab = hw_precision_bytes(lo->prec), tok = layout_mb_tokens(m, lo);
    double out = m->attn == ATTN_MLA ? (double)m->a * m->v_head_dim : (double)spec_q_width(m);
    return tok * ((ab + 1.0) * spec_q_width(m) - 1.5 * out) / lo->tp;
}

/* The MoE SwiGLU's inputs, routed and shared, in 1 byte, not ab */
static double moe_cache_saved(const ModelSpec *m, const Layout *lo)
{
    if (!act_cache(lo) || !spec_is_moe(m))
        return 0;
    double ab = hw_precision_bytes(lo->prec), tok = layout_mb_tokens(m, lo);
    double up = m->mlp == MLP_SWIGLU ? 2.0 : 1.0;   /* FC1's output width over the FFN's */
    double ef = (m->moe_ffn > 0 ? m->moe_ffn : m->f) / (double)layout_etp(lo);
    double saved = (ab - 1.0) * layout_moe_rows(m, lo) * up * ef;
    if (m->shared_ffn > 0 && !(layout_rc_modules(lo) & RCM_SHARED_EXPERTS))
        saved += (ab - 1.0) * tok * up * m->shared_ffn / lo->tp;
    return saved;
}

double memory_layer_acts(const ModelSpec *m, const Layout *lo, Recompute r)
{
    double ab = hw_precision_bytes(lo->prec);
    double t = lo->tp, h = m->h;
    double sbh = layout_mb_tokens(m, lo) * h;
    double rep = layout_sp_share(lo);          // non-TP-parallel parts, sharded by SP
    double mask = m->dropout ? 1.0 : 0.0;      // 1-byte dropout masks

    if (r == RECOMPUTE_FULL)
        return ab * sbh * rep;                 // only the layer input is kept
    if (r == RECOMPUTE_SELECTIVE && layout_sel_op(m, lo)) {
        /* torchtitan's per-op policy (SelectiveAC): the checkpoint's input,
         * the outputs of the GEMMs it saves (time_sel_op_saved_width), the
         * attention's output with its fp32 log-sum-exp, and under SP the
         * two reduce-scatters' outputs; everything else is run again */
        double tok = layout_mb_tokens(m, lo);
        double rs = lo->tp > 1 && lo->sp ? 2.0 * h * rep : 0.0;
        return ab * tok * (h * rep + time_sel_op_saved_width(m, lo) + spec_q_width(m) / t + rs) +
               4.0 * m->a * tok / t;
    }

    double q = spec_q_width(m) / h, kv = spec_kv_width(m) / h, f = (double)m->f / h;
    /* norm inputs (2), QKV input, FC1 input; attention and MLP dropout masks */
    double nontp = 4.0 * ab + 2.0 * mask;
    /* Q, K, V, attention output (projection input); MLP intermediates */
    /* GELU keeps its input and output (FC2 input); a fused SwiGLU keeps the
     * FC1 output [gate | up] and the product, not the SiLU output (Megatron's
     * bias_swiglu saves only its input) */
    double mlp = m->mlp == MLP_SWIGLU ? 3.0 * ab * f : 2.0 * ab * f;
    double tpart = ab * (2.0 * q + 2.0 * kv) + mlp;
    double bytes = sbh * (nontp * rep + tpart / t);
    bytes += mla_acts(m, lo);
    bytes -= rc_module_saved(m, lo, sbh * mlp / t);

    if (lo->prec == PREC_FP8)
        bytes += fp8_input_bytes(m, lo, !memory_executor_accounting(lo)) - attn_cache_saved(m, lo);

    double a = m->a;
    if (lo->flash) {
        bytes += 4.0 * a * layout_mb_tokens(m, lo) / t;   // fp32 log-sum-exp per row
    } else if (r == RECOMPUTE_NONE) {
        /* softmax output, dropout mask and dropout output: 5 a s^2 b with
         * dropout; with CP each rank scores its s/cp queries against s keys */
        /* the unfused fp32 fallback (time_softmax_fused) keeps its fp32 output */
        double sm = time_softmax_fused(m, lo) ? ab : 4.0;
        bytes += (sm + (m->dropout ? mask + ab : 0.0)) * a * layout_mb_tokens(m, lo) * (double)m->s / t;
    }
    return bytes;
}

double memory_moe_layer_acts(const ModelSpec *m, const Layout *lo, Recompute r)
{
    if (!spec_is_moe(m))
        return memory_layer_acts(m, lo, r);
    if (r == RECOMPUTE_FULL)
        return memory_layer_acts(m, lo, r);   /* only the layer input is kept */
    double ab = hw_precision_bytes(lo->prec), t = lo->tp;
    double tok = layout_mb_tokens(m, lo), rep = layout_sp_share(lo);
    double act = m->mlp == MLP_SWIGLU ? 3.0 : 2.0;
    /* the dense layer less its MLP intermediates (the second norm's output,
     * the router's and the experts' input, stays: memory_layer_acts' FC1 input) */
    int rcm = layout_rc_modules(lo);   /* with mlp among the modules memory_layer_acts took them off already */
    double bytes = memory_layer_acts(m, lo, r) - ((rcm & RCM_MLP) ? 0.0 : act * ab * tok * m->f / t);
    /* fp8: memory_layer_acts counted a dense layer's linear inputs; an MoE layer's differ */
    if (lo->prec == PREC_FP8 && !memory_executor_accounting(lo))
        bytes += moe_fp8_input_bytes(m, lo) - fp8_input_bytes(m, lo, true);
    double ef = m->moe_ffn > 0 ? m->moe_ffn : m->f, rows = layout_moe_rows(m, lo);
    bytes += 4.0 * tok * rep * m->experts;                    /* router probabilities, fp32 */
    bytes += ab * rows * m->h                                 /* dispatched expert input */
           + act * ab * rows * ef / layout_etp(lo);           /* FC1 output and activation */
    if (memory_executor_accounting(lo))
        bytes += ab * rows * m->h;                            /* expert output, for the combine's weights */
    else
        bytes += 4.0 * rows;                                  /* the weighted activation's fp32 weights */
    if (m->shared_ffn > 0 && !(rcm & RCM_SHARED_EXPERTS))
        bytes += act * ab * tok * m->shared_ffn / t;          /* the shared expert, as a dense MLP */
    if (rcm & RCM_MOE_ACT)                                    /* moe_act: the activation's output */
        bytes -= ab * rows * ef / layout_etp(lo);
    return bytes - moe_cache_saved(m, lo);   /* memory_layer_acts took the attention's share */
}

double memory_inflight(const Layout *lo, int stage)
{
    int mb = layout_microbatches(lo), p = lo->pp, v = lo->vp;
    if (v <= 1)
        return fmin(mb, p - stage);
    /* Megatron's interleaved warm-up: 2(p - s - 1) + (v - 1) p chunks, +1 in steady state */
    double chunks = fmin((double)mb * v, 2.0 * (p - stage - 1) + (double)(v - 1) * p + 1);
    return chunks / v;
}

static double mlp_matrix(const ModelSpec *m, double f) { return (m->mlp == MLP_SWIGLU ? 3.0 : 2.0) * m->h * f; }

/* biases of an MLP of hidden f on one of `t` ranks: FC1's (column-parallel) shard, FC2's replicated */
static double mlp_bias(const ModelSpec *m, double f, double t)
{
    return m->bias ? (m->mlp == MLP_SWIGLU ? 2.0 : 1.0) * f / t + m->h : 0.0;
}

/* The attention's weight matrices of one layer on one of tp ranks: MLA's
 * down-projections (q_a, kv_a) are replicated over tp, as in Megatron-LM;
 * the rest is split */
static double attn_matrix_params(const ModelSpec *m, const Layout *lo)
{
    double h = m->h, attn = (double)spec_layer_matrix_params(m) - mlp_matrix(m, m->f);
    double rep = m->attn == ATTN_MLA
                     ? h * ((m->q_lora_rank > 0 ? m->q_lora_rank : 0) + (double)m->kv_lora_rank + m->qk_rope_dim)
                     : 0.0;
    return (attn - rep) / lo->tp + rep;
}

double memory_layer_params(const ModelSpec *m, const Layout *lo, bool moe, double *expert)
{
    double t = lo->tp, h = m->h;
    double n = attn_matrix_params(m, lo) + (double)spec_layer_norm_params(m);
    if (m->bias)   /* column-parallel QKV biases shard; the projection's replicates */
        n += (spec_q_width(m) + 2.0 * spec_kv_width(m)) / t + h;
    n += (double)spec_sink_params(m) / t;   /* attention sinks: one a head, split with the heads */
    double ex = 0;
    if (moe && spec_is_moe(m)) {
        double ef = m->moe_ffn > 0 ? m->moe_ffn : m->f, etp = layout_etp(lo);
        n += (double)spec_router_params(m);   /* replicated over tp */
        if (m->shared_ffn > 0)
            n += mlp_matrix(m, m->shared_ffn) / t + mlp_bias(m, m->shared_ffn, t);
        ex = (double)(m->experts / (lo->ep > 0 ? lo->ep : 1)) * (mlp_matrix(m, ef) / etp + mlp_bias(m, ef, etp));
    } else {
        n += mlp_matrix(m, m->f) / t + mlp_bias(m, m->f, t);
    }
    if (expert)
        *expert = ex;
    return n + ex;
}

void memory_stage_layer_mix(const ModelSpec *m, const Layout *lo, int s, int n, int f, int e,
                            int cnt[2][RECOMPUTE_COUNT])
{
    int first = 0;
    if (lo->vp <= 1)
        for (int k = 0; k < s && k < LAYOUT_MAX_PP; k++)
            first += lo->layers[k];
    memory_layer_mix_from(m, lo, s, first, n, f, e, cnt);
}

void memory_layer_mix_from(const ModelSpec *m, const Layout *lo, int s, int first, int n, int f, int e,
                           int cnt[2][RECOMPUTE_COUNT])
{
    memset(cnt, 0, sizeof(int) * 2 * RECOMPUTE_COUNT);
    int v = lo->vp > 1 ? lo->vp : 1;
    for (int c = 0; c < v; c++) {
        int cl = n / v + (c < n % v);
        int full = f / v + (c < f % v), sel = e / v + (c < e % v);
        int start = v == 1 ? first : (c * lo->pp + s) * (m->L / (lo->pp * v));
        for (int j = 0; j < cl; j++) {
            int kind = spec_layer_is_moe(m, start + j) ? 1 : 0;
            Recompute r = j < full ? RECOMPUTE_FULL : j < full + sel ? RECOMPUTE_SELECTIVE : RECOMPUTE_NONE;
            cnt[kind][r]++;
        }
    }
}

/* MTP modules' parameters on one GPU of the last stage: per module its
 * transformer layer, the projection of [norm(h); norm(emb)] (2h x h,
 * column-parallel) and its three norms; embedding and head are shared. */
static double mtp_params(const ModelSpec *m, const Layout *lo, double *expert)
{
    double ex = 0, layer = 0;
    if (m->mtp_layers > 0)
        layer = memory_layer_params(m, lo, spec_layer_is_moe(m, m->L), &ex);
    if (expert)
        *expert = m->mtp_layers * ex;
    return m->mtp_layers * (layer + 2.0 * m->h * m->h / lo->tp + 3.0 * (double)spec_norm_params(m));
}

double memory_stage_params_split(const ModelSpec *m, const Layout *lo, int stage, int layers, double *expert)
{
    double t = lo->tp, h = m->h;
    double V = (double)spec_padded_vocab(m, lo->tp);
    int cnt[2][RECOMPUTE_COUNT];
    memory_stage_layer_mix(m, lo, stage, layers, 0, 0, cnt);
    double ex_moe = 0;
    double n = cnt[0][RECOMPUTE_NONE] * memory_layer_params(m, lo, false, NULL);
    if (cnt[1][RECOMPUTE_NONE])
        n += cnt[1][RECOMPUTE_NONE] * memory_layer_params(m, lo, true, &ex_moe);
    double ex = cnt[1][RECOMPUTE_NONE] * ex_moe;
    if (stage == 0) {
        n += V * h / t;
        if (m->pos == POS_LEARNED)
            n += (double)m->s * h;
    }
    if (stage == lo->pp - 1) {
        n += (double)spec_norm_params(m);
        /* untied head, or Megatron's copy of a tied embedding on the last stage */
        if (!m->tied || lo->pp > 1)
            n += V * h / t;
    }
    if (stage == layout_mtp_stage(lo)) {   /* the last stage, or where --pipeline-layout puts 'm' */
        /* MTP needs the embedding where it runs: an untied model keeps a copy there (Megatron-LM),
         * unless DualPipe puts that stage on the embedding's rank (its mirror is stage 0), which
         * shares the one copy "physically" (DeepSeek-V3 report §3.2.3) */
        bool shared = lo->pp_sched == PP_SCHED_DUALPIPE && layout_pp_mirror(lo, stage) == 0;
        if (m->mtp_layers > 0 && !m->tied && lo->pp > 1 && !shared)
            n += V * h / t;
        double mex = 0;
        n += mtp_params(m, lo, &mex);
        ex += mex;
    }
    if (expert)
        *expert = ex;
    return n;
}

double memory_stage_params(const ModelSpec *m, const Layout *lo, int stage, int layers)
{
    return memory_stage_params_split(m, lo, stage, layers, NULL);
}

double memory_pp_msg_bytes(const ModelSpec *m, const Layout *lo)
{
    return hw_precision_bytes(lo->prec) * layout_mb_tokens(m, lo) * m->h / lo->tp;
}

/* logit_b: bytes per logit the loss keeps, 4 (the unfused loss' fp32 copy)
 * or 2 (a fused loss reads the bf16 logits in place, HwProfile.ce_fused),
 * or at the loss of PyTorch's cross_entropy over logits.float() run eager
 * (HwProfile.ce_upcast, not compile_loss under --torch-compile) the logits,
 * their fp32 copy and the fp32 log-softmax it saves: ab + 4 + 4
 * (logit_bytes) */
static double logit_bytes(const HwProfile *hw, const Layout *lo)
{
    /* torchtitan's eager loss: the model's logits (fp32 already: no copy), the copy, the log-softmax.
     * Compiled (a stack's compile_loss under --torch-compile), Inductor fuses the upcast into the
     * softmax and keeps the logits for the backward: what Megatron's unfused loss keeps, 4 below */
    if (hw && hw->ce_upcast && !(hw->compile_loss && lo->torch_compile))
        return lo->prec == PREC_FP32 ? 8.0 : hw_precision_bytes(lo->prec) + 4.0 + 4.0;
    return hw && hw->ce_fused && lo->prec != PREC_FP32 ? 2.0 : 4.0;
}

static double stage_acts(const ModelSpec *m, const Layout *lo, int s, double inflight, double logit_b)
{
    int n = lo->layers[s], f = lo->full_rc[s], e = lo->sel_rc[s];
    int cnt[2][RECOMPUTE_COUNT];
    memory_stage_layer_mix(m, lo, s, n, f, e, cnt);
    double none = memory_layer_acts(m, lo, RECOMPUTE_NONE);
    double per_mb = cnt[0][RECOMPUTE_NONE] * none
                  + cnt[0][RECOMPUTE_SELECTIVE] * memory_layer_acts(m, lo, RECOMPUTE_SELECTIVE)
                  + cnt[0][RECOMPUTE_FULL] * memory_layer_acts(m, lo, RECOMPUTE_FULL);
    double moe_none = 0;
    if (cnt[1][RECOMPUTE_NONE] + cnt[1][RECOMPUTE_SELECTIVE] + cnt[1][RECOMPUTE_FULL] > 0 ||
        (s == layout_mtp_stage(lo) && m->mtp_layers > 0 && spec_layer_is_moe(m, m->L))) {
        moe_none = memory_moe_layer_acts(m, lo, RECOMPUTE_NONE);
        per_mb += cnt[1][RECOMPUTE_NONE] * moe_none
                + cnt[1][RECOMPUTE_SELECTIVE] * memory_moe_layer_acts(m, lo, RECOMPUTE_SELECTIVE)
                + cnt[1][RECOMPUTE_FULL] * memory_moe_layer_acts(m, lo, RECOMPUTE_FULL);
    }
    double ab = hw_precision_bytes(lo->prec);
    double tok = layout_mb_tokens(m, lo), h = m->h, rep = layout_sp_share(lo);
    double bytes = inflight * per_mb;
    if (s == 0) {
        /* token and position ids (int64) and the embedding dropout mask, per micro-batch held */
        bytes += inflight * (8.0 * tok + (m->dropout ? tok * h * rep : 0.0));
    }
    if (s == lo->pp - 1) {
        /* final norm input, LM-head input, the logits: one micro-batch at a time */
        double V = (double)spec_padded_vocab(m, lo->tp);
        bytes += 2.0 * ab * tok * h * rep + logit_b * tok * V / lo->tp;
    }
    if (s == layout_mtp_stage(lo)) {
        double V = (double)spec_padded_vocab(m, lo->tp);
        if (m->mtp_layers > 0) {
            /* per module and micro-batch held: its layer (never recomputed
             * here), its two norms' and projection's inputs; its logits are
             * live one micro-batch at a time like the main head's */
            double layer = spec_layer_is_moe(m, m->L) ? moe_none : none;
            bytes += inflight * m->mtp_layers * (layer + 3.0 * ab * tok * h * rep) + logit_b * tok * V / lo->tp;
        }
    }
    /* the recompute working set: while one fully recomputed layer runs its
     * backward, its activations are all live */
    if (cnt[1][RECOMPUTE_FULL] > 0)
        bytes += moe_none > none ? moe_none : none;
    else if (f > 0 || (e > 0 && layout_sel_op(m, lo)))   /* the op policy's recomputed tensors, one layer's */
        bytes += none;
    return bytes;
}

double memory_zero_unit_params(const ModelSpec *m, const Layout *lo, int s, double *layer_unit)
{
    double stage_unit = memory_stage_params(m, lo, s, 0);
    if (layer_unit) {
        /* the stage's largest layer: an MoE layer's unit holds its local
         * experts too (the stage's first layer may be a dense one) */
        int cnt[2][RECOMPUTE_COUNT], n = lo->layers[s] > 0 ? lo->layers[s] : m->L / lo->pp;
        memory_stage_layer_mix(m, lo, s, n > 0 ? n : 1, 0, 0, cnt);
        double dense = cnt[0][RECOMPUTE_NONE] ? memory_layer_params(m, lo, false, NULL) : 0;
        double moe = cnt[1][RECOMPUTE_NONE] ? memory_layer_params(m, lo, true, NULL) : 0;
        *layer_unit = dense > moe ? dense : moe;
    }
    return stage_unit;
}

double memory_cp_ring_bytes(const ModelSpec *m, const Layout *lo)
{
    if (lo->cp <= 1)
        return 0;
    double kv = spec_kv_width(m) / lo->tp;
    /* all-gather: the whole sequence's K and V gathered, and in the backward
     * their gradients before the reduce-scatter */
    if (lo->cp_comm == CP_COMM_ALLGATHER)
        return 4.0 * hw_precision_bytes(lo->prec) * lo->mbs * (double)m->s * kv;
    /* ring: the K and V block resident and the one arriving; in the backward
     * their gradients travel with them: 2 buffers of (K, V, dK, dV) of the
     * local tokens */
    return 2.0 * 4.0 * hw_precision_bytes(lo->prec) * layout_mb_tokens(m, lo) * kv;
}

/* One fp8 GEMM's operand copies (the executor's kc_fp8_scratch_bytes): the
 * forward's input and weight casts, or the backward's transposed input, two
 * casts of the output gradient and the transposed weight, each rounded to
 * 256 bytes, after 256 bytes of scales. */
static double up256(double b) { return ceil(b / 256.0) * 256.0; }
static double fp8_gemm_scratch(double bt, double c, double oc)
{
    double fwd = up256(bt * c) + up256(oc * c), bwd = up256(c * bt) + 2.0 * up256(bt * oc) + up256(c * oc);
    return 256.0 + fmax(fwd, bwd);
}

/* Bytes a cached fp8 weight takes under Transformer Engine, beside the
 * 16-bit (or, with --fp8-param-gather, the fp8) parameter itself. A
 * per-tensor scaled fp8 tensor (delayed or current scaling) carries its
 * data and, for the GEMMs that read it transposed, a transpose, except
 * where cuBLAS runs fp8 GEMMs in any layout: then the one copy serves both
 * (nvte_is_non_tn_fp8_gemm_supported: compute capability 10.x and 11.x, or
 * 13.0 and later, i.e. Blackwell; transformer_engine.cpp). MXFP8 scales
 * along rows for one GEMM and along columns for the other: two copies, and
 * an E8M0 scale per 32 elements of each, on every GPU. 128-block scaling
 * (blockwise) keeps a transpose as Hopper does. Under --fp8-param-gather
 * the parameter is the row-wise copy, so the cache holds the rest. */
static double te_fp8_weight_bytes(const HwProfile *hw, const Layout *lo)
{
    double cc = hw->compute_capability;
    bool non_tn = (cc >= 10.0 && cc < 12.0) || cc >= 13.0;
    double b;
    switch (lo->fp8_recipe) {
    case FP8R_MXFP8: b = 2.0 * (1.0 + 1.0 / 32.0); break;
    case FP8R_BLOCKWISE: b = 2.0; break;
    default: b = non_tn ? 1.0 : 2.0; break;
    }
    if (lo->fp8_param_gather)
        b = fmax(b - (lo->fp8_recipe == FP8R_MXFP8 ? 1.0 + 1.0 / 32.0 : 1.0), 0.0);
    return b;
}

/* Linear weights of one layer on one GPU that Transformer Engine caches in
 * fp8: the attention's (MLA's down projections replicated over tp), and a
 * dense MLP's, or an MoE layer's shared expert and local experts (each
 * GroupedLinear expert keeps its own workspace). The router stays 16-bit. */
static double te_fp8_layer_weights(const ModelSpec *m, const Layout *lo, bool moe)
{
    double t = lo->tp, w = attn_matrix_params(m, lo);
    if (!moe)
        return w + mlp_matrix(m, m->f) / t;
    double ef = m->moe_ffn > 0 ? m->moe_ffn : m->f;
    return w + mlp_matrix(m, m->shared_ffn) / t +
           (double)(m->experts / (lo->ep > 0 ? lo->ep : 1)) * mlp_matrix(m, ef) / layout_etp(lo);
}

/* fp8 buffers of stage s: the largest GEMM's operand scratch, and, except
 * under ZeRO-3 (whose layers exist whole only while gathered), each layer's
 * linear weights cast once a step to fp8 for every micro-batch to reuse.
 * ultraplan's executors keep an fp8 copy and an fp8 transpose of the dense
 * layer's weights in every layer (2 bytes a weight; the weight is the copy
 * under --fp8-param-gather); Transformer Engine's weight caches hold
 * te_fp8_weight_bytes of each weight te_fp8_layer_weights counts. */
static double fp8_buffers(const ModelSpec *m, const HwProfile *hw, const Layout *lo, int s)
{
    double t = lo->tp, h = m->h, bt = layout_mb_tokens(m, lo);
    double ql = spec_q_width(m) / t, qkv = (spec_q_width(m) + 2.0 * spec_kv_width(m)) / t, f = m->f / t;
    double f1 = (m->mlp == MLP_SWIGLU ? 2.0 : 1.0) * f;
    double sc = fmax(fmax(fp8_gemm_scratch(bt, h, ql), fp8_gemm_scratch(bt, ql, h)),   /* Q; K and V reuse its input cast */
                     fmax(fp8_gemm_scratch(bt, h, f1), fp8_gemm_scratch(bt, f, h)));
    if (lo->opt == OPT_ZERO3)
        return sc;
    if (memory_executor_accounting(lo)) {
        double per_layer = h * (qkv + ql + f1 + f);   /* QKV, projection, FC1, FC2 weights of one rank */
        return sc + (lo->fp8_param_gather ? 1.0 : 2.0) * per_layer * lo->layers[s];
    }
    int cnt[2][RECOMPUTE_COUNT];
    memory_stage_layer_mix(m, lo, s, lo->layers[s], 0, 0, cnt);
    double w = cnt[0][RECOMPUTE_NONE] * te_fp8_layer_weights(m, lo, false);
    if (cnt[1][RECOMPUTE_NONE])
        w += cnt[1][RECOMPUTE_NONE] * te_fp8_layer_weights(m, lo, true);
    return sc + te_fp8_weight_bytes(hw, lo) * w;
}

/* The largest parameter tensor of stage s on one GPU (tp-sharded as it is
 * stored): a layer's fused QKV, projection, FC1 (SwiGLU's two halves fused)
 * or FC2, an expert's FC1 or FC2, the shared expert's, and the stage's
 * embedding, learned positions or head. MLA's attention counts as one
 * tensor: its largest piece is bounded by the sum. */
static double largest_tensor(const ModelSpec *m, const Layout *lo, int s)
{
    double t = lo->tp, h = m->h, up = m->mlp == MLP_SWIGLU ? 2.0 : 1.0;
    double big = m->attn == ATTN_MLA ? ((double)spec_layer_matrix_params(m) - mlp_matrix(m, m->f)) / t
                                     : fmax(h * (spec_q_width(m) + 2.0 * spec_kv_width(m)), spec_q_width(m) * h) / t;
    big = fmax(big, up * h * m->f / t);
    if (spec_is_moe(m)) {
        double ef = m->moe_ffn > 0 ? m->moe_ffn : m->f;
        big = fmax(big, up * h * ef / layout_etp(lo));
        big = fmax(big, up * h * m->shared_ffn / t);
    }
    double V = (double)spec_padded_vocab(m, lo->tp);
    if (s == 0 || s == lo->pp - 1)
        big = fmax(big, V * h / t);
    if (s == 0 && m->pos == POS_LEARNED)
        big = fmax(big, (double)m->s * h);
    return big;
}

/* ZeRO-2/3 buffers in parameters: *grad gradient elements held while they
 * reduce, *gath parameters gathered (ZeRO-3). Block-granular stacks (FSDP,
 * ultraplan's executor: zero3_gathers_per_layer <= 1) hold whole units:
 * every layer is one and the stage's other tensors (embedding, final norm,
 * head) one more. Two layer buckets, so one reduces while the next layer's
 * backward writes the other, and the stage unit's (its head gradient is
 * written in the forward, its embedding gradient at the end of the
 * backward); two layers gathered, the one computing and the one
 * prefetched, and the stage unit held from a micro-batch's embedding to its
 * backward. Tensor-granular stacks (DeepSpeed ZeRO-3: a gather per tensor)
 * never hold a layer whole: the tensor computing (at most the largest, T)
 * and, while fewer than zero3_max_live_params are gathered, the prefetch
 * bucket, which fetches whole tensors, so at least the next one: T +
 * max(prefetch, T) below the cap, T at or above it. Gradients: the tensor
 * just computed and the reduce bucket it is copied into (a tensor larger
 * than the bucket reduces alone), in the weights' type, T + max(bucket, T).
 * Neither is ever more than the block count. True when the gradient
 * buffers are the tensor-granular ones (in the weights' type). */
static bool zero_buffer_params(const ModelSpec *m, const HwProfile *hw, const Layout *lo, int s, double *grad,
                               double *gath)
{
    double layer, stage = memory_zero_unit_params(m, lo, s, &layer);
    *grad = 2.0 * layer + stage;
    *gath = lo->opt == OPT_ZERO3 ? 2.0 * layer + stage : 0;
    if (lo->opt != OPT_ZERO3 || hw->zero3_gathers_per_layer <= 1)
        return false;
    double T = largest_tensor(m, lo, s), cap = hw->zero3_max_live_params;
    double ahead = cap > 0 && T >= cap ? 0 : fmax(hw->zero3_prefetch_params, T);
    *gath = fmin(*gath, T + ahead);
    if (hw->zero3_reduce_bucket_params <= 0)
        return false;
    *grad = fmin(*grad, T + fmax(hw->zero3_reduce_bucket_params, T));
    return true;
}

static double stage_buffers(const ModelSpec *m, const HwProfile *hw, const Layout *lo, int s)
{
    double bytes = 0;
    if (lo->pp > 1)   /* send and receive buffers for activations and their gradients */
        bytes += 4.0 * memory_pp_msg_bytes(m, lo);
    if (lo->opt == OPT_ZERO2 || lo->opt == OPT_ZERO3) {
        double grad, gath;
        bool tensor_grads = zero_buffer_params(m, hw, lo, s, &grad, &gath);
        double gb = tensor_grads ? memory_weight_bytes(lo) : memory_grad_bytes(lo);
        bytes += gb * grad + memory_weight_bytes(lo) * gath;
    }
    bytes += memory_cp_ring_bytes(m, lo);
    if (lo->prec == PREC_FP8)
        bytes += fp8_buffers(m, hw, lo, s);
    int comms = (lo->tp > 1) + (lo->pp > 1) + (layout_dp_group(lo) > 1) + (lo->cp > 1);
    if (spec_is_moe(m))   /* the expert groups: ep, etp (when not tp's), edp (when not dp·cp's) */
        comms += (lo->ep > 1) + (layout_etp(lo) > 1 && layout_etp(lo) != lo->tp) +
                 (layout_edp(lo) > 1 && layout_edp(lo) != layout_dp_group(lo));
    return bytes + comms * hw->nccl_buf_bytes;
}

/* A GPU's overhead (one CUDA context, the allocator's fragmentation of its
 * activations and buffers) and the total, from the other kinds. */
static void finish_total(const HwProfile *hw, StageMem *out)
{
    out->bytes[MEM_OVERHEAD] = hw->cuda_context_bytes + hw->alloc_frag * (out->bytes[MEM_ACTS] + out->bytes[MEM_BUFFERS]);
    out->total = 0;
    for (int k = 0; k < MEM_COUNT; k++)
        out->total += out->bytes[k];
}

static void stage_mem(const ModelSpec *m, const HwProfile *hw, const Layout *lo, int s, double inflight,
                      StageMem *out)
{
    memset(out, 0, sizeof *out);
    double w, g, o, we, ge, oe;
    int edp = layout_edp(lo);
    stack_state_bytes(hw, lo, layout_dp_group(lo), &w, &g, &o);
    stack_state_bytes(hw, lo, edp > 0 ? edp : 1, &we, &ge, &oe);
    out->layers = lo->layers[s];
    out->params = memory_stage_params_split(m, lo, s, lo->layers[s], &out->expert_params);
    int cnt[2][RECOMPUTE_COUNT];
    memory_stage_layer_mix(m, lo, s, lo->layers[s], 0, 0, cnt);
    out->moe_layers = cnt[1][RECOMPUTE_NONE];
    out->inflight = inflight;
    double dense = out->params - out->expert_params, ex = out->expert_params;
    out->bytes[MEM_WEIGHTS] = dense * w + ex * we;
    if (lo->fp8_param_gather && lo->prec == PREC_FP8 && !fsdp_fp32_shard(hw, lo)) {
        /* --fp8-param-gather: the layers' linear weights are kept in fp8, 1 byte, not the weights'
         * 16 bits; the embedding and head stay 16-bit (the stage's params without layers; the layers'
         * norms, a few in ten thousand of their parameters, are counted with the layers) */
        double e0 = 0, p0 = memory_stage_params_split(m, lo, s, 0, &e0);
        double ab = memory_weight_bytes(lo);
        out->bytes[MEM_WEIGHTS] -= ((dense - (p0 - e0)) * w + (ex - e0) * we) * (1.0 - 1.0 / ab);
    }
    out->bytes[MEM_GRADS] = dense * g + ex * ge;
    out->bytes[MEM_OPTIM] = dense * o + ex * oe;
    out->bytes[MEM_ACTS] = stage_acts(m, lo, s, out->inflight, logit_bytes(hw, lo));
    out->bytes[MEM_BUFFERS] = stage_buffers(m, hw, lo, s);
    finish_total(hw, out);
}

/* DualPipe (DualPipe.step's warm-up: 2(pp/2 - h - 1) + h + 1 forward chunks of
 * the rank's own-direction stage, h + 1 of the other, then one more in the
 * steady state): pipeline rank r with h = min(r, pp-1-r) holds model stage h
 * for pp - h micro-batches and stage pp-1-h for h + 1, pp + 1 in all (the
 * DualPipe table's "PP+1"). It holds both stages' weights and gradients (the
 * "2x" parameters). What ZeRO shards over the data-parallel ranks (the
 * optimizer states from ZeRO-1 and the distributed optimizer on, the
 * gradients from ZeRO-2, the weights under ZeRO-3) is one set for both
 * copies, sharded over both copies' ranks: a rank keeps half of each
 * stage's shard. ZeRO-0 keeps everything twice. */
static void dualpipe_mem(const ModelSpec *m, const HwProfile *hw, const Layout *lo, int r, StageMem *out)
{
    int h = r < layout_pp_mirror(lo, r) ? r : layout_pp_mirror(lo, r), k = layout_pp_mirror(lo, h);
    int mb = layout_microbatches(lo);
    StageMem a, b;
    stage_mem(m, hw, lo, h, fmin(mb, lo->pp - h), &a);
    stage_mem(m, hw, lo, k, fmin(mb, h + 1), &b);
    *out = a;
    out->layers = a.layers + b.layers;
    out->moe_layers = a.moe_layers + b.moe_layers;
    out->params = a.params + b.params;
    out->expert_params = a.expert_params + b.expert_params;
    out->inflight = a.inflight + b.inflight;
    for (int i = 0; i < MEM_COUNT; i++)
        out->bytes[i] = a.bytes[i] + b.bytes[i];
    if (lo->opt != OPT_ZERO0)
        out->bytes[MEM_OPTIM] *= 0.5;
    if (lo->opt == OPT_ZERO2 || lo->opt == OPT_ZERO3)
        out->bytes[MEM_GRADS] *= 0.5;
    if (lo->opt == OPT_ZERO3)
        out->bytes[MEM_WEIGHTS] *= 0.5;
    finish_total(hw, out);   /* one CUDA context, fragmentation of the sum */
}

void memory_stage(const ModelSpec *m, const HwProfile *hw, const Layout *lo, int s, StageMem *out)
{
    if (lo->pp_sched == PP_SCHED_DUALPIPE && lo->pp >= 2)
        dualpipe_mem(m, hw, lo, s, out);
    else
        stage_mem(m, hw, lo, s, memory_inflight(lo, s), out);
}
