/* common.h — what every fuzz harness checks after a parser said yes.
 *
 * A parser that accepts an input promises more than "no crash": the numbers
 * it hands on must give a Cost that is finite (no NaN, no overflow), and the
 * JSON we would print from it must hold no null where a number belongs.
 * These helpers abort() with a message so libFuzzer records the input.
 */
#ifndef ULTRAPLAN_FUZZ_COMMON_H
#define ULTRAPLAN_FUZZ_COMMON_H

#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "cost.h"

/* Copy fuzzer bytes into a NUL-terminated string (caller frees). */
char *fz_strndup(const uint8_t *data, size_t size);

/* Abort unless every number of the cost is finite, except the fields that
 * are infinite by definition (no failures: job MTBF and the intervals; a
 * job that loses more than it gains: days with failures). */
void fz_check_cost(const ModelSpec *m, const Layout *lo, const Cost *c);

/* Abort if the tree holds a null or a non-finite number. */
void fz_check_json(const cJSON *j, const char *where);

/* A small valid model and profile to pair with a fuzzed other half. */
void fz_default_model(ModelSpec *m);
void fz_default_hw(HwProfile *hw);

/* Write bytes to a private temporary file whose path stays the same for the
 * whole run; returns the path. */
const char *fz_temp_file(const char *tag, const uint8_t *data, size_t size);

#endif
