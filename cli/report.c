/* report.c — text and JSON forms of a prediction; the plan file. */
#include "report.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "profile.h"

const char *report_gib(double bytes, char *buf, int len)
{
    snprintf(buf, len, "%.2f GiB", bytes / 1073741824.0);
    return buf;
}

/* ---- JSON out ---- */

cJSON *report_model_json(const ModelSpec *m)
{
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "name", m->name);
    cJSON_AddNumberToObject(j, "layers", m->L);
    cJSON_AddNumberToObject(j, "hidden", m->h);
    cJSON_AddNumberToObject(j, "heads", m->a);
    cJSON_AddNumberToObject(j, "kv_heads", m->g);
    cJSON_AddNumberToObject(j, "head_dim", spec_head_dim(m));
    cJSON_AddNumberToObject(j, "ffn", m->f);
    cJSON_AddNumberToObject(j, "vocab", m->vocab);
    cJSON_AddNumberToObject(j, "vocab_div", m->vocab_div);
    cJSON_AddNumberToObject(j, "seq", m->s);
    cJSON_AddStringToObject(j, "mlp", spec_mlp_name(m->mlp));
    cJSON_AddStringToObject(j, "norm", spec_norm_name(m->norm));
    cJSON_AddStringToObject(j, "pos", spec_pos_name(m->pos));
    cJSON_AddBoolToObject(j, "bias", m->bias);
    cJSON_AddBoolToObject(j, "tied", m->tied);
    cJSON_AddBoolToObject(j, "dropout", m->dropout);
    cJSON_AddNumberToObject(j, "params", (double)spec_params(m, 1, PARAMS_EXACT));
    return j;
}

cJSON *report_layout_json(const Layout *lo)
{
    cJSON *j = cJSON_CreateObject();
    cJSON_AddNumberToObject(j, "dp", lo->dp);
    cJSON_AddNumberToObject(j, "tp", lo->tp);
    cJSON_AddNumberToObject(j, "pp", lo->pp);
    cJSON_AddNumberToObject(j, "vp", lo->vp);
    cJSON_AddNumberToObject(j, "cp", lo->cp);
    cJSON_AddBoolToObject(j, "sp", lo->sp);
    cJSON_AddNumberToObject(j, "mbs", lo->mbs);
    cJSON_AddNumberToObject(j, "gbs", lo->gbs);
    cJSON_AddNumberToObject(j, "microbatches", layout_microbatches(lo));
    cJSON_AddStringToObject(j, "optimizer", layout_opt_name(lo->opt));
    cJSON_AddStringToObject(j, "precision", hw_precision_name(lo->prec));
    cJSON_AddBoolToObject(j, "grad_fp32", lo->grad_fp32);
    cJSON_AddBoolToObject(j, "flash", lo->flash);
    cJSON_AddStringToObject(j, "flops", spec_flops_name(lo->flops));
    cJSON_AddItemToObject(j, "stage_layers", cJSON_CreateIntArray(lo->layers, lo->pp));
    cJSON_AddItemToObject(j, "full_recompute", cJSON_CreateIntArray(lo->full_rc, lo->pp));
    cJSON_AddItemToObject(j, "selective_recompute", cJSON_CreateIntArray(lo->sel_rc, lo->pp));
    return j;
}

cJSON *report_cost_json(const ModelSpec *m, const Layout *lo, const Cost *c)
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
    (void)m;
    return j;
}

static void move_items(cJSON *dst, cJSON *src)
{
    cJSON *it;
    while ((it = src->child) != NULL) {
        cJSON_DetachItemViaPointer(src, it);
        cJSON_AddItemToObject(dst, it->string, it);
    }
    cJSON_Delete(src);
}

void report_add_mfu_bf16_peak(cJSON *o, const HwProfile *hw, const Layout *lo, const Cost *c)
{
    double mb = cost_mfu_bf16_peak(hw, lo, c);
    if (o && mb >= 0)
        cJSON_AddNumberToObject(o, "mfu_bf16_peak", mb);
}

cJSON *report_predict_json(const ModelSpec *m, const HwProfile *hw, const Layout *lo, const Cost *c,
                           const char *model_rule)
{
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "format", PREDICT_FORMAT);
    cJSON *mj = report_model_json(m);
    if (model_rule && *model_rule)
        cJSON_AddStringToObject(mj, "rule", model_rule);
    cJSON_AddItemToObject(j, "model", mj);
    cJSON *hj = cJSON_AddObjectToObject(j, "hardware");
    cJSON_AddStringToObject(hj, "name", hw->name);
    cJSON_AddNumberToObject(hj, "gpus", layout_gpus(lo));
    cJSON_AddNumberToObject(hj, "gpus_per_node", hw->gpus_per_node);
    cJSON_AddNumberToObject(hj, "peak_flops", hw->peak[lo->prec]);
    cJSON_AddItemToObject(j, "layout", report_layout_json(lo));
    move_items(j, report_cost_json(m, lo, c));
    report_add_mfu_bf16_peak(cJSON_GetObjectItemCaseSensitive(j, "throughput"), hw, lo, c);
    return j;
}

