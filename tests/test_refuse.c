/* test_refuse.c — the plan the planner recommends is the plan the target's
 * executor runs. Under --target ultraplan-cuda every top plan of a tiny
 * Mixtral-like and a tiny DeepSeek-MoE-like model passes refuse_cuda (the
 * function cuexec.c's set-up calls), and the layouts the CPU target offers
 * but the CUDA executor refuses (tp 2 with experts, ZeRO-2/3 with experts)
 * are absent; a DeepSeek-V3-like model (MLA, MTP) has no CUDA plan and the
 * planner says which field; under --target ultraplan every plan passes
 * refuse_cpu (exec_init's) and a dropout model is refused by name. The
 * rules themselves, one by one, on hand-made layouts. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "planner.h"
#include "refuse.h"
#include "scenario.h"

/* The tiny models of tests/mpi_plans.sh, as flag/value pairs (NULL ends). */
#define LLAMA "layers", "4", "hidden", "256", "heads", "4", "kv-heads", "2", "vocab", "256", "mlp", "swiglu", \
              "norm", "rmsnorm", "pos", "rope", "untied", "-", "gpu", "a100-80g", "seq", "128", "gbs", "8"
#define MIXTRAL LLAMA, "experts", "8", "topk", "2", "moe-ffn", "128"
/* DeepSeek-MoE's shape without MLA/MTP: a shared expert, the first layer dense */
#define DSMOE MIXTRAL, "shared-ffn", "128", "moe-first-dense", "1"
#define MLA_MTP "kv-heads", "4", "attn", "mla", "q-lora-rank", "64", "kv-lora-rank", "32", "qk-nope-dim", "32", \
                "qk-rope-dim", "16", "v-head-dim", "32", "mtp-layers", "1"

static void resolve(Scenario *sc, const char *const *kv)
{
    char err[400];
    scenario_init(sc);
    for (int i = 0; kv[i]; i += 2) {
        bool neg = false;
        const Knob *k = knob_by_flag(kv[i], &neg);
        if (!k && !strcmp(kv[i], "gpu")) {
            sc->gpu_name = kv[i + 1];
            continue;
        }
        if (!k)
            fail_msg("no flag --%s", kv[i]);
        if (scenario_set_knob(sc, k, neg, kv[i + 1], err, sizeof err) != 0)
            fail_msg("--%s %s: %s", kv[i], kv[i + 1], err);
    }
    if (scenario_finish(sc, false, err, sizeof err) != 0)
        fail_msg("scenario: %s", err);
}

static void plan(const Scenario *sc, Target t, int gpus, int top, PlanResult *res)
{
    PlanRequest r;
    planner_request_default(&r);
    r.gpus = gpus;
    r.fixed = sc->fixed;
    r.base = sc->layout;
    r.base.target = t;
    r.top_k = top;
    r.mem_margin_bytes = sc->mem_margin_bytes;
    char err[512];
    if (planner_search(&sc->model, &sc->hw, &sc->opts, &r, res, err, sizeof err) != 0)
        fail_msg("planner: %s", err);
}

static void describe(const Layout *lo, char *buf, int len)
{
    snprintf(buf, len, "tp %d pp %d dp %d cp %d ep %d etp %d vp %d mbs %d %s", lo->tp, lo->pp, lo->dp, lo->cp,
             lo->ep, lo->etp, lo->vp, lo->mbs, layout_opt_name(lo->opt));
}

/* Every plan passes the target's executor check; returns how many plans. */
static int all_pass(const Scenario *sc, const PlanResult *res, Target t)
{
    for (int i = 0; i < res->n; i++) {
        const Layout *lo = &res->plans[i].layout;
        char err[400], d[160];
        int rc = t == TARGET_ULTRAPLAN_CUDA ? refuse_cuda(&sc->model, lo, err, sizeof err)
                                            : refuse_cpu(&sc->model, lo, err, sizeof err);
        describe(lo, d, sizeof d);
        if (rc != 0 || refuse_overflow(&sc->model, lo, err, sizeof err) != 0)
            fail_msg("%s plan #%d (%s) is refused by its executor: %s", layout_target_name(t), i + 1, d, err);
        assert_int_equal(lo->target, t);
    }
    return res->n;
}

