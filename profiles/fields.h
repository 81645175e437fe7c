/* fields.h — the field errors of the profile and stack readers: one line
 * "KIND ORIGIN: field \"F\": expected E, got G" that names the file, the
 * field, what was expected and what the file holds. Shared by profile.c
 * and stacks.c so that the two readers word their errors alike. */
#ifndef ULTRAPLAN_PROFILES_FIELDS_H
#define ULTRAPLAN_PROFILES_FIELDS_H

#include <stdbool.h>
#include <stddef.h>

#include <cjson/cJSON.h>

typedef struct {
    const char *kind;     // "profile", "stack"
    const char *origin;   // the file or builtin being read
    char *err;            // the error line (may be NULL)
    int errlen;
} FieldCtx;

/* What a JSON value looks like, for "got ...": "\"abc\"", "42", "true",
 * "null", "an array", "an object", or "nothing (field missing)". */
void fields_describe(const cJSON *v, char *buf, size_t n);

/* The error line with `got` as text, or as the value it describes; -1. */
int fields_fail_text(FieldCtx *c, const char *field, const char *expected, const char *got);
int fields_fail(FieldCtx *c, const char *field, const char *expected, const cJSON *got);

/* obj[key] as a string of fewer than cap bytes into out (non-empty when
 * required); an absent optional one leaves out as it is. 0, or -1. */
int fields_string(FieldCtx *c, const cJSON *obj, const char *key, char *out, size_t cap, bool required);

#endif
