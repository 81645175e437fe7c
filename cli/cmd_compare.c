/* cmd_compare.c — `ultraplan compare plan.json run.json`: the plan's
 * prediction against what `run` measured, phase by phase, with the error of
 * each (error = (predicted − measured) / measured; "n/a", null in JSON, where
 * nothing was measured but something predicted). A stage proxy's run.json
 * (run --proxy-stage) is held against its own per micro-batch prediction
 * instead of the whole step, and its activations and optimizer states are
 * shown without an error: it holds one micro-batch's activations and no
 * optimizer states, the plan's rank all in-flight ones and its shard of
 * the states. */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "command.h"
#include "memory.h"
#include "report.h"
#include "runfile.h"

/* x, or 0 with *ok cleared when the run file lacks it */
static double need(double x, int *ok)
{
    if (isnan(x)) {
        *ok = 0;
        return 0;
    }
    return x;
}

/* (pred − meas) / meas in percent into *pct; 0 when it has none: nothing
 * measured but something predicted (both 0 is an error of 0) */
static int err_pct(double pred, double meas, double *pct)
{
    *pct = meas != 0 ? 100.0 * (pred - meas) / meas : 0;
    return meas != 0 || pred == 0;
}

/* "error_pct": the error, or null where err_pct has none */
static void add_err(cJSON *o, double pred, double meas)
{
    double e;
    if (err_pct(pred, meas, &e))
        cJSON_AddNumberToObject(o, "error_pct", e);
    else
        cJSON_AddNullToObject(o, "error_pct");
}

static void add_row(cJSON *arr, FILE *f, const char *name, double pred, double meas, const char *unit,
                    double scale)
{
    cJSON *r = cJSON_CreateObject();
    cJSON_AddNumberToObject(r, "predicted", pred);
    cJSON_AddNumberToObject(r, "measured", meas);
    add_err(r, pred, meas);
    cJSON_AddItemToObject(arr, name, r);
    double e;
    if (!f)
        return;
    fprintf(f, "  %-22s %14.4f %14.4f %10s", name, pred * scale, meas * scale, unit);
    if (err_pct(pred, meas, &e))
        fprintf(f, " %+9.1f%%\n", e);
    else
        fprintf(f, " %10s\n", "n/a");
}

static void header(FILE *f, const char *plan, const char *runp)
{
    if (f)
        fprintf(f, "%s vs %s\n  %-22s %14s %14s %10s %10s\n", plan, runp, "", "predicted", "measured", "unit", "error");
}

/* A whole run: the plan's step, phase by phase, against the measured one. */
static void whole_rows(cJSON *doc, FILE *f, const Cost *k, double step, double compute, double rc, double tp,
                       double pp, double dp, double opt, double tok, double mfu)
{
    cJSON *rows = cJSON_CreateObject();
    add_row(rows, f, "step_time", k->step_s, step, "ms", 1e3);
    add_row(rows, f, "compute", k->time[T_COMPUTE], compute, "ms", 1e3);
    add_row(rows, f, "recompute", k->time[T_RECOMPUTE], rc, "ms", 1e3);
    add_row(rows, f, "tp_comm", k->time[T_TP], tp, "ms", 1e3);
    add_row(rows, f, "pp_wait+bubble", k->time[T_PP] + k->time[T_BUBBLE], pp, "ms", 1e3);
    add_row(rows, f, "dp_comm", k->time[T_DP], dp, "ms", 1e3);
    add_row(rows, f, "optimizer", k->time[T_OPTIM], opt, "ms", 1e3);
    add_row(rows, f, "tokens_per_s", k->thr.tokens_per_s, tok, "tok/s", 1);
    add_row(rows, f, "mfu", k->thr.mfu, mfu, "%", 100);
    cJSON_AddItemToObject(doc, "step_time", cJSON_DetachItemFromObject(rows, "step_time"));
    cJSON_AddItemToObject(doc, "phases", rows);
    /* step_time.{predicted_s, measured_s, error_pct} as scripts read them */
    cJSON *st = cJSON_GetObjectItemCaseSensitive(doc, "step_time");
    cJSON_AddNumberToObject(st, "predicted_s", k->step_s);
    cJSON_AddNumberToObject(st, "measured_s", step);
}

