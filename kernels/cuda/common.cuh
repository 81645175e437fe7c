/* common.cuh — what every kernels/cuda/ source shares: bf16 types, 16-byte
 * packs, warp and block reductions, the cuBLASLt context made by kc_init.
 * Internal to up_kernels_cuda; the public contract is kernels_cuda.h. */
#ifndef ULTRAPLAN_KERNELS_CUDA_COMMON_CUH
#define ULTRAPLAN_KERNELS_CUDA_COMMON_CUH

#include <algorithm>
#include <cmath>
#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <cublasLt.h>
#include <stdint.h>
#include "kernels_cuda.h"

typedef __nv_bfloat16 bf16;

#define CHECK_CUBLAS(call) do { cublasStatus_t s_ = (call); \
    if (s_ != CUBLAS_STATUS_SUCCESS) kc_fail(#call, cublasLtGetStatusString(s_), __FILE__, __LINE__); } while (0)

/* state created once by kc_init (linear.cu) */
typedef struct {
    int ready;
    cublasLtHandle_t lt;
    void *workspace;        // cuBLASLt workspace
    size_t workspace_bytes;
    double *scratch;        // device, KC_SCRATCH doubles for reductions
    float *partials;        // device, partial_floats: per-block column sums
    size_t partial_floats;  // KC_PARTIALS
} KcContext;
#define KC_SCRATCH 1024
#define KC_PARTIALS ((size_t)4 << 20)   // 16 MiB: 512 blocks x 2 x 4096 columns
extern KcContext kc_ctx;
void kc_require_init(void);   // kc_init on first use
void kc_moe_release(void);    // moe.cu's cuBLAS handle and pointer buffer (kc_free)
void kc_fp8_release(void);    // fp8.cu's scratch of fp8 operand copies (kc_free)
/* cuBLASLt set-up shared by linear.cu (bf16) and fp8.cu: a matmul
 * descriptor (fp32 compute) with op(A), op(B) and, when bias is not NULL,
 * a bf16 bias epilogue; a heuristic preference within the workspace for
 * operands aligned to `align` bytes; and the four handles freed. */
cublasLtMatmulDesc_t kc_lt_desc(cublasOperation_t opa, cublasOperation_t opb, const kc_bf16 *bias);
cublasLtMatmulPreference_t kc_lt_pref(uint32_t align);
void kc_lt_free(cublasLtMatmulDesc_t op, cublasLtMatrixLayout_t la, cublasLtMatrixLayout_t lb,
                cublasLtMatrixLayout_t ld);

/* Column reductions without atomics (norm.cu): a kernel writes G partial
 * rows of width floats to kc_ctx.partials, then out0[c] += Σ_g part[g][c]
 * and out1[c] += Σ_g part[g][C + c] (out1 nullable) for c < C, in a fixed
 * order. Every user runs on the caller's stream, one after another: the
 * partials are one buffer, like the cuBLASLt workspace. */
void kc_reduce_partials(float *out0, float *out1, const float *part, int G, int C, int width,
                        cudaStream_t st);
int kc_sm_count(void);   // of the current device, cached

static inline unsigned ceil_div(size_t a, size_t b) { return (unsigned)((a + b - 1) / b); }

/* eight bf16 in one 16-byte load or store */
struct __align__(16) Pack8 { bf16 v[8]; };

static inline bool aligned16(const void *p) { return ((uintptr_t)p & 15) == 0; }

__device__ __forceinline__ float warp_sum(float x) {
    for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
    return x;
}
__device__ __forceinline__ float warp_max(float x) {
    for (int o = 16; o > 0; o >>= 1) x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, o));
    return x;
}

/* sum over a block of up to 1024 threads; every thread gets the result.
 * smem holds 32 floats; two barriers so it can be called back to back. */
__device__ __forceinline__ float block_sum(float x, float *smem) {
    int lane = threadIdx.x & 31, wid = threadIdx.x >> 5, nw = (blockDim.x + 31) >> 5;
    x = warp_sum(x);
    __syncthreads();
    if (lane == 0) smem[wid] = x;
    __syncthreads();
    x = lane < nw ? smem[lane] : 0.0f;
    return warp_sum(x);
}
__device__ __forceinline__ float block_max(float x, float *smem) {
    int lane = threadIdx.x & 31, wid = threadIdx.x >> 5, nw = (blockDim.x + 31) >> 5;
    x = warp_max(x);
    __syncthreads();
    if (lane == 0) smem[wid] = x;
    __syncthreads();
    x = lane < nw ? smem[lane] : -INFINITY;
    return warp_max(x);
}

