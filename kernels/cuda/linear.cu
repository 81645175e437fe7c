/* linear.cu — the cuBLASLt context, matmuls, embeddings, residual and the
 * bf16 conversions.
 *
 * Row-major to cuBLAS's column-major: a row-major (R, C) matrix is a
 * column-major (C, R) one, so out (BT, OC) = inp · wᵀ becomes
 * outᶜ (OC, BT) = wᶜᵀ · inpᶜ, and so on for the backward. GEMMs read bf16,
 * accumulate in fp32 and write bf16 (activations) or fp32 (weight
 * gradients, with beta = 1 so they accumulate). */
#include <stdio.h>
#include <string.h>
#include "common.cuh"

KcContext kc_ctx;

void kc_fail(const char *what, const char *msg, const char *file, int line) {
    fprintf(stderr, "%s:%d: %s failed: %s\n", file, line, what, msg);
    fflush(stderr);
    exit(EXIT_FAILURE);
}

int kc_device_count(void) {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        cudaGetLastError();   // clear the sticky "no driver" error
        return 0;
    }
    return n;
}

void kc_init(void) {
    if (kc_ctx.ready) return;
    CHECK_CUBLAS(cublasLtCreate(&kc_ctx.lt));
    kc_ctx.workspace_bytes = (size_t)32 << 20;   // Hopper kernels want 32 MiB
    CHECK_CUDA(cudaMalloc(&kc_ctx.workspace, kc_ctx.workspace_bytes));
    CHECK_CUDA(cudaMalloc(&kc_ctx.scratch, KC_SCRATCH * sizeof(double)));
    kc_ctx.partial_floats = KC_PARTIALS;
    CHECK_CUDA(cudaMalloc(&kc_ctx.partials, KC_PARTIALS * sizeof(float)));
    kc_ctx.ready = 1;
}

void kc_free(void) {
    if (!kc_ctx.ready) return;
    kc_moe_release();
    kc_fp8_release();
    cublasLtDestroy(kc_ctx.lt);
    cudaFree(kc_ctx.workspace);
    cudaFree(kc_ctx.scratch);
    cudaFree(kc_ctx.partials);
    memset(&kc_ctx, 0, sizeof kc_ctx);
}

void kc_require_init(void) { if (!kc_ctx.ready) kc_init(); }

/* ---- cuBLASLt ----------------------------------------------------------- */

/* heuristic answers cached by problem: the query costs more than a small
 * GEMM, and a training step repeats a handful of shapes */
typedef struct {
    int m, n, k, ta, tb, dtd, beta1, bias, align;
    cublasLtMatmulAlgo_t algo;
} AlgoEntry;
enum { ALGO_CACHE = 64 };
static AlgoEntry algo_cache[ALGO_CACHE];
static int algo_count;

static int ptr_align(const void *p) {
    uintptr_t a = (uintptr_t)p;
    int al = 16;
    while (al > 2 && (a % al)) al >>= 1;
    return al;
}

cublasLtMatmulDesc_t kc_lt_desc(cublasOperation_t opa, cublasOperation_t opb, const kc_bf16 *bias) {
    cublasLtMatmulDesc_t op;
    CHECK_CUBLAS(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    CHECK_CUBLAS(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &opa, sizeof opa));
    CHECK_CUBLAS(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &opb, sizeof opb));
    if (bias) {
        cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_BIAS;
        cudaDataType_t bt = CUDA_R_16BF;
        CHECK_CUBLAS(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi));
        CHECK_CUBLAS(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias));
        CHECK_CUBLAS(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bt, sizeof bt));
    }
    return op;
}

cublasLtMatmulPreference_t kc_lt_pref(uint32_t align) {
    cublasLtMatmulPreference_t pref;
    CHECK_CUBLAS(cublasLtMatmulPreferenceCreate(&pref));
    CHECK_CUBLAS(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                      &kc_ctx.workspace_bytes, sizeof(size_t)));
    // the heuristic assumes 256-byte aligned pointers unless told
    const cublasLtMatmulPreferenceAttributes_t at[4] = {
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES};
    for (int i = 0; i < 4; i++)
        CHECK_CUBLAS(cublasLtMatmulPreferenceSetAttribute(pref, at[i], &align, sizeof align));
    return pref;
}

