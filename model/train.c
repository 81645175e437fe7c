/* train.c — MFU conventions, training days, failures and checkpoint
 * intervals (docs/COSTMODEL.md §5–6). */
#include "train.h"

#include <math.h>

#include "memory.h"
#include "timing.h"

double train_model_flops_per_token(const ModelSpec *m, const Layout *lo)
{
    return spec_flops_per_token(m, lo->tp, lo->flops);
}

/* --recompute-modules' GEMM FLOPs per token of an average layer not fully
 * recomputed: MLA's up projections (every layer), a dense layer's MLP (the
 * dense share of the layers), the shared expert (the MoE share); layernorm
 * and moe_act are memory passes. */
static double rc_module_flops(const ModelSpec *m, const Layout *lo)
{
    int rcm = layout_rc_modules(lo);
    if (!rcm)
        return 0;
    double h = m->h, gated = m->mlp == MLP_SWIGLU ? 3.0 : 2.0, f = 0;
    double moe = spec_is_moe(m) ? (double)spec_moe_layers(m) / m->L : 0.0;
    if ((rcm & RCM_MLA_UP_PROJ) && m->attn == ATTN_MLA)
        f += 2.0 * m->a * ((double)m->q_lora_rank * (m->qk_nope_dim + m->qk_rope_dim) +
                           (double)m->kv_lora_rank * (m->qk_nope_dim + m->v_head_dim));
    if (rcm & RCM_MLP)
        f += (1.0 - moe) * 2.0 * gated * h * m->f;
    if ((rcm & RCM_SHARED_EXPERTS) && m->shared_ffn > 0)
        f += moe * 2.0 * gated * h * m->shared_ffn;
    return f;
}

double train_hw_flops_per_token(const ModelSpec *m, const Layout *lo)
{
    bool causal = lo->flops == FLOPS_CAUSAL;
    double extra = 0;
    double full = spec_recompute_flops_per_token(m, RECOMPUTE_FULL, causal) / m->L;
    /* Megatron's selective recomputation runs the attention core again;
     * torchtitan's per-op policy saves it and runs GEMMs again instead */
    double sel = layout_sel_op(m, lo) ? time_sel_op_gemm_flops(m, lo)
                                      : spec_recompute_flops_per_token(m, RECOMPUTE_SELECTIVE, causal) / m->L;
    double mod = rc_module_flops(m, lo);
    for (int s = 0; s < lo->pp; s++)
        extra += lo->full_rc[s] * full + lo->sel_rc[s] * sel + (lo->layers[s] - lo->full_rc[s]) * mod;
    return train_model_flops_per_token(m, lo) + extra;
}

double train_days(double tokens, double flops_per_token, int gpus, double peak, double mfu)
{
    return tokens * flops_per_token / ((double)gpus * peak * mfu * 86400.0);
}

double train_young(double delta, double M) { return sqrt(2.0 * delta * M); }

double train_daly(double delta, double M)
{
    if (delta >= 2.0 * M)
        return M;
    double r = delta / (2.0 * M);
    return sqrt(2.0 * delta * M) * (1.0 + sqrt(r) / 3.0 + r / 9.0) - delta;
}

double train_expected_failures(double lambda, int n, double t) { return lambda * n * t; }

double train_p_any_failure(double lambda, int n, double t) { return -expm1(-lambda * n * t); }

void train_fill(const ModelSpec *m, const HwProfile *hw, const Layout *lo, const CostOpts *o,
                double tokens_per_step, double step_s, Training *tr)
{
    int n = layout_gpus(lo);
    double N = (double)spec_params(m, lo->tp, PARAMS_EXACT);
    tr->tokens = o->tokens > 0 ? o->tokens : 20.0 * N;
    tr->steps = tr->tokens / tokens_per_step;
    double secs = tr->steps * step_s;
    tr->days = secs / 86400.0;
    tr->gpu_hours = secs / 3600.0 * n;

    double lambda = o->mtbf_gpu_hours > 0 ? 1.0 / (o->mtbf_gpu_hours * 3600.0) : hw->fail_per_gpu_hour / 3600.0;
    double restart = o->restart_s >= 0 ? o->restart_s : hw->restart_s;
    tr->failures = train_expected_failures(lambda, n, secs);
    tr->fail_per_day = train_expected_failures(lambda, n, 86400.0);
    tr->p_fail_day = train_p_any_failure(lambda, n, 86400.0);
    tr->job_mtbf_s = lambda > 0 ? 1.0 / (lambda * n) : INFINITY;

    /* a checkpoint holds the weights and the fp32 optimizer states */
    tr->ckpt_bytes = N * (memory_weight_bytes(lo) + memory_optim_bytes(lo));
    double nodes = ceil((double)n / hw->gpus_per_node);
    tr->ckpt_write_s = hw->ckpt_bw_per_node > 0 ? tr->ckpt_bytes / (nodes * hw->ckpt_bw_per_node) : 0;
    if (lambda > 0 && tr->ckpt_write_s > 0) {
        tr->young_s = train_young(tr->ckpt_write_s, tr->job_mtbf_s);
        tr->daly_s = train_daly(tr->ckpt_write_s, tr->job_mtbf_s);
        /* first-order waste: checkpoint stalls, half an interval of rework and a restart per failure */
        tr->waste = tr->ckpt_write_s / tr->daly_s + (tr->daly_s / 2.0 + restart) / tr->job_mtbf_s;
    } else {
        tr->young_s = tr->daly_s = INFINITY;
        tr->waste = 0;
    }
    tr->days_with_failures = tr->waste < 1.0 ? tr->days / (1.0 - tr->waste) : INFINITY;
    /* what the run costs: every GPU of the job is paid for while it runs, waste included */
    tr->dollars = o->price > 0 ? tr->gpu_hours * o->price : 0;
    tr->dollars_with_failures = o->price > 0 ? tr->days_with_failures * 24.0 * n * o->price : 0;
}
