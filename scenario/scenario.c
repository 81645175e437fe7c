/* scenario.c — setting knobs and resolving a Scenario (see scenario.h). */
#include "scenario.h"
#include "stacks.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fmt.h"
#include "hfconfig.h"
#include "parse.h"
#include "presets.h"
#include "profile.h"

#define BAD(...) do { snprintf(err, errlen, __VA_ARGS__); return -1; } while (0)

void scenario_init(Scenario *sc)
{
    memset(sc, 0, sizeof *sc);
    layout_default(&sc->layout);
    cost_opts_default(&sc->opts);
    sc->recompute = RECOMPUTE_NONE;
    sc->mem_margin = -1;
}

int scenario_parse_mem_margin(Scenario *sc, const char *text, char *err, int errlen)
{
    size_t n = strlen(text);
    double v;
    if (n > 1 && text[n - 1] == '%') {
        char num[64];
        if (n - 1 >= sizeof num)
            BAD("--mem-margin: expected GiB (4, 4GiB, 512MiB) or a percentage of the GPU's memory (5%%), got \"%s\"",
                text);
        memcpy(num, text, n - 1);
        num[n - 1] = 0;
        if (util_parse_count(num, &v) != 0 || !(v >= 0 && v <= 90))
            BAD("--mem-margin: a percentage must be from 0%% to 90%%, got \"%s\"", text);
        sc->mem_margin = v / 100.0;
        sc->mem_margin_frac = true;
        return 0;
    }
    /* a bare number is GiB; with a unit, bytes as every size flag takes them */
    char *end;
    errno = 0;
    double g = strtod(text, &end);
    if (end != text && *end == 0 && errno == 0) {
        v = g * 1073741824.0;
    } else if (util_parse_bytes(text, &v) != 0) {
        BAD("--mem-margin: expected GiB (4, 4GiB, 512MiB) or a percentage of the GPU's memory (5%%), got \"%s\"",
            text);
    }
    if (!(v >= 0 && v <= 1e15))
        BAD("--mem-margin: expected 0 or more bytes (4, 4GiB, 512MiB) or a percentage (5%%), got \"%s\"", text);
    sc->mem_margin = v;
    sc->mem_margin_frac = false;
    return 0;
}

int scenario_assumed(const Scenario *sc, char *buf, int len)
{
    buf[0] = 0;
    if (sc->model_name || sc->params > 0 || sc->hf_config || strcmp(sc->model.name, "custom") != 0)
        return 0;
    int n = 0, count = 0;
    for (int i = 0; i < KNOB_COUNT && n < len; i++) {
        const Knob *k = knob_get((KnobId)i);
        if (k->group != KNOB_MODEL || (sc->given & KNOB_BIT(i)) || (k->type != KNOB_BOOL && k->type != KNOB_ENUM))
            continue;
        char v[32];
        knob_format(k, knob_get_int(k, &sc->model), v, sizeof v);
        n += snprintf(buf + n, len - n, "%s--%s %s", count++ ? ", " : "", k->flag, v);
    }
    return count;
}

/* GPT-3's batch by model size (Brown et al. 2020, table 2.1): parameters and tokens per step. */
static const struct {
    double params;   // parameters
    double tokens;   // tokens per step
} gpt3_batch[] = {
    {125e6, 0.5e6}, {350e6, 0.5e6}, {760e6, 0.5e6}, {1.3e9, 1e6},
    {2.7e9, 1e6},   {6.7e9, 2e6},   {13e9, 2e6},    {175e9, 3.2e6},
};