static bool same_layout(const Layout *a, const Layout *b)
{
    return a->tp == b->tp && a->pp == b->pp && a->dp == b->dp && a->cp == b->cp && a->ep == b->ep &&
           a->etp == b->etp && a->vp == b->vp && a->mbs == b->mbs && a->opt == b->opt && a->prec == b->prec;
}

/* The CPU target's plans the CUDA executor refuses: there are some (with
 * tp 2 or ZeRO-2/3 the CPU backend runs experts), and none of them is among
 * the CUDA target's plans. */
static void cpu_only_absent(const Scenario *sc, int gpus)
{
    PlanResult cpu = {0}, cu = {0};
    plan(sc, TARGET_ULTRAPLAN, gpus, 64, &cpu);
    plan(sc, TARGET_ULTRAPLAN_CUDA, gpus, 64, &cu);
    assert_true(all_pass(sc, &cpu, TARGET_ULTRAPLAN) > 0);
    assert_true(all_pass(sc, &cu, TARGET_ULTRAPLAN_CUDA) > 0);
    int refused = 0;
    for (int i = 0; i < cpu.n; i++) {
        char err[400];
        const Layout *lo = &cpu.plans[i].layout;
        if (refuse_cuda(&sc->model, lo, err, sizeof err) == 0)
            continue;
        refused++;
        for (int j = 0; j < cu.n; j++)
            assert_false(same_layout(lo, &cu.plans[j].layout));
    }
    assert_true(refused > 0);
    planner_result_free(&cpu);
    planner_result_free(&cu);
}

static void test_cuda_target_mixtral(void **unused)
{
    (void)unused;
    static const char *const kv[] = {MIXTRAL, NULL};
    Scenario *sc = malloc(sizeof *sc);
    resolve(sc, kv);
    PlanResult res = {0};
    plan(sc, TARGET_ULTRAPLAN_CUDA, 4, 10, &res);
    assert_true(all_pass(sc, &res, TARGET_ULTRAPLAN_CUDA) > 0);
    for (int i = 0; i < res.n; i++) {   /* what cuexec.h says its MoE layer runs */
        const Layout *lo = &res.plans[i].layout;
        assert_true(lo->tp == 1 && lo->cp == 1 && layout_etp(lo) == 1);
        assert_true(lo->opt != OPT_ZERO2 && lo->opt != OPT_ZERO3);
    }
    planner_result_free(&res);
    cpu_only_absent(sc, 4);
    free(sc);
}

static void test_cuda_target_deepseek_moe(void **unused)
{
    (void)unused;
    static const char *const kv[] = {DSMOE, NULL};
    Scenario *sc = malloc(sizeof *sc);
    resolve(sc, kv);
    cpu_only_absent(sc, 8);
    free(sc);
}

/* A --tp the CPU executor runs with experts and the CUDA one refuses: the
 * CUDA target has no plan, and says the fixed knob is the cause. */
static void test_cuda_target_fixed_tp(void **unused)
{
    (void)unused;
    static const char *const kv[] = {MIXTRAL, "tp", "2", NULL};
    Scenario *sc = malloc(sizeof *sc);
    resolve(sc, kv);
    PlanResult cpu = {0}, cu = {0};
    plan(sc, TARGET_ULTRAPLAN, 4, 5, &cpu);
    plan(sc, TARGET_ULTRAPLAN_CUDA, 4, 5, &cu);
    assert_true(all_pass(sc, &cpu, TARGET_ULTRAPLAN) > 0);
    assert_int_equal(cu.n, 0);
    assert_non_null(strstr(cu.infeasible, "--tp 2"));
    planner_result_free(&cpu);
    planner_result_free(&cu);
    free(sc);
}

