/* cuexec.h — training on NVIDIA GPUs, bf16 mixed precision, one GPU per
 * rank: the same decoder (GPT or Llama), parameter table and seeded
 * initialisation as the CPU executor (params.h), the same pipeline schedule
 * (sched.h) and the same layout rules (exec.c), so a CUDA run and a CPU run
 * of the same plan and seed give the same losses within bf16 rounding.
 *
 * Device memory lives in one allocation per category, counted as the cost
 * model counts them (model/memory.c, D = dp·cp): weights (bf16 copy the
 * GEMMs read; under ZeRO-3 this rank's 1/D shard), grads (fp32; under
 * ZeRO-2/3 the 1/D shard), optim (fp32 master + AdamW m, v: all parameters,
 * or the 1/D shard under ZeRO-1/2/3),
 * acts (per in-flight (chunk, micro-batch) slot the tensors the backward
 * reads; only x for a fully recomputed layer; the recompute working set; the
 * head's logits), buffers (backward scratch, the pipeline's send ring,
 * tokens, losses, ZeRO-2/3 gradient buckets and ZeRO-3 gather buffers, the
 * CP ring's blocks and fp32 accumulators).
 *
 * Several ranks (mpirun, one GPU each: the node-local rank picks the
 * device): NCCL communicators per group (cucomm.h). DP: per-layer fp32
 * gradient buckets all-reduced on the communication stream as soon as the
 * last micro-batch's backward has produced them (an event on the compute
 * stream, a wait on the comm stream), the optimizer waits for all; ZeRO-1:
 * reduce-scatter, AdamW on this rank's shard, all-gather of the bf16
 * weights. Gradients are reduced, and ZeRO shards, over the dp·cp group
 * (CC_DPCP: CP ranks hold the same weights and partial gradients).
 *
 * ZeRO-2/3 (FSDP-style, per unit: cuplan_units, one per local layer plus
 * the stage unit of the embedding, positions, final norm and head; pp 1, as
 * the planner emits them): during every micro-batch's backward each unit's
 * gradient is written to a bucket (two for the layers, alternating, one for
 * the stage unit, live from the head's backward to the embedding's), its
 * tp/SP syncs done there, then reduce-scattered over dp·cp on the comm
 * stream while the next unit computes, and this rank's slice added into the
 * fp32 gradient shard. AdamW runs on the shard. ZeRO-2 keeps full bf16
 * weights and all-gathers each unit's updated slices after the step;
 * ZeRO-3 keeps only the bf16 shard and all-gathers each unit's weights into
 * one of two gather buffers before its forward and again (reverse order)
 * before its backward, the next unit's gather prefetched on the comm
 * stream; the stage unit has its own buffer, gathered at the start of each
 * micro-batch's forward and kept to the end of its embedding backward.
 *
 * Context parallel (Megatron's, load-balanced ring attention): a sequence's
 * T tokens in 2·cp chunks, cp rank r holding chunks r and 2·cp−1−r (its
 * T/cp local rows, cuplan_cp_pos); every per-token tensor has N = B·T/cp
 * rows; RoPE and learned positions use the global positions; attention is a
 * ring of K/V blocks over the cp group (cunet.c: grouped ncclSend/ncclRecv
 * on the comm stream overlapped with the resident block's
 * kc_attention_block_fwd, fp32 log-sum-exp merge; backward with the dK/dV
 * accumulators travelling with the blocks). TP (Megatron): column-parallel QKV/FC1, row-parallel proj/FC2
 * with all-reduces on the compute stream, vocab-parallel embedding and
 * cross-entropy (cutp.h), exactly net.c's split. Sequence parallel (sp
 * with tp > 1), as net.c: outside the TP regions (norms, residual adds,
 * the pipeline's activations, the head's input) a rank holds its Nl = N/tp
 * contiguous rows (cuplan_sp_rows); all-gather before the column-parallel
 * GEMMs and the head, reduce-scatter after the row-parallel ones and the
 * embedding, the mirror in backward; the replicated tensors' gradients
 * (cuplan_sp_sync) summed over tp after their last backward. PP: sched_build's actions
 * (1F1B, interleaved), activations over two-rank NCCL links (cuplan.h),
 * receives on the compute stream, sends from a ring of buffers on a send
 * stream per direction; the tied embedding's gradient all-reduced over the
 * first and last stage.
 *
 * Proxy mode runs the exact per-rank work of one pipeline stage of a larger
 * plan (proxy.h shapes: tp-sharded widths, heads/tp, its recomputation) on
 * this GPU: no optimizer, random weights and inputs, TP/SP/PP/CP/EP
 * communication not executed (the cost model's figure for it is reported
 * instead); context parallel as cp rank 0's ring blocks, ZeRO-3 with one
 * layer's weights shared by all layers, MoE on the rank's own experts
 * (proxy.h).
 *
 * Checkpoints (cuckpt.c) are the CPU executor's files (ckpt.h): the device
 * state goes through host buffers into the same writer and reader.
 *
 * Mixture of experts (issue 20; written, compiled, never run on a GPU): an
 * MoE layer (spec_layer_is_moe) keeps the attention and norms, runs its
 * shared expert (if any) as the dense MLP of shared_ffn and its routed
 * experts through cumoe.h (router, top-k, NCCL dispatch/combine over the
 * ep group, grouped expert GEMMs), the load-balancing loss as the CPU
 * executor's seq_aux_loss. The parameter table is params.h's: the routed
 * experts in their own region after the dense tensors, their gradients
 * summed over edp (after the step's backward, on the compute stream), and
 * under ZeRO-1/dist-opt their masters and moments sharded over edp
 * (reduce-scatter, AdamW, all-gather), as exec.c. Expert ranks come from
 * dist_init_experts (the CPU executor's folding). What it runs: etp 1,
 * tp 1, cp 1, no capacity factor, ZeRO-0/1/dist-opt; other MoE layouts are
 * refused by the field that needs them (refuse_cuda, executor/refuse.h).
 *
 * What it doesn't do: dropout, checkpoints of the proxy, context parallel
 * in the proxy (it is a one-GPU timing stand-in with no ring to run), the
 * ZeRO-2 weight all-gather overlapped with the optimizer (it follows it on
 * the compute stream), the dK/dV hand-off of the CP backward overlapped with
 * the next block (the K/V prefetch is). The ring's waits are timed in the
 * forward/backward phases (there is no CP phase in run.json). The proxy runs
 * sequence-parallel shapes (norms on N/tp rows) with local copies in place
 * of the SP collectives.
 */
