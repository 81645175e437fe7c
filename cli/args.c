/* args.c — shared flags of predict, plan and tui. */
#include "args.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "presets.h"
#include "profile.h"

enum {
    O_MODEL = ARGS_OPT_BASE, O_PARAMS, O_LAYERS, O_HIDDEN, O_HEADS, O_KV_HEADS, O_HEAD_DIM, O_FFN,
    O_VOCAB, O_VOCAB_DIV, O_SEQ, O_MLP, O_NORM, O_POS, O_BIAS, O_NO_BIAS, O_TIED, O_UNTIED,
    O_DROPOUT, O_NO_DROPOUT,
    O_GPU, O_PROFILE, O_GPUS, O_GPN,
    O_TP, O_PP, O_VP, O_CP, O_DP, O_SP, O_NO_SP, O_MBS, O_GBS, O_ZERO, O_DISTOPT, O_RECOMPUTE,
    O_PRECISION, O_FLASH, O_NO_FLASH, O_GRAD_FP32, O_NO_GRAD_FP32, O_FLOPS, O_STAGES,
    O_TOKENS, O_MTBF, O_RESTART, O_JSON, O_OUT,
};

static const struct option common[] = {
    {"model", required_argument, 0, O_MODEL},
    {"params", required_argument, 0, O_PARAMS},
    {"layers", required_argument, 0, O_LAYERS},
    {"hidden", required_argument, 0, O_HIDDEN},
    {"heads", required_argument, 0, O_HEADS},
    {"kv-heads", required_argument, 0, O_KV_HEADS},
    {"head-dim", required_argument, 0, O_HEAD_DIM},
    {"ffn", required_argument, 0, O_FFN},
    {"vocab", required_argument, 0, O_VOCAB},
    {"vocab-div", required_argument, 0, O_VOCAB_DIV},
    {"seq", required_argument, 0, O_SEQ},
    {"mlp", required_argument, 0, O_MLP},
    {"norm", required_argument, 0, O_NORM},
    {"pos", required_argument, 0, O_POS},
    {"bias", no_argument, 0, O_BIAS},
    {"no-bias", no_argument, 0, O_NO_BIAS},
    {"tied", no_argument, 0, O_TIED},
    {"untied", no_argument, 0, O_UNTIED},
    {"dropout", no_argument, 0, O_DROPOUT},
    {"no-dropout", no_argument, 0, O_NO_DROPOUT},
    {"gpu", required_argument, 0, O_GPU},
    {"profile", required_argument, 0, O_PROFILE},
    {"gpus", required_argument, 0, O_GPUS},
    {"gpus-per-node", required_argument, 0, O_GPN},
    {"tp", required_argument, 0, O_TP},
    {"pp", required_argument, 0, O_PP},
    {"vp", required_argument, 0, O_VP},
    {"cp", required_argument, 0, O_CP},
    {"dp", required_argument, 0, O_DP},
    {"sp", no_argument, 0, O_SP},
    {"no-sp", no_argument, 0, O_NO_SP},
    {"mbs", required_argument, 0, O_MBS},
    {"gbs", required_argument, 0, O_GBS},
    {"zero", required_argument, 0, O_ZERO},
    {"dist-opt", no_argument, 0, O_DISTOPT},
    {"recompute", required_argument, 0, O_RECOMPUTE},
    {"precision", required_argument, 0, O_PRECISION},
    {"flash", no_argument, 0, O_FLASH},
    {"no-flash", no_argument, 0, O_NO_FLASH},
    {"grad-fp32", no_argument, 0, O_GRAD_FP32},
    {"no-grad-fp32", no_argument, 0, O_NO_GRAD_FP32},
    {"flops", required_argument, 0, O_FLOPS},
    {"stage-layers", required_argument, 0, O_STAGES},
    {"tokens", required_argument, 0, O_TOKENS},
    {"mtbf", required_argument, 0, O_MTBF},
    {"restart-time", required_argument, 0, O_RESTART},
    {"json", no_argument, 0, O_JSON},
    {"output", required_argument, 0, O_OUT},
    {0, 0, 0, 0},
};

