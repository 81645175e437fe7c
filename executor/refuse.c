/* refuse.c — see refuse.h. The rules are the executors' (they call these);
 * the planner reads the same functions, so the two cannot drift apart. */
#include "refuse.h"

#include <stdio.h>

#define FAIL(...) do { snprintf(err, errlen, __VA_ARGS__); return -1; } while (0)

static bool zero23(const Layout *lo) { return lo->opt == OPT_ZERO2 || lo->opt == OPT_ZERO3; }
static const char *norm_name(const ModelSpec *m) { return m->norm == NORM_RMSNORM ? "rmsnorm" : "layernorm"; }
static const char *pos_name(const ModelSpec *m) { return m->pos == POS_ROPE ? "rope" : "learned"; }

int refuse_overflow(const ModelSpec *m, const Layout *lo, char *err, int errlen)
{
    /* in 64 bits, before anything is allocated: a hostile plan file must
     * not overflow the int products of the step (B*T, 2*m*vp) */
    long long mbs = lo->mbs, seq = m->s, gbs = lo->gbs, dp = lo->dp, vp = lo->vp, pp = lo->pp;
    if (mbs <= 0 || seq <= 0 || gbs <= 0 || dp <= 0 || vp <= 0 || pp <= 0)
        FAIL("plan: layout.mbs (%lld), model.seq (%lld), layout.gbs (%lld), layout.dp, layout.pp and layout.vp "
             "must be positive", mbs, seq, gbs);
    if (mbs * seq > REFUSE_MAX_MB_TOKENS)
        FAIL("plan: layout.mbs x model.seq = %lld x %lld = %lld tokens per micro-batch; the executor takes at "
             "most %lld", mbs, seq, mbs * seq, (long long)REFUSE_MAX_MB_TOKENS);
    long long nmb = gbs / (dp * mbs);
    if (nmb * vp > REFUSE_MAX_MB_CHUNKS)
        FAIL("plan: layout.gbs %lld / (layout.dp %lld x layout.mbs %lld) = %lld micro-batches x layout.vp %lld "
             "chunks is more than the %lld a step can schedule", gbs, dp, mbs, nmb, vp,
             (long long)REFUSE_MAX_MB_CHUNKS);
    if (nmb * mbs * seq > REFUSE_MAX_STEP_TOKENS)
        FAIL("plan: layout.gbs / layout.dp x model.seq = %lld tokens per rank and step; the executor takes at "
             "most %lld", nmb * mbs * seq, (long long)REFUSE_MAX_STEP_TOKENS);
    return 0;
}

