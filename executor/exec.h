/* exec.h — one rank of a training run under a plan's layout: the decoder
 * (GPT or Llama) in fp32 on the CPU, its slabs, the pipeline schedule, the
 * tensor-, pipeline- and data-parallel communication, AdamW, timers.
 *
 * Memory lives in five slabs, one per category, each carved by a table:
 *   weights, grads   the ParamSet of this stage (params.h); under ZeRO-2 the
 *                    gradients, under ZeRO-3 also the weights, exist only as
 *                    this rank's shard (1/dp of every unit, below)
 *   optim            AdamW m and v: all params, or a 1/dp shard under ZeRO-1/2/3
 *   acts             per in-flight (chunk, micro-batch) slot the tensors the
 *                    backward reads (the Korthikanti terms the cost model
 *                    counts), the recompute working set, the last stage's
 *                    final-norm input/output and logits
 *   buffers          backward scratch, SP gather buffers, PP send ring, tokens,
 *                    the context-parallel ring's K/V blocks and dK/dV
 *                    accumulators (cpattn.h)
 *                    ZeRO-2/3 gradient buckets and ZeRO-3 gather buffers
 *
 * ZeRO-2 and ZeRO-3 (pp 1 only, as the planner emits them) shard per unit,
 * FSDP-style: each local layer is a unit, and the stage's other tensors
 * (embedding, positions, final norm, head) one more, the stage unit. A
 * unit's floats are padded to a multiple of the gradient group's size D
 * and rank k owns slice k; the shard is the slices of all units in unit
 * order, and AdamW runs on it. Every micro-batch's backward fills a unit's
 * gradient bucket (two for the layers, alternating, one for the stage
 * unit, held from the loss backward to the embedding's) and starts its
 * non-blocking reduce-scatter as soon as the unit is done; the slice that
 * comes back is added into the gradient shard when the bucket is next
 * needed or at the end of the step. ZeRO-2 then all-gathers the updated
 * weights unit by unit. ZeRO-3 gathers a layer into one of two buffers
 * before its forward, and before its backward (and recomputation), while
 * the next layer to run is gathered behind it; a layer still held from the
 * last use (the last layer's forward before its backward, the first
 * layer's backward before the next micro-batch) is not gathered again. Its
 * stage unit is gathered at each micro-batch's start and held to the
 * embedding's backward. The gradient group is the dp·cp ranks of Dist.dpcp_comm (exec.c's
 * grad_group).
 *
 * The loss backward is fused into the last chunk's forward (dlogits are
 * formed while the logits are hot), so the head's buffers are held for one
 * micro-batch at a time. Selective recomputation recomputes the attention
 * core, which the flash-style kernel already does in every backward, so a
 * selectively recomputed layer runs like a plain one.
 *
 * Context parallel (cp > 1): a rank holds chunks cp_rank and 2·cp−1−cp_rank
 * of every sequence (cpattn.h), so every per-token tensor has N = B·T/cp rows
 * (Nl = N/tp under SP); it reads the same rows as the other ranks of its dp
 * rank and keeps its chunks' tokens and targets; learned positions and RoPE
 * use the global positions, attention is the ring of cpattn.c, the loss
 * scale counts the full B·T tokens, and gradients are reduced (ZeRO-0) or
 * reduce-scattered (ZeRO-1) over the dp·cp ranks of Dist.dpcp_comm.
 *
 * Mixture of experts (spec_layer_is_moe; moe.h has the routed part): an
 * MoE layer's MLP is the shared expert (net.c, a dense MLP of shared_ffn)
 * plus the routed experts (moe.c). Expert ranks fold over the stage's
 * tp·cp·dp ranks as etp x ep x edp (dist.h). Dense parameters (the router
 * among them) reduce over dp·cp as today; the routed experts, in their own
 * region of the slab (params.h), reduce over edp, and ZeRO-1 / the
 * distributed optimizer shard their AdamW moments over edp (whenever edp >
 * 1, whatever dp·cp is). Under ZeRO-2/3 a layer unit's routed experts are
 * a second part of the unit, sharded over edp: its bucket's expert part is
 * reduce-scattered over edp while the dense part goes over dp·cp, and
 * ZeRO-3 gathers the expert part over edp with the dense one (an edp of
 * more than one shards the experts even when dp·cp is 1). The optimizer
 * arrays are [dense shard | expert shard]. The router's load-balancing
 * loss (moe.h) is added to the objective and reported apart
 * (StepStats.aux_loss). MoE with tp > 1 needs sequence parallel, as in
 * Megatron-LM; biases are refused for MoE models.
 *
 * Multi-head latent attention (DeepSeek-V2/V3; net.c): the down-projections
 * of q and kv run on this rank's rows (replicated weights, their gradients
 * summed over tp under SP like the norms'), the normed latents and the
 * shared RoPE key are gathered to all N rows as one packed tensor, the
 * up-projections and the output projection are split by heads. Attention
 * runs at head size nope + rope with v zero-padded to it (the cost model
 * counts q, k, v and o at that width), so the context-parallel ring works
 * unchanged. The latent gradients come back as one packed reduce over tp.
 * MLA needs RMSNorm, RoPE, no biases and v_head_dim <= nope + rope.
 *
 * Multi-token prediction (DeepSeek-V3 §2.2, Megatron-LM's MTP block; net.c)
 * runs on the last stage inside the last chunk's forward, after the main
 * head's loss: module k (1..D) projects [norm(emb(t_{i+k})) | norm(h^{k-1}_i)]
 * (h^0 the main model's output before its final norm) 2h -> h, runs its
 * transformer layer, and its final norm and the shared head predict
 * t_{i+k+1}; positions past the row's end have no target. Its loss is
 * mtp_scale / D x Σ_k (the mean over the gbs·(T−k) predicted tokens), and
 * its backward runs at once, adding into the main output's gradient, so
 * one micro-batch's MTP tensors are live at a time. MTP needs RMSNorm,
 * RoPE, cp 1, and under ZeRO-2/3 at most 2 modules (a module's gradient
 * bucket is open from its loss to the end of its backward).
 *
 * What it doesn't do: dropout, mixed precision, ZeRO-2/3 with pp > 1 (the
 * layout refuses it), overlap of ZeRO-2's post-step weight gathers with the
 * next step's forward.
 */
