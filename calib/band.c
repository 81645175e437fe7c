/* band.c — the error band of a prediction from the residuals of the nearest
 * measured runs, the residual table's text form, and the calibration check
 * (band.h says the rule). The shipped table is profiles/bands.csv, embedded
 * by calib/band.cmake as band_embed_csv; it is parsed on first use. */
#include "band.h"
#include "spec.h"

#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

extern const char band_embed_csv[];   // generated from profiles/bands.csv

double band_residual(const BandRun *r)
{
    return r->predicted_s > 0 ? r->measured_s / r->predicted_s - 1 : 0;
}

int band_zero_class(OptimShard opt)
{
    switch (opt) {
    case OPT_ZERO1:
    case OPT_DISTOPT: return 1;
    case OPT_ZERO2: return 2;
    case OPT_ZERO3: return 3;
    default: return 0;
    }
}

const char *band_generation(const char *gpu, char *buf, int len)
{
    static const struct { const char *prefix, *gen; } fam[] = {
        {"a100", "ampere"}, {"a800", "ampere"}, {"a30", "ampere"}, {"h100", "hopper"}, {"h200", "hopper"},
        {"h800", "hopper"}, {"h20", "hopper"},  {"gh200", "hopper"}, {"b300", "blackwell-ultra"},
        {"gb300", "blackwell-ultra"}, {"b200", "blackwell"}, {"gb200", "blackwell"}, {"b100", "blackwell"},
    };
    for (size_t i = 0; i < sizeof fam / sizeof *fam; i++)
        if (!strncmp(gpu, fam[i].prefix, strlen(fam[i].prefix))) {
            snprintf(buf, len, "%s", fam[i].gen);
            return buf;
        }
    snprintf(buf, len, "%s", gpu);
    return buf;
}

void band_query(const ModelSpec *m, const HwProfile *hw, const Layout *lo, BandQuery *q)
{
    memset(q, 0, sizeof *q);
    snprintf(q->gpu, sizeof q->gpu, "%s", hw->name);
    q->tp = lo->tp;
    q->pp = lo->pp;
    q->dp = lo->dp;
    q->cp = lo->cp;
    q->ep = lo->ep > 0 ? lo->ep : 1;
    q->moe = spec_is_moe(m);
    q->zero = band_zero_class(lo->opt);
    q->params_b = (double)spec_params(m, 1, PARAMS_EXACT) / 1e9;
    snprintf(q->stack, sizeof q->stack, "%s", hw->stack);   /* --stack: that stack's runs are nearer */
}

/* ---- text form ---- */

static const char header[] =
    "source,line,gpu,stack,gpus,tp,pp,dp,cp,ep,zero,params_b,seq,measured_ms,predicted_ms,err_step_pct,err_mfu_pct,moe\n";

static int row_text(const BandRun *r, char *buf, int len)
{
    double es = r->measured_s > 0 ? 100 * (r->predicted_s / r->measured_s - 1) : 0;
    return snprintf(buf, len, "%s,%d,%s,%s,%d,%d,%d,%d,%d,%d,%d,%.6g,%d,%.6g,%.6g,%.3f,%.3f,%d\n", r->source, r->line,
                    r->gpu, r->stack, r->gpus, r->tp, r->pp, r->dp, r->cp, r->ep, r->zero, r->params_b, r->seq,
                    r->measured_s * 1e3, r->predicted_s * 1e3, es, 100 * band_residual(r), r->moe);
}

void band_write_header(FILE *f) { fputs(header, f); }

void band_write_row(FILE *f, const BandRun *r)
{
    char b[512];
    row_text(r, b, sizeof b);
    fputs(b, f);
}

static int append(char **buf, size_t *len, size_t *cap, const char *s, size_t n)
{
    if (*len + n + 1 > *cap) {
        size_t c = *cap ? *cap : 4096;
        while (c < *len + n + 1)
            c *= 2;
        char *q = realloc(*buf, c);
        if (!q)
            return -1;
        *buf = q;
        *cap = c;
    }
    memcpy(*buf + *len, s, n);
    *len += n;
    (*buf)[*len] = 0;
    return 0;
}

int band_append_header(char **buf, size_t *len, size_t *cap) { return append(buf, len, cap, header, strlen(header)); }

int band_append_row(char **buf, size_t *len, size_t *cap, const BandRun *r)
{
    char b[512];
    int n = row_text(r, b, sizeof b);
    return append(buf, len, cap, b, (size_t)n);
}

