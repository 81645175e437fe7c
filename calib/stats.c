/* stats.c — error statistics, rank correlation, regret and groups (see stats.h). */
#include "stats.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

double stats_ape(double pred, double meas) { return meas > 0 ? 100.0 * fabs(pred - meas) / meas : 0; }

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Linear interpolation between order statistics (numpy's default). */
static double quantile(const double *sorted, int n, double q)
{
    double pos = q * (n - 1);
    int i = (int)floor(pos);
    if (i >= n - 1)
        return sorted[n - 1];
    return sorted[i] + (pos - i) * (sorted[i + 1] - sorted[i]);
}

void stats_summarize(const double *ape, int n, ApeStats *out)
{
    memset(out, 0, sizeof *out);
    out->n = n;
    if (n <= 0)
        return;
    double *s = malloc((size_t)n * sizeof *s);
    if (!s)
        return;
    double sum = 0;
    for (int i = 0; i < n; i++) {
        s[i] = ape[i];
        sum += ape[i];
    }
    qsort(s, (size_t)n, sizeof *s, cmp_double);
    out->mape = sum / n;
    out->median = quantile(s, n, 0.5);
    out->p90 = quantile(s, n, 0.9);
    out->max = s[n - 1];
    free(s);
}

/* Row indices ordered by value, equal values by index (a total order, so
 * qsort's instability cannot show). */
typedef struct { double v; int i; } Ranked;

static int cmp_ranked(const void *a, const void *b)
{
    const Ranked *x = a, *y = b;
    if (x->v < y->v)
        return -1;
    if (x->v > y->v)
        return 1;
    return (x->i > y->i) - (x->i < y->i);
}

/* Ranks 1..n with ties averaged; O(n log n). A tie is a run of equal values
 * in sorted order, and its rank the mean of its positions, whatever the
 * order inside the run. */
static int ranks(const double *x, int n, double *rk)
{
    Ranked *o = malloc((size_t)n * sizeof *o);
    if (!o)
        return -1;
    for (int i = 0; i < n; i++)
        o[i] = (Ranked){x[i], i};
    qsort(o, (size_t)n, sizeof *o, cmp_ranked);
    for (int i = 0; i < n;) {
        int j = i;
        while (j + 1 < n && o[j + 1].v == o[i].v)
            j++;
        double r = 0.5 * (i + j) + 1.0;
        for (int k = i; k <= j; k++)
            rk[o[k].i] = r;
        i = j + 1;
    }
    free(o);
    return 0;
}

double stats_spearman(const double *x, const double *y, int n)
{
    if (n < 2)
        return 0;
    double *rx = calloc((size_t)n, sizeof *rx), *ry = calloc((size_t)n, sizeof *ry);
    double res = 0;
    if (rx && ry && ranks(x, n, rx) == 0 && ranks(y, n, ry) == 0) {
        double mx = 0, my = 0;
        for (int i = 0; i < n; i++) {
            mx += rx[i];
            my += ry[i];
        }
        mx /= n;
        my /= n;
        double sxy = 0, sxx = 0, syy = 0;
        for (int i = 0; i < n; i++) {
            sxy += (rx[i] - mx) * (ry[i] - my);
            sxx += (rx[i] - mx) * (rx[i] - mx);
            syy += (ry[i] - my) * (ry[i] - my);
        }
        res = sxx > 0 && syy > 0 ? sxy / sqrt(sxx * syy) : 0;
    }
    free(rx);
    free(ry);
    return res;
}

double stats_regret(const double *pred, const double *meas, int n)
{
    if (n <= 0)
        return 0;
    int ip = 0, im = 0;
    for (int i = 1; i < n; i++) {
        if (pred[i] < pred[ip])
            ip = i;
        if (meas[i] < meas[im])
            im = i;
    }
    return 100.0 * (meas[ip] / meas[im] - 1.0);
}

/* ---- groups ------------------------------------------------------------------- */

static const char *const group_names[] = {"gpus", "model", "parallel", "model+gpus", "model+gpus+gbs"};
_Static_assert(sizeof group_names / sizeof *group_names == STATS_GROUP_COUNT, "group names");

const char *stats_group_kind_name(StatsGroupKind k) { return group_names[k]; }

void stats_row(const RunRow *r, StatsRow *out)
{
    *out = (StatsRow){
        .gpus = r->gpus, .h = r->model.h, .L = r->model.L, .a = r->model.a, .s = r->model.s,
        .dp = r->layout.dp, .tp = r->layout.tp, .pp = r->layout.pp, .cp = r->layout.cp, .gbs = r->layout.gbs,
        .params_b = r->params_b, .measured_s = r->measured_s,
    };
}

/* Keys are built for every row of every grouping (a million rows: five
 * million keys), so by hand rather than by snprintf; same text. */
typedef struct {
    char *p, *end;   // end: the last byte, kept for the terminating NUL
} Put;

static void put_s(Put *o, const char *s)
{
    while (*s && o->p < o->end)
        *o->p++ = *s++;
    *o->p = '\0';
}

static void put_d(Put *o, int v)
{
    char t[16], *q = t + sizeof t;
    unsigned u = v < 0 ? 0u - (unsigned)v : (unsigned)v;
    *--q = '\0';
    do
        *--q = (char)('0' + u % 10);
    while (u /= 10);
    if (v < 0)
        *--q = '-';
    put_s(o, q);
}

static void put_model(Put *o, const StatsRow *r)
{
    if (r->params_b > 0) {
        char t[40];
        snprintf(t, sizeof t, "%.4g", r->params_b);
        put_s(o, t);
        put_s(o, "B (h");
        put_d(o, r->h);
        put_s(o, " L");
        put_d(o, r->L);
        put_s(o, " s");
        put_d(o, r->s);
        put_s(o, ")");
    } else {
        put_s(o, "h");
        put_d(o, r->h);
        put_s(o, " L");
        put_d(o, r->L);
        put_s(o, " a");
        put_d(o, r->a);
        put_s(o, " s");
        put_d(o, r->s);
    }
}

void stats_row_key(const StatsRow *r, StatsGroupKind k, char *buf, int len)
{
    if (len <= 0)
        return;
    Put o = {buf, buf + len - 1};
    *buf = '\0';
    switch (k) {
    case STATS_BY_GPUS:
        put_d(&o, r->gpus);
        put_s(&o, " GPUs");
        return;
    case STATS_BY_MODEL:
        put_model(&o, r);
        return;
    case STATS_BY_PARALLEL: {
        const struct { int v; const char *nm; } d[] = {{r->dp, "dp"}, {r->tp, "tp"}, {r->pp, "pp"}, {r->cp, "cp"}};
        for (size_t i = 0; i < sizeof d / sizeof d[0]; i++)
            if (d[i].v > 1) {
                if (o.p > buf)
                    put_s(&o, "+");
                put_s(&o, d[i].nm);
            }
        if (o.p == buf)
            put_s(&o, "single GPU");
        return;
    }
    case STATS_BY_MODEL_GPUS:
        put_model(&o, r);
        put_s(&o, ", ");
        put_d(&o, r->gpus);
        put_s(&o, " GPUs");
        return;
    case STATS_BY_MODEL_GPUS_GBS:
    default:
        /* a planner picks a layout for a fixed model, cluster and global batch */
        put_model(&o, r);
        put_s(&o, ", ");
        put_d(&o, r->gpus);
        put_s(&o, " GPUs, gbs ");
        put_d(&o, r->gbs);
        return;
    }
}

void stats_group_key(const RunRow *r, StatsGroupKind k, char *buf, int len)
{
    StatsRow sr;
    stats_row(r, &sr);
    stats_row_key(&sr, k, buf, len);
}

/* FNV-1a: the key's slot in an open-addressing table of group indices. */
static size_t hash_key(const char *s)
{
    size_t h = (size_t)1469598103934665603ULL;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * (size_t)1099511628211ULL;
    return h;
}

int stats_groups_rows(const StatsRow *rows, int nrows, const double *pred, StatsGroupKind kind, StatsGroup **out)
{
    int n = 0, cap = 16;
    size_t nslot = 64;
    while (nslot < 2 * (size_t)nrows)   /* load factor at most 1/2 */
        nslot *= 2;
    size_t nr = nrows ? (size_t)nrows : 1;
    StatsGroup *g = malloc((size_t)cap * sizeof *g);
    int *slot = malloc(nslot * sizeof *slot);
    int *of = malloc(nr * sizeof *of), *order = malloc(nr * sizeof *order);
    int *start = NULL;
    double *a = malloc(nr * 3 * sizeof *a);
    if (!g || !slot || !of || !order || !a)
        goto oom;
    for (size_t i = 0; i < nslot; i++)
        slot[i] = -1;
    /* each row's group, groups in order of first appearance */
    for (int i = 0; i < nrows; i++) {
        char key[sizeof g->key];
        stats_row_key(&rows[i], kind, key, sizeof key);
        size_t h = hash_key(key) & (nslot - 1);
        while (slot[h] >= 0 && strcmp(g[slot[h]].key, key))
            h = (h + 1) & (nslot - 1);
        int k = slot[h];
        if (k < 0) {
            if (n == cap) {
                StatsGroup *t = realloc(g, (size_t)cap * 2 * sizeof *g);
                if (!t)
                    goto oom;
                g = t;
                cap *= 2;
            }
            k = slot[h] = n++;
            memset(&g[k], 0, sizeof g[k]);
            g[k].kind = kind;
            snprintf(g[k].key, sizeof g[k].key, "%s", key);
        }
        of[i] = k;
    }
    /* rows by group, in row order within a group (a counting sort) */
    start = calloc((size_t)n + 1, sizeof *start);
    if (!start)
        goto oom;
    for (int i = 0; i < nrows; i++)
        start[of[i] + 1]++;
    for (int k = 0; k < n; k++)
        start[k + 1] += start[k];
    for (int i = 0; i < nrows; i++)
        order[start[of[i]]++] = i;   /* start[k] ends at group k's end = group k+1's start */
    double *ape = a, *p = a + nr, *m = a + 2 * nr;
    for (int k = 0, lo = 0; k < n; lo = start[k], k++) {
        int c = 0;
        for (int q = lo; q < start[k]; q++) {
            int i = order[q];
            /* ranked by time per sequence: iteration times of different
             * global batches do not compare; at one batch it is the same order */
            double gbs = rows[i].gbs > 0 ? rows[i].gbs : 1;
            ape[c] = stats_ape(pred[i], rows[i].measured_s);
            p[c] = pred[i] / gbs;
            m[c] = rows[i].measured_s / gbs;
            c++;
        }
        stats_summarize(ape, c, &g[k].st);
        g[k].spearman = stats_spearman(p, m, c);
        g[k].regret = stats_regret(p, m, c);
    }
    free(slot);
    free(of);
    free(order);
    free(start);
    free(a);
    *out = g;
    return n;
oom:
    free(g);
    free(slot);
    free(of);
    free(order);
    free(start);
    free(a);
    *out = NULL;
    return -1;
}

int stats_groups(const RunSet *set, const double *pred, StatsGroupKind kind, StatsGroup **out)
{
    StatsRow *rows = malloc((size_t)(set->n ? set->n : 1) * sizeof *rows);
    if (!rows) {
        *out = NULL;
        return -1;
    }
    for (int i = 0; i < set->n; i++)
        stats_row(&set->rows[i], &rows[i]);
    int n = stats_groups_rows(rows, set->n, pred, kind, out);
    free(rows);
    return n;
}

cJSON *stats_json(const ApeStats *s)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "n", s->n);
    cJSON_AddNumberToObject(o, "mape", s->mape);
    cJSON_AddNumberToObject(o, "median_ape", s->median);
    cJSON_AddNumberToObject(o, "p90_ape", s->p90);
    cJSON_AddNumberToObject(o, "max_ape", s->max);
    return o;
}
