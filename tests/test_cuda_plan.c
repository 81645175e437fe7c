/* test_cuda_plan.c — the host-side arithmetic of the multi-GPU CUDA
 * executor (executor/cuda/cuplan.h), no GPU needed: DP buckets tile the
 * gradient slab in exec.c's order, ZeRO-1 shards tile the padded slab, the
 * per-chunk recomputation follows exec.c's rule, every pipeline link has
 * one sender and one receiver that agree, the messages on each link come in
 * the same order at both ends for 1F1B and interleaved schedules
 * (sched_build), and a simulation of the CUDA pipeline (NCCL receives on the
 * compute stream, rendezvous sends on one send stream per direction, a ring
 * of send buffers) finishes every schedule without deadlock; the sequence-
 * parallel slices tile a micro-batch's rows in rank order and the SP
 * gradient syncs are exactly exec.c's (replicated layer tensors, final norm);
 * the ZeRO-2/3 units are the buckets' runs, padded to D, their slices tile
 * each unit in rank order, and the shard's bytes are the cost model's; the
 * context-parallel chunks give every global position to exactly one cp rank,
 * increasing within each rank (the causal mask's precondition). With
 * mixture-of-experts layers the buckets and units tile the dense region
 * only: the routed experts (their own region, reduced over edp) are in
 * none of them. */
#include "memory.h"
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>

#include "cuplan.h"
#include "sched.h"

static void tiny(ModelSpec *m, int llama)
{
    memset(m, 0, sizeof *m);
    m->L = 4, m->h = 64, m->a = 2, m->s = 32, m->vocab = 256, m->vocab_div = 1;
    if (llama)
        m->g = 1, m->f = 128, m->mlp = MLP_SWIGLU, m->norm = NORM_RMSNORM, m->pos = POS_ROPE;
    else
        m->g = 2, m->f = 256, m->bias = true, m->tied = true;
}

/* the tiny model's parameters on one stage of pp even stages at this tp */
static void stage_params(int llama, int pp, int stage, int tp, ModelSpec *m, ParamSet *ps)
{
    tiny(m, llama);
    Layout lo;
    layout_default(&lo);
    lo.pp = pp, lo.tp = tp;
    for (int s = 0; s < pp; s++)
        lo.layers[s] = m->L / pp;
    StageMap sm;
    char err[128];
    assert_int_equal(stagemap_init(&sm, m, &lo, stage, 0, err, sizeof err), 0);
    params_layout(ps, m, &sm, 1);
}

static void buckets_of(int llama, int pp, int stage, int tp)
{
    ModelSpec m;
    ParamSet ps;
    stage_params(llama, pp, stage, tp, &m, &ps);
    CuBucket b[16];
    int n = cuplan_buckets(&ps, b);
    assert_int_equal(n, ps.nlayers + (ps.n > ps.layers_end));
    size_t at = 0;
    for (int i = 0; i < n; i++) {
        assert_true(b[i].start == at);
        assert_true(b[i].n > 0);
        assert_int_equal(b[i].layer, i < ps.nlayers ? i : -1);
        at += b[i].n;
    }
    assert_true(at == ps.n);
    if (ps.nlayers)
        assert_true(b[ps.nlayers - 1].start + b[ps.nlayers - 1].n == ps.layers_end);
    params_free(&ps);
}

static void test_buckets(void **state)
{
    (void)state;
    for (int llama = 0; llama < 2; llama++) {
        buckets_of(llama, 1, 0, 1);
        buckets_of(llama, 1, 0, 2);
        buckets_of(llama, 2, 0, 1);
        buckets_of(llama, 2, 1, 2);
        buckets_of(llama, 4, 1, 1);   // a middle stage: layers only
    }
}

/* An MoE model (every other layer: 4 experts of 96, top 2, a shared expert
 * of 64): the layers' buckets and units cover [0, n) exactly, the expert
 * region [x_off, x_off + x_alloc) not at all (before the fix a layer bucket
 * ran on into the next layer by the routed experts' floats). */
