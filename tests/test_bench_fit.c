/* test_bench_fit.c — calib/bench_fit.h, the all-to-all fit of calibrate:
 * recovers a2a_lat and a2a_eff from timings made with the model's own
 * curve (one node, and a group spanning nodes), stays close under noise,
 * keeps to its bounds when the timings are faster than the links allow,
 * and refuses what it cannot fit; the fp8 peak fit, worked by hand on a
 * flat curve and recovered from rates made with the model's own reading of
 * the h200 curve. No MPI, no GPU: synthetic timings. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "bench_fit.h"
#include "profile.h"
#include "timing.h"

#define assert_near(got, want, tol) do { \
    double g_ = (got), w_ = (want); \
    if (!(fabs(g_ - w_) <= (tol))) { print_error("%s = %.9g, want %.9g\n", #got, g_, w_); fail(); } \
} while (0)

enum { NPT = 8 };

/* h100-sxm's links; the a2a constants cleared (the fit must not read them) */
static void load(HwProfile *hw)
{
    char err[256];
    assert_int_equal(profile_load_builtin("h100-sxm", hw, err, sizeof err), 0);
    hw->a2a_lat = hw->a2a_eff = 0;
}

/* 64 KiB .. 1 GiB per rank by 4x, as bench_cuda_run.c sweeps */
static void sizes(double *bytes)
{
    for (int i = 0; i < NPT; i++)
        bytes[i] = (double)(1u << 16) * pow(4, i);
}

/* what time_coll_alltoall says at (lat, eff), times (1 + noise[i]) */
static void synth(const HwProfile *hw, double lat, double eff, int n, int k, const double *bytes, const double *noise,
                  double *secs)
{
    HwProfile v = *hw;
    v.a2a_lat = lat;
    v.a2a_eff = eff;
    for (int i = 0; i < NPT; i++)
        secs[i] = time_coll_alltoall(&v, bytes[i], n, k) * (1 + (noise ? noise[i] : 0));
}

static void recovers_one_node(void **st)
{
    (void)st;
    HwProfile hw;
    load(&hw);
    double b[NPT], t[NPT];
    sizes(b);
    synth(&hw, 25e-6, 0.82, 8, 8, b, NULL, t);
    BenchA2aFit f;
    char err[256];
    assert_int_equal(bench_fit_a2a(&hw, 8, 8, b, t, NPT, &f, err, sizeof err), 0);
    assert_near(f.lat, 25e-6, 1e-10);
    assert_near(f.eff, 0.82, 1e-9);
    assert_true(f.err < 1e-9);
    assert_int_equal(f.capped, 0);
    /* what the model then prices matches what was "measured" */
    hw.a2a_lat = f.lat, hw.a2a_eff = f.eff;
    assert_near(time_coll_alltoall(&hw, b[3], 8, 8), t[3], 1e-12);
}

static void recovers_across_nodes(void **st)
{
    (void)st;
    HwProfile hw;
    load(&hw);
    double b[NPT], t[NPT];
    sizes(b);
    /* 64 ranks, 8 a node: the NIC sets the pace, alpha is inter.lat */
    synth(&hw, 40e-6, 0.95, 64, 8, b, NULL, t);
    BenchA2aFit f;
    char err[256];
    assert_int_equal(bench_fit_a2a(&hw, 64, 8, b, t, NPT, &f, err, sizeof err), 0);
    assert_near(f.lat, 40e-6, 1e-10);
    assert_near(f.eff, 0.95, 1e-9);
}

static void close_under_noise(void **st)
{
    (void)st;
    HwProfile hw;
    load(&hw);
    double b[NPT], t[NPT], noise[NPT] = {0.03, -0.02, 0.025, -0.03, 0.01, -0.015, 0.02, -0.01};
    sizes(b);
    synth(&hw, 25e-6, 0.7, 8, 8, b, noise, t);
    BenchA2aFit f;
    char err[256];
    assert_int_equal(bench_fit_a2a(&hw, 8, 8, b, t, NPT, &f, err, sizeof err), 0);
    assert_true(fabs(f.lat / 25e-6 - 1) < 0.1);
    assert_true(fabs(f.eff / 0.7 - 1) < 0.05);
    assert_true(f.err > 0 && f.err < 0.03);
}

