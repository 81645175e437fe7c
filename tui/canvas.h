/* canvas.h — a grid of cells, each a character and a colour role.
 *
 * The panes draw into a Canvas, never into curses: the same canvas is blitted
 * to the terminal by draw.c, printed as plain text by --snapshot, and timed
 * by the benchmark. Drawing clips to the grid; nothing here can write
 * outside it.
 */
#ifndef ULTRAPLAN_TUI_CANVAS_H
#define ULTRAPLAN_TUI_CANVAS_H

#include <stdio.h>

#include "layout.h"

/* Colour roles: draw.c maps each to a curses attribute, snapshots ignore them. */
typedef enum {
    R_NORMAL, R_TITLE, R_BORDER, R_PANE_TITLE, R_FOCUS_TITLE, R_LABEL, R_VALUE, R_SELECTED, R_EDIT,
    R_ERROR, R_WARN, R_GOOD, R_BAD, R_DIM, R_HEAD,
    R_MEM_WEIGHTS, R_MEM_GRADS, R_MEM_OPTIM, R_MEM_ACTS, R_MEM_BUFFERS, R_MEM_OVERHEAD,
    R_OVERFLOW, R_CAPACITY, R_BAR,
    R_COUNT
} TuiRole;

/* Line-drawing cells; printed as + - | in text, as ACS lines in curses. */
enum { CV_HLINE = 1, CV_VLINE, CV_ULCORNER, CV_URCORNER, CV_LLCORNER, CV_LRCORNER };

typedef struct {
    int rows, cols;
    char *ch;              // rows*cols characters (CV_* for lines)
    unsigned char *role;   // rows*cols TuiRole values
} Canvas;

int canvas_init(Canvas *cv, int rows, int cols);   // 0, or -1 out of memory
void canvas_free(Canvas *cv);
void canvas_clear(Canvas *cv);

/* Text at (y, x), at most maxw cells (<= 0: to the right edge). Returns the
 * cells written. */
int canvas_put(Canvas *cv, int y, int x, int maxw, TuiRole role, const char *s);
int canvas_printf(Canvas *cv, int y, int x, int maxw, TuiRole role, const char *fmt, ...)
    __attribute__((format(printf, 6, 7)));
void canvas_fill(Canvas *cv, int y, int x, int n, char c, TuiRole role);
/* A border around r with a title in its top edge. */
void canvas_box(Canvas *cv, const TuiRect *r, const char *title, TuiRole title_role);

/* Plain text, lines trimmed of trailing blanks. */
void canvas_print(const Canvas *cv, FILE *f);
/* One row as plain text into buf (trimmed). */
void canvas_row_text(const Canvas *cv, int y, char *buf, int len);

#endif
