/* runs.c — measured runs from CSV and the prediction of one run (see runs.h). */
#include "runs.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "fileio.h"
/* ---- columns -------------------------------------------------------------- */

typedef enum {
    C_PARAMS_B, C_GPUS, C_GBS, C_MBS, C_HIDDEN, C_HEADS, C_LAYERS, C_SEQ, C_TP, C_DP, C_PP, C_TIME_MS,
    C_KV_HEADS, C_HEAD_DIM, C_FFN, C_VOCAB, C_MLP, C_NORM, C_POS, C_BIAS, C_TIED, C_DROPOUT, C_SP,
    C_FLASH, C_RECOMPUTE, C_ZERO, C_PRECISION, C_GRAD_FP32, C_VP, C_CP, C_GPN, C_INTRA_BW, C_INTER_BW,
    C_DP_OVERLAP, C_TP_OVERLAP, C_TOK_S_GPU, C_LABEL, C_COUNT
} Col;

typedef struct {
    const char *name;     // ultraplan name
    const char *vtrain;   // vTrain header text, or NULL
    bool required;        // in the ultraplan format (vTrain requires its own eleven)
} ColDesc;

static const ColDesc cols[] = {
    [C_PARAMS_B] = {"params_b", "Parameters (billion)", false},
    [C_GPUS] = {"gpus", "# GPUs", false},
    [C_GBS] = {"gbs", "global batch", true},
    [C_MBS] = {"mbs", "micro batch", true},
    [C_HIDDEN] = {"hidden", "hidden size", true},
    [C_HEADS] = {"heads", "attention heads", true},
    [C_LAYERS] = {"layers", "# layers", true},
    [C_SEQ] = {"seq", "sequence length", true},
    [C_TP] = {"tp", "tensor parallelism", true},
    [C_DP] = {"dp", "data parallelism", true},
    [C_PP] = {"pp", "pipeline parallelism", true},
    [C_TIME_MS] = {"time_ms", "iteration time (ms)", true},   // or tokens_per_s_gpu
    [C_KV_HEADS] = {"kv_heads", NULL, false},
    [C_HEAD_DIM] = {"head_dim", NULL, false},
    [C_FFN] = {"ffn", NULL, false},
    [C_VOCAB] = {"vocab", NULL, false},
    [C_MLP] = {"mlp", NULL, false},
    [C_NORM] = {"norm", NULL, false},
    [C_POS] = {"pos", NULL, false},
    [C_BIAS] = {"bias", NULL, false},
    [C_TIED] = {"tied", NULL, false},
    [C_DROPOUT] = {"dropout", NULL, false},
    [C_SP] = {"sp", NULL, false},
    [C_FLASH] = {"flash", NULL, false},
    [C_RECOMPUTE] = {"recompute", NULL, false},
    [C_ZERO] = {"zero", NULL, false},
    [C_PRECISION] = {"precision", NULL, false},
    [C_GRAD_FP32] = {"grad_fp32", NULL, false},
    [C_VP] = {"vp", NULL, false},
    [C_CP] = {"cp", NULL, false},
    [C_GPN] = {"gpus_per_node", NULL, false},
    [C_INTRA_BW] = {"intra_bw_gbs", NULL, false},
    [C_INTER_BW] = {"inter_bw_gbs", NULL, false},
    [C_DP_OVERLAP] = {"dp_overlap", NULL, false},
    [C_TP_OVERLAP] = {"tp_overlap", NULL, false},
    [C_TOK_S_GPU] = {"tokens_per_s_gpu", NULL, false},
    [C_LABEL] = {"label", NULL, false},
};
_Static_assert(sizeof cols / sizeof cols[0] == C_COUNT, "one descriptor per column");

#define MAX_FIELDS 64

/* vTrain's cluster (its configuration files): 8 GPUs per node, 800 Gb/s per node. */
#define VTRAIN_GPUS_PER_NODE 8
#define VTRAIN_INTER_BW_PER_NODE (800e9 / 8.0)
#define VTRAIN_VOCAB 50257

typedef struct {
    const char *origin;
    int line;
    char *err;
    int errlen;
} Where;

static int bad(const Where *w, int col, const char *name, const char *expected, const char *got)
{
    snprintf(w->err, w->errlen, "%s:%d: column %d (\"%s\"): expected %s, got \"%.40s\"", w->origin, w->line,
             col + 1, name, expected, got);
    return -1;
}

