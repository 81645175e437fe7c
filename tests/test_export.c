/* test_export.c — what export writes is exactly the plan: Megatron arguments
 * parsed back (export_parse_megatron) re-predict to the same step time and
 * peak memory for the 175B plan, a ZeRO-3 plan and interleaved / uneven
 * plans, and MoE plans (DeepSeek-V3 with MLA, MTP and first dense layers;
 * Mixtral with a capacity factor); layouts Megatron cannot express are refused with one line; the
 * torchtitan module and the Slurm scripts carry their keys; --time and
 * --job-name are checked. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "export.h"
#include "presets.h"
#include "profile.h"

static void load(const char *model, const char *gpu, ModelSpec *m, HwProfile *hw)
{
    char err[256];
    assert_int_equal(presets_find(model, m, err, sizeof err), 0);
    assert_int_equal(profile_load_builtin(gpu, hw, err, sizeof err), 0);
}

static void base(Layout *lo, int dp, int tp, int pp, int vp, int mbs, int gbs, OptimShard opt)
{
    layout_default(lo);
    lo->dp = dp, lo->tp = tp, lo->pp = pp, lo->vp = vp, lo->mbs = mbs, lo->gbs = gbs, lo->opt = opt;
}

/* export, parse back, predict: the same step time and peak memory, exactly */
static void round_trip(const ModelSpec *m, const HwProfile *hw, Layout *lo, const char *must)
{
    char err[512];
    if (layout_check(lo, m, hw, err, sizeof err) != 0)
        fail_msg("layout: %s", err);
    char *t = export_megatron(m, hw, lo, err, sizeof err);
    if (!t)
        fail_msg("export refused: %s", err);
    if (must && !strstr(t, must))
        fail_msg("missing \"%s\" in:\n%s", must, t);
    size_t n = strlen(t);
    assert_true(n > 2 && t[n - 1] == '\n' && t[n - 2] != '\\');
    ModelSpec m2;
    Layout lo2;
    if (export_parse_megatron(t, layout_gpus(lo), hw, &m2, &lo2, err, sizeof err) != 0)
        fail_msg("parse back: %s\n%s", err, t);
    CostOpts o;
    cost_opts_default(&o);
    lo2.flops = lo->flops;
    Cost *a = malloc(sizeof *a), *b = malloc(sizeof *b);
    cost(m, hw, lo, &o, a);
    cost(&m2, hw, &lo2, &o, b);
    if (a->step_s != b->step_s || a->peak_bytes != b->peak_bytes)
        fail_msg("re-predicted %.9g s / %.9g B, planned %.9g s / %.9g B\n%s", b->step_s, b->peak_bytes, a->step_s,
                 a->peak_bytes, t);
    for (int s = 0; s < lo->pp; s++) {
        assert_int_equal(lo2.layers[s], lo->layers[s]);
        assert_int_equal(lo2.full_rc[s], lo->full_rc[s]);
        assert_int_equal(lo2.sel_rc[s], lo->sel_rc[s]);
    }
    assert_int_equal(lo2.dp, lo->dp);
    free(a), free(b), free(t);
}

static void test_round_trip_175b(void **state)
{
    (void)state;
    ModelSpec m;
    HwProfile hw;
    load("gpt3-175b", "h100-sxm", &m, &hw);
    Layout lo;
    /* the planner's 512-GPU 175B neighbourhood, as Megatron expresses it:
     * tp 4, pp 8, vp 4, block recomputation of 1 layer per chunk (4 a stage) */
    base(&lo, 16, 4, 8, 4, 1, 2048, OPT_DISTOPT);
    assert_int_equal(layout_check(&lo, &m, &hw, (char[200]){0}, 200), 0);
    for (int s = 0; s < 8; s++)
        lo.full_rc[s] = 4;
    round_trip(&m, &hw, &lo, "--recompute-num-layers 1 \\");
    /* and the planner's #1 shape (tp 2, pp 16, vp 6) without recomputation */
    base(&lo, 16, 2, 16, 6, 1, 2048, OPT_DISTOPT);
    round_trip(&m, &hw, &lo, "--num-virtual-stages-per-pipeline-rank 6 \\");
    /* every layer recomputed: uniform, 1 */
    base(&lo, 16, 2, 16, 6, 1, 2048, OPT_DISTOPT);
    assert_int_equal(layout_check(&lo, &m, &hw, (char[200]){0}, 200), 0);
    layout_set_recompute(&lo, RECOMPUTE_FULL);
    round_trip(&m, &hw, &lo, "--recompute-method uniform \\");
    base(&lo, 16, 4, 8, 1, 1, 2048, OPT_DISTOPT);
    assert_int_equal(layout_check(&lo, &m, &hw, (char[200]){0}, 200), 0);
    layout_set_recompute(&lo, RECOMPUTE_SELECTIVE);
    lo.prec = PREC_FP8;
    round_trip(&m, &hw, &lo, "--recompute-granularity selective \\");
}

/* context parallel: the all-gather exchange is exported as Megatron's
 * --cp-comm-type all_gather and read back (the ring is Megatron's default
 * p2p and needs no flag); a value Megatron does not have is refused */
static void test_round_trip_cp_comm(void **state)
{
    (void)state;
    ModelSpec m;
    HwProfile hw;
    load("llama3.1-8b", "h100-sxm", &m, &hw);
    m.s = 32768;
    char err[512];
    assert_int_equal(spec_validate(&m, err, sizeof err), 0);
    Layout lo;
    base(&lo, 8, 2, 1, 1, 1, 128, OPT_DISTOPT);
    lo.cp = 4;
    lo.cp_comm = CP_COMM_ALLGATHER;
    round_trip(&m, &hw, &lo, "--cp-comm-type all_gather \\");
    base(&lo, 8, 2, 1, 1, 1, 128, OPT_DISTOPT);
    lo.cp = 4;
    assert_int_equal(layout_check(&lo, &m, &hw, err, sizeof err), 0);
    char *t = export_megatron(&m, &hw, &lo, err, sizeof err);
    assert_non_null(t);
    assert_null(strstr(t, "--cp-comm-type"));
    free(t);
    ModelSpec m2;
    Layout lo2;
    const char *bad = "torchrun pretrain_gpt.py --num-layers 32 --hidden-size 4096 --num-attention-heads 32 "
                      "--seq-length 32768 --context-parallel-size 4 --cp-comm-type ring_of_fire";
    assert_int_not_equal(export_parse_megatron(bad, 4, &hw, &m2, &lo2, err, sizeof err), 0);
    assert_non_null(strstr(err, "--cp-comm-type"));
}

