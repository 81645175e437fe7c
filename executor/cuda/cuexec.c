/* cuexec.c — see cuexec.h. Set-up, slabs, the schedule loop, the pipeline's
 * sends and receives, DP buckets, ZeRO-1/2/3 and AdamW, the context-parallel
 * data split: exec.c's structure on bf16 device tensors; the layer math (and
 * the CP ring) is cunet.c. */
#include "cuexec.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cufp8.h"
#include "cunet.h"
#include "kc_fp8.h"
#include "refuse.h"

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

/* exec.c's carve_layer: the residual-stream tensors (x, a1, x2, a2, norm
 * statistics) hold Nl rows, the TP region's (q, k, v, o, lse, hpre, hact) N;
 * fp8 plans add the four transposed fp8 inputs the backward reads (cufp8.h). */
static void carve_layer(const ProxyShape *s, size_t Nl, size_t F1, size_t F, Carver *c, CuActs *A, int full_rc,
                        int with_x, int fp8)
{
    size_t N = s->N, C = s->C;
    memset(A, 0, sizeof *A);
    if (with_x)
        A->x = TAKE_BF(c, Nl * C);
    if (full_rc)
        return;
    A->a1 = TAKE_BF(c, Nl * C);
    A->q = TAKE_BF(c, N * s->ql);
    A->k = TAKE_BF(c, N * s->kvl);
    A->v = TAKE_BF(c, N * s->kvl);
    A->o = TAKE_BF(c, N * s->ql);
    A->x2 = TAKE_BF(c, Nl * C);
    A->a2 = TAKE_BF(c, Nl * C);
    A->hpre = TAKE_BF(c, N * F1);
    A->hact = TAKE_BF(c, N * F);
    A->mean1 = TAKE_F(c, Nl);
    A->rstd1 = TAKE_F(c, Nl);
    A->lse = TAKE_F(c, N * s->NHl);
    A->mean2 = TAKE_F(c, Nl);
    A->rstd2 = TAKE_F(c, Nl);
    if (fp8) {
        for (int k = 0; k < CUFP8_NKEEP; k++)
            A->f8[k] = take(c, cufp8_keep_elems(k, N, C, (size_t)s->ql, F));
        A->f8s = TAKE_F(c, CUFP8_NKEEP);
    }
}

/* The widest MLP of any layer: the dense one, or an MoE layer's shared expert. */
static size_t mlp_f1(const CuExec *e) { return (size_t)(e->sh.F1l > e->F1s ? e->sh.F1l : e->F1s); }
static size_t mlp_f(const CuExec *e) { return (size_t)(e->sh.Fl > e->Fs ? e->sh.Fl : e->Fs); }

/* The layers of chunk c carved from base (NULL: count); bytes used. */
static size_t carve_chunk(CuExec *e, int c, char *base, CuActs *la)
{
    Carver a = {base, 0};
    for (int j = 0; j < e->chunk_layers[c]; j++)
        carve_layer(&e->sh, e->Nl, mlp_f1(e), mlp_f(e), &a, &la[j], e->rc[e->chunk_first[c] + j] == 2, 1,
                    cufp8_keep_on(e));
    return a.n;
}

/* Slot s's layer tables for chunk c (each chunk has its own recompute pattern). */
static void slot_bind(CuExec *e, int s, int c)
{
    e->la = e->slot_la + (size_t)s * e->maxchunk;
    carve_chunk(e, c, e->slot_base[s], e->la);
    for (int j = 0; e->moe_acts && j < e->chunk_layers[c]; j++)   // allocated where a chunk's j-th layer is MoE
        e->la[j].moe = &e->moe_acts[(size_t)s * e->maxchunk + j];
}

static int is_last(const CuExec *e) { return e->proxy ? e->sh.last : e->d.pp_rank == e->pp - 1; }

/* Lay out acts and buffers (slabs NULL: count into e->mem). */
static void carve(CuExec *e)
{
    const ProxyShape *s = &e->sh;
    Carver a = {e->slab[XM_ACTS], 0}, b = {e->slab[XM_BUFFERS], 0};
    size_t N = s->N, Nl = e->Nl, C = s->C;
    int any_full = 0, last = is_last(e);
    for (int i = 0; i < s->layers; i++)
        any_full |= e->rc[i] == 2;
    if (!a.base) {   // every slot is as large as the largest chunk
        e->slot_bytes = 0;
        for (int c = 0; c < e->nchunk; c++) {
            size_t n = carve_chunk(e, c, NULL, e->slot_la);
            e->slot_bytes = n > e->slot_bytes ? n : e->slot_bytes;
        }
        e->slot_bytes = (e->slot_bytes + ALIGN - 1) / ALIGN * ALIGN;
    }
    for (int k = 0; k < e->nslots; k++)
        e->slot_base[k] = take(&a, e->slot_bytes);
    if (any_full)
        carve_layer(s, Nl, mlp_f1(e), mlp_f(e), &a, &e->ws, 0, 0, cufp8_keep_on(e));
    e->head_in = TAKE_BF(&a, Nl * C);   // the last layer's output (the proxy's next-stage input)
    if (last) {
        e->head_n = TAKE_BF(&a, Nl * C);
        e->head_mean = TAKE_F(&a, Nl);
        e->head_rstd = TAKE_F(&a, Nl);
        e->logits = TAKE_BF(&a, N * s->Vl);
        e->ce_lse = TAKE_F(&b, N);
        e->ce_red = e->tp > 1 ? TAKE_F(&b, 3 * N) : NULL;
        for (int k = 0; k < e->nslots; k++)   // interleaved: the loss gradient waits for its backward
            e->slot_dlast[k] = e->nchunk > 1 ? TAKE_BF(&b, Nl * C) : NULL;
    }
    e->losses = TAKE_F(&b, (size_t)e->nmb * N);
    e->gath = e->sp ? TAKE_BF(&b, N * C) : NULL;   // net.c's sequence-parallel buffers
    e->part = e->sp ? TAKE_BF(&b, N * C) : NULL;
    e->dgat = e->sp ? TAKE_BF(&b, N * C) : NULL;
    e->dout = e->sp ? TAKE_BF(&b, Nl * C) : NULL;
    e->dres = TAKE_BF(&b, Nl * C);
    e->dcol = TAKE_BF(&b, N * C);
    e->dq = TAKE_BF(&b, N * s->ql);
    e->dk = TAKE_BF(&b, N * s->kvl);
    e->dv = TAKE_BF(&b, N * s->kvl);
    e->drope = e->m.pos == POS_ROPE ? TAKE_BF(&b, N * s->ql) : NULL;
    e->dhpre = TAKE_BF(&b, N * mlp_f1(e));
    e->dhact = TAKE_BF(&b, N * (mlp_f(e) > (size_t)s->ql ? mlp_f(e) : (size_t)s->ql));
    e->moe_out = e->E ? TAKE_BF(&b, N * C) : NULL;
    e->rc_out = any_full ? TAKE_BF(&b, Nl * C) : NULL;
    e->grad_in = e->proxy && !s->last ? TAKE_BF(&b, Nl * C) : NULL;
    e->ring = e->nring ? TAKE_BF(&b, (size_t)e->nring * Nl * C) : NULL;
    e->d_tokens = (int *)take(&b, (size_t)e->nmb * N * sizeof(int));
    e->d_targets = (int *)take(&b, (size_t)e->nmb * N * sizeof(int));
    if (e->zero) {   // buckets: the largest layer unit twice, the stage unit once
        size_t lay = 0, st = e->stage_unit < e->nun ? e->un[e->stage_unit].pad : 0;
        int padded = 0;
        for (int u = 0; u < e->nun; u++) {
            if (u != e->stage_unit && e->un[u].pad > lay)
                lay = e->un[u].pad;
            padded |= e->un[u].pad != e->un[u].n;
        }
        for (int k = 0; k < 3; k++)
            e->zb[k] = k < 2 ? (lay ? TAKE_F(&b, lay) : NULL) : (st ? TAKE_F(&b, st) : NULL);
        if (e->zero == 3) {
            for (int k = 0; k < 3; k++)
                e->zg[k] = k < 2 ? (lay ? TAKE_BF(&b, lay) : NULL) : (st ? TAKE_BF(&b, st) : NULL);
        } else {
            e->zsh = TAKE_BF(&b, e->opt_n);
            e->zg[0] = padded ? TAKE_BF(&b, lay > st ? lay : st) : NULL;
        }
    }
    if (e->cp > 1) {   // the ring's blocks and fp32 accumulators (cunet.c)
        size_t nkv = N * s->kvl, nq = N * s->ql;
        for (int k = 0; k < 2; k++)
            e->cp_kv[k] = TAKE_BF(&b, 2 * nkv);
        e->cp_o = TAKE_F(&b, nq);
        e->cp_op = e->cp_dq = TAKE_F(&b, nq);
        e->cp_lp = TAKE_F(&b, N * s->NHl);
        for (int k = 0; k < 2; k++)
            e->cp_dkv[k] = TAKE_F(&b, 2 * nkv);
    }
    if (cufp8_on(e)) {   // the fp8 kernels' operand copies, lent to them after the slabs exist
        e->f8_scratch_bytes = cufp8_scratch_bytes(N, C, (size_t)s->ql, mlp_f1(e), mlp_f(e));
        e->f8_scratch = take(&b, e->f8_scratch_bytes);
    }
    for (int l = 0; e->f8w && l < s->layers; l++)   // fp8 keep: every local layer's weight copies
        for (int w = 0; w < CUFP8_NW; w++) {
            int oc, ic;
            cufp8_weight_shape(w, (int)C, s->ql, s->kvl, (int)mlp_f1(e), (int)mlp_f(e), &oc, &ic);
            KcFp8Weight *k = &e->f8w[(size_t)l * CUFP8_NW + w];
            k->w8 = take(&b, (size_t)oc * ic);
            k->wT8 = take(&b, (size_t)oc * ic);
            k->sinv = TAKE_F(&b, 1);
        }
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
        FAIL("not enough device memory for %s: %.2f GiB asked, %.2f GiB free of %.2f", runfile_mem_name(k),
             bytes / 1073741824.0, fr / 1073741824.0, tot / 1073741824.0);
    }
    e->mem[k] = (double)bytes;
    return 0;
}