/* Split one line in place at commas (no quoting: the formats need none). */
static int split(char *line, char **f, int max)
{
    int n = 0;
    char *p = line;
    for (;;) {
        if (n == max)
            return -1;
        f[n++] = p;
        char *c = strchr(p, ',');
        if (!c)
            break;
        *c = '\0';
        p = c + 1;
    }
    for (int i = 0; i < n; i++) {  /* trim, then one pair of double quotes (spreadsheet exports) */
        while (isspace((unsigned char)*f[i]))
            f[i]++;
        char *e = f[i] + strlen(f[i]);
        while (e > f[i] && isspace((unsigned char)e[-1]))
            *--e = '\0';
        if (e - f[i] >= 2 && f[i][0] == '"' && e[-1] == '"') {
            *--e = '\0';
            f[i]++;
        }
    }
    return n;
}

static int parse_double(const char *s, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || *end || errno || !isfinite(v))
        return -1;
    *out = v;
    return 0;
}

static int get_int(const Where *w, int col, const char *name, const char *s, int min, int *out)
{
    double v;
    char want[48];
    snprintf(want, sizeof want, "a whole number >= %d", min);
    if (parse_double(s, &v) || v != floor(v) || v < min || v > 1e9)
        return bad(w, col, name, want, s);
    *out = (int)v;
    return 0;
}

/* Times, bandwidths and rates: positive, and within what any real run has,
 * so a denormal or a 1e300 cannot turn into an infinite prediction. */
static int get_pos(const Where *w, int col, const char *name, const char *s, double *out)
{
    if (parse_double(s, out) || !(*out >= 1e-9 && *out <= 1e15))
        return bad(w, col, name, "a positive number from 1e-9 to 1e15", s);
    return 0;
}

static int get_bool(const Where *w, int col, const char *name, const char *s, bool *out)
{
    if (!strcmp(s, "1") || !strcasecmp(s, "true") || !strcasecmp(s, "yes") || !strcasecmp(s, "on"))
        *out = true;
    else if (!strcmp(s, "0") || !strcasecmp(s, "false") || !strcasecmp(s, "no") || !strcasecmp(s, "off"))
        *out = false;
    else
        return bad(w, col, name, "0 or 1", s);
    return 0;
}

/* Defaults of a row before its columns are read. */
static void row_defaults(RunRow *r, RunsFormat fmt)
{
    memset(r, 0, sizeof *r);
    ModelSpec *m = &r->model;
    snprintf(m->name, sizeof m->name, "custom");
    m->vocab = VTRAIN_VOCAB;
    m->mlp = MLP_GELU;
    m->norm = NORM_LAYERNORM;
    m->pos = POS_LEARNED;
    m->bias = true;
    m->tied = true;
    m->dropout = true;
    layout_default(&r->layout);
    r->dp_overlap = -1;
    r->tp_overlap = -1;
    if (fmt == RUNS_FMT_VTRAIN) {
        r->dp_overlap = 0;
        r->recompute = RECOMPUTE_FULL;
        r->layout.flash = false;
        r->layout.prec = PREC_FP16;
        r->layout.grad_fp32 = false;
        r->layout.sp = false;
        r->gpus_per_node = VTRAIN_GPUS_PER_NODE;
        r->inter_bw = VTRAIN_INTER_BW_PER_NODE / VTRAIN_GPUS_PER_NODE;
    } else {
        r->recompute = RECOMPUTE_NONE;
        r->layout.sp = true;   /* as predict: on when tp > 1 (layout_check clears it at tp 1) */
    }
}

