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
 * A failed write (a rank's file, or the manifest: a full disk) removes the
 * new step's files again; the next successful checkpoint removes what a kill
 * left behind (temporary files, an uncommitted step directory). Removal goes
 * through directory descriptors (openat/unlinkat, O_NOFOLLOW), so it never
 * follows a symbolic link out of DIR, and touches only names this code
 * writes.
 *
 * Load validates every field of the manifest and of the rank file's header
 * (ckpt.h), and checks the file's size and CRC-32 (over the whole file but
 * the checksum field) against the manifest and its header before trusting
 * it; a mismatch is refused with the file's name.
 *
 * Test hooks (documented in docs/reliability/FAULTS.md): the environment
 * variable ULTRAPLAN_FAULT_INJECT=kill_in_ckpt:STEP makes rank 0 SIGKILL
 * itself halfway through writing its file of step STEP, and
 * kill_in_manifest:STEP halfway through writing the manifest of step STEP.
 */
#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
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

/* ---- the shape ------------------------------------------------------------ */

static uint32_t shape_crc(const CkptState *s)
{
    char text[CKPT_SHAPE_MAX];
    ckpt_shape(s->model, s->lo, text, sizeof text);
    return crc_update(0, text, strlen(text));
}

/* ---- writing ------------------------------------------------------------ */

/* Byte offset at which the test hook kills this process (rank 0, writing
 * `what`, "ckpt" or "manifest", of this step), or 0. */
static size_t inject_kill_at(const CkptState *st, const char *what, size_t total)
{
    const char *s = getenv("ULTRAPLAN_FAULT_INJECT");
    char want[32], hook[32];
    int step, len = 0;
    snprintf(want, sizeof want, "kill_in_%s", what);
    if (s && sscanf(s, "%31[a-z_]:%d%n", hook, &step, &len) == 2 && s[len] == 0 && strcmp(hook, want) == 0 &&
        step == st->step && st->rank == 0)
        return total / 2 ? total / 2 : 1;
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

/* Create dir (any) and its step directory, which must then be a real
 * directory: a planted symbolic link there would take the files elsewhere. */
static int make_dirs(const char *dir, const char *stepdir, char *err, int errlen)
{
    const char *d[] = {dir, stepdir};
    for (int i = 0; i < 2; i++)
        if (mkdir(d[i], 0755) != 0 && errno != EEXIST) {
            snprintf(err, errlen, "checkpoint: cannot create directory %s: %s", d[i], strerror(errno));
            return -1;
        }
    struct stat st;
    if (lstat(stepdir, &st) != 0 || !S_ISDIR(st.st_mode)) {
        snprintf(err, errlen, "checkpoint: %s exists and is not a directory (a symbolic link?); refusing to "
                 "write through it", stepdir);
        return -1;
    }
    return 0;
}

/* ---- removing what we wrote, and nothing else ----------------------------- */

/* Whether name is exactly "PREFIX<digits>" with at least `min` digits and
 * at most 10, followed by `rest`; the number in *num. */
static int numbered(const char *name, const char *prefix, int min, const char *rest, long long *num)
{
    size_t p = strlen(prefix);
    if (strncmp(name, prefix, p) != 0)
        return 0;
    const char *d = name + p, *e = d;
    while (*e >= '0' && *e <= '9')
        e++;
    if (e - d < min || e - d > 10 || strcmp(e, rest) != 0)
        return 0;
    *num = strtoll(d, NULL, 10);
    return 1;
}

/* A name ckpt_save gives a step directory: step-%06d of an int step, as
 * written (6 digits, or 7 to 10 without leading zeros). */
static int is_ckpt_step_name(const char *name)
{
    long long step;
    char canon[32];
    if (!numbered(name, "step-", 6, "", &step) || step > INT_MAX)
        return 0;
    ckpt_step_name(canon, sizeof canon, (int)step);
    return strcmp(canon, name) == 0;
}

/* Whether name is a temporary file of target (util_atomic_parts names them
 * TARGET.tmp.PID.N). */
static int is_temp_of(const char *name, const char *target)
{
    size_t t = strlen(target);
    if (strncmp(name, target, t) != 0 || strncmp(name + t, ".tmp.", 5) != 0 || !name[t + 5])
        return 0;
    return strspn(name + t + 5, "0123456789.") == strlen(name + t + 5);
}

/* A rank file (rank_%05d.ckpt) or one of its temporaries; *temp says which. */
static int is_rank_file(const char *name, int *temp)
{
    long long r;
    const char *dot = strstr(name, ".ckpt");
    if (!dot || dot - name > 24)
        return 0;
    char stem[40];
    snprintf(stem, sizeof stem, "%.*s", (int)(dot - name) + 5, name);
    if (!numbered(stem, "rank_", 5, ".ckpt", &r))
        return 0;
    *temp = strcmp(name, stem) != 0;
    return !*temp || is_temp_of(name, stem);
}

static int is_regular_at(int dfd, const char *name)
{
    struct stat st;
    return fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode);
}

