/* validate_lib.h — measured training runs as the cost model sees them:
 * reading them from CSV, predicting each one, and the statistics that say
 * how far the predictions are (errors, rank correlation, regret).
 *
 * Shared by `validate`, `fit` and their tests. Nothing here prints or exits;
 * user mistakes come back as -1 with one line in err naming the file, the
 * line and the column.
 *
 * Two CSV formats, told apart by their header row (the first non-empty line):
 *
 *  - vTrain (the CSVs in ../shared/validation/vtrain/): columns "# GPUs", "global
 *    batch", "micro batch", "hidden size", "attention heads", "# layers",
 *    "sequence length", "tensor parallelism", "data parallelism", "pipeline
 *    parallelism", "iteration time (ms)" and optionally "Parameters
 *    (billion)". The settings vTrain's authors used for all runs become the
 *    row's defaults: GPT-2 decoder (LayerNorm, GELU 4h MLP, learned
 *    positions, biases, tied head, dropout), vocab 50257, full recompute,
 *    unfused attention, fp16 with fp16 gradients, plain DP, no SP, no
 *    gradient bucketing (the DP all-reduce follows the backward: dp_overlap
 *    0), 8 GPUs per node, inter-node 800 Gb/s per node (12.5 GB/s per GPU).
 *
 *  - ultraplan (header contains "time_ms"): named columns in any order.
 *    Required: layers, hidden, heads, seq, tp, pp, dp, mbs, gbs, and time_ms
 *    (ms per step) or tokens_per_s_gpu (as published tables print it; the
 *    step is gbs·seq / (tokens_per_s_gpu · GPUs)).
 *    Optional (default as `ultraplan predict`): gpus, params_b, kv_heads,
 *    head_dim, ffn, vocab (50257), mlp (gelu|swiglu), norm, pos, bias, tied,
 *    dropout (0|1), sp (0|1), flash (0|1), recompute (none|selective|full),
 *    zero (0..3|distopt), precision (bf16...), grad_fp32 (0|1), vp, cp,
 *    gpus_per_node, intra_bw_gbs and inter_bw_gbs (GB/s per GPU, one
 *    direction: the cluster the run was measured on), dp_overlap (0..1; 0
 *    when gradients are reduced after the backward, unbucketed), tp_overlap
 *    (0..1; the fraction of TP communication hidden, e.g. 1 with Megatron's
 *    --tp-comm-overlap / NeMo's userbuffers), label.
 *
 * In both, lines starting with '#' after the header and blank lines are
 * skipped; a UTF-8 byte-order mark, CRLF line ends, spaces around fields and
 * one pair of double quotes around a field are accepted (spreadsheet
 * exports); a field cannot contain a comma.
 */
#ifndef ULTRAPLAN_CLI_VALIDATE_LIB_H
#define ULTRAPLAN_CLI_VALIDATE_LIB_H

#include <stdbool.h>

#include <cjson/cJSON.h>

#include "cost.h"

typedef enum { VAL_FMT_VTRAIN, VAL_FMT_ULTRAPLAN } ValFormat;

typedef struct {
    int line;               // 1-based line in the file
    ModelSpec model;
    Layout layout;          // layers per stage filled by val_prepare
    Recompute recompute;
    int gpus;               // dp·tp·pp·cp
    double params_b;        // billions as the file says; 0 = not given
    int gpus_per_node;      // 0 = the profile's
    double intra_bw;        // bytes/s per GPU; 0 = the profile's
    double inter_bw;        // bytes/s per GPU; 0 = the profile's
    double dp_overlap;      // fraction of the backward that hides the DP reduction; < 0 = the profile's
    double tp_overlap;      // fraction of TP communication hidden; < 0 = the profile's
    double measured_s;      // seconds per iteration
    double tok_s_gpu;       // tokens/s per GPU as given (0 = time_ms given instead)
    char label[48];
} ValRow;

typedef struct {
    ValRow *rows;
    int n, cap;
    ValFormat format;
    char path[256];
} ValSet;

/* Read a CSV of measured runs; appends to set (which may hold rows already).
 * 0 ok, -1 with "FILE:LINE: column C (\"name\"): expected ..., got ..." in err. */
int val_read_csv(const char *path, ValSet *set, char *err, int errlen);
/* Same from text in memory; `origin` names it in errors. */
int val_parse_csv(const char *text, const char *origin, ValSet *set, char *err, int errlen);
void val_free(ValSet *set);

/* The profile with the row's cluster overrides (links, GPUs per node). */
void val_row_hw(const ValRow *r, const HwProfile *base, HwProfile *out);

/* Predicted seconds per iteration of one row under a profile. Returns 0, or -1
 * with err when the layout does not divide (the row's line is named). */
int val_predict(const ValRow *r, const HwProfile *hw, const char *origin, double *pred_s, Cost *c,
                char *err, int errlen);

/* ---- statistics (all errors in percent) ---- */

typedef struct {
    int n;
    double mape;     // mean absolute percentage error
    double median;   // median APE
    double p90;      // 90th percentile APE (linear interpolation between order statistics)
    double max;      // worst APE
} ValStats;

double val_ape(double pred, double meas);                 // 100·|pred − meas|/meas
void val_stats(const double *ape, int n, ValStats *out);  // n = 0 gives all zeros
/* {n, mape, median_ape, p90_ape, max_ape}, percentages as in validate --json. */
cJSON *val_stats_json(const ValStats *s);
/* Spearman rank correlation (average ranks for ties); 0 when n < 2 or a side is constant. */
double val_spearman(const double *x, const double *y, int n);
/* Regret in percent: measured time of the row predicted fastest over the
 * fastest measured, minus one (ties in prediction: the first). */
double val_regret(const double *pred, const double *meas, int n);

/* Grouping keys for reports. */
/* The two ranking groupings: model+gpus is issue 5's "runs of the same model
 * on the same GPU count" (every global batch: ranked by time per sequence,
 * since iteration times of different batches do not compare);
 * model+gpus+gbs fixes the global batch too, the planner's own question. */
typedef enum {
    VAL_BY_GPUS, VAL_BY_MODEL, VAL_BY_PARALLEL, VAL_BY_MODEL_GPUS, VAL_BY_MODEL_GPUS_GBS, VAL_GROUP_KINDS
} ValGroupKind;
/* A key naming the row's group of this kind ("64 GPUs", "h3072 L30", "tp", ...). */
void val_group_key(const ValRow *r, ValGroupKind k, char *buf, int len);
const char *val_group_kind_name(ValGroupKind k);

typedef struct {
    ValGroupKind kind;
    char key[128];
    ValStats st;         // APE statistics of the group's rows
    double spearman;     // rank correlation of predicted and measured time per sequence
    double regret;       // percent, see val_regret, on time per sequence (= iteration time at one batch)
} ValGroup;

/* Groups of one kind in order of first appearance, with their statistics;
 * pred[i] belongs to set->rows[i]. Returns the count (malloc'd in *out,
 * caller frees) or -1 when out of memory. */
int val_groups(const ValSet *set, const double *pred, ValGroupKind kind, ValGroup **out);

#endif