int band_table_add(BandTable *t, const BandRun *r)
{
    if (t->n == t->cap) {
        int c = t->cap ? 2 * t->cap : 256;
        BandRun *q = realloc(t->r, (size_t)c * sizeof *q);
        if (!q)
            return -1;
        t->r = q;
        t->cap = c;
    }
    t->r[t->n++] = *r;
    return 0;
}

void band_table_free(BandTable *t)
{
    if (!t)
        return;
    free(t->r);
    memset(t, 0, sizeof *t);
}

static int fail(char *err, int errlen, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    return -1;
}

/* one field of a line: [p, comma) copied into out */
static const char *field(const char *p, const char *end, char *out, int len)
{
    const char *q = p;
    while (q < end && *q != ',')
        q++;
    int n = (int)(q - p);
    if (n >= len)
        n = len - 1;
    memcpy(out, p, (size_t)n);
    out[n] = 0;
    return q < end ? q + 1 : NULL;
}

static int to_int(const char *s, int lo, int *v)
{
    char *e;
    long x = strtol(s, &e, 10);
    if (!*s || *e || x < lo || x > 100000000)
        return -1;
    *v = (int)x;
    return 0;
}

static int to_num(const char *s, double *v)
{
    char *e;
    double x = strtod(s, &e);
    if (!*s || *e || !isfinite(x) || x < 0)
        return -1;
    *v = x;
    return 0;
}

int band_table_parse(const char *text, const char *origin, BandTable *t, char *err, int errlen)
{
    static const char *const names[] = {"source", "line", "gpu", "stack", "gpus", "tp", "pp", "dp", "cp", "ep",
                                        "zero", "params_b", "seq", "measured_ms", "predicted_ms", "err_step_pct",
                                        "err_mfu_pct", "moe"};
    enum { NCOL = sizeof names / sizeof *names };
    int lineno = 0, have_header = 0, n0 = t->n;
    for (const char *p = text; p && *p;) {
        const char *end = strchr(p, '\n');
        const char *next = end ? end + 1 : NULL;
        if (!end)
            end = p + strlen(p);
        lineno++;
        const char *e = end;
        if (e > p && e[-1] == '\r')
            e--;
        if (e == p || *p == '#') {
            p = next;
            continue;
        }
        char f[NCOL][64];
        const char *q = p;
        int nf = 0;
        while (q && nf < NCOL)
            q = field(q, e, f[nf++], sizeof f[0]);
        if (nf != NCOL || q) {
            t->n = n0;
            return fail(err, errlen, "%s:%d: expected %d comma-separated columns", origin, lineno, NCOL);
        }
        if (!have_header) {
            for (int i = 0; i < NCOL; i++)
                if (strcmp(f[i], names[i])) {
                    t->n = n0;
                    return fail(err, errlen, "%s:%d: column %d: expected \"%s\", got \"%s\"", origin, lineno,
                                i + 1, names[i], f[i]);
                }
            have_header = 1;
            p = next;
            continue;
        }
        BandRun r = {0};
        if (strlen(f[0]) >= sizeof r.source || !f[0][0] || strlen(f[2]) >= sizeof r.gpu || !f[2][0] ||
            strlen(f[3]) >= sizeof r.stack) {
            t->n = n0;
            return fail(err, errlen, "%s:%d: source, gpu or stack empty or too long", origin, lineno);
        }
        memcpy(r.source, f[0], strlen(f[0]) + 1);
        memcpy(r.gpu, f[2], strlen(f[2]) + 1);
        memcpy(r.stack, f[3], strlen(f[3]) + 1);
        int *iv[] = {&r.line, NULL, NULL, NULL, &r.gpus, &r.tp, &r.pp, &r.dp, &r.cp, &r.ep, &r.zero};
        for (int i = 1; i < 11; i++)
            if (iv[i] && to_int(f[i], i == 10 ? 0 : 1, iv[i])) {
                t->n = n0;
                return fail(err, errlen, "%s:%d: column %s: expected a whole number, got \"%s\"", origin, lineno,
                            names[i], f[i]);
            }
        double ms[2];
        if (to_num(f[11], &r.params_b) || to_int(f[12], 1, &r.seq) || to_num(f[13], &ms[0]) ||
            to_num(f[14], &ms[1]) || !(ms[0] > 0) || !(ms[1] > 0) || r.zero > 3 || to_int(f[17], 0, &r.moe) ||
            r.moe > 1) {
            t->n = n0;
            return fail(err, errlen, "%s:%d: params_b, seq, measured_ms, predicted_ms, zero or moe out of range", origin,
                        lineno);
        }
        r.measured_s = ms[0] / 1e3;
        r.predicted_s = ms[1] / 1e3;
        if (band_table_add(t, &r)) {
            t->n = n0;
            return fail(err, errlen, "%s: out of memory", origin);
        }
        p = next;
    }
    if (!have_header)
        return fail(err, errlen, "%s: no header line", origin);
    return 0;
}

