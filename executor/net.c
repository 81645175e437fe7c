/* net.c — see net.h. Every TP collective goes through dist.h and is timed
 * into e->t[PH_TP]. Under context parallel (e->cpos set) attention is the
 * ring of cpattn.c and RoPE and learned positions use the tokens' global
 * positions. Weights and gradients are reached through exec.h's
 * exec_lw/exec_lg/exec_sw/exec_sg, never the slabs, so ZeRO-2/3 can move them.
 * An MoE layer (exec_layer_moe) runs its shared expert here as a dense MLP of
 * shared_ffn (none with shared_ffn 0) and its routed experts in moe.c. */
#include "net.h"

#include <float.h>
#include <math.h>
#include <string.h>

#include "kernels.h"
#include "moe.h"

#define NORM_EPS 1e-5f
#define ROPE_THETA 10000.0f

static int tp_on(const Exec *e) { return e->d.tp > 1; }

static void norm_fwd(Exec *e, float *out, float *mean, float *rstd, const float *x, const float *w,
                     const float *b)
{
    if (e->m.norm == NORM_LAYERNORM)
        k_layernorm_fwd(out, mean, rstd, x, w, b, e->Nl, e->C, NORM_EPS);
    else
        k_rmsnorm_fwd(out, rstd, x, w, e->Nl, e->C, NORM_EPS);
}

static void norm_bwd(Exec *e, float *dx, float *dw, float *db, const float *dout, const float *x,
                     const float *w, const float *mean, const float *rstd)
{
    if (e->m.norm == NORM_LAYERNORM)
        k_layernorm_bwd(dx, dw, db, dout, x, w, mean, rstd, e->Nl, e->C);
    else
        k_rmsnorm_bwd(dx, dw, dout, x, w, rstd, e->Nl, e->C);
}

/* The input of a column-parallel linear: x (Nl, C) gathered to (N, C) under SP. */
static const float *col_input(Exec *e, const float *x)
{
    if (!e->lo.sp)
        return x;
    dist_allgather(e->gath, x, e->Nl * e->C, e->d.tp_comm, &e->t[PH_TP]);
    return e->gath;
}

/* The input gradient of a column-parallel linear: dcol (N, C) partial sums
 * over TP → added into dx (Nl, C): reduce-scatter under SP, else all-reduce. */
static void col_grad_reduce(Exec *e, float *dx)
{
    size_t nl = (size_t)e->Nl * e->C;
    if (e->lo.sp) {
        dist_reduce_scatter(dx, e->dcol, e->Nl * e->C, e->d.tp_comm, &e->t[PH_TP]);
    } else {
        dist_allreduce(e->dcol, e->N * e->C, e->d.tp_comm, &e->t[PH_TP]);
        memcpy(dx, e->dcol, nl * sizeof *dx);
    }
}

/* y (Nl, C) = row-parallel linear of in (N, K) plus bias, reduced over TP. */
static void row_fwd(Exec *e, float *y, const float *in, const float *w, const float *b, int K)
{
    if (!tp_on(e)) {
        k_matmul_fwd(y, in, w, b, e->N, K, e->C);
        return;
    }
    k_matmul_fwd(e->part, in, w, NULL, e->N, K, e->C);
    if (e->lo.sp)
        dist_reduce_scatter(y, e->part, e->Nl * e->C, e->d.tp_comm, &e->t[PH_TP]);
    else {
        dist_allreduce(e->part, e->N * e->C, e->d.tp_comm, &e->t[PH_TP]);
        memcpy(y, e->part, (size_t)e->N * e->C * sizeof *y);
    }
    if (b)
        for (int i = 0; i < e->Nl; i++)
            for (int c = 0; c < e->C; c++)
                y[(size_t)i * e->C + c] += b[c];
}

/* dout (Nl, C) of a row-parallel linear, gathered to (N, C) under SP. */
static const float *row_dout(Exec *e, const float *dout)
{
    if (!e->lo.sp)
        return dout;
    dist_allgather(e->dgat, dout, e->Nl * e->C, e->d.tp_comm, &e->t[PH_TP]);
    return e->dgat;
}

/* the tensors wherever the layout keeps them now (exec.h: ZeRO-2/3 buffers) */
#define W(id) exec_lw(e, li, id)
#define G(id) exec_lg(e, li, id)

/* RoPE in place on x (N, nh, hs); the backward adds into dx from dy. */
static void rope_fwd(Exec *e, float *x, int nh, int hs)
{
    if (e->cpos)
        k_rope_pos_fwd(x, x, e->cpos, e->B, e->Tl, nh, hs, ROPE_THETA);
    else
        k_rope_fwd(x, x, e->B, e->T, nh, hs, 0, ROPE_THETA);
}

static void rope_bwd(Exec *e, float *dx, const float *dy, int nh, int hs)
{
    if (e->cpos)
        k_rope_pos_bwd(dx, dy, e->cpos, e->B, e->Tl, nh, hs, ROPE_THETA);
    else
        k_rope_bwd(dx, dy, e->B, e->T, nh, hs, 0, ROPE_THETA);
}