#ifndef ULTRAPLAN_EXECUTOR_EXEC_H
#define ULTRAPLAN_EXECUTOR_EXEC_H

#include <stdint.h>

#include "cpattn.h"
#include "data.h"
#include "dist.h"
#include "params.h"
#include "runfile.h"   // ExecMem, Phase: run.json's vocabulary
#include "sched.h"

typedef struct {
    float lr, beta1, beta2, eps, weight_decay;
    uint64_t seed;
    double moe_aux_coeff;        // load-balancing loss coefficient (Megatron --moe-aux-loss-coeff); 1e-2
    double moe_imbalance;        // expert buffers sized for this x the even share of routed tokens;
                                 // 0 = the plan's layout.moe_imbalance (the cost model's default if unset)
    double mtp_scale;            // MTP loss factor (Megatron --mtp-loss-scaling-factor); 0.1
} TrainOpts;

void exec_default_opts(TrainOpts *o);

/* The tensors one layer's backward reads, for one micro-batch. */
typedef struct {
    float *x;                    // (Nl, C) layer input (residual stream)
    float *a1, *mean1, *rstd1;   // (Nl, C), (Nl), (Nl) first norm
    float *q, *k, *v;            // (N, ql), (N, kvl), (N, kvl), after RoPE
    float *o, *lse;              // (N, ql) attention output, (B, NHl, Tl)
    float *x2;                   // (Nl, C) after the attention residual
    float *a2, *mean2, *rstd2;   // second norm
    float *hpre, *hact;          // (N, F1l) FC1 output, (N, Fl) activation (MoE: the shared expert's)
    /* MLA layers (net.c): q, k, v, o are (N, NHl·HS) with HS = nope + rope,
     * v and o zero past v_head_dim in every head */
    float *cq, *ckv;             // (Nl, q_lora), (Nl, kv_lora + rope) down-projections of a1
    float *rq, *rkv;             // (Nl) rstd of the q and kv latent norms
    float *cqn, *ckvn;           // (N, q_lora), (N, kv_lora) normed latents (gathered under SP)
    /* MoE layers (moe.h) */
    float *probs;                // (Nl, E) router softmax over all experts
    float *tki, *tkw;            // (Nl, k) top-k experts (as floats) and combine weights
    float *ye;                   // (Nl·k, C) expert outputs as they come back, in send order
    struct MoeBuf *mb;           // expert input, FC1 output, activation (grown on demand)
} LayerActs;

/* One MTP module's tensors for the micro-batch in flight (net.c). */
typedef struct {
    LayerActs la;                // its transformer layer; la.x is the projection's output
    float *emb, *rse;            // (Nl, C) embedding of the tokens k ahead, (Nl) rstd of its norm
    float *rsh;                  // (Nl) rstd of the norm of the previous depth's hidden state
    float *cat;                  // (N, 2C) [norm(emb) | norm(hidden)], the projection's input
    float *out;                  // (Nl, C) this depth's hidden state (the layer's output)
    float *dh;                   // (Nl, C) gradient at out
} MtpActs;

