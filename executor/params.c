/* params.c — see params.h. */
#include "params.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const ParamDesc param_desc[P_COUNT] = {
    [P_LN1W] = {"ln1.w", SPLIT_REP, INIT_ONE},
    [P_LN1B] = {"ln1.b", SPLIT_REP, INIT_ZERO},
    [P_QKVW] = {"qkv.w", SPLIT_COL, INIT_NORMAL},
    [P_QKVB] = {"qkv.b", SPLIT_COL, INIT_ZERO},
    [P_PROJW] = {"proj.w", SPLIT_ROW, INIT_NORMAL_SCALED},
    [P_PROJB] = {"proj.b", SPLIT_REP, INIT_ZERO},
    [P_LN2W] = {"ln2.w", SPLIT_REP, INIT_ONE},
    [P_LN2B] = {"ln2.b", SPLIT_REP, INIT_ZERO},
    [P_FC1W] = {"fc1.w", SPLIT_COL, INIT_NORMAL},
    [P_FC1B] = {"fc1.b", SPLIT_COL, INIT_ZERO},
    [P_FC2W] = {"fc2.w", SPLIT_ROW, INIT_NORMAL_SCALED},
    [P_FC2B] = {"fc2.b", SPLIT_REP, INIT_ZERO},
    [P_ROUTW] = {"router.w", SPLIT_REP, INIT_NORMAL},
    [P_EFC1W] = {"efc1.w", SPLIT_ECOL, INIT_NORMAL},
    [P_EFC2W] = {"efc2.w", SPLIT_EROW, INIT_NORMAL_SCALED},
    [P_QAW] = {"q_a.w", SPLIT_REP, INIT_NORMAL},
    [P_QANW] = {"q_a.norm", SPLIT_REP, INIT_ONE},
    [P_QBW] = {"q_b.w", SPLIT_COL, INIT_NORMAL},
    [P_KVAW] = {"kv_a.w", SPLIT_REP, INIT_NORMAL},
    [P_KVANW] = {"kv_a.norm", SPLIT_REP, INIT_ONE},
    [P_KVBW] = {"kv_b.w", SPLIT_COL, INIT_NORMAL},
    [P_MTPEN] = {"mtp.enorm", SPLIT_REP, INIT_ONE},
    [P_MTPHN] = {"mtp.hnorm", SPLIT_REP, INIT_ONE},
    [P_MTPEH] = {"mtp.eh.w", SPLIT_COL, INIT_NORMAL},
    [P_MTPFN] = {"mtp.norm", SPLIT_REP, INIT_ONE},
    [P_SINK] = {"attn.sinks", SPLIT_COL, INIT_ZERO},
    [P_WTE] = {"wte", SPLIT_VOCAB, INIT_NORMAL},
    [P_WPE] = {"wpe", SPLIT_REP, INIT_NORMAL},
    [P_LNFW] = {"lnf.w", SPLIT_REP, INIT_ONE},
    [P_LNFB] = {"lnf.b", SPLIT_REP, INIT_ZERO},
    [P_HEAD] = {"head", SPLIT_VOCAB, INIT_NORMAL},
};
_Static_assert(sizeof param_desc / sizeof param_desc[0] == P_COUNT, "one descriptor per tensor");

