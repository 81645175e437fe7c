/* cuplan.c — see cuplan.h. */
#include "cuplan.h"

int cuplan_buckets(const ParamSet *ps, CuBucket *out)
{
    int k = 0;
    for (int l = 0; l < ps->nlayers; l++) {
        size_t n = 0;
        for (int id = 0; id < P_LAYER_COUNT; id++)   // the routed experts are in their own region
            if (ps->layer_off[l][id] != PARAM_NONE && !param_is_expert(id))
                n += ps->layer_len[l][id];
        out[k++] = (CuBucket){ps->layer_off[l][P_LN1W], n, l};
    }
    if (ps->n > ps->layers_end)
        out[k++] = (CuBucket){ps->layers_end, ps->n - ps->layers_end, -1};
    return k;
}

void cuplan_shard(size_t n, int dp, int dp_rank, int zero1, size_t *n_alloc, size_t *opt_n, size_t *off)
{
    if (!zero1 || dp <= 1) {
        *n_alloc = *opt_n = n;
        *off = 0;
        return;
    }
    *n_alloc = (n + dp - 1) / dp * dp;
    *opt_n = *n_alloc / dp;
    *off = (size_t)dp_rank * *opt_n;
}

void cuplan_expert_shard(const ParamSet *ps, int edp, int edp_rank, int xzero, size_t *n, size_t *off)
{
    xzero = xzero && edp > 1;
    *n = xzero ? ps->x_alloc / edp : ps->x_alloc;
    *off = ps->x_off + (xzero ? (size_t)edp_rank * *n : 0);
}

int cuplan_units(const ParamSet *ps, int D, CuUnit *out, size_t *shard)
{
    size_t at = 0;
    D = D < 1 ? 1 : D;
    int n = 0;
    for (int l = 0; l <= ps->nlayers; l++) {   // the layers, then the stage unit
        size_t start = l < ps->nlayers ? ps->layer_off[l][P_LN1W] : ps->layers_end, len = 0;
        if (l < ps->nlayers) {
            for (int id = 0; id < P_LAYER_COUNT; id++)
                if (ps->layer_off[l][id] != PARAM_NONE && !param_is_expert(id))
                    len += ps->layer_len[l][id];
        } else if (ps->n > ps->layers_end) {
            len = ps->n - ps->layers_end;
        } else {
            break;
        }
        size_t pad = (len + D - 1) / D * D;
        out[n++] = (CuUnit){start, len, pad, pad / D, at, l < ps->nlayers ? l : -1};
        at += pad / D;
    }
    *shard = at;
    return n;
}

void cuplan_unit_slice(const CuUnit *u, int k, size_t *first, size_t *len)
{
    size_t lo = (size_t)k * u->slice, hi = lo + u->slice;
    hi = hi < u->n ? hi : u->n;
    *first = u->start + lo;
    *len = hi > lo ? hi - lo : 0;
}

int cuplan_cp_pos(int T, int cp, int r, int t)
{
    if (cp <= 1)
        return t;
    int c = T / (2 * cp);
    return t < c ? r * c + t : (2 * cp - 1 - r) * c + (t - c);
}

void cuplan_recompute(int full, int sel, int nchunks, const int *chunk_layers, int *rc)
{
    int i = 0;
    for (int c = 0; c < nchunks; c++) {
        int f = full / nchunks + (c < full % nchunks);
        int s = sel / nchunks + (c < sel % nchunks);
        for (int j = 0; j < chunk_layers[c]; j++, i++)
            rc[i] = j < f ? 2 : j < f + s ? 1 : 0;
    }
}

static int link_exists(int pp, int wrap, int l) { return pp > 1 && l >= 0 && l < pp && (l < pp - 1 || wrap); }

int cuplan_link_ends(int pp, int wrap, int id, int *sender, int *receiver)
{
    int l = id % pp, fwd = id < pp;
    if (id < 0 || id >= 2 * pp || !link_exists(pp, wrap, l))
        return -1;
    *sender = fwd ? l : (l + 1) % pp;
    *receiver = fwd ? (l + 1) % pp : l;
    return 0;
}

void cuplan_links(int pp, int stage, int wrap, CuLink out[CL_COUNT])
{
    int prev = (stage - 1 + pp) % pp;
    int ids[CL_COUNT] = {
        [CL_FWD_OUT] = stage,        // stage -> stage + 1
        [CL_FWD_IN] = prev,          // stage − 1 -> stage
        [CL_BWD_OUT] = pp + prev,    // stage -> stage − 1
        [CL_BWD_IN] = pp + stage,    // stage + 1 -> stage
    };
    for (int r = 0; r < CL_COUNT; r++) {
        int s, d;
        if (cuplan_link_ends(pp, wrap, ids[r], &s, &d) != 0) {
            out[r] = (CuLink){-1, -1, 0};
            continue;
        }
        out[r] = (CuLink){ids[r], s == stage ? d : s, s == stage};
    }
}

int cuplan_ring(int pp, int vp, int nmb)
{
    if (pp <= 1)
        return 0;
    int ring = 2 * pp * vp + 2;
    return ring < 2 * nmb * vp ? ring : 2 * nmb * vp;
}

int cuplan_sp_rows(int N, int tp, int tp_rank, int sp, int *first, int *nl)
{
    if (!sp || tp <= 1) {
        *first = 0, *nl = N;
        return 0;
    }
    if (N % tp)
        return -1;
    *nl = N / tp;
    *first = tp_rank * *nl;
    return 0;
}

/* append tensor (off, len) to the ranges, merging with the last when adjacent */
static int add_range(CuBucket *out, int k, size_t off, size_t len, int layer)
{
    if (off == PARAM_NONE || len == PARAM_NONE || !len)
        return k;
    if (k && out[k - 1].start + out[k - 1].n == off) {
        out[k - 1].n += len;
        return k;
    }
    out[k] = (CuBucket){off, len, layer};
    return k + 1;
}

int cuplan_sp_sync(const ParamSet *ps, int layer, CuBucket *out)
{
    int k = 0;
    if (layer >= 0) {
        for (int id = 0; id < P_LAYER_COUNT; id++)
            if (param_desc[id].split == SPLIT_REP)
                k = add_range(out, k, ps->layer_off[layer][id], ps->layer_len[layer][id], layer);
        return k;
    }
    k = add_range(out, k, ps->off[P_LNFW], ps->len[P_LNFW], -1);
    return add_range(out, k, ps->off[P_LNFB], ps->len[P_LNFB], -1);
}

int cuplan_expert_local(int ep, int etp, int etp_rank, int ep_rank, int edp_rank)
{
    return etp_rank + etp * (ep_rank + ep * edp_rank);
}
