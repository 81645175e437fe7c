/* test_executor.c — the whole model's gradients against central finite
 * differences of its loss (single rank, MPI singleton), for GPT and Llama
 * and a mixture of experts (loss + load-balancing loss; router, shared and
 * routed experts; also with expert groups), multi-head latent attention
 * (with and without q compression), multi-token prediction (two modules) and a DeepSeek-shaped
 * model (MLA, experts, one MTP module), and what MLA and MTP refuse; the
 * MoE router (top-k, group-limited top-k, its softmax and their backward,
 * capacity) against naive references and finite differences; and the
 * schedules' shape.
 * Returns non-zero on any failed check. */
#include <math.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "exec.h"
#include "moe.h"

static int fails;
#define CHECK(cond, ...) do { if (!(cond)) { fails++; printf("FAIL: " __VA_ARGS__); printf("\n"); } } while (0)

static double loss_at(Exec *e, DataPos p0)
{
    char err[256];
    StepStats st;
    data_set_pos(&e->dl, p0, err, sizeof err);
    e->step = 0;
    if (exec_step(e, &st, err, sizeof err) != 0)
        printf("step: %s\n", err);
    return st.loss + st.aux_loss + st.mtp_loss;   // the objective (aux 0 for a dense model, mtp 0 without MTP)
}

/* (L(w + h) − L(w − h)) / 2h for parameter i. */
static double central_difference(Exec *e, DataPos p0, size_t i, float h)
{
    float w0 = e->ps.w[i];
    e->ps.w[i] = w0 + h;
    double lp = loss_at(e, p0);
    e->ps.w[i] = w0 - h;
    double lm = loss_at(e, p0);
    e->ps.w[i] = w0;
    return (lp - lm) / (2.0 * h);
}

/* "layer 1 kv_a.w": the tensor that float i of the parameter slab belongs to. */
static const char *tensor_name(const Exec *e, size_t i)
{
    static char buf[64];
    for (int l = 0; l < e->ps.nlayers; l++)
        for (int id = 0; id < P_LAYER_COUNT; id++) {
            size_t o = e->ps.layer_off[l][id];
            if (o != PARAM_NONE && i >= o && i < o + e->ps.layer_len[l][id]) {
                snprintf(buf, sizeof buf, "layer %d %s", e->ps.glayer[l], param_desc[id].name);
                return buf;
            }
        }
    for (int id = P_LAYER_COUNT; id < P_COUNT; id++)
        if (e->ps.off[id] != PARAM_NONE && i >= e->ps.off[id] && i < e->ps.off[id] + e->ps.len[id])
            return param_desc[id].name;
    return "padding";
}

