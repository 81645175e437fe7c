/* fit.c — least-squares fit of a profile's constants to measured runs (see fit.h). */
#include "fit.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_blas.h>
#include <gsl/gsl_errno.h>
#include <gsl/gsl_matrix.h>
#include <gsl/gsl_multifit_nlinear.h>
#include <gsl/gsl_vector.h>

/* ---- the constants -------------------------------------------------------------- */

typedef struct {
    FitParamDesc d;
    size_t off;          // offset of the double or EffCurve in HwProfile
} Param;

static const Param params[] = {
    [FIT_KERNEL_LAT] = {{"kernel_lat", FIT_SCALAR, "host seconds per kernel launch"}, offsetof(HwProfile, kernel_lat)},
    [FIT_COLL_LAT] = {{"coll_lat", FIT_SCALAR, "fixed seconds per collective call"}, offsetof(HwProfile, coll_lat)},
    [FIT_COLL_EFF] = {{"coll_eff", FIT_FRACTION, "fraction of link bandwidth collectives reach"},
                      offsetof(HwProfile, coll_eff)},
    [FIT_GEMM_EFF] = {{"gemm_eff", FIT_CURVE, "GEMM efficiency curve (scaled as a whole)"},
                      offsetof(HwProfile, gemm_eff)},
    [FIT_ATTN_EFF] = {{"attn_eff", FIT_CURVE, "attention-core efficiency curve (scaled)"},
                      offsetof(HwProfile, attn_eff)},
    [FIT_MEM_EFF] = {{"mem_eff", FIT_CURVE, "memory-bound efficiency curve (scaled)"}, offsetof(HwProfile, mem_eff)},
    [FIT_TP_OVERLAP] = {{"tp_overlap", FIT_FRACTION, "fraction of TP communication hidden"},
                        offsetof(HwProfile, tp_overlap)},
    [FIT_DP_OVERLAP] = {{"dp_overlap", FIT_FRACTION, "fraction of the backward hiding DP"},
                        offsetof(HwProfile, dp_overlap)},
};
_Static_assert(sizeof params / sizeof params[0] == FIT_PARAM_COUNT, "one row per constant");

const FitParamDesc *fit_param(FitParamId id) { return &params[id].d; }

static double *dbl(HwProfile *hw, FitParamId id) { return (double *)((char *)hw + params[id].off); }
static EffCurve *crv(HwProfile *hw, FitParamId id) { return (EffCurve *)((char *)hw + params[id].off); }

double fit_param_value(const HwProfile *hw, FitParamId id)
{
    return *(const double *)((const char *)hw + params[id].off);
}

const EffCurve *fit_param_curve(const HwProfile *hw, FitParamId id)
{
    return (const EffCurve *)((const char *)hw + params[id].off);
}

/* base with each chosen constant scaled by exp(x[i]) */
static void apply(const HwProfile *base, const FitParamId *sel, int n, const double *x, HwProfile *out)
{
    *out = *base;
    for (int i = 0; i < n; i++) {
        double f = exp(x[i]);
        if (params[sel[i]].d.kind == FIT_CURVE) {
            EffCurve *c = crv(out, sel[i]);
            for (int k = 0; k < c->n; k++)
                c->pt[k].eff = fmin(1.0, c->pt[k].eff * f);
        } else {
            double *v = dbl(out, sel[i]);
            *v *= f;
            if (params[sel[i]].d.kind == FIT_FRACTION)
                *v = fmin(1.0, *v);
        }
    }
}

int fit_parse_params(const char *list, FitParamId *ids, int *n, char *err, int errlen)
{
    char buf[256];
    snprintf(buf, sizeof buf, "%s", list);
    *n = 0;
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        int k = -1;
        for (int i = 0; i < FIT_PARAM_COUNT; i++)
            if (!strcmp(tok, params[i].d.name))
                k = i;
        if (k < 0) {
            int m = snprintf(err, errlen, "unknown constant \"%s\" (one of ", tok);
            for (int i = 0; i < FIT_PARAM_COUNT && m >= 0 && m < errlen; i++)
                m += snprintf(err + m, errlen - m, "%s%s", i ? ", " : "", params[i].d.name);
            if (m >= 0 && m < errlen)
                snprintf(err + m, errlen - m, ")");
            return -1;
        }
        for (int i = 0; i < *n; i++)
            if (ids[i] == (FitParamId)k) {
                snprintf(err, errlen, "\"%s\" is named twice", tok);
                return -1;
            }
        ids[(*n)++] = (FitParamId)k;
    }
    if (*n == 0) {
        snprintf(err, errlen, "expected a comma-separated list of constants");
        return -1;
    }
    return 0;
}

int fit_check_params(const HwProfile *base, const FitParamId *ids, int n, char *err, int errlen)
{
    for (int i = 0; i < n; i++)
        if (params[ids[i]].d.kind != FIT_CURVE && !(fit_param_value(base, ids[i]) > 0)) {
            snprintf(err, errlen, "%s is 0 in profile %s; a scale factor cannot move it (set a starting value in "
                     "the profile)", params[ids[i]].d.name, base->name);
            return -1;
        }
    return 0;
}

