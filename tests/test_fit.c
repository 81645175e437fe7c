/* test_fit.c — calib/fit.h: the fit recovers constants from runs generated
 * with a known profile, keeps a constant the runs do not depend on, holds
 * rows out, and refuses what it cannot fit; the parsers of --params and
 * --holdout-where. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "fit.h"
#include "profile.h"

#define assert_near(got, want, tol) do { \
    double g_ = (got), w_ = (want); \
    if (!(fabs(g_ - w_) <= (tol))) { print_error("%s = %.9g, want %.9g\n", #got, g_, w_); fail(); } \
} while (0)

/* One-GPU runs of three shapes at several micro-batches: compute-heavy
 * and launch-heavy rows both, so GEMM efficiency and kernel latency are
 * told apart. time_ms is a placeholder; synth() replaces it. */
static const char *RUNS =
    "layers,hidden,heads,seq,tp,pp,dp,mbs,gbs,time_ms\n"
    "12,768,12,1024,1,1,1,1,8,100\n"
    "12,768,12,1024,1,1,1,2,8,100\n"
    "12,768,12,1024,1,1,1,8,8,100\n"
    "24,1024,16,1024,1,1,1,1,16,100\n"
    "24,1024,16,1024,1,1,1,4,16,100\n"
    "24,1024,16,2048,1,1,1,2,16,100\n"
    "24,2048,16,2048,1,1,1,1,8,100\n"
    "24,2048,16,2048,1,1,1,4,8,100\n"
    "32,4096,32,2048,1,1,1,1,4,100\n"
    "32,4096,32,2048,1,1,1,2,4,100\n";

static void load_base(HwProfile *hw)
{
    char err[256];
    assert_int_equal(profile_load_builtin("a100-80g", hw, err, sizeof err), 0);
}

/* The rows of RUNS with measured times predicted under `truth`. */
static void synth(RunSet *set, const HwProfile *truth)
{
    char err[256];
    memset(set, 0, sizeof *set);
    assert_int_equal(runs_parse_csv(RUNS, "synth.csv", set, err, sizeof err), 0);
    for (int i = 0; i < set->n; i++) {
        double p;
        assert_int_equal(runs_predict(&set->rows[i], truth, "synth.csv", &p, NULL, err, sizeof err), 0);
        set->rows[i].measured_s = p;
    }
}

static void scale_curve(EffCurve *c, double f)
{
    for (int k = 0; k < c->n; k++)
        c->pt[k].eff = fmin(1.0, c->pt[k].eff * f);
}

static void test_recovers_known_constants(void **st)
{
    (void)st;
    HwProfile base, truth;
    load_base(&base);
    truth = base;
    scale_curve(&truth.gemm_eff, 0.8);
    truth.kernel_lat *= 1.5;
    RunSet set;
    synth(&set, &truth);
    FitParamId p[] = {FIT_GEMM_EFF, FIT_KERNEL_LAT};
    FitRequest rq = {.set = &set, .base = &base, .params = p, .nparams = 2};
    FitResult *r = malloc(sizeof *r);
    char err[256];
    assert_int_equal(fit_run(&rq, r, err, sizeof err), 0);
    assert_int_equal(r->n, 2);
    assert_int_equal(r->nfitted, 2);
    assert_int_equal(r->nfit, set.n);
    assert_int_equal(r->nheld, 0);
    assert_true(r->iters > 0);
    assert_int_equal(r->c[0].id, FIT_GEMM_EFF);
    assert_true(r->c[0].fitted);
    assert_near(r->c[0].factor, 0.8, 1e-3);
    assert_near(r->c[1].factor, 1.5, 1.5e-3);
    assert_true(r->c[0].sensitivity >= FIT_SENS_MIN && r->c[1].sensitivity >= FIT_SENS_MIN);
    assert_true(r->c[0].factor_se >= 0 && r->c[0].factor_se < 1e-2);
    /* the fitted profile holds the scaled values; the runs come out right */
    assert_near(fit_param_curve(&r->fitted, FIT_GEMM_EFF)->pt[0].eff, truth.gemm_eff.pt[0].eff, 1e-3);
    assert_near(fit_param_value(&r->fitted, FIT_KERNEL_LAT), truth.kernel_lat, 2e-3 * truth.kernel_lat);
    assert_true(r->fit_before.mape > 5);
    assert_true(r->fit_after.mape < 0.05);
    assert_int_equal(r->fit_after.n, set.n);
    assert_non_null(strstr(r->fitted.desc, "(fitted)"));
    free(r);
    runs_free(&set);
}

static void test_keeps_undetermined_constant(void **st)
{
    (void)st;
    HwProfile base, truth;
    load_base(&base);
    truth = base;
    scale_curve(&truth.gemm_eff, 0.9);
    RunSet set;
    synth(&set, &truth);
    /* one-GPU runs have no collectives: coll_lat cannot move their times */
    FitParamId p[] = {FIT_GEMM_EFF, FIT_COLL_LAT};
    FitRequest rq = {.set = &set, .base = &base, .params = p, .nparams = 2};
    FitResult *r = malloc(sizeof *r);
    char err[256];
    assert_int_equal(fit_run(&rq, r, err, sizeof err), 0);
    assert_int_equal(r->nfitted, 1);
    assert_true(r->c[0].fitted);
    assert_near(r->c[0].factor, 0.9, 1e-3);
    assert_false(r->c[1].fitted);
    assert_int_equal(r->c[1].id, FIT_COLL_LAT);
    assert_string_equal(r->c[1].kept, "these runs do not depend on it");
    assert_near(r->c[1].factor, 1, 0);
    assert_true(fit_param_value(&r->fitted, FIT_COLL_LAT) == base.coll_lat);
    /* only constants the runs do not depend on: an error naming them */
    FitParamId q[] = {FIT_COLL_LAT};
    rq.params = q;
    rq.nparams = 1;
    assert_int_equal(fit_run(&rq, r, err, sizeof err), -1);
    assert_non_null(strstr(err, "none of the constants (coll_lat)"));
    free(r);
    runs_free(&set);
}

