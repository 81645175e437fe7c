/* test_profiles.c — the builtin hardware profiles, the profile loader's
 * errors and round trip, and the model presets. PROFILES_DIR is the source
 * folder of the JSON files (set in tests/profiles.cmake). */
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

#include "presets.h"
#include "profile.h"

#ifndef PROFILES_DIR
#error "PROFILES_DIR must name profiles/gpus"
#endif

static void assert_rel(double got, double want, double tol)
{
    if (!(fabs(got - want) <= tol * fabs(want))) {
        print_error("got %.10g, want %.10g (rel tol %g)\n", got, want, tol);
        fail();
    }
}

static void assert_contains(const char *s, const char *part)
{
    if (!strstr(s, part)) {
        print_error("\"%s\"\n  does not contain\n\"%s\"\n", s, part);
        fail();
    }
}

/* ---- builtins ------------------------------------------------------------- */

static void check_curve(const EffCurve *c)
{
    assert_true(c->n >= 1 && c->n <= HW_MAX_EFF_POINTS);
    for (int i = 0; i < c->n; i++) {
        assert_true(c->pt[i].eff > 0 && c->pt[i].eff <= 1);
        if (i)
            assert_true(c->pt[i].size > c->pt[i - 1].size);
    }
}

static void test_builtins_load_and_are_sane(void **state)
{
    (void)state;
    char err[512];
    assert_int_equal(profile_builtin_count(), 8);
    assert_null(profile_builtin_name(8));
    assert_null(profile_builtin_name(-1));
    for (int i = 0; i < profile_builtin_count(); i++) {
        HwProfile hw;
        const char *name = profile_builtin_name(i);
        if (profile_load_builtin(name, &hw, err, sizeof err) != 0) {
            print_error("%s: %s\n", name, err);
            fail();
        }
        assert_string_equal(hw.name, name);
        assert_true(strlen(hw.desc) > 10);
        assert_true(hw.peak[PREC_BF16] >= 1e14 && hw.peak[PREC_BF16] <= 1e16);
        assert_true(hw.peak[PREC_FP16] == hw.peak[PREC_BF16]);
        assert_true(hw.peak[PREC_FP32] > 0 && hw.peak[PREC_FP32] < hw.peak[PREC_BF16]);
        assert_true(hw.hbm_bytes >= 40e9 && hw.hbm_bytes <= 288e9);
        assert_true(hw.hbm_bw >= 1e12 && hw.hbm_bw <= 10e12);
        assert_true(hw.gpus_per_node == 8 || hw.gpus_per_node == 72);
        assert_true(hw.gpus_per_host >= 1 && hw.gpus_per_node % hw.gpus_per_host == 0);
        assert_true(hw.intra.bw > hw.inter.bw && hw.inter.bw >= 25e9);
        assert_true(hw.intra.lat > 0 && hw.inter.lat >= hw.intra.lat);
        check_curve(&hw.gemm_eff);
        check_curve(&hw.attn_eff);
        check_curve(&hw.mem_eff);
        assert_rel(hw.fail_per_gpu_hour, 419.0 / (54.0 * 16384 * 24), 1e-9);
        assert_rel(hw.ckpt_bw_per_node, 2e12 / 2048, 1e-9);
        assert_true(hw.alloc_frag == 0.05 && hw.tp_overlap == 1 && hw.dp_overlap == 1 &&
                    hw.pp_overlap == 0 && hw.restart_s == 600);
        assert_true(hw.cuda_context_bytes >= 1e9 && hw.cuda_context_bytes <= 2.2e9);
        assert_true(hw.nccl_buf_bytes >= 4 << 20 && hw.act_bytes_per_layer > 0);
    }
}

static void test_builtin_datasheet_values(void **state)
{
    (void)state;
    HwProfile hw;
    char err[512];
    assert_int_equal(profile_load_builtin("h100-sxm", &hw, err, sizeof err), 0);
    assert_true(hw.peak[PREC_BF16] == 989e12 && hw.peak[PREC_FP8] == 1979e12);
    assert_true(hw.hbm_bw == 3.35e12 && hw.intra.bw == 450e9 && hw.inter.bw == 50e9);
    assert_int_equal(profile_load_builtin("a100-80g", &hw, err, sizeof err), 0);
    assert_true(hw.peak[PREC_BF16] == 312e12 && hw.peak[PREC_FP8] == 0);
    assert_true(hw.hbm_bw == 2039e9 && hw.intra.bw == 300e9 && hw.inter.bw == 25e9);
    assert_true(hw.hbm_bytes == 80.0 * (1 << 30));
    assert_int_equal(profile_load_builtin("a100-40g", &hw, err, sizeof err), 0);
    assert_true(hw.hbm_bw == 1555e9 && hw.hbm_bytes == 40.0 * (1 << 30));
    assert_int_equal(profile_load_builtin("h200", &hw, err, sizeof err), 0);
    assert_true(hw.peak[PREC_BF16] == 989e12 && hw.hbm_bytes == 143771.0 * (1 << 20) && hw.hbm_bw == 4.8e12);
    assert_int_equal(profile_load_builtin("b200", &hw, err, sizeof err), 0);
    assert_true(hw.peak[PREC_BF16] == 2.25e15 && hw.intra.bw == 900e9 && hw.gpus_per_node == 8);
    assert_int_equal(profile_load_builtin("gb200", &hw, err, sizeof err), 0);
    assert_true(hw.peak[PREC_BF16] == 2.5e15 && hw.intra.bw == 900e9 && hw.gpus_per_node == 72);
}

