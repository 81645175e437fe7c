/* cmd_calibrate.c — `[mpirun -np N] ultraplan calibrate --backend cpu -o cpu.json`:
 * measures this machine and writes a hardware profile the cost model reads.
 *
 * Calibrate measures what the model reads, the way a run executes it: every
 * rank runs the benchmarks at once (as every rank computes at once in a run,
 * sharing cores, caches and memory bandwidth) with the thread count the run
 * will have (OMP_NUM_THREADS, which OpenBLAS follows too); rank 0's figures
 * are kept. Each figure is the median of several short timings, so a busy
 * neighbour for a moment does not set it.
 *
 *   gemm_eff, peak   a linear layer's forward, input-gradient and weight-
 *                    gradient GEMM together (the model times backward as 2x
 *                    forward), at tokens x hidden shapes of small decoders
 *   attn_eff         the flash-style attention kernel forward + backward, at
 *                    the FLOPs the model counts (causal half) and its 3.5x
 *   mem_eff, hbm_bw  a streaming add by size (cache levels, then DRAM)
 *   act_bytes_per_layer  a layer's own non-GEMM kernels (norms, residuals,
 *                    GELU, the gradient buffers zeroed), forward + backward,
 *                    as the elements per token (in units of h) that the
 *                    memory term would have to move to take that long
 *   kernel_lat       one empty parallel kernel
 *   link, coll_lat, coll_eff  ping-pong between ranks 0 and 1, and the
 *                    all-reduce, reduce-scatter and all-gather of the world
 *                    by size (N >= 2 ranks)
 */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "command.h"
#include "cost.h"
#include "dist.h"
#include "kernels.h"
#include "profile.h"
#if ULTRAPLAN_HAVE_CUDA
#include "calibrate_cuda.h"
#include "cunvml.h"
#include "kernels_cuda.h"
#endif

enum { SAMPLES = 7 };

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median7(double *v)
{
    qsort(v, SAMPLES, sizeof *v, cmp_double);
    return v[SAMPLES / 2];
}

/* Seconds per call: the median of SAMPLES timings, each repeating the call
 * until budget/SAMPLES seconds have gone by (after one warm-up call). */
#define TIME_IT(budget, secs, call) do { \
    double smp_[SAMPLES]; call; \
    for (int s_ = 0; s_ < SAMPLES; s_++) { \
        int reps_ = 0; double t0_ = dist_now(), el_; \
        do { call; reps_++; el_ = dist_now() - t0_; } while (el_ < (budget) / SAMPLES); \
        smp_[s_] = el_ / reps_; } \
    secs = median7(smp_); } while (0)

static void fill(float *x, size_t n)
{
    for (size_t i = 0; i < n; i++)
        x[i] = (float)((i * 2654435761u) % 1000) / 1000.0f - 0.5f;
}

/* Sort points by size and keep them strictly ascending. */
static void curve_finish(EffCurve *c, double peak)
{
    for (int i = 0; i < c->n; i++)
        for (int j = i + 1; j < c->n; j++)
            if (c->pt[j].size < c->pt[i].size) {
                EffPoint t = c->pt[i];
                c->pt[i] = c->pt[j];
                c->pt[j] = t;
            }
    int k = 0;
    for (int i = 0; i < c->n; i++) {
        double e = c->pt[i].eff / peak;
        e = e > 1 ? 1 : e < 1e-4 ? 1e-4 : e;
        if (k > 0 && c->pt[i].size <= c->pt[k - 1].size)
            continue;
        c->pt[k].size = c->pt[i].size;
        c->pt[k++].eff = e;
    }
    c->n = k;
}

/* Operands for one GEMM call carved from a rotating arena several times the
 * last-level cache, so every call finds its inputs cold, as a run does
 * (each layer's weights and activations are its own, the slabs far larger
 * than the cache); a loop over one hot operand set overstated small GEMMs. */
typedef struct {
    float *base;
    size_t n, at;
} Arena;

enum { ARENA_FLOATS = 32 << 20 };   // 128 MiB per rank

static float *arena_take(Arena *ar, size_t need, size_t *off)
{
    if (ar->at + need > ar->n)
        ar->at = 0;
    *off = ar->at;
    ar->at += need;
    return ar->base + *off;
}