const struct option *args_common_options(void) { return common; }
int args_common_count(void) { return (int)(sizeof common / sizeof *common) - 1; }

const char *args_common_help(void)
{
    return
"Model (one of):\n"
"  --model NAME            a preset (gpt3-175b, llama2-7b, llama3.1-405b, ...; see `ultraplan models`)\n"
"  --params SIZE           the preset of that size, or a derived GPT-style shape (e.g. 175B, 20B)\n"
"  --layers N --hidden N --heads N [--kv-heads N] [--head-dim N] [--ffn N]\n"
"  --vocab N [--vocab-div N] --seq N [--mlp gelu|swiglu] [--norm layernorm|rmsnorm]\n"
"  [--pos learned|rope] [--bias|--no-bias] [--tied|--untied] [--dropout|--no-dropout]\n"
"                          an explicit shape; also override single fields of a preset\n"
"Hardware:\n"
"  --gpu NAME              a100-40g a100-80g h100-sxm h200 b200 gb200 (default h100-sxm)\n"
"  --profile FILE          a profile JSON (from `calibrate`, `fit` or your own)\n"
"  --gpus N                GPUs in the job\n"
"  --gpus-per-node N       GPUs per node / NVLink domain (default: the profile's)\n"
"Layout:\n"
"  --tp N --pp N --vp N --cp N [--dp N]   parallel sizes (dp defaults to gpus/(tp*pp*cp))\n"
"  --sp | --no-sp          sequence parallel (default on when tp > 1)\n"
"  --mbs N --gbs N         micro-batch and global batch in sequences (gbs default ~4M tokens)\n"
"  --zero 0..3 | --dist-opt   optimizer sharding (default 0; --dist-opt = Megatron's)\n"
"  --recompute none|selective|full   activation recomputation (default none)\n"
"  --stage-layers A,B,...  layers per pipeline stage (default even)\n"
"  --precision fp32|bf16|fp16|fp8 (default bf16)   --flash|--no-flash (default flash)\n"
"  --grad-fp32|--no-grad-fp32   fp32 main gradients (default on, Megatron's)\n"
"  --flops full|causal|6n|palm  FLOP convention for MFU (default full = Korthikanti Eq. 7)\n"
"Training:\n"
"  --tokens SIZE           token budget (default 20 tokens per parameter)\n"
"  --mtbf HOURS            per-GPU mean time between failures, 1e-6 to 1e15 (default: the profile's)\n"
"  --restart-time SECONDS  time to restart after a failure, 0 to 1e12 (default: the profile's)\n"
"Output:\n"
"  --json                  one JSON document on stdout\n"
"  -o, --output FILE       write the JSON to FILE (atomically)\n"
"Sizes take K M B G T (decimal) and KiB MiB GiB TiB / KB MB GB TB for bytes.\n";
}

void args_init(CliInputs *in)
{
    memset(in, 0, sizeof *in);
    layout_default(&in->layout);
    cost_opts_default(&in->opts);
    in->recompute = RECOMPUTE_NONE;
}

static int parse_suffixed(const char *s, double *out, bool bytes)
{
    if (!s || !*s)
        return -1;
    errno = 0;
    char *end;
    double v = strtod(s, &end);
    if (end == s || errno == ERANGE || !isfinite(v) || v < 0)
        return -1;
    while (*end == ' ')
        end++;
    double mult = 1;
    if (*end) {
        char u = (char)toupper((unsigned char)*end);
        const char *units = "KMGTP";
        const char *p = strchr(units, u == 'B' && !bytes ? 'G' : u);
        if (!p || !*p)
            return -1;
        int e = (int)(p - units) + 1;
        end++;
        if (bytes && (*end == 'i' || *end == 'I')) {
            mult = pow(1024.0, e);
            end++;
        } else {
            mult = pow(1000.0, e);
        }
        if (bytes && (*end == 'B' || *end == 'b'))
            end++;
        if (*end)
            return -1;
    }
    v *= mult;
    if (!isfinite(v) || v > 1e30)
        return -1;
    *out = v;
    return 0;
}

