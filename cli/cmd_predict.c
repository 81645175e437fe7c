/* cmd_predict.c — `ultraplan predict`: the cost of one given layout. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "command.h"
#include "report.h"

static void help(FILE *f)
{
    fprintf(f, "usage: ultraplan predict [model] [hardware] [layout] [--tokens N] [--json] [-o FILE]\n\n"
               "Predicts memory per GPU and pipeline stage, step time by phase, MFU, tokens/s and training\n"
               "days (with failures and checkpoints priced in) for one layout. A layout that does not fit\n"
               "memory is still predicted, with fits=false and the overflow named.\n\n%s\n"
               "example: ultraplan predict --model gpt3-175b --gpu a100-80g --gpus 1024 --tp 8 --pp 8 --mbs 1 --gbs 1536\n",
            args_common_help());
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
    if (in.json || in.out_path) {
        cJSON *j = report_predict_json(&in.sc.model, &in.sc.hw, &in.sc.layout, &cst, in.sc.model_rule);
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
        if (in.out_path && !in.json)
            report_text(stdout, &in.sc.model, &in.sc.hw, &in.sc.layout, &cst, in.sc.model_rule);
    } else {
        report_text(stdout, &in.sc.model, &in.sc.hw, &in.sc.layout, &cst, in.sc.model_rule);
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
