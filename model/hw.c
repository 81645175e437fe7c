/* hw.c — efficiency curves and precision names. */
#include "hw.h"

#include <math.h>
#include <strings.h>

double hw_eff(const EffCurve *c, double size)
{
    if (c->n <= 0)
        return 1.0;
    if (size <= c->pt[0].size)
        return c->pt[0].eff;
    if (size >= c->pt[c->n - 1].size)
        return c->pt[c->n - 1].eff;
    for (int i = 1; i < c->n; i++) {
        if (size <= c->pt[i].size) {
            double x0 = log(c->pt[i - 1].size), x1 = log(c->pt[i].size);
            double t = x1 > x0 ? (log(size) - x0) / (x1 - x0) : 1.0;
            return c->pt[i - 1].eff + t * (c->pt[i].eff - c->pt[i - 1].eff);
        }
    }
    return c->pt[c->n - 1].eff;
}

static void scale_sizes(EffCurve *c, double k)
{
    for (int i = 0; i < c->n; i++)
        c->pt[i].size *= k;
}

void hw_curves_local(HwProfile *hw)
{
    double peak = hw->peak[PREC_BF16];
    if (hw->eff_ref_peak > 0 && peak > 0) {   // a size read at ref is this GPU's size x ref/peak
        scale_sizes(&hw->gemm_eff, peak / hw->eff_ref_peak);
        scale_sizes(&hw->attn_eff, peak / hw->eff_ref_peak);
    }
    if (hw->eff_ref_hbm_bw > 0 && hw->hbm_bw > 0)
        scale_sizes(&hw->mem_eff, hw->hbm_bw / hw->eff_ref_hbm_bw);
    hw->eff_ref_peak = 0;
    hw->eff_ref_hbm_bw = 0;
}

static const char *const prec_names[] = {"fp32", "bf16", "fp16", "fp8"};
_Static_assert(sizeof prec_names / sizeof *prec_names == PREC_COUNT, "precision names");

const char *hw_precision_name(Precision p) { return prec_names[p]; }

int hw_parse_precision(const char *s, Precision *out)
{
    for (int i = 0; i < PREC_COUNT; i++)
        if (strcasecmp(s, prec_names[i]) == 0) {
            *out = (Precision)i;
            return 0;
        }
    return -1;
}

/* fp8 training keeps bf16 weights and activations between layers
 * (Transformer Engine casts per GEMM), so it stores 2 bytes. */
int hw_precision_bytes(Precision p) { return p == PREC_FP32 ? 4 : 2; }
