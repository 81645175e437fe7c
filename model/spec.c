/* spec.c — parameter counts and FLOPs of a decoder, dense or mixture of
 * experts, with MHA/GQA or multi-head latent attention and multi-token
 * prediction modules (docs/COSTMODEL.md §1–2). Counts only: what memory and
 * time make of experts is memory.c's and timing.c's. */
#include "spec.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define SPEC_MAX_EXPERTS 65536
#define SPEC_MAX_MTP 16

/* The MoE, MLA and MTP fields: ranges, defaults, consistency. */
static int validate_moe_mla(ModelSpec *m, char *err, int errlen)
{
    if (m->attn < 0 || m->attn >= ATTN_COUNT) {
        snprintf(err, errlen, "model: attention kind %d is not mha or mla", (int)m->attn);
        return -1;
    }
    if (m->attn == ATTN_MLA) {
        if (m->kv_lora_rank <= 0 || m->qk_nope_dim < 0 || m->qk_rope_dim <= 0 || m->v_head_dim <= 0 ||
            m->q_lora_rank < 0) {
            snprintf(err, errlen, "model: multi-head latent attention needs kv-lora-rank, qk-rope-dim and "
                     "v-head-dim > 0 and qk-nope-dim, q-lora-rank >= 0 (got kv-lora-rank=%d qk-nope-dim=%d "
                     "qk-rope-dim=%d v-head-dim=%d q-lora-rank=%d)", m->kv_lora_rank, m->qk_nope_dim,
                     m->qk_rope_dim, m->v_head_dim, m->q_lora_rank);
            return -1;
        }
        if ((double)m->kv_lora_rank > 1e7 || (double)m->q_lora_rank > 1e7 || (double)m->qk_nope_dim > 1e6 ||
            (double)m->qk_rope_dim > 1e6 || (double)m->v_head_dim > 1e6) {
            snprintf(err, errlen, "model: MLA dimensions out of range (lora ranks at most 1e7, head dims 1e6)");
            return -1;
        }
        if (m->bias) {
            snprintf(err, errlen, "model: multi-head latent attention has no linear biases (DeepSeek's "
                     "attention_bias is false): give --no-bias");
            return -1;
        }
        /* every head has its own decompressed K and V: no KV groups; the
         * q/k head dimension is the no-RoPE part plus the RoPE part */
        m->g = m->a;
        m->d_head = m->qk_nope_dim + m->qk_rope_dim;
    } else {
        m->q_lora_rank = m->kv_lora_rank = m->qk_nope_dim = m->qk_rope_dim = m->v_head_dim = 0;
    }
    if (m->mtp_layers < 0 || m->mtp_layers > SPEC_MAX_MTP) {
        snprintf(err, errlen, "model: mtp-layers %d is out of range (0 to %d)", m->mtp_layers, SPEC_MAX_MTP);
        return -1;
    }
    if (m->experts < 0 || m->experts > SPEC_MAX_EXPERTS) {
        snprintf(err, errlen, "model: experts %d is out of range (0 = dense, at most %d)", m->experts,
                 SPEC_MAX_EXPERTS);
        return -1;
    }
    if (m->experts == 0) {
        /* a dense model: whatever MoE fields a preset carried do not apply */
        m->topk = m->moe_ffn = m->shared_ffn = m->moe_freq = m->moe_first_dense = 0;
        m->capacity_factor = 0;
        m->router_groups = m->router_group_topk = 0;
        return 0;
    }
    if (m->topk < 1 || m->topk > m->experts) {
        snprintf(err, errlen, "model: topk %d must be from 1 to experts %d", m->topk, m->experts);
        return -1;
    }
    if (m->moe_ffn < 0 || (double)m->moe_ffn > 1e9 || m->shared_ffn < 0 || (double)m->shared_ffn > 1e9) {
        snprintf(err, errlen, "model: moe-ffn %d and shared-ffn %d must be from 0 to 1e9", m->moe_ffn,
                 m->shared_ffn);
        return -1;
    }
    if (m->moe_freq < 0) {
        snprintf(err, errlen, "model: moe-layer-freq %d must be >= 1", m->moe_freq);
        return -1;
    }
    if (m->moe_freq == 0)
        m->moe_freq = 1;
    if (m->moe_first_dense < 0 || m->moe_first_dense >= m->L) {
        snprintf(err, errlen, "model: %d leading dense layers leave no MoE layer among the %d layers",
                 m->moe_first_dense, m->L);
        return -1;
    }
    if (!(m->capacity_factor >= 0 && m->capacity_factor <= 1000)) {
        snprintf(err, errlen, "model: capacity-factor %g must be from 0 (dropless) to 1000", m->capacity_factor);
        return -1;
    }
    /* group-limited routing (DeepSeek-V3's node-limited routing): experts in
     * G equal contiguous groups, a token's top-k from its best K groups */
    if (m->router_groups < 0 || m->router_group_topk < 0 || (m->router_groups > 0) != (m->router_group_topk > 0)) {
        snprintf(err, errlen, "model: moe-router-num-groups %d and moe-router-group-topk %d must be given together "
                 "(both 0 = no group limit)", m->router_groups, m->router_group_topk);
        return -1;
    }
    if (m->router_groups > 0 && (m->experts % m->router_groups != 0 || m->router_group_topk > m->router_groups ||
                                 (long long)m->router_group_topk * (m->experts / m->router_groups) < m->topk)) {
        snprintf(err, errlen, "model: moe-router-num-groups %d must divide experts %d, and moe-router-group-topk %d "
                 "groups must hold topk %d experts", m->router_groups, m->experts, m->router_group_topk, m->topk);
        return -1;
    }
    if (m->capacity_factor > 0 && m->capacity_factor * m->experts < m->topk) {
        snprintf(err, errlen, "model: capacity-factor %g gives experts*factor = %g slots per token, fewer than "
                 "topk %d", m->capacity_factor, m->capacity_factor * m->experts, m->topk);
        return -1;
    }
    return 0;
}

