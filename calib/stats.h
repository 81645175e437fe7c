/* stats.h — how far predictions are from measured runs: absolute percentage
 * errors and their summary, Spearman rank correlation, the regret of picking
 * the layout predicted fastest, and the same per group of runs (by GPU
 * count, model, parallel dimensions, and the two ranking groupings).
 *
 * Pure arithmetic over arrays and a RunSet (calib/runs.h); `validate` and
 * `fit` print what comes back. All errors are in percent. Also the number
 * text validate prints (cJSON's and printf's, byte for byte, faster).
 */
#ifndef ULTRAPLAN_CALIB_STATS_H
#define ULTRAPLAN_CALIB_STATS_H

#include <cjson/cJSON.h>

#include "runs.h"

typedef struct {
    int n;
    double mape;     // mean absolute percentage error
    double median;   // median APE
    double p90;      // 90th percentile APE (linear interpolation between order statistics)
    double max;      // worst APE
} ApeStats;

double stats_ape(double pred, double meas);                     // 100·|pred − meas|/meas; 0 when meas <= 0
void stats_summarize(const double *ape, int n, ApeStats *out);  // n = 0 gives all zeros
/* {n, mape, median_ape, p90_ape, max_ape}, percentages as in validate --json. */
cJSON *stats_json(const ApeStats *s);
/* Spearman rank correlation (average ranks for ties; O(n log n)); 0 when n < 2 or a side is constant. */
double stats_spearman(const double *x, const double *y, int n);
/* Regret in percent: measured time of the row predicted fastest over the
 * fastest measured, minus one (ties in prediction: the first). */
double stats_regret(const double *pred, const double *meas, int n);

/* Grouping keys for reports. The two ranking groupings: model+gpus is
 * issue 5's "runs of the same model on the same GPU count" (every global
 * batch: ranked by time per sequence, since iteration times of different
 * batches do not compare); model+gpus+gbs fixes the global batch too, the
 * planner's own question. */
typedef enum {
    STATS_BY_GPUS, STATS_BY_MODEL, STATS_BY_PARALLEL, STATS_BY_MODEL_GPUS, STATS_BY_MODEL_GPUS_GBS,
    STATS_GROUP_COUNT
} StatsGroupKind;
/* What grouping and ranking read of a row (80 bytes where a RunRow has 3 KB:
 * `validate` keeps these for a million rows). */
typedef struct {
    int gpus, h, L, a, s;          // GPUs; model hidden, layers, heads, sequence
    int dp, tp, pp, cp, gbs;       // layout
    double params_b;               // 0 = not given
    double measured_s;             // seconds per iteration
} StatsRow;
void stats_row(const RunRow *r, StatsRow *out);
/* A key naming the row's group of this kind ("64 GPUs", "h3072 L30 a32 s2048", "tp", ...). */
void stats_group_key(const RunRow *r, StatsGroupKind k, char *buf, int len);
void stats_row_key(const StatsRow *r, StatsGroupKind k, char *buf, int len);
/* "gpus", "model", "parallel", "model+gpus", "model+gpus+gbs". */
const char *stats_group_kind_name(StatsGroupKind k);

typedef struct {
    StatsGroupKind kind;
    char key[96];        // the longest key, model+gpus+gbs with every field at its limit, is 80 bytes
    ApeStats st;         // APE statistics of the group's rows
    double spearman;     // rank correlation of predicted and measured time per sequence
    double regret;       // percent, see stats_regret, on time per sequence (= iteration time at one batch)
} StatsGroup;

/* Groups of one kind in order of first appearance, with their statistics;
 * pred[i] belongs to set->rows[i]. Returns the count (malloc'd in *out,
 * caller frees) or -1 when out of memory. */
int stats_groups(const RunSet *set, const double *pred, StatsGroupKind kind, StatsGroup **out);
/* The same over compact rows (pred[i] belongs to rows[i]); O(n) expected:
 * a hash table finds a row's group, a counting sort gathers the groups. */
int stats_groups_rows(const StatsRow *rows, int n, const double *pred, StatsGroupKind kind, StatsGroup **out);
/* A group without its key, 64 bytes where a StatsGroup has 160 (validate
 * keeps five groupings of a million rows): the key is stats_row_key of its
 * first row. stats_groups_compact is stats_groups_rows giving these. */
typedef struct {
    int first;           // index of the group's first row
    ApeStats st;
    double spearman, regret;
} StatsGroupStats;
int stats_groups_compact(const StatsRow *rows, int n, const double *pred, StatsGroupKind kind,
                         StatsGroupStats **out);


/* Number text for printing millions of numbers, faster than stdio and the
 * same bytes (exact digits, rounded half to even, as glibc's printf).
 * stats_fmt_fixed: printf("%.*f", prec, d) into buf of len bytes (prec 0..9
 * by the fast path; any other value through snprintf); returns the length.
 * stats_json_number: what cJSON 1.7 prints for a number (cJSON_Print and
 * cJSON_PrintUnformatted alike): "null" for NaN and infinities, "%d" when d
 * is an int (from cJSON 1.7.16; 1.7.15 prints -0 as "-0", the rest alike),
 * else "%1.15g" when reading that back gives d within DBL_EPSILON relative,
 * else "%1.17g"; buf holds 32 bytes; returns the length. */
int stats_fmt_fixed(double d, int prec, char *buf, int len);
int stats_json_number(double d, char *buf);

#endif
