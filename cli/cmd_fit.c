/* cmd_fit.c — `ultraplan fit`: fit a profile's efficiency, overlap and
 * latency constants to measured runs by least squares on log error (GSL's
 * trust-region nonlinear least squares), and show the error on runs held
 * out of the fit.
 *
 * Each constant is fitted as a log-scale factor on its value in the base
 * profile, so a factor of 1 changes nothing and every value stays positive;
 * efficiencies are capped at 1. A constant the fit rows do not determine is
 * kept at its base value and the others refitted (fit_main).
 */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_blas.h>
#include <gsl/gsl_errno.h>
#include <gsl/gsl_matrix.h>
#include <gsl/gsl_multifit_nlinear.h>
#include <gsl/gsl_vector.h>

#include <cjson/cJSON.h>

#include "command.h"
#include "profile.h"
#include "validate_lib.h"

/* ---- the constants fit can move ---------------------------------------------- */

typedef enum { P_SCALAR, P_FRACTION, P_CURVE } ParamKind;

typedef struct {
    const char *name;    // the profile field
    ParamKind kind;
    size_t off;          // offset of the double or EffCurve in HwProfile
    const char *what;
} FitParam;

static const FitParam params[] = {
    {"kernel_lat", P_SCALAR, offsetof(HwProfile, kernel_lat), "host seconds per kernel launch"},
    {"coll_lat", P_SCALAR, offsetof(HwProfile, coll_lat), "fixed seconds per collective call"},
    {"coll_eff", P_FRACTION, offsetof(HwProfile, coll_eff), "fraction of link bandwidth collectives reach"},
    {"gemm_eff", P_CURVE, offsetof(HwProfile, gemm_eff), "GEMM efficiency curve (scaled as a whole)"},
    {"attn_eff", P_CURVE, offsetof(HwProfile, attn_eff), "attention-core efficiency curve (scaled)"},
    {"mem_eff", P_CURVE, offsetof(HwProfile, mem_eff), "memory-bound efficiency curve (scaled)"},
    {"tp_overlap", P_FRACTION, offsetof(HwProfile, tp_overlap), "fraction of TP communication hidden"},
    {"dp_overlap", P_FRACTION, offsetof(HwProfile, dp_overlap), "fraction of the backward hiding DP"},
};
#define N_PARAMS ((int)(sizeof params / sizeof params[0]))
/* coll_lat and coll_eff are left out by default: they come from nccl-tests
 * microbenchmarks (their _src), and fitting them to step times lets them
 * absorb unrelated residuals (docs/accuracy/NOTES.md step 7); name them in
 * --params to fit them anyway. */
#define DEFAULT_PARAMS "kernel_lat,gemm_eff,attn_eff,mem_eff"

static double *dbl(HwProfile *hw, const FitParam *p) { return (double *)((char *)hw + p->off); }
static EffCurve *crv(HwProfile *hw, const FitParam *p) { return (EffCurve *)((char *)hw + p->off); }

/* base with each chosen parameter scaled by exp(x[i]) */
static void apply(const HwProfile *base, const int *sel, int n, const double *x, HwProfile *out)
{
    *out = *base;
    for (int i = 0; i < n; i++) {
        const FitParam *p = &params[sel[i]];
        double f = exp(x[i]);
        if (p->kind == P_CURVE) {
            EffCurve *c = crv(out, p);
            for (int k = 0; k < c->n; k++)
                c->pt[k].eff = fmin(1.0, c->pt[k].eff * f);
        } else {
            double *v = dbl(out, p);
            *v *= f;
            if (p->kind == P_FRACTION)
                *v = fmin(1.0, *v);
        }
    }
}

/* What to print for a parameter's value. */
static void show(const HwProfile *hw, const FitParam *p, char *buf, int len)
{
    HwProfile h = *hw;
    if (p->kind == P_CURVE) {
        const EffCurve *c = crv(&h, p);
        int n = snprintf(buf, len, "[");
        for (int k = 0; k < c->n && n < len; k++)
            n += snprintf(buf + n, len - n, "%s%.3g", k ? " " : "", c->pt[k].eff);
        if (n < len)
            snprintf(buf + n, len - n, "]");
    } else {
        snprintf(buf, len, "%.4g", *dbl(&h, p));
    }
}

