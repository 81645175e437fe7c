/* profile.c — read and write "ultraplan.profile/1" JSON (see profile.h).
 *
 * Reading goes through a small table of fields and checkers so that each
 * field has exactly one rule and one wording for its error. The profile is
 * filled into a local copy and only copied out once everything has passed.
 */
#include "profile.h"
#include "profile_embed.h"
#include "stacks.h"
#include "fields.h"
#include "fileio.h"
#include "json.h"
#include "suggest.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

/* ---- builtin names and aliases ------------------------------------------ */

typedef struct {
    const char *alias;
    const char *name;
} Alias;

static const Alias aliases[] = {
    {"a100", "a100-80g"},       {"a100-80gb", "a100-80g"}, {"a100-sxm", "a100-80g"},
    {"a100-sxm4-80gb", "a100-80g"}, {"a100-40gb", "a100-40g"}, {"a100-sxm4-40gb", "a100-40g"},
    {"h100", "h100-sxm"},       {"h100-sxm5", "h100-sxm"}, {"h100-80g", "h100-sxm"},
    {"h100-80gb", "h100-sxm"},  {"h200-sxm", "h200"},      {"h200-141g", "h200"},
    {"h200-141gb", "h200"},     {"b200-sxm", "b200"},      {"b200-180g", "b200"},
    {"gb200-nvl72", "gb200"},   {"nvl72", "gb200"},
    {"b300-sxm", "b300"},       {"hgx-b300", "b300"},      {"gb300-nvl72", "gb300"},
};

int profile_builtin_count(void) { return profile_embed_count; }

const char *profile_builtin_name(int i)
{
    return i >= 0 && i < profile_embed_count ? profile_embed_names[i] : NULL;
}

static int builtin_index(const char *name)
{
    for (int i = 0; i < profile_embed_count; i++)
        if (strcasecmp(name, profile_embed_names[i]) == 0)
            return i;
    for (size_t k = 0; k < sizeof aliases / sizeof aliases[0]; k++)
        if (strcasecmp(name, aliases[k].alias) == 0)
            for (int i = 0; i < profile_embed_count; i++)
                if (strcmp(aliases[k].name, profile_embed_names[i]) == 0)
                    return i;
    return -1;
}

/* ---- checkers ------------------------------------------------------------- */

/* Every number lies in [PROFILE_MIN, PROFILE_MAX] unless it is 0 where 0 is
 * allowed: wide enough for any machine, narrow enough that no product or
 * quotient the cost model forms overflows (a denormal link bandwidth made
 * step times infinite and then NaN; fuzz_profile found it). */
#define PROFILE_MIN 1e-12
#define PROFILE_MAX 1e30

typedef enum { R_POS, R_NONNEG, R_FRAC, R_FRAC_OPEN1, R_FRAC_POS } Rule;

static const char *rule_text(Rule r)
{
    switch (r) {
    case R_POS: return "a positive number";
    case R_NONNEG: return "a number >= 0";
    case R_FRAC: return "a number in [0, 1]";
    case R_FRAC_OPEN1: return "a number in [0, 1)";
    case R_FRAC_POS: return "a number in (0, 1]";
    }
    return "a number";
}

static int sign_ok(Rule r, double x)
{
    if (!isfinite(x))
        return 0;
    switch (r) {
    case R_POS: return x > 0;
    case R_NONNEG: return x >= 0;
    case R_FRAC: return x >= 0 && x <= 1;
    case R_FRAC_OPEN1: return x >= 0 && x < 1;
    case R_FRAC_POS: return x > 0 && x <= 1;
    }
    return 0;
}

/* Where the sign is right but the magnitude is not: what is expected. */
static const char *range_text(Rule r, double x)
{
    if (x == 0 || (x >= PROFILE_MIN && x <= PROFILE_MAX))
        return NULL;
    switch (r) {
    case R_POS: return "a number from 1e-12 to 1e30";
    case R_NONNEG: return "0 or a number from 1e-12 to 1e30";
    case R_FRAC_POS: return "a number in [1e-12, 1]";
    default: return NULL;   /* fractions that may be 0: any size is harmless */
    }
}

static int get_number(FieldCtx *c, const cJSON *obj, const char *key, const char *field,
                      Rule r, double *out)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (!cJSON_IsNumber(v) || !sign_ok(r, v->valuedouble))
        return fields_fail(c, field, rule_text(r), v);
    if (range_text(r, v->valuedouble))
        return fields_fail(c, field, range_text(r, v->valuedouble), v);
    *out = v->valuedouble;
    return 0;
}

