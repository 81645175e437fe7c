/* state.h — what the TUI shows and edits, without a terminal.
 *
 * A TuiState holds the inputs (model, hardware, layout knobs, budget, price),
 * their evaluated Cost and its 80 % error band, an optional pinned baseline, the planner's plans as
 * plain rows and the run being followed. Keys arrive as TuiKey codes (not
 * curses codes) and go through one key table; every edit is applied to a
 * copy, checked with layout_check and committed only when it passes, so a
 * refused value leaves the state as it was and says why in `msg`.
 *
 * Nothing here draws, sleeps, threads or touches files except the explicit
 * state_save_plan; the event loop in tui.c owns those.
 */
#ifndef ULTRAPLAN_TUI_STATE_H
#define ULTRAPLAN_TUI_STATE_H

#include <stdbool.h>

#include "band.h"
#include "cost.h"
#include "knobs.h"
#include "scenario.h"

/* The rows of the Inputs pane: the TUI's own rows (what the question is
 * about: model, GPUs, GPU type, GPUs per node, token budget, price) and one
 * row per knob that the knob table (scenario/knobs.h) gives a TUI row,
 * ordered by their row numbers. A TuiField is a row index. */
typedef int TuiField;
typedef enum { TF_MODEL, TF_GPUS, TF_GPU, TF_GPN, TF_TOKENS, TF_PRICE, TF_OWN_COUNT } TuiOwnField;
#define TUI_MAX_FIELDS (TF_OWN_COUNT + KNOB_COUNT)

int state_field_count(void);
TuiField state_field_own(TuiOwnField f);
TuiField state_field_knob(KnobId k);    // -1 when the knob has no TUI row


/* Keys as the state understands them; printable ASCII is itself. */
enum {
    TK_NONE = 0, TK_TAB = '\t', TK_ENTER = '\n', TK_ESC = 27, TK_BACKSPACE = 127,
    TK_UP = 0x100, TK_DOWN, TK_LEFT, TK_RIGHT, TK_PGUP, TK_PGDN, TK_HOME, TK_END,
    TK_F1, TK_F10, TK_CTRL_L, TK_RESIZE,
};

typedef enum {
    A_NONE, A_UP, A_DOWN, A_INC, A_DEC, A_EDIT, A_FOCUS, A_VIEW, A_PIN, A_SAVE, A_MEGATRON,
    A_REPLAN, A_CANCEL, A_HELP, A_REDRAW, A_QUIT, A_COUNT
} TuiAction;

typedef struct {
    int key;               // TuiKey code
    const char *name;      // as the help overlay prints it
    TuiAction action;
    const char *help;      // one line
} TuiKeyBinding;

/* The key table: the one place keys are bound. */
const TuiKeyBinding *tui_keys(int *n);
/* Action bound to a key; A_NONE when unbound. Digits, '.', letters while
 * editing are not in the table: state_key handles typing. */
TuiAction tui_key_action(int key);

typedef enum { FOCUS_INPUTS, FOCUS_PLANS } TuiFocus;
typedef enum { VIEW_TIME, VIEW_PLANS, VIEW_MONITOR, VIEW_COUNT } TuiView;  // compact layout's alternate pane

#define TUI_MAX_PLANS 16

/* One plan of the planner, reduced to what the pane shows and Enter loads. */
typedef struct {
    Layout layout;
    double mfu, days, peak_bytes, step_s;
    bool fits;
    char bottleneck[64];
} TuiPlanRow;

typedef enum { PLANS_IDLE, PLANS_WAITING, PLANS_RUNNING, PLANS_DONE, PLANS_FAILED, PLANS_NONE } TuiPlanStatus;

#define TUI_RUN_HIST 256

/* What --follow read from a run.json (ultraplan.run/1); every field optional. */
typedef struct {
    bool active;                 // --follow given
    bool loaded;                 // at least one good read
    char path[256];
    char err[256];               // last read problem ("" when fine)
    int steps;                   // steps recorded
    int n;                       // entries in the history below (the last n steps)
    double time_s[TUI_RUN_HIST]; // step seconds, < 0 = missing
    double loss[TUI_RUN_HIST];   // < 0 = missing
    double mfu[TUI_RUN_HIST];    // fraction, < 0 = missing
    char status[32];             // "running", "done", ... if the file says
    long long stamp_mtime_ns;    // the file's mtime at the last good read, ns
    long long stamp_size;        // and its size, bytes
    /* what the run is a run of, for its prediction (state_run_predict) */
    bool has_layout;             // run.json's "model" and "layout" read back
    ModelSpec model;
    Layout layout;
    bool has_plan;               // the plan file run.json names, read (plan_cost is its prediction)
    Cost plan_cost;
    char plan_hw[48];            // its hardware profile's name
} TuiRun;