static void test_moe_buckets(void **state)
{
    (void)state;
    for (int llama = 0; llama < 2; llama++)
        for (int pp = 1; pp <= 2; pp++)
            for (int stage = 0; stage < pp; stage++) {
                ModelSpec m;
                tiny(&m, llama);
                m.bias = false;
                m.experts = 4, m.topk = 2, m.moe_ffn = 96, m.shared_ffn = 64, m.moe_freq = 2;
                Layout lo;
                layout_default(&lo);
                lo.pp = pp, lo.ep = 2;
                for (int s = 0; s < pp; s++)
                    lo.layers[s] = m.L / pp;
                StageMap sm;
                char err[128];
                assert_int_equal(stagemap_init(&sm, &m, &lo, stage, 0, err, sizeof err), 0);
                ParamSet ps;
                params_layout(&ps, &m, &sm, 1);
                assert_true(ps.x_n > 0 && ps.x_off >= ps.n);   // an MoE layer on every stage
                CuBucket b[16];
                CuUnit u[16];
                size_t shard;
                int nb = cuplan_buckets(&ps, b), nu = cuplan_units(&ps, 2, u, &shard);
                assert_int_equal(nb, nu);
                size_t at = 0, pad = 0;
                for (int i = 0; i < nb; i++) {
                    assert_true(b[i].start == at && u[i].start == at && u[i].n == b[i].n);
                    at += b[i].n;
                    pad += u[i].pad;
                }
                assert_true(at == ps.n);
                assert_true(shard * 2 == pad);
                params_free(&ps);
            }
}

/* The expert masters' shards over edp tile the (padded) expert region in
 * rank order, and without ZeRO-1 every rank holds all of it; worked by
 * hand for 4 experts of 96 (SwiGLU: 2*96 + 96 rows of 64 per expert) */
static void test_expert_shard(void **state)
{
    (void)state;
    ModelSpec m;
    tiny(&m, 1);
    m.experts = 4, m.topk = 2, m.moe_ffn = 96, m.moe_freq = 1;
    for (int edp = 1; edp <= 3; edp++) {
        Layout lo;
        layout_default(&lo);
        lo.ep = 2;
        lo.layers[0] = m.L;
        StageMap sm;
        char err[128];
        assert_int_equal(stagemap_init(&sm, &m, &lo, 0, 0, err, sizeof err), 0);
        sm.expert_pad = edp;
        ParamSet ps;
        params_layout(&ps, &m, &sm, 1);
        size_t per_layer = 2 * (3 * 96 * 64);   // two local experts: efc1 (192 x 64) + efc2 (64 x 96)
        assert_true(ps.x_n == (size_t)m.L * per_layer);
        assert_true(ps.x_alloc % edp == 0 && ps.x_alloc - ps.x_n < (size_t)edp);
        size_t at = ps.x_off;
        for (int r = 0; r < edp; r++) {
            size_t n, off;
            cuplan_expert_shard(&ps, edp, r, 1, &n, &off);
            assert_true(off == at && n * edp == ps.x_alloc);
            at += n;
            cuplan_expert_shard(&ps, edp, r, 0, &n, &off);   // no ZeRO-1: all of it
            assert_true(off == ps.x_off && n == ps.x_alloc);
        }
        assert_true(at == ps.x_off + ps.x_alloc);
        params_free(&ps);
    }
}

static void test_shard(void **state)
{
    (void)state;
    size_t ns[] = {1, 10, 17, 1000, 123457};
    for (int i = 0; i < 5; i++)
        for (int dp = 1; dp <= 5; dp++) {
            size_t n_alloc = 0, covered = 0;
            for (int r = 0; r < dp; r++) {
                size_t na, on, off;
                cuplan_shard(ns[i], dp, r, 1, &na, &on, &off);
                assert_true(na >= ns[i] && na - ns[i] < (size_t)dp && na % dp == 0);
                assert_true(on * dp == na);
                assert_true(off == covered);   // shards in rank order, back to back
                covered += on;
                n_alloc = na;
            }
            assert_true(covered == n_alloc);
            size_t na, on, off;
            cuplan_shard(ns[i], dp, dp - 1, 0, &na, &on, &off);   // ZeRO-0: everything, unpadded
            assert_true(na == ns[i] && on == ns[i] && off == 0);
        }
}

