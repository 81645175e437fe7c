/* cuexec.c — see cuexec.h. Mirrors executor/net.c and exec.c with dp = tp =
 * pp = 1 (no communication), on bf16 device tensors. */
#include "cuexec.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NORM_EPS 1e-5f
#define ROPE_THETA 10000.0f
#define ALIGN 256

#define FAIL(...) do { snprintf(err, errlen, __VA_ARGS__); return -1; } while (0)

/* Bump allocator over a byte slab: the first pass (base NULL) counts, the second carves. */
typedef struct {
    char *base;
    size_t n;
} Carver;

static void *take(Carver *c, size_t bytes)
{
    size_t at = (c->n + ALIGN - 1) / ALIGN * ALIGN;
    c->n = at + bytes;
    return c->base ? c->base + at : NULL;
}
#define TAKE_BF(c, n) ((kc_bf16 *)take(c, (size_t)(n) * sizeof(kc_bf16)))
#define TAKE_F(c, n) ((float *)take(c, (size_t)(n) * sizeof(float)))

static void carve_layer(const ProxyShape *s, Carver *c, CuActs *A, int full_rc, int with_x)
{
    size_t N = s->N, C = s->C;
    memset(A, 0, sizeof *A);
    if (with_x)
        A->x = TAKE_BF(c, N * C);
    if (full_rc)
        return;
    A->a1 = TAKE_BF(c, N * C);
    A->q = TAKE_BF(c, N * s->ql);
    A->k = TAKE_BF(c, N * s->kvl);
    A->v = TAKE_BF(c, N * s->kvl);
    A->o = TAKE_BF(c, N * s->ql);
    A->x2 = TAKE_BF(c, N * C);
    A->a2 = TAKE_BF(c, N * C);
    A->hpre = TAKE_BF(c, N * s->F1l);
    A->hact = TAKE_BF(c, N * s->Fl);
    A->mean1 = TAKE_F(c, N);
    A->rstd1 = TAKE_F(c, N);
    A->lse = TAKE_F(c, N * s->NHl);
    A->mean2 = TAKE_F(c, N);
    A->rstd2 = TAKE_F(c, N);
}

static void carve(CuExec *e)
{
    const ProxyShape *s = &e->sh;
    Carver a = {e->slab[XM_ACTS], 0}, b = {e->slab[XM_BUFFERS], 0};
    size_t N = s->N, C = s->C;
    int any_full = 0;
    for (int i = 0; i < s->layers; i++) {
        carve_layer(s, &a, &e->la[i], e->rc[i] == 2, 1);
        any_full |= e->rc[i] == 2;
    }
    if (any_full)
        carve_layer(s, &a, &e->ws, 0, 0);
    e->head_in = TAKE_BF(&a, N * C);   // the last layer's output (the next stage's input)
    if (s->last) {
        e->head_n = TAKE_BF(&a, N * C);
        e->head_mean = TAKE_F(&a, N);
        e->head_rstd = TAKE_F(&a, N);
        e->logits = TAKE_BF(&a, N * s->Vl);
        e->ce_lse = TAKE_F(&b, N);
    }
    e->losses = TAKE_F(&b, (size_t)e->nmb * N);
    e->dres = TAKE_BF(&b, N * C);
    e->dcol = TAKE_BF(&b, N * C);
    e->dq = TAKE_BF(&b, N * s->ql);
    e->dk = TAKE_BF(&b, N * s->kvl);
    e->dv = TAKE_BF(&b, N * s->kvl);
    e->drope = e->m.pos == POS_ROPE ? TAKE_BF(&b, N * s->ql) : NULL;
    e->dhpre = TAKE_BF(&b, N * s->F1l);
    e->dhact = TAKE_BF(&b, N * (s->Fl > s->ql ? s->Fl : s->ql));
    e->rc_out = any_full ? TAKE_BF(&b, N * C) : NULL;
    e->grad_in = e->proxy && !s->last ? TAKE_BF(&b, N * C) : NULL;
    e->d_tokens = (int *)take(&b, (size_t)e->nmb * N * sizeof(int));
    e->d_targets = (int *)take(&b, (size_t)e->nmb * N * sizeof(int));
    e->mem[XM_ACTS] = (double)a.n;
    e->mem[XM_BUFFERS] = (double)b.n;
}

