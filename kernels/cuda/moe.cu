/* moe.cu — the mixture-of-experts kernels of kernels_cuda.h: router
 * (softmax, top-k by logit with index tie-breaking, renormalised weights)
 * and its backward with the load-balancing loss, the stable permutation by
 * expert (block histograms, a scan, in-block ranks: no atomics on the
 * outputs), row gathers, the weighted combine, their backwards, and the
 * grouped expert GEMMs through cublasGemmGroupedBatchedEx (falling back to
 * one cuBLASLt GEMM per expert).
 *
 * What it doesn't: capacity factor / token dropping, sigmoid or
 * group-limited routing (DeepSeek-V3's), expert bias (aux-loss-free
 * balancing), fp8. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cublas_v2.h>
#include "common.cuh"

/* ---- router --------------------------------------------------------------- */

/* one warp per token */
__global__ void router_fwd_kernel(float *probs, int *topi, float *topw, const bf16 *logits, int N, int E, int K) {
    int n = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5), lane = threadIdx.x & 31;
    if (n >= N) return;
    const bf16 *l = logits + (size_t)n * E;
    float *p = probs + (size_t)n * E;
    float mx = -INFINITY;
    for (int e = lane; e < E; e += 32) mx = fmaxf(mx, __bfloat162float(l[e]));
    mx = warp_max(mx);
    float s = 0.0f;
    for (int e = lane; e < E; e += 32) s += expf(__bfloat162float(l[e]) - mx);
    s = warp_sum(s);
    for (int e = lane; e < E; e += 32) p[e] = expf(__bfloat162float(l[e]) - mx) / s;
    __syncwarp();
    int chosen[KC_MOE_MAX_K];
    float pk[KC_MOE_MAX_K], tot = 0.0f;
    for (int k = 0; k < K; k++) {
        float best = -INFINITY;
        int bi = E;
        for (int e = lane; e < E; e += 32) {
            bool used = false;
            for (int j = 0; j < k; j++) used |= chosen[j] == e;
            float v = __bfloat162float(l[e]);
            if (!used && (v > best || (v == best && e < bi))) best = v, bi = e;
        }
        for (int o = 16; o > 0; o >>= 1) {   // (larger logit, then lower index)
            float ob = __shfl_xor_sync(0xffffffffu, best, o);
            int oi = __shfl_xor_sync(0xffffffffu, bi, o);
            if (ob > best || (ob == best && oi < bi)) best = ob, bi = oi;
        }
        chosen[k] = bi;
        pk[k] = p[bi];
        tot += pk[k];
    }
    for (int k = 0; k < K; k++)
        if (k == lane) {
            topi[(size_t)n * K + k] = chosen[k];
            topw[(size_t)n * K + k] = K == 1 ? 1.0f : pk[k] / tot;
        }
}

void kc_moe_router_fwd(float *probs, int *topi, float *topw, const kc_bf16 *logits, int N, int E, int K,
                       cudaStream_t st) {
    if (E > KC_MOE_MAX_E || K > KC_MOE_MAX_K || K > E || K < 1)
        kc_fail("kc_moe_router_fwd", "E > KC_MOE_MAX_E, K > KC_MOE_MAX_K, or K not in 1..E", __FILE__, __LINE__);
    if (N <= 0) return;
    router_fwd_kernel<<<ceil_div(N, 4), 128, 0, st>>>(probs, topi, topw, logits, N, E, K);
    CHECK_LAUNCH();
}