/* The sliding window of local layer li (0: full causal); an MTP layer has none. */
static int layer_window(const Exec *e, int li)
{
    return li >= 0 && li < e->sm.nlayers && spec_layer_is_windowed(&e->m, e->ps.glayer[li]) ? e->m.window : 0;
}

/* Causal attention of the whole local sequence, windowed or not, with the
 * layer's sinks when the model has them. */
static void core_fwd(Exec *e, int li, LayerActs *A, int nh, int nkv, int hs)
{
    int w = layer_window(e, li);
    if (w > 0)
        k_attention_window_fwd(A->o, A->lse, A->q, A->k, A->v, e->B, e->T, nh, nkv, hs, w);
    else
        k_attention_fwd(A->o, A->lse, A->q, A->k, A->v, e->B, e->T, nh, nkv, hs);
    if (W(P_SINK))
        k_attention_sink_fwd(A->o, A->lse, W(P_SINK), e->B, e->T, nh, hs);
}

static void core_bwd(Exec *e, int li, LayerActs *A, float *dq, float *dk, float *dv, const float *dov, int nh, int nkv,
                     int hs)
{
    if (G(P_SINK))
        k_attention_sink_bwd(G(P_SINK), dov, A->o, A->lse, W(P_SINK), e->B, e->T, nh, hs);
    int w = layer_window(e, li);
    if (w > 0)
        k_attention_window_bwd(dq, dk, dv, dov, A->q, A->k, A->v, A->o, A->lse, e->B, e->T, nh, nkv, hs, w);
    else
        k_attention_bwd(dq, dk, dv, dov, A->q, A->k, A->v, A->o, A->lse, e->B, e->T, nh, nkv, hs);
}

/* Multi-head attention (MHA/GQA): x2 = proj(attn(rope(qkv(a1)))), before the residual. */
static void attn_fwd(Exec *e, int li, LayerActs *A)
{
    int N = e->N, C = e->C, ql = e->ql, kvl = e->kvl;
    const float *in = col_input(e, A->a1);
    const float *wq = W(P_QKVW), *bq = W(P_QKVB);
    k_matmul_fwd(A->q, in, wq, bq, N, C, ql);
    k_matmul_fwd(A->k, in, wq + (size_t)ql * C, bq ? bq + ql : NULL, N, C, kvl);
    k_matmul_fwd(A->v, in, wq + (size_t)(ql + kvl) * C, bq ? bq + ql + kvl : NULL, N, C, kvl);
    if (e->m.pos == POS_ROPE) {
        rope_fwd(e, A->q, e->NHl, e->HS);
        rope_fwd(e, A->k, e->NKVl, e->HS);
    }
    if (e->cpos)
        cpattn_fwd(&e->cpa, A->o, A->lse, A->q, A->k, A->v);
    else
        core_fwd(e, li, A, e->NHl, e->NKVl, e->HS);
    row_fwd(e, A->x2, A->o, W(P_PROJW), W(P_PROJB), ql);
}

/* The attention's backward: e->dres (Nl, C) at its output to e->dout (Nl, C) at a1. */
static void attn_bwd(Exec *e, int li, LayerActs *A)
{
    int N = e->N, C = e->C, ql = e->ql, kvl = e->kvl, Nl = e->Nl;
    size_t nc = (size_t)N * C;
    const float *dy = row_dout(e, e->dres);
    const float *in;
    if (G(P_PROJB))
        k_matmul_bwd(NULL, NULL, G(P_PROJB), e->dres, NULL, NULL, Nl, C, C);
    float *dq = e->dq, *dk = e->dk, *dv = e->dv, *dov = e->dhact;   // dhact is free again
    k_zero(dov, (size_t)N * ql);
    k_matmul_bwd(dov, G(P_PROJW), NULL, dy, A->o, W(P_PROJW), N, ql, C);
    k_zero(dq, (size_t)N * ql);
    k_zero(dk, (size_t)N * kvl);
    k_zero(dv, (size_t)N * kvl);
    if (e->cpos)
        cpattn_bwd(&e->cpa, dq, dk, dv, dov, A->q, A->k, A->v, A->o, A->lse);
    else
        core_bwd(e, li, A, dq, dk, dv, dov, e->NHl, e->NKVl, e->HS);
    if (e->m.pos == POS_ROPE) {
        memcpy(e->drope, dq, (size_t)N * ql * sizeof *dq);
        k_zero(dq, (size_t)N * ql);
        rope_bwd(e, dq, e->drope, e->NHl, e->HS);
        memcpy(e->drope, dk, (size_t)N * kvl * sizeof *dk);
        k_zero(dk, (size_t)N * kvl);
        rope_bwd(e, dk, e->drope, e->NKVl, e->HS);
    }
    in = col_input(e, A->a1);
    const float *wq = W(P_QKVW);
    float *gw = G(P_QKVW), *gb = G(P_QKVB);
    k_zero(e->dcol, nc);
    k_matmul_bwd(e->dcol, gw, gb, dq, in, wq, N, C, ql);
    k_matmul_bwd(e->dcol, gw + (size_t)ql * C, gb ? gb + ql : NULL, dk, in, wq + (size_t)ql * C, N, C, kvl);
    k_matmul_bwd(e->dcol, gw + (size_t)(ql + kvl) * C, gb ? gb + ql + kvl : NULL, dv, in,
                 wq + (size_t)(ql + kvl) * C, N, C, kvl);
    col_grad_reduce(e, e->dout);
}

