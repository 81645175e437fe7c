/* test_extreme.c — extreme but legal inputs give finite answers, and the
 * illegal ones just beyond them give errors that name the flag.
 *
 * Each case goes through the shared flags exactly as `ultraplan predict`
 * takes them (getopt_long, args_handle, args_finish), then cost(), the JSON
 * document and the text report. Accepted cases must hold no NaN, no
 * infinity where a number is printed, and no null in the JSON (cJSON prints
 * null for NaN and Inf). The UBSan build (-DCMAKE_BUILD_TYPE=Asan) runs the
 * same cases for integer overflow.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "args.h"
#include "profile.h"
#include "report.h"

typedef struct {
    CliInputs in;
    Cost c;
    cJSON *json;       // the predict document
    char *text;        // the text report
    char err[512];
} Run;

static void run_free(Run *r)
{
    cJSON_Delete(r->json);
    free(r->text);
    r->json = NULL;
    r->text = NULL;
}

/* Parse a space-separated command line as predict does. 0 ok, -1 error in r->err. */
static int predict(const char *line, Run *r)
{
    memset(r, 0, sizeof *r);
    char buf[1024], *argv[64];
    int argc = 0;
    snprintf(buf, sizeof buf, "%s", line);
    argv[argc++] = "predict";
    for (char *t = strtok(buf, " "); t && argc < 63; t = strtok(NULL, " "))
        argv[argc++] = t;
    argv[argc] = NULL;
    args_init(&r->in);
    optind = 0;
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, "", args_common_options(), NULL)) != -1) {
        if (c == '?') {
            snprintf(r->err, sizeof r->err, "unknown option %s", argv[optind - 1]);
            return -1;
        }
        if (args_handle(&r->in, c, optarg, r->err, sizeof r->err) != 0)
            return -1;
    }
    if (args_finish(&r->in, true, r->err, sizeof r->err) != 0)
        return -1;
    cost(&r->in.sc.model, &r->in.sc.hw, &r->in.sc.layout, &r->in.sc.opts, &r->c);
    r->json = report_predict_json(&r->in.sc.model, &r->in.sc.hw, &r->in.sc.layout, &r->c, r->in.sc.model_rule);
    size_t n = 0;
    FILE *f = open_memstream(&r->text, &n);
    report_text(f, &r->in.sc.model, &r->in.sc.hw, &r->in.sc.layout, &r->c, r->in.sc.model_rule);
    fclose(f);
    return 0;
}

static void json_finite(const cJSON *j, const char *line)
{
    for (; j; j = j->next) {
        if (cJSON_IsNull(j))
            fail_msg("%s: JSON null at \"%s\"", line, j->string ? j->string : "[item]");
        if (cJSON_IsNumber(j) && !isfinite(j->valuedouble))
            fail_msg("%s: JSON %g at \"%s\"", line, j->valuedouble, j->string ? j->string : "[item]");
        json_finite(j->child, line);
    }
}

/* no "nan", "inf", "-nan" printed as a number ("inflight" is a header) */
static void text_finite(const char *text, const char *line)
{
    char *copy = strdup(text);
    for (char *t = strtok(copy, " \n\t(),;:"); t; t = strtok(NULL, " \n\t(),;:")) {
        const char *w = t[0] == '-' || t[0] == '+' ? t + 1 : t;
        if ((!strncmp(w, "nan", 3) || !strncmp(w, "inf", 3)) && strcmp(w, "inflight") != 0)
            fail_msg("%s: the text report prints \"%s\"", line, t);
    }
    free(copy);
}

static void cost_finite(const Cost *c, const char *line)
{
    double v[] = {c->peak_bytes, c->step_s, c->thr.mfu, c->thr.hfu, c->thr.tokens_per_s, c->thr.tflops_per_gpu,
                  c->thr.flops_per_token, c->tokens_per_step, c->train.tokens, c->train.steps, c->train.days,
                  c->train.gpu_hours, c->train.failures, c->train.fail_per_day, c->train.p_fail_day,
                  c->train.ckpt_bytes, c->train.ckpt_write_s, c->train.waste};
    for (size_t i = 0; i < sizeof v / sizeof *v; i++)
        if (!isfinite(v[i]))
            fail_msg("%s: cost value %zu is %g", line, i, v[i]);
    for (int k = 0; k < T_COUNT; k++)
        if (!isfinite(c->time[k]) || c->time[k] < 0)
            fail_msg("%s: time %s is %g", line, cost_time_name((TimeKind)k), c->time[k]);
    for (int s = 0; s < c->pp; s++)
        if (!isfinite(c->stage[s].total) || !isfinite(c->stage_mb_s[s]))
            fail_msg("%s: stage %d not finite", line, s);
    if (!(c->step_s > 0 && c->thr.mfu > 0))
        fail_msg("%s: step %g s, MFU %g", line, c->step_s, c->thr.mfu);
    if (isnan(c->train.days_with_failures) || c->train.days_with_failures < c->train.days)
        fail_msg("%s: days with failures %g below the ideal %g", line, c->train.days_with_failures, c->train.days);
}

