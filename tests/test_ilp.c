/* test_ilp.c — the stage ILP against brute force over every stage split and
 * recomputation choice, on a hardware profile built here; GLPK failure
 * paths come back as typed statuses. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ilp.h"
#include "inner.h"

static void fake_hw(HwProfile *hw)
{
    memset(hw, 0, sizeof *hw);
    strcpy(hw->name, "fake");
    hw->peak[PREC_BF16] = 1e15;
    hw->peak[PREC_FP32] = 6e13;
    hw->hbm_bytes = 16e9;
    hw->hbm_bw = 3e12;
    hw->gpus_per_node = 8;
    hw->intra = (Link){3e11, 5e-6};
    hw->inter = (Link){4e10, 1e-5};
    hw->act_bytes_per_layer = 12;
    hw->cuda_context_bytes = 1e9;
    hw->alloc_frag = 0.05;
    hw->nccl_buf_bytes = 5e7;
    hw->tp_overlap = 0.3;
    hw->dp_overlap = 0.8;
    hw->pp_overlap = 0.5;
    hw->fail_per_gpu_hour = 1e-5;
    hw->ckpt_bw_per_node = 1e9;
    hw->restart_s = 600;
}

static void small_model(ModelSpec *m, int L)
{
    memset(m, 0, sizeof *m);
    strcpy(m->name, "small");
    m->L = L;
    m->h = 2048;
    m->a = 16;
    m->vocab = 32000;
    m->s = 4096;
    m->mlp = MLP_GELU;
    m->pos = POS_LEARNED;
    m->tied = true;
    m->dropout = true;
    char err[128];
    assert_int_equal(spec_validate(m, err, sizeof err), 0);
}

static void outer(const ModelSpec *m, const HwProfile *hw, int pp, int dp, OptimShard opt, Layout *lo)
{
    layout_default(lo);
    lo->pp = pp;
    lo->dp = dp;
    lo->mbs = 2;
    lo->gbs = dp * lo->mbs * 6;
    lo->opt = opt;
    char err[200];
    assert_int_equal(layout_check(lo, m, hw, err, sizeof err), 0);
}

typedef struct {
    const InnerProblem *p;
    const ModelSpec *m;
    const HwProfile *hw;
    Layout lo;
    double best_obj, best_cost;
    long visited;
} Brute;

/* every (f, e) with f + e <= n on stages s.. */
static void brute_rc(Brute *b, int s)
{
    if (s == b->p->pp) {
        double obj = inner_objective(b->p, b->lo.layers, b->lo.full_rc, b->lo.sel_rc);
        b->visited++;
        if (!isfinite(obj))
            return;
        b->best_obj = fmin(b->best_obj, obj);
        Cost c;
        CostOpts o;
        cost_opts_default(&o);
        cost(b->m, b->hw, &b->lo, &o, &c);
        if (c.fits)
            b->best_cost = fmin(b->best_cost, c.step_s);
        return;
    }
    int n = b->lo.layers[s];
    for (int f = 0; f <= n; f++)
        for (int e = 0; e + f <= n; e++) {
            b->lo.full_rc[s] = f;
            b->lo.sel_rc[s] = e;
            brute_rc(b, s + 1);
        }
}

/* every split of L into pp positive parts (middle stages equal when asked) */
static void brute_split(Brute *b, int s, int left)
{
    int pp = b->p->pp;
    if (s == pp - 1) {
        b->lo.layers[s] = left;
        if (left >= 1)
            brute_rc(b, 0);
        return;
    }
    for (int n = 1; n <= left - (pp - 1 - s); n++) {
        if (b->p->even_middle && s >= 2 && n != b->lo.layers[1])
            continue;
        b->lo.layers[s] = n;
        brute_split(b, s + 1, left - n);
    }
}

/* capacity between the all-full and the no-recompute need of an even split */
static double mid_capacity(const ModelSpec *m, const HwProfile *hw, const Layout *lo0, double frac)
{
    Layout lo = *lo0;
    double lo_b = 0, hi_b = 0;
    for (int r = 0; r < 2; r++) {
        layout_set_recompute(&lo, r ? RECOMPUTE_NONE : RECOMPUTE_FULL);
        double peak = 0;
        for (int s = 0; s < lo.pp; s++) {
            StageMem sm;
            memory_stage(m, hw, &lo, s, &sm);
            peak = fmax(peak, sm.total);
        }
        *(r ? &hi_b : &lo_b) = peak;
    }
    return lo_b + frac * (hi_b - lo_b);
}

