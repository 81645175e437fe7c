/* params.h — the parameter tensors of one rank: one descriptor table of
 * {name, shape, split rule}, carved into the weight and gradient slabs.
 *
 * The table is the same count the cost model makes (memory_stage_params):
 * per layer the matrices split over tp, norms replicated, column-parallel
 * biases split and row-parallel ones replicated; the vocab-parallel
 * embedding and learned positions on stage 0; the final norm and the LM
 * head (a copy of a tied embedding when pp > 1) on the last stage.
 *
 * Initial values are a function of (seed, tensor, layer, index in the FULL
 * tensor), so every layout starts from the same model: a rank computes the
 * values of the global elements its shard holds.
 *
 * Mixture of experts (spec_layer_is_moe): an MoE layer keeps the dense
 * layer's attention and norms; its fc1/fc2 are the shared expert (a dense
 * MLP of shared_ffn split over tp, absent with shared_ffn 0), router.w
 * (experts x h) is replicated, and efc1.w / efc2.w hold this rank's E/ep
 * routed experts, expert after expert, each column- (fc1, gate|up part by
 * part) or row-split (fc2) over etp. The routed experts live in their own
 * region after the dense tensors ([0, dense_alloc) dense, padded for ZeRO-1
 * over dp·cp; [x_off, x_off + x_alloc) experts, padded to sm->expert_pad
 * for ZeRO-1 over edp), since their gradients reduce over edp, not dp·cp.
 * An expert value is a function of (seed, tensor, layer, global expert,
 * index in that expert's full tensor). No biases in MoE layers (the
 * executor refuses them).
 *
 * Multi-head latent attention (model.attn mla, DeepSeek-V2/V3): qkv.w and
 * its bias are absent; q_a.w (q_lora x h) and kv_a.w ((kv_lora + rope) x h)
 * and the latent norms q_a.norm, kv_a.norm are replicated over tp, as in
 * Megatron-LM; q_b.w (a·(nope + rope) x q_lora, or x h without q
 * compression) and kv_b.w (a·(nope + v) x kv_lora) are column-parallel by
 * heads (rows head-major, each head's [nope | rope] or [nope | v]), and
 * proj.w (h x a·v) is row-parallel. No biases (the executor refuses them).
 *
 * Attention sinks (model.sinks, GPT-OSS): attn.sinks holds one logit per
 * query head (a), column-parallel by heads like q; initialised to 0.
 *
 * Multi-token prediction (model.mtp_layers D): the last stage holds D more
 * layers after its chunks' (local layers nlayers − D .. nlayers − 1,
 * global index L + k), each a transformer layer plus the module's norms
 * (mtp.enorm, mtp.hnorm, mtp.norm: replicated) and its projection mtp.eh.w
 * (h x 2h, column-parallel, input [norm(embedding) | norm(hidden)] as in
 * Megatron-LM). Embedding and output head are shared: an untied model with
 * pp > 1 keeps a copy of the embedding on the last stage too (its
 * gradients summed with stage 0's, as Megatron-LM does).
 */
#ifndef ULTRAPLAN_EXECUTOR_PARAMS_H
#define ULTRAPLAN_EXECUTOR_PARAMS_H

#include <stddef.h>
#include <stdint.h>

#include "layout.h"
#include "spec.h"

typedef enum {
    P_LN1W, P_LN1B, P_QKVW, P_QKVB, P_PROJW, P_PROJB,
    P_LN2W, P_LN2B, P_FC1W, P_FC1B, P_FC2W, P_FC2B,
    P_ROUTW, P_EFC1W, P_EFC2W,           // MoE layers: router, routed experts (expert region)
    P_QAW, P_QANW, P_QBW,                // MLA: q down-projection, its norm, q up-projection
    P_KVAW, P_KVANW, P_KVBW,             // MLA: kv down-projection, its norm, kv up-projection
    P_MTPEN, P_MTPHN, P_MTPEH, P_MTPFN,  // MTP modules: embedding norm, hidden norm, 2h -> h, final norm
    P_SINK,                              // attention sinks: one logit a head, split with the heads
    P_LAYER_COUNT,                       // tensors of one transformer layer
    P_WTE = P_LAYER_COUNT, P_WPE, P_LNFW, P_LNFB, P_HEAD,
    P_COUNT
} ParamId;

