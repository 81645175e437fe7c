/* cmd_run.c — `mpirun -np N ultraplan run plan.json`: execute a plan on the
 * CPU backend (or, with --backend cuda, one GPU per rank), print one
 * progress line per step on rank 0, write run.json.
 *
 * Faults (docs/reliability/FAULTS.md): a lost or hung rank is caught by the
 * communication watchdog (dist.h); a NaN/Inf loss stops the run without a
 * checkpoint of the bad step; SIGTERM (and SIGUSR1) make every rank stop
 * after the same step, write a checkpoint and exit 0. The CUDA backend's
 * loop (curun.c) does the same with the signal flag of this file. */
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "command.h"
#include "exec.h"
#include "report.h"
#include "runlog.h"
#if ULTRAPLAN_HAVE_CUDA
#include "curun.h"
#endif

#if ULTRAPLAN_HAVE_CUDA
static const char *multi_gpu_note(void) { return curun_multi_gpu() ? "this one has" : "this one has not, so one GPU"; }
#else
static const char *multi_gpu_note(void) { return "this one has no CUDA backend"; }
#endif

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
               "  --lr X                AdamW learning rate (default 1e-3)\n"
               "  --seed N              initialisation seed (default 1337)\n"
               "  --comm-timeout S      stop a rank whose communication makes no progress for S\n"
               "                        seconds, or 3x the slowest step so far if longer (a lost\n"
               "                        or hung rank; default 20, 0 = never)\n"
               "  -o FILE               write run.json (ultraplan.run/1)\n"
               "  --backend cpu|cuda    cpu (default): fp32 under mpirun; cuda: bf16, one GPU per rank\n"
               "                        (mpirun -np dp*tp*pp, NCCL between them when the build has it:\n"
               "                        %s), cp 1, tp with or without sequence parallel,\n"
               "                        ZeRO 0 or 1; checkpoints, --resume and SIGTERM/SIGUSR1 as on\n"
               "                        the CPU, in the same files\n"
               "  --proxy-stage S       (cuda) run on one GPU the per-rank work of pipeline stage S of a\n"
               "                        large plan (its layers, tp-sharded) and compare the time per\n"
               "                        micro-batch with the prediction less communication; no --data\n",
            multi_gpu_note());
}

typedef struct {
    const char *plan, *data, *ckpt_dir, *out;
    int steps, ckpt_every, resume;
    int cuda;                  // --backend cuda
    int proxy_stage;           // --proxy-stage S, -1 none
    double comm_timeout;       // seconds, 0 = no watchdog
    TrainOpts opt;
} RunArgs;

