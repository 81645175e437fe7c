/* panes.c — Inputs, Memory, Time, Plans and Run panes drawn into a Canvas. */
#include "panes.h"
#include "fileio.h"
#include "fmt.h"
#include "planfile.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#define GIB 1073741824.0

static const char mem_letters[MEM_COUNT] = {'W', 'G', 'O', 'A', 'B', 'X'};
static const TuiRole mem_roles[MEM_COUNT] = {R_MEM_WEIGHTS, R_MEM_GRADS, R_MEM_OPTIM,
                                             R_MEM_ACTS, R_MEM_BUFFERS, R_MEM_OVERHEAD};
static const char *const mem_short[MEM_COUNT] = {"weights", "grads", "optim", "acts", "buffers", "overhead"};
/* three letters each, for narrow panes: abbreviations, not cut words */
static const char *const mem_abbr[MEM_COUNT] = {"wts", "grd", "opt", "act", "buf", "ovh"};
_Static_assert(MEM_COUNT == 6, "one letter, role and name per memory kind");

char panes_mem_letter(MemKind k) { return mem_letters[k]; }

static const char *human(double v, char *buf, int len) { return util_si(v, 4, buf, len); }

/* A difference from the pin, right-aligned at x_end. `lower_better` picks
 * the colour; `rel` prints percent instead of the unit. */
static void diff(Canvas *cv, int y, int x_end, double now, double then, bool lower_better, bool rel,
                 const char *unit)
{
    double d = now - then;
    if (!isfinite(d) || fabs(d) <= 1e-9 * (fabs(then) + 1e-30))
        return;
    char buf[32];
    if (rel && then != 0)
        snprintf(buf, sizeof buf, "%+.1f%%", 100 * d / then);
    else
        snprintf(buf, sizeof buf, "%+.2f%s", d, unit);
    bool better = lower_better ? d < 0 : d > 0;
    int n = (int)strlen(buf);
    canvas_put(cv, y, x_end - n, n, better ? R_GOOD : R_BAD, buf);
}

/* ---- inputs ---- */

static void pane_inputs(const TuiState *st, const TuiRect *r, Canvas *cv)
{
    canvas_box(cv, r, "Inputs", st->focus == FOCUS_INPUTS ? R_FOCUS_TITLE : R_PANE_TITLE);
    int iw = r->w - 2, x = r->x + 1;
    int lw = 14, n = state_field_count(), vis = r->h - 2;
    /* more fields than rows (the least sizes): scroll so the selected one shows */
    int first = n > vis && st->sel >= vis ? st->sel - vis + 1 : 0;
    if (first > n - vis)
        first = n - vis > 0 ? n - vis : 0;
    for (int f = first; f < n && f < first + vis; f++) {
        int y = r->y + 1 + f - first;
        bool sel = st->focus == FOCUS_INPUTS && st->sel == f;
        char val[64], pin[64];
        state_field_text(st, (TuiField)f, val, sizeof val);
        state_field_pin_text(st, (TuiField)f, pin, sizeof pin);
        TuiRole lrole = f == st->bad_field ? R_ERROR : state_field_editable((TuiField)f) ? R_LABEL : R_DIM;
        if (sel)
            canvas_fill(cv, y, x, iw, ' ', R_SELECTED);
        canvas_printf(cv, y, x, lw, sel ? R_SELECTED : lrole, "%c%s", sel ? '>' : ' ', state_field_label((TuiField)f));
        if (sel && st->editing)
            canvas_printf(cv, y, x + lw, iw - lw, R_EDIT, "%s_", st->edit);
        else
            canvas_put(cv, y, x + lw, iw - lw, sel ? R_SELECTED : R_VALUE, val);
        int vn = (int)strlen(val);
        if (pin[0] && lw + vn + 3 + (int)strlen(pin) <= iw)
            canvas_printf(cv, y, x + iw - (int)strlen(pin) - 2, 0, R_DIM, "(%s)", pin);
    }
}

/* ---- memory ---- */

/* Which stages to show when they do not all fit: first, last, the peak and
 * evenly spaced ones in between, in order. */
