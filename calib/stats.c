/* stats.c — error statistics, rank correlation, regret and groups (see stats.h). */
#include "stats.h"

#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

double stats_ape(double pred, double meas) { return meas > 0 ? 100.0 * fabs(pred - meas) / meas : 0; }

/* Linear interpolation between order statistics (numpy's default): s[i] and
 * s[i+1] for i = floor(q·(n-1)) of the sorted values. */
static double interp(double si, double si1, int n, double q)
{
    double pos = q * (n - 1);
    int i = (int)floor(pos);
    if (i >= n - 1)
        return si;
    return si + (pos - i) * (si1 - si);
}

/* Rearranges a[lo..hi) so that a[k] is the value sorted order puts there,
 * the ones before it <= and after it >= (Hoare's selection: O(n) expected,
 * where sorting a million APEs for two order statistics was most of the
 * summary). The middle element as pivot; an order statistic's value does
 * not depend on how it was found. */
static void select_kth(double *a, int lo, int hi, int k)
{
    hi--;
    while (lo < hi) {
        double piv = a[lo + (hi - lo) / 2];
        int i = lo, j = hi;
        while (i <= j) {
            while (a[i] < piv)
                i++;
            while (a[j] > piv)
                j--;
            if (i <= j) {
                double t = a[i];
                a[i++] = a[j];
                a[j--] = t;
            }
        }
        if (k <= j)
            hi = j;
        else if (k >= i)
            lo = i;
        else
            return;
    }
}

static double min_of(const double *a, int lo, int hi)
{
    double m = a[lo];
    for (int i = lo + 1; i < hi; i++)
        m = a[i] < m ? a[i] : m;
    return m;
}

void stats_summarize(const double *ape, int n, ApeStats *out)
{
    memset(out, 0, sizeof *out);
    out->n = n;
    if (n <= 0)
        return;
    double small[64];
    double *s = n <= 64 ? small : malloc((size_t)n * sizeof *s);
    if (!s)
        return;
    double sum = 0, max = ape[0];
    for (int i = 0; i < n; i++) {
        s[i] = ape[i];
        sum += ape[i];   /* in row order, as always: the mean's last digits depend on it */
        max = ape[i] > max ? ape[i] : max;
    }
    out->mape = sum / n;
    /* the order statistics the median and the 90th percentile read */
    int im = (int)floor(0.5 * (n - 1)), ip = (int)floor(0.9 * (n - 1));
    select_kth(s, 0, n, im);
    double m0 = s[im], m1 = im + 1 < n ? min_of(s, im + 1, n) : m0;
    double p0 = m0, p1 = m1;
    if (ip > im) {
        select_kth(s, im + 1, n, ip);
        p0 = s[ip];
        p1 = ip + 1 < n ? min_of(s, ip + 1, n) : p0;
    }
    out->median = interp(m0, m1, n, 0.5);
    out->p90 = interp(p0, p1, n, 0.9);
    out->max = max;
    if (s != small)
        free(s);
}

/* A double's bits as an unsigned key in the order of the values (negative
 * ones reversed), for a radix sort. */
static uint64_t order_key(double v)
{
    uint64_t u;
    memcpy(&u, &v, sizeof u);
    return u >> 63 ? ~u : u | (1ULL << 63);
}

typedef struct { uint64_t k; int i; } Keyed;

/* Indices 0..n-1 in the order of x (equal values in any order): insertion
 * for a few, else a least-significant-digit radix sort on order_key, 11 bits
 * a pass, skipping passes where every key has the same digit. */
