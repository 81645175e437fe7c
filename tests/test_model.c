/* test_model.c — the cost model against the worked numbers of
 * docs/COSTMODEL.md and against invariants that any correct model must
 * keep. Each expected figure names its section there. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cost.h"
#include "presets.h"
#include "profile.h"
#include "stacks.h"

#define GIB 1073741824.0

/* |got - want| <= rel * |want| with a message that shows both. */
#define assert_rel(got, want, rel) do { \
        double g_ = (got), w_ = (want); \
        if (!(fabs(g_ - w_) <= (rel) * fabs(w_))) \
            fail_msg("%s = %.9g, expected %.9g (rel tol %g)", #got, g_, w_, (double)(rel)); \
    } while (0)

static ModelSpec gpt3(void)
{
    ModelSpec m;
    char err[256];
    assert_int_equal(presets_find("gpt3-175b", &m, err, sizeof err), 0);
    return m;
}

static ModelSpec llama2_7b(void)
{
    ModelSpec m;
    char err[256];
    assert_int_equal(presets_find("llama2-7b", &m, err, sizeof err), 0);
    return m;
}

static HwProfile a100(void)
{
    HwProfile hw;
    char err[256];
    assert_int_equal(profile_load_builtin("a100-80g", &hw, err, sizeof err), 0);
    return hw;
}

/* 2 GELU layers, h 64, 4 heads, ffn 256, vocab 256, 32 learned positions,
 * LayerNorm, no biases (tied or not): the hand-worked model of the fp8,
 * ZeRO-3 and FSDP state tests */
static ModelSpec tiny_gelu(bool tied)
{
    ModelSpec m;
    memset(&m, 0, sizeof m);
    m.L = 2, m.h = 64, m.a = 4, m.g = 4, m.f = 256, m.vocab = 256, m.vocab_div = 1, m.s = 32;
    m.mlp = MLP_GELU, m.norm = NORM_LAYERNORM, m.pos = POS_LEARNED, m.tied = tied;
    char err[256];
    if (spec_validate(&m, err, sizeof err) != 0)
        fail_msg("spec_validate: %s", err);
    return m;
}

static Layout layout_for(const ModelSpec *m, const HwProfile *hw, int dp, int tp, int pp, int mbs, int gbs)
{
    Layout lo;
    layout_default(&lo);
    lo.dp = dp, lo.tp = tp, lo.pp = pp, lo.mbs = mbs, lo.gbs = gbs;
    char err[256];
    if (layout_check(&lo, m, hw, err, sizeof err) != 0)
        fail_msg("layout_check: %s", err);
    return lo;
}

/* §1 test values */
static void test_params(void **st)
{
    (void)st;
    ModelSpec g = gpt3();
    assert_int_equal(spec_padded_vocab(&g, 8), 51200);
    assert_int_equal(spec_padded_vocab(&g, 1), 50304);
    assert_true(spec_params(&g, 8, PARAMS_EXACT) == 174615846912LL);
    assert_true(spec_params(&g, 8, PARAMS_MEGATRON) == 174580064256LL);
    ModelSpec l = llama2_7b();
    assert_true(spec_params(&l, 1, PARAMS_EXACT) == 6738415616LL);
    assert_true(spec_params(&l, 1, PARAMS_MEGATRON) == 6738415616LL);
    /* per layer 12h^2 + 13h for the GPT-3 shape */
    int64_t h = g.h;
    assert_true(spec_layer_params(&g) == 12 * h * h + 13 * h);
}

/* §2 test values: GPT-3, B = 1536, s = 2048 */
static void test_flops_gpt3(void **st)
{
    (void)st;
    ModelSpec g = gpt3();
    double tok = 1536.0 * 2048;
    assert_rel(spec_flops_per_token(&g, 8, FLOPS_FULL_ATTN) * tok, 3.386197e18, 1e-6);
    assert_rel(spec_flops_per_token(&g, 8, FLOPS_FULL_ATTN), 1.076443e12, 1e-6);
    assert_rel(spec_flops_per_token(&g, 8, FLOPS_CAUSAL) * tok, 3.340598e18, 1e-6);
    assert_rel(spec_flops_per_token(&g, 8, FLOPS_6N), 1.047480e12, 1e-6);
    assert_rel(spec_flops_per_token(&g, 8, FLOPS_PALM), 1.076471e12, 1e-6);
    /* Narayanan's 96-form = model FLOPs + one more forward of the layers */
    double full = spec_flops_per_token(&g, 8, FLOPS_FULL_ATTN);
    double hw_full = full + spec_recompute_flops_per_token(&g, RECOMPUTE_FULL, false);
    assert_rel(hw_full * tok, 4.510971e18, 1e-6);
    assert_rel(hw_full / full, 1.3322, 1e-4);
    assert_rel((full + spec_recompute_flops_per_token(&g, RECOMPUTE_SELECTIVE, false)) / full, 1.00898, 1e-5);
}

/* §8 C: Llama-2-7B FLOPs per token under each convention */
static void test_flops_llama(void **st)
{
    (void)st;
    ModelSpec l = llama2_7b();
    assert_rel(spec_flops_per_token(&l, 1, FLOPS_6N), 4.0430e10, 1e-4);
    assert_rel(spec_flops_per_token(&l, 1, FLOPS_PALM), 4.6873e10, 1e-4);
    assert_rel(spec_flops_per_token(&l, 1, FLOPS_FULL_ATTN), 4.6085e10, 1e-4);
    assert_rel(spec_flops_per_token(&l, 1, FLOPS_CAUSAL), 4.2864e10, 1e-4);
}

/* §2.1 / §8 E: PaLM 540B, 6144 TPUv4 at 275 TFLOP/s, 238.3K tokens/s -> 46.2 % MFU */
static void test_palm_mfu(void **st)
{
    (void)st;
    ModelSpec p = {.L = 118, .h = 18432, .a = 48, .g = 1, .d_head = 256, .f = 73728, .vocab = 256000,
                   .vocab_div = 1, .s = 2048, .mlp = MLP_SWIGLU, .norm = NORM_LAYERNORM, .pos = POS_ROPE,
                   .tied = true};
    char err[256];
    assert_int_equal(spec_validate(&p, err, sizeof err), 0);
    assert_rel((double)spec_params(&p, 1, PARAMS_MEGATRON), 540.35e9, 2e-4);
    double mfu = spec_flops_per_token(&p, 1, FLOPS_PALM) * 238.3e3 / (6144 * 275e12);
    assert_rel(mfu, 0.4623, 1e-3);
}

/* §3.1: ZeRO Figure 1, Psi = 7.5B, N_d = 64, fp16 grads, K = 12 */
static void test_zero_figure1(void **st)
{
    (void)st;
    Layout lo;
    layout_default(&lo);
    lo.dp = 64;
    lo.grad_fp32 = false;
    const double want[] = {120, 31.4, 16.6, 1.9};
    for (int z = 0; z <= 3; z++) {
        lo.opt = (OptimShard)z;
        double w, g, o;
        memory_state_bytes(&lo, &w, &g, &o);
        double gb = 7.5e9 * (w + g + o) / 1e9;
        if (fabs(gb - want[z]) > 0.05)
            fail_msg("ZeRO-%d: %.3f GB, expected %.1f", z, gb, want[z]);
    }
    /* Megatron's table: bf16 params + fp32 main grads = 18, dist-opt 6 + 12/d */
    lo.grad_fp32 = true;
    lo.opt = OPT_ZERO0;
    double w, g, o;
    memory_state_bytes(&lo, &w, &g, &o);
    assert_rel(w + g + o, 18.0, 1e-12);
    lo.opt = OPT_DISTOPT;
    memory_state_bytes(&lo, &w, &g, &o);
    assert_rel(w + g + o, 6.0 + 12.0 / 64, 1e-12);
    lo.prec = PREC_FP32;
    memory_state_bytes(&lo, &w, &g, &o);
    assert_rel(w + g + o, 8.0 + 8.0 / 64, 1e-12);
}

/* PyTorch FSDP's states (HwProfile.zero3_fp32_shard, the composer-fsdp and
 * torchtitan stacks): under ZeRO-3 each rank keeps the fp32 shard, which
 * AdamW steps, its fp32 gradient and the two moments, 4 + 4 + 8 = 16 bytes a
 * parameter over the 8 ranks, whether gradients reduce in fp32 or bf16; the
 * stage's states for the 2-layer GELU model of test_fp8_copies (its 117,376
 * parameters, worked there). Megatron-FSDP (the flag off) keeps a bf16 copy
 * and a separate master, 2 + 4 + 12; ZeRO-1 is untouched; fp32 training
 * has no separate master either way. */
static void test_fsdp_fp32_shard(void **st)
{
    (void)st;
    ModelSpec m = tiny_gelu(true);
    char err[256];
    HwProfile hw = a100();
    Layout lo;
    layout_default(&lo);
    lo.dp = 8, lo.mbs = 1, lo.gbs = 8, lo.layers[0] = 2, lo.opt = OPT_ZERO3;
    if (layout_check(&lo, &m, &hw, err, sizeof err) != 0)
        fail_msg("layout_check: %s", err);
    double P = memory_stage_params(&m, &lo, 0, 2);
    assert_rel(P, 117376, 1e-12);
    StageMem a, b;
    memory_stage(&m, &hw, &lo, 0, &a);
    assert_rel(a.bytes[MEM_WEIGHTS] + a.bytes[MEM_GRADS] + a.bytes[MEM_OPTIM], P * 18.0 / 8, 1e-12);
    hw.zero3_fp32_shard = true;
    memory_stage(&m, &hw, &lo, 0, &b);
    assert_rel(b.bytes[MEM_WEIGHTS], P * 4.0 / 8, 1e-12);
    assert_rel(b.bytes[MEM_GRADS], P * 4.0 / 8, 1e-12);
    assert_rel(b.bytes[MEM_OPTIM], P * 8.0 / 8, 1e-12);
    assert_rel(memory_state_bytes_per_param(&hw, &lo), 16.0, 1e-12);
    lo.grad_fp32 = false;   /* reduced in bf16, cast to the fp32 parameter's dtype after */
    memory_stage(&m, &hw, &lo, 0, &b);
    assert_rel(b.bytes[MEM_GRADS], P * 4.0 / 8, 1e-12);
    lo.grad_fp32 = true, lo.opt = OPT_ZERO1;   /* only FSDP's ZeRO-3 */
    memory_stage(&m, &hw, &lo, 0, &b);
    assert_rel(b.bytes[MEM_WEIGHTS] + b.bytes[MEM_GRADS] + b.bytes[MEM_OPTIM], P * (2.0 + 4.0 + 12.0 / 8), 1e-12);
    lo.opt = OPT_ZERO3, lo.prec = PREC_FP32;
    memory_stage(&m, &hw, &lo, 0, &b);
    assert_rel(b.bytes[MEM_WEIGHTS] + b.bytes[MEM_GRADS] + b.bytes[MEM_OPTIM], P * 16.0 / 8, 1e-12);
}

/* The buffers ZeRO-2/3 and context parallel add (COSTMODEL.md §3.4), counted
 * by hand for GPT-3 175B at tp 8, pp 1, bf16 with fp32 gradients: a layer
 * unit holds 12h²/8 matrices, 7h/8 column biases, 2h row biases and 4h norm
 * weights; the stage unit the 51200-row embedding /8, 2048 learned
 * positions and the final norm (2h); tied, so no head. */
static void test_zero_cp_buffers(void **st)
{
    (void)st;
    ModelSpec g = gpt3();
    HwProfile hw = a100();
    double h = 12288;
    double layer = 12 * h * h / 8 + 7 * h / 8 + 2 * h + 4 * h;
    double stage = 51200 * h / 8 + 2048 * h + 2 * h;
    Layout lo = layout_for(&g, &hw, 8, 8, 1, 1, 64);
    lo.opt = OPT_ZERO1;
    StageMem z1, z2, z3;
    memory_stage(&g, &hw, &lo, 0, &z1);
    lo.opt = OPT_ZERO2;
    memory_stage(&g, &hw, &lo, 0, &z2);
    lo.opt = OPT_ZERO3;
    memory_stage(&g, &hw, &lo, 0, &z3);
    double gb = memory_grad_bytes(&lo), wb = memory_weight_bytes(&lo);
    assert_rel(gb, 4.0, 0);
    assert_rel(wb, 2.0, 0);
    /* gradient buckets: two layers' and the stage unit's */
    assert_rel(z2.bytes[MEM_BUFFERS] - z1.bytes[MEM_BUFFERS], 4.0 * (2 * layer + stage), 1e-12);
    /* ZeRO-3 adds two gathered layers and the gathered stage unit */
    assert_rel(z3.bytes[MEM_BUFFERS] - z2.bytes[MEM_BUFFERS], 2.0 * (2 * layer + stage), 1e-12);
    /* cp 2: the ring of (K, V, dK, dV) twice over 2048/2 tokens, 96/8 KV heads of 128, bf16 */
    lo.opt = OPT_ZERO1;
    lo.cp = 2, lo.dp = 4;
    StageMem c2;
    memory_stage(&g, &hw, &lo, 0, &c2);
    assert_rel(memory_cp_ring_bytes(&g, &lo), 2 * 4 * 2.0 * 1024 * (12 * 128), 1e-12);
    /* and the CP communicator's NCCL buffer */
    assert_rel(c2.bytes[MEM_BUFFERS] - z1.bytes[MEM_BUFFERS], 2 * 4 * 2.0 * 1024 * (12 * 128) + hw.nccl_buf_bytes,
               1e-12);
}

/* One formula per quantity: the bytes of each model state per parameter
 * (memory_weight/grad/optim_bytes) are what ZeRO shards, what a checkpoint
 * holds and what the optimizer step moves; one NCCL-call price
 * (time_coll_allreduce: coll_lat + alpha-beta at coll_eff) is what the DP
 * reduction costs when nothing hides it. */
static void test_one_formula(void **st)
{
    (void)st;
    ModelSpec g = gpt3();
    HwProfile hw = a100();
    for (int prec = PREC_FP32; prec <= PREC_BF16; prec++) {
        Layout lo = layout_for(&g, &hw, 16, 8, 8, 1, 1536);
        lo.prec = (Precision)prec;
        double wb = memory_weight_bytes(&lo), gb = memory_grad_bytes(&lo), K = memory_optim_bytes(&lo);
        assert_rel(wb + gb + K, prec == PREC_FP32 ? 16.0 : 18.0, 0);
        lo.opt = OPT_ZERO3;
        double w, gr, o;
        memory_state_bytes(&lo, &w, &gr, &o);
        assert_rel((w + gr + o) * 16, wb + gb + K, 1e-15);
        lo.opt = OPT_ZERO0;
        CostOpts co;
        cost_opts_default(&co);
        Cost c;
        cost(&g, &hw, &lo, &co, &c);
        double N = (double)spec_params(&g, lo.tp, PARAMS_EXACT);
        assert_rel(c.train.ckpt_bytes, N * (wb + K), 1e-15);
        double P = c.stage[3].params;
        assert_rel(cost_stage_optim_s(&hw, &lo, P), time_mem_s(&hw, P * (2 * K + 2 * gb + wb)), 1e-15);
        /* nothing overlapped: a middle stage's DP time is one all-reduce of its gradients */
        HwProfile no = hw;
        no.dp_overlap = 0;
        LayerTime lt;
        time_layer(&g, &no, &lo, &lt);
        assert_rel(cost_stage_dp_s(&g, &no, &lo, &lt, 3), time_coll_allreduce(&no, P * gb, 16, 1), 1e-15);
        /* --no-overlap-grad-reduce is the same physics: the reduction waits for the whole backward */
        Layout nov = lo;
        nov.overlap_grad = false;
        time_layer(&g, &hw, &nov, &lt);
        assert_rel(cost_stage_dp_s(&g, &hw, &nov, &lt, 3), time_coll_allreduce(&hw, P * gb, 16, 1), 1e-15);
        time_layer(&g, &hw, &lo, &lt);
        assert_true(cost_stage_dp_s(&g, &hw, &lo, &lt, 3) < time_coll_allreduce(&hw, P * gb, 16, 1));
    }
    HwProfile v = hw;
    v.intra.bw *= hw.coll_eff;
    v.inter.bw *= hw.coll_eff;
    assert_rel(time_coll_allreduce(&hw, 1e8, 8, 8), hw.coll_lat + time_allreduce(&v, 1e8, 8, 8), 1e-15);
    assert_rel(time_coll_allgather(&hw, 1e8, 16, 8), hw.coll_lat + time_allgather(&v, 1e8, 16, 8), 1e-15);
    assert_true(time_coll_allreduce(&hw, 1e8, 1, 1) == 0);
    assert_int_equal(time_members_per_node(&hw, 8, 16), 1);
    assert_int_equal(time_members_per_node(&hw, 2, 16), 4);
    assert_int_equal(time_members_per_node(&hw, 1, 4), 4);
}

/* §8 A: the GPT-3 activation table (Korthikanti), b = 1, per layer, GiB */
static void test_activation_table(void **st)
{
    (void)st;
    ModelSpec g = gpt3();
    HwProfile hw = a100();
    Layout lo = layout_for(&g, &hw, 16, 8, 8, 1, 1536);
    lo.flash = false;
    Layout one = lo;
    one.tp = 1;
    one.sp = false;
    assert_rel(memory_layer_acts(&g, &one, RECOMPUTE_NONE) / GIB, 2.6719, 1e-4);
    lo.sp = false;
    assert_rel(memory_layer_acts(&g, &lo, RECOMPUTE_NONE) / GIB, 0.5391, 1e-3);
    assert_rel(memory_layer_acts(&g, &lo, RECOMPUTE_SELECTIVE) / GIB, 0.3047, 1e-3);
    assert_rel(memory_layer_acts(&g, &lo, RECOMPUTE_FULL) / GIB, 0.0469, 1e-3);
    /* first stage under 1F1B holds p micro-batches of L/p layers = L layers */
    assert_rel(memory_inflight(&lo, 0) * lo.layers[0] * memory_layer_acts(&g, &lo, RECOMPUTE_NONE) / GIB, 51.75, 1e-4);
    lo.sp = true;
    assert_rel(memory_layer_acts(&g, &lo, RECOMPUTE_NONE) / GIB, 0.3340, 1e-3);
    assert_rel(memory_layer_acts(&g, &lo, RECOMPUTE_SELECTIVE) / GIB, 0.0996, 1e-3);
    assert_rel(memory_inflight(&lo, 0) * lo.layers[0] * memory_layer_acts(&g, &lo, RECOMPUTE_SELECTIVE) / GIB,
               9.5625, 1e-4);
    /* interleaving factor 1 + (p-1)/(p v) on the first stage */
    lo.vp = 2;
    assert_rel(memory_inflight(&lo, 0) / lo.pp, 1.4375, 1e-12);
    lo.vp = 3;
    assert_rel(memory_inflight(&lo, 0) / lo.pp, 1.2917, 1e-4);
    /* the last stage holds one micro-batch; stage s holds p - s */
    lo.vp = 1;
    assert_rel(memory_inflight(&lo, 7), 1.0, 0);
    assert_rel(memory_inflight(&lo, 3), 5.0, 0);
}

/* §3.2 extras at p = 1: 4 sbh/t (1 + V/h) for the final norm, head input and fp32 logits */
static void test_output_extras(void **st)
{
    (void)st;
    ModelSpec g = gpt3();
    g.dropout = false;   /* no embedding-dropout mask, so only the ids remain on stage 0 */
    HwProfile hw = a100();
    Layout lo = layout_for(&g, &hw, 1, 8, 1, 1, 8);
    lo.flash = false;
    StageMem sm;
    memory_stage(&g, &hw, &lo, 0, &sm);
    double layers = sm.inflight * g.L * memory_layer_acts(&g, &lo, RECOMPUTE_NONE);
    double ids = 8.0 * g.s * sm.inflight;
    assert_rel((sm.bytes[MEM_ACTS] - layers - ids) / GIB, 0.0605, 1e-3);
}

/* §4.2 / §8 A: bubble fractions 7/96 (1F1B) and 3.65 % (v = 2) against ideal time */
static void test_bubble(void **st)
{
    (void)st;
    ModelSpec g = gpt3();
    HwProfile hw = a100();
    CostOpts o;
    cost_opts_default(&o);
    Layout lo = layout_for(&g, &hw, 16, 8, 8, 1, 1536);
    Cost c;
    cost(&g, &hw, &lo, &o, &c);
    double ideal = 96 * c.stage_mb_s[c.peak_stage];
    /* stages differ slightly (embedding, head): compare with the bottleneck stage time */
    double z = 0;
    for (int s = 0; s < lo.pp; s++)
        z = fmax(z, c.stage_mb_s[s]);
    ideal = 96 * z;
    assert_true(c.time[T_BUBBLE] / ideal <= 7.0 / 96 + 1e-12);
    assert_true(c.time[T_BUBBLE] / ideal > 0.8 * 7.0 / 96);
    lo.vp = 2;
    cost(&g, &hw, &lo, &o, &c);
    z = 0;
    for (int s = 0; s < lo.pp; s++)
        z = fmax(z, c.stage_mb_s[s]);
    assert_rel(c.time[T_BUBBLE] / (96 * z), 7.0 / 96 / 2, 1e-9);
}

/* §5: training days */
static void test_days(void **st)
{
    (void)st;
    /* Narayanan Eq. 4: 8TP/(nX), T = 300B, P = 175e9, n = 1024, X = 140 TFLOP/s -> 33.91 days */
    assert_rel(train_days(300e9, 8 * 175e9, 1024, 140e12, 1.0), 33.91, 1e-3);
    /* 1T: T = 450B, P = 1008e9, n = 3072, X = 163 -> 83.88 days */
    assert_rel(train_days(450e9, 8 * 1008.0e9, 3072, 163e12, 1.0), 83.88, 1e-3);
    /* Llama-2-7B on 8 A100 at 40 % MFU with PaLM FLOPs: 1086.8 days */
    ModelSpec l = llama2_7b();
    assert_rel(train_days(2.0e12, spec_flops_per_token(&l, 1, FLOPS_PALM), 8, 312e12, 0.40), 1086.8, 1e-3);
}

/* days from cost() agree with the formula days = tokens C / (n peak MFU 86400) */
static void test_days_consistent(void **st)
{
    (void)st;
    ModelSpec g = gpt3();
    HwProfile hw = a100();
    CostOpts o;
    cost_opts_default(&o);
    o.tokens = 300e9;
    Layout lo = layout_for(&g, &hw, 16, 8, 8, 1, 1536);
    Cost c;
    cost(&g, &hw, &lo, &o, &c);
    double days = train_days(o.tokens, c.thr.flops_per_token, 1024, hw.peak[PREC_BF16], c.thr.mfu);
    assert_rel(c.train.days, days, 1e-9);
}

/* §6: Daly's printed intervals (117, 57, 9.1 min at delta = 5 min) and the 10k-GPU table */
static void test_reliability(void **st)
{
    (void)st;
    assert_rel(train_daly(300, 24 * 3600) / 60, 117, 0.005);
    assert_rel(train_daly(300, 6 * 3600) / 60, 57, 0.01);
    assert_rel(train_daly(300, 15 * 60) / 60, 9.1, 0.01);
    double lambda = 4.736e-4 / 86400;   /* per GPU-second, Llama 3 */
    assert_rel(train_expected_failures(lambda, 10000, 86400), 4.74, 1e-3);
    assert_rel(train_p_any_failure(lambda, 10000, 86400), 0.9912, 1e-3);
    assert_rel(1.0 / (lambda * 10000) / 3600, 5.07, 2e-3);
    double M = 18244;
    assert_rel(train_young(30, M) / 60, 17.4, 0.005);
    assert_rel(train_daly(30, M) / 60, 17.1, 0.005);
    assert_rel(train_young(300, M) / 60, 55.1, 0.005);
    assert_rel(train_daly(300, M) / 60, 51.9, 0.005);
    assert_rel(train_p_any_failure(lambda, 1024, 86400), 0.384, 2e-3);
}

/* the failure price inside cost(): 10k GPUs of a100-80g with Llama 3's rate */
static void test_reliability_in_cost(void **st)
{
    (void)st;
    ModelSpec g = gpt3();
    HwProfile hw = a100();
    CostOpts o;
    cost_opts_default(&o);
    o.mtbf_gpu_hours = 24.0 / 4.736e-4;
    Layout lo = layout_for(&g, &hw, 125, 8, 10, 1, 1500);
    Cost c;
    cost(&g, &hw, &lo, &o, &c);
    assert_rel(c.train.fail_per_day, 4.736, 1e-3);
    assert_rel(c.train.p_fail_day, 0.9912, 1e-3);
    assert_true(c.train.days_with_failures > c.train.days);
    assert_true(c.train.waste > 0 && c.train.waste < 0.5);
    assert_rel(c.train.daly_s, train_daly(c.train.ckpt_write_s, c.train.job_mtbf_s), 1e-12);
}

/* memory falls as tp, pp and ZeRO rise */
static void test_memory_monotone(void **st)
{
    (void)st;
    ModelSpec g = gpt3();
    HwProfile hw = a100();
    CostOpts o;
    cost_opts_default(&o);
    Cost c;
    double prev = INFINITY;
    for (int tp = 1; tp <= 8; tp *= 2) {
        Layout lo = layout_for(&g, &hw, 8, tp, 8, 1, 512);
        cost(&g, &hw, &lo, &o, &c);
        assert_true(c.peak_bytes < prev);
        prev = c.peak_bytes;
    }
    prev = INFINITY;
    for (int pp = 2; pp <= 32; pp *= 2) {
        Layout lo = layout_for(&g, &hw, 8, 8, pp, 1, 512);
        cost(&g, &hw, &lo, &o, &c);
        assert_true(c.peak_bytes < prev);
        prev = c.peak_bytes;
    }
    prev = INFINITY;
    ModelSpec l = llama2_7b();
    for (int z = 0; z <= 3; z++) {
        Layout lo = layout_for(&l, &hw, 8, 1, 1, 1, 64);
        lo.opt = (OptimShard)z;
        cost(&l, &hw, &lo, &o, &c);
        assert_true(c.peak_bytes < prev);
        prev = c.peak_bytes;
    }
    /* recomputation lowers activations */
    Layout lo = layout_for(&g, &hw, 8, 8, 8, 1, 512);
    cost(&g, &hw, &lo, &o, &c);
    double none = c.stage[0].bytes[MEM_ACTS];
    layout_set_recompute(&lo, RECOMPUTE_FULL);
    cost(&g, &hw, &lo, &o, &c);
    assert_true(c.stage[0].bytes[MEM_ACTS] < none / 3);
}

/* a step at dp = N (same micro-batches per replica) is the dp = 1 step plus the DP reduction */
static void test_dp_adds_only_communication(void **st)
{
    (void)st;
    ModelSpec g = gpt3();
    HwProfile hw = a100();
    CostOpts o;
    cost_opts_default(&o);
    Cost c1, cN;
    Layout l1 = layout_for(&g, &hw, 1, 8, 8, 1, 64);
    Layout lN = layout_for(&g, &hw, 16, 8, 8, 1, 64 * 16);
    cost(&g, &hw, &l1, &o, &c1);
    cost(&g, &hw, &lN, &o, &cN);
    assert_true(c1.time[T_DP] == 0);
    assert_true(cN.time[T_DP] > 0);
    assert_rel(cN.step_s - cN.time[T_DP], c1.step_s, 1e-12);
    assert_rel(cN.thr.tokens_per_s, 16 * c1.thr.tokens_per_s * c1.step_s / cN.step_s, 1e-12);
}

