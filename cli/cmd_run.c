/* cmd_run.c — `mpirun -np N ultraplan run plan.json`: parse the command
 * line and the plan, then hand over to the executor module
 * (libultraplan-exec.so, module.h), which starts MPI, trains on the CPU
 * backend (or, with --backend cuda, opens the CUDA module: one GPU per
 * rank), prints one progress line per step on rank 0 and writes run.json.
 * The binary itself links no MPI, BLAS or CUDA: `predict` and the other
 * planning commands never load them.
 *
 * Faults (docs/reliability/FAULTS.md) are the run loop's (executor/loop.h):
 * a lost or hung rank is caught by the communication watchdog; a NaN/Inf
 * loss stops the run without a checkpoint of the bad step; SIGTERM (and
 * SIGUSR1) make every rank stop after the same step, write a checkpoint and
 * exit 0.
 *
 * A --checkpoint-dir that already holds a committed checkpoint
 * (manifest.json) is refused before any training unless --resume continues
 * it or --overwrite-checkpoints says to replace it: a resubmitted job never
 * silently starts over and deletes the checkpoint. */
#include <errno.h>
#include <getopt.h>
#include <sys/stat.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "command.h"
#include "modload.h"
#include "module.h"
#include "report.h"

#if ULTRAPLAN_HAVE_NCCL
static const char *multi_gpu_note(void) { return "this one has"; }
#elif ULTRAPLAN_HAVE_CUDA
static const char *multi_gpu_note(void) { return "this one has not, so one GPU"; }
#else
static const char *multi_gpu_note(void) { return "this one has no CUDA backend"; }
#endif

/* This process's rank as the launcher tells it (MPI is not started here:
 * the module does that), so that only rank 0 prints a usage error. */
static int launcher_rank(void)
{
    static const char *vars[] = {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "SLURM_PROCID"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
        const char *v = getenv(vars[i]);
        if (v && *v)
            return atoi(v);
    }
    return 0;
}

static void help(FILE *f)
{
    fprintf(f, "usage: mpirun -np N ultraplan run plan.json --data FILE [--steps K] [-o run.json]\n"
               "       [--checkpoint-dir DIR [--checkpoint-every K]] [--resume] [--lr X] [--seed N]\n\n"
               "Trains the plan's model under its layout (fp32 on the CPU, MPI between ranks) and\n"
               "measures it. N must equal the plan's dp*tp*pp*cp. --data takes llm.c token shards\n"
               "(a glob of .bin files) or any other file as bytes (vocab 256).\n\n"
               "  --steps K             optimizer steps in all (default 20; with --resume, up to K)\n"
               "  --data FILE           token shards (glob) or a text file\n"
               "  --checkpoint-dir DIR  write a checkpoint there (every K steps and at the end)\n"
               "  --checkpoint-every K  steps between checkpoints (default: only at the end)\n"
               "  --resume              continue from the checkpoint in --checkpoint-dir\n"
               "  --overwrite-checkpoints  start afresh although --checkpoint-dir holds a committed\n"
               "                        checkpoint (it is replaced at the first save); without this\n"
               "                        or --resume such a directory is refused\n"
               "  --lr X                AdamW learning rate (default 1e-3)\n"
               "  --seed N              initialisation seed (default 1337)\n"
               "  --comm-timeout S      stop a rank whose communication makes no progress for S\n"
               "                        seconds, or 3x the slowest step so far if longer (a lost\n"
               "                        or hung rank; default 20, 0 = never)\n"
               "  -o FILE               write run.json (ultraplan.run/1)\n"
               "  --backend cpu|cuda    cpu (default): fp32 under mpirun; cuda: bf16 (a plan with precision\n"
               "                        fp8 with --fp8-recipe tensorwise: the layers' GEMMs in fp8 scaled by each\n"
               "                        tensor's current amax, docs/gpu/FP8.md), one GPU per rank\n"
               "                        (mpirun -np dp*tp*pp*cp, NCCL between them when the build has\n"
               "                        it: %s),\n"
               "                        every dense MHA/GQA layout the CPU backend runs (tp with or\n"
               "                        without SP, pp, vp, cp, ZeRO 0-3), MoE at tp = cp = etp = 1\n"
               "                        without ZeRO-2/3, no MLA or MTP (plan --target ultraplan-cuda\n"
               "                        offers only these); checkpoints, --resume and\n"
               "                        SIGTERM/SIGUSR1 as on the CPU, in the same files\n"
               "  --proxy-stage S       (cuda) run on one GPU the per-rank work of pipeline stage S of a\n"
               "                        large plan (its layers, tp-sharded) and compare the time per\n"
               "                        micro-batch with the prediction less communication; no --data\n\n"
               "A plan with cuda_graph_impl other than none (plan --cuda-graph-impl): neither backend\n"
               "captures CUDA graphs, so the CUDA backend refuses it (its kernels launched one by one\n"
               "would not time the plan that was predicted; plan again with --cuda-graph-impl none).\n"
               "The CPU backend runs it: graphs change launch timing only, not the math it checks.\n"
               "Likewise an MoE plan with ep > 1 priced with --moe-token-dispatcher-type allgather|flex\n"
               "or --overlap-moe-expert-parallel-comm: the CUDA layer dispatches with NCCL all-to-all,\n"
               "one micro-batch at a time; the CPU backend runs it.\n",
            multi_gpu_note());
}