static int sort_indices(const double *x, int n, int *idx)
{
    if (n <= 32) {
        for (int i = 0; i < n; i++) {
            int j = i;
            while (j > 0 && x[idx[j - 1]] > x[i]) {
                idx[j] = idx[j - 1];
                j--;
            }
            idx[j] = i;
        }
        return 0;
    }
    Keyed *a = malloc((size_t)n * 2 * sizeof *a);
    if (!a)
        return -1;
    Keyed *b = a + n;
    uint64_t all_and = ~0ULL, all_or = 0;
    for (int i = 0; i < n; i++) {
        a[i] = (Keyed){order_key(x[i]), i};
        all_and &= a[i].k;
        all_or |= a[i].k;
    }
    for (int shift = 0; shift < 64; shift += 11) {
        uint64_t mask = 2047ULL << shift;
        if (((all_and ^ all_or) & mask) == 0)
            continue;   /* the same digit everywhere */
        int cnt[2048] = {0};
        for (int i = 0; i < n; i++)
            cnt[(a[i].k >> shift) & 2047]++;
        for (int d = 0, pos = 0; d < 2048; d++) {
            int c = cnt[d];
            cnt[d] = pos;
            pos += c;
        }
        for (int i = 0; i < n; i++)
            b[cnt[(a[i].k >> shift) & 2047]++] = a[i];
        Keyed *t = a;
        a = b;
        b = t;
    }
    for (int i = 0; i < n; i++)
        idx[i] = a[i].i;
    free(a < b ? a : b);   /* one allocation: its start is the lower of the two */
    return 0;
}

/* Ranks 1..n with ties averaged; O(n) for large n. A tie is a run of equal
 * values in sorted order, and its rank the mean of its positions, whatever
 * the order inside the run. */
static int ranks(const double *x, int n, double *rk)
{
    int small[32];
    int *o = n <= 32 ? small : malloc((size_t)n * sizeof *o);
    if (!o || sort_indices(x, n, o)) {
        if (o != small)
            free(o);
        return -1;
    }
    for (int i = 0; i < n;) {
        int j = i;
        while (j + 1 < n && x[o[j + 1]] == x[o[i]])
            j++;
        double r = 0.5 * (i + j) + 1.0;
        for (int k = i; k <= j; k++)
            rk[o[k]] = r;
        i = j + 1;
    }
    if (o != small)
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
static uint64_t hash_key(const char *s)
{
    uint64_t h = 1469598103934665603ULL;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ULL;
    return h;
}

int stats_groups_compact(const StatsRow *rows, int nrows, const double *pred, StatsGroupKind kind,
                         StatsGroupStats **out)
{
    int n = 0;
    size_t nslot = 64;
    while (nslot < 2 * (size_t)nrows)   /* load factor at most 1/2 */
        nslot *= 2;
    size_t nr = nrows ? (size_t)nrows : 1;
    /* while grouping, a group is its key in one block of text and the key's
     * hash in the table; the groups are made at the end, once their count is
     * known (a million 192-byte StatsGroups grown by doubling were most of
     * validate's memory) */
    size_t *first = malloc(nr * sizeof *first);   /* a group's key: text + first[k] */
    size_t tlen = 0, tcap = 1 << 16;
    char *text = malloc(tcap);
    struct { uint64_t hash; int group; } *slot = malloc(nslot * sizeof *slot);   /* group -1: free */
    int *of = malloc(nr * sizeof *of), *order = malloc(nr * sizeof *order);
    int *start = NULL;
    double *a = malloc(nr * 3 * sizeof *a);
    StatsGroupStats *g = NULL;
    if (!first || !text || !slot || !of || !order || !a)
        goto oom;
    for (size_t i = 0; i < nslot; i++)
        slot[i].group = -1;
    /* each row's group, groups in order of first appearance */
    for (int i = 0; i < nrows; i++) {
        char key[sizeof ((StatsGroup *)0)->key];
        stats_row_key(&rows[i], kind, key, sizeof key);
        uint64_t hk = hash_key(key);
        size_t h = hk & (nslot - 1);
        while (slot[h].group >= 0 && (slot[h].hash != hk || strcmp(text + first[slot[h].group], key)))
            h = (h + 1) & (nslot - 1);
        if (slot[h].group < 0) {
            size_t kl = strlen(key) + 1;
            if (tlen + kl > tcap) {
                char *t = realloc(text, tcap * 2);
                if (!t)
                    goto oom;
                text = t;
                tcap *= 2;
            }
            memcpy(text + tlen, key, kl);
            first[n] = tlen;
            tlen += kl;
            slot[h].hash = hk;
            slot[h].group = n++;
        }
        of[i] = slot[h].group;
    }
    free(slot);
    slot = NULL;
    g = malloc((size_t)(n ? n : 1) * sizeof *g);
    /* rows by group, in row order within a group (a counting sort) */
    start = calloc((size_t)n + 1, sizeof *start);
    if (!g || !start)
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
        StatsGroupStats *gk = &g[k];
        gk->first = order[lo];
        stats_summarize(ape, c, &gk->st);
        gk->spearman = stats_spearman(p, m, c);
        gk->regret = stats_regret(p, m, c);
    }
    free(first);
    free(text);
    free(of);
    free(order);
    free(start);
    free(a);
    *out = g;
    return n;
oom:
    free(g);
    free(first);
    free(text);
    free(slot);
    free(of);
    free(order);
    free(start);
    free(a);
    *out = NULL;
    return -1;
}