/* An accepted line: finite everywhere. Leaves r filled for more checks. */
static void ok(const char *line, Run *r)
{
    if (predict(line, r) != 0)
        fail_msg("%s: refused: %s", line, r->err);
    cost_finite(&r->c, line);
    json_finite(r->json, line);
    text_finite(r->text, line);
}

/* A refused line whose error names `flag`. */
static void refused(const char *line, const char *flag)
{
    Run r;
    if (predict(line, &r) == 0)
        fail_msg("%s: accepted, expected an error naming %s", line, flag);
    if (!strstr(r.err, flag))
        fail_msg("%s: error \"%s\" does not name %s", line, r.err, flag);
    run_free(&r);
}

static double jnum(const cJSON *j, const char *sect, const char *key)
{
    const cJSON *s = cJSON_GetObjectItemCaseSensitive(j, sect);
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(s, key);
    if (!cJSON_IsNumber(v))
        fail_msg("no number %s.%s", sect, key);
    return v->valuedouble;
}

/* 1,000,000 GPUs: finite, and at Llama 3's failure rate with a profile's
 * restart time the job never finishes, said in words and as -1 in JSON */
static void test_million_gpus(void **st)
{
    (void)st;
    Run r;
    const char *line = "--model gpt3-175b --gpus 1000000 --tp 8 --pp 8 --gbs 31250";
    ok(line, &r);
    assert_int_equal(layout_gpus(&r.in.sc.layout), 1000000);
    assert_int_equal(r.in.sc.layout.dp, 15625);
    assert_true(r.c.train.fail_per_day > 100);
    if (!isfinite(r.c.train.days_with_failures)) {
        assert_true(jnum(r.json, "training", "days_with_failures") == -1);
        assert_non_null(strstr(r.text, "never finishes"));
    }
    run_free(&r);
    /* with near-perfect GPUs the failure-adjusted days come back */
    ok("--model gpt3-175b --gpus 1000000 --tp 8 --pp 8 --gbs 31250 --mtbf 1e12 --restart-time 60", &r);
    assert_true(isfinite(r.c.train.days_with_failures));
    assert_true(r.c.train.days_with_failures >= r.c.train.days);
    run_free(&r);
    refused("--model gpt3-175b --gpus 1000000 --tp 8 --pp 8 --gbs 2048", "global batch");
    /* the default batch scales with the GPUs: 1e6 x 1024 / 2048 = 500000 = 15625 x 2^5 (scenario.h) */
    ok("--model gpt3-175b --gpus 1000000 --tp 8 --pp 8", &r);
    assert_int_equal(r.in.sc.layout.gbs, 500000);
    run_free(&r);
    refused("--model gpt3-175b --gpus 1000000 --tp 8 --pp 7", "--gpus");
    refused("--model gpt3-125m --gpus 200000000", "beyond any cluster");
    refused("--model gpt3-125m --gpus 2147483647", "beyond any cluster");
    refused("--model gpt3-125m --gpus 2147483648", "--gpus");
}

/* 100T parameters: a derived shape, finite, doesn't fit 80 GB (said so) */
static void test_100t_params(void **st)
{
    (void)st;
    Run r;
    ok("--params 100T --gpus 1048576 --tp 8 --pp 64 --gbs 2048", &r);
    double n = (double)spec_params(&r.in.sc.model, 1, PARAMS_EXACT);
    assert_true(fabs(n / 1e14 - 1) < 0.01);
    assert_false(r.c.fits);
    assert_non_null(strstr(r.text, "DOES NOT FIT"));
    run_free(&r);
    ok("--params 100T --gpus 1000000 --tp 8 --pp 125 --gbs 8000 --zero 1 --recompute full", &r);
    run_free(&r);
    ok("--params 1000T --gpus 8", &r);   /* the top of --params: 20 Pt of tokens, ~2e11 days */
    assert_true(r.c.train.days > 1e9);
    assert_null(strstr(r.text, "e+03T"));
    run_free(&r);
    refused("--params 1001T", "--params");
    refused("--params 0.5M", "--params");
}

