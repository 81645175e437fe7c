/* ilp.c — the inner problem as a GLPK mixed-integer program.
 *
 * Formulation (p stages, m micro-batches; inner.h gives the coefficients):
 *
 *   min  (m-1) z + sum_s T_s + y_dp + y_opt          (1F1B)
 *        (m + (p-1)/v) z + y_dp + y_opt              (interleaved, split fixed)
 *   T_s = t0_s + t_layer n_s + t_full f_s + t_sel e_s
 *   s.t. sum_s n_s = L
 *        f_s + e_s <= n_s                            every stage
 *        f_s <= (L-p+1) w_s,  w_s binary             w_s = 1 when stage s recomputes fully
 *        m_none n_s + (m_full-m_none) f_s + (m_sel-m_none) e_s + m_ws w_s + d_gain_s d_s <= cap - m0_s
 *        d_s <= n_s, d_s + n_0 + ... + n_{s-1} <= nd, d_s >= 0   (a mixture's leading dense layers
 *                                                       where lighter: inner.h d_gain)
 *        z >= T_s
 *        y_dp  >= a_k + b_k n_s                      the lines of stage s's dp hull
 *        y_opt >= a_k + b_k n_s                      the lines of stage s's optimizer hull
 *        n_s = n_1 for 1 < s < p-1                 (even_middle: Megatron splits unevenly only
 *                                                    at the first and last stage)
 *        n_s in [1, L-p+1], f_s, e_s >= 0 integer
 *   optional cutoff: objective <= cutoff (prunes the branch-and-bound)
 *
 * Memory rows are scaled by 1/cap so every coefficient is O(1); the
 * right-hand side keeps 1e-6 of capacity in reserve against the solver's
 * feasibility tolerance. GLPK's terminal output goes to a hook that keeps
 * the last line for messages; its error hook longjmps back here and the
 * environment is freed, so a GLPK fault is a status, not an abort.
 */
#include "ilp.h"

#include <glpk.h>
#include <limits.h>
#include <math.h>
#include <setjmp.h>
#include <stdio.h>
#include <string.h>

typedef struct {
    jmp_buf jb;
    char last[120];          // last line GLPK wanted to print
    volatile int *cancel;
} Guard;

static void on_error(void *info) { longjmp(((Guard *)info)->jb, 1); }

static int on_print(void *info, const char *s)
{
    Guard *g = info;
    size_t n = strcspn(s, "\n");
    if (n > 0) {
        if (n >= sizeof g->last)
            n = sizeof g->last - 1;
        memcpy(g->last, s, n);
        g->last[n] = 0;
    }
    return 1;   /* never reaches the terminal */
}

static void on_branch(glp_tree *T, void *info)
{
    Guard *g = info;
    if (g->cancel && *g->cancel)
        glp_ios_terminate(T);
}

static const char *const status_names[] = {"optimal", "feasible", "infeasible", "unbounded", "no solution", "error"};
_Static_assert(sizeof status_names / sizeof *status_names == ILP_STATUS_COUNT, "ilp status names");

const char *ilp_status_name(IlpStatus s) { return s >= 0 && s < ILP_STATUS_COUNT ? status_names[s] : "?"; }

void ilp_opts_default(IlpOpts *o)
{
    memset(o, 0, sizeof *o);
    o->time_limit_ms = 10000;
}

/* Column indices of one stage. */
typedef struct { int n, f, e, w, d; } StageCols;

static int add_col(glp_prob *P, const char *name, int kind, int type, double lo, double hi)
{
    int j = glp_add_cols(P, 1);
    glp_set_col_name(P, j, name);
    glp_set_col_kind(P, j, kind);
    glp_set_col_bnds(P, j, type, lo, hi);
    return j;
}

static void add_row(glp_prob *P, const char *name, int type, double lo, double hi, int cnt, const int *ind,
                    const double *val)
{
    int i = glp_add_rows(P, 1);
    int ix[LAYOUT_MAX_PP * 4 + 8];
    double vx[LAYOUT_MAX_PP * 4 + 8];
    glp_set_row_name(P, i, name);
    glp_set_row_bnds(P, i, type, lo, hi);
    for (int k = 0; k < cnt; k++) {   /* GLPK arrays are 1-based */
        ix[k + 1] = ind[k];
        vx[k + 1] = val[k];
    }
    glp_set_mat_row(P, i, cnt, ix, vx);
}