/* ---- text ---- */

const char *report_si(double v, int digits, char *buf, int len)
{
    const char *u[] = {"", "K", "M", "B", "T", "P"};
    /* the next unit from where %g would round up to 1000 (999.7 -> "1e+03") */
    double lim = 1000.0 - 5.0 * pow(10.0, 2 - digits);
    int i = 0;
    while (fabs(v) >= lim && i < 5) {
        v /= 1000;
        i++;
    }
    snprintf(buf, len, "%.*g%s", digits, v, u[i]);
    return buf;
}

static const char *human(double v, char *buf, int len) { return report_si(v, 3, buf, len); }

static void print_duration(FILE *f, double s)
{
    if (!isfinite(s))
        fprintf(f, "never");
    else if (s < 120)
        fprintf(f, "%.1f s", s);
    else if (s < 7200)
        fprintf(f, "%.1f min", s / 60);
    else if (s < 172800)
        fprintf(f, "%.1f h", s / 3600);
    else
        fprintf(f, "%.1f days", s / 86400);
}

void report_text(FILE *f, const ModelSpec *m, const HwProfile *hw, const Layout *lo, const Cost *c,
                 const char *model_rule)
{
    char b1[32], b2[32];
    fprintf(f, "%s on %d x %s (%s), %d GPUs per node\n", m->name, layout_gpus(lo), hw->name, hw->desc,
            hw->gpus_per_node);
    if (model_rule && *model_rule)
        fprintf(f, "  shape rule: %s\n", model_rule);
    fprintf(f, "model   %d layers, hidden %d, %d heads (%d kv, dim %d), ffn %d, vocab %d (padded %lld), seq %d,\n"
               "        %s, %s, %s positions%s%s, %s params\n",
            m->L, m->h, m->a, m->g, spec_head_dim(m), m->f, m->vocab, (long long)spec_padded_vocab(m, lo->tp), m->s,
            spec_mlp_name(m->mlp), spec_norm_name(m->norm), spec_pos_name(m->pos), m->bias ? ", biases" : "",
            m->tied ? ", tied head" : ", untied head", human((double)spec_params(m, lo->tp, PARAMS_EXACT), b1, 32));
    fprintf(f, "layout  dp %d, tp %d, pp %d, vp %d, cp %d; sp %s; mbs %d, gbs %d (%d micro-batches); %s; %s%s; %s attention\n",
            lo->dp, lo->tp, lo->pp, lo->vp, lo->cp, lo->sp ? "on" : "off", lo->mbs, lo->gbs,
            layout_microbatches(lo), layout_opt_name(lo->opt), hw_precision_name(lo->prec),
            lo->grad_fp32 ? " (fp32 grads)" : "", lo->flash ? "flash" : "unfused");

    fprintf(f, "\nmemory per GPU (GiB)  layers  inflight  weights   grads   optim    acts  buffers  overhead    total  recompute f/s\n");
    for (int s = 0; s < c->pp; s++) {
        const StageMem *sm = &c->stage[s];
        fprintf(f, "  stage %-4d          %6d  %8.2f", s, sm->layers, sm->inflight);
        for (int k = 0; k < MEM_COUNT; k++)
            fprintf(f, " %7.2f%s", sm->bytes[k] / 1073741824.0, k == MEM_BUFFERS ? "  " : k == MEM_OVERHEAD ? "  " : "");
        fprintf(f, "  %7.2f  %d/%d%s\n", sm->total / 1073741824.0, lo->full_rc[s], lo->sel_rc[s],
                s == c->peak_stage ? "  <- peak" : "");
    }
    if (c->fits)
        fprintf(f, "  peak %s of %s: fits (%.0f%%)\n", report_gib(c->peak_bytes, b1, 32),
                report_gib(c->capacity_bytes, b2, 32), 100 * c->peak_bytes / c->capacity_bytes);
    else
    {
        char b3[32];
        fprintf(f, "  peak %s of %s: DOES NOT FIT, stage %d is %s over\n", report_gib(c->peak_bytes, b1, 32),
                report_gib(c->capacity_bytes, b2, 32), c->peak_stage,
                report_gib(c->peak_bytes - c->capacity_bytes, b3, 32));
    }

    fprintf(f, "\nstep time %.4g s\n", c->step_s);
    for (int k = 0; k < T_COUNT; k++)
        if (c->time[k] > 0)
            fprintf(f, "  %-10s %10.4g s  %5.1f%%\n", cost_time_name((TimeKind)k), c->time[k],
                    100 * c->time[k] / c->step_s);
    fprintf(f, "\nthroughput %s tokens/s, %.1f TFLOP/s per GPU, MFU %.1f%%, HFU %.1f%% (%s FLOPs, %.4g per token; peak %.0f TFLOP/s %s)\n",
            human(c->thr.tokens_per_s, b1, 32), c->thr.tflops_per_gpu, 100 * c->thr.mfu, 100 * c->thr.hfu,
            spec_flops_name(lo->flops), c->thr.flops_per_token, hw->peak[lo->prec] / 1e12, hw_precision_name(lo->prec));
    if (cost_mfu_bf16_peak(hw, lo, c) >= 0)
        fprintf(f, "  MFU against the bf16 peak (%.0f TFLOP/s), as fp8 runs are often quoted: %.1f%%\n",
                hw->peak[PREC_BF16] / 1e12, 100 * cost_mfu_bf16_peak(hw, lo, c));
    if (c->thr.mfu > 1.0)
        fprintf(f, "  note: MFU above 100%% is the FLOP convention, not the GPU: %s FLOPs count attention "
                   "work the kernels skip (flash computes only the causal half of s^2); --flops causal "
                   "(Megatron's count since 2025-03) counts what runs\n", spec_flops_name(lo->flops));
    const Training *tr = &c->train;
    char b3[32];
    fprintf(f, "training %s tokens: %s steps, %.1f days ideal, ", human(tr->tokens, b1, 32),
            human(tr->steps, b2, 32), tr->days);
    if (isfinite(tr->days_with_failures))
        fprintf(f, "%.1f days with failures", tr->days_with_failures);
    else
        fprintf(f, "never finishes with failures");
    fprintf(f, ", %s GPU-hours\n", human(tr->gpu_hours, b3, 32));
    fprintf(f, "  failures: %.2f per day (P(>=1 per day) %.1f%%), %.1f over the run, job MTBF ", tr->fail_per_day,
            100 * tr->p_fail_day, tr->failures);
    print_duration(f, tr->job_mtbf_s);
    fprintf(f, "\n  checkpoint %s written in ", human(tr->ckpt_bytes, b1, 32));
    print_duration(f, tr->ckpt_write_s);
    fprintf(f, "; Daly interval ");
    print_duration(f, tr->daly_s);
    if (isfinite(tr->days_with_failures)) {
        fprintf(f, "; waste %.1f%% -> %.1f days with failures\n", 100 * tr->waste, tr->days_with_failures);
    } else {
        /* waste >= 1: checkpoint stalls, rework and restarts take all the time */
        fprintf(f, "; waste %.3g%%: the job never finishes (each failure costs ", 100 * tr->waste);
        print_duration(f, (tr->waste - tr->ckpt_write_s / tr->daly_s) * tr->job_mtbf_s);   /* restart + daly/2 */
        fprintf(f, " of restart and rework, and failures come every ");
        print_duration(f, tr->job_mtbf_s);
        fprintf(f, ")\n");
    }
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

int report_parse_model(const cJSON *j, const char *what, ModelSpec *m, char *err, int errlen)
{
    memset(m, 0, sizeof *m);
    if (!cJSON_IsObject(j))
        BAD("%s: field \"model\": expected an object", what);
    const char *name = get_str(j, "name");
    snprintf(m->name, sizeof m->name, "%s", name ? name : "custom");
    if (get_int(j, what, "model", "layers", 1, &m->L, err, errlen) || get_int(j, what, "model", "hidden", 1, &m->h, err, errlen)
        || get_int(j, what, "model", "heads", 1, &m->a, err, errlen) || get_int(j, what, "model", "kv_heads", 1, &m->g, err, errlen)
        || get_int(j, what, "model", "head_dim", 1, &m->d_head, err, errlen) || get_int(j, what, "model", "ffn", 1, &m->f, err, errlen)
        || get_int(j, what, "model", "vocab", 1, &m->vocab, err, errlen) || get_int(j, what, "model", "vocab_div", 1, &m->vocab_div, err, errlen)
        || get_int(j, what, "model", "seq", 1, &m->s, err, errlen))
        return -1;
    const char *s;
    if (!(s = get_str(j, "mlp")) || spec_parse_mlp(s, &m->mlp))
        BAD("%s: field \"model.mlp\": expected \"gelu\" or \"swiglu\"", what);
    if (!(s = get_str(j, "norm")) || spec_parse_norm(s, &m->norm))
        BAD("%s: field \"model.norm\": expected \"layernorm\" or \"rmsnorm\"", what);
    if (!(s = get_str(j, "pos")) || spec_parse_pos(s, &m->pos))
        BAD("%s: field \"model.pos\": expected \"learned\" or \"rope\"", what);
    if (get_bool(j, what, "model", "bias", &m->bias, err, errlen) || get_bool(j, what, "model", "tied", &m->tied, err, errlen)
        || get_bool(j, what, "model", "dropout", &m->dropout, err, errlen))
        return -1;
    char e2[200];
    if (spec_validate(m, e2, sizeof e2) != 0)
        BAD("%s: %s", what, e2);
    return 0;
}

static int get_int_array(const cJSON *j, const char *what, const char *key, int n, int *out, char *err, int errlen)
{
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(j, key);
    if (!cJSON_IsArray(a) || cJSON_GetArraySize(a) != n)
        BAD("%s: field \"layout.%s\": expected an array of %d whole numbers", what, key, n);
    int i = 0;
    const cJSON *v;
    cJSON_ArrayForEach(v, a) {
        if (!cJSON_IsNumber(v) || v->valuedouble != floor(v->valuedouble) || v->valuedouble < 0 || v->valuedouble > 1e6)
            BAD("%s: field \"layout.%s[%d]\": expected a whole number >= 0", what, key, i);
        out[i++] = (int)v->valuedouble;
    }
    return 0;
}

int report_parse_layout(const cJSON *j, const char *what, Layout *lo, char *err, int errlen)
{
    layout_default(lo);
    if (!cJSON_IsObject(j))
        BAD("%s: field \"layout\": expected an object", what);
    if (get_int(j, what, "layout", "dp", 1, &lo->dp, err, errlen) || get_int(j, what, "layout", "tp", 1, &lo->tp, err, errlen)
        || get_int(j, what, "layout", "pp", 1, &lo->pp, err, errlen) || get_int(j, what, "layout", "vp", 1, &lo->vp, err, errlen)
        || get_int(j, what, "layout", "cp", 1, &lo->cp, err, errlen) || get_int(j, what, "layout", "mbs", 1, &lo->mbs, err, errlen)
        || get_int(j, what, "layout", "gbs", 1, &lo->gbs, err, errlen) || get_bool(j, what, "layout", "sp", &lo->sp, err, errlen)
        || get_bool(j, what, "layout", "grad_fp32", &lo->grad_fp32, err, errlen)
        || get_bool(j, what, "layout", "flash", &lo->flash, err, errlen))
        return -1;
    if (lo->pp > LAYOUT_MAX_PP)
        BAD("%s: field \"layout.pp\": at most %d stages", what, LAYOUT_MAX_PP);
    const char *s;
    if (!(s = get_str(j, "optimizer")) || layout_parse_opt(s, &lo->opt))
        BAD("%s: field \"layout.optimizer\": expected zero0..zero3 or distopt", what);
    if (!(s = get_str(j, "precision")) || hw_parse_precision(s, &lo->prec))
        BAD("%s: field \"layout.precision\": expected fp32, bf16, fp16 or fp8", what);
    if ((s = get_str(j, "flops")) && spec_parse_flops(s, &lo->flops))
        BAD("%s: field \"layout.flops\": expected full, causal, 6n or palm", what);
    if (get_int_array(j, what, "stage_layers", lo->pp, lo->layers, err, errlen)
        || get_int_array(j, what, "full_recompute", lo->pp, lo->full_rc, err, errlen)
        || get_int_array(j, what, "selective_recompute", lo->pp, lo->sel_rc, err, errlen))
        return -1;
    return 0;
}

/* ---- plan file ---- */

cJSON *planfile_json(const ModelSpec *m, const HwProfile *hw, const Layout *lo, const CostOpts *o, const Cost *c)
{
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "format", PLAN_FORMAT);
    cJSON_AddItemToObject(j, "model", report_model_json(m));
    char *hwtext = profile_to_json(hw);
    cJSON *hj = hwtext ? cJSON_Parse(hwtext) : NULL;
    free(hwtext);
    cJSON_AddItemToObject(j, "hardware", hj ? hj : cJSON_CreateNull());
    cJSON_AddNumberToObject(j, "gpus", layout_gpus(lo));
    cJSON_AddItemToObject(j, "layout", report_layout_json(lo));
    cJSON *oj = cJSON_AddObjectToObject(j, "options");
    cJSON_AddNumberToObject(oj, "tokens", o->tokens);
    cJSON_AddNumberToObject(oj, "mtbf_gpu_hours", o->mtbf_gpu_hours);
    cJSON_AddNumberToObject(oj, "restart_s", o->restart_s);
    cJSON *pj = report_cost_json(m, lo, c);
    report_add_mfu_bf16_peak(cJSON_GetObjectItemCaseSensitive(pj, "throughput"), hw, lo, c);
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
    int rc = report_write_atomic(path, text, err, errlen);
    free(text);
    return rc;
}