static void note_free(CuExec *e)
{
    size_t fr = 0, tot = 0;
    if (cudaMemGetInfo(&fr, &tot) == cudaSuccess) {
        if (!e->free_min || fr < e->free_min)
            e->free_min = fr;
        e->dev_total = tot;
    }
}

static int dev_alloc(CuExec *e, ExecMem k, size_t bytes, char *err, int errlen)
{
    if (cudaMalloc(&e->slab[k], bytes ? bytes : ALIGN) != cudaSuccess) {
        cudaGetLastError();
        size_t fr = 0, tot = 0;
        cudaMemGetInfo(&fr, &tot);
        FAIL("not enough device memory for %s: %.2f GiB asked, %.2f GiB free of %.2f", exec_mem_name(k),
             bytes / 1073741824.0, fr / 1073741824.0, tot / 1073741824.0);
    }
    e->mem[k] = (double)bytes;
    return 0;
}

/* ---- timers ------------------------------------------------------------- */

static void tm_begin(CuExec *e, Phase p)
{
    if (e->ev_n == e->ev_cap) {   // grow: sums so far are kept in the events
        int cap = e->ev_cap ? 2 * e->ev_cap : 256;
        e->ev = realloc(e->ev, (size_t)2 * cap * sizeof *e->ev);
        e->ev_phase = realloc(e->ev_phase, (size_t)cap * sizeof *e->ev_phase);
        if (!e->ev || !e->ev_phase)
            kc_fail("realloc", "out of host memory for timers", __FILE__, __LINE__);
        for (int i = 2 * e->ev_cap; i < 2 * cap; i++)
            CHECK_CUDA(cudaEventCreate(&e->ev[i]));
        e->ev_cap = cap;
    }
    e->ev_phase[e->ev_n] = p;
    CHECK_CUDA(cudaEventRecord(e->ev[2 * e->ev_n], e->st));
}

static void tm_end(CuExec *e)
{
    CHECK_CUDA(cudaEventRecord(e->ev[2 * e->ev_n + 1], e->st));
    e->ev_n++;
}

static void tm_sum(CuExec *e)
{
    memset(e->t, 0, sizeof e->t);
    for (int i = 0; i < e->ev_n; i++) {
        float ms = 0;
        CHECK_CUDA(cudaEventElapsedTime(&ms, e->ev[2 * i], e->ev[2 * i + 1]));
        e->t[e->ev_phase[i]] += ms * 1e-3;
    }
    e->ev_n = 0;
}

/* ---- the network ---------------------------------------------------------- */

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

static void zero_bf(CuExec *e, kc_bf16 *x, size_t n)
{
    CHECK_CUDA(cudaMemsetAsync(x, 0, n * sizeof *x, e->st));   // bf16 +0.0 is all zero bits
}

static void norm_fwd(CuExec *e, kc_bf16 *out, float *mean, float *rstd, const kc_bf16 *x, const kc_bf16 *w,
                     const kc_bf16 *b)
{
    if (e->m.norm == NORM_LAYERNORM)
        kc_layernorm_fwd(out, mean, rstd, x, w, b, e->sh.N, e->sh.C, NORM_EPS, e->st);
    else
        kc_rmsnorm_fwd(out, rstd, x, w, e->sh.N, e->sh.C, NORM_EPS, e->st);
}

static void norm_bwd(CuExec *e, kc_bf16 *dx, float *dw, float *db, const kc_bf16 *dout, const kc_bf16 *x,
                     const kc_bf16 *w, const float *mean, const float *rstd)
{
    if (e->m.norm == NORM_LAYERNORM)
        kc_layernorm_bwd(dx, dw, db, dout, x, w, mean, rstd, e->sh.N, e->sh.C, e->st);
    else
        kc_rmsnorm_bwd(dx, dw, dout, x, w, rstd, e->sh.N, e->sh.C, e->st);
}

