/* bench_fit.c — see bench_fit.h. */
#include "bench_fit.h"

#include <math.h>
#include <stdio.h>

#include "timing.h"

int bench_fit_a2a(const HwProfile *hw, int n, int k, const double *bytes, const double *secs, int m,
                  BenchA2aFit *out, char *err, int errlen)
{
    if (m < 2 || m > BENCH_A2A_MAX_POINTS || n < 2) {
        snprintf(err, errlen, "all-to-all fit: needs 2 to %d sizes over 2 or more ranks (got %d over %d)",
                 BENCH_A2A_MAX_POINTS, m, n);
        return -1;
    }
    /* the links with their latency taken out: X(B); alpha is the rest */
    HwProfile v = *hw;
    v.intra.lat = v.inter.lat = 0;
    double s0 = 0, s1 = 0, s2 = 0, sy = 0, sxy = 0, x[BENCH_A2A_MAX_POINTS], y[BENCH_A2A_MAX_POINTS];
    for (int i = 0; i < m; i++) {
        if (!(bytes[i] > 0) || !(secs[i] > 0) || !isfinite(bytes[i]) || !isfinite(secs[i])) {
            snprintf(err, errlen, "all-to-all fit: point %d (%g B, %g s) is not a positive size and time", i,
                     bytes[i], secs[i]);
            return -1;
        }
        x[i] = time_alltoall(&v, bytes[i], n, k);
        double alpha = time_alltoall(hw, bytes[i], n, k) - x[i];
        y[i] = secs[i] - alpha;
        double w = 1.0 / (secs[i] * secs[i]);
        s0 += w, s1 += w * x[i], s2 += w * x[i] * x[i], sy += w * y[i], sxy += w * x[i] * y[i];
    }
    double det = s0 * s2 - s1 * s1;
    if (!(det > 1e-12 * s0 * s2) || !(s2 > 0)) {
        snprintf(err, errlen, "all-to-all fit: the %d sizes do not differ enough to separate latency from bandwidth",
                 m);
        return -1;
    }
    double b = (s0 * sxy - s1 * sy) / det, a = (sy - b * s1) / s0;   // t - alpha = a + b·X
    const double bmax = 1.0 / BENCH_A2A_EFF_MIN;
    int capped = 0;
    if (b < 1 || b > bmax) {   // on the eff edge: the best latency with it held
        b = b < 1 ? 1 : bmax;
        a = (sy - b * s1) / s0;
        capped = 1;
    }
    if (a < BENCH_A2A_LAT_MIN) {   // on the latency edge: the best 1/eff with it held
        a = BENCH_A2A_LAT_MIN;
        b = (sxy - a * s1) / s2;
        b = b < 1 ? 1 : b > bmax ? bmax : b;
        capped = 1;
    }
    double e = 0;
    for (int i = 0; i < m; i++)
        e += fabs(log((a + (secs[i] - y[i]) + b * x[i]) / secs[i]));
    out->lat = a;
    out->eff = 1.0 / b;
    out->err = e / m;
    out->capped = capped;
    return 0;
}

int bench_fit_fp8_peak(const HwProfile *hw, const double *flops, const double *rate, int m, double *peak,
                       double *out_err, char *err, int errlen)
{
    double ref = hw->eff_ref_peak > 0 ? hw->eff_ref_peak : hw->peak[PREC_BF16];
    if (m < 1 || !(ref > 0) || hw->gemm_eff.n < 1) {
        snprintf(err, errlen,
                 "fp8 peak fit: needs 1 or more GEMMs, a bf16 peak and a GEMM curve (got %d, %g, %d points)", m, ref,
                 hw->gemm_eff.n);
        return -1;
    }
    double p = 0;
    for (int i = 0; i < m; i++) {
        if (!(flops[i] > 0) || !(rate[i] > 0) || !isfinite(flops[i]) || !isfinite(rate[i])) {
            snprintf(err, errlen, "fp8 peak fit: point %d (%g FLOP at %g FLOP/s) is not a positive size and rate", i,
                     flops[i], rate[i]);
            return -1;
        }
        p = rate[i] > p ? rate[i] : p;
    }
    for (int it = 0; it < 200; it++) {
        double s = 0;
        for (int i = 0; i < m; i++)
            s += log(rate[i]) - log(hw_eff(&hw->gemm_eff, flops[i] * ref / p));
        double q = exp(s / m);
        if (fabs(q - p) <= 1e-12 * p) {
            double e = 0;
            for (int i = 0; i < m; i++)
                e += fabs(log(q * hw_eff(&hw->gemm_eff, flops[i] * ref / q) / rate[i]));
            *peak = q;
            if (out_err)
                *out_err = e / m;
            return 0;
        }
        p = q;
    }
    snprintf(err, errlen, "fp8 peak fit: did not settle in 200 iterations (last %g FLOP/s)", p);
    return -1;
}
