/* cmd_models.c — `ultraplan models`: the model presets (total and active
 * parameters, experts as top-k/routed) and GPU profiles. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "command.h"
#include "fileio.h"
#include "planfile.h"
#include "presets.h"
#include "profile.h"
#include "stacks.h"

/* presets[] as plan.json's model objects plus their source; gpus[] as the profiles. */
static int models_json(void)
{
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "format", "ultraplan.models/1");
    cJSON *pa = cJSON_AddArrayToObject(j, "presets");
    for (int i = 0; i < presets_count(); i++) {
        cJSON *m = plan_model_json(presets_get(i));
        cJSON_AddStringToObject(m, "source", presets_source(i));
        cJSON_AddItemToArray(pa, m);
    }
    cJSON *ga = cJSON_AddArrayToObject(j, "gpus");
    for (int i = 0; i < profile_builtin_count(); i++) {
        HwProfile hw;
        char err[256];
        if (profile_load_builtin(profile_builtin_name(i), &hw, err, sizeof err) != 0) {
            fprintf(stderr, "ultraplan models: %s\n", err);
            cJSON_Delete(j);
            return 1;
        }
        char *text = profile_to_json(&hw);
        cJSON *g = text ? cJSON_Parse(text) : NULL;
        free(text);
        cJSON_AddItemToArray(ga, g ? g : cJSON_CreateNull());
    }
    cJSON *sa = cJSON_AddArrayToObject(j, "stacks");
    for (int i = 0; i < STACK_BUILTIN_COUNT; i++) {
        Stack st;
        char err[400];
        if (stacks_load(i, &st, err, sizeof err) != 0) {
            fprintf(stderr, "ultraplan models: %s\n", err);
            cJSON_Delete(j);
            return 1;
        }
        char *text = stacks_to_json(&st);
        cJSON *s = text ? cJSON_Parse(text) : NULL;
        free(text);
        cJSON_AddItemToArray(sa, s ? s : cJSON_CreateNull());
    }
    char *out = cJSON_Print(j);
    cJSON_Delete(j);
    char err[256];
    int rc = out && util_write_atomic("-", out, err, sizeof err) == 0 ? 0 : 1;
    free(out);
    return rc;
}

static int models_main(int argc, char **argv)
{
    if (argc > 1 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
        printf("usage: ultraplan models [--json]\n\nLists the model presets (for --model) with their sources, and the\n"
               "built-in GPU profiles (for --gpu) and software stacks (for --stack).\n\n"
               "  --json   one JSON document (ultraplan.models/1): presets[] with the shape fields of plan.json's\n"
               "           \"model\" and their source, gpus[] with the whole profile of each, stacks[] with\n"
               "           every field of each stack (profiles/stacks/NAME.json without its sources)\n");
        return 0;
    }
    bool json = argc == 2 && !strcmp(argv[1], "--json");
    if (argc > 1 && !json) {
        fprintf(stderr, "ultraplan models: unexpected argument \"%s\" (the only option is --json)\n", argv[1]);
        return 2;
    }
    if (json)
        return models_json();
    printf("%-16s %8s %8s %6s %6s %5s %4s %7s %9s %6s %7s  %s\n", "preset", "params", "active", "layers", "hidden",
           "heads", "kv", "ffn", "experts", "seq", "vocab", "source");
    for (int i = 0; i < presets_count(); i++) {
        const ModelSpec *m = presets_get(i);
        char ex[16] = "-";
        if (m->experts > 0)
            snprintf(ex, sizeof ex, "%d/%d", m->topk, m->experts);
        printf("%-16s %7.2fB %7.2fB %6d %6d %5d %4d %7d %9s %6d %7d  %s\n", m->name,
               (double)spec_params(m, 1, PARAMS_EXACT) / 1e9, (double)spec_params_active(m, 1, PARAMS_EXACT) / 1e9,
               m->L, m->h, m->a, m->g, m->f, ex, m->s, m->vocab, presets_source(i));
    }
    printf("\n%-10s %9s %9s %8s %10s  %s\n", "gpu", "bf16 TF/s", "HBM GiB", "HBM TB/s", "GPUs/node", "description");
    for (int i = 0; i < profile_builtin_count(); i++) {
        HwProfile hw;
        char err[256];
        if (profile_load_builtin(profile_builtin_name(i), &hw, err, sizeof err) != 0) {
            fprintf(stderr, "ultraplan models: %s\n", err);
            return 1;
        }
        printf("%-10s %9.0f %9.1f %8.2f %10d  %s\n", hw.name, hw.peak[PREC_BF16] / 1e12, hw.hbm_bytes / 1073741824.0,
               hw.hbm_bw / 1e12, hw.gpus_per_node, hw.desc);
    }
    printf("\n%-23s %5s %5s %-7s %4s %4s %6s %6s  %s\n", "stack", "gemm", "mem", "attn", "tp", "dp", "zero3", "pp p2p",
           "description");
    for (int i = 0; i < STACK_BUILTIN_COUNT; i++) {
        Stack st;
        char err[400], tp[16] = "-", dp[16] = "-", z3[16] = "-";
        if (stacks_load(i, &st, err, sizeof err) != 0) {
            fprintf(stderr, "ultraplan models: %s\n", err);
            return 1;
        }
        if (st.tp_overlap >= 0)
            snprintf(tp, sizeof tp, "%g", st.tp_overlap);
        if (st.dp_overlap >= 0)
            snprintf(dp, sizeof dp, "%g", st.dp_overlap);
        if (st.zero3_gathers_per_layer > 0)
            snprintf(z3, sizeof z3, "%d/L", st.zero3_gathers_per_layer);
        printf("%-23s %5.3g %5.3g %-7s %4s %4s %6s %6s  %s\n", st.name, st.gemm_scale, st.mem_scale,
               stack_attn_kernel_name(st.attn_kernel), tp, dp, z3, st.pp_p2p_serial ? "serial" : "paired", st.desc);
    }
    return 0;
}

const Command cmd_models = {"models", "list model presets, GPU profiles and software stacks", models_main};