static void gemm_fwd_cold(Arena *ar, int M, int K, int N)
{
    size_t off;
    float *a = arena_take(ar, (size_t)M * K + (size_t)N * K + (size_t)M * N, &off);
    k_matmul_fwd(a + (size_t)M * K + (size_t)N * K, a, a + (size_t)M * K, NULL, M, K, N);
}

static void gemm_bwd_cold(Arena *ar, int M, int K, int N)
{
    size_t off, mk = (size_t)M * K, nk = (size_t)N * K;
    float *a = arena_take(ar, 2 * mk + 2 * nk + (size_t)M * N, &off);
    /* dinp (M, K) += dout (M, N) w (N, K); dw (N, K) += doutᵀ inp */
    k_matmul_bwd(a + mk + nk, a + 2 * mk + nk, NULL, a + 2 * mk + 2 * nk, a, a + mk, M, K, N);
}

static void bench_gemm(EffCurve *c, double *peak)
{
    /* (tokens, in, out): the linear layers of small decoders, as net.c calls them */
    static const int shapes[][3] = {{64, 64, 64}, {128, 64, 192}, {256, 128, 128}, {512, 128, 512},
                                    {512, 256, 256}, {512, 256, 768}, {512, 256, 1024}, {1024, 256, 1024},
                                    {1024, 512, 1536}, {2048, 768, 768}, {2048, 768, 2304},
                                    {4096, 768, 3072}, {4096, 1024, 3072}};
    int n = sizeof shapes / sizeof shapes[0];
    Arena ar = {malloc((size_t)ARENA_FLOATS * sizeof(float)), ARENA_FLOATS, 0};
    fill(ar.base, ar.n);
    *peak = 0;
    c->n = 0;
    for (int i = 0; i < n && c->n < HW_MAX_EFF_POINTS; i++) {
        int M = shapes[i][0], K = shapes[i][1], N = shapes[i][2];
        double sf, sb;
        TIME_IT(0.25, sf, gemm_fwd_cold(&ar, M, K, N));
        TIME_IT(0.5, sb, gemm_bwd_cold(&ar, M, K, N));
        double flops = 2.0 * M * K * N, rate = 3.0 * flops / (sf + sb);
        c->pt[c->n].size = flops;
        c->pt[c->n++].eff = rate;
        if (rate > *peak)
            *peak = rate;
    }
    free(ar.base);
}

static void bench_attn(EffCurve *c)
{
    static const int shapes[][4] = {{1, 64, 4, 16}, {2, 128, 4, 32}, {4, 128, 4, 64}, {4, 256, 8, 64},
                                    {4, 512, 12, 64}, {8, 1024, 12, 64}};
    c->n = 0;
    for (int i = 0; i < 6; i++) {
        int B = shapes[i][0], T = shapes[i][1], NH = shapes[i][2], HS = shapes[i][3];
        size_t n = (size_t)B * T * NH * HS;
        float *q = malloc(n * 4), *k = malloc(n * 4), *v = malloc(n * 4), *o = malloc(n * 4),
              *l = malloc((size_t)B * NH * T * 4), *dq = calloc(n, 4), *dk = calloc(n, 4), *dv = calloc(n, 4);
        fill(q, n), fill(k, n), fill(v, n);
        double sf, sb;
        TIME_IT(0.2, sf, k_attention_fwd(o, l, q, k, v, B, T, NH, NH, HS));
        TIME_IT(0.3, sb, k_attention_bwd(dq, dk, dv, q, q, k, v, o, l, B, T, NH, NH, HS));
        /* time.c: flash core = 4·B·T²·NH·HS / 2 (the causal half) at attn_eff,
         * and its backward 2.5x that: fit forward + backward together */
        double flops = 0.5 * 4.0 * B * (double)T * T * NH * HS;
        c->pt[c->n].size = flops;
        c->pt[c->n++].eff = 3.5 * flops / (sf + sb);
        free(q), free(k), free(v), free(o), free(l), free(dq), free(dk), free(dv);
    }
}

static void bench_mem(EffCurve *c, double *bw)
{
    c->n = 0;
    *bw = 0;
    for (double bytes = 1.2e4; bytes < 1.3e9 && c->n < 10; bytes *= 10) {
        size_t n = (size_t)(bytes / 12);
        float *a = malloc(n * 4), *b = malloc(n * 4), *o = malloc(n * 4);
        fill(a, n), fill(b, n);
        double s;
        TIME_IT(0.2, s, k_residual_fwd(o, a, b, n));
        double rate = 12.0 * n / s;
        c->pt[c->n].size = 12.0 * n;
        c->pt[c->n++].eff = rate;
        if (rate > *bw)
            *bw = rate;
        free(a), free(b), free(o);
    }
}

