/* dist.c — see dist.h. */
#include "dist.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int g_rank = -1;
static const char *g_last_call = "?";

/* Communicators the watchdog can name: world ranks of their members, filled
 * when they are created, so that the watchdog thread never calls MPI. */
enum { MAX_COMMS = 16 };
static struct {
    MPI_Comm c;
    char name[16];
    int n;
    int *world;          // (n) world rank of each member
} g_comms[MAX_COMMS];
static int g_ncomms;

static void comm_register(MPI_Comm c, const char *name)
{
    if (g_ncomms == MAX_COMMS)
        return;
    MPI_Group g, wg;
    int n = 0;
    MPI_Comm_group(c, &g);
    MPI_Comm_group(MPI_COMM_WORLD, &wg);
    MPI_Group_size(g, &n);
    int *local = malloc(n * sizeof *local), *world = malloc(n * sizeof *world);
    if (!local || !world) {
        free(local), free(world);
    } else {
        for (int i = 0; i < n; i++)
            local[i] = i;
        MPI_Group_translate_ranks(g, n, local, wg, world);
        free(local);
        g_comms[g_ncomms].c = c;
        snprintf(g_comms[g_ncomms].name, sizeof g_comms[0].name, "%s", name);
        g_comms[g_ncomms].n = n;
        g_comms[g_ncomms++].world = world;
    }
    MPI_Group_free(&g);
    MPI_Group_free(&wg);
}

static void comm_unregister_all(void)
{
    for (int i = 0; i < g_ncomms; i++)
        free(g_comms[i].world);
    memset(g_comms, 0, sizeof g_comms);
    g_ncomms = 0;
}

static int comm_index(MPI_Comm c)
{
    for (int i = 0; i < g_ncomms; i++)
        if (g_comms[i].c == c)
            return i;
    return -1;
}

/* The watched call: written by the rank's thread, read by the watchdog. */
static struct {
    atomic_int armed;            // 1 while a watched call blocks
    atomic_uint gen;             // bumped by every begin: a new call is progress
    atomic_int step, comm, peer; // comm: index in g_comms, -1 unknown
    _Atomic(const char *) call;
    double timeout;              // seconds
    atomic_llong floor_ms;       // never fire before this (slow healthy steps)
    atomic_llong io_ms;          // > 0 during checkpoint I/O: its own, longer limit
    atomic_int stop;
    int running;
    pthread_t th;
} wd;

