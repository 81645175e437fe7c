/* test_ckpt.c — the checkpoint format and commit protocol (ckpt.h) on host
 * buffers, as either backend hands them over, on one rank (MPI singleton):
 * CRC-32 against zlib's check value; save, a second save that removes the
 * first step, load back bit for bit; the file's layout (header, then w, m,
 * v) and the manifest's fields; a pinned CRC of a fixed state (the format
 * must not drift: a change here breaks every checkpoint users hold); and
 * the refusals (corrupted, truncated, missing, another layout, another
 * world, another model shape of the same size, every crafted manifest and
 * header field, symbolic links), each leaving the buffers untouched; the
 * cleanup of old steps (only what ckpt.c wrote, never through a link, never
 * outside DIR, 7-digit steps too); a failed manifest write removing the
 * uncommitted step. No GPU. Returns non-zero on any failed check. */
#include <cjson/cJSON.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ckpt.h"
#include "fileio.h"
#include "exec.h"

static int fails;
#define CHECK(cond, ...) do { if (!(cond)) { fails++; printf("FAIL: " __VA_ARGS__); printf("\n"); } } while (0)

/* The CRC-32 of format_checks' step-5 rank file (8088 bytes: an 88-byte
 * header, then w, m, v), format version 3 (the header's last word is the
 * CRC-32 of the model shape; version 2, whose pinned CRC was 1400761625, had
 * 0 there). */
#define PINNED_CRC 775906027u

enum { NW = 1000, NO = 500 };   // weights, moment shard (as ZeRO-1 over dp 2)
static float w[NW], m[NO], v[NO], w2[NW], m2[NO], v2[NO];

/* The shape the states claim: heads 4 x 64; heads8 is 8 x 32, the same
 * parameter count. */
static ModelSpec model = {.name = "test", .L = 2, .h = 256, .a = 4, .g = 4, .d_head = 64, .f = 1024, .vocab = 256,
                          .s = 32, .mlp = MLP_GELU, .norm = NORM_LAYERNORM, .pos = POS_LEARNED, .bias = 1, .tied = 1};
static ModelSpec heads8;
static Layout layout = {.dp = 2, .tp = 1, .pp = 1, .vp = 1, .cp = 1, .layers = {2}};

static CkptState state(int step, float *pw, float *pm, float *pv)
{
    CkptState s = {.step = step, .world = 1, .rank = 0, .dp = 2, .tp = 1, .pp = 1, .vp = 1, .opt = 1,
                   .n_alloc = NW, .opt_n = NO, .pos = {.shard = 0, .offset = 1234 + step, .epoch = 1},
                   .model = &model, .lo = &layout, .w = pw, .m = pm, .v = pv};
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
    if (getenv("TEST_CKPT_VERBOSE"))
        printf("%s: %s\n", what, err);
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
        CHECK(magic == 0x4B435055u && version == 3, "header magic %08x version %u", magic, version);
        CHECK(memcmp(b + h, w, sizeof w) == 0 && memcmp(b + h + sizeof w, m, sizeof m) == 0 &&
                  memcmp(b + h + sizeof w + sizeof m, v, sizeof v) == 0, "file body is w, m, v");
    }
    long mn;
    unsigned char *mt = slurp(mpath, &mn);
    cJSON *j = mt ? cJSON_Parse((char *)mt) : NULL;
    const cJSON *f0 = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "files"), 0);
    CHECK(j && !strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(j, "format")), "ultraplan.checkpoint/3") &&
              cJSON_GetObjectItem(j, "step")->valueint == 5 && cJSON_GetObjectItem(j, "dp")->valueint == 2 &&
              !strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(j, "dir")), "step-000005") &&
              !strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(j, "optimizer")), "zero1") &&
              !strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(j, "model")),
                      "L2 h256 a4 g4 d64 f1024 V256/128 s32 gelu layernorm learned bias1 tied1 split 2") &&
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
    expect_refusal(state(0, w2, m2, v2), dir, "not a readable ultraplan.checkpoint/3 manifest", "bad manifest");
}

/* ---- every field of the manifest and the header ------------------------------ */

static void sh(const char *cmd)
{
    if (system(cmd) != 0)
        printf("note: '%s' failed\n", cmd);
}

/* dir/manifest.json as good with key (top level, or "f.KEY" in files[0])
 * set to the JSON value `json`. */