/* ---- which rows fit, which are held out -------------------------------------- */

typedef struct {
    const char *field;
    char op[3];
    double value;
} Where;

static int row_field(const ValRow *r, const char *f, double *v)
{
    if (!strcmp(f, "gpus")) *v = r->gpus;
    else if (!strcmp(f, "tp")) *v = r->layout.tp;
    else if (!strcmp(f, "pp")) *v = r->layout.pp;
    else if (!strcmp(f, "dp")) *v = r->layout.dp;
    else if (!strcmp(f, "mbs")) *v = r->layout.mbs;
    else if (!strcmp(f, "gbs")) *v = r->layout.gbs;
    else if (!strcmp(f, "hidden")) *v = r->model.h;
    else if (!strcmp(f, "layers")) *v = r->model.L;
    else if (!strcmp(f, "seq")) *v = r->model.s;
    else return -1;
    return 0;
}

static int parse_where(const char *s, Where *w, char *field, int flen)
{
    const char *ops[] = {">=", "<=", "==", "!=", ">", "<", "="};
    for (size_t i = 0; i < sizeof ops / sizeof *ops; i++) {
        const char *at = strstr(s, ops[i]);
        if (!at)
            continue;
        int n = (int)(at - s);
        if (n <= 0 || n >= flen)
            return -1;
        memcpy(field, s, n);
        field[n] = '\0';
        char *end;
        w->value = strtod(at + strlen(ops[i]), &end);
        if (end == at + strlen(ops[i]) || *end)
            return -1;
        snprintf(w->op, sizeof w->op, "%s", ops[i]);
        w->field = field;
        double dummy;
        ValRow r = {0};
        return row_field(&r, field, &dummy);
    }
    return -1;
}

static bool where_true(const Where *w, const ValRow *r)
{
    double v = 0;
    row_field(r, w->field, &v);
    if (!strcmp(w->op, ">=")) return v >= w->value;
    if (!strcmp(w->op, "<=")) return v <= w->value;
    if (!strcmp(w->op, ">")) return v > w->value;
    if (!strcmp(w->op, "<")) return v < w->value;
    if (!strcmp(w->op, "!=")) return v != w->value;
    return v == w->value;
}

/* ---- least squares -------------------------------------------------------------- */

typedef struct {
    const ValSet *set;
    const int *rows;      // indices of the fit rows
    int nrows;
    const HwProfile *base;
    const int *sel;
    int nsel;
} FitData;

static int residuals(const gsl_vector *x, void *data, gsl_vector *f)
{
    FitData *d = data;
    double xs[N_PARAMS];
    for (int i = 0; i < d->nsel; i++)
        xs[i] = gsl_vector_get(x, i);
    HwProfile hw;
    apply(d->base, d->sel, d->nsel, xs, &hw);
    char err[256];
    for (int i = 0; i < d->nrows; i++) {
        const ValRow *r = &d->set->rows[d->rows[i]];
        double p;
        if (val_predict(r, &hw, d->set->path, &p, NULL, err, sizeof err) || !(p > 0))
            return GSL_EDOM;
        gsl_vector_set(f, i, log(p / r->measured_s));
    }
    return GSL_SUCCESS;
}

static void errors(const ValSet *set, const int *rows, int n, const HwProfile *hw, ValStats *st)
{
    double *ape = malloc((size_t)(n ? n : 1) * sizeof *ape);
    char err[256];
    if (!ape) {
        memset(st, 0, sizeof *st);
        return;
    }
    for (int i = 0; i < n; i++) {
        double p = 0;
        val_predict(&set->rows[rows[i]], hw, set->path, &p, NULL, err, sizeof err);
        ape[i] = val_ape(p, set->rows[rows[i]].measured_s);
    }
    val_stats(ape, n, st);
    free(ape);
}

/* What the solver found for the active constants: the log factors, their
 * standard errors and how strongly the fit rows' predicted times move with
 * each (the RMS of d ln(predicted) / d ln(factor) at the solution). */
typedef struct {
    double x[N_PARAMS], se[N_PARAMS], sens[N_PARAMS];
    int iters;
} FitResult;

/* A constant whose factor moves the fit rows' predicted times by less than
 * this (RMS, per unit of ln factor) is not determined by them: a curve that
 * only ran into its cap of 1, or a term none of the rows exercises. */
