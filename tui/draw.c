/* draw.c — curses: colour roles, canvas blit, keys (see draw.h). */
#include "draw.h"

#include <curses.h>
#include <locale.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <unistd.h>

static bool started;
static chtype role_attr[R_COUNT];

typedef struct {
    short fg, bg;        // -1 = terminal default
    chtype attr;         // added to the pair
    chtype mono;         // attribute without colours
} RoleStyle;

static const RoleStyle styles[R_COUNT] = {
    [R_NORMAL] = {-1, -1, 0, 0},
    [R_TITLE] = {COLOR_BLACK, COLOR_CYAN, 0, A_REVERSE},
    [R_BORDER] = {COLOR_BLUE, -1, 0, 0},
    [R_PANE_TITLE] = {COLOR_CYAN, -1, A_BOLD, A_BOLD},
    [R_FOCUS_TITLE] = {COLOR_YELLOW, -1, A_BOLD, A_BOLD | A_UNDERLINE},
    [R_LABEL] = {-1, -1, 0, 0},
    [R_VALUE] = {-1, -1, A_BOLD, A_BOLD},
    [R_SELECTED] = {COLOR_BLACK, COLOR_CYAN, 0, A_REVERSE},
    [R_EDIT] = {COLOR_BLACK, COLOR_YELLOW, 0, A_REVERSE | A_BOLD},
    [R_ERROR] = {COLOR_RED, -1, A_BOLD, A_BOLD},
    [R_WARN] = {COLOR_YELLOW, -1, 0, A_BOLD},
    [R_GOOD] = {COLOR_GREEN, -1, 0, 0},
    [R_BAD] = {COLOR_RED, -1, 0, A_UNDERLINE},
    [R_DIM] = {-1, -1, A_DIM, A_DIM},
    [R_HEAD] = {COLOR_CYAN, -1, 0, A_BOLD},
    [R_MEM_WEIGHTS] = {COLOR_BLACK, COLOR_BLUE, 0, 0},
    [R_MEM_GRADS] = {COLOR_BLACK, COLOR_CYAN, 0, 0},
    [R_MEM_OPTIM] = {COLOR_BLACK, COLOR_MAGENTA, 0, 0},
    [R_MEM_ACTS] = {COLOR_BLACK, COLOR_GREEN, 0, 0},
    [R_MEM_BUFFERS] = {COLOR_BLACK, COLOR_YELLOW, 0, 0},
    [R_MEM_OVERHEAD] = {COLOR_BLACK, COLOR_WHITE, 0, 0},
    [R_OVERFLOW] = {COLOR_WHITE, COLOR_RED, A_BOLD, A_REVERSE | A_BOLD},
    [R_CAPACITY] = {COLOR_RED, -1, A_BOLD, A_BOLD},
    [R_BAR] = {COLOR_GREEN, -1, 0, 0},
};

int draw_init(bool color, char *err, int errlen)
{
    if (!isatty(STDIN_FILENO) || !isatty(STDOUT_FILENO)) {
        snprintf(err, errlen, "the TUI needs a terminal (use --snapshot for plain text)");
        return -1;
    }
    setlocale(LC_CTYPE, "");   /* line drawing in UTF-8 terminals */
    if (!newterm(NULL, stdout, stdin)) {
        snprintf(err, errlen, "cannot start curses on TERM=%s", getenv("TERM") ? getenv("TERM") : "(unset)");
        return -1;
    }
    started = true;
    cbreak();
    noecho();
    nonl();
    keypad(stdscr, TRUE);
    curs_set(0);
    set_escdelay(25);
    bool colors = color && has_colors() && start_color() == OK;
    if (colors)
        use_default_colors();
    for (int r = 0; r < R_COUNT; r++) {
        if (colors) {
            init_pair((short)(r + 1), styles[r].fg, styles[r].bg);
            role_attr[r] = COLOR_PAIR(r + 1) | styles[r].attr;
        } else {
            role_attr[r] = styles[r].mono;
        }
    }
    return 0;
}

void draw_end(void)
{
    if (!started)
        return;
    started = false;
    curs_set(1);
    endwin();
    fflush(stdout);
}

void draw_size(int *rows, int *cols) { getmaxyx(stdscr, *rows, *cols); }

void draw_resize(void)
{
    struct winsize ws;
    if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_row > 0 && ws.ws_col > 0)
        resizeterm(ws.ws_row, ws.ws_col);
}

static chtype cell(char c)
{
    switch (c) {
    case CV_HLINE: return ACS_HLINE;
    case CV_VLINE: return ACS_VLINE;
    case CV_ULCORNER: return ACS_ULCORNER;
    case CV_URCORNER: return ACS_URCORNER;
    case CV_LLCORNER: return ACS_LLCORNER;
    case CV_LRCORNER: return ACS_LRCORNER;
    default: return (chtype)(unsigned char)c;
    }
}

void draw_canvas(const Canvas *cv, bool force)
{
    int rows, cols;
    getmaxyx(stdscr, rows, cols);
    if (force)
        clearok(curscr, TRUE);
    for (int y = 0; y < cv->rows && y < rows; y++)
        for (int x = 0; x < cv->cols && x < cols; x++) {
            /* the bottom-right cell would scroll some terminals */
            if (y == rows - 1 && x == cols - 1)
                continue;
            size_t i = (size_t)y * cv->cols + x;
            mvaddch(y, x, cell(cv->ch[i]) | role_attr[cv->role[i]]);
        }
    refresh();
}

int draw_key(int timeout_ms)
{
    timeout(timeout_ms);
    int c = getch();
    switch (c) {
    case ERR: return -1;
    case KEY_UP: return TK_UP;
    case KEY_DOWN: return TK_DOWN;
    case KEY_LEFT: return TK_LEFT;
    case KEY_RIGHT: return TK_RIGHT;
    case KEY_PPAGE: return TK_PGUP;
    case KEY_NPAGE: return TK_PGDN;
    case KEY_HOME: return TK_HOME;
    case KEY_END: return TK_END;
    case KEY_F(1): return TK_F1;
    case KEY_F(10): return TK_F10;
    case KEY_ENTER: case '\r': return TK_ENTER;
    case KEY_BACKSPACE: case 8: return TK_BACKSPACE;
    case KEY_RESIZE: return TK_RESIZE;
    case 12: return TK_CTRL_L;
    default: return c >= 0 && c < 256 ? c : -1;
    }
}
