/* curun.c — see curun.h. */
#include "curun.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "cuexec.h"
#include "cunvml.h"
#include "runlog.h"

int curun_multi_gpu(void) { return cucomm_available(); }

/* Rows of k doubles, one per rank, on every rank. One rank: a copy. */
static void world_rows(const double *mine, int k, double *all, int world)
{
    if (world == 1)
        memcpy(all, mine, (size_t)k * sizeof *all);
    else
        dist_world_allgather_doubles(mine, k, all);
}

/* per rank in run.json's memory array */
enum { MR_STAGE = XM_COUNT, MR_TP, MR_DP, MR_RSS, MR_DEV_PEAK, MR_DEV_TOTAL, MR_UTIL, MR_COUNT };

static cJSON *memory_json(const CuExec *e, double util, int rank, int world)
{
    double mine[MR_COUNT], *all = calloc((size_t)world * MR_COUNT, sizeof *all);
    if (!all)
        kc_fail("calloc", "out of host memory", __FILE__, __LINE__);
    memcpy(mine, e->mem, sizeof e->mem);
    mine[MR_STAGE] = e->sh.stage;
    mine[MR_TP] = e->d.tp_rank;
    mine[MR_DP] = e->d.dp_rank;
    mine[MR_RSS] = runlog_rss_peak();
    mine[MR_DEV_PEAK] = cuexec_peak_bytes(e);   // total − least free: context included
    mine[MR_DEV_TOTAL] = (double)e->dev_total;
    mine[MR_UTIL] = util;
    world_rows(mine, MR_COUNT, all, world);
    cJSON *mem = cJSON_CreateArray();
    for (int q = 0; q < world; q++) {
        const double *v = all + (size_t)q * MR_COUNT;
        cJSON *r = runlog_memory_row(q, (int)v[MR_STAGE], (int)v[MR_TP], (int)v[MR_DP], v, v[MR_RSS]);
        cJSON_AddNumberToObject(r, "device_peak", v[MR_DEV_PEAK]);
        cJSON_AddNumberToObject(r, "device_total", v[MR_DEV_TOTAL]);
        if (v[MR_UTIL] >= 0)
            cJSON_AddNumberToObject(r, "gpu_util_pct", v[MR_UTIL]);
        cJSON_AddItemToArray(mem, r);
    }
    free(all);
    return mem;
}

/* The step as run.json reports it: the phases of the busiest rank (most
 * forward + backward + recompute, as runlog.c), the slowest rank's step time. */
static void step_view(const CuStepStats *st, double *t, double *step_s, int rank, int world)
{
    double mine[PH_COUNT + 1], *all = calloc((size_t)world * (PH_COUNT + 1), sizeof *all);
    if (!all)
        kc_fail("calloc", "out of host memory", __FILE__, __LINE__);
    memcpy(mine, st->t, sizeof st->t);
    mine[PH_COUNT] = st->step_s;
    world_rows(mine, PH_COUNT + 1, all, world);
    int busiest = 0;
    double most = -1;
    *step_s = 0;
    for (int q = 0; q < world; q++) {
        const double *v = all + (size_t)q * (PH_COUNT + 1);
        double busy = v[PH_FWD] + v[PH_BWD] + v[PH_RECOMPUTE];
        if (busy > most)
            most = busy, busiest = q;
        if (v[PH_COUNT] > *step_s)
            *step_s = v[PH_COUNT];
    }
    memcpy(t, all + (size_t)busiest * (PH_COUNT + 1), PH_COUNT * sizeof *t);
    free(all);
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
    cJSON_AddNumberToObject(x, "flops_per_token_model", train_model_flops_per_token(m, lo));
    cJSON_AddStringToObject(x, "mfu_note", "flops_per_token and mfu are this rank's share: the stage's layers at one "
                                           "tp rank's shapes (+ the LM head on the last stage), per token of the "
                                           "micro-batches run; no bubble, no communication");
    return x;
}

/* Whether any rank failed (collective over the world when several). */
static int any_failed(int bad, int world)
{
    return world > 1 ? !dist_world_min(!bad) : bad;
}

static void last_good(char *buf, size_t n, const CuRunOpts *o, int step)
{
    if (!o->ckpt_dir)
        snprintf(buf, n, "none (no --checkpoint-dir)");
    else if (step < 0)
        snprintf(buf, n, "none written yet in %s", o->ckpt_dir);
    else
        exec_ckpt_path(buf, n, o->ckpt_dir, step);
}

/* err extended by ". PREFIX" and where the last good checkpoint is. */
static void add_last_good(char *err, int errlen, const char *prefix, const CuRunOpts *o, int saved)
{
    char where[1100], msg[2048];
    last_good(where, sizeof where, o, saved);
    snprintf(msg, sizeof msg, "%s. %s: %s", err, prefix, where);
    snprintf(err, errlen, "%s", msg);
}

