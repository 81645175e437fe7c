/* cmd_sweep.c — `ultraplan sweep`: the scaling picture of the Ultra-Scale
 * Playbook in seconds. For every (model, GPU count) the planner finds the
 * best layout; the sweep prints its MFU and tokens/s per GPU as a table, and
 * optionally as CSV, JSON and a gnuplot heatmap of MFU.
 *
 * Each cell is one planner_search with the shared flags as fixed knobs
 * (--seq, --gbs, --tp, ... apply to every cell). A cell where no layout fits
 * is shown as "—" and keeps the planner's reason; it is not an error.
 */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "args.h"
#include "command.h"
#include "plot.h"
#include "planner.h"
#include "report.h"

#define SWEEP_MAX 32   /* models or GPU counts in one list */

enum { S_PARAMS = 1, S_MODELS, S_GPUS, S_CSV, S_PLOT };

typedef struct {
    char name[64];            // preset name, or the --params text ("70B"); "70B*" when shape flags changed it
    CliInputs in;             // resolved model, profile and fixed knobs (gpus unset)
} SweepModel;

typedef struct {
    bool ok;                  // a layout fits
    int gbs;                  // the global batch searched (--gbs, or the default for this model and GPU count)
    Plan plan;                // best plan when ok
    char reason[1024];        // why not, when !ok (the planner's whole explanation)
    char brief[160];          // the same in one clause, for the table
} SweepCell;

/* Shared flags that sweep redefines (--params, --gpus as lists) or refuses
 * (--model, -o, --stage-layers): its help documents them once, its own way. */
static const char *const redefined[] = {"model", "params", "gpus", "output", "stage-layers", NULL};

static void help(FILE *f)
{
    fprintf(f, "usage: ultraplan sweep [--params 7B,70B,... | --models NAME,...] [--gpus 64,256,...]\n"
               "                       [--gpu NAME | --profile FILE] [--seq N] [--gbs N] [fixed layout knobs]\n"
               "                       [--csv FILE] [--plot FILE.png] [--json]\n\n"
               "For each model and GPU count, searches every layout (as `plan` does) and reports the best one's\n"
               "MFU, tokens/s per GPU and layout. Cells where nothing fits show \"—\" and why (in full in --json/--csv).\n\n"
               "Sweep options:\n"
               "  --params LIST     model sizes, comma-separated (default 7B,70B,175B,405B)\n"
               "  --models LIST     presets instead (see `ultraplan models`)\n"
               "  --gpus LIST       GPU counts, comma-separated (default 64,256,1024,4096)\n"
               "  --csv FILE        one row per cell\n"
               "  --plot FILE.png   heatmap of MFU with the values in the cells (needs gnuplot)\n\n"
               "The flags below apply to every cell. Shape flags (--seq, --layers, ...) change every model of\n"
               "the list: such rows are labelled with a * (\"7B*\") and show the changed model's parameters.\n"
               "A model's parameters (table, CSV params_b, JSON params) are the main model's, without MTP modules.\n"
               "Layout flags are fixed in every cell; a cell they make impossible says which one and why.\n"
               "--model, --stage-layers and -o do not apply to a sweep.\n\n%s\n"
               "example: ultraplan sweep --params 7B,70B --gpus 64,512 --gpu h100-sxm\n",
            args_help_except(ARGS_HELP_SEARCH, redefined));
}

/* Split a comma-separated list into at most SWEEP_MAX items of < 64 chars. */
static int split_list(const char *flag, const char *arg, char items[][64], int *n, char *err, int errlen)
{
    *n = 0;
    const char *p = arg;
    for (;;) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (len == 0 || len >= 64) {
            snprintf(err, errlen, "%s: expected a comma-separated list of non-empty items, got \"%s\"", flag, arg);
            return -1;
        }
        if (*n >= SWEEP_MAX) {
            snprintf(err, errlen, "%s: at most %d items", flag, SWEEP_MAX);
            return -1;
        }
        memcpy(items[*n], p, len);
        items[(*n)++][len] = 0;
        if (!e)
            return 0;
        p = e + 1;
    }
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

