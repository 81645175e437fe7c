/* test_hfconfig.c — --hf-config: real Hugging Face config.json files
 * (tests/data/hf/, README there names each model repository) read into the
 * shape ultraplan costs, checked against parameter counts computed by hand
 * from the config and against the published figure of each model; the MoE
 * configs (Mixtral, Qwen3-MoE, DeepSeek-V3, GPT-OSS, Llama 4) against their
 * presets; the refusals (MoE, unknown architecture, missing or mistyped fields); and the
 * scenario's use of it (shape flags over it, exclusions, the name). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fileio.h"
#include "hfconfig.h"
#include "knobs.h"
#include "presets.h"
#include "scenario.h"

static const char *data_dir = "tests/data/hf";

static void path_of(char *buf, size_t n, const char *file) { snprintf(buf, n, "%s/%s", data_dir, file); }

static char *read_data(const char *file)
{
    char p[1024], err[256];
    path_of(p, sizeof p, file);
    char *t = util_slurp(p, 1u << 20, NULL, err, sizeof err);
    if (!t)
        fail_msg("%s", err);
    return t;
}

/* text with the first `from` replaced by `to` (caller frees) */
static char *edit(const char *text, const char *from, const char *to)
{
    const char *at = strstr(text, from);
    assert_non_null(at);
    size_t n = strlen(text) - strlen(from) + strlen(to) + 1;
    char *out = malloc(n);
    assert_non_null(out);
    snprintf(out, n, "%.*s%s%s", (int)(at - text), text, to, at + strlen(from));
    return out;
}

/* One model: the shape read, the exact count worked out by hand from its
 * config (comment), and the count its publisher states. */
typedef struct {
    const char *file;
    int L, h, a, g, d_head, f, vocab, s;
    bool tied;
    int64_t exact;        // ultraplan's count, by hand (see below)
    double published;     // the model card's figure
} Case;

/* Per layer: attention h*(a*d) + 2*h*(g*d) + (a*d)*h, MLP 3*h*f (gated), two
 * RMSNorms 2*h; plus the embedding V*h (twice when untied) and a final norm h.
 *  Llama-3.1-8B: 32*(41,943,040 + 176,160,768 + 8,192) + 2*525,336,576 + 4,096
 *              = 8,030,261,248 (published 8.03B)
 *  Mistral-7B:   32*218,112,000 + 2*131,072,000 + 4,096 = 7,241,732,096 (7.24B)
 *  Qwen2.5-7B:   28*(29,360,128 + 203,685,888 + 7,168) + 2*544,997,376 + 3,584
 *              = 7,615,487,488; the real model adds 28*(3584+2*512) = 129,024
 *                q/k/v biases: 7,615,616,512 (published 7.61B, 6.53B non-embedding)
 *  Qwen3-8B:     36*(41,943,040 + 150,994,944 + 8,192) + 2*622,329,856 + 4,096
 *              = 8,190,726,144; the real model adds 36*2*128 = 9,216 q/k norm
 *                weights (published 8.2B, 6.95B non-embedding)
 *  gemma-7b:     28*(4*3072*4096 + 3*3072*24576 + 6,144) + 256,000*3072 (tied) + 3,072
 *              = 8,537,680,896 (published 8.54B; the Gemma report's
 *                non-embedding count 7,751,248,896 is 28 layers + final norm, exactly) */
static const Case cases[] = {
    {"Llama-3.1-8B.json", 32, 4096, 32, 8, 128, 14336, 128256, 131072, false, 8030261248LL, 8.03e9},
    {"Mistral-7B-v0.1.json", 32, 4096, 32, 8, 128, 14336, 32000, 32768, false, 7241732096LL, 7.24e9},
    {"Qwen2.5-7B.json", 28, 3584, 28, 4, 128, 18944, 152064, 131072, false, 7615487488LL, 7.61e9},
    {"Qwen3-8B.json", 36, 4096, 32, 8, 128, 12288, 151936, 40960, false, 8190726144LL, 8.2e9},
    {"gemma-7b.json", 28, 3072, 16, 16, 256, 24576, 256000, 8192, true, 8537680896LL, 8.54e9},
};

