/* cmd_validate.c — `ultraplan validate`: its arguments, and the prediction of
 * measured runs (calib/runs.h) with their errors (calib/stats.h) printed as a
 * table, JSON or a plot.
 *
 * Built for a million rows: each row is kept in compact form as it is read,
 * groups without their keys (StatsGroupStats), and the table, the group lines
 * and --json's rows and groups are written by hand into a buffer, numbers
 * through stats_fmt_fixed / stats_json_number, the same bytes printf and
 * cJSON_Print gave (cJSON prints only the small skeleton of the document).
 * It does not cap the output: a distinct model a row prints three group
 * lines a row, as it always has.
 *
 * --bands-out FILE writes the residual table of calib/band.h (one line per
 * predicted row: source file, profile, --bands-stack, parallel dimensions,
 * size, measured and predicted step); scripts/gen-bands.sh makes the shipped
 * profiles/bands.csv with it; --bands-coverage TABLE reports how often a
 * run's measured step lies inside the band made without its file (or itself). */
#include <getopt.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "band.h"
#include "command.h"
#include "fileio.h"
#include "plot.h"
#include "profile.h"
#include "knobs.h"
#include "runs.h"
#include "stacks.h"
#include "stats.h"

static void help(FILE *f)
{
    fprintf(f,
        "usage: ultraplan validate FILE.csv [FILE.csv ...] [--gpu NAME | --profile FILE] [--json]\n"
        "                          [--summary] [--plot FILE.png] [--max-mape PCT] [--max-regret PCT]\n"
        "                          [--max-mem-mape PCT]\n"
        "                          [--stack NAME] [--bands-out FILE [--bands-stack NAME]]\n"
        "       ultraplan validate --bands-coverage builtin|TABLE.csv [--json]\n\n"
        "Predicts the iteration time of every measured run in the files and reports predicted,\n"
        "measured and absolute percentage error (APE) per row, then mean (MAPE), median, 90th\n"
        "percentile and worst APE, overall and grouped by GPU count, model and parallel dimensions.\n"
        "Within each ranking group (below) it reports the Spearman rank correlation of predicted and\n"
        "measured times and the regret: the measured time of the layout predicted fastest over the\n"
        "measured fastest, minus one.\n\n"
        "  --gpu NAME        builtin profile (default h100-sxm, as every command; a100-80g for vTrain's\n"
        "                    CSVs, whose runs are A100s)\n"
        "  --profile FILE    a profile JSON (from `fit` or your own)\n"
        "  --json            rows, summary {mape, median_ape, p90_ape, max_ape} and groups[] as JSON\n"
        "  --summary         text: leave out the per-row table\n"
        "  --plot FILE.png   predicted vs measured on log axes with y = x and +-10%% bands (gnuplot)\n"
        "  --max-mape PCT    exit 1 when the overall MAPE is above PCT (for regression tests)\n"
        "  --max-regret PCT  exit 1 when any model+gpus group's regret is above PCT\n"
        "  --max-mem-mape PCT  exit 1 when the peak-memory MAPE (the rows with a mem_gib column) is\n"
        "                    above PCT, or no row has one\n"
        "  --moe-imbalance F MoE rows without a moe_imbalance column: the busiest EP rank's routed\n"
        "                    tokens over the mean (1 for force-balanced benchmarks; default 1.2)\n"
        "  --bands-out FILE  write the residual table predict's error band is made from (one line per\n"
        "                    run: source, profile, stack, parallel dims, size, measured and predicted\n"
        "                    step; scripts/gen-bands.sh makes profiles/bands.csv with it)\n"
        "  --bands-stack S   the software stack the files' runs used, for --bands-out (default: each\n"
        "                    row's stack, from its column or --stack)\n"
        "  --stack NAME      the software stack of rows in files without a stack column (vTrain's CSVs:\n"
        "                    megatron-deepspeed); `ultraplan models` lists the stacks. Default megatron-lm\n"
        "  --bands-coverage TABLE  no CSV of runs: the calibration of the error band on a residual table\n"
        "                    (builtin: the shipped profiles/bands.csv): for each run, whether its measured\n"
        "                    step lies inside the 80%% band made without its own file (and without itself\n"
        "                    only), per file and overall\n\n"
        "Ranking groups: model+gpus holds the runs of one model on one GPU count (every global\n"
        "batch, ranked by time per sequence); model+gpus+gbs also fixes the global batch.\n\n"
        "CSV formats (told apart by the header):\n"
        "  vTrain     the columns of validation/vtrain/*.csv in the source tree; the settings\n"
        "             vTrain's authors used apply to every row (GPT-2 decoder, vocab 50257, full\n"
        "             recompute, unfused attention, fp16, plain DP, 8 GPUs per node, 12.5 GB/s\n"
        "             inter-node per GPU)\n"
        "  ultraplan  named columns in any order; required: layers,hidden,heads,seq,tp,pp,dp,mbs,gbs,\n"
        "             and time_ms (ms per step) or tokens_per_s_gpu (the step is gbs*seq/(that*GPUs));\n"
        "             optional: gpus,params_b,kv_heads,head_dim,ffn,vocab,mlp,norm,pos,bias,\n"
        "             tied,dropout,sp,flash,recompute,zero,precision,grad_fp32,vp,cp,gpus_per_node,\n"
        "             intra_bw_gbs,inter_bw_gbs,dp_overlap,tp_overlap,stack,label; MoE: experts,topk,\n"
        "             moe_ffn,shared_ffn,moe_layer_freq,moe_first_dense,capacity_factor,mtp_layers,\n"
        "             attn,q_lora_rank,kv_lora_rank,qk_nope_dim,qk_rope_dim,v_head_dim,ep,etp,\n"
        "             moe_imbalance (defaults as\n"
        "             `ultraplan predict`; vocab 50257); mem_gib: the peak memory per GPU the source\n"
        "             measured (GiB; empty for a row without one): the table, summary and JSON then\n"
        "             give the predicted peak and its error too\n\n"
        "example: ultraplan validate validation/vtrain/multi_node.csv --gpu a100-80g --summary\n");
}

