/* vmath.c — see vmath.h. Cephes' expf: x = k·ln2 + r, |r| ≤ ln2/2, a degree-6
 * polynomial in r, then 2^k built in the exponent bits. Branch-free, so the
 * loop vectorises at the baseline ISA. */
#include "vmath.h"

#include <stdint.h>
#include <string.h>

void vm_exp(float *y, const float *x, int n)
{
    /* the clamp is its own pass: inside the loop below GCC threads its two
     * compares into branches and then gives up vectorising */
    #pragma omp simd
    for (int i = 0; i < n; i++) {
        float v = x[i] > -87.0f ? x[i] : -87.0f;
        y[i] = v < 88.0f ? v : 88.0f;
    }
    #pragma omp simd
    for (int i = 0; i < n; i++) {
        float v = y[i];
        /* k = round(v / ln2) by the 1.5·2^23 trick (exact, no rounding-mode call) */
        float k = (v * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
        float r = v - k * 0.693359375f + k * 2.12194440e-4f;   // ln2 split in two for accuracy
        float p = 1.9875691500e-4f;
        p = p * r + 1.3981999507e-3f;
        p = p * r + 8.3334519073e-3f;
        p = p * r + 4.1665795894e-2f;
        p = p * r + 1.6666665459e-1f;
        p = p * r + 5.0000001201e-1f;
        float e = p * r * r + r + 1.0f;
        int32_t bits = ((int32_t)k + 127) * (1 << 23);
        float s;
        memcpy(&s, &bits, sizeof s);
        y[i] = e * s;
    }
}
