/* presets.c — published model shapes and the --params rule (see presets.h). */
#include "presets.h"
#include "suggest.h"

#include <math.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

typedef enum { FAM_LLAMA2, FAM_LLAMA31, FAM_GPT3, FAM_MTNLG, FAM_MEGATRON } Family;

typedef struct {
    ModelSpec m;
    double nominal;       // the size in the name, parameters
    Family fam;           // lower = preferred when two presets share a nominal size
    const char *source;
} Preset;

/* GPT-3 style: f = 4h, GELU, LayerNorm, learned positions, biases, tied, dropout. */
#define GPT(nm, L_, h_, a_, dh, V, s_)                                                        \
    {.name = nm, .L = L_, .h = h_, .a = a_, .g = a_, .d_head = dh, .f = 4 * (h_), .vocab = V, \
     .vocab_div = 128, .s = s_, .mlp = MLP_GELU, .norm = NORM_LAYERNORM, .pos = POS_LEARNED,  \
     .bias = true, .tied = true, .dropout = true}
/* Llama style: SwiGLU, RMSNorm, RoPE, no biases, untied, no dropout, head dim 128. */
#define LLAMA(nm, L_, h_, a_, g_, f_, V, s_)                                                   \
    {.name = nm, .L = L_, .h = h_, .a = a_, .g = g_, .d_head = 128, .f = f_, .vocab = V,       \
     .vocab_div = 128, .s = s_, .mlp = MLP_SWIGLU, .norm = NORM_RMSNORM, .pos = POS_ROPE,      \
     .bias = false, .tied = false, .dropout = false}
/* Llama 3.x: as Llama, with RoPE base 500000 and Llama 3 frequency scaling. */
#define LLAMA3(nm, L_, h_, a_, g_, f_, V, s_)                                                  \
    {.name = nm, .L = L_, .h = h_, .a = a_, .g = g_, .d_head = 128, .f = f_, .vocab = V,       \
     .vocab_div = 128, .s = s_, .mlp = MLP_SWIGLU, .norm = NORM_RMSNORM, .pos = POS_ROPE,      \
     .bias = false, .tied = false, .dropout = false, .rope_theta = 500000, .rope_scaling = true}

#define GPT3_SRC "Brown et al. 2020 (GPT-3), Table 2.1; vocab 50257, n_ctx 2048"
#define MEG_SRC "Narayanan et al. 2021 (arXiv:2104.04473), Table 1; vocab 51200, seq 2048"
#define L2_SRC "Touvron et al. 2023 (Llama 2) and its released config.json; vocab 32000, seq 4096"
#define L31_SRC "Llama 3 paper (arXiv:2407.21783) Table 3 and Llama 3.1 config.json; vocab 128256, pretraining seq 8192"