/* Sliding window, sinks and the clamped activation (GPT-OSS). */
static int validate_gptoss(const ModelSpec *m, char *err, int errlen)
{
    if (m->window < 0 || m->window_skip_freq < 0) {
        snprintf(err, errlen, "model: window %d and window-skip-freq %d must be >= 0", m->window, m->window_skip_freq);
        return -1;
    }
    if (m->window_skip_freq > 0 && m->window == 0) {
        snprintf(err, errlen, "model: window-skip-freq %d without a window (give --window W, the keys a query "
                 "sees before itself)", m->window_skip_freq);
        return -1;
    }
    if (!(m->act_clamp >= 0 && m->act_clamp <= 1e6)) {
        snprintf(err, errlen, "model: act-clamp %g must be a number from 0 (no clamp) to 1e6", m->act_clamp);
        return -1;
    }
    if (m->act_clamp > 0 && m->mlp != MLP_SWIGLU) {
        snprintf(err, errlen, "model: act-clamp (GPT-OSS's clamped gated activation) needs --mlp swiglu, "
                 "got %s", spec_mlp_name(m->mlp));
        return -1;
    }
    return 0;
}

int spec_validate(ModelSpec *m, char *err, int errlen)
{
    if (m->L <= 0 || m->h <= 0 || m->a <= 0 || m->s <= 0 || m->vocab <= 0) {
        snprintf(err, errlen, "model: layers, hidden, heads, seq and vocab must be positive "
                 "(got layers=%d hidden=%d heads=%d seq=%d vocab=%d)", m->L, m->h, m->a, m->s, m->vocab);
        return -1;
    }
    if (validate_moe_mla(m, err, errlen) != 0)
        return -1;
    if (m->g <= 0)
        m->g = m->a;
    if (m->g > m->a || m->a % m->g != 0) {
        snprintf(err, errlen, "model: kv-heads %d must divide heads %d", m->g, m->a);
        return -1;
    }
    if (m->d_head <= 0) {
        if (m->h % m->a != 0) {
            snprintf(err, errlen, "model: hidden %d is not a multiple of heads %d (give --head-dim)", m->h, m->a);
            return -1;
        }
        m->d_head = m->h / m->a;
    }
    /* bounds first, so that the derived widths below cannot overflow an int */
    if ((double)m->L * m->h > 1e9 || (double)m->s > 1e8) {
        snprintf(err, errlen, "model: shape out of range (layers*hidden %.3g > 1e9 or seq %d > 1e8)",
                 (double)m->L * m->h, m->s);
        return -1;
    }
    if ((int64_t)m->a * m->d_head > 100000000) {
        snprintf(err, errlen, "model: heads*head-dim = %d*%d is out of range (at most 1e8)", m->a, m->d_head);
        return -1;
    }
    if (m->f <= 0) {
        int64_t f = m->mlp == MLP_SWIGLU ? ((8LL * m->h / 3) + 255) / 256 * 256 : 4LL * m->h;
        if (f > 1000000000) {
            snprintf(err, errlen, "model: the default ffn of hidden %d is %lld, beyond 1e9 (give --ffn)", m->h,
                     (long long)f);
            return -1;
        }
        m->f = (int)f;
    }
    if (m->vocab_div < 0) {
        snprintf(err, errlen, "model: vocab divisor must be >= 0 (got %d)", m->vocab_div);
        return -1;
    }
    if (m->vocab_div == 0)
        m->vocab_div = 128;
    if ((double)m->f > 1e9) {
        snprintf(err, errlen, "model: ffn %d is out of range (at most 1e9)", m->f);
        return -1;
    }
    if (m->experts > 0 && m->moe_ffn == 0)
        m->moe_ffn = m->f;
    if (validate_gptoss(m, err, errlen) != 0)
        return -1;
    if (spec_params_estimate(m, 1) > SPEC_MAX_PARAMS) {
        snprintf(err, errlen, "model: about %.3g parameters, beyond the %.0e this model handles",
                 spec_params_estimate(m, 1), SPEC_MAX_PARAMS);
        return -1;
    }
    if (!m->name[0])
        strcpy(m->name, "custom");
    return 0;
}