/* Rules both executors share: the batch splits, no dropout, the CP ring. */
static int refuse_common(const ModelSpec *m, const Layout *lo, char *err, int errlen)
{
    if (lo->gbs % (lo->dp * lo->mbs))
        FAIL("global batch %d is not a multiple of dp %d x mbs %d", lo->gbs, lo->dp, lo->mbs);
    if (zero23(lo) && lo->pp > 1)
        FAIL("plan: layout.optimizer %s needs layout.pp 1 (got %d): ZeRO-2/3 shard per layer of one stage",
             layout_opt_name(lo->opt), lo->pp);
    if (lo->cp > 1 && m->s % (2 * lo->cp))
        FAIL("context parallel needs seq %d to be a multiple of 2*cp = %d", m->s, 2 * lo->cp);
    if (lo->sp && lo->tp > 1 && (lo->mbs * m->s / lo->cp) % lo->tp)
        FAIL("sequence parallel needs tp %d to divide mbs*seq/cp = %d; plan with --no-sp or another micro-batch",
             lo->tp, lo->mbs * m->s / lo->cp);
    /* both backends run context parallelism as Megatron's ring; a plan that
     * was costed with Llama 3's all-gather exchange is not the plan they run */
    if (lo->cp > 1 && lo->cp_comm != CP_COMM_RING)
        FAIL("plan: layout.cp_comm %s with layout.cp %d: the executors exchange K/V only around the ring; "
             "plan it with --cp-comm ring", layout_cp_comm_name(lo->cp_comm), lo->cp);
    if (lo->pp_sched != PP_SCHED_1F1B)
        FAIL("plan: layout.pp_schedule %s: the executors run 1F1B (interleaved with vp > 1); plan it with "
             "--pp-schedule 1f1b", layout_pp_sched_name(lo->pp_sched));
    if (m->dropout)
        FAIL("the executor has no dropout, and the plan's model has \"dropout\": true; plan it with --no-dropout");
    if (lo->fp8_dpa)
        FAIL("plan: layout.fp8_dot_product_attention: the executors run the attention core in 16 bits; plan it "
             "with --no-fp8-dot-product-attention");
    if (lo->fp8_param_gather)
        FAIL("plan: layout.fp8_param_gather: the executors keep the weights in 16 bits and cast them to fp8 "
             "each step; plan it with --no-fp8-param-gather");
    if (lo->precision_aware_opt)
        FAIL("plan: layout.precision_aware_optimizer: the executors' Adam keeps an fp32 master and fp32 moments; "
             "plan it with --no-use-precision-aware-optimizer");
    /* both recompute a selective layer's attention core (Megatron's); a plan
     * priced with torchtitan's per-op policy is not the plan they run */
    if (layout_sel_op_used(m, lo))
        FAIL("plan: selective recomputation priced as torchtitan's per-op policy (layout.stack's SelectiveAC); "
             "the executors recompute the attention core: plan it with --recompute full or none, or another "
             "--stack");
    /* both executors move dispatch and combine in the activations' dtype: an MXFP8 wire changes the
     * numbers the CPU backend checks and the bytes the CUDA one times */
    if (spec_is_moe(m) && (lo->moe_dispatch_wire != MOE_WIRE_BF16 || lo->moe_combine_bwd_wire != MOE_WIRE_BF16))
        FAIL("plan: layout.moe_dispatch_fwd_dtype %s, moe_combine_bwd_dtype %s: the executors dispatch and combine "
             "in the activations' dtype; plan it with --moe-dispatch-fwd-dtype bf16 --moe-combine-bwd-dtype bf16",
             layout_moe_wire_name(lo->moe_dispatch_wire), layout_moe_wire_name(lo->moe_combine_bwd_wire));
    return 0;
}

static int refuse_cpu_mla_mtp(const ModelSpec *m, const Layout *lo, char *err, int errlen)
{
    if (m->attn == ATTN_MLA) {
        if (m->norm != NORM_RMSNORM || m->pos != POS_ROPE || m->bias)
            FAIL("the executor's multi-head latent attention needs an RMSNorm, RoPE model without biases "
                 "(model.norm %s, model.pos %s, model.bias %s)", norm_name(m), pos_name(m),
                 m->bias ? "true" : "false");
        if (m->qk_rope_dim % 2 || m->v_head_dim > m->qk_nope_dim + m->qk_rope_dim)
            FAIL("the executor's multi-head latent attention needs an even qk-rope-dim (got %d) and v-head-dim %d "
                 "<= qk-nope-dim + qk-rope-dim = %d", m->qk_rope_dim, m->v_head_dim,
                 m->qk_nope_dim + m->qk_rope_dim);
    }
    if (m->mtp_layers > 0) {
        if (m->norm != NORM_RMSNORM || m->pos != POS_ROPE)
            FAIL("the executor's multi-token prediction needs an RMSNorm, RoPE model (model.norm %s, model.pos %s)",
                 norm_name(m), pos_name(m));
        if (lo->cp > 1)
            FAIL("the executor's multi-token prediction needs layout.cp 1 (got %d): the tokens k ahead may lie "
                 "on another cp rank", lo->cp);
        if (zero23(lo) && m->mtp_layers > 2)
            FAIL("plan: layout.optimizer %s with model.mtp_layers %d: the executor's ZeRO-2/3 buckets hold at "
                 "most 2 MTP modules at once", layout_opt_name(lo->opt), m->mtp_layers);
        if (m->mtp_layers >= m->s)
            FAIL("model.mtp_layers %d leaves no token to predict in a sequence of %d", m->mtp_layers, m->s);
    }
    return 0;
}

