/* search.c — the outer loop: enumerate layouts, bound them, solve the inner
 * problem of the promising ones, keep the k best; explain infeasibility. */
#include "planner.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ilp.h"
#include "inner.h"

#define MAX_CP 32          /* context parallel beyond 32 ranks is outside published practice */

/* One outer choice: the discrete knobs, its bounds and its place in the enumeration. */
typedef struct {
    short tp, cp, pp, vp;
    int dp, mbs;
    unsigned char opt, prec;
    bool sp;
    double lb;             // s per step, no plan of this choice can be faster
    double mem_lb;         // bytes, no plan of this choice needs less on its fullest GPU
    int idx;
} Outer;

typedef struct {
    Outer *v;
    long n, cap;
} OuterList;

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

void planner_request_default(PlanRequest *r)
{
    memset(r, 0, sizeof *r);
    layout_default(&r->base);
    r->top_k = 10;
    r->explain = true;
    r->recompute = RECOMPUTE_NONE;
}

void planner_thread_end(void) { ilp_thread_end(); }

void planner_result_free(PlanResult *r)
{
    if (!r)
        return;
    free(r->plans);
    memset(r, 0, sizeof *r);
}

const char *planner_bottleneck(const Cost *c)
{
    static const TimeKind kinds[] = {T_COMPUTE, T_BUBBLE, T_TP, T_DP, T_PP, T_CP, T_RECOMPUTE, T_OPTIM};
    int best = 0;
    for (int i = 1; i < (int)(sizeof kinds / sizeof *kinds); i++)
        if (c->time[kinds[i]] > c->time[kinds[best]])
            best = i;
    return cost_time_name(kinds[best]);
}

static bool push_outer(OuterList *l, const Outer *o)
{
    if (l->n == l->cap) {
        long cap = l->cap ? 2 * l->cap : 256;
        Outer *v = realloc(l->v, (size_t)cap * sizeof *v);
        if (!v)
            return false;
        l->v = v;
        l->cap = cap;
    }
    l->v[l->n] = *o;
    l->v[l->n].idx = (int)l->n;
    l->n++;
    return true;
}

/* The layout of an outer choice, checked; layers even (or the user's). */
static int outer_layout(const ModelSpec *m, const HwProfile *hw, const PlanRequest *req, const Outer *o, Layout *lo)
{
    char err[200];
    *lo = req->base;
    lo->tp = o->tp;
    lo->cp = o->cp;
    lo->pp = o->pp;
    lo->vp = o->vp;
    lo->dp = o->dp;
    lo->mbs = o->mbs;
    lo->opt = (OptimShard)o->opt;
    lo->prec = (Precision)o->prec;
    lo->sp = o->sp;
    if (!(req->fixed & FIX_STAGES))
        for (int s = 0; s < LAYOUT_MAX_PP; s++)
            lo->layers[s] = 0;
    for (int s = 0; s < LAYOUT_MAX_PP; s++)
        lo->full_rc[s] = lo->sel_rc[s] = 0;
    return layout_check(lo, m, hw, err, sizeof err);
}

static bool divides_all(const ModelSpec *m, int t) { return m->a % t == 0 && m->g % t == 0 && m->f % t == 0; }