/* A stage proxy (run --proxy-stage): one GPU ran one tp rank of one stage
 * without its communication, so the plan's whole step is no measure of it.
 * Its own per micro-batch prediction (the run wrote both sides, from the same
 * cost model) against what it measured, and the rank's MFU over its measured
 * compute time against the MFU the prediction implies (the same rank-share
 * FLOPs per token). 0, or -1
 * when a field is missing. */
static int proxy_rows(cJSON *doc, FILE *f, const char *plan, const char *runp, const RunDoc *run, double mfu)
{
    int ok = 1;
    const RunDocProxy *px = &run->proxy;
    double pc = need(px->predicted_compute_mb_s, &ok), mc = need(px->measured_compute_mb_s, &ok);
    double pf = need(px->predicted_fwd_mb_s, &ok), mf = need(px->measured_fwd_mb_s, &ok);
    double pb = need(px->predicted_bwd_mb_s, &ok), mb = need(px->measured_bwd_mb_s, &ok);
    double pr = need(px->predicted_recompute_mb_s, &ok), mr = need(px->measured_recompute_mb_s, &ok);
    double nmb = need(px->micro_batches_run, &ok), stage = need(px->stage, &ok);
    double tokens = need(run->tokens_per_step, &ok), fpt = need(run->flops_per_token, &ok);
    double peak = need(run->peak_flops_per_rank, &ok);
    if (!ok || nmb <= 0)
        return -1;
    /* both MFUs from compute time: the run's own MFU counts its whole step,
     * which includes the local copies standing in for SP's collectives */
    double pmfu = pc > 0 && peak > 0 ? tokens / nmb * fpt / (pc * peak) : 0;
    double mmfu = mc > 0 && peak > 0 ? tokens / nmb * fpt / (mc * peak) : mfu;
    header(f, plan, runp);
    if (f)
        fprintf(f, "  stage proxy, stage %d: one micro-batch on one tp rank, communication left out\n", (int)stage);
    cJSON *rows = cJSON_CreateObject();
    add_row(rows, f, "stage_compute_mb", pc, mc, "ms", 1e3);
    add_row(rows, f, "forward_mb", pf, mf, "ms", 1e3);
    add_row(rows, f, "backward_mb", pb, mb, "ms", 1e3);
    add_row(rows, f, "recompute_mb", pr, mr, "ms", 1e3);
    add_row(rows, f, "mfu_rank_share", pmfu, mmfu, "%", 100);
    cJSON_AddNumberToObject(rows, "stage", stage);
    cJSON_AddItemToObject(doc, "proxy", rows);
    return 0;
}

static const char PROXY_MEM_WHY[] = "the proxy holds one micro-batch of activations and no optimizer states";

/* Each rank's memory by category against its stage's prediction. A stage
 * proxy's acts and optim get no error (PROXY_MEM_WHY): the plan counts all
 * in-flight micro-batches and the rank's optimizer shard. */
