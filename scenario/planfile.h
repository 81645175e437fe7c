/* planfile.h — the plan file (ultraplan.plan/1) that `plan`, `predict -o`
 * and the TUI write and `run`, `compare`, `export` and the TUI read; and
 * the model, layout and predicted-cost JSON objects that plan.json,
 * predict --json and run.json share.
 *
 * Below cli/ and tui/ so both (and the executor, which writes run.json)
 * speak one format. Readers check every field and name the file, the field
 * and what was expected; writers go through util_write_atomic.
 */
#ifndef ULTRAPLAN_SCENARIO_PLANFILE_H
#define ULTRAPLAN_SCENARIO_PLANFILE_H

#include <cjson/cJSON.h>

#include "cost.h"

#define PLAN_FORMAT "ultraplan.plan/1"
#define PREDICT_FORMAT "ultraplan.predict/1"

cJSON *plan_model_json(const ModelSpec *m);
cJSON *plan_layout_json(const Layout *lo);
/* memory, time, throughput and training objects of a Cost */
cJSON *plan_cost_json(const ModelSpec *m, const Layout *lo, const Cost *c);
/* TFLOP/s per GPU under the causal FLOP convention (what Megatron's
 * --log-throughput prints since 2025), whatever lo->flops is. */
double plan_tflops_causal(const ModelSpec *m, const Layout *lo, const Cost *c);

/* Adds "mfu_bf16_peak" (cost_mfu_bf16_peak) to o when the layout is fp8;
 * nothing otherwise or when o is NULL. */
void plan_add_mfu_bf16_peak(cJSON *o, const HwProfile *hw, const Layout *lo, const Cost *c);

/* Read back what plan_*_json wrote. `what` names the file in errors.
 * 0 ok, -1 with err naming the field and what was expected. */
int plan_parse_model(const cJSON *j, const char *what, ModelSpec *m, char *err, int errlen);
int plan_parse_layout(const cJSON *j, const char *what, Layout *lo, char *err, int errlen);

/* A plan file: the model, the hardware profile (embedded whole), the
 * layout and its predicted cost. */
typedef struct {
    ModelSpec model;
    HwProfile hw;
    Layout layout;
    CostOpts opts;
    Cost cost;            // recomputed from the above on load
} PlanFile;

cJSON *planfile_json(const ModelSpec *m, const HwProfile *hw, const Layout *lo, const CostOpts *o, const Cost *c);
int planfile_write(const char *path, const ModelSpec *m, const HwProfile *hw, const Layout *lo,
                   const CostOpts *o, const Cost *c, char *err, int errlen);
int planfile_read(const char *path, PlanFile *pf, char *err, int errlen);

#endif
