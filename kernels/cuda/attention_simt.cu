/* attention_simt.cu — the SIMT attention kernels (every supported HS, and
 * kc_attention_set_impl(KC_ATTN_SIMT)): 4 warps each holding 4 rows in
 * registers, the 32 lanes walking the other side 32 at a time from fp32
 * smem tiles; fp32 arithmetic throughout. The reference the tensor-core
 * kernels (attention_tc.cu) are tested against; attention.cu dispatches. */
#include <math.h>
#include "attention.cuh"

/* SIMT path: NW warps of RPW rows, BC columns a tile */
enum { NW = 4, RPW = 4, BR = NW * RPW, BC = 32 };

/* rows [t0, t0+n) of head hd of x (B, T, nh, HS) into smem s (row stride ld),
 * scaled, zero past T */
template <int HS>
__device__ void load_tile(float *s, int ld, const bf16 *x, int b, int t0, int n, int T,
                          int nh, int hd, float scale) {
    for (int idx = threadIdx.x; idx < n * HS; idx += blockDim.x) {
        int r = idx / HS, d = idx % HS, t = t0 + r;
        s[r * ld + d] = t < T ? scale * __bfloat162float(x[(((size_t)b * T + t) * nh + hd) * HS + d]) : 0.0f;
    }
}

template <int HS>
__global__ void __launch_bounds__(NW * 32)
attention_fwd_kernel(bf16 *out, float *lse, const bf16 *q, const bf16 *k, const bf16 *v,
                     int T, int NH, int NKV) {
    constexpr int E = HS / 32, LK = HS + 1;
    extern __shared__ float sm[];
    float *Qs = sm, *Ks = Qs + BR * HS, *Vs = Ks + BC * LK;
    int q0 = blockIdx.x * BR, h = blockIdx.y, b = blockIdx.z, g = h / (NH / NKV);
    int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    load_tile<HS>(Qs, HS, q, b, q0, BR, T, NH, h, rsqrtf((float)HS));

    float acc[RPW][E], mrow[RPW], lrow[RPW];
    #pragma unroll
    for (int r = 0; r < RPW; r++) {
        mrow[r] = -INFINITY; lrow[r] = 0.0f;
        #pragma unroll
        for (int e = 0; e < E; e++) acc[r][e] = 0.0f;
    }
    int kend = min(T, q0 + BR);
    for (int k0 = 0; k0 < kend; k0 += BC) {
        __syncthreads();
        load_tile<HS>(Ks, LK, k, b, k0, BC, T, NKV, g, 1.0f);
        load_tile<HS>(Vs, HS, v, b, k0, BC, T, NKV, g, 1.0f);
        __syncthreads();
        float s[RPW];
        #pragma unroll
        for (int r = 0; r < RPW; r++) s[r] = 0.0f;
        for (int d = 0; d < HS; d++) {
            float kd = Ks[lane * LK + d];
            #pragma unroll
            for (int r = 0; r < RPW; r++) s[r] += Qs[(warp * RPW + r) * HS + d] * kd;
        }
        float p[RPW];
        #pragma unroll
        for (int r = 0; r < RPW; r++) {
            int tq = q0 + warp * RPW + r;
            p[r] = 0.0f;
            if (tq >= T || k0 > tq) continue;           // uniform over the warp
            bool valid = k0 + lane <= tq;
            float mt = warp_max(valid ? s[r] : -INFINITY);
            float mnew = fmaxf(mrow[r], mt);
            p[r] = valid ? expf(s[r] - mnew) : 0.0f;
            float corr = expf(mrow[r] - mnew);           // 0 on the first tile
            lrow[r] = lrow[r] * corr + warp_sum(p[r]);
            #pragma unroll
            for (int e = 0; e < E; e++) acc[r][e] *= corr;
            mrow[r] = mnew;
        }
        for (int j = 0; j < BC; j++) {
            float vj[E];
            #pragma unroll
            for (int e = 0; e < E; e++) vj[e] = Vs[j * HS + lane + 32 * e];
            #pragma unroll
            for (int r = 0; r < RPW; r++) {
                float pj = __shfl_sync(0xffffffffu, p[r], j);
                #pragma unroll
                for (int e = 0; e < E; e++) acc[r][e] += pj * vj[e];
            }
        }
    }
    #pragma unroll
    for (int r = 0; r < RPW; r++) {
        int tq = q0 + warp * RPW + r;
        if (tq >= T) continue;
        float inv = 1.0f / lrow[r];
        bf16 *o = out + (((size_t)b * T + tq) * NH + h) * HS;
        #pragma unroll
        for (int e = 0; e < E; e++) o[lane + 32 * e] = __float2bfloat16(acc[r][e] * inv);
        if (lane == 0) lse[((size_t)b * NH + h) * T + tq] = mrow[r] + logf(lrow[r]);
    }
}

