/* cmd_predict.c — `ultraplan predict`: the cost of one given layout.
 *
 * Besides the report: whether the layout leaves the memory margin
 * (--mem-margin) free, and, under --target megatron (the default), whether
 * Megatron-LM can run it as laid out. A layout it cannot is still predicted
 * (what ultraplan's executor would run) with a warning on stderr naming the
 * reason; in --json both are the "margin" and "target" objects. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "command.h"
#include "export.h"
#include "refuse.h"
#include "report.h"

static void help(FILE *f)
{
    fprintf(f, "usage: ultraplan predict [model] [hardware] [layout] [--tokens N] [--json] [-o FILE]\n\n"
               "Predicts memory per GPU and pipeline stage, step time by phase, MFU, tokens/s and training\n"
               "days (with failures and checkpoints priced in) for one layout. A layout that does not fit\n"
               "memory is still predicted, with fits=false and the overflow named. Says whether the layout\n"
               "leaves --mem-margin free, and under --target megatron (the default) warns when Megatron-LM\n"
               "cannot run the layout as laid out (export refuses it); --target ultraplan (ultraplan-cuda)\n"
               "predicts it for ultraplan's own CPU (CUDA) executor and warns when that executor refuses it.\n\n%s\n"
               "example: ultraplan predict --model gpt3-175b --gpu a100-80g --gpus 1024 --tp 8 --pp 8 --mbs 1 --gbs 1536\n",
            args_common_help());
}

/* The margin and target objects of predict --json. */
static void add_checks(cJSON *j, const Scenario *sc, const Cost *c, bool mega_ok, const char *why)
{
    cJSON *mj = cJSON_AddObjectToObject(j, "margin");
    double free_b = c->capacity_bytes - c->peak_bytes;
    cJSON_AddNumberToObject(mj, "margin_bytes", sc->mem_margin_bytes);
    cJSON_AddNumberToObject(mj, "free_bytes", free_b);
    cJSON_AddBoolToObject(mj, "within_margin", free_b >= sc->mem_margin_bytes);
    cJSON *tj = cJSON_AddObjectToObject(j, "target");
    cJSON_AddStringToObject(tj, "name", layout_target_name(sc->layout.target));
    cJSON_AddBoolToObject(tj, "megatron_expressible", mega_ok);
    if (!mega_ok)
        cJSON_AddStringToObject(tj, "why", why);
}

/* One line under the report: the free memory against the margin. */
static void margin_line(FILE *f, const Scenario *sc, const Cost *c)
{
    double gib = 1073741824.0, free_b = c->capacity_bytes - c->peak_bytes, mb = sc->mem_margin_bytes;
    char share[32] = "";
    if (sc->mem_margin < 0 || sc->mem_margin_frac)
        snprintf(share, sizeof share, " (%.3g%% of %.1f GiB)", 100 * mb / c->capacity_bytes, c->capacity_bytes / gib);
    if (free_b >= mb)
        fprintf(f, "memory margin %.2f GiB%s: %.2f GiB free, the margin is left\n", mb / gib, share, free_b / gib);
    else if (free_b >= 0)
        fprintf(f, "memory margin %.2f GiB%s: only %.2f GiB free, inside the margin (plan would not choose this "
                   "layout; --mem-margin to change it)\n", mb / gib, share, free_b / gib);
    else
        fprintf(f, "memory margin %.2f GiB%s: none left, the layout does not fit\n", mb / gib, share);
}

