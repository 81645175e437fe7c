/* bench_cpu_step.c — how close a CPU training step comes to its GEMMs.
 *
 * Runs single-rank steps of a GPT (default: GPT-2 small, hidden 768, 12
 * layers, seq 256, vocab 50304, 2 sequences) through the executor, then
 * replays the same cblas calls with the same shapes — every linear layer's
 * forward, input-gradient and weight-gradient GEMM, the LM head's three —
 * on weights of the same sizes, and prints both with their ratio. The
 * attention core is not a "GEMM" here even though it calls BLAS: it is
 * overhead the linear layers' FLOPs do not pay for. Medians of --steps.
 *
 *   OMP_NUM_THREADS=1 build/bench/bench_cpu_step [--seq 1024 --mbs 1] [--steps 5]
 *
 * Without OMP_WAIT_POLICY in the environment it runs itself again with
 * OMP_WAIT_POLICY=passive (see main).
 */
#include <getopt.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "exec.h"
#include "kernels.h"

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static float *filled(size_t n)
{
    float *x = malloc(n * sizeof *x);
    if (!x) {
        fprintf(stderr, "bench_cpu_step: out of memory (%zu floats)\n", n);
        exit(1);
    }
    for (size_t i = 0; i < n; i++)
        x[i] = (float)((i * 2654435761u) % 1000) / 1000.0f - 0.5f;
    return x;
}

/* The linear layers of one transformer layer as the executor calls them
 * (net.c): QKV as three GEMMs, the projection, FC1, FC2. {K, OC} each. */
typedef struct {
    int K, OC;
} Lin;

typedef struct {
    int N, nlin, Vl;
    Lin lin[6];
    float **w, **dw;   // per layer, all its linear weights back to back
    float *in, *out, *din, *dout, *wh, *dwh;
    size_t wlen;
} Replay;

static void replay_init(Replay *r, const Exec *e, int L)
{
    int C = e->C, N = e->N;
    Lin lin[6] = {{C, e->ql}, {C, e->kvl}, {C, e->kvl}, {e->ql, C}, {C, e->F1l}, {e->Fl, C}};
    memcpy(r->lin, lin, sizeof lin);
    r->nlin = 6, r->N = N, r->Vl = e->Vl;
    r->wlen = 0;
    size_t most = (size_t)C;
    for (int i = 0; i < 6; i++) {
        r->wlen += (size_t)lin[i].K * lin[i].OC;
        most = (size_t)lin[i].K > most ? (size_t)lin[i].K : most;
        most = (size_t)lin[i].OC > most ? (size_t)lin[i].OC : most;
    }
    r->w = malloc(L * sizeof *r->w);
    r->dw = malloc(L * sizeof *r->dw);
    for (int l = 0; l < L; l++) {
        r->w[l] = filled(r->wlen);
        r->dw[l] = filled(r->wlen);
    }
    size_t act = (size_t)N * (most > (size_t)r->Vl ? most : (size_t)r->Vl);
    r->in = filled(act), r->out = filled(act), r->din = filled(act), r->dout = filled(act);
    r->wh = filled((size_t)r->Vl * C), r->dwh = filled((size_t)r->Vl * C);
}

static void replay_free(Replay *r, int L)
{
    for (int l = 0; l < L; l++) {
        free(r->w[l]);
        free(r->dw[l]);
    }
    free(r->w), free(r->dw);
    free(r->in), free(r->out), free(r->din), free(r->dout), free(r->wh), free(r->dwh);
}

/* Seconds of every GEMM of one step: nmb micro-batches through L layers and the head. */
static double replay_step(Replay *r, int L, int nmb, int C)
{
    double t0 = MPI_Wtime();
    for (int mb = 0; mb < nmb; mb++) {
        for (int l = 0; l < L; l++) {
            const float *w = r->w[l];
            for (int i = 0; i < r->nlin; i++) {
                k_matmul_fwd(r->out, r->in, w, NULL, r->N, r->lin[i].K, r->lin[i].OC);
                w += (size_t)r->lin[i].K * r->lin[i].OC;
            }
        }
        k_matmul_fwd(r->out, r->in, r->wh, NULL, r->N, C, r->Vl);
        k_matmul_bwd(r->din, r->dwh, NULL, r->dout, r->in, r->wh, r->N, C, r->Vl);
        for (int l = L - 1; l >= 0; l--) {
            const float *w = r->w[l];
            float *dw = r->dw[l];
            for (int i = 0; i < r->nlin; i++) {
                k_matmul_bwd(r->din, dw, NULL, r->dout, r->in, w, r->N, r->lin[i].K, r->lin[i].OC);
                w += (size_t)r->lin[i].K * r->lin[i].OC;
                dw += (size_t)r->lin[i].K * r->lin[i].OC;
            }
        }
    }
    return MPI_Wtime() - t0;
}

