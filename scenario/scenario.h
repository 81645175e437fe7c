/* scenario.h — the resolved inputs of one question: which model, on which
 * hardware, in which layout, for what budget, and which knobs the user fixed.
 *
 * cli/ fills a Scenario from flags (through the knob table), the TUI edits
 * one, and the planner searches the knobs it leaves free. scenario_finish
 * turns what was given into a checked whole: the preset (or the --params
 * shape, or the Hugging Face config) plus the shape
 * knobs given over it, the hardware profile, the default global batch (the
 * power of two of sequences nearest 4M tokens), dp from the GPU count, the
 * best precision the hardware has, the stage split, the uniform
 * recomputation spread over the stages and the memory margin in bytes.
 * Errors name the flag and what was expected; nothing here prints or exits.
 */
#ifndef ULTRAPLAN_SCENARIO_SCENARIO_H
#define ULTRAPLAN_SCENARIO_SCENARIO_H

#include <stdbool.h>

#include "cost.h"
#include "knobs.h"

typedef struct {
    ModelSpec model;
    char model_rule[256];      // how --params chose the shape, or what --hf-config approximated ("" otherwise)
    HwProfile hw;
    Layout layout;
    Recompute recompute;       // uniform recomputation (--recompute)
    CostOpts opts;
    int gpus;                  // --gpus; 0 = tp*pp*cp*dp
    unsigned fixed;            // KnobFix bits: layout knobs the user fixed
    KnobSet given;             // knobs given (flags, TUI edits)
    int moe_freq_len;          // --moe-layer-freq given as a list: its length (must equal the layers); 0 otherwise
    /* what was given, resolved in scenario_finish */
    const char *model_name;    // --model
    double params;             // --params
    const char *hf_config;     // --hf-config: a Hugging Face config.json (hfconfig.h)
    const char *gpu_name;      // --gpu
    const char *profile_path;  // --profile
    int gpus_per_node;         // --gpus-per-node; 0 = the profile's
    /* --mem-margin: memory per GPU plans leave free, as bytes or as a share of capacity */
    double mem_margin;         // bytes, or a fraction (0..0.9) when mem_margin_frac; < 0 = not given
    bool mem_margin_frac;
    double mem_margin_bytes;   // resolved in scenario_finish against the profile's capacity
} Scenario;

/* The default --mem-margin: 5% of a GPU's memory (README, "Target framework
 * and memory margin", says what it stands for). */
#define SCENARIO_MEM_MARGIN_DEFAULT 0.05

/* Parse a --mem-margin value: "4GiB", "4" (GiB), "512MiB", "5%". 0 ok, -1
 * with err naming the flag. */
int scenario_parse_mem_margin(Scenario *sc, const char *text, char *err, int errlen);
/* mem_margin_bytes from mem_margin and the profile's capacity (again after
 * the hardware changes, as in the TUI); scenario_finish calls it and
 * refuses a margin of the whole GPU or more (the planner does too). */
void scenario_resolve_margin(Scenario *sc);

/* Defaults: layout_default, cost_opts_default, no recomputation, nothing given. */
void scenario_init(Scenario *sc);

/* Set a knob from text, as a flag does: parses, range-checks, records it as
 * given and sets its fix bit. `neg` is the negating flag of a bool (or an
 * enum's alias flag). 0 ok, -1 with err naming the flag. */
int scenario_set_knob(Scenario *sc, const Knob *k, bool neg, const char *text, char *err, int errlen);

/* The object a knob's field lives in: &sc->model, &sc->layout or sc, by its group. */
void *scenario_knob_obj(Scenario *sc, const Knob *k);

/* Resolve model, hardware, defaults and (when need_layout) dp and the
 * checked layout. 0 ok, -1 error in err. */
int scenario_finish(Scenario *sc, bool need_layout, char *err, int errlen);

/* For an explicit shape (no preset): the shape knobs it was not given and
 * took by default, as "--bias off, --tied on, ..." in buf. Returns how
 * many (0 for presets, --params and configs). */
int scenario_assumed(const Scenario *sc, char *buf, int len);

/* Default global batch for a model: the power of two of sequences nearest 4M tokens. */
int scenario_default_gbs(const ModelSpec *m);

#endif
