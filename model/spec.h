/* spec.h — the shape of a dense decoder-only transformer, its exact parameter
 * count and its FLOPs per token under each named convention.
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

/* Fill defaults that derive from other fields (d_head, g, f, vocab_div).
 * Returns 0, or -1 with err filled when the shape is inconsistent. */
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

/* Per-layer parameter counts (full, not sharded). */
int64_t spec_layer_matrix_params(const ModelSpec *m);    // weight matrices only (TP-sharded)
int64_t spec_layer_bias_params(const ModelSpec *m);      // all biases of one layer (0 without bias)
int64_t spec_layer_norm_params(const ModelSpec *m);      // the two norms of one layer
int64_t spec_norm_params(const ModelSpec *m);            // one norm (h or 2h)
int64_t spec_layer_params(const ModelSpec *m);           // all of one layer

/* Whole-model parameters; tp only affects the padded vocabulary. */
int64_t spec_params(const ModelSpec *m, int tp, ParamConvention conv);

/* Training FLOPs per token (forward + backward), no recomputation. */
double spec_flops_per_token(const ModelSpec *m, int tp, FlopConvention conv);

/* FLOPs per token of one layer's forward pass, split into its dense GEMMs
 * and its attention core (QK^T and AV); `causal` halves the core. */
double spec_layer_gemm_flops_fwd(const ModelSpec *m);
double spec_layer_attn_flops_fwd(const ModelSpec *m, bool causal);
/* Forward FLOPs per token of the LM head (2 h V). */
double spec_logits_flops_fwd(const ModelSpec *m, int tp);

/* Extra FLOPs per token that recomputation adds (hardware FLOPs - model FLOPs). */
double spec_recompute_flops_per_token(const ModelSpec *m, Recompute r, bool causal);

const char *spec_mlp_name(MlpKind k);
const char *spec_norm_name(NormKind k);
const char *spec_pos_name(PosKind k);
const char *spec_flops_name(FlopConvention c);
const char *spec_recompute_name(Recompute r);
int spec_parse_mlp(const char *s, MlpKind *out);
int spec_parse_norm(const char *s, NormKind *out);
int spec_parse_pos(const char *s, PosKind *out);
int spec_parse_flops(const char *s, FlopConvention *out);
int spec_parse_recompute(const char *s, Recompute *out);

#endif