static char *read_all(const char *path, char *err, int errlen)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err, errlen, "%s: cannot open: %s", path, strerror(errno));
        return NULL;
    }
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    while (buf) {
        size_t r = fread(buf + n, 1, cap - n - 1, f);
        n += r;
        if (n < cap - 1)
            break;
        if (cap > (64u << 20)) {
            snprintf(err, errlen, "%s: larger than 64 MiB, not a plan file", path);
            free(buf);
            fclose(f);
            return NULL;
        }
        char *nb = realloc(buf, cap *= 2);
        if (!nb) {
            free(buf);
            buf = NULL;
        } else {
            buf = nb;
        }
    }
    fclose(f);
    if (!buf) {
        snprintf(err, errlen, "%s: out of memory", path);
        return NULL;
    }
    buf[n] = 0;
    return buf;
}

int planfile_read(const char *path, PlanFile *pf, char *err, int errlen)
{
    memset(pf, 0, sizeof *pf);
    char *text = read_all(path, err, errlen);
    if (!text)
        return -1;
    const char *end = NULL;
    cJSON *j = cJSON_ParseWithOpts(text, &end, 1);
    /* the error position points into text: take it before freeing */
    long at = end && end >= text ? (long)(end - text) : -1L;
    free(text);
    int rc = -1;
    if (!j) {
        snprintf(err, errlen, "%s: not valid JSON (near byte %ld)", path, at);
        return -1;
    }
    const char *fmt = get_str(j, "format");
    char e2[256];
    if (!fmt || strcmp(fmt, PLAN_FORMAT) != 0) {
        snprintf(err, errlen, "%s: field \"format\": expected \"%s\"%s%s", path, PLAN_FORMAT,
                 fmt ? ", got " : "", fmt ? fmt : "");
        goto out;
    }
    if (report_parse_model(cJSON_GetObjectItemCaseSensitive(j, "model"), path, &pf->model, err, errlen))
        goto out;
    char *hwtext = cJSON_PrintUnformatted(cJSON_GetObjectItemCaseSensitive(j, "hardware"));
    int hrc = hwtext ? profile_parse_json(hwtext, path, &pf->hw, e2, sizeof e2) : -1;
    if (hrc != 0)
        snprintf(err, errlen, "%s: field \"hardware\": %s", path, hwtext ? e2 : "missing");
    free(hwtext);
    if (hrc != 0)
        goto out;
    if (report_parse_layout(cJSON_GetObjectItemCaseSensitive(j, "layout"), path, &pf->layout, err, errlen))
        goto out;
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

int report_write_atomic(const char *path, const char *text, char *err, int errlen)
{
    if (strcmp(path, "-") == 0) {
        fputs(text, stdout);
        fputc('\n', stdout);
        return 0;
    }
    size_t n = strlen(path) + 32;
    char *tmp = malloc(n);
    if (!tmp)
        BAD("%s: out of memory", path);
    snprintf(tmp, n, "%s.tmp.%ld", path, (long)getpid());
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) {
        snprintf(err, errlen, "%s: cannot create: %s", tmp, strerror(errno));
        free(tmp);
        return -1;
    }
    size_t len = strlen(text), off = 0;
    int ok = 1;
    while (off < len) {
        ssize_t w = write(fd, text + off, len - off);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            ok = 0;
            break;
        }
        off += (size_t)w;
    }
    if (ok && write(fd, "\n", 1) != 1)
        ok = 0;
    if (ok && fsync(fd) != 0)
        ok = 0;
    int saved = errno;
    if (close(fd) != 0 && ok) {
        ok = 0;
        saved = errno;
    }
    if (!ok || rename(tmp, path) != 0) {
        if (ok)
            saved = errno;
        unlink(tmp);
        snprintf(err, errlen, "%s: cannot write: %s", path, strerror(saved));
        free(tmp);
        return -1;
    }
    free(tmp);
    return 0;
}