/* Build the model; returns the column of z (1). */
static void build(glp_prob *P, const InnerProblem *p, const IlpOpts *o, StageCols *sc)
{
    char nm[32];
    int pp = p->pp, nmax = p->L - (pp - 1);
    bool interleaved = p->vp > 1;
    glp_set_prob_name(P, "ultraplan_stages");
    glp_set_obj_name(P, "step_seconds");
    glp_set_obj_dir(P, GLP_MIN);
    int z = add_col(P, "z", GLP_CV, GLP_LO, 0, 0);
    int ydp = add_col(P, "y_dp", GLP_CV, GLP_FR, 0, 0);
    int yopt = add_col(P, "y_opt", GLP_CV, GLP_FR, 0, 0);
    double zc = interleaved ? p->mb + (double)(pp - 1) / p->vp : p->mb - 1;
    glp_set_obj_coef(P, z, zc);
    glp_set_obj_coef(P, ydp, 1);
    glp_set_obj_coef(P, yopt, 1);
    double obj0 = 0;
    bool full_ok = !p->rc_forced || p->rc == RECOMPUTE_FULL;
    bool sel_ok = inner_sel_allowed(p);
    for (int s = 0; s < pp; s++) {
        int fix = p->fix_layers[s];
        snprintf(nm, sizeof nm, "n%d", s);
        sc[s].n = fix ? add_col(P, nm, GLP_IV, GLP_FX, fix, fix) : add_col(P, nm, GLP_IV, GLP_DB, 1, nmax);
        snprintf(nm, sizeof nm, "f%d", s);
        sc[s].f = full_ok ? add_col(P, nm, GLP_IV, GLP_DB, 0, nmax) : add_col(P, nm, GLP_IV, GLP_FX, 0, 0);
        snprintf(nm, sizeof nm, "e%d", s);
        sc[s].e = sel_ok ? add_col(P, nm, GLP_IV, GLP_DB, 0, nmax) : add_col(P, nm, GLP_IV, GLP_FX, 0, 0);
        sc[s].w = sc[s].d = 0;
        if (p->d_gain[s] < 0) {
            snprintf(nm, sizeof nm, "d%d", s);
            sc[s].d = add_col(P, nm, GLP_CV, GLP_DB, 0, p->nd);
        }
        if (full_ok && p->m_ws[s] > 0) {
            snprintf(nm, sizeof nm, "w%d", s);
            sc[s].w = add_col(P, nm, GLP_BV, GLP_DB, 0, 1);
        }
        if (!interleaved) {
            glp_set_obj_coef(P, sc[s].n, p->t_layer);
            glp_set_obj_coef(P, sc[s].f, p->t_full);
            glp_set_obj_coef(P, sc[s].e, p->t_sel);
            obj0 += p->t0[s];
        }
    }
    glp_set_obj_coef(P, 0, obj0);

    int ind[LAYOUT_MAX_PP * 4 + 4];
    double val[LAYOUT_MAX_PP * 4 + 4];
    for (int s = 0; s < pp; s++) {
        ind[s] = sc[s].n;
        val[s] = 1;
    }
    add_row(P, "layers", GLP_FX, p->L, p->L, pp, ind, val);
    for (int s = 2; p->even_middle && s < pp - 1; s++) {
        snprintf(nm, sizeof nm, "middle%d", s);
        add_row(P, nm, GLP_FX, 0, 0, 2, (int[]){sc[s].n, sc[1].n}, (double[]){1, -1});
    }
    for (int s = 0; s < pp; s++) {
        const StageCols *c = &sc[s];
        snprintf(nm, sizeof nm, "split%d", s);
        add_row(P, nm, GLP_UP, 0, 0, 3, (int[]){c->f, c->e, c->n}, (double[]){1, 1, -1});
        if (p->rc_forced && p->rc != RECOMPUTE_NONE) {
            snprintf(nm, sizeof nm, "forced%d", s);
            add_row(P, nm, GLP_FX, 0, 0, 2, (int[]){p->rc == RECOMPUTE_FULL ? c->f : c->e, c->n},
                    (double[]){1, -1});
        }
        double k = 1.0 / p->cap;
        int cnt = 3;
        int mi[5] = {c->n, c->f, c->e};
        double mv[5] = {p->m_none[s] * k, (p->m_full[s] - p->m_none[s]) * k, (p->m_sel[s] - p->m_none[s]) * k};
        if (c->w) {
            mi[cnt] = c->w, mv[cnt++] = p->m_ws[s] * k;
            snprintf(nm, sizeof nm, "wsflag%d", s);
            add_row(P, nm, GLP_UP, 0, 0, 2, (int[]){c->f, c->w}, (double[]){1, -(double)nmax});
        }
        if (c->d) {
            mi[cnt] = c->d, mv[cnt++] = p->d_gain[s] * k;
            snprintf(nm, sizeof nm, "dense%d", s);
            add_row(P, nm, GLP_UP, 0, 0, 2, (int[]){c->d, c->n}, (double[]){1, -1});
            int di[LAYOUT_MAX_PP + 1];
            double dv[LAYOUT_MAX_PP + 1];
            di[0] = c->d, dv[0] = 1;
            for (int q = 0; q < s; q++)
                di[q + 1] = sc[q].n, dv[q + 1] = 1;
            snprintf(nm, sizeof nm, "denseleft%d", s);
            add_row(P, nm, GLP_UP, 0, p->nd, s + 1, di, dv);
        }
        snprintf(nm, sizeof nm, "mem%d", s);
        add_row(P, nm, GLP_UP, 0, (p->cap - p->m0[s]) * k - 1e-6, cnt, mi, mv);
        snprintf(nm, sizeof nm, "time%d", s);
        add_row(P, nm, GLP_LO, p->t0[s], 0, 4, (int[]){z, c->n, c->f, c->e},
                (double[]){1, -p->t_layer, -p->t_full, -p->t_sel});
        /* stages alike in their hull share rows through the max; skip exact duplicates */
        for (int l = 0; l < p->dp[s].n; l++) {
            snprintf(nm, sizeof nm, "dp%d_%d", s, l);
            add_row(P, nm, GLP_LO, p->dp[s].a[l], 0, 2, (int[]){ydp, c->n}, (double[]){1, -p->dp[s].b[l]});
        }
        for (int l = 0; l < p->opt[s].n; l++) {
            snprintf(nm, sizeof nm, "opt%d_%d", s, l);
            add_row(P, nm, GLP_LO, p->opt[s].a[l], 0, 2, (int[]){yopt, c->n}, (double[]){1, -p->opt[s].b[l]});
        }
    }
    if (o->cutoff > 0) {
        int cnt = 0;
        for (int j = 1; j <= glp_get_num_cols(P); j++) {
            double cj = glp_get_obj_coef(P, j);
            if (cj != 0) {
                ind[cnt] = j;
                val[cnt++] = cj;
            }
        }
        add_row(P, "cutoff", GLP_UP, 0, o->cutoff - obj0, cnt, ind, val);
    }
}

