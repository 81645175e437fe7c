/* stacks.c — read "ultraplan.stack/1" JSON and the builtin stacks (see stacks.h). */
#include "stacks.h"
#include "fields.h"
#include "json.h"
#include "layout.h"
#include "profile_embed.h"
#include "suggest.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

static const char *const builtin[STACK_BUILTIN_COUNT] = {
    "megatron-lm", "nemo", "megatron-2021", "megatron-deepspeed", "composer-fsdp", "torchtitan", "deepspeed-zero3",
    "megatron-deepspeed-2021", "torchtitan-2412", "hai-llm", "llama3-meta",
};

const char *stacks_name(int i) { return i >= 0 && i < STACK_BUILTIN_COUNT ? builtin[i] : NULL; }

int stacks_index(const char *name)
{
    for (int i = 0; i < STACK_BUILTIN_COUNT; i++)
        if (!strcasecmp(name, builtin[i]))
            return i;
    return -1;
}

/* An optional number in [lo, hi] (lo excluded when open_lo); absent keeps *out. */
static int opt_number(FieldCtx *c, const cJSON *obj, const char *key, const char *field, double lo, double hi,
                      bool open_lo, double *out)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (!v)
        return 0;
    char want[64];
    snprintf(want, sizeof want, "a number in %c%g, %g]", open_lo ? '(' : '[', lo, hi);
    if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble) || v->valuedouble > hi ||
        (open_lo ? v->valuedouble <= lo : v->valuedouble < lo))
        return fields_fail(c, field, want, v);
    *out = v->valuedouble;
    return 0;
}

/* An optional true or false; absent is false. */
static int opt_bool(FieldCtx *c, const cJSON *obj, const char *key, const char *field, bool *out)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (v && !cJSON_IsBool(v))
        return fields_fail(c, field, "true or false", v);
    *out = v && cJSON_IsTrue(v);
    return 0;
}

static int read_zero3(FieldCtx *c, const cJSON *root, Stack *st)
{
    const cJSON *z = cJSON_GetObjectItemCaseSensitive(root, "zero3");
    if (!z)
        return 0;
    if (!cJSON_IsObject(z))
        return fields_fail(c, "zero3", "an object", z);
    double g = 0;
    if (opt_number(c, z, "gathers_per_layer", "zero3.gathers_per_layer", 0, 1000, false, &g))
        return -1;
    if (g != floor(g))
        return fields_fail(c, "zero3.gathers_per_layer", "a whole number from 0 to 1000",
                    cJSON_GetObjectItemCaseSensitive(z, "gathers_per_layer"));
    st->zero3_gathers_per_layer = (int)g;
    if (opt_bool(c, z, "flat_ring", "zero3.flat_ring", &st->zero3_flat_ring) ||
        opt_bool(c, z, "fp32_shard", "zero3.fp32_shard", &st->zero3_fp32_shard))
        return -1;
    if (opt_number(c, z, "prefetch_params", "zero3.prefetch_params", 0, 1e15, false, &st->zero3_prefetch_params))
        return -1;
    if (opt_number(c, z, "max_live_params", "zero3.max_live_params", 0, 1e15, false, &st->zero3_max_live_params))
        return -1;
    if (opt_number(c, z, "reduce_bucket_params", "zero3.reduce_bucket_params", 0, 1e15, false,
                   &st->zero3_reduce_bucket_params))
        return -1;
    if (opt_number(c, z, "call_s", "zero3.call_s", 0, 1, false, &st->zero3_call_s))
        return -1;
    return opt_number(c, z, "rank_s", "zero3.rank_s", 0, 1e-3, false, &st->zero3_rank_s);
}

