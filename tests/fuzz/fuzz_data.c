/* fuzz_data.c — the token-shard loader (executor/data.c): llm.c's .bin
 * shards (a 256-int32 header, then uint16 or uint32 tokens) and plain text
 * read as bytes.
 *
 * The input becomes a file; a loader that accepts it must hand out only
 * tokens below the vocabulary, refuse with a message that names the file,
 * keep its position when it refuses, and take back any position it gave.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common.h"
#include "data.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > (1 << 20))
        return 0;
    char path[] = "/tmp/fuzz_data_XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0)
        return 0;
    if (write(fd, data, size) != (ssize_t)size) {
        close(fd);
        unlink(path);
        return 0;
    }
    close(fd);
    enum { B = 2, T = 8, VOCAB = 300 };
    DataLoader dl;
    char err[512] = "";
    int in[B * T], tg[B * T];
    if (data_init(&dl, path, B, T, 0, 1, VOCAB, err, sizeof err) != 0) {
        if (!err[0]) {
            fprintf(stderr, "fuzz_data: refused without a reason\n");
            abort();
        }
        data_free(&dl);
        unlink(path);
        return 0;
    }
    for (int step = 0; step < 4; step++) {
        DataPos before = data_get_pos(&dl);
        err[0] = 0;
        if (data_next_batch(&dl, in, tg, err, sizeof err) != 0) {
            DataPos after = data_get_pos(&dl);
            if (!err[0] || memcmp(&before, &after, sizeof before) != 0) {
                fprintf(stderr, "fuzz_data: a refused batch %s\n", err[0] ? "moved the position" : "says nothing");
                abort();
            }
            break;
        }
        for (int i = 0; i < B * T; i++)
            if (in[i] < 0 || in[i] >= VOCAB || tg[i] < 0 || tg[i] >= VOCAB) {
                fprintf(stderr, "fuzz_data: token %d / %d outside the vocabulary of %d\n", in[i], tg[i], VOCAB);
                abort();
            }
        if (data_set_pos(&dl, before, err, sizeof err) != 0) {
            fprintf(stderr, "fuzz_data: the loader refused its own position: %s\n", err);
            abort();
        }
        if (data_next_batch(&dl, in, tg, err, sizeof err) != 0) {
            fprintf(stderr, "fuzz_data: the same batch refused the second time: %s\n", err);
            abort();
        }
    }
    data_free(&dl);
    unlink(path);
    return 0;
}