/* Seconds of a layer's non-GEMM kernels for tok tokens, hidden h, FFN f, as
 * net.c runs them without TP: forward two norms, two residual adds, the GELU;
 * backward two norm backwards, the GELU backward and the gradient buffers it
 * zeroes (dhact, dhpre, dcol twice, the attention output, dq, dk, dv). */
static double bench_layer_ew(int tok, int h, int f)
{
    size_t nh = (size_t)tok * h, nf = (size_t)tok * f;
    float *x = malloc(nh * 4), *y = malloc(nh * 4), *z = malloc(nh * 4), *g = malloc(nh * 4), *hp = malloc(nf * 4),
          *ha = malloc(nf * 4), *dh = malloc(nf * 4), *zb = malloc((2 * nf + 6 * nh) * 4), *w = malloc(h * 4),
          *b = malloc(h * 4), *dw = calloc(h, 4), *db = calloc(h, 4), *mu = malloc(tok * 4), *rs = malloc(tok * 4);
    fill(x, nh), fill(g, nh), fill(hp, nf), fill(w, h), fill(b, h);
    double sf, sb;
    TIME_IT(0.3, sf, (k_layernorm_fwd(y, mu, rs, x, w, b, tok, h, 1e-5f), k_residual_fwd(z, y, x, nh),
                      k_layernorm_fwd(y, mu, rs, z, w, b, tok, h, 1e-5f), k_gelu_fwd(ha, hp, nf),
                      k_residual_fwd(z, y, x, nh)));
    TIME_IT(0.4, sb, (k_zero(zb, 2 * nf + 6 * nh), k_gelu_bwd(dh, hp, ha, nf),
                      k_layernorm_bwd(y, dw, db, g, x, w, mu, rs, tok, h),
                      k_layernorm_bwd(y, dw, db, g, z, w, mu, rs, tok, h)));
    free(x), free(y), free(z), free(g), free(hp), free(ha), free(dh), free(zb), free(w), free(b), free(dw), free(db),
        free(mu), free(rs);
    return sf + sb;
}

/* time.c counts a layer's memory-bound work as ew = 4·tok·(A·h + 2f) bytes
 * forward (GELU, no TP) and twice that backward, each at hbm_bw·mem_eff(ew):
 * the A that makes 3·mem_s(ew) last t seconds (bisection; mem_s grows with ew). */
static double act_elems_for(const HwProfile *hw, double t, int tok, int h, int f)
{
    double lo = 1, hi = 1e13;
    for (int i = 0; i < 200; i++) {
        double mid = sqrt(lo * hi);
        if (3.0 * time_mem_s(hw, mid) < t)
            lo = mid;
        else
            hi = mid;
    }
    double a = (lo / (4.0 * tok) - 2.0 * f) / h;
    return a > 0 ? a : 0;
}

/* What time.c predicts for those calls at a given coll_eff. */
static double model_colls(const HwProfile *hw, double eff, const double *bytes, const int *kind, int n, int world)
{
    HwProfile v = *hw;
    v.intra.bw *= eff;
    v.inter.bw *= eff;
    double t = 0;
    for (int i = 0; i < n; i++)
        t += hw->coll_lat + (kind[i] == 0 ? time_allreduce(&v, bytes[i], world, world)
                                          : time_allgather(&v, bytes[i], world, world));
    return t;
}

/* Seconds per collective of `count` floats over the world (kind 0
 * all-reduce, 1 reduce-scatter, 2 all-gather), the same on every rank. */
typedef double (*CollTimer)(void *ctx, int kind, int count, int reps);

static double mpi_coll(void *buf, int kind, int count, int reps)
{
    return dist_time_collective(kind, buf, count, reps);
}

/* coll_lat from a tiny all-reduce; coll_eff so that the model's all-reduce,
 * reduce-scatter and all-gather of 512 KiB and 16 MiB (a TP activation, DP
 * gradients) add up to what the timer took (MPI, or NCCL for --backend
 * cuda). hw->intra (inter across nodes) must hold the link. */