/* "tp8 pp4 dp32 mbs1 dist-opt sp full-rc" (MoE: "... ep8 etp1 ...") */
static const char *layout_short(const Layout *lo, char *buf, int len)
{
    int k = snprintf(buf, len, "tp%d pp%d dp%d", lo->tp, lo->pp, lo->dp);
    if (lo->cp > 1) k += snprintf(buf + k, len - k, " cp%d", lo->cp);
    if (lo->vp > 1) k += snprintf(buf + k, len - k, " vp%d", lo->vp);
    /* MoE layouts: expert parallel, and expert tensor parallel where it differs from tp */
    if (lo->ep > 1) k += snprintf(buf + k, len - k, " ep%d", lo->ep);
    if (layout_etp(lo) != lo->tp) k += snprintf(buf + k, len - k, " etp%d", layout_etp(lo));
    k += snprintf(buf + k, len - k, " mbs%d %s", lo->mbs, layout_opt_name(lo->opt));
    if (lo->tp > 1 && lo->sp) k += snprintf(buf + k, len - k, " sp");
    int full = 0, sel = 0, layers = 0;
    for (int s = 0; s < lo->pp; s++) {
        full += lo->full_rc[s];
        sel += lo->sel_rc[s];
        layers += lo->layers[s];
    }
    if (full && k < len)
        k += snprintf(buf + k, len - k, full == layers ? " rc:full" : " rc:full%d/%d", full, layers);
    if (sel && k < len)
        snprintf(buf + k, len - k, sel == layers ? " rc:sel" : " rc:sel%d/%d", sel, layers);
    if (lo->prec == PREC_FP8 && (int)strlen(buf) + 4 < len)
        strcat(buf, " fp8");
    return buf;
}

/* The shape flags given over every model ("--seq, --hidden"); 0 when none. */
static int shape_flags(const Scenario *sc, char *buf, int len)
{
    int n = 0, k = 0;
    buf[0] = 0;
    for (int i = 0; i < KNOB_COUNT; i++) {
        const Knob *kn = knob_get((KnobId)i);
        if (kn->group != KNOB_MODEL || !(sc->given & KNOB_BIT(i)) || k >= len)
            continue;
        bool on = kn->type != KNOB_BOOL || knob_get_int(kn, &sc->model);
        k += snprintf(buf + k, len - k, "%s--%s", n++ ? ", " : "", on ? kn->flag : kn->neg_flag);
    }
    return n;
}

static double per_gpu(const Plan *p) { return p->cost.thr.tokens_per_s / layout_gpus(&p->layout); }

static int run_cell(const SweepModel *sm, int gpus, SweepCell *cell)
{
    PlanRequest req;
    planner_request_default(&req);
    req.top_k = 1;
    req.gpus = gpus;
    req.fixed = sm->in.sc.fixed;
    req.base = sm->in.sc.layout;
    req.recompute = sm->in.sc.recompute;
    req.mem_margin_bytes = sm->in.sc.mem_margin_bytes;
    PlanResult res = {0};
    char err[512];
    memset(cell, 0, sizeof *cell);
    if (!(req.fixed & FIX_GBS))   /* the default batch follows the GPU count (scenario.h) */
        req.base.gbs = scenario_default_gbs(&sm->in.sc.model, gpus);
    cell->gbs = req.base.gbs;
    if (planner_search(&sm->in.sc.model, &sm->in.sc.hw, &sm->in.sc.opts, &req, &res, err, sizeof err) != 0) {
        snprintf(cell->reason, sizeof cell->reason, "%s", err);   /* e.g. a fixed --tp that does not divide */
        snprintf(cell->brief, sizeof cell->brief, "%.159s", err);
    } else if (res.n == 0) {
        snprintf(cell->reason, sizeof cell->reason, "%s", res.infeasible[0] ? res.infeasible : "no layout fits");
        snprintf(cell->brief, sizeof cell->brief, "%s", res.brief[0] ? res.brief : "no layout fits");
    } else {
        cell->ok = true;
        cell->plan = res.plans[0];
    }
    planner_result_free(&res);
    return 0;
}

/* The main model's parameters, as published and as `models` and `predict`
 * print them: the MTP modules apart (DeepSeek-V3: 671B, not 682.6B). */
static double main_params(const ModelSpec *m)
{
    return (double)(spec_params(m, 1, PARAMS_EXACT) - spec_mtp_params(m));
}

