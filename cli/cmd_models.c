/* cmd_models.c — `ultraplan models`: the model presets and GPU profiles. */
#include <stdio.h>
#include <string.h>

#include "command.h"
#include "presets.h"
#include "profile.h"

static int models_main(int argc, char **argv)
{
    if (argc > 1 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
        printf("usage: ultraplan models\n\nLists the model presets (for --model) with their sources, and the\n"
               "built-in GPU profiles (for --gpu).\n");
        return 0;
    }
    if (argc > 1) {
        fprintf(stderr, "ultraplan models: unexpected argument \"%s\"\n", argv[1]);
        return 2;
    }
    printf("%-16s %8s %6s %6s %5s %4s %7s %6s %7s  %s\n", "preset", "params", "layers", "hidden", "heads", "kv",
           "ffn", "seq", "vocab", "source");
    for (int i = 0; i < presets_count(); i++) {
        const ModelSpec *m = presets_get(i);
        printf("%-16s %7.2fB %6d %6d %5d %4d %7d %6d %7d  %s\n", m->name,
               (double)spec_params(m, 1, PARAMS_EXACT) / 1e9, m->L, m->h, m->a, m->g, m->f, m->s, m->vocab,
               presets_source(i));
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
    return 0;
}

const Command cmd_models = {"models", "list model presets and GPU profiles", models_main};
