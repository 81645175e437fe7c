/* cucomm.c — see cucomm.h. The only file that includes nccl.h. */
#include "cucomm.h"

#include <nccl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct CuComm {
    int rank;                       // world rank, for messages
    ncclComm_t g[CC_GROUPS];        // NULL: group of one
    int size[CC_GROUPS], grank[CC_GROUPS];
    ncclComm_t link[CL_COUNT];      // by role; NULL: no such link
    CuLink role[CL_COUNT];
    cudaStream_t stream;            // communication stream
};

static int g_rank = -1;

static void nccl_fail(ncclResult_t r, ncclComm_t c, const char *call, const char *file, int line)
{
    fprintf(stderr, "[rank %d] NCCL error at %s:%d in %s: %s (%s)\n", g_rank, file, line, call,
            ncclGetErrorString(r), ncclGetLastError(c));
    fflush(stderr);
    exit(1);
}

#define CHECK_NCCL(call) do { ncclResult_t r_ = (call); \
        if (r_ != ncclSuccess) nccl_fail(r_, NULL, #call, __FILE__, __LINE__); } while (0)
#define CHECK_CU(call) do { cudaError_t e_ = (call); if (e_ != cudaSuccess) { \
        fprintf(stderr, "[rank %d] CUDA error at %s:%d in %s: %s\n", g_rank, __FILE__, __LINE__, #call, \
                cudaGetErrorString(e_)); fflush(stderr); exit(1); } } while (0)

int cucomm_available(void) { return 1; }

static ncclDataType_t nt(CuType t) { return t == CC_F32 ? ncclFloat32 : ncclBfloat16; }
static size_t esize(CuType t) { return t == CC_F32 ? 4 : 2; }

/* rank 0 of the MPI group makes the id; every member joins */
static ncclComm_t group_init(MPI_Comm mc, int size, int rank)
{
    ncclUniqueId id;
    memset(&id, 0, sizeof id);
    if (rank == 0)
        CHECK_NCCL(ncclGetUniqueId(&id));
    dist_bcast_bytes(&id, (int)sizeof id, mc);
    ncclComm_t c = NULL;
    CHECK_NCCL(ncclCommInitRank(&c, size, id, rank));
    return c;
}

/* A group with no MPI communicator of its own: world rank `leader` (the
 * group's rank 0) makes the id; every rank's id goes to world rank 0, which
 * broadcasts them all (bytes), and each rank joins with its leader's. A world
 * collective: every rank calls it, in the same order. */
static ncclComm_t group_init_world(const Dist *d, int leader, int size, int rank)
{
    enum { NU = (sizeof(ncclUniqueId) + 7) / 8 };
    unsigned long long mine[NU];
    memset(mine, 0, sizeof mine);
    ncclUniqueId id;
    memset(&id, 0, sizeof id);
    if (rank == 0) {
        CHECK_NCCL(ncclGetUniqueId(&id));
        memcpy(mine, &id, sizeof id);
    }
    unsigned long long *all = calloc((size_t)d->world * NU, sizeof *all);
    if (!all) {
        fprintf(stderr, "[rank %d] out of host memory for communicator ids\n", d->rank);
        exit(1);
    }
    dist_world_gather_u64(mine, NU, all);
    dist_world_bcast_bytes(all, (int)((size_t)d->world * NU * sizeof *all));
    memcpy(&id, all + (size_t)leader * NU, sizeof id);
    free(all);
    ncclComm_t c = NULL;
    CHECK_NCCL(ncclCommInitRank(&c, size, id, rank));
    return c;
}

