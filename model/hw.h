/* hw.h — a hardware and cluster profile as the cost model reads it.
 *
 * Every constant that is not physics (an efficiency, an overlap fraction)
 * lives here, not in code, so calibrate and fit can change it. The JSON form
 * and its loader are in profiles/; this header knows nothing of files.
 */
#ifndef ULTRAPLAN_MODEL_HW_H
#define ULTRAPLAN_MODEL_HW_H

#include <stdbool.h>

typedef enum { PREC_FP32, PREC_BF16, PREC_FP16, PREC_FP8, PREC_COUNT } Precision;

#define HW_MAX_EFF_POINTS 16

/* One point of an efficiency curve: at `size` (FLOPs of one GEMM, or bytes
 * moved by one memory-bound op) the unit reaches `eff` of its peak. Between
 * points the cost model interpolates linearly in log(size). */
typedef struct {
    double size;  // FLOPs or bytes
    double eff;   // fraction of peak, 0..1
} EffPoint;

typedef struct {
    int n;                               // points in use
    EffPoint pt[HW_MAX_EFF_POINTS];      // ascending size
} EffCurve;

typedef struct {
    double bw;      // bytes/s per GPU, one direction (what nccl-tests calls busbw at large sizes)
    double lat;     // seconds per message hop (alpha)
} Link;