/* --fp8-param-gather: written for an fp8 plan that sets it, read back; refused by the torchtitan export */
static void test_round_trip_fp8_param_gather(void **state)
{
    (void)state;
    ModelSpec m;
    HwProfile hw;
    load("llama3.1-70b", "h100-sxm", &m, &hw);
    Layout lo;
    base(&lo, 2, 4, 8, 1, 1, 256, OPT_DISTOPT);
    lo.prec = PREC_FP8, lo.fp8_recipe = FP8R_TENSORWISE, lo.fp8_param_gather = true;
    round_trip(&m, &hw, &lo, "--fp8-param-gather \\");
    char err[512];
    {   /* a plan torchtitan would take but for its fp8 weights (FSDP, MXFP8 on Blackwell) */
        ModelSpec mb;
        HwProfile b200;
        load("llama3.1-70b", "b200", &mb, &b200);
        Layout t;
        base(&t, 64, 1, 1, 1, 1, 256, OPT_ZERO3);
        t.prec = PREC_FP8, t.fp8_recipe = FP8R_MXFP8, t.fp8_param_gather = true;
        assert_int_equal(layout_check(&t, &mb, &b200, err, sizeof err), 0);
        assert_null(export_torchtitan(&mb, &b200, &t, err, sizeof err));
        assert_non_null(strstr(err, "--no-fp8-param-gather"));
        t.fp8_param_gather = false;
        t.fp8_dpa = true;   /* fp8 attention: torchtitan's float8 covers the linears only */
        assert_int_equal(layout_check(&t, &mb, &b200, err, sizeof err), 0);
        assert_null(export_torchtitan(&mb, &b200, &t, err, sizeof err));
        assert_non_null(strstr(err, "--no-fp8-dot-product-attention"));
        assert_null(export_megatron(&mb, &b200, &t, err, sizeof err));   /* nor Megatron-LM's command line */
        assert_non_null(strstr(err, "fp8_dot_product_attention"));
        assert_null(strstr(err, "--target megatron"));   /* no split to re-plan: the flag is the cause */
        t.fp8_dpa = false;
        char *tt = export_torchtitan(&mb, &b200, &t, err, sizeof err);
        if (!tt)
            fail_msg("torchtitan without fp8 weights: %s", err);
        free(tt);
    }
    /* Megatron-LM's rule: the distributed optimizer or FSDP, and fp8 */
    lo.opt = OPT_ZERO1;
    assert_int_equal(layout_check(&lo, &m, &hw, err, sizeof err), -1);
    assert_non_null(strstr(err, "--fp8-param-gather needs the distributed optimizer"));
    lo.opt = OPT_DISTOPT, lo.prec = PREC_BF16;
    assert_int_equal(layout_check(&lo, &m, &hw, err, sizeof err), -1);
    assert_non_null(strstr(err, "needs --precision fp8"));
}

/* Megatron's precision-aware optimizer (--use-precision-aware-optimizer)
 * and its moments' dtypes, written and read back (round_trip re-prices the
 * memory, so a lost flag or dtype fails it). The 70B's optimizer states by
 * hand, against Megatron's own 4 + 4 + 4 = 12 bytes a parameter:
 *  - bf16 parameters: Transformer Engine's FusedAdam keeps the master as
 *    16-bit remainders: the flag alone 2 + 4 + 4 = 10/12; bf16 and fp8
 *    moments 2 + 2 + 1 = 5/12;
 *  - fp8 current scaling: Megatron keeps an fp32 master, 4 + 2 + 1 = 7/12;
 *    delayed scaling, which FusedAdam casts itself, 5/12 again.
 * Megatron's rules (the flag for a dtype, the distributed optimizer, no fp32
 * run), and torchtitan's refusal. */
static void test_round_trip_precision_aware_optimizer(void **state)
{
    (void)state;
    ModelSpec m;
    HwProfile hw;
    load("llama3.1-70b", "h100-sxm", &m, &hw);
    Layout lo;
    base(&lo, 2, 4, 8, 1, 1, 256, OPT_DISTOPT);
    char err[512];
    StageMem s32, s8;
    assert_int_equal(layout_check(&lo, &m, &hw, err, sizeof err), 0);
    assert_int_equal(lo.prec, PREC_BF16);
    memory_stage(&m, &hw, &lo, 1, &s32);
    assert_true(s32.bytes[MEM_OPTIM] > 0);
    lo.precision_aware_opt = true;
    round_trip(&m, &hw, &lo, "--use-precision-aware-optimizer \\\n--exp-avg-dtype fp32 \\\n--exp-avg-sq-dtype fp32 \\");
    memory_stage(&m, &hw, &lo, 1, &s8);
    assert_float_equal(s8.bytes[MEM_OPTIM] / s32.bytes[MEM_OPTIM], 10.0 / 12.0, 1e-12);
    lo.exp_avg_dtype = PREC_BF16, lo.exp_avg_sq_dtype = PREC_FP8;
    round_trip(&m, &hw, &lo, "--use-precision-aware-optimizer \\\n--exp-avg-dtype bf16 \\\n--exp-avg-sq-dtype fp8 \\");
    memory_stage(&m, &hw, &lo, 1, &s8);
    assert_float_equal(s8.bytes[MEM_OPTIM] / s32.bytes[MEM_OPTIM], 5.0 / 12.0, 1e-12);
    assert_float_equal(s8.bytes[MEM_WEIGHTS], s32.bytes[MEM_WEIGHTS], 0);
    {
        Layout f = lo;
        StageMem f32, f8;
        f.precision_aware_opt = false, f.exp_avg_dtype = f.exp_avg_sq_dtype = PREC_FP32;
        f.prec = PREC_FP8, f.fp8_recipe = FP8R_TENSORWISE;
        assert_int_equal(layout_check(&f, &m, &hw, err, sizeof err), 0);
        memory_stage(&m, &hw, &f, 1, &f32);
        f.precision_aware_opt = true, f.exp_avg_dtype = PREC_BF16, f.exp_avg_sq_dtype = PREC_FP8;
        memory_stage(&m, &hw, &f, 1, &f8);
        assert_float_equal(f8.bytes[MEM_OPTIM] / f32.bytes[MEM_OPTIM], 7.0 / 12.0, 1e-12);
        f.fp8_recipe = FP8R_DELAYED;   /* FusedAdam casts delayed scaling's fp8 itself: it keeps the master */
        memory_stage(&m, &hw, &f, 1, &f8);
        assert_float_equal(f8.bytes[MEM_OPTIM] / f32.bytes[MEM_OPTIM], 5.0 / 12.0, 1e-12);
    }
    /* a dtype without the flag: Megatron-core asserts, and so do the reader and layout_check */
    HwProfile h2 = hw;
    ModelSpec m2;
    Layout lo2;
    const char *bad = "torchrun pretrain_gpt.py --num-layers 80 --hidden-size 8192 --num-attention-heads 64 "
                      "--seq-length 8192 --global-batch-size 64 --vocab-size 128256 --bf16 --use-distributed-optimizer "
                      "--exp-avg-dtype bf16";
    assert_int_not_equal(export_parse_megatron(bad, 8, &h2, &m2, &lo2, err, sizeof err), 0);
    assert_non_null(strstr(err, "need --use-precision-aware-optimizer"));
    {
        Layout d = lo;
        d.precision_aware_opt = false;
        assert_int_equal(layout_check(&d, &m, &hw, err, sizeof err), -1);
        assert_non_null(strstr(err, "need --use-precision-aware-optimizer"));
    }
    const char *bad2 = "torchrun pretrain_gpt.py --num-layers 80 --hidden-size 8192 --num-attention-heads 64 "
                       "--seq-length 8192 --global-batch-size 64 --vocab-size 128256 --bf16 --use-distributed-optimizer "
                       "--use-precision-aware-optimizer --exp-avg-dtype bf16 --main-params-dtype fp16";
    assert_int_not_equal(export_parse_megatron(bad2, 8, &h2, &m2, &lo2, err, sizeof err), 0);
    assert_non_null(strstr(err, "--main-params-dtype fp16"));
    const char *bad3 = "torchrun pretrain_gpt.py --num-layers 80 --hidden-size 8192 --num-attention-heads 64 "
                       "--seq-length 8192 --global-batch-size 64 --vocab-size 128256 --bf16 --use-distributed-optimizer "
                       "--use-precision-aware-optimizer --exp-avg-sq-dtype int4";
    assert_int_not_equal(export_parse_megatron(bad3, 8, &h2, &m2, &lo2, err, sizeof err), 0);
    assert_non_null(strstr(err, "--exp-avg-sq-dtype: expected fp32, fp16, bf16 or fp8"));
    /* Megatron's rules */
    lo.opt = OPT_ZERO1;
    assert_int_equal(layout_check(&lo, &m, &hw, err, sizeof err), -1);
    assert_non_null(strstr(err, "only with the distributed optimizer"));
    lo.opt = OPT_DISTOPT, lo.prec = PREC_FP32, lo.exp_avg_dtype = lo.exp_avg_sq_dtype = PREC_FP32;
    assert_int_equal(layout_check(&lo, &m, &hw, err, sizeof err), -1);
    assert_non_null(strstr(err, "an fp32 run keeps no separate master weights"));
    /* torchtitan keeps an fp32 master and moments: refused by name */
    Layout t;
    base(&t, 1, 8, 8, 1, 1, 256, OPT_DISTOPT);   /* one data-parallel rank: no optimizer sharding to refuse */
    t.precision_aware_opt = true;
    if (layout_check(&t, &m, &hw, err, sizeof err) != 0)
        fail_msg("layout: %s", err);
    assert_null(export_torchtitan(&m, &hw, &t, err, sizeof err));
    assert_non_null(strstr(err, "--no-use-precision-aware-optimizer"));
}

