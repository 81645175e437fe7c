/* manifest.c — the checkpoint manifest's validation and the names and shape
 * every checkpoint file carries (see ckpt.h). No MPI and no file I/O, so it
 * is fuzzed on its own (tests/fuzz/fuzz_manifest.c). */
#include "ckpt.h"

#include <cjson/cJSON.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void ckpt_shape(const ModelSpec *m, const Layout *lo, char *buf, size_t n)
{
    int len = snprintf(buf, n, "L%d h%d a%d g%d d%d f%d V%d/%d s%d %s %s %s bias%d tied%d split", m->L, m->h, m->a,
                       m->g ? m->g : m->a, spec_head_dim(m), m->f, m->vocab, m->vocab_div ? m->vocab_div : 128, m->s,
                       spec_mlp_name(m->mlp), spec_norm_name(m->norm), spec_pos_name(m->pos), m->bias, m->tied);
    /* GPT-OSS's window, sinks and clamp, only when set (older checkpoints' shapes read the same) */
    if ((m->window > 0 || m->sinks || m->act_clamp > 0) && len > 0 && (size_t)len < n)
        len += snprintf(buf + len, n - len, " win%d/%d sinks%d clamp%g", m->window, m->window_skip_freq, m->sinks,
                        m->act_clamp);
    for (int st = 0; st < lo->pp && st < LAYOUT_MAX_PP && len > 0 && (size_t)len < n; st++)
        len += snprintf(buf + len, n - len, "%c%d", st ? ',' : ' ', lo->layers[st]);
}

void ckpt_step_name(char *buf, size_t n, int step) { snprintf(buf, n, "step-%06d", step); }

void ckpt_rank_name(char *buf, size_t n, int rank)
{
    snprintf(buf, n, "rank_%05d.ckpt", rank);
}

/* o[key] as an exact integer in [lo, hi] into *out; 0 if it is missing,
 * not a number, not whole or out of range. lo and hi within +-2^53. */
static int json_int(const cJSON *o, const char *key, double lo, double hi, long long *out)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!cJSON_IsNumber(v) || !(v->valuedouble >= lo && v->valuedouble <= hi))
        return 0;
    *out = (long long)v->valuedouble;
    return (double)*out == v->valuedouble;
}

static const char *json_str(const cJSON *o, const char *key)
{
    return cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(o, key));
}

/* The first key of object o that appears twice, or NULL. */
static const char *dup_key(const cJSON *o)
{
    for (const cJSON *a = o ? o->child : NULL; a; a = a->next)
        for (const cJSON *b = a->next; b; b = b->next)
            if (a->string && b->string && strcmp(a->string, b->string) == 0)
                return a->string;
    return NULL;
}

/* Every field of one "files" entry: what is wrong with it, or NULL. */
static const char *bad_file_entry(const cJSON *f, int r, long long *bytes, uint32_t *crc)
{
    char want[32];
    long long c;
    ckpt_rank_name(want, sizeof want, r);
    if (!cJSON_IsObject(f) || dup_key(f))
        return "is not an object of distinct keys";
    const char *name = json_str(f, "name");
    if (!name || strcmp(name, want) != 0)
        return "does not name its rank's file";
    if (!json_int(f, "bytes", (double)sizeof(CkptHeader), 9007199254740992.0, bytes))
        return "has no exact \"bytes\" (an integer, at least a header)";
    if (!json_int(f, "crc32", 0, 4294967295.0, &c))
        return "has no exact \"crc32\" (an integer from 0 to 2^32-1)";
    *crc = (uint32_t)c;
    return NULL;
}

/* Whether sd is the directory name of step: exactly step-%06d, so never
 * "..", ".", a path or another step's. */
static int is_dir_of(const char *sd, long long step)
{
    char want[32];
    ckpt_step_name(want, sizeof want, (int)step);
    return strcmp(sd, want) == 0;
}

