/* test_kernels_cpu.c — every CPU kernel against a naive reference (forward)
 * and against central finite differences (backward).
 *
 * Backward checks: the objective is J = Σ out · W with a fixed random W, so
 * dout = W; J is summed in double. Gradient buffers start from random values
 * and the check compares (after − before) with the numerical gradient, which
 * also tests that backward kernels accumulate. A check passes when
 * |a − b| ≤ atol + rtol·|b|; on failure the first mismatches and the maximum
 * difference are printed. */
#include <math.h>
#include <stdbool.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "kernels.h"

/* ---- helpers ------------------------------------------------------------ */

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;

static float frand(void) {   // uniform in [-1, 1)
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (float)((rng_state >> 40) / (double)(1ull << 24)) * 2.0f - 1.0f;
}

static float *randv(size_t n, float s) {
    float *x = malloc(n * sizeof *x);
    for (size_t i = 0; i < n; i++) x[i] = s * frand();
    return x;
}

static float *copyv(const float *x, size_t n) {
    float *y = malloc(n * sizeof *y);
    memcpy(y, x, n * sizeof *y);
    return y;
}

static double wsum(const float *out, const float *w, size_t n) {
    double s = 0.0;
    for (size_t i = 0; i < n; i++) s += (double)out[i] * w[i];
    return s;
}

/* counts elements with |a − b| > atol + rtol·|b|; prints the first few */
static int compare(const char *name, const float *a, const double *b, size_t n,
                   double atol, double rtol) {
    int bad = 0;
    double maxdiff = 0.0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs(a[i] - b[i]);
        if (d > maxdiff || isnan(d)) maxdiff = isnan(d) ? INFINITY : d;
        if (!(d <= atol + rtol * fabs(b[i]))) {
            if (bad < 5) printf("  %s[%zu]: got %.7g, want %.7g\n", name, i, a[i], b[i]);
            bad++;
        }
    }
    if (bad) printf("  %s: %d of %zu mismatch, max |diff| %.3g\n", name, bad, n, maxdiff);
    return bad;
}

static int compare_f(const char *name, const float *a, const float *b, size_t n,
                     double atol, double rtol) {
    double *bd = malloc(n * sizeof *bd);
    for (size_t i = 0; i < n; i++) bd[i] = b[i];
    int bad = compare(name, a, bd, n, atol, rtol);
    free(bd);
    return bad;
}

#define FD_H 1e-2
#define ATOL 5e-4   // passes at 2e-4 / 1e-3 today; margin for other compilers
#define RTOL 3e-3

/* central differences of f() w.r.t. each element of x, compared with the
 * analytic gradient accumulated into grad (grad0 = its value before) */
static int grad_check(const char *name, double (*f)(void *), void *ctx,
                      float *x, size_t n, const float *grad, const float *grad0) {
    double *num = malloc(n * sizeof *num);
    float *ana = malloc(n * sizeof *ana);
    for (size_t i = 0; i < n; i++) {
        float x0 = x[i];
        float xp = (float)(x0 + FD_H), xm = (float)(x0 - FD_H);
        x[i] = xp;
        double fp = f(ctx);
        x[i] = xm;
        double fm = f(ctx);
        x[i] = x0;
        num[i] = (fp - fm) / ((double)xp - xm);
        ana[i] = grad[i] - (grad0 ? grad0[i] : 0.0f);
    }
    int bad = compare(name, ana, num, n, ATOL, RTOL);
    free(num);
    free(ana);
    return bad;
}

/* ---- matmul ------------------------------------------------------------- */

typedef struct { float *out, *inp, *w, *bias, *W; int BT, C, OC; } MatmulCtx;

static double matmul_obj(void *p) {
    MatmulCtx *c = p;
    k_matmul_fwd(c->out, c->inp, c->w, c->bias, c->BT, c->C, c->OC);
    return wsum(c->out, c->W, (size_t)c->BT * c->OC);
}

static void test_matmul(void **state) {
    (void)state;
    int BT = 7, C = 5, OC = 6;
    MatmulCtx c = {malloc(sizeof(float) * BT * OC), randv(BT * C, 1), randv(OC * C, 1),
                   randv(OC, 1), randv(BT * OC, 1), BT, C, OC};
    double ref[7 * 6];
    for (int withbias = 0; withbias < 2; withbias++) {
        for (int i = 0; i < BT; i++)
            for (int o = 0; o < OC; o++) {
                double s = withbias ? c.bias[o] : 0.0;
                for (int k = 0; k < C; k++) s += (double)c.inp[i * C + k] * c.w[o * C + k];
                ref[i * OC + o] = s;
            }
        k_matmul_fwd(c.out, c.inp, c.w, withbias ? c.bias : NULL, BT, C, OC);
        assert_int_equal(compare("matmul out", c.out, ref, BT * OC, 1e-5, 1e-5), 0);
    }
    float *dinp = randv(BT * C, 1), *dw = randv(OC * C, 1), *db = randv(OC, 1);
    float *dinp0 = copyv(dinp, BT * C), *dw0 = copyv(dw, OC * C), *db0 = copyv(db, OC);
    k_matmul_bwd(dinp, dw, db, c.W, c.inp, c.w, BT, C, OC);
    int bad = grad_check("matmul dinp", matmul_obj, &c, c.inp, BT * C, dinp, dinp0)
            + grad_check("matmul dw", matmul_obj, &c, c.w, OC * C, dw, dw0)
            + grad_check("matmul dbias", matmul_obj, &c, c.bias, OC, db, db0);
    assert_int_equal(bad, 0);
    // nullable gradients: only dw requested, the others untouched
    float *dw2 = calloc(OC * C, sizeof(float));
    k_matmul_bwd(NULL, dw2, NULL, c.W, c.inp, c.w, BT, C, OC);
    for (int i = 0; i < OC * C; i++) dw2[i] += dw0[i];
    assert_int_equal(compare_f("matmul dw only", dw2, dw, OC * C, 1e-5, 1e-5), 0);
    free(dw2);
    free(c.out); free(c.inp); free(c.w); free(c.bias); free(c.W);
    free(dinp); free(dw); free(db); free(dinp0); free(dw0); free(db0);
}