CuComm *cucomm_init(const Dist *d, int wrap, int tied, char *err, int errlen)
{
    (void)err, (void)errlen;
    g_rank = d->rank;
    CuComm *c = calloc(1, sizeof *c);
    if (!c) {
        fprintf(stderr, "[rank %d] out of host memory for communicators\n", d->rank);
        exit(1);
    }
    c->rank = d->rank;
    MPI_Comm mc[CC_GROUPS] = {d->tp_comm, d->dp_comm, d->emb_comm, MPI_COMM_NULL, MPI_COMM_NULL, MPI_COMM_NULL};
    int size[CC_GROUPS] = {d->tp, d->dp, tied && d->pp > 1 ? 2 : 1, d->cp, d->dp * d->cp, 1};
    int rank[CC_GROUPS] = {d->tp_rank, d->dp_rank, d->pp_rank == 0 ? 0 : 1, d->cp_rank,
                           d->cp_rank + d->cp * d->dp_rank, 0};
    int leader[CC_GROUPS] = {0, 0, 0, dist_rank_of(d, d->tp_rank, 0, d->dp_rank, d->pp_rank),
                             dist_rank_of(d, d->tp_rank, 0, 0, d->pp_rank), 0};
    for (int g = 0; g < CC_GROUPS; g++) {
        c->size[g] = 1;
        if (size[g] <= 1)
            continue;
        if (g == CC_DPCP && d->cp == 1) {   // the dp group itself
            c->g[g] = c->g[CC_DP];
        } else if (g == CC_CP || g == CC_DPCP) {
            c->g[g] = group_init_world(d, leader[g], size[g], rank[g]);
        } else if (mc[g] != MPI_COMM_NULL) {
            c->g[g] = group_init(mc[g], size[g], rank[g]);
        } else {
            continue;
        }
        c->size[g] = size[g];
        c->grank[g] = rank[g];
    }
    if (d->pp > 1) {
        /* pp rank 0 makes every link's id; each rank joins its links by ascending id */
        int nl = 2 * d->pp;
        ncclUniqueId *ids = calloc(nl, sizeof *ids);
        if (!ids) {
            fprintf(stderr, "[rank %d] out of host memory for link ids\n", d->rank);
            exit(1);
        }
        for (int l = 0; l < nl && d->pp_rank == 0; l++) {
            int s, r;
            if (cuplan_link_ends(d->pp, wrap, l, &s, &r) == 0)
                CHECK_NCCL(ncclGetUniqueId(&ids[l]));
        }
        dist_bcast_bytes(ids, (int)(nl * sizeof *ids), d->pp_comm);
        cuplan_links(d->pp, d->pp_rank, wrap, c->role);
        for (int l = 0; l < nl; l++)
            for (int r = 0; r < CL_COUNT; r++)
                if (c->role[r].id == l && !c->link[r]) {
                    int me = c->role[r].sender ? 0 : 1;
                    CHECK_NCCL(ncclCommInitRank(&c->link[r], 2, ids[l], me));
                    /* pp 2 with wrap: one link can't hold two roles, but be safe */
                    for (int q = r + 1; q < CL_COUNT; q++)
                        if (c->role[q].id == l)
                            c->link[q] = c->link[r];
                }
        free(ids);
    } else {
        for (int r = 0; r < CL_COUNT; r++)
            c->role[r] = (CuLink){-1, -1, 0};
    }
    CHECK_CU(cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking));
    return c;
}

static CuComm *alloc_comm(int rank)
{
    CuComm *c = calloc(1, sizeof *c);
    if (!c) {
        fprintf(stderr, "[rank %d] out of host memory for communicators\n", rank);
        exit(1);
    }
    c->rank = rank;
    for (int g = 0; g < CC_GROUPS; g++)
        c->size[g] = 1;
    for (int r = 0; r < CL_COUNT; r++)
        c->role[r] = (CuLink){-1, -1, 0};
    return c;
}

CuComm *cucomm_init_world(char *err, int errlen)
{
    (void)err, (void)errlen;
    int rank = 0, world = 1;
    dist_world_init(&rank, &world);
    g_rank = rank;
    CuComm *c = alloc_comm(rank);
    if (world > 1) {
        c->g[CC_WORLD] = group_init(MPI_COMM_WORLD, world, rank);
        c->size[CC_WORLD] = world;
        c->grank[CC_WORLD] = rank;
    }
    CHECK_CU(cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking));
    return c;
}

int cucomm_init_local(int n, CuComm **comms, char *err, int errlen)
{
    (void)err, (void)errlen;
    g_rank = 0;
    ncclComm_t *h = calloc((size_t)n, sizeof *h);
    if (!h) {
        fprintf(stderr, "out of host memory for communicators\n");
        exit(1);
    }
    CHECK_NCCL(ncclCommInitAll(h, n, NULL));
    for (int d = 0; d < n; d++) {
        CuComm *c = alloc_comm(0);
        c->g[CC_WORLD] = h[d];
        c->size[CC_WORLD] = n;
        c->grank[CC_WORLD] = d;
        CHECK_CU(cudaSetDevice(d));
        CHECK_CU(cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking));
        comms[d] = c;
    }
    CHECK_CU(cudaSetDevice(0));
    free(h);
    return 0;
}

void cucomm_group_start(void) { CHECK_NCCL(ncclGroupStart()); }
void cucomm_group_end(void) { CHECK_NCCL(ncclGroupEnd()); }
int cucomm_rank(const CuComm *c, CuGroup g) { return c && c->g[g] ? c->grank[g] : 0; }