/* After a step: the periodic, final or signalled checkpoint; 0, or -1 with
 * err (every rank). *sig: the stop signal agreed over the ranks, 0 none. */
static int after_step(CuExec *e, const CuRunOpts *o, int *saved, int *sig, char *err, int errlen)
{
    *sig = o->stop ? o->stop() : 0;
    int at_end = e->step == o->steps;
    if (!o->ckpt_dir || !((o->ckpt_every && e->step % o->ckpt_every == 0) || at_end || *sig))
        return 0;
    double c0 = dist_now();
    if (cuexec_save(e, o->ckpt_dir, err, errlen) != 0) {
        add_last_good(err, errlen, "The previous checkpoint is still valid", o, *saved);
        return -1;
    }
    *saved = e->step;
    dist_watchdog_floor(3 * (dist_now() - c0));
    return 0;
}

cJSON *curun(const ModelSpec *m, const HwProfile *hw, const Layout *lo, const CuRunOpts *o, char *err, int errlen)
{
    CuExec e;
    int proxy = o->proxy_stage >= 0, rank = 0, world = 1;
    if (!proxy)
        dist_world_init(&rank, &world);   // MPI is up already: learns rank and size
    err[0] = 0;
    double t0 = dist_now();
    int bad = proxy ? cuexec_init_proxy(&e, m, lo, o->proxy_stage, o->opt.seed, err, errlen)
                    : cuexec_init(&e, m, lo, &o->opt, o->data, err, errlen);
    dist_watchdog_floor(3 * (dist_now() - t0));   // host-side weight init differs by stage
    if (any_failed(bad, world)) {
        if (!bad)
            err[0] = 0;   // another rank says why
        cuexec_free(&e);
        return NULL;
    }
    FILE *log = rank == 0 ? o->log : NULL;
    int saved = -1;   // step of the last checkpoint written or resumed from
    if (o->resume && !proxy) {
        if (cuexec_load(&e, o->ckpt_dir, err, errlen) != 0) {   // every rank has the message
            if (rank != 0)
                err[0] = 0;
            cuexec_free(&e);
            return NULL;
        }
        saved = e.step;
        if (log)
            fprintf(log, "resumed from %s at step %d\n", o->ckpt_dir, e.step);
    }
    CuNvml *nv = cunvml_open(e.device);
    double util_sum = 0;
    int util_n = 0;
    /* MFU's FLOPs per token: the model's; proxy: this rank's share of them
     * (its stage's layers at tp-sharded shapes), what this GPU really runs */
    double fpt = proxy ? proxy_flops_per_token(m, lo, e.sh.stage) : train_model_flops_per_token(m, lo);
    double peak = hw->peak[PREC_BF16];
    /* tokens per step: the global batch (proxy: this GPU's micro-batches) */
    double tokens = proxy ? (double)e.nmb * e.sh.N : (double)lo->gbs * e.sh.T;
    double *hist = calloc((size_t)(o->steps > 0 ? o->steps : 1) * (PH_COUNT + 1), sizeof *hist);
    cJSON *steps = cJSON_CreateArray();
    if (!hist || !steps) {   // the other ranks wait in their first step until the watchdog ends them
        snprintf(err, errlen, "out of host memory for the step history");
        goto fail;
    }
    double last_loss = 0;
    int nsum = 0;
    if (log)
        fprintf(log, "run (cuda%s): %s, %d layers%s, %d micro-batches of %d x %d tokens, %.3g parameters on this GPU"
                     "\n", proxy ? " stage proxy" : "", m->name, e.sh.layers, proxy ? " of one stage" : "", e.nmb, e.sh.B,
                e.sh.T, (double)e.n);
    if (log && proxy)
        fprintf(log, "MFU counts this rank's share of the model FLOPs: %.4g per token of %.4g\n", fpt,
                train_model_flops_per_token(m, lo));
    if (log && world > 1)
        fprintf(log, "%d ranks, one GPU each (dp %d tp %d pp %d vp %d%s), NCCL\n", world, e.dp, e.tp, e.pp, e.vp,
                e.zero1 ? " zero1" : "");
    int nrun = o->steps - e.step > 0 ? o->steps - e.step : 0;   // steps this process runs (fewer on a signal)
    for (int i = 0; i < nrun; i++) {
        CuStepStats st;
        bad = cuexec_step(&e, &st, err, errlen) != 0;
        if (bad && !proxy)   // the bad step is never checkpointed
            add_last_good(err, errlen, "Last good checkpoint", o, saved);
        if (any_failed(bad, world)) {
            if (!bad)
                err[0] = 0;   // another rank says why
            goto fail;
        }
        dist_watchdog_floor(3 * st.step_s);
        int u = cunvml_util(nv);
        if (u >= 0 && (i > 0 || nrun == 1))
            util_sum += u, util_n++;
        double t[PH_COUNT], step_s;
        step_view(&st, t, &step_s, rank, world);
        double ts = tokens / step_s, mfu = peak > 0 ? ts * fpt / (peak * world) : 0;
        cJSON *s = cJSON_CreateObject();
        cJSON_AddNumberToObject(s, "step", e.step);
        cJSON_AddNumberToObject(s, "loss", st.loss);
        cJSON_AddNumberToObject(s, "step_s", step_s);
        cJSON_AddNumberToObject(s, "tokens_per_s", ts);
        cJSON_AddNumberToObject(s, "mfu", mfu);
        cJSON_AddItemToObject(s, "phases_s", runlog_phases_json(t));
        cJSON_AddItemToArray(steps, s);
        if (i > 0 || nrun == 1) {   // the first step is warm-up
            double *h = hist + (size_t)nsum++ * (PH_COUNT + 1);
            memcpy(h, t, sizeof t);
            h[PH_COUNT] = step_s;
        }
        last_loss = st.loss;
        if (log) {
            fprintf(log, "step %4d/%d | loss %.4f | %8.1f ms | %9.0f tok/s | MFU %5.1f%%\n", e.step, o->steps,
                    st.loss, 1e3 * step_s, ts, 100 * mfu);
            fflush(log);
        }
        int sig = 0;
        bad = !proxy && after_step(&e, o, &saved, &sig, err, errlen) != 0;
        if (bad) {   // every rank has the message; rank 0 says it
            if (rank != 0)
                err[0] = 0;
            goto fail;
        }
        if (sig && e.step < o->steps) {
            char where[1100];
            last_good(where, sizeof where, o, saved);
            if (log) {
                fprintf(log, "ultraplan run: %s received: stopped after step %d; checkpoint: %s%s\n",
                        sig == SIGTERM ? "SIGTERM" : "SIGUSR1", e.step, where,
                        o->ckpt_dir ? " (continue with --resume)" : "");
                fflush(log);
            }
            break;
        }
    }
    double med[PH_COUNT], step = runlog_median(hist, nsum, PH_COUNT);
    for (int k = 0; k < PH_COUNT; k++)
        med[k] = runlog_median(hist, nsum, k);
    free(hist);
    double ts = step > 0 ? tokens / step : 0, util = util_n ? util_sum / util_n : -1;
    cunvml_close(nv);
    cJSON *doc = cJSON_CreateObject();
    cJSON_AddStringToObject(doc, "format", RUN_FORMAT);
    cJSON_AddStringToObject(doc, "backend", proxy ? "cuda-proxy" : "cuda");
    cJSON_AddNumberToObject(doc, "world", world);
    cJSON_AddNumberToObject(doc, "tokens_per_step", tokens);
    cJSON_AddNumberToObject(doc, "flops_per_token", fpt);
    cJSON_AddNumberToObject(doc, "peak_flops_per_rank", peak);
    cJSON *sum = cJSON_CreateObject();
    cJSON_AddNumberToObject(sum, "steps_averaged", nsum);
    cJSON_AddNumberToObject(sum, "step_s", step);
    cJSON_AddNumberToObject(sum, "tokens_per_s", ts);
    cJSON_AddNumberToObject(sum, "mfu", peak > 0 ? ts * fpt / (peak * world) : 0);
    cJSON_AddNumberToObject(sum, "final_loss", last_loss);
    cJSON_AddItemToObject(sum, "phases_s", runlog_phases_json(med));
    cJSON *mem = memory_json(&e, util, rank, world);
    double usum = 0;
    int un = 0;
    for (cJSON *r = mem->child; r; r = r->next) {
        const cJSON *u = cJSON_GetObjectItem(r, "gpu_util_pct");
        if (u)
            usum += u->valuedouble, un++;
    }
    if (un)   // NVML's busy fraction, mean over the ranks that have it
        cJSON_AddNumberToObject(sum, "gpu_util_pct", usum / un);
    cJSON_AddItemToObject(doc, "summary", sum);
    cJSON_AddItemToObject(doc, "steps", steps);
    cJSON_AddItemToObject(doc, "memory", mem);
    if (proxy) {
        cJSON *px = proxy_json(&e, m, hw, lo, med);
        if (log) {
            const cJSON *pc = cJSON_GetObjectItem(px, "predicted_compute_mb_s"),
                        *mc = cJSON_GetObjectItem(px, "measured_compute_mb_s"),
                        *er = cJSON_GetObjectItem(px, "error_pct");
            fprintf(log, "proxy stage %d: per micro-batch predicted %.2f ms (communication left out), measured "
                         "%.2f ms, error %+.1f %%\n", e.sh.stage, 1e3 * pc->valuedouble, 1e3 * mc->valuedouble,
                    er->valuedouble);
        }
        cJSON_AddItemToObject(doc, "proxy", px);
    }
    cuexec_free(&e);
    return doc;
fail:
    cJSON_Delete(steps);
    free(hist);
    cunvml_close(nv);
    cuexec_free(&e);
    return NULL;
}