static void layer_fwd(CuExec *e, int li, CuActs *A, kc_bf16 *out)
{
    const ProxyShape *s = &e->sh;
    int N = s->N, C = s->C, ql = s->ql, kvl = s->kvl;
    cudaStream_t st = e->st;
    norm_fwd(e, A->a1, A->mean1, A->rstd1, A->x, Wl(e, li, P_LN1W), Wl(e, li, P_LN1B));
    const kc_bf16 *wq = Wl(e, li, P_QKVW), *bq = Wl(e, li, P_QKVB);
    kc_matmul_fwd(A->q, A->a1, wq, bq, N, C, ql, st);
    kc_matmul_fwd(A->k, A->a1, wq + (size_t)ql * C, bq ? bq + ql : NULL, N, C, kvl, st);
    kc_matmul_fwd(A->v, A->a1, wq + (size_t)(ql + kvl) * C, bq ? bq + ql + kvl : NULL, N, C, kvl, st);
    if (e->m.pos == POS_ROPE) {
        kc_rope_fwd(A->q, A->q, s->B, s->T, s->NHl, s->HS, 0, ROPE_THETA, st);
        kc_rope_fwd(A->k, A->k, s->B, s->T, s->NKVl, s->HS, 0, ROPE_THETA, st);
    }
    kc_attention_fwd(A->o, A->lse, A->q, A->k, A->v, s->B, s->T, s->NHl, s->NKVl, s->HS, st);
    kc_matmul_fwd(A->x2, A->o, Wl(e, li, P_PROJW), Wl(e, li, P_PROJB), N, ql, C, st);
    kc_residual_fwd(A->x2, A->x2, A->x, (size_t)N * C, st);
    norm_fwd(e, A->a2, A->mean2, A->rstd2, A->x2, Wl(e, li, P_LN2W), Wl(e, li, P_LN2B));
    kc_matmul_fwd(A->hpre, A->a2, Wl(e, li, P_FC1W), Wl(e, li, P_FC1B), N, C, s->F1l, st);
    if (e->m.mlp == MLP_SWIGLU)
        kc_swiglu_fwd(A->hact, A->hpre, N, s->Fl, st);
    else
        kc_gelu_fwd(A->hact, A->hpre, (size_t)N * s->Fl, st);
    kc_matmul_fwd(out, A->hact, Wl(e, li, P_FC2W), Wl(e, li, P_FC2B), N, s->Fl, C, st);
    kc_residual_fwd(out, out, A->x2, (size_t)N * C, st);
}

/* e->dres holds d(out); on return d(x). Parameter grads accumulate. */
static void layer_bwd(CuExec *e, int li, CuActs *A)
{
    const ProxyShape *s = &e->sh;
    int N = s->N, C = s->C, ql = s->ql, kvl = s->kvl;
    size_t nc = (size_t)N * C;
    cudaStream_t st = e->st;
    /* MLP: out = x2 + fc2(act(fc1(ln2(x2)))) */
    zero_bf(e, e->dhact, (size_t)N * s->Fl);
    kc_matmul_bwd(e->dhact, Gl(e, li, P_FC2W), Gl(e, li, P_FC2B), e->dres, A->hact, Wl(e, li, P_FC2W), N, s->Fl,
                  C, st);
    zero_bf(e, e->dhpre, (size_t)N * s->F1l);
    if (e->m.mlp == MLP_SWIGLU)
        kc_swiglu_bwd(e->dhpre, A->hpre, e->dhact, N, s->Fl, st);
    else
        kc_gelu_bwd(e->dhpre, A->hpre, e->dhact, (size_t)N * s->Fl, st);
    zero_bf(e, e->dcol, nc);
    kc_matmul_bwd(e->dcol, Gl(e, li, P_FC1W), Gl(e, li, P_FC1B), e->dhpre, A->a2, Wl(e, li, P_FC1W), N, C, s->F1l,
                  st);
    norm_bwd(e, e->dres, Gl(e, li, P_LN2W), Gl(e, li, P_LN2B), e->dcol, A->x2, Wl(e, li, P_LN2W), A->mean2,
             A->rstd2);

    /* attention: x2 = x + proj(attn(qkv(ln1(x)))) */
    kc_bf16 *dov = e->dhact;   // free again
    zero_bf(e, dov, (size_t)N * ql);
    kc_matmul_bwd(dov, Gl(e, li, P_PROJW), Gl(e, li, P_PROJB), e->dres, A->o, Wl(e, li, P_PROJW), N, ql, C, st);
    zero_bf(e, e->dq, (size_t)N * ql);
    zero_bf(e, e->dk, (size_t)N * kvl);
    zero_bf(e, e->dv, (size_t)N * kvl);
    kc_attention_bwd(e->dq, e->dk, e->dv, dov, A->q, A->k, A->v, A->o, A->lse, s->B, s->T, s->NHl, s->NKVl, s->HS,
                     st);
    const kc_bf16 *wq = Wl(e, li, P_QKVW);
    float *gw = Gl(e, li, P_QKVW), *gb = Gl(e, li, P_QKVB);
    const kc_bf16 *dq = e->dq, *dk = e->dk;
    zero_bf(e, e->dcol, nc);
    if (e->m.pos == POS_ROPE) {   // un-rotate into drope, one of q, k at a time
        zero_bf(e, e->drope, (size_t)N * ql);
        kc_rope_bwd(e->drope, e->dq, s->B, s->T, s->NHl, s->HS, 0, ROPE_THETA, st);
        dq = e->drope;
    }
    kc_matmul_bwd(e->dcol, gw, gb, dq, A->a1, wq, N, C, ql, st);
    if (e->m.pos == POS_ROPE) {
        zero_bf(e, e->drope, (size_t)N * kvl);
        kc_rope_bwd(e->drope, e->dk, s->B, s->T, s->NKVl, s->HS, 0, ROPE_THETA, st);
        dk = e->drope;
    }
    kc_matmul_bwd(e->dcol, gw + (size_t)ql * C, gb ? gb + ql : NULL, dk, A->a1, wq + (size_t)ql * C, N, C, kvl, st);
    kc_matmul_bwd(e->dcol, gw + (size_t)(ql + kvl) * C, gb ? gb + ql + kvl : NULL, e->dv, A->a1,
                  wq + (size_t)(ql + kvl) * C, N, C, kvl, st);
    norm_bwd(e, e->dres, Gl(e, li, P_LN1W), Gl(e, li, P_LN1B), e->dcol, A->x, Wl(e, li, P_LN1W), A->mean1,
             A->rstd1);
}