/* units over D ranks of one stage: the bucket runs, padded; rank slices tile them */
static void units_of(int llama, int pp, int stage, int tp, int D)
{
    ModelSpec m;
    ParamSet ps;
    stage_params(llama, pp, stage, tp, &m, &ps);
    CuBucket b[16];
    CuUnit u[16];
    size_t shard = 0;
    int nb = cuplan_buckets(&ps, b), nu = cuplan_units(&ps, D, u, &shard);
    assert_int_equal(nu, nb);
    size_t at = 0;
    for (int i = 0; i < nu; i++) {
        assert_true(u[i].start == b[i].start && u[i].n == b[i].n && u[i].layer == b[i].layer);
        assert_true(u[i].pad % D == 0 && u[i].pad >= u[i].n && u[i].pad - u[i].n < (size_t)D);
        assert_true(u[i].slice * D == u[i].pad && u[i].shard_off == at);
        at += u[i].slice;
        size_t covered = 0;
        for (int k = 0; k < D; k++) {
            size_t first, len;
            cuplan_unit_slice(&u[i], k, &first, &len);
            assert_true(len <= u[i].slice);
            if (len)
                assert_true(first == u[i].start + covered);
            covered += len;
        }
        assert_true(covered == u[i].n);   // every real float owned once
    }
    assert_true(shard == at);
    /* the tiny models' units divide by D: the shard is the cost model's 1/D exactly */
    Layout lo;
    layout_default(&lo);
    lo.pp = pp, lo.tp = tp;
    for (int s = 0; s < pp; s++)
        lo.layers[s] = m.L / pp;
    assert_true((double)shard * D == memory_stage_params(&m, &lo, stage, lo.layers[stage]));
    params_free(&ps);
}

static void test_units(void **state)
{
    (void)state;
    for (int llama = 0; llama < 2; llama++)
        for (int D = 1; D <= 4; D *= 2) {
            units_of(llama, 1, 0, 1, D);
            units_of(llama, 1, 0, 2, D);
        }
    /* an odd group: padding; the slices still cover every float once */
    ModelSpec m;
    ParamSet ps;
    stage_params(0, 1, 0, 1, &m, &ps);
    CuUnit u[16];
    size_t shard;
    int nu = cuplan_units(&ps, 3, u, &shard);
    size_t pad = 0;
    for (int i = 0; i < nu; i++)
        pad += u[i].pad;
    assert_true(shard * 3 == pad && pad >= ps.n);
    params_free(&ps);
}

static void test_cp_pos(void **state)
{
    (void)state;
    for (int cp = 1; cp <= 4; cp++) {
        int T = 8 * cp, seen[32] = {0};
        for (int r = 0; r < cp; r++)
            for (int t = 0; t < T / cp; t++) {
                int p = cuplan_cp_pos(T, cp, r, t);
                assert_true(p >= 0 && p < T);
                seen[p]++;
                if (t)
                    assert_true(p > cuplan_cp_pos(T, cp, r, t - 1));
            }
        for (int p = 0; p < T; p++)
            assert_int_equal(seen[p], 1);
    }
    assert_int_equal(cuplan_cp_pos(16, 2, 0, 3), 3);    // chunks of 4: rank 0 holds 0 and 3
    assert_int_equal(cuplan_cp_pos(16, 2, 0, 4), 12);
    assert_int_equal(cuplan_cp_pos(16, 2, 1, 0), 4);    // rank 1 holds 1 and 2
    assert_int_equal(cuplan_cp_pos(16, 2, 1, 7), 11);
}

static void test_recompute(void **state)
{
    (void)state;
    int rc[8], two[2] = {2, 2}, one[1] = {4};
    cuplan_recompute(3, 1, 2, two, rc);
    int want[4] = {2, 2, 2, 0};
    assert_memory_equal(rc, want, sizeof want);
    cuplan_recompute(1, 2, 1, one, rc);
    int want1[4] = {2, 1, 1, 0};
    assert_memory_equal(rc, want1, sizeof want1);
    cuplan_recompute(0, 0, 1, one, rc);
    int none[4] = {0, 0, 0, 0};
    assert_memory_equal(rc, none, sizeof none);
}

/* The SP slices of every tp rank tile the N rows in rank order (the order
 * ncclAllGather / ncclReduceScatter use); without SP each rank holds all. */
