/* fuzz_manifest.c — the checkpoint manifest's validation (executor/manifest.c,
 * what --resume reads before it loads anything).
 *
 * A manifest the check accepts must name a step of this run, its own step
 * directory, and a file of at least a header for this rank; a refusal says
 * why, naming the file.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckpt.h"
#include "common.h"

/* The run the manifests are checked against: 2 ranks, dp 2, a 2-layer GPT. */
static void state(CkptState *s, ModelSpec *m, Layout *lo)
{
    memset(m, 0, sizeof *m);
    snprintf(m->name, sizeof m->name, "custom");
    m->L = 2, m->h = 64, m->a = 2, m->vocab = 256, m->s = 32, m->tied = true;
    char err[128];
    spec_validate(m, err, sizeof err);
    layout_default(lo);
    lo->dp = 2, lo->gbs = 4;
    layout_check(lo, m, NULL, err, sizeof err);
    memset(s, 0, sizeof *s);
    s->world = 2, s->rank = 0, s->dp = 2, s->tp = 1, s->pp = 1, s->vp = 1, s->opt = OPT_ZERO0;
    s->model = m, s->lo = lo;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 65536)
        return 0;
    char *text = fz_strndup(data, size);
    CkptState s;
    ModelSpec m;
    Layout lo;
    state(&s, &m, &lo);
    CkptManifest mf;
    char err[1024] = "";
    if (ckpt_manifest_check(text, "ck/manifest.json", &s, &mf, err, sizeof err) != 0) {
        if (!strstr(err, "ck/manifest.json")) {
            fprintf(stderr, "fuzz_manifest: a refusal that does not name the file: \"%s\"\n", err);
            abort();
        }
    } else {
        char want[32];
        ckpt_step_name(want, sizeof want, mf.step);
        if (mf.step < 0 || strcmp(mf.stepdir, want) != 0 || mf.bytes < (long long)sizeof(CkptHeader)) {
            fprintf(stderr, "fuzz_manifest: accepted step %d dir %s bytes %lld\n", mf.step, mf.stepdir, mf.bytes);
            abort();
        }
    }
    free(text);
    return 0;
}
