/* inner.c — coefficients of the per-stage problem, read off the cost model
 * by differences, the exact solver for a fixed layer split, and the exact
 * solver of Megatron-LM's space (inner.h). */
#include "inner.h"

#include <math.h>
#include <string.h>

/* bytes of slack under the capacity, so that rounding in the linear form
 * never admits a stage that memory_stage() then finds a byte over */
#define CAP_SLACK 4096.0

static double stage_total(const ModelSpec *m, const HwProfile *hw, Layout *lo, int s, int n, int f, int e)
{
    StageMem sm;
    lo->layers[s] = n;
    lo->full_rc[s] = f;
    lo->sel_rc[s] = e;
    memory_stage(m, hw, lo, s, &sm);
    return sm.total;
}

/* Lower convex hull of (x[i], y[i]), x ascending, as lines y >= a + b x. */
static void hull_fit(const double *x, const double *y, int n, InnerHull *h)
{
    int idx[LAYOUT_MAX_PP * 8 + 8];
    int k = 0;
    for (int i = 0; i < n; i++) {
        while (k >= 2) {
            int i1 = idx[k - 2], i2 = idx[k - 1];
            double cross = (x[i2] - x[i1]) * (y[i] - y[i1]) - (y[i2] - y[i1]) * (x[i] - x[i1]);
            if (cross > 0)
                break;
            k--;
        }
        idx[k++] = i;
    }
    h->n = 0;
    if (k == 1) {
        h->a[0] = y[idx[0]];
        h->b[0] = 0;
        h->n = 1;
        return;
    }
    int edges = k - 1;
    for (int j = 0; j < INNER_MAX_LINES && j < edges; j++) {
        /* more edges than lines: keep an even spread, always the first and the last */
        int e = edges <= INNER_MAX_LINES ? j : (int)((double)j * (edges - 1) / (INNER_MAX_LINES - 1) + 0.5);
        int i1 = idx[e], i2 = idx[e + 1];
        double b = (y[i2] - y[i1]) / (x[i2] - x[i1]);
        h->a[h->n] = y[i1] - b * x[i1];
        h->b[h->n] = b;
        h->n++;
    }
}

static double hull_at(const InnerHull *h, double n)
{
    double v = -INFINITY;
    for (int k = 0; k < h->n; k++)
        v = fmax(v, h->a[k] + h->b[k] * n);
    return h->n ? v : 0.0;
}

/* Tabulate dp and optimizer seconds of stage s over its possible layer counts. */
static void fit_stage_terms(const ModelSpec *m, const HwProfile *hw, Layout *lo, const LayerTime *lt, int s,
                            int nlo, int nhi, InnerProblem *p)
{
    double x[LAYOUT_MAX_PP * 8 + 8], yd[LAYOUT_MAX_PP * 8 + 8], yo[LAYOUT_MAX_PP * 8 + 8];
    int cnt = 0;
    int step = (nhi - nlo) / (LAYOUT_MAX_PP * 8) + 1;   /* never more points than the buffers hold */
    for (int n = nlo; n <= nhi; n += step) {
        lo->layers[s] = n;
        x[cnt] = n;
        yd[cnt] = cost_stage_dp_s(m, hw, lo, lt, s);
        yo[cnt] = cost_stage_optim_n(m, hw, lo, s, n);
        cnt++;
        if (n != nhi && n + step > nhi)
            n = nhi - step;   /* always include the last point */
    }
    hull_fit(x, yd, cnt, &p->dp[s]);
    hull_fit(x, yo, cnt, &p->opt[s]);
}

