/* cunet.c — see cunet.h. */
#include "cunet.h"

#include <stdlib.h>
#include <string.h>

#include "cufp8.h"
#include "cutp.h"

#define NORM_EPS 1e-5f
#define ROPE_THETA 10000.0f

/* ---- timers ------------------------------------------------------------- */

static void tm_open(CuExec *e, int p)
{
    if (e->ev_n == e->ev_cap) {   // grow: the events recorded so far are kept
        int cap = e->ev_cap ? 2 * e->ev_cap : 256;
        cudaEvent_t *ev = realloc(e->ev, (size_t)2 * cap * sizeof *ev);
        int *ph = realloc(e->ev_phase, (size_t)cap * sizeof *ph);
        if (!ev || !ph)
            kc_fail("realloc", "out of host memory for timers", __FILE__, __LINE__);
        e->ev = ev, e->ev_phase = ph;
        for (int i = 2 * e->ev_cap; i < 2 * cap; i++)
            CHECK_CUDA(cudaEventCreate(&e->ev[i]));
        e->ev_cap = cap;
    }
    e->ev_phase[e->ev_n] = p;
    CHECK_CUDA(cudaEventRecord(e->ev[2 * e->ev_n], e->st));
    e->cur_phase = p;
}

static void tm_close(CuExec *e)
{
    CHECK_CUDA(cudaEventRecord(e->ev[2 * e->ev_n + 1], e->st));
    e->ev_n++;
    e->cur_phase = -1;
}

int cunet_tm_swap(CuExec *e, int p)
{
    int prev = e->cur_phase;
    if (prev >= 0)
        tm_close(e);
    if (p >= 0)
        tm_open(e, p);
    return prev;
}

void cunet_tm_sum(CuExec *e)
{
    memset(e->t, 0, sizeof e->t);
    for (int i = 0; i < e->ev_n; i++) {
        float ms = 0;
        CHECK_CUDA(cudaEventElapsedTime(&ms, e->ev[2 * i], e->ev[2 * i + 1]));
        e->t[e->ev_phase[i]] += ms * 1e-3;
    }
    e->ev_n = 0;
}

void cunet_tm_free(CuExec *e)
{
    for (int i = 0; i < 2 * e->ev_cap; i++)
        cudaEventDestroy(e->ev[i]);
    free(e->ev);
    free(e->ev_phase);
    e->ev = NULL, e->ev_phase = NULL;
    e->ev_cap = e->ev_n = 0;
}

/* ---- tensor and sequence parallelism ------------------------------------ */

/* Every TP collective runs on the compute stream (ordered with the math),
 * timed as tp_comm; net.c's helpers of the same names. */
static void tp_allreduce(CuExec *e, void *x, size_t n, CuType t, CuOp op)
{
    if (e->tp == 1)
        return;
    int prev = cunet_tm_swap(e, PH_TP);
    cucomm_allreduce(e->cc, CC_TP, x, n, t, op, e->st);
    cunet_tm_swap(e, prev);
}

/* sp: out (N, C) = the (Nl, C) slices of every tp rank, in rank order. The
 * stage proxy has no tp peers: its own slice stands in for every rank's (a
 * device copy, timed as TP like the collective it replaces). */
static void sp_allgather(CuExec *e, kc_bf16 *out, const kc_bf16 *in)
{
    int prev = cunet_tm_swap(e, PH_TP);
    size_t n = (size_t)e->Nl * e->sh.C;
    if (e->proxy) {
        for (int r = 0; r < e->sh.N / e->Nl; r++)
            CHECK_CUDA(cudaMemcpyAsync(out + r * n, in, n * sizeof *in, cudaMemcpyDeviceToDevice, e->st));
    } else {
        cucomm_allgather_from(e->cc, CC_TP, in, out, n, CC_BF16, e->st);
    }
    cunet_tm_swap(e, prev);
}

/* sp: out (Nl, C) = this rank's rows of the sum over tp of in (N, C) (the
 * proxy: the first Nl rows of in) */
static void sp_reduce_scatter(CuExec *e, kc_bf16 *out, const kc_bf16 *in)
{
    int prev = cunet_tm_swap(e, PH_TP);
    size_t n = (size_t)e->Nl * e->sh.C;
    if (e->proxy)
        CHECK_CUDA(cudaMemcpyAsync(out, in, n * sizeof *in, cudaMemcpyDeviceToDevice, e->st));
    else
        cucomm_reduce_scatter_to(e->cc, CC_TP, in, out, n, CC_BF16, e->st);
    cunet_tm_swap(e, prev);
}

