/* cuplan.h — the host-side arithmetic of the multi-GPU CUDA executor, as
 * pure functions so that a unit test holds them without a GPU: the DP
 * gradient buckets, the ZeRO-1 shard of this rank, the ZeRO-2/3 units and
 * their shards, the per-chunk recomputation, the pipeline's point-to-point
 * links, the sequence-parallel slices and gradient syncs, and the context-
 * parallel token chunks.
 *
 * Pipeline links. exec.c sends with MPI_Isend (never blocks the sender) and
 * receives with a blocking MPI_Recv. NCCL runs every operation of one
 * communicator in the order it was issued, so one pp communicator carrying
 * sends and receives both ways could deadlock (stage s queues "send to s+1"
 * before "receive from s+1" while s+1 queues the reverse). So each directed
 * link has its own two-rank communicator, its sender only sends on it (from a
 * send stream, one per direction) and its receiver only receives (on the
 * compute stream): a FIFO per link, in the same order on both ends because
 * every stage walks the micro-batches in the same (chunk, mb) order
 * (sched.c's virt()). That is MPI_Isend/MPI_Recv's semantics.
 *
 *   forward link l   (0 <= l < pp): stage l -> stage (l+1) % pp
 *   backward link l  (id pp + l):   stage (l+1) % pp -> stage l
 * Link l < pp − 1 always exists (pp > 1); link pp − 1 (the wrap from the last
 * stage to the first) only with interleaving (vp > 1).
 */
#ifndef ULTRAPLAN_EXECUTOR_CUDA_CUPLAN_H
#define ULTRAPLAN_EXECUTOR_CUDA_CUPLAN_H

#include <stddef.h>

#include "layout.h"
#include "params.h"

/* One all-reduce of the DP gradients: a contiguous run of the grad slab. */
typedef struct {
    size_t start, n;   // floats
    int layer;         // local layer, or -1 for the stage tensors (embedding, final norm, head)
} CuBucket;

/* The buckets of exec.c: one per local layer (launched after the last
 * micro-batch's backward of that layer), then one for the stage-level
 * tensors when the stage has any. out holds ps->nlayers + 1. Returns the count. */
int cuplan_buckets(const ParamSet *ps, CuBucket *out);

/* ZeRO-1 over dp ranks of n parameters: the slab padded to a multiple of
 * dp (n_alloc), the shard length (opt_n = n_alloc / dp) and its offset.
 * dp 1 or !zero1: the whole slab. */
void cuplan_shard(size_t n, int dp, int dp_rank, int zero1, size_t *n_alloc, size_t *opt_n, size_t *off);

/* The routed experts' masters (MoE, params.h's expert region [x_off,
 * x_off + x_alloc)): under ZeRO-1 / dist-opt with edp > 1 (xzero) rank
 * edp_rank's slice of x_alloc / edp floats (x_alloc is padded to edp by
 * params_layout), else the whole region: *n floats from slab offset *off
 * (exec.c's xopt_n, xopt_off). */
void cuplan_expert_shard(const ParamSet *ps, int edp, int edp_rank, int xzero, size_t *n, size_t *off);

/* ZeRO-2/3 (FSDP-style, issue 18): the units are the local layers (each
 * contiguous in the slab) and, when the stage has any, one stage unit of
 * every non-layer tensor (ps->layers_end .. ps->n): exactly cuplan_buckets'
 * runs. Each unit's length is padded up to a multiple of D = dp·cp (pad);
 * rank k of the dp·cp group owns floats [k·pad/D, (k+1)·pad/D) of the padded
 * unit (slice = pad/D); a rank's shard is its slices of every unit in unit
 * order (shard_off: where unit u's slice starts in it). */
typedef struct {
    size_t start, n;       // floats of the slab: the unit is slab[start .. start + n)
    size_t pad;            // n rounded up to a multiple of D
    size_t slice;          // pad / D: floats of it each rank owns
    size_t shard_off;      // where this rank's slice sits in its shard
    int layer;             // local layer, -1 for the stage unit
} CuUnit;