typedef struct {
    char name[48];                 // e.g. "h100-sxm"
    char desc[128];                // human-readable, with the product name
    double peak[PREC_COUNT];       // FLOP/s, dense tensor-core peak per dtype; 0 = unsupported
    double hbm_bytes;              // bytes of device memory
    double hbm_bw;                 // bytes/s, peak
    int gpus_per_node;             // GPUs sharing the fast (NVLink) domain
    int gpus_per_host;             // GPUs in one host (one Slurm node, one OS); 0 = gpus_per_node. GB200 NVL72: 4 (a compute tray), against 72 per NVLink domain
    Link intra;                    // within the NVLink domain
    Link inter;                    // between nodes, per GPU (one NIC per GPU, rail-optimised)
    EffCurve gemm_eff;             // GEMM efficiency by FLOPs of one GEMM
    EffCurve attn_eff;             // attention-core efficiency by FLOPs of one call
    EffCurve mem_eff;              // memory-bound op efficiency by bytes moved
    double act_bytes_per_layer;    // bytes moved per token per hidden unit by memory-bound ops in one layer's forward (norms, activations, residuals, dropout), in units of h
    double cuda_context_bytes;     // bytes: CUDA context, cuBLAS/NCCL workspaces and kernels
    double alloc_frag;             // fraction of tensor bytes lost to allocator fragmentation
    double nccl_buf_bytes;         // bytes of buffers per NCCL communicator
    double tp_overlap;             // fraction of TP communication hidden behind compute, 0..1
    double dp_overlap;             // fraction of the last backward usable to hide DP reduction, 0..1
    double pp_overlap;             // fraction of PP p2p hidden, 0..1
    double fail_per_gpu_hour;      // unexpected interruptions per GPU-hour
    double ckpt_bw_per_node;       // bytes/s a node writes to checkpoint storage
    double restart_s;              // seconds to restart the job after a failure
    double kernel_lat;             // seconds of host time per launched kernel (framework dispatch + launch); a layer pass lasts at least its kernels times this
    bool ce_fused;                 // the loss is a fused cross-entropy kernel (set by a stack, stack_apply; time_head)
    bool ce_upcast;                // the loss is PyTorch's cross_entropy over an fp32 copy of the logits (torchtitan):
                                   // at the loss the logits, the copy and the fp32 log-softmax are live (set by a stack)
    bool compile_loss;             // torch.compile (Layout.torch_compile) covers that loss too, which then keeps no
                                   // fp32 copies (torchtitan from 2025; set by a stack)
    double coll_lat;               // seconds fixed per collective or p2p call (NCCL launch, protocol set-up), on top of alpha-beta
    double coll_eff;               // fraction of link bw that NCCL collectives reach at large sizes (nccl-tests busbw / bw), (0, 1]
    double a2a_lat;                // seconds fixed per all-to-all call (dispatch/combine; NCCL grouped send/recv); 0 = coll_lat
    double a2a_eff;                // fraction of link bw an all-to-all reaches at large sizes, (0, 1]; 0 = coll_eff.
                                   // With a2a_lat: the all-to-all curve by size, t(B) = a2a_lat + alpha-beta at a2a_eff (calibrate fits both)
    double sm_count;               // streaming multiprocessors; > 0 times each GEMM by its shape (wave quantization of its output tiles, HBM roofline); 0 = by FLOPs only
    double gemm_tile_m;            // rows of the output tile one SM computes in a large 16-bit GEMM (cuBLAS), with gemm_tile_n; used when sm_count > 0
    double gemm_tile_n;            // columns of that tile; the tile may lie either way round (cuBLAS picks the better)
    double eff_ref_peak;           // FLOP/s (bf16) of the GPU the gemm/attn curves' sizes are stated for; 0 = this GPU's bf16 peak
    double eff_ref_hbm_bw;         // bytes/s of the GPU the mem_eff curve's sizes are stated for; 0 = this GPU's hbm_bw
    double compute_capability;     // CUDA compute capability (9.0 = Hopper, 10.0 = Blackwell); 0 = not known. What the
                                   // fp8 recipes need is checked against it (layout_check: mxfp8 >= 10.0, blockwise >= 9.0)
    /* how the software stack's ZeRO-3 gathers (model/stack.h sets them; profiles leave them 0 = one
     * hierarchical collective per stage and pass, prefetched behind compute at dp_overlap) */
    int zero3_gathers_per_layer;   // gathers (and reduce-scatters) per layer per pass; 0 = one per stage
    bool zero3_flat_ring;          // each call pays (n-1) latencies of its slowest link (NCCL ring)
    double zero3_prefetch_params;  // parameters gathered ahead of the layer computing; 0 = unlimited (a whole layer or more: hidden at dp_overlap)
    double zero3_max_live_params;  // gathered parameters above which a tensor-granular stack (gathers_per_layer > 1) prefetches nothing; 0 = no cap
    double zero3_reduce_bucket_params; // gradient elements a tensor-granular stack reduces at a time; 0 = a layer (block buffers)
    double zero3_call_s;           // seconds of host time per gather or reduce-scatter call
    double zero3_rank_s;           // seconds of host time per call per rank of the group (per-rank output copies)
    bool zero3_fp32_shard;         // PyTorch FSDP under a mixed-precision policy: each rank keeps its shard of the
                                   // parameters in fp32, which is also the optimizer's master; the 16-bit weights
                                   // exist only gathered, and the sharded gradient has the parameter's fp32
                                   // (model/memory.c fsdp_fp32_shard; set by a stack)
    bool pp_p2p_serial;            // pipeline sends and receives are separate blocking calls (DeepSpeed's engine): 4 transfers a micro-batch on the critical path, not 2 (set by a stack)
    bool zero2_pp;                 // the stack shards gradients beside pipeline parallelism (Llama 3's FSDP): ZeRO-2 with pp > 1,
                                   // each micro-batch's gradients reduce-scattered into the shard (set by a stack)
    bool rc_early_stop;            // a fully recomputed layer stops before its MLP down projection: PyTorch >= 2.1 non-reentrant checkpointing (set by a stack)
    bool eager_elementwise;        // the model's norms, RoPE and gated activation are PyTorch ops, fused only under
                                   // torch.compile (Layout.torch_compile): torchtitan's Llama (set by a stack)
    bool cp_pytorch;               // context parallelism is PyTorch's (torch.distributed.tensor.experimental):
                                   // the attention in cp ring steps whichever way K/V travel, its merges and
                                   // gradient sums as eager fp32 ops, dK/dV passed on in fp32 (set by a stack)
    bool sdpa_repeat_kv;           // the model code repeats a GQA model's K and V to every query head before
                                   // the attention (torchtitan's Llama until 2026-01): a copy a layer, and K/V
                                   // as wide as Q wherever the attention's K/V go (set by a stack)
    char stack[32];                // the builtin software stack applied (profiles/stacks.h), "" = the default; for the error band's nearest runs
} HwProfile;

/* Efficiency from a curve at `size`; a curve with no points gives 1. */
double hw_eff(const EffCurve *c, double size);

/* Restate the curves for this GPU: the gemm/attn sizes scaled from the
 * eff_ref_peak GPU's rate to this one's bf16 peak, the mem_eff sizes from
 * eff_ref_hbm_bw to hbm_bw, both references set to 0. The cost model reads
 * the result exactly as before (timing.c reads the curves at equal duration).
 * Calibrate calls it before it overwrites curves with ones measured here,
 * which are stated for this GPU: a kept reference would read them as the
 * reference GPU's. (Without a bf16 peak the gemm/attn sizes stay as they are.) */
void hw_curves_local(HwProfile *hw);

const char *hw_precision_name(Precision p);
int hw_parse_precision(const char *s, Precision *out);
int hw_precision_bytes(Precision p);  // bytes of one stored weight/activation element

#endif