/* Final norm, head, loss and their backward; leaves d(head_in) in dres. */
static void head(CuExec *e, int mb, float scale)
{
    const ProxyShape *s = &e->sh;
    int N = s->N, C = s->C;
    ParamId hid = e->ps.off[P_HEAD] != PARAM_NONE ? P_HEAD : P_WTE;   // tied, one stage: the embedding
    const kc_bf16 *wh = Ws(e, hid), *lw = Ws(e, P_LNFW), *lb = Ws(e, P_LNFB);
    int valid = e->m.vocab < s->Vl ? e->m.vocab : s->Vl;
    const int *tg = e->d_targets + (size_t)mb * N;
    norm_fwd(e, e->head_n, e->head_mean, e->head_rstd, e->head_in, lw, lb);
    kc_matmul_fwd(e->logits, e->head_n, wh, NULL, N, C, s->Vl, e->st);
    kc_crossentropy_fwd(e->losses + (size_t)mb * N, e->ce_lse, e->logits, tg, N, s->Vl, valid, e->st);
    kc_crossentropy_bwd(e->logits, e->logits, e->ce_lse, tg, scale, N, s->Vl, valid, e->st);
    zero_bf(e, e->dcol, (size_t)N * C);
    kc_matmul_bwd(e->dcol, Gs(e, hid), NULL, e->logits, e->head_n, wh, N, C, s->Vl, e->st);
    zero_bf(e, e->dres, (size_t)N * C);
    norm_bwd(e, e->dres, Gs(e, P_LNFW), Gs(e, P_LNFB), e->dcol, e->head_in, lw, e->head_mean, e->head_rstd);
}

static void micro_batch(CuExec *e, int mb)
{
    const ProxyShape *s = &e->sh;
    int L = s->layers, N = s->N;
    const int *tok = e->d_tokens + (size_t)mb * N;
    tm_begin(e, PH_FWD);
    if (s->first)
        kc_embedding_fwd(L ? e->la[0].x : e->head_in, tok, Ws(e, P_WTE), Ws(e, P_WPE), s->B, s->T, s->C, 0, e->st);
    for (int j = 0; j < L; j++) {
        kc_bf16 *dst = j + 1 < L ? e->la[j + 1].x : e->head_in;
        if (e->rc[j] == 2) {
            e->ws.x = e->la[j].x;
            layer_fwd(e, j, &e->ws, dst);
        } else {
            layer_fwd(e, j, &e->la[j], dst);
        }
    }
    tm_end(e);
    tm_begin(e, PH_BWD);
    if (s->last)
        head(e, mb, 1.0f / ((float)N * e->nmb));
    else
        CHECK_CUDA(cudaMemcpyAsync(e->dres, e->grad_in, (size_t)N * s->C * sizeof(kc_bf16),
                                   cudaMemcpyDeviceToDevice, e->st));
    for (int j = L - 1; j >= 0; j--) {
        CuActs *A = &e->la[j];
        if (e->rc[j] == 2) {
            tm_end(e);
            tm_begin(e, PH_RECOMPUTE);
            e->ws.x = e->la[j].x;
            layer_fwd(e, j, &e->ws, e->rc_out);
            tm_end(e);
            tm_begin(e, PH_BWD);
            A = &e->ws;
        }
        layer_bwd(e, j, A);
    }
    if (s->first)
        kc_embedding_bwd(Gs(e, P_WTE), Gs(e, P_WPE), e->dres, tok, s->B, s->T, s->C, 0, e->st);
    tm_end(e);
}

