/* cost.c — assemble memory, time, throughput and training into a Cost; the
 * per-step terms: bubble, exposed DP collectives, optimizer step
 * (docs/COSTMODEL.md §4.2, §4.4, §4.5). The DP overlaps are layout switches
 * (overlap_grad, overlap_param) and the profile's dp_overlap is what they
 * achieve when on; ZeRO-3's per-layer gathers are prefetched whatever the
 * switches say (FSDP always prefetches), as far as the software stack's
 * prefetch reaches (HwProfile zero3_*, set by model/stack.h). */
#include "cost.h"

#include <math.h>
#include <string.h>

void cost_opts_default(CostOpts *o)
{
    o->tokens = 0;
    o->mtbf_gpu_hours = 0;
    o->restart_s = -1;
    o->price = 0;
}

/* One DP collective call (all-reduce, or reduce-scatter / all-gather). */
static double dp_coll(const HwProfile *hw, double bytes, int n, int k, bool allreduce)
{
    return allreduce ? time_coll_allreduce(hw, bytes, n, k) : time_coll_allgather(hw, bytes, n, k);
}

/* ZeRO-3's gathers (or reduce-scatters) of `bytes` of a stage of `layers`
 * layers in one pass, as the stack issues them: one call (the profile's
 * default), or zero3_gathers_per_layer calls per layer, each paying
 * zero3_call_s + n zero3_rank_s of host time and, over a flat NCCL ring,
 * n-1 latencies of the slowest link it crosses (the alpha-beta call prices
 * log2(nodes) of them). */
static double zero3_coll(const HwProfile *hw, double bytes, int n, int k, int layers)
{
    int calls = hw->zero3_gathers_per_layer > 0 ? hw->zero3_gathers_per_layer * (layers > 0 ? layers : 1) : 1;
    double one = time_coll_allgather(hw, bytes / calls, n, k) + hw->zero3_call_s + n * hw->zero3_rank_s;
    if (hw->zero3_flat_ring && n > 1)
        one += (n - 1) * (n > k ? hw->inter.lat : hw->intra.lat);
    return calls * one;
}

/* Megatron DDP's gradient bucket: max(4e7, 1e6 dp) parameters, at most the
 * stage's; the last one to be reduced is exposed after the backward. */
static double dp_bucket_params(const Layout *lo, double P) { return fmin(P, fmax(4e7, 1e6 * lo->dp)); }

/* Seconds of a DP collective of `total` seconds that overlap cannot hide on
 * pipeline stage s, when the stage's work is cut into v model chunks
 * (Megatron's interleaved 1F1B; v = 1 otherwise) and one micro-batch pass of
 * the whole stage lasts `pass`. Each chunk's collective (total/v) runs on one
 * communication stream, in order, and the compute waits only where a result
 * is due. Megatron-core (schedules.py, forward_backward_pipelining_with_
 * interleaving):
 *  - gradients (`grads`): a chunk's reduction is launched after its last
 *    backward, delayed by s chunk-steps so that all stages launch together;
 *    in the flush chunk c's last backward ends c*pp chunk-steps before chunk
 *    0's. Returned: the tail after the last backward. Without interleaving the
 *    buckets reduce during the last micro-batch's backward: max(0, total - pass).
 *  - parameters: chunk 0's gather is awaited by the first forward (it can run
 *    under that chunk pass, bucket by bucket); chunk c+1's is launched s
 *    chunk-steps after chunk c's first forward and awaited by its own, pp
 *    chunk-steps after. Returned: the stall it causes; v = 1 gives
 *    max(0, total - pass). */
static double dp_hidden_tail(double total, int v, int pp, int s, double pass, bool grads)
{
    if (v < 1)
        v = 1;
    double piece = total / v, chunk = pass / v;
    int lag = v > 1 ? s : 0;
    if (grads) {
        double f = -INFINITY; // the stream's finish time, with 0 = end of the last backward
        for (int c = v - 1; c >= 0; c--)
            f = fmax(f, -fmax(0.0, c * (double)pp + 1.0 - lag) * chunk) + piece;
        return fmax(0.0, f);
    }
    double done = 0, stall = 0;
    for (int c = 0; c < v; c++) {
        double launch = c == 0 ? 0.0 : stall + ((c - 1) * (double)pp + lag) * chunk;
        done = fmax(done, launch) + piece;
        double need = stall + (c * (double)pp + 1.0) * chunk;
        if (done > need)
            stall += done - need;
    }
    return stall;
}

