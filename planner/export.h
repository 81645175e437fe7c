/* export.h — a plan as the arguments of the framework that runs it, or as a
 * Slurm batch script that runs it. Text only: the caller prints or writes it.
 *
 * Every export is exactly the plan or nothing: a layout the framework cannot
 * express is refused with one line naming what does not fit (plan with
 * --target megatron to get layouts that export), never rounded to something
 * else. What each format writes and the framework versions its flags were
 * checked against: docs/EXPORT.md.
 *
 * Megatron-LM (checked against NVIDIA/Megatron-LM d98e8a6, 2026-08-22,
 * megatron/training/arguments.py and the TransformerConfig /
 * ModelParallelConfig / training config dataclasses it builds flags from):
 *   - recomputation as Megatron applies it: --recompute-num-layers N under
 *     --recompute-method block counts per model chunk on every stage
 *     (megatron/core/recompute.py: the first N layers of each TransformerBlock),
 *     so stage s recomputes vp·min(N, its chunk's layers); full recomputation
 *     of every layer is uniform/1; selective only for every layer; never mixed
 *   - uneven stages only as --decoder-first/last-pipeline-num-layers with the
 *     middle stages equal; virtual stages as --num-virtual-stages-per-pipeline-rank
 *   - ZeRO-1 / dist-opt: --use-distributed-optimizer; ZeRO-2 / ZeRO-3:
 *     Megatron-FSDP (--use-megatron-fsdp --data-parallel-sharding-strategy
 *     optim_grads / optim_grads_params --ckpt-format fsdp_dtensor)
 * export_parse_megatron reads that text back (the test's round trip).
 *
 * torchtitan (checked against pytorch/torchtitan b5bcd76, 2026-08-21): its
 * configuration is a Python function returning a Trainer.Config (TOML job
 * files and new CLI flags are gone), so the export is such a module deriving
 * from the Llama 3 registry entry of the same shape.
 */
#ifndef ULTRAPLAN_PLANNER_EXPORT_H
#define ULTRAPLAN_PLANNER_EXPORT_H

#include "cost.h"

typedef enum {
    EXPORT_MEGATRON,        // Megatron-LM pretrain_gpt.py arguments
    EXPORT_SLURM,           // sbatch script running `ultraplan run` (our executor)
    EXPORT_SLURM_MEGATRON,  // sbatch script running Megatron-LM's pretrain_gpt.py
    EXPORT_TORCHTITAN,      // a torchtitan configuration module (Python)
    EXPORT_FORMAT_COUNT
} ExportFormat;

typedef struct {
    const char *plan_path;      // the plan file the Slurm script runs (default "plan.json")
    const char *job_name;       // sbatch --job-name (default "ultraplan")
    const char *time_limit;     // sbatch --time (default "48:00:00")
    const char *ckpt_dir;       // checkpoint directory (default "checkpoints")
    const char *data;           // slurm: run --data (required there); NULL none
    int backend;                // slurm: -1 = by the profile (cuda unless a "cpu-*" profile), 0 cpu, 1 cuda
    int steps;                  // slurm: run --steps (0 = run's default); slurm-megatron: --train-iters (0 = $TRAIN_ITERS)
    int ckpt_every;             // slurm: --checkpoint-every; slurm-megatron: --save-interval (0 = 1000)
    const char *ultraplan;      // slurm: the ultraplan binary (default "ultraplan", found on PATH)
} ExportOpts;

void export_opts_default(ExportOpts *o);
int export_parse_format(const char *s, ExportFormat *out);
const char *export_format_name(ExportFormat f);

/* Slurm's --time forms: MM, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS
 * (and "UNLIMITED"); 0, or -1 with err naming --time. */
int export_check_time(const char *s, char *err, int errlen);
/* sbatch --job-name: 1..128 of letters, digits, '-', '_', '.'; 0 or -1. */
int export_check_job_name(const char *s, char *err, int errlen);

/* malloc'd text (caller frees); NULL with err filled when the layout cannot
 * be expressed in that format, or on out of memory. */
char *export_megatron(const ModelSpec *m, const HwProfile *hw, const Layout *lo, char *err, int errlen);
/* 0 when torchtitan runs lo as export_torchtitan writes it (the layouts
 * --target torchtitan searches); else -1 and why in err, "torchtitan: ...":
 * not a Llama 3 flavor's shape (or MoE, MLA, MTP), recomputation not one
 * kind on every layer or none (selective only as torchtitan's per-op
 * policy), uneven stages, optimizer-only sharding, ZeRO-0 with cp > 1, a CP
 * exchange other than PyTorch's all-gather, fp16, fp8 parameters, Megatron's
 * precision-aware optimizer, gradients reduced below fp32, no flash
 * attention, async TP without torch.compile, an fp8 recipe other than MXFP8. */
int export_torchtitan_refuse(const ModelSpec *m, const Layout *lo, char *err, int errlen);

/* The part of export_torchtitan_refuse no layout can change: MoE, MLA or
 * MTP, or not a Llama 3 flavor's shape. 0 ok, else -1 and why in err. */
int export_torchtitan_model_refuse(const ModelSpec *m, char *err, int errlen);

/* 0 when lo's target runs it: ultraplan's executors as executor/refuse.h
 * refuse_target says, torchtitan as export_torchtitan_refuse says
 * (TARGET_MEGATRON: always 0 here; its form is layout_megatron_check).
 * Else -1 and why in err. The planner and `predict` ask this one. */
int export_target_refuse(const ModelSpec *m, const Layout *lo, Target t, char *err, int errlen);
char *export_torchtitan(const ModelSpec *m, const HwProfile *hw, const Layout *lo, char *err, int errlen);
char *export_slurm(const ModelSpec *m, const HwProfile *hw, const Layout *lo, const ExportOpts *o, char *err,
                   int errlen);
char *export_slurm_megatron(const ModelSpec *m, const HwProfile *hw, const Layout *lo, const ExportOpts *o,
                            char *err, int errlen);

/* Read Megatron arguments (export_megatron's text: '#' comments, one flag
 * per line, continuation backslashes; or any whitespace-separated argument
 * list) back into a model and a layout, as Megatron would build them on
 * `gpus` ranks (data-parallel size = gpus / (tp·pp·cp)). The vocabulary is
 * not an argument (the tokenizer's): --vocab-size, else the export's
 * "vocabulary N" comment. Fields Megatron has no flag for keep their
 * defaults (FLOP convention). The layout is checked (layout_check against
 * hw). 0, or -1 with err naming the flag. */
int export_parse_megatron(const char *text, int gpus, const HwProfile *hw, ModelSpec *m, Layout *lo, char *err,
                          int errlen);

#endif