int param_shape_at(ParamId id, const ModelSpec *m, int tp, bool moe, int64_t parts[3], int64_t *cols)
{
    int64_t h = m->h, q = spec_q_width(m), kv = spec_kv_width(m);
    int64_t f = moe ? m->shared_ffn : m->f, fe = m->moe_ffn > 0 ? m->moe_ffn : m->f;
    int64_t V = spec_padded_vocab(m, tp);
    int ln_bias = m->norm == NORM_LAYERNORM, swi = m->mlp == MLP_SWIGLU;
    int mla = m->attn == ATTN_MLA;
    int64_t a = m->a, qr = m->q_lora_rank, kr = m->kv_lora_rank, nope = m->qk_nope_dim, rope = m->qk_rope_dim;
    parts[0] = parts[1] = parts[2] = 0;
    *cols = 1;
    switch (id) {
    case P_QKVW: case P_QKVB: if (mla) return 0; break;
    case P_PROJW: if (mla) { parts[0] = h, *cols = a * m->v_head_dim; return 1; } break;
    case P_PROJB: if (mla) return 0; break;
    case P_QAW: parts[0] = qr, *cols = h; return mla && qr > 0;
    case P_QANW: parts[0] = qr; return mla && qr > 0;
    case P_QBW: parts[0] = a * (nope + rope), *cols = qr > 0 ? qr : h; return mla;
    case P_KVAW: parts[0] = kr + rope, *cols = h; return mla;
    case P_KVANW: parts[0] = kr; return mla;
    case P_KVBW: parts[0] = a * (nope + m->v_head_dim), *cols = kr; return mla;
    case P_MTPEN: case P_MTPHN: case P_MTPFN: parts[0] = h; return m->mtp_layers > 0;
    case P_MTPEH: parts[0] = h, *cols = 2 * h; return m->mtp_layers > 0;
    case P_SINK: parts[0] = a; return m->sinks;
    default: break;
    }
    switch (id) {
    case P_LN1W: case P_LN2W: case P_LNFW: parts[0] = h; return 1;
    case P_LN1B: case P_LN2B: case P_LNFB: parts[0] = h; return ln_bias;
    case P_QKVW: parts[0] = q, parts[1] = kv, parts[2] = kv, *cols = h; return 1;
    case P_QKVB: parts[0] = q, parts[1] = kv, parts[2] = kv; return m->bias;
    case P_PROJW: parts[0] = h, *cols = q; return 1;
    case P_PROJB: parts[0] = h; return m->bias;
    case P_FC2B: parts[0] = h; return m->bias && f > 0;
    case P_FC1W: parts[0] = f, parts[1] = swi ? f : 0, *cols = h; return f > 0;
    case P_FC1B: parts[0] = f, parts[1] = swi ? f : 0; return m->bias && f > 0;
    case P_FC2W: parts[0] = h, *cols = f; return f > 0;
    case P_ROUTW: parts[0] = m->experts, *cols = h; return moe;
    case P_EFC1W: parts[0] = fe, parts[1] = swi ? fe : 0, *cols = h; return moe;
    case P_EFC2W: parts[0] = h, *cols = fe; return moe;
    case P_WTE: case P_HEAD: parts[0] = V, *cols = h; return 1;
    case P_WPE: parts[0] = m->s, *cols = h; return m->pos == POS_LEARNED;
    default: return 0;
    }
}

int param_shape(ParamId id, const ModelSpec *m, int tp, int64_t parts[3], int64_t *cols)
{
    return param_shape_at(id, m, tp, false, parts, cols);
}

static int local_experts(const ModelSpec *m, const StageMap *sm) { return m->experts / (sm->ep > 0 ? sm->ep : 1); }
static int sm_etp(const StageMap *sm) { return sm->etp > 0 ? sm->etp : 1; }

/* Floats of the local shard (a routed-expert tensor: all local experts). */
static size_t local_len(ParamId id, const ModelSpec *m, const StageMap *sm, bool moe)
{
    int64_t parts[3], cols;
    if (!param_shape_at(id, m, sm->tp, moe, parts, &cols))
        return PARAM_NONE;
    int64_t rows = parts[0] + parts[1] + parts[2];
    SplitRule sp = param_desc[id].split;
    if (sp == SPLIT_REP)
        return (size_t)(rows * cols);
    if (sp == SPLIT_ECOL || sp == SPLIT_EROW)
        return (size_t)(local_experts(m, sm) * (rows * cols / sm_etp(sm)));
    return (size_t)(rows * cols / sm->tp);
}

int stagemap_init(StageMap *sm, const ModelSpec *m, const Layout *lo, int stage, int tp_rank,
                  char *err, int errlen)
{
    memset(sm, 0, sizeof *sm);
    sm->stage = stage, sm->nstages = lo->pp, sm->vp = lo->vp;
    sm->tp = lo->tp, sm->tp_rank = tp_rank;
    sm->ep = lo->ep > 0 ? lo->ep : 1, sm->etp = layout_etp(lo), sm->expert_pad = 1;
    sm->nmtp = stage == lo->pp - 1 ? m->mtp_layers : 0;
    if (lo->vp > 16) {
        snprintf(err, errlen, "interleaving vp %d: the executor supports at most 16 chunks", lo->vp);
        return -1;
    }
    for (int s = 0; s < lo->pp; s++) {
        if (lo->layers[s] % lo->vp != 0) {
            snprintf(err, errlen, "stage %d has %d layers, not a multiple of vp %d", s, lo->layers[s], lo->vp);
            return -1;
        }
    }
    if (lo->pp_layout[0]) {   /* Megatron's layout string: run it only where it is what runs here */
        PipeLayout p;
        char why[200];
        if (layout_pp_parse(lo->pp_layout, lo->pp, m, &p, why, sizeof why) != 0) {
            snprintf(err, errlen, "plan: layout.pipeline_layout \"%s\": %s", lo->pp_layout, why);
            return -1;
        }
        for (int i = 0; i < p.n; i++)
            if (p.t[i] * lo->vp != lo->layers[i % lo->pp]) {
                snprintf(err, errlen, "plan: layout.pipeline_layout \"%s\" gives stage %d chunk %d %d layers; the "
                         "executor splits every stage into vp equal chunks (%d); plan it with --target ultraplan",
                         lo->pp_layout, i % lo->pp, i / lo->pp, p.t[i], lo->layers[i % lo->pp] / lo->vp);
                return -1;
            }
        if (p.mtp_entry >= 0 && p.mtp_entry % lo->pp != lo->pp - 1) {
            snprintf(err, errlen, "plan: layout.pipeline_layout \"%s\" puts the MTP layers on stage %d; the executor "
                     "runs them on the last stage", lo->pp_layout, p.mtp_entry % lo->pp);
            return -1;
        }
    }
    /* virtual stage c·pp + s holds layers[s]/vp layers, in that order */
    int start = 0;
    for (int c = 0; c < lo->vp; c++)
        for (int s = 0; s < lo->pp; s++) {
            int n = lo->layers[s] / lo->vp;
            if (s == stage) {
                sm->first_layer[c] = start;
                sm->nchunk_layers[c] = n;
                sm->nlayers += n;
            }
            start += n;
        }
    return 0;
}

