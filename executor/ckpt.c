/* ckpt.c — checkpoints: one file per rank (weights, AdamW moments, step,
 * data position) plus a manifest, each written to a temporary name,
 * fsynced and renamed, so a crash never leaves a half-written checkpoint
 * that --resume would trust. The manifest is written last, by rank 0, after
 * every rank's file is in place. Part of exec.h. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "exec.h"

#define CKPT_MAGIC 0x4B435055u   // "UPCK"
#define CKPT_VERSION 1

typedef struct {
    unsigned magic, version;
    int step, world, rank, dp, tp, pp, vp, opt;
    long long n_alloc, opt_n;
    DataPos pos;
} CkptHeader;

static int write_all(int fd, const void *p, size_t n)
{
    const char *c = p;
    while (n) {
        ssize_t w = write(fd, c, n);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        c += w, n -= (size_t)w;
    }
    return 0;
}

/* Write the pieces to path atomically. */
static int atomic_write(const char *path, const void **parts, const size_t *lens, int nparts,
                        char *err, int errlen)
{
    char tmp[1100];
    snprintf(tmp, sizeof tmp, "%s.tmp.%d", path, (int)getpid());
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) {
        snprintf(err, errlen, "checkpoint: cannot create %s: %s", tmp, strerror(errno));
        return -1;
    }
    int bad = 0;
    for (int i = 0; i < nparts && !bad; i++)
        bad = write_all(fd, parts[i], lens[i]) != 0;
    bad = bad || fsync(fd) != 0;
    bad = close(fd) != 0 || bad;
    if (bad || rename(tmp, path) != 0) {
        snprintf(err, errlen, "checkpoint: cannot write %s: %s", path, strerror(errno));
        unlink(tmp);
        return -1;
    }
    return 0;
}

static void rank_path(char *buf, size_t n, const char *dir, int rank)
{
    snprintf(buf, n, "%s/rank_%05d.ckpt", dir, rank);
}

/* All ranks agree on failure: the first rank's message wins on rank 0's output. */
static int agree(int rc)
{
    int bad = rc != 0;
    CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, &bad, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD));
    return bad ? -1 : 0;
}

int exec_save(Exec *e, const char *dir, char *err, int errlen)
{
    int rc = 0;
    if (e->d.rank == 0 && mkdir(dir, 0755) != 0 && errno != EEXIST) {
        snprintf(err, errlen, "checkpoint: cannot create directory %s: %s", dir, strerror(errno));
        rc = -1;
    }
    if (agree(rc) != 0) {
        if (e->d.rank != 0)
            snprintf(err, errlen, "checkpoint: rank 0 could not create %s", dir);
        return -1;
    }
    CkptHeader h = {CKPT_MAGIC, CKPT_VERSION, e->step, e->d.world, e->d.rank, e->lo.dp, e->lo.tp,
                    e->lo.pp, e->lo.vp, e->lo.opt, (long long)e->ps.n_alloc, (long long)e->opt_n,
                    data_get_pos(&e->dl)};
    const void *parts[] = {&h, e->ps.w, e->om, e->ov};
    size_t lens[] = {sizeof h, e->ps.n_alloc * sizeof(float), e->opt_n * sizeof(float),
                     e->opt_n * sizeof(float)};
    char path[1100];
    rank_path(path, sizeof path, dir, e->d.rank);
    rc = atomic_write(path, parts, lens, 4, err, errlen);
    if (agree(rc) != 0) {
        if (rc == 0)
            snprintf(err, errlen, "checkpoint: another rank failed to write its file in %s", dir);
        return -1;
    }
    if (e->d.rank == 0) {
        char text[512];
        int n = snprintf(text, sizeof text,
                         "{\n  \"format\": \"ultraplan.checkpoint/1\",\n  \"step\": %d,\n  \"world\": %d,\n"
                         "  \"dp\": %d, \"tp\": %d, \"pp\": %d, \"vp\": %d,\n  \"files\": \"rank_NNNNN.ckpt\"\n}\n",
                         e->step, e->d.world, e->lo.dp, e->lo.tp, e->lo.pp, e->lo.vp);
        const void *mp[] = {text};
        size_t ml[] = {(size_t)n};
        snprintf(path, sizeof path, "%s/manifest.json", dir);
        rc = atomic_write(path, mp, ml, 1, err, errlen);
    }
    if (agree(rc) != 0) {
        if (rc == 0)
            snprintf(err, errlen, "checkpoint: rank 0 failed to write the manifest in %s", dir);
        return -1;
    }
    return 0;
}

static int load_rank(Exec *e, const char *dir, char *err, int errlen)
{
    char path[1100];
    snprintf(path, sizeof path, "%s/manifest.json", dir);
    FILE *f = fopen(path, "r");
    if (!f) {
        snprintf(err, errlen, "resume: no checkpoint in %s (%s missing)", dir, path);
        return -1;
    }
    char text[1024];
    size_t n = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[n] = 0;
    const char *w = strstr(text, "\"world\":");
    int world = w ? atoi(w + 8) : -1;
    if (!strstr(text, "ultraplan.checkpoint/1") || world != e->d.world) {
        snprintf(err, errlen, "resume: %s is not a checkpoint of a %d-rank run (world %d)", path,
                 e->d.world, world);
        return -1;
    }
    rank_path(path, sizeof path, dir, e->d.rank);
    f = fopen(path, "rb");
    if (!f) {
        snprintf(err, errlen, "resume: cannot open %s", path);
        return -1;
    }
    CkptHeader h;
    int ok = fread(&h, sizeof h, 1, f) == 1 && h.magic == CKPT_MAGIC && h.version == CKPT_VERSION;
    if (!ok || h.rank != e->d.rank || h.dp != e->lo.dp || h.tp != e->lo.tp || h.pp != e->lo.pp ||
        h.vp != e->lo.vp || h.opt != (int)e->lo.opt || h.n_alloc != (long long)e->ps.n_alloc ||
        h.opt_n != (long long)e->opt_n) {
        fclose(f);
        snprintf(err, errlen, "resume: %s does not match this plan's layout and model", path);
        return -1;
    }
    ok = fread(e->ps.w, sizeof(float), e->ps.n_alloc, f) == e->ps.n_alloc &&
         fread(e->om, sizeof(float), e->opt_n, f) == e->opt_n &&
         fread(e->ov, sizeof(float), e->opt_n, f) == e->opt_n;
    fclose(f);
    if (!ok) {
        snprintf(err, errlen, "resume: %s is truncated", path);
        return -1;
    }
    if (data_set_pos(&e->dl, h.pos, err, errlen) != 0)
        return -1;
    e->step = h.step;
    return 0;
}

int exec_load(Exec *e, const char *dir, char *err, int errlen)
{
    int rc = load_rank(e, dir, err, errlen);
    if (agree(rc) != 0) {
        if (rc == 0)
            snprintf(err, errlen, "resume: another rank could not load its part of %s", dir);
        return -1;
    }
    return 0;
}