static const Preset presets[] = {
    {GPT("gpt3-125m", 12, 768, 12, 64, 50257, 2048), 125e6, FAM_GPT3, GPT3_SRC},
    {GPT("gpt3-350m", 24, 1024, 16, 64, 50257, 2048), 350e6, FAM_GPT3, GPT3_SRC},
    {GPT("gpt3-760m", 24, 1536, 16, 96, 50257, 2048), 760e6, FAM_GPT3, GPT3_SRC},
    {GPT("gpt3-1.3b", 24, 2048, 16, 128, 50257, 2048), 1.3e9, FAM_GPT3,
     GPT3_SRC "; the table prints 24 heads of 128, which cannot give d_model 2048: 16 x 128 used"},
    {GPT("gpt3-2.7b", 32, 2560, 32, 80, 50257, 2048), 2.7e9, FAM_GPT3, GPT3_SRC},
    {GPT("gpt3-6.7b", 32, 4096, 32, 128, 50257, 2048), 6.7e9, FAM_GPT3, GPT3_SRC},
    {GPT("gpt3-13b", 40, 5120, 40, 128, 50257, 2048), 13e9, FAM_GPT3,
     GPT3_SRC "; the table prints d_model 5140, 40 heads x 128 = 5120 used"},
    {GPT("gpt3-175b", 96, 12288, 96, 128, 50257, 2048), 175e9, FAM_GPT3, GPT3_SRC},
    {LLAMA("llama2-7b", 32, 4096, 32, 32, 11008, 32000, 4096), 7e9, FAM_LLAMA2, L2_SRC},
    {LLAMA("llama2-13b", 40, 5120, 40, 40, 13824, 32000, 4096), 13e9, FAM_LLAMA2, L2_SRC},
    {LLAMA("llama2-70b", 80, 8192, 64, 8, 28672, 32000, 4096), 70e9, FAM_LLAMA2,
     L2_SRC "; GQA with 8 KV heads"},
    {LLAMA3("llama3.1-8b", 32, 4096, 32, 8, 14336, 128256, 8192), 8e9, FAM_LLAMA31, L31_SRC},
    {LLAMA3("llama3.1-70b", 80, 8192, 64, 8, 28672, 128256, 8192), 70e9, FAM_LLAMA31, L31_SRC},
    {LLAMA3("llama3.1-405b", 126, 16384, 128, 8, 53248, 128256, 8192), 405e9, FAM_LLAMA31,
     L31_SRC},
    {GPT("mtnlg-530b", 105, 20480, 128, 160, 50257, 2048), 530e9, FAM_MTNLG,
     "Smith et al. 2022 (MT-NLG, arXiv:2201.11990) §3.1: 105 layers, hidden 20480, 128 heads, "
     "seq 2048, GPT-2 BPE vocab 50257; GPT-3 style"},
    {GPT("megatron-1.7b", 24, 2304, 24, 96, 51200, 2048), 1.7e9, FAM_MEGATRON, MEG_SRC},
    {GPT("megatron-3.6b", 30, 3072, 32, 96, 51200, 2048), 3.6e9, FAM_MEGATRON, MEG_SRC},
    {GPT("megatron-7.5b", 36, 4096, 32, 128, 51200, 2048), 7.5e9, FAM_MEGATRON, MEG_SRC},
    {GPT("megatron-18b", 40, 6144, 48, 128, 51200, 2048), 18e9, FAM_MEGATRON, MEG_SRC},
    {GPT("megatron-39b", 48, 8192, 64, 128, 51200, 2048), 39e9, FAM_MEGATRON, MEG_SRC},
    {GPT("megatron-76b", 60, 10240, 80, 128, 51200, 2048), 76e9, FAM_MEGATRON, MEG_SRC},
    {GPT("megatron-145b", 80, 12288, 96, 128, 51200, 2048), 145e9, FAM_MEGATRON, MEG_SRC},
    {GPT("megatron-310b", 96, 16384, 128, 128, 51200, 2048), 310e9, FAM_MEGATRON, MEG_SRC},
    {GPT("megatron-530b", 105, 20480, 128, 160, 51200, 2048), 530e9, FAM_MEGATRON, MEG_SRC},
    {GPT("megatron-1t", 128, 25600, 160, 160, 51200, 2048), 1e12, FAM_MEGATRON, MEG_SRC},
};

#define NPRESETS ((int)(sizeof presets / sizeof presets[0]))
_Static_assert(sizeof presets / sizeof presets[0] == 25, "preset count changed: update tests");

int presets_count(void) { return NPRESETS; }

const ModelSpec *presets_get(int i) { return i >= 0 && i < NPRESETS ? &presets[i].m : NULL; }

const char *presets_source(int i) { return i >= 0 && i < NPRESETS ? presets[i].source : NULL; }

static void list_names(char *buf, int len)
{
    int n = 0;
    for (int i = 0; i < NPRESETS && n < len; i++)
        n += snprintf(buf + n, len - n, "%s%s", i ? ", " : "", presets[i].m.name);
}

int presets_find(const char *name, ModelSpec *out, char *err, int errlen)
{
    for (int i = 0; name && i < NPRESETS; i++)
        if (strcasecmp(name, presets[i].m.name) == 0) {
            *out = presets[i].m;
            return 0;
        }
    if (err && errlen > 0) {
        const char *names[NPRESETS];
        for (int i = 0; i < NPRESETS; i++)
            names[i] = presets[i].m.name;
        const char *near = util_closest(name, names, NPRESETS);
        int n = near ? snprintf(err, errlen, "unknown model \"%s\" (did you mean %s?); known: ", name, near)
                     : snprintf(err, errlen, "unknown model \"%s\"; known: ", name ? name : "");
        if (n < errlen)
            list_names(err + n, errlen - n);
    }
    return -1;
}

/* ---- --params ------------------------------------------------------------- */

static double exact_params(const ModelSpec *m) { return (double)spec_params(m, 1, PARAMS_EXACT); }

/* "20B", "1.3T", "350M" for messages and names. */
static void fmt_size(double n, char *buf, size_t len)
{
    if (n >= 1e12)
        snprintf(buf, len, "%.4gT", n / 1e12);
    else if (n >= 1e9)
        snprintf(buf, len, "%.4gB", n / 1e9);
    else
        snprintf(buf, len, "%.4gM", n / 1e6);
}