/* DP overlap under Megatron's interleaved schedule (cost.c, dp_hidden_tail):
 * each model chunk's gradients are reduced after its own last backward, chunk
 * c's ending c*pp chunk-steps before the flush, launched s chunk-steps late on
 * stage s; chunk c+1's parameters are gathered from s chunk-steps after chunk
 * c's first forward. Where communication outlasts every window (a slow
 * network) the exposed time is the total less the last window: on stage 3 of
 * pp 8 with v = 3 that is 14 backward and 13 forward chunk passes (chunk =
 * pass / 3) against one whole-stage pass each without interleaving. Without
 * overlap v changes nothing. */
static void test_dp_interleaved_window(void **st)
{
    (void)st;
    ModelSpec g = gpt3();
    HwProfile hw = a100();
    hw.inter.bw = 1e9; // 1 GB/s: DP far longer than any window
    Layout l1 = layout_for(&g, &hw, 16, 8, 8, 1, 1536);
    l1.opt = OPT_DISTOPT;
    Layout l3 = l1;
    l3.vp = 3;
    char err[256];
    if (layout_check(&l3, &g, &hw, err, sizeof err) != 0)
        fail_msg("layout_check: %s", err);
    LayerTime lt1, lt3;
    time_layer(&g, &hw, &l1, &lt1);
    time_layer(&g, &hw, &l3, &lt3);
    int s = 3; // a middle stage: no tied-embedding term
    double e1 = cost_stage_dp_s(&g, &hw, &l1, &lt1, s), e3 = cost_stage_dp_s(&g, &hw, &l3, &lt3, s);
    double fwd = l1.layers[s] * (lt1.fwd + lt1.tp_fwd), bwd = l1.layers[s] * (lt1.bwd + lt1.tp_bwd);
    assert_true(e3 < e1);
    assert_rel(e1 - e3, (14.0 / 3 - 1) * bwd + (13.0 / 3 - 1) * fwd, 1e-9);
    hw.dp_overlap = 0;
    assert_rel(cost_stage_dp_s(&g, &hw, &l3, &lt3, s), cost_stage_dp_s(&g, &hw, &l1, &lt1, s), 1e-12);
    /* a fast network: never below zero; on stage 0 (no launch delay) interleaving only
     * widens the window, while a later stage's last chunk reduces after the flush */
    hw = a100();
    hw.inter.bw = 1e12;
    assert_true(cost_stage_dp_s(&g, &hw, &l3, &lt3, s) >= 0);
    assert_true(cost_stage_dp_s(&g, &hw, &l3, &lt3, 0) <= cost_stage_dp_s(&g, &hw, &l1, &lt1, 0));
}

/* The window DP overlap hides its collectives in is one micro-batch pass
 * of the stage, each layer at its own kind's time: in a mixture of experts
 * the MoE layers' backward and forward (router, dispatch, experts), not a
 * dense layer's. GPT-OSS-120B (36 MoE layers) with ep 8 and the distributed
 * optimizer over a slow network, where the reduce-scatter and all-gather
 * outlast both windows: turning the overlap off exposes exactly the two
 * windows, 36 MoE backward and 36 MoE forward passes. (Before the fix the
 * windows were 36 dense layers', under a third of the MoE layers'.) */
static void test_dp_window_moe_layers(void **st)
{
    (void)st;
    char err[256];
    HwProfile hw;
    assert_int_equal(profile_load_builtin("b200", &hw, err, sizeof err), 0);
    hw.inter.bw = 1e9;   /* 1 GB/s: DP far longer than any window */
    hw.dp_overlap = 1;
    ModelSpec m;
    assert_int_equal(presets_find("gpt-oss-120b", &m, err, sizeof err), 0);
    Layout lo = layout_for(&m, &hw, 64, 1, 1, 1, 1280);
    lo.ep = 8, lo.opt = OPT_DISTOPT, lo.moe_imbalance = 1;
    if (layout_check(&lo, &m, &hw, err, sizeof err) != 0)
        fail_msg("layout_check: %s", err);
    LayerTime lt;
    time_layer(&m, &hw, &lo, &lt);
    double on = cost_stage_dp_s(&m, &hw, &lo, &lt, 0);
    hw.dp_overlap = 0;
    double off = cost_stage_dp_s(&m, &hw, &lo, &lt, 0);
    double win = 36 * (lt.moe_bwd + lt.moe_tp_bwd) + 36 * (lt.moe_fwd + lt.moe_tp_fwd);
    assert_true(lt.moe_bwd > 2 * lt.bwd);   /* the kinds differ enough to tell apart */
    assert_rel(off - on, win, 1e-9);
}

/* A profile whose curves are stated for another GPU (eff_ref_hbm_bw) reads
 * them at equal duration: twice the bandwidth moves B bytes in the time the
 * reference moves B/2. */
static void test_curve_reference(void **st)
{
    (void)st;
    HwProfile ref = a100(), fast = ref;
    fast.hbm_bw = 2 * ref.hbm_bw;
    fast.eff_ref_hbm_bw = ref.hbm_bw;
    for (double b = 1e4; b < 1e10; b *= 7.3)
        assert_rel(time_mem_s(&fast, b), time_mem_s(&ref, b / 2), 1e-12);
    fast.eff_ref_hbm_bw = 0;   /* stated for itself: the same curve at the same size, twice as fast */
    assert_rel(time_mem_s(&fast, 1e6), time_mem_s(&ref, 1e6) / 2, 1e-12);
}

/* Calibrate's update before it writes measured curves (hw_curves_local):
 * a profile whose curves are stated for another GPU (b200: both references,
 * h200: the HBM one) comes out with eff_ref_peak = eff_ref_hbm_bw = 0, in the
 * file it writes too, and every time the model derives from it unchanged. */
static void test_curves_local(void **st)
{
    (void)st;
    static const char *const names[] = {"b200", "h200"};
    ModelSpec g = gpt3();
    for (int i = 0; i < 2; i++) {
        HwProfile ref, loc;
        char err[256];
        assert_int_equal(profile_load_builtin(names[i], &ref, err, sizeof err), 0);
        assert_true(ref.eff_ref_hbm_bw > 0);
        loc = ref;
        hw_curves_local(&loc);
        assert_true(loc.eff_ref_peak == 0 && loc.eff_ref_hbm_bw == 0);
        for (double b = 1e4; b < 1e11; b *= 3.7)
            assert_rel(time_mem_s(&loc, b), time_mem_s(&ref, b), 1e-9);
        static const Precision precs[] = {PREC_BF16, PREC_FP8};
        for (int p = 0; p < 2; p++) {
            for (int mbs = 1; mbs <= 8; mbs *= 8) {   // small and large GEMMs and attention calls
                Layout lo = layout_for(&g, &ref, 16, 8, 8, mbs, 1024);
                lo.prec = precs[p];
                LayerTime a, b;
                time_layer(&g, &ref, &lo, &a);
                time_layer(&g, &loc, &lo, &b);
                assert_rel(b.fwd, a.fwd, 1e-9);
                assert_rel(b.bwd, a.bwd, 1e-9);
                assert_rel(b.rc_sel, a.rc_sel, 1e-9);
            }
        }
        char *text = profile_to_json(&loc);   // what calibrate writes
        HwProfile back;
        assert_non_null(text);
        assert_int_equal(profile_parse_json(text, "calibrated", &back, err, sizeof err), 0);
        free(text);
        assert_true(back.eff_ref_peak == 0 && back.eff_ref_hbm_bw == 0);
        assert_rel(time_mem_s(&back, 3e7), time_mem_s(&ref, 3e7), 1e-9);
    }
}

/* Blackwell's GEMM curve (NOTES step 25): the Hopper curve read at equal
 * duration, times 0.834 from published B200 cuBLAS matmuls. Worked by hand:
 * pytorch/ao PR #2427 (bench_matmul.py on a B200) times torch.mm in bf16 at
 * 4096, 6144 and 8192 cubed at 0.627, 0.646 and 0.631 of 2.25 PFLOP/s; the
 * profile's curve is stated as sustained training, 0.835 of a synthetic
 * matmul (h100-sxm's fit, step 11), so the profile divided by 0.835 must give
 * the synthetic figure. Before step 25 it gave 0.735, 0.765, 0.784, 14-24 %
 * high. Hopper's own anchor, 8192 cubed at 0.80 of 989 TFLOP/s (measured on
 * an H200), holds as before. */
static void test_blackwell_gemm_measured(void **st)
{
    (void)st;
    HwProfile b, h;
    char err[256];
    assert_int_equal(profile_load_builtin("b200", &b, err, sizeof err), 0);
    assert_int_equal(profile_load_builtin("h100-sxm", &h, err, sizeof err), 0);
    static const double n[] = {4096, 6144, 8192}, measured[] = {0.627, 0.646, 0.631};
    for (int i = 0; i < 3; i++) {
        double flops = 2.0 * n[i] * n[i] * n[i];
        double at = flops * b.eff_ref_peak / b.peak[PREC_BF16];   // equal duration on the reference
        assert_rel(hw_eff(&b.gemm_eff, at) / 0.835, measured[i], 0.06);
    }
    assert_rel(hw_eff(&h.gemm_eff, 2.0 * 8192.0 * 8192 * 8192) / 0.835, 0.80, 0.02);
}

/* a layout that does not fit is still predicted, with the overflow */
static void test_does_not_fit(void **st)
{
    (void)st;
    ModelSpec g = gpt3();
    HwProfile hw = a100();
    CostOpts o;
    cost_opts_default(&o);
    Cost c;
    Layout lo = layout_for(&g, &hw, 1, 8, 1, 1, 8);
    cost(&g, &hw, &lo, &o, &c);
    assert_false(c.fits);
    assert_true(c.peak_bytes > c.capacity_bytes);
    assert_true(c.step_s > 0 && isfinite(c.thr.mfu));
}

/* layouts that do not divide are refused with the numbers that clash */
static void test_layout_errors(void **st)
{
    (void)st;
    ModelSpec g = gpt3();
    HwProfile hw = a100();
    char err[256];
    Layout lo;
    layout_default(&lo);
    lo.gbs = 1536;
    lo.tp = 7;
    assert_int_equal(layout_check(&lo, &g, &hw, err, sizeof err), -1);
    assert_non_null(strstr(err, "tp 7 does not divide heads 96"));
    lo.tp = 8, lo.dp = 5;
    assert_int_equal(layout_check(&lo, &g, &hw, err, sizeof err), -1);
    assert_non_null(strstr(err, "not a multiple of dp*mbs"));
    /* pp x vp past INT_MAX (a fuzzed plan file): refused, no int overflow
     * (UBSan in CI's sanitizer pass); 4 x 1e9 chunks of 96 layers */
    lo.dp = 1, lo.tp = 8, lo.pp = 4, lo.vp = 1000000000;
    assert_int_equal(layout_check(&lo, &g, &hw, err, sizeof err), -1);
    assert_non_null(strstr(err, "pp*vp"));
    lo.vp = 1;
    lo.dp = 1, lo.pp = 200;
    assert_int_equal(layout_check(&lo, &g, &hw, err, sizeof err), -1);
    assert_non_null(strstr(err, "pp 200 is larger than the 96 layers"));
    lo.pp = 8, lo.vp = 5;
    assert_int_equal(layout_check(&lo, &g, &hw, err, sizeof err), -1);
    assert_non_null(strstr(err, "not a multiple of pp*vp"));
    lo.vp = 1, lo.opt = OPT_ZERO3;
    assert_int_equal(layout_check(&lo, &g, &hw, err, sizeof err), -1);
    assert_non_null(strstr(err, "ZeRO-3 cannot combine with pp 8"));
    lo.opt = OPT_ZERO0, lo.prec = PREC_FP8;
    assert_int_equal(layout_check(&lo, &g, &hw, err, sizeof err), -1);
    assert_non_null(strstr(err, "does not support fp8"));
    lo.prec = PREC_BF16;
    lo.layers[0] = 20;
    for (int s = 1; s < 8; s++)
        lo.layers[s] = 10;
    assert_int_equal(layout_check(&lo, &g, &hw, err, sizeof err), -1);
    assert_non_null(strstr(err, "sum to 90"));
    lo.layers[0] = 26;
    assert_int_equal(layout_check(&lo, &g, &hw, err, sizeof err), 0);
}

/* uneven defaults: 30 layers on pp 4 put the extra layers in the middle */
static void test_uneven_default(void **st)
{
    (void)st;
    ModelSpec m = {.L = 30, .h = 1024, .a = 16, .vocab = 50257, .s = 1024, .tied = true};
    char err[256];
    assert_int_equal(spec_validate(&m, err, sizeof err), 0);
    HwProfile hw = a100();
    Layout lo = layout_for(&m, &hw, 1, 1, 4, 1, 8);
    assert_int_equal(lo.layers[0], 7);
    assert_int_equal(lo.layers[1], 8);
    assert_int_equal(lo.layers[2], 8);
    assert_int_equal(lo.layers[3], 7);
}

/* efficiency curves interpolate in log size and clamp at the ends */
static void test_eff_curve(void **st)
{
    (void)st;
    EffCurve c = {.n = 2, .pt = {{1e9, 0.5}, {1e11, 0.9}}};
    assert_rel(hw_eff(&c, 1e10), 0.7, 1e-12);
    assert_rel(hw_eff(&c, 1e3), 0.5, 0);
    assert_rel(hw_eff(&c, 1e15), 0.9, 0);
    EffCurve none = {0};
    assert_rel(hw_eff(&none, 5), 1.0, 0);
}

/* collectives: ring within a node; spanning nodes costs more than staying inside */
static void test_collectives(void **st)
{
    (void)st;
    HwProfile hw = a100();
    double S = 1 << 30;
    double ring8 = time_allreduce(&hw, S, 8, 8);
    assert_rel(ring8, 14 * hw.intra.lat + 2.0 * 7 / 8 * S / hw.intra.bw, 1e-12);
    assert_true(time_allreduce(&hw, S, 16, 8) > ring8);
    assert_true(time_allreduce(&hw, S, 1, 1) == 0);
    assert_rel(time_allgather(&hw, S, 8, 8), 7 * hw.intra.lat + 7.0 / 8 * S / hw.intra.bw, 1e-12);
}

/* Megatron's fused scale-mask-softmax needs micro-batch x heads per TP rank
 * to be a multiple of 4; below that PyTorch runs it unfused in fp32. So at
 * tp 8, micro-batch 1, a GPT-2-style model with 16 heads is slower per layer
 * than the same model with 32 heads (twice the softmax work, fused); at
 * micro-batch 2 both are fused and the 32-head model is not faster. */
static double layer_s(const ModelSpec *m, const HwProfile *hw, const Layout *lo)
{
    LayerTime t;
    time_layer(m, hw, lo, &t);
    return t.fwd + t.bwd + t.rc_full + t.tp_fwd + t.tp_bwd + t.tp_rc;
}

static void test_softmax_fallback(void **st)
{
    (void)st;
    HwProfile hw = a100();
    ModelSpec m16 = gpt3();
    m16.L = 12, m16.h = 2048, m16.a = m16.g = 16, m16.d_head = 0, m16.f = 8192, m16.s = 1024;
    char err[256];
    assert_int_equal(spec_validate(&m16, err, sizeof err), 0);
    ModelSpec m32 = m16;
    m32.a = m32.g = 32;
    assert_int_equal(spec_validate(&m32, err, sizeof err), 0);
    for (int mbs = 1; mbs <= 2; mbs++) {
        Layout lo = layout_for(&m16, &hw, 1, 8, 1, mbs, 8);
        lo.flash = false;
        double t16 = layer_s(&m16, &hw, &lo), t32 = layer_s(&m32, &hw, &lo);
        if (mbs == 1 && !(t16 > t32))
            fail_msg("tp 8 mbs 1: 16 heads (unfused softmax) %.4g ms <= 32 heads (fused) %.4g ms", t16 * 1e3, t32 * 1e3);
        if (mbs == 2 && !(t16 <= t32))
            fail_msg("tp 8 mbs 2: 16 heads %.4g ms > 32 heads %.4g ms, both fused", t16 * 1e3, t32 * 1e3);
    }
    /* memory: activations are linear in the micro-batch except that the
     * fallback keeps its softmax output in fp32 (4 bytes a score, not 2) */
    Layout l1 = layout_for(&m16, &hw, 1, 8, 1, 1, 8), l2 = layout_for(&m16, &hw, 1, 8, 1, 2, 8);
    l1.flash = l2.flash = false;
    double a1 = memory_layer_acts(&m16, &l1, RECOMPUTE_NONE), a2 = memory_layer_acts(&m16, &l2, RECOMPUTE_NONE);
    assert_rel(2.0 * a1 - a2, 2.0 * (4.0 - 2.0) * m16.a * (double)m16.s * m16.s / 8, 1e-9);
}

/* fp8 training (Transformer Engine): only the linear layers' GEMMs run in
 * fp8. The output layer (Megatron's own ColumnParallelLinear) and the
 * attention core stay bf16, so an infinitely fast fp8 datapath leaves them;
 * the quantization passes make fp8 slower than bf16 on a GPU whose fp8 is
 * no faster. */
static void test_fp8_rules(void **st)
{
    (void)st;
    HwProfile hw;
    char err[256];
    assert_int_equal(profile_load_builtin("h100-sxm", &hw, err, sizeof err), 0);
    ModelSpec m = gpt3();
    m.L = 4, m.h = 1024, m.a = m.g = 8, m.d_head = 0, m.f = 4096, m.s = 16384;
    assert_int_equal(spec_validate(&m, err, sizeof err), 0);
    Layout bf = layout_for(&m, &hw, 1, 1, 1, 1, 1), f8 = bf;
    f8.prec = PREC_FP8;
    assert_rel(time_head(&m, &hw, &f8), time_head(&m, &hw, &bf), 1e-12);

    HwProfile fast = hw;
    fast.peak[PREC_FP8] = 1e30;   /* fp8 GEMMs free: what is left is bf16 attention and memory */
    double t_bf = layer_s(&m, &hw, &bf), t_fast = layer_s(&m, &fast, &f8);
    if (!(t_fast > 0.5 * t_bf))
        fail_msg("s 16384, attention-bound: fp8 with free GEMMs %.4g ms, bf16 %.4g ms", t_fast * 1e3, t_bf * 1e3);

    HwProfile same = hw;
    same.peak[PREC_FP8] = hw.peak[PREC_BF16];
    if (!(layer_s(&m, &same, &f8) > t_bf))
        fail_msg("fp8 at the bf16 rate must pay its quantization passes");

    /* a profile with fp8 and no bf16 rate (found by fuzz_profile): all in fp8, finite */
    HwProfile nobf = hw;
    nobf.peak[PREC_BF16] = 0;
    double t8 = layer_s(&m, &nobf, &f8), th = time_head(&m, &nobf, &f8);
    if (!(isfinite(t8) && t8 > 0 && isfinite(th) && th > 0))
        fail_msg("fp8 without a bf16 peak: layer %g s, head %g s", t8, th);
}

/* §2: for MoE, MLA and MTP, FLOPS_CAUSAL is Megatron-LM's
 * num_floating_point_operations (training.py at d98e8a6) per token, here
 * written out term by term as Megatron writes it, for DeepSeek-V3 (MLA, 3
 * dense + 58 MoE layers, 1 MTP module) and Mixtral (GQA, every layer MoE). */
static void test_moe_flops_megatron(void **state)
{
    (void)state;
    char err[256];
    ModelSpec d;
    assert_int_equal(presets_find("deepseek-v3", &d, err, sizeof err), 0);
    assert_int_equal(spec_validate(&d, err, sizeof err), 0);
    double h = 7168, s = d.s, n = 128, V = (double)spec_padded_vocab(&d, 1), mtp = 1;
    double q_term = 1536 * (h + n * (128 + 64) + 1);
    double attn = 6 * (q_term + 512 * (h + n * (128 + 128) + 1) + h * 64 + n * 128 * h);
    double core = 6 * (n * (128 + 64) / 2 + n * 128 / 2) * s;   /* per token: s^2 * term / s */
    double layers = 61 + mtp, moe = 58 + mtp, dense = 3;
    double meg = 6 * h * (18432 * 3 * dense + 2048 * 8 * 3 * moe + 2048 * 3 * moe) + attn * layers +
                 6 * mtp * (3 * h + 2 * h * h) + 6 * h * V * (mtp + 1) + core * layers;
    double got = spec_flops_per_token(&d, 1, FLOPS_CAUSAL);
    assert_true(fabs(got / meg - 1) < 1e-12);
    /* full attention doubles the core term only */
    assert_true(fabs(spec_flops_per_token(&d, 1, FLOPS_FULL_ATTN) - got - core * layers) / got < 1e-12);
    /* 6n is 6 * N_active (Megatron's convention: no biases) */
    assert_true(spec_flops_per_token(&d, 1, FLOPS_6N) == 6.0 * (double)spec_params_active(&d, 1, PARAMS_MEGATRON));

    ModelSpec x;
    assert_int_equal(presets_find("mixtral-8x7b", &x, err, sizeof err), 0);
    assert_int_equal(spec_validate(&x, err, sizeof err), 0);
    h = 4096, s = x.s, V = 32000;
    double qp = 128 * 32, kvp = 128 * 8;
    meg = 6 * h * (14336 * 2 * 3) * 32 + 6 * (h * (qp + 2 * kvp) + qp * h) * 32 + 6 * qp / 2 * 2 * s * 32 + 6 * h * V;
    assert_true(fabs(spec_flops_per_token(&x, 1, FLOPS_CAUSAL) / meg - 1) < 1e-12);
    /* the per-layer split the timing code reads: router in, and the sum is a layer's GEMMs */
    assert_true(spec_mlp_flops_fwd(&x, true) == 2.0 * (2 * 3 * 4096.0 * 14336 + 4096.0 * 8));
    assert_true(spec_mlp_flops_fwd(&x, false) + spec_attn_gemm_flops_fwd(&x) == spec_layer_gemm_flops_fwd(&x));
}

/* §1: MoE counts from their parts, active = total less the unrouted experts,
 * and a dense model unchanged by the new fields. */
static void test_moe_counts(void **state)
{
    (void)state;
    char err[256];
    ModelSpec x;
    assert_int_equal(presets_find("mixtral-8x7b", &x, err, sizeof err), 0);
    assert_int_equal(spec_validate(&x, err, sizeof err), 0);
    int64_t expert = 3LL * 4096 * 14336, attn = 2LL * 4096 * 4096 + 2LL * 4096 * 1024;
    assert_int_equal(spec_expert_params(&x), expert);
    assert_int_equal(spec_router_params(&x), 4096LL * 8);
    assert_int_equal(spec_attn_params(&x), attn);
    int64_t layer = attn + 8 * expert + 4096LL * 8 + 2 * 4096;
    assert_int_equal(spec_moe_layer_params(&x), layer);
    assert_int_equal(spec_params(&x, 1, PARAMS_EXACT), 32 * layer + 4096 + 2LL * 32000 * 4096);
    assert_int_equal(spec_params_active(&x, 1, PARAMS_EXACT), spec_params(&x, 1, PARAMS_EXACT) - 32LL * 6 * expert);
    /* --experts 0 makes it dense: the MoE fields are cleared, counts are the dense ones */
    ModelSpec d = x;
    d.experts = 0;
    assert_int_equal(spec_validate(&d, err, sizeof err), 0);
    assert_int_equal(d.topk, 0);
    assert_int_equal(spec_params(&d, 1, PARAMS_EXACT), 32 * spec_layer_params(&d) + 4096 + 2LL * 32000 * 4096);
    assert_int_equal(spec_params_active(&d, 1, PARAMS_EXACT), spec_params(&d, 1, PARAMS_EXACT));
    /* validation names the clash */
    ModelSpec b = x;
    b.topk = 9;
    assert_int_equal(spec_validate(&b, err, sizeof err), -1);
    assert_non_null(strstr(err, "topk 9"));
    b = x;
    b.attn = ATTN_MLA;
    assert_int_equal(spec_validate(&b, err, sizeof err), -1);
    assert_non_null(strstr(err, "kv-lora-rank"));
    b = x;
    b.moe_first_dense = 32;
    assert_int_equal(spec_validate(&b, err, sizeof err), -1);
    assert_non_null(strstr(err, "no MoE layer"));
}

/* The executor's MLA and MTP placement in the state bytes, by hand: MLA's
 * down-projections are replicated over tp (Megatron-LM), and an untied
 * model with MTP keeps the embedding on its last stage too. */
static void test_mla_mtp_state_params(void **state)
{
    (void)state;
    char err[256];
    ModelSpec m;
    memset(&m, 0, sizeof m);
    m.L = 4, m.h = 64, m.a = 4, m.s = 32, m.vocab = 60, m.vocab_div = 8, m.f = 128;
    m.mlp = MLP_SWIGLU, m.norm = NORM_RMSNORM, m.pos = POS_ROPE;
    m.attn = ATTN_MLA, m.q_lora_rank = 32, m.kv_lora_rank = 32, m.qk_nope_dim = 16, m.qk_rope_dim = 8;
    m.v_head_dim = 16;
    assert_int_equal(spec_validate(&m, err, sizeof err), 0);
    Layout lo;
    layout_default(&lo);
    lo.tp = 2, lo.pp = 2;
    /* replicated q_a 64x32 and kv_a 64x(32+8): 4608; split q_b 32x4x24,
     * kv_b 32x4x32, proj 64x64: 11264 / 2; norms 2 x 64 + 32 + 32; SwiGLU
     * 3 x 64 x 128 / 2 */
    double layer = 4608 + 11264 / 2 + 192 + 12288;
    assert_rel(memory_layer_params(&m, &lo, false, NULL), layer, 1e-15);
    /* the last stage's own tensors: norm 64 and head 64 x 64 / 2 (vocab 60
     * padded to 64); with one MTP module also the embedding copy 64 x 64 / 2,
     * the module's layer, its projection 2 x 64 x 64 / 2 and three norms */
    assert_rel(memory_stage_params(&m, &lo, 1, 0), 64 + 2048, 1e-15);
    m.mtp_layers = 1;
    assert_int_equal(spec_validate(&m, err, sizeof err), 0);
    assert_rel(memory_stage_params(&m, &lo, 1, 0), 64 + 2048 + 2048 + layer + 4096 + 192, 1e-15);
    m.tied = true;   /* tied: the head is the copy */
    assert_rel(memory_stage_params(&m, &lo, 1, 0), 64 + 2048 + layer + 4096 + 192, 1e-15);
}

