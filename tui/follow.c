/* follow.c — the Run pane's view of run.json (see follow.h), read by
 * executor/runfile.c, the one reader of the format. */
#include "follow.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fileio.h"
#include "json.h"
#include "planfile.h"
#include "runfile.h"

void follow_init(TuiRun *run, const char *path)
{
    memset(run, 0, sizeof *run);
    run->active = true;
    snprintf(run->path, sizeof run->path, "%s", path);
}

/* a step's figure for the Run pane: < 0 where the file has none */
static double shown(double v) { return isnan(v) || v < 0 ? -1 : v; }

/* The model, layout and plan file a run.json names: what it is a run of.
 * Absent or unreadable parts leave has_layout / has_plan false. */
static void read_what_ran(TuiRun *run, const char *text)
{
    char err[256];
    run->has_layout = run->has_plan = false;
    cJSON *j = util_json_parse(text, run->path, err, sizeof err);
    if (!j)
        return;
    run->has_layout =
        plan_parse_model(cJSON_GetObjectItemCaseSensitive(j, "model"), run->path, &run->model, err, sizeof err) == 0 &&
        plan_parse_layout(cJSON_GetObjectItemCaseSensitive(j, "layout"), run->path, &run->layout, err, sizeof err) == 0;
    const cJSON *plan = cJSON_GetObjectItemCaseSensitive(j, "plan");
    if (cJSON_IsString(plan)) {
        PlanFile *pf = malloc(sizeof *pf);
        char path[600];
        /* as the run was given it (relative to where it started), else beside run.json */
        snprintf(path, sizeof path, "%s", plan->valuestring);
        int ok = pf && planfile_read(path, pf, err, sizeof err) == 0;
        if (pf && !ok && plan->valuestring[0] != '/') {
            const char *slash = strrchr(run->path, '/');
            if (slash) {
                snprintf(path, sizeof path, "%.*s/%s", (int)(slash - run->path), run->path, plan->valuestring);
                ok = planfile_read(path, pf, err, sizeof err) == 0;
            }
        }
        if (ok) {
            run->has_plan = true;
            run->plan_cost = pf->cost;
            snprintf(run->plan_hw, sizeof run->plan_hw, "%s", pf->hw.name);
        }
        free(pf);
    }
    cJSON_Delete(j);
}

int follow_parse(TuiRun *run, const char *text)
{
    RunDoc d;
    char why[140];
    if (runfile_parse(text, &d, why, sizeof why) != 0) {
        snprintf(run->err, sizeof run->err, "%.100s: %s", run->path, why);
        runfile_free(&d);
        return -1;
    }
    int first = d.nsteps > TUI_RUN_HIST ? d.nsteps - TUI_RUN_HIST : 0;
    run->n = 0;
    for (int i = first; i < d.nsteps; i++) {
        int k = run->n++;
        run->time_s[k] = shown(d.steps[i].step_s);
        run->loss[k] = shown(d.steps[i].loss);
        run->mfu[k] = shown(d.steps[i].mfu);
    }
    run->steps = d.nsteps;
    snprintf(run->status, sizeof run->status, "%s", d.status);
    read_what_ran(run, text);
    run->loaded = true;
    run->err[0] = 0;
    runfile_free(&d);
    return 0;
}

bool follow_poll(TuiRun *run)
{
    if (!run->active)
        return false;
    struct stat sb;
    if (stat(run->path, &sb) != 0) {
        bool changed = run->err[0] == 0;
        snprintf(run->err, sizeof run->err, "%.100s: not there yet", run->path);
        return changed;
    }
    long long mtime = (long long)sb.st_mtim.tv_sec * 1000000000LL + sb.st_mtim.tv_nsec, size = sb.st_size;
    if (run->loaded && mtime == run->stamp_mtime_ns && size == run->stamp_size)
        return false;
    char why[200];
    char *text = util_slurp(run->path, (size_t)64 << 20, NULL, why, sizeof why);
    if (!text) {
        snprintf(run->err, sizeof run->err, "%.200s", why);
        return true;
    }
    if (follow_parse(run, text) == 0) {
        run->stamp_mtime_ns = mtime;
        run->stamp_size = size;
    }
    free(text);
    return true;
}