/* D_t = dout_t · out_t for query rows [t0, t0+n) of head h, one warp a row */
template <int HS>
__device__ void load_D(float *Ds, const bf16 *dout, const bf16 *out, int b, int t0, int n,
                       int T, int NH, int h) {
    int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    for (int r = warp; r < n; r += NW) {
        int t = t0 + r;
        float s = 0.0f;
        if (t < T) {
            size_t off = (((size_t)b * T + t) * NH + h) * HS;
            for (int d = lane; d < HS; d += 32)
                s += __bfloat162float(dout[off + d]) * __bfloat162float(out[off + d]);
        }
        s = warp_sum(s);
        if (lane == 0) Ds[r] = s;
    }
}

template <int HS>
__global__ void __launch_bounds__(NW * 32)
attention_bwd_dkdv_kernel(bf16 *dk, bf16 *dv, const bf16 *dout, const bf16 *q,
                          const bf16 *k, const bf16 *v, const bf16 *out, const float *lse,
                          int T, int NH, int NKV) {
    constexpr int E = HS / 32, LQ = HS + 1;
    extern __shared__ float sm[];
    float *Qs = sm, *dOs = Qs + BC * LQ, *Ks = dOs + BC * LQ, *Vs = Ks + BR * HS;
    float *Ls = Vs + BR * HS, *Ds = Ls + BC;
    int k0 = blockIdx.x * BR, g = blockIdx.y, b = blockIdx.z, rep = NH / NKV;
    int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    float scale = rsqrtf((float)HS);
    load_tile<HS>(Ks, HS, k, b, k0, BR, T, NKV, g, 1.0f);
    load_tile<HS>(Vs, HS, v, b, k0, BR, T, NKV, g, 1.0f);

    float dka[RPW][E], dva[RPW][E];
    #pragma unroll
    for (int r = 0; r < RPW; r++)
        #pragma unroll
        for (int e = 0; e < E; e++) dka[r][e] = dva[r][e] = 0.0f;
    for (int h = g * rep; h < (g + 1) * rep; h++) {
        for (int q0 = k0 / BC * BC; q0 < T; q0 += BC) {
            __syncthreads();
            load_tile<HS>(Qs, LQ, q, b, q0, BC, T, NH, h, 1.0f);
            load_tile<HS>(dOs, LQ, dout, b, q0, BC, T, NH, h, 1.0f);
            load_D<HS>(Ds, dout, out, b, q0, BC, T, NH, h);
            for (int i = threadIdx.x; i < BC; i += blockDim.x)
                Ls[i] = q0 + i < T ? lse[((size_t)b * NH + h) * T + q0 + i] : 0.0f;
            __syncthreads();
            float s[RPW], dp[RPW];
            #pragma unroll
            for (int r = 0; r < RPW; r++) s[r] = dp[r] = 0.0f;
            for (int d = 0; d < HS; d++) {
                float qd = Qs[lane * LQ + d], od = dOs[lane * LQ + d];
                #pragma unroll
                for (int r = 0; r < RPW; r++) {
                    s[r] += qd * Ks[(warp * RPW + r) * HS + d];
                    dp[r] += od * Vs[(warp * RPW + r) * HS + d];
                }
            }
            int tq = q0 + lane;
            float p[RPW], ds[RPW];
            #pragma unroll
            for (int r = 0; r < RPW; r++) {
                int j = k0 + warp * RPW + r;
                bool valid = tq < T && j <= tq;
                p[r] = valid ? expf(s[r] * scale - Ls[lane]) : 0.0f;
                ds[r] = valid ? p[r] * (dp[r] - Ds[lane]) * scale : 0.0f;
            }
            for (int i = 0; i < BC; i++) {
                float qi[E], oi[E];
                #pragma unroll
                for (int e = 0; e < E; e++) {
                    qi[e] = Qs[i * LQ + lane + 32 * e];
                    oi[e] = dOs[i * LQ + lane + 32 * e];
                }
                #pragma unroll
                for (int r = 0; r < RPW; r++) {
                    float pi = __shfl_sync(0xffffffffu, p[r], i);
                    float dsi = __shfl_sync(0xffffffffu, ds[r], i);
                    #pragma unroll
                    for (int e = 0; e < E; e++) {
                        dva[r][e] += pi * oi[e];
                        dka[r][e] += dsi * qi[e];
                    }
                }
            }
        }
    }
    #pragma unroll
    for (int r = 0; r < RPW; r++) {
        int j = k0 + warp * RPW + r;
        if (j >= T) continue;
        size_t off = (((size_t)b * T + j) * NKV + g) * HS;
        #pragma unroll
        for (int e = 0; e < E; e++) {
            int d = lane + 32 * e;
            dk[off + d] = __float2bfloat16(__bfloat162float(dk[off + d]) + dka[r][e]);
            dv[off + d] = __float2bfloat16(__bfloat162float(dv[off + d]) + dva[r][e]);
        }
    }
}

