/* test_stacks.c — software stacks (model/stack.h, profiles/stacks.h): the
 * default changes no prediction, each field moves it as worked out by hand,
 * the published kernel ratios, and the loader's errors. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "band.h"
#include "cost.h"
#include "presets.h"
#include "profile.h"
#include "stacks.h"

#define assert_rel(got, want, rel) do { \
        double g_ = (got), w_ = (want); \
        if (!(fabs(g_ - w_) <= (rel) * fabs(w_))) \
            fail_msg("%s = %.9g, expected %.9g (rel tol %g)", #got, g_, w_, (double)(rel)); \
    } while (0)

static HwProfile gpu(const char *name)
{
    HwProfile hw;
    char err[256];
    if (profile_load_builtin(name, &hw, err, sizeof err))
        fail_msg("%s", err);
    return hw;
}

static ModelSpec model(const char *name)
{
    ModelSpec m;
    char err[256];
    if (presets_find(name, &m, err, sizeof err))
        fail_msg("%s", err);
    return m;
}

static Layout layout(const ModelSpec *m, const HwProfile *hw, int dp, int tp, int pp, OptimShard opt, int mbs, int gbs)
{
    Layout lo;
    layout_default(&lo);
    lo.dp = dp, lo.tp = tp, lo.pp = pp, lo.opt = opt, lo.mbs = mbs, lo.gbs = gbs;
    lo.sp = tp > 1;
    char err[256];
    if (layout_check(&lo, m, hw, err, sizeof err))
        fail_msg("layout_check: %s", err);
    return lo;
}

/* Every builtin loads under its own name, and every embedded file is one. */
/* A boolean a stack sets outright: exactly the builtin stacks `want` names
 * set it, stack_apply carries it into the profile, and it survives the
 * stack's JSON round trip. The fields are given by their offsets. */
static bool is_llama3_meta(const char *name) { return strcmp(name, "llama3-meta") == 0; }
static bool is_fsdp_fp32_shard(const char *name)
{
    return strcmp(name, "composer-fsdp") == 0 || strncmp(name, "torchtitan", 10) == 0;
}
static void bool_setting_reaches(bool (*want)(const char *), size_t st_off, size_t hw_off)
{
    char err[256];
    for (int i = 0; i < STACK_BUILTIN_COUNT; i++) {
        Stack b;
        assert_int_equal(stacks_load(i, &b, err, sizeof err), 0);
        bool w = want(stacks_name(i));
        assert_int_equal(*(const bool *)((const char *)&b + st_off), w);
        HwProfile hw;
        memset(&hw, 0, sizeof hw);
        stack_apply(&hw, &b);
        assert_int_equal(*(const bool *)((const char *)&hw + hw_off), w);
        char *j = stacks_to_json(&b);
        assert_non_null(j);
        Stack back;
        assert_int_equal(stacks_parse_json(j, "round.json", &back, err, sizeof err), 0);
        assert_int_equal(*(const bool *)((const char *)&back + st_off), w);
        free(j);
    }
}

static void test_builtins_load(void **state)
{
    (void)state;
    char err[400];
    for (int i = 0; i < STACK_BUILTIN_COUNT; i++) {
        Stack st;
        if (stacks_load(i, &st, err, sizeof err))
            fail_msg("%s", err);
        assert_string_equal(st.name, stacks_name(i));
        assert_int_equal(stacks_index(st.name), i);
        assert_true(st.desc[0] != 0);
    }
    assert_string_equal(stacks_name(0), "megatron-lm");
    assert_null(stacks_name(STACK_BUILTIN_COUNT));
}

/* megatron-lm, applied from its JSON, leaves every builtin profile bit for
 * bit as it was, so every prediction without --stack is today's. */
static void test_default_is_identity(void **state)
{
    (void)state;
    char err[400];
    Stack st;
    assert_int_equal(stacks_load_name("megatron-lm", &st, err, sizeof err), 0);
    Stack d;
    stack_default(&d);
    for (int i = 0; i < profile_builtin_count(); i++) {
        HwProfile a = gpu(profile_builtin_name(i)), b = a, c = a;
        stack_apply(&b, &st);
        stack_apply(&c, &d);
        assert_memory_equal(&a, &b, sizeof a);
        assert_memory_equal(&a, &c, sizeof a);
        assert_int_equal(stacks_apply(&c, 0, err, sizeof err), 0);
        assert_memory_equal(&a, &c, sizeof a);
    }
    /* and so the cost: a ZeRO-3 and a tp/pp layout, step time equal to the last bit */
    ModelSpec m = model("llama2-7b");
    HwProfile hw = gpu("h100-sxm"), hs = hw;
    stack_apply(&hs, &st);
    Layout los[2] = {layout(&m, &hw, 16, 1, 1, OPT_ZERO3, 1, 64), layout(&m, &hw, 2, 4, 2, OPT_DISTOPT, 1, 64)};
    for (int k = 0; k < 2; k++) {
        CostOpts o;
        cost_opts_default(&o);
        Cost x, y;
        cost(&m, &hw, &los[k], &o, &x);
        cost(&m, &hs, &los[k], &o, &y);
        assert_true(x.step_s == y.step_s);
        assert_memory_equal(x.time, y.time, sizeof x.time);
    }
}

