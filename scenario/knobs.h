/* knobs.h — every layout and model-shape knob, described once.
 *
 * A Knob row names the knob (its command-line flag, its plan.json key, its
 * column in measured-run CSVs), says where its value lives (a ModelSpec,
 * Layout or Scenario field), its type and range, the planner fix bit it
 * sets when the user gives it, its TUI row and how the TUI steps it, and its
 * help line. The argument parser (cli/args.c), --help, plan.json read and
 * write (planfile.c), the TUI's Inputs pane (tui/state.c) and the CSV reader
 * of measured runs (calib/) all walk this table, so a new knob is one row
 * here plus its physics in model/ and its tests.
 *
 * Pure data and small accessors: no printing, no globals that change.
 */
#ifndef ULTRAPLAN_SCENARIO_KNOBS_H
#define ULTRAPLAN_SCENARIO_KNOBS_H

#include <stdbool.h>
#include <stddef.h>

/* Which layout knobs the user fixed: the planner searches only the others. */
typedef enum {
    FIX_TP = 1 << 0, FIX_PP = 1 << 1, FIX_VP = 1 << 2, FIX_CP = 1 << 3, FIX_DP = 1 << 4,
    FIX_SP = 1 << 5, FIX_MBS = 1 << 6, FIX_GBS = 1 << 7, FIX_OPT = 1 << 8, FIX_RC = 1 << 9,
    FIX_PREC = 1 << 10, FIX_FLASH = 1 << 11, FIX_STAGES = 1 << 12, FIX_EP = 1 << 13, FIX_ETP = 1 << 14,
} KnobFix;

/* The knobs, in table order: within a group, the order of plan.json's keys
 * and of --help. */
typedef enum {
    /* model shape (ModelSpec) */
    K_LAYERS, K_HIDDEN, K_HEADS, K_KV_HEADS, K_HEAD_DIM, K_FFN, K_VOCAB, K_VOCAB_DIV, K_SEQ,
    K_MLP, K_NORM, K_POS, K_BIAS, K_TIED, K_DROPOUT, K_ROPE_THETA, K_ROPE_SCALING,
    /* mixture of experts, multi-token prediction, multi-head latent attention (ModelSpec) */
    K_EXPERTS, K_TOPK, K_MOE_FFN, K_SHARED_FFN, K_MOE_FREQ, K_MOE_FIRST_DENSE, K_MTP_LAYERS, K_ATTN,
    K_Q_LORA_RANK, K_KV_LORA_RANK, K_QK_NOPE_DIM, K_QK_ROPE_DIM, K_V_HEAD_DIM, K_CAPACITY_FACTOR,
    K_ROUTER_GROUPS, K_ROUTER_GROUP_TOPK,
    /* GPT-OSS: sliding-window attention, attention sinks, the clamped gated activation (ModelSpec) */
    K_WINDOW, K_WINDOW_SKIP_FREQ, K_SINKS, K_ACT_CLAMP,
    /* layout (Layout) */
    K_DP, K_TP, K_PP, K_VP, K_CP, K_EP, K_ETP, K_MOE_IMBALANCE, K_MOE_DISPATCHER, K_MOE_A2A_OVERLAP,
    K_MOE_SHARED_OVERLAP, K_SP, K_MBS, K_GBS, K_MICROBATCHES, K_OPTIMIZER, K_PRECISION,
    K_GRAD_FP32, K_FLASH, K_OVERLAP_GRAD, K_OVERLAP_PARAM, K_TP_OVERLAP, K_CP_COMM, K_FLOPS, K_STAGE_LAYERS, K_FIRST_LAYERS, K_LAST_LAYERS, K_SPLIT_EMBED, K_SPLIT_LOSS, K_PP_LAYOUT, K_RC_MODULES,
    K_CUDA_GRAPH, K_CG_MODULES, K_FP8_RECIPE, K_MOE_ROUTER_PAD, K_MOE_DISPATCH_WIRE, K_MOE_COMBINE_WIRE, K_PP_SCHED,
    K_TORCH_COMPILE, K_FP8_PARAM_GATHER, K_FP8_DPA, K_PRECISION_AWARE_OPT, K_EXP_AVG_DTYPE, K_EXP_AVG_SQ_DTYPE,
    K_FULL_RC, K_SEL_RC, K_TARGET, K_STACK,
    /* scenario (Scenario): the uniform recomputation a layout's per-stage counts come from */
    K_RECOMPUTE,
    KNOB_COUNT
} KnobId;
_Static_assert(KNOB_COUNT <= 128, "KnobSet is a 128-bit mask");

__extension__ typedef unsigned __int128 KnobSet;   // bit KNOB_BIT(KnobId); 64 knobs were not enough
#define KNOB_BIT(id) ((KnobSet)1 << (id))

typedef enum {
    KNOB_INT,      // int field, min..max
    KNOB_DOUBLE,   // double field, dmin..dmax (knob_get_double / knob_set_double / knob_parse_double)
    KNOB_BOOL,     // bool field; `flag` turns it on, `neg_flag` off
    KNOB_ENUM,     // enum field (int-sized), values 0..count-1 named by value_name
    KNOB_LIST,     // int array of LAYOUT_MAX_PP, one per pipeline stage (pp entries in plan.json)
    KNOB_STR,      // char array of LAYOUT_PPL_LEN ("" = not set): knob_set_str / knob_get_str
    KNOB_DERIVED,  // computed from the others (json_value); written, never read
} KnobType;

typedef enum { KNOB_MODEL, KNOB_LAYOUT, KNOB_SCENARIO } KnobGroup;