#ifndef ULTRAPLAN_EXECUTOR_CUDA_CUEXEC_H
#define ULTRAPLAN_EXECUTOR_CUDA_CUEXEC_H

#include <stdint.h>

#include "data.h"
#include "exec.h"     // Phase, ExecMem, TrainOpts: the CPU executor's vocabulary
#include "kernels_cuda.h"
#include "kc_fp8.h"
#include "cucomm.h"
#include "cumoe.h"
#include "cuplan.h"
#include "proxy.h"
#include "sched.h"

/* The proxy runs at most this many of the plan's m micro-batches per step. */
#define CUEXEC_PROXY_MAX_MB 8

typedef struct {
    kc_bf16 *x;                        // (Nl, C) layer input
    kc_bf16 *a1, *q, *k, *v, *o, *x2, *a2, *hpre, *hact;   // see LayerActs in exec.h: a1, x2, a2 (Nl, C)
    float *mean1, *rstd1, *lse, *mean2, *rstd2;             // (Nl), (Nl), (B, NHl, T), (Nl), (Nl)
    CuMoeActs *moe;                    // an MoE layer: its routed block's activations (else NULL)
    unsigned char *f8[4];              // fp8 plans: the forward's transposed E4M3 inputs of QKV, proj, FC1,
                                       // FC2 (cufp8.h CUFP8_*) for the weight gradients; else NULL
    float *f8s;                        // (4) their scale_inv
} CuActs;