const BandTable *band_table_builtin(void)
{
    static BandTable t;
    static int state;   /* 0 not parsed, 1 ok, -1 failed */
    if (state == 0) {
        char err[256];
        state = band_table_parse(band_embed_csv, "profiles/bands.csv", &t, err, sizeof err) == 0 ? 1 : -1;
    }
    return state > 0 ? &t : NULL;
}

/* ---- percentiles and the nearest runs ---- */

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double band_percentile(double *v, int n, double pct)
{
    if (n <= 0)
        return 0;
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    double pos = pct / 100 * (n + 1);   /* 1-based */
    if (pos <= 1)
        return v[0];
    if (pos >= n)
        return v[n - 1];
    int i = (int)floor(pos);
    double w = pos - i;
    return v[i - 1] + w * (v[i] - v[i - 1]);
}

typedef struct {
    int k, g, s, d;          // model kind (dense / MoE), GPU, stack, parallel dims
    double z;
    int idx;
} Dist;

static int cmp_dist(const void *a, const void *b)
{
    const Dist *x = a, *y = b;
    if (x->k != y->k)
        return x->k - y->k;
    if (x->g != y->g)
        return x->g - y->g;
    if (x->s != y->s)
        return x->s - y->s;
    if (x->d != y->d)
        return x->d - y->d;
    if (x->z != y->z)
        return x->z < y->z ? -1 : 1;
    return x->idx - y->idx;
}

static void distance(const BandRun *r, const BandQuery *q, Dist *d)
{
    char g1[48], g2[48];
    d->k = r->moe != q->moe;
    d->g = !strcmp(r->gpu, q->gpu) ? 0 : !strcmp(band_generation(r->gpu, g1, 48), band_generation(q->gpu, g2, 48)) ? 1 : 2;
    d->s = r->stack[0] && q->stack[0] && strcmp(r->stack, q->stack);
    d->d = (r->tp > 1) != (q->tp > 1);
    d->d += (r->pp > 1) != (q->pp > 1);
    d->d += (r->dp > 1) != (q->dp > 1);
    d->d += (r->cp > 1) != (q->cp > 1);
    d->d += (r->ep > 1) != (q->ep > 1);
    d->d += r->zero != q->zero;
    d->z = r->params_b > 0 && q->params_b > 0 ? fabs(log10(r->params_b / q->params_b)) : 3;
}

int band_select(const BandTable *t, const BandQuery *q, int k, const char *skip_source, int skip_index, int *idx)
{
    Dist *d = malloc((size_t)(t->n ? t->n : 1) * sizeof *d);
    if (!d)
        return -1;
    int n = 0;
    for (int i = 0; i < t->n; i++) {
        if (i == skip_index || (skip_source && !strcmp(t->r[i].source, skip_source)))
            continue;
        distance(&t->r[i], q, &d[n]);
        d[n].idx = i;
        n++;
    }
    qsort(d, (size_t)n, sizeof *d, cmp_dist);
    /* in order of distance, at most cap runs of one source; then the nearest of the rest */
    int cap = BAND_PER_SOURCE, m = 0;
    for (int pass = 0; pass < 2 && m < k; pass++)
        for (int i = 0; i < n && m < k; i++) {
            if (d[i].idx < 0)
                continue;
            int same = 0;
            for (int j = 0; j < m && pass == 0; j++)
                same += !strcmp(t->r[idx[j]].source, t->r[d[i].idx].source);
            if (pass == 0 && same >= cap)
                continue;
            idx[m++] = d[i].idx;
            d[i].idx = -1;
        }
    free(d);
    return m;
}

/* The scatter of one file: its runs' residuals (less the one left out) minus
 * their median, read at BAND_SCATTER evenly spaced ranks (the midpoints of
 * BAND_SCATTER equal slices), so that a file of 1,440 runs and one of 3
 * weigh alike. Writes BAND_SCATTER values to out; r is scratch of t->n. */
