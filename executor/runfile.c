/* runfile.c — see runfile.h. */
#include "runfile.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fileio.h"
#include "json.h"

static const char *const mem_names[XM_COUNT] = {"weights", "grads", "optim", "acts", "buffers"};
static const char *const phase_names[PH_COUNT] = {"forward", "backward", "recompute", "tp_comm",
                                                  "pp_wait", "dp_comm", "optimizer"};
_Static_assert(sizeof mem_names / sizeof mem_names[0] == XM_COUNT, "one name per memory category");
_Static_assert(sizeof phase_names / sizeof phase_names[0] == PH_COUNT, "one name per phase");

const char *runfile_mem_name(ExecMem k) { return k >= 0 && k < XM_COUNT ? mem_names[k] : "?"; }
const char *runfile_phase_name(Phase p) { return p >= 0 && p < PH_COUNT ? phase_names[p] : "?"; }

/* ---- the writer ------------------------------------------------------------ */

static double mono_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static cJSON *phases_json(const double *t)
{
    cJSON *p = cJSON_CreateObject();
    for (int k = 0; k < PH_COUNT; k++)
        cJSON_AddNumberToObject(p, phase_names[k], t[k]);
    return p;
}

int runwriter_init(RunWriter *w, const char *path, const char *backend, int world, double tokens_per_step,
                   double flops_per_token, double peak_flops_per_rank, const char *plan, cJSON *model,
                   cJSON *layout, char *err, int errlen)
{
    memset(w, 0, sizeof *w);
    w->last_write = -1;
    w->head = cJSON_CreateObject();
    w->tail = cJSON_CreateObject();
    w->path = path ? strdup(path) : NULL;
    if (!w->head || !w->tail || (path && !w->path)) {
        cJSON_Delete(model);
        cJSON_Delete(layout);
        runwriter_free(w);
        snprintf(err, errlen, "out of memory for run.json");
        return -1;
    }
    cJSON_AddStringToObject(w->head, "format", RUN_FORMAT);
    cJSON_AddStringToObject(w->head, "backend", backend);
    cJSON_AddNumberToObject(w->head, "world", world);
    cJSON_AddNumberToObject(w->head, "tokens_per_step", tokens_per_step);
    cJSON_AddNumberToObject(w->head, "flops_per_token", flops_per_token);
    cJSON_AddNumberToObject(w->head, "peak_flops_per_rank", peak_flops_per_rank);
    if (plan)
        cJSON_AddStringToObject(w->tail, "plan", plan);
    if (model)
        cJSON_AddItemToObject(w->tail, "model", model);
    if (layout)
        cJSON_AddItemToObject(w->tail, "layout", layout);
    return 0;
}

/* One step's row of the history: the phases, then these. */
enum { H_STEP_S = PH_COUNT, H_STEP, H_LOSS, H_TOKS, H_MFU, H_W };

/* The k-th smallest of v[0..n) (v is reordered): Hoare's selection, O(n)
 * expected, no recursion. */
static double select_kth(double *v, size_t n, size_t k)
{
    size_t lo = 0, hi = n - 1;
    while (lo < hi) {
        double pivot = v[lo + (hi - lo) / 2];
        size_t i = lo, j = hi;
        while (i <= j) {
            while (v[i] < pivot)
                i++;
            while (v[j] > pivot)
                j--;
            if (i <= j) {
                double t = v[i];
                v[i] = v[j], v[j] = t;
                i++;
                if (j == 0)
                    break;
                j--;
            }
        }
        if (k <= j)
            hi = j;
        else if (k >= i)
            lo = i;
        else
            return v[k];
    }
    return v[k];
}

/* Median of column k over the averaged steps: all after the first, or the
 * only one. Its scratch is one heap array of the steps (never the stack: a
 * run of a million steps); 0 when there are none or no memory. */
static double median(const RunWriter *w, int k)
{
    size_t first = w->n > 1 ? 1 : 0, n = w->n - first;
    if (w->n <= 0 || n == 0)
        return 0;
    double *v = malloc(n * sizeof *v);
    if (!v)
        return 0;
    for (size_t i = 0; i < n; i++)
        v[i] = w->hist[(first + i) * H_W + k];
    double m = select_kth(v, n, n / 2);
    if (n % 2 == 0) {   // the lower middle is the largest of the lower half
        double lo = v[0];
        for (size_t i = 1; i < n / 2; i++)
            if (v[i] > lo)
                lo = v[i];
        m = 0.5 * (lo + m);
    }
    free(v);
    return m;
}

double runwriter_medians(const RunWriter *w, double med[PH_COUNT])
{
    for (int k = 0; k < PH_COUNT; k++)
        med[k] = median(w, k);
    return median(w, H_STEP_S);
}

