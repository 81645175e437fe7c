/* layout.c — defaults, validation and small queries on a Layout, and
 * whether (and how) Megatron-LM expresses one (layout.h says which
 * Megatron-LM commit that was checked against). Nothing here knows
 * Megatron's other flags: planner/export.c writes those. */
#include "layout.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* The index of s among n names (case-insensitive), or -1: what every enum's
 * layout_parse_* reads before its aliases. */
static int name_index(const char *const *names, int n, const char *s)
{
    for (int i = 0; i < n; i++)
        if (strcasecmp(s, names[i]) == 0)
            return i;
    return -1;
}

void layout_default(Layout *lo)
{
    memset(lo, 0, sizeof *lo);
    lo->dp = lo->tp = lo->pp = lo->vp = lo->cp = 1;
    lo->ep = 1;
    lo->etp = 0;
    lo->sp = true;
    lo->mbs = 1;
    lo->gbs = 0;
    lo->opt = OPT_ZERO0;
    lo->prec = PREC_BF16;
    lo->grad_fp32 = true;
    lo->flash = true;
    lo->overlap_grad = true;
    lo->overlap_param = true;
    lo->tp_comm_overlap = false;
    lo->torch_compile = true;
    lo->flops = FLOPS_FULL_ATTN;
    lo->target = TARGET_MEGATRON;
}

int layout_gpus(const Layout *lo) { return lo->dp * lo->tp * lo->pp * lo->cp; }

int layout_etp(const Layout *lo) { return lo->etp > 0 ? lo->etp : lo->tp; }

int layout_edp(const Layout *lo)
{
    long long d = (long long)layout_etp(lo) * (lo->ep > 0 ? lo->ep : 1);
    long long n = (long long)lo->tp * lo->cp * lo->dp;
    return d > 0 && n % d == 0 ? (int)(n / d) : 0;
}

double layout_moe_imbalance(const Layout *lo)
{
    return lo->moe_imbalance > 0 ? lo->moe_imbalance : LAYOUT_MOE_IMBALANCE_DEFAULT;
}

double layout_moe_rows(const ModelSpec *m, const Layout *lo)
{
    if (!spec_is_moe(m))
        return 0;
    double load = m->capacity_factor > 0 ? m->capacity_factor : layout_moe_imbalance(lo);
    return load * layout_mb_tokens(m, lo) * m->topk * layout_etp(lo) / lo->tp;
}

int layout_microbatches(const Layout *lo)
{
    int d = lo->dp * lo->mbs;
    return d > 0 ? lo->gbs / d : 0;
}

int layout_dp_group(const Layout *lo) { return lo->dp * lo->cp; }

double layout_mb_tokens(const ModelSpec *m, const Layout *lo) { return (double)lo->mbs * m->s / lo->cp; }

double layout_sp_share(const Layout *lo) { return lo->sp ? 1.0 / lo->tp : 1.0; }

void layout_set_recompute(Layout *lo, Recompute r)
{
    for (int s = 0; s < lo->pp && s < LAYOUT_MAX_PP; s++) {
        lo->full_rc[s] = r == RECOMPUTE_FULL ? lo->layers[s] : 0;
        lo->sel_rc[s] = r == RECOMPUTE_SELECTIVE ? lo->layers[s] : 0;
    }
}

Recompute layout_stage_recompute(const Layout *lo, int s)
{
    if (lo->full_rc[s] > 0 && lo->full_rc[s] >= lo->sel_rc[s])
        return RECOMPUTE_FULL;
    if (lo->sel_rc[s] > 0)
        return RECOMPUTE_SELECTIVE;
    return RECOMPUTE_NONE;
}

void layout_rule_split(int L, int pp, int e, int l, int *layers)
{
    int per = (L + e + l) / (pp > 0 ? pp : 1);
    for (int s = 0; s < pp; s++)
        layers[s] = per - (s == 0 ? e : 0) - (s == pp - 1 ? l : 0);
}

int layout_interleave_rule(int L, int pp, int vp, int *e, int *l)
{
    static const int rules[4][2] = {{0, 0}, {1, 1}, {1, 0}, {0, 1}};   /* NVIDIA's recipes count both */
    int v = vp > 1 ? vp : 1;
    for (int i = 0; i < 4; i++) {
        int V = L + rules[i][0] + rules[i][1];
        if (pp > 0 && V % pp == 0 && (V / pp) % v == 0 && V / pp - rules[i][0] - rules[i][1] >= 1) {
            *e = rules[i][0], *l = rules[i][1];
            return 0;
        }
    }
    return -1;
}

int layout_chunk_layers(const Layout *lo, int s, int c)
{
    int v = lo->vp > 1 ? lo->vp : 1, n = lo->layers[s];
    if (lo->pp_layout[0]) {
        PipeLayout p;
        char err[8];
        if (layout_pp_parse(lo->pp_layout, lo->pp, NULL, &p, err, sizeof err) != 0 || s < 0 || s >= p.pp || c < 0 ||
            c >= p.vp)
            return -1;
        return p.t[c * p.pp + s];
    }
    if (n % v == 0)
        return n / v;
    /* the embedding in chunk 0 of the first stage, the loss in the last chunk of the last */
    int per = n / v + 1, short0 = s == 0 && (n + 1) % v == 0, shortl = s == lo->pp - 1 && (n + 1) % v == 0;
    if (lo->pp == 1 && (n + 2) % v == 0)
        return c == 0 || c == v - 1 ? (n + 2) / v - 1 : (n + 2) / v;
    if (!short0 && !shortl)
        return -1;
    per = (n + 1) / v;
    if (short0)
        return c == 0 ? per - 1 : per;
    return c == v - 1 ? per - 1 : per;
}

#define FAIL(...) do { snprintf(err, errlen, __VA_ARGS__); return -1; } while (0)

/* A repeat count after '*' at text[*i]: digits, 1..100000; -1 when none. */
static long ppl_count(const char *text, int *i)
{
    long n = 0;
    int j = *i;
    while (text[j] >= '0' && text[j] <= '9' && n <= 100000)
        n = n * 10 + (text[j++] - '0');
    if (j == *i || n < 1 || n > 100000)
        return -1;
    *i = j;
    return n;
}

/* One layer character (or '|') counted into the entries. */
static int ppl_put(PipeLayout *o, char c, int pos, char *err, int errlen)
{
    if (c == '|') {
        if (++o->n >= LAYOUT_MAX_CHUNKS)
            FAIL("pipeline layout: more than %d stages (pp x vp entries)", LAYOUT_MAX_CHUNKS);
        return 0;
    }
    int e = o->n;
    switch (c) {
    case 't':
        if (o->mtp_entry >= 0)
            FAIL("pipeline layout: decoder layer 't' at position %d after an MTP layer 'm' (Megatron places every "
                 "decoder layer before the MTP layers)", pos);
        if (o->loss >= 0)
            FAIL("pipeline layout: 't' at position %d after the loss 'L' (L must be the last layer)", pos);
        if (o->t[e] >= 30000)
            FAIL("pipeline layout: more than 30000 layers in one stage");
        o->t[e]++;
        return 0;
    case 'm':
        if (o->mtp_entry >= 0 && o->mtp_entry != e)
            FAIL("pipeline layout: MTP layers 'm' in two stages (position %d): Megatron keeps all of them in one", pos);
        if (o->loss >= 0)
            FAIL("pipeline layout: 'm' at position %d after the loss 'L' (L must be the last layer)", pos);
        o->mtp_entry = e;
        o->mtp[e]++;
        return 0;
    case 'E':
        if (o->embed >= 0 || e != 0 || o->t[0] || o->mtp[0])
            FAIL("pipeline layout: embedding 'E' at position %d: it must come once, first", pos);
        o->embed = 0;
        return 0;
    case 'L':
        if (o->loss >= 0)
            FAIL("pipeline layout: loss 'L' at position %d a second time (it must come once, last)", pos);
        o->loss = e;
        return 0;
    default:
        FAIL("pipeline layout: bad character '%c' at position %d (expected E, t, m, L, '|', '(...)*N' or 'x*N')",
             c, pos);
    }
}