double spec_params_estimate(const ModelSpec *m, int tp)
{
    double h = m->h, q = (double)m->a * spec_head_dim(m), f = m->f;
    double V = ((double)m->vocab + 128.0 * (tp > 0 ? tp : 1)) * h;
    double n = (double)m->L * h * (4.0 * q + 3.0 * f + 4.0) + 2.0 * V + (double)m->s * h;
    if (m->experts > 0 || m->attn == ATTN_MLA || m->mtp_layers > 0) {
        double E = m->experts > 0 ? m->experts : 0, ef = m->moe_ffn > 0 ? m->moe_ffn : f;
        double a = m->a, rope = m->qk_rope_dim, dqk = (double)m->qk_nope_dim + rope;
        double mla = m->attn == ATTN_MLA
                         ? h * ((double)m->q_lora_rank + m->kv_lora_rank + rope + a * m->v_head_dim) +
                               ((double)m->q_lora_rank + h) * a * dqk +
                               (double)m->kv_lora_rank * a * ((double)m->qk_nope_dim + m->v_head_dim) +
                               (double)m->q_lora_rank + m->kv_lora_rank
                         : 0;
        double layers = (double)m->L + (m->mtp_layers > 0 ? m->mtp_layers : 0);
        n += layers * (h * (3.0 * E * ef + 2.0 * E + 3.0 * (m->shared_ffn > 0 ? m->shared_ffn : 0) + 4.0 * q +
                            3.0 * f + 8.0) + E * ef * 2.0 + mla) +
             (m->mtp_layers > 0 ? m->mtp_layers : 0) * (2.0 * h * h + 6.0 * h);
    }
    return n;
}

int spec_head_dim(const ModelSpec *m) { return m->d_head > 0 ? m->d_head : m->h / m->a; }
int spec_q_width(const ModelSpec *m) { return m->a * spec_head_dim(m); }
int spec_kv_width(const ModelSpec *m) { return (m->g > 0 ? m->g : m->a) * spec_head_dim(m); }

int64_t spec_padded_vocab(const ModelSpec *m, int tp)
{
    int64_t div = (int64_t)(m->vocab_div > 0 ? m->vocab_div : 128) * (tp > 0 ? tp : 1);
    return ((int64_t)m->vocab + div - 1) / div * div;
}

/* ---- mixture of experts: which layers ---- */

bool spec_is_moe(const ModelSpec *m) { return m->experts > 0; }

bool spec_layer_is_moe(const ModelSpec *m, int layer)
{
    if (m->experts <= 0 || layer < 0 || m->L <= 0)
        return false;
    if (layer >= m->L)   /* an MTP module's layer: MoE when the last layer is (Megatron) */
        return layer < m->L + m->mtp_layers && spec_layer_is_moe(m, m->L - 1);
    int freq = m->moe_freq > 0 ? m->moe_freq : 1;
    return layer >= m->moe_first_dense && (layer - m->moe_first_dense) % freq == 0;
}

int spec_moe_layers(const ModelSpec *m)
{
    if (m->experts <= 0 || m->L <= 0)
        return 0;
    int freq = m->moe_freq > 0 ? m->moe_freq : 1, first = m->moe_first_dense > 0 ? m->moe_first_dense : 0;
    if (first >= m->L)
        return 0;
    return (m->L - first + freq - 1) / freq;
}

bool spec_layer_is_windowed(const ModelSpec *m, int layer)
{
    if (m->window <= 0 || layer < 0 || layer >= m->L)
        return false;
    return m->window_skip_freq <= 0 || (layer + 1) % m->window_skip_freq != 0;
}

int spec_windowed_layers(const ModelSpec *m)
{
    if (m->window <= 0 || m->L <= 0)
        return 0;
    return m->window_skip_freq > 0 ? m->L - m->L / m->window_skip_freq : m->L;
}

/* sum_{i<s} min(i + 1, k) with k = W + 1 keys: a ramp of k(k-1)/2 over the
 * first k-1 queries, then k for each of the other s-k+1 */