/* "1", "1 2 3", or "the other ranks of dp" for the watched call. */
static void peers_str(char *buf, size_t len, int ci, int peer)
{
    if (ci < 0 || ci >= g_ncomms) {
        snprintf(buf, len, "an unknown rank");
        return;
    }
    if (peer >= 0 && peer < g_comms[ci].n) {
        snprintf(buf, len, "%d", g_comms[ci].world[peer]);
        return;
    }
    size_t at = 0;
    int listed = 0;
    buf[0] = 0;
    for (int i = 0; i < g_comms[ci].n && at + 16 < len; i++) {
        if (g_comms[ci].world[i] == g_rank)
            continue;
        if (listed == 16) {
            at += snprintf(buf + at, len - at, " ...");
            break;
        }
        at += snprintf(buf + at, len - at, "%s%d", listed++ ? " " : "", g_comms[ci].world[i]);
    }
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

static void *watchdog(void *arg)
{
    (void)arg;
    unsigned last = 0;
    double since = 0;
    const struct timespec tick = {0, 100 * 1000 * 1000};
    while (!atomic_load(&wd.stop)) {
        nanosleep(&tick, NULL);
        unsigned gen = atomic_load(&wd.gen);
        if (!atomic_load(&wd.armed) || gen != last) {
            last = gen;
            since = now_s();
            continue;
        }
        double waited = now_s() - since, floor_s = 1e-3 * atomic_load(&wd.floor_ms);
        double io_s = 1e-3 * atomic_load(&wd.io_ms);
        if (waited < wd.timeout || waited < floor_s || waited < io_s)
            continue;
        int ci = atomic_load(&wd.comm);
        const char *call = atomic_load(&wd.call);   // "MPI_Recv(buf, ...)": print the name
        char peers[256], msg[768];
        peers_str(peers, sizeof peers, ci, atomic_load(&wd.peer));
        int n = io_s > 0
                    ? snprintf(msg, sizeof msg,
                               "rank %d: checkpoint I/O of rank(s) %s took longer than its limit of %.0f s "
                               "(storage hung or far slower than assumed?) during %.*s on %s at step %d; "
                               "stopping this rank\n",
                               g_rank, peers, io_s, (int)strcspn(call, "("), call,
                               ci >= 0 ? g_comms[ci].name : "?", atomic_load(&wd.step))
                    : snprintf(msg, sizeof msg,
                               "rank %d: no progress in communication with rank(s) %s for %.0f s (lost rank?) "
                               "during %.*s on %s at step %d; stopping this rank\n",
                               g_rank, peers, waited, (int)strcspn(call, "("), call,
                               ci >= 0 ? g_comms[ci].name : "?", atomic_load(&wd.step));
        if (write(2, msg, n > 0 && n < (int)sizeof msg ? (size_t)n : strlen(msg)) < 0)
            _exit(1);
        _exit(1);
    }
    return NULL;
}

void dist_watchdog_start(double timeout_s)
{
    if (timeout_s <= 0 || wd.running)
        return;
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    if (comm_index(MPI_COMM_WORLD) < 0)
        comm_register(MPI_COMM_WORLD, "world");
    wd.timeout = timeout_s;
    atomic_store(&wd.stop, 0);
    atomic_store(&wd.comm, -1);
    atomic_store(&wd.call, "?");
    wd.running = pthread_create(&wd.th, NULL, watchdog, NULL) == 0;
}

void dist_watchdog_stop(void)
{
    if (wd.running) {
        atomic_store(&wd.stop, 1);
        pthread_join(wd.th, NULL);
        wd.running = 0;
    }
    comm_unregister_all();
}

void dist_watch_step(int step) { atomic_store(&wd.step, step); }

void dist_watchdog_floor(double s)
{
    long long ms = (long long)(1e3 * s);
    if (ms > atomic_load(&wd.floor_ms))
        atomic_store(&wd.floor_ms, ms);
}

void dist_watch_io(double limit_s)
{
    atomic_store(&wd.io_ms, limit_s > 0 ? (long long)(1e3 * limit_s) : 0);
    atomic_fetch_add(&wd.gen, 1);   // entering or leaving I/O restarts the clock
}

double dist_watchdog_timeout(void) { return wd.running ? wd.timeout : 0; }

void dist_watch_begin(MPI_Comm c, int peer, const char *call)
{
    g_last_call = call;
    atomic_store(&wd.comm, comm_index(c));
    atomic_store(&wd.peer, peer);
    atomic_store(&wd.call, call);
    atomic_fetch_add(&wd.gen, 1);
    atomic_store(&wd.armed, 1);
}

void dist_watch_end(void) { atomic_store(&wd.armed, 0); }

void dist_check(int rc, const char *call, const char *file, int line)
{
    if (rc == MPI_SUCCESS)
        return;
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;
    MPI_Error_string(rc, msg, &len);
    fprintf(stderr, "[rank %d] MPI error at %s:%d in %s: %s\n", g_rank, file, line, call, msg);
    MPI_Abort(MPI_COMM_WORLD, 1);
}

/* Errors inside MPI on our communicators land here instead of MPI's default
 * abort, so the message says which rank and which collective failed. */
static void on_error(MPI_Comm *comm, int *code, ...)
{
    char msg[MPI_MAX_ERROR_STRING], name[MPI_MAX_OBJECT_NAME];
    int len = 0, nlen = 0;
    MPI_Error_string(*code, msg, &len);
    MPI_Comm_get_name(*comm, name, &nlen);
    char peers[256] = "";
    if (atomic_load(&wd.armed))
        peers_str(peers, sizeof peers, atomic_load(&wd.comm), atomic_load(&wd.peer));
    fprintf(stderr, "[rank %d] MPI failure in %s on communicator %s%s%s%s: %s\n", g_rank, g_last_call,
            nlen ? name : "?", *peers ? " (waiting for rank(s) " : "", peers, *peers ? ")" : "", msg);
    MPI_Abort(MPI_COMM_WORLD, 1);
}

int dist_rank_of(const Dist *d, int tp, int cp, int dp, int pp)
{
    return tp + d->tp * (cp + d->cp * (dp + d->dp * pp));
}

static MPI_Comm split(int color, int key, const char *name, MPI_Errhandler eh)
{
    MPI_Comm c;
    CHECK_MPI(MPI_Comm_split(MPI_COMM_WORLD, color, key, &c));
    if (c != MPI_COMM_NULL) {
        MPI_Comm_set_name(c, (char *)name);
        MPI_Comm_set_errhandler(c, eh);
        comm_register(c, name);
    }
    return c;
}

int dist_init(Dist *d, int tp, int cp, int dp, int pp, char *err, int errlen)
{
    memset(d, 0, sizeof *d);
    d->tp_comm = d->dp_comm = d->pp_comm = d->emb_comm = d->cp_comm = d->dpcp_comm = MPI_COMM_NULL;
    d->ep_comm = d->etp_comm = d->edp_comm = d->tpcp_comm = MPI_COMM_NULL;
    d->ep = d->etp = d->edp = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &d->rank);
    MPI_Comm_size(MPI_COMM_WORLD, &d->world);
    g_rank = d->rank;
    int need = tp * cp * dp * pp;
    if (d->world != need) {
        snprintf(err, errlen, "the plan needs dp %d x tp %d x pp %d x cp %d = %d ranks, but %d were "
                 "launched: run `mpirun -np %d ultraplan run ...`", dp, tp, pp, cp, need, d->world, need);
        return -1;
    }
    d->tp = tp, d->cp = cp, d->dp = dp, d->pp = pp;
    int r = d->rank;
    d->tp_rank = r % tp;
    d->cp_rank = (r / tp) % cp;
    d->dp_rank = (r / (tp * cp)) % dp;
    d->pp_rank = r / (tp * cp * dp);
    d->dpcp_rank = d->cp_rank + cp * d->dp_rank;
    MPI_Errhandler eh;
    CHECK_MPI(MPI_Comm_create_errhandler(on_error, &eh));
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, eh);
    if (comm_index(MPI_COMM_WORLD) < 0)
        comm_register(MPI_COMM_WORLD, "world");
    int tp_color = d->cp_rank + cp * (d->dp_rank + dp * d->pp_rank);
    int dp_color = d->tp_rank + tp * (d->cp_rank + cp * d->pp_rank);
    int pp_color = d->tp_rank + tp * (d->cp_rank + cp * d->dp_rank);
    d->tp_comm = split(tp_color, d->tp_rank, "tp", eh);
    d->dp_comm = split(dp_color, d->dp_rank, "dp", eh);
    d->pp_comm = split(pp_color, d->pp_rank, "pp", eh);
    int ends = d->pp_rank == 0 || d->pp_rank == pp - 1;
    d->emb_comm = split(ends ? pp_color : MPI_UNDEFINED, d->pp_rank, "embedding", eh);
    int cp_color = d->tp_rank + tp * (d->dp_rank + dp * d->pp_rank);
    d->cp_comm = split(cp_color, d->cp_rank, "cp", eh);
    /* gradients and ZeRO shards over dp·cp; with cp 1 that is the dp group */
    d->dpcp_comm = cp == 1 ? d->dp_comm : split(d->tp_rank + tp * d->pp_rank, d->dpcp_rank, "dpcp", eh);
    MPI_Errhandler_free(&eh);
    return 0;
}