/* ---- layernorm / rmsnorm ------------------------------------------------ */

typedef struct { float *out, *mean, *rstd, *inp, *w, *b, *W; int N, C; int rms; } NormCtx;

static double norm_obj(void *p) {
    NormCtx *c = p;
    if (c->rms) k_rmsnorm_fwd(c->out, c->rstd, c->inp, c->w, c->N, c->C, 1e-5f);
    else k_layernorm_fwd(c->out, c->mean, c->rstd, c->inp, c->w, c->b, c->N, c->C, 1e-5f);
    return wsum(c->out, c->W, (size_t)c->N * c->C);
}

static void norm_test(int rms) {
    int N = 6, C = 8;
    NormCtx c = {malloc(sizeof(float) * N * C), malloc(sizeof(float) * N),
                 malloc(sizeof(float) * N), randv(N * C, 2), randv(C, 1), randv(C, 1),
                 randv(N * C, 1), N, C, rms};
    for (int i = 0; i < N * C; i++) c.inp[i] += 0.5f;   // non-zero mean
    norm_obj(&c);
    double ref[6 * 8];
    for (int i = 0; i < N; i++) {
        double mu = 0, var = 0;
        for (int k = 0; k < C; k++) mu += c.inp[i * C + k];
        mu = rms ? 0.0 : mu / C;
        for (int k = 0; k < C; k++) var += (c.inp[i * C + k] - mu) * (c.inp[i * C + k] - mu);
        double r = 1.0 / sqrt(var / C + 1e-5);
        for (int k = 0; k < C; k++)
            ref[i * C + k] = (c.inp[i * C + k] - mu) * r * c.w[k] + (rms ? 0.0 : c.b[k]);
    }
    assert_int_equal(compare(rms ? "rmsnorm out" : "layernorm out", c.out, ref, N * C, 1e-5, 1e-4), 0);

    float *dinp = randv(N * C, 1), *dw = randv(C, 1), *db = randv(C, 1);
    float *dinp0 = copyv(dinp, N * C), *dw0 = copyv(dw, C), *db0 = copyv(db, C);
    int bad;
    if (rms) {
        k_rmsnorm_bwd(dinp, dw, c.W, c.inp, c.w, c.rstd, N, C);
        bad = grad_check("rmsnorm dinp", norm_obj, &c, c.inp, N * C, dinp, dinp0)
            + grad_check("rmsnorm dweight", norm_obj, &c, c.w, C, dw, dw0);
    } else {
        k_layernorm_bwd(dinp, dw, db, c.W, c.inp, c.w, c.mean, c.rstd, N, C);
        bad = grad_check("layernorm dinp", norm_obj, &c, c.inp, N * C, dinp, dinp0)
            + grad_check("layernorm dweight", norm_obj, &c, c.w, C, dw, dw0)
            + grad_check("layernorm dbias", norm_obj, &c, c.b, C, db, db0);
    }
    assert_int_equal(bad, 0);
    free(c.out); free(c.mean); free(c.rstd); free(c.inp); free(c.w); free(c.b); free(c.W);
    free(dinp); free(dw); free(db); free(dinp0); free(dw0); free(db0);
}

static void test_layernorm(void **state) { (void)state; norm_test(0); }
static void test_rmsnorm(void **state) { (void)state; norm_test(1); }

/* ---- gelu / swiglu ------------------------------------------------------ */

typedef struct { float *out, *inp, *W; int N, F; int swiglu; float clamp; } ActCtx;   // clamp: k_glu_* (GPT-OSS)

static double act_obj(void *p) {
    ActCtx *c = p;
    if (c->clamp > 0) {
        k_glu_fwd(c->out, c->inp, c->N, c->F, c->clamp);
        return wsum(c->out, c->W, (size_t)c->N * c->F);
    }
    if (c->swiglu) {
        k_swiglu_fwd(c->out, c->inp, c->N, c->F);
        return wsum(c->out, c->W, (size_t)c->N * c->F);
    }
    k_gelu_fwd(c->out, c->inp, (size_t)c->N);
    return wsum(c->out, c->W, (size_t)c->N);
}

