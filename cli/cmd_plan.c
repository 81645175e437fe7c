/* cmd_plan.c — `ultraplan plan`: search every layout and rank the best.
 *
 * Each plan carries its 80 % error band (calib/band.h): a column of the
 * table, `band` in --json's ranked entries. A plan whose predicted step is
 * inside the band of the plan ranked above it is marked `~` there (the
 * model cannot tell the two apart). --rank-by robust ranks by the band's
 * upper end (the best worst case): the planner searches by step time for
 * 3·top (at least 30) plans, which are re-ranked here and cut to --top, so a
 * plan the time search ranks below that is not considered. */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "args.h"
#include "band.h"
#include "command.h"
#include "planner.h"
#include "report.h"
#include "stacks.h"

enum { P_TOP = 1, P_PICK, P_EXHAUSTIVE, P_DUMP_LP, P_SEARCH_PREC, P_RANK_BY, P_BUDGET_DAYS, P_BUDGET_DOLLARS };

static void help(FILE *f)
{
    fprintf(f, "usage: ultraplan plan --gpus N [model] [hardware] [fixed layout knobs] [--top K] [--exhaustive]\n"
               "                      [--dump-lp FILE] [--search-precision] [--pick K] [--json] [-o plan.json]\n\n"
               "Searches tp, pp, dp, cp, interleaving, micro-batch, ZeRO / distributed optimizer and sequence\n"
               "parallel for the given global batch; per pipeline stage an ILP (GLPK) chooses layers and full or\n"
               "selective recomputation. Layout flags you give are kept fixed; the rest are searched. Prints the\n"
               "best layouts ranked by step time; -o writes the best as a plan file for run, export and tui.\n"
               "Under --target megatron (default) only layouts Megatron-LM runs as exported are searched: one\n"
               "full-recompute count per model chunk on every stage or selective on all layers, uneven stages\n"
               "only first and last (solved exactly without the ILP); --target ultraplan searches every layout\n"
               "ultraplan's CPU executor runs, --target ultraplan-cuda every layout `run --backend cuda` runs,\n"
               "--target torchtitan every layout `export --format torchtitan` writes (even stages, one\n"
               "recomputation for every layer, FSDP sharding; under --stack torchtitan unless --stack is given).\n"
               "Every plan leaves --mem-margin (default 5%%) of each GPU's memory free.\n"
               "The global batch is kept (--gbs). Its default, in tokens, is the larger of GPT-3's batch for the\n"
               "nearest model size (0.5M tokens at 125M-760M params, 1M at 1.3B-2.7B, 2M at 6.7B-13B, 3.2M at\n"
               "175B and above; Brown et al. 2020, table 2.1) and 1024 tokens per GPU (Llama 3 405B: 16M tokens\n"
               "on 16,384 GPUs), rounded in log to the nearest u x 2^k sequences, u the odd part of the GPU\n"
               "count (3 for 3072), so that a data-parallel degree of that count divides it. The table's first\n"
               "line says what it gave.\n\n"
               "Plan options:\n"
               "  --top K                 layouts to show (default 10)\n"
               "  --pick K                -o and --json write the K-th ranked layout as the plan instead of the\n"
               "                          best (1 to --top)\n"
               "  --exhaustive            solve every layout, no pruning by bounds (same best plan, slower)\n"
               "  --dump-lp FILE          write the best layout's stage ILP (CPLEX LP format)\n"
               "  --search-precision      also try fp8 where the GPU has it (default: bf16 or --precision)\n"
               "  --rank-by time|cost|robust  time: the shortest step (default); cost: the fewest GPU-hours with\n"
               "                          failures, checkpoints and restarts priced in; robust: the smallest\n"
               "                          upper end of the 80%% error band (the best worst case)\n"
               "  --budget-days D         only plans that finish, failures included, within D days\n"
               "  --budget-dollars X      only plans that cost at most X dollars with failures (needs --price)\n\n%s\n"
               "example: ultraplan plan --gpus 512 --params 175B\n",
            args_help(ARGS_HELP_SEARCH));
}

static void progress(void *ctx, long done, long total)
{
    double *t0 = ctx;
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    if (t.tv_sec + t.tv_nsec * 1e-9 - *t0 > 1.0)
        fprintf(stderr, "\rplan: %ld of %ld layouts ...", done, total);
}

/* "11,12x6,13": runs of equal values as VxN (model/layout.h). */
static const char *runs(const int *v, int n, char *buf, int len)
{
    layout_runs_text(v, n, buf, len);
    return buf;
}