/* ---- setup -------------------------------------------------------------- */

static int check_plain(const ModelSpec *m, const Layout *lo, char *err, int errlen)
{
    if (lo->dp != 1 || lo->tp != 1 || lo->pp != 1 || lo->cp != 1)
        FAIL("the CUDA backend runs one GPU: dp = tp = pp = cp = 1 (the plan has dp %d tp %d pp %d cp %d); "
             "multi-GPU NCCL runs are not implemented yet: run the plan on the CPU backend under mpirun, "
             "or check one stage of it with --proxy-stage S", lo->dp, lo->tp, lo->pp, lo->cp);
    if (lo->gbs % lo->mbs)
        FAIL("global batch %d is not a multiple of mbs %d", lo->gbs, lo->mbs);
    if (m->dropout)
        FAIL("the executor has no dropout; plan the model with dropout off");
    return 0;
}

static int check_kernels(const CuExec *e, char *err, int errlen)
{
    if (!kc_attention_supported(e->sh.HS))
        FAIL("the CUDA attention kernel takes head sizes 32, 64, 96 or 128; %s has %d", e->m.name, e->sh.HS);
    if (e->m.pos == POS_ROPE && e->sh.HS % 2)
        FAIL("RoPE needs an even head size (got %d)", e->sh.HS);
    if (kc_device_count() < 1)
        FAIL("no CUDA device is visible (driver missing, or CUDA_VISIBLE_DEVICES empty)");
    return 0;
}

/* Everything after the shapes: slabs, carving, stream, timers. */
static int setup(CuExec *e, int stage, char *err, int errlen)
{
    const ProxyShape *s = &e->sh;
    if (check_kernels(e, err, errlen) != 0)
        return -1;
    if (stagemap_init(&e->sm, &e->m, &e->lo, stage, 0, err, errlen) != 0)
        return -1;
    params_layout(&e->ps, &e->m, &e->sm, 1);
    e->n = e->ps.n;
    e->nmb = e->lo.gbs / (e->lo.dp * e->lo.mbs);
    if (e->proxy && e->nmb > CUEXEC_PROXY_MAX_MB)   // per micro-batch time is what it measures
        e->nmb = CUEXEC_PROXY_MAX_MB;
    e->rc = calloc(s->layers ? s->layers : 1, sizeof *e->rc);
    e->la = calloc(s->layers ? s->layers : 1, sizeof *e->la);
    e->tokens = malloc((size_t)e->nmb * s->N * sizeof *e->tokens);
    e->targets = malloc((size_t)e->nmb * s->N * sizeof *e->targets);
    e->h_losses = malloc((size_t)e->nmb * s->N * sizeof *e->h_losses);
    if (!e->rc || !e->la || !e->tokens || !e->targets || !e->h_losses)
        FAIL("out of host memory");
    for (int i = 0; i < s->layers; i++)
        e->rc[i] = i < s->full_rc ? 2 : i < s->full_rc + s->sel_rc ? 1 : 0;
    CHECK_CUDA(cudaSetDevice(0));
    kc_init();
    CHECK_CUDA(cudaStreamCreateWithFlags(&e->st, cudaStreamNonBlocking));
    CHECK_CUDA(cudaEventCreate(&e->step0));
    CHECK_CUDA(cudaEventCreate(&e->step1));
    note_free(e);
    size_t n = e->n;
    if (dev_alloc(e, XM_WEIGHTS, n * sizeof(kc_bf16), err, errlen) || dev_alloc(e, XM_GRADS, n * sizeof(float), err, errlen) ||
        dev_alloc(e, XM_OPTIM, e->proxy ? 0 : 3 * n * sizeof(float), err, errlen))
        return -1;
    e->wb = e->slab[XM_WEIGHTS];
    e->g = e->slab[XM_GRADS];
    if (!e->proxy) {
        e->w32 = e->slab[XM_OPTIM];
        e->om = e->w32 + n;
        e->ov = e->om + n;
        CHECK_CUDA(cudaMemset(e->om, 0, 2 * n * sizeof(float)));
    } else {
        e->mem[XM_OPTIM] = 0;
    }
    carve(e);   // count
    size_t na = (size_t)e->mem[XM_ACTS], nb = (size_t)e->mem[XM_BUFFERS];
    if (dev_alloc(e, XM_ACTS, na, err, errlen) || dev_alloc(e, XM_BUFFERS, nb, err, errlen))
        return -1;
    carve(e);
    note_free(e);
    return 0;
}

