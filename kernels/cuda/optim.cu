/* optim.cu — AdamW on fp32 master weights (optionally writing the bf16 copy
 * the GEMMs read in the same pass) and the small vector helpers. */
#include <math.h>
#include "common.cuh"

struct AdamWOp {
    float *p; const float *g; float *m, *v; bf16 *pb;
    float lr, b1, b2, eps, wd, c1, c2;
    __device__ void one(size_t i) const {
        float gi = g[i];
        float mi = b1 * m[i] + (1.0f - b1) * gi;
        float vi = b2 * v[i] + (1.0f - b2) * gi * gi;
        m[i] = mi;
        v[i] = vi;
        float pi = p[i];
        pi -= lr * ((mi / c1) / (sqrtf(vi / c2) + eps) + wd * pi);
        p[i] = pi;
        if (pb) pb[i] = __float2bfloat16(pi);
    }
    __device__ float step(float &pi, float gi, float &mi, float &vi) const {
        mi = b1 * mi + (1.0f - b1) * gi;
        vi = b2 * vi + (1.0f - b2) * gi * gi;
        pi -= lr * ((mi / c1) / (sqrtf(vi / c2) + eps) + wd * pi);
        return pi;
    }
    __device__ void vec8(size_t i) const {   // 16-byte accesses, two per array
        for (int h = 0; h < 8; h += 4) {
            float4 P = *(float4 *)(p + i + h), G = *(const float4 *)(g + i + h);
            float4 M = *(float4 *)(m + i + h), Vv = *(float4 *)(v + i + h);
            step(P.x, G.x, M.x, Vv.x); step(P.y, G.y, M.y, Vv.y);
            step(P.z, G.z, M.z, Vv.z); step(P.w, G.w, M.w, Vv.w);
            *(float4 *)(p + i + h) = P; *(float4 *)(m + i + h) = M; *(float4 *)(v + i + h) = Vv;
            if (pb) {
                __nv_bfloat162 *o = (__nv_bfloat162 *)(pb + i + h);
                o[0] = __floats2bfloat162_rn(P.x, P.y);
                o[1] = __floats2bfloat162_rn(P.z, P.w);
            }
        }
    }
};

void kc_adamw(float *params, const float *grads, float *m, float *v, size_t n, float lr,
              float beta1, float beta2, float eps, float weight_decay, int t,
              bf16 *params_bf16, cudaStream_t st) {
    float c1 = (float)(1.0 - pow(beta1, t)), c2 = (float)(1.0 - pow(beta2, t));
    bool vec = aligned16(params) && aligned16(grads) && aligned16(m) && aligned16(v) &&
               (!params_bf16 || ((uintptr_t)params_bf16 & 7) == 0);
    map8(n, vec, AdamWOp{params, grads, m, v, params_bf16, lr, beta1, beta2, eps,
                           weight_decay, c1, c2}, st);
}

void kc_zero(float *x, size_t n, cudaStream_t st) {
    CHECK_CUDA(cudaMemsetAsync(x, 0, n * sizeof *x, st));
}

struct ScaleOp {
    float *x; float s;
    __device__ void one(size_t i) const { x[i] *= s; }
    __device__ void vec8(size_t i) const {
        float4 *q = (float4 *)(x + i);
        for (int j = 0; j < 2; j++) { float4 a = q[j]; a.x *= s; a.y *= s; a.z *= s; a.w *= s; q[j] = a; }
    }
};

void kc_scale(float *x, float s, size_t n, cudaStream_t st) {
    map8(n, aligned16(x), ScaleOp{x, s}, st);
}

__global__ void sumsq_kernel(double *acc, const float *x, size_t n) {
    __shared__ double red[32];
    double s = 0.0;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        s += (double)x[i] * x[i];
    for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
    int lane = threadIdx.x & 31, wid = threadIdx.x >> 5;
    if (lane == 0) red[wid] = s;
    __syncthreads();
    if (wid == 0) {
        s = lane < (int)(blockDim.x >> 5) ? red[lane] : 0.0;
        for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
        if (lane == 0) atomicAdd(acc, s);
    }
}

double kc_sumsq(const float *x, size_t n, cudaStream_t st) {
    kc_require_init();
    double h = 0.0;
    CHECK_CUDA(cudaMemsetAsync(kc_ctx.scratch, 0, sizeof(double), st));
    if (n) {
        unsigned g = grid_for(n, 512);
        if (g > 1024) g = 1024;
        sumsq_kernel<<<g, 512, 0, st>>>(kc_ctx.scratch, x, n);
        CHECK_LAUNCH();
    }
    CHECK_CUDA(cudaMemcpyAsync(&h, kc_ctx.scratch, sizeof h, cudaMemcpyDeviceToHost, st));
    CHECK_CUDA(cudaStreamSynchronize(st));
    return h;
}
