/* draw.h — the terminal: curses start and stop, colour roles, blitting a
 * Canvas, reading keys as TuiKey codes. The only file that includes curses.
 *
 * draw_end() is safe at any time and more than once (atexit calls it), so
 * every exit path leaves the terminal as it was found.
 */
#ifndef ULTRAPLAN_TUI_DRAW_H
#define ULTRAPLAN_TUI_DRAW_H

#include <stdbool.h>

#include "canvas.h"

/* Start curses on the terminal. 0 ok, -1 with err (no terminal, bad TERM). */
int draw_init(bool color, char *err, int errlen);
void draw_end(void);

/* The terminal's size; after a resize, tell curses first (draw_resize). */
void draw_size(int *rows, int *cols);
void draw_resize(void);

void draw_canvas(const Canvas *cv, bool force);

/* The next key as a TuiKey code, or -1 after timeout_ms without one. */
int draw_key(int timeout_ms);

#endif