int dist_init_experts(Dist *d, int ep, int etp, char *err, int errlen)
{
    int stage_ranks = d->tp * d->cp * d->dp;
    if (ep < 1 || etp < 1 || stage_ranks % (ep * etp) != 0) {
        snprintf(err, errlen, "etp %d x ep %d does not divide the %d ranks of a stage (tp %d x cp %d x dp %d)", etp,
                 ep, stage_ranks, d->tp, d->cp, d->dp);
        return -1;
    }
    d->ep = ep, d->etp = etp, d->edp = stage_ranks / (ep * etp);
    int q = d->tp_rank + d->tp * (d->cp_rank + d->cp * d->dp_rank);
    d->etp_rank = q % etp;
    d->ep_rank = (q / etp) % ep;
    d->edp_rank = q / (etp * ep);
    MPI_Errhandler eh;
    CHECK_MPI(MPI_Comm_create_errhandler(on_error, &eh));
    int pp = d->pp_rank;
    d->ep_comm = split(d->etp_rank + etp * (d->edp_rank + d->edp * pp), d->ep_rank, "ep", eh);
    d->etp_comm = split(d->ep_rank + ep * (d->edp_rank + d->edp * pp), d->etp_rank, "etp", eh);
    d->edp_comm = split(d->etp_rank + etp * (d->ep_rank + ep * pp), d->edp_rank, "edp", eh);
    d->tpcp_comm = split(d->dp_rank + d->dp * pp, d->tp_rank + d->tp * d->cp_rank, "tpcp", eh);
    MPI_Errhandler_free(&eh);
    return 0;
}

