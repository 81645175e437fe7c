/* optim.c — AdamW and the small vector helpers. */
#include <math.h>
#include <string.h>
#include "kernels.h"

void k_adamw(float *params, const float *grads, float *m, float *v, size_t n,
             float lr, float beta1, float beta2, float eps, float weight_decay,
             int t) {
    float c1 = (float)(1.0 - pow(beta1, t));   // bias corrections
    float c2 = (float)(1.0 - pow(beta2, t));
    #pragma omp parallel for
    for (size_t i = 0; i < n; i++) {
        float g = grads[i];
        float mi = beta1 * m[i] + (1.0f - beta1) * g;
        float vi = beta2 * v[i] + (1.0f - beta2) * g * g;
        m[i] = mi;
        v[i] = vi;
        float mhat = mi / c1, vhat = vi / c2;
        params[i] -= lr * (mhat / (sqrtf(vhat) + eps) + weight_decay * params[i]);
    }
}

void k_zero(float *x, size_t n) { memset(x, 0, n * sizeof *x); }

void k_scale(float *x, float s, size_t n) {
    #pragma omp parallel for
    for (size_t i = 0; i < n; i++) x[i] *= s;
}

double k_sumsq(const float *x, size_t n) {
    double acc = 0.0;
    #pragma omp parallel for reduction(+:acc)
    for (size_t i = 0; i < n; i++) acc += (double)x[i] * x[i];
    return acc;
}