static void test_sp_rows(void **state)
{
    (void)state;
    int Ns[] = {64, 128, 96, 4096};
    for (int i = 0; i < 4; i++)
        for (int tp = 1; tp <= 8; tp *= 2) {
            int at = 0;
            for (int r = 0; r < tp; r++) {
                int first = -1, nl = -1;
                assert_int_equal(cuplan_sp_rows(Ns[i], tp, r, 1, &first, &nl), 0);
                assert_int_equal(first, at);
                assert_int_equal(nl, Ns[i] / tp);
                at += nl;
                assert_int_equal(cuplan_sp_rows(Ns[i], tp, r, 0, &first, &nl), 0);
                assert_true(first == 0 && nl == Ns[i]);
            }
            assert_int_equal(at, Ns[i]);
        }
    int first, nl;
    assert_int_equal(cuplan_sp_rows(63, 2, 1, 1, &first, &nl), -1);   // refuse_cuda refuses it first
    assert_int_equal(cuplan_sp_rows(63, 1, 0, 1, &first, &nl), 0);    // tp 1: no SP
    assert_true(first == 0 && nl == 63);
}

/* The SP gradient syncs of a stage cover exactly exec.c's sp_sync set: each
 * layer's SPLIT_REP tensors, the final norm on the last stage, never the
 * split tensors or the position embedding; ranges don't overlap and merge
 * adjacent tensors. */
static void sp_sync_of(int llama, int pp, int stage, int tp)
{
    ModelSpec m;
    ParamSet ps;
    stage_params(llama, pp, stage, tp, &m, &ps);
    unsigned char *mark = calloc(ps.n ? ps.n : 1, 1);
    assert_non_null(mark);
    for (int l = -1; l < ps.nlayers; l++) {
        CuBucket r[P_LAYER_COUNT];
        int n = cuplan_sp_sync(&ps, l, r);
        assert_true(n >= 0 && n <= P_LAYER_COUNT);
        for (int k = 0; k < n; k++) {
            assert_int_equal(r[k].layer, l);
            assert_true(r[k].n > 0 && r[k].start + r[k].n <= ps.n);
            if (k)   // merged: a gap between consecutive ranges
                assert_true(r[k - 1].start + r[k - 1].n < r[k].start);
            for (size_t i = r[k].start; i < r[k].start + r[k].n; i++) {
                assert_int_equal(mark[i], 0);
                mark[i] = 1;
            }
        }
    }
    size_t want = 0, got = 0;
    for (int l = 0; l < ps.nlayers; l++)
        for (int id = 0; id < P_LAYER_COUNT; id++) {
            size_t o = ps.layer_off[l][id];
            if (o == PARAM_NONE)
                continue;
            int rep = param_desc[id].split == SPLIT_REP;
            for (size_t i = o; i < o + ps.layer_len[l][id]; i++)
                assert_int_equal(mark[i], rep);
            want += rep ? ps.layer_len[l][id] : 0;
        }
    for (int id = P_LAYER_COUNT; id < P_COUNT; id++) {
        if (ps.off[id] == PARAM_NONE)
            continue;
        int sync = id == P_LNFW || id == P_LNFB;
        for (size_t i = ps.off[id]; i < ps.off[id] + ps.len[id]; i++)
            assert_int_equal(mark[i], sync);
        want += sync ? ps.len[id] : 0;
    }
    for (size_t i = 0; i < ps.n; i++)
        got += mark[i];
    assert_true(got == want);
    if (stage == pp - 1)   // the final norm: lnf.w (and lnf.b of a LayerNorm) in one range
        assert_true(want >= (size_t)m.h);
    free(mark);
    params_free(&ps);
}