/* One field into the row. */
static int set_field(const Where *w, RunRow *r, Col c, int col, const char *s, bool *sp_given)
{
    ModelSpec *m = &r->model;
    Layout *lo = &r->layout;
    const char *nm = cols[c].name;
    double v;
    switch (c) {
    case C_PARAMS_B: return get_pos(w, col, nm, s, &r->params_b);
    case C_GPUS: return get_int(w, col, nm, s, 1, &r->gpus);
    case C_GBS: return get_int(w, col, nm, s, 1, &lo->gbs);
    case C_MBS: return get_int(w, col, nm, s, 1, &lo->mbs);
    case C_HIDDEN: return get_int(w, col, nm, s, 1, &m->h);
    case C_HEADS: return get_int(w, col, nm, s, 1, &m->a);
    case C_LAYERS: return get_int(w, col, nm, s, 1, &m->L);
    case C_SEQ: return get_int(w, col, nm, s, 1, &m->s);
    case C_TP: return get_int(w, col, nm, s, 1, &lo->tp);
    case C_DP: return get_int(w, col, nm, s, 1, &lo->dp);
    case C_PP: return get_int(w, col, nm, s, 1, &lo->pp);
    case C_TIME_MS:
        if (get_pos(w, col, nm, s, &v))
            return -1;
        r->measured_s = v / 1e3;
        return 0;
    case C_TOK_S_GPU: return get_pos(w, col, nm, s, &r->tok_s_gpu);
    case C_KV_HEADS: return get_int(w, col, nm, s, 1, &m->g);
    case C_HEAD_DIM: return get_int(w, col, nm, s, 1, &m->d_head);
    case C_FFN: return get_int(w, col, nm, s, 1, &m->f);
    case C_VOCAB: return get_int(w, col, nm, s, 1, &m->vocab);
    case C_MLP: return spec_parse_mlp(s, &m->mlp) ? bad(w, col, nm, "gelu or swiglu", s) : 0;
    case C_NORM: return spec_parse_norm(s, &m->norm) ? bad(w, col, nm, "layernorm or rmsnorm", s) : 0;
    case C_POS: return spec_parse_pos(s, &m->pos) ? bad(w, col, nm, "learned or rope", s) : 0;
    case C_BIAS: return get_bool(w, col, nm, s, &m->bias);
    case C_TIED: return get_bool(w, col, nm, s, &m->tied);
    case C_DROPOUT: return get_bool(w, col, nm, s, &m->dropout);
    case C_SP: *sp_given = true; return get_bool(w, col, nm, s, &lo->sp);
    case C_FLASH: return get_bool(w, col, nm, s, &lo->flash);
    case C_GRAD_FP32: return get_bool(w, col, nm, s, &lo->grad_fp32);
    case C_RECOMPUTE:
        return spec_parse_recompute(s, &r->recompute) ? bad(w, col, nm, "none, selective or full", s) : 0;
    case C_ZERO:
        if (!strcasecmp(s, "distopt") || !strcasecmp(s, "dist-opt")) {
            lo->opt = OPT_DISTOPT;
            return 0;
        }
        if (!strcmp(s, "0") || !strcmp(s, "1") || !strcmp(s, "2") || !strcmp(s, "3")) {
            lo->opt = (OptimShard)(OPT_ZERO0 + (s[0] - '0'));
            return 0;
        }
        return bad(w, col, nm, "0, 1, 2, 3 or distopt", s);
    case C_PRECISION:
        return hw_parse_precision(s, &lo->prec) ? bad(w, col, nm, "fp32, bf16, fp16 or fp8", s) : 0;
    case C_VP: return get_int(w, col, nm, s, 1, &lo->vp);
    case C_CP: return get_int(w, col, nm, s, 1, &lo->cp);
    case C_GPN: return get_int(w, col, nm, s, 1, &r->gpus_per_node);
    case C_INTRA_BW:
    case C_INTER_BW:
        if (get_pos(w, col, nm, s, &v))
            return -1;
        *(c == C_INTRA_BW ? &r->intra_bw : &r->inter_bw) = v * 1e9;
        return 0;
    case C_DP_OVERLAP:
    case C_TP_OVERLAP:
        if (parse_double(s, &v) || v < 0 || v > 1)
            return bad(w, col, nm, "a fraction in [0, 1]", s);
        *(c == C_DP_OVERLAP ? &r->dp_overlap : &r->tp_overlap) = v;
        return 0;
    case C_LABEL: snprintf(r->label, sizeof r->label, "%s", s); return 0;
    case C_COUNT: break;
    }
    return 0;
}

static int find_col(const char *name, RunsFormat fmt)
{
    for (int c = 0; c < C_COUNT; c++) {
        const char *want = fmt == RUNS_FMT_VTRAIN ? cols[c].vtrain : cols[c].name;
        if (want && !strcasecmp(want, name))
            return c;
    }
    return -1;
}

