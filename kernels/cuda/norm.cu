/* norm.cu — LayerNorm and RMSNorm over the last dimension C.
 * Forward: one warp per row, 16-byte loads. Rows of up to NORM_REG_C
 * columns (16-byte aligned, C % 8 == 0) are held in registers, every load
 * of the row issued before the first sum: one pass over HBM with the whole
 * row in flight; longer or unaligned rows are re-read from L1 instead (C
 * is unbounded there). Both sum in the same order. Backward: one pass over x, dy and
 * dinp that also sums the weight gradients per block (see norm_bwd_kernel),
 * then a small kernel folds the blocks' partial rows: deterministic. Also
 * home of kc_reduce_partials, which the bias gradient shares. */
#include <stdlib.h>
#include <string.h>
#include "common.cuh"

enum { ROWS_PER_BLOCK = 8 };

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

/* The row in registers: lane l holds chunks c = 8·l + 256·i, i < NV (the
 * generic kernel's order), all NV 16-byte loads issued before any use.
 * mean NULL: RMSNorm (mu = 0, bias unused). Two-pass variance from the
 * registers, as the generic kernel computes it. */
enum { NORM_REG_C = 256 * 16 };
template <int NV>
__global__ void __launch_bounds__(32 * ROWS_PER_BLOCK)
norm_fwd_regs_kernel(bf16 *out, float *mean, float *rstd, const bf16 *inp, const bf16 *weight,
                     const bf16 *bias, int N, int C, float eps) {
    int row = blockIdx.x * ROWS_PER_BLOCK + (threadIdx.x >> 5), lane = threadIdx.x & 31;
    if (row >= N) return;
    const bf16 *x = inp + (size_t)row * C;
    bf16 *y = out + (size_t)row * C;
    Pack8 xv[NV];
#pragma unroll
    for (int i = 0; i < NV; i++) {
        int c = lane * 8 + 256 * i;
        if (c < C) xv[i] = *(const Pack8 *)(x + c);
    }
    float mu = 0.0f;
    if (mean) {
        float s = 0.0f;
#pragma unroll
        for (int i = 0; i < NV; i++)
            if (lane * 8 + 256 * i < C)
                for (int j = 0; j < 8; j++) s += __bfloat162float(xv[i].v[j]);
        mu = warp_sum(s) / C;
    }
    float ss = 0.0f;
#pragma unroll
    for (int i = 0; i < NV; i++)
        if (lane * 8 + 256 * i < C)
            for (int j = 0; j < 8; j++) {
                float d = __bfloat162float(xv[i].v[j]) - mu;
                ss += d * d;
            }
    float r = rsqrtf(warp_sum(ss) / C + eps);
#pragma unroll
    for (int i = 0; i < NV; i++) {
        int c = lane * 8 + 256 * i;
        if (c >= C) continue;
        float w8[8], b8[8], y8[8];
        load8(w8, weight, c, C, true);
        if (mean && bias) load8(b8, bias, c, C, true);
        for (int j = 0; j < 8; j++)
            y8[j] = (__bfloat162float(xv[i].v[j]) - mu) * r * w8[j] + (mean && bias ? b8[j] : 0.0f);
        store8(y, y8, c, C, true);
    }
    if (lane == 0) {
        if (mean) mean[row] = mu;
        rstd[row] = r;
    }
}

/* the register kernel for this row length, NULL when the row doesn't fit */
typedef void (*NormRegsKernel)(bf16 *, float *, float *, const bf16 *, const bf16 *, const bf16 *, int, int,
                               float);
static NormRegsKernel norm_regs_for(int C) {
    if (C <= 256) return norm_fwd_regs_kernel<1>;
    if (C <= 512) return norm_fwd_regs_kernel<2>;
    if (C <= 1024) return norm_fwd_regs_kernel<4>;
    if (C <= 2048) return norm_fwd_regs_kernel<8>;
    if (C <= NORM_REG_C) return norm_fwd_regs_kernel<16>;
    return NULL;
}

/* ULTRAPLAN_NORM=l1 keeps the earlier re-reading forward; anything else,
 * or unset, the register kernel where it fits. kc_norm_set_regs
 * (kernels_cuda.h) switches it in process (the benchmark times both). */
static int norm_regs = -1;
static bool norm_regs_allowed(void) {
    if (norm_regs < 0) {
        const char *e = getenv("ULTRAPLAN_NORM");
        norm_regs = !(e && !strcmp(e, "l1"));
    }
    return norm_regs;
}
int kc_norm_set_regs(int on) {
    int prev = norm_regs_allowed();
    norm_regs = on != 0;
    return prev;
}

