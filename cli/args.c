/* args.c — shared flags of predict, plan, sweep and tui, from the knob
 * table plus the scenario's own flags (see args.h). */
#include "args.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The flags that are not knobs: what the question is about and where the
 * answer goes. Knob flags get ids from KNOB_OPT_BASE, two per knob. */
enum {
    O_MODEL = ARGS_OPT_BASE, O_PARAMS, O_GPU, O_PROFILE, O_GPUS, O_GPN, O_TOKENS, O_MTBF, O_RESTART, O_PRICE, O_JSON, O_OUT,
    O_HF_CONFIG, O_MEM_MARGIN, O_SCENARIO_END
};
#define KNOB_OPT_BASE (ARGS_OPT_BASE + 100)
_Static_assert(O_SCENARIO_END <= KNOB_OPT_BASE, "scenario option ids stay below the knobs'");

typedef struct {
    const char *flag;
    const char *arg;
    int id;
    const char *section;     // the --help heading it goes under, or NULL: after the previous one
    const char *help;
    const char *help_search; // the help in plan and sweep, when it differs
} ScenarioFlag;

static const ScenarioFlag scen_flags[] = {
    {"model", "NAME", O_MODEL, "Model (one of):",
     "a preset (gpt3-175b, llama2-7b, llama3.1-405b, ...; see `ultraplan models`)", NULL},
    {"params", "SIZE", O_PARAMS, NULL, "the preset of that size, or a derived GPT-style shape (e.g. 175B, 20B)", NULL},
    {"hf-config", "FILE", O_HF_CONFIG, NULL,
     "a Hugging Face config.json (Llama, Mistral, Qwen2/3, Gemma, Mixtral, Qwen3-MoE, DeepSeek-V3,\n"
     "                          GPT-OSS, Llama 4); seq from max_position_embeddings", NULL},
    {"gpu", "NAME", O_GPU, "Hardware:", "a100-40g a100-80g h100-sxm h200 b200 gb200 b300 gb300 (default h100-sxm)", NULL},
    {"profile", "FILE", O_PROFILE, NULL, "a profile JSON (from `calibrate`, `fit` or your own)", NULL},
    {"gpus", "N", O_GPUS, NULL, "GPUs in the job (default tp*pp*cp*dp: 1 when no layout is given)",
     "GPUs in the job (required)"},
    {"gpus-per-node", "N", O_GPN, NULL, "GPUs per node / NVLink domain (default: the profile's)", NULL},
    {"mem-margin", "GiB|%", O_MEM_MARGIN, NULL,
     "memory per GPU to leave free: GiB (4, 512MiB) or a share (5%); default 5%:\n"
     "                          fragmentation, NCCL and workspaces the model does not count (predict says if left)",
     "memory per GPU every plan leaves free: GiB (4, 512MiB) or a share (5%); default 5%:\n"
     "                          fragmentation, NCCL and workspaces the model does not count"},
    {"tokens", "SIZE", O_TOKENS, "Training:", "token budget (default 20 tokens per parameter)", NULL},
    {"mtbf", "HOURS", O_MTBF, NULL, "per-GPU mean time between failures, 1e-6 to 1e15 (default: the profile's)", NULL},
    {"restart-time", "SECONDS", O_RESTART, NULL, "time to restart after a failure, 0 to 1e12 (default: the profile's)", NULL},
    {"price", "USD", O_PRICE, NULL, "dollars per GPU-hour: the run's cost in the report and the JSON (default: not priced)",
     NULL},
    {"json", NULL, O_JSON, "Output:", "one JSON document on stdout", NULL},
    {"output", "FILE", O_OUT, NULL, "write the JSON to FILE (atomically)", NULL},
};
#define N_SCEN ((int)(sizeof scen_flags / sizeof *scen_flags))

/* scenario flags + at most two per knob + the terminator */
static struct option options[N_SCEN + 2 * KNOB_COUNT + 1];
static int n_options;

static void build_options(void)
{
    if (n_options)
        return;
    int n = 0;
    for (int i = 0; i < N_SCEN; i++)
        options[n++] = (struct option){scen_flags[i].flag, scen_flags[i].arg ? required_argument : no_argument, 0,
                                       scen_flags[i].id};
    for (int i = 0; i < KNOB_COUNT; i++) {
        const Knob *k = knob_get((KnobId)i);
        if (!k->flag)
            continue;
        options[n++] = (struct option){k->flag, k->type == KNOB_BOOL ? no_argument : required_argument, 0,
                                       KNOB_OPT_BASE + 2 * i};
        if (k->neg_flag)
            options[n++] = (struct option){k->neg_flag, no_argument, 0, KNOB_OPT_BASE + 2 * i + 1};
    }
    options[n] = (struct option){0, 0, 0, 0};
    n_options = n;
}

