/* moe.c — see moe.h. Router, top-k and its backward, the per-sequence
 * load-balancing loss, capacity, the dispatch/combine over ep and the
 * gather/reduce-scatter over etp, and the experts as OpenBLAS GEMMs. */
#include "moe.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels.h"

/* ---- pure routing ------------------------------------------------------ */

void moe_route(const float *logits, int n, int E, int k, float *probs, float *idx, float *w)
{
    moe_route_groups(logits, n, E, k, 0, 0, probs, idx, w);
}

/* ok (G) = 1 for the Kg groups of z (E logits in G contiguous groups) with
 * the largest sums of their top m = k / Kg logits, ties to the lower group;
 * gs (G), v (E / G): scratch. */
static void pick_groups(const float *z, int E, int k, int G, int Kg, unsigned char *ok, float *gs, float *v)
{
    int per = E / G, m = k / Kg;
    for (int g = 0; g < G; g++) {
        memcpy(v, z + (size_t)g * per, (size_t)per * sizeof *v);
        float sum = 0;
        for (int j = 0; j < m; j++) {   /* partial selection sort: v[j] = the j-th largest */
            int b = j;
            for (int i = j + 1; i < per; i++)
                b = v[i] > v[b] ? i : b;
            float x = v[j];
            v[j] = v[b], v[b] = x;
            sum += v[j];
        }
        gs[g] = sum;
        ok[g] = 0;
    }
    for (int j = 0; j < Kg; j++) {
        int best = -1;
        for (int g = 0; g < G; g++)
            if (!ok[g] && (best < 0 || gs[g] > gs[best]))
                best = g;
        ok[best] = 1;
    }
}

void moe_route_groups(const float *logits, int n, int E, int k, int G, int Kg, float *probs, float *idx, float *w)
{
    int grouped = G > 0 && Kg > 0;
    unsigned char *ok = NULL;
    float *scr = NULL;
    if (grouped) {
        ok = malloc((size_t)G);
        scr = malloc(((size_t)G + (size_t)E / G) * sizeof *scr);
        if (!ok || !scr) {
            fprintf(stderr, "moe: out of memory for the group-limited router\n");
            abort();
        }
    }
    int per = grouped ? E / G : E;
    for (int t = 0; t < n; t++) {
        const float *z = logits + (size_t)t * E;
        float *p = probs + (size_t)t * E, *ix = idx + (size_t)t * k, *wt = w + (size_t)t * k;
        float mx = z[0];
        for (int e = 1; e < E; e++)
            mx = z[e] > mx ? z[e] : mx;
        double s = 0;
        for (int e = 0; e < E; e++)
            s += exp((double)z[e] - mx);
        for (int e = 0; e < E; e++)
            p[e] = (float)(exp((double)z[e] - mx) / s);
        if (grouped)
            pick_groups(z, E, k, G, Kg, ok, scr, scr + G);
        /* top-k by logit among the experts of the picked groups, largest
         * first; a strict > over ascending e keeps the lower index on ties */
        for (int j = 0; j < k; j++) {
            int best = -1;
            for (int e = 0; e < E; e++) {
                int taken = grouped && !ok[e / per];
                for (int i = 0; i < j; i++)
                    taken |= (int)ix[i] == e;
                if (!taken && (best < 0 || z[e] > z[best]))
                    best = e;
            }
            ix[j] = (float)best;
        }
        float m2 = z[(int)ix[0]];
        double s2 = 0;
        for (int j = 0; j < k; j++)
            s2 += exp((double)z[(int)ix[j]] - m2);
        for (int j = 0; j < k; j++)
            wt[j] = (float)(exp((double)z[(int)ix[j]] - m2) / s2);
    }
    free(ok);
    free(scr);
}