/* --pp-schedule dualpipe: neither Megatron-LM nor torchtitan runs DeepSeek's DualPipe, so both exports refuse
 * it by name, and the planner refuses to search it (its stage ILP balances 1F1B's bottleneck stage) */
static void test_dualpipe_refused(void **state)
{
    (void)state;
    ModelSpec m;
    HwProfile hw;
    load("llama3.1-70b", "h100-sxm", &m, &hw);
    Layout lo;
    base(&lo, 2, 4, 8, 1, 1, 256, OPT_ZERO0);
    lo.pp_sched = PP_SCHED_DUALPIPE;
    char err[512];
    if (layout_check(&lo, &m, &hw, err, sizeof err) != 0)
        fail_msg("layout: %s", err);
    assert_null(export_megatron(&m, &hw, &lo, err, sizeof err));
    assert_non_null(strstr(err, "no DualPipe"));
    assert_null(export_torchtitan(&m, &hw, &lo, err, sizeof err));
    assert_non_null(strstr(err, "--pp-schedule 1f1b"));
    lo.pp_sched = PP_SCHED_1F1B;   /* the same layout under 1F1B exports */
    char *t = export_megatron(&m, &hw, &lo, err, sizeof err);
    assert_non_null(t);
    free(t);
}

static void test_round_trip_zero3(void **state)
{
    (void)state;
    ModelSpec m;
    HwProfile hw;
    load("gpt3-175b", "h100-sxm", &m, &hw);
    Layout lo;
    base(&lo, 256, 2, 1, 1, 4, 2048, OPT_ZERO3);
    assert_int_equal(layout_check(&lo, &m, &hw, (char[200]){0}, 200), 0);
    layout_set_recompute(&lo, RECOMPUTE_FULL);
    round_trip(&m, &hw, &lo, "--data-parallel-sharding-strategy optim_grads_params \\");
    base(&lo, 256, 2, 1, 1, 4, 2048, OPT_ZERO2);
    lo.grad_fp32 = false;
    assert_int_equal(layout_check(&lo, &m, &hw, (char[200]){0}, 200), 0);
    layout_set_recompute(&lo, RECOMPUTE_FULL);
    round_trip(&m, &hw, &lo, "--grad-reduce-in-bf16 \\");
    char err[512];
    char *t = export_megatron(&m, &hw, &lo, err, sizeof err);
    assert_non_null(t);
    assert_non_null(strstr(t, "--use-megatron-fsdp \\"));
    assert_non_null(strstr(t, "--ckpt-format fsdp_dtensor \\"));
    assert_non_null(strstr(t, "--overlap-param-gather \\"));
    assert_null(strstr(t, "--use-flash-attn"));
    free(t);
}

static void test_round_trip_interleaved_uneven(void **state)
{
    (void)state;
    ModelSpec m;
    HwProfile hw;
    load("llama3.1-70b", "h100-sxm", &m, &hw);
    Layout lo;
    base(&lo, 4, 8, 4, 2, 1, 1024, OPT_DISTOPT);
    int full[4] = {4, 4, 4, 4};
    memcpy(lo.full_rc, full, sizeof full);
    round_trip(&m, &hw, &lo, "--num-virtual-stages-per-pipeline-rank 2 \\");
    char err[512];
    char *t = export_megatron(&m, &hw, &lo, err, sizeof err);
    const char *want[] = {"--rotary-base 500000 \\", "--use-rope-scaling \\", "--overlap-grad-reduce \\",
                          "--attention-backend flash", "--recompute-num-layers 2 \\", "--sequence-parallel \\",
                          "# environment: CUDA_DEVICE_MAX_CONNECTIONS=1"};
    for (size_t i = 0; i < sizeof want / sizeof *want; i++)
        if (!strstr(t, want[i]))
            fail_msg("missing \"%s\" in:\n%s", want[i], t);
    free(t);
    /* uneven first/last stages (no interleaving), block N = 6 on every stage */
    base(&lo, 4, 8, 4, 1, 1, 1024, OPT_ZERO0);
    int l3[4] = {16, 24, 24, 16}, f3[4] = {6, 6, 6, 6};
    memcpy(lo.layers, l3, sizeof l3);
    memcpy(lo.full_rc, f3, sizeof f3);
    lo.prec = PREC_FP16;
    round_trip(&m, &hw, &lo, "--decoder-first-pipeline-num-layers 16 \\");
}

/* Mixture of experts: DeepSeek-V3 (MLA, MTP, first 3 dense, a shared
 * expert) and Mixtral (every layer MoE) round-trip with ep, etp, capacity
 * factor and the imbalance assumption; the MoE flags are Megatron's. */
static void test_round_trip_moe(void **state)
{
    (void)state;
    ModelSpec m;
    HwProfile hw;
    load("deepseek-v3", "h100-sxm", &m, &hw);
    assert_true(m.attn == ATTN_MLA && m.mtp_layers == 1 && m.moe_first_dense == 3 && m.shared_ffn > 0);
    Layout lo;
    base(&lo, 16, 8, 16, 1, 1, 1024, OPT_DISTOPT);
    lo.ep = 8, lo.etp = 1;
    round_trip(&m, &hw, &lo, "--moe-layer-freq '[0]*3+[1]*58' \\");
    const char *flags[] = {"--num-experts 256 \\", "--moe-router-topk 8 \\", "--moe-ffn-hidden-size 2048 \\",
                           "--moe-shared-expert-intermediate-size 2048 \\", "--expert-model-parallel-size 8 \\",
                           "--expert-tensor-parallel-size 1 \\", "--moe-token-dispatcher-type alltoall \\",
                           "--moe-grouped-gemm \\", "--multi-latent-attention \\", "--q-lora-rank 1536 \\",
                           "--kv-lora-rank 512 \\", "--qk-head-dim 128 \\", "--qk-pos-emb-head-dim 64 \\",
                           "--v-head-dim 128 \\", "--mtp-num-layers 1 \\"};
    for (size_t i = 0; i < sizeof flags / sizeof *flags; i++)
        round_trip(&m, &hw, &lo, flags[i]);
    /* ep 64 across nodes, etp = tp, fp8, a measured imbalance */
    base(&lo, 128, 2, 8, 1, 1, 2048, OPT_DISTOPT);
    lo.ep = 64, lo.etp = 0, lo.prec = PREC_FP8, lo.moe_imbalance = 1.35;
    round_trip(&m, &hw, &lo, "--expert-tensor-parallel-size 2 \\");
    round_trip(&m, &hw, &lo, "# moe-imbalance: 1.35");

    load("mixtral-8x7b", "h100-sxm", &m, &hw);
    assert_true(spec_is_moe(&m) && m.moe_first_dense == 0 && m.attn == ATTN_MHA);
    base(&lo, 16, 2, 2, 1, 1, 256, OPT_DISTOPT);
    lo.ep = 8, lo.etp = 2;
    round_trip(&m, &hw, &lo, "--moe-layer-freq 1 \\");
    m.capacity_factor = 1.25;   /* padded to capacity */
    round_trip(&m, &hw, &lo, "--moe-expert-capacity-factor 1.25 \\");
    round_trip(&m, &hw, &lo, "--moe-pad-expert-input-to-capacity");

    /* reading back what is not priced is refused, naming the flag */
    char err[512];
    ModelSpec m2;
    Layout lo2;
    const char *base_args = "--num-layers 32 --hidden-size 4096 --num-attention-heads 32 --seq-length 4096 "
                            "--global-batch-size 256 --vocab-size 32000 --num-experts 8 --swiglu ";
    char args[1024];
    snprintf(args, sizeof args, "%s--moe-token-dispatcher-type deepep", base_args);
    assert_int_equal(export_parse_megatron(args, 8, &hw, &m2, &lo2, err, sizeof err), -1);
    assert_non_null(strstr(err, "--moe-token-dispatcher-type"));
    /* allgather is priced now; and without the flag it is Megatron's default */
    snprintf(args, sizeof args, "%s--moe-token-dispatcher-type allgather", base_args);
    assert_int_equal(export_parse_megatron(args, 8, &hw, &m2, &lo2, err, sizeof err), 0);
    assert_int_equal(lo2.moe_dispatcher, MOE_DISPATCH_ALLGATHER);
    assert_int_equal(export_parse_megatron(base_args, 8, &hw, &m2, &lo2, err, sizeof err), 0);
    assert_int_equal(lo2.moe_dispatcher, MOE_DISPATCH_ALLGATHER);
    snprintf(args, sizeof args, "%s--moe-layer-freq \"[0]*2+[1]*31\"", base_args);
    assert_int_equal(export_parse_megatron(args, 8, &hw, &m2, &lo2, err, sizeof err), -1);
    assert_non_null(strstr(err, "33 entries"));
    snprintf(args, sizeof args, "%s--moe-layer-freq \"[0]*2+[1]*30\" --expert-model-parallel-size 4", base_args);
    assert_int_equal(export_parse_megatron(args, 8, &hw, &m2, &lo2, err, sizeof err), 0);
    assert_int_equal(m2.moe_first_dense, 2);
    assert_int_equal(m2.topk, 2);   /* Megatron's default */
    assert_int_equal(lo2.ep, 4);
    assert_int_equal(layout_etp(&lo2), 1);   /* = tp when not given */
    snprintf(args, sizeof args, "%s--moe-expert-capacity-factor 1.0", base_args);
    assert_int_equal(export_parse_megatron(args, 8, &hw, &m2, &lo2, err, sizeof err), -1);
    assert_non_null(strstr(err, "--moe-pad-expert-input-to-capacity"));
    /* torchtitan: no MoE export */
    base(&lo, 16, 2, 2, 1, 1, 256, OPT_ZERO3);
    lo.pp = 1, lo.dp = 32, lo.ep = 8, lo.etp = 2;
    m.capacity_factor = 0;
    assert_int_equal(layout_check(&lo, &m, &hw, err, sizeof err), 0);
    assert_null(export_torchtitan(&m, &hw, &lo, err, sizeof err));
    assert_non_null(strstr(err, "mixture-of-experts"));
}

