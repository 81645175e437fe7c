/* canvas.c — a clipped character grid with colour roles (see canvas.h). */
#include "canvas.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

int canvas_init(Canvas *cv, int rows, int cols)
{
    memset(cv, 0, sizeof *cv);
    if (rows < 1 || cols < 1)
        return -1;
    cv->ch = malloc((size_t)rows * cols);
    cv->role = malloc((size_t)rows * cols);
    if (!cv->ch || !cv->role) {
        canvas_free(cv);
        return -1;
    }
    cv->rows = rows;
    cv->cols = cols;
    canvas_clear(cv);
    return 0;
}

void canvas_free(Canvas *cv)
{
    if (!cv)
        return;
    free(cv->ch);
    free(cv->role);
    memset(cv, 0, sizeof *cv);
}

void canvas_clear(Canvas *cv)
{
    memset(cv->ch, ' ', (size_t)cv->rows * cv->cols);
    memset(cv->role, R_NORMAL, (size_t)cv->rows * cv->cols);
}

static void set(Canvas *cv, int y, int x, char c, TuiRole role)
{
    if (y < 0 || y >= cv->rows || x < 0 || x >= cv->cols)
        return;
    cv->ch[(size_t)y * cv->cols + x] = c;
    cv->role[(size_t)y * cv->cols + x] = (unsigned char)role;
}

int canvas_put(Canvas *cv, int y, int x, int maxw, TuiRole role, const char *s)
{
    if (maxw <= 0)
        maxw = cv->cols - x;
    int n = 0;
    for (; s[n] && n < maxw; n++)
        set(cv, y, x + n, s[n] == '\n' || s[n] == '\t' ? ' ' : s[n], role);
    return n;
}

int canvas_printf(Canvas *cv, int y, int x, int maxw, TuiRole role, const char *fmt, ...)
{
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    return canvas_put(cv, y, x, maxw, role, buf);
}

void canvas_fill(Canvas *cv, int y, int x, int n, char c, TuiRole role)
{
    for (int i = 0; i < n; i++)
        set(cv, y, x + i, c, role);
}

void canvas_box(Canvas *cv, const TuiRect *r, const char *title, TuiRole title_role)
{
    if (r->h < 2 || r->w < 2)
        return;
    int y1 = r->y + r->h - 1, x1 = r->x + r->w - 1;
    for (int x = r->x + 1; x < x1; x++) {
        set(cv, r->y, x, CV_HLINE, R_BORDER);
        set(cv, y1, x, CV_HLINE, R_BORDER);
    }
    for (int y = r->y + 1; y < y1; y++) {
        set(cv, y, r->x, CV_VLINE, R_BORDER);
        set(cv, y, x1, CV_VLINE, R_BORDER);
        canvas_fill(cv, y, r->x + 1, r->w - 2, ' ', R_NORMAL);
    }
    set(cv, r->y, r->x, CV_ULCORNER, R_BORDER);
    set(cv, r->y, x1, CV_URCORNER, R_BORDER);
    set(cv, y1, r->x, CV_LLCORNER, R_BORDER);
    set(cv, y1, x1, CV_LRCORNER, R_BORDER);
    if (title && *title && r->w > 6) {
        set(cv, r->y, r->x + 1, ' ', R_BORDER);
        int n = canvas_put(cv, r->y, r->x + 2, r->w - 5, title_role, title);
        set(cv, r->y, r->x + 2 + n, ' ', R_BORDER);
    }
}

static char plain(char c)
{
    switch (c) {
    case CV_HLINE: return '-';
    case CV_VLINE: return '|';
    case CV_ULCORNER: case CV_URCORNER: case CV_LLCORNER: case CV_LRCORNER: return '+';
    default: return c;
    }
}

void canvas_row_text(const Canvas *cv, int y, char *buf, int len)
{
    int n = 0;
    if (len < 1)
        return;
    if (y >= 0 && y < cv->rows)
        for (int x = 0; x < cv->cols && n + 1 < len; x++)
            buf[n++] = plain(cv->ch[(size_t)y * cv->cols + x]);
    while (n > 0 && buf[n - 1] == ' ')
        n--;
    buf[n] = 0;
}

void canvas_print(const Canvas *cv, FILE *f)
{
    char *line = malloc((size_t)cv->cols + 1);
    if (!line)
        return;
    for (int y = 0; y < cv->rows; y++) {
        canvas_row_text(cv, y, line, cv->cols + 1);
        fprintf(f, "%s\n", line);
    }
    free(line);
}
