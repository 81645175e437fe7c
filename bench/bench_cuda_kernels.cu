/* bench_cuda_kernels.cu — times the kc_ kernels at the shapes of a ~1B GPT
 * step (B·T = 16384 tokens, C = 2048, 16 heads of 128, V = 50304) and prints
 * each against its ceiling: memory-bound kernels as GB/s over the fewest
 * bytes they must move (each input read once, each output written once)
 * against the measured device copy and the 4.8 TB/s datasheet; GEMMs and
 * attention as TFLOP/s against 989 (H200/H100 dense bf16). Then the four
 * GEMMs of one tp rank of a 175B tp-8 stage, short and sustained (~1.5 s
 * back to back each, with NVML's SM clock and power), so that clock or
 * power throttling under a training step's load shows. Last, the fp8
 * quantizer and GEMMs (kc_fp8.h) and the MoE permutation kernels, each
 * memory-bound one as % of the measured copy.
 *
 *   bench_cuda_kernels                      the table
 *   bench_cuda_kernels --calibrate F.json [--profile h200]
 *                                           also run bench_cuda_measure_log from
 *                                           the builtin profile and write F.json
 * Exit 77 when no GPU is present. Times: CUDA events, warm-up first, median
 * of 5 batches of ~10 ms, random inputs. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <algorithm>
#include <string>
#include <cuda_runtime.h>
#include "kernels_cuda.h"
#include "kc_fp8.h"
#include "common.cuh"
#include "bench_cuda.h"
extern "C" {
#include "profile.h"   // C headers without extern "C" of their own
#include "cunvml.h"
}

typedef __nv_bfloat16 bf16;
static const double PEAK_BF16 = 989e12, PEAK_FP8 = 1979e12, HBM_DATASHEET = 4.8e12;

__global__ void fill_kernel(bf16 *x, size_t n, uint32_t seed, float scale) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        uint32_t h = (uint32_t)i * 2654435761u ^ seed;
        h ^= h >> 16; h *= 0x7feb352du; h ^= h >> 15; h *= 0x846ca68bu; h ^= h >> 16;
        x[i] = __float2bfloat16(scale * ((h >> 8) * (2.0f / 16777216.0f) - 1.0f));
    }
}

static uint32_t seed = 1;
static bf16 *rand_bf(size_t n, float scale) {
    bf16 *x;
    CHECK_CUDA(cudaMalloc(&x, n * sizeof *x));
    fill_kernel<<<4096, 256>>>(x, n, seed++, scale);
    CHECK_LAUNCH();
    return x;
}
static float *rand_f(size_t n, float scale) {
    bf16 *t = rand_bf(n, scale);
    float *x;
    CHECK_CUDA(cudaMalloc(&x, n * sizeof *x));
    kc_to_float(x, t, n, 0);
    CHECK_CUDA(cudaFree(t));
    return x;
}

template <typename F>
static double time_s(F fn) { return kc_time_median(fn, 10.0, 500); }

static double copy_bw;   // measured, bytes/s (read + write)

static void mem_row(const char *name, double bytes, double t) {
    double bw = bytes / t;
    printf("%-24s %9.3f ms  %8.1f GB/s  %5.1f %% of copy  %5.1f %% of 4.8 TB/s\n", name, t * 1e3,
           bw / 1e9, 100 * bw / copy_bw, 100 * bw / HBM_DATASHEET);
}
static void flop_row(const char *name, double flops, double t) {
    printf("%-24s %9.3f ms  %8.1f TFLOP/s  %5.1f %% of 989\n", name, t * 1e3, flops / t / 1e12,
           100 * flops / t / PEAK_BF16);
}

/* Seconds per call of fn over ~secs of back-to-back calls (count from the
 * short timing t_short), one pair of events around the whole loop: what a
 * GEMM sustains once the chip is hot and at its power limit, which the short
 * timing's ~10 ms batches never reach. */
template <typename F>
static double sustained_s(F fn, double t_short, double secs) {
    int reps = (int)std::max(1.0, secs / t_short);
    cudaEvent_t a, b;
    CHECK_CUDA(cudaEventCreate(&a));
    CHECK_CUDA(cudaEventCreate(&b));
    CHECK_CUDA(cudaEventRecord(a));
    for (int i = 0; i < reps; i++) fn();
    CHECK_CUDA(cudaEventRecord(b));
    CHECK_CUDA(cudaEventSynchronize(b));
    float ms = 0;
    CHECK_CUDA(cudaEventElapsedTime(&ms, a, b));
    cudaEventDestroy(a);
    cudaEventDestroy(b);
    return ms * 1e-3 / reps;
}

