/* export.c — a plan as Megatron-LM arguments, a torchtitan configuration, or
 * a Slurm script (our executor or Megatron-LM), and Megatron's arguments read
 * back (export.h). It refuses what the framework cannot run as planned; it
 * does not choose layouts (the planner's --target megatron does).
 *
 * Flags checked against NVIDIA/Megatron-LM d98e8a64ddf3 (2026-08-22) and
 * pytorch/torchtitan b5bcd76c66d0 (2026-08-21); docs/EXPORT.md. */
#include "export.h"

#include "knobs.h"
#include "refuse.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* A growing string; on out of memory it sets failed and drops the rest. */
typedef struct {
    char *s;
    size_t n, cap;
    int failed;
} Buf;

static void put(Buf *b, const char *fmt, ...)
{
    if (b->failed)
        return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int k = vsnprintf(b->s ? b->s + b->n : NULL, b->s ? b->cap - b->n : 0, fmt, ap);
        va_end(ap);
        if (k < 0) {
            b->failed = 1;
            return;
        }
        if (b->s && b->n + (size_t)k < b->cap) {
            b->n += (size_t)k;
            return;
        }
        size_t cap = (b->cap ? b->cap * 2 : 1024) + (size_t)k;
        char *s = realloc(b->s, cap);
        if (!s) {
            b->failed = 1;
            return;
        }
        b->s = s;
        b->cap = cap;
    }
}

/* Append s as one single-quoted shell word: 'it'\''s' for it's. */
static void put_quoted(Buf *b, const char *s)
{
    put(b, "'");
    for (; *s; s++) {
        if (*s == '\'')
            put(b, "'\\''");
        else
            put(b, "%c", *s);
    }
    put(b, "'");
}

static char *finish(Buf *b)
{
    if (b->failed) {
        free(b->s);
        return NULL;
    }
    return b->s;
}

static const char *const format_names[] = {"megatron", "slurm", "slurm-megatron", "torchtitan"};
_Static_assert(sizeof format_names / sizeof *format_names == EXPORT_FORMAT_COUNT, "export formats");

int export_parse_format(const char *s, ExportFormat *out)
{
    for (int i = 0; i < EXPORT_FORMAT_COUNT; i++)
        if (!strcasecmp(s, format_names[i])) {
            *out = (ExportFormat)i;
            return 0;
        }
    return -1;
}

const char *export_format_name(ExportFormat f)
{
    return f >= 0 && f < EXPORT_FORMAT_COUNT ? format_names[f] : "?";
}

void export_opts_default(ExportOpts *o)
{
    memset(o, 0, sizeof *o);
    o->plan_path = "plan.json";
    o->job_name = "ultraplan";
    o->time_limit = "48:00:00";
    o->ckpt_dir = "checkpoints";
    o->backend = -1;
    o->ultraplan = "ultraplan";
}

/* n decimal digits (1..max) at *p, advanced past them; its value or -1. */
static long digits(const char **p, int max)
{
    long v = 0;
    int n = 0;
    while (isdigit((unsigned char)**p) && n < max) {
        v = v * 10 + (**p - '0');
        (*p)++;
        n++;
    }
    return n ? v : -1;
}

int export_check_time(const char *s, char *err, int errlen)
{
    static const char *forms = "MM, MM:SS, HH:MM:SS, D-HH, D-HH:MM or D-HH:MM:SS";
    if (!strcasecmp(s, "UNLIMITED") || !strcasecmp(s, "INFINITE"))
        return 0;
    const char *p = s;
    long f[4];
    int n = 0;
    long days = -1;
    const char *dash = strchr(s, '-');
    if (dash) {
        days = digits(&p, 5);
        if (days < 0 || p != dash)
            goto bad;
        p++;
    }
    for (;;) {
        long v = digits(&p, 4);
        if (v < 0 || n == 3)
            goto bad;
        f[n++] = v;
        if (*p == 0)
            break;
        if (*p != ':')
            goto bad;
        p++;
    }
    /* without days: MM, MM:SS, HH:MM:SS; with days: D-HH, D-HH:MM, D-HH:MM:SS */
    if (days >= 0) {
        if (f[0] > 23 || (n > 1 && f[1] > 59) || (n > 2 && f[2] > 59))
            goto bad;
    } else if (n == 2) {
        if (f[1] > 59)
            goto bad;
    } else if (n == 3) {
        if (f[1] > 59 || f[2] > 59)
            goto bad;
    }
    long total = (days > 0 ? days : 0) + f[0] + (n > 1 ? f[1] : 0) + (n > 2 ? f[2] : 0);
    if (total == 0) {
        snprintf(err, errlen, "--time: \"%s\" is no time at all (Slurm would reject it)", s);
        return -1;
    }
    return 0;
bad:
    snprintf(err, errlen, "--time: expected a Slurm time limit (%s), got \"%s\"", forms, s);
    return -1;
}

int export_check_job_name(const char *s, char *err, int errlen)
{
    size_t n = strlen(s);
    int ok = n > 0 && n <= 128;
    for (const char *p = s; ok && *p; p++)
        ok = isalnum((unsigned char)*p) || *p == '-' || *p == '_' || *p == '.';
    if (!ok)
        snprintf(err, errlen, "--job-name: 1 to 128 letters, digits, '-', '_' or '.', got \"%s\"", s);
    return ok ? 0 : -1;
}

/* ---- Megatron-LM ---- */

/* Layers stage s recomputes under --recompute-method block --recompute-num-layers N: min(N, chunk) of each
 * (the read-back's rule; layout_megatron_form chooses N by the same). */
static int chunk_recompute(const Layout *lo, int s, int N)
{
    int k = 0;
    for (int c = 0; c < lo->vp; c++) {
        int ch = layout_chunk_layers(lo, s, c);
        k += N < ch ? N : ch;
    }
    return k;
}

/* "a/b/c" of a per-stage list. */
static void stage_list(const int *v, int pp, char *buf, size_t len)
{
    size_t k = 0;
    buf[0] = 0;
    for (int s = 0; s < pp && k + 24 < len; s++)
        k += (size_t)snprintf(buf + k, len - k, "%s%d", s ? "/" : "", v[s]);
}

/* How Megatron-LM takes the plan's stage split and recomputation: what
 * layout_megatron_form (model/layout.h) says, the one rule of what Megatron
 * expresses (the planner's --target megatron keeps to it too). -1 with err:
 * its reason and the plan's per-stage counts. */
static int megatron_form(const Layout *lo, const ModelSpec *m, MegatronForm *form, char *err, int errlen)
{
    char why[400];
    /* a reason no stage split cures says itself what to plan instead */
    if (layout_megatron_unsplit(lo, why, sizeof why) != 0) {
        snprintf(err, errlen, "megatron: %s", why);
        return -1;
    }
    if (layout_megatron_form(lo, m, form, why, sizeof why) == 0)
        return 0;
    char layers[512], full[512], sel[512], rc[1100] = "";
    stage_list(lo->layers, lo->pp, layers, sizeof layers);
    stage_list(lo->full_rc, lo->pp, full, sizeof full);
    stage_list(lo->sel_rc, lo->pp, sel, sizeof sel);
    bool any_f = false, any_s = false;
    for (int s = 0; s < lo->pp; s++) {
        any_f |= lo->full_rc[s] > 0;
        any_s |= lo->sel_rc[s] > 0;
    }
    if (any_f || any_s)
        snprintf(rc, sizeof rc, "; recomputed%s%s%s%s%s", any_f ? " fully " : "", any_f ? full : "",
                 any_f && any_s ? "," : "", any_s ? " selectively " : "", any_s ? sel : "");
    snprintf(err, errlen, "megatron: %s (layers per stage %s%s): plan with --target megatron", why, layers, rc);
    return -1;
}