/* Enumerate every valid outer choice. */
static int enumerate(const ModelSpec *m, const HwProfile *hw, const PlanRequest *req, OuterList *out)
{
    const Layout *b = &req->base;
    unsigned fx = req->fixed;
    int G = req->gpus, gbs = b->gbs;
    int tps[64], ntp = 0, cps[16], ncp = 0;
    for (int t = 1; t <= hw->gpus_per_node && t <= G && ntp < 64; t++)
        if ((fx & FIX_TP) ? t == b->tp : divides_all(m, t))
            tps[ntp++] = t;
    if ((fx & FIX_TP) && ntp == 0)
        tps[ntp++] = b->tp;   /* beyond the node: the user asked for it */
    if (fx & FIX_CP)
        cps[ncp++] = b->cp;
    else
        for (int c = 1; c <= MAX_CP; c *= 2)
            if (c == 1 || (m->s >= 8192 && m->s % (2 * c) == 0))
                cps[ncp++] = c;
    Precision precs[2] = {b->prec, PREC_FP8};
    int nprec = !(fx & FIX_PREC) && req->search_precision && b->prec != PREC_FP8 && hw->peak[PREC_FP8] > 0 ? 2 : 1;
    for (int it = 0; it < ntp; it++)
        for (int ic = 0; ic < ncp; ic++) {
            int tc = tps[it] * cps[ic];
            if (G % tc)
                continue;
            for (int pp = 1; pp <= m->L && pp <= LAYOUT_MAX_PP && pp <= G / tc; pp++) {
                if ((G / tc) % pp || ((fx & FIX_PP) && pp != b->pp))
                    continue;
                int dp = G / tc / pp;
                if (((fx & FIX_DP) && dp != b->dp) || gbs % dp)
                    continue;
                for (int mbs = 1; mbs <= gbs / dp; mbs *= 2) {
                    int mbs_v = (fx & FIX_MBS) ? b->mbs : mbs;
                    if ((gbs / dp) % mbs_v)
                        break;
                    int mb = gbs / dp / mbs_v;
                    for (int vp = 1; vp <= m->L / pp; vp++) {
                        if ((fx & FIX_VP) ? vp != b->vp : (vp > 1 && (pp < 2 || (fx & FIX_STAGES))))
                            continue;
                        if (vp > 1 && (m->L % (pp * vp) || mb % pp))
                            continue;
                        OptimShard opts[4];
                        int nopt = 0;
                        bool sharded = (long)dp * cps[ic] > 1;
                        if (fx & FIX_OPT) {
                            opts[nopt++] = b->opt;
                        } else {
                            opts[nopt++] = OPT_ZERO0;
                            if (sharded)
                                opts[nopt++] = OPT_DISTOPT;
                            if (sharded && pp == 1) {
                                opts[nopt++] = OPT_ZERO2;
                                opts[nopt++] = OPT_ZERO3;
                            }
                        }
                        for (int io = 0; io < nopt; io++)
                            for (int ip = 0; ip < nprec; ip++) {
                                Outer o = {.tp = (short)tps[it], .cp = (short)cps[ic], .pp = (short)pp,
                                           .vp = (short)vp, .dp = dp, .mbs = mbs_v,
                                           .opt = (unsigned char)opts[io], .prec = (unsigned char)precs[ip],
                                           /* SP only adds the LM-head gather and saves activations and
                                            * norm time tp-fold: Megatron turns it on with TP */
                                           .sp = (fx & FIX_SP) ? b->sp : tps[it] > 1};
                                Layout lo;
                                if (outer_layout(m, hw, req, &o, &lo) != 0)
                                    continue;
                                if (!push_outer(out, &o))
                                    return -1;
                            }
                    }
                    if (fx & FIX_MBS)
                        break;
                }
            }
        }
    return 0;
}

static int cmp_lb(const void *a, const void *b)
{
    const Outer *x = a, *y = b;
    if (x->lb != y->lb)
        return x->lb < y->lb ? -1 : 1;
    return x->idx - y->idx;
}

typedef struct {
    Plan plan;
    int idx;   // outer index: ties rank in enumeration order
} Ranked;

typedef struct {
    Ranked *v;
    int n, k;
} TopK;

static double kth_step(const TopK *t) { return t->n < t->k ? INFINITY : t->v[t->n - 1].plan.cost.step_s; }

static void topk_insert(TopK *t, const Ranked *r)
{
    int pos = t->n;
    while (pos > 0 && (t->v[pos - 1].plan.cost.step_s > r->plan.cost.step_s
                       || (t->v[pos - 1].plan.cost.step_s == r->plan.cost.step_s && t->v[pos - 1].idx > r->idx)))
        pos--;
    if (pos >= t->k)
        return;
    int last = t->n < t->k ? t->n : t->k - 1;
    memmove(&t->v[pos + 1], &t->v[pos], (size_t)(last - pos) * sizeof *t->v);
    t->v[pos] = *r;
    if (t->n < t->k)
        t->n++;
}

typedef struct {
    const ModelSpec *m;
    const HwProfile *hw;
    const CostOpts *o;
    const PlanRequest *req;
    bool first_fit;         // stop at the first layout that fits (GPU-count search)
    PlanResult *res;
    TopK top;
    char ilp_err[200];      // first ILP fault, if any
} Search;