static int read_stack(FieldCtx *c, const cJSON *root, Stack *st)
{
    if (!cJSON_IsObject(root))
        return fields_fail(c, "(document)", "a JSON object", root);
    const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(root, "format");
    if (!cJSON_IsString(fmt) || strcmp(fmt->valuestring, STACK_FORMAT))
        return fields_fail(c, "format", "\"" STACK_FORMAT "\"", fmt);
    if (fields_string(c, root, "name", st->name, sizeof st->name, true) ||
        fields_string(c, root, "desc", st->desc, sizeof st->desc, false))
        return -1;
    static const struct { const char *key; size_t off; double hi; } scales[] = {
        {"gemm_scale", offsetof(Stack, gemm_scale), 4},
        {"mem_scale", offsetof(Stack, mem_scale), 4},
        {"attn_scale", offsetof(Stack, attn_scale), 4},
    };
    for (size_t i = 0; i < sizeof scales / sizeof *scales; i++)
        if (opt_number(c, root, scales[i].key, scales[i].key, 0, scales[i].hi, true,
                       (double *)((char *)st + scales[i].off)))
            return -1;
    if (opt_number(c, root, "kernel_lat_scale", "kernel_lat_scale", 0, 100, false, &st->kernel_lat_scale) ||
        opt_number(c, root, "tp_overlap", "tp_overlap", 0, 1, false, &st->tp_overlap) ||
        opt_number(c, root, "dp_overlap", "dp_overlap", 0, 1, false, &st->dp_overlap) ||
        opt_number(c, root, "pp_overlap", "pp_overlap", 0, 1, false, &st->pp_overlap))
        return -1;
    const cJSON *ce = cJSON_GetObjectItemCaseSensitive(root, "ce_fused");
    if (ce && !cJSON_IsBool(ce))
        return fields_fail(c, "ce_fused", "true or false", ce);
    if (ce)
        st->ce_fused = cJSON_IsTrue(ce) ? 1 : 0;
    const cJSON *k = cJSON_GetObjectItemCaseSensitive(root, "attn_kernel");
    if (k && (!cJSON_IsString(k) || stack_parse_attn_kernel(k->valuestring, &st->attn_kernel)))
        return fields_fail(c, "attn_kernel", "\"profile\", \"fa1\", \"fa2\", \"fa3\" or \"cudnn\"", k);
    if (read_zero3(c, root, st))
        return -1;
    if (opt_bool(c, root, "pp_p2p_serial", "pp_p2p_serial", &st->pp_p2p_serial) ||
        opt_bool(c, root, "zero2_pp", "zero2_pp", &st->zero2_pp) ||
        opt_bool(c, root, "rc_early_stop", "rc_early_stop", &st->rc_early_stop) ||
        opt_bool(c, root, "eager_elementwise", "eager_elementwise", &st->eager_elementwise) ||
        opt_bool(c, root, "ce_upcast", "ce_upcast", &st->ce_upcast) ||
        opt_bool(c, root, "compile_loss", "compile_loss", &st->compile_loss) ||
        opt_bool(c, root, "cp_pytorch", "cp_pytorch", &st->cp_pytorch) ||
        opt_bool(c, root, "sdpa_repeat_kv", "sdpa_repeat_kv", &st->sdpa_repeat_kv) ||
        opt_bool(c, root, "act_fp8_cache", "act_fp8_cache", &st->act_fp8_cache))
        return -1;
    const cJSON *cc = cJSON_GetObjectItemCaseSensitive(root, "cp_comm");
    if (cc) {
        CpComm v;
        if (!cJSON_IsString(cc) || layout_parse_cp_comm(cc->valuestring, &v) != 0)
            return fields_fail(c, "cp_comm", "\"ring\" or \"all-gather\"", cc);
        st->cp_comm = (int)v;
    }
    const cJSON *sa = cJSON_GetObjectItemCaseSensitive(root, "selective_ac");
    if (sa) {
        SelAc v;
        if (!cJSON_IsString(sa) || layout_parse_sel_ac(sa->valuestring, &v) != 0)
            return fields_fail(c, "selective_ac", "\"core_attn\" or \"op\"", sa);
        st->sel_ac = (int)v;
    }
    return 0;
}

