/* test_tui_layout.c — the TUI's pure parts: pane rectangles for terminal
 * sizes (80x24, 120x40, tiny ones, every size in a range), the key table,
 * knob editing with refusal, evaluation against cost(), the default batch
 * following the GPUs, the pin, panes drawn into a canvas with the error band
 * line, and the run.json reader. No terminal is needed. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "args.h"
#include "band.h"
#include "canvas.h"
#include "fmt.h"
#include "follow.h"
#include "layout.h"
#include "panes.h"
#include "planfile.h"
#include "profile.h"
#include "stacks.h"
#include "state.h"

/* ---- layout ---------------------------------------------------------------- */

static bool inside(const TuiRect *r, int rows, int cols)
{
    return r->y >= 0 && r->x >= 0 && r->y + r->h <= rows && r->x + r->w <= cols;
}

static bool overlap(const TuiRect *a, const TuiRect *b)
{
    if (!tui_rect_visible(a) || !tui_rect_visible(b))
        return false;
    return a->y < b->y + b->h && b->y < a->y + a->h && a->x < b->x + b->w && b->x < a->x + a->w;
}

/* Every visible rectangle on screen, none overlapping, inputs tall enough. */
static void check_layout(int rows, int cols, bool mon, TuiView view)
{
    TuiLayout l;
    tui_layout(rows, cols, mon, view, &l);
    if (l.too_small)
        return;
    const TuiRect *all[] = {&l.title, &l.inputs, &l.memory, &l.time, &l.plans, &l.monitor, &l.status};
    int n = (int)(sizeof all / sizeof *all);
    for (int i = 0; i < n; i++) {
        if (!tui_rect_visible(all[i]))
            continue;
        if (!inside(all[i], rows, cols)) {
            print_error("%dx%d: rect %d (%d,%d %dx%d) leaves the screen\n", cols, rows, i, all[i]->y, all[i]->x,
                        all[i]->h, all[i]->w);
            fail();
        }
        for (int j = i + 1; j < n; j++)
            if (overlap(all[i], all[j])) {
                print_error("%dx%d: rects %d and %d overlap\n", cols, rows, i, j);
                fail();
            }
    }
    /* every field has a row, except at the least sizes where the pane takes the whole column and scrolls */
    assert_true(l.inputs.h >= TUI_INPUTS_ROWS || (l.compact && l.inputs.h == rows - 2 && rows < 24));
    assert_true(l.memory.h >= 6);
    assert_int_equal(l.title.h, 1);
    assert_int_equal(l.status.y, rows - 1);
}

static void test_layout_80x24(void **unused)
{
    (void)unused;
    TuiLayout l;
    tui_layout(24, 80, false, VIEW_TIME, &l);
    assert_false(l.too_small);
    assert_true(l.compact);
    assert_true(tui_rect_visible(&l.inputs) && tui_rect_visible(&l.memory) && tui_rect_visible(&l.time));
    assert_false(tui_rect_visible(&l.plans));
    assert_int_equal(l.inputs.h, 22);
    assert_int_equal(l.memory.h + l.time.h, 22);
    assert_true(l.time.h >= 13);
    /* the view swaps the lower-right pane, same place */
    TuiLayout p;
    tui_layout(24, 80, false, VIEW_PLANS, &p);
    assert_true(tui_rect_visible(&p.plans));
    assert_false(tui_rect_visible(&p.time));
    assert_memory_equal(&p.plans, &l.time, sizeof p.plans);
    /* the run view needs --follow */
    tui_layout(24, 80, false, VIEW_MONITOR, &p);
    assert_true(tui_rect_visible(&p.time));
    tui_layout(24, 80, true, VIEW_MONITOR, &p);
    assert_true(tui_rect_visible(&p.monitor));
    for (int v = 0; v < VIEW_COUNT; v++) {
        check_layout(24, 80, false, (TuiView)v);
        check_layout(24, 80, true, (TuiView)v);
    }
}

static void test_layout_120x40(void **unused)
{
    (void)unused;
    TuiLayout l;
    tui_layout(40, 120, false, VIEW_TIME, &l);
    assert_false(l.too_small);
    assert_false(l.compact);
    assert_true(tui_rect_visible(&l.inputs) && tui_rect_visible(&l.memory) && tui_rect_visible(&l.time) &&
                tui_rect_visible(&l.plans));
    assert_false(tui_rect_visible(&l.monitor));
    assert_int_equal(l.inputs.w + l.memory.w, 120);
    assert_int_equal(l.inputs.h + l.time.h, 38);
    assert_int_equal(l.memory.h + l.plans.h, 38);
    tui_layout(40, 120, true, VIEW_TIME, &l);
    assert_true(tui_rect_visible(&l.monitor) && tui_rect_visible(&l.plans));
    check_layout(40, 120, false, VIEW_TIME);
    check_layout(40, 120, true, VIEW_TIME);
}

