/* fileio.c — whole-file reads and atomic writes (see fileio.h). */
#include "fileio.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

char *util_slurp(const char *path, size_t max_bytes, size_t *len, char *err, int errlen)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err, errlen, "%s: cannot open: %s", path, strerror(errno));
        return NULL;
    }
    struct stat sb;
    if (fstat(fileno(f), &sb) == 0 && S_ISDIR(sb.st_mode)) {
        fclose(f);
        snprintf(err, errlen, "%s: is a directory, expected a file", path);
        return NULL;
    }
    size_t cap = 1 << 14, n = 0;
    char *buf = malloc(cap);
    int too_big = 0;
    while (buf) {
        n += fread(buf + n, 1, cap - 1 - n, f);
        if (max_bytes && n > max_bytes) {
            too_big = 1;
            break;
        }
        if (n < cap - 1)
            break;
        char *grown = realloc(buf, cap * 2);
        if (!grown) {
            free(buf);
            buf = NULL;
            break;
        }
        buf = grown;
        cap *= 2;
    }
    int bad = ferror(f), why = errno;
    fclose(f);
    if (!buf || bad || too_big) {
        if (too_big)
            snprintf(err, errlen, "%s: larger than %zu bytes, the most it reads", path, max_bytes);
        else
            snprintf(err, errlen, "%s: cannot read: %s", path, buf ? strerror(why ? why : EIO) : "out of memory");
        free(buf);
        return NULL;
    }
    buf[n] = '\0';
    if (len)
        *len = n;
    return buf;
}

static int write_all(int fd, const void *data, size_t len)
{
    const char *p = data;
    size_t off = 0;
    while (off < len) {
        ssize_t w = write(fd, p + off, len - off);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        off += (size_t)w;
    }
    return 0;
}

/* The temporary name: beside the target, so the rename stays on one file
 * system; pid and a counter so concurrent writers never share one. */
static int open_temp(const char *path, char *tmp, size_t n)
{
    static unsigned counter;
    for (int tries = 0; tries < 100; tries++) {
        snprintf(tmp, n, "%s.tmp.%ld.%u", path, (long)getpid(), counter++);
        int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
        if (fd >= 0 || errno != EEXIST)
            return fd;
    }
    return -1;
}

int util_atomic_parts(const char *path, const void *const *parts, const size_t *lens, int nparts,
                      size_t kill_after, const char **stage)
{
    *stage = "create";
    size_t n = strlen(path) + 48;
    char *tmp = malloc(n);
    if (!tmp)
        return ENOMEM;
    int fd = open_temp(path, tmp, n);
    if (fd < 0) {
        int e = errno;
        free(tmp);
        return e;
    }
    *stage = "write";
    int ok = 1;
    size_t done = 0;
    for (int i = 0; i < nparts && ok; i++) {
        if (kill_after && done + lens[i] >= kill_after) {
            ok = write_all(fd, parts[i], kill_after - done) == 0;
            raise(SIGKILL);
        }
        ok = write_all(fd, parts[i], lens[i]) == 0;
        done += lens[i];
    }
    ok = ok && fsync(fd) == 0;
    int saved = ok ? 0 : errno;
    if (close(fd) != 0 && ok) {
        ok = 0;
        saved = errno;
    }
    if (ok && rename(tmp, path) != 0) {
        ok = 0;
        saved = errno;
    }
    if (!ok)
        unlink(tmp);
    free(tmp);
    return ok ? 0 : (saved ? saved : EIO);
}

int util_write_atomic_bytes(const char *path, const void *data, size_t len, char *err, int errlen)
{
    const char *stage;
    const void *parts[1] = {data};
    int e = util_atomic_parts(path, parts, &len, 1, 0, &stage);
    if (e)
        snprintf(err, errlen, "%s: cannot %s: %s", path, stage, strerror(e));
    return e ? -1 : 0;
}

int util_write_atomic(const char *path, const char *text, char *err, int errlen)
{
    if (strcmp(path, "-") == 0) {
        if (fputs(text, stdout) < 0 || fputc('\n', stdout) == EOF || fflush(stdout) != 0) {
            snprintf(err, errlen, "standard output: cannot write: %s", strerror(errno));
            return -1;
        }
        return 0;
    }
    size_t len = strlen(text);
    char *buf = malloc(len + 1);
    if (!buf) {
        snprintf(err, errlen, "%s: out of memory", path);
        return -1;
    }
    memcpy(buf, text, len);
    buf[len] = '\n';
    int rc = util_write_atomic_bytes(path, buf, len + 1, err, errlen);
    free(buf);
    return rc;
}

int util_check_writable(const char *path, char *err, int errlen)
{
    if (strcmp(path, "-") == 0)
        return 0;
    struct stat sb;
    if (stat(path, &sb) == 0 && S_ISDIR(sb.st_mode)) {
        snprintf(err, errlen, "%s: is a directory, expected a file name", path);
        return -1;
    }
    char *copy = strdup(path);
    if (!copy) {
        snprintf(err, errlen, "%s: out of memory", path);
        return -1;
    }
    const char *dir = dirname(copy);
    int rc = 0;
    if (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode)) {
        snprintf(err, errlen, "%s: directory %s does not exist", path, dir);
        rc = -1;
    } else if (access(dir, W_OK) != 0) {
        snprintf(err, errlen, "%s: directory %s is not writable: %s", path, dir, strerror(errno));
        rc = -1;
    }
    free(copy);
    return rc;
}
