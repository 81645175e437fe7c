/* cufp8.c — see cufp8.h. */
#include "cufp8.h"

#include "kc_fp8.h"

#include <stdlib.h>
#include <string.h>

int cufp8_on(const CuExec *e) { return e->lo.prec == PREC_FP8; }

int cufp8_keep_on(const CuExec *e)
{
    if (!cufp8_on(e))
        return 0;
    const char *v = getenv("ULTRAPLAN_FP8_KEEP");
    if (!v || !*v || !strcmp(v, "1"))
        return 1;
    if (!strcmp(v, "0"))
        return 0;
    kc_fail("ULTRAPLAN_FP8_KEEP", "expected 1 (the default: keep the forward's fp8 inputs) or 0 (cast again)",
            __FILE__, __LINE__);
    return 0;
}

void cufp8_matmul_fwd(const CuExec *e, kc_bf16 *out, const kc_bf16 *inp, const kc_bf16 *w, const kc_bf16 *bias,
                      int BT, int C, int OC)
{
    if (cufp8_on(e))
        kc_fp8_matmul_fwd(out, inp, w, bias, BT, C, OC, e->st);
    else
        kc_matmul_fwd(out, inp, w, bias, BT, C, OC, e->st);
}

void cufp8_matmul_bwd(const CuExec *e, kc_bf16 *dinp, float *dw, float *dbias, const kc_bf16 *dout,
                      const kc_bf16 *inp, const kc_bf16 *w, int BT, int C, int OC)
{
    if (cufp8_on(e))
        kc_fp8_matmul_bwd(dinp, dw, dbias, dout, inp, w, BT, C, OC, e->st);
    else
        kc_matmul_bwd(dinp, dw, dbias, dout, inp, w, BT, C, OC, e->st);
}

void cufp8_matmul_fwd_again(const CuExec *e, kc_bf16 *out, const kc_bf16 *inp, const kc_bf16 *w,
                            const kc_bf16 *bias, int BT, int C, int OC)
{
    if (cufp8_on(e))
        kc_fp8_matmul_fwd_again(out, inp, w, bias, BT, C, OC, e->st);
    else
        kc_matmul_fwd(out, inp, w, bias, BT, C, OC, e->st);
}

void cufp8_matmul_bwd_again(const CuExec *e, kc_bf16 *dinp, float *dw, float *dbias, const kc_bf16 *dout,
                            const kc_bf16 *inp, const kc_bf16 *w, int BT, int C, int OC)
{
    if (cufp8_on(e))
        kc_fp8_matmul_bwd_again(dinp, dw, dbias, dout, inp, w, BT, C, OC, e->st);
    else
        kc_matmul_bwd(dinp, dw, dbias, dout, inp, w, BT, C, OC, e->st);
}

size_t cufp8_keep_elems(int k, size_t N, size_t C, size_t ql, size_t F)
{
    switch (k) {
    case CUFP8_QKV:
    case CUFP8_FC1: return N * C;
    case CUFP8_PROJ: return N * ql;
    case CUFP8_FC2: return N * F;
    default: return 0;
    }
}

size_t cufp8_scratch_bytes(size_t N, size_t C, size_t ql, size_t F1, size_t F)
{
    const size_t sh[4][3] = {{N, C, ql}, {N, ql, C}, {N, C, F1}, {N, F, C}};   // (BT, C, OC) of each GEMM
    size_t m = 0;
    for (int i = 0; i < 4; i++) {
        size_t b = kc_fp8_scratch_bytes((int)sh[i][0], (int)sh[i][1], (int)sh[i][2]);
        m = b > m ? b : m;
    }
    return m;
}

void cufp8_matmul_fwd_keep(const CuExec *e, CuActs *A, int k, kc_bf16 *out, const kc_bf16 *inp, const kc_bf16 *w,
                           const kc_bf16 *bias, int BT, int C, int OC)
{
    if (cufp8_on(e) && A->f8[k])
        kc_fp8_matmul_fwd_keep(out, inp, w, bias, BT, C, OC, A->f8[k], A->f8s + k, e->st);
    else
        cufp8_matmul_fwd(e, out, inp, w, bias, BT, C, OC);
}

void cufp8_matmul_bwd_kept(const CuExec *e, const CuActs *A, int k, int again, kc_bf16 *dinp, float *dw,
                           float *dbias, const kc_bf16 *dout, const kc_bf16 *inp, const kc_bf16 *w, int BT, int C,
                           int OC)
{
    if (cufp8_on(e) && A->f8[k])
        kc_fp8_matmul_bwd_kept(dinp, dw, dbias, dout, A->f8[k], A->f8s + k, inp, w, BT, C, OC, e->st);
    else if (again)
        cufp8_matmul_bwd_again(e, dinp, dw, dbias, dout, inp, w, BT, C, OC);
    else
        cufp8_matmul_bwd(e, dinp, dw, dbias, dout, inp, w, BT, C, OC);
}
