/* backend_cpu.c — the CPU entry of the run loop's backend table (loop.h):
 * exec.h's fp32 executor, one MPI rank each, measured against the plan's
 * fp32 peak. */
#include <stdlib.h>

#include "loop.h"

static int cpu_init(void **state, const PlanFile *pf, const RunRequest *rq, const TrainOpts *opt, FILE *log,
                    RunInfo *info, char *err, int errlen)
{
    *state = NULL;
    if (rq->proxy_stage >= 0) {
        snprintf(err, errlen, "--proxy-stage runs on one GPU: add --backend cuda");
        return -1;
    }
    Exec *e = malloc(sizeof *e);   // exec_init sets every field exec_free reads
    if (!e) {
        snprintf(err, errlen, "out of host memory for the executor");
        return -1;
    }
    *state = e;
    if (log && pf->layout.prec != PREC_FP32)
        fprintf(log, "note: the CPU executor computes in fp32; the plan is for %s, so its memory figures differ\n",
                hw_precision_name(pf->layout.prec));
    if (exec_init(e, &pf->model, &pf->layout, opt, rq->data, err, errlen) != 0)
        return -1;
    info->name = "cpu";
    info->lo = e->lo;
    info->tokens_per_step = (double)e->lo.gbs * e->T;
    info->flops_per_token = train_model_flops_per_token(&pf->model, &e->lo);
    info->peak = pf->hw.peak[PREC_FP32];
    info->checkpoints = 1;
    info->step = e->step;
    return 0;
}

static void cpu_describe(void *state, FILE *log)
{
    const Exec *e = state;
    fprintf(log, "run: %s on %d ranks (dp %d tp %d pp %d vp %d cp %d%s%s%s), %d micro-batches of %d x %d tokens\n",
            e->m.name, e->d.world, e->lo.dp, e->lo.tp, e->lo.pp, e->lo.vp, e->lo.cp, e->lo.sp ? " sp" : "",
            e->lo.opt != OPT_ZERO0 ? " " : "", e->lo.opt != OPT_ZERO0 ? layout_opt_name(e->lo.opt) : "",
            e->nmb, e->B, e->T);
}

static int cpu_step(void *state, StepStats *st, char *err, int errlen) { return exec_step(state, st, err, errlen); }

static int cpu_save(void *state, const char *dir, char *err, int errlen) { return exec_save(state, dir, err, errlen); }

static int cpu_load(void *state, const char *dir, int *step, char *err, int errlen)
{
    Exec *e = state;
    int rc = exec_load(e, dir, err, errlen);
    *step = e->step;
    return rc;
}

static void cpu_memory(void *state, RunMem *row)
{
    const Exec *e = state;
    exec_memory(e, row->bytes);
    row->stage = e->d.pp_rank;
    row->tp_rank = e->d.tp_rank;
    row->dp_rank = e->d.dp_rank;
}

static void cpu_free(void *state)
{
    if (!state)
        return;
    exec_free(state);
    free(state);
}

const ExecBackend exec_cpu_backend = {
    .name = "cpu",
    .init = cpu_init,
    .describe = cpu_describe,
    .step = cpu_step,
    .save = cpu_save,
    .load = cpu_load,
    .memory = cpu_memory,
    .extra = NULL,
    .free = cpu_free,
};