void moe_route_bwd(float *dlogits, const float *probs, const float *idx, const float *w, const float *dw,
                   const float *dprobs, int n, int E, int k)
{
    for (int t = 0; t < n; t++) {
        float *dz = dlogits + (size_t)t * E;
        const float *ix = idx + (size_t)t * k, *wt = w + (size_t)t * k, *g = dw + (size_t)t * k;
        memset(dz, 0, (size_t)E * sizeof *dz);
        double s = 0;
        for (int j = 0; j < k; j++)
            s += (double)wt[j] * g[j];
        for (int j = 0; j < k; j++)
            dz[(int)ix[j]] += (float)(wt[j] * (g[j] - s));
        if (dprobs) {
            const float *p = probs + (size_t)t * E, *dp = dprobs + (size_t)t * E;
            double s2 = 0;
            for (int e = 0; e < E; e++)
                s2 += (double)p[e] * dp[e];
            for (int e = 0; e < E; e++)
                dz[e] += (float)(p[e] * (dp[e] - s2));
        }
    }
}

typedef struct {
    float w;
    int pair;
} Cand;

static int cand_cmp(const void *a, const void *b)
{
    const Cand *x = a, *y = b;
    if (x->w != y->w)
        return x->w > y->w ? -1 : 1;
    return (x->pair > y->pair) - (x->pair < y->pair);
}

void moe_capacity(int *keep, const float *idx, const float *w, int n, int E, int k, double cf)
{
    size_t np = (size_t)n * k;
    for (size_t p = 0; p < np; p++)
        keep[p] = 1;
    if (cf <= 0)
        return;
    long cap = (long)ceil(cf * (double)n * k / E);
    Cand *c = malloc((np ? np : 1) * sizeof *c);
    if (!c) {
        fprintf(stderr, "moe: out of memory for the capacity sort\n");
        abort();
    }
    for (int e = 0; e < E; e++) {
        size_t m = 0;
        for (size_t p = 0; p < np; p++)
            if ((int)idx[p] == e)
                c[m++] = (Cand){w[p], (int)p};
        if ((long)m <= cap)
            continue;
        qsort(c, m, sizeof *c, cand_cmp);
        for (size_t i = (size_t)cap; i < m; i++)
            keep[c[i].pair] = 0;
    }
    free(c);
}

/* ---- the layer --------------------------------------------------------- */

typedef struct MoeScratch {
    int cap;                     // rows of a, b, c, d
    float *send;                 // (Nl·k, C) rows in send order
    float *a, *b;                // (cap, C)
    float *c, *d;                // (cap, F1e), (cap, Fe)
    float *logit, *dw, *dprobs;  // (Nl, E), (Nl, k), (Nl, E)
    float *stats;                // (2, B, E) per-sequence counts and probability sums
    int *keep, *pos;             // (Nl·k) pair kept, its row in send order (-1 dropped)
    int *scnt, *rcnt;            // (ep·El) rows to / from each ep rank by local expert
    int *sc, *sd, *rc, *rd;      // (ep) alltoallv counts and displacements, floats
    int *gc, *gd;                // (etp) allgatherv / reduce-scatter counts and displacements, floats
    size_t fixed_floats;
} MoeScratch;

static int rows_for(const Exec *e)
{
    const TrainOpts *o = &e->opt;
    /* the plan's assumption (layout.moe_imbalance, the cost model's default
     * when it has none), so the buffers are what the prediction counts */
    double imb = o->moe_imbalance > 0 ? o->moe_imbalance : layout_moe_imbalance(&e->lo);
    return (int)ceil(imb * (double)e->Nl * e->d.etp * e->K);
}

static void *xalloc(size_t n)
{
    void *p = calloc(n ? n : 1, 1);
    if (!p) {
        fprintf(stderr, "moe: out of memory for %zu bytes\n", n);
        abort();
    }
    return p;
}

