/* common.c — shared checks of the fuzz harnesses (see common.h). */
#include "common.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "profile.h"
#include "presets.h"

char *fz_strndup(const uint8_t *data, size_t size)
{
    char *s = malloc(size + 1);
    if (!s)
        abort();
    memcpy(s, data, size);
    s[size] = 0;
    return s;
}

static void need(int ok, const char *what, double v)
{
    if (!ok) {
        fprintf(stderr, "fuzz: %s = %g is not finite\n", what, v);
        abort();
    }
}

#define FINITE(x) need(isfinite(x), #x, (x))
/* +inf allowed, NaN and -inf not */
#define FINITE_OR_INF(x) need(!isnan(x) && (x) > -INFINITY, #x, (x))

void fz_check_cost(const ModelSpec *m, const Layout *lo, const Cost *c)
{
    (void)m;
    for (int s = 0; s < c->pp; s++) {
        for (int k = 0; k < MEM_COUNT; k++)
            FINITE(c->stage[s].bytes[k]);
        FINITE(c->stage[s].total);
        FINITE(c->stage[s].inflight);
        FINITE(c->stage[s].params);
        FINITE(c->stage_mb_s[s]);
    }
    FINITE(c->peak_bytes);
    for (int k = 0; k < T_COUNT; k++)
        FINITE(c->time[k]);
    FINITE(c->step_s);
    need(c->step_s > 0, "step_s > 0", c->step_s);
    FINITE(c->thr.mfu);
    FINITE(c->thr.hfu);
    FINITE(c->thr.tokens_per_s);
    FINITE(c->thr.tflops_per_gpu);
    FINITE(c->thr.flops_per_token);
    FINITE(c->tokens_per_step);
    const Training *t = &c->train;
    FINITE(t->tokens);
    FINITE(t->steps);
    FINITE(t->days);
    FINITE(t->gpu_hours);
    FINITE(t->failures);
    FINITE(t->fail_per_day);
    FINITE(t->p_fail_day);
    FINITE(t->ckpt_bytes);
    FINITE(t->ckpt_write_s);
    FINITE(t->waste);
    FINITE_OR_INF(t->job_mtbf_s);
    FINITE_OR_INF(t->young_s);
    FINITE_OR_INF(t->daly_s);
    FINITE_OR_INF(t->days_with_failures);
    need(t->p_fail_day >= 0 && t->p_fail_day <= 1, "p_fail_day in [0,1]", t->p_fail_day);
    need(c->thr.mfu > 0, "mfu > 0", c->thr.mfu);
    (void)lo;
}

void fz_check_json(const cJSON *j, const char *where)
{
    for (const cJSON *it = j; it; it = it->next) {
        if (cJSON_IsNull(it)) {
            fprintf(stderr, "fuzz: %s: null at \"%s\"\n", where, it->string ? it->string : "(array item)");
            abort();
        }
        if (cJSON_IsNumber(it) && !isfinite(it->valuedouble)) {
            fprintf(stderr, "fuzz: %s: %g at \"%s\"\n", where, it->valuedouble, it->string ? it->string : "?");
            abort();
        }
        if (it->child)
            fz_check_json(it->child, where);
    }
}

void fz_default_model(ModelSpec *m)
{
    char err[256];
    if (presets_find("gpt3-125m", m, err, sizeof err) != 0 || spec_validate(m, err, sizeof err) != 0) {
        fprintf(stderr, "fuzz: %s\n", err);
        abort();
    }
}

void fz_default_hw(HwProfile *hw)
{
    char err[256];
    if (profile_load_builtin("h100-sxm", hw, err, sizeof err) != 0) {
        fprintf(stderr, "fuzz: %s\n", err);
        abort();
    }
}

static char temp_path[128];

static void remove_temp(void) { unlink(temp_path); }

const char *fz_temp_file(const char *tag, const uint8_t *data, size_t size)
{
    char *path = temp_path;
    if (!path[0]) {
        const char *dir = getenv("TMPDIR");
        snprintf(temp_path, sizeof temp_path, "%s/ultraplan-fuzz-%s-%ld", dir && *dir ? dir : "/tmp", tag,
                 (long)getpid());
        atexit(remove_temp);
    }
    FILE *f = fopen(path, "wb");
    if (!f) {
        perror(path);
        abort();
    }
    if (size && fwrite(data, 1, size, f) != size)
        abort();
    fclose(f);
    return path;
}