static void test_layout_tiny(void **unused)
{
    (void)unused;
    int sizes[][2] = {{0, 0}, {1, 1}, {5, 20}, {21, 80}, {24, 63}, {10, 200}, {200, 10}};
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
        TuiLayout l;
        tui_layout(sizes[i][0], sizes[i][1], true, VIEW_TIME, &l);
        assert_true(l.too_small);
        assert_false(tui_rect_visible(&l.inputs));
        assert_false(tui_rect_visible(&l.memory));
    }
    TuiLayout l;
    tui_layout(TUI_MIN_ROWS, TUI_MIN_COLS, false, VIEW_TIME, &l);
    assert_false(l.too_small);
}

static void test_layout_every_size(void **unused)
{
    (void)unused;
    for (int rows = TUI_MIN_ROWS; rows <= 80; rows++)
        for (int cols = TUI_MIN_COLS; cols <= 260; cols += 3)
            for (int v = 0; v < VIEW_COUNT; v++) {
                check_layout(rows, cols, false, (TuiView)v);
                check_layout(rows, cols, true, (TuiView)v);
            }
}

/* ---- state ------------------------------------------------------------------ */

/* 175B on 512 H100, tp 8 pp 8, as the command line would give it, with
 * --stack STACK when not NULL. */
static void inputs_175b_stack(CliInputs *in, const char *stack)
{
    char err[256];
    args_init(in);
    const struct option *o = args_common_options();
    struct { const char *name, *arg; } flags[] = {
        {"params", "175B"}, {"gpus", "512"}, {"tp", "8"}, {"pp", "8"}, {"stack", stack}};
    for (size_t i = 0; i < sizeof flags / sizeof *flags; i++) {
        if (!flags[i].arg)
            continue;
        int id = -1;
        for (int k = 0; o[k].name; k++)
            if (!strcmp(o[k].name, flags[i].name))
                id = o[k].val;
        assert_int_not_equal(id, -1);
        assert_int_equal(args_handle(in, id, flags[i].arg, err, sizeof err), 0);
    }
    if (args_finish(in, true, err, sizeof err) != 0) {
        print_error("%s\n", err);
        fail();
    }
}

static void inputs_175b(CliInputs *in) { inputs_175b_stack(in, NULL); }

static TuiState *new_state(void)
{
    CliInputs in;
    inputs_175b(&in);
    TuiState *st = malloc(sizeof *st);
    assert_non_null(st);
    state_init(st, &in.sc, 2.0);
    return st;
}

/* The state's numbers are cost() of the same inputs, nothing else. */
static void assert_cost_of_inputs(const TuiState *st)
{
    Cost *c = malloc(sizeof *c);
    Layout lo = st->in.layout;
    char err[256];
    assert_int_equal(layout_check(&lo, &st->in.model, &st->in.hw, err, sizeof err), 0);
    cost(&st->in.model, &st->in.hw, &lo, &st->in.opts, c);
    assert_true(c->step_s == st->cost.step_s);
    assert_true(c->peak_bytes == st->cost.peak_bytes);
    assert_true(c->thr.mfu == st->cost.thr.mfu);
    assert_true(c->train.days == st->cost.train.days);
    free(c);
}

static void test_key_table(void **unused)
{
    (void)unused;
    int n;
    const TuiKeyBinding *k = tui_keys(&n);
    assert_true(n > 10);
    bool seen[A_COUNT] = {false};
    for (int i = 0; i < n; i++) {
        assert_true(k[i].action > A_NONE && k[i].action < A_COUNT);
        seen[k[i].action] = true;
        for (int j = i + 1; j < n; j++)
            assert_int_not_equal(k[i].key, k[j].key);   /* one action per key */
        if (k[i].help)
            assert_non_null(k[i].name);
    }
    for (int a = A_NONE + 1; a < A_COUNT; a++)
        assert_true(seen[a]);                            /* every action has a key */
    assert_int_equal(tui_key_action('q'), A_QUIT);
    assert_int_equal(tui_key_action('?'), A_HELP);
    assert_int_equal(tui_key_action('7'), A_NONE);       /* digits type */
}

