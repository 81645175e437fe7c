/* test_band.c — the error band (calib/band.h) on synthetic residuals, where
 * every answer is known by hand: type-6 percentiles, the nearest-run rule
 * (GPU before dimensions before size, at most BAND_PER_SOURCE from one
 * file), the band's step/MFU arithmetic, the leave-one-file-out and
 * leave-one-run-out coverage counts, the table's text round trip and errors,
 * and that the embedded table parses. Not the corpus's numbers. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "band.h"
#include "layout.h"

static int fails;
#define CHECK(c, ...)                                                                                                  \
    do {                                                                                                               \
        if (!(c)) {                                                                                                    \
            fails++;                                                                                                   \
            printf("FAIL %s:%d: ", __FILE__, __LINE__);                                                                \
            printf(__VA_ARGS__);                                                                                       \
            printf("\n");                                                                                              \
        }                                                                                                              \
    } while (0)
#define NEAR(a, b) (fabs((a) - (b)) < 1e-9)

static BandRun run(const char *src, const char *gpu, int tp, int pp, int dp, double pb, double r)
{
    BandRun x = {.line = 2, .gpus = tp * pp * dp, .tp = tp, .pp = pp, .dp = dp, .cp = 1, .ep = 1, .zero = 1,
                 .params_b = pb, .seq = 2048, .predicted_s = 10.0};
    x.measured_s = x.predicted_s * (1 + r);
    snprintf(x.source, sizeof x.source, "%s", src);
    snprintf(x.gpu, sizeof x.gpu, "%s", gpu);
    return x;
}

static void test_percentile(void)
{
    double v[9] = {9, 1, 8, 2, 7, 3, 6, 4, 5};   /* sorted 1..9; type 6: position p(n+1) = p·10 */
    CHECK(NEAR(band_percentile(v, 9, 10), 1), "p10 of 1..9 is the 1st value");
    CHECK(NEAR(band_percentile(v, 9, 90), 9), "p90 of 1..9 is the 9th value");
    CHECK(NEAR(band_percentile(v, 9, 50), 5), "median 5");
    CHECK(NEAR(band_percentile(v, 9, 25), 2.5), "p25: position 2.5 -> 2.5, got %g", band_percentile(v, 9, 25));
    double w[4] = {4, 1, 3, 2};                  /* positions 0.5 and 4.5 clamp to the extremes */
    CHECK(NEAR(band_percentile(w, 4, 10), 1) && NEAR(band_percentile(w, 4, 90), 4), "clamped");
    double one = 7;
    CHECK(NEAR(band_percentile(&one, 1, 10), 7), "one value");
    CHECK(band_percentile(NULL, 0, 50) == 0, "none");
}

static void test_select(void)
{
    BandTable t = {0};
    /* 6 h100 runs of file A, tp 8 pp 8, sizes 1..6 B; 6 of file B (h100) likewise; 6 h200 (same generation);
     * 6 a100 with the query's dims and size exactly */
    for (int i = 0; i < 6; i++) {
        BandRun a = run("A.csv", "h100-sxm", 8, 8, 4, 1 + i, 0.01 * i);
        BandRun b = run("B.csv", "h100-sxm", 1, 1, 64, 1 + i, 0.02 * i);
        BandRun c = run("C.csv", "h200", 8, 8, 4, 1 + i, 0.03 * i);
        BandRun d = run("D.csv", "a100-80g", 8, 8, 4, 1, 0.04 * i);
        band_table_add(&t, &a);
        band_table_add(&t, &b);
        band_table_add(&t, &c);
        band_table_add(&t, &d);
    }
    BandQuery q = {.gpu = "h100-sxm", .tp = 8, .pp = 8, .dp = 4, .cp = 1, .ep = 1, .zero = 1, .params_b = 1};
    int idx[64];
    int n = band_select(&t, &q, 12, NULL, -1, idx);
    CHECK(n == 12, "12 selected, got %d", n);
    int per[4] = {0};
    for (int i = 0; i < n; i++)
        per[t.r[idx[i]].source[0] - 'A']++;
    /* the cap (2): A, B (same GPU), C (same generation), D (another) 2 each, then the nearest of the rest:
     * A's next 4 (same GPU and dims) */
    CHECK(per[0] == 6 && per[1] == 2 && per[2] == 2 && per[3] == 2, "A %d B %d C %d D %d", per[0], per[1], per[2],
          per[3]);
    /* within A the smallest models first: sizes 1, 2 in the first pass */
    for (int i = 0; i < 2; i++)
        CHECK(!strcmp(t.r[idx[i]].source, "A.csv") && NEAR(t.r[idx[i]].params_b, 1 + i), "A in size order");
    /* leaving A out: B's 2 (same GPU, other dims), C's 2 (same generation), D's 2: the cap reaches another
     * generation before a third run of one file; then the nearest of the rest: B's other 4, C's next 2 */
    n = band_select(&t, &q, 12, "A.csv", -1, idx);
    int c = 0, d = 0, ab = 0, bb = 0;
    for (int i = 0; i < n; i++) {
        c += t.r[idx[i]].source[0] == 'C';
        d += t.r[idx[i]].source[0] == 'D';
        ab += t.r[idx[i]].source[0] == 'A';
        bb += t.r[idx[i]].source[0] == 'B';
    }
    CHECK(n == 12 && ab == 0, "A left out, %d selected", n);
    CHECK(bb == 6 && c == 4 && d == 2, "B %d C %d D %d (want 6, 4, 2)", bb, c, d);
    /* only two files left (C, D): the cap lifts after 4 and the nearest of the rest fill, C's (same
     * generation) before D's */
    BandTable t2 = {0};
    for (int i = 0; i < t.n; i++)
        if (t.r[i].source[0] >= 'C')
            band_table_add(&t2, &t.r[i]);
    n = band_select(&t2, &q, 12, NULL, -1, idx);
    c = 0;
    for (int i = 0; i < n; i++)
        c += t2.r[idx[i]].source[0] == 'C';
    CHECK(n == 12 && c == 6, "C %d of %d (want 6 of 12)", c, n);
    band_table_free(&t2);
    band_table_free(&t);
}