static void mutate(const char *dir, const char *good, const char *key, const char *json)
{
    cJSON *j = cJSON_Parse(good), *v = cJSON_Parse(json);
    cJSON *o = strncmp(key, "f.", 2) == 0 ? cJSON_GetArrayItem(cJSON_GetObjectItem(j, "files"), 0) : j;
    cJSON_ReplaceItemInObjectCaseSensitive(o, key + (o == j ? 0 : 2), v);
    char *t = cJSON_Print(j), path[1400];
    snprintf(path, sizeof path, "%s/manifest.json", dir);
    put(path, (const unsigned char *)t, (long)strlen(t));
    free(t);
    cJSON_Delete(j);
}

/* The rank file of step 5 with the header's 32-bit word at off set to val
 * and its CRC (header and manifest) made valid again: a crafted file. */
static void craft_header(const char *dir, const char *good, const unsigned char *file, long n, long off, int val)
{
    unsigned char *b = malloc(n);
    memcpy(b, file, n);
    long h = n - (long)sizeof(float) * (NW + 2 * NO);
    memcpy(b + off, &val, 4);
    memset(b + h - 8, 0, 4);                 // the CRC field: the last but one word of the header
    uint32_t crc = ckpt_crc32(0, b, n);
    memcpy(b + h - 8, &crc, 4);
    char path[1400], num[32];
    snprintf(path, sizeof path, "%s/step-000005/rank_00000.ckpt", dir);
    put(path, b, n);
    snprintf(num, sizeof num, "%u", crc);
    mutate(dir, good, "f.crc32", num);
    free(b);
}

static void field_checks(const char *base)
{
    char dir[1200], err[1024], mpath[1400], rpath[1400], cmd[4000];
    snprintf(dir, sizeof dir, "%s/fields", base);
    snprintf(mpath, sizeof mpath, "%s/manifest.json", dir);
    snprintf(rpath, sizeof rpath, "%s/step-000005/rank_00000.ckpt", dir);
    fill(5);
    CkptState s = state(5, w, m, v);
    CHECK(ckpt_save(&s, dir, err, sizeof err) == 0, "fields: save: %s", err);
    long mn, n;
    char *good = (char *)slurp(mpath, &mn);
    unsigned char *file = slurp(rpath, &n);
    if (!good || !file) {
        CHECK(0, "fields: cannot read back the checkpoint");
        return;
    }
    cJSON *gj = cJSON_Parse(good);
    double crc = cJSON_GetNumberValue(
        cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(gj, "files"), 0), "crc32"));
    cJSON_Delete(gj);
    char big[64];
    snprintf(big, sizeof big, "%.0f", crc + 4294967296.0);
    /* a step directory inside DIR, the step's own */
    snprintf(cmd, sizeof cmd, "cp '%s' '%s/rank_00000.ckpt'", rpath, dir);   // what "dir": ".." would load
    sh(cmd);
    const struct { const char *key, *json, *want; } bad[] = {
        {"dir", "\"..\"", "it must be \"step-000005\""},
        {"dir", "\".\"", "it must be \"step-000005\""},
        {"dir", "\"/tmp\"", "it must be \"step-000005\""},
        {"dir", "\"step-000005/../step-000005\"", "it must be \"step-000005\""},
        {"dir", "\"step-000004\"", "it must be \"step-000005\""},
        {"step", "-1000000", "no valid \"step\""},
        {"step", "5.5", "no valid \"step\""},
        {"step", "\"5\"", "no valid \"step\""},
        {"f.crc32", big, "no exact \"crc32\""},
        {"f.crc32", "-1", "no exact \"crc32\""},
        {"f.bytes", "1e300", "no exact \"bytes\""},
        {"f.bytes", "8088.5", "no exact \"bytes\""},
        {"f.name", "\"rank_00001.ckpt\"", "files[0] does not name its rank's file"},
        {"optimizer", "\"zero0\"", "does not match this plan's layout and model"},
        {"vp", "2", "does not match this plan's layout and model"},
        {"world", "0", "no valid \"world\""},
        {"model", "\"L2 h256 a8 g8 d32 f1024 V256/128 s32 gelu layernorm learned bias1 tied1 split 2\"",
         "is a checkpoint of model L2 h256 a8"},
        {"format", "\"ultraplan.checkpoint/2\"", "written by another version of ultraplan"},
        {"checksum", "\"md5\"", "no \"checksum\""},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        char what[200];
        snprintf(what, sizeof what, "manifest %s = %s", bad[i].key, bad[i].json);
        mutate(dir, good, bad[i].key, bad[i].json);
        expect_refusal(state(0, w2, m2, v2), dir, bad[i].want, what);
    }
    /* a duplicate key: the first would win in cJSON */
    char *dup = malloc(mn + 32);
    snprintf(dup, mn + 32, "{\"step\": 4,%s", good + 1);
    put(mpath, (unsigned char *)dup, (long)strlen(dup));
    free(dup);
    expect_refusal(state(0, w2, m2, v2), dir, "has the key \"step\" twice", "duplicate key");

    /* the model shape, not the parameter count: heads 4 x 64 into 8 x 32 */
    put(mpath, (unsigned char *)good, mn);
    CkptState t = state(0, w2, m2, v2);
    t.model = &heads8;
    expect_refusal(t, dir, "is a checkpoint of model L2 h256 a4 g4 d64", "heads 4x64 into 8x32");

    /* crafted headers with valid checksums */
    craft_header(dir, good, file, n, 8, -1000000);
    expect_refusal(state(0, w2, m2, v2), dir, "belongs to another rank or step", "header step -1000000");
    craft_header(dir, good, file, n, 12, 2);
    expect_refusal(state(0, w2, m2, v2), dir, "belongs to another rank or step", "header world 2");
    craft_header(dir, good, file, n, 4, 2);
    expect_refusal(state(0, w2, m2, v2), dir, "is a version-2 checkpoint file", "version-2 file");
    long shape_off = n - (long)sizeof(float) * (NW + 2 * NO) - 4;
    craft_header(dir, good, file, n, (int)shape_off, 12345);
    expect_refusal(state(0, w2, m2, v2), dir, "does not match this plan's layout and model", "header shape");
    put(rpath, file, n);
    put(mpath, (unsigned char *)good, mn);
    CkptState r = state(0, w2, m2, v2);
    CHECK(ckpt_load(&r, dir, NULL, err, sizeof err) == 0 && r.step == 5, "fields: the good checkpoint loads: %s",
          err);

    /* symbolic links: a step directory or a rank file pointing elsewhere */
    snprintf(cmd, sizeof cmd, "cd '%s' && mv step-000005 ../elsewhere && ln -s ../elsewhere step-000005", dir);
    sh(cmd);
    expect_refusal(state(0, w2, m2, v2), dir, "its step directory is a symbolic link", "symlinked step dir");
    snprintf(cmd, sizeof cmd, "cd '%s' && rm step-000005 && mkdir step-000005 && "
             "ln -s ../../elsewhere/rank_00000.ckpt step-000005/rank_00000.ckpt", dir);
    sh(cmd);
    expect_refusal(state(0, w2, m2, v2), dir, "rank_00000.ckpt: is a symbolic link", "symlinked rank file");
    free(good);
    free(file);
}

