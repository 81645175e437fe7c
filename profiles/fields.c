/* fields.c — see fields.h. */
#include "fields.h"

#include <stdio.h>
#include <string.h>

void fields_describe(const cJSON *v, char *buf, size_t n)
{
    if (!v)
        snprintf(buf, n, "nothing (field missing)");
    else if (cJSON_IsString(v))
        snprintf(buf, n, "\"%.60s\"", v->valuestring);
    else if (cJSON_IsNumber(v))
        snprintf(buf, n, "%.6g", v->valuedouble);
    else if (cJSON_IsBool(v))
        snprintf(buf, n, "%s", cJSON_IsTrue(v) ? "true" : "false");
    else if (cJSON_IsNull(v))
        snprintf(buf, n, "null");
    else if (cJSON_IsArray(v))
        snprintf(buf, n, "an array");
    else
        snprintf(buf, n, "an object");
}

int fields_fail_text(FieldCtx *c, const char *field, const char *expected, const char *got)
{
    if (c->err && c->errlen > 0)
        snprintf(c->err, c->errlen, "%s %s: field \"%s\": expected %s, got %s", c->kind, c->origin, field, expected,
                 got);
    return -1;
}

int fields_fail(FieldCtx *c, const char *field, const char *expected, const cJSON *got)
{
    char g[96];
    fields_describe(got, g, sizeof g);
    return fields_fail_text(c, field, expected, g);
}

int fields_string(FieldCtx *c, const cJSON *obj, const char *key, char *out, size_t cap, bool required)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (!v && !required)
        return 0;
    char want[64];
    snprintf(want, sizeof want, "a %sstring of at most %zu characters", required ? "non-empty " : "", cap - 1);
    if (!cJSON_IsString(v) || strlen(v->valuestring) >= cap || (required && !v->valuestring[0]))
        return fields_fail(c, key, want, v);
    snprintf(out, cap, "%s", v->valuestring);
    return 0;
}