static void grad_check(const char *kind, const char *data)
{
    ModelSpec m;
    memset(&m, 0, sizeof m);
    m.L = 2, m.h = 16, m.a = 2, m.s = 8, m.vocab = 256, m.vocab_div = 1;
    if (!strcmp(kind, "llama"))
        m.g = 1, m.f = 32, m.mlp = MLP_SWIGLU, m.norm = NORM_RMSNORM, m.pos = POS_ROPE;
    else if (!strcmp(kind, "moe"))   /* llama-shaped, 4 experts top 2, a shared expert, layer 0 dense */
        m.g = 1, m.f = 32, m.mlp = MLP_SWIGLU, m.norm = NORM_RMSNORM, m.pos = POS_ROPE, m.L = 3, m.experts = 4,
        m.topk = 2, m.moe_ffn = 16, m.shared_ffn = 16, m.moe_freq = 1, m.moe_first_dense = 1;
    else if (!strcmp(kind, "moegroups"))   /* as "moe" with 8 experts in 4 pairs: a token's top 2 from 1 pair */
        m.g = 1, m.f = 32, m.mlp = MLP_SWIGLU, m.norm = NORM_RMSNORM, m.pos = POS_ROPE, m.L = 3, m.experts = 8,
        m.topk = 2, m.moe_ffn = 16, m.shared_ffn = 16, m.moe_freq = 1, m.moe_first_dense = 1, m.router_groups = 4,
        m.router_group_topk = 1;
    else if (!strncmp(kind, "mla", 3))   /* llama-shaped; v narrower than q·k, "mla0" without q compression */
        m.f = 32, m.mlp = MLP_SWIGLU, m.norm = NORM_RMSNORM, m.pos = POS_ROPE, m.attn = ATTN_MLA,
        m.q_lora_rank = strcmp(kind, "mla0") ? 8 : 0, m.kv_lora_rank = 8, m.qk_nope_dim = 6, m.qk_rope_dim = 4,
        m.v_head_dim = 6;
    else if (!strcmp(kind, "window"))   /* llama-shaped, layer 0 a 2-key-back window, layer 1 full (GPT-OSS's pattern) */
        m.g = 1, m.f = 32, m.mlp = MLP_SWIGLU, m.norm = NORM_RMSNORM, m.pos = POS_ROPE, m.window = 2,
        m.window_skip_freq = 2;
    else if (!strcmp(kind, "sinks"))   /* GPT-OSS's layer: as "window", with sinks and the clamped quick-GEGLU */
        m.g = 1, m.f = 32, m.mlp = MLP_SWIGLU, m.norm = NORM_RMSNORM, m.pos = POS_ROPE, m.window = 2,
        m.window_skip_freq = 2, m.sinks = true, m.act_clamp = 7;
    else if (!strcmp(kind, "mtp"))   /* llama-shaped, two MTP modules (the second reads the first's output) */
        m.g = 1, m.f = 32, m.mlp = MLP_SWIGLU, m.norm = NORM_RMSNORM, m.pos = POS_ROPE, m.mtp_layers = 2;
    else if (!strcmp(kind, "deepseek"))   /* MLA, layer 0 dense, experts with a shared one, one MTP module */
        m.f = 32, m.mlp = MLP_SWIGLU, m.norm = NORM_RMSNORM, m.pos = POS_ROPE, m.attn = ATTN_MLA, m.q_lora_rank = 8,
        m.kv_lora_rank = 8, m.qk_nope_dim = 6, m.qk_rope_dim = 4, m.v_head_dim = 6, m.L = 2, m.experts = 4,
        m.topk = 2, m.moe_ffn = 16, m.shared_ffn = 16, m.moe_freq = 1, m.moe_first_dense = 1, m.mtp_layers = 1;
    else
        m.g = 2, m.f = 64, m.bias = true, m.tied = true;
    char err[256];
    spec_validate(&m, err, sizeof err);
    Layout lo;
    layout_default(&lo);
    lo.prec = PREC_FP32, lo.mbs = 2, lo.gbs = 2;
    layout_check(&lo, &m, NULL, err, sizeof err);
    TrainOpts o;
    exec_default_opts(&o);
    o.lr = 0;   // AdamW with lr 0 leaves the weights alone; the step leaves the gradients in g
    o.moe_aux_coeff = 0.1;   // large enough that the load-balancing gradient shows
    o.mtp_scale = 1.0;       // and the MTP modules'
    Exec e;
    if (exec_init(&e, &m, &lo, &o, data, err, sizeof err) != 0) {
        CHECK(0, "exec_init: %s", err);
        return;
    }
    DataPos p0 = data_get_pos(&e.dl);
    if (e.mla)   /* attention far from uniform, so q and k get gradients worth checking */
        for (int l = 0; l < e.ps.nlayers; l++)
            for (int id = P_QAW; id <= P_KVBW; id++)
                if (e.ps.layer_off[l][id] != PARAM_NONE && param_desc[id].init == INIT_NORMAL)
                    for (size_t j = 0; j < e.ps.layer_len[l][id]; j++)
                        e.ps.w[e.ps.layer_off[l][id] + j] *= 15.0f;
    loss_at(&e, p0);
    size_t n = e.ps.n_alloc;   // the routed experts too
    float g[n];
    memcpy(g, e.ps.g, sizeof g);
    /* the largest gradient of each of 40 spans; MLA and MTP: also of each
     * MLA or MTP tensor of each layer, and of kv_a's shared-key rows */
    size_t cand[80][2];
    int nc = 0;
    for (size_t i = 0; i < n; i += n / 40 + 1)
        cand[nc][0] = i, cand[nc][1] = i + n / 40 < n ? i + n / 40 : n, nc++;
    for (int l = 0; (e.mla || e.nmtp) && l < e.ps.nlayers; l++)
        for (int id = P_QAW; id <= P_MTPFN + 1; id++) {
            ParamId t = id == P_MTPFN + 1 ? P_PROJW : (ParamId)id;
            size_t o = e.ps.layer_off[l][t], len = e.ps.layer_len[l][t];
            if (o == PARAM_NONE)
                continue;
            cand[nc][0] = o, cand[nc][1] = o + len, nc++;
            if (t == P_KVAW)   /* rows kv_lora .. kv_lora + rope: the RoPE key */
                cand[nc][0] = o + (size_t)e.kr * e.C, cand[nc][1] = o + len, nc++;
        }
    for (int l = 0; l < e.ps.nlayers; l++)   /* each layer's sinks (two floats: no span would pick them) */
        if (e.ps.layer_off[l][P_SINK] != PARAM_NONE)
            for (size_t j = 0; j < e.ps.layer_len[l][P_SINK]; j++)
                cand[nc][0] = e.ps.layer_off[l][P_SINK] + j, cand[nc][1] = cand[nc][0] + 1, nc++;
    int checked = 0, bad = 0, kinks = 0, sinks_checked = 0;
    for (int c = 0; c < nc; c++) {
        size_t best = cand[c][0];
        for (size_t j = cand[c][0]; j < cand[c][1]; j++)
            if (fabsf(g[j]) > fabsf(g[best]))
                best = j;
        /* a sink's gradient is small (a share of one logit in each row's
         * softmax, times dout·out): a larger step keeps fp32 rounding of the
         * loss (~2e-6) under 1 % of it, and the loss is smooth in the sink */
        bool sink = strstr(tensor_name(&e, best), "attn.sinks") != NULL;   /* "layer.N.attn.sinks"; "wte" is short */
        /* MLA, MTP: fp32 rounding of the loss is ~1e-4 of a gradient at the small step */
        if (fabsf(g[best]) < (sink ? 5e-5f : e.mla || e.nmtp ? 2e-3f : 1e-3f))
            continue;
        /* MoE: a smaller step, so the top-k choice does not flip inside it;
         * MLA: so the sharper attention stays near linear over it */
        int small = e.E > 0 || e.mla;
        float w0 = e.ps.w[best], h = (sink ? 0.2f : small ? 1e-3f : 1e-2f) * fmaxf(1.0f, fabsf(w0));
        double fd = central_difference(&e, p0, best, h);
        /* MoE with MTP, MLA or expert groups: a routing flip inside the step
         * shows as a difference that changes with the step; such points are
         * skipped (a group flip moves a token by more than a near-tie) */
        if (e.E > 0 && (e.mla || e.nmtp || m.router_groups > 0)) {
            double fd2 = central_difference(&e, p0, best, h / 2);
            if (fabs(fd - fd2) > 0.05 * fmax(fabs(fd), fabs(fd2)) + 1e-4) {
                kinks++;
                continue;
            }
        }
        double rel = fabs(fd - g[best]) / fmax(fabs(fd), fabs(g[best]));
        checked++;
        sinks_checked += sink;
        /* the smaller step: allow fp32 rounding of 1e-4 in its difference */
        if (rel > 0.05 && !(small && fabs(fd - g[best]) < 1e-4)) {
            bad++;
            printf("  %s param %zu (%s): analytic %.6g, finite difference %.6g (rel %.3f)\n", kind, best,
                   tensor_name(&e, best), g[best], fd, rel);
        }
    }
    CHECK(kinks <= checked / 4, "%s: %d points skipped for a step-dependent difference, %d checked", kind, kinks,
          checked);
    CHECK(checked >= 10 && bad == 0, "%s: %d of %d gradients off by more than 5 %%", kind, bad, checked);
    CHECK(!m.sinks || sinks_checked >= 2, "%s: %d sink gradients checked", kind, sinks_checked);
    printf("%s: %d gradients match finite differences (%d skipped)\n", kind, checked - bad, kinks);
    exec_free(&e);
}