/* Scales multiply each curve point, capped at 1: by hand on the a100 curve. */
static void test_scales_by_hand(void **state)
{
    (void)state;
    HwProfile a = gpu("a100-80g"), b = a;
    Stack st;
    stack_default(&st);
    st.gemm_scale = 0.5;
    st.mem_scale = 2;
    st.kernel_lat_scale = 3;
    stack_apply(&b, &st);
    for (int i = 0; i < a.gemm_eff.n; i++)
        assert_true(b.gemm_eff.pt[i].eff == a.gemm_eff.pt[i].eff * 0.5);
    for (int i = 0; i < a.mem_eff.n; i++)
        assert_true(b.mem_eff.pt[i].eff == fmin(1.0, a.mem_eff.pt[i].eff * 2));
    assert_true(b.kernel_lat == a.kernel_lat * 3);
    assert_memory_equal(&a.attn_eff, &b.attn_eff, sizeof a.attn_eff);
    /* halving GEMM efficiency slows the step, but by less than 2x (not everything is a GEMM) */
    ModelSpec m = model("llama2-7b");
    Layout lo = layout(&m, &a, 8, 1, 1, OPT_DISTOPT, 1, 32);
    CostOpts o;
    cost_opts_default(&o);
    Cost x, y;
    HwProfile g = a;
    Stack gs;
    stack_default(&gs);
    gs.gemm_scale = 0.5;
    stack_apply(&g, &gs);
    cost(&m, &a, &lo, &o, &x);
    cost(&m, &g, &lo, &o, &y);
    assert_true(y.time[T_COMPUTE] > 1.3 * x.time[T_COMPUTE] && y.time[T_COMPUTE] < 2.0 * x.time[T_COMPUTE] + 1e-12);
}

/* The published kernel ratios: FA1/FA2 = 32.5/61.5 of A100 peak (Dao 2023,
 * abstract); on H100 against cuDNN, the kernel the h100-sxm curve describes
 * (Shah et al. 2024, head dim 128, 16K): FA2 335/539 forward causal,
 * 370/595 non-causal, 322/516 backward = 0.62, 0.62, 0.62; FA3 616/539,
 * 648/595, 561/516 = 1.14, 1.09, 1.09, weighted 1 : 2.5 forward : backward
 * 3.5 / (1/616 + 2.5/561) / (3.5 / (1/539 + 2.5/516)) = 1.10. */
static void test_attention_kernels(void **state)
{
    (void)state;
    HwProfile a = gpu("a100-80g"), h = gpu("h100-sxm");
    assert_rel(stack_attn_ratio(ATTN_KERNEL_FA1, &a), 0.53, 1e-12);
    assert_rel(stack_attn_ratio(ATTN_KERNEL_FA2, &a), 1.0, 1e-12);
    assert_rel(stack_attn_ratio(ATTN_KERNEL_FA3, &a), 1.0, 1e-12);   // no FA3 before Hopper: FA2 runs
    assert_rel(stack_attn_ratio(ATTN_KERNEL_FA1, &h), 0.53 * 0.62, 1e-12);
    assert_rel(stack_attn_ratio(ATTN_KERNEL_FA2, &h), 0.62, 1e-12);
    assert_rel(stack_attn_ratio(ATTN_KERNEL_FA3, &h), 1.10, 1e-12);
    assert_rel(stack_attn_ratio(ATTN_KERNEL_CUDNN, &h), 1.0, 1e-12);
    Stack st;
    stack_default(&st);
    st.attn_kernel = ATTN_KERNEL_FA2;
    HwProfile h2 = h;
    stack_apply(&h2, &st);
    for (int i = 0; i < h.attn_eff.n; i++)
        assert_true(h2.attn_eff.pt[i].eff == h.attn_eff.pt[i].eff * 0.62);
    /* a long sequence is attention-bound: FA2 on H100 costs more than the profile's kernel */
    ModelSpec m = model("llama2-7b");
    m.s = 32768;
    Layout lo = layout(&m, &h, 8, 1, 1, OPT_ZERO3, 1, 8);
    CostOpts o;
    cost_opts_default(&o);
    Cost x, y;
    cost(&m, &h, &lo, &o, &x);
    cost(&m, &h2, &lo, &o, &y);
    assert_true(y.time[T_COMPUTE] > 1.2 * x.time[T_COMPUTE]);
}

