/* kernels.h — the compute kernels of the GPT/Llama training step, fp32 on the
 * CPU (OpenBLAS GEMMs, OpenMP loops). kernels/cuda/ implements the same names
 * with the same semantics, and is tested against these.
 *
 * Conventions shared by every kernel:
 *   - fp32, row-major, contiguous; the last dimension varies fastest.
 *   - B batch, T tokens of the sequence chunk, C channels, OC output channels,
 *     NH query heads, NKV key/value heads, HS head size, F FFN width,
 *     V (padded) vocabulary. N is a row count, usually B*T.
 *   - Forward kernels OVERWRITE their outputs and any saved state they return
 *     (mean, rstd, lse, ...).
 *   - Backward kernels ACCUMULATE (+=) into every gradient buffer (dinp, dw,
 *     ...), so zero them once per step and micro-batches add up. The one
 *     exception is k_crossentropy_bwd, which overwrites dlogits (see there).
 *   - A gradient pointer documented as nullable may be NULL: that gradient is
 *     then skipped.
 *   - Unless a kernel says otherwise, outputs must not alias inputs.
 *
 * What these kernels deliberately don't do: no dropout, no mixed precision,
 * no communication. Tensor/vocab parallelism lives in the executor, which
 * calls these on its shards.
 */
#ifndef ULTRAPLAN_KERNELS_CPU_H
#define ULTRAPLAN_KERNELS_CPU_H

#include <stddef.h>

/* ---- linear layer ------------------------------------------------------- */

/* out (BT, OC) = inp (BT, C) · wᵀ + bias, with w (OC, C) and bias (OC),
 * bias nullable. */
void k_matmul_fwd(float *out, const float *inp, const float *w, const float *bias,
                  int BT, int C, int OC);

/* dinp (BT, C) += dout · w;  dw (OC, C) += doutᵀ · inp;  dbias (OC) +=
 * column sums of dout (BT, OC). dinp, dw and dbias are each nullable. */
void k_matmul_bwd(float *dinp, float *dw, float *dbias,
                  const float *dout, const float *inp, const float *w,
                  int BT, int C, int OC);

/* ---- normalisation (over the last dimension C, one row per token) ------- */

/* out (N, C) = (inp − mean) · rstd · weight + bias; saves mean (N) and
 * rstd (N) = 1/sqrt(var + eps) with the biased variance. bias nullable.
 * GPT-2 uses eps = 1e-5. */
void k_layernorm_fwd(float *out, float *mean, float *rstd,
                     const float *inp, const float *weight, const float *bias,
                     int N, int C, float eps);

/* dinp (N, C), dweight (C), dbias (C) accumulate; dbias nullable. */
void k_layernorm_bwd(float *dinp, float *dweight, float *dbias,
                     const float *dout, const float *inp, const float *weight,
                     const float *mean, const float *rstd, int N, int C);

/* out (N, C) = inp · rstd · weight with rstd (N) = 1/sqrt(mean(inp²) + eps),
 * saved. Llama uses eps = 1e-5 (or 1e-6). */
void k_rmsnorm_fwd(float *out, float *rstd, const float *inp, const float *weight,
                   int N, int C, float eps);

/* dinp (N, C) and dweight (C) accumulate. */
void k_rmsnorm_bwd(float *dinp, float *dweight, const float *dout,
                   const float *inp, const float *weight, const float *rstd,
                   int N, int C);

/* ---- activations -------------------------------------------------------- */

/* out (N) = gelu(inp) with the tanh approximation
 * 0.5·x·(1 + tanh(sqrt(2/π)·(x + 0.044715·x³))). out may alias inp. */
void k_gelu_fwd(float *out, const float *inp, size_t N);

/* dinp (N) += gelu'(inp) · dout. dinp must not alias inp or dout. */
void k_gelu_bwd(float *dinp, const float *inp, const float *dout, size_t N);

/* SwiGLU on the fused output of one up-projection: each row of inp (N, 2F) is
 * [gate (F) | up (F)], i.e. the matmul's OC = 2F with the gate rows of w
 * first. out (N, F) = silu(gate) · up, silu(x) = x·sigmoid(x). */
void k_swiglu_fwd(float *out, const float *inp, int N, int F);

/* dinp (N, 2F) += [dgate | dup] from dout (N, F). */
void k_swiglu_bwd(float *dinp, const float *inp, const float *dout, int N, int F);

/* The gated activation of a model: SwiGLU with clamp 0, else GPT-OSS's
 * (model act_clamp C): gate clamped at C from above, up to [−C, C],
 * out = gate·sigmoid(1.702·gate)·(up + 1). Same layouts as k_swiglu_*. */
