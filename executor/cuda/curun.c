/* curun.c — see curun.h. */
#include "curun.h"

#include <stdlib.h>
#include <string.h>

#include "cuexec.h"
#include "runlog.h"

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Median of column k of hist (n rows of PH_COUNT + 1). */
static double median(const double *hist, int n, int k)
{
    if (n <= 0)
        return 0;
    double *v = malloc((size_t)n * sizeof *v);
    if (!v)
        return 0;
    for (int i = 0; i < n; i++)
        v[i] = hist[(size_t)i * (PH_COUNT + 1) + k];
    qsort(v, n, sizeof *v, cmp_double);
    double r = n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
    free(v);
    return r;
}

static cJSON *phases_json(const double *t)
{
    cJSON *p = cJSON_CreateObject();
    for (int k = 0; k < PH_COUNT; k++)
        cJSON_AddNumberToObject(p, exec_phase_name(k), t[k]);
    return p;
}

static cJSON *memory_json(const CuExec *e)
{
    cJSON *mem = cJSON_CreateArray(), *r = cJSON_CreateObject();
    cJSON_AddNumberToObject(r, "rank", 0);
    cJSON_AddNumberToObject(r, "stage", e->sh.stage);
    cJSON_AddNumberToObject(r, "tp_rank", 0);
    cJSON_AddNumberToObject(r, "dp_rank", 0);
    double total = 0;
    for (int k = 0; k < XM_COUNT; k++) {
        cJSON_AddNumberToObject(r, exec_mem_name(k), e->mem[k]);
        total += e->mem[k];
    }
    cJSON_AddNumberToObject(r, "total", total);
    cJSON_AddNumberToObject(r, "rss_peak", runlog_rss_peak());
    cJSON_AddNumberToObject(r, "device_peak", cuexec_peak_bytes(e));   // total − least free: context included
    cJSON_AddNumberToObject(r, "device_total", (double)e->dev_total);
    cJSON_AddItemToArray(mem, r);
    return mem;
}

static cJSON *proxy_json(const CuExec *e, const ModelSpec *m, const HwProfile *hw, const Layout *lo,
                         const double *med)
{
    ProxyPredict p;
    proxy_predict(m, hw, lo, e->sh.stage, &p);
    int nmb = e->nmb;
    double meas = (med[PH_FWD] + med[PH_BWD] + med[PH_RECOMPUTE]) / nmb;
    cJSON *x = cJSON_CreateObject();
    cJSON_AddNumberToObject(x, "stage", e->sh.stage);
    cJSON_AddNumberToObject(x, "pp", lo->pp);
    cJSON_AddNumberToObject(x, "tp", lo->tp);
    cJSON_AddNumberToObject(x, "layers", e->sh.layers);
    cJSON_AddNumberToObject(x, "full_recompute", e->sh.full_rc);
    cJSON_AddNumberToObject(x, "selective_recompute", e->sh.sel_rc);
    cJSON_AddNumberToObject(x, "micro_batches_run", nmb);
    cJSON_AddNumberToObject(x, "micro_batches_plan", layout_microbatches(lo));
    cJSON_AddNumberToObject(x, "params_per_rank", e->sh.stage_params);
    cJSON_AddNumberToObject(x, "predicted_stage_mb_s", p.stage_mb_s);
    cJSON_AddNumberToObject(x, "predicted_comm_mb_s", p.comm_mb_s);
    cJSON_AddNumberToObject(x, "predicted_compute_mb_s", p.compute_mb_s);
    cJSON_AddNumberToObject(x, "predicted_fwd_mb_s", p.fwd_mb_s);
    cJSON_AddNumberToObject(x, "predicted_bwd_mb_s", p.bwd_mb_s);
    cJSON_AddNumberToObject(x, "predicted_recompute_mb_s", p.rc_mb_s);
    cJSON_AddNumberToObject(x, "predicted_edge_mb_s", p.edge_mb_s);
    cJSON_AddNumberToObject(x, "measured_compute_mb_s", meas);
    cJSON_AddNumberToObject(x, "measured_fwd_mb_s", med[PH_FWD] / nmb);
    cJSON_AddNumberToObject(x, "measured_bwd_mb_s", med[PH_BWD] / nmb);
    cJSON_AddNumberToObject(x, "measured_recompute_mb_s", med[PH_RECOMPUTE] / nmb);
    cJSON_AddNumberToObject(x, "error_pct", p.compute_mb_s > 0 ? 100.0 * (meas - p.compute_mb_s) / p.compute_mb_s : 0);
    cJSON_AddStringToObject(x, "note", "communication (TP/SP, PP) not executed; compared with time_stage_mb minus its "
                                       "predicted exposed communication");
    return x;
}