static int predict_main(int argc, char **argv)
{
    static const struct option own[] = {{"help", no_argument, 0, 'h'}};
    struct option *opts = command_options(own, 1);
    CliInputs in;
    args_init(&in);
    char err[512];
    int c, rc = 2;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "ho:", opts, NULL)) != -1) {
        if (c == 'h') {
            help(stdout);
            rc = 0;
            goto out;
        } else if (c == 'o') {
            in.out_path = optarg;
        } else if (c == '?' || c == ':') {
            command_bad_option("predict", argv);
            goto out;
        } else if (args_handle(&in, c, optarg, err, sizeof err) != 0) {
            fprintf(stderr, "ultraplan predict: %s\n", err);
            goto out;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "ultraplan predict: unexpected argument \"%s\" (see --help)\n", argv[optind]);
        goto out;
    }
    bool gpus_given = in.sc.gpus > 0;
    if (args_finish(&in, true, err, sizeof err) != 0) {
        fprintf(stderr, "ultraplan predict: %s\n", err);
        goto out;
    }
    bool one_gpu_note = in.sc.gpus == 1 && !gpus_given &&
                        !(in.sc.given & (KNOB_BIT(K_TP) | KNOB_BIT(K_PP) | KNOB_BIT(K_CP) | KNOB_BIT(K_DP)));
    if (in.out_path && util_check_writable(in.out_path, err, sizeof err) != 0) {
        fprintf(stderr, "ultraplan predict: -o: %s\n", err);
        rc = 1;
        goto out;
    }
    Cost cst;
    cost(&in.sc.model, &in.sc.hw, &in.sc.layout, &in.sc.opts, &cst);
    char why[400] = "";
    bool mega_ok = layout_megatron_check(&in.sc.layout, &in.sc.model, why, sizeof why) == 0;
    if (in.json || in.out_path) {
        cJSON *j = report_predict_json(&in.sc.model, &in.sc.hw, &in.sc.layout, &cst, in.sc.model_rule);
        add_checks(j, &in.sc, &cst, mega_ok, why);
        char *text = cJSON_Print(j);
        cJSON_Delete(j);
        if (!text) {
            fprintf(stderr, "ultraplan predict: out of memory\n");
            rc = 1;
            goto out;
        }
        if (util_write_atomic(in.out_path ? in.out_path : "-", text, err, sizeof err) != 0) {
            fprintf(stderr, "ultraplan predict: %s\n", err);
            free(text);
            rc = 1;
            goto out;
        }
        free(text);
        if (in.out_path && !in.json) {
            report_text(stdout, &in.sc.model, &in.sc.hw, &in.sc.layout, &cst, in.sc.model_rule);
            margin_line(stdout, &in.sc, &cst);
        }
    } else {
        report_text(stdout, &in.sc.model, &in.sc.hw, &in.sc.layout, &cst, in.sc.model_rule);
        margin_line(stdout, &in.sc, &cst);
    }
    char refused[400];
    if (!mega_ok && in.sc.layout.target == TARGET_MEGATRON)
        fprintf(stderr, "ultraplan predict: warning: Megatron-LM cannot run this layout as laid out (--target "
                        "megatron): %s; export refuses it%s\n", why,
                in.sc.layout.pp_sched == PP_SCHED_1F1B &&
                        refuse_target(&in.sc.model, &in.sc.layout, TARGET_ULTRAPLAN, refused, sizeof refused) == 0
                    ? "; --target ultraplan predicts it for ultraplan's executor"
                    : "");
    Target tg = in.sc.layout.target;
    if (export_target_refuse(&in.sc.model, &in.sc.layout, tg, refused, sizeof refused) != 0) {
        if (tg == TARGET_TORCHTITAN)   /* refused: "torchtitan: why" */
            fprintf(stderr, "ultraplan predict: warning: --target %s; `export --format torchtitan` would refuse "
                            "the plan\n", refused);
        else
            fprintf(stderr, "ultraplan predict: warning: ultraplan's executor of --target %s refuses this layout: "
                            "%s; `run` would refuse the plan\n", layout_target_name(tg), refused);
    }
    if (one_gpu_note)
        fprintf(stderr, "ultraplan predict: note: no --gpus and no layout given: this is the prediction for one GPU "
                        "(tp*pp*cp*dp = 1)\n");
    rc = 0;
out:
    free(opts);
    return rc;
}

const Command cmd_predict = {"predict", "cost of one layout: memory, step time, MFU, days", predict_main};