#define GIB 1073741824.0

typedef struct {
    const char *gpu;
    const char *profile;
    const char *plot;
    const char *bands_out, *bands_stack, *bands_coverage;
    bool json, summary;
    double max_mape, max_regret;   // < 0 = no limit
    double max_mem_mape;           // < 0 = no limit (the rows with a measured peak memory)
    double moe_imbalance;          // --moe-imbalance: for rows without the column; 0 = the layout's default
    int stack;                     // --stack: for files without a stack column; -1 = not given (megatron-lm)
} Opts;

/* What validate keeps of a row beside its StatsRow, predicted time and
 * error: what it prints (a RunRow is 3 KB; a million of these and the
 * arrays beside them stay near 250 MB). */
typedef struct {
    int line, mbs, vp;
    Precision prec;
    double phase[T_COUNT];         // predicted seconds by phase, for --json
    double mem_gib, mem_pred_gib;  // measured peak per GPU (0: none given) and predicted (every stage's max), GiB
    bool unfit;                    // predicted above the GPU's memory, though the run ran
    char label[sizeof ((RunRow *)0)->label];
} VRow;

typedef struct {
    StatsRow *st;                  // gpus, model, layout, measured seconds
    double *pred, *ape;            // predicted seconds, APE in percent
    VRow *rows;
    int n, cap;
    const HwProfile *hw;
    const char *origin;            // names the file in prediction errors (as before: the last one given)
    double moe_imbalance;          // Opts.moe_imbalance
    int stack;                     // Opts.stack
    char perr[512];                // the first prediction error (reported after every file is read)
    const char *bands_stack;       // --bands-out: the stack column
    char source[48];               // --bands-out: the base name of the file being read
    char *bands;                   // --bands-out: the table so far (NULL: not asked)
    size_t bands_len, bands_cap;
    bool bands_oom;
} VSet;

static void vset_free(VSet *v)
{
    free(v->st);
    free(v->pred);
    free(v->ape);
    free(v->rows);
    free(v->bands);
}

static int grow(void **p, int cap, size_t size)
{
    void *q = realloc(*p, (size_t)cap * size);
    if (!q)
        return -1;
    *p = q;
    return 0;
}

/* One row as the reader gives it: predicted, then kept in compact form. */
static int keep_row(const RunRow *r, RunsFormat fmt, void *ctx, char *err, int errlen)
{
    (void)fmt;
    VSet *v = ctx;
    if (v->n == v->cap) {
        int cap = v->cap ? v->cap * 2 : 256;
        if (grow((void **)&v->st, cap, sizeof *v->st) || grow((void **)&v->pred, cap, sizeof *v->pred) ||
            grow((void **)&v->ape, cap, sizeof *v->ape) || grow((void **)&v->rows, cap, sizeof *v->rows)) {
            snprintf(err, errlen, "out of memory");
            return -1;
        }
        v->cap = cap;
    }
    int i = v->n++;
    Cost c;
    char e[512];
    RunRow adj;
    if (v->moe_imbalance > 0 && r->layout.moe_imbalance == 0) {   /* --moe-imbalance for rows that do not say */
        adj = *r;
        adj.layout.moe_imbalance = v->moe_imbalance;
        r = &adj;
    }
    if (v->stack >= 0 && !r->stack_given) {   /* --stack for files that have no stack column */
        if (r != &adj)
            adj = *r;
        adj.layout.stack = v->stack;
        r = &adj;
    }
    if (runs_predict(r, v->hw, v->origin, &v->pred[i], &c, e, sizeof e)) {
        if (!v->perr[0])
            snprintf(v->perr, sizeof v->perr, "%s", e);
        v->pred[i] = 0;
        memset(c.time, 0, sizeof c.time);
    }
    stats_row(r, &v->st[i]);
    v->ape[i] = stats_ape(v->pred[i], r->measured_s);
    VRow *w = &v->rows[i];
    w->line = r->line;
    w->mbs = r->layout.mbs;
    w->vp = r->layout.vp;
    w->prec = r->layout.prec;
    memcpy(w->phase, c.time, sizeof w->phase);
    memcpy(w->label, r->label, sizeof w->label);
    w->mem_gib = r->mem_gib;
    w->mem_pred_gib = v->pred[i] > 0 ? c.peak_bytes / GIB : 0.0;
    w->unfit = v->pred[i] > 0 && !c.fits;
    if (v->bands && v->pred[i] > 0) {   /* a row the profile cannot predict has no residual */
        BandRun b = {.line = r->line, .gpus = r->gpus, .tp = r->layout.tp, .pp = r->layout.pp,
                     .dp = r->layout.dp, .cp = r->layout.cp, .ep = r->layout.ep > 0 ? r->layout.ep : 1,
                     .zero = band_zero_class(r->layout.opt), .moe = spec_is_moe(&r->model),
                     .params_b = (double)spec_params(&r->model, 1, PARAMS_EXACT) / 1e9, .seq = r->model.s,
                     .measured_s = r->measured_s, .predicted_s = v->pred[i]};
        snprintf(b.source, sizeof b.source, "%s", v->source);
        snprintf(b.gpu, sizeof b.gpu, "%s", v->hw->name);
        /* one notion of stack: --bands-stack, else the row's own (its column or --stack) */
        const char *stk = v->bands_stack ? v->bands_stack
                          : r->stack_given || v->stack >= 0 ? stacks_name(r->layout.stack) : "";
        snprintf(b.stack, sizeof b.stack, "%s", stk ? stk : "");
        v->bands_oom |= band_append_row(&v->bands, &v->bands_len, &v->bands_cap, &b) != 0;
    }
    return 0;
}