/* ---- which rows fit, which are held out ------------------------------------------ */

typedef enum { W_GPUS, W_TP, W_PP, W_DP, W_MBS, W_GBS, W_HIDDEN, W_LAYERS, W_SEQ, W_COUNT } WhereField;

static const char *const where_names[] = {"gpus", "tp", "pp", "dp", "mbs", "gbs", "hidden", "layers", "seq"};
_Static_assert(sizeof where_names / sizeof where_names[0] == W_COUNT, "one name per field");

static double where_value(const RunRow *r, WhereField f)
{
    switch (f) {
    case W_GPUS: return r->gpus;
    case W_TP: return r->layout.tp;
    case W_PP: return r->layout.pp;
    case W_DP: return r->layout.dp;
    case W_MBS: return r->layout.mbs;
    case W_GBS: return r->layout.gbs;
    case W_HIDDEN: return r->model.h;
    case W_LAYERS: return r->model.L;
    case W_SEQ: return r->model.s;
    case W_COUNT: break;
    }
    return 0;
}

int fit_parse_where(const char *s, FitWhere *w)
{
    static const char *const ops[] = {">=", "<=", "==", "!=", ">", "<", "="};
    for (size_t i = 0; i < sizeof ops / sizeof *ops; i++) {
        const char *at = strstr(s, ops[i]);
        if (!at)
            continue;
        size_t n = (size_t)(at - s);
        const char *num = at + strlen(ops[i]);
        char *end;
        double v = strtod(num, &end);
        if (end == num || *end)
            return -1;
        for (int f = 0; f < W_COUNT; f++)
            if (n > 0 && strlen(where_names[f]) == n && !strncmp(s, where_names[f], n)) {
                w->field = f;
                snprintf(w->op, sizeof w->op, "%s", ops[i]);
                w->value = v;
                return 0;
            }
        return -1;
    }
    return -1;
}

bool fit_where_holds(const FitWhere *w, const RunRow *r)
{
    double v = w->field >= 0 && w->field < W_COUNT ? where_value(r, (WhereField)w->field) : 0;
    if (!strcmp(w->op, ">=")) return v >= w->value;
    if (!strcmp(w->op, "<=")) return v <= w->value;
    if (!strcmp(w->op, ">")) return v > w->value;
    if (!strcmp(w->op, "<")) return v < w->value;
    if (!strcmp(w->op, "!=")) return v != w->value;
    return v == w->value;
}

void fit_holdout_random(int n, double fraction, unsigned long seed, bool *held)
{
    srand((unsigned)seed);
    for (int i = 0; i < n; i++)
        held[i] = fraction > 0 && rand() < fraction * ((double)RAND_MAX + 1);
}

/* ---- least squares ---------------------------------------------------------------- */

typedef struct {
    const RunSet *set;
    const int *rows;      // indices of the fit rows
    int nrows;
    const HwProfile *base;
    const FitParamId *sel;
    int nsel;
} FitData;

static int residuals(const gsl_vector *x, void *data, gsl_vector *f)
{
    FitData *d = data;
    double xs[FIT_PARAM_COUNT];
    for (int i = 0; i < d->nsel; i++)
        xs[i] = gsl_vector_get(x, i);
    HwProfile hw;
    apply(d->base, d->sel, d->nsel, xs, &hw);
    char err[256];
    for (int i = 0; i < d->nrows; i++) {
        const RunRow *r = &d->set->rows[d->rows[i]];
        double p;
        if (runs_predict(r, &hw, d->set->path, &p, NULL, err, sizeof err) || !(p > 0))
            return GSL_EDOM;
        gsl_vector_set(f, i, log(p / r->measured_s));
    }
    return GSL_SUCCESS;
}

/* APE statistics of some rows under a profile; a row that cannot be
 * predicted counts as 100 % off. */
static void errors(const RunSet *set, const int *rows, int n, const HwProfile *hw, ApeStats *st)
{
    double *ape = malloc((size_t)(n ? n : 1) * sizeof *ape);
    char err[256];
    if (!ape) {
        memset(st, 0, sizeof *st);
        return;
    }
    for (int i = 0; i < n; i++) {
        double p = 0;
        runs_predict(&set->rows[rows[i]], hw, set->path, &p, NULL, err, sizeof err);
        ape[i] = stats_ape(p, set->rows[rows[i]].measured_s);
    }
    stats_summarize(ape, n, st);
    free(ape);
}

/* What the solver found for the active constants: the log factors, their
 * standard errors and how strongly the fit rows' predicted times move with
 * each (the RMS of d ln(predicted) / d ln(factor) at the solution). */
typedef struct {
    double x[FIT_PARAM_COUNT], se[FIT_PARAM_COUNT], sens[FIT_PARAM_COUNT];
    int iters;
} Solution;

