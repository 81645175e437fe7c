/* planner.h — search every layout of a model on a cluster and rank the best.
 *
 * Outer loop: the discrete choices (tp, cp, pp, dp, micro-batch, vp, ZeRO /
 * distributed optimizer, sequence parallel, precision) that respect the
 * user's global batch and whatever knobs the user fixed. Each gets a cheap
 * lower bound from the cost model (balanced stages, no recomputation, no
 * memory limit); choices are visited best bound first and skipped once the
 * bound cannot beat the k-th best plan. Inner problem per surviving choice:
 * layers and full / selective recomputation per stage, solved exactly by an
 * ILP (planner/ilp.c, GLPK) for 1F1B pipelines and by enumeration where the
 * split is fixed (pp = 1, interleaving). Every plan is re-evaluated with
 * cost(), so what the planner ranks is exactly what `predict` prints.
 *
 * The base layout's target says which layouts exist: TARGET_MEGATRON (the
 * default) searches only what Megatron-LM expresses (layout_megatron_check:
 * one full-recompute count per model chunk on every stage or selective on
 * all layers, uneven stages only first and last), solved exactly by
 * inner_megatron(); TARGET_ULTRAPLAN every layout ultraplan's CPU executor
 * runs, TARGET_ULTRAPLAN_CUDA every layout its CUDA executor runs, as above
 * (what each refuses is executor/refuse.h, the functions the executors
 * call). Every plan fits under the GPU's memory less mem_margin_bytes.
 *
 * Pure: no printing, no exit, no globals. The global batch is never changed.
 */
#ifndef ULTRAPLAN_PLANNER_PLANNER_H
#define ULTRAPLAN_PLANNER_PLANNER_H

#include <stdbool.h>

#include "cost.h"
#include "knobs.h"

/* What "best" means. TIME: the shortest step. COST: the fewest GPU-hours
 * with failures, checkpoints and restarts priced in (on a fixed GPU count,
 * the fewest days with failures): a layout with a larger checkpoint or a
 * longer restart can cost more although it steps faster. */
typedef enum { PLAN_RANK_TIME, PLAN_RANK_COST, PLAN_RANK_COUNT } PlanRank;

typedef struct {
    int gpus;                 // cluster size
    unsigned fixed;           // KnobFix bits (knobs.h): knobs the user fixed (use the values in `base`)
    Layout base;              // fixed knob values, gbs, flops convention, grad_fp32 etc.
    Recompute recompute;      // when FIX_RC is set: forced uniform recomputation
    int top_k;                // plans to keep (default 10)
    bool exhaustive;          // no pruning: every outer choice gets its inner problem solved
    bool search_precision;    // also try fp8 (when the GPU has it) unless FIX_PREC
    const char *dump_lp;      // write the ILP of the best plan's outer choice here (CPLEX LP format), or NULL
    volatile int *cancel;     // when non-NULL and set to 1, stop early and return what was found (TUI)
    bool explain;             // when nothing fits: find the smallest GPU count that does (default true)
    void (*progress)(void *ctx, long done, long total);   // called now and then during the search, or NULL
    void *progress_ctx;
    PlanRank rank_by;         // PLAN_RANK_TIME (default) or PLAN_RANK_COST (searches without the time bound)
    double budget_days;       // > 0: only plans that finish, failures included, within this many days
    double budget_gpu_hours;  // > 0: only plans within this many GPU-hours, failures included
    double mem_margin_bytes;  // plans fit under hbm_bytes - this (0 = the whole GPU; Scenario resolves --mem-margin)
} PlanRequest;

typedef struct {
    Layout layout;            // checked, with layers and recomputation per stage filled
    Cost cost;                // cost(m, hw, &layout, o)
    const char *bottleneck;   // "compute", "bubble", "tp", "dp", "pp", "cp", "recompute", "optimizer" or "memory"
} Plan;

typedef struct {
    Plan *plans; int n;             // best first (lowest step time)
    long outer_total;               // outer choices enumerated (valid divisions)
    long outer_evaluated;           // inner problems solved
    long outer_pruned;              // skipped by the time or memory bound
    long ilp_solved;                // GLPK calls
    double seconds;                 // wall time of the search
    bool cancelled;                 // stopped by *cancel
    int min_gpus;                   // when n == 0: smallest GPU count with a fitting layout, 0 = none found
    double min_peak_bytes;          // when n == 0: the least per-GPU memory any layout needs
    long over_budget;               // plans that fit but were dropped by budget_days / budget_gpu_hours
    double best_over_days;          // the fewest days with failures among them (INFINITY none)
    double best_over_gpu_hours;     // the fewest GPU-hours with failures among them
    char infeasible[1024];          // when n == 0: why, and what would make it feasible
    char brief[160];                // when n == 0: the same in one short clause, for a table cell
    bool fixed_fault;               // when n == 0: a knob the user fixed is the cause (infeasible names it and
                                    // what would be valid; no GPU-count search was made)
} PlanResult;

/* top_k 10, exhaustive false, explain true, base = layout_default() */
void planner_request_default(PlanRequest *r);

/* Search. 0 ok (possibly n == 0 with `infeasible` and `brief` filled), -1
 * error in err (bad request: gpus < 1, top_k < 1, gbs < 1, a precision the
 * GPU lacks; GLPK fault). When no layout exists with the knobs the user
 * fixed, `infeasible` names the fixed knob at fault and its valid values
 * (fixed_fault); only when none is at fault does `explain` search the
 * smallest GPU count that fits. */
int planner_search(const ModelSpec *m, const HwProfile *hw, const CostOpts *o, const PlanRequest *req,
                   PlanResult *out, char *err, int errlen);

void planner_result_free(PlanResult *r);

/* A thread that called planner_search calls this before it exits, so the
 * solver's per-thread state is freed (the TUI's search thread). */
void planner_thread_end(void);

/* The phase that dominates a plan's step (see Plan.bottleneck). */
const char *planner_bottleneck(const Cost *c);

#endif