/* 1M-token sequences with context parallelism, flash or not */
static void test_million_token_seq(void **st)
{
    (void)st;
    Run r;
    ok("--model llama3.1-8b --seq 1048576 --cp 64 --tp 8 --gpus 512", &r);
    /* default batch: GPT-3's 2M tokens (8B is nearest its 6.7B) = 1.9 sequences -> 2 (scenario.h) */
    assert_int_equal(r.in.sc.layout.gbs, 2);
    assert_true(r.c.tokens_per_step == 2.0 * 1048576);
    run_free(&r);
    /* under the causal convention the FLOPs counted are the FLOPs flash runs: MFU <= 1 */
    ok("--model llama3.1-8b --seq 1048576 --cp 64 --tp 8 --gpus 512 --flops causal", &r);
    assert_true(r.c.thr.mfu <= 1.0);
    run_free(&r);
    ok("--model llama3.1-8b --seq 1048576 --cp 64 --tp 8 --gpus 512 --no-flash --recompute selective", &r);
    run_free(&r);
    ok("--layers 2 --hidden 128 --heads 2 --seq 100000000 --vocab 256 --cp 16 --gpus 16", &r);
    run_free(&r);
    refused("--model llama3.1-8b --seq 1048576 --cp 3 --gpus 3", "cp");
    refused("--layers 2 --hidden 128 --heads 2 --seq 100000001 --vocab 256", "seq");
}

/* one GPU: no communication at all */
static void test_one_gpu(void **st)
{
    (void)st;
    Run r;
    ok("--model gpt3-125m --gpus 1", &r);
    assert_int_equal(layout_gpus(&r.in.sc.layout), 1);
    assert_true(r.c.time[T_TP] == 0 && r.c.time[T_PP] == 0 && r.c.time[T_DP] == 0 && r.c.time[T_BUBBLE] == 0);
    assert_true(r.c.fits);
    run_free(&r);
    ok("--model gpt3-175b --gpus 1", &r);
    assert_false(r.c.fits);
    run_free(&r);
}

/* a vocabulary that no tp divides: padded, counted, never truncated */
static void test_vocab_padding(void **st)
{
    (void)st;
    Run r;
    ok("--model gpt3-175b --gpus 8 --tp 8 --vocab 50257", &r);
    assert_int_equal(spec_padded_vocab(&r.in.sc.model, 8), 51200);   /* multiple of 128*8 */
    run_free(&r);
    ok("--model gpt3-175b --gpus 8 --tp 8 --vocab 50257 --vocab-div 1", &r);
    assert_int_equal(spec_padded_vocab(&r.in.sc.model, 8), 50264);   /* multiple of 8 */
    run_free(&r);
    ok("--model gpt3-125m --gpus 4 --tp 4 --vocab 2147483647", &r);
    assert_true(spec_padded_vocab(&r.in.sc.model, 4) > 2147483647LL);
    run_free(&r);
}

/* the smallest model and the largest batch */
static void test_tiny_and_huge_batch(void **st)
{
    (void)st;
    Run r;
    ok("--layers 1 --hidden 1 --heads 1 --seq 1 --vocab 1 --gbs 1", &r);
    run_free(&r);
    ok("--layers 1 --hidden 1 --heads 1 --seq 1 --vocab 1 --gbs 1 --mlp swiglu --no-flash --precision fp32", &r);
    run_free(&r);
    ok("--model gpt3-125m --gpus 8 --gbs 2147483640", &r);
    assert_true(r.c.tokens_per_step == 2147483640.0 * 2048);   /* no int product */
    run_free(&r);
    ok("--model gpt3-125m --gpus 8 --gbs 2147483640 --mbs 268435455 --zero 3", &r);
    run_free(&r);
    refused("--model gpt3-125m --gbs 2147483648", "--gbs");
    refused("--model gpt3-125m --gbs 0", "--gbs");
}

