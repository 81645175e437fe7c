/* test_validate.c — the measured-runs CSV reader and the error statistics
 * of `ultraplan validate`, on hand-computed cases; the number text validate
 * prints, byte for byte against cJSON and printf; the fast order statistics
 * and ranks against a full sort. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <cjson/cJSON.h>

#include "profile.h"
#include "runs.h"
#include "stats.h"

#define assert_near(got, want, tol) do { \
    double g_ = (got), w_ = (want); \
    if (!(fabs(g_ - w_) <= (tol))) { print_error("%s = %.9g, want %.9g\n", #got, g_, w_); fail(); } \
} while (0)

static const char *VTRAIN =
    "# GPUs,global batch,micro batch,hidden size,attention heads,# layers,sequence length,tensor parallelism,"
    "data parallelism,pipeline parallelism,iteration time (ms)\n"
    "2,16,8,1024,16,24,1024,1,1,2,372.160408\n"
    "8,32,4,1024,16,24,1024,2,2,2,219.732754\r\n"
    "\n";

static void test_vtrain_rows(void **st)
{
    (void)st;
    RunSet set = {0};
    char err[256];
    assert_int_equal(runs_parse_csv(VTRAIN, "v.csv", &set, err, sizeof err), 0);
    assert_int_equal(set.n, 2);
    assert_int_equal(set.format, RUNS_FMT_VTRAIN);
    const RunRow *r = &set.rows[1];
    assert_int_equal(r->line, 3);
    assert_int_equal(r->gpus, 8);
    assert_int_equal(r->layout.tp, 2);
    assert_int_equal(r->layout.pp, 2);
    assert_int_equal(r->layout.dp, 2);
    assert_int_equal(r->layout.mbs, 4);
    assert_int_equal(r->model.vocab, 50257);
    assert_int_equal(r->model.f, 4096);
    assert_near(r->measured_s, 0.219732754, 1e-12);
    /* vTrain's settings: full recompute, unfused attention, fp16, plain DP after the backward */
    assert_int_equal(r->recompute, RECOMPUTE_FULL);
    assert_int_equal(r->layout.full_rc[0], 12);
    assert_false(r->layout.flash);
    assert_false(r->layout.sp);
    assert_int_equal(r->layout.prec, PREC_FP16);
    assert_int_equal(r->layout.opt, OPT_ZERO0);
    assert_near(r->dp_overlap, 0, 0);
    assert_near(r->inter_bw, 12.5e9, 1);
    runs_free(&set);
}

static void test_ultraplan_rows(void **st)
{
    (void)st;
    const char *csv =
        "label,layers,hidden,heads,kv_heads,ffn,seq,tp,pp,dp,mbs,gbs,mlp,norm,pos,recompute,zero,precision,sp,time_ms\n"
        "# a comment after the header\n"
        "llama,32,4096,32,8,14336,4096,4,2,8,1,256,swiglu,rmsnorm,rope,selective,distopt,bf16,1,1234.5\n";
    RunSet set = {0};
    char err[256];
    assert_int_equal(runs_parse_csv(csv, "u.csv", &set, err, sizeof err), 0);
    assert_int_equal(set.format, RUNS_FMT_ULTRAPLAN);
    assert_int_equal(set.n, 1);
    const RunRow *r = &set.rows[0];
    assert_int_equal(r->line, 3);
    assert_string_equal(r->label, "llama");
    assert_int_equal(r->gpus, 64);
    assert_int_equal(r->model.g, 8);
    assert_int_equal(r->model.mlp, MLP_SWIGLU);
    assert_int_equal(r->model.norm, NORM_RMSNORM);
    assert_int_equal(r->layout.opt, OPT_DISTOPT);
    assert_int_equal(r->layout.sel_rc[1], 16);
    assert_true(r->layout.sp && r->layout.flash);
    assert_true(r->dp_overlap < 0);
    HwProfile hw;
    assert_int_equal(profile_load_builtin("h100-sxm", &hw, err, sizeof err), 0);
    double p;
    assert_int_equal(runs_predict(r, &hw, "u.csv", &p, NULL, err, sizeof err), 0);
    assert_true(p > 0 && isfinite(p));
    runs_free(&set);
}


/* Parses a one-row CSV and predicts its row (runs_predict's return: -1 with
 * the row's error in err); the parse itself must succeed. */
static int predict_first_row(const char *csv, const char *file, const HwProfile *hw, double *p, Cost *c, char *err,
                             int errlen)
{
    RunSet set = {0};
    assert_int_equal(runs_parse_csv(csv, file, &set, err, errlen), 0);
    int rc = runs_predict(&set.rows[0], hw, file, p, c, err, errlen);
    runs_free(&set);
    return rc;
}
/* A row's stack decides the layout fields it fixes, as --stack does for
 * predict: torchtitan's CP exchange is the all-gather and its selective
 * recomputation the per-op policy, whether or not the file has a cp_comm
 * column (validate used to price a row without one with the ring). A
 * cp_comm column the stack contradicts is an error naming the line. */
