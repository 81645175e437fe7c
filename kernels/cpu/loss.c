/* loss.c — fused softmax + cross-entropy with a masked vocabulary tail.
 * The exponentials go through vm_exp a block at a time: over a 50k
 * vocabulary, libm's scalar expf made this as slow as a fifth of the LM head
 * GEMM. */
#include <math.h>
#include "kernels.h"
#include "vmath.h"

enum { CE_BLK = 512 };

void k_crossentropy_fwd(float *losses, float *lse, const float *logits,
                        const int *targets, int BT, int V, int V_valid) {
    #pragma omp parallel for
    for (int i = 0; i < BT; i++) {
        const float *x = logits + (size_t)i * V;
        float mx = -INFINITY, e[CE_BLK];
        #pragma omp simd reduction(max:mx)
        for (int j = 0; j < V_valid; j++) mx = x[j] > mx ? x[j] : mx;
        double sum = 0.0;
        for (int j0 = 0; j0 < V_valid; j0 += CE_BLK) {
            int n = V_valid - j0 < CE_BLK ? V_valid - j0 : CE_BLK;
            #pragma omp simd
            for (int j = 0; j < n; j++) e[j] = x[j0 + j] - mx;
            vm_exp(e, e, n);
            float s = 0.0f;
            #pragma omp simd reduction(+:s)
            for (int j = 0; j < n; j++) s += e[j];
            sum += s;
        }
        float l = mx + (float)log(sum);
        lse[i] = l;
        losses[i] = targets[i] < 0 ? 0.0f : l - x[targets[i]];
    }
}

void k_crossentropy_bwd(float *dlogits, const float *logits, const float *lse,
                        const int *targets, float scale, int BT, int V, int V_valid) {
    #pragma omp parallel for
    for (int i = 0; i < BT; i++) {
        const float *x = logits + (size_t)i * V;   // may be dlogits itself
        float *dx = dlogits + (size_t)i * V;
        int tgt = targets[i];
        if (tgt < 0) {
            for (int j = 0; j < V; j++) dx[j] = 0.0f;
            continue;
        }
        float l = lse[i];
        #pragma omp simd
        for (int j = 0; j < V_valid; j++) dx[j] = x[j] - l;
        vm_exp(dx, dx, V_valid);
        #pragma omp simd
        for (int j = 0; j < V_valid; j++) dx[j] *= scale;
        dx[tgt] -= scale;
        for (int j = V_valid; j < V; j++) dx[j] = 0.0f;
    }
}