static const char *rc_text(const Layout *lo, char *buf, int len)
{
    int any_f = 0, any_s = 0, k = 0;
    char r[96];
    for (int s = 0; s < lo->pp; s++) {
        any_f |= lo->full_rc[s] > 0;
        any_s |= lo->sel_rc[s] > 0;
    }
    buf[0] = 0;
    if (!any_f && !any_s)
        return "none";
    if (any_f)
        k += snprintf(buf + k, len - k, "full %.80s", runs(lo->full_rc, lo->pp, r, sizeof r));
    if (any_s && k < len)
        snprintf(buf + k, len - k, "%ssel %.80s", any_f ? " " : "", runs(lo->sel_rc, lo->pp, r, sizeof r));
    return buf;
}

/* The band of every plan (b[i].runs = 0: none). */
static void plan_bands(const CliInputs *in, const PlanResult *res, Band *b)
{
    for (int i = 0; i < res->n; i++) {
        const Cost *c = &res->plans[i].cost;
        if (!isfinite(c->step_s) ||
            band_of_cost(&in->sc.model, &in->sc.hw, &res->plans[i].layout, c, &b[i]) != 0)
            b[i].runs = 0;
    }
}

/* `~` on plan i when the next plan's predicted step is inside i's band */
static bool within_band(const PlanResult *res, const Band *b, int i)
{
    return i + 1 < res->n && b[i].runs > 0 && res->plans[i + 1].cost.step_s <= b[i].step_hi &&
           res->plans[i + 1].cost.step_s >= b[i].step_lo;
}

typedef struct {
    Plan p;
    Band b;
    int point_rank;
} Ranked;

static int cmp_robust(const void *x, const void *y)
{
    const Ranked *a = x, *b = y;
    double ka = a->b.runs ? a->b.step_hi : a->p.cost.step_s, kb = b->b.runs ? b->b.step_hi : b->p.cost.step_s;
    if (ka != kb)
        return ka < kb ? -1 : 1;
    return a->point_rank - b->point_rank;
}

/* --rank-by robust: re-rank by the band's upper end and keep the first top_k;
 * pos[i] = the rank by step time of the plan now at i. 0 ok, -1 out of memory. */
static int rank_robust(const CliInputs *in, PlanResult *res, int top_k, int *pos)
{
    Band *b = calloc((size_t)res->n + 1, sizeof *b);
    Ranked *r = calloc((size_t)res->n + 1, sizeof *r);
    if (!b || !r) {
        free(b);
        free(r);
        return -1;
    }
    plan_bands(in, res, b);
    for (int i = 0; i < res->n; i++)
        r[i] = (Ranked){res->plans[i], b[i], i + 1};
    qsort(r, (size_t)res->n, sizeof *r, cmp_robust);
    for (int i = 0; i < res->n; i++) {
        res->plans[i] = r[i].p;
        pos[i] = r[i].point_rank;
    }
    if (res->n > top_k)
        res->n = top_k;
    free(b);
    free(r);
    return 0;
}

