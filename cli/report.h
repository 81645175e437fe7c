/* report.h — a Cost as text for people and as JSON for scripts, and the
 * plan file (ultraplan.plan/1) that plan writes and run, compare, export
 * and the TUI read.
 *
 * JSON goes through cJSON; files are written to a temporary name, fsynced
 * and renamed, so a failure never leaves half a file.
 */
#ifndef ULTRAPLAN_CLI_REPORT_H
#define ULTRAPLAN_CLI_REPORT_H

#include <stdio.h>

#include <cjson/cJSON.h>

#include "cost.h"

#define PLAN_FORMAT "ultraplan.plan/1"
#define PREDICT_FORMAT "ultraplan.predict/1"

cJSON *report_model_json(const ModelSpec *m);
cJSON *report_layout_json(const Layout *lo);
cJSON *report_cost_json(const ModelSpec *m, const Layout *lo, const Cost *c);

/* The whole predict document: format, model, hardware, layout and the cost. */
cJSON *report_predict_json(const ModelSpec *m, const HwProfile *hw, const Layout *lo, const Cost *c,
                           const char *model_rule);

/* Human-readable report. */
void report_text(FILE *f, const ModelSpec *m, const HwProfile *hw, const Layout *lo, const Cost *c,
                 const char *model_rule);

/* Read back what report_*_json wrote. `what` names the file in errors.
 * 0 ok, -1 with err naming the field and what was expected. */
int report_parse_model(const cJSON *j, const char *what, ModelSpec *m, char *err, int errlen);
int report_parse_layout(const cJSON *j, const char *what, Layout *lo, char *err, int errlen);

/* A plan file: the model, the hardware profile (embedded whole), the
 * layout and its predicted cost. */
typedef struct {
    ModelSpec model;
    HwProfile hw;
    Layout layout;
    CostOpts opts;
    Cost cost;            // recomputed from the above on load
} PlanFile;

int planfile_write(const char *path, const ModelSpec *m, const HwProfile *hw, const Layout *lo,
                   const CostOpts *o, const Cost *c, char *err, int errlen);
/* Adds "mfu_bf16_peak" (cost_mfu_bf16_peak) to o when the layout is fp8; nothing otherwise or when o is NULL. */
void report_add_mfu_bf16_peak(cJSON *o, const HwProfile *hw, const Layout *lo, const Cost *c);
cJSON *planfile_json(const ModelSpec *m, const HwProfile *hw, const Layout *lo, const CostOpts *o, const Cost *c);
int planfile_read(const char *path, PlanFile *pf, char *err, int errlen);

/* Write text to path atomically (temp + fsync + rename). "-" is stdout. */
int report_write_atomic(const char *path, const char *text, char *err, int errlen);

/* Format v with a K M B T P suffix and `digits` significant digits ("3.49T"). */
const char *report_si(double v, int digits, char *buf, int len);

/* Format bytes as "12.34 GiB". */
const char *report_gib(double bytes, char *buf, int len);

#endif
