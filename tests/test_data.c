/* test_data.c — the token data loader on small shards and text written to a
 * temporary directory: tokens read, DP slices, wrap-around, save/restore of the
 * position, and every error case. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "data.h"

static char dir[64];
static char err[512];

static const char *path_of(const char *name) {
    static char buf[4][256];
    static int k;
    k = (k + 1) % 4;
    snprintf(buf[k], sizeof buf[k], "%s/%s", dir, name);
    return buf[k];
}

/* an llm.c shard: header declares `declared` tokens, `n` are written */
static void write_shard(const char *name, int magic, int declared,
                        const uint32_t *tok, int n) {
    FILE *f = fopen(path_of(name), "wb");
    assert_non_null(f);
    int32_t hdr[DATA_HEADER_INTS] = {magic, 1, declared};
    fwrite(hdr, sizeof hdr, 1, f);
    for (int i = 0; i < n; i++) {
        if (magic == DATA_MAGIC_U32) fwrite(&tok[i], 4, 1, f);
        else { uint16_t u = (uint16_t)tok[i]; fwrite(&u, 2, 1, f); }
    }
    fclose(f);
}

static void write_seq_shard(const char *name, int magic, uint32_t first, int n) {
    uint32_t *tok = malloc(n * sizeof *tok);
    for (int i = 0; i < n; i++) tok[i] = first + (uint32_t)i;
    write_shard(name, magic, n, tok, n);
    free(tok);
}

static int setup(void **state) {
    (void)state;
    strcpy(dir, "/tmp/up_test_data_XXXXXX");
    if (!mkdtemp(dir)) return -1;
    write_seq_shard("a_000.bin", DATA_MAGIC_U16, 0, 1000);
    write_seq_shard("a_001.bin", DATA_MAGIC_U16, 1000, 700);
    write_seq_shard("a_002.bin", DATA_MAGIC_U32, 100000, 500);
    FILE *f = fopen(path_of("text.txt"), "w");
    fputs("hello, byte-level world! ", f);
    for (int i = 0; i < 10; i++) fputs("0123456789", f);
    fclose(f);
    return 0;
}

static int teardown(void **state) {
    (void)state;
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    return system(cmd) == 0 ? 0 : -1;
}

static void test_u16_tokens(void **state) {
    (void)state;
    DataLoader dl;
    assert_int_equal(data_init(&dl, path_of("a_000.bin"), 2, 4, 0, 1, 50257, err, sizeof err), 0);
    int in[8], tg[8];
    for (int step = 0; step < 3; step++) {
        assert_int_equal(data_next_batch(&dl, in, tg, err, sizeof err), 0);
        for (int i = 0; i < 8; i++) {
            assert_int_equal(in[i], step * 8 + i);
            assert_int_equal(tg[i], step * 8 + i + 1);
        }
    }
    assert_int_equal(data_total_tokens(&dl), 1000);
    data_free(&dl);
}

static void test_u32_tokens(void **state) {
    (void)state;
    DataLoader dl;
    assert_int_equal(data_init(&dl, path_of("a_002.bin"), 1, 5, 0, 1, 0, err, sizeof err), 0);
    int in[5], tg[5];
    assert_int_equal(data_next_batch(&dl, in, tg, err, sizeof err), 0);
    for (int i = 0; i < 5; i++) {
        assert_int_equal(in[i], 100000 + i);
        assert_int_equal(tg[i], 100001 + i);
    }
    data_free(&dl);
}

static void test_text(void **state) {
    (void)state;
    DataLoader dl;
    assert_int_equal(data_init(&dl, path_of("text.txt"), 1, 6, 0, 1, DATA_TEXT_VOCAB,
                               err, sizeof err), 0);
    int in[6], tg[6];
    assert_int_equal(data_next_batch(&dl, in, tg, err, sizeof err), 0);
    for (int i = 0; i < 6; i++) {
        assert_int_equal(in[i], (unsigned char)"hello, "[i]);
        assert_int_equal(tg[i], (unsigned char)"hello, "[i + 1]);
    }
    data_free(&dl);
}

/* the concatenated slices of dp ranks equal the batch of one rank with dp·B
 * rows, over enough steps to cross both file boundaries and wrap around */
static void dp_case(int dp) {
    int B = 2, T = 7, steps = 120;
    const char *pat = path_of("a_00[01].bin");
    DataLoader one, r[4];
    assert_int_equal(data_init(&one, pat, dp * B, T, 0, 1, 0, err, sizeof err), 0);
    for (int k = 0; k < dp; k++)
        assert_int_equal(data_init(&r[k], pat, B, T, k, dp, 0, err, sizeof err), 0);
    int n = dp * B * T;
    int *gin = malloc(n * sizeof(int)), *gtg = malloc(n * sizeof(int));
    int *in = malloc(n * sizeof(int)), *tg = malloc(n * sizeof(int));
    for (int s = 0; s < steps; s++) {
        assert_int_equal(data_next_batch(&one, gin, gtg, err, sizeof err), 0);
        for (int k = 0; k < dp; k++)
            assert_int_equal(data_next_batch(&r[k], in + k * B * T, tg + k * B * T,
                                             err, sizeof err), 0);
        // tokens are unique in these files, so equal arrays mean disjoint slices
        // that cover the global batch exactly
        assert_memory_equal(in, gin, n * sizeof(int));
        assert_memory_equal(tg, gtg, n * sizeof(int));
        for (int k = 0; k < dp; k++)
            for (int j = k + 1; j < dp; j++)
                assert_true(in[k * B * T] != in[j * B * T]);
    }
    assert_true(data_get_pos(&one).epoch >= 1);   // wrapped at least once
    for (int k = 0; k < dp; k++) {
        DataPos a = data_get_pos(&one), b = data_get_pos(&r[k]);
        assert_int_equal(a.shard, b.shard);
        assert_int_equal(a.offset, b.offset);
        assert_int_equal(a.epoch, b.epoch);
        data_free(&r[k]);
    }
    data_free(&one);
    free(gin); free(gtg); free(in); free(tg);
}