/* How the TUI changes a knob with +/-. */
typedef enum {
    TUI_NONE,      // not in the TUI
    TUI_DOUBLE,    // x2 / /2
    TUI_SEARCH,    // +-1 until the layout resolves (pp, vp); resets the stage split
    TUI_CYCLE,     // next / previous enum value the hardware supports
    TUI_TOGGLE,    // on / off
    TUI_DERIVED,   // shown, not edited (dp)
} TuiStep;

typedef struct {
    KnobId id;
    const char *name;          // in messages and the TUI ("tp")
    KnobGroup group;
    KnobType type;
    size_t off;                // offset of the field in ModelSpec, Layout or Scenario (by group)
    /* command line */
    const char *flag;          // "--flag"; NULL = no flag
    const char *neg_flag;      // KNOB_BOOL: the flag that turns it off; KNOB_ENUM: a flag that sets alias_value
    int alias_value;
    const char *arg;           // the argument in --help ("N", "gelu|swiglu"), NULL for bools
    const char *expect;        // what a flag's value must be, for errors ("0, 1, 2 or 3"); NULL = derived
    const char *help;          // one line of --help, without the default
    const char *dflt;          // the default, as --help says it ("1", "on when tp > 1"); NULL = none to say
    bool searched;             // plan, sweep and the TUI's plans search it unless it is given
    /* value */
    int min, max;              // KNOB_INT and KNOB_LIST elements
    double dmin, dmax;         // KNOB_DOUBLE
    int count;                 // KNOB_ENUM: values 0..count-1
    const char *chars;         // KNOB_STR: the characters its text may hold (NULL = any printable)
    const char *(*value_name)(int v);             // KNOB_ENUM
    int (*value_parse)(const char *s, int *v);    // KNOB_ENUM: flag and JSON text -> value, 0 ok
    unsigned fix;              // KnobFix bit set when the user gives it (0: none)
    /* model knobs given over a preset: knobs derived from this one that are
     * reset (to 0 = derive again) unless given too; a custom shape needs
     * `custom_required` and starts from custom_default */
    KnobSet resets;
    bool custom_required;
    int custom_default;
    /* plan.json */
    const char *json;          // key in the "model" or "layout" object; NULL = not written
    bool json_optional;        // reading: absent keeps the default
    int (*json_value)(const void *obj);   // written instead of the field (derived values)
    /* measured-run CSVs */
    const char *csv;           // column name; NULL = no column
    /* TUI */
    const char *tui_label;     // NULL = not shown
    int tui_row;               // position among the TUI's rows (tui/state.c places its own rows too)
    TuiStep tui_step;
    bool tui_problem;          // changing it changes what the planner searches
    const char *tui_help;      // the TUI's help line; NULL = `help`
    void (*tui_text)(const void *obj, int v, char *buf, int len);         // value as the TUI shows it; NULL = knob_format
    int (*tui_check)(const void *obj, int v, char *err, int errlen);      // refuse a TUI edit (0 ok)
} Knob;

/* The row of a knob; every KnobId has one. */
const Knob *knob_get(KnobId id);

/* The knob whose flag or neg_flag is `flag` (without "--"); *neg says which. NULL if none. */
const Knob *knob_by_flag(const char *flag, bool *neg);
/* The knob of a group whose plan.json key or CSV column is `key`. NULL if none. */
const Knob *knob_by_json(KnobGroup g, const char *key);
const Knob *knob_by_csv(const char *column);

/* The field of a knob inside the object of its group (ModelSpec*, Layout* or
 * Scenario*). */
void *knob_field(const Knob *k, void *obj);
const void *knob_cfield(const Knob *k, const void *obj);

/* Int, bool and enum knobs as an int, and back. A KNOB_DOUBLE reads as its
 * value truncated and is set to (double)v: use the double accessors. */
int knob_get_int(const Knob *k, const void *obj);
void knob_set_int(const Knob *k, void *obj, int v);
/* Double knobs (any other kind: through the int accessors). */
double knob_get_double(const Knob *k, const void *obj);
void knob_set_double(const Knob *k, void *obj, double v);
/* Copy a single-valued knob's field (any kind but KNOB_LIST / KNOB_DERIVED)
 * from one object of its group to another. */
void knob_copy(const Knob *k, void *dst, const void *src);

/* Parse the text of a flag (or a TUI edit, or a CSV cell) into a value
 * (KNOB_INT, KNOB_ENUM; bools take on/off/true/false/1/0). 0 ok, -1 with
 * err "--flag: expected ..., got "text"" (`who` replaces "--flag" when
 * not NULL; "" leaves the prefix out). */
int knob_parse(const Knob *k, const char *text, int *v, const char *who, char *err, int errlen);

/* A KNOB_DOUBLE's text ("1.25"; strtod's forms, finite, dmin..dmax) into *v;
 * 0 ok, -1 with err as knob_parse words it. */
int knob_parse_double(const Knob *k, const char *text, double *v, const char *who, char *err, int errlen);

/* A KNOB_STR's text (never NULL), and setting it: at most LAYOUT_PPL_LEN-1
 * characters of E, t, m, L, '|', '(', ')', '*', digits and commas (the
 * grammar is layout_pp_parse's, checked with pp by layout_check); 0 ok, -1
 * with err as knob_parse words it. */
const char *knob_get_str(const Knob *k, const void *obj);
int knob_set_str(const Knob *k, void *obj, const char *text, const char *who, char *err, int errlen);

/* A value as text ("8", "zero1", "on"). */
void knob_format(const Knob *k, int v, char *buf, int len);
/* A double knob's value as text ("1.2", shortest %g that reads back the same). */
void knob_format_double(double v, char *buf, int len);

/* "gelu or swiglu" / "\"gelu\" or \"swiglu\"" (quoted) for an enum's values. */
void knob_enum_list(const Knob *k, bool quoted, char *buf, int len);

#endif
