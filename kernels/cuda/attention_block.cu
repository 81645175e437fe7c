/* attention_block.cu — the blocks of context-parallel ring attention
 * (kernels_cuda.h, kc_attention_block_*): causal GQA attention of one cp
 * rank's local queries against one cp rank's local keys and values, masked
 * by the global positions of Megatron's two-chunk load balance, and the
 * log-sum-exp merge of two partial outputs.
 *
 * SIMT, fp32 arithmetic, the layout of attention_simt.cu (4 warps of 4
 * rows, the 32 lanes walking the other side 32 at a time from fp32 smem
 * tiles) but with no tile skipping: a tile is masked element by element by
 * position, so any pair of ranks works (a block wholly in the future of the
 * queries costs a full pass and contributes nothing). Correctness first: no
 * tensor cores, no early exit. The partial outputs and every gradient are
 * fp32, so a ring of cp blocks rounds once, at its end. */
#include <limits.h>
#include <math.h>
#include "attention.cuh"

namespace {

enum { NW = 4, RPW = 4, BR = NW * RPW, BC = 32 };

/* global position of local row t of cp rank r (local length T = 2c) */
__device__ __forceinline__ int gpos(int T, int cp, int r, int t) {
    if (cp <= 1) return t;
    int c = T / 2;
    return t < c ? r * c + t : (2 * cp - 1 - r) * c + (t - c);
}

template <int HS>
__device__ void tile(float *s, int ld, const bf16 *x, int b, int t0, int n, int T, int nh, int hd, float scale) {
    for (int idx = threadIdx.x; idx < n * HS; idx += blockDim.x) {
        int r = idx / HS, d = idx % HS, t = t0 + r;
        s[r * ld + d] = t < T ? scale * __bfloat162float(x[(((size_t)b * T + t) * nh + hd) * HS + d]) : 0.0f;
    }
}

template <int HS>
__global__ void __launch_bounds__(NW * 32)
blk_fwd(float *out, float *lse, const bf16 *q, const bf16 *k, const bf16 *v, int T, int NH, int NKV, int cp,
        int rq, int rk) {
    constexpr int E = HS / 32, LK = HS + 1;
    extern __shared__ float sm[];
    float *Qs = sm, *Ks = Qs + BR * HS, *Vs = Ks + BC * LK;
    int q0 = blockIdx.x * BR, h = blockIdx.y, b = blockIdx.z, g = h / (NH / NKV);
    int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    tile<HS>(Qs, HS, q, b, q0, BR, T, NH, h, rsqrtf((float)HS));
    float acc[RPW][E], mrow[RPW], lrow[RPW];
    int qp[RPW];
    #pragma unroll
    for (int r = 0; r < RPW; r++) {
        mrow[r] = -INFINITY; lrow[r] = 0.0f;
        int tq = q0 + warp * RPW + r;
        qp[r] = tq < T ? gpos(T, cp, rq, tq) : -1;
        #pragma unroll
        for (int e = 0; e < E; e++) acc[r][e] = 0.0f;
    }
    for (int k0 = 0; k0 < T; k0 += BC) {
        __syncthreads();
        tile<HS>(Ks, LK, k, b, k0, BC, T, NKV, g, 1.0f);
        tile<HS>(Vs, HS, v, b, k0, BC, T, NKV, g, 1.0f);
        __syncthreads();
        float s[RPW], p[RPW];
        #pragma unroll
        for (int r = 0; r < RPW; r++) s[r] = p[r] = 0.0f;
        for (int d = 0; d < HS; d++) {
            float kd = Ks[lane * LK + d];
            #pragma unroll
            for (int r = 0; r < RPW; r++) s[r] += Qs[(warp * RPW + r) * HS + d] * kd;
        }
        int j = k0 + lane, kp = j < T ? gpos(T, cp, rk, j) : INT_MAX;
        #pragma unroll
        for (int r = 0; r < RPW; r++) {
            bool valid = qp[r] >= 0 && kp <= qp[r];
            float mt = warp_max(valid ? s[r] : -INFINITY);
            if (mt == -INFINITY) continue;               // uniform over the warp
            float mnew = fmaxf(mrow[r], mt);
            p[r] = valid ? expf(s[r] - mnew) : 0.0f;
            float corr = expf(mrow[r] - mnew);           // 0 while nothing was seen
            lrow[r] = lrow[r] * corr + warp_sum(p[r]);
            #pragma unroll
            for (int e = 0; e < E; e++) acc[r][e] *= corr;
            mrow[r] = mnew;
        }
        for (int jj = 0; jj < BC; jj++) {
            float vj[E];
            #pragma unroll
            for (int e = 0; e < E; e++) vj[e] = Vs[jj * HS + lane + 32 * e];
            #pragma unroll
            for (int r = 0; r < RPW; r++) {
                float pj = __shfl_sync(0xffffffffu, p[r], jj);
                #pragma unroll
                for (int e = 0; e < E; e++) acc[r][e] += pj * vj[e];
            }
        }
    }
    #pragma unroll
    for (int r = 0; r < RPW; r++) {
        int tq = q0 + warp * RPW + r;
        if (tq >= T) continue;
        bool seen = lrow[r] > 0.0f;
        float inv = seen ? 1.0f / lrow[r] : 0.0f;
        float *o = out + (((size_t)b * T + tq) * NH + h) * HS;
        #pragma unroll
        for (int e = 0; e < E; e++) o[lane + 32 * e] = acc[r][e] * inv;
        if (lane == 0) lse[((size_t)b * NH + h) * T + tq] = seen ? mrow[r] + logf(lrow[r]) : -INFINITY;
    }
}

__global__ void merge_kernel(float *out, float *lse, const float *outb, const float *lseb, int T, int NH, int HS,
                             size_t rows) {
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;   // row (b, t, h)
    if (i >= rows) return;
    int h = (int)(i % NH), t = (int)((i / NH) % T);
    size_t b = i / ((size_t)NH * T), li = (b * NH + h) * T + t;
    float la = lse[li], lb = lseb[li];
    if (lb == -INFINITY) return;
    float *o = out + i * HS;
    const float *ob = outb + i * HS;
    if (la == -INFINITY) {
        for (int d = 0; d < HS; d++) o[d] = ob[d];
        lse[li] = lb;
        return;
    }
    float mx = fmaxf(la, lb), l = mx + logf(expf(la - mx) + expf(lb - mx));
    float wa = expf(la - l), wb = expf(lb - l);
    for (int d = 0; d < HS; d++) o[d] = o[d] * wa + ob[d] * wb;
    lse[li] = l;
}

/* D_t = dout_t · out_t for rows [t0, t0+n) of head h, one warp a row */
template <int HS>
__device__ void rowdot(float *Ds, const bf16 *dout, const bf16 *out, int b, int t0, int n, int T, int NH, int h) {
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
blk_dkdv(float *dk, float *dv, const bf16 *dout, const bf16 *q, const bf16 *k, const bf16 *v, const bf16 *out,
         const float *lse, int T, int NH, int NKV, int cp, int rq, int rk) {
    constexpr int E = HS / 32, LQ = HS + 1;
    extern __shared__ float sm[];
    float *Qs = sm, *dOs = Qs + BC * LQ, *Ks = dOs + BC * LQ, *Vs = Ks + BR * HS;
    float *Ls = Vs + BR * HS, *Ds = Ls + BC;
    int k0 = blockIdx.x * BR, g = blockIdx.y, b = blockIdx.z, rep = NH / NKV;
    int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    float scale = rsqrtf((float)HS);
    tile<HS>(Ks, HS, k, b, k0, BR, T, NKV, g, 1.0f);
    tile<HS>(Vs, HS, v, b, k0, BR, T, NKV, g, 1.0f);
    float dka[RPW][E], dva[RPW][E];
    int kp[RPW];
    #pragma unroll
    for (int r = 0; r < RPW; r++) {
        int j = k0 + warp * RPW + r;
        kp[r] = j < T ? gpos(T, cp, rk, j) : INT_MAX;
        #pragma unroll
        for (int e = 0; e < E; e++) dka[r][e] = dva[r][e] = 0.0f;
    }
    for (int h = g * rep; h < (g + 1) * rep; h++) {
        for (int q0 = 0; q0 < T; q0 += BC) {
            __syncthreads();
            tile<HS>(Qs, LQ, q, b, q0, BC, T, NH, h, 1.0f);
            tile<HS>(dOs, LQ, dout, b, q0, BC, T, NH, h, 1.0f);
            rowdot<HS>(Ds, dout, out, b, q0, BC, T, NH, h);
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
            int tq = q0 + lane, qp = tq < T ? gpos(T, cp, rq, tq) : -1;
            float p[RPW], ds[RPW];
            #pragma unroll
            for (int r = 0; r < RPW; r++) {
                bool valid = qp >= 0 && kp[r] <= qp;
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
            dk[off + d] += dka[r][e];
            dv[off + d] += dva[r][e];
        }
    }
}

template <int HS>
__global__ void __launch_bounds__(NW * 32)
blk_dq(float *dq, const bf16 *dout, const bf16 *q, const bf16 *k, const bf16 *v, const bf16 *out,
       const float *lse, int T, int NH, int NKV, int cp, int rq, int rk) {
    constexpr int E = HS / 32, LK = HS + 1;
    extern __shared__ float sm[];
    float *Qs = sm, *dOs = Qs + BR * HS, *Ks = dOs + BR * HS, *Vs = Ks + BC * LK;
    float *Ls = Vs + BC * LK, *Ds = Ls + BR;
    int q0 = blockIdx.x * BR, h = blockIdx.y, b = blockIdx.z, g = h / (NH / NKV);
    int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    float scale = rsqrtf((float)HS);
    tile<HS>(Qs, HS, q, b, q0, BR, T, NH, h, 1.0f);
    tile<HS>(dOs, HS, dout, b, q0, BR, T, NH, h, 1.0f);
    rowdot<HS>(Ds, dout, out, b, q0, BR, T, NH, h);
    for (int i = threadIdx.x; i < BR; i += blockDim.x)
        Ls[i] = q0 + i < T ? lse[((size_t)b * NH + h) * T + q0 + i] : 0.0f;
    float acc[RPW][E];
    int qp[RPW];
    #pragma unroll
    for (int r = 0; r < RPW; r++) {
        int tq = q0 + warp * RPW + r;
        qp[r] = tq < T ? gpos(T, cp, rq, tq) : -1;
        #pragma unroll
        for (int e = 0; e < E; e++) acc[r][e] = 0.0f;
    }
    for (int k0 = 0; k0 < T; k0 += BC) {
        __syncthreads();
        tile<HS>(Ks, LK, k, b, k0, BC, T, NKV, g, 1.0f);
        tile<HS>(Vs, LK, v, b, k0, BC, T, NKV, g, 1.0f);
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
        int j = k0 + lane, kp = j < T ? gpos(T, cp, rk, j) : INT_MAX;
        float ds[RPW];
        #pragma unroll
        for (int r = 0; r < RPW; r++) {
            int row = warp * RPW + r;
            bool valid = qp[r] >= 0 && kp <= qp[r];
            float p = valid ? expf(s[r] * scale - Ls[row]) : 0.0f;
            ds[r] = valid ? p * (dp[r] - Ds[row]) * scale : 0.0f;
        }
        for (int jj = 0; jj < BC; jj++) {
            float kj[E];
            #pragma unroll
            for (int e = 0; e < E; e++) kj[e] = Ks[jj * LK + lane + 32 * e];
            #pragma unroll
            for (int r = 0; r < RPW; r++) {
                float dsj = __shfl_sync(0xffffffffu, ds[r], jj);
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
        for (int e = 0; e < E; e++) dq[off + lane + 32 * e] += acc[r][e];
    }
}

size_t fwd_smem(int HS)  { return sizeof(float) * ((size_t)BR * HS + BC * (HS + 1) + BC * HS); }
size_t dkdv_smem(int HS) { return sizeof(float) * (2 * (size_t)BC * (HS + 1) + 2 * BR * HS + 2 * BC); }
size_t dq_smem(int HS)   { return sizeof(float) * (2 * (size_t)BR * HS + 2 * BC * (HS + 1) + 2 * BR); }

template <int HS>
void fwd(float *out, float *lse, const bf16 *q, const bf16 *k, const bf16 *v, int B, int T, int NH, int NKV,
         int cp, int rq, int rk, cudaStream_t st) {
    attn_launch(blk_fwd<HS>, dim3(ceil_div(T, BR), NH, B), NW * 32, fwd_smem(HS), st, out, lse, q, k, v, T, NH,
                NKV, cp, rq, rk);
}

template <int HS>
void bwd(float *dq, float *dk, float *dv, const bf16 *dout, const bf16 *q, const bf16 *k, const bf16 *v,
         const bf16 *out, const float *lse, int B, int T, int NH, int NKV, int cp, int rq, int rk, cudaStream_t st) {
    if (dk && dv)
        attn_launch(blk_dkdv<HS>, dim3(ceil_div(T, BR), NKV, B), NW * 32, dkdv_smem(HS), st, dk, dv, dout, q, k, v,
                    out, lse, T, NH, NKV, cp, rq, rk);
    if (dq)
        attn_launch(blk_dq<HS>, dim3(ceil_div(T, BR), NH, B), NW * 32, dq_smem(HS), st, dq, dout, q, k, v, out, lse,
                    T, NH, NKV, cp, rq, rk);
}

void check(const char *fn, int T, int NH, int NKV, int HS, int cp, int rq, int rk) {
    bool ok = NH > 0 && NKV > 0 && NH % NKV == 0 && kc_attention_supported(HS) && cp >= 1 && rq >= 0 && rq < cp &&
              rk >= 0 && rk < cp && (cp == 1 || T % 2 == 0);
    if (!ok) {
        char msg[160];
        snprintf(msg, sizeof msg, "unsupported shape T=%d HS=%d NH=%d NKV=%d cp=%d rq=%d rk=%d (HS in 32/64/96/128, "
                 "NH %% NKV == 0, ranks below cp, even T under cp)", T, HS, NH, NKV, cp, rq, rk);
        kc_fail(fn, msg, __FILE__, __LINE__);
    }
}

}  // namespace

void kc_attention_block_fwd(float *out, float *lse, const bf16 *q, const bf16 *k, const bf16 *v, int B, int T,
                            int NH, int NKV, int HS, int cp, int rq, int rk, cudaStream_t st) {
    if (B * T == 0) return;
    check("kc_attention_block_fwd", T, NH, NKV, HS, cp, rq, rk);
    switch (HS) {
    case 32:  fwd<32>(out, lse, q, k, v, B, T, NH, NKV, cp, rq, rk, st); break;
    case 64:  fwd<64>(out, lse, q, k, v, B, T, NH, NKV, cp, rq, rk, st); break;
    case 96:  fwd<96>(out, lse, q, k, v, B, T, NH, NKV, cp, rq, rk, st); break;
    default:  fwd<128>(out, lse, q, k, v, B, T, NH, NKV, cp, rq, rk, st); break;
    }
}

void kc_attention_merge(float *out, float *lse, const float *outb, const float *lseb, int B, int T, int NH, int HS,
                        cudaStream_t st) {
    size_t rows = (size_t)B * T * NH;
    if (!rows) return;
    merge_kernel<<<ceil_div(rows, 256), 256, 0, st>>>(out, lse, outb, lseb, T, NH, HS, rows);
    CHECK_LAUNCH();
}

void kc_attention_block_bwd(float *dq, float *dk, float *dv, const bf16 *dout, const bf16 *q, const bf16 *k,
                            const bf16 *v, const bf16 *out, const float *lse, int B, int T, int NH, int NKV, int HS,
                            int cp, int rq, int rk, cudaStream_t st) {
    if (B * T == 0) return;
    check("kc_attention_block_bwd", T, NH, NKV, HS, cp, rq, rk);
    switch (HS) {
    case 32:  bwd<32>(dq, dk, dv, dout, q, k, v, out, lse, B, T, NH, NKV, cp, rq, rk, st); break;
    case 64:  bwd<64>(dq, dk, dv, dout, q, k, v, out, lse, B, T, NH, NKV, cp, rq, rk, st); break;
    case 96:  bwd<96>(dq, dk, dv, dout, q, k, v, out, lse, B, T, NH, NKV, cp, rq, rk, st); break;
    default:  bwd<128>(dq, dk, dv, dout, q, k, v, out, lse, B, T, NH, NKV, cp, rq, rk, st); break;
    }
}
