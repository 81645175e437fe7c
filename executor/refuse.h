/* refuse.h — what ultraplan's executors refuse of a model and its layout,
 * as pure functions of (ModelSpec, Layout).
 *
 * One source of truth for two readers: the executors call these before they
 * allocate anything (exec_init, cuexec's set-up, module.c's run entry), and
 * the planner calls refuse_target so that `plan --target ultraplan` and
 * `--target ultraplan-cuda` never offer a layout the executor would then
 * refuse. Plain C over model/ only: no MPI, no CUDA, no printing.
 *
 * Each returns 0 when the executor runs it, or -1 with err naming the
 * plan's field at fault and what would run. layout_check's rules (tp
 * divides the GPUs, stages sum to the layers, ...) are assumed to hold:
 * these are the executors' own limits on top of them.
 */
#ifndef ULTRAPLAN_EXECUTOR_REFUSE_H
#define ULTRAPLAN_EXECUTOR_REFUSE_H

#include "layout.h"
#include "spec.h"

/* Sizes whose int products in the step would overflow, checked in 64 bits
 * (a hostile plan file): tokens per micro-batch, micro-batches x chunks
 * per step, tokens per rank and step. Both backends. */
#define REFUSE_MAX_MB_TOKENS (1LL << 24)
#define REFUSE_MAX_MB_CHUNKS (1LL << 20)
#define REFUSE_MAX_STEP_TOKENS (1LL << 30)
int refuse_overflow(const ModelSpec *m, const Layout *lo, char *err, int errlen);

/* The CPU executor (executor/exec.c). */
int refuse_cpu(const ModelSpec *m, const Layout *lo, char *err, int errlen);

/* The CUDA executor (executor/cuda/cuexec.c): MHA/GQA without MTP, MoE at
 * tp = cp = etp = 1 under ZeRO-0/1/dist-opt without capacity or expert
 * groups, head sizes its attention kernel takes. Stage splits that are all
 * zero (not yet chosen: the planner asks before it splits) are not checked. */
#define REFUSE_CUDA_MAX_EXPERTS 1024   // kernels_cuda.h KC_MOE_MAX_E (cuexec.c asserts they agree)
#define REFUSE_CUDA_MAX_TOPK 16        // KC_MOE_MAX_K
int refuse_cuda(const ModelSpec *m, const Layout *lo, char *err, int errlen);
int refuse_cuda_head_size(int hs);     // 1 when the CUDA attention kernel takes head size hs

/* What the target's executor refuses: nothing for TARGET_MEGATRON (export
 * has its own check), refuse_overflow then refuse_cpu / refuse_cuda. */
int refuse_target(const ModelSpec *m, const Layout *lo, Target t, char *err, int errlen);

#endif