void stacks_layout_settings(Layout *lo)
{
    Stack st;
    char err[256];
    lo->sel_ac = SEL_AC_CORE_ATTN;
    lo->act_fp8_cache = false;
    if (lo->stack <= 0 || stacks_load(lo->stack, &st, err, sizeof err) != 0)
        return;   /* the default stack, or a build without its file (test_stacks loads each) */
    if (st.sel_ac >= 0)
        lo->sel_ac = (SelAc)st.sel_ac;
    if (st.cp_comm >= 0)
        lo->cp_comm = (CpComm)st.cp_comm;
    lo->act_fp8_cache = st.act_fp8_cache;
}

int stacks_parse_json(const char *text, const char *origin, Stack *out, char *err, int errlen)
{
    FieldCtx c = {"stack", origin, err, errlen};
    cJSON *root = util_json_parse(text, origin, err, errlen);
    if (!root)
        return -1;
    Stack st;
    stack_default(&st);
    st.name[0] = 0;
    int rc = read_stack(&c, root, &st);
    cJSON_Delete(root);
    if (rc == 0)
        *out = st;
    return rc;
}

static int unknown(const char *name, char *err, int errlen)
{
    const char *near = util_closest(name, builtin, STACK_BUILTIN_COUNT);
    char known[256] = "";
    for (int i = 0; i < STACK_BUILTIN_COUNT; i++)
        snprintf(known + strlen(known), sizeof known - strlen(known), "%s%s", i ? ", " : "", builtin[i]);
    if (near)
        snprintf(err, errlen, "unknown software stack \"%s\" (did you mean \"%s\"?); known: %s", name, near, known);
    else
        snprintf(err, errlen, "unknown software stack \"%s\"; known: %s", name, known);
    return -1;
}

/* The builtin stacks parsed once a process: validate reads a row's stack for
 * every row (its profile and its layout fields), and a million rows parsed
 * the JSON twice each. */
static struct {
    int rc;
    Stack st;
    char err[256];
} parsed[STACK_BUILTIN_COUNT];
static pthread_once_t parsed_once = PTHREAD_ONCE_INIT;

static void parse_builtins(void)
{
    for (int i = 0; i < STACK_BUILTIN_COUNT; i++) {
        parsed[i].rc = -1;
        snprintf(parsed[i].err, sizeof parsed[i].err, "software stack %s: no profiles/stacks/%s.json was built in",
                 builtin[i], builtin[i]);
        for (int e = 0; e < stack_embed_count; e++)
            if (!strcmp(stack_embed_names[e], builtin[i])) {
                char origin[64];
                snprintf(origin, sizeof origin, "%s.json", builtin[i]);
                parsed[i].rc = stacks_parse_json(stack_embed_texts[e], origin, &parsed[i].st, parsed[i].err,
                                                 sizeof parsed[i].err);
            }
    }
}

int stacks_load(int i, Stack *out, char *err, int errlen)
{
    if (i < 0 || i >= STACK_BUILTIN_COUNT) {
        snprintf(err, errlen, "software stack %d: expected 0..%d", i, STACK_BUILTIN_COUNT - 1);
        return -1;
    }
    pthread_once(&parsed_once, parse_builtins);
    if (parsed[i].rc != 0) {
        snprintf(err, errlen, "%s", parsed[i].err);
        return -1;
    }
    *out = parsed[i].st;
    return 0;
}

int stacks_load_name(const char *name, Stack *out, char *err, int errlen)
{
    int i = stacks_index(name);
    return i < 0 ? unknown(name, err, errlen) : stacks_load(i, out, err, errlen);
}

