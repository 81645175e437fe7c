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

/* Built-in GPU profile / stack i, or an error on stderr and false: the
 * tables below and the JSON take them alike. */
static bool gpu_at(int i, HwProfile *hw)
{
    char err[256];
    if (profile_load_builtin(profile_builtin_name(i), hw, err, sizeof err) == 0)
        return true;
    fprintf(stderr, "ultraplan models: %s\n", err);
    return false;
}

static bool stack_at(int i, Stack *st)
{
    char err[400];
    if (stacks_load(i, st, err, sizeof err) == 0)
        return true;
    fprintf(stderr, "ultraplan models: %s\n", err);
    return false;
}

/* A JSON text (owned, freed here) as an item: null when it is missing or bad. */
static cJSON *json_item(char *text)
{
    cJSON *j = text ? cJSON_Parse(text) : NULL;
    free(text);
    return j ? j : cJSON_CreateNull();
}

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
    cJSON *sa = cJSON_AddArrayToObject(j, "stacks");
    for (int i = 0; i < profile_builtin_count(); i++) {
        HwProfile hw;
        if (!gpu_at(i, &hw))
            goto fail;
        cJSON_AddItemToArray(ga, json_item(profile_to_json(&hw)));
    }
    for (int i = 0; i < STACK_BUILTIN_COUNT; i++) {
        Stack st;
        if (!stack_at(i, &st))
            goto fail;
        cJSON_AddItemToArray(sa, json_item(stacks_to_json(&st)));
    }
    char *out = cJSON_Print(j);
    cJSON_Delete(j);
    char err[256];
    int rc = out && util_write_atomic("-", out, err, sizeof err) == 0 ? 0 : 1;
    free(out);
    return rc;
fail:
    cJSON_Delete(j);
    return 1;
}

/* The presets: the main model's parameters as published (DeepSeek-V3:
 * 671B) and the MTP modules' apart, as predict prints them. */
static void presets_table(void)
{
    printf("%-16s %8s %7s %8s %6s %6s %5s %4s %7s %9s %6s %7s  %s\n", "preset", "params", "mtp", "active", "layers",
           "hidden", "heads", "kv", "ffn", "experts", "seq", "vocab", "source");
    for (int i = 0; i < presets_count(); i++) {
        const ModelSpec *m = presets_get(i);
        char ex[16] = "-", mtp[16] = "-";
        if (m->experts > 0)
            snprintf(ex, sizeof ex, "%d/%d", m->topk, m->experts);
        double nm = (double)spec_mtp_params(m);
        if (nm > 0)
            snprintf(mtp, sizeof mtp, "%.1fB", nm / 1e9);
        double total = (double)spec_params(m, 1, PARAMS_EXACT) - nm;
        double active = (double)(spec_params_active(m, 1, PARAMS_EXACT) - spec_mtp_params_active(m));
        printf("%-16s %7.2fB %7s %7.2fB %6d %6d %5d %4d %7d %9s %6d %7d  %s\n", m->name, total / 1e9, mtp,
               active / 1e9, m->L, m->h, m->a, m->g, m->f, ex, m->s, m->vocab, presets_source(i));
    }
}

static int gpus_table(void)
{
    printf("\n%-10s %9s %9s %8s %10s  %s\n", "gpu", "bf16 TF/s", "HBM GiB", "HBM TB/s", "GPUs/node", "description");
    for (int i = 0; i < profile_builtin_count(); i++) {
        HwProfile hw;
        if (!gpu_at(i, &hw))
            return 1;
        printf("%-10s %9.0f %9.1f %8.2f %10d  %s\n", hw.name, hw.peak[PREC_BF16] / 1e12, hw.hbm_bytes / 1073741824.0,
               hw.hbm_bw / 1e12, hw.gpus_per_node, hw.desc);
    }
    return 0;
}

static int stacks_table(void)
{
    printf("\n%-23s %5s %5s %-7s %4s %4s %6s %6s  %s\n", "stack", "gemm", "mem", "attn", "tp", "dp", "zero3", "pp p2p",
           "description");
    for (int i = 0; i < STACK_BUILTIN_COUNT; i++) {
        Stack st;
        char tp[16] = "-", dp[16] = "-", z3[16] = "-";
        if (!stack_at(i, &st))
            return 1;
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

static int models_main(int argc, char **argv)
{
    if (argc > 1 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
        printf("usage: ultraplan models [--json]\n\nLists the model presets (for --model) with their sources, and the\n"
               "built-in GPU profiles (for --gpu) and software stacks (for --stack). A preset's params and\n"
               "active are the main model's, as published (DeepSeek-V3: 671B, 37B active); mtp is its\n"
               "multi-token prediction modules' apart.\n\n"
               "  --json   one JSON document (ultraplan.models/1): presets[] with the shape fields of plan.json's\n"
               "           \"model\" and their source (params, params_active: the main model's; params_mtp\n"
               "           apart), gpus[] with the whole profile of each, stacks[] with\n"
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
    presets_table();
    return gpus_table() || stacks_table() ? 1 : 0;
}

const Command cmd_models = {"models", "list model presets, GPU profiles and software stacks", models_main};