/* Megatron's --moe-layer-freq: the int form, the list forms, and refusals. */
static void test_moe_freq(void **state)
{
    (void)state;
    char err[256];
    int f, k, n;
    assert_int_equal(spec_parse_moe_freq("2", &f, &k, &n, err, sizeof err), 0);
    assert_true(f == 2 && k == 0 && n == 0);
    assert_int_equal(spec_parse_moe_freq("[0]*3+[1]*58", &f, &k, &n, err, sizeof err), 0);
    assert_true(f == 1 && k == 3 && n == 61);
    assert_int_equal(spec_parse_moe_freq("[0,1]*24", &f, &k, &n, err, sizeof err), 0);
    assert_true(f == 2 && k == 1 && n == 48);
    assert_int_equal(spec_parse_moe_freq("[0]*3+([1]+[0]*2)*4", &f, &k, &n, err, sizeof err), 0);
    assert_true(f == 3 && k == 3 && n == 15);
    /* fuzz_sizes found it: an empty list repeated 2^31·10 times spun for a
     * minute (the repeat loop ran with nothing to copy); now it is nothing */
    assert_int_equal(spec_parse_moe_freq("[]*21474836470+[0]*2+[1]*6", &f, &k, &n, err, sizeof err), 0);
    assert_true(k == 2 && n == 8);
    assert_int_equal(spec_parse_moe_freq("[1,1,0,1]", &f, &k, &n, err, sizeof err), -1);
    assert_non_null(strstr(err, "layer 2"));
    assert_int_equal(spec_parse_moe_freq("[0]*4", &f, &k, &n, err, sizeof err), -1);
    assert_int_equal(spec_parse_moe_freq("[2]", &f, &k, &n, err, sizeof err), -1);
    assert_int_equal(spec_parse_moe_freq("[0]*3+", &f, &k, &n, err, sizeof err), -1);
    assert_int_equal(spec_parse_moe_freq("[1]*99999999", &f, &k, &n, err, sizeof err), -1);
    /* Megatron's int rule: layer i MoE when i % freq == 0 */
    ModelSpec m = gpt3();
    m.experts = 8, m.topk = 2, m.moe_freq = 2;
    assert_int_equal(spec_validate(&m, err, sizeof err), 0);
    assert_true(spec_layer_is_moe(&m, 0) && !spec_layer_is_moe(&m, 1) && spec_layer_is_moe(&m, 94));
    assert_int_equal(spec_moe_layers(&m), 48);
    char buf[64];
    spec_format_moe_freq(&m, buf, sizeof buf);
    assert_string_equal(buf, "2");
    /* the printed form parses back to the same pattern */
    m.moe_first_dense = 3, m.moe_freq = 3;
    spec_format_moe_freq(&m, buf, sizeof buf);
    assert_int_equal(spec_parse_moe_freq(buf, &f, &k, &n, err, sizeof err), 0);
    assert_true(f == 3 && k == 3 && n == m.L);
}

/* ZeRO-2 beside pipeline parallelism (issue 21, Llama 3's FSDP): refused
 * unless the stack shards gradients there (llama3-meta's zero2_pp); ZeRO-3
 * with pp always (and the executors, refuse.c, run neither). Under it each micro-batch's gradients are reduce-scattered
 * into the shard (ZeRO-2's traffic, m times a step) and the updated weights
 * all-gathered once: with nothing overlapped a middle stage's DP time is
 * m RS(P g) + AG(P w), worked from the collectives, and the stage keeps
 * 1/dp of the gradients. */
static void test_zero2_beside_pp(void **st)
{
    (void)st;
    char err[300];
    ModelSpec g = gpt3();
    HwProfile hw = a100();
    Layout lo = layout_for(&g, &hw, 16, 8, 8, 1, 1536);
    lo.opt = OPT_ZERO2;
    assert_int_equal(layout_check(&lo, &g, &hw, err, sizeof err), -1);
    assert_non_null(strstr(err, "ZeRO-2 cannot combine with pp 8 under this stack"));
    assert_non_null(strstr(err, "llama3-meta"));
    assert_int_equal(layout_check_stack(&lo, &hw, err, sizeof err), -1);
    HwProfile z = hw;
    assert_int_equal(stacks_apply(&z, stacks_index("llama3-meta"), err, sizeof err), 0);
    assert_true(z.zero2_pp);
    assert_int_equal(layout_check(&lo, &g, &z, err, sizeof err), 0);
    Layout l3 = lo;
    l3.opt = OPT_ZERO3;
    assert_int_equal(layout_check(&l3, &g, &z, err, sizeof err), -1);
    assert_non_null(strstr(err, "ZeRO-3 cannot combine with pp 8"));
    /* the Megatron export writes Megatron-FSDP with pp 1 only: its check says so */
    char why[300];
    assert_int_equal(layout_megatron_check(&lo, &g, why, sizeof why), -1);
    assert_non_null(strstr(why, "ZeRO-2 with pp 8"));
    /* the cost: every micro-batch's reduce-scatter, one gather */
    z.dp_overlap = 0;
    LayerTime lt;
    time_layer(&g, &z, &lo, &lt);
    CostOpts co;
    cost_opts_default(&co);
    Cost c;
    cost(&g, &z, &lo, &co, &c);
    double P = c.stage[3].params, gb = memory_grad_bytes(&lo), wb = memory_weight_bytes(&lo);
    int mb = layout_microbatches(&lo), k = time_members_per_node(&z, lo.tp, 16);
    double rs = time_coll_allgather(&z, P * gb, 16, k), ag = time_coll_allgather(&z, P * wb, 16, k);
    assert_rel(cost_stage_dp_s(&g, &z, &lo, &lt, 3), mb * rs + ag, 1e-12);
    /* overlapped (NOTES step 59): the reduce-scatter stream runs under the
     * compute after the stage's first backward. Stage 3 of 8 (no
     * interleaving) runs pp - s = 5 forwards before it, then the other
     * m - 5 forwards and m - 1 backwards; the last micro-batch's own
     * backward hides the rest. Slow links (1/50 of the bandwidth) so that the
     * stream outlasts its cover: exposed m RS - (after + B) + AG. */
    z.dp_overlap = 1;
    z.inter.bw /= 50, z.intra.bw /= 50;
    time_layer(&g, &z, &lo, &lt);
    rs = time_coll_allgather(&z, P * gb, 16, k), ag = time_coll_allgather(&z, P * wb, 16, k);
    int n3 = lo.layers[3];
    double F = n3 * (lt.fwd + lt.tp_fwd), B = n3 * (lt.bwd + lt.tp_bwd);
    double after = (mb - 5) * F + (mb - 1) * B;
    assert_true(mb * rs - after - B > rs - B && rs > B);   /* the stream's excess sets it */
    assert_rel(cost_stage_dp_s(&g, &z, &lo, &lt, 3), mb * rs - after - B + ag, 1e-12);
    /* fast links: the last reduce-scatter's excess over its backward is all that shows */
    z.inter.bw *= 5000, z.intra.bw *= 5000;
    time_layer(&g, &z, &lo, &lt);
    rs = time_coll_allgather(&z, P * gb, 16, k), ag = time_coll_allgather(&z, P * wb, 16, k);
    B = n3 * (lt.bwd + lt.tp_bwd);
    assert_rel(cost_stage_dp_s(&g, &z, &lo, &lt, 3), fmax(0.0, rs - B) + ag, 1e-12);
    double w, gr, o;
    memory_state_bytes(&lo, &w, &gr, &o);
    assert_rel(gr, gb / 16, 1e-15);
    assert_rel(w, wb, 1e-15);
}

/* Parallel folding: etp x ep must divide tp x cp x dp, ep the experts. */
static void test_layout_ep(void **state)
{
    (void)state;
    char err[256];
    ModelSpec x;
    assert_int_equal(presets_find("mixtral-8x7b", &x, err, sizeof err), 0);
    assert_int_equal(spec_validate(&x, err, sizeof err), 0);
    Layout lo;
    layout_default(&lo);
    lo.dp = 4, lo.tp = 2, lo.ep = 8, lo.etp = 1, lo.gbs = 64;
    assert_int_equal(layout_check(&lo, &x, NULL, err, sizeof err), 0);
    assert_int_equal(layout_edp(&lo), 1);
    lo.etp = 0;   /* = tp: 2 x 8 = 16 does not divide 8 */
    assert_int_equal(layout_check(&lo, &x, NULL, err, sizeof err), -1);
    assert_non_null(strstr(err, "etp*ep = 2*8"));
    lo.ep = 3, lo.etp = 1;
    assert_int_equal(layout_check(&lo, &x, NULL, err, sizeof err), -1);
    assert_non_null(strstr(err, "ep 3 does not divide the 8 experts"));
    ModelSpec g = gpt3();
    layout_default(&lo);
    lo.ep = 2, lo.dp = 2, lo.gbs = 8;
    assert_int_equal(layout_check(&lo, &g, NULL, err, sizeof err), -1);
    assert_non_null(strstr(err, "dense"));
}

/* Overlap is a switch (issue 21, mechanism 1). TP: off, every TP collective
 * is exposed whatever the profile's tp_overlap says; on (with SP), the
 * profile's achievable fraction hides, never longer than the GEMMs of the
 * pass. DP: without --overlap-param-gather the distributed optimizer's
 * all-gather hides behind nothing. */
static void test_overlap_switches(void **st)
{
    (void)st;
    ModelSpec g = gpt3();
    HwProfile hw = a100();
    hw.tp_overlap = 1;
    Layout lo = layout_for(&g, &hw, 16, 8, 8, 1, 1536);
    lo.opt = OPT_DISTOPT;
    LayerTime off, on;
    time_layer(&g, &hw, &lo, &off);
    /* under SP each pass is all-gathers and reduce-scatters (test_sp_collectives) */
    double ag = time_coll_allgather(&hw, hw_precision_bytes(lo.prec) * layout_mb_tokens(&g, &lo) * g.h, 8,
                                    time_members_per_node(&hw, 1, 8));
    assert_rel(off.tp_fwd, 4 * ag, 1e-12);
    assert_rel(off.tp_bwd, 6 * ag, 1e-12);
    lo.tp_comm_overlap = true;
    time_layer(&g, &hw, &lo, &on);
    /* 175B's GEMMs at tp 8 last far longer than their collectives: all hidden */
    assert_true(on.tp_fwd == 0 && on.tp_bwd == 0 && on.tp_rc == 0);
    assert_rel(on.fwd, off.fwd, 1e-12);   /* the compute itself is what it was */
    hw.tp_overlap = 0.5;
    time_layer(&g, &hw, &lo, &on);
    assert_rel(on.tp_fwd, 2 * ag, 1e-12);
    assert_rel(on.tp_bwd, 3 * ag, 1e-12);
    /* no SP: Megatron's --tp-comm-overlap needs it; nothing hides */
    lo.sp = false;
    time_layer(&g, &hw, &lo, &on);
    LayerTime nosp;
    lo.tp_comm_overlap = false;
    time_layer(&g, &hw, &lo, &nosp);
    assert_true(on.tp_fwd == nosp.tp_fwd && nosp.tp_fwd > 0);
    lo.sp = true;
    /* a tiny model: the GEMMs are shorter than the collectives, so what exceeds them stays exposed */
    ModelSpec t = g;
    t.h = 512, t.a = 8, t.g = 8, t.f = 2048, t.L = 8, t.s = 2048;
    Layout lt = layout_for(&t, &hw, 1, 8, 1, 1, 8);
    hw.tp_overlap = 1;
    lt.tp_comm_overlap = true;
    LayerTime small, small_off;
    time_layer(&t, &hw, &lt, &small);
    lt.tp_comm_overlap = false;
    time_layer(&t, &hw, &lt, &small_off);
    assert_true(small.tp_fwd > 0 && small.tp_fwd < small_off.tp_fwd);
    /* DP: the parameter all-gather of the distributed optimizer */
    Cost *a = malloc(sizeof *a), *b = malloc(sizeof *b);
    CostOpts o;
    cost_opts_default(&o);
    lo = layout_for(&g, &hw, 64, 8, 1, 1, 1536);
    lo.opt = OPT_DISTOPT;
    layout_set_recompute(&lo, RECOMPUTE_FULL);
    cost(&g, &hw, &lo, &o, a);
    lo.overlap_param = false;
    cost(&g, &hw, &lo, &o, b);
    assert_true(b->time[T_DP] > a->time[T_DP]);
    /* and it takes effect only with --overlap-grad-reduce, as Megatron requires */
    lo.overlap_grad = false;
    cost(&g, &hw, &lo, &o, a);
    lo.overlap_param = true;
    cost(&g, &hw, &lo, &o, b);
    assert_true(a->time[T_DP] == b->time[T_DP]);
    free(a), free(b);
}

/* Sequence parallelism's TP communication, worked by hand for tp 8 in one
 * DGX A100 node, GPT-3 175B, micro-batch 1, s = 2048, bf16: the layer's
 * activation is M = 2 * 2048 * 12288 bytes. One NCCL all-gather (or
 * reduce-scatter) of M over 8 ranks costs coll_lat + 7 intra.lat +
 * 7/8 M / (coll_eff bw). Forward: AG before QKV and FC1, RS after the
 * projection and FC2 = 4 calls. Backward: AG of the projection's and FC2's
 * output gradients, RS of QKV's and FC1's input gradients, and QKV's and
 * FC1's inputs gathered again for their weight gradients (Megatron keeps
 * them sequence-sharded) = 6 calls, three all-reduces' worth of bytes where
 * the layer without SP moves two. Without SP: 2 all-reduces each way. */
static void test_sp_collectives(void **st)
{
    (void)st;
    ModelSpec g = gpt3();
    HwProfile hw = a100();
    Layout lo = layout_for(&g, &hw, 1, 8, 1, 1, 8);
    assert_true(lo.sp);
    double M = 2.0 * 2048 * 12288, bw = hw.intra.bw * hw.coll_eff;
    double ag = hw.coll_lat + 7 * hw.intra.lat + 7.0 / 8 * M / bw;
    double ar = hw.coll_lat + 14 * hw.intra.lat + 2 * 7.0 / 8 * M / bw;
    LayerTime t;
    time_layer(&g, &hw, &lo, &t);
    assert_rel(t.tp_fwd, 4 * ag, 1e-9);
    assert_rel(t.tp_bwd, 6 * ag, 1e-9);
    assert_rel(t.tp_rc, 4 * ag, 1e-9);
    lo.sp = false;
    time_layer(&g, &hw, &lo, &t);
    assert_rel(t.tp_fwd, 2 * ar, 1e-9);
    assert_rel(t.tp_bwd, 2 * ar, 1e-9);
    /* the backward's bytes: 3 all-reduces' worth with SP, 2 without */
    double bytes_sp = 6 * 7.0 / 8 * M, bytes_nosp = 2 * 2 * 7.0 / 8 * M;
    assert_rel(bytes_sp / bytes_nosp, 1.5, 1e-12);
}

/* A pipeline boundary without SP (Megatron's scatter-gather): GPT-3 175B,
 * tp 8, pp 8 on DGX A100s, micro-batch 1, bf16. The activation
 * M = 2 * 2048 * 12288 bytes goes to the next stage as 8 pieces of M/8,
 * one per TP rank, over InfiniBand (tp·dp = 8 fills the node), and the
 * receiver all-gathers them over NVLink: per micro-batch 2 (activation and
 * gradient) x (p2p(M/8) + AG(M over 8)). Under SP the stage takes its M/8
 * piece as it is: no gather. */
static void test_pp_scatter_gather(void **st)
{
    (void)st;
    ModelSpec g = gpt3();
    HwProfile hw = a100();
    hw.pp_overlap = 0;
    Layout lo = layout_for(&g, &hw, 1, 8, 8, 1, 64);
    double M = 2.0 * 2048 * 12288;
    double p2p = hw.coll_lat + hw.inter.lat + M / 8 / (hw.inter.bw * hw.coll_eff);
    double ag = hw.coll_lat + 7 * hw.intra.lat + 7.0 / 8 * M / (hw.intra.bw * hw.coll_eff);
    assert_rel(time_pp_mb(&g, &hw, &lo), 2 * p2p, 1e-9);
    lo.sp = false;
    assert_rel(time_pp_mb(&g, &hw, &lo), 2 * (p2p + ag), 1e-9);
    lo.vp = 3;   /* interleaved: every chunk boundary */
    assert_rel(time_pp_mb(&g, &hw, &lo), 6 * (p2p + ag), 1e-9);
}

/* DeepSpeed's pipeline engine (HwProfile.pp_p2p_serial, set by the
 * megatron-deepspeed stacks): each send and receive is its own blocking
 * call, so a stage waits on four transfers a micro-batch (activation in and
 * out, gradient in and out) where Megatron's batched send/recv pairs waits
 * on two; the receiver's NVLink gather of the tp pieces stays one per
 * received tensor. GPT-3 175B, tp 8, pp 8, no SP, micro-batch 1, bf16, on
 * round numbers: call 50 us, IB 5 us and 25 GB/s, NVLink 0 us and 300 GB/s,
 * NCCL at full bandwidth. M = 2 * 2048 * 12288 = 50,331,648 bytes:
 *   p2p of M/8 = 50e-6 + 5e-6 + 6,291,456 / 25e9   = 306.65824 us
 *   AG of M    = 50e-6 + 7/8 * 50,331,648 / 300e9 = 196.80064 us
 *   paired: 2 (p2p + AG)   = 1,006.91776 us
 *   serial: 4 p2p + 2 AG   = 1,620.23424 us; x3 with 3 chunks a stage */
static void test_pp_serial_p2p(void **st)
{
    (void)st;
    ModelSpec g = gpt3();
    HwProfile hw = a100();
    hw.pp_overlap = 0;
    hw.coll_lat = 50e-6, hw.coll_eff = 1;
    hw.inter.lat = 5e-6, hw.inter.bw = 25e9;
    hw.intra.lat = 0, hw.intra.bw = 300e9;
    Layout lo = layout_for(&g, &hw, 1, 8, 8, 1, 64);
    lo.sp = false;
    assert_rel(time_pp_mb(&g, &hw, &lo), 1006.91776e-6, 1e-9);
    hw.pp_p2p_serial = true;
    assert_rel(time_pp_mb(&g, &hw, &lo), 1620.23424e-6, 1e-9);
    lo.vp = 3;
    assert_rel(time_pp_mb(&g, &hw, &lo), 3 * 1620.23424e-6, 1e-9);
    /* the step: every micro-batch of the bottleneck stage pays it in T_PP */
    lo.vp = 1;
    CostOpts o;
    cost_opts_default(&o);
    Cost c;
    cost(&g, &hw, &lo, &o, &c);
    assert_rel(c.time[T_PP], 64 * 1620.23424e-6, 1e-9);
}

/* PyTorch's non-reentrant checkpoint with early stop (HwProfile.rc_early_stop,
 * set by the composer-fsdp stack): the recompute ends when the down
 * projection's input is saved, before that GEMM runs, so a fully recomputed
 * layer runs its forward less FC2 and, under TP, less the collective after
 * FC2. GPT-3 175B, tp 8, micro-batch 1 (T = 2048 tokens), bf16, flat
 * efficiency curves, no launch time, on round numbers: NCCL call 50 us,
 * NVLink 0 us and 300 GB/s.
 *   FC2 forward = 2 * 2048 * 12288 * 49152/8 / 312e12
 *               = 309,237,645,312 / 312e12     = 991.146299 us
 *   message M = 2 * 2048 * 12288 = 50,331,648 bytes
 *   all-reduce = 50 us + 2 * 7/8 * M / 300e9    = 343.60128 us (no SP: 2 a pass, 1 left)
 *   all-gather = 50 us + 7/8 * M / 300e9        = 196.80064 us (SP: 4 a pass, 3 left) */
static void test_recompute_early_stop(void **st)
{
    (void)st;
    ModelSpec g = gpt3();
    HwProfile hw = a100();
    hw.gemm_eff.n = 0, hw.sm_count = 0, hw.kernel_lat = 0;
    hw.coll_lat = 50e-6, hw.coll_eff = 1;
    hw.intra.lat = 0, hw.intra.bw = 300e9;
    Layout lo = layout_for(&g, &hw, 1, 8, 1, 1, 8);
    lo.sp = false;
    LayerTime full, es;
    time_layer(&g, &hw, &lo, &full);
    HwProfile he = hw;
    he.rc_early_stop = true;
    time_layer(&g, &he, &lo, &es);
    assert_rel(full.rc_full - es.rc_full, 991.146299e-6, 1e-6);
    assert_rel(full.tp_rc, 2 * 343.60128e-6, 1e-9);
    assert_rel(es.tp_rc, 343.60128e-6, 1e-9);
    assert_rel(es.fwd, full.fwd, 1e-12);   /* the forward and backward are the same */
    assert_rel(es.bwd, full.bwd, 1e-12);
    lo.sp = true;
    time_layer(&g, &hw, &lo, &full);
    time_layer(&g, &he, &lo, &es);
    assert_rel(full.tp_rc, 4 * 196.80064e-6, 1e-9);
    assert_rel(es.tp_rc, 3 * 196.80064e-6, 1e-9);
    assert_rel(full.rc_full - es.rc_full, 991.146299e-6, 1e-6);
}

/* Context parallelism (COSTMODEL.md §4.4), worked by hand. Llama-2-7B's
 * shape (h 4096, 32 heads, MHA) at s = 8192, tp 1, micro-batch 1, bf16,
 * flash. cp 2, ring: 4 chunks of c = 2048 tokens, a rank holds 2c = 4096;
 * each of the 2 steps is one kernel of 4 * 2c^2 * 4096 FLOPs, and each step
 * sends K and V of the rank's tokens, 2 * 2 * 4096 * 4096 bytes. */
static double attn_step_s(const HwProfile *hw, double F)
{
    double ref = hw->eff_ref_peak > 0 ? hw->eff_ref_peak : hw->peak[PREC_BF16];
    return F / (hw->peak[PREC_BF16] * hw_eff(&hw->attn_eff, F * ref / hw->peak[PREC_BF16]));
}

static void test_cp_ring_and_allgather(void **st)
{
    (void)st;
    ModelSpec m = llama2_7b();
    m.s = 8192;
    char err[256];
    assert_int_equal(spec_validate(&m, err, sizeof err), 0);
    HwProfile hw = a100();
    Layout lo = layout_for(&m, &hw, 1, 1, 1, 1, 8);
    lo.cp = 2;
    double kv = 2.0 * 2 * 4096 * 4096, F = 4.0 * 2 * 2048.0 * 2048 * 4096;
    double step = attn_step_s(&hw, F);
    /* in one node: the 2.9 ms NVLink send hides behind the step (which is
     * longer) in the forward and behind 2.5 steps in the backward; only the
     * last dK, dV going home after the last step is exposed */
    double send = hw.coll_lat + hw.intra.lat + kv / (hw.intra.bw * hw.coll_eff);
    assert_true(send < step);
    LayerTime t;
    time_layer(&m, &hw, &lo, &t);
    assert_rel(t.cp, send, 1e-9);
    /* one GPU per node: every send crosses InfiniBand and outlasts its step */
    hw.gpus_per_node = 1;
    send = hw.coll_lat + hw.inter.lat + kv / (hw.inter.bw * hw.coll_eff);
    double send_b = hw.coll_lat + hw.inter.lat + 2 * kv / (hw.inter.bw * hw.coll_eff);
    assert_true(send > step && send_b > 2.5 * step);
    time_layer(&m, &hw, &lo, &t);
    assert_rel(t.cp, (send - step) + (send_b - 2.5 * step) + send, 1e-9);
    /* all-gather (Llama 3's): K and V of all 8192 tokens gathered over cp 2
     * forward, gathered again and dK, dV reduce-scattered backward, all exposed */
    hw = a100();
    lo.cp_comm = CP_COMM_ALLGATHER;
    double ag = hw.coll_lat + hw.intra.lat + 0.5 * (2.0 * 2 * 8192 * 4096) / (hw.intra.bw * hw.coll_eff);
    time_layer(&m, &hw, &lo, &t);
    assert_rel(t.cp, 3 * ag, 1e-9);
    /* buffers: the gathered K, V and their gradients of all 8192 tokens;
     * the ring's two blocks of K, V, dK, dV of the rank's 4096 */
    assert_rel(memory_cp_ring_bytes(&m, &lo), 4.0 * 2 * 8192 * 4096, 1e-12);
    lo.cp_comm = CP_COMM_RING;
    assert_rel(memory_cp_ring_bytes(&m, &lo), 2.0 * 4 * 2 * 4096 * 4096, 1e-12);
}

/* The A100 profile with free links and launches and HBM at a flat 0.5 of
 * its peak at every size, so that the memory passes of a worked example
 * read as bytes / (0.5 hbm_bw). */
static HwProfile a100_flat_hbm(void)
{
    HwProfile hw = a100();
    hw.coll_lat = hw.intra.lat = hw.inter.lat = hw.kernel_lat = 0;
    hw.intra.bw = hw.inter.bw = 1e30;
    hw.mem_eff.n = 1;
    hw.mem_eff.pt[0].size = 1;
    hw.mem_eff.pt[0].eff = 0.5;
    return hw;
}

/* The ring's memory passes per later step (Transformer Engine's
 * AttnFuncWithCP): forward, the merge into the fp32 output and the copy of
 * the half chunk the step reads; backward, that copy again and the dQ, dK,
 * dV sums. Llama 2 7B at 8K tokens, cp 2, tp 1 on A100: tok = 4096,
 * c = 2048, q = kv = 4096, ab = 2, one later step. With links free, no
 * launch time and a flat memory curve (bytes / (hbm_bw / 2)), worked by hand:
 *   merge (2 + 8)·4096·4096 + 8·4096·32   = 168,820,736 B
 *   half  2·4096·(4096 + 4096/2)         =  50,331,648 B forward,
 *         2·4096·(4096 + 3·4096/2)       =  83,886,080 B backward (Q, O, dO)
 *   sums  0.75·2·4096·(3·4096 + 10·4096) = 327,155,712 B
 * forward core = 2 steps + merge + half, backward core = 5 steps + half +
 * sums. The backward core is read off against a cp 1 run of the same 4096
 * tokens a rank (same GEMMs and norms): bwd - (bwd1 - 2.5·core1). */
static void test_cp_ring_memory_passes(void **st)
{
    (void)st;
    ModelSpec m = llama2_7b();
    m.s = 8192;
    char err[256];
    assert_int_equal(spec_validate(&m, err, sizeof err), 0);
    HwProfile hw = a100_flat_hbm();
    double bw = 0.5 * hw.hbm_bw;
    Layout lo = layout_for(&m, &hw, 1, 1, 1, 1, 8);
    lo.cp = 2;
    LayerTime t;
    time_layer(&m, &hw, &lo, &t);
    double step = attn_step_s(&hw, 4.0 * 2 * 2048.0 * 2048 * 4096);
    double merge = 168820736.0, half = 50331648.0, half_b = 83886080.0, sums = 327155712.0;
    assert_rel(t.rc_sel, 2 * step + (merge + half) / bw, 1e-9);
    ModelSpec m1 = m;
    m1.s = 4096;
    assert_int_equal(spec_validate(&m1, err, sizeof err), 0);
    Layout lo1 = layout_for(&m1, &hw, 1, 1, 1, 1, 8);
    LayerTime t1;
    time_layer(&m1, &hw, &lo1, &t1);
    assert_rel(t.bwd - (t1.bwd - 2.5 * t1.rc_sel), 5 * step + (half_b + sums) / bw, 1e-9);
}