static void test_dp_slices(void **state) {
    (void)state;
    dp_case(2);
    dp_case(4);
}

static void test_wrap(void **state) {
    (void)state;
    // one file of 1000 tokens, global batch 4·50 = 200 → 4 batches fit (801 ≤ 1000)
    DataLoader dl;
    assert_int_equal(data_init(&dl, path_of("a_000.bin"), 4, 50, 0, 1, 0, err, sizeof err), 0);
    int in[200], tg[200];
    for (int s = 0; s < 4; s++) {
        assert_int_equal(data_next_batch(&dl, in, tg, err, sizeof err), 0);
        assert_int_equal(in[0], s * 200);
    }
    assert_int_equal(data_get_pos(&dl).epoch, 0);
    assert_int_equal(data_next_batch(&dl, in, tg, err, sizeof err), 0);
    assert_int_equal(in[0], 0);
    assert_int_equal(data_get_pos(&dl).epoch, 1);
    data_free(&dl);
}

static void test_save_restore(void **state) {
    (void)state;
    const char *pat = path_of("a_*.bin");
    DataLoader a, b;
    assert_int_equal(data_init(&a, pat, 3, 16, 1, 2, 0, err, sizeof err), 0);
    assert_int_equal(data_init(&b, pat, 3, 16, 1, 2, 0, err, sizeof err), 0);
    int in1[48], tg1[48], in2[48], tg2[48];
    for (int s = 0; s < 17; s++) assert_int_equal(data_next_batch(&a, in1, tg1, err, sizeof err), 0);
    DataPos p = data_get_pos(&a);
    assert_int_equal(data_next_batch(&a, in1, tg1, err, sizeof err), 0);
    assert_int_equal(data_set_pos(&b, p, err, sizeof err), 0);
    assert_int_equal(data_next_batch(&b, in2, tg2, err, sizeof err), 0);
    assert_memory_equal(in1, in2, sizeof in1);
    assert_memory_equal(tg1, tg2, sizeof tg1);
    DataPos bad = {7, 0, 0};
    assert_int_equal(data_set_pos(&b, bad, err, sizeof err), -1);
    data_free(&a);
    data_free(&b);
}

/* init fails with a message naming `name` */
static void expect_init_error(const char *pattern, const char *name, int B, int T, int vocab) {
    DataLoader dl;
    err[0] = 0;
    assert_int_equal(data_init(&dl, pattern, B, T, 0, 1, vocab, err, sizeof err), -1);
    printf("  expected error: %s\n", err);
    assert_non_null(strstr(err, name));
    assert_null(strchr(err, '\n'));
    data_free(&dl);
}

static void test_errors(void **state) {
    (void)state;
    expect_init_error(path_of("missing.bin"), "missing.bin", 1, 4, 0);
    expect_init_error(path_of("nothing_*.bin"), "nothing_*.bin", 1, 4, 0);

    uint32_t tok[64];
    for (int i = 0; i < 64; i++) tok[i] = (uint32_t)i;
    write_shard("badmagic.bin", 12345, 64, tok, 64);
    expect_init_error(path_of("badmagic.bin"), "badmagic.bin", 1, 4, 0);

    write_shard("trunc.bin", DATA_MAGIC_U16, 64, tok, 40);
    expect_init_error(path_of("trunc.bin"), "trunc.bin", 1, 4, 0);

    FILE *f = fopen(path_of("short.bin"), "wb");   // shorter than the header
    fputs("xx", f);
    fclose(f);
    expect_init_error(path_of("short.bin"), "short.bin", 1, 4, 0);

    expect_init_error(path_of("a_002.bin"), "a_002.bin", 10, 50, 0);   // 500 < 501 tokens

    // a token outside the vocabulary is reported by next_batch
    tok[5] = 60000;
    write_shard("bigtok.bin", DATA_MAGIC_U16, 64, tok, 64);
    DataLoader dl;
    assert_int_equal(data_init(&dl, path_of("bigtok.bin"), 1, 8, 0, 1, 50257, err, sizeof err), 0);
    int in[8], tg[8];
    assert_int_equal(data_next_batch(&dl, in, tg, err, sizeof err), -1);
    printf("  expected error: %s\n", err);
    assert_non_null(strstr(err, "bigtok.bin"));
    assert_int_equal(data_get_pos(&dl).offset, 0);   // position unchanged
    data_free(&dl);

    DataLoader d2;   // bad shape
    assert_int_equal(data_init(&d2, path_of("a_000.bin"), 1, 4, 2, 2, 0, err, sizeof err), -1);
    data_free(&d2);
    data_free(NULL);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_u16_tokens),
        cmocka_unit_test(test_u32_tokens),
        cmocka_unit_test(test_text),
        cmocka_unit_test(test_dp_slices),
        cmocka_unit_test(test_wrap),
        cmocka_unit_test(test_save_restore),
        cmocka_unit_test(test_errors),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
