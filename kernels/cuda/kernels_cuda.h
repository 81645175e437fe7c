/* kernels_cuda.h — the compute kernels of the GPT/Llama training step on an
 * NVIDIA GPU, bf16 mixed precision. Each kc_X mirrors k_X of
 * kernels/cpu/kernels.h: same argument order, shapes and semantics (forward
 * kernels overwrite, backward kernels accumulate, nullable gradients skip),
 * and tests/test_kernels_cuda.c holds each one against its CPU twin.
 *
 * What differs from the CPU contract, and only this:
 *   - every pointer is a device pointer (tokens and targets too), and every
 *     kernel takes a cudaStream_t last; launches are asynchronous unless the
 *     kernel says otherwise;
 *   - precision: activations, weights as the GEMMs read them, and activation
 *     gradients are bf16 (kc_bf16); everything that accumulates over many
 *     steps or feeds the optimizer is fp32: parameter gradients (dw, dbias,
 *     dweight, dwte, dwpe), master weights, AdamW's m and v, and the saved
 *     statistics (mean, rstd, lse, losses);
 *   - GEMMs go through cuBLASLt with fp32 accumulation: kc_init() creates the
 *     one handle and workspace first, kc_free() releases them;
 *   - the embedding backward scatters its rows with fp32 atomics, so dwte
 *     and dwpe are not bitwise deterministic from run to run; every other
 *     gradient is (the norm weight and bias gradients fold per-block
 *     partial rows in a fixed order, attention uses no atomics).
 *
 * What this deliberately doesn't do: no communication, no allocation of
 * activations (the executor carves its slabs), no fp8 here (kc_fp8.h has
 * the fp8 cast and linear layer), no MoE capacity
 * factor (token dropping). Attention is a tiled
 * FlashAttention-2-style kernel on the tensor cores (WMMA, bf16 in, fp32
 * accumulate) for HS 64 and 128, and on the SIMT units (fp32) otherwise; no
 * wgmma/TMA yet, see docs/gpu/NOTES.md.
 */
#ifndef ULTRAPLAN_KERNELS_CUDA_H
#define ULTRAPLAN_KERNELS_CUDA_H

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <cuda_runtime_api.h>

