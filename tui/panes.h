/* panes.h — the TUI's panes drawn into a Canvas from a TuiState.
 *
 * Pure formatting: the same function feeds the terminal (draw.c), the
 * --snapshot text and the benchmark. Every pane fits whatever rectangle
 * layout.c gave it, dropping its least important lines first.
 */
#ifndef ULTRAPLAN_TUI_PANES_H
#define ULTRAPLAN_TUI_PANES_H

#include "canvas.h"
#include "layout.h"
#include "state.h"

/* Clear cv and draw every pane of `lay`, the status line and, when
 * st->help, the help overlay. */
void panes_render(const TuiState *st, const TuiLayout *lay, Canvas *cv);

/* The memory-kind letter of a stacked bar cell (W G O A B X). */
char panes_mem_letter(MemKind k);

#endif
