/* planfile.c — the plan file (ultraplan.plan/1) and the model, layout and
 * predicted-cost JSON objects that plan.json, predict --json and run.json
 * share (see planfile.h). */
#include "planfile.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fileio.h"
#include "json.h"
#include "knobs.h"
#include "profile.h"
#include "stacks.h"

/* The knobs of a group as JSON fields, in table order. */
static void add_knobs(cJSON *j, KnobGroup g, const void *obj, int pp)
{
    for (int i = 0; i < KNOB_COUNT; i++) {
        const Knob *k = knob_get((KnobId)i);
        if (k->group != g || !k->json)
            continue;
        int v = k->json_value ? k->json_value(obj) : knob_get_int(k, obj);
        switch (k->type) {
        case KNOB_INT:
        case KNOB_DERIVED: cJSON_AddNumberToObject(j, k->json, v); break;
        case KNOB_DOUBLE: cJSON_AddNumberToObject(j, k->json, knob_get_double(k, obj)); break;
        case KNOB_BOOL: cJSON_AddBoolToObject(j, k->json, v); break;
        case KNOB_ENUM: cJSON_AddStringToObject(j, k->json, k->value_name(v)); break;
        case KNOB_LIST: cJSON_AddItemToObject(j, k->json, cJSON_CreateIntArray(knob_cfield(k, obj), pp)); break;
        case KNOB_STR:   /* written when set: plan files without it read back as before */
            if (*knob_get_str(k, obj))
                cJSON_AddStringToObject(j, k->json, knob_get_str(k, obj));
            break;
        }
    }
}

cJSON *plan_model_json(const ModelSpec *m)
{
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "name", m->name);
    add_knobs(j, KNOB_MODEL, m, 0);
    /* the main model, every expert, as published totals count it (DeepSeek-V3's 671B / 37B):
     * the MTP modules follow apart, as the text of models and predict prints them */
    const double mtp = (double)spec_mtp_params(m), mtp_active = (double)spec_mtp_params_active(m);
    cJSON_AddNumberToObject(j, "params", (double)spec_params(m, 1, PARAMS_EXACT) - mtp);
    cJSON_AddNumberToObject(j, "params_active", (double)spec_params_active(m, 1, PARAMS_EXACT) - mtp_active);
    cJSON_AddNumberToObject(j, "params_mtp", mtp);
    cJSON_AddNumberToObject(j, "params_mtp_active", mtp_active);
    return j;
}

cJSON *plan_layout_json(const Layout *lo)
{
    cJSON *j = cJSON_CreateObject();
    add_knobs(j, KNOB_LAYOUT, lo, lo->pp);
    /* what selective_recompute recomputes: the stack decides it (read back from the stack, not this field) */
    cJSON_AddStringToObject(j, "selective_ac", layout_sel_ac_name(lo->sel_ac));
    return j;
}