/* Llama 3.1 405B at pp 8 vp 8 (NVIDIA's layout): the embedding and the loss
 * count as layers; the overlap switches are the layout's and come back. */
static void test_round_trip_account_for(void **state)
{
    (void)state;
    ModelSpec m;
    HwProfile hw;
    load("llama3.1-405b", "h100-sxm", &m, &hw);
    Layout lo;
    base(&lo, 4, 8, 8, 8, 1, 64, OPT_DISTOPT);
    lo.tp_comm_overlap = true;
    round_trip(&m, &hw, &lo, "--account-for-embedding-in-pipeline-split \\");
    char err[512];
    char *t = export_megatron(&m, &hw, &lo, err, sizeof err);
    assert_non_null(t);
    assert_non_null(strstr(t, "--account-for-loss-in-pipeline-split \\"));
    assert_non_null(strstr(t, "--tp-comm-overlap \\"));
    assert_non_null(strstr(t, "--overlap-param-gather \\"));
    assert_null(strstr(t, "--decoder-first-pipeline-num-layers"));
    free(t);
    /* block recomputation of one layer a chunk on the 16/15-layer stages */
    base(&lo, 4, 8, 8, 8, 1, 64, OPT_DISTOPT);
    assert_int_equal(layout_check(&lo, &m, &hw, err, sizeof err), 0);
    for (int s = 0; s < 8; s++)
        lo.full_rc[s] = 8;
    round_trip(&m, &hw, &lo, "--recompute-num-layers 1 \\");
    /* pp 16 vp 4, the switches off: none of the flags */
    base(&lo, 2, 8, 16, 4, 1, 64, OPT_DISTOPT);
    lo.overlap_param = false;
    round_trip(&m, &hw, &lo, "--num-virtual-stages-per-pipeline-rank 4 \\");
    t = export_megatron(&m, &hw, &lo, err, sizeof err);
    assert_non_null(t);
    assert_null(strstr(t, "--tp-comm-overlap"));
    assert_null(strstr(t, "--overlap-param-gather"));
    assert_non_null(strstr(t, "--overlap-grad-reduce \\"));
    free(t);
}

static void refused(const ModelSpec *m, const HwProfile *hw, Layout *lo, const char *says)
{
    char err[512] = "";
    assert_int_equal(layout_check(lo, m, hw, err, sizeof err), 0);
    char *t = export_megatron(m, hw, lo, err, sizeof err);
    if (t)
        fail_msg("exported what Megatron cannot run:\n%s", t);
    if (!strstr(err, says))
        fail_msg("error \"%s\" does not say \"%s\"", err, says);
    assert_null(strchr(err, '\n'));
}

static void test_refusals(void **state)
{
    (void)state;
    ModelSpec m;
    HwProfile hw;
    load("gpt3-175b", "h100-sxm", &m, &hw);
    Layout lo;
    /* the old bug: 1 layer in 4 of 16 stages (vp 6) became 1 per chunk everywhere */
    base(&lo, 16, 2, 16, 6, 1, 2048, OPT_DISTOPT);
    assert_int_equal(layout_check(&lo, &m, &hw, (char[200]){0}, 200), 0);
    for (int s = 0; s < 4; s++)
        lo.full_rc[s] = 1;
    refused(&m, &hw, &lo, "1/1/1/1/0/0");
    refused(&m, &hw, &lo, "--target megatron");
    base(&lo, 16, 4, 8, 1, 1, 2048, OPT_DISTOPT);
    assert_int_equal(layout_check(&lo, &m, &hw, (char[200]){0}, 200), 0);
    lo.full_rc[0] = 3, lo.full_rc[1] = 2;
    refused(&m, &hw, &lo, "3/2/0");
    base(&lo, 16, 4, 8, 1, 1, 2048, OPT_DISTOPT);
    assert_int_equal(layout_check(&lo, &m, &hw, (char[200]){0}, 200), 0);
    lo.full_rc[0] = 2, lo.sel_rc[1] = 12;
    refused(&m, &hw, &lo, "selectively");
    base(&lo, 16, 4, 8, 1, 1, 2048, OPT_DISTOPT);
    assert_int_equal(layout_check(&lo, &m, &hw, (char[200]){0}, 200), 0);
    lo.sel_rc[0] = 5;
    refused(&m, &hw, &lo, "selective covers every layer");
    refused(&m, &hw, &lo, "recomputed selectively 5/0/0/0");
    base(&lo, 16, 4, 4, 1, 1, 2048, OPT_DISTOPT);
    int layers[4] = {24, 23, 25, 24};
    memcpy(lo.layers, layers, sizeof layers);
    refused(&m, &hw, &lo, "24/23/25/24");
    /* what layout_megatron_check refuses, export refuses: it asks that rule alone (it once kept its own,
     * and wrote a mixture of experts at tp 2 without sequence parallelism, which Megatron-LM's MoE layer
     * refuses to train, and biased experts at etp 2) */
    load("mixtral-8x7b", "h100-sxm", &m, &hw);
    base(&lo, 16, 2, 2, 1, 1, 256, OPT_DISTOPT);
    lo.ep = 8, lo.etp = 2, lo.sp = false, lo.target = TARGET_ULTRAPLAN;
    refused(&m, &hw, &lo, "unless --sequence-parallel is on");
    lo.sp = true;
    m.bias = true;
    refused(&m, &hw, &lo, "biased MoE experts only with --expert-tensor-parallel-size 1");
}

