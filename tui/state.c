/* state.c — the TUI's inputs, knob editing, evaluation and pin (see state.h). */
#include "state.h"

#include <ctype.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "presets.h"
#include "profile.h"
#include "fileio.h"
#include "fmt.h"
#include "planfile.h"

/* ---- the key table ---- */

/* Rows with a NULL help are aliases: bound, but not listed again in help. */
static const TuiKeyBinding keys[] = {
    {TK_UP, "Up k", A_UP, "previous field / plan"},
    {'k', NULL, A_UP, NULL},
    {TK_DOWN, "Down j", A_DOWN, "next field / plan"},
    {'j', NULL, A_DOWN, NULL},
    {TK_RIGHT, "Right +", A_INC, "next value of the field (refused with the reason)"},
    {'+', NULL, A_INC, NULL},
    {'=', NULL, A_INC, NULL},
    {TK_LEFT, "Left -", A_DEC, "previous value of the field"},
    {'-', NULL, A_DEC, NULL},
    {TK_ENTER, "Enter", A_EDIT, "type a value (Inputs) / load the plan (Plans)"},
    {'\r', NULL, A_EDIT, NULL},
    {TK_TAB, "Tab", A_FOCUS, "move between the Inputs and Plans panes"},
    {'v', "v", A_VIEW, "cycle the lower right pane: time, plans, run (small terminals)"},
    {'p', "p", A_PIN, "pin the current state as baseline; again to unpin"},
    {'s', "s", A_SAVE, "save the plan file (plan.json)"},
    {'m', "m", A_MEGATRON, "save the Megatron-LM arguments"},
    {'r', "r", A_REPLAN, "search plans again"},
    {TK_ESC, "Esc", A_CANCEL, "cancel the plan search / typing / help"},
    {'?', "? F1", A_HELP, "this help"},
    {TK_F1, NULL, A_HELP, NULL},
    {TK_CTRL_L, "Ctrl-L", A_REDRAW, "redraw the screen"},
    {'q', "q F10", A_QUIT, "quit"},
    {TK_F10, NULL, A_QUIT, NULL},
};

const TuiKeyBinding *tui_keys(int *n)
{
    *n = (int)(sizeof keys / sizeof *keys);
    return keys;
}

TuiAction tui_key_action(int key)
{
    for (size_t i = 0; i < sizeof keys / sizeof *keys; i++)
        if (keys[i].key == key)
            return keys[i].action;
    return A_NONE;
}

/* ---- fields ---- */

typedef struct {
    const char *label;
    bool editable;
    bool problem;        // changes what the planner searches
    const char *help;
} FieldInfo;

static const FieldInfo fields[] = {
    [F_MODEL] = {"model", true, true, "preset name or a size (70B); +/- cycle presets"},
    [F_GPUS] = {"GPUs", true, true, "GPUs in the job; +/- double or halve"},
    [F_GPU] = {"GPU type", true, true, "builtin profile; +/- cycle"},
    [F_GPN] = {"GPUs/node", true, true, "GPUs per NVLink domain"},
    [F_SEQ] = {"sequence", true, true, "tokens per sequence"},
    [F_GBS] = {"global batch", true, true, "sequences per step"},
    [F_TOKENS] = {"tokens", true, true, "token budget (300B, 2T)"},
    [F_PRICE] = {"$/GPU-hour", true, false, "price of one GPU-hour"},
    [F_TP] = {"tp", true, false, "tensor parallel"},
    [F_PP] = {"pp", true, false, "pipeline stages"},
    [F_VP] = {"vp", true, false, "virtual stages (interleaving)"},
    [F_CP] = {"cp", true, false, "context parallel"},
    [F_DP] = {"dp", false, false, "data parallel = GPUs/(tp*pp*cp)"},
    [F_MBS] = {"micro-batch", true, false, "sequences per micro-batch"},
    [F_ZERO] = {"ZeRO", true, false, "zero0..3 or distopt"},
    [F_RECOMPUTE] = {"recompute", true, false, "none, selective, full"},
    [F_SP] = {"seq-parallel", true, false, "on or off (needs tp > 1)"},
    [F_PREC] = {"precision", true, false, "bf16, fp16, fp8, fp32"},
};
_Static_assert(sizeof fields / sizeof *fields == F_COUNT, "one FieldInfo per TuiField");

