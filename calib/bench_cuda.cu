/* bench_cuda.cu — copy, GEMM and attention sweeps into a HwProfile (see
 * bench_cuda.h; the NCCL sweeps are bench_cuda_run.c's, over cucomm). Timed with CUDA events on random
 * inputs, never zeros (a GEMM on zeros runs faster than on real data).
 *
 * GEMM and attention are measured in the steady, power-limited state a
 * training run lives in, not from a cool GPU: an H200 under sustained GEMM
 * load reaches its ~700 W cap and its SM clock falls from 1980 to ~1400-1500
 * MHz. Device run of 2026-11-30: a 175B tp-8 stage's GEMMs ran at 796
 * TFLOP/s in ~10 ms bursts but 640-690 TFLOP/s over 1.5 s (SM 1395-1500 MHz,
 * 691-694 W), while this sweep, then ~20 ms a point and ~1 s in all from a
 * cool GPU, wrote gemm_eff 0.75-0.80 at 1e11-1e12 FLOPs; predictions with
 * that profile came out 9 % (1.3B GPT step) and 22 % (175B stage proxy) too
 * fast. So: ~2 s of the sweep's largest GEMM back to back first, then every
 * GEMM and attention point queued back to back for >= 100 ms (5 batches of
 * >= 20 ms, no host sync in between), the median batch kept. Copies keep the
 * short timing (memory-bound; they run before the warm-up). */
#include <math.h>
#include <stdarg.h>
#include <string.h>
#include <algorithm>
#include "common.cuh"
#include "bench_cuda.h"
#include "kc_fp8.h"

__global__ void fill_random_kernel(bf16 *x, size_t n, uint32_t seed) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        uint32_t h = (uint32_t)i * 2654435761u ^ seed;
        h ^= h >> 16; h *= 0x7feb352du; h ^= h >> 15; h *= 0x846ca68bu; h ^= h >> 16;
        x[i] = __float2bfloat16((h >> 8) * (2.0f / 16777216.0f) - 1.0f);
    }
}

static void fill_random(bf16 *x, size_t n, uint32_t seed) {
    fill_random_kernel<<<grid_for(n, 256), 256>>>(x, n, seed);
    CHECK_LAUNCH();
}

static void logf_(FILE *log, const char *fmt, ...) {
    if (!log) return;
    va_list ap;
    va_start(ap, fmt);
    vfprintf(log, fmt, ap);
    va_end(ap);
    fflush(log);
}

/* seconds per call of fn(), median of 5 batches of ~4 ms after warm-up */
template <typename F>
static double time_call(F fn) { return kc_time_median(fn, 4.0, 200); }

static const double WARMUP_MS = 2000;   // long enough to reach the power cap

/* the same with the GPU kept loaded: batches of >= 20 ms, >= 100 ms a point */
template <typename F>
static double time_steady(F fn) { return kc_time_median(fn, 20.0, 20000); }

/* fn() back to back, in chunks of 8 calls, until the events say WARMUP_MS
 * have passed; logs the rate of the first and the last chunk (flops per
 * call), which shows the clock falling as the power cap is reached. */
template <typename F>
static void warm_up(F fn, double flops, FILE *log, const char *what) {
    enum { CHUNK = 8 };
    cudaEvent_t e0, a, b;
    CHECK_CUDA(cudaEventCreate(&e0));
    CHECK_CUDA(cudaEventCreate(&a));
    CHECK_CUDA(cudaEventCreate(&b));
    CHECK_CUDA(cudaEventRecord(e0));
    float total = 0, ms = 0, first = 0;
    int chunks = 0;
    while (total < WARMUP_MS) {
        CHECK_CUDA(cudaEventRecord(a));
        for (int i = 0; i < CHUNK; i++) fn();
        CHECK_CUDA(cudaEventRecord(b));
        CHECK_CUDA(cudaEventSynchronize(b));
        CHECK_CUDA(cudaEventElapsedTime(&ms, a, b));
        CHECK_CUDA(cudaEventElapsedTime(&total, e0, b));
        if (chunks++ == 0) first = ms;
    }
    logf_(log, "warm-up %s back to back for %.2f s: %.1f TFLOP/s at first, %.1f at the end\n", what,
          total * 1e-3, flops * CHUNK / (first * 1e-3) / 1e12, flops * CHUNK / (ms * 1e-3) / 1e12);
    cudaEventDestroy(e0); cudaEventDestroy(a); cudaEventDestroy(b);
}

