/* dist.c — see dist.h. */
#include "dist.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int g_rank = -1;
static const char *g_last_call = "?";

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
    fprintf(stderr, "[rank %d] MPI failure in %s on communicator %s: %s\n", g_rank, g_last_call,
            nlen ? name : "?", msg);
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
    }
    return c;
}

int dist_init(Dist *d, int tp, int cp, int dp, int pp, char *err, int errlen)
{
    memset(d, 0, sizeof *d);
    d->tp_comm = d->dp_comm = d->pp_comm = d->emb_comm = MPI_COMM_NULL;
    MPI_Comm_rank(MPI_COMM_WORLD, &d->rank);
    MPI_Comm_size(MPI_COMM_WORLD, &d->world);
    g_rank = d->rank;
    int need = tp * cp * dp * pp;
    if (d->world != need) {
        snprintf(err, errlen, "the plan needs dp %d x tp %d x pp %d x cp %d = %d ranks, but %d were "
                 "launched: run `mpirun -np %d ultraplan run ...`", dp, tp, pp, cp, need, d->world, need);
        return -1;
    }
    if (cp != 1) {
        snprintf(err, errlen, "context parallel (cp %d) is not implemented by the CPU executor yet; "
                 "plan with --cp 1", cp);
        return -1;
    }
    d->tp = tp, d->cp = cp, d->dp = dp, d->pp = pp;
    int r = d->rank;
    d->tp_rank = r % tp;
    d->cp_rank = (r / tp) % cp;
    d->dp_rank = (r / (tp * cp)) % dp;
    d->pp_rank = r / (tp * cp * dp);
    MPI_Errhandler eh;
    CHECK_MPI(MPI_Comm_create_errhandler(on_error, &eh));
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, eh);
    int tp_color = d->cp_rank + cp * (d->dp_rank + dp * d->pp_rank);
    int dp_color = d->tp_rank + tp * (d->cp_rank + cp * d->pp_rank);
    int pp_color = d->tp_rank + tp * (d->cp_rank + cp * d->dp_rank);
    d->tp_comm = split(tp_color, d->tp_rank, "tp", eh);
    d->dp_comm = split(dp_color, d->dp_rank, "dp", eh);
    d->pp_comm = split(pp_color, d->pp_rank, "pp", eh);
    int ends = d->pp_rank == 0 || d->pp_rank == pp - 1;
    d->emb_comm = split(ends ? pp_color : MPI_UNDEFINED, d->pp_rank, "embedding", eh);
    MPI_Errhandler_free(&eh);
    return 0;
}

void dist_free(Dist *d)
{
    MPI_Comm *cs[] = {&d->tp_comm, &d->dp_comm, &d->pp_comm, &d->emb_comm};
    for (int i = 0; i < 4; i++)
        if (*cs[i] != MPI_COMM_NULL)
            MPI_Comm_free(cs[i]);
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
    g_last_call = "MPI_Allreduce";
    CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, x, n, MPI_FLOAT, MPI_SUM, c));
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
    g_last_call = "MPI_Allgather";
    CHECK_MPI(MPI_Allgather(in, n, MPI_FLOAT, out, n, MPI_FLOAT, c));
    if (t)
        *t += MPI_Wtime() - t0;
}

void dist_reduce_scatter(float *out, float *in, int n, MPI_Comm c, double *t)
{
    if (comm_size(c) == 1) {
        if (out != in)
            memcpy(out, in, (size_t)n * sizeof *out);
        return;
    }
    double t0 = MPI_Wtime();
    g_last_call = "MPI_Reduce_scatter_block";
    CHECK_MPI(MPI_Reduce_scatter_block(in, out, n, MPI_FLOAT, MPI_SUM, c));
    if (t)
        *t += MPI_Wtime() - t0;
}
