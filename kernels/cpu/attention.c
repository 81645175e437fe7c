/* attention.c — causal grouped-query self-attention, FlashAttention-style:
 * the forward keeps only the log-sum-exp of each score row, the backward
 * recomputes the probabilities p = exp(s − lse).
 *
 * Work goes in tiles of ATT_BQ queries against the keys 0..t1 they can see,
 * so the masked upper triangle is skipped (but for the diagonal tile) and
 * every product is one BLAS GEMM on strided rows of q, k, v: the scalar
 * dot-product loops this replaced ran at a tenth of GEMM speed.
 *
 * Forward is parallel over (b, query head). Backward is parallel over
 * (b, kv head): the query heads of a group all add into the same dk, dv, so
 * one thread owns the whole group. Each thread has its own score tiles.
 *
 * For context parallel, the block kernels run the same tiles for queries
 * against one block of keys of a longer sequence, the causal mask taken from
 * the tokens' global positions (each a non-decreasing list, so the keys a
 * query sees are a prefix of the block); k_attention_merge combines two
 * partial results by their log-sum-exp. The ring itself is executor/cpattn.c. */
#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include "kernels.h"
#include "vmath.h"

enum { ATT_BQ = 64 };   // queries per tile

static void tile_exp_band(float *s, int ld, int nq, int t1, const int *first, const int *nv, float *lse_out,
                          const float *lse_in);
static void tile_exp_win(float *s, int ld, int t0, int nq, int k0, int W, float *lse_out, const float *lse_in);

/* The GEMMs inside the parallel loops must not start BLAS threads of their
 * own: OpenBLAS's (pthread) pool serves one caller at a time, so OpenMP
 * threads that each call a threaded GEMM queue and spin behind each other
 * (a step 3x slower at 2 threads). One BLAS thread inside, restored after. */
static int blas_single_begin(void)
{
    int n = openblas_get_num_threads();
    if (n > 1)
        openblas_set_num_threads(1);
    return n;
}

static void blas_single_end(int n)
{
    if (n > 1)
        openblas_set_num_threads(n);
}

/* The gradients of one tile of nq queries against t1 keys, given its
 * probabilities p and dp = dy·vᵀ (rows of stride ld): dp becomes
 * ds = p·(dp − D)·scale with D = dy·o per row, then dq += ds·k,
 * dk += dsᵀ·q, dv += pᵀ·dy. The full and the block backward share it. */
static void tile_grads(const float *p, float *dp, int ld, int nq, int t1, int HS, float scale, const float *qt,
                       const float *ot, const float *dyt, int qs, const float *kb, int ks, float *dqt, float *dkb,
                       float *dvb)
{
    for (int i = 0; i < nq; i++) {
        const float *dyi = dyt + (size_t)i * qs, *oi = ot + (size_t)i * qs;
        float D = 0.0f;
        #pragma omp simd reduction(+:D)
        for (int d = 0; d < HS; d++)
            D += dyi[d] * oi[d];
        const float *pi = p + (size_t)i * ld;
        float *dpi = dp + (size_t)i * ld;
        #pragma omp simd
        for (int j = 0; j < t1; j++)
            dpi[j] = pi[j] * (dpi[j] - D) * scale;
    }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, nq, HS, t1, 1.0f, dp, ld, kb, ks, 1.0f, dqt, qs);
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, t1, HS, nq, 1.0f, dp, ld, qt, qs, 1.0f, dkb, ks);
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, t1, HS, nq, 1.0f, p, ld, dyt, qs, 1.0f, dvb, ks);
}

/* The full kernels, with an optional sliding window: W > 0 lets query t see
 * keys t−W..t only (Megatron's window_size (W, 0)), and each tile starts at
 * key k0 = t0 − W, so a narrow band costs a band of work; W = 0 is causal. */
