/* fuzz_run_json.c — run.json (ultraplan.run/1) through its one reader
 * (executor/runfile.c: runfile_parse, what `compare` reads with), directly
 * and as the TUI's --follow view of it (tui/follow.c: follow_parse), twice
 * in a row as a growing file is.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "follow.h"
#include "runfile.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 200000)
        return 0;
    char *text = fz_strndup(data, size);
    static TuiRun run;
    RunDoc d;
    char err[256];
    if (runfile_parse(text, &d, err, sizeof err) != 0 && !err[0]) {
        fprintf(stderr, "fuzz_run_json: runfile_parse refused without a reason\n");
        abort();
    }
    if (d.nsteps < 0 || d.nmem < 0 || (d.nsteps && !d.steps) || (d.nmem && !d.mem))
        abort();
    runfile_free(&d);
    follow_init(&run, "run.json");
    for (int pass = 0; pass < 2; pass++) {
        int prev = run.n;
        int rc = follow_parse(&run, text);
        if (rc != 0 && (!run.err[0] || run.n != prev)) {
            fprintf(stderr, "fuzz_run_json: refused without a reason, or lost its steps\n");
            abort();
        }
        if (run.n < 0 || run.n > TUI_RUN_HIST || run.steps < run.n) {
            fprintf(stderr, "fuzz_run_json: n %d steps %d\n", run.n, run.steps);
            abort();
        }
        for (int i = 0; i < run.n; i++)
            if (isnan(run.time_s[i]) || isnan(run.loss[i]) || isnan(run.mfu[i]))
                abort();
        if (strnlen(run.status, sizeof run.status) >= sizeof run.status)
            abort();
    }
    free(text);
    return 0;
}
