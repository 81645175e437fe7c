/* test_cuda_exec_moe.c — the CUDA executor's routed MoE block (cumoe.h)
 * against a host reference in double, on one GPU or under mpirun with the
 * world as the ep group (one rank per GPU, etp 1): every rank routes its own
 * tokens to the E experts held E/ep per rank, so the dispatch and combine
 * over NCCL must bring back exactly what the reference computes with all
 * experts on the host. Checked: the combined output and the input gradient
 * of this rank's tokens, the router weight's gradient (this rank's tokens),
 * and the gradients of this rank's experts (the sum over every rank's
 * tokens: each rank regenerates the others' inputs from the seed), within
 * bf16 tolerance; for GELU and SwiGLU experts, with the load-balancing
 * loss's gradient (per sequence, as the CPU executor's seq_aux_loss).
 *
 *   test_cuda_exec_moe                    one GPU (ep 1)
 *   mpirun -np P test_cuda_exec_moe       ep P (P divides 8)
 *
 * Exits 77 without a GPU, or with fewer GPUs on the node than its ranks. */
#include <math.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cumoe.h"
#include "dist.h"

enum { N = 96, C = 64, E = 8, K = 2, FE = 48, SEQ = 48 };
static int fails, rank_ = 0;
#define CHECK(cond, ...) do { if (!(cond)) { fails++; printf("[rank %d] FAIL: ", rank_); printf(__VA_ARGS__); \
        printf("\n"); } } while (0)

static uint64_t rs;
static float frand(void)
{
    rs ^= rs << 13, rs ^= rs >> 7, rs ^= rs << 17;
    return (float)((rs >> 40) / (double)(1ull << 24)) * 2.0f - 1.0f;
}
static float bfr(float f)   // round to bf16, nearest even
{
    uint32_t u;
    memcpy(&u, &f, 4);
    u += 0x7fffu + ((u >> 16) & 1u);
    u &= 0xffff0000u;
    memcpy(&f, &u, 4);
    return f;
}
static void fill(float *x, size_t n, float a, uint64_t seed)
{
    rs = seed * 0x9E3779B97F4A7C15ull + 7;
    for (size_t i = 0; i < n; i++)
        x[i] = bfr(a * frand());
}
static kc_bf16 *up(const float *x, size_t n)
{
    unsigned short *t = malloc(n * 2);
    for (size_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, &x[i], 4);
        t[i] = (unsigned short)(u >> 16);   // already bf16
    }
    kc_bf16 *d;
    CHECK_CUDA(cudaMalloc((void **)&d, n * 2));
    CHECK_CUDA(cudaMemcpy(d, t, n * 2, cudaMemcpyHostToDevice));
    free(t);
    return d;
}
static float *down_bf(const kc_bf16 *d, size_t n)
{
    unsigned short *t = malloc(n * 2);
    CHECK_CUDA(cudaMemcpy(t, d, n * 2, cudaMemcpyDeviceToHost));
    float *x = malloc(n * 4);
    for (size_t i = 0; i < n; i++) {
        uint32_t u = (uint32_t)t[i] << 16;
        memcpy(&x[i], &u, 4);
    }
    free(t);
    return x;
}
static float *down_f(const float *d, size_t n)
{
    float *x = malloc(n * 4);
    CHECK_CUDA(cudaMemcpy(x, d, n * 4, cudaMemcpyDeviceToHost));
    return x;
}
static void close_to(const char *what, const float *got, const double *want, size_t n, double atol, double rtol)
{
    int bad = 0;
    double mx = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs(got[i] - want[i]);
        if (!(d <= atol + rtol * fabs(want[i]))) {
            if (bad < 4)
                printf("[rank %d]   %s[%zu]: gpu %.6g ref %.6g\n", rank_, what, i, got[i], want[i]);
            bad++;
        }
        mx = d > mx || isnan(d) ? d : mx;
    }
    CHECK(!bad, "%s: %d of %zu out of tolerance (max |diff| %.3g)", what, bad, n, mx);
    if (!bad)
        printf("[rank %d] %-12s ok, max |diff| %.3g\n", rank_, what, mx);
}

