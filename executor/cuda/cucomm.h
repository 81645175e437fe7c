/* cucomm.h — the NCCL communicators of one rank of a multi-GPU CUDA run,
 * bootstrapped over the executor's MPI groups (dist.h): for tp, dp and the
 * tied-embedding group, rank 0 of the MPI group calls ncclGetUniqueId and
 * dist_bcast_bytes carries it to the others, then ncclCommInitRank with the
 * rank's coordinate in that group; the pipeline's directed links
 * (cuplan.h) get two-rank communicators whose ids pp rank 0 makes and
 * broadcasts over the pp group. Groups of one get no communicator (their
 * collectives are no-ops).
 *
 * Context parallel (issue 18): the cp group (same tp, dp, pp) and the dp·cp
 * group (same tp, pp; rank cp_rank + cp·dp_rank) over which gradients are
 * reduced and ZeRO shards. Their ids are made by each group's rank 0 and
 * reach the members through the world (every rank's id gathered to world
 * rank 0 and broadcast as bytes; dist.h names no MPI group for them here).
 * With cp 1 the dp·cp group is the dp communicator itself (one handle).
 *
 * Creation order is the same on every rank (tp, dp, embedding, cp, dp·cp,
 * then links by ascending id), so the blocking ncclCommInitRank calls never
 * wait on each other in a cycle. Also owns the communication stream
 * (non-blocking) on which the DP buckets, the ZeRO reduce-scatters and
 * gathers and the CP ring overlap the compute stream.
 *
 * Faults: every NCCL and CUDA call goes through a check that prints
 *   [rank R] NCCL error at FILE:LINE in CALL: NCCL's message (last error)
 * and exits 1 (mpirun then ends the job). In a build without NCCL
 * (cucomm_none.c) cucomm_available() is 0 and cucomm_init fails with a
 * message saying so.
 *
 * Calibration (calib/bench_cuda_run.c) uses the same wrapper: a world
 * communicator over the MPI world (one GPU per rank), or, in one process,
 * one communicator per visible GPU (ncclCommInitAll) driven inside
 * cucomm_group_start/end; the only other NCCL user of the tree is none.
 *
 * Mixture of experts (issue 20): cucomm_init_moe adds the expert layers'
 * groups of Megatron-core's parallel folding (dist_init_experts: etp
 * fastest, then ep, then edp over a stage's tp·cp·dp ranks): CC_EP (token
 * dispatch and combine), CC_ETP (an expert's tensor-parallel ranks; the tp
 * handle itself when etp = tp) and CC_EDP (the routed experts' gradient
 * and ZeRO group), ids through the world as for cp. cucomm_alltoallv is the
 * dispatch/combine: one ncclGroupStart/End of ncclSend/ncclRecv per peer
 * with rows, its own part a device copy, on the stream it is given (the
 * executor passes the communication stream).
 *
 * What it doesn't: NCCL's non-blocking (config.blocking = 0) mode. The
 * executor makes the expert groups for an MoE plan (cuexec.c, etp 1) and
 * sums the routed experts' gradients over CC_EDP (docs/gpu/NOTES.md,
 * "Mixture of experts").
 */
#ifndef ULTRAPLAN_EXECUTOR_CUDA_CUCOMM_H
#define ULTRAPLAN_EXECUTOR_CUDA_CUCOMM_H

#include <cuda_runtime_api.h>
#include <stddef.h>

#include "cuplan.h"
#include "dist.h"

/* CC_DPCP: the gradient / ZeRO group (dp·cp; CC_DP's handle when cp is 1);
 * CC_WORLD: calibration only */
/* CC_EP, CC_ETP, CC_EDP: the expert layers' groups (cucomm_init_moe) */
typedef enum { CC_TP, CC_DP, CC_EMB, CC_CP, CC_DPCP, CC_WORLD, CC_EP, CC_ETP, CC_EDP, CC_GROUPS } CuGroup;
typedef enum { CC_F32, CC_BF16 } CuType;
typedef enum { CC_SUM, CC_MAX } CuOp;

typedef struct CuComm CuComm;

/* 1 when this build has NCCL. */
int cucomm_available(void);

/* Collective over the world: every rank calls it once, after
 * cudaSetDevice. wrap: the pipeline has the last -> first links (vp > 1);
 * tied: a tied embedding with pp > 1 (the embedding group). NULL with err
 * when the build has no NCCL. */
