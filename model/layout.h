/* layout.h — how a model is laid out on a cluster: parallel sizes, batch,
 * optimizer sharding, precision, recomputation and layers per stage.
 *
 * layout_check() is the one place that says whether a layout divides; it
 * names the numbers that clash. layout_megatron_check() says whether
 * Megatron-LM can run a (checked) layout exactly as laid out, and
 * layout_megatron_form() gives the recomputation and stage-split arguments
 * that express it; neither says anything about a framework's other flags.
 */
#ifndef ULTRAPLAN_MODEL_LAYOUT_H
#define ULTRAPLAN_MODEL_LAYOUT_H

#include <stdbool.h>

#include "hw.h"
#include "spec.h"

#define LAYOUT_MAX_PP 256
#define LAYOUT_PPL_LEN 256        // --pipeline-model-parallel-layout text, NUL included
#define LAYOUT_MAX_CHUNKS 1024    // pp * vp entries of such a layout

typedef enum {
    OPT_ZERO0,     // plain data parallel: every rank holds all optimizer state
    OPT_ZERO1,     // optimizer states sharded over dp·cp
    OPT_ZERO2,     // + gradients sharded
    OPT_ZERO3,     // + parameters sharded (gathered per layer)
    OPT_DISTOPT,   // Megatron distributed optimizer (= ZeRO-1 with fp32 main grads)
    OPT_COUNT
} OptimShard;

/* How Megatron-core moves routed tokens to their experts and back
 * (--moe-token-dispatcher-type): ALLTOALL, an all-to-all over the EP group
 * (each token once to every expert rank it picked); ALLGATHER, every rank's
 * tokens gathered over the group, each keeping its experts' rows (combine:
 * reduce-scatter); FLEX, DeepEP / HybridEP: a token crosses to each other
 * node it picked once over the NIC and is fanned out over NVLink there. */
typedef enum { MOE_DISPATCH_ALLTOALL, MOE_DISPATCH_ALLGATHER, MOE_DISPATCH_FLEX, MOE_DISPATCH_COUNT } MoeDispatcher;

/* Megatron's --cuda-graph-impl: NONE launches every kernel from the host;
 * LOCAL (Megatron's own capture) and TE (Transformer Engine's
 * make_graphed_callables) replay the parts --cuda-graph-modules names (all
 * of each layer when it names none) with one launch each way; FULL_ITERATION
 * captures the whole forward-backward step (static shapes, no host sync). */
typedef enum { CG_NONE, CG_LOCAL, CG_TE, CG_FULL_ITERATION, CG_COUNT } CudaGraphImpl;

/* Megatron's --fp8-recipe (Transformer Engine's scaling recipes), read only
 * under fp8: DELAYED scales by an amax history (the cast kernel records the
 * amax); TENSORWISE (per-tensor current scaling) computes each tensor's amax
 * in a pass of its own before the cast; MXFP8 (Blackwell) and BLOCKWISE scale
 * 32-element or 128-element blocks inside the cast kernel. */
typedef enum { FP8R_DELAYED, FP8R_TENSORWISE, FP8R_MXFP8, FP8R_BLOCKWISE, FP8R_COUNT } Fp8Recipe;

/* The dtype an MoE all-to-all puts on the wire (Megatron-core's
 * moe_dispatch_fwd_dtype / moe_combine_bwd_dtype): BF16, the activations as
 * they are; MXFP8, quantized by Transformer Engine before the all-to-all (one
 * byte an element and an E8M0 scale a 32-element block) for the MXFP8 grouped
 * GEMM to consume, which Megatron-core does only in the ncclep flex backend. */
typedef enum { MOE_WIRE_BF16, MOE_WIRE_MXFP8, MOE_WIRE_COUNT } MoeWire;