/* Say once per process that a step directory was left in place. */
static void warn_left(const char *dir, const char *step, const char *why)
{
    static int said;
    if (said++)
        return;
    fprintf(stderr, "ultraplan run: warning: checkpoint cleanup left %s/%s in place: %s (said once)\n", dir, step,
            why);
}

/* In DIR (dfd), remove the step directory `step`: its rank files and their
 * temporaries, then the directory. A step entry that is not a real
 * directory, or that holds anything else (another name, a link, a
 * subdirectory), is left untouched. With temps_only, remove only the
 * temporaries (regular files) and keep the directory. 0 when done, -1 when
 * something was left (why says what). */
static int remove_step(int dfd, const char *step, int temps_only, char *why, size_t n)
{
    int sfd = openat(dfd, step, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (sfd < 0) {
        snprintf(why, n, "%s", errno == ENOENT ? "gone" : "not a directory (a symbolic link?)");
        return errno == ENOENT ? 0 : -1;
    }
    DIR *d = fdopendir(sfd);
    if (!d) {
        close(sfd);
        snprintf(why, n, "cannot list it: %s", strerror(errno));
        return -1;
    }
    int foreign = 0, temp;
    struct dirent *de;
    while (!temps_only && !foreign && (de = readdir(d)))
        if (strcmp(de->d_name, ".") && strcmp(de->d_name, "..") &&
            (!is_rank_file(de->d_name, &temp) || !is_regular_at(sfd, de->d_name))) {
            snprintf(why, n, "it holds %.200s, which ultraplan did not write", de->d_name);
            foreign = 1;
        }
    rewinddir(d);
    while (!foreign && (de = readdir(d)))
        if (is_rank_file(de->d_name, &temp) && (!temps_only || (temp && is_regular_at(sfd, de->d_name))))
            unlinkat(sfd, de->d_name, 0);   // relative to sfd: never through a link
    closedir(d);
    if (foreign)
        return -1;
    if (!temps_only && unlinkat(dfd, step, AT_REMOVEDIR) != 0 && errno != ENOENT) {
        snprintf(why, n, "cannot remove it: %s", strerror(errno));
        return -1;
    }
    return 0;
}

/* After the manifest names keep (rank 0): remove every other step
 * directory, the temporaries left in keep, and manifest.json's leftover
 * temporaries (a kill during its write). */
static void remove_old(const char *dir, const char *keep)
{
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    DIR *d = dfd >= 0 ? fdopendir(dfd) : NULL;
    if (!d) {
        if (dfd >= 0)
            close(dfd);
        return;
    }
    char why[300];
    struct dirent *de;
    while ((de = readdir(d))) {
        const char *name = de->d_name;
        if (is_temp_of(name, "manifest.json") && is_regular_at(dfd, name))
            unlinkat(dfd, name, 0);
        else if (is_ckpt_step_name(name) && strcmp(name, keep) != 0 && remove_step(dfd, name, 0, why, sizeof why) != 0)
            warn_left(dir, name, why);
    }
    remove_step(dfd, keep, 1, why, sizeof why);
    closedir(d);
}

/* Whether dir's manifest (if any) names step: its files are committed. */
static int is_committed(const char *dir, const char *step)
{
    char path[1100], e[256];
    snprintf(path, sizeof path, "%s/manifest.json", dir);
    char *text = util_slurp(path, 64u << 20, NULL, e, sizeof e);
    cJSON *m = text ? cJSON_Parse(text) : NULL;
    const char *sd = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(m, "dir"));
    int yes = sd && strcmp(sd, step) == 0;
    cJSON_Delete(m);
    free(text);
    return yes;
}

