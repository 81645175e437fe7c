/* modload.h — find and open one of ultraplan's on-demand modules (module.h)
 * and fetch its entry table.
 *
 * Where: $ULTRAPLAN_MODULE_DIR when it is set (only there); otherwise beside
 * the running executable (dirname of /proc/self/exe: the build tree), then
 * ../lib/ultraplan relative to it (an installed tree). Opened with
 * RTLD_NOW | RTLD_GLOBAL: every library the module needs is resolved at
 * once, so a missing one (libmpi, libcudart.so.13, libnccl) is reported here
 * by dlerror's text rather than as a crash later, and Open MPI's own
 * plug-ins find libmpi's symbols.
 *
 * libdl only: the planning binary links this, and nothing it opens.
 */
#ifndef ULTRAPLAN_EXECUTOR_MODLOAD_H
#define ULTRAPLAN_EXECUTOR_MODLOAD_H

#include "module.h"

/* The address of `symbol` in module `file` (e.g. "libultraplan-exec.so"),
 * or NULL with err naming the file, where it was looked for and the
 * loader's reason. */
void *modload_symbol(const char *file, const char *symbol, char *err, int errlen);

/* libultraplan-exec.so's entry table (module.h), once its ABI and the sizes
 * of the structs it shares with this binary are checked; or NULL with err
 * saying what failed and what to install. */
const UpExecModule *modload_exec(char *err, int errlen);

#endif