static void bench_colls(HwProfile *hw, int world, CollTimer timer, void *ctx)
{
    enum { BIG = 4 << 20, MID = 128 << 10 };
    double t8 = timer(ctx, 0, 2 * world, 200);
    hw->coll_lat = 0;
    hw->coll_lat = fmax(0.0, t8 - time_allreduce(hw, 8.0 * world, world, world));
    static const int kind[6] = {0, 1, 2, 0, 1, 2};
    double bytes[6], meas = 0;
    for (int i = 0; i < 6; i++) {
        int count = (i < 3 ? MID : BIG) / world * world;
        bytes[i] = 4.0 * count;
        meas += timer(ctx, kind[i], count, i < 3 ? 40 : 6);
    }
    double lo = 0.01, hi = 1.0;
    if (model_colls(hw, 1.0, bytes, kind, 6, world) >= meas) {
        lo = 1.0;
    } else {
        for (int i = 0; i < 60; i++) {
            double mid = 0.5 * (lo + hi);
            if (model_colls(hw, mid, bytes, kind, 6, world) > meas)
                lo = mid;
            else
                hi = mid;
        }
    }
    hw->coll_eff = lo;
}

static double mem_total(void)
{
    FILE *f = fopen("/proc/meminfo", "r");
    double kb = 0;
    char line[256];
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "MemTotal: %lf kB", &kb) == 1)
            break;
    if (f)
        fclose(f);
    return kb > 0 ? kb * 1024 : 8e9;
}

#if ULTRAPLAN_HAVE_CUDA
/* NCCL timings as bench_colls wants them: rank 0's figure on every rank. */
static double nccl_coll(void *k, int kind, int count, int reps)
{
    return dist_bcast_double(kc_nccl_time(k, kind, (size_t)count * 4, reps));
}

/* Under mpirun, one GPU per rank: NCCL all-reduce, all-gather,
 * reduce-scatter (bus bandwidth, nccl-tests' convention) and send/recv
 * between ranks 0 and 1 by size into rep; the link they run over (intra
 * within one node, inter across nodes: bandwidth of the largest all-reduce,
 * latency per ring hop of the smallest), coll_lat and coll_eff into hw. */
static void nccl_sweep(HwProfile *hw, KcCalibReport *rep, int rank, int world)
{
    int local_n = 1, local = dist_local_rank(&local_n);
    char id[KC_NCCL_ID_BYTES];
    memset(id, 0, sizeof id);
    if (rank == 0)
        kc_nccl_unique_id(id);
    dist_world_bcast_bytes(id, (int)sizeof id);
    int ndev = kc_device_count();
    KcNccl *k = kc_nccl_open(id, rank, world, ndev > 0 ? local % ndev : 0);
    double f = (double)(world - 1) / world, t_small = 0;
    rep->nccl_n = KC_NCCL_SIZES;
    for (int i = 0; i < KC_NCCL_SIZES; i++) {
        size_t bytes = ((size_t)1 << 16) << (2 * i);   // 64 KiB .. 1 GiB
        int reps = bytes >= ((size_t)1 << 28) ? 5 : 20;
        double t[4];
        for (int kind = 0; kind < 4; kind++)
            t[kind] = dist_bcast_double(kc_nccl_time(k, kind, bytes, reps));
        if (i == 0)
            t_small = t[0];
        rep->nccl_bytes[i] = (double)bytes;
        rep->allreduce_busbw[i] = 2 * f * bytes / t[0];
        rep->reducescatter_busbw[i] = f * bytes / t[1];
        rep->allgather_busbw[i] = f * bytes / t[2];
        rep->sendrecv_bw[i] = bytes / t[3];
        if (rank == 0)
            printf("nccl   %10zu B  all-reduce %6.1f  all-gather %6.1f  reduce-scatter %6.1f  send-recv %6.1f GB/s "
                   "(bus bandwidth, %d ranks)\n", bytes, rep->allreduce_busbw[i] / 1e9, rep->allgather_busbw[i] / 1e9,
                   rep->reducescatter_busbw[i] / 1e9, rep->sendrecv_bw[i] / 1e9, world);
    }
    Link *link = local_n >= world ? &hw->intra : &hw->inter;
    link->bw = rep->allreduce_busbw[KC_NCCL_SIZES - 1];
    link->lat = t_small / (2.0 * (world - 1));   // α of a 2(n−1)-step ring at 64 KiB
    hw->gpus_per_node = local_n;
    bench_colls(hw, world, nccl_coll, k);
    kc_nccl_close(k);
}

