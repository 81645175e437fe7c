/* act.c — GELU (tanh approximation), SwiGLU and GPT-OSS's clamped quick-GEGLU. */
#include <math.h>
#include "kernels.h"
#include "vmath.h"

#define GELU_K 0.7978845608028654f   // sqrt(2/π)
#define GELU_A 0.044715f

/* tanh(u) = 1 − 2/(e^{2u} + 1), with e^{2u} from vm_exp over blocks of GELU_BLK
 * elements so the loops vectorise; |u| ≤ 9 keeps e finite (tanh(9) is 1 in
 * float) and lets the backward use sech² = 4e/(e + 1)² without cancellation. */
enum { GELU_BLK = 256 };

static int gelu_args(float *e, const float *x, size_t i0, size_t N) {
    int n = N - i0 < GELU_BLK ? (int)(N - i0) : GELU_BLK;
    #pragma omp simd
    for (int j = 0; j < n; j++) {
        float v = x[i0 + j];
        e[j] = 2.0f * GELU_K * (v + GELU_A * v * v * v);
    }
    #pragma omp simd
    for (int j = 0; j < n; j++) {   // a pass of its own, as in vm_exp
        float u = e[j] > -18.0f ? e[j] : -18.0f;
        e[j] = u < 18.0f ? u : 18.0f;
    }
    vm_exp(e, e, n);
    return n;
}

void k_gelu_fwd(float *out, const float *inp, size_t N) {
    size_t nblk = (N + GELU_BLK - 1) / GELU_BLK;
    #pragma omp parallel for
    for (size_t b = 0; b < nblk; b++) {
        float e[GELU_BLK];
        size_t i0 = b * GELU_BLK;
        int n = gelu_args(e, inp, i0, N);
        #pragma omp simd
        for (int j = 0; j < n; j++) {
            float x = inp[i0 + j], th = 1.0f - 2.0f / (e[j] + 1.0f);
            out[i0 + j] = 0.5f * x * (1.0f + th);
        }
    }
}

void k_gelu_bwd(float *dinp, const float *inp, const float *dout, size_t N) {
    size_t nblk = (N + GELU_BLK - 1) / GELU_BLK;
    #pragma omp parallel for
    for (size_t b = 0; b < nblk; b++) {
        float e[GELU_BLK];
        size_t i0 = b * GELU_BLK;
        int n = gelu_args(e, inp, i0, N);
        #pragma omp simd
        for (int j = 0; j < n; j++) {
            float x = inp[i0 + j], ep1 = e[j] + 1.0f;
            float th = 1.0f - 2.0f / ep1, sech2 = 4.0f * e[j] / (ep1 * ep1);
            float du = GELU_K * (1.0f + 3.0f * GELU_A * x * x);   // d(tanh arg)/dx
            float g = 0.5f * (1.0f + th) + 0.5f * x * sech2 * du;
            dinp[i0 + j] += g * dout[i0 + j];
        }
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

/* GPT-OSS's gated activation (HF modeling_gpt_oss, Megatron's quick_gelu
 * with activation_func_clamp_value C and glu_linear_offset 1): the gate
 * clamped from above at C, the linear half to [−C, C], out = g·σ(1.702 g)·(u + 1).
 * A clamped input gets no gradient (as torch.clamp's backward, which passes
 * it at the bound itself). clamp 0 is SwiGLU. */
#define QUICK_GELU_A 1.702f

void k_glu_fwd(float *out, const float *inp, int N, int F, float clamp) {
    if (clamp <= 0) {
        k_swiglu_fwd(out, inp, N, F);
        return;
    }
    #pragma omp parallel for
    for (int i = 0; i < N; i++) {
        const float *gate = inp + (size_t)i * 2 * F, *up = gate + F;
        float *o = out + (size_t)i * F;
        for (int j = 0; j < F; j++) {
            float g = fminf(gate[j], clamp), u = fminf(fmaxf(up[j], -clamp), clamp);
            o[j] = g / (1.0f + expf(-QUICK_GELU_A * g)) * (u + 1.0f);
        }
    }
}

void k_glu_bwd(float *dinp, const float *inp, const float *dout, int N, int F, float clamp) {
    if (clamp <= 0) {
        k_swiglu_bwd(dinp, inp, dout, N, F);
        return;
    }
    #pragma omp parallel for
    for (int i = 0; i < N; i++) {
        const float *gate = inp + (size_t)i * 2 * F, *up = gate + F;
        const float *dy = dout + (size_t)i * F;
        float *dgate = dinp + (size_t)i * 2 * F, *dup = dgate + F;
        for (int j = 0; j < F; j++) {
            float g = fminf(gate[j], clamp), u = fminf(fmaxf(up[j], -clamp), clamp);
            float s = 1.0f / (1.0f + expf(-QUICK_GELU_A * g));
            if (gate[j] <= clamp)
                dgate[j] += dy[j] * (u + 1.0f) * s * (1.0f + QUICK_GELU_A * g * (1.0f - s));
            if (up[j] >= -clamp && up[j] <= clamp)
                dup[j] += dy[j] * g * s;
        }
    }
}