static void bounds(void **st)
{
    (void)st;
    HwProfile hw;
    load(&hw);
    double b[NPT], t[NPT];
    sizes(b);
    /* faster than the links at every size: eff capped at 1, lat positive */
    synth(&hw, 10e-6, 1.0, 8, 8, b, NULL, t);
    for (int i = 0; i < NPT; i++)
        t[i] *= 0.5;
    BenchA2aFit f;
    char err[256];
    assert_int_equal(bench_fit_a2a(&hw, 8, 8, b, t, NPT, &f, err, sizeof err), 0);
    assert_near(f.eff, 1.0, 0);
    assert_true(f.lat >= BENCH_A2A_LAT_MIN);
    assert_int_equal(f.capped, 1);
    /* no fixed cost beyond alpha (timings below alpha-beta at small sizes):
     * lat floored, still positive, so the model does not fall back to coll_lat */
    synth(&hw, BENCH_A2A_LAT_MIN, 0.5, 8, 8, b, NULL, t);
    t[0] *= 0.6, t[1] *= 0.7;
    assert_int_equal(bench_fit_a2a(&hw, 8, 8, b, t, NPT, &f, err, sizeof err), 0);
    assert_near(f.lat, BENCH_A2A_LAT_MIN, 0);
    assert_true(f.eff > 0 && f.eff <= 1);
    assert_int_equal(f.capped, 1);
}

static void refuses(void **st)
{
    (void)st;
    HwProfile hw;
    load(&hw);
    double b[NPT], t[NPT];
    sizes(b);
    synth(&hw, 25e-6, 0.8, 8, 8, b, NULL, t);
    BenchA2aFit f = {0};
    char err[256] = "";
    assert_int_equal(bench_fit_a2a(&hw, 8, 8, b, t, 1, &f, err, sizeof err), -1);
    assert_non_null(strstr(err, "2 to"));
    assert_int_equal(bench_fit_a2a(&hw, 1, 1, b, t, NPT, &f, err, sizeof err), -1);
    t[2] = 0;
    assert_int_equal(bench_fit_a2a(&hw, 8, 8, b, t, NPT, &f, err, sizeof err), -1);
    assert_non_null(strstr(err, "point 2"));
    t[2] = NAN;
    assert_int_equal(bench_fit_a2a(&hw, 8, 8, b, t, NPT, &f, err, sizeof err), -1);
    double same[NPT];
    for (int i = 0; i < NPT; i++)
        same[i] = b[4], t[i] = 1e-3;
    assert_int_equal(bench_fit_a2a(&hw, 8, 8, same, t, NPT, &f, err, sizeof err), -1);
    assert_non_null(strstr(err, "do not differ"));
}

/* fp8 peak: a flat curve (eff 0.5 everywhere) and rates of 400 and 900
 * TFLOP/s: P = geometric mean 600 / 0.5 = 1200 TFLOP/s, each point off by
 * ln 1.5 */
static void fp8_flat(void **st)
{
    (void)st;
    HwProfile hw;
    memset(&hw, 0, sizeof hw);
    hw.peak[PREC_BF16] = 989e12;
    hw.gemm_eff.n = 1;
    hw.gemm_eff.pt[0].size = 1e9, hw.gemm_eff.pt[0].eff = 0.5;
    double f[2] = {1e10, 1e12}, r[2] = {400e12, 900e12}, p = 0, e = 0;
    char err[256];
    assert_int_equal(bench_fit_fp8_peak(&hw, f, r, 2, &p, &e, err, sizeof err), 0);
    assert_near(p / 1e12, 1200, 1e-6);
    assert_near(e, log(1.5), 1e-9);
}

/* rates made with the model's own reading of h200's curve at a sustained
 * fp8 peak of 1600 TFLOP/s (not the datasheet's 1979): the fit returns it */
static void fp8_recovers(void **st)
{
    (void)st;
    HwProfile hw;
    char err[256];
    assert_int_equal(profile_load_builtin("h200", &hw, err, sizeof err), 0);
    double ref = hw.eff_ref_peak > 0 ? hw.eff_ref_peak : hw.peak[PREC_BF16], P = 1600e12, f[6], r[6], p = 0, e = 1;
    for (int i = 0; i < 6; i++) {
        f[i] = 2.0 * 8192 * 2048 * 2048 * pow(2, i);
        r[i] = P * hw_eff(&hw.gemm_eff, f[i] * ref / P);
    }
    assert_int_equal(bench_fit_fp8_peak(&hw, f, r, 6, &p, &e, err, sizeof err), 0);
    assert_near(p / P, 1, 1e-6);
    assert_near(e, 0, 1e-6);
}

static void fp8_refuses(void **st)
{
    (void)st;
    HwProfile hw;
    char err[256];
    assert_int_equal(profile_load_builtin("h200", &hw, err, sizeof err), 0);
    double f[1] = {1e12}, r[1] = {-1}, p;
    assert_int_equal(bench_fit_fp8_peak(&hw, f, r, 0, &p, NULL, err, sizeof err), -1);
    assert_int_equal(bench_fit_fp8_peak(&hw, f, r, 1, &p, NULL, err, sizeof err), -1);
    assert_non_null(strstr(err, "point 0"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(recovers_one_node), cmocka_unit_test(recovers_across_nodes),
        cmocka_unit_test(close_under_noise), cmocka_unit_test(bounds), cmocka_unit_test(refuses),
        cmocka_unit_test(fp8_flat), cmocka_unit_test(fp8_recovers), cmocka_unit_test(fp8_refuses),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
