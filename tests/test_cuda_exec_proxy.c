/* test_cuda_exec_proxy.c — the stage proxy's arithmetic, no GPU needed: the
 * parameters the proxy builds for one tp rank of stage S (params.h's table
 * with tp-sharded shapes) equal what the cost model counts
 * (memory_stage_params), per layer and per stage, first, middle and last
 * stages, GPT and Llama (GQA, SwiGLU); the prediction splits into compute
 * and communication; the rank's FLOPs per token (the proxy's MFU) match its
 * own GEMM shapes and sum over stages and tp ranks to the model's; bad stages
 * are refused with a reason; cuplan_expert_local inverts the expert
 * layers' rank folding (etp fastest, then ep, then edp over a stage's
 * tp·cp·dp ranks; dist_init_experts makes the coordinates). The new layouts' proxies:
 * an MoE stage holds E/ep experts and routes top-k over them (refused with
 * biases, etp > 1, or E/ep below top-k), its prediction counts the EP
 * all-to-all as communication and ignores the plan's imbalance (the
 * proxy's routing is even); a cp stage holds seq/cp tokens (refused when
 * 2·cp does not divide seq) and its ring's exposed time is communication. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "presets.h"
#include "profile.h"
#include "cuplan.h"
#include "proxy.h"

static int fails;
#define CHECK(cond, ...) do { if (!(cond)) { fails++; printf("FAIL: " __VA_ARGS__); printf("\n"); } } while (0)

static int near(double a, double b) { return fabs(a - b) <= 1e-9 * fmax(1.0, fabs(b)); }

/* Training FLOPs per token of one rank counted from its own GEMM shapes:
 * QKV, proj, FC1, FC2 and QK^T + AV (full square unless causal) per layer,
 * the LM head on the last stage; x3 for forward + backward. */
static double rank_flops(const ProxyShape *sh, int causal)
{
    double C = sh->C, gemm = C * (sh->ql + 2.0 * sh->kvl) + sh->ql * C + C * sh->F1l + sh->Fl * C;
    double attn = 2.0 * sh->T * sh->ql * (causal ? 0.5 : 1.0);
    double fwd = sh->layers * 2.0 * (gemm + attn) + (sh->last ? 2.0 * C * sh->Vl : 0);
    return 3.0 * fwd;
}

