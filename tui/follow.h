/* follow.h — read a running execution's run.json for the Run pane.
 *
 * The executor rewrites run.json (format "ultraplan.run/1") as it goes; the
 * TUI re-reads it when its mtime or size changes. Every field is optional:
 * steps[].time_s (or step_s), steps[].loss, steps[].mfu and a top-level
 * status are used when present, anything else is ignored. A file that is
 * missing or half-written keeps the last good reading and says why in err.
 */
#ifndef ULTRAPLAN_TUI_FOLLOW_H
#define ULTRAPLAN_TUI_FOLLOW_H

#include <stdbool.h>

#include "state.h"

/* Start following path (run->active, path set; nothing read yet). */
void follow_init(TuiRun *run, const char *path);

/* Parse run.json text into run. 0 ok, -1 with run->err (run keeps its
 * previous steps). */
int follow_parse(TuiRun *run, const char *text);

/* Re-read the file if it changed since the last call. True when run changed. */
bool follow_poll(TuiRun *run);

#endif