/* The input of a column-parallel linear: x (Nl, C), gathered to (N, C) under SP. */
static const kc_bf16 *col_input(CuExec *e, const kc_bf16 *x)
{
    if (!e->sp)
        return x;
    sp_allgather(e, e->gath, x);
    return e->gath;
}

/* e->dcol (N, C) holds a column-parallel input gradient's partial sums over
 * tp; returns this rank's rows of their sum: reduce-scattered into e->dout
 * (Nl, C) under SP, else dcol all-reduced in place. */
static const kc_bf16 *col_grad_reduce(CuExec *e)
{
    if (e->sp) {
        sp_reduce_scatter(e, e->dout, e->dcol);
        return e->dout;
    }
    tp_allreduce(e, e->dcol, (size_t)e->sh.N * e->sh.C, CC_BF16, CC_SUM);
    return e->dcol;
}

/* y (Nl, C) = row-parallel linear of in (N, K) plus the bias b, reduced over
 * tp. The bias is added once, by tp rank 0 before the reduction (net.c adds
 * it after; the sum is the same): b is NULL on the other ranks. */
static void row_fwd(CuExec *e, CuActs *A, int k8, int li, int site, kc_bf16 *y, const kc_bf16 *in,
                    const kc_bf16 *w, const kc_bf16 *b, int K)
{
    int N = e->sh.N, C = e->sh.C;
    if (!e->sp) {
        cufp8_matmul_fwd_keep(e, A, k8, li, site, 0, y, in, w, b, N, K, C);
        tp_allreduce(e, y, (size_t)N * C, CC_BF16, CC_SUM);
        return;
    }
    cufp8_matmul_fwd_keep(e, A, k8, li, site, 0, e->part, in, w, b, N, K, C);
    sp_reduce_scatter(e, y, e->part);
}

/* d(output) of a row-parallel linear: e->dres (Nl, C), gathered to (N, C) under SP. */
static const kc_bf16 *row_dout(CuExec *e)
{
    if (!e->sp)
        return e->dres;
    sp_allgather(e, e->dgat, e->dres);
    return e->dgat;
}

/* The gradient of a row-parallel bias as net.c takes it under SP: from this
 * rank's Nl rows of dres (partial; cuexec.c's sp_sync sums it over tp).
 * Without SP the weight GEMM's backward adds it from the whole dres: the
 * returned pointer is what that call gets. */
static float *row_bias_grad(CuExec *e, float *gb)
{
    if (!e->sp || !gb)
        return gb;
    kc_matmul_bwd(NULL, NULL, gb, e->dres, NULL, NULL, e->Nl, e->sh.C, e->sh.C, e->st);
    return NULL;
}

/* ---- parameters ----------------------------------------------------------- */

/* Parameters are found through their unit (cuexec.h): e->wu[u] / e->gu[u]
 * point at unit u's first float wherever it lives now (the weight slab, a
 * ZeRO-3 gather buffer; the grad slab, a ZeRO-2/3 bucket). */
static kc_bf16 *Wl(const CuExec *e, int li, ParamId id)
{
    size_t o = e->ps.layer_off[li][id];
    return o == PARAM_NONE ? NULL : e->wu[li] + (o - e->un[li].start);
}
static float *Gl(const CuExec *e, int li, ParamId id)
{
    size_t o = e->ps.layer_off[li][id];
    return o == PARAM_NONE ? NULL : e->gu[li] + (o - e->un[li].start);
}
static kc_bf16 *Ws(const CuExec *e, ParamId id)
{
    size_t o = e->ps.off[id];
    return o == PARAM_NONE ? NULL : e->wu[e->stage_unit] + (o - e->un[e->stage_unit].start);
}
static float *Gs(const CuExec *e, ParamId id)
{
    size_t o = e->ps.off[id];
    return o == PARAM_NONE ? NULL : e->gu[e->stage_unit] + (o - e->un[e->stage_unit].start);
}
/* A row-parallel bias is added once: by tp rank 0, before the all-reduce
 * or reduce-scatter (row_fwd). */
static kc_bf16 *row_bias(const CuExec *e, int li, ParamId id)
{
    return e->d.tp_rank == 0 ? Wl(e, li, id) : NULL;
}