cJSON *plan_cost_json(const ModelSpec *m, const Layout *lo, const Cost *c)
{
    cJSON *j = cJSON_CreateObject();
    cJSON *mem = cJSON_AddObjectToObject(j, "memory");
    cJSON_AddNumberToObject(mem, "peak_bytes", c->peak_bytes);
    cJSON_AddNumberToObject(mem, "capacity_bytes", c->capacity_bytes);
    cJSON_AddBoolToObject(mem, "fits", c->fits);
    cJSON_AddNumberToObject(mem, "overflow_bytes", c->fits ? 0 : c->peak_bytes - c->capacity_bytes);
    cJSON_AddNumberToObject(mem, "peak_stage", c->peak_stage);
    cJSON *st = cJSON_AddArrayToObject(mem, "per_stage");
    for (int s = 0; s < c->pp; s++) {
        const StageMem *sm = &c->stage[s];
        cJSON *o = cJSON_CreateObject();
        cJSON_AddNumberToObject(o, "stage", s);
        cJSON_AddNumberToObject(o, "layers", sm->layers);
        cJSON_AddNumberToObject(o, "inflight", sm->inflight);
        cJSON_AddNumberToObject(o, "params", sm->params);
        for (int k = 0; k < MEM_COUNT; k++)
            cJSON_AddNumberToObject(o, cost_mem_name((MemKind)k), sm->bytes[k]);
        cJSON_AddNumberToObject(o, "total", sm->total);
        cJSON_AddItemToArray(st, o);
    }
    cJSON *t = cJSON_AddObjectToObject(j, "time");
    cJSON_AddNumberToObject(t, "step_s", c->step_s);
    for (int k = 0; k < T_COUNT; k++) {
        char key[32];
        snprintf(key, sizeof key, "%s_s", cost_time_name((TimeKind)k));
        cJSON_AddNumberToObject(t, key, c->time[k]);
    }
    cJSON_AddItemToObject(t, "stage_microbatch_s", cJSON_CreateDoubleArray(c->stage_mb_s, c->pp));
    cJSON *th = cJSON_AddObjectToObject(j, "throughput");
    cJSON_AddNumberToObject(th, "mfu", c->thr.mfu);
    cJSON_AddNumberToObject(th, "hfu", c->thr.hfu);
    cJSON_AddNumberToObject(th, "tokens_per_s", c->thr.tokens_per_s);
    cJSON_AddNumberToObject(th, "tflops_per_gpu", c->thr.tflops_per_gpu);
    cJSON_AddNumberToObject(th, "tflops_per_gpu_causal", plan_tflops_causal(m, lo, c));
    cJSON_AddNumberToObject(th, "flops_per_token", c->thr.flops_per_token);
    cJSON_AddStringToObject(th, "flop_convention", spec_flops_name(lo->flops));
    cJSON_AddNumberToObject(th, "tokens_per_step", c->tokens_per_step);
    const Training *tr = &c->train;
    cJSON *tj = cJSON_AddObjectToObject(j, "training");
    cJSON_AddNumberToObject(tj, "tokens", tr->tokens);
    cJSON_AddNumberToObject(tj, "steps", tr->steps);
    cJSON_AddNumberToObject(tj, "days", tr->days);
    cJSON_AddNumberToObject(tj, "gpu_hours", tr->gpu_hours);
    cJSON_AddNumberToObject(tj, "expected_failures", tr->failures);
    cJSON_AddNumberToObject(tj, "failures_per_day", tr->fail_per_day);
    cJSON_AddNumberToObject(tj, "p_failure_per_day", tr->p_fail_day);
    cJSON_AddNumberToObject(tj, "job_mtbf_s", isfinite(tr->job_mtbf_s) ? tr->job_mtbf_s : -1);
    cJSON_AddNumberToObject(tj, "checkpoint_bytes", tr->ckpt_bytes);
    cJSON_AddNumberToObject(tj, "checkpoint_write_s", tr->ckpt_write_s);
    cJSON_AddNumberToObject(tj, "young_interval_s", isfinite(tr->young_s) ? tr->young_s : -1);
    cJSON_AddNumberToObject(tj, "daly_interval_s", isfinite(tr->daly_s) ? tr->daly_s : -1);
    cJSON_AddNumberToObject(tj, "waste", tr->waste);
    cJSON_AddNumberToObject(tj, "days_with_failures", isfinite(tr->days_with_failures) ? tr->days_with_failures : -1);
    if (tr->dollars > 0) {   /* priced (--price) */
        cJSON_AddNumberToObject(tj, "dollars", tr->dollars);
        cJSON_AddNumberToObject(tj, "dollars_with_failures",
                                isfinite(tr->dollars_with_failures) ? tr->dollars_with_failures : -1);
    }
    (void)m;
    return j;
}

double plan_tflops_causal(const ModelSpec *m, const Layout *lo, const Cost *c)
{
    Layout causal = *lo;
    causal.flops = FLOPS_CAUSAL;
    int g = layout_gpus(lo);
    return g > 0 ? c->thr.tokens_per_s * train_model_flops_per_token(m, &causal) / g / 1e12 : 0;
}

void plan_add_mfu_bf16_peak(cJSON *o, const HwProfile *hw, const Layout *lo, const Cost *c)
{
    double mb = cost_mfu_bf16_peak(hw, lo, c);
    if (o && mb >= 0)
        cJSON_AddNumberToObject(o, "mfu_bf16_peak", mb);
}

/* ---- JSON in ---- */

#define BAD(...) do { snprintf(err, errlen, __VA_ARGS__); return -1; } while (0)

