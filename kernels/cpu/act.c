/* act.c — GELU (tanh approximation) and SwiGLU. */
#include <math.h>
#include "kernels.h"

#define GELU_K 0.7978845608028654f   // sqrt(2/π)
#define GELU_A 0.044715f

void k_gelu_fwd(float *out, const float *inp, size_t N) {
    #pragma omp parallel for
    for (size_t i = 0; i < N; i++) {
        float x = inp[i];
        out[i] = 0.5f * x * (1.0f + tanhf(GELU_K * (x + GELU_A * x * x * x)));
    }
}

void k_gelu_bwd(float *dinp, const float *inp, const float *dout, size_t N) {
    #pragma omp parallel for
    for (size_t i = 0; i < N; i++) {
        float x = inp[i];
        float th = tanhf(GELU_K * (x + GELU_A * x * x * x));
        float du = GELU_K * (1.0f + 3.0f * GELU_A * x * x);   // d(tanh arg)/dx
        float g = 0.5f * (1.0f + th) + 0.5f * x * (1.0f - th * th) * du;
        dinp[i] += g * dout[i];
    }
}

void k_swiglu_fwd(float *out, const float *inp, int N, int F) {
    #pragma omp parallel for
    for (int i = 0; i < N; i++) {
        const float *gate = inp + (size_t)i * 2 * F, *up = gate + F;
        float *o = out + (size_t)i * F;
        for (int j = 0; j < F; j++) {
            float g = gate[j];
            o[j] = g / (1.0f + expf(-g)) * up[j];
        }
    }
}

void k_swiglu_bwd(float *dinp, const float *inp, const float *dout, int N, int F) {
    #pragma omp parallel for
    for (int i = 0; i < N; i++) {
        const float *gate = inp + (size_t)i * 2 * F, *up = gate + F;
        const float *dy = dout + (size_t)i * F;
        float *dgate = dinp + (size_t)i * 2 * F, *dup = dgate + F;
        for (int j = 0; j < F; j++) {
            float g = gate[j], s = 1.0f / (1.0f + expf(-g));
            dgate[j] += dy[j] * up[j] * s * (1.0f + g * (1.0f - s));
            dup[j] += dy[j] * g * s;
        }
    }
}