/* Predicted vs measured, log-log, y = x and ±10 % bands, through gnuplot. */
static int plot(const char *png, const VSet *set, const char *title, char *err, int errlen)
{
    Plot pl;
    if (plot_begin(&pl, png, err, errlen) != 0)
        return -1;
    double lo = 1e30, hi = 0;
    for (int i = 0; i < set->n; i++) {
        double m = set->st[i].measured_s * 1e3, p = set->pred[i] * 1e3;
        fprintf(pl.data, "%g %g %d\n", m, p, set->st[i].gpus);
        lo = m < lo ? m : lo;
        lo = p < lo ? p : lo;
        hi = m > hi ? m : hi;
        hi = p > hi ? p : hi;
    }
    FILE *g = plot_script(&pl, 900, 800, err, errlen);
    if (!g)
        return -1;
    fprintf(g, "set title ");
    plot_quote(g, title);   /* the title names user files: no substitution inside */
    double x0 = lo / 1.2, x1 = hi * 1.2;
    fprintf(g, " noenhanced\nset logscale xy\nset xrange [%g:%g]\nset yrange [%g:%g]\n", x0, x1, x0, x1);
    plot_log_tics(g, "xtics", x0, x1);
    plot_log_tics(g, "ytics", x0, x1);
    /* the colour bar: one labelled tick per GPU count the runs have (up to 8), else 1-2-5 */
    int counts[8], nc = 0, many = 0, gmin = 1 << 30, gmax = 0;
    for (int i = 0; i < set->n; i++) {
        int gp = set->st[i].gpus, seen = 0;
        gmin = gp < gmin ? gp : gmin;
        gmax = gp > gmax ? gp : gmax;
        for (int k = 0; k < nc; k++)
            seen |= counts[k] == gp;
        if (!seen && nc < 8)
            counts[nc++] = gp;
        else if (!seen)
            many = 1;
    }
    if (gmax <= gmin)
        gmax = gmin + 1;
    fprintf(g, "set logscale cb\nset cbrange [%g:%g]\n", gmin / 1.1, gmax * 1.1);
    if (many) {
        plot_log_tics(g, "cbtics", gmin, gmax);
    } else {
        fprintf(g, "set cbtics (");
        for (int k = 0; k < nc; k++)
            fprintf(g, "%s\"%d\" %d", k ? ", " : "", counts[k], counts[k]);
        fprintf(g, ")\n");
    }
    fprintf(g,
            "set xlabel 'measured iteration time (ms)'\nset ylabel 'predicted iteration time (ms)'\n"
            "set key inside top left Left reverse box opaque samplen 2 spacing 1.2\nset grid\n"
            "set palette defined (0 'blue', 1 'green', 2 'orange', 3 'red')\nset cblabel 'GPUs' offset 1.5,0\n"
            "plot x w l lc 'black' dt 1 t 'predicted = measured', 1.1*x w l lc 'gray' dt 2 t '+/-10 %%', "
            "0.9*x w l lc 'gray' dt 2 notitle, "
            "'%s' u 1:2:3 w p pt 7 ps 0.6 lc palette t 'a measured run (colour: its GPUs)'\n",
            pl.data_path);
    return plot_end(&pl, err, errlen);
}

/* ---- output --------------------------------------------------------------------
 * A million rows print 30 to 130 MB; stdio's formatting of their numbers and
 * cJSON's tree of them took most of validate's time. Lines are built here in
 * a buffer, numbers by stats_fmt_fixed / stats_json_number (the same bytes as
 * printf and cJSON_Print, pinned by test_validate), and written in blocks. */

typedef struct {
    char buf[1 << 16];
    size_t n;
    /* the last number's text: a one-row group prints its APE four times */
    uint64_t last_bits;
    int last_kind;                 // 0 none, 1 + prec for fixed, -1 JSON
    int last_len;
    char last[32];
} Out;

static void out_flush(Out *o)
{
    fwrite(o->buf, 1, o->n, stdout);
    o->n = 0;
}

static void out_mem(Out *o, const char *s, size_t n)
{
    if (o->n + n > sizeof o->buf) {
        out_flush(o);
        if (n > sizeof o->buf) {
            fwrite(s, 1, n, stdout);
            return;
        }
    }
    memcpy(o->buf + o->n, s, n);
    o->n += n;
}

static void out_s(Out *o, const char *s) { out_mem(o, s, strlen(s)); }

/* s right-aligned in width (printf "%*s"), or left-aligned when width < 0 ("%-*s") */
static void out_pad(Out *o, const char *s, int width)
{
    static const char sp[] = "                                                ";
    int n = (int)strlen(s), pad = (width < 0 ? -width : width) - n;
    if (width > 0)
        for (; pad > 0; pad -= (int)sizeof sp - 1)
            out_mem(o, sp, (size_t)(pad < (int)sizeof sp - 1 ? pad : (int)sizeof sp - 1));
    out_mem(o, s, (size_t)n);
    if (width < 0)
        for (; pad > 0; pad -= (int)sizeof sp - 1)
            out_mem(o, sp, (size_t)(pad < (int)sizeof sp - 1 ? pad : (int)sizeof sp - 1));
}

static void out_int(Out *o, int v, int width)   /* "%*d" / "%-*d" */
{
    char t[16], *q = t + sizeof t;
    unsigned u = v < 0 ? 0u - (unsigned)v : (unsigned)v;
    *--q = '\0';
    do
        *--q = (char)('0' + u % 10);
    while (u /= 10);
    if (v < 0)
        *--q = '-';
    out_pad(o, q, width);
}

static bool out_cached(Out *o, double v, int kind)
{
    uint64_t b;
    memcpy(&b, &v, sizeof b);
    if (o->last_kind == kind && o->last_bits == b)
        return true;
    o->last_bits = b;
    o->last_kind = 0;
    return false;
}

static void out_fixed(Out *o, double v, int prec, int width)   /* "%*.*f" */
{
    if (!out_cached(o, v, 1 + prec)) {
        char t[400];
        int n = stats_fmt_fixed(v, prec, t, sizeof t);
        if (n >= (int)sizeof o->last) {   /* a huge value: not kept */
            out_pad(o, t, width);
            return;
        }
        memcpy(o->last, t, (size_t)n + 1);
        o->last_len = n;
        o->last_kind = 1 + prec;
    }
    out_pad(o, o->last, width);
}