const char *state_field_label(TuiField f) { return fields[f].label; }
const char *state_field_help(TuiField f) { return fields[f].help; }
bool state_field_editable(TuiField f) { return fields[f].editable; }

void state_msg(TuiState *st, bool error, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(st->msg, sizeof st->msg, fmt, ap);
    va_end(ap);
    st->msg_error = error;
}

static const char *human(double v, char *buf, int len) { return util_si(v, 3, buf, len); }

static bool uniform_recompute(const Layout *lo, Recompute *out)
{
    Recompute r = layout_stage_recompute(lo, 0);
    for (int s = 0; s < lo->pp; s++) {
        int want_f = r == RECOMPUTE_FULL ? lo->layers[s] : 0;
        int want_e = r == RECOMPUTE_SELECTIVE ? lo->layers[s] : 0;
        if (lo->full_rc[s] != want_f || lo->sel_rc[s] != want_e)
            return false;
    }
    *out = r;
    return true;
}

static void field_text(const CliInputs *in, double price, bool rc_mixed, const Cost *c, TuiField f,
                       char *buf, int len)
{
    const Layout *lo = &in->layout;
    char h[32];
    switch (f) {
    case F_MODEL: snprintf(buf, len, "%s", in->model.name); break;
    case F_GPUS: snprintf(buf, len, "%d", layout_gpus(lo)); break;
    case F_GPU: snprintf(buf, len, "%s", in->hw.name); break;
    case F_GPN: snprintf(buf, len, "%d", in->hw.gpus_per_node); break;
    case F_SEQ: snprintf(buf, len, "%d", in->model.s); break;
    case F_GBS: snprintf(buf, len, "%d", lo->gbs); break;
    case F_TOKENS:
        snprintf(buf, len, "%s%s", human(c->train.tokens, h, sizeof h), in->opts.tokens > 0 ? "" : " (20/p)");
        break;
    case F_PRICE: snprintf(buf, len, "$%.2f", price); break;
    case F_TP: snprintf(buf, len, "%d", lo->tp); break;
    case F_PP: snprintf(buf, len, "%d", lo->pp); break;
    case F_VP: snprintf(buf, len, "%d", lo->vp); break;
    case F_CP: snprintf(buf, len, "%d", lo->cp); break;
    case F_DP: snprintf(buf, len, "%d", lo->dp); break;
    case F_MBS: snprintf(buf, len, "%d (m=%d)", lo->mbs, layout_microbatches(lo)); break;
    case F_ZERO: snprintf(buf, len, "%s", layout_opt_name(lo->opt)); break;
    case F_RECOMPUTE:
        snprintf(buf, len, "%s", rc_mixed ? "per-stage" : spec_recompute_name(in->recompute));
        break;
    case F_SP: snprintf(buf, len, "%s", lo->tp == 1 ? "off (tp=1)" : lo->sp ? "on" : "off"); break;
    case F_PREC: snprintf(buf, len, "%s", hw_precision_name(lo->prec)); break;
    default: snprintf(buf, len, "?"); break;
    }
}

void state_field_text(const TuiState *st, TuiField f, char *buf, int len)
{
    field_text(&st->in, st->price, st->rc_mixed, &st->cost, f, buf, len);
}

void state_field_pin_text(const TuiState *st, TuiField f, char *buf, int len)
{
    buf[0] = 0;
    if (!st->pinned)
        return;
    char now[64], then[64];
    field_text(&st->in, st->price, st->rc_mixed, &st->cost, f, now, sizeof now);
    field_text(&st->pin_in, st->pin_price, false, &st->pin_cost, f, then, sizeof then);
    if (f == F_RECOMPUTE) {
        Recompute r;
        if (!uniform_recompute(&st->pin_in.layout, &r))
            snprintf(then, sizeof then, "per-stage");
    }
    if (strcmp(now, then) != 0)
        snprintf(buf, len, "%s", then);
}