int moe_init(Exec *e, char *err, int errlen)
{
    MoeScratch *s = e->mx = calloc(1, sizeof *s);
    if (!s) {
        snprintf(err, errlen, "out of memory for the expert scratch");
        return -1;
    }
    int ep = e->d.ep, etp = e->d.etp, El = e->El, Nl = e->Nl, K = e->K, E = e->E, C = e->C;
    size_t np = (size_t)Nl * K;
    s->send = xalloc(np * C * sizeof(float));
    s->logit = xalloc((size_t)Nl * E * sizeof(float));
    s->dw = xalloc(np * sizeof(float));
    s->dprobs = xalloc((size_t)Nl * E * sizeof(float));
    s->stats = xalloc(2 * (size_t)e->B * E * sizeof(float));
    s->fixed_floats = np * C + 2 * (size_t)Nl * E + np + 2 * (size_t)e->B * E;
    s->keep = xalloc(np * sizeof(int));
    s->pos = xalloc(np * sizeof(int));
    s->scnt = xalloc((size_t)ep * El * sizeof(int));
    s->rcnt = xalloc((size_t)ep * El * sizeof(int));
    s->sc = xalloc(ep * sizeof(int)), s->sd = xalloc(ep * sizeof(int));
    s->rc = xalloc(ep * sizeof(int)), s->rd = xalloc(ep * sizeof(int));
    s->gc = xalloc(etp * sizeof(int)), s->gd = xalloc(etp * sizeof(int));
    s->cap = rows_for(e);
    s->a = xalloc((size_t)s->cap * C * sizeof(float));
    s->b = xalloc((size_t)s->cap * C * sizeof(float));
    s->c = xalloc((size_t)s->cap * e->F1e * sizeof(float));
    s->d = xalloc((size_t)s->cap * e->Fe * sizeof(float));
    return 0;
}

void moe_free(Exec *e)
{
    MoeScratch *s = e->mx;
    if (!s)
        return;
    void *p[] = {s->send, s->a, s->b, s->c, s->d, s->logit, s->dw, s->dprobs, s->stats, s->keep, s->pos,
                 s->scnt, s->rcnt, s->sc, s->sd, s->rc, s->rd, s->gc, s->gd};
    for (size_t i = 0; i < sizeof p / sizeof p[0]; i++)
        free(p[i]);
    free(s);
    e->mx = NULL;
}

static size_t buf_floats(const Exec *e, int cap) { return (size_t)cap * (e->C + e->F1e + e->Fe); }
static size_t cnt_ints(const Exec *e) { return (size_t)e->d.etp * e->d.ep * e->El + (size_t)e->B * e->E; }

MoeBuf *moe_buf_new(Exec *e)
{
    MoeBuf *b = calloc(1, sizeof *b);
    if (!b)
        return NULL;
    b->cap = rows_for(e);
    b->x = calloc((size_t)b->cap * e->C + 1, sizeof(float));
    b->hpre = calloc((size_t)b->cap * e->F1e + 1, sizeof(float));
    b->hact = calloc((size_t)b->cap * e->Fe + 1, sizeof(float));
    b->cnt = calloc(cnt_ints(e), sizeof(int));   // gathered row counts, then (B, E) sequence counts
    if (!b->x || !b->hpre || !b->hact || !b->cnt) {
        moe_buf_free(b);
        return NULL;
    }
    return b;
}

void moe_buf_free(MoeBuf *b)
{
    if (!b)
        return;
    free(b->x), free(b->hpre), free(b->hact), free(b->cnt);
    free(b);
}

double moe_acts_bytes(const Exec *e)
{
    double n = 0;
    for (int i = 0; e->moeb && i < e->nmoeb; i++)
        if (e->moeb[i])
            n += 4.0 * buf_floats(e, e->moeb[i]->cap) + sizeof(int) * (double)cnt_ints(e);
    return n;
}