int runwriter_step(RunWriter *w, const RunStep *s, char *err, int errlen)
{
    if (w->n == w->cap) {   // a step costs H_W doubles, not a cJSON tree
        if (w->cap > INT_MAX / 2) {
            snprintf(err, errlen, "too many steps for the step history");
            return -1;
        }
        int cap = w->cap ? 2 * w->cap : 64;
        double *h = realloc(w->hist, (size_t)cap * H_W * sizeof *h);
        if (!h) {
            snprintf(err, errlen, "out of memory for the step history");
            return -1;
        }
        w->hist = h;
        w->cap = cap;
    }
    double *h = w->hist + (size_t)w->n++ * H_W;
    memcpy(h, s->t, sizeof s->t);
    h[H_STEP_S] = s->step_s;
    h[H_STEP] = s->step;
    h[H_LOSS] = s->loss;
    h[H_TOKS] = s->tokens_per_s;
    h[H_MFU] = s->mfu;
    w->last_loss = s->loss;
    /* rewriting the whole file costs O(steps): after the first write, wait
     * at least RUNWRITER_EVERY_S and 20 times the last write's duration */
    if (!w->path || (w->last_write >= 0 && mono_s() - w->last_write < RUNWRITER_EVERY_S + 20 * w->write_s))
        return 0;
    return runwriter_write(w, "running", NULL, NULL, 0, err, errlen);
}

static cJSON *steps_json(const RunWriter *w)
{
    cJSON *arr = cJSON_CreateArray();
    for (int i = 0; arr && i < w->n; i++) {
        const double *h = w->hist + (size_t)i * H_W;
        cJSON *o = cJSON_CreateObject();
        cJSON_AddNumberToObject(o, "step", h[H_STEP]);
        cJSON_AddNumberToObject(o, "loss", h[H_LOSS]);
        cJSON_AddNumberToObject(o, "step_s", h[H_STEP_S]);
        cJSON_AddNumberToObject(o, "tokens_per_s", h[H_TOKS]);
        cJSON_AddNumberToObject(o, "mfu", h[H_MFU]);
        cJSON_AddItemToObject(o, "phases_s", phases_json(h));
        cJSON_AddItemToArray(arr, o);
    }
    return arr;
}

void runwriter_extra(RunWriter *w, const char *name, cJSON *obj)
{
    if (!w->extra)
        w->extra = cJSON_CreateObject();
    cJSON_AddItemToObject(w->extra, name, obj);
}

static void add_copies(cJSON *doc, const cJSON *from)
{
    for (const cJSON *c = from ? from->child : NULL; c; c = c->next)
        cJSON_AddItemToObject(doc, c->string, cJSON_Duplicate(c, 1));
}

static cJSON *memory_json(const RunMem *mem, int nmem, double *util_mean)
{
    cJSON *arr = cJSON_CreateArray();
    double usum = 0;
    int un = 0;
    for (int q = 0; q < nmem; q++) {
        const RunMem *r = &mem[q];
        cJSON *m = cJSON_CreateObject();
        cJSON_AddNumberToObject(m, "rank", r->rank);
        cJSON_AddNumberToObject(m, "stage", r->stage);
        cJSON_AddNumberToObject(m, "tp_rank", r->tp_rank);
        cJSON_AddNumberToObject(m, "dp_rank", r->dp_rank);
        double total = 0;
        for (int k = 0; k < XM_COUNT; k++) {
            cJSON_AddNumberToObject(m, mem_names[k], r->bytes[k]);
            total += r->bytes[k];
        }
        cJSON_AddNumberToObject(m, "total", total);
        cJSON_AddNumberToObject(m, "rss_peak", r->rss_peak);
        if (r->device_peak >= 0)
            cJSON_AddNumberToObject(m, "device_peak", r->device_peak);
        if (r->device_total >= 0)
            cJSON_AddNumberToObject(m, "device_total", r->device_total);
        if (r->gpu_util_pct >= 0) {
            cJSON_AddNumberToObject(m, "gpu_util_pct", r->gpu_util_pct);
            usum += r->gpu_util_pct, un++;
        }
        cJSON_AddItemToArray(arr, m);
    }
    *util_mean = un ? usum / un : -1;
    return arr;
}

