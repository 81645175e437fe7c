/* knobs.c — the knob table and its accessors (see knobs.h). */
#include "knobs.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "parse.h"
#include "scenario.h"
#include "stacks.h"
#include "suggest.h"

/* Enum fields are read and written as ints. */
_Static_assert(sizeof(MlpKind) == sizeof(int) && sizeof(NormKind) == sizeof(int) && sizeof(PosKind) == sizeof(int) &&
                   sizeof(OptimShard) == sizeof(int) && sizeof(Precision) == sizeof(int) &&
                   sizeof(FlopConvention) == sizeof(int) && sizeof(Recompute) == sizeof(int) &&
                   sizeof(Target) == sizeof(int) && sizeof(AttnKind) == sizeof(int) && sizeof(CpComm) == sizeof(int) &&
                   sizeof(MoeDispatcher) == sizeof(int) && sizeof(CudaGraphImpl) == sizeof(int) &&
                   sizeof(Fp8Recipe) == sizeof(int) && sizeof(MoeWire) == sizeof(int) &&
                   sizeof(PpSchedule) == sizeof(int),
               "enum knobs are int-sized");

/* name and parse functions of each enum, over ints */
#define ENUM_WRAP(tag, T, name_fn, parse_fn)                                                                    \
    static const char *tag##_name(int v) { return name_fn((T)v); }                                              \
    static int tag##_parse(const char *s, int *v)                                                               \
    {                                                                                                           \
        T t;                                                                                                    \
        if (parse_fn(s, &t) != 0)                                                                               \
            return -1;                                                                                          \
        *v = (int)t;                                                                                            \
        return 0;                                                                                               \
    }
ENUM_WRAP(mlp, MlpKind, spec_mlp_name, spec_parse_mlp)
ENUM_WRAP(norm, NormKind, spec_norm_name, spec_parse_norm)
ENUM_WRAP(pos, PosKind, spec_pos_name, spec_parse_pos)
ENUM_WRAP(attn, AttnKind, spec_attn_name, spec_parse_attn)
ENUM_WRAP(prec, Precision, hw_precision_name, hw_parse_precision)
ENUM_WRAP(flops, FlopConvention, spec_flops_name, spec_parse_flops)
ENUM_WRAP(rc, Recompute, spec_recompute_name, spec_parse_recompute)
ENUM_WRAP(target, Target, layout_target_name, layout_parse_target)
ENUM_WRAP(cpcomm, CpComm, layout_cp_comm_name, layout_parse_cp_comm)
ENUM_WRAP(dispatcher, MoeDispatcher, layout_dispatcher_name, layout_parse_dispatcher)
ENUM_WRAP(cgraph, CudaGraphImpl, layout_cuda_graph_name, layout_parse_cuda_graph)
ENUM_WRAP(fp8r, Fp8Recipe, layout_fp8_recipe_name, layout_parse_fp8_recipe)
ENUM_WRAP(wire, MoeWire, layout_moe_wire_name, layout_parse_moe_wire)
ENUM_WRAP(ppsched, PpSchedule, layout_pp_sched_name, layout_parse_pp_sched)

static const char *opt_name(int v) { return layout_opt_name((OptimShard)v); }
/* --zero takes the stage's digit; plan.json and the TUI also the names */
static int opt_parse(const char *s, int *v)
{
    if (s[0] >= '0' && s[0] <= '3' && s[1] == 0) {
        *v = s[0] - '0';
        return 0;
    }
    OptimShard o;
    if (!strcasecmp(s, "dist-opt"))
        s = "distopt";
    if (layout_parse_opt(s, &o) != 0)
        return -1;
    *v = (int)o;
    return 0;
}

static const char *stack_kname(int v)
{
    const char *n = stacks_name(v);
    return n ? n : "?";
}
static int stack_kparse(const char *s, int *v)
{
    *v = stacks_index(s);
    return *v < 0 ? -1 : 0;
}

static void mbs_text(const void *lo, int v, char *buf, int len)
{
    snprintf(buf, len, "%d (m=%d)", v, layout_microbatches(lo));
}

static void sp_text(const void *lo, int v, char *buf, int len)
{
    snprintf(buf, len, "%s", ((const Layout *)lo)->tp == 1 ? "off (tp=1)" : v ? "on" : "off");
}

static int sp_check(const void *lo, int v, char *err, int errlen)
{
    if (v && ((const Layout *)lo)->tp == 1) {
        snprintf(err, errlen, "needs tp > 1");
        return -1;
    }
    return 0;
}

static int head_dim_value(const void *m) { return spec_head_dim(m); }
static int microbatches_value(const void *lo) { return layout_microbatches(lo); }

#define M(field) KNOB_MODEL, .off = offsetof(ModelSpec, field)
#define L(field) KNOB_LAYOUT, .off = offsetof(Layout, field)
#define S(field) KNOB_SCENARIO, .off = offsetof(Scenario, field)
#define INT(lo_, hi_) .type = KNOB_INT, .min = (lo_), .max = (hi_), .arg = "N"
#define DOUBLE(lo_, hi_) .type = KNOB_DOUBLE, .dmin = (lo_), .dmax = (hi_), .arg = "F"
#define ENUM(tag, n) .type = KNOB_ENUM, .count = (n), .value_name = tag##_name, .value_parse = tag##_parse
#define BIG 2147483647

