/* band.h — the error band of a prediction: an 80 % interval around a
 * predicted step time (and the MFU and tokens/s that follow from it), made
 * from the validation residuals of the measured runs nearest to it.
 *
 * The residual table (profiles/bands.csv, embedded at build time) is what
 * `validate --bands-out` writes for every row of the shipped corpus and
 * scripts/gen-bands.sh regenerates: per measured run its source file, GPU
 * profile, software stack (from the generator's file list), which parallel
 * dimensions it uses, its size, measured and predicted step. Nothing here is
 * hand-set: a change to the cost model changes the residuals when the table
 * is regenerated (tests/e2e_band.sh fails until it is).
 *
 * Residual of a run: r = measured / predicted − 1 (how much slower it ran
 * than predicted; it is also the signed error of the predicted MFU). The
 * band of a prediction p: the 10th and 90th percentiles q10, q90 of the
 * band's sample (below) give step [p·(1 + q10), p·(1 + q90)], MFU and
 * tokens/s [x / (1 + q90), x / (1 + q10)].
 *
 * The sample (band_sample): a run on the user's cluster errs by that
 * cluster's bias plus its own scatter about it. The nearest runs come from
 * F files (clusters, stacks); each file f gives a bias b_f, the mean
 * residual of its selected runs, and a scatter S_f, its runs' residuals less
 * their median read at BAND_SCATTER evenly spaced ranks (so a file of 1,440
 * runs weighs as one of 3). The sample is every b_f + s for s in every S_g:
 * F · F · BAND_SCATTER values. Before (docs/accuracy/NOTES.md step 33) the
 * percentiles were of the selected runs' residuals alone: two runs a file,
 * nearest in shape, under-sample a cluster's own scatter, and the held-out
 * vTrain single-node runs (82 % of the table) fell below the band.
 *
 * Nearest (band_select): runs ordered by, in turn, (0) the model's kind:
 * dense runs for a dense prediction and mixture-of-experts runs for an MoE
 * one, before any of the other kind (their errors are of another family);
 * (1) GPU: the same profile
 * name, then the same generation (Ampere, Hopper, Blackwell, Blackwell
 * Ultra, read off the name), then any; (2) the stack: the same or unknown on
 * either side, then another; (3) parallel dimensions: how many of tp > 1,
 * pp > 1, dp > 1, cp > 1, ep > 1 and the ZeRO class (0, 1/distributed
 * optimizer, 2, 3) differ; (4) size: |log10| of the parameter ratio; in
 * that order the first k (BAND_K), taking at most BAND_PER_SOURCE from one
 * source file while others remain (then the nearest of the rest), so a band
 * spans at least eight files (clusters and stacks) where the table has them: the
 * user's cluster is none of them, and the stacks differ by more than the
 * runs of one stack do (docs/accuracy/NOTES.md steps 21 and 26 chose k = 16
 * and 2 a file; step 33 kept them). Percentiles are Hyndman and Fan's type 6
 * (position p·(n + 1), linear between order statistics, clamped to the
 * extremes) of the sample.
 *
 * Not here: printing (cli/), the residuals' computation (validate's
 * prediction of each row, calib/runs.h). No I/O but band_table_builtin's
 * parse of the embedded text; pure arithmetic otherwise.
 */
#ifndef ULTRAPLAN_CALIB_BAND_H
#define ULTRAPLAN_CALIB_BAND_H

#include <stdio.h>

#include "cost.h"

#define BAND_K 16            // runs per band (fewer only when the table has fewer)
#define BAND_PER_SOURCE 2     // of them at most this many from one source file (then the nearest of the rest)
#define BAND_SCATTER 20      // ranks a file's scatter is read at
#define BAND_LO_PCT 10.0     // the band's percentiles of signed error
#define BAND_HI_PCT 90.0

typedef struct {
    char source[48];         // the corpus file's base name ("h100_published.csv")
    char gpu[48];            // the profile it was predicted with ("h100-sxm")
    char stack[32];          // software stack, "" = not known
    int line;                // line in the source file
    int gpus, tp, pp, dp, cp, ep;
    int zero;                // 0, 1 (ZeRO-1 or distributed optimizer), 2, 3
    int moe;                 // 1: a mixture-of-experts model (its own family of residuals)
    double params_b;         // billions of parameters (as the model counts them)
    int seq;
    double measured_s, predicted_s;
} BandRun;

typedef struct {
    BandRun *r;
    int n, cap;
} BandTable;