/* The pipeline schedule. 1F1B: Megatron's one-forward-one-backward
 * (interleaved when vp > 1). DUALPIPE: DeepSeek-V3's bidirectional schedule
 * (arXiv:2412.19437 §3.2.1; github.com/deepseek-ai/DualPipe): the model is
 * held twice, micro-batches enter from both ends, so pipeline rank r holds
 * model stages h and pp-1-h (h = min(r, pp-1-r)) and runs half the
 * micro-batches through each; a forward chunk of one micro-batch and a
 * backward chunk of another run overlapped, which hides their EP all-to-all
 * and PP sends under each other's compute; the bubble is
 * (pp/2 - 1)(F&B + B - 3W). Needs an even pp, vp 1, and an even number of
 * micro-batches, at least 2 pp (dualpipe.py asserts them). */
typedef enum { PP_SCHED_1F1B, PP_SCHED_DUALPIPE, PP_SCHED_COUNT } PpSchedule;

/* The framework a layout is planned for. MEGATRON: only layouts Megatron-LM
 * can express (layout_megatron_check); ULTRAPLAN: the layouts ultraplan's
 * CPU executor runs; ULTRAPLAN_CUDA: those its CUDA executor runs (`run
 * --backend cuda`); TORCHTITAN: those `export --format torchtitan` writes
 * (planner/export.h export_torchtitan_refuse: a Llama 3 flavor, even
 * stages, one recomputation for every layer, FSDP-style sharding). What
 * each executor refuses is executor/refuse.h. */
typedef enum {
    TARGET_MEGATRON,   // default: the framework most users run at scale
    TARGET_ULTRAPLAN,
    TARGET_ULTRAPLAN_CUDA,
    TARGET_TORCHTITAN,
    TARGET_COUNT
} Target;

/* How context parallelism exchanges K and V (Megatron --cp-comm-type):
 * a ring of point-to-point sends overlapped with attention on the block in
 * hand (p2p, Megatron's default), or one all-gather of K and V before the
 * attention (all_gather, Llama 3's). */
typedef enum {
    CP_COMM_RING,
    CP_COMM_ALLGATHER,
    CP_COMM_COUNT
} CpComm;

/* What a selectively recomputed layer recomputes: the attention core
 * (Megatron's --recompute-granularity selective, core_attn) or torchtitan's
 * per-op policy (SelectiveAC: every matmul output saved but every second
 * one, the attention's output saved, every other op run again). Not a knob:
 * the software stack sets it (profiles/stacks.h stacks_layout_settings), as the
 * framework decides it, and scenario_finish, the plan reader and validate
 * copy it in. */
typedef enum {
    SEL_AC_CORE_ATTN,
    SEL_AC_OP,
    SEL_AC_COUNT
} SelAc;

