/* runs.c — measured runs from CSV and the prediction of one run (see runs.h). */
#include "runs.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "fileio.h"
#include "knobs.h"
#include "stacks.h"
#include "parse.h"
#include "scenario.h"
/* ---- columns -------------------------------------------------------------- */

/* A column is either a knob of the knob table (scenario/knobs.h: its `csv`
 * name; parsed and range-checked by the table) or one of the columns below,
 * which describe the measurement and the cluster rather than the layout. */
typedef enum {
    C_PARAMS_B, C_GPUS, C_TIME_MS, C_GPN, C_INTRA_BW, C_INTER_BW, C_DP_OVERLAP, C_TP_OVERLAP, C_TOK_S_GPU,
    C_LABEL, C_MEM_GIB, C_COUNT
} Col;

typedef struct {
    const char *name;     // ultraplan name
    const char *vtrain;   // vTrain header text, or NULL
    bool required;        // in the ultraplan format (vTrain requires its own eleven)
} ColDesc;

static const ColDesc cols[] = {
    [C_PARAMS_B] = {"params_b", "Parameters (billion)", false},
    [C_GPUS] = {"gpus", "# GPUs", false},
    [C_TIME_MS] = {"time_ms", "iteration time (ms)", true},   // or tokens_per_s_gpu
    [C_GPN] = {"gpus_per_node", NULL, false},
    [C_INTRA_BW] = {"intra_bw_gbs", NULL, false},
    [C_INTER_BW] = {"inter_bw_gbs", NULL, false},
    [C_DP_OVERLAP] = {"dp_overlap", NULL, false},
    [C_TP_OVERLAP] = {"tp_overlap", NULL, false},
    [C_TOK_S_GPU] = {"tokens_per_s_gpu", NULL, false},
    [C_LABEL] = {"label", NULL, false},
    [C_MEM_GIB] = {"mem_gib", NULL, false},
};
_Static_assert(sizeof cols / sizeof cols[0] == C_COUNT, "one descriptor per column");

/* Knob columns every row of the ultraplan format gives. */
static const KnobSet required_knobs = KNOB_BIT(K_GBS) | KNOB_BIT(K_MBS) | KNOB_BIT(K_HIDDEN) | KNOB_BIT(K_HEADS) |
                                      KNOB_BIT(K_LAYERS) | KNOB_BIT(K_SEQ) | KNOB_BIT(K_TP) | KNOB_BIT(K_DP) |
                                      KNOB_BIT(K_PP);

/* vTrain's header names for knob columns (all of them required there). */
static const struct { const char *vtrain; KnobId knob; } vtrain_knobs[] = {
    {"global batch", K_GBS},           {"micro batch", K_MBS},          {"hidden size", K_HIDDEN},
    {"attention heads", K_HEADS},      {"# layers", K_LAYERS},          {"sequence length", K_SEQ},
    {"tensor parallelism", K_TP},      {"data parallelism", K_DP},      {"pipeline parallelism", K_PP},
};
#define N_VTRAIN_KNOBS ((int)(sizeof vtrain_knobs / sizeof *vtrain_knobs))

/* map[] entries: an own column c, or COL_KNOB + KnobId */
#define COL_KNOB 1000

/* columns a corpus CSV may have: its own (label, gpus, measured figures) and every knob of the table */
#define MAX_FIELDS 192
_Static_assert(MAX_FIELDS >= KNOB_COUNT + 16, "a CSV may carry every knob as a column");

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

/* Plain decimals ("517", "123.456"), most fields of a million rows, without
 * strtod: up to 15 significant digits are an exact double, and one division
 * by an exact power of ten rounds as strtod does. Anything else: strtod. */
static bool parse_plain(const char *s, double *out)
{
    static const double p10[] = {1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13,
                                 1e14, 1e15};
    uint64_t v = 0;
    int nd = 0, frac = -1;
    for (const char *p = s;; p++) {
        if (*p >= '0' && *p <= '9') {
            if (++nd > 15)
                return false;
            v = v * 10 + (uint64_t)(*p - '0');
            frac += frac >= 0;
        } else if (*p == '.' && frac < 0) {
            frac = 0;
        } else if (*p == '\0') {
            break;
        } else {
            return false;
        }
    }
    if (nd == 0)
        return false;
    *out = frac > 0 ? (double)v / p10[frac] : (double)v;
    return true;
}