static void print_table(const SweepModel *ms, int nm, const int *gpus, int ng, const SweepCell *cells)
{
    const HwProfile *hw = &ms[0].in.sc.hw;
    printf("best layout per model and GPU count on %s (%d per node); MFU under the full FLOP convention\n\n",
           hw->name, hw->gpus_per_node);
    printf("%-14s %8s %6s %6s %7s %13s %9s  %-36s %s\n", "model", "params", "gpus", "gbs", "MFU", "tokens/s/GPU",
           "step s", "layout", "bottleneck or reason");
    for (int i = 0; i < nm; i++) {
        const ModelSpec *m = &ms[i].in.sc.model;
        char pb[16];
        util_si(main_params(m), 4, pb, sizeof pb);
        for (int j = 0; j < ng; j++) {
            const SweepCell *c = &cells[i * ng + j];
            char lay[128];
            if (!c->ok) {
                /* "—" is one column but three bytes: widen its fields by two */
                printf("%-14s %8s %6d %6d %9s %15s %11s  %-36s %s\n", ms[i].name, pb, gpus[j],
                       c->gbs, "—", "—", "—", "", c->brief);
                continue;
            }
            const Plan *p = &c->plan;
            printf("%-14s %8s %6d %6d %6.1f%% %13.0f %9.3f  %-36s %s\n", ms[i].name, pb, gpus[j], p->layout.gbs,
                   100 * p->cost.thr.mfu, per_gpu(p), p->cost.step_s, layout_short(&p->layout, lay, sizeof lay),
                   p->bottleneck);
        }
    }
    char shape[256];
    if (shape_flags(&ms[0].in.sc, shape, sizeof shape) > 0)
        printf("\n*: %s given over every model; its parameters and results are those of the changed shape\n", shape);
    for (int i = 0; i < nm; i++) {
        if (ms[i].in.sc.layout.prec == PREC_FP8 && hw->peak[PREC_BF16] > 0) {
            printf("\nfp8: MFU is against the fp8 peak (%.0f TFLOP/s); against the bf16 peak (%.0f) it is %.2fx as "
                   "high (mfu_bf16_peak in --csv and --json)\n",
                   hw->peak[PREC_FP8] / 1e12, hw->peak[PREC_BF16] / 1e12, hw->peak[PREC_FP8] / hw->peak[PREC_BF16]);
            break;
        }
    }
}

static int write_csv(const char *path, const SweepModel *ms, int nm, const int *gpus, int ng,
                     const SweepCell *cells, char *err, int errlen)
{
    /* built in memory, then written atomically: a failure leaves the old file */
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f) {
        snprintf(err, errlen, "--csv: out of memory");
        return -1;
    }
    fprintf(f, "model,params_b,gpus,gbs,seq,feasible,tp,pp,dp,cp,vp,mbs,optim,sp,layout,step_s,mfu,"
               "tokens_per_s_per_gpu,tokens_per_s,bottleneck,reason,mfu_bf16_peak,days_with_failures,"
               "dollars_with_failures\n");
    for (int i = 0; i < nm; i++) {
        const ModelSpec *m = &ms[i].in.sc.model;
        double pb = main_params(m) / 1e9;
        for (int j = 0; j < ng; j++) {
            const SweepCell *c = &cells[i * ng + j];
            if (!c->ok) {
                /* the reason in quotes, its own quotes doubled */
                fprintf(f, "%s,%.3f,%d,%d,%d,0,,,,,,,,,,,,,,,\"", ms[i].name, pb, gpus[j], c->gbs, m->s);
                for (const char *r = c->reason; *r; r++) {
                    if (*r == '"')
                        fputc('"', f);
                    fputc(*r, f);
                }
                fputs("\",,,\n", f);
                continue;
            }
            const Layout *lo = &c->plan.layout;
            char lay[128];
            fprintf(f, "%s,%.3f,%d,%d,%d,1,%d,%d,%d,%d,%d,%d,%s,%d,%s,%.6g,%.6g,%.6g,%.6g,%s,,", ms[i].name, pb,
                    gpus[j], lo->gbs, m->s, lo->tp, lo->pp, lo->dp, lo->cp, lo->vp, lo->mbs, layout_opt_name(lo->opt),
                    lo->sp ? 1 : 0, layout_short(lo, lay, sizeof lay), c->plan.cost.step_s, c->plan.cost.thr.mfu,
                    per_gpu(&c->plan), c->plan.cost.thr.tokens_per_s, c->plan.bottleneck);
            double mb = cost_mfu_bf16_peak(&ms[i].in.sc.hw, lo, &c->plan.cost);
            if (mb >= 0)
                fprintf(f, "%.6g", mb);
            const Training *tr = &c->plan.cost.train;
            fprintf(f, ",%.6g,", tr->days_with_failures);
            if (tr->dollars > 0)
                fprintf(f, "%.6g", tr->dollars_with_failures);
            fputc('\n', f);
        }
    }
    if (fclose(f) != 0) {
        free(buf);
        snprintf(err, errlen, "--csv: out of memory");
        return -1;
    }
    char e2[400];
    int rc = util_write_atomic_bytes(path, buf, len, e2, sizeof e2);
    free(buf);
    if (rc != 0)
        snprintf(err, errlen, "--csv: %s", e2);
    return rc;
}