static double gelu(double x) { return 0.5 * x * (1 + tanh(0.7978845608028654 * (x + 0.044715 * x * x * x))); }
static double gelu_d(double x)
{
    double u = 0.7978845608028654 * (x + 0.044715 * x * x * x), t = tanh(u);
    return 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * 0.7978845608028654 * (1 + 3 * 0.044715 * x * x);
}
static double sig(double x) { return 1 / (1 + exp(-x)); }

/* the reference for the tokens a (N, C) of one rank: out, da, dwr (+=), dw1, dw2 (+=, all experts) */
static void reference(int swiglu, const float *a, const float *dout, const float *wr, const float *w1,
                      const float *w2, float aux_g, double *out, double *da, double *dwr, double *dw1, double *dw2)
{
    int F1 = swiglu ? 2 * FE : FE;
    double lg[N][E], p[N][E], tw[N][K];
    int ti[N][K], cnt[N / SEQ][E];
    memset(cnt, 0, sizeof cnt);
    for (int n = 0; n < N; n++) {
        double mx = -INFINITY, s = 0;
        for (int e = 0; e < E; e++) {
            double z = 0;
            for (int c = 0; c < C; c++)
                z += (double)a[n * C + c] * wr[e * C + c];
            lg[n][e] = bfr((float)z);   // the GPU's logits are bf16
            mx = lg[n][e] > mx ? lg[n][e] : mx;
        }
        for (int e = 0; e < E; e++)
            s += exp(lg[n][e] - mx);
        for (int e = 0; e < E; e++)
            p[n][e] = exp(lg[n][e] - mx) / s;
        double tot = 0;
        for (int k = 0; k < K; k++) {
            int bi = -1;
            for (int e = 0; e < E; e++) {
                int used = 0;
                for (int j = 0; j < k; j++)
                    used |= ti[n][j] == e;
                if (!used && (bi < 0 || lg[n][e] > lg[n][bi]))
                    bi = e;
            }
            ti[n][k] = bi;
            tot += p[n][bi];
            cnt[n / SEQ][bi]++;
        }
        for (int k = 0; k < K; k++)
            tw[n][k] = p[n][ti[n][k]] / tot;
    }
    double *h1 = malloc(F1 * sizeof *h1), *ha = malloc(FE * sizeof *ha), *dh1 = malloc(F1 * sizeof *dh1),
           *dha = malloc(FE * sizeof *dha);
    for (int n = 0; n < N; n++) {
        const float *x = a + n * C;
        double dtw[K];
        for (int c = 0; c < C; c++)
            out[n * C + c] = 0;
        for (int k = 0; k < K; k++) {
            int e = ti[n][k];
            const float *W1 = w1 + (size_t)e * F1 * C, *W2 = w2 + (size_t)e * C * FE;
            for (int f = 0; f < F1; f++) {
                double z = 0;
                for (int c = 0; c < C; c++)
                    z += (double)x[c] * W1[f * C + c];
                h1[f] = z;
            }
            for (int f = 0; f < FE; f++)
                ha[f] = swiglu ? h1[f] * sig(h1[f]) * h1[FE + f] : gelu(h1[f]);
            double d = 0;
            for (int c = 0; c < C; c++) {
                double y = 0;
                for (int f = 0; f < FE; f++)
                    y += ha[f] * W2[c * FE + f];
                out[n * C + c] += tw[n][k] * y;
                d += (double)dout[n * C + c] * y;
            }
            dtw[k] = d;
            /* backward of this expert for this token: dy = tw·dout */
            for (int f = 0; f < FE; f++) {
                double s = 0;
                for (int c = 0; c < C; c++) {
                    double dy = tw[n][k] * dout[n * C + c];
                    s += dy * W2[c * FE + f];
                    dw2[(size_t)e * C * FE + c * FE + f] += dy * ha[f];
                }
                dha[f] = s;
            }
            for (int f = 0; f < FE; f++) {
                if (swiglu) {
                    double g = h1[f], u = h1[FE + f], sg = sig(g);
                    dh1[f] = dha[f] * u * sg * (1 + g * (1 - sg));
                    dh1[FE + f] = dha[f] * g * sg;
                } else {
                    dh1[f] = dha[f] * gelu_d(h1[f]);
                }
            }
            for (int c = 0; c < C; c++) {
                double s = 0;
                for (int f = 0; f < F1; f++) {
                    s += dh1[f] * W1[f * C + c];
                    dw1[(size_t)e * F1 * C + f * C + c] += dh1[f] * x[c];
                }
                da[n * C + c] += s;
            }
        }
        /* router: through the renormalised top-k and the softmax, plus the aux term */
        double dot = 0, S = 0, dp[E], g = 0;
        for (int k = 0; k < K; k++)
            dot += dtw[k] * tw[n][k], S += p[n][ti[n][k]];
        for (int e = 0; e < E; e++)
            dp[e] = (double)aux_g * cnt[n / SEQ][e];
        for (int k = 0; k < K; k++)
            dp[ti[n][k]] += (dtw[k] - dot) / S;
        for (int e = 0; e < E; e++)
            g += p[n][e] * dp[e];
        for (int e = 0; e < E; e++) {
            double dl = bfr((float)(p[n][e] * (dp[e] - g)));   // the GPU's dlogits are bf16
            for (int c = 0; c < C; c++) {
                da[n * C + c] += dl * wr[e * C + c];
                dwr[e * C + c] += dl * x[c];
            }
        }
    }
    free(h1), free(ha), free(dh1), free(dha);
}

