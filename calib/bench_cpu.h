/* bench_cpu.h — the CPU calibration of `[mpirun -np N] ultraplan calibrate
 * --backend cpu -o cpu.json`: measures this machine and writes a hardware
 * profile the cost model reads (cli/cmd_calibrate.c parses the command).
 *
 * Calibrate measures what the model reads, the way a run executes it: every
 * rank runs the benchmarks at once (as every rank computes at once in a run,
 * sharing cores, caches and memory bandwidth) with the thread count the run
 * will have (OMP_NUM_THREADS, which OpenBLAS follows too); rank 0's figures
 * are kept. Each figure is the median of several short timings, so a busy
 * neighbour for a moment does not set it.
 *
 *   gemm_eff, peak   a linear layer's forward, input-gradient and weight-
 *                    gradient GEMM together (the model times backward as 2x
 *                    forward), at tokens x hidden shapes of small decoders
 *   attn_eff         the flash-style attention kernel forward + backward, at
 *                    the FLOPs the model counts (causal half) and its 3.5x
 *   mem_eff, hbm_bw  a streaming add by size (cache levels, then DRAM)
 *   act_bytes_per_layer  a layer's own non-GEMM kernels (norms, residuals,
 *                    GELU, the gradient buffers zeroed), forward + backward,
 *                    as the elements per token (in units of h) that the
 *                    memory term would have to move to take that long
 *   kernel_lat       one empty parallel kernel
 *   link, coll_lat, coll_eff  ping-pong between ranks 0 and 1, and the
 *                    all-reduce, reduce-scatter and all-gather of the world
 *                    by size (N >= 2 ranks)
 *   a2a_lat, a2a_eff  MPI_Alltoall of the world at six sizes, one float
 *                    per peer to 16 MiB per rank, fitted to the model's
 *                    all-to-all curve (bench_fit.h; N >= 2 ranks; with one
 *                    rank both 0: the model uses coll_lat, coll_eff)
 */
#ifndef ULTRAPLAN_CALIB_BENCH_CPU_H
#define ULTRAPLAN_CALIB_BENCH_CPU_H

#include "hw.h"
#include "timing.h"

/* Seconds per collective of `count` floats over the world (kind 0
 * all-reduce, 1 reduce-scatter, 2 all-gather), the same on every rank. */
typedef double (*BenchCollTimer)(void *ctx, CollKind kind, int count, int reps);

/* coll_lat from a tiny all-reduce; coll_eff so that the model's all-reduce,
 * reduce-scatter and all-gather of 512 KiB and 16 MiB (a TP activation, DP
 * gradients) add up to what the timer took (MPI, or NCCL for --backend
 * cuda). hw->intra (inter across nodes) must hold the link. Collective. */
void bench_fit_colls(HwProfile *hw, int world, BenchCollTimer timer, void *ctx);

/* The whole CPU calibration under MPI (up already): every rank measures,
 * rank 0 writes the profile to out and prints one line per result. The exit
 * status, the same on every rank. */
int bench_cpu_calibrate(const char *out, int rank, int world);

#endif
