/* cpattn.c — see cpattn.h. The ring's messages, per step: this block's K and
 * V to rank r+1 (two messages), the next block from r−1; in the backward one
 * dK|dV accumulator each way as well. Two buffers of each kind alternate, so
 * a receive never lands in the block being computed; before a buffer is
 * reused its earlier send is waited for. */
#include "cpattn.h"

#include <stdlib.h>
#include <string.h>

#include "kernels.h"

enum { TAG_K = 7001, TAG_V = 7002, TAG_DKV = 7003 };

void cpattn_positions(int *pos, int T, int cp, int r)
{
    int c = T / (2 * cp);
    for (int t = 0; t < 2 * c; t++)
        pos[t] = t < c ? r * c + t : (2 * cp - 1 - r) * c + (t - c);
}

int cpattn_init(CpAttn *a, MPI_Comm comm, int cp, int rank, int B, int T, int NH, int NKV, int HS,
                double *t)
{
    memset(a, 0, sizeof *a);
    a->cp = cp, a->rank = rank, a->comm = comm, a->t = t;
    a->B = B, a->Tl = T / cp, a->NH = NH, a->NKV = NKV, a->HS = HS;
    a->pos = malloc((size_t)cp * a->Tl * sizeof *a->pos);
    if (!a->pos)
        return -1;
    for (int r = 0; r < cp; r++)
        cpattn_positions(a->pos + (size_t)r * a->Tl, T, cp, r);
    return 0;
}

static size_t kv_floats(const CpAttn *a) { return (size_t)a->B * a->Tl * a->NKV * a->HS; }

size_t cpattn_buf_floats(const CpAttn *a)
{
    size_t nkv = kv_floats(a), nq = (size_t)a->B * a->Tl * a->NH * a->HS, nl = (size_t)a->B * a->NH * a->Tl;
    return 5 * 2 * nkv + nq + nl;   // kv[2], acc[2], dloc: K|V pairs; ob; lseb
}

void cpattn_set_buf(CpAttn *a, float *buf)
{
    size_t nkv2 = 2 * kv_floats(a);
    a->kv[0] = buf, a->kv[1] = buf + nkv2;
    a->acc[0] = buf + 2 * nkv2, a->acc[1] = buf + 3 * nkv2;
    a->dloc = buf + 4 * nkv2;
    a->ob = buf + 5 * nkv2;
    a->lseb = a->ob + (size_t)a->B * a->Tl * a->NH * a->HS;
}

const int *cpattn_local_pos(const CpAttn *a) { return a->pos + (size_t)a->rank * a->Tl; }

void cpattn_free(CpAttn *a)
{
    free(a->pos);
    memset(a, 0, sizeof *a);
}

static void wait_timed(CpAttn *a, DistReq *r, int n)
{
    double t0 = dist_now();
    dist_waitall(r, n, a->comm);
    if (a->t)
        *a->t += dist_now() - t0;
}

/* The K/V ring shared by forward and backward. At step i the block is rank
 * (r−i)'s: our own k, v at i 0, else kv[(i−1)%2], received during step i−1.
 * kv_step waits for that block, passes it on and starts receiving the next. */
typedef struct {
    DistReq recv[2];          // the block arriving in kv[i%2]
    DistReq send[3][2];       // sends reading kv[0], kv[1], and our own k, v
} Ring;

static void ring_start(Ring *g)
{
    for (int j = 0; j < 2; j++) {
        g->recv[j] = DIST_REQ_NULL;
        for (int b = 0; b < 3; b++)
            g->send[b][j] = DIST_REQ_NULL;
    }
}

static void kv_step(CpAttn *a, Ring *g, int i, const float *k, const float *v, const float **bk,
                    const float **bv)
{
    size_t nkv = kv_floats(a);
    int next = (a->rank + 1) % a->cp, prev = (a->rank + a->cp - 1) % a->cp;
    if (i > 0)
        wait_timed(a, g->recv, 2);
    int from = i == 0 ? 2 : (i - 1) % 2;   // the send slot of the buffer this block is in
    *bk = i == 0 ? k : a->kv[from];
    *bv = i == 0 ? v : a->kv[from] + nkv;
    if (i + 1 < a->cp) {
        int b = i % 2;
        wait_timed(a, g->send[b], 2);       // kv[b]'s previous block has left
        dist_irecv(a->kv[b], (int)nkv, prev, TAG_K, a->comm, &g->recv[0]);
        dist_irecv(a->kv[b] + nkv, (int)nkv, prev, TAG_V, a->comm, &g->recv[1]);
        dist_isend(*bk, (int)nkv, next, TAG_K, a->comm, &g->send[from][0]);
        dist_isend(*bv, (int)nkv, next, TAG_V, a->comm, &g->send[from][1]);
    }
}