static void test_torchtitan(void **state)
{
    (void)state;
    ModelSpec m;
    HwProfile hw;
    load("llama3.1-70b", "h100-sxm", &m, &hw);
    Layout lo;
    base(&lo, 32, 8, 1, 1, 1, 1024, OPT_ZERO3);
    char err[512];
    if (layout_check(&lo, &m, &hw, err, sizeof err) != 0)
        fail_msg("layout: %s", err);
    layout_set_recompute(&lo, RECOMPUTE_FULL);
    char *t = export_torchtitan(&m, &hw, &lo, err, sizeof err);
    if (!t)
        fail_msg("%s", err);
    const char *want[] = {"from torchtitan.models.llama3.config_registry import llama3_70b",
                          "p.data_parallel_shard_degree = 32\n", "p.data_parallel_replicate_degree = 1\n",
                          "p.fsdp_reshard_after_forward = \"always\"", "p.tensor_parallel_degree = 8\n",
                          "t.num_tokens_per_train_step = 8388608\n", "config.activation_checkpoint = FullAC.Config()"};
    for (size_t i = 0; i < sizeof want / sizeof *want; i++)
        if (!strstr(t, want[i]))
            fail_msg("missing \"%s\" in:\n%s", want[i], t);
    assert_null(strstr(t, "CUDA graphs"));
    free(t);
    /* --no-torch-compile: eager, as priced; async TP needs compile, so that pair is refused */
    lo.torch_compile = false;
    t = export_torchtitan(&m, &hw, &lo, err, sizeof err);
    assert_non_null(t);
    assert_non_null(strstr(t, "    config.compile.enable = False\n"));
    free(t);
    lo.tp_comm_overlap = true, lo.sp = true;
    assert_null(export_torchtitan(&m, &hw, &lo, err, sizeof err));
    assert_non_null(strstr(err, "async TP needs torch.compile"));
    lo.torch_compile = true, lo.tp_comm_overlap = false;
    /* async TP as planned (torchtitan's compile.enable_async_tensor_parallel needs SP and compile) */
    lo.tp_comm_overlap = true, lo.sp = true;
    t = export_torchtitan(&m, &hw, &lo, err, sizeof err);
    assert_non_null(t);
    assert_non_null(strstr(t, "    config.compile.enable_async_tensor_parallel = True\n"));
    free(t);
    lo.tp_comm_overlap = false;
    /* CUDA graphs have no torchtitan setting: said so, not dropped silently */
    lo.cuda_graph = CG_FULL_ITERATION;
    t = export_torchtitan(&m, &hw, &lo, err, sizeof err);
    assert_non_null(t);
    assert_non_null(strstr(t, "# CUDA graphs: the plan is priced with Megatron's --cuda-graph-impl full_iteration; "
                              "torchtitan has no equivalent"));
    free(t);
    lo.cuda_graph = CG_NONE;
    base(&lo, 4, 8, 4, 2, 1, 1024, OPT_ZERO0);
    assert_int_equal(layout_check(&lo, &m, &hw, err, sizeof err), 0);
    t = export_torchtitan(&m, &hw, &lo, err, sizeof err);
    assert_non_null(t);
    const char *pipe[] = {"p.data_parallel_replicate_degree = 4\n", "p.pipeline_parallel_degree = 4\n",
                          "p.pipeline_parallel_schedule = \"Interleaved1F1B\"",
                          "p.pipeline_parallel_layers_per_stage = 10\n", "p.num_pp_microbatches = 256\n",
                          "config.activation_checkpoint = None"};
    for (size_t i = 0; i < sizeof pipe / sizeof *pipe; i++)
        if (!strstr(t, pipe[i]))
            fail_msg("missing \"%s\" in:\n%s", pipe[i], t);
    assert_null(strstr(t, "Converter"));   // bf16: no converter imported or set
    /* the base configuration is not the plan (llama3_405b() compiles, runs async TP and converts to
     * rowwise Float8): the export sets compile, async TP as planned, and the model without converters */
    assert_non_null(strstr(t, "    config.compile.enable = True\n"));
    /* the loss compiled with the model, as torchtitan does and the torchtitan stack prices it (compile_loss);
     * under a stack that prices it eager when compiled (torchtitan-2412: 9dec370 compiled the blocks only)
     * the export leaves it eager too */
    assert_non_null(strstr(t, "    config.compile.components = [\"model\", \"loss\"]\n"));
    {
        HwProfile h2 = hw;
        h2.ce_upcast = true, h2.compile_loss = false;
        char *t2 = export_torchtitan(&m, &h2, &lo, err, sizeof err);
        assert_non_null(t2);
        assert_non_null(strstr(t2, "    config.compile.components = [\"model\"]\n"));
        assert_non_null(strstr(t2, "the loss eager, as priced"));
        free(t2);
        h2.compile_loss = true;
        t2 = export_torchtitan(&m, &h2, &lo, err, sizeof err);
        assert_non_null(t2);
        assert_non_null(strstr(t2, "    config.compile.components = [\"model\", \"loss\"]\n"));
        free(t2);
    }
    assert_non_null(strstr(t, "    config.compile.enable_async_tensor_parallel = False\n"));
    assert_non_null(strstr(t, "    config.model_spec = model_registry(\"70B\")  # bf16: no Float8 converter\n"));
    /* fp8: torchtitan b5bcd76 has rowwise scaling and MXFP8 only. A plan priced with delayed or tensorwise
     * scaling is refused by name (it used to be written with Float8LinearConverter, whose default is rowwise,
     * a recipe the plan was not priced with); an MXFP8 plan is written with MXFP8LinearConverter. */
    lo.prec = PREC_FP8;
    for (int r = FP8R_DELAYED; r <= FP8R_BLOCKWISE; r++) {
        if (r == FP8R_MXFP8)
            continue;
        lo.fp8_recipe = (Fp8Recipe)r;
        assert_null(export_torchtitan(&m, &hw, &lo, err, sizeof err));
        assert_non_null(strstr(err, "torchtitan: its fp8 recipes are rowwise scaling"));
        assert_non_null(strstr(err, layout_fp8_recipe_name(lo.fp8_recipe)));
    }
    HwProfile b200;
    load("llama3.1-70b", "b200", &m, &b200);
    lo.fp8_recipe = FP8R_MXFP8;
    assert_int_equal(layout_check(&lo, &m, &b200, err, sizeof err), 0);
    free(t);
    t = export_torchtitan(&m, &b200, &lo, err, sizeof err);
    if (!t)
        fail_msg("%s", err);
    assert_non_null(strstr(t, "from torchtitan.components.quantization import MXFP8LinearConverter\n"));
    assert_non_null(strstr(t, "\"70B\", converters=[MXFP8LinearConverter.Config(model_compile_enabled=True)]"));
    assert_null(strstr(t, "Float8LinearConverter"));
    free(t);
    lo.prec = PREC_BF16;
    /* context parallelism: torchtitan's is PyTorch's all-gather exchange; a ring-priced plan is refused */
    {
        Layout c = lo;
        c.opt = OPT_ZERO3, c.cp = 2, c.dp = lo.dp / 2;
        c.cp_comm = CP_COMM_RING;
        assert_null(export_torchtitan(&m, &hw, &c, err, sizeof err));
        assert_non_null(strstr(err, "plan with --cp-comm all-gather"));
        c.cp_comm = CP_COMM_ALLGATHER;
        char *tc = export_torchtitan(&m, &hw, &c, err, sizeof err);
        if (!tc)
            fail_msg("cp all-gather: %s", err);
        assert_non_null(strstr(tc, "p.context_parallel_degree = 2\n"));
        free(tc);
    }
    /* selective recomputation: torchtitan's SelectiveAC is per-op. A plan priced with Megatron's
     * core-attention recomputation (any stack but torchtitan) used to be written as SelectiveAC all the
     * same; it is refused by name, and one priced with the per-op policy (--stack torchtitan) is written,
     * while the Megatron export refuses that one */
    {
        Layout c = lo;
        layout_set_recompute(&c, RECOMPUTE_SELECTIVE);
        c.sel_ac = SEL_AC_CORE_ATTN;
        assert_null(export_torchtitan(&m, &hw, &c, err, sizeof err));
        assert_non_null(strstr(err, "torchtitan: torchtitan's selective AC is per-op"));
        assert_non_null(strstr(err, "plan with --stack torchtitan"));
        c.sel_ac = SEL_AC_OP;
        char *tc = export_torchtitan(&m, &hw, &c, err, sizeof err);
        if (!tc)
            fail_msg("selective op: %s", err);
        assert_non_null(strstr(tc, "    config.activation_checkpoint = SelectiveAC.Config()"));
        free(tc);
        assert_null(export_megatron(&m, &hw, &c, err, sizeof err));
        assert_non_null(strstr(err, "megatron: the plan's selective recomputation is priced as torchtitan's per-op"));
        c.sel_ac = SEL_AC_CORE_ATTN;
        tc = export_megatron(&m, &hw, &c, err, sizeof err);
        if (!tc)
            fail_msg("megatron selective: %s", err);
        assert_non_null(strstr(tc, "--recompute-granularity selective"));
        free(tc);
        /* the per-op stack without selective layers exports to Megatron as before */
        layout_set_recompute(&c, RECOMPUTE_FULL);
        c.sel_ac = SEL_AC_OP;
        tc = export_megatron(&m, &hw, &c, err, sizeof err);
        assert_non_null(tc);
        free(tc);
    }
    lo.opt = OPT_DISTOPT;
    assert_null(export_torchtitan(&m, &hw, &lo, err, sizeof err));
    assert_non_null(strstr(err, "optimizer-only sharding"));
    load("gpt3-175b", "h100-sxm", &m, &hw);
    base(&lo, 16, 4, 8, 1, 1, 2048, OPT_ZERO0);
    assert_int_equal(layout_check(&lo, &m, &hw, err, sizeof err), 0);
    assert_null(export_torchtitan(&m, &hw, &lo, err, sizeof err));
    assert_non_null(strstr(err, "Llama 3 flavor"));
}

