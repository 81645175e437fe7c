/* cunet.c — see cunet.h. */
#include "cunet.h"

#include <stdlib.h>
#include <string.h>

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
static void row_fwd(CuExec *e, kc_bf16 *y, const kc_bf16 *in, const kc_bf16 *w, const kc_bf16 *b, int K)
{
    int N = e->sh.N, C = e->sh.C;
    if (!e->sp) {
        kc_matmul_fwd(y, in, w, b, N, K, C, e->st);
        tp_allreduce(e, y, (size_t)N * C, CC_BF16, CC_SUM);
        return;
    }
    kc_matmul_fwd(e->part, in, w, b, N, K, C, e->st);
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

static kc_bf16 *Wl(const CuExec *e, int li, ParamId id)
{
    size_t o = e->ps.layer_off[li][id];
    return o == PARAM_NONE ? NULL : e->wb + o;
}
static float *Gl(const CuExec *e, int li, ParamId id)
{
    size_t o = e->ps.layer_off[li][id];
    return o == PARAM_NONE ? NULL : e->g + o;
}
static kc_bf16 *Ws(const CuExec *e, ParamId id)
{
    return e->ps.off[id] == PARAM_NONE ? NULL : e->wb + e->ps.off[id];
}
static float *Gs(const CuExec *e, ParamId id)
{
    return e->ps.off[id] == PARAM_NONE ? NULL : e->g + e->ps.off[id];
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

/* ---- the layer ------------------------------------------------------------- */

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
    kc_matmul_fwd(A->q, in, wq, bq, N, C, ql, st);
    kc_matmul_fwd(A->k, in, wq + (size_t)ql * C, bq ? bq + ql : NULL, N, C, kvl, st);
    kc_matmul_fwd(A->v, in, wq + (size_t)(ql + kvl) * C, bq ? bq + ql + kvl : NULL, N, C, kvl, st);
    if (e->m.pos == POS_ROPE) {
        kc_rope_fwd(A->q, A->q, s->B, s->T, s->NHl, s->HS, 0, ROPE_THETA, st);
        kc_rope_fwd(A->k, A->k, s->B, s->T, s->NKVl, s->HS, 0, ROPE_THETA, st);
    }
    kc_attention_fwd(A->o, A->lse, A->q, A->k, A->v, s->B, s->T, s->NHl, s->NKVl, s->HS, st);
    row_fwd(e, A->x2, A->o, Wl(e, li, P_PROJW), row_bias(e, li, P_PROJB), ql);
    kc_residual_fwd(A->x2, A->x2, A->x, nlc, st);
    norm_fwd(e, A->a2, A->mean2, A->rstd2, A->x2, Wl(e, li, P_LN2W), Wl(e, li, P_LN2B));
    in = col_input(e, A->a2);
    kc_matmul_fwd(A->hpre, in, Wl(e, li, P_FC1W), Wl(e, li, P_FC1B), N, C, s->F1l, st);
    if (e->m.mlp == MLP_SWIGLU)
        kc_swiglu_fwd(A->hact, A->hpre, N, s->Fl, st);
    else
        kc_gelu_fwd(A->hact, A->hpre, (size_t)N * s->Fl, st);
    row_fwd(e, out, A->hact, Wl(e, li, P_FC2W), row_bias(e, li, P_FC2B), s->Fl);
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
    /* MLP: out = x2 + fc2(act(fc1(ln2(x2)))) */
    const kc_bf16 *dy = row_dout(e);
    float *gb = row_bias_grad(e, Gl(e, li, P_FC2B));
    zero_bf(e, e->dhact, (size_t)N * s->Fl);
    kc_matmul_bwd(e->dhact, Gl(e, li, P_FC2W), gb, dy, A->hact, Wl(e, li, P_FC2W), N, s->Fl, C, st);
    zero_bf(e, e->dhpre, (size_t)N * s->F1l);
    if (e->m.mlp == MLP_SWIGLU)
        kc_swiglu_bwd(e->dhpre, A->hpre, e->dhact, N, s->Fl, st);
    else
        kc_gelu_bwd(e->dhpre, A->hpre, e->dhact, (size_t)N * s->Fl, st);
    const kc_bf16 *in = col_input(e, A->a2);
    zero_bf(e, e->dcol, nc);
    kc_matmul_bwd(e->dcol, Gl(e, li, P_FC1W), Gl(e, li, P_FC1B), e->dhpre, in, Wl(e, li, P_FC1W), N, C, s->F1l, st);
    const kc_bf16 *dn = col_grad_reduce(e);
    norm_bwd(e, e->dres, Gl(e, li, P_LN2W), Gl(e, li, P_LN2B), dn, A->x2, Wl(e, li, P_LN2W), A->mean2, A->rstd2);

    /* attention: x2 = x + proj(attn(qkv(ln1(x)))) */
    dy = row_dout(e);
    gb = row_bias_grad(e, Gl(e, li, P_PROJB));
    kc_bf16 *dov = e->dhact;   // free again
    zero_bf(e, dov, (size_t)N * ql);
    kc_matmul_bwd(dov, Gl(e, li, P_PROJW), gb, dy, A->o, Wl(e, li, P_PROJW), N, ql, C, st);
    zero_bf(e, e->dq, (size_t)N * ql);
    zero_bf(e, e->dk, (size_t)N * kvl);
    zero_bf(e, e->dv, (size_t)N * kvl);
    kc_attention_bwd(e->dq, e->dk, e->dv, dov, A->q, A->k, A->v, A->o, A->lse, s->B, s->T, s->NHl, s->NKVl, s->HS,
                     st);
    const kc_bf16 *wq = Wl(e, li, P_QKVW);
    float *gw = Gl(e, li, P_QKVW), *gqb = Gl(e, li, P_QKVB);
    const kc_bf16 *dq = e->dq, *dk = e->dk;
    in = col_input(e, A->a1);
    zero_bf(e, e->dcol, nc);
    if (e->m.pos == POS_ROPE) {   // un-rotate into drope, one of q, k at a time
        zero_bf(e, e->drope, (size_t)N * ql);
        kc_rope_bwd(e->drope, e->dq, s->B, s->T, s->NHl, s->HS, 0, ROPE_THETA, st);
        dq = e->drope;
    }
    kc_matmul_bwd(e->dcol, gw, gqb, dq, in, wq, N, C, ql, st);
    if (e->m.pos == POS_ROPE) {
        zero_bf(e, e->drope, (size_t)N * kvl);
        kc_rope_bwd(e->drope, e->dk, s->B, s->T, s->NKVl, s->HS, 0, ROPE_THETA, st);
        dk = e->drope;
    }
    kc_matmul_bwd(e->dcol, gw + (size_t)ql * C, gqb ? gqb + ql : NULL, dk, in, wq + (size_t)ql * C, N, C, kvl, st);
    kc_matmul_bwd(e->dcol, gw + (size_t)(ql + kvl) * C, gqb ? gqb + ql + kvl : NULL, e->dv, in,
                  wq + (size_t)(ql + kvl) * C, N, C, kvl, st);
    dn = col_grad_reduce(e);
    norm_bwd(e, e->dres, Gl(e, li, P_LN1W), Gl(e, li, P_LN1B), dn, A->x, Wl(e, li, P_LN1W), A->mean1, A->rstd1);
}

/* ---- embedding and head ----------------------------------------------------- */

void cunet_embed_fwd(CuExec *e, const int *tok, kc_bf16 *out)
{
    const ProxyShape *s = &e->sh;
    if (e->tp == 1) {
        kc_embedding_fwd(out, tok, Ws(e, P_WTE), Ws(e, P_WPE), s->B, s->T, s->C, 0, e->st);
        return;
    }
    /* each rank looks up the rows of its vocab range for all N tokens, rank 0
     * adds positions; the sum over tp is all-reduced, or under SP
     * reduce-scattered to this rank's Nl rows */
    kc_bf16 *p = e->sp ? e->part : out;
    cutp_embed_fwd(p, tok, Ws(e, P_WTE), e->d.tp_rank == 0 ? Ws(e, P_WPE) : NULL, s->N, s->T, s->C, e->vstart,
                   s->Vl, e->st);
    if (e->sp)
        sp_reduce_scatter(e, out, p);
    else
        tp_allreduce(e, out, (size_t)s->N * s->C, CC_BF16, CC_SUM);
}

void cunet_embed_bwd(CuExec *e, const int *tok)
{
    const ProxyShape *s = &e->sh;
    if (e->tp == 1) {
        kc_embedding_bwd(Gs(e, P_WTE), Gs(e, P_WPE), e->dres, tok, s->B, s->T, s->C, 0, e->st);
        return;
    }
    const kc_bf16 *d = row_dout(e);   // (N, C) on every rank
    if (Gs(e, P_WPE)) {   // positions are replicated: every rank adds the whole gradient
        kc_embedding_bwd(NULL, Gs(e, P_WPE), d, tok, s->B, s->T, s->C, 0, e->st);
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
        kc_crossentropy_fwd(loss, e->ce_lse, e->logits, tg, N, s->Vl, valid, e->st);
        kc_crossentropy_bwd(e->logits, e->logits, e->ce_lse, tg, scale, N, s->Vl, valid, e->st);
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
