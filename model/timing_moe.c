/* timing_moe.c — seconds of a mixture-of-experts layer's own parts
 * (docs/COSTMODEL.md §4.6): the all-to-all and the token dispatchers
 * (alltoall, allgather, flex), the nodes a token's copies reach, the
 * experts' MLP (router, permutation, grouped GEMMs, shared expert, fp8
 * casts and padding), the biased experts' passes, the host sync of dropless
 * routing, and an MoE layer's total. time_layer (timing.c) assembles an MoE
 * layer from these and the attention part it shares with a dense layer. */
#include "timing.h"

#include <math.h>

#include "timing_internal.h"

double time_alltoall(const HwProfile *hw, double bytes, int n, int k)
{
    if (n <= 1 || bytes <= 0)
        return 0;
    if (k > n)
        k = n;
    if (k < 1)
        k = 1;
    /* each rank sends bytes/n to every other: (k-1)/n of its buffer over
     * NVLink, (n-k)/n over its NIC, both at once (the slower sets the pace) */
    double in = (double)(k - 1) / n * bytes / hw->intra.bw;
    double out = k < n ? (double)(n - k) / n * bytes / hw->inter.bw : 0.0;
    return (k < n ? hw->inter.lat : hw->intra.lat) + fmax(in, out);
}

double time_coll_alltoall(const HwProfile *hw, double bytes, int n, int k)
{
    if (n <= 1 || bytes <= 0)
        return 0;
    double eff = hw->a2a_eff > 0 ? hw->a2a_eff : coll_eff(hw);
    HwProfile v = *hw;
    v.intra.bw *= eff;
    v.inter.bw *= eff;
    return (hw->a2a_lat > 0 ? hw->a2a_lat : hw->coll_lat) + time_alltoall(&v, bytes, n, k);
}

/* Bytes an element of an all-to-all in `wire`: the activations' own dtype
 * (bf16; fp32 when training in fp32), or MXFP8's fp8 byte and E8M0 (one-byte)
 * scale a 32-element block. */
static double wire_bytes(const Layout *lo, MoeWire wire)
{
    if (wire == MOE_WIRE_MXFP8)
        return 1.0 + 1.0 / 32.0;
    return lo->prec == PREC_FP32 ? 4.0 : 2.0;
}

double time_moe_dispatch_bytes_wire(const ModelSpec *m, const Layout *lo, MoeWire wire)
{
    if (!spec_is_moe(m) || lo->ep <= 1)
        return 0;
    /* the rows this rank's experts receive (layout_moe_rows, the busiest
     * rank's) came from ep ranks of which ep-1 are remote; in the activations'
     * dtype (Megatron's dispatchers keep it) unless the wire is MXFP8 */
    double rows = layout_moe_rows(m, lo) / layout_etp(lo) * lo->tp * layout_sp_share(lo);
    return wire_bytes(lo, wire) * rows * m->h;
}

double time_moe_dispatch_bytes(const ModelSpec *m, const Layout *lo)
{
    return time_moe_dispatch_bytes_wire(m, lo, MOE_WIRE_BF16);
}

static double binom(double n, double k)
{
    return k < 0 || k > n ? 0 : exp(lgamma(n + 1) - lgamma(k + 1) - lgamma(n - k + 1));
}

/* The nodes one token's top-k copies land on, expected, over an EP group
 * spanning N nodes that each hold E/N contiguous experts (Megatron places
 * experts in order over the EP ranks, the ranks in order over the nodes).
 * Routing is taken as uniform over the experts it may choose (the rows are
 * force-balanced), with replacement, as the copies' count below assumes.
 * Unlimited: N·(1 - (1 - 1/N)^k). Group-limited routing (G groups, a token
 * in its best K_g, Megatron's --moe-router-num-groups/--moe-router-group-topk,
 * DeepSeek-V3 report §3.2: "each token will be sent to at most M nodes"):
 *  - G a multiple of N (groups inside nodes, G/N a node): j of the K_g
 *    chosen groups lie in a node with the hypergeometric law
 *    C(G/N, j)·C(G - G/N, K_g - j) / C(G, K_g), and the node is missed with
 *    probability (1 - j/K_g)^k; D = N·(1 - Σ_j P(j)·(1 - j/K_g)^k).
 *    DeepSeek-V3 over 8 nodes (G = N = 8, K_g = 4, k = 8): 3.60 nodes, not 5.25.
 *  - N a multiple of G (a group spans N/G nodes): the copies fall on the
 *    K_g·N/G nodes of the chosen groups, D = n·(1 - (1 - 1/n)^k), n = K_g·N/G.
 *  - otherwise (groups straddle nodes unevenly) no bound is taken. */
