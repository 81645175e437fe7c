/* json.h — the one JSON parse of the tree's readers: cJSON, then the checks
 * cJSON does not make. A document must be complete (nothing after it), and
 * no object may name a key twice (cJSON keeps the first silently, so a
 * hand-edited file could say one thing and mean another). Errors name the
 * file (`what`), the byte or the field. */
#ifndef ULTRAPLAN_UTIL_JSON_H
#define ULTRAPLAN_UTIL_JSON_H

#include <cjson/cJSON.h>

/* The parsed document (caller deletes), or NULL with err:
 * "WHAT: not valid JSON (near byte N)" or "(the file is empty)", or
 * "WHAT: field \"a.b\": appears twice". */
cJSON *util_json_parse(const char *text, const char *what, char *err, int errlen);

/* For readers that parse themselves: 1 when an object in j repeats a key,
 * its dotted path in path ("layout.tp"), else 0. */
int util_json_duplicate(const cJSON *j, char *path, int n);

#endif
