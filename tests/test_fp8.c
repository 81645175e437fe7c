/* test_fp8.c — the CPU reference of fp8 (kernels/cpu/fp8.h) against
 * encodings worked out by hand from the formats' definitions (OCP FP8:
 * E4M3 bias 7, max 448, no infinities; E5M2 bias 15, max 57344), not from
 * the program's own output. The CUDA kernels are held against this
 * reference in test_kernels_cuda.c, byte for byte. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "fp8.h"

typedef struct { float x; uint8_t want; } Case;

static void run_cases(const Case *c, int n, Fp8Format f)
{
    for (int i = 0; i < n; i++) {
        uint8_t got = k_fp8_encode(c[i].x, f);
        if (got != c[i].want)
            print_error("%s encode(%.9g) = 0x%02X, want 0x%02X\n", f == FP8_E4M3 ? "E4M3" : "E5M2",
                        (double)c[i].x, got, c[i].want);
        assert_int_equal(got, c[i].want);
    }
}

static void test_e4m3_encode(void **state)
{
    (void)state;
    const Case c[] = {
        {1.0f, 0x38},              // 0 0111 000
        {-1.0f, 0xB8},
        {0.0f, 0x00},
        {-0.0f, 0x80},
        {448.0f, 0x7E},            // 1.75·2^8: 0 1111 110, the largest finite
        {449.0f, 0x7E},            // saturates
        {464.0f, 0x7E},            // the tie 448|480 would go to 480 (the NaN code): saturates
        {1e6f, 0x7E},
        {INFINITY, 0x7E},          // no infinities in E4M3: satfinite
        {-INFINITY, 0xFE},
        {240.0f, 0x77},            // 1.875·2^7: 0 1110 111
        {0.1f, 0x1D},              // 1.6·2^-4: mantissa 4.8/8 -> 5/8, 0 0011 101 (= 0.1015625)
        {1.0625f, 0x38},           // tie 1.0|1.125 -> even mantissa 000
        {1.1875f, 0x3A},           // tie 1.125|1.25 -> even mantissa 010
        {0.015625f, 0x08},         // 2^-6, the smallest normal: 0 0001 000
        {0.001953125f, 0x01},      // 2^-9, the smallest subnormal
        {0.0009765625f, 0x00},     // 2^-10, tie 0|2^-9 -> even 0
        {0.0029296875f, 0x02},     // 1.5·2^-9, tie 1|2 -> even 2
        {0.00244140625f, 0x01},    // 1.25·2^-9 -> 1
        {0.013671875f, 0x07},      // 7·2^-9, the largest subnormal
        {0.0146484375f, 0x08},     // 7.5·2^-9, tie 7|8 -> 8, carries into the smallest normal
        {-11.2f, 0xD3},            // -1.4·2^3: mantissa 3.2 -> 3, 1 1010 011
    };
    run_cases(c, (int)(sizeof c / sizeof c[0]), FP8_E4M3);
    uint8_t nan = k_fp8_encode(NAN, FP8_E4M3);
    assert_int_equal(nan & 0x7F, 0x7F);
}

static void test_e5m2_encode(void **state)
{
    (void)state;
    const Case c[] = {
        {1.0f, 0x3C},              // 0 01111 00
        {-2.0f, 0xC0},             // 1 10000 00
        {57344.0f, 0x7B},          // 1.75·2^15: 0 11110 11
        {60000.0f, 0x7B},          // saturates
        {INFINITY, 0x7B},          // satfinite
        {-INFINITY, 0xFB},
        {0.1f, 0x2E},              // 1.6·2^-4: mantissa 2.4/4 -> 2/4, 0 01011 10 (= 0.09375)
        {1.125f, 0x3C},            // tie 1.0|1.25 -> even mantissa 00
        {1.375f, 0x3E},            // tie 1.25|1.5 -> even mantissa 10
        {6.103515625e-05f, 0x04},  // 2^-14, the smallest normal
        {1.52587890625e-05f, 0x01},   // 2^-16, the smallest subnormal
        {7.62939453125e-06f, 0x00},   // 2^-17, tie 0|1 -> 0
        {2.288818359375e-05f, 0x02},  // 1.5·2^-16, tie 1|2 -> 2
    };
    run_cases(c, (int)(sizeof c / sizeof c[0]), FP8_E5M2);
    assert_int_equal(k_fp8_encode(NAN, FP8_E5M2) & 0x7F, 0x7F);
}

static void test_decode(void **state)
{
    (void)state;
    assert_true(k_fp8_decode(0x38, FP8_E4M3) == 1.0f);
    assert_true(k_fp8_decode(0x7E, FP8_E4M3) == 448.0f);
    assert_true(k_fp8_decode(0x1D, FP8_E4M3) == 0.1015625f);
    assert_true(k_fp8_decode(0x01, FP8_E4M3) == 0.001953125f);
    assert_true(k_fp8_decode(0xD3, FP8_E4M3) == -11.0f);
    assert_true(isnan(k_fp8_decode(0x7F, FP8_E4M3)));
    assert_true(isnan(k_fp8_decode(0xFF, FP8_E4M3)));
    assert_true(k_fp8_decode(0x78, FP8_E4M3) == 256.0f);   // exponent field 15 is finite in E4M3
    assert_true(k_fp8_decode(0x7B, FP8_E5M2) == 57344.0f);
    assert_true(k_fp8_decode(0x2E, FP8_E5M2) == 0.09375f);
    assert_true(isinf(k_fp8_decode(0x7C, FP8_E5M2)) && k_fp8_decode(0x7C, FP8_E5M2) > 0);
    assert_true(isnan(k_fp8_decode(0x7D, FP8_E5M2)));
    assert_true(k_fp8_decode(0x01, FP8_E5M2) == 1.52587890625e-05f);
    /* every finite code survives decode then encode */
    for (int f = 0; f < 2; f++)
        for (int b = 0; b < 256; b++) {
            float x = k_fp8_decode((uint8_t)b, (Fp8Format)f);
            if (!isfinite(x))
                continue;
            assert_int_equal(k_fp8_encode(x, (Fp8Format)f), b);
        }
}