/* ---- applying a change ---- */

/* Derive dp, reset the stage split when asked, check, and spread the uniform
 * recomputation. 0 ok, -1 with err. */
static int resolve(CliInputs *in, bool reset_stages, bool rc_mixed, char *err, int errlen)
{
    Layout *lo = &in->layout;
    long long mp = (long long)lo->tp * lo->pp * lo->cp;
    if (in->gpus < 1) {
        snprintf(err, errlen, "GPUs must be >= 1");
        return -1;
    }
    if (in->gpus % mp != 0) {
        snprintf(err, errlen, "GPUs %d is not a multiple of tp*pp*cp = %d*%d*%d = %lld", in->gpus, lo->tp, lo->pp,
                 lo->cp, mp);
        return -1;
    }
    lo->dp = (int)(in->gpus / mp);
    if (reset_stages)
        for (int s = 0; s < LAYOUT_MAX_PP; s++)
            lo->layers[s] = lo->full_rc[s] = lo->sel_rc[s] = 0;
    if (layout_check(lo, &in->model, &in->hw, err, errlen) != 0)
        return -1;
    if (!rc_mixed)
        layout_set_recompute(lo, &in->model, in->recompute);
    return 0;
}

void state_eval(TuiState *st) { cost(&st->in.model, &st->in.hw, &st->in.layout, &st->in.opts, &st->cost); }

/* Commit `cand` if it resolves; otherwise leave everything and say why. */
static int apply(TuiState *st, CliInputs *cand, TuiField f, bool reset_stages)
{
    char err[256];
    /* a loaded plan's per-stage recomputation survives until the stage
     * split changes or the recompute knob is set; then the uniform mode
     * (the plan's first stage's, set on load) applies */
    bool mixed = st->rc_mixed && !reset_stages && f != F_RECOMPUTE;
    if (resolve(cand, reset_stages, mixed, err, sizeof err) != 0) {
        state_msg(st, true, "%s: refused: %s", fields[f].label, err);
        return -1;
    }
    st->in = *cand;
    st->rc_mixed = mixed;
    state_eval(st);
    if (fields[f].problem)
        st->problem_gen++;
    char v[64];
    state_field_text(st, f, v, sizeof v);
    state_msg(st, false, "%s = %s", fields[f].label, v);
    return 0;
}

static int preset_index(const char *name)
{
    char base[48];
    snprintf(base, sizeof base, "%s", name);
    char *star = strchr(base, '*');
    if (star)
        *star = 0;
    for (int i = 0; i < presets_count(); i++)
        if (!strcmp(presets_get(i)->name, base))
            return i;
    return -1;
}

static int profile_index(const char *name)
{
    for (int i = 0; i < profile_builtin_count(); i++)
        if (!strcmp(profile_builtin_name(i), name))
            return i;
    return -1;
}

static int set_model(TuiState *st, CliInputs *c, const ModelSpec *m, const char *rule)
{
    c->model = *m;
    snprintf(c->model_rule, sizeof c->model_rule, "%s", rule ? rule : "");
    return apply(st, c, F_MODEL, true);
}

static int set_gpu(TuiState *st, CliInputs *c, const char *name)
{
    char err[256];
    HwProfile hw;
    if (profile_load_builtin(name, &hw, err, sizeof err) != 0) {
        state_msg(st, true, "GPU type: refused: %s", err);
        return -1;
    }
    if (st->gpn_override > 0)
        hw.gpus_per_node = st->gpn_override;
    c->hw = hw;
    return apply(st, c, F_GPU, false);
}

/* Next value of a doubling knob; refuses below 1. */
static int dbl(int v, int dir) { return dir > 0 ? (v > (1 << 29) ? v : v * 2) : v / 2; }

/* Step an int knob by +-1 until the layout resolves (pp, vp skip values
 * that do not divide), at most `tries` candidates. */