static void test_edit_gpus_and_layout(void **unused)
{
    (void)unused;
    TuiState *st = new_state();
    assert_int_equal(st->in.layout.dp, 8);
    assert_cost_of_inputs(st);
    double days512 = st->cost.train.days;
    /* + on GPUs doubles them, dp follows */
    st->sel = state_field_own(TF_GPUS);
    assert_int_equal(state_key(st, '+'), A_NONE);
    assert_int_equal(layout_gpus(&st->in.layout), 1024);
    assert_int_equal(st->in.layout.dp, 16);
    assert_cost_of_inputs(st);
    assert_true(st->cost.train.days < days512);
    /* typing a value */
    assert_int_equal(state_key(st, '2'), A_NONE);
    assert_true(st->editing);
    state_key(st, '5');
    state_key(st, '6');
    state_key(st, TK_ENTER);
    assert_false(st->editing);
    assert_int_equal(layout_gpus(&st->in.layout), 256);
    assert_int_equal(st->in.layout.dp, 4);
    /* a GPU count that does not divide is refused, state unchanged, reason given */
    Cost *before = malloc(sizeof *before);
    *before = st->cost;
    assert_int_equal(state_set(st, state_field_own(TF_GPUS), "100"), -1);
    assert_true(st->msg_error);
    assert_non_null(strstr(st->msg, "not a multiple of tp*pp*cp"));
    assert_int_equal(layout_gpus(&st->in.layout), 256);
    assert_true(before->step_s == st->cost.step_s);
    free(before);
    /* tp 16 divides 96 heads, tp 64 does not */
    assert_int_equal(state_set(st, state_field_knob(K_TP), "16"), 0);
    assert_int_equal(st->in.layout.dp, 2);
    assert_int_equal(state_set(st, state_field_own(TF_GPUS), "512"), 0);
    assert_int_equal(st->in.layout.dp, 4);
    assert_int_equal(state_set(st, state_field_knob(K_TP), "64"), -1);
    assert_non_null(strstr(st->msg, "does not divide heads"));
    assert_int_equal(st->bad_field, -1);   /* only keys mark the field */
    assert_int_equal(st->in.layout.tp, 16);
    assert_int_equal(state_set(st, state_field_own(TF_GPUS), "256"), 0);
    assert_int_equal(st->in.layout.dp, 2);
    /* dp is derived */
    assert_int_equal(state_step(st, state_field_knob(K_DP), +1), -1);
    /* pp skips values that do not divide the GPUs: 8 -> 16 (9..15 refused) */
    assert_int_equal(state_step(st, state_field_knob(K_PP), +1), 0);
    assert_int_equal(st->in.layout.pp, 16);
    assert_int_equal(st->in.layout.dp, 1);
    int sum = 0;
    for (int s = 0; s < st->in.layout.pp; s++)
        sum += st->in.layout.layers[s];
    assert_int_equal(sum, 96);
    assert_cost_of_inputs(st);
    /* recomputation and ZeRO cycle */
    assert_int_equal(state_set(st, state_field_knob(K_RECOMPUTE), "full"), 0);
    assert_int_equal(st->in.layout.full_rc[0], st->in.layout.layers[0]);
    assert_int_equal(state_set(st, state_field_knob(K_OPTIMIZER), "3"), -1);     /* ZeRO-3 with pp > 1 */
    assert_non_null(strstr(st->msg, "ZeRO-3"));
    assert_int_equal(state_set(st, state_field_knob(K_OPTIMIZER), "distopt"), 0);
    assert_cost_of_inputs(st);
    assert_int_equal(state_set(st, state_field_own(TF_MODEL), "nonsense"), -1);
    assert_int_equal(state_set(st, state_field_own(TF_MODEL), "llama2-70b"), -1);   /* tp 16 vs its 8 KV heads */
    assert_non_null(strstr(st->msg, "kv-heads"));
    assert_int_equal(state_set(st, state_field_knob(K_TP), "8"), 0);
    assert_int_equal(state_set(st, state_field_own(TF_MODEL), "llama2-70b"), 0);
    assert_string_equal(st->in.model.name, "llama2-70b");
    assert_int_equal(state_set(st, state_field_own(TF_GPU), "h200"), 0);
    assert_cost_of_inputs(st);
    free(st);
    /* the default global batch follows the GPUs (scenario.h): 175B at 512 GPUs, 3.2M tokens of 2048 ->
     * 2048; at 8192, 8192 x 1024 / 2048 = 4096 sequences; once set, it stays */
    st = new_state();
    assert_int_equal(st->in.layout.gbs, 2048);
    assert_int_equal(state_set(st, state_field_own(TF_GPUS), "8192"), 0);
    assert_int_equal(st->in.layout.gbs, 4096);
    assert_cost_of_inputs(st);
    assert_int_equal(state_set(st, state_field_knob(K_GBS), "2048"), 0);
    assert_int_equal(state_set(st, state_field_own(TF_GPUS), "16384"), 0);
    assert_int_equal(st->in.layout.gbs, 2048);
    free(st);
}

/* A GPU change keeps the --stack the layout names: the new profile gets the
 * stack applied, as scenario_finish applies it to the first one (it was
 * reloaded bare once, dropping the stack silently). */
static void test_gpu_keeps_stack(void **unused)
{
    (void)unused;
    CliInputs in;
    inputs_175b_stack(&in, "megatron-2021");
    TuiState *st = malloc(sizeof *st);
    assert_non_null(st);
    state_init(st, &in.sc, 2.0);
    assert_string_equal(st->in.hw.stack, "megatron-2021");
    assert_int_equal(state_set(st, state_field_own(TF_GPU), "a100-80g"), 0);
    assert_string_equal(st->in.hw.name, "a100-80g");
    assert_string_equal(st->in.hw.stack, "megatron-2021");
    /* the same profile as the command line gives: a100-80g with the stack over it */
    CliInputs want;
    inputs_175b_stack(&want, "megatron-2021");
    char err[256];
    HwProfile hw;
    assert_int_equal(profile_load_builtin("a100-80g", &hw, err, sizeof err), 0);
    assert_int_equal(stacks_apply(&hw, want.sc.layout.stack, err, sizeof err), 0);
    assert_true(hw.tp_overlap == st->in.hw.tp_overlap);
    assert_cost_of_inputs(st);
    Cost *c = malloc(sizeof *c);
    Layout lo = st->in.layout;
    assert_int_equal(layout_check(&lo, &st->in.model, &hw, err, sizeof err), 0);
    cost(&st->in.model, &hw, &lo, &st->in.opts, c);
    assert_true(c->step_s == st->cost.step_s);
    free(c);
    free(st);
}

