/* loss.cu — fused softmax + cross-entropy over bf16 logits with a masked
 * vocabulary tail. One block per row: each thread keeps a running (max,
 * sum) over its columns, the block merges them; the backward recomputes
 * exp(x − lse) and may write over the logits in place. */
#include <math.h>
#include "common.cuh"

enum { CE_THREADS = 512 };

__global__ void crossentropy_fwd_kernel(float *losses, float *lse, const bf16 *logits,
                                        const int *targets, int V, int V_valid, bool vec) {
    __shared__ float red[32];
    int row = blockIdx.x;
    const bf16 *x = logits + (size_t)row * V;
    float m = -INFINITY, s = 0.0f, x8[8];
    for (int c = threadIdx.x * 8; c < V_valid; c += blockDim.x * 8) {
        load8(x8, x, c, V_valid, vec);
        float cm = m;
        for (int j = 0; j < 8; j++) if (c + j < V_valid) cm = fmaxf(cm, x8[j]);
        s *= expf(m - cm);                      // m = −∞ and s = 0 at first: 0·0
        for (int j = 0; j < 8; j++) if (c + j < V_valid) s += expf(x8[j] - cm);
        m = cm;
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
    bool vec = V % 8 == 0 && V_valid % 8 == 0 && aligned16(logits);
    if (BT == 0) return;
    crossentropy_fwd_kernel<<<BT, CE_THREADS, 0, st>>>(losses, lse, logits, targets, V, V_valid, vec);
    CHECK_LAUNCH();
}

__global__ void crossentropy_bwd_kernel(bf16 *dlogits, const bf16 *logits, const float *lse,
                                        const int *targets, float scale, int V, int V_valid,
                                        bool vec) {
    int row = blockIdx.x, tgt = targets[row];
    const bf16 *x = logits + (size_t)row * V;     // may be dlogits itself
    bf16 *dx = dlogits + (size_t)row * V;
    float l = lse[row], x8[8];
    for (int c = threadIdx.x * 8; c < V; c += blockDim.x * 8) {
        load8(x8, x, c, V, vec);
        for (int j = 0; j < 8; j++) {
            int col = c + j;
            x8[j] = (tgt < 0 || col >= V_valid) ? 0.0f
                  : (expf(x8[j] - l) - (col == tgt ? 1.0f : 0.0f)) * scale;
        }
        store8(dx, x8, c, V, vec);
    }
}

void kc_crossentropy_bwd(bf16 *dlogits, const bf16 *logits, const float *lse, const int *targets,
                         float scale, int BT, int V, int V_valid, cudaStream_t st) {
    bool vec = V % 8 == 0 && aligned16(logits) && aligned16(dlogits);
    if (BT == 0) return;
    crossentropy_bwd_kernel<<<BT, CE_THREADS, 0, st>>>(dlogits, logits, lse, targets, scale,
                                                       V, V_valid, vec);
    CHECK_LAUNCH();
}