double moe_scratch_bytes(const Exec *e)
{
    const MoeScratch *s = e->mx;
    if (!s)
        return 0;
    size_t np = (size_t)e->Nl * e->K;
    return 4.0 * (s->fixed_floats + (size_t)s->cap * (2 * e->C + e->F1e + e->Fe)) +
           sizeof(int) * (2.0 * np + 2.0 * e->d.ep * e->El + 4.0 * e->d.ep + 2.0 * e->d.etp);
}

/* Grow a layer's buffers and the scratch to hold R rows (a step that routes
 * more than the plan's imbalance allows for); the bytes show in e->mem. */
static void *regrow(void *p, size_t n)
{
    void *q = realloc(p, n ? n : 1);
    if (!q) {
        fprintf(stderr, "moe: out of memory growing the expert buffers to %zu bytes\n", n);
        abort();
    }
    return q;
}

static void ensure_rows(Exec *e, MoeBuf *b, int R)
{
    MoeScratch *s = e->mx;
    if (R > b->cap) {
        e->mem[XM_ACTS] += 4.0 * (buf_floats(e, R) - buf_floats(e, b->cap));
        b->x = regrow(b->x, (size_t)R * e->C * sizeof(float));
        b->hpre = regrow(b->hpre, (size_t)R * e->F1e * sizeof(float));
        b->hact = regrow(b->hact, (size_t)R * e->Fe * sizeof(float));
        b->cap = R;
    }
    if (R > s->cap) {
        e->mem[XM_BUFFERS] += 4.0 * (size_t)(R - s->cap) * (2 * e->C + e->F1e + e->Fe);
        s->a = regrow(s->a, (size_t)R * e->C * sizeof(float));
        s->b = regrow(s->b, (size_t)R * e->C * sizeof(float));
        s->c = regrow(s->c, (size_t)R * e->F1e * sizeof(float));
        s->d = regrow(s->d, (size_t)R * e->Fe * sizeof(float));
        s->cap = R;
    }
}

/* The kept pairs' rows in send order (sorted by global expert, stable), the
 * counts per (ep rank, local expert) and the alltoallv counts in floats. */
static void plan_send(Exec *e, const float *idx)
{
    MoeScratch *s = e->mx;
    int ep = e->d.ep, El = e->El, C = e->C;
    size_t np = (size_t)e->Nl * e->K;
    memset(s->scnt, 0, (size_t)ep * El * sizeof(int));
    for (size_t p = 0; p < np; p++)
        if (s->keep[p])
            s->scnt[(int)idx[p]]++;
    int off[1024], *o = e->E <= 1024 ? off : xalloc((size_t)e->E * sizeof(int));
    for (int x = 0, acc = 0; x < e->E; x++)
        o[x] = acc, acc += s->scnt[x];
    for (size_t p = 0; p < np; p++)
        s->pos[p] = s->keep[p] ? o[(int)idx[p]]++ : -1;
    if (o != off)
        free(o);
    for (int r = 0, acc = 0; r < ep; r++) {
        int n = 0;
        for (int j = 0; j < El; j++)
            n += s->scnt[r * El + j];
        s->sc[r] = n * C, s->sd[r] = acc * C, acc += n;
    }
}

/* Counts from the ep peers (rcnt), the received alltoallv counts, and the
 * gathered counts over etp (b->cnt: (etp, ep, El)); returns the gathered rows. */
static int exchange_counts(Exec *e, MoeBuf *b, int comm)
{
    MoeScratch *s = e->mx;
    int ep = e->d.ep, etp = e->d.etp, El = e->El, C = e->C;
    if (comm) {
        dist_alltoall_int(s->scnt, s->rcnt, El, e->d.ep_comm, &e->t[PH_TP]);
        dist_allgather_int(s->rcnt, b->cnt, ep * El, e->d.etp_comm, &e->t[PH_TP]);
    } else {      /* backward: this etp rank's counts as the forward gathered them */
        memcpy(s->rcnt, b->cnt + (size_t)e->d.etp_rank * ep * El, (size_t)ep * El * sizeof(int));
    }
    for (int r = 0, acc = 0; r < ep; r++) {
        int n = 0;
        for (int j = 0; j < El; j++)
            n += s->rcnt[r * El + j];
        s->rc[r] = n * C, s->rd[r] = acc * C, acc += n;
    }
    int R = 0;
    for (int q = 0; q < etp; q++) {
        int n = 0;
        for (int k = 0; k < ep * El; k++)
            n += b->cnt[(size_t)q * ep * El + k];
        s->gc[q] = n * C, s->gd[q] = R * C, R += n;
    }
    return R;
}

