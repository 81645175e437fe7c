/* exec.c — see exec.h. Setup, slabs, the schedule loop, DP/ZeRO-1 over the
 * dp·cp gradient group, the context-parallel token chunks, AdamW. */
#include "exec.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels.h"
#include "net.h"

void exec_default_opts(TrainOpts *o)
{
    o->lr = 1e-3f;
    o->beta1 = 0.9f;
    o->beta2 = 0.95f;
    o->eps = 1e-8f;
    o->weight_decay = 0.0f;
    o->seed = 1337;
}

#define FAIL(...) do { snprintf(err, errlen, __VA_ARGS__); return -1; } while (0)

static int check_shapes(const ModelSpec *m, const Layout *lo, char *err, int errlen)
{
    int tp = lo->tp, hs = spec_head_dim(m);
    int g = m->g > 0 ? m->g : m->a;
    if (lo->opt == OPT_ZERO2 || lo->opt == OPT_ZERO3)
        FAIL("the CPU executor runs ZeRO-0 and ZeRO-1 (distributed optimizer); the plan asks for %s",
             layout_opt_name(lo->opt));
    if (m->a % tp || g % tp)
        FAIL("tp %d must divide the query heads (%d) and the KV heads (%d)", tp, m->a, g);
    if (m->f % tp)
        FAIL("tp %d must divide the FFN width %d", tp, m->f);
    if (m->pos == POS_ROPE && hs % 2)
        FAIL("RoPE needs an even head size (got %d)", hs);
    if (lo->cp > 1 && m->s % (2 * lo->cp))
        FAIL("context parallel needs seq %d to be a multiple of 2*cp = %d", m->s, 2 * lo->cp);
    if (lo->sp && (lo->mbs * m->s / lo->cp) % tp)
        FAIL("sequence parallel needs tp %d to divide mbs*seq/cp = %d", tp, lo->mbs * m->s / lo->cp);
    if (lo->gbs % (lo->dp * lo->mbs))
        FAIL("global batch %d is not a multiple of dp %d x mbs %d", lo->gbs, lo->dp, lo->mbs);
    if (m->dropout)
        FAIL("the executor has no dropout, and the plan's model has \"dropout\": true; plan it with --no-dropout");
    return 0;
}

int exec_check_sizes(const ModelSpec *m, const Layout *lo, char *err, int errlen)
{
    /* in 64 bits, before anything is allocated: a hostile plan file must
     * not overflow the int products of the step (B*T, 2*m*vp) */
    long long mbs = lo->mbs, seq = m->s, gbs = lo->gbs, dp = lo->dp, vp = lo->vp, pp = lo->pp;
    if (mbs <= 0 || seq <= 0 || gbs <= 0 || dp <= 0 || vp <= 0 || pp <= 0)
        FAIL("plan: layout.mbs (%lld), model.seq (%lld), layout.gbs (%lld), layout.dp, layout.pp and layout.vp "
             "must be positive", mbs, seq, gbs);
    if (mbs * seq > EXEC_MAX_MB_TOKENS)
        FAIL("plan: layout.mbs x model.seq = %lld x %lld = %lld tokens per micro-batch; the executor takes at "
             "most %lld", mbs, seq, mbs * seq, (long long)EXEC_MAX_MB_TOKENS);
    long long nmb = gbs / (dp * mbs);
    if (nmb * vp > EXEC_MAX_MB_CHUNKS)
        FAIL("plan: layout.gbs %lld / (layout.dp %lld x layout.mbs %lld) = %lld micro-batches x layout.vp %lld "
             "chunks is more than the %lld a step can schedule", gbs, dp, mbs, nmb, vp,
             (long long)EXEC_MAX_MB_CHUNKS);
    if (nmb * mbs * seq > EXEC_MAX_STEP_TOKENS)
        FAIL("plan: layout.gbs / layout.dp x model.seq = %lld tokens per rank and step; the executor takes at "
             "most %lld", nmb * mbs * seq, (long long)EXEC_MAX_STEP_TOKENS);
    return 0;
}

/* Bump allocator over a slab: the first pass (base NULL) counts, the second carves. */
typedef struct {
    float *base;
    size_t n;
} Carver;

static float *take(Carver *c, size_t n)
{
    float *p = c->base ? c->base + c->n : NULL;
    c->n += n;
    return p;
}

