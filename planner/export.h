/* export.h — a plan as Megatron-LM command-line arguments or as a Slurm
 * batch script that runs it. Text only: the caller prints or writes it.
 *
 * Megatron can run what the planner produces: uneven first and last stages
 * (--decoder-first/last-pipeline-num-layers), interleaving, and block
 * recomputation of the first N layers of each stage. It cannot give stages
 * different N; the export then uses the largest and says so in a comment.
 */
#ifndef ULTRAPLAN_PLANNER_EXPORT_H
#define ULTRAPLAN_PLANNER_EXPORT_H

#include "cost.h"

typedef enum { EXPORT_MEGATRON, EXPORT_SLURM, EXPORT_FORMAT_COUNT } ExportFormat;

typedef struct {
    const char *plan_path;      // the plan file the Slurm script runs (default "plan.json")
    const char *job_name;       // sbatch --job-name (default "ultraplan")
    const char *time_limit;     // sbatch --time (default "48:00:00")
    const char *ckpt_dir;       // checkpoint directory for run (default "checkpoints")
} ExportOpts;

void export_opts_default(ExportOpts *o);
int export_parse_format(const char *s, ExportFormat *out);

/* malloc'd text (caller frees), NULL on out of memory. */
char *export_megatron(const ModelSpec *m, const Layout *lo);
char *export_slurm(const ModelSpec *m, const HwProfile *hw, const Layout *lo, const ExportOpts *o);

#endif