double spec_window_keys(const ModelSpec *m)
{
    double s = m->s, k = (double)m->window + 1.0;
    if (m->window <= 0 || k >= s)
        return (s + 1.0) / 2.0;
    return (k * (k - 1.0) / 2.0 + k * (s - k + 1.0)) / s;
}

/* MoE layers among the L layers and the MTP modules' layers. */
static int64_t moe_layers_all(const ModelSpec *m)
{
    int64_t n = spec_moe_layers(m);
    if (m->mtp_layers > 0 && spec_layer_is_moe(m, m->L - 1))
        n += m->mtp_layers;
    return n;
}

/* ---- per-layer counts ---- */

static int64_t mlp_matrix(const ModelSpec *m, int64_t f) { return (m->mlp == MLP_SWIGLU ? 3 : 2) * (int64_t)m->h * f; }

static int64_t mlp_bias(const ModelSpec *m, int64_t f)
{
    return m->bias ? (m->mlp == MLP_SWIGLU ? 2 * f : f) + m->h : 0;
}

/* Attention weight matrices of one layer. MLA (DeepSeek-V2/V3): q_a h x
 * q_lora and q_b q_lora x a(nope+rope) (or one h x a(nope+rope) without Q
 * compression), kv_a h x (kv_lora + rope) (the RoPE key is shared by all
 * heads), kv_b kv_lora x a(nope+v), output a*v x h. */
static int64_t attn_matrix(const ModelSpec *m)
{
    int64_t h = m->h;
    if (m->attn == ATTN_MLA) {
        int64_t a = m->a, rope = m->qk_rope_dim, dqk = (int64_t)m->qk_nope_dim + rope;
        int64_t ql = m->q_lora_rank, kvl = m->kv_lora_rank, v = m->v_head_dim;
        int64_t q = ql > 0 ? h * ql + ql * a * dqk : h * a * dqk;
        return q + h * (kvl + rope) + kvl * a * ((int64_t)m->qk_nope_dim + v) + a * v * h;
    }
    int64_t q = spec_q_width(m), kv = spec_kv_width(m);
    return h * q + 2 * h * kv + q * h;
}

static int64_t attn_bias(const ModelSpec *m)
{
    if (!m->bias || m->attn == ATTN_MLA)
        return 0;
    return (int64_t)spec_q_width(m) + 2 * (int64_t)spec_kv_width(m) + m->h;
}

/* MLA's norms on the compressed q (when compressed) and kv. */
static int64_t latent_norms(const ModelSpec *m)
{
    if (m->attn != ATTN_MLA)
        return 0;
    int64_t k = m->norm == NORM_LAYERNORM ? 2 : 1;
    return k * ((int64_t)(m->q_lora_rank > 0 ? m->q_lora_rank : 0) + m->kv_lora_rank);
}

int64_t spec_sink_params(const ModelSpec *m) { return m->sinks ? m->a : 0; }

int64_t spec_attn_params(const ModelSpec *m)
{
    return attn_matrix(m) + attn_bias(m) + latent_norms(m) + spec_sink_params(m);
}

int64_t spec_dense_mlp_params(const ModelSpec *m) { return mlp_matrix(m, m->f) + mlp_bias(m, m->f); }

int64_t spec_expert_params(const ModelSpec *m)
{
    if (m->experts <= 0)
        return 0;
    int64_t f = m->moe_ffn > 0 ? m->moe_ffn : m->f;
    return mlp_matrix(m, f) + mlp_bias(m, f);
}

int64_t spec_router_params(const ModelSpec *m)
{
    if (m->experts <= 0)
        return 0;
    return (int64_t)m->h * m->experts + (m->bias ? m->experts : 0);
}

int64_t spec_shared_expert_params(const ModelSpec *m)
{
    if (m->experts <= 0 || m->shared_ffn <= 0)
        return 0;
    return mlp_matrix(m, m->shared_ffn) + mlp_bias(m, m->shared_ffn);
}

int64_t spec_moe_mlp_params(const ModelSpec *m)
{
    return (int64_t)m->experts * spec_expert_params(m) + spec_router_params(m) + spec_shared_expert_params(m);
}

int64_t spec_layer_matrix_params(const ModelSpec *m) { return attn_matrix(m) + mlp_matrix(m, m->f); }

int64_t spec_layer_bias_params(const ModelSpec *m)
{
    if (!m->bias)
        return 0;
    int64_t q = spec_q_width(m), kv = spec_kv_width(m), f = m->f, h = m->h;
    return (q + 2 * kv) + h + (m->mlp == MLP_SWIGLU ? 2 * f : f) + h;
}

int64_t spec_norm_params(const ModelSpec *m) { return (m->norm == NORM_LAYERNORM ? 2 : 1) * (int64_t)m->h; }
int64_t spec_layer_norm_params(const ModelSpec *m) { return 2 * spec_norm_params(m) + latent_norms(m); }

