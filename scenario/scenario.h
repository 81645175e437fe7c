/* scenario.h — the resolved inputs of one question: which model, on which
 * hardware, in which layout, for what budget, and which knobs the user fixed.
 *
 * cli/ fills a Scenario from flags (through the knob table), the TUI edits
 * one, and the planner searches the knobs it leaves free. scenario_finish
 * turns what was given into a checked whole: the preset (or the --params
 * shape, or the Hugging Face config) plus the shape
 * knobs given over it, the hardware profile, the default global batch (by
 * model size and GPU count: scenario_default_batch), dp from the GPU count, the
 * best precision the hardware has, the stage split, the uniform
 * recomputation spread over the stages and the memory margin in bytes.
 * Errors name the flag and what was expected; nothing here prints or exits.
 */
#ifndef ULTRAPLAN_SCENARIO_SCENARIO_H
#define ULTRAPLAN_SCENARIO_SCENARIO_H

#include <stdbool.h>

#include "cost.h"
#include "hfconfig.h"
#include "knobs.h"

typedef struct {
    ModelSpec model;
    char model_rule[HFCONFIG_NOTE_MAX];   // how --params chose the shape, or what --hf-config approximated ("" otherwise)
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

/* The default global batch (when --gbs is not given), in sequences of m->s
 * tokens: the larger of
 *   (a) GPT-3's batch for the nearest model size in its table (Brown et al.
 *       2020, table 2.1: 0.5M tokens at 125M-760M parameters, 1M at 1.3B and
 *       2.7B, 2M at 6.7B and 13B, 3.2M at 175B; total parameters, nearest in
 *       log, the ends beyond the table), and
 *   (b) SCENARIO_TOKENS_PER_GPU tokens per GPU (Llama 3 405B: 16M tokens on
 *       16,384 GPUs, with 8K sequences at cp 1 and 128K at cp 16: 16
 *       micro-batches for its 16 stages either way),
 * rounded in log to the nearest unit x 2^k sequences, where unit is the odd
 * part of the GPU count (3 for 3,072 GPUs, 1 for 512), so that a
 * data-parallel degree of that count divides the batch unless it holds more
 * factors of two than the batch; a unit above twice the target falls back to
 * 1 (a power of two). gpus <= 0: (a) alone, powers of two. */
#define SCENARIO_TOKENS_PER_GPU 1024

typedef struct {
    int gbs;               // the default, sequences
    int gpus;              // the GPU count it was made for (0: not known)
    double model_tokens;   // (a) tokens per step of GPT-3's nearest row
    double row_params;     // that row's parameters
    double gpu_seqs;       // (b) gpus x SCENARIO_TOKENS_PER_GPU / s, sequences
    int unit;              // the batch is unit x 2^k sequences
} DefaultBatch;

void scenario_default_batch(const ModelSpec *m, int gpus, DefaultBatch *d);
int scenario_default_gbs(const ModelSpec *m, int gpus);
/* The rule in words, with its numbers: "the larger of GPT-3's 3.2M tokens
 * at 175B params and 1024 tokens per GPU, as 2^k sequences" (or "as 3 x 2^k
 * sequences"). */
void scenario_default_batch_text(const DefaultBatch *d, char *buf, int len);

#endif
