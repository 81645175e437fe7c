/* spec.h — the shape of a decoder-only transformer (dense, or mixture of
 * experts with optional multi-head latent attention and multi-token
 * prediction), its exact parameter counts (total and active) and its FLOPs
 * per token under each named convention.
 *
 * A dense model has every MoE/MLA/MTP field 0 (ATTN_MHA): nothing dense
 * changes with them. spec.c counts and validates MoE shapes; how memory and
 * time treat them is memory.c's and timing.c's business.
 *
 * Pure arithmetic on a plain struct: no files, no printing. Presets and the
 * --params rule live in profiles/presets.c; formulas and their sources are in
 * docs/COSTMODEL.md §1–2.
 */
#ifndef ULTRAPLAN_MODEL_SPEC_H
#define ULTRAPLAN_MODEL_SPEC_H

#include <stdbool.h>
#include <stdint.h>

typedef enum { MLP_GELU, MLP_SWIGLU, MLP_COUNT } MlpKind;
typedef enum { NORM_LAYERNORM, NORM_RMSNORM, NORM_COUNT } NormKind;
typedef enum { POS_LEARNED, POS_ROPE, POS_COUNT } PosKind;
/* MHA covers GQA and MQA through g; MLA is DeepSeek-V2/V3's multi-head latent attention. */
typedef enum { ATTN_MHA, ATTN_MLA, ATTN_COUNT } AttnKind;

typedef struct {
    char name[48];      // preset name or "custom"
    int L;              // transformer layers
    int h;              // hidden size (C)
    int a;              // query heads (NH)
    int g;              // KV heads (g = a for MHA, 1 for MQA)
    int d_head;         // head dimension; 0 = h / a
    int f;              // FFN hidden size
    int vocab;          // vocabulary as the tokenizer has it (unpadded)
    int vocab_div;      // pad V to a multiple of vocab_div * tp; 0 = 128 (Megatron), 1 = no padding
    int s;              // sequence length, tokens
    MlpKind mlp;
    NormKind norm;
    PosKind pos;
    bool bias;          // linear biases (GPT-2/3 style)
    bool tied;          // output head shares the input embedding
    bool dropout;       // dropout in attention and MLP (GPT-3 style); masks take activation memory
    int rope_theta;     // RoPE base frequency; 0 = 10000 (the usual default). No cost depends on it:
                        // export writes it (Megatron's --rotary-base, an integer) so the run is the planned model
    bool rope_scaling;  // Llama 3.x RoPE frequency scaling (Megatron --use-rope-scaling); export only
    /* mixture of experts: all 0 for a dense model */
    int experts;        // routed experts per MoE layer (0 = dense model)
    int topk;           // routed experts per token
    int moe_ffn;        // hidden size of ONE routed expert (0 = f)
    int shared_ffn;     // total hidden size of the shared expert(s), 0 = none
    int moe_freq;       // Megatron's --moe-layer-freq (int form; 0 = 1): see spec_layer_is_moe
    int moe_first_dense;// leading dense layers (the list form [0]*K+[1]*N)
    double capacity_factor; // expert capacity factor; 0 = dropless
    int mtp_layers;     // multi-token-prediction modules (DeepSeek-V3: 1)
    int router_groups;  // Megatron --moe-router-num-groups: experts in this many contiguous groups (0 = none)
    int router_group_topk; // --moe-router-group-topk: a token's experts come from at most this many groups
    /* attention kind and multi-head latent attention dimensions (MLA only) */
    AttnKind attn;
    int q_lora_rank;    // 0 = no Q compression (DeepSeek-V2-Lite)
    int kv_lora_rank;
    int qk_nope_dim;    // per-head q/k dimension without RoPE
    int qk_rope_dim;    // per-head q/k RoPE dimension (the key part shared by all heads)
    int v_head_dim;
    /* GPT-OSS's attention and activation: all 0 for every other model */
    int window;         // sliding-window attention (Megatron --window-size W,0): a query sees itself and the
                        // W keys before it; 0 = full causal attention in every layer
    int window_skip_freq; // Megatron --window-attn-skip-freq N: layer i (1-based) is full attention when
                        // i % N == 0, windowed otherwise; 0 = every layer windowed (spec_layer_is_windowed)
    bool sinks;         // attention sinks: a learned softmax offset per head (Megatron --softmax-type learnable)
    double act_clamp;   // GPT-OSS's gated activation: quick-GELU gate, halves clamped to +-act_clamp, linear
                        // half + 1 (Megatron --quick-geglu --activation-func-clamp-value C --glu-linear-offset 1);
                        // 0 = the plain gated MLP. Needs mlp swiglu (the same three matrices and GEMM FLOPs)
} ModelSpec;

