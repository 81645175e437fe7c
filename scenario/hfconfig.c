/* hfconfig.c — a Hugging Face config.json into a ModelSpec (see hfconfig.h).
 *
 * Field names and defaults are those of transformers' configuration classes
 * (LlamaConfig, MistralConfig, Qwen2Config, Qwen3Config, GemmaConfig, and the
 * mixture-of-experts MixtralConfig, Qwen3MoeConfig, DeepseekV3Config,
 * GptOssConfig, Llama4TextConfig): a key the file leaves out takes the class
 * default (num_key_value_heads = heads, head_dim = hidden / heads,
 * tie_word_embeddings per family). Llama4ForConditionalGeneration's shape is
 * its "text_config" (the vision tower is not costed). What Llama 4 has that
 * the spec cannot hold (chunked attention, NoPE layers) is costed as the
 * plain form and said in the note; sliding windows, GPT-OSS's sinks and its
 * clamped activation are the spec's own fields. */
#include "hfconfig.h"

#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fileio.h"
#include "json.h"

typedef struct {
    const char *arch;         // the "architectures" entry
    const char *model_type;   // its "model_type"
    const char *family;       // in the note
    bool tied;                // tie_word_embeddings when the file leaves it out
    bool attn_bias_key;       // the class reads attention_bias (q, k, v and o biases)
    bool mlp_bias_key;        // the class reads mlp_bias (gate, up and down biases)
    bool qkv_bias;            // q, k and v always carry biases, o does not (Qwen2)
    bool qk_norm;             // per-head RMSNorm of q and k (Qwen3): 2 d_head weights a layer
    bool gelu;                // gated GeLU MLP (GeGLU) rather than SwiGLU
    bool window_flag;         // sliding_window applies only with use_sliding_window (Qwen)
    int moe;                  // 0 dense; MOE_MIXTRAL, ...: how its experts are named
    bool mlp_biased;          // the MLP (experts) always carry biases (GPT-OSS), no key for it
    bool nested;              // the shape is the "text_config" object (Llama 4 multimodal)
} HfFamily;

enum { MOE_NONE, MOE_MIXTRAL, MOE_QWEN3, MOE_DEEPSEEK, MOE_GPTOSS, MOE_LLAMA4 };

static const HfFamily families[] = {
    {"LlamaForCausalLM", "llama", "Llama", false, true, true, false, false, false, false, MOE_NONE, false, false},
    {"MistralForCausalLM", "mistral", "Mistral", false, false, false, false, false, false, false, MOE_NONE, false, false},
    {"Qwen2ForCausalLM", "qwen2", "Qwen2", false, false, false, true, false, false, true, MOE_NONE, false, false},
    {"Qwen3ForCausalLM", "qwen3", "Qwen3", false, true, false, false, true, false, true, MOE_NONE, false, false},
    {"GemmaForCausalLM", "gemma", "Gemma", true, true, false, false, false, true, false, MOE_NONE, false, false},
    {"MixtralForCausalLM", "mixtral", "Mixtral", false, false, false, false, false, false, false, MOE_MIXTRAL, false, false},
    {"Qwen3MoeForCausalLM", "qwen3_moe", "Qwen3-MoE", false, true, false, false, true, false, true, MOE_QWEN3, false, false},
    {"DeepseekV3ForCausalLM", "deepseek_v3", "DeepSeek-V3", false, true, false, false, false, false, false,
     MOE_DEEPSEEK, false, false},
    {"GptOssForCausalLM", "gpt_oss", "GPT-OSS", false, true, false, false, false, false, false, MOE_GPTOSS, true, false},
    {"Llama4ForConditionalGeneration", "llama4", "Llama 4", false, true, false, false, false, false, false, MOE_LLAMA4,
     false, true},
    {"Llama4ForCausalLM", "llama4_text", "Llama 4", false, true, false, false, false, false, false, MOE_LLAMA4, false,
     false},
};
#define N_FAMILIES ((int)(sizeof families / sizeof *families))
#define KNOWN "LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM, GemmaForCausalLM, " \
              "MixtralForCausalLM, Qwen3MoeForCausalLM, DeepseekV3ForCausalLM, GptOssForCausalLM, " \
              "Llama4ForConditionalGeneration or Llama4ForCausalLM"