CuComm *cucomm_init(const Dist *d, int wrap, int tied, char *err, int errlen);
void cucomm_free(CuComm *c);

/* Calibration. The MPI world as group CC_WORLD on the current device
 * (collective); or one process over devices 0..n-1, comms[d] on device d
 * (CC_WORLD of n, rank d). NULL / -1 with err without NCCL. */
CuComm *cucomm_init_world(char *err, int errlen);
int cucomm_init_local(int n, CuComm **comms, char *err, int errlen);
/* Bracket the calls of one process that drives several GPUs, or a send
 * and a receive issued together (ncclGroupStart/End). */
void cucomm_group_start(void);
void cucomm_group_end(void);
/* This rank's index in group g (0 when it has no communicator). */
int cucomm_rank(const CuComm *c, CuGroup g);

/* Ranks in group g (1 when it has no communicator). */
int cucomm_size(const CuComm *c, CuGroup g);
/* The communication stream (DP buckets, ZeRO-1). */
cudaStream_t cucomm_stream(const CuComm *c);

/* Collectives on st; no-ops for a group of one. n counts elements. */
void cucomm_allreduce(CuComm *c, CuGroup g, void *x, size_t n, CuType t, CuOp op, cudaStream_t st);
/* Out of place: in (n) summed over the group into out (n). */
void cucomm_allreduce_to(CuComm *c, CuGroup g, const void *in, void *out, size_t n, CuType t, CuOp op,
                         cudaStream_t st);
/* In place: buf holds size·n_each elements; this rank's reduced part lands
 * at buf + rank·n_each. */
void cucomm_reduce_scatter(CuComm *c, CuGroup g, void *buf, size_t n_each, CuType t, cudaStream_t st);
/* In place: this rank's n_each elements at buf + rank·n_each go to everyone. */
void cucomm_allgather(CuComm *c, CuGroup g, void *buf, size_t n_each, CuType t, cudaStream_t st);
/* Out of place (sequence parallel): in (n_each) summed over the group's
 * `in` buffers of size·n_each, this rank's part (rank·n_each on) into out;
 * and in (n_each) of every rank, in rank order, into out (size·n_each). in
 * and out must not overlap. */
void cucomm_reduce_scatter_to(CuComm *c, CuGroup g, const void *in, void *out, size_t n_each, CuType t,
                              cudaStream_t st);
void cucomm_allgather_from(CuComm *c, CuGroup g, const void *in, void *out, size_t n_each, CuType t,
                           cudaStream_t st);

/* One step of a ring over group g, issued together (ncclGroupStart/End):
 * send (n) to rank + 1 and recv (n) from rank − 1, modulo the size. send
 * and recv must not overlap. A no-op for a group of one. */
void cucomm_ring(CuComm *c, CuGroup g, const void *send, void *recv, size_t n, CuType t, cudaStream_t st);

/* Point-to-point on this stage's link of role r (cuplan.h); the role must
 * exist and be a send (cucomm_send) or a receive (cucomm_recv) link. */
void cucomm_send(CuComm *c, CuLinkRole r, const void *buf, size_t n, CuType t, cudaStream_t st);
void cucomm_recv(CuComm *c, CuLinkRole r, void *buf, size_t n, CuType t, cudaStream_t st);
/* Expert groups: a world collective (every rank, same order), after
 * cucomm_init and dist_init_experts (whose ep, etp, edp and this rank's
 * coordinates in them it uses). Groups of one get no communicator. 0, or
 * -1 with err when d holds no expert layout. */
int cucomm_init_moe(CuComm *c, const Dist *d, char *err, int errlen);
/* All-to-all with counts over group g: scount[p] elements from send +
 * sdispl[p] go to rank p, rcount[p] from rank p land at recv + rdispl[p]
 * (elements; arrays of the group's size, host). A group of one copies its
 * own part. send and recv must not overlap. */
void cucomm_alltoallv(CuComm *c, CuGroup g, const void *send, const size_t *scount, const size_t *sdispl,
                      void *recv, const size_t *rcount, const size_t *rdispl, CuType t, cudaStream_t st);
/* Point-to-point with rank `peer` of group g (calibration's send/recv). */
void cucomm_send_peer(CuComm *c, CuGroup g, int peer, const void *buf, size_t n, CuType t, cudaStream_t st);
void cucomm_recv_peer(CuComm *c, CuGroup g, int peer, void *buf, size_t n, CuType t, cudaStream_t st);

#endif
