/* cuexec.h — training on one NVIDIA GPU, bf16 mixed precision: the same
 * decoder (GPT or Llama), parameter table and seeded initialisation as the
 * CPU executor (params.h), so a CUDA run and a single-rank CPU run of the
 * same plan and seed give the same losses within bf16 rounding.
 *
 * Device memory lives in one allocation per category, counted as the cost
 * model counts them: weights (bf16 copy the GEMMs read), grads (fp32), optim
 * (fp32 master + AdamW m, v), acts (per layer the tensors the backward reads;
 * only x for a fully recomputed layer; the recompute working set; the head's
 * logits), buffers (backward scratch, tokens, losses). Micro-batches run
 * forward then backward one after another (1F1B with one stage), so one
 * micro-batch's activations are live at a time.
 *
 * Proxy mode runs the exact per-rank work of one pipeline stage of a larger
 * plan (proxy.h shapes: tp-sharded widths, heads/tp, its recomputation) on
 * this GPU: no optimizer, random weights and inputs, TP/SP/PP communication
 * not executed (the cost model's figure for it is reported instead).
 *
 * What it doesn't do: more than one GPU (no NCCL yet: dp, tp, pp, cp must be
 * 1 outside proxy mode), dropout, ZeRO, checkpoints, sequence-parallel norm
 * sharding in the proxy (norms run over all N rows: a small overcount).
 */
#ifndef ULTRAPLAN_EXECUTOR_CUDA_CUEXEC_H
#define ULTRAPLAN_EXECUTOR_CUDA_CUEXEC_H

#include <stdint.h>

#include "data.h"
#include "exec.h"     // Phase, ExecMem, TrainOpts: the CPU executor's vocabulary
#include "kernels_cuda.h"
#include "proxy.h"

/* The proxy runs at most this many of the plan's m micro-batches per step. */
#define CUEXEC_PROXY_MAX_MB 8

typedef struct {
    kc_bf16 *x;                        // (N, C) layer input
    kc_bf16 *a1, *q, *k, *v, *o, *x2, *a2, *hpre, *hact;   // see LayerActs in exec.h
    float *mean1, *rstd1, *lse, *mean2, *rstd2;             // (N), (N), (B, NHl, T), (N), (N)
} CuActs;

typedef struct {
    ModelSpec m;
    Layout lo;
    TrainOpts opt;
    ProxyShape sh;                     // shapes of this rank (stage 0 of pp 1 when not a proxy)
    int proxy;                         // 1: one stage of a larger plan, no optimizer
    StageMap sm;
    ParamSet ps;                       // offsets only; w and g stay NULL (device slabs below)
    DataLoader dl;
    int have_data;
    int step;
    int nmb;                           // micro-batches per step (proxy: at most CUEXEC_PROXY_MAX_MB)
    int *rc;                           // (layers) 0 none, 1 selective, 2 full
    cudaStream_t st;
    /* slabs */
    void *slab[XM_COUNT];
    double mem[XM_COUNT];              // bytes allocated by category
    kc_bf16 *wb;                       // (n) bf16 weights
    float *w32, *g, *om, *ov;          // (n) master, grads, AdamW moments (w32, om, ov NULL in proxy)
    size_t n;                          // parameters
    CuActs *la;                        // (layers)
    CuActs ws;                         // recompute working set
    kc_bf16 *head_in, *head_n, *logits;   // (N, C), (N, C), (N, Vl)
    float *head_mean, *head_rstd, *ce_lse, *losses;   // (N), (N), (N), (nmb, N)
    kc_bf16 *dres, *dcol, *dq, *dk, *dv, *drope, *dhpre, *dhact, *rc_out, *grad_in;
    int *d_tokens, *d_targets;         // (nmb, N) device
    int *tokens, *targets;             // (nmb, N) host
    float *h_losses;                   // (nmb, N) host
    /* timers: event pairs per phase segment, summed at the end of a step */
    cudaEvent_t *ev;                   // (2·ev_cap)
    int *ev_phase;                     // (ev_cap)
    int ev_cap, ev_n;
    cudaEvent_t step0, step1;
    double t[PH_COUNT];                // seconds of the last step by phase
    size_t free_min;                   // least free device memory seen (cudaMemGetInfo), bytes
    size_t dev_total;                  // device memory, bytes
} CuExec;

typedef struct {
    double loss;                       // mean over the batch, nats (proxy: of the local vocab shard)
    double t[PH_COUNT];                // seconds by phase (CUDA events)
    double step_s;                     // seconds, events around the whole step
} CuStepStats;

/* A whole plan with dp = tp = pp = cp = 1 on GPU 0, reading data. 0, or -1
 * with err (a layout it can't run, head size the attention kernel lacks,
 * data, not enough device memory). */
int cuexec_init(CuExec *e, const ModelSpec *m, const Layout *lo, const TrainOpts *o,
                const char *data, char *err, int errlen);
/* Stage `stage` of the plan as one tp rank would run it (proxy mode). */
int cuexec_init_proxy(CuExec *e, const ModelSpec *m, const Layout *lo, int stage, uint64_t seed,
                      char *err, int errlen);
/* One optimizer step (proxy: fwd + bwd of the plan's m micro-batches, no
 * optimizer). Synchronises at its end. */
int cuexec_step(CuExec *e, CuStepStats *st, char *err, int errlen);
/* Device bytes in use at the peak: total − least free seen (includes the
 * CUDA context and cuBLASLt workspace). */
double cuexec_peak_bytes(const CuExec *e);
void cuexec_free(CuExec *e);

#endif