/* A whole number from min to INT_MAX, all of s: 0, else -1 (no silent wrap). */
static int whole(const char *s, int min, int *out)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (end == s || *end || errno == ERANGE || v < min || v > INT_MAX)
        return -1;
    *out = (int)v;
    return 0;
}

/* What the value of option c must be, for its error. */
static const char *run_expect(int c)
{
    switch (c) {
    case 's': return "expected a whole number of steps from 1 to 2147483647";
    case 'e': return "expected a whole number of steps from 1 to 2147483647";
    case 'l': return "expected a learning rate > 0";
    case 'S': return "expected a whole number";
    case 'b': return "expected cpu or cuda";
    case 'p': return "expected a stage number from 0";
    case 'T': return "expected seconds >= 0 (0 = never)";
    default: return "bad value";
    }
}

/* 0 ok, 1 help shown, 2 usage error (message printed on rank 0). */
static int overwrite;   // --overwrite-checkpoints

static int parse(int argc, char **argv, RunRequest *a, int rank)
{
    static const struct option opts[] = {
        {"help", no_argument, 0, 'h'}, {"steps", required_argument, 0, 's'},
        {"data", required_argument, 0, 'd'}, {"checkpoint-dir", required_argument, 0, 'c'},
        {"checkpoint-every", required_argument, 0, 'e'}, {"resume", no_argument, 0, 'r'},
        {"lr", required_argument, 0, 'l'}, {"seed", required_argument, 0, 'S'},
        {"output", required_argument, 0, 'o'}, {"comm-timeout", required_argument, 0, 'T'},
        {"backend", required_argument, 0, 'b'}, {"proxy-stage", required_argument, 0, 'p'},
        {"overwrite-checkpoints", no_argument, 0, 'W'},
        {0, 0, 0, 0}};
    memset(a, 0, sizeof *a);
    overwrite = 0;
    a->steps = 20;
    a->comm_timeout = 20;
    a->proxy_stage = -1;
    optind = 1;
    opterr = 0;
    int c, li;
    char *end;
    while ((li = -1, c = getopt_long(argc, argv, "ho:", opts, &li)) != -1) {
        switch (c) {
        case 'h': if (rank == 0) help(stdout); return 1;
        case 's': if (whole(optarg, 1, &a->steps)) goto bad; break;
        case 'd': a->data = optarg; break;
        case 'c': a->ckpt_dir = optarg; break;
        case 'e': if (whole(optarg, 1, &a->ckpt_every)) goto bad; break;
        case 'r': a->resume = 1; break;
        case 'W': overwrite = 1; break;
        case 'l': a->lr = strtof(optarg, &end); a->has_lr = 1; if (*end || !(a->lr > 0)) goto bad; break;
        case 'S': a->seed = strtoull(optarg, &end, 10); a->has_seed = 1; if (*end) goto bad; break;
        case 'o': a->out = optarg; break;
        case 'b':
            if (strcmp(optarg, "cpu") && strcmp(optarg, "cuda")) goto bad;
            a->cuda = !strcmp(optarg, "cuda");
            break;
        case 'p': if (whole(optarg, 0, &a->proxy_stage)) goto bad; break;
        case 'T': a->comm_timeout = strtod(optarg, &end); if (*end || !(a->comm_timeout >= 0)) goto bad; break;
        default:
            if (rank == 0)
                fprintf(stderr, "ultraplan run: option %s: unknown or missing its value (see --help)\n",
                        argv[optind - 1]);
            return 2;
        }
    }
    if (optind != argc - 1) {
        if (rank == 0)
            fprintf(stderr, "ultraplan run: give exactly one plan file (see --help)\n");
        return 2;
    }
    a->plan = argv[optind];
    if (a->proxy_stage >= 0 && !a->cuda) {
        if (rank == 0)
            fprintf(stderr, "ultraplan run: --proxy-stage runs on one GPU: add --backend cuda\n");
        return 2;
    }
    if (!a->data && a->proxy_stage < 0) {
        if (rank == 0)
            fprintf(stderr, "ultraplan run: no training data: give --data FILE (llm.c .bin shards or any text file)\n");
        return 2;
    }
    if (a->ckpt_every && !a->ckpt_dir) {
        if (rank == 0)
            fprintf(stderr, "ultraplan run: --checkpoint-every needs --checkpoint-dir DIR (where to write them)\n");
        return 2;
    }
    if (a->resume && overwrite) {
        if (rank == 0)
            fprintf(stderr, "ultraplan run: --resume continues the checkpoint, --overwrite-checkpoints replaces it: "
                            "give one\n");
        return 2;
    }
    if (overwrite && !a->ckpt_dir) {
        if (rank == 0)
            fprintf(stderr, "ultraplan run: --overwrite-checkpoints needs --checkpoint-dir DIR\n");
        return 2;
    }
    if (a->ckpt_dir && !a->resume && !overwrite) {
        char path[4200];
        struct stat st;
        snprintf(path, sizeof path, "%s/manifest.json", a->ckpt_dir);
        if (stat(path, &st) == 0) {
            if (rank == 0)
                fprintf(stderr, "ultraplan run: %s holds a committed checkpoint (manifest.json): give --resume to "
                                "continue it or --overwrite-checkpoints to replace it\n", a->ckpt_dir);
            return 2;
        }
    }
    if (a->resume && !a->ckpt_dir) {
        if (rank == 0)
            fprintf(stderr, "ultraplan run: --resume needs --checkpoint-dir DIR\n");
        return 2;
    }
    return 0;
bad:
    /* name the flag, not its value (argv[optind - 1] is the value after "--steps 0") */
    if (rank == 0) {
        if (li >= 0)
            fprintf(stderr, "ultraplan run: --%s: %s, got \"%s\"\n", opts[li].name, run_expect(c), optarg);
        else
            fprintf(stderr, "ultraplan run: -%c: %s, got \"%s\"\n", c, run_expect(c), optarg);
    }
    return 2;
}