/* KcCalibOpts.probe: GPU 0's SM clock and power from NVML (NULL: unknown) */
static void nvml_probe(void *ctx, int *sm_mhz, double *watts)
{
    *sm_mhz = cunvml_clock_sm(ctx);
    *watts = cunvml_power_w(ctx);
}

/* --backend cuda: GPU 0 measured by kernels/cuda/calibrate_cuda.cu over the
 * h200 profile's datasheet figures, one line per measurement on stdout (with
 * the SM clock and power around the sweeps where NVML is found); one
 * process: NCCL between the GPUs it sees; under mpirun: rank 0 measures its
 * GPU, then NCCL over the ranks. */
static int calibrate_cuda(const char *out)
{
    char err[512] = "";
    int rank, world;
    dist_world_init(&rank, &world);
    HwProfile hw;
    KcCalibReport rep;
    int rc = profile_load_builtin("h200", &hw, err, sizeof err) != 0;
    if (world > 1 && !kc_nccl_available()) {
        snprintf(err, sizeof err, "this build has no NCCL: run calibrate --backend cuda as one process");
        rc = 1;
    }
    if (!rc && rank == 0) {
        CuNvml *nv = cunvml_open(0);
        KcCalibOpts opt = {stdout, world == 1, nvml_probe, nv};
        rc = kc_calibrate_opts(&hw, &rep, &opt, err, sizeof err) != 0;
        cunvml_close(nv);
    }
    rc = dist_bcast_int(rc);
    if (!rc && world > 1)
        nccl_sweep(&hw, &rep, rank, world);
    if (!rc && rank == 0)
        rc = profile_write_json(&hw, out, err, sizeof err) != 0;
    rc = dist_bcast_int(rc);
    if (rank == 0) {
        if (rc)
            fprintf(stderr, "ultraplan calibrate: %s\n", err[0] ? err : "failed on rank 0");
        else
            printf("calibrated %s: bf16 peak %.1f TFLOP/s, HBM %.0f GB/s%s -> %s\n", hw.name,
                   hw.peak[PREC_BF16] / 1e12, hw.hbm_bw / 1e9, world > 1 ? ", NCCL links and collectives" : "", out);
    }
    dist_world_finalize();
    return rc;
}
#else
static int calibrate_cuda(const char *out)
{
    (void)out;
    fprintf(stderr, "ultraplan calibrate: this build has no CUDA backend (nvcc was not found at configure time)\n");
    return 1;
}
#endif