const struct option *args_common_options(void)
{
    build_options();
    return options;
}

int args_common_count(void)
{
    build_options();
    return n_options;
}

/* The help texts grow as the knob table does: built once per mode into a
 * buffer that grows, so no line is ever cut (out of memory leaves the text
 * built so far, each line whole). */
typedef struct {
    char *s;
    size_t n, cap;
} HelpBuf;

static HelpBuf help_text[ARGS_HELP_COUNT];

static void hput(HelpBuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void hput(HelpBuf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int need = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (need < 0)
        return;
    if (b->n + (size_t)need + 1 > b->cap) {
        size_t c = b->cap ? b->cap : 16384;
        while (c < b->n + (size_t)need + 1)
            c *= 2;
        char *q = realloc(b->s, c);
        if (!q)
            return;
        b->s = q;
        b->cap = c;
    }
    va_start(ap, fmt);
    vsnprintf(b->s + b->n, b->cap - b->n, fmt, ap);
    va_end(ap);
    b->n += (size_t)need;
}

static void help_line(HelpBuf *t, const char *left, const char *help)
{
    int w = (int)strlen(left);
    hput(t, "  %s%*s%s\n", left, w < 24 ? 24 - w : 2, "", help);
}

static void knob_lines(HelpBuf *t, KnobGroup g, ArgsHelpMode mode)
{
    for (int i = 0; i < KNOB_COUNT; i++) {
        const Knob *k = knob_get((KnobId)i);
        bool layout_side = k->group != KNOB_MODEL;
        if (!k->flag || layout_side != (g != KNOB_MODEL))
            continue;
        char left[160];
        if (k->type == KNOB_BOOL)
            snprintf(left, sizeof left, "--%s | --%s", k->flag, k->neg_flag);
        else if (k->neg_flag)
            snprintf(left, sizeof left, "--%s %s | --%s", k->flag, k->arg, k->neg_flag);
        else
            snprintf(left, sizeof left, "--%s %s", k->flag, k->arg ? k->arg : "N");
        /* what happens when it is not given: searched, or its default */
        int w = (int)strlen(left);
        hput(t, "  %s%*s%s", left, w < 24 ? 24 - w : 2, "", k->help);
        if (k->searched && mode == ARGS_HELP_SEARCH)
            hput(t, " (searched unless given)\n");
        else if (k->dflt)
            hput(t, " (default %s)\n", k->dflt);
        else
            hput(t, "\n");
    }
}

const char *args_help(ArgsHelpMode mode)
{
    HelpBuf *t = &help_text[mode];
    if (t->n)
        return t->s;
    for (int i = 0; i < N_SCEN; i++) {
        const ScenarioFlag *f = &scen_flags[i];
        if (f->section && !strcmp(f->section, "Hardware:")) {
            /* the model-shape knobs close the Model section */
            hput(t, "  or an explicit shape (--layers --hidden --heads --seq --vocab at least); these also\n"
                    "  override single fields of a preset:\n");
            knob_lines(t, KNOB_MODEL, mode);
        }
        if (f->section && !strcmp(f->section, "Training:")) {
            hput(t, "Layout:\n");
            knob_lines(t, KNOB_LAYOUT, mode);
        }
        if (f->section)
            hput(t, "%s\n", f->section);
        char left[160];
        snprintf(left, sizeof left, "%s--%s%s%s", f->id == O_OUT ? "-o, " : "", f->flag, f->arg ? " " : "",
                 f->arg ? f->arg : "");
        help_line(t, left, mode == ARGS_HELP_SEARCH && f->help_search ? f->help_search : f->help);
    }
    hput(t, "Sizes take K M B G T (decimal) and KiB MiB GiB TiB / KB MB GB TB for bytes.\n");
    return t->s ? t->s : "";
}

const char *args_common_help(void) { return args_help(ARGS_HELP_PREDICT); }

/* A help line "  --flag ..." or "  -o, --flag ..." of a flag named in skip. */
static bool skipped_line(const char *p, const char *const *skip)
{
    if (strncmp(p, "  ", 2) != 0)
        return false;
    p += 2;
    if (strncmp(p, "-o, ", 4) == 0)
        p += 4;
    if (strncmp(p, "--", 2) != 0)
        return false;
    p += 2;
    size_t n = strcspn(p, " |\n");
    for (; *skip; skip++)
        if (strlen(*skip) == n && strncmp(p, *skip, n) == 0)
            return true;
    return false;
}

/* The help of `mode` without the lines of the flags in skip (one buffer per
 * call site's lifetime: the last call's text, freed on the next). */
const char *args_help_except(ArgsHelpMode mode, const char *const *skip)
{
    static HelpBuf text;
    text.n = 0;
    if (text.s)
        text.s[0] = 0;
    for (const char *p = args_help(mode); *p;) {
        size_t len = strcspn(p, "\n");
        if (p[len])
            len++;
        if (!skipped_line(p, skip))
            hput(&text, "%.*s", (int)len, p);
        p += len;
    }
    return text.s ? text.s : "";
}

void args_init(CliInputs *in)
{
    memset(in, 0, sizeof *in);
    scenario_init(&in->sc);
}

#define BAD(...) do { snprintf(err, errlen, __VA_ARGS__); return -1; } while (0)

static int want_int(const char *flag, const char *arg, int min, int *out, char *err, int errlen)
{
    int v;
    if (util_parse_int(arg, &v) != 0 || v < min)
        BAD("--%s: expected a whole number >= %d, got \"%s\"", flag, min, arg);
    *out = v;
    return 0;
}

int args_handle(CliInputs *in, int id, const char *arg, char *err, int errlen)
{
    Scenario *sc = &in->sc;
    if (id >= KNOB_OPT_BASE && id < KNOB_OPT_BASE + 2 * KNOB_COUNT) {
        const Knob *k = knob_get((KnobId)((id - KNOB_OPT_BASE) / 2));
        return scenario_set_knob(sc, k, (id - KNOB_OPT_BASE) % 2 == 1, arg, err, errlen);
    }
    double v;
    switch (id) {
    case O_MODEL: sc->model_name = arg; return 0;
    case O_HF_CONFIG: sc->hf_config = arg; return 0;
    case O_PARAMS:
        if (util_parse_count(arg, &v) != 0 || v <= 0)
            BAD("--params: expected a parameter count such as 175B or 7e9, got \"%s\"", arg);
        sc->params = v;
        return 0;
    case O_GPU: sc->gpu_name = arg; return 0;
    case O_PROFILE: sc->profile_path = arg; return 0;
    case O_GPUS: return want_int("gpus", arg, 1, &sc->gpus, err, errlen);
    case O_GPN: return want_int("gpus-per-node", arg, 1, &sc->gpus_per_node, err, errlen);
    case O_MEM_MARGIN: return scenario_parse_mem_margin(sc, arg, err, errlen);
    case O_TOKENS:
        if (util_parse_count(arg, &v) != 0 || v <= 0)
            BAD("--tokens: expected a token count such as 300B, got \"%s\"", arg);
        sc->opts.tokens = v;
        return 0;
    case O_MTBF:
        /* bounded so that failures per day and over the run stay finite at 1e8 GPUs */
        if (util_parse_count(arg, &v) != 0 || v < 1e-6 || v > 1e15)
            BAD("--mtbf: expected per-GPU hours from 1e-6 to 1e15, got \"%s\"", arg);
        sc->opts.mtbf_gpu_hours = v;
        return 0;
    case O_RESTART:
        if (util_parse_count(arg, &v) != 0 || v > 1e12)
            BAD("--restart-time: expected seconds from 0 to 1e12, got \"%s\"", arg);
        sc->opts.restart_s = v;
        return 0;
    case O_PRICE:
        if (util_parse_count(arg[0] == '$' ? arg + 1 : arg, &v) != 0 || !(v > 0 && v < 1e9))
            BAD("--price: expected dollars per GPU-hour above 0, such as 2.50, got \"%s\"", arg);
        sc->opts.price = v;
        return 0;
    case O_JSON: in->json = true; return 0;
    case O_OUT: in->out_path = arg; return 0;
    default: BAD("internal: unknown option id %d", id);
    }
}

int args_finish(CliInputs *in, bool need_layout, char *err, int errlen)
{
    return scenario_finish(&in->sc, need_layout, err, errlen);
}
