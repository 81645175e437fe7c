/* tui.c — the event loop, signals, and the snapshot (see tui.h). */
#include "tui.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "canvas.h"
#include "draw.h"
#include "follow.h"
#include "layout.h"
#include "panes.h"
#include "fileio.h"
#include "fmt.h"
#include "planfile.h"
#include "search.h"

#define SEARCH_DEBOUNCE_S 0.3   // wait this long after the last change before searching
#define FOLLOW_EVERY_S 0.5      // re-check the followed run.json this often

static volatile sig_atomic_t quit_signal;    // the signal that asked us to quit, 0 none
static volatile sig_atomic_t resized;

static void on_quit(int sig) { quit_signal = sig; }
static void on_winch(int sig) { (void)sig; resized = 1; }

void tui_options_default(TuiOptions *o)
{
    o->color = true;
    o->plans = true;
    o->rows = 40;
    o->cols = 120;
    o->keys = NULL;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

bool tui_do_action(TuiState *st, TuiAction a)
{
    char err[512];
    switch (a) {
    case A_QUIT: return true;
    case A_SAVE: state_save_key(st); return false;
    case A_MEGATRON: {
        char *text = search_megatron_args(st);
        if (!text) {
            if (state_save_plan(st, st->save_path, err, sizeof err) != 0)
                state_msg(st, true, "save: %s", err);
            else
                state_msg(st, false, "saved %s; run: ultraplan export %s --format megatron", st->save_path,
                          st->save_path);
            return false;
        }
        if (util_write_atomic(st->megatron_path, text, err, sizeof err) != 0)
            state_msg(st, true, "Megatron arguments: %s", err);
        else
            state_msg(st, false, "saved Megatron-LM arguments to %s", st->megatron_path);
        free(text);
        return false;
    }
    default: return false;
    }
}

static void install_signals(struct sigaction old[4])
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sigemptyset(&sa.sa_mask);
    sa.sa_handler = on_quit;
    sigaction(SIGINT, &sa, &old[0]);
    sigaction(SIGTERM, &sa, &old[1]);
    sigaction(SIGHUP, &sa, &old[2]);
    sa.sa_handler = on_winch;
    sigaction(SIGWINCH, &sa, &old[3]);
}

static void restore_signals(const struct sigaction old[4])
{
    sigaction(SIGINT, &old[0], NULL);
    sigaction(SIGTERM, &old[1], NULL);
    sigaction(SIGHUP, &old[2], NULL);
    sigaction(SIGWINCH, &old[3], NULL);
}

/* Canvas sized to the terminal; re-made on resize. */
static int fit_canvas(Canvas *cv)
{
    int rows, cols;
    draw_size(&rows, &cols);
    if (cv->rows == rows && cv->cols == cols)
        return 0;
    canvas_free(cv);
    return canvas_init(cv, rows < 1 ? 1 : rows, cols < 1 ? 1 : cols);
}