void k_glu_fwd(float *out, const float *inp, int N, int F, float clamp);
void k_glu_bwd(float *dinp, const float *inp, const float *dout, int N, int F, float clamp);

/* ---- rotary position embedding ------------------------------------------ */

/* RoPE, Llama/GPT-NeoX "rotate half" convention: within each head vector of
 * size HS (even), element i pairs with i + HS/2 for i < HS/2, and the pair at
 * position p = pos0 + t is rotated by the angle p · theta^(−2i/HS):
 *     out[i]        = x[i]·cos − x[i+HS/2]·sin
 *     out[i+HS/2]   = x[i+HS/2]·cos + x[i]·sin
 * inp, out (B, T, NH, HS); out may alias inp (in place). pos0 is the position
 * of token t = 0 (non-zero for a context-parallel chunk or a KV cache).
 * theta is the base, 10000 for Llama 2. Angles are computed in double. */
void k_rope_fwd(float *out, const float *inp, int B, int T, int NH, int HS,
                int pos0, float theta);

/* dinp (B, T, NH, HS) += R(p)ᵀ · dout, the inverse rotation. dinp must not
 * alias dout. */
void k_rope_bwd(float *dinp, const float *dout, int B, int T, int NH, int HS,
                int pos0, float theta);

/* RoPE at explicit positions: token t of every row b is at pos[t] (T
 * entries), for a context-parallel rank whose tokens are two chunks of the
 * sequence. Otherwise as k_rope_fwd / k_rope_bwd (out may alias inp). */
void k_rope_pos_fwd(float *out, const float *inp, const int *pos, int B, int T, int NH,
                    int HS, float theta);
void k_rope_pos_bwd(float *dinp, const float *dout, const int *pos, int B, int T, int NH,
                    int HS, float theta);

/* ---- attention ---------------------------------------------------------- */

/* Causal self-attention with grouped-query heads, FlashAttention-style:
 * q (B, T, NH, HS), k and v (B, T, NKV, HS), out (B, T, NH, HS). NH must be a
 * multiple of NKV; query head h reads kv head h / (NH/NKV). Scores are
 * q·k / sqrt(HS), position t attends to positions 0..t of the same chunk.
 * Saves only lse (B, NH, T), the natural-log log-sum-exp of each score row;
 * the (T, T) matrix is never stored (a per-thread row of T floats is). */
void k_attention_fwd(float *out, float *lse, const float *q, const float *k,
                     const float *v, int B, int T, int NH, int NKV, int HS);

/* dq (B, T, NH, HS), dk and dv (B, T, NKV, HS) accumulate. Needs the forward
 * out and lse; recomputes the probabilities from q, k and lse. */
void k_attention_bwd(float *dq, float *dk, float *dv, const float *dout,
                     const float *q, const float *k, const float *v,
                     const float *out, const float *lse,
                     int B, int T, int NH, int NKV, int HS);

/* The same with a sliding window (GPT-OSS, Mistral): query t sees keys
 * t−W..t (Megatron's window_size (W, 0)); W 0 is the causal kernel above.
 * Work is a band: each query tile starts at key t0 − W. */
void k_attention_window_fwd(float *out, float *lse, const float *q, const float *k, const float *v, int B, int T,
                            int NH, int NKV, int HS, int W);
void k_attention_window_bwd(float *dq, float *dk, float *dv, const float *dout, const float *q, const float *k,
                            const float *v, const float *out, const float *lse, int B, int T, int NH, int NKV,
                            int HS, int W);

/* Attention sinks (GPT-OSS, Megatron --softmax-type learnable): a learned
 * logit sink (NH) per head joins every row's softmax with no value. Run
 * after k_attention_fwd: scales out (B, T, NH, HS) by e^(lse − lse') and
 * sets lse (B, NH, T) to lse' = logaddexp(lse, sink). The attention
 * backward then needs nothing else; k_attention_sink_bwd accumulates the
 * sinks' gradient −Σ_rows e^(sink − lse')·(dout·out) into dsink (NH). */
void k_attention_sink_fwd(float *out, float *lse, const float *sink, int B, int T, int NH, int HS);
void k_attention_sink_bwd(float *dsink, const float *dout, const float *out, const float *lse, const float *sink,
                          int B, int T, int NH, int HS);

