/* act.cu — GELU (tanh), SwiGLU and RoPE: elementwise, bf16 in and out,
 * fp32 arithmetic. Backward kernels add into dinp (read, add, round). */
#include <math.h>
#include "common.cuh"

#define GELU_K 0.7978845608028654f   // sqrt(2/π)

__device__ __forceinline__ float gelu_f(float x) {
    return 0.5f * x * (1.0f + tanhf(GELU_K * (x + 0.044715f * x * x * x)));
}
__device__ __forceinline__ float gelu_grad(float x) {
    float u = GELU_K * (x + 0.044715f * x * x * x);
    float th = tanhf(u);
    float du = GELU_K * (1.0f + 3.0f * 0.044715f * x * x);
    return 0.5f * (1.0f + th) + 0.5f * x * (1.0f - th * th) * du;
}

struct GeluFwd {
    bf16 *out; const bf16 *inp;
    __device__ void one(size_t i) const { out[i] = __float2bfloat16(gelu_f(__bfloat162float(inp[i]))); }
    __device__ void vec8(size_t i) const {
        Pack8 x = *(const Pack8 *)(inp + i);
        for (int j = 0; j < 8; j++) x.v[j] = __float2bfloat16(gelu_f(__bfloat162float(x.v[j])));
        *(Pack8 *)(out + i) = x;
    }
};
struct GeluBwd {
    bf16 *dinp; const bf16 *inp, *dout;
    __device__ void one(size_t i) const {
        float g = __bfloat162float(dinp[i]) + gelu_grad(__bfloat162float(inp[i])) * __bfloat162float(dout[i]);
        dinp[i] = __float2bfloat16(g);
    }
    __device__ void vec8(size_t i) const {
        Pack8 g = *(const Pack8 *)(dinp + i), x = *(const Pack8 *)(inp + i), d = *(const Pack8 *)(dout + i);
        for (int j = 0; j < 8; j++)
            g.v[j] = __float2bfloat16(__bfloat162float(g.v[j]) +
                                      gelu_grad(__bfloat162float(x.v[j])) * __bfloat162float(d.v[j]));
        *(Pack8 *)(dinp + i) = g;
    }
};

void kc_gelu_fwd(bf16 *out, const bf16 *inp, size_t N, cudaStream_t st) {
    map8(N, aligned16(out) && aligned16(inp), GeluFwd{out, inp}, st);
}
void kc_gelu_bwd(bf16 *dinp, const bf16 *inp, const bf16 *dout, size_t N, cudaStream_t st) {
    map8(N, aligned16(dinp) && aligned16(inp) && aligned16(dout), GeluBwd{dinp, inp, dout}, st);
}

/* ---- SwiGLU: inp row = [gate (F) | up (F)] ------------------------------ */

__device__ __forceinline__ float sigmoid_f(float x) { return 1.0f / (1.0f + expf(-x)); }

/* i indexes out (N, F); vectors stay inside one row when F % 8 == 0 */
struct SwigluFwd {
    bf16 *out; const bf16 *inp; int F;
    __device__ void one(size_t i) const {
        size_t r = i / F, c = i % F;
        float g = __bfloat162float(inp[r * 2 * F + c]), u = __bfloat162float(inp[r * 2 * F + F + c]);
        out[i] = __float2bfloat16(g * sigmoid_f(g) * u);
    }
    __device__ void vec8(size_t i) const {
        size_t r = i / F, c = i % F;
        Pack8 g = *(const Pack8 *)(inp + r * 2 * F + c), u = *(const Pack8 *)(inp + r * 2 * F + F + c), y;
        for (int j = 0; j < 8; j++) {
            float gj = __bfloat162float(g.v[j]);
            y.v[j] = __float2bfloat16(gj * sigmoid_f(gj) * __bfloat162float(u.v[j]));
        }
        *(Pack8 *)(out + i) = y;
    }
};
/* y = silu(g)·u: dg = dy·u·σ(g)·(1 + g·(1 − σ(g))), du = dy·silu(g) */
struct SwigluBwd {
    bf16 *dinp; const bf16 *inp, *dout; int F;
    __device__ void one(size_t i) const {
        size_t r = i / F, c = i % F, ig = r * 2 * F + c, iu = ig + F;
        float g = __bfloat162float(inp[ig]), u = __bfloat162float(inp[iu]), dy = __bfloat162float(dout[i]);
        float s = sigmoid_f(g);
        dinp[ig] = __float2bfloat16(__bfloat162float(dinp[ig]) + dy * u * s * (1.0f + g * (1.0f - s)));
        dinp[iu] = __float2bfloat16(__bfloat162float(dinp[iu]) + dy * g * s);
    }
    __device__ void vec8(size_t i) const {
        size_t r = i / F, c = i % F, ig = r * 2 * F + c, iu = ig + F;
        Pack8 g = *(const Pack8 *)(inp + ig), u = *(const Pack8 *)(inp + iu), d = *(const Pack8 *)(dout + i);
        Pack8 dg = *(const Pack8 *)(dinp + ig), du = *(const Pack8 *)(dinp + iu);
        for (int j = 0; j < 8; j++) {
            float gj = __bfloat162float(g.v[j]), uj = __bfloat162float(u.v[j]), dy = __bfloat162float(d.v[j]);
            float s = sigmoid_f(gj);
            dg.v[j] = __float2bfloat16(__bfloat162float(dg.v[j]) + dy * uj * s * (1.0f + gj * (1.0f - s)));
            du.v[j] = __float2bfloat16(__bfloat162float(du.v[j]) + dy * gj * s);
        }
        *(Pack8 *)(dinp + ig) = dg;
        *(Pack8 *)(dinp + iu) = du;
    }
};

