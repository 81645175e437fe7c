/* cmd_export.c — `ultraplan export plan.json --format FORMAT`: the plan as
 * Megatron-LM arguments, a torchtitan configuration, or a Slurm script
 * (ours or Megatron-LM's). A plan the format cannot express exactly is
 * refused with one line (planner/export.h); nothing is rounded. */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "command.h"
#include "export.h"
#include "presets.h"
#include "report.h"

enum { E_FORMAT = 1, E_JOB, E_TIME, E_CKPT, E_DATA, E_BACKEND, E_STEPS, E_EVERY, E_BIN };

static void help(FILE *f)
{
    fprintf(f, "usage: ultraplan export PLAN.json --format megatron|torchtitan|slurm|slurm-megatron [-o FILE]\n"
               "         [--data FILE] [--backend cpu|cuda] [--steps K] [--checkpoint-every K]\n"
               "         [--job-name NAME] [--time LIMIT] [--checkpoint-dir DIR] [--ultraplan PATH]\n\n"
               "  --format megatron       Megatron-LM pretrain_gpt.py arguments that are exactly the plan:\n"
               "                          parallel sizes, virtual and uneven stages, recomputation as Megatron\n"
               "                          counts it (per model chunk), distributed optimizer or Megatron-FSDP\n"
               "                          (ZeRO-2/3), overlap, precision and fp8 recipe, gradient reduction\n"
               "                          precision, attention backend, model shape and RoPE; a layout Megatron\n"
               "                          cannot express is refused (plan with --target megatron)\n"
               "  --format torchtitan     a torchtitan configuration (Python, Trainer.Config) for Llama 3 shapes\n"
               "  --format slurm          an sbatch script that runs `ultraplan run PLAN.json --data DATA`\n"
               "                          with srun and resumes when a committed checkpoint exists\n"
               "  --format slurm-megatron an sbatch script that runs Megatron-LM's pretrain_gpt.py with the\n"
               "                          exported arguments (--save/--load of one directory)\n"
               "  -o FILE                 write to FILE (atomically; default: standard output)\n"
               "slurm formats:\n"
               "  --job-name NAME         #SBATCH --job-name (default ultraplan)\n"
               "  --time LIMIT            #SBATCH --time: MM, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS\n"
               "                          (default 48:00:00)\n"
               "  --checkpoint-dir DIR    checkpoint directory (default checkpoints)\n"
               "  --steps K               slurm: run --steps; slurm-megatron: --train-iters (else $TRAIN_ITERS)\n"
               "  --checkpoint-every K    slurm: run --checkpoint-every; slurm-megatron: --save-interval\n"
               "slurm only:\n"
               "  --data FILE             the run's --data (required)\n"
               "  --backend cpu|cuda      the run's --backend (default cuda, cpu for a cpu-* profile)\n"
               "  --ultraplan PATH        the ultraplan binary the job runs (default: ultraplan on PATH)\n\n"
               "Nodes and tasks per node come from the profile's gpus_per_host (GB200 NVL72: 4), not its\n"
               "NVLink domain. Flags were checked against Megatron-LM d98e8a6 and torchtitan b5bcd76\n"
               "(docs/EXPORT.md).\n\n"
               "example: ultraplan plan --gpus 512 --params 175B -o plan.json && ultraplan export plan.json --format megatron\n");
}

static int count(const char *flag, const char *s, int *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (end == s || *end || errno || v < 1 || v > INT_MAX) {
        fprintf(stderr, "ultraplan export: %s: expected a whole number from 1, got \"%s\"\n", flag, s);
        return -1;
    }
    *out = (int)v;
    return 0;
}

/* A plan file keeps the model's shape; RoPE settings of a preset of that
 * name and shape come from the preset (plan files predating them). */
static void rope_from_preset(ModelSpec *m)
{
    ModelSpec p;
    char e[200];
    if (m->rope_theta > 0 || m->rope_scaling || presets_find(m->name, &p, e, sizeof e) != 0)
        return;
    if (p.L == m->L && p.h == m->h && p.a == m->a && p.f == m->f && p.vocab == m->vocab) {
        m->rope_theta = p.rope_theta;
        m->rope_scaling = p.rope_scaling;
    }
}