static const cJSON *get_object(FieldCtx *c, const cJSON *obj, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (!cJSON_IsObject(v)) {
        fields_fail(c, key, "an object", v);
        return NULL;
    }
    return v;
}

static int get_link(FieldCtx *c, const cJSON *obj, const char *key, Link *out)
{
    char f[32];
    const cJSON *o = get_object(c, obj, key);
    if (!o)
        return -1;
    snprintf(f, sizeof f, "%s.bw", key);
    if (get_number(c, o, "bw", f, R_POS, &out->bw))
        return -1;
    snprintf(f, sizeof f, "%s.lat", key);
    return get_number(c, o, "lat", f, R_NONNEG, &out->lat);
}

/* [[size, eff], ...]: sizes > 0 strictly ascending, eff in (0, 1]. */
static int get_curve(FieldCtx *c, const cJSON *obj, const char *key, EffCurve *out)
{
    const cJSON *arr = cJSON_GetObjectItemCaseSensitive(obj, key);
    char want[64], f[48];
    snprintf(want, sizeof want, "an array of 1 to %d [size, eff] points", HW_MAX_EFF_POINTS);
    int n = cJSON_IsArray(arr) ? cJSON_GetArraySize(arr) : -1;
    if (n > HW_MAX_EFF_POINTS) {
        char got[32];
        snprintf(got, sizeof got, "%d points", n);
        return fields_fail_text(c, key, want, got);
    }
    if (n < 1)
        return cJSON_IsArray(arr) ? fields_fail_text(c, key, want, "0 points") : fields_fail(c, key, want, arr);
    out->n = n;
    for (int i = 0; i < n; i++) {
        const cJSON *p = cJSON_GetArrayItem(arr, i);
        snprintf(f, sizeof f, "%s[%d]", key, i);
        if (!cJSON_IsArray(p) || cJSON_GetArraySize(p) != 2 ||
            !cJSON_IsNumber(cJSON_GetArrayItem(p, 0)) || !cJSON_IsNumber(cJSON_GetArrayItem(p, 1)))
            return fields_fail(c, f, "a [size, eff] pair of numbers", p);
        const cJSON *s = cJSON_GetArrayItem(p, 0), *e = cJSON_GetArrayItem(p, 1);
        if (!sign_ok(R_POS, s->valuedouble))
            return fields_fail(c, f, "a positive size", s);
        if (range_text(R_POS, s->valuedouble))
            return fields_fail(c, f, "a size from 1e-12 to 1e30", s);
        if (!sign_ok(R_FRAC_POS, e->valuedouble))
            return fields_fail(c, f, "an efficiency in (0, 1]", e);
        if (range_text(R_FRAC_POS, e->valuedouble))
            return fields_fail(c, f, "an efficiency in [1e-12, 1]", e);
        if (i > 0 && !(s->valuedouble > out->pt[i - 1].size)) {
            char want2[80];
            snprintf(want2, sizeof want2, "a size above the previous point's %.6g (ascending)",
                     out->pt[i - 1].size);
            return fields_fail(c, f, want2, s);
        }
        out->pt[i].size = s->valuedouble;
        out->pt[i].eff = e->valuedouble;
    }
    return 0;
}

/* ---- the field table ------------------------------------------------------ */

static const char *const peak_keys[PREC_COUNT] = {"fp32", "bf16", "fp16", "fp8"};
_Static_assert(PREC_COUNT == 4, "peak_keys lists one JSON key per Precision");

typedef struct {
    const char *key;
    size_t off;   // offset of a double in HwProfile
    Rule rule;
} NumField;

static const NumField num_fields[] = {
    {"hbm_bytes", offsetof(HwProfile, hbm_bytes), R_POS},
    {"hbm_bw", offsetof(HwProfile, hbm_bw), R_POS},
    {"act_bytes_per_layer", offsetof(HwProfile, act_bytes_per_layer), R_NONNEG},
    {"cuda_context_bytes", offsetof(HwProfile, cuda_context_bytes), R_NONNEG},
    {"alloc_frag", offsetof(HwProfile, alloc_frag), R_FRAC_OPEN1},
    {"nccl_buf_bytes", offsetof(HwProfile, nccl_buf_bytes), R_NONNEG},
    {"tp_overlap", offsetof(HwProfile, tp_overlap), R_FRAC},
    {"dp_overlap", offsetof(HwProfile, dp_overlap), R_FRAC},
    {"pp_overlap", offsetof(HwProfile, pp_overlap), R_FRAC},
    {"fail_per_gpu_hour", offsetof(HwProfile, fail_per_gpu_hour), R_NONNEG},
    {"ckpt_bw_per_node", offsetof(HwProfile, ckpt_bw_per_node), R_POS},
    {"restart_s", offsetof(HwProfile, restart_s), R_NONNEG},
};