/* The --stack row: a stack chosen in the TUI gives the profile the command
 * line's --stack gives (the bare GPU profile with the stack over it, not
 * over the stack before), and re-plans; back to megatron-lm is the bare
 * profile again. */
static void expect_hw_of(const TuiState *st, const char *gpu, const char *stack)
{
    char err[256];
    HwProfile hw;
    assert_int_equal(profile_load_builtin(gpu, &hw, err, sizeof err), 0);
    assert_int_equal(stacks_apply(&hw, stacks_index(stack), err, sizeof err), 0);
    assert_string_equal(st->in.hw.stack, hw.stack);
    assert_true(hw.tp_overlap == st->in.hw.tp_overlap && hw.dp_overlap == st->in.hw.dp_overlap);
    assert_memory_equal(hw.peak, st->in.hw.peak, sizeof hw.peak);
    assert_memory_equal(&hw.gemm_eff, &st->in.hw.gemm_eff, sizeof hw.gemm_eff);
    assert_memory_equal(&hw.attn_eff, &st->in.hw.attn_eff, sizeof hw.attn_eff);
    assert_memory_equal(&hw.mem_eff, &st->in.hw.mem_eff, sizeof hw.mem_eff);
    assert_true(hw.kernel_lat == st->in.hw.kernel_lat && hw.ce_fused == st->in.hw.ce_fused);
    assert_cost_of_inputs(st);
}

static void test_stack_row(void **unused)
{
    (void)unused;
    TuiState *st = new_state();
    TuiField sf = state_field_knob(K_STACK);
    assert_true(sf >= 0);
    assert_string_equal(state_field_label(sf), "stack");
    assert_true(state_field_editable(sf));
    char v[64];
    state_field_text(st, sf, v, sizeof v);
    assert_string_equal(v, "megatron-lm");
    unsigned gen = st->problem_gen;
    assert_int_equal(state_set(st, sf, "megatron-2021"), 0);
    assert_int_equal(st->in.layout.stack, stacks_index("megatron-2021"));
    assert_true(st->problem_gen != gen);   /* the planner searches again */
    expect_hw_of(st, "h100-sxm", "megatron-2021");
    /* one step on from it: the next stack, over the bare profile */
    int next = (stacks_index("megatron-2021") + 1) % STACK_BUILTIN_COUNT;
    assert_int_equal(state_step(st, sf, +1), 0);
    assert_int_equal(st->in.layout.stack, next);
    expect_hw_of(st, "h100-sxm", stacks_name(next));
    /* a GPU change keeps it; back to megatron-lm is the bare profile */
    assert_int_equal(state_set(st, state_field_own(TF_GPU), "a100-80g"), 0);
    expect_hw_of(st, "a100-80g", stacks_name(next));
    assert_int_equal(state_set(st, sf, "megatron-lm"), 0);
    expect_hw_of(st, "a100-80g", "megatron-lm");
    assert_int_equal(state_set(st, sf, "no-such-stack"), -1);
    assert_int_equal(st->in.layout.stack, 0);
    free(st);
}

static void test_pin(void **unused)
{
    (void)unused;
    TuiState *st = new_state();
    unsigned gen = st->problem_gen;
    assert_int_equal(state_key(st, 'p'), A_NONE);
    assert_true(st->pinned);
    char pin[64];
    state_field_pin_text(st, state_field_own(TF_GPUS), pin, sizeof pin);
    assert_string_equal(pin, "");
    assert_int_equal(state_set(st, state_field_own(TF_GPUS), "1024"), 0);
    assert_true(st->problem_gen != gen);     /* the planner re-runs on GPU changes */
    state_field_pin_text(st, state_field_own(TF_GPUS), pin, sizeof pin);
    assert_string_equal(pin, "512");
    assert_true(st->pin_cost.train.days > st->cost.train.days);
    gen = st->problem_gen;
    assert_int_equal(state_set(st, state_field_knob(K_MBS), "2"), 0);
    assert_true(st->problem_gen == gen);     /* ... not on layout knobs */
    state_key(st, 'p');
    assert_false(st->pinned);
    free(st);
}

