/* stacks.h — software stacks as JSON: the builtin ones embedded from
 * profiles/stacks/NAME.json at build time (model/stack.h says what a stack
 * does to the cost model).
 *
 * Format "ultraplan.stack/1": one object; every number may carry its source
 * in a sibling "<field>_src" string (the builtin files always do, saying
 * where it was published or which runs it was fitted on and which were held
 * out). Unknown fields are ignored. A bad file gives one error line naming
 * the origin, the field and what was expected, and fills nothing.
 *
 *   format            "ultraplan.stack/1"                         required
 *   name              string, < 32 chars                          required
 *   desc              string, < 160 chars                         optional
 *   gemm_scale, mem_scale, attn_scale   > 0 (at most 4)           optional, 1
 *   attn_kernel       "profile" | "fa1" | "fa2" | "fa3" | "cudnn"  optional, "profile"
 *   kernel_lat_scale  >= 0 (at most 100)                          optional, 1
 *   tp_overlap, dp_overlap, pp_overlap  in [0, 1]                 optional (the profile's)
 *   ce_fused          true | false: the loss is a fused cross-entropy kernel (optional, unfused)
 *   zero3             object, optional:
 *     gathers_per_layer  integer 0..1000 (0 = one call per stage)
 *     flat_ring          true | false
 *     prefetch_params    parameters gathered ahead, 0..1e15 (0 = a layer or more)
 *     call_s             seconds, 0..1 (host time per call)
 *     rank_s             seconds, 0..1e-3 (host time per call per rank of the group)
 *   pp_p2p_serial     true | false: pipeline sends and receives one blocking call at a time (optional, false)
 *   zero2_pp          true | false: the stack shards gradients beside pipeline parallelism, so
 *                     ZeRO-2 combines with pp > 1, each micro-batch's gradients reduce-scattered
 *                     into the shard (Llama 3's FSDP) (optional, false)
 *   rc_early_stop     true | false: a full recompute stops before the layer's MLP down
 *                     projection (PyTorch >= 2.1 non-reentrant checkpointing) (optional, false)
 *   eager_elementwise true | false: the model code's norms, RoPE and gated activation are
 *                     eager PyTorch ops, fused only under torch.compile (--torch-compile) (optional, false)
 *   ce_upcast         true | false: the loss is PyTorch's cross_entropy over an fp32 copy of
 *                     the logits, so at the loss the logits, the copy and the fp32
 *                     log-softmax are live (optional, false)
 *   compile_loss      true | false: --torch-compile compiles that loss too, which then keeps
 *                     no fp32 copies of the logits (optional, false)
 *   cp_pytorch        true | false: context parallelism is PyTorch's experimental CP
 *                     (torch.distributed.tensor.experimental._attention): cp ring steps over
 *                     K/V however they travel, merges and gradient sums as eager fp32 ops,
 *                     dK/dV passed along the ring in fp32 (model/timing.c cp_pytorch_s) (optional, false)
 *   sdpa_repeat_kv    true | false: the model code repeats a GQA model's K and V to every
 *                     query head before the attention: a copy a layer, and K/V as wide as Q
 *                     in the CP exchange (optional, false)
 *   cp_comm           "ring" | "all-gather": the context-parallel K/V exchange the stack
 *                     runs, whatever --cp-comm says (optional: the layout's choice). A
 *                     layout default, not a profile field (stacks_layout_settings)
 *   selective_ac      "core_attn" | "op": what --recompute selective recomputes under the
 *                     stack: Megatron's attention core, or torchtitan's per-op policy
 *                     (optional: core_attn). A layout field set from the stack (stacks_layout_settings)
 *   validated         string, optional: what the stack was fitted on and held out
 *                     (documentation, like the _src strings; not read)
 *
 * All functions returning int return 0 on success or -1 with err filled.
 */
#ifndef ULTRAPLAN_PROFILES_STACKS_H
#define ULTRAPLAN_PROFILES_STACKS_H

#include "layout.h"
#include "stack.h"

#define STACK_FORMAT "ultraplan.stack/1"

/* The builtin stacks, in a fixed order (the --stack knob's values); 0 is
 * megatron-lm, the default, which changes nothing. */
#define STACK_BUILTIN_COUNT 11
const char *stacks_name(int i);          // NULL when i is out of range
int stacks_index(const char *name);      // case-insensitive; -1 when unknown

/* Builtin i, or a builtin by name (unknown: "unknown software stack "x"
 * (did you mean "y"?); known: ..."). */
int stacks_load(int i, Stack *out, char *err, int errlen);
int stacks_load_name(const char *name, Stack *out, char *err, int errlen);

/* Parse JSON text; origin names it in errors. */
int stacks_parse_json(const char *text, const char *origin, Stack *out, char *err, int errlen);

/* The stack as JSON text in its own format (no _src fields); malloc'd,
 * caller frees; NULL only when out of memory. */
char *stacks_to_json(const Stack *st);

/* The profile as builtin stack i runs on it (i 0: unchanged). 0 ok. */
int stacks_apply(HwProfile *hw, int i, char *err, int errlen);

/* A profile builtin stack i was applied to, read back from a plan file
 * (scaled curves kept, ZeRO-3 and the other set fields not written): those
 * fields again, and the stack's name. 0 ok. */
int stacks_apply_settings(HwProfile *hw, int i, char *err, int errlen);

/* The layout fields builtin stack lo->stack decides (what selective
 * recomputation recomputes: SEL_AC_CORE_ATTN unless the stack says
 * otherwise, or lo->stack is no builtin stack; the CP exchange where the
 * stack fixes it, lo->cp_comm left alone where it does not). Every
 * reader of a layout calls it once its stack is known: scenario_finish,
 * the plan reader, validate's rows. */
void stacks_layout_settings(Layout *lo);

#endif