static void print_table(const CliInputs *in, const PlanRequest *req, const PlanResult *res, const int *pos)
{
    const ModelSpec *m = &in->sc.model;
    char b1[96], b2[96];
    const Cost *c0 = &res->plans[0].cost;
    char np[32], nt[32], nb[32];
    bool moe = spec_is_moe(m);
    char na[32], act[80] = "";
    /* the main model's counts, as published, and the MTP modules' apart (cli/report.c does the same) */
    double mtp = (double)spec_mtp_params(m);
    if (mtp > 0)
        snprintf(act, sizeof act, " + %s MTP", util_si(mtp, 4, na, sizeof na));
    if (moe)   /* MoE: the parameters one token passes through too */
        snprintf(act + strlen(act), sizeof act - strlen(act), ", %s active",
                 util_si((double)(spec_params_active(m, 1, PARAMS_EXACT) - spec_mtp_params_active(m)), 4, na, sizeof na));
    char rule[256] = "";
    if (!(in->sc.fixed & FIX_GBS)) {   /* say how the default batch was chosen (scenario.h) */
        DefaultBatch d;
        scenario_default_batch(m, req->gpus, &d);
        char t[200];
        scenario_default_batch_text(&d, t, sizeof t);
        snprintf(rule, sizeof rule, " (default: %s)", t);
    }
    printf("%s (%s params%s) on %d x %s, %d per node; global batch %d x %d = %s tokens%s; %s training tokens\n",
           m->name, util_si((double)spec_params(m, 1, PARAMS_EXACT) - mtp, 4, np, sizeof np), act, req->gpus, in->sc.hw.name,
           in->sc.hw.gpus_per_node, req->base.gbs, m->s, util_si(req->base.gbs * (double)m->s, 3, nb, sizeof nb), rule,
           util_si(c0->train.tokens, 3, nt, sizeof nt));
    printf("searched %ld layouts: %ld solved (%ld ILPs), %ld pruned by bounds, in %.3f s\n\n", res->outer_total,
           res->outer_evaluated, res->ilp_solved, res->outer_pruned, res->seconds);
    Band *band = calloc((size_t)res->n + 1, sizeof *band);
    if (band)
        plan_bands(in, res, band);
    /* MoE models: expert parallel and expert tensor parallel columns after cp */
    printf("%3s %3s %3s %5s %3s%s %3s %4s %-8s %-22s %-14s %13s %9s %-17s %6s %10s %8s %8s  %s\n", "#", "tp", "pp",
           "dp", "cp", moe ? "  ep etp" : "", "vp", "mbs", "optim", "recompute/stage", "layers/stage", "peak/cap GiB",
           "step s", "80% band s", "MFU", "tokens/s", "days", "w/fail", "bottleneck");
    int marked = 0;
    for (int i = 0; i < res->n; i++) {
        const Layout *lo = &res->plans[i].layout;
        const Cost *c = &res->plans[i].cost;
        char mem[32];
        snprintf(mem, sizeof mem, "%.1f/%.1f", c->peak_bytes / 1073741824.0, c->capacity_bytes / 1073741824.0);
        char fail[16];
        if (isfinite(c->train.days_with_failures))
            snprintf(fail, sizeof fail, "%.1f", c->train.days_with_failures);
        else
            snprintf(fail, sizeof fail, "never");   /* failures outpace checkpoints */
        char ep[24] = "";
        if (moe)
            snprintf(ep, sizeof ep, " %3d %3d", lo->ep, layout_etp(lo));
        char bs[32] = "-", rk[16];
        bool mark = band && req->rank_by != PLAN_RANK_COST && within_band(res, band, i);
        marked += mark;
        if (band && band[i].runs)
            snprintf(bs, sizeof bs, "%.3f-%.3f%s", band[i].step_lo, band[i].step_hi, mark ? " ~" : "");
        snprintf(rk, sizeof rk, "%d", i + 1);
        printf("%3s %3d %3d %5d %3d%s %3d %4d %-8s %-22s %-14s %13s %9.3f %-17s %5.1f%% %10.4g %8.1f %8s  %s", rk,
               lo->tp, lo->pp, lo->dp, lo->cp, ep, lo->vp, lo->mbs, layout_opt_name(lo->opt), rc_text(lo, b1, sizeof b1),
               runs(lo->layers, lo->pp, b2, sizeof b2), mem, c->step_s, bs, 100 * c->thr.mfu, c->thr.tokens_per_s,
               c->train.days, fail, res->plans[i].bottleneck);
        if (pos)
            printf("  (#%d by step)", pos[i]);
        printf("\n");
    }
    if (marked)
        printf("\n~ the next plan's predicted step lies inside this plan's 80%% error band: the model cannot tell "
               "the two apart (%d of %d plans)\n", marked, res->n);
    if (band && res->n > 0 && band[0].runs)
        printf("80%% band: from the %d measured runs nearest each plan (#1: %s); `plan --rank-by robust` ranks by "
               "its upper end\n", band[0].runs, band[0].sources);
    free(band);
    if (in->sc.opts.price > 0) {   /* what each costs at --price, failures included */
        printf("\ncost at $%.2f per GPU-hour, with failures:", in->sc.opts.price);
        for (int i = 0; i < res->n; i++) {
            char d[32];
            double v = res->plans[i].cost.train.dollars_with_failures;
            printf(" #%d $%s", i + 1, isfinite(v) ? util_si(v, 4, d, sizeof d) : "never");
        }
        printf("\n");
    }
    if (req->rank_by == PLAN_RANK_COST)
        printf("\nranked by cost: GPU-hours with failures, checkpoints and restarts (not by step time)\n");
    if (pos)
        printf("\nranked robust: by the upper end of the 80%% band (the best worst case), among the %s\n",
               "best plans by step time; (#k by step) is each plan's rank by predicted step");
    if (res->over_budget > 0)
        printf("%ld layout(s) that fit were left out as over the budget\n", res->over_budget);
    /* fp8 rows: MFU is against the fp8 peak; say what it is against bf16's, as it is usually quoted */
    int nf = 0;
    for (int i = 0; i < res->n; i++) {
        double mb = cost_mfu_bf16_peak(&in->sc.hw, &res->plans[i].layout, &res->plans[i].cost);
        if (mb < 0)
            continue;
        if (nf++ == 0)
            printf("\nfp8 rows: MFU above is against the fp8 peak (%.0f TFLOP/s); against the bf16 peak (%.0f):",
                   in->sc.hw.peak[PREC_FP8] / 1e12, in->sc.hw.peak[PREC_BF16] / 1e12);
        printf(" #%d %.1f%%", i + 1, 100 * mb);
    }
    if (nf)
        printf("\n");
}