void kc_lt_free(cublasLtMatmulDesc_t op, cublasLtMatrixLayout_t la, cublasLtMatrixLayout_t lb,
                cublasLtMatrixLayout_t ld) {
    cublasLtMatmulDescDestroy(op);
    cublasLtMatrixLayoutDestroy(la);
    cublasLtMatrixLayoutDestroy(lb);
    cublasLtMatrixLayoutDestroy(ld);
}

/* D (m, n, ld ldd, type dtd) = op(A) · op(B) + beta·D (+ bias over rows m);
 * A stored (ta ? k×m : m×k) column-major with lda, likewise B. */
static void lt_matmul(void *D, cudaDataType_t dtd, int ldd,
                      const bf16 *A, int ta, int lda, const bf16 *B, int tb, int ldb,
                      int m, int n, int k, float beta, const bf16 *bias, cudaStream_t st) {
    kc_require_init();
    cublasLtMatrixLayout_t la, lb, ld;
    cublasLtMatmulDesc_t op = kc_lt_desc(ta ? CUBLAS_OP_T : CUBLAS_OP_N, tb ? CUBLAS_OP_T : CUBLAS_OP_N, bias);
    CHECK_CUBLAS(cublasLtMatrixLayoutCreate(&la, CUDA_R_16BF, ta ? k : m, ta ? m : k, lda));
    CHECK_CUBLAS(cublasLtMatrixLayoutCreate(&lb, CUDA_R_16BF, tb ? n : k, tb ? k : n, ldb));
    CHECK_CUBLAS(cublasLtMatrixLayoutCreate(&ld, dtd, m, n, ldd));

    int al = ptr_align(A);
    if (ptr_align(B) < al) al = ptr_align(B);
    if (ptr_align(D) < al) al = ptr_align(D);
    if (bias && ptr_align(bias) < al) al = ptr_align(bias);
    AlgoEntry key = {m, n, k, ta, tb, (int)dtd, beta != 0.0f, bias != NULL, al, {}};
    const cublasLtMatmulAlgo_t *algo = NULL;
    for (int i = 0; i < algo_count && !algo; i++) {
        AlgoEntry *e = &algo_cache[i];
        if (e->m == m && e->n == n && e->k == k && e->ta == ta && e->tb == tb &&
            e->dtd == key.dtd && e->beta1 == key.beta1 && e->bias == key.bias && e->align == al)
            algo = &e->algo;
    }
    if (!algo) {
        cublasLtMatmulPreference_t pref = kc_lt_pref((uint32_t)al);
        cublasLtMatmulHeuristicResult_t heur;
        int nres = 0;
        CHECK_CUBLAS(cublasLtMatmulAlgoGetHeuristic(kc_ctx.lt, op, la, lb, ld, ld, pref, 1, &heur, &nres));
        cublasLtMatmulPreferenceDestroy(pref);
        if (nres == 0) {
            char msg[160];
            snprintf(msg, sizeof msg, "no algorithm for m=%d n=%d k=%d ta=%d tb=%d align=%d", m, n, k, ta, tb, al);
            kc_fail("cublasLtMatmulAlgoGetHeuristic", msg, __FILE__, __LINE__);
        }
        key.algo = heur.algo;
        int slot = algo_count < ALGO_CACHE ? algo_count++ : (m + n + k) % ALGO_CACHE;
        algo_cache[slot] = key;
        algo = &algo_cache[slot].algo;
    }
    float alpha = 1.0f;
    CHECK_CUBLAS(cublasLtMatmul(kc_ctx.lt, op, &alpha, A, la, B, lb, &beta, D, ld, D, ld,
                                algo, kc_ctx.workspace, kc_ctx.workspace_bytes, st));
    kc_lt_free(op, la, lb, ld);
}

void kc_matmul_fwd(bf16 *out, const bf16 *inp, const bf16 *w, const bf16 *bias,
                   int BT, int C, int OC, cudaStream_t st) {
    // outᶜ (OC, BT) = (wᶜ (C, OC))ᵀ · inpᶜ (C, BT)
    lt_matmul(out, CUDA_R_16BF, OC, w, 1, C, inp, 0, C, OC, BT, C, 0.0f, bias, st);
}

/* column sums of dout (BT, OC) into dbias without atomics. A block is 32
 * lanes x 8 row slices; a lane owns 8 columns (one 16-byte load when vec),
 * so a warp reads 512 contiguous bytes of a row; blockIdx.y takes a run of
 * rows. The block folds its slices and writes one partial row (width OC) of
 * kc_ctx.partials; kc_reduce_partials adds them into dbias. */