/* keys that mark a mixture-of-experts config */
static const char *const moe_keys[] = {"num_local_experts", "num_experts", "n_routed_experts",
                                       "moe_intermediate_size", "num_experts_per_tok"};

typedef struct {
    const char *path;
    char *err;
    int errlen;
} Ctx;

#define FIELD_BAD(c, key, ...)                                                                   \
    do {                                                                                         \
        int n_ = snprintf((c)->err, (c)->errlen, "%s: field \"%s\": ", (c)->path, key);          \
        if (n_ >= 0 && n_ < (c)->errlen)                                                         \
            snprintf((c)->err + n_, (c)->errlen - n_, __VA_ARGS__);                              \
        return -1;                                                                               \
    } while (0)

static const char *type_name(const cJSON *v)
{
    return cJSON_IsString(v) ? "a string" : cJSON_IsBool(v) ? "a boolean" : cJSON_IsNull(v) ? "null"
         : cJSON_IsArray(v) ? "an array" : cJSON_IsObject(v) ? "an object" : "a number";
}

/* A whole number 1..1e9. Absent (or null, as transformers treats None) takes
 * dflt when dflt > 0, else the field is required. */
static int get_int(const cJSON *j, const char *key, int dflt, int *out, const Ctx *c)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, key);
    if (!v || (cJSON_IsNull(v) && dflt > 0)) {
        if (dflt <= 0)
            FIELD_BAD(c, key, "missing (a dense decoder's config has it)");
        *out = dflt;
        return 0;
    }
    if (!cJSON_IsNumber(v))
        FIELD_BAD(c, key, "expected a whole number from 1 to 1e9, got %s", type_name(v));
    double d = v->valuedouble;
    if (!(d >= 1 && d <= 1e9) || d != floor(d))
        FIELD_BAD(c, key, "expected a whole number from 1 to 1e9, got %.17g", d);
    *out = (int)d;
    return 0;
}

/* A whole number 0..1e9; absent or null takes dflt. */
static int get_count(const cJSON *j, const char *key, int dflt, int *out, const Ctx *c)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, key);
    if (!v || cJSON_IsNull(v)) {
        *out = dflt;
        return 0;
    }
    if (!cJSON_IsNumber(v) || !(v->valuedouble >= 0 && v->valuedouble <= 1e9) ||
        v->valuedouble != floor(v->valuedouble))
        FIELD_BAD(c, key, "expected a whole number from 0 to 1e9, got %s", cJSON_IsNumber(v) ? "a fraction or "
                  "out of range" : type_name(v));
    *out = (int)v->valuedouble;
    return 0;
}

static int get_bool(const cJSON *j, const char *key, bool dflt, bool *out, const Ctx *c)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, key);
    if (!v || cJSON_IsNull(v)) {
        *out = dflt;
        return 0;
    }
    if (!cJSON_IsBool(v))
        FIELD_BAD(c, key, "expected true or false, got %s", type_name(v));
    *out = cJSON_IsTrue(v);
    return 0;
}

/* A string field or NULL when absent; present but not a string is an error. */
static int get_str(const cJSON *j, const char *key, const char **out, const Ctx *c)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, key);
    *out = NULL;
    if (!v || cJSON_IsNull(v))
        return 0;
    if (!cJSON_IsString(v) || !v->valuestring)
        FIELD_BAD(c, key, "expected a string, got %s", type_name(v));
    *out = v->valuestring;
    return 0;
}