int args_parse_count(const char *s, double *out) { return parse_suffixed(s, out, false); }

int args_parse_bytes(const char *s, double *out)
{
    /* a bare "B" suffix is bytes here, not billions */
    size_t n = s ? strlen(s) : 0;
    if (n > 1 && (s[n - 1] == 'B' || s[n - 1] == 'b') && isdigit((unsigned char)s[n - 2])) {
        char tmp[64];
        if (n >= sizeof tmp)
            return -1;
        memcpy(tmp, s, n - 1);
        tmp[n - 1] = 0;
        return parse_suffixed(tmp, out, true);
    }
    return parse_suffixed(s, out, true);
}

int args_parse_int(const char *s, int *out)
{
    double v;
    if (args_parse_count(s, &v) != 0 || v != floor(v) || v > 2147483647.0)
        return -1;
    *out = (int)v;
    return 0;
}

int args_default_gbs(const ModelSpec *m)
{
    double seqs = 4194304.0 / m->s;
    int g = (int)pow(2.0, round(log2(seqs > 1 ? seqs : 1)));
    return g < 1 ? 1 : g;
}

#define BAD(...) do { snprintf(err, errlen, __VA_ARGS__); return -1; } while (0)

static int want_int(const char *flag, const char *arg, int min, int *out, char *err, int errlen)
{
    int v;
    if (args_parse_int(arg, &v) != 0 || v < min)
        BAD("--%s: expected a whole number >= %d, got \"%s\"", flag, min, arg);
    *out = v;
    return 0;
}

enum { SH_LAYERS = 1, SH_HIDDEN = 2, SH_HEADS = 4, SH_SEQ = 8, SH_VOCAB = 16 };

static int parse_stage_list(CliInputs *in, const char *arg, char *err, int errlen)
{
    const char *p = arg;
    in->n_stage_layers = 0;
    while (*p) {
        char *end;
        errno = 0;
        long v = strtol(p, &end, 10);
        if (end == p || errno || v < 1 || v > 100000)
            BAD("--stage-layers: expected a comma-separated list of layer counts >= 1, got \"%s\"", arg);
        if (in->n_stage_layers >= LAYOUT_MAX_PP)
            BAD("--stage-layers: more than %d stages", LAYOUT_MAX_PP);
        in->stage_layers[in->n_stage_layers++] = (int)v;
        p = end;
        if (*p == ',')
            p++;
        else if (*p)
            BAD("--stage-layers: expected a comma-separated list of layer counts, got \"%s\"", arg);
    }
    return 0;
}