int layout_pp_parse(const char *text, int pp, const ModelSpec *m, PipeLayout *o, char *err, int errlen)
{
    memset(o, 0, sizeof *o);
    o->embed = o->loss = o->mtp_entry = -1;
    if (!text || !text[0])
        FAIL("pipeline layout: empty");
    if (pp < 1 || pp > LAYOUT_MAX_PP)
        FAIL("pipeline layout: pp %d is out of range", pp);
    long budget = 4000000;   /* characters expanded, against "(t*100000|)*100000" */
    for (int i = 0; text[i];) {
        int pos = i + 1;
        if (text[i] == ',') {
            i++;
            continue;
        }
        if (text[i] == ')')
            FAIL("pipeline layout: ')' at position %d without its '('", pos);
        if (text[i] == '*')
            FAIL("pipeline layout: '*' at position %d repeats nothing", pos);
        if (text[i] == '(') {
            int b = i + 1, e = b;
            while (text[e] && text[e] != ')') {
                if (text[e] == '(')
                    FAIL("pipeline layout: '(' at position %d inside a group (groups do not nest)", e + 1);
                e++;
            }
            if (!text[e])
                FAIL("pipeline layout: '(' at position %d is never closed", pos);
            if (e == b)
                FAIL("pipeline layout: empty group '()' at position %d", pos);
            int k = e + 1;
            if (text[k] != '*')
                FAIL("pipeline layout: the group at position %d needs a repeat count '*N' after ')'", pos);
            k++;
            long n = ppl_count(text, &k);
            if (n < 0)
                FAIL("pipeline layout: '*' at position %d: expected a count 1..100000", e + 2);
            for (long r = 0; r < n; r++)
                for (int j = b; j < e;) {
                    int jp = j + 1;
                    char c = text[j++];
                    if (c == ',')
                        continue;
                    if (c == '*')
                        FAIL("pipeline layout: '*' at position %d repeats nothing", jp);
                    long cn = 1;
                    if (text[j] == '*') {
                        j++;
                        cn = ppl_count(text, &j);
                        if (cn < 0)
                            FAIL("pipeline layout: '*' at position %d: expected a count 1..100000", jp + 1);
                    }
                    if ((budget -= cn) < 0)
                        FAIL("pipeline layout: expands to more than 4000000 layers and boundaries");
                    for (long q = 0; q < cn; q++)
                        if (ppl_put(o, c, jp, err, errlen) != 0)
                            return -1;
                }
            i = k;
            continue;
        }
        char c = text[i++];
        long cn = 1;
        if (text[i] == '*') {
            i++;
            cn = ppl_count(text, &i);
            if (cn < 0)
                FAIL("pipeline layout: '*' at position %d: expected a count 1..100000", pos + 1);
        }
        if ((budget -= cn) < 0)
            FAIL("pipeline layout: expands to more than 4000000 layers and boundaries");
        for (long q = 0; q < cn; q++)
            if (ppl_put(o, c, pos, err, errlen) != 0)
                return -1;
    }
    o->n++;
    if (o->embed != 0)
        FAIL("pipeline layout: no embedding 'E' (it must be the first layer)");
    if (o->loss != o->n - 1)
        FAIL("pipeline layout: %s", o->loss < 0 ? "no loss 'L' (it must be the last layer)"
                                                : "the loss 'L' is not in the last entry (empty entries after "
                                                  "it: the cost model keeps the LM head on the last stage)");
    if (o->n % pp != 0)
        FAIL("pipeline layout: %d stages ('|'-separated entries) are not a multiple of pp %d", o->n, pp);
    o->pp = pp;
    o->vp = o->n / pp;
    if (o->mtp_entry >= 0 && o->mtp_entry / pp != o->vp - 1)
        FAIL("pipeline layout: the MTP layers are in chunk %d of stage %d: Megatron keeps them in the last chunk "
             "(%d) of their stage", o->mtp_entry / pp, o->mtp_entry % pp, o->vp - 1);
    if (m) {
        int L = 0, M = 0;
        for (int e = 0; e < o->n; e++)
            L += o->t[e], M += o->mtp[e];
        if (L != m->L)
            FAIL("pipeline layout: %d decoder layers 't', the model has %d", L, m->L);
        if (M != m->mtp_layers)
            FAIL("pipeline layout: %d MTP layers 'm', the model has %d (--mtp-layers)", M, m->mtp_layers);
    }
    return 0;
}

int layout_mtp_stage(const Layout *lo)
{
    PipeLayout p;
    char err[8];
    if (lo->pp_layout[0] && layout_pp_parse(lo->pp_layout, lo->pp, NULL, &p, err, sizeof err) == 0 &&
        p.mtp_entry >= 0)
        return p.mtp_entry % lo->pp;
    return lo->pp - 1;
}

