/* attention.cu — causal grouped-query attention, FlashAttention-style: the
 * (T, T) score matrix is never stored. Forward keeps lse (B, NH, T), the
 * natural-log sum-exp of the scaled scores; the backward recomputes
 * p = exp(s − lse). Three implementations of the same three kernels:
 *
 * Tensor cores, mma.sync (HS 64 and 128, 16-byte aligned pointers; the
 * default): mma.sync.m16n8k16 bf16 → fp32 with ldmatrix operands,
 * FlashAttention-2 blocking. A block is 4 warps; a warp owns 16 rows
 * (queries, or keys in the dK/dV pass) of a 64-row tile and walks 64-wide
 * tiles of the other side, brought in by cp.async one tile ahead (double
 * buffered). Scores, probabilities and dS never leave registers: two
 * adjacent 8-column accumulators, packed to bf16, are the A operand of the
 * next product.
 *   forward  grid (T/64, NH, B): S = Q·Kᵀ, online softmax, O += P·V
 *   dK, dV   grid (T/64, NKV, B): Sᵀ, dPᵀ, then dV += Pᵀ·dO, dK += dSᵀ·Q,
 *            for every query tile at or after the keys and every head of
 *            the group
 *   dQ       grid (T/64, NH, B): S, dP, then dQ += dS·K
 * P and dS are rounded to bf16 before their products (the usual FA2 trade).
 *
 * Tensor cores, WMMA (kc_attention_set_impl(KC_ATTN_WMMA) or
 * ULTRAPLAN_ATTN=wmma): the first version, same blocking, WMMA m16n16k16;
 * the accumulator layout is opaque, so scores go through shared memory for
 * the softmax, and tiles are loaded synchronously. Kept as a second
 * tensor-core reference (docs/gpu/NOTES.md has both measured).
 *
 * SIMT (every supported HS, and KC_ATTN_SIMT / ULTRAPLAN_ATTN=simt): 4
 * warps each holding 4 rows in registers, the 32 lanes walking the other
 * side 32 at a time from fp32 smem tiles; fp32 arithmetic throughout. It is
 * the baseline the tensor-core kernels are tested against.
 *
 * All split dK/dV from dQ: the scores are recomputed twice, but there are
 * no atomics and the result is deterministic. Not done yet: wgmma/TMA
 * (sm_90a).
 *
 * This file is the dispatch; the kernels are in attention_tc.cu (mma.sync
 * and WMMA) and attention_simt.cu. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "attention.cuh"

int kc_attention_supported(int HS) { return HS == 32 || HS == 64 || HS == 96 || HS == 128; }

static KcAttnImpl attn_impl = KC_ATTN_AUTO;
static bool attn_impl_set;   /* by kc_attention_set_impl or ULTRAPLAN_ATTN */

/* ULTRAPLAN_ATTN, read once, before the first call decides */
static KcAttnImpl impl_now(void) {
    if (!attn_impl_set) {
        attn_impl_set = true;
        const char *e = getenv("ULTRAPLAN_ATTN");
        if (e && *e) {
            if (!strcmp(e, "mma")) attn_impl = KC_ATTN_AUTO;
            else if (!strcmp(e, "wmma")) attn_impl = KC_ATTN_WMMA;
            else if (!strcmp(e, "simt")) attn_impl = KC_ATTN_SIMT;
            else kc_fail("ULTRAPLAN_ATTN", "expected mma, wmma or simt", __FILE__, __LINE__);
        }
    }
    return attn_impl;
}

KcAttnImpl kc_attention_set_impl(KcAttnImpl impl) {
    KcAttnImpl old = impl_now();
    attn_impl = impl;
    return old;
}

/* the tensor-core kernels take HS 64 and 128 with 16-byte aligned rows */
static bool tc_ok(int HS, const void *const *ptr, int n) {
    if (HS != 64 && HS != 128) return false;
    for (int i = 0; i < n; i++)
        if (!aligned16(ptr[i])) return false;
    return true;
}

static void bad_shape(const char *fn, int HS, int NH, int NKV) {
    char msg[128];
    snprintf(msg, sizeof msg, "unsupported shape HS=%d NH=%d NKV=%d (HS in 32/64/96/128, NH > 0, NH %% NKV == 0)",
             HS, NH, NKV);
    kc_fail(fn, msg, __FILE__, __LINE__);
}

void kc_attention_fwd(bf16 *out, float *lse, const bf16 *q, const bf16 *k, const bf16 *v,
                      int B, int T, int NH, int NKV, int HS, cudaStream_t st) {
    if (B * T == 0) return;
    if (NH <= 0 || NKV <= 0 || NH % NKV || !kc_attention_supported(HS)) bad_shape("kc_attention_fwd", HS, NH, NKV);
    const void *ptr[] = {out, q, k, v};
    KcAttnImpl impl = impl_now();
    if (impl != KC_ATTN_SIMT && tc_ok(HS, ptr, 4)) {
        if (impl == KC_ATTN_WMMA) attn_tc_fwd(out, lse, q, k, v, B, T, NH, NKV, HS, st);
        else attn_mma_fwd(out, lse, q, k, v, B, T, NH, NKV, HS, st);
    } else attn_simt_fwd(out, lse, q, k, v, B, T, NH, NKV, HS, st);
}

/* dk and dv must both be given or both NULL (they come from one pass) */
void kc_attention_bwd(bf16 *dq, bf16 *dk, bf16 *dv, const bf16 *dout, const bf16 *q,
                      const bf16 *k, const bf16 *v, const bf16 *out, const float *lse,
                      int B, int T, int NH, int NKV, int HS, cudaStream_t st) {
    if (B * T == 0) return;
    if (NH <= 0 || NKV <= 0 || NH % NKV || !kc_attention_supported(HS)) bad_shape("kc_attention_bwd", HS, NH, NKV);
    const void *ptr[] = {dq, dk, dv, dout, q, k, v, out};
    KcAttnImpl impl = impl_now();
    if (impl != KC_ATTN_SIMT && tc_ok(HS, ptr, 8)) {
        if (impl == KC_ATTN_WMMA) attn_tc_bwd(dq, dk, dv, dout, q, k, v, out, lse, B, T, NH, NKV, HS, st);
        else attn_mma_bwd(dq, dk, dv, dout, q, k, v, out, lse, B, T, NH, NKV, HS, st);
    } else attn_simt_bwd(dq, dk, dv, dout, q, k, v, out, lse, B, T, NH, NKV, HS, st);
}
