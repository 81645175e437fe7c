/* dist.h — ranks, groups and communicators of one run. The only part of the
 * executor that creates communicators or calls MPI at all; everything else
 * (exec.c, net.c, ckpt.c, loop.c, the calibration) calls these.
 *
 * World rank r maps to coordinates in Megatron's order tp-cp-dp-pp (tp
 * fastest, pp slowest):  r = tp + TP·(cp + CP·(dp + DP·pp)).
 * Groups: tp (same cp, dp, pp), dp (same tp, cp, pp), pp (same tp, cp, dp),
 * cp (same tp, dp, pp: the ring of context-parallel attention), dpcp (same
 * tp, pp; dp·cp ranks, rank cp_rank + cp·dp_rank: the group gradients are
 * reduced over and ZeRO shards over, since CP ranks hold the same weights
 * and partial gradients; with cp 1 it is the dp communicator itself), and
 * the embedding group {first, last stage} of one (tp, cp, dp), which
 * all-reduces the gradient of a tied embedding when pp > 1.
 *
 * Expert groups (dist_init_experts, mixture of experts): Megatron-core's
 * "parallel folding" re-reads the tp·cp·dp ranks of a stage as etp x ep x
 * edp, etp fastest (its expert RankGenerator, order tp-ep-dp-pp with etp in
 * tp's place and cp 1): with q = tp_rank + tp·(cp_rank + cp·dp_rank),
 * etp_rank = q % etp, ep_rank = (q / etp) % ep, edp_rank = q / (etp·ep).
 * ep (same etp, edp, pp: token dispatch and combine), etp (same ep, edp,
 * pp: an expert's column/row split), edp (same etp, ep, pp: ranks holding
 * the same expert shards; expert gradients reduce and ZeRO-1 shards over
 * it), tpcp (same dp, pp: the ranks holding one micro-batch's tokens, over
 * which the router's per-sequence load counts are summed).
 *
 * What it doesn't do: NCCL.
 */
#ifndef ULTRAPLAN_EXECUTOR_DIST_H
#define ULTRAPLAN_EXECUTOR_DIST_H

#include <mpi.h>

#include "timing.h"

/* A failed MPI call: file, line, the call and MPI's own message, then abort. */
#define CHECK_MPI(call) dist_check((call), #call, __FILE__, __LINE__)

typedef struct {
    int rank, world;          // in MPI_COMM_WORLD
    int tp, dp, pp, cp;       // group sizes
    int tp_rank, dp_rank, pp_rank, cp_rank;   // this rank's coordinates
    MPI_Comm tp_comm, dp_comm, pp_comm, emb_comm;  // emb_comm: MPI_COMM_NULL on middle stages
    MPI_Comm cp_comm;         // size cp
    MPI_Comm dpcp_comm;       // size dp·cp; == dp_comm when cp is 1
    int dpcp_rank;            // cp_rank + cp·dp_rank, this rank in dpcp_comm
    /* experts (dist_init_experts; all 1 / MPI_COMM_NULL before) */
    int ep, etp, edp, ep_rank, etp_rank, edp_rank;
    MPI_Comm ep_comm, etp_comm, edp_comm, tpcp_comm;
} Dist;

/* Splits the world for a tp·cp·dp·pp layout. The world size must equal the
 * product: else -1 with err saying what to launch. Installs an error
 * handler on every communicator that names the rank and the failed call. */
int dist_init(Dist *d, int tp, int cp, int dp, int pp, char *err, int errlen);
void dist_free(Dist *d);
/* The expert groups for ep x etp over a dist_init'ed world; etp·ep must
 * divide tp·cp·dp (layout_check). 0, or -1 with err. Collective. */
int dist_init_experts(Dist *d, int ep, int etp, char *err, int errlen);

/* World rank of the given coordinates. */
int dist_rank_of(const Dist *d, int tp, int cp, int dp, int pp);

void dist_check(int rc, const char *call, const char *file, int line);