static void out_jnum(Out *o, double v)
{
    if (!out_cached(o, v, -1)) {
        o->last_len = stats_json_number(v, o->last);
        o->last_kind = -1;
    }
    out_mem(o, o->last, (size_t)o->last_len);
}

/* a JSON string as cJSON prints it: \" \\ \b \f \n \r \t, other bytes below
 * 32 as \u00XX, everything else (UTF-8 included) as it is */
static void out_jstr(Out *o, const char *s)
{
    out_mem(o, "\"", 1);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        const unsigned char *q = p;   /* a run that needs no escape: at once */
        while (*q >= 32 && *q != '"' && *q != '\\')
            q++;
        if (q > p) {
            out_mem(o, (const char *)p, (size_t)(q - p));
            p = q;
            if (!*p)
                break;
        }
        char e[8];
        switch (*p) {
        case '"': out_mem(o, "\\\"", 2); break;
        case '\\': out_mem(o, "\\\\", 2); break;
        case '\b': out_mem(o, "\\b", 2); break;
        case '\f': out_mem(o, "\\f", 2); break;
        case '\n': out_mem(o, "\\n", 2); break;
        case '\r': out_mem(o, "\\r", 2); break;
        case '\t': out_mem(o, "\\t", 2); break;
        default:
            if (*p < 32) {
                snprintf(e, sizeof e, "\\u%04x", *p);
                out_mem(o, e, 6);
            } else {
                out_mem(o, (const char *)p, 1);
            }
        }
    }
    out_mem(o, "\"", 1);
}

/* A member of an object whose members are `tabs` tabs in, as cJSON_Print
 * writes it: the tabs, "name":<tab>, and the value after (the caller's). */
static void out_member(Out *o, int tabs, const char *name)
{
    static const char t[] = "\t\t\t\t\t\t\t\t";
    out_mem(o, t, (size_t)tabs);
    out_mem(o, "\"", 1);
    out_s(o, name);
    out_mem(o, "\":\t", 3);
}

static void out_jnum_member(Out *o, int tabs, const char *name, double v, bool last)
{
    out_member(o, tabs, name);
    out_jnum(o, v);
    out_mem(o, last ? "\n" : ",\n", last ? 1 : 2);
}

static void out_jstr_member(Out *o, int tabs, const char *name, const char *v, bool last)
{
    out_member(o, tabs, name);
    out_jstr(o, v);
    out_mem(o, last ? "\n" : ",\n", last ? 1 : 2);
}

static void print_groups(Out *o, const VSet *v, const StatsGroupStats *g, int n, StatsGroupKind k)
{
    char head[200];
    snprintf(head, sizeof head, "\nby %s%s\n", stats_group_kind_name(k),
             k == STATS_BY_MODEL_GPUS       ? " (ranking groups: every global batch, ranked by time per sequence)"
             : k == STATS_BY_MODEL_GPUS_GBS ? " (ranking groups at a fixed global batch)"
                                          : "");
    out_s(o, head);
    snprintf(head, sizeof head, "  %-44s %5s %7s %7s %7s %7s %8s %7s\n", "group", "n", "mape%", "med%", "p90%",
             "max%", "spearman", "regret%");
    out_s(o, head);
    for (int i = 0; i < n; i++) {   /* "  %-44s %5d %7.2f %7.2f %7.2f %7.2f %8.3f %7.2f\n" */
        char key[sizeof ((StatsGroup *)0)->key];
        stats_row_key(&v->st[g[i].first], k, key, sizeof key);
        out_mem(o, "  ", 2);
        out_pad(o, key, -44);
        out_mem(o, " ", 1);
        out_int(o, g[i].st.n, 5);
        const double v[] = {g[i].st.mape, g[i].st.median, g[i].st.p90, g[i].st.max, g[i].spearman, g[i].regret};
        for (int c = 0; c < 6; c++) {
            out_mem(o, " ", 1);
            out_fixed(o, v[c], c == 4 ? 3 : 2, c == 4 ? 8 : 7);
        }
        out_mem(o, "\n", 1);
    }
}

/* The per-row table: "%-6d %5d %5d %3d %3d %4d %4d %5d %12.1f %12.1f %7.2f%s%s\n" */
static void print_table(Out *o, const VSet *v)
{
    bool labels = false, mem = false;
    for (int i = 0; i < v->n; i++) {
        labels |= v->rows[i].label[0] != 0;
        mem |= v->rows[i].mem_gib > 0;
    }
    char head[200];
    snprintf(head, sizeof head, "%-6s %5s %5s %3s %3s %4s %4s %5s %12s %12s %7s%s%s\n", "line", "gpus", "h", "tp",
             "pp", "dp", "mbs", "gbs", "measured_ms", "predicted_ms", "ape%",
             mem ? "  mem_gib pred_gib  mem_ape%" : "", labels ? "  label" : "");
    out_s(o, head);
    for (int i = 0; i < v->n; i++) {
        const StatsRow *s = &v->st[i];
        const VRow *r = &v->rows[i];
        const int iv[] = {r->line, s->gpus, s->h, s->tp, s->pp, s->dp, r->mbs, s->gbs};
        const int w[] = {-6, 5, 5, 3, 3, 4, 4, 5};
        for (int c = 0; c < 8; c++) {
            if (c)
                out_mem(o, " ", 1);
            out_int(o, iv[c], w[c]);
        }
        out_mem(o, " ", 1);
        out_fixed(o, s->measured_s * 1e3, 1, 12);
        out_mem(o, " ", 1);
        out_fixed(o, v->pred[i] * 1e3, 1, 12);
        out_mem(o, " ", 1);
        out_fixed(o, v->ape[i], 2, 7);
        if (mem && r->mem_gib > 0 && r->mem_pred_gib > 0) {
            out_mem(o, "  ", 2);
            out_fixed(o, r->mem_gib, 1, 7);
            out_mem(o, " ", 1);
            out_fixed(o, r->mem_pred_gib, 1, 8);
            out_mem(o, " ", 1);
            out_fixed(o, stats_ape(r->mem_pred_gib, r->mem_gib), 2, 9);
        } else if (mem) {
            out_s(o, "        -        -         -");
        }
        if (r->label[0]) {
            out_mem(o, "  ", 2);
            out_s(o, r->label);
        }
        out_mem(o, "\n", 1);
    }
    out_mem(o, "\n", 1);
}