/* "  SM N MHz, W W" from the caller's probe into buf, or "" without one or
 * when it knows neither figure (no NVML) */
static const char *gpu_state(const BenchCudaOpts *opt, char *buf, size_t n) {
    int mhz = -1;
    double watts = -1;
    if (opt->probe) opt->probe(opt->probe_ctx, &mhz, &watts);
    if (mhz < 0 && watts < 0) return "";
    snprintf(buf, n, "  SM %d MHz, %.0f W", mhz, watts);
    return buf;
}

/* "gpu    WHEN:  SM N MHz, W W" when the probe knows */
static void log_gpu(const BenchCudaOpts *opt, const char *when) {
    char buf[64];
    const char *st = opt->log ? gpu_state(opt, buf, sizeof buf) : "";
    if (st[0]) logf_(opt->log, "gpu    %s:%s\n", when, st);
}

/* points (size, eff) → an ascending curve of at most HW_MAX_EFF_POINTS,
 * equal sizes merged (best), eff clamped into (0, 1] */
static void make_curve(EffCurve *c, EffPoint *pt, int n) {
    std::sort(pt, pt + n, [](const EffPoint &x, const EffPoint &y) { return x.size < y.size; });
    c->n = 0;
    for (int i = 0; i < n; i++) {
        double e = std::min(1.0, std::max(1e-4, pt[i].eff));
        if (c->n && c->pt[c->n - 1].size == pt[i].size) {
            c->pt[c->n - 1].eff = std::max(c->pt[c->n - 1].eff, e);
            continue;
        }
        if (c->n == HW_MAX_EFF_POINTS) break;
        c->pt[c->n].size = pt[i].size;
        c->pt[c->n].eff = e;
        c->n++;
    }
}

static void sweep_gemm(HwProfile *hw, BenchCudaReport *rep, const BenchCudaOpts *opt) {
    FILE *log = opt->log;
    // (BT, C, OC) as kc_matmul_fwd takes them: squares, then the four
    // GEMMs of a layer at h = 2048, 4096, 8192 with 8192 tokens
    static const int shapes[][3] = {
        {256, 256, 256}, {512, 512, 512}, {1024, 1024, 1024}, {2048, 2048, 2048},
        {4096, 4096, 4096}, {8192, 8192, 8192},
        {8192, 2048, 6144}, {8192, 2048, 8192}, {8192, 8192, 2048},
        {8192, 4096, 12288}, {8192, 4096, 16384}, {8192, 16384, 4096},
        {8192, 8192, 24576}, {8192, 8192, 32768}, {8192, 32768, 8192},
    };
    enum { NS = sizeof shapes / sizeof shapes[0] };
    size_t maxa = 0, maxw = 0, maxo = 0;
    for (int i = 0; i < NS; i++) {
        maxa = std::max(maxa, (size_t)shapes[i][0] * shapes[i][1]);
        maxw = std::max(maxw, (size_t)shapes[i][2] * shapes[i][1]);
        maxo = std::max(maxo, (size_t)shapes[i][0] * shapes[i][2]);
    }
    bf16 *a, *w, *o;
    CHECK_CUDA(cudaMalloc(&a, maxa * sizeof(bf16)));
    CHECK_CUDA(cudaMalloc(&w, maxw * sizeof(bf16)));
    CHECK_CUDA(cudaMalloc(&o, maxo * sizeof(bf16)));
    fill_random(a, maxa, 1);
    fill_random(w, maxw, 2);
    double flops[NS], rate[NS], best = 0;
    int big = 0;
    for (int i = 0; i < NS; i++) {
        flops[i] = 2.0 * shapes[i][0] * shapes[i][1] * (double)shapes[i][2];
        if (flops[i] > flops[big]) big = i;
    }
    const int *sb = shapes[big];
    char what[64];
    snprintf(what, sizeof what, "GEMM BT=%d C=%d OC=%d", sb[0], sb[1], sb[2]);
    log_gpu(opt, "before the warm-up");
    warm_up([&] { kc_matmul_fwd(o, a, w, NULL, sb[0], sb[1], sb[2], 0); }, flops[big], log, what);
    log_gpu(opt, "after the warm-up");
    for (int i = 0; i < NS; i++) {
        int BT = shapes[i][0], C = shapes[i][1], OC = shapes[i][2];
        double t = time_steady([&] { kc_matmul_fwd(o, a, w, NULL, BT, C, OC, 0); });
        rate[i] = flops[i] / t;
        best = std::max(best, rate[i]);
        char buf[64];
        logf_(log, "gemm   BT=%-5d C=%-5d OC=%-5d  %9.3f ms  %7.1f TFLOP/s%s\n", BT, C, OC,
              t * 1e3, rate[i] / 1e12, log ? gpu_state(opt, buf, sizeof buf) : "");
    }
    double peak = hw->peak[PREC_BF16] > 0 ? hw->peak[PREC_BF16] : best;
    if (hw->peak[PREC_BF16] <= 0) hw->peak[PREC_BF16] = best;
    EffPoint pt[NS];
    for (int i = 0; i < NS; i++) pt[i] = EffPoint{flops[i], rate[i] / peak};
    make_curve(&hw->gemm_eff, pt, NS);
    rep->gemm_best = best;
    cudaFree(a); cudaFree(w); cudaFree(o);
}