static void test_families(void **st)
{
    (void)st;
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        const Case *c = &cases[i];
        char p[1024], note[256] = "", err[512] = "";
        path_of(p, sizeof p, c->file);
        ModelSpec m;
        if (hfconfig_load(p, &m, note, sizeof note, err, sizeof err) != 0)
            fail_msg("%s: %s", c->file, err);
        assert_int_equal(m.L, c->L);
        assert_int_equal(m.h, c->h);
        assert_int_equal(m.a, c->a);
        assert_int_equal(m.g, c->g);
        assert_int_equal(spec_head_dim(&m), c->d_head);
        assert_int_equal(m.f, c->f);
        assert_int_equal(m.vocab, c->vocab);
        assert_int_equal(m.s, c->s);
        assert_int_equal(m.tied, c->tied);
        assert_int_equal(m.mlp, MLP_SWIGLU);
        assert_int_equal(m.norm, NORM_RMSNORM);
        assert_int_equal(m.pos, POS_ROPE);
        assert_false(m.bias);
        assert_false(m.dropout);
        int64_t n = spec_params(&m, 1, PARAMS_EXACT);
        if (n != c->exact)
            fail_msg("%s: %lld parameters, by hand %lld", c->file, (long long)n, (long long)c->exact);
        double rel = fabs((double)n - c->published) / c->published;
        if (rel > 0.005)
            fail_msg("%s: %lld parameters is %.2f%% from the published %.3g", c->file, (long long)n, 100 * rel,
                     c->published);
        assert_non_null(strstr(note, p));   /* the note names the file */
    }
}

/* Mixture-of-experts configs load to the presets' shapes and counts. */
static void test_moe_configs(void **st)
{
    (void)st;
    struct { const char *file, *preset; int experts, topk, moe_ffn, shared, first, mtp; } rows[] = {
        {"Mixtral-8x7B-v0.1.json", "mixtral-8x7b", 8, 2, 14336, 0, 0, 0},
        {"Qwen3-30B-A3B.json", "qwen3-30b-a3b", 128, 8, 768, 0, 0, 0},
        {"DeepSeek-V3.json", "deepseek-v3", 256, 8, 2048, 2048, 3, 1},
        {"gpt-oss-120b.json", "gpt-oss-120b", 128, 4, 2880, 0, 0, 0},
        {"Llama-4-Maverick-17B-128E.json", "llama4-maverick", 128, 1, 8192, 8192, 1, 0},
    };
    for (size_t i = 0; i < sizeof rows / sizeof *rows; i++) {
        char p[1024], note[256] = "", err[512] = "";
        path_of(p, sizeof p, rows[i].file);
        ModelSpec m, pr;
        if (hfconfig_load(p, &m, note, sizeof note, err, sizeof err) != 0)
            fail_msg("%s: %s", rows[i].file, err);
        assert_int_equal(presets_find(rows[i].preset, &pr, err, sizeof err), 0);
        assert_int_equal(spec_validate(&pr, err, sizeof err), 0);
        assert_int_equal(m.experts, rows[i].experts);
        assert_int_equal(m.topk, rows[i].topk);
        assert_int_equal(m.moe_ffn, rows[i].moe_ffn);
        assert_int_equal(m.shared_ffn, rows[i].shared);
        assert_int_equal(m.moe_first_dense, rows[i].first);
        assert_int_equal(m.mtp_layers, rows[i].mtp);
        assert_int_equal(m.attn, pr.attn);
        /* the whole shape is the preset's (its sequence aside) */
        assert_int_equal(m.L, pr.L);
        assert_int_equal(m.h, pr.h);
        assert_int_equal(m.a, pr.a);
        assert_int_equal(m.g, pr.g);
        assert_int_equal(spec_head_dim(&m), spec_head_dim(&pr));
        assert_int_equal(m.f, pr.f);
        assert_int_equal(m.vocab, pr.vocab);
        assert_int_equal(m.bias, pr.bias);
        assert_int_equal(m.tied, pr.tied);
        assert_int_equal(m.moe_freq ? m.moe_freq : 1, pr.moe_freq ? pr.moe_freq : 1);
        assert_int_equal(m.rope_theta, pr.rope_theta);
        for (int l = 0; l < m.L; l++)
            assert_int_equal(spec_layer_is_moe(&m, l), spec_layer_is_moe(&pr, l));
        /* the sequence differs (config: max_position_embeddings; preset: pre-training) and no count depends on it */
        if (spec_params(&m, 1, PARAMS_EXACT) != spec_params(&pr, 1, PARAMS_EXACT) ||
            spec_params_active(&m, 1, PARAMS_EXACT) != spec_params_active(&pr, 1, PARAMS_EXACT))
            fail_msg("%s: %lld / %lld parameters, preset %s %lld / %lld", rows[i].file,
                     (long long)spec_params(&m, 1, PARAMS_EXACT), (long long)spec_params_active(&m, 1, PARAMS_EXACT),
                     rows[i].preset, (long long)spec_params(&pr, 1, PARAMS_EXACT),
                     (long long)spec_params_active(&pr, 1, PARAMS_EXACT));
    }
}