static void zero_bf(CuExec *e, kc_bf16 *x, size_t n)
{
    CHECK_CUDA(cudaMemsetAsync(x, 0, n * sizeof *x, e->st));   // bf16 +0.0 is all zero bits
}

static void norm_fwd(CuExec *e, kc_bf16 *out, float *mean, float *rstd, const kc_bf16 *x, const kc_bf16 *w,
                     const kc_bf16 *b)
{
    if (e->m.norm == NORM_LAYERNORM)
        kc_layernorm_fwd(out, mean, rstd, x, w, b, e->Nl, e->sh.C, NORM_EPS, e->st);
    else
        kc_rmsnorm_fwd(out, rstd, x, w, e->Nl, e->sh.C, NORM_EPS, e->st);
}

static void norm_bwd(CuExec *e, kc_bf16 *dx, float *dw, float *db, const kc_bf16 *dout, const kc_bf16 *x,
                     const kc_bf16 *w, const float *mean, const float *rstd)
{
    if (e->m.norm == NORM_LAYERNORM)
        kc_layernorm_bwd(dx, dw, db, dout, x, w, mean, rstd, e->Nl, e->sh.C, e->st);
    else
        kc_rmsnorm_bwd(dx, dw, dout, x, w, rstd, e->Nl, e->sh.C, e->st);
}

/* ---- context parallel -------------------------------------------------------- */

/* Under cp a sequence's T/cp local rows are two runs of c = T/(2·cp) tokens
 * at their own global positions (cuplan_cp_pos): run k (0 <= k < 2B) of the
 * micro-batch starts at local row *row0 and global position *pos0. */
static int cp_nruns(const CuExec *e) { return e->cp > 1 ? 2 * e->sh.B : 1; }
static void cp_run(const CuExec *e, int k, int *row0, int *pos0, int *len)
{
    const ProxyShape *s = &e->sh;
    if (e->cp <= 1) {
        *row0 = 0, *pos0 = 0, *len = s->T;   // with B = s->B: the whole micro-batch
        return;
    }
    int c = s->T / 2, b = k / 2, h = k % 2;
    *row0 = b * s->T + h * c;
    *pos0 = cuplan_cp_pos(e->Tg, e->cp, e->d.cp_rank, h * c);
    *len = c;
}

/* RoPE of x (N, nh, HS) in place at the global positions; rope_bwd
 * accumulates the un-rotated dx into out. */
static void rope_fwd(CuExec *e, kc_bf16 *x, int nh)
{
    const ProxyShape *s = &e->sh;
    for (int k = 0; k < cp_nruns(e); k++) {
        int r0, p0, n;
        cp_run(e, k, &r0, &p0, &n);
        size_t at = (size_t)r0 * nh * s->HS;
        kc_rope_fwd(x + at, x + at, e->cp > 1 ? 1 : s->B, n, nh, s->HS, p0, ROPE_THETA, e->st);
    }
}
static void rope_bwd(CuExec *e, kc_bf16 *out, const kc_bf16 *dx, int nh)
{
    const ProxyShape *s = &e->sh;
    for (int k = 0; k < cp_nruns(e); k++) {
        int r0, p0, n;
        cp_run(e, k, &r0, &p0, &n);
        size_t at = (size_t)r0 * nh * s->HS;
        kc_rope_bwd(out + at, dx + at, e->cp > 1 ? 1 : s->B, n, nh, s->HS, p0, ROPE_THETA, e->st);
    }
}

/* The ring's hand-offs: the comm stream waits for the compute stream, or
 * the reverse (one event each way, re-recorded every step). */
static void comm_after_compute(CuExec *e)
{
    CHECK_CUDA(cudaEventRecord(e->cp_ev[0], e->st));
    CHECK_CUDA(cudaStreamWaitEvent(cucomm_stream(e->cc), e->cp_ev[0], 0));
}
static void compute_after_comm(CuExec *e)
{
    CHECK_CUDA(cudaEventRecord(e->cp_ev[1], cucomm_stream(e->cc)));
    CHECK_CUDA(cudaStreamWaitEvent(e->st, e->cp_ev[1], 0));
}