static void attn_fwd(float *out, float *lse, const float *q, const float *k, const float *v, int B, int T, int NH,
                     int NKV, int HS, int W)
{
    int rep = NH / NKV;
    float scale = 1.0f / sqrtf((float)HS);
    int qs = NH * HS, ks = NKV * HS;   // row strides over t
    int blas_threads = blas_single_begin();
    #pragma omp parallel
    {
        float *s = malloc(sizeof(float) * (size_t)ATT_BQ * T);
        #pragma omp for collapse(2)
        for (int b = 0; b < B; b++) {
            for (int h = 0; h < NH; h++) {
                const float *kb = k + (size_t)b * T * ks + (size_t)(h / rep) * HS;
                const float *vb = v + (size_t)b * T * ks + (size_t)(h / rep) * HS;
                for (int t0 = 0; t0 < T; t0 += ATT_BQ) {
                    int nq = T - t0 < ATT_BQ ? T - t0 : ATT_BQ, t1 = t0 + nq;
                    int k0 = W > 0 && t0 > W ? t0 - W : 0, n1 = t1 - k0;
                    const float *qt = q + ((size_t)b * T + t0) * qs + (size_t)h * HS;
                    float *ot = out + ((size_t)b * T + t0) * qs + (size_t)h * HS;
                    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, nq, n1, HS,
                                scale, qt, qs, kb + (size_t)k0 * ks, ks, 0.0f, s, T);
                    tile_exp_win(s, T, t0, nq, k0, W, lse + ((size_t)b * NH + h) * T + t0, NULL);
                    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, nq, HS, n1,
                                1.0f, s, T, vb + (size_t)k0 * ks, ks, 0.0f, ot, qs);
                }
            }
        }
        free(s);
    }
    blas_single_end(blas_threads);
}

static void attn_bwd(float *dq, float *dk, float *dv, const float *dout, const float *q, const float *k,
                     const float *v, const float *out, const float *lse, int B, int T, int NH, int NKV, int HS, int W)
{
    int rep = NH / NKV;
    float scale = 1.0f / sqrtf((float)HS);
    int qs = NH * HS, ks = NKV * HS;
    int blas_threads = blas_single_begin();
    #pragma omp parallel
    {
        float *p = malloc(sizeof(float) * (size_t)ATT_BQ * T);
        float *dp = malloc(sizeof(float) * (size_t)ATT_BQ * T);
        #pragma omp for collapse(2)
        for (int b = 0; b < B; b++) {
            for (int g = 0; g < NKV; g++) {
                size_t kvoff = (size_t)b * T * ks + (size_t)g * HS;
                const float *kb = k + kvoff, *vb = v + kvoff;
                float *dkb = dk + kvoff, *dvb = dv + kvoff;
                for (int h = g * rep; h < (g + 1) * rep; h++) {
                    for (int t0 = 0; t0 < T; t0 += ATT_BQ) {
                        int nq = T - t0 < ATT_BQ ? T - t0 : ATT_BQ, t1 = t0 + nq;
                        int k0 = W > 0 && t0 > W ? t0 - W : 0, n1 = t1 - k0;
                        size_t qoff = ((size_t)b * T + t0) * qs + (size_t)h * HS, k0off = (size_t)k0 * ks;
                        const float *qt = q + qoff, *ot = out + qoff, *dyt = dout + qoff;
                        /* p = exp(scale·q kᵀ − lse); dp = dy vᵀ */
                        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, nq, n1, HS,
                                    scale, qt, qs, kb + k0off, ks, 0.0f, p, T);
                        tile_exp_win(p, T, t0, nq, k0, W, NULL, lse + ((size_t)b * NH + h) * T + t0);
                        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, nq, n1, HS,
                                    1.0f, dyt, qs, vb + k0off, ks, 0.0f, dp, T);
                        /* ds = p·(dp − Σ_j p_j dp_j)·scale, and Σ_j p_j dp_j = dy·o */
                        tile_grads(p, dp, T, nq, n1, HS, scale, qt, ot, dyt, qs, kb + k0off, ks, dq + qoff,
                                   dkb + k0off, dvb + k0off);
                    }
                }
            }
        }
        free(p);
        free(dp);
    }
    blas_single_end(blas_threads);
}