typedef struct {
    LayerActs *la;               // (layers of the largest chunk)
    float *dlast;                // (Nl, C) loss gradient at the last chunk's output (last stage)
} Slot;

typedef struct {
    double loss;                 // mean over the global batch, nats (the LM loss)
    double aux_loss;             // MoE load-balancing loss added to the objective (all MoE layers)
    double mtp_loss;             // MTP loss added to the objective: mtp_scale x the mean over depths
    double t[PH_COUNT];          // seconds by phase (exposed comm for TP, PP, DP)
    double step_s;               // wall seconds of the step
} StepStats;

/* A unit of the per-layer DP buckets and of ZeRO-2/3: a local layer, or
 * (the last) the stage's non-layer tensors. Its routed experts are sharded
 * over edp, not dp·cp, so they are apart (x_*; 0 floats for a dense layer). */
typedef struct {
    size_t start, n;             // offset in the param slab and floats of the unit (its experts not counted)
    size_t slice, soff;          // floats of one rank's slice of it, that slice's offset in the shard
    float *w, *g;                // where its weights / gradients are now (NULL: not held)
    size_t x_start, x_len;       // offset in the param slab and floats of its routed experts (0 none)
    size_t x_slice, x_soff;      // floats of one edp rank's slice of them, its offset in the shard
    float *xw, *xg;              // where its expert weights / gradients are now (NULL: not held)
} ExecUnit;

typedef struct {
    ModelSpec m;
    Layout lo;
    TrainOpts opt;
    Dist d;
    StageMap sm;
    ParamSet ps;
    Schedule sch;
    DataLoader dl;
    int step;                    // optimizer steps done
    /* shapes, local to this rank */
    int B, T, N, Nl, C, HS, NHl, NKVl, ql, kvl, F1l, Fl, Vl, vstart, nmb;
    int Tl;                      // tokens of a row on this rank: T/cp (N = B·Tl)
    /* multi-head latent attention (model.attn mla): per head widths, latent ranks */
    int mla, nope, rope, vd, qr, kr, mD;   // mD = qr + kr + rope: one packed latent row
    float *mpack, *mlat;         // (Nl, mD) this rank's latent rows, (N, mD) gathered; bwd: their grads
    float *mkv, *mkpe, *mqr;     // (N, NHl·(nope+vd)) kv_b output, (N, rope) shared key, (N, NHl·rope)
    float *mo, *mdq, *mdkv;      // (N, NHl·vd) packed o; (N, qr), (N, kr + rope) latent grads
    /* multi-token prediction (last stage): its modules are ps layers sm.nlayers .. ps.nlayers−1 */
    int nmtp;                    // modules on this rank (sm.nmtp)
    MtpActs *mtp;                // (nmtp)
    int *mtok, *mtgt;            // (N) the tokens k ahead and their targets (−1 past the row's end)
    float *mtmp, *memb, *mcatl;  // (Nl, C) x 2, (Nl, 2C) scratch
    float *mpart, *mgat, *mdcat; // (N, C/tp), (N, C), (N, 2C) projection scratch
    double mtp_sum;
    int nmoeb;                   // expert buffers in moeb
    /* mixture of experts (moe.h); E 0 for a dense model */
    int E, El, K, Fe, F1e, Fs, F1s;   // experts, local experts, top-k, expert widths /etp, shared /tp
    int xzero;                   // expert moments sharded over edp (ZeRO-1 / dist-opt with edp > 1)
    size_t opt_nd, xopt_n, xopt_off;  // dense shard floats; expert shard floats and offset in the slab
    struct MoeBuf **moeb;        // (nslots · maxchunk + 1) per (slot, layer); the last: recompute's
    struct MoeScratch *mx;       // moe.c's scratch
    int recomputing;             // a full-recompute forward: no aux loss counted
    double aux_sum;
    CpAttn cpa;                  // the cp ring (cp > 1)
    const int *cpos;             // (Tl) global positions of the local tokens; NULL when cp is 1
    int *rowtok;                 // (2·B·T) whole rows read before the chunks are kept (cp > 1)
    int maxchunk;                // layers of the largest chunk
    int *rc;                     // (nlayers) 0 none, 1 selective, 2 full
    /* optimizer */
    float *om, *ov;              // (opt_n) AdamW moments: [dense shard | expert shard]
    size_t opt_n, opt_off;       // shard size (both parts) and the dense shard's offset in the param slab
    /* slabs */
    float *acts;
    size_t acts_n;               // floats
    float *bufs;
    size_t bufs_n;
    Slot *slots;
    int nslots;
    int *slot_of;                // (vp·m) slot held by (chunk, mb), -1 none
    int *slot_free;              // (nslots)
    LayerActs ws;                // recompute working set
    float *head_in, *head_n, *head_mean, *head_rstd, *logits, *ce_loss, *ce_lse;
    /* scratch */
    float *gath, *part, *dres, *dgat, *dcol, *dq, *dk, *dv, *dout, *drope, *dhpre, *dhact, *rc_out;
    float *send_ring;
    int nsend;                   // ring entries
    int send_next;
    DistReq *send_req;
    int *tokens, *targets;       // (nmb, N)
    /* per-layer DP buckets; ZeRO-2/3 units (index nlayers: the stage unit) */
    DistReq *dp_req;         // (nlayers + 1)
    int ndp_req;
    int zero;                    // 0, 1 (ZeRO-1, dist-opt), 2, 3: what this rank shards
    int nunits;                  // nlayers + 1
    ExecUnit *unit;              // (nunits) each unit's place in the slab, its slices, where it is now
    float *wsh, *gsh;            // ZeRO-3 weight shard, ZeRO-2/3 gradient shard (opt_n each)
    float *zg[2], *zgs;          // gather buffers (ZeRO-3): layers, the stage unit
    int zg_unit[2];              // unit gathered (or being gathered) into zg[k], -1 none
    DistReq zg_req[2], zgs_req;
    float *zb[2], *zbs;          // gradient buckets (ZeRO-2/3): layers, the stage unit
    int zb_unit[2], zbs_busy;    // unit being reduced from zb[k] (-1 none); zbs being reduced
    DistReq zb_req[2], zbs_req;
    int zb_next, zb_cur;         // bucket the next layer takes, the one the layer in backward holds
    /* a layer unit's routed experts (ZeRO-2/3): sharded over edp, not dp·cp;
     * buckets and gather buffers hold them from float zx on */
    size_t zx;                   // floats: start of the expert part of zb[k] and zg[k]
    DistReq zgx_req[2], zbx_req[2];
    /* accounting */
    double mem[XM_COUNT];        // bytes allocated by category
    double t[PH_COUNT];          // this step's phase timers
    double loss_sum;
} Exec;