static void test_stack_layout_fields(void **st)
{
    (void)st;
    const char *hdr = "layers,hidden,heads,kv_heads,ffn,seq,tp,pp,dp,cp,mbs,gbs,mlp,norm,pos,zero,recompute,stack%s,"
                      "time_ms\n";
    const char *row = "32,4096,32,8,14336,%d,1,1,%d,%d,1,%d,swiglu,rmsnorm,rope,3,%s,%s%s,1000\n";
    char csv[4][512];
    snprintf(csv[0], sizeof csv[0], hdr, "");   /* cp 2, no cp_comm column */
    snprintf(csv[0] + strlen(csv[0]), sizeof csv[0] - strlen(csv[0]), row, 65536, 4, 2, 4, "full", "torchtitan", "");
    snprintf(csv[1], sizeof csv[1], hdr, ",cp_comm");
    snprintf(csv[1] + strlen(csv[1]), sizeof csv[1] - strlen(csv[1]), row, 65536, 4, 2, 4, "full", "torchtitan",
             ",all-gather");
    snprintf(csv[2], sizeof csv[2], hdr, ",cp_comm");
    snprintf(csv[2] + strlen(csv[2]), sizeof csv[2] - strlen(csv[2]), row, 65536, 4, 2, 4, "full", "torchtitan",
             ",ring");
    snprintf(csv[3], sizeof csv[3], hdr, ",cp_comm");
    snprintf(csv[3] + strlen(csv[3]), sizeof csv[3] - strlen(csv[3]), row, 65536, 4, 2, 4, "full", "megatron-lm",
             ",ring");
    HwProfile hw;
    char err[256];
    assert_int_equal(profile_load_builtin("h100-sxm", &hw, err, sizeof err), 0);
    double p[4];
    for (int i = 0; i < 4; i++) {
        int rc = predict_first_row(csv[i], "s.csv", &hw, &p[i], NULL, err, sizeof err);
        if (i == 2) {
            assert_int_equal(rc, -1);
            assert_non_null(strstr(err, "s.csv:2: cp_comm ring, but the torchtitan stack exchanges K/V by all-gather"));
        } else {
            assert_int_equal(rc, 0);
        }
    }
    assert_true(p[0] == p[1]);   /* the stack's exchange, column or not */
    /* the same row under megatron-lm with the ring is priced otherwise (another exchange, other stack) */
    assert_true(p[3] != p[0]);
    /* selective under torchtitan: its per-op policy (the attention core kept, GEMMs run again) */
    char sel[2][512];
    for (int i = 0; i < 2; i++) {
        snprintf(sel[i], sizeof sel[i], hdr, "");
        snprintf(sel[i] + strlen(sel[i]), sizeof sel[i] - strlen(sel[i]), row, 8192, 8, 1, 16, "selective",
                 i ? "torchtitan" : "megatron-lm", "");
    }
    Cost c[2];
    for (int i = 0; i < 2; i++) {
        double q;
        assert_int_equal(predict_first_row(sel[i], "s.csv", &hw, &q, &c[i], err, sizeof err), 0);
    }
    /* per-op keeps less than Megatron's selective, whatever else the stacks change */
    assert_true(c[1].peak_bytes < 0.8 * c[0].peak_bytes);
}

/* ZeRO-2 beside pipeline parallelism is read (the row's stack is not known
 * yet) and priced only under a stack that runs it: Llama 3's (llama3-meta),
 * not Megatron-LM's; the error names the file and line */
static void test_zero2_pp_row_stack(void **st)
{
    (void)st;
    const char *fmt = "layers,hidden,heads,kv_heads,ffn,seq,tp,pp,dp,mbs,gbs,mlp,norm,pos,zero,stack,time_ms\n"
                      "32,4096,32,8,14336,8192,1,4,2,1,8,swiglu,rmsnorm,rope,%s,%s,1000\n";
    HwProfile hw;
    char err[300], csv[400];
    assert_int_equal(profile_load_builtin("h100-sxm", &hw, err, sizeof err), 0);
    const char *zero[3] = {"2", "2", "distopt"}, *stack[3] = {"megatron-lm", "llama3-meta", "llama3-meta"};
    double p[3];
    for (int i = 0; i < 3; i++) {
        snprintf(csv, sizeof csv, fmt, zero[i], stack[i]);
        int rc = predict_first_row(csv, "z.csv", &hw, &p[i], NULL, err, sizeof err);
        if (i == 0) {
            assert_int_equal(rc, -1);
            assert_non_null(strstr(err, "z.csv:2: layout: ZeRO-2 cannot combine with pp 4 under this stack"));
        } else {
            assert_int_equal(rc, 0);
        }
    }
    /* sharded gradients reduce-scatter every micro-batch (4 here): more DP traffic than once a step */
    assert_true(p[1] > p[2]);
}