/* Rows between the gathered order (etp source, ep source, local expert) and
 * the expert-major order (local expert, etp source, ep source). */
static void permute(const Exec *e, const int *cnt, float *dst, const float *src, int width, int to_expert)
{
    int ep = e->d.ep, etp = e->d.etp, El = e->El;
    size_t xo = 0;
    for (int j = 0; j < El; j++)
        for (int q = 0; q < etp; q++)
            for (int r = 0; r < ep; r++) {
                size_t go = 0;   /* gathered offset of segment (q, r, j) */
                for (int k = 0; k < q * ep * El + r * El + j; k++)
                    go += cnt[k];
                size_t n = (size_t)cnt[(size_t)q * ep * El + r * El + j] * width;
                if (to_expert)
                    memcpy(dst + xo, src + go * width, n * sizeof *dst);
                else
                    memcpy(dst + go * width, src + xo, n * sizeof *dst);
                xo += n;
            }
}

/* Rows of local expert j in expert-major order: first row, count. */
static void expert_rows(const Exec *e, const int *cnt, int j, int *first, int *n)
{
    int ep = e->d.ep, etp = e->d.etp, El = e->El, f = 0, c = 0;
    for (int jj = 0; jj <= j; jj++)
        for (int q = 0; q < etp; q++)
            for (int r = 0; r < ep; r++) {
                int v = cnt[(size_t)q * ep * El + r * El + jj];
                if (jj < j)
                    f += v;
                else
                    c += v;
            }
    *first = f, *n = c;
}

/* First global row (of the micro-batch's N = B·Tl) of this rank's Nl rows. */
static int row0(const Exec *e) { return e->lo.sp ? e->d.tp_rank * e->Nl : 0; }

/* Per-sequence counts and probability sums over the whole sequence (tp
 * ranks under SP, cp ranks): into b's tail (counts) and the aux value. */
static void aux_fwd(Exec *e, LayerActs *A, MoeBuf *b)
{
    MoeScratch *s = e->mx;
    int E = e->E, K = e->K, Bn = e->B;
    float *cnt = s->stats, *psum = s->stats + (size_t)Bn * E;
    memset(s->stats, 0, 2 * (size_t)Bn * E * sizeof(float));
    for (int r = 0; r < e->Nl; r++) {
        int seq = (row0(e) + r) / e->Tl;
        for (int j = 0; j < K; j++)
            cnt[(size_t)seq * E + (int)A->tki[(size_t)r * K + j]] += 1.0f;
        for (int x = 0; x < E; x++)
            psum[(size_t)seq * E + x] += A->probs[(size_t)r * E + x];
    }
    dist_allreduce(s->stats, 2 * Bn * E, e->d.tpcp_comm, &e->t[PH_TP]);
    int *sc = b->cnt + (size_t)e->d.etp * e->d.ep * e->El;
    for (int i = 0; i < Bn * E; i++)
        sc[i] = (int)lrintf(cnt[i]);
    if (e->recomputing || e->d.tp_rank != 0 || e->d.cp_rank != 0)
        return;
    double T = e->T, v = 0;
    for (int i = 0; i < Bn * E; i++)
        v += (cnt[i] * E / (T * K)) * (psum[i] / T);
    e->aux_sum += e->opt.moe_aux_coeff * v / e->lo.gbs;
}

