/* fit.h — fit a profile's efficiency, overlap and latency constants to
 * measured runs: nonlinear least squares on log(predicted/measured) (GSL's
 * trust-region solver), with the error on the fit rows and on rows held out.
 *
 * Each constant is fitted as a log-scale factor on its value in the base
 * profile, so a factor of 1 changes nothing and every value stays positive;
 * efficiency curves are scaled as a whole and capped at 1, fractions too. A
 * constant the fit rows do not determine (their predicted times move by
 * less than FIT_SENS_MIN per unit of ln factor at the solution: a curve run
 * into its cap, or a term none of the rows exercises) keeps its base value,
 * is reported as kept with the reason, and the rest are fitted again.
 *
 * Nothing here prints or exits; errors fill err. fit_run switches GSL's
 * abort-on-error handler off (gsl_set_error_handler_off) and
 * fit_holdout_random reseeds rand().
 */
#ifndef ULTRAPLAN_CALIB_FIT_H
#define ULTRAPLAN_CALIB_FIT_H

#include <stdbool.h>

#include "hw.h"
#include "runs.h"
#include "stats.h"

/* The constants fit can move, in the order of --help. */
typedef enum {
    FIT_KERNEL_LAT, FIT_COLL_LAT, FIT_COLL_EFF, FIT_GEMM_EFF, FIT_ATTN_EFF, FIT_MEM_EFF, FIT_TP_OVERLAP,
    FIT_DP_OVERLAP, FIT_PARAM_COUNT
} FitParamId;

typedef enum {
    FIT_SCALAR,     // a positive number (seconds)
    FIT_FRACTION,   // a number capped at 1
    FIT_CURVE,      // an EffCurve, every point scaled, each capped at 1
    FIT_KIND_COUNT
} FitParamKind;

typedef struct {
    const char *name;    // the profile field ("gemm_eff")
    FitParamKind kind;
    const char *what;    // one line on what it is
} FitParamDesc;

/* coll_lat and coll_eff are left out by default: they come from nccl-tests
 * microbenchmarks (their _src), and fitting them to step times lets them
 * absorb unrelated residuals (docs/accuracy/NOTES.md step 7). */
#define FIT_DEFAULT_PARAMS "kernel_lat,gemm_eff,attn_eff,mem_eff"

/* A constant moving the fit rows' predicted times by less than this (RMS of
 * d ln t / d ln factor at the solution) is not determined by them. */
#define FIT_SENS_MIN 1e-3

const FitParamDesc *fit_param(FitParamId id);
/* The value of a FIT_SCALAR or FIT_FRACTION constant in hw. */
double fit_param_value(const HwProfile *hw, FitParamId id);
/* The curve of a FIT_CURVE constant in hw. */
const EffCurve *fit_param_curve(const HwProfile *hw, FitParamId id);

/* "a,b,c" into ids (at most FIT_PARAM_COUNT, each once). 0 ok, -1 with err
 * ("unknown constant \"x\" (one of ...)", "\"x\" is named twice", or the
 * list is empty). */
int fit_parse_params(const char *list, FitParamId *ids, int *n, char *err, int errlen);
/* Whether a scale factor can move each constant in base (a scalar at 0
 * cannot). 0 ok, -1 with err naming the constant and the profile. */
int fit_check_params(const HwProfile *base, const FitParamId *ids, int n, char *err, int errlen);

/* Rows held out of the fit by a condition FIELD OP VALUE on a row, e.g.
 * gpus>=256. Fields: gpus tp pp dp mbs gbs hidden layers seq; ops >= <= ==
 * != > < = (= is ==). */
typedef struct {
    int field;       // index into the fields above
    char op[3];
    double value;
} FitWhere;

/* 0 ok, -1 when s is not FIELD OP VALUE with a known field and a number. */
int fit_parse_where(const char *s, FitWhere *w);
bool fit_where_holds(const FitWhere *w, const RunRow *r);
/* held[i] for n rows: each held out with probability `fraction`, from
 * srand(seed) and rand() (so a seed gives the same rows on one C library). */
void fit_holdout_random(int n, double fraction, unsigned long seed, bool *held);

typedef struct {
    const RunSet *set;          // the measured runs
    const HwProfile *base;      // the profile whose constants are scaled
    const FitParamId *params;   // the constants to fit
    int nparams;
    const bool *held;           // per row of set: held out of the fit; NULL = none
} FitRequest;

/* What became of one requested constant. */
typedef struct {
    FitParamId id;
    bool fitted;           // false: kept at its base value
    const char *kept;      // why it was kept (a static sentence); NULL when fitted
    double factor;         // fitted scale factor; 1 when kept
    double factor_se;      // one standard error of factor; 0 when kept
    double sensitivity;    // RMS d ln(predicted) / d ln(factor) over the fit rows; 0 when kept
} FitOutcome;

/* Everything the reports print. */
typedef struct {
    HwProfile fitted;                   // base with the factors applied; desc says "(fitted)"
    FitOutcome c[FIT_PARAM_COUNT];      // in request order
    int n;                              // constants requested
    int nfitted;                        // of them fitted (the others kept)
    int iters;                          // solver iterations of the final fit
    int nfit, nheld;                    // rows fitted, held out
    ApeStats fit_before, fit_after;     // APE of the fit rows under base and fitted
    ApeStats held_before, held_after;   // same for the held-out rows (n = 0 when none)
} FitResult;

/* Fit, drop the undetermined constants, fit again until every remaining one
 * is determined. 0 ok, -1 with err: fewer fit rows than constants, a run
 * that cannot be predicted near the solution, the solver failing, or no
 * constant that the rows depend on. */
int fit_run(const FitRequest *rq, FitResult *out, char *err, int errlen);

#endif