/* Overlaps replace the profile's; a negative one keeps it. */
static void test_overlaps(void **state)
{
    (void)state;
    HwProfile a = gpu("a100-80g"), b = a;
    Stack st;
    stack_default(&st);
    st.tp_overlap = 0;
    st.pp_overlap = 0.25;
    stack_apply(&b, &st);
    assert_true(b.tp_overlap == 0 && b.pp_overlap == 0.25 && b.dp_overlap == a.dp_overlap);
}

/* ZeRO-3 by hand. gpt3-125m (12 layers) on dp 16 over two nodes of 8, no
 * overlap (dp_overlap 0), NVLink latency 0, inter-node latency l, no fixed
 * cost per call. One alpha-beta gather of B bytes costs log2(2) l plus a
 * term linear in B, so c calls of B/c cost (c-1) l more than one call of B.
 * A stack of g gathers per layer, host time h per call and a flat ring adds
 * per call h + (n-1) l. Each of the three passes (forward gather, backward
 * gather, gradient reduce-scatter) therefore grows by
 *   (c-1) l + c (h + 15 l),   c = 12 g,
 * and the step's DP time by m times three of that (m micro-batches). */
static void test_zero3_by_hand(void **state)
{
    (void)state;
    ModelSpec m = model("gpt3-125m");
    HwProfile hw = gpu("a100-80g");
    hw.gpus_per_node = 8;
    hw.intra.lat = 0;
    hw.inter.lat = 1e-5;
    hw.coll_lat = 0;
    hw.dp_overlap = 0;
    Layout lo = layout(&m, &hw, 16, 1, 1, OPT_ZERO3, 1, 64);
    int mb = layout_microbatches(&lo);
    assert_int_equal(mb, 4);
    Stack st;
    stack_default(&st);
    st.zero3_gathers_per_layer = 2;
    st.zero3_call_s = 1e-3;
    st.zero3_flat_ring = true;
    HwProfile z = hw;
    stack_apply(&z, &st);
    CostOpts o;
    cost_opts_default(&o);
    Cost x, y;
    cost(&m, &hw, &lo, &o, &x);
    cost(&m, &z, &lo, &o, &y);
    double c = 24, l = 1e-5, per_pass = (c - 1) * l + c * (1e-3 + 15 * l);   // 9.83e-3 s
    assert_rel(y.time[T_DP] - x.time[T_DP], 4 * 3 * per_pass, 1e-9);
    /* nothing but the DP phase moves */
    assert_true(y.time[T_COMPUTE] == x.time[T_COMPUTE]);
    /* per rank: n h' more per call: 16 ranks x 1e-6 s x 24 calls x 3 passes x 4 micro-batches */
    Stack r = st;
    r.zero3_rank_s = 1e-6;
    HwProfile zr = hw;
    stack_apply(&zr, &r);
    Cost w;
    cost(&m, &zr, &lo, &o, &w);
    assert_rel(w.time[T_DP] - y.time[T_DP], 16 * 1e-6 * 24 * 3 * 4, 1e-9);
}

/* Prefetch: with dp_overlap 1 the default hides gathers behind compute; a
 * prefetch of a whole layer's parameters or more changes nothing, a smaller
 * one hides its share only, none hides nothing (the same as dp_overlap 0). */
static void test_zero3_prefetch(void **state)
{
    (void)state;
    ModelSpec m = model("llama2-7b");
    HwProfile hw = gpu("a100-80g");
    hw.dp_overlap = 1;
    Layout lo = layout(&m, &hw, 64, 1, 1, OPT_ZERO3, 1, 64);
    CostOpts o;
    cost_opts_default(&o);
    double per_layer = 202e6;   // llama2-7b: 4 h^2 + 3 h f = 4*4096^2 + 3*4096*11008 = 2.02e8 (+ norms)
    double dp[4];
    double pre[4] = {0, 2 * per_layer, per_layer / 4, 1};
    for (int i = 0; i < 4; i++) {
        HwProfile z = hw;
        z.zero3_prefetch_params = pre[i];
        Cost c;
        cost(&m, &z, &lo, &o, &c);
        dp[i] = c.time[T_DP];
    }
    assert_true(dp[1] == dp[0]);
    assert_true(dp[2] > dp[0]);
    assert_true(dp[3] > dp[2]);
    HwProfile none = hw;
    none.dp_overlap = 0;
    Cost c;
    cost(&m, &none, &lo, &o, &c);
    assert_rel(dp[3], c.time[T_DP], 1e-6);
}

