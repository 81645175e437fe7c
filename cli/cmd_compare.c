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
#include "report.h"

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = n >= 0 ? malloc((size_t)n + 1) : NULL;
    if (s && fread(s, 1, (size_t)n, f) != (size_t)n) {
        free(s);
        s = NULL;
    }
    if (s)
        s[n] = 0;
    fclose(f);
    return s;
}

static double num(const cJSON *o, const char *k, int *ok)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    if (!cJSON_IsNumber(v)) {
        *ok = 0;
        return 0;
    }
    return v->valuedouble;
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
static int proxy_rows(cJSON *doc, FILE *f, const char *plan, const char *runp, const cJSON *run, const cJSON *px,
                      double mfu)
{
    int ok = 1;
    double pc = num(px, "predicted_compute_mb_s", &ok), mc = num(px, "measured_compute_mb_s", &ok);
    double pf = num(px, "predicted_fwd_mb_s", &ok), mf = num(px, "measured_fwd_mb_s", &ok);
    double pb = num(px, "predicted_bwd_mb_s", &ok), mb = num(px, "measured_bwd_mb_s", &ok);
    double pr = num(px, "predicted_recompute_mb_s", &ok), mr = num(px, "measured_recompute_mb_s", &ok);
    double nmb = num(px, "micro_batches_run", &ok), stage = num(px, "stage", &ok);
    double tokens = num(run, "tokens_per_step", &ok), fpt = num(run, "flops_per_token", &ok);
    double peak = num(run, "peak_flops_per_rank", &ok);
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
static void memory_rows(cJSON *doc, FILE *f, const Cost *k, const cJSON *mem, int proxy)
{
    static const char *cats[] = {"weights", "grads", "optim", "acts", "buffers"};
    static const int kinds[] = {MEM_WEIGHTS, MEM_GRADS, MEM_OPTIM, MEM_ACTS, MEM_BUFFERS};
    static const int proxy_differs[] = {0, 0, 1, 1, 0};
    enum { NCAT = sizeof cats / sizeof cats[0] };
    _Static_assert(NCAT == sizeof kinds / sizeof kinds[0] && NCAT == sizeof proxy_differs / sizeof proxy_differs[0],
                   "one kind and one proxy flag per category");
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
    const cJSON *r;
    cJSON_ArrayForEach(r, mem) {
        int okm = 1, s = (int)num(r, "stage", &okm), rank = (int)num(r, "rank", &okm);
        if (!okm || s < 0 || s >= k->pp)
            continue;
        const StageMem *sm = &k->stage[s];
        cJSON *e = cJSON_CreateObject();
        cJSON_AddNumberToObject(e, "rank", rank);
        cJSON_AddNumberToObject(e, "stage", s);
        if (f)
            fprintf(f, "  rank %-3d stage %-2d", rank, s);
        for (int i = 0; i < NCAT; i++) {
            double meas = num(r, cats[i], &okm), pred = sm->bytes[kinds[i]], pct = 0;
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
            cJSON_AddItemToObject(e, cats[i], c2);
            if (!f)
                continue;
            fprintf(f, " %s %.2f/%.2f ", cats[i], pred / 1048576, meas / 1048576);
            if (skip)
                fprintf(f, "(not comparable)");
            else if (has)
                fprintf(f, "(%+.0f%%)", pct);
            else
                fprintf(f, "(n/a)");
        }
        cJSON_AddNumberToObject(e, "rss_peak", num(r, "rss_peak", &okm));
        if (f)
            fprintf(f, " rss %.1f\n", num(r, "rss_peak", &okm) / 1048576);
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
    char *text = slurp(runp);
    if (!text) {
        fprintf(stderr, "ultraplan compare: cannot read %s\n", runp);
        return 1;
    }
    cJSON *run = cJSON_Parse(text);
    free(text);
    const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(run, "format");
    if (!run || !cJSON_IsString(fmt) || strcmp(fmt->valuestring, "ultraplan.run/1") != 0) {
        fprintf(stderr, "ultraplan compare: %s: field \"format\": expected \"ultraplan.run/1\"\n", runp);
        cJSON_Delete(run);
        return 1;
    }
    const cJSON *sum = cJSON_GetObjectItemCaseSensitive(run, "summary");
    const cJSON *ph = cJSON_GetObjectItemCaseSensitive(sum, "phases_s");
    const cJSON *mem = cJSON_GetObjectItemCaseSensitive(run, "memory");
    int ok = 1;
    double step = num(sum, "step_s", &ok), tok = num(sum, "tokens_per_s", &ok), mfu = num(sum, "mfu", &ok);
    double fwd = num(ph, "forward", &ok), bwd = num(ph, "backward", &ok), rc = num(ph, "recompute", &ok);
    double tp = num(ph, "tp_comm", &ok), pp = num(ph, "pp_wait", &ok), dp = num(ph, "dp_comm", &ok);
    double opt = num(ph, "optimizer", &ok);
    if (!ok || !cJSON_IsArray(mem)) {
        fprintf(stderr, "ultraplan compare: %s: missing summary, phases_s or memory (not a finished run?)\n", runp);
        cJSON_Delete(run);
        return 1;
    }
    const Cost *k = &pf.cost;
    FILE *f = json ? NULL : stdout;
    cJSON *doc = cJSON_CreateObject();
    cJSON_AddStringToObject(doc, "format", "ultraplan.compare/1");
    const cJSON *px = cJSON_GetObjectItemCaseSensitive(run, "proxy");
    if (cJSON_IsObject(px)) {
        if (proxy_rows(doc, f, plan, runp, run, px, mfu) != 0) {
            fprintf(stderr, "ultraplan compare: %s: its \"proxy\" object lacks a predicted or measured field\n", runp);
            cJSON_Delete(doc);
            cJSON_Delete(run);
            return 1;
        }
    } else {
        header(f, plan, runp);
        whole_rows(doc, f, k, step, fwd + bwd, rc, tp, pp, dp, opt, tok, mfu);
    }
    memory_rows(doc, f, k, mem, cJSON_IsObject(px));
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
    cJSON_Delete(run);
    return rcode;
}

const Command cmd_compare = {"compare", "predicted vs measured: plan.json against run.json", compare_main};