static int step_search(TuiState *st, TuiField f, int *knob_of_cand(CliInputs *), int dir, int lo_v, int hi_v,
                       bool reset)
{
    CliInputs first = st->in;
    int v0 = *knob_of_cand(&first);
    char first_err[256] = "";
    for (int v = v0 + dir; v >= lo_v && v <= hi_v; v += dir) {
        CliInputs c = st->in;
        *knob_of_cand(&c) = v;
        char err[256];
        bool mixed = st->rc_mixed && !reset;
        if (resolve(&c, reset, mixed, err, sizeof err) == 0) {
            CliInputs c2 = st->in;
            *knob_of_cand(&c2) = v;
            return apply(st, &c2, f, reset);
        }
        if (!first_err[0])
            snprintf(first_err, sizeof first_err, "%s = %d: %.200s", fields[f].label, v, err);
    }
    state_msg(st, true, "%s: no valid value %s %d%s%.200s", fields[f].label, dir > 0 ? "above" : "below", v0,
              first_err[0] ? "; " : "", first_err);
    return -1;
}

static int *knob_pp(CliInputs *c) { return &c->layout.pp; }
static int *knob_vp(CliInputs *c) { return &c->layout.vp; }

int state_step(TuiState *st, TuiField f, int dir)
{
    CliInputs c = st->in;
    Layout *lo = &c.layout;
    int v;
    switch (f) {
    case F_MODEL: {
        int i = preset_index(c.model.name), n = presets_count();
        i = i < 0 ? (dir > 0 ? 0 : n - 1) : (i + dir + n) % n;
        return set_model(st, &c, presets_get(i), "");
    }
    case F_GPUS:
        if ((v = dbl(c.gpus, dir)) < 1)
            goto floor1;
        c.gpus = v;
        return apply(st, &c, f, false);
    case F_GPU: {
        int i = profile_index(c.hw.name), n = profile_builtin_count();
        i = i < 0 ? 0 : (i + dir + n) % n;
        return set_gpu(st, &c, profile_builtin_name(i));
    }
    case F_GPN:
        if ((v = dbl(c.hw.gpus_per_node, dir)) < 1)
            goto floor1;
        c.hw.gpus_per_node = v;
        if (apply(st, &c, f, false) != 0)
            return -1;
        st->gpn_override = v;
        return 0;
    case F_SEQ:
        if ((v = dbl(c.model.s, dir)) < 1)
            goto floor1;
        c.model.s = v;
        return apply(st, &c, f, false);
    case F_GBS:
        if ((v = dbl(lo->gbs, dir)) < 1)
            goto floor1;
        lo->gbs = v;
        c.fixed |= FIX_GBS;
        return apply(st, &c, f, false);
    case F_TOKENS:
        c.opts.tokens = dir > 0 ? st->cost.train.tokens * 2 : st->cost.train.tokens / 2;
        if (c.opts.tokens < 1e6) {
            state_msg(st, true, "tokens: refused: below 1M tokens");
            return -1;
        }
        return apply(st, &c, f, false);
    case F_PRICE:
        if (st->price + 0.25 * dir < 0) {
            state_msg(st, true, "$/GPU-hour: refused: a price is >= 0");
            return -1;
        }
        st->price += 0.25 * dir;
        state_msg(st, false, "$/GPU-hour = $%.2f", st->price);
        return 0;
    case F_TP:
        if ((v = dbl(lo->tp, dir)) < 1)
            goto floor1;
        lo->tp = v;
        if (v > 1 && !(c.fixed & FIX_SP))
            lo->sp = true;
        return apply(st, &c, f, false);
    case F_PP: return step_search(st, f, knob_pp, dir, 1, c.model.L, true);
    case F_VP: return step_search(st, f, knob_vp, dir, 1, c.model.L, true);
    case F_CP:
        if ((v = dbl(lo->cp, dir)) < 1)
            goto floor1;
        lo->cp = v;
        return apply(st, &c, f, false);
    case F_DP:
        state_msg(st, true, "dp is derived: GPUs/(tp*pp*cp); change GPUs, tp, pp or cp");
        return -1;
    case F_MBS:
        if ((v = dbl(lo->mbs, dir)) < 1)
            goto floor1;
        lo->mbs = v;
        return apply(st, &c, f, false);
    case F_ZERO:
        lo->opt = (OptimShard)(((int)lo->opt + dir + 5) % 5);
        return apply(st, &c, f, false);
    case F_RECOMPUTE:
        c.recompute = (Recompute)(((int)c.recompute + dir + 3) % 3);
        return apply(st, &c, f, false);
    case F_SP:
        if (lo->tp == 1) {
            state_msg(st, true, "seq-parallel: refused: needs tp > 1");
            return -1;
        }
        lo->sp = !lo->sp;
        c.fixed |= FIX_SP;
        return apply(st, &c, f, false);
    case F_PREC: {
        /* cycle bf16 -> fp16 -> fp8 -> fp32, skipping what the GPU lacks */
        for (int k = 1; k < PREC_COUNT; k++) {
            Precision p = (Precision)(((int)lo->prec + dir * k + PREC_COUNT) % PREC_COUNT);
            if (c.hw.peak[p] > 0) {
                lo->prec = p;
                return apply(st, &c, f, false);
            }
        }
        state_msg(st, true, "precision: refused: %s supports only %s", c.hw.name, hw_precision_name(lo->prec));
        return -1;
    }
    default: return -1;
    }
floor1:
    state_msg(st, true, "%s: refused: must be >= 1", fields[f].label);
    return -1;
}

