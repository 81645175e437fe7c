/* spec.c — parameter counts and FLOPs of a dense decoder (docs/COSTMODEL.md §1–2). */
#include "spec.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

int spec_validate(ModelSpec *m, char *err, int errlen)
{
    if (m->L <= 0 || m->h <= 0 || m->a <= 0 || m->s <= 0 || m->vocab <= 0) {
        snprintf(err, errlen, "model: layers, hidden, heads, seq and vocab must be positive "
                 "(got layers=%d hidden=%d heads=%d seq=%d vocab=%d)", m->L, m->h, m->a, m->s, m->vocab);
        return -1;
    }
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
    return (double)m->L * h * (4.0 * q + 3.0 * f + 4.0) + 2.0 * V + (double)m->s * h;
}

int spec_head_dim(const ModelSpec *m) { return m->d_head > 0 ? m->d_head : m->h / m->a; }
int spec_q_width(const ModelSpec *m) { return m->a * spec_head_dim(m); }
int spec_kv_width(const ModelSpec *m) { return (m->g > 0 ? m->g : m->a) * spec_head_dim(m); }

int64_t spec_padded_vocab(const ModelSpec *m, int tp)
{
    int64_t div = (int64_t)(m->vocab_div > 0 ? m->vocab_div : 128) * (tp > 0 ? tp : 1);
    return ((int64_t)m->vocab + div - 1) / div * div;
}

int64_t spec_layer_matrix_params(const ModelSpec *m)
{
    int64_t h = m->h, q = spec_q_width(m), kv = spec_kv_width(m), f = m->f;
    int64_t attn = h * q + 2 * h * kv + q * h;
    int64_t mlp = (m->mlp == MLP_SWIGLU ? 3 : 2) * h * f;
    return attn + mlp;
}

int64_t spec_layer_bias_params(const ModelSpec *m)
{
    if (!m->bias)
        return 0;
    int64_t q = spec_q_width(m), kv = spec_kv_width(m), f = m->f, h = m->h;
    return (q + 2 * kv) + h + (m->mlp == MLP_SWIGLU ? 2 * f : f) + h;
}

int64_t spec_norm_params(const ModelSpec *m) { return (m->norm == NORM_LAYERNORM ? 2 : 1) * (int64_t)m->h; }
int64_t spec_layer_norm_params(const ModelSpec *m) { return 2 * spec_norm_params(m); }

int64_t spec_layer_params(const ModelSpec *m)
{
    return spec_layer_matrix_params(m) + spec_layer_bias_params(m) + spec_layer_norm_params(m);
}

int64_t spec_params(const ModelSpec *m, int tp, ParamConvention conv)
{
    int64_t V = spec_padded_vocab(m, tp), h = m->h;
    int64_t per_layer = spec_layer_matrix_params(m) + spec_layer_norm_params(m);
    if (conv == PARAMS_EXACT)
        per_layer += spec_layer_bias_params(m);
    int64_t n = m->L * per_layer + spec_norm_params(m) + V * h;
    if (!m->tied)
        n += V * h;
    if (conv == PARAMS_EXACT && m->pos == POS_LEARNED)
        n += (int64_t)m->s * h;
    return n;
}

double spec_layer_gemm_flops_fwd(const ModelSpec *m)
{
    return 2.0 * (double)spec_layer_matrix_params(m);
}

double spec_layer_attn_flops_fwd(const ModelSpec *m, bool causal)
{
    /* QK^T and AV: 2 * s * q each per token over the full square. */
    double full = 4.0 * (double)m->s * spec_q_width(m);
    return causal ? full / 2 : full;
}

double spec_logits_flops_fwd(const ModelSpec *m, int tp)
{
    return 2.0 * (double)m->h * (double)spec_padded_vocab(m, tp);
}

double spec_flops_per_token(const ModelSpec *m, int tp, FlopConvention conv)
{
    double L = m->L;
    switch (conv) {
    case FLOPS_6N:
        return 6.0 * (double)spec_params(m, tp, PARAMS_MEGATRON);
    case FLOPS_PALM:
        return 6.0 * (double)spec_params(m, tp, PARAMS_MEGATRON) + 12.0 * L * spec_q_width(m) * (double)m->s;
    case FLOPS_CAUSAL:
    case FLOPS_FULL_ATTN:
    default: {
        bool causal = conv == FLOPS_CAUSAL;
        return 3.0 * (L * (spec_layer_gemm_flops_fwd(m) + spec_layer_attn_flops_fwd(m, causal))
                      + spec_logits_flops_fwd(m, tp));
    }
    }
}

double spec_recompute_flops_per_token(const ModelSpec *m, Recompute r, bool causal)
{
    switch (r) {
    case RECOMPUTE_FULL:
        return m->L * (spec_layer_gemm_flops_fwd(m) + spec_layer_attn_flops_fwd(m, causal));
    case RECOMPUTE_SELECTIVE:
        return m->L * spec_layer_attn_flops_fwd(m, causal);
    default:
        return 0;
    }
}

/* ---- names ---- */

static const char *const mlp_names[] = {"gelu", "swiglu"};
static const char *const norm_names[] = {"layernorm", "rmsnorm"};
static const char *const pos_names[] = {"learned", "rope"};
static const char *const flops_names[] = {"full", "causal", "6n", "palm"};
static const char *const rc_names[] = {"none", "selective", "full"};
_Static_assert(sizeof mlp_names / sizeof *mlp_names == MLP_COUNT, "mlp names");
_Static_assert(sizeof norm_names / sizeof *norm_names == NORM_COUNT, "norm names");
_Static_assert(sizeof pos_names / sizeof *pos_names == POS_COUNT, "position names");
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
