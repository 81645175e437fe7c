/* fuzz_sizes.c — size strings ("175B", "80GiB", "8K"), the name parsers and
 * every shared flag that takes a value, one string at a time.
 *
 * Accepted sizes must be finite, >= 0 and within the parser's documented
 * range; an int must be the number the count parser saw.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "common.h"

static void need(int ok, const char *what, const char *s)
{
    if (!ok) {
        fprintf(stderr, "fuzz_sizes: %s for \"%s\"\n", what, s);
        abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 256)
        return 0;
    char *s = fz_strndup(data, size);
    double v;
    int n;
    if (util_parse_count(s, &v) == 0)
        need(isfinite(v) && v >= 0 && v <= 1e30, "count out of range", s);
    if (util_parse_bytes(s, &v) == 0)
        need(isfinite(v) && v >= 0 && v <= 1e30, "bytes out of range", s);
    if (util_parse_int(s, &n) == 0) {
        need(n >= 0, "negative int", s);
        need(util_parse_count(s, &v) == 0 && v == n, "int differs from count", s);
    }

    MlpKind mk; NormKind nk; PosKind pk; FlopConvention fc; Recompute rc; OptimShard os; Precision pr;
    if (spec_parse_mlp(s, &mk) == 0) need(mk == MLP_GELU || mk == MLP_SWIGLU, "mlp", s);
    if (spec_parse_norm(s, &nk) == 0) need(nk <= NORM_RMSNORM, "norm", s);
    if (spec_parse_pos(s, &pk) == 0) need(pk <= POS_ROPE, "pos", s);
    if (spec_parse_flops(s, &fc) == 0) need(fc < FLOPS_CONVENTION_COUNT, "flops", s);
    if (spec_parse_recompute(s, &rc) == 0) need(rc <= RECOMPUTE_FULL, "recompute", s);
    if (layout_parse_opt(s, &os) == 0) need(os <= OPT_DISTOPT, "optimizer", s);
    if (hw_parse_precision(s, &pr) == 0) need(pr < PREC_COUNT, "precision", s);

    /* every shared flag that takes a value, on a fresh CliInputs */
    const struct option *o = args_common_options();
    char err[512];
    for (int i = 0; i < args_common_count(); i++) {
        if (o[i].has_arg != required_argument)
            continue;
        CliInputs in;
        args_init(&in);
        err[0] = 0;
        if (args_handle(&in, o[i].val, s, err, sizeof err) != 0) {
            need(err[0] != 0, "error without a message", s);
            need(strstr(err, o[i].name) != NULL, "error does not name its flag", s);
        } else {
            need(in.sc.opts.tokens >= 0 && isfinite(in.sc.opts.tokens), "tokens", s);
            need(in.sc.opts.mtbf_gpu_hours >= 0 && isfinite(in.sc.opts.mtbf_gpu_hours), "mtbf", s);
            need(isfinite(in.sc.opts.restart_s), "restart", s);
            for (int k = 0; k < LAYOUT_MAX_PP; k++)
                need(in.sc.layout.layers[k] >= 0 && in.sc.layout.layers[k] <= 100000, "stage layers", s);
        }
    }
    free(s);
    return 0;
}
