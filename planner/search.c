/* search.c — the outer loop: enumerate layouts, bound them, solve the inner
 * problem of the promising ones, keep the k best; explain infeasibility.
 * Under target megatron an outer choice whose fixed split Megatron-LM
 * cannot express is no choice, the inner problem is inner_megatron's, and
 * a plan that layout_megatron_check refuses is never kept; every plan fits
 * under capacity less the request's memory margin. */
#include "planner.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "export.h"
#include "ilp.h"
#include "inner.h"
#include "refuse.h"

#define MAX_CP 32          /* context parallel beyond 32 ranks is outside published practice */

/* One outer choice: the discrete knobs, its bounds and its place in the enumeration. */
typedef struct {
    short tp, cp, pp, vp;
    short ep, etp;         // expert parallel, expert tensor parallel (1, 0 for a dense model)
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
    lo->ep = o->ep > 0 ? o->ep : 1;
    lo->etp = o->etp;
    lo->mbs = o->mbs;
    lo->opt = (OptimShard)o->opt;
    lo->prec = (Precision)o->prec;
    lo->sp = o->sp;
    if (!(req->fixed & FIX_STAGES))
        for (int s = 0; s < LAYOUT_MAX_PP; s++)
            lo->layers[s] = 0;
    for (int s = 0; s < LAYOUT_MAX_PP; s++)
        lo->full_rc[s] = lo->sel_rc[s] = 0;
    if (layout_check(lo, m, hw, err, sizeof err) != 0)
        return -1;
    /* what ultraplan's executor of the target refuses is no choice (the
     * stages are split later: evaluate() asks again with them) */
    if (export_target_refuse(m, lo, lo->target, err, sizeof err) != 0)
        return -1;
    /* what the Megatron export cannot write whatever the split (fp8
     * attention; ZeRO-2 with pp, which a zero2_pp stack lets layout_check pass) */
    if (lo->target == TARGET_MEGATRON && layout_megatron_unsplit(lo, err, sizeof err) != 0)
        return -1;
    /* a given split Megatron-LM cannot express leaves nothing to search */
    if (lo->target == TARGET_MEGATRON && (req->fixed & FIX_STAGES) && layout_megatron_check(lo, m, err, sizeof err))
        return -1;
    return 0;
}

static bool divides_all(const ModelSpec *m, int t) { return m->a % t == 0 && m->g % t == 0 && m->f % t == 0; }

/* Interleaving vp on pp stages splits the layers: a multiple of pp*vp, or
 * under --target megatron with the embedding and/or loss counted as a layer
 * (our executor needs every stage a multiple of vp). */
