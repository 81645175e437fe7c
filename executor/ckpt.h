/* ckpt.h — the checkpoint format and its commit protocol, shared by both
 * backends. A backend describes what one rank saves as a CkptState of host
 * buffers (the CPU executor points at its slabs; the CUDA executor copies
 * its device tensors out first) and calls ckpt_save / ckpt_load; the file
 * layout, CRC-32, atomic writes, the manifest, the agreement across ranks
 * and the removal of old steps live here only. Layout of DIR:
 *
 *   DIR/step-000100/rank_00000.ckpt ...   one file per rank: header, fp32
 *                                         weights (n_alloc), AdamW m and v
 *                                         (opt_n each)
 *   DIR/manifest.json                     the commit point: step, layout, the
 *                                         model shape, and per rank file its
 *                                         size and CRC-32
 *
 * The weights are the rank's full fp32 view of its stage's parameters (also
 * under ZeRO-1, where m and v are its 1/dp shard, and ZeRO-2/3, where m and
 * v are its slice of every unit in unit order and ZeRO-3 gathers the
 * weights to save them), so a file says the same whichever backend wrote it. Both the manifest and every rank header carry
 * the model and layout shape (ckpt_shape; the header as its CRC-32), so a
 * checkpoint loads only into a plan of the same shape, not merely one with
 * as many parameters.
 *
 * Removal of old steps touches only what this code writes (step-N
 * directories holding rank_R.ckpt files and their temporary leftovers, and
 * manifest.json's leftovers), never follows a symbolic link and never
 * leaves DIR; a step directory holding anything else stays, with a warning.
 *
 * What it doesn't: node-local directories (rank 0 writes the manifest and
 * removes old steps), RNG state (nothing random after initialisation: no
 * dropout), a backend tag (the files are the same).
 */
#ifndef ULTRAPLAN_EXECUTOR_CKPT_H
#define ULTRAPLAN_EXECUTOR_CKPT_H

#include <stddef.h>
#include <stdint.h>

#include "data.h"
#include "layout.h"
#include "spec.h"

typedef struct {
    int step;                    // optimizer steps done
    int world, rank;             // ranks of the run, this one
    int dp, tp, pp, vp;          // the layout's group sizes (the compatibility check)
    int opt;                     // the layout's optimizer (LayoutOpt: ZeRO stage)
    size_t n_alloc;              // floats of w: this stage's parameters, padded for ZeRO-1
    size_t opt_n;                // floats of m and of v: all n_alloc, or this rank's ZeRO-1/2/3 shard
    DataPos pos;                 // data loader position after `step` steps
    const ModelSpec *model;      // the plan's model (validated): the shape check
    const Layout *lo;            // the plan's layout (checked): its stage split, for the shape check
    float *w;                    // (n_alloc) fp32 weights, host
    float *m, *v;                // (opt_n) AdamW moments, host
} CkptState;

/* Write s as dir/step-NNNNNN/rank_RRRRR.ckpt and, on rank 0 once every
 * rank's file is in place, dir/manifest.json; then remove older steps and
 * leftover temporary files. Temp name, fsync, rename throughout, so a
 * failure at any point leaves the previous checkpoint valid; after a failed
 * write (of a rank file or of the manifest) the new step's files are
 * removed. Collective over the world: every rank gets the same result and
 * the first failing rank's message. */
int ckpt_save(const CkptState *s, const char *dir, char *err, int errlen);

/* Read the checkpoint the manifest in dir names into s->w, s->m, s->v after
 * checking every field of the manifest (format, a step >= 0, "dir" exactly
 * that step's directory, a real directory inside dir, world and layout and
 * model shape equal to s's, one entry per rank with its name and exact
 * integer size and CRC-32) and of the file's header (step, world, rank,
 * layout, n_alloc, opt_n, shape, data position), and the file's size and
 * CRC-32 against both; on success s->step and s->pos are the file's, and dl
 * (nullable) is moved to that position. A file that fails a check is never
 * loaded (err names it). Collective, as ckpt_save. */
int ckpt_load(CkptState *s, const char *dir, DataLoader *dl, char *err, int errlen);

/* The canonical text of what a checkpoint's shape must match: the model's
 * layers, hidden, heads, KV heads, head dim, FFN, vocabulary and its padding
 * rule, sequence, MLP/norm/position kinds, bias, tied embedding, and the
 * layout's stage split. Equal texts, equal tensors. */
/* ---- the file format (FAULTS.md): a header per rank file, a JSON manifest ---- */

#define CKPT_MAGIC 0x4B435055u   // "UPCK"
#define CKPT_VERSION 3
#define CKPT_FORMAT "ultraplan.checkpoint/3"
#define CKPT_FORMAT_STEM "ultraplan.checkpoint/"

/* The 88-byte header that starts every rank file. */
typedef struct {
    unsigned magic, version;
    int step, world, rank, dp, tp, pp, vp, opt;
    long long n_alloc, opt_n;
    DataPos pos;
    uint32_t crc;                // CRC-32 of the file with this field zero
    uint32_t shape;              // CRC-32 of ckpt_shape's text (version 3; version 2 had 0 here)
} CkptHeader;
_Static_assert(sizeof(CkptHeader) == 88, "the rank file header is 88 bytes (FAULTS.md, test_ckpt's pinned CRC)");

/* This rank's entry of a checkpoint's manifest, validated. */
typedef struct {
    int step;
    char stepdir[32];            // step-NNNNNN
    long long bytes;             // of this rank's file
    uint32_t crc;
} CkptManifest;

/* Validate manifest text (read from path, which errors name) in full against
 * the run in s: format and version, no key twice, step, world, layout and
 * model shape equal to the plan's, the step directory's exact name, every
 * rank's file name, exact byte count and CRC. 0 with *mf, or -1 with err
 * ("resume: PATH ...; refusing to load"). Pure: no I/O, no MPI. */
int ckpt_manifest_check(const char *text, const char *path, const CkptState *s, CkptManifest *mf, char *err,
                        int errlen);

/* The names checkpoints use: step-NNNNNN (6 digits or more), rank_NNNNN.ckpt. */
void ckpt_step_name(char *buf, size_t n, int step);
void ckpt_rank_name(char *buf, size_t n, int rank);

#define CKPT_SHAPE_MAX 3200        // bytes of ckpt_shape's text: 256 stages of any split fit
void ckpt_shape(const ModelSpec *m, const Layout *lo, char *buf, size_t n);

/* CRC-32 (IEEE 802.3, zlib's crc32) of p[0..n) continuing crc (0 to start). */
uint32_t ckpt_crc32(uint32_t crc, const void *p, size_t n);

#endif
