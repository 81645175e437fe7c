/* norm.cu — LayerNorm and RMSNorm over the last dimension C.
 * Forward and the dinp half of the backward: one warp per row, 16-byte
 * loads, the row re-read from L1 rather than held in registers (C is
 * unbounded). The weight gradients reduce over rows: a second kernel where
 * each thread owns a column over a run of rows, then one fp32 atomic per
 * column and block. */
#include "common.cuh"

enum { ROWS_PER_BLOCK = 8, COL_ROWS = 256 };

static bool rows_vec(const void *a, const void *b, const void *c, int C) {
    return C % 8 == 0 && aligned16(a) && aligned16(b) && (!c || aligned16(c));
}

__global__ void layernorm_fwd_kernel(bf16 *out, float *mean, float *rstd, const bf16 *inp,
                                     const bf16 *weight, const bf16 *bias, int N, int C,
                                     float eps, bool vec) {
    int row = blockIdx.x * ROWS_PER_BLOCK + (threadIdx.x >> 5), lane = threadIdx.x & 31;
    if (row >= N) return;
    const bf16 *x = inp + (size_t)row * C;
    bf16 *y = out + (size_t)row * C;
    float s = 0.0f, x8[8], w8[8], b8[8];
    for (int c = lane * 8; c < C; c += 256) {
        load8(x8, x, c, C, vec);
        for (int j = 0; j < 8; j++) s += x8[j];
    }
    float mu = warp_sum(s) / C, ss = 0.0f;
    for (int c = lane * 8; c < C; c += 256) {
        load8(x8, x, c, C, vec);
        for (int j = 0; j < 8; j++) if (c + j < C) ss += (x8[j] - mu) * (x8[j] - mu);
    }
    float r = rsqrtf(warp_sum(ss) / C + eps);
    for (int c = lane * 8; c < C; c += 256) {
        load8(x8, x, c, C, vec);
        load8(w8, weight, c, C, vec);
        if (bias) load8(b8, bias, c, C, vec);
        for (int j = 0; j < 8; j++) x8[j] = (x8[j] - mu) * r * w8[j] + (bias ? b8[j] : 0.0f);
        store8(y, x8, c, C, vec);
    }
    if (lane == 0) { mean[row] = mu; rstd[row] = r; }
}

void kc_layernorm_fwd(bf16 *out, float *mean, float *rstd, const bf16 *inp,
                      const bf16 *weight, const bf16 *bias, int N, int C, float eps,
                      cudaStream_t st) {
    bool vec = rows_vec(out, inp, weight, C) && (!bias || aligned16(bias));
    layernorm_fwd_kernel<<<ceil_div(N, ROWS_PER_BLOCK), 32 * ROWS_PER_BLOCK, 0, st>>>(
        out, mean, rstd, inp, weight, bias, N, C, eps, vec);
    CHECK_LAUNCH();
}

/* dx = r·(dy·w − mean(dy·w) − n·mean(dy·w·n)), n = (x − mu)·r; for RMSNorm
 * (rms = true, mu = 0) dx = r·dy·w − x·r³·mean(dy·w·x) = r·(dy·w − n·mean(dy·w·n)) */
__global__ void norm_bwd_dinp_kernel(bf16 *dinp, const bf16 *dout, const bf16 *inp,
                                     const bf16 *weight, const float *mean, const float *rstd,
                                     int N, int C, bool vec) {
    int row = blockIdx.x * ROWS_PER_BLOCK + (threadIdx.x >> 5), lane = threadIdx.x & 31;
    if (row >= N) return;
    const bf16 *x = inp + (size_t)row * C, *dy = dout + (size_t)row * C;
    bf16 *dx = dinp + (size_t)row * C;
    float mu = mean ? mean[row] : 0.0f, r = rstd[row];
    float m1 = 0.0f, m2 = 0.0f, x8[8], d8[8], w8[8], g8[8];
    for (int c = lane * 8; c < C; c += 256) {
        load8(x8, x, c, C, vec);
        load8(d8, dy, c, C, vec);
        load8(w8, weight, c, C, vec);
        for (int j = 0; j < 8; j++) {
            float dn = d8[j] * w8[j];
            m1 += dn;
            m2 += dn * (x8[j] - mu) * r;
        }
    }
    m1 = mean ? warp_sum(m1) / C : 0.0f;
    m2 = warp_sum(m2) / C;
    for (int c = lane * 8; c < C; c += 256) {
        load8(x8, x, c, C, vec);
        load8(d8, dy, c, C, vec);
        load8(w8, weight, c, C, vec);
        load8(g8, dx, c, C, vec);
        for (int j = 0; j < 8; j++)
            g8[j] += (d8[j] * w8[j] - m1 - (x8[j] - mu) * r * m2) * r;
        store8(dx, g8, c, C, vec);
    }
}

