/* exec.c — see exec.h. Setup, slabs, the schedule loop, DP and ZeRO-1/2/3
 * (per-unit buckets, reduce-scatters and gathers) over the dp·cp gradient
 * group, the context-parallel token chunks, AdamW. */
#include "exec.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels.h"
#include "moe.h"
#include "net.h"
#include "refuse.h"

void exec_default_opts(TrainOpts *o)
{
    o->lr = 1e-3f;
    o->beta1 = 0.9f;
    o->beta2 = 0.95f;
    o->eps = 1e-8f;
    o->weight_decay = 0.0f;
    o->seed = 1337;
    o->moe_aux_coeff = 1e-2;
    o->moe_imbalance = 0;   // the plan's (layout_moe_imbalance)
    o->mtp_scale = 0.1;     // Megatron-LM's --mtp-loss-scaling-factor default
}

#define FAIL(...) do { snprintf(err, errlen, __VA_ARGS__); return -1; } while (0)

/* The gradient group: the dp·cp ranks that hold the same weights (context
 * parallel ranks hold partial gradients of them too); all reduction and
 * ZeRO sharding goes through these three. */
static MPI_Comm grad_comm(const Exec *e) { return e->d.dpcp_comm; }
static int grad_size(const Exec *e) { return e->d.dp * e->d.cp; }
static int grad_rank(const Exec *e) { return e->d.dpcp_rank; }

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

int exec_layer_moe(const Exec *e, int li)
{
    return e->E > 0 && li >= 0 && spec_layer_is_moe(&e->m, e->ps.glayer[li]);
}

/* FC1 output and activation widths of local layer li (an MoE layer: its
 * shared expert's); li -1: the widest (the recompute working set). */
static void mlp_widths(const Exec *e, int li, size_t *f1, size_t *f)
{
    if (li >= 0) {
        int moe = exec_layer_moe(e, li);
        *f1 = moe ? e->F1s : e->F1l, *f = moe ? e->Fs : e->Fl;
        return;
    }
    *f1 = e->F1l > e->F1s ? e->F1l : e->F1s;
    *f = e->Fl > e->Fs ? e->Fl : e->Fs;
}

/* li: the local layer the tensors are for, -1 for the recompute working set
 * (the widest MLP, and the MoE tensors when the stage has MoE layers). */
static void carve_layer(Exec *e, Carver *c, LayerActs *A, int li, int full_rc, int with_x)
{
    size_t N = e->N, Nl = e->Nl, C = e->C, f1, f;
    mlp_widths(e, li, &f1, &f);
    int moe = li >= 0 ? exec_layer_moe(e, li) : e->E > 0;
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
    if (e->mla) {
        A->cq = take(c, Nl * e->qr);
        A->ckv = take(c, Nl * (e->kr + e->rope));
        A->rq = take(c, Nl);
        A->rkv = take(c, Nl);
        A->cqn = take(c, N * e->qr);
        A->ckvn = take(c, N * e->kr);
    }
    A->x2 = take(c, Nl * C);
    A->a2 = take(c, Nl * C);
    A->mean2 = take(c, Nl);
    A->rstd2 = take(c, Nl);
    A->hpre = take(c, N * f1);
    A->hact = take(c, N * f);
    if (moe) {
        A->probs = take(c, Nl * e->E);
        A->tki = take(c, Nl * e->K);
        A->tkw = take(c, Nl * e->K);
        A->ye = take(c, Nl * e->K * C);
    }
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
                carve_layer(e, &a, &e->slots[s].la[j], f + j, e->rc[f + j] == 2, 1);
            if (a.n - start > most)
                most = a.n - start;
        }
        a.n = start + most;
        e->slots[s].dlast = last ? take(&b, Nl * C) : NULL;
    }
    if (any_full)
        carve_layer(e, &a, &e->ws, -1, 0, 0);
    for (int k = 0; k < e->nmtp; k++) {
        MtpActs *M = &e->mtp[k];
        carve_layer(e, &a, &M->la, e->sm.nlayers + k, 0, 1);
        M->emb = take(&a, Nl * C);
        M->rse = take(&a, Nl);
        M->rsh = take(&a, Nl);
        M->cat = take(&a, N * 2 * C);
        M->out = take(&a, Nl * C);
        M->dh = take(&b, Nl * C);
    }
    if (e->nmtp) {
        e->mtmp = take(&b, Nl * C);
        e->memb = take(&b, Nl * C);
        e->mcatl = take(&b, Nl * 2 * C);
        e->mpart = take(&b, N * C / e->d.tp);
        e->mgat = take(&b, N * C);
        e->mdcat = take(&b, N * 2 * C);
    }
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
    if (e->mla) {
        size_t H = e->NHl;
        e->mpack = take(&b, Nl * e->mD);
        e->mlat = take(&b, N * e->mD);
        e->mkv = take(&b, N * H * (e->nope + e->vd));
        e->mkpe = take(&b, N * e->rope);
        e->mqr = take(&b, N * H * e->rope);
        e->mo = take(&b, N * H * e->vd);
        e->mdq = take(&b, N * e->qr);
        e->mdkv = take(&b, N * (e->kr + e->rope));
    }
    size_t f1, f;
    mlp_widths(e, -1, &f1, &f);
    e->dhpre = take(&b, N * f1);
    e->dhact = take(&b, N * (f > (size_t)e->ql ? f : (size_t)e->ql));
    e->rc_out = any_full ? take(&b, Nl * C) : NULL;
    e->send_ring = e->nsend ? take(&b, (size_t)e->nsend * Nl * C) : NULL;
    float *cpb = e->lo.cp > 1 ? take(&b, cpattn_buf_floats(&e->cpa)) : NULL;
    if (cpb)
        cpattn_set_buf(&e->cpa, cpb);
    if (e->zero >= 2) {
        /* two layer buckets (one reduced while the next fills), the stage
         * unit's; ZeRO-3 as many gather buffers: a layer computing, the next
         * one gathered, the stage unit */
        int S = e->ps.nlayers;
        size_t D = grad_size(e), X = e->d.edp, most = 0, xmost = 0;
        for (int u = 0; u < S; u++) {
            most = e->unit[u].slice * D > most ? e->unit[u].slice * D : most;
            xmost = e->unit[u].x_slice * X > xmost ? e->unit[u].x_slice * X : xmost;
        }
        e->zx = most;      // a layer's experts after its dense part
        most += xmost;
        for (int k = 0; k < 2; k++)
            e->zb[k] = take(&b, most);
        e->zbs = take(&b, e->unit[S].slice * D);
        if (e->zero == 3) {
            for (int k = 0; k < 2; k++)
                e->zg[k] = take(&b, most);
            e->zgs = take(&b, e->unit[S].slice * D);
        }
    }
    e->acts_n = a.n;
    e->bufs_n = b.n;
}