/* PyTorch's context parallelism (hw.cp_pytorch, torchtitan's), worked by
 * hand. Llama-2-7B's shape made GQA (8 K/V heads: q width 4096, kv 1024) at
 * s = 8192, cp 2, tp 1, micro-batch 1, bf16 (ab = 2): the rank's tok = 4096,
 * 2 steps of one kernel each, as the ring. HBM at a flat 0.5 of its peak,
 * the links free. Bytes of the eager passes (timing.c cp_pytorch_s):
 *  forward: K/V contiguous + concat 2 x 4ab·tok·kv = 67,108,864; one
 *    merge (ab + 36)·tok·q = 637,534,208; step outputs to fp32 (ab + 4) and
 *    back (4 + ab), 2 x 6·tok·q = 201,326,592: 905,969,664 in all;
 *  backward: fp32 zeros 4·tok·(q + 2kv) = 100,663,296; the K/V copies
 *    67,108,864; step 0's sums (8 + ab)·tok·(q + 2kv) = 251,658,240; the
 *    later step, the busier side: half-width dQ sum (13·4096) and whole dK,
 *    dV sums (2·10·1024) = 73,728 a token, 301,989,888; dK/dV concat in
 *    fp32 2·16·tok·kv = 134,217,728; the casts back 6·tok·(q + 2kv) =
 *    150,994,944: 1,006,632,960 in all.
 * With sdpa_repeat_kv K and V are as wide as Q (kv = 4096): 1,107,296,256
 * forward and 2,415,919,104 backward, and every layer pays the copy,
 * 2ab·tok·(q + kv) = 83,886,080 bytes each way (none for MHA). */
static void test_cp_pytorch(void **st)
{
    (void)st;
    ModelSpec m = llama2_7b();
    m.s = 8192;
    m.g = 8;
    char err[256];
    assert_int_equal(spec_validate(&m, err, sizeof err), 0);
    HwProfile hw = a100_flat_hbm();
    hw.cp_pytorch = true;
    double bw = 0.5 * hw.hbm_bw;
    double step = attn_step_s(&hw, 4.0 * 2 * 2048.0 * 2048 * 4096);
    ModelSpec m1 = m;
    m1.s = 4096;   /* the same 4096 tokens on one GPU: the layer without CP */
    assert_int_equal(spec_validate(&m1, err, sizeof err), 0);
    Layout lo1 = layout_for(&m1, &hw, 1, 1, 1, 1, 8);
    for (int rep = 0; rep < 2; rep++) {
        hw.sdpa_repeat_kv = rep;
        Layout lo = layout_for(&m, &hw, 1, 1, 1, 1, 8);
        lo.cp = 2;
        lo.cp_comm = CP_COMM_ALLGATHER;
        LayerTime t, t1;
        time_layer(&m, &hw, &lo, &t);
        time_layer(&m1, &hw, &lo1, &t1);
        double f = rep ? 1107296256.0 : 905969664.0, b = rep ? 2415919104.0 : 1006632960.0;
        assert_rel(t.rc_sel, 2 * step + f / bw, 1e-9);
        assert_rel(t.bwd - (t1.bwd - 2.5 * t1.rc_sel), 5 * step + b / bw, 1e-9);
        assert_true(t.cp < 1e-12);
    }
    /* the repeat copy itself, at cp 1 */
    LayerTime none, copy;
    hw.sdpa_repeat_kv = false;
    time_layer(&m1, &hw, &lo1, &none);
    hw.sdpa_repeat_kv = true;
    time_layer(&m1, &hw, &lo1, &copy);
    assert_rel(copy.fwd - none.fwd, 83886080.0 / bw, 1e-9);
    assert_rel(copy.bwd - none.bwd, 83886080.0 / bw, 1e-9);
    ModelSpec mha = llama2_7b();
    mha.s = 4096;
    assert_int_equal(spec_validate(&mha, err, sizeof err), 0);
    time_layer(&mha, &hw, &lo1, &copy);
    hw.sdpa_repeat_kv = false;
    time_layer(&mha, &hw, &lo1, &none);
    assert_rel(copy.fwd, none.fwd, 1e-12);

    /* Exposure: one GPU a node, so the pair talks over a 1 GB/s inter-node
     * link (coll_eff 1), far slower than a step. dK/dV travel in fp32,
     * 8·tok·kv = 33,554,432 bytes (dkv), waited for after the later step
     * (what outlasts 2.5 steps) and again after the loop (all of it). The
     * all-gather of K/V, (cp-1)/cp · 2ab·s·kv = 16,777,216 bytes, is waited
     * for at step 1 forward (what outlasts a step) and again backward (what
     * outlasts 2.5 steps); the ring rotate sends 2ab·tok·kv = 16,777,216
     * bytes once, waited for the same way. Either way, exposed:
     * (ag - step) + (dkv - 2.5 step) + dkv + (ag - 2.5 step). */
    hw.gpus_per_node = 1;
    hw.coll_eff = 1;
    hw.inter.bw = 1e9;
    double B = 1e9;
    /* and at cp 4, where the two rotate methods part: a step is 4·2·1024²·4096
     * FLOPs; the all-gather moves 3/4 · 2ab·s·kv = 25,165,824 bytes once,
     * the ring 3 sends of 2ab·tok·kv = 8,388,608 bytes; dkv = 8·2048·1024 */
    static const struct { int cp; double flops, ag, send, dkv; } exp_cases[] = {
        {2, 4.0 * 2 * 2048.0 * 2048 * 4096, 16777216.0, 16777216.0, 33554432.0},
        {4, 4.0 * 2 * 1024.0 * 1024 * 4096, 25165824.0, 8388608.0, 16777216.0},
    };
    for (size_t k = 0; k < sizeof exp_cases / sizeof *exp_cases; k++)
        for (int ring = 0; ring < 2; ring++) {
            Layout lo = layout_for(&m, &hw, 1, 1, 1, 1, 8);
            lo.cp = exp_cases[k].cp;
            lo.cp_comm = ring ? CP_COMM_RING : CP_COMM_ALLGATHER;
            LayerTime t;
            time_layer(&m, &hw, &lo, &t);
            double later = exp_cases[k].cp - 1, sk = attn_step_s(&hw, exp_cases[k].flops);
            double dkv = exp_cases[k].dkv / B, ag = exp_cases[k].ag / B, send = exp_cases[k].send / B;
            double want = later * (dkv - 2.5 * sk) + dkv;
            if (ring)
                want += later * (send - sk) + later * (send - 2.5 * sk);
            else
                want += (ag - sk) + (ag - 2.5 * sk);
            assert_rel(t.cp, want, 1e-9);
        }
}

/* Short chunks are slow: at 8K tokens and cp 16 a rank's attention is 16
 * kernels of 256 x 512 token blocks, each read on the attention curve at its
 * own size, so 16 ranks together spend far more GPU time than one rank
 * doing it all as one kernel. With the links made free only the compute
 * is left (the selective recompute term is the attention forward). */
static void test_cp_short_chunks(void **st)
{
    (void)st;
    ModelSpec m;
    char err[256];
    assert_int_equal(presets_find("llama2-70b", &m, err, sizeof err), 0);
    m.s = 8192;
    assert_int_equal(spec_validate(&m, err, sizeof err), 0);
    HwProfile hw;
    assert_int_equal(profile_load_builtin("h100-sxm", &hw, err, sizeof err), 0);
    hw.coll_lat = hw.intra.lat = hw.inter.lat = hw.kernel_lat = 0;
    hw.intra.bw = hw.inter.bw = 1e30;
    Layout lo = layout_for(&m, &hw, 1, 8, 1, 1, 8);
    LayerTime one, sixteen;
    time_layer(&m, &hw, &lo, &one);
    lo.cp = 16;
    time_layer(&m, &hw, &lo, &sixteen);
    /* the whole: F = 4 * 8192 * 8192 * 8192/8 / 2; a block: 4 * 2 * 256^2 * 1024 */
    double F1 = 4.0 * 8192 * 8192 * 1024 / 2, Fb = 4.0 * 2 * 256 * 256 * 1024;
    assert_rel(16 * Fb, F1 / 16, 1e-12);
    double eff1 = hw_eff(&hw.attn_eff, F1 * (hw.eff_ref_peak > 0 ? hw.eff_ref_peak : hw.peak[PREC_BF16]) / hw.peak[PREC_BF16]);
    double effb = hw_eff(&hw.attn_eff, Fb * (hw.eff_ref_peak > 0 ? hw.eff_ref_peak : hw.peak[PREC_BF16]) / hw.peak[PREC_BF16]);
    assert_true(effb < 0.75 * eff1);
    assert_true(16 * sixteen.rc_sel > one.rc_sel * 0.99 * eff1 / effb);
}

/* The Megatron-LM README's H100 weak-scaling table, row "32B": 56 heads,
 * hidden 7168, 48 layers, tp 8, pp 1, dp 48 on 384 GPUs, batch 192 x 4096
 * tokens, vocabulary 131072, 459.6 TFLOP/s per GPU (46 % MFU) with
 * --overlap-grad-reduce --overlap-param-gather --tp-comm-overlap and the
 * distributed optimizer: 0.892 s a step by Megatron's FLOP count
 * (72 B s L h^2 (1 + s/6h + V/12hL) = 1.574e17 per step). Not fitted: the
 * test prints the error and asserts only that the switches remove the
 * exposed TP communication. */
static void test_megatron_readme_32b(void **st)
{
    (void)st;
    ModelSpec m;
    memset(&m, 0, sizeof m);
    snprintf(m.name, sizeof m.name, "megatron-readme-32b");
    m.L = 48, m.h = 7168, m.a = 56, m.g = 56, m.f = 4 * 7168, m.vocab = 131072, m.vocab_div = 128, m.s = 4096;
    m.mlp = MLP_GELU, m.norm = NORM_LAYERNORM, m.pos = POS_LEARNED, m.tied = true;
    char err[256];
    assert_int_equal(spec_validate(&m, err, sizeof err), 0);
    HwProfile hw;
    assert_int_equal(profile_load_builtin("h100-sxm", &hw, err, sizeof err), 0);
    Layout lo = layout_for(&m, &hw, 48, 8, 1, 1, 192);
    lo.opt = OPT_DISTOPT;
    CostOpts o;
    cost_opts_default(&o);
    Cost *off = malloc(sizeof *off), *on = malloc(sizeof *on);
    cost(&m, &hw, &lo, &o, off);
    lo.tp_comm_overlap = true;
    cost(&m, &hw, &lo, &o, on);
    double flops = 72.0 * 192 * 4096 * 48 * 7168.0 * 7168 * (1 + 4096 / (6.0 * 7168) + 131072 / (12.0 * 7168 * 48));
    double pub = flops / (384 * 459.6e12);
    print_message("Megatron-LM README 32B/384 H100: published %.3f s; predicted %.3f s without --tp-comm-overlap "
                  "(tp %.3f s, dp %.3f s exposed), %.3f s with it (tp %.3f s, dp %.3f s): %+.1f %%\n", pub,
                  off->step_s, off->time[T_TP], off->time[T_DP], on->step_s, on->time[T_TP], on->time[T_DP],
                  100 * (on->step_s / pub - 1));
    assert_true(off->time[T_TP] > 0.2 && on->time[T_TP] < 0.01);
    assert_true(on->step_s < off->step_s);
    free(off), free(on);
}

/* Megatron's pipeline splits (issue 21, mechanism 3): Llama 3.1 405B's 126
 * layers at pp 8 vp 8 and pp 16 vp 4, NVIDIA's published layouts, split with
 * the embedding and the loss counted as layers: (126 + 2) / pp per stage in
 * vp equal chunks, stage 0 and the last one layer short. */
static void test_megatron_pipeline_splits(void **st)
{
    (void)st;
    ModelSpec m;
    char err[256];
    assert_int_equal(presets_find("llama3.1-405b", &m, err, sizeof err), 0);
    HwProfile hw = a100();
    Layout lo;
    layout_default(&lo);
    lo.tp = 8, lo.pp = 8, lo.vp = 8, lo.dp = 4, lo.gbs = 64;
    if (layout_check(&lo, &m, &hw, err, sizeof err) != 0)
        fail_msg("pp 8 vp 8: %s", err);
    assert_true(lo.layers[0] == 15 && lo.layers[1] == 16 && lo.layers[6] == 16 && lo.layers[7] == 15);
    assert_int_equal(layout_chunk_layers(&lo, 0, 0), 1);
    assert_int_equal(layout_chunk_layers(&lo, 0, 1), 2);
    assert_int_equal(layout_chunk_layers(&lo, 7, 7), 1);
    assert_int_equal(layout_chunk_layers(&lo, 3, 7), 2);
    MegatronForm f;
    assert_int_equal(layout_megatron_form(&lo, &m, &f, err, sizeof err), 0);
    assert_true(f.embed_in_split && f.loss_in_split && f.first_layers == 0 && f.last_layers == 0);
    /* block recomputation of 1 layer a chunk: 8 a stage, 7 on the short ones... */
    for (int s = 0; s < 8; s++)
        lo.full_rc[s] = 8;
    lo.full_rc[0] = lo.full_rc[7] = 8;   /* min(1, chunk) of chunks 1,2,..: the short chunk still has 1 */
    assert_int_equal(layout_megatron_form(&lo, &m, &f, err, sizeof err), 0);
    assert_int_equal(f.rc, MEGA_RC_FULL_BLOCK);
    assert_int_equal(f.rc_layers, 1);
    lo.full_rc[0] = 7;
    assert_int_equal(layout_megatron_form(&lo, &m, &f, err, sizeof err), -1);
    layout_default(&lo);
    lo.tp = 8, lo.pp = 16, lo.vp = 4, lo.dp = 2, lo.gbs = 64;
    if (layout_check(&lo, &m, &hw, err, sizeof err) != 0)
        fail_msg("pp 16 vp 4: %s", err);
    assert_true(lo.layers[0] == 7 && lo.layers[1] == 8 && lo.layers[15] == 7);
    /* the flags given: the embedding alone, 127 = 127 x 1 at pp 127? no: pp 2 vp 1 gives 64 / 63 */
    layout_default(&lo);
    lo.pp = 2, lo.gbs = 8, lo.dp = 1, lo.split_embed = true, lo.split_loss = false;
    lo.tp = 8;
    assert_int_equal(layout_check(&lo, &m, &hw, err, sizeof err), -1);   /* 127 is odd */
    assert_non_null(strstr(err, "account-for"));
    lo.split_loss = true;
    assert_int_equal(layout_check(&lo, &m, &hw, err, sizeof err), 0);
    assert_true(lo.layers[0] == 63 && lo.layers[1] == 63);
    /* --decoder-first/last-pipeline-num-layers with interleaving: multiples of vp */
    layout_default(&lo);
    lo.tp = 8, lo.pp = 4, lo.vp = 2, lo.dp = 1, lo.gbs = 8, lo.first_layers = 30, lo.last_layers = 32;
    assert_int_equal(layout_check(&lo, &m, &hw, err, sizeof err), 0);
    assert_true(lo.layers[0] == 30 && lo.layers[1] == 32 && lo.layers[2] == 32 && lo.layers[3] == 32);
    layout_default(&lo);
    lo.tp = 8, lo.pp = 4, lo.vp = 2, lo.dp = 1, lo.gbs = 8, lo.first_layers = 31, lo.last_layers = 31;
    assert_int_equal(layout_check(&lo, &m, &hw, err, sizeof err), -1);
    assert_non_null(strstr(err, "multiples of vp"));
    /* no rule divides: pp 16 vp 3 (126, 127, 128 are no multiple of 48 or 16 x 3) */
    layout_default(&lo);
    lo.tp = 8, lo.pp = 16, lo.vp = 3, lo.dp = 1, lo.gbs = 16;
    assert_int_equal(layout_check(&lo, &m, &hw, err, sizeof err), -1);
    assert_non_null(strstr(err, "not a multiple of pp*vp = 16*3"));
}

/* ---- MoE cost terms (COSTMODEL.md §3.4, §4.6), numbers worked by hand ---- */

static ModelSpec tiny_moe(void)
{
    /* 4 layers, h 64, 4 heads, ffn 128, 8 experts top 2 of ffn 32, a shared
     * expert of 64, vocab 256, seq 64, SwiGLU, RMSNorm, RoPE, no bias, untied */
    ModelSpec m;
    memset(&m, 0, sizeof m);
    snprintf(m.name, sizeof m.name, "tiny-moe");
    m.L = 4, m.h = 64, m.a = 4, m.g = 4, m.f = 128, m.vocab = 256, m.vocab_div = 1, m.s = 64;
    m.mlp = MLP_SWIGLU, m.norm = NORM_RMSNORM, m.pos = POS_ROPE;
    m.experts = 8, m.topk = 2, m.moe_ffn = 32, m.shared_ffn = 64, m.moe_freq = 1, m.moe_first_dense = 1;
    char err[256];
    if (spec_validate(&m, err, sizeof err) != 0)
        fail_msg("spec_validate: %s", err);
    return m;
}

/* DualPipe (--pp-schedule dualpipe; COSTMODEL.md §4.4 PP), worked by hand on
 * GPT-3 175B, tp 8, micro-batch 1 (T = 2048 tokens), bf16, a flat GEMM
 * efficiency and no launch time:
 *   a layer's weight gradients = its four forward GEMMs,
 *     2 T (3h + h + 4h + 4h) h / 8 / 312e12 = 2*2048*12*12288^2/8 / 312e12 = 2973.438898 us
 *   the LM head's GEMM = 2 T (V/8) h / 312e12, V = 51200 = 2*2048*6400*12288 / 312e12 = 1032.444062 us
 * At pp 4, 24 layers a stage, rank r holds stages r and 3-r: its micro-batch
 * is the mean of the two stages' (1F1B's less its PP sends, which DualPipe
 * hides), its memory the sum of the two stages' as 1F1B holds them (stage h
 * keeps pp - h micro-batches under both), and the bubble
 * (pp/2 - 1)(F&B + B - 3W) with F&B = z, B = z - F, in the rank's means:
 * F = 24 (fwd + tp_fwd) + head/2, W = 24 wgrad + head/2. */
/* DeepSeek-V3's low-precision activation storage (the hai-llm stack's
 * act_fp8_cache, DeepSeek-V3 report §3.3.4) and DualPipe's shared MTP
 * embedding (§3.2.3), worked by hand on DeepSeek-V3 at tp 1, 4,096 tokens,
 * balanced routing. The attention output is counted at the query width
 * (128 heads x 192) in 16 bits and in Transformer Engine's fp8 copy, and
 * kept once in 12 bits at 128 x 128: 4096 (3 x 24576 - 1.5 x 16384) =
 * 201,326,592 bytes a layer. An MoE layer also keeps its SwiGLU inputs in
 * 1 byte, not 2: 32,768 routed rows x 4,096 (gate and up of 2,048) and
 * the shared expert's 4,096 x 4,096: 150,994,944 more. */
static void test_hai_llm_storage(void **st)
{
    (void)st;
    ModelSpec d;
    char err[256];
    assert_int_equal(presets_find("deepseek-v3", &d, err, sizeof err), 0);
    assert_int_equal(spec_q_width(&d), 128 * 192);
    assert_int_equal(d.a * d.v_head_dim, 128 * 128);
    Layout lo;
    layout_default(&lo);
    lo.tp = 1, lo.pp = 16, lo.dp = 128, lo.ep = 64, lo.mbs = 1, lo.gbs = 15360, lo.opt = OPT_DISTOPT;
    lo.prec = PREC_FP8, lo.moe_imbalance = 1;
    Layout c = lo;
    c.act_fp8_cache = true;
    double dense = memory_layer_acts(&d, &lo, RECOMPUTE_NONE) - memory_layer_acts(&d, &c, RECOMPUTE_NONE);
    double moe = memory_moe_layer_acts(&d, &lo, RECOMPUTE_NONE) - memory_moe_layer_acts(&d, &c, RECOMPUTE_NONE);
    assert_rel(dense, 201326592.0, 1e-12);
    assert_rel(moe, 201326592.0 + 150994944.0, 1e-12);
    /* a fully recomputed layer keeps its input only; bf16 training, the executors: nothing changes */
    assert_rel(memory_moe_layer_acts(&d, &c, RECOMPUTE_FULL), memory_moe_layer_acts(&d, &lo, RECOMPUTE_FULL), 1e-15);
    Layout b = c, bl = lo;
    b.prec = bl.prec = PREC_BF16;
    assert_rel(memory_moe_layer_acts(&d, &b, RECOMPUTE_NONE), memory_moe_layer_acts(&d, &bl, RECOMPUTE_NONE), 1e-15);
    Layout x = c, xl = lo;
    x.target = xl.target = TARGET_ULTRAPLAN_CUDA;
    assert_rel(memory_moe_layer_acts(&d, &x, RECOMPUTE_NONE), memory_moe_layer_acts(&d, &xl, RECOMPUTE_NONE), 1e-15);
    /* the stack sets it on the layout */
    Layout s = lo;
    s.stack = stacks_index("hai-llm");
    assert_true(s.stack > 0);
    stacks_layout_settings(&s);
    assert_true(s.act_fp8_cache);
    s.stack = 0;
    stacks_layout_settings(&s);
    assert_false(s.act_fp8_cache);

    /* DualPipe: the MTP stage (15) shares rank 0 with the embedding, so it keeps no copy of its own */
    double V = (double)spec_padded_vocab(&d, 1), h = d.h;
    for (int k = 0; k < 16; k++)
        lo.layers[k] = k == 0 ? 3 : 4;   /* 61 = 3 + 14 x 4 + 2: any split */
    lo.layers[15] = 2;
    Layout dp = lo;
    dp.pp_sched = PP_SCHED_DUALPIPE;
    assert_rel(memory_stage_params(&d, &lo, 15, 2) - memory_stage_params(&d, &dp, 15, 2), V * h, 1e-12);
    assert_rel(memory_stage_params(&d, &lo, 0, 3), memory_stage_params(&d, &dp, 0, 3), 1e-15);
}

static void test_dualpipe(void **st)
{
    (void)st;
    ModelSpec g = gpt3();
    HwProfile hw = a100();
    hw.gemm_eff.n = 0, hw.sm_count = 0, hw.kernel_lat = 0;
    Layout one = layout_for(&g, &hw, 1, 8, 4, 1, 16);
    LayerTime lt;
    time_layer(&g, &hw, &one, &lt);
    assert_rel(lt.wgrad, 2973.438898e-6, 1e-8);
    double head = 2.0 * 2048 * 6400 * 12288 / 312e12;
    assert_rel(head, 1032.444062e-6, 1e-8);

    Layout dual = one;
    dual.pp_sched = PP_SCHED_DUALPIPE;
    char err[300];
    assert_int_equal(layout_check(&dual, &g, &hw, err, sizeof err), 0);
    assert_true(time_pp_mb(&g, &hw, &one) > 0);
    assert_true(time_pp_mb(&g, &hw, &dual) == 0);
    assert_int_equal(layout_pp_mirror(&dual, 0), 3);
    assert_int_equal(layout_pp_mirror(&dual, 1), 2);
    assert_int_equal(layout_pp_mirror(&one, 1), 1);

    CostOpts o;
    cost_opts_default(&o);
    Cost c1, c2;
    cost(&g, &hw, &one, &o, &c1);
    cost(&g, &hw, &dual, &o, &c2);
    double pp1 = time_pp_mb(&g, &hw, &one);
    for (int r = 0; r < 4; r++) {
        int k = 3 - r, h = r < k ? r : k, q = 3 - h;
        assert_rel(c2.stage_mb_s[r], 0.5 * (c1.stage_mb_s[r] - pp1 + c1.stage_mb_s[k] - pp1), 1e-12);
        assert_rel(c2.stage[r].bytes[MEM_WEIGHTS], c1.stage[h].bytes[MEM_WEIGHTS] + c1.stage[q].bytes[MEM_WEIGHTS], 1e-12);
        assert_rel(c2.stage[r].bytes[MEM_GRADS], c1.stage[h].bytes[MEM_GRADS] + c1.stage[q].bytes[MEM_GRADS], 1e-12);
        assert_rel(c2.stage[r].bytes[MEM_OPTIM], c1.stage[h].bytes[MEM_OPTIM] + c1.stage[q].bytes[MEM_OPTIM], 1e-12);
        assert_rel(c2.stage[r].bytes[MEM_ACTS], c1.stage[h].bytes[MEM_ACTS] + c1.stage[q].bytes[MEM_ACTS], 1e-12);
        assert_rel(c2.stage[r].inflight, 5.0, 1e-12);   /* pp + 1 */
        assert_int_equal(c2.stage[r].layers, 48);
    }
    assert_true(c2.time[T_PP] == 0);
    double z = c2.stage_mb_s[0];
    double F = 24 * (lt.fwd + lt.tp_fwd) + 0.5 * head, W = 24 * lt.wgrad + 0.5 * head;
    assert_rel(c2.time[T_BUBBLE], 1.0 * (z + (z - F) - 3.0 * W), 1e-9);
    assert_true(c2.time[T_BUBBLE] < 0.5 * c1.time[T_BUBBLE]);   /* (2z - F - 3W) against 1F1B's 3 z */

    /* the distributed optimizer: ZeRO's shards spread over both copies' ranks, half each */
    Layout dd = dual;
    dd.dp = 2, dd.gbs = 32, dd.opt = OPT_DISTOPT;
    Layout d1 = dd;
    d1.pp_sched = PP_SCHED_1F1B;
    assert_int_equal(layout_check(&dd, &g, &hw, err, sizeof err), 0);
    assert_int_equal(layout_check(&d1, &g, &hw, err, sizeof err), 0);
    cost(&g, &hw, &d1, &o, &c1);
    cost(&g, &hw, &dd, &o, &c2);
    assert_rel(c2.stage[0].bytes[MEM_OPTIM], 0.5 * (c1.stage[0].bytes[MEM_OPTIM] + c1.stage[3].bytes[MEM_OPTIM]), 1e-12);
    assert_rel(c2.stage[0].bytes[MEM_WEIGHTS], c1.stage[0].bytes[MEM_WEIGHTS] + c1.stage[3].bytes[MEM_WEIGHTS], 1e-12);

    /* pp 2: (pp/2 - 1) = 0, no bubble */
    Layout two = layout_for(&g, &hw, 1, 8, 2, 1, 4);
    two.pp_sched = PP_SCHED_DUALPIPE;
    assert_int_equal(layout_check(&two, &g, &hw, err, sizeof err), 0);
    cost(&g, &hw, &two, &o, &c2);
    assert_true(c2.time[T_BUBBLE] == 0);

    /* what DualPipe.step asserts, and what Megatron-LM cannot run */
    Layout bad = dual;
    bad.gbs = 6;   /* 6 micro-batches < 2 pp */
    assert_int_equal(layout_check(&bad, &g, &hw, err, sizeof err), -1);
    assert_non_null(strstr(err, "at least 2*pp = 8"));
    bad.gbs = 9;   /* odd */
    assert_int_equal(layout_check(&bad, &g, &hw, err, sizeof err), -1);
    assert_non_null(strstr(err, "even number of micro-batches"));
    bad = dual;
    bad.vp = 2, bad.gbs = 16;
    assert_int_equal(layout_check(&bad, &g, &hw, err, sizeof err), -1);
    assert_non_null(strstr(err, "vp must be 1"));
    bad = dual;
    bad.pp = 3, bad.gbs = 12;
    for (int s = 0; s < LAYOUT_MAX_PP; s++)
        bad.layers[s] = bad.full_rc[s] = bad.sel_rc[s] = 0;
    assert_int_equal(layout_check(&bad, &g, &hw, err, sizeof err), -1);
    assert_non_null(strstr(err, "even pipeline size"));
    assert_int_equal(layout_megatron_check(&dual, &g, err, sizeof err), -1);
    assert_non_null(strstr(err, "no DualPipe"));

    /* an MoE layer: the paired chunks hide the all-to-alls as the 1F1B A2A overlap does, without its vp */
    ModelSpec m = tiny_moe();
    Layout ml;
    layout_default(&ml);
    ml.dp = 2, ml.ep = 2, ml.pp = 2, ml.mbs = 1, ml.gbs = 8;
    assert_int_equal(layout_check(&ml, &m, &hw, err, sizeof err), 0);
    assert_false(time_moe_a2a_overlap(&ml));
    ml.pp_sched = PP_SCHED_DUALPIPE;
    assert_int_equal(layout_check(&ml, &m, &hw, err, sizeof err), 0);
    assert_true(time_moe_a2a_overlap(&ml));
    ml.moe_dispatcher = MOE_DISPATCH_ALLGATHER;
    assert_false(time_moe_a2a_overlap(&ml));
}