/* Upload host fp32 values in chunks: to the master weights and their bf16 copy. */
static void upload_weights(CuExec *e, const float *w)
{
    CHECK_CUDA(cudaMemcpy(e->w32, w, e->n * sizeof(float), cudaMemcpyHostToDevice));
    kc_to_bf16(e->wb, e->w32, e->n, e->st);
    CHECK_CUDA(cudaStreamSynchronize(e->st));
}

int cuexec_init(CuExec *e, const ModelSpec *m, const Layout *lo, const TrainOpts *o,
                const char *data, char *err, int errlen)
{
    memset(e, 0, sizeof *e);
    e->m = *m, e->lo = *lo, e->opt = *o;
    e->lo.sp = false;
    if (check_plain(m, lo, err, errlen) != 0 || proxy_shape(m, &e->lo, 0, &e->sh, err, errlen) != 0)
        return -1;
    if (setup(e, 0, err, errlen) != 0)
        return -1;
    float *w = malloc(e->n * sizeof *w);
    if (!w)
        FAIL("out of host memory for %zu initial weights", e->n);
    e->ps.w = w;
    params_init(&e->ps, m, &e->sm, o->seed);
    e->ps.w = NULL;
    upload_weights(e, w);
    free(w);
    char derr[256];
    if (data_init(&e->dl, data, e->sh.B, e->sh.T, 0, 1, m->vocab, derr, sizeof derr) != 0)
        FAIL("%s", derr);
    e->have_data = 1;
    return 0;
}

/* Fill device bf16 x (n) with uniform values in (−a, a) from a seed, via a
 * host staging chunk: the proxy's weights and inputs (never zeros: they
 * time faster than real data). */
static void fill_random(CuExec *e, kc_bf16 *x, size_t n, float a, uint64_t seed)
{
    enum { CH = 1 << 22 };
    static float host[CH];
    float *dev;
    CHECK_CUDA(cudaMalloc((void **)&dev, CH * sizeof(float)));
    uint64_t z = seed * 0x9E3779B97F4A7C15ull + 1;
    for (int i = 0; i < CH; i++) {
        z ^= z << 13, z ^= z >> 7, z ^= z << 17;
        host[i] = a * (2.0f * (float)((z >> 11) * (1.0 / 9007199254740992.0)) - 1.0f);
    }
    CHECK_CUDA(cudaMemcpy(dev, host, CH * sizeof(float), cudaMemcpyHostToDevice));
    for (size_t at = 0; at < n; at += CH)   // the chunk repeats: values, not patterns, matter here
        kc_to_bf16(x + at, dev, n - at < CH ? n - at : CH, e->st);
    CHECK_CUDA(cudaStreamSynchronize(e->st));
    CHECK_CUDA(cudaFree(dev));
}