/* published tables print tokens/s per GPU: the step is gbs·seq over that
 * times the GPUs; tp_overlap is the row's own */
static void test_tokens_per_gpu(void **st)
{
    (void)st;
    const char *csv =
        "layers,hidden,heads,seq,tp,pp,dp,cp,mbs,gbs,tp_overlap,tokens_per_s_gpu\n"
        "32,4096,32,8192,1,1,4,2,1,128,1,12273\n";
    RunSet set = {0};
    char err[256];
    assert_int_equal(runs_parse_csv(csv, "t.csv", &set, err, sizeof err), 0);
    assert_int_equal(set.n, 1);
    assert_int_equal(set.rows[0].gpus, 8);
    assert_true(fabs(set.rows[0].measured_s / (128.0 * 8192 / (12273.0 * 8)) - 1) < 1e-12);
    assert_true(set.rows[0].tp_overlap == 1.0);
    HwProfile base, h;
    assert_int_equal(profile_load_builtin("h100-sxm", &base, err, sizeof err), 0);
    runs_row_hw(&set.rows[0], &base, &h);
    assert_true(h.tp_overlap == 1.0);
    runs_free(&set);
}

/* what spreadsheets write: a byte-order mark, CRLF line ends, quoted fields, spaces */
static void test_spreadsheet_csv(void **st)
{
    (void)st;
    const char *csv = "\xEF\xBB\xBFlabel, layers,hidden,heads,seq,tp,pp,dp,mbs,gbs,time_ms\r\n"
                      "\"run a\", \"24\",1024,16,1024,1,1,8,1,8, 100 \r\n";
    RunSet set = {0};
    char err[256];
    assert_int_equal(runs_parse_csv(csv, "s.csv", &set, err, sizeof err), 0);
    assert_int_equal(set.n, 1);
    assert_string_equal(set.rows[0].label, "run a");
    assert_int_equal(set.rows[0].model.L, 24);
    assert_true(fabs(set.rows[0].measured_s - 0.1) < 1e-12);
    runs_free(&set);
}

/* bad input: one line that names the file, the line and the column */
static void expect_bad(const char *csv, const char *want)
{
    RunSet set = {0};
    char err[512] = "";
    assert_int_equal(runs_parse_csv(csv, "bad.csv", &set, err, sizeof err), -1);
    if (!strstr(err, want)) {
        print_error("error \"%s\" lacks \"%s\"\n", err, want);
        fail();
    }
    assert_null(strchr(err, '\n'));
    assert_int_equal(set.n, 0);
    runs_free(&set);
}

static void test_bad_rows(void **st)
{
    (void)st;
    const char *h = "layers,hidden,heads,seq,tp,pp,dp,mbs,gbs,time_ms\n";
    char buf[512];
    snprintf(buf, sizeof buf, "%s24,1024,16,1024,1,1,x,1,8,100\n", h);
    expect_bad(buf, "bad.csv:2: column 7 (\"dp\"): expected a whole number >= 1, got \"x\"");
    snprintf(buf, sizeof buf, "%s24,1024,16,1024,1,1,1,1,8,-5\n", h);
    expect_bad(buf, "bad.csv:2: column 10 (\"time_ms\"): expected a positive number");
    snprintf(buf, sizeof buf, "%s24,1024,16,1024,1,1,1,1,8\n", h);
    expect_bad(buf, "bad.csv:2: expected 10 columns as in the header, got 9");
    snprintf(buf, sizeof buf, "%s24,1024,16,1024,3,1,1,1,8,100\n", h);
    expect_bad(buf, "bad.csv:2: layout: tp 3 does not divide heads 16");
    expect_bad("layers,hidden,bogus\n1,2,3\n", "bad.csv:1: column 3: unknown column name \"bogus\"");
    expect_bad("layers,hidden,heads,seq,tp,pp,dp,mbs,gbs\n", "header names neither");
    expect_bad("layers,hidden,heads,seq,tp,pp,dp,mbs,time_ms\n", "lacks the required column \"gbs\"");
    expect_bad("", "empty file");
    expect_bad(h, "no measured runs");
    snprintf(buf, sizeof buf, "gpus,%s4,24,1024,16,1024,1,1,2,1,8,100\n", h);
    expect_bad(buf, "bad.csv:2: GPUs 4 differ from dp·tp·pp·cp");
    /* each factor a valid int, the product not (found by fuzz_csv): an error, not a wrapped count */
    snprintf(buf, sizeof buf, "%s24,1024,16,1024,1,82436472,7411,1,8,100\n", h);
    expect_bad(buf, "bad.csv:2: dp·tp·pp·cp = 7411·1·82436472·1 = 610936693992 GPUs, beyond any cluster (1e8)");
    expect_bad("layers,hidden,heads,seq,tp,pp,dp,mbs,gbs,time_ms,tokens_per_s_gpu\n", "both \"time_ms\" and");
    expect_bad("layers,hidden,heads,seq,tp,pp,dp,mbs,gbs,tokens_per_s_gpu\n24,1024,16,1024,1,1,1,1,8,0\n",
               "column 10 (\"tokens_per_s_gpu\"): expected a positive number");
    expect_bad("layers,hidden,heads,seq,tp,pp,dp,mbs,gbs,tp_overlap,time_ms\n24,1024,16,1024,1,1,1,1,8,2,100\n",
               "column 10 (\"tp_overlap\"): expected a fraction in [0, 1]");
    expect_bad("layers,hidden,heads,seq,tp,pp,dp,mbs,gbs,time_ms,mem_gib\n24,1024,16,1024,1,1,1,1,8,100,-3\n",
               "column 11 (\"mem_gib\"): expected a measured peak in GiB per GPU (0 to 1e5), or nothing, got \"-3\"");
}