static int get_int(const cJSON *j, const char *what, const char *sect, const char *key, int min, int *out,
                   char *err, int errlen)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, key);
    if (!cJSON_IsNumber(v))
        BAD("%s: field \"%s.%s\": expected a number", what, sect, key);
    double d = v->valuedouble;
    if (!isfinite(d) || d != floor(d) || d < min || d > 2147483647.0)
        BAD("%s: field \"%s.%s\": expected a whole number >= %d, got %g", what, sect, key, min, d);
    *out = (int)d;
    return 0;
}

static int get_bool(const cJSON *j, const char *what, const char *sect, const char *key, bool *out,
                    char *err, int errlen)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, key);
    if (!cJSON_IsBool(v))
        BAD("%s: field \"%s.%s\": expected true or false", what, sect, key);
    *out = cJSON_IsTrue(v);
    return 0;
}

static const char *get_str(const cJSON *j, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, key);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

static int get_int_array(const cJSON *j, const char *what, const char *sect, const Knob *k, int n, int *out,
                         char *err, int errlen)
{
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(j, k->json);
    if (!cJSON_IsArray(a) || cJSON_GetArraySize(a) != n)
        BAD("%s: field \"%s.%s\": expected an array of %d whole numbers", what, sect, k->json, n);
    int i = 0;
    const cJSON *v;
    cJSON_ArrayForEach(v, a) {
        if (!cJSON_IsNumber(v) || v->valuedouble != floor(v->valuedouble) || v->valuedouble < k->min ||
            v->valuedouble > k->max)
            BAD("%s: field \"%s.%s[%d]\": expected a whole number >= %d", what, sect, k->json, i, k->min);
        out[i++] = (int)v->valuedouble;
    }
    for (; i < LAYOUT_MAX_PP; i++)
        out[i] = 0;
    return 0;
}

/* Read the knobs of a group back, in table order (pp before the per-stage
 * lists, which have pp entries). */
static int get_knobs(const cJSON *j, const char *what, KnobGroup g, void *obj, const int *pp, char *err, int errlen)
{
    const char *sect = g == KNOB_MODEL ? "model" : "layout";
    for (int i = 0; i < KNOB_COUNT; i++) {
        const Knob *k = knob_get((KnobId)i);
        if (k->group != g || !k->json || k->type == KNOB_DERIVED)
            continue;
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, k->json);
        if (!v && k->json_optional)
            continue;
        int x;
        switch (k->type) {
        case KNOB_INT:
            if (get_int(j, what, sect, k->json, k->min, &x, err, errlen))
                return -1;
            if (x > k->max)
                BAD("%s: field \"%s.%s\": at most %d, got %d", what, sect, k->json, k->max, x);
            knob_set_int(k, obj, x);
            break;
        case KNOB_DOUBLE:
            if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble) || v->valuedouble < k->dmin ||
                v->valuedouble > k->dmax)
                BAD("%s: field \"%s.%s\": expected a number from %g to %g", what, sect, k->json, k->dmin, k->dmax);
            knob_set_double(k, obj, v->valuedouble);
            break;
        case KNOB_BOOL: {
            bool b;
            if (get_bool(j, what, sect, k->json, &b, err, errlen))
                return -1;
            knob_set_int(k, obj, b);
            break;
        }
        case KNOB_ENUM:
            if (!cJSON_IsString(v) || k->value_parse(v->valuestring, &x) != 0 || x < 0 || x >= k->count) {
                char list[160];
                knob_enum_list(k, true, list, sizeof list);
                BAD("%s: field \"%s.%s\": expected %s", what, sect, k->json, list);
            }
            knob_set_int(k, obj, x);
            break;
        case KNOB_LIST:
            if (get_int_array(j, what, sect, k, *pp, knob_field(k, obj), err, errlen))
                return -1;
            break;
        case KNOB_STR: {
            char who[160];
            snprintf(who, sizeof who, "%s: field \"%s.%s\"", what, sect, k->json);
            if (!cJSON_IsString(v))
                BAD("%s: expected a string", who);
            if (knob_set_str(k, obj, v->valuestring, who, err, errlen) != 0)
                return -1;
            break;
        }
        case KNOB_DERIVED: break;
        }
    }
    return 0;
}

