/* search_none.c — search.h when the planner is not built. */
#include "search.h"

#include <stdio.h>
#include <stdlib.h>

struct TuiSearch {
    int unused;
};

bool search_available(void) { return false; }
TuiSearch *search_new(void) { return calloc(1, sizeof(TuiSearch)); }
void search_free(TuiSearch *s) { free(s); }
void search_start(TuiSearch *s, const Scenario *in) { (void)s, (void)in; }
void search_cancel(TuiSearch *s) { (void)s; }

bool search_poll(TuiSearch *s, TuiState *st)
{
    (void)s;
    bool changed = st->plan_status != PLANS_NONE;
    st->plan_status = PLANS_NONE;
    snprintf(st->plan_note, sizeof st->plan_note, "this build has no planner: use `ultraplan plan`");
    return changed;
}

void search_now(const Scenario *in, TuiState *st) { (void)in, search_poll(NULL, st); }

char *search_megatron_args(const TuiState *st) { (void)st; return NULL; }