int ckpt_manifest_check(const char *text, const char *path, const CkptState *s, CkptManifest *mf, char *err,
                        int errlen)
{
    char shape[CKPT_SHAPE_MAX];
    cJSON *m = cJSON_Parse(text);
    const char *fmt = json_str(m, "format"), *sd = json_str(m, "dir"), *opt = json_str(m, "optimizer");
    const char *model = json_str(m, "model"), *dup = dup_key(m), *sum = json_str(m, "checksum");
    const cJSON *files = cJSON_GetObjectItemCaseSensitive(m, "files");
    long long step = -1, world = 0, dp = 0, tp = 0, pp = 0, vp = 0;
    char why[400] = "";
    ckpt_shape(s->model, s->lo, shape, sizeof shape);
    if (!cJSON_IsObject(m) || !fmt || strncmp(fmt, CKPT_FORMAT_STEM, sizeof CKPT_FORMAT_STEM - 1) != 0)
        snprintf(why, sizeof why, "is not a readable %s manifest (damaged, or from another version)", CKPT_FORMAT);
    else if (strcmp(fmt, CKPT_FORMAT) != 0)
        snprintf(why, sizeof why, "is an %.40s manifest, written by another version of ultraplan; this one reads "
                 "%s only", fmt, CKPT_FORMAT);
    else if (dup)
        snprintf(why, sizeof why, "has the key \"%.40s\" twice", dup);
    else if (!json_int(m, "step", 0, INT_MAX, &step))
        snprintf(why, sizeof why, "has no valid \"step\" (an integer from 0 to %d)", INT_MAX);
    else if (!json_int(m, "world", 1, INT_MAX, &world))
        snprintf(why, sizeof why, "has no valid \"world\" (a positive integer)");
    else if (world != s->world)
        snprintf(why, sizeof why, "is a checkpoint of a %lld-rank run, this run has %d ranks", world, s->world);
    else if (!json_int(m, "dp", 1, INT_MAX, &dp) || !json_int(m, "tp", 1, INT_MAX, &tp) ||
             !json_int(m, "pp", 1, INT_MAX, &pp) || !json_int(m, "vp", 1, INT_MAX, &vp) || !opt)
        snprintf(why, sizeof why, "has no valid dp, tp, pp, vp and optimizer");
    else if (dp != s->dp || tp != s->tp || pp != s->pp || vp != s->vp ||
             strcmp(opt, layout_opt_name((OptimShard)s->opt)) != 0)
        snprintf(why, sizeof why, "is a checkpoint of layout dp %lld tp %lld pp %lld vp %lld %.20s; this plan's "
                 "is dp %d tp %d pp %d vp %d %s: it does not match this plan's layout and model", dp, tp, pp, vp,
                 opt, s->dp, s->tp, s->pp, s->vp, layout_opt_name((OptimShard)s->opt));
    else if (!model || strcmp(model, shape) != 0)
        snprintf(why, sizeof why, "is a checkpoint of model %.140s; this plan's is %.140s: it does not match "
                 "this plan's layout and model", model ? model : "(none)", shape);
    else if (!sd || !is_dir_of(sd, step))
        snprintf(why, sizeof why, "names the directory \"%.60s\" for step %lld; it must be \"step-%06lld\", "
                 "inside the checkpoint directory", sd ? sd : "(none)", step, step);
    else if (!sum || strcmp(sum, "crc32") != 0)
        snprintf(why, sizeof why, "has no \"checksum\": \"crc32\"");
    else if (!cJSON_IsArray(files) || cJSON_GetArraySize(files) != s->world)
        snprintf(why, sizeof why, "lists %d rank files for a %d-rank run", cJSON_IsArray(files) ?
                 cJSON_GetArraySize(files) : 0, s->world);
    for (int r = 0; !why[0] && r < s->world; r++) {
        long long bytes;
        uint32_t crc;
        const char *bad = bad_file_entry(cJSON_GetArrayItem(files, r), r, &bytes, &crc);
        if (bad)
            snprintf(why, sizeof why, "files[%d] %s", r, bad);
        else if (r == s->rank)
            mf->bytes = bytes, mf->crc = crc;
    }
    cJSON_Delete(m);
    if (why[0]) {
        snprintf(err, errlen, "resume: %s %s; refusing to load", path, why);
        return -1;
    }
    mf->step = (int)step;
    ckpt_step_name(mf->stepdir, sizeof mf->stepdir, mf->step);
    return 0;
}

