/* attention.cu — causal grouped-query attention, FlashAttention-style: the
 * (T, T) score matrix is never stored. Forward keeps lse (B, NH, T), the
 * natural-log sum-exp of the scaled scores; the backward recomputes
 * p = exp(s − lse). Two implementations of the same three kernels:
 *
 * Tensor cores (HS 64 and 128, 16-byte aligned pointers; the default):
 * WMMA m16n16k16, bf16 operands, fp32 accumulation, FlashAttention-2
 * blocking. A block is 4 warps; a warp owns 16 rows (queries, or keys in the
 * dK/dV pass) of a 64-row tile and walks 64-wide tiles of the other side.
 *   forward  grid (T/64, NH, B): S = Q·Kᵀ, online softmax in smem, O += P·V
 *   dK, dV   grid (T/64, NKV, B): Sᵀ, dPᵀ, then dV += Pᵀ·dO, dK += dSᵀ·Q,
 *            for every query tile at or after the keys and every head of
 *            the group
 *   dQ       grid (T/64, NH, B): S, dP, then dQ += dS·K
 * P and dS are rounded to bf16 before their products (the usual FA2 trade).
 *
 * SIMT (every supported HS, and kc_attention_set_impl(KC_ATTN_SIMT)): 4
 * warps each holding 4 rows in registers, the 32 lanes walking the other
 * side 32 at a time from fp32 smem tiles; fp32 arithmetic throughout. It is
 * the baseline the tensor-core kernels are tested against.
 *
 * Both split dK/dV from dQ: the scores are recomputed twice, but there are
 * no atomics and the result is deterministic. Not done yet: wgmma/TMA
 * (sm_90a), cp.async double buffering of the K/V tiles (docs/gpu/NOTES.md).
 *
 * This file is the dispatch; the kernels are in attention_tc.cu and
 * attention_simt.cu. */
#include <stdio.h>
#include "attention.cuh"

int kc_attention_supported(int HS) { return HS == 32 || HS == 64 || HS == 96 || HS == 128; }

static KcAttnImpl attn_impl = KC_ATTN_AUTO;

KcAttnImpl kc_attention_set_impl(KcAttnImpl impl) {
    KcAttnImpl old = attn_impl;
    attn_impl = impl;
    return old;
}

/* the tensor-core kernels take HS 64 and 128 with 16-byte aligned rows */
static bool use_tc(int HS, const void *const *ptr, int n) {
    if (attn_impl != KC_ATTN_AUTO || (HS != 64 && HS != 128)) return false;
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
    if (use_tc(HS, ptr, 4)) attn_tc_fwd(out, lse, q, k, v, B, T, NH, NKV, HS, st);
    else attn_simt_fwd(out, lse, q, k, v, B, T, NH, NKV, HS, st);
}

/* dk and dv must both be given or both NULL (they come from one pass) */
void kc_attention_bwd(bf16 *dq, bf16 *dk, bf16 *dv, const bf16 *dout, const bf16 *q,
                      const bf16 *k, const bf16 *v, const bf16 *out, const float *lse,
                      int B, int T, int NH, int NKV, int HS, cudaStream_t st) {
    if (B * T == 0) return;
    if (NH <= 0 || NKV <= 0 || NH % NKV || !kc_attention_supported(HS)) bad_shape("kc_attention_bwd", HS, NH, NKV);
    const void *ptr[] = {dq, dk, dv, dout, q, k, v, out};
    if (use_tc(HS, ptr, 8)) attn_tc_bwd(dq, dk, dv, dout, q, k, v, out, lse, B, T, NH, NKV, HS, st);
    else attn_simt_bwd(dq, dk, dv, dout, q, k, v, out, lse, B, T, NH, NKV, HS, st);
}