/* mem_gib: the measured peak memory per GPU, or nothing where a row has none */
static void test_mem_column(void **st)
{
    (void)st;
    const char *csv = "layers,hidden,heads,seq,tp,pp,dp,mbs,gbs,time_ms,mem_gib\n"
                      "24,1024,16,1024,1,1,1,1,8,100,12.5\n"
                      "24,1024,16,1024,1,1,1,1,8,100,\n";
    RunSet set = {0};
    char err[256];
    assert_int_equal(runs_parse_csv(csv, "m.csv", &set, err, sizeof err), 0);
    assert_int_equal(set.n, 2);
    assert_true(set.rows[0].mem_gib == 12.5);
    assert_true(set.rows[1].mem_gib == 0);
    runs_free(&set);
}

static void test_missing_file(void **st)
{
    (void)st;
    RunSet set = {0};
    char err[256];
    assert_int_equal(runs_read_csv("/nonexistent/runs.csv", &set, err, sizeof err), -1);
    assert_non_null(strstr(err, "/nonexistent/runs.csv: cannot open"));
}

static void test_stats(void **st)
{
    (void)st;
    const double ape[] = {4, 1, 3, 2, 10};
    ApeStats s;
    stats_summarize(ape, 5, &s);
    assert_int_equal(s.n, 5);
    assert_near(s.mape, 4.0, 1e-12);
    assert_near(s.median, 3.0, 1e-12);
    assert_near(s.p90, 7.6, 1e-12);   /* sorted 1 2 3 4 10: pos 3.6 -> 4 + 0.6*6 */
    assert_near(s.max, 10.0, 0);
    stats_summarize(ape, 4, &s);
    assert_near(s.median, 2.5, 1e-12);
    stats_summarize(NULL, 0, &s);
    assert_near(s.mape, 0, 0);
    assert_near(stats_ape(110, 100), 10.0, 1e-12);
    assert_near(stats_ape(90, 100), 10.0, 1e-12);
}

static void test_spearman_and_regret(void **st)
{
    (void)st;
    const double a[] = {1, 2, 3, 4, 5}, b[] = {10, 20, 30, 40, 50}, c[] = {5, 4, 3, 2, 1};
    assert_near(stats_spearman(a, b, 5), 1.0, 1e-12);
    assert_near(stats_spearman(a, c, 5), -1.0, 1e-12);
    /* d = (0, 0, 1, -1, 0) with no ties: 1 - 6*2/(5*24) = 0.9 */
    const double d[] = {1, 2, 4, 3, 5};
    assert_near(stats_spearman(a, d, 5), 0.9, 1e-12);
    /* ties get average ranks: x ranks (1.5 1.5 3), y ranks (1 2 3) -> r = 0.866 */
    const double tx[] = {1, 1, 2}, ty[] = {1, 2, 3};
    assert_near(stats_spearman(tx, ty, 3), sqrt(3.0) / 2, 1e-12);
    assert_near(stats_spearman(a, a, 1), 0, 0);
    /* predicted fastest is row 2 (measured 110); measured fastest is 100: regret 10 % */
    const double pred[] = {3, 2, 1}, meas[] = {100, 105, 110};
    assert_near(stats_regret(pred, meas, 3), 10.0, 1e-12);
    assert_near(stats_regret(meas, meas, 3), 0.0, 0);
}