void scenario_default_batch(const ModelSpec *m, int gpus, DefaultBatch *d)
{
    memset(d, 0, sizeof *d);
    /* (a) model size: the row nearest in log of parameters (the ends beyond the table) */
    double n = (double)spec_params(m, 1, PARAMS_EXACT), best = INFINITY;
    if (!(n > 0))   /* no shape yet: the smallest row */
        n = gpt3_batch[0].params;
    for (size_t i = 0; i < sizeof gpt3_batch / sizeof *gpt3_batch; i++) {
        double dist = fabs(log(n / gpt3_batch[i].params));
        if (dist < best) {
            best = dist;
            d->row_params = gpt3_batch[i].params;
            d->model_tokens = gpt3_batch[i].tokens;
        }
    }
    /* (b) cluster size: SCENARIO_TOKENS_PER_GPU tokens per GPU */
    d->gpus = gpus > 0 ? gpus : 0;
    double s = m->s > 0 ? m->s : 1;
    d->gpu_seqs = (double)d->gpus * SCENARIO_TOKENS_PER_GPU / s;
    double seqs = d->model_tokens / s;
    double target = seqs > d->gpu_seqs ? seqs : d->gpu_seqs;
    if (target < 1)
        target = 1;
    /* unit x 2^k nearest the target in log, unit = the odd part of the GPU count;
     * a unit more than twice the target would overshoot: powers of two then */
    d->unit = d->gpus > 0 ? d->gpus : 1;
    while (d->unit % 2 == 0)
        d->unit /= 2;
    if (d->unit > 2 * target)
        d->unit = 1;
    double k = round(log2(target / d->unit));
    if (k < 0)
        k = 0;
    double g = d->unit * pow(2.0, k);
    d->gbs = g > 1e9 ? 1000000000 : (int)g;
}

int scenario_default_gbs(const ModelSpec *m, int gpus)
{
    DefaultBatch d;
    scenario_default_batch(m, gpus, &d);
    return d.gbs;
}

void scenario_default_batch_text(const DefaultBatch *d, char *buf, int len)
{
    char t[32], p[32], u[32] = "";
    if (d->unit > 1)
        snprintf(u, sizeof u, "%d x ", d->unit);
    snprintf(buf, len, "the larger of GPT-3's %s tokens at %s params and %d tokens per GPU, as %s2^k sequences",
             util_si(d->model_tokens, 2, t, sizeof t), util_si(d->row_params, 3, p, sizeof p),
             SCENARIO_TOKENS_PER_GPU, u);
}

void *scenario_knob_obj(Scenario *sc, const Knob *k)
{
    return k->group == KNOB_MODEL ? (void *)&sc->model : k->group == KNOB_LAYOUT ? (void *)&sc->layout : (void *)sc;
}

/* "A,B,C" into a per-stage array; the entries after the list are zeroed. */
static int parse_list(const Knob *k, const char *arg, int *out, char *err, int errlen)
{
    int n = 0;
    const char *p = arg;
    int vals[LAYOUT_MAX_PP];
    if (!*p)
        BAD("--%s: expected %s, got \"%s\"", k->flag, k->expect, arg);
    while (*p) {
        char *end;
        errno = 0;
        long v = strtol(p, &end, 10);
        if (end == p || errno || v < k->min || v > k->max)
            BAD("--%s: expected %s, got \"%s\"", k->flag, k->expect, arg);
        if (n >= LAYOUT_MAX_PP)
            BAD("--%s: more than %d stages", k->flag, LAYOUT_MAX_PP);
        vals[n++] = (int)v;
        p = end;
        if (*p == ',' && p[1])
            p++;
        else if (*p)
            BAD("--%s: expected %s, got \"%s\"", k->flag, k->expect, arg);
    }
    for (int s = 0; s < LAYOUT_MAX_PP; s++)
        out[s] = s < n ? vals[s] : 0;
    return 0;
}