#define SENS_MIN 1e-3

static int solve(FitData *d, FitResult *res, char *err, int errlen)
{
    const gsl_multifit_nlinear_type *T = gsl_multifit_nlinear_trust;
    gsl_multifit_nlinear_parameters fp = gsl_multifit_nlinear_default_parameters();
    gsl_multifit_nlinear_fdf fdf = {.f = residuals, .df = NULL, .fvv = NULL, .n = (size_t)d->nrows,
                                    .p = (size_t)d->nsel, .params = d};
    gsl_multifit_nlinear_workspace *w = gsl_multifit_nlinear_alloc(T, &fp, fdf.n, fdf.p);
    gsl_vector *x0 = gsl_vector_calloc(fdf.p);
    gsl_matrix *cov = gsl_matrix_alloc(fdf.p, fdf.p), *J = NULL;
    gsl_vector *fa = NULL, *fb = NULL, *xh = NULL;
    int rc = -1;
    if (!w || !x0 || !cov) {
        snprintf(err, errlen, "out of memory");
        goto out;
    }
    int info = 0;
    rc = gsl_multifit_nlinear_init(x0, &fdf, w);
    if (rc == GSL_SUCCESS)
        rc = gsl_multifit_nlinear_driver(100, 1e-6, 1e-6, 1e-8, NULL, NULL, &info, w);
    if (rc != GSL_SUCCESS && rc != GSL_EMAXITER) {
        snprintf(err, errlen, "the least-squares solver stopped: %s", gsl_strerror(rc));
        rc = -1;
        goto out;
    }
    /* The Jacobian at the solution by central differences a step of 1 % in
     * the factor wide: the model has kinks (caps at 1, max of compute and
     * memory time), and a wider step sees past one where the solver's own
     * forward difference may not. */
    J = gsl_matrix_alloc(fdf.n, fdf.p);
    fa = gsl_vector_alloc(fdf.n);
    fb = gsl_vector_alloc(fdf.n);
    xh = gsl_vector_alloc(fdf.p);
    if (!J || !fa || !fb || !xh) {
        snprintf(err, errlen, "out of memory");
        rc = -1;
        goto out;
    }
    const double h = 0.01;
    for (int i = 0; i < d->nsel; i++) {
        gsl_vector_memcpy(xh, w->x);
        gsl_vector_set(xh, i, gsl_vector_get(w->x, i) + h);
        int e = residuals(xh, d, fa);
        gsl_vector_set(xh, i, gsl_vector_get(w->x, i) - h);
        if (e || residuals(xh, d, fb)) {
            snprintf(err, errlen, "a run could not be predicted next to the solution (%s scaled by %.3g)",
                     params[d->sel[i]].name, exp(gsl_vector_get(w->x, i)));
            rc = -1;
            goto out;
        }
        for (int r = 0; r < d->nrows; r++)
            gsl_matrix_set(J, r, i, (gsl_vector_get(fa, r) - gsl_vector_get(fb, r)) / (2 * h));
    }
    gsl_multifit_nlinear_covar(J, 0.0, cov);
    double chi2;
    gsl_blas_ddot(gsl_multifit_nlinear_residual(w), gsl_multifit_nlinear_residual(w), &chi2);
    double s2 = d->nrows > d->nsel ? chi2 / (d->nrows - d->nsel) : 0;
    for (int i = 0; i < d->nsel; i++) {
        double ss = 0;
        for (int r = 0; r < d->nrows; r++)
            ss += gsl_matrix_get(J, r, i) * gsl_matrix_get(J, r, i);
        res->x[i] = gsl_vector_get(w->x, i);
        res->sens[i] = sqrt(ss / d->nrows);
        res->se[i] = sqrt(fmax(0, gsl_matrix_get(cov, i, i) * s2));
    }
    res->iters = (int)gsl_multifit_nlinear_niter(w);
    rc = 0;
out:
    gsl_vector_free(xh);
    gsl_vector_free(fb);
    gsl_vector_free(fa);
    gsl_matrix_free(J);
    gsl_matrix_free(cov);
    gsl_vector_free(x0);
    gsl_multifit_nlinear_free(w);
    return rc;
}

/* ---- the report ---------------------------------------------------------------- */

/* What became of one named constant: fitted (k = its index among the
 * active ones) or kept at its base value, with the reason. */
