/* memory.h — bytes per GPU of each pipeline stage, by category.
 *
 * Model states (weights, gradients, optimizer) by precision and ZeRO stage or
 * Megatron's distributed optimizer; activations term by term after
 * Korthikanti et al. 2022 with the micro-batches a stage holds in flight
 * under 1F1B or interleaving; the recompute working set, PP and NCCL
 * buffers, the CUDA context and allocator fragmentation (profile constants).
 * Pure arithmetic: the ILP reads its per-layer coefficients off
 * memory_stage() by differences, so this is the only memory formula.
 * docs/COSTMODEL.md §3.
 */
#ifndef ULTRAPLAN_MODEL_MEMORY_H
#define ULTRAPLAN_MODEL_MEMORY_H

#include "hw.h"
#include "layout.h"
#include "spec.h"

typedef enum {
    MEM_WEIGHTS,
    MEM_GRADS,
    MEM_OPTIM,
    MEM_ACTS,
    MEM_BUFFERS,     // communication buffers, ZeRO-3 gather buffers, PP send/recv
    MEM_OVERHEAD,    // CUDA context and allocator fragmentation
    MEM_COUNT
} MemKind;

typedef struct {
    double bytes[MEM_COUNT];   // bytes per GPU of this stage
    double total;              // bytes, sum of the above
    double inflight;           // micro-batches (of full stage size) whose activations are held
    int layers;                // transformer layers on this stage (all chunks)
    double params;             // parameters held by one GPU of this stage (before ZeRO sharding), experts included
    double expert_params;      // of which routed experts' (sharded over edp by ZeRO, not dp·cp)
    int moe_layers;            // of the stage's layers, MoE ones
} StageMem;

/* Bytes per parameter of one unsharded copy of each model state: the
 * weight in the compute precision (fp8 keeps bf16 weights), the gradient
 * (fp32 when grad_fp32, Megatron's main grads) and the optimizer states
 * (Adam m and v in fp32, plus an fp32 master copy unless training in fp32:
 * K = 12 or 8, the ZeRO paper's K). Every other count of state bytes (ZeRO
 * shards, checkpoint size, optimizer-step traffic, the planner's GPU-count
 * bound) is built from these three. */
double memory_weight_bytes(const Layout *lo);
double memory_grad_bytes(const Layout *lo);
double memory_optim_bytes(const Layout *lo);
/* Model-state bytes per parameter, unsharded (weights + gradients +
 * optimizer), as the layout's stack keeps them: memory_weight_bytes +
 * memory_grad_bytes + memory_optim_bytes, or 4 + 4 + the moments for a
 * PyTorch FSDP stack under ZeRO-3 (HwProfile.zero3_fp32_shard) */
double memory_state_bytes_per_param(const HwProfile *hw, const Layout *lo);

/* The same per parameter as one GPU holds them under the layout's sharding
 * over dp·cp (ZeRO paper §5 / Megatron dist-opt table): ZeRO-1 and the
 * distributed optimizer shard the optimizer states, ZeRO-2 also the
 * gradients, ZeRO-3 also the weights. */
void memory_state_bytes(const Layout *lo, double *w, double *g, double *o);

/* The routed experts' states per parameter: as memory_state_bytes but
 * sharded over the expert data-parallel group edp = tp·cp·dp/(etp·ep). */
void memory_expert_state_bytes(const Layout *lo, double *w, double *g, double *o);

/* Where a stage's layers lie in the model: stage s holding n layers (all
 * chunks; vp chunks of n/vp) with f fully and e selectively recomputed,
 * per chunk first layers first (the executor's and Megatron's block order).
 * cnt[k][r]: layers of kind k (0 dense, 1 MoE) under recomputation r. The
 * first layer of stage s (vp 1) is the sum of lo->layers of the stages
 * before it; chunk c of stage s is model chunk c·pp + s. */
void memory_stage_layer_mix(const ModelSpec *m, const Layout *lo, int s, int n, int f, int e,
                            int cnt[2][RECOMPUTE_COUNT]);
/* Layers of kind k (0 dense, 1 MoE) in a count of memory_stage_layer_mix, whatever they recompute. */
static inline int memory_mix_kind(const int cnt[2][RECOMPUTE_COUNT], int k)
{
    int n = 0;
    for (int r = 0; r < RECOMPUTE_COUNT; r++)
        n += cnt[k][r];
    return n;
}
/* The same with the first layer of stage s (vp 1) given, for a split
 * other than lo->layers (the planner's candidates). */