/* ZeRO-2/3 buckets and gathers hold the stage's largest layer: tiny_moe's
 * layer 0 is dense (attention 4·64·64 + norms 2·64 + SwiGLU 3·64·128 =
 * 41088), the others MoE (attention and norms 16512, router 8·64, shared
 * expert 3·64·64, 8/ep = 2 local experts of 3·64·32 each: 41600). */
static void test_zero_unit_largest_layer(void **st)
{
    (void)st;
    ModelSpec m = tiny_moe();
    Layout lo;
    layout_default(&lo);
    lo.dp = 8, lo.tp = 1, lo.ep = 4, lo.mbs = 2, lo.gbs = 16, lo.opt = OPT_ZERO3, lo.layers[0] = 4;
    double layer = 0;
    memory_zero_unit_params(&m, &lo, 0, &layer);
    assert_rel(layer, 4 * 64 * 64 + 2 * 64 + 8 * 64 + 3 * 64 * 64 + 2 * (3 * 64 * 32), 1e-12);
}

/* fp8 plans for the CUDA executor keep, as it allocates them (executor/cuda/cufp8.c),
 * the transposed fp8 copy of each linear input (1 byte an element) and,
 * except under ZeRO-3, each layer's weights cast to fp8 and fp8-transposed,
 * plus the largest GEMM's operand scratch. By hand for 2 GELU layers, h 64,
 * 4 heads (q = kv = 64 wide), ffn 256, 2 x 32 tokens, tp 1:
 *   inputs a layer: 64 tokens x (QKV 64 + FC1 64 + proj 64 + FC2 256) = 28,672 B;
 *   weights a layer: 2 x 64 x (192 + 64 + 256 + 256) = 98,304 B;
 *   scratch: FC1's backward, 256 + 4096 + 2 x 16,384 + 16,384 = 53,504 B. */
static void test_fp8_copies(void **st)
{
    (void)st;
    ModelSpec m = tiny_gelu(false);
    HwProfile hw = a100();
    Layout lo;
    layout_default(&lo);
    lo.dp = 1, lo.tp = 1, lo.pp = 1, lo.mbs = 2, lo.gbs = 2, lo.layers[0] = 2, lo.opt = OPT_ZERO1;
    lo.target = TARGET_ULTRAPLAN_CUDA;   /* the executor's accounting */
    StageMem b16, f8, b16z3, f8z3;
    lo.prec = PREC_BF16;
    memory_stage(&m, &hw, &lo, 0, &b16);
    lo.prec = PREC_FP8;
    memory_stage(&m, &hw, &lo, 0, &f8);
    assert_rel(f8.bytes[MEM_ACTS] - b16.bytes[MEM_ACTS], 2 * 28672.0, 1e-12);
    /* Transformer Engine (a plan for Megatron): the fp8 input in place of the 16-bit QKV, FC1 and FC2
     * inputs, 1 byte not 2, and the projection's fp8 copy beside its 16-bit input (the attention keeps
     * that): 64 x (-64 - 64 + 64 - 256) = -20,480 B a layer. With --recompute-modules layernorm the
     * norms' outputs are gone already and only their fp8 copies are added: 64 x (64 + 64 + 64 - 256) */
    lo.target = TARGET_MEGATRON;
    StageMem te;
    memory_stage(&m, &hw, &lo, 0, &te);
    assert_rel(te.bytes[MEM_ACTS] - b16.bytes[MEM_ACTS], 2 * -20480.0, 1e-12);
    assert_false(memory_executor_accounting(&lo));
    snprintf(lo.rc_modules, sizeof lo.rc_modules, "layernorm");
    double with_ln = memory_layer_acts(&m, &lo, RECOMPUTE_NONE);
    lo.prec = PREC_BF16;
    assert_rel(with_ln - memory_layer_acts(&m, &lo, RECOMPUTE_NONE), 64.0 * (64 + 64 + 64 - 256), 1e-12);
    lo.prec = PREC_FP8, lo.rc_modules[0] = 0;
    lo.target = TARGET_ULTRAPLAN_CUDA;
    assert_rel(f8.bytes[MEM_BUFFERS] - b16.bytes[MEM_BUFFERS], 53504.0 + 2 * 98304.0, 1e-12);
    /* ZeRO-3: the scratch only, no kept weight copies */
    lo.opt = OPT_ZERO3;
    memory_stage(&m, &hw, &lo, 0, &f8z3);
    lo.prec = PREC_BF16;
    memory_stage(&m, &hw, &lo, 0, &b16z3);
    assert_rel(f8z3.bytes[MEM_BUFFERS] - b16z3.bytes[MEM_BUFFERS], 53504.0, 1e-12);
    /* --fp8-param-gather (distributed optimizer): the layers' weights in fp8, half their 16-bit bytes, and
     * the weight cache keeps only the transpose: 98,304 / 2 bytes a layer less in the buffers */
    lo.opt = OPT_DISTOPT, lo.prec = PREC_FP8;
    StageMem pg0, pg1;
    memory_stage(&m, &hw, &lo, 0, &pg0);
    lo.fp8_param_gather = true;
    memory_stage(&m, &hw, &lo, 0, &pg1);
    double layers = memory_stage_params(&m, &lo, 0, 2) - memory_stage_params(&m, &lo, 0, 0);
    assert_rel(pg0.bytes[MEM_WEIGHTS] - pg1.bytes[MEM_WEIGHTS], layers * 2.0 / 2.0, 1e-12);
    assert_rel(pg0.bytes[MEM_BUFFERS] - pg1.bytes[MEM_BUFFERS], 2 * 98304.0 / 2.0, 1e-12);
    assert_rel(pg1.bytes[MEM_GRADS], pg0.bytes[MEM_GRADS], 0);   /* gradients stay as they were */
    lo.fp8_param_gather = false;
    /* full recomputation keeps only the layer input: no fp8 copies */
    lo.opt = OPT_ZERO1;
    assert_rel(memory_layer_acts(&m, &lo, RECOMPUTE_FULL), 2.0 * 64 * 64, 1e-12);
}

/* ZeRO-3 buffers by the stack's gather granularity (memory.c
 * zero_buffer_params), by hand for 2 GELU layers, h 64, ffn 256, vocab 256,
 * 32 learned positions, no biases, tied, tp 1, bf16 weights, fp32 grads:
 *   a layer unit: QKV 12,288 + proj 4,096 + FC1 16,384 + FC2 16,384 + two
 *   LayerNorms 256 = 49,408; the stage unit: embedding 16,384 + positions
 *   2,048 + final norm 128 = 18,560; the largest tensor T = 16,384.
 * Block (the executor's, FSDP's): grads 4 B x (2 x 49,408 + 18,560) =
 * 469,504, gathers 2 B x 117,376 = 234,752. Tensor by tensor: gathers T +
 * max(prefetch, T) below the live cap, T at or above it; gradients T +
 * max(bucket, T) in 2 B, at most the block count. */
static void test_zero3_granularity(void **st)
{
    (void)st;
    ModelSpec m = tiny_gelu(true);
    HwProfile hw = a100();
    Layout lo;
    layout_default(&lo);
    lo.dp = 4, lo.tp = 1, lo.pp = 1, lo.mbs = 1, lo.gbs = 4, lo.layers[0] = 2, lo.prec = PREC_BF16;
    static const struct {
        int gathers;
        double prefetch, cap, bucket, want;
    } c[] = {
        {0, 0, 0, 0, 469504.0 + 234752.0},               /* the default: block, as the executor */
        {1, 1000, 1e9, 5000, 469504.0 + 234752.0},       /* FSDP: a gather a layer is block-granular */
        {12, 1000, 0, 5000, 2 * 32768.0 + 2 * 32768.0},  /* tiny bucket, no cap: the next tensor whole */
        {12, 40000, 1e9, 200000, 2 * 117376.0 + 2 * 56384.0},  /* bucket above the block: the block bound */
        {12, 1000, 16384, 5000, 2 * 32768.0 + 2 * 16384.0},    /* T at the cap: nothing prefetched */
    };
    for (size_t i = 0; i < sizeof c / sizeof *c; i++) {
        hw.zero3_gathers_per_layer = c[i].gathers, hw.zero3_prefetch_params = c[i].prefetch;
        hw.zero3_max_live_params = c[i].cap, hw.zero3_reduce_bucket_params = c[i].bucket;
        StageMem z1, z3;
        lo.opt = OPT_ZERO1;
        memory_stage(&m, &hw, &lo, 0, &z1);
        lo.opt = OPT_ZERO3;
        memory_stage(&m, &hw, &lo, 0, &z3);
        if (fabs(z3.bytes[MEM_BUFFERS] - z1.bytes[MEM_BUFFERS] - c[i].want) > 1e-6 * c[i].want)
            fail_msg("case %zu: ZeRO-3 buffers %.0f bytes over ZeRO-1's, expected %.0f", i,
                     z3.bytes[MEM_BUFFERS] - z1.bytes[MEM_BUFFERS], c[i].want);
    }
}

static void test_moe_alltoall(void **st)
{
    (void)st;
    HwProfile hw = a100();
    hw.intra.bw = 100e9, hw.intra.lat = 1e-6, hw.inter.bw = 10e9, hw.inter.lat = 5e-6;
    /* 16 ranks, 8 per node, 8 MB each: 7/16 over NVLink (35 us), 8/16 over
     * the NIC (400 us) at once, plus the inter-node alpha */
    assert_rel(time_alltoall(&hw, 8e6, 16, 8), 5e-6 + 4e-4, 1e-12);
    /* within a node: 7/8 of it over NVLink */
    assert_rel(time_alltoall(&hw, 8e6, 8, 8), 1e-6 + 7.0 / 8 * 8e6 / 100e9, 1e-12);
    assert_true(time_alltoall(&hw, 8e6, 1, 1) == 0);
    /* one call as priced: a2a_lat and a2a_eff, else coll_lat and coll_eff */
    hw.coll_lat = 2e-5, hw.coll_eff = 0.8, hw.a2a_lat = 0, hw.a2a_eff = 0;
    assert_rel(time_coll_alltoall(&hw, 8e6, 16, 8), 2e-5 + 5e-6 + 4e-4 / 0.8, 1e-12);
    hw.a2a_lat = 3e-5, hw.a2a_eff = 0.5;
    assert_rel(time_coll_alltoall(&hw, 8e6, 16, 8), 3e-5 + 5e-6 + 4e-4 / 0.5, 1e-12);
}

static void test_moe_rows_and_states(void **st)
{
    (void)st;
    ModelSpec m = tiny_moe();
    HwProfile hw = a100();
    Layout lo;
    layout_default(&lo);
    lo.dp = 8, lo.tp = 1, lo.ep = 4, lo.mbs = 2, lo.gbs = 16, lo.opt = OPT_ZERO1;
    char err[256];
    assert_int_equal(layout_check(&lo, &m, &hw, err, sizeof err), 0);
    assert_int_equal(layout_edp(&lo), 2);
    /* rows: 1.2 (default imbalance) x 128 tokens x top 2 */
    assert_rel(layout_moe_rows(&m, &lo), 1.2 * 128 * 2, 1e-15);
    lo.moe_imbalance = 1.5;
    assert_rel(layout_moe_rows(&m, &lo), 1.5 * 128 * 2, 1e-15);
    m.capacity_factor = 1.25;   /* padded to capacity: the factor, not the imbalance */
    assert_rel(layout_moe_rows(&m, &lo), 1.25 * 128 * 2, 1e-15);
    m.capacity_factor = 0;
    /* expert states shard over edp = 2, the dense ones over dp = 8 */
    double w, g, o;
    memory_expert_state_bytes(&lo, &w, &g, &o);
    assert_rel(o, 12.0 / 2, 1e-15);
    memory_state_bytes(&lo, &w, &g, &o);
    assert_rel(o, 12.0 / 8, 1e-15);
    /* per-GPU parameters of an MoE layer: attention 4 h^2 = 16384, norms
     * 128, router 64 x 8 = 512, shared 3 x 64 x 64 = 12288; experts 8/4 = 2
     * of 3 x 64 x 32 = 6144 each */
    double ex = 0;
    assert_rel(memory_layer_params(&m, &lo, true, &ex), 16384 + 128 + 512 + 12288 + 2 * 6144, 1e-15);
    assert_rel(ex, 2 * 6144, 1e-15);
    /* a dense layer: attention + 3 x 64 x 128 + norms */
    assert_rel(memory_layer_params(&m, &lo, false, &ex), 16384 + 24576 + 128, 1e-15);
    assert_true(ex == 0);
    /* the one stage: layer 0 dense, 1..3 MoE; embedding, head and final norm 256 x 64 x 2 + 64 */
    StageMem sm;
    memory_stage(&m, &hw, &lo, 0, &sm);
    assert_int_equal(sm.moe_layers, 3);
    double dense = (16384 + 24576 + 128) + 3 * (16384 + 128 + 512 + 12288) + 2 * 256 * 64 + 64;
    assert_rel(sm.expert_params, 3 * 2 * 6144, 1e-15);
    assert_rel(sm.params, dense + 3 * 2 * 6144, 1e-15);
    assert_rel(sm.bytes[MEM_OPTIM], dense * 12.0 / 8 + 3 * 2 * 6144 * 12.0 / 2, 1e-12);
    /* etp 1 under tp 2: each GPU computes half the rows with whole experts */
    lo.tp = 2, lo.dp = 4, lo.etp = 1, lo.moe_imbalance = 0;
    lo.sp = true;
    assert_int_equal(layout_check(&lo, &m, &hw, err, sizeof err), 0);
    assert_rel(layout_moe_rows(&m, &lo), 1.2 * 128 * 2 / 2, 1e-15);
}

static void test_moe_acts(void **st)
{
    (void)st;
    ModelSpec m = tiny_moe();
    HwProfile hw = a100();
    Layout lo;
    layout_default(&lo);
    lo.dp = 4, lo.ep = 4, lo.mbs = 2, lo.gbs = 8;
    char err[256];
    assert_int_equal(layout_check(&lo, &m, &hw, err, sizeof err), 0);
    /* tok 128, ab 2, rows 307.2, a plan for Megatron: the dense layer less
     * its SwiGLU intermediates (3 x 2 x 128 x 128), plus router
     * probabilities 4 x 128 x 8, dispatched input 2 x 307.2 x 64, FC1 and
     * activation 3 x 2 x 307.2 x 32, the activation's fp32 routing weights
     * 4 x 307.2 (Megatron-core >= 0.13 weights the rows there), the shared
     * expert 3 x 2 x 128 x 64 */
    double dense = memory_layer_acts(&m, &lo, RECOMPUTE_NONE);
    double want = dense - 3.0 * 2 * 128 * 128 + 4.0 * 128 * 8 + 2.0 * 307.2 * 64 + 3.0 * 2 * 307.2 * 32 +
                  4.0 * 307.2 + 3.0 * 2 * 128 * 64;
    assert_rel(memory_moe_layer_acts(&m, &lo, RECOMPUTE_NONE), want, 1e-12);
    /* ultraplan's executors weight the rows at the combine and keep the experts' outputs for it,
     * 2 x 307.2 x 64, in place of the weights */
    lo.target = TARGET_ULTRAPLAN_CUDA;
    assert_rel(memory_moe_layer_acts(&m, &lo, RECOMPUTE_NONE), want - 4.0 * 307.2 + 2.0 * 307.2 * 64, 1e-12);
    assert_rel(memory_layer_acts(&m, &lo, RECOMPUTE_NONE), dense, 0);   /* a dense layer does not move */
    lo.target = TARGET_MEGATRON;
    assert_rel(memory_moe_layer_acts(&m, &lo, RECOMPUTE_FULL), memory_layer_acts(&m, &lo, RECOMPUTE_FULL), 1e-15);
    /* selective drops what it drops for a dense layer */
    assert_rel(memory_moe_layer_acts(&m, &lo, RECOMPUTE_NONE) - memory_moe_layer_acts(&m, &lo, RECOMPUTE_SELECTIVE),
               dense - memory_layer_acts(&m, &lo, RECOMPUTE_SELECTIVE), 1e-9);
}

/* fp8 in an MoE layer of tiny_moe (tok 128, ab 2, rows 307.2, q 64, expert
 * ffn 32, shared 64, tp 1), beside the same layer in bf16, by hand:
 *  - Transformer Engine (a plan for Megatron): the QKV norm's output in 1
 *    byte, -128 x 64; the projection's fp8 copy, +128 x 64; the experts'
 *    FC1 and FC2 inputs in 1 byte, -307.2 x (64 + 32); the shared expert's
 *    FC1 copy, +128 x 64, and its FC2 input in 1 byte, -128 x 64: -29,491.2 B.
 *    The pre-MLP norm's output stays 16-bit: the router reads it.
 *  - --recompute-modules moe_act: FC2 keeps its original input, which the
 *    checkpoint discards, so beside bf16 under the same module only the
 *    other terms are left: -307.2 x 64.
 *  - the executors: the dense layer's four transposed copies,
 *    128 x (64 + 64 + 64 + 128) = 40,960 B. */
static void test_moe_fp8_inputs(void **st)
{
    (void)st;
    ModelSpec m = tiny_moe();
    HwProfile hw = a100();
    Layout lo;
    layout_default(&lo);
    lo.dp = 4, lo.ep = 4, lo.mbs = 2, lo.gbs = 8;
    char err[256];
    assert_int_equal(layout_check(&lo, &m, &hw, err, sizeof err), 0);
    lo.prec = PREC_BF16;
    double b16 = memory_moe_layer_acts(&m, &lo, RECOMPUTE_NONE);
    lo.prec = PREC_FP8;
    assert_rel(memory_moe_layer_acts(&m, &lo, RECOMPUTE_NONE) - b16, -29491.2, 1e-12);
    snprintf(lo.rc_modules, sizeof lo.rc_modules, "moe_act");
    double f8act = memory_moe_layer_acts(&m, &lo, RECOMPUTE_NONE);
    lo.prec = PREC_BF16;
    assert_rel(f8act - memory_moe_layer_acts(&m, &lo, RECOMPUTE_NONE), -307.2 * 64, 1e-12);
    lo.rc_modules[0] = 0;
    lo.target = TARGET_ULTRAPLAN_CUDA;
    b16 = memory_moe_layer_acts(&m, &lo, RECOMPUTE_NONE);
    lo.prec = PREC_FP8;
    assert_rel(memory_moe_layer_acts(&m, &lo, RECOMPUTE_NONE) - b16, 40960, 1e-12);
    /* full recomputation keeps the layer input alone, whoever runs it */
    assert_rel(memory_moe_layer_acts(&m, &lo, RECOMPUTE_FULL), 2.0 * 128 * 64, 1e-12);
}

/* The fp8 weight cache of tiny_moe's one stage (tp 1, ep 2, distopt), by
 * hand. ultraplan's executors cast the dense layer's four weights in every
 * layer, 64 x (192 + 64 + 256 + 128) = 40,960 a layer, into a copy and a
 * transpose: 2 x 4 x 40,960 = 327,680 B. Transformer Engine caches what each
 * layer has: layer 0 (dense) attention 16,384 + SwiGLU 3 x 64 x 128 =
 * 40,960; the MoE layers attention 16,384 + shared 3 x 64 x 64 + 4 local
 * experts of 3 x 64 x 32 = 53,248 (the router stays 16-bit), 200,704 in
 * all. At compute capability 9.0 a copy and a transpose, 2 B a weight
 * (73,728 B more than the executors'); at 10.0 (Blackwell runs fp8 GEMMs
 * in any layout) one copy serves both, 1 B; MXFP8 two copies with a scale
 * a 32, 2 x 33/32 B; --fp8-param-gather at 10.0: the parameter is the
 * copy, nothing cached. */
static void test_fp8_weight_cache(void **st)
{
    (void)st;
    ModelSpec m = tiny_moe();
    HwProfile hw = a100();
    Layout lo;
    layout_default(&lo);
    lo.dp = 4, lo.ep = 2, lo.mbs = 2, lo.gbs = 8, lo.opt = OPT_DISTOPT, lo.prec = PREC_FP8;
    lo.fp8_recipe = FP8R_TENSORWISE;
    hw.peak[PREC_FP8] = 2.0 * hw.peak[PREC_BF16], hw.compute_capability = 9.0;   /* fp8 as on a Hopper */
    char err[256];
    if (layout_check(&lo, &m, &hw, err, sizeof err) != 0)
        fail_msg("layout_check: %s", err);
    StageMem ex, te;
    lo.target = TARGET_ULTRAPLAN_CUDA;
    memory_stage(&m, &hw, &lo, 0, &ex);
    lo.target = TARGET_MEGATRON;
    memory_stage(&m, &hw, &lo, 0, &te);
    assert_rel(te.bytes[MEM_BUFFERS] - ex.bytes[MEM_BUFFERS], 73728, 1e-9);
    hw.compute_capability = 10.0;
    memory_stage(&m, &hw, &lo, 0, &te);
    assert_rel(te.bytes[MEM_BUFFERS] - ex.bytes[MEM_BUFFERS], 200704.0 - 327680.0, 1e-9);
    lo.fp8_recipe = FP8R_MXFP8;
    memory_stage(&m, &hw, &lo, 0, &te);
    assert_rel(te.bytes[MEM_BUFFERS] - ex.bytes[MEM_BUFFERS], 200704.0 * 2 * 33 / 32 - 327680.0, 1e-9);
    lo.fp8_recipe = FP8R_TENSORWISE, lo.fp8_param_gather = true;
    StageMem ex_pg;
    memory_stage(&m, &hw, &lo, 0, &te);
    lo.target = TARGET_ULTRAPLAN_CUDA;
    memory_stage(&m, &hw, &lo, 0, &ex_pg);
    assert_rel(te.bytes[MEM_BUFFERS] - ex_pg.bytes[MEM_BUFFERS], -327680.0 / 2, 1e-9);
    /* the executors' cache does not depend on the GPU */
    hw.compute_capability = 9.0;
    memory_stage(&m, &hw, &lo, 0, &te);
    assert_rel(te.bytes[MEM_BUFFERS], ex_pg.bytes[MEM_BUFFERS], 0);
}

static void test_moe_layer_mix(void **st)
{
    (void)st;
    ModelSpec m = tiny_moe();   /* layer 0 dense */
    Layout lo;
    layout_default(&lo);
    lo.pp = 2, lo.layers[0] = 2, lo.layers[1] = 2;
    int c[2][RECOMPUTE_COUNT];
    memory_stage_layer_mix(&m, &lo, 0, 2, 1, 0, c);   /* layer 0 (dense) recomputed fully, layer 1 MoE kept */
    assert_int_equal(c[0][RECOMPUTE_FULL], 1);
    assert_int_equal(c[1][RECOMPUTE_NONE], 1);
    memory_stage_layer_mix(&m, &lo, 1, 2, 0, 2, c);   /* layers 2, 3: both MoE */
    assert_int_equal(c[1][RECOMPUTE_SELECTIVE], 2);
    assert_int_equal(c[0][RECOMPUTE_NONE] + c[0][RECOMPUTE_SELECTIVE], 0);
    /* every other layer (--moe-layer-freq 2): 0 and 2 MoE */
    m.moe_first_dense = 0, m.moe_freq = 2;
    memory_stage_layer_mix(&m, &lo, 1, 2, 0, 0, c);
    assert_int_equal(c[1][RECOMPUTE_NONE], 1);
    assert_int_equal(c[0][RECOMPUTE_NONE], 1);
    /* interleaved: stage 0 of pp 2, vp 2 holds model chunks 0 and 2 (layers 0 and 2) */
    lo.vp = 2, lo.layers[0] = lo.layers[1] = 2;
    memory_stage_layer_mix(&m, &lo, 0, 2, 0, 0, c);
    assert_int_equal(c[1][RECOMPUTE_NONE], 2);
}

static void test_moe_time_terms(void **st)
{
    (void)st;
    ModelSpec m = tiny_moe();
    HwProfile hw = a100();
    Layout lo;
    layout_default(&lo);
    hw.gpus_per_node = 4;
    lo.dp = 16, lo.ep = 8, lo.mbs = 2, lo.gbs = 64;
    char err[256];
    assert_int_equal(layout_check(&lo, &m, &hw, err, sizeof err), 0);
    /* one dispatch buffer: 307.2 rows x 64 x 2 bytes, bf16 */
    assert_rel(time_moe_dispatch_bytes(&m, &lo), 307.2 * 64 * 2, 1e-12);
    /* 8 ranks of stride 1 (etp 1) over 4-GPU nodes: 4 per node */
    assert_int_equal(time_ep_members_per_node(&hw, &lo), 4);
    LayerTime lt;
    time_layer(&m, &hw, &lo, &lt);
    double a2a = time_coll_alltoall(&hw, 307.2 * 64 * 2, 8, 4);
    assert_rel(a2a, (hw.a2a_lat > 0 ? hw.a2a_lat : hw.coll_lat) + hw.inter.lat +
                        fmax(3.0 / 8 * 307.2 * 64 * 2 / (hw.intra.bw * (hw.a2a_eff > 0 ? hw.a2a_eff : hw.coll_eff)),
                             4.0 / 8 * 307.2 * 64 * 2 / (hw.inter.bw * (hw.a2a_eff > 0 ? hw.a2a_eff : hw.coll_eff))),
               1e-12);
    assert_rel(lt.ep_fwd, 2 * a2a, 1e-12);
    assert_rel(lt.ep_bwd, 2 * a2a, 1e-12);
    /* the step's EP phase: 2 micro-batches x 3 MoE layers x (2 fwd + 2 bwd) */
    Cost c;
    CostOpts o;
    cost_opts_default(&o);
    cost(&m, &hw, &lo, &o, &c);
    assert_rel(c.time[T_EP], 2 * 3 * 4 * a2a, 1e-12);
    /* no all-to-all with ep 1 */
    lo.ep = 1;
    assert_int_equal(layout_check(&lo, &m, &hw, err, sizeof err), 0);
    time_layer(&m, &hw, &lo, &lt);
    assert_true(lt.ep_fwd == 0 && lt.ep_bwd == 0);
    /* the stage's time: one dense layer and three MoE ones, embedding, head */
    double want = lt.fwd + lt.bwd + lt.tp_fwd + lt.tp_bwd + lt.cp + 3 * time_moe_layer_s(&lt) + time_embed(&m, &hw, &lo) +
                  time_head(&m, &hw, &lo);
    assert_rel(time_stage_mb(&m, &hw, &lo, &lt, 0, 4, 0, 0), want, 1e-12);
}

