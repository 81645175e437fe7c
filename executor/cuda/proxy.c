/* proxy.c — see proxy.h. */
#include "proxy.h"

#include <stdio.h>
#include <string.h>

#define FAIL(...) do { snprintf(err, errlen, __VA_ARGS__); return -1; } while (0)

int proxy_shape(const ModelSpec *m, const Layout *lo, int stage, ProxyShape *ps, char *err, int errlen)
{
    memset(ps, 0, sizeof *ps);
    int tp = lo->tp, g = m->g > 0 ? m->g : m->a;
    if (stage < 0 || stage >= lo->pp)
        FAIL("--proxy-stage %d: the plan has stages 0..%d (pp %d)", stage, lo->pp - 1, lo->pp);
    if (lo->cp != 1)
        FAIL("the stage proxy is a one-GPU timing stand-in and runs cp 1 (context parallel needs the ring of "
             "cp GPUs; run the plan itself with mpirun); the plan has cp %d", lo->cp);
    if (spec_is_moe(m) || m->attn == ATTN_MLA)   // its shapes and prediction are a dense layer's
        FAIL("the stage proxy has no mixture-of-experts or MLA layers yet (\"experts\": %d, \"attn\": \"%s\"): "
             "it would time a dense stage", m->experts, spec_attn_name(m->attn));
    if (m->a % tp || g % tp || m->f % tp)
        FAIL("tp %d must divide the query heads (%d), KV heads (%d) and FFN width (%d)", tp, m->a, g, m->f);
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
    ps->B = lo->mbs, ps->T = m->s, ps->N = ps->B * ps->T, ps->C = m->h;
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
    LayerTime lt;
    time_layer(m, hw, lo, &lt);
    int n = lo->layers[stage], f = lo->full_rc[stage], e = lo->sel_rc[stage];
    p->stage_mb_s = time_stage_mb(m, hw, lo, &lt, stage, n, f, e);
    p->comm_mb_s = n * (lt.tp_fwd + lt.tp_bwd + lt.cp) + f * lt.tp_rc + time_pp_mb(m, hw, lo);
    p->compute_mb_s = p->stage_mb_s - p->comm_mb_s;
    p->fwd_mb_s = n * lt.fwd;
    p->bwd_mb_s = n * lt.bwd;
    p->rc_mb_s = f * lt.rc_full + e * lt.rc_sel;
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