int scenario_set_knob(Scenario *sc, const Knob *k, bool neg, const char *text, char *err, int errlen)
{
    void *obj = scenario_knob_obj(sc, k);
    int v = 0;
    double d = 0;
    switch (k->type) {
    case KNOB_DOUBLE:
        if (knob_parse_double(k, text, &d, NULL, err, errlen) != 0)
            return -1;
        knob_set_double(k, obj, d);
        break;
    case KNOB_BOOL:
        v = !neg;
        if ((sc->given & KNOB_BIT(k->id)) && knob_get_int(k, obj) != v)
            BAD("--%s and --%s contradict each other", k->flag, k->neg_flag);
        break;
    case KNOB_ENUM:
        if (neg) {
            v = k->alias_value;
            if ((sc->given & KNOB_BIT(k->id)) && knob_get_int(k, obj) != v)
                BAD("--%s and --%s exclude each other", k->flag, k->neg_flag);
        } else {
            if (knob_parse(k, text, &v, NULL, err, errlen) != 0)
                return -1;
            if (k->neg_flag && (sc->given & KNOB_BIT(k->id)) && knob_get_int(k, obj) == k->alias_value &&
                v != k->alias_value)
                BAD("--%s and --%s exclude each other", k->flag, k->neg_flag);
        }
        break;
    case KNOB_INT:
        if (k->id == K_MOE_FREQ && text && strchr(text, '[')) {
            /* Megatron's list form: K leading dense layers, then every F-th layer MoE */
            int first = 0, len = 0;
            if (spec_parse_moe_freq(text, &v, &first, &len, err, errlen) != 0)
                return -1;
            sc->model.moe_first_dense = first;
            sc->moe_freq_len = len;
            sc->given |= KNOB_BIT(K_MOE_FIRST_DENSE);
            break;
        }
        if (knob_parse(k, text, &v, NULL, err, errlen) != 0)
            return -1;
        if (k->id == K_MOE_FREQ)
            sc->moe_freq_len = 0;
        break;
    case KNOB_LIST:
        if (parse_list(k, text, knob_field(k, obj), err, errlen) != 0)
            return -1;
        break;
    case KNOB_STR:
        if (knob_set_str(k, obj, text, NULL, err, errlen) != 0)
            return -1;
        break;
    case KNOB_DERIVED: BAD("%s is derived from the other knobs", k->name);
    }
    if (k->type != KNOB_LIST && k->type != KNOB_DOUBLE && k->type != KNOB_STR)
        knob_set_int(k, obj, v);
    sc->given |= KNOB_BIT(k->id);
    sc->fixed |= k->fix;
    return 0;
}

/* Model knobs given over a preset (or a --hf-config model) override its
 * fields; the fields derived from a given one (head_dim from hidden, ...)
 * are derived again unless given too. */
static int resolve_model(Scenario *sc, char *err, int errlen)
{
    ModelSpec given = sc->model;
    KnobSet shape = 0;
    for (int i = 0; i < KNOB_COUNT; i++)
        if (knob_get((KnobId)i)->group == KNOB_MODEL)
            shape |= sc->given & KNOB_BIT(i);
    if (sc->model_name && sc->params > 0)
        BAD("--model and --params exclude each other");
    if (sc->hf_config && (sc->model_name || sc->params > 0))
        BAD("--hf-config and --%s exclude each other", sc->model_name ? "model" : "params");
    ModelSpec *m = &sc->model;
    if (sc->model_name) {
        if (presets_find(sc->model_name, m, err, errlen) != 0)
            return -1;
    } else if (sc->hf_config) {
        /* a third source beside presets and --params; shape knobs override it below */
        if (hfconfig_load(sc->hf_config, m, sc->model_rule, sizeof sc->model_rule, err, errlen) != 0)
            return -1;
    } else if (sc->params > 0) {
        if (presets_from_params(sc->params, m, sc->model_rule, sizeof sc->model_rule, err, errlen) != 0)
            return -1;
    } else {
        for (int i = 0; i < KNOB_COUNT; i++) {
            const Knob *k = knob_get((KnobId)i);
            if (k->custom_required && !(shape & KNOB_BIT(i)))
                BAD("no model: give --model NAME, --params SIZE, --hf-config FILE or a full shape (missing --%s)",
                    k->flag);
        }
        /* a custom shape starts GPT-style unless told otherwise */
        for (int i = 0; i < KNOB_COUNT; i++) {
            const Knob *k = knob_get((KnobId)i);
            if (k->group == KNOB_MODEL && k->type == KNOB_BOOL && !(shape & KNOB_BIT(i)))
                knob_set_int(k, m, k->custom_default);
        }
        strcpy(m->name, "custom");
        if (sc->moe_freq_len > 0 && sc->moe_freq_len != m->L)
            BAD("--moe-layer-freq: the list has %d entries, the model %d layers", sc->moe_freq_len, m->L);
        return spec_validate(m, err, errlen);
    }
    for (int i = 0; i < KNOB_COUNT; i++) {
        const Knob *k = knob_get((KnobId)i);
        if (!(shape & KNOB_BIT(i)))
            continue;
        for (int r = 0; r < KNOB_COUNT; r++)
            if ((k->resets & KNOB_BIT(r)) && !(shape & KNOB_BIT(r)))
                knob_set_int(knob_get((KnobId)r), m, 0);
    }
    for (int i = 0; i < KNOB_COUNT; i++)
        if (shape & KNOB_BIT(i))
            knob_copy(knob_get((KnobId)i), m, &given);
    if (shape && strlen(m->name) + 2 < sizeof m->name)
        strcat(m->name, "*");   /* a preset with overridden fields */
    if (sc->moe_freq_len > 0 && sc->moe_freq_len != m->L)
        BAD("--moe-layer-freq: the list has %d entries, the model %d layers", sc->moe_freq_len, m->L);
    return spec_validate(m, err, errlen);
}