static void run(int swiglu, int ep, int me, CuComm *cc, cudaStream_t st)
{
    int F1 = swiglu ? 2 * FE : FE, El = E / ep;
    float aux_g = 1e-2f * E / ((float)SEQ * SEQ * K);
    size_t nw1 = (size_t)E * F1 * C, nw2 = (size_t)E * C * FE;
    float *wr = malloc(E * C * 4), *w1 = malloc(nw1 * 4), *w2 = malloc(nw2 * 4);
    fill(wr, E * C, 0.5f, 11), fill(w1, nw1, 0.25f, 12), fill(w2, nw2, 0.25f, 13);
    float *a = malloc(N * C * 4), *dout = malloc(N * C * 4);
    double *out = calloc(N * C, 8), *da = calloc(N * C, 8), *dwr = calloc(E * C, 8), *dw1 = calloc(nw1, 8),
           *dw2 = calloc(nw2, 8), *junk = calloc(N * C, 8), *jr = calloc(E * C, 8);
    for (int q = 0; q < ep; q++) {   // every rank's tokens: the experts' gradients sum over them
        fill(a, N * C, 1.0f, 100 + q), fill(dout, N * C, 0.5f, 200 + q);
        reference(swiglu, a, dout, wr, w1, w2, aux_g, q == me ? out : junk, q == me ? da : junk, q == me ? dwr : jr,
                  dw1, dw2);
        memset(junk, 0, N * C * 8);
    }
    fill(a, N * C, 1.0f, 100 + me), fill(dout, N * C, 0.5f, 200 + me);
    kc_bf16 *d_a = up(a, N * C), *d_dout = up(dout, N * C), *d_wr = up(wr, E * C),
            *d_w1 = up(w1 + (size_t)me * El * F1 * C, (size_t)El * F1 * C),
            *d_w2 = up(w2 + (size_t)me * El * C * FE, (size_t)El * C * FE), *d_out, *d_da;
    float *d_dwr, *d_dw1, *d_dw2;
    CHECK_CUDA(cudaMalloc((void **)&d_out, N * C * 2));
    CHECK_CUDA(cudaMalloc((void **)&d_da, N * C * 2));
    CHECK_CUDA(cudaMemset(d_da, 0, N * C * 2));
    CHECK_CUDA(cudaMalloc((void **)&d_dwr, E * C * 4));
    CHECK_CUDA(cudaMalloc((void **)&d_dw1, (size_t)El * F1 * C * 4));
    CHECK_CUDA(cudaMalloc((void **)&d_dw2, (size_t)El * C * FE * 4));
    CHECK_CUDA(cudaMemset(d_dwr, 0, E * C * 4));
    CHECK_CUDA(cudaMemset(d_dw1, 0, (size_t)El * F1 * C * 4));
    CHECK_CUDA(cudaMemset(d_dw2, 0, (size_t)El * C * FE * 4));
    CuMoe M;
    CuMoeActs A;
    char err[256];
    if (cumoe_init(&M, N, C, E, K, FE, swiglu, (double)ep, cc, st, err, sizeof err) != 0 ||
        cumoe_acts_alloc(&M, &A, err, sizeof err) != 0) {
        CHECK(0, "%s", err);
        return;
    }
    CHECK(cumoe_fwd(&M, &A, d_out, d_a, d_wr, d_w1, d_w2, err, sizeof err) == 0, "fwd: %s", err);
    cumoe_bwd(&M, &A, d_da, d_dout, d_a, d_wr, d_w1, d_w2, d_dwr, d_dw1, d_dw2, aux_g, SEQ);
    CHECK_CUDA(cudaStreamSynchronize(st));
    printf("[rank %d] %s experts, ep %d: %d rows received\n", me, swiglu ? "SwiGLU" : "GELU", ep, A.R);
    float *g;
    close_to("out", g = down_bf(d_out, N * C), out, N * C, 3e-2, 3e-2), free(g);
    close_to("da2", g = down_bf(d_da, N * C), da, N * C, 3e-2, 3e-2), free(g);
    close_to("drouter", g = down_f(d_dwr, E * C), dwr, E * C, 3e-2, 3e-2), free(g);
    close_to("dexpert_fc1", g = down_f(d_dw1, (size_t)El * F1 * C), dw1 + (size_t)me * El * F1 * C,
             (size_t)El * F1 * C, 3e-2, 3e-2), free(g);
    close_to("dexpert_fc2", g = down_f(d_dw2, (size_t)El * C * FE), dw2 + (size_t)me * El * C * FE,
             (size_t)El * C * FE, 3e-2, 3e-2), free(g);
    cumoe_acts_free(&A);
    cumoe_free(&M);
    cudaFree(d_a), cudaFree(d_dout), cudaFree(d_wr), cudaFree(d_w1), cudaFree(d_w2), cudaFree(d_out);
    cudaFree(d_da), cudaFree(d_dwr), cudaFree(d_dw1), cudaFree(d_dw2);
    free(wr), free(w1), free(w2), free(a), free(dout), free(out), free(da), free(dwr), free(dw1), free(dw2);
    free(junk), free(jr);
}