typedef struct {
    const FitParam *p;
    int k;
    const char *kept;
} Outcome;

typedef struct {
    const HwProfile *base, *fitted;
    const Outcome *oc;
    int nsel, nact;
    const FitResult *res;
    int nfit, nheld;
    const ValStats *st;   // fit before, after; held-out before, after
    const char *out;
} Summary;

static void print_text(const Summary *s)
{
    printf("fit of %d", s->nact);
    if (s->nact < s->nsel)
        printf(" of %d", s->nsel);
    printf(" constants of %s on %d runs (%d held out), %d iterations of GSL trust-region least squares\n\n",
           s->base->name, s->nfit, s->nheld, s->res->iters);
    printf("  %-12s %-40s %-40s %s\n", "constant", "before", "after", "factor (± 1 s.e.)");
    for (int i = 0; i < s->nsel; i++) {
        const Outcome *o = &s->oc[i];
        char b[128], a[128];
        show(s->base, o->p, b, sizeof b);
        show(s->fitted, o->p, a, sizeof a);
        if (o->k >= 0)
            printf("  %-12s %-40s %-40s %.3f ± %.3f\n", o->p->name, b, a, exp(s->res->x[o->k]),
                   exp(s->res->x[o->k]) * s->res->se[o->k]);
        else
            printf("  %-12s %-40s %-40s kept: %s\n", o->p->name, b, a, o->kept);
    }
    static const char *label[4] = {"fit rows, before", "fit rows, after", "held-out rows, before",
                                   "held-out rows, after"};
    printf("\n  %-28s %5s %10s %10s %10s %10s\n", "rows", "n", "mape%", "median%", "p90%", "max%");
    for (int i = 0; i < (s->nheld ? 4 : 2); i++)
        printf("  %-28s %5d %10.2f %10.2f %10.2f %10.2f\n", label[i], s->st[i].n, s->st[i].mape, s->st[i].median,
               s->st[i].p90, s->st[i].max);
    if (s->out)
        printf("\nwrote %s\n", s->out);
}

/* A constant's value: a number, or a curve as [[size, eff], ...]. */
static cJSON *value_json(const HwProfile *hw, const FitParam *p)
{
    HwProfile h = *hw;
    if (p->kind != P_CURVE)
        return cJSON_CreateNumber(*dbl(&h, p));
    const EffCurve *c = crv(&h, p);
    cJSON *a = cJSON_CreateArray();
    for (int k = 0; k < c->n; k++) {
        cJSON *pt = cJSON_CreateArray();
        cJSON_AddItemToArray(pt, cJSON_CreateNumber(c->pt[k].size));
        cJSON_AddItemToArray(pt, cJSON_CreateNumber(c->pt[k].eff));
        cJSON_AddItemToArray(a, pt);
    }
    return a;
}