/* Fields added after format 1 shipped: a file without them takes `def`. */
typedef struct {
    NumField f;
    double def;
} OptField;

static const OptField opt_fields[] = {
    {{"kernel_lat", offsetof(HwProfile, kernel_lat), R_NONNEG}, 0.0},
    {{"coll_lat", offsetof(HwProfile, coll_lat), R_NONNEG}, 0.0},
    {{"coll_eff", offsetof(HwProfile, coll_eff), R_FRAC_POS}, 1.0},
    {{"a2a_lat", offsetof(HwProfile, a2a_lat), R_NONNEG}, 0.0},
    {{"a2a_eff", offsetof(HwProfile, a2a_eff), R_FRAC}, 0.0},
    {{"sm_count", offsetof(HwProfile, sm_count), R_NONNEG}, 0.0},
    {{"gemm_tile_m", offsetof(HwProfile, gemm_tile_m), R_NONNEG}, 0.0},
    {{"gemm_tile_n", offsetof(HwProfile, gemm_tile_n), R_NONNEG}, 0.0},
    {{"eff_ref_peak", offsetof(HwProfile, eff_ref_peak), R_NONNEG}, 0.0},
    {{"eff_ref_hbm_bw", offsetof(HwProfile, eff_ref_hbm_bw), R_NONNEG}, 0.0},
    {{"compute_capability", offsetof(HwProfile, compute_capability), R_NONNEG}, 0.0},
};

typedef struct {
    const char *key;
    size_t off;   // offset of an EffCurve in HwProfile
} CurveField;

static const CurveField curve_fields[] = {
    {"gemm_eff", offsetof(HwProfile, gemm_eff)},
    {"attn_eff", offsetof(HwProfile, attn_eff)},
    {"mem_eff", offsetof(HwProfile, mem_eff)},
};

static double *num_at(HwProfile *hw, size_t off) { return (double *)((char *)hw + off); }
static const double *cnum_at(const HwProfile *hw, size_t off)
{
    return (const double *)((const char *)hw + off);
}

static int read_peak(FieldCtx *c, const cJSON *root, HwProfile *hw)
{
    const cJSON *o = get_object(c, root, "peak");
    char f[24];
    int any = 0;
    if (!o)
        return -1;
    for (int p = 0; p < PREC_COUNT; p++) {
        snprintf(f, sizeof f, "peak.%s", peak_keys[p]);
        if (get_number(c, o, peak_keys[p], f, R_NONNEG, &hw->peak[p]))
            return -1;
        any |= hw->peak[p] > 0;
    }
    if (!any)
        return fields_fail(c, "peak", "at least one precision with a peak above 0", o);
    return 0;
}

/* optional "stack": the builtin software stack the profile was written under.
 * Its scaled curves are in the file; the fields the stack sets outright
 * (ZeRO-3, ce_fused, ce_upcast, pp_p2p_serial, zero2_pp, rc_early_stop) are taken from the stack's
 * own file again, so they live in one place. */
static int read_stack(FieldCtx *c, const cJSON *root, HwProfile *hw)
{
    const cJSON *s = cJSON_GetObjectItemCaseSensitive(root, "stack");
    if (!s || (cJSON_IsString(s) && !s->valuestring[0]))
        return 0;
    int i = cJSON_IsString(s) ? stacks_index(s->valuestring) : -1;
    if (i < 0) {
        char want[400] = "the name of a builtin software stack (";
        for (int k = 0; k < STACK_BUILTIN_COUNT; k++)
            snprintf(want + strlen(want), sizeof want - strlen(want), "%s%s", k ? ", " : "", stacks_name(k));
        snprintf(want + strlen(want), sizeof want - strlen(want), ")");
        return fields_fail(c, "stack", want, s);
    }
    char e2[256];
    if (stacks_apply_settings(hw, i, e2, sizeof e2)) {
        return fields_fail_text(c, "stack", "a builtin software stack that loads", e2);
    }
    return 0;
}