static void clock_line(CuNvml *nv, const char *when) {
    int mhz = cunvml_clock_sm(nv);
    if (mhz < 0) printf("stage175 SM clock %s: NVML unavailable\n", when);
    else printf("stage175 SM clock %s: %d MHz, %.0f W\n", when, mhz, cunvml_power_w(nv));
}

/* One tp rank of a 175B stage (C = 12288, tp 8, micro-batch 4 x seq 2048 =
 * 8192 tokens): a layer's four GEMMs forward and backward through
 * kc_matmul_fwd/bwd as the GEMM section does, each timed short (time_s) and
 * sustained for SUSTAIN_S; the SM clock and power right after each loop.
 * About 13 s on an H200. */
static void bench_stage175_gemms(void) {
    const int N = 4 * 2048, C = 12288, tp = 8;
    const double SUSTAIN_S = 1.5;
    const struct { const char *name; int C, OC; } g[] = {
        {"qkv    C->3C/tp", C, 3 * C / tp}, {"proj   C/tp->C", C / tp, C},
        {"fc     C->4C/tp", C, 4 * C / tp}, {"fcproj 4C/tp->C", 4 * C / tp, C}};
    size_t nin = 0, nout = 0, nw = 0;
    for (auto &s : g) {
        nin = std::max(nin, (size_t)N * s.C);
        nout = std::max(nout, (size_t)N * s.OC);
        nw = std::max(nw, (size_t)s.C * s.OC);
    }
    bf16 *x = rand_bf(nin, 1), *dx = rand_bf(nin, 1), *w = rand_bf(nw, 0.02f), *y = rand_bf(nout, 1);
    float *dw = rand_f(nw, 0.01f);
    CuNvml *nv = cunvml_open(0);
    printf("\n-- GEMMs at a 175B tp-8 stage's shapes: N = %d tokens (micro-batch 4 x seq 2048), C = %d, tp = %d;\n"
           "   short = median of ~10 ms batches, sustained = %.1f s back to back (events around the loop)\n",
           N, C, tp, SUSTAIN_S);
    clock_line(nv, "before the sustained loops");
    for (auto &s : g) {
        for (int bwd = 0; bwd < 2; bwd++) {
            auto call = [&] {
                if (bwd) kc_matmul_bwd(dx, dw, NULL, y, x, w, N, s.C, s.OC, 0);
                else kc_matmul_fwd(y, x, w, NULL, N, s.C, s.OC, 0);
            };
            double flops = (bwd ? 4.0 : 2.0) * N * s.C * s.OC;
            double ts = time_s(call), tl = sustained_s(call, ts, SUSTAIN_S);
            int mhz = cunvml_clock_sm(nv);
            printf("stage175 %s %s %8.3f ms %6.1f TFLOP/s %5.1f %% | sustained %6.1f TFLOP/s %5.1f %% (%+5.1f %%)",
                   s.name, bwd ? "bwd" : "fwd", ts * 1e3, flops / ts / 1e12, 100 * flops / ts / PEAK_BF16,
                   flops / tl / 1e12, 100 * flops / tl / PEAK_BF16, 100 * (ts / tl - 1));
            if (mhz >= 0) printf("  SM %d MHz %.0f W", mhz, cunvml_power_w(nv));
            printf("\n");
            fflush(stdout);
        }
    }
    clock_line(nv, "after the sustained loops");
    cunvml_close(nv);
    cudaFree(x); cudaFree(dx); cudaFree(w); cudaFree(y); cudaFree(dw);
}

/* fp8 (kc_fp8.h) at a 1B layer's shapes: the quantizer's passes as memory-
 * bound rows (amax reads 2 bytes an element; the cast reads 2 and writes 1;
 * the cast-transpose writes both copies, 2 + 1 + 1), then the fp8 GEMMs
 * alone (operands already cast) against the 1979 TFLOP/s dense fp8 peak,
 * and the whole fp8 linear layer (casts included) against the bf16 one. */