void dist_free(Dist *d)
{
    if (d->dpcp_comm == d->dp_comm)
        d->dpcp_comm = MPI_COMM_NULL;   // the same handle: freed once, as dp_comm
    MPI_Comm *cs[] = {&d->tp_comm, &d->dp_comm, &d->pp_comm, &d->emb_comm, &d->cp_comm, &d->dpcp_comm,
                      &d->ep_comm, &d->etp_comm, &d->edp_comm, &d->tpcp_comm};
    for (int i = 0; i < 10; i++)
        if (*cs[i] != MPI_COMM_NULL)
            MPI_Comm_free(cs[i]);
    comm_unregister_all();   // freed handles may be reused by MPI
}

static int comm_size(MPI_Comm c)
{
    int n = 1;
    MPI_Comm_size(c, &n);
    return n;
}

void dist_allreduce(float *x, int n, MPI_Comm c, double *t)
{
    if (comm_size(c) == 1)
        return;
    double t0 = MPI_Wtime();
    CHECK_MPI_WAIT(c, -1, MPI_Allreduce(MPI_IN_PLACE, x, n, MPI_FLOAT, MPI_SUM, c));
    if (t)
        *t += MPI_Wtime() - t0;
}

void dist_allgather(float *out, const float *in, int n, MPI_Comm c, double *t)
{
    if (comm_size(c) == 1) {
        if (out != in)
            memcpy(out, in, (size_t)n * sizeof *out);
        return;
    }
    double t0 = MPI_Wtime();
    CHECK_MPI_WAIT(c, -1, MPI_Allgather(in, n, MPI_FLOAT, out, n, MPI_FLOAT, c));
    if (t)
        *t += MPI_Wtime() - t0;
}

/* MPI_Reduce_scatter with equal counts rather than MPI_Reduce_scatter_block:
 * Open MPI's default for the block form is a linear reduce-then-scatter,
 * 2-3x slower within a node (13 MB over 2 ranks: 12.9 vs 5.6 ms). */
