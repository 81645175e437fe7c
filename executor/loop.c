/* loop.c — see loop.h. */
#include "loop.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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

double loop_rss_peak(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    if (!f)
        return 0;
    char line[256];
    double kb = 0;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "VmHWM: %lf kB", &kb) == 1)
            break;
    fclose(f);
    return kb * 1024.0;
}

typedef struct {
    const ExecBackend *b;
    const RunRequest *rq;
    void *s;
    RunInfo info;
    int rank, world;
    FILE *log;                   // rank 0: stdout
    RunWriter w;                 // rank 0 keeps run.json
    int saved;                   // step of the last checkpoint written or resumed from, -1 none
    int wrote_warning;           // a progress write failed (said once)
    double ckpt_limit;           // seconds the watchdog allows one checkpoint's I/O
} Loop;

/* Checkpoint I/O is not a lost rank: the watchdog gets its own limit for
 * it, from the checkpoint's size (every rank's weights and optimizer state)
 * at a conservative storage bandwidth, and never less than 3 x the
 * communication timeout. */
#define CKPT_ASSUMED_BW 50e6   // bytes/s over all ranks: a slow, shared parallel file system

static double ckpt_limit(const Loop *L)
{
    RunMem me;
    memset(&me, 0, sizeof me);
    L->b->memory(L->s, &me);
    double bytes = dist_world_sum(me.bytes[XM_WEIGHTS] + me.bytes[XM_OPTIM]);
    return 3 * L->rq->comm_timeout + bytes / CKPT_ASSUMED_BW;
}

/* Test hook (docs/reliability/FAULTS.md): ULTRAPLAN_FAULT_INJECT=slow_ckpt:SECONDS
 * makes rank 0 take SECONDS longer over every checkpoint write. */
static double inject_slow_ckpt(int rank)
{
    const char *s = getenv("ULTRAPLAN_FAULT_INJECT");
    double secs;
    int len = 0;
    if (rank == 0 && s && sscanf(s, "slow_ckpt:%lf%n", &secs, &len) == 1 && s[len] == 0 && secs > 0)
        return secs;
    return 0;
}

/* Every rank learns whether any failed; the lowest failing rank's message
 * lands in err on every rank (so rank 0 can print it and record it). */
static int any_failed(int bad, char *err, int errlen)
{
    if (!bad)
        err[0] = 0;
    return dist_world_agree(bad ? -1 : 0, err, errlen) != 0;
}

static void last_good(const Loop *L, char *buf, size_t n)
{
    if (!L->rq->ckpt_dir)
        snprintf(buf, n, "none (no --checkpoint-dir)");
    else if (L->saved < 0)
        snprintf(buf, n, "none written yet in %s", L->rq->ckpt_dir);
    else
        exec_ckpt_path(buf, n, L->rq->ckpt_dir, L->saved);
}

/* err extended by ". PREFIX: <where the last good checkpoint is>" */
static void add_last_good(const Loop *L, char *err, int errlen, const char *prefix)
{
    char where[600], first[400];
    last_good(L, where, sizeof where);
    snprintf(first, sizeof first, "%s", err);
    snprintf(err, errlen, "%.360s. %s: %.540s", first, prefix, where);
}

/* The step as run.json reports it: the phases of the busiest rank (most
 * forward + backward + recompute: a maximum per phase over ranks would add
 * one rank's compute to another's wait for it, and the phases would no
 * longer sum to the step), the slowest rank's step time. */
static void step_view(const Loop *L, const StepStats *st, double *t, double *step_s)
{
    double mine[PH_COUNT + 1], *all = malloc((size_t)L->world * (PH_COUNT + 1) * sizeof *all);
    if (!all) {
        fprintf(stderr, "ultraplan run: out of host memory\n");
        exit(1);
    }
    memcpy(mine, st->t, sizeof st->t);
    mine[PH_COUNT] = st->step_s;
    dist_world_allgather_doubles(mine, PH_COUNT + 1, all);
    int busiest = 0;
    double most = -1;
    *step_s = 0;
    for (int q = 0; q < L->world; q++) {
        const double *v = all + (size_t)q * (PH_COUNT + 1);
        double busy = v[PH_FWD] + v[PH_BWD] + v[PH_RECOMPUTE];
        if (busy > most)
            most = busy, busiest = q;
        if (v[PH_COUNT] > *step_s)
            *step_s = v[PH_COUNT];
    }
    memcpy(t, all + (size_t)busiest * (PH_COUNT + 1), PH_COUNT * sizeof *t);
    free(all);
}

