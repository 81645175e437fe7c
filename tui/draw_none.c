/* draw_none.c — draw.h when ncurses is not found: only --snapshot works. */
#include "draw.h"

#include <stdio.h>

int draw_init(bool color, char *err, int errlen)
{
    (void)color;
    snprintf(err, errlen, "built without ncurses (apt-get install libncurses-dev); --snapshot still works");
    return -1;
}

void draw_end(void) {}
void draw_size(int *rows, int *cols) { *rows = *cols = 0; }
void draw_resize(void) {}
void draw_canvas(const Canvas *cv, bool force) { (void)cv, (void)force; }
int draw_key(int timeout_ms) { (void)timeout_ms; return -1; }