void inner_build(const ModelSpec *m_in, const HwProfile *hw, const Layout *lo_in, bool fix_stages, bool rc_forced,
                 Recompute rc, InnerProblem *p)
{
    Layout lo = *lo_in;
    /* the linear form prices every layer alike: for a mixture of experts
     * every layer as an MoE layer (leading dense or every-other layers are
     * cheaper: the form bounds them from above; cost() re-prices exactly) */
    ModelSpec mc = *m_in;
    if (spec_is_moe(&mc)) {
        mc.moe_first_dense = 0;
        mc.moe_freq = 1;
    }
    const ModelSpec *m = &mc;
    memset(p, 0, sizeof *p);
    int pp = lo.pp;
    p->pp = pp;
    p->L = m->L;
    p->vp = lo.vp;
    p->mb = layout_microbatches(&lo);
    p->rc_forced = rc_forced;
    p->even_middle = true;
    p->megatron = lo.target == TARGET_MEGATRON;
    p->torchtitan = lo.target == TARGET_TORCHTITAN;
    /* torchtitan runs its per-op policy, and only that; the others run the attention core alone */
    p->no_sel = p->torchtitan ? !layout_sel_op(m_in, lo_in) : layout_sel_op(m_in, lo_in);
    p->rc = rc;
    p->cap = hw->hbm_bytes - CAP_SLACK;
    /* the split Megatron's account-for rules make is theirs, not the solver's */
    if (fix_stages || lo.vp > 1 || pp == 1 || lo.split_embed || lo.split_loss)
        for (int s = 0; s < pp; s++)
            p->fix_layers[s] = pp == 1 ? m->L : lo.layers[s];
    p->chunks_given = lo.pp_layout[0] != 0;
    for (int s = 0; s < pp && p->chunks_given; s++)
        for (int c = 0; c < (lo.vp > 1 ? lo.vp : 1) && c * pp + s < LAYOUT_MAX_CHUNKS; c++)
            p->chunk_t[c * pp + s] = (short)layout_chunk_layers(&lo, s, c);

    LayerTime lt;
    time_layer(m, hw, &lo, &lt);
    double t00 = time_stage_mb(m, hw, &lo, &lt, 0, 0, 0, 0);
    double t10 = time_stage_mb(m, hw, &lo, &lt, 0, 1, 0, 0);
    p->t_layer = t10 - t00;
    p->t_full = time_stage_mb(m, hw, &lo, &lt, 0, 1, 1, 0) - t10;
    p->t_sel = time_stage_mb(m, hw, &lo, &lt, 0, 1, 0, 1) - t10;

    int nmax = m->L - (pp - 1);
    for (int s = 0; s < pp; s++) {
        /* middle stages are alike but for their in-flight micro-batches (and the
         * one a --pipeline-layout gives the MTP module) */
        bool edge = s == 0 || s == pp - 1 || (m->mtp_layers > 0 && s == layout_mtp_stage(&lo));
        if (!edge && s > 1) {
            p->t0[s] = p->t0[1];
        } else {
            p->t0[s] = time_stage_mb(m, hw, &lo, &lt, s, 0, 0, 0);
        }
        double m0 = stage_total(m, hw, &lo, s, 0, 0, 0);
        double f1 = stage_total(m, hw, &lo, s, 1, 1, 0);
        p->m0[s] = m0;
        p->m_none[s] = stage_total(m, hw, &lo, s, 1, 0, 0) - m0;
        p->m_sel[s] = stage_total(m, hw, &lo, s, 1, 0, 1) - m0;
        p->m_full[s] = stage_total(m, hw, &lo, s, 2, 2, 0) - f1;
        p->m_ws[s] = fmax(0.0, f1 - m0 - p->m_full[s]);
        int nlo = p->fix_layers[s] ? p->fix_layers[s] : 1;
        int nhi = p->fix_layers[s] ? p->fix_layers[s] : nmax;
        if (!edge && s > 1 && !p->fix_layers[s]) {
            p->dp[s] = p->dp[1];
            p->opt[s] = p->opt[1];
        } else {
            fit_stage_terms(m, hw, &lo, &lt, s, nlo, nhi, p);
        }
        lo.layers[s] = lo.full_rc[s] = lo.sel_rc[s] = 0;
    }
}