/* Ring attention forward (Megatron's CP): at ring step i this rank (cp rank
 * r) holds the K/V of cp rank (r − i) mod cp; the next block travels on the
 * comm stream (send to r + 1, receive from r − 1) while the compute stream
 * attends to the resident one; partial outputs merge by log-sum-exp in fp32
 * (e->cp_o, A->lse), rounded to bf16 into A->o at the end. */
static void cp_attn_fwd(CuExec *e, CuActs *A)
{
    const ProxyShape *s = &e->sh;
    int cp = e->cp, r = e->d.cp_rank;
    size_t nkv = (size_t)s->N * s->kvl;
    cudaStream_t cs = cucomm_stream(e->cc);
    const kc_bf16 *ck = A->k, *cv = A->v;   // the resident block: this rank's own first
    for (int i = 0; i < cp; i++) {
        kc_bf16 *nx = e->cp_kv[i % 2];       // the resident block of step i − 1: read already
        if (i + 1 < cp) {
            comm_after_compute(e);
            cucomm_ring(e->cc, CC_CP, ck, nx, nkv, CC_BF16, cs);
            cucomm_ring(e->cc, CC_CP, cv, nx + nkv, nkv, CC_BF16, cs);
        }
        int rk = ((r - i) % cp + cp) % cp;
        if (i == 0) {
            kc_attention_block_fwd(e->cp_o, A->lse, A->q, ck, cv, s->B, s->T, s->NHl, s->NKVl, s->HS, cp, r, rk, e->st);
        } else {
            kc_attention_block_fwd(e->cp_op, e->cp_lp, A->q, ck, cv, s->B, s->T, s->NHl, s->NKVl, s->HS, cp, r, rk,
                                   e->st);
            kc_attention_merge(e->cp_o, A->lse, e->cp_op, e->cp_lp, s->B, s->T, s->NHl, s->HS, e->st);
        }
        if (i + 1 < cp) {
            compute_after_comm(e);
            ck = nx, cv = nx + nkv;
        }
    }
    kc_to_bf16(A->o, e->cp_o, (size_t)s->N * s->ql, e->st);
}

/* Ring attention backward: K/V travel as in the forward (prefetched on the
 * comm stream), and with them the fp32 accumulators of their dK/dV, which
 * each rank adds its block's part to and passes on after computing it; after
 * cp hops each rank's own dK/dV have come home. dq accumulates locally in
 * fp32. Writes e->dq, e->dk, e->dv (bf16, overwritten). */
static void cp_attn_bwd(CuExec *e, CuActs *A, const kc_bf16 *dout)
{
    const ProxyShape *s = &e->sh;
    int cp = e->cp, r = e->d.cp_rank;
    size_t nkv = (size_t)s->N * s->kvl, nq = (size_t)s->N * s->ql;
    cudaStream_t cs = cucomm_stream(e->cc);
    float *acc = e->cp_dkv[0];
    kc_zero(e->cp_dq, nq, e->st);
    kc_zero(acc, 2 * nkv, e->st);
    const kc_bf16 *ck = A->k, *cv = A->v;
    for (int i = 0; i < cp; i++) {
        kc_bf16 *nx = e->cp_kv[i % 2];
        if (i + 1 < cp) {
            comm_after_compute(e);
            cucomm_ring(e->cc, CC_CP, ck, nx, nkv, CC_BF16, cs);
            cucomm_ring(e->cc, CC_CP, cv, nx + nkv, nkv, CC_BF16, cs);
        }
        int rk = ((r - i) % cp + cp) % cp;
        kc_attention_block_bwd(e->cp_dq, acc, acc + nkv, dout, A->q, ck, cv, A->o, A->lse, s->B, s->T, s->NHl,
                               s->NKVl, s->HS, cp, r, rk, e->st);
        float *nacc = e->cp_dkv[(i + 1) % 2];   // sent on at step i − 1 already
        comm_after_compute(e);
        cucomm_ring(e->cc, CC_CP, acc, nacc, 2 * nkv, CC_F32, cs);
        compute_after_comm(e);
        acc = nacc;
        if (i + 1 < cp)
            ck = nx, cv = nx + nkv;
    }
    kc_to_bf16(e->dq, e->cp_dq, nq, e->st);
    kc_to_bf16(e->dk, acc, nkv, e->st);
    kc_to_bf16(e->dv, acc + nkv, nkv, e->st);
}

/* ---- the layer ------------------------------------------------------------- */

/* ---- mixture of experts ---------------------------------------------------- */