/* Blackwell Ultra's attention over Blackwell's at equal bf16 peak: the median
 * forward+backward time ratio GB200/GB300 of the 30 full-attention bf16 runs
 * NVIDIA's cudnn-frontend publishes for both (NOTES step 57), at the file's
 * 4-digit rounding of each point */
static void assert_ultra_attn(const EffCurve *u, const EffCurve *b)
{
    assert_int_equal(u->n, b->n);
    for (int i = 0; i < u->n; i++) {
        assert_true(u->pt[i].size == b->pt[i].size);
        assert_true(fabs(u->pt[i].eff - 1.12 * b->pt[i].eff) < 1e-4);
    }
}

/* Blackwell Ultra: the datasheet values of b300.json and gb300.json (their
 * _src strings), and what they borrow from b200/gb200 unchanged. */
static void test_blackwell_ultra_values(void **state)
{
    (void)state;
    HwProfile u, b;
    char err[512];
    /* HGX B300: 36 / 72 PFLOP/s bf16 / fp8 with sparsity per 8 GPUs, TF32 18;
     * 270 GB usable of 288 GB HBM3e at 8 TB/s; NVLink 5 900 GB/s a direction;
     * one ConnectX-8 800 Gb/s per GPU; 8 GPUs per host and NVLink domain */
    assert_int_equal(profile_load_builtin("b300", &u, err, sizeof err), 0);
    assert_true(u.peak[PREC_BF16] == 36e15 / 8 / 2 && u.peak[PREC_FP16] == u.peak[PREC_BF16]);
    assert_true(u.peak[PREC_FP8] == 72e15 / 8 / 2 && u.peak[PREC_FP32] == 18e15 / 8 / 2);
    assert_true(u.hbm_bytes == 270e9 && u.hbm_bytes < 288e9 && u.hbm_bw == 8e12);
    assert_true(u.intra.bw == 900e9 && u.inter.bw == 800e9 / 8);
    assert_int_equal(u.gpus_per_node, 8);
    assert_int_equal(u.gpus_per_host, 8);
    assert_int_equal(profile_load_builtin("b200", &b, err, sizeof err), 0);
    assert_true(u.peak[PREC_BF16] == b.peak[PREC_BF16] && u.peak[PREC_FP8] == b.peak[PREC_FP8]);
    assert_true(u.hbm_bytes == 1.5 * b.hbm_bytes && u.inter.bw == 2 * b.inter.bw);
    HwProfile hop;
    assert_int_equal(profile_load_builtin("h100-sxm", &hop, err, sizeof err), 0);
    /* b200's curve before its x0.834 for B200 matmuls (NOTES step 25), said in the file */
    assert_memory_equal(&u.gemm_eff, &hop.gemm_eff, sizeof u.gemm_eff);
    for (int i = 0; i < b.gemm_eff.n; i++)
        assert_true(fabs(b.gemm_eff.pt[i].eff - 0.834 * hop.gemm_eff.pt[i].eff) < 1e-4);
    assert_ultra_attn(&u.attn_eff, &b.attn_eff);
    assert_memory_equal(&u.mem_eff, &b.mem_eff, sizeof u.mem_eff);
    assert_true(u.eff_ref_peak == b.eff_ref_peak && u.eff_ref_hbm_bw == b.eff_ref_hbm_bw &&
                u.coll_eff == b.coll_eff && u.coll_lat == b.coll_lat && u.kernel_lat == b.kernel_lat);
    /* GB300 NVL72: 360 / 720 PFLOP/s bf16 / fp8 with sparsity per 72 GPUs, TF32
     * 180; 279 GB usable at 576 TB/s per 72; 4 GPUs per host, 72 per domain */
    assert_int_equal(profile_load_builtin("gb300", &u, err, sizeof err), 0);
    assert_true(u.peak[PREC_BF16] == 360e15 / 72 / 2 && u.peak[PREC_FP16] == u.peak[PREC_BF16]);
    assert_true(u.peak[PREC_FP8] == 720e15 / 72 / 2 && u.peak[PREC_FP32] == 180e15 / 72 / 2);
    assert_true(u.hbm_bytes == 279e9 && u.hbm_bytes < 288e9 && u.hbm_bw == 576e12 / 72);
    assert_true(u.intra.bw == 900e9 && u.inter.bw == 800e9 / 8);
    assert_int_equal(u.gpus_per_node, 72);
    assert_int_equal(u.gpus_per_host, 4);
    assert_int_equal(profile_load_builtin("gb200", &b, err, sizeof err), 0);
    assert_true(u.peak[PREC_BF16] == b.peak[PREC_BF16] && u.peak[PREC_FP8] == b.peak[PREC_FP8]);
    assert_memory_equal(&u.gemm_eff, &hop.gemm_eff, sizeof u.gemm_eff);
    assert_ultra_attn(&u.attn_eff, &b.attn_eff);
    assert_memory_equal(&u.mem_eff, &b.mem_eff, sizeof u.mem_eff);
    assert_true(u.eff_ref_peak == b.eff_ref_peak && u.coll_eff == b.coll_eff);
}