/* Context parallel: one block of a longer sequence. Queries q (B, Tq, NH, HS)
 * at global positions qpos (Tq) against keys and values k, v (B, Tk, NKV, HS)
 * at kpos (Tk); both position lists are shared by the B rows and must be
 * non-decreasing (the two chunks of a load-balanced CP rank are). A query at
 * position p sees the keys at positions <= p. Writes the block's partial out
 * (B, Tq, NH, HS) and lse (B, NH, Tq); a row that sees no key of the block
 * gets out 0 and lse −∞. With qpos = kpos = 0..T−1 this is k_attention_fwd. */
void k_attention_block_fwd(float *out, float *lse, const float *q, const float *k,
                           const float *v, const int *qpos, const int *kpos,
                           int B, int Tq, int Tk, int NH, int NKV, int HS);

/* Merges a block's partial (out_b, lse_b) into (out, lse), in place:
 * lse' = logaddexp(lse, lse_b), out' = out·e^(lse−lse') + out_b·e^(lse_b−lse');
 * a −∞ side contributes nothing. Shapes as k_attention_block_fwd (T = Tq). */
void k_attention_merge(float *out, float *lse, const float *out_b, const float *lse_b,
                       int B, int T, int NH, int HS);

/* The backward of one block: dq (B, Tq, NH, HS) and the block's dk, dv
 * (B, Tk, NKV, HS) accumulate. out and lse are the FINAL (merged over every
 * block) output and log-sum-exp of the queries; dout is d(out). */
void k_attention_block_bwd(float *dq, float *dk, float *dv, const float *dout,
                           const float *q, const float *k, const float *v,
                           const float *out, const float *lse,
                           const int *qpos, const int *kpos,
                           int B, int Tq, int Tk, int NH, int NKV, int HS);

/* ---- embeddings and residual -------------------------------------------- */

/* out (B, T, C) = wte[tokens[b,t]] + wpe[pos0 + t]; wte (V, C), wpe
 * (maxT, C) nullable (RoPE models have none), tokens (B, T) in [0, V). */
void k_embedding_fwd(float *out, const int *tokens, const float *wte,
                     const float *wpe, int B, int T, int C, int pos0);

/* dwte (V, C) += scattered dout rows; dwpe (maxT, C) += dout summed over B.
 * Either is nullable. */
void k_embedding_bwd(float *dwte, float *dwpe, const float *dout,
                     const int *tokens, int B, int T, int C, int pos0);

/* out (N) = a + b; out may alias a or b. The backward of a residual is
 * da += dout and db += dout: k_residual_bwd does exactly that (either of da,
 * db nullable), and the executor usually just lets dout flow through. */
void k_residual_fwd(float *out, const float *a, const float *b, size_t N);
void k_residual_bwd(float *da, float *db, const float *dout, size_t N);

/* ---- loss --------------------------------------------------------------- */

/* Fused softmax + cross-entropy over logits (BT, V). Only the first V_valid
 * columns are real tokens; columns V_valid..V−1 (vocab padding) are masked
 * out, as if their logit were −∞. targets (BT) in [0, V_valid), or −1 to
 * ignore a position (loss 0, gradient 0). Writes losses (BT) = lse − logit at
 * the target (natural log, nats) and saves lse (BT) for the backward. */
void k_crossentropy_fwd(float *losses, float *lse, const float *logits,
                        const int *targets, int BT, int V, int V_valid);

/* dlogits (BT, V) = (softmax(logits) − onehot(target)) · scale, OVERWRITTEN
 * (not accumulated), zero in padded columns and ignored rows. dlogits may
 * alias logits (in place, as llm.c does to save memory). scale is the
 * gradient of the objective w.r.t. each position's loss, e.g. 1/(B·T·m) for
 * the mean over m accumulated micro-batches. */
void k_crossentropy_bwd(float *dlogits, const float *logits, const float *lse,
                        const int *targets, float scale, int BT, int V, int V_valid);

/* ---- optimizer and helpers ---------------------------------------------- */

/* AdamW (decoupled weight decay), one step over n parameters, in place:
 *   m = β1·m + (1−β1)·g;  v = β2·v + (1−β2)·g²
 *   p −= lr · ( (m/(1−β1^t)) / (sqrt(v/(1−β2^t)) + eps) + weight_decay·p )
 * t is the step number counting from 1. grads is read only. */
void k_adamw(float *params, const float *grads, float *m, float *v, size_t n,
             float lr, float beta1, float beta2, float eps, float weight_decay,
             int t);

void k_zero(float *x, size_t n);                 // x = 0
void k_scale(float *x, float s, size_t n);       // x *= s
double k_sumsq(const float *x, size_t n);        // Σ x², in double (grad-norm clipping)

#endif