void k_attention_fwd(float *out, float *lse, const float *q, const float *k,
                     const float *v, int B, int T, int NH, int NKV, int HS) {
    attn_fwd(out, lse, q, k, v, B, T, NH, NKV, HS, 0);
}

void k_attention_bwd(float *dq, float *dk, float *dv, const float *dout,
                     const float *q, const float *k, const float *v,
                     const float *out, const float *lse,
                     int B, int T, int NH, int NKV, int HS) {
    attn_bwd(dq, dk, dv, dout, q, k, v, out, lse, B, T, NH, NKV, HS, 0);
}

void k_attention_window_fwd(float *out, float *lse, const float *q, const float *k, const float *v, int B, int T,
                            int NH, int NKV, int HS, int W)
{
    attn_fwd(out, lse, q, k, v, B, T, NH, NKV, HS, W > 0 ? W : 0);
}

void k_attention_window_bwd(float *dq, float *dk, float *dv, const float *dout, const float *q, const float *k,
                            const float *v, const float *out, const float *lse, int B, int T, int NH, int NKV,
                            int HS, int W)
{
    attn_bwd(dq, dk, dv, dout, q, k, v, out, lse, B, T, NH, NKV, HS, W > 0 ? W : 0);
}

/* ---- attention sinks (GPT-OSS) ------------------------------------------ */

/* A sink is one more logit per head in every row's softmax, with no value:
 * lse' = logaddexp(lse, sink_h) and out' = out·e^(lse − lse'). The
 * backward's p = exp(s − lse') then already carries the sink's share. */
void k_attention_sink_fwd(float *out, float *lse, const float *sink, int B, int T, int NH, int HS)
{
    #pragma omp parallel for collapse(2)
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++)
            for (int t = 0; t < T; t++) {
                float *l = lse + ((size_t)b * NH + h) * T + t;
                float m = fmaxf(*l, sink[h]);
                float tot = m + logf(expf(*l - m) + expf(sink[h] - m));
                float f = expf(*l - tot);
                float *o = out + (((size_t)b * T + t) * NH + h) * HS;
                for (int d = 0; d < HS; d++)
                    o[d] *= f;
                *l = tot;
            }
}

/* d sink_h = Σ_rows p_sink·(0 − dout·out) with p_sink = e^(sink_h − lse'):
 * the sink's column of ds, whose value is zero. Accumulates into dsink. */
void k_attention_sink_bwd(float *dsink, const float *dout, const float *out, const float *lse, const float *sink,
                          int B, int T, int NH, int HS)
{
    for (int h = 0; h < NH; h++) {
        double acc = 0;
        for (int b = 0; b < B; b++)
            for (int t = 0; t < T; t++) {
                size_t r = (((size_t)b * T + t) * NH + h) * HS;
                double D = 0;
                for (int d = 0; d < HS; d++)
                    D += (double)dout[r + d] * out[r + d];
                acc -= exp((double)sink[h] - lse[((size_t)b * NH + h) * T + t]) * D;
            }
        dsink[h] += (float)acc;
    }
}

/* ---- one K/V block of a longer sequence (context parallel) --------------- */