double time_moe_token_nodes(const ModelSpec *m, int N)
{
    double k = m->topk, G = m->router_groups, Kg = m->router_group_topk;
    if (N <= 1)
        return 1.0;
    double unlimited = N * (1.0 - pow(1.0 - 1.0 / N, k));
    if (G <= 1 || Kg <= 0 || Kg >= G)
        return unlimited;
    if ((int)G % N == 0) {
        double per = G / N, miss = 0;
        for (int j = 0; j <= (int)fmin(per, Kg); j++)
            miss += binom(per, j) * binom(G - per, Kg - j) / binom(G, Kg) * pow(1.0 - j / Kg, k);
        return N * (1.0 - miss);
    }
    if (N % (int)G == 0) {
        double n = Kg * N / G;
        return n * (1.0 - pow(1.0 - 1.0 / n, k));
    }
    return unlimited;
}

double time_moe_a2a_wire_s(const ModelSpec *m, const HwProfile *hw, const Layout *lo, MoeWire wire)
{
    double bytes = time_moe_dispatch_bytes_wire(m, lo, wire);
    if (bytes <= 0)
        return 0;
    int n = lo->ep, k = time_ep_members_per_node(hw, lo);
    double eff = hw->a2a_eff > 0 ? hw->a2a_eff : coll_eff(hw);
    double lat = hw->a2a_lat > 0 ? hw->a2a_lat : hw->coll_lat;
    /* the tokens this GPU routes (its SP shard), before top-k, in the wire's dtype */
    double ab = wire_bytes(lo, wire);
    double tok = layout_mb_tokens(m, lo) * layout_sp_share(lo);
    switch (lo->moe_dispatcher) {
    case MOE_DISPATCH_ALLGATHER:
        /* every rank's tokens gathered over the group (and the combine's reduce-scatter the same size) */
        return time_coll_allgather(hw, ab * tok * m->h * n, n, k);
    case MOE_DISPATCH_FLEX: {
        int N = (n + k - 1) / k;   /* nodes the EP group spans */
        if (N <= 1)
            break;                 /* one NVLink domain: the all-to-all below */
        /* the load factor on the busiest rank, as in the rows */
        double load = bytes / (ab * tok * m->topk * m->h);
        double remote = time_moe_token_nodes(m, N) * (N - 1) / N;   /* by symmetry, D/N of them local */
        double nic = load * ab * tok * m->h * remote;
        double nvl = bytes * (k - 1) / k;   /* every copy fanned out to its GPU in the node */
        return lat + hw->inter.lat + fmax(nic / (hw->inter.bw * eff), nvl / (hw->intra.bw * eff));
    }
    case MOE_DISPATCH_ALLTOALL:
    default: break;
    }
    return time_coll_alltoall(hw, bytes, n, k);
}

double time_moe_a2a_s(const ModelSpec *m, const HwProfile *hw, const Layout *lo)
{
    return time_moe_a2a_wire_s(m, hw, lo, MOE_WIRE_BF16);
}

bool time_moe_a2a_overlap(const Layout *lo)
{
    char why[8];
    /* DualPipe pairs a forward chunk with another micro-batch's backward chunk on every rank in the
     * steady state, their all-to-alls under each other's compute, whatever the switch says */
    if (lo->pp_sched == PP_SCHED_DUALPIPE)
        return lo->ep > 1 && lo->moe_dispatcher != MOE_DISPATCH_ALLGATHER;
    return lo->moe_a2a_overlap && layout_moe_a2a_check(lo, why, sizeof why) == 0;
}

int time_ep_members_per_node(const HwProfile *hw, const Layout *lo)
{
    /* Megatron-core's expert RankGenerator, order tp-ep-dp-pp with etp as
     * tp: etp fastest, then ep */
    return time_members_per_node(hw, layout_etp(lo), lo->ep);
}