/* A preset whose sequence cites a config key ("seq 8192 (attention_chunk_size)")
 * holds what that key holds in the published config. Llama 4 Maverick's
 * source once cited rope_scaling's original_max_position_embeddings, which
 * is Scout's: Maverick's config has "rope_scaling": null. */
static const cJSON *config_key(const cJSON *j, const char *key)
{
    const cJSON *text = cJSON_GetObjectItemCaseSensitive(j, "text_config");
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(cJSON_IsObject(text) ? text : j, key);
    return v ? v : cJSON_GetObjectItemCaseSensitive(j, key);
}

static void test_preset_seq_sources(void **st)
{
    (void)st;
    struct { const char *file, *preset; } rows[] = {
        {"gpt-oss-120b.json", "gpt-oss-120b"},
        {"Llama-4-Maverick-17B-128E.json", "llama4-maverick"},
    };
    for (size_t i = 0; i < sizeof rows / sizeof *rows; i++) {
        int at = -1;
        for (int k = 0; k < presets_count(); k++)
            if (!strcmp(presets_get(k)->name, rows[i].preset))
                at = k;
        assert_true(at >= 0);
        const ModelSpec *m = presets_get(at);
        char want[32], key[96] = "";
        snprintf(want, sizeof want, "seq %d (", m->s);
        const char *cite = strstr(presets_source(at), want);
        if (!cite)
            fail_msg("%s: source does not say \"%s...)\"", rows[i].preset, want);
        sscanf(cite + strlen(want), "%95[^);:]", key);
        char *text = read_data(rows[i].file);
        cJSON *j = cJSON_Parse(text);
        assert_non_null(j);
        const cJSON *v;
        if (!strcmp(key, "rope_scaling original_max_position_embeddings")) {
            const cJSON *rs = config_key(j, "rope_scaling");
            v = cJSON_IsObject(rs) ? cJSON_GetObjectItemCaseSensitive(rs, "original_max_position_embeddings") : NULL;
        } else {
            v = config_key(j, key);
        }
        if (!cJSON_IsNumber(v) || v->valueint != m->s)
            fail_msg("%s: seq %d cites \"%s\", which %s has %s", rows[i].preset, m->s, key, rows[i].file,
                     cJSON_IsNumber(v) ? "at another value" : "not as a number");
        cJSON_Delete(j);
        free(text);
    }
}

/* GPT-OSS and Llama 4: what changes the counts, by hand, and what the spec
 * cannot hold said in the note.
 *  gpt-oss-120b: every layer attention 2880*4096 + 4096 (q) + 2*(2880*512 + 512)
 *    (k, v) + 4096*2880 + 2880 (o) = 26,550,080; 128 experts of 3*2880*2880 +
 *    2*2880 + 2880 (gate/up and down biases) = 24,891,840 each; router
 *    2880*128 + 128; 2 norms 5,760. Per layer 3,213,080,128; 36 layers +
 *    2 * 201,088*2880 (untied) + 2880 = 116,829,154,368; with the sinks (36*64
 *    = 2304) 116,829,156,672, the model card's 116.83B. Active: 4 experts
 *    instead of 128.
 *  Llama 4 Maverick: 24 dense layers (MLP 3*5120*16384) and 24 MoE layers
 *    (128 + 1 shared experts of 3*5120*8192, router 5120*128); the published
 *    400B total / 17B active. */
