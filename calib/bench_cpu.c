/* bench_cpu.c — see bench_cpu.h. */
#include "bench_cpu.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench_fit.h"
#include "cost.h"
#include "dist.h"
#include "kernels.h"
#include "profile.h"

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
        /* timing.c: flash core = 4·B·T²·NH·HS / 2 (the causal half) at attn_eff,
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

/* timing.c counts a layer's memory-bound work as ew = 4·tok·(A·h + 2f) bytes
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

/* What timing.c predicts for those calls at a given coll_eff. */
static double model_colls(const HwProfile *hw, double eff, const double *bytes, const CollKind *kind, int n, int world)
{
    HwProfile v = *hw;
    v.intra.bw *= eff;
    v.inter.bw *= eff;
    double t = 0;
    for (int i = 0; i < n; i++)
        t += hw->coll_lat + (kind[i] == COLL_ALLREDUCE ? time_allreduce(&v, bytes[i], world, world)
                                          : time_allgather(&v, bytes[i], world, world));
    return t;
}

static double mpi_coll(void *buf, CollKind kind, int count, int reps)
{
    return dist_time_collective(kind, buf, count, reps);
}

void bench_fit_colls(HwProfile *hw, int world, BenchCollTimer timer, void *ctx)
{
    enum { BIG = 4 << 20, MID = 128 << 10 };
    double t8 = timer(ctx, COLL_ALLREDUCE, 2 * world, 200);
    hw->coll_lat = 0;
    hw->coll_lat = fmax(0.0, t8 - time_allreduce(hw, 8.0 * world, world, world));
    static const CollKind kind[6] = {COLL_ALLREDUCE, COLL_REDUCE_SCATTER, COLL_ALLGATHER,
                                     COLL_ALLREDUCE, COLL_REDUCE_SCATTER, COLL_ALLGATHER};
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

/* a2a_lat, a2a_eff: MPI_Alltoall of the world (all on this host: k =
 * world) from one float per peer to 16 MiB per rank, fitted by
 * bench_fit_a2a on hw's link (set from the ping-pong). buf: 8 Mi floats.
 * Collective; rank 0 prints a line per size. */
static void bench_fit_alltoall(HwProfile *hw, int rank, int world, float *buf)
{
    enum { NPT = 6, TOTAL = 4 << 20 };   // floats of the largest per-rank buffer
    int cmax = TOTAL / world, shift[NPT] = {-1, 12, 9, 6, 3, 0};
    double bytes[NPT], secs[NPT];
    for (int i = 0; i < NPT; i++) {
        int c = shift[i] < 0 ? 1 : cmax >> shift[i];
        c = c < 1 ? 1 : c;
        long per_rank = (long)c * world;
        int reps = (int)(200 - 197 * (double)per_rank / TOTAL);   // 200 at one float, 3 at 16 MiB
        bytes[i] = 4.0 * per_rank;
        secs[i] = dist_time_alltoall(buf, c, reps);
        if (rank == 0)
            printf("all-to-all %10.0f B per rank  %10.2f us  %7.2f GB/s bus bandwidth (%d ranks)\n", bytes[i],
                   secs[i] * 1e6, bytes[i] * (world - 1) / world / secs[i] / 1e9, world);
    }
    BenchA2aFit f;
    char err[256];
    if (bench_fit_a2a(hw, world, world, bytes, secs, NPT, &f, err, sizeof err) != 0) {
        if (rank == 0)
            fprintf(stderr, "ultraplan calibrate: %s: a2a_lat, a2a_eff left to coll_lat, coll_eff\n", err);
        hw->a2a_lat = hw->a2a_eff = 0;
        return;
    }
    hw->a2a_lat = f.lat;
    hw->a2a_eff = f.eff;
    if (rank == 0)
        printf("all-to-all fit: a2a_lat %.2f us, a2a_eff %.0f%% of the link, mean error %.1f%%%s\n", f.lat * 1e6,
               f.eff * 100, f.err * 100, f.capped ? " (at a bound)" : "");
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

int bench_cpu_calibrate(const char *out, int rank, int world)
{
    char err[512];
    HwProfile hw;
    if (profile_load_builtin("h100-sxm", &hw, err, sizeof err) != 0) {   // fields calibrate doesn't measure
        fprintf(stderr, "ultraplan calibrate: %s\n", err);
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
    hw.a2a_lat = hw.a2a_eff = 0;   // one rank: none measured, the model falls back to coll_lat, coll_eff
    if (world >= 2) {
        dist_time_link(&lat, &lbw);
        hw.gpus_per_node = world;
        hw.intra.bw = hw.inter.bw = lbw;
        hw.intra.lat = hw.inter.lat = lat;
        float *buf = calloc(8 << 20, sizeof(float));
        if (dist_world_max(buf == NULL)) {   // every rank stops, or none does
            if (rank == 0)
                fprintf(stderr, "ultraplan calibrate: out of memory for the collective buffers (32 MiB a rank)\n");
            free(buf);
            return 1;
        }
        bench_fit_colls(&hw, world, mpi_coll, buf);
        bench_fit_alltoall(&hw, rank, world, buf);
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
                   "layer non-GEMM %.0fh elements/token, link %.2f us / %.2f GB/s, collectives +%.1f us at %.0f%%, "
                   "all-to-all +%.2f us at %.0f%% -> %s\n", hw.name, peak / 1e9, bw / 1e9, hw.act_bytes_per_layer,
                   lat * 1e6, lbw / 1e9, hw.coll_lat * 1e6, hw.coll_eff * 100, hw.a2a_lat * 1e6, hw.a2a_eff * 100,
                   out);
        }
    }
    return dist_bcast_int(rc);
}