template <int HS>
__global__ void __launch_bounds__(NW * 32)
attention_bwd_dq_kernel(bf16 *dq, const bf16 *dout, const bf16 *q, const bf16 *k,
                        const bf16 *v, const bf16 *out, const float *lse,
                        int T, int NH, int NKV) {
    constexpr int E = HS / 32, LK = HS + 1;
    extern __shared__ float sm[];
    float *Qs = sm, *dOs = Qs + BR * HS, *Ks = dOs + BR * HS, *Vs = Ks + BC * LK;
    float *Ls = Vs + BC * LK, *Ds = Ls + BR;
    int q0 = blockIdx.x * BR, h = blockIdx.y, b = blockIdx.z, g = h / (NH / NKV);
    int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    float scale = rsqrtf((float)HS);
    load_tile<HS>(Qs, HS, q, b, q0, BR, T, NH, h, 1.0f);
    load_tile<HS>(dOs, HS, dout, b, q0, BR, T, NH, h, 1.0f);
    load_D<HS>(Ds, dout, out, b, q0, BR, T, NH, h);
    for (int i = threadIdx.x; i < BR; i += blockDim.x)
        Ls[i] = q0 + i < T ? lse[((size_t)b * NH + h) * T + q0 + i] : 0.0f;

    float acc[RPW][E];
    #pragma unroll
    for (int r = 0; r < RPW; r++)
        #pragma unroll
        for (int e = 0; e < E; e++) acc[r][e] = 0.0f;
    int kend = min(T, q0 + BR);
    for (int k0 = 0; k0 < kend; k0 += BC) {
        __syncthreads();
        load_tile<HS>(Ks, LK, k, b, k0, BC, T, NKV, g, 1.0f);
        load_tile<HS>(Vs, LK, v, b, k0, BC, T, NKV, g, 1.0f);
        __syncthreads();
        float s[RPW], dp[RPW];
        #pragma unroll
        for (int r = 0; r < RPW; r++) s[r] = dp[r] = 0.0f;
        for (int d = 0; d < HS; d++) {
            float kd = Ks[lane * LK + d], vd = Vs[lane * LK + d];
            #pragma unroll
            for (int r = 0; r < RPW; r++) {
                s[r] += Qs[(warp * RPW + r) * HS + d] * kd;
                dp[r] += dOs[(warp * RPW + r) * HS + d] * vd;
            }
        }
        float ds[RPW];
        #pragma unroll
        for (int r = 0; r < RPW; r++) {
            int row = warp * RPW + r, tq = q0 + row;
            bool valid = tq < T && k0 + lane <= tq;
            float p = valid ? expf(s[r] * scale - Ls[row]) : 0.0f;
            ds[r] = valid ? p * (dp[r] - Ds[row]) * scale : 0.0f;
        }
        for (int j = 0; j < BC; j++) {
            float kj[E];
            #pragma unroll
            for (int e = 0; e < E; e++) kj[e] = Ks[j * LK + lane + 32 * e];
            #pragma unroll
            for (int r = 0; r < RPW; r++) {
                float dsj = __shfl_sync(0xffffffffu, ds[r], j);
                #pragma unroll
                for (int e = 0; e < E; e++) acc[r][e] += dsj * kj[e];
            }
        }
    }
    #pragma unroll
    for (int r = 0; r < RPW; r++) {
        int tq = q0 + warp * RPW + r;
        if (tq >= T) continue;
        size_t off = (((size_t)b * T + tq) * NH + h) * HS;
        #pragma unroll
        for (int e = 0; e < E; e++) {
            int d = lane + 32 * e;
            dq[off + d] = __float2bfloat16(__bfloat162float(dq[off + d]) + acc[r][e]);
        }
    }
}