static void memory_rows(cJSON *doc, FILE *f, const Cost *k, const RunDoc *run, int proxy)
{
    /* run.json's categories (runfile.h) and the cost model's, in one order */
    static const int kinds[XM_COUNT] = {[XM_WEIGHTS] = MEM_WEIGHTS, [XM_GRADS] = MEM_GRADS, [XM_OPTIM] = MEM_OPTIM,
                                        [XM_ACTS] = MEM_ACTS, [XM_BUFFERS] = MEM_BUFFERS};
    static const int proxy_differs[XM_COUNT] = {[XM_OPTIM] = 1, [XM_ACTS] = 1};
    cJSON_AddBoolToObject(doc, "memory_comparable", !proxy);
    if (proxy) {
        char note[160];
        snprintf(note, sizeof note, "acts and optim not comparable: %s", PROXY_MEM_WHY);
        cJSON_AddStringToObject(doc, "memory_note", note);
    }
    if (f) {
        fprintf(f, "\n  memory per rank (MiB)   predicted / measured (error)\n");
        if (proxy)
            fprintf(f, "  acts, optim (not comparable: %s)\n", PROXY_MEM_WHY);
    }
    cJSON *mj = cJSON_CreateArray();
    for (int q = 0; q < run->nmem; q++) {
        const RunDocMem *r = &run->mem[q];
        if (isnan(r->stage) || isnan(r->rank) || r->stage < 0 || r->stage >= k->pp)
            continue;
        int s = (int)r->stage, rank = (int)r->rank;
        const StageMem *sm = &k->stage[s];
        cJSON *e = cJSON_CreateObject();
        cJSON_AddNumberToObject(e, "rank", rank);
        cJSON_AddNumberToObject(e, "stage", s);
        if (f)
            fprintf(f, "  rank %-3d stage %-2d", rank, s);
        for (int i = 0; i < XM_COUNT; i++) {
            const char *cat = runfile_mem_name(i);
            double meas = isnan(r->bytes[i]) ? 0 : r->bytes[i], pred = sm->bytes[kinds[i]], pct = 0;
            int skip = proxy && proxy_differs[i], has = !skip && err_pct(pred, meas, &pct);
            cJSON *c2 = cJSON_CreateObject();
            cJSON_AddNumberToObject(c2, "predicted", pred);
            cJSON_AddNumberToObject(c2, "measured", meas);
            if (skip) {
                cJSON_AddNullToObject(c2, "error_pct");
                cJSON_AddFalseToObject(c2, "comparable");
            } else {
                add_err(c2, pred, meas);
            }
            cJSON_AddItemToObject(e, cat, c2);
            if (!f)
                continue;
            fprintf(f, " %s %.2f/%.2f ", cat, pred / 1048576, meas / 1048576);
            if (skip)
                fprintf(f, "(not comparable)");
            else if (has)
                fprintf(f, "(%+.0f%%)", pct);
            else
                fprintf(f, "(n/a)");
        }
        double rss = isnan(r->rss_peak) ? 0 : r->rss_peak;
        cJSON_AddNumberToObject(e, "rss_peak", rss);
        if (f)
            fprintf(f, " rss %.1f\n", rss / 1048576);
        cJSON_AddItemToArray(mj, e);
    }
    cJSON_AddItemToObject(doc, "memory", mj);
}

