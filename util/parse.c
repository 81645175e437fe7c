/* parse.c — counts, byte sizes and whole numbers as typed (see parse.h). */
#include "parse.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

static int parse_suffixed(const char *s, double *out, bool bytes)
{
    if (!s || !*s)
        return -1;
    errno = 0;
    char *end;
    double v = strtod(s, &end);
    if (end == s || errno == ERANGE || !isfinite(v) || v < 0)
        return -1;
    while (*end == ' ')
        end++;
    double mult = 1;
    if (*end) {
        char u = (char)toupper((unsigned char)*end);
        const char *units = "KMGTP";
        const char *p = strchr(units, u == 'B' && !bytes ? 'G' : u);
        if (!p || !*p)
            return -1;
        int e = (int)(p - units) + 1;
        end++;
        if (bytes && (*end == 'i' || *end == 'I')) {
            mult = pow(1024.0, e);
            end++;
        } else {
            mult = pow(1000.0, e);
        }
        if (bytes && (*end == 'B' || *end == 'b'))
            end++;
        if (*end)
            return -1;
    }
    v *= mult;
    if (!isfinite(v) || v > 1e30)
        return -1;
    *out = v;
    return 0;
}

int util_parse_count(const char *s, double *out) { return parse_suffixed(s, out, false); }

int util_parse_bytes(const char *s, double *out)
{
    /* a bare "B" suffix is bytes here, not billions */
    size_t n = s ? strlen(s) : 0;
    if (n > 1 && (s[n - 1] == 'B' || s[n - 1] == 'b') && isdigit((unsigned char)s[n - 2])) {
        char tmp[64];
        if (n >= sizeof tmp)
            return -1;
        memcpy(tmp, s, n - 1);
        tmp[n - 1] = 0;
        return parse_suffixed(tmp, out, true);
    }
    return parse_suffixed(s, out, true);
}

int util_parse_int(const char *s, int *out)
{
    double v;
    if (util_parse_count(s, &v) != 0 || v != floor(v) || v > 2147483647.0)
        return -1;
    *out = (int)v;
    return 0;
}