/* The rule's constants (NOTES step 26): a band of 16 runs, at most 2 from one file, so a prediction's band
 * spans 8 files where the table has them. Ten files of three identical runs each (same GPU, layout, size;
 * file F_i's residual i %): the band takes 2 runs from each of the first 8 files in table order and none
 * of the last two; its type-6 10..90 % of the 16 values 0,0,1,1,...,7,7 % (positions 1.7 and 15.3, each
 * between two equal values) is [0, 7] %. Under the former rule (12 runs, 4 a file) it was 4 each of F0,
 * F1, F2 and [0, 2] %: a band three files wide. */
static void test_rule_constants(void)
{
    CHECK(BAND_K == 16 && BAND_PER_SOURCE == 2, "k %d cap %d", BAND_K, BAND_PER_SOURCE);
    BandTable t = {0};
    for (int f = 0; f < 10; f++)
        for (int j = 0; j < 3; j++) {
            char name[16];
            snprintf(name, sizeof name, "F%d.csv", f);
            BandRun r = run(name, "h100-sxm", 8, 1, 8, 70, 0.01 * f);
            band_table_add(&t, &r);
        }
    BandQuery q = {.gpu = "h100-sxm", .tp = 8, .pp = 1, .dp = 8, .cp = 1, .ep = 1, .zero = 1, .params_b = 70};
    int idx[64], per[10] = {0};
    int n = band_select(&t, &q, BAND_K, NULL, -1, idx);
    for (int i = 0; i < n; i++)
        per[t.r[idx[i]].source[1] - '0']++;
    CHECK(n == 16, "16 selected, got %d", n);
    for (int f = 0; f < 10; f++)
        CHECK(per[f] == (f < 8 ? 2 : 0), "F%d: %d runs", f, per[f]);
    Band b;
    CHECK(band_of(&t, &q, BAND_K, NULL, -1, 10.0, 0.5, 1000, &b) == 0 && b.runs == 16, "band of 16");
    CHECK(fabs(b.q_lo) < 1e-9 && fabs(b.q_hi - 0.07) < 1e-9, "q %g %g (want 0, 0.07)", b.q_lo, b.q_hi);
    band_table_free(&t);
}