int stats_groups_rows(const StatsRow *rows, int nrows, const double *pred, StatsGroupKind kind, StatsGroup **out)
{
    StatsGroupStats *c;
    int n = stats_groups_compact(rows, nrows, pred, kind, &c);
    StatsGroup *g = n < 0 ? NULL : malloc((size_t)(n ? n : 1) * sizeof *g);
    if (!g) {
        free(c);
        *out = NULL;
        return -1;
    }
    for (int k = 0; k < n; k++) {
        g[k] = (StatsGroup){.kind = kind, .st = c[k].st, .spearman = c[k].spearman, .regret = c[k].regret};
        stats_row_key(&rows[c[k].first], kind, g[k].key, sizeof g[k].key);
    }
    free(c);
    *out = g;
    return n;
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

/* ---- number text ---------------------------------------------------------------
 * validate prints millions of numbers (a row of --json has twenty, a group line
 * six); snprintf and cJSON's sscanf check were most of its time. The digits here
 * are the exact decimal value of the double rounded half to even, as glibc's
 * printf rounds, computed in 128-bit integers where the value fits them; where
 * it does not (or without a 128-bit type) snprintf itself writes the text. */

#ifdef __SIZEOF_INT128__
typedef unsigned __int128 u128;

static const uint64_t pow10_u64[20] = {
    1ULL, 10ULL, 100ULL, 1000ULL, 10000ULL, 100000ULL, 1000000ULL, 10000000ULL, 100000000ULL, 1000000000ULL,
    10000000000ULL, 100000000000ULL, 1000000000000ULL, 10000000000000ULL, 100000000000000ULL,
    1000000000000000ULL, 10000000000000000ULL, 100000000000000000ULL, 1000000000000000000ULL,
    10000000000000000000ULL,
};

static u128 pow10_u128(int n)   /* 10^n, 0 <= n <= 38 */
{
    return n <= 19 ? pow10_u64[n] : (u128)pow10_u64[19] * pow10_u64[n - 19];
}

/* round(a·10^p) for a finite a > 0, half to even, exactly: 0, or -1 when the
 * intermediate values do not fit 128 bits (the caller falls back to snprintf). */
static int scaled_round(double a, int p, u128 *q)
{
    uint64_t bits;
    memcpy(&bits, &a, sizeof bits);
    int be = (int)((bits >> 52) & 0x7ff);
    uint64_t m = bits & ((1ULL << 52) - 1);
    if (be == 0x7ff)
        return -1;
    if (be)
        m |= 1ULL << 52;
    int k = (be ? be : 1) - 1075;   /* a = m·2^k */
    if (m == 0) {
        *q = 0;
        return 0;
    }
    if (p >= 0) {                   /* m·10^p / 2^-k: a shift, no division */
        if (p > 22)
            return -1;
        u128 num = (u128)m * pow10_u128(p);   /* < 2^53·10^22 < 2^127 */
        if (k >= 0) {
            if (k > 127 || (num >> (127 - k)) != 0)
                return -1;
            *q = num << k;
            return 0;
        }
        int sh = -k;
        if (sh > 127)
            return -1;
        u128 t = num >> sh, r = num & (((u128)1 << sh) - 1), half = (u128)1 << (sh - 1);
        if (r > half || (r == half && (t & 1)))
            t++;
        *q = t;
        return 0;
    }
    if (-p > 38)
        return -1;
    u128 num = m, den = pow10_u128(-p);   /* m·2^k / 10^-p */
    if (k >= 0) {
        if (k > 127 || (num >> (127 - k)) != 0)
            return -1;
        num <<= k;
    } else {
        if (-k > 127 || (den >> (127 + k)) != 0)
            return -1;
        den <<= -k;
    }
    u128 r = num % den, t = num / den;
    u128 half = den - r;            /* compare 2r with den without overflow: r vs den - r */
    if (r > half || (r == half && (t & 1)))
        t++;
    *q = t;
    return 0;
}

static int utoa128(u128 v, char *out)   /* decimal digits, no NUL; returns the count */
{
    char t[48];
    int n = 0;
    while (v >> 64) {
        t[n++] = (char)('0' + (int)(v % 10));
        v /= 10;
    }
    uint64_t w = (uint64_t)v;       /* the usual case: 64-bit division by a constant */
    do {
        t[n++] = (char)('0' + (int)(w % 10));
        w /= 10;
    } while (w);
    for (int i = 0; i < n; i++)
        out[i] = t[n - 1 - i];
    return n;
}

/* "%.{prec}g" of a finite nonzero d (prec 1..19) into buf (32 bytes); -1 when
 * it must go to snprintf. *x: a guess at the decimal exponent on entry, the
 * exponent of the first digit on return; *sig: the prec significant digits
 * as an integer, for cJSON's read-back test. */
static int fmt_g(double d, int prec, char *buf, uint64_t *sig, int *x)
{
    double a = fabs(d);
    int e = *x;                     /* a guess at floor(log10 a), from the caller */
    const uint64_t lo = pow10_u64[prec - 1], hi = lo * 10;
    u128 q = 0;
    for (int tries = 0;; tries++) {
        if (tries > 3 || scaled_round(a, prec - 1 - e, &q))
            return -1;
        if (q >= hi)
            e++;
        else if (q < lo)
            e--;
        else
            break;
    }
    uint64_t v = (uint64_t)q;
    char dg[24];
    for (int i = prec - 1; i >= 0; i--, v /= 10)   /* exactly prec digits */
        dg[i] = (char)('0' + (int)(v % 10));
    int nd = prec;
    *sig = (uint64_t)q;
    *x = e;
    while (nd > 1 && dg[nd - 1] == '0')   /* %g drops trailing zeros */
        nd--;
    char *o = buf;
    if (signbit(d))
        *o++ = '-';
    if (e < -4 || e >= prec) {      /* d.ddde+XX */
        *o++ = dg[0];
        if (nd > 1) {
            *o++ = '.';
            memcpy(o, dg + 1, (size_t)nd - 1);
            o += nd - 1;
        }
        *o++ = 'e';
        *o++ = e < 0 ? '-' : '+';
        int ae = e < 0 ? -e : e;
        if (ae >= 100)
            *o++ = (char)('0' + ae / 100);
        *o++ = (char)('0' + ae / 10 % 10);
        *o++ = (char)('0' + ae % 10);
    } else if (e >= 0) {            /* ddd.ddd */
        int ni = e + 1;
        for (int i = 0; i < ni; i++)
            *o++ = i < nd ? dg[i] : '0';
        if (nd > ni) {
            *o++ = '.';
            memcpy(o, dg + ni, (size_t)(nd - ni));
            o += nd - ni;
        }
    } else {                        /* 0.000ddd */
        *o++ = '0';
        *o++ = '.';
        for (int i = 0; i < -e - 1; i++)
            *o++ = '0';
        memcpy(o, dg, (size_t)nd);
        o += nd;
    }
    *o = '\0';
    return (int)(o - buf);
}
#endif

int stats_fmt_fixed(double d, int prec, char *buf, int len)
{
#ifdef __SIZEOF_INT128__
    u128 q;
    if (len >= 48 && prec >= 0 && prec <= 9 && isfinite(d) && fabs(d) < 1e18 &&
        scaled_round(fabs(d), prec, &q) == 0) {
        char dg[48];
        int nd = utoa128(q, dg), o = 0;
        if (signbit(d))
            buf[o++] = '-';
        if (nd <= prec) {           /* 0.00ddd */
            buf[o++] = '0';
            if (prec) {
                buf[o++] = '.';
                for (int i = nd; i < prec; i++)
                    buf[o++] = '0';
                memcpy(buf + o, dg, (size_t)nd);
                o += nd;
            }
        } else {
            memcpy(buf + o, dg, (size_t)(nd - prec));
            o += nd - prec;
            if (prec) {
                buf[o++] = '.';
                memcpy(buf + o, dg + nd - prec, (size_t)prec);
                o += prec;
            }
        }
        buf[o] = '\0';
        return o;
    }
#endif
    int n = snprintf(buf, (size_t)(len > 0 ? len : 0), "%.*f", prec, d);
    return n < len ? n : len - 1;
}

#define CJSON_BEFORE_1_7_16 (CJSON_VERSION_MAJOR * 10000 + CJSON_VERSION_MINOR * 100 + CJSON_VERSION_PATCH < 10716)

/* cJSON's own test of its 15-digit text: read back, equal within DBL_EPSILON relative */
static bool cjson_close(double a, double b)
{
    double m = fabs(a) > fabs(b) ? fabs(a) : fabs(b);
    return fabs(a - b) <= m * DBL_EPSILON;
}

int stats_json_number(double d, char *buf)
{
    if (isnan(d) || isinf(d)) {
        memcpy(buf, "null", 5);
        return 4;
    }
    /* an int: the same digits as "%1.15g" would give, but for -0 (cJSON 1.7.16
     * prints "%d" of its saturated valueint when that equals d: "0"; 1.7.15 "-0") */
    int vi = d >= INT_MAX ? INT_MAX : d <= (double)INT_MIN ? INT_MIN : (int)d;
    if (d == (double)vi && !(CJSON_BEFORE_1_7_16 && d == 0 && signbit(d))) {
        char t[16], *q = t + sizeof t;
        unsigned u = vi < 0 ? 0u - (unsigned)vi : (unsigned)vi;
        do
            *--q = (char)('0' + u % 10);
        while (u /= 10);
        if (vi < 0)
            *--q = '-';
        int n = (int)(t + sizeof t - q);
        memcpy(buf, q, (size_t)n);
        buf[n] = '\0';
        return n;
    }
    if (d == 0) {                   /* -0 before cJSON 1.7.16: "%1.15g" */
        memcpy(buf, "-0", 3);
        return 2;
    }
#ifdef __SIZEOF_INT128__
    uint64_t sig;
    int x = (int)floor(log10(fabs(d))), n = fmt_g(d, 15, buf, &sig, &x);
    if (n > 0) {
        /* the text's value is sig·10^(x-14); read back as strtod would: exactly
         * when sig and the power of ten are doubles (one rounding), else strtod */
        int t = x - 14;
        double back;
        static const double p10[] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,  1e8,  1e9,  1e10, 1e11,
                                     1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};
        if (t >= -22 && t <= 22) {
            back = t >= 0 ? (double)sig * p10[t] : (double)sig / p10[-t];
            back = signbit(d) ? -back : back;
        } else {
            back = strtod(buf, NULL);
        }
        if (cjson_close(back, d))
            return n;
        n = fmt_g(d, 17, buf, &sig, &x);
        if (n > 0)
            return n;
    }
#endif
    double back;
    int n2 = snprintf(buf, 32, "%1.15g", d);
    if (sscanf(buf, "%lg", &back) != 1 || !cjson_close(back, d))
        n2 = snprintf(buf, 32, "%1.17g", d);
    return n2;
}