void dist_reduce_scatter(float *out, float *in, int n, MPI_Comm c, double *t)
{
    int p = comm_size(c);
    if (p == 1) {
        if (out != in)
            memcpy(out, in, (size_t)n * sizeof *out);
        return;
    }
    int *counts = malloc((size_t)p * sizeof *counts);
    if (!counts) {
        fprintf(stderr, "dist_reduce_scatter: out of memory\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    for (int i = 0; i < p; i++)
        counts[i] = n;
    double t0 = MPI_Wtime();
    CHECK_MPI_WAIT(c, -1, MPI_Reduce_scatter(out == in ? MPI_IN_PLACE : in, out, counts, MPI_FLOAT, MPI_SUM, c));
    if (t)
        *t += MPI_Wtime() - t0;
    free(counts);
}

void dist_recv(float *buf, int n, int src, int tag, MPI_Comm c)
{
    CHECK_MPI_WAIT(c, src, MPI_Recv(buf, n, MPI_FLOAT, src, tag, c, MPI_STATUS_IGNORE));
}

void dist_isend(const float *buf, int n, int dst, int tag, MPI_Comm c, DistReq *r)
{
    CHECK_MPI(MPI_Isend(buf, n, MPI_FLOAT, dst, tag, c, r));
}

void dist_irecv(float *buf, int n, int src, int tag, MPI_Comm c, DistReq *r)
{
    CHECK_MPI(MPI_Irecv(buf, n, MPI_FLOAT, src, tag, c, r));
}

void dist_wait(DistReq *r, MPI_Comm c)
{
    if (*r != MPI_REQUEST_NULL)
        CHECK_MPI_WAIT(c, -1, MPI_Wait(r, MPI_STATUS_IGNORE));
}

void dist_waitall(DistReq *r, int n, MPI_Comm c)
{
    if (n > 0)
        CHECK_MPI_WAIT(c, -1, MPI_Waitall(n, r, MPI_STATUSES_IGNORE));
}

void dist_iallreduce(float *x, int n, MPI_Comm c, DistReq *r)
{
    CHECK_MPI(MPI_Iallreduce(MPI_IN_PLACE, x, n, MPI_FLOAT, MPI_SUM, c, r));
}

void dist_ireduce_scatter(float *x, int n, MPI_Comm c, DistReq *r)
{
    *r = MPI_REQUEST_NULL;
    if (comm_size(c) == 1)
        return;
    CHECK_MPI(MPI_Ireduce_scatter_block(MPI_IN_PLACE, x, n, MPI_FLOAT, MPI_SUM, c, r));
}

void dist_iallgather(float *out, const float *in, int n, MPI_Comm c, DistReq *r)
{
    *r = MPI_REQUEST_NULL;
    if (comm_size(c) == 1) {
        if (out != in)
            memcpy(out, in, (size_t)n * sizeof *out);
        return;
    }
    CHECK_MPI(MPI_Iallgather(in, n, MPI_FLOAT, out, n, MPI_FLOAT, c, r));
}

void dist_allreduce_max(float *x, int n, MPI_Comm c, double *t)
{
    if (comm_size(c) == 1)
        return;
    double t0 = MPI_Wtime();
    CHECK_MPI_WAIT(c, -1, MPI_Allreduce(MPI_IN_PLACE, x, n, MPI_FLOAT, MPI_MAX, c));
    if (t)
        *t += MPI_Wtime() - t0;
}

void dist_allgather_inplace(float *x, int n, MPI_Comm c, double *t)
{
    if (comm_size(c) == 1)
        return;
    double t0 = MPI_Wtime();
    CHECK_MPI_WAIT(c, -1, MPI_Allgather(MPI_IN_PLACE, 0, MPI_FLOAT, x, n, MPI_FLOAT, c));
    if (t)
        *t += MPI_Wtime() - t0;
}

int dist_comm_size(MPI_Comm c) { return c == MPI_COMM_NULL ? 1 : comm_size(c); }

void dist_alltoall_int(const int *send, int *recv, int n, MPI_Comm c, double *t)
{
    if (dist_comm_size(c) == 1) {
        memcpy(recv, send, (size_t)n * sizeof *recv);
        return;
    }
    double t0 = MPI_Wtime();
    CHECK_MPI_WAIT(c, -1, MPI_Alltoall(send, n, MPI_INT, recv, n, MPI_INT, c));
    if (t)
        *t += MPI_Wtime() - t0;
}

void dist_allgather_int(const int *in, int *out, int n, MPI_Comm c, double *t)
{
    if (dist_comm_size(c) == 1) {
        memcpy(out, in, (size_t)n * sizeof *out);
        return;
    }
    double t0 = MPI_Wtime();
    CHECK_MPI_WAIT(c, -1, MPI_Allgather(in, n, MPI_INT, out, n, MPI_INT, c));
    if (t)
        *t += MPI_Wtime() - t0;
}

void dist_alltoallv(const float *send, const int *scounts, const int *sdispls, float *recv, const int *rcounts,
                    const int *rdispls, MPI_Comm c, double *t)
{
    if (dist_comm_size(c) == 1) {
        memcpy(recv + rdispls[0], send + sdispls[0], (size_t)scounts[0] * sizeof *recv);
        return;
    }
    double t0 = MPI_Wtime();
    CHECK_MPI_WAIT(c, -1, MPI_Alltoallv(send, scounts, sdispls, MPI_FLOAT, recv, rcounts, rdispls, MPI_FLOAT, c));
    if (t)
        *t += MPI_Wtime() - t0;
}

void dist_allgatherv(const float *in, int n, float *out, const int *counts, const int *displs, MPI_Comm c,
                     double *t)
{
    if (dist_comm_size(c) == 1) {
        memcpy(out + displs[0], in, (size_t)n * sizeof *out);
        return;
    }
    double t0 = MPI_Wtime();
    CHECK_MPI_WAIT(c, -1, MPI_Allgatherv(in, n, MPI_FLOAT, out, counts, displs, MPI_FLOAT, c));
    if (t)
        *t += MPI_Wtime() - t0;
}

void dist_reduce_scatterv(float *out, const float *in, const int *counts, MPI_Comm c, double *t)
{
    if (dist_comm_size(c) == 1) {
        memcpy(out, in, (size_t)counts[0] * sizeof *out);
        return;
    }
    double t0 = MPI_Wtime();
    CHECK_MPI_WAIT(c, -1, MPI_Reduce_scatter(in, out, counts, MPI_FLOAT, MPI_SUM, c));
    if (t)
        *t += MPI_Wtime() - t0;
}

/* ---- the world, for the commands ---- */

void dist_world_init(int *rank, int *world)
{
    int inited = 0;
    MPI_Initialized(&inited);
    if (!inited)
        MPI_Init(NULL, NULL);
    MPI_Comm_rank(MPI_COMM_WORLD, rank);
    MPI_Comm_size(MPI_COMM_WORLD, world);
}

void dist_world_finalize(void) { MPI_Finalize(); }

double dist_now(void) { return MPI_Wtime(); }

static int world_reduce(int v, MPI_Op op)
{
    CHECK_MPI_WAIT(MPI_COMM_WORLD, -1, MPI_Allreduce(MPI_IN_PLACE, &v, 1, MPI_INT, op, MPI_COMM_WORLD));
    return v;
}

int dist_world_min(int v) { return world_reduce(v, MPI_MIN); }
int dist_world_max(int v) { return world_reduce(v, MPI_MAX); }

int dist_bcast_int(int v)
{
    CHECK_MPI_WAIT(MPI_COMM_WORLD, 0, MPI_Bcast(&v, 1, MPI_INT, 0, MPI_COMM_WORLD));
    return v;
}

double dist_world_sum(double v)
{
    CHECK_MPI_WAIT(MPI_COMM_WORLD, -1, MPI_Allreduce(MPI_IN_PLACE, &v, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD));
    return v;
}

void dist_world_bcast_bytes(void *buf, int n) { dist_bcast_bytes(buf, n, MPI_COMM_WORLD); }

void dist_world_barrier(void)
{
    CHECK_MPI_WAIT(MPI_COMM_WORLD, -1, MPI_Barrier(MPI_COMM_WORLD));
}

int dist_world_agree(int rc, char *err, int errlen)
{
    int me = 0, world = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &world);
    int first = dist_world_min(rc != 0 ? me : world);
    if (first == world)
        return 0;
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", me == first ? err : "");
    CHECK_MPI_WAIT(MPI_COMM_WORLD, first, MPI_Bcast(msg, sizeof msg, MPI_CHAR, first, MPI_COMM_WORLD));
    snprintf(err, errlen, "%s", msg);
    return -1;
}

int dist_world_argmax(double v)
{
    struct { double v; int rank; } x = {v, 0};
    MPI_Comm_rank(MPI_COMM_WORLD, &x.rank);
    CHECK_MPI_WAIT(MPI_COMM_WORLD, -1, MPI_Allreduce(MPI_IN_PLACE, &x, 1, MPI_DOUBLE_INT, MPI_MAXLOC, MPI_COMM_WORLD));
    return x.rank;
}

void dist_world_bcast_doubles(double *x, int n, int root)
{
    CHECK_MPI_WAIT(MPI_COMM_WORLD, root, MPI_Bcast(x, n, MPI_DOUBLE, root, MPI_COMM_WORLD));
}

void dist_world_gather_doubles(const double *mine, int n, double *all)
{
    CHECK_MPI_WAIT(MPI_COMM_WORLD, -1, MPI_Gather(mine, n, MPI_DOUBLE, all, n, MPI_DOUBLE, 0, MPI_COMM_WORLD));
}

void dist_world_allgather_doubles(const double *mine, int n, double *all)
{
    CHECK_MPI_WAIT(MPI_COMM_WORLD, -1, MPI_Allgather(mine, n, MPI_DOUBLE, all, n, MPI_DOUBLE, MPI_COMM_WORLD));
}

void dist_world_gather_u64(const unsigned long long *mine, int n, unsigned long long *all)
{
    CHECK_MPI_WAIT(MPI_COMM_WORLD, -1, MPI_Gather(mine, n, MPI_UNSIGNED_LONG_LONG, all, n, MPI_UNSIGNED_LONG_LONG,
                                                  0, MPI_COMM_WORLD));
}

/* Rank 0 of c sends n bytes to every member (an NCCL unique id, say). */
void dist_bcast_bytes(void *buf, int n, MPI_Comm c)
{
    CHECK_MPI_WAIT(c, 0, MPI_Bcast(buf, n, MPI_BYTE, 0, c));
}

int dist_local_rank(int *local_size)
{
    MPI_Comm node;
    int r = 0, n = 1;
    CHECK_MPI(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node));
    CHECK_MPI(MPI_Comm_rank(node, &r));
    CHECK_MPI(MPI_Comm_size(node, &n));
    MPI_Comm_free(&node);
    if (local_size)
        *local_size = n;
    return r;
}

