/* test_util.c — util/: the one atomic writer never follows or reuses a
 * planted file, leaves the target as it was on failure, and the output
 * checks and the reader say what is wrong. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fileio.h"
#include "fmt.h"

static char dir[64];

static int setup(void **state)
{
    (void)state;
    snprintf(dir, sizeof dir, "/tmp/test_util-XXXXXX");
    return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    return system(cmd) == 0 ? 0 : -1;
}

static void put(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static char *get(const char *path)
{
    char err[256];
    char *t = util_slurp(path, 0, NULL, err, sizeof err);
    if (!t)
        fail_msg("%s", err);
    return t;
}

/* A symbolic link planted where a writer puts its temporary file (the old
 * writers used PATH.tmp.PID, opened with O_TRUNC and following links) must
 * not make the write land in the link's target. */
static void test_planted_link(void **state)
{
    (void)state;
    char out[128], victim[128], link1[160], link2[160], err[256];
    snprintf(out, sizeof out, "%s/out.json", dir);
    snprintf(victim, sizeof victim, "%s/victim", dir);
    put(victim, "precious\n");
    snprintf(link1, sizeof link1, "%s.tmp.%ld", out, (long)getpid());
    snprintf(link2, sizeof link2, "%s.tmp.%ld.0", out, (long)getpid());
    assert_int_equal(symlink(victim, link1), 0);
    assert_int_equal(symlink(victim, link2), 0);
    assert_int_equal(util_write_atomic(out, "{\"ok\": true}", err, sizeof err), 0);
    char *v = get(victim), *o = get(out);
    assert_string_equal(v, "precious\n");
    assert_string_equal(o, "{\"ok\": true}\n");
    free(v);
    free(o);
    struct stat sb;
    assert_int_equal(lstat(link1, &sb), 0);   /* the planted links are left alone, not followed */
    assert_true(S_ISLNK(sb.st_mode));
    unlink(link1);
    unlink(link2);
}

/* A failed write leaves the old file and no temporary. */
static void test_failure_keeps_old(void **state)
{
    (void)state;
    char out[128], sub[128], err[256];
    snprintf(sub, sizeof sub, "%s/missing", dir);
    snprintf(out, sizeof out, "%s/missing/x.csv", dir);
    assert_int_equal(util_write_atomic(out, "a,b", err, sizeof err), -1);
    assert_non_null(strstr(err, out));
    assert_int_equal(util_check_writable(out, err, sizeof err), -1);
    assert_non_null(strstr(err, "does not exist"));
    assert_int_equal(util_check_writable(dir, err, sizeof err), -1);
    assert_non_null(strstr(err, "is a directory"));
    (void)sub;
}

static void test_slurp_limits(void **state)
{
    (void)state;
    char p[128], err[256];
    snprintf(p, sizeof p, "%s/big", dir);
    put(p, "0123456789");
    size_t n = 0;
    char *t = util_slurp(p, 10, &n, err, sizeof err);
    assert_non_null(t);
    assert_int_equal(n, 10);
    free(t);
    assert_null(util_slurp(p, 9, &n, err, sizeof err));
    assert_non_null(strstr(err, "larger than 9 bytes"));
    char si[32];
    assert_string_equal(util_si(3.49e12, 3, si, sizeof si), "3.49T");
    assert_string_equal(util_si(999.7, 3, si, sizeof si), "1K");
    /* numbers people read (issue 17 item 19) */
    assert_string_equal(util_si(1e30, 3, si, sizeof si), "1e+30");          /* was "1e+15P" */
    assert_string_equal(util_bytes(1.53e6, si, sizeof si), "1.53 MB");      /* was "1.53M" */
    assert_string_equal(util_bytes(2.44e12, si, sizeof si), "2.44 TB");
    assert_string_equal(util_bytes(94.3e9, si, sizeof si), "94.3 GB");
    assert_string_equal(util_bytes(512, si, sizeof si), "512 B");
    assert_string_equal(util_duration(396, si, sizeof si), "6.6 min");      /* was "0.0 days" */
    assert_string_equal(util_duration(166.17 * 86400, si, sizeof si), "166.2 days");
    assert_string_equal(util_duration(1.18e20 * 86400, si, sizeof si), "1.18e+20 days");
    assert_string_equal(util_pct(0.0000039, si, sizeof si), "0.00039%");   /* was "0.0%" */
    assert_string_equal(util_pct(0.517, si, sizeof si), "51.7%");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_planted_link),
        cmocka_unit_test(test_failure_keeps_old),
        cmocka_unit_test(test_slurp_limits),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