int tui_run(TuiState *st, const TuiOptions *o, char *err, int errlen)
{
    struct sigaction old[4];
    quit_signal = resized = 0;
    install_signals(old);   /* before curses, so curses keeps its hands off them */
    atexit(draw_end);
    if (draw_init(o->color, err, errlen) != 0) {
        restore_signals(old);
        return 1;
    }
    TuiSearch *search = o->plans ? search_new() : NULL;
    if (!o->plans)
        snprintf(st->plan_note, sizeof st->plan_note, "plan search off (--no-plans)");
    Canvas cv = {0};
    unsigned searched = st->problem_gen - 1, seen = st->problem_gen;
    double changed_at = now_s() - SEARCH_DEBOUNCE_S, followed_at = 0;
    bool dirty = true, force = false;
    int rc = 0;
    while (!quit_signal) {
        double t = now_s();
        if (resized) {
            resized = 0;
            draw_resize();
            dirty = force = true;
        }
        if (st->problem_gen != seen) {
            seen = st->problem_gen;
            changed_at = t;
            if (search)
                search_cancel(search);
        }
        if (search && searched != st->problem_gen && t - changed_at >= SEARCH_DEBOUNCE_S) {
            searched = st->problem_gen;
            search_start(search, &st->in);
            st->plan_status = PLANS_WAITING;
            dirty = true;
        }
        if (search && search_poll(search, st))
            dirty = true;
        if (st->run.active && t - followed_at >= FOLLOW_EVERY_S) {
            followed_at = t;
            dirty |= follow_poll(&st->run);
        }
        if (dirty) {
            if (fit_canvas(&cv) != 0) {
                snprintf(err, errlen, "out of memory");
                rc = 1;
                break;
            }
            TuiLayout lay;
            tui_layout(cv.rows, cv.cols, st->run.active, st->view, &lay);
            panes_render(st, &lay, &cv);
            draw_canvas(&cv, force);
            dirty = force = false;
        }
        int key = draw_key(100);
        if (key < 0)
            continue;
        dirty = true;
        if (key == TK_RESIZE) {
            force = true;
            continue;
        }
        TuiAction a = state_key(st, key);
        if (a == A_REDRAW) {
            force = true;
        } else if (a == A_REPLAN) {
            searched = st->problem_gen - 1;
            changed_at = 0;
            if (!search)
                state_msg(st, true, "plan search is off (--no-plans)");
            else
                state_msg(st, false, "searching the plans again...");
        } else if (a == A_CANCEL) {
            if (search && (st->plan_status == PLANS_RUNNING || st->plan_status == PLANS_WAITING)) {
                search_cancel(search);
                searched = st->problem_gen;   /* do not restart it */
                state_msg(st, false, "plan search cancelled");
            }
        } else if (tui_do_action(st, a)) {
            break;
        }
    }
    draw_end();
    search_free(search);
    canvas_free(&cv);
    restore_signals(old);
    return rc;
}

/* "<down>" and friends in --keys; other characters are themselves. */
static int next_key(const char **p)
{
    static const struct { const char *name; int key; } names[] = {
        {"<up>", TK_UP}, {"<down>", TK_DOWN}, {"<left>", TK_LEFT}, {"<right>", TK_RIGHT},
        {"<enter>", TK_ENTER}, {"<tab>", TK_TAB}, {"<esc>", TK_ESC}, {"<bs>", TK_BACKSPACE},
        {"<lt>", '<'},
    };
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        size_t n = strlen(names[i].name);
        if (!strncmp(*p, names[i].name, n)) {
            *p += n;
            return names[i].key;
        }
    }
    if (**p == '<')
        return -1;
    return (unsigned char)*(*p)++;
}

int tui_snapshot(TuiState *st, const TuiOptions *o, FILE *f, char *err, int errlen)
{
    if (st->run.active)
        follow_poll(&st->run);
    bool plans = o->plans && search_available();
    if (plans)
        search_now(&st->in, st);
    else if (!o->plans)
        snprintf(st->plan_note, sizeof st->plan_note, "plan search off (--no-plans)");
    else
        search_poll(NULL, st);
    unsigned gen = st->problem_gen;
    for (const char *p = o->keys ? o->keys : ""; *p;) {
        const char *at = p;
        int key = next_key(&p);
        if (key < 0) {
            snprintf(err, errlen, "--keys: unknown key name at \"%.20s\" (use <up> <down> <left> <right> "
                     "<enter> <tab> <esc> <bs> <lt>)", at);
            return 1;
        }
        TuiAction a = state_key(st, key);
        /* the search the interactive loop would run after a change */
        if (plans && (st->problem_gen != gen || a == A_REPLAN)) {
            search_now(&st->in, st);
            gen = st->problem_gen;
        }
        if (tui_do_action(st, a))
            break;
    }
    Canvas cv;
    if (canvas_init(&cv, o->rows, o->cols) != 0) {
        snprintf(err, errlen, "--rows/--cols: cannot make a %dx%d screen", o->cols, o->rows);
        return 1;
    }
    TuiLayout lay;
    tui_layout(cv.rows, cv.cols, st->run.active, st->view, &lay);
    if (lay.too_small) {   /* the screen would only say so: an error, not a picture */
        canvas_free(&cv);
        snprintf(err, errlen, "--rows %d --cols %d: too small; the TUI needs at least %d columns by %d rows", o->rows,
                 o->cols, TUI_MIN_COLS, TUI_MIN_ROWS);
        return 2;
    }
    panes_render(st, &lay, &cv);
    canvas_print(&cv, f);
    canvas_free(&cv);
    return 0;
}
