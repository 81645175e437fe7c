/* bench_cpu_gemm.c — GFLOP/s of k_matmul_fwd (OpenBLAS sgemm) for a few GPT
 * layer shapes; `calibrate` measures the same thing for the cost model.
 * Usage: bench_cpu_gemm [reps]   (default 5; the best time is reported) */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include "kernels.h"

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
    int reps = argc > 1 ? atoi(argv[1]) : 5;
    if (reps < 1) reps = 1;
    const struct { const char *what; int BT, C, OC; } shapes[] = {
        {"qkv  C=768",    1024,  768, 3 * 768},
        {"proj C=768",    1024,  768,  768},
        {"fc   C=768",    1024,  768, 4 * 768},
        {"fcp  C=768",    1024, 3072,  768},
        {"lm   V=50304",   256,  768, 50304},
        {"sq   1024",     1024, 1024, 1024},
    };
    printf("%-14s %6s %6s %6s %10s %10s\n", "shape", "BT", "C", "OC", "ms", "GFLOP/s");
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        int BT = shapes[s].BT, C = shapes[s].C, OC = shapes[s].OC;
        float *inp = malloc(sizeof(float) * BT * C), *w = malloc(sizeof(float) * OC * C);
        float *bias = malloc(sizeof(float) * OC), *out = malloc(sizeof(float) * BT * OC);
        if (!inp || !w || !bias || !out) { fprintf(stderr, "out of memory\n"); return 1; }
        for (long i = 0; i < (long)BT * C; i++) inp[i] = (float)(i % 17) * 0.01f;
        for (long i = 0; i < (long)OC * C; i++) w[i] = (float)(i % 13) * 0.01f;
        for (int i = 0; i < OC; i++) bias[i] = 0.1f;
        k_matmul_fwd(out, inp, w, bias, BT, C, OC);   // warm-up
        double best = 1e30;
        for (int r = 0; r < reps; r++) {
            double t0 = now();
            k_matmul_fwd(out, inp, w, bias, BT, C, OC);
            double dt = now() - t0;
            if (dt < best) best = dt;
        }
        double flops = 2.0 * BT * C * OC;
        printf("%-14s %6d %6d %6d %10.3f %10.1f\n", shapes[s].what, BT, C, OC,
               best * 1e3, flops / best * 1e-9);
        free(inp); free(w); free(bias); free(out);
    }
    return 0;
}