/* Every number in the source JSON carries a <key>_src string beside it. */
static void check_sources(const cJSON *obj, const char *file)
{
    for (const cJSON *it = obj->child; it; it = it->next) {
        if (cJSON_IsObject(it)) {
            check_sources(it, file);
            continue;
        }
        if (!cJSON_IsNumber(it) && !cJSON_IsArray(it))
            continue;
        char key[96];
        snprintf(key, sizeof key, "%s_src", it->string);
        const cJSON *src = cJSON_GetObjectItemCaseSensitive(obj, key);
        if (!cJSON_IsString(src) || strlen(src->valuestring) < 10) {
            print_error("%s: \"%s\" has no source string \"%s\"\n", file, it->string, key);
            fail();
        }
    }
}

static void test_builtin_files_cite_sources(void **state)
{
    (void)state;
    char err[512], path[512];
    for (int i = 0; i < profile_builtin_count(); i++) {
        HwProfile a, b;
        snprintf(path, sizeof path, "%s/%s.json", PROFILES_DIR, profile_builtin_name(i));
        assert_int_equal(profile_load_file(path, &a, err, sizeof err), 0);
        assert_int_equal(profile_load_builtin(profile_builtin_name(i), &b, err, sizeof err), 0);
        assert_memory_equal(&a, &b, sizeof a);   // the embedded copy is the file
        FILE *f = fopen(path, "rb");
        assert_non_null(f);
        static char text[1 << 16];
        size_t n = fread(text, 1, sizeof text - 1, f);
        fclose(f);
        text[n] = '\0';
        cJSON *root = cJSON_Parse(text);
        assert_non_null(root);
        check_sources(root, path);
        cJSON_Delete(root);
    }
}

static void test_aliases(void **state)
{
    (void)state;
    static const char *const cases[][2] = {
        {"h100", "h100-sxm"},       {"H100-SXM", "h100-sxm"}, {"H100", "h100-sxm"},
        {"a100", "a100-80g"},       {"a100-80gb", "a100-80g"}, {"A100-80GB", "a100-80g"},
        {"a100-40gb", "a100-40g"},  {"H200", "h200"},          {"gb200-nvl72", "gb200"},
        {"B200", "b200"},           {"b300-sxm", "b300"},     {"HGX-B300", "b300"},
        {"GB300", "gb300"},         {"gb300-nvl72", "gb300"},
    };
    char err[512];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        HwProfile hw;
        if (profile_load_builtin(cases[i][0], &hw, err, sizeof err) != 0) {
            print_error("%s: %s\n", cases[i][0], err);
            fail();
        }
        assert_string_equal(hw.name, cases[i][1]);
    }
    HwProfile hw;
    assert_int_equal(profile_load_builtin("v100", &hw, err, sizeof err), -1);
    assert_contains(err, "unknown GPU profile \"v100\"");
    assert_contains(err, "h100-sxm");
    assert_int_equal(profile_load_builtin(NULL, &hw, err, sizeof err), -1);
}

/* ---- bad files ------------------------------------------------------------ */

static cJSON *h100_json(void)
{
    HwProfile hw;
    char err[512];
    assert_int_equal(profile_load_builtin("h100-sxm", &hw, err, sizeof err), 0);
    char *text = profile_to_json(&hw);
    assert_non_null(text);
    cJSON *root = cJSON_Parse(text);
    free(text);
    assert_non_null(root);
    return root;
}

static cJSON *curve_of(const double (*pts)[2], int n)
{
    cJSON *arr = cJSON_CreateArray();
    for (int i = 0; i < n; i++)
        cJSON_AddItemToArray(arr, cJSON_CreateDoubleArray(pts[i], 2));
    return arr;
}

/* Parse the h100 profile with one field replaced (or removed when v is NULL)
 * and expect -1 with exactly `want` as the message. */
static void expect_error(const char *obj, const char *key, cJSON *v, const char *want)
{
    cJSON *root = h100_json();
    cJSON *parent = obj ? cJSON_GetObjectItemCaseSensitive(root, obj) : root;
    assert_non_null(parent);
    if (v)
        cJSON_ReplaceItemInObjectCaseSensitive(parent, key, v);
    else
        cJSON_DeleteItemFromObjectCaseSensitive(parent, key);
    char *text = cJSON_Print(root);
    cJSON_Delete(root);
    HwProfile hw;
    memset(&hw, 0x5a, sizeof hw);
    char err[512] = "";
    int rc = profile_parse_json(text, "h100.json", &hw, err, sizeof err);
    free(text);
    if (rc != -1 || strcmp(err, want) != 0) {
        print_error("rc %d, message\n  %s\nwant\n  %s\n", rc, err, want);
        fail();
    }
    assert_int_equal(((unsigned char *)&hw)[0], 0x5a);   // out untouched on error
}