static int check_sizes(const Layout *lo, const ModelSpec *m, char *err, int errlen)
{
    if (lo->dp < 1 || lo->tp < 1 || lo->pp < 1 || lo->vp < 1 || lo->cp < 1)
        FAIL("layout: dp, tp, pp, vp and cp must be >= 1 (got dp=%d tp=%d pp=%d vp=%d cp=%d)",
             lo->dp, lo->tp, lo->pp, lo->vp, lo->cp);
    if (lo->mbs < 1)
        FAIL("layout: micro-batch must be >= 1 (got %d)", lo->mbs);
    if (lo->ep < 1 || lo->etp < 0)
        FAIL("layout: ep must be >= 1 and etp >= 1 (0 = tp) (got ep=%d etp=%d)", lo->ep, lo->etp);
    if (lo->gbs < 1)
        FAIL("layout: global batch must be >= 1 (got %d)", lo->gbs);
    if ((double)lo->dp * lo->tp * lo->pp * lo->cp > 1e8)
        FAIL("layout: dp*tp*pp*cp = %.0f GPUs is beyond any cluster", (double)lo->dp * lo->tp * lo->pp * lo->cp);
    if (lo->pp > LAYOUT_MAX_PP)
        FAIL("layout: pp %d exceeds the supported %d stages", lo->pp, LAYOUT_MAX_PP);
    if (spec_params_estimate(m, lo->tp) > SPEC_MAX_PARAMS)
        FAIL("layout: with the vocabulary padded for tp %d the model has about %.3g parameters, beyond %.0e",
             lo->tp, spec_params_estimate(m, lo->tp), SPEC_MAX_PARAMS);
    if (m->a % lo->tp != 0)
        FAIL("layout: tp %d does not divide heads %d", lo->tp, m->a);
    if (m->g % lo->tp != 0)
        FAIL("layout: tp %d does not divide kv-heads %d (Megatron needs whole KV groups per TP rank)",
             lo->tp, m->g);
    if (m->f % lo->tp != 0)
        FAIL("layout: tp %d does not divide ffn %d", lo->tp, m->f);
    if (!spec_is_moe(m) && (lo->ep > 1 || layout_etp(lo) != lo->tp))
        FAIL("layout: ep %d / etp %d need a mixture-of-experts model (this one is dense)", lo->ep, layout_etp(lo));
    if (spec_is_moe(m)) {
        int etp = layout_etp(lo);
        long long ranks = (long long)lo->tp * lo->cp * lo->dp;
        if (m->experts % lo->ep != 0)
            FAIL("layout: ep %d does not divide the %d experts", lo->ep, m->experts);
        if (ranks % ((long long)etp * lo->ep) != 0)
            FAIL("layout: etp*ep = %d*%d = %lld does not divide tp*cp*dp = %d*%d*%d = %lld (parallel folding: "
                 "expert layers use etp x ep x edp over the attention layers' ranks)",
                 etp, lo->ep, (long long)etp * lo->ep, lo->tp, lo->cp, lo->dp, ranks);
        int ef = m->moe_ffn > 0 ? m->moe_ffn : m->f;
        if (ef % etp != 0)
            FAIL("layout: etp %d does not divide moe-ffn %d", etp, ef);
        if (lo->moe_imbalance != 0 && !(lo->moe_imbalance >= 1.0 && lo->moe_imbalance <= 64.0))
            FAIL("layout: moe-imbalance %g is outside 1..64 (the busiest EP rank's routed tokens over the mean)",
                 lo->moe_imbalance);
        if (m->shared_ffn > 0 && m->shared_ffn % lo->tp != 0)
            FAIL("layout: tp %d does not divide shared-ffn %d", lo->tp, m->shared_ffn);
    }
    if (lo->cp > 1 && m->s % (2 * lo->cp) != 0)
        FAIL("layout: seq %d is not a multiple of 2*cp = %d (load-balanced context parallel)", m->s, 2 * lo->cp);
    if (lo->pp > m->L)
        FAIL("layout: pp %d is larger than the %d layers", lo->pp, m->L);
    if ((long long)lo->gbs % ((long long)lo->dp * lo->mbs) != 0)
        FAIL("layout: global batch %d is not a multiple of dp*mbs = %d*%d = %lld",
             lo->gbs, lo->dp, lo->mbs, (long long)lo->dp * lo->mbs);
    if (lo->vp > 1) {
        if (lo->pp < 2)
            FAIL("layout: interleaving (vp %d) needs pp >= 2", lo->vp);
        if (layout_microbatches(lo) % lo->pp != 0)
            FAIL("layout: interleaving needs micro-batches (%d) to be a multiple of pp %d",
                 layout_microbatches(lo), lo->pp);
    }
    if (lo->moe_dispatcher < 0 || lo->moe_dispatcher >= MOE_DISPATCH_COUNT)
        FAIL("layout: token dispatcher %d is none of alltoall, allgather, flex", (int)lo->moe_dispatcher);
    if (lo->opt == OPT_ZERO3 && lo->pp > 1)
        FAIL("layout: ZeRO-3 cannot combine with pp %d (DeepSpeed, Megatron and PyTorch's pipelines shard at most "
             "optimizer states and gradients beside pipeline parallelism: use --zero 1, --dist-opt or, under a "
             "stack that shards gradients there, --zero 2)", lo->pp);
    return 0;
}

