/* test_cuda_exec_errors.c — what the CUDA executor refuses, and that it
 * says so by the plan's field, before touching MPI or a GPU (so it runs
 * everywhere): a cp whose 2·cp chunks don't divide the sequence, ZeRO-2/3
 * with a pipeline (the planner emits them with pp 1 only), interleaving
 * without a pipeline, a chunk without layers, dropout, sequence parallel
 * when tp doesn't divide mbs·seq/cp. A plan with sp, cp and ZeRO-3 is
 * refused for its sequence split, not for cp or the optimizer. MLA and MTP
 * are refused by name; so are the mixture-of-experts layouts the CUDA MoE
 * layer doesn't run yet (tp, cp or etp > 1, a capacity factor, ZeRO-2/3,
 * biases, ep not dividing dp, group-limited routing) and ep > 1 with a
 * dense model. The rules are refuse_cuda's (executor/refuse.c), which the
 * planner asks under --target ultraplan-cuda (tests/test_refuse.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <string.h>

#include "cuexec.h"

static void refused(void (*tweak)(ModelSpec *, Layout *), const char *needle)
{
    ModelSpec m;
    memset(&m, 0, sizeof m);
    snprintf(m.name, sizeof m.name, "tiny");
    m.L = 4, m.h = 64, m.a = 2, m.g = 2, m.f = 256, m.s = 64, m.vocab = 256, m.vocab_div = 1;
    Layout lo;
    layout_default(&lo);
    lo.mbs = 1, lo.gbs = 8;
    char err[512];
    assert_int_equal(layout_check(&lo, &m, NULL, err, sizeof err), 0);
    tweak(&m, &lo);
    TrainOpts o;
    exec_default_opts(&o);
    CuExec e;
    err[0] = 0;
    assert_int_equal(cuexec_init(&e, &m, &lo, &o, "/nonexistent", err, sizeof err), -1);
    if (!strstr(err, needle))
        fail_msg("expected \"%s\" in: %s", needle, err);
}

static void sp_rows(ModelSpec *m, Layout *lo) { m->s = 63, lo->tp = 2, lo->sp = true; }
static void sp_cp(ModelSpec *m, Layout *lo) { m->s = 68, lo->tp = 4, lo->sp = true, lo->cp = 2, lo->opt = OPT_ZERO3; }
static void cp(ModelSpec *m, Layout *lo) { (void)m; lo->cp = 3; }
static void zero2(ModelSpec *m, Layout *lo) { (void)m; lo->opt = OPT_ZERO2, lo->pp = 2, lo->layers[0] = lo->layers[1] = 2; }
static void vp1(ModelSpec *m, Layout *lo) { (void)m; lo->vp = 2; }
static void chunk(ModelSpec *m, Layout *lo) { (void)m; lo->pp = 2, lo->vp = 2, lo->layers[0] = 3, lo->layers[1] = 1; }
static void dropout(ModelSpec *m, Layout *lo) { (void)lo; m->dropout = true; }
static void batch(ModelSpec *m, Layout *lo) { (void)m; lo->dp = 3; }
static void moe(ModelSpec *m, Layout *lo) { (void)lo; m->experts = 8, m->topk = 2, m->moe_ffn = 128, m->moe_freq = 1; }
static void moe_tp(ModelSpec *m, Layout *lo) { moe(m, lo); lo->tp = 2, lo->sp = true; }
static void moe_cap(ModelSpec *m, Layout *lo) { moe(m, lo); m->capacity_factor = 1.25; }
static void moe_z3(ModelSpec *m, Layout *lo) { moe(m, lo); lo->opt = OPT_ZERO3, lo->dp = 2; }
static void moe_bias(ModelSpec *m, Layout *lo) { moe(m, lo); m->bias = true; }
static void moe_ep(ModelSpec *m, Layout *lo) { moe(m, lo); lo->ep = 2, lo->dp = 1; }
static void moe_groups(ModelSpec *m, Layout *lo) { moe(m, lo); m->router_groups = 4, m->router_group_topk = 1; }
static void dense_ep(ModelSpec *m, Layout *lo) { (void)m; lo->ep = 2, lo->dp = 2; }
static void mla(ModelSpec *m, Layout *lo) { (void)lo; m->attn = ATTN_MLA; }
static void mtp(ModelSpec *m, Layout *lo) { (void)lo; m->mtp_layers = 1; }
static void window(ModelSpec *m, Layout *lo) { (void)lo; m->window = 16, m->window_skip_freq = 2; }
static void sinks(ModelSpec *m, Layout *lo) { (void)lo; m->sinks = true; }
static void clamp(ModelSpec *m, Layout *lo) { (void)lo; m->act_clamp = 7; }

static void test_refusals(void **state)
{
    (void)state;
    refused(sp_rows, "tp 2 to divide mbs*seq/cp = 63");
    refused(sp_cp, "tp 4 to divide mbs*seq/cp = 34");
    refused(cp, "context parallel needs seq 64 to be a multiple of 2*cp = 6");   /* refuse.c's words, as the CPU's */
    refused(zero2, "layout.optimizer zero2 needs layout.pp 1 (got 2)");
    refused(vp1, "\"vp\"");
    refused(chunk, "stage 1 has 1 layers");
    refused(dropout, "dropout");
    refused(batch, "not a multiple of dp 3");
    refused(moe_tp, "layout.tp 2, cp 1, etp 2 with a mixture-of-experts model");
    refused(moe_cap, "model.capacity_factor 1.25");
    refused(moe_z3, "layout.optimizer zero3 with a mixture-of-experts model");
    refused(moe_bias, "\"bias\": true");
    refused(moe_ep, "layout.ep 2 must divide the 8 experts and dp 1");
    refused(moe_groups, "model.moe_router_groups 4 (--moe-router-num-groups");
    refused(dense_ep, "layout.ep 2 with a dense model");
    refused(mla, "attention mla");
    refused(mtp, "mtp_layers 1");
    refused(window, "window 16, attn_sinks false");
    refused(sinks, "attn_sinks true");
    refused(clamp, "act_clamp 7:");
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_refusals)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