static int read_header(char *line, const Where *w, RunsFormat *fmt, int *map, int *nf)
{
    char *f[MAX_FIELDS];
    int n = split(line, f, MAX_FIELDS);
    if (n < 0) {
        snprintf(w->err, w->errlen, "%s:%d: header has more than %d columns", w->origin, w->line, MAX_FIELDS);
        return -1;
    }
    *fmt = RUNS_FMT_ULTRAPLAN;
    for (int i = 0; i < n; i++)
        if (!strcasecmp(f[i], cols[C_TIME_MS].vtrain))
            *fmt = RUNS_FMT_VTRAIN;
    bool seen[C_COUNT] = {false};
    for (int i = 0; i < n; i++) {
        int c = find_col(f[i], *fmt);
        if (c < 0) {
            snprintf(w->err, w->errlen, "%s:%d: column %d: unknown column name \"%.40s\" (%s format; see "
                     "`ultraplan validate --help`)", w->origin, w->line, i + 1, f[i],
                     *fmt == RUNS_FMT_VTRAIN ? "vTrain" : "ultraplan");
            return -1;
        }
        if (seen[c]) {
            snprintf(w->err, w->errlen, "%s:%d: column %d: \"%.40s\" appears twice", w->origin, w->line, i + 1, f[i]);
            return -1;
        }
        seen[c] = true;
        map[i] = c;
    }
    /* the ultraplan format measures a run by its step time or by the tokens
     * per second per GPU that published tables print; exactly one of them */
    if (*fmt == RUNS_FMT_ULTRAPLAN && seen[C_TIME_MS] && seen[C_TOK_S_GPU]) {
        snprintf(w->err, w->errlen, "%s:%d: header has both \"time_ms\" and \"tokens_per_s_gpu\": give one "
                 "measurement per run", w->origin, w->line);
        return -1;
    }
    if (*fmt == RUNS_FMT_ULTRAPLAN && seen[C_TOK_S_GPU])
        seen[C_TIME_MS] = true;
    for (int c = 0; c < C_COUNT; c++) {
        bool need = *fmt == RUNS_FMT_VTRAIN ? (cols[c].vtrain && c != C_PARAMS_B) : cols[c].required;
        if (need && !seen[c]) {
            const char *nm = *fmt == RUNS_FMT_VTRAIN ? cols[c].vtrain : cols[c].name;
            if (*fmt == RUNS_FMT_ULTRAPLAN && !seen[C_TIME_MS])
                snprintf(w->err, w->errlen, "%s:%d: header names neither the vTrain columns (\"iteration time "
                         "(ms)\", ...) nor the ultraplan ones (\"time_ms\" or \"tokens_per_s_gpu\", ...)",
                         w->origin, w->line);
            else
                snprintf(w->err, w->errlen, "%s:%d: header lacks the required column \"%s\"", w->origin, w->line, nm);
            return -1;
        }
    }
    *nf = n;
    return 0;
}

static int push(RunSet *set, const RunRow *r)
{
    if (set->n == set->cap) {
        int cap = set->cap ? set->cap * 2 : 256;
        RunRow *g = realloc(set->rows, (size_t)cap * sizeof *g);
        if (!g)
            return -1;
        set->rows = g;
        set->cap = cap;
    }
    set->rows[set->n++] = *r;
    return 0;
}

static int read_row(char *line, const Where *w, RunsFormat fmt, const int *map, int nf, RunRow *r)
{
    char *f[MAX_FIELDS];
    int n = split(line, f, MAX_FIELDS);
    if (n != nf) {
        snprintf(w->err, w->errlen, "%s:%d: expected %d columns as in the header, got %d", w->origin, w->line,
                 nf, n < 0 ? MAX_FIELDS : n);
        return -1;
    }
    row_defaults(r, fmt);
    r->line = w->line;
    bool sp_given = false;
    for (int i = 0; i < n; i++)
        if (set_field(w, r, (Col)map[i], i, f[i], &sp_given))
            return -1;
    /* in 64 bits: each factor alone may be a valid int, their product not */
    long long g = (long long)r->layout.dp * r->layout.tp * r->layout.pp * r->layout.cp;
    if (g > 100000000LL) {
        snprintf(w->err, w->errlen, "%s:%d: dp·tp·pp·cp = %d·%d·%d·%d = %lld GPUs, beyond any cluster (1e8)",
                 w->origin, w->line, r->layout.dp, r->layout.tp, r->layout.pp, r->layout.cp, g);
        return -1;
    }
    if (r->gpus && r->gpus != g) {
        snprintf(w->err, w->errlen, "%s:%d: GPUs %d differ from dp·tp·pp·cp = %d·%d·%d·%d = %lld", w->origin,
                 w->line, r->gpus, r->layout.dp, r->layout.tp, r->layout.pp, r->layout.cp, g);
        return -1;
    }
    r->gpus = (int)g;
    if (r->tok_s_gpu > 0)   /* one step = gbs sequences of seq tokens over all GPUs */
        r->measured_s = (double)r->layout.gbs * r->model.s / (r->tok_s_gpu * g);
    char e2[200];
    if (spec_validate(&r->model, e2, sizeof e2)) {
        snprintf(w->err, w->errlen, "%s:%d: %s", w->origin, w->line, e2);
        return -1;
    }
    if (r->layout.tp > 1 && !sp_given && fmt == RUNS_FMT_ULTRAPLAN)
        r->layout.sp = true;
    if (layout_check(&r->layout, &r->model, NULL, e2, sizeof e2)) {
        snprintf(w->err, w->errlen, "%s:%d: %s", w->origin, w->line, e2);
        return -1;
    }
    layout_set_recompute(&r->layout, r->recompute);
    return 0;
}