/* The 530B ZeRO-3 runs of Narayanan et al. 2021 (Table 2 and its footnote;
 * docs/accuracy/selene2021_published.csv): DeepSpeed gathered tensor by
 * tensor, so its buffers hold a 4h^2 MLP weight or two, not two whole layers.
 * Under deepspeed-zero3 the three layouts that ran fit 80 GB; 560 GPUs at the
 * same micro-batch 4 does not (the footnote: it did not fit there, so 640
 * were used); under the default stack's whole-layer buffers none fits. */
static void test_zero3_530b_fits(void **state)
{
    (void)state;
    ModelSpec m;
    memset(&m, 0, sizeof m);
    m.L = 105, m.h = 20480, m.a = 128, m.g = 128, m.f = 81920, m.vocab = 51200, m.vocab_div = 128, m.s = 2048;
    m.mlp = MLP_GELU, m.norm = NORM_LAYERNORM, m.pos = POS_LEARNED, m.bias = m.tied = m.dropout = true;
    char err[400];
    if (spec_validate(&m, err, sizeof err))
        fail_msg("spec_validate: %s", err);
    HwProfile hw = gpu("a100-80g"), ds = hw;
    assert_int_equal(stacks_apply(&ds, stacks_index("deepspeed-zero3"), err, sizeof err), 0);
    static const struct { int gpus, mbs; bool fits; } run[] = {
        {640, 4, true}, {1120, 2, true}, {2240, 1, true}, {560, 4, false},
    };
    for (size_t i = 0; i < sizeof run / sizeof *run; i++) {
        Layout lo;
        layout_default(&lo);
        lo.dp = run[i].gpus, lo.mbs = run[i].mbs, lo.gbs = run[i].gpus * run[i].mbs;
        lo.opt = OPT_ZERO3, lo.prec = PREC_BF16, lo.flash = false;
        if (layout_check(&lo, &m, &hw, err, sizeof err))
            fail_msg("layout_check: %s", err);
        layout_set_recompute(&lo, RECOMPUTE_FULL);
        StageMem a, b;
        memory_stage(&m, &ds, &lo, 0, &a);
        memory_stage(&m, &hw, &lo, 0, &b);
        if ((a.total <= hw.hbm_bytes) != run[i].fits || b.total <= hw.hbm_bytes)
            fail_msg("530B on %d GPUs: %.2f GiB under deepspeed-zero3 (expected %s), %.2f GiB by whole layers",
                     run[i].gpus, a.total / 1073741824.0, run[i].fits ? "fits" : "does not fit",
                     b.total / 1073741824.0);
    }
}

/* A profile written after a stack (what calibrate and fit write) reads back
 * with the fields the stack sets outright, so it predicts what it did before
 * being written: step time and peak memory of a ZeRO-3 layout with full
 * recompute, where gathers per layer, the flat ring, the live-parameter cap
 * and the early-stopping recompute all count. */
static void test_profile_round_trip(void **state)
{
    (void)state;
    static const char *const names[] = {"deepspeed-zero3", "composer-fsdp"};
    ModelSpec m = model("llama2-7b");
    char err[400];
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        HwProfile hw = gpu("a100-80g"), back;
        assert_int_equal(stacks_apply(&hw, stacks_index(names[i]), err, sizeof err), 0);
        char *text = profile_to_json(&hw);
        assert_non_null(text);
        if (profile_parse_json(text, "written.json", &back, err, sizeof err))
            fail_msg("%s: %s", names[i], err);
        free(text);
        Layout lo = layout(&m, &hw, 64, 1, 1, OPT_ZERO3, 2, 512);
        layout_set_recompute(&lo, RECOMPUTE_FULL);
        CostOpts o;
        cost_opts_default(&o);
        Cost a, b;
        cost(&m, &hw, &lo, &o, &a);
        cost(&m, &back, &lo, &o, &b);
        if (a.step_s != b.step_s || a.peak_bytes != b.peak_bytes)
            fail_msg("%s: step %.6g s, peak %.6g GiB written; %.6g s, %.6g GiB read back", names[i], a.step_s,
                     a.peak_bytes / 1073741824.0, b.step_s, b.peak_bytes / 1073741824.0);
        assert_string_equal(back.stack, names[i]);
        assert_int_equal(back.zero3_gathers_per_layer, hw.zero3_gathers_per_layer);
        assert_int_equal(back.zero3_flat_ring, hw.zero3_flat_ring);
        assert_int_equal(back.rc_early_stop, hw.rc_early_stop);
        assert_int_equal(back.zero3_fp32_shard, hw.zero3_fp32_shard);
        assert_true(back.zero3_max_live_params == hw.zero3_max_live_params);
    }
    /* a stack the binary does not know is an error naming the field */
    HwProfile hw = gpu("a100-80g"), back;
    snprintf(hw.stack, sizeof hw.stack, "nosuch");
    char *text = profile_to_json(&hw);
    assert_non_null(text);
    assert_int_equal(profile_parse_json(text, "x.json", &back, err, sizeof err), -1);
    free(text);
    assert_non_null(strstr(err, "field \"stack\""));
    assert_non_null(strstr(err, "deepspeed-zero3"));
}

