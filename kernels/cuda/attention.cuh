/* attention.cuh — what attention.cu (the dispatch), attention_simt.cu and
 * attention_tc.cu share: the two implementations' entry points (B·T > 0,
 * NH % NKV == 0 and a supported HS already checked by the dispatch) and the
 * opt-in for large dynamic shared memory. Internal to up_kernels_cuda. */
#ifndef ULTRAPLAN_KERNELS_CUDA_ATTENTION_CUH
#define ULTRAPLAN_KERNELS_CUDA_ATTENTION_CUH

#include "common.cuh"

/* SIMT kernels, HS 32, 64, 96, 128 (attention_simt.cu) */
void attn_simt_fwd(bf16 *out, float *lse, const bf16 *q, const bf16 *k, const bf16 *v,
                   int B, int T, int NH, int NKV, int HS, cudaStream_t st);
void attn_simt_bwd(bf16 *dq, bf16 *dk, bf16 *dv, const bf16 *dout, const bf16 *q, const bf16 *k,
                   const bf16 *v, const bf16 *out, const float *lse, int B, int T, int NH,
                   int NKV, int HS, cudaStream_t st);
/* tensor-core kernels, HS 64 and 128, 16-byte aligned pointers (attention_tc.cu) */
void attn_tc_fwd(bf16 *out, float *lse, const bf16 *q, const bf16 *k, const bf16 *v,
                 int B, int T, int NH, int NKV, int HS, cudaStream_t st);
void attn_tc_bwd(bf16 *dq, bf16 *dk, bf16 *dv, const bf16 *dout, const bf16 *q, const bf16 *k,
                 const bf16 *v, const bf16 *out, const float *lse, int B, int T, int NH,
                 int NKV, int HS, cudaStream_t st);

/* mma.sync kernels, HS 64 and 128, 16-byte aligned pointers (attention_tc.cu) */
void attn_mma_fwd(bf16 *out, float *lse, const bf16 *q, const bf16 *k, const bf16 *v,
                  int B, int T, int NH, int NKV, int HS, cudaStream_t st);
void attn_mma_bwd(bf16 *dq, bf16 *dk, bf16 *dv, const bf16 *dout, const bf16 *q, const bf16 *k,
                  const bf16 *v, const bf16 *out, const float *lse, int B, int T, int NH,
                  int NKV, int HS, cudaStream_t st);

/* kernels above 48 KB of dynamic shared memory must say so once */
template <typename K>
static void allow_smem(K kernel, size_t bytes) {
    if (bytes > 48 * 1024)
        CHECK_CUDA(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes));
}

/* allow_smem, then kernel<<<grid, threads, smem, st>>>(args...), checked:
 * every attention launch of the three implementations */
template <typename K, typename... A>
static void attn_launch(K kernel, dim3 grid, int threads, size_t smem, cudaStream_t st, A... args) {
    allow_smem(kernel, smem);
    kernel<<<grid, threads, smem, st>>>(args...);
    CHECK_LAUNCH();
}

#endif