typedef enum {
    SPLIT_REP,     // replicated over tp
    SPLIT_COL,     // output rows split over tp, part by part (Q|K|V, gate|up)
    SPLIT_ROW,     // input columns split over tp
    SPLIT_VOCAB,   // vocabulary rows split over tp
    SPLIT_ECOL,    // routed experts: E/ep local experts, each's rows split over etp (part by part)
    SPLIT_EROW,    // routed experts: E/ep local experts, each's columns split over etp
} SplitRule;

typedef enum { INIT_NORMAL, INIT_NORMAL_SCALED, INIT_ONE, INIT_ZERO } InitRule;

typedef struct {
    const char *name;
    SplitRule split;
    InitRule init;
} ParamDesc;

extern const ParamDesc param_desc[P_COUNT];

/* Global shape of one tensor: rows as up to 3 parts (split one by one under
 * SPLIT_COL), and cols. Returns 0 when the model has no such tensor. For a
 * dense layer; param_shape_at says it for an MoE layer too (moe true: fc1,
 * fc2 are the shared expert, efc1/efc2 ONE routed expert). */
int param_shape(ParamId id, const ModelSpec *m, int tp, int64_t parts[3], int64_t *cols);
int param_shape_at(ParamId id, const ModelSpec *m, int tp, bool moe, int64_t parts[3], int64_t *cols);
static inline int param_is_expert(ParamId id) { return id == P_EFC1W || id == P_EFC2W; }

/* Where this rank's stage sits in the model. */
typedef struct {
    int stage, nstages, vp;       // pipeline stage, pp, chunks per stage
    int tp, tp_rank;
    int nchunk_layers[16];        // layers per chunk on this stage
    int first_layer[16];          // global index of each chunk's first layer
    int nlayers;                  // on this stage, all chunks
    int ep, ep_rank, etp, etp_rank;   // expert layout (stagemap_init: ep, etp of the layout, ranks 0)
    int expert_pad;               // pad the expert region to a multiple of it (ZeRO-1 over edp); 1 none
    int nmtp;                     // MTP modules on this stage (the last: model.mtp_layers; else 0)
} StageMap;

int stagemap_init(StageMap *sm, const ModelSpec *m, const Layout *lo, int stage, int tp_rank,
                  char *err, int errlen);

#define PARAM_NONE ((size_t)-1)

typedef struct {
    size_t n;                     // floats of the dense tensors (all but the routed experts)
    size_t n_alloc;               // floats allocated: dense_alloc + x_alloc
    size_t (*layer_off)[P_LAYER_COUNT];   // (nlayers, P_LAYER_COUNT) offsets, PARAM_NONE if absent
    size_t (*layer_len)[P_LAYER_COUNT];
    size_t off[P_COUNT], len[P_COUNT];    // the stage-level tensors (P_WTE..P_HEAD)
    int nlayers;                  // local layers, chunk by chunk, then the MTP modules' (StageMap.nmtp)
    int *glayer;                  // (nlayers) global index of each local layer
    size_t layers_end;            // floats of the layer tensors (they come first)
    size_t dense_alloc;           // n padded for an even ZeRO-1 split over dp·cp
    size_t x_off, x_n, x_alloc;   // routed experts: region start (= dense_alloc), floats, padded
    float *w;                     // (n_alloc) weights
    float *g;                     // (n_alloc) gradients
} ParamSet;

/* Lay out this stage's tensors (no allocation of w, g: caller owns slabs).
 * pad_to: round n_alloc up to a multiple of it (1 for none). */
void params_layout(ParamSet *ps, const ModelSpec *m, const StageMap *sm, int pad_to);
/* Fill the weights from the seed. */
void params_init(ParamSet *ps, const ModelSpec *m, const StageMap *sm, uint64_t seed);
void params_free(ParamSet *ps);

/* Pointers into a slab (w or g) for local layer i, or NULL if absent. */
float *params_layer(const ParamSet *ps, float *slab, int i, ParamId id);
float *params_stage(const ParamSet *ps, float *slab, ParamId id);

#endif