__global__ void router_bwd_kernel(bf16 *dlogits, const float *dtopw, const float *probs, const int *topi,
                                  const float *topw, const int *counts, int seq, float aux_g, int N, int E,
                                  int K) {
    int n = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5), lane = threadIdx.x & 31;
    if (n >= N) return;
    const int *cn = counts ? counts + (size_t)(n / seq) * E : NULL;
    const float *p = probs + (size_t)n * E;
    const int *ti = topi + (size_t)n * K;
    float dot = 0.0f, S = 0.0f;   // Σ dtopw·topw, Σ top-k probs
    for (int k = 0; k < K; k++) {
        S += p[ti[k]];
        if (dtopw) dot += dtopw[(size_t)n * K + k] * topw[(size_t)n * K + k];
    }
    float g = 0.0f;
    for (int e = lane; e < E; e += 32) {
        float dp = cn ? aux_g * (float)cn[e] : 0.0f;
        if (dtopw && K > 1)
            for (int k = 0; k < K; k++)
                if (ti[k] == e) dp += (dtopw[(size_t)n * K + k] - dot) / S;
        g += p[e] * dp;
    }
    g = warp_sum(g);
    for (int e = lane; e < E; e += 32) {
        float dp = cn ? aux_g * (float)cn[e] : 0.0f;
        if (dtopw && K > 1)
            for (int k = 0; k < K; k++)
                if (ti[k] == e) dp += (dtopw[(size_t)n * K + k] - dot) / S;
        dlogits[(size_t)n * E + e] = __float2bfloat16(p[e] * (dp - g));
    }
}

void kc_moe_router_bwd(kc_bf16 *dlogits, const float *dtopw, const float *probs, const int *topi,
                       const float *topw, const int *counts, int seq, float aux_g, int N, int E, int K,
                       cudaStream_t st) {
    if (N <= 0) return;
    if (aux_g == 0.0f) counts = NULL;
    if (counts && (seq <= 0 || N % seq))
        kc_fail("kc_moe_router_bwd", "seq must divide N", __FILE__, __LINE__);
    router_bwd_kernel<<<ceil_div(N, 4), 128, 0, st>>>(dlogits, dtopw, probs, topi, topw, counts, seq, aux_g, N, E,
                                                      K);
    CHECK_LAUNCH();
}

__global__ void seq_counts_kernel(int *counts, const int *topi, int K, int E, int seq, int S) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= S * E) return;
    int s = i / E, e = i % E, c = 0;
    const int *t = topi + (size_t)s * seq * K;
    for (int j = 0; j < seq * K; j++) c += t[j] == e;
    counts[i] = c;
}

void kc_moe_seq_counts(int *counts, const int *topi, int N, int K, int E, int seq, cudaStream_t st) {
    if (seq <= 0 || N % seq)
        kc_fail("kc_moe_seq_counts", "seq must divide N", __FILE__, __LINE__);
    int S = N / seq;
    if (S * E <= 0) return;
    seq_counts_kernel<<<ceil_div((size_t)S * E, 128), 128, 0, st>>>(counts, topi, K, E, seq, S);
    CHECK_LAUNCH();
}

__global__ void prob_sums_kernel(float *psum, const float *probs, int N, int E) {
    int e = blockIdx.x * blockDim.x + threadIdx.x;
    if (e >= E) return;
    float s = 0.0f;
    for (int n = 0; n < N; n++) s += probs[(size_t)n * E + e];
    psum[e] = s;
}

void kc_moe_prob_sums(float *psum, const float *probs, int N, int E, cudaStream_t st) {
    prob_sums_kernel<<<ceil_div(E, 128), 128, 0, st>>>(psum, probs, N, E);
    CHECK_LAUNCH();
}

/* ---- the permutation ------------------------------------------------------ */

enum { MAP_BLOCK = 256 };

size_t kc_moe_map_ws_ints(int R, int E) { return (size_t)ceil_div(R > 0 ? R : 1, MAP_BLOCK) * E; }

/* hist[b][e]: slots of block b routed to e */
__global__ void map_hist_kernel(int *hist, const int *topi, int R, int E) {
    extern __shared__ int h[];
    for (int e = threadIdx.x; e < E; e += blockDim.x) h[e] = 0;
    __syncthreads();
    int i = blockIdx.x * MAP_BLOCK + threadIdx.x;
    if (i < R) atomicAdd(&h[topi[i]], 1);   // shared counts: the sums, not their order, leave the block
    __syncthreads();
    for (int e = threadIdx.x; e < E; e += blockDim.x) hist[(size_t)blockIdx.x * E + e] = h[e];
}