#define W(id) exec_lw(e, li, id)
#define G(id) exec_lg(e, li, id)

void moe_fwd(Exec *e, int li, LayerActs *A, float *out)
{
    MoeScratch *s = e->mx;
    MoeBuf *b = A->mb;
    int Nl = e->Nl, C = e->C, E = e->E, K = e->K, El = e->El;
    size_t np = (size_t)Nl * K;
    k_matmul_fwd(s->logit, A->a2, W(P_ROUTW), NULL, Nl, C, E);
    moe_route_groups(s->logit, Nl, E, K, e->m.router_groups, e->m.router_group_topk, A->probs, A->tki, A->tkw);
    aux_fwd(e, A, b);
    moe_capacity(s->keep, A->tki, A->tkw, Nl, E, K, e->m.capacity_factor);
    plan_send(e, A->tki);
    for (size_t p = 0; p < np; p++)
        if (s->pos[p] >= 0)
            memcpy(s->send + (size_t)s->pos[p] * C, A->a2 + (p / K) * C, C * sizeof(float));
    int R = exchange_counts(e, b, 1);
    ensure_rows(e, b, R);
    int own = e->d.etp_rank;
    dist_alltoallv(s->send, s->sc, s->sd, s->a, s->rc, s->rd, e->d.ep_comm, &e->t[PH_TP]);
    dist_allgatherv(s->a, s->gc[own], s->b, s->gc, s->gd, e->d.etp_comm, &e->t[PH_TP]);
    permute(e, b->cnt, b->x, s->b, C, 1);
    const float *w1 = W(P_EFC1W), *w2 = W(P_EFC2W);
    for (int j = 0; j < El; j++) {
        int f, n;
        expert_rows(e, b->cnt, j, &f, &n);
        if (n == 0)
            continue;
        float *hp = b->hpre + (size_t)f * e->F1e, *ha = b->hact + (size_t)f * e->Fe;
        k_matmul_fwd(hp, b->x + (size_t)f * C, w1 + (size_t)j * e->F1e * C, NULL, n, C, e->F1e);
        if (e->m.mlp == MLP_SWIGLU)
            k_glu_fwd(ha, hp, n, e->Fe, (float)e->m.act_clamp);
        else
            k_gelu_fwd(ha, hp, (size_t)n * e->Fe);
        k_matmul_fwd(s->a + (size_t)f * C, ha, w2 + (size_t)j * C * e->Fe, NULL, n, e->Fe, C);
    }
    permute(e, b->cnt, s->b, s->a, C, 0);
    dist_reduce_scatterv(s->a, s->b, s->gc, e->d.etp_comm, &e->t[PH_TP]);
    dist_alltoallv(s->a, s->rc, s->rd, A->ye, s->sc, s->sd, e->d.ep_comm, &e->t[PH_TP]);
    for (size_t p = 0; p < np; p++)
        if (s->pos[p] >= 0) {
            const float *y = A->ye + (size_t)s->pos[p] * C;
            float *o = out + (p / K) * C, wk = A->tkw[p];
            for (int c = 0; c < C; c++)
                o[c] += wk * y[c];
        }
}