typedef struct {
    int dp, tp, pp, vp, cp;        // data, tensor, pipeline, virtual (interleave), context parallel sizes
    int ep;                        // expert parallel (default 1)
    int etp;                       // expert tensor parallel; 0 = equal to tp (Megatron's default)
    double moe_imbalance;          // busiest EP rank's routed tokens / the mean (dropless); 0 = LAYOUT_MOE_IMBALANCE_DEFAULT
    MoeDispatcher moe_dispatcher;  // Megatron --moe-token-dispatcher-type (default alltoall)
    bool moe_shared_overlap;       // Megatron --moe-shared-expert-overlap: the shared expert under dispatch/combine
    bool moe_a2a_overlap;          // Megatron --overlap-moe-expert-parallel-comm: one micro-batch's dispatch/combine
                                   // under another's compute (1F1B A2A overlap; layout_moe_a2a_overlap says when)
    bool sp;                       // sequence parallel (only meaningful with tp > 1)
    int mbs;                       // micro-batch, sequences
    int gbs;                       // global batch, sequences
    OptimShard opt;
    Precision prec;                // compute / weight precision
    bool grad_fp32;                // gradients accumulated and reduced in fp32 (Megatron default)
    bool flash;                    // fused flash attention (no s^2 activations)
    bool overlap_grad;             // DP gradient reduction overlapped with backward (Megatron --overlap-grad-reduce)
    bool overlap_param;            // distributed optimizer's parameter all-gather overlapped with the next forward
                                   // (Megatron --overlap-param-gather; takes effect with overlap_grad, as Megatron requires)
    bool tp_comm_overlap;          // TP all-gather/reduce-scatter overlapped with the GEMMs they feed (Megatron
                                   // --tp-comm-overlap, Transformer Engine userbuffers; needs sp and tp > 1)
    CpComm cp_comm;                // CP's K/V exchange: ring (p2p, default) or all-gather
    SelAc sel_ac;                  // what selective recomputation recomputes (the stack's; default core_attn)
    bool act_fp8_cache;            // fp8 training keeps activations in DeepSeek-V3's low-precision storage (the stack's:
                                   // memory.c attn_cache_saved, moe_cache_saved); set from the stack as sel_ac is
    bool split_embed;              // the embedding counts as a layer in the stage split (Megatron
                                   // --account-for-embedding-in-pipeline-split)
    bool split_loss;               // the loss (LM head) counts as a layer (--account-for-loss-in-pipeline-split)
    int first_layers, last_layers; // layers of the first / last stage when no split is given, 0 = derive
                                   // (Megatron --decoder-first/last-pipeline-num-layers)
    char pp_layout[LAYOUT_PPL_LEN];// Megatron --pipeline-model-parallel-layout ("Et|(tt|)*30mL"), "" = none:
                                   // layers per stage and chunk, where embedding, MTP and loss sit (layout_pp_parse)
    char rc_modules[LAYOUT_PPL_LEN];// Megatron --recompute-modules besides core_attn ("mla_up_proj,mlp"), "" = none:
                                   // recomputed in every layer not fully recomputed (layout_rc_modules)
    CudaGraphImpl cuda_graph;      // Megatron --cuda-graph-impl (default none)
    char cg_modules[LAYOUT_PPL_LEN];// Megatron --cuda-graph-modules ("attn,moe_router,moe_preprocess"), "" = the
                                   // whole layer under local/transformer_engine (layout_cg_modules)
    Fp8Recipe fp8_recipe;          // Megatron --fp8-recipe under fp8 (default delayed, Megatron's)
    bool fp8_param_gather;         // Megatron --fp8-param-gather: the layers' linear weights kept in fp8 (the
                                   // distributed optimizer's master casts to fp8 and all-gathers that); needs fp8
                                   // and the distributed optimizer or ZeRO-3 (Megatron-FSDP)
    bool fp8_dpa;                  // Transformer Engine's fp8 dot-product attention (Megatron-core's
                                   // fp8_dot_product_attention, which Megatron-Bridge's mixed_precision sets;
                                   // Megatron-LM's CLI has no flag for it): the attention core in fp8 (timing.c)
    bool precision_aware_opt;      // Megatron --use-precision-aware-optimizer: Transformer Engine's FusedAdam, which
                                   // keeps the master as 16-bit remainders where it owns it and the moments in
                                   // exp_avg_dtype / exp_avg_sq_dtype; needs the distributed optimizer
    Precision exp_avg_dtype;       // Megatron --exp-avg-dtype (needs --use-precision-aware-optimizer): Adam's first
                                   // moment in fp32 (default), bf16, fp16 or fp8
    Precision exp_avg_sq_dtype;    // Megatron --exp-avg-sq-dtype: the second moment, likewise
    bool moe_router_pad;           // Megatron --moe-router-padding-for-quantization: the router pads each expert's
                                   // tokens to the fp8 alignment, so the experts copy nothing to pad
    bool torch_compile;            // torch.compile over the model (default on): under a stack whose model code is
                                   // eager PyTorch (hw->eager_elementwise: torchtitan) off prices its unfused
                                   // norms, RoPE and gated activation (model/timing.c eager_bytes)
    MoeWire moe_dispatch_wire;     // Megatron --moe-dispatch-fwd-dtype: the forward dispatch's payload (default bf16)
    MoeWire moe_combine_bwd_wire;  // Megatron --moe-combine-bwd-dtype: the combine's gradient in the backward
    PpSchedule pp_sched;           // pipeline schedule: 1F1B (default; interleaved with vp > 1) or DualPipe
    FlopConvention flops;          // convention for MFU and days
    Target target;                 // the framework it is planned for (what the planner may search)
    int stack;                     // software stack it runs under (profiles/stacks.h index; 0 = megatron-lm); scenario_finish applies it to the profile
    int layers[LAYOUT_MAX_PP];     // layers per pipeline stage; all 0 = even split
    int full_rc[LAYOUT_MAX_PP];    // fully recomputed layers per stage
    int sel_rc[LAYOUT_MAX_PP];     // selectively recomputed layers per stage
} Layout;