/* ---- group-limited routing against a naive reference ------------------ */

typedef struct {
    float v;
    int i;
} Ranked;

/* larger value first, then the lower index */
static int ranked_cmp(const void *a, const void *b)
{
    const Ranked *x = a, *y = b;
    if (x->v != y->v)
        return x->v > y->v ? -1 : 1;
    return (x->i > y->i) - (x->i < y->i);
}

/* One token by sorting, as the rule reads: each group's logits sorted, the
 * top k / Kg summed; the groups sorted by that sum; the experts outside the
 * first Kg groups set to -inf; all experts sorted, the first k taken. */
static void naive_group_topk(const float *z, int E, int k, int G, int Kg, int *top)
{
    int per = E / G;
    Ranked r[64], gr[64];
    for (int g = 0; g < G; g++) {
        for (int j = 0; j < per; j++)
            r[j] = (Ranked){z[g * per + j], j};
        qsort(r, (size_t)per, sizeof *r, ranked_cmp);
        float sum = 0;
        for (int j = 0; j < k / Kg; j++)
            sum += r[j].v;
        gr[g] = (Ranked){sum, g};
    }
    qsort(gr, (size_t)G, sizeof *gr, ranked_cmp);
    for (int e = 0; e < E; e++) {
        int in = 0;
        for (int j = 0; j < Kg; j++)
            in |= gr[j].i == e / per;
        r[e] = (Ranked){in ? z[e] : -INFINITY, e};
    }
    qsort(r, (size_t)E, sizeof *r, ranked_cmp);
    for (int j = 0; j < k; j++)
        top[j] = r[j].i;
}

