/* rope.c — rotary position embedding, "rotate half" (Llama, GPT-NeoX).
 * One routine serves both directions: the backward is the rotation by −angle
 * added into dinp. cos/sin are computed once per (b, t) in double and shared
 * by the NH heads. Positions are pos0 + t, or a given list (context parallel). */
#include <math.h>
#include <stdlib.h>
#include "kernels.h"

/* token t is at pos[t], or pos0 + t when pos is NULL */
static void rope(float *out, const float *inp, int B, int T, int NH, int HS,
                 int pos0, const int *pos, float theta, float sign, int accumulate) {
    int half = HS / 2;
    double *inv_freq = malloc(sizeof(double) * (size_t)(half > 0 ? half : 1));
    for (int i = 0; i < half; i++) inv_freq[i] = pow(theta, -2.0 * i / HS);
    #pragma omp parallel
    {
        float *cs = malloc(sizeof(float) * 2 * (size_t)(half > 0 ? half : 1));
        float *sn = cs + half;
        #pragma omp for collapse(2)
        for (int b = 0; b < B; b++) {
            for (int t = 0; t < T; t++) {
                for (int i = 0; i < half; i++) {
                    double ang = (double)(pos ? pos[t] : pos0 + t) * inv_freq[i];
                    cs[i] = (float)cos(ang);
                    sn[i] = sign * (float)sin(ang);
                }
                for (int h = 0; h < NH; h++) {
                    size_t off = (((size_t)b * T + t) * NH + h) * HS;
                    const float *x = inp + off;
                    float *y = out + off;
                    for (int i = 0; i < half; i++) {
                        float x1 = x[i], x2 = x[i + half];
                        float y1 = x1 * cs[i] - x2 * sn[i];
                        float y2 = x2 * cs[i] + x1 * sn[i];
                        if (accumulate) { y[i] += y1; y[i + half] += y2; }
                        else            { y[i] = y1;  y[i + half] = y2; }
                    }
                }
            }
        }
        free(cs);
    }
    free(inv_freq);
}

void k_rope_fwd(float *out, const float *inp, int B, int T, int NH, int HS,
                int pos0, float theta) {
    rope(out, inp, B, T, NH, HS, pos0, NULL, theta, 1.0f, 0);
}

void k_rope_bwd(float *dinp, const float *dout, int B, int T, int NH, int HS,
                int pos0, float theta) {
    rope(dinp, dout, B, T, NH, HS, pos0, NULL, theta, -1.0f, 1);
}

void k_rope_pos_fwd(float *out, const float *inp, const int *pos, int B, int T, int NH,
                    int HS, float theta) {
    rope(out, inp, B, T, NH, HS, 0, pos, theta, 1.0f, 0);
}

void k_rope_pos_bwd(float *dinp, const float *dout, const int *pos, int B, int T, int NH,
                    int HS, float theta) {
    rope(dinp, dout, B, T, NH, HS, 0, pos, theta, -1.0f, 1);
}
