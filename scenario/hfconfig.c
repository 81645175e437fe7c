/* hfconfig.c — a Hugging Face config.json into a ModelSpec (see hfconfig.h).
 *
 * Field names and defaults are those of transformers' configuration classes
 * (LlamaConfig, MistralConfig, Qwen2Config, Qwen3Config, GemmaConfig): a key
 * the file leaves out takes the class default (num_key_value_heads = heads,
 * head_dim = hidden / heads, tie_word_embeddings per family). */
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
} HfFamily;

static const HfFamily families[] = {
    {"LlamaForCausalLM", "llama", "Llama", false, true, true, false, false, false, false},
    {"MistralForCausalLM", "mistral", "Mistral", false, false, false, false, false, false, false},
    {"Qwen2ForCausalLM", "qwen2", "Qwen2", false, false, false, true, false, false, true},
    {"Qwen3ForCausalLM", "qwen3", "Qwen3", false, true, false, false, true, false, true},
    {"GemmaForCausalLM", "gemma", "Gemma", true, true, false, false, false, true, false},
};
#define N_FAMILIES ((int)(sizeof families / sizeof *families))
#define KNOWN "LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM or GemmaForCausalLM"

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
                 "qwen2, qwen3, gemma)", c->path, mt);
    return NULL;
}

static int refuse_moe(const cJSON *j, const Ctx *c)
{
    for (size_t i = 0; i < sizeof moe_keys / sizeof *moe_keys; i++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, moe_keys[i]);
        if (!v || cJSON_IsNull(v) || (cJSON_IsNumber(v) && v->valuedouble == 0))
            continue;
        FIELD_BAD(c, moe_keys[i], "a mixture-of-experts model; ultraplan reads dense models only so far (" KNOWN ")");
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

/* Appends to the note (bounded: a long note is cut, never overrun). */
__attribute__((format(printf, 3, 4))) static void note_add(char *note, int notelen, const char *fmt, ...)
{
    int n = (int)strlen(note);
    if (n >= notelen - 1)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(note + n, (size_t)(notelen - n), fmt, ap);
    va_end(ap);
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
    bool tied, attn_bias = false, mlp_bias = false, window = !f->window_flag;
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
        note_add(note, notelen, "; %s sliding window %d costed as full causal attention", f->family, win);
    return 0;
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
    char local[256] = "";
    const char *name;
    if (!cJSON_IsObject(j)) {
        snprintf(err, errlen, "%s: expected a JSON object (a transformers config.json)", path);
        goto out;
    }
    if (refuse_moe(j, &c) != 0)
        goto out;
    const HfFamily *f = family_of(j, &c);
    if (!f || get_str(j, "_name_or_path", &name, &c) != 0)
        goto out;
    snprintf(local, sizeof local, "Hugging Face config %.120s (%s)", path, f->family);
    if (read_shape(j, f, &m, local, sizeof local, &c) != 0)
        goto out;
    set_name(&m, name, path);
    char e2[256];
    if (spec_validate(&m, e2, sizeof e2) != 0) {
        snprintf(err, errlen, "%s: %s", path, e2);
        goto out;
    }
    *out = m;
    if (note && notelen > 0)
        snprintf(note, notelen, "%s", local);
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