int args_handle(CliInputs *in, int id, const char *arg, char *err, int errlen)
{
    ModelSpec *m = &in->model;
    Layout *lo = &in->layout;
    double v;
    switch (id) {
    case O_MODEL: in->model_name = arg; return 0;
    case O_PARAMS:
        if (args_parse_count(arg, &v) != 0 || v <= 0)
            BAD("--params: expected a parameter count such as 175B or 7e9, got \"%s\"", arg);
        in->params = v;
        return 0;
    case O_LAYERS: in->shape_given |= SH_LAYERS; return want_int("layers", arg, 1, &m->L, err, errlen);
    case O_HIDDEN: in->shape_given |= SH_HIDDEN; return want_int("hidden", arg, 1, &m->h, err, errlen);
    case O_HEADS: in->shape_given |= SH_HEADS; return want_int("heads", arg, 1, &m->a, err, errlen);
    case O_KV_HEADS: return want_int("kv-heads", arg, 1, &m->g, err, errlen);
    case O_HEAD_DIM: return want_int("head-dim", arg, 1, &m->d_head, err, errlen);
    case O_FFN: return want_int("ffn", arg, 1, &m->f, err, errlen);
    case O_VOCAB: in->shape_given |= SH_VOCAB; return want_int("vocab", arg, 1, &m->vocab, err, errlen);
    case O_VOCAB_DIV: return want_int("vocab-div", arg, 1, &m->vocab_div, err, errlen);
    case O_SEQ: in->shape_given |= SH_SEQ; return want_int("seq", arg, 1, &m->s, err, errlen);
    case O_MLP:
        if (spec_parse_mlp(arg, &m->mlp) != 0)
            BAD("--mlp: expected gelu or swiglu, got \"%s\"", arg);
        in->shape_given |= 1 << 8;
        return 0;
    case O_NORM:
        if (spec_parse_norm(arg, &m->norm) != 0)
            BAD("--norm: expected layernorm or rmsnorm, got \"%s\"", arg);
        in->shape_given |= 1 << 9;
        return 0;
    case O_POS:
        if (spec_parse_pos(arg, &m->pos) != 0)
            BAD("--pos: expected learned or rope, got \"%s\"", arg);
        in->shape_given |= 1 << 10;
        return 0;
    case O_BIAS: m->bias = true; in->shape_given |= 1 << 11; return 0;
    case O_NO_BIAS: m->bias = false; in->shape_given |= 1 << 11; return 0;
    case O_TIED: m->tied = true; in->shape_given |= 1 << 12; return 0;
    case O_UNTIED: m->tied = false; in->shape_given |= 1 << 12; return 0;
    case O_DROPOUT: m->dropout = true; in->shape_given |= 1 << 13; return 0;
    case O_NO_DROPOUT: m->dropout = false; in->shape_given |= 1 << 13; return 0;
    case O_GPU: in->gpu_name = arg; return 0;
    case O_PROFILE: in->profile_path = arg; return 0;
    case O_GPUS: return want_int("gpus", arg, 1, &in->gpus, err, errlen);
    case O_GPN: return want_int("gpus-per-node", arg, 1, &in->gpus_per_node, err, errlen);
    case O_TP: in->fixed |= FIX_TP; return want_int("tp", arg, 1, &lo->tp, err, errlen);
    case O_PP: in->fixed |= FIX_PP; return want_int("pp", arg, 1, &lo->pp, err, errlen);
    case O_VP: in->fixed |= FIX_VP; return want_int("vp", arg, 1, &lo->vp, err, errlen);
    case O_CP: in->fixed |= FIX_CP; return want_int("cp", arg, 1, &lo->cp, err, errlen);
    case O_DP: in->fixed |= FIX_DP; return want_int("dp", arg, 1, &lo->dp, err, errlen);
    case O_SP: in->fixed |= FIX_SP; lo->sp = true; return 0;
    case O_NO_SP: in->fixed |= FIX_SP; lo->sp = false; return 0;
    case O_MBS: in->fixed |= FIX_MBS; return want_int("mbs", arg, 1, &lo->mbs, err, errlen);
    case O_GBS: in->fixed |= FIX_GBS; return want_int("gbs", arg, 1, &lo->gbs, err, errlen);
    case O_ZERO:
        if (!(arg[0] >= '0' && arg[0] <= '3' && arg[1] == 0))
            BAD("--zero: expected 0, 1, 2 or 3, got \"%s\"", arg);
        if ((in->fixed & FIX_OPT) && lo->opt == OPT_DISTOPT)
            BAD("--zero and --dist-opt exclude each other");
        in->fixed |= FIX_OPT;
        lo->opt = (OptimShard)(arg[0] - '0');
        return 0;
    case O_DISTOPT:
        if ((in->fixed & FIX_OPT) && lo->opt != OPT_DISTOPT)
            BAD("--zero and --dist-opt exclude each other");
        in->fixed |= FIX_OPT;
        lo->opt = OPT_DISTOPT;
        return 0;
    case O_RECOMPUTE:
        if (spec_parse_recompute(arg, &in->recompute) != 0)
            BAD("--recompute: expected none, selective or full, got \"%s\"", arg);
        in->fixed |= FIX_RC;
        return 0;
    case O_PRECISION:
        if (hw_parse_precision(arg, &lo->prec) != 0)
            BAD("--precision: expected fp32, bf16, fp16 or fp8, got \"%s\"", arg);
        in->fixed |= FIX_PREC;
        return 0;
    case O_FLASH: in->fixed |= FIX_FLASH; lo->flash = true; return 0;
    case O_NO_FLASH: in->fixed |= FIX_FLASH; lo->flash = false; return 0;
    case O_GRAD_FP32: lo->grad_fp32 = true; return 0;
    case O_NO_GRAD_FP32: lo->grad_fp32 = false; return 0;
    case O_FLOPS:
        if (spec_parse_flops(arg, &lo->flops) != 0)
            BAD("--flops: expected full, causal, 6n or palm, got \"%s\"", arg);
        return 0;
    case O_STAGES: in->fixed |= FIX_STAGES; return parse_stage_list(in, arg, err, errlen);
    case O_TOKENS:
        if (args_parse_count(arg, &v) != 0 || v <= 0)
            BAD("--tokens: expected a token count such as 300B, got \"%s\"", arg);
        in->opts.tokens = v;
        return 0;
    case O_MTBF:
        /* bounded so that failures per day and over the run stay finite at 1e8 GPUs */
        if (args_parse_count(arg, &v) != 0 || v < 1e-6 || v > 1e15)
            BAD("--mtbf: expected per-GPU hours from 1e-6 to 1e15, got \"%s\"", arg);
        in->opts.mtbf_gpu_hours = v;
        return 0;
    case O_RESTART:
        if (args_parse_count(arg, &v) != 0 || v > 1e12)
            BAD("--restart-time: expected seconds from 0 to 1e12, got \"%s\"", arg);
        in->opts.restart_s = v;
        return 0;
    case O_JSON: in->json = true; return 0;
    case O_OUT: in->out_path = arg; return 0;
    default: BAD("internal: unknown option id %d", id);
    }
}