int cunet_layer_moe(const CuExec *e, int li) { return e->E > 0 && spec_layer_is_moe(&e->m, e->ps.glayer[li]); }

/* The routed block's first half (cumoe_fwd_route): queued before the shared
 * expert so that the host's wait for the expert counts (cumoe_fwd_experts)
 * overlaps the shared expert's GEMMs on the GPU. */
static void moe_route(CuExec *e, int li, CuActs *A)
{
    cumoe_fwd_route(&e->moe, A->moe, A->a2, Wl(e, li, P_ROUTW));
}

/* out (Nl, C) = the routed experts of A->a2 (this rank's rows: under SP
 * Megatron routes the N/tp rows), or out += them after the shared expert,
 * moe_route having been queued. A failure (more routed rows than the block
 * holds) is kept in e->moe_err for cuexec_step and leaves zeros. */
static void moe_fwd(CuExec *e, int li, CuActs *A, kc_bf16 *out, int add)
{
    size_t nc = (size_t)e->Nl * e->sh.C;
    kc_bf16 *dst = add ? e->moe_out : out;
    char err[256];
    if (cumoe_fwd_experts(&e->moe, A->moe, dst, Wl(e, li, P_EFC1W), Wl(e, li, P_EFC2W), err, sizeof err) != 0) {
        if (!e->moe_err[0])
            snprintf(e->moe_err, sizeof e->moe_err, "layer %d: %.200s", e->ps.glayer[li], err);
        zero_bf(e, dst, nc);
    }
    if (add)
        kc_residual_fwd(out, out, e->moe_out, nc, e->st);
}

/* da2 (Nl, C) += d(a2) of the routed experts and the router, given d(out)
 * in e->dres; the router's and this rank's experts' gradients accumulate,
 * with the balance loss over sequences of T local tokens (training runs tp
 * = cp = 1: each sequence whole on one rank). */
static void moe_bwd(CuExec *e, int li, CuActs *A, kc_bf16 *da2)
{
    cumoe_bwd(&e->moe, A->moe, da2, e->dres, A->a2, Wl(e, li, P_ROUTW), Wl(e, li, P_EFC1W),
              Wl(e, li, P_EFC2W), Gl(e, li, P_ROUTW), Gl(e, li, P_EFC1W), Gl(e, li, P_EFC2W), e->aux_g, e->sh.T);
}

/* net.c's layer: norms and residual adds over this rank's Nl rows, the GEMMs
 * and attention over all N (the normed input gathered under SP). */
void cunet_layer_fwd(CuExec *e, int li, CuActs *A, kc_bf16 *out)
{
    const ProxyShape *s = &e->sh;
    int N = s->N, C = s->C, ql = s->ql, kvl = s->kvl;
    size_t nlc = (size_t)e->Nl * C;
    cudaStream_t st = e->st;
    norm_fwd(e, A->a1, A->mean1, A->rstd1, A->x, Wl(e, li, P_LN1W), Wl(e, li, P_LN1B));
    const kc_bf16 *in = col_input(e, A->a1);
    const kc_bf16 *wq = Wl(e, li, P_QKVW), *bq = Wl(e, li, P_QKVB);
    cufp8_matmul_fwd_keep(e, A, CUFP8_QKV, li, CUFP8_WQ, 0, A->q, in, wq, bq, N, C, ql);
    cufp8_matmul_fwd_keep(e, A, -1, li, CUFP8_WK, 1, A->k, in, wq + (size_t)ql * C, bq ? bq + ql : NULL, N, C, kvl);
    cufp8_matmul_fwd_keep(e, A, -1, li, CUFP8_WV, 1, A->v, in, wq + (size_t)(ql + kvl) * C,
                          bq ? bq + ql + kvl : NULL, N, C, kvl);
    if (e->m.pos == POS_ROPE) {
        rope_fwd(e, A->q, s->NHl);
        rope_fwd(e, A->k, s->NKVl);
    }
    if (e->cp > 1)
        cp_attn_fwd(e, A);
    else
        kc_attention_fwd(A->o, A->lse, A->q, A->k, A->v, s->B, s->T, s->NHl, s->NKVl, s->HS, st);
    row_fwd(e, A, CUFP8_PROJ, li, CUFP8_WPROJ, A->x2, A->o, Wl(e, li, P_PROJW), row_bias(e, li, P_PROJB), ql);
    kc_residual_fwd(A->x2, A->x2, A->x, nlc, st);
    norm_fwd(e, A->a2, A->mean2, A->rstd2, A->x2, Wl(e, li, P_LN2W), Wl(e, li, P_LN2B));
    int moe = cunet_layer_moe(e, li), shared = !moe || Wl(e, li, P_FC1W);
    int F = moe ? e->Fs : s->Fl, F1 = moe ? e->F1s : s->F1l;
    if (moe)
        moe_route(e, li, A);
    if (shared) {   // the dense MLP, or an MoE layer's shared expert
        in = col_input(e, A->a2);
        cufp8_matmul_fwd_keep(e, A, CUFP8_FC1, li, CUFP8_WFC1, 0, A->hpre, in, Wl(e, li, P_FC1W), Wl(e, li, P_FC1B),
                              N, C, F1);
        if (e->m.mlp == MLP_SWIGLU)
            kc_swiglu_fwd(A->hact, A->hpre, N, F, st);
        else
            kc_gelu_fwd(A->hact, A->hpre, (size_t)N * F, st);
        row_fwd(e, A, CUFP8_FC2, li, CUFP8_WFC2, out, A->hact, Wl(e, li, P_FC2W), row_bias(e, li, P_FC2B), F);
    }
    if (moe)
        moe_fwd(e, li, A, out, shared);
    kc_residual_fwd(out, out, A->x2, nlc, st);
}