int64_t spec_layer_params(const ModelSpec *m)
{
    return spec_layer_matrix_params(m) + spec_layer_bias_params(m) + spec_layer_norm_params(m) + spec_sink_params(m);
}

int64_t spec_moe_layer_params(const ModelSpec *m)
{
    return spec_attn_params(m) + spec_moe_mlp_params(m) + 2 * spec_norm_params(m);
}

/* DeepSeek-V3 §2.2: each module has two norms (of the previous depth's
 * hidden state and of the embedding), the projection 2h -> h and one
 * transformer layer; embedding and output head are shared with the main
 * model. Megatron's MTP block adds a final norm: 3 norms in all. */
int64_t spec_mtp_params(const ModelSpec *m)
{
    if (m->mtp_layers <= 0)
        return 0;
    int64_t layer = spec_layer_is_moe(m, m->L) ? spec_moe_layer_params(m) : spec_layer_params(m);
    return (int64_t)m->mtp_layers * (3 * spec_norm_params(m) + 2 * (int64_t)m->h * m->h + layer);
}

int64_t spec_mtp_params_active(const ModelSpec *m)
{
    int64_t n = spec_mtp_params(m);
    if (n > 0 && spec_layer_is_moe(m, m->L))
        n -= (int64_t)m->mtp_layers * (m->experts - m->topk) * spec_expert_params(m);
    return n;
}

int64_t spec_params(const ModelSpec *m, int tp, ParamConvention conv)
{
    if (conv == PARAMS_MEGATRON && (m->bias || m->sinks) && (spec_is_moe(m) || m->mtp_layers > 0)) {
        ModelSpec c = *m;   /* Megatron's estimator has no biases, nor sinks */
        c.bias = c.sinks = false;
        return spec_params(&c, tp, conv);
    }
    int64_t V = spec_padded_vocab(m, tp), h = m->h;
    int64_t per_layer = spec_layer_matrix_params(m) + spec_layer_norm_params(m);
    if (conv == PARAMS_EXACT)
        per_layer += spec_layer_bias_params(m) + spec_sink_params(m);
    int64_t nmoe = spec_moe_layers(m);
    int64_t n = (m->L - nmoe) * per_layer + spec_norm_params(m) + V * h;
    if (nmoe > 0)
        n += nmoe * spec_moe_layer_params(m);
    n += spec_mtp_params(m);
    if (!m->tied)
        n += V * h;
    if (conv == PARAMS_EXACT && m->pos == POS_LEARNED)
        n += (int64_t)m->s * h;
    return n;
}

int64_t spec_params_active(const ModelSpec *m, int tp, ParamConvention conv)
{
    int64_t n = spec_params(m, tp, conv);
    if (!spec_is_moe(m))
        return n;
    ModelSpec c = *m;
    if (conv == PARAMS_MEGATRON)
        c.bias = c.sinks = false;
    return n - (int64_t)(m->experts - m->topk) * spec_expert_params(&c) * moe_layers_all(m);
}

double spec_layer_gemm_flops_fwd(const ModelSpec *m)
{
    return 2.0 * (double)spec_layer_matrix_params(m);
}

double spec_attn_gemm_flops_fwd(const ModelSpec *m) { return 2.0 * (double)attn_matrix(m); }

double spec_mlp_flops_fwd(const ModelSpec *m, bool moe_layer)
{
    if (!moe_layer || m->experts <= 0)
        return 2.0 * (double)mlp_matrix(m, m->f);
    int64_t f = m->moe_ffn > 0 ? m->moe_ffn : m->f;
    return 2.0 * ((double)m->topk * mlp_matrix(m, f) + (m->shared_ffn > 0 ? (double)mlp_matrix(m, m->shared_ffn) : 0) +
                  (double)m->h * m->experts);
}

/* QK^T and AV: 2 * s * a * d_qk and 2 * s * a * d_v per token over the full
 * square. A windowed layer's query meets W+1 keys (Megatron counts that
 * many), or the band's exact mean under `causal`; the L layers' mean. */
double spec_layer_attn_flops_fwd(const ModelSpec *m, bool causal)
{
    double per_key = m->attn == ATTN_MLA ? 2.0 * m->a * ((double)m->qk_nope_dim + m->qk_rope_dim + m->v_head_dim)
                                         : 4.0 * (double)spec_q_width(m);
    double full = per_key * (double)m->s * (causal ? 0.5 : 1.0);
    int nw = spec_windowed_layers(m);
    if (nw == 0 || m->window + 1 >= m->s)
        return full;
    double win = per_key * (causal ? spec_window_keys(m) : (double)m->window + 1.0);
    return ((m->L - nw) * full + nw * win) / m->L;
}