static void test_band_arith(void)
{
    BandTable t = {0};
    for (int i = 0; i < 9; i++) {   /* residuals -0.1 .. +0.3 in steps of 0.05, three files */
        BandRun r = run(i % 3 == 0 ? "X.csv" : i % 3 == 1 ? "Y.csv" : "Z.csv", "b200", 4, 1, 8, 10, -0.1 + 0.05 * i);
        band_table_add(&t, &r);
    }
    BandQuery q = {.gpu = "b200", .tp = 4, .pp = 1, .dp = 8, .cp = 1, .ep = 1, .zero = 1, .params_b = 10};
    Band b;
    CHECK(band_of(&t, &q, 12, NULL, -1, 20.0, 0.5, 1000, &b) == 0, "band_of");
    CHECK(b.runs == 9 && b.same_gpu == 9 && b.same_gen == 9, "9 runs");
    /* type 6 on 9 values: p10 at position 1 = -0.1, p90 at 9 = +0.3 */
    CHECK(NEAR(b.q_lo, -0.1) && NEAR(b.q_hi, 0.3), "q %g %g", b.q_lo, b.q_hi);
    CHECK(NEAR(b.step_lo, 18) && NEAR(b.step_hi, 26), "step %g-%g", b.step_lo, b.step_hi);
    CHECK(NEAR(b.mfu_lo, 0.5 / 1.3) && NEAR(b.mfu_hi, 0.5 / 0.9), "mfu %g-%g", b.mfu_lo, b.mfu_hi);
    CHECK(NEAR(b.tok_lo, 1000 / 1.3) && NEAR(b.tok_hi, 1000 / 0.9), "tokens");
    CHECK(strstr(b.sources, "X.csv 3") && strstr(b.sources, "Z.csv 3"), "sources \"%s\"", b.sources);
    Band none;
    BandTable empty = {0};
    CHECK(band_of(&empty, &q, 12, NULL, -1, 20, 0.5, 1000, &none) == 0 && none.runs == 0, "empty table: no band");
    band_table_free(&t);
}

/* Coverage counted by hand: two files, P with residuals 0..9 % (10 runs), Q with 20..29 % (10 runs), one GPU,
 * one layout. k = 12 > 10, so leaving a file out the band is the other file's whole range (type 6 on 10 values:
 * positions 1.1 and 9.9): P held out -> [20.1, 28.9] %: every P run is below it, 0 inside; Q held out ->
 * [0.1, 8.9] %: all above. Leaving one run out: the other 19 with at most 4 of the other file first... */
/* The band names every file its runs came from, whole: 16 runs at most 2 a
 * file are up to 8 files, and corpus names run to 40 characters (the
 * "sources" text was 160 bytes and cut the eighth name in plan's footer) */
/* The sample is each file's bias plus the files' scatter (band.h). Two files
 * of 5 runs: A's two runs of the query's shape at 0 %, its three of another
 * pipeline depth at -20, 0, +20 %; B the same shifted by +2 %. k = 4 takes
 * the two of each file in the query's shape. Biases 0 and 0.02; each file's
 * scatter about its median is -0.2, 0, 0, 0, 0.2, read at 20 midpoint ranks
 * floor((j + 0.5)·5/20): each of the 5 four times, so the pooled scatter is
 * -0.2 ×8, 0 ×24, +0.2 ×8 and the 80 values sort as -0.2 ×8, -0.18 ×8,
 * 0 ×24, 0.02 ×24, 0.2 ×8, 0.22 ×8. Type 6: p10 at 8.1 = -0.2 + 0.1·0.02 =
 * -0.198, p90 at 72.9 = 0.2 + 0.9·0.02 = 0.218. The old rule, percentiles of
 * the four selected residuals {0, 0, 0.02, 0.02}, gave [0, 0.02]: a band
 * that the files' own runs fall outside of. */
static void test_scatter(void)
{
    BandTable t = {0};
    const double a[5] = {0, 0, -0.2, 0.2, 0};
    for (int f = 0; f < 2; f++)
        for (int i = 0; i < 5; i++) {
            BandRun r = run(f ? "B.csv" : "A.csv", "h100-sxm", 8, i < 2 ? 1 : 2, 8, 70, a[i] + 0.02 * f);
            band_table_add(&t, &r);
        }
    BandQuery q = {.gpu = "h100-sxm", .tp = 8, .pp = 1, .dp = 8, .cp = 1, .ep = 1, .zero = 1, .params_b = 70};
    Band b;
    CHECK(band_of(&t, &q, 4, NULL, -1, 10.0, 0.5, 1000, &b) == 0 && b.runs == 4, "band of 4");
    CHECK(NEAR(b.q_lo, -0.198) && NEAR(b.q_hi, 0.218), "q %g %g (want -0.198, 0.218)", b.q_lo, b.q_hi);
    band_table_free(&t);
}