/* Remove the new step's directory after a failed write (rank 0; every rank
 * is past its own write): nothing names it, unless a manifest of an earlier
 * run in dir does. */
static void remove_uncommitted(const char *dir, const char *step)
{
    if (is_committed(dir, step))
        return;
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    char why[300];
    if (dfd >= 0 && remove_step(dfd, step, 0, why, sizeof why) != 0)
        warn_left(dir, step, why);
    if (dfd >= 0)
        close(dfd);
}

static int write_manifest(const CkptState *s, const char *dir, const char *stepdir, const unsigned long long *info,
                          char *err, int errlen)
{
    char shape[CKPT_SHAPE_MAX];
    ckpt_shape(s->model, s->lo, shape, sizeof shape);
    cJSON *m = cJSON_CreateObject(), *files = cJSON_CreateArray();
    cJSON_AddStringToObject(m, "format", CKPT_FORMAT);
    cJSON_AddNumberToObject(m, "step", s->step);
    cJSON_AddNumberToObject(m, "world", s->world);
    cJSON_AddNumberToObject(m, "dp", s->dp);
    cJSON_AddNumberToObject(m, "tp", s->tp);
    cJSON_AddNumberToObject(m, "pp", s->pp);
    cJSON_AddNumberToObject(m, "vp", s->vp);
    cJSON_AddStringToObject(m, "optimizer", layout_opt_name((OptimShard)s->opt));
    cJSON_AddStringToObject(m, "model", shape);
    cJSON_AddStringToObject(m, "dir", stepdir);
    cJSON_AddStringToObject(m, "checksum", "crc32");
    for (int r = 0; r < s->world; r++) {
        char name[32];
        ckpt_rank_name(name, sizeof name, r);
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
    int rc = atomic_write(path, parts, lens, 2, inject_kill_at(s, "manifest", lens[0] + 1), err, errlen);
    free(text);
    return rc;
}

int ckpt_save(const CkptState *s, const char *dir, char *err, int errlen)
{
    char stepdir[1100], path[1200], name[32], step[32];
    exec_ckpt_path(stepdir, sizeof stepdir, dir, s->step);
    ckpt_step_name(step, sizeof step, s->step);
    int rc = 0;
    if (s->rank == 0)
        rc = make_dirs(dir, stepdir, err, errlen);
    if (dist_world_agree(rc, err, errlen) != 0)
        return -1;

    CkptHeader h;
    memset(&h, 0, sizeof h);   // padding too: the checksum covers the bytes
    h.magic = CKPT_MAGIC, h.version = CKPT_VERSION, h.step = s->step, h.world = s->world;
    h.rank = s->rank, h.dp = s->dp, h.tp = s->tp, h.pp = s->pp, h.vp = s->vp;
    h.opt = s->opt, h.n_alloc = (long long)s->n_alloc, h.opt_n = (long long)s->opt_n;
    h.shape = shape_crc(s);
    /* field by field: a struct copy would bring DataPos's padding bytes along */
    h.pos.shard = s->pos.shard, h.pos.offset = s->pos.offset, h.pos.epoch = s->pos.epoch;
    const void *parts[] = {&h, s->w, s->m, s->v};
    size_t lens[] = {sizeof h, s->n_alloc * sizeof(float), s->opt_n * sizeof(float), s->opt_n * sizeof(float)};
    uint32_t crc = 0;
    size_t total = 0;
    for (int i = 0; i < 4; i++)
        crc = crc_update(crc, parts[i], lens[i]), total += lens[i];
    h.crc = crc;
    ckpt_rank_name(name, sizeof name, s->rank);
    snprintf(path, sizeof path, "%s/%s", stepdir, name);
    rc = atomic_write(path, parts, lens, 4, inject_kill_at(s, "ckpt", total), err, errlen);
    if (dist_world_agree(rc, err, errlen) != 0) {
        if (s->rank == 0)
            remove_uncommitted(dir, step);   // nothing points at it; free the space
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
        rc = write_manifest(s, dir, step, all, err, errlen);
        if (rc == 0) {
            sync_dir(dir);
            remove_old(dir, step);
        } else {
            remove_uncommitted(dir, step);   // complete but never committed
        }
    }
    free(all);
    return dist_world_agree(rc, err, errlen);
}

/* ---- loading -------------------------------------------------------------- */

/* Validate the manifest in full against s (ckpt_manifest_check, manifest.c);
 * *mf gets this rank's entry. */
static int read_manifest(const CkptState *s, const char *dir, CkptManifest *mf, char *err, int errlen)
{
    char path[1100], serr[512];
    snprintf(path, sizeof path, "%s/manifest.json", dir);
    struct stat st;
    if (stat(path, &st) != 0 && errno == ENOENT) {
        snprintf(err, errlen, "resume: no checkpoint in %s (%s missing)", dir, path);
        return -1;
    }
    char *text = util_slurp(path, 64u << 20, NULL, serr, sizeof serr);
    if (!text) {
        snprintf(err, errlen, "resume: %s; refusing to load", serr);
        return -1;
    }
    int rc = ckpt_manifest_check(text, path, s, mf, err, errlen);
    free(text);
    return rc;
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

/* Open dir/mf->stepdir/name (path): a regular file in a real directory
 * inside dir, never through a symbolic link. NULL with err. */
static FILE *open_rank_file(const char *dir, const CkptManifest *mf, const char *name, const char *path,
                            struct stat *st, char *err, int errlen)
{
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC), sfd = -1, fd = -1, e = 0;
    const char *what = NULL;
    if (dfd < 0)
        e = errno;
    else if ((sfd = openat(dfd, mf->stepdir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0)
        e = errno,
        what = e == ELOOP || e == ENOTDIR ? "its step directory is a symbolic link or not a directory" : NULL;
    else if ((fd = openat(sfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)) < 0)
        e = errno, what = e == ELOOP ? "is a symbolic link" : NULL;
    else if (fstat(fd, st) != 0)
        e = errno;
    else if (!S_ISREG(st->st_mode))
        what = "is not a regular file";
    if (dfd >= 0)
        close(dfd);
    if (sfd >= 0)
        close(sfd);
    if (e || what) {
        if (fd >= 0)
            close(fd);
        snprintf(err, errlen, "checkpoint %s: %s; refusing to load", path, what ? what : strerror(e));
        return NULL;
    }
    FILE *f = fdopen(fd, "rb");
    if (!f) {
        snprintf(err, errlen, "checkpoint %s: %s; refusing to load", path, strerror(errno));
        close(fd);
    }
    return f;
}

/* What is wrong with a sound file's header for this run, or NULL. */
static const char *bad_header(const CkptHeader *h, const CkptState *s, const CkptManifest *mf, char *buf, size_t n)
{
    if (h->magic != CKPT_MAGIC)
        return "is not an ultraplan checkpoint file";
    if (h->version != CKPT_VERSION) {
        snprintf(buf, n, "is a version-%u checkpoint file, written by another version of ultraplan; this one "
                 "reads version %d only", h->version, CKPT_VERSION);
        return buf;
    }
    if (h->rank != s->rank || h->world != s->world || h->step != mf->step) {
        snprintf(buf, n, "belongs to another rank or step (rank %d of %d, step %d; expected rank %d of %d, step "
                 "%d)", h->rank, h->world, h->step, s->rank, s->world, mf->step);
        return buf;
    }
    if (h->dp != s->dp || h->tp != s->tp || h->pp != s->pp || h->vp != s->vp || h->opt != s->opt ||
        h->n_alloc != (long long)s->n_alloc || h->opt_n != (long long)s->opt_n || h->shape != shape_crc(s))
        return "does not match this plan's layout and model";
    if (h->pos.shard < 0 || h->pos.offset < 0 || h->pos.epoch < 0)
        return "has a negative data position";
    return NULL;
}

static int load_rank(CkptState *s, const char *dir, DataLoader *dl, char *err, int errlen)
{
    CkptManifest mf;
    if (read_manifest(s, dir, &mf, err, errlen) != 0)
        return -1;
    char path[1200], name[32], buf[300];
    ckpt_rank_name(name, sizeof name, s->rank);
    snprintf(path, sizeof path, "%s/%s/%s", dir, mf.stepdir, name);
    struct stat st;
    FILE *f = open_rank_file(dir, &mf, name, path, &st, err, errlen);
    if (!f)
        return -1;
    if ((long long)st.st_size != mf.bytes) {
        fclose(f);
        snprintf(err, errlen, "checkpoint %s: %lld bytes, the manifest says %lld (file truncated or "
                 "overwritten); refusing to load", path, (long long)st.st_size, mf.bytes);
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
    /* 2. a sound file of the right run, at a position the data has */
    const char *why = bad_header(&h, s, &mf, buf, sizeof buf);
    if (why) {
        fclose(f);
        snprintf(err, errlen, "resume: %s %s; refusing to load", path, why);
        return -1;
    }
    if (dl && data_set_pos(dl, h.pos, err, errlen) != 0) {
        fclose(f);
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
    s->pos = h.pos;
    s->step = h.step;
    return 0;
}

int ckpt_load(CkptState *s, const char *dir, DataLoader *dl, char *err, int errlen)
{
    return dist_world_agree(load_rank(s, dir, dl, err, errlen), err, errlen);
}

/* ---- the CPU executor ------------------------------------------------------- */

/* This rank's state, pointing at the executor's slabs: m and v are the
 * optimizer shard in the layout's own order (ZeRO-1: a range of the flat
 * slab; ZeRO-2/3: the rank's slice of every unit, unit by unit), w the full
 * stage (ZeRO-3 gathers it into a temporary, below). */
static CkptState exec_state(Exec *e)
{
    CkptState s = {
        .step = e->step, .world = e->d.world, .rank = e->d.rank,
        .dp = e->lo.dp, .tp = e->lo.tp, .pp = e->lo.pp, .vp = e->lo.vp, .opt = (int)e->lo.opt,
        .n_alloc = e->ps.n_alloc, .opt_n = e->opt_n, .pos = data_get_pos(&e->dl),
        .model = &e->m, .lo = &e->lo,
        .w = e->ps.w, .m = e->om, .v = e->ov,
    };
    return s;
}

/* ZeRO-3 keeps no full weights: a file still holds them (ckpt.h), through a
 * temporary buffer every rank allocates or none does. */
static int full_weights(Exec *e, CkptState *s, float **tmp, char *err, int errlen)
{
    *tmp = NULL;
    if (e->zero != 3)
        return 0;
    *tmp = malloc((e->ps.n_alloc ? e->ps.n_alloc : 1) * sizeof(float));
    if (!*tmp)
        snprintf(err, errlen, "rank %d: out of memory for the %zu weights of a ZeRO-3 checkpoint", e->d.rank,
                 e->ps.n_alloc);
    if (dist_world_agree(*tmp ? 0 : -1, err, errlen) != 0) {
        free(*tmp);
        *tmp = NULL;
        return -1;
    }
    s->w = *tmp;
    return 0;
}

int exec_save(Exec *e, const char *dir, char *err, int errlen)
{
    CkptState s = exec_state(e);
    float *tmp;
    if (full_weights(e, &s, &tmp, err, errlen) != 0)
        return -1;
    if (tmp)
        exec_gather_weights(e, tmp);
    int rc = ckpt_save(&s, dir, err, errlen);
    free(tmp);
    return rc;
}

int exec_load(Exec *e, const char *dir, char *err, int errlen)
{
    CkptState s = exec_state(e);
    float *tmp;
    if (full_weights(e, &s, &tmp, err, errlen) != 0)
        return -1;
    int rc = ckpt_load(&s, dir, &e->dl, err, errlen);
    if (rc == 0) {
        if (tmp)
            exec_scatter_weights(e, tmp);   // keeps this rank's slices
        e->step = s.step;
    }
    free(tmp);
    return rc;
}
