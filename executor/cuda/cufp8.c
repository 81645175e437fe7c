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

void cufp8_weight_shape(int w, int C, int ql, int kvl, int F1, int F, int *OC, int *IC)
{
    switch (w) {
    case CUFP8_WQ: *OC = ql, *IC = C; break;
    case CUFP8_WK:
    case CUFP8_WV: *OC = kvl, *IC = C; break;
    case CUFP8_WPROJ: *OC = C, *IC = ql; break;
    case CUFP8_WFC1: *OC = F1, *IC = C; break;
    case CUFP8_WFC2: *OC = C, *IC = F; break;
    default: *OC = *IC = 0;
    }
}

/* local layer li's copies of weight site `site`, cast now when this step
 * has not yet (the weights change only between steps); NULL when not carved */
static const KcFp8Weight *weight(const CuExec *e, int li, int site, const kc_bf16 *w, int OC, int C)
{
    if (!e->f8w || li < 0)
        return NULL;
    size_t i = (size_t)li * CUFP8_NW + site;
    if (!e->f8w[i].w8)
        return NULL;
    if (e->f8w_gen[i] != e->f8_gen) {
        kc_fp8_cast_weight(&e->f8w[i], w, OC, C, e->st);
        e->f8w_gen[i] = e->f8_gen;
    }
    return &e->f8w[i];
}

void cufp8_matmul_fwd_keep(const CuExec *e, CuActs *A, int k, int li, int site, int again, kc_bf16 *out,
                           const kc_bf16 *inp, const kc_bf16 *w, const kc_bf16 *bias, int BT, int C, int OC)
{
    if (!cufp8_on(e)) {
        kc_matmul_fwd(out, inp, w, bias, BT, C, OC, e->st);
        return;
    }
    kc_fp8 *kt = k >= 0 ? A->f8[k] : NULL;
    kc_fp8_matmul_fwd_cached(out, inp, w, weight(e, li, site, w, OC, C), bias, BT, C, OC, again, kt,
                             kt ? A->f8s + k : NULL, e->st);
}

void cufp8_matmul_bwd_kept(const CuExec *e, const CuActs *A, int k, int li, int site, int again, kc_bf16 *dinp,
                           float *dw, float *dbias, const kc_bf16 *dout, const kc_bf16 *inp, const kc_bf16 *w,
                           int BT, int C, int OC)
{
    if (!cufp8_on(e)) {
        kc_matmul_bwd(dinp, dw, dbias, dout, inp, w, BT, C, OC, e->st);
        return;
    }
    const kc_fp8 *kt = k >= 0 ? A->f8[k] : NULL;
    kc_fp8_matmul_bwd_cached(dinp, dw, dbias, dout, kt, kt ? A->f8s + k : NULL, inp, w,
                             weight(e, li, site, w, OC, C), BT, C, OC, again, e->st);
}
