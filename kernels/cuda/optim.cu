/* optim.cu — AdamW on fp32 master weights (optionally writing the bf16 copy
 * the GEMMs read in the same pass) and the small vector helpers. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
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

/* vec8 with the streaming cache hints (__ldcs / __stcs: evict first; every
 * byte is touched once) */
__device__ __forceinline__ void adamw_vec8_stream(const AdamWOp &op, size_t i) {
    float4 P[2], G[2], M[2], V[2];
    for (int h = 0; h < 2; h++) {
        P[h] = __ldcs((const float4 *)(op.p + i + 4 * h));
        G[h] = __ldcs((const float4 *)(op.g + i + 4 * h));
        M[h] = __ldcs((const float4 *)(op.m + i + 4 * h));
        V[h] = __ldcs((const float4 *)(op.v + i + 4 * h));
    }
    for (int h = 0; h < 2; h++) {
        op.step(P[h].x, G[h].x, M[h].x, V[h].x); op.step(P[h].y, G[h].y, M[h].y, V[h].y);
        op.step(P[h].z, G[h].z, M[h].z, V[h].z); op.step(P[h].w, G[h].w, M[h].w, V[h].w);
    }
    for (int h = 0; h < 2; h++) {
        __stcs((float4 *)(op.p + i + 4 * h), P[h]);
        __stcs((float4 *)(op.m + i + 4 * h), M[h]);
        __stcs((float4 *)(op.v + i + 4 * h), V[h]);
    }
    if (op.pb) {
        Pack8 o;
        for (int h = 0; h < 2; h++) {
            o.v[4 * h + 0] = __float2bfloat16(P[h].x); o.v[4 * h + 1] = __float2bfloat16(P[h].y);
            o.v[4 * h + 2] = __float2bfloat16(P[h].z); o.v[4 * h + 3] = __float2bfloat16(P[h].w);
        }
        const uint2 *u = (const uint2 *)&o;
        if (op.pb16) {
            __stcs((uint4 *)(op.pb + i), make_uint4(u[0].x, u[0].y, u[1].x, u[1].y));
        } else {
            __stcs((uint2 *)(op.pb + i), u[0]);
            __stcs((uint2 *)(op.pb + i + 4), u[1]);
        }
    }
}

/* Opt-in (kc_adamw_set_stream): a persistent grid, 4 blocks of 256 an SM,
 * grid-stride over groups of 8, with the streaming hints. Same arithmetic. */
__global__ void __launch_bounds__(256) adamw_stream_kernel(AdamWOp op, size_t n, bool vec) {
    for (size_t i = (blockIdx.x * (size_t)blockDim.x + threadIdx.x) * 8; i < n;
         i += (size_t)gridDim.x * blockDim.x * 8) {
        if (vec && i + 8 <= n) adamw_vec8_stream(op, i);
        else for (size_t j = i; j < n && j < i + 8; j++) op.one(j);
    }
}

static int adamw_stream = -1;
static bool adamw_stream_on(void) {
    if (adamw_stream < 0) {
        const char *e = getenv("ULTRAPLAN_ADAMW");
        adamw_stream = e && !strcmp(e, "stream");
    }
    return adamw_stream;
}
int kc_adamw_set_stream(int on) {
    int prev = adamw_stream_on();
    adamw_stream = on != 0;
    return prev;
}

void kc_adamw(float *params, const float *grads, float *m, float *v, size_t n, float lr,
              float beta1, float beta2, float eps, float weight_decay, int t,
              bf16 *params_bf16, cudaStream_t st) {
    float c1 = (float)(1.0 - pow(beta1, t)), c2 = (float)(1.0 - pow(beta2, t));
    bool vec = aligned16(params) && aligned16(grads) && aligned16(m) && aligned16(v) &&
               (!params_bf16 || ((uintptr_t)params_bf16 & 7) == 0);
    AdamWOp op{params, grads, m, v, params_bf16, lr, beta1, beta2, eps, weight_decay, c1, c2,
               params_bf16 && aligned16(params_bf16)};
    if (n > 0 && adamw_stream_on()) {
        unsigned g = std::min(grid_for((n + 7) / 8, 256), (unsigned)(4 * kc_sm_count()));
        adamw_stream_kernel<<<g, 256, 0, st>>>(op, n, vec);
        CHECK_LAUNCH();
        return;
    }
    map8(n, vec, op, st);
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
