/* ckpt.c — checkpoints (ckpt.h): the format and commit protocol on a
 * backend-neutral CkptState, and the CPU executor's exec_save/exec_load
 * (exec.h), which point a CkptState at its slabs. Layout of DIR: see ckpt.h.
 *
 * Every file is written to a temporary name, fsynced and renamed. Rank 0
 * writes the manifest only after every rank's file is in place, and deletes
 * older step directories only after the new manifest is. A crash, a kill or
 * a full disk at any moment therefore leaves the manifest naming a complete
 * checkpoint: the new one or the previous one.
 *
 * Load checks every file's size and CRC-32 (over the whole file but the
 * checksum field) against the manifest and its header before trusting it,
 * and refuses a mismatch with the file's name.
 *
 * Test hook (documented in docs/reliability/FAULTS.md): the environment
 * variable ULTRAPLAN_FAULT_INJECT=kill_in_ckpt:STEP makes rank 0 SIGKILL
 * itself halfway through writing its file of step STEP.
 */
#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ckpt.h"
#include "exec.h"
#include "fileio.h"

#define CKPT_MAGIC 0x4B435055u   // "UPCK"
#define CKPT_VERSION 2
#define CKPT_FORMAT "ultraplan.checkpoint/2"

typedef struct {
    unsigned magic, version;
    int step, world, rank, dp, tp, pp, vp, opt;
    long long n_alloc, opt_n;
    DataPos pos;
    uint32_t crc;                // CRC-32 of the file with this field zero
    uint32_t pad;
} CkptHeader;

/* ---- CRC-32 (IEEE 802.3, as zlib's crc32) ---------------------------- */

static uint32_t crc_table[8][256];

static void crc_init(void)
{
    if (crc_table[0][1])
        return;
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = c & 1 ? 0xEDB88320u ^ (c >> 1) : c >> 1;
        crc_table[0][i] = c;
    }
    for (int t = 1; t < 8; t++)   // slicing by 8: eight bytes per step
        for (int i = 0; i < 256; i++)
            crc_table[t][i] = (crc_table[t - 1][i] >> 8) ^ crc_table[0][crc_table[t - 1][i] & 0xFF];
}

/* crc of the bytes so far (0 to start) extended by p[0..n). */
static uint32_t crc_update(uint32_t crc, const void *p, size_t n)
{
    crc_init();
    const unsigned char *b = p;
    crc = ~crc;
    for (; n >= 8; n -= 8, b += 8) {
        uint32_t lo = crc ^ (b[0] | b[1] << 8 | b[2] << 16 | (uint32_t)b[3] << 24);
        crc = crc_table[7][lo & 0xFF] ^ crc_table[6][(lo >> 8) & 0xFF] ^ crc_table[5][(lo >> 16) & 0xFF] ^
              crc_table[4][lo >> 24] ^ crc_table[3][b[4]] ^ crc_table[2][b[5]] ^ crc_table[1][b[6]] ^
              crc_table[0][b[7]];
    }
    while (n--)
        crc = crc_table[0][(crc ^ *b++) & 0xFF] ^ (crc >> 8);
    return ~crc;
}

uint32_t ckpt_crc32(uint32_t crc, const void *p, size_t n) { return crc_update(crc, p, n); }

/* ---- writing ------------------------------------------------------------ */


/* Byte offset at which the test hook kills this process, or 0. */
static size_t inject_kill_at(const CkptState *st, size_t total)
{
    const char *s = getenv("ULTRAPLAN_FAULT_INJECT");
    int step;
    if (s && sscanf(s, "kill_in_ckpt:%d", &step) == 1 && step == st->step && st->rank == 0)
        return total / 2;
    return 0;
}

/* Write the pieces to path atomically (util_atomic_parts: temporary name,
 * fsync, rename), naming the path in the error. */
static int atomic_write(const char *path, const void **parts, const size_t *lens, int nparts, size_t kill_at,
                        char *err, int errlen)
{
    const char *stage;
    int e = util_atomic_parts(path, parts, lens, nparts, kill_at, &stage);
    if (e)
        snprintf(err, errlen, "checkpoint: cannot %s %s: %s", stage, path, strerror(e));
    return e ? -1 : 0;
}

/* fsync a directory so that the renames in it survive a power cut. */
static void sync_dir(const char *dir)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY);
    if (fd >= 0) {
        fsync(fd);
        close(fd);
    }
}

void exec_ckpt_path(char *buf, size_t n, const char *dir, int step)
{
    snprintf(buf, n, "%s/step-%06d", dir, step);
}