static void test_sources_whole(void)
{
    BandTable t = {0};
    char names[8][48];
    for (int f = 0; f < 8; f++) {
        snprintf(names[f], sizeof names[f], "moe_corpus_of_generation_%d_published.csv", f);
        for (int i = 0; i < 2; i++) {
            BandRun r = run(names[f], "b200", 4, 1, 8, 10, 0.01 * (f * 2 + i));
            band_table_add(&t, &r);
        }
    }
    BandQuery q = {.gpu = "b200", .tp = 4, .pp = 1, .dp = 8, .cp = 1, .ep = 1, .zero = 1, .params_b = 10};
    Band b;
    CHECK(band_of(&t, &q, 16, NULL, -1, 20.0, 0.5, 1000, &b) == 0 && b.runs == 16, "band_of, 16 runs");
    for (int f = 0; f < 8; f++) {
        char want[96];
        snprintf(want, sizeof want, "%.47s 2", names[f]);
        CHECK(strstr(b.sources, want) != NULL, "source %d named whole in \"%s\"", f, b.sources);
    }
    band_table_free(&t);
}

static void test_coverage(void)
{
    BandTable t = {0};
    for (int i = 0; i < 10; i++) {
        BandRun p = run("P.csv", "h100-sxm", 8, 1, 8, 70, 0.01 * i);
        BandRun q = run("Q.csv", "h100-sxm", 8, 1, 8, 70, 0.20 + 0.01 * i);
        band_table_add(&t, &p);
        band_table_add(&t, &q);
    }
    BandCoverage cov[4], all;
    int ns = band_coverage(&t, 12, true, cov, 4, &all);
    CHECK(ns == 2, "two sources, got %d", ns);
    CHECK(!strcmp(cov[0].source, "P.csv") && cov[0].n == 10 && cov[0].inside == 0 && cov[0].below == 10,
          "P: n %d inside %d below %d", cov[0].n, cov[0].inside, cov[0].below);
    CHECK(cov[1].n == 10 && cov[1].inside == 0 && cov[1].above == 10, "Q: inside %d above %d", cov[1].inside,
          cov[1].above);
    CHECK(all.n == 20 && all.inside == 0, "all: %d of %d", all.inside, all.n);

    /* one file, residuals 0..19 % in order of the table; leave-one-run-out with k = 19 (all others): one file,
     * so the sample is the other 19 read at 20 midpoint ranks (ranks 1..19, the 19th twice) moved by their mean
     * less their median, which is within 0.06 points of 0. Type 6 on 20: position 2.1 (between the 2nd and 3rd
     * of the others) and 18.9. Run i is inside iff it is not among the two smallest or two largest of all 20:
     * run 0 against 0.021, run 1 against 0.0205, run 2 (0.02) against 0.011; symmetric above. 16 of 20. */
    BandTable u = {0};
    for (int i = 0; i < 20; i++) {
        BandRun r = run("S.csv", "a100-80g", 1, 1, 8, 1, 0.01 * i);
        band_table_add(&u, &r);
    }
    ns = band_coverage(&u, 19, false, cov, 4, &all);
    CHECK(ns == 1 && all.n == 20, "n %d", all.n);
    CHECK(all.inside == 16 && all.below == 2 && all.above == 2, "loo: inside %d below %d above %d", all.inside,
          all.below, all.above);
    band_table_free(&t);
    band_table_free(&u);
}

static void test_text(void)
{
    BandTable t = {0};
    BandRun r = run("A.csv", "gb200", 4, 4, 8, 175, 0.125);
    r.zero = 3;
    r.cp = 2;
    snprintf(r.stack, sizeof r.stack, "nemo");
    char *buf = NULL;
    size_t len = 0, cap = 0;
    CHECK(band_append_header(&buf, &len, &cap) == 0 && band_append_row(&buf, &len, &cap, &r) == 0, "append");
    char err[256];
    CHECK(band_table_parse(buf, "mem", &t, err, sizeof err) == 0, "parse: %s", err);
    CHECK(t.n == 1 && t.r[0].zero == 3 && t.r[0].cp == 2 && !strcmp(t.r[0].stack, "nemo") &&
              fabs(band_residual(&t.r[0]) - 0.125) < 1e-5,
          "round trip");
    free(buf);
    static const char *const bad[] = {
        "source,line\nA,1\n",
        "source,line,gpu,stack,gpus,tp,pp,dp,cp,ep,zero,params_b,seq,measured_ms,predicted_ms,err_step_pct,err_mfu_pct\n"
        "A,2,h100,,8,x,1,8,1,1,0,1,2048,10,10,0,0\n",
        "source,line,gpu,stack,gpus,tp,pp,dp,cp,ep,zero,params_b,seq,measured_ms,predicted_ms,err_step_pct,err_mfu_pct\n"
        "A,2,h100,,8,1,1,8,1,1,0,1,2048,0,10,0,0\n",
        "# only a comment\n",
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        int n0 = t.n;
        CHECK(band_table_parse(bad[i], "bad", &t, err, sizeof err) == -1 && t.n == n0 && !strncmp(err, "bad", 3),
              "bad table %zu refused: %s", i, err);
    }
    band_table_free(&t);
    const BandTable *b = band_table_builtin();
    CHECK(b && b->n > 0, "the embedded table parses");
}