static int pick_stages(const Cost *c, int room, int *out)
{
    int pp = c->pp;
    if (room <= 0)
        return 0;
    if (pp <= room) {
        for (int s = 0; s < pp; s++)
            out[s] = s;
        return pp;
    }
    char take[LAYOUT_MAX_PP] = {0};
    int n = 0;
    take[c->peak_stage] = 1, n++;
    if (room > 1 && !take[0]) take[0] = 1, n++;
    if (room > 2 && !take[pp - 1]) take[pp - 1] = 1, n++;
    for (int k = 1; n < room && k < room * 4; k++) {
        int s = (int)((double)k * pp / room);
        if (s < pp && !take[s])
            take[s] = 1, n++;
    }
    int m = 0;
    for (int s = 0; s < pp && m < room; s++)
        if (take[s])
            out[m++] = s;
    return m;
}

static void mem_bar(Canvas *cv, int y, int x, int bw, const StageMem *sm, double scale, double cap)
{
    double per = scale / bw;
    int cap_col = (int)floor(cap / per);
    for (int i = 0; i < bw; i++) {
        double mid = (i + 0.5) * per, acc = 0;
        int kind = -1;
        for (int k = 0; k < MEM_COUNT; k++) {
            acc += sm->bytes[k];
            if (mid < acc) {
                kind = k;
                break;
            }
        }
        if (kind >= 0 && mid > cap)
            canvas_put(cv, y, x + i, 1, R_OVERFLOW, "!");
        else if (kind >= 0)
            canvas_fill(cv, y, x + i, 1, mem_letters[kind], mem_roles[kind]);
        else if (i == cap_col)
            canvas_put(cv, y, x + i, 1, R_CAPACITY, "|");
        else
            canvas_put(cv, y, x + i, 1, R_DIM, ".");
    }
    if (cap_col >= 0 && cap_col < bw && sm->total > cap && cap_col == (int)floor(cap / per))
        canvas_put(cv, y, x + cap_col, 1, R_CAPACITY, "|");
}

static void pane_memory(const TuiState *st, const TuiRect *r, Canvas *cv)
{
    const Cost *c = &st->cost;
    char title[96];
    int iw = r->w - 2, ih = r->h - 2, x = r->x + 1, y = r->y + 1;
    /* rows for stages: the pane less the legend and the peak line */
    int room = ih - (ih >= 3 ? 1 : 0) - 1;
    if (c->pp > room && room > 0)   /* say when stages are left out, and which are shown */
        snprintf(title, sizeof title, r->w >= 60 ? "Memory per GPU, %d stages (%d shown: first, last, peak, between)"
                                                 : "Memory per GPU, %d stages, %d shown", c->pp, room);
    else
        snprintf(title, sizeof title, "Memory per GPU, %d stage%s", c->pp, c->pp == 1 ? "" : "s");
    canvas_box(cv, r, title, R_PANE_TITLE);
    if (ih < 1 || iw < 20)
        return;
    /* legend */
    int lx = x;
    bool roomy = iw >= 70;
    for (int k = 0; k < MEM_COUNT && ih >= 3; k++) {
        canvas_fill(cv, y, lx, 1, mem_letters[k], mem_roles[k]);
        lx += 1 + canvas_printf(cv, y, lx + 1, x + iw - lx - 1, R_LABEL, roomy ? " %s " : "=%s ",
                                roomy ? mem_short[k] : mem_abbr[k]);
    }
    if (ih >= 3) {
        if (roomy) {
            canvas_put(cv, y, lx, 1, R_OVERFLOW, "!");
            lx += 1 + canvas_put(cv, y, lx + 1, x + iw - lx - 1, R_LABEL, " over ");
        }
        canvas_put(cv, y, lx, 1, R_CAPACITY, "|");
        canvas_printf(cv, y, lx + 1, x + iw - lx - 1, R_LABEL, roomy ? " %.1f GiB" : "%.1fG", c->capacity_bytes / GIB);
        y++;
        ih--;
    }
    /* the peak line at the bottom */
    int yp = r->y + r->h - 2;
    int rows = ih - 1;
    char buf[160];
    double pk = c->peak_bytes / GIB, cap = c->capacity_bytes / GIB;
    if (c->fits && iw >= 60)
        snprintf(buf, sizeof buf, "peak %.2f GiB (stage %d) of %.2f GiB: fits, %.0f%%", pk, c->peak_stage, cap,
                 100 * pk / cap);
    else if (c->fits)
        snprintf(buf, sizeof buf, "peak %.2f GiB s%d of %.1f: fits %.0f%%", pk, c->peak_stage, cap, 100 * pk / cap);
    else if (iw >= 60)
        snprintf(buf, sizeof buf, "peak %.2f GiB (stage %d) of %.2f GiB: OVER by %.2f GiB", pk, c->peak_stage, cap,
                 pk - cap);
    else
        snprintf(buf, sizeof buf, "peak %.2f GiB s%d: OVER by %.2fG", pk, c->peak_stage, pk - cap);
    canvas_put(cv, yp, x, iw, c->fits ? R_GOOD : R_ERROR, buf);
    if (st->pinned)
        diff(cv, yp, x + iw, c->peak_bytes / GIB, st->pin_cost.peak_bytes / GIB, true, false, " GiB");
    /* stages */
    int pick[LAYOUT_MAX_PP];
    int n = pick_stages(c, rows, pick);
    double scale = c->capacity_bytes;
    for (int i = 0; i < n; i++)
        if (c->stage[pick[i]].total > scale)
            scale = c->stage[pick[i]].total;
    scale *= 1.02;
    int dw = st->pinned ? 8 : 0;
    int bw = iw - 10 - 11 - dw;
    for (int i = 0; i < n && bw >= 4; i++) {
        int s = pick[i];
        const StageMem *sm = &c->stage[s];
        int yy = y + i;
        canvas_printf(cv, yy, x, 10, s == c->peak_stage ? R_HEAD : R_LABEL, "s%-3d%3dL ", s, sm->layers);
        mem_bar(cv, yy, x + 10, bw, sm, scale, c->capacity_bytes);
        canvas_printf(cv, yy, x + 10 + bw, 11, sm->total > c->capacity_bytes ? R_ERROR : R_VALUE, "%7.2f GiB",
                      sm->total / GIB);
        if (st->pinned && s < st->pin_cost.pp)
            diff(cv, yy, x + iw, sm->total / GIB, st->pin_cost.stage[s].total / GIB, true, false, "G");
    }
}

