/* timing.h — seconds of compute and communication on one GPU.
 *
 * GEMMs at their own M, N, K through the profile's efficiency curve (with
 * wave quantization and an HBM roofline when the profile has an SM count),
 * the attention core, memory-bound kernels at the HBM curve, host launch
 * time as a floor, and alpha-beta collectives that turn hierarchical when a
 * group spans nodes. Every collective the cost model prices goes through
 * time_coll_allreduce / time_coll_allgather / time_p2p, which add the
 * profile's per-call cost (coll_lat) and achieved bandwidth (coll_eff).
 * What is per layer or per micro-batch is here; what is per step (bubble,
 * DP exposure, optimizer) is cost.c's. docs/COSTMODEL.md §4.
 */
#ifndef ULTRAPLAN_MODEL_TIMING_H
#define ULTRAPLAN_MODEL_TIMING_H

#include <stdbool.h>

#include "hw.h"
#include "layout.h"
#include "spec.h"

/* The collectives the cost model prices and calibrate measures. */
typedef enum { COLL_ALLREDUCE, COLL_REDUCE_SCATTER, COLL_ALLGATHER, COLL_P2P, COLL_COUNT } CollKind;
const char *time_coll_name(CollKind k);   // "all-reduce", ...

/* Alpha-beta seconds of one collective of `bytes` (the full buffer) over n
 * ranks of which k share a node: a ring within the node, hierarchical
 * (reduce-scatter in the node, across nodes on 1/k shards, all-gather in
 * the node) when the group spans nodes. At the links' bandwidth as given:
 * no per-call cost, no coll_eff (calibrate fits those around these). */
double time_allreduce(const HwProfile *hw, double bytes, int n, int k);
double time_allgather(const HwProfile *hw, double bytes, int n, int k);  // also reduce-scatter

/* One NCCL call as the cost model prices it: coll_lat plus the alpha-beta
 * time at coll_eff of the link bandwidth; 0 when n <= 1 or bytes <= 0. */
double time_coll_allreduce(const HwProfile *hw, double bytes, int n, int k);
double time_coll_allgather(const HwProfile *hw, double bytes, int n, int k);  // also reduce-scatter
/* All-to-all of a `bytes` buffer per rank over n ranks, k per node: each
 * rank keeps 1/n, sends (k-1)/n over NVLink and (n-k)/n over its NIC at
 * once; alpha-beta at the links as given. time_coll_alltoall is one call as
 * priced: a2a_lat (or coll_lat) plus that at a2a_eff (or coll_eff). */
double time_alltoall(const HwProfile *hw, double bytes, int n, int k);
double time_coll_alltoall(const HwProfile *hw, double bytes, int n, int k);
/* Bytes of one dispatch (= one combine) buffer per GPU of an MoE layer per
 * micro-batch: the routed rows at the busiest rank's load times h, in bf16
 * (fp32 when training in fp32); 0 with ep 1. */
double time_moe_dispatch_bytes(const ModelSpec *m, const Layout *lo);
/* The same in a wire dtype (--moe-dispatch-fwd-dtype, --moe-combine-bwd-dtype):
 * MXFP8 is 1 + 1/32 bytes an element. */
double time_moe_dispatch_bytes_wire(const ModelSpec *m, const Layout *lo, MoeWire wire);
/* Seconds of one dispatch (= one combine) of an MoE layer per micro-batch
 * with the layout's token dispatcher (docs/COSTMODEL.md §4.6): alltoall,
 * time_coll_alltoall of time_moe_dispatch_bytes; allgather, the group's
 * tokens all-gathered (combine: reduce-scattered); flex (DeepEP/HybridEP),
 * hierarchical: each token crosses the NIC once to every other node holding
 * one of its experts, (N-1)(1-(1-1/N)^topk) nodes of N on average under
 * balanced routing, and is fanned out over NVLink inside the node; NIC and
 * NVLink run at once. 0 with ep 1. */
