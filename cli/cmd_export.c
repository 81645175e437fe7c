/* cmd_export.c — `ultraplan export plan.json --format megatron|slurm`. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "command.h"
#include "export.h"
#include "report.h"

enum { E_FORMAT = 1, E_JOB, E_TIME, E_CKPT };

static void help(FILE *f)
{
    fprintf(f, "usage: ultraplan export PLAN.json --format megatron|slurm [-o FILE]\n"
               "                        [--job-name NAME] [--time HH:MM:SS] [--checkpoint-dir DIR]\n\n"
               "  --format megatron     Megatron-LM arguments for the plan: parallel sizes, virtual and uneven\n"
               "                        stages, sequence parallel, distributed optimizer, recomputation, batch\n"
               "                        and model shape\n"
               "  --format slurm        an sbatch script for the plan's nodes that runs `ultraplan run PLAN.json`\n"
               "                        with srun (required: one of the two)\n"
               "  -o FILE               write to FILE (atomically; default: standard output)\n"
               "slurm only:\n"
               "  --job-name NAME       #SBATCH --job-name (default ultraplan)\n"
               "  --time HH:MM:SS       #SBATCH --time (default 48:00:00)\n"
               "  --checkpoint-dir DIR  the run's --checkpoint-dir (default checkpoints)\n\n"
               "example: ultraplan plan --gpus 512 --params 175B -o plan.json && ultraplan export plan.json --format megatron\n");
}

static int export_main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"help", no_argument, 0, 'h'},          {"format", required_argument, 0, E_FORMAT},
        {"output", required_argument, 0, 'o'},  {"job-name", required_argument, 0, E_JOB},
        {"time", required_argument, 0, E_TIME}, {"checkpoint-dir", required_argument, 0, E_CKPT},
        {0, 0, 0, 0},
    };
    ExportOpts eo;
    export_opts_default(&eo);
    const char *out_path = NULL, *fmt = NULL, *slurm_only = NULL;
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
        fprintf(stderr, "ultraplan export: --format: expected megatron or slurm, got \"%s\"\n", fmt ? fmt : "");
        return 2;
    }
    if (slurm_only && f != EXPORT_SLURM) {
        fprintf(stderr, "ultraplan export: %s is for --format slurm (the Megatron arguments have no job script)\n",
                slurm_only);
        return 2;
    }
    for (const char *p = eo.job_name; *p; p++)
        if (!(*p == '-' || *p == '_' || *p == '.' || (*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'z')
              || (*p >= 'A' && *p <= 'Z'))) {
            fprintf(stderr, "ultraplan export: --job-name: letters, digits, '-', '_' and '.' only, got \"%s\"\n",
                    eo.job_name);
            return 2;
        }
    for (const char *p = eo.time_limit; *p; p++)
        if (!((*p >= '0' && *p <= '9') || *p == ':' || *p == '-')) {
            fprintf(stderr, "ultraplan export: --time: expected a Slurm time such as 2-00:00:00, got \"%s\"\n",
                    eo.time_limit);
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
    char *text = f == EXPORT_MEGATRON ? export_megatron(&pf->model, &pf->layout)
                                      : export_slurm(&pf->model, &pf->hw, &pf->layout, &eo);
    free(pf);
    int rc = 0;
    if (!text) {
        fprintf(stderr, "ultraplan export: out of memory\n");
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

const Command cmd_export = {"export", "a plan as Megatron-LM arguments or a Slurm script", export_main};