void cucomm_free(CuComm *c)
{
    if (!c)
        return;
    if (c->stream) {
        cudaStreamSynchronize(c->stream);
        cudaStreamDestroy(c->stream);
    }
    for (int g = 0; g < CC_GROUPS; g++) {
        int alias = 0;   // an alias (dp·cp = dp, etp = tp) is destroyed once
        for (int h = 0; h < g; h++)
            alias |= c->g[h] == c->g[g];
        if (c->g[g] && !alias)
            ncclCommDestroy(c->g[g]);
    }
    /* Links go in ascending id, the order they were made in: destroying
     * talks to the other end (NCCL >= 2.23), so by role (every stage's
     * forward-out link first) the ring of an interleaved pipeline would wait
     * on itself. */
    for (;;) {
        int best = -1;
        for (int r = 0; r < CL_COUNT; r++)
            if (c->link[r] && (best < 0 || c->role[r].id < c->role[best].id))
                best = r;
        if (best < 0)
            break;
        ncclComm_t h = c->link[best];
        for (int q = 0; q < CL_COUNT; q++)   // a shared handle is destroyed once
            if (c->link[q] == h)
                c->link[q] = NULL;
        ncclCommDestroy(h);
    }
    free(c);
}

int cucomm_size(const CuComm *c, CuGroup g) { return c ? c->size[g] : 1; }
cudaStream_t cucomm_stream(const CuComm *c) { return c ? c->stream : NULL; }

