/* fileio.h — the one whole-file reader and the one atomic writer of the tree.
 *
 * Every file ultraplan writes for a user (plan.json, run.json, profiles,
 * exports, CSV, manifests) goes through util_write_atomic: the bytes land in
 * a temporary file beside the target, created exclusively and never through
 * a symbolic link, are fsynced, and are renamed over the target only when
 * complete; on any failure the temporary file is removed and the target is
 * left as it was. Errors fill `err` naming the path and the system's reason;
 * nothing here prints or exits.
 */
#ifndef ULTRAPLAN_UTIL_FILEIO_H
#define ULTRAPLAN_UTIL_FILEIO_H

#include <stddef.h>

/* Whole file into a malloc'd NUL-terminated buffer; *len (nullable) gets the
 * byte count. Refuses files over max_bytes (0: no limit) with an error that
 * names the limit. NULL with err on failure. */
char *util_slurp(const char *path, size_t max_bytes, size_t *len, char *err, int errlen);

/* The core of every atomic write: the parts one after another into a
 * temporary file beside path, fsync, rename over path. Returns 0, or the
 * errno of the failure with *stage set to "create" or "write" (the
 * temporary file is then removed). kill_after > 0 is fault injection for the
 * reliability tests: the process raises SIGKILL once that many bytes are in
 * the temporary file, as a crash in the middle of a write would. */
int util_atomic_parts(const char *path, const void *const *parts, const size_t *lens, int nparts,
                      size_t kill_after, const char **stage);

/* Write len bytes to path atomically (see above). 0 ok, -1 with err. */
int util_write_atomic_bytes(const char *path, const void *data, size_t len, char *err, int errlen);

/* Text plus a final newline, atomically; path "-" writes to stdout. */
int util_write_atomic(const char *path, const char *text, char *err, int errlen);

/* Whether a file could be written at path (its directory exists and is
 * writable, and path is not a directory): checked before long work so a bad
 * -o fails in milliseconds, not after the work. "-" is always fine. */
int util_check_writable(const char *path, char *err, int errlen);

#endif