void scenario_resolve_margin(Scenario *sc)
{
    if (sc->mem_margin < 0)
        sc->mem_margin_bytes = SCENARIO_MEM_MARGIN_DEFAULT * sc->hw.hbm_bytes;
    else
        sc->mem_margin_bytes = sc->mem_margin_frac ? sc->mem_margin * sc->hw.hbm_bytes : sc->mem_margin;
}

static int resolve_hw(Scenario *sc, char *err, int errlen)
{
    if (sc->gpu_name && sc->profile_path)
        BAD("--gpu and --profile exclude each other");
    if (sc->profile_path) {
        if (profile_load_file(sc->profile_path, &sc->hw, err, errlen) != 0)
            return -1;
    } else if (profile_load_builtin(sc->gpu_name ? sc->gpu_name : "h100-sxm", &sc->hw, err, errlen) != 0) {
        return -1;
    }
    if (sc->gpus_per_node > 0)
        sc->hw.gpus_per_node = sc->gpus_per_node;
    /* --target torchtitan without --stack: the layouts torchtitan runs, priced as torchtitan runs them */
    if (sc->layout.target == TARGET_TORCHTITAN && !(sc->given & KNOB_BIT(K_STACK)))
        sc->layout.stack = stacks_index("torchtitan");
    /* the software stack, once, on the freshly loaded profile (model/stack.h) */
    if (stacks_apply(&sc->hw, sc->layout.stack, err, errlen) != 0)
        return -1;
    scenario_resolve_margin(sc);
    if (!(sc->mem_margin_bytes < sc->hw.hbm_bytes))
        BAD("--mem-margin: %.1f GiB leaves nothing of the %.1f GiB of a %s", sc->mem_margin_bytes / 1073741824.0,
            sc->hw.hbm_bytes / 1073741824.0, sc->hw.name);
    return 0;
}

