/* stack.h — a software stack as the cost model sees it: what one training
 * framework (Megatron-LM, NeMo, Composer FSDP, DeepSpeed ZeRO-3, ...) does
 * to the same layout on the same GPUs.
 *
 * A Stack is a handful of numbers applied once to a HwProfile
 * (stack_apply): scales on the profile's efficiency curves, the attention
 * kernel the stack runs, the overlap it achieves, its host time per kernel
 * and how its ZeRO-3 gathers parameters. The cost model then reads the
 * adjusted profile as before, so it has no stack conditionals of its own.
 * The profiles' curves are fitted on Megatron-style runs (a100-80g on
 * vTrain's Megatron-DeepSpeed, h100-sxm on NeMo); the default stack,
 * megatron-lm, changes nothing. The JSON form and the builtin stacks are in
 * profiles/stacks.h; this header knows nothing of files.
 */
#ifndef ULTRAPLAN_MODEL_STACK_H
#define ULTRAPLAN_MODEL_STACK_H

#include <stdbool.h>

#include "hw.h"

/* The attention kernel a stack runs (flash attention on). */
typedef enum {
    ATTN_KERNEL_PROFILE,   // the kernel the profile's attn_eff curve was measured with
    ATTN_KERNEL_FA1,       // FlashAttention (Dao et al. 2022), or Triton kernels of its class
    ATTN_KERNEL_FA2,       // FlashAttention-2 (Dao 2023)
    ATTN_KERNEL_FA3,       // FlashAttention-3 (Shah et al. 2024), Hopper and later
    ATTN_KERNEL_CUDNN,     // cuDNN fused attention (Transformer Engine's default on Hopper+)
    ATTN_KERNEL_COUNT
} AttnKernel;

typedef struct {
    char name[32];              // "megatron-lm"
    char desc[160];             // one line: framework, versions, what the runs used
    double gemm_scale;          // multiplies the gemm_eff curve (result capped at 1), > 0
    double mem_scale;           // multiplies the mem_eff curve (capped at 1), > 0
    double attn_scale;          // multiplies the attn_eff curve on top of the kernel's ratio, > 0
    AttnKernel attn_kernel;
    double kernel_lat_scale;    // multiplies kernel_lat (host time per kernel), >= 0
    double tp_overlap;          // replaces the profile's; < 0 = keep it
    double dp_overlap;          // replaces the profile's; < 0 = keep it
    double pp_overlap;          // replaces the profile's; < 0 = keep it
    int ce_fused;               // 1: fused cross-entropy (HwProfile.ce_fused), 0: unfused, < 0 = keep the profile's
    /* ZeRO-3 (HwProfile fields of the same names) */
    int zero3_gathers_per_layer;  // parameter gathers per layer per pass; 0 = one per stage
    bool zero3_flat_ring;         // each gather pays (n-1) link latencies (NCCL ring over n ranks)
    double zero3_prefetch_params; // parameters gathered ahead of the computing layer; 0 = a layer or more
    double zero3_max_live_params; // gathered parameters above which nothing more is prefetched; 0 = no cap
    double zero3_reduce_bucket_params; // gradient elements reduced at a time (tensor-granular stacks); 0 = a layer
    double zero3_call_s;          // host seconds per gather call (hooks, allocation), >= 0
    double zero3_rank_s;          // host seconds per gather call per rank of the group, >= 0
    bool zero3_fp32_shard;        // the fp32 shard is the parameter and the optimizer's master (HwProfile field)
    bool pp_p2p_serial;           // each pipeline send and receive its own blocking call (HwProfile field of the same name)
    bool zero2_pp;                // ZeRO-2 beside pipeline parallelism (HwProfile field of the same name)
    bool rc_early_stop;           // a full recompute stops before the layer's last GEMM (HwProfile field of the same name)
    bool eager_elementwise;       // the model code's elementwise ops are eager PyTorch (HwProfile field of the same name)
    bool ce_upcast;               // the loss upcasts the logits to fp32 for PyTorch's cross_entropy (HwProfile field)
    bool compile_loss;            // --torch-compile compiles that loss too (HwProfile field)
    bool cp_pytorch;              // context parallelism is PyTorch's experimental CP (HwProfile field)
    bool sdpa_repeat_kv;          // K and V repeated to every query head before the attention (HwProfile field)
    int cp_comm;                  // the context-parallel K/V exchange the stack runs (a CpComm); -1 = the layout's
                                  // choice (--cp-comm). Not a profile field: scenario_finish sets the layout's
    int sel_ac;                   // what selective recomputation recomputes (a SelAc); -1 = Megatron's core_attn.
                                  // A layout field, set from the stack as cp_comm is
    bool act_fp8_cache;           // under fp8, activations cached as DeepSeek-V3's framework does (Layout field)
} Stack;

/* megatron-lm: every scale 1, kernel of the profile, overlaps and ZeRO-3 as
 * the profile says. stack_apply of it leaves a profile unchanged. */
void stack_default(Stack *st);

/* Attention throughput of kernel k over that of the kernel a profile's
 * attn_eff curve describes (FA2 class before Hopper, cuDNN/FA3 class from
 * Hopper on: a GPU with an fp8 peak). Published ratios, stack.c. */
double stack_attn_ratio(AttnKernel k, const HwProfile *hw);

/* The profile as this stack runs on it. Applying the default is the identity. */
void stack_apply(HwProfile *hw, const Stack *st);

/* Only the settings stack_apply sets outright (overlaps, ce_fused, ZeRO-3,
 * pp_p2p_serial, zero2_pp), not the scales: applying them twice changes nothing. A
 * plan file's profile has the scaled curves but not all of these fields. */
void stack_apply_settings(HwProfile *hw, const Stack *st);

const char *stack_attn_kernel_name(AttnKernel k);   // "fa2"
int stack_parse_attn_kernel(const char *s, AttnKernel *out);

#endif
