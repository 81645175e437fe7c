/* export.c — Megatron-LM arguments and a Slurm script for a plan. */
#include "export.h"

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

static const char *const format_names[] = {"megatron", "slurm"};
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

void export_opts_default(ExportOpts *o)
{
    o->plan_path = "plan.json";
    o->job_name = "ultraplan";
    o->time_limit = "48:00:00";
    o->ckpt_dir = "checkpoints";
}

/* Comment lines first (a comment cannot sit inside a continued command),
 * then one argument per line. */
static void recompute_notes(Buf *b, const Layout *lo)
{
    int maxf = 0, maxe = 0, minf = 1 << 30, all_full = 1;
    for (int s = 0; s < lo->pp; s++) {
        maxf = lo->full_rc[s] > maxf ? lo->full_rc[s] : maxf;
        minf = lo->full_rc[s] < minf ? lo->full_rc[s] : minf;
        maxe = lo->sel_rc[s] > maxe ? lo->sel_rc[s] : maxe;
        all_full &= lo->full_rc[s] == lo->layers[s];
    }
    if (maxf > 0 && !all_full && minf != maxf) {
        put(b, "# recompute: the plan recomputes fully");
        for (int s = 0; s < lo->pp; s++)
            put(b, "%s%d", s ? "/" : " ", lo->full_rc[s]);
        put(b, " layers per stage; Megatron takes one count for every stage, so the largest (%d) is used\n", maxf);
    }
    if (maxf > 0 && maxe > 0)
        put(b, "# recompute: the plan also recomputes %d layers selectively; Megatron cannot mix granularities, "
               "full recomputation is used\n", maxe);
    else if (maxe > 0)
        put(b, "# recompute: the plan recomputes up to %d layers per stage selectively; Megatron's selective "
               "granularity covers every layer\n", maxe);
    if (lo->opt == OPT_ZERO2 || lo->opt == OPT_ZERO3)
        put(b, "# optimizer: ZeRO-%d shards %s; Megatron-LM's distributed optimizer shards only optimizer states "
               "(use Megatron-FSDP or DeepSpeed for this plan's memory)\n", lo->opt == OPT_ZERO2 ? 2 : 3,
            lo->opt == OPT_ZERO2 ? "gradients too" : "gradients and parameters too");
}

char *export_megatron(const ModelSpec *m, const Layout *lo)
{
    Buf b = {0};
    const char *args[64];
    char vals[64][48];
    int n = 0;
#define ARG(flag) (args[n] = (flag), vals[n][0] = 0, n++)
#define ARGV(flag, ...) (args[n] = (flag), snprintf(vals[n], sizeof vals[n], __VA_ARGS__), n++)
    put(&b, "# Megatron-LM arguments (pretrain_gpt.py) for %s on %d GPUs: dp %d, tp %d, pp %d, vp %d, cp %d\n",
        m->name, layout_gpus(lo), lo->dp, lo->tp, lo->pp, lo->vp, lo->cp);
    put(&b, "# data-parallel size %d follows from the world size; tokenizer and data flags are yours "
            "(vocabulary %d)\n", lo->dp, m->vocab);
    recompute_notes(&b, lo);
    ARGV("--tensor-model-parallel-size", "%d", lo->tp);
    ARGV("--pipeline-model-parallel-size", "%d", lo->pp);
    if (lo->vp > 1)
        ARGV("--num-layers-per-virtual-pipeline-stage", "%d", m->L / (lo->pp * lo->vp));
    ARGV("--context-parallel-size", "%d", lo->cp);
    if (lo->sp && lo->tp > 1)
        ARG("--sequence-parallel");
    if (lo->opt == OPT_DISTOPT || lo->opt == OPT_ZERO1)
        ARG("--use-distributed-optimizer");
    int uneven = 0;
    for (int s = 1; s < lo->pp; s++)
        uneven |= lo->layers[s] != lo->layers[0];
    if (lo->pp > 1 && uneven) {
        ARGV("--decoder-first-pipeline-num-layers", "%d", lo->layers[0]);
        ARGV("--decoder-last-pipeline-num-layers", "%d", lo->layers[lo->pp - 1]);
    }
    int maxf = 0, maxe = 0, all_full = 1;
    for (int s = 0; s < lo->pp; s++) {
        maxf = lo->full_rc[s] > maxf ? lo->full_rc[s] : maxf;
        maxe = lo->sel_rc[s] > maxe ? lo->sel_rc[s] : maxe;
        all_full &= lo->full_rc[s] == lo->layers[s];
    }
    if (maxf > 0) {
        ARGV("--recompute-granularity", "full");
        if (all_full) {
            ARGV("--recompute-method", "uniform");
            ARGV("--recompute-num-layers", "1");
        } else {
            ARGV("--recompute-method", "block");
            ARGV("--recompute-num-layers", "%d", lo->vp > 1 ? (maxf + lo->vp - 1) / lo->vp : maxf);
        }
    } else if (maxe > 0) {
        ARGV("--recompute-granularity", "selective");
    }
    ARGV("--micro-batch-size", "%d", lo->mbs);
    ARGV("--global-batch-size", "%d", lo->gbs);
    ARGV("--num-layers", "%d", m->L);
    ARGV("--hidden-size", "%d", m->h);
    ARGV("--num-attention-heads", "%d", m->a);
    if (spec_head_dim(m) * m->a != m->h)
        ARGV("--kv-channels", "%d", spec_head_dim(m));
    if (m->g != m->a) {
        ARG("--group-query-attention");
        ARGV("--num-query-groups", "%d", m->g);
    }
    ARGV("--ffn-hidden-size", "%d", m->f);
    ARGV("--seq-length", "%d", m->s);
    ARGV("--max-position-embeddings", "%d", m->s);
    if (m->mlp == MLP_SWIGLU)
        ARG("--swiglu");
    ARGV("--normalization", "%s", m->norm == NORM_RMSNORM ? "RMSNorm" : "LayerNorm");
    ARGV("--position-embedding-type", "%s", m->pos == POS_ROPE ? "rope" : "learned_absolute");
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
    if (lo->prec == PREC_FP8)
        ARGV("--fp8-format", "hybrid");
    if (lo->grad_fp32 && lo->prec != PREC_FP32)
        ARG("--accumulate-allreduce-grads-in-fp32");
    if (lo->flash)
        ARG("--use-flash-attn");
#undef ARG
#undef ARGV
    for (int i = 0; i < n; i++)
        put(&b, "%s%s%s%s\n", args[i], vals[i][0] ? " " : "", vals[i], i + 1 < n ? " \\" : "");
    return finish(&b);
}