double spec_logits_flops_fwd(const ModelSpec *m, int tp)
{
    return 2.0 * (double)m->h * (double)spec_padded_vocab(m, tp);
}

/* Megatron-LM's num_floating_point_operations (megatron/training/
 * training.py, transformer_flops, at NVIDIA/Megatron-LM d98e8a6, 2026-08-22)
 * per token, forward only, for MoE, MLA and MTP shapes: every layer (MTP
 * layers included) its attention projections and core, a dense layer its
 * MLP, an MoE layer topk routed experts + the shared expert (no router
 * term); MLA counts its two latent norms as 2 FLOPs an element; each MTP
 * module adds its 3 norms and the 2h -> h projection, and one more LM head. */
static double megatron_flops_fwd(const ModelSpec *m, int tp, bool causal)
{
    double h = m->h, mtp = m->mtp_layers > 0 ? m->mtp_layers : 0;
    double layers = (double)m->L + mtp, nmoe = (double)moe_layers_all(m), ndense = layers - nmoe;
    double mla_norms = m->attn == ATTN_MLA ? 2.0 * ((m->q_lora_rank > 0 ? m->q_lora_rank : 0) + (double)m->kv_lora_rank) : 0;
    double attn = spec_attn_gemm_flops_fwd(m) + mla_norms + spec_layer_attn_flops_fwd(m, causal);
    double moe_mlp = 0;
    if (m->experts > 0) {
        int64_t f = m->moe_ffn > 0 ? m->moe_ffn : m->f;
        moe_mlp = 2.0 * ((double)m->topk * mlp_matrix(m, f) +
                         (m->shared_ffn > 0 ? (double)mlp_matrix(m, m->shared_ffn) : 0));
    }
    return layers * attn + ndense * spec_mlp_flops_fwd(m, false) + nmoe * moe_mlp +
           mtp * 2.0 * (3.0 * h + 2.0 * h * h) + (1.0 + mtp) * spec_logits_flops_fwd(m, tp);
}

static bool beyond_dense(const ModelSpec *m)
{
    return m->experts > 0 || m->attn == ATTN_MLA || m->mtp_layers > 0;
}

double spec_flops_per_token(const ModelSpec *m, int tp, FlopConvention conv)
{
    double L = m->L;
    switch (conv) {
    case FLOPS_6N:
        return 6.0 * (double)spec_params_active(m, tp, PARAMS_MEGATRON);
    case FLOPS_PALM:
        if (beyond_dense(m))   /* 12 L H Q T with the attention's own q/k and v widths */
            return 6.0 * (double)spec_params_active(m, tp, PARAMS_MEGATRON) +
                   3.0 * (L + (m->mtp_layers > 0 ? m->mtp_layers : 0)) * spec_layer_attn_flops_fwd(m, false);
        return 6.0 * (double)spec_params(m, tp, PARAMS_MEGATRON) + 12.0 * L * spec_q_width(m) * (double)m->s;
    case FLOPS_CAUSAL:
    case FLOPS_FULL_ATTN:
    default: {
        bool causal = conv == FLOPS_CAUSAL;
        if (beyond_dense(m))
            return 3.0 * megatron_flops_fwd(m, tp, causal);
        return 3.0 * (L * (spec_layer_gemm_flops_fwd(m) + spec_layer_attn_flops_fwd(m, causal))
                      + spec_logits_flops_fwd(m, tp));
    }
    }
}

/* The L layers' extra forward (MTP modules are not recomputed here); the
 * router's GEMM is recomputed with its MoE layer. */
double spec_recompute_flops_per_token(const ModelSpec *m, Recompute r, bool causal)
{
    double nmoe = spec_moe_layers(m), ndense = m->L - nmoe;
    switch (r) {
    case RECOMPUTE_FULL: {
        double f = ndense * (spec_layer_gemm_flops_fwd(m) + spec_layer_attn_flops_fwd(m, causal));
        if (nmoe > 0)
            f += nmoe * (spec_attn_gemm_flops_fwd(m) + spec_mlp_flops_fwd(m, true) + spec_layer_attn_flops_fwd(m, causal));
        return f;
    }
    case RECOMPUTE_SELECTIVE:
        return m->L * spec_layer_attn_flops_fwd(m, causal);
    default:
        return 0;
    }
}

/* ---- --moe-layer-freq ---- */

#define FREQ_MAX 100000

static int freq_expr(const char **ps, int *v, int *n, int depth, char *err, int errlen);

static void skip_ws(const char **p)
{
    while (isspace((unsigned char)**p))
        (*p)++;
}

/* One term of the list expression, "[a,b,...]" or "(expr)", optionally
 * "*N"; appends its layers to v. */