/* --mtbf, --restart-time and --tokens at both ends */
static void test_failure_flags(void **st)
{
    (void)st;
    Run r;
    ok("--model gpt3-125m --gpus 8 --mtbf 1e-6", &r);
    assert_false(isfinite(r.c.train.days_with_failures));
    assert_true(jnum(r.json, "training", "days_with_failures") == -1);
    assert_non_null(strstr(r.text, "never finishes"));
    run_free(&r);
    ok("--model gpt3-125m --gpus 8 --mtbf 1e15 --restart-time 0", &r);
    assert_true(r.c.train.days_with_failures < r.c.train.days * 1.001);
    run_free(&r);
    ok("--model gpt3-125m --gpus 100000000 --gbs 100000000 --mtbf 1e-6 --restart-time 1e12 --tokens 1e30", &r);
    run_free(&r);
    ok("--model gpt3-175b --gpus 1024 --tp 8 --pp 8 --gbs 1536 --tokens 1e15", &r);
    assert_true(r.c.train.tokens == 1e15);
    run_free(&r);
    refused("--model gpt3-125m --mtbf 1e-7", "--mtbf");
    refused("--model gpt3-125m --mtbf 1e-300", "--mtbf");
    refused("--model gpt3-125m --mtbf 0", "--mtbf");
    refused("--model gpt3-125m --mtbf 1e16", "--mtbf");
    refused("--model gpt3-125m --restart-time 1e13", "--restart-time");
    refused("--model gpt3-125m --restart-time -1", "--restart-time");
    refused("--model gpt3-125m --tokens 1e31", "--tokens");
    refused("--model gpt3-125m --tokens 0", "--tokens");
}

/* products of flags that used to overflow an int (UBSan caught them) */
static void test_int_overflow(void **st)
{
    (void)st;
    refused("--model gpt3-125m --tp 65536 --pp 65536 --gpus 8", "--tp");
    refused("--model gpt3-125m --tp 65536 --pp 65536", "--tp");
    refused("--model gpt3-125m --tp 2048 --pp 2048 --cp 2048", "--cp");
    refused("--layers 2 --heads 65536 --head-dim 65536 --hidden 128 --seq 16 --vocab 10", "head-dim");
    refused("--layers 1 --hidden 600000000 --heads 1 --head-dim 1 --seq 16 --vocab 10", "--ffn");
    refused("--layers 1 --hidden 600000000 --heads 1 --head-dim 1 --seq 16 --vocab 10 --mlp swiglu", "--ffn");
    refused("--layers 1 --hidden 1000000000 --heads 100000000 --head-dim 1 --ffn 100000000 --seq 16 --vocab 10",
            "parameters");
    refused("--layers 1000000 --hidden 1000000 --heads 1 --seq 16 --vocab 10", "layers*hidden");
    /* the padding for a huge tp alone can push the count over */
    refused("--layers 1 --hidden 100000000 --heads 100000000 --head-dim 1 --ffn 100000000 --seq 16 --vocab 10 "
            "--tp 100000000 --gpus 100000000", "parameters");
}

/* 256 stages, the most a layout holds */
static void test_many_stages(void **st)
{
    (void)st;
    Run r;
    ok("--layers 256 --hidden 128 --heads 2 --seq 64 --vocab 100 --pp 256 --gbs 256 --vp 1", &r);
    assert_int_equal(r.c.pp, 256);
    run_free(&r);
    ok("--layers 512 --hidden 128 --heads 2 --seq 64 --vocab 100 --pp 256 --vp 2 --gbs 512", &r);
    run_free(&r);
    refused("--layers 512 --hidden 128 --heads 2 --seq 64 --vocab 100 --pp 257", "pp");
}

/* COSTMODEL.md §6 through the flags: 10,000 GPUs at Llama 3's rate
 * (4.736e-4 failures per GPU-day = MTBF 50,676 h per GPU): 4.74 failures a
 * day, P(>= 1 in a day) 99.12 %; the text shows both kinds of days on one
 * line, the checkpoint write time follows size / (nodes * storage bw), and
 * --restart-time moves the failure-adjusted days only. */
static void test_reliability_flags(void **st)
{
    (void)st;
    Run a, b;
    const char *base = "--model gpt3-175b --gpu a100-80g --gpus 10000 --tp 8 --pp 10 --gbs 1500 --mtbf 50675.68";
    char line[512];
    snprintf(line, sizeof line, "%s --restart-time 0", base);
    ok(line, &a);
    assert_true(fabs(a.c.train.fail_per_day / 4.736 - 1) < 1e-3);
    assert_true(fabs(a.c.train.p_fail_day / 0.9912 - 1) < 1e-3);
    assert_true(fabs(a.c.train.job_mtbf_s / 3600 / 5.07 - 1) < 2e-3);
    double nodes = ceil(10000.0 / a.in.sc.hw.gpus_per_node);
    assert_true(fabs(a.c.train.ckpt_write_s - a.c.train.ckpt_bytes / (nodes * a.in.sc.hw.ckpt_bw_per_node)) < 1e-9);
    assert_true(jnum(a.json, "training", "checkpoint_write_s") == a.c.train.ckpt_write_s);
    snprintf(line, sizeof line, "%s --restart-time 3600", base);
    ok(line, &b);
    assert_true(b.c.train.days == a.c.train.days);
    assert_true(b.c.train.days_with_failures > a.c.train.days_with_failures);
    char want[96];
    snprintf(want, sizeof want, "%.1f days ideal, %.1f days with failures", b.c.train.days,
             b.c.train.days_with_failures);
    if (!strstr(b.text, want))
        fail_msg("the text report lacks \"%s\":\n%s", want, b.text);
    run_free(&a);
    run_free(&b);
}