static double stage_mem(const InnerProblem *p, int s, int n, int f, int e)
{
    return p->m0[s] + p->m_none[s] * (n - f - e) + p->m_sel[s] * e + p->m_full[s] * f + (f > 0 ? p->m_ws[s] : 0.0);
}

double inner_objective(const InnerProblem *p, const int *layers, const int *full, const int *sel)
{
    double z = 0, sum = 0, dp = 0, opt = 0;
    for (int s = 0; s < p->pp; s++) {
        if (stage_mem(p, s, layers[s], full[s], sel[s]) > p->cap)
            return INFINITY;
        double t = p->t0[s] + p->t_layer * layers[s] + p->t_full * full[s] + p->t_sel * sel[s];
        z = fmax(z, t);
        sum += t;
        dp = fmax(dp, hull_at(&p->dp[s], layers[s]));
        opt = fmax(opt, hull_at(&p->opt[s], layers[s]));
    }
    double pipe = p->vp > 1 ? (p->mb + (double)(p->pp - 1) / p->vp) * z : (p->mb - 1) * z + sum;
    return pipe + dp + opt;
}

/* Cheapest recomputation that makes stage s with n layers fit; false if none does. */
static bool stage_recompute(const InnerProblem *p, int s, int n, int *fo, int *eo)
{
    if (p->rc_forced) {
        if (p->rc == RECOMPUTE_SELECTIVE && p->no_sel)
            return false;
        *fo = p->rc == RECOMPUTE_FULL ? n : 0;
        *eo = p->rc == RECOMPUTE_SELECTIVE ? n : 0;
        return stage_mem(p, s, n, *fo, *eo) <= p->cap;
    }
    double best = INFINITY;
    double save = p->no_sel ? 0.0 : p->m_none[s] - p->m_sel[s];   /* bytes one selective layer saves */
    for (int f = 0; f <= n; f++) {
        double mem = stage_mem(p, s, n, f, 0);
        int e = 0;
        if (mem > p->cap) {
            if (save <= 0)
                continue;
            e = (int)ceil((mem - p->cap) / save);
            if (e < 0)
                e = 0;
            while (e <= n - f && stage_mem(p, s, n, f, e) > p->cap)
                e++;
            while (e > 0 && stage_mem(p, s, n, f, e - 1) <= p->cap)
                e--;
            if (e > n - f)
                continue;
        }
        double t = p->t_full * f + p->t_sel * e;
        if (t < best) {
            best = t;
            *fo = f;
            *eo = e;
        }
    }
    return isfinite(best);
}

void inner_enumerate(const InnerProblem *p, InnerSolution *out)
{
    memset(out, 0, sizeof *out);
    for (int s = 0; s < p->pp; s++) {
        int n = p->fix_layers[s];
        out->layers[s] = n;
        if (n < 1 || !stage_recompute(p, s, n, &out->full_rc[s], &out->sel_rc[s]))
            return;
    }
    out->objective = inner_objective(p, out->layers, out->full_rc, out->sel_rc);
    out->feasible = isfinite(out->objective);
}

static double hull_min(const InnerHull *h, int nlo, int nhi)
{
    double v = INFINITY;
    for (int n = nlo; n <= nhi; n++)
        v = fmin(v, hull_at(h, n));
    return v;
}