static int freq_term(const char **ps, int *v, int *n, int depth, char *err, int errlen)
{
    const char *p = *ps;
    skip_ws(&p);
    int start = *n;
    if (*p == '(') {
        p++;
        if (depth > 8 || freq_expr(&p, v, n, depth + 1, err, errlen) != 0) {
            if (depth > 8)
                snprintf(err, errlen, "--moe-layer-freq: parentheses nested too deep");
            return -1;
        }
        skip_ws(&p);
        if (*p != ')') {
            snprintf(err, errlen, "--moe-layer-freq: expected \")\" at \"%.20s\"", p);
            return -1;
        }
        p++;
    } else if (*p == '[') {
        p++;
        for (;;) {
            skip_ws(&p);
            if (*p == ']')
                break;
            if ((*p != '0' && *p != '1') || (p[1] && strchr("0123456789.", p[1]))) {
                snprintf(err, errlen, "--moe-layer-freq: list entries are 0 (dense) or 1 (MoE), got \"%.20s\"", p);
                return -1;
            }
            if (*n >= FREQ_MAX) {
                snprintf(err, errlen, "--moe-layer-freq: list longer than %d layers", FREQ_MAX);
                return -1;
            }
            v[(*n)++] = *p - '0';
            p++;
            skip_ws(&p);
            if (*p == ',')
                p++;
            else if (*p != ']') {
                snprintf(err, errlen, "--moe-layer-freq: expected \",\" or \"]\" at \"%.20s\"", p);
                return -1;
            }
        }
        p++;
    } else {
        snprintf(err, errlen, "--moe-layer-freq: expected N or a list such as [0]*3+[1]*58 at \"%.20s\"", p);
        return -1;
    }
    skip_ws(&p);
    if (*p == '*') {
        char *end;
        long rep = strtol(p + 1, &end, 10);
        long len = *n - start;
        if (end == p + 1 || rep < 0 || (len > 0 && rep > (FREQ_MAX - start) / len)) {
            snprintf(err, errlen, "--moe-layer-freq: bad repeat count at \"%.20s\" (at most %d layers)", p, FREQ_MAX);
            return -1;
        }
        for (long r = 1; len > 0 && r < rep; r++)   /* an empty list repeats to nothing, at once */
            for (long i = 0; i < len; i++)
                v[(*n)++] = v[start + i];
        if (rep == 0)
            *n = start;
        p = end;
    }
    *ps = p;
    return 0;
}

static int freq_expr(const char **ps, int *v, int *n, int depth, char *err, int errlen)
{
    for (;;) {
        if (freq_term(ps, v, n, depth, err, errlen) != 0)
            return -1;
        skip_ws(ps);
        if (**ps != '+')
            return 0;
        (*ps)++;
    }
}

int spec_parse_moe_freq(const char *s, int *freq, int *first_dense, int *len, char *err, int errlen)
{
    while (s && isspace((unsigned char)*s))
        s++;
    if (!s || !*s) {
        snprintf(err, errlen, "--moe-layer-freq: expected N or a list such as [0]*3+[1]*58, got nothing");
        return -1;
    }
    if (isdigit((unsigned char)*s)) {
        char *end;
        long f = strtol(s, &end, 10);
        while (isspace((unsigned char)*end))
            end++;
        if (*end || f < 1 || f > FREQ_MAX) {
            snprintf(err, errlen, "--moe-layer-freq: expected a whole number from 1 to %d or a list, got \"%.40s\"",
                     FREQ_MAX, s);
            return -1;
        }
        *freq = (int)f;
        *first_dense = 0;
        *len = 0;
        return 0;
    }
    int *v = malloc(sizeof(int) * FREQ_MAX);
    if (!v) {
        snprintf(err, errlen, "--moe-layer-freq: out of memory");
        return -1;
    }
    int n = 0, rc = -1;
    const char *p = s;
    if (freq_expr(&p, v, &n, 0, err, errlen) != 0)
        goto out;
    skip_ws(&p);
    if (*p) {
        snprintf(err, errlen, "--moe-layer-freq: unexpected \"%.20s\" after the list", p);
        goto out;
    }
    int k = 0;
    while (k < n && v[k] == 0)
        k++;
    if (k == n) {
        snprintf(err, errlen, "--moe-layer-freq: the list has no MoE layer (no 1)");
        goto out;
    }
    int f = 0;
    for (int i = k + 1; i < n && !f; i++)
        if (v[i])
            f = i - k;
    if (!f)
        f = n - k;
    for (int i = k; i < n; i++)
        if (v[i] != ((i - k) % f == 0)) {
            snprintf(err, errlen, "--moe-layer-freq: layer %d breaks the pattern; supported lists are K dense layers "
                     "then one MoE layer every F layers, such as [0]*3+[1]*58 or [0]+[1,0]*10", i);
            goto out;
        }
    *freq = f;
    *first_dense = k;
    *len = n;
    rc = 0;
out:
    free(v);
    return rc;
}

