/* test_cuda_exec_errors.c — what the CUDA executor refuses, and that it
 * says so by the plan's field, before touching MPI or a GPU (so it runs
 * everywhere): cp > 1, ZeRO-2/3, interleaving without a pipeline, a chunk
 * without layers, dropout, sequence parallel when tp doesn't divide
 * mbs·seq. Sequence parallel itself runs: a plan with sp and ZeRO-2 is
 * refused for its optimizer, not for sp. */
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
static void sp_zero2(ModelSpec *m, Layout *lo) { (void)m; lo->tp = 2, lo->sp = true, lo->opt = OPT_ZERO2; }
static void cp(ModelSpec *m, Layout *lo) { (void)m; lo->cp = 2; }
static void zero2(ModelSpec *m, Layout *lo) { (void)m; lo->opt = OPT_ZERO2; }
static void vp1(ModelSpec *m, Layout *lo) { (void)m; lo->vp = 2; }
static void chunk(ModelSpec *m, Layout *lo) { (void)m; lo->pp = 2, lo->vp = 2, lo->layers[0] = 3, lo->layers[1] = 1; }
static void dropout(ModelSpec *m, Layout *lo) { (void)lo; m->dropout = true; }
static void batch(ModelSpec *m, Layout *lo) { (void)m; lo->dp = 3; }

static void test_refusals(void **state)
{
    (void)state;
    refused(sp_rows, "tp 2 to divide mbs*seq = 63");
    refused(sp_zero2, "\"optimizer\"");
    refused(cp, "\"cp\"");
    refused(zero2, "\"optimizer\"");
    refused(vp1, "\"vp\"");
    refused(chunk, "stage 1 has 1 layers");
    refused(dropout, "dropout");
    refused(batch, "not a multiple of dp 3");
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_refusals)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