static void test_gelu(void **state) {
    (void)state;
    int N = 40;
    ActCtx c = {malloc(sizeof(float) * N), randv(N, 4), randv(N, 1), N, 0, 0, 0};
    act_obj(&c);
    double ref[40];
    for (int i = 0; i < N; i++) {
        double x = c.inp[i];
        ref[i] = 0.5 * x * (1 + tanh(sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
    }
    assert_int_equal(compare("gelu out", c.out, ref, N, 1e-6, 1e-5), 0);
    float *d = randv(N, 1), *d0 = copyv(d, N);
    k_gelu_bwd(d, c.inp, c.W, N);
    assert_int_equal(grad_check("gelu dinp", act_obj, &c, c.inp, N, d, d0), 0);
    // in place forward (after grad_check, out holds a perturbed point: redo it)
    act_obj(&c);
    float *x = copyv(c.inp, N);
    k_gelu_fwd(x, x, N);
    assert_int_equal(compare_f("gelu in place", x, c.out, N, 0, 0), 0);
    free(x); free(c.out); free(c.inp); free(c.W); free(d); free(d0);
}

static void test_swiglu(void **state) {
    (void)state;
    int N = 5, F = 6;
    ActCtx c = {malloc(sizeof(float) * N * F), randv(N * 2 * F, 3), randv(N * F, 1), N, F, 1, 0};
    act_obj(&c);
    double ref[5 * 6];
    for (int i = 0; i < N; i++)
        for (int j = 0; j < F; j++) {
            double g = c.inp[i * 2 * F + j], u = c.inp[i * 2 * F + F + j];
            ref[i * F + j] = g / (1 + exp(-g)) * u;
        }
    assert_int_equal(compare("swiglu out", c.out, ref, N * F, 1e-6, 1e-5), 0);
    float *d = randv(N * 2 * F, 1), *d0 = copyv(d, N * 2 * F);
    k_swiglu_bwd(d, c.inp, c.W, N, F);
    assert_int_equal(grad_check("swiglu dinp", act_obj, &c, c.inp, N * 2 * F, d, d0), 0);
    free(c.out); free(c.inp); free(c.W); free(d); free(d0);
}

/* GPT-OSS's clamped quick-GEGLU against the formula (HF modeling_gpt_oss),
 * the clamp biting on about half the inputs (|x| up to 3, clamp 1.5); the
 * gradient checked away from the bounds, where it is defined. */
static void test_glu_clamp(void **state) {
    (void)state;
    int N = 6, F = 8;
    float C = 1.5f;
    ActCtx c = {malloc(sizeof(float) * N * F), randv(N * 2 * F, 3), randv(N * F, 1), N, F, 1, C};
    for (int i = 0; i < N * 2 * F; i++)   /* keep 0.05 from the bounds: finite differences across a kink */
        if (fabsf(fabsf(c.inp[i]) - C) < 0.05f)
            c.inp[i] += 0.1f;
    act_obj(&c);
    double ref[6 * 8];
    int clamped = 0;
    for (int i = 0; i < N; i++)
        for (int j = 0; j < F; j++) {
            double g = c.inp[i * 2 * F + j], u = c.inp[i * 2 * F + F + j];
            clamped += g > C || fabs(u) > C;
            g = fmin(g, C), u = fmax(fmin(u, C), -C);
            ref[i * F + j] = g / (1 + exp(-1.702 * g)) * (u + 1);
        }
    assert_true(clamped >= 5);
    assert_int_equal(compare("glu clamp out", c.out, ref, N * F, 1e-6, 1e-5), 0);
    float *d = randv(N * 2 * F, 1), *d0 = copyv(d, N * 2 * F);
    k_glu_bwd(d, c.inp, c.W, N, F, C);
    assert_int_equal(grad_check("glu clamp dinp", act_obj, &c, c.inp, N * 2 * F, d, d0), 0);
    /* clamp 0 is SwiGLU exactly */
    float *o1 = malloc(sizeof(float) * N * F), *o2 = malloc(sizeof(float) * N * F);
    k_glu_fwd(o1, c.inp, N, F, 0);
    k_swiglu_fwd(o2, c.inp, N, F);
    assert_int_equal(compare_f("glu clamp 0", o1, o2, N * F, 0, 0), 0);
    free(o1); free(o2);
    free(c.out); free(c.inp); free(c.W); free(d); free(d0);
}

/* ---- rope --------------------------------------------------------------- */

typedef struct { float *out, *inp, *W; int B, T, NH, HS, pos0; } RopeCtx;

static double rope_obj(void *p) {
    RopeCtx *c = p;
    k_rope_fwd(c->out, c->inp, c->B, c->T, c->NH, c->HS, c->pos0, 10000.0f);
    return wsum(c->out, c->W, (size_t)c->B * c->T * c->NH * c->HS);
}

static void test_rope(void **state) {
    (void)state;
    int B = 2, T = 5, NH = 3, HS = 8, pos0 = 7;
    size_t n = (size_t)B * T * NH * HS;
    RopeCtx c = {malloc(sizeof(float) * n), randv(n, 1), randv(n, 1), B, T, NH, HS, pos0};
    rope_obj(&c);
    // reference for every element, rotate-half convention
    double *ref = malloc(n * sizeof *ref);
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++)
            for (int h = 0; h < NH; h++) {
                const float *x = c.inp + (((size_t)b * T + t) * NH + h) * HS;
                double *y = ref + (((size_t)b * T + t) * NH + h) * HS;
                for (int i = 0; i < HS / 2; i++) {
                    double a = (pos0 + t) * pow(10000.0, -2.0 * i / HS);
                    y[i] = x[i] * cos(a) - x[i + HS / 2] * sin(a);
                    y[i + HS / 2] = x[i + HS / 2] * cos(a) + x[i] * sin(a);
                }
            }
    assert_int_equal(compare("rope out", c.out, ref, n, 1e-5, 1e-5), 0);
    // in place equals out of place
    float *x = copyv(c.inp, n);
    k_rope_fwd(x, x, B, T, NH, HS, pos0, 10000.0f);
    assert_int_equal(compare_f("rope in place", x, c.out, n, 0, 0), 0);
    // un-rotating (the backward applied to out, from zero) gives back inp
    float *back = calloc(n, sizeof(float));
    k_rope_bwd(back, c.out, B, T, NH, HS, pos0, 10000.0f);
    assert_int_equal(compare_f("rope inverse", back, c.inp, n, 1e-5, 1e-5), 0);
    float *d = randv(n, 1), *d0 = copyv(d, n);
    k_rope_bwd(d, c.W, B, T, NH, HS, pos0, 10000.0f);
    assert_int_equal(grad_check("rope dinp", rope_obj, &c, c.inp, n, d, d0), 0);
    free(ref); free(x); free(back); free(d); free(d0); free(c.out); free(c.inp); free(c.W);
}

/* RoPE at a list of positions equals RoPE of each contiguous run at its pos0 */
static void test_rope_pos(void **state) {
    (void)state;
    int B = 2, T = 8, NH = 3, HS = 6, pos[8] = {4, 5, 6, 7, 24, 25, 26, 27};
    size_t n = (size_t)B * T * NH * HS, half = (size_t)4 * NH * HS;
    float *x = randv(n, 1), *y = malloc(n * 4), *want = malloc(n * 4);
    float *d = randv(n, 1), *d0 = copyv(d, n), *dw = copyv(d, n);
    k_rope_pos_fwd(y, x, pos, B, T, NH, HS, 10000.0f);
    k_rope_pos_bwd(d, x, pos, B, T, NH, HS, 10000.0f);
    for (int b = 0; b < B; b++)
        for (int j = 0; j < 2; j++) {
            size_t off = ((size_t)b * 2 + j) * half;
            k_rope_fwd(want + off, x + off, 1, 4, NH, HS, pos[4 * j], 10000.0f);
            k_rope_bwd(dw + off, x + off, 1, 4, NH, HS, pos[4 * j], 10000.0f);
        }
    assert_int_equal(compare_f("rope pos", y, want, n, 0, 0), 0);
    assert_int_equal(compare_f("rope pos bwd", d, dw, n, 0, 0), 0);
    int moved = 0;   // the backward accumulated something
    for (size_t i = 0; i < n; i++) moved += d[i] != d0[i];
    assert_true(moved > 0);
    free(x); free(y); free(want); free(d); free(d0); free(dw);
}

/* ---- attention ---------------------------------------------------------- */

typedef struct { float *out, *lse, *q, *k, *v, *W; int B, T, NH, NKV, HS, win; float *sink; } AttnCtx;
// win: sliding window (0 none); sink: a sink logit per head (NULL none)

static double attn_obj(void *p) {
    AttnCtx *c = p;
    if (c->win > 0)
        k_attention_window_fwd(c->out, c->lse, c->q, c->k, c->v, c->B, c->T, c->NH, c->NKV, c->HS, c->win);
    else
        k_attention_fwd(c->out, c->lse, c->q, c->k, c->v, c->B, c->T, c->NH, c->NKV, c->HS);
    if (c->sink)
        k_attention_sink_fwd(c->out, c->lse, c->sink, c->B, c->T, c->NH, c->HS);
    return wsum(c->out, c->W, (size_t)c->B * c->T * c->NH * c->HS);
}

/* the whole (T, T) score matrix per head, softmax with the causal mask
 * (and the window: key j seen by query t when t − win <= j <= t) */
static void attn_naive(double *out, double *lse, const AttnCtx *c) {
    int B = c->B, T = c->T, NH = c->NH, NKV = c->NKV, HS = c->HS;
    double *att = malloc(sizeof(double) * T * T);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++) {
            int g = h / (NH / NKV);
            for (int t = 0; t < T; t++) {
                for (int j = 0; j < T; j++) {
                    double s = 0;
                    for (int d = 0; d < HS; d++)
                        s += (double)c->q[((b * T + t) * NH + h) * HS + d]
                           * c->k[((b * T + j) * NKV + g) * HS + d];
                    bool seen = j <= t && (c->win <= 0 || t - j <= c->win);
                    att[t * T + j] = seen ? s / sqrt(HS) : -INFINITY;
                }
                double mx = c->sink ? c->sink[h] : -INFINITY, sum = 0;
                for (int j = 0; j < T; j++) mx = fmax(mx, att[t * T + j]);
                for (int j = 0; j < T; j++) sum += exp(att[t * T + j] - mx);
                if (c->sink) sum += exp(c->sink[h] - mx);   /* the sink: in the denominator, no value */
                lse[(b * NH + h) * T + t] = mx + log(sum);
                for (int d = 0; d < HS; d++) {
                    double o = 0;
                    for (int j = 0; j < T; j++)
                        o += exp(att[t * T + j] - mx) / sum * c->v[((b * T + j) * NKV + g) * HS + d];
                    out[((b * T + t) * NH + h) * HS + d] = o;
                }
            }
        }
    free(att);
}