typedef struct {
    ModelSpec m;
    Layout lo;
    TrainOpts opt;
    ProxyShape sh;                     // shapes of this rank (tp-sharded widths)
    int proxy;                         // 1: one stage of a larger plan, no optimizer
    Dist d;                            // ranks and MPI groups (the proxy: sizes 1, no communicators)
    int have_dist;
    CuComm *cc;                        // NCCL, NULL on one GPU
    StageMap sm;
    ParamSet ps;                       // offsets only; w and g stay NULL (device slabs below)
    DataLoader dl;
    int have_data;
    int step;
    int nmb;                           // micro-batches per step (proxy: at most CUEXEC_PROXY_MAX_MB)
    int tp, dp, pp, vp;                // group sizes (1 in the proxy)
    int vstart;                        // first vocabulary row of this tp rank
    int sp;                            // sequence parallel (tp > 1; never in the proxy)
    int Nl;                            // rows of the residual stream here: N/tp under sp, else N
    int zero1;                         // ZeRO-1 with dp·cp > 1
    int zero;                          // 2 or 3: ZeRO-2/3 with dp·cp > 1; else 0
    int cp;                            // context-parallel group size
    int Tg;                            // tokens of a sequence (sh.T, sh.N are this rank's T/cp, B·T/cp)
    int D, drank;                      // the gradient / ZeRO group: dp·cp ranks, cp_rank + cp·dp_rank
    CuUnit *un;                        // (nun) units: local layers, then the stage unit (cuplan_units over D
                                       // under ZeRO-2/3, else over 1: the same runs, unpadded)
    int nun, stage_unit;               // count; index of the stage unit (nun when the stage has none)
    size_t alias;                      // proxy of a ZeRO-3 plan: floats of the one layer all layers share
                                       // (their weights and grads at 0, the stage unit's after); else 0
    kc_bf16 **wu;                      // (nun + 1) where unit u's weights are now (its first float)
    float **gu;                        // (nun + 1) where unit u's gradients accumulate now
    Schedule sch;                      // this stage's actions
    int nchunk;                        // model chunks on this stage (proxy: 1)
    int chunk_layers[16], chunk_first[16];   // layers of each chunk, its first local layer
    int maxchunk;                      // layers of the largest chunk
    int *rc;                           // (layers) 0 none, 1 selective, 2 full
    cudaStream_t st;                   // compute stream
    cudaStream_t sst[2];               // pipeline send streams: forward, backward (pp > 1)
    /* slabs */
    void *slab[XM_COUNT];
    double mem[XM_COUNT];              // bytes allocated by category
    kc_bf16 *wb;                       // (n_alloc) bf16 weights
    float *g;                          // (n_alloc) grads
    float *w32, *om, *ov;              // (opt_n) master, AdamW moments (NULL in proxy)
    size_t n, n_alloc, opt_n, opt_off; // parameters, padded for ZeRO-1, this rank's shard (ZeRO-2/3: the
                                       // shard of cuplan_units, n_alloc = n, opt_off 0)
    /* ZeRO-2/3 */
    float *zb[3];                      // gradient buckets (padded unit floats): two for layers, one stage unit
    cudaEvent_t zb_free[3];            // the comm stream has consumed bucket k
    int zb_next;                       // the layer bucket the next unit takes
    kc_bf16 *zg[3];                    // ZeRO-3 gather buffers (two for layers, one stage unit); ZeRO-2: zg[0]
                                       // the staging of the all-gather after the step (NULL when unpadded)
    cudaEvent_t zg_ready[3], zg_free[3];
    int zg_holds[2], zg_cur;           // the layer unit each layer buffer holds (-1 none), the one in use
    kc_bf16 *zsh;                      // ZeRO-2: the updated bf16 shard before its all-gather
    /* context parallel (cunet.c's ring) */
    kc_bf16 *cp_kv[2];                 // (2, N·kvl) received K|V blocks
    float *cp_o, *cp_op, *cp_lp, *cp_dq;   // (N·ql) merged output, (N·ql) block output, (N·NHl) its lse;
                                           // cp_dq (N·ql) the backward's fp32 dq (shares cp_op)
    float *cp_dkv[2];                  // (2, 2·N·kvl) travelling dK|dV accumulators
    cudaEvent_t cp_ev[2];              // compute -> comm, comm -> compute
    int *tok_full, *tgt_full;          // cp: (B·Tg) host, one micro-batch as the loader gives it
    /* in-flight (chunk, micro-batch) activation slots */
    int nslots, nfree;
    char **slot_base;                  // (nslots) each slot_bytes
    size_t slot_bytes;
    CuActs *slot_la;                   // (nslots, maxchunk) bound to the slot's chunk
    kc_bf16 **slot_dlast;              // (nslots) loss gradient of the last chunk, interleaved last stage only
    int *slot_of, *slot_free;          // (vp·nmb) slot of (chunk, mb); (nslots) free list
    CuActs *la;                        // layers of the slot in use
    CuActs ws;                         // recompute working set
    kc_bf16 *head_in, *head_n, *logits;   // (Nl, C), (Nl, C), (N, Vl)
    float *head_mean, *head_rstd, *ce_lse, *losses;   // (Nl), (Nl), (N), (nmb, N)
    float *ce_red;                     // (3N) vocab-parallel CE: max, sum-exp, target logit
    kc_bf16 *dres, *dcol, *dq, *dk, *dv, *drope, *dhpre, *dhact, *rc_out, *grad_in;   // dres, rc_out (Nl, C)
    kc_bf16 *gath, *part, *dgat, *dout;   // sp only: (N, C) gathered input, row-parallel partial sums,
                                          // gathered dres; (Nl, C) reduce-scattered input gradient
    /* pipeline send ring */
    kc_bf16 *ring;                     // (nring, Nl, C)
    int nring, ring_next;
    cudaEvent_t *ring_ready, *ring_sent;   // (nring) written on compute / sent on a send stream
    int *ring_used;                    // (nring) a send from this entry is outstanding
    /* DP buckets */
    CuBucket *bk;                      // (layers + 1)
    int nbk;
    int *bk_of_layer;                  // (layers) bucket index
    cudaEvent_t *bk_ev;                // (layers + 1) recorded when a bucket's grads are final
    cudaEvent_t comm_done;             // the comm stream's last bucket
    int *d_tokens, *d_targets;         // (nmb, N) device
    int *tokens, *targets;             // (nmb, N) host
    float *h_losses;                   // (nmb, N) host
    /* timers: event pairs per phase segment, summed at the end of a step */
    cudaEvent_t *ev;                   // (2·ev_cap)
    int *ev_phase;                     // (ev_cap)
    int ev_cap, ev_n;
    int cur_phase;                     // open segment, -1 none
    cudaEvent_t step0, step1;
    double t[PH_COUNT];                // seconds of the last step by phase
    /* mixture of experts (cunet.c's MoE layer; all 0 / NULL for a dense model) */
    int E, K, El;                      // experts, top-k, experts on this rank (E/ep)
    int Fs, F1s;                       // shared expert's hidden width (0: none), its FC1 output
    int edp, xzero;                    // expert data-parallel size; ZeRO-1 of the expert region over edp
    size_t opt_nd;                     // floats of the dense part of the masters (the rest: the experts')
    size_t xopt_n, xopt_off;           // this rank's expert masters: floats, where they start in the slab
    float aux_g;                       // the load-balancing loss's gradient factor (kc_moe_router_bwd)
    CuMoe moe;                         // the routed block's scratch (one for every layer)
    CuMoeActs *moe_acts;               // (nslots·maxchunk + 1): per slot layer, the last the working set's
    int n_moe_acts;
    kc_bf16 *moe_out;                  // (N, C) routed output before it joins the shared expert's
    char moe_err[256];                 // a routed block's failure (rows over its cap), checked after the step
    void *f8_scratch;                  // fp8 plans: the fp8 kernels' scratch, lent to them (kc_fp8_use_scratch)
    size_t f8_scratch_bytes;
    KcFp8Weight *f8w;                  // (layers·CUFP8_NW) fp8 keep: each local layer's weight copies, cast once
                                       // a step (cufp8.h); NULL otherwise
    long *f8w_gen;                     // (layers·CUFP8_NW) the step generation each was cast at
    long f8_gen;                       // bumped at the start of every step
    size_t free_min;                   // least free device memory seen (cudaMemGetInfo), bytes
    size_t dev_total;                  // device memory, bytes
    int device;                        // CUDA device of this rank
} CuExec;

