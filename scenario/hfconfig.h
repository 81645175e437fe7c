/* hfconfig.h — a Hugging Face transformers config.json as a ModelSpec: the
 * third source of a model beside the presets and --params (`--hf-config`).
 *
 * Reads the dense decoder families whose shape a ModelSpec holds: Llama
 * (LlamaForCausalLM), Mistral (MistralForCausalLM), Qwen2 and Qwen3
 * (Qwen2ForCausalLM, Qwen3ForCausalLM) and Gemma (GemmaForCausalLM), and the
 * mixture-of-experts families Mixtral (num_local_experts), Qwen3-MoE
 * (num_experts, moe_intermediate_size, decoder_sparse_step, a leading
 * mlp_only_layers run) and DeepSeek-V3 (n_routed_experts, n_shared_experts,
 * first_k_dense_replace, moe_layer_freq, MLA ranks, num_nextn_predict_layers),
 * GPT-OSS (GptOssForCausalLM: num_local_experts, num_experts_per_tok /
 * experts_per_token, biases on attention, experts and router) and Llama 4
 * (Llama4ForConditionalGeneration's text_config, or Llama4ForCausalLM:
 * num_local_experts, interleave_moe_layer_step or the same moe_layers,
 * experts and one shared expert of intermediate_size, dense layers of
 * intermediate_size_mlp). The family comes from "architectures" (and
 * "model_type", which must agree); any other architecture,
 * expert keys in a dense family's config and a missing or mistyped field are
 * refused with an error naming the file and the field. What the spec cannot hold exactly is
 * said in the note (Gemma's GeGLU is costed as swiglu: the same three
 * matrices and FLOPs, a different elementwise activation; Qwen2's q/k/v-only
 * biases are left out, with their count; Llama 4's chunked and NoPE layers
 * are costed as full causal attention). Sliding windows are read into the
 * spec's window (sliding_window − 1 keys before the query) and, from
 * layer_types, its window_skip_freq (a pattern Megatron's int form cannot
 * say is costed as full attention, noted); GPT-OSS's attention sinks and
 * clamped activation (swiglu_limit) into sinks and act_clamp. Nothing here
 * prints or exits.
 */
#ifndef ULTRAPLAN_SCENARIO_HFCONFIG_H
#define ULTRAPLAN_SCENARIO_HFCONFIG_H

#include <stddef.h>

#include "spec.h"

/* config.json files are a few KiB; anything larger is not one */
#define HFCONFIG_MAX_BYTES (1u << 20)
/* Room for the longest note (about 330 characters once) with space to
 * spare; a note that would not fit ends in "..." rather than being cut off
 * unmarked. Scenario.model_rule has this size. */
#define HFCONFIG_NOTE_MAX 1024

/* Read the config at path into *out (validated with spec_validate; seq is
 * max_position_embeddings). The name is the config's "_name_or_path", else
 * the file's base name without ".json" (its folder's name for a file
 * called config.json). `note` (nullable) gets one line: the file, the
 * family and every approximation made; give it HFCONFIG_NOTE_MAX bytes
 * (a shorter buffer gets the note cut, ending in "..."). 0 ok, -1 with err
 * "PATH: field \"F\": ...". */
int hfconfig_load(const char *path, ModelSpec *out, char *note, int notelen, char *err, int errlen);

/* The same from text already in memory; `path` names it in errors and the
 * note, and gives the fallback name. */
int hfconfig_parse(const char *text, const char *path, ModelSpec *out, char *note, int notelen, char *err,
                   int errlen);

#endif