static const HfFamily *family_of(const cJSON *j, const Ctx *c)
{
    const cJSON *archs = cJSON_GetObjectItemCaseSensitive(j, "architectures");
    const char *mt;
    if (get_str(j, "model_type", &mt, c) != 0)
        return NULL;
    const char *arch = NULL;
    if (archs && !cJSON_IsNull(archs)) {
        const cJSON *a0 = cJSON_IsArray(archs) ? cJSON_GetArrayItem(archs, 0) : NULL;
        if (!cJSON_IsString(a0) || cJSON_GetArraySize(archs) != 1) {
            snprintf(c->err, c->errlen, "%s: field \"architectures\": expected one name such as [\"LlamaForCausalLM\"]",
                     c->path);
            return NULL;
        }
        arch = a0->valuestring;
    }
    if (!arch && !mt) {
        snprintf(c->err, c->errlen, "%s: field \"architectures\": missing (and no \"model_type\"): not a "
                 "transformers model config?", c->path);
        return NULL;
    }
    for (int i = 0; i < N_FAMILIES; i++) {
        const HfFamily *f = &families[i];
        if (arch ? strcmp(arch, f->arch) != 0 : strcmp(mt, f->model_type) != 0)
            continue;
        if (arch && mt && strcmp(mt, f->model_type) != 0) {
            snprintf(c->err, c->errlen, "%s: field \"model_type\": \"%.60s\" contradicts architectures %s (\"%s\")",
                     c->path, mt, f->arch, f->model_type);
            return NULL;
        }
        return f;
    }
    if (arch)
        snprintf(c->err, c->errlen, "%s: field \"architectures\": \"%.80s\" is not supported (known: " KNOWN ")",
                 c->path, arch);
    else
        snprintf(c->err, c->errlen, "%s: field \"model_type\": \"%.80s\" is not supported (known: llama, mistral, "
                 "qwen2, qwen3, gemma, mixtral, qwen3_moe, deepseek_v3, gpt_oss, llama4, llama4_text)", c->path, mt);
    return NULL;
}

static int refuse_moe(const cJSON *j, const Ctx *c)
{
    for (size_t i = 0; i < sizeof moe_keys / sizeof *moe_keys; i++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, moe_keys[i]);
        if (!v || cJSON_IsNull(v) || (cJSON_IsNumber(v) && v->valuedouble == 0))
            continue;
        FIELD_BAD(c, moe_keys[i], "a mixture-of-experts key in a dense family's config (mixture-of-experts "
                  "configs read: MixtralForCausalLM, Qwen3MoeForCausalLM, DeepseekV3ForCausalLM, GptOssForCausalLM, "
                  "Llama4ForConditionalGeneration, Llama4ForCausalLM)");
    }
    return 0;
}

/* The model's name: _name_or_path, else the file's base name without
 * ".json" (the folder's for config.json); only [A-Za-z0-9._+/-] survive, so
 * the name is safe in every report and export. */
static void set_name(ModelSpec *m, const char *given, const char *path)
{
    char buf[512] = "";
    if (given) {
        snprintf(buf, sizeof buf, "%s", given);
        size_t n = strlen(buf);
        while (n > 0 && buf[n - 1] == '/')
            buf[--n] = 0;
        if (!strcmp(buf, ".") || !strcmp(buf, ".."))   /* "./": saved from a local folder */
            buf[0] = 0;
    }
    if (!buf[0]) {
        snprintf(buf, sizeof buf, "%s", path);
        size_t n = strlen(buf);
        while (n > 1 && buf[n - 1] == '/')
            buf[--n] = 0;
        char *base = strrchr(buf, '/');
        if (base && !strcmp(base + 1, "config.json")) {
            *base = 0;
            base = strrchr(buf, '/');
        } else if (n > 5 && !strcmp(buf + n - 5, ".json")) {
            buf[n - 5] = 0;
        }
        if (base)
            memmove(buf, base + 1, strlen(base + 1) + 1);
        if (!buf[0] || !strcmp(buf, ".") || !strcmp(buf, "..") || !strcmp(buf, "config"))
            snprintf(buf, sizeof buf, "hf-config");
    }
    /* too long for the spec: its last path component */
    const char *s = buf;
    if (strlen(s) >= sizeof m->name && strrchr(s, '/'))
        s = strrchr(s, '/') + 1;
    size_t n = strlen(s) < sizeof m->name ? strlen(s) : sizeof m->name - 1;
    memcpy(m->name, s, n);
    m->name[n] = 0;
    for (char *p = m->name; *p; p++)
        if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._+/-", *p))
            *p = '_';
}