static void check_model(const char *name, int tp, int pp, int vp)
{
    char err[512];
    ModelSpec m;
    HwProfile hw;
    if (presets_find(name, &m, err, sizeof err) != 0 || profile_load_builtin("h200", &hw, err, sizeof err) != 0) {
        CHECK(0, "%s: %s", name, err);
        return;
    }
    m.dropout = false;
    Layout lo;
    layout_default(&lo);
    lo.tp = tp, lo.pp = pp, lo.vp = vp, lo.dp = 1, lo.sp = tp > 1, lo.mbs = 1, lo.gbs = 4 * pp;
    if (layout_check(&lo, &m, &hw, err, sizeof err) != 0) {
        CHECK(0, "%s tp %d pp %d: layout_check: %s", name, tp, pp, err);
        return;
    }
    lo.full_rc[pp / 2] = lo.layers[pp / 2] / 2;
    double fsum = 0;
    for (int s = 0; s < pp; s++) {
        ProxyShape sh;
        if (proxy_shape(&m, &lo, s, &sh, err, sizeof err) != 0) {
            CHECK(0, "%s stage %d: %s", name, s, err);
            continue;
        }
        int n = lo.layers[s];
        double per_layer = memory_stage_params(&m, &lo, s, 1) - memory_stage_params(&m, &lo, s, 0);
        CHECK(sh.layers == n, "%s stage %d: %d layers, the plan has %d", name, s, sh.layers, n);
        CHECK(near(sh.layer_params, per_layer), "%s tp %d stage %d: %.0f params per layer, cost model %.0f", name, tp,
              s, sh.layer_params, per_layer);
        CHECK(near(sh.stage_params, memory_stage_params(&m, &lo, s, n)),
              "%s tp %d stage %d: %.0f params on the stage, cost model %.0f", name, tp, s, sh.stage_params,
              memory_stage_params(&m, &lo, s, n));
        CHECK(sh.first == (s == 0) && sh.last == (s == pp - 1), "%s stage %d: first/last wrong", name, s);
        CHECK(sh.ql * tp == spec_q_width(&m) && sh.kvl * tp == spec_kv_width(&m) && sh.Fl * tp == m.f,
              "%s tp %d: sharded widths %d %d %d", name, tp, sh.ql, sh.kvl, sh.Fl);
        CHECK(sh.full_rc == lo.full_rc[s], "%s stage %d: recompute %d, plan %d", name, s, sh.full_rc, lo.full_rc[s]);
        ProxyPredict p;
        proxy_predict(&m, &hw, &lo, s, &p);
        CHECK(p.compute_mb_s > 0 && p.comm_mb_s >= 0 && near(p.compute_mb_s + p.comm_mb_s, p.stage_mb_s),
              "%s stage %d: prediction %.3g = %.3g + %.3g", name, s, p.stage_mb_s, p.compute_mb_s, p.comm_mb_s);
        CHECK(p.edge_mb_s > -1e-12 && (s == 0 || s == pp - 1 || p.edge_mb_s < 1e-12 * p.stage_mb_s + 1e-15),
              "%s stage %d: embedding/head time %.3g on a middle stage", name, s, p.edge_mb_s);
        CHECK(tp == 1 || p.comm_mb_s > 0, "%s stage %d: tp %d but no communication predicted", name, s, tp);
        double fpt = proxy_flops_per_token(&m, &lo, s), want = rank_flops(&sh, lo.flops == FLOPS_CAUSAL);
        CHECK(near(fpt, want), "%s tp %d stage %d: %.6g FLOPs per token, the rank's shapes give %.6g", name, tp, s,
              fpt, want);
        fsum += fpt * tp;
    }
    CHECK(near(fsum, train_model_flops_per_token(&m, &lo)), "%s tp %d pp %d: stages sum to %.6g FLOPs per token, "
          "the model %.6g", name, tp, pp, fsum, train_model_flops_per_token(&m, &lo));
    lo.flops = FLOPS_6N;   // other conventions: the same split of their total
    fsum = 0;
    for (int s = 0; s < pp; s++)
        fsum += proxy_flops_per_token(&m, &lo, s) * tp;
    CHECK(near(fsum, train_model_flops_per_token(&m, &lo)), "%s 6n: stages sum to %.6g, the model %.6g", name, fsum,
          train_model_flops_per_token(&m, &lo));
    lo.flops = FLOPS_FULL_ATTN;
    ProxyShape sh;
    CHECK(proxy_shape(&m, &lo, pp, &sh, err, sizeof err) != 0 && strstr(err, "stages 0.."),
          "%s: stage %d out of range not refused (%s)", name, pp, err);
}

/* Megatron-core's folding written out (etp fastest, then ep, then edp over
 * the stage index L = tp_rank + tp·(cp_rank + cp·dp_rank)): cuplan_expert_local
 * maps every rank's coordinates back to its L, once each */
static void check_fold(int tp, int cp, int dp, int ep, int etp)
{
    int n = tp * cp * dp, edp = n / (ep * etp), seen[4096] = {0};
    for (int L = 0; L < n; L++) {
        int er = L % etp, pr = L / etp % ep, dr = L / (etp * ep);
        CHECK(dr < edp, "fold tp %d cp %d dp %d ep %d etp %d: rank %d has edp rank %d", tp, cp, dp, ep, etp, L, dr);
        int back = cuplan_expert_local(ep, etp, er, pr, dr);
        CHECK(back == L, "fold back %d -> %d", L, back);
        if (back >= 0 && back < n)
            seen[back]++;
    }
    for (int L = 0; L < n; L++)
        CHECK(seen[L] == 1, "fold: rank %d seen %d times", L, seen[L]);
}