/* A layout with everything at 1 / defaults for this model: bf16, flash,
 * ZeRO-0, grad_fp32, no recomputation. */
void layout_default(Layout *lo);

/* Apply one recomputation choice to every layer of every stage (after the
 * layer split is known: call layout_check first or set layers). */
void layout_set_recompute(Layout *lo, Recompute r);

/* Fill an even layer split if none is given and check that every number
 * divides. Returns 0, or -1 with a one-line reason in err. When the layers
 * do not divide by pp and no split is given, the remainder goes to the
 * middle stages (first and last, with the embedding and the LM head, stay
 * lighter); under TARGET_MEGATRON the middle stages stay equal, as
 * --decoder-first/last-pipeline-num-layers require. Split rules apply when
 * no split is given: split_embed/split_loss (Megatron's account-for-*),
 * else first_layers/last_layers; under interleaving with layers that are no
 * multiple of pp*vp the account-for split is taken when one divides
 * (layout_interleave_rule), without setting the flags. With hw (the
 * profile under the run's stack) the precision and what the stack allows
 * are checked too; without it, as when a CSV row is read before its stack
 * is applied, the caller checks layout_check_stack itself. */
int layout_check(Layout *lo, const ModelSpec *m, const HwProfile *hw, char *err, int errlen);
/* What only some stacks run: ZeRO-2 with pp > 1 needs hw->zero2_pp. */
int layout_check_stack(const Layout *lo, const HwProfile *hw, char *err, int errlen);

/* What the GPU itself refuses, whatever the layout: a precision it has no
 * peak for, an fp8 recipe above its compute capability (mxfp8 needs 10.0,
 * blockwise 9.0; a profile without the capability is not checked).
 * layout_check calls it; the planner calls it once before searching. */
int layout_check_precision(const Layout *lo, const HwProfile *hw, char *err, int errlen);

/* Megatron-LM's split with the embedding (e = 1) and/or the loss (l = 1)
 * counted as a layer: every stage (L + e + l) / pp, the first e and the
 * last l fewer decoder layers (layers[0..pp-1] written). */
void layout_rule_split(int L, int pp, int e, int l, int *layers);
/* For interleaving with L not a multiple of pp*vp: the e, l (both first,
 * then embedding, then loss) with which (L + e + l) / pp is a multiple of
 * vp, as NVIDIA's recipes for Llama 3.1 405B (126 layers, pp 8 vp 8) do.
 * 0, or -1 when none divides. */
int layout_interleave_rule(int L, int pp, int vp, int *e, int *l);
/* Decoder layers of model chunk c of stage s under interleaving (the
 * layout string's when one is given, else): layers/vp,
 * or one fewer in chunk 0 of stage 0 (embedding) or the last chunk of the
 * last stage (loss) when that stage is one short of a multiple of vp; -1
 * when the stage splits into no such chunks. vp 1: the stage's layers. */