/* Seconds of DP reduction that stage s cannot hide, per step. */
static double dp_exposed(const ModelSpec *m, const HwProfile *hw, const Layout *lo, const LayerTime *lt, int s)
{
    int D = layout_dp_group(lo);
    if (D <= 1)
        return 0;
    double wb = memory_weight_bytes(lo), gb = memory_grad_bytes(lo);
    double Pe = 0;
    double P = memory_stage_params_split(m, lo, s, lo->layers[s], &Pe) - Pe;
    /* --fp8-param-gather: the layers' linear weights are gathered in fp8, the stage's other
     * parameters (embedding, head, norms) in 16 bits: the bytes a parameter the all-gather moves */
    double wb_ag = wb, wbe_ag = wb;
    if (lo->fp8_param_gather && lo->prec == PREC_FP8 && P > 0) {
        double e0 = 0, p0 = memory_stage_params_split(m, lo, s, 0, &e0) - e0;
        wb_ag = (p0 * wb + (P - p0) * 1.0) / P;
        wbe_ag = 1.0;
    }
    int k = time_members_per_node(hw, lo->tp, D);
    /* routed experts reduce over edp (their own group, after the dense
     * buckets on the same stream): their calls are added to the dense ones */
    int E = layout_edp(lo), ke = time_members_per_node(hw, layout_etp(lo) * lo->ep, E > 0 ? E : 1);
#define XC(bytes_per, allreduce) (Pe > 0 && E > 1 ? dp_coll(hw, Pe * (bytes_per), E, ke, allreduce) : 0.0)
    int mb = layout_microbatches(lo);
    /* one micro-batch's backward and forward passes of the stage, each
     * layer at its own kind's time (a mixture's MoE layers last longer) */
    int nd = lo->layers[s], nm = 0;
    if (spec_is_moe(m)) {
        int c[2][RECOMPUTE_COUNT];
        memory_stage_layer_mix(m, lo, s, lo->layers[s], 0, 0, c);   /* kinds only */
        nd = memory_mix_kind(c, 0), nm = memory_mix_kind(c, 1);
    }
    double bwd_mb = nd * (lt->bwd + lt->tp_bwd) + nm * (lt->moe_bwd + lt->moe_tp_bwd);
    double fwd_mb = nd * (lt->fwd + lt->tp_fwd) + nm * (lt->moe_fwd + lt->moe_tp_fwd);
    int v = lo->vp > 1 ? lo->vp : 1;
    /* without --overlap-grad-reduce the gradient reduction waits for the
     * whole backward: nothing of it hides behind backward compute */
    double bwd_hide = (lo->overlap_grad ? hw->dp_overlap : 0.0) * bwd_mb;
    /* without --overlap-param-gather (which Megatron allows only with
     * --overlap-grad-reduce) the distributed optimizer's all-gather of the
     * updated parameters runs after the step, before the next forward */
    double fwd_hide = (lo->overlap_param && lo->overlap_grad ? hw->dp_overlap : 0.0) * fwd_mb;
    double t;
    switch (lo->opt) {
    case OPT_ZERO0: {
        /* buckets of max(4e7, 1e6 dp) parameters reduce during the last backward; the last one is exposed */
        double total = dp_coll(hw, P * gb, D, k, true) + XC(gb, true);
        double last = dp_coll(hw, dp_bucket_params(lo, P) * gb, D, k, true);
        t = fmax(last, dp_hidden_tail(total, v, lo->pp, s, bwd_hide, true));
        break;
    }
    case OPT_ZERO1:
    case OPT_DISTOPT: {
        double rs = dp_coll(hw, P * gb, D, k, false) + XC(gb, false);
        double ag = dp_coll(hw, P * wb_ag, D, k, false) + XC(wbe_ag, false);
        double last = dp_coll(hw, dp_bucket_params(lo, P) * gb, D, k, false);
        /* reduce-scatter hides behind the last backward, the all-gather behind the next forward */
        t = fmax(last, dp_hidden_tail(rs, v, lo->pp, s, bwd_hide, true)) +
            dp_hidden_tail(ag, v, lo->pp, s, fwd_hide, false);
        break;
    }
    case OPT_ZERO2: {
        /* Gradients are reduce-scattered every micro-batch, each as its
         * backward produces them, on the communication stream, which runs
         * on while the GPU computes what follows: the next micro-batches'
         * forwards and backwards (1F1B's steady state and cool-down, or
         * plain accumulation at pp 1). Exposed: the step's m reduce-scatters
         * beyond that compute (the forwards after the first backward and the
         * other m - 1 backwards) and the last one's own backward, but never
         * less than the last one's excess over its own backward. Forwards
         * before a stage's first backward (its warm-up): pp - s, or
         * (2(pp - s - 1) + (v - 1) pp + 1) / v micro-batches interleaved
         * (Megatron-core's warm-up count in chunks), at most m. The
         * pipeline's idle waits are not counted as cover. Without
         * --overlap-grad-reduce nothing hides. */
        double rs = dp_coll(hw, P * gb, D, k, false) + XC(gb, false);
        double ag = dp_coll(hw, P * wb, D, k, false) + XC(wb, false);
        double ov = lo->overlap_grad ? hw->dp_overlap : 0.0;
        double warm = v > 1 ? (2.0 * (lo->pp - s - 1) + (v - 1.0) * lo->pp + 1.0) / v : (double)(lo->pp - s);
        warm = fmin(fmax(warm, 1.0), (double)mb);
        double after = (mb - warm) * fwd_mb + (mb - 1) * bwd_mb;
        t = fmax(fmax(0.0, rs - bwd_hide), mb * rs - ov * after - bwd_hide) + ag;
        break;
    }
    case OPT_ZERO3:
    default: {
        /* parameters gathered for forward and backward of every micro-batch */
        double rs = zero3_coll(hw, P * gb, D, k, lo->layers[s]) + XC(gb, false);
        double ag = zero3_coll(hw, P * wb_ag, D, k, lo->layers[s]) + XC(wbe_ag, false);
        /* a prefetch of fewer parameters than a layer holds hides only that share */
        double per_layer = lo->layers[s] > 0 ? P / lo->layers[s] : P;
        double hide = hw->zero3_prefetch_params > 0 ? fmin(1.0, hw->zero3_prefetch_params / per_layer) : 1.0;
        t = mb * (fmax(0.0, ag - hide * hw->dp_overlap * fwd_mb) + fmax(0.0, ag + rs - hide * bwd_hide));
        break;
    }
    }
    /* tied embeddings with pp > 1: first and last stage all-reduce the embedding grad */
    if (m->tied && lo->pp > 1 && (s == 0 || s == lo->pp - 1)) {
        double V = (double)spec_padded_vocab(m, lo->tp);
        t += dp_coll(hw, V * m->h / lo->tp * gb, 2, 1, true);
    }
#undef XC
    return t;
}

