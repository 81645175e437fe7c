/* data.c — the token data loader (see data.h for the format and the order). */
#define _FILE_OFFSET_BITS 64
#include "data.h"

#include <errno.h>
#include <glob.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>

static int fail(char *err, size_t errlen, const char *fmt, ...) {
    if (err && errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return -1;
}

static int ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* fills f from the file's header and size; the path is already set */
static int probe_file(DataFile *f, char *err, size_t errlen) {
    struct stat st;
    if (stat(f->path, &st) != 0)
        return fail(err, errlen, "data: cannot open '%s': %s", f->path, strerror(errno));
    if (!S_ISREG(st.st_mode))
        return fail(err, errlen, "data: '%s' is not a regular file", f->path);
    long long size = (long long)st.st_size;
    if (!ends_with(f->path, ".bin")) {   // plain text, one token per byte
        f->text = 1;
        f->tsize = 1;
        f->ntok = size;
        return 0;
    }
    FILE *fp = fopen(f->path, "rb");
    if (!fp) return fail(err, errlen, "data: cannot open '%s': %s", f->path, strerror(errno));
    int32_t hdr[DATA_HEADER_INTS];
    size_t got = fread(hdr, sizeof hdr, 1, fp);
    fclose(fp);
    if (got != 1)
        return fail(err, errlen, "data: '%s' is truncated: %lld bytes, shorter than the "
                    "%zu-byte header", f->path, size, sizeof hdr);
    if (hdr[0] == DATA_MAGIC_U16) f->tsize = 2;
    else if (hdr[0] == DATA_MAGIC_U32) f->tsize = 4;
    else return fail(err, errlen, "data: '%s' has bad magic %d (want %d for uint16 or %d "
                     "for uint32 tokens)", f->path, hdr[0], DATA_MAGIC_U16, DATA_MAGIC_U32);
    if (hdr[2] < 0)
        return fail(err, errlen, "data: '%s' declares a negative token count %d", f->path, hdr[2]);
    f->text = 0;
    f->ntok = hdr[2];
    long long want = (long long)sizeof hdr + f->ntok * f->tsize;
    if (size < want)
        return fail(err, errlen, "data: '%s' is truncated: header declares %lld tokens "
                    "(%lld bytes), file has %lld bytes", f->path, f->ntok, want, size);
    if (size > want)
        return fail(err, errlen, "data: '%s' has %lld bytes after the %lld tokens its "
                    "header declares", f->path, size - want, f->ntok);
    return 0;
}

static int find_files(DataLoader *dl, const char *pattern, char *err, size_t errlen) {
    glob_t g;
    int rc = glob(pattern, 0, NULL, &g);
    if (rc == GLOB_NOMATCH || (rc == 0 && g.gl_pathc == 0)) {
        if (rc == 0) globfree(&g);
        if (strpbrk(pattern, "*?[") == NULL)
            return fail(err, errlen, "data: cannot open '%s': %s", pattern, strerror(ENOENT));
        return fail(err, errlen, "data: no file matches '%s'", pattern);
    }
    if (rc != 0) return fail(err, errlen, "data: cannot expand '%s' (glob error %d)", pattern, rc);
    dl->nfiles = (int)g.gl_pathc;
    dl->files = calloc(g.gl_pathc, sizeof *dl->files);
    char **names = malloc(g.gl_pathc * sizeof *names);
    if (!dl->files || !names) {
        free(names);
        globfree(&g);
        return fail(err, errlen, "data: out of memory listing '%s'", pattern);
    }
    for (size_t i = 0; i < g.gl_pathc; i++) names[i] = g.gl_pathv[i];
    qsort(names, g.gl_pathc, sizeof *names, cmp_str);   // glob's order follows the locale
    int bad = 0;
    for (size_t i = 0; i < g.gl_pathc; i++)
        if (!(dl->files[i].path = strdup(names[i]))) bad = 1;
    free(names);
    globfree(&g);
    return bad ? fail(err, errlen, "data: out of memory listing '%s'", pattern) : 0;
}

int data_init(DataLoader *dl, const char *pattern, int B, int T, int dp_rank,
              int dp_size, int vocab, char *err, size_t errlen) {
    memset(dl, 0, sizeof *dl);
    dl->fp_index = -1;
    if (B <= 0 || T <= 0 || dp_size <= 0 || dp_rank < 0 || dp_rank >= dp_size || vocab < 0)
        return fail(err, errlen, "data: bad loader shape B=%d T=%d dp_rank=%d dp_size=%d "
                    "vocab=%d", B, T, dp_rank, dp_size, vocab);
    dl->B = B;
    dl->T = T;
    dl->dp_rank = dp_rank;
    dl->dp_size = dp_size;
    dl->vocab = vocab;
    if (find_files(dl, pattern, err, errlen) != 0) goto fail;
    long long need = (long long)dp_size * B * T + 1;
    for (int i = 0; i < dl->nfiles; i++) {
        if (probe_file(&dl->files[i], err, errlen) != 0) goto fail;
        if (dl->files[i].ntok < need) {
            fail(err, errlen, "data: '%s' holds %lld tokens, fewer than one global batch "
                 "needs (dp_size·B·T + 1 = %lld)", dl->files[i].path, dl->files[i].ntok, need);
            goto fail;
        }
    }
    dl->buf = malloc(((size_t)B * T + 1) * 4);
    if (!dl->buf) {
        fail(err, errlen, "data: out of memory for a %dx%d batch", B, T);
        goto fail;
    }
    return 0;
fail:
    data_free(dl);
    return -1;
}

/* reads n tokens of file fi from token index at into dst, checking the vocab */
static int read_tokens(DataLoader *dl, int fi, long long at, size_t n, int *dst,
                       char *err, size_t errlen) {
    DataFile *f = &dl->files[fi];
    if (dl->fp_index != fi) {
        if (dl->fp) fclose(dl->fp);
        dl->fp_index = -1;
        if (!(dl->fp = fopen(f->path, "rb")))
            return fail(err, errlen, "data: cannot open '%s': %s", f->path, strerror(errno));
        dl->fp_index = fi;
    }
    long long byte = (f->text ? 0 : DATA_HEADER_INTS * 4) + at * f->tsize;
    if (fseeko(dl->fp, (off_t)byte, SEEK_SET) != 0 || fread(dl->buf, f->tsize, n, dl->fp) != n)
        return fail(err, errlen, "data: cannot read %zu tokens at %lld from '%s' (file "
                    "changed since it was opened?)", n, at, f->path);
    long long limit = dl->vocab > 0 ? dl->vocab : (long long)INT32_MAX + 1;
    for (size_t i = 0; i < n; i++) {
        long long tok;
        if (f->tsize == 1) tok = dl->buf[i];
        else if (f->tsize == 2) { uint16_t u; memcpy(&u, dl->buf + 2 * i, 2); tok = u; }
        else { uint32_t u; memcpy(&u, dl->buf + 4 * i, 4); tok = u; }
        if (tok >= limit)
            return fail(err, errlen, "data: '%s': token %lld at index %lld is outside the "
                        "vocabulary (%lld)", f->path, tok, at + (long long)i, limit);
        dst[i] = (int)tok;
    }
    return 0;
}

int data_next_batch(DataLoader *dl, int *inputs, int *targets, char *err, size_t errlen) {
    size_t bt = (size_t)dl->B * dl->T;
    long long global = (long long)dl->dp_size * (long long)bt;
    DataPos p = dl->pos;
    if (p.offset + global + 1 > dl->files[p.shard].ntok) {   // next file, or wrap
        p.offset = 0;
        if (++p.shard == dl->nfiles) {
            p.shard = 0;
            p.epoch++;
        }
    }
    // the slice is bt + 1 tokens; read it into inputs and a spare last target
    int *tmp = malloc((bt + 1) * sizeof *tmp);
    if (!tmp) return fail(err, errlen, "data: out of memory");
    int rc = read_tokens(dl, p.shard, p.offset + (long long)dl->dp_rank * (long long)bt,
                         bt + 1, tmp, err, errlen);
    if (rc == 0) {
        memcpy(inputs, tmp, bt * sizeof *tmp);
        memcpy(targets, tmp + 1, bt * sizeof *tmp);
        p.offset += global;
        dl->pos = p;
    }
    free(tmp);
    return rc;
}

DataPos data_get_pos(const DataLoader *dl) { return dl->pos; }

int data_set_pos(DataLoader *dl, DataPos pos, char *err, size_t errlen) {
    if (pos.shard < 0 || pos.shard >= dl->nfiles)
        return fail(err, errlen, "data: position names file %d, but the pattern has %d files",
                    pos.shard, dl->nfiles);
    if (pos.offset < 0 || pos.offset > dl->files[pos.shard].ntok || pos.epoch < 0)
        return fail(err, errlen, "data: position offset %lld (epoch %lld) is outside '%s' "
                    "(%lld tokens)", pos.offset, pos.epoch, dl->files[pos.shard].path,
                    dl->files[pos.shard].ntok);
    dl->pos = pos;
    return 0;
}

long long data_total_tokens(const DataLoader *dl) {
    long long n = 0;
    for (int i = 0; i < dl->nfiles; i++) n += dl->files[i].ntok;
    return n;
}

void data_free(DataLoader *dl) {
    if (!dl) return;
    if (dl->fp) fclose(dl->fp);
    for (int i = 0; i < dl->nfiles && dl->files; i++) free(dl->files[i].path);
    free(dl->files);
    free(dl->buf);
    memset(dl, 0, sizeof *dl);
    dl->fp_index = -1;
}
