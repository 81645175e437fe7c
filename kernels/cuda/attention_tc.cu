/* attention_tc.cu — the tensor-core attention kernels, HS 64 and 128 with
 * 16-byte aligned pointers (the default; see attention.cu for the design
 * and docs/gpu/NOTES.md for tiles, smem and the ptxas report). */
#include <math.h>
#include <mma.h>
#include "attention.cuh"

namespace wm = nvcuda::wmma;

/* TT queries or keys per tile, 16 per warp; P/dS tiles are bf16 with row
 * stride LDP, the 16 x 16 fp32 staging of one score fragment has stride LDF
 * (conflict-free float4 reads in the element-wise pass) */
enum { TT = 64, TW = 4, LDP = TT + 8, LDF = 20, LDS = TT + 4 };
#define LOG2E 1.4426950408889634f
#define LN2 0.6931471805599453f

typedef wm::fragment<wm::matrix_a, 16, 16, 16, bf16, wm::row_major> FragA;
typedef wm::fragment<wm::matrix_b, 16, 16, 16, bf16, wm::row_major> FragB;
typedef wm::fragment<wm::matrix_b, 16, 16, 16, bf16, wm::col_major> FragBT;   // Xᵀ of a row-major X
typedef wm::fragment<wm::accumulator, 16, 16, 16, float> FragC;

/* bf16 fragment loads from shared memory. wm::load_matrix_sync emits the
 * generic-address wmma.load for bf16 (4 LD.E + MOVM per fragment in the
 * SASS); the same PTX instruction with .shared lowers to one LDSM. Same
 * instruction, so the same fragment layout; 4 b32 registers a fragment.
 * The fragment's type picks the overload (a row-major, b row- or col-major). */
#define KC_WMMA_LD(name, Frag, op)                                                        \
    __device__ __forceinline__ void name(Frag &f, const bf16 *p, unsigned ld) {          \
        unsigned *x = (unsigned *)&f.x[0];                                               \
        unsigned a = (unsigned)__cvta_generic_to_shared(p);                              \
        asm volatile("wmma.load." op ".sync.aligned.m16n16k16.shared.bf16 {%0,%1,%2,%3}, [%4], %5;" \
                     : "=r"(x[0]), "=r"(x[1]), "=r"(x[2]), "=r"(x[3]) : "r"(a), "r"(ld) : "memory"); \
    }
KC_WMMA_LD(ld_smem, FragA, "a.row")
KC_WMMA_LD(ld_smem, FragB, "b.row")
KC_WMMA_LD(ld_smem, FragBT, "b.col")
#undef KC_WMMA_LD

/* smem bytes: one bf16 (TT, HS+8) tile (the +8 makes fragment loads
 * conflict-free), and each kernel's total */
__host__ __device__ static constexpr size_t tc_tile(int HS) { return (size_t)TT * (HS + 8) * sizeof(bf16); }
static constexpr size_t fwd_tc_warp = 16 * LDS * 4 + 16 * LDP * 2 + 16 * 16 * 4 + 16 * 4;
static constexpr size_t fwd_tc_smem(int HS) { return 2 * tc_tile(HS) + TW * fwd_tc_warp; }
static constexpr size_t dq_tc_warp = 2 * 16 * LDF * 4 + 16 * LDP * 2;
static constexpr size_t dq_tc_smem(int HS) { return 4 * tc_tile(HS) + 2 * TT * 4 + TW * dq_tc_warp; }
static constexpr size_t dkdv_tc_warp = 2 * 16 * LDF * 4 + 2 * 16 * LDP * 2;
static constexpr size_t dkdv_tc_smem(int HS) { return 4 * tc_tile(HS) + 2 * TT * 4 + TW * dkdv_tc_warp; }
/* the Q tile of the forward is staged in the warp areas; the accumulators
 * leave through the first two tiles, and every area stays 32-byte aligned */
static_assert(tc_tile(128) <= TW * fwd_tc_warp, "forward Q staging");
static_assert(TW * 16 * (128 + 4) * 4 <= 2 * tc_tile(128), "accumulator staging");
static_assert(tc_tile(64) % 32 == 0 && fwd_tc_warp % 32 == 0 && dq_tc_warp % 32 == 0 &&
              dkdv_tc_warp % 32 == 0 && (16 * LDS * 4) % 32 == 0 && (16 * LDF * 4) % 32 == 0,
              "wmma pointers 32-byte aligned");

/* rows [t0, t0+TT) of x (row stride rs elements) into the smem tile s,
 * 16 bytes a thread, zeros past T */
template <int HS>
__device__ __forceinline__ void tile_load(bf16 *s, const bf16 *x, size_t rs, int t0, int T) {
    constexpr int PR = HS / 8;
    for (int i = threadIdx.x; i < TT * PR; i += TW * 32) {
        int r = i / PR, c = i % PR * 8;
        uint4 p = make_uint4(0, 0, 0, 0);
        if (t0 + r < T) p = *(const uint4 *)(x + (size_t)(t0 + r) * rs + c);
        *(uint4 *)(s + r * (HS + 8) + c) = p;
    }
}

/* a warp's 16 x HS accumulator to rows t0.. (< T) of y (row stride rs),
 * through the fp32 staging st: y = f·acc (add 0) or y += f·acc (add 1),
 * f = scale times rowscale[r] when given; 16-byte stores */
template <int HS>
__device__ __forceinline__ void warp_store(bf16 *y, size_t rs, int t0, int T, const FragC *acc,
                                           float *st, const float *rowscale, float scale, bool add) {
    constexpr int LD = HS + 4, PR = HS / 8;
    #pragma unroll
    for (int n = 0; n < HS / 16; n++) wm::store_matrix_sync(st + n * 16, acc[n], LD, wm::mem_row_major);
    __syncwarp();
    for (int i = threadIdx.x & 31; i < 16 * PR; i += 32) {
        int r = i / PR, c = i % PR * 8;
        if (t0 + r >= T) continue;
        float f = rowscale ? scale * rowscale[r] : scale, x[8];
        *(float4 *)x = *(const float4 *)(st + r * LD + c);
        *(float4 *)(x + 4) = *(const float4 *)(st + r * LD + c + 4);
        bf16 *p = y + (size_t)(t0 + r) * rs + c;
        Pack8 o;
        if (add) {
            o = *(const Pack8 *)p;
            #pragma unroll
            for (int j = 0; j < 8; j++) o.v[j] = __float2bfloat16(f * x[j] + __bfloat162float(o.v[j]));
        } else {
            #pragma unroll
            for (int j = 0; j < 8; j++) o.v[j] = __float2bfloat16(f * x[j]);
        }
        *(Pack8 *)p = o;
    }
}

/* FlashAttention-2 forward: block = TT query rows (warp w owns 16), loop over
 * key tiles up to the diagonal. S = Q·Kᵀ on tensor cores, staged to smem
 * fp32; lane (r, half) of a warp runs the online softmax of row r over
 * columns half·32..+32 and writes P in bf16; O += P·V on tensor cores. The
 * accumulator's element→row map is unspecified, so the rescale goes through
 * a 16 x 16 smem tile of per-row factors loaded as an accumulator fragment
 * (same type, same map). Scores are kept in log2 units (exp2). */