static int n_feasible, n_recompute, n_uneven;

static void check_case(int L, int pp, int dp, OptimShard opt, double frac, bool even_middle)
{
    ModelSpec m;
    HwProfile hw;
    fake_hw(&hw);
    small_model(&m, L);
    Layout lo;
    outer(&m, &hw, pp, dp, opt, &lo);
    hw.hbm_bytes = mid_capacity(&m, &hw, &lo, frac);
    static InnerProblem p;
    inner_build(&m, &hw, &lo, false, false, RECOMPUTE_NONE, &p);
    p.even_middle = even_middle;

    IlpOpts io;
    ilp_opts_default(&io);
    IlpResult r;
    IlpStatus st = ilp_solve(&p, &io, &r);

    Brute b = {.p = &p, .m = &m, .hw = &hw, .lo = lo, .best_obj = INFINITY, .best_cost = INFINITY};
    brute_split(&b, 0, L);
    if (!isfinite(b.best_obj)) {
        assert_int_equal(st, ILP_INFEASIBLE);
        return;
    }
    if (st != ILP_OPTIMAL)
        fail_msg("L %d pp %d frac %.2f: ILP %s (%s), brute force found %.6g", L, pp, frac, ilp_status_name(st),
                 r.msg, b.best_obj);
    if (fabs(r.sol.objective - b.best_obj) > 1e-9 * b.best_obj)
        fail_msg("L %d pp %d dp %d frac %.2f even %d: ILP %.12g != brute force %.12g", L, pp, dp, frac,
                 even_middle, r.sol.objective, b.best_obj);
    /* the ILP's layout, costed by the model, is the brute-force best */
    Layout got = lo;
    for (int s = 0; s < pp; s++) {
        got.layers[s] = r.sol.layers[s];
        got.full_rc[s] = r.sol.full_rc[s];
        got.sel_rc[s] = r.sol.sel_rc[s];
    }
    Cost c;
    CostOpts o;
    cost_opts_default(&o);
    cost(&m, &hw, &got, &o, &c);
    assert_true(c.fits);
    n_feasible++;
    for (int s = 0; s < pp; s++) {
        n_recompute += got.full_rc[s] + got.sel_rc[s] > 0;
        n_uneven += got.layers[s] != got.layers[0];
    }
    if (fabs(c.step_s - b.best_cost) > 1e-9 * b.best_cost)
        fail_msg("L %d pp %d: cost() of the ILP layout %.12g != brute-force best %.12g", L, pp, c.step_s, b.best_cost);
    assert_true(fabs(c.step_s - r.sol.objective) <= 1e-9 * c.step_s);
}

static void test_ilp_equals_brute_force(void **state)
{
    (void)state;
    const double fracs[] = {0.15, 0.5, 0.85, 1.2};
    for (int L = 6; L <= 8; L++)
        for (int pp = 2; pp <= 3; pp++)
            for (size_t k = 0; k < sizeof fracs / sizeof *fracs; k++) {
                check_case(L, pp, 1, OPT_ZERO0, fracs[k], true);
                check_case(L, pp, 2, OPT_DISTOPT, fracs[k], true);
                check_case(L, pp, 2, OPT_ZERO0, fracs[k], false);
            }
    check_case(8, 4, 1, OPT_ZERO0, 0.5, true);
    check_case(8, 4, 2, OPT_DISTOPT, 0.3, false);
    /* the cases exercise what the ILP decides: recomputation and uneven stages */
    assert_true(n_feasible > 40);
    assert_true(n_recompute > 10);
    assert_true(n_uneven > 10);
}