static void test_slurm(void **state)
{
    (void)state;
    ModelSpec m;
    HwProfile hw;
    char err[512];
    load("llama3.1-70b", "gb200", &m, &hw);
    assert_int_equal(hw.gpus_per_host, 4);
    assert_int_equal(hw.gpus_per_node, 72);
    Layout lo;
    base(&lo, 4, 8, 4, 1, 1, 1024, OPT_DISTOPT);
    assert_int_equal(layout_check(&lo, &m, &hw, err, sizeof err), 0);
    ExportOpts eo;
    export_opts_default(&eo);
    assert_null(export_slurm(&m, &hw, &lo, &eo, err, sizeof err));   // no --data
    assert_non_null(strstr(err, "--data"));
    eo.data = "shards/*.bin";
    eo.plan_path = "my plan.json";
    char *t = export_slurm(&m, &hw, &lo, &eo, err, sizeof err);
    assert_non_null(t);
    const char *want[] = {"#SBATCH --nodes=32\n", "#SBATCH --ntasks-per-node=4\n", "#SBATCH --gpus-per-node=4\n",
                          "#SBATCH --signal=USR1@300\n", "PLAN='my plan.json'\n", "--backend cuda",
                          "--data \"$DATA\"", "if [ -f \"$CKPT/manifest.json\" ]", "RESUME=(--resume)"};
    for (size_t i = 0; i < sizeof want / sizeof *want; i++)
        if (!strstr(t, want[i]))
            fail_msg("missing \"%s\" in:\n%s", want[i], t);
    free(t);
    t = export_slurm_megatron(&m, &hw, &lo, &eo, err, sizeof err);
    assert_non_null(t);
    const char *want2[] = {"export CUDA_DEVICE_MAX_CONNECTIONS=1\n", "--save \"$CKPT\" --load \"$CKPT\"",
                           "--exit-signal-handler --exit-signal SIGUSR1", "pretrain_gpt.py",
                           "RANK=$SLURM_PROCID WORLD_SIZE=$SLURM_NTASKS LOCAL_RANK=$SLURM_LOCALID",
                           "    --tensor-model-parallel-size 8\n", "scontrol show hostnames"};
    for (size_t i = 0; i < sizeof want2 / sizeof *want2; i++)
        if (!strstr(t, want2[i]))
            fail_msg("missing \"%s\" in:\n%s", want2[i], t);
    free(t);
    const char *good[] = {"30", "30:00", "48:00:00", "2-00", "2-12:30", "1-00:00:00", "UNLIMITED"};
    const char *bad[] = {"", "1:2:3:4", "2-", "-5", "10:75", "1-25:00", "abc", "0", "12:00:00x"};
    for (size_t i = 0; i < sizeof good / sizeof *good; i++)
        if (export_check_time(good[i], err, sizeof err))
            fail_msg("\"%s\" refused: %s", good[i], err);
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        if (!export_check_time(bad[i], err, sizeof err))
            fail_msg("\"%s\" accepted", bad[i]);
    assert_int_equal(export_check_job_name("pretrain-175b_v2.1", err, sizeof err), 0);
    assert_int_equal(export_check_job_name("a b", err, sizeof err), -1);
    assert_int_equal(export_check_job_name("", err, sizeof err), -1);
    ExportFormat f;
    assert_int_equal(export_parse_format("slurm-megatron", &f), 0);
    assert_int_equal(f, EXPORT_SLURM_MEGATRON);
    assert_int_equal(export_parse_format("deepspeed", &f), -1);
}


/* An MXFP8 wire (--moe-dispatch-fwd-dtype, --moe-combine-bwd-dtype): Qwen3-30B-A3B
 * on B200s, flex, fp8 under the MXFP8 recipe. Megatron-core takes it only
 * with the ncclep flex backend and TE's op fuser (transformer_config.py), so
 * the export writes those beside the two dtypes; it reads back to the same
 * wire, step time and memory. Without the wire flex is written with DeepEP
 * and no dtype flags. A backend Megatron does not have is refused by name. */
static void test_round_trip_moe_wire(void **state)
{
    (void)state;
    ModelSpec m;
    HwProfile hw;
    load("qwen3-30b-a3b", "b200", &m, &hw);
    Layout lo;
    base(&lo, 16, 1, 1, 1, 1, 1024, OPT_DISTOPT);
    lo.ep = 16, lo.etp = 1, lo.prec = PREC_FP8, lo.fp8_recipe = FP8R_MXFP8, lo.moe_dispatcher = MOE_DISPATCH_FLEX;
    char err[256];
    if (layout_check(&lo, &m, &hw, err, sizeof err) != 0)
        fail_msg("layout: %s", err);
    char *t = export_megatron(&m, &hw, &lo, err, sizeof err);
    if (!t)
        fail_msg("export: %s", err);
    assert_non_null(strstr(t, "--moe-flex-dispatcher-backend deepep"));
    assert_null(strstr(t, "-dtype"));
    assert_null(strstr(t, "--use-transformer-engine-op-fuser"));
    free(t);
    lo.moe_dispatch_wire = MOE_WIRE_MXFP8;
    round_trip(&m, &hw, &lo, "--moe-flex-dispatcher-backend ncclep");
    round_trip(&m, &hw, &lo, "--moe-dispatch-fwd-dtype mxfp8");
    round_trip(&m, &hw, &lo, "--moe-combine-bwd-dtype bf16");
    round_trip(&m, &hw, &lo, "--use-transformer-engine-op-fuser");
    lo.moe_combine_bwd_wire = MOE_WIRE_MXFP8;
    round_trip(&m, &hw, &lo, "--moe-combine-bwd-dtype mxfp8");
    t = export_megatron(&m, &hw, &lo, err, sizeof err);
    ModelSpec m2;
    Layout lo2;
    assert_int_equal(export_parse_megatron(t, layout_gpus(&lo), &hw, &m2, &lo2, err, sizeof err), 0);
    assert_int_equal(lo2.moe_dispatch_wire, MOE_WIRE_MXFP8);
    assert_int_equal(lo2.moe_combine_bwd_wire, MOE_WIRE_MXFP8);
    /* a dtype or backend Megatron does not take */
    char *bad = strstr(t, "--moe-dispatch-fwd-dtype mxfp8");
    assert_non_null(bad);
    memcpy(bad + strlen("--moe-dispatch-fwd-dtype "), "fp4  ", 5);
    assert_int_equal(export_parse_megatron(t, layout_gpus(&lo), &hw, &m2, &lo2, err, sizeof err), -1);
    assert_non_null(strstr(err, "--moe-dispatch-fwd-dtype: expected bf16 or mxfp8"));
    free(t);
}

