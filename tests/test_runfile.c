/* test_runfile.c — the run.json writer over a very long run (issue 17,
 * item 9): a 1,100,000-step run crashed at its end in the median (an
 * on-stack array of one double per step) and kept a cJSON tree per step.
 * Here 2,000,000 synthetic steps: the medians are exact, computed without
 * a per-step stack array, and the writer's memory stays within a small
 * constant per step. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <cmocka.h>

#include "runfile.h"

static double rss_bytes(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    double kb = 0;
    char line[256];
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "VmRSS: %lf kB", &kb) == 1)
            break;
    if (f)
        fclose(f);
    return kb * 1024.0;
}

/* n steps; step s (1-based) after the warm-up first one has step time
 * perm(s) milliseconds, a permutation of 1 .. n-1 in scrambled order, and
 * phase k = k + that. */
static void feed(RunWriter *w, long n)
{
    char err[256];
    for (long s = 1; s <= n; s++) {
        RunStep st = {.step = (int)s, .loss = 1.0 / (double)s};
        double ms = s == 1 ? 1e9 : (double)(((s - 2) * 7919 % (n - 1)) + 1);   // 7919 prime, n - 1 not its multiple
        st.step_s = 1e-3 * ms;
        for (int k = 0; k < PH_COUNT; k++)
            st.t[k] = k + ms;
        assert_int_equal(runwriter_step(w, &st, err, sizeof err), 0);
    }
}

static void two_million_steps(void **state)
{
    (void)state;
    /* the median must not need the stack: run it under a 1 MiB stack
     * limit (2,000,000 doubles are 16 MB) */
    struct rlimit old, lim;
    getrlimit(RLIMIT_STACK, &old);
    lim = old;
    RunWriter w;
    char err[256];
    double rss0 = rss_bytes();
    assert_int_equal(runwriter_init(&w, NULL, "cpu", 2, 64, 1, 1, NULL, NULL, NULL, err, sizeof err), 0);
    const long n = 2000000;
    feed(&w, n);
    double grown = rss_bytes() - rss0;
    /* 14 doubles a step (with the doubling array's slack, < 240 MB); a cJSON
     * object per step (the old writer) is > 1.5 KB a step, 3 GB here */
#if defined(__SANITIZE_ADDRESS__)
    const double most = 1.2e9;   // ASan quarantines every realloc'd block, and pads
#else
    const double most = 400e6;
#endif
    if (!(grown < most))
        fprintf(stderr, "the writer grew by %.0f MB over 2,000,000 steps\n", grown / 1e6);
    assert_true(grown < most);
    if (old.rlim_max == RLIM_INFINITY || old.rlim_max > (1 << 20)) {
        lim.rlim_cur = 1 << 20;
        setrlimit(RLIMIT_STACK, &lim);
    }
    double med[PH_COUNT];
    double step = runwriter_medians(&w, med);
    setrlimit(RLIMIT_STACK, &old);
    /* averaged: steps 2 .. n, step times 1 .. n-1 ms, each once: an odd
     * count n-1 = 1,999,999, median (n / 2) ms = 1000 ms, the warm-up 1e9 ms out */
    assert_true(fabs(step - 1e-3 * (double)(n / 2)) < 1e-9);
    for (int k = 0; k < PH_COUNT; k++)
        assert_true(fabs(med[k] - (k + (double)(n / 2))) < 1e-6);
    runwriter_free(&w);
}

static void even_count_and_one_step(void **state)
{
    (void)state;
    RunWriter w;
    char err[256];
    assert_int_equal(runwriter_init(&w, NULL, "cpu", 1, 64, 1, 1, NULL, NULL, NULL, err, sizeof err), 0);
    double med[PH_COUNT];
    assert_true(runwriter_medians(&w, med) == 0);   // no steps
    RunStep st = {.step = 1, .step_s = 5};
    assert_int_equal(runwriter_step(&w, &st, err, sizeof err), 0);
    assert_true(runwriter_medians(&w, med) == 5);   // a run of one step keeps it
    const double times[] = {9, 4, 1, 3, 2};          // averaged: 4 1 3 2 -> (2 + 3) / 2
    for (int i = 0; i < 5; i++) {
        RunStep s = {.step = 2 + i, .step_s = times[i]};
        assert_int_equal(runwriter_step(&w, &s, err, sizeof err), 0);
    }
    /* steps: 5 (warm-up), 9 4 1 3 2 -> averaged 9 4 1 3 2: median 3 */
    assert_true(runwriter_medians(&w, med) == 3);
    RunStep s = {.step = 7, .step_s = 100};
    assert_int_equal(runwriter_step(&w, &s, err, sizeof err), 0);
    /* averaged 9 4 1 3 2 100 (six): (3 + 4) / 2 */
    assert_true(runwriter_medians(&w, med) == 3.5);
    cJSON *doc = runwriter_doc(&w, "done", NULL, NULL, 0);
    const cJSON *steps = cJSON_GetObjectItem(doc, "steps");
    assert_int_equal(cJSON_GetArraySize(steps), 7);
    assert_true(cJSON_GetObjectItem(cJSON_GetArrayItem(steps, 6), "step")->valuedouble == 7);
    assert_true(cJSON_GetObjectItem(cJSON_GetArrayItem(steps, 6), "step_s")->valuedouble == 100);
    cJSON_Delete(doc);
    runwriter_free(&w);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(even_count_and_one_step),
        cmocka_unit_test(two_million_steps),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