static void bench_fp8(int N, int C, bf16 *x, bf16 *w, bf16 *y) {
    size_t NC = (size_t)N * C;
    kc_fp8 *q, *qT, *wq;
    float *sc;
    CHECK_CUDA(cudaMalloc(&q, 4 * NC));
    CHECK_CUDA(cudaMalloc(&qT, 4 * NC));
    CHECK_CUDA(cudaMalloc(&wq, (size_t)4 * C * C));
    CHECK_CUDA(cudaMalloc(&sc, 4 * sizeof(float)));
    printf("\n-- fp8 (E4M3 forward, E5M2 gradients, per-tensor current scaling), %d x %d\n", N, C);
    mem_row("fp8_amax", 2.0 * NC, time_s([&] { kc_fp8_amax(sc, x, NC, 0); }));
    mem_row("fp8_cast", 3.0 * NC, time_s([&] { kc_fp8_cast_transpose(q, NULL, sc + 1, x, sc, N, C, KC_E4M3, 0); }));
    mem_row("fp8_cast_transpose", 4.0 * NC, time_s([&] {
        kc_fp8_cast_transpose(q, qT, sc + 1, x, sc, N, C, KC_E4M3, 0); }));
    mem_row("fp8_transpose only", 3.0 * NC, time_s([&] {
        kc_fp8_cast_transpose(NULL, qT, sc + 1, x, sc, N, C, KC_E4M3, 0); }));
    mem_row("fp8_amax+cast_transpose", 4.0 * NC, time_s([&] {   // against one pass's bytes
        kc_fp8_amax(sc, x, NC, 0);
        kc_fp8_cast_transpose(q, qT, sc + 1, x, sc, N, C, KC_E4M3, 0); }));
    kc_fp8_amax(sc + 2, w, (size_t)4 * C * C, 0);
    kc_fp8_cast_transpose(wq, NULL, sc + 3, w, sc + 2, 4 * C, C, KC_E4M3, 0);
    const struct { const char *name; int C, OC; } g[] = {
        {"qkv   C->3C", C, 3 * C}, {"fc    C->4C", C, 4 * C}, {"fcproj 4C->C", 4 * C, C}};
    for (auto &s : g) {
        double f = 2.0 * N * s.C * s.OC;
        double t = time_s([&] {
            if (kc_fp8_gemm(y, 0, wq, KC_E4M3, sc + 3, q, KC_E4M3, sc + 1, s.OC, N, s.C, 0.0f, NULL, 1, 0))
                kc_fail("kc_fp8_gemm", "refused a benchmark shape", __FILE__, __LINE__);
        });
        printf("%-24s %9.3f ms  %8.1f TFLOP/s  %5.1f %% of 1979 (fp8), %5.1f %% of 989\n", 
               (std::string("fp8_gemm fwd ") + s.name).c_str(), t * 1e3, f / t / 1e12, 100 * f / t / PEAK_FP8,
               100 * f / t / PEAK_BF16);
        double tl = time_s([&] { kc_fp8_matmul_fwd(y, x, w, NULL, N, s.C, s.OC, 0); });
        double tb = time_s([&] { kc_matmul_fwd(y, x, w, NULL, N, s.C, s.OC, 0); });
        printf("fp8_linear fwd %-12s %6.3f ms (casts included) vs bf16 %6.3f ms: %.2fx\n", s.name, tl * 1e3,
               tb * 1e3, tb / tl);
    }
    float *dw;
    CHECK_CUDA(cudaMalloc(&dw, (size_t)4 * C * C * sizeof(float)));
    CHECK_CUDA(cudaMemset(dw, 0, (size_t)4 * C * C * sizeof(float)));
    for (auto &s : g) {
        double tl = time_s([&] { kc_fp8_matmul_bwd(x, dw, NULL, y, x, w, N, s.C, s.OC, 0); });
        double tb = time_s([&] { kc_matmul_bwd(x, dw, NULL, y, x, w, N, s.C, s.OC, 0); });
        printf("fp8_linear bwd %-12s %6.3f ms (casts included) vs bf16 %6.3f ms: %.2fx\n", s.name, tl * 1e3,
               tb * 1e3, tb / tl);
    }
    printf("fp8 GEMMs that fell back to bf16: %ld\n", kc_fp8_fallbacks());
    cudaFree(q); cudaFree(qT); cudaFree(wq); cudaFree(sc); cudaFree(dw);
}

