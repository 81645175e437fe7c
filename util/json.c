/* json.c — parse and check a JSON document (see json.h). */
#include "json.h"

#include <stdio.h>
#include <string.h>

/* The first key an object (or any object below it) repeats, with its path. */
static int find_duplicate(const cJSON *o, char *path, size_t n, size_t len)
{
    for (const cJSON *a = o ? o->child : NULL; a; a = a->next) {
        if (cJSON_IsObject(o) && a->string)
            for (const cJSON *b = o->child; b != a; b = b->next)
                if (b->string && !strcmp(a->string, b->string)) {
                    snprintf(path + len, n - len, "%s%s", len ? "." : "", a->string);
                    return 1;
                }
        if (cJSON_IsObject(a) || cJSON_IsArray(a)) {
            size_t l2 = len;
            if (cJSON_IsObject(o) && a->string)
                l2 += (size_t)snprintf(path + len, n - len, "%s%s", len ? "." : "", a->string);
            else
                l2 += (size_t)snprintf(path + len, n - len, "[]");
            if (l2 >= n)
                l2 = n - 1;
            if (find_duplicate(a, path, n, l2))
                return 1;
            path[len] = 0;
        }
    }
    return 0;
}

int util_json_duplicate(const cJSON *j, char *path, int n)
{
    path[0] = 0;
    return find_duplicate(j, path, (size_t)n, 0);
}

cJSON *util_json_parse(const char *text, const char *what, char *err, int errlen)
{
    const char *p = text ? text : "";
    while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')
        p++;
    if (!*p) {
        snprintf(err, errlen, "%s: not valid JSON (the file is empty)", what);
        return NULL;
    }
    const char *end = NULL;
    cJSON *j = cJSON_ParseWithOpts(text, &end, 1);
    if (!j) {
        long at = end && end >= text ? (long)(end - text) : -1L;
        snprintf(err, errlen, "%s: not valid JSON (near byte %ld)", what, at);
        return NULL;
    }
    char path[256] = "";
    if (find_duplicate(j, path, sizeof path, 0)) {
        snprintf(err, errlen, "%s: field \"%s\": appears twice", what, path);
        cJSON_Delete(j);
        return NULL;
    }
    return j;
}