static int check_stages(Layout *lo, const ModelSpec *m, char *err, int errlen)
{
    int sum = 0, given = 0;
    for (int s = 0; s < lo->pp; s++)
        given |= lo->layers[s] != 0;
    int v = lo->vp > 1 ? lo->vp : 1;
    bool rule = lo->split_embed || lo->split_loss;
    if (lo->pp_layout[0]) {
        /* Megatron's --pipeline-model-parallel-layout: the string sets vp and every stage's layers */
        if (rule || lo->first_layers || lo->last_layers)
            FAIL("layout: --pipeline-layout cannot combine with --decoder-first/last-pipeline-num-layers or "
                 "--account-for-embedding/loss-in-pipeline-split (Megatron-LM refuses the layout with the other "
                 "split flags)");
        PipeLayout p;
        char why[200];
        if (layout_pp_parse(lo->pp_layout, lo->pp, m, &p, why, sizeof why) != 0)
            FAIL("layout: \"%s\": %s", lo->pp_layout, why);
        if (lo->vp > 1 && lo->vp != p.vp)
            FAIL("layout: \"%s\" has %d entries, %d model chunks per stage at pp %d, but vp is %d", lo->pp_layout,
                 p.n, p.vp, lo->pp, lo->vp);
        if (p.vp > 1 && lo->pp < 2)
            FAIL("layout: \"%s\" interleaves %d chunks on pp 1 (interleaving needs pp >= 2)", lo->pp_layout, p.vp);
        if (p.vp > 1 && layout_microbatches(lo) % lo->pp != 0)
            FAIL("layout: interleaving needs micro-batches (%d) to be a multiple of pp %d",
                 layout_microbatches(lo), lo->pp);
        lo->vp = p.vp;
        v = p.vp;
        for (int s = 0; s < lo->pp; s++) {
            int n = 0;
            for (int c = 0; c < p.vp; c++)
                n += p.t[c * lo->pp + s];
            if (given && lo->layers[s] != n)   /* --stage-layers (or a plan file's) must agree */
                FAIL("layout: stage %d has %d layers in \"%s\" but %d in the stage split given", s, n,
                     lo->pp_layout, lo->layers[s]);
            lo->layers[s] = n;
            for (int c = 0; c < p.vp && lo->target != TARGET_MEGATRON; c++)
                if (p.t[c * lo->pp + s] * p.vp != n)
                    FAIL("layout: \"%s\" gives stage %d chunks of unequal layers: --target ultraplan's executor "
                         "splits every stage into vp equal chunks", lo->pp_layout, s);
        }
        given = 1;
    }
    if (rule && (lo->first_layers || lo->last_layers) && !given)
        FAIL("layout: --decoder-first/last-pipeline-num-layers cannot combine with "
             "--account-for-embedding/loss-in-pipeline-split (Megatron-LM refuses both at once)");
    if (!given && rule) {
        /* Megatron-LM: the embedding and/or the loss count as a layer; every
         * stage holds (L + e + l) / pp of them, in vp equal chunks */
        int e = lo->split_embed, l = lo->split_loss, V = m->L + e + l;
        if (V % lo->pp != 0 || (V / lo->pp) % v != 0)
            FAIL("layout: layers %d%s%s = %d are not a multiple of pp*vp = %d*%d "
                 "(--account-for-embedding/loss-in-pipeline-split)", m->L, e ? " + embedding" : "",
                 l ? " + loss" : "", V, lo->pp, v);
        layout_rule_split(m->L, lo->pp, e, l, lo->layers);
    } else if (!given && (lo->first_layers || lo->last_layers)) {
        /* Megatron-LM's --decoder-first/last-pipeline-num-layers: the middle stages share the rest evenly */
        int first = lo->first_layers, last = lo->last_layers;
        int mid = lo->pp - (first > 0) - (last > 0), rest = m->L - first - last;
        if (first < 0 || last < 0 || mid < 0 || rest < 0 || (mid > 0 && rest % mid) || (mid == 0 && rest) ||
            (mid > 0 && rest == 0))
            FAIL("layout: --decoder-first/last-pipeline-num-layers %d/%d do not split %d layers over %d stages "
                 "(the middle stages take the rest evenly)", first, last, m->L, lo->pp);
        if (v > 1 && (first % v || last % v || (mid > 0 && (rest / mid) % v)))
            FAIL("layout: with vp %d the first (%d), last (%d) and middle (%d) stages need layer counts that are "
                 "multiples of vp", v, first, last, mid > 0 ? rest / mid : 0);
        for (int s = 0; s < lo->pp; s++)
            lo->layers[s] = mid > 0 ? rest / mid : 0;
        if (first)
            lo->layers[0] = first;
        if (last)
            lo->layers[lo->pp - 1] = last;
    } else if (!given && v > 1 && m->L % ((long long)lo->pp * v) != 0 && lo->target == TARGET_MEGATRON) {
        /* interleaving with layers that do not divide pp*vp: the split Megatron-LM
         * makes when the embedding and/or loss count as layers, if one divides */
        int e, l;
        if (layout_interleave_rule(m->L, lo->pp, v, &e, &l) != 0)
            FAIL("layout: layers %d are not a multiple of pp*vp = %d*%d, nor with the embedding and/or the loss "
                 "counted as a layer (%d, %d: Megatron's --account-for-embedding/loss-in-pipeline-split)",
                 m->L, lo->pp, v, m->L + 1, m->L + 2);
        layout_rule_split(m->L, lo->pp, e, l, lo->layers);
    } else if (!given && v > 1 && m->L % ((long long)lo->pp * v) != 0) {
        FAIL("layout: layers %d are not a multiple of pp*vp = %d*%d (--target ultraplan: the executor splits every "
             "stage into vp equal chunks)", m->L, lo->pp, v);
    } else if (!given) {
        if (m->L % lo->pp != 0 && lo->vp == 1 && lo->target == TARGET_MEGATRON && lo->pp > 2) {
            /* Megatron-LM: equal middle stages (ceil(L/p) each, fewer when
             * the edges would be left empty), the rest split between the
             * first and the last stage, which carry embedding and LM head */
            int p = lo->pp, mid = (m->L + p - 1) / p;
            while (mid > 1 && m->L - (p - 2) * mid < 2)
                mid--;
            int rest = m->L - (p - 2) * mid;
            for (int s = 1; s < p - 1; s++)
                lo->layers[s] = mid;
            lo->layers[0] = rest / 2;
            lo->layers[p - 1] = rest - rest / 2;
        } else if (m->L % lo->pp != 0 && lo->vp == 1) {
            /* Uneven by default: spread the remainder over the middle-most
             * stages, keeping first and last (embedding, LM head) lighter. */
            int base = m->L / lo->pp, rem = m->L % lo->pp;
            for (int s = 0; s < lo->pp; s++)
                lo->layers[s] = base;
            for (int k = 0; k < rem; k++)
                lo->layers[1 + k % (lo->pp > 2 ? lo->pp - 2 : lo->pp - 1)]++;
        } else {
            for (int s = 0; s < lo->pp; s++)
                lo->layers[s] = m->L / lo->pp;
        }
    }
    for (int s = 0; s < lo->pp; s++) {
        if (lo->layers[s] < 1)
            FAIL("layout: stage %d has %d layers (each stage needs at least one)", s, lo->layers[s]);
        sum += lo->layers[s];
    }
    if (sum != m->L)
        FAIL("layout: layers per stage sum to %d, the model has %d", sum, m->L);
    if (v > 1 && !lo->pp_layout[0])
        for (int s = 0; s < lo->pp; s++)
            if (layout_chunk_layers(lo, s, 0) < 0)
                FAIL("layout: interleaving (vp %d) splits each stage into vp chunks; stage %d has %d layers "
                     "(a multiple of vp, or one less at the first stage (embedding) or the last (loss))",
                     lo->vp, s, lo->layers[s]);
    for (int s = 0; s < lo->pp; s++) {
        if (lo->full_rc[s] < 0 || lo->sel_rc[s] < 0 || lo->full_rc[s] + lo->sel_rc[s] > lo->layers[s])
            FAIL("layout: stage %d recomputes %d full + %d selective layers of its %d", s,
                 lo->full_rc[s], lo->sel_rc[s], lo->layers[s]);
    }
    return 0;
}

int layout_check_precision(const Layout *lo, const HwProfile *hw, char *err, int errlen)
{
    if (hw->peak[lo->prec] <= 0)
        FAIL("layout: %s does not support %s", hw->name, hw_precision_name(lo->prec));
    /* Transformer Engine's own checks (pytorch/quantization.py): MXFP8 needs compute capability 10.0
     * (check_mxfp8_support), 128-element block scaling 9.0 and CUDA 12.9 (check_fp8_block_scaling_support) */
    if (lo->prec == PREC_FP8 && hw->compute_capability > 0 &&
        ((lo->fp8_recipe == FP8R_MXFP8 && hw->compute_capability < 10.0) ||
         (lo->fp8_recipe == FP8R_BLOCKWISE && hw->compute_capability < 9.0)))
        FAIL("layout: --fp8-recipe %s needs compute capability %s or higher (Transformer Engine's check); %s is %.1f: "
             "use --fp8-recipe tensorwise or delayed", layout_fp8_recipe_name(lo->fp8_recipe),
             lo->fp8_recipe == FP8R_MXFP8 ? "10.0 (Blackwell)" : "9.0 (Hopper)", hw->name, hw->compute_capability);
    /* cuDNN's fp8 attention: Hopper and later (its support matrix) */
    if (lo->fp8_dpa && hw->compute_capability > 0 && hw->compute_capability < 9.0)
        FAIL("layout: --fp8-dot-product-attention needs compute capability 9.0 (Hopper) or higher (cuDNN's fp8 "
             "attention); %s is %.1f", hw->name, hw->compute_capability);
    return 0;
}

/* ZeRO-2 beside pipeline parallelism: the gradients of each micro-batch
 * reduce-scattered into the shard (Llama 3's FSDP), where the stack does it
 * (HwProfile zero2_pp); DeepSpeed refuses it, and Megatron's distributed
 * optimizer and PyTorch's pipeline schedules reduce once a step (--dist-opt). */
int layout_check_stack(const Layout *lo, const HwProfile *hw, char *err, int errlen)
{
    if (lo->opt == OPT_ZERO2 && lo->pp > 1 && !hw->zero2_pp)
        FAIL("layout: ZeRO-2 cannot combine with pp %d under this stack (DeepSpeed refuses it, Megatron and "
             "PyTorch's pipelines shard only optimizer states there: use --zero 1 or --dist-opt, or --stack "
             "llama3-meta, whose FSDP shards gradients beside the pipeline)", lo->pp);
    return 0;
}