/* an MoE stage: its experts and widths, the refusals by field */
static void check_moe(void)
{
    ModelSpec m;
    HwProfile hw;
    char err[256] = "";
    if (presets_find("gpt3-1.3b", &m, err, sizeof err) != 0 || profile_load_builtin("h200", &hw, err, sizeof err)) {
        CHECK(0, "gpt3-1.3b / h200: %s", err);
        return;
    }
    m.experts = 8, m.topk = 2, m.moe_ffn = m.f / 2, m.moe_freq = 1, m.shared_ffn = m.f / 4, m.bias = false;
    Layout lo;
    layout_default(&lo);
    lo.ep = 2, lo.etp = 1, lo.dp = 16, lo.tp = 2, lo.sp = true, lo.mbs = 1, lo.gbs = 64;
    CHECK(layout_check(&lo, &m, &hw, err, sizeof err) == 0, "MoE layout: %s", err);
    ProxyShape sh;
    CHECK(proxy_shape(&m, &lo, 0, &sh, err, sizeof err) == 0, "MoE proxy: %s", err);
    CHECK(sh.moe && sh.El == 4 && sh.K == 2 && sh.Fe == m.f / 2 && sh.Fs == m.f / 8 && sh.cp == 1,
          "MoE proxy shapes: El %d K %d Fe %d Fs %d", sh.El, sh.K, sh.Fe, sh.Fs);
    ProxyPredict p, q;   /* tp 2 within a node, ep over 32 GPUs: every MoE layer's all-to-all is communication */
    proxy_predict(&m, &hw, &lo, 0, &p);
    CHECK(p.comm_mb_s > 0 && p.compute_mb_s > 0 && p.compute_mb_s < p.stage_mb_s, "MoE predict: comm %g compute %g",
          p.comm_mb_s, p.compute_mb_s);
    Layout l2 = lo;
    l2.moe_imbalance = 2.0;   // the plan's imbalance does not reach the proxy's prediction
    proxy_predict(&m, &hw, &l2, 0, &q);
    CHECK(near(p.compute_mb_s, q.compute_mb_s), "MoE predict: imbalance 2 changed compute %g -> %g", p.compute_mb_s,
          q.compute_mb_s);
    ModelSpec b = m;
    b.bias = true;
    CHECK(proxy_shape(&b, &lo, 0, &sh, err, sizeof err) == -1 && strstr(err, "\"bias\": true"), "biased MoE: %s",
          err);
    Layout l8 = lo;
    l8.ep = 8;   // one expert per rank, top 2
    CHECK(proxy_shape(&m, &l8, 0, &sh, err, sizeof err) == -1 && strstr(err, "\"topk\": 2"), "E/ep < k: %s", err);
    Layout le = lo;
    le.etp = 2;
    CHECK(proxy_shape(&m, &le, 0, &sh, err, sizeof err) == -1 && strstr(err, "\"etp\": 2"), "etp 2: %s", err);
}

/* a context-parallel stage: seq/cp tokens, the ring's exposed time as communication */
static void check_cp(void)
{
    ModelSpec m;
    HwProfile hw;
    char err[256] = "";
    if (presets_find("llama2-7b", &m, err, sizeof err) != 0 || profile_load_builtin("h200", &hw, err, sizeof err)) {
        CHECK(0, "llama2-7b / h200: %s", err);
        return;
    }
    Layout lo;
    layout_default(&lo);
    lo.cp = 4, lo.dp = 2, lo.mbs = 1, lo.gbs = 8;
    CHECK(layout_check(&lo, &m, &hw, err, sizeof err) == 0, "cp layout: %s", err);
    ProxyShape sh;
    CHECK(proxy_shape(&m, &lo, 0, &sh, err, sizeof err) == 0, "cp proxy: %s", err);
    CHECK(sh.cp == 4 && sh.T == m.s / 4 && sh.N == sh.T, "cp proxy: cp %d T %d N %d", sh.cp, sh.T, sh.N);
    ProxyPredict p;
    proxy_predict(&m, &hw, &lo, 0, &p);
    CHECK(p.compute_mb_s > 0 && p.comm_mb_s > 0 && p.compute_mb_s < p.stage_mb_s, "cp predict: compute %g comm %g",
          p.compute_mb_s, p.comm_mb_s);
    lo.cp = 3;   // 2·3 does not divide 4096
    CHECK(proxy_shape(&m, &lo, 0, &sh, err, sizeof err) == -1 && strstr(err, "\"cp\": 3"), "cp 3: %s", err);
}

int main(void)
{
    check_fold(2, 1, 4, 4, 1);   // etp 1: ep runs over tp and dp ranks
    check_fold(2, 2, 2, 2, 2);   // etp = tp, cp folded into ep/edp
    check_fold(4, 1, 2, 2, 2);
    check_fold(1, 1, 8, 8, 1);
    check_moe();
    check_cp();
    check_model("gpt3-175b", 8, 16, 1);
    check_model("gpt3-175b", 8, 8, 3);
    check_model("llama2-70b", 8, 4, 1);
    check_model("llama2-7b", 2, 2, 1);
    check_model("gpt3-1.3b", 1, 1, 1);
    printf("test_cuda_exec_proxy: %s (%d failures)\n", fails ? "FAIL" : "ok", fails);
    return fails != 0;
}