static void test_gpt_oss_llama4(void **st)
{
    (void)st;
    char p[1024], note[512] = "", err[512] = "";
    ModelSpec m;
    path_of(p, sizeof p, "gpt-oss-120b.json");
    if (hfconfig_load(p, &m, note, sizeof note, err, sizeof err) != 0)
        fail_msg("%s", err);
    assert_int_equal(spec_params(&m, 1, PARAMS_EXACT), 116829156672LL);   /* sinks included */
    assert_int_equal(spec_sink_params(&m), 64);
    /* sliding_window 128 keys = Megatron's window 127; layer_types sliding, full, ...: skip freq 2 */
    assert_true(m.window == 127 && m.window_skip_freq == 2 && m.sinks && m.act_clamp == 7.0);
    assert_int_equal(spec_windowed_layers(&m), 18);
    assert_true(spec_layer_is_windowed(&m, 0) && !spec_layer_is_windowed(&m, 1) && !spec_layer_is_windowed(&m, 35));
    assert_true(m.bias && !m.tied && m.s == 131072 && m.moe_ffn == m.f && m.shared_ffn == 0);
    assert_int_equal(spec_moe_layers(&m), 36);
    assert_int_equal(spec_router_params(&m), 2880 * 128 + 128);
    int64_t active = spec_params_active(&m, 1, PARAMS_EXACT) - 201088LL * 2880;   // the card leaves the input embedding out
    assert_true(fabs((double)active / 5.1e9 - 1) < 0.01);
    static const char *const oss_says[] = {"GPT-OSS sliding window 128 keys (--window 127) on 18 of 36 layers"};
    for (size_t i = 0; i < sizeof oss_says / sizeof *oss_says; i++)
        if (!strstr(note, oss_says[i]))
            fail_msg("note \"%s\" does not say \"%s\"", note, oss_says[i]);

    path_of(p, sizeof p, "Llama-4-Maverick-17B-128E.json");
    note[0] = 0;
    if (hfconfig_load(p, &m, note, sizeof note, err, sizeof err) != 0)
        fail_msg("%s", err);
    assert_int_equal(m.f, 16384);        // intermediate_size_mlp: the dense layers
    assert_int_equal(m.moe_ffn, 8192);   // intermediate_size: each expert and the shared one
    assert_int_equal(m.shared_ffn, 8192);
    assert_int_equal(spec_moe_layers(&m), 24);
    assert_true(!spec_layer_is_moe(&m, 0) && spec_layer_is_moe(&m, 1) && spec_layer_is_moe(&m, 47));
    assert_true(!m.bias && !m.tied && m.s == 1048576);
    int64_t total = spec_params(&m, 1, PARAMS_EXACT);
    assert_true(fabs((double)total / 400e9 - 1) < 0.015);
    assert_true(fabs((double)spec_params_active(&m, 1, PARAMS_EXACT) / 17e9 - 1) < 0.015);
    assert_non_null(strstr(note, "text_config only"));
    assert_non_null(strstr(note, "chunked attention (8192) and NoPE layers costed as full causal attention"));
    /* the same text model as a text-only checkpoint writes it: Llama4ForCausalLM,
     * the text_config's keys at the top level */
    char *text = read_data("Llama-4-Maverick-17B-128E.json");
    cJSON *root = cJSON_Parse(text), *tc = cJSON_DetachItemFromObject(root, "text_config");
    assert_non_null(tc);
    cJSON_AddItemToObject(tc, "architectures", cJSON_CreateStringArray((const char *[]){"Llama4ForCausalLM"}, 1));
    char *flat = cJSON_Print(tc);
    ModelSpec m2;
    if (hfconfig_parse(flat, "flat.json", &m2, NULL, 0, err, sizeof err) != 0)
        fail_msg("%s", err);
    assert_int_equal(spec_params(&m2, 1, PARAMS_EXACT), total);
    assert_int_equal(spec_params_active(&m2, 1, PARAMS_EXACT), spec_params_active(&m, 1, PARAMS_EXACT));
    free(flat);
    cJSON_Delete(tc);
    cJSON_Delete(root);
    char *t;
    /* Scout's pattern: interleave_moe_layer_step 1 makes every layer MoE */
    t = edit(text, "\"interleave_moe_layer_step\": 2", "\"interleave_moe_layer_step\": 1");
    assert_int_equal(hfconfig_parse(t, "x.json", &m, NULL, 0, err, sizeof err), 0);
    assert_int_equal(spec_moe_layers(&m), 48);
    free(t);
    /* an explicit moe_layers list must be the step's pattern */
    t = edit(text, "\"interleave_moe_layer_step\": 2,", "\"interleave_moe_layer_step\": 2, \"moe_layers\": [1, 3],");
    assert_int_equal(hfconfig_parse(t, "cfg/x.json", &m, NULL, 0, err, sizeof err), -1);
    assert_non_null(strstr(err, "\"moe_layers\""));
    free(t);
    free(text);
}