/* ---- time ---- */

static const char *time_label(TimeKind k)
{
    static const char *const names[T_COUNT] = {"compute", "recompute", "TP comm", "CP comm",
                                              "PP comm", "bubble", "DP comm", "optimizer", "EP comm"};
    return names[k];
}

/* "label     value" and, when it fits in w, a secondary note. `left` is
 * the rows still free (nothing is drawn when none). */
static void summary_text(Canvas *cv, int y, int x, int w, int left, const char *label, const char *value,
                         const char *secondary)
{
    if (left <= 0)
        return;
    char line[128];
    int n = snprintf(line, sizeof line, "%-9s %11s", label, value);
    if (n + (int)strlen(secondary) <= w)
        snprintf(line + n, sizeof line - n, "%s", secondary);
    canvas_put(cv, y, x, w, R_VALUE, line);
}

static void summary_line(Canvas *cv, int y, int x, int w, int left, const char *label, const char *fmt, double v,
                         const char *secondary)
{
    char value[32];
    snprintf(value, sizeof value, fmt, v);
    char *p = value;
    while (*p == ' ')
        p++;
    summary_text(cv, y, x, w, left, label, p, secondary);
}

/* "16.9-26.9": both ends with the decimals the larger needs for 3 digits. */
static void range_text(double lo, double hi, char *buf, int len)
{
    int dec = hi >= 100 ? 0 : hi >= 10 ? 1 : hi >= 1 ? 2 : 3;
    snprintf(buf, len, "%.*f-%.*f", dec, lo, dec, hi);
}

/* The 80 % band of the step and of MFU (calib/band.h) on one row of width w:
 * "80% band  16.9-26.9 s  MFU 33.1-52.0 %" aligned with the rows above when
 * it fits, else "80%: 16.9-26.9 s, MFU 33-52%", else the step's band alone.
 * The row has no pinned difference, so w is the pane's whole width. False
 * when there is no band (nothing drawn, no row taken). */
static bool band_line(const Band *b, Canvas *cv, int y, int x, int w, int left)
{
    if (b->runs <= 0)
        return false;
    if (left <= 0)
        return true;
    char step[40], line[128];
    range_text(b->step_lo, b->step_hi, step, sizeof step);
    int n = snprintf(line, sizeof line, "%-9s %11s s  MFU %.1f-%.1f %%", "80% band", step, 100 * b->mfu_lo,
                     100 * b->mfu_hi);
    if (n > w)
        n = snprintf(line, sizeof line, "80%%: %s s, MFU %.0f-%.0f%%", step, 100 * b->mfu_lo, 100 * b->mfu_hi);
    if (n > w)
        snprintf(line, sizeof line, "80%%: %s s", step);
    canvas_put(cv, y, x, w, R_VALUE, line);
    return true;
}