static void attn_case_w(int B, int T, int NH, int NKV, int HS, int check_grad, int win) {
    size_t nq = (size_t)B * T * NH * HS, nk = (size_t)B * T * NKV * HS;
    AttnCtx c = {malloc(sizeof(float) * nq), malloc(sizeof(float) * B * NH * T),
                 randv(nq, 1), randv(nk, 1), randv(nk, 1), randv(nq, 1), B, T, NH, NKV, HS, win, NULL};
    attn_obj(&c);
    double *ref = malloc(nq * sizeof *ref), *rlse = malloc(sizeof(double) * B * NH * T);
    attn_naive(ref, rlse, &c);
    assert_int_equal(compare("attention out", c.out, ref, nq, 1e-5, 1e-4), 0);
    assert_int_equal(compare("attention lse", c.lse, rlse, (size_t)B * NH * T, 1e-5, 1e-5), 0);
    if (check_grad) {
        float *dq = randv(nq, 1), *dk = randv(nk, 1), *dv = randv(nk, 1);
        float *dq0 = copyv(dq, nq), *dk0 = copyv(dk, nk), *dv0 = copyv(dv, nk);
        if (win > 0)
            k_attention_window_bwd(dq, dk, dv, c.W, c.q, c.k, c.v, c.out, c.lse, B, T, NH, NKV, HS, win);
        else
            k_attention_bwd(dq, dk, dv, c.W, c.q, c.k, c.v, c.out, c.lse, B, T, NH, NKV, HS);
        int bad = grad_check("attention dq", attn_obj, &c, c.q, nq, dq, dq0)
                + grad_check("attention dk", attn_obj, &c, c.k, nk, dk, dk0)
                + grad_check("attention dv", attn_obj, &c, c.v, nk, dv, dv0);
        assert_int_equal(bad, 0);
        free(dq); free(dk); free(dv); free(dq0); free(dk0); free(dv0);
    }
    free(ref); free(rlse);
    free(c.out); free(c.lse); free(c.q); free(c.k); free(c.v); free(c.W);
}