static void test_holdout(void **st)
{
    (void)st;
    HwProfile base, truth;
    load_base(&base);
    truth = base;
    scale_curve(&truth.gemm_eff, 0.85);
    RunSet set;
    synth(&set, &truth);
    bool held[16] = {false};
    FitWhere w;
    assert_int_equal(fit_parse_where("hidden>=2048", &w), 0);
    int nheld = 0;
    for (int i = 0; i < set.n; i++)
        nheld += held[i] = fit_where_holds(&w, &set.rows[i]);
    assert_int_equal(nheld, 4);
    FitParamId p[] = {FIT_GEMM_EFF};
    FitRequest rq = {.set = &set, .base = &base, .params = p, .nparams = 1, .held = held};
    FitResult *r = malloc(sizeof *r);
    char err[256];
    assert_int_equal(fit_run(&rq, r, err, sizeof err), 0);
    assert_int_equal(r->nfit, set.n - 4);
    assert_int_equal(r->nheld, 4);
    assert_int_equal(r->held_after.n, 4);
    /* the held-out rows follow the same truth: the fit predicts them too */
    assert_near(r->c[0].factor, 0.85, 1e-3);
    assert_true(r->held_before.mape > 5);
    assert_true(r->held_after.mape < 0.05);
    /* every row held out but one: too few to fit */
    for (int i = 0; i < set.n; i++)
        held[i] = i > 0;
    FitParamId p2[] = {FIT_GEMM_EFF, FIT_KERNEL_LAT};
    rq.params = p2;
    rq.nparams = 2;
    assert_int_equal(fit_run(&rq, r, err, sizeof err), -1);
    assert_string_equal(err, "1 rows left to fit 2 constants; hold out fewer");
    free(r);
    runs_free(&set);
}

static void test_parse_params(void **st)
{
    (void)st;
    FitParamId ids[FIT_PARAM_COUNT];
    int n;
    char err[256];
    assert_int_equal(fit_parse_params(FIT_DEFAULT_PARAMS, ids, &n, err, sizeof err), 0);
    assert_int_equal(n, 4);
    assert_int_equal(ids[0], FIT_KERNEL_LAT);
    assert_int_equal(ids[3], FIT_MEM_EFF);
    assert_string_equal(fit_param(ids[1])->name, "gemm_eff");
    assert_int_equal(fit_param(FIT_DP_OVERLAP)->kind, FIT_FRACTION);
    assert_int_equal(fit_parse_params("warp_drive", ids, &n, err, sizeof err), -1);
    assert_string_equal(err, "unknown constant \"warp_drive\" (one of kernel_lat, coll_lat, coll_eff, gemm_eff, "
                             "attn_eff, mem_eff, tp_overlap, dp_overlap)");
    assert_int_equal(fit_parse_params("gemm_eff,gemm_eff", ids, &n, err, sizeof err), -1);
    assert_string_equal(err, "\"gemm_eff\" is named twice");
    assert_int_equal(fit_parse_params(",", ids, &n, err, sizeof err), -1);
    HwProfile base;
    load_base(&base);
    FitParamId k[] = {FIT_GEMM_EFF, FIT_KERNEL_LAT};
    assert_int_equal(fit_check_params(&base, k, 2, err, sizeof err), 0);
    base.kernel_lat = 0;
    assert_int_equal(fit_check_params(&base, k, 2, err, sizeof err), -1);
    assert_non_null(strstr(err, "kernel_lat is 0 in profile a100-80g"));
}

static void test_parse_where(void **st)
{
    (void)st;
    FitWhere w;
    assert_int_equal(fit_parse_where("gpus>=256", &w), 0);
    assert_string_equal(w.op, ">=");
    assert_near(w.value, 256, 0);
    RunRow r;
    memset(&r, 0, sizeof r);
    r.gpus = 256;
    assert_true(fit_where_holds(&w, &r));
    r.gpus = 255;
    assert_false(fit_where_holds(&w, &r));
    assert_int_equal(fit_parse_where("seq=2048", &w), 0);
    r.model.s = 2048;
    assert_true(fit_where_holds(&w, &r));
    assert_int_equal(fit_parse_where("tp!=1", &w), 0);
    r.layout.tp = 1;
    assert_false(fit_where_holds(&w, &r));
    assert_int_equal(fit_parse_where("colour>3", &w), -1);
    assert_int_equal(fit_parse_where("gpus>", &w), -1);
    assert_int_equal(fit_parse_where(">=3", &w), -1);
    assert_int_equal(fit_parse_where("gpus", &w), -1);
    assert_int_equal(fit_parse_where("gpus>=2x", &w), -1);
}

static void test_holdout_random(void **st)
{
    (void)st;
    bool a[200], b[200];
    fit_holdout_random(200, 0.25, 7, a);
    fit_holdout_random(200, 0.25, 7, b);
    int n = 0;
    for (int i = 0; i < 200; i++) {
        assert_int_equal(a[i], b[i]);
        n += a[i];
    }
    assert_true(n > 25 && n < 75);   // about 50
    fit_holdout_random(200, 0, 7, a);
    for (int i = 0; i < 200; i++)
        assert_false(a[i]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_recovers_known_constants),
        cmocka_unit_test(test_keeps_undetermined_constant),
        cmocka_unit_test(test_holdout),
        cmocka_unit_test(test_parse_params),
        cmocka_unit_test(test_parse_where),
        cmocka_unit_test(test_holdout_random),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