static void test_groups(void **st)
{
    (void)st;
    RunSet set = {0};
    char err[256];
    assert_int_equal(runs_parse_csv(VTRAIN, "v.csv", &set, err, sizeof err), 0);
    const double pred[] = {0.372160408 * 1.1, 0.219732754};
    StatsGroup *g;
    int n = stats_groups(&set, pred, STATS_BY_GPUS, &g);
    assert_int_equal(n, 2);
    assert_string_equal(g[0].key, "2 GPUs");
    assert_near(g[0].st.mape, 10.0, 1e-9);
    assert_near(g[1].st.mape, 0.0, 1e-9);
    free(g);
    n = stats_groups(&set, pred, STATS_BY_PARALLEL, &g);
    assert_string_equal(g[0].key, "pp");
    assert_string_equal(g[1].key, "dp+tp+pp");
    free(g);
    runs_free(&set);
}

/* The ranking groups: model+gpus mixes global batches and ranks by time per
 * sequence; model+gpus+gbs fixes the batch. Three runs of one model on 8
 * GPUs: A (gbs 8, 100 ms), B (gbs 16, 180 ms: faster per sequence), C
 * (gbs 16, 190 ms). A prediction that ranks C before B and A before both
 * by iteration time has per-sequence order C, B, A (C 11.5, B 12, A 12.5
 * ms a sequence): regret 190/180 - 1 in model+gpus (measured per sequence:
 * B 11.25, C 11.875), and the same in the gbs 16 group. */
static void test_ranking_groups(void **st)
{
    (void)st;
    const char *csv =
        "# GPUs,global batch,micro batch,hidden size,attention heads,# layers,sequence length,tensor parallelism,"
        "data parallelism,pipeline parallelism,iteration time (ms)\n"
        "8,8,1,1024,16,12,1024,1,8,1,100\n"
        "8,16,1,1024,16,12,1024,2,4,1,180\n"
        "8,16,2,1024,16,12,1024,1,8,1,190\n";
    RunSet set = {0};
    char err[256];
    assert_int_equal(runs_parse_csv(csv, "v.csv", &set, err, sizeof err), 0);
    const double pred[] = {0.100, 0.192, 0.184};
    StatsGroup *g;
    int n = stats_groups(&set, pred, STATS_BY_MODEL_GPUS, &g);
    assert_int_equal(n, 1);
    assert_string_equal(g[0].key, "h1024 L12 a16 s1024, 8 GPUs");
    assert_near(g[0].regret, 100.0 * (190.0 / 180.0 - 1.0), 1e-9);
    free(g);
    n = stats_groups(&set, pred, STATS_BY_MODEL_GPUS_GBS, &g);
    assert_int_equal(n, 2);
    assert_string_equal(g[0].key, "h1024 L12 a16 s1024, 8 GPUs, gbs 8");
    assert_near(g[0].regret, 0.0, 0);
    assert_near(g[1].regret, 100.0 * (190.0 / 180.0 - 1.0), 1e-9);
    free(g);
    runs_free(&set);
}

/* Ranks with ties, by hand: x = (3 1 3 2 3 1) ranks (5 1.5 5 3 5 1.5) (the
 * two 1s share places 1-2, the three 3s places 4-6), y = 1..6 ranks itself;
 * deviations from the mean 3.5: x (1.5 -2 1.5 -0.5 1.5 -2), y (-2.5 -1.5
 * -0.5 0.5 1.5 2.5); sxy = -4.5, sxx = 15, syy = 17.5. Then ties at both
 * ends, a constant side, and 20,000 values with ten distinct ones. */
static void test_rank_ties(void **st)
{
    (void)st;
    const double x[] = {3, 1, 3, 2, 3, 1}, y[] = {1, 2, 3, 4, 5, 6};
    assert_near(stats_spearman(x, y, 6), -4.5 / sqrt(15 * 17.5), 1e-12);
    assert_near(stats_spearman(y, x, 6), -4.5 / sqrt(15 * 17.5), 1e-12);
    /* (2 1 2) ranks (2.5 1 2.5) against (1 2 3): sxy = (0.5)(-1) + (-1)(0) + (0.5)(1) = 0 */
    const double e[] = {2, 1, 2}, f[] = {1, 2, 3};
    assert_near(stats_spearman(e, f, 3), 0, 1e-12);
    const double c[] = {7, 7, 7, 7};
    assert_near(stats_spearman(c, y, 4), 0, 0);   /* a constant side */
    /* a large input with many ties (values i % 10) against itself: exactly 1 */
    enum { N = 20000 };
    double *big = malloc(N * sizeof *big), *rev = malloc(N * sizeof *rev);
    assert_non_null(big);
    assert_non_null(rev);
    for (int i = 0; i < N; i++) {
        big[i] = i % 10;
        rev[i] = 10 - i % 10;
    }
    assert_near(stats_spearman(big, big, N), 1.0, 1e-12);
    assert_near(stats_spearman(big, rev, N), -1.0, 1e-12);
    free(big);
    free(rev);
}