/* Whether the experts pad their rows under fp8 (COSTMODEL.md §4.6).
 * Megatron-core's TEGroupedMLP wraps the grouped GEMMs in Transformer
 * Engine's Fp8Padding / Fp8Unpadding, which copy the rows into a buffer
 * whose per-expert counts are multiples of 16 (32 for MXFP8) and the
 * output back, unless every count is one already. Dropless routing's
 * counts are not (force-balanced benchmarks draw random logits,
 * apply_random_logits), unless the router pads the routing map
 * (--moe-router-padding-for-quantization) or the dispatch pads: HybridEP
 * under fp8 (_HybridEPManager's pad_multiple; Megatron-core 0.18 skips the
 * experts' padding for it outright, skip_routed_expert_padding), which is
 * what flex is priced as. */
bool time_moe_fp8_pad(const Layout *lo)
{
    return lo->prec == PREC_FP8 && !lo->moe_router_pad && lo->moe_dispatcher != MOE_DISPATCH_FLEX;
}

/* An MoE layer's MLP part on one GPU, per micro-batch (COSTMODEL.md §4.6):
 * router GEMM tok_r x E x h (tok_r the SP shard), softmax/top-k and the aux
 * loss as memory-bound passes over tok_r x E fp32 scores; permutation
 * before and after dispatch and unpermutation before and after combine,
 * memory-bound over the rows; the routed experts as one grouped GEMM whose
 * efficiency is read at ONE expert's size (rows / local experts tokens);
 * the shared expert as a dense MLP of shared_ffn split over tp. Forward in
 * *fwd, backward (dgrad + wgrad at their own shapes) in *bwd. */
void time_moe_mlp_s(const ModelSpec *m, const HwProfile *hw, const Layout *lo, double *fwd, double *bwd)
{
    Precision p = lo->prec;
    double ab = hw_precision_bytes(p), t = lo->tp, h = m->h, E = m->experts;
    double gated = m->mlp == MLP_SWIGLU ? 2.0 : 1.0;
    double tok = layout_mb_tokens(m, lo), tok_r = tok * layout_sp_share(lo);
    double etp = layout_etp(lo), ef = (m->moe_ffn > 0 ? m->moe_ffn : m->f) / etp;
    double rows = layout_moe_rows(m, lo), local = E / lo->ep, per = rows / local;
    /* router: a small GEMM (kept in bf16 under fp8, as TE leaves it) and its fp32 passes */
    Precision pr = prec_bf16_if_fp8(hw, p);
    double f_s = linear_fwd_s(hw, pr, tok_r, E, h), b_s = linear_bwd_s(hw, pr, tok_r, E, h);
    double scores = 4.0 * tok_r * E;
    f_s += time_mem_s(hw, 4.0 * scores);   /* cast, softmax, top-k, aux-loss statistics */
    b_s += time_mem_s(hw, 4.0 * scores);
    /* permute / unpermute, read and written, both ways; the backward
     * mirrors it. alltoall (and allgather): the tok_r·topk copies sorted
     * into destination order before the exchange, the received rows into
     * expert order after it, and back on the combine. flex: the DeepEP and
     * HybridEP kernels read each token where it lies and send it to every
     * rank that wants it (Megatron's _DeepepManager / _HybridEPManager take
     * the routing map, not permuted tokens), so only the received rows are
     * sorted into expert order and back. */
    double sent = lo->moe_dispatcher == MOE_DISPATCH_FLEX ? 0.0 : tok_r * m->topk;
    double perm = 2.0 * ab * h * (sent + rows) * 2.0;
    f_s += time_mem_s(hw, perm);
    b_s += time_mem_s(hw, perm);
    /* grouped expert GEMMs: local experts of `per` rows each */
    f_s += local * (linear_fwd_s(hw, p, per, gated * ef, h) + linear_fwd_s(hw, p, per, h, ef));
    b_s += local * (linear_bwd_s(hw, p, per, gated * ef, h) + linear_bwd_s(hw, p, per, h, ef));
    double ew = ab * rows * (gated + 1.0) * ef;   /* the activation over the rows */
    if (m->shared_ffn > 0) {
        double sf = m->shared_ffn / t;
        f_s += linear_fwd_s(hw, p, tok, gated * sf, h) + linear_fwd_s(hw, p, tok, h, sf);
        b_s += linear_bwd_s(hw, p, tok, gated * sf, h) + linear_bwd_s(hw, p, tok, h, sf);
        ew += ab * tok * (gated + 1.0) * sf;
    }
    if (p == PREC_FP8) {   /* expert inputs and output gradients quantized, as for dense GEMMs */
        ew += (ab + 2.0) * rows * (h + ef);
        b_s += time_mem_s(hw, (ab + 2.0) * rows * (gated * ef + h));
        if (time_moe_fp8_pad(lo)) {
            /* the experts' rows padded to the fp8 alignment: the input copied
             * into the padded buffer and the output copied back out, read and
             * written, and their mirrors backward */
            f_s += 2.0 * time_mem_s(hw, 2.0 * ab * rows * h);
            b_s += 2.0 * time_mem_s(hw, 2.0 * ab * rows * h);
        }
        /* current scaling: each expert's slice of the four casts' inputs
         * read once more for its amax (Transformer Engine's GroupedLinear
         * keeps a quantizer per expert), a pass of per rows per expert */
        double amax, norm;
        fp8_scale_bytes(lo, ab, &amax, &norm);
        if (amax > 0 && local >= 1) {
            f_s += local * (time_mem_s(hw, amax * per * h) + time_mem_s(hw, amax * per * ef));
            b_s += local * (time_mem_s(hw, amax * per * h) + time_mem_s(hw, amax * per * gated * ef));
        }
    }
    *fwd = f_s + time_mem_s(hw, ew);
    *bwd = b_s + 2.0 * time_mem_s(hw, ew);
}