/* Solve the inner problem of one outer choice; true and *plan when it fits. */
static bool evaluate(Search *S, const Outer *ou, Plan *plan, const char *dump_lp)
{
    const PlanRequest *req = S->req;
    Layout lo;
    if (outer_layout(S->m, S->hw, req, ou, &lo) != 0)
        return false;
    InnerProblem *p = malloc(sizeof *p);
    if (!p)
        return false;
    bool rc_forced = (req->fixed & FIX_RC) != 0;
    inner_build(S->m, S->hw, &lo, (req->fixed & FIX_STAGES) != 0, rc_forced, req->recompute, p);
    InnerSolution sol;
    bool all_fixed = true;
    for (int s = 0; s < p->pp; s++)
        all_fixed &= p->fix_layers[s] > 0;
    if (all_fixed && !dump_lp) {
        inner_enumerate(p, &sol);
    } else {
        IlpOpts io;
        ilp_opts_default(&io);
        io.cancel = req->cancel;
        io.dump_lp = dump_lp;
        if (!req->exhaustive && !S->first_fit && isfinite(kth_step(&S->top)))
            io.cutoff = kth_step(&S->top);
        IlpResult r;
        ilp_solve(p, &io, &r);
        S->res->ilp_solved++;
        sol = r.sol;
        sol.feasible = r.status == ILP_OPTIMAL || r.status == ILP_FEASIBLE;
        if (r.status == ILP_ERROR && !S->ilp_err[0])
            snprintf(S->ilp_err, sizeof S->ilp_err, "%s", r.msg);
    }
    free(p);
    if (!sol.feasible)
        return false;
    for (int s = 0; s < lo.pp; s++) {
        lo.layers[s] = sol.layers[s];
        lo.full_rc[s] = sol.full_rc[s];
        lo.sel_rc[s] = sol.sel_rc[s];
    }
    char err[200];
    if (layout_check(&lo, S->m, S->hw, err, sizeof err) != 0)
        return false;
    plan->layout = lo;
    cost(S->m, S->hw, &lo, S->o, &plan->cost);
    if (!plan->cost.fits)
        return false;
    bool rc = false;
    for (int s = 0; s < lo.pp; s++)
        rc |= lo.full_rc[s] + lo.sel_rc[s] > 0;
    plan->bottleneck = rc && !rc_forced ? "memory" : planner_bottleneck(&plan->cost);
    return true;
}

/* Bounds of every outer choice, then visit them best bound first. */
static int run(Search *S, char *err, int errlen)
{
    PlanResult *res = S->res;
    OuterList L = {0};
    if (enumerate(S->m, S->hw, S->req, &L) != 0) {
        free(L.v);
        snprintf(err, errlen, "planner: out of memory");
        return -1;
    }
    res->outer_total = L.n;
    InnerProblem *p = malloc(sizeof *p);
    if (!p) {
        free(L.v);
        snprintf(err, errlen, "planner: out of memory");
        return -1;
    }
    bool rc_forced = (S->req->fixed & FIX_RC) != 0;
    for (long i = 0; i < L.n; i++) {
        Layout lo;
        outer_layout(S->m, S->hw, S->req, &L.v[i], &lo);
        inner_build(S->m, S->hw, &lo, (S->req->fixed & FIX_STAGES) != 0, rc_forced, S->req->recompute, p);
        L.v[i].lb = inner_lower_bound(p);
        L.v[i].mem_lb = inner_memory_bound(p);
    }
    free(p);
    if (L.n > 1)
        qsort(L.v, (size_t)L.n, sizeof *L.v, cmp_lb);
    for (long i = 0; i < L.n; i++) {
        const Outer *ou = &L.v[i];
        if (S->req->cancel && *S->req->cancel) {
            res->cancelled = true;
            break;
        }
        if (S->req->progress && (i & 63) == 0)
            S->req->progress(S->req->progress_ctx, i, L.n);
        if (!S->req->exhaustive) {
            if (ou->lb > kth_step(&S->top)) {
                res->outer_pruned += L.n - i;   /* sorted: nothing after can win either */
                break;
            }
            if (ou->mem_lb > S->hw->hbm_bytes) {
                res->outer_pruned++;
                continue;
            }
        }
        res->outer_evaluated++;
        Ranked r = {.idx = ou->idx};
        if (evaluate(S, ou, &r.plan, NULL)) {
            topk_insert(&S->top, &r);
            if (S->first_fit)
                break;
        }
    }
    free(L.v);
    return 0;
}

