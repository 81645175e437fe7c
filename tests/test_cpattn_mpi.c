/* test_cpattn_mpi.c — the context-parallel ring attention (executor/cpattn.c)
 * alone, under mpirun with cp = the world size: every rank builds the same
 * random q, k, v and output gradient of whole sequences, runs the full
 * k_attention_fwd/bwd on them, and checks that the ring over its two chunks
 * gives the same output, log-sum-exp, dq, dk and dv rows (fp32 tolerance).
 * Shapes: GQA, chunks longer than one query tile. Exit 0 when every rank
 * passes, 1 otherwise (on every rank).
 *
 * usage: mpirun -np CP test_cpattn_mpi
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpattn.h"
#include "dist.h"
#include "kernels.h"

static uint64_t rng = 0x2545F4914F6CDD1Dull;

static float *randv(size_t n)
{
    float *x = malloc(n * sizeof *x);
    for (size_t i = 0; i < n; i++) {
        rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
        x[i] = (float)((rng >> 40) / (double)(1ull << 24)) * 2.0f - 1.0f;
    }
    return x;
}

/* rows of x (B, T, W) at positions pos (Tl) into y (B, Tl, W) */
static void take_rows(float *y, const float *x, const int *pos, int B, int T, int Tl, int W)
{
    for (int b = 0; b < B; b++)
        for (int t = 0; t < Tl; t++)
            memcpy(y + ((size_t)b * Tl + t) * W, x + ((size_t)b * T + pos[t]) * W, W * sizeof *y);
}

static int check(const char *name, const float *a, const float *b, size_t n, int rank)
{
    int bad = 0;
    double worst = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - b[i]);
        worst = d > worst || isnan(d) ? (isnan(d) ? INFINITY : d) : worst;
        if (!(d <= 1e-5 + 1e-4 * fabs(b[i])))
            bad++;
    }
    if (bad)
        fprintf(stderr, "[rank %d] %s: %d of %zu differ, max |diff| %.3g\n", rank, name, bad, n, worst);
    return bad;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int world, rank;
    MPI_Comm_size(MPI_COMM_WORLD, &world);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    Dist d;
    char err[256];
    if (world < 2 || dist_init(&d, 1, world, 1, 1, err, sizeof err) != 0) {
        if (rank == 0)
            fprintf(stderr, "test_cpattn_mpi: run under mpirun with 2 or more ranks\n");
        MPI_Finalize();
        return 2;
    }
    int cp = world, B = 2, c = 40, T = 2 * cp * c, NH = 4, NKV = 2, HS = 16, Tl = T / cp;
    int qw = NH * HS, kw = NKV * HS;
    size_t nq = (size_t)B * T * qw, nk = (size_t)B * T * kw, nl = (size_t)B * NH * T;
    float *q = randv(nq), *k = randv(nk), *v = randv(nk), *dy = randv(nq);
    float *out = malloc(nq * 4), *lse = malloc(nl * 4);
    float *dq = calloc(nq, 4), *dk = calloc(nk, 4), *dv = calloc(nk, 4);
    k_attention_fwd(out, lse, q, k, v, B, T, NH, NKV, HS);
    k_attention_bwd(dq, dk, dv, dy, q, k, v, out, lse, B, T, NH, NKV, HS);

    double t_wait = 0;
    CpAttn a;
    if (cpattn_init(&a, d.cp_comm, cp, d.cp_rank, B, T, NH, NKV, HS, &t_wait) != 0) {
        fprintf(stderr, "out of memory\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    float *buf = malloc(cpattn_buf_floats(&a) * sizeof(float));
    cpattn_set_buf(&a, buf);
    const int *pos = cpattn_local_pos(&a);
    size_t lq = nq / cp, lk = nk / cp, ll = nl / cp;
    float *q_l = malloc(lq * 4), *k_l = malloc(lk * 4), *v_l = malloc(lk * 4), *dy_l = malloc(lq * 4);
    float *o_l = malloc(lq * 4), *lse_l = malloc(ll * 4);
    float *dq_l = calloc(lq, 4), *dk_l = calloc(lk, 4), *dv_l = calloc(lk, 4);
    float *want = malloc(lq * 4), *want_l = malloc(ll * 4);
    take_rows(q_l, q, pos, B, T, Tl, qw);
    take_rows(k_l, k, pos, B, T, Tl, kw);
    take_rows(v_l, v, pos, B, T, Tl, kw);
    take_rows(dy_l, dy, pos, B, T, Tl, qw);

    cpattn_fwd(&a, o_l, lse_l, q_l, k_l, v_l);
    cpattn_bwd(&a, dq_l, dk_l, dv_l, dy_l, q_l, k_l, v_l, o_l, lse_l);

    int bad = 0;
    take_rows(want, out, pos, B, T, Tl, qw);
    bad += check("out", o_l, want, lq, rank);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++)
            for (int t = 0; t < Tl; t++)
                want_l[((size_t)b * NH + h) * Tl + t] = lse[((size_t)b * NH + h) * T + pos[t]];
    bad += check("lse", lse_l, want_l, ll, rank);
    take_rows(want, dq, pos, B, T, Tl, qw);
    bad += check("dq", dq_l, want, lq, rank);
    take_rows(want, dk, pos, B, T, Tl, kw);
    bad += check("dk", dk_l, want, lk, rank);
    take_rows(want, dv, pos, B, T, Tl, kw);
    bad += check("dv", dv_l, want, lk, rank);

    MPI_Allreduce(MPI_IN_PLACE, &bad, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0)
        printf("cp ring attention, cp %d, B %d T %d NH %d NKV %d HS %d: %s\n", cp, B, T, NH, NKV, HS,
               bad ? "FAILED" : "ok");
    cpattn_free(&a);
    free(buf), free(q), free(k), free(v), free(dy), free(out), free(lse), free(dq), free(dk), free(dv);
    free(q_l), free(k_l), free(v_l), free(dy_l), free(o_l), free(lse_l), free(dq_l), free(dk_l), free(dv_l);
    free(want), free(want_l);
    dist_free(&d);
    MPI_Finalize();
    return bad ? 1 : 0;
}