static void test_load_plan(void **unused)
{
    (void)unused;
    TuiState *st = new_state();
    /* a plan with uneven stages and per-stage recomputation */
    TuiPlanRow *p = &st->plans[0];
    memset(p, 0, sizeof *p);
    p->layout = st->in.layout;
    p->layout.tp = 4;
    p->layout.pp = 4;
    p->layout.dp = 32;
    int layers[4] = {23, 25, 25, 23};
    for (int s = 0; s < 4; s++) {
        p->layout.layers[s] = layers[s];
        p->layout.full_rc[s] = s < 2 ? 5 : 0;
        p->layout.sel_rc[s] = 0;
    }
    for (int s = 4; s < LAYOUT_MAX_PP; s++)
        p->layout.layers[s] = p->layout.full_rc[s] = p->layout.sel_rc[s] = 0;
    st->n_plans = 1;
    st->focus = FOCUS_INPUTS;
    assert_int_equal(state_key(st, TK_TAB), A_NONE);
    assert_int_equal(st->focus, FOCUS_PLANS);
    assert_int_equal(state_key(st, TK_ENTER), A_NONE);
    assert_int_equal(st->in.layout.tp, 4);
    assert_int_equal(st->in.layout.layers[1], 25);
    assert_int_equal(st->in.layout.full_rc[1], 5);
    assert_true(st->rc_mixed);
    char v[64];
    state_field_text(st, state_field_knob(K_RECOMPUTE), v, sizeof v);
    assert_string_equal(v, "per-stage");
    assert_cost_of_inputs(st);
    /* a knob that keeps the split keeps the plan's recomputation */
    assert_int_equal(state_set(st, state_field_knob(K_MBS), "2"), 0);
    assert_int_equal(st->in.layout.full_rc[1], 5);
    /* changing pp re-splits evenly */
    assert_int_equal(state_set(st, state_field_knob(K_PP), "8"), 0);
    assert_false(st->rc_mixed);
    assert_int_equal(st->in.layout.layers[1], 12);
    free(st);
}

/* ---- panes ------------------------------------------------------------------ */

static bool canvas_has(const Canvas *cv, const char *text)
{
    char line[512];
    for (int y = 0; y < cv->rows; y++) {
        canvas_row_text(cv, y, line, sizeof line);
        if (strstr(line, text))
            return true;
    }
    return false;
}

static bool canvas_has_text_after_render(const TuiState *st, const char *text)
{
    Canvas cv;
    TuiLayout l;
    assert_int_equal(canvas_init(&cv, 40, 120), 0);
    tui_layout(40, 120, false, VIEW_TIME, &l);
    panes_render(st, &l, &cv);
    bool has = canvas_has(&cv, text);
    canvas_free(&cv);
    return has;
}

static void test_panes_render(void **unused)
{
    (void)unused;
    TuiState *st = new_state();
    int sizes[][2] = {{24, 80}, {40, 120}, {22, 64}, {60, 200}, {10, 30}};
    char want[64];
    snprintf(want, sizeof want, "%.2f %%", 100 * st->cost.thr.mfu);
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
        Canvas cv;
        assert_int_equal(canvas_init(&cv, sizes[i][0], sizes[i][1]), 0);
        TuiLayout l;
        tui_layout(cv.rows, cv.cols, false, VIEW_TIME, &l);
        panes_render(st, &l, &cv);
        if (l.too_small) {
            assert_true(canvas_has(&cv, "too small"));
        } else {
            assert_true(canvas_has(&cv, want));
            assert_true(canvas_has(&cv, "gpt3-175b"));
            assert_true(canvas_has(&cv, "peak"));
        }
        st->help = true;
        panes_render(st, &l, &cv);
        st->help = false;
        canvas_free(&cv);
    }
    /* fp8 on an H100: MFU is against the fp8 peak; the time pane also gives it against the bf16 peak */
    {
        Canvas c8;
        TuiLayout l8;
        assert_false(canvas_has_text_after_render(st, "vs bf16"));
        assert_int_equal(state_set(st, state_field_knob(K_PRECISION), "fp8"), 0);
        char w8[64];
        snprintf(w8, sizeof w8, "vs bf16 %.1f %%", 100 * cost_mfu_bf16_peak(&st->in.hw, &st->in.layout, &st->cost));
        assert_int_equal(canvas_init(&c8, 60, 200), 0);
        tui_layout(60, 200, false, VIEW_TIME, &l8);
        panes_render(st, &l8, &c8);
        if (!canvas_has(&c8, w8)) {
            char line[512];
            for (int yy = 0; yy < c8.rows; yy++) {
                canvas_row_text(&c8, yy, line, sizeof line);
                print_message("%s\n", line);
            }
            fail_msg("no \"%s\" in the time pane", w8);
        }
        canvas_free(&c8);
        assert_int_equal(state_set(st, state_field_knob(K_PRECISION), "bf16"), 0);
    }
    /* a layout that does not fit shows the overflow */
    assert_int_equal(state_set(st, state_field_knob(K_PP), "1"), 0);
    Canvas cv;
    assert_int_equal(canvas_init(&cv, 40, 120), 0);
    TuiLayout l;
    tui_layout(40, 120, false, VIEW_TIME, &l);
    panes_render(st, &l, &cv);
    assert_true(canvas_has(&cv, "OVER by"));
    assert_true(canvas_has(&cv, "!!!"));
    canvas_free(&cv);
    free(st);
}

