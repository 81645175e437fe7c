/* calibrate_cuda.h — measure this machine's GPU into a HwProfile, for
 * `ultraplan calibrate --backend cuda` (cli/cmd_calibrate.c calls it, then
 * profiles/profile_write_json).
 *
 * Starts from the profile it is given (a builtin such as "h200", or zeros)
 * and overwrites only what it measures:
 *   peak[bf16]   kept when given (datasheet); else the best GEMM measured
 *   hbm_bytes    the device's total memory
 *   hbm_bw       kept when given; else the best device-to-device copy
 *   gemm_eff     cuBLASLt bf16 GEMMs, square and transformer-shaped, as
 *                achieved/peak[bf16] by FLOPs of one GEMM, in the steady,
 *                power-limited state of a training run: after ~2 s of the
 *                largest GEMM back to back, each point kept busy for
 *                >= 100 ms (median of 5 batches queued back to back). A
 *                cool GPU's bursts run at the full boost clock; under
 *                sustained load an H200 sits at its ~700 W cap with the SM
 *                clock ~25 % lower (see calibrate_cuda.cu)
 *   mem_eff      device-to-device copies, achieved/hbm_bw by bytes moved
 *                (read + write), each from a ring of buffers twice the L2
 *                so that it measures HBM
 *   attn_eff     kc_attention_fwd, causal FLOPs (4·B·T²·NH·HS/2) over time,
 *                as a fraction of peak[bf16]; timed like the GEMMs, right
 *                after them (copies run first, before the warm-up)
 *   eff_ref_peak, eff_ref_hbm_bw  0: the curves above are this GPU's
 *                (hw_curves_local restates any it doesn't replace)
 *   with 2+ GPUs and NCCL: intra.bw (all-reduce bus bandwidth at the largest
 *   size), intra.lat (small all-reduce time per ring hop), gpus_per_node
 *   (the GPUs of this machine).
 * Under mpirun, one GPU per process (kc_nccl_*): the same NCCL sweep over
 * the processes, bootstrapped by the caller (MPI stays in executor/dist.c).
 * What it doesn't: links between nodes, failure rates, storage, overheads.
 * Needs a GPU: returns -1 with err filled when there is none. Takes about
 * 6 s on one H200 (2 s warm-up, ~0.1 s a GEMM or attention point), plus the
 * NCCL sweep with 2+ GPUs. */
#ifndef ULTRAPLAN_KERNELS_CALIBRATE_CUDA_H
#define ULTRAPLAN_KERNELS_CALIBRATE_CUDA_H

#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif
#include "hw.h"   // plain C, no extern "C" of its own

#define KC_NCCL_SIZES 8

typedef struct {
    char device[96];          // cudaDeviceProp.name
    int ngpus;                // devices visible
    double gemm_best;         // FLOP/s, best bf16 GEMM of the sweep
    double copy_bw;           // bytes/s (read + write), best device copy
    double attn_best;         // FLOP/s, best kc_attention_fwd
    int nccl_n;               // sizes measured below, 0 without NCCL or 1 GPU
    double nccl_bytes[KC_NCCL_SIZES];       // message bytes per rank
    double allreduce_busbw[KC_NCCL_SIZES];  // bytes/s, nccl-tests' busbw
    double allgather_busbw[KC_NCCL_SIZES];
    double reducescatter_busbw[KC_NCCL_SIZES];
    double sendrecv_bw[KC_NCCL_SIZES];      // bytes/s, GPU 0 → 1
} KcCalibReport;

int kc_calibrate(HwProfile *hw, char *err, int errlen);

/* The same, also filling rep (nullable) and printing one line per
 * measurement to log (nullable). */
int kc_calibrate_report(HwProfile *hw, KcCalibReport *rep, FILE *log, char *err, int errlen);

typedef struct {
    FILE *log;             // one line per measurement; NULL: quiet
    int nccl_in_process;   // 0 skips the one-process NCCL sweep over every visible
                           // GPU (a multi-process calibration uses kc_nccl_*)
    /* Nullable: GPU 0's SM clock (MHz) and board power (W) now, -1 where
     * unknown, logged before and after the warm-up, after each GEMM and
     * attention point and after the sweeps. The caller supplies it (NVML
     * lives in executor/cuda/cunvml.c; kernels/ does not depend on
     * executor/). */
    void (*probe)(void *ctx, int *sm_mhz, double *watts);
    void *probe_ctx;       // passed to probe
} KcCalibOpts;

/* The same, with the options above. */
int kc_calibrate_opts(HwProfile *hw, KcCalibReport *rep, const KcCalibOpts *opt, char *err, int errlen);

/* ---- NCCL across processes, one GPU each ---------------------------------- */

#define KC_NCCL_ID_BYTES 128   // sizeof(ncclUniqueId)
typedef struct KcNccl KcNccl;

/* 1 when built with NCCL. */
int kc_nccl_available(void);
/* A new unique id (on one process; the caller broadcasts it). 0, or -1
 * without NCCL. */
int kc_nccl_unique_id(void *id);
/* Joins the world's communicator on `device` with buffers for messages up
 * to 1 GiB. Collective. NULL without NCCL. */
KcNccl *kc_nccl_open(const void *id, int rank, int world, int device);
/* Seconds per call on this process: kind 0 all-reduce, 1 reduce-scatter,
 * 2 all-gather (bytes: the whole buffer, fp32, as nccl-tests' size), 3
 * send from rank 0 to rank 1 (bytes sent); median of 5 batches of reps calls
 * after 3 warm-ups. Collective: every process calls it with the same
 * arguments. */
double kc_nccl_time(KcNccl *k, int kind, size_t bytes, int reps);
void kc_nccl_close(KcNccl *k);

#ifdef __cplusplus
}
#endif
#endif