void kc_layernorm_fwd(bf16 *out, float *mean, float *rstd, const bf16 *inp,
                      const bf16 *weight, const bf16 *bias, int N, int C, float eps,
                      cudaStream_t st) {
    if (N <= 0) return;   // a grid of 0 blocks is an invalid launch
    bool vec = rows_vec(out, inp, weight, C) && (!bias || aligned16(bias));
    NormRegsKernel k = vec && norm_regs_allowed() ? norm_regs_for(C) : NULL;
    if (k)
        k<<<ceil_div(N, ROWS_PER_BLOCK), 32 * ROWS_PER_BLOCK, 0, st>>>(out, mean, rstd, inp, weight, bias, N, C,
                                                                      eps);
    else
        layernorm_fwd_kernel<<<ceil_div(N, ROWS_PER_BLOCK), 32 * ROWS_PER_BLOCK, 0, st>>>(
            out, mean, rstd, inp, weight, bias, N, C, eps, vec);
    CHECK_LAUNCH();
}

/* ---- backward: one pass for dinp and the weight gradients ----------------
 *
 * dx = r·(dy·w − mean(dy·w) − n·mean(dy·w·n)), n = (x − mu)·r; for RMSNorm
 * (mean NULL: mu = 0, no mean(dy·w) term) dx = r·dy·w − x·r³·mean(dy·w·x)
 * = r·(dy·w − n·mean(dy·w·n)). dweight[c] += Σ_rows dy·n, dbias[c] += Σ_rows dy.
 *
 * A block takes groups of 8 rows (grid-stride). Phase 1, a warp per row:
 * the two row means, into smem. Phase 2, a thread per 8 columns over the 8
 * rows: dx, and the column sums of dy·n and dy in registers, added to the
 * block's accumulator row (smem, or the block's partial row in global
 * memory when 2C floats don't fit) at columns only this thread touches.
 * Phase 2 re-reads the group's x and dy from L1/L2, not HBM. Each block
 * writes one partial row [Σ dy·n | Σ dy] to kc_ctx.partials; kc_reduce_partials
 * folds them into dweight/dbias in a fixed order: deterministic, no atomics. */
/* 2 blocks an SM (the launch bounds cap registers at 128; 2 x 100 KB of
 * smem fit): one wave of blocks, so one partial row per block resident */
enum { NB_THREADS = 32 * ROWS_PER_BLOCK, NB_PER_SM = 2, NB_SMEM_MAX = 100 << 10 };

/* 8 bf16 of a row at c through L2 only (zeros past C): the streamed dinp
 * must not evict the x and dy rows that phase 2 re-reads from L1 */
__device__ __forceinline__ Pack8 load8_cg(const bf16 *row, int c, int C, bool vec) {
    union { uint4 u; Pack8 p; } r;
    if (vec) r.u = __ldcg((const uint4 *)(row + c));
    else for (int j = 0; j < 8; j++) r.p.v[j] = c + j < C ? row[c + j] : __float2bfloat16(0.0f);
    return r.p;
}

/* 2 blocks an SM: their groups' x and dy rows (2 x 64 KB at C = 2048) stay
 * in L1 between the phases */