/* DeepSeek-V3's shape in small: MLA and one MTP module. The CPU executor
 * runs it; the CUDA one runs neither, and the planner names both fields. */
static void test_cuda_target_mla_mtp(void **unused)
{
    (void)unused;
    static const char *const kv[] = {DSMOE, MLA_MTP, NULL};
    Scenario *sc = malloc(sizeof *sc);
    resolve(sc, kv);
    PlanResult cpu = {0}, cu = {0};
    plan(sc, TARGET_ULTRAPLAN, 4, 10, &cpu);
    plan(sc, TARGET_ULTRAPLAN_CUDA, 4, 10, &cu);
    assert_true(all_pass(sc, &cpu, TARGET_ULTRAPLAN) > 0);
    assert_int_equal(cu.n, 0);
    assert_true(cu.fixed_fault);
    assert_non_null(strstr(cu.infeasible, "CUDA executor"));
    assert_non_null(strstr(cu.infeasible, "mtp_layers 1"));
    assert_non_null(strstr(cu.infeasible, "attention mla"));
    planner_result_free(&cpu);
    planner_result_free(&cu);
    free(sc);
}

/* A dense model with dropout: neither executor has dropout, so neither
 * target plans it; Megatron-LM does. */
static void test_dropout_refused(void **unused)
{
    (void)unused;
    static const char *const kv[] = {LLAMA, "dropout", "on", NULL};
    Scenario *sc = malloc(sizeof *sc);
    resolve(sc, kv);
    assert_true(sc->model.dropout);
    for (Target t = TARGET_ULTRAPLAN; t <= TARGET_ULTRAPLAN_CUDA; t++) {
        PlanResult res = {0};
        plan(sc, t, 2, 5, &res);
        assert_int_equal(res.n, 0);
        assert_non_null(strstr(res.infeasible, "--no-dropout"));
        planner_result_free(&res);
    }
    PlanResult mega = {0};
    plan(sc, TARGET_MEGATRON, 2, 5, &mega);
    assert_true(mega.n > 0);
    planner_result_free(&mega);
    free(sc);
}