void params_layout(ParamSet *ps, const ModelSpec *m, const StageMap *sm, int pad_to)
{
    memset(ps, 0, sizeof *ps);
    int nl = ps->nlayers = sm->nlayers + sm->nmtp;
    ps->layer_off = calloc(nl ? nl : 1, sizeof *ps->layer_off);
    ps->layer_len = calloc(nl ? nl : 1, sizeof *ps->layer_len);
    ps->glayer = calloc(nl ? nl : 1, sizeof *ps->glayer);
    for (int c = 0, i = 0; c < sm->vp; c++)
        for (int j = 0; j < sm->nchunk_layers[c]; j++, i++)
            ps->glayer[i] = sm->first_layer[c] + j;
    for (int k = 0; k < sm->nmtp; k++)
        ps->glayer[sm->nlayers + k] = m->L + k;
    size_t n = 0;
    for (int i = 0; i < nl; i++) {
        bool moe = spec_layer_is_moe(m, ps->glayer[i]), mtp = ps->glayer[i] >= m->L;
        for (int id = 0; id < P_LAYER_COUNT; id++) {
            bool mtp_only = id >= P_MTPEN && id <= P_MTPFN;
            size_t len = mtp_only && !mtp ? PARAM_NONE : local_len(id, m, sm, moe);
            ps->layer_len[i][id] = len;
            ps->layer_off[i][id] = PARAM_NONE;
            if (len != PARAM_NONE && !param_is_expert(id)) {
                ps->layer_off[i][id] = n;
                n += len;
            }
        }
    }
    ps->layers_end = n;
    int first = sm->stage == 0, last = sm->stage == sm->nstages - 1;
    for (int id = P_LAYER_COUNT; id < P_COUNT; id++) {
        /* MTP on an untied model's last stage of several: a copy of the embedding */
        int held = id == P_WTE ? first || (last && sm->nmtp > 0 && !m->tied)
                 : id == P_WPE ? first
                 : id == P_HEAD ? last && (!m->tied || sm->nstages > 1)
                 : last;
        size_t len = held ? local_len(id, m, sm, false) : PARAM_NONE;
        ps->len[id] = len;
        ps->off[id] = len == PARAM_NONE ? PARAM_NONE : n;
        if (len != PARAM_NONE)
            n += len;
    }
    ps->n = n;
    ps->dense_alloc = pad_to > 1 ? (n + pad_to - 1) / pad_to * pad_to : n;
    /* the routed experts after the (padded) dense region */
    size_t x = ps->x_off = ps->dense_alloc;
    for (int i = 0; i < nl; i++)
        for (int id = 0; id < P_LAYER_COUNT; id++)
            if (param_is_expert(id) && ps->layer_len[i][id] != PARAM_NONE) {
                ps->layer_off[i][id] = x;
                x += ps->layer_len[i][id];
            }
    ps->x_n = x - ps->x_off;
    int xp = sm->expert_pad > 1 ? sm->expert_pad : 1;
    ps->x_alloc = (ps->x_n + xp - 1) / xp * xp;
    ps->n_alloc = ps->dense_alloc + ps->x_alloc;
}

/* A normal deviate from a counter: splitmix64 twice, then Box-Muller. */
static uint64_t mix(uint64_t x)
{
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

static float normal_at(uint64_t seed, int id, int layer, uint64_t idx)
{
    uint64_t k = mix(seed ^ mix(((uint64_t)id << 48) ^ ((uint64_t)(layer + 1) << 32)) ^ mix(idx));
    uint64_t a = mix(k), b = mix(k ^ 0x5555555555555555ull);
    double u1 = ((a >> 11) + 1.0) / 9007199254740993.0, u2 = (b >> 11) / 9007199254740992.0;
    return (float)(sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2));
}

/* The tensor's key in the initial values: the ids before the MLA tensors
 * were added, so a model without them starts from the same values. */