/* what the spec cannot hold is said, with its size */
static void test_notes(void **st)
{
    (void)st;
    static const struct { const char *file, *says; } notes[] = {
        {"gemma-7b.json", "GeGLU MLP costed as swiglu"},
        {"Qwen2.5-7B.json", "q/k/v biases not counted (129024 parameters)"},
        {"Qwen3-8B.json", "q/k norms not counted (9216 parameters)"},
        {"Mistral-7B-v0.1.json", "Mistral sliding window 4096 keys (--window 4095) on 32 of 32 layers"},
    };
    for (size_t i = 0; i < sizeof notes / sizeof *notes; i++) {
        char p[1024], note[256] = "", err[512];
        path_of(p, sizeof p, notes[i].file);
        ModelSpec m;
        assert_int_equal(hfconfig_load(p, &m, note, sizeof note, err, sizeof err), 0);
        if (!strstr(note, notes[i].says))
            fail_msg("%s: note \"%s\" does not say \"%s\"", notes[i].file, note, notes[i].says);
    }
    /* Llama with neither bias says nothing beyond the family; Qwen2.5 keeps its window off */
    char p[1024], note[256] = "", err[512];
    ModelSpec m;
    path_of(p, sizeof p, "Llama-3.1-8B.json");
    assert_int_equal(hfconfig_load(p, &m, note, sizeof note, err, sizeof err), 0);
    assert_null(strchr(note, ';'));
    path_of(p, sizeof p, "Qwen2.5-7B.json");
    assert_int_equal(hfconfig_load(p, &m, note, sizeof note, err, sizeof err), 0);
    assert_null(strstr(note, "sliding"));
}

/* parse edited text and expect an error naming the file and `want` */
static void refused(const char *text, const char *want, const char *want2)
{
    char err[512] = "";
    ModelSpec m;
    if (hfconfig_parse(text, "cfg/x.json", &m, NULL, 0, err, sizeof err) == 0)
        fail_msg("accepted; wanted an error with %s", want);
    if (!strstr(err, "cfg/x.json") || !strstr(err, want) || (want2 && !strstr(err, want2)))
        fail_msg("error \"%s\" does not name the file, %s%s%s", err, want, want2 ? " and " : "", want2 ? want2 : "");
}

