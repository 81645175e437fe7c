/* attention.c — causal grouped-query self-attention, FlashAttention-style:
 * the forward keeps only the log-sum-exp of each score row, the backward
 * recomputes the probabilities p = exp(s − lse) row by row.
 *
 * Forward is parallel over (b, query head). Backward is parallel over
 * (b, kv head): the query heads of a group all add into the same dk, dv, so
 * one thread owns the whole group. */
#include <math.h>
#include <stdlib.h>
#include "kernels.h"

static float dot(const float *a, const float *b, int n) {
    float s = 0.0f;
    for (int i = 0; i < n; i++) s += a[i] * b[i];
    return s;
}

void k_attention_fwd(float *out, float *lse, const float *q, const float *k,
                     const float *v, int B, int T, int NH, int NKV, int HS) {
    int rep = NH / NKV;
    float scale = 1.0f / sqrtf((float)HS);
    size_t qs = (size_t)NH * HS, ks = (size_t)NKV * HS;   // row strides over t
    #pragma omp parallel
    {
        float *p = malloc(sizeof(float) * (size_t)T);
        #pragma omp for collapse(2)
        for (int b = 0; b < B; b++) {
            for (int h = 0; h < NH; h++) {
                const float *kb = k + (size_t)b * T * ks + (size_t)(h / rep) * HS;
                const float *vb = v + (size_t)b * T * ks + (size_t)(h / rep) * HS;
                for (int t = 0; t < T; t++) {
                    const float *qt = q + (size_t)b * T * qs + t * qs + (size_t)h * HS;
                    float *ot = out + (size_t)b * T * qs + t * qs + (size_t)h * HS;
                    float mx = -INFINITY;
                    for (int j = 0; j <= t; j++) {
                        p[j] = dot(qt, kb + j * ks, HS) * scale;
                        if (p[j] > mx) mx = p[j];
                    }
                    float sum = 0.0f;
                    for (int j = 0; j <= t; j++) { p[j] = expf(p[j] - mx); sum += p[j]; }
                    float inv = 1.0f / sum;
                    for (int d = 0; d < HS; d++) ot[d] = 0.0f;
                    for (int j = 0; j <= t; j++) {
                        const float *vj = vb + j * ks;
                        float pj = p[j] * inv;
                        for (int d = 0; d < HS; d++) ot[d] += pj * vj[d];
                    }
                    lse[((size_t)b * NH + h) * T + t] = mx + logf(sum);
                }
            }
        }
        free(p);
    }
}

void k_attention_bwd(float *dq, float *dk, float *dv, const float *dout,
                     const float *q, const float *k, const float *v,
                     const float *out, const float *lse,
                     int B, int T, int NH, int NKV, int HS) {
    int rep = NH / NKV;
    float scale = 1.0f / sqrtf((float)HS);
    size_t qs = (size_t)NH * HS, ks = (size_t)NKV * HS;
    #pragma omp parallel for collapse(2)
    for (int b = 0; b < B; b++) {
        for (int g = 0; g < NKV; g++) {
            size_t kvoff = (size_t)b * T * ks + (size_t)g * HS;
            for (int h = g * rep; h < (g + 1) * rep; h++) {
                for (int t = 0; t < T; t++) {
                    size_t qoff = (size_t)b * T * qs + t * qs + (size_t)h * HS;
                    const float *qt = q + qoff, *ot = out + qoff, *dyt = dout + qoff;
                    float *dqt = dq + qoff;
                    float l = lse[((size_t)b * NH + h) * T + t];
                    float D = dot(dyt, ot, HS);       // Σ_j p_j · dp_j
                    for (int j = 0; j <= t; j++) {
                        const float *kj = k + kvoff + j * ks, *vj = v + kvoff + j * ks;
                        float *dkj = dk + kvoff + j * ks, *dvj = dv + kvoff + j * ks;
                        float pj = expf(dot(qt, kj, HS) * scale - l);
                        float ds = pj * (dot(dyt, vj, HS) - D) * scale;
                        for (int d = 0; d < HS; d++) {
                            dqt[d] += ds * kj[d];
                            dkj[d] += ds * qt[d];
                            dvj[d] += pj * dyt[d];
                        }
                    }
                }
            }
        }
    }
}