/* ---- cleanup: only what ckpt.c wrote ------------------------------------------ */

static int exists(const char *base, const char *rel)
{
    char p[1400];
    struct stat st;
    snprintf(p, sizeof p, "%s/%s", base, rel);
    return lstat(p, &st) == 0;
}

static void cleanup_checks(const char *base)
{
    char dir[1200], err[1024], cmd[4000];
    snprintf(dir, sizeof dir, "%s/clean", base);
    snprintf(cmd, sizeof cmd,
             "cd '%s' && mkdir -p outside clean && echo precious > outside/rank_00000.ckpt && cd clean && "
             "ln -s ../outside step-000001 && "                                  // a link to elsewhere
             "mkdir step-000002 && : > step-000002/rank_00000.ckpt && echo mine > step-000002/notes.txt && "
             "mkdir step-000003 && : > step-000003/rank_00000.ckpt.tmp.123.0 && "   // a killed write
             "mkdir step-000004 && echo mine > step-000004/rank_notes && "         // rank_ but not ours
             "mkdir step-000006 && ln -s ../../outside/rank_00000.ckpt step-000006/rank_00000.ckpt && "
             "mkdir step-1000000 && : > step-1000000/rank_00000.ckpt && "          // 7 digits
             "mkdir step-0000007 && : > step-0000007/rank_00000.ckpt && "          // not a name we write
             "mkdir step-000005 && : > step-000005/rank_00000.ckpt.tmp.9.1 && "    // the kept step's leftover
             ": > manifest.json.tmp.4242.0",                                      // killed manifest write
             base);
    sh(cmd);
    fill(5);
    CkptState s = state(5, w, m, v);
    CHECK(ckpt_save(&s, dir, err, sizeof err) == 0, "cleanup: save step 5: %s", err);
    CHECK(exists(base, "outside/rank_00000.ckpt"), "cleanup followed a symlinked step directory out of DIR");
    CHECK(exists(dir, "step-000001"), "cleanup removed a symbolic link it did not make");
    CHECK(exists(dir, "step-000002/notes.txt") && exists(dir, "step-000002/rank_00000.ckpt"),
          "cleanup touched a step directory holding a user's file");
    CHECK(!exists(dir, "step-000003"), "cleanup left a step directory of temporaries");
    CHECK(exists(dir, "step-000004/rank_notes"), "cleanup removed rank_notes, which it did not write");
    CHECK(exists(dir, "step-000006/rank_00000.ckpt"), "cleanup removed a link named like a rank file");
    CHECK(!exists(dir, "step-1000000"), "cleanup left the 7-digit step-1000000");
    CHECK(exists(dir, "step-0000007"), "cleanup removed step-0000007, a name it never writes");
    CHECK(!exists(dir, "step-000005/rank_00000.ckpt.tmp.9.1"), "cleanup left a temporary in the kept step");
    CHECK(exists(dir, "step-000005/rank_00000.ckpt"), "the new checkpoint is gone");
    CHECK(!exists(dir, "manifest.json.tmp.4242.0"), "cleanup left manifest.json.tmp.4242.0");

    /* a link planted at the next step's directory is not written through */
    snprintf(cmd, sizeof cmd, "cd '%s' && ln -s ../outside step-000008", dir);
    sh(cmd);
    s = state(8, w, m, v);
    CHECK(ckpt_save(&s, dir, err, sizeof err) != 0 && strstr(err, "step-000008 exists and is not a directory"),
          "save through a symlinked step directory: %s", err);
    char path[1400];
    snprintf(path, sizeof path, "%s/outside/rank_00000.ckpt", base);
    long n;
    unsigned char *b = slurp(path, &n);
    CHECK(b && n == 9 && !memcmp(b, "precious\n", 9), "the file behind the link was overwritten");
    free(b);

    /* a 7-digit step is written, loaded and cleaned up in turn */
    snprintf(cmd, sizeof cmd, "rm -f '%s/step-000008'", dir);
    sh(cmd);
    s = state(1234567, w, m, v);
    CHECK(ckpt_save(&s, dir, err, sizeof err) == 0 && exists(dir, "step-1234567/rank_00000.ckpt") &&
              !exists(dir, "step-000005"), "7-digit step 1234567 saved, step 5 removed: %s", err);
    CkptState r = state(0, w2, m2, v2);
    CHECK(ckpt_load(&r, dir, NULL, err, sizeof err) == 0 && r.step == 1234567, "7-digit step loads: %s", err);
    s = state(1234568, w, m, v);
    CHECK(ckpt_save(&s, dir, err, sizeof err) == 0 && !exists(dir, "step-1234567"), "step-1234567 removed: %s",
          err);
}