template <bool vec>
__global__ void __launch_bounds__(NB_THREADS, NB_PER_SM)
norm_bwd_kernel(bf16 *__restrict__ dinp, float *__restrict__ part,
                const bf16 *__restrict__ dout, const bf16 *__restrict__ inp,
                const bf16 *__restrict__ weight, const float *__restrict__ mean,
                const float *__restrict__ rstd, int N, int C, bool want_b, bool acc_smem) {
    extern __shared__ float sacc[];
    __shared__ float s_mu[ROWS_PER_BLOCK], s_r[ROWS_PER_BLOCK], s_m1[ROWS_PER_BLOCK], s_m2[ROWS_PER_BLOCK];
    int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, width = want_b ? 2 * C : C;
    float *acc = acc_smem ? sacc : part + (size_t)blockIdx.x * width;
    for (int c = threadIdx.x; c < width; c += NB_THREADS) acc[c] = 0.0f;
    for (int base = blockIdx.x * ROWS_PER_BLOCK; base < N; base += gridDim.x * ROWS_PER_BLOCK) {
        int row = base + warp;
        if (row < N) {   // phase 1
            const bf16 *x = inp + (size_t)row * C, *dy = dout + (size_t)row * C;
            float mu = mean ? mean[row] : 0.0f, r = rstd[row];
            float m1 = 0.0f, m2 = 0.0f, x8[8], d8[8], w8[8];
#pragma unroll (vec ? 4 : 1)
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
            m1 = warp_sum(m1);
            m2 = warp_sum(m2);
            if (lane == 0) {
                s_mu[warp] = mu;
                s_r[warp] = r;
                s_m1[warp] = mean ? m1 / C : 0.0f;
                s_m2[warp] = m2 / C;
            }
        }
        __syncthreads();
        int nrows = min(ROWS_PER_BLOCK, N - base);
        for (int c = threadIdx.x * 8; c < C; c += NB_THREADS * 8) {   // phase 2
            float w8[8], sw[8], sb[8];
            Pack8 gin[ROWS_PER_BLOCK];   // dinp rows: HBM loads all in flight at once
#pragma unroll
            for (int i = 0; i < ROWS_PER_BLOCK; i++)
                if (vec && i < nrows) gin[i] = load8_cg(dinp + (size_t)(base + i) * C, c, C, vec);
            load8(w8, weight, c, C, vec);
            for (int j = 0; j < 8; j++) sw[j] = sb[j] = 0.0f;
#pragma unroll
            for (int i = 0; i < ROWS_PER_BLOCK; i++) {
                if (i >= nrows) break;
                size_t off = (size_t)(base + i) * C;
                float x8[8], d8[8], g8[8], mu = s_mu[i], r = s_r[i], m1 = s_m1[i], m2 = s_m2[i];
                load8(x8, inp + off, c, C, vec);   // L1 hits: phase 1 just read them
                load8(d8, dout + off, c, C, vec);
                if (!vec) gin[i] = load8_cg(dinp + off, c, C, vec);   // fewer registers
                for (int j = 0; j < 8; j++) g8[j] = __bfloat162float(gin[i].v[j]);
                for (int j = 0; j < 8; j++) {
                    float n = (x8[j] - mu) * r;
                    g8[j] += (d8[j] * w8[j] - m1 - n * m2) * r;
                    sw[j] += d8[j] * n;
                    sb[j] += d8[j];
                }
                store8(dinp + off, g8, c, C, vec);
            }
            for (int j = 0; j < 8; j++) {
                if (c + j >= C) break;
                acc[c + j] += sw[j];
                if (want_b) acc[C + c + j] += sb[j];
            }
        }
        __syncthreads();   // s_* are rewritten by the next group
    }
    if (acc_smem)
        for (int c = threadIdx.x; c < width; c += NB_THREADS)
            part[(size_t)blockIdx.x * width + c] = sacc[c];
}

/* out0[c] += Σ_g part[g·width + c], out1[c] += Σ_g part[g·width + C + c]
 * (out1 nullable), c < C: 32 columns × 16 row slices a block, slices folded
 * in a fixed order. */
enum { RP_SLICES = 16 };
__global__ void reduce_partials_kernel(float *out0, float *out1, const float *part, int G,
                                       int C, int width) {
    __shared__ float red[RP_SLICES][33];
    int c = blockIdx.x * 32 + threadIdx.x;
    float s = 0.0f;
    if (c < (out1 ? 2 * C : C)) {
#pragma unroll 4
        for (int g = threadIdx.y; g < G; g += RP_SLICES) s += part[(size_t)g * width + c];
    }
    red[threadIdx.y][threadIdx.x] = s;
    __syncthreads();
    if (threadIdx.y == 0 && c < (out1 ? 2 * C : C)) {
        for (int y = 1; y < RP_SLICES; y++) s += red[y][threadIdx.x];
        if (c < C) out0[c] += s;
        else out1[c - C] += s;
    }
}

void kc_reduce_partials(float *out0, float *out1, const float *part, int G, int C, int width,
                        cudaStream_t st) {
    dim3 grid(ceil_div(out1 ? 2 * (size_t)C : C, 32)), block(32, RP_SLICES);
    reduce_partials_kernel<<<grid, block, 0, st>>>(out0, out1, part, G, C, width);
    CHECK_LAUNCH();
}

int kc_sm_count(void) {
    static int dev = -1, sms;
    int d;
    CHECK_CUDA(cudaGetDevice(&d));
    if (d != dev) {
        CHECK_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, d));
        dev = d;
    }
    return sms;
}