static void group_router_checks(void)
{
    /* by hand: groups {0,1} {2,3} {4,5} {6,7}, top 2 of 4 groups, k 4, so a
     * group scores its top 2: 0, 4, 3, 0. Groups 1 and 2 win, and expert 0,
     * the largest logit, is not routed to (plain top-4 takes 0, 2, 3, 4). */
    {
        float z[8] = {5, -5, 2, 2, 1.5f, 1.5f, 0, 0}, p[8], ix[4], w[4];
        moe_route_groups(z, 1, 8, 4, 4, 2, p, ix, w);
        double a = exp(2.0), b = exp(1.5);
        CHECK((int)ix[0] == 2 && (int)ix[1] == 3 && (int)ix[2] == 4 && (int)ix[3] == 5 &&
                  fabs(w[0] - a / (2 * a + 2 * b)) < 1e-6 && fabs(w[3] - b / (2 * a + 2 * b)) < 1e-6 &&
                  fabs(p[0] - exp(5.0) / (exp(5.0) + exp(-5.0) + 2 * a + 2 * b + 2)) < 1e-6,
              "group-limited top-4: experts %g %g %g %g, weights %g .. %g", ix[0], ix[1], ix[2], ix[3], w[0], w[3]);
    }
    /* random logits, fine (few ties) and coarse (3 levels: ties everywhere,
     * in expert and in group scores), over shapes with k / Kg of 0, 1, 2 */
    static const struct {
        int E, k, G, Kg;
    } shapes[] = {{8, 2, 4, 2}, {8, 4, 4, 2}, {16, 4, 8, 2}, {16, 6, 4, 3}, {8, 1, 4, 2}, {12, 3, 3, 1}, {64, 8, 8, 4}};
    unsigned x = 12345;
    int bad = 0, rows = 0;
    for (size_t c = 0; c < sizeof shapes / sizeof shapes[0]; c++)
        for (int coarse = 0; coarse < 2; coarse++) {
            enum { N = 40 };
            int E = shapes[c].E, k = shapes[c].k, G = shapes[c].G, Kg = shapes[c].Kg;
            float z[N * 64], p[N * 64], ix[N * 8], w[N * 8];
            for (int i = 0; i < N * E; i++) {
                x = x * 1103515245u + 12345u;
                z[i] = coarse ? (float)((x >> 8) % 3) - 1.0f : ((x >> 8) % 1000) / 250.0f - 2.0f;
            }
            moe_route_groups(z, N, E, k, G, Kg, p, ix, w);
            for (int t = 0; t < N; t++, rows++) {
                int top[8], ok = 1;
                naive_group_topk(z + t * E, E, k, G, Kg, top);
                double s = 0, ws = 0;
                for (int j = 0; j < k; j++)
                    ok &= (int)ix[t * k + j] == top[j], s += exp(z[t * E + top[j]]);
                for (int j = 0; j < k; j++)
                    ok &= fabs(w[t * k + j] - exp(z[t * E + top[j]]) / s) < 1e-5, ws += w[t * k + j];
                ok &= fabs(ws - 1) < 1e-5;
                if (!ok && bad++ < 3)
                    printf("  E %d k %d groups %d/%d row %d: expert %g, reference %d\n", E, k, Kg, G, t, ix[t * k],
                           top[0]);
            }
        }
    CHECK(bad == 0, "group-limited top-k: %d of %d rows differ from the reference", bad, rows);
    /* one group, or E groups of one expert with Kg = k: plain top-k */
    {
        enum { N = 30, E = 8, K = 3 };
        float z[N * E], p[N * E], ix[N * K], w[N * K], p1[N * E], ix1[N * K], w1[N * K], ixe[N * K], we[N * K];
        for (int i = 0; i < N * E; i++) {
            x = x * 1103515245u + 12345u;
            z[i] = (float)((x >> 8) % 4);   /* ties */
        }
        moe_route(z, N, E, K, p, ix, w);
        moe_route_groups(z, N, E, K, 1, 1, p1, ix1, w1);
        moe_route_groups(z, N, E, K, E, K, p1, ixe, we);
        CHECK(!memcmp(ix, ix1, sizeof ix) && !memcmp(w, w1, sizeof w) && !memcmp(p, p1, sizeof p),
              "one group routes as plain top-k");
        CHECK(!memcmp(ix, ixe, sizeof ix) && !memcmp(w, we, sizeof w), "groups of one expert, Kg = k: plain top-k");
    }
    printf("router: group-limited top-k checked on %d rows\n", rows);
}