char *stacks_to_json(const Stack *st)
{
    cJSON *j = cJSON_CreateObject();
    if (!j)
        return NULL;
    cJSON_AddStringToObject(j, "format", STACK_FORMAT);
    cJSON_AddStringToObject(j, "name", st->name);
    cJSON_AddStringToObject(j, "desc", st->desc);
    cJSON_AddNumberToObject(j, "gemm_scale", st->gemm_scale);
    cJSON_AddNumberToObject(j, "mem_scale", st->mem_scale);
    cJSON_AddNumberToObject(j, "attn_scale", st->attn_scale);
    cJSON_AddStringToObject(j, "attn_kernel", stack_attn_kernel_name(st->attn_kernel));
    cJSON_AddNumberToObject(j, "kernel_lat_scale", st->kernel_lat_scale);
    /* an overlap the stack leaves to the profile is absent, as in the files */
    if (st->tp_overlap >= 0)
        cJSON_AddNumberToObject(j, "tp_overlap", st->tp_overlap);
    if (st->dp_overlap >= 0)
        cJSON_AddNumberToObject(j, "dp_overlap", st->dp_overlap);
    if (st->ce_fused >= 0)
        cJSON_AddBoolToObject(j, "ce_fused", st->ce_fused > 0);
    if (st->pp_overlap >= 0)
        cJSON_AddNumberToObject(j, "pp_overlap", st->pp_overlap);
    cJSON *z = cJSON_AddObjectToObject(j, "zero3");
    if (z) {
        cJSON_AddNumberToObject(z, "gathers_per_layer", st->zero3_gathers_per_layer);
        cJSON_AddBoolToObject(z, "flat_ring", st->zero3_flat_ring);
        if (st->zero3_fp32_shard)
            cJSON_AddBoolToObject(z, "fp32_shard", true);
        cJSON_AddNumberToObject(z, "prefetch_params", st->zero3_prefetch_params);
        cJSON_AddNumberToObject(z, "max_live_params", st->zero3_max_live_params);
        cJSON_AddNumberToObject(z, "reduce_bucket_params", st->zero3_reduce_bucket_params);
        cJSON_AddNumberToObject(z, "call_s", st->zero3_call_s);
        cJSON_AddNumberToObject(z, "rank_s", st->zero3_rank_s);
    }
    if (st->pp_p2p_serial)
        cJSON_AddBoolToObject(j, "pp_p2p_serial", true);
    if (st->zero2_pp)
        cJSON_AddBoolToObject(j, "zero2_pp", true);
    if (st->cp_comm >= 0)
        cJSON_AddStringToObject(j, "cp_comm", layout_cp_comm_name((CpComm)st->cp_comm));
    if (st->sel_ac >= 0)
        cJSON_AddStringToObject(j, "selective_ac", layout_sel_ac_name((SelAc)st->sel_ac));
    if (st->rc_early_stop)
        cJSON_AddBoolToObject(j, "rc_early_stop", true);
    if (st->act_fp8_cache)
        cJSON_AddBoolToObject(j, "act_fp8_cache", true);
    if (st->eager_elementwise)
        cJSON_AddBoolToObject(j, "eager_elementwise", true);
    if (st->ce_upcast)
        cJSON_AddBoolToObject(j, "ce_upcast", true);
    if (st->compile_loss)
        cJSON_AddBoolToObject(j, "compile_loss", true);
    if (st->cp_pytorch)
        cJSON_AddBoolToObject(j, "cp_pytorch", true);
    if (st->sdpa_repeat_kv)
        cJSON_AddBoolToObject(j, "sdpa_repeat_kv", true);
    char *text = cJSON_Print(j);
    cJSON_Delete(j);
    return text;
}

int stacks_apply(HwProfile *hw, int i, char *err, int errlen)
{
    if (i == 0)
        return 0;
    Stack st;
    if (stacks_load(i, &st, err, errlen))
        return -1;
    stack_apply(hw, &st);
    snprintf(hw->stack, sizeof hw->stack, "%s", builtin[i]);
    return 0;
}

int stacks_apply_settings(HwProfile *hw, int i, char *err, int errlen)
{
    if (i == 0)
        return 0;
    Stack st;
    if (stacks_load(i, &st, err, errlen))
        return -1;
    stack_apply_settings(hw, &st);
    snprintf(hw->stack, sizeof hw->stack, "%s", builtin[i]);
    return 0;
}
