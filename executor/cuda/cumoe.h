/* cumoe.h — the routed part of a mixture-of-experts layer on the GPU, bf16:
 * router GEMM and top-k softmax routing (kernels_cuda.h's kc_moe_*, the
 * CPU executor's convention in executor/moe.h: top-k by logit, ties to the
 * lower expert, weights the softmax over the k logits), the permutation
 * stable by expert, token dispatch and combine over the ep group with
 * grouped ncclSend/ncclRecv (cucomm_alltoallv) on the communication stream
 * (the compute stream waits on an event: no overlap with computation yet),
 * the expert-major reorder of the received rows, the experts as grouped
 * GEMMs (FC1, GELU or SwiGLU, FC2; cublasGemmGroupedBatchedEx), and the
 * backward of all of it with the load-balancing loss (counts per group of
 * `seq` tokens: seq = T is Megatron's seq_aux_loss, as the CPU executor).
 * The shared expert, the norms and the residual are the caller's (a dense
 * MLP of shared_ffn).
 *
 * Layout: this rank holds experts [ep_rank·El, ep_rank·El + El), El =
 * E/ep, each whole (etp 1). w1 (El, F1e, C) with F1e = 2·Fe for SwiGLU
 * (gate rows first, as the dense FC1), w2 (El, C, Fe), router wr (E, C).
 *
 * Memory: a CuMoeActs holds what one micro-batch's backward reads: probs
 * (N, E) fp32, top-k indices and weights, the permutation, the
 * expert-major input X, the FC1 output and activation (rows = tokens this
 * rank's experts received), the expert outputs as they came back (N·K, C),
 * and the host tables of the exchange. Received rows are bounded by cap
 * (cumoe_init: imbalance × the even share N·K, at most the dropless worst
 * case N·K·ep); a step that routes more to any rank of the group fails on
 * all of them with a message naming the counts (no growth yet).
 *
 * cunet.c calls it for every MoE layer (N = this rank's rows), with
 * params.h's expert region as w1/w2 and the router in the layer's dense
 * tensors; one CuMoe serves every layer, a CuMoeActs each (slot, layer).
 *
 * What it doesn't do yet: etp > 1 (the expert tensor-parallel all-gather /
 * reduce-scatter), capacity factor, overlap of the dispatch's all-to-all
 * with computation (the counts' wait overlaps the shared expert, cunet.c),
 * fp8 dispatch. An overflow of cap is seen by every rank of the ep group
 * (the counts are all-gathered), which all fail that layer before the
 * dispatch; cuexec_step then agrees the failure over the world. tests/test_cuda_exec_moe.c holds it against a host fp32
 * reference, one GPU or ep GPUs under mpirun. None of it has run on a GPU.
 */
#ifndef ULTRAPLAN_EXECUTOR_CUDA_CUMOE_H
#define ULTRAPLAN_EXECUTOR_CUDA_CUMOE_H

#include "cucomm.h"
#include "kernels_cuda.h"

typedef struct {
    int N, C, E, K, El, Fe, F1e, swiglu;
    int ep, ep_rank;
    int cap;                           // rows of received tokens a CuMoeActs holds
    CuComm *cc;                        // NULL: ep 1
    cudaStream_t st, cs;               // compute, communication (cs == st when cc is NULL)
    cudaEvent_t ev_c, ev_m;            // compute -> comm, comm -> compute
    cudaEvent_t ev_h;                  // every ep rank's counts have reached h_cf
    /* scratch, device */
    kc_bf16 *logits;                   // (N, E) router logits; the backward's dlogits
    int *ws, *cnt, *off, *scnt;        // route_map workspace; counts (E); offsets (E + 1); seq counts
    float *cf_send;                    // (ep·E) every ep rank's counts as floats, all-gathered in place
    kc_bf16 *sendb;                    // (N·K, C) permuted rows (dispatch out, combine in)
    kc_bf16 *recvb, *ye;               // (cap, C) received rows; expert outputs / gradients
    kc_bf16 *dh1, *dha, *dxe;          // (cap, F1e), (cap, Fe), (cap, C)
    float *dtopw;                      // (N, K)
    float *h_cf;                       // (ep·E) host, pinned: every ep rank's counts
    int *h_idx;                        // (2·cap) host: reorder and its inverse
    double bytes;                      // device bytes of the scratch
} CuMoe;