/* Keys of kpos (Tk, non-decreasing) at or before position qp: a prefix. */
static int keys_seen(const int *kpos, int Tk, int qp)
{
    int lo = 0, hi = Tk;
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        if (kpos[mid] <= qp)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* tile_exp with nv[i] keys seen by row i (0 allowed): a row that sees no
 * key is all zeros and, in the forward, gets lse −∞. */
static void tile_exp_nv(float *s, int ld, int nq, int t1, const int *nv, float *lse_out, const float *lse_in)
{
    tile_exp_band(s, ld, nq, t1, NULL, nv, lse_out, lse_in);
}

/* tile_exp_nv over the keys first[i]..nv[i]−1 of row i (first NULL: from 0),
 * the keys before first[i] zeroed too: a sliding window's band. */
static void tile_exp_band(float *s, int ld, int nq, int t1, const int *first, const int *nv, float *lse_out,
                          const float *lse_in)
{
    for (int i = 0; i < nq; i++) {
        float *r = s + (size_t)i * ld;
        int f = first ? first[i] : 0, n = nv[i] - f, tr = t1 - f;
        for (int j = 0; j < f; j++)
            r[j] = 0.0f;
        r += f;
        if (n == 0) {
            for (int j = 0; j < tr; j++)
                r[j] = 0.0f;
            if (lse_out)
                lse_out[i] = -INFINITY;
            continue;
        }
        float m;
        if (lse_in) {
            m = lse_in[i];
        } else {
            m = -INFINITY;
            #pragma omp simd reduction(max:m)
            for (int j = 0; j < n; j++)
                m = r[j] > m ? r[j] : m;
        }
        #pragma omp simd
        for (int j = 0; j < n; j++)
            r[j] -= m;
        vm_exp(r, r, n);
        for (int j = n; j < tr; j++)
            r[j] = 0.0f;
        if (lse_out) {
            float sum = 0.0f;
            #pragma omp simd reduction(+:sum)
            for (int j = 0; j < n; j++)
                sum += r[j];
            float inv = 1.0f / sum;
            #pragma omp simd
            for (int j = 0; j < n; j++)
                r[j] *= inv;
            lse_out[i] = m + logf(sum);
        }
    }
}

/* The tile of the full kernels: row i holds the scaled scores of query t0+i
 * against keys k0..t0+nq−1 and sees keys max(0, t0+i−W)..t0+i (W 0: from 0,
 * the causal mask), columns max(0, t0+i−W)−k0 .. t0+i−k0 (tile_exp_band;
 * nq ≤ ATT_BQ). */
static void tile_exp_win(float *s, int ld, int t0, int nq, int k0, int W, float *lse_out, const float *lse_in)
{
    int nv[ATT_BQ], first[ATT_BQ];
    for (int i = 0; i < nq; i++) {
        int lo = W > 0 && t0 + i > W ? t0 + i - W : 0;
        first[i] = lo - k0;
        nv[i] = t0 + i + 1 - k0;
    }
    tile_exp_band(s, ld, nq, t0 + nq - k0, first, nv, lse_out, lse_in);
}

void k_attention_block_fwd(float *out, float *lse, const float *q, const float *k, const float *v,
                           const int *qpos, const int *kpos, int B, int Tq, int Tk, int NH, int NKV,
                           int HS)
{
    int rep = NH / NKV;
    float scale = 1.0f / sqrtf((float)HS);
    int qs = NH * HS, ks = NKV * HS;
    int blas_threads = blas_single_begin();
    #pragma omp parallel
    {
        float *s = malloc(sizeof(float) * (size_t)ATT_BQ * (Tk > 0 ? Tk : 1));
        int nv[ATT_BQ];
        #pragma omp for collapse(2)
        for (int b = 0; b < B; b++) {
            for (int h = 0; h < NH; h++) {
                const float *kb = k + (size_t)b * Tk * ks + (size_t)(h / rep) * HS;
                const float *vb = v + (size_t)b * Tk * ks + (size_t)(h / rep) * HS;
                for (int t0 = 0; t0 < Tq; t0 += ATT_BQ) {
                    int nq = Tq - t0 < ATT_BQ ? Tq - t0 : ATT_BQ;
                    for (int i = 0; i < nq; i++)
                        nv[i] = keys_seen(kpos, Tk, qpos[t0 + i]);
                    int t1 = nv[nq - 1];   // queries are non-decreasing too: the last sees most
                    float *ot = out + ((size_t)b * Tq + t0) * qs + (size_t)h * HS;
                    float *lt = lse + ((size_t)b * NH + h) * Tq + t0;
                    if (t1 == 0) {
                        for (int i = 0; i < nq; i++) {
                            for (int d = 0; d < HS; d++)
                                ot[(size_t)i * qs + d] = 0.0f;
                            lt[i] = -INFINITY;
                        }
                        continue;
                    }
                    const float *qt = q + ((size_t)b * Tq + t0) * qs + (size_t)h * HS;
                    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, nq, t1, HS,
                                scale, qt, qs, kb, ks, 0.0f, s, Tk);
                    tile_exp_nv(s, Tk, nq, t1, nv, lt, NULL);
                    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, nq, HS, t1,
                                1.0f, s, Tk, vb, ks, 0.0f, ot, qs);
                }
            }
        }
        free(s);
    }
    blas_single_end(blas_threads);
}