static void pane_time(const TuiState *st, const TuiRect *r, Canvas *cv)
{
    const Cost *c = &st->cost, *p = &st->pin_cost;
    bool pin = st->pinned;
    canvas_box(cv, r, "Time per step", R_PANE_TITLE);
    int iw = r->w - 2, ih = r->h - 2, x = r->x + 1, y = r->y + 1, xe = x + iw;
    if (ih < 1 || iw < 24)
        return;
    int row = 0, tw = iw - (pin ? 9 : 0);   /* room left of the differences */
    char b1[32], b2[32], money[40], sec[64];
    double dollars = state_cost_dollars(c, st->price);
#define LINE(role, ...) (row < ih ? canvas_printf(cv, y + row, x, iw, role, __VA_ARGS__) : 0)
    double mb = cost_mfu_bf16_peak(&st->in.hw, &st->in.layout, c);
    if (mb >= 0) { /* fp8: MFU is against the fp8 peak; the bf16-peak figure first, HFU when it fits */
        snprintf(sec, sizeof sec, "  HFU %.2f %%  vs bf16 %.1f %%", 100 * c->thr.hfu, 100 * mb);
        if (21 + (int)strlen(sec) > tw)   /* 21: summary_text's "%-9s %11s" */
            snprintf(sec, sizeof sec, "  vs bf16 %.1f %%", 100 * mb);
    } else
        snprintf(sec, sizeof sec, "  HFU %.2f %%", 100 * c->thr.hfu);
    summary_line(cv, y + row, x, tw, ih - row, "step", "%9.3f s", c->step_s, "");
    if (pin && row < ih)
        diff(cv, y + row, xe, c->step_s, p->step_s, true, true, "");
    row++;
    summary_line(cv, y + row, x, tw, ih - row, "MFU", "%8.2f %%", 100 * c->thr.mfu, sec);
    if (pin && row < ih)
        diff(cv, y + row, xe, 100 * c->thr.mfu, 100 * p->thr.mfu, false, false, "pt");
    row++;
    if (band_line(&st->band, cv, y + row, x, iw, ih - row))
        row++;
    snprintf(sec, sizeof sec, "  %.0f TFLOP/s/GPU", c->thr.tflops_per_gpu);
    summary_text(cv, y + row, x, tw, ih - row, "tokens/s", human(c->thr.tokens_per_s, b1, sizeof b1), sec);
    if (pin && row < ih)
        diff(cv, y + row, xe, c->thr.tokens_per_s, p->thr.tokens_per_s, false, true, "");
    row++;
    snprintf(sec, sizeof sec, "  (%.1f w/ failures)", c->train.days_with_failures);
    summary_line(cv, y + row, x, tw, ih - row, "days", "%9.2f", c->train.days, sec);
    if (pin && row < ih)
        diff(cv, y + row, xe, c->train.days, p->train.days, true, false, "d");
    row++;
    snprintf(money, sizeof money, "$%s", util_si(dollars, 4, b2, sizeof b2));   /* as the difference beside it */
    snprintf(sec, sizeof sec, "  at $%.2f/GPU-h", st->price);
    summary_text(cv, y + row, x, tw, ih - row, "cost", money, sec);
    if (pin && row < ih)
        diff(cv, y + row, xe, dollars, state_cost_dollars(p, st->pin_price), true, true, "");
    row++;
    if (row > ih)
        row = ih;
    int nz = 0;
    for (int k = 0; k < T_COUNT; k++)
        nz += c->time[k] > 0 || (pin && p->time[k] > 0);
    bool all = ih - row >= T_COUNT + 1;
    if (ih - row >= (all ? T_COUNT : nz) + 1) {
        LINE(R_HEAD, "phase        s/step  share");
        row++;
    }
    int bar_x = 27, bar_w = iw - bar_x - (pin ? 8 : 0);
    for (int k = 0; k < T_COUNT && row < ih; k++) {
        if (!all && c->time[k] <= 0 && !(pin && p->time[k] > 0))
            continue;
        double share = c->step_s > 0 ? c->time[k] / c->step_s : 0;
        LINE(c->time[k] > 0 ? R_LABEL : R_DIM, "%-10s %8.3f %5.1f%%", time_label((TimeKind)k), c->time[k],
             100 * share);
        if (bar_w >= 4)
            canvas_fill(cv, y + row, x + bar_x, (int)lround(share * bar_w), '#', R_BAR);
        if (pin)
            diff(cv, y + row, xe, c->time[k], p->time[k], true, false, "s");
        row++;
    }
#undef LINE
}