/* hist -> each block's base within its expert; counts, offsets */
__global__ void map_scan_kernel(int *hist, int *counts, int *offsets, int nb, int E) {
    for (int e = threadIdx.x; e < E; e += blockDim.x) {
        int run = 0;
        for (int b = 0; b < nb; b++) {
            int c = hist[(size_t)b * E + e];
            hist[(size_t)b * E + e] = run;
            run += c;
        }
        counts[e] = run;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        int run = 0;
        for (int e = 0; e < E; e++) {
            offsets[e] = run;
            run += counts[e];
        }
        offsets[E] = run;
    }
}

__global__ void map_place_kernel(int *row_of, int *src_of, const int *base, const int *offsets, const int *topi,
                                 int R, int K, int E) {
    __shared__ int ex[MAP_BLOCK];
    int i0 = blockIdx.x * MAP_BLOCK, i = i0 + threadIdx.x;
    ex[threadIdx.x] = i < R ? topi[i] : -1;
    __syncthreads();
    if (i >= R) return;
    int e = ex[threadIdx.x], rank = 0;
    for (int j = 0; j < (int)threadIdx.x; j++) rank += ex[j] == e;
    int row = offsets[e] + base[(size_t)blockIdx.x * E + e] + rank;
    row_of[i] = row;
    src_of[row] = i / K;
}

void kc_moe_route_map(int *counts, int *offsets, int *row_of, int *src_of, int *ws, const int *topi, int N,
                      int K, int E, cudaStream_t st) {
    int R = N * K, nb = (int)ceil_div(R > 0 ? R : 1, MAP_BLOCK);
    if (E > KC_MOE_MAX_E)
        kc_fail("kc_moe_route_map", "E > KC_MOE_MAX_E", __FILE__, __LINE__);
    if (R <= 0) {
        CHECK_CUDA(cudaMemsetAsync(counts, 0, E * sizeof(int), st));
        CHECK_CUDA(cudaMemsetAsync(offsets, 0, (E + 1) * sizeof(int), st));
        return;
    }
    map_hist_kernel<<<nb, MAP_BLOCK, E * sizeof(int), st>>>(ws, topi, R, E);
    CHECK_LAUNCH();
    map_scan_kernel<<<1, 256, 0, st>>>(ws, counts, offsets, nb, E);
    CHECK_LAUNCH();
    map_place_kernel<<<nb, MAP_BLOCK, 0, st>>>(row_of, src_of, ws, offsets, topi, R, K, E);
    CHECK_LAUNCH();
}

/* The permutation kernels move whole rows: with C % 8 == 0 and 16-byte
 * aligned tensors (every row then is) each thread moves 16 bytes at a time,
 * two loads in flight before the first store (vec); else one element at a
 * time. One block of 128 a row: at C = 2048, 256 chunks, two a thread. */
enum { MOE_ROW_THREADS = 128 };

/* one block per output row */
template <bool vec>
__global__ void gather_rows_kernel(bf16 *out, const bf16 *in, const int *src, int C) {
    int r = blockIdx.x;
    const bf16 *a = in + (size_t)src[r] * C;
    bf16 *b = out + (size_t)r * C;
    if constexpr (vec) {
        const Pack8 *a8 = (const Pack8 *)a;
        Pack8 *b8 = (Pack8 *)b;
        int n8 = C / 8;
        for (int c = threadIdx.x; c < n8; c += 2 * blockDim.x) {
            int c2 = c + blockDim.x;
            Pack8 p = a8[c], q;
            if (c2 < n8) q = a8[c2];
            b8[c] = p;
            if (c2 < n8) b8[c2] = q;
        }
    } else {
        for (int c = threadIdx.x; c < C; c += blockDim.x) b[c] = a[c];
    }
}

static bool rows_vec(int C, const void *a, const void *b, const void *c = NULL) {
    return C % 8 == 0 && aligned16(a) && aligned16(b) && (!c || aligned16(c));
}

void kc_moe_gather_rows(kc_bf16 *out, const kc_bf16 *in, const int *src, int R, int C, cudaStream_t st) {
    if (R <= 0 || C <= 0) return;
    auto kernel = rows_vec(C, in, out) ? gather_rows_kernel<true> : gather_rows_kernel<false>;
    kernel<<<R, MOE_ROW_THREADS, 0, st>>>(out, in, src, C);
    CHECK_LAUNCH();
}