static int search_once(const ModelSpec *m, const HwProfile *hw, const CostOpts *o, const PlanRequest *req,
                       bool first_fit, PlanResult *out, char *err, int errlen)
{
    Search S = {.m = m, .hw = hw, .o = o, .req = req, .first_fit = first_fit, .res = out};
    S.top.k = first_fit ? 1 : req->top_k;
    S.top.v = calloc((size_t)S.top.k, sizeof *S.top.v);
    if (!S.top.v) {
        snprintf(err, errlen, "planner: out of memory");
        return -1;
    }
    if (run(&S, err, errlen) != 0) {
        free(S.top.v);
        return -1;
    }
    out->plans = calloc((size_t)(S.top.n ? S.top.n : 1), sizeof *out->plans);
    if (!out->plans) {
        free(S.top.v);
        snprintf(err, errlen, "planner: out of memory");
        return -1;
    }
    for (int i = 0; i < S.top.n; i++)
        out->plans[i] = S.top.v[i].plan;
    out->n = S.top.n;
    free(S.top.v);
    if (out->n == 0 && S.ilp_err[0]) {
        snprintf(err, errlen, "planner: the ILP failed: %s", S.ilp_err);
        return -1;
    }
    return 0;
}

/* The least per-GPU memory of any outer choice: full recomputation on even stages. */
static double least_memory(const ModelSpec *m, const HwProfile *hw, const PlanRequest *req, Layout *best)
{
    OuterList L = {0};
    double least = INFINITY;
    if (enumerate(m, hw, req, &L) != 0) {
        free(L.v);
        return least;
    }
    for (long i = 0; i < L.n; i++) {
        Layout lo = req->base;
        if (outer_layout(m, hw, req, &L.v[i], &lo) != 0)
            continue;
        layout_set_recompute(&lo, (req->fixed & FIX_RC) ? req->recompute : RECOMPUTE_FULL);
        double peak = 0;
        for (int s = 0; s < lo.pp; s++) {
            StageMem sm;
            memory_stage(m, hw, &lo, s, &sm);
            peak = fmax(peak, sm.total);
        }
        if (peak < least) {
            least = peak;
            *best = lo;
        }
    }
    free(L.v);
    return least;
}

static void describe(const Layout *lo, char *buf, int len)
{
    snprintf(buf, len, "tp %d, pp %d, dp %d, cp %d, vp %d, mbs %d, %s", lo->tp, lo->pp, lo->dp, lo->cp, lo->vp,
             lo->mbs, layout_opt_name(lo->opt));
}