/* ---- plans ---- */

static const char *plan_status_text(const TuiState *st, char *buf, int len)
{
    switch (st->plan_status) {
    case PLANS_IDLE: snprintf(buf, len, "Plans"); break;
    case PLANS_WAITING: snprintf(buf, len, "Plans: search starts..."); break;
    case PLANS_RUNNING: snprintf(buf, len, "Plans: searching (Esc cancels)"); break;
    case PLANS_DONE: snprintf(buf, len, "Plans: top %d (Tab, Enter loads)", st->n_plans); break;
    case PLANS_FAILED: snprintf(buf, len, "Plans: search failed"); break;
    case PLANS_NONE: snprintf(buf, len, "Plans: planner not built"); break;
    }
    return buf;
}

static const char *rc_short(const Layout *lo)
{
    bool full = false, sel = false, none = false;
    for (int s = 0; s < lo->pp; s++) {
        Recompute r = layout_stage_recompute(lo, s);
        full |= r == RECOMPUTE_FULL;
        sel |= r == RECOMPUTE_SELECTIVE;
        none |= r == RECOMPUTE_NONE || lo->full_rc[s] + lo->sel_rc[s] < lo->layers[s];
        if (lo->full_rc[s] > 0 && lo->sel_rc[s] > 0)
            full = sel = true;
    }
    return (full + sel + none) > 1 ? "mixed" : full ? "full" : sel ? "sel" : "none";
}

static void pane_plans(const TuiState *st, const TuiRect *r, Canvas *cv)
{
    char title[96];
    canvas_box(cv, r, plan_status_text(st, title, sizeof title),
               st->focus == FOCUS_PLANS ? R_FOCUS_TITLE : R_PANE_TITLE);
    int iw = r->w - 2, ih = r->h - 2, x = r->x + 1, y = r->y + 1;
    if (ih < 1 || iw < 20)
        return;
    if (st->n_plans == 0) {
        const char *note = st->plan_note[0] ? st->plan_note
                         : st->plan_status == PLANS_RUNNING || st->plan_status == PLANS_WAITING ? "searching..."
                         : "no plans yet (r searches)";
        /* wrap the note over the pane's lines */
        int len = (int)strlen(note);
        for (int i = 0, row = 0; i < len && row < ih; row++) {
            canvas_put(cv, y + row, x, iw, st->plan_status == PLANS_FAILED ? R_ERROR : R_LABEL, note + i);
            i += iw;
        }
        return;
    }
    bool wide = iw >= 76;
    canvas_put(cv, y, x, iw, R_HEAD,
               wide ? " #  tp pp vp cp   dp mbs opt     prec rc      MFU %    days  peak GiB  bottleneck"
                    : " #  tp pp vp cp   dp mbs opt     prec   MFU   days");
    int rows = ih - 1;
    int first = st->plan_sel >= rows ? st->plan_sel - rows + 1 : 0;
    for (int i = first; i < st->n_plans && i - first < rows; i++) {
        const TuiPlanRow *p = &st->plans[i];
        const Layout *lo = &p->layout;
        bool sel = i == st->plan_sel;
        TuiRole role = sel && st->focus == FOCUS_PLANS ? R_SELECTED : p->fits ? R_VALUE : R_WARN;
        int yy = y + 1 + i - first;
        if (role == R_SELECTED)
            canvas_fill(cv, yy, x, iw, ' ', R_SELECTED);
        if (wide)
            canvas_printf(cv, yy, x, iw, role, "%c%-2d %2d %2d %2d %2d %4d %3d %-7s %-4s %-5s %7.2f %7.2f %8.2f  %s",
                          sel ? '>' : ' ', i + 1, lo->tp, lo->pp, lo->vp, lo->cp, lo->dp, lo->mbs,
                          layout_opt_name(lo->opt), hw_precision_name(lo->prec), rc_short(lo), 100 * p->mfu, p->days,
                          p->peak_bytes / GIB, p->bottleneck);
        else
            canvas_printf(cv, yy, x, iw, role, "%c%-2d %2d %2d %2d %2d %4d %3d %-7s %-4s %5.1f %6.1f",
                          sel ? '>' : ' ', i + 1, lo->tp, lo->pp, lo->vp, lo->cp, lo->dp, lo->mbs,
                          layout_opt_name(lo->opt), hw_precision_name(lo->prec), 100 * p->mfu, p->days);
    }
}