/* One GPU steps the parameters whose optimizer states it holds (all of the
 * stage's under ZeRO-0, its 1/(dp·cp) shard otherwise): it reads and writes
 * the states (master, m, v), reads the gradient twice (norm, step) and
 * writes the weight, at the HBM curve. */
static double optim_s(const HwProfile *hw, const Layout *lo, double P)
{
    double D = lo->opt == OPT_ZERO0 ? 1.0 : (double)layout_dp_group(lo);
    double K = memory_optim_bytes(lo), gb = memory_grad_bytes(lo), wb = memory_weight_bytes(lo);
    return time_mem_s(hw, P / D * (2.0 * K + 2.0 * gb + wb));
}

double cost_stage_dp_s(const ModelSpec *m, const HwProfile *hw, const Layout *lo, const LayerTime *lt, int s)
{
    return dp_exposed(m, hw, lo, lt, s);
}

double cost_stage_optim_s(const HwProfile *hw, const Layout *lo, double params) { return optim_s(hw, lo, params); }

/* The stage's dense parameters step on 1/(dp·cp), its routed experts' on
 * 1/edp (ZeRO-1 and up); ZeRO-0 steps all. */
static double optim_split_s(const HwProfile *hw, const Layout *lo, double P, double Pe)
{
    if (Pe <= 0 || lo->opt == OPT_ZERO0)
        return optim_s(hw, lo, P);
    double K = memory_optim_bytes(lo), gb = memory_grad_bytes(lo), wb = memory_weight_bytes(lo);
    double E = layout_edp(lo) > 0 ? layout_edp(lo) : 1;
    return time_mem_s(hw, ((P - Pe) / layout_dp_group(lo) + Pe / E) * (2.0 * K + 2.0 * gb + wb));
}

double cost_stage_optim_n(const ModelSpec *m, const HwProfile *hw, const Layout *lo, int s, int layers)
{
    double Pe = 0, P = memory_stage_params_split(m, lo, s, layers, &Pe);
    return optim_split_s(hw, lo, P, Pe);
}

