/* layout.h — where each pane goes, as a pure function of the terminal size.
 *
 * Two arrangements: wide (>= 110 columns and >= 34 rows) shows every pane at
 * once; compact (down to TUI_MIN_COLS x TUI_MIN_ROWS, which includes 80x24)
 * keeps Inputs and Memory and shows one of Time / Plans / Run below Memory,
 * chosen by the view. Below the minimum only a message fits. At 22 and 23
 * rows the Inputs pane is a row or two short of its fields and scrolls
 * (panes.c). No curses here: tests/test_tui_layout.c checks the rectangles.
 */
#ifndef ULTRAPLAN_TUI_LAYOUT_H
#define ULTRAPLAN_TUI_LAYOUT_H

#include <stdbool.h>

#include "state.h"

#define TUI_MIN_ROWS 22
#define TUI_MIN_COLS 64
#define TUI_WIDE_ROWS 34
#define TUI_WIDE_COLS 110
#define TUI_INPUTS_ROWS (state_field_count() + 2)   // one row per field plus the border

typedef struct {
    int y, x;     // top-left cell
    int h, w;     // rows, columns; 0 = not shown
} TuiRect;

typedef struct {
    bool too_small;      // only `status` is set: the screen says what size is needed
    bool compact;
    TuiRect title;       // one row
    TuiRect inputs, memory, time, plans, monitor;   // bordered panes
    TuiRect status;      // one row: message or typing
} TuiLayout;

/* Fill `out` for a rows x cols terminal. `monitor`: --follow is on; `view`:
 * the compact arrangement's lower-right pane. */
void tui_layout(int rows, int cols, bool monitor, TuiView view, TuiLayout *out);

bool tui_rect_visible(const TuiRect *r);

#endif