int plan_parse_model(const cJSON *j, const char *what, ModelSpec *m, char *err, int errlen)
{
    memset(m, 0, sizeof *m);
    if (!cJSON_IsObject(j))
        BAD("%s: field \"model\": expected an object", what);
    const char *name = get_str(j, "name");
    snprintf(m->name, sizeof m->name, "%s", name ? name : "custom");
    if (get_knobs(j, what, KNOB_MODEL, m, NULL, err, errlen) != 0)
        return -1;
    char e2[200];
    if (spec_validate(m, e2, sizeof e2) != 0)
        BAD("%s: %s", what, e2);
    return 0;
}

int plan_parse_layout(const cJSON *j, const char *what, Layout *lo, char *err, int errlen)
{
    layout_default(lo);
    if (!cJSON_IsObject(j))
        BAD("%s: field \"layout\": expected an object", what);
    /* pp first: it sizes the per-stage lists and must fit them */
    if (get_int(j, what, "layout", "pp", 1, &lo->pp, err, errlen))
        return -1;
    if (lo->pp > LAYOUT_MAX_PP)
        BAD("%s: field \"layout.pp\": at most %d stages", what, LAYOUT_MAX_PP);
    return get_knobs(j, what, KNOB_LAYOUT, lo, &lo->pp, err, errlen);
}

/* ---- plan file ---- */

cJSON *planfile_json(const ModelSpec *m, const HwProfile *hw, const Layout *lo, const CostOpts *o, const Cost *c)
{
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "format", PLAN_FORMAT);
    cJSON_AddItemToObject(j, "model", plan_model_json(m));
    char *hwtext = profile_to_json(hw);
    cJSON *hj = hwtext ? cJSON_Parse(hwtext) : NULL;
    free(hwtext);
    cJSON_AddItemToObject(j, "hardware", hj ? hj : cJSON_CreateNull());
    cJSON_AddNumberToObject(j, "gpus", layout_gpus(lo));
    cJSON_AddItemToObject(j, "layout", plan_layout_json(lo));
    cJSON *oj = cJSON_AddObjectToObject(j, "options");
    cJSON_AddNumberToObject(oj, "tokens", o->tokens);
    cJSON_AddNumberToObject(oj, "mtbf_gpu_hours", o->mtbf_gpu_hours);
    cJSON_AddNumberToObject(oj, "restart_s", o->restart_s);
    if (o->price > 0)
        cJSON_AddNumberToObject(oj, "price", o->price);
    cJSON *pj = plan_cost_json(m, lo, c);
    plan_add_mfu_bf16_peak(cJSON_GetObjectItemCaseSensitive(pj, "throughput"), hw, lo, c);
    cJSON_AddItemToObject(j, "prediction", pj);
    return j;
}

int planfile_write(const char *path, const ModelSpec *m, const HwProfile *hw, const Layout *lo,
                   const CostOpts *o, const Cost *c, char *err, int errlen)
{
    cJSON *j = planfile_json(m, hw, lo, o, c);
    char *text = cJSON_Print(j);
    cJSON_Delete(j);
    if (!text)
        BAD("%s: out of memory while formatting the plan", path);
    int rc = util_write_atomic(path, text, err, errlen);
    free(text);
    return rc;
}