/* Nothing fits: say by how much, and find the smallest GPU count that works. */
static void explain(const ModelSpec *m, const HwProfile *hw, const CostOpts *o, const PlanRequest *req,
                    PlanResult *res)
{
    char lay[160], lay2[160];
    Layout lo;
    layout_default(&lo);
    double gib = 1073741824.0;
    res->min_peak_bytes = least_memory(m, hw, req, &lo);
    int k = 0;
    if (!isfinite(res->min_peak_bytes)) {
        k = snprintf(res->infeasible, sizeof res->infeasible,
                     "no layout of %s divides %d GPUs with global batch %d (tp must divide the %d heads, "
                     "dp must divide the batch)", m->name, req->gpus, req->base.gbs, m->a);
    } else {
        describe(&lo, lay, sizeof lay);
        k = snprintf(res->infeasible, sizeof res->infeasible,
                     "%s does not fit on %d x %s (%.1f GiB each): the least memory any layout needs is %.1f GiB "
                     "per GPU (%s, %s recomputation).", m->name, req->gpus, hw->name, hw->hbm_bytes / gib,
                     res->min_peak_bytes / gib, lay,
                     (req->fixed & FIX_RC) ? spec_recompute_name(req->recompute) : "full");
    }
    if (k < 0 || k >= (int)sizeof res->infeasible)
        return;
    /* states alone need (w + g + o) bytes per parameter spread over all GPUs: no count below fits */
    double N = (double)spec_params(m, 1, PARAMS_EXACT);
    const Layout *b = &req->base;
    double per_param = memory_weight_bytes(b) + memory_grad_bytes(b) + memory_optim_bytes(b);
    long gpn = hw->gpus_per_node > 0 ? hw->gpus_per_node : 1;
    long g = (long)ceil(per_param * N / hw->hbm_bytes);
    long start = ((req->gpus / gpn) + 1) * gpn;
    g = ((g + gpn - 1) / gpn) * gpn;
    if (g < start)
        g = start;
    PlanRequest r2 = *req;
    r2.explain = false;
    r2.top_k = 1;
    r2.dump_lp = NULL;
    r2.progress = NULL;
    for (int tries = 0; g <= 1L << 20 && tries < 4096; tries++) {
        if (req->cancel && *req->cancel)
            return;
        r2.gpus = (int)g;
        PlanResult pr = {0};
        char e[200];
        if (search_once(m, hw, o, &r2, true, &pr, e, sizeof e) == 0 && pr.n > 0) {
            res->min_gpus = (int)g;
            describe(&pr.plans[0].layout, lay2, sizeof lay2);
            snprintf(res->infeasible + k, sizeof res->infeasible - k,
                     " The smallest GPU count that fits with global batch %d is %ld (%s, %.1f GiB peak).",
                     req->base.gbs, g, lay2, pr.plans[0].cost.peak_bytes / gib);
            planner_result_free(&pr);
            return;
        }
        planner_result_free(&pr);
        /* linear over nodes up to 64 nodes, then doubling (the answer is then a bound) */
        g += g < 64 * gpn ? gpn : g;
    }
    snprintf(res->infeasible + k, sizeof res->infeasible - k,
             " No GPU count up to %ld fits with global batch %d.", g, req->base.gbs);
}

int planner_search(const ModelSpec *m, const HwProfile *hw, const CostOpts *o, const PlanRequest *req,
                   PlanResult *out, char *err, int errlen)
{
    memset(out, 0, sizeof *out);
    double t0 = now_s();
    if (req->gpus < 1) {
        snprintf(err, errlen, "planner: --gpus must be >= 1 (got %d)", req->gpus);
        return -1;
    }
    if (req->top_k < 1) {
        snprintf(err, errlen, "planner: top_k must be >= 1 (got %d)", req->top_k);
        return -1;
    }
    if (req->base.gbs < 1) {
        snprintf(err, errlen, "planner: the global batch must be >= 1 (got %d)", req->base.gbs);
        return -1;
    }
    if (hw->peak[req->base.prec] <= 0) {
        snprintf(err, errlen, "planner: %s does not support %s", hw->name, hw_precision_name(req->base.prec));
        return -1;
    }
    if (search_once(m, hw, o, req, false, out, err, errlen) != 0)
        return -1;
    if (out->n > 0 && req->dump_lp) {
        /* the ILP of the winning outer choice, written and solved once more */
        Layout lo = out->plans[0].layout;
        InnerProblem *p = malloc(sizeof *p);
        if (p) {
            if (!(req->fixed & FIX_STAGES))
                for (int s = 0; s < lo.pp; s++)
                    lo.layers[s] = 0;
            layout_check(&lo, m, hw, err, errlen);
            inner_build(m, hw, &lo, (req->fixed & FIX_STAGES) != 0, (req->fixed & FIX_RC) != 0, req->recompute, p);
            IlpOpts io;
            ilp_opts_default(&io);
            io.dump_lp = req->dump_lp;
            IlpResult r;
            ilp_solve(p, &io, &r);
            free(p);
            if (r.status == ILP_ERROR) {
                snprintf(err, errlen, "--dump-lp: %s", r.msg);
                planner_result_free(out);
                return -1;
            }
        }
    }
    if (out->n == 0 && !out->cancelled && req->explain)
        explain(m, hw, o, req, out);
    out->seconds = now_s() - t0;
    return 0;
}