static cJSON *plan_json(const CliInputs *in, const PlanRequest *req, const PlanResult *res, int pick, const int *pos)
{
    Band *band = calloc((size_t)res->n + 1, sizeof *band);
    if (band)
        plan_bands(in, res, band);
    const Plan *best = &res->plans[pick - 1];
    cJSON *j = planfile_json(&in->sc.model, &in->sc.hw, &best->layout, &in->sc.opts, &best->cost);
    cJSON_AddStringToObject(j, "bottleneck", best->bottleneck);
    if (!(in->sc.fixed & FIX_GBS)) {   /* the default batch and its rule, as the header says them */
        DefaultBatch d;
        char t[200];
        scenario_default_batch(&in->sc.model, req->gpus, &d);
        scenario_default_batch_text(&d, t, sizeof t);
        cJSON *db = cJSON_AddObjectToObject(j, "default_batch");
        cJSON_AddNumberToObject(db, "gbs", d.gbs);
        cJSON_AddStringToObject(db, "rule", t);
        cJSON_AddNumberToObject(db, "model_tokens", d.model_tokens);
        cJSON_AddNumberToObject(db, "row_params", d.row_params);
        cJSON_AddNumberToObject(db, "gpu_seqs", d.gpu_seqs);
        cJSON_AddNumberToObject(db, "unit", d.unit);
    }
    cJSON *rk = cJSON_AddArrayToObject(j, "ranked");
    for (int i = 0; i < res->n; i++) {
        const Plan *p = &res->plans[i];
        cJSON *o = cJSON_CreateObject();
        cJSON_AddNumberToObject(o, "rank", i + 1);
        cJSON_AddItemToObject(o, "layout", plan_layout_json(&p->layout));
        cJSON_AddNumberToObject(o, "step_s", p->cost.step_s);
        cJSON_AddNumberToObject(o, "mfu", p->cost.thr.mfu);
        plan_add_mfu_bf16_peak(o, &in->sc.hw, &p->layout, &p->cost);
        cJSON_AddNumberToObject(o, "tokens_per_s", p->cost.thr.tokens_per_s);
        cJSON_AddNumberToObject(o, "days", p->cost.train.days);
        cJSON_AddNumberToObject(o, "days_with_failures",
                                isfinite(p->cost.train.days_with_failures) ? p->cost.train.days_with_failures : -1);
        if (p->cost.train.dollars > 0)
            cJSON_AddNumberToObject(o, "dollars_with_failures", isfinite(p->cost.train.dollars_with_failures)
                                                                    ? p->cost.train.dollars_with_failures : -1);
        cJSON_AddNumberToObject(o, "peak_bytes", p->cost.peak_bytes);
        cJSON_AddStringToObject(o, "bottleneck", p->bottleneck);
        if (band && band[i].runs) {
            cJSON *a = cJSON_AddArrayToObject(o, "step_s_range");
            cJSON_AddItemToArray(a, cJSON_CreateNumber(band[i].step_lo));
            cJSON_AddItemToArray(a, cJSON_CreateNumber(band[i].step_hi));
            a = cJSON_AddArrayToObject(o, "mfu_range");
            cJSON_AddItemToArray(a, cJSON_CreateNumber(band[i].mfu_lo));
            cJSON_AddItemToArray(a, cJSON_CreateNumber(band[i].mfu_hi));
            cJSON_AddNumberToObject(o, "band_runs", band[i].runs);
            cJSON_AddBoolToObject(o, "next_within_band", within_band(res, band, i));
        }
        if (pos)
            cJSON_AddNumberToObject(o, "rank_by_step", pos[i]);
        cJSON_AddItemToArray(rk, o);
    }
    free(band);
    cJSON *s = cJSON_AddObjectToObject(j, "search");
    cJSON_AddNumberToObject(s, "layouts", res->outer_total);
    cJSON_AddNumberToObject(s, "evaluated", res->outer_evaluated);
    cJSON_AddNumberToObject(s, "pruned", res->outer_pruned);
    cJSON_AddNumberToObject(s, "ilps", res->ilp_solved);
    cJSON_AddNumberToObject(s, "seconds", res->seconds);
    cJSON_AddBoolToObject(s, "exhaustive", req->exhaustive);
    cJSON_AddStringToObject(s, "rank_by", pos ? "robust" : req->rank_by == PLAN_RANK_COST ? "cost" : "time");
    cJSON_AddNumberToObject(s, "over_budget", res->over_budget);
    return j;
}