static void test_refusals(void **st)
{
    (void)st;
    char *llama = read_data("Llama-3.1-8B.json"), *mixtral = read_data("Mixtral-8x7B-v0.1.json");
    char *t;
    /* MoE: experts hidden in a dense family's config are refused; a MoE
     * family with a bad field names it */
    (void)mixtral;
    t = edit(mixtral, "\"num_local_experts\": 8", "\"num_local_experts\": \"eight\"");
    refused(t, "\"num_local_experts\"", "whole number");
    free(t);
    t = edit(llama, "\"mlp_bias\": false,", "\"num_experts\": 64,");
    refused(t, "\"num_experts\"", "mixture-of-experts");
    free(t);
    /* unknown architecture, by either field; a contradiction */
    t = edit(llama, "LlamaForCausalLM", "FalconForCausalLM");
    refused(t, "\"architectures\"", "FalconForCausalLM");
    free(t);
    t = edit(llama, "\"architectures\": [\n    \"LlamaForCausalLM\"\n  ],", "");
    char *t2 = edit(t, "\"model_type\": \"llama\"", "\"model_type\": \"gpt2\"");
    refused(t2, "\"model_type\"", "gpt2");
    free(t2);
    free(t);
    t = edit(llama, "\"model_type\": \"llama\"", "\"model_type\": \"qwen2\"");
    refused(t, "\"model_type\"", "contradicts");
    free(t);
    /* missing and mistyped fields */
    t = edit(llama, "\"intermediate_size\": 14336,", "");
    refused(t, "\"intermediate_size\"", "missing");
    free(t);
    t = edit(llama, "\"hidden_size\": 4096", "\"hidden_size\": \"4096\"");
    refused(t, "\"hidden_size\"", "a string");
    free(t);
    t = edit(llama, "\"num_hidden_layers\": 32", "\"num_hidden_layers\": 32.5");
    refused(t, "\"num_hidden_layers\"", "32.5");
    free(t);
    t = edit(llama, "\"vocab_size\": 128256", "\"vocab_size\": -1");
    refused(t, "\"vocab_size\"", NULL);
    free(t);
    t = edit(llama, "\"tie_word_embeddings\": false", "\"tie_word_embeddings\": \"no\"");
    refused(t, "\"tie_word_embeddings\"", "true or false");
    free(t);
    t = edit(llama, "\"num_key_value_heads\": 8", "\"num_key_value_heads\": 5");
    refused(t, "\"num_key_value_heads\"", "divide");
    free(t);
    t = edit(llama, "\"hidden_act\": \"silu\"", "\"hidden_act\": \"gelu\"");
    refused(t, "\"hidden_act\"", "silu");
    free(t);
    /* GPT-OSS's two top-k keys must agree; Llama 4 needs its text_config */
    char *oss = read_data("gpt-oss-120b.json"), *l4 = read_data("Llama-4-Maverick-17B-128E.json");
    t = edit(oss, "\"experts_per_token\": 4", "\"experts_per_token\": 2");
    refused(t, "\"experts_per_token\"", "contradicts");
    free(t);
    t = edit(l4, "\"text_config\"", "\"text_config_x\"");
    refused(t, "\"text_config\"", "missing");
    free(t);
    t = edit(l4, "\"interleave_moe_layer_step\": 2", "\"interleave_moe_layer_step\": 49");
    refused(t, "\"interleave_moe_layer_step\"", NULL);
    free(t);
    free(oss);
    free(l4);
    t = edit(llama, "\"architectures\": [\n    \"LlamaForCausalLM\"\n  ]", "\"architectures\": \"LlamaForCausalLM\"");
    refused(t, "\"architectures\"", NULL);
    free(t);
    /* not JSON, not an object, a key twice */
    refused("{\"hidden_size\": 4", "not valid JSON", NULL);
    refused("[1, 2]", "JSON object", NULL);
    t = edit(llama, "\"hidden_size\": 4096,", "\"hidden_size\": 4096, \"hidden_size\": 8192,");
    refused(t, "hidden_size", "twice");
    free(t);
    free(llama);
    free(mixtral);
}