/* out[n] (=|+=) Σ_k (w ? w[n][k] : 1)·rows[row_of[n·K + k]], one block per
 * token; vec: a thread's 8 columns of all K rows loaded before they are
 * summed (fp32, in k order, as the scalar path) */
template <bool vec>
__global__ void combine_kernel(bf16 *out, const bf16 *rows, const int *row_of, const float *w, int K, int C,
                               int accumulate) {
    int n = blockIdx.x;
    const int *ro = row_of + (size_t)n * K;
    const float *wn = w ? w + (size_t)n * K : NULL;
    if constexpr (vec) {
        for (int c = threadIdx.x * 8; c < C; c += blockDim.x * 8) {
            float s[8] = {0, 0, 0, 0, 0, 0, 0, 0}, x[8];
            for (int k = 0; k < K; k++) {
                load8(x, rows + (size_t)ro[k] * C, c, C, true);
                float wk = wn ? wn[k] : 1.0f;
                for (int j = 0; j < 8; j++) s[j] += wk * x[j];
            }
            if (accumulate) {
                load8(x, out + (size_t)n * C, c, C, true);
                for (int j = 0; j < 8; j++) s[j] += x[j];
            }
            store8(out + (size_t)n * C, s, c, C, true);
        }
    } else {
        for (int c = threadIdx.x; c < C; c += blockDim.x) {
            float s = 0.0f;
            for (int k = 0; k < K; k++) {
                int r = ro[k];
                s += (wn ? wn[k] : 1.0f) * __bfloat162float(rows[(size_t)r * C + c]);
            }
            if (accumulate) s += __bfloat162float(out[(size_t)n * C + c]);
            out[(size_t)n * C + c] = __float2bfloat16(s);
        }
    }
}

void kc_moe_permute_bwd(kc_bf16 *dx, const kc_bf16 *drows, const int *row_of, int N, int K, int C,
                        cudaStream_t st) {
    if (N <= 0 || C <= 0) return;
    auto kernel = rows_vec(C, dx, drows) ? combine_kernel<true> : combine_kernel<false>;
    kernel<<<N, MOE_ROW_THREADS, 0, st>>>(dx, drows, row_of, NULL, K, C, 1);
    CHECK_LAUNCH();
}

void kc_moe_combine_fwd(kc_bf16 *out, const kc_bf16 *rows, const int *row_of, const float *topw, int N, int K,
                        int C, cudaStream_t st) {
    if (N <= 0 || C <= 0) return;
    auto kernel = rows_vec(C, out, rows) ? combine_kernel<true> : combine_kernel<false>;
    kernel<<<N, MOE_ROW_THREADS, 0, st>>>(out, rows, row_of, topw, K, C, 0);
    CHECK_LAUNCH();
}

/* drows[row_of[n·K + k]] = w[n][k]·dout[n], dtopw[n][k] = dout[n]·rows[...];
 * vec: dout's 8 columns loaded once for all K (the scalar path re-reads them
 * a k), the K partial dot products kept per thread (K <= KC_MOE_MAX_K) and
 * reduced over the block at the end, one reduction a k as before */
