/* search.h — the planner run off the event loop's thread.
 *
 * One worker thread at a time runs planner_search with a cancel flag; a
 * newer request waits as `pending` until the old one stops (it is told to
 * cancel), so nothing here ever blocks the screen. Results are copied into
 * TuiPlanRows under a mutex and picked up by search_poll. Built without
 * the planner (search_none.c), every call reports PLANS_NONE.
 */
#ifndef ULTRAPLAN_TUI_SEARCH_H
#define ULTRAPLAN_TUI_SEARCH_H

#include <stdbool.h>

#include "state.h"

typedef struct TuiSearch TuiSearch;

bool search_available(void);
TuiSearch *search_new(void);           // NULL when out of memory
void search_free(TuiSearch *s);        // cancels and joins a running search

/* Search plans for `in` (its model, GPUs, hardware, global batch); a
 * running search is cancelled and this one starts when it has stopped. */
void search_start(TuiSearch *s, const Scenario *in);
void search_cancel(TuiSearch *s);

/* Move a finished result into st (plans, status, note) and start a pending
 * request. Returns true when st changed. */
bool search_poll(TuiSearch *s, TuiState *st);

/* The same search, synchronously (for --snapshot and the benchmark). */
void search_now(const Scenario *in, TuiState *st);

/* The planner's Megatron-LM arguments for the current layout, malloc'd;
 * NULL when out of memory or built without the planner. */
char *search_megatron_args(const TuiState *st);

#endif