/* Parameter-count conventions (COSTMODEL.md §1). */
typedef enum {
    PARAMS_EXACT,     // what the model really holds: biases if any, learned positions, final norm
    PARAMS_MEGATRON,  // Megatron's estimator: no biases, no positional embeddings
} ParamConvention;

/* FLOP conventions (COSTMODEL.md §2). All count a multiply-add as 2 FLOPs. */
typedef enum {
    FLOPS_FULL_ATTN,  // Korthikanti Eq. 7 / Megatron before 2025: full s^2 attention (default)
    FLOPS_CAUSAL,     // Megatron since 2025-03: causal mask halves the s^2 term
    FLOPS_6N,         // 6 * N (N = Megatron-convention parameters)
    FLOPS_PALM,       // PaLM Appendix B: 6N + 12 L H Q T
    FLOPS_CONVENTION_COUNT
} FlopConvention;

typedef enum { RECOMPUTE_NONE, RECOMPUTE_SELECTIVE, RECOMPUTE_FULL, RECOMPUTE_COUNT } Recompute;

/* Fill defaults that derive from other fields (d_head, g, f, vocab_div;
 * for MoE moe_ffn = f and moe_freq = 1; for MLA g = a and d_head =
 * qk_nope_dim + qk_rope_dim). With experts 0 the MoE fields are cleared
 * (a dense model). Returns 0, or -1 with err filled when the shape is
 * inconsistent (topk > experts, MLA dimensions missing, ...). */
int spec_validate(ModelSpec *m, char *err, int errlen);

/* Upper bound on the parameters of a shape in double arithmetic (no
 * overflow whatever the fields): spec_validate and layout_check refuse
 * shapes above SPEC_MAX_PARAMS, which keeps every int64 count below exact. */
#define SPEC_MAX_PARAMS 1e17
double spec_params_estimate(const ModelSpec *m, int tp);

int spec_head_dim(const ModelSpec *m);
int64_t spec_padded_vocab(const ModelSpec *m, int tp);   // V after Megatron padding for this tp
int spec_q_width(const ModelSpec *m);                    // a * d_head
int spec_kv_width(const ModelSpec *m);                   // g * d_head

/* Mixture of experts. Layer i (0-based, 0 <= i < L) is an MoE layer when
 * experts > 0, i >= moe_first_dense and (i - moe_first_dense) % moe_freq
 * == 0: with moe_first_dense 0 this is Megatron-LM's int --moe-layer-freq
 * (megatron/training/training.py, `i % moe_layer_freq == 0`, layer 0 MoE).
 * An MTP module's layer (i >= L) is MoE when the last layer is, as
 * Megatron's FLOP count has it. */
bool spec_is_moe(const ModelSpec *m);
bool spec_layer_is_moe(const ModelSpec *m, int layer);
int spec_moe_layers(const ModelSpec *m);                 // MoE layers among the L (MTP not counted)

/* Sliding-window attention. Layer i (0-based) is windowed when window > 0
 * and, with window_skip_freq N > 0, (i + 1) % N != 0: Megatron's
 * TransformerConfig.window_attn_skip_freq (layer_number % N == 0 runs full
 * attention), which for N = 2 is GPT-OSS's alternation (layer_types:
 * sliding, full, sliding, ...). An MTP layer (i >= L) is never windowed. */
bool spec_layer_is_windowed(const ModelSpec *m, int layer);
int spec_windowed_layers(const ModelSpec *m);            // windowed layers among the L
/* Keys a query attends to on average in one windowed layer of s tokens
 * under a causal band of W+1 keys: (1/s) sum_i min(i + 1, W + 1). */
double spec_window_keys(const ModelSpec *m);

/* Parse Megatron's --moe-layer-freq: an int N (every N-th layer from 0), or
 * a Python list expression of 0/1 such as "[0]*3+[1]*58", "[1,0]*12" or
 * "[0,1,1,1]". A list must be K zeros then a period "1 then F-1 zeros"
 * (what first_dense/freq express); *len is its length (0 for the int form)
 * and must equal the layers. 0, or -1 with err. */
int spec_parse_moe_freq(const char *s, int *freq, int *first_dense, int *len, char *err, int errlen);
/* The form back: "N" when first_dense is 0, else "[0]*K+[1]*N" (freq 1) or
 * the explicit list. */
