/* fp8.h — the two 8-bit floating-point formats of fp8 training (OCP FP8,
 * as Hopper's tensor cores and cuda_fp8.h implement them) and the
 * per-tensor current-scaling quantizer, in plain C: the reference the CUDA
 * kernels (kernels/cuda/fp8.cu) are held against byte for byte.
 *
 *   E4M3: 1 sign, 4 exponent (bias 7), 3 mantissa bits; no infinities,
 *         S.1111.111 is NaN, largest finite 448 (0x7E), smallest normal
 *         2^-6, smallest subnormal 2^-9.
 *   E5M2: 1 sign, 5 exponent (bias 15), 2 mantissa bits; IEEE-like, with
 *         infinities (0x7C) and NaNs (0x7D-0x7F), largest finite 57344
 *         (0x7B), smallest normal 2^-14, smallest subnormal 2^-16.
 *
 * Encoding rounds to nearest, ties to even, and saturates: anything whose
 * magnitude rounds past the largest finite value (infinities included)
 * becomes ±max (cuda_fp8.h's __NV_SATFINITE); NaN becomes 0x7F (sign
 * kept: 0xFF for a negative NaN).
 *
 * Current scaling (Transformer Engine's per-tensor recipe on Hopper): a
 * tensor's scale is fmax / amax computed from this very tensor just before
 * the cast (amax 0 or not finite: scale 1), each element is encoded from
 * x·scale, and the GEMM multiplies its fp32 result by the two operands'
 * 1/scale. The scale is a float, rounded once (fp32 division). */
#ifndef ULTRAPLAN_KERNELS_CPU_FP8_H
#define ULTRAPLAN_KERNELS_CPU_FP8_H

#include <stddef.h>
#include <stdint.h>

typedef enum { FP8_E4M3 = 0, FP8_E5M2 = 1 } Fp8Format;

#define FP8_E4M3_MAX 448.0f
#define FP8_E5M2_MAX 57344.0f

float k_fp8_max(Fp8Format f);
/* one float to its fp8 byte (round to nearest even, saturating) */
uint8_t k_fp8_encode(float x, Fp8Format f);
/* one fp8 byte to the float it stands for (exact) */
float k_fp8_decode(uint8_t b, Fp8Format f);
/* the per-tensor scale for a tensor of this amax: fmax / amax, 1 when amax
 * is 0, negative or not finite */
float k_fp8_scale(float amax, Fp8Format f);
/* max |x_i| over n floats, NaNs skipped */
float k_fp8_amax(const float *x, size_t n);
/* out (n) = encode(x·scale) with scale = k_fp8_scale(amax of x); returns
 * 1/scale, the factor the GEMM applies (the "scale_inv"). out nullable;
 * outT (C, R), nullable, the same bytes transposed, x being (R, C). */
float k_fp8_quantize(uint8_t *out, uint8_t *outT, const float *x, int R, int C, Fp8Format f);

#endif