/* Every rank's memory row on rank 0 (n rows into *rows, caller frees). */
enum { MEMV = 8 + XM_COUNT };
static RunMem *gather_memory(Loop *L)
{
    RunMem me;
    memset(&me, 0, sizeof me);
    me.device_peak = me.device_total = me.gpu_util_pct = -1;
    L->b->memory(L->s, &me);
    me.rank = L->rank;
    me.rss_peak = loop_rss_peak();
    double v[MEMV] = {me.rank, me.stage, me.tp_rank, me.dp_rank, me.rss_peak, me.device_peak, me.device_total,
                      me.gpu_util_pct};
    memcpy(v + 8, me.bytes, sizeof me.bytes);
    double *all = L->rank == 0 ? malloc((size_t)L->world * MEMV * sizeof *all) : NULL;
    RunMem *rows = L->rank == 0 ? calloc((size_t)L->world, sizeof *rows) : NULL;
    if (L->rank == 0 && (!all || !rows)) {
        fprintf(stderr, "ultraplan run: out of host memory\n");
        exit(1);
    }
    dist_world_gather_doubles(v, MEMV, all);
    for (int q = 0; rows && q < L->world; q++) {
        const double *a = all + (size_t)q * MEMV;
        RunMem *r = &rows[q];
        r->rank = (int)a[0], r->stage = (int)a[1], r->tp_rank = (int)a[2], r->dp_rank = (int)a[3];
        r->rss_peak = a[4], r->device_peak = a[5], r->device_total = a[6], r->gpu_util_pct = a[7];
        memcpy(r->bytes, a + 8, sizeof r->bytes);
    }
    free(all);
    return rows;
}

static void progress(const Loop *L, int step, const RunStep *rs, double elapsed, int done)
{
    double eta = done > 0 ? elapsed / done * (L->rq->steps - step) : 0;
    fprintf(L->log, "step %4d/%d | loss %.4f | %8.1f ms | %9.0f tok/s | MFU %5.1f%% | ETA %.1f s\n", step,
            L->rq->steps, rs->loss, 1e3 * rs->step_s, rs->tokens_per_s, 100 * rs->mfu, eta);
    fflush(L->log);
}

/* The final run.json on rank 0: status, error, memory rows, the backend's
 * extra object. 0 or 1 (the write failed, said on stderr). */
static int finish(Loop *L, const char *status, const char *error, RunMem *rows)
{
    if (L->rank != 0)
        return 0;
    if (L->b->extra && !error) {
        double med[PH_COUNT];
        runwriter_medians(&L->w, med);
        const char *name = NULL;
        cJSON *x = L->b->extra(L->s, L->rq->pf, med, L->log, &name);
        if (x)
            runwriter_extra(&L->w, name, x);
    }
    char err[1024];
    if (runwriter_write(&L->w, status, error, rows, rows ? L->world : 0, err, sizeof err) != 0) {
        fprintf(stderr, "ultraplan run: %s\n", err);
        return 1;
    }
    return 0;
}

/* The steps: 0 when it ran to the end or stopped on a signal (*status says
 * which), -1 on a failure with err (the same on every rank). */
static int steps(Loop *L, const char **status, char *err, int errlen)
{
    const RunRequest *rq = L->rq;
    double t0 = dist_now();
    int start = L->info.step;
    *status = "done";
    for (int step = L->info.step; step < rq->steps;) {
        StepStats st;
        int bad = L->b->step(L->s, &st, err, errlen) != 0;
        if (bad && L->info.checkpoints)   // the bad step is never checkpointed
            add_last_good(L, err, errlen, "Last good checkpoint");
        if (any_failed(bad, err, errlen))
            return -1;
        step++;
        dist_watchdog_floor(3 * st.step_s);
        RunStep rs = {.step = step, .loss = st.loss};
        step_view(L, &st, rs.t, &rs.step_s);
        rs.tokens_per_s = rs.step_s > 0 ? L->info.tokens_per_step / rs.step_s : 0;
        rs.mfu = L->info.peak > 0 ? rs.tokens_per_s * L->info.flops_per_token / (L->info.peak * L->world) : 0;
        if (L->rank == 0) {
            char werr[1024];
            if (runwriter_step(&L->w, &rs, werr, sizeof werr) != 0 && !L->wrote_warning) {
                fprintf(stderr, "ultraplan run: %s (run.json is retried at the end)\n", werr);
                L->wrote_warning = 1;
            }
            progress(L, step, &rs, dist_now() - t0, step - start);
        }
        int sig = dist_world_max(g_stop_signal), at_end = step == rq->steps;
        if (rq->ckpt_dir && L->info.checkpoints && ((rq->ckpt_every && step % rq->ckpt_every == 0) || at_end || sig)) {
            double c0 = dist_now(), slow = inject_slow_ckpt(L->rank);
            dist_watch_io(L->ckpt_limit);   // the save ends in a collective: every rank is inside
            if (slow > 0) {
                struct timespec ts = {(time_t)slow, (long)(1e9 * (slow - (double)(time_t)slow))};
                while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
                    ;
            }
            int bad = L->b->save(L->s, rq->ckpt_dir, err, errlen) != 0;
            dist_watch_io(0);
            if (bad) {
                add_last_good(L, err, errlen, "The previous checkpoint is still valid");
                return -1;
            }
            L->saved = step;
            dist_watchdog_floor(3 * (dist_now() - c0));
        }
        if (sig && !at_end) {
            char where[600];
            last_good(L, where, sizeof where);
            if (L->log) {
                fprintf(L->log, "ultraplan run: %s received: stopped after step %d; checkpoint: %s%s\n",
                        sig == SIGTERM ? "SIGTERM" : "SIGUSR1", step, where,
                        rq->ckpt_dir ? " (continue with --resume)" : "");
                fflush(L->log);
            }
            *status = "stopped";
            return 0;
        }
    }
    return 0;
}

