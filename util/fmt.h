/* fmt.h — the one number formatter of the tree: counts with SI suffixes
 * ("3.49T", "175B") and bytes in GiB, as reports, the TUI and exports print
 * them. Pure: writes into the caller's buffer and returns it. */
#ifndef ULTRAPLAN_UTIL_FMT_H
#define ULTRAPLAN_UTIL_FMT_H

/* v with a K M B T P suffix and `digits` significant digits ("3.49T"). */
const char *util_si(double v, int digits, char *buf, int len);

/* bytes as "12.34 GiB". */
const char *util_gib(double bytes, char *buf, int len);

/* bytes with a decimal prefix and the unit: "1.53 MB", "2.44 TB". */
const char *util_bytes(double bytes, char *buf, int len);

/* seconds as the unit that reads best: "12.3 s", "4.5 min", "3.2 h",
 * "166.2 days", "1.23e+22 days"; "never" when not finite. */
const char *util_duration(double s, char *buf, int len);

/* a fraction as a percentage with at least two significant digits:
 * "51.7%", "0.0038%". */
const char *util_pct(double frac, char *buf, int len);

#endif