static int parse_double(const char *s, double *out)
{
    if (parse_plain(s, out))
        return 0;
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

/* 1 to 9 decimal digits and nothing else: their value in *v (what
 * util_parse_int gives them, without its strtod: most fields of a million rows) */
static bool plain_int(const char *s, int *v)
{
    int n = 0, x = 0;
    for (; s[n] >= '0' && s[n] <= '9'; n++)
        if (n < 9)
            x = x * 10 + (s[n] - '0');
    if (n == 0 || n > 9 || s[n])
        return false;
    *v = x;
    return true;
}

/* A knob column into the row, through the knob table. */
static int set_knob(const Where *w, RunRow *r, const Knob *k, int col, const char *s)
{
    int v;
    if (k->type == KNOB_DOUBLE) {   /* capacity_factor, moe_imbalance */
        char who[160];
        double d;
        snprintf(who, sizeof who, "%s:%d: column %d (\"%s\")", w->origin, w->line, col + 1, k->csv);
        if (knob_parse_double(k, s, &d, who, w->err, w->errlen) != 0)
            return -1;
        knob_set_double(k, k->group == KNOB_MODEL ? (void *)&r->model : (void *)&r->layout, d);
        return 0;
    }
    if (k->type == KNOB_STR) {   /* pp_layout: "" = none */
        char who[160];
        snprintf(who, sizeof who, "%s:%d: column %d (\"%s\")", w->origin, w->line, col + 1, k->csv);
        return knob_set_str(k, k->group == KNOB_MODEL ? (void *)&r->model : (void *)&r->layout, s, who, w->err,
                            w->errlen);
    }
    if (k->type == KNOB_BOOL && (!strcasecmp(s, "yes") || !strcasecmp(s, "no"))) {
        v = !strcasecmp(s, "yes");
    } else if (k->type == KNOB_INT && (plain_int(s, &v) || util_parse_int(s, &v) == 0) && v >= k->min &&
               v <= k->max) {
        /* what knob_parse accepts of an integer, without formatting a name
         * for a message there is none of: most columns of a million rows */
    } else {
        char who[160];
        snprintf(who, sizeof who, "%s:%d: column %d (\"%s\")", w->origin, w->line, col + 1, k->csv);
        if (knob_parse(k, s, &v, who, w->err, w->errlen) != 0)
            return -1;
    }
    if (k->type == KNOB_INT && v > 1000000000)
        return bad(w, col, k->csv, "a whole number up to 1e9", s);
    if (k->group == KNOB_MODEL) {
        knob_set_int(k, &r->model, v);
    } else if (k->group == KNOB_LAYOUT) {
        knob_set_int(k, &r->layout, v);
        if (k->id == K_STACK)
            r->stack_given = true;
        if (k->id == K_CP_COMM)
            r->cp_comm_given = true;
    } else {   /* the scenario's knobs: the uniform recomputation */
        Scenario sc = {.recompute = r->recompute};
        knob_set_int(k, &sc, v);
        r->recompute = sc.recompute;
    }
    return 0;
}

/* One of the own columns into the row. */
static int set_field(const Where *w, RunRow *r, Col c, int col, const char *s)
{
    const char *nm = cols[c].name;
    double v;
    switch (c) {
    case C_PARAMS_B: return get_pos(w, col, nm, s, &r->params_b);
    case C_GPUS: return get_int(w, col, nm, s, 1, &r->gpus);
    case C_TIME_MS:
        if (get_pos(w, col, nm, s, &v))
            return -1;
        r->measured_s = v / 1e3;
        return 0;
    case C_TOK_S_GPU: return get_pos(w, col, nm, s, &r->tok_s_gpu);
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
        /* a row that states how much TP communication it hid ran with --tp-comm-overlap */
        if (c == C_TP_OVERLAP && v > 0)
            r->layout.tp_comm_overlap = true;
        return 0;
    case C_LABEL: snprintf(r->label, sizeof r->label, "%s", s); return 0;
    case C_MEM_GIB:   /* empty: this row's memory was not published */
        if (!*s) {
            r->mem_gib = 0;
            return 0;
        }
        if (parse_double(s, &v) || !(v > 0 && v <= 1e5))
            return bad(w, col, nm, "a measured peak in GiB per GPU (0 to 1e5), or nothing", s);
        r->mem_gib = v;
        return 0;
    case C_COUNT: break;
    }
    return 0;
}

/* An own column c, COL_KNOB + a knob's id, or -1. */
const char *runs_default_gpu(const char *path)
{
    FILE *f = fopen(path, "rb");
    char line[4096] = "";
    if (f) {
        /* the first line that is not blank: the header */
        while (fgets(line, sizeof line, f) && strspn(line, " \t\r\n") == strlen(line))
            line[0] = 0;
        fclose(f);
    }
    /* vTrain's header is the only one with its time column's name (lower case) */
    for (char *p = line; *p; p++)
        *p = (char)tolower((unsigned char)*p);
    return strstr(line, cols[C_TIME_MS].vtrain) ? "a100-80g" : "h100-sxm";
}

static int find_col(const char *name, RunsFormat fmt)
{
    for (int c = 0; c < C_COUNT; c++) {
        const char *want = fmt == RUNS_FMT_VTRAIN ? cols[c].vtrain : cols[c].name;
        if (want && !strcasecmp(want, name))
            return c;
    }
    if (fmt == RUNS_FMT_VTRAIN) {
        for (int i = 0; i < N_VTRAIN_KNOBS; i++)
            if (!strcasecmp(vtrain_knobs[i].vtrain, name))
                return COL_KNOB + vtrain_knobs[i].knob;
        return -1;
    }
    const Knob *k = knob_by_csv(name);
    return k ? COL_KNOB + (int)k->id : -1;
}

static const char *col_name(int c, RunsFormat fmt)
{
    if (c >= COL_KNOB) {
        for (int i = 0; fmt == RUNS_FMT_VTRAIN && i < N_VTRAIN_KNOBS; i++)
            if (COL_KNOB + (int)vtrain_knobs[i].knob == c)
                return vtrain_knobs[i].vtrain;
        return knob_get((KnobId)(c - COL_KNOB))->csv;
    }
    return fmt == RUNS_FMT_VTRAIN ? cols[c].vtrain : cols[c].name;
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
    KnobSet seen_knobs = 0;
    for (int i = 0; i < n; i++) {
        int c = find_col(f[i], *fmt);
        if (c < 0) {
            snprintf(w->err, w->errlen, "%s:%d: column %d: unknown column name \"%.40s\" (%s format; see "
                     "`ultraplan validate --help`)", w->origin, w->line, i + 1, f[i],
                     *fmt == RUNS_FMT_VTRAIN ? "vTrain" : "ultraplan");
            return -1;
        }
        bool *was = NULL, dummy = (c >= COL_KNOB && (seen_knobs & KNOB_BIT(c - COL_KNOB)));
        if (c < COL_KNOB)
            was = &seen[c];
        if (was ? *was : dummy) {
            snprintf(w->err, w->errlen, "%s:%d: column %d: \"%.40s\" appears twice", w->origin, w->line, i + 1, f[i]);
            return -1;
        }
        if (was)
            *was = true;
        else
            seen_knobs |= KNOB_BIT(c - COL_KNOB);
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
    KnobSet need_knobs = required_knobs;
    if (*fmt == RUNS_FMT_VTRAIN)
        for (int i = 0; i < N_VTRAIN_KNOBS; i++)
            need_knobs |= KNOB_BIT(vtrain_knobs[i].knob);
    for (int c = 0; c < C_COUNT + KNOB_COUNT; c++) {
        bool need, got;
        if (c < C_COUNT) {
            need = *fmt == RUNS_FMT_VTRAIN ? (cols[c].vtrain && c != C_PARAMS_B) : cols[c].required;
            got = seen[c];
        } else {
            need = (need_knobs & KNOB_BIT(c - C_COUNT)) != 0;
            got = (seen_knobs & KNOB_BIT(c - C_COUNT)) != 0;
        }
        if (need && !got) {
            const char *nm = col_name(c < C_COUNT ? c : COL_KNOB + (c - C_COUNT), *fmt);
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
    for (int i = 0; i < n; i++) {
        int bad_field = map[i] >= COL_KNOB ? set_knob(w, r, knob_get((KnobId)(map[i] - COL_KNOB)), i, f[i])
                                           : set_field(w, r, (Col)map[i], i, f[i]);
        if (bad_field)
            return -1;
        sp_given |= map[i] == COL_KNOB + K_SP;
    }
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

/* Rows of buf (parsed in place) to `each`, or appended to set when each is NULL. */
static int parse_rows(char *buf, const char *origin, RunSet *set, RunsEachFn each, void *ctx, char *err, int errlen)
{
    Where w = {origin, 0, err, errlen};
    int map[MAX_FIELDS], nf = 0, have_header = 0, rc = 0, n0 = set ? set->n : 0, nrows = 0;
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
            if (rc == 0 && each) {
                rc = each(&r, fmt, ctx, err, errlen);
            } else if (rc == 0 && push(set, &r)) {
                snprintf(err, errlen, "%s: out of memory", origin);
                rc = -1;
            }
            nrows += rc == 0;
        }
        p = nl ? nl + 1 : NULL;
    }
    if (rc == 0 && !have_header) {
        snprintf(err, errlen, "%s: empty file (expected a header row and measured runs)", origin);
        rc = -1;
    } else if (rc == 0 && nrows == 0) {
        snprintf(err, errlen, "%s: no measured runs after the header", origin);
        rc = -1;
    }
    if (set && rc)
        set->n = n0;
    else if (set)
        set->format = fmt;
    return rc;
}

int runs_parse_csv(const char *text, const char *origin, RunSet *set, char *err, int errlen)
{
    char *buf = strdup(text ? text : "");
    if (!buf) {
        snprintf(err, errlen, "%s: out of memory", origin);
        return -1;
    }
    int rc = parse_rows(buf, origin, set, NULL, NULL, err, errlen);
    free(buf);
    return rc;
}

/* The most a CSV of measured runs may hold: 5M rows of the ultraplan format
 * at ~100 bytes each; /dev/zero or a wrong file is refused there, not at the
 * machine's memory. */
#define RUNS_MAX_BYTES ((size_t)512 << 20)

/* The file's text, NUL-free, in *out (caller frees). */
static int read_text(const char *path, char **out, char *err, int errlen)
{
    size_t n;
    char *buf = util_slurp(path, RUNS_MAX_BYTES, &n, err, errlen);
    if (!buf)
        return -1;
    if (memchr(buf, '\0', n)) {
        snprintf(err, errlen, "%s: not a text CSV file (contains NUL bytes)", path);
        free(buf);
        return -1;
    }
    *out = buf;
    return 0;
}

int runs_each_csv(const char *path, RunsEachFn each, void *ctx, char *err, int errlen)
{
    char *buf;
    if (read_text(path, &buf, err, errlen))
        return -1;
    int rc = parse_rows(buf, path, NULL, each, ctx, err, errlen);
    free(buf);
    return rc;
}

int runs_read_csv(const char *path, RunSet *set, char *err, int errlen)
{
    char *buf;
    if (read_text(path, &buf, err, errlen))
        return -1;
    snprintf(set->path, sizeof set->path, "%s", path);
    int rc = parse_rows(buf, path, set, NULL, NULL, err, errlen);   /* in place: no second copy */
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
    /* the row's software stack, then what the row itself says of the overlap */
    if (r->layout.stack > 0) {
        char e[256];
        if (stacks_apply(out, r->layout.stack, e, sizeof e) != 0)
            out->name[0] = 0;   /* only a build without its stacks/NAME.json fails here; test_stacks loads each */
    }
    if (r->dp_overlap >= 0)
        out->dp_overlap = r->dp_overlap;
    if (r->tp_overlap >= 0)
        out->tp_overlap = r->tp_overlap;
}

int runs_predict(const RunRow *r, const HwProfile *hw, const char *origin, double *pred_s, Cost *c,
                char *err, int errlen)
{
    /* the profile itself when the row overrides nothing of it (a copy is 1.2 KB a row) */
    HwProfile h;
    const HwProfile *use = hw;
    if (r->gpus_per_node > 0 || r->intra_bw > 0 || r->inter_bw > 0 || r->dp_overlap >= 0 || r->tp_overlap >= 0 ||
        r->layout.stack > 0) {
        runs_row_hw(r, hw, &h);
        use = &h;
    }
    if (use->peak[r->layout.prec] <= 0) {
        snprintf(err, errlen, "%s:%d: profile %s has no %s peak", origin, r->line, use->name,
                 hw_precision_name(r->layout.prec));
        return -1;
    }
    /* the layout fields the row's stack decides (what selective recomputation
     * recomputes, the CP exchange it runs), as scenario_finish sets them for
     * predict; a cp_comm column the stack contradicts is an error, as
     * --cp-comm is there */
    const Layout *lo = &r->layout;
    Layout slo;
    if (r->layout.stack > 0) {
        slo = r->layout;
        stacks_layout_settings(&slo);
        if (r->cp_comm_given && slo.cp_comm != r->layout.cp_comm) {
            snprintf(err, errlen, "%s:%d: cp_comm %s, but the %s stack exchanges K/V by %s", origin, r->line,
                     layout_cp_comm_name(r->layout.cp_comm), stacks_name(r->layout.stack),
                     layout_cp_comm_name(slo.cp_comm));
            return -1;
        }
        lo = &slo;
    }
    char e2[300];
    if (layout_check_stack(lo, use, e2, sizeof e2) != 0) {   /* what only the row's stack allows */
        snprintf(err, errlen, "%s:%d: %s", origin, r->line, e2);
        return -1;
    }
    Cost local;
    Cost *out = c ? c : &local;
    CostOpts o;
    cost_opts_default(&o);
    cost(&r->model, use, lo, &o, out);
    *pred_s = out->step_s;
    return 0;
}