/* A failure: printed on rank 0 (the lowest failing rank's message, which
 * every rank has), recorded in run.json. */
static int failed(Loop *L, const char *err)
{
    if (L->rank == 0) {
        fprintf(stderr, "ultraplan run: %s\n", err);
        finish(L, "failed", err, NULL);
    }
    return 1;
}

int loop_run(const ExecBackend *b, const RunRequest *rq, int rank, int world)
{
    Loop L = {.b = b, .rq = rq, .rank = rank, .world = world, .saved = -1};
    L.log = rank == 0 ? stdout : NULL;
    char err[1024] = "";
    catch_stop_signals();
    TrainOpts opt;
    exec_default_opts(&opt);
    if (rq->has_lr)
        opt.lr = rq->lr;
    if (rq->has_seed)
        opt.seed = rq->seed;
    double t0 = dist_now();
    int bad = b->init(&L.s, rq->pf, rq, &opt, L.log, &L.info, err, sizeof err) != 0;
    dist_watchdog_floor(3 * (dist_now() - t0));   // host-side weight init differs by stage
    if (any_failed(bad, err, sizeof err)) {
        if (rank == 0)
            fprintf(stderr, "ultraplan run: %s\n", err);
        b->free(L.s);
        return 1;
    }
    if (rq->ckpt_dir && L.info.checkpoints)
        L.ckpt_limit = ckpt_limit(&L);
    if (rq->resume) {
        dist_watch_io(L.ckpt_limit);   // reading it is checkpoint I/O too; the load ends in a collective
        bad = b->load(L.s, rq->ckpt_dir, &L.info.step, err, sizeof err) != 0;
        dist_watch_io(0);
        if (any_failed(bad, err, sizeof err)) {
            if (rank == 0)
                fprintf(stderr, "ultraplan run: %s\n", err);
            b->free(L.s);
            return 1;
        }
        if (L.info.step >= rq->steps) {   // every rank loaded the same step
            if (rank == 0)
                fprintf(stderr, "ultraplan run: resume: the checkpoint in %s is at step %d and --steps is %d: "
                        "nothing left to run (--steps is the total from step 0; raise it above %d)\n",
                        rq->ckpt_dir, L.info.step, rq->steps, L.info.step);
            b->free(L.s);
            return 1;
        }
        L.saved = L.info.step;
        if (L.log)
            fprintf(L.log, "resumed from %s at step %d\n", rq->ckpt_dir, L.info.step);
    }
    if (L.log)
        b->describe(L.s, L.log);
    if (rank == 0 &&
        runwriter_init(&L.w, rq->out, L.info.name, world, L.info.tokens_per_step, L.info.flops_per_token,
                       L.info.peak, rq->plan, plan_model_json(&rq->pf->model), plan_layout_json(&L.info.lo), err,
                       sizeof err) != 0) {
        fprintf(stderr, "ultraplan run: %s\n", err);
        exit(1);   // out of memory: the other ranks are ended by the watchdog or mpirun
    }
    const char *status = "done";
    int rc;
    if (steps(&L, &status, err, sizeof err) != 0) {
        rc = failed(&L, err);
    } else {
        RunMem *rows = gather_memory(&L);
        rc = finish(&L, status, NULL, rows);
        free(rows);
        rc = dist_world_max(rc);
    }
    if (rank == 0)
        runwriter_free(&L.w);
    b->free(L.s);
    return rc;
}