static void carve_layer(Exec *e, Carver *c, LayerActs *A, int full_rc, int with_x)
{
    size_t N = e->N, Nl = e->Nl, C = e->C;
    memset(A, 0, sizeof *A);
    if (with_x)
        A->x = take(c, Nl * C);
    if (full_rc)
        return;
    A->a1 = take(c, Nl * C);
    A->mean1 = take(c, Nl);
    A->rstd1 = take(c, Nl);
    A->q = take(c, N * e->ql);
    A->k = take(c, N * e->kvl);
    A->v = take(c, N * e->kvl);
    A->o = take(c, N * e->ql);
    A->lse = take(c, N * e->NHl);
    A->x2 = take(c, Nl * C);
    A->a2 = take(c, Nl * C);
    A->mean2 = take(c, Nl);
    A->rstd2 = take(c, Nl);
    A->hpre = take(c, N * e->F1l);
    A->hact = take(c, N * e->Fl);
}

static int first_local(const Exec *e, int chunk)
{
    int i = 0;
    for (int c = 0; c < chunk; c++)
        i += e->sm.nchunk_layers[c];
    return i;
}

static int is_last_vstage(const Exec *e, int chunk) { return e->d.pp_rank == e->d.pp - 1 && chunk == e->lo.vp - 1; }
static int is_first_vstage(const Exec *e, int chunk) { return e->d.pp_rank == 0 && chunk == 0; }

/* Lay out acts and buffers; a second call with the slabs carves them. */
static void carve(Exec *e, float *acts, float *bufs)
{
    Carver a = {acts, 0}, b = {bufs, 0};
    size_t N = e->N, Nl = e->Nl, C = e->C;
    int last = e->d.pp_rank == e->d.pp - 1, any_full = 0;
    for (int i = 0; i < e->ps.nlayers; i++)
        any_full |= e->rc[i] == 2;
    for (int s = 0; s < e->nslots; s++) {
        /* every slot is as large as the largest chunk */
        size_t start = a.n, most = 0;
        for (int c = 0; c < e->lo.vp; c++) {
            a.n = start;
            int f = first_local(e, c);
            for (int j = 0; j < e->sm.nchunk_layers[c]; j++)
                carve_layer(e, &a, &e->slots[s].la[j], e->rc[f + j] == 2, 1);
            if (a.n - start > most)
                most = a.n - start;
        }
        a.n = start + most;
        e->slots[s].dlast = last ? take(&b, Nl * C) : NULL;
    }
    if (any_full)
        carve_layer(e, &a, &e->ws, 0, 0);
    if (last) {
        e->head_in = take(&a, Nl * C);
        e->head_n = take(&a, Nl * C);
        e->head_mean = take(&a, Nl);
        e->head_rstd = take(&a, Nl);
        e->logits = take(&a, N * e->Vl);
        e->ce_loss = take(&b, 2 * N);
        e->ce_lse = take(&b, N);
    }
    int sp = e->lo.sp, tp = e->d.tp > 1;
    e->gath = sp ? take(&b, N * C) : NULL;
    e->part = tp ? take(&b, N * C) : NULL;
    e->dgat = sp ? take(&b, N * C) : NULL;
    e->dres = take(&b, Nl * C);
    e->dcol = take(&b, N * C);
    e->dout = take(&b, Nl * C);
    e->dq = take(&b, N * e->ql);
    e->dk = take(&b, N * e->kvl);
    e->dv = take(&b, N * e->kvl);
    e->drope = e->m.pos == POS_ROPE ? take(&b, N * e->ql) : NULL;
    e->dhpre = take(&b, N * e->F1l);
    e->dhact = take(&b, N * (e->Fl > e->ql ? e->Fl : e->ql));
    e->rc_out = any_full ? take(&b, Nl * C) : NULL;
    e->send_ring = e->nsend ? take(&b, (size_t)e->nsend * Nl * C) : NULL;
    float *cpb = e->lo.cp > 1 ? take(&b, cpattn_buf_floats(&e->cpa)) : NULL;
    if (cpb)
        cpattn_set_buf(&e->cpa, cpb);
    e->acts_n = a.n;
    e->bufs_n = b.n;
}

/* Slot pointers of a chunk: the slot's layer tables follow each chunk's own
 * recompute pattern, so re-carve the slot for the chunk about to use it. */