template <bool vec>
__global__ void combine_bwd_kernel(bf16 *drows, float *dtopw, const bf16 *dout, const bf16 *rows,
                                   const int *row_of, const float *topw, int K, int C) {
    __shared__ float red[32];
    int n = blockIdx.x;
    const bf16 *dy = dout + (size_t)n * C;
    const int *ro = row_of + (size_t)n * K;
    const float *wn = topw + (size_t)n * K;
    if constexpr (vec) {
        float d[KC_MOE_MAX_K];
#pragma unroll
        for (int k = 0; k < KC_MOE_MAX_K; k++) d[k] = 0.0f;
        for (int c = threadIdx.x * 8; c < C; c += blockDim.x * 8) {
            float g[8], x[8], o[8];
            load8(g, dy, c, C, true);
#pragma unroll
            for (int k = 0; k < KC_MOE_MAX_K; k++) {   // unrolled: d[] stays in registers
                if (k >= K) break;
                size_t r = (size_t)ro[k] * C;
                load8(x, rows + r, c, C, true);
                float w = wn[k];
                for (int j = 0; j < 8; j++) {
                    d[k] += g[j] * x[j];
                    o[j] = w * g[j];
                }
                store8(drows + r, o, c, C, true);
            }
        }
#pragma unroll
        for (int k = 0; k < KC_MOE_MAX_K; k++) {
            if (k >= K) break;
            float t = block_sum(d[k], red);
            if (dtopw && threadIdx.x == 0) dtopw[(size_t)n * K + k] = t;
        }
    } else {
        for (int k = 0; k < K; k++) {
            int r = ro[k];
            float w = wn[k], d = 0.0f;
            for (int c = threadIdx.x; c < C; c += blockDim.x) {
                float g = __bfloat162float(dy[c]);
                d += g * __bfloat162float(rows[(size_t)r * C + c]);
                drows[(size_t)r * C + c] = __float2bfloat16(w * g);
            }
            d = block_sum(d, red);
            if (dtopw && threadIdx.x == 0) dtopw[(size_t)n * K + k] = d;
        }
    }
}

void kc_moe_combine_bwd(kc_bf16 *drows, float *dtopw, const kc_bf16 *dout, const kc_bf16 *rows,
                        const int *row_of, const float *topw, int N, int K, int C, cudaStream_t st) {
    if (N <= 0) return;
    auto kernel = rows_vec(C, drows, dout, rows) ? combine_bwd_kernel<true> : combine_bwd_kernel<false>;
    kernel<<<N, MOE_ROW_THREADS, 0, st>>>(drows, dtopw, dout, rows, row_of, topw, K, C);
    CHECK_LAUNCH();
}

/* Every ep rank's counts: this rank's E as floats (exact below 2^24) into
 * its slot of the all-gather buffer, on the device (no host round trip). */
__global__ void counts_f32_kernel(float *dst, const int *cnt, int E) {
    for (int e = threadIdx.x; e < E; e += blockDim.x) dst[e] = (float)cnt[e];
}

void kc_moe_counts_f32(float *dst, const int *counts, int E, cudaStream_t st) {
    if (E <= 0) return;
    counts_f32_kernel<<<1, 256, 0, st>>>(dst, counts, E);
    CHECK_LAUNCH();
}

/* ---- grouped expert GEMMs ---------------------------------------------------- */

static cublasHandle_t moe_blas;
static void **moe_ptrs;         // device: 3 pointer arrays of moe_ptr_cap each
static int moe_ptr_cap;
static int moe_grouped_last = -1;
static int moe_mode = -1;       // 1 grouped, 0 loop (ULTRAPLAN_MOE_GEMM)

void kc_moe_release(void) {
    if (moe_blas) cublasDestroy(moe_blas);
    if (moe_ptrs) cudaFree(moe_ptrs);
    moe_blas = NULL, moe_ptrs = NULL, moe_ptr_cap = 0;
}

int kc_moe_gemm_grouped_used(void) { return moe_grouped_last; }

static int want_grouped(void);
int kc_moe_gemm_set_grouped(int on) {
    int prev = want_grouped();
    moe_mode = on ? 1 : 0;
    return prev;
}

static int want_grouped(void) {
    if (moe_mode < 0) {
        const char *v = getenv("ULTRAPLAN_MOE_GEMM");
        moe_mode = v && !strcmp(v, "loop") ? 0 : 1;
    }
    return moe_mode;
}

/* Problems g (counts[g] > 0) as one group each: C_g (m_g, n_g) = op(A_g)·op(B_g) + beta·C_g, column-major.
 * 0 when cuBLAS refused the call (the caller loops instead). */
