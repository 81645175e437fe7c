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

/* Forward and backward in one pass over the logits: the row is read from
 * HBM once (16-byte chunks, two in flight a thread, as the forward) into
 * shared memory while the forward's running (max, sum) is taken, then the
 * gradient is computed from shared memory and written out (over the logits
 * when they alias). 2 bytes an element read and 2 written, where the two
 * kernels read 2 + 2 and write 2. Same chunk order and arithmetic as the
 * two kernels (each thread's (max, sum) visits its chunks in the
 * forward's order, the gradient is the backward's expression with the same
 * lse), so the same values up to the compiler's choice of fused
 * multiply-adds. The columns at or past V_valid are never read (their
 * gradient is 0). Shared memory: V·2 bytes, 100 KB at V = 50304 (two
 * blocks of 512 an H200 SM). */
__global__ void __launch_bounds__(CE_THREADS)
crossentropy_fused_kernel(float *losses, float *lse, bf16 *dlogits, const bf16 *logits, const int *targets,
                          float scale, int V, int V_valid) {
    extern __shared__ Pack8 srow[];   // (V / 8) the row
    __shared__ float red[32];
    int row = blockIdx.x, tgt = targets[row];
    const bf16 *x = logits + (size_t)row * V;   // may be dlogits itself: every read precedes the
    bf16 *dx = dlogits + (size_t)row * V;       // reductions' barriers, every write follows them
    float m = -INFINITY, s = 0.0f;
    for (int c0 = threadIdx.x * 8; c0 < V_valid; c0 += CE_UNROLL * CE_THREADS * 8) {
        Pack8 p[CE_UNROLL];
#pragma unroll
        for (int u = 0; u < CE_UNROLL; u++) {
            int c = c0 + u * CE_THREADS * 8;
            if (c < V_valid) p[u] = *(const Pack8 *)(x + c);
        }
#pragma unroll
        for (int u = 0; u < CE_UNROLL; u++) {
            int c = c0 + u * CE_THREADS * 8;
            if (c >= V_valid) break;
            srow[c / 8] = p[u];
            float v[8], cm = m;
            for (int j = 0; j < 8; j++) v[j] = __bfloat162float(p[u].v[j]);
            for (int j = 0; j < 8; j++) if (c + j < V_valid) cm = fmaxf(cm, v[j]);
            s = cm == -INFINITY ? 0.0f : s * expf(m - cm);
            for (int j = 0; j < 8; j++) if (c + j < V_valid) s += expf(v[j] - cm);
            m = cm;
        }
    }
    float M = block_max(m, red);
    float S = block_sum(m == -INFINITY ? 0.0f : s * expf(m - M), red);
    float l = M + logf(S);   // every thread: the same value
    if (threadIdx.x == 0) {
        lse[row] = l;
        losses[row] = tgt < 0 ? 0.0f : l - __bfloat162float(((const bf16 *)srow)[tgt]);
    }
    for (int c = threadIdx.x * 8; c < V; c += CE_THREADS * 8) {   // a thread's own chunks back
        float v[8];
        if (c < V_valid) {
            Pack8 p = srow[c / 8];
            for (int j = 0; j < 8; j++) v[j] = __bfloat162float(p.v[j]);
        }
        for (int j = 0; j < 8; j++) {
            int col = c + j;
            v[j] = (tgt < 0 || col >= V_valid) ? 0.0f : (expf(v[j] - l) - (col == tgt ? 1.0f : 0.0f)) * scale;
        }
        store8(dx, v, c, V, true);
    }
}

/* the largest dynamic shared memory a block may opt into on this device */
static size_t ce_smem_limit(void) {
    static int v = -1;
    if (v < 0) {
        int dev = 0;
        CHECK_CUDA(cudaGetDevice(&dev));
        CHECK_CUDA(cudaDeviceGetAttribute(&v, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
    }
    return (size_t)v;
}

int kc_crossentropy_fused(float *losses, float *lse, bf16 *dlogits, const bf16 *logits, const int *targets,
                          float scale, int BT, int V, int V_valid, cudaStream_t st) {
    if (BT == 0) return 0;
    size_t smem = (size_t)V * sizeof(bf16);
    static size_t smem_set = 48 << 10;   // the default every kernel may use
    bool one = V % 8 == 0 && aligned16(logits) && aligned16(dlogits) && smem + 1024 <= ce_smem_limit();
    if (!one) {
        kc_crossentropy_fwd(losses, lse, logits, targets, BT, V, V_valid, st);
        kc_crossentropy_bwd(dlogits, logits, lse, targets, scale, BT, V, V_valid, st);
        return 0;
    }
    if (smem > smem_set) {
        CHECK_CUDA(cudaFuncSetAttribute(crossentropy_fused_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                        (int)smem));
        smem_set = smem;
    }
    crossentropy_fused_kernel<<<BT, CE_THREADS, smem, st>>>(losses, lse, dlogits, logits, targets, scale, V,
                                                           V_valid);
    CHECK_LAUNCH();
    return 1;
}