static cJSON *sweep_json(const SweepModel *ms, int nm, const int *gpus, int ng, const SweepCell *cells)
{
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "gpu", ms[0].in.sc.hw.name);
    cJSON_AddNumberToObject(j, "gpus_per_node", ms[0].in.sc.hw.gpus_per_node);
    cJSON *arr = cJSON_AddArrayToObject(j, "cells");
    for (int i = 0; i < nm; i++) {
        for (int g = 0; g < ng; g++) {
            const SweepCell *c = &cells[i * ng + g];
            cJSON *o = cJSON_CreateObject();
            cJSON_AddStringToObject(o, "model", ms[i].name);
            cJSON_AddNumberToObject(o, "params", main_params(&ms[i].in.sc.model));
            cJSON_AddNumberToObject(o, "gpus", gpus[g]);
            cJSON_AddNumberToObject(o, "seq", ms[i].in.sc.model.s);
            cJSON_AddBoolToObject(o, "feasible", c->ok);
            if (c->ok) {
                const Plan *p = &c->plan;
                char lay[128];
                cJSON_AddNumberToObject(o, "gbs", p->layout.gbs);
                cJSON_AddStringToObject(o, "summary", layout_short(&p->layout, lay, sizeof lay));
                cJSON_AddItemToObject(o, "layout", plan_layout_json(&p->layout));
                cJSON_AddNumberToObject(o, "step_s", p->cost.step_s);
                cJSON_AddNumberToObject(o, "mfu", p->cost.thr.mfu);
                plan_add_mfu_bf16_peak(o, &ms[i].in.sc.hw, &p->layout, &p->cost);
                cJSON_AddNumberToObject(o, "tokens_per_s", p->cost.thr.tokens_per_s);
                cJSON_AddNumberToObject(o, "tokens_per_s_per_gpu", per_gpu(p));
                cJSON_AddNumberToObject(o, "peak_bytes", p->cost.peak_bytes);
                cJSON_AddNumberToObject(o, "days_with_failures", isfinite(p->cost.train.days_with_failures)
                                                                     ? p->cost.train.days_with_failures : -1);
                if (p->cost.train.dollars > 0)
                    cJSON_AddNumberToObject(o, "dollars_with_failures", isfinite(p->cost.train.dollars_with_failures)
                                                                            ? p->cost.train.dollars_with_failures : -1);
                cJSON_AddStringToObject(o, "bottleneck", p->bottleneck);
            } else {
                cJSON_AddNumberToObject(o, "gbs", c->gbs);
                cJSON_AddStringToObject(o, "reason", c->reason);
            }
            cJSON_AddItemToArray(arr, o);
        }
    }
    return j;
}

/* Heatmap of MFU: models down, GPU counts across, the value printed in each cell. */
static int plot(const char *png, const SweepModel *ms, int nm, const int *gpus, int ng, const SweepCell *cells,
                char *err, int errlen)
{
    Plot pl;
    if (plot_begin(&pl, png, err, errlen) != 0)
        return -1;
    /* x y mfu label: infeasible cells get NaN (left blank) and a dash */
    for (int i = 0; i < nm; i++)
        for (int g = 0; g < ng; g++) {
            const SweepCell *c = &cells[i * ng + g];
            if (c->ok)
                fprintf(pl.data, "%d %d %.4f %.1f%%\n", g, i, 100 * c->plan.cost.thr.mfu, 100 * c->plan.cost.thr.mfu);
            else   /* an empty cell says why, briefly: the reasons are in --csv and --json */
                fprintf(pl.data, "%d %d NaN \"%s\"\n", g, i, strstr(c->brief, "fit") ? "does not fit" : "no layout");
        }
    FILE *gp = plot_script(&pl, 260 + 110 * ng, 200 + 60 * nm, err, errlen);
    if (!gp)
        return -1;
    char title[160];
    snprintf(title, sizeof title, "MFU of the best layout on %s, %d per node", ms[0].in.sc.hw.name,
             ms[0].in.sc.hw.gpus_per_node);
    fprintf(gp, "set title ");
    plot_quote(gp, title);   /* names from profiles and --models: no substitution inside */
    fprintf(gp, " noenhanced\n");
    fprintf(gp, "set xlabel 'GPUs'\nset ylabel 'model'\nset cblabel 'MFU %%' offset 1.5,0\nset cbrange [0:*]\n"
                "set palette defined (0 '#fff7bc', 1 '#c2e699', 2 '#78c679', 3 '#31a354')\n"
                "set xrange [-0.5:%g]\nset yrange [-0.5:%g]\nset tics scale 0\nunset key\n",
            ng - 0.5, nm - 0.5);
    fprintf(gp, "set xtics (");
    for (int g = 0; g < ng; g++)
        fprintf(gp, "%s\"%d\" %d", g ? ", " : "", gpus[g], g);
    fprintf(gp, ")\nset ytics (");
    for (int i = 0; i < nm; i++) {
        fprintf(gp, "%s", i ? ", " : "");
        plot_quote(gp, ms[i].name);
        fprintf(gp, " %d", i);
    }
    fprintf(gp, ")\nset bmargin 5\nset label 1 'an empty cell: no layout fits (or divides); the reasons are in --csv and "
                "--json' at screen 0.01, screen 0.03 font ',9'\n");
    fprintf(gp, "set datafile missing 'NaN'\n"
                "set style fill solid 1.0 noborder\n"
                "plot '%s' u 1:2:(0.5):(0.5):3 w boxxy fc palette notitle, '' u 1:2:4 w labels tc 'black' font ',12' notitle\n",
            pl.data_path);
    return plot_end(&pl, err, errlen);
}