cJSON *runwriter_doc(const RunWriter *w, const char *status, const char *error, const RunMem *mem, int nmem)
{
    cJSON *doc = cJSON_CreateObject();
    if (!doc)
        return NULL;
    add_copies(doc, w->head);
    cJSON_AddStringToObject(doc, "status", status);
    if (error && error[0])
        cJSON_AddStringToObject(doc, "error", error);
    double med[PH_COUNT], step = runwriter_medians(w, med);
    double tokens = cJSON_GetObjectItem(w->head, "tokens_per_step")->valuedouble;
    double fpt = cJSON_GetObjectItem(w->head, "flops_per_token")->valuedouble;
    double peak = cJSON_GetObjectItem(w->head, "peak_flops_per_rank")->valuedouble;
    double world = cJSON_GetObjectItem(w->head, "world")->valuedouble;
    double ts = step > 0 ? tokens / step : 0, util = -1;
    cJSON *mj = mem ? memory_json(mem, nmem, &util) : NULL;
    cJSON *sum = cJSON_CreateObject();
    cJSON_AddNumberToObject(sum, "steps_averaged", w->n > 1 ? w->n - 1 : w->n);
    cJSON_AddNumberToObject(sum, "step_s", step);
    cJSON_AddNumberToObject(sum, "tokens_per_s", ts);
    cJSON_AddNumberToObject(sum, "mfu", peak > 0 ? ts * fpt / (peak * world) : 0);
    cJSON_AddNumberToObject(sum, "final_loss", w->last_loss);
    cJSON_AddItemToObject(sum, "phases_s", phases_json(med));
    if (util >= 0)   // NVML's busy fraction, mean over the ranks that have it
        cJSON_AddNumberToObject(sum, "gpu_util_pct", util);
    cJSON_AddItemToObject(doc, "summary", sum);
    cJSON_AddItemToObject(doc, "steps", steps_json(w));
    if (mj)
        cJSON_AddItemToObject(doc, "memory", mj);
    add_copies(doc, w->extra);
    add_copies(doc, w->tail);
    return doc;
}

int runwriter_write(RunWriter *w, const char *status, const char *error, const RunMem *mem, int nmem, char *err,
                    int errlen)
{
    if (!w->path)
        return 0;
    double t0 = mono_s();
    w->last_write = t0;
    cJSON *doc = runwriter_doc(w, status, error, mem, nmem);
    char *text = doc ? cJSON_Print(doc) : NULL;
    cJSON_Delete(doc);
    if (!text) {
        snprintf(err, errlen, "out of memory for run.json");
        return -1;
    }
    int rc = util_write_atomic(w->path, text, err, errlen);
    free(text);
    w->write_s = mono_s() - t0;
    return rc;
}

void runwriter_free(RunWriter *w)
{
    if (!w)
        return;
    cJSON_Delete(w->head);
    cJSON_Delete(w->tail);
    cJSON_Delete(w->extra);
    free(w->hist);
    free(w->path);
    memset(w, 0, sizeof *w);
}

/* ---- the reader ------------------------------------------------------------ */

static double num(const cJSON *o, const char *k)
{
    const cJSON *v = cJSON_IsObject(o) ? cJSON_GetObjectItemCaseSensitive(o, k) : NULL;
    return cJSON_IsNumber(v) ? v->valuedouble : NAN;
}

static void str(char *out, size_t n, const cJSON *o, const char *k)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    snprintf(out, n, "%s", cJSON_IsString(v) && v->valuestring ? v->valuestring : "");
}

static void read_steps(RunDoc *d, const cJSON *steps)
{
    int n = cJSON_GetArraySize(steps);
    d->steps = n > 0 ? calloc((size_t)n, sizeof *d->steps) : NULL;
    if (!d->steps)
        return;
    const cJSON *s;
    cJSON_ArrayForEach(s, steps) {
        RunDocStep *r = &d->steps[d->nsteps++];
        r->step = num(s, "step");
        r->loss = num(s, "loss");
        r->step_s = num(s, "step_s");
        if (isnan(r->step_s))
            r->step_s = num(s, "time_s");
        r->tokens_per_s = num(s, "tokens_per_s");
        r->mfu = num(s, "mfu");
    }
}

static void read_memory(RunDoc *d, const cJSON *mem)
{
    int n = cJSON_GetArraySize(mem);
    d->mem = n > 0 ? calloc((size_t)n, sizeof *d->mem) : NULL;
    if (!d->mem)
        return;
    const cJSON *r;
    cJSON_ArrayForEach(r, mem) {
        if (!cJSON_IsObject(r))
            continue;
        RunDocMem *m = &d->mem[d->nmem++];
        m->rank = num(r, "rank");
        m->stage = num(r, "stage");
        m->tp_rank = num(r, "tp_rank");
        m->dp_rank = num(r, "dp_rank");
        for (int k = 0; k < XM_COUNT; k++)
            m->bytes[k] = num(r, mem_names[k]);
        m->rss_peak = num(r, "rss_peak");
        m->device_peak = num(r, "device_peak");
        m->device_total = num(r, "device_total");
        m->gpu_util_pct = num(r, "gpu_util_pct");
    }
}