static void file_scatter(const BandTable *t, const char *source, int skip_index, double *r, double *out)
{
    int n = 0;
    for (int i = 0; i < t->n; i++)
        if (i != skip_index && !strcmp(t->r[i].source, source))
            r[n++] = band_residual(&t->r[i]);
    if (n == 0) {   /* cannot happen for a file a selected run came from */
        for (int j = 0; j < BAND_SCATTER; j++)
            out[j] = 0;
        return;
    }
    qsort(r, (size_t)n, sizeof *r, cmp_double);
    double med = n % 2 ? r[n / 2] : (r[n / 2 - 1] + r[n / 2]) / 2;
    for (int j = 0; j < BAND_SCATTER; j++)
        out[j] = r[(int)((j + 0.5) * n / BAND_SCATTER)] - med;
}

/* The band's sample (band.h): every selected file's bias (the mean residual
 * of its selected runs) plus every selected file's scatter. */
static int band_sample(const BandTable *t, const int *idx, int m, int skip_index, double **out, int *nout)
{
    const char **file = malloc((size_t)m * sizeof *file);
    double *bias = malloc((size_t)m * sizeof *bias);
    int *cnt = malloc((size_t)m * sizeof *cnt), nf = 0, rc = -1;
    double *sc = NULL, *v = NULL, *scratch = NULL;
    if (!file || !bias || !cnt)
        goto out;
    for (int i = 0; i < m; i++) {
        const BandRun *r = &t->r[idx[i]];
        int j = 0;
        while (j < nf && strcmp(file[j], r->source))
            j++;
        if (j == nf) {
            file[nf] = r->source, bias[nf] = 0, cnt[nf] = 0;
            nf++;
        }
        bias[j] += band_residual(r);
        cnt[j]++;
    }
    sc = malloc((size_t)nf * BAND_SCATTER * sizeof *sc);
    v = malloc((size_t)nf * nf * BAND_SCATTER * sizeof *v);
    scratch = malloc((size_t)t->n * sizeof *scratch);
    if (!sc || !v || !scratch)
        goto out;
    for (int j = 0; j < nf; j++)
        file_scatter(t, file[j], skip_index, scratch, sc + (size_t)j * BAND_SCATTER);
    int n = 0;
    for (int j = 0; j < nf; j++)
        for (int s = 0; s < nf * BAND_SCATTER; s++)
            v[n++] = bias[j] / cnt[j] + sc[s];
    *out = v;
    *nout = n;
    v = NULL;
    rc = 0;
out:
    free(file);
    free(bias);
    free(cnt);
    free(sc);
    free(v);
    free(scratch);
    return rc;
}

/* The step, MFU and tokens/s ranges of a band whose percentiles are set. */
static void band_scale(Band *b, double step_s, double mfu, double tokens_per_s)
{
    b->step_lo = step_s * (1 + b->q_lo);
    b->step_hi = step_s * (1 + b->q_hi);
    b->mfu_lo = mfu / (1 + b->q_hi);
    b->mfu_hi = mfu / (1 + b->q_lo);
    b->tok_lo = tokens_per_s / (1 + b->q_hi);
    b->tok_hi = tokens_per_s / (1 + b->q_lo);
}

int band_of(const BandTable *t, const BandQuery *q, int k, const char *skip_source, int skip_index, double step_s,
            double mfu, double tokens_per_s, Band *b)
{
    memset(b, 0, sizeof *b);
    snprintf(b->rule, sizeof b->rule,
             "%.0f-%.0fth percentile of measured/predicted - 1 as one of the files of the %d nearest measured runs "
             "(at most %d a file) would err: a file's bias (mean of its runs there) plus a file's scatter about its "
             "median (nearest: the same kind, dense or MoE; same GPU, then generation; then stack; then parallel dims "
             "tp/pp/dp/cp/ep/ZeRO; then size)", BAND_LO_PCT, BAND_HI_PCT, k, BAND_PER_SOURCE);
    if (!t || t->n == 0)
        return 0;
    int *idx = malloc((size_t)t->n * sizeof *idx);
    if (!idx)
        return -1;
    int m = band_select(t, q, k, skip_source, skip_index, idx);
    if (m < 0) {
        free(idx);
        return -1;
    }
    char g1[48], g2[48];
    band_generation(q->gpu, g2, sizeof g2);
    /* sources by count, in order of first appearance among the selected */
    const char *src[8];
    int cnt[8], ns = 0, other = 0;
    for (int i = 0; i < m; i++) {
        const BandRun *r = &t->r[idx[i]];
        b->same_gpu += !strcmp(r->gpu, q->gpu);
        b->same_gen += !strcmp(band_generation(r->gpu, g1, sizeof g1), g2);
        int j = 0;
        while (j < ns && strcmp(src[j], r->source))
            j++;
        if (j == ns && ns < 8) {
            src[ns] = r->source;
            cnt[ns++] = 0;
        }
        if (j < ns)
            cnt[j]++;
        else
            other++;
    }
    int len = 0;
    for (int j = 0; j < ns && len < (int)sizeof b->sources; j++)
        len += snprintf(b->sources + len, sizeof b->sources - len, "%s%s %d", j ? ", " : "", src[j], cnt[j]);
    if (other && len < (int)sizeof b->sources)
        snprintf(b->sources + len, sizeof b->sources - len, ", others %d", other);
    b->runs = m;
    double *v = NULL;
    int nv = 0;
    if (m > 0 && band_sample(t, idx, m, skip_index, &v, &nv) != 0) {
        free(idx);
        return -1;
    }
    if (m > 0) {
        b->q_lo = band_percentile(v, nv, BAND_LO_PCT);
        b->q_hi = band_percentile(v, nv, BAND_HI_PCT);
        band_scale(b, step_s, mfu, tokens_per_s);
    }
    free(idx);
    free(v);
    return 0;
}