/* The MoE permutation kernels at a top-2 layer of the 1B shapes: N tokens,
 * K = 2, R = N·K routed rows of C, a random permutation; fewest bytes: every
 * row read and written once (plus the int maps and fp32 weights). */
static void bench_moe_permutation(int N, int C) {
    const int K = 2, R = N * K;
    int *h_row = (int *)malloc(R * sizeof(int)), *h_src = (int *)malloc(R * sizeof(int));
    for (int i = 0; i < R; i++) h_row[i] = i;
    uint64_t st = 88172645463325252ull;
    for (int i = R - 1; i > 0; i--) {   // Fisher-Yates, xorshift
        st ^= st << 13; st ^= st >> 7; st ^= st << 17;
        int j = (int)(st % (uint64_t)(i + 1)), t = h_row[i];
        h_row[i] = h_row[j];
        h_row[j] = t;
    }
    for (int slot = 0; slot < R; slot++) h_src[h_row[slot]] = slot / K;   // row -> token
    int *row_of, *src_of;
    CHECK_CUDA(cudaMalloc(&row_of, R * sizeof(int)));
    CHECK_CUDA(cudaMalloc(&src_of, R * sizeof(int)));
    CHECK_CUDA(cudaMemcpy(row_of, h_row, R * sizeof(int), cudaMemcpyHostToDevice));
    CHECK_CUDA(cudaMemcpy(src_of, h_src, R * sizeof(int), cudaMemcpyHostToDevice));
    free(h_row);
    free(h_src);
    bf16 *xin = rand_bf((size_t)N * C, 1), *rows = rand_bf((size_t)R * C, 1), *drows = rand_bf((size_t)R * C, 1);
    bf16 *out = rand_bf((size_t)N * C, 1);
    float *topw = rand_f((size_t)R, 0.5f), *dtopw = rand_f((size_t)R, 1);
    double rc = 2.0 * R * C, nc = 2.0 * N * C;
    printf("\n-- MoE permutation, N=%d tokens, top-%d, C=%d, random routing\n", N, K, C);
    mem_row("moe_gather_rows", 2 * rc + 4.0 * R, time_s([&] { kc_moe_gather_rows(rows, xin, src_of, R, C, 0); }));
    mem_row("moe_permute_bwd", rc + 2 * nc + 4.0 * R, time_s([&] {
        kc_moe_permute_bwd(out, drows, row_of, N, K, C, 0); }));
    mem_row("moe_combine_fwd", rc + nc + 8.0 * R, time_s([&] {
        kc_moe_combine_fwd(out, rows, row_of, topw, N, K, C, 0); }));
    mem_row("moe_combine_bwd", nc + 2 * rc + 12.0 * R, time_s([&] {
        kc_moe_combine_bwd(drows, dtopw, out, rows, row_of, topw, N, K, C, 0); }));
    cudaFree(row_of); cudaFree(src_of); cudaFree(xin); cudaFree(rows); cudaFree(drows); cudaFree(out);
    cudaFree(topw); cudaFree(dtopw);
}