/* ---- a failed manifest write ---------------------------------------------------- */

static void manifest_failure_checks(const char *base)
{
    char dir[1200], err[1024], cmd[4000];
    snprintf(dir, sizeof dir, "%s/mfail", base);
    fill(3);
    CkptState s = state(3, w, m, v);
    CHECK(ckpt_save(&s, dir, err, sizeof err) == 0, "mfail: save step 3: %s", err);
    /* a non-empty directory where the manifest goes: its rename fails */
    snprintf(cmd, sizeof cmd, "cd '%s' && mv manifest.json m.saved && mkdir manifest.json && : > manifest.json/x",
             dir);
    sh(cmd);
    s = state(4, w, m, v);
    CHECK(ckpt_save(&s, dir, err, sizeof err) != 0 && strstr(err, "manifest.json"), "mfail: save step 4: %s", err);
    CHECK(!exists(dir, "step-000004"), "a failed manifest write left the uncommitted step-000004");
    CHECK(exists(dir, "step-000003/rank_00000.ckpt"), "a failed manifest write removed the committed step 3");
    snprintf(cmd, sizeof cmd, "cd '%s' && rm -r manifest.json && mv m.saved manifest.json", dir);
    sh(cmd);
    CkptState r = state(0, w2, m2, v2);
    CHECK(ckpt_load(&r, dir, NULL, err, sizeof err) == 0 && r.step == 3, "mfail: step 3 still loads: %s", err);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    char dir[] = "/tmp/test_ckpt_XXXXXX";
    if (!mkdtemp(dir)) {
        printf("mkdtemp failed\n");
        return 1;
    }
    heads8 = model;
    heads8.a = heads8.g = 8, heads8.d_head = 32;
    crc_checks();
    format_checks(dir);
    field_checks(dir);
    cleanup_checks(dir);
    manifest_failure_checks(dir);
    char cmd[200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        printf("note: could not remove %s\n", dir);
    MPI_Finalize();
    printf("%s\n", fails ? "FAILED" : "ok");
    return fails ? 1 : 0;
}