template <int HS>
__global__ void __launch_bounds__(TW * 32, 3)   // 3 blocks an SM: smem 65 KB, ≤ 170 registers
attention_fwd_tc_kernel(bf16 *out, float *lse, const bf16 *q, const bf16 *k, const bf16 *v,
                        int T, int NH, int NKV) {
    constexpr int NF = HS / 16, LDT = HS + 8;
    extern __shared__ __align__(128) unsigned char tc_smem[];
    int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    bf16 *Ks = (bf16 *)tc_smem, *Vs = Ks + TT * LDT;
    unsigned char *wa = tc_smem + 2 * tc_tile(HS);
    bf16 *Qs = (bf16 *)wa;                             // before the loop only
    float *Ss = (float *)(wa + warp * fwd_tc_warp);    // (16, LDS) scores
    bf16 *Ps = (bf16 *)(Ss + 16 * LDS);                // (16, LDP) probabilities
    float *Cs = (float *)(Ps + 16 * LDP), *Linv = Cs + 256;

    int q0 = (gridDim.x - 1 - blockIdx.x) * TT;        // longest rows first
    int h = blockIdx.y, b = blockIdx.z, g = h / (NH / NKV);
    size_t qrs = (size_t)NH * HS, krs = (size_t)NKV * HS;
    const bf16 *kb = k + (size_t)b * T * krs + (size_t)g * HS;
    const bf16 *vb = v + (size_t)b * T * krs + (size_t)g * HS;
    tile_load<HS>(Qs, q + (size_t)b * T * qrs + (size_t)h * HS, qrs, q0, T);
    __syncthreads();
    FragA qf[NF];
    FragC of[NF];
    #pragma unroll
    for (int kk = 0; kk < NF; kk++) {
        ld_smem(qf[kk], Qs + warp * 16 * LDT + kk * 16, LDT);
        wm::fill_fragment(of[kk], 0.0f);
    }
    int r = lane & 15, half = lane >> 4, tq = q0 + warp * 16 + r, last = min(tq, T - 1);
    float sl2 = rsqrtf((float)HS) * LOG2E, m = -INFINITY, l = 0.0f;
    for (int k0 = 0; k0 <= q0; k0 += TT) {
        __syncthreads();                               // everyone is done with Q, K, V, S
        tile_load<HS>(Ks, kb, krs, k0, T);
        tile_load<HS>(Vs, vb, krs, k0, T);
        __syncthreads();
        int nj = k0 == q0 ? warp + 1 : TT / 16;        // 16-key blocks this warp can see
        for (int j = 0; j < nj; j++) {
            FragC sf;
            wm::fill_fragment(sf, 0.0f);
            #pragma unroll
            for (int kk = 0; kk < NF; kk++) {
                FragBT kf;
                ld_smem(kf, Ks + j * 16 * LDT + kk * 16, LDT);
                wm::mma_sync(sf, qf[kk], kf, sf);
            }
            wm::store_matrix_sync(Ss + j * 16, sf, LDS, wm::mem_row_major);
        }
        __syncwarp();
        // columns past nj blocks are stale, but their keys are all > last
        const float *srow = Ss + r * LDS + half * 32;
        int key0 = k0 + half * 32;
        float mt = -INFINITY;
        #pragma unroll
        for (int i = 0; i < 32; i += 4) {
            float s[4];
            *(float4 *)s = *(const float4 *)(srow + i);
            #pragma unroll
            for (int e = 0; e < 4; e++) if (key0 + i + e <= last) mt = fmaxf(mt, s[e]);
        }
        mt = fmaxf(mt, __shfl_xor_sync(0xffffffffu, mt, 16));   // key k0 <= last: finite
        float mnew = fmaxf(m, mt * sl2), sum = 0.0f;
        bf16 *prow = Ps + r * LDP + half * 32;
        #pragma unroll
        for (int i = 0; i < 32; i += 4) {
            float s[4];
            *(float4 *)s = *(const float4 *)(srow + i);
            __align__(8) bf16 p[4];
            #pragma unroll
            for (int e = 0; e < 4; e++) {
                float pe = key0 + i + e <= last ? exp2f(s[e] * sl2 - mnew) : 0.0f;
                sum += pe;
                p[e] = __float2bfloat16(pe);
            }
            *(uint2 *)(prow + i) = *(const uint2 *)p;
        }
        sum += __shfl_xor_sync(0xffffffffu, sum, 16);
        float corr = exp2f(m - mnew);                  // 0 on the first tile
        l = l * corr + sum;
        m = mnew;
        float4 c4 = make_float4(corr, corr, corr, corr);
        *(float4 *)(Cs + r * 16 + half * 8) = c4;
        *(float4 *)(Cs + r * 16 + half * 8 + 4) = c4;
        __syncwarp();
        FragC cf;
        wm::load_matrix_sync(cf, Cs, 16, wm::mem_row_major);
        #pragma unroll
        for (int n = 0; n < NF; n++)
            #pragma unroll
            for (int i = 0; i < cf.num_elements; i++) of[n].x[i] *= cf.x[i];
        for (int kk = 0; kk < nj; kk++) {
            FragA pf;
            ld_smem(pf, Ps + kk * 16, LDP);
            #pragma unroll
            for (int n = 0; n < NF; n++) {
                FragB vf;
                ld_smem(vf, Vs + kk * 16 * LDT + n * 16, LDT);
                wm::mma_sync(of[n], pf, vf, of[n]);
            }
        }
    }
    if (half == 0) {
        Linv[r] = 1.0f / l;
        if (tq < T) lse[((size_t)b * NH + h) * T + tq] = (m + __log2f(l)) * LN2;
    }
    __syncthreads();                                   // K, V free: stage O there
    warp_store<HS>(out + (size_t)b * T * qrs + (size_t)h * HS, qrs, q0 + warp * 16, T, of,
                   (float *)tc_smem + warp * 16 * (HS + 4), Linv, 1.0f, false);
}

/* Ls[i] = lse_t·log2e and Ds[i] = dO_t · O_t for rows t = t0 + i of one head
 * (0 past T); HS/8 lanes a row, 16-byte loads */
template <int HS>
__device__ __forceinline__ void row_stats(float *Ls, float *Ds, const bf16 *dob, const bf16 *ob,
                                          size_t rs, const float *lseb, int t0, int T) {
    constexpr int G = HS / 8, RPI = 32 / G;
    int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    for (int i0 = warp * RPI; i0 < TT; i0 += TW * RPI) {
        int i = i0 + lane / G, t = t0 + i, c = lane % G * 8;
        float s = 0.0f;
        if (t < T) {
            Pack8 a = *(const Pack8 *)(dob + (size_t)t * rs + c), o = *(const Pack8 *)(ob + (size_t)t * rs + c);
            #pragma unroll
            for (int j = 0; j < 8; j++) s += __bfloat162float(a.v[j]) * __bfloat162float(o.v[j]);
        }
        #pragma unroll
        for (int off = G / 2; off > 0; off >>= 1) s += __shfl_xor_sync(0xffffffffu, s, off);
        if (lane % G == 0) {
            Ds[i] = s;
            Ls[i] = t < T ? lseb[t] * LOG2E : 0.0f;
        }
    }
}