#define CHECK_ON(comm, call) do { ncclResult_t r_ = (call); \
        if (r_ != ncclSuccess) nccl_fail(r_, (comm), #call, __FILE__, __LINE__); } while (0)

void cucomm_allreduce(CuComm *c, CuGroup g, void *x, size_t n, CuType t, CuOp op, cudaStream_t st)
{
    if (!c || !c->g[g] || !n)
        return;
    CHECK_ON(c->g[g], ncclAllReduce(x, x, n, nt(t), op == CC_SUM ? ncclSum : ncclMax, c->g[g], st));
}

void cucomm_allreduce_to(CuComm *c, CuGroup g, const void *in, void *out, size_t n, CuType t, CuOp op,
                         cudaStream_t st)
{
    if (!c || !c->g[g] || !n)
        return;
    CHECK_ON(c->g[g], ncclAllReduce(in, out, n, nt(t), op == CC_SUM ? ncclSum : ncclMax, c->g[g], st));
}

void cucomm_reduce_scatter(CuComm *c, CuGroup g, void *buf, size_t n_each, CuType t, cudaStream_t st)
{
    if (!c || !c->g[g] || !n_each)
        return;
    char *out = (char *)buf + (size_t)c->grank[g] * n_each * esize(t);
    CHECK_ON(c->g[g], ncclReduceScatter(buf, out, n_each, nt(t), ncclSum, c->g[g], st));
}

void cucomm_allgather(CuComm *c, CuGroup g, void *buf, size_t n_each, CuType t, cudaStream_t st)
{
    if (!c || !c->g[g] || !n_each)
        return;
    char *in = (char *)buf + (size_t)c->grank[g] * n_each * esize(t);
    CHECK_ON(c->g[g], ncclAllGather(in, buf, n_each, nt(t), c->g[g], st));
}

void cucomm_reduce_scatter_to(CuComm *c, CuGroup g, const void *in, void *out, size_t n_each, CuType t,
                              cudaStream_t st)
{
    if (!c || !c->g[g] || !n_each)
        return;
    CHECK_ON(c->g[g], ncclReduceScatter(in, out, n_each, nt(t), ncclSum, c->g[g], st));
}

void cucomm_allgather_from(CuComm *c, CuGroup g, const void *in, void *out, size_t n_each, CuType t,
                           cudaStream_t st)
{
    if (!c || !c->g[g] || !n_each)
        return;
    CHECK_ON(c->g[g], ncclAllGather(in, out, n_each, nt(t), c->g[g], st));
}

static ncclComm_t link_of(CuComm *c, CuLinkRole r, int send)
{
    if (!c || !c->link[r] || c->role[r].sender != send) {
        fprintf(stderr, "[rank %d] internal: no pipeline %s link for role %d\n", g_rank, send ? "send" : "receive",
                (int)r);
        exit(1);
    }
    return c->link[r];
}

/* on a two-rank link the sender is rank 0 and the receiver rank 1 */
void cucomm_send(CuComm *c, CuLinkRole r, const void *buf, size_t n, CuType t, cudaStream_t st)
{
    ncclComm_t l = link_of(c, r, 1);
    CHECK_ON(l, ncclSend(buf, n, nt(t), 1, l, st));
}

void cucomm_recv(CuComm *c, CuLinkRole r, void *buf, size_t n, CuType t, cudaStream_t st)
{
    ncclComm_t l = link_of(c, r, 0);
    CHECK_ON(l, ncclRecv(buf, n, nt(t), 0, l, st));
}

void cucomm_send_peer(CuComm *c, CuGroup g, int peer, const void *buf, size_t n, CuType t, cudaStream_t st)
{
    if (!c || !c->g[g] || !n)
        return;
    CHECK_ON(c->g[g], ncclSend(buf, n, nt(t), peer, c->g[g], st));
}

void cucomm_recv_peer(CuComm *c, CuGroup g, int peer, void *buf, size_t n, CuType t, cudaStream_t st)
{
    if (!c || !c->g[g] || !n)
        return;
    CHECK_ON(c->g[g], ncclRecv(buf, n, nt(t), peer, c->g[g], st));
}

void cucomm_ring(CuComm *c, CuGroup g, const void *send, void *recv, size_t n, CuType t, cudaStream_t st)
{
    if (!c || !c->g[g] || !n)
        return;
    int sz = c->size[g], me = c->grank[g];
    CHECK_NCCL(ncclGroupStart());
    CHECK_ON(c->g[g], ncclSend(send, n, nt(t), (me + 1) % sz, c->g[g], st));
    CHECK_ON(c->g[g], ncclRecv(recv, n, nt(t), (me - 1 + sz) % sz, c->g[g], st));
    CHECK_NCCL(ncclGroupEnd());
}

/* world rank of the stage's rank with stage index L (tp fastest, then cp, then dp) */
static int world_of_local(const Dist *d, int L)
{
    return dist_rank_of(d, L % d->tp, L / d->tp % d->cp, L / (d->tp * d->cp), d->pp_rank);
}

int cucomm_init_moe(CuComm *c, const Dist *d, char *err, int errlen)
{
    int ep = d->ep, etp = d->etp, edp = d->edp, er = d->etp_rank, pr = d->ep_rank, dr = d->edp_rank;
    if (!c || ep < 1 || etp < 1 || ep * etp * edp != d->tp * d->cp * d->dp) {
        snprintf(err, errlen, "expert layers: etp %d x ep %d x edp %d is not tp*cp*dp = %d (dist_init_experts "
                 "first)", etp, ep, edp, d->tp * d->cp * d->dp);
        return -1;
    }
    int size[3] = {ep, etp, edp}, rank[3] = {pr, er, dr};
    int lead[3] = {cuplan_expert_local(ep, etp, er, 0, dr), cuplan_expert_local(ep, etp, 0, pr, dr),
                   cuplan_expert_local(ep, etp, er, pr, 0)};
    CuGroup grp[3] = {CC_EP, CC_ETP, CC_EDP};
    for (int k = 0; k < 3; k++) {
        CuGroup g = grp[k];
        c->size[g] = 1, c->grank[g] = 0, c->g[g] = NULL;
        if (size[k] <= 1)   // the same on every rank: no world collective is skipped by some only
            continue;
        if (g == CC_ETP && etp == d->tp && d->tp > 1) {   // the expert tp group is the tp group
            c->g[g] = c->g[CC_TP];
        } else {
            c->g[g] = group_init_world(d, world_of_local(d, lead[k]), size[k], rank[k]);
        }
        c->size[g] = size[k];
        c->grank[g] = rank[k];
    }
    return 0;
}

void cucomm_alltoallv(CuComm *c, CuGroup g, const void *send, const size_t *scount, const size_t *sdispl,
                      void *recv, const size_t *rcount, const size_t *rdispl, CuType t, cudaStream_t st)
{
    size_t es = esize(t);
    int me = c && c->g[g] ? c->grank[g] : 0, sz = c && c->g[g] ? c->size[g] : 1;
    if (scount[me])
        CHECK_CU(cudaMemcpyAsync((char *)recv + rdispl[me] * es, (const char *)send + sdispl[me] * es,
                                 scount[me] * es, cudaMemcpyDeviceToDevice, st));
    if (sz == 1)
        return;
    CHECK_NCCL(ncclGroupStart());
    for (int p = 0; p < sz; p++) {
        if (p == me)
            continue;
        if (scount[p])
            CHECK_ON(c->g[g], ncclSend((const char *)send + sdispl[p] * es, scount[p], nt(t), p, c->g[g], st));
        if (rcount[p])
            CHECK_ON(c->g[g], ncclRecv((char *)recv + rdispl[p] * es, rcount[p], nt(t), p, c->g[g], st));
    }
    CHECK_NCCL(ncclGroupEnd());
}
