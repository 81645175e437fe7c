/* fuzz_csv.c — the CSV of measured runs that `validate` and `fit` read
 * (calib/runs.c, calib/stats.c), then a prediction of every accepted row.
 *
 * An accepted row must either be predicted with a finite cost or be refused
 * with an error that names the file and line; the statistics over the rows
 * must be finite.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "runs.h"
#include "stats.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 65536)
        return 0;
    char *text = fz_strndup(data, size);
    RunSet set;
    memset(&set, 0, sizeof set);
    char err[512];
    err[0] = 0;
    if (runs_parse_csv(text, "fuzz.csv", &set, err, sizeof err) != 0) {
        if (!err[0] || !strstr(err, "fuzz.csv")) {
            fprintf(stderr, "fuzz_csv: error without the file name: \"%s\"\n", err);
            abort();
        }
        runs_free(&set);
        free(text);
        return 0;
    }
    HwProfile base;
    fz_default_hw(&base);
    double *pred = calloc((size_t)set.n + 1, sizeof *pred), *meas = calloc((size_t)set.n + 1, sizeof *meas),
           *ape = calloc((size_t)set.n + 1, sizeof *ape);
    int n = 0;
    for (int i = 0; i < set.n; i++) {
        const RunRow *r = &set.rows[i];
        if (!(isfinite(r->measured_s) && r->measured_s > 0)) {
            fprintf(stderr, "fuzz_csv: line %d: measured time %g accepted\n", r->line, r->measured_s);
            abort();
        }
        HwProfile hw;
        runs_row_hw(r, &base, &hw);
        Cost c;
        double p;
        if (runs_predict(r, &hw, "fuzz.csv", &p, &c, err, sizeof err) != 0) {
            if (!strstr(err, "fuzz.csv")) {
                fprintf(stderr, "fuzz_csv: error without the file name: \"%s\"\n", err);
                abort();
            }
            continue;
        }
        fz_check_cost(&r->model, &r->layout, &c);
        if (!(isfinite(p) && p > 0)) {
            fprintf(stderr, "fuzz_csv: line %d: prediction %g\n", r->line, p);
            abort();
        }
        pred[n] = p;
        meas[n] = r->measured_s;
        ape[n] = stats_ape(p, r->measured_s);
        n++;
    }
    ApeStats st;
    stats_summarize(ape, n, &st);
    double rho = stats_spearman(pred, meas, n), reg = stats_regret(pred, meas, n);
    if (!isfinite(st.mape) || !isfinite(st.p90) || !isfinite(rho) || !isfinite(reg)) {
        fprintf(stderr, "fuzz_csv: statistics not finite (mape %g p90 %g rho %g regret %g)\n", st.mape, st.p90, rho,
                reg);
        abort();
    }
    free(pred);
    free(meas);
    free(ape);
    runs_free(&set);
    free(text);
    return 0;
}