static void test_sp_sync(void **state)
{
    (void)state;
    for (int llama = 0; llama < 2; llama++) {
        sp_sync_of(llama, 1, 0, 2);
        sp_sync_of(llama, 2, 0, 2);   // first stage: wpe (GPT) is not synced
        sp_sync_of(llama, 2, 1, 4);
        sp_sync_of(llama, 4, 2, 2);   // a middle stage: layers only
    }
    /* GPT (LayerNorm, biases): ln1.w|ln1.b, proj.b|ln2.w|ln2.b, fc2.b per layer; lnf.w|lnf.b */
    ModelSpec m;
    tiny(&m, 0);
    Layout lo;
    layout_default(&lo);
    lo.tp = 2, lo.layers[0] = m.L;
    StageMap sm;
    char err[128];
    assert_int_equal(stagemap_init(&sm, &m, &lo, 0, 1, err, sizeof err), 0);
    ParamSet ps;
    params_layout(&ps, &m, &sm, 1);
    CuBucket r[P_LAYER_COUNT];
    assert_int_equal(cuplan_sp_sync(&ps, 1, r), 3);
    assert_true(r[0].start == ps.layer_off[1][P_LN1W] && r[0].n == 2 * (size_t)m.h);
    assert_true(r[1].start == ps.layer_off[1][P_PROJB] && r[1].n == 3 * (size_t)m.h);
    assert_true(r[2].start == ps.layer_off[1][P_FC2B] && r[2].n == (size_t)m.h);
    assert_int_equal(cuplan_sp_sync(&ps, -1, r), 1);
    assert_true(r[0].start == ps.off[P_LNFW] && r[0].n == 2 * (size_t)m.h);
    params_free(&ps);
    /* Llama (RMSNorm, no biases): ln1.w, ln2.w apart */
    tiny(&m, 1);
    assert_int_equal(stagemap_init(&sm, &m, &lo, 0, 0, err, sizeof err), 0);
    params_layout(&ps, &m, &sm, 1);
    assert_int_equal(cuplan_sp_sync(&ps, 0, r), 2);
    assert_true(r[0].start == ps.layer_off[0][P_LN1W] && r[1].start == ps.layer_off[0][P_LN2W]);
    params_free(&ps);
}

static void test_links(void **state)
{
    (void)state;
    static const CuLinkRole opposite[CL_COUNT] = {CL_FWD_IN, CL_FWD_OUT, CL_BWD_IN, CL_BWD_OUT};
    for (int pp = 1; pp <= 5; pp++)
        for (int wrap = 0; wrap < 2; wrap++)
            for (int s = 0; s < pp; s++) {
                CuLink l[CL_COUNT];
                cuplan_links(pp, s, wrap, l);
                for (int r = 0; r < CL_COUNT; r++) {
                    int edge = (r == CL_FWD_OUT && s == pp - 1) || (r == CL_FWD_IN && s == 0) ||
                               (r == CL_BWD_OUT && s == 0) || (r == CL_BWD_IN && s == pp - 1);
                    if (pp == 1 || (edge && !wrap)) {
                        assert_int_equal(l[r].id, -1);
                        continue;
                    }
                    assert_true(l[r].id >= 0 && l[r].id < 2 * pp);
                    assert_int_equal(l[r].sender, r == CL_FWD_OUT || r == CL_BWD_OUT);
                    int want = r == CL_FWD_OUT || r == CL_BWD_IN ? (s + 1) % pp : (s - 1 + pp) % pp;
                    assert_int_equal(l[r].peer, want);
                    CuLink p[CL_COUNT];
                    cuplan_links(pp, l[r].peer, wrap, p);
                    assert_int_equal(p[opposite[r]].id, l[r].id);
                    assert_int_equal(p[opposite[r]].peer, s);
                    int snd, rcv;
                    assert_int_equal(cuplan_link_ends(pp, wrap, l[r].id, &snd, &rcv), 0);
                    assert_int_equal(l[r].sender ? snd : rcv, s);
                }
            }
    assert_int_equal(cuplan_ring(1, 1, 8), 0);
    assert_int_equal(cuplan_ring(2, 1, 8), 6);
    assert_int_equal(cuplan_ring(4, 2, 2), 8);
}

/* ---- the pipeline as the CUDA executor runs it -------------------------- */

enum { OP_RECV, OP_TAKE, OP_SEND };
typedef struct {
    int kind, link, msg;   // msg: vstage * 1000 + mb of the activation or gradient carried
} Op;

typedef struct {
    Op *op;
    int n, at;                 // compute stream position
    int q[2][256], qh[2], qt[2];   // send streams (fwd, bwd): ring slots of queued sends
    int qlink[2][256], qmsg[2][256];
    int *slot_busy;            // (ring) a send from this slot is still queued
    int ring, next, taken;
} Stage;

static void push(Stage *s, int kind, int link, int msg)
{
    s->op[s->n++] = (Op){kind, link, msg};
}

/* The ops stage `st` issues in one step, in exec.c's order: receive the
 * input, take a ring buffer, compute, send. */