int planfile_read(const char *path, PlanFile *pf, char *err, int errlen)
{
    memset(pf, 0, sizeof *pf);
    char *text = util_slurp(path, 64u << 20, NULL, err, errlen);
    if (!text)
        return -1;
    cJSON *j = util_json_parse(text, path, err, errlen);
    free(text);
    int rc = -1;
    if (!j)
        return -1;
    const char *fmt = get_str(j, "format");
    char e2[256];
    if (!fmt || strcmp(fmt, PLAN_FORMAT) != 0) {
        snprintf(err, errlen, "%s: field \"format\": expected \"%s\"%s%s", path, PLAN_FORMAT,
                 fmt ? ", got " : "", fmt ? fmt : "");
        goto out;
    }
    if (plan_parse_model(cJSON_GetObjectItemCaseSensitive(j, "model"), path, &pf->model, err, errlen))
        goto out;
    char *hwtext = cJSON_PrintUnformatted(cJSON_GetObjectItemCaseSensitive(j, "hardware"));
    int hrc = hwtext ? profile_parse_json(hwtext, path, &pf->hw, e2, sizeof e2) : -1;
    if (hrc != 0)
        snprintf(err, errlen, "%s: field \"hardware\": %s", path, hwtext ? e2 : "missing");
    free(hwtext);
    if (hrc != 0)
        goto out;
    if (plan_parse_layout(cJSON_GetObjectItemCaseSensitive(j, "layout"), path, &pf->layout, err, errlen))
        goto out;
    /* the profile JSON has the stack's scaled curves, not its ZeRO-3 and other set fields */
    if (stacks_apply_settings(&pf->hw, pf->layout.stack, e2, sizeof e2) != 0) {
        snprintf(err, errlen, "%s: field \"layout.stack\": %s", path, e2);
        goto out;
    }
    {   /* the layout fields the stack decides, as scenario_finish sets them: what "selective" recomputes,
         * and the CP exchange where the stack runs one (torchtitan's PyTorch all-gather). A file that
         * leaves cp_comm out gets the stack's; one that names another is refused, as --cp-comm is. */
        CpComm named = pf->layout.cp_comm;
        const cJSON *lj = cJSON_GetObjectItemCaseSensitive(j, "layout");
        bool given = cJSON_GetObjectItemCaseSensitive(lj, "cp_comm") != NULL;
        stacks_layout_settings(&pf->layout);
        if (given && pf->layout.cp_comm != named) {
            snprintf(err, errlen, "%s: field \"layout.cp_comm\": \"%s\", but the %s stack exchanges K/V by %s "
                     "whatever is asked (profiles/stacks/%s.json)",
                     path, layout_cp_comm_name(named), stacks_name(pf->layout.stack),
                     layout_cp_comm_name(pf->layout.cp_comm), stacks_name(pf->layout.stack));
            goto out;
        }
    }
    cost_opts_default(&pf->opts);
    const cJSON *oj = cJSON_GetObjectItemCaseSensitive(j, "options");
    if (cJSON_IsObject(oj)) {
        /* the ranges of --tokens, --mtbf and --restart-time (0 and < 0 = defaults) */
        const cJSON *v;
        if (cJSON_IsNumber(v = cJSON_GetObjectItemCaseSensitive(oj, "tokens"))) {
            if (!(v->valuedouble >= 0 && v->valuedouble <= 1e30)) {
                snprintf(err, errlen, "%s: field \"options.tokens\": expected 0 to 1e30, got %g", path, v->valuedouble);
                goto out;
            }
            pf->opts.tokens = v->valuedouble;
        }
        if (cJSON_IsNumber(v = cJSON_GetObjectItemCaseSensitive(oj, "mtbf_gpu_hours"))) {
            if (!(v->valuedouble == 0 || (v->valuedouble >= 1e-6 && v->valuedouble <= 1e15))) {
                snprintf(err, errlen, "%s: field \"options.mtbf_gpu_hours\": expected 0 or 1e-6 to 1e15, got %g", path,
                         v->valuedouble);
                goto out;
            }
            pf->opts.mtbf_gpu_hours = v->valuedouble;
        }
        if (cJSON_IsNumber(v = cJSON_GetObjectItemCaseSensitive(oj, "restart_s"))) {
            if (!(v->valuedouble <= 1e12)) {
                snprintf(err, errlen, "%s: field \"options.restart_s\": expected at most 1e12, got %g", path,
                         v->valuedouble);
                goto out;
            }
            pf->opts.restart_s = v->valuedouble < 0 ? -1 : v->valuedouble;
        }
        if (cJSON_IsNumber(v = cJSON_GetObjectItemCaseSensitive(oj, "price"))) {
            if (!(v->valuedouble >= 0 && v->valuedouble < 1e9)) {
                snprintf(err, errlen, "%s: field \"options.price\": expected dollars per GPU-hour from 0 to 1e9, got %g",
                         path, v->valuedouble);
                goto out;
            }
            pf->opts.price = v->valuedouble;
        }
    }
    if (layout_check(&pf->layout, &pf->model, &pf->hw, e2, sizeof e2) != 0) {
        snprintf(err, errlen, "%s: %s", path, e2);
        goto out;
    }
    cost(&pf->model, &pf->hw, &pf->layout, &pf->opts, &pf->cost);
    rc = 0;
out:
    cJSON_Delete(j);
    return rc;
}

