/* inner.h — the inner problem of one outer choice: how many layers each
 * pipeline stage holds and how many of them are fully or selectively
 * recomputed, as linear coefficients read off the cost model.
 *
 * For stage s with n_s layers, f_s fully and e_s selectively recomputed
 * (f_s + e_s <= n_s, sum n_s = L):
 *   T_s   = t0[s] + t_layer n_s + t_full f_s + t_sel e_s          (s per micro-batch)
 *   mem_s = m0[s] + m_none[s] (n_s - f_s - e_s) + m_sel[s] e_s
 *           + m_full[s] f_s + m_ws[s] [f_s > 0]                    (bytes, <= cap)
 *   step  = (m - 1) max_s T_s + sum_s T_s        (1F1B; interleaved: (m + (p-1)/v) max_s T_s)
 *           + max_s dp_s(n_s) + max_s opt_s(n_s)
 * dp_s and opt_s are tabulated from cost_stage_dp_s / cost_stage_optim_s
 * and given to the ILP as the lines of their lower convex hull (exact when
 * convex, which they are without efficiency curves). Coefficients come from
 * differences of time_stage_mb() and memory_stage(), so they are the cost
 * model's own numbers, not a copy of its formulas.
 *
 * inner_enumerate() solves the problem exactly when the split is fixed
 * (pp = 1, interleaving, --stage-layers): stages then decouple.
 *
 * Under target megatron (`megatron`) the space is what Megatron-LM expresses
 * (model/layout.h, layout_megatron_form): recomputation none, selective on
 * every layer, or full with one count N per model chunk on every stage
 * (f_s = vp min(N, n_s / vp)), which couples the stages; splits even or
 * uneven only at the first and last stage. inner_megatron() solves that
 * exactly: it enumerates the splits (first, middle, last: a few hundred to
 * a few thousand), and for each the step time only grows with N, so the
 * smallest N with which every stage fits is the best full recomputation.
 *
 * Under target torchtitan (`torchtitan`) inner_megatron() solves a smaller
 * space still: the even split alone (torchtitan's pipeline splits layers
 * evenly), and recomputation none, full or selective on every layer, where
 * selective is torchtitan's per-op policy (so it is offered only when the
 * layout's stack prices that policy, layout_sel_op).
 */
#ifndef ULTRAPLAN_PLANNER_INNER_H
#define ULTRAPLAN_PLANNER_INNER_H

#include <stdbool.h>

#include "cost.h"

#define INNER_MAX_LINES 16

typedef struct {
    int n;                          // lines in use
    double a[INNER_MAX_LINES];      // seconds at 0 layers
    double b[INNER_MAX_LINES];      // seconds per layer
} InnerHull;                        // y >= a[k] + b[k] n for every k