static void slot_bind(Exec *e, int s, int chunk)
{
    Carver a = {e->slots[s].la[0].x, 0};
    int f = first_local(e, chunk);
    for (int j = 0; j < e->sm.nchunk_layers[chunk]; j++)
        carve_layer(e, &a, &e->slots[s].la[j], e->rc[f + j] == 2, 1);
}

int exec_init(Exec *e, const ModelSpec *m, const Layout *lo, const TrainOpts *o,
              const char *data, char *err, int errlen)
{
    memset(e, 0, sizeof *e);
    e->d.tp_comm = e->d.dp_comm = e->d.pp_comm = e->d.emb_comm = DIST_COMM_NULL;
    e->d.cp_comm = e->d.dpcp_comm = DIST_COMM_NULL;
    e->m = *m;
    e->lo = *lo;
    e->opt = *o;
    if (exec_check_sizes(m, lo, err, errlen) != 0 || check_shapes(m, lo, err, errlen) != 0)
        return -1;
    if (dist_init(&e->d, lo->tp, lo->cp, lo->dp, lo->pp, err, errlen) != 0)
        return -1;
    Dist *d = &e->d;
    if (lo->tp == 1)
        e->lo.sp = false;
    if (stagemap_init(&e->sm, m, lo, d->pp_rank, d->tp_rank, err, errlen) != 0)
        return -1;
    int tp = lo->tp, G = lo->dp * lo->cp, zero1 = lo->opt != OPT_ZERO0 && G > 1;   // G: the gradient group
    e->B = lo->mbs, e->T = m->s, e->Tl = m->s / lo->cp, e->N = e->B * e->Tl, e->C = m->h;
    e->Nl = e->lo.sp ? e->N / tp : e->N;
    e->HS = spec_head_dim(m);
    e->NHl = m->a / tp;
    e->NKVl = (m->g > 0 ? m->g : m->a) / tp;
    e->ql = e->NHl * e->HS, e->kvl = e->NKVl * e->HS;
    e->Fl = m->f / tp;
    e->F1l = m->mlp == MLP_SWIGLU ? 2 * e->Fl : e->Fl;
    e->Vl = (int)(spec_padded_vocab(m, tp) / tp);
    e->vstart = d->tp_rank * e->Vl;
    e->nmb = lo->gbs / (lo->dp * lo->mbs);

    /* the data first: a file too small for the plan's batch is refused
     * before the weights and activations are allocated */
    char derr[256];
    if (data_init(&e->dl, data, e->B, e->T, d->dp_rank, lo->dp, m->vocab, derr, sizeof derr) != 0)
        FAIL("%s", derr);

    params_layout(&e->ps, m, &e->sm, zero1 ? G : 1);
    e->ps.w = malloc(e->ps.n_alloc * sizeof(float));
    e->ps.g = calloc(e->ps.n_alloc, sizeof(float));
    e->opt_n = zero1 ? e->ps.n_alloc / G : e->ps.n_alloc;
    e->opt_off = zero1 ? (size_t)d->dpcp_rank * e->opt_n : 0;
    e->om = calloc(e->opt_n ? e->opt_n : 1, sizeof(float));
    e->ov = calloc(e->opt_n ? e->opt_n : 1, sizeof(float));
    if (!e->ps.w || !e->ps.g || !e->om || !e->ov)
        FAIL("out of memory for %zu parameters", e->ps.n_alloc);
    params_init(&e->ps, m, &e->sm, o->seed);

    if ((long)e->nmb * lo->pp * lo->vp * 2 > 32767)
        FAIL("too many micro-batches x virtual stages (%d x %d) for MPI tags", e->nmb, lo->pp * lo->vp);
    if (sched_build(&e->sch, lo->pp, d->pp_rank, e->nmb, lo->vp, err, errlen) != 0)
        return -1;
    e->nslots = e->sch.max_live;

    /* recompute: per chunk its share of the stage's full and selective layers, first layers first */
    e->rc = calloc(e->sm.nlayers ? e->sm.nlayers : 1, sizeof *e->rc);
    int s = d->pp_rank, i = 0;
    for (int c = 0; c < lo->vp; c++) {
        int full = lo->full_rc[s] / lo->vp + (c < lo->full_rc[s] % lo->vp);
        int sel = lo->sel_rc[s] / lo->vp + (c < lo->sel_rc[s] % lo->vp);
        for (int j = 0; j < e->sm.nchunk_layers[c]; j++, i++)
            e->rc[i] = j < full ? 2 : j < full + sel ? 1 : 0;
        if (e->sm.nchunk_layers[c] > e->maxchunk)
            e->maxchunk = e->sm.nchunk_layers[c];
    }
    e->slots = calloc(e->nslots, sizeof *e->slots);
    for (int k = 0; k < e->nslots; k++)
        e->slots[k].la = calloc(e->maxchunk ? e->maxchunk : 1, sizeof(LayerActs));
    e->slot_of = malloc((size_t)lo->vp * e->nmb * sizeof *e->slot_of);
    e->slot_free = malloc(e->nslots * sizeof *e->slot_free);
    if (lo->pp > 1) {
        int ring = 2 * lo->pp * lo->vp + 2;
        e->nsend = ring < 2 * e->nmb * lo->vp ? ring : 2 * e->nmb * lo->vp;
        e->send_req = malloc(e->nsend * sizeof *e->send_req);
        for (int k = 0; k < e->nsend; k++)
            e->send_req[k] = DIST_REQ_NULL;
    }
    if (lo->cp > 1) {   /* run.json has no CP phase: the ring's exposed waits count as TP communication */
        if (cpattn_init(&e->cpa, d->cp_comm, lo->cp, d->cp_rank, e->B, e->T, e->NHl, e->NKVl, e->HS,
                        &e->t[PH_TP]) != 0)
            FAIL("out of memory for the context-parallel ring");
        e->cpos = cpattn_local_pos(&e->cpa);
        e->rowtok = malloc(2 * (size_t)e->B * e->T * sizeof *e->rowtok);
        if (!e->rowtok)
            FAIL("out of memory for %d token rows", e->B);
    }
    carve(e, NULL, NULL);
    e->acts = calloc(e->acts_n ? e->acts_n : 1, sizeof(float));
    e->bufs = calloc(e->bufs_n ? e->bufs_n : 1, sizeof(float));
    e->tokens = malloc((size_t)e->nmb * e->N * sizeof *e->tokens);
    e->targets = malloc((size_t)e->nmb * e->N * sizeof *e->targets);
    if (!e->acts || !e->bufs || !e->tokens || !e->targets)
        FAIL("out of memory for activations (%zu floats) and buffers (%zu floats)", e->acts_n, e->bufs_n);
    carve(e, e->acts, e->bufs);

    e->lay_start = calloc(e->ps.nlayers + 1, sizeof *e->lay_start);
    e->lay_n = calloc(e->ps.nlayers + 1, sizeof *e->lay_n);
    for (int l = 0; l < e->ps.nlayers; l++) {
        e->lay_start[l] = e->ps.layer_off[l][P_LN1W];
        for (int id = 0; id < P_LAYER_COUNT; id++)
            if (e->ps.layer_off[l][id] != PARAM_NONE)
                e->lay_n[l] += e->ps.layer_len[l][id];
    }
    e->dp_req = malloc((e->ps.nlayers + 1) * sizeof *e->dp_req);

    e->mem[XM_WEIGHTS] = e->ps.n_alloc * 4.0;
    e->mem[XM_GRADS] = e->ps.n_alloc * 4.0;
    e->mem[XM_OPTIM] = 2.0 * e->opt_n * 4.0;
    e->mem[XM_ACTS] = e->acts_n * 4.0;
    e->mem[XM_BUFFERS] = e->bufs_n * 4.0 + 2.0 * e->nmb * e->N * sizeof(int)
                       + (e->rowtok ? 2.0 * e->B * e->T * sizeof(int) : 0.0);

    return 0;
}