static const Knob table[KNOB_COUNT] = {
    /* ---- model shape ---- */
    [K_LAYERS] = {K_LAYERS, "layers", M(L), INT(1, BIG), .flag = "layers", .json = "layers", .csv = "layers",
                  .custom_required = true, .help = "transformer layers"},
    [K_HIDDEN] = {K_HIDDEN, "hidden", M(h), INT(1, BIG), .flag = "hidden", .json = "hidden", .csv = "hidden",
                  .custom_required = true, .resets = KNOB_BIT(K_HEAD_DIM) | KNOB_BIT(K_FFN),
                  .help = "hidden size"},
    [K_HEADS] = {K_HEADS, "heads", M(a), INT(1, BIG), .flag = "heads", .json = "heads", .csv = "heads",
                 .custom_required = true, .resets = KNOB_BIT(K_HEAD_DIM) | KNOB_BIT(K_KV_HEADS),
                 .help = "attention (query) heads"},
    [K_KV_HEADS] = {K_KV_HEADS, "kv-heads", M(g), INT(1, BIG), .flag = "kv-heads", .json = "kv_heads",
                    .csv = "kv_heads", .help = "key/value heads (GQA)", .dflt = "= heads"},
    [K_HEAD_DIM] = {K_HEAD_DIM, "head-dim", M(d_head), INT(1, BIG), .flag = "head-dim", .json = "head_dim", .csv = "head_dim",
                    .json_value = head_dim_value, .help = "head dimension", .dflt = "hidden/heads"},
    [K_FFN] = {K_FFN, "ffn", M(f), INT(1, BIG), .flag = "ffn", .json = "ffn", .csv = "ffn",
               .help = "MLP hidden size", .dflt = "4h, or Llama's 8h/3 rounded for SwiGLU"},
    [K_VOCAB] = {K_VOCAB, "vocab", M(vocab), INT(1, BIG), .flag = "vocab", .json = "vocab", .csv = "vocab",
                 .custom_required = true, .help = "vocabulary size"},
    [K_VOCAB_DIV] = {K_VOCAB_DIV, "vocab-div", M(vocab_div), INT(1, BIG), .flag = "vocab-div", .json = "vocab_div",
                     .help = "pad the vocabulary to a multiple of this times tp", .dflt = "128, Megatron's"},
    [K_SEQ] = {K_SEQ, "seq", M(s), INT(1, BIG), .flag = "seq", .json = "seq", .csv = "seq",
               .custom_required = true, .help = "tokens per sequence", .tui_help = "tokens per sequence",
               .tui_label = "sequence", .tui_row = 50, .tui_step = TUI_DOUBLE, .tui_problem = true},
    [K_MLP] = {K_MLP, "mlp", M(mlp), ENUM(mlp, 2), .flag = "mlp", .arg = "gelu|swiglu", .json = "mlp",
               .csv = "mlp", .resets = KNOB_BIT(K_FFN), .help = "MLP kind"},
    [K_NORM] = {K_NORM, "norm", M(norm), ENUM(norm, 2), .flag = "norm", .arg = "layernorm|rmsnorm",
                .json = "norm", .csv = "norm", .help = "normalisation"},
    [K_POS] = {K_POS, "pos", M(pos), ENUM(pos, 2), .flag = "pos", .arg = "learned|rope", .json = "pos",
               .csv = "pos", .help = "position embedding"},
    [K_BIAS] = {K_BIAS, "bias", M(bias), .type = KNOB_BOOL, .flag = "bias", .neg_flag = "no-bias",
                .json = "bias", .csv = "bias", .custom_default = 0, .help = "linear biases",
                .dflt = "the preset's; off for an explicit shape"},
    [K_TIED] = {K_TIED, "tied", M(tied), .type = KNOB_BOOL, .flag = "tied", .neg_flag = "untied", .json = "tied", .csv = "tied",
                .custom_default = 1, .help = "output layer shares the input embedding",
                .dflt = "the preset's; tied for an explicit shape"},
    [K_DROPOUT] = {K_DROPOUT, "dropout", M(dropout), .type = KNOB_BOOL, .flag = "dropout",
                   .neg_flag = "no-dropout", .json = "dropout", .csv = "dropout", .help = "dropout masks (GPT-3 style)", .dflt = "the preset's; off for an explicit shape"},
    /* no cost depends on these two; plan files keep them so export runs this model */
    [K_ROPE_THETA] = {K_ROPE_THETA, "rope-theta", M(rope_theta), INT(0, BIG), .flag = "rope-theta",
                      .json = "rope_theta", .json_optional = true, .help = "RoPE base frequency, 0 = 10000 (exported as --rotary-base)",
                      .dflt = "the preset's; 0 for an explicit shape"},
    [K_ROPE_SCALING] = {K_ROPE_SCALING, "rope-scaling", M(rope_scaling), .type = KNOB_BOOL, .flag = "rope-scaling",
                        .neg_flag = "no-rope-scaling", .json = "rope_scaling", .json_optional = true, .custom_default = 0,
                        .help = "Llama 3.x RoPE frequency scaling (exported as --use-rope-scaling)",
                        .dflt = "the preset's; off for an explicit shape"},
    /* ---- mixture of experts (0 = dense), MTP, MLA: plan files written before them load as dense MHA ---- */
    [K_EXPERTS] = {K_EXPERTS, "experts", M(experts), INT(0, 65536), .flag = "experts", .json = "experts",
                   .json_optional = true, .csv = "experts", .help = "routed experts per MoE layer (0 = dense)",
                   .dflt = "the preset's; 0 for an explicit shape"},
    [K_TOPK] = {K_TOPK, "topk", M(topk), INT(0, 65536), .flag = "topk", .json = "topk", .json_optional = true,
                .csv = "topk", .help = "routed experts per token (Megatron --moe-router-topk)"},
    [K_MOE_FFN] = {K_MOE_FFN, "moe-ffn", M(moe_ffn), INT(0, BIG), .flag = "moe-ffn", .json = "moe_ffn",
                   .json_optional = true, .csv = "moe_ffn", .help = "hidden size of one routed expert",
                   .dflt = "= ffn"},
    [K_SHARED_FFN] = {K_SHARED_FFN, "shared-ffn", M(shared_ffn), INT(0, BIG), .flag = "shared-ffn",
                      .json = "shared_ffn", .json_optional = true, .csv = "shared_ffn",
                      .help = "total hidden size of the shared expert(s), 0 = none", .dflt = "0"},
    [K_MOE_FREQ] = {K_MOE_FREQ, "moe-layer-freq", M(moe_freq), .type = KNOB_INT, .min = 0, .max = 100000,
                    .flag = "moe-layer-freq", .arg = "N|LIST", .expect = "N or a list such as [0]*3+[1]*58",
                    .json = "moe_layer_freq", .json_optional = true, .csv = "moe_layer_freq",
                    .help = "MoE every N-th layer from layer 0, or a Megatron list ([0]*3+[1]*58: 3 dense first)",
                    .dflt = "1"},
    [K_MOE_FIRST_DENSE] = {K_MOE_FIRST_DENSE, "moe-first-dense", M(moe_first_dense), INT(0, BIG),
                           .flag = "moe-first-dense", .json = "moe_first_dense", .json_optional = true,
                           .csv = "moe_first_dense", .help = "leading dense layers before the MoE pattern",
                           .dflt = "0"},
    [K_MTP_LAYERS] = {K_MTP_LAYERS, "mtp-layers", M(mtp_layers), INT(0, 16), .flag = "mtp-layers",
                      .json = "mtp_layers", .json_optional = true, .csv = "mtp_layers",
                      .help = "multi-token-prediction modules (DeepSeek-V3: 1)", .dflt = "0"},
    [K_ATTN] = {K_ATTN, "attn", M(attn), ENUM(attn, ATTN_COUNT), .flag = "attn", .arg = "mha|mla", .json = "attn",
                .json_optional = true, .csv = "attn",
                .help = "attention: mha (with GQA/MQA via --kv-heads) or mla (multi-head latent)", .dflt = "mha"},
    [K_Q_LORA_RANK] = {K_Q_LORA_RANK, "q-lora-rank", M(q_lora_rank), INT(0, 10000000), .flag = "q-lora-rank",
                       .json = "q_lora_rank", .json_optional = true, .csv = "q_lora_rank", .help = "MLA query compression rank (0 = none)"},
    [K_KV_LORA_RANK] = {K_KV_LORA_RANK, "kv-lora-rank", M(kv_lora_rank), INT(0, 10000000), .flag = "kv-lora-rank",
                        .json = "kv_lora_rank", .json_optional = true, .csv = "kv_lora_rank", .help = "MLA key/value compression rank"},
    [K_QK_NOPE_DIM] = {K_QK_NOPE_DIM, "qk-nope-dim", M(qk_nope_dim), INT(0, 1000000), .flag = "qk-nope-dim",
                       .json = "qk_nope_dim", .json_optional = true, .csv = "qk_nope_dim", .help = "MLA q/k head dimension without RoPE"},
    [K_QK_ROPE_DIM] = {K_QK_ROPE_DIM, "qk-rope-dim", M(qk_rope_dim), INT(0, 1000000), .flag = "qk-rope-dim",
                       .json = "qk_rope_dim", .json_optional = true, .csv = "qk_rope_dim", .help = "MLA q/k RoPE head dimension"},
    [K_V_HEAD_DIM] = {K_V_HEAD_DIM, "v-head-dim", M(v_head_dim), INT(0, 1000000), .flag = "v-head-dim",
                      .json = "v_head_dim", .json_optional = true, .csv = "v_head_dim", .help = "MLA value head dimension"},
    /* Megatron's --moe-expert-capacity-factor: absent (0) = dropless */
    [K_CAPACITY_FACTOR] = {K_CAPACITY_FACTOR, "capacity-factor", M(capacity_factor), DOUBLE(0, 1000),
                           .flag = "capacity-factor", .expect = "a number from 0 (dropless) to 1000",
                           .json = "capacity_factor", .json_optional = true, .csv = "capacity_factor",
                           .help = "expert capacity factor: each expert takes at most F*tokens*topk/experts rows, "
                                   "padded to that (0 = dropless)",
                           .dflt = "dropless"},
    /* Megatron's --moe-router-num-groups / --moe-router-group-topk: group-limited routing (DeepSeek-V3's
     * node-limited routing, 8 groups, 4 a token); it bounds the nodes a token is sent to (time_moe_a2a_s) */
    [K_ROUTER_GROUPS] = {K_ROUTER_GROUPS, "moe-router-num-groups", M(router_groups), INT(0, 65536),
                         .flag = "moe-router-num-groups", .json = "moe_router_num_groups", .json_optional = true,
                         .csv = "moe_router_groups",
                         .help = "group-limited routing: experts in N equal groups (DeepSeek-V3: 8, one a node)",
                         .dflt = "0, no group limit"},
    [K_ROUTER_GROUP_TOPK] = {K_ROUTER_GROUP_TOPK, "moe-router-group-topk", M(router_group_topk), INT(0, 65536),
                             .flag = "moe-router-group-topk", .json = "moe_router_group_topk", .json_optional = true,
                             .csv = "moe_router_group_topk",
                             .help = "group-limited routing: a token's experts from at most K groups (DeepSeek-V3: 4)",
                             .dflt = "0, no group limit"},
    /* GPT-OSS (Megatron --window-size W,0 --window-attn-skip-freq N --softmax-type learnable --quick-geglu
     * --activation-func-clamp-value C --glu-linear-offset 1): plan files written before them load without */
    [K_WINDOW] = {K_WINDOW, "window", M(window), INT(0, 100000000), .flag = "window", .json = "window",
                  .json_optional = true, .csv = "window",
                  .help = "sliding-window attention: a query sees itself and the W keys before it (GPT-OSS: 128)",
                  .dflt = "0, full causal attention"},
    [K_WINDOW_SKIP_FREQ] = {K_WINDOW_SKIP_FREQ, "window-skip-freq", M(window_skip_freq), INT(0, 100000),
                            .flag = "window-skip-freq", .json = "window_skip_freq", .json_optional = true,
                            .csv = "window_skip_freq",
                            .help = "with --window: every N-th layer (1-based) runs full attention (GPT-OSS: 2)",
                            .dflt = "0, every layer windowed"},
    [K_SINKS] = {K_SINKS, "attn-sinks", M(sinks), .type = KNOB_BOOL, .flag = "attn-sinks", .neg_flag = "no-attn-sinks",
                 .json = "attn_sinks", .json_optional = true, .csv = "attn_sinks", .custom_default = 0,
                 .help = "attention sinks: a learned softmax offset per head (Megatron --softmax-type learnable)",
                 .dflt = "the preset's; off for an explicit shape"},
    [K_ACT_CLAMP] = {K_ACT_CLAMP, "act-clamp", M(act_clamp), DOUBLE(0, 1e6), .flag = "act-clamp",
                     .expect = "a number from 0 (plain gated MLP) to 1e6", .json = "act_clamp", .json_optional = true,
                     .csv = "act_clamp",
                     .help = "GPT-OSS activation: quick-GELU gate, halves clamped to +-C, linear half + 1 (GPT-OSS: 7)",
                     .dflt = "0, the plain gated MLP"},

    /* ---- layout ---- */
    [K_DP] = {K_DP, "dp", L(dp), INT(1, BIG), .flag = "dp", .json = "dp", .csv = "dp", .fix = FIX_DP,
              .help = "data parallel size", .dflt = "gpus/(tp*pp*cp)", .searched = true, .tui_help = "data parallel = GPUs/(tp*pp*cp)",
              .tui_label = "dp", .tui_row = 130, .tui_step = TUI_DERIVED},
    [K_TP] = {K_TP, "tp", L(tp), INT(1, BIG), .flag = "tp", .json = "tp", .csv = "tp", .fix = FIX_TP,
              .help = "tensor parallel size", .dflt = "1", .searched = true, .tui_help = "tensor parallel", .tui_label = "tp", .tui_row = 90, .tui_step = TUI_DOUBLE},
    [K_PP] = {K_PP, "pp", L(pp), INT(1, BIG), .flag = "pp", .json = "pp", .csv = "pp", .fix = FIX_PP,
              .help = "pipeline stages", .dflt = "1", .searched = true, .tui_label = "pp", .tui_row = 100, .tui_step = TUI_SEARCH},
    [K_VP] = {K_VP, "vp", L(vp), INT(1, BIG), .flag = "vp", .json = "vp", .csv = "vp", .fix = FIX_VP,
              .help = "virtual stages per pipeline rank (interleaving)", .dflt = "1", .searched = true, .tui_help = "virtual stages (interleaving)",
              .tui_label = "vp", .tui_row = 110,
              .tui_step = TUI_SEARCH},
    [K_CP] = {K_CP, "cp", L(cp), INT(1, BIG), .flag = "cp", .json = "cp", .csv = "cp", .fix = FIX_CP,
              .help = "context parallel size", .dflt = "1", .searched = true, .tui_help = "context parallel", .tui_label = "cp", .tui_row = 120, .tui_step = TUI_DOUBLE},
    /* expert parallelism (Megatron-core parallel folding); searched for MoE models */
    [K_EP] = {K_EP, "ep", L(ep), INT(1, BIG), .flag = "ep", .json = "ep", .json_optional = true, .csv = "ep",
              .fix = FIX_EP, .searched = true,
              .help = "expert parallel size (expert layers: etp x ep x edp over the attention's tp x cp x dp)",
              .dflt = "1"},
    [K_ETP] = {K_ETP, "etp", L(etp), INT(0, BIG), .flag = "etp", .json = "etp", .json_optional = true, .csv = "etp",
               .fix = FIX_ETP, .searched = true,
               .help = "expert tensor parallel size, 0 = tp", .dflt = "= tp (Megatron's)"},
    /* a cost knob of the layout: how much busier than the mean the busiest EP rank is under dropless routing */
    [K_MOE_IMBALANCE] = {K_MOE_IMBALANCE, "moe-imbalance", L(moe_imbalance), DOUBLE(0, 64), .flag = "moe-imbalance",
                         .expect = "a number from 1 to 64 (0 = the default)", .json = "moe_imbalance",
                         .json_optional = true, .csv = "moe_imbalance",
                         .help = "dropless routing: the busiest EP rank's routed tokens over the mean (1 = "
                                 "balanced; it scales expert GEMMs, dispatch and expert activations)",
                         .dflt = "1.2, COSTMODEL.md 3.4"},
    /* Megatron's --moe-token-dispatcher-type and --overlap-moe-expert-parallel-comm: the stack's EP
     * communication (model/timing.c time_moe_a2a_s) */
    [K_MOE_DISPATCHER] = {K_MOE_DISPATCHER, "moe-token-dispatcher", L(moe_dispatcher),
                          ENUM(dispatcher, MOE_DISPATCH_COUNT), .flag = "moe-token-dispatcher-type",
                          .arg = "alltoall|allgather|flex", .json = "moe_token_dispatcher", .json_optional = true,
                          .csv = "moe_dispatcher",
                          .help = "MoE token dispatch: alltoall over EP, allgather, or flex (DeepEP/HybridEP: each "
                                  "token once per remote node over the NIC, fanned out over NVLink)",
                          .dflt = "alltoall (written by export; Megatron-LM's own default is allgather)"},
    [K_MOE_A2A_OVERLAP] = {K_MOE_A2A_OVERLAP, "overlap-moe-expert-parallel-comm", L(moe_a2a_overlap),
                           .type = KNOB_BOOL, .flag = "overlap-moe-expert-parallel-comm",
                           .neg_flag = "no-overlap-moe-expert-parallel-comm", .json = "overlap_moe_expert_parallel_comm",
                           .json_optional = true, .csv = "moe_a2a_overlap",
                           .help = "EP dispatch/combine of one micro-batch under another's compute (1F1B A2A "
                                   "overlap; needs ep > 1, alltoall or flex, vp > 1 when pp > 1, no full recompute)",
                           .dflt = "off, Megatron-LM's"},
    [K_MOE_SHARED_OVERLAP] = {K_MOE_SHARED_OVERLAP, "moe-shared-expert-overlap", L(moe_shared_overlap),
                              .type = KNOB_BOOL, .flag = "moe-shared-expert-overlap",
                              .neg_flag = "no-moe-shared-expert-overlap", .json = "moe_shared_expert_overlap",
                              .json_optional = true, .csv = "moe_shared_overlap",
                              .help = "the shared expert computed on its own stream under the dispatch and combine "
                                      "(needs alltoall or flex; no effect without a shared expert)",
                              .dflt = "off, Megatron-LM's"},
    [K_SP] = {K_SP, "sp", L(sp), .type = KNOB_BOOL, .flag = "sp", .neg_flag = "no-sp", .json = "sp", .csv = "sp",
              .fix = FIX_SP, .help = "sequence parallel", .dflt = "on when tp > 1", .searched = true,
              .tui_label = "seq-parallel", .tui_row = 170, .tui_step = TUI_TOGGLE,
              .tui_help = "on or off (needs tp > 1)", .tui_text = sp_text, .tui_check = sp_check},
    [K_MBS] = {K_MBS, "mbs", L(mbs), INT(1, BIG), .flag = "mbs", .json = "mbs", .csv = "mbs", .fix = FIX_MBS,
               .help = "micro-batch, sequences", .dflt = "1", .searched = true, .tui_label = "micro-batch", .tui_row = 140,
               .tui_step = TUI_DOUBLE, .tui_help = "sequences per micro-batch", .tui_text = mbs_text},
    [K_GBS] = {K_GBS, "gbs", L(gbs), INT(1, BIG), .flag = "gbs", .json = "gbs", .csv = "gbs", .fix = FIX_GBS,
               .help = "global batch, sequences", .dflt = "by model size and GPU count, see plan --help",
               .tui_help = "sequences per step", .tui_label = "global batch", .tui_row = 60, .tui_step = TUI_DOUBLE, .tui_problem = true},
    [K_MICROBATCHES] = {K_MICROBATCHES, "microbatches", L(gbs), .type = KNOB_DERIVED, .json = "microbatches",
                        .json_value = microbatches_value},
    [K_OPTIMIZER] = {K_OPTIMIZER, "optimizer", L(opt), ENUM(opt, 5), .flag = "zero", .arg = "0..3",
                     .expect = "0..3, zero0..zero3 or distopt", .neg_flag = "dist-opt", .alias_value = OPT_DISTOPT,
                     .json = "optimizer", .csv = "zero", .fix = FIX_OPT,
                     .help = "ZeRO stage, or --dist-opt: Megatron's distributed optimizer (ZeRO-2 and 3 need pp 1; ZeRO-2 beside pp under --stack llama3-meta)", .dflt = "0", .searched = true,
                     .tui_help = "zero0..3 or distopt", .tui_label = "ZeRO", .tui_row = 150, .tui_step = TUI_CYCLE},
    [K_PRECISION] = {K_PRECISION, "precision", L(prec), ENUM(prec, PREC_COUNT), .flag = "precision",
                     .arg = "fp32|bf16|fp16|fp8", .json = "precision", .csv = "precision", .fix = FIX_PREC,
                     .help = "compute precision", .dflt = "bf16, or the best the profile has; plan --search-precision also tries fp8",
                     .tui_help = "bf16, fp16, fp8, fp32", .tui_label = "precision", .tui_row = 180, .tui_step = TUI_CYCLE},
    [K_GRAD_FP32] = {K_GRAD_FP32, "grad-fp32", L(grad_fp32), .type = KNOB_BOOL, .flag = "grad-fp32",
                     .neg_flag = "no-grad-fp32", .json = "grad_fp32", .csv = "grad_fp32",
                     .help = "fp32 main gradients", .dflt = "on, Megatron's"},
    [K_FLASH] = {K_FLASH, "flash", L(flash), .type = KNOB_BOOL, .flag = "flash", .neg_flag = "no-flash",
                 .json = "flash", .csv = "flash", .fix = FIX_FLASH, .help = "fused flash attention", .dflt = "on"},
    [K_OVERLAP_GRAD] = {K_OVERLAP_GRAD, "overlap-grad-reduce", L(overlap_grad), .type = KNOB_BOOL,
                         .flag = "overlap-grad-reduce", .neg_flag = "no-overlap-grad-reduce",
                         .json = "overlap_grad_reduce", .json_optional = true, .csv = "overlap_grad_reduce",
                         .help = "DP gradient reduction overlapped with backward", .dflt = "on, the standard recipe's"},
    [K_OVERLAP_PARAM] = {K_OVERLAP_PARAM, "overlap-param-gather", L(overlap_param), .type = KNOB_BOOL,
                         .flag = "overlap-param-gather", .neg_flag = "no-overlap-param-gather",
                         .json = "overlap_param_gather", .json_optional = true, .csv = "overlap_param_gather",
                         .help = "distributed optimizer's parameter all-gather overlapped with the next forward "
                                 "(needs --overlap-grad-reduce)", .dflt = "on, the standard recipe's"},
    [K_TP_OVERLAP] = {K_TP_OVERLAP, "tp-comm-overlap", L(tp_comm_overlap), .type = KNOB_BOOL,
                      .flag = "tp-comm-overlap", .neg_flag = "no-tp-comm-overlap", .json = "tp_comm_overlap",
                      .json_optional = true, .csv = "tp_comm_overlap",
                      .help = "TP all-gather/reduce-scatter overlapped with the GEMMs they feed (userbuffers; "
                              "needs sp)", .dflt = "off, Megatron-LM's; NeMo's tuned H100 configs turn it on"},
    [K_CP_COMM] = {K_CP_COMM, "cp-comm", L(cp_comm), ENUM(cpcomm, CP_COMM_COUNT), .flag = "cp-comm",
                   .arg = "ring|all-gather", .json = "cp_comm", .json_optional = true, .csv = "cp_comm",
                   .help = "context parallel K/V exchange: ring (p2p sends overlapped with attention on the block "
                           "in hand) or all-gather (K and V gathered before the attention, Llama 3's) "
                           "(exported as --cp-comm-type p2p|all_gather; ultraplan's own executors run the ring)",
                   .dflt = "ring, Megatron's p2p"},
    [K_FLOPS] = {K_FLOPS, "flops", L(flops), ENUM(flops, FLOPS_CONVENTION_COUNT), .flag = "flops",
                 .arg = "full|causal|6n|palm", .json = "flops", .json_optional = true,
                 .help = "FLOP convention for MFU", .dflt = "full = Korthikanti Eq. 7"},
    [K_STAGE_LAYERS] = {K_STAGE_LAYERS, "stage-layers", L(layers), .type = KNOB_LIST, .min = 1, .max = 100000,
                        .flag = "stage-layers", .arg = "A,B,...", .json = "stage_layers", .fix = FIX_STAGES,
                        .expect = "a comma-separated list of layer counts >= 1",
                        .help = "layers per pipeline stage", .dflt = "even", .searched = true},
    [K_FIRST_LAYERS] = {K_FIRST_LAYERS, "first-stage-layers", L(first_layers), INT(0, BIG),
                        .flag = "decoder-first-pipeline-num-layers", .json = "first_stage_layers", .json_optional = true,
                        .fix = FIX_STAGES, .help = "layers of the first stage, the middle ones even (Megatron's)",
                        .dflt = "derived"},
    [K_LAST_LAYERS] = {K_LAST_LAYERS, "last-stage-layers", L(last_layers), INT(0, BIG),
                       .flag = "decoder-last-pipeline-num-layers", .json = "last_stage_layers", .json_optional = true,
                       .fix = FIX_STAGES, .help = "layers of the last stage, the middle ones even (Megatron's)",
                       .dflt = "derived"},
    [K_SPLIT_EMBED] = {K_SPLIT_EMBED, "account-for-embedding", L(split_embed), .type = KNOB_BOOL,
                       .flag = "account-for-embedding-in-pipeline-split",
                       .neg_flag = "no-account-for-embedding-in-pipeline-split", .json = "account_for_embedding",
                       .json_optional = true, .help = "the embedding counts as a layer in the stage split",
                       .dflt = "off; taken under vp when the layers need it"},
    [K_SPLIT_LOSS] = {K_SPLIT_LOSS, "account-for-loss", L(split_loss), .type = KNOB_BOOL,
                      .flag = "account-for-loss-in-pipeline-split",
                      .neg_flag = "no-account-for-loss-in-pipeline-split", .json = "account_for_loss",
                      .json_optional = true, .help = "the loss counts as a layer in the stage split",
                      .dflt = "off; taken under vp when the layers need it"},
    /* Megatron's --pipeline-model-parallel-layout: sets vp and the layers of every stage and chunk */
    [K_PP_LAYOUT] = {K_PP_LAYOUT, "pipeline-layout", L(pp_layout), .type = KNOB_STR, .flag = "pipeline-layout",
                     .arg = "TEXT", .expect = "a layout such as \"Et|(tt|)*30mL\" (E t m L | ( ) *N)",
                     .chars = "ELtm|()*,0123456789",
                     .json = "pipeline_layout", .json_optional = true, .csv = "pp_layout",
                     .fix = FIX_PP | FIX_VP | FIX_STAGES,
                     .help = "Megatron's --pipeline-model-parallel-layout: pp*vp '|'-separated chunks of E "
                             "(embedding), t (layer), m (MTP), L (loss); (..)*N and x*N repeat",
                     .dflt = "none (the split flags)"},
    /* Megatron's --recompute-modules besides core_attn: forward pieces recomputed before the backward in
     * every layer not fully recomputed (model/timing.c rc_modules_s, model/memory.c) */
    [K_RC_MODULES] = {K_RC_MODULES, "recompute-modules", L(rc_modules), .type = KNOB_STR, .flag = "recompute-modules",
                      .arg = "LIST", .chars = "abcdefghijklmnopqrstuvwxyz_,+ ",
                      .expect = "module names separated by ',' or '+' (layernorm, mla_up_proj, moe_act, mlp, "
                                "shared_experts)",
                      .json = "recompute_modules", .json_optional = true, .csv = "recompute_modules",
                      .help = "Megatron's --recompute-modules beyond core attention (--recompute selective): "
                              "layernorm, mla_up_proj, moe_act, mlp, shared_experts, comma-separated",
                      .dflt = "none"},
    /* Megatron's --cuda-graph-impl and --cuda-graph-modules: the host launches a graph replaces
     * (model/timing.c layer_launches) and the dropless host sync full-iteration graphs remove */
    [K_CUDA_GRAPH] = {K_CUDA_GRAPH, "cuda-graph-impl", L(cuda_graph), ENUM(cgraph, CG_COUNT), .flag = "cuda-graph-impl",
                      .arg = "none|local|transformer_engine|full_iteration", .json = "cuda_graph_impl",
                      .json_optional = true, .csv = "cuda_graph_impl",
                      .help = "CUDA graphs: local or transformer_engine replay the --cuda-graph-modules of each "
                              "layer (all of it when none) with one launch; full_iteration the whole step, "
                              "no host launches and no host sync",
                      .dflt = "none, Megatron-LM's"},
    [K_CG_MODULES] = {K_CG_MODULES, "cuda-graph-modules", L(cg_modules), .type = KNOB_STR,
                      .flag = "cuda-graph-modules", .arg = "LIST", .chars = "abcdefghijklmnopqrstuvwxyz_,+ ",
                      .expect = "module names separated by ',' or '+' (attn, mlp, moe, moe_router, moe_preprocess)",
                      .json = "cuda_graph_modules", .json_optional = true, .csv = "cuda_graph_modules",
                      .help = "Megatron's --cuda-graph-modules (was --cuda-graph-scope) under --cuda-graph-impl "
                              "local or transformer_engine: attn, mlp, moe, moe_router, moe_preprocess",
                      .dflt = "empty: the whole layer"},
    /* Megatron's --fp8-recipe: how fp8 casts find their scale (model/timing.c fp8_scale_bytes) */
    [K_FP8_RECIPE] = {K_FP8_RECIPE, "fp8-recipe", L(fp8_recipe), ENUM(fp8r, FP8R_COUNT), .flag = "fp8-recipe",
                      .arg = "delayed|tensorwise|mxfp8|blockwise", .json = "fp8_recipe", .json_optional = true,
                      .csv = "fp8_recipe",
                      .help = "fp8 scaling (under --precision fp8): tensorwise (current scaling) reads each "
                              "cast tensor once more for its amax; every recipe but delayed writes the norm's "
                              "output before QKV and FC1 in bf16 and casts it apart; mxfp8 needs compute "
                              "capability 10.0 (Blackwell), blockwise 9.0",
                      .dflt = "delayed, Megatron-LM's"},
    [K_MOE_ROUTER_PAD] = {K_MOE_ROUTER_PAD, "moe-router-padding-for-quantization", L(moe_router_pad),
                          .type = KNOB_BOOL, .flag = "moe-router-padding-for-quantization",
                          .neg_flag = "no-moe-router-padding-for-quantization",
                          .json = "moe_router_padding_for_quantization", .json_optional = true,
                          .csv = "moe_router_padding_for_quantization",
                          .help = "fp8 MoE: the router pads each expert's tokens to the fp8 alignment; off, the "
                                  "experts copy their input and output to pad and unpad them (not with flex, "
                                  "whose HybridEP dispatch pads)",
                          .dflt = "off, Megatron-LM's"},
    /* Megatron-core's moe_dispatch_fwd_dtype / moe_combine_bwd_dtype (model/timing_moe.c time_moe_a2a_wire_s) */
    [K_MOE_DISPATCH_WIRE] = {K_MOE_DISPATCH_WIRE, "moe-dispatch-fwd-dtype", L(moe_dispatch_wire), ENUM(wire, MOE_WIRE_COUNT),
                             .flag = "moe-dispatch-fwd-dtype", .arg = "bf16|mxfp8", .json = "moe_dispatch_fwd_dtype",
                             .json_optional = true, .csv = "moe_dispatch_fwd_dtype",
                             .help = "MoE: the forward dispatch's payload on the wire; mxfp8 (1 byte an element and a "
                                     "scale a 32-element block) needs the flex dispatcher (written as ncclep) and "
                                     "--fp8-recipe mxfp8",
                             .dflt = "bf16, Megatron-LM's"},
    [K_MOE_COMBINE_WIRE] = {K_MOE_COMBINE_WIRE, "moe-combine-bwd-dtype", L(moe_combine_bwd_wire), ENUM(wire, MOE_WIRE_COUNT),
                            .flag = "moe-combine-bwd-dtype", .arg = "bf16|mxfp8", .json = "moe_combine_bwd_dtype",
                            .json_optional = true, .csv = "moe_combine_bwd_dtype",
                            .help = "MoE: the combine's gradient on the wire in the backward; mxfp8 as for "
                                    "--moe-dispatch-fwd-dtype",
                            .dflt = "bf16, Megatron-LM's"},
    /* the pipeline schedule: DeepSeek-V3's DualPipe besides Megatron's 1F1B (model/cost.c, model/memory.c);
     * no framework ultraplan exports to runs DualPipe, so export and the executors refuse it */
    [K_PP_SCHED] = {K_PP_SCHED, "pp-schedule", L(pp_sched), ENUM(ppsched, PP_SCHED_COUNT), .flag = "pp-schedule",
                    .arg = "1f1b|dualpipe", .json = "pp_schedule", .json_optional = true, .csv = "pp_schedule",
                    .help = "pipeline schedule: 1f1b (interleaved with --vp > 1), or DeepSeek-V3's dualpipe (two "
                            "copies of the model fed from both ends: rank r holds stages r and pp-1-r, forward and "
                            "backward chunks of two micro-batches overlapped, hiding their EP and PP transfers; "
                            "bubble (pp/2-1)(F&B+B-3W); even pp, vp 1, an even number of micro-batches >= 2 pp)",
                    .dflt = "1f1b"},
    /* torch.compile: under a stack whose model code is eager PyTorch (model/timing.c time_eager_bytes) */
    [K_TORCH_COMPILE] = {K_TORCH_COMPILE, "torch-compile", L(torch_compile), .type = KNOB_BOOL,
                         .flag = "torch-compile", .neg_flag = "no-torch-compile", .json = "torch_compile",
                         .json_optional = true, .csv = "torch_compile",
                         .help = "torch.compile over the model: off, a stack whose model code is eager PyTorch "
                                 "(torchtitan) runs its norms, RoPE and SwiGLU unfused; no effect under "
                                 "Megatron's stacks (fused kernels)",
                         .dflt = "on (the torchtitan export compiles)"},
    [K_FP8_PARAM_GATHER] = {K_FP8_PARAM_GATHER, "fp8-param-gather", L(fp8_param_gather), .type = KNOB_BOOL,
                            .flag = "fp8-param-gather", .neg_flag = "no-fp8-param-gather",
                            .json = "fp8_param_gather", .json_optional = true, .csv = "fp8_param_gather",
                            .help = "fp8: the layers' linear weights kept in fp8, not 16 bits, and all-gathered so by "
                                    "the distributed optimizer (Megatron --fp8-param-gather; NeMo's fp8 recipes set "
                                    "it); needs --dist-opt or --zero 3",
                            .dflt = "off, Megatron-LM's"},
    /* Transformer Engine's fp8 attention (model/timing.c time_fp8_attn): Megatron-core's config field, set by
     * Megatron-Bridge's mixed_precision.fp8_dot_product_attention; Megatron-LM's argument parser has none */
    [K_FP8_DPA] = {K_FP8_DPA, "fp8-dot-product-attention", L(fp8_dpa), .type = KNOB_BOOL,
                   .flag = "fp8-dot-product-attention", .neg_flag = "no-fp8-dot-product-attention",
                   .json = "fp8_dot_product_attention", .json_optional = true, .csv = "fp8_dot_product_attention",
                   .help = "fp8: the attention core in fp8 too (Transformer Engine's fp8 DotProductAttention with "
                           "cuDNN, per the --fp8-recipe: MXFP8 or per-tensor scales), at cuDNN's measured fp8 "
                           "rates; its backward of a sliding-window layer computes the whole causal triangle. "
                           "Megatron-Bridge's mixed_precision.fp8_dot_product_attention; Megatron-LM's CLI has "
                           "no flag for it, so the Megatron export refuses it; needs --precision fp8 and flash",
                   .dflt = "off"},
    /* Megatron's precision-aware optimizer (--use-precision-aware-optimizer, written by the export when
     * either moment is below fp32): Adam's moments in a lower dtype (model/memory.c memory_optim_bytes) */
    [K_PRECISION_AWARE_OPT] = {K_PRECISION_AWARE_OPT, "use-precision-aware-optimizer", L(precision_aware_opt),
                               .type = KNOB_BOOL, .flag = "use-precision-aware-optimizer",
                               .neg_flag = "no-use-precision-aware-optimizer", .json = "precision_aware_optimizer",
                               .json_optional = true, .csv = "precision_aware_optimizer",
                               .help = "Megatron's precision-aware optimizer (Transformer Engine's FusedAdam): the "
                                       "fp32 master kept as 16-bit remainders beside bf16 parameters (bf16, or fp8 "
                                       "with delayed scaling: 10 bytes of optimizer state a parameter, not 12) and "
                                       "the moments in --exp-avg-dtype / --exp-avg-sq-dtype; needs --dist-opt",
                               .dflt = "off, Megatron-LM's"},
    [K_EXP_AVG_DTYPE] = {K_EXP_AVG_DTYPE, "exp-avg-dtype", L(exp_avg_dtype), ENUM(prec, PREC_COUNT),
                         .flag = "exp-avg-dtype", .arg = "fp32|bf16|fp16|fp8", .json = "exp_avg_dtype",
                         .json_optional = true, .csv = "exp_avg_dtype",
                         .help = "Adam's first moment kept in this dtype (Megatron --exp-avg-dtype; needs "
                                 "--use-precision-aware-optimizer; DeepSeek-V3 kept bf16): with both moments bf16, "
                                 "8 bytes of optimizer state a parameter, not 12, or 6 where Transformer "
                                 "Engine keeps the master as 16-bit remainders (bf16, or fp8 delayed scaling)",
                         .dflt = "fp32, Megatron-LM's"},
    [K_EXP_AVG_SQ_DTYPE] = {K_EXP_AVG_SQ_DTYPE, "exp-avg-sq-dtype", L(exp_avg_sq_dtype), ENUM(prec, PREC_COUNT),
                            .flag = "exp-avg-sq-dtype", .arg = "fp32|bf16|fp16|fp8", .json = "exp_avg_sq_dtype",
                            .json_optional = true, .csv = "exp_avg_sq_dtype",
                            .help = "Adam's second moment kept in this dtype (Megatron --exp-avg-sq-dtype; needs "
                                    "--use-precision-aware-optimizer)",
                            .dflt = "fp32, Megatron-LM's"},
    [K_FULL_RC] = {K_FULL_RC, "full_recompute", L(full_rc), .type = KNOB_LIST, .min = 0, .max = 1000000,
                   .json = "full_recompute"},
    [K_SEL_RC] = {K_SEL_RC, "selective_recompute", L(sel_rc), .type = KNOB_LIST, .min = 0, .max = 1000000,
                  .json = "selective_recompute"},
    /* what the planner may search: plan files written before it load as
     * megatron. The last TUI row: at the TUI's least size (64x22) the Inputs
     * pane scrolls to it */
    [K_TARGET] = {K_TARGET, "target", L(target), ENUM(target, TARGET_COUNT), .flag = "target",
                  .arg = "megatron|ultraplan|ultraplan-cuda|torchtitan", .json = "target", .json_optional = true,
                  .help = "megatron: only layouts Megatron-LM runs as exported; ultraplan: those our CPU executor "
                  "runs; ultraplan-cuda: those `run --backend cuda` runs; torchtitan: those `export --format "
                  "torchtitan` writes (a Llama 3 flavor, even stages, one recomputation for every layer, FSDP "
                  "sharding; --stack torchtitan unless --stack is given)",
                  .dflt = "megatron", .tui_label = "target", .tui_row = 185, .tui_step = TUI_CYCLE,
                  .tui_problem = true, .tui_help = "megatron, ultraplan (our CPU executor), ultraplan-cuda (our CUDA one), torchtitan"},

    [K_STACK] = {K_STACK, "stack", L(stack), .type = KNOB_ENUM, .count = STACK_BUILTIN_COUNT, .value_name = stack_kname,
                 .value_parse = stack_kparse, .flag = "stack", .arg = "NAME", .json = "stack", .json_optional = true,
                 .csv = "stack", .help = "software stack the run uses: its kernel efficiency, attention kernel, overlap and "
                 "ZeRO-3 gathers (`ultraplan models` lists them)", .dflt = "megatron-lm", .tui_label = "stack",
                 .tui_row = 187, .tui_step = TUI_CYCLE, .tui_problem = true,
                 .tui_help = "software stack over the GPU profile (`ultraplan models` lists them)"},

    /* ---- scenario ---- */
    [K_RECOMPUTE] = {K_RECOMPUTE, "recompute", S(recompute), ENUM(rc, 3), .flag = "recompute",
                     .arg = "none|selective|full", .fix = FIX_RC, .csv = "recompute",
                     .help = "activation recomputation of every layer", .dflt = "none", .searched = true,
                     .tui_help = "none, selective, full", .tui_label = "recompute", .tui_row = 160, .tui_step = TUI_CYCLE},
};

