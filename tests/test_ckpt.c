/* test_ckpt.c — the checkpoint format and commit protocol (ckpt.h) on host
 * buffers, as either backend hands them over, on one rank (MPI singleton):
 * CRC-32 against zlib's check value; save, a second save that removes the
 * first step, load back bit for bit; the file's layout (header, then w, m,
 * v) and the manifest's fields; a pinned CRC of a fixed state (the format
 * must not drift: a change here breaks every checkpoint users hold); and
 * the refusals (corrupted, truncated, missing, another layout, another
 * world), each leaving the buffers untouched. No GPU. Returns non-zero on
 * any failed check. */
#include <cjson/cJSON.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ckpt.h"
#include "fileio.h"
#include "exec.h"

static int fails;
#define CHECK(cond, ...) do { if (!(cond)) { fails++; printf("FAIL: " __VA_ARGS__); printf("\n"); } } while (0)

/* The CRC-32 of format_checks' step-5 rank file (8088 bytes: an 88-byte
 * header, then w, m, v). The pre-CkptState ckpt.c's exec_save, fed the same
 * state through an Exec, wrote a file with this CRC too. */
#define PINNED_CRC 1400761625u

enum { NW = 1000, NO = 500 };   // weights, moment shard (as ZeRO-1 over dp 2)
static float w[NW], m[NO], v[NO], w2[NW], m2[NO], v2[NO];

static CkptState state(int step, float *pw, float *pm, float *pv)
{
    CkptState s = {.step = step, .world = 1, .rank = 0, .dp = 2, .tp = 1, .pp = 1, .vp = 1, .opt = 1,
                   .n_alloc = NW, .opt_n = NO, .pos = {.shard = 0, .offset = 1234 + step, .epoch = 1},
                   .w = pw, .m = pm, .v = pv};
    return s;
}

static void fill(int seed)
{
    for (int i = 0; i < NW; i++)
        w[i] = 0.001f * (float)((i * 7919 + seed) % 2003) - 1.0f;
    for (int i = 0; i < NO; i++)
        m[i] = 1e-4f * (float)(i + seed), v[i] = 1e-8f * (float)(i * i + seed);
}

static unsigned char *slurp(const char *path, long *n)
{
    char err[256];
    size_t len = 0;
    unsigned char *b = (unsigned char *)util_slurp(path, 0, &len, err, sizeof err);
    *n = b ? (long)len : -1;
    return b;
}

static void put(const char *path, const unsigned char *b, long n)
{
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(b, 1, n, f) != (size_t)n)
        printf("cannot write %s\n", path);
    if (f)
        fclose(f);
}

static void crc_checks(void)
{
    CHECK(ckpt_crc32(0, "123456789", 9) == 0xCBF43926u, "crc32(\"123456789\") = %08x", ckpt_crc32(0, "123456789", 9));
    CHECK(ckpt_crc32(ckpt_crc32(0, "12345", 5), "6789", 4) == 0xCBF43926u, "crc32 in pieces");
}

/* Load into sentinel buffers expecting a refusal that says want. */
static void expect_refusal(CkptState s, const char *dir, const char *want, const char *what)
{
    char err[1024] = "";
    for (int i = 0; i < NW; i++)
        w2[i] = -7;
    s.w = w2, s.m = m2, s.v = v2;
    int rc = ckpt_load(&s, dir, NULL, err, sizeof err);
    CHECK(rc != 0 && strstr(err, want), "%s: rc %d, err \"%s\" (want \"%s\")", what, rc, err, want);
    CHECK(w2[0] == -7 && w2[NW - 1] == -7, "%s: buffers touched by a refused load", what);
}