static void attn_case(int B, int T, int NH, int NKV, int HS, int check_grad) {
    attn_case_w(B, T, NH, NKV, HS, check_grad, 0);
}

static void test_attention_fwd(void **state) {
    (void)state;
    attn_case(2, 7, 4, 4, 8, 0);    // MHA
    attn_case(2, 7, 4, 2, 8, 0);    // GQA
    attn_case(1, 9, 6, 1, 4, 0);    // MQA
    attn_case(1, 1, 2, 1, 4, 0);    // a single token
    attn_case(2, 150, 4, 2, 16, 0); // three query tiles, the last one short
}

static void test_attention_bwd(void **state) {
    (void)state;
    attn_case(2, 5, 4, 2, 4, 1);    // GQA
    attn_case(1, 4, 2, 2, 3, 1);    // MHA, odd head size
    attn_case(1, 70, 2, 1, 4, 1);   // two query tiles
}

/* Sliding windows (query t sees keys t−W..t) against the naive masked
 * softmax, forward and gradient-checked backward: windows narrower than a
 * tile, across tile edges, one key (W 0 would be causal: W 1 is the
 * narrowest band), and one wider than the sequence (= causal). */
static void test_attention_window(void **state) {
    (void)state;
    attn_case_w(2, 150, 4, 2, 16, 0, 5);    // three tiles, a 6-key band
    attn_case_w(1, 150, 2, 1, 8, 0, 64);    // the band spans exactly one tile back
    attn_case_w(1, 150, 2, 1, 8, 0, 100);   // across a tile edge
    attn_case_w(1, 9, 2, 2, 4, 0, 1);       // two keys a query
    attn_case_w(1, 9, 2, 1, 4, 0, 50);      // wider than the sequence: causal
    attn_case_w(1, 6, 4, 2, 4, 1, 2);       // GQA, gradients
    attn_case_w(1, 70, 2, 1, 4, 1, 3);      // two query tiles, gradients
}

/* Attention sinks: the naive softmax with one more logit per head in the
 * denominator; forward, and q, k, v and the sinks gradient-checked. */
static void sink_case(int B, int T, int NH, int NKV, int HS, int win) {
    size_t nq = (size_t)B * T * NH * HS, nk = (size_t)B * T * NKV * HS;
    AttnCtx c = {malloc(sizeof(float) * nq), malloc(sizeof(float) * B * NH * T), randv(nq, 1), randv(nk, 1),
                 randv(nk, 1), randv(nq, 1), B, T, NH, NKV, HS, win, randv(NH, 1)};
    attn_obj(&c);
    double *ref = malloc(nq * sizeof *ref), *rlse = malloc(sizeof(double) * B * NH * T);
    attn_naive(ref, rlse, &c);
    assert_int_equal(compare("sink attention out", c.out, ref, nq, 1e-5, 1e-4), 0);
    assert_int_equal(compare("sink attention lse", c.lse, rlse, (size_t)B * NH * T, 1e-5, 1e-5), 0);
    float *dq = randv(nq, 1), *dk = randv(nk, 1), *dv = randv(nk, 1), *ds = randv(NH, 1);
    float *dq0 = copyv(dq, nq), *dk0 = copyv(dk, nk), *dv0 = copyv(dv, nk), *ds0 = copyv(ds, NH);
    k_attention_window_bwd(dq, dk, dv, c.W, c.q, c.k, c.v, c.out, c.lse, B, T, NH, NKV, HS, win);
    k_attention_sink_bwd(ds, c.W, c.out, c.lse, c.sink, B, T, NH, HS);
    int bad = grad_check("sink attention dq", attn_obj, &c, c.q, nq, dq, dq0)
            + grad_check("sink attention dk", attn_obj, &c, c.k, nk, dk, dk0)
            + grad_check("sink attention dv", attn_obj, &c, c.v, nk, dv, dv0)
            + grad_check("sink attention dsink", attn_obj, &c, c.sink, NH, ds, ds0);
    assert_int_equal(bad, 0);
    free(dq); free(dk); free(dv); free(ds); free(dq0); free(dk0); free(dv0); free(ds0);
    free(ref); free(rlse);
    free(c.out); free(c.lse); free(c.q); free(c.k); free(c.v); free(c.W); free(c.sink);
}

static void test_attention_sinks(void **state) {
    (void)state;
    sink_case(1, 6, 4, 2, 4, 0);    // GQA, causal
    sink_case(2, 5, 2, 2, 3, 0);    // MHA, odd head size
    sink_case(1, 70, 2, 1, 4, 3);   // two query tiles, a window (GPT-OSS's windowed layers have sinks too)
}

/* Context parallel: the sequence cut into 2·cp chunks, "rank" r holding
 * chunks r and 2cp−1−r. Each rank's queries against every rank's K/V block,
 * merged by log-sum-exp, must give the full kernel's output and lse; the
 * block backwards, with the final lse, must give its dq, dk and dv. */
static void cp_positions(int *pos, int T, int cp, int r) {
    int c = T / (2 * cp);
    for (int t = 0; t < 2 * c; t++)
        pos[t] = t < c ? r * c + t : (2 * cp - 1 - r) * c + (t - c);
}

/* rows of x (B, T, W) at the positions pos (Tl) into y (B, Tl, W) */
static void take_rows(float *y, const float *x, const int *pos, int B, int T, int Tl, int W) {
    for (int b = 0; b < B; b++)
        for (int t = 0; t < Tl; t++)
            memcpy(y + ((size_t)b * Tl + t) * W, x + ((size_t)b * T + pos[t]) * W, W * sizeof *y);
}

