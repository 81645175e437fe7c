/* cmd_fit.c — `ultraplan fit`: its arguments, and the fit (calib/fit.h)
 * printed as text or JSON: the constants before and after with their
 * factors, and the error on the fit rows and on the rows held out. The
 * fitted profile is written with -o.
 */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "command.h"
#include "fileio.h"
#include "fit.h"
#include "profile.h"

/* What to print for a constant's value: a number, or a curve's efficiencies. */
static void show(const HwProfile *hw, FitParamId id, char *buf, int len)
{
    if (fit_param(id)->kind == FIT_CURVE) {
        const EffCurve *c = fit_param_curve(hw, id);
        int n = snprintf(buf, len, "[");
        for (int k = 0; k < c->n && n < len; k++)
            n += snprintf(buf + n, len - n, "%s%.3g", k ? " " : "", c->pt[k].eff);
        if (n < len)
            snprintf(buf + n, len - n, "]");
    } else {
        snprintf(buf, len, "%.4g", fit_param_value(hw, id));
    }
}

static void print_text(const HwProfile *base, const FitResult *r, const char *out)
{
    printf("fit of %d", r->nfitted);
    if (r->nfitted < r->n)
        printf(" of %d", r->n);
    printf(" constants of %s on %d runs (%d held out), %d iterations of GSL trust-region least squares\n\n",
           base->name, r->nfit, r->nheld, r->iters);
    printf("  %-12s %-40s %-40s %s\n", "constant", "before", "after", "factor (± 1 s.e.)");
    for (int i = 0; i < r->n; i++) {
        const FitOutcome *o = &r->c[i];
        char b[128], a[128];
        show(base, o->id, b, sizeof b);
        show(&r->fitted, o->id, a, sizeof a);
        if (o->fitted)
            printf("  %-12s %-40s %-40s %.3f ± %.3f\n", fit_param(o->id)->name, b, a, o->factor, o->factor_se);
        else
            printf("  %-12s %-40s %-40s kept: %s\n", fit_param(o->id)->name, b, a, o->kept);
    }
    const struct { const char *label; const ApeStats *st; } rows[4] = {
        {"fit rows, before", &r->fit_before}, {"fit rows, after", &r->fit_after},
        {"held-out rows, before", &r->held_before}, {"held-out rows, after", &r->held_after},
    };
    printf("\n  %-28s %5s %10s %10s %10s %10s\n", "rows", "n", "mape%", "median%", "p90%", "max%");
    for (int i = 0; i < (r->nheld ? 4 : 2); i++)
        printf("  %-28s %5d %10.2f %10.2f %10.2f %10.2f\n", rows[i].label, rows[i].st->n, rows[i].st->mape,
               rows[i].st->median, rows[i].st->p90, rows[i].st->max);
    if (out)
        printf("\nwrote %s\n", out);
}

/* A constant's value: a number, or a curve as [[size, eff], ...]. */
static cJSON *value_json(const HwProfile *hw, FitParamId id)
{
    if (fit_param(id)->kind != FIT_CURVE)
        return cJSON_CreateNumber(fit_param_value(hw, id));
    const EffCurve *c = fit_param_curve(hw, id);
    cJSON *a = cJSON_CreateArray();
    for (int k = 0; k < c->n; k++) {
        cJSON *pt = cJSON_CreateArray();
        cJSON_AddItemToArray(pt, cJSON_CreateNumber(c->pt[k].size));
        cJSON_AddItemToArray(pt, cJSON_CreateNumber(c->pt[k].eff));
        cJSON_AddItemToArray(a, pt);
    }
    return a;
}

