/* cumoe.c — see cumoe.h. The routed experts of one MoE layer: routing,
 * dispatch, grouped expert GEMMs, combine, and the backward. */
#include "cumoe.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FAIL(...) do { snprintf(err, errlen, __VA_ARGS__); return -1; } while (0)

static void *dmal(size_t bytes, double *acc)
{
    void *p = NULL;
    if (cudaMalloc(&p, bytes ? bytes : 16) != cudaSuccess) {
        cudaGetLastError();
        return NULL;
    }
    *acc += (double)bytes;
    return p;
}

int cumoe_init(CuMoe *M, int N, int C, int E, int K, int Fe, int swiglu, double imbalance, CuComm *cc,
               cudaStream_t st, char *err, int errlen)
{
    memset(M, 0, sizeof *M);
    int ep = cc ? cucomm_size(cc, CC_EP) : 1;
    if (E < 1 || E > KC_MOE_MAX_E || K < 1 || K > KC_MOE_MAX_K || K > E)
        FAIL("MoE: \"experts\": %d and \"topk\": %d (the CUDA kernels take up to %d experts and top-%d)", E, K,
             KC_MOE_MAX_E, KC_MOE_MAX_K);
    if (E % ep)
        FAIL("MoE: \"ep\": %d must divide \"experts\": %d", ep, E);
    M->N = N, M->C = C, M->E = E, M->K = K, M->Fe = Fe, M->swiglu = swiglu;
    M->F1e = swiglu ? 2 * Fe : Fe;
    M->ep = ep, M->ep_rank = cc ? cucomm_rank(cc, CC_EP) : 0, M->El = E / ep;
    M->cc = ep > 1 ? cc : NULL;
    M->st = st, M->cs = M->cc ? cucomm_stream(cc) : st;
    size_t R = (size_t)N * K, worst = R * ep;
    double im = imbalance < 1 ? 1 : imbalance;
    size_t cap = (size_t)(im * (double)R + 0.999999);
    M->cap = (int)(cap > worst ? worst : cap < 1 ? 1 : cap);
    double *b = &M->bytes;
    size_t bf = sizeof(kc_bf16), cp = (size_t)M->cap;
    M->logits = dmal(R / K * E * bf, b);
    M->ws = dmal(kc_moe_map_ws_ints((int)R, E) * sizeof(int), b);
    M->cnt = dmal(E * sizeof(int), b);
    M->off = dmal((E + 1) * sizeof(int), b);
    M->scnt = dmal((size_t)N * E * sizeof(int), b);   // at most N groups (seq 1)
    M->cf_send = dmal((size_t)ep * E * sizeof(float), b);   // every ep rank's counts
    M->sendb = dmal(R * C * bf, b);
    M->recvb = dmal(cp * C * bf, b);
    M->ye = dmal(cp * C * bf, b);
    M->dh1 = dmal(cp * M->F1e * bf, b);
    M->dha = dmal(cp * Fe * bf, b);
    M->dxe = dmal(cp * C * bf, b);
    M->dtopw = dmal(R * sizeof(float), b);
    if (cudaMallocHost((void **)&M->h_cf, (size_t)ep * E * sizeof *M->h_cf) != cudaSuccess)   // pinned: the
        M->h_cf = NULL;                                                                     // copy stays async
    M->h_idx = malloc(2 * cp * sizeof *M->h_idx);
    if (!M->logits || !M->ws || !M->cnt || !M->off || !M->scnt || !M->cf_send || !M->sendb ||
        !M->recvb || !M->ye || !M->dh1 || !M->dha || !M->dxe || !M->dtopw || !M->h_cf || !M->h_idx)
        FAIL("MoE: not enough memory for the expert scratch (%.2f GiB asked)", M->bytes / 1073741824.0);
    CHECK_CUDA(cudaEventCreateWithFlags(&M->ev_c, cudaEventDisableTiming));
    CHECK_CUDA(cudaEventCreateWithFlags(&M->ev_m, cudaEventDisableTiming));
    CHECK_CUDA(cudaEventCreateWithFlags(&M->ev_h, cudaEventDisableTiming));
    return 0;
}

void cumoe_free(CuMoe *M)
{
    void *d[] = {M->logits, M->ws, M->cnt, M->off, M->scnt, M->cf_send, M->sendb, M->recvb, M->ye,
                 M->dh1, M->dha, M->dxe, M->dtopw};
    for (size_t i = 0; i < sizeof d / sizeof *d; i++)
        if (d[i])
            cudaFree(d[i]);
    if (M->ev_c)
        cudaEventDestroy(M->ev_c);
    if (M->ev_m)
        cudaEventDestroy(M->ev_m);
    if (M->ev_h)
        cudaEventDestroy(M->ev_h);
    if (M->h_cf)
        cudaFreeHost(M->h_cf);
    free(M->h_idx);
    memset(M, 0, sizeof *M);
}