/* One row of --json as cJSON_Print puts an element of the root's "rows"
 * array: members three tabs in, the closing brace two. */
static void row_json(Out *o, const VSet *v, int i)
{
    const StatsRow *s = &v->st[i];
    const VRow *r = &v->rows[i];
    out_mem(o, "{\n", 2);
    const struct { const char *name; int v; } iv[] = {
        {"line", r->line}, {"gpus", s->gpus}, {"layers", s->L}, {"hidden", s->h}, {"heads", s->a},
        {"seq", s->s},     {"tp", s->tp},     {"pp", s->pp},     {"dp", s->dp},    {"mbs", r->mbs},
        {"gbs", s->gbs},   {"cp", s->cp},     {"vp", r->vp},
    };
    for (size_t k = 0; k < sizeof iv / sizeof *iv; k++)
        out_jnum_member(o, 3, iv[k].name, iv[k].v, false);
    out_jstr_member(o, 3, "precision", hw_precision_name(r->prec), false);
    if (r->label[0])
        out_jstr_member(o, 3, "label", r->label, false);
    out_jnum_member(o, 3, "measured_ms", s->measured_s * 1e3, false);
    out_jnum_member(o, 3, "predicted_ms", v->pred[i] * 1e3, false);
    out_jnum_member(o, 3, "ape", v->ape[i], false);
    if (r->mem_pred_gib > 0) {
        out_jnum_member(o, 3, "predicted_mem_gib", r->mem_pred_gib, false);
        out_member(o, 3, "predicted_fits");
        out_s(o, r->unfit ? "false,\n" : "true,\n");
    }
    if (r->mem_gib > 0) {
        out_jnum_member(o, 3, "measured_mem_gib", r->mem_gib, false);
        if (r->mem_pred_gib > 0)
            out_jnum_member(o, 3, "mem_ape", stats_ape(r->mem_pred_gib, r->mem_gib), false);
    }
    out_member(o, 3, "phases_ms");
    out_mem(o, "{\n", 2);
    for (int k = 0; k < T_COUNT; k++)
        out_jnum_member(o, 4, cost_time_name((TimeKind)k), r->phase[k] * 1e3, k == T_COUNT - 1);
    out_s(o, "\t\t\t}\n\t\t}");
}

/* One group of --json: stats_json's members, then by, key, spearman, regret */
static void group_json(Out *o, const VSet *v, const StatsGroupStats *g, StatsGroupKind k)
{
    char key[sizeof ((StatsGroup *)0)->key];
    stats_row_key(&v->st[g->first], k, key, sizeof key);
    out_mem(o, "{\n", 2);
    out_jnum_member(o, 3, "n", g->st.n, false);
    out_jnum_member(o, 3, "mape", g->st.mape, false);
    out_jnum_member(o, 3, "median_ape", g->st.median, false);
    out_jnum_member(o, 3, "p90_ape", g->st.p90, false);
    out_jnum_member(o, 3, "max_ape", g->st.max, false);
    out_jstr_member(o, 3, "by", stats_group_kind_name(k), false);
    out_jstr_member(o, 3, "key", key, false);
    out_jnum_member(o, 3, "spearman", g->spearman, false);
    out_jnum_member(o, 3, "regret", g->regret, true);
    out_mem(o, "\t\t}", 3);
}

/* The document as cJSON_Print would print it, rows and groups streamed into
 * the places of the two empty arrays. */
static int print_json(const Opts *o, const VSet *v, const char *profile, char **files, int nfiles,
                      const ApeStats *st, const ApeStats *mst, double worst_regret, double worst_regret_gbs,
                      StatsGroupStats *const *groups, const int *ng)
{
    (void)o;
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "format", "ultraplan.validate/1");
    cJSON_AddStringToObject(root, "profile", profile);
    cJSON *fa = cJSON_AddArrayToObject(root, "files");
    for (int i = 0; i < nfiles; i++)
        cJSON_AddItemToArray(fa, cJSON_CreateString(files[i]));
    cJSON_AddArrayToObject(root, "rows");
    cJSON *s = stats_json(st);
    cJSON_AddNumberToObject(s, "worst_group_regret", worst_regret);
    cJSON_AddNumberToObject(s, "worst_group_regret_fixed_batch", worst_regret_gbs);
    int unfit = 0;   /* runs predicted above the GPU's memory, though they ran */
    for (int i = 0; i < v->n; i++)
        unfit += v->rows[i].unfit;
    cJSON_AddNumberToObject(s, "runs_predicted_unfit", unfit);
    if (mst->n > 0) {   /* the rows that give a measured peak memory (mem_gib) */
        cJSON *ms = stats_json(mst);
        cJSON_AddItemToObject(s, "memory", ms);
    }
    cJSON_AddItemToObject(root, "summary", s);
    cJSON_AddArrayToObject(root, "groups");
    char *text = cJSON_Print(root);
    cJSON_Delete(root);
    /* a member name in the text is a quote that no string value has unescaped */
    static const char rows_at[] = "\"rows\":\t[", groups_at[] = "\"groups\":\t[";
    char *pr = text ? strstr(text, rows_at) : NULL, *pg = pr ? strstr(pr, groups_at) : NULL;
    if (!pr || !pg)
        goto oom;
    pr += sizeof rows_at - 1;
    pg += sizeof groups_at - 1;
    static Out out;   /* 64 KB: not on the stack */
    out.n = 0;
    out.last_kind = 0;
    out_mem(&out, text, (size_t)(pr - text));
    for (int i = 0; i < v->n; i++) {
        if (i)
            out_mem(&out, ", ", 2);
        row_json(&out, v, i);
    }
    out_mem(&out, pr, (size_t)(pg - pr));
    bool first = true;
    for (int k = 0; k < STATS_GROUP_COUNT; k++)
        for (int i = 0; i < ng[k]; i++, first = false) {
            if (!first)
                out_mem(&out, ", ", 2);
            group_json(&out, v, &groups[k][i], (StatsGroupKind)k);
        }
    out_s(&out, pg);
    out_mem(&out, "\n", 1);
    out_flush(&out);
    free(text);
    return 0;