char *export_megatron(const ModelSpec *m, const HwProfile *hw, const Layout *lo, char *err, int errlen)
{
    if (lo->pp < 1 || lo->pp > LAYOUT_MAX_PP || lo->vp < 1) {
        snprintf(err, errlen, "megatron: pp %d, vp %d: not a checked layout", lo->pp, lo->vp);
        return NULL;
    }
    (void)hw;   /* --tp-comm-overlap follows the layout's switch, not the profile */
    int rcm = layout_rc_modules(lo), any_full = 0;
    for (int s = 0; s < lo->pp; s++)
        any_full |= lo->full_rc[s] > 0;
    if (any_full && rcm) {   /* named before the split's rules: it is the one thing Megatron cannot say */
        snprintf(err, errlen, "megatron: the plan recomputes some layers fully and modules (--recompute-modules %s) "
                              "of the others; Megatron takes one --recompute-granularity", lo->rc_modules);
        return NULL;
    }
    if (layout_sel_op_used(m, lo)) {   /* priced as another framework's policy than the one written */
        snprintf(err, errlen, "megatron: the plan's selective recomputation is priced as torchtitan's per-op policy "
                              "(its stack's SelectiveAC); Megatron's --recompute-granularity selective recomputes "
                              "the attention core: plan with another --stack, or --recompute full or none");
        return NULL;
    }
    MegatronForm form;
    if (megatron_form(lo, m, &form, err, errlen) != 0)
        return NULL;
    int full = form.rc == MEGA_RC_FULL_UNIFORM || form.rc == MEGA_RC_FULL_BLOCK, sel = form.rc == MEGA_RC_SELECTIVE;
    int fsdp = lo->opt == OPT_ZERO2 || lo->opt == OPT_ZERO3;
    Buf b = {0};
    const char *args[128];
    char vals[128][LAYOUT_PPL_LEN + 2];   /* the longest: a quoted --pipeline-model-parallel-layout */
    int n = 0;
#define ARG(flag) (args[n] = (flag), vals[n][0] = 0, n++)
#define ARGV(flag, ...) (args[n] = (flag), snprintf(vals[n], sizeof vals[n], __VA_ARGS__), n++)
    put(&b, "# Megatron-LM arguments (pretrain_gpt.py) for %s on %d GPUs: dp %d, tp %d, pp %d, vp %d, cp %d\n",
        m->name, layout_gpus(lo), lo->dp, lo->tp, lo->pp, lo->vp, lo->cp);
    put(&b, "# checked against NVIDIA/Megatron-LM d98e8a64ddf3 (2026-08-22); data-parallel size %d follows from "
            "the world size\n", lo->dp);
    put(&b, "# vocabulary: %d (your tokenizer sets it; add tokenizer, data and schedule flags)\n", m->vocab);
    if (spec_is_moe(m)) {
        char imb[32];
        knob_format_double(layout_moe_imbalance(lo), imb, sizeof imb);
        put(&b, "# moe-imbalance: %s (the plan's routing-load assumption, no Megatron flag); expert layers: etp %d x "
                "ep %d x edp %d\n", imb, layout_etp(lo), lo->ep, layout_edp(lo));
    }
    if (lo->tp > 1 || lo->cp > 1)
        put(&b, "# environment: %s\n", fsdp ? "leave CUDA_DEVICE_MAX_CONNECTIONS unset (Megatron-FSDP asserts it is "
                                              "not 1)" : "CUDA_DEVICE_MAX_CONNECTIONS=1 (Megatron asserts it for "
                                                         "tp > 1 or cp > 1 before Blackwell)");
    if (lo->opt != OPT_ZERO0 && !lo->overlap_grad)
        put(&b, "# the plan does not overlap the gradient reduction, so no --overlap-param-gather either "
                "(Megatron needs --overlap-grad-reduce for it)\n");
    ARGV("--tensor-model-parallel-size", "%d", lo->tp);
    ARGV("--pipeline-model-parallel-size", "%d", lo->pp);
    if (form.pp_layout)   /* it sets vp: Megatron refuses --num-virtual-stages-per-pipeline-rank beside it */
        ARGV("--pipeline-model-parallel-layout", "'%s'", lo->pp_layout);
    else if (lo->vp > 1)
        ARGV("--num-virtual-stages-per-pipeline-rank", "%d", lo->vp);
    ARGV("--context-parallel-size", "%d", lo->cp);
    if (lo->cp > 1 && lo->cp_comm == CP_COMM_ALLGATHER)
        ARGV("--cp-comm-type", "%s", "all_gather");
    if (lo->sp && lo->tp > 1)
        ARG("--sequence-parallel");
    if (lo->tp_comm_overlap && lo->sp && lo->tp > 1)
        ARG("--tp-comm-overlap");
    if (lo->cuda_graph != CG_NONE) {   /* the graphs the step is priced with (model/timing.c layer_launches) */
        ARGV("--cuda-graph-impl", "%s", layout_cuda_graph_name(lo->cuda_graph));
        int cgm = layout_cg_modules(lo);
        if (cgm) {
            char mods[96];
            layout_format_cg_modules(cgm, " ", mods, sizeof mods);
            ARGV("--cuda-graph-modules", "%s", mods);
        }
        if (lo->cuda_graph == CG_FULL_ITERATION)   /* arguments.py asserts it for full-iteration training */
            ARG("--no-check-for-nan-in-loss-and-grad");
    }
    if (lo->opt == OPT_DISTOPT || lo->opt == OPT_ZERO1)
        ARG("--use-distributed-optimizer");
    if (lo->precision_aware_opt) {   /* both dtypes written: the read-back needs no default */
        ARG("--use-precision-aware-optimizer");
        ARGV("--exp-avg-dtype", "%s", hw_precision_name(lo->exp_avg_dtype));
        ARGV("--exp-avg-sq-dtype", "%s", hw_precision_name(lo->exp_avg_sq_dtype));
    }
    if (fsdp) {
        ARG("--use-megatron-fsdp");
        ARGV("--data-parallel-sharding-strategy", "%s", lo->opt == OPT_ZERO2 ? "optim_grads" : "optim_grads_params");
        ARGV("--ckpt-format", "fsdp_dtensor");
    }
    if (lo->overlap_grad && layout_dp_group(lo) > 1) {
        ARG("--overlap-grad-reduce");
        if (lo->opt != OPT_ZERO0 && lo->overlap_param)
            ARG("--overlap-param-gather");
    }
    if (form.first_layers || form.last_layers) {   /* both written: the read-back needs no even share */
        ARGV("--decoder-first-pipeline-num-layers", "%d", lo->layers[0]);
        ARGV("--decoder-last-pipeline-num-layers", "%d", lo->layers[lo->pp - 1]);
    }
    if (form.embed_in_split)
        ARG("--account-for-embedding-in-pipeline-split");
    if (form.loss_in_split)
        ARG("--account-for-loss-in-pipeline-split");
    if (full) {
        ARGV("--recompute-granularity", "full");
        ARGV("--recompute-method", "%s", form.rc == MEGA_RC_FULL_UNIFORM ? "uniform" : "block");
        ARGV("--recompute-num-layers", "%d", form.rc_layers);
    } else if (sel || rcm) {
        ARGV("--recompute-granularity", "selective");
        if (rcm) {   /* Megatron's list replaces its default [core_attn]: core attention is named when planned */
            char mods[160];
            layout_format_rc_modules(rcm, " ", mods, sizeof mods);
            ARGV("--recompute-modules", "%s%s", sel ? "core_attn " : "", mods);
        }
    }
    ARGV("--micro-batch-size", "%d", lo->mbs);
    ARGV("--global-batch-size", "%d", lo->gbs);
    ARGV("--num-layers", "%d", m->L);
    ARGV("--hidden-size", "%d", m->h);
    ARGV("--num-attention-heads", "%d", m->a);
    if (m->attn != ATTN_MLA && spec_head_dim(m) * m->a != m->h)
        ARGV("--kv-channels", "%d", spec_head_dim(m));
    if (m->g != m->a) {
        ARG("--group-query-attention");
        ARGV("--num-query-groups", "%d", m->g);
    }
    ARGV("--ffn-hidden-size", "%d", m->f);
    ARGV("--seq-length", "%d", m->s);
    ARGV("--max-position-embeddings", "%d", m->s);
    ARGV("--make-vocab-size-divisible-by", "%d", m->vocab_div > 0 ? m->vocab_div : 128);
    if (m->mlp == MLP_SWIGLU && m->act_clamp > 0) {   /* GPT-OSS: quick-GELU gate, clamped, linear half + 1 */
        ARG("--quick-geglu");
        ARGV("--activation-func-clamp-value", "%g", m->act_clamp);
        ARGV("--glu-linear-offset", "1.0");
    } else if (m->mlp == MLP_SWIGLU)
        ARG("--swiglu");
    if (m->window > 0) {
        ARGV("--window-size", "%d,0", m->window);
        if (m->window_skip_freq > 0)
            ARGV("--window-attn-skip-freq", "%d", m->window_skip_freq);
    }
    if (m->sinks)
        ARGV("--softmax-type", "learnable");
    ARGV("--normalization", "%s", m->norm == NORM_RMSNORM ? "RMSNorm" : "LayerNorm");
    ARGV("--position-embedding-type", "%s", m->pos == POS_ROPE ? "rope" : "learned_absolute");
    if (m->pos == POS_ROPE && m->rope_theta > 0 && m->rope_theta != 10000)
        ARGV("--rotary-base", "%d", m->rope_theta);
    if (m->pos == POS_ROPE && m->rope_scaling)
        ARG("--use-rope-scaling");
    if (!m->tied)
        ARG("--untie-embeddings-and-output-weights");
    if (!m->bias)
        ARG("--disable-bias-linear");
    if (!m->dropout) {
        ARGV("--attention-dropout", "0.0");
        ARGV("--hidden-dropout", "0.0");
    }
    if (lo->prec == PREC_FP16)
        ARG("--fp16");
    else if (lo->prec != PREC_FP32)
        ARG("--bf16");
    if (lo->prec == PREC_FP8) {
        ARGV("--fp8-format", "hybrid");
        ARGV("--fp8-recipe", "%s", layout_fp8_recipe_name(lo->fp8_recipe));
        if (lo->fp8_param_gather)
            ARG("--fp8-param-gather");
        if (lo->fp8_recipe == FP8R_DELAYED) {   /* the amax history is delayed scaling's alone */
            ARGV("--fp8-amax-history-len", "1024");
            ARGV("--fp8-amax-compute-algo", "max");
        }
    }
    if (lo->prec != PREC_FP32) {
        if (lo->grad_fp32)
            ARG("--accumulate-allreduce-grads-in-fp32");
        else if (lo->prec != PREC_FP16)
            ARG("--grad-reduce-in-bf16");
    }
    ARGV("--attention-backend", "%s", lo->flash ? "flash" : "unfused");
    if (m->attn == ATTN_MLA) {
        /* MLA (megatron/training/arguments.py _add_mla_args; --multi-latent-attention from TransformerConfig) */
        ARG("--multi-latent-attention");
        if (m->q_lora_rank > 0)   /* absent = None: no query compression */
            ARGV("--q-lora-rank", "%d", m->q_lora_rank);
        ARGV("--kv-lora-rank", "%d", m->kv_lora_rank);
        ARGV("--qk-head-dim", "%d", m->qk_nope_dim);
        ARGV("--qk-pos-emb-head-dim", "%d", m->qk_rope_dim);
        ARGV("--v-head-dim", "%d", m->v_head_dim);
    }
    if (m->mtp_layers > 0)
        ARGV("--mtp-num-layers", "%d", m->mtp_layers);
    if (spec_is_moe(m)) {
        /* _add_moe_args (--num-experts, --moe-layer-freq, router load balancing) and the TransformerConfig /
         * ModelParallelConfig fields ArgumentGroupFactory turns into --field-name flags */
        char freq[40];
        spec_format_moe_freq(m, freq, sizeof freq);
        ARGV("--num-experts", "%d", m->experts);
        ARGV("--moe-router-topk", "%d", m->topk);
        ARGV("--moe-ffn-hidden-size", "%d", m->moe_ffn > 0 ? m->moe_ffn : m->f);
        if (m->shared_ffn > 0)
            ARGV("--moe-shared-expert-intermediate-size", "%d", m->shared_ffn);
        if (m->moe_first_dense > 0)   /* the list form is a Python expression: one shell word */
            ARGV("--moe-layer-freq", "'%s'", freq);
        else
            ARGV("--moe-layer-freq", "%s", freq);
        if (m->router_groups > 0) {   /* group-limited routing (DeepSeek-V3's node-limited) */
            ARGV("--moe-router-num-groups", "%d", m->router_groups);
            ARGV("--moe-router-group-topk", "%d", m->router_group_topk);
        }
        ARGV("--expert-model-parallel-size", "%d", lo->ep);
        ARGV("--expert-tensor-parallel-size", "%d", layout_etp(lo));
        /* Megatron's default is allgather: the plan's dispatcher is written, flex with DeepEP */
        ARGV("--moe-token-dispatcher-type", "%s", layout_dispatcher_name(lo->moe_dispatcher));
        /* an MXFP8 wire is the ncclep backend's alone (transformer_config.py), with TE's op fuser that
         * hands the payload to the grouped GEMM; otherwise flex is written with DeepEP */
        bool mx_wire = lo->moe_dispatch_wire == MOE_WIRE_MXFP8 || lo->moe_combine_bwd_wire == MOE_WIRE_MXFP8;
        if (lo->moe_dispatcher == MOE_DISPATCH_FLEX)
            ARGV("--moe-flex-dispatcher-backend", "%s", mx_wire ? "ncclep" : "deepep");
        if (mx_wire) {
            ARGV("--moe-dispatch-fwd-dtype", "%s", layout_moe_wire_name(lo->moe_dispatch_wire));
            ARGV("--moe-combine-bwd-dtype", "%s", layout_moe_wire_name(lo->moe_combine_bwd_wire));
            ARG("--use-transformer-engine-op-fuser");
        }
        if (lo->moe_a2a_overlap)
            ARG("--overlap-moe-expert-parallel-comm");
        if (lo->moe_shared_overlap && m->shared_ffn > 0)
            ARG("--moe-shared-expert-overlap");
        /* flex is written with DeepEP, whose experts pad under fp8 unless the router does: the plan
         * prices flex without the experts' copies (HybridEP's dispatch pads), so the router pads */
        if (lo->moe_router_pad || (lo->moe_dispatcher == MOE_DISPATCH_FLEX && lo->prec == PREC_FP8))
            ARG("--moe-router-padding-for-quantization");
        ARG("--moe-grouped-gemm");
        ARGV("--moe-router-load-balancing-type", "aux_loss");
        ARGV("--moe-aux-loss-coeff", "1e-2");
        if (m->capacity_factor > 0) {   /* absent = dropless */
            char cf[32];
            knob_format_double(m->capacity_factor, cf, sizeof cf);
            ARGV("--moe-expert-capacity-factor", "%s", cf);
            ARG("--moe-pad-expert-input-to-capacity");   /* the cost model prices padded capacity */
        }
    }
#undef ARG
#undef ARGV
    for (int i = 0; i < n; i++)
        put(&b, "%s%s%s%s\n", args[i], vals[i][0] ? " " : "", vals[i], i + 1 < n ? " \\" : "");
    char *t = finish(&b);
    if (!t)
        snprintf(err, errlen, "export: out of memory");
    return t;
}