typedef struct {
    double loss;                       // mean over the batch, nats (proxy: of the local vocab shard)
    double t[PH_COUNT];                // seconds by phase (CUDA events)
    double step_s;                     // seconds, events around the whole step
} CuStepStats;

/* A whole plan, this rank's part of it, on the GPU of its node-local rank,
 * reading data; needs MPI initialised, and as many ranks as the plan's
 * dp·tp·pp·cp (one: dp = tp = pp = cp = 1). Collective. 0, or -1 with err (a
 * layout it can't run, head size the attention kernel lacks, fewer GPUs
 * than ranks on the node, data, not enough device memory); the ranks agree
 * on failures found before the NCCL set-up, later ones are this rank's. */
int cuexec_init(CuExec *e, const ModelSpec *m, const Layout *lo, const TrainOpts *o,
                const char *data, char *err, int errlen);
/* Stage `stage` of the plan as one tp rank would run it (proxy mode). */
int cuexec_init_proxy(CuExec *e, const ModelSpec *m, const Layout *lo, int stage, uint64_t seed,
                      char *err, int errlen);
/* One optimizer step (proxy: fwd + bwd of the plan's m micro-batches, no
 * optimizer). Synchronises at its end. Collective; the loss is the world's. */
int cuexec_step(CuExec *e, CuStepStats *st, char *err, int errlen);
/* Device bytes in use at the peak: total − least free seen (includes the
 * CUDA context and cuBLASLt workspace). */
double cuexec_peak_bytes(const CuExec *e);
/* Checkpoint in ckpt.h's format (the CPU executor's files, same checks and
 * messages): the fp32 master weights (under ZeRO-1/2/3 all-gathered over
 * dp·cp, so every file holds its stage's full weights), this rank's AdamW m
 * and v (its shard, in the layout's order), the
 * step and the data position, copied to host after a stream sync. Load
 * verifies as exec_load, copies back, rebuilds the bf16 weights from the
 * masters and restores step and data position. Collective; not in proxy
 * mode. 0, or -1 with err (the same on every rank). */
int cuexec_save(CuExec *e, const char *dir, char *err, int errlen);
int cuexec_load(CuExec *e, const char *dir, char *err, int errlen);
void cuexec_free(CuExec *e);

#endif