double time_moe_a2a_s(const ModelSpec *m, const HwProfile *hw, const Layout *lo);
/* The same with the payload in `wire` (time_moe_a2a_s is the bf16 one). A
 * layer's forward moves its dispatch in lo->moe_dispatch_wire and its
 * combine in bf16; its backward the combine's gradient in
 * lo->moe_combine_bwd_wire and the dispatch's in bf16 (time_layer). */
double time_moe_a2a_wire_s(const ModelSpec *m, const HwProfile *hw, const Layout *lo, MoeWire wire);
/* Bytes per token of one layer's forward that eager PyTorch model code moves
 * beyond fused kernels (a stack with eager_elementwise, run without
 * torch.compile): torchtitan's unfused RMSNorms, RoPE and SwiGLU; attn_only:
 * without the MLP's (an MoE layer's non-MLP part). The backward moves twice
 * that, as every memory-bound pass does (time_layer). */
double time_eager_bytes(const ModelSpec *m, const Layout *lo, bool attn_only);
/* expected nodes one token's top-k copies reach over N nodes, under the model's group-limited routing */
double time_moe_token_nodes(const ModelSpec *m, int N);
/* The 1F1B A2A overlap takes effect: the switch on and
 * layout_moe_a2a_check's requirements met; or the DualPipe schedule (its
 * overlapped forward-backward chunks) with ep > 1 and an all-to-all dispatcher. */
bool time_moe_a2a_overlap(const Layout *lo);
/* Members of an EP group sharing a node (expert rank order etp-ep-edp-pp). */
int time_ep_members_per_node(const HwProfile *hw, const Layout *lo);
/* One point-to-point send of `bytes`, within the node or across. */
double time_p2p(const HwProfile *hw, double bytes, bool cross_node);
/* Members of an n-rank group with rank stride `stride` that share one node
 * (Megatron's rank order: tp fastest, then cp, dp, pp), at least 1. */
/* TP communication overlap takes effect: tp_comm_overlap with tp > 1 and
 * SP (Megatron asserts --sequence-parallel for --tp-comm-overlap). */
bool time_tp_overlap(const Layout *lo);
int time_members_per_node(const HwProfile *hw, int stride, int n);

/* Seconds of a memory-bound pass moving `bytes` (HBM at the mem_eff curve). */
double time_mem_s(const HwProfile *hw, double bytes);

/* Whether Megatron's fused scale-mask-softmax kernel serves this unfused
 * attention (micro-batch x heads per TP rank a multiple of 4, 16 < s <= 4096,
 * s a multiple of 4); else PyTorch runs it in fp32 as separate ops. */
bool time_softmax_fused(const ModelSpec *m, const Layout *lo);

/* Flash attention's rate at this head dimension over the profile's (d =
 * 128) curve, forward or backward: 0.67 / 0.84 at d <= 64 from Hopper on, 1
 * at d >= 128 or before Hopper (COSTMODEL.md §4.1). */
double time_attn_dim_eff(const ModelSpec *m, const HwProfile *hw, bool bwd);
/* --fp8-dot-product-attention: the attention core's fp8 time over its bf16
 * time, forward and backward, by compute capability, the fp8 recipe's
 * scaling and the head dimension (cuDNN's published rates); false and 1, 1
 * when the layout does not run it */
bool time_fp8_attn(const ModelSpec *m, const HwProfile *hw, const Layout *lo, double *fwd, double *bwd);
/* Keys a query of a sliding-window layer is computed against by a tiled
 * flash kernel (128 x 128 tiles): the band rounded out to whole tiles. */
double time_window_tile_keys(const ModelSpec *m);