int runs_parse_csv(const char *text, const char *origin, RunSet *set, char *err, int errlen)
{
    char *buf = strdup(text ? text : "");
    if (!buf) {
        snprintf(err, errlen, "%s: out of memory", origin);
        return -1;
    }
    Where w = {origin, 0, err, errlen};
    int map[MAX_FIELDS], nf = 0, have_header = 0, rc = 0, n0 = set->n;
    RunsFormat fmt = RUNS_FMT_ULTRAPLAN;
    char *start = buf;
    if (!strncmp(start, "\xEF\xBB\xBF", 3))   /* a UTF-8 byte-order mark (spreadsheet exports) */
        start += 3;
    for (char *p = start; p && rc == 0;) {
        char *nl = strchr(p, '\n');
        if (nl)
            *nl = '\0';
        w.line++;
        size_t len = strlen(p);
        if (len && p[len - 1] == '\r')
            p[len - 1] = '\0';
        const char *q = p;
        while (isspace((unsigned char)*q))
            q++;
        if (*q == '\0') {
            /* blank */
        } else if (!have_header) {
            rc = read_header(p, &w, &fmt, map, &nf);
            have_header = 1;
        } else if (*q != '#') {
            RunRow r;
            rc = read_row(p, &w, fmt, map, nf, &r);
            if (rc == 0 && push(set, &r)) {
                snprintf(err, errlen, "%s: out of memory", origin);
                rc = -1;
            }
        }
        p = nl ? nl + 1 : NULL;
    }
    free(buf);
    if (rc == 0 && !have_header) {
        snprintf(err, errlen, "%s: empty file (expected a header row and measured runs)", origin);
        rc = -1;
    } else if (rc == 0 && set->n == n0) {
        snprintf(err, errlen, "%s: no measured runs after the header", origin);
        rc = -1;
    }
    if (rc)
        set->n = n0;
    else
        set->format = fmt;
    return rc;
}

int runs_read_csv(const char *path, RunSet *set, char *err, int errlen)
{
    size_t n;
    char *buf = util_slurp(path, 0, &n, err, errlen);
    if (!buf)
        return -1;
    if (memchr(buf, '\0', n)) {
        snprintf(err, errlen, "%s: not a text CSV file (contains NUL bytes)", path);
        free(buf);
        return -1;
    }
    snprintf(set->path, sizeof set->path, "%s", path);
    int rc = runs_parse_csv(buf, path, set, err, errlen);
    free(buf);
    return rc;
}

void runs_free(RunSet *set)
{
    if (!set)
        return;
    free(set->rows);
    memset(set, 0, sizeof *set);
}

/* ---- prediction ------------------------------------------------------------- */

void runs_row_hw(const RunRow *r, const HwProfile *base, HwProfile *out)
{
    *out = *base;
    if (r->gpus_per_node > 0)
        out->gpus_per_node = r->gpus_per_node;
    if (r->intra_bw > 0)
        out->intra.bw = r->intra_bw;
    if (r->inter_bw > 0)
        out->inter.bw = r->inter_bw;
    if (r->dp_overlap >= 0)
        out->dp_overlap = r->dp_overlap;
    if (r->tp_overlap >= 0)
        out->tp_overlap = r->tp_overlap;
}

int runs_predict(const RunRow *r, const HwProfile *hw, const char *origin, double *pred_s, Cost *c,
                char *err, int errlen)
{
    HwProfile h;
    runs_row_hw(r, hw, &h);
    if (h.peak[r->layout.prec] <= 0) {
        snprintf(err, errlen, "%s:%d: profile %s has no %s peak", origin, r->line, h.name,
                 hw_precision_name(r->layout.prec));
        return -1;
    }
    Cost local;
    Cost *out = c ? c : &local;
    CostOpts o;
    cost_opts_default(&o);
    cost(&r->model, &h, &r->layout, &o, out);
    *pred_s = out->step_s;
    return 0;
}
