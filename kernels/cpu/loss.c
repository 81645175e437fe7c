/* loss.c — fused softmax + cross-entropy with a masked vocabulary tail. */
#include <math.h>
#include "kernels.h"

void k_crossentropy_fwd(float *losses, float *lse, const float *logits,
                        const int *targets, int BT, int V, int V_valid) {
    #pragma omp parallel for
    for (int i = 0; i < BT; i++) {
        const float *x = logits + (size_t)i * V;
        float mx = -INFINITY;
        for (int j = 0; j < V_valid; j++) if (x[j] > mx) mx = x[j];
        double sum = 0.0;
        for (int j = 0; j < V_valid; j++) sum += expf(x[j] - mx);
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
        for (int j = 0; j < V_valid; j++)
            dx[j] = (expf(x[j] - l) - (j == tgt ? 1.0f : 0.0f)) * scale;
        for (int j = V_valid; j < V; j++) dx[j] = 0.0f;
    }
}
