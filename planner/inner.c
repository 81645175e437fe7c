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

/* Bytes of stage s without layers (m0) and per layer of each recomputation,
 * read off memory_stage() for a model whose layers are all of one kind. */
enum { KB_NONE, KB_SEL, KB_FULL, KB_WS };
static double stage_bytes(const ModelSpec *m, const HwProfile *hw, Layout *lo, int s, double k[4])
{
    double m0 = stage_total(m, hw, lo, s, 0, 0, 0);
    double f1 = stage_total(m, hw, lo, s, 1, 1, 0);
    k[KB_NONE] = stage_total(m, hw, lo, s, 1, 0, 0) - m0;
    k[KB_SEL] = stage_total(m, hw, lo, s, 1, 0, 1) - m0;
    k[KB_FULL] = stage_total(m, hw, lo, s, 2, 2, 0) - f1;
    k[KB_WS] = fmax(0.0, f1 - m0 - k[KB_FULL]);
    lo->layers[s] = lo->full_rc[s] = lo->sel_rc[s] = 0;
    return m0;
}

/* A line a + b n on or above the dense layers stage s can hold with n
 * layers, for a free split (one chunk a stage, every stage at least one
 * layer, so stage s starts at layer s or later). Megatron's pattern
 * (spec_layer_is_moe): the first `first` layers dense, then one MoE layer
 * in every `freq`. A run of n layers holds at most (first - s)+ of the
 * leading dense ones, and in the periodic part at most (freq-1)/freq of
 * its layers plus (freq-1)/freq; never more than n, nor than the model's
 * dense layers. Of those three lines, the one lowest at the even share
 * L/pp (the stages are balanced near it). */
static void dense_line(const ModelSpec *m, int pp, int s, int nd, double *a, double *b)
{
    int freq = m->moe_freq > 0 ? m->moe_freq : 1;
    double lead = m->moe_first_dense - s > 0 ? m->moe_first_dense - s : 0;
    double r = (freq - 1.0) / freq;
    double n = (double)m->L / pp;
    double la = lead + r, lb = r;   /* the pattern */
    if (la + lb * n > n)            /* a run of n layers */
        la = 0, lb = 1;
    if (la + lb * n > nd)           /* every dense layer */
        la = nd, lb = 0;
    *a = la, *b = lb;
}