/* ---- reading Megatron arguments back ---- */

/* one word of --cuda-graph-modules: appended to the comma list, except
 * "full" (the whole layer: no module) and "full_iteration" (the deprecated
 * scope spelling of --cuda-graph-impl full_iteration) */
static void cg_word(const char *w, char *words, int *len, Layout *lo)
{
    if (!strcmp(w, "full_iteration"))
        lo->cuda_graph = CG_FULL_ITERATION;
    else if (strcmp(w, "full") && *len < LAYOUT_PPL_LEN)
        *len += snprintf(words + *len, (size_t)(LAYOUT_PPL_LEN - *len), "%s%s", *len ? "," : "", w);
}

static int want_int(const char *flag, const char *v, int min, int *out, char *err, int errlen)
{
    char *end;
    long x = v ? strtol(v, &end, 10) : 0;
    if (!v || end == v || *end || x < min || x > 1 << 30) {
        snprintf(err, errlen, "%s: expected a whole number >= %d, got \"%s\"", flag, min, v ? v : "");
        return -1;
    }
    *out = (int)x;
    return 0;
}

int export_parse_megatron(const char *text, int gpus, const HwProfile *hw, ModelSpec *m, Layout *lo, char *err,
                          int errlen)
{
    memset(m, 0, sizeof *m);
    snprintf(m->name, sizeof m->name, "megatron");
    m->mlp = MLP_GELU, m->norm = NORM_LAYERNORM, m->pos = POS_LEARNED;
    m->bias = true, m->tied = true, m->dropout = true, m->vocab_div = 128;
    layout_default(lo);
    lo->prec = PREC_FP32, lo->flash = false, lo->overlap_grad = false, lo->sp = false;
    lo->overlap_param = false, lo->tp_comm_overlap = false;
    const char *vc = strstr(text, "# vocabulary: ");
    if (vc)
        m->vocab = atoi(vc + 14);
    const char *mi = strstr(text, "# moe-imbalance: ");
    if (mi) {   /* the export's routing-load assumption; the default stays 0 */
        double x = strtod(mi + 17, NULL);
        lo->moe_imbalance = x == LAYOUT_MOE_IMBALANCE_DEFAULT ? 0 : x;
    }
    size_t len = strlen(text);
    char *buf = malloc(len + 1);
    char **tok = malloc((len / 2 + 2) * sizeof *tok);
    if (!buf || !tok) {
        free(buf), free(tok);
        snprintf(err, errlen, "export: out of memory");
        return -1;
    }
    /* words, outside comment lines and without the continuation backslashes */
    int nt = 0;
    size_t j = 0;
    const char *p = text;
    while (*p) {
        const char *eol = strchr(p, '\n');
        size_t ll = eol ? (size_t)(eol - p) : strlen(p);
        const char *q = p;
        while (q < p + ll && isspace((unsigned char)*q))
            q++;
        if (q < p + ll && *q != '#') {
            while (q < p + ll) {
                while (q < p + ll && isspace((unsigned char)*q))
                    q++;
                const char *w = q;
                while (q < p + ll && !isspace((unsigned char)*q))
                    q++;
                if (q > w && !(q - w == 1 && *w == '\\')) {
                    tok[nt++] = buf + j;
                    memcpy(buf + j, w, (size_t)(q - w));
                    j += (size_t)(q - w);
                    buf[j++] = 0;
                }
            }
        }
        p += ll + (eol ? 1 : 0);
    }
    int rc = -1, gran = 0, uniform = 0, nrc = 0, first = 0, last = 0, fsdp = 0, distopt = 0, strategy = 3, pao = 0;
    int bf16 = 0, fp16 = 0, fp8 = 0, red_bf16 = 0, acc32 = 0, adrop = 1, hdrop = 1;
    /* MoE and MLA as Megatron defaults them: topk 2, etp = tp (None), MLA kv-lora 32, qk 128 + 64, v 128 */
    int disp_given = 0;   /* without --moe-token-dispatcher-type Megatron dispatches with allgather */
    int rcm_given = 0, core_attn = 0;   /* --recompute-modules, and whether it names core_attn */
    int mla = 0, topk = -1, etp = -1, kv_lora = 32, qk_head = 128, qk_pos = 64, v_head = 128, pad_cap = 0;
    int quick_geglu = 0;
    double glu_offset = 0;   /* Megatron's default */
    const char *freq_text = NULL;
    for (int i = 0; i < nt; i++) {
        char *f = tok[i], *v = NULL;
        char *eq = strchr(f, '=');
        if (eq)
            *eq = 0, v = eq + 1;
        else if (i + 1 < nt && strncmp(tok[i + 1], "--", 2))
            v = tok[i + 1];
        int took = 0;
#define INT(flag, min, dst)                                                                                       \
    if (!strcmp(f, flag)) {                                                                                       \
        if (want_int(flag, v, min, dst, err, errlen))                                                             \
            goto out;                                                                                             \
        took = 1;                                                                                                 \
    } else
#define FLAG(flag, stmt)                                                                                          \
    if (!strcmp(f, flag)) {                                                                                       \
        stmt;                                                                                                     \
    } else
        INT("--tensor-model-parallel-size", 1, &lo->tp)
        INT("--pipeline-model-parallel-size", 1, &lo->pp)
        INT("--num-virtual-stages-per-pipeline-rank", 1, &lo->vp)
        INT("--context-parallel-size", 1, &lo->cp)
        INT("--micro-batch-size", 1, &lo->mbs)
        INT("--global-batch-size", 1, &lo->gbs)
        INT("--num-layers", 1, &m->L)
        INT("--hidden-size", 1, &m->h)
        INT("--num-attention-heads", 1, &m->a)
        INT("--kv-channels", 1, &m->d_head)
        INT("--num-query-groups", 1, &m->g)
        INT("--ffn-hidden-size", 1, &m->f)
        INT("--seq-length", 1, &m->s)
        INT("--vocab-size", 1, &m->vocab)
        INT("--make-vocab-size-divisible-by", 1, &m->vocab_div)
        INT("--decoder-first-pipeline-num-layers", 1, &first)
        INT("--decoder-last-pipeline-num-layers", 1, &last)
        INT("--recompute-num-layers", 1, &nrc)
        INT("--num-experts", 0, &m->experts)
        INT("--moe-router-topk", 1, &topk)
        INT("--moe-ffn-hidden-size", 1, &m->moe_ffn)
        INT("--moe-shared-expert-intermediate-size", 0, &m->shared_ffn)
        INT("--expert-model-parallel-size", 1, &lo->ep)
        INT("--expert-tensor-parallel-size", 1, &etp)
        INT("--mtp-num-layers", 0, &m->mtp_layers)
        INT("--q-lora-rank", 1, &m->q_lora_rank)
        INT("--kv-lora-rank", 1, &kv_lora)
        INT("--qk-head-dim", 1, &qk_head)
        INT("--qk-pos-emb-head-dim", 1, &qk_pos)
        INT("--v-head-dim", 1, &v_head)
        INT("--moe-router-num-groups", 1, &m->router_groups)
        INT("--moe-router-group-topk", 1, &m->router_group_topk)
        FLAG("--multi-latent-attention", mla = 1)
        FLAG("--moe-pad-expert-input-to-capacity", pad_cap = 1)
        FLAG("--sequence-parallel", lo->sp = true)
        FLAG("--use-distributed-optimizer", distopt = 1)
        FLAG("--use-precision-aware-optimizer", pao = 1)
        FLAG("--use-megatron-fsdp", fsdp = 1)
        FLAG("--overlap-grad-reduce", lo->overlap_grad = true)
        FLAG("--overlap-param-gather", lo->overlap_param = true)
        FLAG("--tp-comm-overlap", lo->tp_comm_overlap = true)
        FLAG("--overlap-moe-expert-parallel-comm", lo->moe_a2a_overlap = true)
        FLAG("--moe-shared-expert-overlap", lo->moe_shared_overlap = true)
        FLAG("--fp8-param-gather", lo->fp8_param_gather = true)
        FLAG("--moe-router-padding-for-quantization", lo->moe_router_pad = true)
        FLAG("--moe-router-padding-for-fp8", lo->moe_router_pad = true)   /* its deprecated alias */
        FLAG("--account-for-embedding-in-pipeline-split", lo->split_embed = true)
        FLAG("--account-for-loss-in-pipeline-split", lo->split_loss = true)
        FLAG("--swiglu", m->mlp = MLP_SWIGLU)
        FLAG("--quick-geglu", quick_geglu = 1)
        FLAG("--untie-embeddings-and-output-weights", m->tied = false)
        FLAG("--disable-bias-linear", m->bias = false)
        FLAG("--use-rope-scaling", m->rope_scaling = true)
        FLAG("--bf16", bf16 = 1)
        FLAG("--fp16", fp16 = 1)
        FLAG("--grad-reduce-in-bf16", red_bf16 = 1)
        FLAG("--accumulate-allreduce-grads-in-fp32", acc32 = 1)
        if (!strcmp(f, "--data-parallel-sharding-strategy")) {
            took = 1;
            if (v && !strcmp(v, "optim_grads"))
                strategy = 2;
            else if (v && !strcmp(v, "optim_grads_params"))
                strategy = 3;
            else {
                snprintf(err, errlen, "--data-parallel-sharding-strategy: \"%s\" is no ZeRO-2/3 layout this tool "
                                      "plans (optim_grads or optim_grads_params)", v ? v : "");
                goto out;
            }
        } else if (!strcmp(f, "--pipeline-model-parallel-layout")) {
            took = 1;
            size_t vl = v ? strlen(v) : 0;
            if (vl >= 2 && (v[0] == '\'' || v[0] == '"') && v[vl - 1] == v[0])   /* the shell quotes it */
                v[vl - 1] = 0, v++;
            const Knob *kl = knob_get(K_PP_LAYOUT);
            if (!v || knob_set_str(kl, lo, v, "--pipeline-model-parallel-layout", err, errlen) != 0) {
                if (!v)
                    snprintf(err, errlen, "--pipeline-model-parallel-layout: expected a layout string");
                goto out;
            }
        } else if (!strcmp(f, "--recompute-modules")) {
            /* nargs '*': the words up to the next flag; core_attn is the selective granularity's own */
            int k = i + 1, mask = 0, bit;
            char e[160];
            rcm_given = 1;
            for (; !eq && k < nt && strncmp(tok[k], "--", 2); k++) {
                if (!strcmp(tok[k], "core_attn")) {
                    core_attn = 1;
                    continue;
                }
                if (layout_parse_rc_modules(tok[k], &bit, e, sizeof e) != 0) {
                    snprintf(err, errlen, "--recompute-modules: %s", e);
                    goto out;
                }
                mask |= bit;
            }
            if (eq) {   /* --recompute-modules=a: one word */
                if (strcmp(v, "core_attn") && layout_parse_rc_modules(v, &mask, e, sizeof e) != 0) {
                    snprintf(err, errlen, "--recompute-modules: %s", e);
                    goto out;
                }
                core_attn = !strcmp(v, "core_attn");
            }
            layout_format_rc_modules(mask, ",", lo->rc_modules, sizeof lo->rc_modules);
            i = eq ? i : k - 1;   /* the words are taken */
        } else if (!strcmp(f, "--fp8-recipe")) {
            took = 1;
            if (!v || layout_parse_fp8_recipe(v, &lo->fp8_recipe) != 0) {
                snprintf(err, errlen, "--fp8-recipe: expected delayed, tensorwise, mxfp8 or blockwise, got \"%s\"",
                         v ? v : "");
                goto out;
            }
        } else if (!strcmp(f, "--cuda-graph-impl")) {
            took = 1;
            if (!v || layout_parse_cuda_graph(v, &lo->cuda_graph) != 0) {
                snprintf(err, errlen, "--cuda-graph-impl: expected none, local, transformer_engine or "
                                      "full_iteration, got \"%s\"", v ? v : "");
                goto out;
            }
        } else if (!strcmp(f, "--cuda-graph-modules") || !strcmp(f, "--cuda-graph-scope")) {
            /* nargs '+' (--cuda-graph-scope: its deprecated name): the words joined and parsed as one list;
             * "full" is the whole layer, "full_iteration" the deprecated spelling of the impl */
            char words[LAYOUT_PPL_LEN] = "", e[160];
            int k = i + 1, mask, len = 0;
            if (eq)
                cg_word(v, words, &len, lo);
            for (; !eq && k < nt && strncmp(tok[k], "--", 2); k++)
                cg_word(tok[k], words, &len, lo);
            if (layout_parse_cg_modules(words, &mask, e, sizeof e) != 0) {
                snprintf(err, errlen, "%s: %s", f, e);
                goto out;
            }
            layout_format_cg_modules(mask, ",", lo->cg_modules, sizeof lo->cg_modules);
            i = eq ? i : k - 1;   /* the words are taken */
        } else if (!strcmp(f, "--recompute-granularity")) {
            took = 1;
            gran = v && !strcmp(v, "full") ? 1 : v && !strcmp(v, "selective") ? 2 : -1;
            if (gran < 0) {
                snprintf(err, errlen, "--recompute-granularity: expected full or selective, got \"%s\"", v ? v : "");
                goto out;
            }
        } else if (!strcmp(f, "--cp-comm-type")) {
            took = 1;
            if (!v || layout_parse_cp_comm(v, &lo->cp_comm) != 0) {
                snprintf(err, errlen, "--cp-comm-type: expected p2p or all_gather, got \"%s\"", v ? v : "");
                goto out;
            }
        } else if (!strcmp(f, "--recompute-method")) {
            took = 1;
            uniform = v && !strcmp(v, "uniform");
            if (!v || (!uniform && strcmp(v, "block"))) {
                snprintf(err, errlen, "--recompute-method: expected uniform or block, got \"%s\"", v ? v : "");
                goto out;
            }
        } else if (!strcmp(f, "--window-size")) {
            /* Megatron's tuple "W,0" (or "(W, 0)"): W keys before a query, none after */
            took = 1;
            int w = -1, r = -1;
            if (!v || (sscanf(v, " (%d , %d )", &w, &r) != 2 && sscanf(v, "%d,%d", &w, &r) != 2) || w < 1 || r != 0) {
                snprintf(err, errlen, "--window-size: expected W,0 (a causal window of W >= 1 keys before the "
                                      "query), got \"%s\"", v ? v : "");
                goto out;
            }
            m->window = w;
        } else if (!strcmp(f, "--window-attn-skip-freq")) {
            took = 1;
            if (want_int("--window-attn-skip-freq", v, 1, &m->window_skip_freq, err, errlen))
                goto out;
        } else if (!strcmp(f, "--softmax-type")) {
            took = 1;
            if (!v || (strcmp(v, "learnable") && strcmp(v, "vanilla"))) {
                snprintf(err, errlen, "--softmax-type: expected vanilla or learnable (attention sinks), got \"%s\"%s",
                         v ? v : "", v && !strcmp(v, "off-by-one") ? " (a fixed offset is not modelled)" : "");
                goto out;
            }
            m->sinks = !strcmp(v, "learnable");
        } else if (!strcmp(f, "--activation-func-clamp-value")) {
            took = 1;
            char *end;
            double x = v ? strtod(v, &end) : 0;
            if (!v || end == v || *end || !(x > 0 && x <= 1e6)) {
                snprintf(err, errlen, "--activation-func-clamp-value: expected a number in (0, 1e6], got \"%s\"",
                         v ? v : "");
                goto out;
            }
            m->act_clamp = x;
        } else if (!strcmp(f, "--glu-linear-offset")) {
            took = 1;
            char *end;
            glu_offset = v ? strtod(v, &end) : -1;
            if (!v || end == v || *end) {
                snprintf(err, errlen, "--glu-linear-offset: expected a number, got \"%s\"", v ? v : "");
                goto out;
            }
        } else if (!strcmp(f, "--moe-layer-freq")) {
            took = 1;
            freq_text = v;
        } else if (!strcmp(f, "--moe-expert-capacity-factor")) {
            took = 1;
            char *end;
            double x = v ? strtod(v, &end) : 0;
            if (!v || end == v || *end || !(x >= 0 && x <= 1000)) {
                snprintf(err, errlen, "--moe-expert-capacity-factor: expected a number from 0 to 1000, got \"%s\"",
                         v ? v : "");
                goto out;
            }
            m->capacity_factor = x;
        } else if (!strcmp(f, "--moe-token-dispatcher-type")) {
            took = 1;
            disp_given = 1;
            if (!v || layout_parse_dispatcher(v, &lo->moe_dispatcher) != 0) {
                snprintf(err, errlen, "--moe-token-dispatcher-type: \"%s\" is none of the dispatchers this tool "
                                      "prices (alltoall, allgather, flex)", v ? v : "");
                goto out;
            }
        } else if (!strcmp(f, "--moe-flex-dispatcher-backend")) {
            took = 1;   /* deepep, hybridep or ncclep: priced alike (time_moe_a2a_s) */
            if (!v || (strcmp(v, "deepep") && strcmp(v, "hybridep") && strcmp(v, "ncclep"))) {
                snprintf(err, errlen, "--moe-flex-dispatcher-backend: \"%s\" is none of deepep, hybridep, ncclep",
                         v ? v : "");
                goto out;
            }
        } else if (!strcmp(f, "--moe-dispatch-fwd-dtype") || !strcmp(f, "--moe-combine-bwd-dtype")) {
            took = 1;
            MoeWire *w = f[6] == 'd' ? &lo->moe_dispatch_wire : &lo->moe_combine_bwd_wire;
            if (!v || layout_parse_moe_wire(v, w) != 0) {
                snprintf(err, errlen, "%s: expected bf16 or mxfp8, got \"%s\"", f, v ? v : "");
                goto out;
            }
        } else if (!strcmp(f, "--exp-avg-dtype") || !strcmp(f, "--exp-avg-sq-dtype")) {
            took = 1;
            Precision *d = !strcmp(f, "--exp-avg-sq-dtype") ? &lo->exp_avg_sq_dtype : &lo->exp_avg_dtype;
            if (!v || hw_parse_precision(v, d) != 0) {
                snprintf(err, errlen, "%s: expected fp32, fp16, bf16 or fp8, got \"%s\"", f, v ? v : "");
                goto out;
            }
        } else if (!strcmp(f, "--main-params-dtype") || !strcmp(f, "--main-grads-dtype")) {
            took = 1;
            if (!v || strcmp(v, "fp32")) {
                snprintf(err, errlen, "%s %s: only fp32 master weights and main gradients are priced", f, v ? v : "");
                goto out;
            }
        } else if (!strcmp(f, "--normalization")) {
            took = 1;
            m->norm = v && !strcmp(v, "RMSNorm") ? NORM_RMSNORM : NORM_LAYERNORM;
        } else if (!strcmp(f, "--position-embedding-type")) {
            took = 1;
            m->pos = v && !strcmp(v, "rope") ? POS_ROPE : POS_LEARNED;
        } else if (!strcmp(f, "--rotary-base")) {
            took = 1;
            m->rope_theta = v ? atoi(v) : 0;
        } else if (!strcmp(f, "--attention-backend")) {
            took = 1;
            lo->flash = v && !strcmp(v, "flash");
        } else if (!strcmp(f, "--fp8-format")) {
            took = 1;
            fp8 = 1;
        } else if (!strcmp(f, "--attention-dropout")) {
            took = 1;
            adrop = !(v && atof(v) == 0);
        } else if (!strcmp(f, "--hidden-dropout")) {
            took = 1;
            hdrop = !(v && atof(v) == 0);
        } else if (v && strncmp(f, "--", 2) == 0) {
            took = 1;   // any other flag with a value: not part of the layout
        }
#undef INT
#undef FLAG
        if (took && !eq)
            i++;
    }
    if (!m->L || !m->h || !m->a || !m->s || !lo->gbs) {
        snprintf(err, errlen, "megatron arguments: --num-layers, --hidden-size, --num-attention-heads, "
                              "--seq-length and --global-batch-size are required");
        goto out;
    }
    if (!m->vocab) {
        snprintf(err, errlen, "megatron arguments: no --vocab-size and no \"# vocabulary:\" comment");
        goto out;
    }
    if (!m->f)
        m->f = 4 * m->h;
    if (!m->g)
        m->g = m->a;
    m->dropout = adrop || hdrop;
    if (m->experts > 0) {
        m->topk = topk > 0 ? topk : 2;
        lo->etp = etp > 0 && etp != lo->tp ? etp : 0;
        if (freq_text) {
            char fq[256];
            size_t fl = strlen(freq_text);
            /* the export quotes the list form as one shell word */
            if (fl >= 2 && (freq_text[0] == '\'' || freq_text[0] == '"') && freq_text[fl - 1] == freq_text[0])
                freq_text++, fl -= 2;
            snprintf(fq, sizeof fq, "%.*s", (int)fl, freq_text);
            int flen = 0;
            if (spec_parse_moe_freq(fq, &m->moe_freq, &m->moe_first_dense, &flen, err, errlen) != 0)
                goto out;
            if (flen > 0 && flen != m->L) {
                snprintf(err, errlen, "--moe-layer-freq: the list has %d entries, --num-layers is %d", flen, m->L);
                goto out;
            }
        }
        if (m->capacity_factor > 0 && !pad_cap) {
            snprintf(err, errlen, "--moe-expert-capacity-factor without --moe-pad-expert-input-to-capacity drops "
                                  "tokens without padding: this tool prices padded capacity");
            goto out;
        }
    } else if (lo->ep > 1 || etp > 1) {
        snprintf(err, errlen, "--expert-model-parallel-size / --expert-tensor-parallel-size need --num-experts");
        goto out;
    }
    if (m->experts > 0 && !disp_given)
        lo->moe_dispatcher = MOE_DISPATCH_ALLGATHER;
    /* GPT-OSS's activation is --quick-geglu with a clamp and the linear half
     * offset by 1, all three; a plain quick GEGLU is no MLP this tool costs */
    if (quick_geglu || m->act_clamp > 0 || glu_offset != 0) {
        if (!quick_geglu || m->act_clamp <= 0 || glu_offset != 1.0) {
            snprintf(err, errlen, "--quick-geglu, --activation-func-clamp-value C and --glu-linear-offset 1 go together "
                                  "(GPT-OSS's clamped activation); got %s, %s and offset %g",
                     quick_geglu ? "--quick-geglu" : "no --quick-geglu",
                     m->act_clamp > 0 ? "a clamp" : "no clamp", glu_offset);
            goto out;
        }
        m->mlp = MLP_SWIGLU;
    }
    if (m->window_skip_freq > 0 && m->window <= 0) {
        snprintf(err, errlen, "--window-attn-skip-freq without --window-size");
        goto out;
    }
    if (mla) {
        m->attn = ATTN_MLA;
        m->kv_lora_rank = kv_lora, m->qk_nope_dim = qk_head, m->qk_rope_dim = qk_pos, m->v_head_dim = v_head;
        m->d_head = 0;   /* MLA's head is qk_nope + qk_rope (spec_validate) */
    }
    lo->prec = fp8 ? PREC_FP8 : bf16 ? PREC_BF16 : fp16 ? PREC_FP16 : PREC_FP32;
    /* Megatron turns fp32 accumulation on for bf16 unless --grad-reduce-in-bf16; fp16 only when asked */
    lo->grad_fp32 = lo->prec == PREC_FP32 || acc32 || (lo->prec != PREC_FP16 && !red_bf16);
    lo->opt = fsdp ? (strategy == 2 ? OPT_ZERO2 : OPT_ZERO3) : distopt ? OPT_DISTOPT : OPT_ZERO0;
    if ((lo->exp_avg_dtype != PREC_FP32 || lo->exp_avg_sq_dtype != PREC_FP32) && !pao) {   /* optimizer_config.py asserts it */
        snprintf(err, errlen, "--exp-avg-dtype %s, --exp-avg-sq-dtype %s need --use-precision-aware-optimizer "
                              "(Megatron-core keeps the moments in fp32 otherwise)",
                 hw_precision_name(lo->exp_avg_dtype), hw_precision_name(lo->exp_avg_sq_dtype));
        goto out;
    }
    lo->precision_aware_opt = pao;
    if (tok && lo->tp * lo->pp * lo->cp > 0 && gpus % (lo->tp * lo->pp * lo->cp) == 0)
        lo->dp = gpus / (lo->tp * lo->pp * lo->cp);
    else {
        snprintf(err, errlen, "megatron arguments: world size %d is not a multiple of tp x pp x cp = %d", gpus,
                 lo->tp * lo->pp * lo->cp);
        goto out;
    }
    if (spec_validate(m, err, errlen) != 0)
        goto out;
    if (lo->pp > LAYOUT_MAX_PP) {
        snprintf(err, errlen, "--pipeline-model-parallel-size: at most %d", LAYOUT_MAX_PP);
        goto out;
    }
    if (first || last) {
        int mid = lo->pp - (first > 0) - (last > 0), rest = m->L - first - last;
        if (mid < 0 || rest < 0 || (mid > 0 && rest % mid) || (mid == 0 && rest)) {
            snprintf(err, errlen, "--decoder-first/last-pipeline-num-layers %d/%d do not split %d layers over %d "
                                  "stages", first, last, m->L, lo->pp);
            goto out;
        }
        for (int s = 0; s < lo->pp; s++)
            lo->layers[s] = mid ? rest / mid : 0;
        if (first)
            lo->layers[0] = first;
        if (last)
            lo->layers[lo->pp - 1] = last;
    }
    if (gran != 2 || !rcm_given)
        lo->rc_modules[0] = 0;   /* Megatron reads the modules under selective granularity only */
    else if (!core_attn)
        gran = 0;                /* selective over the named modules only: no core-attention recompute */
    if (layout_check(lo, m, hw, err, errlen) != 0)
        goto out;
    for (int s = 0; s < lo->pp; s++) {
        if (gran == 2)
            lo->sel_rc[s] = lo->layers[s];
        else if (gran == 1)
            lo->full_rc[s] = uniform ? lo->layers[s] : chunk_recompute(lo, s, nrc);
    }
    rc = 0;
out:
    free(buf);
    free(tok);
    return rc;
}