int cumoe_acts_alloc(const CuMoe *M, CuMoeActs *A, char *err, int errlen)
{
    memset(A, 0, sizeof *A);
    size_t R = (size_t)M->N * M->K, cp = (size_t)M->cap, bf = sizeof(kc_bf16);
    double *b = &A->bytes;
    A->probs = dmal((size_t)M->N * M->E * sizeof(float), b);
    A->topw = dmal(R * sizeof(float), b);
    A->topi = dmal(R * sizeof(int), b);
    A->row_of = dmal(R * sizeof(int), b);
    A->src_of = dmal(R * sizeof(int), b);
    A->d_idx = dmal(cp * sizeof(int), b);
    A->d_inv = dmal(cp * sizeof(int), b);
    A->xe = dmal(cp * M->C * bf, b);
    A->h1 = dmal(cp * M->F1e * bf, b);
    A->ha = dmal(cp * M->Fe * bf, b);
    A->rows = dmal(R * M->C * bf, b);
    A->h_send = calloc(M->ep, sizeof *A->h_send);
    A->h_recv = calloc((size_t)M->ep * M->El, sizeof *A->h_recv);
    A->h_lcnt = calloc(M->El, sizeof *A->h_lcnt);
    if (!A->probs || !A->topw || !A->topi || !A->row_of || !A->src_of || !A->d_idx || !A->d_inv || !A->xe ||
        !A->h1 || !A->ha || !A->rows || !A->h_send || !A->h_recv || !A->h_lcnt)
        FAIL("MoE: not enough memory for one micro-batch's expert activations (%.2f GiB asked)",
             A->bytes / 1073741824.0);
    return 0;
}

void cumoe_acts_free(CuMoeActs *A)
{
    void *d[] = {A->probs, A->topw, A->topi, A->row_of, A->src_of, A->d_idx, A->d_inv, A->xe, A->h1, A->ha,
                 A->rows};
    for (size_t i = 0; i < sizeof d / sizeof *d; i++)
        if (d[i])
            cudaFree(d[i]);
    free(A->h_send);
    free(A->h_recv);
    free(A->h_lcnt);
    memset(A, 0, sizeof *A);
}

/* All-to-all over ep of rows of C: scnt[p] rows from send (in peer order)
 * to p, rcnt[p] rows from p into recv (in peer order); on the comm stream
 * after the compute stream's work, the compute stream waiting for it. */
static void a2a(CuMoe *M, const kc_bf16 *send, const int *scnt, kc_bf16 *recv, const int *rcnt)
{
    size_t sc[64], sd[64], rc[64], rd[64], C = (size_t)M->C, at = 0, ar = 0;
    int ep = M->ep;
    for (int p = 0; p < ep; p++) {
        sc[p] = (size_t)scnt[p] * C, sd[p] = at, at += sc[p];
        rc[p] = (size_t)rcnt[p] * C, rd[p] = ar, ar += rc[p];
    }
    if (!M->cc) {
        if (sc[0])
            CHECK_CUDA(cudaMemcpyAsync(recv, send, sc[0] * sizeof(kc_bf16), cudaMemcpyDeviceToDevice, M->st));
        return;
    }
    CHECK_CUDA(cudaEventRecord(M->ev_c, M->st));
    CHECK_CUDA(cudaStreamWaitEvent(M->cs, M->ev_c, 0));
    cucomm_alltoallv(M->cc, CC_EP, send, sc, sd, recv, rc, rd, CC_BF16, M->cs);
    CHECK_CUDA(cudaEventRecord(M->ev_m, M->cs));
    CHECK_CUDA(cudaStreamWaitEvent(M->st, M->ev_m, 0));
}

/* Every ep rank's counts for every expert, as cumoe_fwd_route all-gathered
 * them into h_cf (ep·E floats, exact: counts < 2^24), so that each rank
 * knows every rank's load: the counts of every peer's tokens for this
 * rank's experts into h_recv[p·El + e], and the most rows any rank of the
 * group receives, returned (all ranks see the same number, so a step that
 * overflows one rank's buffers fails on all of them before the dispatch). */