enum { BG_SLICES = 8, BG_COLS = 32 * 8 };
__global__ void __launch_bounds__(32 * BG_SLICES)
bias_grad_kernel(float *part, const bf16 *dout, int BT, int OC, int rows, bool vec) {
    __shared__ float red[BG_SLICES][BG_COLS];
    int c = blockIdx.x * BG_COLS + threadIdx.x * 8;
    int r0 = blockIdx.y * rows, r1 = min(r0 + rows, BT);
    float s[8] = {0, 0, 0, 0, 0, 0, 0, 0}, x8[8];
    if (c < OC) {
#pragma unroll 4
        for (int r = r0 + threadIdx.y; r < r1; r += BG_SLICES) {
            load8(x8, dout + (size_t)r * OC, c, OC, vec);
            for (int j = 0; j < 8; j++) s[j] += x8[j];
        }
    }
    for (int j = 0; j < 8; j++) red[threadIdx.y][threadIdx.x * 8 + j] = s[j];
    __syncthreads();
    int t = threadIdx.y * 32 + threadIdx.x, col = blockIdx.x * BG_COLS + t;
    if (col < OC) {
        float sum = 0.0f;
        for (int y = 0; y < BG_SLICES; y++) sum += red[y][t];
        part[(size_t)blockIdx.y * OC + col] = sum;
    }
}

static void bias_grad(float *dbias, const bf16 *dout, int BT, int OC, cudaStream_t st) {
    if (BT <= 0 || OC <= 0) return;
    kc_require_init();
    bool vec = OC % 8 == 0 && aligned16(dout);
    size_t gx = ceil_div(OC, BG_COLS), gy = ceil_div(BT, 32);   // >= 32 rows a block
    gy = std::min(gy, std::max((size_t)1, 4 * (size_t)kc_sm_count() / gx));
    gy = std::min(gy, kc_ctx.partial_floats / OC);
    if (gy == 0) kc_fail("bias_grad", "OC too large for the partials scratch", __FILE__, __LINE__);
    int rows = (int)ceil_div(BT, gy);
    gy = ceil_div(BT, rows);
    bias_grad_kernel<<<dim3((unsigned)gx, (unsigned)gy), dim3(32, BG_SLICES), 0, st>>>(
        kc_ctx.partials, dout, BT, OC, rows, vec);
    CHECK_LAUNCH();
    kc_reduce_partials(dbias, NULL, kc_ctx.partials, (int)gy, OC, OC, st);
}

void kc_matmul_bwd(bf16 *dinp, float *dw, float *dbias,
                   const bf16 *dout, const bf16 *inp, const bf16 *w,
                   int BT, int C, int OC, cudaStream_t st) {
    if (dinp)   // dinpᶜ (C, BT) += wᶜ (C, OC) · doutᶜ (OC, BT)
        lt_matmul(dinp, CUDA_R_16BF, C, w, 0, C, dout, 0, OC, C, BT, OC, 1.0f, NULL, st);
    if (dw)     // dwᶜ (C, OC) += inpᶜ (C, BT) · (doutᶜ (OC, BT))ᵀ
        lt_matmul(dw, CUDA_R_32F, C, inp, 0, C, dout, 1, OC, C, OC, BT, 1.0f, NULL, st);
    if (dbias) bias_grad(dbias, dout, BT, OC, st);
}

/* ---- embeddings --------------------------------------------------------- */

/* i indexes out (B·T, C); vectors stay inside one row when C % 8 == 0 */
struct EmbedFwd {
    bf16 *out; const int *tokens; const bf16 *wte, *wpe; int T, C, pos0;
    __device__ void one(size_t i) const {
        size_t bt = i / C;
        int c = (int)(i % C), t = (int)(bt % T);
        float x = __bfloat162float(wte[(size_t)tokens[bt] * C + c]);
        if (wpe) x += __bfloat162float(wpe[(size_t)(pos0 + t) * C + c]);
        out[i] = __float2bfloat16(x);
    }
    __device__ void vec8(size_t i) const {
        size_t bt = i / C;
        int c = (int)(i % C), t = (int)(bt % T);
        Pack8 e = *(const Pack8 *)(wte + (size_t)tokens[bt] * C + c);
        if (wpe) {
            Pack8 p = *(const Pack8 *)(wpe + (size_t)(pos0 + t) * C + c);
            for (int j = 0; j < 8; j++)
                e.v[j] = __float2bfloat16(__bfloat162float(e.v[j]) + __bfloat162float(p.v[j]));
        }
        *(Pack8 *)(out + i) = e;
    }
};