/* band_of_cost keeps the last query's runs and percentiles: every answer,
 * kept or not, is the one computed afresh (field by field, the ranges to the
 * last bit: the same arithmetic on the same numbers), a repeat of the query
 * with another step is a reuse, and a change of any of the query's inputs
 * (GPU, stack, a parallel dim, ZeRO class, model size) is not. */
static bool same_band(const Band *a, const Band *b)
{
    return a->runs == b->runs && a->q_lo == b->q_lo && a->q_hi == b->q_hi && a->step_lo == b->step_lo &&
           a->step_hi == b->step_hi && a->mfu_lo == b->mfu_lo && a->mfu_hi == b->mfu_hi && a->tok_lo == b->tok_lo &&
           a->tok_hi == b->tok_hi && a->same_gpu == b->same_gpu && a->same_gen == b->same_gen &&
           !strcmp(a->sources, b->sources) && !strcmp(a->rule, b->rule);
}

static void test_cache(void)
{
    ModelSpec m = {.name = "t", .L = 96, .h = 12288, .a = 96, .g = 96, .f = 49152, .vocab = 50257, .s = 2048,
                   .mlp = MLP_GELU, .norm = NORM_LAYERNORM, .pos = POS_LEARNED};
    HwProfile hw = {.name = "h100-sxm"};
    Layout lo;
    layout_default(&lo);
    lo.tp = 8;
    lo.pp = 8;
    lo.dp = 8;
    Cost c = {.step_s = 10};
    c.thr.mfu = 0.5;
    c.thr.tokens_per_s = 4e5;
    Band kept, fresh;
    /* each step changes one input of the query (or none: a reuse) */
    struct { const char *what; int reuse; } steps[] = {
        {"first", 0},  {"step 12 s", 1}, {"tp 4", 0},      {"same again, step 9 s", 1}, {"a100-80g", 0},
        {"stack", 0},  {"distopt", 0},   {"7B shape", 0},  {"pp 1", 0},                 {"cp 2", 0},
    };
    for (size_t i = 0; i < sizeof steps / sizeof *steps; i++) {
        switch (i) {
        case 1: c.step_s = 12; break;
        case 2: lo.tp = 4; break;
        case 3: c.step_s = 9, c.thr.mfu = 0.4, c.thr.tokens_per_s = 3e5; break;
        case 4: snprintf(hw.name, sizeof hw.name, "a100-80g"); break;
        case 5: snprintf(hw.stack, sizeof hw.stack, "nemo"); break;
        case 6: lo.opt = OPT_DISTOPT; break;
        case 7: m.L = 32, m.h = 4096, m.a = 32, m.g = 32, m.f = 16384; break;
        case 8: lo.pp = 1; break;
        case 9: lo.cp = 2; break;
        }
        long h0 = band_cache_hits();
        CHECK(band_of_cost(&m, &hw, &lo, &c, &kept) == 0 && band_of_cost_uncached(&m, &hw, &lo, &c, &fresh) == 0,
              "%s: band computed", steps[i].what);
        CHECK(kept.runs > 0, "%s: the shipped table gives a band", steps[i].what);
        CHECK(same_band(&kept, &fresh), "%s: kept and fresh bands differ (%g-%g vs %g-%g s)", steps[i].what,
              kept.step_lo, kept.step_hi, fresh.step_lo, fresh.step_hi);
        CHECK(band_cache_hits() - h0 == steps[i].reuse, "%s: %s", steps[i].what,
              steps[i].reuse ? "not reused" : "reused across a changed query");
    }
}

int main(void)
{
    test_percentile();
    test_select();
    test_rule_constants();
    test_band_arith();
    test_scatter();
    test_sources_whole();
    test_coverage();
    test_text();
    test_cache();
    printf("%d failure(s)\n", fails);
    return fails ? 1 : 0;
}