static int exchange_counts(CuMoe *M, CuMoeActs *A)
{
    int ep = M->ep, El = M->El, E = M->E, me = M->ep_rank;
    int most = 0;
    for (int q = 0; q < ep; q++) {   // rows rank q's experts receive
        int rq = 0;
        for (int p = 0; p < ep; p++)
            for (int e = 0; e < El; e++) {
                int n = (int)M->h_cf[(size_t)p * E + q * El + e];
                rq += n;
                if (q == me)
                    A->h_recv[p * El + e] = n;
            }
        most = rq > most ? rq : most;
    }
    return most;
}

void cumoe_fwd_route(CuMoe *M, CuMoeActs *A, const kc_bf16 *a2, const kc_bf16 *wr)
{
    int N = M->N, C = M->C, E = M->E, K = M->K, me = M->ep_rank;
    cudaStream_t st = M->st;
    kc_matmul_fwd(M->logits, a2, wr, NULL, N, C, E, st);
    kc_moe_router_fwd(A->probs, A->topi, A->topw, M->logits, N, E, K, st);
    kc_moe_route_map(M->cnt, M->off, A->row_of, A->src_of, M->ws, A->topi, N, K, E, st);
    kc_moe_counts_f32(M->cf_send + (size_t)me * E, M->cnt, E, st);
    if (M->cc) {   // the counts' all-gather on the comm stream while the rows are permuted
        CHECK_CUDA(cudaEventRecord(M->ev_c, st));
        CHECK_CUDA(cudaStreamWaitEvent(M->cs, M->ev_c, 0));
        cucomm_allgather(M->cc, CC_EP, M->cf_send, (size_t)E, CC_F32, M->cs);   // in place, rank order
        CHECK_CUDA(cudaMemcpyAsync(M->h_cf, M->cf_send, (size_t)M->ep * E * sizeof(float), cudaMemcpyDeviceToHost,
                                   M->cs));
        CHECK_CUDA(cudaEventRecord(M->ev_h, M->cs));
    } else {
        CHECK_CUDA(cudaMemcpyAsync(M->h_cf, M->cf_send, (size_t)E * sizeof(float), cudaMemcpyDeviceToHost, st));
        CHECK_CUDA(cudaEventRecord(M->ev_h, st));
    }
    kc_moe_gather_rows(M->sendb, a2, A->src_of, N * K, C, st);   // by expert, hence by destination rank
}

int cumoe_fwd_experts(CuMoe *M, CuMoeActs *A, kc_bf16 *out, const kc_bf16 *w1, const kc_bf16 *w2, char *err,
                      int errlen)
{
    int N = M->N, C = M->C, E = M->E, K = M->K, El = M->El, ep = M->ep, me = M->ep_rank;
    cudaStream_t st = M->st;
    if (ep > 64)
        FAIL("MoE: \"ep\": %d (the CUDA dispatch takes up to 64)", ep);
    CHECK_CUDA(cudaEventSynchronize(M->ev_h));   // the one host wait: the GEMM and message sizes
    for (int p = 0; p < ep; p++) {
        A->h_send[p] = 0;
        for (int e = 0; e < El; e++)
            A->h_send[p] += (int)M->h_cf[(size_t)me * E + p * El + e];
    }
    int most = exchange_counts(M, A);
    A->R = most > M->cap ? -1 : 0;   // -1: the backward skips this block (on every ep rank alike)
    if (most > M->cap)   // the same on every ep rank: all stop before the dispatch
        FAIL("MoE: an ep rank's %d experts received %d token rows, more than the %d its buffers hold (imbalance "
             "%.2f of the even %d); plan with a larger --moe-imbalance", El, most, M->cap, (double)most / (N * K),
             N * K);
    int R = 0, rp[64];
    for (int p = 0; p < ep; p++) {
        rp[p] = 0;
        for (int e = 0; e < El; e++)
            rp[p] += A->h_recv[p * El + e];
        R += rp[p];
    }
    A->R = R;
    /* received [peer][expert] -> expert-major [expert][peer], and the inverse */
    int *idx = M->h_idx, *inv = M->h_idx + M->cap, at = 0;
    for (int e = 0; e < El; e++) {
        A->h_lcnt[e] = 0;
        for (int p = 0; p < ep; p++) {
            int base = 0;
            for (int q = 0; q < p; q++)
                base += rp[q];
            for (int j = 0; j < e; j++)
                base += A->h_recv[p * El + j];
            for (int i = 0; i < A->h_recv[p * El + e]; i++, at++) {
                idx[at] = base + i;
                inv[base + i] = at;
            }
            A->h_lcnt[e] += A->h_recv[p * El + e];
        }
    }
    CHECK_CUDA(cudaMemcpyAsync(A->d_idx, idx, R * sizeof(int), cudaMemcpyHostToDevice, st));
    CHECK_CUDA(cudaMemcpyAsync(A->d_inv, inv, R * sizeof(int), cudaMemcpyHostToDevice, st));
    a2a(M, M->sendb, A->h_send, M->recvb, rp);
    kc_moe_gather_rows(A->xe, M->recvb, A->d_idx, R, C, st);
    kc_moe_gemm_fwd(A->h1, A->xe, w1, A->h_lcnt, El, C, M->F1e, st);
    if (M->swiglu)
        kc_swiglu_fwd(A->ha, A->h1, R, M->Fe, st);
    else
        kc_gelu_fwd(A->ha, A->h1, (size_t)R * M->Fe, st);
    kc_moe_gemm_fwd(M->ye, A->ha, w2, A->h_lcnt, El, M->Fe, C, st);
    kc_moe_gather_rows(M->recvb, M->ye, A->d_inv, R, C, st);     // back to [peer][expert]
    a2a(M, M->recvb, rp, A->rows, A->h_send);                     // combine: the rows come home
    kc_moe_combine_fwd(out, A->rows, A->row_of, A->topw, N, K, C, st);
    return 0;   // idx/inv were staged from pageable memory before their copies returned: M->h_idx is free
}