/* want[] filled printf-style, for expect_error */
#define WANT(...) (snprintf(want, sizeof want, __VA_ARGS__), want)

static void test_bad_fields(void **state)
{
    (void)state;
    const char *P = "profile h100.json: field ";
    char want[256];
    expect_error(NULL, "hbm_bw", cJSON_CreateString("abc"),
                 WANT("%s\"hbm_bw\": expected a positive number, got \"abc\"", P));
    expect_error(NULL, "hbm_bytes", NULL,
                 WANT("%s\"hbm_bytes\": expected a positive number, got nothing (field missing)", P));
    expect_error(NULL, "hbm_bw", cJSON_CreateNumber(0),
                 WANT("%s\"hbm_bw\": expected a positive number, got 0", P));
    expect_error(NULL, "restart_s", cJSON_CreateNumber(-5),
                 WANT("%s\"restart_s\": expected a number >= 0, got -5", P));
    expect_error(NULL, "dp_overlap", cJSON_CreateNumber(1.5),
                 WANT("%s\"dp_overlap\": expected a number in [0, 1], got 1.5", P));
    expect_error(NULL, "alloc_frag", cJSON_CreateBool(1),
                 WANT("%s\"alloc_frag\": expected a number in [0, 1), got true", P));
    expect_error(NULL, "gpus_per_node", cJSON_CreateNumber(2.5),
                 WANT("%s\"gpus_per_node\": expected a positive integer, got 2.5", P));
    expect_error(NULL, "name", cJSON_CreateString(""),
                 WANT("%s\"name\": expected a non-empty string of at most 47 characters, got \"\"", P));
    expect_error(NULL, "intra", cJSON_CreateArray(),
                 WANT("%s\"intra\": expected an object, got an array", P));
    expect_error("intra", "bw", cJSON_CreateString("fast"),
                 WANT("%s\"intra.bw\": expected a positive number, got \"fast\"", P));
    expect_error("inter", "lat", cJSON_CreateNumber(-1e-6),
                 WANT("%s\"inter.lat\": expected a number >= 0, got -1e-06", P));
    expect_error("peak", "bf16", cJSON_CreateNull(),
                 WANT("%s\"peak.bf16\": expected a number >= 0, got null", P));
    expect_error(NULL, "format", NULL,
                 WANT("%s\"format\": expected \"ultraplan.profile/1\", got nothing (field missing)", P));
    expect_error(NULL, "format", cJSON_CreateString("ultraplan.profile/2"),
                 WANT("%s\"format\": expected \"ultraplan.profile/1\", got \"ultraplan.profile/2\"", P));
    expect_error(NULL, "format", cJSON_CreateString("ultraplan.plan/1"),
                 WANT("%s\"format\": expected \"ultraplan.profile/1\", got \"ultraplan.plan/1\"", P));
}

static void test_bad_peaks(void **state)
{
    (void)state;
    cJSON *zero = cJSON_CreateObject();
    cJSON_AddNumberToObject(zero, "fp32", 0);
    cJSON_AddNumberToObject(zero, "bf16", 0);
    cJSON_AddNumberToObject(zero, "fp16", 0);
    cJSON_AddNumberToObject(zero, "fp8", 0);
    expect_error(NULL, "peak", zero,
                 "profile h100.json: field \"peak\": expected at least one precision with a peak "
                 "above 0, got an object");
}

static void test_bad_curves(void **state)
{
    (void)state;
    const double above1[][2] = {{1e8, 0.3}, {1e9, 0.5}, {1e10, 1.5}};
    const double zero[][2] = {{1e8, 0.0}};
    const double descending[][2] = {{1e9, 0.5}, {1e8, 0.6}};
    const double negsize[][2] = {{-1, 0.5}};
    double many[HW_MAX_EFF_POINTS + 1][2];
    for (int i = 0; i <= HW_MAX_EFF_POINTS; i++) {
        many[i][0] = pow(10, 3 + i * 0.5);
        many[i][1] = 0.05 + 0.05 * i;
    }
    const char *P = "profile h100.json: field ";
    char want[256];
    expect_error(NULL, "gemm_eff", curve_of(above1, 3),
                 WANT("%s\"gemm_eff[2]\": expected an efficiency in (0, 1], got 1.5", P));
    expect_error(NULL, "attn_eff", curve_of(zero, 1),
                 WANT("%s\"attn_eff[0]\": expected an efficiency in (0, 1], got 0", P));
    expect_error(NULL, "gemm_eff", curve_of(descending, 2),
                 WANT("%s\"gemm_eff[1]\": expected a size above the previous point's 1e+09 "
                      "(ascending), got 1e+08", P));
    expect_error(NULL, "mem_eff", curve_of(negsize, 1),
                 WANT("%s\"mem_eff[0]\": expected a positive size, got -1", P));
    expect_error(NULL, "mem_eff", curve_of(many, HW_MAX_EFF_POINTS + 1),
                 WANT("%s\"mem_eff\": expected an array of 1 to 16 [size, eff] points, got 17 points", P));
    /* exactly HW_MAX_EFF_POINTS is fine */
    cJSON *root = h100_json();
    cJSON_ReplaceItemInObjectCaseSensitive(root, "mem_eff", curve_of(many, HW_MAX_EFF_POINTS));
    char *text = cJSON_Print(root), err[512];
    HwProfile hw;
    assert_int_equal(profile_parse_json(text, "x", &hw, err, sizeof err), 0);
    assert_int_equal(hw.mem_eff.n, HW_MAX_EFF_POINTS);
    free(text);
    cJSON_Delete(root);
    expect_error(NULL, "gemm_eff", cJSON_CreateArray(),
                 WANT("%s\"gemm_eff\": expected an array of 1 to 16 [size, eff] points, got 0 points", P));
    cJSON *pair3 = cJSON_CreateArray();
    cJSON_AddItemToArray(pair3, cJSON_CreateString("big"));
    expect_error(NULL, "gemm_eff", pair3,
                 WANT("%s\"gemm_eff[0]\": expected a [size, eff] pair of numbers, got \"big\"", P));
}