/* glp_intopt's return code and the MIP status, as one typed status. */
static IlpStatus map_status(int ret, int mip)
{
    switch (ret) {
    case 0:
        return mip == GLP_OPT ? ILP_OPTIMAL : mip == GLP_FEAS ? ILP_FEASIBLE
             : mip == GLP_NOFEAS ? ILP_INFEASIBLE : ILP_ERROR;
    case GLP_ENOPFS:              /* presolver: the LP relaxation has no feasible point */
        return ILP_INFEASIBLE;
    case GLP_ENODFS:              /* presolver: the LP relaxation is unbounded */
        return ILP_UNBOUNDED;
    case GLP_ETMLIM:              /* time limit */
    case GLP_ESTOP:               /* cancelled from the callback */
    case GLP_EMIPGAP:             /* gap tolerance reached */
        return mip == GLP_FEAS || mip == GLP_OPT ? ILP_FEASIBLE : ILP_NO_SOLUTION;
    case GLP_EBOUND:              /* incorrect bounds on some variable */
    case GLP_EROOT:               /* no optimal basis for the root LP (presolve off) */
    case GLP_EFAIL:               /* the solver failed */
    default:
        return ILP_ERROR;
    }
}

static const char *ret_text(int ret)
{
    switch (ret) {
    case 0: return "ok";
    case GLP_EBOUND: return "incorrect variable bounds";
    case GLP_EROOT: return "no optimal basis of the root LP";
    case GLP_ENOPFS: return "LP relaxation infeasible";
    case GLP_ENODFS: return "LP relaxation unbounded";
    case GLP_EFAIL: return "solver failure";
    case GLP_EMIPGAP: return "MIP gap tolerance reached";
    case GLP_ETMLIM: return "time limit reached";
    case GLP_ESTOP: return "stopped by the caller";
    default: return "unknown GLPK return code";
    }
}