/* ---- multi-head latent attention (DeepSeek-V2/V3) ----
 * c_q = a1·W_qaᵀ, c_kv|k_pe = a1·W_kvaᵀ (this rank's rows, replicated
 * weights); q = rms(c_q)·W_qbᵀ (or a1·W_qbᵀ without q compression), per head
 * [q_nope | q_pe]; [k_nope | v] per head = rms(c_kv)·W_kvbᵀ; RoPE on q_pe and
 * on k_pe, which every head shares: k = [k_nope | k_pe]. Softmax scale
 * 1/sqrt(nope + rope); v is zero-padded to that width, so o is too. */

/* Columns [0, w) of R rows of stride ss into R rows of stride ds. */
static void cols_copy(float *dst, int ds, const float *src, int ss, size_t R, int w)
{
    for (size_t r = 0; r < R; r++)
        memcpy(dst + r * ds, src + r * ss, (size_t)w * sizeof *dst);
}

static void mla_fwd(Exec *e, int li, LayerActs *A)
{
    int N = e->N, Nl = e->Nl, C = e->C, H = e->NHl, HS = e->HS, D = e->mD;
    int nope = e->nope, rope = e->rope, vd = e->vd, qr = e->qr, kr = e->kr, kw = kr + rope;
    size_t NH = (size_t)N * H;
    if (qr)
        k_matmul_fwd(A->cq, A->a1, W(P_QAW), NULL, Nl, C, qr);
    k_matmul_fwd(A->ckv, A->a1, W(P_KVAW), NULL, Nl, C, kw);
    /* one packed row per token: [rms(c_q) | rms(c_kv) | k_pe], gathered under SP */
    for (int i = 0; i < Nl; i++) {
        float *p = e->mpack + (size_t)i * D;
        if (qr)
            k_rmsnorm_fwd(p, A->rq + i, A->cq + (size_t)i * qr, W(P_QANW), 1, qr, NORM_EPS);
        k_rmsnorm_fwd(p + qr, A->rkv + i, A->ckv + (size_t)i * kw, W(P_KVANW), 1, kr, NORM_EPS);
        memcpy(p + qr + kr, A->ckv + (size_t)i * kw + kr, (size_t)rope * sizeof *p);
    }
    const float *lat = e->mpack;
    if (e->lo.sp) {
        dist_allgather(e->mlat, e->mpack, Nl * D, e->d.tp_comm, &e->t[PH_TP]);
        lat = e->mlat;
    }
    cols_copy(A->cqn, qr, lat, D, N, qr);
    cols_copy(A->ckvn, kr, lat + qr, D, N, kr);
    cols_copy(e->mkpe, rope, lat + qr + kr, D, N, rope);
    if (qr)
        k_matmul_fwd(A->q, A->cqn, W(P_QBW), NULL, N, qr, H * HS);
    else
        k_matmul_fwd(A->q, col_input(e, A->a1), W(P_QBW), NULL, N, C, H * HS);
    k_matmul_fwd(e->mkv, A->ckvn, W(P_KVBW), NULL, N, kr, H * (nope + vd));
    cols_copy(e->mqr, rope, A->q + nope, HS, NH, rope);
    rope_fwd(e, e->mqr, H, rope);
    cols_copy(A->q + nope, HS, e->mqr, rope, NH, rope);
    rope_fwd(e, e->mkpe, 1, rope);
    cols_copy(A->k, HS, e->mkv, nope + vd, NH, nope);
    for (size_t r = 0; r < NH; r++)
        memcpy(A->k + r * HS + nope, e->mkpe + r / H * rope, (size_t)rope * sizeof *A->k);
    k_zero(A->v, NH * HS);
    cols_copy(A->v, HS, e->mkv + nope, nope + vd, NH, vd);
    if (e->cpos)
        cpattn_fwd(&e->cpa, A->o, A->lse, A->q, A->k, A->v);
    else
        core_fwd(e, li, A, H, H, HS);
    cols_copy(e->mo, vd, A->o, HS, NH, vd);
    row_fwd(e, A->x2, e->mo, W(P_PROJW), NULL, H * vd);
}

