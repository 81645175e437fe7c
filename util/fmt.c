/* fmt.c — SI counts and GiB (see fmt.h). */
#include "fmt.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

const char *util_si(double v, int digits, char *buf, int len)
{
    static const char *const unit[] = {"", "K", "M", "B", "T", "P"};
    /* step to the next unit where %g would round up to 1000 (999.7 -> "1e+03") */
    double lim = 1000.0 - 5.0 * pow(10.0, 2 - digits);
    double v0 = v;
    int i = 0;
    while (fabs(v) >= lim && i < 5) {
        v /= 1000;
        i++;
    }
    if (fabs(v) >= lim)   /* beyond P: the exponent says it, not "1e+15P" */
        snprintf(buf, len, "%.*g", digits, v0);
    else
        snprintf(buf, len, "%.*g%s", digits, v, unit[i]);
    return buf;
}

const char *util_bytes(double bytes, char *buf, int len)
{
    char s[32];
    util_si(bytes, 3, s, sizeof s);
    size_t n = strlen(s);
    char unit = n && (s[n - 1] < '0' || s[n - 1] > '9') ? s[n - 1] : 0;
    if (unit) {
        s[n - 1] = 0;
        snprintf(buf, len, "%s %cB", s, unit == 'B' ? 'G' : unit);   /* util_si's B is billions: G */
    } else {
        snprintf(buf, len, "%s B", s);
    }
    return buf;
}

const char *util_duration(double s, char *buf, int len)
{
    if (!isfinite(s))
        snprintf(buf, len, "never");
    else if (s < 120)
        snprintf(buf, len, "%.1f s", s);
    else if (s < 7200)
        snprintf(buf, len, "%.1f min", s / 60);
    else if (s < 172800)
        snprintf(buf, len, "%.1f h", s / 3600);
    else if (s < 86400.0 * 1e6)
        snprintf(buf, len, "%.1f days", s / 86400);
    else
        snprintf(buf, len, "%.3g days", s / 86400);
    return buf;
}

const char *util_pct(double frac, char *buf, int len)
{
    double p = 100 * frac;
    if (p != 0 && fabs(p) < 0.1)
        snprintf(buf, len, "%.2g%%", p);
    else
        snprintf(buf, len, "%.1f%%", p);
    return buf;
}

const char *util_gib(double bytes, char *buf, int len)
{
    snprintf(buf, len, "%.2f GiB", bytes / 1073741824.0);
    return buf;
}
