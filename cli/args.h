/* args.h — the flags that predict, plan and tui share: model, hardware,
 * layout and training budget; plus size parsing (175B, 80GiB).
 *
 * Parsing fills a CliInputs and records which knobs the user fixed, so the
 * planner searches only the free ones. Errors go to an err buffer that names
 * the flag and what was expected; nothing here exits.
 */
#ifndef ULTRAPLAN_CLI_ARGS_H
#define ULTRAPLAN_CLI_ARGS_H

#include <getopt.h>
#include <stdbool.h>

#include "cost.h"
#include "knobs.h"



typedef struct {
    ModelSpec model;
    char model_rule[256];      // how --params chose the shape ("" for presets and explicit shapes)
    HwProfile hw;
    Layout layout;
    Recompute recompute;       // --recompute (uniform)
    CostOpts opts;
    int gpus;                  // --gpus; 0 = tp*pp*cp*dp
    unsigned fixed;            // FIX_* bits
    bool json;                 // --json
    const char *out_path;      // -o FILE
    /* internal: what was given, resolved in args_finish */
    const char *model_name;
    double params;
    const char *gpu_name;
    const char *profile_path;
    int gpus_per_node;
    int shape_given;           // bitmask of explicit shape flags
    int stage_layers[LAYOUT_MAX_PP];
    int n_stage_layers;
} CliInputs;

/* Option ids of the shared flags start here; commands use ids below 1000. */
#define ARGS_OPT_BASE 1000

void args_init(CliInputs *in);

/* The shared long options (terminated by a zero entry). A command copies
 * them after its own into one table for getopt_long. */
const struct option *args_common_options(void);
int args_common_count(void);

/* Handle one shared option (id >= ARGS_OPT_BASE). 0 ok, -1 error in err. */
int args_handle(CliInputs *in, int id, const char *arg, char *err, int errlen);

/* After parsing: resolve model, profile, dp and defaults; check the layout
 * when `need_layout`. 0 ok, -1 error in err. */
int args_finish(CliInputs *in, bool need_layout, char *err, int errlen);

/* Help text of the shared flags, for a command's --help. */
const char *args_common_help(void);

/* "175B" -> 175e9 (K M B G T suffixes, decimal); -1 on junk, negatives, inf. */
int args_parse_count(const char *s, double *out);
/* "80GiB" -> 85899345920, "80GB" -> 8e10; bare numbers are bytes. */
int args_parse_bytes(const char *s, double *out);
/* Positive int with an optional K/M suffix that must be a whole number. */
int args_parse_int(const char *s, int *out);

/* Default global batch for a model: the power of two of sequences nearest 4M tokens. */
int args_default_gbs(const ModelSpec *m);

#endif