static int run_main(int argc, char **argv)
{
    int rank = launcher_rank();
    RunRequest a;
    int prc = parse(argc, argv, &a, rank);
    if (prc)
        return prc == 1 ? 0 : 2;
    char err[1024] = "";
    PlanFile *pf = malloc(sizeof *pf);
    const char *what = "";
    int bad = !pf || planfile_read(a.plan, pf, err, sizeof err) != 0;
    if (!bad && a.cuda && pf->layout.cuda_graph != CG_NONE) {   /* the plan it predicts is the plan that runs */
        snprintf(err, sizeof err,
                 "%s: layout.cuda_graph_impl is \"%s\", and the CUDA backend captures no CUDA graphs: its "
                 "kernel launches would not be the predicted plan's; plan it again with --cuda-graph-impl none",
                 a.plan, layout_cuda_graph_name(pf->layout.cuda_graph));
        bad = 1;
    }
    if (!bad && a.out && util_check_writable(a.out, err, sizeof err) != 0) {   /* before the training */
        bad = 1;
        what = "-o: ";
    }
    if (bad) {
        if (rank == 0)
            fprintf(stderr, "ultraplan run: %s%s\n", what, pf ? err : "out of memory");
        free(pf);
        return 1;
    }
    if (a.cuda && !ULTRAPLAN_HAVE_CUDA) {
        if (rank == 0)
            fprintf(stderr, "ultraplan run: this build has no CUDA backend (nvcc was not found at configure time)\n");
        free(pf);
        return 1;
    }
    a.pf = pf;
    const UpExecModule *m = modload_exec(err, sizeof err);
    if (!m && rank == 0)
        fprintf(stderr, "ultraplan run: %s\n", err);
    int rc = m ? m->run(&a) : 1;
    free(pf);
    return rc;
}

const Command cmd_run = {"run", "execute a plan under mpirun (CPU or CUDA backend) and measure it", run_main};