cJSON *curun(const ModelSpec *m, const HwProfile *hw, const Layout *lo, const CuRunOpts *o, char *err, int errlen)
{
    CuExec e;
    int proxy = o->proxy_stage >= 0;
    int bad = proxy ? cuexec_init_proxy(&e, m, lo, o->proxy_stage, o->opt.seed, err, errlen)
                    : cuexec_init(&e, m, lo, &o->opt, o->data, err, errlen);
    if (bad) {
        cuexec_free(&e);
        return NULL;
    }
    double fpt = train_model_flops_per_token(m, lo), peak = hw->peak[PREC_BF16];
    double tokens = (double)e.nmb * e.sh.N;   // this GPU's tokens per step (proxy: of the micro-batches it runs)
    double *hist = calloc((size_t)o->steps * (PH_COUNT + 1), sizeof *hist);
    cJSON *steps = cJSON_CreateArray();
    double last_loss = 0;
    int nsum = 0;
    if (o->log)
        fprintf(o->log, "run (cuda%s): %s, %d layers%s, %d micro-batches of %d x %d tokens, %.3g parameters on this GPU\n",
                proxy ? " stage proxy" : "", m->name, e.sh.layers, proxy ? " of one stage" : "", e.nmb, e.sh.B,
                e.sh.T, (double)e.n);
    for (int i = 0; i < o->steps; i++) {
        CuStepStats st;
        if (cuexec_step(&e, &st, err, errlen) != 0) {
            cJSON_Delete(steps);
            free(hist);
            cuexec_free(&e);
            return NULL;
        }
        double ts = tokens / st.step_s, u = peak > 0 ? ts * fpt / peak : 0;
        cJSON *s = cJSON_CreateObject();
        cJSON_AddNumberToObject(s, "step", e.step);
        cJSON_AddNumberToObject(s, "loss", st.loss);
        cJSON_AddNumberToObject(s, "step_s", st.step_s);
        cJSON_AddNumberToObject(s, "tokens_per_s", ts);
        cJSON_AddNumberToObject(s, "mfu", u);
        cJSON_AddItemToObject(s, "phases_s", phases_json(st.t));
        cJSON_AddItemToArray(steps, s);
        if (i > 0 || o->steps == 1) {   // the first step is warm-up
            double *h = hist + (size_t)nsum++ * (PH_COUNT + 1);
            memcpy(h, st.t, sizeof st.t);
            h[PH_COUNT] = st.step_s;
        }
        last_loss = st.loss;
        if (o->log) {
            fprintf(o->log, "step %4d/%d | loss %.4f | %8.1f ms | %9.0f tok/s | MFU %5.1f%%\n", e.step, o->steps,
                    st.loss, 1e3 * st.step_s, ts, 100 * u);
            fflush(o->log);
        }
    }
    double med[PH_COUNT], step = median(hist, nsum, PH_COUNT);
    for (int k = 0; k < PH_COUNT; k++)
        med[k] = median(hist, nsum, k);
    free(hist);
    double ts = step > 0 ? tokens / step : 0;
    cJSON *doc = cJSON_CreateObject();
    cJSON_AddStringToObject(doc, "format", RUN_FORMAT);
    cJSON_AddStringToObject(doc, "backend", proxy ? "cuda-proxy" : "cuda");
    cJSON_AddNumberToObject(doc, "world", 1);
    cJSON_AddNumberToObject(doc, "tokens_per_step", tokens);
    cJSON_AddNumberToObject(doc, "flops_per_token", fpt);
    cJSON_AddNumberToObject(doc, "peak_flops_per_rank", peak);
    cJSON *sum = cJSON_CreateObject();
    cJSON_AddNumberToObject(sum, "steps_averaged", nsum);
    cJSON_AddNumberToObject(sum, "step_s", step);
    cJSON_AddNumberToObject(sum, "tokens_per_s", ts);
    cJSON_AddNumberToObject(sum, "mfu", peak > 0 ? ts * fpt / peak : 0);
    cJSON_AddNumberToObject(sum, "final_loss", last_loss);
    cJSON_AddItemToObject(sum, "phases_s", phases_json(med));
    cJSON_AddItemToObject(doc, "summary", sum);
    cJSON_AddItemToObject(doc, "steps", steps);
    cJSON_AddItemToObject(doc, "memory", memory_json(&e));
    if (proxy) {
        cJSON *px = proxy_json(&e, m, hw, lo, med);
        if (o->log) {
            const cJSON *pc = cJSON_GetObjectItem(px, "predicted_compute_mb_s"),
                        *mc = cJSON_GetObjectItem(px, "measured_compute_mb_s"),
                        *er = cJSON_GetObjectItem(px, "error_pct");
            fprintf(o->log, "proxy stage %d: per micro-batch predicted %.2f ms (communication left out), measured "
                            "%.2f ms, error %+.1f %%\n", e.sh.stage, 1e3 * pc->valuedouble, 1e3 * mc->valuedouble,
                    er->valuedouble);
        }
        cJSON_AddItemToObject(doc, "proxy", px);
    }
    cuexec_free(&e);
    return doc;
}