/* Slot pointers of a chunk: the slot's layer tables follow each chunk's own
 * recompute pattern, so re-carve the slot for the chunk about to use it. */
/* Units: each local layer, then the stage unit (the non-layer tensors,
 * ps.layers_end .. ps.n). Under ZeRO-2/3 each unit is padded to a multiple
 * of the group size D; this rank's slice of it is floats
 * [rank·slice, (rank+1)·slice) of the padded unit, at soff in the shard. */
static int units_init(Exec *e)
{
    ParamSet *ps = &e->ps;
    int U = e->nunits = ps->nlayers + 1;
    e->unit = calloc(U, sizeof *e->unit);
    if (!e->unit)
        return -1;
    for (int l = 0; l < ps->nlayers; l++) {
        e->unit[l].start = ps->layer_off[l][P_LN1W];
        for (int id = 0; id < P_LAYER_COUNT; id++)   // the routed experts are not in the unit
            if (ps->layer_off[l][id] != PARAM_NONE && !param_is_expert(id))
                e->unit[l].n += ps->layer_len[l][id];
        if (ps->layer_off[l][P_EFC1W] != PARAM_NONE) {   // efc1 then efc2, contiguous (params.c)
            e->unit[l].x_start = ps->layer_off[l][P_EFC1W];
            e->unit[l].x_len = ps->layer_len[l][P_EFC1W] + ps->layer_len[l][P_EFC2W];
        }
    }
    e->unit[U - 1].start = ps->layers_end;
    e->unit[U - 1].n = ps->n - ps->layers_end;
    size_t D = grad_size(e), off = 0;
    for (int u = 0; u < U; u++) {
        e->unit[u].slice = (e->unit[u].n + D - 1) / D;
        e->unit[u].soff = off;
        off += e->unit[u].slice;
    }
    size_t X = e->d.edp;   // then the experts' slices over edp
    for (int u = 0; u < U; u++) {
        e->unit[u].x_slice = (e->unit[u].x_len + X - 1) / X;
        e->unit[u].x_soff = off;
        off += e->unit[u].x_slice;
    }
    if (e->zero >= 2)
        e->opt_n = off;
    for (int k = 0; k < 2; k++) {
        e->zg_unit[k] = e->zb_unit[k] = -1;
        e->zg_req[k] = e->zb_req[k] = e->zgx_req[k] = e->zbx_req[k] = DIST_REQ_NULL;
    }
    e->zgs_req = e->zbs_req = DIST_REQ_NULL;
    return 0;
}

/* This rank's slice of unit u within the unit: first float and how many are real (not padding). */
static size_t slice_first(const Exec *e, int u) { return (size_t)grad_rank(e) * e->unit[u].slice; }
static size_t slice_real(const Exec *e, int u)
{
    size_t a = slice_first(e, u);
    return e->unit[u].n > a ? (e->unit[u].n - a < e->unit[u].slice ? e->unit[u].n - a : e->unit[u].slice) : 0;
}

/* The same for unit u's routed experts, sliced over edp. */
static size_t xslice_first(const Exec *e, int u) { return (size_t)e->d.edp_rank * e->unit[u].x_slice; }
static size_t xslice_real(const Exec *e, int u)
{
    size_t a = xslice_first(e, u);
    return e->unit[u].x_len > a ? (e->unit[u].x_len - a < e->unit[u].x_slice ? e->unit[u].x_len - a : e->unit[u].x_slice) : 0;
}

/* held: where unit u's weights or gradients are now (ExecUnit w, g, xw, xg) */
static float *unit_ptr(float *held, int u, size_t off, size_t start)
{
    if (!held) {
        fprintf(stderr, "executor: unit %d used while its weights or gradients are not held (a ZeRO bug)\n", u);
        abort();
    }
    return held + (off - start);
}

float *exec_lw(const Exec *e, int li, ParamId id)
{
    size_t o = e->ps.layer_off[li][id];
    return o == PARAM_NONE ? NULL
         : param_is_expert(id) ? unit_ptr(e->unit[li].xw, li, o, e->unit[li].x_start) : unit_ptr(e->unit[li].w, li, o, e->unit[li].start);
}

float *exec_lg(const Exec *e, int li, ParamId id)
{
    size_t o = e->ps.layer_off[li][id];
    return o == PARAM_NONE ? NULL
         : param_is_expert(id) ? unit_ptr(e->unit[li].xg, li, o, e->unit[li].x_start) : unit_ptr(e->unit[li].g, li, o, e->unit[li].start);
}

float *exec_sw(const Exec *e, ParamId id)
{
    size_t o = e->ps.off[id];
    return o == PARAM_NONE ? NULL : unit_ptr(e->unit[e->nunits - 1].w, e->nunits - 1, o, e->ps.layers_end);
}

float *exec_sg(const Exec *e, ParamId id)
{
    size_t o = e->ps.off[id];
    return o == PARAM_NONE ? NULL : unit_ptr(e->unit[e->nunits - 1].g, e->nunits - 1, o, e->ps.layers_end);
}

