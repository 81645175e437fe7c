/* state.c — the TUI's inputs, knob editing, evaluation and pin (see state.h). */
#include "state.h"

#include <ctype.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "presets.h"
#include "profile.h"
#include "stacks.h"
#include "fileio.h"
#include "fmt.h"
#include "parse.h"
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
    int row;             // among the knobs' tui_row numbers
    bool editable;
    bool problem;        // changes what the planner searches
    const char *help;
} OwnInfo;

static const OwnInfo own[] = {
    [TF_MODEL] = {"model", 10, true, true, "preset name or a size (70B); +/- cycle presets"},
    [TF_GPUS] = {"GPUs", 20, true, true, "GPUs in the job; +/- double or halve"},
    [TF_GPU] = {"GPU type", 30, true, true, "builtin profile; +/- cycle"},
    [TF_GPN] = {"GPUs/node", 40, true, true, "GPUs per NVLink domain"},
    [TF_TOKENS] = {"tokens", 70, true, true, "token budget (300B, 2T)"},
    [TF_PRICE] = {"$/GPU-hour", 80, true, false, "price of one GPU-hour"},
};
_Static_assert(sizeof own / sizeof *own == TF_OWN_COUNT, "one OwnInfo per TuiOwnField");

/* A row: one of the TUI's own fields, or a knob. */
typedef struct {
    int own;             // TuiOwnField, or -1
    const Knob *knob;    // or NULL
    int row;
} Row;

static Row rows[TUI_MAX_FIELDS];
static int n_rows;

static void rows_init(void)
{
    if (n_rows)
        return;
    Row r[TUI_MAX_FIELDS];
    int n = 0;
    for (int i = 0; i < TF_OWN_COUNT; i++)
        r[n++] = (Row){i, NULL, own[i].row};
    for (int i = 0; i < KNOB_COUNT; i++) {
        const Knob *k = knob_get((KnobId)i);
        if (k->tui_label)
            r[n++] = (Row){-1, k, k->tui_row};
    }
    for (int i = 1; i < n; i++)   /* stable insertion sort by row */
        for (int j = i; j > 0 && r[j - 1].row > r[j].row; j--) {
            Row t = r[j];
            r[j] = r[j - 1];
            r[j - 1] = t;
        }
    memcpy(rows, r, sizeof r);
    n_rows = n;
}

int state_field_count(void)
{
    rows_init();
    return n_rows;
}

TuiField state_field_own(TuiOwnField f)
{
    rows_init();
    for (int i = 0; i < n_rows; i++)
        if (rows[i].own == (int)f)
            return i;
    return -1;
}

TuiField state_field_knob(KnobId k)
{
    rows_init();
    for (int i = 0; i < n_rows; i++)
        if (rows[i].knob && rows[i].knob->id == k)
            return i;
    return -1;
}

static const Row *row_of(TuiField f)
{
    rows_init();
    static const Row none = {-1, NULL, 0};
    return f >= 0 && f < n_rows ? &rows[f] : &none;
}

const char *state_field_label(TuiField f)
{
    const Row *r = row_of(f);
    return r->knob ? r->knob->tui_label : r->own >= 0 ? own[r->own].label : "?";
}

const char *state_field_help(TuiField f)
{
    const Row *r = row_of(f);
    if (r->knob)
        return r->knob->tui_help ? r->knob->tui_help : r->knob->help;
    return r->own >= 0 ? own[r->own].help : "";
}

bool state_field_editable(TuiField f)
{
    const Row *r = row_of(f);
    return r->knob ? r->knob->tui_step != TUI_DERIVED : r->own >= 0 && own[r->own].editable;
}

static bool field_problem(TuiField f)
{
    const Row *r = row_of(f);
    return r->knob ? r->knob->tui_problem : r->own >= 0 && own[r->own].problem;
}

static const void *knob_cobj(const Scenario *sc, const Knob *k) { return scenario_knob_obj((Scenario *)sc, k); }

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