static void test_bad_text_and_files(void **state)
{
    (void)state;
    HwProfile hw;
    char err[512];
    assert_int_equal(profile_parse_json("{\n\"format\": \n", "t.json", &hw, err, sizeof err), -1);
    assert_contains(err, "profile t.json: not valid JSON");
    assert_int_equal(profile_parse_json("[1, 2]", "t.json", &hw, err, sizeof err), -1);
    assert_string_equal(err, "profile t.json: expected a JSON object at the top level");
    assert_int_equal(profile_parse_json(NULL, "t.json", &hw, err, sizeof err), -1);
    assert_int_equal(profile_parse_json("{}", "t.json", &hw, NULL, 0), -1);   // no err buffer
    assert_int_equal(profile_load_file("/nonexistent/x.json", &hw, err, sizeof err), -1);
    assert_contains(err, "profile /nonexistent/x.json: cannot open");

    /* a bad file on disk is named by its path */
    char path[] = "/tmp/test_profiles_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    const char *bad = "{\"format\": \"ultraplan.profile/1\", \"name\": 7}";
    assert_int_equal(write(fd, bad, strlen(bad)), (int)strlen(bad));
    close(fd);
    assert_int_equal(profile_load_file(path, &hw, err, sizeof err), -1);
    char want[256];
    snprintf(want, sizeof want,
             "profile %s: field \"name\": expected a non-empty string of at most 47 characters, got 7",
             path);
    assert_string_equal(err, want);
    unlink(path);
}

static void test_unknown_fields_are_ignored(void **state)
{
    (void)state;
    cJSON *root = h100_json();
    cJSON_AddStringToObject(root, "future_field", "x");
    cJSON_AddNumberToObject(cJSON_GetObjectItem(root, "intra"), "hops", 2);
    char *text = cJSON_Print(root), err[512];
    HwProfile hw;
    assert_int_equal(profile_parse_json(text, "x", &hw, err, sizeof err), 0);
    assert_true(hw.peak[PREC_BF16] == 989e12);
    free(text);
    cJSON_Delete(root);
}

/* ---- round trip ----------------------------------------------------------- */

static void assert_profiles_equal(const HwProfile *a, const HwProfile *b)
{
    assert_string_equal(a->name, b->name);
    assert_string_equal(a->desc, b->desc);
    for (int p = 0; p < PREC_COUNT; p++)
        assert_true(a->peak[p] == b->peak[p]);
    assert_true(a->hbm_bytes == b->hbm_bytes && a->hbm_bw == b->hbm_bw);
    assert_int_equal(a->gpus_per_node, b->gpus_per_node);
    assert_true(a->intra.bw == b->intra.bw && a->intra.lat == b->intra.lat);
    assert_true(a->inter.bw == b->inter.bw && a->inter.lat == b->inter.lat);
    const EffCurve *ca[] = {&a->gemm_eff, &a->attn_eff, &a->mem_eff};
    const EffCurve *cb[] = {&b->gemm_eff, &b->attn_eff, &b->mem_eff};
    for (int k = 0; k < 3; k++) {
        assert_int_equal(ca[k]->n, cb[k]->n);
        for (int i = 0; i < ca[k]->n; i++)
            assert_true(ca[k]->pt[i].size == cb[k]->pt[i].size &&
                        ca[k]->pt[i].eff == cb[k]->pt[i].eff);
    }
    assert_true(a->act_bytes_per_layer == b->act_bytes_per_layer);
    assert_true(a->cuda_context_bytes == b->cuda_context_bytes);
    assert_true(a->alloc_frag == b->alloc_frag && a->nccl_buf_bytes == b->nccl_buf_bytes);
    assert_true(a->tp_overlap == b->tp_overlap && a->dp_overlap == b->dp_overlap &&
                a->pp_overlap == b->pp_overlap);
    assert_true(a->fail_per_gpu_hour == b->fail_per_gpu_hour);
    assert_true(a->ckpt_bw_per_node == b->ckpt_bw_per_node && a->restart_s == b->restart_s);
}

static void test_write_load_round_trip(void **state)
{
    (void)state;
    char dir[] = "/tmp/test_profiles_dir_XXXXXX";
    assert_non_null(mkdtemp(dir));
    char path[256], err[512];
    snprintf(path, sizeof path, "%s/p.json", dir);
    for (int i = 0; i < profile_builtin_count(); i++) {
        HwProfile a, b;
        assert_int_equal(profile_load_builtin(profile_builtin_name(i), &a, err, sizeof err), 0);
        /* values a fit would produce: not short decimals */
        a.gemm_eff.pt[1].eff = 1.0 / 3.0;
        a.intra.bw = 412345678901.23456;
        a.fail_per_gpu_hour = M_PI * 1e-5;
        if (profile_write_json(&a, path, err, sizeof err) != 0) {
            print_error("%s\n", err);
            fail();
        }
        assert_int_equal(profile_load_file(path, &b, err, sizeof err), 0);
        assert_profiles_equal(&a, &b);
    }
    /* overwrite in place leaves no temp file behind */
    char cmd[512];
    snprintf(cmd, sizeof cmd, "test $(ls -A %s | wc -l) -eq 1", dir);
    assert_int_equal(system(cmd), 0);
    unlink(path);
    rmdir(dir);

    HwProfile hw;
    assert_int_equal(profile_load_builtin("h100", &hw, err, sizeof err), 0);
    assert_int_equal(profile_write_json(&hw, "/nonexistent/dir/p.json", err, sizeof err), -1);
    assert_contains(err, "profile /nonexistent/dir/p.json: cannot create");
    char *text = profile_to_json(&hw);
    assert_non_null(text);
    assert_contains(text, "\"format\":\t\"ultraplan.profile/1\"");
    free(text);
}

/* ---- presets -------------------------------------------------------------- */

static int64_t params_of(const char *name, int tp)
{
    ModelSpec m;
    char err[1024];
    if (presets_find(name, &m, err, sizeof err) != 0) {
        print_error("%s\n", err);
        fail();
    }
    return spec_params(&m, tp, PARAMS_EXACT);
}

static void test_presets_are_valid(void **state)
{
    (void)state;
    char err[256];
    assert_int_equal(presets_count(), 39);
    assert_null(presets_get(39));
    assert_null(presets_source(-1));
    for (int i = 0; i < presets_count(); i++) {
        ModelSpec m = *presets_get(i);
        assert_int_equal(spec_validate(&m, err, sizeof err), 0);
        assert_memory_equal(&m, presets_get(i), sizeof m);   // nothing left to default
        assert_true(strlen(presets_source(i)) > 20);
        if (i < 25)   /* the GPT, Llama and Megatron families; Hub models may have a*d != h */
            assert_int_equal(spec_q_width(&m), m.h);
        for (const char *p = m.name; *p; p++)
            assert_true((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '-' ||
                        *p == '.');
        for (int j = 0; j < i; j++)
            assert_string_not_equal(m.name, presets_get(j)->name);
    }
}

/* Total and active parameters of the Hub presets against the published
 * figures (model cards, reports). Those are rounded to 3 significant digits
 * (±0.5 % at worst for "46.7B", ±1.5 % for "37B"), so each row has the
 * tolerance its rounding allows plus what the spec leaves out (q/k norms,
 * sinks: < 0.01 %) and the padding of V to 128 (Llama 4: 0.2 %). Embeddings
 * are counted, as the published totals do; the conventions that differ are
 * said per row. */
static void test_moe_preset_counts(void **state)
{
    (void)state;
    struct { const char *name; double total, active, tol; int emb; } rows[] = {
        {"mixtral-8x7b", 46.7e9, 12.9e9, 0.005, 0},
        {"mixtral-8x22b", 141e9, 39e9, 0.01, 0},
        {"qwen3-30b-a3b", 30.5e9, 3.3e9, 0.02, 0},     /* "3.3B": rounding is ±1.5 % */
        {"qwen3-235b-a22b", 235e9, 22e9, 0.01, 0},
        {"deepseek-v3", 671e9, 37e9, 0.015, 0},       /* without the MTP module (below) */
        {"gpt-oss-120b", 116.8e9, 5.1e9, 0.01, 1},    /* active without the input embedding (model card) */
        {"gpt-oss-20b", 20.91e9, 3.61e9, 0.002, 1},   /* likewise: 20.91B / 3.61B */
        {"llama4-maverick", 400e9, 17e9, 0.015, 0},
        {"kimi-k2", 1.04e12, 32.6e9, 0.015, 0},       /* the K2 report's 1.04T and 32.6B */
        {"mistral-7b", 7.24e9, 7.24e9, 0.001, 0},
        {"qwen2.5-7b", 7.61e9, 7.61e9, 0.001, 0},     /* q/k/v biases (0.3M) left out */
        {"qwen2.5-72b", 72.7e9, 72.7e9, 0.001, 0},
        {"qwen3-8b", 8.2e9, 8.2e9, 0.005, 0},
        {"qwen3-32b", 32.8e9, 32.8e9, 0.005, 0},
    };
    for (size_t i = 0; i < sizeof rows / sizeof *rows; i++) {
        ModelSpec m;
        char err[256];
        assert_int_equal(presets_find(rows[i].name, &m, err, sizeof err), 0);
        assert_int_equal(spec_validate(&m, err, sizeof err), 0);
        /* the published totals leave the MTP modules out */
        double mtp = (double)spec_mtp_params(&m), mtp_active = 0;
        if (mtp > 0)
            mtp_active = mtp - (double)m.mtp_layers * (m.experts - m.topk) * (double)spec_expert_params(&m);
        double total = (double)spec_params(&m, 1, PARAMS_EXACT) - mtp;
        double active = (double)spec_params_active(&m, 1, PARAMS_EXACT) - mtp_active;
        if (rows[i].emb)
            active -= (double)spec_padded_vocab(&m, 1) * m.h;
        if (fabs(total / rows[i].total - 1) > rows[i].tol || fabs(active / rows[i].active - 1) > rows[i].tol) {
            print_error("%s: total %.4gB (published %.4gB), active %.4gB (published %.4gB), tolerance %.1f%%\n",
                        rows[i].name, total / 1e9, rows[i].total / 1e9, active / 1e9, rows[i].active / 1e9,
                        100 * rows[i].tol);
            fail();
        }
        assert_true(spec_is_moe(&m) == (rows[i].total != rows[i].active));
    }
    /* DeepSeek-V3's 685B on the Hub: 671B + the MTP module (one MoE layer,
     * its 2h -> h projection and 3 norms: 11.6B) + the copies of the
     * embedding and head its checkpoint stores for it (2 V h = 1.85B) */
    ModelSpec d;
    char err[256];
    assert_int_equal(presets_find("deepseek-v3", &d, err, sizeof err), 0);
    assert_int_equal(spec_validate(&d, err, sizeof err), 0);
    double hub = (double)spec_params(&d, 1, PARAMS_EXACT) + 2.0 * (double)spec_padded_vocab(&d, 1) * d.h;
    assert_true(fabs(hub / 685e9 - 1) < 0.002);
    assert_int_equal(spec_moe_layers(&d), 58);
    assert_true(!spec_layer_is_moe(&d, 2) && spec_layer_is_moe(&d, 3) && spec_layer_is_moe(&d, 61));
    ModelSpec l4;
    assert_int_equal(presets_find("llama4-maverick", &l4, err, sizeof err), 0);
    assert_int_equal(spec_moe_layers(&l4), 24);
    assert_true(!spec_layer_is_moe(&l4, 0) && spec_layer_is_moe(&l4, 1) && !spec_layer_is_moe(&l4, 2));
}

static void test_preset_param_counts(void **state)
{
    (void)state;
    assert_int_equal(params_of("llama2-7b", 1), 6738415616LL);
    assert_int_equal(params_of("llama2-13b", 1), 13015864320LL);
    assert_int_equal(params_of("llama2-70b", 1), 68976648192LL);
    assert_int_equal(params_of("llama3.1-8b", 1), 8030261248LL);
    assert_int_equal(params_of("llama3.1-70b", 1), 70553706496LL);
    assert_int_equal(params_of("llama3.1-405b", 1), 405853388800LL);
    /* V = 50257 pads to 51200 at tp = 8 and to 50304 at tp = 1 */
    assert_int_equal(params_of("gpt3-175b", 8), 174615846912LL);
    assert_int_equal(params_of("gpt3-175b", 1), 174615846912LL - (51200 - 50304) * 12288LL);
    /* names are matched case-insensitively */
    assert_int_equal(params_of("GPT3-175B", 8), 174615846912LL);
    /* every preset lands within 10 % of the size in its name */
    static const struct { const char *name; double n; } sizes[] = {
        {"gpt3-125m", 125e6}, {"gpt3-350m", 350e6}, {"gpt3-760m", 760e6}, {"gpt3-1.3b", 1.3e9},
        {"gpt3-2.7b", 2.7e9}, {"gpt3-6.7b", 6.7e9}, {"gpt3-13b", 13e9}, {"mtnlg-530b", 530e9},
        {"megatron-1.7b", 1.7e9}, {"megatron-3.6b", 3.6e9}, {"megatron-7.5b", 7.5e9},
        {"megatron-18b", 18e9}, {"megatron-39b", 39e9}, {"megatron-76b", 76e9},
        {"megatron-145b", 145e9}, {"megatron-310b", 310e9}, {"megatron-530b", 530e9},
        {"megatron-1t", 1e12},
    };
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        double n = (double)params_of(sizes[i].name, 8);
        if (fabs(n / sizes[i].n - 1) > 0.10) {
            print_error("%s: %.4g parameters\n", sizes[i].name, n);
            fail();
        }
    }
}

static void test_presets_find_unknown(void **state)
{
    (void)state;
    ModelSpec m;
    char err[1024];
    assert_int_equal(presets_find("gpt4", &m, err, sizeof err), -1);
    assert_contains(err, "unknown model \"gpt4\"; known: gpt3-125m, ");
    assert_contains(err, "megatron-1t");
    assert_contains(err, presets_get(presets_count() - 1)->name);   // the whole list: the last preset too
    /* 512 bytes (the CLI's buffer) cannot hold every name: the list ends on a whole name and says how many
     * more there are, where it used to stop mid-list without a word (the MoE presets went missing) */
    char mid[512];
    assert_int_equal(presets_find("gpt4", &m, mid, sizeof mid), -1);
    assert_true(strlen(mid) < sizeof mid - 1);
    const char *more = strstr(mid, " more (`ultraplan models` lists them all)");
    assert_non_null(more);
    assert_string_equal(more + strlen(more) - 1, ")");
    int shown = 1;
    for (const char *p = strstr(mid, "known: "); p && p < more; p++)
        shown += *p == ',';
    int said = atoi(strrchr(mid, ',') + 5);   // ", and N more"
    assert_int_equal(shown - 1 + said, presets_count());
    char small[40];
    assert_int_equal(presets_find("gpt4", &m, small, sizeof small), -1);   // truncates safely
    assert_int_equal((int)strlen(small), 39);
}

static void expect_preset(double params, const char *name)
{
    ModelSpec m;
    char rule[512], err[256];
    if (presets_from_params(params, &m, rule, sizeof rule, err, sizeof err) != 0) {
        print_error("%g: %s\n", params, err);
        fail();
    }
    if (strcmp(m.name, name) != 0) {
        print_error("%g: got %s (%s), want %s\n", params, m.name, rule, name);
        fail();
    }
    assert_contains(rule, "preset ");
}

static void test_presets_from_params_picks_presets(void **state)
{
    (void)state;
    expect_preset(175e9, "gpt3-175b");
    expect_preset(174.6e9, "gpt3-175b");
    expect_preset(7e9, "llama2-7b");
    expect_preset(13e9, "llama2-13b");
    expect_preset(70e9, "llama2-70b");
    expect_preset(8e9, "llama3.1-8b");
    expect_preset(405e9, "llama3.1-405b");
    expect_preset(530e9, "mtnlg-530b");
    expect_preset(6.7e9, "gpt3-6.7b");
    expect_preset(1e12, "megatron-1t");
    expect_preset(1.32e9, "gpt3-1.3b");
}

static void expect_derived(double params)
{
    ModelSpec m;
    char rule[512], err[256];
    assert_int_equal(presets_from_params(params, &m, rule, sizeof rule, err, sizeof err), 0);
    assert_contains(rule, "derived");
    assert_contains(m.name, "custom-");
    assert_true(m.h % 128 == 0 && m.a * 128 == m.h && m.d_head == 128 && m.f == 4 * m.h);
    assert_true(m.vocab == 50257 && m.s == 2048 && m.mlp == MLP_GELU && m.tied && m.bias);
    double n = (double)spec_params(&m, 1, PARAMS_EXACT);
    if (fabs(n / params - 1) > 0.03) {
        print_error("%g: derived %.4g (%s)\n", params, n, rule);
        fail();
    }
    /* aspect ratio stays in the family's range */
    assert_true(m.h / m.L >= 20 && m.h / m.L <= 250);
}

static void test_presets_from_params_derives(void **state)
{
    (void)state;
    expect_derived(20e9);
    expect_derived(50e9);
    expect_derived(100e9);
    expect_derived(250e9);
    expect_derived(3e12);
    expect_derived(2.2e9);
    ModelSpec m;
    char rule[512], err[256];
    assert_int_equal(presets_from_params(20e9, &m, rule, sizeof rule, err, sizeof err), 0);
    assert_string_equal(m.name, "custom-20b");
    /* tiny and huge sizes still give a valid shape, or a clear error */
    assert_int_equal(presets_from_params(1e6, &m, rule, sizeof rule, err, sizeof err), 0);
    assert_int_equal(spec_validate(&m, err, sizeof err), 0);
    assert_int_equal(presets_from_params(1e15, &m, rule, sizeof rule, err, sizeof err), 0);
    assert_int_equal(spec_validate(&m, err, sizeof err), 0);
    assert_int_equal(presets_from_params(999e3, &m, rule, sizeof rule, err, sizeof err), -1);
    assert_contains(err, "out of range");
    assert_int_equal(presets_from_params(2e15, &m, rule, sizeof rule, err, sizeof err), -1);
    assert_int_equal(presets_from_params(NAN, &m, rule, sizeof rule, err, sizeof err), -1);
    assert_int_equal(presets_from_params(-7e9, &m, rule, sizeof rule, err, sizeof err), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_builtins_load_and_are_sane),
        cmocka_unit_test(test_builtin_datasheet_values),
        cmocka_unit_test(test_blackwell_ultra_values),
        cmocka_unit_test(test_builtin_files_cite_sources),
        cmocka_unit_test(test_aliases),
        cmocka_unit_test(test_bad_fields),
        cmocka_unit_test(test_bad_peaks),
        cmocka_unit_test(test_bad_curves),
        cmocka_unit_test(test_bad_text_and_files),
        cmocka_unit_test(test_unknown_fields_are_ignored),
        cmocka_unit_test(test_write_load_round_trip),
        cmocka_unit_test(test_presets_are_valid),
        cmocka_unit_test(test_preset_param_counts),
        cmocka_unit_test(test_presets_find_unknown),
        cmocka_unit_test(test_moe_preset_counts),
        cmocka_unit_test(test_presets_from_params_picks_presets),
        cmocka_unit_test(test_presets_from_params_derives),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
