/* bench_fit.h — the all-to-all fit and the fp8 peak fit of calibrate (CPU over MPI, GPU over
 * NCCL): a2a_lat and a2a_eff from all-to-all timings at several sizes, so
 * that the cost model's curve (model/timing.c time_coll_alltoall)
 *
 *     t(B) = a2a_lat + alpha + X(B) / a2a_eff
 *
 * (alpha and X(B) = time_alltoall(hw, B, n, k) - alpha at the profile's
 * links as given) matches them. Linear in (a2a_lat, 1/a2a_eff): weighted
 * least squares on the relative error (weights 1/t²), so the smallest sizes
 * set the latency and the largest the bandwidth. Then a2a_eff is capped at
 * 1 and floored at BENCH_A2A_EFF_MIN, a2a_lat floored at BENCH_A2A_LAT_MIN
 * (an a2a_lat of 0 would mean "use coll_lat"), and the other refitted with
 * the capped one held.
 *
 * Pure: no MPI, no timing, no output; calib/bench_cpu.c and
 * bench_cuda_run.c measure and call it.
 */
#ifndef ULTRAPLAN_CALIB_BENCH_FIT_H
#define ULTRAPLAN_CALIB_BENCH_FIT_H

#include "hw.h"

#define BENCH_A2A_LAT_MIN 1e-9   // s: nothing measured beyond alpha-beta
#define BENCH_A2A_EFF_MIN 1e-3
#define BENCH_A2A_MAX_POINTS 64

typedef struct {
    double lat;       // a2a_lat, seconds
    double eff;       // a2a_eff, (0, 1]
    double err;       // mean |ln(model/measured)| over the points at (lat, eff)
    int capped;       // 1 when eff was capped at 1 or lat floored (the fit left the bounds)
} BenchA2aFit;

/* Fit m >= 2 timings secs[i] of all-to-alls of bytes[i] (the whole buffer
 * per rank, as timing.c's `bytes`) over n ranks, k per node, on hw's links
 * (intra, inter; a2a_lat, a2a_eff and coll_* of hw are not read). 0 ok;
 * -1 with err when m < 2 or m > BENCH_A2A_MAX_POINTS, n < 2, a size or
 * time is not positive and finite, or the sizes do not differ. */
int bench_fit_a2a(const HwProfile *hw, int n, int k, const double *bytes, const double *secs, int m,
                  BenchA2aFit *out, char *err, int errlen);

/* The fp8 peak P that makes the cost model's fp8 GEMM rates match m
 * measured ones. The model (model/timing.c) has no fp8 curve: an fp8 GEMM of
 * F FLOPs runs at P · eff(F · ref / P), eff hw's gemm_eff (the bf16 curve),
 * ref = eff_ref_peak or, when 0, peak[bf16]. Least squares of the log rates:
 * ln P = mean_i (ln rate_i − ln eff(F_i·ref/P)), solved by fixed-point
 * iteration from P = the best rate (the curve varies slowly with P).
 * out_err: mean |ln(model/measured)| at the fitted P. 0 ok; -1 with err when
 * m < 1, a point is not positive and finite, hw has no bf16 peak or no
 * GEMM curve, or the iteration does not settle. Pure. */
int bench_fit_fp8_peak(const HwProfile *hw, const double *flops, const double *rate, int m, double *peak,
                       double *out_err, char *err, int errlen);

#endif