/* e->dres (Nl, C) at the projection's output to e->dout (Nl, C) at a1. */
static void mla_bwd(Exec *e, int li, LayerActs *A)
{
    int N = e->N, Nl = e->Nl, C = e->C, H = e->NHl, HS = e->HS, D = e->mD;
    int nope = e->nope, rope = e->rope, vd = e->vd, qr = e->qr, kr = e->kr, kw = kr + rope;
    size_t NH = (size_t)N * H;
    float *dq = e->dq, *dk = e->dk, *dv = e->dv, *dov = e->dhact, *dmo = e->mkv;   // free here
    const float *dy = row_dout(e, e->dres);
    cols_copy(e->mo, vd, A->o, HS, NH, vd);
    k_zero(dmo, NH * vd);
    k_matmul_bwd(dmo, G(P_PROJW), NULL, dy, e->mo, W(P_PROJW), N, H * vd, C);
    k_zero(dov, NH * HS);
    cols_copy(dov, HS, dmo, vd, NH, vd);
    k_zero(dq, NH * HS);
    k_zero(dk, NH * HS);
    k_zero(dv, NH * HS);
    if (e->cpos)
        cpattn_bwd(&e->cpa, dq, dk, dv, dov, A->q, A->k, A->v, A->o, A->lse);
    else
        core_bwd(e, li, A, dq, dk, dv, dov, H, H, HS);
    /* back through RoPE: q's rope parts, and the shared key summed over heads */
    cols_copy(e->drope, rope, dq + nope, HS, NH, rope);
    k_zero(e->mqr, NH * rope);
    rope_bwd(e, e->mqr, e->drope, H, rope);
    cols_copy(dq + nope, HS, e->mqr, rope, NH, rope);
    k_zero(e->drope, (size_t)N * rope);
    for (size_t r = 0; r < NH; r++)
        for (int j = 0; j < rope; j++)
            e->drope[r / H * rope + j] += dk[r * HS + nope + j];
    k_zero(e->mkpe, (size_t)N * rope);
    rope_bwd(e, e->mkpe, e->drope, 1, rope);
    /* the up-projections; q without compression is a column-parallel linear of a1 */
    float *dkv = e->mkv;
    cols_copy(dkv, nope + vd, dk, HS, NH, nope);
    cols_copy(dkv + nope, nope + vd, dv, HS, NH, vd);
    k_zero(e->mdq, (size_t)N * qr);
    if (qr) {
        k_matmul_bwd(e->mdq, G(P_QBW), NULL, dq, A->cqn, W(P_QBW), N, qr, H * HS);
        k_zero(e->dout, (size_t)Nl * C);
    } else {
        const float *in = col_input(e, A->a1);
        k_zero(e->dcol, (size_t)N * C);
        k_matmul_bwd(e->dcol, G(P_QBW), NULL, dq, in, W(P_QBW), N, C, H * HS);
        col_grad_reduce(e, e->dout);
    }
    k_zero(e->mdkv, (size_t)N * kr);
    k_matmul_bwd(e->mdkv, G(P_KVBW), NULL, dkv, A->ckvn, W(P_KVBW), N, kr, H * (nope + vd));
    /* [d rms(c_q) | d rms(c_kv) | d k_pe] are partial sums over the tp ranks' heads: one reduce */
    cols_copy(e->mlat, D, e->mdq, qr, N, qr);
    cols_copy(e->mlat + qr, D, e->mdkv, kr, N, kr);
    cols_copy(e->mlat + qr + kr, D, e->mkpe, rope, N, rope);
    float *dl = e->mlat;
    if (tp_on(e) && e->lo.sp) {
        dist_reduce_scatter(e->mpack, e->mlat, Nl * D, e->d.tp_comm, &e->t[PH_TP]);
        dl = e->mpack;
    } else if (tp_on(e)) {
        dist_allreduce(e->mlat, N * D, e->d.tp_comm, &e->t[PH_TP]);
    }
    /* the latent norms and the down-projections, on this rank's rows */
    k_zero(e->mdq, (size_t)Nl * qr);
    k_zero(e->mdkv, (size_t)Nl * kw);
    for (int i = 0; i < Nl; i++) {
        const float *p = dl + (size_t)i * D;
        if (qr)
            k_rmsnorm_bwd(e->mdq + (size_t)i * qr, G(P_QANW), p, A->cq + (size_t)i * qr, W(P_QANW), A->rq + i,
                          1, qr);
        k_rmsnorm_bwd(e->mdkv + (size_t)i * kw, G(P_KVANW), p + qr, A->ckv + (size_t)i * kw, W(P_KVANW),
                      A->rkv + i, 1, kr);
        memcpy(e->mdkv + (size_t)i * kw + kr, p + qr + kr, (size_t)rope * sizeof *p);
    }
    if (qr)
        k_matmul_bwd(e->dout, G(P_QAW), NULL, e->mdq, A->a1, W(P_QAW), Nl, C, qr);
    k_matmul_bwd(e->dout, G(P_KVAW), NULL, e->mdkv, A->a1, W(P_KVAW), Nl, C, kw);
}

