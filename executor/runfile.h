/* runfile.h — run.json (ultraplan.run/1): its one writer and its one reader.
 *
 * The writer (RunWriter) is what the run loop (loop.h) keeps on rank 0: per
 * step the loss, wall time, tokens/s, MFU and the seconds of each phase; it
 * rewrites the file atomically (util_write_atomic) after the first step, then
 * at most once every RUNWRITER_EVERY_S seconds, and at the end, with
 * "status" "running", then "done", "stopped" or "failed" (and "error"). The
 * summary is the median over the steps after the first (warm-up: first
 * touch, BLAS threads, cuBLASLt heuristics, NCCL connections; a run of one
 * step keeps that one); medians resist a noisy neighbour. The memory array
 * (one row per rank) is written once, at the end: gathering it is
 * collective, and the loop does that, not this file.
 *
 * The reader (runfile_parse, runfile_read) is what `compare` and
 * `tui --follow` use. It is lenient: every field is optional, a number that
 * is absent or not a number reads as NAN, a string as ""; each caller checks
 * what it needs. It refuses only text that is not a JSON object, a "format"
 * string that is not ultraplan.run/N, and "steps" or "memory" that are not
 * arrays.
 *
 * No MPI, CUDA or BLAS: this library links cJSON and util/ only, so the
 * planning binary reads run.json without the executor.
 */
#ifndef ULTRAPLAN_EXECUTOR_RUNFILE_H
#define ULTRAPLAN_EXECUTOR_RUNFILE_H

#include <cjson/cJSON.h>

#define RUN_FORMAT "ultraplan.run/1"
#define RUNWRITER_EVERY_S 1.0   // least seconds between two progress writes

/* Bytes a rank allocated, by category (the cost model's categories). */
typedef enum { XM_WEIGHTS, XM_GRADS, XM_OPTIM, XM_ACTS, XM_BUFFERS, XM_COUNT } ExecMem;

/* Seconds of a step by phase (exposed communication for TP, PP, DP). */
typedef enum {
    PH_FWD, PH_BWD, PH_RECOMPUTE, PH_TP, PH_PP, PH_DP, PH_OPTIM, PH_COUNT
} Phase;

/* run.json's keys: "weights", ...; "forward", "backward", ... */
const char *runfile_mem_name(ExecMem k);
const char *runfile_phase_name(Phase p);

/* One step as run.json has it. */
typedef struct {
    int step;                    // optimizer steps done after it
    double loss;                 // nats
    double step_s;               // seconds, the slowest rank
    double tokens_per_s;
    double mfu;                  // fraction of the world's peak
    double t[PH_COUNT];          // seconds by phase, of the busiest rank
} RunStep;

/* One rank's memory row. Fields below 0 are not measured and not written. */
typedef struct {
    int rank, stage, tp_rank, dp_rank;
    double bytes[XM_COUNT];      // allocated by category
    double rss_peak;             // bytes, VmHWM
    double device_peak;          // bytes in use on the device at the peak (cuda), < 0 none
    double device_total;         // bytes of the device, < 0 none
    double gpu_util_pct;         // NVML busy percentage over the run, < 0 none
} RunMem;

typedef struct {
    char *path;                  // NULL: nothing is written
    cJSON *head;                 // format .. peak_flops_per_rank
    cJSON *tail;                 // plan, model, layout
    cJSON *extra;                // nullable, e.g. "proxy", written last
    double *hist;                // (n, PH_COUNT + 5): phases, step time, step, loss, tokens/s, MFU
    int n, cap;
    double last_loss;
    double last_write;           // monotonic seconds of the last write, < 0 never
    double write_s;              // how long the last write took
} RunWriter;

/* Start a run.json at path (NULL: keep the steps but write nothing).
 * backend: "cpu", "cuda", "cuda-proxy"; model and layout are owned by the
 * writer from here on (nullable). 0, or -1 with err (out of memory). */
int runwriter_init(RunWriter *w, const char *path, const char *backend, int world, double tokens_per_step,
                   double flops_per_token, double peak_flops_per_rank, const char *plan, cJSON *model,
                   cJSON *layout, char *err, int errlen);
/* Add a step; rewrite the file when it is the first or RUNWRITER_EVERY_S
 * have passed since the last write. 0, or -1 with err (the write failed;
 * the run may go on, the final write reports again). */
int runwriter_step(RunWriter *w, const RunStep *s, char *err, int errlen);
/* The summary's medians so far: phases into med, the step time returned. */
double runwriter_medians(const RunWriter *w, double med[PH_COUNT]);
/* Attach an object written after everything else under `name` (owned). */
void runwriter_extra(RunWriter *w, const char *name, cJSON *obj);
/* The whole document now: status "running", "done", "stopped", "failed";
 * error (nullable) the failure; mem (nmem rows, nullable) the memory array.
 * Caller deletes. */
cJSON *runwriter_doc(const RunWriter *w, const char *status, const char *error, const RunMem *mem, int nmem);
/* runwriter_doc written to path; 0 (also without a path), or -1 with err. */
int runwriter_write(RunWriter *w, const char *status, const char *error, const RunMem *mem, int nmem, char *err,
                    int errlen);
void runwriter_free(RunWriter *w);

/* ---- the reader ------------------------------------------------------------ */

typedef struct {
    double step, loss, step_s, tokens_per_s, mfu;   // NAN where absent; step_s falls back on "time_s"
} RunDocStep;

typedef struct {
    double stage, micro_batches_run;
    double predicted_compute_mb_s, predicted_fwd_mb_s, predicted_bwd_mb_s, predicted_recompute_mb_s;
    double measured_compute_mb_s, measured_fwd_mb_s, measured_bwd_mb_s, measured_recompute_mb_s;
} RunDocProxy;

typedef struct {
    double rank, stage, tp_rank, dp_rank;
    double bytes[XM_COUNT];
    double rss_peak, device_peak, device_total, gpu_util_pct;
} RunDocMem;

typedef struct {
    char format[48];             // "" when absent or not a string
    char backend[32];
    char status[32];             // "running", "done", "stopped", "failed"; "" when absent
    char error[512];
    double world, tokens_per_step, flops_per_token, peak_flops_per_rank;
    char model_name[48];         // the run's "model.name", "" when absent
    double model_params;         // the run's "model.params" (exact count), NaN when absent
    int has_summary;
    double steps_averaged, step_s, tokens_per_s, mfu, final_loss, gpu_util_pct;   // the summary's
    double phases[PH_COUNT];     // the summary's phases_s
    int has_phases;              // phases_s is an object
    int nsteps;
    RunDocStep *steps;           // (nsteps)
    int has_memory;              // "memory" is an array
    int nmem;
    RunDocMem *mem;              // (nmem); rows that are not objects are left out
    int has_proxy;
    RunDocProxy proxy;
} RunDoc;

/* Parse run.json text into d (runfile_free it, also after a failure). 0, or
 * -1 with err: not a JSON object (possibly cut short: being written), a
 * format other than ultraplan.run/N, steps or memory not arrays. */
int runfile_parse(const char *text, RunDoc *d, char *err, int errlen);
/* The file at path (at most 64 MiB); err names the path. */
int runfile_read(const char *path, RunDoc *d, char *err, int errlen);
void runfile_free(RunDoc *d);

#endif
