/* report.c — text and JSON forms of a prediction; the plan file. Both carry
 * the prediction's 80 % error band (calib/band.h: from the residuals of the
 * nearest measured runs in the shipped table): text "step time 17.5 s (80 %
 * band 16.1-19.3 s ...)", JSON time.step_s_range, throughput.mfu_range,
 * throughput.tokens_per_s_range and band {runs, lo_pct, hi_pct, sources,
 * rule}. No band (none printed) when the step is not finite. */
#include "report.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "band.h"
#include "profile.h"

/* ---- JSON out ---- */

static void move_items(cJSON *dst, cJSON *src)
{
    cJSON *it;
    while ((it = src->child) != NULL) {
        cJSON_DetachItemViaPointer(src, it);
        cJSON_AddItemToObject(dst, it->string, it);
    }
    cJSON_Delete(src);
}

cJSON *report_predict_json(const ModelSpec *m, const HwProfile *hw, const Layout *lo, const Cost *c,
                           const char *model_rule)
{
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "format", PREDICT_FORMAT);
    cJSON *mj = plan_model_json(m);
    if (model_rule && *model_rule)
        cJSON_AddStringToObject(mj, "rule", model_rule);
    cJSON_AddItemToObject(j, "model", mj);
    cJSON *hj = cJSON_AddObjectToObject(j, "hardware");
    cJSON_AddStringToObject(hj, "name", hw->name);
    cJSON_AddNumberToObject(hj, "gpus", layout_gpus(lo));
    cJSON_AddNumberToObject(hj, "gpus_per_node", hw->gpus_per_node);
    cJSON_AddNumberToObject(hj, "peak_flops", hw->peak[lo->prec]);
    cJSON_AddItemToObject(j, "layout", plan_layout_json(lo));
    move_items(j, plan_cost_json(m, lo, c));
    plan_add_mfu_bf16_peak(cJSON_GetObjectItemCaseSensitive(j, "throughput"), hw, lo, c);
    report_band_json(j, m, hw, lo, c);
    return j;
}

static int band_for(const ModelSpec *m, const HwProfile *hw, const Layout *lo, const Cost *c, Band *b)
{
    if (!isfinite(c->step_s) || !(c->step_s > 0) || band_of_cost(m, hw, lo, c, b) != 0 || b->runs == 0)
        return -1;
    return 0;
}

static void add_range(cJSON *o, const char *name, double lo, double hi)
{
    if (!o)
        return;
    cJSON *a = cJSON_AddArrayToObject(o, name);
    cJSON_AddItemToArray(a, cJSON_CreateNumber(lo));
    cJSON_AddItemToArray(a, cJSON_CreateNumber(hi));
}

void report_band_json(cJSON *j, const ModelSpec *m, const HwProfile *hw, const Layout *lo, const Cost *c)
{
    Band b;
    if (band_for(m, hw, lo, c, &b))
        return;
    add_range(cJSON_GetObjectItemCaseSensitive(j, "time"), "step_s_range", b.step_lo, b.step_hi);
    cJSON *th = cJSON_GetObjectItemCaseSensitive(j, "throughput");
    add_range(th, "mfu_range", b.mfu_lo, b.mfu_hi);
    add_range(th, "tokens_per_s_range", b.tok_lo, b.tok_hi);
    cJSON *bj = cJSON_AddObjectToObject(j, "band");
    cJSON_AddNumberToObject(bj, "coverage_pct", BAND_HI_PCT - BAND_LO_PCT);
    cJSON_AddNumberToObject(bj, "runs", b.runs);
    cJSON_AddNumberToObject(bj, "runs_same_gpu", b.same_gpu);
    cJSON_AddNumberToObject(bj, "runs_same_generation", b.same_gen);
    cJSON_AddNumberToObject(bj, "lo_pct", 100 * b.q_lo);
    cJSON_AddNumberToObject(bj, "hi_pct", 100 * b.q_hi);
    cJSON_AddStringToObject(bj, "sources", b.sources);
    cJSON_AddStringToObject(bj, "rule", b.rule);
}

/* ---- text ---- */

static const char *human(double v, char *buf, int len) { return util_si(v, 3, buf, len); }