/* dweight[c] += Σ_rows dy·(x − mu)·r; dbias[c] += Σ_rows dy (mean NULL: RMSNorm) */
__global__ void norm_bwd_weight_kernel(float *dweight, float *dbias, const bf16 *dout,
                                       const bf16 *inp, const float *mean, const float *rstd,
                                       int N, int C) {
    __shared__ float accw[8][33], accb[8][33];
    int c = blockIdx.x * 32 + threadIdx.x;
    int r0 = blockIdx.y * COL_ROWS, r1 = min(r0 + COL_ROWS, N);
    float sw = 0.0f, sb = 0.0f;
    if (c < C)
        for (int i = r0 + threadIdx.y; i < r1; i += 8) {
            float dy = __bfloat162float(dout[(size_t)i * C + c]);
            float mu = mean ? mean[i] : 0.0f;
            sw += dy * (__bfloat162float(inp[(size_t)i * C + c]) - mu) * rstd[i];
            sb += dy;
        }
    accw[threadIdx.y][threadIdx.x] = sw;
    accb[threadIdx.y][threadIdx.x] = sb;
    __syncthreads();
    if (threadIdx.y == 0 && c < C) {
        for (int y = 1; y < 8; y++) { sw += accw[y][threadIdx.x]; sb += accb[y][threadIdx.x]; }
        atomicAdd(&dweight[c], sw);
        if (dbias) atomicAdd(&dbias[c], sb);
    }
}

static void norm_bwd(bf16 *dinp, float *dweight, float *dbias, const bf16 *dout,
                     const bf16 *inp, const bf16 *weight, const float *mean,
                     const float *rstd, int N, int C, cudaStream_t st) {
    bool vec = rows_vec(dinp, dout, inp, C) && aligned16(weight);
    norm_bwd_dinp_kernel<<<ceil_div(N, ROWS_PER_BLOCK), 32 * ROWS_PER_BLOCK, 0, st>>>(
        dinp, dout, inp, weight, mean, rstd, N, C, vec);
    CHECK_LAUNCH();
    dim3 grid(ceil_div(C, 32), ceil_div(N, COL_ROWS)), block(32, 8);
    norm_bwd_weight_kernel<<<grid, block, 0, st>>>(dweight, dbias, dout, inp, mean, rstd, N, C);
    CHECK_LAUNCH();
}

void kc_layernorm_bwd(bf16 *dinp, float *dweight, float *dbias, const bf16 *dout,
                      const bf16 *inp, const bf16 *weight, const float *mean,
                      const float *rstd, int N, int C, cudaStream_t st) {
    norm_bwd(dinp, dweight, dbias, dout, inp, weight, mean, rstd, N, C, st);
}

__global__ void rmsnorm_fwd_kernel(bf16 *out, float *rstd, const bf16 *inp, const bf16 *weight,
                                   int N, int C, float eps, bool vec) {
    int row = blockIdx.x * ROWS_PER_BLOCK + (threadIdx.x >> 5), lane = threadIdx.x & 31;
    if (row >= N) return;
    const bf16 *x = inp + (size_t)row * C;
    bf16 *y = out + (size_t)row * C;
    float ss = 0.0f, x8[8], w8[8];
    for (int c = lane * 8; c < C; c += 256) {
        load8(x8, x, c, C, vec);
        for (int j = 0; j < 8; j++) ss += x8[j] * x8[j];
    }
    float r = rsqrtf(warp_sum(ss) / C + eps);
    for (int c = lane * 8; c < C; c += 256) {
        load8(x8, x, c, C, vec);
        load8(w8, weight, c, C, vec);
        for (int j = 0; j < 8; j++) x8[j] = x8[j] * r * w8[j];
        store8(y, x8, c, C, vec);
    }
    if (lane == 0) rstd[row] = r;
}

void kc_rmsnorm_fwd(bf16 *out, float *rstd, const bf16 *inp, const bf16 *weight,
                    int N, int C, float eps, cudaStream_t st) {
    bool vec = rows_vec(out, inp, weight, C);
    rmsnorm_fwd_kernel<<<ceil_div(N, ROWS_PER_BLOCK), 32 * ROWS_PER_BLOCK, 0, st>>>(
        out, rstd, inp, weight, N, C, eps, vec);
    CHECK_LAUNCH();
}

void kc_rmsnorm_bwd(bf16 *dinp, float *dweight, const bf16 *dout, const bf16 *inp,
                    const bf16 *weight, const float *rstd, int N, int C, cudaStream_t st) {
    norm_bwd(dinp, dweight, NULL, dout, inp, weight, NULL, rstd, N, C, st);
}