void exec_memory(const Exec *e, double out[XM_COUNT])
{
    memcpy(out, e->mem, sizeof e->mem);
}

/* ---- the step --------------------------------------------------------- */

static int tag_of(const Exec *e, int mb, int vstage, int dir)
{
    return (mb * e->lo.pp * e->lo.vp + vstage) * 2 + dir;
}

static void pp_recv(Exec *e, float *buf, int vstage_from, int mb, int vstage_to, int dir)
{
    double t0 = dist_now();
    int src = vstage_from % e->lo.pp;
    dist_recv(buf, e->Nl * e->C, src, tag_of(e, mb, vstage_to, dir), e->d.pp_comm);
    e->t[PH_PP] += dist_now() - t0;
}

/* A free send buffer from the ring (waiting for its last send if needed). */
static float *send_buf(Exec *e, int *slot)
{
    int k = e->send_next;
    e->send_next = (k + 1) % e->nsend;
    if (e->send_req[k] != DIST_REQ_NULL) {
        double t0 = dist_now();
        dist_wait(&e->send_req[k], e->d.pp_comm);
        e->t[PH_PP] += dist_now() - t0;
    }
    *slot = k;
    return e->send_ring + (size_t)k * e->Nl * e->C;
}

static void pp_send(Exec *e, int k, int vstage_to, int mb, int dir)
{
    int dst = vstage_to % e->lo.pp;
    float *buf = e->send_ring + (size_t)k * e->Nl * e->C;
    dist_isend(buf, e->Nl * e->C, dst, tag_of(e, mb, vstage_to, dir), e->d.pp_comm, &e->send_req[k]);
}