void dist_barrier(MPI_Comm c)
{
    CHECK_MPI_WAIT(c, -1, MPI_Barrier(c));
}

double dist_bcast_double(double v)
{
    CHECK_MPI_WAIT(MPI_COMM_WORLD, 0, MPI_Bcast(&v, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD));
    return v;
}

/* ---- calibration ---- */

static int cmp_dbl(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double dist_time_collective(CollKind kind, float *buf, int count, int reps)
{
    enum { SAMPLES = 7 };
    int world;
    MPI_Comm_size(MPI_COMM_WORLD, &world);
    double smp[SAMPLES];
    int *counts = malloc((size_t)world * sizeof *counts);
    if (!counts) {
        fprintf(stderr, "dist: out of memory\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    for (int i = 0; i < world; i++)
        counts[i] = count / world;
    for (int s = 0; s < SAMPLES; s++) {
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        for (int i = 0; i < reps; i++) {
            if (kind == COLL_ALLREDUCE)
                MPI_Allreduce(MPI_IN_PLACE, buf, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
            else if (kind == COLL_REDUCE_SCATTER)
                MPI_Reduce_scatter(MPI_IN_PLACE, buf, counts, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
            else
                MPI_Allgather(MPI_IN_PLACE, 0, MPI_FLOAT, buf, count / world, MPI_FLOAT, MPI_COMM_WORLD);
        }
        smp[s] = (MPI_Wtime() - t0) / reps;
    }
    free(counts);
    qsort(smp, SAMPLES, sizeof *smp, cmp_dbl);
    return dist_bcast_double(smp[SAMPLES / 2]);
}

double dist_time_alltoall(float *buf, int count, int reps)
{
    enum { SAMPLES = 7 };
    int world;
    MPI_Comm_size(MPI_COMM_WORLD, &world);
    float *recv = buf + (size_t)count * world;
    double smp[SAMPLES];
    for (int s = 0; s < SAMPLES; s++) {
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        for (int i = 0; i < reps; i++)
            MPI_Alltoall(buf, count, MPI_FLOAT, recv, count, MPI_FLOAT, MPI_COMM_WORLD);
        smp[s] = (MPI_Wtime() - t0) / reps;
    }
    qsort(smp, SAMPLES, sizeof *smp, cmp_dbl);
    return dist_bcast_double(smp[SAMPLES / 2]);
}

void dist_time_link(double *lat, double *bw)
{
    const int big = 4 << 20;
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    char *buf = calloc(big, 1);
    if (!buf) {
        fprintf(stderr, "dist: out of memory\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    double t[2];
    for (int pass = 0; pass < 2; pass++) {
        int bytes = pass ? big : 8, reps = pass ? 20 : 2000;
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        for (int i = 0; i < reps && rank < 2; i++) {
            if (rank == 0) {
                MPI_Send(buf, bytes, MPI_BYTE, 1, 0, MPI_COMM_WORLD);
                MPI_Recv(buf, bytes, MPI_BYTE, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            } else {
                MPI_Recv(buf, bytes, MPI_BYTE, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                MPI_Send(buf, bytes, MPI_BYTE, 0, 0, MPI_COMM_WORLD);
            }
        }
        t[pass] = (MPI_Wtime() - t0) / (2.0 * reps);
    }
    free(buf);
    *lat = dist_bcast_double(t[0]);
    *bw = dist_bcast_double(big / (t[1] - t[0] > 0 ? t[1] - t[0] : t[1]));
}