static int want_int(TuiState *st, TuiField f, const char *text, int *out)
{
    if (args_parse_int(text, out) != 0 || *out < 1) {
        state_msg(st, true, "%s: refused: expected a whole number >= 1, got \"%s\"", fields[f].label, text);
        return -1;
    }
    return 0;
}

int state_set(TuiState *st, TuiField f, const char *text)
{
    CliInputs c = st->in;
    Layout *lo = &c.layout;
    char err[256];
    int v;
    double d;
    while (isspace((unsigned char)*text))
        text++;
    if (!*text) {
        state_msg(st, true, "%s: nothing typed", fields[f].label);
        return -1;
    }
    switch (f) {
    case F_MODEL: {
        ModelSpec m;
        char rule[256] = "";
        if (presets_find(text, &m, err, sizeof err) == 0)
            return set_model(st, &c, &m, "");
        if (args_parse_count(text, &d) == 0 && d > 0) {
            if (presets_from_params(d, &m, rule, sizeof rule, err, sizeof err) != 0) {
                state_msg(st, true, "model: refused: %s", err);
                return -1;
            }
            return set_model(st, &c, &m, rule);
        }
        state_msg(st, true, "model: refused: \"%s\" is neither a preset nor a size such as 70B", text);
        return -1;
    }
    case F_GPUS:
        if (want_int(st, f, text, &v))
            return -1;
        c.gpus = v;
        break;
    case F_GPU: return set_gpu(st, &c, text);
    case F_GPN:
        if (want_int(st, f, text, &v))
            return -1;
        c.hw.gpus_per_node = v;
        if (apply(st, &c, f, false) != 0)
            return -1;
        st->gpn_override = v;
        return 0;
    case F_SEQ:
        if (want_int(st, f, text, &v))
            return -1;
        c.model.s = v;
        break;
    case F_GBS:
        if (want_int(st, f, text, &v))
            return -1;
        lo->gbs = v;
        c.fixed |= FIX_GBS;
        break;
    case F_TOKENS:
        if (args_parse_count(text, &d) != 0 || d < 1e6) {
            state_msg(st, true, "tokens: refused: expected a count >= 1M such as 300B, got \"%s\"", text);
            return -1;
        }
        c.opts.tokens = d;
        break;
    case F_PRICE: {
        char *end;
        d = strtod(text[0] == '$' ? text + 1 : text, &end);
        if (end == text || *end || !isfinite(d) || d < 0) {
            state_msg(st, true, "$/GPU-hour: refused: expected a price >= 0, got \"%s\"", text);
            return -1;
        }
        st->price = d;
        state_msg(st, false, "$/GPU-hour = $%.2f", d);
        return 0;
    }
    case F_TP: case F_PP: case F_VP: case F_CP: case F_MBS:
        if (want_int(st, f, text, &v))
            return -1;
        if (f == F_TP) {
            lo->tp = v;
            if (v > 1 && !(c.fixed & FIX_SP))
                lo->sp = true;
        }
        if (f == F_PP) lo->pp = v;
        if (f == F_VP) lo->vp = v;
        if (f == F_CP) lo->cp = v;
        if (f == F_MBS) lo->mbs = v;
        return apply(st, &c, f, f == F_PP || f == F_VP);
    case F_DP: return state_step(st, f, 0);
    case F_ZERO:
        if (text[0] >= '0' && text[0] <= '3' && !text[1])
            lo->opt = (OptimShard)(text[0] - '0');
        else if (layout_parse_opt(text, &lo->opt) != 0) {
            state_msg(st, true, "ZeRO: refused: expected 0..3, zero0..zero3 or distopt, got \"%s\"", text);
            return -1;
        }
        break;
    case F_RECOMPUTE:
        if (spec_parse_recompute(text, &c.recompute) != 0) {
            state_msg(st, true, "recompute: refused: expected none, selective or full, got \"%s\"", text);
            return -1;
        }
        break;
    case F_SP:
        if (!strcmp(text, "on") || !strcmp(text, "1"))
            lo->sp = true;
        else if (!strcmp(text, "off") || !strcmp(text, "0"))
            lo->sp = false;
        else {
            state_msg(st, true, "seq-parallel: refused: expected on or off, got \"%s\"", text);
            return -1;
        }
        if (lo->sp && lo->tp == 1) {
            state_msg(st, true, "seq-parallel: refused: needs tp > 1");
            return -1;
        }
        c.fixed |= FIX_SP;
        break;
    case F_PREC:
        if (hw_parse_precision(text, &lo->prec) != 0) {
            state_msg(st, true, "precision: refused: expected fp32, bf16, fp16 or fp8, got \"%s\"", text);
            return -1;
        }
        break;
    default: return -1;
    }
    return apply(st, &c, f, false);
}