/* ---- run monitor ---- */

static double mean_last(const double *v, int n, int k)
{
    double s = 0;
    int m = 0;
    for (int i = n - 1; i >= 0 && m < k; i--)
        if (v[i] >= 0)
            s += v[i], m++;
    return m ? s / m : -1;
}

static double last_of(const double *v, int n)
{
    for (int i = n - 1; i >= 0; i--)
        if (v[i] >= 0)
            return v[i];
    return -1;
}

/* A one-line chart of the last values: higher = taller glyph. */
static void spark(Canvas *cv, int y, int x, int w, const double *v, int n)
{
    static const char glyph[] = "_.-~=*#";
    double lo = INFINITY, hi = -INFINITY;
    int start = n > w ? n - w : 0;
    for (int i = start; i < n; i++)
        if (v[i] >= 0) {
            lo = fmin(lo, v[i]);
            hi = fmax(hi, v[i]);
        }
    if (!isfinite(lo))
        return;
    for (int i = start; i < n; i++) {
        if (v[i] < 0)
            continue;
        int g = hi > lo ? (int)((v[i] - lo) / (hi - lo) * 6 + 0.5) : 3;
        canvas_fill(cv, y, x + i - start, 1, glyph[g], R_BAR);
    }
}

/* The prediction's error as `compare` states it: (predicted − measured) /
 * measured, so both say the same number with the same sign; within 10 %
 * shown as good. */
static void run_error(Canvas *cv, int y, int x_end, double pred, double meas)
{
    if (!(meas > 0) || !isfinite(pred))
        return;
    double e = 100 * (pred - meas) / meas;
    char buf[40];
    snprintf(buf, sizeof buf, "error %+.1f%%", e);
    int n = (int)strlen(buf);
    canvas_put(cv, y, x_end - n, n, fabs(e) <= 10 ? R_GOOD : R_BAD, buf);
}

static void pane_monitor(const TuiState *st, const TuiRect *r, Canvas *cv)
{
    const TuiRun *run = &st->run;
    char title[300];
    snprintf(title, sizeof title, "Run %s%s%s", run->path, run->status[0] ? ": " : "", run->status);
    canvas_box(cv, r, title, R_PANE_TITLE);
    int iw = r->w - 2, ih = r->h - 2, x = r->x + 1, y = r->y + 1;
    if (ih < 1 || iw < 24)
        return;
    int row = 0;
    if (run->err[0])
        canvas_put(cv, y + row++, x, iw, R_WARN, run->err);
    if (!run->loaded) {
        if (row < ih)
            canvas_put(cv, y + row, x, iw, R_DIM, "waiting for the run to write steps...");
        return;
    }
    double t_last = last_of(run->time_s, run->n), t_mean = mean_last(run->time_s, run->n, 10);
    double mfu = mean_last(run->mfu, run->n, 10), loss = last_of(run->loss, run->n);
    if (row < ih)
        canvas_printf(cv, y + row++, x, iw, R_LABEL, "%d steps measured (means over the last 10)", run->steps);
    Cost pc;
    char what[96];
    state_run_predict(st, &pc, what, sizeof what);
    if (row < ih)
        canvas_printf(cv, y + row++, x, iw, R_DIM, "predicted from %s", what);
    if (row < ih && t_mean >= 0) {
        canvas_printf(cv, y + row, x, iw, R_VALUE, "step      %8.3f s  last %.3f  predicted %.3f s", t_mean, t_last,
                      pc.step_s);
        run_error(cv, y + row, x + iw, pc.step_s, t_mean);
        row++;
    }
    if (row < ih && mfu >= 0) {
        canvas_printf(cv, y + row, x, iw, R_VALUE, "MFU       %8.2f %%  predicted %.2f %%", 100 * mfu, 100 * pc.thr.mfu);
        run_error(cv, y + row, x + iw, pc.thr.mfu, mfu);
        row++;
    }
    if (row < ih && loss >= 0) {
        canvas_printf(cv, y + row, x, iw, R_VALUE, "loss      %8.4f", loss);
        spark(cv, y + row, x + 28, iw - 28, run->loss, run->n);
        row++;
    }
    if (row < ih && t_last >= 0) {
        canvas_put(cv, y + row, x, iw, R_LABEL, "step time");
        spark(cv, y + row, x + 28, iw - 28, run->time_s, run->n);
        row++;
    }
}