/* Per-layer, per-micro-batch times on one GPU (seconds). */
typedef struct {
    double fwd;        // forward compute of one layer
    double bwd;        // backward compute of one layer
    double rc_full;    // extra forward when the layer is fully recomputed
    double rc_sel;     // extra forward when selectively recomputed
    double tp_fwd;     // exposed TP comm in forward
    double tp_bwd;     // exposed TP comm in backward
    double tp_rc;      // exposed TP comm of a full recompute
    double cp;         // exposed CP comm (fwd + bwd)
    /* an MoE layer (all 0 for a dense model): the same attention, the MLP
     * replaced by router, permutation, grouped experts and shared expert */
    double moe_fwd, moe_bwd, moe_rc_full, moe_rc_sel;
    double moe_tp_fwd, moe_tp_bwd, moe_tp_rc;   // exposed TP/ETP comm of an MoE layer
    double ep_fwd, ep_bwd, ep_rc;               // exposed EP all-to-all (dispatch + combine) fwd, bwd, full recompute
    /* --recompute-modules: the forward pieces a layer not fully recomputed runs again (rc_modules_s) */
    double rc_mod, moe_rc_mod;                  // a dense layer, an MoE layer
    double shared_fwd, shared_bwd;              // the shared expert's time under the EP transfers
                                                // (--moe-shared-expert-overlap; 0 otherwise)
    /* the weight-gradient GEMMs of the backward (DualPipe's W): each has its forward GEMM's
     * M·N·K, so it is timed as that forward GEMM; a dense layer, an MoE layer */
    double wgrad, moe_wgrad;
} LayerTime;

/* The host sync of a dropless MoE layer's forward (tokens per expert
 * copied to the host): 2 kernel_lat, 0 with a capacity factor or a
 * full-iteration CUDA graph. */
double time_moe_host_sync_s(const ModelSpec *m, const HwProfile *hw, const Layout *lo);
/* fp8 MoE: the experts copy their rows to pad them (no router or HybridEP padding) */
bool time_moe_fp8_pad(const Layout *lo);

/* One MoE layer per micro-batch: compute, exposed TP/ETP, CP and EP comm. */
double time_moe_layer_s(const LayerTime *lt);

void time_layer(const ModelSpec *m, const HwProfile *hw, const Layout *lo, LayerTime *out);
/* FLOPs per token of one layer's GEMMs that torchtitan's per-op selective
 * policy runs again (0 unless layout_sel_op): for HFU. */
double time_sel_op_gemm_flops(const ModelSpec *m, const Layout *lo);
/* Elements per token of the GEMM outputs that policy saves (wq, wv, w1,
 * and w2 when eager), for memory_layer_acts. */
double time_sel_op_saved_width(const ModelSpec *m, const Layout *lo);
/* Time of the first stage's extra work (embedding) and the last stage's
 * (final norm, LM head, loss) per micro-batch, forward + backward. */
double time_embed(const ModelSpec *m, const HwProfile *hw, const Layout *lo);
double time_head(const ModelSpec *m, const HwProfile *hw, const Layout *lo);
/* The LM head's forward GEMM alone (logits T x V/tp x h), per micro-batch. */
double time_head_gemm_s(const ModelSpec *m, const HwProfile *hw, const Layout *lo);
/* Per micro-batch time of stage `stage` with n layers, f fully and e
 * selectively recomputed (embedding, head and PP p2p included). */
double time_stage_mb(const ModelSpec *m, const HwProfile *hw, const Layout *lo, const LayerTime *lt,
                     int stage, int n, int f, int e);
/* The forward (F) and weight-gradient (W) shares of time_stage_mb for
 * stage `stage` (its layers, the LM head's GEMM, MTP): the rest of the
 * stage's micro-batch is its backward, recomputation included.
 * DualPipe's bubble is (pp/2 - 1)(F&B + B - 3W) (model/cost.c). */
void time_stage_fw(const ModelSpec *m, const HwProfile *hw, const Layout *lo, const LayerTime *lt, int stage,
                   double *fwd, double *wgrad);
/* PP send/recv seconds per micro-batch per boundary (fwd + bwd), exposed
 * (0 under DualPipe, whose overlapped chunks hide them). */
double time_pp_mb(const ModelSpec *m, const HwProfile *hw, const Layout *lo);

#endif