/* ---- init, pin, plans, keys ---- */

void state_init(TuiState *st, const CliInputs *in, double price)
{
    memset(st, 0, sizeof *st);
    st->in = *in;
    st->gpn_override = in->gpus_per_node;
    st->price = price;
    Recompute r;
    st->rc_mixed = !uniform_recompute(&st->in.layout, &r);
    if (!st->rc_mixed)
        st->in.recompute = r;
    snprintf(st->save_path, sizeof st->save_path, "plan.json");
    snprintf(st->megatron_path, sizeof st->megatron_path, "megatron_args.txt");
    st->plan_status = PLANS_IDLE;
    st->bad_field = -1;
    state_eval(st);
    state_msg(st, false, "? for help, q to quit");
}

void state_pin(TuiState *st)
{
    st->pinned = true;
    st->pin_in = st->in;
    st->pin_price = st->price;
    st->pin_cost = st->cost;
}

void state_unpin(TuiState *st) { st->pinned = false; }

double state_cost_dollars(const Cost *c, double price) { return c->train.gpu_hours * price; }

int state_load_plan(TuiState *st, int i)
{
    if (i < 0 || i >= st->n_plans) {
        state_msg(st, true, "no plan to load");
        return -1;
    }
    CliInputs c = st->in;
    c.layout = st->plans[i].layout;
    c.gpus = layout_gpus(&c.layout);
    Recompute r;
    bool mixed = !uniform_recompute(&c.layout, &r);
    if (!mixed)
        c.recompute = r;
    else
        c.recompute = layout_stage_recompute(&c.layout, 0);
    char err[256];
    if (resolve(&c, false, mixed, err, sizeof err) != 0) {
        state_msg(st, true, "plan %d: refused: %s", i + 1, err);
        return -1;
    }
    st->in = c;
    st->rc_mixed = mixed;
    state_eval(st);
    state_msg(st, false, "loaded plan %d: tp %d pp %d vp %d cp %d dp %d mbs %d %s", i + 1, c.layout.tp, c.layout.pp,
              c.layout.vp, c.layout.cp, c.layout.dp, c.layout.mbs, layout_opt_name(c.layout.opt));
    return 0;
}