double inner_lower_bound(const InnerProblem *p)
{
    double sum0 = 0, zmin = 0, dp = 0, opt = INFINITY;
    int nfree = p->L, free_stages = 0;
    int nmax = p->L - (p->pp - 1);
    for (int s = 0; s < p->pp; s++) {
        int n = p->fix_layers[s] ? p->fix_layers[s] : 1;
        sum0 += p->t0[s];
        zmin = fmax(zmin, p->t0[s] + p->t_layer * n);
        if (p->fix_layers[s])
            nfree -= n;
        else
            free_stages++;
        int nlo = p->fix_layers[s] ? n : 1, nhi = p->fix_layers[s] ? n : nmax;
        if (s == 0 || s == 1 || s == p->pp - 1 || p->fix_layers[s])
            dp = fmax(dp, hull_min(&p->dp[s], nlo, nhi));
    }
    double sum = sum0 + p->L * p->t_layer;
    double z = fmax(zmin, sum / p->pp);
    double pipe = p->vp > 1 ? (p->mb + (double)(p->pp - 1) / p->vp) * z : (p->mb - 1) * z + sum;
    /* some stage holds at least its share of the layers; optimizer time grows with them */
    int share = free_stages ? (nfree + free_stages - 1) / free_stages : 0;
    for (int s = 0; s < p->pp; s++) {
        int n = p->fix_layers[s] ? p->fix_layers[s] : share;
        if (!p->fix_layers[s] && free_stages == 0)
            continue;
        opt = fmin(opt, hull_at(&p->opt[s], n));
    }
    if (!isfinite(opt))
        opt = 0;
    if (p->fix_layers[0] || p->pp == 1) {
        /* fixed split: the optimizer term is exact per stage */
        opt = 0;
        for (int s = 0; s < p->pp; s++)
            opt = fmax(opt, hull_at(&p->opt[s], p->fix_layers[s]));
    }
    return pipe + dp + opt;
}

double inner_memory_bound(const InnerProblem *p)
{
    double sum0 = 0, per_layer = INFINITY, worst = 0, ws = INFINITY;
    for (int s = 0; s < p->pp; s++) {
        double k = p->m_none[s];
        if (inner_sel_allowed(p))
            k = fmin(k, p->m_sel[s]);
        if (!p->rc_forced || p->rc == RECOMPUTE_FULL)
            k = fmin(k, p->m_full[s]);
        if (p->rc_forced && p->rc == RECOMPUTE_FULL)
            ws = fmin(ws, p->m_ws[s]);
        int n = p->fix_layers[s] ? p->fix_layers[s] : 1;
        worst = fmax(worst, p->m0[s] + k * n);
        sum0 += p->m0[s];
        per_layer = fmin(per_layer, k);
    }
    if (!isfinite(ws))
        ws = 0;
    return fmax(worst, (sum0 + per_layer * p->L) / p->pp) + ws;
}

/* ---- target megatron ---- */

/* The fastest recomputation Megatron-LM expresses on the split n: none,
 * selective on every layer, or full with N layers per chunk on every stage.
 * Returns the objective (+inf when nothing fits) with f and e filled. */