/* The bf16 sweep's shapes through the fp8 executor's forward GEMM
 * (kc_fp8_gemm: E4M3 × E4M3, per-tensor scales, bf16 out, fast
 * accumulation), on random operands cast by the executor's own quantizer;
 * timed as the bf16 points (the GPU still at its power cap from them). A
 * shape cuBLASLt refuses is logged and left out. */
static void sweep_fp8(BenchCudaReport *rep, const BenchCudaOpts *opt) {
    FILE *log = opt->log;
    static const int shapes[][3] = {   // (BT, C, OC), as sweep_gemm
        {1024, 1024, 1024}, {2048, 2048, 2048}, {4096, 4096, 4096}, {8192, 8192, 8192},
        {8192, 2048, 6144}, {8192, 2048, 8192}, {8192, 8192, 2048},
        {8192, 4096, 12288}, {8192, 4096, 16384}, {8192, 16384, 4096},
        {8192, 8192, 24576}, {8192, 8192, 32768}, {8192, 32768, 8192},
    };
    enum { NS = sizeof shapes / sizeof shapes[0] };
    static_assert(NS <= BENCH_FP8_POINTS, "fp8 sweep larger than the report");
    size_t maxa = 0, maxw = 0, maxo = 0;   // every size a multiple of 8192 (the casts' row width)
    for (int i = 0; i < NS; i++) {
        maxa = std::max(maxa, (size_t)shapes[i][0] * shapes[i][1]);
        maxw = std::max(maxw, (size_t)shapes[i][2] * shapes[i][1]);
        maxo = std::max(maxo, (size_t)shapes[i][0] * shapes[i][2]);
    }
    bf16 *src, *o;
    kc_fp8 *a8, *w8;
    float *sc;   // amax a, amax w, scale_inv a, scale_inv w
    CHECK_CUDA(cudaMalloc(&src, std::max(maxa, maxw) * sizeof(bf16)));
    CHECK_CUDA(cudaMalloc(&a8, maxa));
    CHECK_CUDA(cudaMalloc(&w8, maxw));
    CHECK_CUDA(cudaMalloc(&sc, 4 * sizeof(float)));
    fill_random(src, maxa, 7);
    kc_fp8_amax(sc + 0, src, maxa, 0);
    kc_fp8_cast_transpose(a8, NULL, sc + 2, src, sc + 0, (int)(maxa / 8192), 8192, KC_E4M3, 0);
    fill_random(src, maxw, 8);
    kc_fp8_amax(sc + 1, src, maxw, 0);
    kc_fp8_cast_transpose(w8, NULL, sc + 3, src, sc + 1, (int)(maxw / 8192), 8192, KC_E4M3, 0);
    CHECK_CUDA(cudaDeviceSynchronize());
    cudaFree(src);
    CHECK_CUDA(cudaMalloc(&o, maxo * sizeof(bf16)));
    rep->fp8_n = 0;
    for (int i = 0; i < NS; i++) {
        int BT = shapes[i][0], C = shapes[i][1], OC = shapes[i][2];
        if (kc_fp8_gemm(o, 0, w8, KC_E4M3, sc + 3, a8, KC_E4M3, sc + 2, OC, BT, C, 0.0f, NULL, 1, 0)) {
            logf_(log, "fp8    BT=%-5d C=%-5d OC=%-5d  refused by cuBLASLt (left out)\n", BT, C, OC);
            continue;
        }
        double t = time_steady([&] {
            kc_fp8_gemm(o, 0, w8, KC_E4M3, sc + 3, a8, KC_E4M3, sc + 2, OC, BT, C, 0.0f, NULL, 1, 0);
        });
        double f = 2.0 * BT * C * (double)OC;
        int k = rep->fp8_n++;
        rep->fp8_flops[k] = f;
        rep->fp8_rate[k] = f / t;
        rep->fp8_best = std::max(rep->fp8_best, f / t);
        char buf[64];
        logf_(log, "fp8    BT=%-5d C=%-5d OC=%-5d  %9.3f ms  %7.1f TFLOP/s%s\n", BT, C, OC, t * 1e3, f / t / 1e12,
              log ? gpu_state(opt, buf, sizeof buf) : "");
    }
    cudaFree(a8); cudaFree(w8); cudaFree(o); cudaFree(sc);
}