void inner_build(const ModelSpec *m_in, const HwProfile *hw, const Layout *lo_in, bool fix_stages, bool rc_forced,
                 Recompute rc, InnerProblem *p)
{
    Layout lo = *lo_in;
    /* the linear form prices every layer alike: for a mixture of experts
     * every layer as an MoE layer, and the dense layers' excess, where they
     * hold more (a high ep), as a line per stage (below) */
    ModelSpec mc = *m_in, md = *m_in;
    bool mix = spec_is_moe(&mc) && spec_moe_layers(&mc) < mc.L;
    if (spec_is_moe(&mc)) {
        mc.moe_first_dense = 0;
        mc.moe_freq = 1;
        md.moe_first_dense = md.L;   /* every layer dense (the MTP module too, which m0 alone holds) */
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
    p->nd = mix ? m_in->L - spec_moe_layers(m_in) : 0;
    p->spec = *m_in;
    p->lo = *lo_in;
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
    p->t_layer_kind[0] = p->t_layer_kind[1] = p->t_layer;
    if (mix) {
        LayerTime ltd;
        time_layer(&md, hw, &lo, &ltd);
        p->t_layer_kind[0] = time_stage_mb(&md, hw, &lo, &ltd, 0, 1, 0, 0) - time_stage_mb(&md, hw, &lo, &ltd, 0, 0, 0, 0);
    }
    /* a fixed split: the dense layers each stage holds, as memory_stage() places them */
    Layout lf = *lo_in;
    for (int k = 0; k < pp; k++)
        lf.layers[k] = p->fix_layers[k];
    for (int s = 0; s < pp; s++) {
        p->dense_in[s] = -1;
        if (mix && p->fix_layers[s] && p->fix_layers[0]) {
            int cnt[2][RECOMPUTE_COUNT];
            memory_stage_layer_mix(m_in, &lf, s, p->fix_layers[s], 0, 0, cnt);
            p->dense_in[s] = cnt[0][RECOMPUTE_NONE];
        }
    }

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
        double *km = p->lb_k[1][s], *kd = p->lb_k[0][s];
        double m0 = stage_bytes(m, hw, &lo, s, km);
        if (mix)
            stage_bytes(&md, hw, &lo, s, kd);
        else
            memcpy(kd, km, sizeof p->lb_k[0][s]);
        p->lb_m0[s] = m0;
        p->m0[s] = m0;
        p->m_none[s] = km[KB_NONE];
        p->m_sel[s] = km[KB_SEL];
        p->m_full[s] = km[KB_FULL];
        p->m_ws[s] = km[KB_WS];
        if (mix) {
            /* a dense layer over an MoE layer, whatever either recomputes:
             * that much for each dense layer the stage may hold */
            double worst = fmax(kd[KB_NONE] - km[KB_NONE], fmax(kd[KB_SEL] - km[KB_SEL], kd[KB_FULL] - km[KB_FULL]));
            double up = fmax(0.0, worst);
            /* lighter in every mode: the ILP may count the stage's dense layers (inner.h d_gain) */
            if (worst < 0 && p->dense_in[s] < 0 && lo.vp <= 1 && m_in->moe_freq <= 1 && s < m_in->moe_first_dense)
                p->d_gain[s] = worst;
            double a, b;
            if (p->dense_in[s] >= 0)
                a = p->dense_in[s], b = 0;
            else
                dense_line(m_in, pp, s, p->nd, &a, &b);
            p->m0[s] += up * a;
            p->m_none[s] += up * b;
            p->m_sel[s] += up * b;
            p->m_full[s] += up * b;
            if (a > 0 || b > 0) {   /* a stage that can hold dense layers */
                /* and what the stage sizes by its largest layer (ZeRO's layer
                 * buckets): a stage of no layers sizes them by its kind (the
                 * MTP module, of either kind here, left out) */
                ModelSpec d0 = md, c0 = mc;
                d0.mtp_layers = c0.mtp_layers = 0;
                p->lb_unit[s] = fmax(0.0, stage_total(&d0, hw, &lo, s, 0, 0, 0) - stage_total(&c0, hw, &lo, s, 0, 0, 0));
                p->m_ws[s] = fmax(km[KB_WS], kd[KB_WS]);
                p->m0[s] += p->lb_unit[s];
            }
        }
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

static double form_mem(const InnerProblem *p, int s, int n, int f, int e)
{
    return p->m0[s] + p->m_none[s] * (n - f - e) + p->m_sel[s] * e + p->m_full[s] * f + (f > 0 ? p->m_ws[s] : 0.0);
}

double inner_stage_bytes(const InnerProblem *p, const int *layers, int s, int f, int e)
{
    int n = layers[s];
    if (p->nd <= 0)
        return form_mem(p, s, n, f, e);
    int first = 0, cnt[2][RECOMPUTE_COUNT];
    for (int k = 0; k < s; k++)
        first += layers[k];
    memory_layer_mix_from(&p->spec, &p->lo, s, first, n, f, e, cnt);
    static const Recompute mode[3] = {RECOMPUTE_NONE, RECOMPUTE_SELECTIVE, RECOMPUTE_FULL};
    double b = p->lb_m0[s];
    for (int k = 0; k < 2; k++)
        for (int r = 0; r < 3; r++)
            b += cnt[k][mode[r]] * p->lb_k[k][s][r];
    if (memory_mix_kind(cnt, 0) > 0)
        b += p->lb_unit[s];
    /* the working set: an MoE layer's when one is fully recomputed (memory_stage: the larger) */
    if (f > 0)
        b += cnt[1][RECOMPUTE_FULL] > 0 ? fmax(p->lb_k[1][s][KB_WS], p->lb_k[0][s][KB_WS]) : p->lb_k[0][s][KB_WS];
    return b;
}

double inner_objective(const InnerProblem *p, const int *layers, const int *full, const int *sel)
{
    double z = 0, sum = 0, dp = 0, opt = 0;
    for (int s = 0; s < p->pp; s++) {
        if (inner_stage_bytes(p, layers, s, full[s], sel[s]) > p->cap)
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
static bool stage_recompute(const InnerProblem *p, const int *layers, int s, int *fo, int *eo)
{
    int n = layers[s];
    if (p->rc_forced) {
        if (p->rc == RECOMPUTE_SELECTIVE && p->no_sel)
            return false;
        *fo = p->rc == RECOMPUTE_FULL ? n : 0;
        *eo = p->rc == RECOMPUTE_SELECTIVE ? n : 0;
        return inner_stage_bytes(p, layers, s, *fo, *eo) <= p->cap;
    }
    double best = INFINITY;
    double save = p->no_sel ? 0.0 : p->m_none[s] - p->m_sel[s];   /* bytes one selective layer saves */
    for (int f = 0; f <= n; f++) {
        double mem = inner_stage_bytes(p, layers, s, f, 0);
        int e = 0;
        if (mem > p->cap) {
            if (save <= 0)
                continue;
            e = (int)ceil((mem - p->cap) / save);
            if (e < 0)
                e = 0;
            while (e <= n - f && inner_stage_bytes(p, layers, s, f, e) > p->cap)
                e++;
            while (e > 0 && inner_stage_bytes(p, layers, s, f, e - 1) <= p->cap)
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
        if (n < 1 || !stage_recompute(p, out->layers, s, &out->full_rc[s], &out->sel_rc[s]))
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
        /* each kind of layer at its own time: a fixed stage's mix, a free stage's one layer the faster kind */
        double tl = p->nd > 0 ? fmin(p->t_layer_kind[0], p->t_layer_kind[1]) : p->t_layer;
        if (p->fix_layers[s] && p->dense_in[s] >= 0)
            tl = (p->dense_in[s] * p->t_layer_kind[0] + (n - p->dense_in[s]) * p->t_layer_kind[1]) / n;
        zmin = fmax(zmin, p->t0[s] + tl * n);
        if (p->fix_layers[s])
            nfree -= n;
        else
            free_stages++;
        int nlo = p->fix_layers[s] ? n : 1, nhi = p->fix_layers[s] ? n : nmax;
        if (s == 0 || s == 1 || s == p->pp - 1 || p->fix_layers[s])
            dp = fmax(dp, hull_min(&p->dp[s], nlo, nhi));
    }
    double sum = sum0 + p->nd * p->t_layer_kind[0] + (p->L - p->nd) * p->t_layer_kind[1];
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
    /* each kind of layer at its own bytes (a dense layer may hold less than
     * an MoE layer, or more), not the form's upper bound */
    double sum0 = 0, kmin[2] = {INFINITY, INFINITY}, worst = 0, ws = INFINITY;
    bool forced_full = p->rc_forced && p->rc == RECOMPUTE_FULL;
    for (int s = 0; s < p->pp; s++) {
        double k[2];
        for (int kind = 0; kind < 2; kind++) {
            const double *c = p->lb_k[kind][s];
            k[kind] = c[KB_NONE];
            if (inner_sel_allowed(p))
                k[kind] = fmin(k[kind], c[KB_SEL]);
            if (!p->rc_forced || p->rc == RECOMPUTE_FULL)
                k[kind] = fmin(k[kind], c[KB_FULL]);
            if (forced_full && (kind == 1 || p->nd > 0))
                ws = fmin(ws, c[KB_WS]);
            kmin[kind] = fmin(kmin[kind], k[kind]);
        }
        double one = p->nd > 0 ? fmin(k[0], k[1]) : k[1];
        double stage = p->lb_m0[s] + one;   /* a free stage holds a layer at least */
        if (p->fix_layers[s]) {
            int n = p->fix_layers[s], d = p->dense_in[s] >= 0 ? p->dense_in[s] : 0;
            stage = p->lb_m0[s] + d * k[0] + (n - d) * k[1];
        }
        worst = fmax(worst, stage);
        sum0 += p->lb_m0[s];
    }
    if (!isfinite(ws))
        ws = 0;
    double layers = (p->nd > 0 ? p->nd * kmin[0] : 0.0) + (p->L - p->nd) * kmin[1];
    return fmax(worst, (sum0 + layers) / p->pp) + ws;
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
        double over = inner_stage_bytes(p, n, s, 0, 0) + p->m_ws[s] - p->cap;
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
            fits &= inner_stage_bytes(p, n, s, tf[s], 0) <= p->cap;
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