static int export_main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"help", no_argument, 0, 'h'},          {"format", required_argument, 0, E_FORMAT},
        {"output", required_argument, 0, 'o'},  {"job-name", required_argument, 0, E_JOB},
        {"time", required_argument, 0, E_TIME}, {"checkpoint-dir", required_argument, 0, E_CKPT},
        {"data", required_argument, 0, E_DATA}, {"backend", required_argument, 0, E_BACKEND},
        {"steps", required_argument, 0, E_STEPS}, {"checkpoint-every", required_argument, 0, E_EVERY},
        {"ultraplan", required_argument, 0, E_BIN},
        {0, 0, 0, 0},
    };
    ExportOpts eo;
    export_opts_default(&eo);
    const char *out_path = NULL, *fmt = NULL, *slurm_only = NULL, *ours_only = NULL;
    char err[512];
    int c;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "ho:", opts, NULL)) != -1) {
        switch (c) {
        case 'h': help(stdout); return 0;
        case 'o': out_path = optarg; break;
        case E_FORMAT: fmt = optarg; break;
        case E_JOB: eo.job_name = optarg; slurm_only = "--job-name"; break;
        case E_TIME: eo.time_limit = optarg; slurm_only = "--time"; break;
        case E_CKPT: eo.ckpt_dir = optarg; slurm_only = "--checkpoint-dir"; break;
        case E_STEPS: if (count("--steps", optarg, &eo.steps)) return 2; slurm_only = "--steps"; break;
        case E_EVERY:
            if (count("--checkpoint-every", optarg, &eo.ckpt_every))
                return 2;
            slurm_only = "--checkpoint-every";
            break;
        case E_DATA: eo.data = optarg; ours_only = "--data"; break;
        case E_BIN: eo.ultraplan = optarg; ours_only = "--ultraplan"; break;
        case E_BACKEND:
            if (strcmp(optarg, "cpu") && strcmp(optarg, "cuda")) {
                fprintf(stderr, "ultraplan export: --backend: expected cpu or cuda, got \"%s\"\n", optarg);
                return 2;
            }
            eo.backend = !strcmp(optarg, "cuda");
            ours_only = "--backend";
            break;
        default:
            command_bad_option("export", argv);
            return 2;
        }
    }
    if (optind != argc - 1) {
        fprintf(stderr, "ultraplan export: expected one plan file, got %d arguments (see --help)\n", argc - optind);
        return 2;
    }
    ExportFormat f;
    if (!fmt || export_parse_format(fmt, &f) != 0) {
        fprintf(stderr, "ultraplan export: --format: expected megatron, torchtitan, slurm or slurm-megatron, "
                        "got \"%s\"\n", fmt ? fmt : "");
        return 2;
    }
    int slurm = f == EXPORT_SLURM || f == EXPORT_SLURM_MEGATRON;
    if ((slurm_only && !slurm) || (ours_only && f != EXPORT_SLURM)) {
        fprintf(stderr, "ultraplan export: %s is for --format %s\n", ours_only && f != EXPORT_SLURM ? ours_only
                : slurm_only, ours_only && f != EXPORT_SLURM ? "slurm (our executor's run)" : "slurm or slurm-megatron");
        return 2;
    }
    if (f == EXPORT_SLURM && !eo.data) {
        fprintf(stderr, "ultraplan export: --format slurm needs --data FILE (the run's training data)\n");
        return 2;
    }
    if (slurm && (export_check_job_name(eo.job_name, err, sizeof err) || export_check_time(eo.time_limit, err,
                                                                                           sizeof err))) {
        fprintf(stderr, "ultraplan export: %s\n", err);
        return 2;
    }
    PlanFile *pf = malloc(sizeof *pf);
    if (!pf) {
        fprintf(stderr, "ultraplan export: out of memory\n");
        return 1;
    }
    eo.plan_path = argv[optind];
    if (planfile_read(argv[optind], pf, err, sizeof err) != 0) {
        fprintf(stderr, "ultraplan export: %s\n", err);
        free(pf);
        return 1;
    }
    rope_from_preset(&pf->model);
    char *text = NULL;
    switch (f) {
    case EXPORT_MEGATRON: text = export_megatron(&pf->model, &pf->hw, &pf->layout, err, sizeof err); break;
    case EXPORT_TORCHTITAN: text = export_torchtitan(&pf->model, &pf->hw, &pf->layout, err, sizeof err); break;
    case EXPORT_SLURM: text = export_slurm(&pf->model, &pf->hw, &pf->layout, &eo, err, sizeof err); break;
    default: text = export_slurm_megatron(&pf->model, &pf->hw, &pf->layout, &eo, err, sizeof err); break;
    }
    free(pf);
    int rc = 0;
    if (!text) {
        fprintf(stderr, "ultraplan export: %s: %s\n", argv[optind], err);
        return 1;
    }
    if (!out_path) {
        fputs(text, stdout);
    } else if (util_write_atomic(out_path, text, err, sizeof err) != 0) {
        fprintf(stderr, "ultraplan export: %s\n", err);
        rc = 1;
    }
    free(text);
    return rc;
}

const Command cmd_export = {"export", "a plan as Megatron-LM or torchtitan settings, or a Slurm script", export_main};
