/* fmt.c — SI counts and GiB (see fmt.h). */
#include "fmt.h"

#include <math.h>
#include <stdio.h>

const char *util_si(double v, int digits, char *buf, int len)
{
    static const char *const unit[] = {"", "K", "M", "B", "T", "P"};
    /* step to the next unit where %g would round up to 1000 (999.7 -> "1e+03") */
    double lim = 1000.0 - 5.0 * pow(10.0, 2 - digits);
    int i = 0;
    while (fabs(v) >= lim && i < 5) {
        v /= 1000;
        i++;
    }
    snprintf(buf, len, "%.*g%s", digits, v, unit[i]);
    return buf;
}

const char *util_gib(double bytes, char *buf, int len)
{
    snprintf(buf, len, "%.2f GiB", bytes / 1073741824.0);
    return buf;
}