static int parse_gpus(const char *arg, int *gpus, int *ng, char *err, int errlen)
{
    char items[SWEEP_MAX][64];
    if (split_list("--gpus", arg, items, ng, err, errlen) != 0)
        return -1;
    for (int i = 0; i < *ng; i++)
        if (util_parse_int(items[i], &gpus[i]) != 0 || gpus[i] < 1 || gpus[i] > 100000000) {
            snprintf(err, errlen, "--gpus: expected GPU counts from 1 to 1e8, got \"%.60s\"", items[i]);
            return -1;
        }
    return 0;
}

static int sweep_main(int argc, char **argv)
{
    static const struct option own[] = {
        {"help", no_argument, 0, 'h'},          {"params", required_argument, 0, S_PARAMS},
        {"models", required_argument, 0, S_MODELS}, {"gpus", required_argument, 0, S_GPUS},
        {"csv", required_argument, 0, S_CSV},   {"plot", required_argument, 0, S_PLOT},
    };
    struct option *opts = command_options(own, (int)(sizeof own / sizeof *own));
    CliInputs base;
    args_init(&base);
    char err[512];
    char items[SWEEP_MAX][64];
    int ni = 0, by_name = 0, ng = 0, gpus[SWEEP_MAX];
    const char *csv = NULL, *png = NULL, *params = NULL, *models = NULL;
    SweepModel *ms = NULL;
    SweepCell *cells = NULL;
    int c, rc = 2;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        if (c == 'h') {
            help(stdout);
            rc = 0;
            goto out;
        } else if (c == S_PARAMS) {
            params = optarg;
        } else if (c == S_MODELS) {
            models = optarg;
        } else if (c == S_GPUS) {
            if (parse_gpus(optarg, gpus, &ng, err, sizeof err) != 0) {
                fprintf(stderr, "ultraplan sweep: %s\n", err);
                goto out;
            }
        } else if (c == S_CSV) {
            csv = optarg;
        } else if (c == S_PLOT) {
            png = optarg;
        } else if (c == '?' || c == ':') {
            command_bad_option("sweep", argv);
            goto out;
        } else if (args_handle(&base, c, optarg, err, sizeof err) != 0) {
            fprintf(stderr, "ultraplan sweep: %s\n", err);
            goto out;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "ultraplan sweep: unexpected argument \"%s\" (see --help)\n", argv[optind]);
        goto out;
    }
    if (params && models) {
        fprintf(stderr, "ultraplan sweep: --params and --models exclude each other\n");
        goto out;
    }
    if (base.sc.hf_config && (params || models)) {
        fprintf(stderr, "ultraplan sweep: --hf-config is the sweep's one model; it excludes --%s\n",
                params ? "params" : "models");
        goto out;
    }
    if (base.sc.model_name || base.sc.params > 0) {
        fprintf(stderr, "ultraplan sweep: give models as lists: --params 7B,70B or --models NAME,NAME\n");
        goto out;
    }
    if (base.out_path) {
        fprintf(stderr, "ultraplan sweep: -o is not a sweep output; use --csv FILE or --json\n");
        goto out;
    }
    if (base.sc.fixed & FIX_STAGES) {
        fprintf(stderr, "ultraplan sweep: --stage-layers depends on the model; it cannot apply to a sweep\n");
        goto out;
    }
    /* the outputs before the search: a bad path fails now, not after it */
    if (csv && util_check_writable(csv, err, sizeof err) != 0) {
        fprintf(stderr, "ultraplan sweep: --csv: %s\n", err);
        goto out;
    }
    if (png && plot_check(png, err, sizeof err) != 0) {
        fprintf(stderr, "ultraplan sweep: %s\n", err);
        goto out;
    }
    by_name = models != NULL;
    if (split_list(by_name ? "--models" : "--params",
                   models ? models : params ? params : base.sc.hf_config ? "--hf-config" : "7B,70B,175B,405B",
                   items, &ni, err, sizeof err) != 0) {
        fprintf(stderr, "ultraplan sweep: %s\n", err);
        goto out;
    }
    if (ng == 0)
        parse_gpus("64,256,1024,4096", gpus, &ng, err, sizeof err);
    ms = calloc((size_t)ni, sizeof *ms);
    cells = calloc((size_t)ni * ng, sizeof *cells);
    if (!ms || !cells) {
        fprintf(stderr, "ultraplan sweep: out of memory\n");
        rc = 1;
        goto out;
    }
    /* resolve every model first: a bad name is a usage error before any search */
    for (int i = 0; i < ni; i++) {
        SweepModel *sm = &ms[i];
        snprintf(sm->name, sizeof sm->name, "%.63s", items[i]);
        sm->in = base;
        if (by_name) {
            sm->in.sc.model_name = sm->name;
        } else if (!base.sc.hf_config && (util_parse_count(items[i], &sm->in.sc.params) != 0 ||
                                          sm->in.sc.params <= 0)) {
            fprintf(stderr, "ultraplan sweep: --params: expected parameter counts such as 7B,70B, got \"%s\"\n",
                    items[i]);
            goto out;
        }
        if (args_finish(&sm->in, false, err, sizeof err) != 0) {
            fprintf(stderr, "ultraplan sweep: %s: %s\n", items[i], err);
            goto out;
        }
        char shape[8];
        if (shape_flags(&sm->in.sc, shape, sizeof shape) > 0)
            snprintf(sm->name, sizeof sm->name, "%.62s*", items[i]);   /* not the preset any more */
        if (base.sc.hf_config)   /* the row is named by the config's model */
            snprintf(sm->name, sizeof sm->name, "%s", sm->in.sc.model.name);
    }
    rc = 1;
    double t0 = now_s();
    bool shown = false;
    for (int i = 0; i < ni; i++)
        for (int g = 0; g < ng; g++) {
            if (now_s() - t0 > 1.0) {
                fprintf(stderr, "\rsweep: %d of %d cells (%s on %d GPUs) ...   ", i * ng + g + 1, ni * ng,
                        ms[i].name, gpus[g]);
                shown = true;
            }
            run_cell(&ms[i], gpus[g], &cells[i * ng + g]);
        }
    if (shown)
        fprintf(stderr, "\r%70s\r", "");
    if (csv && write_csv(csv, ms, ni, gpus, ng, cells, err, sizeof err) != 0) {
        fprintf(stderr, "ultraplan sweep: %s\n", err);
        goto out;
    }
    if (base.json) {
        cJSON *j = sweep_json(ms, ni, gpus, ng, cells);
        char *text = cJSON_Print(j);
        cJSON_Delete(j);
        if (!text) {
            fprintf(stderr, "ultraplan sweep: out of memory\n");
            goto out;
        }
        printf("%s\n", text);
        free(text);
    } else {
        print_table(ms, ni, gpus, ng, cells);
    }
    if (png && plot(png, ms, ni, gpus, ng, cells, err, sizeof err) != 0) {
        fprintf(stderr, "ultraplan sweep: %s\n", err);
        goto out;
    }
    if (!base.json && (csv || png))
        printf("\n%s%s%s%s\n", csv ? "wrote " : "", csv ? csv : "", csv && png ? " and " : png ? "wrote " : "",
               png ? png : "");
    rc = 0;
out:
    free(ms);
    free(cells);
    free(opts);
    return rc;
}

const Command cmd_sweep = {"sweep", "best plan's MFU and tokens/s per GPU over model sizes and GPU counts", sweep_main};