/* Under SP the normed inputs are gathered again (net.c: not kept), dres is
 * gathered before the row-parallel GEMMs' backward and the column-parallel
 * input gradients are reduce-scattered. */
void cunet_layer_bwd(CuExec *e, int li, CuActs *A)
{
    const ProxyShape *s = &e->sh;
    int N = s->N, C = s->C, ql = s->ql, kvl = s->kvl;
    size_t nc = (size_t)N * C;
    cudaStream_t st = e->st;
    /* MLP: out = x2 + fc2(act(fc1(ln2(x2)))) (+ the routed experts of an MoE layer) */
    int moe = cunet_layer_moe(e, li), shared = !moe || Wl(e, li, P_FC1W);
    int F = moe ? e->Fs : s->Fl, F1 = moe ? e->F1s : s->F1l;
    const kc_bf16 *dy, *in;
    float *gb;
    zero_bf(e, e->dcol, nc);
    if (shared) {
        dy = row_dout(e);
        gb = row_bias_grad(e, Gl(e, li, P_FC2B));
        zero_bf(e, e->dhact, (size_t)N * F);
        cufp8_matmul_bwd_kept(e, A, CUFP8_FC2, li, CUFP8_WFC2, 0, e->dhact, Gl(e, li, P_FC2W), gb, dy, A->hact,
                              Wl(e, li, P_FC2W), N, F, C);
        zero_bf(e, e->dhpre, (size_t)N * F1);
        if (e->m.mlp == MLP_SWIGLU)
            kc_swiglu_bwd(e->dhpre, A->hpre, e->dhact, N, F, st);
        else
            kc_gelu_bwd(e->dhpre, A->hpre, e->dhact, (size_t)N * F, st);
        in = col_input(e, A->a2);
        cufp8_matmul_bwd_kept(e, A, CUFP8_FC1, li, CUFP8_WFC1, 0, e->dcol, Gl(e, li, P_FC1W), Gl(e, li, P_FC1B),
                              e->dhpre, in, Wl(e, li, P_FC1W), N, C, F1);
    }
    const kc_bf16 *dn = col_grad_reduce(e);   // this rank's rows of d(a2)
    if (moe)
        moe_bwd(e, li, A, (kc_bf16 *)dn);   // dn is e->dcol or e->dout: scratch of this layer
    norm_bwd(e, e->dres, Gl(e, li, P_LN2W), Gl(e, li, P_LN2B), dn, A->x2, Wl(e, li, P_LN2W), A->mean2, A->rstd2);

    /* attention: x2 = x + proj(attn(qkv(ln1(x)))) */
    dy = row_dout(e);
    gb = row_bias_grad(e, Gl(e, li, P_PROJB));
    kc_bf16 *dov = e->dhact;   // free again
    zero_bf(e, dov, (size_t)N * ql);
    cufp8_matmul_bwd_kept(e, A, CUFP8_PROJ, li, CUFP8_WPROJ, 0, dov, Gl(e, li, P_PROJW), gb, dy, A->o,
                          Wl(e, li, P_PROJW), N, ql, C);
    if (e->cp > 1) {
        cp_attn_bwd(e, A, dov);
    } else {
        zero_bf(e, e->dq, (size_t)N * ql);
        zero_bf(e, e->dk, (size_t)N * kvl);
        zero_bf(e, e->dv, (size_t)N * kvl);
        kc_attention_bwd(e->dq, e->dk, e->dv, dov, A->q, A->k, A->v, A->o, A->lse, s->B, s->T, s->NHl, s->NKVl,
                         s->HS, st);
    }
    const kc_bf16 *wq = Wl(e, li, P_QKVW);
    float *gw = Gl(e, li, P_QKVW), *gqb = Gl(e, li, P_QKVB);
    const kc_bf16 *dq = e->dq, *dk = e->dk;
    in = col_input(e, A->a1);
    zero_bf(e, e->dcol, nc);
    if (e->m.pos == POS_ROPE) {   // un-rotate into drope, one of q, k at a time
        zero_bf(e, e->drope, (size_t)N * ql);
        rope_bwd(e, e->drope, e->dq, s->NHl);
        dq = e->drope;
    }
    cufp8_matmul_bwd_kept(e, A, CUFP8_QKV, li, CUFP8_WQ, 0, e->dcol, gw, gqb, dq, in, wq, N, C, ql);
    if (e->m.pos == POS_ROPE) {
        zero_bf(e, e->drope, (size_t)N * kvl);
        rope_bwd(e, e->drope, e->dk, s->NKVl);
        dk = e->drope;
    }
    cufp8_matmul_bwd_kept(e, A, CUFP8_QKV, li, CUFP8_WK, 1, e->dcol, gw + (size_t)ql * C, gqb ? gqb + ql : NULL,
                          dk, in, wq + (size_t)ql * C, N, C, kvl);
    cufp8_matmul_bwd_kept(e, A, CUFP8_QKV, li, CUFP8_WV, 1, e->dcol, gw + (size_t)(ql + kvl) * C,
                          gqb ? gqb + ql + kvl : NULL, e->dv, in, wq + (size_t)(ql + kvl) * C, N, C, kvl);
    dn = col_grad_reduce(e);
    norm_bwd(e, e->dres, Gl(e, li, P_LN1W), Gl(e, li, P_LN1B), dn, A->x, Wl(e, li, P_LN1W), A->mean1, A->rstd1);
}