void kc_swiglu_fwd(bf16 *out, const bf16 *inp, int N, int F, cudaStream_t st) {
    bool vec = F % 8 == 0 && aligned16(out) && aligned16(inp);
    map8((size_t)N * F, vec, SwigluFwd{out, inp, F}, st);
}
void kc_swiglu_bwd(bf16 *dinp, const bf16 *inp, const bf16 *dout, int N, int F, cudaStream_t st) {
    bool vec = F % 8 == 0 && aligned16(dinp) && aligned16(inp) && aligned16(dout);
    map8((size_t)N * F, vec, SwigluBwd{dinp, inp, dout, F}, st);
}

/* ---- RoPE, rotate-half: one thread per pair (i, i + HS/2) --------------- */

__global__ void rope_kernel(bf16 *out, const bf16 *inp, int T, int NH, int HS, int pos0,
                            double log_theta, float sign, bool accumulate, size_t npairs) {
    int half = HS / 2;
    for (size_t p = blockIdx.x * (size_t)blockDim.x + threadIdx.x; p < npairs;
         p += (size_t)gridDim.x * blockDim.x) {
        int i = (int)(p % half);
        size_t bth = p / half;                 // (b, t, h) flattened
        int t = (int)((bth / NH) % T);
        double ang = (double)(pos0 + t) * exp(-2.0 * i / HS * log_theta);
        double sd, cd;
        sincos(ang, &sd, &cd);
        float cs = (float)cd, sn = sign * (float)sd;
        size_t off = bth * HS;
        float x1 = __bfloat162float(inp[off + i]), x2 = __bfloat162float(inp[off + i + half]);
        float y1 = x1 * cs - x2 * sn, y2 = x2 * cs + x1 * sn;
        if (accumulate) {
            y1 += __bfloat162float(out[off + i]);
            y2 += __bfloat162float(out[off + i + half]);
        }
        out[off + i] = __float2bfloat16(y1);
        out[off + i + half] = __float2bfloat16(y2);
    }
}

static void rope(bf16 *out, const bf16 *inp, int B, int T, int NH, int HS, int pos0,
                 float theta, float sign, bool accumulate, cudaStream_t st) {
    size_t npairs = (size_t)B * T * NH * (HS / 2);
    if (npairs == 0) return;
    rope_kernel<<<grid_for(npairs, 256), 256, 0, st>>>(out, inp, T, NH, HS, pos0,
                                                      log((double)theta), sign, accumulate, npairs);
    CHECK_LAUNCH();
}

void kc_rope_fwd(bf16 *out, const bf16 *inp, int B, int T, int NH, int HS, int pos0,
                 float theta, cudaStream_t st) {
    rope(out, inp, B, T, NH, HS, pos0, theta, 1.0f, false, st);
}
void kc_rope_bwd(bf16 *dinp, const bf16 *dout, int B, int T, int NH, int HS, int pos0,
                 float theta, cudaStream_t st) {
    rope(dinp, dout, B, T, NH, HS, pos0, theta, -1.0f, true, st);
}