/* mem_eff by bytes moved, from HBM: each copy of n bytes takes the next of k
 * (src, dst) slots of the two 1 GiB buffers, k so that the ring spans at
 * least twice the L2 (l2 bytes), so every call finds its source cold, as a
 * memory-bound pass over a run's activations does. One hot pair measured
 * the L2 instead: 16 MiB each way fit the H200's and came out above the HBM
 * peak (clamped to 1, then 0.81 at the next size). */
static void sweep_copy(HwProfile *hw, BenchCudaReport *rep, FILE *log, size_t l2) {
    static const double sizes[] = {1 << 16, 1 << 20, 1 << 24, 1 << 26, 1 << 28, 1 << 30};
    enum { NS = sizeof sizes / sizeof sizes[0] };
    char *src, *dst;
    size_t maxb = (size_t)sizes[NS - 1];
    CHECK_CUDA(cudaMalloc(&src, maxb));
    CHECK_CUDA(cudaMalloc(&dst, maxb));
    fill_random((bf16 *)src, maxb / 2, 3);
    double bw[NS], best = 0;
    for (int i = 0; i < NS; i++) {
        size_t n = (size_t)sizes[i];
        size_t k = std::min(std::max((size_t)1, (2 * l2 + 2 * n - 1) / (2 * n)), maxb / n), at = 0;
        double t = time_call([&] {
            size_t off = at++ % k * n;
            CHECK_CUDA(cudaMemcpyAsync(dst + off, src + off, n, cudaMemcpyDeviceToDevice, 0));
        });
        bw[i] = 2.0 * n / t;
        best = std::max(best, bw[i]);
        logf_(log, "copy   %10zu B  %9.3f ms  %7.1f GB/s (read + write; %zu slots, %.0f MiB in turn)\n", n,
              t * 1e3, bw[i] / 1e9, k, 2.0 * k * n / 1048576);
    }
    if (hw->hbm_bw <= 0) hw->hbm_bw = best;
    EffPoint pt[NS];
    for (int i = 0; i < NS; i++) pt[i] = EffPoint{2.0 * sizes[i], bw[i] / hw->hbm_bw};
    make_curve(&hw->mem_eff, pt, NS);
    rep->copy_bw = best;
    cudaFree(src); cudaFree(dst);
}