/* ---- frame ---- */

static void title_bar(const TuiState *st, const TuiRect *r, Canvas *cv)
{
    const Layout *lo = &st->in.layout;
    canvas_fill(cv, r->y, r->x, r->w, ' ', R_TITLE);
    int used = canvas_printf(cv, r->y, r->x, r->w, R_TITLE, " ultraplan  %s on %d x %s  tp %d pp %d dp %d%s",
                             st->in.model.name, layout_gpus(lo), st->in.hw.name, lo->tp, lo->pp, lo->dp,
                             !st->pinned ? "" : r->w >= 110 ? "  [PINNED: showing differences]" : "  [PINNED]");
    const char *right = "? help  q quit ";
    int n = (int)strlen(right);
    if (used + 1 + n <= r->w)
        canvas_put(cv, r->y, r->x + r->w - n, n, R_TITLE, right);
}

static void status_bar(const TuiState *st, const TuiRect *r, Canvas *cv)
{
    if (st->editing)
        canvas_printf(cv, r->y, r->x, r->w, R_EDIT, " %s: %s_   (Enter applies, Esc cancels; %s)",
                      state_field_label((TuiField)st->sel), st->edit, state_field_help((TuiField)st->sel));
    else
        canvas_printf(cv, r->y, r->x, r->w, st->msg_error ? R_ERROR : R_NORMAL, " %s", st->msg);
}

static void help_overlay(const TuiRect *screen, Canvas *cv)
{
    int n;
    const TuiKeyBinding *k = tui_keys(&n);
    int shown = 0;
    for (int i = 0; i < n; i++)
        shown += k[i].help != NULL;
    int w = screen->w - 4 < 76 ? screen->w - 4 : 76;
    int h = shown + 5 < screen->h - 2 ? shown + 5 : screen->h - 2;
    TuiRect r = {(screen->h - h) / 2, (screen->w - w) / 2, h, w};
    canvas_box(cv, &r, "Keys", R_FOCUS_TITLE);
    int row = 0;
    for (int i = 0; i < n && row < h - 4; i++) {
        if (!k[i].help)
            continue;
        canvas_printf(cv, r.y + 1 + row, r.x + 2, 10, R_HEAD, "%s", k[i].name);
        canvas_put(cv, r.y + 1 + row, r.x + 12, w - 14, R_LABEL, k[i].help);
        row++;
    }
    canvas_put(cv, r.y + h - 3, r.x + 2, w - 4, R_DIM, "digits start typing a value; a refused value says why");
    canvas_put(cv, r.y + h - 2, r.x + 2, w - 4, R_DIM, "any key closes this help");
}

void panes_render(const TuiState *st, const TuiLayout *lay, Canvas *cv)
{
    canvas_clear(cv);
    if (lay->too_small) {
        char msg[128];
        snprintf(msg, sizeof msg, "terminal %dx%d is too small: ultraplan tui needs %dx%d", cv->cols, cv->rows,
                 TUI_MIN_COLS, TUI_MIN_ROWS);
        canvas_put(cv, 0, 0, cv->cols, R_ERROR, msg);
        return;
    }
    title_bar(st, &lay->title, cv);
    if (tui_rect_visible(&lay->inputs)) pane_inputs(st, &lay->inputs, cv);
    if (tui_rect_visible(&lay->memory)) pane_memory(st, &lay->memory, cv);
    if (tui_rect_visible(&lay->time)) pane_time(st, &lay->time, cv);
    if (tui_rect_visible(&lay->plans)) pane_plans(st, &lay->plans, cv);
    if (tui_rect_visible(&lay->monitor)) pane_monitor(st, &lay->monitor, cv);
    status_bar(st, &lay->status, cv);
    if (st->help) {
        TuiRect screen = {0, 0, cv->rows, cv->cols};
        help_overlay(&screen, cv);
    }
}