static bool vp_splits(const ModelSpec *m, Target t, int pp, int vp)
{
    int e, l;
    if (t != TARGET_MEGATRON)
        return m->L % (pp * vp) == 0;
    return layout_interleave_rule(m->L, pp, vp, &e, &l) == 0;
}

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
                        if (vp > 1 && ((!b->pp_layout[0] && !vp_splits(m, b->target, pp, vp)) || mb % pp))
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
                            }   /* ZeRO-2 beside PP (a zero2_pp stack): no target runs or exports it */
                        }
                        /* expert layouts: ep dividing the experts and, with etp, tp·cp·dp
                         * (parallel folding); etp tp (Megatron's default) or 1 */
                        int eps[32], neps = 0, etps[2], netp = 0;
                        int ranks = tps[it] * cps[ic] * dp;
                        if (!spec_is_moe(m)) {
                            eps[neps++] = 1;
                        } else {
                            for (int e = 1; e <= m->experts && e <= ranks && neps < 32; e++)
                                if (m->experts % e == 0 && ranks % e == 0 && (!(fx & FIX_EP) || e == b->ep))
                                    eps[neps++] = e;
                        }
                        if (fx & FIX_ETP) {
                            etps[netp++] = b->etp;
                        } else {
                            etps[netp++] = 0;
                            if (spec_is_moe(m) && tps[it] > 1)
                                etps[netp++] = 1;
                        }
                        for (int ie = 0; ie < neps; ie++)
                        for (int ix = 0; ix < netp; ix++)
                        for (int io = 0; io < nopt; io++)
                            for (int ip = 0; ip < nprec; ip++) {
                                Outer o = {.tp = (short)tps[it], .cp = (short)cps[ic], .pp = (short)pp,
                                           .vp = (short)vp, .dp = dp, .mbs = mbs_v,
                                           .ep = (short)eps[ie], .etp = (short)etps[ix],
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
    PlanRank by;
} TopK;

/* The figure plans are ranked by (lower is better). */
static double rank_key(PlanRank by, const Plan *p)
{
    return by == PLAN_RANK_COST ? p->cost.train.days_with_failures * 24.0 * layout_gpus(&p->layout) : p->cost.step_s;
}

/* The k-th best step time, for the time bounds: none when ranking by cost. */
static double kth_step(const TopK *t)
{
    return t->n < t->k || t->by != PLAN_RANK_TIME ? INFINITY : t->v[t->n - 1].plan.cost.step_s;
}

static void topk_insert(TopK *t, const Ranked *r)
{
    int pos = t->n;
    double key = rank_key(t->by, &r->plan);
    while (pos > 0 && (rank_key(t->by, &t->v[pos - 1].plan) > key
                       || (rank_key(t->by, &t->v[pos - 1].plan) == key && t->v[pos - 1].idx > r->idx)))
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
    double cap;             // bytes a plan may use per GPU: capacity less the margin
    PlanResult *res;
    TopK top;
    char ilp_err[200];      // first ILP fault, if any
} Search;

/* bytes below the peak cost() found, on top of its overshoot, when the inner
 * problem is solved again with a lower cap (evaluate) */
#define RETRY_SLACK (16.0 * 1048576.0)

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
    p->cap -= req->mem_margin_bytes;
    bool all_fixed = true;
    for (int s = 0; s < p->pp; s++)
        all_fixed &= p->fix_layers[s] > 0;
    /* The inner problem bounds memory_stage() from above (inner.h: the
     * ILP's form prices a mixture's dense layers at the worse of the two
     * kinds; a known split is counted by kind), so cost() should never
     * find a solution over the cap. Should it (a term the form misses),
     * the form's cap is lowered by the overshoot and the problem solved
     * again, so that more recomputation is tried before the layout is
     * given up, rather than dropping a layout that fits. */
    bool fits = false;
    for (int tries = 0; tries < 4 && !fits; tries++) {
        InnerSolution sol;
        if ((p->megatron || p->torchtitan) && !dump_lp) {
            inner_megatron(p, &sol);
        } else if (all_fixed && !dump_lp) {
            inner_enumerate(p, &sol);
        } else {
            IlpOpts io;
            ilp_opts_default(&io);
            io.cancel = req->cancel;
            io.dump_lp = tries == 0 ? dump_lp : NULL;
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
        if (!sol.feasible)
            break;
        for (int s = 0; s < lo.pp; s++) {
            lo.layers[s] = sol.layers[s];
            lo.full_rc[s] = sol.full_rc[s];
            lo.sel_rc[s] = sol.sel_rc[s];
        }
        char err[200];
        if (layout_check(&lo, S->m, S->hw, err, sizeof err) != 0)
            break;
        /* Megatron-LM runs it as laid out, or it is not offered; so for our executors */
        if (lo.target == TARGET_MEGATRON && layout_megatron_check(&lo, S->m, err, sizeof err) != 0)
            break;
        if (export_target_refuse(S->m, &lo, lo.target, err, sizeof err) != 0)
            break;
        plan->layout = lo;
        cost(S->m, S->hw, &lo, S->o, &plan->cost);
        fits = plan->cost.fits && plan->cost.peak_bytes <= S->cap;   /* S->cap: the GPU less the margin */
        if (!fits && isfinite(plan->cost.peak_bytes))
            p->cap -= plan->cost.peak_bytes - S->cap + RETRY_SLACK;
    }
    free(p);
    if (!fits)
        return false;
    /* within the budget, failures included */
    const Training *tr = &plan->cost.train;
    double gh = tr->days_with_failures * 24.0 * layout_gpus(&lo);
    if ((req->budget_days > 0 && !(tr->days_with_failures <= req->budget_days)) ||
        (req->budget_gpu_hours > 0 && !(gh <= req->budget_gpu_hours))) {
        S->res->over_budget++;
        if (tr->days_with_failures < S->res->best_over_days) {
            S->res->best_over_days = tr->days_with_failures;
            S->res->best_over_gpu_hours = gh;
        }
        return false;
    }
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
            if (ou->mem_lb > S->cap) {
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
    Search S = {.m = m, .hw = hw, .o = o, .req = req, .first_fit = first_fit, .res = out,
                .cap = hw->hbm_bytes - req->mem_margin_bytes};
    S.top.k = first_fit ? 1 : req->top_k;
    S.top.by = first_fit ? PLAN_RANK_TIME : req->rank_by;
    out->best_over_days = out->best_over_gpu_hours = INFINITY;
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

/* ---- when the user's fixed knobs leave no layout: which one, and what would do ---- */

/* "1, 2, 4, 8" (", ..." when it runs out of room); "" when n == 0. */
static void int_list(const int *v, int n, char *buf, int len)
{
    int k = 0;
    buf[0] = 0;
    for (int i = 0; i < n; i++) {
        char one[24];
        snprintf(one, sizeof one, "%s%d", i ? ", " : "", v[i]);
        if (k + (int)strlen(one) + 6 >= len) {
            snprintf(buf + k, len - k, ", ...");
            return;
        }
        k += snprintf(buf + k, len - k, "%s", one);
    }
}

/* "tp can be 1, 2, 4, 8" / "tp can only be 1" */
static void can_be(const char *name, const int *v, int n, char *buf, int len)
{
    char l[160];
    int_list(v, n, l, sizeof l);
    snprintf(buf, len, n == 1 ? "%s can only be %s" : "%s can be %s", name, l);
}

static int fixed_or(const PlanRequest *req, unsigned bit, int v) { return (req->fixed & bit) ? v : 1; }

/* tp values the search itself would try: within the node and the cluster, dividing heads, KV heads and ffn. */
static void valid_tp(const ModelSpec *m, const HwProfile *hw, int G, char *buf, int len)
{
    int v[64] = {0}, n = 0;
    for (int t = 1; t <= hw->gpus_per_node && t <= G && n < 64; t++)
        if (divides_all(m, t) && G % t == 0)
            v[n++] = t;
    can_be("tp", v, n, buf, len);
}

/* pp values for the GPUs left by fixed tp and cp: at most the layers and LAYOUT_MAX_PP. */
static void valid_pp(const ModelSpec *m, int left, char *buf, int len)
{
    int v[64] = {0}, n = 0;
    for (int p = 1; p <= m->L && p <= LAYOUT_MAX_PP && p <= left && n < 64; p++)
        if (left % p == 0)
            v[n++] = p;
    can_be("pp", v, n, buf, len);
}

static void valid_cp(const ModelSpec *m, int G, char *buf, int len)
{
    int v[16] = {0}, n = 0;
    for (int c = 1; c <= MAX_CP && c <= G; c *= 2)
        if (G % c == 0 && (c == 1 || m->s % (2 * c) == 0))
            v[n++] = c;
    can_be("cp", v, n, buf, len);
}

/* pp >= 2 dividing `left` GPUs with the layers a multiple of pp*vp, or so
 * with the embedding and/or loss counted as a layer (Megatron's account-for). */
static int pps_for_vp(const ModelSpec *m, Target t, int left, int vp, int *v, int cap)
{
    int n = 0;
    for (int p = 2; p <= m->L && p <= LAYOUT_MAX_PP && p <= left && n < cap; p++)
        if (left % p == 0 && vp_splits(m, t, p, vp))
            v[n++] = p;
    return n;
}

/* "--tp 8", "--dist-opt", "--stage-layers 10,12" as the user gave it. */
static void fixed_text(unsigned bit, const Layout *b, char *buf, int len)
{
    switch (bit) {
    case FIX_TP: snprintf(buf, len, "--tp %d", b->tp); break;
    case FIX_PP: snprintf(buf, len, "--pp %d", b->pp); break;
    case FIX_VP: snprintf(buf, len, "--vp %d", b->vp); break;
    case FIX_CP: snprintf(buf, len, "--cp %d", b->cp); break;
    case FIX_DP: snprintf(buf, len, "--dp %d", b->dp); break;
    case FIX_MBS: snprintf(buf, len, "--mbs %d", b->mbs); break;
    case FIX_OPT:
        if (b->opt == OPT_DISTOPT)
            snprintf(buf, len, "--dist-opt");
        else
            snprintf(buf, len, "--zero %d", (int)b->opt);
        break;
    case FIX_STAGES: snprintf(buf, len, "--stage-layers"); break;
    default: snprintf(buf, len, "?"); break;
    }
}

/* The message of a fixed knob at fault; cut at `len` if it must be. */
__attribute__((format(printf, 3, 4))) static void fault_msg(char *buf, int len, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, len, fmt, ap);
    va_end(ap);
}

#define FAULT(...) do { fault_msg(buf, len, __VA_ARGS__); return true; } while (0)

/* One fixed knob that no layout can have, by itself. */
static bool single_fault(const ModelSpec *m, const HwProfile *hw, const PlanRequest *req, char *buf, int len)
{
    const Layout *b = &req->base;
    unsigned fx = req->fixed;
    int G = req->gpus, gbs = b->gbs;
    char ok[200];
    if (fx & FIX_TP) {
        int t = b->tp;
        valid_tp(m, hw, G, ok, sizeof ok);
        if (m->a % t)
            FAULT("--tp %d does not divide the %d heads of %s; %s", t, m->a, m->name, ok);
        if (m->g % t)
            FAULT("--tp %d does not divide the %d KV heads of %s (each TP rank needs whole KV groups); %s", t, m->g,
                  m->name, ok);
        if (m->f % t)
            FAULT("--tp %d does not divide the ffn size %d of %s; %s", t, m->f, m->name, ok);
        if (t > G)
            FAULT("--tp %d is more than the %d GPUs (--gpus); %s", t, G, ok);
        if (G % t)
            FAULT("--tp %d does not divide the %d GPUs (--gpus); %s", t, G, ok);
    }
    if (fx & FIX_CP) {
        int c = b->cp;
        valid_cp(m, G, ok, sizeof ok);
        if (c > 1 && m->s % (2 * c))
            FAULT("--cp %d needs the sequence length %d to be a multiple of 2*cp = %d (load-balanced context "
                  "parallel); %s", c, m->s, 2 * c, ok);
        if (c > 1 && m->mtp_layers > 0 && b->target == TARGET_ULTRAPLAN)   /* the CUDA one runs no MTP at all */
            FAULT("--cp %d with --mtp-layers %d: ultraplan's executor runs multi-token prediction at cp 1 only (the "
                  "tokens k ahead may lie on another cp rank); leave out --cp, or plan for --target megatron", c,
                  m->mtp_layers);
        if (c > G)
            FAULT("--cp %d is more than the %d GPUs (--gpus); %s", c, G, ok);
        if (G % c)
            FAULT("--cp %d does not divide the %d GPUs (--gpus); %s", c, G, ok);
    }
    int tc = fixed_or(req, FIX_TP, b->tp) * fixed_or(req, FIX_CP, b->cp);
    int left = G % tc ? G : G / tc;   /* GPUs per tp*cp group once tp and cp are what the user fixed */
    if (fx & FIX_STAGES) {
        int sum = 0;
        for (int s = 0; s < b->pp; s++)
            sum += b->layers[s];
        if (sum != m->L && sum > 0)
            FAULT("--stage-layers sum to %d, but %s has %d layers", sum, m->name, m->L);
        char why[300];
        if (b->target == TARGET_MEGATRON && layout_megatron_check(b, m, why, sizeof why) != 0)
            FAULT("--stage-layers: %s; give a split with equal middle stages, or --target ultraplan for "
                  "ultraplan's executor", why);
    }
    if (fx & FIX_PP) {
        int p = b->pp;
        valid_pp(m, left, ok, sizeof ok);
        if (p > m->L)
            FAULT("--pp %d is more than the %d layers of %s (each stage needs a layer); %s", p, m->L, m->name, ok);
        if (p > LAYOUT_MAX_PP)
            FAULT("--pp %d exceeds the supported %d stages; %s", p, LAYOUT_MAX_PP, ok);
        if (p > G)
            FAULT("--pp %d is more than the %d GPUs (--gpus); %s", p, G, ok);
        if (G % p)
            FAULT("--pp %d does not divide the %d GPUs (--gpus); %s", p, G, ok);
    }
    if ((fx & FIX_VP) && b->vp > 1 && !b->pp_layout[0]) {   /* a --pipeline-layout says its own chunks */
        int v = b->vp, pv[64];
        int np = pps_for_vp(m, b->target, left, v, pv, 64);
        char alt[200] = "";
        if (np > 0) {
            char l[160];
            int_list(pv, np, l, sizeof l);
            snprintf(alt, sizeof alt, "vp %d works with pp %s", v, l);
        } else {
            snprintf(alt, sizeof alt, "no pp that divides the %d GPUs works with vp %d", left, v);
        }
        if ((fx & FIX_PP) && b->pp < 2)
            FAULT("--vp %d needs --pp 2 or more (interleaving splits each pipeline rank's layers); %s", v, alt);
        if ((fx & FIX_PP) && !vp_splits(m, b->target, b->pp, v)) {
            int vv[64] = {0}, nv = 0;
            for (int k = 1; k <= m->L / b->pp && nv < 64; k++)
                if (k == 1 || vp_splits(m, b->target, b->pp, k))
                    vv[nv++] = k;
            char with[200];
            can_be("vp", vv, nv, with, sizeof with);
            FAULT("--vp %d with --pp %d needs the %d layers of %s to be a multiple of pp*vp = %d, or %d or %d with "
                  "the embedding and/or loss counted as a layer (Megatron's --account-for-*-in-pipeline-split); "
                  "with pp %d %s; %s", v, b->pp, m->L, m->name, b->pp * v, m->L + 1, m->L + 2, b->pp, with, alt);
        }
        if (!(fx & FIX_PP) && np == 0)
            FAULT("--vp %d needs pp >= 2 with the %d layers of %s a multiple of pp*vp, and %s", v, m->L, m->name,
                  alt);
        if (fx & FIX_STAGES)
            FAULT("--vp %d needs every stage's layers in vp equal chunks, which the given split does not give", v);
    }
    if (fx & FIX_DP) {
        int d = b->dp;
        if (d > G)
            FAULT("--dp %d is more than the %d GPUs (--gpus)", d, G);
        if (G % d)
            FAULT("--dp %d does not divide the %d GPUs (--gpus)", d, G);
        if (gbs % d)
            FAULT("--dp %d does not divide the global batch of %d sequences (each DP rank takes whole sequences)",
                  d, gbs);
    }
    /* the fixed parallel sizes multiply to the GPUs they take */
    unsigned par = fx & (FIX_TP | FIX_PP | FIX_DP | FIX_CP);
    if (par & (par - 1)) {   /* two or more of them */
        static const unsigned bits[] = {FIX_TP, FIX_PP, FIX_DP, FIX_CP};
        char prod[160] = "";
        double P = 1;
        int k = 0;
        for (int i = 0; i < 4; i++)
            if (par & bits[i]) {
                char one[40];
                fixed_text(bits[i], b, one, sizeof one);
                k += snprintf(prod + k, sizeof prod - k, "%s%s", k ? " x " : "", one);
                P *= bits[i] == FIX_TP ? b->tp : bits[i] == FIX_PP ? b->pp : bits[i] == FIX_DP ? b->dp : b->cp;
            }
        const char *hint = (fx & FIX_DP) ? "; leave out --dp and it follows from --gpus" : "";
        if (P > G)
            FAULT("%s = %.0f GPUs, more than the %d of --gpus (with these knobs --gpus must be a multiple of %.0f)%s",
                  prod, P, G, P, hint);
        if (fmod(G, P) != 0)
            FAULT("%s = %.0f does not divide the %d GPUs of --gpus%s", prod, P, G, hint);
        /* dp, tp and pp fixed: cp is what is left, and must be one the search tries (1 unless fixed) */
        bool three = (par & (FIX_TP | FIX_PP | FIX_DP)) == (FIX_TP | FIX_PP | FIX_DP);
        long c = (long)(G / P);
        bool cp_ok = !(fx & FIX_CP) && (c == 1 || (c <= MAX_CP && (c & (c - 1)) == 0 && m->s >= 8192 &&
                                                   m->s % (2 * c) == 0));
        if (three && P != G && !cp_ok)
            FAULT("%s = %.0f GPUs, but --gpus is %d (dp x tp x pp x cp must equal the GPUs)%s", prod, P, G, hint);
        /* pp and dp fixed: what is left is tp x cp, and tp stays within a node */
        if ((fx & FIX_PP) && (fx & FIX_DP) && !three && !((fx & FIX_TP) && (fx & FIX_CP))) {
            long rest = (long)(G / P);
            bool found = false;
            for (int t = 1; t <= (fx & FIX_TP ? 1 : hw->gpus_per_node) && !found; t++)
                for (int cc = 1; cc <= (fx & FIX_CP ? 1 : MAX_CP) && !found; cc *= 2)
                    found = (long)t * cc == rest && ((fx & FIX_TP) || divides_all(m, t)) &&
                            ((fx & FIX_CP) || cc == 1 || (m->s >= 8192 && m->s % (2 * cc) == 0));
            if (!found) {
                valid_tp(m, hw, G, ok, sizeof ok);
                char cps[200];
                if (m->s >= 8192)
                    valid_cp(m, G, cps, sizeof cps);
                else
                    snprintf(cps, sizeof cps, "cp > 1 is searched only for sequences of 8192 or more: give --cp");
                FAULT("%s = %.0f leaves %ld GPUs for %s, which the search cannot fill (%s%s%s)", prod, P, rest,
                      (fx & FIX_TP) ? "cp" : (fx & FIX_CP) ? "tp" : "tp x cp", (fx & FIX_TP) ? "" : ok,
                      !(fx & (FIX_TP | FIX_CP)) ? "; " : "", (fx & FIX_CP) ? "" : cps);
            }
        }
    }
    if (fx & FIX_MBS) {
        int u = b->mbs;
        if (u > gbs)
            FAULT("--mbs %d is more than the global batch of %d sequences", u, gbs);
        if (gbs % u)
            FAULT("--mbs %d does not divide the global batch of %d sequences", u, gbs);
        if ((fx & FIX_DP) && (gbs / b->dp) % u)
            FAULT("--mbs %d does not divide the %d sequences per DP rank (global batch %d / --dp %d)", u,
                  gbs / b->dp, gbs, b->dp);
    }
    if ((fx & FIX_OPT) && (b->opt == OPT_ZERO2 || b->opt == OPT_ZERO3) && (fx & FIX_PP) && b->pp > 1) {
        if (b->opt == OPT_ZERO3 || !hw->zero2_pp)
            FAULT("--zero %d cannot combine with --pp %d (under pipeline parallelism %s: use --zero 1 or --dist-opt)",
                  (int)b->opt, b->pp, hw->zero2_pp ? "this stack shards optimizer states and gradients, not parameters"
                                                     : "only optimizer states are sharded");
        FAULT("--zero 2 with --pp %d is a layout of this stack, but no target runs or exports it (the Megatron "
              "export writes Megatron-FSDP with pp 1 only, torchtitan's pipeline reduces gradients once a step, "
              "ultraplan's executors shard per layer of one stage): price it with `ultraplan predict`, or plan "
              "--dist-opt", b->pp);
    }
    return false;
}

/* The model itself is one no layout of the target can run: the target's
 * executor refuses it at the plainest layout (one rank, one micro-batch,
 * no sharding; refuse.h), and says why. */
static bool model_fault(const ModelSpec *m, const PlanRequest *req, char *buf, int len)
{
    Target t = req->base.target;
    /* fp8 attention: no target runs or exports it, whatever the layout */
    if (req->base.fp8_dpa)
        FAULT("--fp8-dot-product-attention: no --target %s plan can carry it (%s): price it with `ultraplan "
              "predict`, or plan without it", layout_target_name(t),
              t == TARGET_MEGATRON      ? "Megatron-LM's pretrain_gpt.py has no flag for it; Megatron-Bridge sets "
                                          "mixed_precision.fp8_dot_product_attention"
              : t == TARGET_TORCHTITAN ? "torchtitan's float8 converters cover the linear layers only"
                                       : "ultraplan's executors run the attention core in 16 bits");
    if (t == TARGET_MEGATRON)
        return false;
    Layout lo = req->base;
    lo.tp = lo.cp = lo.pp = lo.vp = lo.dp = lo.ep = lo.mbs = 1;
    lo.etp = 0;
    lo.sp = false;
    lo.opt = OPT_ZERO0;
    for (int s = 0; s < LAYOUT_MAX_PP; s++)
        lo.layers[s] = s == 0 ? m->L : 0;
    char why[400];
    if (t == TARGET_TORCHTITAN) {   /* the model's shape alone: a layout choice cannot cure it */
        if (export_torchtitan_model_refuse(m, why, sizeof why) == 0)
            return false;
        FAULT("%s: --target %s (or plan for --target megatron)", m->name, why);
    }
    if (refuse_overflow(m, &lo, why, sizeof why) != 0)   /* one rank's batch too large: more ranks may do */
        return false;
    if (refuse_target(m, &lo, t, why, sizeof why) == 0)
        return false;
    FAULT("%s: ultraplan's %s executor (--target %s) runs no layout of it: %s (or plan for --target megatron)",
          m->name, t == TARGET_ULTRAPLAN_CUDA ? "CUDA" : "CPU", layout_target_name(t), why);
}

/* The user's fixed knobs leave no layout at all (enumerate found none): name
 * the fixed knob at fault and what would be valid. False when the fixed
 * knobs are not the cause (then the GPU count, the batch or the model is). */
static const unsigned layout_fix_bits[] = {FIX_TP, FIX_PP, FIX_VP, FIX_CP, FIX_DP, FIX_MBS, FIX_OPT, FIX_STAGES};
#define N_LAYOUT_FIX ((int)(sizeof layout_fix_bits / sizeof *layout_fix_bits))

/* The fixed parallel layout knobs (not the batch, precision or recomputation) and "--tp 8 --dp 2". */
static unsigned fixed_layout_bits(const PlanRequest *req, char *given, int len)
{
    unsigned bits = 0;
    int k = 0;
    given[0] = 0;
    for (int i = 0; i < N_LAYOUT_FIX; i++)
        if (req->fixed & layout_fix_bits[i]) {
            char one[40];
            fixed_text(layout_fix_bits[i], &req->base, one, sizeof one);
            if (k < len)
                k += snprintf(given + k, len - k, "%s%s", k ? " " : "", one);
            bits |= layout_fix_bits[i];
        }
    return bits;
}

/* An ultraplan target found no layout, --target megatron would: the
 * target's executor refuses every layout the request leaves (refuse.h).
 * Name its reason (for the first such layout) and the target, not the GPU
 * count or a fixed knob alone. */
static bool target_fault(const ModelSpec *m, const HwProfile *hw, const PlanRequest *req, char *buf, int len)
{
    Target t = req->base.target;
    if (t == TARGET_MEGATRON)
        return false;
    PlanRequest r2 = *req;
    r2.base.target = TARGET_MEGATRON;
    OuterList L = {0};
    char why[400] = "";
    if (enumerate(m, hw, &r2, &L) == 0)
        for (long i = 0; i < L.n && !why[0]; i++) {
            Layout lo;
            if (outer_layout(m, hw, &r2, &L.v[i], &lo) == 0 && export_target_refuse(m, &lo, t, why, sizeof why) == 0)
                why[0] = 0;
        }
    free(L.v);
    if (!why[0])
        return false;
    char given[256] = "";
    fixed_layout_bits(req, given, sizeof given);
    FAULT("--target %s: %s runs none of the layouts of %s on %d GPUs with global batch %d%s%s%s: "
          "%s; change the model%s, or plan for --target megatron", layout_target_name(t),
          t == TARGET_TORCHTITAN ? "torchtitan" : t == TARGET_ULTRAPLAN_CUDA ? "ultraplan's CUDA executor"
                                                                          : "ultraplan's CPU executor",
          m->name, req->gpus, req->base.gbs, given[0] ? " (fixed: " : "", given, given[0] ? ")" : "", why,
          given[0] ? " or the fixed knobs" : "");
}

static bool fixed_fault(const ModelSpec *m, const HwProfile *hw, const PlanRequest *req, char *buf, int len)
{
    const unsigned *bits = layout_fix_bits;
    unsigned fx = req->fixed;
    char given[256] = "", freed[160] = "";
    unsigned layout_bits = fixed_layout_bits(req, given, sizeof given);
    if (!layout_bits)
        return false;
    if (single_fault(m, hw, req, buf, len))
        return true;
    /* no single knob is impossible by itself: which fixed knob, left out, makes layouts possible */
    int kf = 0;
    PlanRequest r2 = *req;
    for (int i = 0; i < N_LAYOUT_FIX; i++) {
        if (!(fx & bits[i]))
            continue;
        char one[40];
        fixed_text(bits[i], &req->base, one, sizeof one);
        r2.fixed = fx & ~bits[i];
        OuterList L = {0};
        int rc = enumerate(m, hw, &r2, &L);
        free(L.v);
        if (rc == 0 && L.n > 0 && kf < (int)sizeof freed - 40)
            kf += snprintf(freed + kf, sizeof freed - kf, "%s%s", kf ? " or " : "", one);
    }
    if (kf > 0)
        FAULT("the fixed knobs %s together leave no layout of %s on %d GPUs with global batch %d; without %s "
              "there are layouts", given, m->name, req->gpus, req->base.gbs, freed);
    r2.fixed = fx & ~layout_bits;
    OuterList L = {0};
    int rc = enumerate(m, hw, &r2, &L);
    free(L.v);
    if (rc == 0 && L.n > 0)
        FAULT("the fixed knobs %s together leave no layout of %s on %d GPUs with global batch %d; without them "
              "there are layouts", given, m->name, req->gpus, req->base.gbs);
    return false;
}
#undef FAULT

static void describe(const Layout *lo, char *buf, int len)
{
    snprintf(buf, len, "tp %d, pp %d, dp %d, cp %d, vp %d, mbs %d, %s", lo->tp, lo->pp, lo->dp, lo->cp, lo->vp,
             lo->mbs, layout_opt_name(lo->opt));
}

/* Whether any layout divides `gpus` GPUs with global batch `gbs` (the
 * request's fixed knobs kept): enumerate alone, no costs. */
static bool any_layout(const ModelSpec *m, const HwProfile *hw, const PlanRequest *req, int gpus, int gbs)
{
    PlanRequest r2 = *req;
    r2.gpus = gpus;
    r2.base.gbs = gbs;
    OuterList L = {0};
    int rc = enumerate(m, hw, &r2, &L);
    free(L.v);
    return rc == 0 && L.n > 0;
}

/* The nearest GPU count from `from` in direction dir (+1 / -1), or the
 * nearest global batch when `batch`, with which a layout divides and fits:
 * counts that no layout divides are skipped by enumeration alone, at most
 * `searches` full searches are made. 0 when none is found in reach; the
 * winner's layout described in lay. */
static int nearest_working(const ModelSpec *m, const HwProfile *hw, const CostOpts *o, const PlanRequest *req,
                           int from, int dir, bool batch, char *lay, int laylen)
{
    PlanRequest r2 = *req;
    r2.explain = false;
    r2.top_k = 1;
    r2.dump_lp = NULL;
    r2.progress = NULL;
    int searches = 0, reach = batch ? from : 1 << 20;
    for (int k = 1; k <= 4096 && searches < 16; k++) {
        long v = (long)from + (long)dir * k;
        if (v < 1 || v > reach + (long)from)
            break;
        if (req->cancel && *req->cancel)
            return 0;
        int g = batch ? req->gpus : (int)v, b = batch ? (int)v : req->base.gbs;
        if (!any_layout(m, hw, req, g, b))
            continue;
        r2.gpus = g;
        r2.base.gbs = b;
        PlanResult pr = {0};
        char e[300];
        searches++;
        if (search_once(m, hw, o, &r2, true, &pr, e, sizeof e) == 0 && pr.n > 0) {
            describe(&pr.plans[0].layout, lay, laylen);
            planner_result_free(&pr);
            return (int)v;
        }
        planner_result_free(&pr);
    }
    return 0;
}

/* "5040 below (tp 8, ...) and 5600 above (...)" for the GPU counts or the batches. */
static int nearest_text(const ModelSpec *m, const HwProfile *hw, const CostOpts *o, const PlanRequest *req,
                        bool batch, char *buf, int len)
{
    char lo_lay[160], hi_lay[160];
    int from = batch ? req->base.gbs : req->gpus;
    int below = nearest_working(m, hw, o, req, from, -1, batch, lo_lay, sizeof lo_lay);
    int above = nearest_working(m, hw, o, req, from, +1, batch, hi_lay, sizeof hi_lay);
    if (below && above)
        return snprintf(buf, len, "%d below (%s) and %d above (%s)", below, lo_lay, above, hi_lay);
    if (below)
        return snprintf(buf, len, "%d below (%s)", below, lo_lay);
    if (above)
        return snprintf(buf, len, "%d above (%s)", above, hi_lay);
    buf[0] = 0;
    return 0;
}

/* GPU counts named with the batch they were searched with: without --gbs
 * the batch is the default of the GPU count (scenario_default_batch), so a
 * user who follows the hint must pass the batch too. "" when --gbs was given. */
static const char *gbs_hint(const PlanRequest *req, const char *them, char *buf, int len)
{
    if (req->fixed & FIX_GBS)
        return "";
    snprintf(buf, len, " Pass --gbs %d with %s: without --gbs a GPU count gets its own default batch.",
             req->base.gbs, them);
    return buf;
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
                     "dp must divide the batch).", m->name, req->gpus, req->base.gbs, m->a);
        /* larger counts keep the factor that fails (5128 = 8 x 641): look both ways, and at the batch */
        char near[400], nearb[400];
        int n1 = nearest_text(m, hw, o, req, false, near, sizeof near);
        int n2 = nearest_text(m, hw, o, req, true, nearb, sizeof nearb);
        char gh[128];
        if (k > 0 && k < (int)sizeof res->infeasible && n1 > 0)
            k += snprintf(res->infeasible + k, sizeof res->infeasible - k,
                          " The nearest GPU counts that work with global batch %d: %s.%s", req->base.gbs, near,
                          gbs_hint(req, "them", gh, sizeof gh));
        if (k > 0 && k < (int)sizeof res->infeasible && n2 > 0)
            k += snprintf(res->infeasible + k, sizeof res->infeasible - k,
                          " On %d GPUs the nearest global batches that work: %s.", req->gpus, nearb);
        if (k > 0 && k < (int)sizeof res->infeasible && !n1 && !n2)
            snprintf(res->infeasible + k, sizeof res->infeasible - k,
                     " No GPU count within reach and no global batch up to twice this one works.");
        if (n1 || n2)
            return;
    } else {
        char usable[96] = "";
        if (req->mem_margin_bytes > 0)
            snprintf(usable, sizeof usable, ", %.1f GiB usable with the %.1f GiB --mem-margin",
                     (hw->hbm_bytes - req->mem_margin_bytes) / gib, req->mem_margin_bytes / gib);
        snprintf(res->brief, sizeof res->brief, "does not fit: needs %.1f GiB per GPU, has %.1f GiB%s",
                 res->min_peak_bytes / gib, hw->hbm_bytes / gib, req->mem_margin_bytes > 0 ? " less the margin" : "");
        describe(&lo, lay, sizeof lay);
        k = snprintf(res->infeasible, sizeof res->infeasible,
                     "%s does not fit on %d x %s (%.1f GiB each%s): the least memory any layout needs is %.1f GiB "
                     "per GPU (%s, %s recomputation).", m->name, req->gpus, hw->name, hw->hbm_bytes / gib, usable,
                     res->min_peak_bytes / gib, lay,
                     (req->fixed & FIX_RC) ? spec_recompute_name(req->recompute) : "full");
    }
    if (k < 0 || k >= (int)sizeof res->infeasible)
        return;
    /* states alone need (w + g + o) bytes per parameter spread over all GPUs: no count below fits */
    double N = (double)spec_params(m, 1, PARAMS_EXACT);
    const Layout *b = &req->base;
    Layout z3 = *b;   /* the least any sharding keeps: ZeRO-3's, which a PyTorch FSDP stack keeps in fewer bytes */
    z3.opt = OPT_ZERO3;
    double per_param = fmin(memory_state_bytes_per_param(hw, b), memory_state_bytes_per_param(hw, &z3));
    long gpn = hw->gpus_per_node > 0 ? hw->gpus_per_node : 1;
    long g = (long)ceil(per_param * N / (hw->hbm_bytes - req->mem_margin_bytes));
    long start = ((req->gpus / gpn) + 1) * gpn;
    g = ((g + gpn - 1) / gpn) * gpn;
    if (g < start)
        g = start;
    PlanRequest r2 = *req;
    r2.explain = false;
    r2.top_k = 1;
    r2.dump_lp = NULL;
    r2.progress = NULL;
    /* fixed layout knobs the cause? then say so instead of searching GPU counts with them kept */
    char given[256];
    unsigned layout_bits = fixed_layout_bits(req, given, sizeof given);
    if (layout_bits) {
        r2.fixed = req->fixed & ~layout_bits;
        PlanResult pr = {0};
        char e[200];
        if (search_once(m, hw, o, &r2, true, &pr, e, sizeof e) == 0 && pr.n > 0) {
            describe(&pr.plans[0].layout, lay2, sizeof lay2);
            snprintf(res->infeasible + k, sizeof res->infeasible - k,
                     " The fixed knobs %s are the cause: without them a layout fits on these %d GPUs (%s, %.1f GiB "
                     "peak).", given, req->gpus, lay2, pr.plans[0].cost.peak_bytes / gib);
            snprintf(res->brief, sizeof res->brief, "does not fit with %.100s (without them it fits)", given);
            res->fixed_fault = true;
            planner_result_free(&pr);
            return;
        }
        planner_result_free(&pr);
        r2.fixed = req->fixed;
    }
    for (int tries = 0; g <= 1L << 20 && tries < 4096; tries++) {
        if (req->cancel && *req->cancel)
            return;
        /* doubling keeps a factor no layout takes (5136 = 16 x 321): step to the next node count that divides */
        for (int step = 0; step < 256 && !any_layout(m, hw, &r2, (int)g, req->base.gbs); step++)
            g += gpn;
        r2.gpus = (int)g;
        PlanResult pr = {0};
        char e[200];
        if (search_once(m, hw, o, &r2, true, &pr, e, sizeof e) == 0 && pr.n > 0) {
            res->min_gpus = (int)g;
            describe(&pr.plans[0].layout, lay2, sizeof lay2);
            char gh[128];
            snprintf(res->infeasible + k, sizeof res->infeasible - k,
                     " The smallest GPU count that fits with global batch %d is %ld (%s, %.1f GiB peak).%s",
                     req->base.gbs, g, lay2, pr.plans[0].cost.peak_bytes / gib, gbs_hint(req, "it", gh, sizeof gh));
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
    if (req->base.pp_sched != PP_SCHED_1F1B) {   /* the stage ILP balances 1F1B's bottleneck stage */
        snprintf(err, errlen, "planner: --pp-schedule %s: the planner searches 1F1B schedules (interleaved with vp > "
                 "1), which Megatron-LM and ultraplan's executors run; price a DualPipe layout with `ultraplan "
                 "predict --pp-schedule dualpipe`", layout_pp_sched_name(req->base.pp_sched));
        return -1;
    }
    char pe[300];
    if (layout_check_precision(&req->base, hw, pe, sizeof pe) != 0) {   /* no layout can change it */
        snprintf(err, errlen, "planner: %s", strncmp(pe, "layout: ", 8) ? pe : pe + 8);
        return -1;
    }
    if (!(req->mem_margin_bytes >= 0 && req->mem_margin_bytes < hw->hbm_bytes)) {
        snprintf(err, errlen, "planner: --mem-margin must be from 0 to less than the %.1f GiB of a %s (got %.4g GiB)",
                 hw->hbm_bytes / 1073741824.0, hw->name, req->mem_margin_bytes / 1073741824.0);
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
            p->cap -= req->mem_margin_bytes;
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
    if (out->n == 0 && !out->cancelled && out->over_budget > 0) {
        /* layouts fit; none within the budget: say how far the best is */
        snprintf(out->infeasible, sizeof out->infeasible,
                 "%ld layout(s) fit %d GPUs, but none within the budget (%s%s%s): the best needs %.1f days and "
                 "%.4g GPU-hours with failures; raise the budget or change the GPU count",
                 out->over_budget, req->gpus, req->budget_days > 0 ? "days" : "",
                 req->budget_days > 0 && req->budget_gpu_hours > 0 ? ", " : "",
                 req->budget_gpu_hours > 0 ? "GPU-hours" : "", out->best_over_days, out->best_over_gpu_hours);
        snprintf(out->brief, sizeof out->brief, "over the budget (best: %.1f days)", out->best_over_days);
    } else if (out->n == 0 && !out->cancelled) {
        /* the fixed knobs first: no GPU count helps a --tp that does not divide the heads */
        if (out->outer_total == 0 && (model_fault(m, req, out->infeasible, sizeof out->infeasible) ||
                                      target_fault(m, hw, req, out->infeasible, sizeof out->infeasible) ||
                                      fixed_fault(m, hw, req, out->infeasible, sizeof out->infeasible))) {
            out->fixed_fault = true;
            size_t n = strcspn(out->infeasible, ";");
            snprintf(out->brief, sizeof out->brief, "%.*s", (int)n, out->infeasible);
        } else {
            if (out->outer_total == 0)
                snprintf(out->brief, sizeof out->brief, "no layout divides %d GPUs with global batch %d",
                         req->gpus, req->base.gbs);
            else
                snprintf(out->brief, sizeof out->brief, "does not fit in memory");
            if (req->explain)
                explain(m, hw, o, req, out);
        }
    }
    out->seconds = now_s() - t0;
    return 0;
}