/* The router against a naive top-k, its backward against finite
 * differences of L = Σ dw·w + Σ dp·p, and the capacity rule. */
static void router_checks(void)
{
    enum { N = 6, E = 5, K = 2 };
    float z[N * E], p[N * E], ix[N * K], w[N * K];
    unsigned x = 7;
    for (int i = 0; i < N * E; i++) {
        x = x * 1103515245u + 12345u;
        z[i] = ((x >> 8) % 1000) / 250.0f - 2.0f;
    }
    z[0] = z[1] = 1.5f, z[2] = z[3] = z[4] = -1.0f;   /* row 0: a tie at the top */
    moe_route(z, N, E, K, p, ix, w);
    CHECK((int)ix[0] == 0 && (int)ix[1] == 1 && fabsf(w[0] - 0.5f) < 1e-6f, "ties go to the lower expert");
    for (int t = 0; t < N; t++) {
        double s = 0;
        for (int e = 0; e < E; e++)
            s += p[t * E + e];
        int a = (int)ix[t * K], b = (int)ix[t * K + 1];
        int ok = a != b && fabs(s - 1) < 1e-5;
        for (int e = 0; e < E; e++)   /* nobody outside the top 2 beats them */
            if (e != a && e != b)
                ok &= z[t * E + e] <= z[t * E + b] && z[t * E + b] <= z[t * E + a];
        double ea = exp(z[t * E + a]), eb = exp(z[t * E + b]);
        ok &= fabs(w[t * K] - ea / (ea + eb)) < 1e-5 && fabs(w[t * K + 1] - eb / (ea + eb)) < 1e-5;
        CHECK(ok, "router row %d: top-2 and its softmax", t);
    }
    float dw[N * K], dp[N * E], dz[N * E];
    for (int i = 0; i < N * K; i++)
        dw[i] = 0.3f * (float)((i * 7) % 5) - 0.6f;
    for (int i = 0; i < N * E; i++)
        dp[i] = 0.2f * (float)((i * 3) % 7) - 0.5f;
    moe_route_bwd(dz, p, ix, w, dw, dp, N, E, K);
    int bad = 0;
    for (int i = 0; i < N * E; i++) {
        if (i / E == 0)
            continue;   /* the tied row: a perturbation flips the top-k */
        double l[2];
        for (int sgn = 0; sgn < 2; sgn++) {
            float zz[N * E], pp[N * E], ii[N * K], ww[N * K];
            memcpy(zz, z, sizeof zz);
            zz[i] += sgn ? -1e-3f : 1e-3f;
            moe_route(zz, N, E, K, pp, ii, ww);
            double v = 0;
            for (int j = 0; j < N * K; j++)
                v += (double)dw[j] * ww[j] * ((int)ii[j] == (int)ix[j]);
            for (int j = 0; j < N * E; j++)
                v += (double)dp[j] * pp[j];
            l[sgn] = v;
        }
        double fd = (l[0] - l[1]) / 2e-3;
        if (fabs(fd - dz[i]) > 2e-3 + 1e-2 * fabs(fd))
            bad++, printf("  router dlogit %d: analytic %.6g, finite difference %.6g\n", i, dz[i], fd);
    }
    CHECK(bad == 0, "router backward: %d logits off", bad);
    /* capacity 0.5: ceil(0.5·6·2/5) = 2 slots per expert, the highest weights kept */
    int keep[N * K], per[E] = {0};
    moe_capacity(keep, ix, w, N, E, K, 0.5);
    int ok = 1;
    for (int j = 0; j < N * K; j++)
        if (keep[j])
            per[(int)ix[j]]++;
    for (int e = 0; e < E; e++) {
        ok &= per[e] <= 2;
        for (int a = 0; a < N * K; a++)   /* a dropped pair never outweighs a kept one of its expert */
            for (int b = 0; b < N * K; b++)
                if ((int)ix[a] == e && (int)ix[b] == e && !keep[a] && keep[b])
                    ok &= w[a] <= w[b];
    }
    CHECK(ok, "capacity keeps at most 2 per expert, by weight");
    moe_capacity(keep, ix, w, N, E, K, 0);
    for (int j = 0; j < N * K; j++)
        ok &= keep[j] == 1;
    CHECK(ok, "dropless keeps every pair");
    printf("router: top-k, backward and capacity checked\n");
}