/* The units of ps over a group of D ranks (out holds ps->nlayers + 1);
 * returns the count and the shard length (the sum of the slices) in *shard. */
int cuplan_units(const ParamSet *ps, int D, CuUnit *out, size_t *shard);
/* Rank k's slice of unit u in the slab: floats [*first, *first + *len) of the
 * slab hold real parameters (len may be < slice, or 0, at the padded end). */
void cuplan_unit_slice(const CuUnit *u, int k, size_t *first, size_t *len);

/* Context parallel (Megatron's load balance): the T tokens of a sequence in
 * 2·cp chunks of c = T/(2·cp); cp rank r holds chunks r and 2·cp−1−r, in
 * that order, as its T/cp local positions. The global position of local
 * position t (0 <= t < T/cp); with cp 1, t itself. */
int cuplan_cp_pos(int T, int cp, int r, int t);

/* Per local layer (chunks in order) 0 none, 1 selective, 2 full recompute:
 * each chunk takes its share of the stage's full_rc / sel_rc, first layers
 * first (exec.c's rule). nchunks chunks of chunk_layers[c] layers. */
void cuplan_recompute(int full, int sel, int nchunks, const int *chunk_layers, int *rc);

typedef enum { CL_FWD_OUT, CL_FWD_IN, CL_BWD_OUT, CL_BWD_IN, CL_COUNT } CuLinkRole;

typedef struct {
    int id;            // 0..2pp−1, or -1: this stage has no such link
    int peer;          // the other stage
    int sender;        // 1: this stage sends on it
} CuLink;

/* The links of `stage` by role. wrap: vp > 1. */
void cuplan_links(int pp, int stage, int wrap, CuLink out[CL_COUNT]);
/* Sender and receiver stage of link id; 0, or -1 when it doesn't exist. */
int cuplan_link_ends(int pp, int wrap, int id, int *sender, int *receiver);

/* Entries of the send ring (exec.c's count): activations in flight. */
int cuplan_ring(int pp, int vp, int nmb);

/* Sequence parallel (Megatron; exec.c's split). The N = B·T tokens of a
 * micro-batch, flattened batch-major as every (N, C) tensor here, are cut
 * into tp contiguous slices: tp rank r holds rows r·Nl .. r·Nl + Nl − 1,
 * Nl = N/tp, exactly where ncclAllGather and ncclReduceScatter put rank r's
 * part (and where exec.c's MPI all-gather / reduce-scatter put it). Without
 * SP (or with tp 1) every rank holds all N rows. 0, or -1 when tp doesn't
 * divide N under SP. */
int cuplan_sp_rows(int N, int tp, int tp_rank, int sp, int *first, int *nl);

/* The gradients that are partial per tp rank under SP and must be summed
 * over tp before the optimizer (exec.c's sp_sync): of local layer `layer`
 * its replicated tensors (SPLIT_REP: norms, row-parallel biases), or with
 * layer -1 the stage's final norm. The position embedding is not among
 * them: its backward reads the gathered gradient, whole on every rank.
 * Tensors adjacent in the slab share one range. out holds P_LAYER_COUNT;
 * returns the count (0 on a stage without such tensors). */
int cuplan_sp_sync(const ParamSet *ps, int layer, CuBucket *out);

/* Expert parallelism (Megatron-core "parallel folding", RankGenerator for
 * experts, order tp-ep-dp-pp with etp in place of tp): the tp·cp·dp ranks
 * of a stage, indexed L = tp_rank + tp·(cp_rank + cp·dp_rank) as the
 * attention layers order them, are reread for the expert layers as L =
 * etp_rank + etp·(ep_rank + ep·edp_rank): etp fastest, then ep, then edp
 * (edp = tp·cp·dp/(etp·ep)). A rank's (etp, ep, edp) coordinates are
 * dist_init_experts' (the CPU executor's, one copy of the rule);
 * cuplan_expert_local is its inverse: the stage index L of the rank with
 * the given expert coordinates (cucomm_init_moe finds each group's first
 * rank with it). */
int cuplan_expert_local(int ep, int etp, int etp_rank, int ep_rank, int edp_rank);

#endif