/* ---- torchtitan ---- */

/* The Llama 3 flavors torchtitan's registry has, by shape: the index in
 * tt_flavors, or -1. */
static const struct {
    const char *flavor, *base;
    int L, h, a, g, f, vocab;
} tt_flavors[] = {
    {"8B", "llama3_8b", 32, 4096, 32, 8, 14336, 128256},
    {"70B", "llama3_70b", 80, 8192, 64, 8, 28672, 128256},
    {"405B", "llama3_405b", 126, 16384, 128, 8, 53248, 128256},
};

static int tt_flavor(const ModelSpec *m)
{
    for (int i = 0; i < (int)(sizeof tt_flavors / sizeof *tt_flavors); i++)
        if (m->L == tt_flavors[i].L && m->h == tt_flavors[i].h && m->a == tt_flavors[i].a && m->g == tt_flavors[i].g &&
            m->f == tt_flavors[i].f && m->vocab == tt_flavors[i].vocab && m->mlp == MLP_SWIGLU && !m->bias && !m->tied)
            return i;
    return -1;
}

int export_torchtitan_model_refuse(const ModelSpec *m, char *err, int errlen)
{
    const char *why = NULL;
    if (spec_is_moe(m) || m->attn == ATTN_MLA || m->mtp_layers > 0)
        why = "mixture-of-experts, MLA and MTP models are not exported to torchtitan (b5bcd76 has DeepSeek-V3 "
              "and Qwen3 MoE models, but this export writes only the Llama 3 registry): use --format megatron";
    else if (tt_flavor(m) < 0)
        why = "the model is not the shape of a torchtitan Llama 3 flavor (8B, 70B, 405B)";
    if (why) {
        snprintf(err, errlen, "torchtitan: %s", why);
        return -1;
    }
    return 0;
}