/* dQ: block = TT query rows (warp w owns 16) over the key tiles up to the
 * diagonal, like the forward. Per 16-key block j: S = Q·Kᵀ and dP = dO·Vᵀ
 * on tensor cores (Q, dO fragments held in registers), staged to smem;
 * lane (r, c0) turns 8 of them into dS = P∘(dP − D) in bf16; then
 * dQ += dS·K. dq += scale·dQ at the end. */
template <int HS>
__global__ void __launch_bounds__(TW * 32, 2)
attention_bwd_dq_tc_kernel(bf16 *dq, const bf16 *dout, const bf16 *q, const bf16 *k,
                           const bf16 *v, const bf16 *out, const float *lse, int T, int NH, int NKV) {
    constexpr int NF = HS / 16, LDT = HS + 8;
    extern __shared__ __align__(128) unsigned char tc_smem[];
    int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    bf16 *Qs = (bf16 *)tc_smem, *dOs = Qs + TT * LDT, *Ks = dOs + TT * LDT, *Vs = Ks + TT * LDT;
    float *Ls = (float *)(Vs + TT * LDT), *Ds = Ls + TT;
    float *St = (float *)((unsigned char *)(Ds + TT) + warp * dq_tc_warp), *dPt = St + 16 * LDF;
    bf16 *dSs = (bf16 *)(dPt + 16 * LDF);              // (16, LDP)

    int q0 = (gridDim.x - 1 - blockIdx.x) * TT;
    int h = blockIdx.y, b = blockIdx.z, g = h / (NH / NKV);
    size_t qrs = (size_t)NH * HS, krs = (size_t)NKV * HS;
    size_t qoff = (size_t)b * T * qrs + (size_t)h * HS, koff = (size_t)b * T * krs + (size_t)g * HS;
    tile_load<HS>(Qs, q + qoff, qrs, q0, T);
    tile_load<HS>(dOs, dout + qoff, qrs, q0, T);
    row_stats<HS>(Ls, Ds, dout + qoff, out + qoff, qrs, lse + ((size_t)b * NH + h) * T, q0, T);
    __syncthreads();
    FragA qf[NF], df[NF];
    FragC acc[NF];
    #pragma unroll
    for (int kk = 0; kk < NF; kk++) {
        ld_smem(qf[kk], Qs + warp * 16 * LDT + kk * 16, LDT);
        ld_smem(df[kk], dOs + warp * 16 * LDT + kk * 16, LDT);
        wm::fill_fragment(acc[kk], 0.0f);
    }
    int r = lane & 15, c0 = (lane >> 4) * 8, tq = q0 + warp * 16 + r;
    float sl2 = rsqrtf((float)HS) * LOG2E, lr = Ls[warp * 16 + r], dr = Ds[warp * 16 + r];
    for (int k0 = 0; k0 <= q0; k0 += TT) {
        __syncthreads();
        tile_load<HS>(Ks, k + koff, krs, k0, T);
        tile_load<HS>(Vs, v + koff, krs, k0, T);
        __syncthreads();
        int nj = k0 == q0 ? warp + 1 : TT / 16;
        for (int j = 0; j < nj; j++) {
            FragC sf, pf;
            wm::fill_fragment(sf, 0.0f);
            wm::fill_fragment(pf, 0.0f);
            #pragma unroll
            for (int kk = 0; kk < NF; kk++) {
                FragBT kf, vf;
                ld_smem(kf, Ks + j * 16 * LDT + kk * 16, LDT);
                wm::mma_sync(sf, qf[kk], kf, sf);
                ld_smem(vf, Vs + j * 16 * LDT + kk * 16, LDT);
                wm::mma_sync(pf, df[kk], vf, pf);
            }
            wm::store_matrix_sync(St, sf, LDF, wm::mem_row_major);
            wm::store_matrix_sync(dPt, pf, LDF, wm::mem_row_major);
            __syncwarp();
            float sv[8], dp[8];
            *(float4 *)sv = *(const float4 *)(St + r * LDF + c0);
            *(float4 *)(sv + 4) = *(const float4 *)(St + r * LDF + c0 + 4);
            *(float4 *)dp = *(const float4 *)(dPt + r * LDF + c0);
            *(float4 *)(dp + 4) = *(const float4 *)(dPt + r * LDF + c0 + 4);
            Pack8 o;
            #pragma unroll
            for (int e = 0; e < 8; e++) {
                int key = k0 + j * 16 + c0 + e;
                float p = key <= tq && tq < T ? exp2f(sv[e] * sl2 - lr) : 0.0f;
                o.v[e] = __float2bfloat16(p * (dp[e] - dr));
            }
            *(Pack8 *)(dSs + r * LDP + j * 16 + c0) = o;
            __syncwarp();                              // St, dPt free; dSs complete
        }
        for (int kk = 0; kk < nj; kk++) {
            FragA af;
            ld_smem(af, dSs + kk * 16, LDP);
            #pragma unroll
            for (int n = 0; n < NF; n++) {
                FragB kf;
                ld_smem(kf, Ks + kk * 16 * LDT + n * 16, LDT);
                wm::mma_sync(acc[n], af, kf, acc[n]);
            }
        }
    }
    __syncthreads();
    warp_store<HS>(dq + qoff, qrs, q0 + warp * 16, T, acc, (float *)tc_smem + warp * 16 * (HS + 4),
                   NULL, rsqrtf((float)HS), true);
}

/* dK, dV: block = TT keys of kv head g (warp w owns 16) against every query
 * tile at or after them, for each query head of the group. Per 16-query
 * block j: Sᵀ = K·Qᵀ and dPᵀ = V·dOᵀ on tensor cores, staged to smem; lane
 * (r, c0) writes Pᵀ and dSᵀ = Pᵀ∘(dPᵀ − D) in bf16; then dV += Pᵀ·dO and
 * dK += dSᵀ·Q. The accumulators (2·HS/16 fragments) stay in registers, K
 * and V fragments are re-read from smem. dk += scale·dK, dv += dV. */