/* The last band_of_cost answer, per thread. The nearest runs and the
 * percentiles depend on the query alone (GPU, stack, parallel dims, ZeRO
 * class, kind and size: band_query memsets it, so one memcmp compares every
 * field, ones added later included); the step, MFU and tokens/s only scale
 * them. A TUI key press that moves none of the query's inputs then costs a
 * compare instead of a sort of the table. */
static _Thread_local struct {
    bool valid;
    const BandTable *t;
    BandQuery q;
    Band b;
} band_last;
static _Thread_local long band_last_hits;

long band_cache_hits(void) { return band_last_hits; }

int band_of_cost_uncached(const ModelSpec *m, const HwProfile *hw, const Layout *lo, const Cost *c, Band *b)
{
    BandQuery q;
    band_query(m, hw, lo, &q);
    return band_of(band_table_builtin(), &q, BAND_K, NULL, -1, c->step_s, c->thr.mfu, c->thr.tokens_per_s, b);
}

int band_of_cost(const ModelSpec *m, const HwProfile *hw, const Layout *lo, const Cost *c, Band *b)
{
    BandQuery q;
    band_query(m, hw, lo, &q);
    const BandTable *t = band_table_builtin();
    if (band_last.valid && band_last.t == t && !memcmp(&band_last.q, &q, sizeof q)) {
        band_last_hits++;
        *b = band_last.b;
        if (b->runs > 0)
            band_scale(b, c->step_s, c->thr.mfu, c->thr.tokens_per_s);
        return 0;
    }
    if (band_of(t, &q, BAND_K, NULL, -1, c->step_s, c->thr.mfu, c->thr.tokens_per_s, b) != 0)
        return -1;
    band_last.valid = true;
    band_last.t = t;
    band_last.q = q;
    band_last.b = *b;
    return 0;
}

/* ---- calibration ---- */

int band_coverage(const BandTable *t, int k, bool by_source, BandCoverage *cov, int max, BandCoverage *all)
{
    memset(all, 0, sizeof *all);
    snprintf(all->source, sizeof all->source, "all");
    int ns = 0;
    for (int i = 0; i < t->n; i++) {
        const BandRun *r = &t->r[i];
        BandQuery q = {0};
        snprintf(q.gpu, sizeof q.gpu, "%s", r->gpu);
        snprintf(q.stack, sizeof q.stack, "%s", r->stack);
        q.tp = r->tp;
        q.pp = r->pp;
        q.dp = r->dp;
        q.cp = r->cp;
        q.ep = r->ep;
        q.moe = r->moe;
        q.zero = r->zero;
        q.params_b = r->params_b;
        Band b;
        if (band_of(t, &q, k, by_source ? r->source : NULL, by_source ? -1 : i, r->predicted_s, 0, 0, &b))
            return -1;
        if (b.runs == 0)
            continue;   /* nothing to make a band from: not counted */
        int j = 0;
        while (j < ns && strcmp(cov[j].source, r->source))
            j++;
        if (j == ns && ns < max) {
            memset(&cov[ns], 0, sizeof cov[ns]);
            snprintf(cov[ns].source, sizeof cov[ns].source, "%s", r->source);
            ns++;
        }
        double e = band_residual(r);   /* measured = predicted·(1 + e): inside iff q_lo <= e <= q_hi */
        int below = e < b.q_lo, above = e > b.q_hi;
        BandCoverage *c[2] = {all, j < ns ? &cov[j] : NULL};
        for (int w = 0; w < 2; w++)
            if (c[w]) {
                c[w]->n++;
                c[w]->below += below;
                c[w]->above += above;
                c[w]->inside += !below && !above;
            }
    }
    return ns;
}
