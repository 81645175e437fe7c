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
    [P_WTE] = {"wte", SPLIT_VOCAB, INIT_NORMAL},
    [P_WPE] = {"wpe", SPLIT_REP, INIT_NORMAL},
    [P_LNFW] = {"lnf.w", SPLIT_REP, INIT_ONE},
    [P_LNFB] = {"lnf.b", SPLIT_REP, INIT_ZERO},
    [P_HEAD] = {"head", SPLIT_VOCAB, INIT_NORMAL},
};
_Static_assert(sizeof param_desc / sizeof param_desc[0] == P_COUNT, "one descriptor per tensor");

int param_shape(ParamId id, const ModelSpec *m, int tp, int64_t parts[3], int64_t *cols)
{
    int64_t h = m->h, q = spec_q_width(m), kv = spec_kv_width(m), f = m->f;
    int64_t V = spec_padded_vocab(m, tp);
    int ln_bias = m->norm == NORM_LAYERNORM, swi = m->mlp == MLP_SWIGLU;
    parts[0] = parts[1] = parts[2] = 0;
    *cols = 1;
    switch (id) {
    case P_LN1W: case P_LN2W: case P_LNFW: parts[0] = h; return 1;
    case P_LN1B: case P_LN2B: case P_LNFB: parts[0] = h; return ln_bias;
    case P_QKVW: parts[0] = q, parts[1] = kv, parts[2] = kv, *cols = h; return 1;
    case P_QKVB: parts[0] = q, parts[1] = kv, parts[2] = kv; return m->bias;
    case P_PROJW: parts[0] = h, *cols = q; return 1;
    case P_PROJB: case P_FC2B: parts[0] = h; return m->bias;
    case P_FC1W: parts[0] = f, parts[1] = swi ? f : 0, *cols = h; return 1;
    case P_FC1B: parts[0] = f, parts[1] = swi ? f : 0; return m->bias;
    case P_FC2W: parts[0] = h, *cols = f; return 1;
    case P_WTE: case P_HEAD: parts[0] = V, *cols = h; return 1;
    case P_WPE: parts[0] = m->s, *cols = h; return m->pos == POS_LEARNED;
    default: return 0;
    }
}

/* Floats of the local shard. */
static size_t local_len(ParamId id, const ModelSpec *m, int tp)
{
    int64_t parts[3], cols;
    if (!param_shape(id, m, tp, parts, &cols))
        return PARAM_NONE;
    int64_t rows = parts[0] + parts[1] + parts[2];
    if (param_desc[id].split == SPLIT_REP)
        return (size_t)(rows * cols);
    return (size_t)(rows * cols / tp);
}

int stagemap_init(StageMap *sm, const ModelSpec *m, const Layout *lo, int stage, int tp_rank,
                  char *err, int errlen)
{
    memset(sm, 0, sizeof *sm);
    sm->stage = stage, sm->nstages = lo->pp, sm->vp = lo->vp;
    sm->tp = lo->tp, sm->tp_rank = tp_rank;
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
    (void)m;
    return 0;
}

void params_layout(ParamSet *ps, const ModelSpec *m, const StageMap *sm, int pad_to)
{
    memset(ps, 0, sizeof *ps);
    ps->nlayers = sm->nlayers;
    ps->layer_off = calloc(sm->nlayers ? sm->nlayers : 1, sizeof *ps->layer_off);
    ps->layer_len = calloc(sm->nlayers ? sm->nlayers : 1, sizeof *ps->layer_len);
    size_t n = 0;
    for (int i = 0; i < sm->nlayers; i++)
        for (int id = 0; id < P_LAYER_COUNT; id++) {
            size_t len = local_len(id, m, sm->tp);
            ps->layer_len[i][id] = len;
            ps->layer_off[i][id] = len == PARAM_NONE ? PARAM_NONE : n;
            if (len != PARAM_NONE)
                n += len;
        }
    ps->layers_end = n;
    int first = sm->stage == 0, last = sm->stage == sm->nstages - 1;
    for (int id = P_LAYER_COUNT; id < P_COUNT; id++) {
        int held = id == P_WTE || id == P_WPE ? first
                 : id == P_HEAD ? last && (!m->tied || sm->nstages > 1)
                 : last;
        size_t len = held ? local_len(id, m, sm->tp) : PARAM_NONE;
        ps->len[id] = len;
        ps->off[id] = len == PARAM_NONE ? PARAM_NONE : n;
        if (len != PARAM_NONE)
            n += len;
    }
    ps->n = n;
    ps->n_alloc = pad_to > 1 ? (n + pad_to - 1) / pad_to * pad_to : n;
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

/* Global row of local row r under the split rule. */
static int64_t global_row(SplitRule split, const int64_t parts[3], int tp, int tp_rank, int64_t r)
{
    if (split != SPLIT_COL && split != SPLIT_VOCAB)
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
    param_shape(id, m, sm->tp, parts, &cols);
    const ParamDesc *d = &param_desc[id];
    int64_t rows = parts[0] + parts[1] + parts[2];
    int64_t lrows = d->split == SPLIT_COL || d->split == SPLIT_VOCAB ? rows / sm->tp : rows;
    int64_t lcols = d->split == SPLIT_ROW ? cols / sm->tp : cols;
    float std = d->init == INIT_NORMAL_SCALED ? 0.02f / sqrtf(2.0f * m->L) : 0.02f;
    /* a tied head starts as a copy of the embedding */
    int hid = id == P_HEAD && m->tied ? P_WTE : id;
    /* every value is a function of its coordinates: rows in parallel give the
     * same bits (a 1.3B model is ~1 minute on one core) */
    #pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < lrows; r++) {
        int64_t gr = global_row(d->split, parts, sm->tp, sm->tp_rank, r);
        for (int64_t c = 0; c < lcols; c++) {
            int64_t gc = d->split == SPLIT_ROW ? sm->tp_rank * lcols + c : c;
            float v = d->init == INIT_ONE ? 1.0f : d->init == INIT_ZERO ? 0.0f
                    : std * normal_at(seed, hid, layer, (uint64_t)(gr * cols + gc));
            w[r * lcols + c] = v;
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
    ps->layer_off = NULL;
    ps->layer_len = NULL;
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