oom:
    free(text);
    fprintf(stderr, "ultraplan validate: out of memory\n");
    return -1;
}

/* APE of the predicted peak memory per GPU over the rows that give a
 * measured one (column mem_gib); n 0 when none does. */
static int mem_stats(const VSet *v, ApeStats *st)
{
    double *ape = malloc(sizeof *ape * (v->n > 0 ? v->n : 1));
    if (!ape)
        return -1;
    int n = 0;
    for (int i = 0; i < v->n; i++)
        if (v->rows[i].mem_gib > 0 && v->rows[i].mem_pred_gib > 0)
            ape[n++] = stats_ape(v->rows[i].mem_pred_gib, v->rows[i].mem_gib);
    stats_summarize(ape, n, st);
    free(ape);
    return 0;
}

static int run(const Opts *o, char **files, int nfiles)
{
    char err[512];
    HwProfile hw;
    int rc = o->profile ? profile_load_file(o->profile, &hw, err, sizeof err)
                        : profile_load_builtin(o->gpu ? o->gpu : runs_default_gpu(files[0]), &hw, err, sizeof err);
    if (rc) {
        fprintf(stderr, "ultraplan validate: %s\n", err);
        return 2;
    }
    /* prediction errors name the last file given, as when every file was read first */
    char origin[256];
    snprintf(origin, sizeof origin, "%s", files[nfiles - 1]);
    VSet set = {.hw = &hw, .origin = origin, .moe_imbalance = o->moe_imbalance, .bands_stack = o->bands_stack,
                 .stack = o->stack};
    StatsGroupStats *groups[STATS_GROUP_COUNT] = {0};
    if (o->bands_out && band_append_header(&set.bands, &set.bands_len, &set.bands_cap)) {
        fprintf(stderr, "ultraplan validate: out of memory\n");
        return 1;
    }
    for (int i = 0; i < nfiles; i++) {
        const char *base = strrchr(files[i], '/');
        snprintf(set.source, sizeof set.source, "%s", base ? base + 1 : files[i]);
        if (runs_each_csv(files[i], keep_row, &set, err, sizeof err)) {
            fprintf(stderr, "ultraplan validate: %s\n", err);
            vset_free(&set);
            return 1;
        }
    }
    if (set.perr[0]) {
        fprintf(stderr, "ultraplan validate: %s\n", set.perr);
        rc = 1;
        goto out;
    }
    ApeStats st, mst;
    stats_summarize(set.ape, set.n, &st);
    if (mem_stats(&set, &mst)) {
        fprintf(stderr, "ultraplan validate: out of memory\n");
        rc = 1;
        goto out;
    }
    int ng[STATS_GROUP_COUNT];
    double worst_regret = 0, worst_regret_gbs = 0;
    for (int k = 0; k < STATS_GROUP_COUNT; k++) {
        ng[k] = stats_groups_compact(set.st, set.n, set.pred, (StatsGroupKind)k, &groups[k]);
        if (ng[k] < 0) {
            fprintf(stderr, "ultraplan validate: out of memory\n");
            rc = 1;
            goto out;
        }
    }
    for (int i = 0; i < ng[STATS_BY_MODEL_GPUS]; i++)
        worst_regret = fmax(worst_regret, groups[STATS_BY_MODEL_GPUS][i].regret);
    for (int i = 0; i < ng[STATS_BY_MODEL_GPUS_GBS]; i++)
        worst_regret_gbs = fmax(worst_regret_gbs, groups[STATS_BY_MODEL_GPUS_GBS][i].regret);

    if (o->json) {
        if (print_json(o, &set, hw.name, files, nfiles, &st, &mst, worst_regret, worst_regret_gbs, groups, ng)) {
            rc = 1;
            goto out;
        }
    } else {
        static Out out;
        out.n = 0;
        out.last_kind = 0;
        if (!o->summary)
            print_table(&out, &set);
        char line[400];
        snprintf(line, sizeof line, "%d runs on profile %s: MAPE %.2f%%, median %.2f%%, p90 %.2f%%, worst %.2f%%; "
                 "worst ranking regret %.2f%% (model+gpus groups; %.2f%% at a fixed global batch)\n", st.n, hw.name,
                 st.mape, st.median, st.p90, st.max, worst_regret, worst_regret_gbs);
        out_s(&out, line);
        if (mst.n > 0) {
            snprintf(line, sizeof line, "memory: %d runs with a measured peak: MAPE %.2f%%, median %.2f%%, worst %.2f%% "
                     "(predicted peak per GPU, the fullest stage, against the source's reading)\n", mst.n, mst.mape,
                     mst.median, mst.max);
            out_s(&out, line);
        }
        int unfit = 0, first = 0;
        for (int i = 0; i < set.n; i++)
            if (set.rows[i].unfit && !unfit++)
                first = set.rows[i].line;
        if (unfit) {   /* every run ran: a predicted peak above the GPU's memory is the model's error */
            snprintf(line, sizeof line, "memory: %d of %d runs predicted above the GPU's %.1f GiB, though they ran "
                     "(the first at line %d)\n", unfit, set.n, hw.hbm_bytes / GIB, first);
            out_s(&out, line);
        }
        for (int k = 0; k < STATS_GROUP_COUNT; k++)
            print_groups(&out, &set, groups[k], ng[k], (StatsGroupKind)k);
        out_flush(&out);
    }
    rc = 0;
    if (o->bands_out &&
        (set.bands_oom || util_write_atomic_bytes(o->bands_out, set.bands, set.bands_len, err, sizeof err) != 0)) {
        fprintf(stderr, "ultraplan validate: --bands-out: %s\n", set.bands_oom ? "out of memory" : err);
        rc = 1;
    }
    if (o->plot) {
        char title[300];
        snprintf(title, sizeof title, "%s on %s: %d runs, MAPE %.1f%%", nfiles == 1 ? files[0] : "measured runs",
                 hw.name, st.n, st.mape);
        if (plot(o->plot, &set, title, err, sizeof err)) {
            fprintf(stderr, "ultraplan validate: %s\n", err);
            rc = 1;
        }
    }
    if (o->max_mape >= 0 && st.mape > o->max_mape) {
        fprintf(stderr, "ultraplan validate: MAPE %.2f%% is above the limit %.2f%%\n", st.mape, o->max_mape);
        rc = 1;
    }
    if (o->max_mem_mape >= 0 && mst.n == 0) {
        fprintf(stderr, "ultraplan validate: --max-mem-mape: no row has a measured peak memory (column mem_gib)\n");
        rc = 1;
    } else if (o->max_mem_mape >= 0 && mst.mape > o->max_mem_mape) {
        fprintf(stderr, "ultraplan validate: memory MAPE %.2f%% is above the limit %.2f%%\n", mst.mape,
                o->max_mem_mape);
        rc = 1;
    }
    if (o->max_regret >= 0 && worst_regret > o->max_regret) {
        fprintf(stderr, "ultraplan validate: worst group regret %.2f%% is above the limit %.2f%%\n", worst_regret,
                o->max_regret);
        rc = 1;
    }
out:
    for (int k = 0; k < STATS_GROUP_COUNT; k++)
        free(groups[k]);
    vset_free(&set);
    return rc;
}