/* Rules 1 and 2 of presets.h: index of the matching preset or -1. */
static int match_preset(double target, int *by_nominal)
{
    int best = -1;
    for (int i = 0; i < NPRESETS; i++)
        if (fabs(presets[i].nominal / target - 1) <= 0.01 &&
            (best < 0 || presets[i].fam < presets[best].fam))
            best = i;
    *by_nominal = best >= 0;
    if (best >= 0)
        return best;
    double best_err = 0.03;
    for (int i = 0; i < NPRESETS; i++) {
        double e = fabs(exact_params(&presets[i].m) / target - 1);
        if (e <= best_err) {
            best_err = e;
            best = i;
        }
    }
    return best;
}

/* log h against log N over the GPT-3 and Megatron families, piecewise linear,
 * extended along the end segments. The anchors are sorted by N here. */
static double family_hidden(double target)
{
    double x[NPRESETS], y[NPRESETS];
    int n = 0;
    for (int i = 0; i < NPRESETS; i++) {
        if (presets[i].fam != FAM_GPT3 && presets[i].fam != FAM_MEGATRON)
            continue;
        double lx = log(exact_params(&presets[i].m)), ly = log(presets[i].m.h);
        int k = n++;
        for (; k > 0 && x[k - 1] > lx; k--) {
            x[k] = x[k - 1];
            y[k] = y[k - 1];
        }
        x[k] = lx;
        y[k] = ly;
    }
    double t = log(target);
    int j = 1;
    while (j < n - 1 && t > x[j])
        j++;
    /* the segment [j-1, j]; equal N in both families would divide by zero */
    while (j > 1 && x[j] <= x[j - 1])
        j--;
    double slope = x[j] > x[j - 1] ? (y[j] - y[j - 1]) / (x[j] - x[j - 1]) : 0;
    return exp(y[j - 1] + slope * (t - x[j - 1]));
}

/* Rule 3: GPT-3 style, h from the family curve (a multiple of 128, of 1024
 * from 4096 up), head dim 128, f = 4h, V 50257, s 2048; L makes the exact
 * count closest to target. */
static int derive_shape(double target, ModelSpec *m, char *rule, int rulelen, char *err,
                        int errlen)
{
    /* from 4096 up, a multiple of 1024 so the heads (h/128) split 8 ways, as
     * in the Megatron family; below, a multiple of 128 */
    double hf = family_hidden(target);
    int step = hf >= 4096 - 512 ? 1024 : 128;
    int h = (int)lround(hf / step) * step;
    if (h < 128)
        h = 128;
    ModelSpec d = GPT("", 0, h, h / 128, 128, 50257, 2048);
    double per_layer = (double)spec_layer_params(&d);
    double base = exact_params(&d);   // L = 0: embeddings, positions, final norm
    double L = round((target - base) / per_layer);
    d.L = L < 1 ? 1 : (int)L;
    char size[16];
    fmt_size(target, size, sizeof size);
    snprintf(d.name, sizeof d.name, "custom-%s", size);
    for (char *p = d.name; *p; p++)
        if (*p >= 'A' && *p <= 'Z')
            *p = (char)(*p - 'A' + 'a');
    if (spec_validate(&d, err, errlen))
        return -1;
    double got = exact_params(&d);
    char gs[16];
    fmt_size(got, gs, sizeof gs);
    if (rule && rulelen > 0)
        snprintf(rule, rulelen,
                 "derived GPT-3-style shape: h=%d (log h interpolated against log N over the "
                 "GPT-3 and Megatron families, rounded to a multiple of %d), head dim 128 "
                 "(a=%d), f=4h, V=50257, s=2048; L=%d makes the exact count %s (%+.2f%% of %s)%s",
                 d.h, step, d.a, d.L, gs, 100 * (got / target - 1), size,
                 fabs(got / target - 1) > 0.03 ? "; embeddings dominate at this size" : "");
    *m = d;
    return 0;
}

int presets_from_params(double params, ModelSpec *out, char *rule, int rulelen, char *err,
                        int errlen)
{
    if (!(params >= 1e6 && params <= 1e15)) {
        if (err && errlen > 0)
            snprintf(err, errlen,
                     "--params %.4g is out of range: give 1M to 1000T parameters (e.g. 175B)",
                     params);
        return -1;
    }
    int by_nominal;
    int i = match_preset(params, &by_nominal);
    if (i < 0)
        return derive_shape(params, out, rule, rulelen, err, errlen);
    double got = exact_params(&presets[i].m);
    char want[16], gs[16];
    fmt_size(params, want, sizeof want);
    fmt_size(got, gs, sizeof gs);
    if (rule && rulelen > 0)
        snprintf(rule, rulelen, "preset %s (%s; exact count %s, %+.2f%% of %s)",
                 presets[i].m.name, by_nominal ? "its nominal size" : "exact count within 3%",
                 gs, 100 * (got / params - 1), want);
    *out = presets[i].m;
    return 0;
}