static int calibrate_main(int argc, char **argv)
{
    static const struct option opts[] = {{"help", no_argument, 0, 'h'}, {"backend", required_argument, 0, 'b'},
                                         {"output", required_argument, 0, 'o'}, {0, 0, 0, 0}};
    const char *out = NULL, *backend = "cpu";
    int c;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "ho:", opts, NULL)) != -1) {
        if (c == 'h') {
            printf("usage: [mpirun -np N] ultraplan calibrate --backend cpu|cuda -o profile.json\n\n"
                   "Measures GEMM and attention throughput, memory bandwidth and (with N >= 2 ranks)\n"
                   "MPI latency and bandwidth, and writes a hardware profile for plan/predict --profile.\n"
                   "--backend cuda: cuBLASLt GEMM sweep, HBM copy, attention kernel over the h200\n"
                   "profile's datasheet figures; with 2+ GPUs, NCCL all-reduce, all-gather,\n"
                   "reduce-scatter and send/recv bandwidth by size (one process over the GPUs it\n"
                   "sees, or under mpirun one GPU per rank: link bw/lat, coll_lat, coll_eff).\n");
            return 0;
        } else if (c == 'b') {
            backend = optarg;
        } else if (c == 'o') {
            out = optarg;
        } else {
            fprintf(stderr, "ultraplan calibrate: option %s: unknown or missing its value\n", argv[optind - 1]);
            return 2;
        }
    }
    int cuda = strcmp(backend, "cuda") == 0;
    if (!cuda && strcmp(backend, "cpu") != 0) {
        fprintf(stderr, "ultraplan calibrate: backend \"%s\" is unknown: give cpu or cuda\n", backend);
        return 2;
    }
    if (!out) {
        fprintf(stderr, "ultraplan calibrate: give -o FILE for the profile\n");
        return 2;
    }
    if (cuda)
        return calibrate_cuda(out);
    int rank, world;
    dist_world_init(&rank, &world);
    char err[512];
    HwProfile hw;
    if (profile_load_builtin("h100-sxm", &hw, err, sizeof err) != 0) {   // fields calibrate doesn't measure
        fprintf(stderr, "ultraplan calibrate: %s\n", err);
        dist_world_finalize();
        return 1;
    }
    hw_curves_local(&hw);   // the curves measured below are this machine's: no reference GPU
    const char *thr = getenv("OMP_NUM_THREADS");
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    if (rank == 0 && !thr && world > 1)
        fprintf(stderr, "ultraplan calibrate: OMP_NUM_THREADS is not set: each of the %d ranks may start a thread "
                        "per core; calibrate and run with the same OMP_NUM_THREADS\n", world);
    /* the layer whose non-GEMM kernels set act_bytes_per_layer: a small decoder's */
    enum { EW_TOK = 512, EW_H = 256, EW_F = 1024 };
    double peak, bw, lat = 2e-6, lbw = 0, t_ew, t_kern;
    bench_gemm(&hw.gemm_eff, &peak);
    bench_attn(&hw.attn_eff);
    bench_mem(&hw.mem_eff, &bw);
    t_ew = bench_layer_ew(EW_TOK, EW_H, EW_F);
    {
        float one = 0;
        TIME_IT(0.05, t_kern, k_residual_fwd(&one, &one, &one, 1));
    }
    curve_finish(&hw.gemm_eff, peak);
    curve_finish(&hw.attn_eff, peak);
    curve_finish(&hw.mem_eff, bw);
    hw.hbm_bw = bw;
    hw.coll_lat = 0;
    hw.coll_eff = 1;
    if (world >= 2) {
        dist_time_link(&lat, &lbw);
        hw.gpus_per_node = world;
        hw.intra.bw = hw.inter.bw = lbw;
        hw.intra.lat = hw.inter.lat = lat;
        float *buf = calloc(4 << 20, sizeof(float));
        bench_colls(&hw, world, mpi_coll, buf);
        free(buf);
    }
    int rc = 0;
    if (rank == 0) {
        char host[40] = "host";
        gethostname(host, sizeof host - 1);
        snprintf(hw.name, sizeof hw.name, "cpu-%.40s", host);
        snprintf(hw.desc, sizeof hw.desc, "CPU backend of %.24s, %ld cores, measured with %d rank(s) x %s thread(s)",
                 host, cores, world, thr ? thr : "default");
        hw.peak[PREC_FP32] = peak;
        hw.peak[PREC_BF16] = hw.peak[PREC_FP16] = hw.peak[PREC_FP8] = 0;   // the CPU executor runs fp32
        hw.hbm_bytes = mem_total();
        hw.gpus_per_node = (int)(cores > world ? cores : world);
        if (lbw <= 0)
            lbw = bw / 4;   // one rank: no link measured; a copy through shared memory
        hw.intra.bw = hw.inter.bw = lbw;
        hw.intra.lat = hw.inter.lat = lat;
        hw.act_bytes_per_layer = act_elems_for(&hw, t_ew, EW_TOK, EW_H, EW_F);
        hw.kernel_lat = t_kern;   // host and device are one: no launch floor beyond an empty kernel
        hw.cuda_context_bytes = 0;
        hw.alloc_frag = 0;
        hw.nccl_buf_bytes = 0;
        hw.tp_overlap = 0;
        hw.dp_overlap = 0;   // Open MPI progresses non-blocking collectives only inside MPI calls
        hw.pp_overlap = 0;
        if (profile_write_json(&hw, out, err, sizeof err) != 0) {
            fprintf(stderr, "ultraplan calibrate: %s\n", err);
            rc = 1;
        } else {
            printf("calibrated %s: fp32 peak %.1f GFLOP/s (best GEMM fwd+bwd), memory %.1f GB/s, "
                   "layer non-GEMM %.0fh elements/token, link %.2f us / %.2f GB/s, collectives +%.1f us at %.0f%% "
                   "-> %s\n", hw.name, peak / 1e9, bw / 1e9, hw.act_bytes_per_layer, lat * 1e6, lbw / 1e9,
                   hw.coll_lat * 1e6, hw.coll_eff * 100, out);
        }
    }
    rc = dist_bcast_int(rc);
    dist_world_finalize();
    return rc;
}

const Command cmd_calibrate = {"calibrate", "measure this machine into a hardware profile", calibrate_main};
