/* test_knobs.c — the knob table is the one description of every layout and
 * model-shape knob: each row reaches the parser, --help, plan.json (both
 * ways) and the TUI, and nothing else describes a knob on the side. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "knobs.h"
#include "planfile.h"
#include "state.h"

static void test_rows(void **st)
{
    (void)st;
    for (int i = 0; i < KNOB_COUNT; i++) {
        const Knob *k = knob_get((KnobId)i);
        assert_non_null(k);
        assert_int_equal(k->id, i);            /* a row for every id, at its index */
        assert_non_null(k->name);
        if (k->flag)
            assert_non_null(k->help);
        if (k->type == KNOB_ENUM) {
            assert_true(k->count > 1);
            for (int v = 0; v < k->count; v++) {   /* names round-trip */
                int back = -1;
                assert_int_equal(k->value_parse(k->value_name(v), &back), 0);
                assert_int_equal(back, v);
            }
        }
        for (int j = 0; j < i; j++) {   /* no two rows share a flag, a key or a column */
            const Knob *o = knob_get((KnobId)j);
            if (k->flag && o->flag)
                assert_string_not_equal(k->flag, o->flag);
            if (k->json && o->json && k->group == o->group)
                assert_string_not_equal(k->json, o->json);
            if (k->csv && o->csv)
                assert_string_not_equal(k->csv, o->csv);
        }
    }
}

/* Every flag of the table is a getopt option of the shared parser and is in --help. */
static void test_parser_and_help(void **st)
{
    (void)st;
    const struct option *o = args_common_options();
    const char *help = args_common_help();
    for (int i = 0; i < KNOB_COUNT; i++) {
        const Knob *k = knob_get((KnobId)i);
        const char *names[2] = {k->flag, k->neg_flag};
        for (int n = 0; n < 2; n++) {
            if (!names[n])
                continue;
            int found = 0;
            for (int j = 0; o[j].name; j++)
                found += !strcmp(o[j].name, names[n]);
            if (found != 1)
                fail_msg("--%s is an option %d times", names[n], found);
            char needle[64];
            snprintf(needle, sizeof needle, "--%s", names[n]);
            if (!strstr(help, needle))
                fail_msg("--help does not list %s", needle);
        }
    }
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

/* A value set through a knob's flag comes back out of plan.json. */
static void test_flag_to_json(void **st)
{
    (void)st;
    CliInputs in;
    char err[256];
    args_init(&in);
    const char *flags[][2] = {{"model", "llama2-7b"}, {"gpus", "64"}, {"tp", "2"},         {"pp", "4"},
                              {"vp", "2"},           {"mbs", "2"},  {"gbs", "512"},        {"zero", "1"},
                              {"precision", "fp16"}, {"flops", "causal"}, {"no-flash", NULL}, {"no-grad-fp32", NULL},
                              {"no-overlap-grad-reduce", NULL},
                              {"kv-heads", "8"},     {"seq", "2048"}};
    for (size_t i = 0; i < sizeof flags / sizeof *flags; i++)
        if (handle(&in, flags[i][0], flags[i][1], err) != 0)
            fail_msg("--%s %s: %s", flags[i][0], flags[i][1] ? flags[i][1] : "", err);
    assert_int_equal(args_finish(&in, true, err, sizeof err), 0);
    assert_true(in.sc.fixed & FIX_TP && in.sc.fixed & FIX_OPT && in.sc.fixed & FIX_FLASH);
    cJSON *lj = plan_layout_json(&in.sc.layout), *mj = plan_model_json(&in.sc.model);
    assert_int_equal(cJSON_GetObjectItem(lj, "tp")->valueint, 2);
    assert_int_equal(cJSON_GetObjectItem(lj, "dp")->valueint, 8);
    assert_int_equal(cJSON_GetObjectItem(lj, "microbatches")->valueint, 512 / (8 * 2));
    assert_string_equal(cJSON_GetObjectItem(lj, "optimizer")->valuestring, "zero1");
    assert_string_equal(cJSON_GetObjectItem(lj, "precision")->valuestring, "fp16");
    assert_string_equal(cJSON_GetObjectItem(lj, "flops")->valuestring, "causal");
    assert_true(cJSON_IsFalse(cJSON_GetObjectItem(lj, "flash")));
    assert_true(cJSON_IsFalse(cJSON_GetObjectItem(lj, "grad_fp32")));
    assert_true(cJSON_IsFalse(cJSON_GetObjectItem(lj, "overlap_grad_reduce")));
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(lj, "stage_layers")), 4);
    assert_int_equal(cJSON_GetObjectItem(mj, "kv_heads")->valueint, 8);
    assert_int_equal(cJSON_GetObjectItem(mj, "head_dim")->valueint, 128);   /* derived: 4096 / 32 */
    Layout back;
    ModelSpec mback;
    assert_int_equal(plan_parse_layout(lj, "t", &back, err, sizeof err), 0);
    assert_int_equal(plan_parse_model(mj, "t", &mback, err, sizeof err), 0);
    assert_memory_equal(&back, &in.sc.layout, sizeof back);
    assert_int_equal(mback.g, 8);
    assert_int_equal(mback.d_head, 128);
    /* a knob missing from the file is named */
    cJSON_DeleteItemFromObject(lj, "vp");
    assert_int_equal(plan_parse_layout(lj, "t.json", &back, err, sizeof err), -1);
    assert_non_null(strstr(err, "t.json: field \"layout.vp\""));
    cJSON_Delete(lj);
    cJSON_Delete(mj);
}

/* KNOB_DOUBLE: --moe-imbalance and --capacity-factor parse as numbers with
 * their range, go into plan.json as JSON numbers and back, and are CSV
 * columns of measured runs. */
