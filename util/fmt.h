/* fmt.h — the one number formatter of the tree: counts with SI suffixes
 * ("3.49T", "175B") and bytes in GiB, as reports, the TUI and exports print
 * them. Pure: writes into the caller's buffer and returns it. */
#ifndef ULTRAPLAN_UTIL_FMT_H
#define ULTRAPLAN_UTIL_FMT_H

/* v with a K M B T P suffix and `digits` significant digits ("3.49T"). */
const char *util_si(double v, int digits, char *buf, int len);

/* bytes as "12.34 GiB". */
const char *util_gib(double bytes, char *buf, int len);

#endif