void spec_format_moe_freq(const ModelSpec *m, char *buf, int len)
{
    int f = m->moe_freq > 0 ? m->moe_freq : 1, k = m->moe_first_dense;
    if (k <= 0) {
        snprintf(buf, len, "%d", f);
        return;
    }
    int rest = m->L - k;
    if (f == 1) {
        snprintf(buf, len, "[0]*%d+[1]*%d", k, rest);
        return;
    }
    char period[64];
    int n = snprintf(period, sizeof period, "[1");
    for (int i = 1; i < f && n < (int)sizeof period - 3; i++)
        n += snprintf(period + n, sizeof period - n, ",0");
    snprintf(period + n, sizeof period - n, "]");
    if (f > 30) {   /* a long period: the explicit form would not fit a field */
        snprintf(buf, len, "[0]*%d+([1]+[0]*%d)*%d", k, f - 1, rest / f);
        return;
    }
    n = snprintf(buf, len, "[0]*%d+%s*%d", k, period, rest / f);
    if (rest % f && n >= 0 && n < len) {
        int r = rest % f;
        n += snprintf(buf + n, len - n, "+[1");
        for (int i = 1; i < r && n < len; i++)
            n += snprintf(buf + n, len - n, ",0");
        if (n < len)
            snprintf(buf + n, len - n, "]");
    }
}

/* ---- names ---- */

static const char *const mlp_names[] = {"gelu", "swiglu"};
static const char *const norm_names[] = {"layernorm", "rmsnorm"};
static const char *const pos_names[] = {"learned", "rope"};
static const char *const attn_names[] = {"mha", "mla"};
static const char *const flops_names[] = {"full", "causal", "6n", "palm"};
static const char *const rc_names[] = {"none", "selective", "full"};
_Static_assert(sizeof mlp_names / sizeof *mlp_names == MLP_COUNT, "mlp names");
_Static_assert(sizeof norm_names / sizeof *norm_names == NORM_COUNT, "norm names");
_Static_assert(sizeof pos_names / sizeof *pos_names == POS_COUNT, "position names");
_Static_assert(sizeof attn_names / sizeof *attn_names == ATTN_COUNT, "attention names");
_Static_assert(sizeof flops_names / sizeof *flops_names == FLOPS_CONVENTION_COUNT, "flop names");
_Static_assert(sizeof rc_names / sizeof *rc_names == RECOMPUTE_COUNT, "recompute names");

static int parse_name(const char *s, const char *const *names, int n)
{
    for (int i = 0; i < n; i++)
        if (strcasecmp(s, names[i]) == 0)
            return i;
    return -1;
}

const char *spec_mlp_name(MlpKind k) { return mlp_names[k]; }
const char *spec_norm_name(NormKind k) { return norm_names[k]; }
const char *spec_pos_name(PosKind k) { return pos_names[k]; }
const char *spec_attn_name(AttnKind k) { return k >= 0 && k < ATTN_COUNT ? attn_names[k] : "?"; }
const char *spec_flops_name(FlopConvention c) { return flops_names[c]; }
const char *spec_recompute_name(Recompute r) { return rc_names[r]; }

int spec_parse_mlp(const char *s, MlpKind *out)
{
    int i = parse_name(s, mlp_names, MLP_COUNT);
    if (i < 0)
        return -1;
    *out = (MlpKind)i;
    return 0;
}

int spec_parse_norm(const char *s, NormKind *out)
{
    int i = parse_name(s, norm_names, NORM_COUNT);
    if (i < 0)
        return -1;
    *out = (NormKind)i;
    return 0;
}

int spec_parse_pos(const char *s, PosKind *out)
{
    int i = parse_name(s, pos_names, POS_COUNT);
    if (i < 0)
        return -1;
    *out = (PosKind)i;
    return 0;
}

int spec_parse_attn(const char *s, AttnKind *out)
{
    int i = parse_name(s, attn_names, ATTN_COUNT);
    if (i < 0)
        return -1;
    *out = (AttnKind)i;
    return 0;
}

int spec_parse_flops(const char *s, FlopConvention *out)
{
    int i = parse_name(s, flops_names, FLOPS_CONVENTION_COUNT);
    if (i < 0)
        return -1;
    *out = (FlopConvention)i;
    return 0;
}

int spec_parse_recompute(const char *s, Recompute *out)
{
    int i = parse_name(s, rc_names, RECOMPUTE_COUNT);
    if (i < 0)
        return -1;
    *out = (Recompute)i;
    return 0;
}
