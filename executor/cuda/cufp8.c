/* cufp8.c — see cufp8.h. */
#include "cufp8.h"

#include "kc_fp8.h"

int cufp8_on(const CuExec *e) { return e->lo.prec == PREC_FP8; }

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
