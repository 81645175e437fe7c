/* cutp.cu — see cutp.h. One block of 256 threads per token row. */
#include <cfloat>
#include <cuda_bf16.h>

#include "cutp.h"

typedef __nv_bfloat16 bf16;
enum { TPB = 256 };

/* block-wide reduction of one float; every thread gets the result */
template <bool MAX>
__device__ float block_reduce(float x)
{
    __shared__ float sh[TPB / 32];
    for (int o = 16; o > 0; o >>= 1) {
        float y = __shfl_xor_sync(0xffffffffu, x, o);
        x = MAX ? fmaxf(x, y) : x + y;
    }
    int w = threadIdx.x / 32, l = threadIdx.x % 32;
    __syncthreads();
    if (l == 0)
        sh[w] = x;
    __syncthreads();
    x = l < TPB / 32 ? sh[l] : (MAX ? -FLT_MAX : 0.0f);
    for (int o = 16; o > 0; o >>= 1) {
        float y = __shfl_xor_sync(0xffffffffu, x, o);
        x = MAX ? fmaxf(x, y) : x + y;
    }
    return x;
}

__global__ void embed_fwd(bf16 *out, const int *tok, const bf16 *wte, const bf16 *wpe, int T, int C, int vstart,
                          int Vl)
{
    int i = blockIdx.x, v = tok[i] - vstart;
    bool held = v >= 0 && v < Vl;
    for (int c = threadIdx.x; c < C; c += blockDim.x) {
        float x = held ? __bfloat162float(wte[(size_t)v * C + c]) : 0.0f;
        if (wpe)
            x += __bfloat162float(wpe[(size_t)(i % T) * C + c]);
        out[(size_t)i * C + c] = __float2bfloat16(x);
    }
}

__global__ void embed_bwd(float *dwte, const bf16 *dout, const int *tok, int C, int vstart, int Vl)
{
    int i = blockIdx.x, v = tok[i] - vstart;
    if (v < 0 || v >= Vl)
        return;
    for (int c = threadIdx.x; c < C; c += blockDim.x)
        atomicAdd(&dwte[(size_t)v * C + c], __bfloat162float(dout[(size_t)i * C + c]));
}

__global__ void ce_max(float *mx, const bf16 *logits, int Vl, int valid)
{
    const bf16 *l = logits + (size_t)blockIdx.x * Vl;
    float m = -FLT_MAX;
    for (int j = threadIdx.x; j < valid; j += blockDim.x)
        m = fmaxf(m, __bfloat162float(l[j]));
    m = block_reduce<true>(m);
    if (threadIdx.x == 0)
        mx[blockIdx.x] = m;
}

__global__ void ce_sumexp(float *red, const bf16 *logits, const float *mx, const int *targets, int vstart, int N,
                          int Vl, int valid)
{
    int i = blockIdx.x;
    const bf16 *l = logits + (size_t)i * Vl;
    float m = mx[i], s = 0;
    for (int j = threadIdx.x; j < valid; j += blockDim.x)
        s += __expf(__bfloat162float(l[j]) - m);
    s = block_reduce<false>(s);
    if (threadIdx.x == 0) {
        int t = targets[i] - vstart;
        red[i] = s;
        red[N + i] = t >= 0 && t < Vl ? __bfloat162float(l[t]) : 0.0f;
    }
}

__global__ void ce_finish(float *losses, bf16 *logits, const float *mx, const float *red, const int *targets,
                          int vstart, float scale, int N, int Vl, int valid)
{
    int i = blockIdx.x, t = targets[i] - vstart;
    bf16 *l = logits + (size_t)i * Vl;
    if (targets[i] < 0) {   /* ignored token, as kc_crossentropy_*: no loss, no gradient */
        if (threadIdx.x == 0)
            losses[i] = 0.0f;
        for (int j = threadIdx.x; j < Vl; j += blockDim.x)
            l[j] = __float2bfloat16(0.0f);
        return;
    }
    float lse = mx[i] + logf(red[i]);
    if (threadIdx.x == 0)
        losses[i] = lse - red[N + i];
    for (int j = threadIdx.x; j < Vl; j += blockDim.x) {
        float d = j < valid ? (__expf(__bfloat162float(l[j]) - lse) - (j == t ? 1.0f : 0.0f)) * scale : 0.0f;
        l[j] = __float2bfloat16(d);
    }
}

/* one block a row; no rows, no launch (a grid of 0 blocks is an invalid launch) */
#define LAUNCH_ROWS(kernel, N, st, ...) do { \
        if ((N) > 0) { kernel<<<(N), TPB, 0, (st)>>>(__VA_ARGS__); CHECK_CUDA(cudaGetLastError()); } \
    } while (0)

void cutp_embed_fwd(kc_bf16 *out, const int *tok, const kc_bf16 *wte, const kc_bf16 *wpe, int N, int T, int C,
                    int vstart, int Vl, cudaStream_t st)
{
    LAUNCH_ROWS(embed_fwd, N, st, out, tok, wte, wpe, T, C, vstart, Vl);
}

void cutp_embed_bwd(float *dwte, const kc_bf16 *dout, const int *tok, int N, int C, int vstart, int Vl,
                    cudaStream_t st)
{
    LAUNCH_ROWS(embed_bwd, N, st, dwte, dout, tok, C, vstart, Vl);
}

void cutp_ce_max(float *mx, const kc_bf16 *logits, int N, int Vl, int valid, cudaStream_t st)
{
    LAUNCH_ROWS(ce_max, N, st, mx, logits, Vl, valid);
}

void cutp_ce_sumexp(float *red, const kc_bf16 *logits, const float *mx, const int *targets, int vstart, int N,
                    int Vl, int valid, cudaStream_t st)
{
    LAUNCH_ROWS(ce_sumexp, N, st, red, logits, mx, targets, vstart, N, Vl, valid);
}

void cutp_ce_finish(float *losses, kc_bf16 *logits, const float *mx, const float *red, const int *targets,
                    int vstart, float scale, int N, int Vl, int valid, cudaStream_t st)
{
    LAUNCH_ROWS(ce_finish, N, st, losses, logits, mx, red, targets, vstart, scale, N, Vl, valid);
}