static void test_moe_grouped_gemm_size(void **st)
{
    (void)st;
    /* the grouped GEMM reads the curve at one expert's size: with a curve
     * that falls steeply below 1 GFLOP, spreading the same rows over 8
     * local experts (ep 1) instead of 1 (ep 8) must cost more per row */
    ModelSpec m = tiny_moe();
    m.h = 1024, m.a = 8, m.g = 8, m.f = 4096, m.moe_ffn = 1024, m.shared_ffn = 0, m.s = 2048, m.moe_first_dense = 0;
    HwProfile hw = a100();
    hw.sm_count = 0, hw.kernel_lat = 0;
    hw.gemm_eff.n = 2;
    hw.gemm_eff.pt[0] = (EffPoint){1e6, 0.05};
    hw.gemm_eff.pt[1] = (EffPoint){1e10, 0.8};
    Layout a, b;
    layout_default(&a);
    a.dp = 8, a.ep = 1, a.mbs = 1, a.gbs = 8;
    b = a;
    b.ep = 8;
    char err[256];
    assert_int_equal(layout_check(&a, &m, &hw, err, sizeof err), 0);
    assert_int_equal(layout_check(&b, &m, &hw, err, sizeof err), 0);
    LayerTime la, lb;
    time_layer(&m, &hw, &a, &la);
    time_layer(&m, &hw, &b, &lb);
    /* same rows per GPU, 8 experts of 1/8 the rows vs 1 expert of all */
    assert_rel(layout_moe_rows(&m, &a), layout_moe_rows(&m, &b), 1e-15);
    assert_true(la.moe_fwd > lb.moe_fwd);
}


/* CUDA graphs (--cuda-graph-impl, --cuda-graph-modules) on the tiny MoE,
 * host-bound on purpose (1 s a launch, so the GPU's microseconds never
 * show). Kernels per forward, worked from the counts in model/timing.c: a
 * dense layer 10 + flash core 1 + SwiGLU's multiply 1 = 12, of them the
 * attention part 5 + 1 = 6; an MoE layer 12 + the MoE's 12 + the shared
 * expert's 3 = 27, of them up to the router 1 + 3 + 3 = 7 and the
 * preprocess 3. Eager: 27 forward, 54 backward, plus the dropless host sync
 * (2 launches). attn + moe_router + moe_preprocess graphed: 27 - 6 - 10 = 11
 * eager and 2 graph launches forward (13 + 2 sync), 22 + 2 backward; the
 * dense layer 6 + 1 and 12 + 1. No modules: one graph a layer each way.
 * full_iteration: no launch, no sync, the GPU time alone. */
static void test_cuda_graph_launches(void **st)
{
    (void)st;
    ModelSpec m = tiny_moe();
    HwProfile hw = a100();
    hw.kernel_lat = 1.0;
    Layout lo;
    layout_default(&lo);
    lo.dp = 8, lo.ep = 8, lo.mbs = 2, lo.gbs = 16, lo.moe_imbalance = 1;
    char err[256];
    assert_int_equal(layout_check(&lo, &m, &hw, err, sizeof err), 0);
    LayerTime lt;
    time_layer(&m, &hw, &lo, &lt);
    assert_rel(time_moe_host_sync_s(&m, &hw, &lo), 2.0, 1e-15);
    assert_rel(lt.fwd, 12, 1e-12);
    assert_rel(lt.bwd, 24, 1e-12);
    assert_rel(lt.moe_fwd, 27 + 2, 1e-12);
    assert_rel(lt.moe_bwd, 54, 1e-12);

    lo.cuda_graph = CG_TE;
    snprintf(lo.cg_modules, sizeof lo.cg_modules, "attn,moe_router,moe_preprocess");
    assert_int_equal(layout_check(&lo, &m, &hw, err, sizeof err), 0);
    time_layer(&m, &hw, &lo, &lt);
    assert_rel(lt.fwd, 7, 1e-12);
    assert_rel(lt.bwd, 13, 1e-12);
    assert_rel(lt.moe_fwd, 13 + 2, 1e-12);
    assert_rel(lt.moe_bwd, 24, 1e-12);
    /* the shared expert overlapping the dispatch leaves the router graph: 27 - 6 - 7 = 14 eager */
    lo.moe_shared_overlap = true;
    time_layer(&m, &hw, &lo, &lt);
    assert_rel(lt.moe_fwd, 14 + 2 + 2, 1e-12);
    lo.moe_shared_overlap = false;

    lo.cg_modules[0] = 0;   /* the whole layer */
    lo.cuda_graph = CG_LOCAL;
    time_layer(&m, &hw, &lo, &lt);
    assert_rel(lt.fwd, 1, 1e-12);
    assert_rel(lt.bwd, 1, 1e-12);
    assert_rel(lt.moe_fwd, 1 + 2, 1e-12);
    assert_rel(lt.moe_bwd, 1, 1e-12);

    /* a capacity factor fixes the shapes on the host: no sync */
    lo.cuda_graph = CG_NONE;
    m.capacity_factor = 1.0;
    time_layer(&m, &hw, &lo, &lt);
    assert_rel(lt.moe_fwd, 27, 1e-12);
    m.capacity_factor = 0;

    /* full iteration: what the GPU takes, as with free launches */
    HwProfile free_launch = hw;
    free_launch.kernel_lat = 0;
    LayerTime gpu;
    time_layer(&m, &free_launch, &lo, &gpu);
    lo.cuda_graph = CG_FULL_ITERATION;
    time_layer(&m, &hw, &lo, &lt);
    assert_true(gpu.moe_fwd < 1e-3 && gpu.fwd < 1e-3);
    assert_rel(lt.fwd, gpu.fwd, 1e-12);
    assert_rel(lt.bwd, gpu.bwd, 1e-12);
    assert_rel(lt.moe_fwd, gpu.moe_fwd, 1e-12);
    assert_rel(lt.moe_bwd, gpu.moe_bwd, 1e-12);
    assert_rel(lt.rc_sel, gpu.rc_sel, 1e-12);
    assert_rel(time_embed(&m, &hw, &lo), time_embed(&m, &free_launch, &lo), 1e-12);
    assert_rel(time_head(&m, &hw, &lo), time_head(&m, &free_launch, &lo), 1e-12);
    assert_true(time_moe_host_sync_s(&m, &hw, &lo) == 0);

    /* what Megatron refuses is refused, naming the flag */
    const char *bad[][2] = {{"full_iteration", "attn"}, {"none", "attn"}, {"local", "moe_preprocess"},
                            {"local", "moe,moe_router"}, {"local", "mamba"}};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        assert_int_equal(layout_parse_cuda_graph(bad[i][0], &lo.cuda_graph), 0);
        snprintf(lo.cg_modules, sizeof lo.cg_modules, "%s", bad[i][1]);
        assert_int_equal(layout_check(&lo, &m, &hw, err, sizeof err), -1);
        assert_non_null(strstr(err, "--cuda-graph-modules"));
    }
    CudaGraphImpl g;
    assert_int_equal(layout_parse_cuda_graph("transformer_engine", &g), 0);
    assert_int_equal(g, CG_TE);
    assert_int_equal(layout_parse_cuda_graph("graphs", &g), -1);
}

/* Megatron's --pipeline-model-parallel-layout, worked by hand from its
 * grammar (pipeline_parallel_layer_layout.py): entry i is chunk i / pp of
 * stage i % pp. DeepSeek-V3's H100 recipe "Et|(tt|)*30mL" at pp 8: 32
 * entries, vp 4; stage 0 = "Et" + 3 x "tt" = 7 layers, embedding in chunk
 * 0; stage 7 = 3 x "tt" + "mL" = 6 layers, MTP and loss in chunk 3; the
 * rest 4 x "tt" = 8. 7 + 6 x 8 + 6 = 61. */
static void test_pipeline_layout_string(void **state)
{
    (void)state;
    char err[256];
    ModelSpec d;
    assert_int_equal(presets_find("deepseek-v3", &d, err, sizeof err), 0);
    assert_int_equal(spec_validate(&d, err, sizeof err), 0);
    PipeLayout p;
    assert_int_equal(layout_pp_parse("Et|(tt|)*30mL", 8, &d, &p, err, sizeof err), 0);
    assert_int_equal(p.n, 32);
    assert_int_equal(p.vp, 4);
    assert_int_equal(p.embed, 0);
    assert_int_equal(p.loss, 31);
    assert_int_equal(p.mtp_entry, 31);
    assert_int_equal(p.t[0], 1);
    assert_int_equal(p.t[31], 0);
    assert_int_equal(p.mtp[31], 1);
    for (int e = 1; e < 31; e++)
        assert_int_equal(p.t[e], 2);

    HwProfile hw;
    assert_int_equal(profile_load_builtin("h100-sxm", &hw, err, sizeof err), 0);
    Layout lo;
    layout_default(&lo);
    lo.tp = 2, lo.pp = 8, lo.dp = 64, lo.ep = 64, lo.etp = 1, lo.gbs = 8192, lo.opt = OPT_DISTOPT;
    snprintf(lo.pp_layout, sizeof lo.pp_layout, "Et|(tt|)*30mL");
    if (layout_check(&lo, &d, &hw, err, sizeof err) != 0)
        fail_msg("layout_check: %s", err);
    assert_int_equal(lo.vp, 4);   /* from the string */
    int want[8] = {7, 8, 8, 8, 8, 8, 8, 6};
    for (int s = 0; s < 8; s++)
        assert_int_equal(lo.layers[s], want[s]);
    assert_int_equal(layout_chunk_layers(&lo, 0, 0), 1);
    assert_int_equal(layout_chunk_layers(&lo, 0, 1), 2);
    assert_int_equal(layout_chunk_layers(&lo, 7, 3), 0);
    assert_int_equal(layout_mtp_stage(&lo), 7);
    MegatronForm f;
    assert_int_equal(layout_megatron_form(&lo, &d, &f, err, sizeof err), 0);
    assert_true(f.pp_layout);
    assert_false(f.embed_in_split || f.loss_in_split || f.first_layers || f.last_layers);

    /* Megatron-Bridge's (16, 1) default and its standalone-MTP form "Et*3|(tt|)*29m|L" at pp 16:
     * 32 entries (vp 2); entry 30 = "m" is chunk 1 of stage 14, entry 31 = "L" chunk 1 of stage 15 */
    assert_int_equal(layout_pp_parse("Et*3|(tt|)*29m|L", 16, &d, &p, err, sizeof err), 0);
    assert_int_equal(p.vp, 2);
    assert_int_equal(p.t[0], 3);
    assert_int_equal(p.mtp_entry, 30);
    layout_default(&lo);
    lo.pp = 16, lo.dp = 64, lo.ep = 64, lo.etp = 1, lo.gbs = 8192, lo.opt = OPT_DISTOPT;
    snprintf(lo.pp_layout, sizeof lo.pp_layout, "Et*3|(tt|)*29m|L");
    if (layout_check(&lo, &d, &hw, err, sizeof err) != 0)
        fail_msg("layout_check: %s", err);
    assert_int_equal(layout_mtp_stage(&lo), 14);
    assert_int_equal(lo.layers[0], 3 + 2);     /* "Ettt" and entry 16 "tt" */
    assert_int_equal(lo.layers[14], 2);        /* entry 14 "tt", entry 30 "m" */
    assert_int_equal(lo.layers[15], 2);        /* entry 15 "tt", entry 31 "L" */
    /* the MTP stage carries the MTP module (a layer, a projection, a second head), the last stage only the
     * head: both hold 2 decoder layers */
    Cost c;
    CostOpts o;
    cost_opts_default(&o);
    cost(&d, &hw, &lo, &o, &c);
    assert_true(c.stage_mb_s[14] > c.stage_mb_s[15]);

    /* commas are cosmetic, x*N repeats one character */
    assert_int_equal(layout_pp_parse("E,t*2|t,t|t|tL", 2, NULL, &p, err, sizeof err), 0);
    assert_int_equal(p.n, 4);
    assert_int_equal(p.t[0] + p.t[1] + p.t[2] + p.t[3], 6);

    /* errors name the character and its position, or the rule */
    assert_int_equal(layout_pp_parse("Et|tx|tL", 3, NULL, &p, err, sizeof err), -1);
    assert_non_null(strstr(err, "'x' at position 5"));
    assert_int_equal(layout_pp_parse("tE|tL", 2, NULL, &p, err, sizeof err), -1);
    assert_non_null(strstr(err, "'E' at position 2"));
    assert_int_equal(layout_pp_parse("Et|t", 2, NULL, &p, err, sizeof err), -1);
    assert_non_null(strstr(err, "no loss 'L'"));
    assert_int_equal(layout_pp_parse("Et|t|tL", 2, NULL, &p, err, sizeof err), -1);
    assert_non_null(strstr(err, "3 stages"));
    assert_int_equal(layout_pp_parse("Et|(tt|*2tL", 2, NULL, &p, err, sizeof err), -1);
    assert_non_null(strstr(err, "'(' at position 4 is never closed"));
    assert_int_equal(layout_pp_parse("Et|(tt|)tL", 2, NULL, &p, err, sizeof err), -1);
    assert_non_null(strstr(err, "needs a repeat count"));
    assert_int_equal(layout_pp_parse("Etm|tL", 2, NULL, &p, err, sizeof err), -1);   /* m then t */
    assert_non_null(strstr(err, "'t' at position 5 after an MTP"));
    assert_int_equal(layout_pp_parse("Et|tm||L", 2, NULL, &p, err, sizeof err), -1);   /* m in chunk 0 of stage 1 */
    assert_non_null(strstr(err, "last chunk"));
    assert_int_equal(layout_pp_parse("Et|(tt|)*30mL", 8, &d, &p, err, sizeof err), 0);
    assert_int_equal(layout_pp_parse("Et|(tt|)*29mL", 8, &d, &p, err, sizeof err), -1);   /* 31 entries */
    assert_int_equal(layout_pp_parse("Ett|(tt|)*30mL", 8, &d, &p, err, sizeof err), -1);
    assert_non_null(strstr(err, "62 decoder layers 't', the model has 61"));
    assert_int_equal(layout_pp_parse("Et|(tt|)*30L", 8, &d, &p, err, sizeof err), -1);
    assert_non_null(strstr(err, "0 MTP layers"));
    /* our executor splits stages into equal chunks: --target ultraplan refuses the string's */
    lo.target = TARGET_ULTRAPLAN;
    assert_int_equal(layout_check(&lo, &d, &hw, err, sizeof err), -1);
    assert_non_null(strstr(err, "unequal"));
    lo.target = TARGET_MEGATRON;
    /* with the other split flags, or a vp that disagrees */
    lo.split_embed = true;
    assert_int_equal(layout_check(&lo, &d, &hw, err, sizeof err), -1);
    assert_non_null(strstr(err, "cannot combine"));
    lo.split_embed = false, lo.vp = 4;
    assert_int_equal(layout_check(&lo, &d, &hw, err, sizeof err), -1);
    assert_non_null(strstr(err, "but vp is 4"));
}

/* --recompute-modules on the tiny MoE (h 64, 2 x 64 = 128 tokens a
 * micro-batch, bf16, tp 1, ep 1, balanced: 256 routed rows of ffn 32),
 * by hand:
 *  - layernorm: two norms, read + write 128 x 64 x 2 B each = 65536 B of
 *    HBM traffic again; frees their outputs, 2 x 128 x 64 x 2 = 32768 B;
 *  - moe_act: the SwiGLU over the rows again, read 2 x 32 + write 32 per
 *    row, 256 x 96 x 2 = 49152 B; frees the product, 256 x 32 x 2 = 16384 B;
 *  - a layer fully recomputed pays none of it; the stage time (one dense
 *    layer, three MoE) adds 1 x rc_mod + 3 x moe_rc_mod. */
static void test_recompute_modules(void **st)
{
    (void)st;
    ModelSpec m = tiny_moe();
    HwProfile hw = a100();
    Layout lo;
    layout_default(&lo);
    lo.dp = 8, lo.ep = 1, lo.mbs = 2, lo.gbs = 16, lo.moe_imbalance = 1;
    char err[256];
    assert_int_equal(layout_check(&lo, &m, &hw, err, sizeof err), 0);
    LayerTime a, b;
    time_layer(&m, &hw, &lo, &a);
    assert_true(a.rc_mod == 0 && a.moe_rc_mod == 0);
    double dense0 = memory_layer_acts(&m, &lo, RECOMPUTE_NONE), moe0 = memory_moe_layer_acts(&m, &lo, RECOMPUTE_NONE);
    snprintf(lo.rc_modules, sizeof lo.rc_modules, "layernorm");
    assert_int_equal(layout_check(&lo, &m, &hw, err, sizeof err), 0);
    time_layer(&m, &hw, &lo, &b);
    assert_rel(b.rc_mod, time_mem_s(&hw, 65536), 1e-12);
    assert_rel(b.moe_rc_mod, time_mem_s(&hw, 65536), 1e-12);
    assert_rel(dense0 - memory_layer_acts(&m, &lo, RECOMPUTE_NONE), 32768, 1e-12);
    snprintf(lo.rc_modules, sizeof lo.rc_modules, "moe_act");
    time_layer(&m, &hw, &lo, &b);
    assert_true(b.rc_mod == 0);
    assert_rel(b.moe_rc_mod, time_mem_s(&hw, 49152), 1e-12);
    assert_rel(moe0 - memory_moe_layer_acts(&m, &lo, RECOMPUTE_NONE), 16384, 1e-12);
    assert_rel(memory_moe_layer_acts(&m, &lo, RECOMPUTE_FULL), 128 * 64 * 2, 1e-12);   /* only the input */
    /* the stage: the forward, backward and the modules of the layers not fully recomputed */
    snprintf(lo.rc_modules, sizeof lo.rc_modules, "layernorm,moe_act");
    time_layer(&m, &hw, &lo, &b);
    double s0 = time_stage_mb(&m, &hw, &lo, &a, 0, 4, 0, 0), s1 = time_stage_mb(&m, &hw, &lo, &b, 0, 4, 0, 0);
    assert_rel(s1 - s0, b.rc_mod + 3 * b.moe_rc_mod, 1e-9);
    assert_rel(time_stage_mb(&m, &hw, &lo, &b, 0, 4, 4, 0), time_stage_mb(&m, &hw, &lo, &a, 0, 4, 4, 0), 1e-12);
    /* HFU counts the modules' GEMMs: mlp on the one dense layer, 2 x 3 x 64 x 128 = 49152 FLOPs a
     * token, shared_experts on the three MoE layers, 2 x 3 x 64 x 64 = 24576 each: 122880 in all */
    snprintf(lo.rc_modules, sizeof lo.rc_modules, "mlp,shared_experts,layernorm");
    assert_int_equal(layout_check(&lo, &m, &hw, err, sizeof err), 0);
    double hfu = train_hw_flops_per_token(&m, &lo);
    lo.rc_modules[0] = 0;
    assert_rel(hfu - train_hw_flops_per_token(&m, &lo), 49152 + 3 * 24576, 1e-12);
    /* names: core attention is --recompute selective, the whole MoE layer is not priced, a typo is named */
    const char *bad[][2] = {{"core_attn", "--recompute selective"}, {"mlp,moe", "not priced"}, {"mla_up", "\"mla_up\""}};
    for (int i = 0; i < 3; i++) {
        snprintf(lo.rc_modules, sizeof lo.rc_modules, "%s", bad[i][0]);
        assert_int_equal(layout_check(&lo, &m, &hw, err, sizeof err), -1);
        assert_non_null(strstr(err, "--recompute-modules"));
        assert_non_null(strstr(err, bad[i][1]));
    }
}

/* The loss head, unfused against fused cross-entropy (a stack's ce_fused),
 * on the tiny MoE (vocab 256, 128 tokens a micro-batch, bf16, tp 1): the
 * unfused ops move 4+4+8+8+4+8+8+4+2x2 = 52 bytes per logit, the fused
 * kernel 5 passes of 2 bytes = 10: 1703936 B against 327680 B over the
 * 32768 logits, and 25 kernels against 12. The output GEMMs are the same. */
static void test_fused_cross_entropy(void **st)
{
    (void)st;
    ModelSpec m = tiny_moe();
    HwProfile hw = a100();
    Layout lo;
    layout_default(&lo);
    lo.dp = 8, lo.mbs = 2, lo.gbs = 16;
    char err[256];
    assert_int_equal(layout_check(&lo, &m, &hw, err, sizeof err), 0);
    double unfused = time_head(&m, &hw, &lo);
    hw.ce_fused = true;
    double fused = time_head(&m, &hw, &lo);
    assert_rel(unfused - fused,
               time_mem_s(&hw, 1703936) - time_mem_s(&hw, 327680) + (25 - 12) * hw.kernel_lat, 1e-9);
    assert_true(fused < unfused);
    /* the last stage keeps the bf16 logits, 2 bytes each, not an fp32 copy: 2 x 32768 B fewer */
    StageMem a, b;
    memory_stage(&m, &hw, &lo, 0, &a);
    hw.ce_fused = false;
    memory_stage(&m, &hw, &lo, 0, &b);
    assert_rel(b.bytes[MEM_ACTS] - a.bytes[MEM_ACTS], 65536, 1e-12);
}

/* Nodes a token's copies reach under group-limited routing, by hand.
 * DeepSeek-V3 (256 experts, top 8, 8 groups, 4 a token):
 *  - over 8 nodes (a group a node): a node is one of the 4 chosen groups
 *    with probability 1/2, then missed by all 8 copies with (3/4)^8, so
 *    D = 8·(1 - 1/2 - (1/2)(3/4)^8) = 3.5995; unlimited 8·(1 - (7/8)^8) = 5.2509.
 *  - over 4 nodes (2 groups a node): the node holds 0, 1 or 2 chosen groups
 *    with probability 15/70, 40/70, 15/70 (C(2,j)·C(6,4-j)/C(8,4)), missed
 *    with 1, (3/4)^8, (1/2)^8: D = 4·(1 - 15/70 - 40/70·0.100113 - 15/70·0.003906).
 *  - over 16 nodes (a group spans 2): the copies fall on the chosen 8 nodes,
 *    D = 8·(1 - (7/8)^8).
 *  - 3 groups over 4 nodes (neither divides the other): no bound. */
static void test_moe_group_limited_nodes(void **st)
{
    (void)st;
    ModelSpec m = {0};
    m.experts = 256, m.topk = 8;
    double q = pow(0.75, 8), un8 = 8 * (1 - pow(7.0 / 8, 8));
    assert_rel(time_moe_token_nodes(&m, 8), un8, 1e-12);
    assert_rel(time_moe_token_nodes(&m, 1), 1.0, 1e-15);
    m.router_groups = 8, m.router_group_topk = 4;
    assert_rel(time_moe_token_nodes(&m, 8), 8 * (0.5 - 0.5 * q), 1e-12);
    assert_rel(time_moe_token_nodes(&m, 8), 3.5995, 1e-4);
    assert_rel(time_moe_token_nodes(&m, 4), 4 * (1 - 15.0 / 70 - 40.0 / 70 * q - 15.0 / 70 * pow(0.5, 8)), 1e-12);
    assert_rel(time_moe_token_nodes(&m, 16), un8, 1e-12);
    /* over 2 nodes (4 groups a node): 0..4 chosen groups on a node, C(4,j)·C(4,4-j)/70 = 1, 16, 36, 16, 1 /70 */
    double miss2 = (1 + 16 * q + 36 * pow(0.5, 8) + 16 * pow(0.25, 8)) / 70;
    assert_rel(time_moe_token_nodes(&m, 2), 2 * (1 - miss2), 1e-12);
    m.experts = 240, m.router_groups = 3, m.router_group_topk = 2;             /* 3 groups over 4 nodes: no bound */
    assert_rel(time_moe_token_nodes(&m, 4), 4 * (1 - pow(0.75, 8)), 1e-12);
    /* the spec refuses a half-given or impossible group limit, naming both flags */
    char err[256];
    ModelSpec d = tiny_moe();
    d.router_groups = 2;
    assert_int_equal(spec_validate(&d, err, sizeof err), -1);
    assert_non_null(strstr(err, "moe-router-group-topk"));
    d.router_groups = 3, d.router_group_topk = 1;
    assert_int_equal(spec_validate(&d, err, sizeof err), -1);
    assert_non_null(strstr(err, "moe-router-num-groups"));
}

/* The token dispatchers and the 1F1B A2A overlap, worked by hand on the
 * tiny MoE (h 64, top 2) over 8 EP ranks, 4 per node (2 nodes): 128 tokens
 * a micro-batch, routed rows 256, 2 bytes each: 32768 B per dispatch. */