/* Explicit shape flags override fields of the preset they start from. */
static int resolve_model(CliInputs *in, char *err, int errlen)
{
    ModelSpec given = in->model;
    int sh = in->shape_given;
    if (in->model_name && in->params > 0)
        BAD("--model and --params exclude each other");
    if (in->model_name) {
        if (presets_find(in->model_name, &in->model, err, errlen) != 0)
            return -1;
    } else if (in->params > 0) {
        if (presets_from_params(in->params, &in->model, in->model_rule, sizeof in->model_rule, err, errlen) != 0)
            return -1;
    } else {
        int need = SH_LAYERS | SH_HIDDEN | SH_HEADS | SH_SEQ | SH_VOCAB;
        if ((sh & need) != need) {
            const char *miss = !(sh & SH_LAYERS) ? "--layers" : !(sh & SH_HIDDEN) ? "--hidden"
                             : !(sh & SH_HEADS) ? "--heads" : !(sh & SH_SEQ) ? "--seq" : "--vocab";
            BAD("no model: give --model NAME, --params SIZE, or a full shape (missing %s)", miss);
        }
        ModelSpec *m = &in->model;
        /* a custom shape starts GPT-style unless told otherwise */
        if (!(sh & (1 << 11))) m->bias = false;
        if (!(sh & (1 << 12))) m->tied = true;
        strcpy(m->name, "custom");
        return spec_validate(m, err, errlen);
    }
    ModelSpec *m = &in->model;
    if (sh & SH_LAYERS) m->L = given.L;
    if (sh & SH_HIDDEN) { m->h = given.h; m->d_head = 0; if (!given.f) m->f = 0; }
    if (sh & SH_HEADS) { m->a = given.a; m->d_head = 0; if (!given.g) m->g = 0; }
    if (sh & SH_SEQ) m->s = given.s;
    if (sh & SH_VOCAB) m->vocab = given.vocab;
    if (given.g) m->g = given.g;
    if (given.d_head) m->d_head = given.d_head;
    if (given.f) m->f = given.f;
    if (given.vocab_div) m->vocab_div = given.vocab_div;
    if (sh & (1 << 8)) { m->mlp = given.mlp; if (!given.f) m->f = 0; }
    if (sh & (1 << 9)) m->norm = given.norm;
    if (sh & (1 << 10)) m->pos = given.pos;
    if (sh & (1 << 11)) m->bias = given.bias;
    if (sh & (1 << 12)) m->tied = given.tied;
    if (sh & (1 << 13)) m->dropout = given.dropout;
    if (sh && strlen(m->name) + 2 < sizeof m->name)
        strcat(m->name, "*");   /* a preset with overridden fields */
    return spec_validate(m, err, errlen);
}