/* Build this rank's part of the model for a checked layout (fp32) and
 * open the data. Needs MPI initialised. 0, or -1 with err (world size,
 * shapes the executor can't split, data). Collective: every rank calls it. */
int exec_init(Exec *e, const ModelSpec *m, const Layout *lo, const TrainOpts *o,
              const char *data, char *err, int errlen);

/* One optimizer step over gbs sequences. Collective. */
int exec_step(Exec *e, StepStats *st, char *err, int errlen);

/* The tensors net.c computes with, wherever the layout keeps them now:
 * local layer li's tensor id, or a stage tensor (P_WTE..P_HEAD); NULL
 * when the model or stage has none. Under ZeRO-3 the weights point into a
 * gather buffer, under ZeRO-2/3 the gradients into the unit's bucket. */
float *exec_lw(const Exec *e, int li, ParamId id);
float *exec_lg(const Exec *e, int li, ParamId id);
float *exec_sw(const Exec *e, ParamId id);
float *exec_sg(const Exec *e, ParamId id);

/* Whether local layer li is a mixture-of-experts layer. */
int exec_layer_moe(const Exec *e, int li);

/* ZeRO-3, for checkpoints: every rank's slices of the stage's weights into
 * w (n floats; collective over the gradient group), and this rank's slices
 * of full weights w into its shard (local). */
void exec_gather_weights(Exec *e, float *w);
void exec_scatter_weights(Exec *e, const float *w);

/* Bytes this rank allocated by category. */
void exec_memory(const Exec *e, double out[XM_COUNT]);

/* Checkpoint: one file per rank in dir/step-NNNNNN/ plus dir/manifest.json
 * (sizes and CRC-32s) written by rank 0 last; temp name, fsync, rename; older
 * step directories are removed once the new manifest is in place, so a
 * failure at any point leaves the previous checkpoint valid. Load verifies
 * sizes and checksums, checks the layout and restores weights, optimizer
 * moments, step and data position; a file that fails its check is never
 * loaded (err names it). Collective: every rank gets
 * the same result and the first failing rank's message. */
int exec_save(Exec *e, const char *dir, char *err, int errlen);
int exec_load(Exec *e, const char *dir, char *err, int errlen);
/* dir/step-NNNNNN: where the checkpoint of a step lives. */
void exec_ckpt_path(char *buf, size_t n, const char *dir, int step);

void exec_free(Exec *e);

#endif
