/* runs.h — measured training runs as the cost model sees them: reading them
 * from CSV, the cluster each was measured on, and the prediction of one run.
 *
 * Used by `validate`, `fit` (calib/fit.h), the statistics (calib/stats.h)
 * and their tests. Nothing here prints or exits; user mistakes come back as
 * -1 with one line in err naming the file, the line and the column.
 *
 * Two CSV formats, told apart by their header row (the first non-empty line):
 *
 *  - vTrain (the CSVs in validation/vtrain/): columns "# GPUs", "global
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
 *    --tp-comm-overlap / NeMo's userbuffers), stack (the software stack the
 *    run used: megatron-lm, nemo, ...; `ultraplan models` lists them), label,
 *    mem_gib (the peak memory per GPU the source measured, GiB; empty where a
 *    row has none: validate then also reports the memory error).
 *
 * In both, lines starting with '#' after the header and blank lines are
 * skipped; a UTF-8 byte-order mark, CRLF line ends, spaces around fields and
 * one pair of double quotes around a field are accepted (spreadsheet
 * exports); a field cannot contain a comma. The columns of both formats are
 * one table in runs.c (cols[]: name, vTrain header, required), and one
 * function there (set_field) fills the row from a column's text.
 */
#ifndef ULTRAPLAN_CALIB_RUNS_H
#define ULTRAPLAN_CALIB_RUNS_H

#include <stdbool.h>

#include "cost.h"

typedef enum { RUNS_FMT_VTRAIN, RUNS_FMT_ULTRAPLAN, RUNS_FMT_COUNT } RunsFormat;

typedef struct {
    int line;               // 1-based line in the file
    ModelSpec model;
    Layout layout;          // layers per stage and recomputation filled in by the reader
    Recompute recompute;
    int gpus;               // dp·tp·pp·cp
    double params_b;        // billions as the file says; 0 = not given
    int gpus_per_node;      // 0 = the profile's
    double intra_bw;        // bytes/s per GPU; 0 = the profile's
    double inter_bw;        // bytes/s per GPU; 0 = the profile's
    double dp_overlap;      // fraction of the backward that hides the DP reduction; < 0 = the profile's
    double tp_overlap;      // fraction of TP communication hidden; < 0 = the profile's
    bool stack_given;       // the file has a stack column (layout.stack: the software stack, model/stack.h)
    bool cp_comm_given;     // the file has a cp_comm column (a stack that fixes the exchange must agree)
    double measured_s;      // seconds per iteration
    double tok_s_gpu;       // tokens/s per GPU as given (0 = time_ms given instead)
    double mem_gib;         // peak memory per GPU the source measured, GiB (column mem_gib); 0 = not given
    char label[48];
} RunRow;

typedef struct {
    RunRow *rows;
    int n, cap;
    RunsFormat format;      // of the last file read
    char path[256];         // the last file read; names it in prediction errors
} RunSet;

/* Read a CSV of measured runs; appends to set (which may hold rows already;
 * on error it keeps exactly those). 0 ok, -1 with
 * "FILE:LINE: column C (\"name\"): expected ..., got ..." in err. */
int runs_read_csv(const char *path, RunSet *set, char *err, int errlen);
/* Same from text in memory; `origin` names it in errors. */
int runs_parse_csv(const char *text, const char *origin, RunSet *set, char *err, int errlen);
/* Each row of a CSV file to `each` as it is read, nothing kept (a RunRow is
 * 3 KB: `validate` keeps what it prints of a million rows, not the rows).
 * `each` returns 0, or -1 with its message in err to stop; a file's rows
 * before a bad line have reached `each` already. 0 ok, -1 as runs_read_csv. */
typedef int (*RunsEachFn)(const RunRow *r, RunsFormat fmt, void *ctx, char *err, int errlen);
int runs_each_csv(const char *path, RunsEachFn each, void *ctx, char *err, int errlen);

/* The builtin profile a file's runs default to when neither --gpu nor
 * --profile is given: vTrain's CSVs were measured on A100s ("a100-80g");
 * everything else gets the default of every other command ("h100-sxm").
 * Reads the header line only; a file it cannot read gets "h100-sxm" (the
 * reader then names the problem). */
const char *runs_default_gpu(const char *path);
/* Frees the rows and zeroes the set; NULL is fine. */
void runs_free(RunSet *set);

/* The profile with the row's cluster overrides (links, GPUs per node, overlaps). */
void runs_row_hw(const RunRow *r, const HwProfile *base, HwProfile *out);

/* Predicted seconds per iteration of one row under a profile (the row's
 * overrides applied), and its Cost when c is not NULL. Returns 0, or -1 with
 * "ORIGIN:LINE: ..." in err when the profile cannot run the row's precision. */
int runs_predict(const RunRow *r, const HwProfile *hw, const char *origin, double *pred_s, Cost *c,
                 char *err, int errlen);

#endif
