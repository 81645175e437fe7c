/* test_plot.c — what cli/plot.c writes into gnuplot scripts: log-axis
 * ticks that label a one-decade range several times (the validate plots had
 * one labelled tick per axis), and user text as single-quoted strings. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plot.h"

static char *capture_tics(const char *axis, double lo, double hi)
{
    char *buf = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&buf, &n);
    plot_log_tics(f, axis, lo, hi);
    fclose(f);
    return buf;
}

static void test_log_tics(void **state)
{
    (void)state;
    char *t = capture_tics("xtics", 46, 2400);
    assert_string_equal(t, "set xtics (50, 100, 200, 500, 1000, 2000)\n");
    free(t);
    t = capture_tics("cbtics", 2, 8);   /* the single-node colour bar: was only "1" */
    assert_string_equal(t, "set cbtics (2, 5)\n");
    free(t);
    t = capture_tics("ytics", 0.9, 1.1);
    assert_string_equal(t, "set ytics (1)\n");
    free(t);
}

static void test_quote(void **state)
{
    (void)state;
    char *buf = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&buf, &n);
    plot_quote(f, "it's `rm -rf x` @macro\nnext");
    fclose(f);
    /* single quotes: no backquote or macro substitution; a quote doubled; one line */
    assert_string_equal(buf, "'it''s `rm -rf x` @macro next'");
    free(buf);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_log_tics),
        cmocka_unit_test(test_quote),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