static void cp_case(int B, int T, int NH, int NKV, int HS, int cp, int bad_merge) {
    int Tl = T / cp, qw = NH * HS, kw = NKV * HS;
    size_t nq = (size_t)B * T * qw, nk = (size_t)B * T * kw, nl = (size_t)B * NH * T;
    float *q = randv(nq, 1), *k = randv(nk, 1), *v = randv(nk, 1), *dy = randv(nq, 1);
    float *out = malloc(nq * sizeof *out), *lse = malloc(nl * sizeof *lse);
    float *dq = calloc(nq, sizeof *dq), *dk = calloc(nk, sizeof *dk), *dv = calloc(nk, sizeof *dv);
    k_attention_fwd(out, lse, q, k, v, B, T, NH, NKV, HS);
    k_attention_bwd(dq, dk, dv, dy, q, k, v, out, lse, B, T, NH, NKV, HS);

    int *pos = malloc((size_t)cp * Tl * sizeof *pos);
    float **lq = malloc(cp * sizeof *lq), **lk = malloc(cp * sizeof *lk), **lv = malloc(cp * sizeof *lv);
    float **ldk = malloc(cp * sizeof *ldk), **ldv = malloc(cp * sizeof *ldv);
    size_t lnq = nq / cp, lnk = nk / cp, lnl = nl / cp;
    for (int r = 0; r < cp; r++) {
        cp_positions(pos + (size_t)r * Tl, T, cp, r);
        lq[r] = malloc(lnq * sizeof(float)), lk[r] = malloc(lnk * sizeof(float)), lv[r] = malloc(lnk * sizeof(float));
        take_rows(lq[r], q, pos + (size_t)r * Tl, B, T, Tl, qw);
        take_rows(lk[r], k, pos + (size_t)r * Tl, B, T, Tl, kw);
        take_rows(lv[r], v, pos + (size_t)r * Tl, B, T, Tl, kw);
        ldk[r] = calloc(lnk, sizeof(float)), ldv[r] = calloc(lnk, sizeof(float));
    }
    float *o = malloc(lnq * sizeof *o), *l = malloc(lnl * sizeof *l), *ob = malloc(lnq * sizeof *ob);
    float *lb = malloc(lnl * sizeof *lb), *want = malloc(lnq * sizeof *want), *dyl = malloc(lnq * sizeof *dyl);
    float *dql = malloc(lnq * sizeof *dql), *wl = malloc(lnl * sizeof *wl);
    int bad = 0, empty = 0;
    for (int r = 0; r < cp; r++) {
        const int *qp = pos + (size_t)r * Tl;
        /* ring order: the resident block first, then r−1, r−2, ... */
        for (int i = 0; i < cp; i++) {
            int s = ((r - i) % cp + cp) % cp;
            float *dst_o = i ? ob : o, *dst_l = i ? lb : l;
            k_attention_block_fwd(dst_o, dst_l, lq[r], lk[s], lv[s], qp, pos + (size_t)s * Tl, B, Tl, Tl, NH,
                                  NKV, HS);
            for (size_t j = 0; j < lnl; j++)
                empty += dst_l[j] == -INFINITY;
            if (i && bad_merge)   // a wrong merge: the later block's result replaces the earlier
                memcpy(o, ob, lnq * sizeof *o), memcpy(l, lb, lnl * sizeof *l);
            else if (i)
                k_attention_merge(o, l, ob, lb, B, Tl, NH, HS);
        }
        take_rows(want, out, qp, B, T, Tl, qw);
        for (int b = 0; b < B; b++)
            for (int h = 0; h < NH; h++)
                for (int t = 0; t < Tl; t++)
                    wl[((size_t)b * NH + h) * Tl + t] = lse[((size_t)b * NH + h) * T + qp[t]];
        bad += compare_f("cp out", o, want, lnq, 1e-5, 1e-4) + compare_f("cp lse", l, wl, lnl, 1e-5, 1e-5);
        /* backward with the merged output and lse */
        take_rows(dyl, dy, qp, B, T, Tl, qw);
        memset(dql, 0, lnq * sizeof *dql);
        for (int i = 0; i < cp; i++) {
            int s = ((r - i) % cp + cp) % cp;
            k_attention_block_bwd(dql, ldk[s], ldv[s], dyl, lq[r], lk[s], lv[s], o, l, qp, pos + (size_t)s * Tl,
                                  B, Tl, Tl, NH, NKV, HS);
        }
        take_rows(want, dq, qp, B, T, Tl, qw);
        bad += compare_f("cp dq", dql, want, lnq, 1e-5, 1e-4);
    }
    float *wk = malloc(lnk * sizeof *wk);
    for (int r = 0; r < cp; r++) {
        take_rows(wk, dk, pos + (size_t)r * Tl, B, T, Tl, kw);
        bad += compare_f("cp dk", ldk[r], wk, lnk, 1e-5, 1e-4);
        take_rows(wk, dv, pos + (size_t)r * Tl, B, T, Tl, kw);
        bad += compare_f("cp dv", ldv[r], wk, lnk, 1e-5, 1e-4);
    }
    assert_true(empty > 0);   // some rows saw no key of some block (lse −∞)
    if (bad_merge)
        assert_true(bad > 0);
    else
        assert_int_equal(bad, 0);
    for (int r = 0; r < cp; r++)
        free(lq[r]), free(lk[r]), free(lv[r]), free(ldk[r]), free(ldv[r]);
    free(lq); free(lk); free(lv); free(ldk); free(ldv); free(pos); free(wk);
    free(o); free(l); free(ob); free(lb); free(want); free(dyl); free(dql); free(wl);
    free(q); free(k); free(v); free(dy); free(out); free(lse); free(dq); free(dk); free(dv);
}

