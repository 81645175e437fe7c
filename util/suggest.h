/* suggest.h — "did you mean": the known name closest to what was typed. */
#ifndef ULTRAPLAN_UTIL_SUGGEST_H
#define ULTRAPLAN_UTIL_SUGGEST_H

/* The candidate nearest to word by edit distance (case-insensitive), when
 * it is near enough to be a typo (at most 2 edits, or a third of the word
 * for long words); NULL otherwise. */
const char *util_closest(const char *word, const char *const *cands, int n);

#endif
