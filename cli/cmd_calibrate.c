/* cmd_calibrate.c — `[mpirun -np N] ultraplan calibrate --backend cpu -o cpu.json`:
 * measures this machine and writes a hardware profile the cost model reads.
 *
 * Every rank runs the compute and memory benchmarks at once (as every rank
 * computes at once in a run, sharing cores and memory bandwidth); rank 0's
 * figures are kept. GEMM throughput over a table of the shapes a small
 * decoder uses gives the peak (the best one) and the efficiency curve;
 * the flash-style attention kernel gives attn_eff; a streaming add gives
 * the memory bandwidth and mem_eff. With two or more ranks, ping-pong
 * between ranks 0 and 1 gives the link latency and bandwidth. */
#include <getopt.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "command.h"
#include "kernels.h"
#include "profile.h"

/* Seconds per call of fn, repeated until ~budget seconds have gone by. */
#define TIME_IT(budget, secs, call) do { \
    call; int reps_ = 0; double t0_ = MPI_Wtime(), el_; \
    do { call; reps_++; el_ = MPI_Wtime() - t0_; } while (el_ < (budget)); \
    secs = el_ / reps_; } while (0)

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

static void bench_gemm(EffCurve *c, double *peak)
{
    /* (rows, in, out): tokens x hidden shapes of small decoders */
    static const int shapes[][3] = {{64, 64, 64}, {128, 64, 192}, {256, 128, 128}, {512, 128, 512},
                                    {512, 256, 768}, {1024, 256, 1024}, {1024, 512, 1536},
                                    {2048, 768, 768}, {2048, 768, 2304}, {4096, 768, 3072},
                                    {4096, 1024, 4096}};
    int n = sizeof shapes / sizeof shapes[0];
    float *a = malloc(4096 * 4096 * sizeof(float)), *w = malloc(4096 * 4096 * sizeof(float)),
          *o = malloc(4096 * 4096 * sizeof(float));
    fill(a, 4096 * 4096);
    fill(w, 4096 * 4096);
    *peak = 0;
    c->n = 0;
    for (int i = 0; i < n && c->n < HW_MAX_EFF_POINTS; i++) {
        int M = shapes[i][0], K = shapes[i][1], N = shapes[i][2];
        double s;
        TIME_IT(0.25, s, k_matmul_fwd(o, a, w, NULL, M, K, N));
        double flops = 2.0 * M * K * N, rate = flops / s;
        c->pt[c->n].size = flops;
        c->pt[c->n++].eff = rate;
        if (rate > *peak)
            *peak = rate;
    }
    free(a);
    free(w);
    free(o);
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
              *l = malloc((size_t)B * NH * T * 4);
        fill(q, n), fill(k, n), fill(v, n);
        double s;
        TIME_IT(0.2, s, k_attention_fwd(o, l, q, k, v, B, T, NH, NH, HS));
        /* the cost model counts the full s^2 core: 4·B·T²·NH·HS */
        double flops = 4.0 * B * (double)T * T * NH * HS;
        c->pt[c->n].size = flops;
        c->pt[c->n++].eff = flops / s;
        free(q), free(k), free(v), free(o), free(l);
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

/* Latency (s, one way) and bandwidth (bytes/s) between ranks 0 and 1. */
static void bench_link(int rank, double *lat, double *bw)
{
    const int big = 4 << 20;
    char *buf = calloc(big, 1);
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
    *lat = t[0];
    *bw = big / (t[1] - t[0] > 0 ? t[1] - t[0] : t[1]);
    free(buf);
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
            printf("usage: [mpirun -np N] ultraplan calibrate --backend cpu -o cpu.json\n\n"
                   "Measures GEMM and attention throughput, memory bandwidth and (with N >= 2 ranks)\n"
                   "MPI latency and bandwidth, and writes a hardware profile for plan/predict --profile.\n");
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
    if (strcmp(backend, "cpu") != 0) {
        fprintf(stderr, "ultraplan calibrate: backend \"%s\" is not built; this binary calibrates \"cpu\"\n", backend);
        return 2;
    }
    if (!out) {
        fprintf(stderr, "ultraplan calibrate: give -o FILE for the profile\n");
        return 2;
    }
    MPI_Init(NULL, NULL);
    int rank, world;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &world);
    char err[512];
    HwProfile hw;
    if (profile_load_builtin("h100-sxm", &hw, err, sizeof err) != 0) {   // fields calibrate doesn't measure
        fprintf(stderr, "ultraplan calibrate: %s\n", err);
        MPI_Finalize();
        return 1;
    }
    double peak, bw, lat = 2e-6, lbw = 0;
    bench_gemm(&hw.gemm_eff, &peak);
    bench_attn(&hw.attn_eff);
    bench_mem(&hw.mem_eff, &bw);
    if (world >= 2)
        bench_link(rank, &lat, &lbw);
    int rc = 0;
    if (rank == 0) {
        curve_finish(&hw.gemm_eff, peak);
        curve_finish(&hw.attn_eff, peak);
        curve_finish(&hw.mem_eff, bw);
        char host[40] = "host";
        gethostname(host, sizeof host - 1);
        snprintf(hw.name, sizeof hw.name, "cpu-%.40s", host);
        long cores = sysconf(_SC_NPROCESSORS_ONLN);
        snprintf(hw.desc, sizeof hw.desc, "CPU backend of %.40s, %ld cores, measured with %d rank(s)", host, cores, world);
        hw.peak[PREC_FP32] = peak;
        hw.peak[PREC_BF16] = hw.peak[PREC_FP16] = hw.peak[PREC_FP8] = 0;   // the CPU executor runs fp32
        hw.hbm_bytes = mem_total();
        hw.hbm_bw = bw;
        hw.gpus_per_node = (int)(cores > world ? cores : world);
        if (lbw <= 0)
            lbw = bw / 4;   // one rank: no link measured; a copy through shared memory
        hw.intra.bw = hw.inter.bw = lbw;
        hw.intra.lat = hw.inter.lat = lat;
        hw.act_bytes_per_layer = 14;   // elements per token in units of h: 2 norms 4h, 2 residuals 6h, 2 bias adds 4h
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
            printf("calibrated %s: fp32 peak %.1f GFLOP/s (best GEMM), memory %.1f GB/s, "
                   "link %.2f us / %.2f GB/s -> %s\n", hw.name, peak / 1e9, bw / 1e9, lat * 1e6, lbw / 1e9, out);
        }
    }
    MPI_Bcast(&rc, 1, MPI_INT, 0, MPI_COMM_WORLD);
    MPI_Finalize();
    return rc;
}

const Command cmd_calibrate = {"calibrate", "measure this machine into a hardware profile", calibrate_main};