/* a plan file carries the same options: the same bounds, by field name;
 * and an empty file is an error, not a use-after-free (fuzz_plan found it) */
static void test_planfile_options(void **st)
{
    (void)st;
    Run r;
    ok("--model gpt3-125m --gpus 8", &r);
    char path[] = "/tmp/test_extreme_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    const char *field[] = {"mtbf_gpu_hours", "tokens", "restart_s"};
    double bad[] = {1e-300, 1e300, 1e300};
    char err[512];
    for (int i = 0; i < 3; i++) {
        cJSON *j = planfile_json(&r.in.sc.model, &r.in.sc.hw, &r.in.sc.layout, &r.in.sc.opts, &r.c);
        cJSON_ReplaceItemInObject(cJSON_GetObjectItem(j, "options"), field[i], cJSON_CreateNumber(bad[i]));
        char *text = cJSON_Print(j);
        cJSON_Delete(j);
        assert_int_equal(util_write_atomic(path, text, err, sizeof err), 0);
        free(text);
        PlanFile pf;
        assert_int_equal(planfile_read(path, &pf, err, sizeof err), -1);
        if (!strstr(err, field[i]))
            fail_msg("error \"%s\" does not name options.%s", err, field[i]);
    }
    FILE *f = fopen(path, "w");
    fclose(f);
    PlanFile pf;
    assert_int_equal(planfile_read(path, &pf, err, sizeof err), -1);
    assert_non_null(strstr(err, "not valid JSON"));
    f = fopen(path, "w");
    fputs("{\"format\": \"ultraplan.plan/1\"} trailing", f);
    fclose(f);
    assert_int_equal(planfile_read(path, &pf, err, sizeof err), -1);
    assert_non_null(strstr(err, "not valid JSON"));
    unlink(path);
    run_free(&r);
}

/* a profile may not hold numbers that overflow the model: a denormal link
 * bandwidth gave infinite then NaN step times (fuzz_profile found it) */
static void test_profile_ranges(void **st)
{
    (void)st;
    HwProfile hw, back;
    char err[512];
    assert_int_equal(profile_load_builtin("h100-sxm", &hw, err, sizeof err), 0);
    struct { double *field; double bad; const char *name; } cases[] = {
        {&hw.intra.bw, 2e-315, "intra.bw"}, {&hw.hbm_bw, 1e-300, "hbm_bw"}, {&hw.peak[PREC_BF16], 1e-300, "peak.bf16"},
        {&hw.ckpt_bw_per_node, 1e300, "ckpt_bw_per_node"}, {&hw.gemm_eff.pt[0].eff, 1e-300, "gemm_eff[0]"},
        {&hw.fail_per_gpu_hour, 1e200, "fail_per_gpu_hour"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        double keep = *cases[i].field;
        *cases[i].field = cases[i].bad;
        char *text = profile_to_json(&hw);
        *cases[i].field = keep;
        int rc = profile_parse_json(text, "x.json", &back, err, sizeof err);
        free(text);
        if (rc == 0 || !strstr(err, cases[i].name))
            fail_msg("%s = %g: %s", cases[i].name, cases[i].bad, rc == 0 ? "accepted" : err);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_million_gpus),     cmocka_unit_test(test_100t_params),
        cmocka_unit_test(test_million_token_seq), cmocka_unit_test(test_one_gpu),
        cmocka_unit_test(test_vocab_padding),    cmocka_unit_test(test_tiny_and_huge_batch),
        cmocka_unit_test(test_failure_flags),    cmocka_unit_test(test_int_overflow),
        cmocka_unit_test(test_many_stages),      cmocka_unit_test(test_reliability_flags),
        cmocka_unit_test(test_planfile_options), cmocka_unit_test(test_profile_ranges),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
