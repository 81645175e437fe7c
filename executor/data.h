/* data.h — the token data loader: llm.c token shards or plain text, cut into
 * (B, T) micro-batches, each data-parallel rank reading its own slice.
 *
 * Files. A pattern is expanded with glob(3) and the matches sorted by name
 * (strcmp), so the order is the same on every rank and every run.
 *   - A name ending in ".bin" is an llm.c token shard: a header of 256 int32
 *     (header[0] magic, header[1] version, header[2] token count), then the
 *     tokens: uint16 if magic is 20240520, uint32 if it is 20240801.
 *   - Any other file is plain text with a byte-level tokenizer: each byte is
 *     one token (vocab 256), so the executor can train on any file.
 *
 * Batches. A global batch is dp_size·B·T consecutive tokens of one file (plus
 * one more for the last target). DP rank r gets rows r·B .. r·B+B−1 of it:
 * tokens [offset + r·B·T, offset + (r+1)·B·T], inputs the first B·T of them,
 * targets the same shifted by one. So the ranks' slices are disjoint and,
 * concatenated in rank order, equal the batch of one rank with B' = dp_size·B.
 * When the next global batch does not fit in the rest of a file, the loader
 * moves to the start of the next file; after the last file it wraps to the
 * first and counts an epoch. Every file must hold at least dp_size·B·T + 1
 * tokens.
 *
 * What it doesn't do: shuffle, prefetch in a thread, or mix files within a
 * batch. Tokens are checked against the vocabulary as they are read, so a bad
 * token is reported by data_next_batch, not by data_init.
 */
#ifndef ULTRAPLAN_EXECUTOR_DATA_H
#define ULTRAPLAN_EXECUTOR_DATA_H

#include <stddef.h>
#include <stdio.h>

#define DATA_MAGIC_U16 20240520   // llm.c shard, uint16 tokens
#define DATA_MAGIC_U32 20240801   // llm.c shard, uint32 tokens
#define DATA_HEADER_INTS 256      // int32 header before the tokens
#define DATA_TEXT_VOCAB 256       // byte-level tokenizer

/* Where the next global batch starts; save it in a checkpoint and give it
 * back with data_set_pos to resume exactly. */
typedef struct {
    int shard;            // index into the sorted file list
    long long offset;     // tokens from the start of that file's token data
    long long epoch;      // completed passes over all files
} DataPos;

typedef struct {
    char *path;
    int text;             // 1: plain text (byte tokens); 0: llm.c shard
    int tsize;            // bytes per token: 1, 2 or 4
    long long ntok;       // tokens in the file
} DataFile;

typedef struct {
    int B, T;             // micro-batch rows, tokens per row
    int dp_rank, dp_size; // this rank's slice of each global batch
    int vocab;            // tokens must be < vocab; 0 = only the format's limit
    int nfiles;
    DataFile *files;      // (nfiles), sorted by path
    DataPos pos;          // where the next global batch starts
    FILE *fp;             // open handle of files[fp_index], or NULL
    int fp_index;
    unsigned char *buf;   // raw tokens of one slice, (B·T + 1)·4 bytes
} DataLoader;

/* Opens every file the pattern (a glob or a plain path) names and checks its
 * header and size. vocab: the model's vocabulary (unpadded), 0 for no check.
 * Returns 0, or −1 with a one-line message naming the file in err. On error
 * the loader holds nothing (data_free is still safe). */
int data_init(DataLoader *dl, const char *pattern, int B, int T, int dp_rank,
              int dp_size, int vocab, char *err, size_t errlen);

/* Fills inputs (B·T) and targets (B·T), row-major (B, T), with this rank's
 * slice of the next global batch and advances. Returns 0, or −1 with err
 * (I/O error, token ≥ vocab); the position is then unchanged. */
int data_next_batch(DataLoader *dl, int *inputs, int *targets, char *err, size_t errlen);

DataPos data_get_pos(const DataLoader *dl);

/* Returns 0, or −1 with err if pos does not name a place in these files. */
int data_set_pos(DataLoader *dl, DataPos pos, char *err, size_t errlen);

/* Tokens in all files together. */
long long data_total_tokens(const DataLoader *dl);

void data_free(DataLoader *dl);

#endif