static void read_solution(glp_prob *P, const InnerProblem *p, const StageCols *sc, IlpResult *out)
{
    InnerSolution *so = &out->sol;
    for (int s = 0; s < p->pp; s++) {
        so->layers[s] = (int)lround(glp_mip_col_val(P, sc[s].n));
        so->full_rc[s] = (int)lround(glp_mip_col_val(P, sc[s].f));
        so->sel_rc[s] = (int)lround(glp_mip_col_val(P, sc[s].e));
    }
    so->objective = inner_objective(p, so->layers, so->full_rc, so->sel_rc);
    so->feasible = isfinite(so->objective);
    if (!so->feasible) {
        out->status = ILP_ERROR;
        snprintf(out->msg, sizeof out->msg, "GLPK's solution (objective %.6g) breaks a memory row after rounding",
                 glp_mip_obj_val(P));
    }
}

IlpStatus ilp_solve(const InnerProblem *p, const IlpOpts *o, IlpResult *out)
{
    memset(out, 0, sizeof *out);
    if (p->pp < 1 || p->pp > LAYOUT_MAX_PP || p->L < p->pp || p->mb < 1 || !(p->cap > 0)) {
        out->status = ILP_ERROR;
        snprintf(out->msg, sizeof out->msg, "bad problem: pp %d, L %d, m %d, capacity %g", p->pp, p->L, p->mb, p->cap);
        return out->status;
    }
    StageCols sc[LAYOUT_MAX_PP];
    Guard g;
    memset(&g, 0, sizeof g);
    g.cancel = o->cancel;
    glp_prob *volatile P = NULL;
    if (setjmp(g.jb)) {
        /* GLPK called its error hook: the environment is unusable, free it all */
        glp_error_hook(NULL, NULL);
        glp_free_env();
        out->status = ILP_ERROR;
        snprintf(out->msg, sizeof out->msg, "GLPK error: %s", g.last[0] ? g.last : "(no message)");
        return out->status;
    }
    glp_error_hook(on_error, &g);
    glp_term_hook(on_print, &g);
    glp_term_out(GLP_ON);    /* on, but every line goes to on_print */

    P = glp_create_prob();
    build(P, p, o, sc);
    if (o->dump_lp && glp_write_lp(P, NULL, o->dump_lp) != 0) {
        out->status = ILP_ERROR;
        snprintf(out->msg, sizeof out->msg, "%.80s: cannot write the LP file (missing directory or no permission)", o->dump_lp);
        goto done;
    }
    glp_iocp parm;
    glp_init_iocp(&parm);
    parm.msg_lev = GLP_MSG_OFF;
    parm.presolve = GLP_ON;
    parm.tm_lim = o->time_limit_ms > 0 ? o->time_limit_ms : INT_MAX;
    parm.cb_func = on_branch;
    parm.cb_info = &g;
    if (o->cancel && *o->cancel) {
        out->status = ILP_NO_SOLUTION;
        out->glp_ret = GLP_ESTOP;
        snprintf(out->msg, sizeof out->msg, "%s", ret_text(GLP_ESTOP));
        goto done;
    }
    out->glp_ret = glp_intopt(P, &parm);
    int mip = glp_mip_status(P);
    out->status = map_status(out->glp_ret, mip);
    if (out->status != ILP_OPTIMAL)
        snprintf(out->msg, sizeof out->msg, "%s (glp_intopt %d, MIP status %d)", ret_text(out->glp_ret),
                 out->glp_ret, mip);
    if (out->status == ILP_OPTIMAL || out->status == ILP_FEASIBLE)
        read_solution(P, p, sc, out);
done:
    glp_delete_prob(P);
    glp_term_hook(NULL, NULL);
    glp_error_hook(NULL, NULL);
    return out->status;
}

void ilp_thread_end(void) { glp_free_env(); }