/* ---- embedding and head ----------------------------------------------------- */

/* Learned positions are the global ones: under cp each run of a sequence's
 * local rows (cp_run) is looked up at its own first position. */
void cunet_embed_fwd(CuExec *e, const int *tok, kc_bf16 *out)
{
    const ProxyShape *s = &e->sh;
    int nr = cp_nruns(e), B1 = e->cp > 1 ? 1 : s->B;
    if (e->tp == 1) {
        for (int k = 0; k < nr; k++) {
            int r0, p0, n;
            cp_run(e, k, &r0, &p0, &n);
            kc_embedding_fwd(out + (size_t)r0 * s->C, tok + r0, Ws(e, P_WTE), Ws(e, P_WPE), B1, n, s->C, p0, e->st);
        }
        return;
    }
    /* each rank looks up the rows of its vocab range for all N tokens, rank 0
     * adds positions; the sum over tp is all-reduced, or under SP
     * reduce-scattered to this rank's Nl rows */
    kc_bf16 *p = e->sp ? e->part : out;
    const kc_bf16 *wpe = e->d.tp_rank == 0 ? Ws(e, P_WPE) : NULL;
    for (int k = 0; k < nr; k++) {
        int r0, p0, n;
        cp_run(e, k, &r0, &p0, &n);
        int rows = e->cp > 1 ? n : s->N;   // positions repeat every T rows (every run under cp)
        cutp_embed_fwd(p + (size_t)r0 * s->C, tok + r0, Ws(e, P_WTE), wpe ? wpe + (size_t)p0 * s->C : NULL, rows,
                       n, s->C, e->vstart, s->Vl, e->st);
    }
    if (e->sp)
        sp_reduce_scatter(e, out, p);
    else
        tp_allreduce(e, out, (size_t)s->N * s->C, CC_BF16, CC_SUM);
}

