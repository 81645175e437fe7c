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

/* Ranks 1..n with ties averaged. */
static void ranks(const double *x, int n, double *rk)
{
    int *idx = malloc((size_t)n * sizeof *idx);
    if (!idx)
        return;
    for (int i = 0; i < n; i++)
        idx[i] = i;
    /* insertion sort by value: groups are small */
    for (int i = 1; i < n; i++) {
        int k = idx[i], j = i - 1;
        while (j >= 0 && x[idx[j]] > x[k]) {
            idx[j + 1] = idx[j];
            j--;
        }
        idx[j + 1] = k;
    }
    for (int i = 0; i < n;) {
        int j = i;
        while (j + 1 < n && x[idx[j + 1]] == x[idx[i]])
            j++;
        double r = 0.5 * (i + j) + 1.0;
        for (int k = i; k <= j; k++)
            rk[idx[k]] = r;
        i = j + 1;
    }
    free(idx);
}

double stats_spearman(const double *x, const double *y, int n)
{
    if (n < 2)
        return 0;
    double *rx = calloc((size_t)n, sizeof *rx), *ry = calloc((size_t)n, sizeof *ry);
    double res = 0;
    if (rx && ry) {
        ranks(x, n, rx);
        ranks(y, n, ry);
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

static void model_key(const RunRow *r, char *buf, int len)
{
    if (r->params_b > 0)
        snprintf(buf, len, "%.4gB (h%d L%d s%d)", r->params_b, r->model.h, r->model.L, r->model.s);
    else
        snprintf(buf, len, "h%d L%d a%d s%d", r->model.h, r->model.L, r->model.a, r->model.s);
}

void stats_group_key(const RunRow *r, StatsGroupKind k, char *buf, int len)
{
    const Layout *lo = &r->layout;
    char mk[96];
    switch (k) {
    case STATS_BY_GPUS:
        snprintf(buf, len, "%d GPUs", r->gpus);
        return;
    case STATS_BY_MODEL:
        model_key(r, buf, len);
        return;
    case STATS_BY_PARALLEL: {
        int n = snprintf(buf, len, "%s", "");
        const struct { int v; const char *nm; } d[] = {{lo->dp, "dp"}, {lo->tp, "tp"}, {lo->pp, "pp"}, {lo->cp, "cp"}};
        for (size_t i = 0; i < sizeof d / sizeof d[0] && n < len; i++)
            if (d[i].v > 1)
                n += snprintf(buf + n, len - n, "%s%s", n ? "+" : "", d[i].nm);
        if (n == 0)
            snprintf(buf, len, "single GPU");
        return;
    }
    case STATS_BY_MODEL_GPUS:
        model_key(r, mk, sizeof mk);
        snprintf(buf, len, "%s, %d GPUs", mk, r->gpus);
        return;
    case STATS_BY_MODEL_GPUS_GBS:
    default:
        /* a planner picks a layout for a fixed model, cluster and global batch */
        model_key(r, mk, sizeof mk);
        snprintf(buf, len, "%s, %d GPUs, gbs %d", mk, r->gpus, lo->gbs);
        return;
    }
}

static int find_group(const StatsGroup *g, int n, const char *key)
{
    for (int i = 0; i < n; i++)
        if (!strcmp(g[i].key, key))
            return i;
    return -1;
}

int stats_groups(const RunSet *set, const double *pred, StatsGroupKind kind, StatsGroup **out)
{
    int n = 0, cap = 16;
    StatsGroup *g = malloc((size_t)cap * sizeof *g);
    int *of = malloc((size_t)(set->n ? set->n : 1) * sizeof *of);
    double *a = malloc((size_t)(set->n ? set->n : 1) * 3 * sizeof *a);
    if (!g || !of || !a)
        goto oom;
    for (int i = 0; i < set->n; i++) {
        char key[sizeof g->key];
        stats_group_key(&set->rows[i], kind, key, sizeof key);
        int k = find_group(g, n, key);
        if (k < 0) {
            if (n == cap) {
                StatsGroup *h = realloc(g, (size_t)cap * 2 * sizeof *g);
                if (!h)
                    goto oom;
                g = h;
                cap *= 2;
            }
            k = n++;
            memset(&g[k], 0, sizeof g[k]);
            g[k].kind = kind;
            snprintf(g[k].key, sizeof g[k].key, "%s", key);
        }
        of[i] = k;
    }
    double *ape = a, *p = a + set->n, *m = a + 2 * set->n;
    for (int k = 0; k < n; k++) {
        int c = 0;
        for (int i = 0; i < set->n; i++)
            if (of[i] == k) {
                /* ranked by time per sequence: iteration times of different
                 * global batches do not compare; at one batch it is the same order */
                double gbs = set->rows[i].layout.gbs > 0 ? set->rows[i].layout.gbs : 1;
                ape[c] = stats_ape(pred[i], set->rows[i].measured_s);
                p[c] = pred[i] / gbs;
                m[c] = set->rows[i].measured_s / gbs;
                c++;
            }
        stats_summarize(ape, c, &g[k].st);
        g[k].spearman = stats_spearman(p, m, c);
        g[k].regret = stats_regret(p, m, c);
    }
    free(of);
    free(a);
    *out = g;
    return n;
oom:
    free(g);
    free(of);
    free(a);
    *out = NULL;
    return -1;
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
