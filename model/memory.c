/* memory.c — bytes per GPU of each pipeline stage (docs/COSTMODEL.md §3).
 *
 * Activations follow Korthikanti et al. 2022 term by term (§4.1 of the
 * paper), generalised to GQA, SwiGLU, no-dropout models, flash attention
 * and context parallelism; model states follow the ZeRO paper and
 * Megatron's distributed-optimizer table. What the sources leave out and
 * we count: the recompute working set, PP send/recv buffers, NCCL buffers,
 * the CUDA context and allocator fragmentation (constants in the profile).
 */
#include "memory.h"

#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "timing.h"

double memory_weight_bytes(const Layout *lo) { return hw_precision_bytes(lo->prec); }

double memory_grad_bytes(const Layout *lo) { return lo->grad_fp32 ? 4.0 : memory_weight_bytes(lo); }

double memory_optim_bytes(const Layout *lo) { return lo->prec == PREC_FP32 ? 8.0 : 12.0; }

void memory_state_bytes(const Layout *lo, double *w, double *g, double *o)
{
    double D = layout_dp_group(lo);
    bool shard_o = lo->opt != OPT_ZERO0;                              // ZeRO-1, 2, 3, dist-opt
    bool shard_g = lo->opt == OPT_ZERO2 || lo->opt == OPT_ZERO3;
    bool shard_w = lo->opt == OPT_ZERO3;
    *w = memory_weight_bytes(lo) / (shard_w ? D : 1.0);
    *g = memory_grad_bytes(lo) / (shard_g ? D : 1.0);
    *o = memory_optim_bytes(lo) / (shard_o ? D : 1.0);
}

double memory_layer_acts(const ModelSpec *m, const Layout *lo, Recompute r)
{
    double ab = hw_precision_bytes(lo->prec);
    double t = lo->tp, h = m->h;
    double sbh = layout_mb_tokens(m, lo) * h;
    double rep = layout_sp_share(lo);          // non-TP-parallel parts, sharded by SP
    double mask = m->dropout ? 1.0 : 0.0;      // 1-byte dropout masks

    if (r == RECOMPUTE_FULL)
        return ab * sbh * rep;                 // only the layer input is kept

    double q = spec_q_width(m) / h, kv = spec_kv_width(m) / h, f = (double)m->f / h;
    /* norm inputs (2), QKV input, FC1 input; attention and MLP dropout masks */
    double nontp = 4.0 * ab + 2.0 * mask;
    /* Q, K, V, attention output (projection input); MLP intermediates */
    /* GELU keeps its input and output (FC2 input); a fused SwiGLU keeps the
     * FC1 output [gate | up] and the product, not the SiLU output (Megatron's
     * bias_swiglu saves only its input) */
    double mlp = m->mlp == MLP_SWIGLU ? 3.0 * ab * f : 2.0 * ab * f;
    double tpart = ab * (2.0 * q + 2.0 * kv) + mlp;
    double bytes = sbh * (nontp * rep + tpart / t);

    double a = m->a;
    if (lo->flash) {
        bytes += 4.0 * a * layout_mb_tokens(m, lo) / t;   // fp32 log-sum-exp per row
    } else if (r == RECOMPUTE_NONE) {
        /* softmax output, dropout mask and dropout output: 5 a s^2 b with
         * dropout; with CP each rank scores its s/cp queries against s keys */
        /* the unfused fp32 fallback (time_softmax_fused) keeps its fp32 output */
        double sm = time_softmax_fused(m, lo) ? ab : 4.0;
        bytes += (sm + (m->dropout ? mask + ab : 0.0)) * a * layout_mb_tokens(m, lo) * (double)m->s / t;
    }
    return bytes;
}

double memory_inflight(const Layout *lo, int stage)
{
    int mb = layout_microbatches(lo), p = lo->pp, v = lo->vp;
    if (v <= 1)
        return fmin(mb, p - stage);
    /* Megatron's interleaved warm-up: 2(p - s - 1) + (v - 1) p chunks, +1 in steady state */
    double chunks = fmin((double)mb * v, 2.0 * (p - stage - 1) + (double)(v - 1) * p + 1);
    return chunks / v;
}

double memory_stage_params(const ModelSpec *m, const Layout *lo, int stage, int layers)
{
    double t = lo->tp, h = m->h;
    double V = (double)spec_padded_vocab(m, lo->tp);
    double per_layer = (double)spec_layer_matrix_params(m) / t + (double)spec_layer_norm_params(m);
    if (m->bias) {
        /* column-parallel biases (QKV, FC1) shard; row-parallel ones (proj, FC2) replicate */
        double col = spec_q_width(m) + 2.0 * spec_kv_width(m) + (m->mlp == MLP_SWIGLU ? 2.0 : 1.0) * m->f;
        per_layer += col / t + 2.0 * h;
    }
    double n = layers * per_layer;
    if (stage == 0) {
        n += V * h / t;
        if (m->pos == POS_LEARNED)
            n += (double)m->s * h;
    }
    if (stage == lo->pp - 1) {
        n += (double)spec_norm_params(m);
        /* untied head, or Megatron's copy of a tied embedding on the last stage */
        if (!m->tied || lo->pp > 1)
            n += V * h / t;
    }
    return n;
}