void net_layer_fwd(Exec *e, int li, LayerActs *A, float *out)
{
    int N = e->N, C = e->C;
    norm_fwd(e, A->a1, A->mean1, A->rstd1, A->x, W(P_LN1W), W(P_LN1B));
    if (e->mla)
        mla_fwd(e, li, A);
    else
        attn_fwd(e, li, A);
    k_residual_fwd(A->x2, A->x2, A->x, (size_t)e->Nl * C);

    norm_fwd(e, A->a2, A->mean2, A->rstd2, A->x2, W(P_LN2W), W(P_LN2B));
    const float *in;
    int moe = exec_layer_moe(e, li);
    if (!moe || W(P_FC1W)) {   /* the dense MLP, or an MoE layer's shared expert */
        int F1 = moe ? e->F1s : e->F1l, F = moe ? e->Fs : e->Fl;
        in = col_input(e, A->a2);
        k_matmul_fwd(A->hpre, in, W(P_FC1W), W(P_FC1B), N, C, F1);
        if (e->m.mlp == MLP_SWIGLU)
            k_glu_fwd(A->hact, A->hpre, N, F, (float)e->m.act_clamp);
        else
            k_gelu_fwd(A->hact, A->hpre, (size_t)N * F);
        row_fwd(e, out, A->hact, W(P_FC2W), W(P_FC2B), F);
    } else {
        k_zero(out, (size_t)e->Nl * C);
    }
    if (moe)
        moe_fwd(e, li, A, out);
    k_residual_fwd(out, out, A->x2, (size_t)e->Nl * C);
}

void net_layer_bwd(Exec *e, int li, LayerActs *A)
{
    int N = e->N, C = e->C, Nl = e->Nl;
    size_t nc = (size_t)N * C;
    /* MLP: out = x2 + fc2(act(fc1(ln2(x2)))) (+ the routed experts of an MoE layer) */
    const float *dy;
    const float *in;
    int moe = exec_layer_moe(e, li);
    if (!moe || W(P_FC1W)) {
        int F1 = moe ? e->F1s : e->F1l, F = moe ? e->Fs : e->Fl;
        dy = row_dout(e, e->dres);
        if (G(P_FC2B))
            k_matmul_bwd(NULL, NULL, G(P_FC2B), e->dres, NULL, NULL, Nl, C, C);
        k_zero(e->dhact, (size_t)N * F);
        k_matmul_bwd(e->dhact, G(P_FC2W), NULL, dy, A->hact, W(P_FC2W), N, F, C);
        k_zero(e->dhpre, (size_t)N * F1);
        if (e->m.mlp == MLP_SWIGLU)
            k_glu_bwd(e->dhpre, A->hpre, e->dhact, N, F, (float)e->m.act_clamp);
        else
            k_gelu_bwd(e->dhpre, A->hpre, e->dhact, (size_t)N * F);
        in = col_input(e, A->a2);
        k_zero(e->dcol, nc);
        k_matmul_bwd(e->dcol, G(P_FC1W), G(P_FC1B), e->dhpre, in, W(P_FC1W), N, C, F1);
        col_grad_reduce(e, e->dout);
    } else {
        k_zero(e->dout, (size_t)Nl * C);
    }
    if (moe)
        moe_bwd(e, li, A, e->dout);
    norm_bwd(e, e->dres, G(P_LN2W), G(P_LN2B), e->dout, A->x2, W(P_LN2W), A->mean2, A->rstd2);

    /* attention: x2 = x + proj(attn(qkv(ln1(x)))) */
    if (e->mla)
        mla_bwd(e, li, A);
    else
        attn_bwd(e, li, A);
    norm_bwd(e, e->dres, G(P_LN1W), G(P_LN1B), e->dout, A->x, W(P_LN1W), A->mean1, A->rstd1);
}

#undef W
#undef G

/* The embedding kernels under CP: one call per contiguous run of global
 * positions (the two chunks of each row); fwd (out set) or bwd (dout set). */
static void embed_runs(Exec *e, float *out, const float *dout, const int *tok, const float *wte,
                       const float *wpe, float *dwte, float *dwpe)
{
    for (int b = 0; b < e->B; b++)
        for (int t0 = 0, t1; t0 < e->Tl; t0 = t1) {
            for (t1 = t0 + 1; t1 < e->Tl && e->cpos[t1] == e->cpos[t1 - 1] + 1; t1++)
                ;
            size_t i = (size_t)b * e->Tl + t0;
            if (out)
                k_embedding_fwd(out + i * e->C, tok + i, wte, wpe, 1, t1 - t0, e->C, e->cpos[t0]);
            else
                k_embedding_bwd(dwte, dwpe, dout + i * e->C, tok + i, 1, t1 - t0, e->C, e->cpos[t0]);
        }
}

