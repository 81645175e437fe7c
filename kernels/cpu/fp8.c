/* fp8.c — E4M3/E5M2 encoding and the current-scaling quantizer (fp8.h).
 * Encoding works on the float's bits: no arithmetic that could round
 * twice. */
#include <math.h>
#include <string.h>

#include "fp8.h"

typedef struct {
    int mbits;      // mantissa bits
    int bias;       // exponent bias
    int emin;       // exponent of the smallest normal (1 - bias)
    uint8_t maxb;   // byte of the largest finite magnitude
    float max;
} Fp8Desc;

static const Fp8Desc desc[2] = {
    [FP8_E4M3] = {3, 7, -6, 0x7E, FP8_E4M3_MAX},
    [FP8_E5M2] = {2, 15, -14, 0x7B, FP8_E5M2_MAX},
};

float k_fp8_max(Fp8Format f) { return desc[f].max; }

uint8_t k_fp8_encode(float x, Fp8Format f)
{
    const Fp8Desc *d = &desc[f];
    uint32_t u;
    memcpy(&u, &x, 4);
    uint8_t sign = (uint8_t)((u >> 24) & 0x80);
    if (isnan(x))
        return sign | 0x7F;
    float a = fabsf(x);
    if (!(a < d->max))   // includes infinity; exactly max encodes below too
        return sign | d->maxb;
    if (a == 0.0f)
        return sign;   // frexpf(0) says exponent 0: not a binade to round in
    /* a = m · 2^e with m in [1, 2) for normals of the fp8 format; below the
     * smallest normal, count in units of the smallest subnormal. The value
     * in units of the spacing at a's binade is an integer plus a fraction:
     * round that to nearest even. */
    int e;
    (void)frexpf(a, &e);   // a = fr · 2^e, fr in [0.5, 1)
    e -= 1;                // a = m · 2^e, m in [1, 2)
    if (e < d->emin)
        e = d->emin;       // subnormal: the spacing of the smallest binade
    float ulp = ldexpf(1.0f, e - d->mbits);
    float q = a / ulp;     // exact: a power-of-two division
    float fl = floorf(q), rem = q - fl;
    uint32_t n = (uint32_t)fl;
    if (rem > 0.5f || (rem == 0.5f && (n & 1u)))
        n++;
    /* n counts ulps from zero at spacing 2^(e - mbits): for a normal binade
     * n in [2^mbits, 2^(mbits+1)]; a carry to 2^(mbits+1) moves up a binade,
     * which the bit layout below absorbs (the mantissa field overflows into
     * the exponent). */
    uint32_t code;
    if (e == d->emin && n < (1u << d->mbits))
        code = n;   // subnormal (or zero): exponent field 0
    else
        code = ((uint32_t)(e - d->emin + 1) << d->mbits) + (n - (1u << d->mbits));
    if (code > d->maxb)   // rounded up past the largest finite value
        code = d->maxb;
    return sign | (uint8_t)code;
}

float k_fp8_decode(uint8_t b, Fp8Format f)
{
    const Fp8Desc *d = &desc[f];
    float s = (b & 0x80) ? -1.0f : 1.0f;
    uint32_t mag = b & 0x7F;
    uint32_t ef = mag >> d->mbits, mf = mag & ((1u << d->mbits) - 1);
    if (f == FP8_E4M3 && mag == 0x7F)
        return NAN;
    if (f == FP8_E5M2 && ef == 0x1F)
        return mf ? NAN : s * INFINITY;
    if (ef == 0)
        return s * ldexpf((float)mf, d->emin - d->mbits);
    return s * ldexpf((float)((1u << d->mbits) + mf), (int)ef - d->bias - d->mbits);
}

float k_fp8_scale(float amax, Fp8Format f)
{
    if (!(amax > 0.0f) || !isfinite(amax))
        return 1.0f;
    float s = desc[f].max / amax;
    return isfinite(s) ? s : 1.0f;
}

float k_fp8_amax(const float *x, size_t n)
{
    float m = 0.0f;
    for (size_t i = 0; i < n; i++) {
        float a = fabsf(x[i]);
        if (a > m)
            m = a;
    }
    return m;
}

float k_fp8_quantize(uint8_t *out, uint8_t *outT, const float *x, int R, int C, Fp8Format f)
{
    float scale = k_fp8_scale(k_fp8_amax(x, (size_t)R * C), f);
    for (int r = 0; r < R; r++)
        for (int c = 0; c < C; c++) {
            uint8_t b = k_fp8_encode(x[(size_t)r * C + c] * scale, f);
            if (out)
                out[(size_t)r * C + c] = b;
            if (outT)
                outT[(size_t)c * R + r] = b;
        }
    return 1.0f / scale;
}