const Knob *knob_get(KnobId id) { return id >= 0 && id < KNOB_COUNT ? &table[id] : NULL; }

const Knob *knob_by_flag(const char *flag, bool *neg)
{
    for (int i = 0; i < KNOB_COUNT; i++) {
        const Knob *k = &table[i];
        if (k->flag && !strcmp(k->flag, flag)) {
            *neg = false;
            return k;
        }
        if (k->neg_flag && !strcmp(k->neg_flag, flag)) {
            *neg = true;
            return k;
        }
    }
    return NULL;
}

const Knob *knob_by_json(KnobGroup g, const char *key)
{
    for (int i = 0; i < KNOB_COUNT; i++)
        if (table[i].group == g && table[i].json && !strcmp(table[i].json, key))
            return &table[i];
    return NULL;
}

const Knob *knob_by_csv(const char *column)
{
    for (int i = 0; i < KNOB_COUNT; i++)
        if (table[i].csv && !strcmp(table[i].csv, column))
            return &table[i];
    return NULL;
}

void *knob_field(const Knob *k, void *obj) { return (char *)obj + k->off; }
const void *knob_cfield(const Knob *k, const void *obj) { return (const char *)obj + k->off; }

int knob_get_int(const Knob *k, const void *obj)
{
    const void *p = knob_cfield(k, obj);
    switch (k->type) {
    case KNOB_DOUBLE: return (int)*(const double *)p;
    case KNOB_BOOL: return *(const bool *)p;
    case KNOB_INT:
    case KNOB_ENUM: return *(const int *)p;
    case KNOB_DERIVED: return k->json_value ? k->json_value(obj) : 0;
    case KNOB_LIST: return ((const int *)p)[0];
    case KNOB_STR: return *(const char *)p != 0;
    }
    return 0;
}