static int compare_main(int argc, char **argv)
{
    static const struct option opts[] = {{"help", no_argument, 0, 'h'}, {"json", no_argument, 0, 'j'},
                                         {"output", required_argument, 0, 'o'}, {0, 0, 0, 0}};
    int c, json = 0;
    const char *out = NULL;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "ho:", opts, NULL)) != -1) {
        if (c == 'h') {
            printf("usage: ultraplan compare plan.json run.json [--json] [-o FILE]\n\n"
                   "Predicted vs measured: step time and each phase, tokens/s, MFU, memory per rank.\n"
                   "A stage proxy's run (run --proxy-stage): its stage per micro-batch and the rank's MFU.\n"
                   "error = (predicted - measured) / measured; n/a (null in JSON) where nothing was\n"
                   "measured but something predicted. A proxy's acts and optim are not comparable\n"
                   "(one micro-batch of activations, no optimizer states): no error is given.\n");
            return 0;
        } else if (c == 'j') {
            json = 1;
        } else if (c == 'o') {
            out = optarg;
        } else {
            fprintf(stderr, "ultraplan compare: option %s: unknown or missing its value\n", argv[optind - 1]);
            return 2;
        }
    }
    if (argc - optind != 2) {
        fprintf(stderr, "ultraplan compare: give a plan file and a run file (see --help)\n");
        return 2;
    }
    const char *plan = argv[optind], *runp = argv[optind + 1];
    char err[1024];
    PlanFile pf;
    if (planfile_read(plan, &pf, err, sizeof err) != 0) {
        fprintf(stderr, "ultraplan compare: %s\n", err);
        return 1;
    }
    /* the run is ultraplan's executor's: a plan made for Megatron is priced with the memory
     * Megatron-core and Transformer Engine keep (memory_executor_accounting): price the memory the
     * executor keeps (nothing else depends on the target) */
    if (!memory_executor_accounting(&pf.layout)) {
        Layout ex = pf.layout;
        ex.target = TARGET_ULTRAPLAN_CUDA;
        cost(&pf.model, &pf.hw, &ex, &pf.opts, &pf.cost);
    }
    RunDoc run;
    if (runfile_read(runp, &run, err, sizeof err) != 0) {
        fprintf(stderr, "ultraplan compare: %s\n", err);
        runfile_free(&run);
        return 1;
    }
    if (strcmp(run.format, RUN_FORMAT) != 0) {
        fprintf(stderr, "ultraplan compare: %s: field \"format\": expected \"%s\"\n", runp, RUN_FORMAT);
        runfile_free(&run);
        return 1;
    }
    /* a run of another model, or on another number of ranks, is not this plan's run */
    /* run.json's model.params is the main model's (plan_model_json); older runs counted MTP too */
    double plan_total = (double)spec_params(&pf.model, 1, PARAMS_EXACT);
    double plan_params = plan_total - (double)spec_mtp_params(&pf.model);
    if (isfinite(run.model_params) && run.model_params != plan_params && run.model_params != plan_total) {
        fprintf(stderr, "ultraplan compare: %s is a run of another model (%s, %.6g parameters) than %s (%s, %.6g "
                        "parameters)\n", runp, run.model_name[0] ? run.model_name : "?", run.model_params, plan,
                pf.model.name, plan_params);
        runfile_free(&run);
        return 1;
    }
    if (!run.has_proxy && isfinite(run.world) && run.world != layout_gpus(&pf.layout)) {
        fprintf(stderr, "ultraplan compare: %s ran on %.0f ranks, but %s is for %d GPUs (dp*tp*pp*cp): not a run "
                        "of this plan\n", runp, run.world, plan, layout_gpus(&pf.layout));
        runfile_free(&run);
        return 1;
    }
    int ok = 1;
    double step = need(run.step_s, &ok), tok = need(run.tokens_per_s, &ok), mfu = need(run.mfu, &ok);
    double ph[PH_COUNT];
    for (int i = 0; i < PH_COUNT; i++)
        ph[i] = need(run.phases[i], &ok);
    if (!ok || !run.has_memory) {
        if (!strcmp(run.status, "running"))
            fprintf(stderr, "ultraplan compare: %s: the run is still going (status \"running\"; its summary and "
                            "memory are final when it ends)\n", runp);
        else
            fprintf(stderr, "ultraplan compare: %s: missing summary, phases_s or memory (not a finished run?)\n",
                    runp);
        runfile_free(&run);
        return 1;
    }
    const Cost *k = &pf.cost;
    FILE *f = json ? NULL : stdout;
    cJSON *doc = cJSON_CreateObject();
    cJSON_AddStringToObject(doc, "format", "ultraplan.compare/1");
    if (run.has_proxy) {
        if (proxy_rows(doc, f, plan, runp, &run, mfu) != 0) {
            fprintf(stderr, "ultraplan compare: %s: its \"proxy\" object lacks a predicted or measured field\n", runp);
            cJSON_Delete(doc);
            runfile_free(&run);
            return 1;
        }
    } else {
        header(f, plan, runp);
        whole_rows(doc, f, k, step, ph[PH_FWD] + ph[PH_BWD], ph[PH_RECOMPUTE], ph[PH_TP], ph[PH_PP], ph[PH_DP],
                   ph[PH_OPTIM], tok, mfu);
    }
    memory_rows(doc, f, k, &run, run.has_proxy);
    int rcode = 0;
    if (json || out) {
        char *s = cJSON_Print(doc);
        if (!s || util_write_atomic(out ? out : "-", s, err, sizeof err) != 0) {
            fprintf(stderr, "ultraplan compare: %s\n", s ? err : "out of memory");
            rcode = 1;
        }
        free(s);
    }
    cJSON_Delete(doc);
    runfile_free(&run);
    return rcode;
}

const Command cmd_compare = {"compare", "predicted vs measured: plan.json against run.json", compare_main};