static double megatron_recompute(const InnerProblem *p, const int *n, int *f, int *e)
{
    int pp = p->pp, v = p->vp > 1 ? p->vp : 1;
    int tf[LAYOUT_MAX_PP], te[LAYOUT_MAX_PP];
    double best = INFINITY;
    bool try_none = !p->rc_forced || p->rc == RECOMPUTE_NONE;
    bool try_sel = inner_sel_allowed(p);
    bool try_full = !p->rc_forced || p->rc == RECOMPUTE_FULL;
#define TAKE()                                                                                                   \
    do {                                                                                                         \
        double o_ = inner_objective(p, n, tf, te);                                                               \
        if (o_ < best) {                                                                                         \
            best = o_;                                                                                           \
            memcpy(f, tf, sizeof(int) * pp);                                                                     \
            memcpy(e, te, sizeof(int) * pp);                                                                     \
        }                                                                                                        \
    } while (0)
    memset(te, 0, sizeof te);
    memset(tf, 0, sizeof tf);
    if (try_none)
        TAKE();
    if (try_sel) {
        for (int s = 0; s < pp; s++)
            te[s] = n[s];
        TAKE();
        memset(te, 0, sizeof te);
    }
    if (!try_full)
        return best;
    int maxchunk = 0;
    for (int s = 0; s < pp; s++)
        for (int c = 0; c < v; c++) {
            int ch = p->chunks_given ? p->chunk_t[c * pp + s] : n[s] / v;
            maxchunk = ch > maxchunk ? ch : maxchunk;
        }
    if (p->rc_forced && p->rc == RECOMPUTE_SELECTIVE && p->no_sel)
        return best;
    if (p->rc_forced || p->torchtitan) {
        /* --recompute full: every layer (--recompute-method uniform --recompute-num-layers 1); torchtitan's
         * FullAC has no count */
        for (int s = 0; s < pp; s++)
            tf[s] = n[s];
        TAKE();
        return best;
    }
    /* the step only grows with N: start at the least N each stage needs on
     * its own (memory falls linearly with f once f >= 1) and walk up to the
     * first N with which every stage fits */
    int N0 = 1;
    for (int s = 0; s < pp; s++) {
        double save = p->m_none[s] - p->m_full[s];
        double over = stage_mem(p, s, n[s], 0, 0) + p->m_ws[s] - p->cap;
        if (over > 0 && save > 0) {
            int k = (int)ceil(over / save / v);
            if (k > N0)
                N0 = k < maxchunk ? k : maxchunk;
        }
    }
    for (int N = N0 > 1 ? N0 - 1 : 1; N <= maxchunk; N++) {
        bool fits = true;
        for (int s = 0; s < pp; s++) {
            int chunk = n[s] / v;
            tf[s] = v * (N < chunk ? N : chunk);
            if (p->chunks_given)   /* min(N, chunk) of each of the layout string's chunks */
                for (int c = tf[s] = 0; c < v; c++)
                    tf[s] += N < p->chunk_t[c * pp + s] ? N : p->chunk_t[c * pp + s];
            fits &= stage_mem(p, s, n[s], tf[s], 0) <= p->cap;
        }
        if (fits) {
            TAKE();
            break;
        }
    }
#undef TAKE
    return best;
}

void inner_megatron(const InnerProblem *p, InnerSolution *out)
{
    memset(out, 0, sizeof *out);
    out->objective = INFINITY;
    int pp = p->pp, L = p->L;
    int n[LAYOUT_MAX_PP], f[LAYOUT_MAX_PP], e[LAYOUT_MAX_PP];
    bool fixed = true;
    for (int s = 0; s < pp; s++)
        fixed &= p->fix_layers[s] > 0;
#define TRY()                                                                                                    \
    do {                                                                                                         \
        double o_ = megatron_recompute(p, n, f, e);                                                              \
        if (o_ < out->objective) {                                                                               \
            out->objective = o_;                                                                                 \
            memcpy(out->layers, n, sizeof(int) * pp);                                                            \
            memcpy(out->full_rc, f, sizeof(int) * pp);                                                           \
            memcpy(out->sel_rc, e, sizeof(int) * pp);                                                            \
        }                                                                                                        \
    } while (0)
    if (p->torchtitan && !fixed && pp > 1) {
        if (L % pp)
            return;   /* torchtitan splits the layers evenly */
        for (int s = 0; s < pp; s++)
            n[s] = L / pp;
        TRY();
    } else if (fixed || pp == 1) {
        for (int s = 0; s < pp; s++)
            n[s] = pp == 1 ? L : p->fix_layers[s];
        for (int s = 2; s < pp - 1; s++)
            if (n[s] != n[1])
                return;   /* a split Megatron-LM cannot express */
        TRY();
    } else if (pp == 2) {
        for (int a = 1; a < L; a++) {
            n[0] = a;
            n[1] = L - a;
            TRY();
        }
    } else {
        /* middle stages equal: mid each, the rest r = L - (p-2) mid split first/last */
        for (int mid = 1; (long)mid * (pp - 2) <= L - 2; mid++) {
            int r = L - mid * (pp - 2);
            for (int s = 1; s < pp - 1; s++)
                n[s] = mid;
            for (int a = 1; a < r; a++) {
                n[0] = a;
                n[pp - 1] = r - a;
                TRY();
            }
        }
    }
#undef TRY
    out->feasible = isfinite(out->objective);
}