/* What the nearest-run rule reads of a prediction. */
typedef struct {
    char gpu[48];
    char stack[32];          // "" = not known (matches every stack)
    int tp, pp, dp, cp, ep, zero;
    int moe;                 // a mixture of experts: MoE runs are nearer than any dense one, and the reverse
    double params_b;
} BandQuery;

typedef struct {
    int runs;                // residuals the band was made from (0: no band)
    double q_lo, q_hi;       // percentiles of r = measured/predicted − 1
    double step_lo, step_hi; // seconds
    double mfu_lo, mfu_hi;
    double tok_lo, tok_hi;   // tokens/s
    int same_gpu, same_gen;  // of the runs: predicted on the same profile / generation
    char sources[8 * (48 + 16)];   // "vtrain/multi_node.csv 9, a100_published.csv 3": up to 8 source names whole
    char rule[512];          // the rule in words, for --json's band.rule
} Band;

/* r of one run: measured / predicted − 1. */
double band_residual(const BandRun *r);
/* The ZeRO class of an optimizer sharding (distributed optimizer = 1). */
int band_zero_class(OptimShard opt);
/* "ampere", "hopper", "blackwell", "blackwell-ultra", or the name itself. */
const char *band_generation(const char *gpu, char *buf, int len);
/* Query of a layout predicted on a profile. */
void band_query(const ModelSpec *m, const HwProfile *hw, const Layout *lo, BandQuery *q);

/* CSV of the table: header, rows. Columns: source,line,gpu,stack,gpus,tp,pp,
 * dp,cp,ep,zero,params_b,seq,measured_ms,predicted_ms,err_step_pct,err_mfu_pct
 * (the last two: 100·(pred/meas − 1) and 100·r, for people; the reader
 * recomputes them). Lines starting with '#' and blank lines are skipped. */
void band_write_header(FILE *f);
void band_write_row(FILE *f, const BandRun *r);
/* The same into a growing string (validate builds its file in memory and
 * writes it atomically): appends; 0 ok, -1 out of memory. */
int band_append_header(char **buf, size_t *len, size_t *cap);
int band_append_row(char **buf, size_t *len, size_t *cap, const BandRun *r);
/* Parse a table from text; origin names it in errors. 0, or -1 with
 * "ORIGIN:LINE: ..." in err. Appends to t. */
int band_table_parse(const char *text, const char *origin, BandTable *t, char *err, int errlen);
int band_table_add(BandTable *t, const BandRun *r);
void band_table_free(BandTable *t);
/* The shipped table (parsed once, kept for the process); NULL only when the
 * embedded text does not parse (a build error: tests/test_band checks it). */
const BandTable *band_table_builtin(void);

/* Type-6 percentile (pct in 0..100) of v[0..n-1], which it sorts. */
double band_percentile(double *v, int n, double pct);

/* Indices of the nearest runs into idx (t->n entries), skipping runs of
 * source `skip_source` (NULL: none) and the run at index skip_index (−1:
 * none); returns how many were selected (min(k, eligible)), -1 out of memory. */
int band_select(const BandTable *t, const BandQuery *q, int k, const char *skip_source, int skip_index, int *idx);
/* The band of a prediction (step seconds, MFU, tokens/s) from table t;
 * b->runs = 0 when no run is eligible. 0 ok, -1 out of memory. */
int band_of(const BandTable *t, const BandQuery *q, int k, const char *skip_source, int skip_index,
            double step_s, double mfu, double tokens_per_s, Band *b);
/* The band of a Cost from the shipped table (k = BAND_K). The last query's
 * runs and percentiles are kept (per thread) and reused while the query
 * (GPU, stack, parallel dims, ZeRO class, kind, size) is unchanged: the
 * answer is the same, only the selection and sort are skipped. */
int band_of_cost(const ModelSpec *m, const HwProfile *hw, const Layout *lo, const Cost *c, Band *b);
/* The same, always computed afresh (tests compare the two). */
int band_of_cost_uncached(const ModelSpec *m, const HwProfile *hw, const Layout *lo, const Cost *c, Band *b);
/* How many band_of_cost calls of this thread reused the kept answer. */
long band_cache_hits(void);

/* Calibration: for every run, is its measured step inside the band made
 * without it? Leave-one-source-out (by_source: the runs of its own file are
 * left out) or leave-one-run-out. Per source (in order of first appearance)
 * and overall. */
typedef struct {
    char source[48];
    int n, inside, below, above;   // below: ran faster than the band's low end
} BandCoverage;
/* Returns the number of sources (into cov[0..max-1]; more are counted only
 * in *all), or -1 when out of memory. */
int band_coverage(const BandTable *t, int k, bool by_source, BandCoverage *cov, int max, BandCoverage *all);

#endif
