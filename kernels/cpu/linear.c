/* linear.c — matmul (OpenBLAS), embeddings and the residual add. */
#include <cblas.h>
#include "kernels.h"

void k_matmul_fwd(float *out, const float *inp, const float *w, const float *bias,
                  int BT, int C, int OC) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, BT, OC, C,
                1.0f, inp, C, w, C, 0.0f, out, OC);
    if (bias == NULL) return;
    #pragma omp parallel for
    for (int i = 0; i < BT; i++) {
        float *row = out + (size_t)i * OC;
        for (int o = 0; o < OC; o++) row[o] += bias[o];
    }
}

/* column sums of dout (BT, OC) into dbias, in blocks of columns so that each
 * thread owns its columns and reads rows contiguously */
static void bias_grad(float *dbias, const float *dout, int BT, int OC) {
    enum { BLK = 64 };
    int nblk = (OC + BLK - 1) / BLK;
    #pragma omp parallel for
    for (int bk = 0; bk < nblk; bk++) {
        int o0 = bk * BLK, o1 = o0 + BLK < OC ? o0 + BLK : OC;
        float acc[BLK] = {0};
        for (int i = 0; i < BT; i++) {
            const float *row = dout + (size_t)i * OC;
            for (int o = o0; o < o1; o++) acc[o - o0] += row[o];
        }
        for (int o = o0; o < o1; o++) dbias[o] += acc[o - o0];
    }
}

void k_matmul_bwd(float *dinp, float *dw, float *dbias,
                  const float *dout, const float *inp, const float *w,
                  int BT, int C, int OC) {
    if (dinp)  // (BT, OC) · (OC, C)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, BT, C, OC,
                    1.0f, dout, OC, w, C, 1.0f, dinp, C);
    if (dw)    // (OC, BT) · (BT, C)
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, OC, C, BT,
                    1.0f, dout, OC, inp, C, 1.0f, dw, C);
    if (dbias) bias_grad(dbias, dout, BT, OC);
}

void k_embedding_fwd(float *out, const int *tokens, const float *wte,
                     const float *wpe, int B, int T, int C, int pos0) {
    #pragma omp parallel for collapse(2)
    for (int b = 0; b < B; b++) {
        for (int t = 0; t < T; t++) {
            float *o = out + ((size_t)b * T + t) * C;
            const float *e = wte + (size_t)tokens[b * T + t] * C;
            if (wpe) {
                const float *p = wpe + (size_t)(pos0 + t) * C;
                for (int c = 0; c < C; c++) o[c] = e[c] + p[c];
            } else {
                for (int c = 0; c < C; c++) o[c] = e[c];
            }
        }
    }
}

/* many positions scatter into the same wte row: split the work by channel
 * blocks instead of by token so no two threads touch the same float */
void k_embedding_bwd(float *dwte, float *dwpe, const float *dout,
                     const int *tokens, int B, int T, int C, int pos0) {
    enum { BLK = 64 };
    int nblk = (C + BLK - 1) / BLK;
    #pragma omp parallel for
    for (int bk = 0; bk < nblk; bk++) {
        int c0 = bk * BLK, c1 = c0 + BLK < C ? c0 + BLK : C;
        for (int b = 0; b < B; b++) {
            for (int t = 0; t < T; t++) {
                const float *d = dout + ((size_t)b * T + t) * C;
                if (dwte) {
                    float *g = dwte + (size_t)tokens[b * T + t] * C;
                    for (int c = c0; c < c1; c++) g[c] += d[c];
                }
                if (dwpe) {
                    float *g = dwpe + (size_t)(pos0 + t) * C;
                    for (int c = c0; c < c1; c++) g[c] += d[c];
                }
            }
        }
    }
}

void k_residual_fwd(float *out, const float *a, const float *b, size_t N) {
    #pragma omp parallel for
    for (size_t i = 0; i < N; i++) out[i] = a[i] + b[i];
}

void k_residual_bwd(float *da, float *db, const float *dout, size_t N) {
    #pragma omp parallel for
    for (size_t i = 0; i < N; i++) {
        if (da) da[i] += dout[i];
        if (db) db[i] += dout[i];
    }
}