typedef struct {
    Scenario in;                 // model, hw, layout, recompute, opts, gpus
    int gpn_override;            // --gpus-per-node / edited; 0 = the profile's
    double price;                // $ per GPU-hour
    bool rc_mixed;               // per-stage recomputation from a plan (not one uniform mode)
    Cost cost;                   // of `in`
    Band band;                   // its 80 % error band (calib/band.h); runs 0 = none

    bool pinned;
    Scenario pin_in;
    double pin_price;
    Cost pin_cost;

    TuiFocus focus;
    TuiView view;
    int sel;                     // selected input field
    bool editing;
    char edit[64];               // typed text while editing
    bool help;                   // overlay shown
    char msg[256];               // status line
    bool msg_error;
    int bad_field;               // field whose last change was refused; -1 none

    /* plans, filled by the event loop from the planner thread */
    TuiPlanStatus plan_status;
    char plan_note[1024];        // infeasibility reason or error (the planner's whole explanation)
    TuiPlanRow plans[TUI_MAX_PLANS];
    int n_plans;
    int plan_sel;
    unsigned problem_gen;        // bumps when an input the planner depends on changes

    TuiRun run;

    bool load_best;              // load plan 1 when the first plans arrive (no layout knob was given)
    bool save_confirm;           // `s` was pressed once over an existing file: again overwrites it
    char save_path[256];         // where `s` writes the plan
    char megatron_path[256];     // where `m` writes Megatron arguments
} TuiState;

/* Take over a resolved Scenario (scenario_finish done, layout checked) and evaluate. */
void state_init(TuiState *st, const Scenario *in, double price);

/* Re-evaluate cost() of the current inputs and its error band (the per-key work). */
void state_eval(TuiState *st);

/* Handle one key. Returns the action the caller must carry out (A_QUIT,
 * A_SAVE, A_MEGATRON, A_REPLAN, A_CANCEL, A_REDRAW), or A_NONE when the state
 * handled it itself. */
TuiAction state_key(TuiState *st, int key);

/* Field access: label, current value as text, whether it can be edited. */
const char *state_field_label(TuiField f);
const char *state_field_help(TuiField f);
void state_field_text(const TuiState *st, TuiField f, char *buf, int len);
void state_field_pin_text(const TuiState *st, TuiField f, char *buf, int len);   // "" when unpinned or unchanged
bool state_field_editable(TuiField f);

/* Change a field by one step (dir = +1 / -1), or to a typed value. 0 when
 * applied; -1 when refused, with the reason in st->msg and nothing changed. */
int state_step(TuiState *st, TuiField f, int dir);
int state_set(TuiState *st, TuiField f, const char *text);

/* Load plan i of the plans pane into the knobs. 0 or -1 (msg says why). */
int state_load_plan(TuiState *st, int i);

void state_pin(TuiState *st);     // pin the current state as the baseline
void state_unpin(TuiState *st);

/* What the Run pane holds the measurements against: the prediction of the
 * plan file the run names when it can be read, else the run's own model and
 * layout priced on the TUI's hardware, else the TUI's current knobs. `what`
 * says which, for the pane ("plan run.json", ...). */
void state_run_predict(const TuiState *st, Cost *c, char *what, int len);

/* Total price of the ideal run: GPU-hours × price. */
double state_cost_dollars(const Cost *c, double price);

/* Write the current plan (ultraplan.plan/1) to path. 0 or -1 with err. */
int state_save_plan(const TuiState *st, const char *path, char *err, int errlen);

/* `s`: save to st->save_path, asking first (a second `s`) when the file
 * exists, and warning when the plan does not fit; the outcome in st->msg. */
void state_save_key(TuiState *st);

/* The planner's plans have arrived in st->plans: load plan 1 when load_best. */
void state_plans_arrived(TuiState *st);

void state_msg(TuiState *st, bool error, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

#endif
