/* fuzz_profile.c — the hardware profile loader (profiles/profile.c).
 *
 * A profile the loader accepts must survive a round trip through
 * profile_to_json unchanged, and a small model costed on it must come out
 * finite: a profile that parses but makes the cost model divide by zero or
 * overflow is a loader bug (it should have named the field).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "profile.h"
#include "report.h"

static int near(double a, double b) { return fabs(a - b) <= 1e-14 * fmax(fabs(a), fabs(b)); }

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 65536)
        return 0;
    char *text = fz_strndup(data, size);
    HwProfile hw;
    char err[512];
    err[0] = 0;
    if (profile_parse_json(text, "fuzz.json", &hw, err, sizeof err) != 0) {
        if (!err[0] || !strstr(err, "fuzz.json")) {
            fprintf(stderr, "fuzz_profile: error without origin: \"%s\"\n", err);
            abort();
        }
        free(text);
        return 0;
    }
    /* round trip */
    char *out = profile_to_json(&hw);
    HwProfile back;
    if (!out || profile_parse_json(out, "roundtrip", &back, err, sizeof err) != 0) {
        fprintf(stderr, "fuzz_profile: round trip failed: %s\n", err);
        abort();
    }
    /* cJSON prints 15 digits when they read back within DBL_EPSILON
     * (compare_double), so a round trip may move a number by an ulp */
    int same = back.gpus_per_node == hw.gpus_per_node && back.gemm_eff.n == hw.gemm_eff.n
               && near(back.hbm_bytes, hw.hbm_bytes) && near(back.hbm_bw, hw.hbm_bw)
               && near(back.intra.bw, hw.intra.bw) && near(back.inter.bw, hw.inter.bw);
    for (int p = 0; p < PREC_COUNT; p++)
        same = same && near(back.peak[p], hw.peak[p]);
    if (!same) {
        fprintf(stderr, "fuzz_profile: round trip changed the profile\n");
        abort();
    }
    free(out);

    /* cost a small model on every precision the profile supports */
    ModelSpec m;
    fz_default_model(&m);
    for (int p = 0; p < PREC_COUNT; p++) {
        if (hw.peak[p] <= 0)
            continue;
        Layout lo;
        layout_default(&lo);
        lo.prec = (Precision)p;
        lo.tp = hw.gpus_per_node % 2 == 0 && m.a % 2 == 0 ? 2 : 1;
        lo.dp = 4;
        lo.pp = 2;
        lo.gbs = 64;
        lo.mbs = 2;
        if (layout_check(&lo, &m, &hw, err, sizeof err) != 0) {
            fprintf(stderr, "fuzz_profile: layout: %s\n", err);
            abort();
        }
        CostOpts o;
        cost_opts_default(&o);
        Cost c;
        cost(&m, &hw, &lo, &o, &c);
        fz_check_cost(&m, &lo, &c);
        cJSON *j = report_predict_json(&m, &hw, &lo, &c, "");
        fz_check_json(j, "predict json");
        cJSON_Delete(j);
    }
    free(text);
    return 0;
}