void net_embed_fwd(Exec *e, const int *tok, float *out)
{
    const float *wte = exec_sw(e, P_WTE);
    const float *wpe = exec_sw(e, P_WPE);
    int C = e->C;
    if (!tp_on(e) && e->cpos) {
        embed_runs(e, out, NULL, tok, wte, wpe, NULL, NULL);
        return;
    }
    if (!tp_on(e)) {
        k_embedding_fwd(out, tok, wte, wpe, e->B, e->T, C, 0);
        return;
    }
    /* each rank looks up the rows of its vocab range; rank 0 adds positions */
    float *p = e->part;
    for (int i = 0; i < e->N; i++) {
        int v = tok[i] - e->vstart;
        float *row = p + (size_t)i * C;
        if (v >= 0 && v < e->Vl)
            memcpy(row, wte + (size_t)v * C, C * sizeof *row);
        else
            memset(row, 0, C * sizeof *row);
        if (wpe && e->d.tp_rank == 0)
            for (int c = 0; c < C; c++)
                row[c] += wpe[(size_t)(e->cpos ? e->cpos[i % e->Tl] : i % e->T) * C + c];
    }
    if (e->lo.sp)
        dist_reduce_scatter(out, p, e->Nl * C, e->d.tp_comm, &e->t[PH_TP]);
    else {
        dist_allreduce(p, e->N * C, e->d.tp_comm, &e->t[PH_TP]);
        memcpy(out, p, (size_t)e->N * C * sizeof *out);
    }
}

void net_embed_bwd(Exec *e, const int *tok)
{
    float *gwte = exec_sg(e, P_WTE);
    float *gwpe = exec_sg(e, P_WPE);
    const float *d = row_dout(e, e->dres);
    int C = e->C;
    if (!tp_on(e) && e->cpos) {
        embed_runs(e, NULL, d, tok, NULL, NULL, gwte, gwpe);
        return;
    }
    if (!tp_on(e)) {
        k_embedding_bwd(gwte, gwpe, d, tok, e->B, e->T, C, 0);
        return;
    }
    /* positions are replicated: every rank adds the full gradient */
    if (gwpe && e->cpos)
        embed_runs(e, NULL, d, tok, NULL, NULL, NULL, gwpe);
    else if (gwpe)
        k_embedding_bwd(NULL, gwpe, d, tok, e->B, e->T, C, 0);
    for (int i = 0; i < e->N; i++) {
        int v = tok[i] - e->vstart;
        if (v >= 0 && v < e->Vl)
            for (int c = 0; c < C; c++)
                gwte[(size_t)v * C + c] += d[(size_t)i * C + c];
    }
}

/* Vocab-parallel softmax cross-entropy over logits (N, Vl), this rank's
 * columns vstart..vstart+Vl−1 of the padded vocabulary; columns at or past
 * the real vocabulary are masked. Combines the row max, the sum of
 * exponentials and the target logit over TP with all-reduces. Writes the
 * per-token losses and turns the logits into dlogits · scale in place. */
static double vocab_parallel_ce(Exec *e, const int *targets, float scale)
{
    int N = e->N, Vl = e->Vl;
    int valid = e->m.vocab - e->vstart;
    valid = valid < 0 ? 0 : valid > Vl ? Vl : valid;
    float *mx = e->ce_lse, *red = e->ce_loss;     // (N) and (2N): sum-exp, target logit
    for (int i = 0; i < N; i++) {
        const float *l = e->logits + (size_t)i * Vl;
        float m = -FLT_MAX;
        for (int j = 0; j < valid; j++)
            m = l[j] > m ? l[j] : m;
        mx[i] = m;
    }
    dist_allreduce_max(mx, N, e->d.tp_comm, &e->t[PH_TP]);
    for (int i = 0; i < N; i++) {
        const float *l = e->logits + (size_t)i * Vl;
        double s = 0;
        for (int j = 0; j < valid; j++)
            s += exp((double)l[j] - mx[i]);
        int t = targets[i] - e->vstart;
        red[i] = (float)s;
        red[N + i] = t >= 0 && t < Vl ? l[t] : 0.0f;
    }
    dist_allreduce(red, 2 * N, e->d.tp_comm, &e->t[PH_TP]);
    double sum = 0;
    for (int i = 0; i < N; i++) {
        float *l = e->logits + (size_t)i * Vl;
        if (targets[i] < 0) {   /* ignored token, as k_crossentropy_*: no loss, no gradient */
            memset(l, 0, (size_t)Vl * sizeof *l);
            continue;
        }
        float lse = mx[i] + logf(red[i]);
        sum += lse - red[N + i];
        int t = targets[i] - e->vstart;
        for (int j = 0; j < Vl; j++)
            l[j] = j < valid ? (expf(l[j] - lse) - (j == t)) * scale : 0.0f;
    }
    return sum;
}

/* The final norm (weights lw, lb; their grads glw, glb) of x (Nl, C), the
 * LM head and the loss; then their backward, d(x) into dx. The token sum. */