/* At 64x22 the Inputs pane is short of its fields: it scrolls so the
 * selected field shows; the last fields, target and stack, cycle and
 * re-plan. */
static void test_inputs_scroll(void **unused)
{
    (void)unused;
    TuiState *st = new_state();
    TuiField tf = state_field_knob(K_TARGET), sf = state_field_knob(K_STACK);
    assert_int_equal(tf, state_field_count() - 2);
    assert_int_equal(sf, state_field_count() - 1);
    assert_true(TUI_INPUTS_ROWS > TUI_MIN_ROWS - 2);   /* the case this test is for */
    Canvas cv;
    TuiLayout l;
    assert_int_equal(canvas_init(&cv, TUI_MIN_ROWS, TUI_MIN_COLS), 0);
    tui_layout(cv.rows, cv.cols, false, VIEW_TIME, &l);
    panes_render(st, &l, &cv);
    assert_true(canvas_has(&cv, ">model"));
    assert_false(canvas_has(&cv, "target "));
    assert_false(canvas_has(&cv, "stack "));
    st->sel = sf;
    panes_render(st, &l, &cv);
    assert_true(canvas_has(&cv, ">stack"));
    assert_true(canvas_has(&cv, "megatron-lm"));
    assert_true(canvas_has(&cv, "target "));
    assert_false(canvas_has(&cv, "model        gpt3"));   /* scrolled off */
    canvas_free(&cv);
    unsigned gen = st->problem_gen;
    assert_int_equal(state_step(st, tf, +1), 0);
    assert_int_equal(st->in.layout.target, TARGET_ULTRAPLAN);
    assert_true(st->problem_gen != gen);   /* the planner searches again */
    gen = st->problem_gen;
    assert_int_equal(state_step(st, tf, +1), 0);   /* the CUDA executor's layouts */
    assert_int_equal(st->in.layout.target, TARGET_ULTRAPLAN_CUDA);
    assert_true(st->problem_gen != gen);
    gen = st->problem_gen;
    assert_int_equal(state_step(st, tf, +1), 0);   /* what torchtitan runs as exported */
    assert_int_equal(st->in.layout.target, TARGET_TORCHTITAN);
    assert_int_equal(st->in.layout.stack, stacks_index("torchtitan"));   /* the default stack follows it */
    assert_string_equal(st->in.hw.stack, "torchtitan");
    assert_true(st->problem_gen != gen);
    assert_int_equal(state_step(st, tf, +1), 0);   /* and round to megatron */
    assert_int_equal(st->in.layout.target, TARGET_MEGATRON);
    free(st);
}

/* The Time pane's 80 % band line: the band predict gives (band_of_cost of
 * the same inputs), the step's and MFU's, at the least size (64x22, its
 * short form), at 80x24 and 120x40 (the aligned form), pinned or not; it
 * follows an edit. */
static void expect_band(const TuiState *st, int rows, int cols, bool wide_form)
{
    Band b;
    assert_int_equal(band_of_cost(&st->in.model, &st->in.hw, &st->in.layout, &st->cost, &b), 0);
    assert_true(b.runs > 0);
    assert_true(st->band.step_lo == b.step_lo && st->band.step_hi == b.step_hi);
    assert_true(b.step_hi >= 10 && b.step_hi < 100);   /* one decimal: "20.0-31.4 s" */
    char step[64], mfu[64];
    snprintf(step, sizeof step, "%.1f-%.1f s", b.step_lo, b.step_hi);
    if (wide_form)
        snprintf(mfu, sizeof mfu, "MFU %.1f-%.1f %%", 100 * b.mfu_lo, 100 * b.mfu_hi);
    else
        snprintf(mfu, sizeof mfu, "MFU %.0f-%.0f%%", 100 * b.mfu_lo, 100 * b.mfu_hi);
    Canvas cv;
    assert_int_equal(canvas_init(&cv, rows, cols), 0);
    TuiLayout l;
    tui_layout(rows, cols, false, VIEW_TIME, &l);
    panes_render(st, &l, &cv);
    bool ok = canvas_has(&cv, step) && canvas_has(&cv, mfu) && canvas_has(&cv, wide_form ? "80% band" : "80%: ");
    if (!ok) {
        char line[512];
        for (int yy = 0; yy < cv.rows; yy++) {
            canvas_row_text(&cv, yy, line, sizeof line);
            print_message("%s\n", line);
        }
        fail_msg("%dx%d: no \"%s\" and \"%s\" on the Time pane", cols, rows, step, mfu);
    }
    canvas_free(&cv);
}

