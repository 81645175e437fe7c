/* proxy.c — see proxy.h. */
#include "proxy.h"

#include <stdio.h>
#include <string.h>

#include "memory.h"

#define FAIL(...) do { snprintf(err, errlen, __VA_ARGS__); return -1; } while (0)

int proxy_shape(const ModelSpec *m, const Layout *lo, int stage, ProxyShape *ps, char *err, int errlen)
{
    memset(ps, 0, sizeof *ps);
    int tp = lo->tp, g = m->g > 0 ? m->g : m->a;
    if (stage < 0 || stage >= lo->pp)
        FAIL("--proxy-stage %d: the plan has stages 0..%d (pp %d)", stage, lo->pp - 1, lo->pp);
    int cp = lo->cp > 1 ? lo->cp : 1, ep = lo->ep > 0 ? lo->ep : 1;
    if (cp > 1 && m->s % (2 * cp))
        FAIL("context parallel cuts a sequence into 2*cp chunks: \"cp\": %d must have 2*cp divide seq %d", cp, m->s);
    if (m->attn == ATTN_MLA)   // its shapes and prediction would be a plain attention's
        FAIL("the stage proxy has no MLA layers (\"attn\": \"%s\"): it would time another attention",
             spec_attn_name(m->attn));
    if (m->a % tp || g % tp || m->f % tp)
        FAIL("tp %d must divide the query heads (%d), KV heads (%d) and FFN width (%d)", tp, m->a, g, m->f);
    if (spec_is_moe(m)) {
        int El = m->experts / ep;
        if (layout_etp(lo) > 1 || m->bias || m->capacity_factor > 0)
            FAIL("the MoE stage proxy runs etp 1, no biases, dropless: the plan has \"etp\": %d, \"bias\": %s, "
                 "\"capacity_factor\": %g", layout_etp(lo), m->bias ? "true" : "false", m->capacity_factor);
        if (m->experts % ep || El < m->topk || m->shared_ffn % tp)
            FAIL("the MoE stage proxy routes over this rank's experts: \"experts\": %d / \"ep\": %d must be a whole "
                 "number >= \"topk\": %d, and tp %d must divide \"shared_ffn\": %d", m->experts, ep, m->topk, tp,
                 m->shared_ffn);
        ps->moe = 1, ps->El = El, ps->K = m->topk;
        ps->Fe = m->moe_ffn > 0 ? m->moe_ffn : m->f;
        ps->Fs = m->shared_ffn / tp;
    }
    StageMap sm;
    if (stagemap_init(&sm, m, lo, stage, 0, err, errlen) != 0)
        return -1;
    ParamSet p;
    memset(&p, 0, sizeof p);
    params_layout(&p, m, &sm, 1);
    ps->stage = stage, ps->nstages = lo->pp, ps->tp = tp;
    ps->layers = sm.nlayers;
    ps->full_rc = lo->full_rc[stage], ps->sel_rc = lo->sel_rc[stage];
    ps->first = stage == 0, ps->last = stage == lo->pp - 1;
    ps->cp = cp;
    ps->B = lo->mbs, ps->T = m->s / cp, ps->N = ps->B * ps->T, ps->C = m->h;
    ps->HS = spec_head_dim(m);
    ps->NHl = m->a / tp, ps->NKVl = g / tp;
    ps->ql = ps->NHl * ps->HS, ps->kvl = ps->NKVl * ps->HS;
    ps->Fl = m->f / tp;
    ps->F1l = m->mlp == MLP_SWIGLU ? 2 * ps->Fl : ps->Fl;
    ps->Vl = (int)(spec_padded_vocab(m, tp) / tp);
    ps->layer_params = sm.nlayers ? (double)p.layers_end / sm.nlayers : 0;
    ps->stage_params = (double)p.n;
    params_free(&p);
    return 0;
}

void proxy_predict(const ModelSpec *m, const HwProfile *hw, const Layout *lo, int stage, ProxyPredict *p)
{
    memset(p, 0, sizeof *p);
    Layout l = *lo;
    if (spec_is_moe(m))
        l.moe_imbalance = 1.0;   // the proxy's random tokens route evenly over its experts
    LayerTime lt;
    time_layer(m, hw, &l, &lt);
    int n = l.layers[stage], f = l.full_rc[stage], e = l.sel_rc[stage];
    p->stage_mb_s = time_stage_mb(m, hw, &l, &lt, stage, n, f, e);
    int c[2][RECOMPUTE_COUNT] = {{n - f - e, e, f}, {0, 0, 0}};   // [dense, MoE][none, selective, full]
    if (spec_is_moe(m))
        memory_stage_layer_mix(m, &l, stage, n, f, e, c);
    int nd = memory_mix_kind(c, 0), nm = memory_mix_kind(c, 1);
    p->comm_mb_s = nd * (lt.tp_fwd + lt.tp_bwd + lt.cp) + c[0][RECOMPUTE_FULL] * lt.tp_rc +
                   nm * (lt.moe_tp_fwd + lt.moe_tp_bwd + lt.cp + lt.ep_fwd + lt.ep_bwd) +
                   c[1][RECOMPUTE_FULL] * (lt.moe_tp_rc + lt.ep_rc) + time_pp_mb(m, hw, &l);
    p->compute_mb_s = p->stage_mb_s - p->comm_mb_s;
    p->fwd_mb_s = nd * lt.fwd + nm * lt.moe_fwd;
    p->bwd_mb_s = nd * lt.bwd + nm * lt.moe_bwd;
    p->rc_mb_s = c[0][RECOMPUTE_FULL] * lt.rc_full + c[0][RECOMPUTE_SELECTIVE] * lt.rc_sel +
                 c[1][RECOMPUTE_FULL] * lt.moe_rc_full + c[1][RECOMPUTE_SELECTIVE] * lt.moe_rc_sel;
    p->edge_mb_s = p->compute_mb_s - p->fwd_mb_s - p->bwd_mb_s - p->rc_mb_s;
}

double proxy_flops_per_token(const ModelSpec *m, const Layout *lo, int stage)
{
    if (stage < 0 || stage >= lo->pp)
        return 0;
    bool causal = lo->flops == FLOPS_CAUSAL;
    double layer = spec_layer_gemm_flops_fwd(m) + spec_layer_attn_flops_fwd(m, causal);
    double head = spec_logits_flops_fwd(m, lo->tp);
    double mine = lo->layers[stage] * layer + (stage == lo->pp - 1 ? head : 0);
    double all = m->L * layer + head;   // spec_flops_per_token's full/causal sum is 3 x this
    return all > 0 ? train_model_flops_per_token(m, lo) * (mine / all) / lo->tp : 0;
}