int state_save_plan(const TuiState *st, const char *path, char *err, int errlen)
{
    return planfile_write(path, &st->in.model, &st->in.hw, &st->in.layout, &st->in.opts, &st->cost, err, errlen);
}

static void move_sel(TuiState *st, int dir)
{
    if (st->focus == FOCUS_PLANS) {
        if (st->n_plans > 0)
            st->plan_sel = (st->plan_sel + dir + st->n_plans) % st->n_plans;
        return;
    }
    st->sel = (st->sel + dir + F_COUNT) % F_COUNT;
}

static void mark(TuiState *st, int rc) { st->bad_field = rc != 0 ? st->sel : -1; }

static TuiAction edit_key(TuiState *st, int key)
{
    size_t n = strlen(st->edit);
    if (key == TK_ESC) {
        st->editing = false;
        state_msg(st, false, "typing cancelled");
    } else if (key == TK_ENTER || key == '\r') {
        st->editing = false;
        mark(st, state_set(st, (TuiField)st->sel, st->edit));
    } else if (key == TK_BACKSPACE || key == 8) {
        if (n)
            st->edit[n - 1] = 0;
    } else if (key >= 32 && key < 127 && n + 1 < sizeof st->edit) {
        st->edit[n] = (char)key;
        st->edit[n + 1] = 0;
    }
    return A_NONE;
}

TuiAction state_key(TuiState *st, int key)
{
    if (st->help) {
        st->help = false;
        return tui_key_action(key) == A_QUIT ? A_QUIT : A_NONE;
    }
    if (st->editing)
        return edit_key(st, key);
    TuiAction a = tui_key_action(key);
    if (a == A_NONE && st->focus == FOCUS_INPUTS && key < 127 && (isdigit(key) || key == '.') &&
        fields[st->sel].editable) {
        st->editing = true;
        st->edit[0] = (char)key;
        st->edit[1] = 0;
        return A_NONE;
    }
    switch (a) {
    case A_UP: move_sel(st, -1); return A_NONE;
    case A_DOWN: move_sel(st, +1); return A_NONE;
    case A_INC: mark(st, state_step(st, (TuiField)st->sel, +1)); return A_NONE;
    case A_DEC: mark(st, state_step(st, (TuiField)st->sel, -1)); return A_NONE;
    case A_EDIT:
        if (st->focus == FOCUS_PLANS) {
            state_load_plan(st, st->plan_sel);
        } else if (!fields[st->sel].editable) {
            mark(st, state_step(st, (TuiField)st->sel, 0));
        } else {
            st->editing = true;
            st->edit[0] = 0;
        }
        return A_NONE;
    case A_FOCUS:
        st->focus = st->focus == FOCUS_INPUTS ? FOCUS_PLANS : FOCUS_INPUTS;
        if (st->focus == FOCUS_PLANS)
            st->view = VIEW_PLANS;
        return A_NONE;
    case A_VIEW:
        st->view = (TuiView)((st->view + 1) % VIEW_COUNT);
        if (st->view == VIEW_MONITOR && !st->run.active)
            st->view = VIEW_TIME;
        if (st->view != VIEW_PLANS)
            st->focus = FOCUS_INPUTS;   /* the plans pane may be hidden now */
        return A_NONE;
    case A_PIN:
        if (st->pinned) {
            state_unpin(st);
            state_msg(st, false, "baseline unpinned");
        } else {
            state_pin(st);
            state_msg(st, false, "baseline pinned: numbers now show their change from it");
        }
        return A_NONE;
    case A_HELP: st->help = true; return A_NONE;
    default: return a;
    }
}