int layout_chunk_layers(const Layout *lo, int s, int c);

/* Megatron-LM's --pipeline-model-parallel-layout (megatron/core/transformer/
 * pipeline_parallel_layer_layout.py): pp*vp entries split by '|', in the
 * order chunk 0 of stages 0..pp-1, then chunk 1, ...; each entry a run of
 * E (embedding), t (decoder layer), m (MTP layer), L (loss); "(...)*N"
 * repeats a group, "x*N" one character, commas are cosmetic. Megatron's
 * rules: E first and L last, each once, every m after every t, all m in one
 * entry that is the last chunk of its stage. Parsed against pp (and, when
 * m is not NULL, the model's layers and MTP layers); 0, or -1 with err
 * naming the bad character and its 1-based position, or the rule broken. */
typedef struct {
    int pp, vp, n;                   // n = pp * vp entries
    short t[LAYOUT_MAX_CHUNKS];      // decoder layers of entry i (stage i % pp, chunk i / pp)
    short mtp[LAYOUT_MAX_CHUNKS];    // MTP layers of entry i
    int embed, loss, mtp_entry;      // entries holding E, L and the MTP layers (-1: none)
} PipeLayout;
int layout_pp_parse(const char *text, int pp, const ModelSpec *m, PipeLayout *out, char *err, int errlen);
/* The stage that holds the MTP layers: the layout string's, else the last. */
int layout_mtp_stage(const Layout *lo);

/* "1x4,0x12" (or "11,12x6,13"): a per-stage list with runs of equal values
 * folded as VxN, for messages and tables. */
void layout_runs_text(const int *v, int n, char *buf, int len);

int layout_gpus(const Layout *lo);                // dp·tp·pp·cp
/* Megatron-core "parallel folding": attention layers use tp × cp × dp, expert
 * layers etp × ep × edp over the same ranks of a stage; edp = tp·cp·dp /
 * (etp·ep) (layout_check makes it whole). etp 0 reads as tp. */
int layout_etp(const Layout *lo);
int layout_edp(const Layout *lo);
/* Expert-load imbalance the cost model and the executor size expert work
 * and buffers for: tokens the busiest EP rank's experts receive over the
 * mean (dropless routing). The default is an assumption inside the range
 * reported for aux-loss-balanced dropless training (COSTMODEL.md §3.4). */
#define LAYOUT_MOE_IMBALANCE_DEFAULT 1.2
double layout_moe_imbalance(const Layout *lo);
/* Routed token-expert rows one GPU's local experts compute per micro-batch
 * (each of an expert's etp ranks sees all its rows): with capacity factor
 * C > 0 (padded to capacity) C, else moe_imbalance, times
 * tok * topk * etp / tp. 0 for a dense model. */
double layout_moe_rows(const ModelSpec *m, const Layout *lo);
int layout_microbatches(const Layout *lo);        // m = gbs / (dp·mbs)
/* Ranks that reduce gradients together and over which ZeRO shards model
 * states: dp·cp (Megatron forms its data-parallel group over dp × cp). */
int layout_dp_group(const Layout *lo);
/* Tokens one GPU processes per micro-batch: mbs · s / cp (its CP shard). */
double layout_mb_tokens(const ModelSpec *m, const Layout *lo);
/* The share of a non-TP-split activation one GPU holds or touches: 1/tp
 * under sequence parallelism, else 1 (replicated). */
double layout_sp_share(const Layout *lo);
Recompute layout_stage_recompute(const Layout *lo, int stage);  // dominant mode for display

/* Megatron's --recompute-modules other than core_attn (which is --recompute
 * selective): the forward each recomputes before the backward. */
