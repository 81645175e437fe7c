/* modload.c — see modload.h. */
#include "modload.h"

#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The directory of the running executable into dir, "" when unknown. */
static void exe_dir(char *dir, size_t n)
{
    char path[PATH_MAX];
    ssize_t k = readlink("/proc/self/exe", path, sizeof path - 1);
    dir[0] = 0;
    if (k <= 0)
        return;
    path[k] = 0;
    char *slash = strrchr(path, '/');
    if (slash)
        *slash = 0;
    snprintf(dir, n, "%s", path);
}

void *modload_symbol(const char *file, const char *symbol, char *err, int errlen)
{
    char dirs[2][PATH_MAX], here[PATH_MAX];
    int nd = 0;
    const char *env = getenv("ULTRAPLAN_MODULE_DIR");
    if (env && env[0]) {
        snprintf(dirs[nd++], PATH_MAX, "%.4000s", env);
    } else {
        exe_dir(here, sizeof here);
        snprintf(dirs[nd++], PATH_MAX, "%.4000s", here[0] ? here : ".");
        snprintf(dirs[nd++], PATH_MAX, "%.4000s/../lib/ultraplan", here[0] ? here : ".");
    }
    char why[1024] = "";
    for (int i = 0; i < nd; i++) {
        char path[PATH_MAX + 64];
        snprintf(path, sizeof path, "%.4000s/%.60s", dirs[i], file);
        if (access(path, F_OK) != 0)
            continue;
        /* RTLD_GLOBAL: Open MPI's components, which it dlopens itself, need
         * libmpi's symbols. RTLD_DEEPBIND: the module's own dependencies come
         * first for its symbols, so its cblas_sgemm is OpenBLAS's and not the
         * reference CBLAS that GSL (linked into this binary for `fit`) brought
         * in first, ten times slower. AddressSanitizer refuses DEEPBIND, so a
         * sanitizer build keeps the global order (slower GEMMs, same results). */
        int flags = RTLD_NOW | RTLD_GLOBAL;
#if defined(RTLD_DEEPBIND) && !defined(__SANITIZE_ADDRESS__)
        flags |= RTLD_DEEPBIND;
#endif
        void *h = dlopen(path, flags);
        if (!h) {
            const char *e = dlerror();
            snprintf(why, sizeof why, "%s", e ? e : "dlopen failed");
            break;
        }
        void *sym = dlsym(h, symbol);
        if (!sym) {
            snprintf(err, errlen, "%s has no entry table %s (not an ultraplan module of this version?)", path,
                     symbol);
            dlclose(h);
            return NULL;
        }
        return sym;
    }
    if (why[0])
        snprintf(err, errlen, "cannot load %s: %s", file, why);
    else if (nd == 1)
        snprintf(err, errlen, "cannot load %s: not found in %s (ULTRAPLAN_MODULE_DIR)", file, dirs[0]);
    else
        snprintf(err, errlen, "cannot load %s: not found beside the executable (%s) nor in %s", file, dirs[0],
                 dirs[1]);
    return NULL;
}

const UpExecModule *modload_exec(char *err, int errlen)
{
    char why[1200];
    const UpExecModule *m = modload_symbol(UP_EXEC_MODULE_FILE, UP_EXEC_MODULE_SYMBOL, why, sizeof why);
    if (m && (m->abi != UP_MODULE_ABI || m->run_request_size != sizeof(RunRequest) ||
              m->planfile_size != sizeof(PlanFile) || m->calib_request_size != sizeof(CalibRequest))) {
        snprintf(err, errlen, "%s is of another ultraplan build (module ABI %d, this one %d): rebuild or "
                              "reinstall the binary and its modules together", UP_EXEC_MODULE_FILE, m->abi,
                 UP_MODULE_ABI);
        return NULL;
    }
    if (!m)
        snprintf(err, errlen, "%s. run and calibrate need the executor module, built beside the binary or in "
                              "../lib/ultraplan (or name its directory in ULTRAPLAN_MODULE_DIR), and the libraries "
                              "it links: Open MPI, OpenBLAS, OpenMP", why);
    return m;
}
