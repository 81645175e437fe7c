/* tui.h — the interactive TUI and its plain-text snapshot.
 *
 * tui_run owns the terminal: signal handlers only set flags, the event loop
 * polls keys with a timeout, re-evaluates on every change, runs the planner
 * on a worker thread and re-reads a followed run.json; the terminal is
 * restored on every way out (return, exit through atexit, SIGINT, SIGTERM,
 * SIGHUP). tui_snapshot does the same work without a terminal.
 */
#ifndef ULTRAPLAN_TUI_TUI_H
#define ULTRAPLAN_TUI_TUI_H

#include <stdbool.h>
#include <stdio.h>

#include "state.h"

typedef struct {
    bool color;           // --no-color clears it
    bool plans;           // run the planner (--no-plans clears it)
    int rows, cols;       // snapshot size (default 40 x 120)
    const char *keys;     // snapshot: keys to replay first ("<down>", "<enter>", "<tab>", "<esc>", ...)
} TuiOptions;

void tui_options_default(TuiOptions *o);

/* Interactive. 0 on quit, 1 with err when the terminal cannot be used. */
int tui_run(TuiState *st, const TuiOptions *o, char *err, int errlen);

/* Plain text of the panes on f. 0 ok, 1 with err (a bad --keys). */
int tui_snapshot(TuiState *st, const TuiOptions *o, FILE *f, char *err, int errlen);

/* Carry out an action state_key handed back (save, Megatron, ...), with the
 * outcome in st->msg. Returns true for A_QUIT. */
bool tui_do_action(TuiState *st, TuiAction a);

#endif