template <int HS>
__global__ void __launch_bounds__(TW * 32, 2)
attention_bwd_dkdv_tc_kernel(bf16 *dk, bf16 *dv, const bf16 *dout, const bf16 *q,
                             const bf16 *k, const bf16 *v, const bf16 *out, const float *lse,
                             int T, int NH, int NKV) {
    constexpr int NF = HS / 16, LDT = HS + 8;
    extern __shared__ __align__(128) unsigned char tc_smem[];
    int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    bf16 *Ks = (bf16 *)tc_smem, *Vs = Ks + TT * LDT, *Qs = Vs + TT * LDT, *dOs = Qs + TT * LDT;
    float *Ls = (float *)(dOs + TT * LDT), *Ds = Ls + TT;
    float *St = (float *)((unsigned char *)(Ds + TT) + warp * dkdv_tc_warp), *dPt = St + 16 * LDF;
    bf16 *Pt = (bf16 *)(dPt + 16 * LDF), *dSt = Pt + 16 * LDP;   // (16, LDP) each

    int k0 = blockIdx.x * TT, g = blockIdx.y, b = blockIdx.z, rep = NH / NKV;
    size_t qrs = (size_t)NH * HS, krs = (size_t)NKV * HS;
    size_t koff = (size_t)b * T * krs + (size_t)g * HS;
    tile_load<HS>(Ks, k + koff, krs, k0, T);
    tile_load<HS>(Vs, v + koff, krs, k0, T);
    FragC dka[NF], dva[NF];
    #pragma unroll
    for (int n = 0; n < NF; n++) {
        wm::fill_fragment(dka[n], 0.0f);
        wm::fill_fragment(dva[n], 0.0f);
    }
    int r = lane & 15, c0 = (lane >> 4) * 8, key = k0 + warp * 16 + r;
    float sl2 = rsqrtf((float)HS) * LOG2E;
    const bf16 *Kw = Ks + warp * 16 * LDT, *Vw = Vs + warp * 16 * LDT;
    for (int h = g * rep; h < (g + 1) * rep; h++) {
        size_t qoff = (size_t)b * T * qrs + (size_t)h * HS;
        for (int q0 = k0; q0 < T; q0 += TT) {
            __syncthreads();
            tile_load<HS>(Qs, q + qoff, qrs, q0, T);
            tile_load<HS>(dOs, dout + qoff, qrs, q0, T);
            row_stats<HS>(Ls, Ds, dout + qoff, out + qoff, qrs, lse + ((size_t)b * NH + h) * T, q0, T);
            __syncthreads();
            int j0 = q0 == k0 ? warp : 0;              // earlier query blocks see none of these keys
            for (int j = j0; j < TT / 16; j++) {
                FragC sf, pf;
                wm::fill_fragment(sf, 0.0f);
                wm::fill_fragment(pf, 0.0f);
                #pragma unroll
                for (int kk = 0; kk < NF; kk++) {
                    FragA ka, va;
                    FragBT qb, ob;
                    ld_smem(ka, Kw + kk * 16, LDT);
                    ld_smem(qb, Qs + j * 16 * LDT + kk * 16, LDT);
                    wm::mma_sync(sf, ka, qb, sf);
                    ld_smem(va, Vw + kk * 16, LDT);
                    ld_smem(ob, dOs + j * 16 * LDT + kk * 16, LDT);
                    wm::mma_sync(pf, va, ob, pf);
                }
                wm::store_matrix_sync(St, sf, LDF, wm::mem_row_major);
                wm::store_matrix_sync(dPt, pf, LDF, wm::mem_row_major);
                __syncwarp();
                float sv[8], dp[8];
                *(float4 *)sv = *(const float4 *)(St + r * LDF + c0);
                *(float4 *)(sv + 4) = *(const float4 *)(St + r * LDF + c0 + 4);
                *(float4 *)dp = *(const float4 *)(dPt + r * LDF + c0);
                *(float4 *)(dp + 4) = *(const float4 *)(dPt + r * LDF + c0 + 4);
                Pack8 po, so;
                #pragma unroll
                for (int e = 0; e < 8; e++) {
                    int i = j * 16 + c0 + e, tq = q0 + i;
                    float p = key <= tq && tq < T ? exp2f(sv[e] * sl2 - Ls[i]) : 0.0f;
                    po.v[e] = __float2bfloat16(p);
                    so.v[e] = __float2bfloat16(p * (dp[e] - Ds[i]));
                }
                *(Pack8 *)(Pt + r * LDP + j * 16 + c0) = po;
                *(Pack8 *)(dSt + r * LDP + j * 16 + c0) = so;
                __syncwarp();
            }
            for (int kk = j0; kk < TT / 16; kk++) {
                FragA pa, sa;
                ld_smem(pa, Pt + kk * 16, LDP);
                ld_smem(sa, dSt + kk * 16, LDP);
                #pragma unroll
                for (int n = 0; n < NF; n++) {
                    FragB ob, qb;
                    ld_smem(ob, dOs + kk * 16 * LDT + n * 16, LDT);
                    wm::mma_sync(dva[n], pa, ob, dva[n]);
                    ld_smem(qb, Qs + kk * 16 * LDT + n * 16, LDT);
                    wm::mma_sync(dka[n], sa, qb, dka[n]);
                }
            }
        }
    }
    __syncthreads();
    float *stage = (float *)tc_smem + warp * 16 * (HS + 4);
    warp_store<HS>(dv + koff, krs, k0 + warp * 16, T, dva, stage, NULL, 1.0f, true);
    __syncwarp();
    warp_store<HS>(dk + koff, krs, k0 + warp * 16, T, dka, stage, NULL, rsqrtf((float)HS), true);
}

template <int HS>
static void fwd_tc(bf16 *out, float *lse, const bf16 *q, const bf16 *k, const bf16 *v,
                   int B, int T, int NH, int NKV, cudaStream_t st) {
    attn_launch(attention_fwd_tc_kernel<HS>, dim3(ceil_div(T, TT), NH, B), TW * 32, fwd_tc_smem(HS), st,
                out, lse, q, k, v, T, NH, NKV);
}

template <int HS>
static void bwd_tc(bf16 *dq, bf16 *dk, bf16 *dv, const bf16 *dout, const bf16 *q, const bf16 *k,
                   const bf16 *v, const bf16 *out, const float *lse, int B, int T, int NH, int NKV,
                   cudaStream_t st) {
    if (dk && dv)
        attn_launch(attention_bwd_dkdv_tc_kernel<HS>, dim3(ceil_div(T, TT), NKV, B), TW * 32, dkdv_tc_smem(HS), st,
                    dk, dv, dout, q, k, v, out, lse, T, NH, NKV);
    if (dq)
        attn_launch(attention_bwd_dq_tc_kernel<HS>, dim3(ceil_div(T, TT), NH, B), TW * 32, dq_tc_smem(HS), st,
                    dq, dout, q, k, v, out, lse, T, NH, NKV);
}

void attn_tc_fwd(bf16 *out, float *lse, const bf16 *q, const bf16 *k, const bf16 *v,
                 int B, int T, int NH, int NKV, int HS, cudaStream_t st) {
    if (HS == 64) fwd_tc<64>(out, lse, q, k, v, B, T, NH, NKV, st);
    else fwd_tc<128>(out, lse, q, k, v, B, T, NH, NKV, st);
}

void attn_tc_bwd(bf16 *dq, bf16 *dk, bf16 *dv, const bf16 *dout, const bf16 *q, const bf16 *k,
                 const bf16 *v, const bf16 *out, const float *lse, int B, int T, int NH,
                 int NKV, int HS, cudaStream_t st) {
    if (HS == 64) bwd_tc<64>(dq, dk, dv, dout, q, k, v, out, lse, B, T, NH, NKV, st);
    else bwd_tc<128>(dq, dk, dv, dout, q, k, v, out, lse, B, T, NH, NKV, st);
}

/* ---- mma.sync kernels (the default) -------------------------------------
 * The same three passes as the WMMA kernels above, written with
 * mma.sync.m16n8k16 (bf16, fp32 accumulate) and ldmatrix, whose fragment
 * layouts are specified, so scores, probabilities and dS stay in registers:
 * a score accumulator of two adjacent 8-key tiles is, packed to bf16, the A
 * operand of the next product (FlashAttention-2's register softmax), with no
 * shared-memory staging. Tiles come in by cp.async, the next one while the
 * current one is used (double buffering). Lane (g = lane/4, c = lane%4) of
 * a warp holds rows g and g + 8 of its 16, columns 2c, 2c + 1 of every
 * 8-wide tile. */