static void usage(void)
{
    printf("usage: bench_cpu_step [--layers 12] [--hidden 768] [--heads 12] [--seq 256] [--mbs 2]\n"
           "                      [--gbs MBS] [--vocab 50304] [--steps 3]\n"
           "A single-rank GPT training step against the same GEMMs alone (threads: OMP_NUM_THREADS).\n");
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {{"layers", required_argument, 0, 'L'}, {"hidden", required_argument, 0, 'h'},
                                         {"heads", required_argument, 0, 'a'}, {"seq", required_argument, 0, 's'},
                                         {"mbs", required_argument, 0, 'b'}, {"gbs", required_argument, 0, 'g'},
                                         {"vocab", required_argument, 0, 'V'},
                                         {"steps", required_argument, 0, 'n'}, {"help", no_argument, 0, '?'},
                                         {0, 0, 0, 0}};
    ModelSpec m;
    memset(&m, 0, sizeof m);
    snprintf(m.name, sizeof m.name, "custom");
    m.L = 12, m.h = 768, m.a = 12, m.s = 256, m.vocab = 50304, m.vocab_div = 1;
    m.bias = true, m.tied = true;
    int mbs = 2, gbs = 0, steps = 3, c;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case 'L': m.L = atoi(optarg); break;
        case 'h': m.h = atoi(optarg); break;
        case 'a': m.a = atoi(optarg); break;
        case 's': m.s = atoi(optarg); break;
        case 'b': mbs = atoi(optarg); break;
        case 'g': gbs = atoi(optarg); break;
        case 'V': m.vocab = atoi(optarg); break;
        case 'n': steps = atoi(optarg); break;
        default: usage(); return c == '?' ? 0 : 2;
        }
    }
    /* OpenMP threads that spin after a parallel region take the cores the
     * OpenBLAS (pthread) threads need next: at 2 threads the step took 1.8x
     * its GEMMs with spinning, 1.2x without. libgomp reads the policy before
     * main, so set it and start again. */
    if (!getenv("OMP_WAIT_POLICY")) {
        setenv("OMP_WAIT_POLICY", "passive", 1);
        execv("/proc/self/exe", argv);
    }
    if (steps < 1 || steps > 100) {
        fprintf(stderr, "bench_cpu_step: --steps must be 1..100\n");
        return 2;
    }
    MPI_Init(&argc, &argv);
    char err[512];
    if (spec_validate(&m, err, sizeof err) != 0) {
        fprintf(stderr, "bench_cpu_step: %s\n", err);
        MPI_Finalize();
        return 2;
    }
    Layout lo;
    layout_default(&lo);
    lo.prec = PREC_FP32, lo.mbs = mbs, lo.gbs = gbs > 0 ? gbs : mbs;
    if (layout_check(&lo, &m, NULL, err, sizeof err) != 0) {
        fprintf(stderr, "bench_cpu_step: %s\n", err);
        MPI_Finalize();
        return 2;
    }
    char path[] = "/tmp/bench_cpu_step_XXXXXX";
    int fd = mkstemp(path);
    FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
    if (!f) {
        fprintf(stderr, "bench_cpu_step: cannot write a data file in /tmp\n");
        MPI_Finalize();
        return 1;
    }
    for (long i = 0; i < 4L * lo.gbs * m.s * (steps + 2); i++)
        fputc("the quick brown fox jumps over the lazy dog. "[i % 45], f);
    fclose(f);

    TrainOpts o;
    exec_default_opts(&o);
    Exec e;
    int rc = 0;
    if (exec_init(&e, &m, &lo, &o, path, err, sizeof err) != 0) {
        fprintf(stderr, "bench_cpu_step: %s\n", err);
        remove(path);
        MPI_Finalize();
        return 1;
    }
    const char *thr = getenv("OMP_NUM_THREADS");
    printf("GPT L=%d h=%d heads=%d seq=%d mbs=%d vocab=%d: %.1fM params, %d tokens/step, threads %s (wait policy %s)\n",
           m.L, m.h, m.a, m.s, mbs, m.vocab, e.ps.n / 1e6, e.N * e.nmb, thr ? thr : "(default)",
           getenv("OMP_WAIT_POLICY"));

    double step[100], gemm[100], ph[PH_COUNT] = {0};
    int C = e.C, nmb = e.nmb;
    Replay r;
    replay_init(&r, &e, m.L);
    double flops = 0;
    for (int i = 0; i < r.nlin; i++)
        flops += 6.0 * r.N * r.lin[i].K * r.lin[i].OC * m.L;
    flops = (flops + 6.0 * r.N * C * r.Vl) * nmb;
    StepStats st;
    if (exec_step(&e, &st, err, sizeof err) != 0) {   // warm-up: first touch of every slab
        fprintf(stderr, "bench_cpu_step: %s\n", err);
        rc = 1;
    }
    replay_step(&r, m.L, nmb, C);
    /* steps and replays alternate so that a busy neighbour slows both alike */
    for (int i = 0; i < steps && rc == 0; i++) {
        if (exec_step(&e, &st, err, sizeof err) != 0) {
            fprintf(stderr, "bench_cpu_step: %s\n", err);
            rc = 1;
        }
        step[i] = st.step_s;
        for (int p = 0; p < PH_COUNT; p++)
            ph[p] += st.t[p] / steps;
        gemm[i] = replay_step(&r, m.L, nmb, C);
    }
    replay_free(&r, m.L);
    exec_free(&e);
    remove(path);
    if (rc == 0) {
        double ts = median(step, steps), tg = median(gemm, steps);
        printf("  step (median of %d)      %9.1f ms   (forward %.1f, backward %.1f, optimizer %.1f ms, mean)\n", steps,
               ts * 1e3, ph[PH_FWD] * 1e3, ph[PH_BWD] * 1e3, ph[PH_OPTIM] * 1e3);
        printf("  its GEMMs alone           %9.1f ms   (%.1f GFLOP at %.1f GFLOP/s)\n", tg * 1e3, flops / 1e9,
               flops / tg / 1e9);
        printf("  step / GEMMs              %9.2fx\n", ts / tg);
    }
    MPI_Finalize();
    return rc;
}
