/* loss.cu — fused softmax + cross-entropy over bf16 logits with a masked
 * vocabulary tail. One block per row: each thread keeps a running (max,
 * sum) over its columns, the block merges them; the backward recomputes
 * exp(x − lse) and may write over the logits in place. */
#include <math.h>
#include "common.cuh"

/* CE_UNROLL chunks of 8 a thread per iteration, loaded before any is used:
 * 32 bytes in flight a thread, 64 KB an SM at 4 blocks of 512 (forward;
 * the backward fits 3 blocks: 48 KB) */
enum { CE_THREADS = 512, CE_UNROLL = 2 };

template <bool vec>
__global__ void __launch_bounds__(CE_THREADS, 4)
crossentropy_fwd_kernel(float *losses, float *lse, const bf16 *logits,
                                        const int *targets, int V, int V_valid) {
    __shared__ float red[32];
    int row = blockIdx.x;
    const bf16 *x = logits + (size_t)row * V;
    float m = -INFINITY, s = 0.0f, x8[CE_UNROLL][8];
    for (int c0 = threadIdx.x * 8; c0 < V_valid; c0 += CE_UNROLL * CE_THREADS * 8) {
#pragma unroll
        for (int u = 0; u < CE_UNROLL; u++) {
            int c = c0 + u * CE_THREADS * 8;
            if (c < V_valid) load8(x8[u], x, c, V_valid, vec);
        }
#pragma unroll
        for (int u = 0; u < CE_UNROLL; u++) {
            int c = c0 + u * CE_THREADS * 8;
            if (c >= V_valid) break;
            float cm = m;
            for (int j = 0; j < 8; j++) if (c + j < V_valid) cm = fmaxf(cm, x8[u][j]);
            s = cm == -INFINITY ? 0.0f : s * expf(m - cm);   // all −∞ so far: nothing to rescale
            for (int j = 0; j < 8; j++) if (c + j < V_valid) s += expf(x8[u][j] - cm);
            m = cm;
        }
    }
    float M = block_max(m, red);
    float S = block_sum(m == -INFINITY ? 0.0f : s * expf(m - M), red);
    if (threadIdx.x == 0) {
        float l = M + logf(S);
        int t = targets[row];
        lse[row] = l;
        losses[row] = t < 0 ? 0.0f : l - __bfloat162float(x[t]);
    }
}

void kc_crossentropy_fwd(float *losses, float *lse, const bf16 *logits, const int *targets,
                         int BT, int V, int V_valid, cudaStream_t st) {
    /* rows are V long: with V % 8 == 0 a chunk that starts below V_valid ends
     * within the row, and the columns past V_valid are masked where used */
    bool vec = V % 8 == 0 && aligned16(logits);
    if (BT == 0) return;
    auto kernel = vec ? crossentropy_fwd_kernel<true> : crossentropy_fwd_kernel<false>;
    kernel<<<BT, CE_THREADS, 0, st>>>(losses, lse, logits, targets, V, V_valid);
    CHECK_LAUNCH();
}

/* a thread reads its chunks, then writes the same chunks: in place is safe */
template <bool vec>
__global__ void __launch_bounds__(CE_THREADS)   // 39 registers: 3 blocks an SM (4 spills)
crossentropy_bwd_kernel(bf16 *dlogits, const bf16 *logits, const float *lse,
                                        const int *targets, float scale, int V, int V_valid) {
    int row = blockIdx.x, tgt = targets[row];
    const bf16 *x = logits + (size_t)row * V;     // may be dlogits itself
    bf16 *dx = dlogits + (size_t)row * V;
    float l = lse[row], x8[CE_UNROLL][8];
    for (int c0 = threadIdx.x * 8; c0 < V; c0 += CE_UNROLL * CE_THREADS * 8) {
#pragma unroll
        for (int u = 0; u < CE_UNROLL; u++) {
            int c = c0 + u * CE_THREADS * 8;
            if (c < V) load8(x8[u], x, c, V, vec);
        }
#pragma unroll
        for (int u = 0; u < CE_UNROLL; u++) {
            int c = c0 + u * CE_THREADS * 8;
            if (c >= V) break;
            for (int j = 0; j < 8; j++) {
                int col = c + j;
                x8[u][j] = (tgt < 0 || col >= V_valid) ? 0.0f
                         : (expf(x8[u][j] - l) - (col == tgt ? 1.0f : 0.0f)) * scale;
            }
            store8(dx, x8[u], c, V, vec);
        }
    }
}

void kc_crossentropy_bwd(bf16 *dlogits, const bf16 *logits, const float *lse, const int *targets,
                         float scale, int BT, int V, int V_valid, cudaStream_t st) {
    bool vec = V % 8 == 0 && aligned16(logits) && aligned16(dlogits);
    if (BT == 0) return;
    auto kernel = vec ? crossentropy_bwd_kernel<true> : crossentropy_bwd_kernel<false>;
    kernel<<<BT, CE_THREADS, 0, st>>>(dlogits, logits, lse, targets, scale, V, V_valid);
    CHECK_LAUNCH();
}
