/* exec.h — one rank of a training run under a plan's layout: the decoder
 * (GPT or Llama) in fp32 on the CPU, its slabs, the pipeline schedule, the
 * tensor-, pipeline- and data-parallel communication, AdamW, timers.
 *
 * Memory lives in five slabs, one per category, each carved by a table:
 *   weights, grads   the ParamSet of this stage (params.h)
 *   optim            AdamW m and v: all params, or a 1/dp shard under ZeRO-1
 *   acts             per in-flight (chunk, micro-batch) slot the tensors the
 *                    backward reads (the Korthikanti terms the cost model
 *                    counts), the recompute working set, the last stage's
 *                    final-norm input/output and logits
 *   buffers          backward scratch, SP gather buffers, PP send ring, tokens,
 *                    the context-parallel ring's K/V blocks and dK/dV
 *                    accumulators (cpattn.h)
 *
 * The loss backward is fused into the last chunk's forward (dlogits are
 * formed while the logits are hot), so the head's buffers are held for one
 * micro-batch at a time. Selective recomputation recomputes the attention
 * core, which the flash-style kernel already does in every backward, so a
 * selectively recomputed layer runs like a plain one.
 *
 * Context parallel (cp > 1): a rank holds chunks cp_rank and 2·cp−1−cp_rank
 * of every sequence (cpattn.h), so every per-token tensor has N = B·T/cp rows
 * (Nl = N/tp under SP); it reads the same rows as the other ranks of its dp
 * rank and keeps its chunks' tokens and targets; learned positions and RoPE
 * use the global positions, attention is the ring of cpattn.c, the loss
 * scale counts the full B·T tokens, and gradients are reduced (ZeRO-0) or
 * reduce-scattered (ZeRO-1) over the dp·cp ranks of Dist.dpcp_comm.
 *
 * What it doesn't do: dropout, mixed precision, ZeRO-2/3.
 */
#ifndef ULTRAPLAN_EXECUTOR_EXEC_H
#define ULTRAPLAN_EXECUTOR_EXEC_H

#include <stdint.h>

#include "cpattn.h"
#include "data.h"
#include "dist.h"
#include "params.h"
#include "runfile.h"   // ExecMem, Phase: run.json's vocabulary
#include "sched.h"

typedef struct {
    float lr, beta1, beta2, eps, weight_decay;
    uint64_t seed;
} TrainOpts;

void exec_default_opts(TrainOpts *o);

/* The tensors one layer's backward reads, for one micro-batch. */
typedef struct {
    float *x;                    // (Nl, C) layer input (residual stream)
    float *a1, *mean1, *rstd1;   // (Nl, C), (Nl), (Nl) first norm
    float *q, *k, *v;            // (N, ql), (N, kvl), (N, kvl), after RoPE
    float *o, *lse;              // (N, ql) attention output, (B, NHl, Tl)
    float *x2;                   // (Nl, C) after the attention residual
    float *a2, *mean2, *rstd2;   // second norm
    float *hpre, *hact;          // (N, F1l) FC1 output, (N, Fl) activation
} LayerActs;

typedef struct {
    LayerActs *la;               // (layers of the largest chunk)
    float *dlast;                // (Nl, C) loss gradient at the last chunk's output (last stage)
} Slot;

typedef struct {
    double loss;                 // mean over the global batch, nats
    double t[PH_COUNT];          // seconds by phase (exposed comm for TP, PP, DP)
    double step_s;               // wall seconds of the step
} StepStats;

typedef struct {
    ModelSpec m;
    Layout lo;
    TrainOpts opt;
    Dist d;
    StageMap sm;
    ParamSet ps;
    Schedule sch;
    DataLoader dl;
    int step;                    // optimizer steps done
    /* shapes, local to this rank */
    int B, T, N, Nl, C, HS, NHl, NKVl, ql, kvl, F1l, Fl, Vl, vstart, nmb;
    int Tl;                      // tokens of a row on this rank: T/cp (N = B·Tl)
    CpAttn cpa;                  // the cp ring (cp > 1)
    const int *cpos;             // (Tl) global positions of the local tokens; NULL when cp is 1
    int *rowtok;                 // (2·B·T) whole rows read before the chunks are kept (cp > 1)
    int maxchunk;                // layers of the largest chunk
    int *rc;                     // (nlayers) 0 none, 1 selective, 2 full
    /* optimizer */
    float *om, *ov;              // (opt_n) AdamW moments
    size_t opt_n, opt_off;       // shard size and its offset in the param slab
    /* slabs */
    float *acts;
    size_t acts_n;               // floats
    float *bufs;
    size_t bufs_n;
    Slot *slots;
    int nslots;
    int *slot_of;                // (vp·m) slot held by (chunk, mb), -1 none
    int *slot_free;              // (nslots)
    LayerActs ws;                // recompute working set
    float *head_in, *head_n, *head_mean, *head_rstd, *logits, *ce_loss, *ce_lse;
    /* scratch */
    float *gath, *part, *dres, *dgat, *dcol, *dq, *dk, *dv, *dout, *drope, *dhpre, *dhact, *rc_out;
    float *send_ring;
    int nsend;                   // ring entries
    int send_next;
    DistReq *send_req;
    int *tokens, *targets;       // (nmb, N)
    /* per-layer DP buckets */
    size_t *lay_start, *lay_n;
    DistReq *dp_req;         // (nlayers + 1)
    int ndp_req;
    /* accounting */
    double mem[XM_COUNT];        // bytes allocated by category
    double t[PH_COUNT];          // this step's phase timers
    double loss_sum;
} Exec;

/* Build this rank's part of the model for a checked layout (fp32) and
 * open the data. Needs MPI initialised. 0, or -1 with err (world size,
 * shapes the executor can't split, data). Collective: every rank calls it. */
/* The sizes a plan may ask of the executor, checked in 64 bits before
 * anything is allocated (a hostile plan file must not overflow the step's
 * int products): tokens per micro-batch, micro-batches x chunks per step,
 * tokens per rank and step. 0, or -1 with err naming the plan's fields. */
#define EXEC_MAX_MB_TOKENS (1LL << 24)
#define EXEC_MAX_MB_CHUNKS (1LL << 20)
#define EXEC_MAX_STEP_TOKENS (1LL << 30)
int exec_check_sizes(const ModelSpec *m, const Layout *lo, char *err, int errlen);
int exec_init(Exec *e, const ModelSpec *m, const Layout *lo, const TrainOpts *o,
              const char *data, char *err, int errlen);

/* One optimizer step over gbs sequences. Collective. */
int exec_step(Exec *e, StepStats *st, char *err, int errlen);

/* Bytes this rank allocated by category. */
void exec_memory(const Exec *e, double out[XM_COUNT]);

/* Checkpoint: one file per rank in dir/step-NNNNNN/ plus dir/manifest.json
 * (sizes and CRC-32s) written by rank 0 last; temp name, fsync, rename; older
 * step directories are removed once the new manifest is in place, so a
 * failure at any point leaves the previous checkpoint valid. Load verifies
 * sizes and checksums, checks the layout and restores weights, optimizer
 * moments, step and data position; a file that fails its check is never
 * loaded (err names it). Collective: every rank gets
 * the same result and the first failing rank's message. */
int exec_save(Exec *e, const char *dir, char *err, int errlen);
int exec_load(Exec *e, const char *dir, char *err, int errlen);
/* dir/step-NNNNNN: where the checkpoint of a step lives. */
void exec_ckpt_path(char *buf, size_t n, const char *dir, int step);

void exec_free(Exec *e);

#endif