typedef struct {
    float *probs, *topw;               // (N, E), (N, K)
    int *topi, *row_of, *src_of;       // (N, K), (N·K), (N·K)
    int *d_idx, *d_inv;                // (cap) received -> expert-major, and back
    kc_bf16 *xe, *h1, *ha;             // (cap, C), (cap, F1e), (cap, Fe)
    kc_bf16 *rows;                     // (N·K, C) expert outputs as they came back
    int *h_send, *h_recv, *h_lcnt;     // host: (ep) rows to each peer, (ep·El) rows from peer p for expert e,
                                       // (El) rows per local expert
    int R;                             // rows received; -1 after a forward that overflowed cap
    double bytes;                      // device bytes
} CuMoeActs;

/* N local tokens of C, E experts, top K, expert hidden Fe, SwiGLU or GELU;
 * cc and the ep group (CC_EP; NULL for one rank); imbalance sizes cap
 * (>= 1; clipped to the worst case). 0, or -1 with err (E not divisible by
 * ep, E or K beyond the kernels' limits). */
int cumoe_init(CuMoe *M, int N, int C, int E, int K, int Fe, int swiglu, double imbalance, CuComm *cc,
               cudaStream_t st, char *err, int errlen);
void cumoe_free(CuMoe *M);
int cumoe_acts_alloc(const CuMoe *M, CuMoeActs *A, char *err, int errlen);
void cumoe_acts_free(CuMoeActs *A);

/* out (N, C) = the routed experts' combined output for a2 (N, C), in two
 * halves so that the caller can queue other work between them.
 * cumoe_fwd_route queues the router, the top-k map, this rank's counts
 * (converted on the device, all-gathered over ep on the comm stream, copied
 * to pinned host memory) and the rows' permutation, and returns without
 * waiting. cumoe_fwd_experts waits for the counts (the one host wait of the
 * layer: NCCL's messages and the grouped GEMMs take their sizes from the
 * host), then dispatches, runs the experts and combines. Overwrites out. 0,
 * or -1 with err when the rows routed to any rank of the ep group exceed
 * cap (then on every rank of it, before any row moves). cumoe_fwd is the
 * two back to back. */
void cumoe_fwd_route(CuMoe *M, CuMoeActs *A, const kc_bf16 *a2, const kc_bf16 *wr);
int cumoe_fwd_experts(CuMoe *M, CuMoeActs *A, kc_bf16 *out, const kc_bf16 *w1, const kc_bf16 *w2, char *err,
                      int errlen);
int cumoe_fwd(CuMoe *M, CuMoeActs *A, kc_bf16 *out, const kc_bf16 *a2, const kc_bf16 *wr, const kc_bf16 *w1,
              const kc_bf16 *w2, char *err, int errlen);
/* Nothing when A's forward failed (on every rank of the ep group alike).
 * da2 (N, C) bf16 += the gradient through experts and router given dout
 * (N, C); dwr (E, C), dw1, dw2 fp32 += (this rank's experts: the sum over
 * every ep rank's tokens). aux_g, seq: kc_moe_router_bwd's (0: no aux). */
void cumoe_bwd(CuMoe *M, CuMoeActs *A, kc_bf16 *da2, const kc_bf16 *dout, const kc_bf16 *a2, const kc_bf16 *wr,
               const kc_bf16 *w1, const kc_bf16 *w2, float *dwr, float *dw1, float *dw2, float aux_g, int seq);

#endif