static cudaEvent_t sync_event(void)
{
    cudaEvent_t ev;
    CHECK_CUDA(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
    return ev;
}

/* ---- pipeline ------------------------------------------------------------- */

/* A free send buffer from the ring; the compute stream waits for its last send. */
static kc_bf16 *ring_take(CuExec *e, int *k)
{
    int i = e->ring_next;
    e->ring_next = (i + 1) % e->nring;
    if (e->ring_used[i]) {
        int prev = cunet_tm_swap(e, PH_PP);
        CHECK_CUDA(cudaStreamWaitEvent(e->st, e->ring_sent[i], 0));
        cunet_tm_swap(e, prev);
    }
    *k = i;
    return e->ring + (size_t)i * e->Nl * e->sh.C;
}

/* Send ring entry k once the compute stream has written it, on the send
 * stream of its direction (never blocks the compute stream). */
static void ring_send(CuExec *e, int k, CuLinkRole r)
{
    cudaStream_t ss = e->sst[r == CL_FWD_OUT ? 0 : 1];
    size_t nc = (size_t)e->Nl * e->sh.C;
    CHECK_CUDA(cudaEventRecord(e->ring_ready[k], e->st));
    CHECK_CUDA(cudaStreamWaitEvent(ss, e->ring_ready[k], 0));
    cucomm_send(e->cc, r, e->ring + (size_t)k * nc, nc, CC_BF16, ss);
    CHECK_CUDA(cudaEventRecord(e->ring_sent[k], ss));
    e->ring_used[k] = 1;
}

static void pp_recv(CuExec *e, kc_bf16 *buf, CuLinkRole r)
{
    int prev = cunet_tm_swap(e, PH_PP);
    cucomm_recv(e->cc, r, buf, (size_t)e->Nl * e->sh.C, CC_BF16, e->st);
    cunet_tm_swap(e, prev);
}

/* ---- data parallelism ------------------------------------------------------ */

/* All-reduce bucket b on the comm stream once the compute stream has made it. */
static void launch_bucket(CuExec *e, int b)
{
    cudaStream_t cs = cucomm_stream(e->cc);
    CHECK_CUDA(cudaEventRecord(e->bk_ev[b], e->st));
    CHECK_CUDA(cudaStreamWaitEvent(cs, e->bk_ev[b], 0));
    cucomm_allreduce(e->cc, CC_DPCP, e->g + e->bk[b].start, e->bk[b].n, CC_F32, CC_SUM, cs);
}

static int dp_buckets(const CuExec *e) { return !e->proxy && e->D > 1 && !e->zero1 && !e->zero; }

/* The unit of local layer li (-1: the stage unit). */
static int unit_of(const CuExec *e, int li) { return li >= 0 ? li : e->stage_unit; }

/* Under SP every tp rank holds a partial gradient of the replicated tensors
 * of local layer li (-1: the final norm): sum them over tp, on the compute
 * stream after their last backward, before any DP bucket or the optimizer
 * reads them (exec.c's sp_sync). */
static void sp_sync(CuExec *e, int li)
{
    CuBucket r[P_LAYER_COUNT];
    int n = e->proxy ? 0 : cuplan_sp_sync(&e->ps, li, r);   // the proxy has no tp peers to sum with
    if (!n)
        return;
    int prev = cunet_tm_swap(e, PH_TP), u = unit_of(e, li);
    for (int k = 0; k < n; k++)   // where the unit's gradients are now: the grad slab or a ZeRO-2/3 bucket
        cucomm_allreduce(e->cc, CC_TP, e->gu[u] + (r[k].start - e->un[u].start), r[k].n, CC_F32, CC_SUM, e->st);
    cunet_tm_swap(e, prev);
}

/* ---- ZeRO-2/3 ------------------------------------------------------------------ */

/* Unit u's gradients go to bucket k from now on: once the comm stream is
 * done with k's last unit, zeroed on the compute stream. */
static void zb_take(CuExec *e, int u, int k)
{
    CHECK_CUDA(cudaStreamWaitEvent(e->st, e->zb_free[k], 0));
    kc_zero(e->zb[k], e->un[u].pad, e->st);
    e->gu[u] = e->zb[k];
}

/* Unit u's gradient (bucket k) is complete for this micro-batch: reduce-
 * scatter it over dp·cp on the comm stream and add this rank's slice into
 * the gradient shard; the bucket is free again after that. */
static void zb_reduce(CuExec *e, int u, int k)
{
    cudaStream_t cs = cucomm_stream(e->cc);
    const CuUnit *un = &e->un[u];
    CHECK_CUDA(cudaEventRecord(e->bk_ev[u], e->st));
    CHECK_CUDA(cudaStreamWaitEvent(cs, e->bk_ev[u], 0));
    cucomm_reduce_scatter(e->cc, CC_DPCP, e->zb[k], un->slice, CC_F32, cs);   // lands at drank·slice
    kc_add(e->g + un->shard_off, e->zb[k] + (size_t)e->drank * un->slice, un->slice, cs);
    CHECK_CUDA(cudaEventRecord(e->zb_free[k], cs));
}

/* ZeRO-3: start gathering unit u's bf16 weights into gather buffer k on the
 * comm stream (after the compute stream has released k). */
static void zg_gather(CuExec *e, int u, int k)
{
    cudaStream_t cs = cucomm_stream(e->cc);
    const CuUnit *un = &e->un[u];
    CHECK_CUDA(cudaStreamWaitEvent(cs, e->zg_free[k], 0));
    cucomm_allgather_from(e->cc, CC_DPCP, e->wb + un->shard_off, e->zg[k], un->slice, CC_BF16, cs);
    CHECK_CUDA(cudaEventRecord(e->zg_ready[k], cs));
    if (k < 2)
        e->zg_holds[k] = u;
}

/* The layer buffer that holds layer unit u, gathering it into the one not
 * in use when none does (a prefetch when called ahead of its use). */
static int zg_slot(CuExec *e, int u)
{
    for (int k = 0; k < 2; k++)
        if (e->zg_holds[k] == u)
            return k;
    int k = 1 - e->zg_cur;
    zg_gather(e, u, k);
    return k;
}

/* Before local layer li runs (forward, recomputation or backward): its
 * weights gathered (ZeRO-3), and the next layer to run (next, -1 none)
 * prefetched into the other buffer. */
static void z3_acquire(CuExec *e, int li, int next)
{
    if (e->zero != 3)
        return;
    int prev = cunet_tm_swap(e, PH_DP);
    int k = zg_slot(e, li);
    CHECK_CUDA(cudaStreamWaitEvent(e->st, e->zg_ready[k], 0));
    e->wu[li] = e->zg[k];
    e->zg_cur = k;
    if (next >= 0 && next < e->ps.nlayers)
        zg_slot(e, next);
    cunet_tm_swap(e, prev);
}

/* After local layer li's use: its buffer may be gathered into again. */
static void z3_release(CuExec *e, int li)
{
    if (e->zero != 3)
        return;
    for (int k = 0; k < 2; k++)
        if (e->zg_holds[k] == li)
            CHECK_CUDA(cudaEventRecord(e->zg_free[k], e->st));
}

/* ---- the step -------------------------------------------------------------- */

static int first_vs(const CuExec *e, int c) { return e->proxy ? e->sh.first : e->d.pp_rank == 0 && c == 0; }
static int last_vs(const CuExec *e, int c) { return e->proxy ? e->sh.last : is_last(e) && c == e->nchunk - 1; }

static void run_layers_fwd(CuExec *e, int c, kc_bf16 *out)
{
    int n = e->chunk_layers[c], f = e->chunk_first[c];
    for (int j = 0; j < n; j++) {
        kc_bf16 *dst = j + 1 < n ? e->la[j + 1].x : out;
        z3_acquire(e, f + j, f + j + 1);
        if (e->rc[f + j] == 2) {
            e->ws.x = e->la[j].x;
            cunet_layer_fwd(e, f + j, &e->ws, dst);
        } else {
            cunet_layer_fwd(e, f + j, &e->la[j], dst);
        }
        z3_release(e, f + j);
    }
}

static void run_forward(CuExec *e, int mb, int c)
{
    const ProxyShape *s = &e->sh;
    int slot = e->slot_free[--e->nfree], n = e->chunk_layers[c], k = -1;
    e->slot_of[c * e->nmb + mb] = slot;
    slot_bind(e, slot, c);
    cunet_tm_swap(e, PH_FWD);
    kc_bf16 *x0 = n ? e->la[0].x : e->head_in;
    int su = e->stage_unit;
    if (e->zero && su < e->nun) {   // pp 1: this micro-batch's embedding, head and their gradients
        if (e->zero == 3) {
            cunet_tm_swap(e, PH_DP);
            zg_gather(e, su, 2);
            CHECK_CUDA(cudaStreamWaitEvent(e->st, e->zg_ready[2], 0));
            e->wu[su] = e->zg[2];
            cunet_tm_swap(e, PH_FWD);
        }
        zb_take(e, su, 2);
    }
    if (first_vs(e, c))
        cunet_embed_fwd(e, e->d_tokens + (size_t)mb * s->N, x0);
    else if (!e->proxy)
        pp_recv(e, x0, CL_FWD_IN);
    int send = !last_vs(e, c) && !e->proxy;
    kc_bf16 *out = send ? ring_take(e, &k) : e->head_in;
    run_layers_fwd(e, c, out);
    if (last_vs(e, c)) {   // the loss backward is backward work
        cunet_tm_swap(e, PH_BWD);
        float scale = 1.0f / ((float)s->N * e->cp * e->nmb * e->dp);   // over the B·T tokens of every dp rank
        cunet_head(e, mb, scale, e->slot_dlast[slot] ? e->slot_dlast[slot] : e->dres);
    } else if (send) {
        ring_send(e, k, CL_FWD_OUT);
    }
    cunet_tm_swap(e, -1);
}

static void run_backward(CuExec *e, int mb, int c)
{
    const ProxyShape *s = &e->sh;
    int slot = e->slot_of[c * e->nmb + mb], n = e->chunk_layers[c], f = e->chunk_first[c];
    size_t nc = (size_t)e->Nl * s->C;
    slot_bind(e, slot, c);
    cunet_tm_swap(e, PH_BWD);
    if (last_vs(e, c)) {   // without a dlast slot the head has just written dres (1F1B: F then B)
        if (e->slot_dlast[slot])
            CHECK_CUDA(cudaMemcpyAsync(e->dres, e->slot_dlast[slot], nc * sizeof(kc_bf16), cudaMemcpyDeviceToDevice,
                                       e->st));
    } else if (e->proxy) {
        CHECK_CUDA(cudaMemcpyAsync(e->dres, e->grad_in, nc * sizeof(kc_bf16), cudaMemcpyDeviceToDevice, e->st));
    } else {
        pp_recv(e, e->dres, CL_BWD_IN);
    }
    for (int j = n - 1; j >= 0; j--) {
        CuActs *A = &e->la[j];
        z3_acquire(e, f + j, f + j - 1);
        int k = e->zb_next;
        if (e->zero) {
            zb_take(e, f + j, k);
            e->zb_next = 1 - k;
        }
        if (e->rc[f + j] == 2) {
            cunet_tm_swap(e, PH_RECOMPUTE);
            e->ws.x = e->la[j].x;
            cunet_layer_fwd(e, f + j, &e->ws, e->rc_out);
            cunet_tm_swap(e, PH_BWD);
            A = &e->ws;
        }
        cunet_layer_bwd(e, f + j, A);
        z3_release(e, f + j);
        if ((mb == e->nmb - 1 || e->zero) && e->sp)   // exec.c's layer_done: first the tp sum, then the DP bucket
            sp_sync(e, f + j);
        if (e->zero) {   // every micro-batch: into the shard
            cunet_tm_swap(e, PH_DP);
            zb_reduce(e, f + j, k);
            cunet_tm_swap(e, PH_BWD);
        }
        if (mb == e->nmb - 1 && dp_buckets(e) && e->lo.overlap_grad)   // this layer's grads are final
            launch_bucket(e, f + j);
    }
    if (first_vs(e, c)) {
        cunet_embed_bwd(e, e->d_tokens + (size_t)mb * s->N);
        if (e->zero && e->stage_unit < e->nun) {   // the stage unit's gradient is complete
            if (e->sp)
                sp_sync(e, -1);
            cunet_tm_swap(e, PH_DP);
            zb_reduce(e, e->stage_unit, 2);
            cunet_tm_swap(e, PH_BWD);
            if (e->zero == 3)
                CHECK_CUDA(cudaEventRecord(e->zg_free[2], e->st));
        }
    } else if (!e->proxy) {
        int k;
        kc_bf16 *buf = ring_take(e, &k);
        CHECK_CUDA(cudaMemcpyAsync(buf, e->dres, nc * sizeof(kc_bf16), cudaMemcpyDeviceToDevice, e->st));
        ring_send(e, k, CL_BWD_OUT);
    }
    e->slot_free[e->nfree++] = slot;
    cunet_tm_swap(e, -1);
}

/* After the last backward: outstanding sends, the final norm's tp sum (SP),
 * the tied embedding's sync, the stage tensors' bucket, then the compute
 * stream waits for every bucket. */
static void finish_grads(CuExec *e)
{
    ParamSet *ps = &e->ps;
    if (e->nring) {
        cunet_tm_swap(e, PH_PP);
        for (int k = 0; k < e->nring; k++)
            if (e->ring_used[k]) {
                CHECK_CUDA(cudaStreamWaitEvent(e->st, e->ring_sent[k], 0));
                e->ring_used[k] = 0;
            }
    }
    if (e->sp && !e->zero)   // ZeRO-2/3: done on the stage bucket every micro-batch
        sp_sync(e, -1);
    cunet_tm_swap(e, PH_DP);
    if (e->zero) {   // the shard is complete once the comm stream's last reduce-scatter has added into it
        cudaStream_t cs = cucomm_stream(e->cc);
        CHECK_CUDA(cudaEventRecord(e->comm_done, cs));
        CHECK_CUDA(cudaStreamWaitEvent(e->st, e->comm_done, 0));
    }
    if (cucomm_size(e->cc, CC_EMB) > 1) {
        ParamId id = e->d.pp_rank == 0 ? P_WTE : P_HEAD;
        cucomm_allreduce(e->cc, CC_EMB, e->g + ps->off[id], ps->len[id], CC_F32, CC_SUM, e->st);
    }
    if (dp_buckets(e)) {
        if (!e->lo.overlap_grad)   // every layer's bucket after the whole backward
            for (int b = 0; b < ps->nlayers; b++)
                launch_bucket(e, b);
        if (e->nbk > ps->nlayers)   // the stage tensors: embedding, final norm, head
            launch_bucket(e, e->nbk - 1);
        cudaStream_t cs = cucomm_stream(e->cc);
        CHECK_CUDA(cudaEventRecord(e->comm_done, cs));
        CHECK_CUDA(cudaStreamWaitEvent(e->st, e->comm_done, 0));
    }
    /* the routed experts: summed over the edp ranks that hold them, after every dense bucket (ZeRO-1 over
     * edp reduce-scatters them in the optimizer step instead) */
    if (e->ps.x_n && e->edp > 1 && !e->xzero)
        cucomm_allreduce(e->cc, CC_EDP, e->g + e->ps.x_off, e->ps.x_n, CC_F32, CC_SUM, e->st);
    cunet_tm_swap(e, -1);
}

/* ZeRO-1's routed experts (exec.c's expert_step): their masters follow the
 * dense shard; under xzero reduce-scatter over edp, AdamW on this rank's
 * slice, all-gather of the bf16 weights over edp; else AdamW on all of them. */
static void expert_step(CuExec *e, int t)
{
    TrainOpts *o = &e->opt;
    float *w32 = e->w32 + e->opt_nd, *m = e->om + e->opt_nd, *v = e->ov + e->opt_nd;
    if (!e->ps.x_n)
        return;
    if (e->xzero) {
        cunet_tm_swap(e, PH_DP);
        cucomm_reduce_scatter(e->cc, CC_EDP, e->g + e->ps.x_off, e->xopt_n, CC_F32, e->st);
    }
    cunet_tm_swap(e, PH_OPTIM);
    kc_adamw(w32, e->g + e->xopt_off, m, v, e->xopt_n, o->lr, o->beta1, o->beta2, o->eps, o->weight_decay, t,
             e->wb + e->xopt_off, e->st);
    if (e->xzero) {
        cunet_tm_swap(e, PH_DP);
        cucomm_allgather(e->cc, CC_EDP, e->wb + e->ps.x_off, e->xopt_n, CC_BF16, e->st);
    }
}

static void optimizer_step(CuExec *e)
{
    TrainOpts *o = &e->opt;
    int t = e->step + 1;
    if (e->zero == 3) {   // the shards only: nothing to gather after the step
        cunet_tm_swap(e, PH_OPTIM);
        kc_adamw(e->w32, e->g, e->om, e->ov, e->opt_n, o->lr, o->beta1, o->beta2, o->eps, o->weight_decay, t,
                 e->wb, e->st);
    } else if (e->zero == 2) {   // AdamW on the shard, then each unit's updated weights all-gathered
        cunet_tm_swap(e, PH_OPTIM);
        kc_adamw(e->w32, e->g, e->om, e->ov, e->opt_n, o->lr, o->beta1, o->beta2, o->eps, o->weight_decay, t,
                 e->zsh, e->st);
        cunet_tm_swap(e, PH_DP);
        for (int u = 0; u < e->nun; u++) {
            const CuUnit *un = &e->un[u];
            kc_bf16 *dst = un->pad == un->n ? e->wb + un->start : e->zg[0];
            cucomm_allgather_from(e->cc, CC_DPCP, e->zsh + un->shard_off, dst, un->slice, CC_BF16, e->st);
            if (dst != e->wb + un->start)   // padded: the real floats into place
                CHECK_CUDA(cudaMemcpyAsync(e->wb + un->start, dst, un->n * sizeof(kc_bf16), cudaMemcpyDeviceToDevice,
                                           e->st));
        }
    } else if (e->zero1) {   // reduce-scatter, AdamW on this rank's shard, all-gather the bf16 weights
        cunet_tm_swap(e, PH_DP);
        cucomm_reduce_scatter(e->cc, CC_DPCP, e->g, e->opt_nd, CC_F32, e->st);
        cunet_tm_swap(e, PH_OPTIM);
        kc_adamw(e->w32, e->g + e->opt_off, e->om, e->ov, e->opt_nd, o->lr, o->beta1, o->beta2, o->eps,
                 o->weight_decay, t, e->wb + e->opt_off, e->st);
        cunet_tm_swap(e, PH_DP);
        cucomm_allgather(e->cc, CC_DPCP, e->wb, e->opt_nd, CC_BF16, e->st);
        expert_step(e, t);
    } else {
        cunet_tm_swap(e, PH_OPTIM);
        kc_adamw(e->w32, e->g, e->om, e->ov, e->n_alloc, o->lr, o->beta1, o->beta2, o->eps, o->weight_decay, t,
                 e->wb, e->st);
    }
    cunet_tm_swap(e, -1);
}

/* One micro-batch's tokens and targets (N each): the loader's B rows of T;
 * under cp the two chunks of each row that this rank holds (cuplan_cp_pos),
 * every cp rank reading the rows of its dp rank. */
static int next_batch(CuExec *e, int *tok, int *tgt, char *err, int errlen)
{
    if (e->cp <= 1)
        return data_next_batch(&e->dl, tok, tgt, err, errlen);
    if (data_next_batch(&e->dl, e->tok_full, e->tgt_full, err, errlen) != 0)
        return -1;
    int T = e->sh.T;
    for (int b = 0; b < e->sh.B; b++)
        for (int t = 0; t < T; t++) {
            size_t g = (size_t)b * e->Tg + cuplan_cp_pos(e->Tg, e->cp, e->d.cp_rank, t);
            tok[(size_t)b * T + t] = e->tok_full[g];
            tgt[(size_t)b * T + t] = e->tgt_full[g];
        }
    return 0;
}

int cuexec_step(CuExec *e, CuStepStats *st, char *err, int errlen)
{
    const ProxyShape *s = &e->sh;
    size_t nt = (size_t)e->nmb * s->N;
    if (e->have_data) {
        /* a data error on one rank reaches every rank here, before any
         * collective of the step (issue 17, item 7: it deadlocked) */
        char derr[256] = "", msg[300] = "";
        int bad = 0;
        for (int k = 0; k < e->nmb && !bad; k++)
            bad = next_batch(e, e->tokens + (size_t)k * s->N, e->targets + (size_t)k * s->N, derr, sizeof derr) != 0;
        if (bad)
            snprintf(msg, sizeof msg, "rank %d: %.250s", e->d.rank, derr);
        if (dist_world_agree(bad ? -1 : 0, msg, sizeof msg) != 0)
            FAIL("step %d: %s", e->step + 1, msg);
    }
    dist_watch_step(e->step + 1);   // the communication watchdog names this step
    e->f8_gen++;   // the weights may have changed since the last step: their fp8 copies are cast again
    CHECK_CUDA(cudaMemcpyAsync(e->d_tokens, e->tokens, nt * sizeof(int), cudaMemcpyHostToDevice, e->st));
    CHECK_CUDA(cudaMemcpyAsync(e->d_targets, e->targets, nt * sizeof(int), cudaMemcpyHostToDevice, e->st));
    CHECK_CUDA(cudaEventRecord(e->step0, e->st));
    kc_zero(e->g, e->zero ? e->opt_n : e->n_alloc, e->st);   // ZeRO-2/3: the shard
    kc_zero(e->losses, nt, e->st);   // stays 0 on a stage without the head
    e->zg_holds[0] = e->zg_holds[1] = -1;   // the weights changed: nothing gathered is current
    e->zg_cur = 0;
    for (int k = 0; k < 3 && e->zero == 3; k++)   // no gather reads the shard before the last AdamW wrote it
        CHECK_CUDA(cudaEventRecord(e->zg_free[k], e->st));
    e->nfree = e->nslots;
    for (int k = 0; k < e->nslots; k++)
        e->slot_free[k] = k;
    for (int i = 0; i < e->sch.n; i++) {
        Action a = e->sch.a[i];
        if (a.kind == ACT_FWD)
            run_forward(e, a.mb, a.chunk);
        else
            run_backward(e, a.mb, a.chunk);
    }
    if (e->E) {   // a routed block overflowed its rows (cunet.c) on this ep group: every rank stops here
        char msg[300];
        snprintf(msg, sizeof msg, "rank %d: %.250s", e->d.rank, e->moe_err);
        int bad = e->moe_err[0] != 0;
        e->moe_err[0] = 0;
        if ((e->proxy ? -bad : dist_world_agree(bad ? -1 : 0, msg, sizeof msg)) != 0)
            FAIL("step %d: %s", e->step + 1, msg);
    }
    if (!e->proxy) {
        finish_grads(e);
        optimizer_step(e);
    }
    CHECK_CUDA(cudaEventRecord(e->step1, e->st));
    CHECK_CUDA(cudaMemcpyAsync(e->h_losses, e->losses, nt * sizeof(float), cudaMemcpyDeviceToHost, e->st));
    CHECK_CUDA(cudaStreamSynchronize(e->st));
    note_free(e);
    cunet_tm_sum(e);
    float ms = 0;
    CHECK_CUDA(cudaEventElapsedTime(&ms, e->step0, e->step1));
    e->step++;
    double sum = 0;
    if (e->proxy || (is_last(e) && e->d.tp_rank == 0))   // every tp rank holds the same losses
        for (size_t i = 0; i < nt; i++)
            sum += e->h_losses[i];
    double tokens = (double)nt;
    if (!e->proxy && e->d.world > 1) {
        sum = dist_world_sum(sum);
        tokens = (double)e->lo.gbs * e->Tg;
    }
    if ((!e->proxy || s->last) && !isfinite(sum))
        FAIL("step %d: loss is %s%s; stopping", e->step, isnan(sum) ? "NaN" : "Inf",
             e->d.world > 1 ? " (summed over ranks)" : "");
    st->loss = sum / tokens;
    st->step_s = ms * 1e-3;
    memcpy(st->t, e->t, sizeof e->t);
    return 0;
}

/* ---- set-up ------------------------------------------------------------------ */

/* What the CUDA executor can't run of a plan: refuse_cuda (executor/refuse.h),
 * the function `plan --target ultraplan-cuda` asks too. */
_Static_assert(REFUSE_CUDA_MAX_EXPERTS <= KC_MOE_MAX_E && REFUSE_CUDA_MAX_TOPK <= KC_MOE_MAX_K,
               "refuse.h's MoE limits are the CUDA kernels'");

static int check_kernels(const CuExec *e, char *err, int errlen)
{
    /* refuse_cuda has these for a whole plan; the proxy's stage comes here without it */
    if (!kc_attention_supported(e->sh.HS))
        FAIL("the CUDA attention kernel takes head sizes 32, 64, 96 or 128; %s has %d", e->m.name, e->sh.HS);
    if (e->m.pos == POS_ROPE && e->sh.HS % 2)
        FAIL("RoPE needs an even head size (got %d)", e->sh.HS);
    if (kc_device_count() < 1)
        FAIL("no CUDA device is visible (driver missing, or CUDA_VISIBLE_DEVICES empty)");
    return 0;
}

/* Host-side tables: shard, chunks, recompute, schedule, slots, ring, buckets. */
static int plan_tables(CuExec *e, int stage, char *err, int errlen)
{
    const ProxyShape *s = &e->sh;
    if (stagemap_init(&e->sm, &e->m, &e->lo, stage, e->d.tp_rank, err, errlen) != 0)
        return -1;
    e->sm.ep_rank = e->d.ep_rank, e->sm.etp_rank = e->d.etp_rank;   // 0 for a dense model
    e->sm.expert_pad = e->xzero ? e->edp : 1;
    params_layout(&e->ps, &e->m, &e->sm, e->zero1 ? e->D : 1);
    e->n = e->ps.n;
    size_t na;
    cuplan_shard(e->n, e->D, e->drank, e->zero1, &na, &e->opt_n, &e->opt_off);
    e->n_alloc = e->ps.n_alloc;
    if (na != e->ps.dense_alloc)
        FAIL("internal: ZeRO-1 padding %zu vs the parameter table's %zu", na, e->ps.dense_alloc);
    /* the routed experts' masters: all of the region, or this rank's edp shard (exec.c) */
    e->opt_nd = e->opt_n;
    cuplan_expert_shard(&e->ps, e->edp, e->d.edp_rank, e->xzero, &e->xopt_n, &e->xopt_off);
    e->opt_n += e->xopt_n;
    int nu = e->ps.nlayers + 1;
    e->un = calloc(nu, sizeof *e->un);
    e->wu = calloc(nu + 1, sizeof *e->wu);
    e->gu = calloc(nu + 1, sizeof *e->gu);
    if (!e->un || !e->wu || !e->gu)
        FAIL("out of host memory");
    size_t shard;
    e->nun = cuplan_units(&e->ps, e->zero ? e->D : 1, e->un, &shard);
    e->stage_unit = e->nun;
    for (int u = 0; u < e->nun; u++)
        if (e->un[u].layer < 0)
            e->stage_unit = u;
    if (e->zero)   // the shard of every unit's slices; the weights and grads are unpadded (no MoE)
        e->opt_n = e->opt_nd = shard, e->opt_off = 0;
    e->nmb = e->lo.gbs / (e->lo.dp * e->lo.mbs);
    if (e->proxy && e->nmb > CUEXEC_PROXY_MAX_MB)   // per micro-batch time is what it measures
        e->nmb = CUEXEC_PROXY_MAX_MB;
    e->nchunk = e->proxy ? 1 : e->vp;
    for (int c = 0, at = 0; c < e->nchunk; c++) {
        e->chunk_layers[c] = e->proxy ? s->layers : e->sm.nchunk_layers[c];
        e->chunk_first[c] = at;
        at += e->chunk_layers[c];
        e->maxchunk = e->chunk_layers[c] > e->maxchunk ? e->chunk_layers[c] : e->maxchunk;
    }
    e->rc = calloc(s->layers ? s->layers : 1, sizeof *e->rc);
    if (!e->rc)
        FAIL("out of host memory");
    cuplan_recompute(s->full_rc, s->sel_rc, e->nchunk, e->chunk_layers, e->rc);
    if (sched_build(&e->sch, e->proxy ? 1 : e->pp, e->proxy ? 0 : stage, e->nmb, e->nchunk, err, errlen) != 0)
        return -1;
    e->nslots = e->sch.max_live;
    e->nring = e->proxy ? 0 : cuplan_ring(e->pp, e->vp, e->nmb);
    int mc = e->maxchunk ? e->maxchunk : 1, nl = s->layers ? s->layers : 1;
    e->slot_base = calloc(e->nslots, sizeof *e->slot_base);
    e->slot_la = calloc((size_t)e->nslots * mc, sizeof *e->slot_la);
    e->slot_dlast = calloc(e->nslots, sizeof *e->slot_dlast);
    e->slot_of = calloc((size_t)e->nchunk * e->nmb, sizeof *e->slot_of);
    e->slot_free = calloc(e->nslots, sizeof *e->slot_free);
    e->ring_used = calloc(e->nring + 1, sizeof *e->ring_used);
    e->ring_ready = calloc(e->nring + 1, sizeof *e->ring_ready);
    e->ring_sent = calloc(e->nring + 1, sizeof *e->ring_sent);
    e->bk = calloc(nl + 1, sizeof *e->bk);
    e->bk_ev = calloc(nl + 1, sizeof *e->bk_ev);
    if (e->cp > 1) {
        e->tok_full = malloc((size_t)s->B * e->Tg * sizeof *e->tok_full);
        e->tgt_full = malloc((size_t)s->B * e->Tg * sizeof *e->tgt_full);
        if (!e->tok_full || !e->tgt_full)
            FAIL("out of host memory");
    }
    e->tokens = malloc((size_t)e->nmb * s->N * sizeof *e->tokens);
    e->targets = malloc((size_t)e->nmb * s->N * sizeof *e->targets);
    e->h_losses = malloc((size_t)e->nmb * s->N * sizeof *e->h_losses);
    if (!e->slot_base || !e->slot_la || !e->slot_dlast || !e->slot_of || !e->slot_free || !e->ring_used ||
        !e->ring_ready || !e->ring_sent || !e->bk || !e->bk_ev || !e->tokens || !e->targets || !e->h_losses)
        FAIL("out of host memory");
    e->nbk = cuplan_buckets(&e->ps, e->bk);
    return 0;
}

/* The routed block's scratch and, per slot layer j that some chunk runs as
 * an MoE layer without full recomputation, its activations; the working
 * set's (last) when an MoE layer is recomputed. Counted into buffers and
 * acts. */
static int moe_setup(CuExec *e, char *err, int errlen)
{
    const ModelSpec *m = &e->m;
    int fe = m->moe_ffn > 0 ? m->moe_ffn : m->f, mc = e->maxchunk ? e->maxchunk : 1;
    double imb = e->opt.moe_imbalance > 0 ? e->opt.moe_imbalance : layout_moe_imbalance(&e->lo);
    if (e->proxy)   // its tokens route over its own experts: every row stays here
        imb = 1;
    if (cumoe_init(&e->moe, e->Nl, e->sh.C, e->E, e->K, fe, m->mlp == MLP_SWIGLU, imb, e->cc, e->st, err,
                   errlen) != 0)
        return -1;
    e->mem[XM_BUFFERS] += e->moe.bytes;
    e->n_moe_acts = e->nslots * mc + 1;
    if (!(e->moe_acts = calloc(e->n_moe_acts, sizeof *e->moe_acts)))
        FAIL("out of host memory");
    int ws = 0;
    for (int j = 0; j < mc; j++) {
        int need = 0;
        for (int c = 0; c < e->nchunk; c++) {
            int li = e->chunk_first[c] + j;
            if (j < e->chunk_layers[c] && cunet_layer_moe(e, li))
                need |= e->rc[li] == 2 ? 0 : 1, ws |= e->rc[li] == 2;
        }
        for (int k = 0; need && k < e->nslots; k++) {
            CuMoeActs *A = &e->moe_acts[(size_t)k * mc + j];
            if (cumoe_acts_alloc(&e->moe, A, err, errlen) != 0)
                return -1;
            e->mem[XM_ACTS] += A->bytes;
        }
    }
    if (ws) {
        if (cumoe_acts_alloc(&e->moe, &e->moe_acts[e->n_moe_acts - 1], err, errlen) != 0)
            return -1;
        e->mem[XM_ACTS] += e->moe_acts[e->n_moe_acts - 1].bytes;
    }
    e->ws.moe = &e->moe_acts[e->n_moe_acts - 1];
    return 0;
}

/* Everything after the shapes: host tables, streams, slabs, carving. The
 * device is already set. */
static int setup(CuExec *e, int stage, char *err, int errlen)
{
    if (plan_tables(e, stage, err, errlen) != 0)
        return -1;
    if (e->proxy && e->lo.opt == OPT_ZERO3 && !e->E && e->nun > 1) {   // one layer's weights, as ZeRO-3 gathers
        for (int u = 0; u < e->nun; u++)
            if (u != e->stage_unit && e->un[u].n > e->alias)
                e->alias = e->un[u].n;
        e->n = e->n_alloc = e->alias + (e->stage_unit < e->nun ? e->un[e->stage_unit].n : 0);
    }
    kc_init();
    CHECK_CUDA(cudaStreamCreateWithFlags(&e->st, cudaStreamNonBlocking));
    for (int d = 0; d < 2 && e->nring; d++)
        CHECK_CUDA(cudaStreamCreateWithFlags(&e->sst[d], cudaStreamNonBlocking));
    for (int k = 0; k < e->nring; k++) {
        e->ring_ready[k] = sync_event();
        e->ring_sent[k] = sync_event();
    }
    for (int b = 0; b < e->nbk; b++)
        e->bk_ev[b] = sync_event();
    e->comm_done = sync_event();
    for (int k = 0; k < 3 && e->zero; k++) {
        e->zb_free[k] = sync_event();
        e->zg_ready[k] = sync_event();
        e->zg_free[k] = sync_event();
    }
    for (int k = 0; k < 2 && e->cp > 1; k++)
        e->cp_ev[k] = sync_event();
    CHECK_CUDA(cudaEventCreate(&e->step0));
    CHECK_CUDA(cudaEventCreate(&e->step1));
    note_free(e);
    size_t na = e->n_alloc, on = e->opt_n;
    size_t nw = e->zero == 3 ? on : na, ng = e->zero ? on : na;   // ZeRO-3 weights, ZeRO-2/3 grads: the shard
    if (dev_alloc(e, XM_WEIGHTS, nw * sizeof(kc_bf16), err, errlen) ||
        dev_alloc(e, XM_GRADS, ng * sizeof(float), err, errlen) ||
        dev_alloc(e, XM_OPTIM, e->proxy ? 0 : 3 * on * sizeof(float), err, errlen))
        return -1;
    e->wb = e->slab[XM_WEIGHTS];
    e->g = e->slab[XM_GRADS];
    for (int u = 0; u < e->nun; u++) {   // ZeRO-3's weights and ZeRO-2/3's grads move to buffers per use
        size_t at = !e->alias ? e->un[u].start : u == e->stage_unit ? e->alias : 0;
        e->wu[u] = e->zero == 3 ? NULL : e->wb + at;
        e->gu[u] = e->zero ? NULL : e->g + at;
    }
    if (!e->proxy) {   // master weights, m, v: all parameters, or this rank's ZeRO-1 shard
        e->w32 = e->slab[XM_OPTIM];
        e->om = e->w32 + on;
        e->ov = e->om + on;
        CHECK_CUDA(cudaMemsetAsync(e->om, 0, 2 * on * sizeof(float), e->st));
    } else {
        e->mem[XM_OPTIM] = 0;
    }
    /* host tables of the fp8 weight copies (carved with the buffers); not
     * under ZeRO-3, whose layers exist whole only while gathered: kept copies
     * of every layer would undo its sharding (model/memory.c fp8_buffers) */
    if (cufp8_keep_on(e) && e->lo.opt != OPT_ZERO3) {
        size_t nw = (size_t)(e->sh.layers ? e->sh.layers : 1) * CUFP8_NW;
        e->f8w = calloc(nw, sizeof *e->f8w);
        e->f8w_gen = calloc(nw, sizeof *e->f8w_gen);
        if (!e->f8w || !e->f8w_gen)
            FAIL("out of host memory");
    }
    carve(e);   // count
    size_t nacts = (size_t)e->mem[XM_ACTS], nbuf = (size_t)e->mem[XM_BUFFERS];
    if (dev_alloc(e, XM_ACTS, nacts, err, errlen) || dev_alloc(e, XM_BUFFERS, nbuf, err, errlen))
        return -1;
    carve(e);
    if (e->f8_scratch)
        kc_fp8_use_scratch(e->f8_scratch, e->f8_scratch_bytes);
    if (e->E && moe_setup(e, err, errlen) != 0)
        return -1;
    note_free(e);
    return 0;
}

/* ZeRO-2/3: this rank's shard (opt_n) of the full fp32 weights w (n), in
 * unit order, zero in the padding. */
static void shard_of(const CuExec *e, const float *w, float *sh)
{
    memset(sh, 0, e->opt_n * sizeof *sh);
    for (int u = 0; u < e->nun; u++) {
        size_t first, len;
        cuplan_unit_slice(&e->un[u], e->drank, &first, &len);
        memcpy(sh + e->un[u].shard_off, w + first, len * sizeof *sh);
    }
}

int cuexec_put_weights(CuExec *e, const float *w)
{
    /* on e->st: a plain cudaMemcpy from pageable memory may return before its
     * DMA lands, and the legacy stream does not order the non-blocking e->st */
    if (!e->zero) {   // the full weights through the grad slab (zeroed by every step)
        CHECK_CUDA(cudaMemcpyAsync(e->g, w, e->n_alloc * sizeof(float), cudaMemcpyHostToDevice, e->st));
        kc_to_bf16(e->wb, e->g, e->n_alloc, e->st);
        CHECK_CUDA(cudaMemcpyAsync(e->w32, e->g + e->opt_off, e->opt_nd * sizeof(float), cudaMemcpyDeviceToDevice,
                                   e->st));
        if (e->xopt_n)   // the routed experts' masters: after the dense ones (exec.c's order)
            CHECK_CUDA(cudaMemcpyAsync(e->w32 + e->opt_nd, e->g + e->xopt_off, e->xopt_n * sizeof(float),
                                       cudaMemcpyDeviceToDevice, e->st));
        CHECK_CUDA(cudaStreamSynchronize(e->st));
        return 0;
    }
    float *sh = malloc((e->opt_n ? e->opt_n : 1) * sizeof *sh);
    if (!sh)
        return -1;
    shard_of(e, w, sh);
    CHECK_CUDA(cudaMemcpyAsync(e->w32, sh, e->opt_n * sizeof(float), cudaMemcpyHostToDevice, e->st));
    if (e->zero == 3) {   // the bf16 shard
        kc_to_bf16(e->wb, e->w32, e->opt_n, e->st);
    } else {              // the full bf16 weights, through a temporary fp32 copy
        float *t;
        CHECK_CUDA(cudaMalloc((void **)&t, (e->n ? e->n : 1) * sizeof(float)));
        CHECK_CUDA(cudaMemcpyAsync(t, w, e->n * sizeof(float), cudaMemcpyHostToDevice, e->st));
        kc_to_bf16(e->wb, t, e->n, e->st);
        CHECK_CUDA(cudaStreamSynchronize(e->st));
        CHECK_CUDA(cudaFree(t));
    }
    CHECK_CUDA(cudaStreamSynchronize(e->st));
    free(sh);
    return 0;
}

void cuexec_get_weights(CuExec *e, float *w)
{
    size_t fb = sizeof(float);
    CHECK_CUDA(cudaStreamSynchronize(e->st));
    if (!e->zero) {   // through the grad slab: every rank's dense shard over dp·cp, expert shard over edp
        CHECK_CUDA(cudaMemcpyAsync(e->g + e->opt_off, e->w32, e->opt_nd * fb, cudaMemcpyDeviceToDevice, e->st));
        if (e->zero1)
            cucomm_allgather(e->cc, CC_DPCP, e->g, e->opt_nd, CC_F32, e->st);
        if (e->xopt_n)
            CHECK_CUDA(cudaMemcpyAsync(e->g + e->xopt_off, e->w32 + e->opt_nd, e->xopt_n * fb,
                                       cudaMemcpyDeviceToDevice, e->st));
        if (e->xzero)
            cucomm_allgather(e->cc, CC_EDP, e->g + e->ps.x_off, e->xopt_n, CC_F32, e->st);
        CHECK_CUDA(cudaMemcpyAsync(w, e->g, e->n_alloc * fb, cudaMemcpyDeviceToHost, e->st));
        CHECK_CUDA(cudaStreamSynchronize(e->st));
        return;
    }
    size_t big = 1;   // ZeRO-2/3: unit by unit, every rank's master slices gathered into a temporary
    for (int u = 0; u < e->nun; u++)
        big = e->un[u].pad > big ? e->un[u].pad : big;
    float *t;
    CHECK_CUDA(cudaMalloc((void **)&t, big * fb));
    for (int u = 0; u < e->nun; u++) {
        const CuUnit *un = &e->un[u];
        cucomm_allgather_from(e->cc, CC_DPCP, e->w32 + un->shard_off, t, un->slice, CC_F32, e->st);
        CHECK_CUDA(cudaMemcpyAsync(w + un->start, t, un->n * fb, cudaMemcpyDeviceToHost, e->st));
        CHECK_CUDA(cudaStreamSynchronize(e->st));
    }
    CHECK_CUDA(cudaFree(t));
}

/* The MoE widths and the balance loss's factor (exec.c's, executor/moe.c's
 * aux scale: coeff·E/(T²·K·G), G the global batch's sequences). */
static void moe_shapes(CuExec *e)
{
    const ModelSpec *m = &e->m;
    if (!spec_is_moe(m))
        return;
    e->E = m->experts, e->K = m->topk, e->El = m->experts / e->d.ep;
    e->Fs = m->shared_ffn / e->tp;
    e->F1s = m->mlp == MLP_SWIGLU ? 2 * e->Fs : e->Fs;
    e->edp = e->d.edp;
    e->xzero = e->edp > 1 && (e->lo.opt == OPT_ZERO1 || e->lo.opt == OPT_DISTOPT);
    double T = e->Tg;
    e->aux_g = (float)(e->opt.moe_aux_coeff * e->E / (T * T * e->K * e->lo.gbs));
}

/* This rank's coordinates, its node-local rank and the visible devices;
 * the checks that fail alike on every rank come before dist_init, the
 * rank-local ones after dist_local_rank (the last collective here). */
static int init_ranks(CuExec *e, int *local, int *ndev, char *err, int errlen)
{
    const Layout *lo = &e->lo;
    if (refuse_cuda(&e->m, lo, err, errlen) != 0)
        return -1;
    if (dist_init(&e->d, lo->tp, lo->cp, lo->dp, lo->pp, err, errlen) != 0)
        return -1;
    e->have_dist = 1;
    /* the expert ranks: the CPU executor's folding (dist_init_experts), its MPI groups too */
    if (spec_is_moe(&e->m) && dist_init_experts(&e->d, lo->ep > 0 ? lo->ep : 1, 1, err, errlen) != 0)
        return -1;
    e->tp = lo->tp, e->dp = lo->dp, e->pp = lo->pp, e->vp = lo->vp, e->cp = lo->cp;
    e->D = lo->dp * lo->cp;
    e->drank = e->d.cp_rank + lo->cp * e->d.dp_rank;
    e->zero1 = (lo->opt == OPT_ZERO1 || lo->opt == OPT_DISTOPT) && e->D > 1;   // exec.c: every sharding stage
    e->zero = (lo->opt == OPT_ZERO2 || lo->opt == OPT_ZERO3) && e->D > 1 ? (lo->opt == OPT_ZERO2 ? 2 : 3) : 0;
    int local_n = 1;
    *local = dist_local_rank(&local_n);
    if (e->d.world > 1 && !cucomm_available())
        FAIL("this build has no NCCL (nccl.h and libnccl were not found at configure time): the CUDA backend "
             "runs one GPU; rebuild with NCCL, or run the plan on the CPU backend");
    Layout one = *lo;   // the proxy's shapes are cp 1's: a rank's T/cp tokens replace T below
    one.cp = 1;
    ModelSpec dense = e->m;   // the attention and dense-MLP shapes; the MoE widths follow (moe_shapes)
    dense.experts = 0;
    if (proxy_shape(&dense, &one, e->d.pp_rank, &e->sh, err, errlen) != 0 || check_kernels(e, err, errlen) != 0)
        return -1;
    e->Tg = e->sh.T;
    e->sh.T /= e->cp;
    e->sh.N = e->sh.B * e->sh.T;
    moe_shapes(e);
    e->vstart = e->d.tp_rank * e->sh.Vl;
    e->sp = lo->sp && lo->tp > 1;
    int first;   // refuse_cuda made tp divide N under sp
    cuplan_sp_rows(e->sh.N, e->tp, e->d.tp_rank, e->sp, &first, &e->Nl);
    *ndev = kc_device_count();
    /* one visible device a rank is a launcher binding GPUs (Slurm's
     * --gpu-bind, a wrapper setting CUDA_VISIBLE_DEVICES per rank) */
    bool bound = *ndev == 1 && getenv("CUDA_VISIBLE_DEVICES");
    if (e->d.world > 1 && *ndev < local_n && !bound)
        FAIL("rank %d: %d ranks on this node but %d CUDA device(s) visible: launch one rank per GPU", e->d.rank,
             local_n, *ndev);
    return 0;
}

int cuexec_init(CuExec *e, const ModelSpec *m, const Layout *lo, const TrainOpts *o,
                const char *data, char *err, int errlen)
{
    memset(e, 0, sizeof *e);
    e->m = *m, e->lo = *lo, e->opt = *o;
    e->cur_phase = -1;
    err[0] = 0;
    int local = 0, ndev = 1;
    int bad = init_ranks(e, &local, &ndev, err, errlen) != 0;
    if (bad && !e->have_dist)
        return -1;   // alike on every rank, before any collective
    if (e->d.world > 1 && !dist_world_min(!bad)) {   // agree before the NCCL set-up blocks
        if (!bad)
            snprintf(err, errlen, "another rank failed to set up (see its message)");
        return -1;
    }
    if (bad)
        return -1;
    e->lo.sp = e->sp;   // off at tp 1, as exec.c
    e->device = local % ndev;
    CHECK_CUDA(cudaSetDevice(e->device));
    if (e->d.world > 1 && !(e->cc = cucomm_init(&e->d, e->vp > 1, m->tied, err, errlen)))
        return -1;
    if (e->cc && e->E && cucomm_init_moe(e->cc, &e->d, err, errlen) != 0)
        return -1;
    if (setup(e, e->d.pp_rank, err, errlen) != 0)
        return -1;
    float *w = malloc(e->n_alloc * sizeof *w);
    if (!w)
        FAIL("out of host memory for %zu initial weights", e->n_alloc);
    e->ps.w = w;
    params_init(&e->ps, m, &e->sm, o->seed);
    e->ps.w = NULL;
    int up = cuexec_put_weights(e, w);
    free(w);
    if (up != 0)
        FAIL("out of host memory for the weight shard (%zu floats)", e->opt_n);
    char derr[256];   // every cp rank reads its dp rank's rows of whole sequences
    if (data_init(&e->dl, data, e->sh.B, e->Tg, e->d.dp_rank, e->dp, m->vocab, derr, sizeof derr) != 0)
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
    CHECK_CUDA(cudaMemcpyAsync(dev, host, CH * sizeof(float), cudaMemcpyHostToDevice, e->st));
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
    e->tp = e->dp = e->pp = e->vp = e->cp = e->D = 1;   // one GPU; no communication
    e->d.tp = e->d.dp = e->d.pp = e->d.cp = e->d.world = 1;
    e->cur_phase = -1;
    exec_default_opts(&e->opt);
    if (proxy_shape(m, lo, stage, &e->sh, err, errlen) != 0 || check_kernels(e, err, errlen) != 0)
        return -1;
    e->cp = e->sh.cp;   // cp rank 0's blocks of the ring, the others' K/V random and resident
    e->Tg = e->sh.T * e->cp;
    if (e->sh.moe) {    // the rank's experts, routed over by its own tokens (proxy.h)
        e->E = e->El = e->sh.El, e->K = e->sh.K;
        e->Fs = e->sh.Fs, e->F1s = m->mlp == MLP_SWIGLU ? 2 * e->Fs : e->Fs;
        double T = e->Tg;
        e->aux_g = (float)(e->opt.moe_aux_coeff * m->experts / (T * T * e->K * lo->gbs));
    }
    /* under SP the stage runs its norms and residual adds on N/tp rows:
     * so does the proxy (cunet.c's sp_allgather/sp_reduce_scatter copy
     * locally where the collectives would run, timed as TP) */
    e->sp = lo->sp && lo->tp > 1 && e->sh.N % lo->tp == 0;
    e->Nl = e->sp ? e->sh.N / lo->tp : e->sh.N;
    CHECK_CUDA(cudaSetDevice(0));
    if (setup(e, stage, err, errlen) != 0)
        return -1;
    const ProxyShape *s = &e->sh;
    fill_random(e, e->wb, e->n_alloc, 0.02f, seed);   // the routed experts' region too
    for (int k = 0; k < 2 && e->cp > 1; k++) {        // the blocks that would arrive; accumulators start at 0
        fill_random(e, e->cp_kv[k], 2 * (size_t)s->N * s->kvl, 1.0f, seed + 3 + k);
        CHECK_CUDA(cudaMemsetAsync(e->cp_dkv[k], 0, 2 * (size_t)s->N * s->kvl * sizeof(float), e->st));
    }
    slot_bind(e, 0, 0);
    if (!s->first && s->layers)
        fill_random(e, e->la[0].x, (size_t)e->Nl * s->C, 1.0f, seed + 1);
    if (e->grad_in)
        fill_random(e, e->grad_in, (size_t)e->Nl * s->C, 1e-4f, seed + 2);
    uint64_t z = seed | 1;
    for (size_t i = 0; i < (size_t)e->nmb * s->N; i++) {
        z ^= z << 13, z ^= z >> 7, z ^= z << 17;
        int v = (int)(z % (uint64_t)(m->vocab < s->Vl ? m->vocab : s->Vl));
        e->tokens[i] = v;
        e->targets[i] = (v * 7 + 3) % (m->vocab < s->Vl ? m->vocab : s->Vl);
    }
    return 0;
}

double cuexec_peak_bytes(const CuExec *e)
{
    return e->dev_total && e->free_min ? (double)(e->dev_total - e->free_min) : 0;
}

static void destroy_events(cudaEvent_t *ev, int n)
{
    for (int i = 0; ev && i < n; i++)
        if (ev[i])
            cudaEventDestroy(ev[i]);
    free(ev);
}

void cuexec_free(CuExec *e)
{
    if (!e)
        return;
    if (e->st)
        cudaStreamSynchronize(e->st);
    for (int d = 0; d < 2; d++)
        if (e->sst[d]) {
            cudaStreamSynchronize(e->sst[d]);
            cudaStreamDestroy(e->sst[d]);
        }
    for (int k = 0; e->moe_acts && k < e->n_moe_acts; k++)
        cumoe_acts_free(&e->moe_acts[k]);
    free(e->moe_acts);
    if (e->E)
        cumoe_free(&e->moe);
    cucomm_free(e->cc);
    if (e->f8_scratch)   // the loan ends with the slab
        kc_fp8_use_scratch(NULL, 0);
    free(e->f8w);
    free(e->f8w_gen);
    for (int k = 0; k < XM_COUNT; k++)
        if (e->slab[k])
            cudaFree(e->slab[k]);
    cunet_tm_free(e);
    destroy_events(e->ring_ready, e->nring);
    destroy_events(e->ring_sent, e->nring);
    destroy_events(e->bk_ev, e->nbk);
    for (int k = 0; k < 3; k++) {
        if (e->zb_free[k])
            cudaEventDestroy(e->zb_free[k]);
        if (e->zg_ready[k])
            cudaEventDestroy(e->zg_ready[k]);
        if (e->zg_free[k])
            cudaEventDestroy(e->zg_free[k]);
    }
    for (int k = 0; k < 2; k++)
        if (e->cp_ev[k])
            cudaEventDestroy(e->cp_ev[k]);
    if (e->comm_done)
        cudaEventDestroy(e->comm_done);
    if (e->step0)
        cudaEventDestroy(e->step0);
    if (e->step1)
        cudaEventDestroy(e->step1);
    if (e->st)
        cudaStreamDestroy(e->st);
    free(e->rc);
    free(e->slot_base);
    free(e->slot_la);
    free(e->slot_dlast);
    free(e->slot_of);
    free(e->slot_free);
    free(e->ring_used);
    free(e->bk);
    free(e->un);
    free(e->wu);
    free(e->gu);
    free(e->tok_full);
    free(e->tgt_full);
    free(e->tokens);
    free(e->targets);
    free(e->h_losses);
    sched_free(&e->sch);
    params_free(&e->ps);
    if (e->have_data)
        data_free(&e->dl);
    if (e->have_dist)
        dist_free(&e->d);
    memset(e, 0, sizeof *e);
}
