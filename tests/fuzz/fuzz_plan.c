/* fuzz_plan.c — the plan file reader (cli/report.c: planfile_read, which
 * parses the model, the embedded profile, the layout and the options, then
 * checks the layout and recomputes the cost).
 *
 * An accepted plan must give a finite cost, print as JSON without null and
 * read back identically after planfile_write.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "report.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 200000)
        return 0;
    const char *path = fz_temp_file("plan", data, size);
    PlanFile pf;
    char err[512];
    err[0] = 0;
    if (planfile_read(path, &pf, err, sizeof err) != 0) {
        if (!err[0] || !strstr(err, path)) {
            fprintf(stderr, "fuzz_plan: error without the file name: \"%s\"\n", err);
            abort();
        }
        return 0;
    }
    fz_check_cost(&pf.model, &pf.layout, &pf.cost);
    cJSON *j = planfile_json(&pf.model, &pf.hw, &pf.layout, &pf.opts, &pf.cost);
    fz_check_json(j, "plan json");
    char *text = cJSON_Print(j);
    cJSON_Delete(j);
    if (!text)
        abort();
    PlanFile back;
    const char *p2 = fz_temp_file("plan", (const uint8_t *)text, strlen(text));
    free(text);
    if (planfile_read(p2, &back, err, sizeof err) != 0) {
        fprintf(stderr, "fuzz_plan: a plan we wrote does not read back: %s\n", err);
        abort();
    }
    /* cJSON may print a number an ulp off (see fuzz_profile.c) */
    if (fabs(back.cost.step_s / pf.cost.step_s - 1) > 1e-9 || fabs(back.cost.peak_bytes / pf.cost.peak_bytes - 1) > 1e-9) {
        fprintf(stderr, "fuzz_plan: round trip changed the cost: step %.17g vs %.17g\n", back.cost.step_s,
                pf.cost.step_s);
        abort();
    }
    return 0;
}