static int seed_key(ParamId id)
{
    int added = P_LAYER_COUNT - P_QAW;
    return id < P_QAW ? (int)id : id >= P_LAYER_COUNT ? (int)id - added : (int)id + 64;
}

/* Global row of local row r under the split rule. */
static int64_t global_row(SplitRule split, const int64_t parts[3], int tp, int tp_rank, int64_t r)
{
    if (split != SPLIT_COL && split != SPLIT_VOCAB && split != SPLIT_ECOL)
        return r;
    int64_t base = 0;
    for (int p = 0; p < 3; p++) {
        int64_t lp = parts[p] / tp;
        if (r < lp)
            return base + tp_rank * lp + r;
        r -= lp;
        base += parts[p];
    }
    return -1;
}

static void init_tensor(float *w, ParamId id, int layer, const ModelSpec *m, const StageMap *sm,
                        uint64_t seed)
{
    int64_t parts[3], cols;
    bool moe = layer >= 0 && spec_layer_is_moe(m, layer);
    param_shape_at(id, m, sm->tp, moe, parts, &cols);
    const ParamDesc *d = &param_desc[id];
    int64_t rows = parts[0] + parts[1] + parts[2];
    bool ex = d->split == SPLIT_ECOL || d->split == SPLIT_EROW;
    int sp = ex ? sm_etp(sm) : sm->tp, sr = ex ? sm->etp_rank : sm->tp_rank;
    SplitRule split = d->split == SPLIT_ECOL ? SPLIT_COL : d->split == SPLIT_EROW ? SPLIT_ROW : d->split;
    int64_t lrows = split == SPLIT_COL || split == SPLIT_VOCAB ? rows / sp : rows;
    int64_t lcols = split == SPLIT_ROW ? cols / sp : cols;
    int nx = ex ? local_experts(m, sm) : 1;
    float std = d->init == INIT_NORMAL_SCALED ? 0.02f / sqrtf(2.0f * m->L) : 0.02f;
    /* a tied head starts as a copy of the embedding */
    ParamId hid = id == P_HEAD && m->tied ? P_WTE : id;
    for (int x = 0; x < nx; x++) {
        /* a routed expert's values: its global index in the high bits */
        uint64_t gx = ex ? (uint64_t)(sm->ep_rank * nx + x) << 44 : 0;
        float *wx = w + (size_t)x * lrows * lcols;
        /* every value is a function of its coordinates: rows in parallel give the
         * same bits (a 1.3B model is ~1 minute on one core) */
        #pragma omp parallel for schedule(static)
        for (int64_t r = 0; r < lrows; r++) {
            int64_t gr = global_row(split, parts, sp, sr, r);
            for (int64_t c = 0; c < lcols; c++) {
                int64_t gc = split == SPLIT_ROW ? sr * lcols + c : c;
                float v = d->init == INIT_ONE ? 1.0f : d->init == INIT_ZERO ? 0.0f
                        : std * normal_at(seed, seed_key(hid), layer, gx ^ (uint64_t)(gr * cols + gc));
                wx[r * lcols + c] = v;
            }
        }
    }
}

void params_init(ParamSet *ps, const ModelSpec *m, const StageMap *sm, uint64_t seed)
{
    memset(ps->w, 0, ps->n_alloc * sizeof *ps->w);
    int i = 0;
    for (int c = 0; c < sm->vp; c++)
        for (int j = 0; j < sm->nchunk_layers[c]; j++, i++)
            for (int id = 0; id < P_LAYER_COUNT; id++)
                if (ps->layer_off[i][id] != PARAM_NONE)
                    init_tensor(ps->w + ps->layer_off[i][id], id, sm->first_layer[c] + j, m, sm, seed);
    for (; i < ps->nlayers; i++)   /* the MTP modules' layers */
        for (int id = 0; id < P_LAYER_COUNT; id++)
            if (ps->layer_off[i][id] != PARAM_NONE)
                init_tensor(ps->w + ps->layer_off[i][id], id, ps->glayer[i], m, sm, seed);
    for (int id = P_LAYER_COUNT; id < P_COUNT; id++)
        if (ps->off[id] != PARAM_NONE)
            init_tensor(ps->w + ps->off[id], id, -1, m, sm, seed);
}

void params_free(ParamSet *ps)
{
    if (!ps)
        return;
    free(ps->layer_off);
    free(ps->layer_len);
    free(ps->glayer);
    ps->layer_off = NULL;
    ps->layer_len = NULL;
    ps->glayer = NULL;
}

float *params_layer(const ParamSet *ps, float *slab, int i, ParamId id)
{
    size_t o = ps->layer_off[i][id];
    return o == PARAM_NONE ? NULL : slab + o;
}

float *params_stage(const ParamSet *ps, float *slab, ParamId id)
{
    size_t o = ps->off[id];
    return o == PARAM_NONE ? NULL : slab + o;
}