/* --pipeline-model-parallel-layout: DeepSeek-V3 with the H100 recipe's
 * layout exports the string quoted (and no --num-virtual-stages-per-
 * pipeline-rank, which Megatron refuses beside it) and reads back to the
 * same stages, vp, MTP stage, step time and memory; a full-recompute block
 * count per chunk follows the string's chunks. */
static void test_round_trip_pipeline_layout(void **state)
{
    (void)state;
    ModelSpec m;
    HwProfile hw;
    load("deepseek-v3", "h100-sxm", &m, &hw);
    Layout lo;
    base(&lo, 64, 2, 8, 1, 1, 8192, OPT_DISTOPT);
    lo.ep = 64, lo.etp = 1, lo.prec = PREC_FP8;
    snprintf(lo.pp_layout, sizeof lo.pp_layout, "Et|(tt|)*30mL");
    lo.moe_dispatcher = MOE_DISPATCH_FLEX, lo.moe_a2a_overlap = true;   /* the stack's EP switches go along */
    round_trip(&m, &hw, &lo, "--pipeline-model-parallel-layout 'Et|(tt|)*30mL'");
    round_trip(&m, &hw, &lo, "--moe-token-dispatcher-type flex");
    round_trip(&m, &hw, &lo, "--overlap-moe-expert-parallel-comm");
    lo.moe_shared_overlap = true;   /* DeepSeek-V3 has a shared expert: the flag is written and read back */
    round_trip(&m, &hw, &lo, "--moe-shared-expert-overlap");
    char err[256];
    char *t = export_megatron(&m, &hw, &lo, err, sizeof err);
    assert_non_null(t);
    assert_null(strstr(t, "--num-virtual-stages-per-pipeline-rank"));
    assert_null(strstr(t, "--decoder-first-pipeline-num-layers"));
    ModelSpec m2;
    Layout lo2;
    assert_int_equal(export_parse_megatron(t, layout_gpus(&lo), &hw, &m2, &lo2, err, sizeof err), 0);
    assert_string_equal(lo2.pp_layout, "Et|(tt|)*30mL");
    assert_int_equal(lo2.vp, 4);
    assert_int_equal(lo2.moe_dispatcher, MOE_DISPATCH_FLEX);
    assert_true(lo2.moe_a2a_overlap);
    assert_true(lo2.moe_shared_overlap);
    /* the preset's group-limited routing (8 groups, 4 a token) is written and read back */
    assert_non_null(strstr(t, "--moe-router-num-groups 8"));
    assert_non_null(strstr(t, "--moe-router-group-topk 4"));
    assert_int_equal(m2.router_groups, 8);
    assert_int_equal(m2.router_group_topk, 4);
    free(t);
    /* --recompute-modules: the recipe's modules alone (no core_attn: no selective layers read back),
     * then with core attention recomputed too (core_attn leads the list); step time and memory agree */
    snprintf(lo.rc_modules, sizeof lo.rc_modules, "mla_up_proj+mlp");
    round_trip(&m, &hw, &lo, "--recompute-granularity selective \\\n--recompute-modules mla_up_proj mlp \\");
    layout_set_recompute(&lo, RECOMPUTE_SELECTIVE);
    round_trip(&m, &hw, &lo, "--recompute-modules core_attn mla_up_proj mlp \\");
    t = export_megatron(&m, &hw, &lo, err, sizeof err);
    assert_int_equal(export_parse_megatron(t, layout_gpus(&lo), &hw, &m2, &lo2, err, sizeof err), 0);
    assert_string_equal(lo2.rc_modules, "mla_up_proj,mlp");
    free(t);
    /* full recomputation beside modules: Megatron has one granularity, refused naming the modules */
    layout_set_recompute(&lo, RECOMPUTE_FULL);
    assert_null(export_megatron(&m, &hw, &lo, err, sizeof err));
    assert_non_null(strstr(err, "--recompute-modules mla_up_proj+mlp"));
    /* an unknown module in the arguments is named */
    const char *badm = "--num-layers 4 --hidden-size 64 --num-attention-heads 4 --seq-length 128 "
                       "--global-batch-size 8 --vocab-size 256 --recompute-granularity selective "
                       "--recompute-modules mla_up_proj moe_gate";
    assert_int_equal(export_parse_megatron(badm, 8, &hw, &m2, &lo2, err, sizeof err), -1);
    assert_non_null(strstr(err, "\"moe_gate\""));
    layout_set_recompute(&lo, RECOMPUTE_NONE);
    lo.rc_modules[0] = 0;
    /* CUDA graphs: the recipes' partial graphs and the full iteration, written and read back with the
     * same step time (round_trip); the deprecated --cuda-graph-scope spellings read as Megatron migrates them */
    lo.cuda_graph = CG_TE;
    snprintf(lo.cg_modules, sizeof lo.cg_modules, "moe_router+attn+moe_preprocess");
    round_trip(&m, &hw, &lo, "--cuda-graph-impl transformer_engine \\\n--cuda-graph-modules attn moe_router "
                             "moe_preprocess \\");
    t = export_megatron(&m, &hw, &lo, err, sizeof err);
    assert_int_equal(export_parse_megatron(t, layout_gpus(&lo), &hw, &m2, &lo2, err, sizeof err), 0);
    assert_int_equal(lo2.cuda_graph, CG_TE);
    assert_string_equal(lo2.cg_modules, "attn,moe_router,moe_preprocess");
    free(t);
    lo.cuda_graph = CG_FULL_ITERATION, lo.cg_modules[0] = 0;
    round_trip(&m, &hw, &lo, "--cuda-graph-impl full_iteration \\\n--no-check-for-nan-in-loss-and-grad");
    lo.cuda_graph = CG_NONE;
    const char *scope = "--num-layers 4 --hidden-size 64 --num-attention-heads 4 --seq-length 128 "
                        "--global-batch-size 8 --vocab-size 256 --cuda-graph-scope full_iteration";
    assert_int_equal(export_parse_megatron(scope, 8, &hw, &m2, &lo2, err, sizeof err), 0);
    assert_int_equal(lo2.cuda_graph, CG_FULL_ITERATION);
    assert_string_equal(lo2.cg_modules, "");
    const char *badg[] = {"--cuda-graph-impl transformer_engine --cuda-graph-modules attn moe_preprocess",
                          "--cuda-graph-impl local --cuda-graph-modules=mamba", "--cuda-graph-impl eager"};
    for (size_t i = 0; i < sizeof badg / sizeof *badg; i++) {
        char a[400];
        snprintf(a, sizeof a, "--num-layers 4 --hidden-size 64 --num-attention-heads 4 --seq-length 128 "
                              "--global-batch-size 8 --vocab-size 256 %s", badg[i]);
        assert_int_equal(export_parse_megatron(a, 8, &hw, &m2, &lo2, err, sizeof err), -1);
        assert_non_null(strstr(err, "--cuda-graph-"));
    }
    /* the standalone-MTP form: m on stage 14 of 16 */
    base(&lo, 64, 1, 16, 1, 1, 8192, OPT_DISTOPT);
    lo.ep = 64, lo.etp = 1, lo.prec = PREC_FP8;
    snprintf(lo.pp_layout, sizeof lo.pp_layout, "Et*3|(tt|)*29m|L");
    round_trip(&m, &hw, &lo, "'Et*3|(tt|)*29m|L'");
    /* --fp8-recipe: written as planned and read back with the same step time; the amax-history
     * flags only for delayed scaling; a recipe Megatron does not have is named */
    round_trip(&m, &hw, &lo, "--fp8-recipe delayed \\\n--fp8-amax-history-len 1024");
    lo.fp8_recipe = FP8R_TENSORWISE;
    round_trip(&m, &hw, &lo, "--fp8-recipe tensorwise \\");
    t = export_megatron(&m, &hw, &lo, err, sizeof err);
    assert_null(strstr(t, "--fp8-amax-history-len"));
    assert_int_equal(export_parse_megatron(t, layout_gpus(&lo), &hw, &m2, &lo2, err, sizeof err), 0);
    assert_int_equal(lo2.fp8_recipe, FP8R_TENSORWISE);
    free(t);
    lo.fp8_recipe = FP8R_BLOCKWISE;
    round_trip(&m, &hw, &lo, "--fp8-recipe blockwise \\");
    {   /* MXFP8 is Blackwell's (compute capability 10.0): round-tripped on a B200 */
        HwProfile b200;
        assert_int_equal(profile_load_builtin("b200", &b200, err, sizeof err), 0);
        lo.fp8_recipe = FP8R_MXFP8;
        round_trip(&m, &b200, &lo, "--fp8-recipe mxfp8 \\");
    }
    lo.fp8_recipe = FP8R_DELAYED;
    /* --moe-router-padding-for-quantization: written when planned and read back (its deprecated
     * --moe-router-padding-for-fp8 too); an fp8 flex plan is written with it, since DeepEP's experts
     * would otherwise pad, which the plan does not price */
    t = export_megatron(&m, &hw, &lo, err, sizeof err);
    assert_null(strstr(t, "--moe-router-padding-for-quantization"));
    free(t);
    lo.moe_router_pad = true;
    round_trip(&m, &hw, &lo, "--moe-router-padding-for-quantization \\");
    t = export_megatron(&m, &hw, &lo, err, sizeof err);
    assert_int_equal(export_parse_megatron(t, layout_gpus(&lo), &hw, &m2, &lo2, err, sizeof err), 0);
    assert_true(lo2.moe_router_pad);
    free(t);
    lo.moe_router_pad = false;
    lo.moe_dispatcher = MOE_DISPATCH_FLEX;
    round_trip(&m, &hw, &lo, "--moe-router-padding-for-quantization \\");
    lo.moe_dispatcher = MOE_DISPATCH_ALLTOALL;
    const char *alias = "--num-layers 4 --hidden-size 64 --num-attention-heads 4 --seq-length 128 "
                        "--global-batch-size 8 --vocab-size 256 --moe-router-padding-for-fp8";
    assert_int_equal(export_parse_megatron(alias, 8, &hw, &m2, &lo2, err, sizeof err), 0);
    assert_true(lo2.moe_router_pad);
    const char *badr = "--num-layers 4 --hidden-size 64 --num-attention-heads 4 --seq-length 128 "
                       "--global-batch-size 8 --vocab-size 256 --fp8-format hybrid --fp8-recipe nvfp4";
    assert_int_equal(export_parse_megatron(badr, 8, &hw, &m2, &lo2, err, sizeof err), -1);
    assert_non_null(strstr(err, "--fp8-recipe: expected delayed, tensorwise, mxfp8 or blockwise, got \"nvfp4\""));
    /* a bad character in the arguments is named */
    const char *bad = "--num-layers 4 --hidden-size 64 --num-attention-heads 4 --seq-length 128 "
                      "--max-position-embeddings 128 --micro-batch-size 1 --global-batch-size 8 "
                      "--pipeline-model-parallel-size 2 --pipeline-model-parallel-layout 'Et|tx|tt|L'\n";
    assert_int_equal(export_parse_megatron(bad, 2, &hw, &m2, &lo2, err, sizeof err), -1);
    assert_non_null(strstr(err, "'x' at position 5"));
}