static int print_json(const Summary *s, const char *const *files, int nfiles)
{
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "format", "ultraplan.fit/1");
    cJSON_AddStringToObject(root, "profile", s->base->name);
    cJSON *fa = cJSON_AddArrayToObject(root, "files");
    for (int i = 0; i < nfiles; i++)
        cJSON_AddItemToArray(fa, cJSON_CreateString(files[i]));
    cJSON_AddNumberToObject(root, "iterations", s->res->iters);
    cJSON *ca = cJSON_AddArrayToObject(root, "constants");
    for (int i = 0; i < s->nsel; i++) {
        const Outcome *o = &s->oc[i];
        cJSON *j = cJSON_CreateObject();
        cJSON_AddStringToObject(j, "name", o->p->name);
        cJSON_AddStringToObject(j, "what", o->p->what);
        cJSON_AddItemToObject(j, "before", value_json(s->base, o->p));
        cJSON_AddItemToObject(j, "after", value_json(s->fitted, o->p));
        if (o->k >= 0) {
            double f = exp(s->res->x[o->k]);
            cJSON_AddNumberToObject(j, "factor", f);
            cJSON_AddNumberToObject(j, "factor_se", f * s->res->se[o->k]);
            cJSON_AddNumberToObject(j, "sensitivity", s->res->sens[o->k]);
            cJSON_AddNullToObject(j, "kept");
        } else {
            cJSON_AddNumberToObject(j, "factor", 1);
            cJSON_AddNullToObject(j, "factor_se");
            cJSON_AddNullToObject(j, "sensitivity");
            cJSON_AddStringToObject(j, "kept", o->kept);
        }
        cJSON_AddItemToArray(ca, j);
    }
    cJSON *fr = cJSON_AddObjectToObject(root, "fit_rows");
    cJSON_AddItemToObject(fr, "before", val_stats_json(&s->st[0]));
    cJSON_AddItemToObject(fr, "after", val_stats_json(&s->st[1]));
    if (s->nheld) {
        cJSON *hr = cJSON_AddObjectToObject(root, "held_out_rows");
        cJSON_AddItemToObject(hr, "before", val_stats_json(&s->st[2]));
        cJSON_AddItemToObject(hr, "after", val_stats_json(&s->st[3]));
    } else {
        cJSON_AddNullToObject(root, "held_out_rows");
    }
    if (s->out)
        cJSON_AddStringToObject(root, "output", s->out);
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
        "usage: ultraplan fit FILE.csv [FILE.csv ...] (--profile base.json | --gpu NAME) [-o fitted.json]\n"
        "                     [--params a,b,...] [--holdout FRACTION | --holdout-where EXPR] [--seed N] [--json]\n\n"
        "Fits a profile's constants to measured runs (the CSV formats of `ultraplan validate`) by\n"
        "least squares on log(predicted/measured), with GSL's trust-region solver. Each constant is\n"
        "scaled by a fitted factor; curves are scaled as a whole and capped at 1. Prints the constants\n"
        "before and after, each factor with its standard error, and the error on the fit rows and on\n"
        "the held-out rows, so you can see whether the fit generalises. A constant the fit rows do not\n"
        "determine (their predicted times move by under 0.1 %% per unit of log factor, e.g. a curve\n"
        "pushed into its cap of 1) keeps its base value, is named as kept, and the rest are fitted\n"
        "again without it.\n\n"
        "  --params LIST         constants to fit (default " DEFAULT_PARAMS ");\n"
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