/* The communication watchdog: a thread that ends this rank when one
 * blocking call has waited timeout_s seconds with no progress (a lost or
 * hung peer), after printing
 *   rank R: no progress in communication with rank(s) X for N s (lost rank?)
 *   during CALL on COMM at step S
 * and exiting 1, so that mpirun (or srun) ends the job. It never calls MPI.
 * timeout_s <= 0 leaves it off. Start after MPI_Init, stop before
 * MPI_Finalize. */
void dist_watchdog_start(double timeout_s);
void dist_watchdog_stop(void);
void dist_watch_step(int step);      // the step that the next waits belong to
/* Never fire before s seconds: the caller raises this to a multiple of the
 * slowest step or checkpoint seen, so a slow but healthy run is not stopped. */
void dist_watchdog_floor(double s);
/* Checkpoint I/O: while limit_s > 0 the watchdog waits up to limit_s (not
 * timeout_s) before it ends the rank, and then says the checkpoint I/O took
 * too long instead of blaming a lost rank; 0 ends the I/O window. */
void dist_watch_io(double limit_s);
double dist_watchdog_timeout(void);   // timeout_s, 0 when the watchdog is off
/* Bracket a blocking call: peer is its rank in c, or -1 for all of c. */
void dist_watch_begin(MPI_Comm c, int peer, const char *call);
void dist_watch_end(void);

