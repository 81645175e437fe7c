/* bench_cuda.h — measure this machine's GPUs into a HwProfile, for
 * `[mpirun -np N] ultraplan calibrate --backend cuda` (in the CUDA module;
 * cli/cmd_calibrate.c parses the command).
 *
 * bench_cuda_measure (bench_cuda.cu) starts from the profile it is given (a
 * builtin such as "h200", or zeros) and overwrites only what it measures on
 * GPU 0:
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
 *                clock ~25 % lower (see bench_cuda.cu)
 *   mem_eff      device-to-device copies, achieved/hbm_bw by bytes moved
 *                (read + write), each from a ring of buffers twice the L2
 *                so that it measures HBM
 *   (fp8)        the same GEMM shapes through kc_fp8_gemm (cuBLASLt, E4M3
 *                operands, bf16 out, fast accumulation: the call the fp8
 *                executor's forward makes), timed as the bf16 ones right
 *                after them, into rep's fp8_* only: bench_cuda_calibrate
 *                fits peak[fp8] to them (bench_fit_fp8_peak)
 *   attn_eff     kc_attention_fwd, causal FLOPs (4·B·T²·NH·HS/2) over time,
 *                as a fraction of peak[bf16]; timed like the GEMMs, right
 *                after them (copies run first, before the warm-up)
 *   eff_ref_peak, eff_ref_hbm_bw  0: the curves above are this GPU's
 *                (hw_curves_local restates any it doesn't replace)
 * Needs a GPU: returns -1 with err filled when there is none. Takes about
 * 6 s on one H200 (2 s warm-up, ~0.1 s a GEMM or attention point), measured
 * before the fp8 sweep, whose 13 points add ~1.5 s by count (not yet run).
 *
 * bench_cuda_calibrate (bench_cuda_run.c) is the whole command: those
 * sweeps on rank 0's GPU, then with 2+ GPUs the NCCL sweep (all-reduce,
 * all-gather, reduce-scatter and all-to-all by bus bandwidth, nccl-tests'
 * convention, the all-to-all as one group of ncclSend/ncclRecv with every
 * rank, and send/recv between GPUs 0 and 1 by size) through
 * executor/cuda/cucomm.h,
 * the one NCCL wrapper: in one process over every visible GPU, or under
 * mpirun one GPU per rank, giving intra.bw (all-reduce bus bandwidth at the
 * largest size; inter across nodes), intra.lat (the smallest all-reduce's
 * time per ring hop), gpus_per_node, a2a_lat and a2a_eff fitted to the
 * all-to-all sizes (bench_fit.h; in one process too), and under mpirun
 * coll_lat and coll_eff (bench_fit_colls). peak[fp8]: the cost model has no
 * fp8 curve of its own (it reads the bf16 one at the fp8 size, timing.c),
 * so the fp8 sweep calibrates the one fp8 constant there is: the sustained
 * fp8 peak that makes the model's fp8 GEMM rates match the sweep
 * (bench_fit_fp8_peak), replacing the datasheet's (logged); MFU of fp8
 * plans is then against that sustained peak. What it doesn't: failure rates,
 * storage, overheads.
 */
#ifndef ULTRAPLAN_CALIB_BENCH_CUDA_H
#define ULTRAPLAN_CALIB_BENCH_CUDA_H

#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif
#include "hw.h"   // plain C, no extern "C" of its own

#define BENCH_NCCL_SIZES 8
#define BENCH_FP8_POINTS 16

typedef struct {
    char device[96];          // cudaDeviceProp.name
    int ngpus;                // devices visible
    double gemm_best;         // FLOP/s, best bf16 GEMM of the sweep
    double copy_bw;           // bytes/s (read + write), best device copy
    double attn_best;         // FLOP/s, best kc_attention_fwd
    int fp8_n;                // fp8 GEMMs measured (0: refused or no fp8 on this GPU)
    double fp8_flops[BENCH_FP8_POINTS];   // FLOPs of each
    double fp8_rate[BENCH_FP8_POINTS];    // FLOP/s, sustained (timed as the bf16 ones)
    double fp8_best;          // FLOP/s, the best of them
    int nccl_n;               // sizes measured below, 0 without NCCL or 1 GPU
    double nccl_bytes[BENCH_NCCL_SIZES];       // message bytes per rank
    double allreduce_busbw[BENCH_NCCL_SIZES];  // bytes/s, nccl-tests' busbw
    double allgather_busbw[BENCH_NCCL_SIZES];
    double reducescatter_busbw[BENCH_NCCL_SIZES];
    double sendrecv_bw[BENCH_NCCL_SIZES];      // bytes/s, GPU 0 → 1
    double alltoall_busbw[BENCH_NCCL_SIZES];   // bytes/s, nccl-tests' busbw: bytes·(n−1)/n / time
    double alltoall_s[BENCH_NCCL_SIZES];       // seconds per all-to-all (what a2a_lat, a2a_eff are fitted to)
} BenchCudaReport;

typedef struct {
    FILE *log;             // one line per measurement; NULL: quiet
    /* Nullable: GPU 0's SM clock (MHz) and board power (W) now, -1 where
     * unknown, logged before and after the warm-up, after each GEMM and
     * attention point and after the sweeps (NVML: executor/cuda/cunvml.h). */
    void (*probe)(void *ctx, int *sm_mhz, double *watts);
    void *probe_ctx;       // passed to probe
} BenchCudaOpts;

/* The copy, GEMM and attention sweeps on GPU 0 into hw and rep (nullable). */
int bench_cuda_measure(HwProfile *hw, BenchCudaReport *rep, const BenchCudaOpts *opt, char *err, int errlen);
/* The same, logging to log (nullable), no probe. */
int bench_cuda_measure_log(HwProfile *hw, BenchCudaReport *rep, FILE *log, char *err, int errlen);

/* calibrate --backend cuda under MPI (up already): the exit status, the
 * same on every rank; rank 0 writes the profile to out and prints. */
int bench_cuda_calibrate(const char *out, int rank, int world);

#ifdef __cplusplus
}
#endif
#endif