void kc_embedding_fwd(bf16 *out, const int *tokens, const bf16 *wte, const bf16 *wpe,
                      int B, int T, int C, int pos0, cudaStream_t st) {
    bool vec = C % 8 == 0 && aligned16(out) && aligned16(wte) && (!wpe || aligned16(wpe));
    map8((size_t)B * T * C, vec, EmbedFwd{out, tokens, wte, wpe, T, C, pos0}, st);
}

__global__ void embedding_bwd_kernel(float *dwte, float *dwpe, const bf16 *dout,
                                     const int *tokens, int T, int C, int pos0, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        size_t bt = i / C;
        int c = (int)(i % C), t = (int)(bt % T);
        float d = __bfloat162float(dout[i]);
        if (dwte) atomicAdd(&dwte[(size_t)tokens[bt] * C + c], d);
        if (dwpe) atomicAdd(&dwpe[(size_t)(pos0 + t) * C + c], d);
    }
}

void kc_embedding_bwd(float *dwte, float *dwpe, const bf16 *dout, const int *tokens,
                      int B, int T, int C, int pos0, cudaStream_t st) {
    size_t n = (size_t)B * T * C;
    if (!dwte && !dwpe) return;
    embedding_bwd_kernel<<<grid_for(n, 256), 256, 0, st>>>(dwte, dwpe, dout, tokens, T, C, pos0, n);
    CHECK_LAUNCH();
}

/* ---- residual and conversions (map8 in common.cuh) ---------------------- */

struct AddOp {
    bf16 *out; const bf16 *a, *b;
    __device__ void one(size_t i) const {
        out[i] = __float2bfloat16(__bfloat162float(a[i]) + __bfloat162float(b[i]));
    }
    __device__ void vec8(size_t i) const {
        Pack8 x = *(const Pack8 *)(a + i), y = *(const Pack8 *)(b + i), z;
        for (int j = 0; j < 8; j++)
            z.v[j] = __float2bfloat16(__bfloat162float(x.v[j]) + __bfloat162float(y.v[j]));
        *(Pack8 *)(out + i) = z;
    }
};

void kc_residual_fwd(bf16 *out, const bf16 *a, const bf16 *b, size_t N, cudaStream_t st) {
    map8(N, aligned16(out) && aligned16(a) && aligned16(b), AddOp{out, a, b}, st);
}

void kc_residual_bwd(bf16 *da, bf16 *db, const bf16 *dout, size_t N, cudaStream_t st) {
    if (da) kc_residual_fwd(da, da, dout, N, st);
    if (db) kc_residual_fwd(db, db, dout, N, st);
}

struct ToBf16Op {
    bf16 *out; const float *inp;
    __device__ void one(size_t i) const { out[i] = __float2bfloat16(inp[i]); }
    __device__ void vec8(size_t i) const {
        float4 x0 = *(const float4 *)(inp + i), x1 = *(const float4 *)(inp + i + 4);
        Pack8 z;
        z.v[0] = __float2bfloat16(x0.x); z.v[1] = __float2bfloat16(x0.y);
        z.v[2] = __float2bfloat16(x0.z); z.v[3] = __float2bfloat16(x0.w);
        z.v[4] = __float2bfloat16(x1.x); z.v[5] = __float2bfloat16(x1.y);
        z.v[6] = __float2bfloat16(x1.z); z.v[7] = __float2bfloat16(x1.w);
        *(Pack8 *)(out + i) = z;
    }
};
struct ToFloatOp {
    float *out; const bf16 *inp;
    __device__ void one(size_t i) const { out[i] = __bfloat162float(inp[i]); }
    __device__ void vec8(size_t i) const {
        Pack8 x = *(const Pack8 *)(inp + i);
        for (int j = 0; j < 8; j++) out[i + j] = __bfloat162float(x.v[j]);
    }
};

void kc_to_bf16(bf16 *out, const float *inp, size_t n, cudaStream_t st) {
    map8(n, aligned16(out) && aligned16(inp), ToBf16Op{out, inp}, st);
}
void kc_to_float(float *out, const bf16 *inp, size_t n, cudaStream_t st) {
    map8(n, aligned16(out) && aligned16(inp), ToFloatOp{out, inp}, st);
}
