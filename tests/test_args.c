/* test_args.c — size strings and the shared flags of predict/plan/tui. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "args.h"
#include "knobs.h"
#include "presets.h"

static void test_counts(void **st)
{
    (void)st;
    double v;
    assert_int_equal(util_parse_count("175B", &v), 0);
    assert_true(v == 175e9);
    assert_int_equal(util_parse_count("1.5T", &v), 0);
    assert_true(v == 1.5e12);
    assert_int_equal(util_parse_count("4M", &v), 0);
    assert_true(v == 4e6);
    assert_int_equal(util_parse_count("7e9", &v), 0);
    assert_true(v == 7e9);
    assert_int_equal(util_parse_count("300b", &v), 0);
    assert_true(v == 300e9);
    const char *bad[] = {"", "B", "abc", "-5", "12X", "1e999", "nan", "inf", "5BB", "1.2.3"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        if (util_parse_count(bad[i], &v) != -1)
            fail_msg("\"%s\" was accepted as %g", bad[i], v);
}

static void test_bytes(void **st)
{
    (void)st;
    double v;
    assert_int_equal(util_parse_bytes("80GiB", &v), 0);
    assert_true(v == 80.0 * 1073741824.0);
    assert_int_equal(util_parse_bytes("80GB", &v), 0);
    assert_true(v == 80e9);
    assert_int_equal(util_parse_bytes("512MiB", &v), 0);
    assert_true(v == 512.0 * 1048576);
    assert_int_equal(util_parse_bytes("100B", &v), 0);
    assert_true(v == 100);
    assert_int_equal(util_parse_bytes("80GiX", &v), -1);
    assert_int_equal(util_parse_bytes("-1GiB", &v), -1);
}

static void test_ints(void **st)
{
    (void)st;
    int v;
    assert_int_equal(util_parse_int("512", &v), 0);
    assert_int_equal(v, 512);
    assert_int_equal(util_parse_int("16K", &v), 0);
    assert_int_equal(v, 16000);
    assert_int_equal(util_parse_int("1.5", &v), -1);
    assert_int_equal(util_parse_int("3e10", &v), -1);
}

static int handle(CliInputs *in, const char *name, const char *arg, char *err)
{
    const struct option *o = args_common_options();
    for (; o->name; o++)
        if (!strcmp(o->name, name))
            return args_handle(in, o->val, arg, err, 256);
    fail_msg("no option --%s", name);
    return -1;
}

static void test_flags(void **st)
{
    (void)st;
    CliInputs in;
    char err[256];
    args_init(&in);
    assert_int_equal(handle(&in, "tp", "0", err), -1);
    assert_non_null(strstr(err, "--tp: expected a whole number >= 1, got \"0\""));
    assert_int_equal(handle(&in, "zero", "4", err), -1);
    assert_non_null(strstr(err, "--zero"));
    assert_int_equal(handle(&in, "recompute", "some", err), -1);
    assert_non_null(strstr(err, "none, selective or full"));
    assert_int_equal(handle(&in, "zero", "1", err), 0);
    assert_int_equal(handle(&in, "dist-opt", NULL, err), -1);
    assert_non_null(strstr(err, "exclude each other"));

    /* a full run through finish: preset, gpus -> dp */
    args_init(&in);
    assert_int_equal(handle(&in, "model", "gpt3-175b", err), 0);
    assert_int_equal(handle(&in, "gpu", "a100-80g", err), 0);
    assert_int_equal(handle(&in, "gpus", "1024", err), 0);
    assert_int_equal(handle(&in, "tp", "8", err), 0);
    assert_int_equal(handle(&in, "pp", "8", err), 0);
    assert_int_equal(handle(&in, "gbs", "1536", err), 0);
    assert_int_equal(args_finish(&in, true, err, sizeof err), 0);
    assert_int_equal(in.sc.layout.dp, 16);
    assert_int_equal(in.sc.layout.layers[0], 12);

    /* gpus that do not divide */
    args_init(&in);
    handle(&in, "model", "gpt3-175b", err);
    handle(&in, "gpus", "1000", err);
    handle(&in, "tp", "8", err);
    handle(&in, "pp", "16", err);
    assert_int_equal(args_finish(&in, true, err, sizeof err), -1);
    assert_non_null(strstr(err, "--gpus 1000 is not a multiple of tp*pp*cp = 8*16*1 = 128"));

    /* no model at all */
    args_init(&in);
    handle(&in, "layers", "4", err);
    assert_int_equal(args_finish(&in, true, err, sizeof err), -1);
    assert_non_null(strstr(err, "missing --hidden"));

    /* explicit shape */
    args_init(&in);
    handle(&in, "layers", "4", err);
    handle(&in, "hidden", "256", err);
    handle(&in, "heads", "4", err);
    handle(&in, "seq", "128", err);
    handle(&in, "vocab", "256", err);
    handle(&in, "gbs", "8", err);
    assert_int_equal(args_finish(&in, true, err, sizeof err), 0);
    assert_int_equal(in.sc.model.f, 1024);
    assert_int_equal(in.sc.model.d_head, 64);

    /* unknown GPU */
    args_init(&in);
    handle(&in, "params", "7B", err);
    handle(&in, "gpu", "v100", err);
    assert_int_equal(args_finish(&in, true, err, sizeof err), -1);
    assert_non_null(strstr(err, "v100"));
}