static void test_attention_cp(void **state) {
    (void)state;
    cp_case(2, 8, 4, 4, 8, 2, 0);     // MHA, cp 2
    cp_case(2, 32, 4, 2, 16, 4, 0);   // GQA, cp 4
    cp_case(1, 24, 6, 1, 4, 3, 0);    // MQA, cp 3
    cp_case(1, 256, 2, 1, 8, 2, 0);   // chunks of 64: more than one query tile per rank
    printf("  (mismatches expected next: a merge that drops a block must fail the check)\n");
    cp_case(2, 32, 4, 2, 16, 4, 1);
}

/* a block with every position equal to 0..T−1 is the full kernel */
static void test_attention_block_full(void **state) {
    (void)state;
    int B = 2, T = 70, NH = 4, NKV = 2, HS = 8;
    size_t nq = (size_t)B * T * NH * HS, nk = (size_t)B * T * NKV * HS, nl = (size_t)B * NH * T;
    float *q = randv(nq, 1), *k = randv(nk, 1), *v = randv(nk, 1);
    float *o1 = malloc(nq * 4), *l1 = malloc(nl * 4), *o2 = malloc(nq * 4), *l2 = malloc(nl * 4);
    int *pos = malloc(T * sizeof *pos);
    for (int t = 0; t < T; t++) pos[t] = t;
    k_attention_fwd(o1, l1, q, k, v, B, T, NH, NKV, HS);
    k_attention_block_fwd(o2, l2, q, k, v, pos, pos, B, T, T, NH, NKV, HS);
    assert_int_equal(compare_f("block out", o2, o1, nq, 1e-6, 1e-5), 0);
    assert_int_equal(compare_f("block lse", l2, l1, nl, 1e-6, 1e-5), 0);
    free(q); free(k); free(v); free(o1); free(l1); free(o2); free(l2); free(pos);
}

/* ---- embedding, residual ------------------------------------------------ */

typedef struct { float *out, *wte, *wpe, *W; int *tok; int B, T, C, pos0; } EmbCtx;

static double emb_obj(void *p) {
    EmbCtx *c = p;
    k_embedding_fwd(c->out, c->tok, c->wte, c->wpe, c->B, c->T, c->C, c->pos0);
    return wsum(c->out, c->W, (size_t)c->B * c->T * c->C);
}

static void test_embedding(void **state) {
    (void)state;
    int B = 2, T = 4, C = 70, V = 5, maxT = 8, pos0 = 3;   // C > one 64-channel block
    int tok[8] = {1, 4, 1, 0, 4, 4, 2, 1};                  // repeated tokens
    EmbCtx c = {malloc(sizeof(float) * B * T * C), randv(V * C, 1), randv(maxT * C, 1),
                randv(B * T * C, 1), tok, B, T, C, pos0};
    emb_obj(&c);
    double *ref = malloc(sizeof(double) * B * T * C);
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++)
            for (int k = 0; k < C; k++)
                ref[(b * T + t) * C + k] = (double)c.wte[tok[b * T + t] * C + k] + c.wpe[(pos0 + t) * C + k];
    assert_int_equal(compare("embedding out", c.out, ref, B * T * C, 1e-6, 1e-6), 0);
    float *dwte = randv(V * C, 1), *dwpe = randv(maxT * C, 1);
    float *dwte0 = copyv(dwte, V * C), *dwpe0 = copyv(dwpe, maxT * C);
    k_embedding_bwd(dwte, dwpe, c.W, tok, B, T, C, pos0);
    int bad = grad_check("embedding dwte", emb_obj, &c, c.wte, V * C, dwte, dwte0)
            + grad_check("embedding dwpe", emb_obj, &c, c.wpe, maxT * C, dwpe, dwpe0);
    assert_int_equal(bad, 0);
    // no wpe (RoPE models)
    k_embedding_fwd(c.out, tok, c.wte, NULL, B, T, C, 0);
    for (int i = 0; i < B * T * C; i++) ref[i] = c.wte[tok[i / C] * C + i % C];
    assert_int_equal(compare("embedding no wpe", c.out, ref, B * T * C, 0, 0), 0);
    free(ref); free(dwte); free(dwpe); free(dwte0); free(dwpe0);
    free(c.out); free(c.wte); free(c.wpe); free(c.W);
}

static void test_residual(void **state) {
    (void)state;
    size_t n = 33;
    float *a = randv(n, 1), *b = randv(n, 1), *out = malloc(n * sizeof(float));
    double ref[33];
    for (size_t i = 0; i < n; i++) ref[i] = (double)a[i] + b[i];
    k_residual_fwd(out, a, b, n);
    assert_int_equal(compare("residual out", out, ref, n, 1e-7, 1e-7), 0);
    float *da = randv(n, 1), *da0 = copyv(da, n), *dout = randv(n, 1);
    k_residual_bwd(da, NULL, dout, n);
    for (size_t i = 0; i < n; i++) ref[i] = (double)da0[i] + dout[i];
    assert_int_equal(compare("residual da", da, ref, n, 1e-6, 1e-6), 0);
    free(a); free(b); free(out); free(da); free(da0); free(dout);
}

/* ---- cross-entropy ------------------------------------------------------ */

typedef struct { float *losses, *lse, *logits; int *tgt; int BT, V, Vv; float scale; } CeCtx;

static double ce_obj(void *p) {
    CeCtx *c = p;
    k_crossentropy_fwd(c->losses, c->lse, c->logits, c->tgt, c->BT, c->V, c->Vv);
    double s = 0;
    for (int i = 0; i < c->BT; i++) s += c->losses[i];
    return s * c->scale;
}