int export_torchtitan_refuse(const ModelSpec *m, const Layout *lo, char *err, int errlen)
{
    if (export_torchtitan_model_refuse(m, err, errlen) != 0)
        return -1;
    const char *why = NULL;
    char whybuf[320];
    int anyf = 0, anys = 0, allf = 1, alls = 1, uneven = 0;
    for (int s = 0; s < lo->pp; s++) {
        anyf |= lo->full_rc[s] > 0;
        anys |= lo->sel_rc[s] > 0;
        allf &= lo->full_rc[s] == lo->layers[s];
        alls &= lo->sel_rc[s] == lo->layers[s];
        uneven |= lo->layers[s] != lo->layers[0];
    }
    if ((anyf && !allf) || (anys && !alls) || (anyf && anys))
        why = "torchtitan's activation checkpointing is full or selective for every layer, or none";
    else if (anys && !layout_sel_op(m, lo))
        why = "torchtitan's selective AC is per-op (SelectiveAC: every second matmul and every other op run "
              "again, the attention kept), and the plan is priced with Megatron's core-attention recomputation: "
              "plan with --stack torchtitan, or --recompute full or none";
    else if (uneven)
        why = "uneven pipeline stages (torchtitan splits layers evenly here)";
    else if (lo->pp_sched == PP_SCHED_DUALPIPE)
        why = "--pp-schedule dualpipe: torchtitan's pipeline schedules are PyTorch's (1F1B, interleaved, "
              "zero-bubble, DualPipeV), not DualPipe's two model copies: plan with --pp-schedule 1f1b";
    else if (lo->opt == OPT_ZERO2 && lo->pp > 1)
        why = "ZeRO-2 with pp > 1: torchtitan's pipeline schedules (PyTorch's) reduce-scatter FSDP's gradients once, "
              "after the last micro-batch, so beside PP it keeps whole gradients and does not run this plan's "
              "per-micro-batch sharding: plan ZeRO-2 with pp 1";
    else if ((lo->opt == OPT_ZERO1 || lo->opt == OPT_DISTOPT) && layout_dp_group(lo) > 1)
        why = "torchtitan has no optimizer-only sharding (ZeRO-1 / distributed optimizer): plan ZeRO-0, 2 or 3";
    else if (lo->opt == OPT_ZERO0 && lo->cp > 1)
        why = "torchtitan shards parameters over context-parallel ranks (FSDP): plan ZeRO-2 or 3 with cp > 1";
    else if (lo->cp > 1 && lo->cp_comm != CP_COMM_ALLGATHER)
        why = "torchtitan's context parallelism is PyTorch's, which all-gathers K/V (rotate_method ALL_GATHER, the "
              "default it keeps), and the plan is priced with the ring: plan with --cp-comm all-gather";
    else if (lo->prec == PREC_FP16)
        why = "torchtitan trains in bf16 or fp32, not fp16";
    else if (lo->fp8_dpa)
        why = "the plan runs its attention in fp8 (--fp8-dot-product-attention, Transformer Engine's); torchtitan's "
              "float8 converters cover the linear layers only: plan with --no-fp8-dot-product-attention";
    else if (lo->fp8_param_gather)
        why = "the plan keeps its weights in fp8 (--fp8-param-gather, Megatron's); torchtitan's MXFP8 converter "
              "keeps them in bf16: plan with --no-fp8-param-gather";
    else if (lo->precision_aware_opt)
        why = "the plan runs Megatron's precision-aware optimizer (16-bit master remainders, its moments' dtypes); "
              "torchtitan's AdamW keeps an fp32 master and fp32 moments: plan with --no-use-precision-aware-optimizer";
    else if (!lo->grad_fp32 && lo->prec != PREC_FP32)
        why = "torchtitan reduces gradients in float32 only (the plan reduces them in bf16)";
    else if (!lo->flash)
        why = "torchtitan's attention (flex / SDPA) never stores s^2 scores: plan with flash attention";
    else if (lo->tp_comm_overlap && lo->tp > 1 && lo->sp && !lo->torch_compile)
        why = "torchtitan's async TP needs torch.compile (CompileConfig: \"Async TP requires 'model' in "
              "--compile.components and --compile.enable\"): plan with --torch-compile or --no-tp-comm-overlap";
    else if (lo->prec == PREC_FP8 && lo->fp8_recipe != FP8R_MXFP8) {
        /* b5bcd76: Float8LinearConverter's recipe_name is "rowwise" or "rowwise_with_gw_hp" (torchao's
         * tensorwise and delayed scaling are gone from it); MXFP8LinearConverter is MXFP8 */
        snprintf(whybuf, sizeof whybuf, "its fp8 recipes are rowwise scaling (Float8LinearConverter) and MXFP8 "
                 "(MXFP8LinearConverter, Blackwell), and the plan is priced with --fp8-recipe %s: plan with "
                 "--fp8-recipe mxfp8 on Blackwell, or --precision bf16", layout_fp8_recipe_name(lo->fp8_recipe));
        why = whybuf;
    }
    if (why) {
        snprintf(err, errlen, "torchtitan: %s", why);
        return -1;
    }
    return 0;
}

