/* curun.c — see curun.h. */
#include "curun.h"

#include <stdlib.h>
#include <string.h>

#include "cuexec.h"
#include "cufp8.h"
#include "cunvml.h"

typedef struct {
    CuExec e;
    int proxy;
    CuNvml *nv;
    int nsteps;                  // steps taken by this process
    double util_first;           // the first step's busy %, < 0 none
    double util_sum;             // the later steps'
    int util_n;
} CuRun;

int curun_multi_gpu(void) { return cucomm_available(); }

static int cu_init(void **state, const PlanFile *pf, const RunRequest *rq, const TrainOpts *opt, FILE *log,
                   RunInfo *info, char *err, int errlen)
{
    (void)log;
    *state = NULL;
    int rank = 0, world = 1;
    dist_world_init(&rank, &world);   // MPI is up already: learns rank and size
    int proxy = rq->proxy_stage >= 0;
    if (world != 1 && !curun_multi_gpu()) {
        snprintf(err, errlen, "the CUDA backend of this build runs one GPU (no NCCL at configure time): "
                              "start it without mpirun, or rebuild with NCCL");
        return -1;
    }
    if (proxy && rq->ckpt_dir) {
        snprintf(err, errlen, "--proxy-stage trains nothing to checkpoint: drop --checkpoint-dir/--resume");
        return -1;
    }
    if (proxy && world != 1) {
        snprintf(err, errlen, "--proxy-stage runs one process on one GPU: start it without mpirun");
        return -1;
    }
    CuRun *r = calloc(1, sizeof *r);
    if (!r) {
        snprintf(err, errlen, "out of host memory");
        return -1;
    }
    *state = r;
    r->proxy = proxy;
    r->util_first = -1;
    const ModelSpec *m = &pf->model;
    const Layout *lo = &pf->layout;
    int bad = proxy ? cuexec_init_proxy(&r->e, m, lo, rq->proxy_stage, opt->seed, err, errlen)
                    : cuexec_init(&r->e, m, lo, opt, rq->data, err, errlen);
    if (bad)
        return -1;
    r->nv = cunvml_open(r->e.device);
    info->name = proxy ? "cuda-proxy" : "cuda";
    info->lo = *lo;
    info->flops_per_token = proxy ? proxy_flops_per_token(m, lo, r->e.sh.stage) : train_model_flops_per_token(m, lo);
    /* fp8 plans: the layers' GEMMs in fp8 (cufp8.h), MFU against the fp8 peak as the planner counts it */
    info->peak = pf->hw.peak[cufp8_on(&r->e) && pf->hw.peak[PREC_FP8] > 0 ? PREC_FP8 : PREC_BF16];
    info->tokens_per_step = proxy ? (double)r->e.nmb * r->e.sh.N : (double)lo->gbs * r->e.Tg;
    info->checkpoints = !proxy;
    info->step = r->e.step;
    return 0;
}

static void cu_describe(void *state, FILE *log)
{
    const CuRun *r = state;
    const CuExec *e = &r->e;
    fprintf(log, "run (cuda%s%s): %s, %d layers%s, %d micro-batches of %d x %d tokens, %.3g parameters on this GPU\n",
            r->proxy ? " stage proxy" : "", cufp8_on(e) ? ", fp8 linear layers" : "", e->m.name, e->sh.layers,
            r->proxy ? " of one stage" : "", e->nmb, e->sh.B, e->Tg, (double)e->n);
    if (r->proxy)
        fprintf(log, "MFU counts this rank's share of the model FLOPs: %.4g per token of %.4g\n",
                proxy_flops_per_token(&e->m, &e->lo, e->sh.stage), train_model_flops_per_token(&e->m, &e->lo));
    if (e->d.world > 1)
        fprintf(log, "%d ranks, one GPU each (dp %d tp %d pp %d vp %d cp %d%s), NCCL\n", e->d.world, e->dp, e->tp,
                e->pp, e->vp, e->cp, e->zero1 ? " zero1" : e->zero == 2 ? " zero2" : e->zero == 3 ? " zero3" : "");
}