__device__ __forceinline__ void ldsm4(unsigned (&r)[4], const bf16 *p) {
    unsigned a = (unsigned)__cvta_generic_to_shared(p);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(a) : "memory");
}
__device__ __forceinline__ void ldsm4t(unsigned (&r)[4], const bf16 *p) {
    unsigned a = (unsigned)__cvta_generic_to_shared(p);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(a) : "memory");
}
/* c += a·b, a 16 x 16 (row), b 16 x 8 (col) */
__device__ __forceinline__ void mma16816(float (&c)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
                 "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
__device__ __forceinline__ unsigned pack_bf2(float lo, float hi) {
    __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    return *(unsigned *)&v;
}
/* two accumulators (16 x 8 each, adjacent columns) as one 16 x 16 A operand */
__device__ __forceinline__ void acc_to_a(unsigned (&a)[4], const float (&x)[4], const float (&y)[4]) {
    a[0] = pack_bf2(x[0], x[1]);
    a[1] = pack_bf2(x[2], x[3]);
    a[2] = pack_bf2(y[0], y[1]);
    a[3] = pack_bf2(y[2], y[3]);
}
/* ldmatrix addresses for lane l in a (rows, HS + 8) bf16 tile at row r0, column c0:
 * A operand (16 x 16, row-major in smem) */
__device__ __forceinline__ const bf16 *a_at(const bf16 *s, int ld, int r0, int c0, int l) {
    return s + (r0 + (l & 15)) * ld + c0 + (l >> 4) * 8;
}
/* B operands of two 8-column tiles, B[k][n] = X[r0 + n][c0 + k] (X's rows are B's columns) */
__device__ __forceinline__ const bf16 *bt_at(const bf16 *s, int ld, int r0, int c0, int l) {
    return s + (r0 + (l & 7) + (l >> 4) * 8) * ld + c0 + ((l >> 3) & 1) * 8;
}
/* B operands of two 8-column tiles, B[k][n] = X[r0 + k][c0 + n] (ldmatrix .trans) */
__device__ __forceinline__ const bf16 *b_at(const bf16 *s, int ld, int r0, int c0, int l) {
    return s + (r0 + (l & 7) + ((l >> 3) & 1) * 8) * ld + c0 + (l >> 4) * 8;
}

__device__ __forceinline__ void cp16(void *s, const void *g, bool valid) {
    unsigned a = (unsigned)__cvta_generic_to_shared(s);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(a), "l"(g), "r"(valid ? 16 : 0) : "memory");
}
__device__ __forceinline__ void cp_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
template <int N>
__device__ __forceinline__ void cp_wait() { asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory"); }

/* A double-buffered loop's turn: the current tile's copies are done and
 * visible to the block. With a next tile (whose copies the caller has just
 * issued) those stay in flight; on the last tile everything is waited for. */
__device__ __forceinline__ void tile_turn(bool next) {
    if (next) {
        cp_commit();
        cp_wait<1>();
    } else {
        cp_wait<0>();
    }
    __syncthreads();
}

/* A warp's 16 rows of an smem tile as NK A fragments (k = 16 columns each). */
template <int NK>
__device__ __forceinline__ void a_frags(unsigned (&f)[NK][4], const bf16 *s, int ld, int warp, int lane) {
    #pragma unroll
    for (int kk = 0; kk < NK; kk++) ldsm4(f[kk], a_at(s, ld, warp * 16, kk * 16, lane));
}

/* rows [t0, t0+TT) of x into the smem tile s by cp.async, zeros past T */
template <int HS>
__device__ __forceinline__ void tile_cp(bf16 *s, const bf16 *x, size_t rs, int t0, int T) {
    constexpr int PR = HS / 8;
    for (int i = threadIdx.x; i < TT * PR; i += TW * 32) {
        int r = i / PR, c = i % PR * 8;
        bool ok = t0 + r < T;
        cp16(s + r * (HS + 8) + c, ok ? x + (size_t)(t0 + r) * rs + c : x, ok);
    }
}

__device__ __forceinline__ void cp4(void *s, const void *g, bool valid) {
    unsigned a = (unsigned)__cvta_generic_to_shared(s);
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;" ::"r"(a), "l"(g), "r"(valid ? 4 : 0) : "memory");
}

/* lse (natural log) and D of rows [t0, t0+TT) of one head into Ls, Ds by
 * cp.async, zeros past T */
__device__ __forceinline__ void stats_cp(float *Ls, float *Ds, const float *lseb, const float *Db, int t0, int T) {
    for (int i = threadIdx.x; i < TT; i += TW * 32) {
        bool ok = t0 + i < T;
        cp4(Ls + i, ok ? lseb + t0 + i : lseb, ok);
        cp4(Ds + i, ok ? Db + t0 + i : Db, ok);
    }
}

/* D[(b·NH + h)·T + t] = dO·O of that row, the backward's row term, once
 * for both passes (the WMMA kernels recompute it per tile: row_stats);
 * HS/8 lanes a row, 16-byte loads */
template <int HS>
__global__ void attention_delta_kernel(float *D, const bf16 *dout, const bf16 *out, int T, int NH, int rows) {
    constexpr int G = HS / 8;
    int r = (blockIdx.x * blockDim.x + threadIdx.x) / G, c = threadIdx.x % G * 8;
    float s = 0.0f;
    if (r < rows) {
        int t = r % T, bh = r / T;
        size_t off = ((size_t)(bh / NH) * T + t) * NH * HS + (size_t)(bh % NH) * HS + c;
        Pack8 a = *(const Pack8 *)(dout + off), o = *(const Pack8 *)(out + off);
        #pragma unroll
        for (int j = 0; j < 8; j++) s += __bfloat162float(a.v[j]) * __bfloat162float(o.v[j]);
    }
    #pragma unroll
    for (int off = G / 2; off > 0; off >>= 1) s += __shfl_xor_sync(0xffffffffu, s, off);
    if (r < rows && c == 0) D[r] = s;
}

/* a warp's 16 x HS accumulators to rows t0 + g, t0 + g + 8 (< T) of y:
 * y = f·acc, or y += f·acc */
template <int HS>
__device__ __forceinline__ void acc_store(bf16 *y, size_t rs, int t0, int T, const float (&acc)[HS / 8][4],
                                          float f0, float f1, bool add) {
    int lane = threadIdx.x & 31, g = lane >> 2, c = (lane & 3) * 2;
    #pragma unroll
    for (int half = 0; half < 2; half++) {
        int t = t0 + g + half * 8;
        if (t >= T) continue;
        float f = half ? f1 : f0;
        bf16 *row = y + (size_t)t * rs + c;
        #pragma unroll
        for (int n = 0; n < HS / 8; n++) {
            float x0 = f * acc[n][2 * half], x1 = f * acc[n][2 * half + 1];
            __nv_bfloat162 *p = (__nv_bfloat162 *)(row + n * 8);
            if (add) {
                float2 o = __bfloat1622float2(*p);
                x0 += o.x;
                x1 += o.y;
            }
            *p = __floats2bfloat162_rn(x0, x1);
        }
    }
}

static constexpr size_t fwd_mma_smem(int HS) { return 5 * tc_tile(HS); }
static constexpr size_t bwd_mma_smem(int HS) { return 6 * tc_tile(HS) + 4 * TT * sizeof(float); }

/* forward: block = TT queries (warp w owns 16) over the key tiles up to the
 * diagonal; S = Q·Kᵀ, the online softmax and O += P·V all in registers */
template <int HS>
__global__ void __launch_bounds__(TW * 32, 2)
attention_fwd_mma_kernel(bf16 *out, float *lse, const bf16 *q, const bf16 *k, const bf16 *v,
                         int T, int NH, int NKV) {
    constexpr int LDT = HS + 8, NK = HS / 16, NO = HS / 8;
    extern __shared__ __align__(128) unsigned char tc_smem[];
    bf16 *Qs = (bf16 *)tc_smem, *Kb = Qs + TT * LDT, *Vb = Kb + 2 * TT * LDT;
    int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, c = (lane & 3) * 2;
    int q0 = (gridDim.x - 1 - blockIdx.x) * TT;        // longest rows first
    int h = blockIdx.y, b = blockIdx.z, kvh = h / (NH / NKV);
    size_t qrs = (size_t)NH * HS, krs = (size_t)NKV * HS;
    const bf16 *qb = q + (size_t)b * T * qrs + (size_t)h * HS;
    const bf16 *kb = k + (size_t)b * T * krs + (size_t)kvh * HS;
    const bf16 *vb = v + (size_t)b * T * krs + (size_t)kvh * HS;
    tile_cp<HS>(Qs, qb, qrs, q0, T);
    tile_cp<HS>(Kb, kb, krs, 0, T);
    tile_cp<HS>(Vb, vb, krs, 0, T);
    cp_commit();

    unsigned qf[NK][4];
    float o[NO][4];
    #pragma unroll
    for (int n = 0; n < NO; n++) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.0f;
    int row0 = q0 + warp * 16 + g, row1 = row0 + 8, nt = q0 / TT + 1;
    float sl2 = rsqrtf((float)HS) * LOG2E, m0 = -INFINITY, m1 = -INFINITY, l0 = 0.0f, l1 = 0.0f;
    for (int t = 0; t < nt; t++) {
        int k0 = t * TT;
        const bf16 *Ks = Kb + (t & 1) * TT * LDT, *Vs = Vb + (t & 1) * TT * LDT;
        if (t + 1 < nt) {                              // the next tile's buffer was freed by the last barrier
            tile_cp<HS>(Kb + ((t + 1) & 1) * TT * LDT, kb, krs, k0 + TT, T);
            tile_cp<HS>(Vb + ((t + 1) & 1) * TT * LDT, vb, krs, k0 + TT, T);
        }
        tile_turn(t + 1 < nt);
        if (t == 0)
            a_frags<NK>(qf, Qs, LDT, warp, lane);
        int nb = k0 == q0 ? warp + 1 : TT / 16;        // 16-key blocks this warp can see
        float s[TT / 8][4];
        #pragma unroll
        for (int j = 0; j < TT / 8; j++) s[j][0] = s[j][1] = s[j][2] = s[j][3] = 0.0f;
        #pragma unroll
        for (int jb = 0; jb < TT / 16; jb++) {
            if (jb >= nb) continue;
            #pragma unroll
            for (int kk = 0; kk < NK; kk++) {
                unsigned bf[4];
                ldsm4(bf, bt_at(Ks, LDT, jb * 16, kk * 16, lane));
                mma16816(s[2 * jb], qf[kk], bf[0], bf[1]);
                mma16816(s[2 * jb + 1], qf[kk], bf[2], bf[3]);
            }
        }
        if (k0 == q0) {                                // the diagonal tile: keys after the row are out
            #pragma unroll
            for (int j = 0; j < TT / 8; j++)
                #pragma unroll
                for (int e = 0; e < 4; e++)
                    if (k0 + j * 8 + c + (e & 1) > (e < 2 ? row0 : row1)) s[j][e] = -INFINITY;
        }
        float x0 = -INFINITY, x1 = -INFINITY;          // key k0 <= every row: finite
        #pragma unroll
        for (int j = 0; j < TT / 8; j++) {
            x0 = fmaxf(x0, fmaxf(s[j][0], s[j][1]));
            x1 = fmaxf(x1, fmaxf(s[j][2], s[j][3]));
        }
        x0 = fmaxf(x0, __shfl_xor_sync(0xffffffffu, x0, 1));
        x0 = fmaxf(x0, __shfl_xor_sync(0xffffffffu, x0, 2));
        x1 = fmaxf(x1, __shfl_xor_sync(0xffffffffu, x1, 1));
        x1 = fmaxf(x1, __shfl_xor_sync(0xffffffffu, x1, 2));
        float n0 = fmaxf(m0, x0 * sl2), n1 = fmaxf(m1, x1 * sl2);
        float c0 = exp2f(m0 - n0), c1 = exp2f(m1 - n1);   // 0 on the first tile
        m0 = n0;
        m1 = n1;
        float s0 = 0.0f, s1 = 0.0f;
        #pragma unroll
        for (int j = 0; j < TT / 8; j++) {
            s[j][0] = exp2f(s[j][0] * sl2 - n0);
            s[j][1] = exp2f(s[j][1] * sl2 - n0);
            s[j][2] = exp2f(s[j][2] * sl2 - n1);
            s[j][3] = exp2f(s[j][3] * sl2 - n1);
            s0 += s[j][0] + s[j][1];
            s1 += s[j][2] + s[j][3];
        }
        l0 = l0 * c0 + s0;                             // this lane's columns; summed over the row at the end
        l1 = l1 * c1 + s1;
        #pragma unroll
        for (int n = 0; n < NO; n++) {
            o[n][0] *= c0;
            o[n][1] *= c0;
            o[n][2] *= c1;
            o[n][3] *= c1;
        }
        #pragma unroll
        for (int jb = 0; jb < TT / 16; jb++) {
            if (jb >= nb) continue;
            unsigned pa[4];
            acc_to_a(pa, s[2 * jb], s[2 * jb + 1]);
            #pragma unroll
            for (int dn = 0; dn < HS / 16; dn++) {
                unsigned bf[4];
                ldsm4t(bf, b_at(Vs, LDT, jb * 16, dn * 16, lane));
                mma16816(o[2 * dn], pa, bf[0], bf[1]);
                mma16816(o[2 * dn + 1], pa, bf[2], bf[3]);
            }
        }
        __syncthreads();                               // this buffer is refilled two tiles on
    }
    l0 += __shfl_xor_sync(0xffffffffu, l0, 1);
    l0 += __shfl_xor_sync(0xffffffffu, l0, 2);
    l1 += __shfl_xor_sync(0xffffffffu, l1, 1);
    l1 += __shfl_xor_sync(0xffffffffu, l1, 2);
    acc_store<HS>(out + (size_t)b * T * qrs + (size_t)h * HS, qrs, q0 + warp * 16, T, o, 1.0f / l0,
                  1.0f / l1, false);
    if (c == 0) {
        float *lb = lse + ((size_t)b * NH + h) * T;
        if (row0 < T) lb[row0] = (m0 + __log2f(l0)) * LN2;
        if (row1 < T) lb[row1] = (m1 + __log2f(l1)) * LN2;
    }
}

/* The backward's two score-shaped products for 16 rows by 16 columns, as
 * two 8-column accumulators each: s = A·Xᵀ and dp = B·Yᵀ over HS, the A and
 * B fragments held (16 rows, all of HS), X and Y the 16 smem rows from r0
 * (dQ: Q·Kᵀ, dO·Vᵀ; dK/dV: K·Qᵀ, V·dOᵀ). */
template <int NK>
__device__ __forceinline__ void two_products(float (&s)[2][4], float (&dp)[2][4], const unsigned (&a)[NK][4],
                                             const bf16 *X, const unsigned (&b)[NK][4], const bf16 *Y, int ld,
                                             int r0, int lane) {
    #pragma unroll
    for (int kk = 0; kk < NK; kk++) {
        unsigned bf[4];
        ldsm4(bf, bt_at(X, ld, r0, kk * 16, lane));
        mma16816(s[0], a[kk], bf[0], bf[1]);
        mma16816(s[1], a[kk], bf[2], bf[3]);
        ldsm4(bf, bt_at(Y, ld, r0, kk * 16, lane));
        mma16816(dp[0], b[kk], bf[0], bf[1]);
        mma16816(dp[1], b[kk], bf[2], bf[3]);
    }
}

/* dQ: block = TT query rows (warp w owns 16; Q and dO fragments held in
 * registers) over the key tiles up to the diagonal; per 16-key block, S and
 * dP on tensor cores, dS = P∘(dP − D) in registers, dQ += dS·K */
template <int HS>
__global__ void __launch_bounds__(TW * 32, 2)
attention_bwd_dq_mma_kernel(bf16 *dq, const bf16 *dout, const bf16 *q, const bf16 *k,
                            const bf16 *v, const float *lse, const float *D, int T, int NH, int NKV) {
    constexpr int LDT = HS + 8, NK = HS / 16, NO = HS / 8;
    extern __shared__ __align__(128) unsigned char tc_smem[];
    bf16 *Qs = (bf16 *)tc_smem, *dOs = Qs + TT * LDT, *Kb = dOs + TT * LDT, *Vb = Kb + 2 * TT * LDT;
    float *Ls = (float *)(Vb + 2 * TT * LDT), *Ds = Ls + TT;
    int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, c = (lane & 3) * 2;
    int q0 = (gridDim.x - 1 - blockIdx.x) * TT;
    int h = blockIdx.y, b = blockIdx.z, kvh = h / (NH / NKV);
    size_t qrs = (size_t)NH * HS, krs = (size_t)NKV * HS;
    size_t qoff = (size_t)b * T * qrs + (size_t)h * HS, koff = (size_t)b * T * krs + (size_t)kvh * HS;
    tile_cp<HS>(Qs, q + qoff, qrs, q0, T);
    tile_cp<HS>(dOs, dout + qoff, qrs, q0, T);
    tile_cp<HS>(Kb, k + koff, krs, 0, T);
    tile_cp<HS>(Vb, v + koff, krs, 0, T);
    stats_cp(Ls, Ds, lse + ((size_t)b * NH + h) * T, D + ((size_t)b * NH + h) * T, q0, T);
    cp_commit();

    unsigned qf[NK][4], df[NK][4];
    float acc[NO][4];
    #pragma unroll
    for (int n = 0; n < NO; n++) acc[n][0] = acc[n][1] = acc[n][2] = acc[n][3] = 0.0f;
    int row0 = q0 + warp * 16 + g, row1 = row0 + 8, nt = q0 / TT + 1;
    float sl2 = rsqrtf((float)HS) * LOG2E, L0 = 0, L1 = 0, D0 = 0, D1 = 0;
    for (int t = 0; t < nt; t++) {
        int k0 = t * TT;
        const bf16 *Ks = Kb + (t & 1) * TT * LDT, *Vs = Vb + (t & 1) * TT * LDT;
        if (t + 1 < nt) {
            tile_cp<HS>(Kb + ((t + 1) & 1) * TT * LDT, k + koff, krs, k0 + TT, T);
            tile_cp<HS>(Vb + ((t + 1) & 1) * TT * LDT, v + koff, krs, k0 + TT, T);
        }
        tile_turn(t + 1 < nt);
        if (t == 0) {
            a_frags<NK>(qf, Qs, LDT, warp, lane);
            a_frags<NK>(df, dOs, LDT, warp, lane);
            L0 = Ls[warp * 16 + g] * LOG2E;
            L1 = Ls[warp * 16 + g + 8] * LOG2E;
            D0 = Ds[warp * 16 + g];
            D1 = Ds[warp * 16 + g + 8];
        }
        int nb = k0 == q0 ? warp + 1 : TT / 16;
        for (int jb = 0; jb < nb; jb++) {
            float s[2][4] = {{0, 0, 0, 0}, {0, 0, 0, 0}}, dp[2][4] = {{0, 0, 0, 0}, {0, 0, 0, 0}};
            two_products<NK>(s, dp, qf, Ks, df, Vs, LDT, jb * 16, lane);
            #pragma unroll
            for (int j = 0; j < 2; j++)
                #pragma unroll
                for (int e = 0; e < 4; e++) {
                    int key = k0 + jb * 16 + j * 8 + c + (e & 1), row = e < 2 ? row0 : row1;
                    float p = key <= row && row < T ? exp2f(s[j][e] * sl2 - (e < 2 ? L0 : L1)) : 0.0f;
                    s[j][e] = p * (dp[j][e] - (e < 2 ? D0 : D1));
                }
            unsigned sa[4];
            acc_to_a(sa, s[0], s[1]);
            #pragma unroll
            for (int dn = 0; dn < HS / 16; dn++) {
                unsigned bf[4];
                ldsm4t(bf, b_at(Ks, LDT, jb * 16, dn * 16, lane));
                mma16816(acc[2 * dn], sa, bf[0], bf[1]);
                mma16816(acc[2 * dn + 1], sa, bf[2], bf[3]);
            }
        }
        __syncthreads();
    }
    float sc = rsqrtf((float)HS);
    acc_store<HS>(dq + qoff, qrs, q0 + warp * 16, T, acc, sc, sc, true);
}

/* dK, dV: block = TT keys of kv head g (warp w owns 16) against every query
 * tile at or after them, for each query head of the group (Q, dO and their
 * rows' lse and D double-buffered). Per 16-query block: Sᵀ = K·Qᵀ and
 * dPᵀ = V·dOᵀ, Pᵀ and dSᵀ in registers, dV += Pᵀ·dO, dK += dSᵀ·Q. */
template <int HS>
__global__ void __launch_bounds__(TW * 32, 2)
attention_bwd_dkdv_mma_kernel(bf16 *dk, bf16 *dv, const bf16 *dout, const bf16 *q,
                              const bf16 *k, const bf16 *v, const float *lse, const float *D,
                              int T, int NH, int NKV) {
    constexpr int LDT = HS + 8, NK = HS / 16, NO = HS / 8;
    extern __shared__ __align__(128) unsigned char tc_smem[];
    bf16 *Ks = (bf16 *)tc_smem, *Vs = Ks + TT * LDT, *Qb = Vs + TT * LDT, *dOb = Qb + 2 * TT * LDT;
    float *Lb = (float *)(dOb + 2 * TT * LDT), *Db = Lb + 2 * TT;
    int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, c = (lane & 3) * 2;
    int k0 = blockIdx.x * TT, kvh = blockIdx.y, b = blockIdx.z, rep = NH / NKV;
    size_t qrs = (size_t)NH * HS, krs = (size_t)NKV * HS;
    size_t koff = (size_t)b * T * krs + (size_t)kvh * HS;
    int nq = (T - k0 + TT - 1) / TT, nt = rep * nq;    // (head of the group, query tile) pairs
    tile_cp<HS>(Ks, k + koff, krs, k0, T);
    tile_cp<HS>(Vs, v + koff, krs, k0, T);
    {
        size_t qoff = (size_t)b * T * qrs + (size_t)(kvh * rep) * HS;
        tile_cp<HS>(Qb, q + qoff, qrs, k0, T);
        tile_cp<HS>(dOb, dout + qoff, qrs, k0, T);
        size_t so = ((size_t)b * NH + kvh * rep) * T;
        stats_cp(Lb, Db, lse + so, D + so, k0, T);
        cp_commit();
    }
    float dka[NO][4], dva[NO][4];
    unsigned kf[NK][4], vf[NK][4];                     // this warp's 16 keys, read once
    #pragma unroll
    for (int n = 0; n < NO; n++)
        #pragma unroll
        for (int e = 0; e < 4; e++) dka[n][e] = dva[n][e] = 0.0f;
    int key0 = k0 + warp * 16 + g, key1 = key0 + 8;
    float sl2 = rsqrtf((float)HS) * LOG2E;
    for (int t = 0; t < nt; t++) {
        int q0 = k0 + (t % nq) * TT, bi = t & 1;
        if (t + 1 < nt) {                              // the next (head, query tile) into the other buffer
            int h1 = kvh * rep + (t + 1) / nq, q1 = k0 + ((t + 1) % nq) * TT, b1 = (t + 1) & 1;
            size_t qoff = (size_t)b * T * qrs + (size_t)h1 * HS;
            tile_cp<HS>(Qb + b1 * TT * LDT, q + qoff, qrs, q1, T);
            tile_cp<HS>(dOb + b1 * TT * LDT, dout + qoff, qrs, q1, T);
            size_t so = ((size_t)b * NH + h1) * T;
            stats_cp(Lb + b1 * TT, Db + b1 * TT, lse + so, D + so, q1, T);
        }
        tile_turn(t + 1 < nt);
        if (t == 0) {
            a_frags<NK>(kf, Ks, LDT, warp, lane);
            a_frags<NK>(vf, Vs, LDT, warp, lane);
        }
        const bf16 *Qs = Qb + bi * TT * LDT, *dOs = dOb + bi * TT * LDT;
        const float *Ls = Lb + bi * TT, *Ds = Db + bi * TT;
        int jq0 = q0 == k0 ? warp : 0;                 // earlier query blocks see none of these keys
        for (int jq = jq0; jq < TT / 16; jq++) {
            float s[2][4] = {{0, 0, 0, 0}, {0, 0, 0, 0}}, dp[2][4] = {{0, 0, 0, 0}, {0, 0, 0, 0}};
            two_products<NK>(s, dp, kf, Qs, vf, dOs, LDT, jq * 16, lane);
            #pragma unroll
            for (int j = 0; j < 2; j++)
                #pragma unroll
                for (int e = 0; e < 4; e++) {
                    int i = jq * 16 + j * 8 + c + (e & 1), tq = q0 + i;
                    float pe = (e < 2 ? key0 : key1) <= tq && tq < T ? exp2f(s[j][e] * sl2 - Ls[i] * LOG2E) : 0.0f;
                    s[j][e] = pe * (dp[j][e] - Ds[i]);     // dS
                    dp[j][e] = pe;                         // P
                }
            unsigned pa[4], sa[4];
            acc_to_a(pa, dp[0], dp[1]);
            acc_to_a(sa, s[0], s[1]);
            #pragma unroll
            for (int dn = 0; dn < HS / 16; dn++) {
                unsigned bf[4];
                ldsm4t(bf, b_at(dOs, LDT, jq * 16, dn * 16, lane));
                mma16816(dva[2 * dn], pa, bf[0], bf[1]);
                mma16816(dva[2 * dn + 1], pa, bf[2], bf[3]);
                ldsm4t(bf, b_at(Qs, LDT, jq * 16, dn * 16, lane));
                mma16816(dka[2 * dn], sa, bf[0], bf[1]);
                mma16816(dka[2 * dn + 1], sa, bf[2], bf[3]);
            }
        }
        __syncthreads();                               // buffer bi is refilled next iteration
    }
    float sc = rsqrtf((float)HS);
    acc_store<HS>(dv + koff, krs, k0 + warp * 16, T, dva, 1.0f, 1.0f, true);
    acc_store<HS>(dk + koff, krs, k0 + warp * 16, T, dka, sc, sc, true);
}

template <int HS>
static void fwd_mma(bf16 *out, float *lse, const bf16 *q, const bf16 *k, const bf16 *v,
                    int B, int T, int NH, int NKV, cudaStream_t st) {
    attn_launch(attention_fwd_mma_kernel<HS>, dim3(ceil_div(T, TT), NH, B), TW * 32, fwd_mma_smem(HS), st,
                out, lse, q, k, v, T, NH, NKV);
}

template <int HS>
static void bwd_mma(bf16 *dq, bf16 *dk, bf16 *dv, const bf16 *dout, const bf16 *q, const bf16 *k,
                    const bf16 *v, const bf16 *out, const float *lse, int B, int T, int NH, int NKV,
                    cudaStream_t st) {
    int rows = B * T * NH;
    float *D = kc_ctx.partials;                        // D of every row, once: the scratch of the norms
    attn_launch(attention_delta_kernel<HS>, dim3(ceil_div((size_t)rows * (HS / 8), 256)), 256, 0, st,
                D, dout, out, T, NH, rows);
    size_t sm = bwd_mma_smem(HS);
    if (dk && dv)
        attn_launch(attention_bwd_dkdv_mma_kernel<HS>, dim3(ceil_div(T, TT), NKV, B), TW * 32, sm, st,
                    dk, dv, dout, q, k, v, lse, (const float *)D, T, NH, NKV);
    if (dq)
        attn_launch(attention_bwd_dq_mma_kernel<HS>, dim3(ceil_div(T, TT), NH, B), TW * 32, sm, st,
                    dq, dout, q, k, v, lse, (const float *)D, T, NH, NKV);
}

void attn_mma_fwd(bf16 *out, float *lse, const bf16 *q, const bf16 *k, const bf16 *v,
                  int B, int T, int NH, int NKV, int HS, cudaStream_t st) {
    if (HS == 64) fwd_mma<64>(out, lse, q, k, v, B, T, NH, NKV, st);
    else fwd_mma<128>(out, lse, q, k, v, B, T, NH, NKV, st);
}

void attn_mma_bwd(bf16 *dq, bf16 *dk, bf16 *dv, const bf16 *dout, const bf16 *q, const bf16 *k,
                  const bf16 *v, const bf16 *out, const float *lse, int B, int T, int NH,
                  int NKV, int HS, cudaStream_t st) {
    kc_require_init();
    if ((size_t)B * T * NH > kc_ctx.partial_floats) {  // D would not fit the scratch: the WMMA pass
        attn_tc_bwd(dq, dk, dv, dout, q, k, v, out, lse, B, T, NH, NKV, HS, st);   // recomputes it per tile
        return;
    }
    if (HS == 64) bwd_mma<64>(dq, dk, dv, dout, q, k, v, out, lse, B, T, NH, NKV, st);
    else bwd_mma<128>(dq, dk, dv, dout, q, k, v, out, lse, B, T, NH, NKV, st);
}