static void test_moe_dispatchers(void **st)
{
    (void)st;
    ModelSpec m = tiny_moe();
    HwProfile hw = a100();
    hw.gpus_per_node = 4;
    hw.intra.bw = 100e9, hw.intra.lat = 1e-6, hw.inter.bw = 10e9, hw.inter.lat = 5e-6;
    hw.a2a_lat = 3e-5, hw.a2a_eff = 0.5;
    Layout lo;
    layout_default(&lo);
    lo.dp = 16, lo.tp = 1, lo.ep = 8, lo.mbs = 2, lo.gbs = 32, lo.opt = OPT_DISTOPT, lo.moe_imbalance = 1;
    char err[256];
    assert_int_equal(layout_check(&lo, &m, &hw, err, sizeof err), 0);
    assert_rel(time_moe_dispatch_bytes(&m, &lo), 32768, 1e-15);
    /* alltoall: 3/8 over NVLink, 4/8 over the NIC at half their bandwidth; the NIC sets the pace */
    assert_rel(time_moe_a2a_s(&m, &hw, &lo), 3e-5 + 5e-6 + 0.5 * 32768 / 5e9, 1e-12);
    /* flex: a token goes to the other node once if either of its 2 experts is there, 1 - (1/2)^2 = 3/4
     * of the time: 128 x 64 x 2 B x 0.75 = 12288 B over the NIC; the 256 rows fan out over NVLink, 3/4
     * of them to another GPU: 24576 B */
    lo.moe_dispatcher = MOE_DISPATCH_FLEX;
    assert_rel(time_moe_a2a_s(&m, &hw, &lo), 3e-5 + 5e-6 + fmax(12288 / 5e9, 24576 / 50e9), 1e-12);
    /* allgather: every rank's 128 tokens gathered over the 8 (131072 B in all) */
    lo.moe_dispatcher = MOE_DISPATCH_ALLGATHER;
    assert_rel(time_moe_a2a_s(&m, &hw, &lo), time_coll_allgather(&hw, 131072, 8, 4), 1e-12);
    /* group-limited routing, 2 groups (one a node), a token in 1: both its experts on one node, so
     * half the tokens go to the other node, 64 x 64 x 2 B = 8192 B over the NIC */
    lo.moe_dispatcher = MOE_DISPATCH_FLEX;
    m.router_groups = 2, m.router_group_topk = 1;
    assert_int_equal(spec_validate(&m, err, sizeof err), 0);
    assert_rel(time_moe_a2a_s(&m, &hw, &lo), 3e-5 + 5e-6 + fmax(8192 / 5e9, 24576 / 50e9), 1e-12);
    m.router_groups = m.router_group_topk = 0;
    /* in one node flex is the all-to-all */
    lo.ep = 4, lo.moe_dispatcher = MOE_DISPATCH_FLEX;
    double flex1 = time_moe_a2a_s(&m, &hw, &lo);
    lo.moe_dispatcher = MOE_DISPATCH_ALLTOALL;
    assert_rel(flex1, time_moe_a2a_s(&m, &hw, &lo), 1e-15);
    /* ... but flex sorts only the received rows: alltoall permutes the 128 tokens x top 2 = 256 copies
     * and the 256 received rows, h 64, bf16, read and written, dispatch and combine: 2·2·64·512·2 =
     * 262144 B each way; flex the 256 rows only, 131072 B (host time off so the GPU's shows) */
    {
        HwProfile nh = hw;
        nh.kernel_lat = 0;
        LayerTime ta, tf;
        time_layer(&m, &nh, &lo, &ta);
        lo.moe_dispatcher = MOE_DISPATCH_FLEX;
        time_layer(&m, &nh, &lo, &tf);
        lo.moe_dispatcher = MOE_DISPATCH_ALLTOALL;
        assert_rel(layout_moe_rows(&m, &lo), 256, 1e-15);
        assert_rel(ta.moe_fwd - tf.moe_fwd, time_mem_s(&nh, 262144) - time_mem_s(&nh, 131072), 1e-9);
        assert_rel(ta.moe_bwd - tf.moe_bwd, time_mem_s(&nh, 262144) - time_mem_s(&nh, 131072), 1e-9);
        assert_rel(ta.fwd, tf.fwd, 1e-15);   /* a dense layer has no dispatcher */
    }

    /* the overlap: what the pair's compute (forward + backward of the layer) cannot hide of the four
     * transfers, half each way; a slow NIC so that some is left */
    lo.ep = 8;
    hw.inter.bw = 1e6;
    LayerTime a, b;
    time_layer(&m, &hw, &lo, &a);
    double x = time_moe_a2a_s(&m, &hw, &lo);
    assert_rel(a.ep_fwd, 2 * x, 1e-15);
    lo.moe_a2a_overlap = true;
    assert_int_equal(layout_check(&lo, &m, &hw, err, sizeof err), 0);
    assert_true(time_moe_a2a_overlap(&lo));
    time_layer(&m, &hw, &lo, &b);
    assert_rel(b.ep_fwd + b.ep_bwd, 4 * x - (b.moe_fwd + b.moe_bwd), 1e-12);
    assert_true(b.ep_fwd > 0 && b.ep_fwd < a.ep_fwd);
    assert_rel(b.ep_rc, a.ep_rc, 1e-15);   /* a full recompute's forward is not paired */
    hw.inter.bw = 10e9;                      /* a fast NIC: all of it hidden */
    time_layer(&m, &hw, &lo, &b);
    assert_true(b.ep_fwd == 0 && b.ep_bwd == 0);
    /* --moe-shared-expert-overlap (without the 1F1B overlap): the tiny MoE's shared expert (ffn 64)
     * hides that much of each way's two transfers; a slow NIC leaves some exposed */
    lo.moe_a2a_overlap = false;
    hw.inter.bw = 1e6;
    time_layer(&m, &hw, &lo, &a);
    lo.moe_shared_overlap = true;
    assert_int_equal(layout_check(&lo, &m, &hw, err, sizeof err), 0);
    time_layer(&m, &hw, &lo, &b);
    assert_true(b.shared_fwd > 0 && b.shared_bwd > b.shared_fwd);
    assert_rel(b.ep_fwd, a.ep_fwd - b.shared_fwd, 1e-12);
    assert_rel(b.ep_bwd, a.ep_bwd - b.shared_bwd, 1e-12);
    assert_rel(b.moe_fwd, a.moe_fwd, 1e-15);   /* the shared expert still runs on the GPU */
    HwProfile fast = hw;   /* transfers shorter than the shared expert: nothing exposed */
    fast.inter.bw = fast.intra.bw = 1e15, fast.inter.lat = fast.intra.lat = 0, fast.a2a_lat = 1e-9;
    time_layer(&m, &fast, &lo, &b);
    assert_true(b.ep_fwd == 0 && b.ep_bwd == 0);
    hw.inter.bw = 10e9;
    lo.moe_dispatcher = MOE_DISPATCH_ALLGATHER;   /* Megatron: alltoall or flex only */
    assert_int_equal(layout_check(&lo, &m, &hw, err, sizeof err), -1);
    assert_non_null(strstr(err, "--moe-shared-expert-overlap"));
    lo.moe_dispatcher = MOE_DISPATCH_ALLTOALL;
    lo.moe_shared_overlap = false, lo.moe_a2a_overlap = true;
    /* Megatron's requirements, each named */
    lo.pp = 2, lo.dp = 8;
    memset(lo.layers, 0, sizeof lo.layers);   /* split again */
    assert_int_equal(layout_check(&lo, &m, &hw, err, sizeof err), -1);
    assert_non_null(strstr(err, "needs interleaving"));
    lo.pp = 1, lo.dp = 16, lo.moe_dispatcher = MOE_DISPATCH_ALLGATHER;
    memset(lo.layers, 0, sizeof lo.layers);
    assert_int_equal(layout_check(&lo, &m, &hw, err, sizeof err), -1);
    assert_non_null(strstr(err, "not allgather"));
    lo.moe_dispatcher = MOE_DISPATCH_FLEX;
    assert_int_equal(layout_check(&lo, &m, &hw, err, sizeof err), 0);
    layout_set_recompute(&lo, RECOMPUTE_FULL);
    assert_false(time_moe_a2a_overlap(&lo));
    assert_int_equal(layout_megatron_check(&lo, &m, err, sizeof err), -1);
    assert_non_null(strstr(err, "full recomputation"));
    layout_set_recompute(&lo, RECOMPUTE_NONE);
    lo.ep = 1;
    assert_int_equal(layout_check(&lo, &m, &hw, err, sizeof err), -1);
    assert_non_null(strstr(err, "needs expert parallelism"));
    /* names round-trip */
    MoeDispatcher d;
    assert_int_equal(layout_parse_dispatcher("flex", &d), 0);
    assert_int_equal(d, MOE_DISPATCH_FLEX);
    assert_int_equal(layout_parse_dispatcher("deepep", &d), -1);
}

/* GPT-OSS-120B by hand from its config.json (the model card's 116.83B total,
 * 5.13B active without the input embedding). Per layer: attention q 2880*4096
 * + 4096, k and v 2*(2880*512 + 512), o 4096*2880 + 2880, sinks 64 =
 * 26,550,144 (the card's 0.96B over 36 layers); 128 experts of 2880*5760 +
 * 5760 + 2880*2880 + 2880 = 24,891,840; router 2880*128 + 128 = 368,768;
 * norms 2*2880. 36 layers + 2*201,088*2880 + 2880 = 116,829,156,672.
 * Active: 4 experts: 36*(26,550,144 + 4*24,891,840 + 368,768 + 5,760) +
 * 2*579,133,440 + 2880 = 5,711,982,912 (5,132,849,472 without the input
 * embedding). Megatron's estimator leaves biases and sinks out. */
static void test_gpt_oss_counts(void **st)
{
    (void)st;
    char err[256];
    ModelSpec m;
    assert_int_equal(presets_find("gpt-oss-120b", &m, err, sizeof err), 0);
    assert_int_equal(spec_attn_params(&m), 26550144);
    assert_int_equal(spec_expert_params(&m), 24891840);
    assert_int_equal(spec_params(&m, 1, PARAMS_EXACT), 116829156672LL);
    assert_int_equal(spec_params_active(&m, 1, PARAMS_EXACT), 5711982912LL);
    assert_int_equal(spec_params_active(&m, 1, PARAMS_EXACT) - 201088LL * 2880, 5132849472LL);
    ModelSpec plain = m;
    plain.bias = plain.sinks = false;
    assert_int_equal(spec_params(&m, 1, PARAMS_MEGATRON), spec_params(&plain, 1, PARAMS_EXACT));
    /* sinks are a per head per layer */
    ModelSpec ns = m;
    ns.sinks = false;
    assert_int_equal(spec_params(&m, 1, PARAMS_EXACT) - spec_params(&ns, 1, PARAMS_EXACT), 36 * 64);
    /* a dense model carries them too */
    ModelSpec d = llama2_7b();
    int64_t n0 = spec_params(&d, 1, PARAMS_EXACT), g0 = spec_params(&d, 1, PARAMS_MEGATRON);
    d.sinks = true;
    assert_int_equal(spec_params(&d, 1, PARAMS_EXACT) - n0, 32 * 32);
    assert_int_equal(spec_params(&d, 1, PARAMS_MEGATRON), g0);
    /* the cost model's memory counts them too: a whole gpt-oss-120b MoE layer at
     * tp 1, ep 1 is spec_moe_layer_params; at tp 2 the 64 sinks split with the heads */
    ModelSpec big;
    assert_int_equal(presets_find("gpt-oss-120b", &big, err, sizeof err), 0);
    Layout lo1;
    layout_default(&lo1);
    double ex1;
    assert_rel(memory_layer_params(&big, &lo1, true, &ex1), (double)spec_moe_layer_params(&big), 1e-15);
    ModelSpec nos = big;
    nos.sinks = false;
    lo1.tp = 2, lo1.sp = true;
    assert_rel(memory_layer_params(&big, &lo1, true, &ex1) - memory_layer_params(&nos, &lo1, true, &ex1), 32, 1e-12);
    /* gpt-oss-20b: the same layer, 24 layers of 32 experts (router 2880*32 + 32):
     * 24*(26,550,144 + 32*24,891,840 + 92,192 + 5,760) + 2*579,133,440 + 2880
     * = 20,914,757,184 (the card's 20.91B); active 24*(26,550,144 +
     * 4*24,891,840 + 92,192 + 5,760) + 579,133,440 + 2880 = 3,608,307,264
     * without the input embedding (3.61B) */
    assert_int_equal(presets_find("gpt-oss-20b", &m, err, sizeof err), 0);
    assert_int_equal(spec_params(&m, 1, PARAMS_EXACT), 20914757184LL);
    assert_int_equal(spec_params_active(&m, 1, PARAMS_EXACT) - 201088LL * 2880, 3608307264LL);
}

/* Sliding windows: which layers, how many keys, what FLOPs. */
static void test_sliding_window(void **st)
{
    (void)st;
    char err[256];
    ModelSpec m;
    assert_int_equal(presets_find("gpt-oss-120b", &m, err, sizeof err), 0);
    /* skip freq 2: layers 1, 3, ... (0-based) full, 0, 2, ... windowed */
    assert_true(spec_layer_is_windowed(&m, 0) && !spec_layer_is_windowed(&m, 1) && spec_layer_is_windowed(&m, 34));
    assert_false(spec_layer_is_windowed(&m, 36));
    assert_int_equal(spec_windowed_layers(&m), 18);
    ModelSpec x = m;
    x.window_skip_freq = 3;   /* layers 2, 5, ..., 35 full: 12 of 36 */
    assert_int_equal(spec_windowed_layers(&x), 24);
    assert_true(spec_layer_is_windowed(&x, 1) && !spec_layer_is_windowed(&x, 2));
    x.window_skip_freq = 0;
    assert_int_equal(spec_windowed_layers(&x), 36);
    /* W = 3 (4 keys) over s = 8: keys 1, 2, 3, 4, 4, 4, 4, 4 = 26 -> 3.25 */
    x.s = 8, x.window = 3;
    assert_rel(spec_window_keys(&x), 26.0 / 8, 1e-15);
    /* window 127 at 4096 tokens: a ramp of 128*127/2 then 128 keys for 3969 queries */
    double keys = (128.0 * 127 / 2 + 128.0 * 3969) / 4096;
    assert_rel(spec_window_keys(&m), keys, 1e-15);
    /* core FLOPs a token: 4 * 4096 (q width) per key; half the layers full */
    double per_key = 4.0 * 4096;
    assert_rel(spec_layer_attn_flops_fwd(&m, true), per_key * (0.5 * 4096 + keys) / 2, 1e-12);
    assert_rel(spec_layer_attn_flops_fwd(&m, false), per_key * (4096.0 + 128) / 2, 1e-12);
    ModelSpec full = m;
    full.window = full.window_skip_freq = 0;
    assert_rel(spec_layer_attn_flops_fwd(&full, false), per_key * 4096, 1e-12);
    double d = spec_flops_per_token(&full, 1, FLOPS_FULL_ATTN) - spec_flops_per_token(&m, 1, FLOPS_FULL_ATTN);
    assert_rel(d, 3.0 * 36 * per_key * (4096.0 - (4096.0 + 128) / 2), 1e-9);
    /* a flash kernel in 128 x 128 tiles: the first query tile one tile, every
     * other two (its own and the one before): (128 + 31 * 256) / 32 keys */
    assert_rel(time_window_tile_keys(&m), (128.0 + 31 * 256) / 32, 1e-15);
    x = m;
    x.window = 300;   /* 301 keys: 3 earlier tiles for most query tiles, 4 in all */
    assert_rel(time_window_tile_keys(&x), (128.0 * (1 + 2 + 3) + 29 * 512.0) / 32, 1e-15);
    /* refusals name the knob */
    x = m;
    x.window = 0;
    assert_int_equal(spec_validate(&x, err, sizeof err), -1);
    assert_non_null(strstr(err, "window-skip-freq"));
    x = m;
    x.mlp = MLP_GELU;
    assert_int_equal(spec_validate(&x, err, sizeof err), -1);
    assert_non_null(strstr(err, "act-clamp"));
    x = m;
    x.act_clamp = -1;
    assert_int_equal(spec_validate(&x, err, sizeof err), -1);
}

/* --fp8-dot-product-attention (NOTES step 58): the attention core at cuDNN's
 * published fp8 rates over bf16. What the layer shows of them: the selective
 * recompute term is the core's forward, and the backward moves by 2.5 cores
 * (d = 128) times the backward's ratio. The sourced ratios: GB300 (Blackwell
 * Ultra) MXFP8 at d = 128 0.75 / 1.09 (cudnn-frontend's Llama 3.1 medians:
 * MXFP8's backward loses to bf16 at d = 128), per-tensor at d = 192/128
 * 0.575 / 0.58 (DeepSeek-V3 and Kimi K2); B200 per-tensor at d = 128
 * 0.78 / 0.97 (GB200's); Hopper per-tensor 0.69 / 1.01 (H200's). */
static void test_fp8_attention(void **st)
{
    (void)st;
    char err[256];
    HwProfile gb300, b200, h100;
    assert_int_equal(profile_load_builtin("gb300", &gb300, err, sizeof err), 0);
    assert_int_equal(profile_load_builtin("b200", &b200, err, sizeof err), 0);
    assert_int_equal(profile_load_builtin("h100-sxm", &h100, err, sizeof err), 0);
    ModelSpec a = llama2_7b();   /* d = 128, 4096 tokens */
    Layout lo = layout_for(&a, &gb300, 8, 1, 1, 8, 64);   /* mbs 8: far above the launch floor */
    lo.prec = PREC_FP8, lo.fp8_recipe = FP8R_MXFP8;
    double f, b;
    time_fp8_attn(&a, &gb300, &lo, &f, &b);   /* off: no factor */
    assert_true(f == 1.0 && b == 1.0);
    LayerTime off, on;
    time_layer(&a, &gb300, &lo, &off);
    lo.fp8_dpa = true;
    assert_int_equal(layout_check(&lo, &a, &gb300, err, sizeof err), 0);
    time_fp8_attn(&a, &gb300, &lo, &f, &b);
    assert_rel(f, 0.75, 1e-15);
    assert_rel(b, 1.09, 1e-15);
    time_layer(&a, &gb300, &lo, &on);
    assert_rel(on.rc_sel, 0.75 * off.rc_sel, 1e-12);
    assert_rel(on.bwd - off.bwd, 2.5 * off.rc_sel * (1.09 - 1), 1e-9);
    assert_true(on.fwd < off.fwd && on.bwd > off.bwd);
    /* one scale a tensor (tensorwise) and the wide MLA head of DeepSeek-V3 */
    ModelSpec ds;
    assert_int_equal(presets_find("deepseek-v3", &ds, err, sizeof err), 0);
    lo.fp8_recipe = FP8R_TENSORWISE;
    time_fp8_attn(&ds, &gb300, &lo, &f, &b);
    assert_rel(f, 0.575, 1e-15);
    assert_rel(b, 0.58, 1e-15);
    time_fp8_attn(&a, &b200, &lo, &f, &b);   /* Blackwell */
    assert_rel(f, 0.78, 1e-15);
    assert_rel(b, 0.97, 1e-15);
    time_fp8_attn(&ds, &h100, &lo, &f, &b);  /* Hopper: H200's d = 128 figures for every head */
    assert_rel(f, 0.69, 1e-15);
    assert_rel(b, 1.01, 1e-15);
    /* a 128-token sliding window: its fp8 backward computes the causal
     * triangle, so an all-windowed model's backward is the full model's on
     * Blackwell, while its forward keeps the window; Hopper's cuDNN has no
     * fp8 window, and the windowed layers stay as in bf16 */
    ModelSpec w = a, full = a;
    w.window = 127, w.window_skip_freq = 0;
    assert_int_equal(spec_validate(&w, err, sizeof err), 0);
    LayerTime tw, tf, tw0;
    time_layer(&w, &gb300, &lo, &tw);
    time_layer(&full, &gb300, &lo, &tf);
    assert_rel(tw.bwd, tf.bwd, 1e-12);
    assert_true(tw.fwd < tf.fwd);
    Layout lh = layout_for(&a, &h100, 8, 1, 1, 8, 64);
    lh.prec = PREC_FP8, lh.fp8_recipe = FP8R_TENSORWISE, lh.fp8_dpa = true;
    time_layer(&w, &h100, &lh, &tw);
    time_layer(&full, &h100, &lh, &tf);
    lh.fp8_dpa = false;
    time_layer(&w, &h100, &lh, &tw0);
    assert_true(tw.bwd < tf.bwd);
    assert_rel(tw.bwd, tw0.bwd, 1e-12);
    assert_rel(tw.rc_sel, tw0.rc_sel, 1e-12);
    /* refusals: fp8 attention needs fp8 and a fused kernel; Megatron-LM's CLI cannot ask for it */
    Layout x = lo;
    x.prec = PREC_BF16;
    assert_int_equal(layout_check(&x, &a, &gb300, err, sizeof err), -1);
    assert_non_null(strstr(err, "--fp8-dot-product-attention"));
    x = lo, x.flash = false;
    assert_int_equal(layout_check(&x, &a, &gb300, err, sizeof err), -1);
    assert_non_null(strstr(err, "flash"));
    char why[512];
    assert_int_equal(layout_megatron_check(&lo, &a, why, sizeof why), -1);
    assert_non_null(strstr(why, "--no-fp8-dot-product-attention"));
    lo.fp8_dpa = false;
    assert_int_equal(layout_megatron_check(&lo, &a, why, sizeof why), 0);
}

/* Head dimension 64 runs flash attention at 0.67 of the d = 128 rate from
 * Hopper on (FlashAttention-3 paper, cuDNN 408 / 609 TFLOP/s); nothing
 * changes at d = 128 or on an A100 profile. */
static void test_attn_head_dim(void **st)
{
    (void)st;
    char err[256];
    HwProfile h100, a100p;
    assert_int_equal(profile_load_builtin("h100-sxm", &h100, err, sizeof err), 0);
    assert_int_equal(profile_load_builtin("a100-80g", &a100p, err, sizeof err), 0);
    ModelSpec m;
    assert_int_equal(presets_find("gpt-oss-120b", &m, err, sizeof err), 0);
    assert_rel(time_attn_dim_eff(&m, &h100, false), 0.67, 1e-15);
    assert_rel(time_attn_dim_eff(&m, &h100, true), 0.84, 1e-15);
    assert_rel(time_attn_dim_eff(&m, &a100p, false), 1.0, 0);
    ModelSpec l = llama2_7b();
    assert_rel(time_attn_dim_eff(&l, &h100, false), 1.0, 0);
    l.d_head = 96;
    assert_rel(time_attn_dim_eff(&l, &h100, false), 0.835, 1e-12);
    assert_rel(time_attn_dim_eff(&l, &h100, true), 0.92, 1e-12);
    /* the selective-recompute term is the attention core: with the same
     * FLOPs, d = 64 takes 1/0.67 of d = 128's time */
    ModelSpec a = llama2_7b(), b = a;
    b.a = 64, b.d_head = 64;   /* same q width 4096, same core FLOPs */
    Layout lo = layout_for(&a, &h100, 8, 1, 1, 1, 64);
    LayerTime ta, tb;
    time_layer(&a, &h100, &lo, &ta);
    time_layer(&b, &h100, &lo, &tb);
    assert_rel(tb.rc_sel, ta.rc_sel / 0.67, 1e-9);
    /* the backward at 0.84: the same d = 64 model against the profile without
     * fp8 (read as pre-Hopper, no factor), mbs 8 to stay off the launch floor */
    HwProfile nof8h = h100;
    nof8h.peak[PREC_FP8] = 0;
    Layout l8 = layout_for(&b, &h100, 8, 1, 1, 8, 64);
    time_layer(&b, &h100, &l8, &tb);
    time_layer(&b, &nof8h, &l8, &ta);
    assert_rel(tb.rc_sel, ta.rc_sel / 0.67, 1e-9);
    assert_rel(tb.bwd - ta.bwd, 2.5 * ta.rc_sel * (1 / 0.84 - 1), 1e-9);
    /* under context parallelism too (the ring's blocks and merges): the same d = 64
     * model on the same profile without fp8 (read as pre-Hopper: no factor),
     * links fast enough that the forward exchange hides */
    HwProfile fast = h100;
    fast.intra.bw *= 1e6, fast.inter.bw *= 1e6, fast.intra.lat = fast.inter.lat = fast.coll_lat = 0;
    HwProfile nof8 = fast;
    nof8.peak[PREC_FP8] = 0;
    lo = layout_for(&b, &fast, 4, 1, 1, 8, 64);   /* mbs 8: far above the launch floor */
    lo.cp = 2;
    char e2[256];
    assert_int_equal(layout_check(&lo, &b, &fast, e2, sizeof e2), 0);
    time_layer(&b, &fast, &lo, &tb);
    time_layer(&b, &nof8, &lo, &ta);
    assert_rel(tb.rc_sel, ta.rc_sel / 0.67, 1e-9);
}

/* Biased experts: the FC2 bias pass forward (read and write h a row) and
 * the two bias-gradient reductions backward (2 ef + h a row), nothing else. */
static void test_moe_bias_passes(void **st)
{
    (void)st;
    char err[256];
    HwProfile hw;
    assert_int_equal(profile_load_builtin("h100-sxm", &hw, err, sizeof err), 0);
    ModelSpec m;
    assert_int_equal(presets_find("gpt-oss-120b", &m, err, sizeof err), 0);
    Layout lo = layout_for(&m, &hw, 64, 1, 1, 1, 64);
    lo.ep = 8;
    ModelSpec nb = m;
    nb.bias = false;
    LayerTime a, b;
    time_layer(&m, &hw, &lo, &a);
    time_layer(&nb, &hw, &lo, &b);
    double rows = layout_moe_rows(&m, &lo);
    assert_rel(a.moe_fwd - b.moe_fwd, time_mem_s(&hw, 2.0 * 2 * rows * 2880), 1e-9);
    assert_rel(a.moe_bwd - b.moe_bwd, time_mem_s(&hw, 2.0 * rows * (2 * 2880 + 2880)), 1e-9);
    assert_rel(a.fwd, b.fwd, 0);   /* a dense layer's time has no such term */
}

/* --fp8-recipe (COSTMODEL.md §4.1): Qwen3-30B-A3B on one H100 with ep 16,
 * mbs 1, seq 4096, imbalance 1, a flat memory curve (bytes / (hbm_bw / 2))
 * and no host time, so each byte counts alike. Worked by hand: tok 4096,
 * h 2048, expert ffn 768 (FC1 2·768), rows 8·4096 = 32768 over 8 local
 * experts of 4096 rows, q 32·128 = 4096, kv 4·128 = 512, ab 2.
 * tensorwise against delayed:
 *  experts fwd: 8 · 2 · 4096 · (2048 + 768)             = 184,549,376 B
 *  attention fwd: 4096 · (4 · 2048 [norm] + 2 · 4096)   =  67,108,864 B
 *  experts bwd: 8 · 2 · 4096 · (2048 + 1536)            = 234,881,024 B
 *  attention bwd: gradients 2 · 4096 · (5120 + 2048)    =  58,720,256 B
 *                 and the forward's passes twice        = 134,217,728 B
 *  a dense layer's fwd: 4096 · (4 · 2 · 2048 + 2 · (4096 + 6144)) = 150,994,944 B
 * mxfp8 against delayed: only the norm's bf16 write and read,
 *  4096 · 4 · 2048 = 33,554,432 B forward (twice that backward). */
static void test_fp8_recipe(void **st)
{
    (void)st;
    char err[256];
    HwProfile hw;
    assert_int_equal(profile_load_builtin("h100-sxm", &hw, err, sizeof err), 0);
    hw.mem_eff.n = 1;
    hw.mem_eff.pt[0].size = 1;
    hw.mem_eff.pt[0].eff = 0.5;
    hw.kernel_lat = 0;
    double bw = 0.5 * hw.hbm_bw;
    ModelSpec m;
    assert_int_equal(presets_find("qwen3-30b-a3b", &m, err, sizeof err), 0);
    m.s = 4096;
    Layout lo = layout_for(&m, &hw, 16, 1, 1, 1, 1024);
    lo.ep = 16, lo.moe_imbalance = 1, lo.prec = PREC_FP8;
    assert_int_equal(layout_check(&lo, &m, &hw, err, sizeof err), 0);
    LayerTime d, tw, mx, bk;
    time_layer(&m, &hw, &lo, &d);
    lo.fp8_recipe = FP8R_TENSORWISE;
    time_layer(&m, &hw, &lo, &tw);
    lo.fp8_recipe = FP8R_MXFP8;
    time_layer(&m, &hw, &lo, &mx);
    lo.fp8_recipe = FP8R_BLOCKWISE;
    time_layer(&m, &hw, &lo, &bk);
    assert_rel(tw.moe_fwd - d.moe_fwd, (184549376.0 + 67108864.0) / bw, 1e-9);
    assert_rel(tw.moe_bwd - d.moe_bwd, (234881024.0 + 58720256.0 + 134217728.0) / bw, 1e-9);
    assert_rel(tw.fwd - d.fwd, 150994944.0 / bw, 1e-9);
    assert_rel(mx.moe_fwd - d.moe_fwd, 33554432.0 / bw, 1e-9);
    assert_rel(mx.moe_bwd - d.moe_bwd, 2 * 33554432.0 / bw, 1e-9);
    assert_rel(bk.moe_fwd, mx.moe_fwd, 0);
    /* the recipe is read only under fp8 */
    lo.prec = PREC_BF16;
    LayerTime b1, b2;
    time_layer(&m, &hw, &lo, &b1);
    lo.fp8_recipe = FP8R_DELAYED;
    time_layer(&m, &hw, &lo, &b2);
    assert_rel(b1.moe_fwd, b2.moe_fwd, 0);
    assert_rel(b1.moe_bwd, b2.moe_bwd, 0);
    /* an out-of-range recipe is refused by name */
    lo.fp8_recipe = (Fp8Recipe)7;
    assert_int_equal(layout_check(&lo, &m, &hw, err, sizeof err), -1);
    assert_non_null(strstr(err, "--fp8-recipe"));
}