char *export_slurm(const ModelSpec *m, const HwProfile *hw, const Layout *lo, const ExportOpts *o)
{
    Buf b = {0};
    int gpus = layout_gpus(lo);
    int gpn = hw->gpus_per_node > 0 ? hw->gpus_per_node : 1;
    int per_node = gpus < gpn ? gpus : gpn;
    int nodes = (gpus + per_node - 1) / per_node;
    put(&b, "#!/bin/bash\n");
    put(&b, "#SBATCH --job-name=%s\n", o->job_name);
    put(&b, "#SBATCH --nodes=%d\n", nodes);
    put(&b, "#SBATCH --ntasks-per-node=%d\n", per_node);
    put(&b, "#SBATCH --gpus-per-node=%d\n", per_node);
    put(&b, "#SBATCH --cpus-per-task=8\n");
    put(&b, "#SBATCH --exclusive\n");
    put(&b, "#SBATCH --time=%s\n", o->time_limit);
    put(&b, "#SBATCH --signal=USR1@300\n");
    put(&b, "#SBATCH --output=%%x-%%j.out\n");
    put(&b, "#\n# %s on %d x %s (%d nodes): dp %d, tp %d, pp %d, vp %d, cp %d, mbs %d, gbs %d, %s\n", m->name, gpus,
        hw->name, nodes, lo->dp, lo->tp, lo->pp, lo->vp, lo->cp, lo->mbs, lo->gbs, layout_opt_name(lo->opt));
    put(&b, "# Slurm sends USR1 300 s before the time limit: run writes a checkpoint to the\n"
            "# checkpoint directory and exits; submit the script again to resume from it.\n");
    if (gpus % per_node)
        put(&b, "# note: %d GPUs do not fill %d nodes of %d; the last node runs %d ranks\n", gpus, nodes, per_node,
            gpus % per_node);
    put(&b, "set -euo pipefail\n\n");
    put(&b, "export OMP_NUM_THREADS=${SLURM_CPUS_PER_TASK:-8}\n");
    /* paths are the user's: quoted, so spaces and shell characters stay data */
    put(&b, "mkdir -p ");
    put_quoted(&b, o->ckpt_dir);
    put(&b, "\nsrun --ntasks=%d --kill-on-bad-exit=1 ultraplan run ", gpus);
    put_quoted(&b, o->plan_path);
    put(&b, " --checkpoint-dir ");
    put_quoted(&b, o->ckpt_dir);
    put(&b, "\n");
    return finish(&b);
}