static int print_json(const HwProfile *base, const FitResult *r, const char *out, char *const *files, int nfiles)
{
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "format", "ultraplan.fit/1");
    cJSON_AddStringToObject(root, "profile", base->name);
    cJSON *fa = cJSON_AddArrayToObject(root, "files");
    for (int i = 0; i < nfiles; i++)
        cJSON_AddItemToArray(fa, cJSON_CreateString(files[i]));
    cJSON_AddNumberToObject(root, "iterations", r->iters);
    cJSON *ca = cJSON_AddArrayToObject(root, "constants");
    for (int i = 0; i < r->n; i++) {
        const FitOutcome *o = &r->c[i];
        cJSON *j = cJSON_CreateObject();
        cJSON_AddStringToObject(j, "name", fit_param(o->id)->name);
        cJSON_AddStringToObject(j, "what", fit_param(o->id)->what);
        cJSON_AddItemToObject(j, "before", value_json(base, o->id));
        cJSON_AddItemToObject(j, "after", value_json(&r->fitted, o->id));
        cJSON_AddNumberToObject(j, "factor", o->factor);
        if (o->fitted) {
            cJSON_AddNumberToObject(j, "factor_se", o->factor_se);
            cJSON_AddNumberToObject(j, "sensitivity", o->sensitivity);
            cJSON_AddNullToObject(j, "kept");
        } else {
            cJSON_AddNullToObject(j, "factor_se");
            cJSON_AddNullToObject(j, "sensitivity");
            cJSON_AddStringToObject(j, "kept", o->kept);
        }
        cJSON_AddItemToArray(ca, j);
    }
    cJSON *fr = cJSON_AddObjectToObject(root, "fit_rows");
    cJSON_AddItemToObject(fr, "before", stats_json(&r->fit_before));
    cJSON_AddItemToObject(fr, "after", stats_json(&r->fit_after));
    if (r->nheld) {
        cJSON *hr = cJSON_AddObjectToObject(root, "held_out_rows");
        cJSON_AddItemToObject(hr, "before", stats_json(&r->held_before));
        cJSON_AddItemToObject(hr, "after", stats_json(&r->held_after));
    } else {
        cJSON_AddNullToObject(root, "held_out_rows");
    }
    if (out)
        cJSON_AddStringToObject(root, "output", out);
    else
        cJSON_AddNullToObject(root, "output");
    char *text = cJSON_Print(root);
    cJSON_Delete(root);
    if (!text)
        return -1;
    puts(text);
    free(text);
    return 0;
}

/* ---- the command --------------------------------------------------------------- */

static void help(FILE *f)
{
    fprintf(f,
        "usage: ultraplan fit FILE.csv [FILE.csv ...] [--profile base.json | --gpu NAME] [-o fitted.json]\n"
        "                     [--params a,b,...] [--holdout FRACTION | --holdout-where EXPR] [--seed N] [--json]\n\n"
        "Fits a profile's constants to measured runs (the CSV formats of `ultraplan validate`) by\n"
        "least squares on log(predicted/measured), with GSL's trust-region solver. Each constant is\n"
        "scaled by a fitted factor; curves are scaled as a whole and capped at 1. Prints the constants\n"
        "before and after, each factor with its standard error, and the error on the fit rows and on\n"
        "the held-out rows, so you can see whether the fit generalises. A constant the fit rows do not\n"
        "determine (their predicted times move by under 0.1 %% per unit of log factor, e.g. a curve\n"
        "pushed into its cap of 1) keeps its base value, is named as kept, and the rest are fitted\n"
        "again without it.\n\n"
        "  --gpu NAME            the builtin profile to start from (default h100-sxm, as every command;\n"
        "                        a100-80g for vTrain's CSVs, whose runs are A100s)\n"
        "  --profile FILE        a profile JSON to start from instead\n"
        "  --params LIST         constants to fit (default " FIT_DEFAULT_PARAMS ");\n"
        "                        any of kernel_lat coll_lat coll_eff gemm_eff attn_eff mem_eff tp_overlap dp_overlap\n"
        "  --holdout FRACTION    hold out a random fraction of the rows (0..1; seed with --seed)\n"
        "  --holdout-where EXPR  hold out the rows where FIELD OP VALUE holds, e.g. gpus>=256\n"
        "                        (fields: gpus tp pp dp mbs gbs hidden layers seq; ops >= <= > < == !=)\n"
        "  --seed N              seed of the random hold-out (default 1)\n"
        "  --json                the constants (before, after, factor, factor_se, sensitivity, kept),\n"
        "                        fit_rows and held_out_rows {before, after} as JSON\n"
        "  -o, --output FILE     write the fitted profile (atomically)\n\n"
        "example: ultraplan fit single_node.csv multi_node.csv --gpu a100-80g --holdout-where 'gpus>=256' -o fitted.json\n");
}

