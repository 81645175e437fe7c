/* bench_tui.c — what one key press costs in the TUI for GPT-3 175B on 512
 * H100s (tp 8, pp 8): the knob edit with its layout check and cost()
 * re-evaluation, and the same plus drawing every pane into a 120x40 canvas
 * (everything but the terminal write). Prints milliseconds per key press;
 * the budget is 50 ms. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "args.h"
#include "canvas.h"
#include "layout.h"
#include "panes.h"
#include "state.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int flag(CliInputs *in, const char *name, const char *arg)
{
    char err[256];
    const struct option *o = args_common_options();
    for (int k = 0; o[k].name; k++)
        if (!strcmp(o[k].name, name) && args_handle(in, o[k].val, arg, err, sizeof err) == 0)
            return 0;
    fprintf(stderr, "bench_tui: --%s %s refused\n", name, arg);
    return -1;
}

int main(int argc, char **argv)
{
    int iters = argc > 1 ? atoi(argv[1]) : 2000;
    if (iters < 2)
        iters = 2;
    CliInputs in;
    char err[256];
    args_init(&in);
    if (flag(&in, "params", "175B") || flag(&in, "gpus", "512") || flag(&in, "tp", "8") || flag(&in, "pp", "8") ||
        args_finish(&in, true, err, sizeof err) != 0) {
        fprintf(stderr, "bench_tui: %s\n", err);
        return 1;
    }
    TuiState *st = malloc(sizeof *st);
    Canvas cv;
    if (!st || canvas_init(&cv, 40, 120) != 0)
        return 1;
    state_init(st, &in.sc, 2.0);
    state_pin(st);   /* differences on: the most drawing */
    TuiLayout lay;
    tui_layout(40, 120, false, VIEW_TIME, &lay);

    /* each press: GPUs up or down (doubles/halves dp), then micro-batch */
    const TuiField keys[] = {state_field_own(TF_GPUS), state_field_own(TF_GPUS), state_field_knob(K_MBS),
                             state_field_knob(K_MBS), state_field_knob(K_RECOMPUTE), state_field_knob(K_RECOMPUTE)};
    int nk = (int)(sizeof keys / sizeof *keys), refused = 0;
    double t0 = now_s();
    for (int i = 0; i < iters; i++)
        refused += state_step(st, keys[i % nk], i % 2 ? -1 : +1) != 0;
    double edit = (now_s() - t0) / iters;

    t0 = now_s();
    for (int i = 0; i < iters; i++) {
        refused += state_step(st, keys[i % nk], i % 2 ? -1 : +1) != 0;
        panes_render(st, &lay, &cv);
    }
    double full = (now_s() - t0) / iters;

    t0 = now_s();
    for (int i = 0; i < iters; i++)
        state_eval(st);
    double eval = (now_s() - t0) / iters;

    printf("bench_tui: gpt3-175b on 512 x %s, tp 8 pp 8, %d presses\n", st->in.hw.name, iters);
    printf("  cost() re-evaluation          %8.4f ms\n", eval * 1e3);
    printf("  key press: edit + check + cost %8.4f ms\n", edit * 1e3);
    printf("  key press + draw 120x40 panes  %8.4f ms   (budget 50 ms: %s)\n", full * 1e3,
           full < 0.050 ? "ok" : "OVER");
    if (refused)
        printf("  (%d presses refused by the layout check)\n", refused);
    canvas_free(&cv);
    free(st);
    return full < 0.050 ? 0 : 1;
}
