/* presets.c — published model shapes and the --params rule (see presets.h).
 * The mixture-of-experts presets and the Qwen / Mistral dense ones were read
 * from each model's official config.json on the Hugging Face Hub (the
 * repository named in its source); what a ModelSpec cannot hold is said in
 * the source line (approximations: attention sinks, sliding or chunked
 * windows, q/k norms and Qwen2's q/k/v-only biases are not counted). They
 * are not candidates of the --params rule, which keeps to the dense
 * families it always used. */
#include "presets.h"
#include "suggest.h"

#include <math.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

typedef enum { FAM_LLAMA2, FAM_LLAMA31, FAM_GPT3, FAM_MTNLG, FAM_MEGATRON, FAM_HUB } Family;

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

/* A Hub model: SwiGLU, RMSNorm, RoPE, untied, no biases, no dropout (MLA
 * presets give d_head = qk_nope + qk_rope, as spec_validate sets it). */
#define HUB(nm, L_, h_, a_, g_, dh, f_, V, s_, theta)                                               \
    .name = nm, .L = L_, .h = h_, .a = a_, .g = g_, .d_head = dh, .f = f_, .vocab = V, .vocab_div = 128, \
    .s = s_, .mlp = MLP_SWIGLU, .norm = NORM_RMSNORM, .pos = POS_ROPE, .bias = false, .tied = false,    \
    .dropout = false, .rope_theta = theta

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
    /* ---- dense models people ask for (Hub config.json) ---- */
    {{HUB("mistral-7b", 32, 4096, 32, 8, 128, 14336, 32000, 8192, 0), .window = 4095},
     7.24e9, FAM_HUB,
     "huggingface.co/mistralai/Mistral-7B-v0.1 config.json; seq 8192 (Jiang et al. 2023, Table 1); "
     "sliding_window 4096 on every layer (a token and the 4095 before it)"},
    {{HUB("qwen2.5-7b", 28, 3584, 28, 4, 128, 18944, 152064, 4096, 1000000)}, 7.61e9, FAM_HUB,
     "huggingface.co/Qwen/Qwen2.5-7B config.json; seq 4096 (Qwen2.5 report §3.2: pre-training at 4096); "
     "q/k/v biases not counted (0.3M)"},
    {{HUB("qwen2.5-72b", 80, 8192, 64, 8, 128, 29568, 152064, 4096, 1000000)}, 72.7e9, FAM_HUB,
     "huggingface.co/Qwen/Qwen2.5-72B config.json; seq 4096 (Qwen2.5 report §3.2); q/k/v biases not counted"},
    {{HUB("qwen3-8b", 36, 4096, 32, 8, 128, 12288, 151936, 4096, 1000000)}, 8.2e9, FAM_HUB,
     "huggingface.co/Qwen/Qwen3-8B config.json; seq 4096 (Qwen3 report §3.2: stages S1-S2 at 4096); q/k norms "
     "not counted"},
    {{HUB("qwen3-32b", 64, 5120, 64, 8, 128, 25600, 151936, 4096, 1000000)}, 32.8e9, FAM_HUB,
     "huggingface.co/Qwen/Qwen3-32B config.json; seq 4096 (Qwen3 report §3.2); q/k norms not counted"},
    /* ---- mixture of experts ---- */
    {{HUB("mixtral-8x7b", 32, 4096, 32, 8, 128, 14336, 32000, 32768, 1000000), .experts = 8, .topk = 2, .moe_ffn = 14336, .moe_freq = 1},
     46.7e9, FAM_HUB,
     "huggingface.co/mistralai/Mixtral-8x7B-v0.1 config.json (num_local_experts 8, num_experts_per_tok 2); "
     "seq 32768 (Jiang et al. 2024, §2); 46.7B total, 12.9B active"},
    {{HUB("mixtral-8x22b", 56, 6144, 48, 8, 128, 16384, 32768, 65536, 1000000), .experts = 8, .topk = 2, .moe_ffn = 16384, .moe_freq = 1},
     141e9, FAM_HUB,
     "huggingface.co/mistralai/Mixtral-8x22B-v0.1 config.json (8 experts, top 2, vocab 32768); seq 65536 "
     "(max_position_embeddings); 141B total, 39B active"},
    {{HUB("qwen3-30b-a3b", 48, 2048, 32, 4, 128, 6144, 151936, 4096, 1000000), .experts = 128, .topk = 8,
      .moe_ffn = 768, .moe_freq = 1},
     30.5e9, FAM_HUB,
     "huggingface.co/Qwen/Qwen3-30B-A3B config.json (num_experts 128, top 8, moe_intermediate_size 768, "
     "decoder_sparse_step 1, no shared expert); seq 4096 (Qwen3 report §3.2); q/k norms not counted; "
     "30.5B total, 3.3B active"},
    {{HUB("qwen3-235b-a22b", 94, 4096, 64, 4, 128, 12288, 151936, 4096, 1000000), .experts = 128, .topk = 8,
      .moe_ffn = 1536, .moe_freq = 1},
     235e9, FAM_HUB,
     "huggingface.co/Qwen/Qwen3-235B-A22B config.json (128 experts, top 8, moe_intermediate_size 1536); seq "
     "4096 (Qwen3 report §3.2); q/k norms not counted; 235B total, 22B active"},
    {{HUB("deepseek-v3", 61, 7168, 128, 128, 192, 18432, 129280, 4096, 0), .experts = 256, .topk = 8,
      .moe_ffn = 2048, .shared_ffn = 2048, .moe_freq = 1, .moe_first_dense = 3, .mtp_layers = 1,
      .router_groups = 8, .router_group_topk = 4, .attn = ATTN_MLA, .q_lora_rank = 1536, .kv_lora_rank = 512,
      .qk_nope_dim = 128, .qk_rope_dim = 64, .v_head_dim = 128},
     671e9, FAM_HUB,
     "huggingface.co/deepseek-ai/DeepSeek-V3 config.json (MLA q/kv lora 1536/512, 256 routed experts top 8 + "
     "1 shared, first_k_dense_replace 3, num_nextn_predict_layers 1, n_group 8, topk_group 4: node-limited "
     "routing); seq 4096 (DeepSeek-V3 report §4.2); 671B total / 37B active without the MTP module, as "
     "published; the sigmoid router's score-correction bias is not modelled"},
    {{.name = "gpt-oss-120b", .L = 36, .h = 2880, .a = 64, .g = 8, .d_head = 64, .f = 2880, .vocab = 201088,
      .vocab_div = 128, .s = 4096, .mlp = MLP_SWIGLU, .norm = NORM_RMSNORM, .pos = POS_ROPE, .bias = true,
      .tied = false, .dropout = false, .rope_theta = 150000, .experts = 128, .topk = 4,
      .moe_ffn = 2880, .moe_freq = 1, .window = 127, .window_skip_freq = 2, .sinks = true, .act_clamp = 7},
     116.8e9, FAM_HUB,
     "huggingface.co/openai/gpt-oss-120b config.json (128 experts, top 4, biases on q/k/v/o, experts and "
     "router); seq 4096 (initial_context_length); sliding_window 128 keys (itself + 127 before) on layers "
     "0, 2, 4, ... (layer_types), full causal on the others; per-head attention sinks (2304 in all); "
     "swiglu_limit 7 (quick-GELU gate, clamp 7, linear + 1); 116.83B total, 5.13B active (model card: "
     "without the input embedding)"},
    {{.name = "gpt-oss-20b", .L = 24, .h = 2880, .a = 64, .g = 8, .d_head = 64, .f = 2880, .vocab = 201088,
      .vocab_div = 128, .s = 4096, .mlp = MLP_SWIGLU, .norm = NORM_RMSNORM, .pos = POS_ROPE, .bias = true,
      .tied = false, .dropout = false, .rope_theta = 150000, .experts = 32, .topk = 4,
      .moe_ffn = 2880, .moe_freq = 1, .window = 127, .window_skip_freq = 2, .sinks = true, .act_clamp = 7},
     20.91e9, FAM_HUB,
     "huggingface.co/openai/gpt-oss-20b config.json: gpt-oss-120b's layer with 24 layers and 32 experts (top 4); "
     "seq 4096 (initial_context_length); the same windows, sinks and clamp; 20.91B total, 3.61B active (model "
     "card: without the input embedding)"},
    {{HUB("llama4-maverick", 48, 5120, 40, 8, 128, 16384, 202048, 8192, 500000), .experts = 128, .topk = 1,
      .moe_ffn = 8192, .shared_ffn = 8192, .moe_freq = 2, .moe_first_dense = 1},
     400e9, FAM_HUB,
     "huggingface.co/meta-llama/Llama-4-Maverick-17B-128E config.json text_config (128 experts, top 1, 1 "
     "shared expert of 8192, interleave_moe_layer_step 2: layers 1, 3, ... MoE, dense layers of "
     "intermediate_size_mlp 16384); seq 8192 (attention_chunk_size: the RoPE layers attend within 8192-token "
     "chunks; the config has no rope_scaling and max_position_embeddings 1048576, the served context, and no "
     "pre-training length is published); chunked attention and NoPE layers costed as full causal attention; text "
     "model only: 400B total, 17B active"},
    {{HUB("kimi-k2", 61, 7168, 64, 64, 192, 18432, 163840, 4096, 50000), .experts = 384, .topk = 8,
      .moe_ffn = 2048, .shared_ffn = 2048, .moe_freq = 1, .moe_first_dense = 1, .attn = ATTN_MLA,
      .q_lora_rank = 1536, .kv_lora_rank = 512, .qk_nope_dim = 128, .qk_rope_dim = 64, .v_head_dim = 128},
     1.04e12, FAM_HUB,
     "huggingface.co/moonshotai/Kimi-K2-Base config.json (DeepSeek-V3 architecture: MLA with 64 heads, 384 "
     "experts top 8 + 1 shared, first_k_dense_replace 1, no MTP); seq 4096 (Kimi K2 report §2.4); 1.04T total, "
     "32.6B active"},
};