/* ---- backward, a warp per row (opt-in: kc_norm_set_rows) -------------------
 *
 * The same formulas as norm_bwd_kernel, laid out like the register forward:
 * a warp owns a row, a lane its chunks c = 8·lane + 256·i (i < NV), and
 * x, dy and dinp's chunks are all loaded (16 bytes each, dinp through L2)
 * before the first use: 3·NV loads in flight a lane, nothing re-read. The
 * weight gradients go to the warp's own accumulator row in shared memory
 * (a column belongs to one lane: no races, no atomics); at the end the
 * block folds its warps' rows in order into its partial row, and
 * kc_reduce_partials folds the blocks': deterministic. 4 warps a block,
 * 4·2C floats of smem (64 KB at C = 2048 with a bias). ptxas: 252
 * registers at C = 2048 (NV 8), no spills: 2 blocks an SM, 8 warps with
 * 24 loads of 16 bytes in flight a lane, ~98 KB an SM. */
enum { NR_WARPS = 4, NR_THREADS = 32 * NR_WARPS, NR_PER_SM = 2, NR_MAX_C = 2048 };

__device__ __forceinline__ void acc8(float *a, const float v[8]) {
    float4 *p = (float4 *)a;
    float4 u = p[0], w = p[1];
    u.x += v[0]; u.y += v[1]; u.z += v[2]; u.w += v[3];
    w.x += v[4]; w.y += v[5]; w.z += v[6]; w.w += v[7];
    p[0] = u;
    p[1] = w;
}

template <int NV>
__global__ void __launch_bounds__(NR_THREADS)
norm_bwd_rows_kernel(bf16 *__restrict__ dinp, float *__restrict__ part, const bf16 *__restrict__ dout,
                     const bf16 *__restrict__ inp, const bf16 *__restrict__ weight,
                     const float *__restrict__ mean, const float *__restrict__ rstd, int N, int C, bool want_b) {
    extern __shared__ float4 sacc4[];
    float *sacc = (float *)sacc4;
    int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, width = want_b ? 2 * C : C;
    float *acc = sacc + (size_t)warp * width;
    for (int c = lane; c < width; c += 32) acc[c] = 0.0f;
    __syncwarp();
    for (int row = blockIdx.x * NR_WARPS + warp; row < N; row += gridDim.x * NR_WARPS) {
        size_t off = (size_t)row * C;
        Pack8 xv[NV], dv[NV], gv[NV];
#pragma unroll
        for (int i = 0; i < NV; i++) {
            int c = lane * 8 + 256 * i;
            if (c < C) {
                xv[i] = *(const Pack8 *)(inp + off + c);
                dv[i] = *(const Pack8 *)(dout + off + c);
                gv[i] = load8_cg(dinp + off, c, C, true);
            }
        }
        float mu = mean ? mean[row] : 0.0f, r = rstd[row], m1 = 0.0f, m2 = 0.0f;
#pragma unroll
        for (int i = 0; i < NV; i++) {
            int c = lane * 8 + 256 * i;
            if (c >= C) continue;
            float w8[8];
            load8(w8, weight, c, C, true);
            for (int j = 0; j < 8; j++) {
                float dn = __bfloat162float(dv[i].v[j]) * w8[j];
                m1 += dn;
                m2 += dn * (__bfloat162float(xv[i].v[j]) - mu) * r;
            }
        }
        m1 = warp_sum(m1);
        m2 = warp_sum(m2);
        float a1 = mean ? m1 / C : 0.0f, a2 = m2 / C;
#pragma unroll
        for (int i = 0; i < NV; i++) {
            int c = lane * 8 + 256 * i;
            if (c >= C) continue;
            float w8[8], g8[8], sw[8], sb[8];
            load8(w8, weight, c, C, true);
            for (int j = 0; j < 8; j++) {
                float d = __bfloat162float(dv[i].v[j]), n = (__bfloat162float(xv[i].v[j]) - mu) * r;
                g8[j] = __bfloat162float(gv[i].v[j]) + (d * w8[j] - a1 - n * a2) * r;
                sw[j] = d * n;
                sb[j] = d;
            }
            store8(dinp + off, g8, c, C, true);
            acc8(acc + c, sw);
            if (want_b) acc8(acc + C + c, sb);
        }
    }
    __syncthreads();
    for (int c = threadIdx.x; c < width; c += NR_THREADS) {
        float s = 0.0f;
        for (int w = 0; w < NR_WARPS; w++) s += sacc[(size_t)w * width + c];
        part[(size_t)blockIdx.x * width + c] = s;
    }
}

typedef void (*NormRowsKernel)(bf16 *, float *, const bf16 *, const bf16 *, const bf16 *, const float *,
                               const float *, int, int, bool);