int layout_check(Layout *lo, const ModelSpec *m, const HwProfile *hw, char *err, int errlen)
{
    if (check_sizes(lo, m, err, errlen) != 0)
        return -1;
    if (hw && (layout_check_precision(lo, hw, err, errlen) != 0 || layout_check_stack(lo, hw, err, errlen) != 0))
        return -1;
    if (lo->tp == 1)
        lo->sp = false;
    for (int s = lo->pp; s < LAYOUT_MAX_PP; s++)
        lo->layers[s] = lo->full_rc[s] = lo->sel_rc[s] = 0;
    if (check_stages(lo, m, err, errlen) != 0)
        return -1;
    {
        int mask;
        char e[160];
        if (layout_parse_rc_modules(lo->rc_modules, &mask, e, sizeof e) != 0)
            FAIL("layout: --recompute-modules: %s", e);
        if (lo->cuda_graph < 0 || lo->cuda_graph >= CG_COUNT)
            FAIL("layout: --cuda-graph-impl %d is none of none, local, transformer_engine, full_iteration",
                 (int)lo->cuda_graph);
        if (lo->fp8_recipe < 0 || lo->fp8_recipe >= FP8R_COUNT)
            FAIL("layout: --fp8-recipe %d is none of delayed, tensorwise, mxfp8, blockwise", (int)lo->fp8_recipe);
        /* arguments.py: "--fp8-param-gather only supported with distributed optimizer, torch fsdp2,
         * megatron fsdp" */
        if (lo->fp8_param_gather && lo->prec != PREC_FP8)
            FAIL("layout: --fp8-param-gather keeps the weights in fp8: it needs --precision fp8 (the plan is %s)",
                 hw_precision_name(lo->prec));
        if (lo->fp8_param_gather && lo->opt != OPT_DISTOPT && lo->opt != OPT_ZERO3)
            FAIL("layout: --fp8-param-gather needs the distributed optimizer (--dist-opt) or ZeRO-3 (Megatron-FSDP), "
                 "as Megatron-LM does; the plan's optimizer is %s", layout_opt_name(lo->opt));
        if (lo->fp8_dpa && lo->prec != PREC_FP8)
            FAIL("layout: --fp8-dot-product-attention runs the attention in fp8: it needs --precision fp8 (the "
                 "plan is %s)", hw_precision_name(lo->prec));
        if (lo->fp8_dpa && !lo->flash)
            FAIL("layout: --fp8-dot-product-attention is cuDNN's fused fp8 attention: it needs flash attention "
                 "(drop --no-flash)");
        /* Megatron-core: "--use-precision-aware-optimizer only supported with distributed optimizer"
         * (optimizer/__init__.py); a moment dtype other than fp32 needs that optimizer (optimizer_config.py) */
        if (lo->exp_avg_dtype < 0 || lo->exp_avg_dtype >= PREC_COUNT || lo->exp_avg_sq_dtype < 0 ||
            lo->exp_avg_sq_dtype >= PREC_COUNT)
            FAIL("layout: --exp-avg-dtype %d, --exp-avg-sq-dtype %d: each is one of fp32, bf16, fp16, fp8",
                 (int)lo->exp_avg_dtype, (int)lo->exp_avg_sq_dtype);
        if (!lo->precision_aware_opt && (lo->exp_avg_dtype != PREC_FP32 || lo->exp_avg_sq_dtype != PREC_FP32))
            FAIL("layout: --exp-avg-dtype %s, --exp-avg-sq-dtype %s need --use-precision-aware-optimizer (Megatron-core "
                 "asserts it: without it the moments are fp32)",
                 hw_precision_name(lo->exp_avg_dtype), hw_precision_name(lo->exp_avg_sq_dtype));
        if (lo->precision_aware_opt && lo->opt != OPT_DISTOPT)
            FAIL("layout: --use-precision-aware-optimizer runs only with the distributed optimizer (--dist-opt), as "
                 "in Megatron-core; the plan's optimizer is %s", layout_opt_name(lo->opt));
        if (lo->precision_aware_opt && lo->prec == PREC_FP32)
            FAIL("layout: --use-precision-aware-optimizer: an fp32 run keeps no separate master weights; train in "
                 "bf16, fp16 or fp8, or plan without it");
        if (layout_parse_cg_modules(lo->cg_modules, &mask, e, sizeof e) != 0)
            FAIL("layout: --cuda-graph-modules: %s", e);
        if (mask && (lo->cuda_graph == CG_NONE || lo->cuda_graph == CG_FULL_ITERATION))
            FAIL("layout: --cuda-graph-modules %s needs --cuda-graph-impl local or transformer_engine (with %s "
                 "it must be empty)", lo->cg_modules, layout_cuda_graph_name(lo->cuda_graph));
    }
    char why[200];   /* after the stages: a --pipeline-layout sets vp */
    if (layout_moe_a2a_check(lo, why, sizeof why) != 0)
        FAIL("layout: %s", why);
    if (lo->pp_sched < 0 || lo->pp_sched >= PP_SCHED_COUNT)
        FAIL("layout: --pp-schedule %d is neither 1f1b nor dualpipe", (int)lo->pp_sched);
    if (lo->pp_sched == PP_SCHED_DUALPIPE) {
        /* DualPipe.step (deepseek-ai/DualPipe dualpipe.py) asserts an even rank count and an even number of
         * chunks, at least twice the ranks; each rank holds two model stages, so it does not interleave */
        int mb = layout_microbatches(lo);
        if (lo->pp < 2 || lo->pp % 2)
            FAIL("layout: --pp-schedule dualpipe needs an even pipeline size of at least 2 (pp %d): each rank "
                 "pairs stage s with stage pp-1-s", lo->pp);
        if (lo->vp > 1)
            FAIL("layout: --pp-schedule dualpipe holds two model stages a rank by itself and does not "
                 "interleave: vp must be 1 (it is %d)", lo->vp);
        if (mb % 2 || mb < 2 * lo->pp)
            FAIL("layout: --pp-schedule dualpipe needs an even number of micro-batches, at least 2*pp = %d; "
                 "gbs %d / (mbs %d * dp %d) gives %d", 2 * lo->pp, lo->gbs, lo->mbs, lo->dp, mb);
    }
    return 0;
}

static const char *const target_names[] = {"megatron", "ultraplan", "ultraplan-cuda", "torchtitan"};
_Static_assert(sizeof target_names / sizeof *target_names == TARGET_COUNT, "target names");

const char *layout_target_name(Target t) { return t >= 0 && t < TARGET_COUNT ? target_names[t] : "?"; }

int layout_parse_target(const char *s, Target *out)
{
    int i = name_index(target_names, TARGET_COUNT, s);
    if (i >= 0) {
        *out = (Target)i;
        return 0;
    }
    if (strcasecmp(s, "megatron-lm") == 0) {
        *out = TARGET_MEGATRON;
        return 0;
    }
    return -1;
}

void layout_runs_text(const int *v, int n, char *buf, int len)
{
    int k = 0;
    buf[0] = 0;
    for (int i = 0; i < n && k < len;) {
        int j = i;
        while (j < n && v[j] == v[i])
            j++;
        k += snprintf(buf + k, len - k, j - i > 1 ? "%s%dx%d" : "%s%d", i ? "," : "", v[i], j - i);
        i = j;
    }
}

#define WHY(...) do { snprintf(why, len, __VA_ARGS__); return -1; } while (0)

