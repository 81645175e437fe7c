/* optim.cu — AdamW on fp32 master weights (optionally writing the bf16 copy
 * the GEMMs read in the same pass) and the small vector helpers. */
#include <math.h>
#include "common.cuh"

struct AdamWOp {
    float *p; const float *g; float *m, *v; bf16 *pb;
    float lr, b1, b2, eps, wd, c1, c2;
    bool pb16;   // pb 16-byte aligned
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
    /* 16-byte accesses, two per array, all eight loads (128 bytes) issued
     * before the first store: the arrays may alias as far as the compiler
     * knows, so loads after a store would wait for it */
    __device__ void vec8(size_t i) const {
        float4 P[2], G[2], M[2], V[2];
        for (int h = 0; h < 2; h++) {
            P[h] = *(const float4 *)(p + i + 4 * h);
            G[h] = *(const float4 *)(g + i + 4 * h);
            M[h] = *(const float4 *)(m + i + 4 * h);
            V[h] = *(const float4 *)(v + i + 4 * h);
        }
        for (int h = 0; h < 2; h++) {
            step(P[h].x, G[h].x, M[h].x, V[h].x); step(P[h].y, G[h].y, M[h].y, V[h].y);
            step(P[h].z, G[h].z, M[h].z, V[h].z); step(P[h].w, G[h].w, M[h].w, V[h].w);
        }
        for (int h = 0; h < 2; h++) {
            *(float4 *)(p + i + 4 * h) = P[h];
            *(float4 *)(m + i + 4 * h) = M[h];
            *(float4 *)(v + i + 4 * h) = V[h];
        }
        if (pb) {   // 8 bf16: one 16-byte store (pb 16-byte aligned) or two of 8
            Pack8 o;
            for (int h = 0; h < 2; h++) {
                o.v[4 * h + 0] = __float2bfloat16(P[h].x); o.v[4 * h + 1] = __float2bfloat16(P[h].y);
                o.v[4 * h + 2] = __float2bfloat16(P[h].z); o.v[4 * h + 3] = __float2bfloat16(P[h].w);
            }
            if (pb16) *(Pack8 *)(pb + i) = o;
            else for (int h = 0; h < 2; h++) *(uint2 *)(pb + i + 4 * h) = *(const uint2 *)&o.v[4 * h];
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
                           weight_decay, c1, c2, params_bf16 && aligned16(params_bf16)}, st);
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

struct AddOp {
    float *y; const float *x;
    __device__ void one(size_t i) const { y[i] += x[i]; }
    __device__ void vec8(size_t i) const {
        float4 *q = (float4 *)(y + i);
        const float4 *p = (const float4 *)(x + i);
        for (int j = 0; j < 2; j++) { float4 a = q[j], b = p[j]; a.x += b.x; a.y += b.y; a.z += b.z; a.w += b.w; q[j] = a; }
    }
};

void kc_add(float *y, const float *x, size_t n, cudaStream_t st) {
    map8(n, aligned16(y) && aligned16(x), AddOp{y, x}, st);
}

/* each block writes its own partial: summed on the host in block order, so
 * the norm (and the clipping it drives) does not depend on block timing */
__global__ void sumsq_kernel(double *partial, const float *x, size_t n) {
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
        if (lane == 0) partial[blockIdx.x] = s;
    }
}

double kc_sumsq(const float *x, size_t n, cudaStream_t st) {
    kc_require_init();
    if (!n) return 0.0;
    unsigned g = grid_for(n, 512);
    if (g > KC_SCRATCH) g = KC_SCRATCH;
    sumsq_kernel<<<g, 512, 0, st>>>(kc_ctx.scratch, x, n);
    CHECK_LAUNCH();
    double part[KC_SCRATCH], h = 0.0;
    CHECK_CUDA(cudaMemcpyAsync(part, kc_ctx.scratch, g * sizeof(double), cudaMemcpyDeviceToHost, st));
    CHECK_CUDA(cudaStreamSynchronize(st));
    for (unsigned b = 0; b < g; b++) h += part[b];
    return h;
}