/* --bands-coverage: leave-one-file-out and leave-one-run-out coverage of the 80 % band. */
static int coverage(const Opts *o)
{
    char err[600];
    BandTable own = {0};
    const BandTable *t;
    if (!strcmp(o->bands_coverage, "builtin")) {
        t = band_table_builtin();
        if (!t) {
            fprintf(stderr, "ultraplan validate: the embedded residual table does not parse (rebuild)\n");
            return 1;
        }
    } else {
        size_t len;
        char *text = util_slurp(o->bands_coverage, 256u << 20, &len, err, sizeof err);
        if (!text || band_table_parse(text, o->bands_coverage, &own, err, sizeof err)) {
            fprintf(stderr, "ultraplan validate: --bands-coverage: %s\n", err);
            free(text);
            band_table_free(&own);
            return 1;
        }
        free(text);
        t = &own;
    }
    enum { MAXS = 64 };
    BandCoverage by_file[MAXS], by_run[MAXS], all_file, all_run;
    int nf = band_coverage(t, BAND_K, true, by_file, MAXS, &all_file);
    int nr = band_coverage(t, BAND_K, false, by_run, MAXS, &all_run);
    if (nf < 0 || nr < 0) {
        fprintf(stderr, "ultraplan validate: out of memory\n");
        band_table_free(&own);
        return 1;
    }
    if (o->json) {
        cJSON *j = cJSON_CreateObject();
        cJSON_AddStringToObject(j, "format", "ultraplan.band-coverage/1");
        cJSON_AddStringToObject(j, "table", o->bands_coverage);
        cJSON_AddNumberToObject(j, "k", BAND_K);
        cJSON_AddNumberToObject(j, "band_lo_pct", BAND_LO_PCT);
        cJSON_AddNumberToObject(j, "band_hi_pct", BAND_HI_PCT);
        const char *names[2] = {"leave_one_file_out", "leave_one_run_out"};
        BandCoverage *per[2] = {by_file, by_run}, *alls[2] = {&all_file, &all_run};
        int ns[2] = {nf < MAXS ? nf : MAXS, nr < MAXS ? nr : MAXS};
        for (int w = 0; w < 2; w++) {
            cJSON *a = cJSON_AddArrayToObject(j, names[w]);
            for (int i = 0; i <= ns[w]; i++) {
                const BandCoverage *c = i < ns[w] ? &per[w][i] : alls[w];
                cJSON *e = cJSON_CreateObject();
                cJSON_AddStringToObject(e, "source", c->source);
                cJSON_AddNumberToObject(e, "runs", c->n);
                cJSON_AddNumberToObject(e, "inside", c->inside);
                cJSON_AddNumberToObject(e, "below", c->below);
                cJSON_AddNumberToObject(e, "above", c->above);
                cJSON_AddNumberToObject(e, "coverage", c->n ? (double)c->inside / c->n : 0);
                cJSON_AddItemToArray(a, e);
            }
        }
        char *text = cJSON_Print(j);
        cJSON_Delete(j);
        if (text)
            printf("%s\n", text);
        free(text);
    } else {
        printf("coverage of the %.0f-%.0f %% band (k = %d nearest runs) on %d runs of %s\n", BAND_LO_PCT,
               BAND_HI_PCT, BAND_K, t->n, o->bands_coverage);
        printf("  %-28s %6s   %-30s   %-30s\n", "file", "runs", "leave its file out: in% (<lo >hi)",
               "leave the run out: in% (<lo >hi)");
        for (int i = 0; i <= nf && i <= MAXS; i++) {
            const BandCoverage *a = i < nf && i < MAXS ? &by_file[i] : &all_file;
            const BandCoverage *b = a;
            for (int k = 0; k < nr && k < MAXS; k++)
                if (!strcmp(by_run[k].source, a->source))
                    b = &by_run[k];
            if (a == &all_file)
                b = &all_run;
            char c1[64], c2[64];
            snprintf(c1, sizeof c1, "%5.1f (%d %d)", a->n ? 100.0 * a->inside / a->n : 0, a->below, a->above);
            snprintf(c2, sizeof c2, "%5.1f (%d %d)", b->n ? 100.0 * b->inside / b->n : 0, b->below, b->above);
            printf("  %-28s %6d   %-30s   %-30s\n", a->source, a->n, c1, c2);
            if (i == nf || i == MAXS)
                break;
        }
        double mf = 0, mr = 0;
        int ns = nf < MAXS ? nf : MAXS;
        for (int i = 0; i < ns; i++) {
            mf += by_file[i].n ? 100.0 * by_file[i].inside / by_file[i].n : 0;
            for (int k = 0; k < nr && k < MAXS; k++)
                if (!strcmp(by_run[k].source, by_file[i].source))
                    mr += by_run[k].n ? 100.0 * by_run[k].inside / by_run[k].n : 0;
        }
        printf("  %-28s %6d   %5.1f                            %5.1f\n", "mean over files", ns, ns ? mf / ns : 0,
               ns ? mr / ns : 0);
    }
    band_table_free(&own);
    return 0;
}