static void print_duration(FILE *f, double s)
{
    char b[48];
    fputs(util_duration(s, b, sizeof b), f);
}

void report_text(FILE *f, const ModelSpec *m, const HwProfile *hw, const Layout *lo, const Cost *c,
                 const char *model_rule)
{
    char b1[32], b2[32];
    fprintf(f, "%s on %d x %s (%s), %d GPUs per node\n", m->name, layout_gpus(lo), hw->name, hw->desc,
            hw->gpus_per_node);
    if (model_rule && *model_rule)
        fprintf(f, "  shape rule: %s\n", model_rule);
    /* the main model's counts, as published, and the MTP modules' apart (DeepSeek-V3: 671B + 11.6B) */
    double mtp = (double)spec_mtp_params(m), mtp_active = (double)spec_mtp_params_active(m);
    char with_mtp[48] = "", active_mtp[48] = "";
    if (mtp > 0) {
        snprintf(with_mtp, sizeof with_mtp, " + %s MTP", human(mtp, b2, 32));
        snprintf(active_mtp, sizeof active_mtp, " (+ %s MTP)", human(mtp_active, b2, 32));
    }
    fprintf(f, "model   %d layers, hidden %d, %d heads (%d kv, dim %d), ffn %d, vocab %d (padded %lld), seq %d,\n"
               "        %s, %s, %s positions%s%s, %s params%s\n",
            m->L, m->h, m->a, m->g, spec_head_dim(m), m->f, m->vocab, (long long)spec_padded_vocab(m, lo->tp), m->s,
            spec_mlp_name(m->mlp), spec_norm_name(m->norm), spec_pos_name(m->pos), m->bias ? ", biases" : "",
            m->tied ? ", tied head" : ", untied head",
            human((double)spec_params(m, lo->tp, PARAMS_EXACT) - mtp, b1, 32), with_mtp);
    if (spec_is_moe(m)) {
        char fr[64], shared[48] = "", cap[48] = ", dropless";
        spec_format_moe_freq(m, fr, sizeof fr);
        if (m->shared_ffn > 0)
            snprintf(shared, sizeof shared, ", shared ffn %d", m->shared_ffn);
        if (m->capacity_factor > 0)
            snprintf(cap, sizeof cap, ", capacity factor %g", m->capacity_factor);
        fprintf(f, "        %d experts (top %d, expert ffn %d%s), MoE layer freq %s (%d of %d layers)%s, %s active params%s\n",
                m->experts, m->topk, m->moe_ffn > 0 ? m->moe_ffn : m->f, shared, fr, spec_moe_layers(m), m->L, cap,
                human((double)spec_params_active(m, lo->tp, PARAMS_EXACT) - mtp_active, b1, 32), active_mtp);
    }
    if (m->window > 0 || m->sinks || m->act_clamp > 0) {   /* GPT-OSS's attention and activation */
        char win[96] = "full causal attention";
        if (m->window > 0)
            snprintf(win, sizeof win, "sliding window (a token and the %d before it) on %d of %d layers", m->window,
                     spec_windowed_layers(m), m->L);
        char act[64] = "";
        if (m->act_clamp > 0)
            snprintf(act, sizeof act, ", quick-GELU gate clamped at %g", m->act_clamp);
        fprintf(f, "        %s%s%s\n", win, m->sinks ? ", attention sinks" : "", act);
    }
    if (m->attn == ATTN_MLA || m->mtp_layers > 0)
        fprintf(f, "        %s attention (q rank %d, kv rank %d, qk %d+%d, v %d), %d MTP module(s)\n",
                spec_attn_name(m->attn), m->q_lora_rank, m->kv_lora_rank, m->qk_nope_dim, m->qk_rope_dim,
                m->v_head_dim, m->mtp_layers);
    fprintf(f, "layout  dp %d, tp %d, pp %d, vp %d, cp %d; sp %s; mbs %d, gbs %d (%d micro-batches); %s; %s%s; %s attention\n",
            lo->dp, lo->tp, lo->pp, lo->vp, lo->cp, lo->sp ? "on" : "off", lo->mbs, lo->gbs,
            layout_microbatches(lo), layout_opt_name(lo->opt), hw_precision_name(lo->prec),
            lo->grad_fp32 ? " (fp32 grads)" : "", lo->fp8_dpa ? "fp8 flash" : lo->flash ? "flash" : "unfused");
    if (lo->pp_sched == PP_SCHED_DUALPIPE)
        fprintf(f, "        schedule DualPipe: rank r holds stages r and %d-r (the model twice), micro-batches from "
                   "both ends, forward and backward chunks overlapped\n", lo->pp - 1);
    if (layout_sel_op_used(m, lo))   /* what the "s" of recompute f/s means under this stack */
        fprintf(f, "        selective recomputation: the stack's per-op policy (SelectiveAC: every second matmul and "
                   "every other op run again, the attention's output kept)\n");
    if (spec_is_moe(m)) {   /* parallel folding: the expert layers' split of the same ranks */
        const char *act = lo->prec == PREC_FP32 ? "fp32" : "bf16";
        char wire[96];
        snprintf(wire, sizeof wire, "in %s%s%s", act,
                 lo->moe_dispatch_wire == MOE_WIRE_MXFP8 ? ", forward dispatch in mxfp8" : "",
                 lo->moe_combine_bwd_wire == MOE_WIRE_MXFP8 ? ", combine gradient in mxfp8" : "");
        fprintf(f, "        expert layers: etp %d x ep %d x edp %d; %s dispatcher %s%s; routing imbalance %g%s\n",
                layout_etp(lo), lo->ep, layout_edp(lo), layout_dispatcher_name(lo->moe_dispatcher), wire,
                !time_moe_a2a_overlap(lo)          ? ""
                : lo->pp_sched == PP_SCHED_DUALPIPE ? ", overlapped (DualPipe's paired chunks)"
                                                    : ", overlapped (1F1B A2A)",
                layout_moe_imbalance(lo),
                lo->moe_imbalance > 0 ? "" : " (default)");
    }

    fprintf(f, "\nmemory per GPU (GiB)  layers  inflight  weights   grads   optim    acts  buffers  overhead    total  recompute f/s\n");
    for (int s = 0; s < c->pp; s++) {
        const StageMem *sm = &c->stage[s];
        fprintf(f, "  stage %-4d          %6d  %8.2f", s, sm->layers, sm->inflight);
        for (int k = 0; k < MEM_COUNT; k++)
            fprintf(f, " %7.2f%s", sm->bytes[k] / 1073741824.0, k == MEM_BUFFERS ? "  " : k == MEM_OVERHEAD ? "  " : "");
        fprintf(f, "  %7.2f  %d/%d%s\n", sm->total / 1073741824.0, lo->full_rc[s], lo->sel_rc[s],
                s == c->peak_stage ? "  <- peak" : "");
    }
    if (c->fits)
        fprintf(f, "  peak %s of %s: fits (%.0f%%)\n", util_gib(c->peak_bytes, b1, 32),
                util_gib(c->capacity_bytes, b2, 32), 100 * c->peak_bytes / c->capacity_bytes);
    else
    {
        char b3[32];
        fprintf(f, "  peak %s of %s: DOES NOT FIT, stage %d is %s over\n", util_gib(c->peak_bytes, b1, 32),
                util_gib(c->capacity_bytes, b2, 32), c->peak_stage,
                util_gib(c->peak_bytes - c->capacity_bytes, b3, 32));
    }

    Band band;
    bool have_band = band_for(m, hw, lo, c, &band) == 0;
    if (have_band)
        fprintf(f, "\nstep time %.4g s (80 %% band %.4g-%.4g s: %+.0f%% to %+.0f%%, from %d measured runs: %s)\n",
                c->step_s, band.step_lo, band.step_hi, 100 * band.q_lo, 100 * band.q_hi, band.runs, band.sources);
    else
        fprintf(f, "\nstep time %.4g s\n", c->step_s);
    for (int k = 0; k < T_COUNT; k++)
        if (c->time[k] > 0)
            fprintf(f, "  %-10s %10.4g s  %5.1f%%\n", cost_time_name((TimeKind)k), c->time[k],
                    100 * c->time[k] / c->step_s);
    char pm[32], ph[32];
    fprintf(f, "\nthroughput %s tokens/s, %.4g TFLOP/s per GPU, MFU %s, HFU %s (%s FLOPs, %.4g per token; peak %.0f TFLOP/s %s)\n",
            human(c->thr.tokens_per_s, b1, 32), c->thr.tflops_per_gpu, util_pct(c->thr.mfu, pm, sizeof pm),
            util_pct(c->thr.hfu, ph, sizeof ph), spec_flops_name(lo->flops), c->thr.flops_per_token,
            hw->peak[lo->prec] / 1e12, hw_precision_name(lo->prec));
    if (have_band) {
        char t1[32], t2[32], p1[32], p2[32];
        fprintf(f, "  80 %% band: MFU %s-%s, %s-%s tokens/s%s\n", util_pct(band.mfu_lo, p1, sizeof p1),
                util_pct(band.mfu_hi, p2, sizeof p2), human(band.tok_lo, t1, 32), human(band.tok_hi, t2, 32),
                band.same_gen < band.runs ? " (runs of other GPU generations included: few of this one measured)"
                                          : "");
    }
    double causal = plan_tflops_causal(m, lo, c);
    if (lo->flops != FLOPS_CAUSAL && causal > 0)
        fprintf(f, "  Megatron's --log-throughput counts causal attention: %.4g TFLOP/s per GPU\n", causal);
    if (cost_mfu_bf16_peak(hw, lo, c) >= 0)
        fprintf(f, "  MFU against the bf16 peak (%.0f TFLOP/s), as fp8 runs are often quoted: %.1f%%\n",
                hw->peak[PREC_BF16] / 1e12, 100 * cost_mfu_bf16_peak(hw, lo, c));
    if (c->thr.mfu > 1.0)
        fprintf(f, "  note: MFU above 100%% is the FLOP convention, not the GPU: %s FLOPs count attention "
                   "work the kernels skip (flash computes only the causal half of s^2); --flops causal "
                   "(Megatron's count since 2025-03) counts what runs\n", spec_flops_name(lo->flops));
    const Training *tr = &c->train;
    char b3[32];
    char d1[48];
    fprintf(f, "training %s tokens: %s steps, %s ideal, ", human(tr->tokens, b1, 32), human(tr->steps, b2, 32),
            util_duration(tr->days * 86400, d1, sizeof d1));
    if (isfinite(tr->days_with_failures))
        fprintf(f, "%s with failures", util_duration(tr->days_with_failures * 86400, d1, sizeof d1));
    else
        fprintf(f, "never finishes with failures");
    fprintf(f, ", %s GPU-hours\n", human(tr->gpu_hours, b3, 32));
    if (tr->dollars > 0) {
        char m1[32], m2[32];
        fprintf(f, "  cost $%s ideal, $%s with failures (at $%.2f per GPU-hour)\n", util_si(tr->dollars, 4, m1, 32),
                isfinite(tr->dollars_with_failures) ? util_si(tr->dollars_with_failures, 4, m2, 32) : "never finishes",
                tr->dollars / tr->gpu_hours);
    }
    fprintf(f, "  failures: %.2f per day (P(>=1 per day) %.1f%%), %.4g over the run, job MTBF ", tr->fail_per_day,
            100 * tr->p_fail_day, tr->failures);
    print_duration(f, tr->job_mtbf_s);
    fprintf(f, "\n  checkpoint %s written in ", util_bytes(tr->ckpt_bytes, b1, 32));
    print_duration(f, tr->ckpt_write_s);
    fprintf(f, "; Daly interval ");
    print_duration(f, tr->daly_s);
    if (isfinite(tr->days_with_failures)) {
        fprintf(f, "; waste %.1f%% -> %s with failures\n", 100 * tr->waste,
                util_duration(tr->days_with_failures * 86400, d1, sizeof d1));
    } else {
        /* waste >= 1: checkpoint stalls, rework and restarts take all the time */
        fprintf(f, "; waste %.3g%%: the job never finishes (each failure costs ", 100 * tr->waste);
        print_duration(f, (tr->waste - tr->ckpt_write_s / tr->daly_s) * tr->job_mtbf_s);   /* restart + daly/2 */
        fprintf(f, " of restart and rework, and failures come every ");
        print_duration(f, tr->job_mtbf_s);
        fprintf(f, ")\n");
    }
}

