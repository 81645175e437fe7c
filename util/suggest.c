/* suggest.c — nearest name by edit distance (see suggest.h). */
#include "suggest.h"

#include <ctype.h>
#include <string.h>

/* Levenshtein distance, case-insensitive; words longer than 63 are too far. */
static int distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    if (la > 63 || lb > 63)
        return 1 << 20;
    int row[64];
    for (size_t j = 0; j <= lb; j++)
        row[j] = (int)j;
    for (size_t i = 1; i <= la; i++) {
        int diag = row[0];
        row[0] = (int)i;
        for (size_t j = 1; j <= lb; j++) {
            int up = row[j];
            int sub = diag + (tolower((unsigned char)a[i - 1]) != tolower((unsigned char)b[j - 1]));
            int best = up + 1 < row[j - 1] + 1 ? up + 1 : row[j - 1] + 1;
            row[j] = sub < best ? sub : best;
            diag = up;
        }
    }
    return row[lb];
}

const char *util_closest(const char *word, const char *const *cands, int n)
{
    if (!word || !*word)
        return NULL;
    int limit = (int)strlen(word) / 3;
    if (limit < 2)
        limit = 2;
    const char *best = NULL;
    int bd = limit + 1;
    for (int i = 0; i < n; i++) {
        if (!cands[i])
            continue;
        int d = distance(word, cands[i]);
        if (d < bd) {
            bd = d;
            best = cands[i];
        }
    }
    return best;
}
