/* follow.c — run.json reader for the Run pane (see follow.h). */
#include "follow.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cjson/cJSON.h>

void follow_init(TuiRun *run, const char *path)
{
    memset(run, 0, sizeof *run);
    run->active = true;
    snprintf(run->path, sizeof run->path, "%s", path);
}

static double num(const cJSON *o, const char *a, const char *b)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, a);
    if (!cJSON_IsNumber(v) && b)
        v = cJSON_GetObjectItemCaseSensitive(o, b);
    return cJSON_IsNumber(v) && v->valuedouble >= 0 ? v->valuedouble : -1;
}

int follow_parse(TuiRun *run, const char *text)
{
    cJSON *j = cJSON_Parse(text);
    if (!j || !cJSON_IsObject(j)) {
        snprintf(run->err, sizeof run->err, "%.100s: not JSON yet (being written?)", run->path);
        cJSON_Delete(j);
        return -1;
    }
    const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(j, "format");
    if (cJSON_IsString(fmt) && strncmp(fmt->valuestring, "ultraplan.run/", 14) != 0) {
        snprintf(run->err, sizeof run->err, "%.100s: format is \"%.40s\", expected ultraplan.run/1", run->path,
                 fmt->valuestring);
        cJSON_Delete(j);
        return -1;
    }
    const cJSON *steps = cJSON_GetObjectItemCaseSensitive(j, "steps");
    if (steps && !cJSON_IsArray(steps)) {
        snprintf(run->err, sizeof run->err, "%.100s: \"steps\" is not an array", run->path);
        cJSON_Delete(j);
        return -1;
    }
    int total = cJSON_GetArraySize(steps);
    int first = total > TUI_RUN_HIST ? total - TUI_RUN_HIST : 0;
    run->n = 0;
    for (int i = first; i < total; i++) {
        const cJSON *s = cJSON_GetArrayItem(steps, i);
        int k = run->n++;
        run->time_s[k] = cJSON_IsObject(s) ? num(s, "time_s", "step_s") : -1;
        run->loss[k] = cJSON_IsObject(s) ? num(s, "loss", NULL) : -1;
        run->mfu[k] = cJSON_IsObject(s) ? num(s, "mfu", NULL) : -1;
    }
    run->steps = total;
    const cJSON *status = cJSON_GetObjectItemCaseSensitive(j, "status");
    snprintf(run->status, sizeof run->status, "%s", cJSON_IsString(status) ? status->valuestring : "");
    run->loaded = true;
    run->err[0] = 0;
    cJSON_Delete(j);
    return 0;
}

static char *slurp(const char *path, long max)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    char *buf = malloc((size_t)max + 1);
    size_t n = buf ? fread(buf, 1, (size_t)max, f) : 0;
    fclose(f);
    if (buf)
        buf[n] = 0;
    return buf;
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
    char *text = slurp(run->path, sb.st_size < (64 << 20) ? (long)sb.st_size : (64 << 20));
    if (!text) {
        snprintf(run->err, sizeof run->err, "%.100s: cannot read", run->path);
        return true;
    }
    if (follow_parse(run, text) == 0) {
        run->stamp_mtime_ns = mtime;
        run->stamp_size = size;
    }
    free(text);
    return true;
}