int main(void)
{
    int ndev = kc_device_count();
    if (ndev < 1) {
        printf("test_cuda_exec_moe: no CUDA device, skipped\n");
        return 77;
    }
    MPI_Init(NULL, NULL);
    int world = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &world);
    int local_n = 1, local = dist_local_rank(&local_n);
    if (local_n > ndev || E % world) {
        if (rank_ == 0)
            printf("test_cuda_exec_moe: %d ranks on a node with %d GPU(s), or ep %d not dividing %d experts: "
                   "skipped\n", local_n, ndev, world, E);
        MPI_Finalize();
        return 77;
    }
    CHECK_CUDA(cudaSetDevice(local % ndev));
    Dist d;
    char err[256];
    CuComm *cc = NULL;
    if (world > 1) {
        if (dist_init(&d, 1, 1, world, 1, err, sizeof err) != 0 || dist_init_experts(&d, world, 1, err, sizeof err) ||
            !(cc = cucomm_init(&d, 0, 0, err, sizeof err)) || cucomm_init_moe(cc, &d, err, sizeof err) != 0) {
            printf("[rank %d] set-up: %s\n", rank_, err);
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
    }
    cudaStream_t st;
    CHECK_CUDA(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    kc_init();
    run(0, world, rank_, cc, st);
    run(1, world, rank_, cc, st);
    printf("[rank %d] expert GEMMs: %s\n", rank_,   // the last ones' path, for the log
           kc_moe_gemm_grouped_used() == 1 ? "cublasGemmGroupedBatchedEx" : "cuBLASLt loop");
    CHECK_CUDA(cudaStreamDestroy(st));
    if (cc)
        cucomm_free(cc);
    kc_free();
    int all = 0;
    MPI_Allreduce(&fails, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (world > 1)
        dist_free(&d);
    MPI_Finalize();
    if (rank_ == 0)
        printf("test_cuda_exec_moe: %s (%d failures over %d rank(s))\n", all ? "FAIL" : "ok", all, world);
    return all != 0;
}