/* The group gradients are reduced over and ZeRO shards over: the dp·cp ranks
 * of e->d.dpcp_comm (CP ranks hold the same weights and partial gradients). */
static int grad_group(const Exec *e) { return e->d.dp * e->d.cp; }

/* Under SP every TP rank holds part of the gradient of a replicated tensor. */
static void sp_sync(Exec *e, float *g, size_t n)
{
    if (e->lo.sp && g)
        dist_allreduce(g, (int)n, e->d.tp_comm, &e->t[PH_TP]);
}

static void layer_done(Exec *e, int li)
{
    if (e->lo.sp)
        for (int id = 0; id < P_LAYER_COUNT; id++)
            if (param_desc[id].split == SPLIT_REP && e->ps.layer_off[li][id] != PARAM_NONE)
                sp_sync(e, e->ps.g + e->ps.layer_off[li][id], e->ps.layer_len[li][id]);
    if (grad_group(e) > 1 && e->lo.opt == OPT_ZERO0 && e->lo.overlap_grad) {
        double t0 = dist_now();
        dist_iallreduce(e->ps.g + e->lay_start[li], (int)e->lay_n[li], e->d.dpcp_comm, &e->dp_req[e->ndp_req++]);
        e->t[PH_DP] += dist_now() - t0;
    }
}

static void run_forward(Exec *e, int mb, int c)
{
    int vs = c * e->lo.pp + e->d.pp_rank, slot = e->slot_free[--e->nslots];
    e->slot_of[c * e->nmb + mb] = slot;
    slot_bind(e, slot, c);
    LayerActs *la = e->slots[slot].la;
    double t0 = dist_now(), c0 = e->t[PH_TP] + e->t[PH_PP] + e->t[PH_BWD];
    if (is_first_vstage(e, c))
        net_embed_fwd(e, e->tokens + (size_t)mb * e->N, la[0].x);
    else
        pp_recv(e, la[0].x, vs - 1, mb, vs, 0);
    int f = first_local(e, c), n = e->sm.nchunk_layers[c], k = -1;
    float *out = NULL;
    if (!is_last_vstage(e, c))
        out = send_buf(e, &k);
    for (int j = 0; j < n; j++) {
        float *dst = j + 1 < n ? la[j + 1].x : is_last_vstage(e, c) ? e->head_in : out;
        if (e->rc[f + j] == 2) {
            e->ws.x = la[j].x;
            net_layer_fwd(e, f + j, &e->ws, dst);
        } else {
            net_layer_fwd(e, f + j, &la[j], dst);
        }
    }
    if (is_last_vstage(e, c)) {
        float scale = 1.0f / ((float)e->N * e->lo.cp * e->nmb * e->lo.dp);   // every token of the batch
        double l = net_head(e, e->targets + (size_t)mb * e->N, scale, e->slots[slot].dlast);
        if (e->d.tp_rank == 0)
            e->loss_sum += l;
    } else {
        pp_send(e, k, vs + 1, mb, 0);
    }
    e->t[PH_FWD] += dist_now() - t0 - (e->t[PH_TP] + e->t[PH_PP] + e->t[PH_BWD] - c0);
}