static int pick_params(const char *list, int *sel, int *n)
{
    char buf[256];
    snprintf(buf, sizeof buf, "%s", list);
    *n = 0;
    for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
        int k = -1;
        for (int i = 0; i < N_PARAMS; i++)
            if (!strcmp(tok, params[i].name))
                k = i;
        if (k < 0) {
            fprintf(stderr, "ultraplan fit: --params: unknown constant \"%s\" (one of kernel_lat, coll_lat, coll_eff, "
                    "gemm_eff, attn_eff, mem_eff, tp_overlap, dp_overlap)\n", tok);
            return -1;
        }
        for (int i = 0; i < *n; i++)
            if (sel[i] == k) {
                fprintf(stderr, "ultraplan fit: --params: \"%s\" is named twice\n", tok);
                return -1;
            }
        sel[(*n)++] = k;
    }
    if (*n == 0) {
        fprintf(stderr, "ultraplan fit: --params: expected a comma-separated list of constants\n");
        return -1;
    }
    return 0;
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
    const char *gpu = NULL, *profile = NULL, *plist = DEFAULT_PARAMS, *out = NULL, *where_s = NULL;
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
    int sel[N_PARAMS], nsel;
    if (pick_params(plist, sel, &nsel))
        return 2;
    Where where = {0};
    char wfield[32];
    if (where_s && parse_where(where_s, &where, wfield, sizeof wfield)) {
        fprintf(stderr, "ultraplan fit: --holdout-where: expected FIELD OP VALUE such as gpus>=256 (fields: gpus tp pp "
                "dp mbs gbs hidden layers seq), got \"%s\"\n", where_s);
        return 2;
    }
    char err[512];
    HwProfile base;
    if (profile ? profile_load_file(profile, &base, err, sizeof err)
                : profile_load_builtin(gpu ? gpu : "a100-80g", &base, err, sizeof err)) {
        fprintf(stderr, "ultraplan fit: %s\n", err);
        return 2;
    }
    for (int i = 0; i < nsel; i++)
        if (params[sel[i]].kind != P_CURVE && !(*dbl(&base, &params[sel[i]]) > 0)) {
            fprintf(stderr, "ultraplan fit: %s is 0 in profile %s; a scale factor cannot move it (set a starting "
                    "value in the profile)\n", params[sel[i]].name, base.name);
            return 2;
        }
    ValSet set = {0};
    for (int i = optind; i < argc; i++)
        if (val_read_csv(argv[i], &set, err, sizeof err)) {
            fprintf(stderr, "ultraplan fit: %s\n", err);
            val_free(&set);
            return 1;
        }
    int *fit = malloc((size_t)set.n * sizeof *fit), *held = malloc((size_t)set.n * sizeof *held);
    int nfit = 0, nheld = 0, rc = 1;
    if (!fit || !held) {
        fprintf(stderr, "ultraplan fit: out of memory\n");
        goto out;
    }
    srand((unsigned)seed);
    for (int i = 0; i < set.n; i++) {
        bool h = where_s ? where_true(&where, &set.rows[i]) : holdout > 0 && rand() < holdout * ((double)RAND_MAX + 1);
        if (h)
            held[nheld++] = i;
        else
            fit[nfit++] = i;
    }
    if (nfit < nsel) {
        fprintf(stderr, "ultraplan fit: %d rows left to fit %d constants; hold out fewer\n", nfit, nsel);
        goto out;
    }
    /* Fit, then drop each constant the fit rows do not determine (it moves
     * their times by less than SENS_MIN at the solution) and fit the rest
     * again: such a constant keeps its base value rather than whatever the
     * solver left it at (a curve run into its cap says nothing about the
     * GPU, and would be wrong for every run that does depend on it). */
    gsl_set_error_handler_off();
    int act[N_PARAMS], nact = nsel;
    const char *kept[N_PARAMS] = {0};   // by params[] index: why that constant keeps its base value
    memcpy(act, sel, sizeof act);
    FitResult res = {0};
    for (;;) {
        FitData d = {&set, fit, nfit, &base, act, nact};
        if (solve(&d, &res, err, sizeof err)) {
            fprintf(stderr, "ultraplan fit: %s\n", err);
            goto out;
        }
        int keep = 0;
        for (int i = 0; i < nact; i++) {
            if (res.sens[i] >= SENS_MIN)
                act[keep++] = act[i];
            else if (params[act[i]].kind != P_SCALAR && res.x[i] > 1e-3)   // moved up to the cap, then stopped mattering
                kept[act[i]] = "ran into its cap of 1, where these runs stop depending on it";
            else
                kept[act[i]] = "these runs do not depend on it";
        }
        if (keep == nact)   // res holds the fit of exactly these
            break;
        nact = keep;
        if (nact == 0) {
            fprintf(stderr, "ultraplan fit: none of the constants (%s) changes the predicted times of these runs; "
                    "name others with --params\n", plist);
            goto out;
        }
    }
    HwProfile fitted;
    apply(&base, act, nact, res.x, &fitted);
    Outcome oc[N_PARAMS];
    for (int i = 0; i < nsel; i++) {
        oc[i] = (Outcome){.p = &params[sel[i]], .k = -1, .kept = kept[sel[i]]};
        for (int j = 0; j < nact; j++)
            if (act[j] == sel[i])
                oc[i].k = j;
    }
    ValStats st[4] = {0};   // fit rows before, after; held-out rows before, after
    errors(&set, fit, nfit, &base, &st[0]);
    errors(&set, fit, nfit, &fitted, &st[1]);
    if (nheld) {
        errors(&set, held, nheld, &base, &st[2]);
        errors(&set, held, nheld, &fitted, &st[3]);
    }
    if (out) {
        snprintf(fitted.desc, sizeof fitted.desc, "%.90s (fitted)", base.desc);
        if (profile_write_json(&fitted, out, err, sizeof err)) {
            fprintf(stderr, "ultraplan fit: %s\n", err);
            goto out;
        }
    }
    Summary sum = {&base, &fitted, oc, nsel, nact, &res, nfit, nheld, st, out};
    if (json) {
        if (print_json(&sum, (const char *const *)argv + optind, argc - optind)) {
            fprintf(stderr, "ultraplan fit: out of memory\n");
            goto out;
        }
    } else {
        print_text(&sum);
    }
    rc = 0;
out:
    free(fit);
    free(held);
    val_free(&set);
    return rc;
}

const Command cmd_fit = {"fit", "fit a profile's efficiency and latency constants to measured runs (GSL)", fit_main};