static void test_band_line(void **unused)
{
    (void)unused;
    TuiState *st = new_state();   /* 175B, 512 GPUs, tp 8 pp 8 */
    expect_band(st, TUI_MIN_ROWS, TUI_MIN_COLS, false);
    expect_band(st, 24, 80, true);
    expect_band(st, 40, 120, true);
    state_pin(st);
    expect_band(st, TUI_MIN_ROWS, TUI_MIN_COLS, false);   /* the band row has no difference column */
    assert_int_equal(state_set(st, state_field_knob(K_TP), "4"), 0);
    expect_band(st, 24, 80, true);
    free(st);
}

/* ---- run.json --------------------------------------------------------------- */

static void test_follow_parse(void **unused)
{
    (void)unused;
    TuiRun *run = malloc(sizeof *run);
    follow_init(run, "run.json");
    assert_int_equal(follow_parse(run, "{\"format\":\"ultraplan.run/1\",\"status\":\"running\",\"steps\":["
                                       "{\"step\":1,\"time_s\":2.5,\"loss\":10.9},"
                                       "{\"step\":2,\"step_s\":2.0,\"loss\":9.5,\"mfu\":0.41},"
                                       "{\"step\":3}]}"), 0);
    assert_true(run->loaded);
    assert_int_equal(run->steps, 3);
    assert_true(run->time_s[0] == 2.5 && run->time_s[1] == 2.0 && run->time_s[2] < 0);
    assert_true(run->mfu[1] == 0.41 && run->mfu[0] < 0);
    assert_string_equal(run->status, "running");
    /* a half-written file keeps the last good reading */
    assert_int_equal(follow_parse(run, "{\"steps\":[{\"time_s\":"), -1);
    assert_int_equal(run->steps, 3);
    assert_true(run->err[0] != 0);
    assert_int_equal(follow_parse(run, "{\"format\":\"ultraplan.plan/1\"}"), -1);
    assert_int_equal(follow_parse(run, "{\"steps\":5}"), -1);
    assert_int_equal(follow_parse(run, "{}"), 0);
    assert_int_equal(run->steps, 0);
    free(run);
}

/* The Run pane holds a run against the run's own plan or layout, not the
 * TUI's knobs, and states the error as compare does: (pred - meas) / meas. */
static void test_follow_predicts_the_run(void **unused)
{
    (void)unused;
    TuiState *st = new_state();   /* tp 8 pp 8 on 512 */
    Layout lo = st->in.layout;
    lo.tp = 4, lo.pp = 16, lo.dp = 8, lo.mbs = 2;
    for (int s = 0; s < LAYOUT_MAX_PP; s++)
        lo.layers[s] = lo.full_rc[s] = lo.sel_rc[s] = 0;
    char err[256];
    assert_int_equal(layout_check(&lo, &st->in.model, &st->in.hw, err, sizeof err), 0);
    Cost want;
    cost(&st->in.model, &st->in.hw, &lo, &st->in.opts, &want);
    assert_true(fabs(want.step_s - st->cost.step_s) > 1e-6 * want.step_s);   /* a different answer */
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "format", "ultraplan.run/1");
    cJSON *steps = cJSON_AddArrayToObject(j, "steps");
    cJSON *s1 = cJSON_CreateObject();
    cJSON_AddNumberToObject(s1, "step", 1);
    cJSON_AddNumberToObject(s1, "step_s", want.step_s / 1.25);   /* measured faster: the error is +25 % */
    cJSON_AddItemToArray(steps, s1);
    cJSON_AddItemToObject(j, "model", plan_model_json(&st->in.model));
    cJSON_AddItemToObject(j, "layout", plan_layout_json(&lo));
    char *text = cJSON_PrintUnformatted(j);
    follow_init(&st->run, "/nonexistent/run.json");
    assert_int_equal(follow_parse(&st->run, text), 0);
    assert_true(st->run.has_layout && !st->run.has_plan);
    Cost got;
    char what[96];
    state_run_predict(st, &got, what, sizeof what);
    assert_true(got.step_s == want.step_s);
    assert_non_null(strstr(what, "its layout"));
    Canvas cv;
    assert_int_equal(canvas_init(&cv, 40, 120), 0);
    TuiLayout l;
    tui_layout(40, 120, true, VIEW_MONITOR, &l);
    panes_render(st, &l, &cv);
    assert_true(canvas_has(&cv, "error +25.0%"));
    canvas_free(&cv);
    /* with the plan file it names, the plan's own prediction */
    char plan[] = "/tmp/test_tui_follow_plan_XXXXXX";
    int fd = mkstemp(plan);
    assert_true(fd >= 0);
    close(fd);
    Layout lp = lo;
    layout_set_recompute(&lp, RECOMPUTE_NONE);
    Cost cp;
    cost(&st->in.model, &st->in.hw, &lp, &st->in.opts, &cp);
    assert_int_equal(planfile_write(plan, &st->in.model, &st->in.hw, &lp, &st->in.opts, &cp, err, sizeof err), 0);
    cJSON_AddStringToObject(j, "plan", plan);
    free(text);
    text = cJSON_PrintUnformatted(j);
    assert_int_equal(follow_parse(&st->run, text), 0);
    assert_true(st->run.has_plan);
    state_run_predict(st, &got, what, sizeof what);
    assert_true(got.step_s == cp.step_s);
    assert_non_null(strstr(what, "the plan it ran"));
    unlink(plan);
    free(text);
    cJSON_Delete(j);
    free(st);
}