void spec_format_moe_freq(const ModelSpec *m, char *buf, int len);

/* Per-layer parameter counts (full, not sharded). */
int64_t spec_attn_params(const ModelSpec *m);           // one layer's attention: MHA/GQA (+ biases) or MLA (+ its 2 latent norms)
int64_t spec_dense_mlp_params(const ModelSpec *m);      // a dense layer's MLP (+ biases)
int64_t spec_expert_params(const ModelSpec *m);         // ONE routed expert (+ biases), hidden moe_ffn
int64_t spec_sink_params(const ModelSpec *m);           // one layer's attention sinks: a per head, 0 without
int64_t spec_router_params(const ModelSpec *m);         // h * experts (+ experts with bias, as GPT-OSS)
int64_t spec_shared_expert_params(const ModelSpec *m);  // the shared expert(s) as one MLP of shared_ffn; 0 = none
int64_t spec_moe_mlp_params(const ModelSpec *m);        // an MoE layer's MLP: experts * expert + router + shared
int64_t spec_mtp_params(const ModelSpec *m);            // all MTP modules (they share embedding and head)
int64_t spec_mtp_params_active(const ModelSpec *m);     // the part of them a token passes through (top-k experts)
/* The per-layer functions below describe a DENSE layer (attention + dense
 * MLP): for a dense model, as they always did. */
int64_t spec_layer_matrix_params(const ModelSpec *m);    // weight matrices only (TP-sharded)
int64_t spec_layer_bias_params(const ModelSpec *m);      // all biases of one layer (0 without bias)
int64_t spec_layer_norm_params(const ModelSpec *m);      // the two norms of one layer (+ MLA's latent norms)
int64_t spec_norm_params(const ModelSpec *m);            // one norm (h or 2h)
int64_t spec_layer_params(const ModelSpec *m);           // all of one layer
int64_t spec_moe_layer_params(const ModelSpec *m);       // all of one MoE layer

/* Whole-model parameters; tp only affects the padded vocabulary. Total:
 * every expert, MTP modules included. Active: what one token passes
 * through (top-k routed + shared experts and everything else, MTP
 * included); equal to the total for a dense model. */
int64_t spec_params(const ModelSpec *m, int tp, ParamConvention conv);
int64_t spec_params_active(const ModelSpec *m, int tp, ParamConvention conv);

/* Training FLOPs per token (forward + backward), no recomputation. For MoE
 * FLOPS_FULL_ATTN / FLOPS_CAUSAL equal Megatron-LM's
 * num_floating_point_operations (top-k and shared experts, MLA, MTP; no
 * router, as Megatron logs it), FLOPS_6N is 6 * N_active. */
double spec_flops_per_token(const ModelSpec *m, int tp, FlopConvention conv);

/* FLOPs per token of one layer's forward pass, split into its dense GEMMs
 * and its attention core (QK^T and AV); `causal` halves the core.
 * spec_layer_gemm_flops_fwd is a dense layer's (attention + dense MLP).
 * With sliding windows the core is the mean over the L layers: a windowed
 * layer counts W+1 keys a query (Megatron's convention, not halved) with
 * `causal` false, and the exact band spec_window_keys with `causal` true. */
double spec_layer_gemm_flops_fwd(const ModelSpec *m);
double spec_attn_gemm_flops_fwd(const ModelSpec *m);            // QKV or MLA projections + output projection
double spec_mlp_flops_fwd(const ModelSpec *m, bool moe_layer);  // dense MLP, or topk*expert + shared + router
double spec_layer_attn_flops_fwd(const ModelSpec *m, bool causal);
/* Forward FLOPs per token of the LM head (2 h V). */
double spec_logits_flops_fwd(const ModelSpec *m, int tp);

/* Extra FLOPs per token that recomputation adds (hardware FLOPs - model FLOPs). */
double spec_recompute_flops_per_token(const ModelSpec *m, Recompute r, bool causal);

const char *spec_mlp_name(MlpKind k);
const char *spec_norm_name(NormKind k);
const char *spec_pos_name(PosKind k);
const char *spec_attn_name(AttnKind k);
const char *spec_flops_name(FlopConvention c);
const char *spec_recompute_name(Recompute r);
int spec_parse_mlp(const char *s, MlpKind *out);
int spec_parse_norm(const char *s, NormKind *out);
int spec_parse_pos(const char *s, PosKind *out);
int spec_parse_attn(const char *s, AttnKind *out);
int spec_parse_flops(const char *s, FlopConvention *out);
int spec_parse_recompute(const char *s, Recompute *out);

#endif