void knob_set_int(const Knob *k, void *obj, int v)
{
    void *p = knob_field(k, obj);
    switch (k->type) {
    case KNOB_DOUBLE: *(double *)p = v; break;
    case KNOB_BOOL: *(bool *)p = v != 0; break;
    case KNOB_INT:
    case KNOB_ENUM: *(int *)p = v; break;
    case KNOB_DERIVED:
    case KNOB_LIST:
    case KNOB_STR: break;
    }
}

double knob_get_double(const Knob *k, const void *obj)
{
    return k->type == KNOB_DOUBLE ? *(const double *)knob_cfield(k, obj) : knob_get_int(k, obj);
}

void knob_set_double(const Knob *k, void *obj, double v)
{
    if (k->type == KNOB_DOUBLE)
        *(double *)knob_field(k, obj) = v;
    else
        knob_set_int(k, obj, (int)v);
}

const char *knob_get_str(const Knob *k, const void *obj)
{
    return k->type == KNOB_STR ? (const char *)knob_cfield(k, obj) : "";
}

int knob_set_str(const Knob *k, void *obj, const char *text, const char *who, char *err, int errlen)
{
    char flag[160];
    if (!who)
        snprintf(flag, sizeof flag, "--%s: ", k->flag ? k->flag : k->name);
    else
        snprintf(flag, sizeof flag, "%s%s", who, *who ? ": " : "");
    if (k->type != KNOB_STR) {
        snprintf(err, errlen, "%snot a text knob", flag);
        return -1;
    }
    size_t n = text ? strlen(text) : 0;
    if (n >= LAYOUT_PPL_LEN) {
        snprintf(err, errlen, "%sexpected %s of at most %d characters, got %zu", flag, k->expect, LAYOUT_PPL_LEN - 1, n);
        return -1;
    }
    for (size_t i = 0; i < n; i++)
        if (k->chars ? !strchr(k->chars, text[i]) : !isprint((unsigned char)text[i])) {
            snprintf(err, errlen, "%sbad character '%c' at position %zu of \"%s\" (expected %s)", flag, text[i],
                     i + 1, text, k->expect);
            return -1;
        }
    memcpy(knob_field(k, obj), text ? text : "", n + 1);
    return 0;
}