int refuse_cpu(const ModelSpec *m, const Layout *lo, char *err, int errlen)
{
    int tp = lo->tp, hs = spec_head_dim(m);
    int g = m->g > 0 ? m->g : m->a;
    if (refuse_common(m, lo, err, errlen) != 0)
        return -1;
    if (m->a % tp || g % tp)
        FAIL("tp %d must divide the query heads (%d) and the KV heads (%d)", tp, m->a, g);
    if (m->f % tp)
        FAIL("tp %d must divide the FFN width %d", tp, m->f);
    if (m->pos == POS_ROPE && hs % 2)
        FAIL("RoPE needs an even head size (got %d)", hs);
    if (m->sinks && lo->cp > 1)
        FAIL("model.attn_sinks (--attn-sinks) with layout.cp %d: the executor's context-parallel ring has no "
             "sinks so far; plan it with --cp 1", lo->cp);
    if (m->window > 0 && lo->cp > 1)
        FAIL("model.window %d with layout.cp %d: the executor's context-parallel ring has no sliding window "
             "so far; plan it with --cp 1", m->window, lo->cp);
    if (refuse_cpu_mla_mtp(m, lo, err, errlen) != 0)
        return -1;
    if (spec_is_moe(m)) {
        int etp = layout_etp(lo), fe = m->moe_ffn > 0 ? m->moe_ffn : m->f;
        if (m->bias)
            FAIL("the executor's mixture-of-experts layers have no biases, and the plan's model has \"bias\": true");
        if (tp > 1 && !lo->sp)
            FAIL("a mixture-of-experts model with tp %d needs sequence parallel (layout.sp), as in Megatron-LM", tp);
        if (m->experts % lo->ep || fe % etp || m->shared_ffn % tp)
            FAIL("ep %d must divide the %d experts, etp %d the expert FFN %d, tp %d the shared FFN %d", lo->ep,
                 m->experts, etp, fe, tp, m->shared_ffn);
        if ((long long)lo->tp * lo->cp * lo->dp % ((long long)etp * lo->ep))
            FAIL("etp %d x ep %d must divide tp %d x cp %d x dp %d", etp, lo->ep, lo->tp, lo->cp, lo->dp);
    }
    return 0;
}

int refuse_cuda_head_size(int hs) { return hs == 32 || hs == 64 || hs == 96 || hs == 128; }

/* The MoE layouts the CUDA layer runs (cuexec.h); the others by field. */
static int refuse_cuda_moe(const ModelSpec *m, const Layout *lo, char *err, int errlen)
{
    int ep = lo->ep > 0 ? lo->ep : 1;
    if (!spec_is_moe(m)) {
        if (ep > 1)
            FAIL("layout.ep %d with a dense model (\"experts\": 0): expert parallelism needs routed experts", ep);
        return 0;
    }
    if (m->bias)
        FAIL("the executor's mixture-of-experts layers have no biases, and the plan's model has \"bias\": true");
    if (m->capacity_factor > 0)
        FAIL("model.capacity_factor %g: the CUDA MoE layer is dropless so far (the CPU backend runs capacity)",
             m->capacity_factor);
    if (lo->tp > 1 || lo->cp > 1 || layout_etp(lo) > 1)
        FAIL("layout.tp %d, cp %d, etp %d with a mixture-of-experts model: the CUDA MoE layer runs tp = cp = etp "
             "= 1 so far (its balance loss sums a sequence's counts on one rank); use ep and dp, or the CPU backend",
             lo->tp, lo->cp, layout_etp(lo));
    if (zero23(lo))
        FAIL("layout.optimizer %s with a mixture-of-experts model: expert states shard only under zero1 / distopt",
             layout_opt_name(lo->opt));
    if (m->experts % ep || lo->dp % ep)
        FAIL("layout.ep %d must divide the %d experts and dp %d (tp = cp = 1: the ep ranks are dp ranks)", ep,
             m->experts, lo->dp);
    /* The layer dispatches and combines with NCCL send/recv groups on the communication stream, one
     * micro-batch at a time: Megatron's alltoall dispatcher without the 1F1B A2A overlap. A plan priced
     * with another dispatcher, or with one micro-batch's dispatch hidden under another's compute, is
     * not the plan it runs (the CPU backend checks the math only and takes both). */
    if (ep > 1 && lo->moe_dispatcher != MOE_DISPATCH_ALLTOALL)
        FAIL("layout.moe_token_dispatcher %s with ep %d: the CUDA MoE layer dispatches with NCCL all-to-all "
             "(Megatron's alltoall); plan it with --moe-token-dispatcher-type alltoall",
             layout_dispatcher_name(lo->moe_dispatcher), ep);
    char why[200];
    if (lo->moe_a2a_overlap && layout_moe_a2a_check(lo, why, sizeof why) == 0)
        FAIL("layout.overlap_moe_expert_parallel_comm: the CUDA MoE layer runs one micro-batch's dispatch and "
             "combine at a time, not under another's compute; plan it with --no-overlap-moe-expert-parallel-comm");
    if (m->router_groups > 1)
        FAIL("model.moe_router_groups %d (--moe-router-num-groups, group-limited routing): the CUDA router "
             "kernel takes plain top-k so far; use the CPU backend, or plan without expert groups", m->router_groups);
    if (m->experts > REFUSE_CUDA_MAX_EXPERTS || m->topk > REFUSE_CUDA_MAX_TOPK)
        FAIL("model \"%s\": experts %d, topk %d: the CUDA kernels take up to %d experts and top-%d", m->name,
             m->experts, m->topk, REFUSE_CUDA_MAX_EXPERTS, REFUSE_CUDA_MAX_TOPK);
    return 0;
}