typedef enum {
    RCM_LAYERNORM = 1 << 0,      // input_layernorm and pre_mlp_layernorm
    RCM_MLA_UP_PROJ = 1 << 1,    // MLA's q and kv up projections (their outputs Q, K, V)
    RCM_MOE_ACT = 1 << 2,        // the routed experts' activation function
    RCM_MLP = 1 << 3,            // a dense layer's MLP
    RCM_SHARED_EXPERTS = 1 << 4, // the shared expert's MLP
} RcModule;
/* names separated by ',', '+' or spaces into a RcModule mask; -1 with the
 * offending name in err (core_attn and moe are refused, each saying why) */
int layout_parse_rc_modules(const char *s, int *mask, char *err, int errlen);
int layout_rc_modules(const Layout *lo);   // the mask of lo->rc_modules (0 when unparsable: layout_check refuses it)
/* the names of a RcModule mask, in table order, joined by sep */
void layout_format_rc_modules(int mask, const char *sep, char *buf, int len);

/* Megatron's --cuda-graph-modules: the parts of each layer a local or
 * transformer_engine CUDA graph captures (none named: the whole layer). */
typedef enum {
    CGM_ATTN = 1 << 0,            // TransformerLayer._forward_attention: norm, QKV, core, projection, residual
    CGM_MLP = 1 << 1,             // a dense layer's _forward_mlp
    CGM_MOE = 1 << 2,             // an MoE layer's _forward_mlp, whole (static shapes only)
    CGM_MOE_ROUTER = 1 << 3,      // an MoE layer's _forward_mlp up to the router (norm, router, top-k)
    CGM_MOE_PREPROCESS = 1 << 4,  // MoELayer.preprocess (the dispatcher's token counts); needs moe_router
} CgModule;
int layout_parse_cg_modules(const char *s, int *mask, char *err, int errlen);
int layout_cg_modules(const Layout *lo);   // the mask of lo->cg_modules (0 when unparsable: layout_check refuses it)
void layout_format_cg_modules(int mask, const char *sep, char *buf, int len);
const char *layout_cuda_graph_name(CudaGraphImpl g);   // "none", "local", "transformer_engine", "full_iteration"
int layout_parse_cuda_graph(const char *s, CudaGraphImpl *out);
const char *layout_fp8_recipe_name(Fp8Recipe r);   // "delayed", "tensorwise", "mxfp8", "blockwise"
int layout_parse_fp8_recipe(const char *s, Fp8Recipe *out);
const char *layout_moe_wire_name(MoeWire w);       // "bf16", "mxfp8"
int layout_parse_moe_wire(const char *s, MoeWire *out);
const char *layout_pp_sched_name(PpSchedule p);    // "1f1b", "dualpipe"
int layout_parse_pp_sched(const char *s, PpSchedule *out);
/* DualPipe: the model stage that shares a pipeline rank with stage s
 * (pp-1-s); s itself under 1F1B. */
int layout_pp_mirror(const Layout *lo, int s);
const char *layout_dispatcher_name(MoeDispatcher d);   // "alltoall", "allgather", "flex"
int layout_parse_dispatcher(const char *s, MoeDispatcher *out);
/* Megatron's --overlap-moe-expert-parallel-comm asks for ep > 1, the
 * alltoall or flex dispatcher, interleaving when pp > 1 and no full
 * recomputation (megatron/training/arguments.py, Megatron-Bridge's
 * comm_overlap.py). 0 when the switch is off or they hold, else -1 with
 * which does not. */
int layout_moe_a2a_check(const Layout *lo, char *why, int len);

const char *layout_opt_name(OptimShard o);
int layout_parse_opt(const char *s, OptimShard *out);
const char *layout_target_name(Target t);          // "megatron", "ultraplan", "ultraplan-cuda"
int layout_parse_target(const char *s, Target *out);
const char *layout_cp_comm_name(CpComm c);         // "ring", "all-gather"
int layout_parse_cp_comm(const char *s, CpComm *out);   // also Megatron's p2p, all_gather
const char *layout_sel_ac_name(SelAc a);           // "core_attn", "op"
int layout_parse_sel_ac(const char *s, SelAc *out);
/* Whether this layout's selectively recomputed layers follow torchtitan's
 * per-op policy: the stack says op, and the layers are ones the policy is
 * priced for (dense multi-head/GQA attention; an MoE or MLA model keeps the
 * core_attn pricing, COSTMODEL.md §2.2.1). */