void knob_copy(const Knob *k, void *dst, const void *src)
{
    if (k->type == KNOB_STR) {
        memcpy(knob_field(k, dst), knob_cfield(k, src), LAYOUT_PPL_LEN);
        return;
    }
    if (k->type == KNOB_DOUBLE)
        knob_set_double(k, dst, knob_get_double(k, src));
    else
        knob_set_int(k, dst, knob_get_int(k, src));
}

void knob_format_double(double v, char *buf, int len)
{
    /* the fewest digits that read back as the same double */
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(buf, len, "%.*g", prec, v);
        if (strtod(buf, NULL) == v)
            return;
    }
}

int knob_parse_double(const Knob *k, const char *text, double *v, const char *who, char *err, int errlen)
{
    char flag[80];
    if (!who)
        snprintf(flag, sizeof flag, "--%s: ", k->flag ? k->flag : k->name);
    else
        snprintf(flag, sizeof flag, "%s%s", who, *who ? ": " : "");
    char *end;
    errno = 0;
    double x = text ? strtod(text, &end) : 0;
    if (!text || end == text || *end || errno || !isfinite(x) || x < k->dmin || x > k->dmax) {
        char lo[32], hi[32];
        knob_format_double(k->dmin, lo, sizeof lo);
        knob_format_double(k->dmax, hi, sizeof hi);
        if (k->expect)
            snprintf(err, errlen, "%sexpected %s, got \"%s\"", flag, k->expect, text ? text : "");
        else
            snprintf(err, errlen, "%sexpected a number from %s to %s, got \"%s\"", flag, lo, hi, text ? text : "");
        return -1;
    }
    *v = x;
    return 0;
}