/* 0 ok, 1 help shown, 2 usage error (message printed on rank 0). */
static int parse(int argc, char **argv, RunArgs *a, int rank)
{
    static const struct option opts[] = {
        {"help", no_argument, 0, 'h'}, {"steps", required_argument, 0, 's'},
        {"data", required_argument, 0, 'd'}, {"checkpoint-dir", required_argument, 0, 'c'},
        {"checkpoint-every", required_argument, 0, 'e'}, {"resume", no_argument, 0, 'r'},
        {"lr", required_argument, 0, 'l'}, {"seed", required_argument, 0, 'S'},
        {"output", required_argument, 0, 'o'}, {"comm-timeout", required_argument, 0, 'T'},
        {"backend", required_argument, 0, 'b'}, {"proxy-stage", required_argument, 0, 'p'},
        {0, 0, 0, 0}};
    memset(a, 0, sizeof *a);
    a->steps = 20;
    a->comm_timeout = 20;
    a->proxy_stage = -1;
    exec_default_opts(&a->opt);
    optind = 1;
    opterr = 0;
    int c;
    char *end;
    while ((c = getopt_long(argc, argv, "ho:", opts, NULL)) != -1) {
        switch (c) {
        case 'h': if (rank == 0) help(stdout); return 1;
        case 's': a->steps = (int)strtol(optarg, &end, 10); if (*end || a->steps < 1) goto bad; break;
        case 'd': a->data = optarg; break;
        case 'c': a->ckpt_dir = optarg; break;
        case 'e': a->ckpt_every = (int)strtol(optarg, &end, 10); if (*end || a->ckpt_every < 1) goto bad; break;
        case 'r': a->resume = 1; break;
        case 'l': a->opt.lr = strtof(optarg, &end); if (*end || !(a->opt.lr > 0)) goto bad; break;
        case 'S': a->opt.seed = strtoull(optarg, &end, 10); if (*end) goto bad; break;
        case 'o': a->out = optarg; break;
        case 'b':
            if (strcmp(optarg, "cpu") && strcmp(optarg, "cuda")) goto bad;
            a->cuda = !strcmp(optarg, "cuda");
            break;
        case 'p': a->proxy_stage = (int)strtol(optarg, &end, 10); if (*end || a->proxy_stage < 0) goto bad; break;
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
    if (a->resume && !a->ckpt_dir) {
        if (rank == 0)
            fprintf(stderr, "ultraplan run: --resume needs --checkpoint-dir DIR\n");
        return 2;
    }
    return 0;
bad:
    if (rank == 0)
        fprintf(stderr, "ultraplan run: option %s: bad value \"%s\"\n", argv[optind - 1], optarg);
    return 2;
}

/* Set by SIGTERM (Slurm's warning before the time limit) or SIGUSR1 (what
 * mpirun forwards, and sbatch --signal=B:USR1@T sends); the step loop reads it. */
static volatile sig_atomic_t g_stop_signal;

static void on_stop_signal(int sig) { g_stop_signal = sig; }

static void catch_stop_signals(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGUSR1, &sa, NULL);
}

/* The signal any rank received, agreed by all so that every rank stops after the same step. */
static int stop_requested(void)
{
    return dist_world_max(g_stop_signal);
}

#if ULTRAPLAN_HAVE_CUDA
/* --backend cuda: one GPU per rank (executor/cuda/); 0 or 1 on every rank. */
static int run_cuda(const RunArgs *a, const PlanFile *pf, int rank, int world)
{
    char err[1024];
    if (world != 1 && !curun_multi_gpu()) {
        if (rank == 0)
            fprintf(stderr, "ultraplan run: the CUDA backend of this build runs one GPU (no NCCL at configure time): "
                            "start it without mpirun, or rebuild with NCCL\n");
        return 1;
    }
    if (a->proxy_stage >= 0 && a->ckpt_dir) {
        if (rank == 0)
            fprintf(stderr, "ultraplan run: --proxy-stage trains nothing to checkpoint: drop --checkpoint-dir/--resume\n");
        return 1;
    }
    if (a->proxy_stage >= 0 && world != 1) {
        if (rank == 0)
            fprintf(stderr, "ultraplan run: --proxy-stage runs one process on one GPU: start it without mpirun\n");
        return 1;
    }
    CuRunOpts o = {a->data, a->steps, a->proxy_stage, a->opt, rank == 0 ? stdout : NULL,
                   a->ckpt_dir, a->ckpt_every, a->resume, stop_requested};
    cJSON *doc = curun(&pf->model, &pf->hw, &pf->layout, &o, err, sizeof err);
    if (!doc) {   // the lowest failing rank says why
        int first = world > 1 ? dist_world_min(err[0] ? rank : 1 << 30) : rank;
        if (err[0] && rank == first)
            fprintf(stderr, "ultraplan run: %s\n", err);
        return 1;
    }
    cJSON_AddStringToObject(doc, "plan", a->plan);
    cJSON_AddItemToObject(doc, "model", plan_model_json(&pf->model));
    cJSON_AddItemToObject(doc, "layout", plan_layout_json(&pf->layout));
    int rc = 0;
    if (a->out && rank == 0) {
        char *text = cJSON_Print(doc);
        if (!text || util_write_atomic(a->out, text, err, sizeof err) != 0) {
            fprintf(stderr, "ultraplan run: %s\n", text ? err : "out of memory");
            rc = 1;
        }
        free(text);
    }
    cJSON_Delete(doc);
    return world > 1 ? dist_world_max(rc) : rc;
}
#else
static int run_cuda(const RunArgs *a, const PlanFile *pf, int rank, int world)
{
    (void)a, (void)pf, (void)rank, (void)world;
    fprintf(stderr, "ultraplan run: this build has no CUDA backend (nvcc was not found at configure time)\n");
    return 1;
}
#endif

/* Every rank learns whether any failed; the lowest failing rank prints. */
static int report_failure(int failed, const char *msg, int rank)
{
    int first = failed ? rank : 1 << 30;
    first = dist_world_min(first);
    if (first == (1 << 30))
        return 0;
    if (rank == first)
        fprintf(stderr, "ultraplan run: %s\n", msg);
    return 1;
}

static void progress(const Exec *e, int total, const StepStats *st, double tok_s, double mfu, double elapsed,
                     int done)
{
    double eta = done > 0 ? elapsed / done * (total - e->step) : 0;
    printf("step %4d/%d | loss %.4f | %8.1f ms | %9.0f tok/s | MFU %5.1f%% | ETA %.1f s\n", e->step, total,
           st->loss, 1e3 * st->step_s, tok_s, 100 * mfu, eta);
    fflush(stdout);
}

static void last_good(char *buf, size_t n, const RunArgs *a, int step)
{
    if (!a->ckpt_dir)
        snprintf(buf, n, "none (no --checkpoint-dir)");
    else if (step < 0)
        snprintf(buf, n, "none written yet in %s", a->ckpt_dir);
    else
        exec_ckpt_path(buf, n, a->ckpt_dir, step);
}

/* The step loop: 0 when it ran to the end or stopped on a signal with its
 * checkpoint written, 1 on a failure (reported on one rank). */
static int train(Exec *e, const RunArgs *a, RunLog *log, int rank)
{
    char err[1024], where[1100], msg[2200];
    double t0 = dist_now();
    int start = e->step, saved = a->resume ? e->step : -1;
    while (e->step < a->steps) {
        StepStats st;
        int bad = exec_step(e, &st, err, sizeof err) != 0;
        if (bad) {   // the bad step is never checkpointed
            last_good(where, sizeof where, a, saved);
            snprintf(msg, sizeof msg, "%s. Last good checkpoint: %s", err, where);
        }
        if (report_failure(bad, msg, rank))
            return 1;
        dist_watchdog_floor(3 * st.step_s);
        double tok_s, mfu;
        runlog_step(log, e, &st, &tok_s, &mfu);
        if (rank == 0)
            progress(e, a->steps, &st, tok_s, mfu, dist_now() - t0, e->step - start);
        int sig = stop_requested(), at_end = e->step == a->steps;
        if (a->ckpt_dir && ((a->ckpt_every && e->step % a->ckpt_every == 0) || at_end || sig)) {
            double c0 = dist_now();
            if (exec_save(e, a->ckpt_dir, err, sizeof err) != 0) {
                last_good(where, sizeof where, a, saved);
                if (rank == 0)
                    fprintf(stderr, "ultraplan run: %s. The previous checkpoint is still valid: %s\n", err, where);
                return 1;
            }
            saved = e->step;
            dist_watchdog_floor(3 * (dist_now() - c0));
        }
        if (sig && !at_end) {
            last_good(where, sizeof where, a, saved);
            if (rank == 0)
                printf("ultraplan run: %s received: stopped after step %d; checkpoint: %s%s\n",
                       sig == SIGTERM ? "SIGTERM" : "SIGUSR1", e->step, where,
                       a->ckpt_dir ? " (continue with --resume)" : "");
            fflush(stdout);
            return 0;
        }
    }
    return 0;
}

static int run_main(int argc, char **argv)
{
    int rank = 0, world = 1, rc = 1;
    dist_world_init(&rank, &world);
    RunArgs a;
    int prc = parse(argc, argv, &a, rank);
    if (prc) {
        dist_world_finalize();
        return prc == 1 ? 0 : 2;
    }
    catch_stop_signals();
    dist_watchdog_start(a.comm_timeout);
    char err[1024] = "";
    PlanFile pf;
    if (report_failure(planfile_read(a.plan, &pf, err, sizeof err) != 0, err, rank))
        goto done;
    if (a.cuda) {
        rc = run_cuda(&a, &pf, rank, world);
        goto done;
    }
    if (rank == 0 && pf.layout.prec != PREC_FP32)
        printf("note: the CPU executor computes in fp32; the plan is for %s, so its memory figures differ\n",
               hw_precision_name(pf.layout.prec));
    Exec e;
    int bad = exec_init(&e, &pf.model, &pf.layout, &a.opt, a.data, err, sizeof err) != 0;
    if (report_failure(bad, err, rank)) {
        exec_free(&e);
        goto done;
    }
    if (a.resume) {
        if (exec_load(&e, a.ckpt_dir, err, sizeof err) != 0) {
            if (rank == 0)
                fprintf(stderr, "ultraplan run: %s\n", err);
            exec_free(&e);
            goto done;
        }
        if (rank == 0)
            printf("resumed from %s at step %d\n", a.ckpt_dir, e.step);
    }
    if (rank == 0)
        printf("run: %s on %d ranks (dp %d tp %d pp %d vp %d%s%s), %d micro-batches of %d x %d tokens\n",
               pf.model.name, e.d.world, e.lo.dp, e.lo.tp, e.lo.pp, e.lo.vp, e.lo.sp ? " sp" : "",
               e.lo.opt != OPT_ZERO0 ? " zero1" : "", e.nmb, e.B, e.T);
    RunLog log;
    runlog_init(&log, train_model_flops_per_token(&pf.model, &e.lo), pf.hw.peak[PREC_FP32]);
    int ok = train(&e, &a, &log, rank) == 0;
    cJSON *doc = runlog_finish(&log, &e);
    if (doc && ok) {
        cJSON_AddStringToObject(doc, "plan", a.plan);
        cJSON_AddItemToObject(doc, "model", plan_model_json(&pf.model));
        cJSON_AddItemToObject(doc, "layout", plan_layout_json(&e.lo));
        if (a.out) {
            char *text = cJSON_Print(doc);
            if (!text || util_write_atomic(a.out, text, err, sizeof err) != 0) {
                fprintf(stderr, "ultraplan run: %s\n", text ? err : "out of memory");
                ok = 0;
            }
            free(text);
        }
    }
    cJSON_Delete(doc);
    dist_watchdog_stop();
    exec_free(&e);
    rc = ok ? 0 : 1;
done:
    dist_watchdog_stop();
    dist_world_finalize();
    return rc;
}

const Command cmd_run = {"run", "execute a plan under mpirun (CPU or CUDA backend) and measure it", run_main};