int export_target_refuse(const ModelSpec *m, const Layout *lo, Target t, char *err, int errlen)
{
    if (t == TARGET_TORCHTITAN)
        return export_torchtitan_refuse(m, lo, err, errlen);
    return refuse_target(m, lo, t, err, errlen);
}

char *export_torchtitan(const ModelSpec *m, const HwProfile *hw, const Layout *lo, char *err, int errlen)
{
    (void)hw;
    if (export_torchtitan_refuse(m, lo, err, errlen) != 0)
        return NULL;
    int fl = tt_flavor(m);
    bool anyf = false, anys = false;   /* every layer or none, as the refusal above made sure */
    for (int s = 0; s < lo->pp; s++) {
        anyf |= lo->full_rc[s] > 0;
        anys |= lo->sel_rc[s] > 0;
    }
    Buf b = {0};
    int mb = layout_microbatches(lo);
    put(&b, "# torchtitan configuration for %s on %d GPUs: dp %d, tp %d, pp %d, vp %d, cp %d (ultraplan export)\n",
        m->name, layout_gpus(lo), lo->dp, lo->tp, lo->pp, lo->vp, lo->cp);
    put(&b, "# checked against pytorch/torchtitan b5bcd76c66d0 (2026-08-21): configurations are Python functions\n"
            "# returning Trainer.Config. Save as my_plan.py on PYTHONPATH and run, with NGPU=%d:\n"
            "#   MODULE=my_plan CONFIG=ultraplan_plan ./run_train.sh\n", layout_gpus(lo));
    if (lo->cuda_graph != CG_NONE)   /* torchtitan compiles (torch.compile) but has no CUDA-graph setting */
        put(&b, "# CUDA graphs: the plan is priced with Megatron's --cuda-graph-impl %s; torchtitan has no "
                "equivalent,\n# so its host launches come back (ultraplan predict --cuda-graph-impl none prices that)\n",
            layout_cuda_graph_name(lo->cuda_graph));
    if (lo->prec == PREC_FP8)   /* MXFP8 (the only recipe left by the refusals above) */
        put(&b, "from torchtitan.components.quantization import MXFP8LinearConverter\n");
    put(&b, "from torchtitan.distributed.activation_checkpoint import FullAC, SelectiveAC\n"
            "from torchtitan.models.llama3 import model_registry\n"
            "from torchtitan.models.llama3.config_registry import %s\n"
            "from torchtitan.trainer import Trainer\n\n\n", tt_flavors[fl].base);
    put(&b, "def ultraplan_plan() -> Trainer.Config:\n    config = %s()\n", tt_flavors[fl].base);
    /* The base configuration is not the plan: llama3_405b() compiles, runs async TP and converts every
     * Linear but the head to rowwise Float8; llama3_8b() and llama3_70b() do not compile. The plan says
     * whether it is compiled (--torch-compile: fused elementwise kernels; off, the torchtitan stack
     * prices eager PyTorch's unfused norms, RoPE and SwiGLU), its precision and its async TP. */
    if (lo->torch_compile)
    {
        /* the loss compiled unless the plan's stack prices it eager under compile (torchtitan-2412:
         * 9dec370 compiled the blocks only; its fp32 copies of the logits are in the plan's memory) */
        bool eager_loss = hw->ce_upcast && !hw->compile_loss;
        put(&b, "    # --torch-compile: the model%s compiled (fused elementwise kernels)%s\n"
                "    config.compile.enable = True\n"
                "    config.compile.components = [\"model\"%s]\n",
            eager_loss ? "" : " and the loss", eager_loss ? "; the loss eager, as priced (its fp32 copies)" : "",
            eager_loss ? "" : ", \"loss\"");
    }
    else
        put(&b, "    # --no-torch-compile: eager PyTorch, as priced\n"
                "    config.compile.enable = False\n");
    put(&b, "    config.compile.enable_async_tensor_parallel = %s\n",
        lo->tp_comm_overlap && lo->tp > 1 && lo->sp ? "True" : "False");
    if (lo->prec == PREC_FP8)
        put(&b, "    # --fp8-recipe mxfp8: every Linear in MXFP8 (torchao), as torchtitan's own registries set it\n"
                "    config.model_spec = model_registry(\n"
                "        \"%s\", converters=[MXFP8LinearConverter.Config(model_compile_enabled=%s)]\n"
                "    )\n",
            tt_flavors[fl].flavor, lo->torch_compile ? "True" : "False");
    else
        put(&b, "    config.model_spec = model_registry(\"%s\")  # %s: no Float8 converter\n", tt_flavors[fl].flavor,
            hw_precision_name(lo->prec));
    int shard = lo->opt == OPT_ZERO2 || lo->opt == OPT_ZERO3;
    put(&b, "    p = config.parallelism\n");
    put(&b, "    p.data_parallel_replicate_degree = %d\n", shard ? 1 : lo->dp);
    put(&b, "    p.data_parallel_shard_degree = %d\n", shard ? lo->dp : 1);
    if (shard)
        put(&b, "    p.fsdp_reshard_after_forward = \"%s\"  # ZeRO-%d\n", lo->opt == OPT_ZERO3 ? "always" : "never",
            lo->opt == OPT_ZERO3 ? 3 : 2);
    put(&b, "    p.tensor_parallel_degree = %d\n", lo->tp);
    put(&b, "    p.enable_sequence_parallel = %s\n", lo->sp && lo->tp > 1 ? "True" : "False");
    put(&b, "    p.context_parallel_degree = %d\n", lo->cp);
    put(&b, "    p.pipeline_parallel_degree = %d\n", lo->pp);
    if (lo->pp > 1) {
        put(&b, "    p.pipeline_parallel_schedule = \"%s\"\n", lo->vp > 1 ? "Interleaved1F1B" : "1F1B");
        put(&b, "    p.pipeline_parallel_first_stage_less_layers = 0\n"
                "    p.pipeline_parallel_last_stage_less_layers = 0\n");
        put(&b, "    p.pipeline_parallel_layers_per_stage = %d\n", m->L / (lo->pp * lo->vp));
        put(&b, "    p.num_pp_microbatches = %d\n", mb);
    }
    put(&b, "    t = config.training\n");
    put(&b, "    t.max_context_length = %d\n", m->s);
    put(&b, "    t.num_tokens_per_microbatch_per_dp_rank = %lld\n", (long long)lo->mbs * m->s);
    put(&b, "    t.num_tokens_per_train_step = %lld\n", (long long)lo->gbs * m->s);
    put(&b, "    t.mixed_precision_param = \"%s\"\n", lo->prec == PREC_FP32 ? "float32" : "bfloat16");
    put(&b, "    t.mixed_precision_reduce = \"float32\"\n");
    put(&b, "    config.activation_checkpoint = %s\n",
        anyf ? "FullAC.Config()" : anys ? "SelectiveAC.Config()  # per-op, as priced (--stack torchtitan)" : "None");
    put(&b, "    return config\n");
    char *t = finish(&b);
    if (!t)
        snprintf(err, errlen, "export: out of memory");
    return t;
}