#ifdef __cplusplus
#include <cuda_bf16.h>
typedef __nv_bfloat16 kc_bf16;       // bf16 element, device pointers only
extern "C" {
#else
typedef unsigned short kc_bf16;      // same 16 bits as __nv_bfloat16
#endif

/* Library faults: name file, line and CUDA's own message, then exit. */
void kc_fail(const char *what, const char *msg, const char *file, int line);
#define CHECK_CUDA(call) do { cudaError_t e_ = (call); \
    if (e_ != cudaSuccess) kc_fail(#call, cudaGetErrorString(e_), __FILE__, __LINE__); } while (0)
/* after a launch: the launch error, without synchronising */
#define CHECK_LAUNCH() CHECK_CUDA(cudaGetLastError())

/* Number of CUDA devices, 0 when there is no driver or no device (never
 * exits): tests call it first and skip with 77 on 0. */
int kc_device_count(void);

/* The cuBLASLt handle, its workspace (32 MiB), a small scratch for
 * reductions and 16 MiB of per-block partial column sums (norm and bias
 * gradients), on the current device. Like the workspace, the partials are
 * one buffer: kernels that use them must not run concurrently on two
 * streams. kc_init is idempotent; kc_free accepts being called without
 * kc_init. */
void kc_init(void);
void kc_free(void);

/* ---- linear layer ------------------------------------------------------- */

/* out (BT, OC) = inp (BT, C) · wᵀ + bias; w (OC, C), bias (OC) nullable. */
void kc_matmul_fwd(kc_bf16 *out, const kc_bf16 *inp, const kc_bf16 *w,
                   const kc_bf16 *bias, int BT, int C, int OC, cudaStream_t st);

/* dinp (BT, C) bf16 += dout · w; dw (OC, C) fp32 += doutᵀ · inp; dbias (OC)
 * fp32 += column sums of dout. Each nullable. */
void kc_matmul_bwd(kc_bf16 *dinp, float *dw, float *dbias,
                   const kc_bf16 *dout, const kc_bf16 *inp, const kc_bf16 *w,
                   int BT, int C, int OC, cudaStream_t st);

/* ---- normalisation ------------------------------------------------------ */

void kc_layernorm_fwd(kc_bf16 *out, float *mean, float *rstd,
                      const kc_bf16 *inp, const kc_bf16 *weight, const kc_bf16 *bias,
                      int N, int C, float eps, cudaStream_t st);
/* dinp bf16 +=; dweight, dbias fp32 += (dbias nullable). One pass over
 * inp, dout and dinp, which must not alias each other. */
void kc_layernorm_bwd(kc_bf16 *dinp, float *dweight, float *dbias,
                      const kc_bf16 *dout, const kc_bf16 *inp, const kc_bf16 *weight,
                      const float *mean, const float *rstd, int N, int C,
                      cudaStream_t st);

void kc_rmsnorm_fwd(kc_bf16 *out, float *rstd, const kc_bf16 *inp,
                    const kc_bf16 *weight, int N, int C, float eps, cudaStream_t st);
void kc_rmsnorm_bwd(kc_bf16 *dinp, float *dweight, const kc_bf16 *dout,
                    const kc_bf16 *inp, const kc_bf16 *weight, const float *rstd,
                    int N, int C, cudaStream_t st);
/* Which norm kernels run (process-wide; each returns the previous setting;
 * the tests and the benchmark run both). kc_norm_set_regs: 1 (default) the
 * forward with the row in registers where C <= 4096 and rows are aligned,
 * 0 the one re-reading the row from L1 (ULTRAPLAN_NORM=l1). kc_norm_set_rows:
 * 1 the backward a warp per row with the row in registers (C <= 2048,
 * aligned; ULTRAPLAN_NORM_BWD=rows), 0 (default) the 8-row-group one. */
int kc_norm_set_regs(int on);
int kc_norm_set_rows(int on);

/* ---- activations -------------------------------------------------------- */

void kc_gelu_fwd(kc_bf16 *out, const kc_bf16 *inp, size_t N, cudaStream_t st);
void kc_gelu_bwd(kc_bf16 *dinp, const kc_bf16 *inp, const kc_bf16 *dout, size_t N,
                 cudaStream_t st);
void kc_swiglu_fwd(kc_bf16 *out, const kc_bf16 *inp, int N, int F, cudaStream_t st);
void kc_swiglu_bwd(kc_bf16 *dinp, const kc_bf16 *inp, const kc_bf16 *dout, int N, int F,
                   cudaStream_t st);

/* ---- rotary position embedding (angles in double, as on the CPU) --------- */

void kc_rope_fwd(kc_bf16 *out, const kc_bf16 *inp, int B, int T, int NH, int HS,
                 int pos0, float theta, cudaStream_t st);
void kc_rope_bwd(kc_bf16 *dinp, const kc_bf16 *dout, int B, int T, int NH, int HS,
                 int pos0, float theta, cudaStream_t st);

/* ---- attention ---------------------------------------------------------- */

/* Causal GQA attention, tiled; lse (B, NH, T) fp32. HS must be one of
 * 32, 64, 96, 128 (kc_attention_supported tells). */
int kc_attention_supported(int HS);
/* Which kernels kc_attention_fwd/bwd run. KC_ATTN_AUTO (the default): the
 * tensor-core kernels written with mma.sync (registers hold the softmax)
 * when HS is 64 or 128 and every pointer is 16-byte aligned, the SIMT ones
 * otherwise. KC_ATTN_WMMA: the earlier tensor-core kernels (WMMA, scores
 * staged through shared memory) under the same conditions. KC_ATTN_SIMT:
 * always the SIMT ones, the second reference of tests/test_kernels_cuda.c
 * and the benchmark's baseline. Process-wide; returns the previous setting.
 * The environment variable ULTRAPLAN_ATTN=mma|wmma|simt sets the starting
 * value (an unknown value is refused at the first attention call). */
typedef enum { KC_ATTN_AUTO = 0, KC_ATTN_SIMT = 1, KC_ATTN_WMMA = 2 } KcAttnImpl;
KcAttnImpl kc_attention_set_impl(KcAttnImpl impl);
void kc_attention_fwd(kc_bf16 *out, float *lse, const kc_bf16 *q, const kc_bf16 *k,
                      const kc_bf16 *v, int B, int T, int NH, int NKV, int HS,
                      cudaStream_t st);
/* dq, dk, dv bf16 +=. Two passes: one over kv tiles (dk, dv), one over query
 * tiles (dq), each recomputing the probabilities: no atomics. */
void kc_attention_bwd(kc_bf16 *dq, kc_bf16 *dk, kc_bf16 *dv, const kc_bf16 *dout,
                      const kc_bf16 *q, const kc_bf16 *k, const kc_bf16 *v,
                      const kc_bf16 *out, const float *lse,
                      int B, int T, int NH, int NKV, int HS, cudaStream_t st);

/* ---- context-parallel attention blocks (ring attention) ------------------ */

/* One block of Megatron's load-balanced ring attention (issue 18), SIMT,
 * fp32 arithmetic; no CPU twin (tests/test_kernels_cuda.c holds split and
 * merge against the whole kc_attention_fwd/bwd and k_attention_fwd). q is
 * the (B, T, NH, HS) local queries of cp rank rq, k and v the (B, T, NKV,
 * HS) local keys and values of cp rank rk, T the local length (T/cp of the
 * sequence, two chunks of c = T/2): local position t of rank r is global
 * position t < c ? r·c + t : (2·cp−1−r)·c + t − c (cuplan_cp_pos); the mask
 * is causal by those global positions. cp 1 (rq = rk = 0): the whole causal
 * attention. HS as kc_attention_supported. */
/* out (B, T, NH, HS) fp32 = softmax-weighted V of the visible keys of this
 * block, normalised over them; lse (B, NH, T) their log-sum-exp, −inf (and
 * out 0) for a query that sees none. Overwrites. */
void kc_attention_block_fwd(float *out, float *lse, const kc_bf16 *q, const kc_bf16 *k, const kc_bf16 *v,
                            int B, int T, int NH, int NKV, int HS, int cp, int rq, int rk, cudaStream_t st);
/* (out, lse) <- the merge of (out, lse) and (outb, lseb), both as
 * kc_attention_block_fwd writes them: lse = logaddexp(lse, lseb), out =
 * out·exp(lse_a − lse) + outb·exp(lseb − lse); a −inf side adds nothing. */
void kc_attention_merge(float *out, float *lse, const float *outb, const float *lseb, int B, int T, int NH,
                        int HS, cudaStream_t st);
/* dq (B, T, NH, HS), dk, dv (B, T, NKV, HS) fp32 += this block's part of
 * the attention backward, given dout and the FINAL out (bf16) and lse of
 * the queries (D = rowsum(dout·out) inside); dk and dv both or neither. */
void kc_attention_block_bwd(float *dq, float *dk, float *dv, const kc_bf16 *dout, const kc_bf16 *q,
                            const kc_bf16 *k, const kc_bf16 *v, const kc_bf16 *out, const float *lse, int B,
                            int T, int NH, int NKV, int HS, int cp, int rq, int rk, cudaStream_t st);

/* ---- embeddings and residual -------------------------------------------- */

void kc_embedding_fwd(kc_bf16 *out, const int *tokens, const kc_bf16 *wte,
                      const kc_bf16 *wpe, int B, int T, int C, int pos0, cudaStream_t st);
/* dwte, dwpe fp32 += (atomics); either nullable */
void kc_embedding_bwd(float *dwte, float *dwpe, const kc_bf16 *dout,
                      const int *tokens, int B, int T, int C, int pos0, cudaStream_t st);
void kc_residual_fwd(kc_bf16 *out, const kc_bf16 *a, const kc_bf16 *b, size_t N,
                     cudaStream_t st);
void kc_residual_bwd(kc_bf16 *da, kc_bf16 *db, const kc_bf16 *dout, size_t N,
                     cudaStream_t st);

/* ---- loss --------------------------------------------------------------- */

/* logits bf16 (BT, V); losses, lse fp32 (BT); targets (BT) device ints. */
void kc_crossentropy_fwd(float *losses, float *lse, const kc_bf16 *logits,
                         const int *targets, int BT, int V, int V_valid, cudaStream_t st);
/* dlogits bf16 OVERWRITTEN; may alias logits. */
void kc_crossentropy_bwd(kc_bf16 *dlogits, const kc_bf16 *logits, const float *lse,
                         const int *targets, float scale, int BT, int V, int V_valid,
                         cudaStream_t st);
/* Both, in one pass over the logits when a row fits in a block's shared
 * memory (V·2 bytes; V % 8 == 0, 16-byte aligned): the arithmetic of
 * kc_crossentropy_fwd then _bwd, which run instead otherwise. dlogits may
 * alias logits. 1: one pass ran, 0: the two kernels. */
int kc_crossentropy_fused(float *losses, float *lse, kc_bf16 *dlogits, const kc_bf16 *logits,
                          const int *targets, float scale, int BT, int V, int V_valid, cudaStream_t st);

/* ---- optimizer and helpers ---------------------------------------------- */

/* AdamW on fp32 master weights, grads, m, v: k_adamw's formula (built with
 * --use_fast_math, so its divisions and square roots are the approximate ones).
 * params_bf16 (n), nullable, receives the updated weights rounded to bf16
 * (the copy the GEMMs read): one pass instead of two. */
void kc_adamw(float *params, const float *grads, float *m, float *v, size_t n,
              float lr, float beta1, float beta2, float eps, float weight_decay,
              int t, kc_bf16 *params_bf16, cudaStream_t st);
/* 1: kc_adamw runs a persistent grid with streaming cache hints (opt-in,
 * ULTRAPLAN_ADAMW=stream, until measured faster); 0 (default) one group of
 * 8 a thread. Same arithmetic. Returns the previous setting. */
int kc_adamw_set_stream(int on);

void kc_zero(float *x, size_t n, cudaStream_t st);
void kc_scale(float *x, float s, size_t n, cudaStream_t st);
/* y (n) fp32 += x (n): a ZeRO-2/3 gradient slice into the shard (no CPU twin). */
void kc_add(float *y, const float *x, size_t n, cudaStream_t st);
/* Σ x² in double, deterministic (per-block partials summed in order on the
 * host); SYNCHRONISES the stream to return it (uses the scratch from kc_init). */
double kc_sumsq(const float *x, size_t n, cudaStream_t st);

/* bf16 <-> fp32 conversions of device arrays (round to nearest even). */
void kc_to_bf16(kc_bf16 *out, const float *inp, size_t n, cudaStream_t st);
void kc_to_float(float *out, const kc_bf16 *inp, size_t n, cudaStream_t st);

/* ---- mixture of experts (kernels/cuda/moe.cu) ----------------------------
 * The routed-expert path of an MoE layer on one GPU: router, the stable
 * permutation of token copies by expert, the grouped expert GEMMs, the
 * weighted combine, and their backwards. No CPU twins in kernels/cpu/ yet:
 * tests/test_kernels_cuda.c holds each against a reference loop. Dropless
 * only (no capacity factor: every routed copy gets a row). N tokens, E
 * experts (E <= KC_MOE_MAX_E), K routed per token (K <= KC_MOE_MAX_K), R =
 * N·K routed rows; slot i = n·K + k is token n's k-th choice. */
#define KC_MOE_MAX_E 1024
#define KC_MOE_MAX_K 16

/* Router forward: probs (N, E) fp32 = softmax over all E of logits (N, E)
 * bf16 (the router GEMM's output; the aux loss reads these); topi (N, K)
 * the K experts of largest LOGIT in descending order, equal logits to the
 * lower expert index (exact and implementation-independent: the logits are
 * the bf16 inputs); topw (N, K) fp32 their combine weights, the top-K
 * probabilities renormalised to sum 1 (= softmax over the K logits:
 * Megatron's default with moe_router_pre_softmax off, Mixtral's). K = 1
 * gives weight 1. Overwrites. */
void kc_moe_router_fwd(float *probs, int *topi, float *topw, const kc_bf16 *logits, int N, int E, int K,
                       cudaStream_t st);
/* Router backward: dlogits (N, E) bf16 OVERWRITTEN with the gradient of
 * Σ dtopw·topw + aux_g·Σ_n Σ_e counts[n / seq][e]·probs[n][e] through the
 * renormalisation and the softmax. counts (N/seq, E) device ints, per group
 * of seq consecutive tokens, not differentiated: with seq = N one row (the
 * micro-batch "aux_loss" of Switch/GShard, Megatron: aux_g = coeff·E/(K·N²)
 * times the loss scale, the counts kc_moe_route_map's), with seq = T one row
 * per sequence (Megatron's seq_aux_loss, DeepSeek-V3's sequence-wise
 * balance loss, the CPU executor's moe.h: aux_g = coeff·E/(T²·K·G),
 * kc_moe_seq_counts's rows summed over the ranks holding the sequence).
 * aux_g 0 or counts NULL: no aux term. dtopw (N, K) fp32 nullable (aux
 * only). */
void kc_moe_router_bwd(kc_bf16 *dlogits, const float *dtopw, const float *probs, const int *topi,
                       const float *topw, const int *counts, int seq, float aux_g, int N, int E, int K,
                       cudaStream_t st);
/* counts (N/seq, E) = tokens of each group of seq consecutive tokens routed
 * to each expert (seq divides N), one thread per (group, expert), in order.
 * Overwrites. */
void kc_moe_seq_counts(int *counts, const int *topi, int N, int K, int E, int seq, cudaStream_t st);
/* psum (E) fp32 = Σ_n probs[n][e], in order (deterministic): with the
 * counts, the aux loss's value coeff·E/(K·N²)·Σ_e psum_e·c_e. Overwrites. */
void kc_moe_prob_sums(float *psum, const float *probs, int N, int E, cudaStream_t st);

/* Ints of workspace kc_moe_route_map needs for R slots and E experts. */
size_t kc_moe_map_ws_ints(int R, int E);
/* The permutation, stable by expert: routed rows are ordered by expert and,
 * within an expert, by slot (token order). counts (E) tokens per expert,
 * offsets (E + 1) their exclusive prefix sums (offsets[E] = R), row_of (R)
 * slot -> row, src_of (R) row -> token. All device ints, overwritten; ws as
 * kc_moe_map_ws_ints. Deterministic (no atomics on the outputs). The GEMMs
 * need the counts on the host: the caller copies them (a sync). */
void kc_moe_route_map(int *counts, int *offsets, int *row_of, int *src_of, int *ws, const int *topi, int N,
                      int K, int E, cudaStream_t st);
/* dst (E) = counts (E) as floats (exact below 2^24), on the device: the MoE
 * layer's slot of its counts all-gather. */
void kc_moe_counts_f32(float *dst, const int *counts, int E, cudaStream_t st);
/* out (R, C) = in[src[r]] row by row (the permutation forward with src_of;
 * any row gather, e.g. the chunk reorder after an all-to-all). Overwrites. */
void kc_moe_gather_rows(kc_bf16 *out, const kc_bf16 *in, const int *src, int R, int C, cudaStream_t st);
/* Permutation backward: dx (N, C) bf16 += Σ_k drows[row_of[n·K + k]]
 * (fp32 sum, one rounding), per token, no atomics. */
void kc_moe_permute_bwd(kc_bf16 *dx, const kc_bf16 *drows, const int *row_of, int N, int K, int C,
                        cudaStream_t st);
/* Combine: out (N, C) = Σ_k topw[n][k]·rows[row_of[n·K + k]] (fp32 sum).
 * Overwrites. */
void kc_moe_combine_fwd(kc_bf16 *out, const kc_bf16 *rows, const int *row_of, const float *topw, int N, int K,
                        int C, cudaStream_t st);
/* Combine backward: drows[row_of[n·K + k]] = topw[n][k]·dout[n] (bf16,
 * OVERWRITES every routed row); dtopw (N, K) fp32 OVERWRITTEN with
 * dout[n]·rows[row] (nullable). */
void kc_moe_combine_bwd(kc_bf16 *drows, float *dtopw, const kc_bf16 *dout, const kc_bf16 *rows,
                        const int *row_of, const float *topw, int N, int K, int C, cudaStream_t st);

/* Grouped expert GEMMs over G experts whose rows are contiguous: expert g
 * owns rows [Σ_{j<g} counts[j], +counts[g]) of inp/out (counts on the
 * HOST), w (G, OC, C) one matrix per expert, row-major as kc_matmul's.
 * out (R, OC) = inp_g · w_gᵀ per expert (overwrites). Through
 * cublasGemmGroupedBatchedEx (cuBLAS >= 12.5: bf16 in and out, fp32
 * compute; one group per expert with rows, the pointer arrays in a device
 * buffer written on st); when that call is refused, or with
 * ULTRAPLAN_MOE_GEMM=loop, one cuBLASLt kc_matmul per expert. Like the
 * cuBLASLt workspace, the pointer buffer is one: not on two streams at once.
 * Experts with no rows are skipped (their dw is unchanged). */
void kc_moe_gemm_fwd(kc_bf16 *out, const kc_bf16 *inp, const kc_bf16 *w, const int *counts, int G, int C, int OC,
                     cudaStream_t st);
/* dinp (R, C) bf16 += dout_g · w_g; dw (G, OC, C) fp32 += dout_gᵀ · inp_g
 * (the grouped call with fp32 C, beta 1). Either nullable. */
void kc_moe_gemm_bwd(kc_bf16 *dinp, float *dw, const kc_bf16 *dout, const kc_bf16 *inp, const kc_bf16 *w,
                     const int *counts, int G, int C, int OC, cudaStream_t st);
/* Which path the last kc_moe_gemm_fwd/bwd took: 1 grouped, 0 the loop;
 * -1 before any. set_grouped(0) forces the loop, (1) tries the grouped call
 * (process-wide; returns the previous setting; the tests run both). */
int kc_moe_gemm_grouped_used(void);
int kc_moe_gemm_set_grouped(int on);

#ifdef __cplusplus
}
#endif
#endif