static int read_profile(FieldCtx *c, const cJSON *root, HwProfile *hw)
{
    const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(root, "format");
    if (!cJSON_IsString(fmt) || strcmp(fmt->valuestring, PROFILE_FORMAT) != 0)
        return fields_fail(c, "format", "\"" PROFILE_FORMAT "\"", fmt);
    if (fields_string(c, root, "name", hw->name, sizeof hw->name, 1) ||
        fields_string(c, root, "desc", hw->desc, sizeof hw->desc, 0) ||
        read_peak(c, root, hw))
        return -1;
    for (size_t i = 0; i < sizeof num_fields / sizeof num_fields[0]; i++)
        if (get_number(c, root, num_fields[i].key, num_fields[i].key, num_fields[i].rule,
                       num_at(hw, num_fields[i].off)))
            return -1;
    for (size_t i = 0; i < sizeof opt_fields / sizeof opt_fields[0]; i++) {
        const NumField *f = &opt_fields[i].f;
        if (!cJSON_GetObjectItemCaseSensitive(root, f->key))
            *num_at(hw, f->off) = opt_fields[i].def;
        else if (get_number(c, root, f->key, f->key, f->rule, num_at(hw, f->off)))
            return -1;
    }
    const cJSON *g = cJSON_GetObjectItemCaseSensitive(root, "gpus_per_node");
    if (!cJSON_IsNumber(g) || g->valuedouble < 1 || g->valuedouble > 1e6 ||
        g->valuedouble != floor(g->valuedouble))
        return fields_fail(c, "gpus_per_node", "a positive integer", g);
    hw->gpus_per_node = (int)g->valuedouble;
    /* optional: GPUs in one host (a Slurm node); absent = the NVLink domain is one host */
    const cJSON *gh = cJSON_GetObjectItemCaseSensitive(root, "gpus_per_host");
    if (!gh) {
        hw->gpus_per_host = hw->gpus_per_node;
    } else {
        if (!cJSON_IsNumber(gh) || gh->valuedouble < 1 || gh->valuedouble > 1e6 ||
            gh->valuedouble != floor(gh->valuedouble))
            return fields_fail(c, "gpus_per_host", "a positive integer", gh);
        hw->gpus_per_host = (int)gh->valuedouble;
    }
    if (get_link(c, root, "intra", &hw->intra) || get_link(c, root, "inter", &hw->inter))
        return -1;
    for (size_t i = 0; i < sizeof curve_fields / sizeof curve_fields[0]; i++)
        if (get_curve(c, root, curve_fields[i].key,
                      (EffCurve *)((char *)hw + curve_fields[i].off)))
            return -1;
    return read_stack(c, root, hw);
}

/* ---- public: reading ------------------------------------------------------ */

/* 1-based line of byte offset `at` in text. */
static int line_of(const char *text, const char *at)
{
    int line = 1;
    for (const char *p = text; p < at && *p; p++)
        line += *p == '\n';
    return line;
}

int profile_parse_json(const char *text, const char *origin, HwProfile *out,
                       char *err, int errlen)
{
    FieldCtx c = {"profile", origin ? origin : "(text)", err, errlen};
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithOpts(text ? text : "", &end, 1);
    if (!root) {
        if (err && errlen > 0)
            snprintf(err, errlen, "profile %s: not valid JSON (line %d)", c.origin,
                     end ? line_of(text ? text : "", end) : 1);
        return -1;
    }
    if (!cJSON_IsObject(root)) {
        if (err && errlen > 0)
            snprintf(err, errlen, "profile %s: expected a JSON object at the top level", c.origin);
        cJSON_Delete(root);
        return -1;
    }
    char dup[200];
    if (util_json_duplicate(root, dup, sizeof dup)) {
        if (err && errlen > 0)
            snprintf(err, errlen, "profile %s: field \"%s\": appears twice", c.origin, dup);
        cJSON_Delete(root);
        return -1;
    }
    HwProfile hw;
    memset(&hw, 0, sizeof hw);
    int rc = read_profile(&c, root, &hw);
    cJSON_Delete(root);
    if (rc == 0)
        *out = hw;
    return rc;
}

int profile_load_builtin(const char *name, HwProfile *out, char *err, int errlen)
{
    int i = name ? builtin_index(name) : -1;
    if (i < 0) {
        int n = 0;
        if (err && errlen > 0) {
            const char *near = util_closest(name, profile_embed_names, profile_embed_count);
            if (near)
                n = snprintf(err, errlen, "unknown GPU profile \"%s\" (did you mean %s?); builtin:", name, near);
            else
                n = snprintf(err, errlen, "unknown GPU profile \"%s\"; builtin:", name ? name : "");
            for (int k = 0; k < profile_embed_count && n < errlen; k++)
                n += snprintf(err + n, errlen - n, "%s %s", k ? "," : "", profile_embed_names[k]);
            if (n < errlen)
                snprintf(err + n, errlen - n, " (aliases: a100, h100, ...; or give a profile file)");
        }
        return -1;
    }
    char origin[64];
    snprintf(origin, sizeof origin, "%s.json", profile_embed_names[i]);
    return profile_parse_json(profile_embed_texts[i], origin, out, err, errlen);
}