static void test_enumerate_equals_brute_force(void **state)
{
    (void)state;
    ModelSpec m;
    HwProfile hw;
    fake_hw(&hw);
    small_model(&m, 8);
    Layout lo;
    outer(&m, &hw, 1, 2, OPT_DISTOPT, &lo);
    for (double frac = 0.1; frac < 1.0; frac += 0.2) {
        hw.hbm_bytes = mid_capacity(&m, &hw, &lo, frac);
        static InnerProblem p;
        inner_build(&m, &hw, &lo, false, false, RECOMPUTE_NONE, &p);
        InnerSolution sol;
        inner_enumerate(&p, &sol);
        Brute b = {.p = &p, .m = &m, .hw = &hw, .lo = lo, .best_obj = INFINITY, .best_cost = INFINITY};
        brute_split(&b, 0, 8);
        assert_true(sol.feasible);
        assert_true(fabs(sol.objective - b.best_obj) <= 1e-9 * b.best_obj);
    }
}

static void build_small(InnerProblem *p, double cap_frac)
{
    ModelSpec m;
    HwProfile hw;
    fake_hw(&hw);
    small_model(&m, 8);
    Layout lo;
    outer(&m, &hw, 2, 1, OPT_ZERO0, &lo);
    hw.hbm_bytes = mid_capacity(&m, &hw, &lo, cap_frac);
    inner_build(&m, &hw, &lo, false, false, RECOMPUTE_NONE, p);
}

static void test_infeasible_is_typed(void **state)
{
    (void)state;
    static InnerProblem p;
    build_small(&p, 0.5);
    p.cap = 1e6;   /* a megabyte: nothing fits */
    IlpOpts io;
    ilp_opts_default(&io);
    IlpResult r;
    assert_int_equal(ilp_solve(&p, &io, &r), ILP_INFEASIBLE);
    assert_int_equal(r.status, ILP_INFEASIBLE);
    assert_false(r.sol.feasible);
}

static void test_bad_problem_and_dump_path(void **state)
{
    (void)state;
    static InnerProblem p;
    build_small(&p, 0.5);
    IlpOpts io;
    ilp_opts_default(&io);
    IlpResult r;
    io.dump_lp = "/nonexistent-dir/for/sure/x.lp";
    assert_int_equal(ilp_solve(&p, &io, &r), ILP_ERROR);
    assert_non_null(strstr(r.msg, "cannot write"));

    char path[] = "/tmp/ultraplan_ilp_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    io.dump_lp = path;
    assert_int_equal(ilp_solve(&p, &io, &r), ILP_OPTIMAL);
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    char buf[4096];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = 0;
    fclose(f);
    unlink(path);
    assert_non_null(strstr(buf, "Minimize"));
    assert_non_null(strstr(buf, "mem0"));

    InnerProblem bad = p;
    bad.pp = 0;
    io.dump_lp = NULL;
    assert_int_equal(ilp_solve(&bad, &io, &r), ILP_ERROR);
    bad = p;
    bad.cap = NAN;
    assert_int_equal(ilp_solve(&bad, &io, &r), ILP_ERROR);
}

static void test_cancel_and_cutoff(void **state)
{
    (void)state;
    static InnerProblem p;
    build_small(&p, 0.5);
    IlpOpts io;
    ilp_opts_default(&io);
    IlpResult r;
    volatile int cancel = 1;
    io.cancel = &cancel;
    assert_int_equal(ilp_solve(&p, &io, &r), ILP_NO_SOLUTION);
    io.cancel = NULL;
    assert_int_equal(ilp_solve(&p, &io, &r), ILP_OPTIMAL);
    double best = r.sol.objective;
    io.cutoff = best * 0.999;   /* nothing can beat this: infeasible, not an error */
    assert_int_equal(ilp_solve(&p, &io, &r), ILP_INFEASIBLE);
    io.cutoff = best * 1.001;
    assert_int_equal(ilp_solve(&p, &io, &r), ILP_OPTIMAL);
    assert_true(fabs(r.sol.objective - best) <= 1e-9 * best);
    for (int s = 0; s < ILP_STATUS_COUNT; s++)
        assert_string_not_equal(ilp_status_name((IlpStatus)s), "?");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ilp_equals_brute_force),
        cmocka_unit_test(test_enumerate_equals_brute_force),
        cmocka_unit_test(test_infeasible_is_typed),
        cmocka_unit_test(test_bad_problem_and_dump_path),
        cmocka_unit_test(test_cancel_and_cutoff),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