static double head_loss(Exec *e, const float *x, const float *lw, const float *lb, float *glw, float *glb,
                        const int *targets, float scale, float *dx)
{
    ParamSet *ps = &e->ps;
    int N = e->N, C = e->C;
    ParamId hid = ps->off[P_HEAD] != PARAM_NONE ? P_HEAD : P_WTE;   // tied, pp 1: the embedding itself
    const float *wh = exec_sw(e, hid);
    float *gh = exec_sg(e, hid);
    norm_fwd(e, e->head_n, e->head_mean, e->head_rstd, x, lw, lb);
    const float *in = col_input(e, e->head_n);
    k_matmul_fwd(e->logits, in, wh, NULL, N, C, e->Vl);
    double sum = 0;
    double tb = dist_now(), tp0 = e->t[PH_TP];
    if (!tp_on(e)) {
        k_crossentropy_fwd(e->ce_loss, e->ce_lse, e->logits, targets, N, e->Vl, e->m.vocab);
        for (int i = 0; i < N; i++)
            sum += e->ce_loss[i];
        k_crossentropy_bwd(e->logits, e->logits, e->ce_lse, targets, scale, N, e->Vl, e->m.vocab);
    } else {
        sum = vocab_parallel_ce(e, targets, scale);
    }
    k_zero(e->dcol, (size_t)N * C);
    k_matmul_bwd(e->dcol, gh, NULL, e->logits, in, wh, N, C, e->Vl);
    col_grad_reduce(e, e->dout);
    k_zero(dx, (size_t)e->Nl * C);
    norm_bwd(e, dx, glw, glb, e->dout, x, lw, e->head_mean, e->head_rstd);
    /* the loss backward is backward work even though it runs inside a forward
     * action; run_forward leaves out of PH_FWD whatever lands in PH_BWD */
    e->t[PH_BWD] += dist_now() - tb - (e->t[PH_TP] - tp0);
    return sum;
}

double net_head(Exec *e, const int *targets, float scale, float *dlast)
{
    return head_loss(e, e->head_in, exec_sw(e, P_LNFW), exec_sw(e, P_LNFB), exec_sg(e, P_LNFW),
                     exec_sg(e, P_LNFB), targets, scale, dlast);
}

/* ---- multi-token prediction (DeepSeek-V3 §2.2) ---- */

#define W(id) exec_lw(e, li, id)
#define G(id) exec_lg(e, li, id)

/* The embedding for MTP on the last stage: stage 0's own (pp 1), a tied
 * model's head (its copy there), or an untied model's copy. */
static ParamId mtp_embedding(const Exec *e) { return e->ps.off[P_WTE] != PARAM_NONE ? P_WTE : P_HEAD; }

/* out (Nl, C) = rows of tok (N) in w, vocab-parallel like net_embed_fwd, no positions. */
static void mtp_embed_fwd(Exec *e, const float *w, const int *tok, float *out)
{
    int C = e->C;
    float *p = tp_on(e) ? e->part : out;
    for (int i = 0; i < e->N; i++) {
        int v = tok[i] - e->vstart;
        float *row = p + (size_t)i * C;
        if (v >= 0 && v < e->Vl)
            memcpy(row, w + (size_t)v * C, (size_t)C * sizeof *row);
        else
            memset(row, 0, (size_t)C * sizeof *row);
    }
    if (!tp_on(e))
        return;
    if (e->lo.sp) {
        dist_reduce_scatter(out, p, e->Nl * C, e->d.tp_comm, &e->t[PH_TP]);
    } else {
        dist_allreduce(p, e->N * C, e->d.tp_comm, &e->t[PH_TP]);
        memcpy(out, p, (size_t)e->N * C * sizeof *out);
    }
}

static void mtp_embed_bwd(Exec *e, float *gw, const int *tok, const float *d)
{
    const float *dd = row_dout(e, d);
    int C = e->C;
    for (int i = 0; i < e->N; i++) {
        int v = tok[i] - e->vstart;
        if (v >= 0 && v < e->Vl)
            for (int c = 0; c < C; c++)
                gw[(size_t)v * C + c] += dd[(size_t)i * C + c];
    }
}

/* Module li's input: cat = [norm(emb) | norm(h)] gathered to N rows, the
 * column-parallel projection 2h -> h/tp, gathered over tp to whole rows. */
static void mtp_proj_fwd(Exec *e, int li, MtpActs *M, const float *h)
{
    int N = e->N, Nl = e->Nl, C = e->C, tp = e->d.tp, Cl = C / tp;
    float *catl = e->lo.sp ? e->mcatl : M->cat;
    k_rmsnorm_fwd(e->mtmp, M->rse, M->emb, W(P_MTPEN), Nl, C, NORM_EPS);
    cols_copy(catl, 2 * C, e->mtmp, C, Nl, C);
    k_rmsnorm_fwd(e->mtmp, M->rsh, h, W(P_MTPHN), Nl, C, NORM_EPS);
    cols_copy(catl + C, 2 * C, e->mtmp, C, Nl, C);
    if (e->lo.sp)
        dist_allgather(M->cat, catl, Nl * 2 * C, e->d.tp_comm, &e->t[PH_TP]);
    if (!tp_on(e)) {
        k_matmul_fwd(M->la.x, M->cat, W(P_MTPEH), NULL, N, 2 * C, C);
        return;
    }
    k_matmul_fwd(e->mpart, M->cat, W(P_MTPEH), NULL, N, 2 * C, Cl);
    dist_allgather(e->mgat, e->mpart, N * Cl, e->d.tp_comm, &e->t[PH_TP]);
    int r0 = e->lo.sp ? e->d.tp_rank * Nl : 0;   /* this rank's rows of the residual stream */
    for (int r = 0; r < tp; r++)
        cols_copy(M->la.x + (size_t)r * Cl, C, e->mgat + ((size_t)r * N + r0) * Cl, Cl, Nl, Cl);
}