/* A blocking MPI call under the watchdog. */
#define CHECK_MPI_WAIT(comm, peer, call) do { \
        dist_watch_begin((comm), (peer), #call); \
        dist_check((call), #call, __FILE__, __LINE__); \
        dist_watch_end(); \
    } while (0)

/* A pending non-blocking call, and the empty one. */
typedef MPI_Request DistReq;
#define DIST_REQ_NULL MPI_REQUEST_NULL
#define DIST_COMM_NULL MPI_COMM_NULL

/* Point-to-point on floats within c (PP activations and their gradients):
 * a blocking receive under the watchdog, a non-blocking send, and waits. */
void dist_recv(float *buf, int n, int src, int tag, MPI_Comm c);
void dist_isend(const float *buf, int n, int dst, int tag, MPI_Comm c, DistReq *r);
void dist_irecv(float *buf, int n, int src, int tag, MPI_Comm c, DistReq *r);   // finished by dist_wait*
void dist_wait(DistReq *r, MPI_Comm c);                 // no-op on DIST_REQ_NULL
void dist_waitall(DistReq *r, int n, MPI_Comm c);
/* In-place sum started now, finished by dist_wait/dist_waitall (DP buckets). */
void dist_iallreduce(float *x, int n, MPI_Comm c, DistReq *r);
void dist_allreduce_max(float *x, int n, MPI_Comm c, double *t);   // in place, max
/* ZeRO-2/3 buckets and gathers, started now and finished by dist_wait:
 * an in-place reduce-scatter (x holds n·size(c) floats; rank i's summed n
 * floats land at x[0, n)), and an all-gather of n floats per rank into
 * out (n·size(c)). With a group of one they finish at once (*r is
 * DIST_REQ_NULL; the gather copies). x, in and out stay untouched until
 * the wait. MPI_Ireduce_scatter_block: the counted form would need its
 * counts array alive until the wait. */
void dist_ireduce_scatter(float *x, int n, MPI_Comm c, DistReq *r);
void dist_iallgather(float *out, const float *in, int n, MPI_Comm c, DistReq *r);
/* In place: rank i's n floats at x + i·n on entry, everyone's on return. */
void dist_allgather_inplace(float *x, int n, MPI_Comm c, double *t);

/* Collectives on floats that time themselves into *t (seconds, may be NULL).
 * With a group of one they are copies or no-ops. */
void dist_allreduce(float *x, int n, MPI_Comm c, double *t);                       // in place, sum
void dist_allgather(float *out, const float *in, int n, MPI_Comm c, double *t);    // n per rank
void dist_reduce_scatter(float *out, float *in, int n, MPI_Comm c, double *t);     // n per rank out; out == in: in place

/* Token dispatch (mixture of experts), timed into *t (may be NULL): an
 * all-to-all of n ints per rank; MPI_Alltoallv / MPI_Allgatherv of floats
 * with counts and displacements in floats; a reduce-scatter of floats with
 * per-rank counts (rank i's sum of in[displ_i, displ_i + counts[i]) lands
 * in out[0, counts[i])). Groups of one copy. */
void dist_alltoall_int(const int *send, int *recv, int n, MPI_Comm c, double *t);
void dist_allgather_int(const int *in, int *out, int n, MPI_Comm c, double *t);
void dist_alltoallv(const float *send, const int *scounts, const int *sdispls, float *recv, const int *rcounts,
                    const int *rdispls, MPI_Comm c, double *t);
void dist_allgatherv(const float *in, int n, float *out, const int *counts, const int *displs, MPI_Comm c,
                     double *t);
void dist_reduce_scatterv(float *out, const float *in, const int *counts, MPI_Comm c, double *t);
int dist_comm_size(MPI_Comm c);

/* The world, for the commands (run, calibrate): start MPI if nobody has,
 * and learn this rank and the world size. */
void dist_world_init(int *rank, int *world);
void dist_world_finalize(void);
double dist_now(void);                      // seconds (MPI_Wtime)
int dist_world_min(int v);                  // over all ranks, under the watchdog
int dist_world_max(int v);
int dist_bcast_int(int v);                  // rank 0's value, on every rank
double dist_bcast_double(double v);

double dist_world_sum(double v);          // over all ranks, under the watchdog
void dist_world_bcast_bytes(void *buf, int n);   // from world rank 0
void dist_world_barrier(void);
/* Every rank learns whether any failed (rc != 0); the lowest failing rank's
 * err replaces err everywhere (so rank 0 can print it). 0 or -1. */
int dist_world_agree(int rc, char *err, int errlen);
/* The rank whose v is largest (the lowest such rank on ties). */
int dist_world_argmax(double v);
/* root's n doubles on every rank. */
void dist_world_bcast_doubles(double *x, int n, int root);
/* Every rank's n values in rank order into all (rank 0 only; may be NULL elsewhere). */
void dist_world_gather_doubles(const double *mine, int n, double *all);
void dist_world_allgather_doubles(const double *mine, int n, double *all);   // on every rank
void dist_world_gather_u64(const unsigned long long *mine, int n, unsigned long long *all);

/* Rank 0's n bytes on every member of c (an NCCL unique id), under the
 * watchdog. */
void dist_bcast_bytes(void *buf, int n, MPI_Comm c);
/* This rank's index among the ranks on its node (the GPU it drives), and
 * how many share the node. */
int dist_local_rank(int *local_size);
void dist_barrier(MPI_Comm c);

/* Calibration over the world. Seconds per call of a collective on `count`
 * floats (all-reduce; reduce-scatter as dist_reduce_scatter calls
 * it; all-gather): the same `reps` calls on every rank (a rank-local
 * stopping rule would deadlock), the median of 7 samples, rank 0's figure. */
double dist_time_collective(CollKind kind, float *buf, int count, int reps);
/* The same rule for MPI_Alltoall of `count` floats to every rank (the
 * dispatch and combine of expert parallelism): buf holds 2·count·world
 * floats, the send half then the receive half. CollKind (model/timing.h)
 * names the collectives the cost model prices through coll_lat/coll_eff;
 * the all-to-all has its own (a2a_lat/a2a_eff), so its own timer. */
double dist_time_alltoall(float *buf, int count, int reps);
/* One-way latency (s) and bandwidth (bytes/s) between ranks 0 and 1 by
 * ping-pong of 8 bytes and 4 MiB; every rank gets rank 0's figures. */
void dist_time_link(double *lat, double *bw);

#endif
