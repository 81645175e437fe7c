/* report.h — a prediction as text for people and as JSON for scripts.
 * The JSON objects it shares with plan.json and run.json are planfile.h's. */
#ifndef ULTRAPLAN_CLI_REPORT_H
#define ULTRAPLAN_CLI_REPORT_H

#include <stdio.h>

#include <cjson/cJSON.h>

#include "cost.h"
#include "fileio.h"
#include "fmt.h"
#include "planfile.h"

/* The whole predict document: format, model, hardware, layout and the cost. */
cJSON *report_predict_json(const ModelSpec *m, const HwProfile *hw, const Layout *lo, const Cost *c,
                           const char *model_rule);

/* The error band (calib/band.h) into a predict document made by
 * report_predict_json, which calls it: time.step_s_range, throughput's
 * mfu_range and tokens_per_s_range, and a band object. Nothing when the step
 * is not finite. */
void report_band_json(cJSON *j, const ModelSpec *m, const HwProfile *hw, const Layout *lo, const Cost *c);

/* Human-readable report (with the band on the step-time line). */
void report_text(FILE *f, const ModelSpec *m, const HwProfile *hw, const Layout *lo, const Cost *c,
                 const char *model_rule);

#endif