/* Grouping by hand on compact rows: GPUs 8 16 8 4 16 make groups "8 GPUs"
 * (rows 0 2), "16 GPUs" (rows 1 4), "4 GPUs" (row 3) in order of first
 * appearance. APEs: row 0 110/100 -> 10, row 2 140/200 -> 30 (mape 20),
 * row 1 100/100 -> 0, row 4 120/80 -> 50 (mape 25), row 3 105/100 -> 5.
 * In "16 GPUs" the predicted fastest (row 1, 100) measures 100 where row 4
 * measures 80: regret 25 %, and the two orders are opposite: spearman -1. */
static void test_groups_by_hand(void **st)
{
    (void)st;
    const int gpus[] = {8, 16, 8, 4, 16};
    const double meas[] = {0.100, 0.100, 0.200, 0.100, 0.080}, pred[] = {0.110, 0.100, 0.140, 0.105, 0.120};
    StatsRow rows[5];
    for (int i = 0; i < 5; i++)
        rows[i] = (StatsRow){.gpus = gpus[i], .h = 1024, .L = 24, .a = 16, .s = 1024, .dp = gpus[i], .tp = 1,
                             .pp = 1, .cp = 1, .gbs = 1, .measured_s = meas[i]};
    StatsGroup *g;
    int n = stats_groups_rows(rows, 5, pred, STATS_BY_GPUS, &g);
    assert_int_equal(n, 3);
    assert_string_equal(g[0].key, "8 GPUs");
    assert_string_equal(g[1].key, "16 GPUs");
    assert_string_equal(g[2].key, "4 GPUs");
    assert_int_equal(g[0].st.n, 2);
    assert_int_equal(g[1].st.n, 2);
    assert_int_equal(g[2].st.n, 1);
    assert_near(g[0].st.mape, 20, 1e-9);
    assert_near(g[0].st.max, 30, 1e-9);
    assert_near(g[0].regret, 0, 1e-9);
    assert_near(g[0].spearman, 1, 1e-12);
    assert_near(g[1].st.mape, 25, 1e-9);
    assert_near(g[1].regret, 25, 1e-9);
    assert_near(g[1].spearman, -1, 1e-12);
    assert_near(g[2].st.mape, 5, 1e-9);
    free(g);
    n = stats_groups_rows(rows, 5, pred, STATS_BY_MODEL, &g);
    assert_int_equal(n, 1);
    assert_string_equal(g[0].key, "h1024 L24 a16 s1024");
    assert_int_equal(g[0].st.n, 5);
    assert_near(g[0].st.mape, (10 + 0 + 30 + 5 + 50) / 5.0, 1e-9);
    free(g);
    /* params_b keys at 4 significant digits: 1.00001 and 1.00002 are one model */
    rows[0].params_b = 1.00001;
    rows[1].params_b = 1.00002;
    n = stats_groups_rows(rows, 2, pred, STATS_BY_MODEL, &g);
    assert_int_equal(n, 1);
    assert_string_equal(g[0].key, "1B (h1024 L24 s1024)");
    free(g);
}

/* Many groups (a distinct model a row, then every row again): each key
 * once, in order of first appearance, each holding its two rows. */
static void test_many_groups(void **st)
{
    (void)st;
    enum { M = 5000 };
    StatsRow *rows = calloc(2 * M, sizeof *rows);
    double *pred = calloc(2 * M, sizeof *pred);
    assert_non_null(rows);
    assert_non_null(pred);
    for (int i = 0; i < 2 * M; i++) {
        int k = i % M;
        rows[i] = (StatsRow){.gpus = 8, .h = 64 * (1 + k / 100), .L = 1 + k % 100, .a = 8, .s = 512, .dp = 8,
                             .tp = 1, .pp = 1, .cp = 1, .gbs = 8, .measured_s = 1.0};
        pred[i] = i < M ? 1.0 : 1.5;   /* APE 0 then 50: each group's mape is 25 */
    }
    StatsGroup *g;
    int n = stats_groups_rows(rows, 2 * M, pred, STATS_BY_MODEL_GPUS, &g);
    assert_int_equal(n, M);
    for (int k = 0; k < M; k++) {
        char want[128];
        snprintf(want, sizeof want, "h%d L%d a8 s512, 8 GPUs", 64 * (1 + k / 100), 1 + k % 100);
        assert_string_equal(g[k].key, want);
        assert_int_equal(g[k].st.n, 2);
        assert_near(g[k].st.mape, 25, 1e-9);
    }
    free(g);
    free(rows);
    free(pred);
}


/* ---- number text: validate --json prints numbers itself, and its bytes
 * must stay what cJSON_Print gave (scripts and tests compare them) ---------- */