static void sweep_attention(HwProfile *hw, BenchCudaReport *rep, const BenchCudaOpts *opt) {
    FILE *log = opt->log;
    static const int shapes[][3] = {{1, 512, 16}, {1, 1024, 16}, {1, 2048, 16},
                                    {4, 2048, 16}, {1, 4096, 32}, {2, 8192, 32}};   // B, T, NH
    enum { NS = sizeof shapes / sizeof shapes[0], HS = 128 };
    size_t maxn = 0;
    for (int i = 0; i < NS; i++) maxn = std::max(maxn, (size_t)shapes[i][0] * shapes[i][1] * shapes[i][2] * HS);
    bf16 *q, *k, *v, *o;
    float *lse;
    CHECK_CUDA(cudaMalloc(&q, maxn * sizeof(bf16)));
    CHECK_CUDA(cudaMalloc(&k, maxn * sizeof(bf16)));
    CHECK_CUDA(cudaMalloc(&v, maxn * sizeof(bf16)));
    CHECK_CUDA(cudaMalloc(&o, maxn * sizeof(bf16)));
    CHECK_CUDA(cudaMalloc(&lse, maxn / HS * sizeof(float)));
    fill_random(q, maxn, 4); fill_random(k, maxn, 5); fill_random(v, maxn, 6);
    EffPoint pt[NS];
    double best = 0;
    for (int i = 0; i < NS; i++) {
        int B = shapes[i][0], T = shapes[i][1], NH = shapes[i][2];
        double t = time_steady([&] { kc_attention_fwd(o, lse, q, k, v, B, T, NH, NH, HS, 0); });
        double f = 4.0 * B * (double)T * T * NH * HS * 0.5;
        best = std::max(best, f / t);
        pt[i] = EffPoint{f, f / t / hw->peak[PREC_BF16]};
        char buf[64];
        logf_(log, "attn   B=%d T=%-5d NH=%-2d HS=%d  %9.3f ms  %7.1f TFLOP/s%s\n", B, T, NH, HS,
              t * 1e3, f / t / 1e12, log ? gpu_state(opt, buf, sizeof buf) : "");
    }
    make_curve(&hw->attn_eff, pt, NS);
    rep->attn_best = best;
    cudaFree(q); cudaFree(k); cudaFree(v); cudaFree(o); cudaFree(lse);
}

int bench_cuda_measure(HwProfile *hw, BenchCudaReport *rep_out, const BenchCudaOpts *opt, char *err, int errlen) {
    FILE *log = opt->log;
    BenchCudaReport rep;
    memset(&rep, 0, sizeof rep);
    rep.ngpus = kc_device_count();
    if (rep.ngpus == 0) {
        snprintf(err, errlen, "calibrate --backend cuda: no CUDA device visible (cudaGetDeviceCount)");
        return -1;
    }
    cudaDeviceProp prop;
    CHECK_CUDA(cudaSetDevice(0));
    CHECK_CUDA(cudaGetDeviceProperties(&prop, 0));
    snprintf(rep.device, sizeof rep.device, "%.95s", prop.name);
    logf_(log, "device %s, %d SMs, %.1f GiB, %d visible\n", prop.name, prop.multiProcessorCount,
          prop.totalGlobalMem / 1073741824.0, rep.ngpus);
    if (!hw->name[0]) {
        int j = 0;
        for (const char *s = prop.name; *s && j < (int)sizeof hw->name - 1; s++)
            hw->name[j++] = (*s == ' ') ? '-' : (char)((*s >= 'A' && *s <= 'Z') ? *s + 32 : *s);
        hw->name[j] = 0;
    }
    if (!hw->desc[0]) snprintf(hw->desc, sizeof hw->desc, "%.100s (calibrated)", prop.name);
    hw->hbm_bytes = (double)prop.totalGlobalMem;
    hw->compute_capability = prop.major + prop.minor / 10.0;   // what the fp8 recipes are checked against
    hw_curves_local(hw);   // the curves measured below are this GPU's: no reference GPU
    kc_init();
    // copies first: the GEMM sweep's warm-up brings the GPU to its power
    // cap, and attention follows it while it is still there
    sweep_copy(hw, &rep, log, prop.l2CacheSize > 0 ? (size_t)prop.l2CacheSize : (size_t)64 << 20);
    sweep_gemm(hw, &rep, opt);
    if (prop.major >= 9) sweep_fp8(&rep, opt);   // Hopper's fp8 tensor cores (Ada's too, untried here)
    else logf_(log, "fp8    skipped: compute capability %d.%d (the sweep runs on 9.0 and later)\n", prop.major,
               prop.minor);
    sweep_attention(hw, &rep, opt);
    log_gpu(opt, "after the GEMM and attention sweeps");
    if (hw->gpus_per_node < 1) hw->gpus_per_node = rep.ngpus;
    CHECK_CUDA(cudaDeviceSynchronize());
    if (rep_out) *rep_out = rep;
    return 0;
}

int bench_cuda_measure_log(HwProfile *hw, BenchCudaReport *rep, FILE *log, char *err, int errlen) {
    BenchCudaOpts opt = {log, NULL, NULL};
    return bench_cuda_measure(hw, rep, &opt, err, errlen);
}