static int parse_pct(const char *flag, const char *s, double *out)
{
    char *end;
    double v = strtod(s, &end);
    if (end == s || *end || !(v >= 0)) {
        fprintf(stderr, "ultraplan validate: %s: expected a percentage >= 0, got \"%s\"\n", flag, s);
        return -1;
    }
    *out = v;
    return 0;
}

static int validate_main(int argc, char **argv)
{
    enum { O_GPU = 1, O_PROFILE, O_JSON, O_SUMMARY, O_PLOT, O_MAX_MAPE, O_MAX_REGRET, O_MOE_IMBALANCE, O_BANDS_OUT, O_BANDS_STACK,
           O_BANDS_COVERAGE, O_STACK, O_MAX_MEM_MAPE };
    static const struct option opts[] = {
        {"help", no_argument, 0, 'h'},          {"gpu", required_argument, 0, O_GPU},
        {"profile", required_argument, 0, O_PROFILE}, {"json", no_argument, 0, O_JSON},
        {"summary", no_argument, 0, O_SUMMARY}, {"plot", required_argument, 0, O_PLOT},
        {"max-mape", required_argument, 0, O_MAX_MAPE}, {"max-regret", required_argument, 0, O_MAX_REGRET},
        {"max-mem-mape", required_argument, 0, O_MAX_MEM_MAPE},
        {"moe-imbalance", required_argument, 0, O_MOE_IMBALANCE},
        {"bands-out", required_argument, 0, O_BANDS_OUT}, {"bands-stack", required_argument, 0, O_BANDS_STACK},
        {"bands-coverage", required_argument, 0, O_BANDS_COVERAGE}, {"stack", required_argument, 0, O_STACK},
        {0, 0, 0, 0},
    };
    Opts o = {.max_mape = -1, .max_regret = -1, .max_mem_mape = -1, .stack = -1};
    int c;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (c) {
        case 'h': help(stdout); return 0;
        case O_GPU: o.gpu = optarg; break;
        case O_PROFILE: o.profile = optarg; break;
        case O_JSON: o.json = true; break;
        case O_SUMMARY: o.summary = true; break;
        case O_PLOT: o.plot = optarg; break;
        case O_MAX_MAPE: if (parse_pct("--max-mape", optarg, &o.max_mape)) return 2; break;
        case O_MAX_REGRET: if (parse_pct("--max-regret", optarg, &o.max_regret)) return 2; break;
        case O_MAX_MEM_MAPE: if (parse_pct("--max-mem-mape", optarg, &o.max_mem_mape)) return 2; break;
        case O_MOE_IMBALANCE: {
            char e[200];
            if (knob_parse_double(knob_get(K_MOE_IMBALANCE), optarg, &o.moe_imbalance, NULL, e, sizeof e)) {
                fprintf(stderr, "ultraplan validate: %s\n", e);
                return 2;
            }
            break;
        }
        case O_BANDS_OUT: o.bands_out = optarg; break;
        case O_STACK: {
            char e[400];
            Stack st;
            if (stacks_load_name(optarg, &st, e, sizeof e)) {
                fprintf(stderr, "ultraplan validate: --stack: %s\n", e);
                return 2;
            }
            o.stack = stacks_index(optarg);
            break;
        }
        case O_BANDS_COVERAGE: o.bands_coverage = optarg; break;
        case O_BANDS_STACK:
            if (strlen(optarg) >= sizeof ((BandRun *)0)->stack || strpbrk(optarg, ",\n\r\"")) {
                fprintf(stderr, "ultraplan validate: --bands-stack: expected a name of at most %d characters "
                        "without commas or quotes, got \"%s\"\n", (int)sizeof ((BandRun *)0)->stack - 1, optarg);
                return 2;
            }
            o.bands_stack = optarg;
            break;
        default:
            command_bad_option("validate", argv);
            return 2;
        }
    }
    if (o.gpu && o.profile) {
        fprintf(stderr, "ultraplan validate: --gpu and --profile exclude each other\n");
        return 2;
    }
    if (o.bands_coverage) {
        if (optind < argc || o.gpu || o.profile || o.bands_out || o.plot || o.summary) {
            fprintf(stderr, "ultraplan validate: --bands-coverage reads a residual table, not CSVs of runs: give it "
                    "alone (with --json at most)\n");
            return 2;
        }
        return coverage(&o);
    }
    if (optind >= argc) {
        fprintf(stderr, "ultraplan validate: expected a CSV file of measured runs (see --help)\n");
        return 2;
    }
    char err[600];
    if (o.plot && plot_check(o.plot, err, sizeof err) != 0) {   /* before the work, not after */
        fprintf(stderr, "ultraplan validate: %s\n", err);
        return 1;
    }
    if (o.bands_out && util_check_writable(o.bands_out, err, sizeof err) != 0) {
        fprintf(stderr, "ultraplan validate: --bands-out: %s\n", err);
        return 1;
    }
    return run(&o, argv + optind, argc - optind);
}

const Command cmd_validate = {"validate", "predict measured runs (vTrain or own CSV) and report the error",
                              validate_main};