static int solve(FitData *d, Solution *res, char *err, int errlen)
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
                     params[d->sel[i]].d.name, exp(gsl_vector_get(w->x, i)));
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

/* ---- the fit ------------------------------------------------------------------------ */

/* Fit the active constants, then drop each one the fit rows do not
 * determine and fit the rest again: such a constant keeps its base value
 * rather than whatever the solver left it at (a curve run into its cap says
 * nothing about the GPU, and would be wrong for every run that does depend
 * on it). On return act[0..*nact) are the fitted constants and res their
 * fit; kept[id] says why each dropped one was kept. */
static int fit_until_determined(FitData *d, FitParamId *act, int *nact, const char **kept, Solution *res,
                                char *err, int errlen)
{
    for (;;) {
        d->sel = act;
        d->nsel = *nact;
        if (solve(d, res, err, errlen))
            return -1;
        int keep = 0;
        for (int i = 0; i < *nact; i++) {
            if (res->sens[i] >= FIT_SENS_MIN)
                act[keep++] = act[i];
            else if (params[act[i]].d.kind != FIT_SCALAR && res->x[i] > 1e-3)   // moved up to the cap, then stopped mattering
                kept[act[i]] = "ran into its cap of 1, where these runs stop depending on it";
            else
                kept[act[i]] = "these runs do not depend on it";
        }
        if (keep == *nact)   // res holds the fit of exactly these
            return 0;
        *nact = keep;
        if (keep == 0)
            return 0;
    }
}

int fit_run(const FitRequest *rq, FitResult *out, char *err, int errlen)
{
    const RunSet *set = rq->set;
    memset(out, 0, sizeof *out);
    if (rq->nparams < 1 || rq->nparams > FIT_PARAM_COUNT) {
        snprintf(err, errlen, "expected 1 to %d constants to fit, got %d", FIT_PARAM_COUNT, rq->nparams);
        return -1;
    }
    if (fit_check_params(rq->base, rq->params, rq->nparams, err, errlen))
        return -1;
    int *fit = malloc((size_t)(set->n ? set->n : 1) * sizeof *fit);
    int *held = malloc((size_t)(set->n ? set->n : 1) * sizeof *held);
    int nfit = 0, nheld = 0, rc = -1;
    if (!fit || !held) {
        snprintf(err, errlen, "out of memory");
        goto out;
    }
    for (int i = 0; i < set->n; i++) {
        if (rq->held && rq->held[i])
            held[nheld++] = i;
        else
            fit[nfit++] = i;
    }
    if (nfit < rq->nparams) {
        snprintf(err, errlen, "%d rows left to fit %d constants; hold out fewer", nfit, rq->nparams);
        goto out;
    }
    gsl_set_error_handler_off();
    FitParamId act[FIT_PARAM_COUNT];
    int nact = rq->nparams;
    const char *kept[FIT_PARAM_COUNT] = {0};   // by id: why that constant keeps its base value
    memcpy(act, rq->params, (size_t)nact * sizeof *act);
    Solution res = {0};
    FitData d = {set, fit, nfit, rq->base, act, nact};
    if (fit_until_determined(&d, act, &nact, kept, &res, err, errlen))
        goto out;
    if (nact == 0) {
        int m = snprintf(err, errlen, "none of the constants (");
        for (int i = 0; i < rq->nparams && m >= 0 && m < errlen; i++)
            m += snprintf(err + m, errlen - m, "%s%s", i ? "," : "", params[rq->params[i]].d.name);
        if (m >= 0 && m < errlen)
            snprintf(err + m, errlen - m, ") changes the predicted times of these runs; name others with --params");
        goto out;
    }
    apply(rq->base, act, nact, res.x, &out->fitted);
    snprintf(out->fitted.desc, sizeof out->fitted.desc, "%.90s (fitted)", rq->base->desc);
    out->n = rq->nparams;
    out->nfitted = nact;
    out->iters = res.iters;
    for (int i = 0; i < rq->nparams; i++) {
        FitOutcome *o = &out->c[i];
        *o = (FitOutcome){.id = rq->params[i], .fitted = false, .kept = kept[rq->params[i]], .factor = 1};
        for (int j = 0; j < nact; j++)
            if (act[j] == rq->params[i]) {
                double f = exp(res.x[j]);
                *o = (FitOutcome){.id = act[j], .fitted = true, .factor = f, .factor_se = f * res.se[j],
                                  .sensitivity = res.sens[j]};
            }
    }
    out->nfit = nfit;
    out->nheld = nheld;
    errors(set, fit, nfit, rq->base, &out->fit_before);
    errors(set, fit, nfit, &out->fitted, &out->fit_after);
    if (nheld) {
        errors(set, held, nheld, rq->base, &out->held_before);
        errors(set, held, nheld, &out->fitted, &out->held_after);
    }
    rc = 0;
out:
    free(fit);
    free(held);
    return rc;
}