void cunet_embed_bwd(CuExec *e, const int *tok)
{
    const ProxyShape *s = &e->sh;
    int nr = cp_nruns(e), B1 = e->cp > 1 ? 1 : s->B;
    if (e->tp == 1) {
        for (int k = 0; k < nr; k++) {
            int r0, p0, n;
            cp_run(e, k, &r0, &p0, &n);
            kc_embedding_bwd(Gs(e, P_WTE), Gs(e, P_WPE), e->dres + (size_t)r0 * s->C, tok + r0, B1, n, s->C, p0,
                             e->st);
        }
        return;
    }
    const kc_bf16 *d = row_dout(e);   // (N, C) on every rank
    if (Gs(e, P_WPE)) {   // positions are replicated: every rank adds the whole gradient
        for (int k = 0; k < nr; k++) {
            int r0, p0, n;
            cp_run(e, k, &r0, &p0, &n);
            kc_embedding_bwd(NULL, Gs(e, P_WPE), d + (size_t)r0 * s->C, tok + r0, B1, n, s->C, p0, e->st);
        }
        /* its fp32 atomics round differently on each rank: the tp average keeps
         * the copies identical (the accumulated part is identical already, so
         * averaging after every micro-batch adds the mean of the new ones) */
        size_t n = e->ps.len[P_WPE];
        tp_allreduce(e, Gs(e, P_WPE), n, CC_F32, CC_SUM);
        kc_scale(Gs(e, P_WPE), 1.0f / (float)e->tp, n, e->st);
    }
    cutp_embed_bwd(Gs(e, P_WTE), d, tok, s->N, s->C, e->vstart, s->Vl, e->st);
}

/* The final norm over this rank's Nl rows; under SP its output is gathered
 * for the LM head (all N tokens' logits of this rank's vocabulary slice) and
 * the head's input gradient reduce-scattered back to Nl rows. */
void cunet_head(CuExec *e, int mb, float scale, kc_bf16 *dlast)
{
    const ProxyShape *s = &e->sh;
    int N = s->N, C = s->C;
    ParamId hid = e->ps.off[P_HEAD] != PARAM_NONE ? P_HEAD : P_WTE;   // tied, one stage: the embedding
    const kc_bf16 *wh = Ws(e, hid), *lw = Ws(e, P_LNFW), *lb = Ws(e, P_LNFB);
    const int *tg = e->d_targets + (size_t)mb * N;
    float *loss = e->losses + (size_t)mb * N;
    norm_fwd(e, e->head_n, e->head_mean, e->head_rstd, e->head_in, lw, lb);
    const kc_bf16 *in = col_input(e, e->head_n);
    kc_matmul_fwd(e->logits, in, wh, NULL, N, C, s->Vl, e->st);
    if (e->tp == 1) {
        int valid = e->m.vocab < s->Vl ? e->m.vocab : s->Vl;
        kc_crossentropy_fused(loss, e->ce_lse, e->logits, e->logits, tg, scale, N, s->Vl, valid, e->st);
    } else {   // vocab-parallel: max and (sum-exp, target logit) combined over tp
        int valid = e->m.vocab - e->vstart;
        valid = valid < 0 ? 0 : valid > s->Vl ? s->Vl : valid;
        float *mx = e->ce_red, *red = e->ce_red + N;
        cutp_ce_max(mx, e->logits, N, s->Vl, valid, e->st);
        tp_allreduce(e, mx, N, CC_F32, CC_MAX);
        cutp_ce_sumexp(red, e->logits, mx, tg, e->vstart, N, s->Vl, valid, e->st);
        tp_allreduce(e, red, 2 * (size_t)N, CC_F32, CC_SUM);
        cutp_ce_finish(loss, e->logits, mx, red, tg, e->vstart, scale, N, s->Vl, valid, e->st);
    }
    zero_bf(e, e->dcol, (size_t)N * C);
    kc_matmul_bwd(e->dcol, Gs(e, hid), NULL, e->logits, in, wh, N, C, s->Vl, e->st);
    const kc_bf16 *dn = col_grad_reduce(e);
    zero_bf(e, dlast, (size_t)e->Nl * C);
    norm_bwd(e, dlast, Gs(e, P_LNFW), Gs(e, P_LNFB), dn, e->head_in, lw, e->head_mean, e->head_rstd);
}