static void format_checks(const char *dir)
{
    char err[1024], path[1400], mpath[1400], old[1400];
    snprintf(path, sizeof path, "%s/step-000005/rank_00000.ckpt", dir);
    snprintf(mpath, sizeof mpath, "%s/manifest.json", dir);
    snprintf(old, sizeof old, "%s/step-000003", dir);

    fill(3);
    CkptState s = state(3, w, m, v);
    CHECK(ckpt_save(&s, dir, err, sizeof err) == 0, "save step 3: %s", err);
    CHECK(access(old, F_OK) == 0, "step-000003 written");
    fill(5);
    s = state(5, w, m, v);
    CHECK(ckpt_save(&s, dir, err, sizeof err) == 0, "save step 5: %s", err);
    CHECK(access(old, F_OK) != 0, "step-000003 removed once step 5 is committed");

    /* the file: header, then w, m, v as raw fp32 */
    long n, data = (long)sizeof(float) * (NW + 2 * NO);
    unsigned char *b = slurp(path, &n);
    CHECK(b && n > data, "rank file %s: %ld bytes", path, n);
    if (b && n > data) {
        long h = n - data;
        unsigned magic, version;
        memcpy(&magic, b, 4), memcpy(&version, b + 4, 4);
        CHECK(magic == 0x4B435055u && version == 2, "header magic %08x version %u", magic, version);
        CHECK(memcmp(b + h, w, sizeof w) == 0 && memcmp(b + h + sizeof w, m, sizeof m) == 0 &&
                  memcmp(b + h + sizeof w + sizeof m, v, sizeof v) == 0, "file body is w, m, v");
    }
    long mn;
    unsigned char *mt = slurp(mpath, &mn);
    cJSON *j = mt ? cJSON_Parse((char *)mt) : NULL;
    const cJSON *f0 = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "files"), 0);
    CHECK(j && !strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(j, "format")), "ultraplan.checkpoint/2") &&
              cJSON_GetObjectItem(j, "step")->valueint == 5 && cJSON_GetObjectItem(j, "dp")->valueint == 2 &&
              !strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(j, "dir")), "step-000005") &&
              cJSON_GetObjectItem(f0, "bytes")->valuedouble == (double)n,
          "manifest fields");
    /* pinned: the CRC-32 of this fixed state's file (x86-64 struct layout) */
    double crc = cJSON_GetNumberValue(cJSON_GetObjectItem(f0, "crc32"));
    printf("rank file %ld bytes, crc32 %.0f\n", n, crc);
    CHECK(crc == PINNED_CRC, "the format changed: crc32 %.0f, pinned %.0f", crc, (double)PINNED_CRC);
    cJSON_Delete(j);
    free(mt);

    /* load back */
    CkptState r = state(0, w2, m2, v2);
    memset(&r.pos, 0, sizeof r.pos);
    CHECK(ckpt_load(&r, dir, NULL, err, sizeof err) == 0, "load: %s", err);
    CHECK(r.step == 5 && r.pos.offset == 1239 && r.pos.epoch == 1, "step %d, data offset %lld", r.step,
          r.pos.offset);
    CHECK(memcmp(w, w2, sizeof w) == 0 && memcmp(m, m2, sizeof m) == 0 && memcmp(v, v2, sizeof v) == 0,
          "loaded buffers bit-identical");

    /* refusals */
    CkptState t = state(0, w2, m2, v2);
    t.tp = 2;
    expect_refusal(t, dir, "does not match this plan's layout and model", "another layout");
    t = state(0, w2, m2, v2);
    t.opt_n = NO / 2;
    expect_refusal(t, dir, "does not match", "another shard size");
    t = state(0, w2, m2, v2);
    t.world = 2;
    expect_refusal(t, dir, "1-rank run, this run has 2 ranks", "another world");
    if (b && n > data) {
        b[n - 3] ^= 0x40;   // a bit of v
        put(path, b, n);
        expect_refusal(state(0, w2, m2, v2), dir, "checksum mismatch", "corrupted");
        b[n - 3] ^= 0x40;
        put(path, b, n / 2);
        expect_refusal(state(0, w2, m2, v2), dir, "the manifest says", "truncated");
        unlink(path);
        expect_refusal(state(0, w2, m2, v2), dir, "No such file", "missing");
        put(path, b, n);
        CHECK(ckpt_load(&r, dir, NULL, err, sizeof err) == 0, "restored file loads again: %s", err);
    }
    free(b);
    put(mpath, (const unsigned char *)"{\"format\": 3}", 13);
    expect_refusal(state(0, w2, m2, v2), dir, "not a readable ultraplan.checkpoint/2 manifest", "bad manifest");
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    char dir[] = "/tmp/test_ckpt_XXXXXX";
    if (!mkdtemp(dir)) {
        printf("mkdtemp failed\n");
        return 1;
    }
    crc_checks();
    format_checks(dir);
    char cmd[200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        printf("note: could not remove %s\n", dir);
    MPI_Finalize();
    printf("%s\n", fails ? "FAILED" : "ok");
    return fails ? 1 : 0;
}
