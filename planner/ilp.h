/* ilp.h — the inner problem as a mixed-integer program, solved by GLPK.
 *
 * The only file that includes glpk.h is ilp.c. GLPK never prints (terminal
 * output off, its error hook returns here), and every return code of
 * glp_intopt and every MIP status becomes an IlpStatus.
 */
#ifndef ULTRAPLAN_PLANNER_ILP_H
#define ULTRAPLAN_PLANNER_ILP_H

#include "inner.h"

typedef enum {
    ILP_OPTIMAL,       // proven optimal
    ILP_FEASIBLE,      // a solution, not proven optimal (time limit, gap, cancelled after one was found)
    ILP_INFEASIBLE,    // no split fits memory
    ILP_UNBOUNDED,     // cannot happen for a well-formed problem; reported, not trusted
    ILP_NO_SOLUTION,   // stopped (time limit, cancel) before any solution
    ILP_ERROR,         // GLPK fault, bad input, or the LP file could not be written
    ILP_STATUS_COUNT
} IlpStatus;

typedef struct {
    int time_limit_ms;         // 0 = none
    const char *dump_lp;       // write the model (CPLEX LP format) here before solving, or NULL
    volatile int *cancel;      // set to 1 to stop the branch-and-bound
    double cutoff;             // > 0: only solutions with objective < cutoff are wanted
} IlpOpts;

typedef struct {
    IlpStatus status;
    InnerSolution sol;         // when OPTIMAL or FEASIBLE
    int glp_ret;               // glp_intopt's return code, for messages
    char msg[160];             // what happened, one line (for ILP_ERROR and the non-optimal cases)
} IlpResult;

void ilp_opts_default(IlpOpts *o);

/* Solve. Returns the status (also in out->status). */
IlpStatus ilp_solve(const InnerProblem *p, const IlpOpts *o, IlpResult *out);

/* Free the solver state GLPK keeps per thread; call before a thread that
 * solved ILPs exits. */
void ilp_thread_end(void);

const char *ilp_status_name(IlpStatus s);

#endif
