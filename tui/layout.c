/* layout.c — pane rectangles from the terminal size (see layout.h). */
#include "layout.h"

#include <string.h>

static TuiRect rect(int y, int x, int h, int w)
{
    TuiRect r = {y, x, h > 0 ? h : 0, w > 0 ? w : 0};
    if (!r.h || !r.w)
        r.h = r.w = 0;
    return r;
}

bool tui_rect_visible(const TuiRect *r) { return r->h > 0 && r->w > 0; }

static void wide(int rows, int cols, bool monitor, TuiLayout *o)
{
    const int lw = 42;                 // left column: inputs over time
    int avail = rows - 2;              // between title and status
    o->inputs = rect(1, 0, TUI_INPUTS_ROWS, lw);
    o->time = rect(1 + TUI_INPUTS_ROWS, 0, avail - TUI_INPUTS_ROWS, lw);
    int mh = avail / 2;                // right column: memory over plans (over the run)
    int rest = avail - mh;
    o->memory = rect(1, lw, mh, cols - lw);
    if (monitor) {
        int ph = rest - rest / 2;
        o->plans = rect(1 + mh, lw, ph, cols - lw);
        o->monitor = rect(1 + mh + ph, lw, rest - ph, cols - lw);
    } else {
        o->plans = rect(1 + mh, lw, rest, cols - lw);
    }
}

static void compact(int rows, int cols, bool monitor, TuiView view, TuiLayout *o)
{
    const int lw = 32;
    int avail = rows - 2;
    o->inputs = rect(1, 0, avail, lw);
    int alt = avail / 2 > 13 ? avail / 2 : 13;
    int mh = avail - alt;
    o->memory = rect(1, lw, mh, cols - lw);
    TuiRect lower = rect(1 + mh, lw, alt, cols - lw);
    if (view == VIEW_PLANS)
        o->plans = lower;
    else if (view == VIEW_MONITOR && monitor)
        o->monitor = lower;
    else
        o->time = lower;
}

void tui_layout(int rows, int cols, bool monitor, TuiView view, TuiLayout *out)
{
    memset(out, 0, sizeof *out);
    if (rows < TUI_MIN_ROWS || cols < TUI_MIN_COLS) {
        out->too_small = true;
        out->status = rect(rows > 0 ? rows - 1 : 0, 0, rows > 0 ? 1 : 0, cols);
        return;
    }
    out->title = rect(0, 0, 1, cols);
    out->status = rect(rows - 1, 0, 1, cols);
    if (rows >= TUI_WIDE_ROWS && cols >= TUI_WIDE_COLS) {
        wide(rows, cols, monitor, out);
    } else {
        out->compact = true;
        compact(rows, cols, monitor, view, out);
    }
}