void knob_enum_list(const Knob *k, bool quoted, char *buf, int len)
{
    int n = 0;
    buf[0] = 0;
    for (int v = 0; v < k->count && n < len; v++) {
        const char *sep = v == 0 ? "" : v == k->count - 1 ? " or " : ", ";
        n += snprintf(buf + n, len - n, quoted ? "%s\"%s\"" : "%s%s", sep, k->value_name(v));
    }
}

void knob_format(const Knob *k, int v, char *buf, int len)
{
    if (k->type == KNOB_ENUM)
        snprintf(buf, len, "%s", v >= 0 && v < k->count ? k->value_name(v) : "?");
    else if (k->type == KNOB_BOOL)
        snprintf(buf, len, "%s", v ? "on" : "off");
    else
        snprintf(buf, len, "%d", v);
}

int knob_parse(const Knob *k, const char *text, int *v, const char *who, char *err, int errlen)
{
    char flag[80];
    if (!who)
        snprintf(flag, sizeof flag, "--%s: ", k->flag ? k->flag : k->name);
    else
        snprintf(flag, sizeof flag, "%s%s", who, *who ? ": " : "");
    who = flag;
    switch (k->type) {
    case KNOB_INT:
        if (util_parse_int(text, v) != 0 || *v < k->min || *v > k->max) {
            if (k->max < BIG)
                snprintf(err, errlen, "%sexpected a whole number from %d to %d, got \"%s\"", who, k->min, k->max,
                         text);
            else
                snprintf(err, errlen, "%sexpected a whole number >= %d, got \"%s\"", who, k->min, text);
            return -1;
        }
        return 0;
    case KNOB_ENUM:
        if (k->value_parse(text, v) != 0 || *v < 0 || *v >= k->count) {
            char list[256];
            knob_enum_list(k, false, list, sizeof list);
            const char *names[32];
            int n = k->count < 32 ? k->count : 32;
            for (int i = 0; i < n; i++)
                names[i] = k->value_name(i);
            const char *near = util_closest(text, names, n);
            char hint[64] = "";
            if (near)
                snprintf(hint, sizeof hint, " (did you mean \"%s\"?)", near);
            snprintf(err, errlen, "%sexpected %s, got \"%s\"%s", who, k->expect ? k->expect : list, text, hint);
            return -1;
        }
        return 0;
    case KNOB_BOOL:
        if (!strcasecmp(text, "on") || !strcasecmp(text, "true") || !strcasecmp(text, "yes") || !strcmp(text, "1"))
            *v = 1;
        else if (!strcasecmp(text, "off") || !strcasecmp(text, "false") || !strcasecmp(text, "no") ||
                 !strcmp(text, "0"))
            *v = 0;
        else {
            snprintf(err, errlen, "%sexpected on or off, got \"%s\"", who, text);
            return -1;
        }
        return 0;
    case KNOB_DOUBLE:
    case KNOB_LIST:
    case KNOB_STR:
    case KNOB_DERIVED: break;
    }
    snprintf(err, errlen, "%s%s", who, k->type == KNOB_DOUBLE ? "a number (knob_parse_double reads it)"
                                     : k->type == KNOB_STR  ? "text (knob_set_str sets it)"
                                                            : "not a single value");
    return -1;
}