/* e->dres (Nl, C) at the projection's output: its weight gradient, the
 * norms' backward; d(emb) into the embedding's gradient, d(h) added into dh. */
static void mtp_proj_bwd(Exec *e, int li, MtpActs *M, const float *h, float *dh, const int *tok)
{
    int N = e->N, Nl = e->Nl, C = e->C, Cl = C / e->d.tp;
    const float *dy = row_dout(e, e->dres);
    const float *dyl = dy;
    if (tp_on(e)) {   /* this rank's columns of the gathered output */
        cols_copy(e->mpart, Cl, dy + (size_t)e->d.tp_rank * Cl, C, N, Cl);
        dyl = e->mpart;
    }
    k_zero(e->mdcat, (size_t)N * 2 * C);
    k_matmul_bwd(e->mdcat, G(P_MTPEH), NULL, dyl, M->cat, W(P_MTPEH), N, 2 * C, Cl);
    if (tp_on(e) && e->lo.sp)
        dist_reduce_scatter(e->mdcat, e->mdcat, Nl * 2 * C, e->d.tp_comm, &e->t[PH_TP]);
    else if (tp_on(e))
        dist_allreduce(e->mdcat, N * 2 * C, e->d.tp_comm, &e->t[PH_TP]);
    cols_copy(e->mtmp, C, e->mdcat, 2 * C, Nl, C);
    k_zero(e->memb, (size_t)Nl * C);
    k_rmsnorm_bwd(e->memb, G(P_MTPEN), e->mtmp, M->emb, W(P_MTPEN), M->rse, Nl, C);
    mtp_embed_bwd(e, exec_sg(e, mtp_embedding(e)), tok, e->memb);
    cols_copy(e->mtmp, C, e->mdcat + C, 2 * C, Nl, C);
    k_rmsnorm_bwd(dh, G(P_MTPHN), e->mtmp, h, W(P_MTPHN), M->rsh, Nl, C);
}

/* The tokens k ahead of micro-batch mb's (0 past the row's end) into
 * e->mtok, and their targets (−1 there) into e->mtgt. */
static void mtp_shift(Exec *e, int mb, int k)
{
    const int *tok = e->tokens + (size_t)mb * e->N, *tgt = e->targets + (size_t)mb * e->N;
    for (int i = 0; i < e->N; i++) {
        int in = i % e->T + k < e->T;
        e->mtok[i] = in ? tok[i + k] : 0;
        e->mtgt[i] = in ? tgt[i + k] : -1;
    }
}

void net_mtp_fwd(Exec *e, int mb, int k)
{
    int li = e->sm.nlayers + k - 1, D = e->nmtp;
    MtpActs *M = &e->mtp[k - 1];
    const float *h = k == 1 ? e->head_in : e->mtp[k - 2].out;
    mtp_shift(e, mb, k);
    mtp_embed_fwd(e, exec_sw(e, mtp_embedding(e)), e->mtok, M->emb);
    mtp_proj_fwd(e, li, M, h);
    net_layer_fwd(e, li, &M->la, M->out);
    /* the module's share of the objective: scale / D x the mean over its gbs·(T−k) targets */
    double denom = (double)e->lo.gbs * (e->T - k);
    float scale = (float)(e->opt.mtp_scale / D / denom);
    double l = head_loss(e, M->out, W(P_MTPFN), NULL, G(P_MTPFN), NULL, e->mtgt, scale, M->dh);
    if (e->d.tp_rank == 0)
        e->mtp_sum += e->opt.mtp_scale / D * l / denom;
}

void net_mtp_bwd(Exec *e, int mb, int k, float *dlast)
{
    int li = e->sm.nlayers + k - 1;
    MtpActs *M = &e->mtp[k - 1];
    const float *h = k == 1 ? e->head_in : e->mtp[k - 2].out;
    float *dh = k == 1 ? dlast : e->mtp[k - 2].dh;
    mtp_shift(e, mb, k);
    memcpy(e->dres, M->dh, (size_t)e->Nl * e->C * sizeof *e->dres);
    net_layer_bwd(e, li, &M->la);
    mtp_proj_bwd(e, li, M, h, dh, e->mtok);
}

#undef W
#undef G
