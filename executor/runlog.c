/* runlog.c — see runlog.h. */
#include "runlog.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void runlog_init(RunLog *r, double flops_per_token, double peak)
{
    memset(r, 0, sizeof *r);
    r->flops_per_token = flops_per_token;
    r->peak = peak;
    r->steps = cJSON_CreateArray();
}

double runlog_rss_peak(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    if (!f)
        return 0;
    char line[256];
    double kb = 0;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "VmHWM: %lf kB", &kb) == 1)
            break;
    fclose(f);
    return kb * 1024.0;
}

cJSON *runlog_phases_json(const double *t)
{
    cJSON *p = cJSON_CreateObject();
    for (int k = 0; k < PH_COUNT; k++)
        cJSON_AddNumberToObject(p, exec_phase_name(k), t[k]);
    return p;
}

void runlog_step(RunLog *r, const Exec *e, const StepStats *st, double *tok_s, double *mfu)
{
    /* the phases of one rank, the one with the most compute (the bottleneck):
     * a maximum per phase over ranks would add one rank's compute to another's
     * wait for it, and the phases would no longer sum to the step */
    double t[PH_COUNT];
    memcpy(t, st->t, sizeof t);
    dist_world_bcast_doubles(t, PH_COUNT, dist_world_argmax(t[PH_FWD] + t[PH_BWD] + t[PH_RECOMPUTE]));
    double tokens = (double)e->lo.gbs * e->T;
    double ts = tokens / st->step_s;
    double u = r->peak > 0 ? ts * r->flops_per_token / (r->peak * e->d.world) : 0;
    if (tok_s)
        *tok_s = ts;
    if (mfu)
        *mfu = u;
    r->n++;
    if (e->d.rank != 0)
        return;
    cJSON *s = cJSON_CreateObject();
    cJSON_AddNumberToObject(s, "step", e->step);
    cJSON_AddNumberToObject(s, "loss", st->loss);
    cJSON_AddNumberToObject(s, "step_s", st->step_s);
    cJSON_AddNumberToObject(s, "tokens_per_s", ts);
    cJSON_AddNumberToObject(s, "mfu", u);
    cJSON_AddItemToObject(s, "phases_s", runlog_phases_json(t));
    cJSON_AddItemToArray(r->steps, s);
    if (r->n > 1) {   // the first step is warm-up
        if (r->nsum == r->cap) {
            r->cap = r->cap ? 2 * r->cap : 64;
            r->hist = realloc(r->hist, (size_t)r->cap * (PH_COUNT + 1) * sizeof *r->hist);
        }
        double *h = r->hist + (size_t)r->nsum * (PH_COUNT + 1);
        memcpy(h, t, sizeof t);
        h[PH_COUNT] = st->step_s;
        r->nsum++;
    }
    r->last_loss = st->loss;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

double runlog_median(const double *hist, int n, int k)
{
    if (n <= 0)
        return 0;
    double v[n];
    for (int i = 0; i < n; i++)
        v[i] = hist[(size_t)i * (PH_COUNT + 1) + k];
    qsort(v, n, sizeof v[0], cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static double median(const RunLog *r, int k) { return runlog_median(r->hist, r->nsum, k); }

cJSON *runlog_memory_row(int rank, int stage, int tp_rank, int dp_rank, const double *mem, double rss_peak)
{
    cJSON *m = cJSON_CreateObject();
    cJSON_AddNumberToObject(m, "rank", rank);
    cJSON_AddNumberToObject(m, "stage", stage);
    cJSON_AddNumberToObject(m, "tp_rank", tp_rank);
    cJSON_AddNumberToObject(m, "dp_rank", dp_rank);
    double total = 0;
    for (int k = 0; k < XM_COUNT; k++) {
        cJSON_AddNumberToObject(m, exec_mem_name(k), mem[k]);
        total += mem[k];
    }
    cJSON_AddNumberToObject(m, "total", total);
    cJSON_AddNumberToObject(m, "rss_peak", rss_peak);
    return m;
}

cJSON *runlog_finish(RunLog *r, const Exec *e)
{
    int nv = XM_COUNT + 5;
    double mine[XM_COUNT + 5];
    exec_memory(e, mine);
    mine[XM_COUNT] = runlog_rss_peak();
    mine[XM_COUNT + 1] = e->d.pp_rank;
    mine[XM_COUNT + 2] = e->d.tp_rank;
    mine[XM_COUNT + 3] = e->d.dp_rank;
    mine[XM_COUNT + 4] = 0;
    double all[nv * (e->d.world > 0 ? e->d.world : 1)];
    dist_world_gather_doubles(mine, nv, all);
    if (e->d.rank != 0) {
        cJSON_Delete(r->steps);
        r->steps = NULL;
        free(r->hist);
        r->hist = NULL;
        return NULL;
    }
    cJSON *doc = cJSON_CreateObject();
    cJSON_AddStringToObject(doc, "format", RUN_FORMAT);
    cJSON_AddStringToObject(doc, "backend", "cpu");
    cJSON_AddNumberToObject(doc, "world", e->d.world);
    cJSON_AddNumberToObject(doc, "tokens_per_step", (double)e->lo.gbs * e->T);
    cJSON_AddNumberToObject(doc, "flops_per_token", r->flops_per_token);
    cJSON_AddNumberToObject(doc, "peak_flops_per_rank", r->peak);
    cJSON *sum = cJSON_CreateObject();
    double step = median(r, PH_COUNT);
    double mean_t[PH_COUNT];
    for (int k = 0; k < PH_COUNT; k++)
        mean_t[k] = median(r, k);
    double ts = step > 0 ? (double)e->lo.gbs * e->T / step : 0;
    cJSON_AddNumberToObject(sum, "steps_averaged", r->nsum);
    cJSON_AddNumberToObject(sum, "step_s", step);
    cJSON_AddNumberToObject(sum, "tokens_per_s", ts);
    cJSON_AddNumberToObject(sum, "mfu", r->peak > 0 ? ts * r->flops_per_token / (r->peak * e->d.world) : 0);
    cJSON_AddNumberToObject(sum, "final_loss", r->last_loss);
    free(r->hist);
    r->hist = NULL;
    cJSON_AddItemToObject(sum, "phases_s", runlog_phases_json(mean_t));
    cJSON_AddItemToObject(doc, "summary", sum);
    cJSON_AddItemToObject(doc, "steps", r->steps);
    r->steps = NULL;
    cJSON *mem = cJSON_CreateArray();
    for (int q = 0; q < e->d.world; q++) {
        const double *v = all + (size_t)q * nv;
        cJSON_AddItemToArray(mem, runlog_memory_row(q, (int)v[XM_COUNT + 1], (int)v[XM_COUNT + 2],
                                                    (int)v[XM_COUNT + 3], v, v[XM_COUNT]));
    }
    cJSON_AddItemToObject(doc, "memory", mem);
    return doc;
}