int scenario_finish(Scenario *sc, bool need_layout, char *err, int errlen)
{
    if (resolve_model(sc, err, errlen) != 0 || resolve_hw(sc, err, errlen) != 0)
        return -1;
    char assumed[200];
    if (scenario_assumed(sc, assumed, sizeof assumed) > 0)   /* say what an explicit shape took by default */
        snprintf(sc->model_rule, sizeof sc->model_rule, "explicit shape; assumed %s (give the flag to change it)",
                 assumed);
    Layout *lo = &sc->layout;
    /* a profile without bf16 (a calibrated CPU) trains in the best it has */
    if (!(sc->fixed & FIX_PREC) && sc->hw.peak[lo->prec] <= 0) {
        static const Precision order[] = {PREC_BF16, PREC_FP32, PREC_FP16, PREC_FP8};
        for (int i = 3; i >= 0; i--)
            if (sc->hw.peak[order[i]] > 0)
                lo->prec = order[i];
    }
    if (!(sc->fixed & FIX_GBS)) {   /* the GPU count: --gpus, else the fixed layout's (dp 1 unless given) */
        long long g = sc->gpus > 0 ? sc->gpus : (long long)lo->tp * lo->pp * lo->cp * lo->dp;
        lo->gbs = scenario_default_gbs(&sc->model, g > 0 && g <= 100000000LL ? (int)g : 0);
    }
    {   /* the layout fields the stack decides: what --recompute selective means under it, and the CP
         * exchange where it runs one (torchtitan: PyTorch's all-gather), which --cp-comm cannot change */
        CpComm asked = lo->cp_comm;
        stacks_layout_settings(lo);
        if ((sc->given & KNOB_BIT(K_CP_COMM)) && lo->cp_comm != asked)
            BAD("--cp-comm %s: the %s stack exchanges K/V by %s whatever is asked (--stack; profiles/stacks/%s.json)",
                layout_cp_comm_name(asked), stacks_name(lo->stack), layout_cp_comm_name(lo->cp_comm),
                stacks_name(lo->stack));
    }
    if ((sc->given & KNOB_BIT(K_PP_LAYOUT)) && !lo->pp_layout[0])
        BAD("--pipeline-layout: expected a layout such as \"Et|(tt|)*30mL\", got an empty string");
    if (lo->pp_layout[0]) {
        /* the string's entries are pp x vp chunks: vp follows from it, as in Megatron */
        if (!(sc->given & KNOB_BIT(K_PP)))
            BAD("--pipeline-layout needs --pp (its '|'-separated entries are pp x vp model chunks)");
        PipeLayout p;
        char why[200];
        if (layout_pp_parse(lo->pp_layout, lo->pp, NULL, &p, why, sizeof why) != 0)
            BAD("--pipeline-layout \"%s\": %s", lo->pp_layout, why);
        if ((sc->given & KNOB_BIT(K_VP)) && lo->vp != p.vp)
            BAD("--pipeline-layout \"%s\" has %d chunks per stage at --pp %d, but --vp is %d", lo->pp_layout, p.vp,
                lo->pp, lo->vp);
        lo->vp = p.vp;
        for (int st = 0; st < lo->pp; st++) {   /* the stage split the planner keeps (as --stage-layers) */
            lo->layers[st] = 0;
            for (int c = 0; c < p.vp; c++)
                lo->layers[st] += p.t[c * lo->pp + st];
        }
    }
    if ((sc->fixed & FIX_STAGES) && !lo->pp_layout[0]) {
        int n = 0;
        while (n < LAYOUT_MAX_PP && lo->layers[n] > 0)
            n++;
        if ((sc->fixed & FIX_PP) && n != lo->pp)
            BAD("--stage-layers lists %d stages but --pp is %d", n, lo->pp);
        lo->pp = n;
        sc->fixed |= FIX_PP;
    }
    /* sequence parallel splits what tensor parallel replicates: nothing at tp 1 */
    if ((sc->given & KNOB_BIT(K_SP)) && lo->sp && lo->tp == 1 && (need_layout || (sc->fixed & FIX_TP)))
        BAD("--sp needs --tp > 1 (sequence parallel splits the activations tensor parallel replicates)");
    if (!need_layout)
        return 0;
    /* in 64 bits: --tp 65536 --pp 65536 must be an error, not a wrapped zero */
    long long mpl = (long long)lo->tp * lo->pp * lo->cp;
    if (mpl > 100000000LL)
        BAD("--tp %d, --pp %d and --cp %d give %lld GPUs per model replica, beyond any cluster (1e8)", lo->tp,
            lo->pp, lo->cp, mpl);
    int mp = (int)mpl;
    if (sc->gpus > 0) {
        if (sc->fixed & FIX_DP) {
            if ((long long)lo->dp * mp != sc->gpus)
                BAD("--gpus %d does not equal dp*tp*pp*cp = %d*%d*%d*%d = %lld", sc->gpus, lo->dp, lo->tp,
                    lo->pp, lo->cp, (long long)lo->dp * mp);
        } else {
            if (sc->gpus % mp != 0)
                BAD("--gpus %d is not a multiple of tp*pp*cp = %d*%d*%d = %d", sc->gpus, lo->tp, lo->pp, lo->cp, mp);
            lo->dp = sc->gpus / mp;
        }
    }
    sc->gpus = layout_gpus(lo);
    if (layout_check(lo, &sc->model, &sc->hw, err, errlen) != 0)
        return -1;
    layout_set_recompute(lo, sc->recompute);
    return 0;
}
