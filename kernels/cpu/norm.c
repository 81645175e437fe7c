/* norm.c — LayerNorm and RMSNorm over the last dimension C.
 * Backward: rows are independent for dinp (parallel over rows); the weight
 * gradients reduce over rows, so they get a second pass parallel over
 * channels instead of atomics. */
#include <math.h>
#include "kernels.h"

void k_layernorm_fwd(float *out, float *mean, float *rstd,
                     const float *inp, const float *weight, const float *bias,
                     int N, int C, float eps) {
    #pragma omp parallel for
    for (int i = 0; i < N; i++) {
        const float *x = inp + (size_t)i * C;
        float *y = out + (size_t)i * C;
        double s = 0.0, ss = 0.0;
        for (int c = 0; c < C; c++) s += x[c];
        float mu = (float)(s / C);
        for (int c = 0; c < C; c++) { float d = x[c] - mu; ss += (double)d * d; }
        float r = (float)(1.0 / sqrt(ss / C + eps));
        for (int c = 0; c < C; c++) {
            float n = (x[c] - mu) * r;
            y[c] = n * weight[c] + (bias ? bias[c] : 0.0f);
        }
        mean[i] = mu;
        rstd[i] = r;
    }
}

void k_layernorm_bwd(float *dinp, float *dweight, float *dbias,
                     const float *dout, const float *inp, const float *weight,
                     const float *mean, const float *rstd, int N, int C) {
    #pragma omp parallel for
    for (int i = 0; i < N; i++) {
        const float *x = inp + (size_t)i * C, *dy = dout + (size_t)i * C;
        float *dx = dinp + (size_t)i * C;
        float mu = mean[i], r = rstd[i];
        // dnorm = dy·w; dx = r·(dnorm − mean(dnorm) − norm·mean(dnorm·norm))
        float m1 = 0.0f, m2 = 0.0f;
        for (int c = 0; c < C; c++) {
            float dn = dy[c] * weight[c];
            m1 += dn;
            m2 += dn * (x[c] - mu) * r;
        }
        m1 /= C;
        m2 /= C;
        for (int c = 0; c < C; c++) {
            float n = (x[c] - mu) * r;
            dx[c] += (dy[c] * weight[c] - m1 - n * m2) * r;
        }
    }
    #pragma omp parallel for
    for (int c = 0; c < C; c++) {
        float dw = 0.0f, db = 0.0f;
        for (int i = 0; i < N; i++) {
            float dy = dout[(size_t)i * C + c];
            dw += dy * (inp[(size_t)i * C + c] - mean[i]) * rstd[i];
            db += dy;
        }
        dweight[c] += dw;
        if (dbias) dbias[c] += db;
    }
}

void k_rmsnorm_fwd(float *out, float *rstd, const float *inp, const float *weight,
                   int N, int C, float eps) {
    #pragma omp parallel for
    for (int i = 0; i < N; i++) {
        const float *x = inp + (size_t)i * C;
        float *y = out + (size_t)i * C;
        double ss = 0.0;
        for (int c = 0; c < C; c++) ss += (double)x[c] * x[c];
        float r = (float)(1.0 / sqrt(ss / C + eps));
        for (int c = 0; c < C; c++) y[c] = x[c] * r * weight[c];
        rstd[i] = r;
    }
}

void k_rmsnorm_bwd(float *dinp, float *dweight, const float *dout,
                   const float *inp, const float *weight, const float *rstd,
                   int N, int C) {
    #pragma omp parallel for
    for (int i = 0; i < N; i++) {
        const float *x = inp + (size_t)i * C, *dy = dout + (size_t)i * C;
        float *dx = dinp + (size_t)i * C;
        float r = rstd[i];
        // y = x·r·w, r = (mean(x²)+eps)^−½ → dx = r·dy·w − x·r³·mean(dy·w·x)
        float dot = 0.0f;
        for (int c = 0; c < C; c++) dot += dy[c] * weight[c] * x[c];
        float k = dot / C * r * r * r;
        for (int c = 0; c < C; c++) dx[c] += r * dy[c] * weight[c] - x[c] * k;
    }
    #pragma omp parallel for
    for (int c = 0; c < C; c++) {
        float dw = 0.0f;
        for (int i = 0; i < N; i++)
            dw += dout[(size_t)i * C + c] * inp[(size_t)i * C + c] * rstd[i];
        dweight[c] += dw;
    }
}