int layout_megatron_unsplit(const Layout *lo, char *why, int len)
{
    /* Megatron-core's fp8_dot_product_attention is a config field that
     * arguments.py lists among those with no command-line argument */
    if (lo->fp8_dpa)
        WHY("fp8 dot-product attention: Megatron-LM's pretrain_gpt.py has no flag for it (arguments.py lists "
            "fp8_dot_product_attention among the config fields without one; Megatron-Bridge sets it as "
            "mixed_precision.fp8_dot_product_attention): plan with --no-fp8-dot-product-attention");
    if ((lo->opt == OPT_ZERO2 || lo->opt == OPT_ZERO3) && lo->pp > 1)
        WHY("ZeRO-%d with pp %d: the Megatron-LM export shards gradients through Megatron-FSDP with pp 1 only "
            "(its version 2 refuses pipeline parallelism); beside a pipeline it writes the distributed optimizer "
            "(--dist-opt), which shards the optimizer states", lo->opt == OPT_ZERO2 ? 2 : 3, lo->pp);
    return 0;
}

int layout_megatron_form(const Layout *lo, const ModelSpec *m, MegatronForm *form, char *why, int len)
{
    MegatronForm f = {MEGA_RC_NONE, 0, 0, 0, false, false, false};
    char list[200];
    int p = lo->pp, v = lo->vp > 1 ? lo->vp : 1;
    if (p < 1 || p > LAYOUT_MAX_PP)
        WHY("layout: pp %d is out of range", p);
    if (layout_megatron_unsplit(lo, why, len) != 0)
        return -1;
    int sum = 0;
    for (int s = 0; s < p; s++) {
        if (lo->layers[s] < 1)
            WHY("layout: stage %d has no layers (check the layout first)", s);
        sum += lo->layers[s];
    }
    if (m && sum != m->L)
        WHY("layout: layers per stage sum to %d, the model has %d", sum, m->L);
    /* a --pipeline-model-parallel-layout string says every chunk's layers itself */
    bool str = lo->pp_layout[0] != 0;
    f.pp_layout = str;
    /* stage split: even, or only the first and last stages differ */
    for (int s = 2; s < p - 1 && !str; s++)
        if (lo->layers[s] != lo->layers[1]) {
            layout_runs_text(lo->layers, p, list, sizeof list);
            WHY("layers per stage %s: Megatron-LM splits unevenly only at the first and last stage "
                "(--decoder-first/last-pipeline-num-layers), every middle stage holds the same count", list);
        }
    /* interleaved: every stage in vp equal chunks, or Megatron's split with
     * the embedding / loss counted as a layer (one chunk a layer short) */
    bool acct = false;
    for (int s = 0; s < p && !str; s++) {
        if (layout_chunk_layers(lo, s, 0) < 0)
            WHY("stage %d holds %d layers, not a multiple of vp %d (Megatron-LM's model chunks are equal, but for the "
                "embedding's or the loss's place with --account-for-embedding/loss-in-pipeline-split)", s,
                lo->layers[s], v);
        acct |= v > 1 && lo->layers[s] % v != 0;
    }
    if (acct) {
        f.embed_in_split = lo->layers[0] % v != 0;
        f.loss_in_split = lo->layers[p - 1] % v != 0;
        int per = lo->layers[0] + f.embed_in_split;
        for (int s = 0; s < p; s++)
            if (lo->layers[s] != per - (s == 0 && f.embed_in_split) - (s == p - 1 && f.loss_in_split)) {
                layout_runs_text(lo->layers, p, list, sizeof list);
                WHY("layers per stage %s: with the embedding or loss counted as a layer Megatron-LM gives every "
                    "stage the same count (--account-for-embedding/loss-in-pipeline-split, no first/last counts)",
                    list);
            }
    }
    /* mixture of experts (megatron/core/transformer/moe/moe_layer.py refuses
     * training with tensor parallelism and no sequence parallelism;
     * parallel_state.py's expert RankGenerator needs etp*ep*pp to divide the
     * world, which layout_check's etp*ep | tp*cp*dp gives) */
    if (m && spec_is_moe(m) && lo->tp > 1 && !lo->sp)
        WHY("tp %d without sequence parallelism: Megatron-LM's MoE layer refuses to train with tensor "
            "parallelism unless --sequence-parallel is on", lo->tp);
    /* transformer_config.py: "Bias in Moe is only supported when ETP==1" (GPT-OSS style biased experts) */
    if (m && spec_is_moe(m) && m->bias && layout_etp(lo) > 1)
        WHY("etp %d with linear biases: Megatron-LM supports biased MoE experts only with "
            "--expert-tensor-parallel-size 1", layout_etp(lo));
    if (layout_moe_a2a_check(lo, why, len) != 0)
        return -1;
    if (lo->pp_sched == PP_SCHED_DUALPIPE)
        WHY("--pp-schedule dualpipe: Megatron-LM has no DualPipe schedule; its nearest is the interleaved 1F1B "
            "(--vp > 1) with --overlap-moe-expert-parallel-comm, which pairs micro-batches the same way");
    bool even = true;
    for (int s = 1; s < p; s++)
        even &= lo->layers[s] == lo->layers[0];
    if (!even && !acct && !str) {
        if (p == 2) {
            f.first_layers = lo->layers[0];
        } else {
            f.first_layers = lo->layers[0] != lo->layers[1] ? lo->layers[0] : 0;
            f.last_layers = lo->layers[p - 1] != lo->layers[1] ? lo->layers[p - 1] : 0;
        }
    }
    /* recomputation: none, selective everywhere, or full per model chunk */
    bool any_f = false, any_s = false;
    for (int s = 0; s < p; s++) {
        any_f |= lo->full_rc[s] > 0;
        any_s |= lo->sel_rc[s] > 0;
    }
    if (any_f && any_s)
        WHY("the layout recomputes some layers fully and others selectively: Megatron-LM's "
            "--recompute-granularity is one of full or selective for the whole model");
    if (any_s) {
        for (int s = 0; s < p; s++)
            if (lo->sel_rc[s] != lo->layers[s]) {
                layout_runs_text(lo->sel_rc, p, list, sizeof list);
                WHY("selective recomputation of %s layers per stage: Megatron-LM's --recompute-granularity "
                    "selective covers every layer (stage %d has %d)", list, s, lo->layers[s]);
            }
        f.rc = MEGA_RC_SELECTIVE;
    }
    if (any_f) {
        /* --recompute-method block --recompute-num-layers N recomputes the
         * first min(N, chunk) layers of every model chunk on every stage;
         * uniform (N = 1 here) every layer */
        bool all = true;
        int maxchunk = 0;
        for (int s = 0; s < p; s++) {
            all &= lo->full_rc[s] == lo->layers[s];
            for (int c = 0; c < v; c++)
                if (layout_chunk_layers(lo, s, c) > maxchunk)
                    maxchunk = layout_chunk_layers(lo, s, c);
        }
        if (all) {
            f.rc = MEGA_RC_FULL_UNIFORM;
            f.rc_layers = 1;
        } else {
            int N = 0;
            for (int n = 1; n < maxchunk && !N; n++) {
                bool ok = true;
                for (int s = 0; s < p && ok; s++) {
                    int k = 0;
                    for (int c = 0; c < v; c++) {
                        int ch = layout_chunk_layers(lo, s, c);
                        k += n < ch ? n : ch;
                    }
                    ok = k == lo->full_rc[s];
                }
                if (ok)
                    N = n;
            }
            if (!N) {
                layout_runs_text(lo->full_rc, p, list, sizeof list);
                WHY("full recomputation of %s layers per stage: Megatron-LM recomputes the same number of layers N "
                    "per model chunk (%d per stage) on every stage (--recompute-method block --recompute-num-layers "
                    "N: min(N, chunk) of each), and no N gives these counts", list, v);
            }
            f.rc = MEGA_RC_FULL_BLOCK;
            f.rc_layers = N;
        }
    }
    if (form)
        *form = f;
    return 0;
}
#undef WHY