static NormRowsKernel norm_rows_for(int C) {
    if (C <= 256) return norm_bwd_rows_kernel<1>;
    if (C <= 512) return norm_bwd_rows_kernel<2>;
    if (C <= 1024) return norm_bwd_rows_kernel<4>;
    if (C <= NR_MAX_C) return norm_bwd_rows_kernel<8>;
    return NULL;
}

static int norm_rows = -1;
static bool norm_rows_allowed(void) {
    if (norm_rows < 0) {
        const char *e = getenv("ULTRAPLAN_NORM_BWD");
        norm_rows = e && !strcmp(e, "rows");
    }
    return norm_rows;
}
int kc_norm_set_rows(int on) {
    int prev = norm_rows_allowed();
    norm_rows = on != 0;
    return prev;
}

/* the warp-per-row backward when it is chosen and fits; false: not run */
static bool norm_bwd_rows(bf16 *dinp, float *dweight, float *dbias, const bf16 *dout, const bf16 *inp,
                          const bf16 *weight, const float *mean, const float *rstd, int N, int C, bool vec,
                          cudaStream_t st) {
    NormRowsKernel k = vec && norm_rows_allowed() ? norm_rows_for(C) : NULL;
    if (!k) return false;
    int width = dbias ? 2 * C : C;
    size_t smem = (size_t)NR_WARPS * width * sizeof(float);
    if (smem > (48 << 10))
        CHECK_CUDA(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
    size_t g = std::min((size_t)ceil_div(N, NR_WARPS), (size_t)NR_PER_SM * kc_sm_count());
    g = std::min(g, kc_ctx.partial_floats / width);
    k<<<(unsigned)g, NR_THREADS, smem, st>>>(dinp, kc_ctx.partials, dout, inp, weight, mean, rstd, N, C,
                                            dbias != NULL);
    CHECK_LAUNCH();
    kc_reduce_partials(dweight, dbias, kc_ctx.partials, (int)g, C, width, st);
    return true;
}

static void norm_bwd(bf16 *dinp, float *dweight, float *dbias, const bf16 *dout,
                     const bf16 *inp, const bf16 *weight, const float *mean,
                     const float *rstd, int N, int C, cudaStream_t st) {
    if (N <= 0 || C <= 0) return;
    kc_require_init();
    bool vec = rows_vec(dinp, dout, inp, C) && aligned16(weight);
    if (norm_bwd_rows(dinp, dweight, dbias, dout, inp, weight, mean, rstd, N, C, vec, st)) return;
    int width = dbias ? 2 * C : C;
    size_t smem = (size_t)width * sizeof(float);
    bool acc_smem = smem <= NB_SMEM_MAX;
    if (!acc_smem) smem = 0;
    auto kernel = vec ? norm_bwd_kernel<true> : norm_bwd_kernel<false>;
    if (smem > (48 << 10))
        CHECK_CUDA(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
    size_t g = std::min((size_t)ceil_div(N, ROWS_PER_BLOCK), (size_t)NB_PER_SM * kc_sm_count());
    g = std::min(g, kc_ctx.partial_floats / width);
    if (g == 0) kc_fail("norm_bwd", "C too large for the partials scratch", __FILE__, __LINE__);
    kernel<<<(unsigned)g, NB_THREADS, smem, st>>>(dinp, kc_ctx.partials, dout, inp, weight, mean,
                                                  rstd, N, C, dbias != NULL, acc_smem);
    CHECK_LAUNCH();
    kc_reduce_partials(dweight, dbias, kc_ctx.partials, (int)g, C, width, st);
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
    if (N <= 0) return;
    bool vec = rows_vec(out, inp, weight, C);
    NormRegsKernel k = vec && norm_regs_allowed() ? norm_regs_for(C) : NULL;
    if (k)
        k<<<ceil_div(N, ROWS_PER_BLOCK), 32 * ROWS_PER_BLOCK, 0, st>>>(out, NULL, rstd, inp, weight, NULL, N, C,
                                                                      eps);
    else
        rmsnorm_fwd_kernel<<<ceil_div(N, ROWS_PER_BLOCK), 32 * ROWS_PER_BLOCK, 0, st>>>(
            out, rstd, inp, weight, N, C, eps, vec);
    CHECK_LAUNCH();
}

void kc_rmsnorm_bwd(bf16 *dinp, float *dweight, const bf16 *dout, const bf16 *inp,
                    const bf16 *weight, const float *rstd, int N, int C, cudaStream_t st) {
    norm_bwd(dinp, dweight, NULL, dout, inp, weight, NULL, rstd, N, C, st);
}