/* `s` asks before it overwrites a file, and says when the plan does not fit;
 * a TUI started without layout knobs opens on plan 1 once plans arrive. */
static void test_save_and_best(void **unused)
{
    (void)unused;
    TuiState *st = new_state();
    char path[] = "/tmp/test_tui_save_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, "mine\n", 5), 5);
    close(fd);
    snprintf(st->save_path, sizeof st->save_path, "%s", path);
    assert_int_equal(tui_key_action('s'), A_SAVE);
    state_save_key(st);
    assert_true(st->save_confirm && st->msg_error);
    assert_non_null(strstr(st->msg, "press s again"));
    FILE *f = fopen(path, "r");
    char buf[16] = "";
    assert_non_null(fgets(buf, sizeof buf, f));
    fclose(f);
    assert_string_equal(buf, "mine\n");          /* not yet */
    state_key(st, 'j');                           /* any other key keeps the file */
    assert_false(st->save_confirm);
    state_save_key(st);
    state_save_key(st);                           /* s, s: overwritten */
    char err[256];
    PlanFile pf;
    assert_int_equal(planfile_read(path, &pf, err, sizeof err), 0);
    assert_int_equal(pf.layout.tp, st->in.layout.tp);
    /* a plan that does not fit is saved with a warning */
    assert_int_equal(state_set(st, state_field_knob(K_MBS), "64"), 0);
    assert_false(st->cost.fits);
    state_save_key(st);
    state_save_key(st);
    assert_true(st->msg_error);
    assert_non_null(strstr(st->msg, "does NOT fit"));
    unlink(path);
    /* plans arriving: plan 1 is loaded only when asked for, and a knob the user set wins */
    st->n_plans = 1;
    st->plans[0].layout = st->in.layout;
    st->plans[0].layout.mbs = 1;
    st->load_best = true;
    state_plans_arrived(st);
    assert_int_equal(st->in.layout.mbs, 1);
    assert_false(st->load_best);
    st->load_best = true;
    assert_int_equal(state_set(st, state_field_knob(K_MBS), "2"), 0);
    assert_false(st->load_best);
    state_plans_arrived(st);
    assert_int_equal(st->in.layout.mbs, 2);
    free(st);
}

/* The panes' numbers carry units and say what they leave out (issue 17
 * item 19): stages not shown are counted in the title, the narrow legend
 * uses abbreviations, differences have units, the cost has the digits of
 * its difference. */
static void test_numbers_read(void **unused)
{
    (void)unused;
    TuiState *st = new_state();   /* 175B, 512 GPUs, tp 8 pp 8 */
    assert_int_equal(state_set(st, state_field_knob(K_TP), "2"), 0);
    assert_int_equal(state_set(st, state_field_knob(K_PP), "16"), 0);
    state_pin(st);
    assert_int_equal(state_set(st, state_field_knob(K_MBS), "2"), 0);
    Canvas cv;
    assert_int_equal(canvas_init(&cv, 24, 80), 0);
    TuiLayout l;
    tui_layout(24, 80, false, VIEW_TIME, &l);
    panes_render(st, &l, &cv);
    assert_true(canvas_has(&cv, "16 stages, 5 shown"));
    assert_true(canvas_has(&cv, "X=ovh"));
    assert_false(canvas_has(&cv, "X=ove"));
    canvas_free(&cv);
    assert_int_equal(canvas_init(&cv, 40, 120), 0);
    tui_layout(40, 120, false, VIEW_TIME, &l);
    panes_render(st, &l, &cv);
    assert_true(canvas_has(&cv, " GiB"));   /* the peak's difference */
    char money[32], want[48];
    snprintf(want, sizeof want, "$%s", util_si(state_cost_dollars(&st->cost, st->price), 4, money, sizeof money));
    assert_true(canvas_has(&cv, want));
    canvas_free(&cv);
    free(st);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_layout_80x24),
        cmocka_unit_test(test_layout_120x40),
        cmocka_unit_test(test_layout_tiny),
        cmocka_unit_test(test_layout_every_size),
        cmocka_unit_test(test_key_table),
        cmocka_unit_test(test_edit_gpus_and_layout),
        cmocka_unit_test(test_pin),
        cmocka_unit_test(test_gpu_keeps_stack),
        cmocka_unit_test(test_stack_row),
        cmocka_unit_test(test_load_plan),
        cmocka_unit_test(test_panes_render),
        cmocka_unit_test(test_band_line),
        cmocka_unit_test(test_inputs_scroll),
        cmocka_unit_test(test_follow_parse),
        cmocka_unit_test(test_follow_predicts_the_run),
        cmocka_unit_test(test_save_and_best),
        cmocka_unit_test(test_numbers_read),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