static void program(Stage *S, int pp, int vp, int nmb, int st)
{
    Schedule sch;
    char err[128];
    assert_int_equal(sched_build(&sch, pp, st, nmb, vp, err, sizeof err), 0);
    CuLink l[CL_COUNT];
    cuplan_links(pp, st, vp > 1, l);
    S->op = calloc(4 * sch.n + 1, sizeof *S->op);
    for (int i = 0; i < sch.n; i++) {
        Action a = sch.a[i];
        int vs = a.chunk * pp + st, first = vs == 0, last = vs == pp * vp - 1;
        if (a.kind == ACT_FWD) {
            if (!first)
                push(S, OP_RECV, l[CL_FWD_IN].id, vs * 1000 + a.mb);
            if (!last) {
                push(S, OP_TAKE, 0, 0);
                push(S, OP_SEND, l[CL_FWD_OUT].id, (vs + 1) * 1000 + a.mb);
            }
        } else {
            if (!last)
                push(S, OP_RECV, l[CL_BWD_IN].id, vs * 1000 + a.mb);
            if (!first) {
                push(S, OP_TAKE, 0, 0);
                push(S, OP_SEND, l[CL_BWD_OUT].id, (vs - 1) * 1000 + a.mb);
            }
        }
    }
    sched_free(&sch);
    S->ring = cuplan_ring(pp, vp, nmb);
    S->slot_busy = calloc(S->ring + 1, sizeof *S->slot_busy);
}

/* Rendezvous: a send completes only together with its receive. */
static int simulate(int pp, int vp, int nmb)
{
    Stage S[8];
    memset(S, 0, sizeof S);
    for (int s = 0; s < pp; s++)
        program(&S[s], pp, vp, nmb, s);
    int progress = 1;
    while (progress) {
        progress = 0;
        for (int s = 0; s < pp; s++) {
            Stage *me = &S[s];
            while (me->at < me->n) {
                Op o = me->op[me->at];
                if (o.kind == OP_TAKE) {
                    if (me->slot_busy[me->next])
                        break;
                    me->taken = me->next;
                    me->next = (me->next + 1) % me->ring;
                } else if (o.kind == OP_SEND) {
                    int d = o.link >= pp;
                    me->slot_busy[me->taken] = 1;
                    me->q[d][me->qt[d] % 256] = me->taken;
                    me->qlink[d][me->qt[d] % 256] = o.link;
                    me->qmsg[d][me->qt[d]++ % 256] = o.msg;
                } else {
                    int snd, rcv, d = o.link >= pp;
                    assert_int_equal(cuplan_link_ends(pp, vp > 1, o.link, &snd, &rcv), 0);
                    assert_int_equal(rcv, s);
                    Stage *from = &S[snd];
                    if (from->qh[d] == from->qt[d] || from->qlink[d][from->qh[d] % 256] != o.link)
                        break;   // not at the head of the sender's stream yet
                    assert_int_equal(from->qmsg[d][from->qh[d] % 256], o.msg);   // FIFO per link
                    from->slot_busy[from->q[d][from->qh[d]++ % 256]] = 0;
                }
                me->at++;
                progress = 1;
            }
        }
    }
    int done = 1;
    for (int s = 0; s < pp; s++) {
        done &= S[s].at == S[s].n && S[s].qh[0] == S[s].qt[0] && S[s].qh[1] == S[s].qt[1];
        free(S[s].op);
        free(S[s].slot_busy);
    }
    return done;
}

static void test_pipeline(void **state)
{
    (void)state;
    for (int pp = 2; pp <= 5; pp++)
        for (int vp = 1; vp <= 3; vp++)
            for (int k = 1; k <= 3; k++) {
                int nmb = vp > 1 ? k * pp : k + pp - 2;
                if (!simulate(pp, vp, nmb))
                    fail_msg("pipeline pp %d vp %d m %d deadlocks", pp, vp, nmb);
            }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_buckets),
        cmocka_unit_test(test_moe_buckets),
        cmocka_unit_test(test_expert_shard),
        cmocka_unit_test(test_shard),
        cmocka_unit_test(test_units),
        cmocka_unit_test(test_cp_pos),
        cmocka_unit_test(test_recompute),
        cmocka_unit_test(test_sp_rows),
        cmocka_unit_test(test_sp_sync),
        cmocka_unit_test(test_links),
        cmocka_unit_test(test_pipeline),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