double time_moe_wgrad_s(const ModelSpec *m, const HwProfile *hw, const Layout *lo)
{
    Precision p = lo->prec;
    double t = lo->tp, h = m->h, E = m->experts, gated = m->mlp == MLP_SWIGLU ? 2.0 : 1.0;
    double tok = layout_mb_tokens(m, lo), tok_r = tok * layout_sp_share(lo);
    double ef = (m->moe_ffn > 0 ? m->moe_ffn : m->f) / layout_etp(lo);
    double rows = layout_moe_rows(m, lo), local = E / lo->ep, per = rows / local;
    double w = linear_fwd_s(hw, prec_bf16_if_fp8(hw, p), tok_r, E, h) +
               local * (linear_fwd_s(hw, p, per, gated * ef, h) + linear_fwd_s(hw, p, per, h, ef));
    if (m->shared_ffn > 0)
        w += linear_fwd_s(hw, p, tok, gated * m->shared_ffn / t, h) + linear_fwd_s(hw, p, tok, h, m->shared_ffn / t);
    return w;
}

/* Biased experts (GPT-OSS): the passes a bias adds beyond the grouped
 * GEMMs and the activation. The FC1 bias goes into the fused gated
 * activation (Megatron's bias_activation_fusion, GPT-OSS's clamped quick
 * GEGLU included: the same bytes as SwiGLU's), but its gradient is a
 * reduction over the rows (read 2·ef a row); the FC2 bias is added to the
 * rows after the GEMM, weighted by the routing probability (read and write
 * h a row), and its gradient is one more reduction (read h a row).
 * Added to *fwd and *bwd. */
void time_moe_bias_passes_s(const ModelSpec *m, const HwProfile *hw, const Layout *lo, double *fwd, double *bwd)
{
    if (!m->bias || m->experts <= 0)
        return;
    double ab = hw_precision_bytes(lo->prec), rows = layout_moe_rows(m, lo);
    double ef = (m->moe_ffn > 0 ? m->moe_ffn : m->f) / layout_etp(lo), gated = m->mlp == MLP_SWIGLU ? 2.0 : 1.0;
    *fwd += time_mem_s(hw, 2.0 * ab * rows * m->h);
    *bwd += time_mem_s(hw, ab * rows * (gated * ef + m->h));
}

/* Dropless routing sizes the experts' inputs by a count the GPU computes:
 * the dispatcher's preprocess copies tokens per expert to the host (the
 * all-to-all's splits, the grouped GEMM's m_splits, HybridEP's output size)
 * and the host waits for it once per MoE layer forward. The GPU drains the
 * queue and then idles while the copy returns and the next kernel is
 * launched: two host operations. A capacity factor fixes the shapes on the
 * host; a full-iteration graph runs with static, device-side counts (the
 * recipes' moe_expert_rank_capacity_factor budget), so neither syncs. */
double time_moe_host_sync_s(const ModelSpec *m, const HwProfile *hw, const Layout *lo)
{
    if (!spec_is_moe(m) || m->capacity_factor > 0 || lo->cuda_graph == CG_FULL_ITERATION)
        return 0;
    return 2.0 * hw->kernel_lat;
}

double time_moe_layer_s(const LayerTime *lt)
{
    return lt->moe_fwd + lt->moe_bwd + lt->moe_tp_fwd + lt->moe_tp_bwd + lt->cp + lt->ep_fwd + lt->ep_bwd;
}