/* Bad files: -1, one line naming the field, nothing filled. */
static void test_loader_errors(void **state)
{
    (void)state;
    static const struct { const char *json, *want; } bad[] = {
        {"{\"format\": \"ultraplan.stack/2\", \"name\": \"x\"}", "\"format\""},
        {"{\"format\": \"ultraplan.stack/1\"}", "\"name\""},
        {"{\"format\": \"ultraplan.stack/1\", \"name\": \"x\", \"gemm_scale\": -1}", "\"gemm_scale\""},
        {"{\"format\": \"ultraplan.stack/1\", \"name\": \"x\", \"gemm_scale\": \"1\"}", "\"gemm_scale\""},
        {"{\"format\": \"ultraplan.stack/1\", \"name\": \"x\", \"mem_scale\": 0}", "\"mem_scale\""},
        {"{\"format\": \"ultraplan.stack/1\", \"name\": \"x\", \"attn_kernel\": \"fa9\"}", "\"attn_kernel\""},
        {"{\"format\": \"ultraplan.stack/1\", \"name\": \"x\", \"tp_overlap\": 1.5}", "\"tp_overlap\""},
        {"{\"format\": \"ultraplan.stack/1\", \"name\": \"x\", \"kernel_lat_scale\": -2}", "\"kernel_lat_scale\""},
        {"{\"format\": \"ultraplan.stack/1\", \"name\": \"x\", \"ce_fused\": 1}", "\"ce_fused\""},
        {"{\"format\": \"ultraplan.stack/1\", \"name\": \"x\", \"zero3\": 3}", "\"zero3\""},
        {"{\"format\": \"ultraplan.stack/1\", \"name\": \"x\", \"zero3\": {\"gathers_per_layer\": 1.5}}",
         "\"zero3.gathers_per_layer\""},
        {"{\"format\": \"ultraplan.stack/1\", \"name\": \"x\", \"zero3\": {\"flat_ring\": \"yes\"}}", "\"zero3.flat_ring\""},
        {"{\"format\": \"ultraplan.stack/1\", \"name\": \"x\", \"zero3\": {\"call_s\": 5}}", "\"zero3.call_s\""},
        {"{\"format\": \"ultraplan.stack/1\", \"name\": \"x\", \"zero3\": {\"prefetch_params\": -1}}",
         "\"zero3.prefetch_params\""},
        {"{\"format\": \"ultraplan.stack/1\", \"name\": \"x\", \"zero3\": {\"max_live_params\": -1}}",
         "\"zero3.max_live_params\""},
        {"{\"format\": \"ultraplan.stack/1\", \"name\": \"x\", \"zero3\": {\"reduce_bucket_params\": \"5e8\"}}",
         "\"zero3.reduce_bucket_params\""},
        {"{\"format\": \"ultraplan.stack/1\", \"name\": \"x\", \"pp_p2p_serial\": 1}", "\"pp_p2p_serial\""},
        {"{\"format\": \"ultraplan.stack/1\", \"name\": \"x\", \"rc_early_stop\": \"yes\"}", "\"rc_early_stop\""},
        {"{\"format\": \"ultraplan.stack/1\", \"name\": \"x\", \"cp_comm\": \"p2p-ring\"}", "\"cp_comm\""},
        {"{\"format\": \"ultraplan.stack/1\", \"name\": \"x\", \"cp_comm\": 1}", "\"cp_comm\""},
        {"{\"format\": \"ultraplan.stack/1\", \"name\": \"x\", \"eager_elementwise\": 1}", "\"eager_elementwise\""},
        {"{\"format\": \"ultraplan.stack/1\", \"name\": \"x\", \"cp_pytorch\": \"true\"}", "\"cp_pytorch\""},
        {"{\"format\": \"ultraplan.stack/1\", \"name\": \"x\", \"sdpa_repeat_kv\": 0}", "\"sdpa_repeat_kv\""},
        {"{\"format\": \"ultraplan.stack/1\", \"name\": \"x\"", "not valid JSON"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        Stack st;
        memset(&st, 0x5a, sizeof st);
        Stack before = st;
        char err[400] = "";
        assert_int_equal(stacks_parse_json(bad[i].json, "t.json", &st, err, sizeof err), -1);
        if (!strstr(err, bad[i].want) || !strstr(err, "t.json"))
            fail_msg("case %zu: error \"%s\" does not name %s", i, err, bad[i].want);
        assert_memory_equal(&st, &before, sizeof st);
    }
    /* the profile reader's wording (profiles/fields.c): what the file holds, named */
    Stack st;
    char err[400];
    static const struct { const char *value, *got; } held[] = {
        {"true", "got true"}, {"null", "got null"}, {"[1]", "got an array"}, {"{}", "got an object"}};
    for (size_t i = 0; i < sizeof held / sizeof *held; i++) {
        char json[160];
        snprintf(json, sizeof json, "{\"format\": \"ultraplan.stack/1\", \"name\": \"x\", \"gemm_scale\": %s}",
                 held[i].value);
        assert_int_equal(stacks_parse_json(json, "t.json", &st, err, sizeof err), -1);
        if (!strstr(err, "stack t.json: field \"gemm_scale\": expected ") || !strstr(err, held[i].got))
            fail_msg("gemm_scale %s: error \"%s\" does not say %s", held[i].value, err, held[i].got);
    }
    /* a good minimal file: defaults for what it leaves out */
    assert_int_equal(stacks_parse_json("{\"format\": \"ultraplan.stack/1\", \"name\": \"x\", \"unknown\": 1}", "t.json",
                                       &st, err, sizeof err), 0);
    assert_true(st.gemm_scale == 1 && st.tp_overlap < 0 && st.zero3_gathers_per_layer == 0);
    assert_false(st.pp_p2p_serial);
    assert_false(st.rc_early_stop);
    assert_int_equal(st.cp_comm, -1);   // the layout's choice
    assert_false(st.eager_elementwise);
    assert_false(st.cp_pytorch);
    assert_false(st.sdpa_repeat_kv);
    /* PyTorch's CP: both torchtitan stacks; K/V repeated before the attention: torchtitan-2412 alone (its
     * model code at 9dec370; torchtitan stopped in 2026-01). Each reaches the profile and the JSON. */
    for (int i = 0; i < STACK_BUILTIN_COUNT; i++) {
        Stack b;
        assert_int_equal(stacks_load(i, &b, err, sizeof err), 0);
        bool cp = strncmp(stacks_name(i), "torchtitan", 10) == 0, rep = strcmp(stacks_name(i), "torchtitan-2412") == 0;
        assert_int_equal(b.cp_pytorch, cp);
        assert_int_equal(b.sdpa_repeat_kv, rep);
        HwProfile hw;
        memset(&hw, 0, sizeof hw);
        stack_apply_settings(&hw, &b);
        assert_int_equal(hw.cp_pytorch, cp);
        assert_int_equal(hw.sdpa_repeat_kv, rep);
        char *j = stacks_to_json(&b);
        assert_non_null(j);
        Stack back;
        assert_int_equal(stacks_parse_json(j, "round.json", &back, err, sizeof err), 0);
        assert_int_equal(back.cp_pytorch, cp);
        assert_int_equal(back.sdpa_repeat_kv, rep);
        free(j);
    }
    /* ZeRO-2 beside pipeline parallelism: llama3-meta's alone */
    bool_setting_reaches(is_llama3_meta, offsetof(Stack, zero2_pp), offsetof(HwProfile, zero2_pp));
    /* eager model code: torchtitan's alone, and it reaches the profile (and survives a plan file's read-back) */
    for (int i = 0; i < STACK_BUILTIN_COUNT; i++) {
        Stack b;
        assert_int_equal(stacks_load(i, &b, err, sizeof err), 0);
        bool want = strncmp(stacks_name(i), "torchtitan", 10) == 0;   /* torchtitan and torchtitan-2412 */
        assert_int_equal(b.eager_elementwise, want);
        HwProfile hw;
        memset(&hw, 0, sizeof hw);
        stack_apply_settings(&hw, &b);
        assert_int_equal(hw.eager_elementwise, want);
    }
    /* the CP exchange: torchtitan's is PyTorch's all-gather, Llama 3's (llama3-meta) all-gathers K/V too;
     * the others leave --cp-comm to the layout, and a stack that is no builtin (the default, or out of
     * range) changes neither field */
    for (int i = -1; i <= STACK_BUILTIN_COUNT; i++) {
        bool tt = i > 0 && i < STACK_BUILTIN_COUNT && strncmp(stacks_name(i), "torchtitan", 10) == 0;
        bool ag = tt || (i > 0 && i < STACK_BUILTIN_COUNT && strcmp(stacks_name(i), "llama3-meta") == 0);
        for (int asked = 0; asked < CP_COMM_COUNT; asked++) {
            Layout lo;
            layout_default(&lo);
            lo.stack = i;
            lo.cp_comm = (CpComm)asked;
            lo.sel_ac = SEL_AC_OP;
            stacks_layout_settings(&lo);
            assert_int_equal(lo.cp_comm, ag ? CP_COMM_ALLGATHER : asked);
            assert_int_equal(lo.sel_ac, tt ? SEL_AC_OP : SEL_AC_CORE_ATTN);
        }
    }
    {
        Stack tt2;
        assert_int_equal(stacks_load_name("torchtitan", &tt2, err, sizeof err), 0);
        char *j = stacks_to_json(&tt2);
        assert_non_null(j);
        assert_non_null(strstr(j, "\"cp_comm\":\t\"all-gather\""));
        Stack back;
        assert_int_equal(stacks_parse_json(j, "round.json", &back, err, sizeof err), 0);
        assert_int_equal(back.cp_comm, CP_COMM_ALLGATHER);
        free(j);
    }
    /* selective recomputation: torchtitan's is its per-op policy; the others' Megatron's core attention,
     * and the layout takes it (with the stack's CP exchange) from stacks_layout_settings */
    for (int i = 0; i < STACK_BUILTIN_COUNT; i++) {
        bool op = strncmp(stacks_name(i), "torchtitan", 10) == 0;
        Layout lo;
        layout_default(&lo);
        lo.stack = i;
        stacks_layout_settings(&lo);
        assert_int_equal(lo.sel_ac, op ? SEL_AC_OP : SEL_AC_CORE_ATTN);
        assert_int_equal(lo.cp_comm, op || strcmp(stacks_name(i), "llama3-meta") == 0 ? CP_COMM_ALLGATHER : CP_COMM_RING);
    }
    /* the fp32 upcast of the logits for PyTorch's cross_entropy: torchtitan's alone, and it reaches the profile */
    for (int i = 0; i < STACK_BUILTIN_COUNT; i++) {
        Stack b;
        assert_int_equal(stacks_load(i, &b, err, sizeof err), 0);
        bool want = strncmp(stacks_name(i), "torchtitan", 10) == 0;
        assert_int_equal(b.ce_upcast, want);
        /* the loss compiled with the model: torchtitan since 2025; 9dec370 (torchtitan-2412) never compiled it */
        assert_int_equal(b.compile_loss, strcmp(stacks_name(i), "torchtitan") == 0);
        HwProfile hw;
        memset(&hw, 0, sizeof hw);
        stack_apply_settings(&hw, &b);
        assert_int_equal(hw.ce_upcast, want);
        char *j = stacks_to_json(&b);
        assert_non_null(j);
        assert_int_equal(strstr(j, "\"ce_upcast\":\ttrue") != NULL, want);
        free(j);
    }
    {
        Stack tt2;
        assert_int_equal(stacks_load_name("torchtitan", &tt2, err, sizeof err), 0);
        assert_int_equal(tt2.sel_ac, SEL_AC_OP);
        char *j = stacks_to_json(&tt2);
        assert_non_null(j);
        assert_non_null(strstr(j, "\"selective_ac\":\t\"op\""));
        Stack back;
        assert_int_equal(stacks_parse_json(j, "round.json", &back, err, sizeof err), 0);
        assert_int_equal(back.sel_ac, SEL_AC_OP);
        free(j);
        assert_int_equal(stacks_parse_json("{\"format\": \"ultraplan.stack/1\", \"name\": \"x\", \"selective_ac\": "
                                           "\"layer\"}", "bad.json", &back, err, sizeof err), -1);
        assert_non_null(strstr(err, "selective_ac"));
        assert_non_null(strstr(err, "\"core_attn\" or \"op\""));
        assert_int_equal(stacks_parse_json("{\"format\": \"ultraplan.stack/1\", \"name\": \"x\"}", "min.json", &back,
                                           err, sizeof err), 0);
        assert_int_equal(back.sel_ac, -1);
    }
    /* PyTorch's checkpoint early stop: only composer-fsdp's runs (PyTorch 2.1) are known to have it;
     * torchtitan runs the non-reentrant checkpoint with early_stop=False (since PR #1580, 2025) */
    Stack tt;
    assert_int_equal(stacks_load_name("torchtitan", &tt, err, sizeof err), 0);
    assert_false(tt.rc_early_stop);
    for (int i = 0; i < STACK_BUILTIN_COUNT; i++) {
        Stack b;
        assert_int_equal(stacks_load(i, &b, err, sizeof err), 0);
        /* torchtitan before 25413d2 (2025-08) took PyTorch's default early stop: torchtitan-2412 */
        bool want = strcmp(stacks_name(i), "composer-fsdp") == 0 || strcmp(stacks_name(i), "torchtitan-2412") == 0;
        assert_int_equal(b.rc_early_stop, want);
        HwProfile hw;
        memset(&hw, 0, sizeof hw);
        stack_apply(&hw, &b);
        assert_int_equal(hw.rc_early_stop, want);
    }
    /* PyTorch FSDP's fp32 shard (NOTES step 45): the FSDP stacks (Composer, torchtitan) keep it, Megatron-FSDP and
     * DeepSpeed ZeRO-3 a 16-bit shard and a master; it reaches the profile and the stack's JSON, and reads back */
    bool_setting_reaches(is_fsdp_fp32_shard, offsetof(Stack, zero3_fp32_shard), offsetof(HwProfile, zero3_fp32_shard));
    {
        Stack bad;
        assert_int_equal(stacks_parse_json("{\"format\": \"ultraplan.stack/1\", \"name\": \"x\", \"zero3\": "
                                           "{\"fp32_shard\": 1}}", "bad.json", &bad, err, sizeof err), -1);
        assert_non_null(strstr(err, "zero3.fp32_shard"));
    }
    /* DeepSpeed's pipeline engine: the Megatron-DeepSpeed stacks say so, Megatron's own do not,
     * and the flag reaches the profile */
    static const struct { const char *name; bool serial; } pe[] = {
        {"megatron-deepspeed", true}, {"megatron-deepspeed-2021", true}, {"megatron-2021", false}, {"nemo", false},
    };
    for (size_t i = 0; i < sizeof pe / sizeof *pe; i++) {
        Stack b;
        assert_int_equal(stacks_load(stacks_index(pe[i].name), &b, err, sizeof err), 0);
        assert_int_equal(b.pp_p2p_serial, pe[i].serial);
        HwProfile hw;
        memset(&hw, 0, sizeof hw);
        stack_apply(&hw, &b);
        assert_int_equal(hw.pp_p2p_serial, pe[i].serial);
    }
}

/* A named stack travels to the error band's query: its runs are nearer. */
static void test_band_query_stack(void **state)
{
    (void)state;
    ModelSpec m = model("llama2-7b");
    HwProfile hw = gpu("h100-sxm");
    Layout lo = layout(&m, &hw, 8, 1, 1, OPT_ZERO3, 1, 8);
    BandQuery q;
    band_query(&m, &hw, &lo, &q);
    assert_string_equal(q.stack, "");   // the default: not known, matches every stack
    char err[400];
    assert_int_equal(stacks_apply(&hw, stacks_index("composer-fsdp"), err, sizeof err), 0);
    band_query(&m, &hw, &lo, &q);
    assert_string_equal(q.stack, "composer-fsdp");
}

static void test_unknown_name(void **state)
{
    (void)state;
    Stack st;
    char err[400];
    assert_int_equal(stacks_load_name("composer-fdsp", &st, err, sizeof err), -1);
    assert_non_null(strstr(err, "did you mean \"composer-fsdp\""));
    assert_int_equal(stacks_load_name("NeMo", &st, err, sizeof err), 0);   // case-insensitive
    assert_string_equal(st.name, "nemo");
    /* nemo's recipes fuse the cross-entropy (Transformer Engine's); Megatron-LM's default does not */
    HwProfile hw = {0};
    stack_apply(&hw, &st);
    assert_true(hw.ce_fused);
    assert_int_equal(stacks_load_name("megatron-lm", &st, err, sizeof err), 0);
    stack_apply(&hw, &st);
    assert_true(hw.ce_fused);   /* -1: the profile's (here the fused one just set) is kept */
    hw.ce_fused = false;
    stack_apply(&hw, &st);
    assert_false(hw.ce_fused);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_builtins_load),   cmocka_unit_test(test_default_is_identity),
        cmocka_unit_test(test_scales_by_hand),  cmocka_unit_test(test_attention_kernels),
        cmocka_unit_test(test_overlaps),        cmocka_unit_test(test_zero3_by_hand),
        cmocka_unit_test(test_zero3_prefetch),  cmocka_unit_test(test_zero3_530b_fits),
        cmocka_unit_test(test_loader_errors),   cmocka_unit_test(test_profile_round_trip),
        cmocka_unit_test(test_unknown_name),    cmocka_unit_test(test_band_query_stack),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