bool layout_sel_op(const ModelSpec *m, const Layout *lo);
/* Whether some layer is selectively recomputed under that per-op policy:
 * what the executors and the Megatron export cannot run. */
bool layout_sel_op_used(const ModelSpec *m, const Layout *lo);

/* How Megatron-LM (checked against NVIDIA/Megatron-LM d98e8a6, 2026-08-22:
 * megatron/training/arguments.py, megatron/core/transformer/
 * transformer_config.py, transformer_block.py, megatron/core/recompute.py)
 * expresses a layout's recomputation and stage split.
 *   recompute: --recompute-granularity selective covers every layer;
 *     full with --recompute-method uniform|block --recompute-num-layers N
 *     applies per model chunk (vp chunks per stage) on every stage: block
 *     recomputes the first min(N, chunk) layers of each chunk, uniform
 *     (N = 1 here) every layer. No mix of full and selective.
 *   split: even, or --decoder-first-pipeline-num-layers /
 *     --decoder-last-pipeline-num-layers with every middle stage equal
 *     (under interleaving every count a multiple of vp), or
 *     --account-for-embedding/loss-in-pipeline-split: (L + e + l) / pp per
 *     stage in vp equal chunks, the embedding taking a layer's place in
 *     chunk 0 of stage 0 and the loss in the last chunk of the last stage
 *     (transformer_config.py, transformer_layer.py's layer offsets).
 *   optimizer: ZeRO-1 / distributed optimizer --use-distributed-optimizer;
 *     ZeRO-2 / ZeRO-3 Megatron-FSDP --data-parallel-sharding-strategy
 *     optim_grads / optim_grads_params (pp 1, layout_check). */
typedef enum { MEGA_RC_NONE, MEGA_RC_SELECTIVE, MEGA_RC_FULL_UNIFORM, MEGA_RC_FULL_BLOCK } MegatronRecompute;

typedef struct {
    MegatronRecompute rc;
    int rc_layers;          // --recompute-num-layers: per chunk (block), 1 (uniform), 0 otherwise
    int first_layers;       // --decoder-first-pipeline-num-layers, 0 = not needed
    int last_layers;        // --decoder-last-pipeline-num-layers, 0 = not needed
    bool embed_in_split;    // --account-for-embedding-in-pipeline-split (interleaved, stage 0 a layer short)
    bool loss_in_split;     // --account-for-loss-in-pipeline-split (interleaved, the last stage a layer short)
    bool pp_layout;         // --pipeline-model-parallel-layout lo->pp_layout (it replaces the split flags)
} MegatronForm;

/* 0 when Megatron-LM runs the checked layout `lo` exactly as laid out (and
 * *form, when not NULL, says how); -1 with why ("stage 3 recomputes 2 full
 * layers, ...: Megatron-LM recomputes the same count per model chunk on
 * every stage") otherwise. Whatever lo->target is. */
int layout_megatron_form(const Layout *lo, const ModelSpec *m, MegatronForm *form, char *why, int len);
int layout_megatron_check(const Layout *lo, const ModelSpec *m, char *why, int len);
/* What Megatron-LM's command line cannot express whatever the stage split:
 * fp8 dot-product attention (no flag) and ZeRO-2/3 with pp > 1 (the export
 * writes Megatron-FSDP with pp 1 only). -1 with the reason, which names
 * what to plan instead. layout_megatron_form asks it first; the planner
 * filters outer choices with it before any split is made. */
int layout_megatron_unsplit(const Layout *lo, char *why, int len);

#endif