void k_attention_merge(float *out, float *lse, const float *out_b, const float *lse_b,
                       int B, int T, int NH, int HS)
{
    #pragma omp parallel for collapse(2)
    for (int b = 0; b < B; b++) {
        for (int h = 0; h < NH; h++) {
            for (int t = 0; t < T; t++) {
                size_t li = ((size_t)b * NH + h) * T + t, oi = (((size_t)b * T + t) * NH + h) * HS;
                float la = lse[li], lb = lse_b[li];
                if (lb == -INFINITY)
                    continue;          // the block had no key for this row
                float *o = out + oi;
                const float *ob = out_b + oi;
                if (la == -INFINITY) {
                    for (int d = 0; d < HS; d++)
                        o[d] = ob[d];
                    lse[li] = lb;
                    continue;
                }
                float m = la > lb ? la : lb;
                float l = m + logf(expf(la - m) + expf(lb - m));
                float wa = expf(la - l), wb = expf(lb - l);
                for (int d = 0; d < HS; d++)
                    o[d] = o[d] * wa + ob[d] * wb;
                lse[li] = l;
            }
        }
    }
}

void k_attention_block_bwd(float *dq, float *dk, float *dv, const float *dout, const float *q,
                           const float *k, const float *v, const float *out, const float *lse,
                           const int *qpos, const int *kpos, int B, int Tq, int Tk, int NH, int NKV,
                           int HS)
{
    int rep = NH / NKV;
    float scale = 1.0f / sqrtf((float)HS);
    int qs = NH * HS, ks = NKV * HS;
    int blas_threads = blas_single_begin();
    #pragma omp parallel
    {
        size_t tile = (size_t)ATT_BQ * (Tk > 0 ? Tk : 1);
        float *p = malloc(sizeof(float) * tile), *dp = malloc(sizeof(float) * tile);
        int nv[ATT_BQ];
        #pragma omp for collapse(2)
        for (int b = 0; b < B; b++) {
            for (int g = 0; g < NKV; g++) {
                size_t kvoff = (size_t)b * Tk * ks + (size_t)g * HS;
                const float *kb = k + kvoff, *vb = v + kvoff;
                float *dkb = dk + kvoff, *dvb = dv + kvoff;
                for (int h = g * rep; h < (g + 1) * rep; h++) {
                    for (int t0 = 0; t0 < Tq; t0 += ATT_BQ) {
                        int nq = Tq - t0 < ATT_BQ ? Tq - t0 : ATT_BQ;
                        for (int i = 0; i < nq; i++)
                            nv[i] = keys_seen(kpos, Tk, qpos[t0 + i]);
                        int t1 = nv[nq - 1];
                        if (t1 == 0)
                            continue;
                        size_t qoff = ((size_t)b * Tq + t0) * qs + (size_t)h * HS;
                        const float *qt = q + qoff, *ot = out + qoff, *dyt = dout + qoff;
                        /* p = exp(scale·q kᵀ − lse) with the final lse; dp = dy vᵀ */
                        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, nq, t1, HS,
                                    scale, qt, qs, kb, ks, 0.0f, p, Tk);
                        tile_exp_nv(p, Tk, nq, t1, nv, NULL, lse + ((size_t)b * NH + h) * Tq + t0);
                        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, nq, t1, HS,
                                    1.0f, dyt, qs, vb, ks, 0.0f, dp, Tk);
                        /* ds = p·(dp − D)·scale with D = dy·o of the merged output */
                        tile_grads(p, dp, Tk, nq, t1, HS, scale, qt, ot, dyt, qs, kb, ks, dq + qoff, dkb, dvb);
                    }
                }
            }
        }
        free(p);
        free(dp);
    }
    blas_single_end(blas_threads);
}