static void slot_bind(Exec *e, int s, int chunk)
{
    Carver a = {e->slots[s].la[0].x, 0};
    int f = first_local(e, chunk);
    for (int j = 0; j < e->sm.nchunk_layers[chunk]; j++) {
        carve_layer(e, &a, &e->slots[s].la[j], f + j, e->rc[f + j] == 2, 1);
        e->slots[s].la[j].mb = e->moeb ? e->moeb[s * e->maxchunk + j] : NULL;
    }
}

int exec_init(Exec *e, const ModelSpec *m, const Layout *lo, const TrainOpts *o,
              const char *data, char *err, int errlen)
{
    memset(e, 0, sizeof *e);
    e->d.tp_comm = e->d.dp_comm = e->d.pp_comm = e->d.emb_comm = DIST_COMM_NULL;
    e->d.cp_comm = e->d.dpcp_comm = DIST_COMM_NULL;
    e->d.ep_comm = e->d.etp_comm = e->d.edp_comm = e->d.tpcp_comm = DIST_COMM_NULL;
    e->m = *m;
    e->lo = *lo;
    e->opt = *o;
    if (refuse_overflow(m, lo, err, errlen) != 0 || refuse_cpu(m, lo, err, errlen) != 0)
        return -1;
    if (dist_init(&e->d, lo->tp, lo->cp, lo->dp, lo->pp, err, errlen) != 0)
        return -1;
    Dist *d = &e->d;
    if (lo->tp == 1)
        e->lo.sp = false;
    if (dist_init_experts(d, lo->ep > 0 ? lo->ep : 1, layout_etp(lo), err, errlen) != 0)
        return -1;
    if (stagemap_init(&e->sm, m, lo, d->pp_rank, d->tp_rank, err, errlen) != 0)
        return -1;
    e->sm.ep_rank = d->ep_rank, e->sm.etp_rank = d->etp_rank;
    int tp = lo->tp, D = grad_size(e);
    /* a group of one shards nothing: ZeRO-0; but ZeRO-2/3 still shard the
     * routed experts over an edp of more than one (memory.c counts them so) */
    int z = lo->opt == OPT_ZERO0 ? 0 : lo->opt == OPT_ZERO2 ? 2 : lo->opt == OPT_ZERO3 ? 3 : 1;
    e->zero = D > 1 || (z >= 2 && spec_is_moe(m) && d->edp > 1) ? z : 0;
    e->B = lo->mbs, e->T = m->s, e->Tl = m->s / lo->cp, e->N = e->B * e->Tl, e->C = m->h;
    e->Nl = e->lo.sp ? e->N / tp : e->N;
    e->HS = spec_head_dim(m);
    e->NHl = m->a / tp;
    e->NKVl = (m->g > 0 ? m->g : m->a) / tp;
    e->ql = e->NHl * e->HS, e->kvl = e->NKVl * e->HS;
    if (m->attn == ATTN_MLA) {
        e->mla = 1, e->nope = m->qk_nope_dim, e->rope = m->qk_rope_dim, e->vd = m->v_head_dim;
        e->qr = m->q_lora_rank, e->kr = m->kv_lora_rank, e->mD = e->qr + e->kr + e->rope;
    }
    e->Fl = m->f / tp;
    e->F1l = m->mlp == MLP_SWIGLU ? 2 * e->Fl : e->Fl;
    e->Vl = (int)(spec_padded_vocab(m, tp) / tp);
    e->vstart = d->tp_rank * e->Vl;
    e->nmb = lo->gbs / (lo->dp * lo->mbs);
    if (spec_is_moe(m)) {
        int fe = m->moe_ffn > 0 ? m->moe_ffn : m->f;
        e->E = m->experts, e->El = m->experts / d->ep, e->K = m->topk;
        e->Fe = fe / d->etp, e->F1e = m->mlp == MLP_SWIGLU ? 2 * e->Fe : e->Fe;
        e->Fs = m->shared_ffn / tp, e->F1s = m->mlp == MLP_SWIGLU ? 2 * e->Fs : e->Fs;
        /* ZeRO-1 / dist-opt shard the expert moments over edp whenever it is > 1 */
        e->xzero = d->edp > 1 && (lo->opt == OPT_ZERO1 || lo->opt == OPT_DISTOPT);
    }

    /* the data first: a file too small for the plan's batch is refused
     * before the weights and activations are allocated */
    char derr[256];
    if (data_init(&e->dl, data, e->B, e->T, d->dp_rank, lo->dp, m->vocab, derr, sizeof derr) != 0)
        FAIL("%s", derr);

    /* ZeRO-1 shards the flat slab (padded to a multiple of D); ZeRO-2/3 per
     * unit; the routed experts' region over edp */
    e->sm.expert_pad = e->xzero ? d->edp : 1;
    params_layout(&e->ps, m, &e->sm, e->zero == 1 ? D : 1);
    e->opt_nd = e->zero == 1 ? e->ps.dense_alloc / D : e->ps.dense_alloc;
    e->opt_off = e->zero == 1 ? (size_t)grad_rank(e) * e->opt_nd : 0;
    e->xopt_n = e->xzero ? e->ps.x_alloc / d->edp : e->ps.x_alloc;
    e->xopt_off = e->ps.x_off + (e->xzero ? (size_t)d->edp_rank * e->xopt_n : 0);
    e->opt_n = e->opt_nd + e->xopt_n;
    if (units_init(e) != 0)
        FAIL("out of memory for the parameter tables");
    /* ZeRO-3 fills the full weights once, keeps its slices and frees them */
    e->ps.w = malloc((e->ps.n_alloc ? e->ps.n_alloc : 1) * sizeof(float));
    if (e->zero <= 1)
        e->ps.g = calloc(e->ps.n_alloc ? e->ps.n_alloc : 1, sizeof(float));
    else
        e->gsh = calloc(e->opt_n ? e->opt_n : 1, sizeof(float));
    if (e->zero == 3)
        e->wsh = calloc(e->opt_n ? e->opt_n : 1, sizeof(float));
    e->om = calloc(e->opt_n ? e->opt_n : 1, sizeof(float));
    e->ov = calloc(e->opt_n ? e->opt_n : 1, sizeof(float));
    if (!e->ps.w || (e->zero <= 1 ? !e->ps.g : !e->gsh) || (e->zero == 3 && !e->wsh) || !e->om || !e->ov)
        FAIL("out of memory for %zu parameters", e->ps.n_alloc);
    params_init(&e->ps, m, &e->sm, o->seed);
    for (int u = 0; u < e->nunits; u++) {
        e->unit[u].w = e->zero == 3 ? NULL : e->ps.w + e->unit[u].start;
        e->unit[u].g = e->zero >= 2 ? NULL : e->ps.g + e->unit[u].start;
        e->unit[u].xw = e->zero == 3 || !e->unit[u].x_len ? NULL : e->ps.w + e->unit[u].x_start;
        e->unit[u].xg = e->zero >= 2 || !e->unit[u].x_len ? NULL : e->ps.g + e->unit[u].x_start;
    }
    if (e->zero == 3) {
        exec_scatter_weights(e, e->ps.w);
        free(e->ps.w);
        e->ps.w = NULL;
    }

    if ((long)e->nmb * lo->pp * lo->vp * 2 > 32767)
        FAIL("too many micro-batches x virtual stages (%d x %d) for MPI tags", e->nmb, lo->pp * lo->vp);
    if (sched_build(&e->sch, lo->pp, d->pp_rank, e->nmb, lo->vp, err, errlen) != 0)
        return -1;
    e->nslots = e->sch.max_live;

    /* recompute: per chunk its share of the stage's full and selective layers, first layers first */
    e->rc = calloc(e->ps.nlayers ? e->ps.nlayers : 1, sizeof *e->rc);   // MTP layers: 0
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
    if (e->E > 0) {
        if (moe_init(e, err, errlen) != 0)
            return -1;
        /* expert buffers: slot layer j when some chunk's j-th layer is MoE and
         * keeps its activations; the recompute set's when a full one is MoE */
        int nb = e->nslots * (e->maxchunk ? e->maxchunk : 1) + 1;
        e->nmoeb = nb + e->sm.nmtp;   // then one per MTP module
        e->moeb = calloc(e->nmoeb, sizeof *e->moeb);
        if (!e->moeb)
            FAIL("out of memory for the expert buffers");
        for (int c = 0; c < lo->vp; c++)
            for (int j = 0, f = first_local(e, c); j < e->sm.nchunk_layers[c]; j++) {
                int moe = exec_layer_moe(e, f + j);
                for (int k = 0; moe && k < e->nslots; k++) {
                    MoeBuf **b = &e->moeb[e->rc[f + j] == 2 ? nb - 1 : k * e->maxchunk + j];
                    if (!*b && !(*b = moe_buf_new(e)))
                        FAIL("out of memory for the expert buffers");
                }
            }
        for (int k = 0; k < e->sm.nmtp; k++)
            if (exec_layer_moe(e, e->sm.nlayers + k) && !(e->moeb[nb + k] = moe_buf_new(e)))
                FAIL("out of memory for the expert buffers");
        e->ws.mb = e->moeb[nb - 1];
    }
    e->nmtp = e->sm.nmtp;
    if (e->nmtp) {
        e->mtp = calloc(e->nmtp, sizeof *e->mtp);
        e->mtok = malloc((size_t)e->N * sizeof *e->mtok);
        e->mtgt = malloc((size_t)e->N * sizeof *e->mtgt);
        if (!e->mtp || !e->mtok || !e->mtgt)
            FAIL("out of memory for the MTP modules");
    }
    carve(e, NULL, NULL);
    e->acts = calloc(e->acts_n ? e->acts_n : 1, sizeof(float));
    e->bufs = calloc(e->bufs_n ? e->bufs_n : 1, sizeof(float));
    e->tokens = malloc((size_t)e->nmb * e->N * sizeof *e->tokens);
    e->targets = malloc((size_t)e->nmb * e->N * sizeof *e->targets);
    if (!e->acts || !e->bufs || !e->tokens || !e->targets)
        FAIL("out of memory for activations (%zu floats) and buffers (%zu floats)", e->acts_n, e->bufs_n);
    carve(e, e->acts, e->bufs);
    if (e->moeb) {
        int nb = e->nslots * (e->maxchunk ? e->maxchunk : 1) + 1;
        e->ws.mb = e->moeb[nb - 1];
        for (int k = 0; k < e->nmtp; k++)
            e->mtp[k].la.mb = e->moeb[nb + k];
    }

    e->dp_req = malloc((e->ps.nlayers + 1) * sizeof *e->dp_req);
    if (!e->dp_req)
        FAIL("out of memory for the DP requests");

    /* ZeRO-2 keeps the full weights and only the gradient shard, ZeRO-3 only shards */
    e->mem[XM_WEIGHTS] = (e->zero == 3 ? e->opt_n : e->ps.n_alloc) * 4.0;
    e->mem[XM_GRADS] = (e->zero >= 2 ? e->opt_n : e->ps.n_alloc) * 4.0;
    e->mem[XM_OPTIM] = 2.0 * e->opt_n * 4.0;
    e->mem[XM_ACTS] = e->acts_n * 4.0 + moe_acts_bytes(e);
    e->mem[XM_BUFFERS] = e->bufs_n * 4.0 + 2.0 * e->nmb * e->N * sizeof(int)
                       + (e->rowtok ? 2.0 * e->B * e->T * sizeof(int) : 0.0) + moe_scratch_bytes(e)
                       + (e->nmtp ? 2.0 * e->N * sizeof(int) : 0.0);

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

/* Under SP every TP rank holds part of the gradient of a replicated tensor. */
static void sp_sync(Exec *e, float *g, size_t n)
{
    if (e->lo.sp && g)
        dist_allreduce(g, (int)n, e->d.tp_comm, &e->t[PH_TP]);
}

/* ---- ZeRO-2/3: gradient buckets and weight gathers -------------------- */

/* The reduce-scatters of unit u from buf are done: add this rank's slice
 * (at buf[0, slice), in place; the experts' at buf[zx, zx + x_slice)) into
 * the gradient shard. xreq: the experts' request (NULL: the stage unit). */
static void bucket_drain(Exec *e, float *buf, int u, DistReq *req, DistReq *xreq)
{
    double t0 = dist_now();
    dist_wait(req, grad_comm(e));
    if (xreq)
        dist_wait(xreq, e->d.edp_comm);
    e->t[PH_DP] += dist_now() - t0;
    float *g = e->gsh + e->unit[u].soff;
    k_residual_fwd(g, g, buf, e->unit[u].slice);
    if (e->unit[u].x_len) {
        float *xg = e->gsh + e->unit[u].x_soff;
        k_residual_fwd(xg, xg, buf + e->zx, e->unit[u].x_slice);
    }
}

/* Unit u's gradients go to a zeroed bucket: the stage unit's own, or the
 * layer bucket not filled last (after its reduce-scatter is drained). */
static void bucket_open(Exec *e, int u)
{
    float *buf;
    if (u == e->nunits - 1) {
        if (e->zbs_busy)
            bucket_drain(e, e->zbs, u, &e->zbs_req, NULL);
        e->zbs_busy = 0;
        buf = e->zbs;
    } else {
        int k = e->zb_cur = e->zb_next;
        e->zb_next ^= 1;
        if (e->zb_unit[k] >= 0)
            bucket_drain(e, e->zb[k], e->zb_unit[k], &e->zb_req[k], &e->zbx_req[k]);
        e->zb_unit[k] = -1;
        buf = e->zb[k];
    }
    k_zero(buf, e->unit[u].slice * grad_size(e));
    e->unit[u].g = buf;
    if (e->unit[u].x_len) {
        k_zero(buf + e->zx, e->unit[u].x_slice * e->d.edp);
        e->unit[u].xg = buf + e->zx;
    }
}

/* Unit u's gradients of this micro-batch are complete: the SP syncs of its
 * replicated tensors on the bucket, then its non-blocking reduce-scatter. */
static void bucket_close(Exec *e, int u)
{
    ParamSet *ps = &e->ps;
    float *buf = e->unit[u].g;
    int stage = u == e->nunits - 1;
    if (stage) {
        sp_sync(e, exec_sg(e, P_LNFW), ps->len[P_LNFW]);
        sp_sync(e, exec_sg(e, P_LNFB), ps->len[P_LNFB]);
    } else if (e->lo.sp) {
        for (int id = 0; id < P_LAYER_COUNT; id++)
            if (param_desc[id].split == SPLIT_REP && ps->layer_off[u][id] != PARAM_NONE)
                sp_sync(e, exec_lg(e, u, id), ps->layer_len[u][id]);
    }
    double t0 = dist_now();
    if (stage) {
        dist_ireduce_scatter(buf, (int)e->unit[u].slice, grad_comm(e), &e->zbs_req);
        e->zbs_busy = 1;
    } else {   /* the bucket that holds u (two MTP modules hold both at once) */
        int k = buf == e->zb[1];
        dist_ireduce_scatter(buf, (int)e->unit[u].slice, grad_comm(e), &e->zb_req[k]);
        e->zbx_req[k] = DIST_REQ_NULL;
        if (e->unit[u].x_len)   /* the routed experts over the ranks that hold the same ones */
            dist_ireduce_scatter(buf + e->zx, (int)e->unit[u].x_slice, e->d.edp_comm, &e->zbx_req[k]);
        e->zb_unit[k] = u;
    }
    e->t[PH_DP] += dist_now() - t0;
    e->unit[u].g = e->unit[u].xg = NULL;
}

/* Every bucket's reduce-scatter drained into the shard (end of the step). */
static void bucket_flush(Exec *e)
{
    for (int k = 0; k < 2; k++) {
        if (e->zb_unit[k] >= 0)
            bucket_drain(e, e->zb[k], e->zb_unit[k], &e->zb_req[k], &e->zbx_req[k]);
        e->zb_unit[k] = -1;
    }
    if (e->zbs_busy)
        bucket_drain(e, e->zbs, e->nunits - 1, &e->zbs_req, NULL);
    e->zbs_busy = 0;
    e->zb_next = 0;
}

/* ZeRO-3: start gathering layer unit u into a gather buffer, unless one
 * holds it already (or is gathering it); never into the buffer of unit
 * `keep` (the one computing). */
static void gather_start(Exec *e, int u, int keep)
{
    if (e->zg_unit[0] == u || e->zg_unit[1] == u)
        return;
    int k = keep >= 0 && e->zg_unit[0] == keep ? 1
          : keep >= 0 && e->zg_unit[1] == keep ? 0
          : e->zg_unit[0] < 0 ? 0 : e->zg_unit[1] < 0 ? 1 : 0;
    double t0 = dist_now();
    if (e->zg_unit[k] >= 0) {    /* evicted: a prefetch nobody used must land before the buffer is reused */
        dist_wait(&e->zg_req[k], grad_comm(e));
        dist_wait(&e->zgx_req[k], e->d.edp_comm);
        e->unit[e->zg_unit[k]].w = e->unit[e->zg_unit[k]].xw = NULL;
    }
    e->zg_unit[k] = u;
    dist_iallgather(e->zg[k], e->wsh + e->unit[u].soff, (int)e->unit[u].slice, grad_comm(e), &e->zg_req[k]);
    e->zgx_req[k] = DIST_REQ_NULL;
    if (e->unit[u].x_len)             /* the routed experts from the edp ranks */
        dist_iallgather(e->zg[k] + e->zx, e->wsh + e->unit[u].x_soff, (int)e->unit[u].x_slice, e->d.edp_comm,
                        &e->zgx_req[k]);
    e->t[PH_DP] += dist_now() - t0;
}

/* ZeRO-3: layer unit u's weights, gathered (started here if nobody did). */
static void gather_wait(Exec *e, int u, int keep)
{
    gather_start(e, u, keep);
    int k = e->zg_unit[0] == u ? 0 : 1;
    double t0 = dist_now();
    dist_wait(&e->zg_req[k], grad_comm(e));
    dist_wait(&e->zgx_req[k], e->d.edp_comm);
    e->t[PH_DP] += dist_now() - t0;
    e->unit[u].w = e->zg[k];
    if (e->unit[u].x_len)
        e->unit[u].xw = e->zg[k] + e->zx;
}

/* ZeRO-3: the stage unit, gathered for one micro-batch (start, then wait). */
static void gather_stage_start(Exec *e)
{
    int S = e->nunits - 1;
    double t0 = dist_now();
    dist_iallgather(e->zgs, e->wsh + e->unit[S].soff, (int)e->unit[S].slice, grad_comm(e), &e->zgs_req);
    e->t[PH_DP] += dist_now() - t0;
}

static void gather_stage_wait(Exec *e)
{
    double t0 = dist_now();
    dist_wait(&e->zgs_req, grad_comm(e));
    e->t[PH_DP] += dist_now() - t0;
    e->unit[e->nunits - 1].w = e->zgs;
}

/* ZeRO-3: forget every gathered unit (the shard changed: optimizer, load). */
static void gather_reset(Exec *e)
{
    for (int k = 0; k < 2; k++) {
        dist_wait(&e->zg_req[k], grad_comm(e));
        dist_wait(&e->zgx_req[k], e->d.edp_comm);
        if (e->zg_unit[k] >= 0)
            e->unit[e->zg_unit[k]].w = e->unit[e->zg_unit[k]].xw = NULL;
        e->zg_unit[k] = -1;
    }
    dist_wait(&e->zgs_req, grad_comm(e));
    e->unit[e->nunits - 1].w = NULL;
}

void exec_scatter_weights(Exec *e, const float *w)
{
    for (int u = 0; u < e->nunits; u++) {
        float *dst = e->wsh + e->unit[u].soff;
        size_t real = slice_real(e, u);
        memcpy(dst, w + e->unit[u].start + slice_first(e, u), real * sizeof *dst);
        memset(dst + real, 0, (e->unit[u].slice - real) * sizeof *dst);
        dst = e->wsh + e->unit[u].x_soff;
        real = xslice_real(e, u);
        if (real)
            memcpy(dst, w + e->unit[u].x_start + xslice_first(e, u), real * sizeof *dst);
        memset(dst + real, 0, (e->unit[u].x_slice - real) * sizeof *dst);
    }
    if (e->zero == 3)
        gather_reset(e);
}

void exec_gather_weights(Exec *e, float *w)
{
    for (int u = 0; u < e->nunits; u++) {
        float *buf = u == e->nunits - 1 ? e->zgs : e->zg[0];
        dist_allgather(buf, e->wsh + e->unit[u].soff, (int)e->unit[u].slice, grad_comm(e), NULL);
        memcpy(w + e->unit[u].start, buf, e->unit[u].n * sizeof *w);
        if (e->unit[u].x_len) {
            dist_allgather(e->zg[0] + e->zx, e->wsh + e->unit[u].x_soff, (int)e->unit[u].x_slice, e->d.edp_comm, NULL);
            memcpy(w + e->unit[u].x_start, e->zg[0] + e->zx, e->unit[u].x_len * sizeof *w);
        }
    }
    gather_reset(e);
}

static void layer_done(Exec *e, int li)
{
    if (e->lo.sp)
        for (int id = 0; id < P_LAYER_COUNT; id++)
            if (param_desc[id].split == SPLIT_REP && e->ps.layer_off[li][id] != PARAM_NONE)
                sp_sync(e, e->ps.g + e->ps.layer_off[li][id], e->ps.layer_len[li][id]);
    if (grad_size(e) > 1 && e->zero == 0 && e->lo.overlap_grad) {
        double t0 = dist_now();
        dist_iallreduce(e->ps.g + e->unit[li].start, (int)e->unit[li].n, grad_comm(e), &e->dp_req[e->ndp_req++]);
        e->t[PH_DP] += dist_now() - t0;
    }
}

/* The MTP modules of micro-batch mb, forward then backward at once (inside
 * the last chunk's forward, after the head), with their units' ZeRO-3
 * gathers and ZeRO-2/3 buckets: a module's bucket is open from its loss
 * (in the forward) to the end of its backward. */
static void run_mtp(Exec *e, int mb, float *dlast)
{
    int u0 = e->sm.nlayers, keep = u0 - 1;   // the last layer, held for its backward
    for (int k = 1; k <= e->nmtp; k++) {
        if (e->zero == 3)
            gather_wait(e, u0 + k - 1, keep);
        if (e->zero >= 2)
            bucket_open(e, u0 + k - 1);
        net_mtp_fwd(e, mb, k);
    }
    double tb = dist_now(), c0 = e->t[PH_TP] + e->t[PH_DP];
    for (int k = e->nmtp; k >= 1; k--) {
        if (e->zero == 3)
            gather_wait(e, u0 + k - 1, keep);
        net_mtp_bwd(e, mb, k, dlast);
        if (e->zero >= 2)
            bucket_close(e, u0 + k - 1);
        else if (mb == e->nmb - 1)
            layer_done(e, u0 + k - 1);
    }
    /* backward work inside a forward action, as the head's */
    e->t[PH_BWD] += dist_now() - tb - (e->t[PH_TP] + e->t[PH_DP] - c0);
}

static void run_forward(Exec *e, int mb, int c)
{
    int vs = c * e->lo.pp + e->d.pp_rank, slot = e->slot_free[--e->nslots];
    e->slot_of[c * e->nmb + mb] = slot;
    slot_bind(e, slot, c);
    LayerActs *la = e->slots[slot].la;
    double t0 = dist_now(), c0 = e->t[PH_TP] + e->t[PH_PP] + e->t[PH_BWD] + e->t[PH_DP];
    int f = first_local(e, c), n = e->sm.nchunk_layers[c], k = -1;
    if (e->zero == 3) {          /* the stage unit for this micro-batch, the first layer behind it */
        gather_stage_start(e);
        if (n > 0)
            gather_start(e, f, -1);
        gather_stage_wait(e);
    }
    if (e->zero >= 2)            /* the head's gradients land in the stage bucket during this forward */
        bucket_open(e, e->nunits - 1);
    if (is_first_vstage(e, c))
        net_embed_fwd(e, e->tokens + (size_t)mb * e->N, la[0].x);
    else
        pp_recv(e, la[0].x, vs - 1, mb, vs, 0);
    float *out = NULL;
    if (!is_last_vstage(e, c))
        out = send_buf(e, &k);
    for (int j = 0; j < n; j++) {
        float *dst = j + 1 < n ? la[j + 1].x : is_last_vstage(e, c) ? e->head_in : out;
        if (e->zero == 3) {
            gather_wait(e, f + j, -1);
            if (j + 1 < n)
                gather_start(e, f + j + 1, f + j);   // prefetch while this one computes
        }
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
        if (e->nmtp)
            run_mtp(e, mb, e->slots[slot].dlast);
    } else {
        pp_send(e, k, vs + 1, mb, 0);
    }
    e->t[PH_FWD] += dist_now() - t0 - (e->t[PH_TP] + e->t[PH_PP] + e->t[PH_BWD] + e->t[PH_DP] - c0);
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
        if (e->zero == 3) {      /* held since the forward, or gathered again; the next one behind it */
            gather_wait(e, f + j, -1);
            if (j > 0)
                gather_start(e, f + j - 1, f + j);
        }
        if (e->zero >= 2)
            bucket_open(e, f + j);
        if (e->rc[f + j] == 2) {
            double r0 = dist_now(), tp0 = e->t[PH_TP];
            e->ws.x = la[j].x;
            e->recomputing = 1;
            net_layer_fwd(e, f + j, &e->ws, e->rc_out);
            e->recomputing = 0;
            e->t[PH_RECOMPUTE] += dist_now() - r0 - (e->t[PH_TP] - tp0);
            A = &e->ws;
        }
        net_layer_bwd(e, f + j, A);
        if (e->zero >= 2)
            bucket_close(e, f + j);
        else if (mb == e->nmb - 1)
            layer_done(e, f + j);
    }
    if (is_first_vstage(e, c)) {
        net_embed_bwd(e, e->tokens + (size_t)mb * e->N);
        if (e->zero >= 2)
            bucket_close(e, e->nunits - 1);
        if (e->zero == 3)
            e->unit[e->nunits - 1].w = NULL;   // the stage unit's gather is free again
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
    if (e->zero >= 2) {          /* synced per micro-batch on the buckets; drain what is in flight */
        bucket_flush(e);
        return;
    }
    sp_sync(e, params_stage(ps, ps->g, P_LNFW), ps->len[P_LNFW]);
    sp_sync(e, params_stage(ps, ps->g, P_LNFB), ps->len[P_LNFB]);
    double t0 = dist_now();
    if (e->m.tied && e->lo.pp > 1 && e->d.emb_comm != DIST_COMM_NULL) {
        ParamId id = e->d.pp_rank == 0 ? P_WTE : P_HEAD;
        dist_allreduce(params_stage(ps, ps->g, id), (int)ps->len[id], e->d.emb_comm, NULL);
    } else if (e->m.mtp_layers > 0 && e->lo.pp > 1 && e->d.emb_comm != DIST_COMM_NULL) {
        /* untied: MTP's copy of the embedding on the last stage and stage 0's */
        dist_allreduce(params_stage(ps, ps->g, P_WTE), (int)ps->len[P_WTE], e->d.emb_comm, NULL);
    }
    if (grad_size(e) > 1 && e->zero == 0 && !e->lo.overlap_grad)   // every layer's bucket, now
        for (int li = 0; li < ps->nlayers; li++)
            dist_iallreduce(ps->g + e->unit[li].start, (int)e->unit[li].n, grad_comm(e), &e->dp_req[e->ndp_req++]);
    if (grad_size(e) > 1 && e->zero == 0 && ps->n > ps->layers_end)
        dist_iallreduce(ps->g + ps->layers_end, (int)(ps->n - ps->layers_end), grad_comm(e),
                        &e->dp_req[e->ndp_req++]);
    dist_waitall(e->dp_req, e->ndp_req, grad_comm(e));
    e->ndp_req = 0;
    /* the routed experts: summed over the edp ranks that hold them (ZeRO-1 reduce-scatters them in the step) */
    if (ps->x_n > 0 && !e->xzero && e->d.edp > 1)
        dist_allreduce(ps->g + ps->x_off, (int)ps->x_n, e->d.edp_comm, NULL);
    e->t[PH_DP] += dist_now() - t0;
}

/* ZeRO-2/3: AdamW on the shard; ZeRO-2 then all-gathers every unit's
 * updated weights into the full copy. */
static void zero_step(Exec *e, int t)
{
    TrainOpts *o = &e->opt;
    ParamSet *ps = &e->ps;
    double t0 = dist_now();
    if (e->zero == 3) {          /* the shard is one flat array (padding: zero weights, zero gradients) */
        k_adamw(e->wsh, e->gsh, e->om, e->ov, e->opt_n, o->lr, o->beta1, o->beta2, o->eps, o->weight_decay, t);
        e->t[PH_OPTIM] += dist_now() - t0;
        gather_reset(e);
        return;
    }
    /* ZeRO-2: this rank's weights of unit u are its slice of the full copy
     * (AdamW is elementwise: unit by unit is the flat update) */
    for (int u = 0; u < e->nunits; u++) {
        size_t so = e->unit[u].soff;
        k_adamw(ps->w + e->unit[u].start + slice_first(e, u), e->gsh + so, e->om + so, e->ov + so,
                slice_real(e, u), o->lr, o->beta1, o->beta2, o->eps, o->weight_decay, t);
        so = e->unit[u].x_soff;
        k_adamw(ps->w + e->unit[u].x_start + xslice_first(e, u), e->gsh + so, e->om + so, e->ov + so,
                xslice_real(e, u), o->lr, o->beta1, o->beta2, o->eps, o->weight_decay, t);
    }
    e->t[PH_OPTIM] += dist_now() - t0;
    /* the updated slices go out from the spent gradient shard, padded, and
     * come back unit by unit through the buckets, the next unit's gather
     * started before this one's is copied out */
    double t1 = dist_now();
    for (int u = 0; u < e->nunits; u++) {
        float *dst = e->gsh + e->unit[u].soff;
        size_t real = slice_real(e, u);
        memcpy(dst, ps->w + e->unit[u].start + slice_first(e, u), real * sizeof *dst);
        memset(dst + real, 0, (e->unit[u].slice - real) * sizeof *dst);
        dst = e->gsh + e->unit[u].x_soff;
        real = xslice_real(e, u);
        if (real)
            memcpy(dst, ps->w + e->unit[u].x_start + xslice_first(e, u), real * sizeof *dst);
        memset(dst + real, 0, (e->unit[u].x_slice - real) * sizeof *dst);
    }
    int S = e->nunits - 1;
    for (int u = 0; u <= S; u++) {
        for (int v = u == 0 ? 0 : u + 1; v <= u + 1 && v <= S; v++) {
            DistReq *r = v == S ? &e->zbs_req : &e->zb_req[v % 2];
            dist_iallgather(v == S ? e->zbs : e->zb[v % 2], e->gsh + e->unit[v].soff, (int)e->unit[v].slice,
                            grad_comm(e), r);
        }
        dist_wait(u == S ? &e->zbs_req : &e->zb_req[u % 2], grad_comm(e));
        memcpy(ps->w + e->unit[u].start, u == S ? e->zbs : e->zb[u % 2], e->unit[u].n * sizeof(float));
    }
    for (int u = 0; u < S; u++)   /* the routed experts from the edp ranks */
        if (e->unit[u].x_len) {
            dist_allgather(e->zb[0] + e->zx, e->gsh + e->unit[u].x_soff, (int)e->unit[u].x_slice, e->d.edp_comm, NULL);
            memcpy(ps->w + e->unit[u].x_start, e->zb[0] + e->zx, e->unit[u].x_len * sizeof(float));
        }
    e->t[PH_DP] += dist_now() - t1;
}

/* The routed experts' region: AdamW on all of it, or (xzero) on this
 * rank's edp shard between a reduce-scatter and an all-gather over edp. */
static void expert_step(Exec *e, int t)
{
    TrainOpts *o = &e->opt;
    ParamSet *ps = &e->ps;
    float *g = ps->g + ps->x_off, *m = e->om + e->opt_nd, *v = e->ov + e->opt_nd;
    if (ps->x_n == 0)
        return;
    if (e->xzero) {
        dist_reduce_scatter(g, g, (int)e->xopt_n, e->d.edp_comm, &e->t[PH_DP]);   // in place
        double t0 = dist_now();
        k_adamw(ps->w + e->xopt_off, g, m, v, e->xopt_n, o->lr, o->beta1, o->beta2, o->eps, o->weight_decay, t);
        e->t[PH_OPTIM] += dist_now() - t0;
        dist_allgather_inplace(ps->w + ps->x_off, (int)e->xopt_n, e->d.edp_comm, &e->t[PH_DP]);
        return;
    }
    double t0 = dist_now();
    k_adamw(ps->w + ps->x_off, g, m, v, ps->x_n, o->lr, o->beta1, o->beta2, o->eps, o->weight_decay, t);
    e->t[PH_OPTIM] += dist_now() - t0;
}

static void optimizer_step(Exec *e)
{
    TrainOpts *o = &e->opt;
    ParamSet *ps = &e->ps;
    int t = e->step + 1;
    if (e->zero >= 2) {
        zero_step(e, t);
        return;
    }
    expert_step(e, t);
    if (e->zero == 1) {
        dist_reduce_scatter(ps->g, ps->g, (int)e->opt_nd, grad_comm(e), &e->t[PH_DP]);   // in place
        double t0 = dist_now();
        k_adamw(ps->w + e->opt_off, ps->g, e->om, e->ov, e->opt_nd, o->lr, o->beta1, o->beta2, o->eps,
                o->weight_decay, t);
        e->t[PH_OPTIM] += dist_now() - t0;
        dist_allgather_inplace(ps->w, (int)e->opt_nd, grad_comm(e), &e->t[PH_DP]);
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
    e->aux_sum = 0;
    e->mtp_sum = 0;
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
    if (e->zero >= 2)
        k_zero(e->gsh, e->opt_n);
    else
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
    st->aux_loss = e->E > 0 ? dist_world_sum(e->aux_sum) : 0.0;
    st->mtp_loss = e->m.mtp_layers > 0 ? dist_world_sum(e->mtp_sum) : 0.0;
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
    if (e->moeb)
        for (int k = 0; k < e->nmoeb; k++)
            moe_buf_free(e->moeb[k]);
    free(e->moeb);
    free(e->mtp);
    free(e->mtok);
    free(e->mtgt);
    moe_free(e);
    free(e->send_req);
    free(e->unit);
    free(e->wsh);
    free(e->gsh);
    free(e->dp_req);
    sched_free(&e->sch);
    data_free(&e->dl);
    dist_free(&e->d);
    memset(e, 0, sizeof *e);
}