int cuexec_init_proxy(CuExec *e, const ModelSpec *m, const Layout *lo, int stage, uint64_t seed,
                      char *err, int errlen)
{
    memset(e, 0, sizeof *e);
    e->m = *m, e->lo = *lo, e->proxy = 1;
    exec_default_opts(&e->opt);
    if (proxy_shape(m, lo, stage, &e->sh, err, errlen) != 0)
        return -1;
    if (setup(e, stage, err, errlen) != 0)
        return -1;
    const ProxyShape *s = &e->sh;
    fill_random(e, e->wb, e->n, 0.02f, seed);
    if (!s->first && s->layers)
        fill_random(e, e->la[0].x, (size_t)s->N * s->C, 1.0f, seed + 1);
    if (e->grad_in)
        fill_random(e, e->grad_in, (size_t)s->N * s->C, 1e-4f, seed + 2);
    uint64_t z = seed | 1;
    for (size_t i = 0; i < (size_t)e->nmb * s->N; i++) {
        z ^= z << 13, z ^= z >> 7, z ^= z << 17;
        int v = (int)(z % (uint64_t)(m->vocab < s->Vl ? m->vocab : s->Vl));
        e->tokens[i] = v;
        e->targets[i] = (v * 7 + 3) % (m->vocab < s->Vl ? m->vocab : s->Vl);
    }
    return 0;
}

/* ---- the step ------------------------------------------------------------- */

int cuexec_step(CuExec *e, CuStepStats *st, char *err, int errlen)
{
    const ProxyShape *s = &e->sh;
    size_t nt = (size_t)e->nmb * s->N;
    if (e->have_data)
        for (int k = 0; k < e->nmb; k++) {
            char derr[256];
            if (data_next_batch(&e->dl, e->tokens + (size_t)k * s->N, e->targets + (size_t)k * s->N, derr,
                                sizeof derr) != 0)
                FAIL("%s", derr);
        }
    CHECK_CUDA(cudaMemcpyAsync(e->d_tokens, e->tokens, nt * sizeof(int), cudaMemcpyHostToDevice, e->st));
    CHECK_CUDA(cudaMemcpyAsync(e->d_targets, e->targets, nt * sizeof(int), cudaMemcpyHostToDevice, e->st));
    CHECK_CUDA(cudaEventRecord(e->step0, e->st));
    kc_zero(e->g, e->n, e->st);
    kc_zero(e->losses, nt, e->st);   // stays 0 on a proxy stage without the head
    for (int mb = 0; mb < e->nmb; mb++)
        micro_batch(e, mb);
    if (!e->proxy) {
        TrainOpts *o = &e->opt;
        tm_begin(e, PH_OPTIM);
        kc_adamw(e->w32, e->g, e->om, e->ov, e->n, o->lr, o->beta1, o->beta2, o->eps, o->weight_decay,
                 e->step + 1, e->wb, e->st);
        tm_end(e);
    }
    CHECK_CUDA(cudaEventRecord(e->step1, e->st));
    CHECK_CUDA(cudaMemcpyAsync(e->h_losses, e->losses, nt * sizeof(float), cudaMemcpyDeviceToHost, e->st));
    CHECK_CUDA(cudaStreamSynchronize(e->st));
    note_free(e);
    tm_sum(e);
    float ms = 0;
    CHECK_CUDA(cudaEventElapsedTime(&ms, e->step0, e->step1));
    e->step++;
    double sum = 0;
    for (size_t i = 0; i < nt; i++)
        sum += e->h_losses[i];
    if (s->last && !isfinite(sum))
        FAIL("step %d: loss is %s; stopping", e->step, isnan(sum) ? "NaN" : "Inf");
    st->loss = sum / (double)nt;
    st->step_s = ms * 1e-3;
    memcpy(st->t, e->t, sizeof e->t);
    return 0;
}

double cuexec_peak_bytes(const CuExec *e)
{
    return e->dev_total && e->free_min ? (double)(e->dev_total - e->free_min) : 0;
}

void cuexec_free(CuExec *e)
{
    if (!e)
        return;
    if (e->st)
        cudaStreamSynchronize(e->st);
    for (int k = 0; k < XM_COUNT; k++)
        if (e->slab[k])
            cudaFree(e->slab[k]);
    for (int i = 0; i < 2 * e->ev_cap; i++)
        cudaEventDestroy(e->ev[i]);
    if (e->step0)
        cudaEventDestroy(e->step0);
    if (e->step1)
        cudaEventDestroy(e->step1);
    if (e->st)
        cudaStreamDestroy(e->st);
    free(e->ev);
    free(e->ev_phase);
    free(e->rc);
    free(e->la);
    free(e->tokens);
    free(e->targets);
    free(e->h_losses);
    params_free(&e->ps);
    if (e->have_data)
        data_free(&e->dl);
    memset(e, 0, sizeof *e);
}