static int grouped(int G, const int *m, const int *n, const int *k, cublasOperation_t ta, cublasOperation_t tb,
                   const void *const *A, const int *lda, const void *const *B, const int *ldb, void *const *Cp,
                   cudaDataType_t ct, const int *ldc, float beta, cudaStream_t st) {
    kc_require_init();
    if (!moe_blas) {
        CHECK_CUBLAS(cublasCreate(&moe_blas));
        CHECK_CUBLAS(cublasSetWorkspace(moe_blas, kc_ctx.workspace, kc_ctx.workspace_bytes));
    }
    if (G > moe_ptr_cap) {
        if (moe_ptrs) CHECK_CUDA(cudaFree(moe_ptrs));   // synchronises the device: no GEMM still reads them
        moe_ptr_cap = G > 64 ? G : 64;
        CHECK_CUDA(cudaMalloc((void **)&moe_ptrs, 3 * (size_t)moe_ptr_cap * sizeof(void *)));
    }
    CHECK_CUBLAS(cublasSetStream(moe_blas, st));
    CHECK_CUBLAS(cublasSetWorkspace(moe_blas, kc_ctx.workspace, kc_ctx.workspace_bytes));
    void **h = (void **)malloc(3 * (size_t)G * sizeof(void *));
    cublasOperation_t *tas = (cublasOperation_t *)malloc(2 * (size_t)G * sizeof *tas);
    float *ab = (float *)malloc(2 * (size_t)G * sizeof(float));
    int *gs = (int *)malloc((size_t)G * sizeof(int));
    if (!h || !tas || !ab || !gs) kc_fail("kc_moe_gemm", "out of host memory", __FILE__, __LINE__);
    for (int g = 0; g < G; g++) {
        h[g] = (void *)A[g], h[G + g] = (void *)B[g], h[2 * G + g] = Cp[g];
        tas[g] = ta, tas[G + g] = tb, ab[g] = 1.0f, ab[G + g] = beta, gs[g] = 1;
    }
    /* pageable source: staged before the call returns, so h may be freed; the GEMM reads them on st */
    CHECK_CUDA(cudaMemcpyAsync(moe_ptrs, h, 3 * (size_t)G * sizeof(void *), cudaMemcpyHostToDevice, st));
    void **dA = moe_ptrs, **dB = moe_ptrs + G, **dC = moe_ptrs + 2 * G;
    cublasStatus_t s = cublasGemmGroupedBatchedEx(moe_blas, tas, tas + G, m, n, k, ab, (const void *const *)dA,
                                                  CUDA_R_16BF, lda, (const void *const *)dB, CUDA_R_16BF, ldb,
                                                  ab + G, dC, ct, ldc, G, gs, CUBLAS_COMPUTE_32F);
    free(h), free(tas), free(ab), free(gs);
    if (s == CUBLAS_STATUS_NOT_SUPPORTED || s == CUBLAS_STATUS_INVALID_VALUE ||
        s == CUBLAS_STATUS_ARCH_MISMATCH) {
        cudaGetLastError();
        return 0;
    }
    CHECK_CUBLAS(s);
    return 1;
}

/* the experts with rows: their index, row start and count */
static int active(const int *counts, int G, int *idx, int *start) {
    int na = 0, at = 0;
    for (int g = 0; g < G; g++) {
        if (counts[g] > 0) idx[na] = g, start[na] = at, na++;
        at += counts[g];
    }
    return na;
}

void kc_moe_gemm_fwd(kc_bf16 *out, const kc_bf16 *inp, const kc_bf16 *w, const int *counts, int G, int C, int OC,
                     cudaStream_t st) {
    int *idx = (int *)malloc((size_t)(G + 1) * 6 * sizeof(int));
    const void **P = (const void **)malloc((size_t)(G + 1) * 3 * sizeof(void *));
    if (!idx || !P) kc_fail("kc_moe_gemm_fwd", "out of host memory", __FILE__, __LINE__);
    int *start = idx + G + 1, *mm = start + G + 1, *nn = mm + G + 1, *kk = nn + G + 1, *ld = kk + G + 1;
    int na = active(counts, G, idx, start);
    int ok = 0;
    if (na && want_grouped()) {
        /* outᶜ (OC, R_g) = wᶜ_gᵀ (OC, C) · inpᶜ_g (C, R_g) */
        int *ldc = (int *)malloc((size_t)na * sizeof(int));
        for (int a = 0; a < na; a++) {
            int g = idx[a];
            mm[a] = OC, nn[a] = counts[g], kk[a] = C, ld[a] = C, ldc[a] = OC;
            P[a] = w + (size_t)g * OC * C;
            P[na + a] = inp + (size_t)start[a] * C;
            P[2 * na + a] = out + (size_t)start[a] * OC;
        }
        ok = grouped(na, mm, nn, kk, CUBLAS_OP_T, CUBLAS_OP_N, P, ld, P + na, ld, (void *const *)(P + 2 * na),
                     CUDA_R_16BF, ldc, 0.0f, st);
        free(ldc);
    }
    if (!ok)
        for (int a = 0; a < na; a++)
            kc_matmul_fwd(out + (size_t)start[a] * OC, inp + (size_t)start[a] * C, w + (size_t)idx[a] * OC * C,
                          NULL, counts[idx[a]], C, OC, st);
    if (na) moe_grouped_last = ok;
    free(idx);
    free(P);
}