double memory_pp_msg_bytes(const ModelSpec *m, const Layout *lo)
{
    return hw_precision_bytes(lo->prec) * layout_mb_tokens(m, lo) * m->h / lo->tp;
}

static double stage_acts(const ModelSpec *m, const Layout *lo, int s, double inflight)
{
    int n = lo->layers[s], f = lo->full_rc[s], e = lo->sel_rc[s];
    double none = memory_layer_acts(m, lo, RECOMPUTE_NONE);
    double per_mb = (n - f - e) * none
                  + e * memory_layer_acts(m, lo, RECOMPUTE_SELECTIVE)
                  + f * memory_layer_acts(m, lo, RECOMPUTE_FULL);
    double ab = hw_precision_bytes(lo->prec);
    double tok = layout_mb_tokens(m, lo), h = m->h, rep = layout_sp_share(lo);
    double bytes = inflight * per_mb;
    if (s == 0) {
        /* token and position ids (int64) and the embedding dropout mask, per micro-batch held */
        bytes += inflight * (8.0 * tok + (m->dropout ? tok * h * rep : 0.0));
    }
    if (s == lo->pp - 1) {
        /* final norm input, LM-head input, fp32 logits: one micro-batch at a time */
        double V = (double)spec_padded_vocab(m, lo->tp);
        bytes += 2.0 * ab * tok * h * rep + 4.0 * tok * V / lo->tp;
    }
    /* the recompute working set: while one fully recomputed layer runs its
     * backward, its activations are all live */
    if (f > 0)
        bytes += none;
    return bytes;
}

double memory_zero_unit_params(const ModelSpec *m, const Layout *lo, int s, double *layer_unit)
{
    double stage_unit = memory_stage_params(m, lo, s, 0);
    if (layer_unit)
        *layer_unit = memory_stage_params(m, lo, s, 1) - stage_unit;
    return stage_unit;
}

double memory_cp_ring_bytes(const ModelSpec *m, const Layout *lo)
{
    if (lo->cp <= 1)
        return 0;
    /* the K and V block resident and the one arriving; in the backward their
     * gradients travel with them: 2 buffers of (K, V, dK, dV) of the local tokens */
    double kv = spec_kv_width(m) / lo->tp;
    return 2.0 * 4.0 * hw_precision_bytes(lo->prec) * layout_mb_tokens(m, lo) * kv;
}

static double stage_buffers(const ModelSpec *m, const HwProfile *hw, const Layout *lo, int s)
{
    double bytes = 0;
    if (lo->pp > 1)   /* send and receive buffers for activations and their gradients */
        bytes += 4.0 * memory_pp_msg_bytes(m, lo);
    if (lo->opt == OPT_ZERO2 || lo->opt == OPT_ZERO3) {
        /* FSDP-style units: every layer, and the stage's other tensors
         * (embedding, final norm, head) as one more. A unit's full gradient
         * lives in a bucket until its reduce-scatter ends: two layer buckets,
         * so one reduces while the next layer's backward writes the other,
         * and the stage unit's own (its head gradient is written in the
         * forward, its embedding gradient at the end of the backward) */
        double layer, stage = memory_zero_unit_params(m, lo, s, &layer);
        bytes += memory_grad_bytes(lo) * (2.0 * layer + stage);
        /* ZeRO-3 gathers: the layer computing and the one prefetched, and
         * the stage unit held from a micro-batch's embedding to its backward */
        if (lo->opt == OPT_ZERO3)
            bytes += memory_weight_bytes(lo) * (2.0 * layer + stage);
    }
    bytes += memory_cp_ring_bytes(m, lo);
    int comms = (lo->tp > 1) + (lo->pp > 1) + (layout_dp_group(lo) > 1) + (lo->cp > 1);
    return bytes + comms * hw->nccl_buf_bytes;
}

void memory_stage(const ModelSpec *m, const HwProfile *hw, const Layout *lo, int s, StageMem *out)
{
    memset(out, 0, sizeof *out);
    double w, g, o;
    memory_state_bytes(lo, &w, &g, &o);
    out->layers = lo->layers[s];
    out->params = memory_stage_params(m, lo, s, lo->layers[s]);
    out->inflight = memory_inflight(lo, s);
    out->bytes[MEM_WEIGHTS] = out->params * w;
    out->bytes[MEM_GRADS] = out->params * g;
    out->bytes[MEM_OPTIM] = out->params * o;
    out->bytes[MEM_ACTS] = stage_acts(m, lo, s, out->inflight);
    out->bytes[MEM_BUFFERS] = stage_buffers(m, hw, lo, s);
    out->bytes[MEM_OVERHEAD] = hw->cuda_context_bytes
                             + hw->alloc_frag * (out->bytes[MEM_ACTS] + out->bytes[MEM_BUFFERS]);
    out->total = 0;
    for (int k = 0; k < MEM_COUNT; k++)
        out->total += out->bytes[k];
}