static void ring_end(CpAttn *a, Ring *g)
{
    wait_timed(a, &g->send[0][0], 6);
}

void cpattn_fwd(CpAttn *a, float *out, float *lse, const float *q, const float *k, const float *v)
{
    const int *qpos = cpattn_local_pos(a);
    Ring g;
    ring_start(&g);
    for (int i = 0; i < a->cp; i++) {
        const float *bk, *bv;
        kv_step(a, &g, i, k, v, &bk, &bv);
        int src = (a->rank + a->cp - i) % a->cp;
        const int *kpos = a->pos + (size_t)src * a->Tl;
        if (i == 0) {
            k_attention_block_fwd(out, lse, q, bk, bv, qpos, kpos, a->B, a->Tl, a->Tl, a->NH, a->NKV, a->HS);
        } else {
            k_attention_block_fwd(a->ob, a->lseb, q, bk, bv, qpos, kpos, a->B, a->Tl, a->Tl, a->NH, a->NKV,
                                  a->HS);
            k_attention_merge(out, lse, a->ob, a->lseb, a->B, a->Tl, a->NH, a->HS);
        }
    }
    ring_end(a, &g);
}

void cpattn_bwd(CpAttn *a, float *dq, float *dk, float *dv, const float *dout, const float *q,
                const float *k, const float *v, const float *out, const float *lse)
{
    size_t nkv = kv_floats(a);
    int next = (a->rank + 1) % a->cp, prev = (a->rank + a->cp - 1) % a->cp;
    const int *qpos = cpattn_local_pos(a);
    Ring g;
    ring_start(&g);
    /* The accumulator R_i of the block held at step i lives in acc[i%2]: R_0
     * is computed there; R_i (i > 0) arrives there during step i−1 while this
     * rank computes its share into dloc, which is then added in; R_cp, in
     * acc[cp%2], is this rank's own dK|dV, home after cp hops. */
    DistReq arecv[2] = {DIST_REQ_NULL, DIST_REQ_NULL}, asend[2] = {DIST_REQ_NULL, DIST_REQ_NULL};
    for (int i = 0; i < a->cp; i++) {
        const float *bk, *bv;
        kv_step(a, &g, i, k, v, &bk, &bv);
        int nb = (i + 1) % 2, cb = i % 2;
        wait_timed(a, &asend[nb], 1);        // acc[nb] (R_{i−1}) has left
        dist_irecv(a->acc[nb], (int)(2 * nkv), prev, TAG_DKV, a->comm, &arecv[nb]);
        float *dst = i == 0 ? a->acc[0] : a->dloc;
        k_zero(dst, 2 * nkv);
        int src = (a->rank + a->cp - i) % a->cp;
        k_attention_block_bwd(dq, dst, dst + nkv, dout, q, bk, bv, out, lse, qpos, a->pos + (size_t)src * a->Tl,
                              a->B, a->Tl, a->Tl, a->NH, a->NKV, a->HS);
        if (i > 0) {
            wait_timed(a, &arecv[cb], 1);
            k_residual_fwd(a->acc[cb], a->acc[cb], a->dloc, 2 * nkv);
        }
        dist_isend(a->acc[cb], (int)(2 * nkv), next, TAG_DKV, a->comm, &asend[cb]);
    }
    int home = a->cp % 2;
    wait_timed(a, &arecv[home], 1);
    k_residual_bwd(dk, NULL, a->acc[home], nkv);         // dk += home dK
    k_residual_bwd(dv, NULL, a->acc[home] + nkv, nkv);   // dv += home dV
    wait_timed(a, asend, 2);
    ring_end(a, &g);
}