int refuse_cuda(const ModelSpec *m, const Layout *lo, char *err, int errlen)
{
    if (m->attn == ATTN_MLA || m->mtp_layers > 0)
        FAIL("model \"%s\" has attention %s, mtp_layers %d: the CUDA executor runs MHA/GQA without multi-token "
             "prediction; plan it with --attn mha --mtp-layers 0", m->name, spec_attn_name(m->attn), m->mtp_layers);
    if (m->window > 0 || m->sinks || m->act_clamp > 0)
        FAIL("model \"%s\" has window %d, attn_sinks %s, act_clamp %g: the CUDA attention and activation kernels "
             "run full causal attention without sinks and plain SwiGLU so far; plan it with --window 0 "
             "--no-attn-sinks --act-clamp 0 (the CPU backend runs all three)", m->name, m->window,
             m->sinks ? "true" : "false", m->act_clamp);
    /* kernels/cuda/kc_fp8.h scales each tensor by its own amax, taken on the
     * device just before the cast: Megatron's current scaling. A plan costed
     * with another recipe (delayed scaling's amax history, MXFP8 or 128-block
     * scales) prices casts this executor does not run. */
    if (lo->prec == PREC_FP8 && lo->fp8_recipe != FP8R_TENSORWISE)
        FAIL("layout.fp8_recipe %s: the CUDA executor's fp8 GEMMs scale each tensor by its current amax "
             "(Megatron's --fp8-recipe tensorwise); plan it with --fp8-recipe tensorwise",
             layout_fp8_recipe_name(lo->fp8_recipe));
    /* CUDA graphs (--cuda-graph-impl) are priced as fewer host launches;
     * this executor captures none, so its launches would not be the plan's */
    if (lo->cuda_graph != CG_NONE)
        FAIL("layout.cuda_graph_impl %s: the CUDA executor captures no CUDA graphs, so its kernel launches would "
             "not be the predicted plan's; plan it with --cuda-graph-impl none", layout_cuda_graph_name(lo->cuda_graph));
    if (!refuse_cuda_head_size(spec_head_dim(m)))
        FAIL("the CUDA attention kernel takes head sizes 32, 64, 96 or 128; %s has %d", m->name, spec_head_dim(m));
    if (lo->cp < 1)
        FAIL("\"cp\": %d must be 1 or more", lo->cp);
    if (refuse_cuda_moe(m, lo, err, errlen) != 0 || refuse_common(m, lo, err, errlen) != 0)
        return -1;
    if (m->pos == POS_ROPE && spec_head_dim(m) % 2)
        FAIL("RoPE needs an even head size (got %d)", spec_head_dim(m));
    if (lo->vp > 1 && lo->pp == 1)
        FAIL("interleaving (\"vp\": %d) needs pp > 1", lo->vp);
    int split = 0;
    for (int s = 0; s < lo->pp && s < LAYOUT_MAX_PP; s++)
        split += lo->layers[s];
    for (int s = 0; split > 0 && s < lo->pp && s < LAYOUT_MAX_PP; s++)
        if (lo->layers[s] < lo->vp)
            FAIL("stage %d has %d layers: every one of its %d chunks needs at least one", s, lo->layers[s], lo->vp);
    return 0;
}

int refuse_target(const ModelSpec *m, const Layout *lo, Target t, char *err, int errlen)
{
    switch (t) {
    case TARGET_ULTRAPLAN:
        return refuse_overflow(m, lo, err, errlen) != 0 ? -1 : refuse_cpu(m, lo, err, errlen);
    case TARGET_ULTRAPLAN_CUDA:
        return refuse_overflow(m, lo, err, errlen) != 0 ? -1 : refuse_cuda(m, lo, err, errlen);
    default:
        return 0;
    }
}