static uint64_t rnd_state = 88172645463325252ULL;
static uint64_t rnd(void)   /* xorshift64: the same values every run */
{
    rnd_state ^= rnd_state << 13;
    rnd_state ^= rnd_state >> 7;
    rnd_state ^= rnd_state << 17;
    return rnd_state;
}

/* stats_json_number against cJSON's own text of the number, and stats_fmt_fixed against snprintf */
static void check_number(double d)
{
    cJSON *j = cJSON_CreateNumber(d);
    assert_non_null(j);
    char *want = cJSON_PrintUnformatted(j), got[32];
    assert_non_null(want);
    int n = stats_json_number(d, got);
    if (strcmp(want, got) || n != (int)strlen(got)) {
        print_error("json number %.17g: cJSON \"%s\", stats_json_number \"%s\" (%d)\n", d, want, got, n);
        fail();
    }
    free(want);
    cJSON_Delete(j);
    for (int p = 0; p <= 3; p++) {
        char w[400], g[400];
        snprintf(w, sizeof w, "%.*f", p, d);
        n = stats_fmt_fixed(d, p, g, sizeof g);
        if (strcmp(w, g) || n != (int)strlen(g)) {
            print_error("%%.%df of %.17g: printf \"%s\", stats_fmt_fixed \"%s\" (%d)\n", p, d, w, g, n);
            fail();
        }
    }
}

static void test_number_text(void **st)
{
    (void)st;
    /* the awkward ones by name: cJSON's integer path and its saturation at
     * INT_MAX, -0, NaN and infinities (null), 15 digits that read back only
     * within DBL_EPSILON (0.30000000000000004 prints "0.3"), 17-digit
     * fallbacks (1/3), ties at the 15th digit (1000000000000005: half to
     * even), exponents of one, two and three digits, subnormals */
    const double named[] = {1e-300, 0.1, 1.0 / 3, 123456789012345678.0, -0.0, 0.0, 1e21, NAN, -NAN, INFINITY,
                            -INFINITY, 2147483647.0, 2147483648.0, -2147483648.0, -2147483649.0, 1e15, 1e16,
                            1000000000000005.0, 1000000000000015.0, 0.30000000000000004, 1.0000000000000002,
                            9007199254740993.0, 0.125, 0.375, 2.5, 0.005, 1.005, 0.0001, 0.00001, 0.00012345,
                            5e-324, 2.2250738585072014e-308, 1.7976931348623157e308, 99999999999999.99,
                            9.9999999999999999e22, 123.456, -7.25, 1e100, 1e-100, 100.0 / 7, 6.02214076e23};
    for (size_t i = 0; i < sizeof named / sizeof *named; i++)
        check_number(named[i]);
    /* and many: any bit pattern, validate's kind of values (ms, percentages), integers to 2^63 */
    for (int i = 0; i < 200000; i++) {
        uint64_t r = rnd();
        double d;
        switch (i % 5) {
        case 0: memcpy(&d, &r, sizeof d); break;
        case 1: d = (double)(r % 100000000) / 100.0; break;
        case 2: d = ldexp((double)(r >> 11), -53) * pow(10, (int)(rnd() % 40) - 20); break;
        case 3: d = (double)(int64_t)(r >> (rnd() % 64)); break;
        default: d = ldexp((double)(r >> 11), (int)(rnd() % 200) - 150) * (rnd() & 1 ? -1 : 1); break;
        }
        check_number(d);
    }
}

/* The selection and radix sort behind stats_summarize and stats_spearman
 * against the definitions (a full sort) on values with many ties. */