static void test_double_knobs(void **st)
{
    (void)st;
    const Knob *imb = knob_get(K_MOE_IMBALANCE), *cap = knob_get(K_CAPACITY_FACTOR);
    assert_int_equal(imb->type, KNOB_DOUBLE);
    assert_int_equal(cap->type, KNOB_DOUBLE);
    assert_ptr_equal(knob_by_csv("moe_imbalance"), imb);
    assert_ptr_equal(knob_by_csv("capacity_factor"), cap);
    static const char *const csv_names[] = {"experts", "topk", "moe_ffn", "shared_ffn", "moe_layer_freq",
                                            "moe_first_dense", "capacity_factor", "mtp_layers", "attn",
                                            "q_lora_rank", "kv_lora_rank", "qk_nope_dim", "qk_rope_dim",
                                            "v_head_dim", "ep", "etp", "head_dim"};
    for (size_t i = 0; i < sizeof csv_names / sizeof *csv_names; i++)   /* the MoE corpus' columns */
        if (!knob_by_csv(csv_names[i]))
            fail_msg("no knob has the CSV column %s", csv_names[i]);
    double v = 0;
    char err[256];
    assert_int_equal(knob_parse_double(imb, "1.25", &v, NULL, err, sizeof err), 0);
    assert_true(v == 1.25);
    assert_int_equal(knob_parse_double(imb, "65", &v, NULL, err, sizeof err), -1);
    assert_non_null(strstr(err, "--moe-imbalance: expected a number from 1 to 64"));
    assert_int_equal(knob_parse_double(cap, "nan", &v, NULL, err, sizeof err), -1);
    assert_int_equal(knob_parse_double(cap, "1.5x", &v, NULL, err, sizeof err), -1);
    assert_non_null(strstr(err, "--capacity-factor"));
    char buf[32];
    knob_format_double(1.2, buf, sizeof buf);
    assert_string_equal(buf, "1.2");

    CliInputs in;
    args_init(&in);
    const char *flags[][2] = {{"model", "mixtral-8x7b"}, {"gpus", "64"}, {"ep", "8"},
                              {"moe-imbalance", "1.35"},   {"capacity-factor", "1.25"}};
    for (size_t i = 0; i < sizeof flags / sizeof *flags; i++)
        if (handle(&in, flags[i][0], flags[i][1], err) != 0)
            fail_msg("--%s %s: %s", flags[i][0], flags[i][1], err);
    assert_int_equal(args_finish(&in, true, err, sizeof err), 0);
    assert_true(in.sc.layout.moe_imbalance == 1.35);
    assert_true(in.sc.model.capacity_factor == 1.25);   /* given over the preset: kept */
    cJSON *lj = plan_layout_json(&in.sc.layout), *mj = plan_model_json(&in.sc.model);
    assert_true(cJSON_IsNumber(cJSON_GetObjectItem(lj, "moe_imbalance")));
    assert_true(cJSON_GetObjectItem(mj, "capacity_factor")->valuedouble == 1.25);
    Layout back;
    ModelSpec mback;
    assert_int_equal(plan_parse_layout(lj, "t", &back, err, sizeof err), 0);
    assert_int_equal(plan_parse_model(mj, "t", &mback, err, sizeof err), 0);
    assert_true(back.moe_imbalance == 1.35);
    assert_true(mback.capacity_factor == 1.25);
    /* absent from an older plan file: dropless and the default imbalance */
    cJSON_DeleteItemFromObject(lj, "moe_imbalance");
    cJSON_DeleteItemFromObject(mj, "capacity_factor");
    assert_int_equal(plan_parse_layout(lj, "t", &back, err, sizeof err), 0);
    assert_int_equal(plan_parse_model(mj, "t", &mback, err, sizeof err), 0);
    assert_true(back.moe_imbalance == 0 && mback.capacity_factor == 0);
    /* a string where a number belongs is named */
    cJSON_AddStringToObject(lj, "moe_imbalance", "high");
    assert_int_equal(plan_parse_layout(lj, "t.json", &back, err, sizeof err), -1);
    assert_non_null(strstr(err, "layout.moe_imbalance"));
    cJSON_Delete(lj);
    cJSON_Delete(mj);
    /* out of range on the command line */
    args_init(&in);
    assert_int_equal(handle(&in, "moe-imbalance", "0.5x", err), -1);
}

/* Every knob with a TUI row is a row of the Inputs pane, labelled by the
 * table, in the table's row order, between the TUI's own rows. */
static void test_tui_rows(void **st)
{
    (void)st;
    int last = -1;
    for (int i = 0; i < KNOB_COUNT; i++) {
        const Knob *k = knob_get((KnobId)i);
        TuiField f = state_field_knob(k->id);
        if (!k->tui_label) {
            assert_int_equal(f, -1);
            continue;
        }
        assert_true(f >= 0 && f < state_field_count());
        assert_string_equal(state_field_label(f), k->tui_label);
        (void)last;
    }
    for (int f = 1; f < state_field_count(); f++) {   /* sorted, no duplicates */
        int a = -1, b = -1;
        for (int i = 0; i < KNOB_COUNT; i++) {
            if (state_field_knob((KnobId)i) == f - 1) a = knob_get((KnobId)i)->tui_row;
            if (state_field_knob((KnobId)i) == f) b = knob_get((KnobId)i)->tui_row;
        }
        if (a >= 0 && b >= 0)
            assert_true(a < b);
    }
    assert_true(state_field_own(TF_MODEL) == 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rows),
        cmocka_unit_test(test_parser_and_help),
        cmocka_unit_test(test_flag_to_json),
        cmocka_unit_test(test_double_knobs),
        cmocka_unit_test(test_tui_rows),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