static int fit_main(int argc, char **argv)
{
    enum { O_GPU = 1, O_PROFILE, O_PARAMS, O_HOLDOUT, O_WHERE, O_SEED, O_JSON };
    static const struct option opts[] = {
        {"help", no_argument, 0, 'h'}, {"gpu", required_argument, 0, O_GPU},
        {"profile", required_argument, 0, O_PROFILE}, {"params", required_argument, 0, O_PARAMS},
        {"holdout", required_argument, 0, O_HOLDOUT}, {"holdout-where", required_argument, 0, O_WHERE},
        {"seed", required_argument, 0, O_SEED}, {"output", required_argument, 0, 'o'},
        {"json", no_argument, 0, O_JSON}, {0, 0, 0, 0},
    };
    const char *gpu = NULL, *profile = NULL, *plist = FIT_DEFAULT_PARAMS, *out = NULL, *where_s = NULL;
    double holdout = 0;
    unsigned long seed = 1;
    bool json = false;
    int c;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "ho:", opts, NULL)) != -1) {
        char *end;
        switch (c) {
        case 'h': help(stdout); return 0;
        case O_GPU: gpu = optarg; break;
        case O_PROFILE: profile = optarg; break;
        case O_PARAMS: plist = optarg; break;
        case 'o': out = optarg; break;
        case O_WHERE: where_s = optarg; break;
        case O_JSON: json = true; break;
        case O_HOLDOUT:
            holdout = strtod(optarg, &end);
            if (end == optarg || *end || !(holdout >= 0 && holdout < 1)) {
                fprintf(stderr, "ultraplan fit: --holdout: expected a fraction in [0, 1), got \"%s\"\n", optarg);
                return 2;
            }
            break;
        case O_SEED:
            seed = strtoul(optarg, &end, 10);
            if (end == optarg || *end) {
                fprintf(stderr, "ultraplan fit: --seed: expected a whole number, got \"%s\"\n", optarg);
                return 2;
            }
            break;
        default:
            command_bad_option("fit", argv);
            return 2;
        }
    }
    if (gpu && profile) {
        fprintf(stderr, "ultraplan fit: --gpu and --profile exclude each other\n");
        return 2;
    }
    if (holdout > 0 && where_s) {
        fprintf(stderr, "ultraplan fit: --holdout and --holdout-where exclude each other\n");
        return 2;
    }
    if (optind >= argc) {
        fprintf(stderr, "ultraplan fit: expected a CSV file of measured runs (see --help)\n");
        return 2;
    }
    char err[512];
    FitParamId sel[FIT_PARAM_COUNT];
    int nsel;
    if (fit_parse_params(plist, sel, &nsel, err, sizeof err)) {
        fprintf(stderr, "ultraplan fit: --params: %s\n", err);
        return 2;
    }
    FitWhere where;
    if (where_s && fit_parse_where(where_s, &where)) {
        fprintf(stderr, "ultraplan fit: --holdout-where: expected FIELD OP VALUE such as gpus>=256 (fields: gpus tp pp "
                "dp mbs gbs hidden layers seq), got \"%s\"\n", where_s);
        return 2;
    }
    HwProfile base;
    if (profile ? profile_load_file(profile, &base, err, sizeof err)
                : profile_load_builtin(gpu ? gpu : runs_default_gpu(argv[optind]), &base, err, sizeof err)) {
        fprintf(stderr, "ultraplan fit: %s\n", err);
        return 2;
    }
    if (fit_check_params(&base, sel, nsel, err, sizeof err)) {
        fprintf(stderr, "ultraplan fit: %s\n", err);
        return 2;
    }
    if (out && util_check_writable(out, err, sizeof err) != 0) {   /* before the fit, not after */
        fprintf(stderr, "ultraplan fit: -o: %s\n", err);
        return 1;
    }
    RunSet set = {0};
    for (int i = optind; i < argc; i++)
        if (runs_read_csv(argv[i], &set, err, sizeof err)) {
            fprintf(stderr, "ultraplan fit: %s\n", err);
            runs_free(&set);
            return 1;
        }
    int rc = 1;
    bool *held = calloc((size_t)(set.n ? set.n : 1), sizeof *held);
    FitResult *res = malloc(sizeof *res);
    if (!held || !res) {
        fprintf(stderr, "ultraplan fit: out of memory\n");
        goto out;
    }
    if (where_s)
        for (int i = 0; i < set.n; i++)
            held[i] = fit_where_holds(&where, &set.rows[i]);
    else
        fit_holdout_random(set.n, holdout, seed, held);
    FitRequest rq = {.set = &set, .base = &base, .params = sel, .nparams = nsel, .held = held};
    if (fit_run(&rq, res, err, sizeof err)) {
        fprintf(stderr, "ultraplan fit: %s\n", err);
        goto out;
    }
    if (out && profile_write_json(&res->fitted, out, err, sizeof err)) {
        fprintf(stderr, "ultraplan fit: %s\n", err);
        goto out;
    }
    if (json) {
        if (print_json(&base, res, out, argv + optind, argc - optind)) {
            fprintf(stderr, "ultraplan fit: out of memory\n");
            goto out;
        }
    } else {
        print_text(&base, res, out);
    }
    rc = 0;
out:
    free(res);
    free(held);
    runs_free(&set);
    return rc;
}

const Command cmd_fit = {"fit", "fit a profile's efficiency and latency constants to measured runs (GSL)", fit_main};