/* ---- Slurm ---- */

typedef struct {
    int gpus, per_node, nodes;
} SlurmShape;

static SlurmShape slurm_shape(const HwProfile *hw, const Layout *lo)
{
    SlurmShape s;
    s.gpus = layout_gpus(lo);
    int gph = hw->gpus_per_host > 0 ? hw->gpus_per_host : hw->gpus_per_node > 0 ? hw->gpus_per_node : 1;
    s.per_node = s.gpus < gph ? s.gpus : gph;
    s.nodes = (s.gpus + s.per_node - 1) / s.per_node;
    return s;
}

static void sbatch_head(Buf *b, const ExportOpts *o, SlurmShape sh, int gpus_on)
{
    put(b, "#!/bin/bash\n");
    put(b, "#SBATCH --job-name=%s\n", o->job_name);
    put(b, "#SBATCH --nodes=%d\n", sh.nodes);
    put(b, "#SBATCH --ntasks=%d\n", sh.gpus);
    put(b, "#SBATCH --ntasks-per-node=%d\n", sh.per_node);
    if (gpus_on)
        put(b, "#SBATCH --gpus-per-node=%d\n", sh.per_node);
    put(b, "#SBATCH --cpus-per-task=8\n");
    put(b, "#SBATCH --exclusive\n");
    put(b, "#SBATCH --time=%s\n", o->time_limit);
    put(b, "#SBATCH --signal=USR1@300\n");
    put(b, "#SBATCH --output=%%x-%%j.out\n");
}