static void field_text(const Scenario *in, double price, bool rc_mixed, const Cost *c, TuiField f, char *buf,
                       int len)
{
    const Row *r = row_of(f);
    if (r->knob) {
        const Knob *k = r->knob;
        int v = knob_get_int(k, knob_cobj(in, k));
        if (k->id == K_RECOMPUTE && rc_mixed)
            snprintf(buf, len, "per-stage");
        else if (k->tui_text)
            k->tui_text(knob_cobj(in, k), v, buf, len);
        else
            knob_format(k, v, buf, len);
        return;
    }
    char h[32];
    switch (r->own) {
    case TF_MODEL: snprintf(buf, len, "%s", in->model.name); break;
    case TF_GPUS: snprintf(buf, len, "%d", layout_gpus(&in->layout)); break;
    case TF_GPU: snprintf(buf, len, "%s", in->hw.name); break;
    case TF_GPN: snprintf(buf, len, "%d", in->hw.gpus_per_node); break;
    case TF_TOKENS:
        snprintf(buf, len, "%s%s", human(c->train.tokens, h, sizeof h), in->opts.tokens > 0 ? "" : " (20/p)");
        break;
    case TF_PRICE: snprintf(buf, len, "$%.2f", price); break;
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
    if (f == state_field_knob(K_RECOMPUTE)) {
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
static int resolve(Scenario *in, bool reset_stages, bool rc_mixed, char *err, int errlen)
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
    /* the default global batch follows the model and the GPUs until it is set (scenario.h) */
    if (!(in->fixed & FIX_GBS))
        lo->gbs = scenario_default_gbs(&in->model, in->gpus);
    /* sequence parallel follows tp unless the user set it */
    if (lo->tp > 1 && !(in->fixed & FIX_SP))
        lo->sp = true;
    if (reset_stages)
        for (int s = 0; s < LAYOUT_MAX_PP; s++)
            lo->layers[s] = lo->full_rc[s] = lo->sel_rc[s] = 0;
    if (layout_check(lo, &in->model, &in->hw, err, errlen) != 0)
        return -1;
    scenario_resolve_margin(in);   /* a share of the GPU's memory follows the GPU type */
    if (!rc_mixed)
        layout_set_recompute(lo, in->recompute);
    return 0;
}

void state_eval(TuiState *st)
{
    cost(&st->in.model, &st->in.hw, &st->in.layout, &st->in.opts, &st->cost);
    /* the band as predict prints it: none for a step that is not a finite time */
    const Cost *c = &st->cost;
    if (!isfinite(c->step_s) || !(c->step_s > 0) || band_of_cost(&st->in.model, &st->in.hw, &st->in.layout, c,
                                                                 &st->band) != 0)
        st->band.runs = 0;
}

/* a loaded plan's per-stage recomputation survives until the stage split
 * changes or the recompute knob is set; then the uniform mode (the plan's
 * first stage's, set on load) applies */
static bool keeps_mixed(const TuiState *st, TuiField f, bool reset_stages)
{
    return st->rc_mixed && !reset_stages && f != state_field_knob(K_RECOMPUTE);
}

/* Commit `cand` if it resolves; otherwise leave everything and say why. */
/* The hardware of c: its GPU profile (the builtin `gpu`, else the profile
 * it came from) with --gpus-per-node and the layout's --stack over it, as
 * scenario_finish builds the first one. 0, or -1 with err. */
static int load_hw(const TuiState *st, const Scenario *c, const char *gpu, HwProfile *hw, char *err, int errlen)
{
    int rc = gpu || !c->profile_path ? profile_load_builtin(gpu ? gpu : c->hw.name, hw, err, errlen)
                                     : profile_load_file(c->profile_path, hw, err, errlen);
    if (rc != 0)
        return -1;
    if (st->gpn_override > 0)
        hw->gpus_per_node = st->gpn_override;
    return stacks_apply(hw, c->layout.stack, err, errlen);
}

static int apply(TuiState *st, Scenario *cand, TuiField f, bool reset_stages)
{
    char err[256];
    /* into target torchtitan with the default stack: torchtitan's, as --target torchtitan without --stack */
    if (cand->layout.target == TARGET_TORCHTITAN && st->in.layout.target != TARGET_TORCHTITAN && cand->layout.stack == 0)
        cand->layout.stack = stacks_index("torchtitan");
    /* another --stack: its numbers over the bare profile, not over the old stack's */
    if (cand->layout.stack != st->in.layout.stack && load_hw(st, cand, NULL, &cand->hw, err, sizeof err) != 0) {
        state_msg(st, true, "%s: refused: %s", state_field_label(f), err);
        return -1;
    }
    if (cand->layout.stack != st->in.layout.stack)   /* and the layout fields it decides, as scenario_finish sets them */
        stacks_layout_settings(&cand->layout);
    bool mixed = keeps_mixed(st, f, reset_stages);
    if (resolve(cand, reset_stages, mixed, err, sizeof err) != 0) {
        state_msg(st, true, "%s: refused: %s", state_field_label(f), err);
        return -1;
    }
    st->in = *cand;
    st->rc_mixed = mixed;
    state_eval(st);
    if (field_problem(f))
        st->problem_gen++;
    else
        st->load_best = false;   /* the user chose a layout: keep it when plans arrive */
    char v[64];
    state_field_text(st, f, v, sizeof v);
    state_msg(st, false, "%s = %s", state_field_label(f), v);
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

static int set_model(TuiState *st, Scenario *c, const ModelSpec *m, const char *rule)
{
    c->model = *m;
    snprintf(c->model_rule, sizeof c->model_rule, "%s", rule ? rule : "");
    return apply(st, c, state_field_own(TF_MODEL), true);
}

static int set_gpu(TuiState *st, Scenario *c, const char *name)
{
    char err[256];
    HwProfile hw;
    /* the layout's --stack over the new profile, as scenario_finish applies it to the first */
    if (load_hw(st, c, name, &hw, err, sizeof err) != 0) {
        state_msg(st, true, "GPU type: refused: %s", err);
        return -1;
    }
    c->hw = hw;
    c->profile_path = NULL;   /* a builtin from now on: a --stack change reloads it */
    return apply(st, c, state_field_own(TF_GPU), false);
}

/* GPUs per node v, kept over later GPU type and stack changes. */
static int set_gpn(TuiState *st, Scenario *c, TuiField f, int v)
{
    c->hw.gpus_per_node = v;
    if (apply(st, c, f, false) != 0)
        return -1;
    st->gpn_override = v;
    return 0;
}

/* Next value of a doubling knob. */
static int dbl(int v, int dir) { return dir > 0 ? (v > (1 << 29) ? v : v * 2) : v / 2; }

/* A candidate with knob k set to v (and its fix bit). */
static Scenario with_knob(const TuiState *st, const Knob *k, int v)
{
    Scenario c = st->in;
    knob_set_int(k, scenario_knob_obj(&c, k), v);
    c.fixed |= k->fix;
    return c;
}

/* Try values of knob k one after another (TUI_SEARCH: +-1 up to the layer
 * count; TUI_CYCLE: the other enum values, wrapping) and apply the first
 * that resolves; refuse with the first reason when none does. */
static int step_search(TuiState *st, TuiField f, const Knob *k, int dir)
{
    int v0 = knob_get_int(k, knob_cobj(&st->in, k));
    bool cycle = k->tui_step == TUI_CYCLE, reset = k->tui_step == TUI_SEARCH;
    int tries = cycle ? k->count - 1 : st->in.model.L;
    char first_err[320] = "";
    for (int i = 1; i <= tries; i++) {
        int v = cycle ? ((v0 + dir * i) % k->count + k->count) % k->count : v0 + dir * i;
        if (!cycle && (v < k->min || v > st->in.model.L))
            break;
        Scenario c = with_knob(st, k, v);
        char err[256];
        if (resolve(&c, reset, keeps_mixed(st, f, reset), err, sizeof err) == 0) {
            Scenario c2 = with_knob(st, k, v);
            return apply(st, &c2, f, reset);
        }
        if (!first_err[0]) {
            char t[64];
            knob_format(k, v, t, sizeof t);
            snprintf(first_err, sizeof first_err, "%s = %s: %.200s", k->tui_label, t, err);
        }
    }
    char t0[64];
    knob_format(k, v0, t0, sizeof t0);
    if (cycle)
        state_msg(st, true, "%s: refused: no other value is valid here%s%.200s", k->tui_label,
                  first_err[0] ? "; " : "", first_err);
    else
        state_msg(st, true, "%s: no valid value %s %s%s%.200s", k->tui_label, dir > 0 ? "above" : "below", t0,
                  first_err[0] ? "; " : "", first_err);
    return -1;
}

static int knob_step(TuiState *st, TuiField f, const Knob *k, int dir)
{
    int v0 = knob_get_int(k, knob_cobj(&st->in, k)), v;
    char err[200];
    switch (k->tui_step) {
    case TUI_DOUBLE:
        if ((v = dbl(v0, dir)) < k->min) {
            state_msg(st, true, "%s: refused: must be >= %d", k->tui_label, k->min);
            return -1;
        }
        break;
    case TUI_SEARCH:
    case TUI_CYCLE: return step_search(st, f, k, dir);
    case TUI_TOGGLE: v = !v0; break;
    default:
        state_msg(st, true, "%s is derived: %s; change the knobs it comes from", k->tui_label,
                  k->tui_help ? k->tui_help : k->help);
        return -1;
    }
    if (k->tui_check && k->tui_check(knob_cobj(&st->in, k), v, err, sizeof err) != 0) {
        state_msg(st, true, "%s: refused: %s", k->tui_label, err);
        return -1;
    }
    Scenario c = with_knob(st, k, v);
    return apply(st, &c, f, false);
}

int state_step(TuiState *st, TuiField f, int dir)
{
    const Row *r = row_of(f);
    if (r->knob)
        return knob_step(st, f, r->knob, dir);
    Scenario c = st->in;
    int v;
    switch (r->own) {
    case TF_MODEL: {
        int i = preset_index(c.model.name), n = presets_count();
        i = i < 0 ? (dir > 0 ? 0 : n - 1) : (i + dir + n) % n;
        return set_model(st, &c, presets_get(i), "");
    }
    case TF_GPUS:
        if ((v = dbl(c.gpus, dir)) < 1)
            break;
        c.gpus = v;
        return apply(st, &c, f, false);
    case TF_GPU: {
        int i = profile_index(c.hw.name), n = profile_builtin_count();
        i = i < 0 ? 0 : (i + dir + n) % n;
        return set_gpu(st, &c, profile_builtin_name(i));
    }
    case TF_GPN:
        if ((v = dbl(c.hw.gpus_per_node, dir)) < 1)
            break;
        return set_gpn(st, &c, f, v);
    case TF_TOKENS:
        c.opts.tokens = dir > 0 ? st->cost.train.tokens * 2 : st->cost.train.tokens / 2;
        if (c.opts.tokens < 1e6) {
            state_msg(st, true, "tokens: refused: below 1M tokens");
            return -1;
        }
        return apply(st, &c, f, false);
    case TF_PRICE:
        if (st->price + 0.25 * dir < 0) {
            state_msg(st, true, "$/GPU-hour: refused: a price is >= 0");
            return -1;
        }
        st->price += 0.25 * dir;
        state_msg(st, false, "$/GPU-hour = $%.2f", st->price);
        return 0;
    default: return -1;
    }
    state_msg(st, true, "%s: refused: must be >= 1", state_field_label(f));
    return -1;
}

static int want_int(TuiState *st, TuiField f, const char *text, int *out)
{
    if (util_parse_int(text, out) != 0 || *out < 1) {
        state_msg(st, true, "%s: refused: expected a whole number >= 1, got \"%s\"", state_field_label(f), text);
        return -1;
    }
    return 0;
}

static int knob_set(TuiState *st, TuiField f, const Knob *k, const char *text)
{
    if (k->tui_step == TUI_DERIVED)
        return knob_step(st, f, k, 0);
    int v;
    char err[256];
    if (knob_parse(k, text, &v, "", err, sizeof err) != 0 ||
        (k->tui_check && k->tui_check(knob_cobj(&st->in, k), v, err, sizeof err) != 0)) {
        state_msg(st, true, "%s: refused: %s", k->tui_label, err);
        return -1;
    }
    Scenario c = with_knob(st, k, v);
    return apply(st, &c, f, k->tui_step == TUI_SEARCH);
}

int state_set(TuiState *st, TuiField f, const char *text)
{
    while (isspace((unsigned char)*text))
        text++;
    if (!*text) {
        state_msg(st, true, "%s: nothing typed", state_field_label(f));
        return -1;
    }
    const Row *r = row_of(f);
    if (r->knob)
        return knob_set(st, f, r->knob, text);
    Scenario c = st->in;
    char err[256];
    int v;
    double d;
    switch (r->own) {
    case TF_MODEL: {
        ModelSpec m;
        char rule[HFCONFIG_NOTE_MAX] = "";
        if (presets_find(text, &m, err, sizeof err) == 0)
            return set_model(st, &c, &m, "");
        if (util_parse_count(text, &d) == 0 && d > 0) {
            if (presets_from_params(d, &m, rule, sizeof rule, err, sizeof err) != 0) {
                state_msg(st, true, "model: refused: %s", err);
                return -1;
            }
            return set_model(st, &c, &m, rule);
        }
        state_msg(st, true, "model: refused: \"%s\" is neither a preset nor a size such as 70B", text);
        return -1;
    }
    case TF_GPUS:
        if (want_int(st, f, text, &v))
            return -1;
        c.gpus = v;
        break;
    case TF_GPU: return set_gpu(st, &c, text);
    case TF_GPN:
        if (want_int(st, f, text, &v))
            return -1;
        return set_gpn(st, &c, f, v);
    case TF_TOKENS:
        if (util_parse_count(text, &d) != 0 || d < 1e6) {
            state_msg(st, true, "tokens: refused: expected a count >= 1M such as 300B, got \"%s\"", text);
            return -1;
        }
        c.opts.tokens = d;
        break;
    case TF_PRICE: {
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
    default: return -1;
    }
    return apply(st, &c, f, false);
}

/* ---- init, pin, plans, keys ---- */

void state_init(TuiState *st, const Scenario *in, double price)
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

void state_run_predict(const TuiState *st, Cost *c, char *what, int len)
{
    const TuiRun *run = &st->run;
    if (run->has_plan) {
        *c = run->plan_cost;
        snprintf(what, len, "the plan it ran, on %s", run->plan_hw);
        return;
    }
    char err[256];
    Layout lo = run->layout;
    if (run->has_layout && layout_check(&lo, &run->model, &st->in.hw, err, sizeof err) == 0) {
        cost(&run->model, &st->in.hw, &lo, &st->in.opts, c);
        snprintf(what, len, "its layout on %s", st->in.hw.name);
        return;
    }
    *c = st->cost;
    snprintf(what, len, "the knobs on the left");
}

double state_cost_dollars(const Cost *c, double price) { return c->train.gpu_hours * price; }

int state_load_plan(TuiState *st, int i)
{
    if (i < 0 || i >= st->n_plans) {
        state_msg(st, true, "no plan to load");
        return -1;
    }
    Scenario c = st->in;
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

void state_save_key(TuiState *st)
{
    struct stat sb;
    if (!st->save_confirm && stat(st->save_path, &sb) == 0) {
        st->save_confirm = true;
        state_msg(st, true, "%s exists: press s again to overwrite it (any other key keeps it)", st->save_path);
        return;
    }
    st->save_confirm = false;
    char err[512];
    if (state_save_plan(st, st->save_path, err, sizeof err) != 0) {
        state_msg(st, true, "save: %s", err);
        return;
    }
    if (!st->cost.fits) {
        char over[32];
        state_msg(st, true, "saved %s, but it does NOT fit: stage %d is %s over the GPU's memory", st->save_path,
                  st->cost.peak_stage, util_gib(st->cost.peak_bytes - st->cost.capacity_bytes, over, sizeof over));
        return;
    }
    state_msg(st, false, "saved %s (Megatron: m, or ultraplan export %s --format megatron)", st->save_path,
              st->save_path);
}

void state_plans_arrived(TuiState *st)
{
    if (!st->load_best || st->n_plans == 0)
        return;
    st->load_best = false;
    if (state_load_plan(st, 0) == 0)
        state_msg(st, false, "opened on plan 1, the fastest layout that fits (Tab: the others)");
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
    st->sel = (st->sel + dir + state_field_count()) % state_field_count();
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
    if (tui_key_action(key) != A_SAVE || st->editing || st->help)
        st->save_confirm = false;
    if (st->help) {
        st->help = false;
        return tui_key_action(key) == A_QUIT ? A_QUIT : A_NONE;
    }
    if (st->editing)
        return edit_key(st, key);
    TuiAction a = tui_key_action(key);
    if (a == A_NONE && st->focus == FOCUS_INPUTS && key < 127 && (isdigit(key) || key == '.') &&
        state_field_editable(st->sel)) {
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
        } else if (!state_field_editable(st->sel)) {
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