/* defaults of the configuration classes where a key is left out */
static void test_defaults(void **st)
{
    (void)st;
    char *llama = read_data("Llama-3.1-8B.json"), *gemma = read_data("gemma-7b.json");
    char err[512];
    ModelSpec m;
    /* no num_key_value_heads: MHA; no tie_word_embeddings: Llama unties, Gemma ties */
    char *t = edit(llama, "\"num_key_value_heads\": 8,", "");
    char *t2 = edit(t, "\"tie_word_embeddings\": false,", "");
    assert_int_equal(hfconfig_parse(t2, "x.json", &m, NULL, 0, err, sizeof err), 0);
    assert_int_equal(m.g, 32);
    assert_false(m.tied);
    free(t2);
    free(t);
    assert_int_equal(hfconfig_parse(gemma, "x.json", &m, NULL, 0, err, sizeof err), 0);
    assert_true(m.tied);
    /* Gemma's newer key for its activation */
    t = edit(gemma, "\"hidden_act\": \"gelu\"", "\"hidden_activation\": \"gelu_pytorch_tanh\"");
    assert_int_equal(hfconfig_parse(t, "x.json", &m, NULL, 0, err, sizeof err), 0);
    free(t);
    /* both bias flags: every linear layer has one */
    t = edit(llama, "\"attention_bias\": false", "\"attention_bias\": true");
    t2 = edit(t, "\"mlp_bias\": false", "\"mlp_bias\": true");
    assert_int_equal(hfconfig_parse(t2, "x.json", &m, NULL, 0, err, sizeof err), 0);
    assert_true(m.bias);
    free(t2);
    free(t);
    /* the name: _name_or_path, else the base name, else the folder of a config.json */
    t = edit(llama, "{", "{\"_name_or_path\": \"meta-llama/Llama-3.1-8B\",");
    assert_int_equal(hfconfig_parse(t, "x.json", &m, NULL, 0, err, sizeof err), 0);
    assert_string_equal(m.name, "meta-llama/Llama-3.1-8B");
    free(t);
    assert_int_equal(hfconfig_parse(llama, "/a/b/Llama-3.1-8B.json", &m, NULL, 0, err, sizeof err), 0);
    assert_string_equal(m.name, "Llama-3.1-8B");
    assert_int_equal(hfconfig_parse(llama, "models/my-llama/config.json", &m, NULL, 0, err, sizeof err), 0);
    assert_string_equal(m.name, "my-llama");
    assert_int_equal(hfconfig_parse(llama, "./config.json", &m, NULL, 0, err, sizeof err), 0);
    assert_string_equal(m.name, "hf-config");
    t = edit(llama, "{", "{\"_name_or_path\": \"./\",");   /* saved from a local folder */
    assert_int_equal(hfconfig_parse(t, "/m/Llama-3.1-8B.json", &m, NULL, 0, err, sizeof err), 0);
    assert_string_equal(m.name, "Llama-3.1-8B");
    free(t);
    /* a name is printed into reports and Slurm scripts: only plain characters survive */
    t = edit(llama, "{", "{\"_name_or_path\": \"evil\\nrm -rf ~; $(x)\",");
    assert_int_equal(hfconfig_parse(t, "x.json", &m, NULL, 0, err, sizeof err), 0);
    assert_string_equal(m.name, "evil_rm_-rf______x_");
    free(t);
    free(llama);
    free(gemma);
}

static void test_size_limit(void **st)
{
    (void)st;
    char path[] = "/tmp/test_hfconfig_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    static char block[65536];
    memset(block, ' ', sizeof block);
    for (int i = 0; i < 17; i++)   /* 1.06 MiB of spaces: more than any config.json */
        assert_int_equal(write(fd, block, sizeof block), (ssize_t)sizeof block);
    close(fd);
    char err[512] = "";
    ModelSpec m;
    assert_int_equal(hfconfig_load(path, &m, NULL, 0, err, sizeof err), -1);
    assert_non_null(strstr(err, path));
    unlink(path);
    assert_int_equal(hfconfig_load("/nonexistent/config.json", &m, NULL, 0, err, sizeof err), -1);
    assert_non_null(strstr(err, "/nonexistent/config.json"));
}

/* The whole note reaches Scenario.model_rule (GPT-OSS's was about 330
 * characters and was cut at 256 once, mid-word and unmarked; now that the
 * spec holds its window, sinks and clamp it is about 200); a buffer too
 * short for it gets the note cut with "..." at its end. */