double cost_mfu_bf16_peak(const HwProfile *hw, const Layout *lo, const Cost *c)
{
    if (lo->prec != PREC_FP8 || !(hw->peak[PREC_BF16] > 0))
        return -1;
    return c->thr.tflops_per_gpu * 1e12 / hw->peak[PREC_BF16];
}

/* The exposed-communication and recompute phases of one micro-batch of
 * stage s: out[0] recompute, [1] TP, [2] CP, [3] EP. */
static void stage_phases(const ModelSpec *m, const Layout *lo, const LayerTime *lt, int s, double out[4])
{
    int n = lo->layers[s], f = lo->full_rc[s], e = lo->sel_rc[s];
    double rc = f * lt->rc_full + e * lt->rc_sel + (n - f) * lt->rc_mod;
    double tp = n * (lt->tp_fwd + lt->tp_bwd) + f * lt->tp_rc;
    double cpt = n * lt->cp, ep = 0;
    if (spec_is_moe(m)) {
        int k[2][RECOMPUTE_COUNT];
        memory_stage_layer_mix(m, lo, s, n, f, e, k);
        int nd = memory_mix_kind(k, 0), nm = memory_mix_kind(k, 1);
        rc = k[0][RECOMPUTE_FULL] * lt->rc_full + k[0][RECOMPUTE_SELECTIVE] * lt->rc_sel +
             k[1][RECOMPUTE_FULL] * lt->moe_rc_full + k[1][RECOMPUTE_SELECTIVE] * lt->moe_rc_sel +
             (nd - k[0][RECOMPUTE_FULL]) * lt->rc_mod + (nm - k[1][RECOMPUTE_FULL]) * lt->moe_rc_mod;
        tp = nd * (lt->tp_fwd + lt->tp_bwd) + k[0][RECOMPUTE_FULL] * lt->tp_rc + nm * (lt->moe_tp_fwd + lt->moe_tp_bwd) +
             k[1][RECOMPUTE_FULL] * lt->moe_tp_rc;
        ep = nm * (lt->ep_fwd + lt->ep_bwd) + k[1][RECOMPUTE_FULL] * lt->ep_rc;
        if (s == layout_mtp_stage(lo) && m->mtp_layers > 0 && spec_layer_is_moe(m, m->L))
            ep += m->mtp_layers * (lt->ep_fwd + lt->ep_bwd);
    }
    out[0] = rc, out[1] = tp, out[2] = cpt, out[3] = ep;
}