static void test_default_gbs(void **st)
{
    (void)st;
    /* 175B: GPT-3's 3.2M tokens = 1562.5 sequences of 2048 -> 2^11; of 4096 -> 781 -> 2^10; of 8192 -> 2^9
     * (scenario.h; test_planner.c works through the GPU-count part) */
    ModelSpec m;
    char err[256];
    assert_int_equal(presets_find("gpt3-175b", &m, err, sizeof err), 0);
    assert_int_equal(scenario_default_gbs(&m, 0), 2048);
    m.s = 4096;
    assert_int_equal(scenario_default_gbs(&m, 0), 1024);
    m.s = 8192;
    assert_int_equal(scenario_default_gbs(&m, 0), 512);
}

/* Every knob's help is printed whole, with its default or "(searched unless
 * given)": the lines were built in a 256-byte buffer that cut --cp-comm's
 * (274 characters) mid-word, and the text in a fixed 16 KiB one. */
static void test_help_whole(void **st)
{
    (void)st;
    const char *modes[2] = {args_help(ARGS_HELP_PREDICT), args_help(ARGS_HELP_SEARCH)};
    int long_ones = 0;
    for (int i = 0; i < KNOB_COUNT; i++) {
        const Knob *k = knob_get((KnobId)i);
        if (!k->flag || !k->help)
            continue;
        long_ones += strlen(k->help) > 255;
        char line[1200];
        for (int md = 0; md < 2; md++) {
            if (md == 1 && k->searched)
                snprintf(line, sizeof line, "%s (searched unless given)\n", k->help);
            else if (k->dflt)
                snprintf(line, sizeof line, "%s (default %s)\n", k->help, k->dflt);
            else
                snprintf(line, sizeof line, "%s\n", k->help);
            if (!strstr(modes[md], line)) {
                print_error("--%s: help line not printed whole: %s", k->flag, line);
                fail();
            }
        }
    }
    assert_true(long_ones >= 1);   // the case that was cut is still in the table
    const char *skip[] = {"tp", NULL};
    const char *ex = args_help_except(ARGS_HELP_PREDICT, skip);
    assert_null(strstr(ex, "\n  --tp N "));
    assert_non_null(strstr(ex, "--fp8-recipe"));
    assert_int_equal((int)strlen(ex) + 1 < (int)strlen(modes[0]), 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_counts),
        cmocka_unit_test(test_bytes),
        cmocka_unit_test(test_ints),
        cmocka_unit_test(test_flags),
        cmocka_unit_test(test_default_gbs),
        cmocka_unit_test(test_help_whole),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
