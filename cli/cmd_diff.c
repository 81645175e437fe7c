/* cmd_diff.c — `ultraplan diff A.json B.json`: two plans, or a plan and a
 * prediction (predict --json / -o), side by side: the model, the hardware,
 * every layout knob, memory per GPU and per stage, the step time by phase,
 * throughput and training days, with the relative change of each number.
 *
 * A plan file is re-priced on load (planfile_read), so it shows what this
 * build predicts for it; a prediction document is shown as it was written.
 */
#include <getopt.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "command.h"
#include "fileio.h"
#include "json.h"
#include "planfile.h"

static void help(FILE *f)
{
    fprintf(f, "usage: ultraplan diff A.json B.json [--all] [--json]\n\n"
               "Compares two plans (ultraplan.plan/1, from plan -o or the TUI's s) or a plan and a\n"
               "prediction (ultraplan.predict/1, from predict --json or -o), field by field: model,\n"
               "hardware, layout, memory per GPU and per stage, step time by phase, throughput and\n"
               "training days, with the change from A to B in percent.\n\n"
               "  --all    every field, also those that are equal (default: only what differs)\n"
               "  --json   one JSON document (ultraplan.diff/1) with the rows\n\n"
               "example: ultraplan plan --gpus 512 --params 175B -o a.json && \\\n"
               "         ultraplan plan --gpus 1024 --params 175B -o b.json && ultraplan diff a.json b.json\n");
}

/* One document in comparable form: its sections as JSON objects. */
typedef struct {
    const char *path;
    cJSON *doc;                  // owned
    const cJSON *model, *layout, *hardware, *cost;   // into doc; cost holds memory/time/throughput/training
    double gpus;
} Doc;

static int load(const char *path, Doc *d, char *err, int errlen)
{
    memset(d, 0, sizeof *d);
    d->path = path;
    char *text = util_slurp(path, 64u << 20, NULL, err, errlen);
    if (!text)
        return -1;
    cJSON *j = util_json_parse(text, path, err, errlen);
    free(text);
    if (!j)
        return -1;
    const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(j, "format");
    const char *f = cJSON_IsString(fmt) ? fmt->valuestring : "";
    if (!strcmp(f, PLAN_FORMAT)) {
        /* re-price it: what this build predicts for the plan */
        cJSON_Delete(j);
        PlanFile pf;
        if (planfile_read(path, &pf, err, errlen) != 0)
            return -1;
        j = planfile_json(&pf.model, &pf.hw, &pf.layout, &pf.opts, &pf.cost);
        d->cost = cJSON_GetObjectItemCaseSensitive(j, "prediction");
        d->gpus = layout_gpus(&pf.layout);
    } else if (!strcmp(f, PREDICT_FORMAT)) {
        d->cost = j;
        const cJSON *g = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(j, "hardware"), "gpus");
        d->gpus = cJSON_IsNumber(g) ? g->valuedouble : NAN;
    } else {
        snprintf(err, errlen, "%s: field \"format\": expected \"%s\" or \"%s\"%s%s%s", path, PLAN_FORMAT,
                 PREDICT_FORMAT, f[0] ? ", got \"" : "", f, f[0] ? "\"" : "");
        cJSON_Delete(j);
        return -1;
    }
    d->doc = j;
    d->model = cJSON_GetObjectItemCaseSensitive(j, "model");
    d->layout = cJSON_GetObjectItemCaseSensitive(j, "layout");
    d->hardware = cJSON_GetObjectItemCaseSensitive(j, "hardware");
    if (!cJSON_IsObject(d->model) || !cJSON_IsObject(d->layout) || !cJSON_IsObject(d->cost)) {
        snprintf(err, errlen, "%s: missing its model, layout or prediction", path);
        cJSON_Delete(j);
        d->doc = NULL;
        return -1;
    }
    return 0;
}

typedef struct {
    bool all, json;
    int shown, differ;
    cJSON *rows;                 // --json
} Out;