void kc_moe_gemm_bwd(kc_bf16 *dinp, float *dw, const kc_bf16 *dout, const kc_bf16 *inp, const kc_bf16 *w,
                     const int *counts, int G, int C, int OC, cudaStream_t st) {
    int *idx = (int *)malloc((size_t)(G + 1) * 8 * sizeof(int));
    const void **P = (const void **)malloc((size_t)(G + 1) * 3 * sizeof(void *));
    if (!idx || !P) kc_fail("kc_moe_gemm_bwd", "out of host memory", __FILE__, __LINE__);
    int *start = idx + G + 1, *mm = start + G + 1, *nn = mm + G + 1, *kk = nn + G + 1, *la = kk + G + 1,
        *lb = la + G + 1, *lc = lb + G + 1;
    int na = active(counts, G, idx, start);
    int ok = na && want_grouped();
    if (ok && dinp) {
        /* dinpᶜ (C, R_g) += wᶜ_g (C, OC) · doutᶜ_g (OC, R_g) */
        for (int a = 0; a < na; a++) {
            int g = idx[a];
            mm[a] = C, nn[a] = counts[g], kk[a] = OC, la[a] = C, lb[a] = OC, lc[a] = C;
            P[a] = w + (size_t)g * OC * C;
            P[na + a] = dout + (size_t)start[a] * OC;
            P[2 * na + a] = dinp + (size_t)start[a] * C;
        }
        ok = grouped(na, mm, nn, kk, CUBLAS_OP_N, CUBLAS_OP_N, P, la, P + na, lb, (void *const *)(P + 2 * na),
                     CUDA_R_16BF, lc, 1.0f, st);
    }
    if (ok && dw) {
        /* dwᶜ_g (C, OC) += inpᶜ_g (C, R_g) · (doutᶜ_g)ᵀ (R_g, OC) */
        for (int a = 0; a < na; a++) {
            int g = idx[a];
            mm[a] = C, nn[a] = OC, kk[a] = counts[g], la[a] = C, lb[a] = OC, lc[a] = C;
            P[a] = inp + (size_t)start[a] * C;
            P[na + a] = dout + (size_t)start[a] * OC;
            P[2 * na + a] = dw + (size_t)g * OC * C;
        }
        int okw = grouped(na, mm, nn, kk, CUBLAS_OP_N, CUBLAS_OP_T, P, la, P + na, lb, (void *const *)(P + 2 * na),
                          CUDA_R_32F, lc, 1.0f, st);
        if (!okw)   // dinp is done: the loop for dw alone
            for (int a = 0; a < na; a++)
                kc_matmul_bwd(NULL, dw + (size_t)idx[a] * OC * C, NULL, dout + (size_t)start[a] * OC,
                              inp + (size_t)start[a] * C, w + (size_t)idx[a] * OC * C, counts[idx[a]], C, OC, st);
        ok = okw;
    } else if (!ok) {
        for (int a = 0; a < na; a++)
            kc_matmul_bwd(dinp ? dinp + (size_t)start[a] * C : NULL, dw ? dw + (size_t)idx[a] * OC * C : NULL,
                          NULL, dout + (size_t)start[a] * OC, inp + (size_t)start[a] * C,
                          w + (size_t)idx[a] * OC * C, counts[idx[a]], C, OC, st);
    }
    if (na) moe_grouped_last = ok;
    free(idx);
    free(P);
}