static void rank_name(char *buf, size_t n, int rank)
{
    snprintf(buf, n, "rank_%05d.ckpt", rank);
}

static int make_dir(const char *dir, char *err, int errlen)
{
    if (mkdir(dir, 0755) != 0 && errno != EEXIST) {
        snprintf(err, errlen, "checkpoint: cannot create directory %s: %s", dir, strerror(errno));
        return -1;
    }
    return 0;
}

/* Remove DIR/step-NNNNNN directories other than keep (rank 0, after the
 * manifest names keep). Only our own names are touched. */
static void remove_old(const char *dir, const char *keep)
{
    DIR *d = opendir(dir);
    if (!d)
        return;
    struct dirent *de;
    while ((de = readdir(d))) {
        int step, len = 0;
        if (sscanf(de->d_name, "step-%d%n", &step, &len) != 1 || len != 11 || strcmp(de->d_name, keep) == 0)
            continue;
        char sub[1100], f[1400];
        snprintf(sub, sizeof sub, "%s/%s", dir, de->d_name);
        DIR *s = opendir(sub);
        struct dirent *fe;
        while (s && (fe = readdir(s)))
            if (strncmp(fe->d_name, "rank_", 5) == 0) {
                snprintf(f, sizeof f, "%s/%s", sub, fe->d_name);
                unlink(f);
            }
        if (s)
            closedir(s);
        rmdir(sub);
    }
    closedir(d);
}

static int write_manifest(const CkptState *s, const char *dir, const char *stepdir, const unsigned long long *info,
                          char *err, int errlen)
{
    cJSON *m = cJSON_CreateObject(), *files = cJSON_CreateArray();
    cJSON_AddStringToObject(m, "format", CKPT_FORMAT);
    cJSON_AddNumberToObject(m, "step", s->step);
    cJSON_AddNumberToObject(m, "world", s->world);
    cJSON_AddNumberToObject(m, "dp", s->dp);
    cJSON_AddNumberToObject(m, "tp", s->tp);
    cJSON_AddNumberToObject(m, "pp", s->pp);
    cJSON_AddNumberToObject(m, "vp", s->vp);
    cJSON_AddStringToObject(m, "dir", stepdir);
    cJSON_AddStringToObject(m, "checksum", "crc32");
    for (int r = 0; r < s->world; r++) {
        char name[32];
        rank_name(name, sizeof name, r);
        cJSON *f = cJSON_CreateObject();
        cJSON_AddStringToObject(f, "name", name);
        cJSON_AddNumberToObject(f, "bytes", (double)info[2 * r]);
        cJSON_AddNumberToObject(f, "crc32", (double)info[2 * r + 1]);
        cJSON_AddItemToArray(files, f);
    }
    cJSON_AddItemToObject(m, "files", files);
    char *text = cJSON_Print(m);
    cJSON_Delete(m);
    if (!text) {
        snprintf(err, errlen, "checkpoint: out of memory for the manifest");
        return -1;
    }
    char path[1100];
    snprintf(path, sizeof path, "%s/manifest.json", dir);
    const void *parts[] = {text, "\n"};
    size_t lens[] = {strlen(text), 1};
    int rc = atomic_write(path, parts, lens, 2, 0, err, errlen);
    free(text);
    return rc;
}