int cumoe_fwd(CuMoe *M, CuMoeActs *A, kc_bf16 *out, const kc_bf16 *a2, const kc_bf16 *wr, const kc_bf16 *w1,
              const kc_bf16 *w2, char *err, int errlen)
{
    cumoe_fwd_route(M, A, a2, wr);
    return cumoe_fwd_experts(M, A, out, w1, w2, err, errlen);
}

void cumoe_bwd(CuMoe *M, CuMoeActs *A, kc_bf16 *da2, const kc_bf16 *dout, const kc_bf16 *a2, const kc_bf16 *wr,
               const kc_bf16 *w1, const kc_bf16 *w2, float *dwr, float *dw1, float *dw2, float aux_g, int seq)
{
    int N = M->N, C = M->C, E = M->E, K = M->K, El = M->El, ep = M->ep, R = A->R;
    cudaStream_t st = M->st;
    size_t bf = sizeof(kc_bf16);
    if (R < 0)   // its forward overflowed on this ep group: nothing was dispatched, the step fails
        return;
    int rp[64];
    for (int p = 0; p < ep; p++) {
        rp[p] = 0;
        for (int e = 0; e < El; e++)
            rp[p] += A->h_recv[p * El + e];
    }
    kc_moe_combine_bwd(M->sendb, M->dtopw, dout, A->rows, A->row_of, A->topw, N, K, C, st);
    a2a(M, M->sendb, A->h_send, M->recvb, rp);                    // the gradients of the expert outputs
    kc_moe_gather_rows(M->ye, M->recvb, A->d_idx, R, C, st);
    CHECK_CUDA(cudaMemsetAsync(M->dha, 0, (size_t)R * M->Fe * bf, st));
    kc_moe_gemm_bwd(M->dha, dw2, M->ye, A->ha, w2, A->h_lcnt, El, M->Fe, C, st);
    CHECK_CUDA(cudaMemsetAsync(M->dh1, 0, (size_t)R * M->F1e * bf, st));
    if (M->swiglu)
        kc_swiglu_bwd(M->dh1, A->h1, M->dha, R, M->Fe, st);
    else
        kc_gelu_bwd(M->dh1, A->h1, M->dha, (size_t)R * M->Fe, st);
    CHECK_CUDA(cudaMemsetAsync(M->dxe, 0, (size_t)R * C * bf, st));
    kc_moe_gemm_bwd(M->dxe, dw1, M->dh1, A->xe, w1, A->h_lcnt, El, C, M->F1e, st);
    kc_moe_gather_rows(M->recvb, M->dxe, A->d_inv, R, C, st);
    a2a(M, M->recvb, rp, M->sendb, A->h_send);                    // input gradients come home
    kc_moe_permute_bwd(da2, M->sendb, A->row_of, N, K, C, st);
    int sq = seq > 0 && N % seq == 0 ? seq : N;
    if (aux_g != 0.0f)
        kc_moe_seq_counts(M->scnt, A->topi, N, K, E, sq, st);
    kc_moe_router_bwd(M->logits, M->dtopw, A->probs, A->topi, A->topw, aux_g != 0.0f ? M->scnt : NULL, sq, aux_g,
                      N, E, K, st);
    kc_matmul_bwd(da2, dwr, NULL, M->logits, a2, wr, N, C, E, st);
}