void cost(const ModelSpec *m, const HwProfile *hw, const Layout *lo, const CostOpts *o, Cost *c)
{
    memset(c, 0, sizeof *c);
    c->pp = lo->pp;
    c->capacity_bytes = hw->hbm_bytes;
    for (int s = 0; s < lo->pp; s++) {
        memory_stage(m, hw, lo, s, &c->stage[s]);
        if (c->stage[s].total > c->peak_bytes) {
            c->peak_bytes = c->stage[s].total;
            c->peak_stage = s;
        }
    }
    c->fits = c->peak_bytes <= c->capacity_bytes;

    LayerTime lt;
    time_layer(m, hw, lo, &lt);
    int mb = layout_microbatches(lo);
    bool dual = lo->pp_sched == PP_SCHED_DUALPIPE && lo->pp >= 2;
    double z_st[LAYOUT_MAX_PP];
    for (int s = 0; s < lo->pp; s++)
        z_st[s] = time_stage_mb(m, hw, lo, &lt, s, lo->layers[s], lo->full_rc[s], lo->sel_rc[s]);
    /* the time of one micro-batch on pipeline rank s: its stage's, or under
     * DualPipe the mean of the two stages it holds, half the micro-batches
     * running through each */
    int bott = 0;
    double sum = 0;
    for (int s = 0; s < lo->pp; s++) {
        c->stage_mb_s[s] = dual ? 0.5 * (z_st[s] + z_st[layout_pp_mirror(lo, s)]) : z_st[s];
        sum += c->stage_mb_s[s];
        if (c->stage_mb_s[s] > c->stage_mb_s[bott])
            bott = s;
    }
    double z = c->stage_mb_s[bott];

    /* phases of the bottleneck rank, m times; the rest of the pipeline is bubble */
    double ph[4], ph2[4];
    stage_phases(m, lo, &lt, bott, ph);
    if (dual) {   /* the mean of the rank's two stages */
        stage_phases(m, lo, &lt, layout_pp_mirror(lo, bott), ph2);
        for (int k = 0; k < 4; k++)
            ph[k] = 0.5 * (ph[k] + ph2[k]);
    }
    double rc = ph[0], tp = ph[1], cpt = ph[2], ep = ph[3];
    double pp = time_pp_mb(m, hw, lo);
    c->time[T_RECOMPUTE] = mb * rc;
    c->time[T_TP] = mb * tp;
    c->time[T_CP] = mb * cpt;
    c->time[T_PP] = mb * pp;
    c->time[T_EP] = mb * ep;
    c->time[T_COMPUTE] = mb * (z - rc - tp - cpt - pp - ep);
    if (dual) {
        /* DualPipe: (pp/2 - 1)(F&B + B - 3W) (DeepSeek-V3 report Table 2, the
         * DualPipe README), in the rank's mean F, B, W: F&B, a forward chunk
         * overlapped with another micro-batch's backward chunk, lasts their
         * compute, F + B = z, the transfers hidden (time_layer's EP overlap,
         * time_pp_mb); B the full backward, z - F (recomputation runs in it);
         * W its weight-gradient GEMMs, which DualPipe defers into the fill and
         * drain (zero bubble) */
        double f1, w1, f2, w2;
        time_stage_fw(m, hw, lo, &lt, bott, &f1, &w1);
        time_stage_fw(m, hw, lo, &lt, layout_pp_mirror(lo, bott), &f2, &w2);
        double F = 0.5 * (f1 + f2), W = 0.5 * (w1 + w2), B = z - F;
        c->time[T_BUBBLE] = (lo->pp / 2 - 1) * fmax(0.0, z + B - 3.0 * W);
    } else {
        /* 1F1B: the pipeline takes (m - 1) z + sum of stage times, so the bubble
         * is sum - z; interleaved, the fill shrinks by v. Written without the
         * m z that cancelled to -1e-9 s at m = 2^28. */
        c->time[T_BUBBLE] = lo->vp > 1 ? (lo->pp - 1) * z / lo->vp : sum - z;
    }

    double dp = 0, opt = 0;
    for (int s = 0; s < lo->pp; s++) {
        double d = dp_exposed(m, hw, lo, &lt, s);
        if (dual)   /* both stages' gradients reduced, over both copies' ranks */
            d += dp_exposed(m, hw, lo, &lt, layout_pp_mirror(lo, s));
        dp = fmax(dp, d);
        /* StageMem.params holds both of a DualPipe rank's stages; ZeRO's shard of their optimizer
         * states spans both copies' ranks (memory_stage), so the rank steps half of them */
        double o = optim_split_s(hw, lo, c->stage[s].params, c->stage[s].expert_params);
        opt = fmax(opt, dual && lo->opt != OPT_ZERO0 ? 0.5 * o : o);
    }
    c->time[T_DP] = dp;
    c->time[T_OPTIM] = opt;
    c->step_s = 0;
    for (int k = 0; k < T_COUNT; k++)
        c->step_s += c->time[k];

    int gpus = layout_gpus(lo);
    c->tokens_per_step = (double)lo->gbs * m->s;
    Throughput *th = &c->thr;
    th->flops_per_token = train_model_flops_per_token(m, lo);
    th->tokens_per_s = c->tokens_per_step / c->step_s;
    th->tflops_per_gpu = th->flops_per_token * th->tokens_per_s / gpus / 1e12;
    th->mfu = th->flops_per_token * th->tokens_per_s / (gpus * hw->peak[lo->prec]);
    th->hfu = train_hw_flops_per_token(m, lo) * th->tokens_per_s / (gpus * hw->peak[lo->prec]);
    train_fill(m, hw, lo, o, c->tokens_per_step, c->step_s, &c->train);
}

static const char *const mem_names[] = {"weights", "grads", "optimizer", "activations", "buffers", "overhead"};
static const char *const time_names[] = {"compute", "recompute", "tp", "cp", "pp", "bubble", "dp", "optimizer", "ep"};
_Static_assert(sizeof mem_names / sizeof *mem_names == MEM_COUNT, "mem names");
_Static_assert(sizeof time_names / sizeof *time_names == T_COUNT, "time names");

const char *cost_mem_name(MemKind k) { return mem_names[k]; }
const char *cost_time_name(TimeKind k) { return time_names[k]; }