void memory_layer_mix_from(const ModelSpec *m, const Layout *lo, int s, int first, int n, int f, int e,
                           int cnt[2][RECOMPUTE_COUNT]);
/* Parameters one GPU holds of one layer (TP-sharded, before ZeRO): the
 * dense part returned (attention / tp, norms, router replicated, shared
 * expert / tp, or the dense MLP / tp); the routed experts' part, (E/ep)
 * experts each split over etp, in *expert (0 for a dense layer). */
double memory_layer_params(const ModelSpec *m, const Layout *lo, bool moe, double *expert);
/* One MoE layer's activations per micro-batch on one GPU (COSTMODEL.md
 * §3.4): the attention part of a dense layer, the router's fp32
 * probabilities, the dispatched rows (layout_moe_rows) in, through FC1 and
 * the activation, and out, and the shared expert as a dense MLP. */
double memory_moe_layer_acts(const ModelSpec *m, const Layout *lo, Recompute r);
/* Whether memory is priced as ultraplan's executors keep it (the layout's
 * target is one of them) or as Megatron-core and Transformer Engine keep it
 * (every other target). The layout's target changes nothing else the model
 * prices. Where they differ (COSTMODEL.md §3.2, §3.4):
 *  - fp8 linear inputs: the executors keep a transposed fp8 copy beside
 *    each 16-bit input; Transformer Engine the fp8 copy in place of the
 *    16-bit QKV, FC1 and FC2 (and the experts') inputs;
 *  - the fp8 weight cache: the executors' dense-layer copy and transpose in
 *    every layer; Transformer Engine's per layer, by GPU and recipe;
 *  - an MoE layer's expert outputs: the executors weight the rows by their
 *    routing probabilities at the combine (executor/cuda/cumoe.h), whose
 *    gradient reads them; Megatron-core 0.13 and later (ADLR/megatron-lm!2668)
 *    weight them inside the experts' activation (weighted_bias_swiglu),
 *    which keeps the probabilities only. */
bool memory_executor_accounting(const Layout *lo);
/* Activation bytes of one transformer layer for one micro-batch, per GPU,
 * under tp, sp, cp, flash and a recomputation mode (Korthikanti terms). */
double memory_layer_acts(const ModelSpec *m, const Layout *lo, Recompute r);
/* Micro-batches whose activations stage `s` holds at the 1F1B peak,
 * counting interleaving (in units of the whole stage's layers). */
double memory_inflight(const Layout *lo, int stage);
/* Parameters held by one GPU of stage s with `layers` layers (TP-sharded,
 * before ZeRO), routed experts included (their share alone in *expert,
 * nullable); the last stage holds the MTP modules. */
double memory_stage_params(const ModelSpec *m, const Layout *lo, int stage, int layers);
double memory_stage_params_split(const ModelSpec *m, const Layout *lo, int stage, int layers, double *expert);
/* Bytes of the activation one GPU sends across a stage boundary per
 * micro-batch (1/tp of it with Megatron's scatter-gather or SP); the PP
 * buffers hold it and time_pp_mb() sends it. */
double memory_pp_msg_bytes(const ModelSpec *m, const Layout *lo);
/* ZeRO-2/3 shard and reduce per unit (FSDP-style): each layer is one, the
 * stage's non-layer tensors (embedding, positions, final norm, head) one
 * more. Returns the stage unit's parameters on one GPU of stage s and, in
 * *layer_unit (nullable), its largest layer's (an MoE layer's with its
 * local experts). */
double memory_zero_unit_params(const ModelSpec *m, const Layout *lo, int s, double *layer_unit);
/* Context parallel's K/V buffers on one GPU: for the ring the resident and
 * the arriving K/V block with their gradients (K, V, dK, dV, twice) of the
 * local s/cp tokens; for the all-gather K, V, dK, dV of the whole sequence;
 * 0 without cp. */
double memory_cp_ring_bytes(const ModelSpec *m, const Layout *lo);
/* Fill one stage's memory (uses lo->layers, full_rc, sel_rc of stage s).
 * Under --pp-schedule dualpipe, pipeline rank `stage`'s: the two model
 * stages it holds (layout_pp_mirror), pp + 1 micro-batches of activations
 * between them, ZeRO's shards spread over both copies' ranks. */
void memory_stage(const ModelSpec *m, const HwProfile *hw, const Layout *lo, int stage, StageMem *out);

#endif
