/* knobs.h — every layout and model-shape knob, described once.
 *
 * A Knob row names the knob (the flag, the plan.json key, the CSV column),
 * says where its value lives in a Scenario, its type and range, the planner
 * fix bit it sets when the user gives it, its TUI row and step, and its help
 * line. The argument parser, --help, plan.json read and write, the TUI's
 * Inputs pane and the validation CSV reader are all driven by the table, so
 * a new knob is a row here plus its physics in model/.
 */
#ifndef ULTRAPLAN_SCENARIO_KNOBS_H
#define ULTRAPLAN_SCENARIO_KNOBS_H

/* Which layout knobs the user fixed: the planner searches only the others. */
typedef enum {
    FIX_TP = 1 << 0, FIX_PP = 1 << 1, FIX_VP = 1 << 2, FIX_CP = 1 << 3, FIX_DP = 1 << 4,
    FIX_SP = 1 << 5, FIX_MBS = 1 << 6, FIX_GBS = 1 << 7, FIX_OPT = 1 << 8, FIX_RC = 1 << 9,
    FIX_PREC = 1 << 10, FIX_FLASH = 1 << 11, FIX_STAGES = 1 << 12,
} KnobFix;

#endif