/* shared-memory bytes of each kernel, in floats */
static size_t fwd_smem(int HS)  { return sizeof(float) * ((size_t)BR * HS + BC * (HS + 1) + BC * HS); }
static size_t dkdv_smem(int HS) { return sizeof(float) * (2 * (size_t)BC * (HS + 1) + 2 * BR * HS + 2 * BC); }
static size_t dq_smem(int HS)   { return sizeof(float) * (2 * (size_t)BR * HS + 2 * BC * (HS + 1) + 2 * BR); }


template <int HS>
static void fwd(bf16 *out, float *lse, const bf16 *q, const bf16 *k, const bf16 *v,
                int B, int T, int NH, int NKV, cudaStream_t st) {
    attn_launch(attention_fwd_kernel<HS>, dim3(ceil_div(T, BR), NH, B), NW * 32, fwd_smem(HS), st,
                out, lse, q, k, v, T, NH, NKV);
}

template <int HS>
static void bwd(bf16 *dq, bf16 *dk, bf16 *dv, const bf16 *dout, const bf16 *q, const bf16 *k,
                const bf16 *v, const bf16 *out, const float *lse, int B, int T, int NH, int NKV,
                cudaStream_t st) {
    if (dk && dv)
        attn_launch(attention_bwd_dkdv_kernel<HS>, dim3(ceil_div(T, BR), NKV, B), NW * 32, dkdv_smem(HS), st,
                    dk, dv, dout, q, k, v, out, lse, T, NH, NKV);
    if (dq)
        attn_launch(attention_bwd_dq_kernel<HS>, dim3(ceil_div(T, BR), NH, B), NW * 32, dq_smem(HS), st,
                    dq, dout, q, k, v, out, lse, T, NH, NKV);
}

void attn_simt_fwd(bf16 *out, float *lse, const bf16 *q, const bf16 *k, const bf16 *v,
                   int B, int T, int NH, int NKV, int HS, cudaStream_t st) {
    switch (HS) {
    case 32:  fwd<32>(out, lse, q, k, v, B, T, NH, NKV, st); break;
    case 64:  fwd<64>(out, lse, q, k, v, B, T, NH, NKV, st); break;
    case 96:  fwd<96>(out, lse, q, k, v, B, T, NH, NKV, st); break;
    default:  fwd<128>(out, lse, q, k, v, B, T, NH, NKV, st); break;
    }
}

void attn_simt_bwd(bf16 *dq, bf16 *dk, bf16 *dv, const bf16 *dout, const bf16 *q, const bf16 *k,
                   const bf16 *v, const bf16 *out, const float *lse, int B, int T, int NH,
                   int NKV, int HS, cudaStream_t st) {
    switch (HS) {
    case 32:  bwd<32>(dq, dk, dv, dout, q, k, v, out, lse, B, T, NH, NKV, st); break;
    case 64:  bwd<64>(dq, dk, dv, dout, q, k, v, out, lse, B, T, NH, NKV, st); break;
    case 96:  bwd<96>(dq, dk, dv, dout, q, k, v, out, lse, B, T, NH, NKV, st); break;
    default:  bwd<128>(dq, dk, dv, dout, q, k, v, out, lse, B, T, NH, NKV, st); break;
    }
}