int profile_load_file(const char *path, HwProfile *out, char *err, int errlen)
{
    char dummy[8];
    if (!err || errlen <= 0) {
        err = dummy;
        errlen = sizeof dummy;
    }
    char e2[256];
    char *text = util_slurp(path, 16u << 20, NULL, e2, sizeof e2);
    if (!text) {
        snprintf(err, errlen, "profile %s", e2);
        return -1;
    }
    int rc = profile_parse_json(text, path, out, err, errlen);
    free(text);
    return rc;
}

/* ---- public: writing ------------------------------------------------------ */

/* x in the fewest digits that read back as exactly x. cJSON's own printer
 * settles for 15 digits when they come within an epsilon, which moves a
 * scaled efficiency by an ulp on every write and read. Profiles hold finite
 * numbers only (the reader's rules). */
static cJSON *exact_number(double x)
{
    char buf[40];
    for (int digits = 15; digits <= 17; digits++) {
        snprintf(buf, sizeof buf, "%.*g", digits, x);
        if (strtod(buf, NULL) == x)
            break;
    }
    return cJSON_CreateRaw(buf);
}

static void add_number(cJSON *obj, const char *key, double x)
{
    cJSON_AddItemToObject(obj, key, exact_number(x));
}

static cJSON *curve_json(const EffCurve *c)
{
    cJSON *arr = cJSON_CreateArray();
    for (int i = 0; arr && i < c->n; i++) {
        cJSON *pt = cJSON_CreateArray();
        cJSON_AddItemToArray(pt, exact_number(c->pt[i].size));
        cJSON_AddItemToArray(pt, exact_number(c->pt[i].eff));
        cJSON_AddItemToArray(arr, pt);
    }
    return arr;
}

static cJSON *link_json(const Link *l)
{
    cJSON *o = cJSON_CreateObject();
    add_number(o, "bw", l->bw);
    add_number(o, "lat", l->lat);
    return o;
}

static cJSON *profile_json(const HwProfile *hw)
{
    cJSON *root = cJSON_CreateObject();
    if (!root)
        return NULL;
    cJSON_AddStringToObject(root, "format", PROFILE_FORMAT);
    cJSON_AddStringToObject(root, "name", hw->name);
    cJSON_AddStringToObject(root, "desc", hw->desc);
    if (hw->stack[0])   /* its set fields are re-applied from the stack's file on read */
        cJSON_AddStringToObject(root, "stack", hw->stack);
    cJSON_AddStringToObject(root, "src",
                            "written by ultraplan; sources of unchanged values are in "
                            "profiles/gpus/*.json");
    cJSON *peak = cJSON_AddObjectToObject(root, "peak");
    for (int p = 0; p < PREC_COUNT; p++)
        add_number(peak, peak_keys[p], hw->peak[p]);
    add_number(root, "gpus_per_node", hw->gpus_per_node);
    add_number(root, "gpus_per_host", hw->gpus_per_host > 0 ? hw->gpus_per_host : hw->gpus_per_node);
    cJSON_AddItemToObject(root, "intra", link_json(&hw->intra));
    cJSON_AddItemToObject(root, "inter", link_json(&hw->inter));
    for (size_t i = 0; i < sizeof curve_fields / sizeof curve_fields[0]; i++)
        cJSON_AddItemToObject(root, curve_fields[i].key,
                              curve_json((const EffCurve *)((const char *)hw + curve_fields[i].off)));
    for (size_t i = 0; i < sizeof num_fields / sizeof num_fields[0]; i++)
        add_number(root, num_fields[i].key, *cnum_at(hw, num_fields[i].off));
    for (size_t i = 0; i < sizeof opt_fields / sizeof opt_fields[0]; i++)
        add_number(root, opt_fields[i].f.key, *cnum_at(hw, opt_fields[i].f.off));
    return root;
}

char *profile_to_json(const HwProfile *hw)
{
    cJSON *root = profile_json(hw);
    char *s = root ? cJSON_Print(root) : NULL;
    cJSON_Delete(root);
    return s;
}

int profile_write_json(const HwProfile *hw, const char *path, char *err, int errlen)
{
    char dummy[8];
    if (!err || errlen <= 0) {
        err = dummy;
        errlen = sizeof dummy;
    }
    char *text = profile_to_json(hw);
    if (!text) {
        snprintf(err, errlen, "profile %s: out of memory", path);
        return -1;
    }
    char e2[512];
    int rc = util_write_atomic(path, text, e2, sizeof e2);
    if (rc != 0)
        snprintf(err, errlen, "profile %s", e2);
    free(text);
    return rc;
}