typedef struct {
    int pp, L, mb, vp;              // stages, layers, micro-batches per step, interleave
    double t0[LAYOUT_MAX_PP];       // s per micro-batch of stage s without layers (embedding, head, p2p)
    double t_layer;                 // s per micro-batch per layer (fwd + bwd + exposed tp/cp)
    double t_full, t_sel;           // extra s per fully / selectively recomputed layer
    double m0[LAYOUT_MAX_PP];       // bytes of stage s without layers
    double m_none[LAYOUT_MAX_PP];   // bytes per layer kept whole on stage s (states + in-flight acts)
    double m_sel[LAYOUT_MAX_PP];    // bytes per selectively recomputed layer
    double m_full[LAYOUT_MAX_PP];   // bytes per fully recomputed layer
    double m_ws[LAYOUT_MAX_PP];     // bytes of the recompute working set, once per stage with f_s > 0
    double cap;                     // bytes per GPU (with a few bytes of slack for rounding)
    /* A mixture of experts with dense layers. The ILP's form above prices
     * every layer as an MoE layer, plus, where a dense layer holds more,
     * that excess times a line over the dense layers stage s can hold, so
     * that mem_s bounds memory_stage() from above (inner_build). Where the
     * split is known (inner_enumerate, inner_megatron, inner_objective) a
     * stage's bytes are counted by kind instead, layer by layer as
     * memory_stage() places them (inner_stage_bytes); the bounds use each
     * kind's own bytes and seconds: */
    int nd;                         // dense layers among the L (0: none, or not a mixture of experts)
    double lb_m0[LAYOUT_MAX_PP];    // bytes of stage s without layers, sized by MoE layers
    double lb_unit[LAYOUT_MAX_PP];  // more when it holds a dense layer (ZeRO's buckets of its largest layer)
    double lb_k[2][LAYOUT_MAX_PP][4];   // [dense, moe][s][none, sel, full, ws]: bytes per layer of each kind
    int dense_in[LAYOUT_MAX_PP];    // a fixed split: the dense layers stage s holds; else -1
    /* A free split of one chunk a stage, Megatron's leading dense layers, a dense layer lighter than an
     * MoE layer whatever either recomputes: d_gain[s] < 0 bytes a dense layer, and the ILP counts stage
     * s's dense layers as a column d_s <= n_s, d_s <= nd - (n_0 + ... + n_{s-1}), which is at most the
     * dense layers the stage holds, so d_gain d_s stays above what they save. 0: none. */
    double d_gain[LAYOUT_MAX_PP];
    double t_layer_kind[2];         // s per micro-batch of one dense / one MoE layer (fwd + bwd + exposed comm)
    ModelSpec spec;                 // the model (nd > 0: where its dense layers lie)
    Layout lo;                      // the outer layout (nd > 0: its chunks)
    InnerHull dp[LAYOUT_MAX_PP];    // exposed DP s per step of stage s as a function of n_s
    InnerHull opt[LAYOUT_MAX_PP];   // optimizer s per step of stage s as a function of n_s
    int fix_layers[LAYOUT_MAX_PP];  // > 0: n_s is fixed
    bool even_middle;               // stages 1..p-2 hold equal layer counts (Megatron: only first and last differ)
    bool rc_forced;                 // recomputation fixed to `rc` on every layer
    Recompute rc;
    bool megatron;                  // only what Megatron-LM expresses (the layout's target)
    bool torchtitan;                // only what torchtitan runs (target torchtitan): every stage L / pp
                                    // layers, and none, full or (its per-op) selective on every layer
    bool no_sel;                    // no selective recomputation: under the layout's stack it is torchtitan's
                                    // per-op policy (layout_sel_op), which no target runs (Megatron and the
                                    // executors recompute the attention core)
    bool chunks_given;              // a --pipeline-layout fixes every chunk's layers: chunk_t
    short chunk_t[LAYOUT_MAX_CHUNKS];   // layers of chunk c of stage s at [c * pp + s] (Megatron's entry order)
} InnerProblem;

/* Whether a layer of p may be recomputed selectively: the stack's selective
 * recomputation is one a target runs (not no_sel), and no other mode is forced */
static inline bool inner_sel_allowed(const InnerProblem *p)
{
    return !p->no_sel && (!p->rc_forced || p->rc == RECOMPUTE_SELECTIVE);
}

typedef struct {
    bool feasible;
    double objective;               // step seconds under the problem's model
    int layers[LAYOUT_MAX_PP];
    int full_rc[LAYOUT_MAX_PP];
    int sel_rc[LAYOUT_MAX_PP];
} InnerSolution;

/* Build the problem for a checked outer layout (its layers are ignored
 * unless fix_stages). `rc_forced` with `rc` pins recomputation. Sets
 * even_middle, which Megatron-LM's --decoder-first/last-pipeline-num-layers
 * need. */
void inner_build(const ModelSpec *m, const HwProfile *hw, const Layout *lo, bool fix_stages, bool rc_forced,
                 Recompute rc, InnerProblem *p);

/* Exact when the split is fixed (all fix_layers set, or pp == 1 with L). */
void inner_enumerate(const InnerProblem *p, InnerSolution *out);

/* Exact over what Megatron-LM expresses (see above), whether the split is
 * fixed or free; for p->megatron problems, and p->torchtitan ones. */
void inner_megatron(const InnerProblem *p, InnerSolution *out);

/* Bytes of stage s of the split `layers` with f fully and e selectively
 * recomputed layers: the form, or for a mixture with dense layers the
 * count by kind (see nd above). */
double inner_stage_bytes(const InnerProblem *p, const int *layers, int s, int f, int e);

/* The objective of a given split and recomputation (for tests and checks);
 * +inf when a stage does not fit. */
double inner_objective(const InnerProblem *p, const int *layers, const int *full, const int *sel);

/* Lower bound on the step time of any solution: balanced stages, no
 * recomputation, no memory limit. */
double inner_lower_bound(const InnerProblem *p);

/* Least bytes any stage split could need on its fullest stage (all layers
 * fully recomputed, model states spread perfectly): a memory lower bound. */
double inner_memory_bound(const InnerProblem *p);

#endif