/* The fp8 recipes against the GPU's compute capability (Transformer Engine's
 * checks): MXFP8 needs 10.0, so it is refused on an H100 (9.0) by name and
 * with the capability, and taken on a B200 (10.0) and B300 (10.3); blockwise
 * needs 9.0 (taken on the H100, refused at 8.9); a profile that does not say
 * (0) is not checked. The shipped profiles carry the capability. */
static void test_fp8_recipe_needs_capability(void **st)
{
    (void)st;
    char err[320];
    ModelSpec m;
    assert_int_equal(presets_find("llama3.1-8b", &m, err, sizeof err), 0);
    HwProfile h100, b200, b300;
    assert_int_equal(profile_load_builtin("h100-sxm", &h100, err, sizeof err), 0);
    assert_int_equal(profile_load_builtin("b200", &b200, err, sizeof err), 0);
    assert_int_equal(profile_load_builtin("b300", &b300, err, sizeof err), 0);
    assert_true(h100.compute_capability == 9.0 && b200.compute_capability == 10.0 && b300.compute_capability == 10.3);
    Layout lo = layout_for(&m, &h100, 8, 1, 1, 1, 256);
    lo.prec = PREC_FP8, lo.fp8_recipe = FP8R_MXFP8;
    assert_int_equal(layout_check(&lo, &m, &h100, err, sizeof err), -1);
    assert_non_null(strstr(err, "--fp8-recipe mxfp8 needs compute capability 10.0"));
    assert_non_null(strstr(err, "h100-sxm is 9.0"));
    assert_int_equal(layout_check(&lo, &m, &b200, err, sizeof err), 0);
    assert_int_equal(layout_check(&lo, &m, &b300, err, sizeof err), 0);
    lo.prec = PREC_BF16;   // the recipe is read only under fp8
    assert_int_equal(layout_check(&lo, &m, &h100, err, sizeof err), 0);
    lo.prec = PREC_FP8, lo.fp8_recipe = FP8R_BLOCKWISE;
    assert_int_equal(layout_check(&lo, &m, &h100, err, sizeof err), 0);
    HwProfile ada = h100;
    ada.compute_capability = 8.9;
    assert_int_equal(layout_check(&lo, &m, &ada, err, sizeof err), -1);
    assert_non_null(strstr(err, "blockwise needs compute capability 9.0"));
    ada.compute_capability = 0;   // not known: not checked
    lo.fp8_recipe = FP8R_MXFP8;
    assert_int_equal(layout_check(&lo, &m, &ada, err, sizeof err), 0);
}

/* MXFP8 on the MoE wire (--moe-dispatch-fwd-dtype, --moe-combine-bwd-dtype;
 * COSTMODEL.md §4.6): Qwen3-30B-A3B on a B200 with ep 16, mbs 1, seq 4096,
 * imbalance 1, flex, fp8 with the MXFP8 recipe. Worked by hand: the busiest
 * rank receives 8 · 4096 = 32,768 rows of h 2048, 134,217,728 B in bf16 and
 * (1 + 1/32) · 32768 · 2048 = 69,206,016 B in MXFP8. A layer's forward moves
 * the dispatch in its wire and the combine in bf16, its backward the
 * combine's gradient in its wire and the dispatch's in bf16: with the
 * dispatch alone in MXFP8 the forward's EP time is one MXFP8 all-to-all and
 * one bf16, the backward's two bf16. The wire needs flex and the MXFP8
 * recipe, refused by name otherwise; bf16 changes nothing. */
static void test_moe_wire_mxfp8(void **st)
{
    (void)st;
    char err[320];
    HwProfile hw;
    assert_int_equal(profile_load_builtin("b200", &hw, err, sizeof err), 0);
    ModelSpec m;
    assert_int_equal(presets_find("qwen3-30b-a3b", &m, err, sizeof err), 0);
    m.s = 4096;
    Layout lo = layout_for(&m, &hw, 16, 1, 1, 1, 1024);
    lo.ep = 16, lo.moe_imbalance = 1, lo.prec = PREC_FP8, lo.fp8_recipe = FP8R_MXFP8;
    lo.moe_dispatcher = MOE_DISPATCH_FLEX;
    assert_int_equal(layout_check(&lo, &m, &hw, err, sizeof err), 0);
    assert_rel(time_moe_dispatch_bytes_wire(&m, &lo, MOE_WIRE_BF16), 134217728.0, 1e-12);
    assert_rel(time_moe_dispatch_bytes_wire(&m, &lo, MOE_WIRE_MXFP8), 69206016.0, 1e-12);
    LayerTime b, d, c;
    time_layer(&m, &hw, &lo, &b);
    double a16 = time_moe_a2a_s(&m, &hw, &lo), a8 = time_moe_a2a_wire_s(&m, &hw, &lo, MOE_WIRE_MXFP8);
    assert_true(a8 > 0 && a8 < a16);
    assert_rel(b.ep_fwd, 2 * a16, 1e-12);
    lo.moe_dispatch_wire = MOE_WIRE_MXFP8;
    assert_int_equal(layout_check(&lo, &m, &hw, err, sizeof err), 0);
    time_layer(&m, &hw, &lo, &d);
    assert_rel(d.ep_fwd, a8 + a16, 1e-12);
    assert_rel(d.ep_rc, a8 + a16, 1e-12);
    assert_rel(d.ep_bwd, b.ep_bwd, 1e-12);
    lo.moe_combine_bwd_wire = MOE_WIRE_MXFP8;
    time_layer(&m, &hw, &lo, &c);
    assert_rel(c.ep_bwd, a8 + a16, 1e-12);
    /* what Megatron-core requires, named */
    lo.moe_dispatcher = MOE_DISPATCH_ALLTOALL;
    assert_int_equal(layout_check(&lo, &m, &hw, err, sizeof err), -1);
    assert_non_null(strstr(err, "needs --moe-token-dispatcher-type flex"));
    lo.moe_dispatcher = MOE_DISPATCH_FLEX, lo.fp8_recipe = FP8R_TENSORWISE;
    assert_int_equal(layout_check(&lo, &m, &hw, err, sizeof err), -1);
    assert_non_null(strstr(err, "needs --precision fp8 --fp8-recipe mxfp8"));
    lo.prec = PREC_BF16;
    assert_int_equal(layout_check(&lo, &m, &hw, err, sizeof err), -1);
    assert_non_null(strstr(err, "the plan is bf16"));
}

/* Eager PyTorch model code (the torchtitan stack without torch.compile;
 * COSTMODEL.md §4.1): Llama 3.1 8B, mbs 2 at 8192 tokens, bf16, a flat
 * memory curve and no host time. Worked by hand from torchtitan's Llama
 * block: per token 2 norms x 32 h + RoPE 16 (q + k) + SwiGLU 4 f bytes
 * = 2·32·4096 + 16·(4096 + 1024) + 4·14336 = 401,408 B (344,064 without the
 * MLP's); at tp 2 with SP the norms on half the rows and the rest tp-sharded:
 * 131,072 + 40,960 + 28,672 = 200,704 B. A layer's forward moves that for
 * each of its 16,384 tokens more, its backward twice; compiled, or under a
 * stack with fused kernels (megatron-lm), nothing moves. */
static void test_eager_elementwise(void **st)
{
    (void)st;
    char err[256];
    HwProfile hw;
    assert_int_equal(profile_load_builtin("h100-sxm", &hw, err, sizeof err), 0);
    hw.mem_eff.n = 1, hw.mem_eff.pt[0].size = 1, hw.mem_eff.pt[0].eff = 0.5, hw.kernel_lat = 0;
    ModelSpec m;
    assert_int_equal(presets_find("llama3.1-8b", &m, err, sizeof err), 0);
    Layout lo = layout_for(&m, &hw, 8, 1, 1, 2, 16);
    lo.dp = 8;
    assert_int_equal(layout_check(&lo, &m, &hw, err, sizeof err), 0);
    assert_rel(time_eager_bytes(&m, &lo, false), 401408.0, 1e-12);
    assert_rel(time_eager_bytes(&m, &lo, true), 344064.0, 1e-12);
    LayerTime a, b, c;
    time_layer(&m, &hw, &lo, &a);
    lo.torch_compile = false;
    time_layer(&m, &hw, &lo, &b);   /* the profile runs fused kernels: nothing moves */
    assert_rel(b.fwd, a.fwd, 0);
    hw.eager_elementwise = true;
    time_layer(&m, &hw, &lo, &c);
    double bw = 0.5 * hw.hbm_bw, tok = 16384;
    assert_rel(c.fwd - a.fwd, tok * 401408.0 / bw, 1e-9);
    assert_rel(c.bwd - a.bwd, 2 * tok * 401408.0 / bw, 1e-9);
    lo.torch_compile = true;
    time_layer(&m, &hw, &lo, &b);
    assert_rel(b.fwd, a.fwd, 0);
    Layout l2 = layout_for(&m, &hw, 8, 2, 1, 2, 16);
    l2.sp = true;
    assert_int_equal(layout_check(&l2, &m, &hw, err, sizeof err), 0);
    assert_rel(time_eager_bytes(&m, &l2, false), 200704.0, 1e-12);
}

/* torchtitan's per-op selective recomputation (SelectiveAC; COSTMODEL.md
 * §2.2.1), worked by hand for Llama 3.1 8B, dp 8, mbs 2 at 8192 tokens
 * (16,384 a micro-batch), bf16, flat GEMM and memory curves at 0.5, no
 * wave or host terms. The block's matmuls run wq, wk, wv, wo, w1, w3, w2;
 * every second (wk, wo, w3) is not saved. Compiled, wo's output feeds
 * nothing the backward reads, so wk and w3 run again: 2·T·(1024 + 14336)·
 * 4096 FLOPs; eager, wo too (2·T·4096·4096). Every memory-bound pass runs
 * again: 2·T·(15·4096 + 3·14336) bytes (the profile's 15 h of norms and
 * adds, SwiGLU's 3 f). The attention core is saved: not run again.
 * Memory: the block input, wq, wv, w1 outputs and the attention's output,
 * 2·T·(4096 + 4096 + 1024 + 14336 + 4096) bytes, with 4·32·T of
 * log-sum-exp; eager, w2's output (4096) too. Megatron's selective (core_attn) is unchanged,
 * and an MoE model keeps it under the op stack. */
static void test_selective_op(void **st)
{
    (void)st;
    char err[256];
    HwProfile hw;
    assert_int_equal(profile_load_builtin("h100-sxm", &hw, err, sizeof err), 0);
    hw.mem_eff.n = 1, hw.mem_eff.pt[0].size = 1, hw.mem_eff.pt[0].eff = 0.5;
    hw.gemm_eff.n = 1, hw.gemm_eff.pt[0].size = 1, hw.gemm_eff.pt[0].eff = 0.5;
    hw.kernel_lat = 0, hw.sm_count = 0;
    ModelSpec m;
    assert_int_equal(presets_find("llama3.1-8b", &m, err, sizeof err), 0);
    Layout lo = layout_for(&m, &hw, 8, 1, 1, 2, 16);
    double T = 16384, gemm = 0.5 * hw.peak[PREC_BF16], mem = 0.5 * hw.hbm_bw;
    LayerTime core, op, eager;
    time_layer(&m, &hw, &lo, &core);
    double core_acts = memory_layer_acts(&m, &lo, RECOMPUTE_SELECTIVE);
    assert_false(layout_sel_op(&m, &lo));
    lo.sel_ac = SEL_AC_OP;
    assert_true(layout_sel_op(&m, &lo));
    time_layer(&m, &hw, &lo, &op);
    double ew = 2.0 * T * (15.0 * 4096 + 3.0 * 14336) / mem;
    assert_rel(op.rc_sel, 2.0 * T * (1024.0 + 14336) * 4096 / gemm + ew, 1e-9);
    assert_rel(op.fwd, core.fwd, 0);    /* only the recompute differs */
    assert_rel(op.rc_full, core.rc_full, 0);
    lo.torch_compile = false;
    time_layer(&m, &hw, &lo, &eager);
    assert_rel(eager.rc_sel - op.rc_sel, 2.0 * T * 4096 * 4096 / gemm, 1e-9);
    assert_rel(time_sel_op_gemm_flops(&m, &lo), 2.0 * (1024.0 + 14336 + 4096) * 4096, 1e-12);
    lo.torch_compile = true;
    assert_rel(time_sel_op_gemm_flops(&m, &lo), 2.0 * (1024.0 + 14336) * 4096, 1e-12);
    /* compiled (lo.torch_compile): w2's output is read by nothing the backward needs, and the partitioner
     * does not keep it; eager SAC caches it */
    double want = 2.0 * T * (4096.0 + 4096 + 1024 + 14336 + 4096) + 4.0 * 32 * T;
    assert_rel(memory_layer_acts(&m, &lo, RECOMPUTE_SELECTIVE), want, 1e-12);
    lo.torch_compile = false;
    assert_rel(memory_layer_acts(&m, &lo, RECOMPUTE_SELECTIVE), want + 2.0 * T * 4096, 1e-12);
    lo.torch_compile = true;
    assert_true(want < 0.5 * core_acts);   /* it keeps far less than Megatron's selective */
    {   /* layers not recomputed, or fully, keep what they kept */
        Layout l0 = lo;
        l0.sel_ac = SEL_AC_CORE_ATTN;
        assert_rel(memory_layer_acts(&m, &lo, RECOMPUTE_NONE), memory_layer_acts(&m, &l0, RECOMPUTE_NONE), 0);
        assert_rel(memory_layer_acts(&m, &lo, RECOMPUTE_FULL), memory_layer_acts(&m, &l0, RECOMPUTE_FULL), 0);
    }
    /* HFU counts the GEMMs run again, not the attention core */
    layout_set_recompute(&lo, RECOMPUTE_SELECTIVE);
    Layout lc = lo;
    lc.sel_ac = SEL_AC_CORE_ATTN;
    assert_rel(train_hw_flops_per_token(&m, &lo) - train_model_flops_per_token(&m, &lo),
               32 * 2.0 * (1024.0 + 14336) * 4096, 1e-12);
    assert_true(train_hw_flops_per_token(&m, &lc) - train_model_flops_per_token(&m, &lc) !=
                train_hw_flops_per_token(&m, &lo) - train_model_flops_per_token(&m, &lo));
    /* an MoE model keeps Megatron's pricing under the op stack */
    ModelSpec q;
    assert_int_equal(presets_find("mixtral-8x7b", &q, err, sizeof err), 0);
    Layout lq = layout_for(&q, &hw, 8, 1, 1, 1, 8);
    lq.sel_ac = SEL_AC_OP;
    assert_false(layout_sel_op(&q, &lq));
}

/* PyTorch's cross_entropy over logits.float() (a stack's ce_upcast:
 * torchtitan's loss): at the loss the bf16 logits, the fp32 copy and the
 * fp32 log-softmax are live, 2 + 4 + 4 bytes a logit, against the 4 of
 * Megatron's unfused loss (its fp32 copy) and the 2 of a fused one. Llama
 * 3.1 8B, mbs 2 at 8192 tokens, one stage: 6 · 16384 · 128256 bytes more
 * than Megatron's; fp32 training has no copy to make (4 + 4). */
static void test_ce_upcast(void **st)
{
    (void)st;
    char err[256];
    HwProfile hw;
    assert_int_equal(profile_load_builtin("h100-sxm", &hw, err, sizeof err), 0);
    ModelSpec m;
    assert_int_equal(presets_find("llama3.1-8b", &m, err, sizeof err), 0);
    Layout lo = layout_for(&m, &hw, 8, 1, 1, 2, 16);
    StageMem a, b, c;
    memory_stage(&m, &hw, &lo, 0, &a);
    hw.ce_upcast = true;
    memory_stage(&m, &hw, &lo, 0, &b);
    assert_rel(b.bytes[MEM_ACTS] - a.bytes[MEM_ACTS], 6.0 * 16384 * 128256, 1e-12);
    hw.ce_upcast = false, hw.ce_fused = true;
    memory_stage(&m, &hw, &lo, 0, &c);
    assert_rel(a.bytes[MEM_ACTS] - c.bytes[MEM_ACTS], 2.0 * 16384 * 128256, 1e-12);
    /* fp32: the logits are fp32 already, no copy: 8 bytes, 4 more than the unfused loss' 4 */
    hw.ce_fused = false;
    lo.prec = PREC_FP32;
    memory_stage(&m, &hw, &lo, 0, &a);
    hw.ce_upcast = true;
    memory_stage(&m, &hw, &lo, 0, &b);
    assert_rel(b.bytes[MEM_ACTS] - a.bytes[MEM_ACTS], 4.0 * 16384 * 128256, 1e-12);
    /* a loss torch.compile covers (a stack's compile_loss, under --torch-compile) keeps no copies: the 4 of
     * the unfused loss; eager (--no-torch-compile) it keeps them again */
    lo.prec = PREC_BF16;
    hw.compile_loss = true;
    memory_stage(&m, &hw, &lo, 0, &b);
    hw.ce_upcast = false;
    memory_stage(&m, &hw, &lo, 0, &a);
    assert_rel(b.bytes[MEM_ACTS], a.bytes[MEM_ACTS], 0);
    hw.ce_upcast = true;
    lo.torch_compile = false;
    memory_stage(&m, &hw, &lo, 0, &b);
    hw.ce_upcast = false;
    memory_stage(&m, &hw, &lo, 0, &a);
    assert_rel(b.bytes[MEM_ACTS] - a.bytes[MEM_ACTS], 6.0 * 16384 * 128256, 1e-12);
}

/* fp8 expert padding (COSTMODEL.md §4.6): the test_fp8_recipe setting
 * (Qwen3-30B-A3B, ep 16, flat memory curve, no host time), delayed
 * scaling. Without --moe-router-padding-for-quantization the alltoall
 * layer copies its 32,768 rows of h 2048 into the padded buffer and the
 * output back, read and written: 2 · (2 · 2 · 32768 · 2048) = 536,870,912 B
 * forward and the same backward. With the router padding, or with flex
 * (HybridEP pads in its dispatch), or in bf16: nothing. */
static void test_moe_fp8_padding(void **st)
{
    (void)st;
    char err[256];
    HwProfile hw;
    assert_int_equal(profile_load_builtin("h100-sxm", &hw, err, sizeof err), 0);
    hw.mem_eff.n = 1;
    hw.mem_eff.pt[0].size = 1;
    hw.mem_eff.pt[0].eff = 0.5;
    hw.kernel_lat = 0;
    double bw = 0.5 * hw.hbm_bw;
    ModelSpec m;
    assert_int_equal(presets_find("qwen3-30b-a3b", &m, err, sizeof err), 0);
    m.s = 4096;
    Layout lo = layout_for(&m, &hw, 16, 1, 1, 1, 1024);
    lo.ep = 16, lo.moe_imbalance = 1, lo.prec = PREC_FP8;
    assert_int_equal(layout_check(&lo, &m, &hw, err, sizeof err), 0);
    LayerTime pad, nopad, fpad, fnopad, b1, b2;
    assert_true(time_moe_fp8_pad(&lo));
    time_layer(&m, &hw, &lo, &pad);
    lo.moe_router_pad = true;
    assert_false(time_moe_fp8_pad(&lo));
    time_layer(&m, &hw, &lo, &nopad);
    assert_rel(pad.moe_fwd - nopad.moe_fwd, 536870912.0 / bw, 1e-9);
    assert_rel(pad.moe_bwd - nopad.moe_bwd, 536870912.0 / bw, 1e-9);
    assert_rel(pad.fwd, nopad.fwd, 0);   /* a dense layer has no experts to pad */
    lo.moe_dispatcher = MOE_DISPATCH_FLEX;
    time_layer(&m, &hw, &lo, &fnopad);
    lo.moe_router_pad = false;
    assert_false(time_moe_fp8_pad(&lo));
    time_layer(&m, &hw, &lo, &fpad);
    assert_rel(fpad.moe_fwd, fnopad.moe_fwd, 0);
    lo.moe_dispatcher = MOE_DISPATCH_ALLTOALL, lo.prec = PREC_BF16;
    assert_false(time_moe_fp8_pad(&lo));
    time_layer(&m, &hw, &lo, &b1);
    lo.moe_router_pad = true;
    time_layer(&m, &hw, &lo, &b2);
    assert_rel(b1.moe_fwd, b2.moe_fwd, 0);
}

/* fp8 in an MoE layer (COSTMODEL.md §4.1): Megatron-core's MoE layer spec
 * has a plain norm before the MLP (TENorm, not the LayerNormLinear a dense
 * FC1 fuses it into): it writes bf16 for the router, and the experts' fp8
 * casts come after the permutation. The test_fp8_recipe setting
 * (Qwen3-30B-A3B, ep 16, flat memory curve, no host time), delayed
 * scaling, the router's padding on (no pad copies), and GEMMs and
 * attention made free (peaks 1e30, no wave quantization), so fp8 against
 * bf16 leaves only its casts. Worked by hand, forward, tok 4096, h 2048,
 * projection input 4096, rows 32768, expert ffn 768, ab 2:
 *  the input norm writes QKV's fp8 copy and transpose: 4096 · 2 · 2048  =  16,777,216 B
 *  the projection's input cast (ab + 2):               4096 · 4 · 4096  =  67,108,864 B
 *  the experts' inputs and FC2 inputs after permutation:
 *                                       32768 · 4 · (2048 + 768)          = 369,098,752 B
 *  total 452,984,832 B (the pre-MLP norm writing fp8 as well would add 16,777,216). */
static void test_moe_fp8_pre_mlp_norm(void **st)
{
    (void)st;
    char err[256];
    HwProfile hw;
    assert_int_equal(profile_load_builtin("h100-sxm", &hw, err, sizeof err), 0);
    hw.mem_eff.n = 1;
    hw.mem_eff.pt[0].size = 1;
    hw.mem_eff.pt[0].eff = 0.5;
    hw.kernel_lat = 0;
    hw.sm_count = 0;
    hw.peak[PREC_BF16] = hw.peak[PREC_FP8] = 1e30;
    double bw = 0.5 * hw.hbm_bw;
    ModelSpec m;
    assert_int_equal(presets_find("qwen3-30b-a3b", &m, err, sizeof err), 0);
    m.s = 4096;
    Layout lo = layout_for(&m, &hw, 16, 1, 1, 1, 1024);
    lo.ep = 16, lo.moe_imbalance = 1, lo.moe_router_pad = true;
    assert_int_equal(layout_check(&lo, &m, &hw, err, sizeof err), 0);
    LayerTime b, f8;
    time_layer(&m, &hw, &lo, &b);
    lo.prec = PREC_FP8;
    assert_int_equal(layout_check(&lo, &m, &hw, err, sizeof err), 0);
    assert_false(time_moe_fp8_pad(&lo));
    time_layer(&m, &hw, &lo, &f8);
    assert_rel(f8.moe_fwd - b.moe_fwd, 452984832.0 / bw, 1e-6);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_params),
        cmocka_unit_test(test_flops_gpt3),
        cmocka_unit_test(test_flops_llama),
        cmocka_unit_test(test_palm_mfu),
        cmocka_unit_test(test_zero_figure1),
        cmocka_unit_test(test_one_formula),
        cmocka_unit_test(test_zero_cp_buffers),
        cmocka_unit_test(test_activation_table),
        cmocka_unit_test(test_output_extras),
        cmocka_unit_test(test_bubble),
        cmocka_unit_test(test_days),
        cmocka_unit_test(test_days_consistent),
        cmocka_unit_test(test_reliability),
        cmocka_unit_test(test_reliability_in_cost),
        cmocka_unit_test(test_memory_monotone),
        cmocka_unit_test(test_dp_adds_only_communication),
        cmocka_unit_test(test_dp_interleaved_window),
        cmocka_unit_test(test_curve_reference),
        cmocka_unit_test(test_curves_local),
        cmocka_unit_test(test_blackwell_gemm_measured),
        cmocka_unit_test(test_does_not_fit),
        cmocka_unit_test(test_layout_errors),
        cmocka_unit_test(test_uneven_default),
        cmocka_unit_test(test_eff_curve),
        cmocka_unit_test(test_collectives),
        cmocka_unit_test(test_softmax_fallback),
        cmocka_unit_test(test_fp8_rules),
        cmocka_unit_test(test_moe_flops_megatron),
        cmocka_unit_test(test_moe_counts),
        cmocka_unit_test(test_moe_freq),
        cmocka_unit_test(test_mla_mtp_state_params),
        cmocka_unit_test(test_layout_ep),
        cmocka_unit_test(test_overlap_switches),
        cmocka_unit_test(test_sp_collectives),
        cmocka_unit_test(test_pp_scatter_gather),
        cmocka_unit_test(test_cp_ring_and_allgather),
        cmocka_unit_test(test_cp_short_chunks),
        cmocka_unit_test(test_cp_ring_memory_passes),
        cmocka_unit_test(test_cp_pytorch),
        cmocka_unit_test(test_megatron_readme_32b),
        cmocka_unit_test(test_megatron_pipeline_splits),
        cmocka_unit_test(test_moe_alltoall),
        cmocka_unit_test(test_zero_unit_largest_layer),
        cmocka_unit_test(test_fp8_copies),
        cmocka_unit_test(test_moe_fp8_inputs),
        cmocka_unit_test(test_fsdp_fp32_shard),
        cmocka_unit_test(test_fp8_weight_cache),
        cmocka_unit_test(test_zero3_granularity),
        cmocka_unit_test(test_moe_group_limited_nodes),
        cmocka_unit_test(test_recompute_modules),
        cmocka_unit_test(test_fused_cross_entropy),
        cmocka_unit_test(test_moe_rows_and_states),
        cmocka_unit_test(test_moe_acts),
        cmocka_unit_test(test_moe_layer_mix),
        cmocka_unit_test(test_moe_time_terms),
        cmocka_unit_test(test_moe_grouped_gemm_size),
        cmocka_unit_test(test_pipeline_layout_string),
        cmocka_unit_test(test_moe_dispatchers),
        cmocka_unit_test(test_pp_serial_p2p),
        cmocka_unit_test(test_dualpipe), cmocka_unit_test(test_hai_llm_storage),
        cmocka_unit_test(test_recompute_early_stop),
        cmocka_unit_test(test_cuda_graph_launches),
        cmocka_unit_test(test_gpt_oss_counts),
        cmocka_unit_test(test_sliding_window),
        cmocka_unit_test(test_attn_head_dim),
        cmocka_unit_test(test_fp8_attention),
        cmocka_unit_test(test_moe_bias_passes),
        cmocka_unit_test(test_dp_window_moe_layers),
        cmocka_unit_test(test_zero2_beside_pp),
        cmocka_unit_test(test_fp8_recipe),
        cmocka_unit_test(test_fp8_recipe_needs_capability),
        cmocka_unit_test(test_moe_wire_mxfp8),
        cmocka_unit_test(test_eager_elementwise),
        cmocka_unit_test(test_selective_op),
        cmocka_unit_test(test_ce_upcast),
        cmocka_unit_test(test_moe_fp8_padding),
        cmocka_unit_test(test_moe_fp8_pre_mlp_norm),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
