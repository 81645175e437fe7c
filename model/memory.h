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
    double params;             // parameters held by one GPU of this stage (before ZeRO sharding)
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

/* The same per parameter as one GPU holds them under the layout's sharding
 * over dp·cp (ZeRO paper §5 / Megatron dist-opt table): ZeRO-1 and the
 * distributed optimizer shard the optimizer states, ZeRO-2 also the
 * gradients, ZeRO-3 also the weights. */
void memory_state_bytes(const Layout *lo, double *w, double *g, double *o);

/* Activation bytes of one transformer layer for one micro-batch, per GPU,
 * under tp, sp, cp, flash and a recomputation mode (Korthikanti terms). */
double memory_layer_acts(const ModelSpec *m, const Layout *lo, Recompute r);
/* Micro-batches whose activations stage `s` holds at the 1F1B peak,
 * counting interleaving (in units of the whole stage's layers). */
double memory_inflight(const Layout *lo, int stage);
/* Parameters held by one GPU of stage s with `layers` layers (TP-sharded,
 * before ZeRO). */
double memory_stage_params(const ModelSpec *m, const Layout *lo, int stage, int layers);
/* Bytes of the activation one GPU sends across a stage boundary per
 * micro-batch (1/tp of it with Megatron's scatter-gather or SP); the PP
 * buffers hold it and time_pp_mb() sends it. */
double memory_pp_msg_bytes(const ModelSpec *m, const Layout *lo);
/* ZeRO-2/3 shard and reduce per unit (FSDP-style): each layer is one, the
 * stage's non-layer tensors (embedding, positions, final norm, head) one
 * more. Returns the stage unit's parameters on one GPU of stage s and, in
 * *layer_unit (nullable), one layer's. */
double memory_zero_unit_params(const ModelSpec *m, const Layout *lo, int s, double *layer_unit);
/* Context parallel's ring buffers on one GPU: the resident and the arriving
 * K/V block with their gradients (K, V, dK, dV, twice) of the local s/cp
 * tokens; 0 without cp. */
double memory_cp_ring_bytes(const ModelSpec *m, const Layout *lo);
/* Fill one stage's memory (uses lo->layers, full_rc, sel_rc of stage s). */
void memory_stage(const ModelSpec *m, const HwProfile *hw, const Layout *lo, int stage, StageMem *out);

#endif
