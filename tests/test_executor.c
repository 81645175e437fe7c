/* test_executor.c — the whole model's gradients against central finite
 * differences of its loss (single rank, MPI singleton), for GPT and Llama;
 * and the schedules' shape. Returns non-zero on any failed check. */
#include <math.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "exec.h"

static int fails;
#define CHECK(cond, ...) do { if (!(cond)) { fails++; printf("FAIL: " __VA_ARGS__); printf("\n"); } } while (0)

static double loss_at(Exec *e, DataPos p0)
{
    char err[256];
    StepStats st;
    data_set_pos(&e->dl, p0, err, sizeof err);
    e->step = 0;
    if (exec_step(e, &st, err, sizeof err) != 0)
        printf("step: %s\n", err);
    return st.loss;
}

static void grad_check(const char *kind, const char *data)
{
    ModelSpec m;
    memset(&m, 0, sizeof m);
    m.L = 2, m.h = 16, m.a = 2, m.s = 8, m.vocab = 256, m.vocab_div = 1;
    if (!strcmp(kind, "llama"))
        m.g = 1, m.f = 32, m.mlp = MLP_SWIGLU, m.norm = NORM_RMSNORM, m.pos = POS_ROPE;
    else
        m.g = 2, m.f = 64, m.bias = true, m.tied = true;
    char err[256];
    spec_validate(&m, err, sizeof err);
    Layout lo;
    layout_default(&lo);
    lo.prec = PREC_FP32, lo.mbs = 2, lo.gbs = 2;
    layout_check(&lo, &m, NULL, err, sizeof err);
    TrainOpts o;
    exec_default_opts(&o);
    o.lr = 0;   // AdamW with lr 0 leaves the weights alone; the step leaves the gradients in g
    Exec e;
    if (exec_init(&e, &m, &lo, &o, data, err, sizeof err) != 0) {
        CHECK(0, "exec_init: %s", err);
        return;
    }
    DataPos p0 = data_get_pos(&e.dl);
    loss_at(&e, p0);
    size_t n = e.ps.n;
    float g[n];
    memcpy(g, e.ps.g, sizeof g);
    /* the 12 largest gradients, and a spread of others */
    int checked = 0, bad = 0;
    for (size_t i = 0; i < n; i += n / 40 + 1) {
        size_t best = i;
        for (size_t j = i; j < i + n / 40 && j < n; j++)
            if (fabsf(g[j]) > fabsf(g[best]))
                best = j;
        if (fabsf(g[best]) < 1e-3f)
            continue;
        float w0 = e.ps.w[best], h = 1e-2f * fmaxf(1.0f, fabsf(w0));
        e.ps.w[best] = w0 + h;
        double lp = loss_at(&e, p0);
        e.ps.w[best] = w0 - h;
        double lm = loss_at(&e, p0);
        e.ps.w[best] = w0;
        double fd = (lp - lm) / (2.0 * h);
        double rel = fabs(fd - g[best]) / fmax(fabs(fd), fabs(g[best]));
        checked++;
        if (rel > 0.05) {
            bad++;
            printf("  %s param %zu: analytic %.6g, finite difference %.6g (rel %.3f)\n", kind, best, g[best], fd, rel);
        }
    }
    CHECK(checked >= 10 && bad == 0, "%s: %d of %d gradients off by more than 5 %%", kind, bad, checked);
    printf("%s: %d gradients match finite differences\n", kind, checked - bad);
    exec_free(&e);
}

static void sched_checks(void)
{
    char err[128];
    Schedule s;
    /* 1F1B: stage 0 of 4 warms up with 3 forwards and holds at most 4 */
    sched_build(&s, 4, 0, 8, 1, err, sizeof err);
    CHECK(s.n == 16 && s.a[0].kind == ACT_FWD && s.a[3].kind == ACT_FWD && s.a[4].kind == ACT_BWD &&
          s.a[5].kind == ACT_FWD && s.max_live == 4, "1F1B stage 0 shape");
    sched_free(&s);
    sched_build(&s, 4, 3, 8, 1, err, sizeof err);
    CHECK(s.max_live == 1, "1F1B last stage holds one micro-batch");
    sched_free(&s);
    CHECK(sched_build(&s, 4, 0, 6, 2, err, sizeof err) != 0, "interleaving needs m %% pp == 0");
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    char path[] = "/tmp/test_executor_XXXXXX";
    int fd = mkstemp(path);
    FILE *f = fdopen(fd, "w");
    for (int i = 0; i < 4000; i++)
        fputc("the quick brown fox jumps over the lazy dog. "[i % 45], f);
    fclose(f);
    sched_checks();
    grad_check("gpt", path);
    grad_check("llama", path);
    remove(path);
    MPI_Finalize();
    printf("%s\n", fails ? "FAILED" : "ok");
    return fails ? 1 : 0;
}
