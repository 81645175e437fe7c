/* search.c — planner_search on a worker thread (see search.h). */
#include "search.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "export.h"
#include "planner.h"

typedef struct {
    TuiPlanRow rows[TUI_MAX_PLANS];
    int n;
    TuiPlanStatus status;
    char note[1024];
} Outcome;

struct TuiSearch {
    pthread_mutex_t mu;
    pthread_t th;
    bool live;               // a worker was created and not joined yet
    bool done;               // the worker finished (guarded by mu)
    volatile int cancel;     // planner's cancel flag
    Scenario job;           // what the live worker searches
    bool pending;            // a newer request waits for the worker to stop
    Scenario next;
    bool announced;          // the caller saw PLANS_RUNNING for the live job
    Outcome out;             // guarded by mu
};

bool search_available(void) { return true; }

/* What the planner searches: the problem (model, GPUs, hardware, global
 * batch), every layout knob free, so the pane shows the best overall. */
static void run_search(const Scenario *in, volatile int *cancel, Outcome *o)
{
    PlanRequest req;
    planner_request_default(&req);
    req.gpus = in->gpus;
    req.fixed = FIX_GBS;
    req.base = in->layout;          /* with its target: megatron or ultraplan */
    req.mem_margin_bytes = in->mem_margin_bytes;
    req.top_k = TUI_MAX_PLANS;
    req.cancel = cancel;
    PlanResult res;
    memset(&res, 0, sizeof res);
    char err[512] = "";
    memset(o, 0, sizeof *o);
    if (planner_search(&in->model, &in->hw, &in->opts, &req, &res, err, sizeof err) != 0) {
        o->status = PLANS_FAILED;
        snprintf(o->note, sizeof o->note, "%s", err);
        planner_result_free(&res);
        return;
    }
    for (int i = 0; i < res.n && o->n < TUI_MAX_PLANS; i++) {
        const Plan *p = &res.plans[i];
        TuiPlanRow *r = &o->rows[o->n++];
        r->layout = p->layout;
        r->mfu = p->cost.thr.mfu;
        r->days = p->cost.train.days;
        r->peak_bytes = p->cost.peak_bytes;
        r->step_s = p->cost.step_s;
        r->fits = p->cost.fits;
        snprintf(r->bottleneck, sizeof r->bottleneck, "%s", p->bottleneck ? p->bottleneck : "");
    }
    o->status = PLANS_DONE;
    if (res.n == 0)
        snprintf(o->note, sizeof o->note, "%s", res.infeasible[0] ? res.infeasible : "no layout fits");
    else if (res.cancelled)
        snprintf(o->note, sizeof o->note, "cancelled: best found so far");
    else
        snprintf(o->note, sizeof o->note, "%.2f s, %ld layouts, %ld pruned", res.seconds, res.outer_total,
                 res.outer_pruned);
    planner_result_free(&res);
}

static void *worker(void *arg)
{
    TuiSearch *s = arg;
    Outcome o;
    run_search(&s->job, &s->cancel, &o);
    pthread_mutex_lock(&s->mu);
    s->out = o;
    s->done = true;
    pthread_mutex_unlock(&s->mu);
    planner_thread_end();
    return NULL;
}

TuiSearch *search_new(void)
{
    TuiSearch *s = calloc(1, sizeof *s);
    if (s)
        pthread_mutex_init(&s->mu, NULL);
    return s;
}

static void launch(TuiSearch *s, const Scenario *in)
{
    s->job = *in;
    s->cancel = 0;
    s->done = false;
    s->announced = false;
    if (pthread_create(&s->th, NULL, worker, s) == 0) {
        s->live = true;
    } else {
        s->out.status = PLANS_FAILED;
        s->out.n = 0;
        snprintf(s->out.note, sizeof s->out.note, "could not start the search thread");
        s->done = true;
    }
}

void search_start(TuiSearch *s, const Scenario *in)
{
    if (!s->live) {
        launch(s, in);
        return;
    }
    s->next = *in;
    s->pending = true;
    s->cancel = 1;
}

void search_cancel(TuiSearch *s)
{
    s->pending = false;
    if (s->live)
        s->cancel = 1;
}

bool search_poll(TuiSearch *s, TuiState *st)
{
    bool changed = false;
    if (s->live) {
        pthread_mutex_lock(&s->mu);
        bool done = s->done;
        Outcome o = s->out;
        pthread_mutex_unlock(&s->mu);
        if (!done) {
            if (!s->announced) {
                st->plan_status = PLANS_RUNNING;
                s->announced = true;
                changed = true;
            }
            return changed;
        }
        pthread_join(s->th, NULL);
        s->live = false;
        if (!s->pending) {   /* a superseded result is dropped */
            st->n_plans = o.n;
            memcpy(st->plans, o.rows, sizeof o.rows);
            st->plan_status = o.status;
            snprintf(st->plan_note, sizeof st->plan_note, "%s", o.note);
            if (st->plan_sel >= st->n_plans)
                st->plan_sel = 0;
            state_plans_arrived(st);
            changed = true;
        }
    }
    if (s->pending) {
        s->pending = false;
        launch(s, &s->next);
        st->plan_status = PLANS_RUNNING;
        s->announced = true;
        changed = true;
    }
    return changed;
}

void search_free(TuiSearch *s)
{
    if (!s)
        return;
    if (s->live) {
        s->cancel = 1;
        pthread_join(s->th, NULL);
    }
    pthread_mutex_destroy(&s->mu);
    free(s);
}

void search_now(const Scenario *in, TuiState *st)
{
    Outcome o;
    run_search(in, NULL, &o);
    st->n_plans = o.n;
    memcpy(st->plans, o.rows, sizeof o.rows);
    st->plan_status = o.status;
    snprintf(st->plan_note, sizeof st->plan_note, "%s", o.note);
    st->plan_sel = 0;
    state_plans_arrived(st);
}

/* NULL when the layout is not exactly expressible (the caller then saves the
 * plan and points at `export`, which names why) */
char *search_megatron_args(const TuiState *st)
{
    char err[512];
    return export_megatron(&st->in.model, &st->in.hw, &st->in.layout, err, sizeof err);
}
