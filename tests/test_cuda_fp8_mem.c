/* test_cuda_fp8_mem.c — the device memory an fp8 plan adds to the CUDA
 * executor, as cuexec.c carves it (pure arithmetic: runs without a GPU).
 * The fp8 kernels' scratch (kc_fp8_scratch_bytes, lent by the executor from
 * its buffers slab) and the transposed fp8 inputs each layer keeps for the
 * backward (cufp8_keep_elems, in its activation slots), the weight GEMMs'
 * shapes of the per-step fp8 weight copies. Expected values are
 * worked by hand from the layouts in kernels/cuda/fp8.cu: forward = input
 * copy + weight copy, backward = transposed input + plain and transposed
 * output gradient + transposed weight, each rounded up to 256 bytes, plus
 * 256 bytes of scales. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "cufp8.h"
#include "kc_fp8.h"

static void test_scratch_one_gemm(void **state)
{
    (void)state;
    /* 16 × 16 × 16: every copy 256 bytes. fwd 2·256, bwd 4·256, + 256 */
    assert_int_equal(kc_fp8_scratch_bytes(16, 16, 16), 1280);
    /* BT 48, C 32, OC 16: fwd 1536 + 512; bwd 1536 + 2·768 + 512 = 3584; + 256 */
    assert_int_equal(kc_fp8_scratch_bytes(48, 32, 16), 3840);
    /* GPT-3 1.3B's FC1 at mbs 8, seq 2048 (N 16384, C 2048, OC 8192):
     * bwd 32 MiB + 2·128 MiB + 16 MiB = 304 MiB, + 256 (round 1's "~320 MB") */
    assert_int_equal(kc_fp8_scratch_bytes(16384, 2048, 8192), 318767360);
}

static void test_scratch_layer(void **state)
{
    (void)state;
    /* 1.3B layer: FC1's backward is the largest (QKV, proj 100 MiB, FC2 208 MiB) */
    assert_int_equal(cufp8_scratch_bytes(16384, 2048, 2048, 8192, 8192), 318767360);
    /* SwiGLU, F1 = 2F (N 4096, C 1024, F 2816): FC1 bwd 4 MiB + 2·22 MiB + 5.5 MiB */
    assert_int_equal(cufp8_scratch_bytes(4096, 1024, 1024, 5632, 2816), 56099072);
    /* a wide attention (ql 4096 > F1): QKV's backward, 8 + 2·8 + 16 MiB for N 2048, C 4096 */
    assert_int_equal(cufp8_scratch_bytes(2048, 4096, 4096, 1024, 1024), 256 + 8388608 + 2 * 8388608 + 16777216);
}

static void test_keep(void **state)
{
    (void)state;
    size_t N = 16384, C = 2048, ql = 2048, F = 8192, sum = 0;
    for (int k = 0; k < CUFP8_NKEEP; k++)
        sum += cufp8_keep_elems(k, N, C, ql, F);
    /* N·(C + ql + C + F) bytes: 224 MiB a layer of the 1.3B model */
    assert_int_equal(sum, 234881024);
    assert_int_equal(cufp8_keep_elems(CUFP8_PROJ, 4, 8, 3, 16), 12);
    assert_int_equal(cufp8_keep_elems(CUFP8_FC2, 4, 8, 3, 16), 64);
    assert_int_equal(cufp8_keep_elems(CUFP8_NKEEP, 4, 8, 3, 16), 0);
}

/* the six weight sites of a GQA layer with SwiGLU (C 1024, ql 1024, kvl 256,
 * F1 5632, F 2816): (OC, IC) as the GEMMs take them, and their sum, the
 * bytes of one copy: 1024·(1024 + 2·256) + 1024·1024 + 5632·1024 + 1024·2816 */
static void test_weights(void **state)
{
    (void)state;
    const int want[CUFP8_NW][2] = {{1024, 1024}, {256, 1024}, {256, 1024}, {1024, 1024}, {5632, 1024}, {1024, 2816}};
    size_t sum = 0;
    for (int w = 0; w < CUFP8_NW; w++) {
        int oc = -1, ic = -1;
        cufp8_weight_shape(w, 1024, 1024, 256, 5632, 2816, &oc, &ic);
        assert_int_equal(oc, want[w][0]);
        assert_int_equal(ic, want[w][1]);
        sum += (size_t)oc * ic;
    }
    assert_int_equal(sum, 11272192);   // 1572864 + 1048576 + 5767168 + 2883584
    int oc = -1, ic = -1;
    cufp8_weight_shape(CUFP8_NW, 1024, 1024, 256, 5632, 2816, &oc, &ic);
    assert_int_equal(oc, 0);
    assert_int_equal(ic, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_scratch_one_gemm), cmocka_unit_test(test_scratch_layer),
                                       cmocka_unit_test(test_keep), cmocka_unit_test(test_weights)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