static int cu_step(void *state, StepStats *st, char *err, int errlen)
{
    CuRun *r = state;
    CuStepStats cs;
    if (cuexec_step(&r->e, &cs, err, errlen) != 0)
        return -1;
    st->loss = cs.loss;
    memcpy(st->t, cs.t, sizeof st->t);
    st->step_s = cs.step_s;
    int u = cunvml_util(r->nv);
    if (u >= 0 && r->nsteps == 0)
        r->util_first = u;
    else if (u >= 0)
        r->util_sum += u, r->util_n++;
    r->nsteps++;
    return 0;
}

static int cu_save(void *state, const char *dir, char *err, int errlen)
{
    return cuexec_save(&((CuRun *)state)->e, dir, err, errlen);
}

static int cu_load(void *state, const char *dir, int *step, char *err, int errlen)
{
    CuRun *r = state;
    int rc = cuexec_load(&r->e, dir, err, errlen);
    *step = r->e.step;
    return rc;
}

static void cu_memory(void *state, RunMem *row)
{
    const CuRun *r = state;
    const CuExec *e = &r->e;
    memcpy(row->bytes, e->mem, sizeof row->bytes);
    row->stage = e->sh.stage;
    row->tp_rank = e->d.tp_rank;
    row->dp_rank = e->d.dp_rank;
    row->device_peak = cuexec_peak_bytes(e);   // total − least free: context included
    row->device_total = (double)e->dev_total;
    /* the steps after the first (warm-up), or the only one */
    row->gpu_util_pct = r->util_n ? r->util_sum / r->util_n : r->util_first;
}

static cJSON *cu_extra(void *state, const PlanFile *pf, const double *med, FILE *log, const char **name)
{
    const CuRun *r = state;
    if (!r->proxy)
        return NULL;
    const CuExec *e = &r->e;
    const ModelSpec *m = &pf->model;
    const Layout *lo = &pf->layout;
    ProxyPredict p;
    proxy_predict(m, &pf->hw, lo, e->sh.stage, &p);
    int nmb = e->nmb;
    double meas = (med[PH_FWD] + med[PH_BWD] + med[PH_RECOMPUTE]) / nmb;
    double error = p.compute_mb_s > 0 ? 100.0 * (meas - p.compute_mb_s) / p.compute_mb_s : 0;
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
    cJSON_AddNumberToObject(x, "error_pct", error);
    cJSON_AddStringToObject(x, "note", "communication (TP/SP, PP) not executed; compared with time_stage_mb minus its "
                                       "predicted exposed communication");
    cJSON_AddNumberToObject(x, "flops_per_token_model", train_model_flops_per_token(m, lo));
    cJSON_AddStringToObject(x, "mfu_note", "flops_per_token and mfu are this rank's share: the stage's layers at one "
                                           "tp rank's shapes (+ the LM head on the last stage), per token of the "
                                           "micro-batches run; no bubble, no communication");
    if (log)
        fprintf(log, "proxy stage %d: per micro-batch predicted %.2f ms (communication left out), measured "
                     "%.2f ms, error %+.1f %%\n", e->sh.stage, 1e3 * p.compute_mb_s, 1e3 * meas, error);
    *name = "proxy";
    return x;
}

static void cu_free(void *state)
{
    CuRun *r = state;
    if (!r)
        return;
    cunvml_close(r->nv);
    cuexec_free(&r->e);
    free(r);
}

const ExecBackend curun_backend = {
    .name = "cuda",
    .init = cu_init,
    .describe = cu_describe,
    .step = cu_step,
    .save = cu_save,
    .load = cu_load,
    .memory = cu_memory,
    .extra = cu_extra,
    .free = cu_free,
};