static int resolve_hw(CliInputs *in, char *err, int errlen)
{
    if (in->gpu_name && in->profile_path)
        BAD("--gpu and --profile exclude each other");
    if (in->profile_path) {
        if (profile_load_file(in->profile_path, &in->hw, err, errlen) != 0)
            return -1;
    } else if (profile_load_builtin(in->gpu_name ? in->gpu_name : "h100-sxm", &in->hw, err, errlen) != 0) {
        return -1;
    }
    if (in->gpus_per_node > 0)
        in->hw.gpus_per_node = in->gpus_per_node;
    return 0;
}

int args_finish(CliInputs *in, bool need_layout, char *err, int errlen)
{
    if (resolve_model(in, err, errlen) != 0 || resolve_hw(in, err, errlen) != 0)
        return -1;
    Layout *lo = &in->layout;
    /* a profile without bf16 (a calibrated CPU) trains in the best it has */
    if (!(in->fixed & FIX_PREC) && in->hw.peak[lo->prec] <= 0) {
        static const Precision order[] = {PREC_BF16, PREC_FP32, PREC_FP16, PREC_FP8};
        for (int i = 3; i >= 0; i--)
            if (in->hw.peak[order[i]] > 0)
                lo->prec = order[i];
    }
    if (!(in->fixed & FIX_GBS))
        lo->gbs = args_default_gbs(&in->model);
    if (in->n_stage_layers) {
        if ((in->fixed & FIX_PP) && in->n_stage_layers != lo->pp)
            BAD("--stage-layers lists %d stages but --pp is %d", in->n_stage_layers, lo->pp);
        lo->pp = in->n_stage_layers;
        in->fixed |= FIX_PP;
        for (int s = 0; s < lo->pp; s++)
            lo->layers[s] = in->stage_layers[s];
    }
    if (!need_layout)
        return 0;
    /* in 64 bits: --tp 65536 --pp 65536 must be an error, not a wrapped zero */
    long long mpl = (long long)lo->tp * lo->pp * lo->cp;
    if (mpl > 100000000LL)
        BAD("--tp %d, --pp %d and --cp %d give %lld GPUs per model replica, beyond any cluster (1e8)", lo->tp,
            lo->pp, lo->cp, mpl);
    int mp = (int)mpl;
    if (in->gpus > 0) {
        if (in->fixed & FIX_DP) {
            if ((long long)lo->dp * mp != in->gpus)
                BAD("--gpus %d does not equal dp*tp*pp*cp = %d*%d*%d*%d = %lld", in->gpus, lo->dp, lo->tp,
                    lo->pp, lo->cp, (long long)lo->dp * mp);
        } else {
            if (in->gpus % mp != 0)
                BAD("--gpus %d is not a multiple of tp*pp*cp = %d*%d*%d = %d", in->gpus, lo->tp, lo->pp, lo->cp, mp);
            lo->dp = in->gpus / mp;
        }
    }
    in->gpus = layout_gpus(lo);
    if (layout_check(lo, &in->model, &in->hw, err, errlen) != 0)
        return -1;
    layout_set_recompute(lo, &in->model, in->recompute);
    return 0;
}