static int cmp_dbl(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void naive_ranks(const double *x, int n, double *rk)
{
    for (int i = 0; i < n; i++) {
        int less = 0, eq = 0;
        for (int j = 0; j < n; j++) {
            less += x[j] < x[i];
            eq += x[j] == x[i];
        }
        rk[i] = less + (eq + 1) / 2.0;   /* the mean of positions less+1 .. less+eq */
    }
}

static void test_stats_against_sorting(void **st)
{
    (void)st;
    enum { N = 3000 };
    double *x = malloc(N * sizeof *x), *y = malloc(N * sizeof *y), *s = malloc(N * sizeof *s);
    double *rx = malloc(N * sizeof *rx), *ry = malloc(N * sizeof *ry);
    assert_true(x && y && s && rx && ry);
    const int sizes[] = {1, 2, 3, 7, 32, 33, 100, 999, N};
    for (size_t t = 0; t < sizeof sizes / sizeof *sizes; t++) {
        int n = sizes[t];
        for (int i = 0; i < n; i++) {
            x[i] = (double)(rnd() % 50) * (rnd() % 3 ? 1.5 : -0.25);   /* ties, negatives, zeros */
            y[i] = (double)(rnd() % 1000) / 7.0;
        }
        memcpy(s, x, (size_t)n * sizeof *s);
        qsort(s, (size_t)n, sizeof *s, cmp_dbl);
        ApeStats a;
        stats_summarize(x, n, &a);
        double pm = 0.5 * (n - 1), pp = 0.9 * (n - 1);
        int im = (int)floor(pm), ip = (int)floor(pp);
        double med = im >= n - 1 ? s[n - 1] : s[im] + (pm - im) * (s[im + 1] - s[im]);
        double p90 = ip >= n - 1 ? s[n - 1] : s[ip] + (pp - ip) * (s[ip + 1] - s[ip]);
        assert_true(a.median == med);   /* the same order statistics: equal, not near */
        assert_true(a.p90 == p90);
        assert_true(a.max == s[n - 1]);
        naive_ranks(x, n, rx);
        naive_ranks(y, n, ry);
        double mx = 0, my = 0, sxy = 0, sxx = 0, syy = 0;
        for (int i = 0; i < n; i++) {
            mx += rx[i];
            my += ry[i];
        }
        mx /= n;
        my /= n;
        for (int i = 0; i < n; i++) {
            sxy += (rx[i] - mx) * (ry[i] - my);
            sxx += (rx[i] - mx) * (rx[i] - mx);
            syy += (ry[i] - my) * (ry[i] - my);
        }
        double want = n < 2 || !(sxx > 0 && syy > 0) ? 0 : sxy / sqrt(sxx * syy);
        assert_true(stats_spearman(x, y, n) == want);
    }
    free(x);
    free(y);
    free(s);
    free(rx);
    free(ry);
}

/* stats_groups_compact is stats_groups_rows without the keys: the key is its first row's */
static void test_groups_compact(void **st)
{
    (void)st;
    enum { N = 4000 };
    StatsRow *rows = calloc(N, sizeof *rows);
    double *pred = calloc(N, sizeof *pred);
    assert_true(rows && pred);
    for (int i = 0; i < N; i++) {
        int tp = 1 << (rnd() % 3), dp = 1 << (rnd() % 4);
        rows[i] = (StatsRow){.gpus = tp * dp, .h = 1024 * (1 + (int)(rnd() % 4)), .L = 24, .a = 16, .s = 2048,
                             .dp = dp, .tp = tp, .pp = 1, .cp = 1, .gbs = 64 << (rnd() % 2),
                             .measured_s = 0.1 + (double)(rnd() % 100) / 100};
        if (i % 7 == 0)
            rows[i].params_b = 1.3 + (double)(rnd() % 3) * 1e-6;   /* one "1.3B" model */
        pred[i] = rows[i].measured_s * (0.8 + (double)(rnd() % 40) / 100);
    }
    for (int k = 0; k < STATS_GROUP_COUNT; k++) {
        StatsGroup *g;
        StatsGroupStats *c;
        int n = stats_groups_rows(rows, N, pred, (StatsGroupKind)k, &g);
        assert_true(n > 0);
        assert_int_equal(stats_groups_compact(rows, N, pred, (StatsGroupKind)k, &c), n);
        int total = 0;
        for (int i = 0; i < n; i++) {
            char key[sizeof g->key];
            stats_row_key(&rows[c[i].first], (StatsGroupKind)k, key, sizeof key);
            assert_string_equal(key, g[i].key);
            assert_memory_equal(&c[i].st, &g[i].st, sizeof c[i].st);
            assert_true(c[i].spearman == g[i].spearman && c[i].regret == g[i].regret);
            /* the first row of the group: no earlier row has its key */
            for (int j = 0; j < c[i].first; j++) {
                char other[sizeof g->key];
                stats_row_key(&rows[j], (StatsGroupKind)k, other, sizeof other);
                assert_true(strcmp(other, key) != 0);
            }
            total += g[i].st.n;
        }
        assert_int_equal(total, N);
        free(g);
        free(c);
    }
    free(rows);
    free(pred);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_vtrain_rows),   cmocka_unit_test(test_ultraplan_rows),
        cmocka_unit_test(test_bad_rows),      cmocka_unit_test(test_missing_file),
        cmocka_unit_test(test_stats),         cmocka_unit_test(test_spearman_and_regret),
        cmocka_unit_test(test_groups),        cmocka_unit_test(test_ranking_groups),
        cmocka_unit_test(test_tokens_per_gpu),
        cmocka_unit_test(test_stack_layout_fields),
        cmocka_unit_test(test_zero2_pp_row_stack),
        cmocka_unit_test(test_mem_column), cmocka_unit_test(test_spreadsheet_csv),
        cmocka_unit_test(test_rank_ties),     cmocka_unit_test(test_groups_by_hand),
        cmocka_unit_test(test_many_groups),   cmocka_unit_test(test_number_text),
        cmocka_unit_test(test_stats_against_sorting), cmocka_unit_test(test_groups_compact),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