int ckpt_save(const CkptState *s, const char *dir, char *err, int errlen)
{
    char stepdir[1100], path[1200], name[32];
    exec_ckpt_path(stepdir, sizeof stepdir, dir, s->step);
    int rc = 0;
    if (s->rank == 0)
        rc = make_dir(dir, err, errlen) || make_dir(stepdir, err, errlen) ? -1 : 0;
    if (dist_world_agree(rc, err, errlen) != 0)
        return -1;

    CkptHeader h;
    memset(&h, 0, sizeof h);   // padding too: the checksum covers the bytes
    h.magic = CKPT_MAGIC, h.version = CKPT_VERSION, h.step = s->step, h.world = s->world;
    h.rank = s->rank, h.dp = s->dp, h.tp = s->tp, h.pp = s->pp, h.vp = s->vp;
    h.opt = s->opt, h.n_alloc = (long long)s->n_alloc, h.opt_n = (long long)s->opt_n;
    /* field by field: a struct copy would bring DataPos's padding bytes along */
    h.pos.shard = s->pos.shard, h.pos.offset = s->pos.offset, h.pos.epoch = s->pos.epoch;
    const void *parts[] = {&h, s->w, s->m, s->v};
    size_t lens[] = {sizeof h, s->n_alloc * sizeof(float), s->opt_n * sizeof(float), s->opt_n * sizeof(float)};
    uint32_t crc = 0;
    size_t total = 0;
    for (int i = 0; i < 4; i++)
        crc = crc_update(crc, parts[i], lens[i]), total += lens[i];
    h.crc = crc;
    rank_name(name, sizeof name, s->rank);
    snprintf(path, sizeof path, "%s/%s", stepdir, name);
    rc = atomic_write(path, parts, lens, 4, inject_kill_at(s, total), err, errlen);
    if (dist_world_agree(rc, err, errlen) != 0) {
        unlink(path);   // nothing points at it; free the space
        return -1;
    }

    unsigned long long mine[2] = {total, crc}, *all = NULL;
    if (s->rank == 0 && !(all = malloc(2 * sizeof *all * s->world))) {
        snprintf(err, errlen, "checkpoint: out of memory");
        rc = -1;
    }
    if (dist_world_agree(rc, err, errlen) != 0)
        return -1;
    dist_world_gather_u64(mine, 2, all);
    if (s->rank == 0) {
        sync_dir(stepdir);
        rc = write_manifest(s, dir, stepdir + strlen(dir) + 1, all, err, errlen);
        if (rc == 0) {
            sync_dir(dir);
            remove_old(dir, stepdir + strlen(dir) + 1);
        }
    }
    free(all);
    return dist_world_agree(rc, err, errlen);
}

/* ---- loading -------------------------------------------------------------- */

typedef struct {
    int step, world;
    char stepdir[64];
    long long bytes;             // of this rank's file
    uint32_t crc;
} Manifest;

static int read_manifest(const CkptState *s, const char *dir, Manifest *mf, char *err, int errlen)
{
    char path[1100];
    snprintf(path, sizeof path, "%s/manifest.json", dir);
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err, errlen, "resume: no checkpoint in %s (%s missing)", dir, path);
        return -1;
    }
    long size = fseek(f, 0, SEEK_END) == 0 ? ftell(f) : -1;
    char *text = size >= 0 && size < (1L << 30) ? malloc(size + 1) : NULL;
    size_t n = text && fseek(f, 0, SEEK_SET) == 0 ? fread(text, 1, size, f) : 0;
    fclose(f);
    if (text)
        text[n] = 0;
    cJSON *m = text ? cJSON_Parse(text) : NULL;
    free(text);
    const cJSON *fmt = cJSON_GetObjectItem(m, "format"), *step = cJSON_GetObjectItem(m, "step");
    const cJSON *world = cJSON_GetObjectItem(m, "world"), *sd = cJSON_GetObjectItem(m, "dir");
    const cJSON *files = cJSON_GetObjectItem(m, "files");
    const cJSON *mine = cJSON_GetArrayItem(files, s->rank);
    const cJSON *bytes = cJSON_GetObjectItem(mine, "bytes"), *crc = cJSON_GetObjectItem(mine, "crc32");
    int ok = m && cJSON_IsString(fmt) && strcmp(fmt->valuestring, CKPT_FORMAT) == 0 && cJSON_IsNumber(step) &&
             cJSON_IsNumber(world) && cJSON_IsString(sd) && strlen(sd->valuestring) < sizeof mf->stepdir &&
             !strchr(sd->valuestring, '/') && cJSON_IsNumber(bytes) && cJSON_IsNumber(crc);
    if (!ok) {
        snprintf(err, errlen, "resume: %s is not a readable %s manifest (damaged, or from another version); "
                 "refusing to load", path, CKPT_FORMAT);
    } else if (world->valueint != s->world || cJSON_GetArraySize(files) != s->world) {
        snprintf(err, errlen, "resume: %s is a checkpoint of a %d-rank run, this run has %d ranks", path,
                 world->valueint, s->world);
        ok = 0;
    } else {
        mf->step = step->valueint;
        mf->world = world->valueint;
        snprintf(mf->stepdir, sizeof mf->stepdir, "%s", sd->valuestring);
        mf->bytes = (long long)bytes->valuedouble;
        mf->crc = (uint32_t)crc->valuedouble;
    }
    cJSON_Delete(m);
    return ok ? 0 : -1;
}

/* The CRC-32 of a checkpoint file with its checksum field taken as zero,
 * read in chunks so nothing is loaded before the file is known good. Its
 * header goes to *h. -1 if it cannot be read whole. */