static void run_backward(Exec *e, int mb, int c)
{
    int vs = c * e->lo.pp + e->d.pp_rank, slot = e->slot_of[c * e->nmb + mb];
    slot_bind(e, slot, c);
    LayerActs *la = e->slots[slot].la;
    double t0 = dist_now(), c0 = e->t[PH_TP] + e->t[PH_PP] + e->t[PH_RECOMPUTE] + e->t[PH_DP];
    size_t nl = (size_t)e->Nl * e->C;
    if (is_last_vstage(e, c))
        memcpy(e->dres, e->slots[slot].dlast, nl * sizeof(float));
    else
        pp_recv(e, e->dres, vs + 1, mb, vs, 1);
    int f = first_local(e, c), n = e->sm.nchunk_layers[c];
    for (int j = n - 1; j >= 0; j--) {
        LayerActs *A = &la[j];
        if (e->rc[f + j] == 2) {
            double r0 = dist_now(), tp0 = e->t[PH_TP];
            e->ws.x = la[j].x;
            net_layer_fwd(e, f + j, &e->ws, e->rc_out);
            e->t[PH_RECOMPUTE] += dist_now() - r0 - (e->t[PH_TP] - tp0);
            A = &e->ws;
        }
        net_layer_bwd(e, f + j, A);
        if (mb == e->nmb - 1)
            layer_done(e, f + j);
    }
    if (is_first_vstage(e, c)) {
        net_embed_bwd(e, e->tokens + (size_t)mb * e->N);
    } else {
        int k;
        float *buf = send_buf(e, &k);
        memcpy(buf, e->dres, nl * sizeof(float));
        pp_send(e, k, vs - 1, mb, 1);
    }
    e->slot_free[e->nslots++] = slot;
    e->t[PH_BWD] += dist_now() - t0 - (e->t[PH_TP] + e->t[PH_PP] + e->t[PH_RECOMPUTE] + e->t[PH_DP] - c0);
}

/* After the last backward: the stage-level tensors' syncs, then wait for every DP bucket. */
static void finish_grads(Exec *e)
{
    ParamSet *ps = &e->ps;
    sp_sync(e, params_stage(ps, ps->g, P_LNFW), ps->len[P_LNFW]);
    sp_sync(e, params_stage(ps, ps->g, P_LNFB), ps->len[P_LNFB]);
    double t0 = dist_now();
    if (e->m.tied && e->lo.pp > 1 && e->d.emb_comm != DIST_COMM_NULL) {
        ParamId id = e->d.pp_rank == 0 ? P_WTE : P_HEAD;
        dist_allreduce(params_stage(ps, ps->g, id), (int)ps->len[id], e->d.emb_comm, NULL);
    }
    if (grad_group(e) > 1 && e->lo.opt == OPT_ZERO0 && !e->lo.overlap_grad)   // every layer's bucket, now
        for (int li = 0; li < ps->nlayers; li++)
            dist_iallreduce(ps->g + e->lay_start[li], (int)e->lay_n[li], e->d.dpcp_comm, &e->dp_req[e->ndp_req++]);
    if (grad_group(e) > 1 && e->lo.opt == OPT_ZERO0 && ps->n > ps->layers_end)
        dist_iallreduce(ps->g + ps->layers_end, (int)(ps->n - ps->layers_end), e->d.dpcp_comm,
                        &e->dp_req[e->ndp_req++]);
    dist_waitall(e->dp_req, e->ndp_req, e->d.dpcp_comm);
    e->ndp_req = 0;
    e->t[PH_DP] += dist_now() - t0;
}

static void optimizer_step(Exec *e)
{
    TrainOpts *o = &e->opt;
    ParamSet *ps = &e->ps;
    int t = e->step + 1;
    if (e->lo.opt != OPT_ZERO0 && grad_group(e) > 1) {
        dist_reduce_scatter(ps->g, ps->g, (int)e->opt_n, e->d.dpcp_comm, &e->t[PH_DP]);   // in place
        double t0 = dist_now();
        k_adamw(ps->w + e->opt_off, ps->g, e->om, e->ov, e->opt_n, o->lr, o->beta1, o->beta2, o->eps,
                o->weight_decay, t);
        e->t[PH_OPTIM] += dist_now() - t0;
        dist_allgather_inplace(ps->w, (int)e->opt_n, e->d.dpcp_comm, &e->t[PH_DP]);
        return;
    }
    double t0 = dist_now();
    k_adamw(ps->w, ps->g, e->om, e->ov, ps->n, o->lr, o->beta1, o->beta2, o->eps, o->weight_decay, t);
    e->t[PH_OPTIM] += dist_now() - t0;
}