/* The window and the clamped activation are applied: the same weights and
 * batch give another loss with layer 0 windowed (a query of 8 sees 3 keys)
 * than fully causal, and with GPT-OSS's quick-GEGLU than with SwiGLU. */
static void window_differs(const char *data)
{
    double loss[3];
    for (int w = 0; w < 3; w++) {
        ModelSpec m;
        memset(&m, 0, sizeof m);
        m.L = 2, m.h = 16, m.a = 2, m.g = 1, m.s = 8, m.vocab = 256, m.vocab_div = 1, m.f = 32;
        m.mlp = MLP_SWIGLU, m.norm = NORM_RMSNORM, m.pos = POS_ROPE;
        m.window = w == 1 ? 2 : 0, m.window_skip_freq = w == 1 ? 2 : 0, m.act_clamp = w == 2 ? 7 : 0;
        char err[256];
        spec_validate(&m, err, sizeof err);
        Layout lo;
        layout_default(&lo);
        lo.prec = PREC_FP32, lo.mbs = 2, lo.gbs = 2;
        layout_check(&lo, &m, NULL, err, sizeof err);
        TrainOpts o;
        exec_default_opts(&o);
        o.lr = 0;
        Exec e;
        if (exec_init(&e, &m, &lo, &o, data, err, sizeof err) != 0) {
            CHECK(0, "exec_init: %s", err);
            return;
        }
        for (size_t i = 0; i < e.ps.n_alloc; i++)   /* sharp attention, so the mask matters */
            e.ps.w[i] *= 8.0f;
        loss[w] = loss_at(&e, data_get_pos(&e.dl));
        exec_free(&e);
    }
    CHECK(fabs(loss[0] - loss[1]) > 1e-4 * fabs(loss[0]), "window: loss %.6f windowed vs %.6f causal", loss[1],
          loss[0]);
    CHECK(fabs(loss[0] - loss[2]) > 1e-4 * fabs(loss[0]), "clamp: loss %.6f quick-GEGLU vs %.6f SwiGLU", loss[2],
          loss[0]);
    printf("window: loss %.6f windowed, %.6f causal; %.6f with GPT-OSS's activation\n", loss[1], loss[0], loss[2]);
}