/* grid for a grid-stride loop over n items, capped so a launch stays cheap */
static inline unsigned grid_for(size_t n, int threads) {
    size_t g = (n + threads - 1) / threads;
    if (g > 65535u * 16) g = 65535u * 16;
    return g ? (unsigned)g : 1u;
}

/* elementwise maps: 8 elements a thread, 16-byte accesses when every
 * pointer is aligned (vec), scalar otherwise. Op has one(i) and vec8(i). */
template <typename Op>
__global__ void map8_kernel(size_t n, bool vec, Op op) {
    for (size_t i = (blockIdx.x * (size_t)blockDim.x + threadIdx.x) * 8; i < n;
         i += (size_t)gridDim.x * blockDim.x * 8) {
        if (vec && i + 8 <= n) op.vec8(i);
        else for (size_t j = i; j < n && j < i + 8; j++) op.one(j);
    }
}

template <typename Op>
static void map8(size_t n, bool vec, Op op, cudaStream_t st) {
    if (n == 0) return;
    map8_kernel<<<grid_for((n + 7) / 8, 256), 256, 0, st>>>(n, vec, op);
    CHECK_LAUNCH();
}

/* up to 8 consecutive elements of a row starting at c (zeros past C);
 * one 16-byte access when vec (C % 8 == 0 and the row is aligned) */
__device__ __forceinline__ void load8(float x[8], const bf16 *row, int c, int C, bool vec) {
    if (vec) {
        Pack8 p = *(const Pack8 *)(row + c);
        for (int j = 0; j < 8; j++) x[j] = __bfloat162float(p.v[j]);
    } else {
        for (int j = 0; j < 8; j++) x[j] = c + j < C ? __bfloat162float(row[c + j]) : 0.0f;
    }
}
__device__ __forceinline__ void store8(bf16 *row, const float x[8], int c, int C, bool vec) {
    if (vec) {
        Pack8 p;
        for (int j = 0; j < 8; j++) p.v[j] = __float2bfloat16(x[j]);
        *(Pack8 *)(row + c) = p;
    } else {
        for (int j = 0; j < 8; j++) if (c + j < C) row[c + j] = __float2bfloat16(x[j]);
    }
}


/* Seconds per call of fn(): a warm-up call, then runs of 1, 2, 4 ... calls
 * until one takes 2 ms (a single call would count its launch latency), which
 * sizes the batches (about batch_ms each, at most max_reps calls); then 5
 * batches queued back to back, an event between each and no host sync, so
 * the device never idles (long batches keep it at its power-limited steady
 * clock); the median batch. Shared by calibration and the benchmark. */
template <typename F>
static inline double kc_time_median(F fn, double batch_ms, int max_reps)
{
    enum { NB = 5 };
    cudaEvent_t ev[NB + 1];
    for (int b = 0; b <= NB; b++)
        CHECK_CUDA(cudaEventCreate(&ev[b]));
    fn();
    float ms = 0;
    for (int n = 1;; n *= 2) {
        CHECK_CUDA(cudaEventRecord(ev[0]));
        for (int i = 0; i < n; i++)
            fn();
        CHECK_CUDA(cudaEventRecord(ev[1]));
        CHECK_CUDA(cudaEventSynchronize(ev[1]));
        CHECK_CUDA(cudaEventElapsedTime(&ms, ev[0], ev[1]));
        if (ms >= 2 || n >= max_reps) {
            ms /= n;
            break;
        }
    }
    int reps = (int)std::min((double)max_reps, std::max(1.0, std::ceil(batch_ms / std::max(ms, 1e-6f))));
    CHECK_CUDA(cudaEventRecord(ev[0]));
    for (int b = 0; b < NB; b++) {
        for (int i = 0; i < reps; i++)
            fn();
        CHECK_CUDA(cudaEventRecord(ev[b + 1]));
    }
    CHECK_CUDA(cudaEventSynchronize(ev[NB]));
    double t[NB];
    for (int b = 0; b < NB; b++) {
        CHECK_CUDA(cudaEventElapsedTime(&ms, ev[b], ev[b + 1]));
        t[b] = ms * 1e-3 / reps;
    }
    for (int b = 0; b <= NB; b++)
        cudaEventDestroy(ev[b]);
    std::sort(t, t + NB);
    return t[NB / 2];
}

#endif