/* GPT-OSS: its window, sinks and clamped activation go out as Megatron's
 * flags and come back as the same model (round_trip re-predicts it). */
static void test_round_trip_gpt_oss(void **state)
{
    (void)state;
    ModelSpec m;
    HwProfile hw;
    load("gpt-oss-120b", "h100-sxm", &m, &hw);
    Layout lo;
    base(&lo, 8, 1, 1, 1, 1, 64, OPT_DISTOPT);
    lo.ep = 8, lo.etp = 1;
    round_trip(&m, &hw, &lo, "--window-size 127,0 \\");
    const char *flags[] = {"--window-attn-skip-freq 2 \\", "--softmax-type learnable \\", "--quick-geglu \\",
                           "--activation-func-clamp-value 7 \\", "--glu-linear-offset 1.0 \\"};
    char err[256];
    char *t = export_megatron(&m, &hw, &lo, err, sizeof err);
    assert_non_null(t);
    for (size_t i = 0; i < sizeof flags / sizeof *flags; i++)
        if (!strstr(t, flags[i]))
            fail_msg("missing \"%s\"", flags[i]);
    assert_null(strstr(t, "--swiglu"));
    ModelSpec m2;
    Layout lo2;
    assert_int_equal(export_parse_megatron(t, layout_gpus(&lo), &hw, &m2, &lo2, err, sizeof err), 0);
    assert_true(m2.window == 127 && m2.window_skip_freq == 2 && m2.sinks && m2.act_clamp == 7.0 && m2.mlp == MLP_SWIGLU);
    free(t);
    /* what the reader refuses, by flag */
    static const struct { const char *text, *says; } bad[] = {
        {"--num-layers 2 --hidden-size 64 --num-attention-heads 4 --seq-length 64 --global-batch-size 8 --vocab-size 512 --window-size 128,64", "--window-size"},
        {"--num-layers 2 --hidden-size 64 --num-attention-heads 4 --seq-length 64 --global-batch-size 8 --vocab-size 512 --softmax-type off-by-one",
         "--softmax-type"},
        {"--num-layers 2 --hidden-size 64 --num-attention-heads 4 --seq-length 64 --global-batch-size 8 --vocab-size 512 --quick-geglu", "--quick-geglu"},
        {"--num-layers 2 --hidden-size 64 --num-attention-heads 4 --seq-length 64 --global-batch-size 8 --vocab-size 512 --window-attn-skip-freq 2",
         "--window-size"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        err[0] = 0;
        assert_int_equal(export_parse_megatron(bad[i].text, 8, &hw, &m2, &lo2, err, sizeof err), -1);
        if (!strstr(err, bad[i].says))
            fail_msg("\"%s\": error \"%s\" does not name %s", bad[i].text, err, bad[i].says);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip_175b),   cmocka_unit_test(test_round_trip_zero3), cmocka_unit_test(test_dualpipe_refused),
        cmocka_unit_test(test_round_trip_cp_comm),
        cmocka_unit_test(test_round_trip_interleaved_uneven), cmocka_unit_test(test_round_trip_account_for), cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_round_trip_moe_wire),
        cmocka_unit_test(test_torchtitan),        cmocka_unit_test(test_round_trip_fp8_param_gather),
        cmocka_unit_test(test_round_trip_precision_aware_optimizer),
        cmocka_unit_test(test_slurm),
        cmocka_unit_test(test_round_trip_moe),
        cmocka_unit_test(test_round_trip_gpt_oss),
        cmocka_unit_test(test_round_trip_pipeline_layout),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