#define NPRESETS ((int)(sizeof presets / sizeof presets[0]))
_Static_assert(sizeof presets / sizeof presets[0] == 39, "preset count changed: update tests");

int presets_count(void) { return NPRESETS; }

const ModelSpec *presets_get(int i) { return i >= 0 && i < NPRESETS ? &presets[i].m : NULL; }

const char *presets_source(int i) { return i >= 0 && i < NPRESETS ? presets[i].source : NULL; }

/* Every preset's name, or as many as fit with room left to say how many did
 * not and where they are: an error buffer never ends the list mid-name. */
static void list_names(char *buf, int len)
{
    int n = 0;
    for (int i = 0; i < NPRESETS && n < len; i++) {
        char tail[80];
        int tl = snprintf(tail, sizeof tail, "%s and %d more (`ultraplan models` lists them all)", i ? "," : "",
                          NPRESETS - i);
        int need = (i ? 2 : 0) + (int)strlen(presets[i].m.name) + (i + 1 < NPRESETS ? tl : 0);
        if (n + need >= len) {
            snprintf(buf + n, len - n, "%s", tail);
            return;
        }
        n += snprintf(buf + n, len - n, "%s%s", i ? ", " : "", presets[i].m.name);
    }
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
        if (presets[i].fam != FAM_HUB && fabs(presets[i].nominal / target - 1) <= 0.01 &&
            (best < 0 || presets[i].fam < presets[best].fam))
            best = i;
    *by_nominal = best >= 0;
    if (best >= 0)
        return best;
    double best_err = 0.03;
    for (int i = 0; i < NPRESETS; i++) {
        if (presets[i].fam == FAM_HUB)
            continue;
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