static int plan_main(int argc, char **argv)
{
    static const struct option own[] = {
        {"help", no_argument, 0, 'h'},           {"top", required_argument, 0, P_TOP},
        {"pick", required_argument, 0, P_PICK},
        {"exhaustive", no_argument, 0, P_EXHAUSTIVE}, {"dump-lp", required_argument, 0, P_DUMP_LP},
        {"search-precision", no_argument, 0, P_SEARCH_PREC}, {"rank-by", required_argument, 0, P_RANK_BY},
        {"budget-days", required_argument, 0, P_BUDGET_DAYS}, {"budget-dollars", required_argument, 0, P_BUDGET_DOLLARS},
    };
    struct option *opts = command_options(own, (int)(sizeof own / sizeof *own));
    CliInputs in;
    args_init(&in);
    PlanRequest req;
    planner_request_default(&req);
    PlanResult res = {0};
    double budget_dollars = 0;
    char err[512];
    int c, rc = 2, pick = 1, *pos = NULL, top_k = 0;
    bool robust = false;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "ho:", opts, NULL)) != -1) {
        if (c == 'h') {
            help(stdout);
            rc = 0;
            goto out;
        } else if (c == 'o') {
            in.out_path = optarg;
        } else if (c == P_TOP) {
            if (util_parse_int(optarg, &req.top_k) != 0 || req.top_k < 1 || req.top_k > 10000) {
                fprintf(stderr, "ultraplan plan: --top: expected a whole number from 1 to 10000, got \"%s\"\n", optarg);
                goto out;
            }
        } else if (c == P_PICK) {
            if (util_parse_int(optarg, &pick) != 0 || pick < 1 || pick > 10000) {
                fprintf(stderr, "ultraplan plan: --pick: expected a whole number from 1 to 10000 (a rank of the "
                        "table), got \"%s\"\n", optarg);
                goto out;
            }
        } else if (c == P_EXHAUSTIVE) {
            req.exhaustive = true;
        } else if (c == P_DUMP_LP) {
            req.dump_lp = optarg;
        } else if (c == P_SEARCH_PREC) {
            req.search_precision = true;
        } else if (c == P_RANK_BY) {
            if (!strcmp(optarg, "time") || !strcmp(optarg, "cost") || !strcmp(optarg, "robust")) {
                req.rank_by = !strcmp(optarg, "cost") ? PLAN_RANK_COST : PLAN_RANK_TIME;
                robust = !strcmp(optarg, "robust");
            } else {
                fprintf(stderr, "ultraplan plan: --rank-by: expected time, cost or robust, got \"%s\"\n", optarg);
                goto out;
            }
        } else if (c == P_BUDGET_DAYS || c == P_BUDGET_DOLLARS) {
            double v;
            if (util_parse_count(optarg[0] == '$' ? optarg + 1 : optarg, &v) != 0 || !(v > 0)) {
                fprintf(stderr, "ultraplan plan: --%s: expected a number above 0, got \"%s\"\n",
                        c == P_BUDGET_DAYS ? "budget-days" : "budget-dollars", optarg);
                goto out;
            }
            *(c == P_BUDGET_DAYS ? &req.budget_days : &budget_dollars) = v;
        } else if (c == '?' || c == ':') {
            command_bad_option("plan", argv);
            goto out;
        } else if (args_handle(&in, c, optarg, err, sizeof err) != 0) {
            fprintf(stderr, "ultraplan plan: %s\n", err);
            goto out;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "ultraplan plan: unexpected argument \"%s\" (see --help)\n", argv[optind]);
        goto out;
    }
    if (in.sc.gpus < 1) {
        fprintf(stderr, "ultraplan plan: --gpus N is required (the GPUs of the job)\n");
        goto out;
    }
    if (args_finish(&in, false, err, sizeof err) != 0) {
        fprintf(stderr, "ultraplan plan: %s\n", err);
        goto out;
    }
    if ((in.sc.fixed & FIX_RC) && in.sc.recompute == RECOMPUTE_SELECTIVE && layout_sel_op(&in.sc.model, &in.sc.layout)) {
        fprintf(stderr, "ultraplan plan: --recompute selective under --stack %s is its per-op policy (SelectiveAC), "
                "which no --target runs (Megatron-LM and ultraplan's executors recompute the attention core): plan "
                "with --recompute full or none, or price it with `ultraplan predict` and write it with `export "
                "--format torchtitan`\n", stacks_name(in.sc.layout.stack));
        goto out;
    }
    if (budget_dollars > 0) {   /* the planner counts GPU-hours; dollars are GPU-hours at --price */
        if (!(in.sc.opts.price > 0)) {
            fprintf(stderr, "ultraplan plan: --budget-dollars needs --price (dollars per GPU-hour)\n");
            goto out;
        }
        req.budget_gpu_hours = budget_dollars / in.sc.opts.price;
    }
    if (pick > req.top_k) {
        fprintf(stderr, "ultraplan plan: --pick %d is past --top %d: show at least %d layouts (--top %d)\n", pick,
                req.top_k, pick, pick);
        goto out;
    }
    req.gpus = in.sc.gpus;
    req.fixed = in.sc.fixed;
    req.base = in.sc.layout;
    req.recompute = in.sc.recompute;
    req.mem_margin_bytes = in.sc.mem_margin_bytes;
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    double t0 = t.tv_sec + t.tv_nsec * 1e-9;
    top_k = req.top_k;
    if (robust)   /* the robust ranking re-ranks more plans than it shows */
        req.top_k = top_k * 3 > 30 ? top_k * 3 : 30;
    req.progress = progress;
    req.progress_ctx = &t0;
    rc = 1;
    if (planner_search(&in.sc.model, &in.sc.hw, &in.sc.opts, &req, &res, err, sizeof err) != 0) {
        fprintf(stderr, "ultraplan plan: %s\n", err);
        goto out;
    }
    clock_gettime(CLOCK_MONOTONIC, &t);
    if (t.tv_sec + t.tv_nsec * 1e-9 - t0 > 1.0)
        fprintf(stderr, "\r%60s\r", "");
    if (res.n == 0) {
        fprintf(stderr, "ultraplan plan: %s\n", res.infeasible[0] ? res.infeasible : "no layout fits");
        goto out;
    }
    if (robust) {
        pos = calloc((size_t)res.n + 1, sizeof *pos);
        if (!pos || rank_robust(&in, &res, top_k, pos) != 0) {
            fprintf(stderr, "ultraplan plan: out of memory\n");
            goto out;
        }
        req.top_k = top_k;
    }
    if (pick > res.n) {
        fprintf(stderr, "ultraplan plan: --pick %d: only %d layout%s fit%s\n", pick, res.n, res.n == 1 ? "" : "s",
                res.n == 1 ? "s" : "");
        goto out;
    }
    if (in.json || in.out_path) {
        cJSON *j = plan_json(&in, &req, &res, pick, pos);
        char *text = cJSON_Print(j);
        cJSON_Delete(j);
        if (!text) {
            fprintf(stderr, "ultraplan plan: out of memory\n");
            goto out;
        }
        if (in.out_path && util_write_atomic(in.out_path, text, err, sizeof err) != 0) {
            fprintf(stderr, "ultraplan plan: %s\n", err);
            free(text);
            goto out;
        }
        if (in.json)
            printf("%s\n", text);
        free(text);
    }
    if (!in.json)
        print_table(&in, &req, &res, pos);
    if (in.out_path && !in.json) {
        if (pick == 1)
            printf("\nwrote the best plan to %s\n", in.out_path);
        else
            printf("\nwrote plan #%d to %s\n", pick, in.out_path);
    }
    rc = 0;
out:
    planner_result_free(&res);
    free(pos);
    free(opts);
    return rc;
}

const Command cmd_plan = {"plan", "search all layouts (ILP per stage) and rank the best", plan_main};
