/* sched.c — see sched.h. */
#include "sched.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>

/* The k-th chunk-forward (or backward) of the interleaved order. */
static Action virt(ActKind kind, int k, int pp, int vp)
{
    int group = k / (pp * vp), in = k % (pp * vp);
    int chunk = in / pp;
    Action a = {kind, group * pp + in % pp, kind == ACT_FWD ? chunk : vp - 1 - chunk};
    return a;
}

int sched_build(Schedule *s, int pp, int stage, int m, int vp, char *err, int errlen)
{
    s->a = NULL;
    s->n = 0;
    s->max_live = 0;
    if (m <= 0 || vp <= 0 || pp <= 0 || 2LL * m * vp > INT_MAX / (long long)sizeof *s->a) {
        snprintf(err, errlen, "schedule of %d micro-batches x %d chunks: %s", m, vp,
                 m <= 0 || vp <= 0 || pp <= 0 ? "not positive" : "too many actions");
        return -1;
    }
    s->n = 2 * m * vp;
    s->a = malloc((size_t)s->n * sizeof *s->a);
    if (!s->a) {
        snprintf(err, errlen, "out of memory for the schedule");
        return -1;
    }
    if (vp > 1 && m % pp != 0) {
        snprintf(err, errlen, "interleaved schedule needs micro-batches (%d) to be a multiple of pp (%d)", m, pp);
        free(s->a);
        s->a = NULL;
        return -1;
    }
    int total = m * vp, warm;
    if (vp == 1)
        warm = pp - stage - 1 < m ? pp - stage - 1 : m;
    else
        warm = m == pp ? total : 2 * (pp - stage - 1) + (vp - 1) * pp;
    if (warm > total)
        warm = total;
    int k = 0, f = 0, b = 0;
    for (; f < warm; f++)
        s->a[k++] = virt(ACT_FWD, f, pp, vp);
    while (f < total) {
        s->a[k++] = virt(ACT_FWD, f++, pp, vp);
        s->a[k++] = virt(ACT_BWD, b++, pp, vp);
    }
    while (b < total)
        s->a[k++] = virt(ACT_BWD, b++, pp, vp);
    int live = 0;
    for (int i = 0; i < s->n; i++) {
        live += s->a[i].kind == ACT_FWD ? 1 : -1;
        if (live > s->max_live)
            s->max_live = live;
    }
    return 0;
}

void sched_free(Schedule *s)
{
    if (!s)
        return;
    free(s->a);
    s->a = NULL;
    s->n = 0;
}