static void test_quantize(void **state)
{
    (void)state;
    assert_true(k_fp8_scale(2.0f, FP8_E4M3) == 224.0f);
    assert_true(k_fp8_scale(0.0f, FP8_E4M3) == 1.0f);
    assert_true(k_fp8_scale(NAN, FP8_E5M2) == 1.0f);
    assert_true(k_fp8_scale(INFINITY, FP8_E5M2) == 1.0f);
    /* x (2, 3), amax 4: scale 112, x·scale = 112, -224, 56 / 28, 448, -11.2 */
    const float x[6] = {1.0f, -2.0f, 0.5f, 0.25f, 4.0f, -0.1f};
    const uint8_t want[6] = {0x6E, 0xF6, 0x66, 0x5E, 0x7E, 0xD3};
    const uint8_t wantT[6] = {0x6E, 0x5E, 0xF6, 0x7E, 0x66, 0xD3};
    uint8_t out[6], outT[6];
    float inv = k_fp8_quantize(out, outT, x, 2, 3, FP8_E4M3);
    assert_true(inv == 1.0f / 112.0f);
    assert_memory_equal(out, want, 6);
    assert_memory_equal(outT, wantT, 6);
    /* dequantized, each element is within half an fp8 step (2^-3 relative) */
    for (int i = 0; i < 6; i++)
        assert_true(fabsf(k_fp8_decode(out[i], FP8_E4M3) * inv - x[i]) <= fabsf(x[i]) / 16.0f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_e4m3_encode),
        cmocka_unit_test(test_e5m2_encode),
        cmocka_unit_test(test_decode),
        cmocka_unit_test(test_quantize),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
