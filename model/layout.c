/* layout.c — defaults, validation and small queries on a Layout. */
#include "layout.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

void layout_default(Layout *lo)
{
    memset(lo, 0, sizeof *lo);
    lo->dp = lo->tp = lo->pp = lo->vp = lo->cp = 1;
    lo->sp = true;
    lo->mbs = 1;
    lo->gbs = 0;
    lo->opt = OPT_ZERO0;
    lo->prec = PREC_BF16;
    lo->grad_fp32 = true;
    lo->flash = true;
    lo->overlap_grad = true;
    lo->flops = FLOPS_FULL_ATTN;
}

int layout_gpus(const Layout *lo) { return lo->dp * lo->tp * lo->pp * lo->cp; }

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

#define FAIL(...) do { snprintf(err, errlen, __VA_ARGS__); return -1; } while (0)

static int check_sizes(const Layout *lo, const ModelSpec *m, char *err, int errlen)
{
    if (lo->dp < 1 || lo->tp < 1 || lo->pp < 1 || lo->vp < 1 || lo->cp < 1)
        FAIL("layout: dp, tp, pp, vp and cp must be >= 1 (got dp=%d tp=%d pp=%d vp=%d cp=%d)",
             lo->dp, lo->tp, lo->pp, lo->vp, lo->cp);
    if (lo->mbs < 1)
        FAIL("layout: micro-batch must be >= 1 (got %d)", lo->mbs);
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
        if (m->L % (lo->pp * lo->vp) != 0)
            FAIL("layout: layers %d are not a multiple of pp*vp = %d*%d", m->L, lo->pp, lo->vp);
        if (layout_microbatches(lo) % lo->pp != 0)
            FAIL("layout: interleaving needs micro-batches (%d) to be a multiple of pp %d",
                 layout_microbatches(lo), lo->pp);
    }
    if ((lo->opt == OPT_ZERO2 || lo->opt == OPT_ZERO3) && lo->pp > 1)
        FAIL("layout: ZeRO-%d cannot combine with pp %d (DeepSpeed and Megatron shard only optimizer "
             "states under pipeline parallelism: use --zero 1 or --dist-opt)", lo->opt == OPT_ZERO2 ? 2 : 3, lo->pp);
    return 0;
}

static int check_stages(Layout *lo, const ModelSpec *m, char *err, int errlen)
{
    int sum = 0, given = 0;
    for (int s = 0; s < lo->pp; s++)
        given |= lo->layers[s] != 0;
    if (!given) {
        if (m->L % lo->pp != 0 && lo->vp == 1) {
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
    if (lo->vp > 1)
        for (int s = 0; s < lo->pp; s++)
            if (lo->layers[s] != m->L / lo->pp)
                FAIL("layout: interleaving (vp %d) needs even stages; stage %d has %d layers", lo->vp, s, lo->layers[s]);
    for (int s = 0; s < lo->pp; s++) {
        if (lo->full_rc[s] < 0 || lo->sel_rc[s] < 0 || lo->full_rc[s] + lo->sel_rc[s] > lo->layers[s])
            FAIL("layout: stage %d recomputes %d full + %d selective layers of its %d", s,
                 lo->full_rc[s], lo->sel_rc[s], lo->layers[s]);
    }
    return 0;
}

int layout_check(Layout *lo, const ModelSpec *m, const HwProfile *hw, char *err, int errlen)
{
    if (check_sizes(lo, m, err, errlen) != 0)
        return -1;
    if (hw && hw->peak[lo->prec] <= 0)
        FAIL("layout: %s does not support %s", hw->name, hw_precision_name(lo->prec));
    if (lo->tp == 1)
        lo->sp = false;
    for (int s = lo->pp; s < LAYOUT_MAX_PP; s++)
        lo->layers[s] = lo->full_rc[s] = lo->sel_rc[s] = 0;
    return check_stages(lo, m, err, errlen);
}

static const char *const opt_names[] = {"zero0", "zero1", "zero2", "zero3", "distopt"};
_Static_assert(sizeof opt_names / sizeof *opt_names == OPT_COUNT, "optimizer sharding names");

const char *layout_opt_name(OptimShard o) { return opt_names[o]; }

int layout_parse_opt(const char *s, OptimShard *out)
{
    for (int i = 0; i < OPT_COUNT; i++)
        if (strcasecmp(s, opt_names[i]) == 0) {
            *out = (OptimShard)i;
            return 0;
        }
    if (s[0] >= '0' && s[0] <= '3' && s[1] == 0) {
        *out = (OptimShard)(s[0] - '0');
        return 0;
    }
    return -1;
}