/* Copies src into note; one that does not fit is cut and ends in "...",
 * so a reader sees that something is missing. */
static void note_copy(char *note, int notelen, const char *src)
{
    if (snprintf(note, (size_t)notelen, "%s", src) >= notelen && notelen > 4)
        strcpy(note + notelen - 4, "...");
}

/* Appends to the note (bounded: a long note is cut, marked "...", never overrun). */
__attribute__((format(printf, 3, 4))) static void note_add(char *note, int notelen, const char *fmt, ...)
{
    char more[HFCONFIG_NOTE_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(more, sizeof more, fmt, ap);
    va_end(ap);
    int n = (int)strlen(note);
    if (n + (int)strlen(more) < notelen)
        strcpy(note + n, more);
    else if (notelen > 4) {
        snprintf(note + n, (size_t)(notelen - n), "%s", more);
        strcpy(note + notelen - 4, "...");
    }
}

/* sliding_window (keys a query sees, itself included: the mask keeps
 * q - k < sliding_window) becomes Megatron's window W = sliding_window - 1
 * keys before the query. layer_types (GPT-OSS, later transformers) names the
 * windowed layers: they must follow Megatron's int --window-attn-skip-freq
 * N (layer i full when (i + 1) % N == 0, e.g. sliding, full, ... for N = 2);
 * without it every layer is windowed (Mistral). Another pattern is costed
 * as full causal attention and said in the note. */
static int read_window(const cJSON *j, const HfFamily *f, ModelSpec *m, int win, char *note, int notelen, const Ctx *c)
{
    const cJSON *lt = cJSON_GetObjectItemCaseSensitive(j, "layer_types");
    int sliding = 0, freq = 0;
    if (cJSON_IsArray(lt)) {
        if (cJSON_GetArraySize(lt) != m->L)
            FIELD_BAD(c, "layer_types", "%d entries for num_hidden_layers %d", cJSON_GetArraySize(lt), m->L);
        int i = 0, first_full = 0;
        for (const cJSON *e = lt->child; e; e = e->next, i++) {
            bool sl = cJSON_IsString(e) && !strcmp(e->valuestring, "sliding_attention");
            sliding += sl;
            if (!sl && !first_full)
                first_full = i + 1;
        }
        freq = sliding == m->L ? 0 : first_full;
        i = 0;
        for (const cJSON *e = lt->child; e; e = e->next, i++) {
            bool sl = cJSON_IsString(e) && !strcmp(e->valuestring, "sliding_attention");
            if (sl != (freq == 0 || (i + 1) % freq != 0))
                freq = -1;
        }
        if (sliding == 0)
            return 0;
        if (freq < 0) {
            note_add(note, notelen, "; %s sliding window %d (%d of %d layers, a pattern Megatron's "
                     "--window-attn-skip-freq cannot say) costed as full causal attention", f->family, win, sliding, m->L);
            return 0;
        }
    }
    m->window = win - 1;
    m->window_skip_freq = freq;
    note_add(note, notelen, "; %s sliding window %d keys (--window %d) on %d of %d layers", f->family, win, win - 1,
             spec_windowed_layers(m), m->L);
    return 0;
}

static int read_shape(const cJSON *j, const HfFamily *f, ModelSpec *m, char *note, int notelen, const Ctx *c)
{
    if (get_int(j, "num_hidden_layers", 0, &m->L, c) || get_int(j, "hidden_size", 0, &m->h, c) ||
        get_int(j, "num_attention_heads", 0, &m->a, c) || get_int(j, "intermediate_size", 0, &m->f, c) ||
        get_int(j, "vocab_size", 0, &m->vocab, c) || get_int(j, "max_position_embeddings", 0, &m->s, c) ||
        get_int(j, "num_key_value_heads", m->a, &m->g, c))
        return -1;
    if (m->a % m->g != 0)
        FIELD_BAD(c, "num_key_value_heads", "%d does not divide num_attention_heads %d", m->g, m->a);
    const cJSON *hd = cJSON_GetObjectItemCaseSensitive(j, "head_dim");
    if (hd && !cJSON_IsNull(hd)) {
        if (get_int(j, "head_dim", 0, &m->d_head, c) != 0)
            return -1;
    } else if (m->h % m->a != 0) {
        FIELD_BAD(c, "head_dim", "missing, and hidden_size %d is not a multiple of num_attention_heads %d", m->h,
                  m->a);
    }
    bool tied, attn_bias = false, mlp_bias = f->mlp_biased, window = !f->window_flag;
    if (get_bool(j, "tie_word_embeddings", f->tied, &tied, c) ||
        (f->attn_bias_key && get_bool(j, "attention_bias", false, &attn_bias, c)) ||
        (f->mlp_bias_key && get_bool(j, "mlp_bias", false, &mlp_bias, c)) ||
        (f->window_flag && get_bool(j, "use_sliding_window", false, &window, c)))
        return -1;
    /* the activation of the gated MLP: SwiGLU is silu; Gemma's GeGLU is a gelu */
    const char *act_key = "hidden_act", *act;
    if (get_str(j, act_key, &act, c) != 0)
        return -1;
    if (!act && f->gelu) {
        act_key = "hidden_activation";
        if (get_str(j, act_key, &act, c) != 0)
            return -1;
    }
    if (act && (f->gelu ? strncmp(act, "gelu", 4) != 0 : strcmp(act, "silu") != 0))
        FIELD_BAD(c, act_key, "\"%.40s\": a %s MLP is gated with %s", act, f->family, f->gelu ? "gelu" : "silu");
    double drop = 0;
    const cJSON *dv = cJSON_GetObjectItemCaseSensitive(j, "attention_dropout");
    if (dv && !cJSON_IsNull(dv)) {
        if (!cJSON_IsNumber(dv) || !(dv->valuedouble >= 0 && dv->valuedouble < 1))
            FIELD_BAD(c, "attention_dropout", "expected a probability from 0 to 1, got %s", type_name(dv));
        drop = dv->valuedouble;
    }
    /* rope_theta (transformers default 10000) and rope_scaling: costs do not
     * depend on them; export writes them so the run is this model */
    const cJSON *rt = cJSON_GetObjectItemCaseSensitive(j, "rope_theta");
    if (rt && !cJSON_IsNull(rt)) {
        if (!cJSON_IsNumber(rt) || !(rt->valuedouble >= 1 && rt->valuedouble <= 2147483647.0))
            FIELD_BAD(c, "rope_theta", "expected a number from 1 to 2147483647, got %s", type_name(rt));
        /* Megatron's --rotary-base is an integer: a fractional base is rounded, and said */
        double th = rt->valuedouble;
        m->rope_theta = th == 10000 ? 0 : (int)(th + 0.5);
        if (th != (double)(int)th)
            note_add(note, notelen, "; rope_theta %g rounded to %d (Megatron's --rotary-base is an integer)", th,
                     (int)(th + 0.5));
    }
    const cJSON *rs = cJSON_GetObjectItemCaseSensitive(j, "rope_scaling");
    if (rs && cJSON_IsObject(rs)) {
        const cJSON *ty = cJSON_GetObjectItemCaseSensitive(rs, "rope_type");
        if (!ty)
            ty = cJSON_GetObjectItemCaseSensitive(rs, "type");
        if (cJSON_IsString(ty) && !strcmp(ty->valuestring, "llama3"))
            m->rope_scaling = true;
        else
            note_add(note, notelen, "; rope_scaling \"%.20s\" not exported (only llama3 scaling is)",
                     cJSON_IsString(ty) ? ty->valuestring : "?");
    }
    m->mlp = MLP_SWIGLU;
    m->norm = NORM_RMSNORM;
    m->pos = POS_ROPE;
    m->tied = tied;
    m->dropout = drop > 0;
    /* ModelSpec's biases are all or none: partial ones are left out and counted in the note */
    m->bias = attn_bias && mlp_bias;
    int dh = m->d_head > 0 ? m->d_head : m->h / m->a;
    long long q = (long long)m->a * dh, kv = (long long)m->g * dh;
    if (f->gelu)
        note_add(note, notelen, "; %s's GeGLU MLP costed as swiglu (the same three matrices and FLOPs)", f->family);
    if (f->qkv_bias)
        note_add(note, notelen, "; q/k/v biases not counted (%lld parameters)", (long long)m->L * (q + 2 * kv));
    if (attn_bias != mlp_bias)
        note_add(note, notelen, "; %s biases not counted (%lld parameters)", attn_bias ? "attention" : "MLP",
                 (long long)m->L * (attn_bias ? q + 2 * kv + m->h : 2LL * m->f + m->h));
    if (f->qk_norm)
        note_add(note, notelen, "; q/k norms not counted (%lld parameters)", (long long)m->L * 2 * dh);
    int win = 0;
    const cJSON *wv = cJSON_GetObjectItemCaseSensitive(j, "sliding_window");
    if (window && wv && !cJSON_IsNull(wv) && get_int(j, "sliding_window", 0, &win, c) != 0)
        return -1;
    if (window && win > 0 && win < m->s)
        return read_window(j, f, m, win, note, notelen, c);
    return 0;
}

/* The experts, MLA and MTP of a mixture-of-experts family. */
static int read_moe(const cJSON *j, const HfFamily *f, ModelSpec *m, char *note, int notelen, const Ctx *c)
{
    switch (f->moe) {
    case MOE_MIXTRAL:
        /* MixtralConfig: every layer sparse, experts of intermediate_size */
        if (get_int(j, "num_local_experts", 8, &m->experts, c) || get_int(j, "num_experts_per_tok", 2, &m->topk, c))
            return -1;
        m->moe_ffn = m->f;
        m->moe_freq = 1;
        return 0;
    case MOE_QWEN3: {
        /* Qwen3MoeConfig: layer i is sparse when i is not in mlp_only_layers
         * and (i + 1) % decoder_sparse_step == 0 */
        int step;
        if (get_int(j, "num_experts", 128, &m->experts, c) || get_int(j, "num_experts_per_tok", 8, &m->topk, c) ||
            get_int(j, "moe_intermediate_size", 768, &m->moe_ffn, c) ||
            get_int(j, "decoder_sparse_step", 1, &step, c))
            return -1;
        m->moe_freq = step;
        m->moe_first_dense = step - 1;
        const cJSON *only = cJSON_GetObjectItemCaseSensitive(j, "mlp_only_layers");
        if (only && !cJSON_IsNull(only)) {
            if (!cJSON_IsArray(only))
                FIELD_BAD(c, "mlp_only_layers", "expected a list of layer numbers, got %s", type_name(only));
            int n = cJSON_GetArraySize(only);
            for (int i = 0; i < n; i++) {
                const cJSON *e = cJSON_GetArrayItem(only, i);
                if (!cJSON_IsNumber(e) || e->valuedouble != i || step != 1)
                    FIELD_BAD(c, "mlp_only_layers", "only a leading run [0, 1, ..., K-1] with decoder_sparse_step 1 "
                              "is supported (K dense layers, then every layer MoE)");
            }
            m->moe_first_dense = n;
        }
        return 0;
    }
    case MOE_DEEPSEEK: {
        /* DeepseekV3Config: layer i is MoE when i >= first_k_dense_replace
         * and i % moe_layer_freq == 0; n_shared_experts experts of
         * moe_intermediate_size form the shared MLP */
        int shared, freq;
        if (get_int(j, "n_routed_experts", 256, &m->experts, c) || get_int(j, "num_experts_per_tok", 8, &m->topk, c) ||
            get_int(j, "moe_intermediate_size", 2048, &m->moe_ffn, c) ||
            get_count(j, "n_shared_experts", 1, &shared, c) ||
            get_count(j, "first_k_dense_replace", 3, &m->moe_first_dense, c) ||
            get_int(j, "moe_layer_freq", 1, &freq, c) || get_count(j, "num_nextn_predict_layers", 1, &m->mtp_layers, c) ||
            get_count(j, "q_lora_rank", 0, &m->q_lora_rank, c) || get_int(j, "kv_lora_rank", 512, &m->kv_lora_rank, c) ||
            get_count(j, "qk_nope_head_dim", 128, &m->qk_nope_dim, c) ||
            get_int(j, "qk_rope_head_dim", 64, &m->qk_rope_dim, c) ||
            get_int(j, "v_head_dim", 128, &m->v_head_dim, c) || get_count(j, "n_group", 0, &m->router_groups, c) ||
            get_count(j, "topk_group", 0, &m->router_group_topk, c))
            return -1;
        if (freq > 1 && m->moe_first_dense % freq != 0)
            FIELD_BAD(c, "moe_layer_freq", "%d with first_k_dense_replace %d: only patterns with K a multiple of the "
                      "frequency are supported", freq, m->moe_first_dense);
        if ((double)shared * m->moe_ffn > 1e9)
            FIELD_BAD(c, "n_shared_experts", "%d shared experts of %d are out of range", shared, m->moe_ffn);
        m->moe_freq = freq;
        m->shared_ffn = shared * m->moe_ffn;
        m->attn = ATTN_MLA;
        m->g = m->a;
        note_add(note, notelen, "; the sigmoid router's score-correction bias (%lld) not counted",
                 (long long)spec_moe_layers(m) * m->experts);
        return 0;
    }
    case MOE_GPTOSS: {
        /* GptOssConfig: every layer sparse, num_local_experts experts of
         * intermediate_size, top num_experts_per_tok (the original file also
         * writes experts_per_token, which must agree); biases on q/k/v/o,
         * the experts and the router (attention_bias; the rest always) */
        int k2 = 0;
        if (get_int(j, "num_local_experts", 128, &m->experts, c) ||
            get_int(j, "experts_per_token", 4, &k2, c) || get_int(j, "num_experts_per_tok", k2, &m->topk, c))
            return -1;
        if (m->topk != k2)
            FIELD_BAD(c, "experts_per_token", "%d contradicts num_experts_per_tok %d", k2, m->topk);
        m->moe_ffn = m->f;
        m->moe_freq = 1;
        /* every GPT-OSS layer has its sinks (a per head) and the clamped
         * quick-GELU gate with the linear half offset by 1 (modeling_gpt_oss) */
        m->sinks = true;
        double lim = 7.0;
        const cJSON *lv = cJSON_GetObjectItemCaseSensitive(j, "swiglu_limit");
        if (lv && !cJSON_IsNull(lv)) {
            if (!cJSON_IsNumber(lv) || !(lv->valuedouble > 0 && lv->valuedouble <= 1e6))
                FIELD_BAD(c, "swiglu_limit", "expected a number in (0, 1e6] (the clamp of the gated activation)");
            lim = lv->valuedouble;
        }
        m->act_clamp = lim;
        return 0;
    }
    case MOE_LLAMA4: {
        /* Llama4TextConfig: layer i is MoE when i is in moe_layers, by default
         * interleave_moe_layer_step - 1, 2 step - 1, ...; its experts and its
         * one shared expert are of intermediate_size, the dense layers' MLP of
         * intermediate_size_mlp */
        int step;
        m->moe_ffn = m->f;
        if (get_int(j, "num_local_experts", 16, &m->experts, c) || get_int(j, "num_experts_per_tok", 1, &m->topk, c) ||
            get_int(j, "interleave_moe_layer_step", 1, &step, c) ||
            get_int(j, "intermediate_size_mlp", 16384, &m->f, c))
            return -1;
        if (step > m->L)
            FIELD_BAD(c, "interleave_moe_layer_step", "%d is more than num_hidden_layers %d (no MoE layer)", step, m->L);
        m->moe_freq = step;
        m->moe_first_dense = step - 1;
        m->shared_ffn = m->moe_ffn;
        const cJSON *ml = cJSON_GetObjectItemCaseSensitive(j, "moe_layers");
        if (ml && !cJSON_IsNull(ml)) {
            if (!cJSON_IsArray(ml))
                FIELD_BAD(c, "moe_layers", "expected a list of layer numbers, got %s", type_name(ml));
            int n = cJSON_GetArraySize(ml), want = 0;
            for (int i = step - 1; i < m->L; i += step)
                want++;
            for (int i = 0; i < n; i++) {
                const cJSON *e = cJSON_GetArrayItem(ml, i);
                if (n != want || !cJSON_IsNumber(e) || e->valuedouble != (double)(step - 1 + i * step))
                    FIELD_BAD(c, "moe_layers", "only the interleave_moe_layer_step pattern [%d, %d, ...] is supported",
                              step - 1, 2 * step - 1);
            }
        }
        int chunk = 0;
        const cJSON *cv = cJSON_GetObjectItemCaseSensitive(j, "attention_chunk_size");
        if (cv && !cJSON_IsNull(cv) && get_int(j, "attention_chunk_size", 0, &chunk, c) != 0)
            return -1;
        if (chunk > 0 && chunk < m->s)
            note_add(note, notelen, "; chunked attention (%d) and NoPE layers costed as full causal attention", chunk);
        return 0;
    }
    default:
        return 0;
    }
}

int hfconfig_parse(const char *text, const char *path, ModelSpec *out, char *note, int notelen, char *err,
                   int errlen)
{
    Ctx c = {path, err, errlen};
    cJSON *j = util_json_parse(text, path, err, errlen);
    if (!j)
        return -1;
    int rc = -1;
    ModelSpec m;
    memset(&m, 0, sizeof m);
    char local[HFCONFIG_NOTE_MAX] = "";
    const char *name;
    if (!cJSON_IsObject(j)) {
        snprintf(err, errlen, "%s: expected a JSON object (a transformers config.json)", path);
        goto out;
    }
    const HfFamily *f = family_of(j, &c);
    if (!f || (!f->moe && refuse_moe(j, &c) != 0) || get_str(j, "_name_or_path", &name, &c) != 0)
        goto out;
    snprintf(local, sizeof local, "Hugging Face config %.120s (%s)", path, f->family);
    const cJSON *shape = j;
    if (f->nested) {
        shape = cJSON_GetObjectItemCaseSensitive(j, "text_config");
        if (!cJSON_IsObject(shape)) {
            snprintf(err, errlen, "%s: field \"text_config\": %s (a %s config keeps its language model's shape there)",
                     path, shape ? "expected an object" : "missing", f->arch);
            goto out;
        }
        note_add(local, sizeof local, "; text_config only (the vision tower is not costed)");
    }
    if (read_shape(shape, f, &m, local, sizeof local, &c) != 0 || read_moe(shape, f, &m, local, sizeof local, &c) != 0)
        goto out;
    set_name(&m, name, path);
    char e2[256];
    if (spec_validate(&m, e2, sizeof e2) != 0) {
        snprintf(err, errlen, "%s: %s", path, e2);
        goto out;
    }
    *out = m;
    if (note && notelen > 0)
        note_copy(note, notelen, local);
    rc = 0;
out:
    cJSON_Delete(j);
    return rc;
}

int hfconfig_load(const char *path, ModelSpec *out, char *note, int notelen, char *err, int errlen)
{
    char *text = util_slurp(path, HFCONFIG_MAX_BYTES, NULL, err, errlen);
    if (!text)
        return -1;
    int rc = hfconfig_parse(text, path, out, note, notelen, err, errlen);
    free(text);
    return rc;
}