static void read_proxy(RunDoc *d, const cJSON *px)
{
    RunDocProxy *p = &d->proxy;
    d->has_proxy = 1;
    p->stage = num(px, "stage");
    p->micro_batches_run = num(px, "micro_batches_run");
    p->predicted_compute_mb_s = num(px, "predicted_compute_mb_s");
    p->predicted_fwd_mb_s = num(px, "predicted_fwd_mb_s");
    p->predicted_bwd_mb_s = num(px, "predicted_bwd_mb_s");
    p->predicted_recompute_mb_s = num(px, "predicted_recompute_mb_s");
    p->measured_compute_mb_s = num(px, "measured_compute_mb_s");
    p->measured_fwd_mb_s = num(px, "measured_fwd_mb_s");
    p->measured_bwd_mb_s = num(px, "measured_bwd_mb_s");
    p->measured_recompute_mb_s = num(px, "measured_recompute_mb_s");
}

int runfile_parse(const char *text, RunDoc *d, char *err, int errlen)
{
    memset(d, 0, sizeof *d);
    cJSON *j = cJSON_Parse(text);
    if (!cJSON_IsObject(j)) {
        snprintf(err, errlen, "not a JSON object (cut short: still being written?)");
        cJSON_Delete(j);
        return -1;
    }
    char dup[200];
    if (util_json_duplicate(j, dup, sizeof dup)) {
        snprintf(err, errlen, "field \"%s\": appears twice", dup);
        cJSON_Delete(j);
        return -1;
    }
    const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(j, "format");
    if (cJSON_IsString(fmt) && strncmp(fmt->valuestring, "ultraplan.run/", 14) != 0) {
        snprintf(err, errlen, "format is \"%.40s\", expected %s", fmt->valuestring, RUN_FORMAT);
        cJSON_Delete(j);
        return -1;
    }
    const cJSON *steps = cJSON_GetObjectItemCaseSensitive(j, "steps"),
                *mem = cJSON_GetObjectItemCaseSensitive(j, "memory");
    if ((steps && !cJSON_IsArray(steps)) || (mem && !cJSON_IsArray(mem))) {
        snprintf(err, errlen, "\"%s\" is not an array", steps && !cJSON_IsArray(steps) ? "steps" : "memory");
        cJSON_Delete(j);
        return -1;
    }
    str(d->format, sizeof d->format, j, "format");
    str(d->backend, sizeof d->backend, j, "backend");
    str(d->status, sizeof d->status, j, "status");
    str(d->error, sizeof d->error, j, "error");
    d->world = num(j, "world");
    const cJSON *mj = cJSON_GetObjectItemCaseSensitive(j, "model");
    str(d->model_name, sizeof d->model_name, mj, "name");
    d->model_params = num(mj, "params");
    d->tokens_per_step = num(j, "tokens_per_step");
    d->flops_per_token = num(j, "flops_per_token");
    d->peak_flops_per_rank = num(j, "peak_flops_per_rank");
    const cJSON *sum = cJSON_GetObjectItemCaseSensitive(j, "summary");
    d->has_summary = cJSON_IsObject(sum);
    d->steps_averaged = num(sum, "steps_averaged");
    d->step_s = num(sum, "step_s");
    d->tokens_per_s = num(sum, "tokens_per_s");
    d->mfu = num(sum, "mfu");
    d->final_loss = num(sum, "final_loss");
    d->gpu_util_pct = num(sum, "gpu_util_pct");
    const cJSON *ph = cJSON_IsObject(sum) ? cJSON_GetObjectItemCaseSensitive(sum, "phases_s") : NULL;
    d->has_phases = cJSON_IsObject(ph);
    for (int k = 0; k < PH_COUNT; k++)
        d->phases[k] = num(ph, phase_names[k]);
    if (steps)
        read_steps(d, steps);
    d->has_memory = cJSON_IsArray(mem);
    if (mem)
        read_memory(d, mem);
    const cJSON *px = cJSON_GetObjectItemCaseSensitive(j, "proxy");
    if (cJSON_IsObject(px))
        read_proxy(d, px);
    cJSON_Delete(j);
    return 0;
}

int runfile_read(const char *path, RunDoc *d, char *err, int errlen)
{
    memset(d, 0, sizeof *d);
    char why[512];
    char *text = util_slurp(path, (size_t)64 << 20, NULL, why, sizeof why);
    if (!text) {
        snprintf(err, errlen, "%s", why);
        return -1;
    }
    int rc = runfile_parse(text, d, why, sizeof why);
    free(text);
    if (rc != 0)
        snprintf(err, errlen, "%.300s: %s", path, why);
    return rc;
}

void runfile_free(RunDoc *d)
{
    if (!d)
        return;
    free(d->steps);
    free(d->mem);
    memset(d, 0, sizeof *d);
}