/* What the executor's MLA and MTP do not run is refused by name. */
static void refusals(const char *data)
{
    static const struct {
        const char *what, *expect;
    } cases[] = {
        {"mla layernorm", "needs an RMSNorm, RoPE model without biases (model.norm layernorm"},
        {"mla learned", "model.pos learned"},
        {"mla wide v", "v-head-dim 12 <= qk-nope-dim + qk-rope-dim = 10"},
        {"mtp cp", "multi-token prediction needs layout.cp 1 (got 2)"},
        {"mtp zero3", "layout.optimizer zero3 with model.mtp_layers 3"},
        {"sinks cp", "model.attn_sinks (--attn-sinks) with layout.cp 2"},
        {"window cp", "model.window 2 with layout.cp 2"},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        const char *w = cases[c].what;
        ModelSpec m;
        memset(&m, 0, sizeof m);
        m.L = 2, m.h = 16, m.a = 2, m.s = 8, m.vocab = 256, m.vocab_div = 1, m.f = 32;
        m.mlp = MLP_SWIGLU, m.norm = NORM_RMSNORM, m.pos = POS_ROPE;
        if (!strncmp(w, "mla", 3))
            m.attn = ATTN_MLA, m.q_lora_rank = 8, m.kv_lora_rank = 8, m.qk_nope_dim = 6, m.qk_rope_dim = 4,
            m.v_head_dim = 6;
        else if (!strcmp(w, "sinks cp"))
            m.sinks = true;
        else if (!strcmp(w, "window cp"))
            m.window = 2;
        else
            m.mtp_layers = strstr(w, "zero3") ? 3 : 1;
        if (strstr(w, "layernorm"))
            m.norm = NORM_LAYERNORM;
        if (strstr(w, "learned"))
            m.pos = POS_LEARNED;
        if (strstr(w, "wide v"))
            m.v_head_dim = 12;
        char err[256] = "";
        CHECK(spec_validate(&m, err, sizeof err) == 0, "%s: spec: %s", w, err);
        Layout lo;
        layout_default(&lo);
        lo.prec = PREC_FP32, lo.mbs = 2, lo.gbs = 2;
        if (strstr(w, "cp"))
            lo.cp = 2;
        if (strstr(w, "zero3"))
            lo.opt = OPT_ZERO3;
        TrainOpts o;
        exec_default_opts(&o);
        Exec e;
        int rc = exec_init(&e, &m, &lo, &o, data, err, sizeof err);
        CHECK(rc == -1 && strstr(err, cases[c].expect), "%s: refused with \"%s\" (rc %d: %s)", w,
              cases[c].expect, rc, err);
        if (rc == 0)
            exec_free(&e);
    }
    printf("refusals: MLA, MTP, sinks and window limits named\n");
}

static void sched_checks(void)
{
    char err[128];
    Schedule s;
    /* 1F1B: stage 0 of 4 warms up with 3 forwards and holds at most 4 */
    sched_build(&s, 4, 0, 8, 1, err, sizeof err);
    CHECK(s.n == 16 && s.a[0].kind == ACT_FWD && s.a[3].kind == ACT_FWD && s.a[4].kind == ACT_BWD &&
          s.a[5].kind == ACT_FWD && s.max_live == 4, "1F1B stage 0 shape");
    sched_free(&s);
    sched_build(&s, 4, 3, 8, 1, err, sizeof err);
    CHECK(s.max_live == 1, "1F1B last stage holds one micro-batch");
    sched_free(&s);
    CHECK(sched_build(&s, 4, 0, 6, 2, err, sizeof err) != 0, "interleaving needs m %% pp == 0");
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    char path[] = "/tmp/test_executor_XXXXXX";
    int fd = mkstemp(path);
    FILE *f = fdopen(fd, "w");
    for (int i = 0; i < 4000; i++)
        fputc("the quick brown fox jumps over the lazy dog. "[i % 45], f);
    fclose(f);
    sched_checks();
    grad_check("gpt", path);
    grad_check("llama", path);
    router_checks();
    group_router_checks();
    grad_check("moe", path);
    grad_check("moegroups", path);
    grad_check("mla", path);
    grad_check("mla0", path);
    grad_check("window", path);
    grad_check("sinks", path);
    window_differs(path);
    grad_check("mtp", path);
    grad_check("deepseek", path);
    refusals(path);
    remove(path);
    MPI_Finalize();
    printf("%s\n", fails ? "FAILED" : "ok");
    return fails ? 1 : 0;
}