static void test_note_whole(void **st)
{
    (void)st;
    char p[1024], err[512], small[64];
    path_of(p, sizeof p, "gpt-oss-120b.json");
    Scenario sc;
    scenario_init(&sc);
    sc.hf_config = p;
    sc.gpus = 8;
    if (scenario_finish(&sc, true, err, sizeof err) != 0)
        fail_msg("%s", err);
    const char *last = "; GPT-OSS sliding window 128 keys (--window 127) on 18 of 36 layers";   /* the last thing said */
    size_t n = strlen(sc.model_rule), k = strlen(last);
    assert_true(n > 150);
    assert_true(n >= k && !strcmp(sc.model_rule + n - k, last));
    ModelSpec m;
    assert_int_equal(hfconfig_load(p, &m, small, sizeof small, err, sizeof err), 0);
    assert_int_equal(strlen(small), sizeof small - 1);
    assert_string_equal(small + sizeof small - 4, "...");
    assert_true(!strncmp(small, "Hugging Face config ", 20));
}

/* --hf-config in a Scenario: shape knobs override it like a preset */
static void test_scenario(void **st)
{
    (void)st;
    char p[1024], err[512];
    path_of(p, sizeof p, "Llama-3.1-8B.json");
    Scenario sc;
    scenario_init(&sc);
    sc.hf_config = p;
    assert_int_equal(scenario_set_knob(&sc, knob_get(K_SEQ), false, "8192", err, sizeof err), 0);
    sc.gpus = 8;
    if (scenario_finish(&sc, true, err, sizeof err) != 0)
        fail_msg("%s", err);
    assert_int_equal(sc.model.s, 8192);       /* --seq over max_position_embeddings */
    assert_int_equal(sc.model.f, 14336);      /* the rest from the config */
    assert_int_equal(sc.model.g, 8);
    assert_string_equal(sc.model.name, "Llama-3.1-8B*");
    assert_int_equal(sc.layout.gbs, 256);     /* default batch: 8B is GPT-3's 6.7B row, 2M / 8192 = 244 -> 256 */
    assert_non_null(strstr(sc.model_rule, "Hugging Face config"));
    /* --hidden given: the head dim and ffn that derive from it are derived again */
    scenario_init(&sc);
    sc.hf_config = p;
    assert_int_equal(scenario_set_knob(&sc, knob_get(K_HIDDEN), false, "8192", err, sizeof err), 0);
    assert_int_equal(scenario_finish(&sc, false, err, sizeof err), 0);
    assert_int_equal(sc.model.h, 8192);
    assert_int_equal(spec_head_dim(&sc.model), 256);
    assert_int_equal(sc.model.f, 22016);      /* swiglu default: 8h/3 = 21845 rounded up to 256 */
    /* exclusions */
    scenario_init(&sc);
    sc.hf_config = p;
    sc.model_name = "llama3.1-8b";
    assert_int_equal(scenario_finish(&sc, false, err, sizeof err), -1);
    assert_non_null(strstr(err, "--hf-config and --model exclude each other"));
    scenario_init(&sc);
    sc.hf_config = p;
    sc.params = 7e9;
    assert_int_equal(scenario_finish(&sc, false, err, sizeof err), -1);
    assert_non_null(strstr(err, "--hf-config and --params exclude each other"));
    /* the same model as the preset, read from its config */
    scenario_init(&sc);
    sc.model_name = "llama3.1-8b";
    assert_int_equal(scenario_finish(&sc, false, err, sizeof err), 0);
    Scenario hf;
    scenario_init(&hf);
    hf.hf_config = p;
    assert_int_equal(scenario_set_knob(&hf, knob_get(K_SEQ), false, "8192", err, sizeof err), 0);
    assert_int_equal(scenario_finish(&hf, false, err, sizeof err), 0);
    assert_int_equal(spec_params(&hf.model, 8, PARAMS_EXACT), spec_params(&sc.model, 8, PARAMS_EXACT));
    assert_true(spec_flops_per_token(&hf.model, 8, FLOPS_FULL_ATTN) ==
                spec_flops_per_token(&sc.model, 8, FLOPS_FULL_ATTN));
}

int main(int argc, char **argv)
{
    if (argc > 1)
        data_dir = argv[1];
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_families),
        cmocka_unit_test(test_moe_configs), cmocka_unit_test(test_gpt_oss_llama4), cmocka_unit_test(test_notes), cmocka_unit_test(test_note_whole), cmocka_unit_test(test_preset_seq_sources),     cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_defaults), cmocka_unit_test(test_size_limit), cmocka_unit_test(test_scenario),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