/* Context parallel: the dp rank's whole rows, then this rank's two chunks of
 * each row (its tokens and their targets). */
static int cp_next_batch(Exec *e, int *tokens, int *targets, char *derr, size_t n)
{
    size_t bt = (size_t)e->B * e->T;
    if (data_next_batch(&e->dl, e->rowtok, e->rowtok + bt, derr, n) != 0)
        return -1;
    for (int b = 0; b < e->B; b++)
        for (int t = 0; t < e->Tl; t++) {
            size_t from = (size_t)b * e->T + e->cpos[t], to = (size_t)b * e->Tl + t;
            tokens[to] = e->rowtok[from];
            targets[to] = e->rowtok[bt + from];
        }
    return 0;
}

int exec_step(Exec *e, StepStats *st, char *err, int errlen)
{
    memset(e->t, 0, sizeof e->t);
    e->loss_sum = 0;
    /* A data error on one rank (a token outside the vocabulary, a file cut
     * short) must not leave it alone in a collective: every rank reaches
     * this agreement, which is also the step's barrier, and every rank
     * returns the first failing rank's message. */
    char derr[256] = "", msg[300] = "";
    int bad = 0;
    for (int k = 0; k < e->nmb && !bad; k++)
        if (e->cpos)
            bad = cp_next_batch(e, e->tokens + (size_t)k * e->N, e->targets + (size_t)k * e->N, derr,
                                sizeof derr) != 0;
        else
            bad = data_next_batch(&e->dl, e->tokens + (size_t)k * e->N, e->targets + (size_t)k * e->N, derr,
                                  sizeof derr) != 0;
    dist_watch_step(e->step + 1);
    if (bad)
        snprintf(msg, sizeof msg, "rank %d: %.250s", e->d.rank, derr);
    if (dist_world_agree(bad ? -1 : 0, msg, sizeof msg) != 0)
        FAIL("step %d: %s", e->step + 1, msg);
    double t0 = dist_now();
    k_zero(e->ps.g, e->ps.n_alloc);
    int ns = e->nslots;
    for (int k = 0; k < ns; k++)
        e->slot_free[k] = k;
    for (int i = 0; i < e->sch.n; i++) {
        Action a = e->sch.a[i];
        if (a.kind == ACT_FWD)
            run_forward(e, a.mb, a.chunk);
        else
            run_backward(e, a.mb, a.chunk);
    }
    e->nslots = ns;
    if (e->nsend) {
        double w0 = dist_now();
        dist_waitall(e->send_req, e->nsend, e->d.pp_comm);
        e->t[PH_PP] += dist_now() - w0;
    }
    finish_grads(e);
    optimizer_step(e);
    e->step++;
    double sum = dist_world_sum(e->loss_sum);
    if (!isfinite(sum)) {
        /* every rank holds the same sum, so all take this branch; name the first bad rank */
        int first = dist_world_min(isfinite(e->loss_sum) ? INT_MAX : e->d.rank);
        if (first == INT_MAX)
            FAIL("step %d: loss is %s (summed over ranks); stopping", e->step, isnan(sum) ? "NaN" : "Inf");
        FAIL("step %d: loss is %s (rank %d); stopping", e->step, isnan(sum) ? "NaN" : "Inf", first);
    }
    st->step_s = dist_now() - t0;
    st->loss = sum / ((double)e->lo.gbs * e->T);
    memcpy(st->t, e->t, sizeof e->t);
    return 0;
}

void exec_free(Exec *e)
{
    if (!e)
        return;
    if (e->slots)
        for (int k = 0; k < e->nslots; k++)
            free(e->slots[k].la);
    free(e->slots);
    free(e->slot_of);
    free(e->slot_free);
    free(e->rc);
    free(e->ps.w);
    free(e->ps.g);
    params_free(&e->ps);
    free(e->om);
    free(e->ov);
    free(e->acts);
    free(e->bufs);
    free(e->tokens);
    free(e->targets);
    free(e->rowtok);
    cpattn_free(&e->cpa);
    free(e->send_req);
    free(e->lay_start);
    free(e->lay_n);
    free(e->dp_req);
    sched_free(&e->sch);
    data_free(&e->dl);
    dist_free(&e->d);
    memset(e, 0, sizeof *e);
}