static int file_crc(FILE *f, CkptHeader *h, uint32_t *crc)
{
    if (fread(h, sizeof *h, 1, f) != 1)
        return -1;
    CkptHeader z = *h;
    z.crc = 0;
    *crc = crc_update(0, &z, sizeof z);
    enum { CHUNK = 1 << 20 };
    unsigned char *buf = malloc(CHUNK);
    if (!buf)
        return -1;
    size_t n;
    while ((n = fread(buf, 1, CHUNK, f)) > 0)
        *crc = crc_update(*crc, buf, n);
    free(buf);
    return ferror(f) ? -1 : 0;
}

static int load_rank(CkptState *s, const char *dir, DataLoader *dl, char *err, int errlen)
{
    Manifest mf;
    if (read_manifest(s, dir, &mf, err, errlen) != 0)
        return -1;
    char path[1200], name[32];
    rank_name(name, sizeof name, s->rank);
    snprintf(path, sizeof path, "%s/%s/%s", dir, mf.stepdir, name);
    struct stat st;
    if (stat(path, &st) != 0) {
        snprintf(err, errlen, "checkpoint %s: %s; refusing to load", path, strerror(errno));
        return -1;
    }
    if ((long long)st.st_size != mf.bytes) {
        snprintf(err, errlen, "checkpoint %s: %lld bytes, the manifest says %lld (file truncated or "
                 "overwritten); refusing to load", path, (long long)st.st_size, mf.bytes);
        return -1;
    }
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err, errlen, "checkpoint %s: %s; refusing to load", path, strerror(errno));
        return -1;
    }
    /* 1. integrity: the whole file against its header and the manifest */
    CkptHeader h;
    uint32_t crc = 0;
    if (file_crc(f, &h, &crc) != 0 || crc != h.crc || crc != mf.crc) {
        fclose(f);
        snprintf(err, errlen, "checkpoint %s: checksum mismatch (file corrupted or truncated); refusing to load",
                 path);
        return -1;
    }
    /* 2. a sound file of the right run */
    const char *why = h.magic != CKPT_MAGIC || h.version != CKPT_VERSION ? "is not a version-2 checkpoint file"
                      : h.rank != s->rank || h.step != mf.step       ? "belongs to another rank or step"
                      : h.dp != s->dp || h.tp != s->tp || h.pp != s->pp || h.vp != s->vp || h.opt != s->opt ||
                              h.n_alloc != (long long)s->n_alloc || h.opt_n != (long long)s->opt_n
                          ? "does not match this plan's layout and model"
                          : NULL;
    if (why) {
        fclose(f);
        snprintf(err, errlen, "resume: %s %s; refusing to load", path, why);
        return -1;
    }
    /* 3. load */
    int ok = fseek(f, sizeof h, SEEK_SET) == 0 && fread(s->w, sizeof(float), s->n_alloc, f) == s->n_alloc &&
             fread(s->m, sizeof(float), s->opt_n, f) == s->opt_n &&
             fread(s->v, sizeof(float), s->opt_n, f) == s->opt_n;
    fclose(f);
    if (!ok) {
        snprintf(err, errlen, "checkpoint %s: read failed after its checksum passed; refusing to continue", path);
        return -1;
    }
    if (dl && data_set_pos(dl, h.pos, err, errlen) != 0)
        return -1;
    s->pos = h.pos;
    s->step = h.step;
    return 0;
}

int ckpt_load(CkptState *s, const char *dir, DataLoader *dl, char *err, int errlen)
{
    return dist_world_agree(load_rank(s, dir, dl, err, errlen), err, errlen);
}

/* ---- the CPU executor ------------------------------------------------------- */

/* This rank's state, pointing at the executor's slabs. */
static CkptState exec_state(Exec *e)
{
    CkptState s = {
        .step = e->step, .world = e->d.world, .rank = e->d.rank,
        .dp = e->lo.dp, .tp = e->lo.tp, .pp = e->lo.pp, .vp = e->lo.vp, .opt = (int)e->lo.opt,
        .n_alloc = e->ps.n_alloc, .opt_n = e->opt_n, .pos = data_get_pos(&e->dl),
        .w = e->ps.w, .m = e->om, .v = e->ov,
    };
    return s;
}

int exec_save(Exec *e, const char *dir, char *err, int errlen)
{
    CkptState s = exec_state(e);
    return ckpt_save(&s, dir, err, errlen);
}

int exec_load(Exec *e, const char *dir, char *err, int errlen)
{
    CkptState s = exec_state(e);
    if (ckpt_load(&s, dir, &e->dl, err, errlen) != 0)
        return -1;
    e->step = s.step;
    return 0;
}