static bool is_bytes(const char *key)
{
    size_t n = strlen(key);
    return (n > 6 && !strcmp(key + n - 6, "_bytes")) || !strcmp(key, "total") || !strcmp(key, "weights") ||
           !strcmp(key, "grads") || !strcmp(key, "optim") || !strcmp(key, "acts") || !strcmp(key, "buffers") ||
           !strcmp(key, "overhead");
}

static void text_of(const cJSON *v, bool bytes, char *buf, int len)
{
    if (!v)
        snprintf(buf, len, "-");
    else if (cJSON_IsBool(v))
        snprintf(buf, len, "%s", cJSON_IsTrue(v) ? "true" : "false");
    else if (cJSON_IsNumber(v))
        snprintf(buf, len, bytes ? "%.2f GiB" : "%.6g", bytes ? v->valuedouble / 1073741824.0 : v->valuedouble);
    else if (cJSON_IsString(v))
        snprintf(buf, len, "%s", v->valuestring);
    else if (cJSON_IsArray(v)) {
        int n = 0;
        const cJSON *e;
        buf[0] = 0;
        cJSON_ArrayForEach(e, v) {
            if (n >= len - 8) {
                snprintf(buf + n, len - n, ",...");
                break;
            }
            n += snprintf(buf + n, len - n, "%s%.6g", n ? "," : "", cJSON_IsNumber(e) ? e->valuedouble : NAN);
        }
    } else {
        snprintf(buf, len, "(object)");
    }
}

/* s cut to w columns with "..." */
static const char *cut(char *s, int w)
{
    if ((int)strlen(s) > w && w > 3)
        strcpy(s + w - 3, "...");
    return s;
}

static void row_as(Out *o, const char *section, const char *field, const cJSON *a, const cJSON *b, bool bytes)
{
    char ta[96], tb[96];
    text_of(a, bytes, ta, sizeof ta);
    text_of(b, bytes, tb, sizeof tb);
    bool same = !strcmp(ta, tb) && (!a == !b);
    double pct = NAN;
    if (cJSON_IsNumber(a) && cJSON_IsNumber(b) && a->valuedouble != 0 && isfinite(a->valuedouble))
        pct = 100 * (b->valuedouble - a->valuedouble) / fabs(a->valuedouble);
    o->differ += !same;
    if (same && !o->all)
        return;
    o->shown++;
    if (o->json) {
        cJSON *r = cJSON_CreateObject();
        cJSON_AddStringToObject(r, "section", section);
        cJSON_AddStringToObject(r, "field", field);
        cJSON_AddItemToObject(r, "a", a ? cJSON_Duplicate(a, 1) : cJSON_CreateNull());
        cJSON_AddItemToObject(r, "b", b ? cJSON_Duplicate(b, 1) : cJSON_CreateNull());
        if (isfinite(pct))
            cJSON_AddNumberToObject(r, "change_pct", pct);
        else
            cJSON_AddNullToObject(r, "change_pct");
        cJSON_AddItemToArray(o->rows, r);
        return;
    }
    char ch[24] = "";
    if (isfinite(pct) && !same)
        snprintf(ch, sizeof ch, "%+.1f%%", pct);
    printf("  %-10s %-24s %22s %22s %9s\n", section, field, cut(ta, 22), cut(tb, 22), ch);
}

static void row(Out *o, const char *section, const char *field, const cJSON *a, const cJSON *b)
{
    row_as(o, section, field, a, b, is_bytes(field));
}

/* Every key of a, then the keys only b has, of two objects; nested objects
 * and arrays of objects are left to the callers that know them. */
static void section(Out *o, const char *name, const cJSON *a, const cJSON *b)
{
    const cJSON *v;
    cJSON_ArrayForEach(v, a) {
        const cJSON *w = cJSON_GetObjectItemCaseSensitive(b, v->string);
        if (!cJSON_IsObject(v) && !(cJSON_IsArray(v) && cJSON_IsObject(cJSON_GetArrayItem(v, 0))))
            row(o, name, v->string, v, w);
    }
    cJSON_ArrayForEach(v, b)
        if (!cJSON_GetObjectItemCaseSensitive(a, v->string) && !cJSON_IsObject(v))
            row(o, name, v->string, NULL, v);
}

