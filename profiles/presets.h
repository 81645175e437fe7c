/* presets.h — published model shapes (GPT-3, Llama 2, Llama 3.1, MT-NLG, the
 * mixture-of-experts models Mixtral, Qwen3 MoE, DeepSeek-V3, gpt-oss, Llama 4
 * Maverick and Kimi K2, dense Qwen2.5/Qwen3/Mistral, the
 * Megatron weak-scaling family) and the rule that turns "--params 20B" into a
 * shape. Every preset carries the source it was read from.
 *
 * Names are lowercase with dashes: gpt3-175b, llama2-7b, llama3.1-405b,
 * mtnlg-530b, megatron-1t. Lookups are case-insensitive. Functions that can
 * fail return 0 or -1 with err filled (one line).
 */
#ifndef ULTRAPLAN_PROFILES_PRESETS_H
#define ULTRAPLAN_PROFILES_PRESETS_H

#include "spec.h"

int presets_count(void);
const ModelSpec *presets_get(int i);      // NULL when i is out of range
const char *presets_source(int i);        // paper and table the shape comes from

int presets_find(const char *name, ModelSpec *out, char *err, int errlen);

/* A shape for `params` parameters (1e6 .. 1e15). In order:
 *  1. a preset whose nominal size (the one in its name) is within 1 %, the
 *     preferred family first: Llama 2 (7/13/70B), Llama 3.1 (8/405B), GPT-3
 *     (incl. 175B), MT-NLG, Megatron;
 *  2. a preset whose exact count, spec_params(m, 1, PARAMS_EXACT), is within
 *     3 %, the closest one;
 *  3. a derived GPT-3-style shape: log h interpolated against log N over the
 *     GPT-3 and Megatron families, rounded to a multiple of 128 (of 1024 from
 *     4096 up, so the heads split 8 ways), head dim 128, f = 4h, V 50257,
 *     s 2048, and L chosen so the exact count is closest to params.
 * `rule` says which rule was used and how far the shape is from the target. */
int presets_from_params(double params, ModelSpec *out, char *rule, int rulelen,
                        char *err, int errlen);

#endif