/* The rules one by one, on a checked layout changed by hand. */
static void test_rules(void **unused)
{
    (void)unused;
    static const char *const kv[] = {MIXTRAL, NULL};
    Scenario *sc = malloc(sizeof *sc);
    resolve(sc, kv);
    const ModelSpec *m = &sc->model;
    Layout lo = sc->layout;
    lo.tp = lo.cp = lo.pp = lo.vp = lo.ep = lo.mbs = 1, lo.etp = 0, lo.dp = 4, lo.sp = false;
    lo.opt = OPT_DISTOPT;
    lo.layers[0] = m->L;
    char err[400];
    assert_int_equal(refuse_cuda(m, &lo, err, sizeof err), 0);
    assert_int_equal(refuse_cpu(m, &lo, err, sizeof err), 0);
    Layout t = lo;
    t.tp = 2, t.dp = 2, t.sp = true;   /* MoE under tp: CPU with SP, CUDA not at all */
    assert_int_equal(refuse_cpu(m, &t, err, sizeof err), 0);
    assert_int_equal(refuse_cuda(m, &t, err, sizeof err), -1);
    assert_non_null(strstr(err, "layout.tp 2"));
    t.sp = false;
    assert_int_equal(refuse_cpu(m, &t, err, sizeof err), -1);
    assert_non_null(strstr(err, "sequence parallel"));
    /* fp8: the CUDA executor runs current (per-tensor) scaling only */
    t = lo, t.prec = PREC_FP8, t.fp8_recipe = FP8R_DELAYED;
    assert_int_equal(refuse_cuda(m, &t, err, sizeof err), -1);
    assert_non_null(strstr(err, "--fp8-recipe tensorwise"));
    t.fp8_recipe = FP8R_MXFP8;
    assert_int_equal(refuse_cuda(m, &t, err, sizeof err), -1);
    assert_non_null(strstr(err, "mxfp8"));
    t.fp8_recipe = FP8R_TENSORWISE;
    assert_int_equal(refuse_cuda(m, &t, err, sizeof err), 0);
    /* EP communication: the CUDA layer runs alltoall, one micro-batch at a time; priced otherwise, the
     * plan is refused there by name (at ep 1 there is nothing to dispatch); the CPU backend takes both */
    t = lo, t.ep = 2, t.moe_dispatcher = MOE_DISPATCH_FLEX;
    assert_int_equal(refuse_cuda(m, &t, err, sizeof err), -1);
    assert_non_null(strstr(err, "--moe-token-dispatcher-type alltoall"));
    assert_int_equal(refuse_cpu(m, &t, err, sizeof err), 0);
    t.moe_dispatcher = MOE_DISPATCH_ALLGATHER;
    assert_int_equal(refuse_cuda(m, &t, err, sizeof err), -1);
    t.ep = 1;
    assert_int_equal(refuse_cuda(m, &t, err, sizeof err), 0);
    t = lo, t.ep = 2, t.moe_a2a_overlap = true;
    char why[200];
    assert_int_equal(layout_moe_a2a_check(&t, why, sizeof why), 0);   // the overlap applies here
    assert_int_equal(refuse_cuda(m, &t, err, sizeof err), -1);
    assert_non_null(strstr(err, "--no-overlap-moe-expert-parallel-comm"));
    assert_int_equal(refuse_cpu(m, &t, err, sizeof err), 0);
    t.moe_a2a_overlap = false;
    assert_int_equal(refuse_cuda(m, &t, err, sizeof err), 0);
    /* an MXFP8 wire: neither executor quantizes the all-to-all (ep 1 here, so the CUDA dispatcher rule
     * does not speak first) */
    t = lo, t.moe_dispatch_wire = MOE_WIRE_MXFP8;
    assert_int_equal(refuse_cpu(m, &t, err, sizeof err), -1);
    assert_non_null(strstr(err, "--moe-dispatch-fwd-dtype bf16 --moe-combine-bwd-dtype bf16"));
    assert_int_equal(refuse_cuda(m, &t, err, sizeof err), -1);
    t = lo, t.moe_combine_bwd_wire = MOE_WIRE_MXFP8;
    assert_int_equal(refuse_cpu(m, &t, err, sizeof err), -1);
    /* DualPipe: both executors run 1F1B */
    t = lo, t.pp_sched = PP_SCHED_DUALPIPE;
    assert_int_equal(refuse_cpu(m, &t, err, sizeof err), -1);
    assert_non_null(strstr(err, "--pp-schedule 1f1b"));
    assert_int_equal(refuse_cuda(m, &t, err, sizeof err), -1);
    assert_non_null(strstr(err, "layout.pp_schedule dualpipe"));
    /* CUDA graphs: priced launches neither executor captures; the CPU backend checks the math only */
    t = lo, t.cuda_graph = CG_LOCAL;
    assert_int_equal(refuse_cuda(m, &t, err, sizeof err), -1);
    assert_non_null(strstr(err, "--cuda-graph-impl none"));
    assert_int_equal(refuse_cpu(m, &t, err, sizeof err), 0);
    t = lo, t.opt = OPT_ZERO3;
    assert_int_equal(refuse_cpu(m, &t, err, sizeof err), 0);
    assert_int_equal(refuse_cuda(m, &t, err, sizeof err), -1);
    assert_non_null(strstr(err, "zero3"));
    t = lo, t.ep = 8;                  /* 8 experts over dp 4: the CUDA ep ranks are dp ranks */
    assert_int_equal(refuse_cuda(m, &t, err, sizeof err), -1);
    assert_non_null(strstr(err, "layout.ep 8"));
    t = lo, t.cp = 2, t.dp = 2, t.cp_comm = CP_COMM_ALLGATHER;
    assert_int_equal(refuse_cpu(m, &t, err, sizeof err), -1);
    assert_non_null(strstr(err, "--cp-comm ring"));
    /* selective layers priced as torchtitan's per-op policy: neither executor runs it */
    {   /* (the model's dense twin: an MoE layer keeps Megatron's pricing under the op stack) */
        ModelSpec d = *m;
        d.experts = d.topk = 0;
        t = lo, t.sel_ac = SEL_AC_OP;
        layout_set_recompute(&t, RECOMPUTE_SELECTIVE);
        assert_true(layout_sel_op(&d, &t));
        assert_int_equal(refuse_cpu(&d, &t, err, sizeof err), -1);
        assert_non_null(strstr(err, "torchtitan's per-op policy"));
        assert_int_equal(refuse_cuda(&d, &t, err, sizeof err), -1);
        assert_non_null(strstr(err, "recompute the attention core"));
        t.sel_ac = SEL_AC_CORE_ATTN;
        assert_int_equal(refuse_cpu(&d, &t, err, sizeof err), 0);
        t.sel_ac = SEL_AC_OP;
        layout_set_recompute(&t, RECOMPUTE_FULL);   /* the op stack without selective layers runs */
        assert_int_equal(refuse_cpu(&d, &t, err, sizeof err), 0);
    }
    t = lo, t.fp8_dpa = true;   /* the executors' attention core is 16-bit */
    assert_int_equal(refuse_cpu(m, &t, err, sizeof err), -1);
    assert_non_null(strstr(err, "--no-fp8-dot-product-attention"));
    assert_int_equal(refuse_cuda(m, &t, err, sizeof err), -1);
    t = lo, t.fp8_param_gather = true;   /* the executors keep 16-bit weights */
    assert_int_equal(refuse_cpu(m, &t, err, sizeof err), -1);
    assert_non_null(strstr(err, "--no-fp8-param-gather"));
    t = lo, t.precision_aware_opt = true;   /* the executors' Adam keeps an fp32 master and fp32 moments */
    assert_int_equal(refuse_cpu(m, &t, err, sizeof err), -1);
    assert_non_null(strstr(err, "--no-use-precision-aware-optimizer"));
    assert_int_equal(refuse_cuda(m, &t, err, sizeof err), -1);
    t = lo, t.pp = 2, t.dp = 2, t.vp = 2, t.layers[0] = 3, t.layers[1] = 1;   /* a chunk with no layer */
    assert_int_equal(refuse_cuda(m, &t, err, sizeof err), -1);
    assert_non_null(strstr(err, "stage 1 has 1 layers"));
    t.layers[0] = t.layers[1] = 0;     /* not split yet: the planner asks before it splits */
    assert_int_equal(refuse_cuda(m, &t, err, sizeof err), 0);
    /* the sizes that would overflow the step's int products */
    t = lo, t.gbs = 1 << 24, t.mbs = 1 << 16, t.dp = 1;   /* 2^24 sequences of 128 tokens on one rank */
    assert_int_equal(refuse_overflow(m, &t, err, sizeof err), -1);
    assert_non_null(strstr(err, "tokens per rank and step"));
    /* head sizes the CUDA attention kernel takes (kernels/cuda/attention.cu) */
    assert_true(refuse_cuda_head_size(64) && refuse_cuda_head_size(128) && !refuse_cuda_head_size(80));
    assert_int_equal(refuse_target(m, &t, TARGET_MEGATRON, err, sizeof err), 0);
    free(sc);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cuda_target_mixtral),
        cmocka_unit_test(test_cuda_target_deepseek_moe),
        cmocka_unit_test(test_cuda_target_fixed_tp),
        cmocka_unit_test(test_cuda_target_mla_mtp),
        cmocka_unit_test(test_dropout_refused),
        cmocka_unit_test(test_rules),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