static void stages(Out *o, const cJSON *a, const cJSON *b)
{
    const cJSON *pa = cJSON_GetObjectItemCaseSensitive(a, "per_stage"), *pb = cJSON_GetObjectItemCaseSensitive(b, "per_stage");
    int na = cJSON_GetArraySize(pa), nb = cJSON_GetArraySize(pb);
    for (int s = 0; s < (na > nb ? na : nb); s++) {
        char f[32];
        snprintf(f, sizeof f, "stage %d total", s);
        row_as(o, "memory", f, cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(pa, s), "total"),
            cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(pb, s), "total"), true);
    }
}

static int diff_main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"help", no_argument, 0, 'h'}, {"all", no_argument, 0, 'a'}, {"json", no_argument, 0, 'j'}, {0, 0, 0, 0}};
    Out o = {0};
    int c;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (c) {
        case 'h': help(stdout); return 0;
        case 'a': o.all = true; break;
        case 'j': o.json = true; break;
        default: command_bad_option("diff", argv); return 2;
        }
    }
    if (argc - optind != 2) {
        fprintf(stderr, "ultraplan diff: give two files, plans or predictions (see --help)\n");
        return 2;
    }
    char err[1024];
    Doc a, b;
    if (load(argv[optind], &a, err, sizeof err) != 0) {
        fprintf(stderr, "ultraplan diff: %s\n", err);
        return 1;
    }
    if (load(argv[optind + 1], &b, err, sizeof err) != 0) {
        fprintf(stderr, "ultraplan diff: %s\n", err);
        cJSON_Delete(a.doc);
        return 1;
    }
    if (o.json)
        o.rows = cJSON_CreateArray();
    else
        printf("  %-10s %-24s %22.22s %22.22s %9s\n", "", "", a.path, b.path, "change");
    section(&o, "model", a.model, b.model);
    cJSON *ga = cJSON_CreateNumber(a.gpus), *gb = cJSON_CreateNumber(b.gpus);
    row(&o, "hardware", "gpus", ga, gb);
    cJSON_Delete(ga);
    cJSON_Delete(gb);
    row(&o, "hardware", "name", cJSON_GetObjectItemCaseSensitive(a.hardware, "name"),
        cJSON_GetObjectItemCaseSensitive(b.hardware, "name"));
    section(&o, "layout", a.layout, b.layout);
    static const char *const parts[] = {"memory", "time", "throughput", "training"};
    for (int i = 0; i < 4; i++) {
        const cJSON *pa = cJSON_GetObjectItemCaseSensitive(a.cost, parts[i]),
                    *pb = cJSON_GetObjectItemCaseSensitive(b.cost, parts[i]);
        section(&o, parts[i], pa, pb);
        if (i == 0)
            stages(&o, pa, pb);
    }
    int rc = 0;
    if (o.json) {
        cJSON *j = cJSON_CreateObject();
        cJSON_AddStringToObject(j, "format", "ultraplan.diff/1");
        cJSON_AddStringToObject(j, "a", a.path);
        cJSON_AddStringToObject(j, "b", b.path);
        cJSON_AddNumberToObject(j, "differing", o.differ);
        cJSON_AddItemToObject(j, "rows", o.rows);
        char *t = cJSON_Print(j);
        cJSON_Delete(j);
        rc = t && util_write_atomic("-", t, err, sizeof err) == 0 ? 0 : 1;
        free(t);
    } else if (o.differ == 0) {
        printf("  (the two are the same in every field)\n");
    } else if (!o.all) {
        printf("\n%d field(s) differ; --all shows every field\n", o.differ);
    }
    cJSON_Delete(a.doc);
    cJSON_Delete(b.doc);
    return rc;
}

const Command cmd_diff = {"diff", "two plans (or a plan and a prediction) side by side, field by field", diff_main};