static void test_crossentropy(void **state) {
    (void)state;
    int BT = 4, V = 12, Vv = 9;
    int tgt[4] = {0, 8, -1, 3};
    CeCtx c = {malloc(sizeof(float) * BT), malloc(sizeof(float) * BT), randv(BT * V, 3),
               tgt, BT, V, Vv, 0.25f};
    for (int i = 0; i < BT; i++)
        for (int j = Vv; j < V; j++) c.logits[i * V + j] = 50.0f;   // padding must not count
    ce_obj(&c);
    double ref[4];
    for (int i = 0; i < BT; i++) {
        double sum = 0;
        for (int j = 0; j < Vv; j++) sum += exp(c.logits[i * V + j]);
        ref[i] = tgt[i] < 0 ? 0.0 : -log(exp(c.logits[i * V + tgt[i]]) / sum);
    }
    assert_int_equal(compare("crossentropy loss", c.losses, ref, BT, 1e-5, 1e-5), 0);
    float *dl = malloc(sizeof(float) * BT * V);
    k_crossentropy_bwd(dl, c.logits, c.lse, tgt, c.scale, BT, V, Vv);
    float *zero = calloc(BT * V, sizeof(float));
    assert_int_equal(grad_check("crossentropy dlogits", ce_obj, &c, c.logits, BT * V, dl, zero), 0);
    for (int i = 0; i < BT; i++)
        for (int j = 0; j < V; j++)
            if (j >= Vv || tgt[i] < 0) assert_true(dl[i * V + j] == 0.0f);
    // in place: dlogits aliasing logits gives the same numbers (redo the
    // forward first: grad_check left lse at a perturbed point)
    ce_obj(&c);
    float *x = copyv(c.logits, BT * V);
    k_crossentropy_bwd(x, x, c.lse, tgt, c.scale, BT, V, Vv);
    assert_int_equal(compare_f("crossentropy in place", x, dl, BT * V, 0, 0), 0);
    free(x); free(zero); free(dl); free(c.losses); free(c.lse); free(c.logits);
}

/* ---- adamw, helpers ----------------------------------------------------- */

static void test_adamw(void **state) {
    (void)state;
    size_t n = 17;
    float lr = 1e-2f, b1 = 0.9f, b2 = 0.95f, eps = 1e-8f, wd = 0.1f;
    float *p = randv(n, 1), *m = calloc(n, sizeof(float)), *v = calloc(n, sizeof(float));
    double *rp = malloc(n * sizeof *rp), *rm = calloc(n, sizeof *rm), *rv = calloc(n, sizeof *rv);
    for (size_t i = 0; i < n; i++) rp[i] = p[i];
    float *g0 = randv(n, 1);
    k_adamw(p, g0, m, v, n, lr, b1, b2, eps, wd, 1);
    // first step closed form: m̂ = g, v̂ = g², so p −= lr·(g/(|g|+eps) + wd·p)
    double ref[17];
    for (size_t i = 0; i < n; i++)
        ref[i] = rp[i] - lr * (g0[i] / (fabs(g0[i]) + eps) + wd * rp[i]);
    assert_int_equal(compare("adamw step 1", p, ref, n, 1e-6, 1e-6), 0);
    // steps 2..3 against the recurrence in double
    for (size_t i = 0; i < n; i++) {
        rm[i] = (1 - b1) * g0[i];
        rv[i] = (1 - b2) * (double)g0[i] * g0[i];
        rp[i] = ref[i];
    }
    for (int t = 2; t <= 3; t++) {
        float *g = randv(n, 1);
        k_adamw(p, g, m, v, n, lr, b1, b2, eps, wd, t);
        for (size_t i = 0; i < n; i++) {
            rm[i] = b1 * rm[i] + (1 - b1) * g[i];
            rv[i] = b2 * rv[i] + (1 - b2) * (double)g[i] * g[i];
            double mh = rm[i] / (1 - pow(b1, t)), vh = rv[i] / (1 - pow(b2, t));
            rp[i] -= lr * (mh / (sqrt(vh) + eps) + wd * rp[i]);
        }
        free(g);
    }
    assert_int_equal(compare("adamw step 3", p, rp, n, 1e-5, 1e-5), 0);
    assert_int_equal(compare("adamw m", m, rm, n, 1e-6, 1e-5), 0);
    free(p); free(m); free(v); free(rp); free(rm); free(rv); free(g0);
}

static void test_helpers(void **state) {
    (void)state;
    float x[5] = {1, -2, 3, 0.5f, 0};
    assert_true(fabs(k_sumsq(x, 5) - 14.25) < 1e-12);
    k_scale(x, 2.0f, 5);
    assert_true(x[1] == -4.0f && x[3] == 1.0f);
    k_zero(x, 5);
    for (int i = 0; i < 5; i++) assert_true(x[i] == 0.0f);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_matmul),
        cmocka_unit_test(test_layernorm),
        cmocka_unit_test(test_rmsnorm),
        cmocka_unit_test(test_gelu),
        cmocka_unit_test(test_swiglu),
        cmocka_unit_test(test_glu_clamp),
        cmocka_unit_test(test_rope),
        cmocka_unit_test(test_attention_fwd),
        cmocka_unit_test(test_attention_bwd),
        cmocka_unit_test(test_attention_window),
        cmocka_unit_test(test_attention_sinks),
        cmocka_unit_test(test_attention_cp),
        cmocka_unit_test(test_attention_block_full),
        cmocka_unit_test(test_rope_pos),
        cmocka_unit_test(test_embedding),
        cmocka_unit_test(test_residual),
        cmocka_unit_test(test_crossentropy),
        cmocka_unit_test(test_adamw),
        cmocka_unit_test(test_helpers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
