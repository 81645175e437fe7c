/* parse.h — numbers as users type them: counts with SI suffixes (175B,
 * 4M), byte sizes (80GiB, 80GB) and whole numbers. Pure; -1 on junk. */
#ifndef ULTRAPLAN_UTIL_PARSE_H
#define ULTRAPLAN_UTIL_PARSE_H

/* "175B" -> 175e9 (K M B G T P suffixes, decimal); -1 on junk, negatives, inf. */
int util_parse_count(const char *s, double *out);
/* "80GiB" -> 85899345920, "80GB" -> 8e10; bare numbers are bytes. */
int util_parse_bytes(const char *s, double *out);
/* A whole number >= 0 that fits an int, with an optional K/M suffix ("4K"). */
int util_parse_int(const char *s, int *out);

#endif