int main(int argc, char **argv) {
    const char *calib_out = NULL, *profile = "h200";
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--calibrate") && i + 1 < argc) calib_out = argv[++i];
        else if (!strcmp(argv[i], "--profile") && i + 1 < argc) profile = argv[++i];
        else {
            fprintf(stderr, "usage: bench_cuda_kernels [--calibrate OUT.json [--profile NAME]]\n");
            return 2;
        }
    }
    if (kc_device_count() == 0) {
        printf("bench_cuda_kernels: no CUDA device, skipped\n");
        return 77;
    }
    cudaDeviceProp prop;
    CHECK_CUDA(cudaGetDeviceProperties(&prop, 0));
    printf("device: %s, %d SMs, %.0f GiB\n", prop.name, prop.multiProcessorCount,
           prop.totalGlobalMem / 1073741824.0);
    kc_init();

    const int B = 8, T = 2048, C = 2048, NH = 16, HS = 128, V = 50304, Vv = 50257;
    const size_t N = (size_t)B * T, NC = N * C;

    {   // the ceiling: a 1 GiB device-to-device copy
        size_t bytes = (size_t)1 << 30;
        void *s, *d;
        CHECK_CUDA(cudaMalloc(&s, bytes));
        CHECK_CUDA(cudaMalloc(&d, bytes));
        CHECK_CUDA(cudaMemset(s, 1, bytes));
        double t = time_s([&] { CHECK_CUDA(cudaMemcpyAsync(d, s, bytes, cudaMemcpyDeviceToDevice, 0)); });
        copy_bw = 2.0 * bytes / t;
        printf("%-24s %9.3f ms  %8.1f GB/s  (read + write; the ceiling below)\n", "copy 1 GiB", t * 1e3, copy_bw / 1e9);
        cudaFree(s); cudaFree(d);
    }

    printf("\n-- GEMMs (cuBLASLt, bf16 in, fp32 accumulate), %zu tokens\n", N);
    bf16 *x = rand_bf(4 * NC, 1), *w = rand_bf((size_t)4 * C * C, 0.02f), *y = rand_bf(N * 4 * C, 1);
    float *dw = rand_f((size_t)4 * C * C, 0.01f);
    struct { const char *name; int C, OC; } g[] = {
        {"qkv   C->3C", C, 3 * C}, {"proj  C->C", C, C}, {"fc    C->4C", C, 4 * C}, {"fcproj 4C->C", 4 * C, C}};
    for (auto &s : g) {
        char name[64];
        snprintf(name, sizeof name, "matmul_fwd %s", s.name);
        flop_row(name, 2.0 * N * s.C * s.OC, time_s([&] { kc_matmul_fwd(y, x, w, NULL, (int)N, s.C, s.OC, 0); }));
        snprintf(name, sizeof name, "matmul_bwd %s", s.name);
        flop_row(name, 4.0 * N * s.C * s.OC, time_s([&] { kc_matmul_bwd(x, dw, NULL, y, x, w, (int)N, s.C, s.OC, 0); }));
    }
    bf16 *wte = rand_bf((size_t)V * C, 0.02f), *logits = rand_bf((size_t)4096 * V, 4);
    flop_row("matmul_fwd lm head", 2.0 * 4096 * C * V,
             time_s([&] { kc_matmul_fwd(logits, x, wte, NULL, 4096, C, V, 0); }));
    bench_stage175_gemms();

    printf("\n-- attention, B=%d T=%d NH=%d HS=%d causal: FLOPs of the causal half, bwd = 2.5 x fwd;\n"
           "   mma = tensor cores, mma.sync (the default); wmma = the earlier WMMA kernels; simt = fp32 SIMT\n", B, T, NH, HS);
    bf16 *q = rand_bf(NC, 1), *k = rand_bf(NC, 1), *v = rand_bf(NC, 1), *o = rand_bf(NC, 1);
    bf16 *dq = rand_bf(NC, 1), *dk = rand_bf(NC, 1), *dv = rand_bf(NC, 1);
    float *lse = rand_f((size_t)B * NH * T, 1);
    double af = 4.0 * B * (double)T * T * NH * HS * 0.5, at[3][2];
    kc_attention_fwd(o, lse, q, k, v, B, T, NH, NH, HS, 0);   // a real lse for the backward
    const struct { const char *tag; KcAttnImpl impl; } impls[] = {
        {"mma", KC_ATTN_AUTO}, {"wmma", KC_ATTN_WMMA}, {"simt", KC_ATTN_SIMT}};
    for (int i = 0; i < 3; i++) {
        char name[64];
        kc_attention_set_impl(impls[i].impl);
        snprintf(name, sizeof name, "attention_fwd %s", impls[i].tag);
        flop_row(name, af, at[i][0] = time_s([&] { kc_attention_fwd(o, lse, q, k, v, B, T, NH, NH, HS, 0); }));
        snprintf(name, sizeof name, "attention_bwd %s", impls[i].tag);
        flop_row(name, 2.5 * af, at[i][1] = time_s([&] {
            kc_attention_bwd(dq, dk, dv, o, q, k, v, o, lse, B, T, NH, NH, HS, 0); }));
        snprintf(name, sizeof name, "attention_fwd GQA4 %s", impls[i].tag);
        flop_row(name, af, time_s([&] { kc_attention_fwd(o, lse, q, k, v, B, T, NH, NH / 4, HS, 0); }));
    }
    kc_attention_set_impl(KC_ATTN_AUTO);
    // the backward's two passes apart (dK/dV: S, dP, dV, dK; dQ: S, dP, dQ)
    flop_row("attention_bwd dkdv mma", 2.0 * af, time_s([&] {
        kc_attention_bwd(NULL, dk, dv, o, q, k, v, o, lse, B, T, NH, NH, HS, 0); }));
    flop_row("attention_bwd dq mma", 1.5 * af, time_s([&] {
        kc_attention_bwd(dq, NULL, NULL, o, q, k, v, o, lse, B, T, NH, NH, HS, 0); }));
    printf("attention_mma_vs_wmma     fwd %.2fx, bwd %.2fx faster\n", at[1][0] / at[0][0], at[1][1] / at[0][1]);
    printf("attention_mma_vs_simt     fwd %.1fx, bwd %.1fx faster\n", at[2][0] / at[0][0], at[2][1] / at[0][1]);
    printf("\n-- memory-bound kernels, fewest bytes moved\n");
    bf16 *wn = rand_bf(C, 1), *bn = rand_bf(C, 1), *dx = rand_bf(NC, 1);
    int *tgt_emb;   // token ids for the embedding: row i of x (x has >= N rows of C)
    {
        int *h = (int *)malloc(N * sizeof(int));
        for (size_t i = 0; i < N; i++) h[i] = (int)((i * 7919) % N);
        CHECK_CUDA(cudaMalloc(&tgt_emb, N * sizeof(int)));
        CHECK_CUDA(cudaMemcpy(tgt_emb, h, N * sizeof(int), cudaMemcpyHostToDevice));
        free(h);
    }
    float *mean = rand_f(N, 1), *rstd = rand_f(N, 1), *dwn = rand_f(C, 1), *dbn = rand_f(C, 1);
    mem_row("layernorm_fwd", 4.0 * NC, time_s([&] { kc_layernorm_fwd(y, mean, rstd, x, wn, bn, (int)N, C, 1e-5f, 0); }));
    kc_norm_set_regs(0);   // the earlier forward, re-reading the row from L1: the baseline
    mem_row("layernorm_fwd (l1)", 4.0 * NC,
            time_s([&] { kc_layernorm_fwd(y, mean, rstd, x, wn, bn, (int)N, C, 1e-5f, 0); }));
    mem_row("rmsnorm_fwd (l1)", 4.0 * NC,
            time_s([&] { kc_rmsnorm_fwd(y, rstd, x, wn, (int)N, C, 1e-5f, 0); }));
    kc_norm_set_regs(1);
    mem_row("layernorm_bwd", 8.0 * NC, time_s([&] { kc_layernorm_bwd(dx, dwn, dbn, y, x, wn, mean, rstd, (int)N, C, 0); }));
    mem_row("rmsnorm_fwd", 4.0 * NC, time_s([&] { kc_rmsnorm_fwd(y, rstd, x, wn, (int)N, C, 1e-5f, 0); }));
    mem_row("rmsnorm_bwd", 8.0 * NC, time_s([&] { kc_rmsnorm_bwd(dx, dwn, y, x, wn, rstd, (int)N, C, 0); }));
    kc_norm_set_rows(1);   // the warp-per-row backward (opt-in until measured faster)
    mem_row("layernorm_bwd (rows)", 8.0 * NC,
            time_s([&] { kc_layernorm_bwd(dx, dwn, dbn, y, x, wn, mean, rstd, (int)N, C, 0); }));
    mem_row("rmsnorm_bwd (rows)", 8.0 * NC, time_s([&] { kc_rmsnorm_bwd(dx, dwn, y, x, wn, rstd, (int)N, C, 0); }));
    kc_norm_set_rows(0);
    mem_row("gelu_fwd (4C)", 4.0 * 4 * NC, time_s([&] { kc_gelu_fwd(y, y, 4 * NC, 0); }));
    mem_row("gelu_bwd (4C)", 8.0 * 4 * NC, time_s([&] { kc_gelu_bwd(y, y, y, 4 * NC, 0); }));
    mem_row("swiglu_fwd (F=2C)", 12.0 * NC, time_s([&] { kc_swiglu_fwd(x, y, (int)N, 2 * C, 0); }));
    mem_row("residual_fwd", 6.0 * NC, time_s([&] { kc_residual_fwd(o, x, dx, NC, 0); }));
    mem_row("bias_grad (4C)", 2.0 * 4 * NC, time_s([&] {   // kc_matmul_bwd with only dbias
        kc_matmul_bwd(NULL, NULL, dw, y, NULL, NULL, (int)N, C, 4 * C, 0); }));
    mem_row("embedding_fwd", 4.0 * NC + 2.0 * T * C, time_s([&] { kc_embedding_fwd(o, tgt_emb, x, dx, B, T, C, 0, 0); }));
    mem_row("rope_fwd (q)", 4.0 * NC, time_s([&] { kc_rope_fwd(q, q, B, T, NH, HS, 0, 10000.0f, 0); }));
    int *tgt;
    CHECK_CUDA(cudaMalloc(&tgt, 4096 * sizeof(int)));
    CHECK_CUDA(cudaMemset(tgt, 0, 4096 * sizeof(int)));
    float *losses = rand_f(4096, 1), *clse = rand_f(4096, 1);
    mem_row("crossentropy_fwd", 2.0 * 4096 * V, time_s([&] { kc_crossentropy_fwd(losses, clse, logits, tgt, 4096, V, Vv, 0); }));
    mem_row("crossentropy_bwd", 4.0 * 4096 * V, time_s([&] {
        kc_crossentropy_bwd(logits, logits, clse, tgt, 1e-4f, 4096, V, Vv, 0); }));
    mem_row("crossentropy_fused", 4.0 * 4096 * V, time_s([&] {   // one pass: read 2, write 2 bytes an element
        kc_crossentropy_fused(losses, clse, logits, logits, tgt, 1e-4f, 4096, V, Vv, 0); }));
    size_t np = (size_t)256 << 20;   // 268M parameters: 7.5 GB of optimizer traffic
    float *p = rand_f(np, 1), *gr = rand_f(np, 1), *m = rand_f(np, 0.1f), *vv = rand_f(np, 0.1f);
    kc_scale(vv, 0.0f, np, 0);
    bf16 *pb = rand_bf(np, 1);
    mem_row("adamw (+bf16 copy)", 30.0 * np, time_s([&] {
        kc_adamw(p, gr, m, vv, np, 1e-4f, 0.9f, 0.95f, 1e-8f, 0.1f, 10, pb, 0); }));
    mem_row("adamw", 28.0 * np, time_s([&] { kc_adamw(p, gr, m, vv, np, 1e-4f, 0.9f, 0.95f, 1e-8f, 0.1f, 10, NULL, 0); }));
    kc_adamw_set_stream(1);   // persistent grid, streaming hints (opt-in until measured faster)
    mem_row("adamw (+bf16, stream)", 30.0 * np,
            time_s([&] { kc_adamw(p, gr, m, vv, np, 1e-4f, 0.9f, 0.95f, 1e-8f, 0.1f, 10, pb, 0); }));
    kc_adamw_set_stream(0);
    CHECK_CUDA(cudaDeviceSynchronize());
    cudaFree(p); cudaFree(gr); cudaFree(m); cudaFree(vv); cudaFree(pb);
    bench_fp8((int)N, C, x, w, y);
    bench_moe_permutation((int)N, C);
    CHECK_CUDA(cudaDeviceSynchronize());

    if (calib_out) {
        HwProfile hw;
        char err[256];
        if (profile_load_builtin(profile, &hw, err, sizeof err)) {
            fprintf(stderr, "bench_cuda_kernels: %s\n", err);
            return 2;
        }
        printf("\n-- calibration from builtin '%s'\n", profile);
        BenchCudaReport rep;
        if (bench_cuda_measure_log(&hw, &rep, stdout, err, sizeof err) ||
            profile_write_json(&hw, calib_out, err, sizeof err)) {
            fprintf(stderr, "bench_cuda_kernels: %s\n", err);
            return 1;
        }
        printf("best GEMM %.1f TFLOP/s, copy %.1f GB/s, attention %.1f TFLOP/s; wrote %s\n",
               rep.gemm_best / 1e12, rep.copy_bw / 1e9, rep.attn_best / 1e12, calib_out);
    }
    kc_free();
    return 0;
}