char *export_slurm(const ModelSpec *m, const HwProfile *hw, const Layout *lo, const ExportOpts *o, char *err,
                   int errlen)
{
    if (!o->data || !*o->data) {
        snprintf(err, errlen, "slurm: --data FILE is required (the run's training data: llm.c .bin shards or a "
                              "text file)");
        return NULL;
    }
    if (export_check_time(o->time_limit, err, errlen) || export_check_job_name(o->job_name, err, errlen))
        return NULL;
    int cuda = o->backend >= 0 ? o->backend : strncmp(hw->name, "cpu-", 4) != 0;
    SlurmShape sh = slurm_shape(hw, lo);
    Buf b = {0};
    sbatch_head(&b, o, sh, cuda);
    put(&b, "#\n# %s on %d x %s (%d nodes of %d): dp %d, tp %d, pp %d, vp %d, cp %d, mbs %d, gbs %d, %s; %s backend\n",
        m->name, sh.gpus, hw->name, sh.nodes, sh.per_node, lo->dp, lo->tp, lo->pp, lo->vp, lo->cp, lo->mbs, lo->gbs,
        layout_opt_name(lo->opt), cuda ? "cuda" : "cpu");
    put(&b, "# Slurm sends USR1 300 s before the time limit: run writes a checkpoint and exits 0.\n"
            "# Submit the script again to continue: it resumes when (and only when) the checkpoint\n"
            "# directory holds a committed checkpoint (manifest.json); run itself refuses to\n"
            "# overwrite one without --resume.\n");
    put(&b, "set -euo pipefail\n\n");
    put(&b, "export OMP_NUM_THREADS=${SLURM_CPUS_PER_TASK:-8}\n");
    /* paths are the user's: quoted, so spaces and shell characters stay data */
    put(&b, "UP=");
    put_quoted(&b, o->ultraplan);
    put(&b, "\nPLAN=");
    put_quoted(&b, o->plan_path);
    put(&b, "\nDATA=");
    put_quoted(&b, o->data);
    put(&b, "\nCKPT=");
    put_quoted(&b, o->ckpt_dir);
    put(&b, "\n\n# everything that can be checked before the allocation is used\n"
            "command -v \"$UP\" >/dev/null || { echo \"$0: $UP not found (put ultraplan on PATH)\" >&2; exit 1; }\n"
            "[ -f \"$PLAN\" ] || { echo \"$0: plan file $PLAN not found\" >&2; exit 1; }\n"
            "compgen -G \"$DATA\" >/dev/null || { echo \"$0: no training data matches $DATA\" >&2; exit 1; }\n"
            "mkdir -p \"$CKPT\"\n"
            "RESUME=()\n"
            "if [ -f \"$CKPT/manifest.json\" ]; then\n"
            "    RESUME=(--resume)\n"
            "    echo \"resuming from the checkpoint in $CKPT\"\n"
            "fi\n\n");
    put(&b, "srun --ntasks=%d --kill-on-bad-exit=1 \"$UP\" run \"$PLAN\" --data \"$DATA\" --backend %s \\\n"
            "    --checkpoint-dir \"$CKPT\"", sh.gpus, cuda ? "cuda" : "cpu");
    if (o->ckpt_every > 0)
        put(&b, " --checkpoint-every %d", o->ckpt_every);
    if (o->steps > 0)
        put(&b, " --steps %d", o->steps);
    put(&b, " ${RESUME[@]+\"${RESUME[@]}\"}\n");
    char *t = finish(&b);
    if (!t)
        snprintf(err, errlen, "export: out of memory");
    return t;
}

char *export_slurm_megatron(const ModelSpec *m, const HwProfile *hw, const Layout *lo, const ExportOpts *o,
                            char *err, int errlen)
{
    if (export_check_time(o->time_limit, err, errlen) || export_check_job_name(o->job_name, err, errlen))
        return NULL;
    char *args = export_megatron(m, hw, lo, err, errlen);
    if (!args)
        return NULL;
    SlurmShape sh = slurm_shape(hw, lo);
    int fsdp = lo->opt == OPT_ZERO2 || lo->opt == OPT_ZERO3;
    Buf b = {0};
    sbatch_head(&b, o, sh, 1);
    put(&b, "#\n# %s on %d x %s (%d nodes of %d) with Megatron-LM's pretrain_gpt.py, one task per GPU\n"
            "# (srun sets the ranks: RANK, WORLD_SIZE and LOCAL_RANK from SLURM_PROCID, SLURM_NTASKS and\n"
            "# SLURM_LOCALID, which Megatron's initialisation reads; MASTER_ADDR is the first node).\n",
        m->name, sh.gpus, hw->name, sh.nodes, sh.per_node);
    put(&b, "# --save and --load name the same directory: a first submission finds no\n"
            "# latest_checkpointed_iteration.txt there and starts from scratch, a resubmission\n"
            "# continues from it. USR1 300 s before the limit: --exit-signal-handler saves and exits.\n"
            "# Set MEGATRON_LM (a Megatron-LM checkout), TRAIN_ITERS (unless exported with --steps)\n"
            "# and DATA_ARGS (data, tokenizer, learning-rate flags) in the environment.\n");
    put(&b, "set -euo pipefail\n\n");
    put(&b, ": \"${MEGATRON_LM:?set MEGATRON_LM to a Megatron-LM checkout}\"\n"
            ": \"${DATA_ARGS:?set DATA_ARGS to the data and tokenizer flags, e.g. --data-path ... --tokenizer-type "
            "...}\"\n");
    if (o->steps > 0)
        put(&b, "TRAIN_ITERS=%d\n", o->steps);
    else
        put(&b, ": \"${TRAIN_ITERS:?set TRAIN_ITERS to the number of optimizer steps}\"\n");
    put(&b, "[ -f \"$MEGATRON_LM/pretrain_gpt.py\" ] || { echo \"$0: no pretrain_gpt.py in $MEGATRON_LM\" >&2; "
            "exit 1; }\n");
    put(&b, "CKPT=");
    put_quoted(&b, o->ckpt_dir);
    put(&b, "\nmkdir -p \"$CKPT\"\n");
    if ((lo->tp > 1 || lo->cp > 1) && !fsdp)
        put(&b, "export CUDA_DEVICE_MAX_CONNECTIONS=1\n");
    else if (fsdp)
        put(&b, "unset CUDA_DEVICE_MAX_CONNECTIONS   # Megatron-FSDP asserts it is not 1\n");
    put(&b, "export MASTER_ADDR=$(scontrol show hostnames \"$SLURM_JOB_NODELIST\" | head -n 1)\n"
            "export MASTER_PORT=${MASTER_PORT:-29500}\n"
            "export OMP_NUM_THREADS=${OMP_NUM_THREADS:-8}\n\n");
    put(&b, "read -r -a DATA=<<<\"$DATA_ARGS\"\n");
    put(&b, "ARGS=(\n");
    /* the exported arguments, one per line, without comments and backslashes */
    for (const char *p = args; *p;) {
        const char *eol = strchr(p, '\n');
        size_t ll = eol ? (size_t)(eol - p) : strlen(p);
        if (ll && *p != '#') {
            size_t k = ll;
            if (k >= 2 && p[k - 1] == '\\' && p[k - 2] == ' ')
                k -= 2;
            put(&b, "    %.*s\n", (int)k, p);
        }
        p += ll + (eol ? 1 : 0);
    }
    put(&b, "    --train-iters \"$TRAIN_ITERS\"\n");
    put(&b, "    --save \"$CKPT\" --load \"$CKPT\" --save-interval %d\n", o->ckpt_every > 0 ? o->ckpt_every : 1000);
    put(&b, "    --exit-signal-handler --exit-signal SIGUSR1\n)\n\n");
    free(args);
    put(&b, "srun --kill-on-bad-exit=1 bash -c 'RANK=$SLURM_PROCID WORLD_SIZE=$SLURM_NTASKS LOCAL_RANK=$SLURM_LOCALID "
            "exec python \"$MEGATRON_LM/pretrain_gpt.py\" \"$@\"' pretrain_gpt \"${ARGS[@]}\" \"${DATA[@]}\"\n");
    char *t = finish(&b);
    if (!t)
        snprintf(err, errlen, "export: out of memory");
    return t;
}
