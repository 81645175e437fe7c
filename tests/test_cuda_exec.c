/* test_cuda_exec.c — the CUDA trainer (bf16, one GPU) against the CPU
 * executor (fp32, one rank): same plan, seed and data, 5 steps of a tiny GPT
 * and a tiny Llama, and a tiny Llama-style mixture of experts (4 experts of
 * 64, top 2, a shared expert of 64, every layer MoE, one of them fully
 * recomputed: the routed block on the working set); the losses agree within bf16 tolerance
 * |cuda − cpu| ≤ 0.03 + 0.01·|cpu| at every step, and the loss falls. Also
 * checks the stage proxy runs and reports a finite time. Exits 77 without a GPU. */
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cuexec.h"
#include "exec.h"

enum { STEPS = 5 };
static int fails;
#define CHECK(cond, ...) do { if (!(cond)) { fails++; printf("FAIL: " __VA_ARGS__); printf("\n"); } } while (0)

/* kind 0 GPT, 1 Llama, 2 Llama with MoE layers */
static void tiny(ModelSpec *m, Layout *lo, int kind)
{
    char err[256];
    int llama = kind >= 1;
    memset(m, 0, sizeof *m);
    snprintf(m->name, sizeof m->name, "tiny-%s", kind == 2 ? "moe" : llama ? "llama" : "gpt");
    m->L = 2, m->h = 64, m->a = 2, m->s = 64, m->vocab = 256, m->vocab_div = 1;   // head size 32
    if (llama)
        m->g = 1, m->f = 128, m->mlp = MLP_SWIGLU, m->norm = NORM_RMSNORM, m->pos = POS_ROPE;
    else
        m->g = 2, m->f = 256, m->bias = true, m->tied = true;
    if (kind == 2)
        m->experts = 4, m->topk = 2, m->moe_ffn = 64, m->shared_ffn = 64, m->moe_freq = 1;
    if (spec_validate(m, err, sizeof err) != 0)
        printf("spec: %s\n", err);
    layout_default(lo);
    lo->mbs = 2, lo->gbs = 4;
    if (layout_check(lo, m, NULL, err, sizeof err) != 0)
        printf("layout: %s\n", err);
    lo->full_rc[0] = 1;   // one recomputed layer: the recompute path too
}

static void compare(int llama, const char *data)
{
    ModelSpec m;
    Layout lo;
    tiny(&m, &lo, llama);
    TrainOpts o;
    exec_default_opts(&o);
    char err[512];
    double cpu[STEPS], gpu[STEPS];
    Layout lcpu = lo;
    lcpu.prec = PREC_FP32;
    Exec e;
    if (exec_init(&e, &m, &lcpu, &o, data, err, sizeof err) != 0) {
        CHECK(0, "%s: exec_init: %s", m.name, err);
        exec_free(&e);
        return;
    }
    for (int i = 0; i < STEPS; i++) {
        StepStats st;
        CHECK(exec_step(&e, &st, err, sizeof err) == 0, "cpu step: %s", err);
        cpu[i] = st.loss;
    }
    exec_free(&e);
    CuExec c;
    if (cuexec_init(&c, &m, &lo, &o, data, err, sizeof err) != 0) {
        CHECK(0, "%s: cuexec_init: %s", m.name, err);
        cuexec_free(&c);
        return;
    }
    for (int i = 0; i < STEPS; i++) {
        CuStepStats st;
        CHECK(cuexec_step(&c, &st, err, sizeof err) == 0, "cuda step: %s", err);
        gpu[i] = st.loss;
        CHECK(st.t[PH_FWD] > 0 && st.t[PH_BWD] > 0 && st.t[PH_RECOMPUTE] > 0 && st.t[PH_OPTIM] > 0 && st.step_s > 0,
              "%s step %d: a phase timer is empty", m.name, i + 1);
    }
    CHECK(cuexec_peak_bytes(&c) > c.mem[XM_WEIGHTS], "%s: device peak %.0f bytes", m.name, cuexec_peak_bytes(&c));
    cuexec_free(&c);
    for (int i = 0; i < STEPS; i++) {
        printf("%s step %d: cpu %.5f cuda %.5f\n", m.name, i + 1, cpu[i], gpu[i]);
        CHECK(fabs(gpu[i] - cpu[i]) <= 0.03 + 0.01 * fabs(cpu[i]), "%s step %d: cuda %.5f vs cpu %.5f", m.name,
              i + 1, gpu[i], cpu[i]);
    }
    CHECK(gpu[STEPS - 1] < gpu[0], "%s: cuda loss did not fall (%.4f -> %.4f)", m.name, gpu[0], gpu[STEPS - 1]);
}

static void proxy(void)
{
    ModelSpec m;
    Layout lo;
    tiny(&m, &lo, 1);
    char err[512];
    lo.pp = 2, lo.tp = 1, lo.layers[0] = lo.layers[1] = 1;
    lo.full_rc[0] = 0;
    for (int s = 0; s < 2; s++) {
        CuExec c;
        if (cuexec_init_proxy(&c, &m, &lo, s, 7, err, sizeof err) != 0) {
            CHECK(0, "proxy stage %d: %s", s, err);
            cuexec_free(&c);
            continue;
        }
        CuStepStats st;
        CHECK(cuexec_step(&c, &st, err, sizeof err) == 0, "proxy step: %s", err);
        CHECK(st.t[PH_FWD] > 0 && st.t[PH_BWD] > 0 && st.t[PH_OPTIM] == 0, "proxy stage %d: timers", s);
        CHECK(s == 0 || isfinite(st.loss), "proxy last stage: loss %f", st.loss);
        cuexec_free(&c);
    }
}

int main(void)
{
    if (kc_device_count() < 1) {
        printf("test_cuda_exec: no CUDA device, skipped\n");
        return 77;
    }
    MPI_Init(NULL, NULL);
    char data[] = "/tmp/test_cuda_exec_XXXXXX";
    int fd = mkstemp(data);
    FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
    if (!f) {
        printf("test_cuda_exec: cannot write a data file\n");
        return 1;
    }
    for (int i = 0; i < 400; i++)
        fprintf(f, "line %d: the quick brown fox jumps over the lazy dog %d times.\n", i, i * 7 % 13);
    fclose(f);
    compare(0, data);
    compare(1, data);
    compare(2, data);
    proxy();
    unlink(data);
    kc_free();
    MPI_Finalize();
    printf("test_cuda_exec: %s (%d failures)\n", fails ? "FAIL" : "ok", fails);
    return fails != 0;
}