int layout_megatron_check(const Layout *lo, const ModelSpec *m, char *why, int len)
{
    return layout_megatron_form(lo, m, NULL, why, len);
}

static const char *const dispatcher_names[] = {"alltoall", "allgather", "flex"};
_Static_assert(sizeof dispatcher_names / sizeof *dispatcher_names == MOE_DISPATCH_COUNT, "dispatcher names");

static const struct { const char *name; int bit; } rc_module_names[] = {
    {"layernorm", RCM_LAYERNORM}, {"mla_up_proj", RCM_MLA_UP_PROJ}, {"moe_act", RCM_MOE_ACT},
    {"mlp", RCM_MLP}, {"shared_experts", RCM_SHARED_EXPERTS},
};

int layout_parse_rc_modules(const char *s, int *mask, char *err, int errlen)
{
    *mask = 0;
    while (s && *s) {
        size_t n = strcspn(s, ",+ ");
        if (n > 0) {
            int bit = 0;
            for (size_t i = 0; i < sizeof rc_module_names / sizeof *rc_module_names; i++)
                if (strlen(rc_module_names[i].name) == n && !strncmp(s, rc_module_names[i].name, n))
                    bit = rc_module_names[i].bit;
            if (!bit) {
                const char *why = n == 9 && !strncmp(s, "core_attn", n) ? "core attention is --recompute selective"
                                  : n == 3 && !strncmp(s, "moe", n)     ? "the whole MoE layer's recompute is not priced"
                                             : "expected layernorm, mla_up_proj, moe_act, mlp or shared_experts";
                snprintf(err, errlen, "recompute module \"%.*s\": %s", (int)n, s, why);
                return -1;
            }
            *mask |= bit;
        }
        s += n;
        if (*s)
            s++;
    }
    return 0;
}

void layout_format_rc_modules(int mask, const char *sep, char *buf, int len)
{
    int n = 0;
    buf[0] = 0;
    for (size_t i = 0; i < sizeof rc_module_names / sizeof *rc_module_names && n < len; i++)
        if (mask & rc_module_names[i].bit)
            n += snprintf(buf + n, (size_t)(len - n), "%s%s", n ? sep : "", rc_module_names[i].name);
}

int layout_rc_modules(const Layout *lo)
{
    int mask;
    char err[8];
    return lo->rc_modules[0] && layout_parse_rc_modules(lo->rc_modules, &mask, err, sizeof err) == 0 ? mask : 0;
}

static const char *const cuda_graph_names[] = {"none", "local", "transformer_engine", "full_iteration"};
_Static_assert(sizeof cuda_graph_names / sizeof *cuda_graph_names == CG_COUNT, "cuda graph names");

const char *layout_cuda_graph_name(CudaGraphImpl g)
{
    return g >= 0 && g < CG_COUNT ? cuda_graph_names[g] : "?";
}

int layout_parse_cuda_graph(const char *s, CudaGraphImpl *out)
{
    int i = name_index(cuda_graph_names, CG_COUNT, s);
    if (i >= 0) {
        *out = (CudaGraphImpl)i;
        return 0;
    }
    if (strcasecmp(s, "te") == 0) {
        *out = CG_TE;
        return 0;
    }
    return -1;
}

static const char *const fp8_recipe_names[] = {"delayed", "tensorwise", "mxfp8", "blockwise"};
_Static_assert(sizeof fp8_recipe_names / sizeof *fp8_recipe_names == FP8R_COUNT, "fp8 recipe names");

const char *layout_fp8_recipe_name(Fp8Recipe r)
{
    return r >= 0 && r < FP8R_COUNT ? fp8_recipe_names[r] : "?";
}

int layout_parse_fp8_recipe(const char *s, Fp8Recipe *out)
{
    int i = name_index(fp8_recipe_names, FP8R_COUNT, s);
    if (i >= 0) {
        *out = (Fp8Recipe)i;
        return 0;
    }
    return -1;
}

static const char *const moe_wire_names[] = {"bf16", "mxfp8"};
_Static_assert(sizeof moe_wire_names / sizeof *moe_wire_names == MOE_WIRE_COUNT, "MoE wire dtype names");

const char *layout_moe_wire_name(MoeWire w) { return w >= 0 && w < MOE_WIRE_COUNT ? moe_wire_names[w] : "?"; }

int layout_parse_moe_wire(const char *s, MoeWire *out)
{
    int i = name_index(moe_wire_names, MOE_WIRE_COUNT, s);
    if (i >= 0) {
        *out = (MoeWire)i;
        return 0;
    }
    return -1;
}

static const char *const pp_sched_names[] = {"1f1b", "dualpipe"};
_Static_assert(sizeof pp_sched_names / sizeof *pp_sched_names == PP_SCHED_COUNT, "pipeline schedule names");

const char *layout_pp_sched_name(PpSchedule p) { return p >= 0 && p < PP_SCHED_COUNT ? pp_sched_names[p] : "?"; }

int layout_parse_pp_sched(const char *s, PpSchedule *out)
{
    int i = name_index(pp_sched_names, PP_SCHED_COUNT, s);
    if (i < 0)
        return -1;
    *out = (PpSchedule)i;
    return 0;
}

int layout_pp_mirror(const Layout *lo, int s) { return lo->pp_sched == PP_SCHED_DUALPIPE ? lo->pp - 1 - s : s; }

static const struct { const char *name; int bit; } cg_module_names[] = {
    {"attn", CGM_ATTN}, {"mlp", CGM_MLP}, {"moe", CGM_MOE}, {"moe_router", CGM_MOE_ROUTER},
    {"moe_preprocess", CGM_MOE_PREPROCESS},
};

int layout_parse_cg_modules(const char *s, int *mask, char *err, int errlen)
{
    *mask = 0;
    while (s && *s) {
        size_t n = strcspn(s, ",+ ");
        if (n > 0) {
            int bit = 0;
            for (size_t i = 0; i < sizeof cg_module_names / sizeof *cg_module_names; i++)
                if (strlen(cg_module_names[i].name) == n && !strncmp(s, cg_module_names[i].name, n))
                    bit = cg_module_names[i].bit;
            if (!bit) {
                snprintf(err, errlen, "CUDA graph module \"%.*s\": expected attn, mlp, moe, moe_router or "
                         "moe_preprocess (mamba layers are not modelled)", (int)n, s);
                return -1;
            }
            *mask |= bit;
        }
        s += n;
        if (*s)
            s++;
    }
    /* transformer_config.py: "moe_preprocess" must be used together with "moe_router"; "moe" and
     * "moe_router" are exclusive */
    if ((*mask & CGM_MOE_PREPROCESS) && !(*mask & CGM_MOE_ROUTER)) {
        snprintf(err, errlen, "CUDA graph module moe_preprocess needs moe_router");
        return -1;
    }
    if ((*mask & CGM_MOE) && (*mask & CGM_MOE_ROUTER)) {
        snprintf(err, errlen, "CUDA graph modules moe and moe_router exclude each other");
        return -1;
    }
    return 0;
}