void moe_bwd(Exec *e, int li, LayerActs *A, float *dx)
{
    MoeScratch *s = e->mx;
    MoeBuf *b = A->mb;
    int Nl = e->Nl, C = e->C, E = e->E, K = e->K, El = e->El;
    size_t np = (size_t)Nl * K;
    const float *dout = e->dres;
    moe_capacity(s->keep, A->tki, A->tkw, Nl, E, K, e->m.capacity_factor);
    plan_send(e, A->tki);
    int R = exchange_counts(e, b, 0), own = e->d.etp_rank;
    ensure_rows(e, b, R);
    /* combine: out[t] += w·y  →  dy = w·dout, dw = dout·y */
    for (size_t p = 0; p < np; p++) {
        const float *g = dout + (p / K) * C;
        if (s->pos[p] < 0) {
            s->dw[p] = 0;
            continue;
        }
        float *dy = s->send + (size_t)s->pos[p] * C, wk = A->tkw[p];
        const float *y = A->ye + (size_t)s->pos[p] * C;
        double acc = 0;
        for (int c = 0; c < C; c++) {
            dy[c] = wk * g[c];
            acc += (double)g[c] * y[c];
        }
        s->dw[p] = (float)acc;
    }
    dist_alltoallv(s->send, s->sc, s->sd, s->a, s->rc, s->rd, e->d.ep_comm, &e->t[PH_TP]);
    dist_allgatherv(s->a, s->gc[own], s->b, s->gc, s->gd, e->d.etp_comm, &e->t[PH_TP]);
    permute(e, b->cnt, s->a, s->b, C, 1);   // dY, expert-major
    const float *w1 = W(P_EFC1W), *w2 = W(P_EFC2W);
    float *g1 = G(P_EFC1W), *g2 = G(P_EFC2W);
    for (int j = 0; j < El; j++) {
        int f, n;
        expert_rows(e, b->cnt, j, &f, &n);
        if (n == 0)
            continue;
        float *dha = s->d + (size_t)f * e->Fe, *dhp = s->c + (size_t)f * e->F1e, *dxe = s->b + (size_t)f * C;
        const float *hp = b->hpre + (size_t)f * e->F1e, *ha = b->hact + (size_t)f * e->Fe;
        k_zero(dha, (size_t)n * e->Fe);
        k_matmul_bwd(dha, g2 + (size_t)j * C * e->Fe, NULL, s->a + (size_t)f * C, ha, w2 + (size_t)j * C * e->Fe,
                     n, e->Fe, C);
        k_zero(dhp, (size_t)n * e->F1e);
        if (e->m.mlp == MLP_SWIGLU)
            k_glu_bwd(dhp, hp, dha, n, e->Fe, (float)e->m.act_clamp);
        else
            k_gelu_bwd(dhp, hp, dha, (size_t)n * e->Fe);
        k_zero(dxe, (size_t)n * C);
        k_matmul_bwd(dxe, g1 + (size_t)j * e->F1e * C, NULL, dhp, b->x + (size_t)f * C,
                     w1 + (size_t)j * e->F1e * C, n, C, e->F1e);
    }
    permute(e, b->cnt, s->a, s->b, C, 0);   // dX partial sums over etp, gathered order
    dist_reduce_scatterv(s->b, s->a, s->gc, e->d.etp_comm, &e->t[PH_TP]);
    dist_alltoallv(s->b, s->rc, s->rd, s->send, s->sc, s->sd, e->d.ep_comm, &e->t[PH_TP]);
    for (size_t p = 0; p < np; p++)
        if (s->pos[p] >= 0) {
            const float *g = s->send + (size_t)s->pos[p] * C;
            float *o = dx + (p / K) * C;
            for (int c = 0; c < C; c++)
                o[c] += g[c];
        }
    /* the router: top-k softmax of dw, and the load-balancing loss through
     * the full softmax (f per sequence as the forward counted it) */
    const int *sc = b->cnt + (size_t)e->d.etp * e->d.ep * El;
    double T = e->T, scale = e->opt.moe_aux_coeff / e->lo.gbs * E / (T * K) / T;
    for (int r = 0; r < Nl; r++) {
        int seq = (row0(e) + r) / e->Tl;
        for (int x = 0; x < E; x++)
            s->dprobs[(size_t)r * E + x] = (float)(scale * sc[(size_t)seq * E + x]);
    }
    moe_route_bwd(s->logit, A->probs, A->tki, A->tkw, s->dw, s->dprobs, Nl, E, K);
    k_matmul_bwd(dx, G(P_ROUTW), NULL, s->logit, A->a2, W(P_ROUTW), Nl, C, E);
}

#undef W
#undef G