void layout_format_cg_modules(int mask, const char *sep, char *buf, int len)
{
    int n = 0;
    buf[0] = 0;
    for (size_t i = 0; i < sizeof cg_module_names / sizeof *cg_module_names && n < len; i++)
        if (mask & cg_module_names[i].bit)
            n += snprintf(buf + n, (size_t)(len - n), "%s%s", n ? sep : "", cg_module_names[i].name);
}

int layout_cg_modules(const Layout *lo)
{
    int mask;
    char err[8];
    return lo->cg_modules[0] && layout_parse_cg_modules(lo->cg_modules, &mask, err, sizeof err) == 0 ? mask : 0;
}

const char *layout_dispatcher_name(MoeDispatcher d)
{
    return d >= 0 && d < MOE_DISPATCH_COUNT ? dispatcher_names[d] : "?";
}

int layout_parse_dispatcher(const char *s, MoeDispatcher *out)
{
    int i = name_index(dispatcher_names, MOE_DISPATCH_COUNT, s);
    if (i >= 0) {
        *out = (MoeDispatcher)i;
        return 0;
    }
    return -1;
}

#define WHY(...) do { snprintf(why, len, __VA_ARGS__); return -1; } while (0)
int layout_moe_a2a_check(const Layout *lo, char *why, int len)
{
    /* transformer_config.py: "moe_shared_expert_overlap only works with alltoall or flex token dispatcher" */
    if (lo->moe_shared_overlap && lo->moe_dispatcher == MOE_DISPATCH_ALLGATHER)
        WHY("--moe-shared-expert-overlap needs the alltoall or flex token dispatcher, not allgather");
    if (lo->moe_dispatch_wire < 0 || lo->moe_dispatch_wire >= MOE_WIRE_COUNT || lo->moe_combine_bwd_wire < 0 ||
        lo->moe_combine_bwd_wire >= MOE_WIRE_COUNT)
        WHY("--moe-dispatch-fwd-dtype / --moe-combine-bwd-dtype %d / %d: each is bf16 or mxfp8",
            (int)lo->moe_dispatch_wire, (int)lo->moe_combine_bwd_wire);
    if (lo->moe_dispatch_wire == MOE_WIRE_MXFP8 || lo->moe_combine_bwd_wire == MOE_WIRE_MXFP8) {
        /* transformer_config.py (d98e8a6): "require the 'ncclep' flex dispatcher backend", and the fused
         * grouped GEMM that consumes the MXFP8 payload: the MXFP8 recipe */
        const char *f = lo->moe_dispatch_wire == MOE_WIRE_MXFP8 ? "--moe-dispatch-fwd-dtype mxfp8"
                                                                 : "--moe-combine-bwd-dtype mxfp8";
        if (lo->moe_dispatcher != MOE_DISPATCH_FLEX)
            WHY("%s needs --moe-token-dispatcher-type flex (Megatron-core quantizes the all-to-all only in its "
                "ncclep flex backend), not %s", f, layout_dispatcher_name(lo->moe_dispatcher));
        if (lo->prec != PREC_FP8 || lo->fp8_recipe != FP8R_MXFP8)
            WHY("%s needs --precision fp8 --fp8-recipe mxfp8: the MXFP8 grouped GEMM consumes the payload "
                "(the plan is %s%s%s)", f, hw_precision_name(lo->prec), lo->prec == PREC_FP8 ? " with " : "",
                lo->prec == PREC_FP8 ? layout_fp8_recipe_name(lo->fp8_recipe) : "");
    }
    if (!lo->moe_a2a_overlap)
        return 0;
    if (lo->ep <= 1)
        WHY("--overlap-moe-expert-parallel-comm needs expert parallelism (ep %d)", lo->ep);
    if (lo->moe_dispatcher == MOE_DISPATCH_ALLGATHER)
        WHY("--overlap-moe-expert-parallel-comm needs the alltoall or flex token dispatcher, not allgather");
    if (lo->pp > 1 && lo->vp <= 1 && lo->pp_sched != PP_SCHED_DUALPIPE)
        WHY("--overlap-moe-expert-parallel-comm with pp %d needs interleaving (vp > 1)", lo->pp);
    for (int s = 0; s < lo->pp && s < LAYOUT_MAX_PP; s++)
        if (lo->full_rc[s] > 0)
            WHY("--overlap-moe-expert-parallel-comm cannot combine with full recomputation (stage %d recomputes "
                "%d layers)", s, lo->full_rc[s]);
    return 0;
}
#undef WHY

static const char *const opt_names[] = {"zero0", "zero1", "zero2", "zero3", "distopt"};
_Static_assert(sizeof opt_names / sizeof *opt_names == OPT_COUNT, "optimizer sharding names");

const char *layout_opt_name(OptimShard o) { return opt_names[o]; }

int layout_parse_opt(const char *s, OptimShard *out)
{
    int i = name_index(opt_names, OPT_COUNT, s);
    if (i >= 0) {
        *out = (OptimShard)i;
        return 0;
    }
    if (s[0] >= '0' && s[0] <= '3' && s[1] == 0) {
        *out = (OptimShard)(s[0] - '0');
        return 0;
    }
    return -1;
}

static const char *const cp_comm_names[] = {"ring", "all-gather"};
_Static_assert(sizeof cp_comm_names / sizeof *cp_comm_names == CP_COMM_COUNT, "cp_comm names");

const char *layout_cp_comm_name(CpComm c) { return c >= 0 && c < CP_COMM_COUNT ? cp_comm_names[c] : "?"; }

static const char *const sel_ac_names[] = {"core_attn", "op"};
_Static_assert(sizeof sel_ac_names / sizeof *sel_ac_names == SEL_AC_COUNT, "sel_ac names");

const char *layout_sel_ac_name(SelAc a) { return a >= 0 && a < SEL_AC_COUNT ? sel_ac_names[a] : "?"; }

int layout_parse_sel_ac(const char *s, SelAc *out)
{
    int i = name_index(sel_ac_names, SEL_AC_COUNT, s);
    if (i < 0)
        return -1;
    *out = (SelAc)i;
    return 0;
}

bool layout_sel_op(const ModelSpec *m, const Layout *lo)
{
    return lo->sel_ac == SEL_AC_OP && !spec_is_moe(m) && m->attn != ATTN_MLA;
}

bool layout_sel_op_used(const ModelSpec *m, const Layout *lo)
{
    if (!layout_sel_op(m, lo))
        return false;
    for (int s = 0; s < lo->pp && s < LAYOUT_MAX_PP; s++)
        if (lo->sel_rc[s] > 0)
            return true;
    return false;
}

int layout_parse_cp_comm(const char *s, CpComm *out)
{
    int i = name_index(cp_comm_names, CP_COMM_COUNT, s);
    if (i >= 0) {
        *out = (CpComm)i;
        return 0;
    }
    if (strcasecmp(s, "p2p") == 0) {   /* Megatron's names */
        *out = CP_COMM_RING;
        return 0;
    }
    if (strcasecmp(s, "all_gather") == 0 || strcasecmp(s, "allgather") == 0) {
        *out = CP_COMM_ALLGATHER;
        return 0;
    }
    return -1;
}
