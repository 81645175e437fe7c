#!/usr/bin/env python3
"""pytorch_gpt.py — the same ~1B GPT that ultraplan runs (gpt3-1.3b: L=24,
h=2048, 16 heads of 128, vocab 50257 padded to 50304, tied embeddings,
LayerNorm, GELU(tanh), learned positions), in plain PyTorch: bf16 autocast
over fp32 master weights, fused AdamW, scaled_dot_product_attention (flash)
for the attention core, optionally torch.compile'd (--compile MODE: the
whole model's forward and, through AOTAutograd, its backward; the optimizer
stays the fused eager AdamW). The reference ultraplan's CUDA backend must
match or beat in tokens/s on the same GPU, eager and compiled.

Compilation happens in the first step(s): those are --warmup steps, left
out of the median (with --compile at least 3, whatever --warmup says), and
the first step's time, compilation included, is reported apart.

Random tokens (no data set, no network). Prints one line per step and a
summary; --json writes the summary as JSON.

MFU counts model FLOPs per token = 6·N + 6·L·s·h, N the parameters that do
matmuls (the LM head counted once through the tied wte, positions not),
6·L·s·h the causal attention core (12·L·s·h halved), over 989 TFLOP/s
dense bf16 (H100/H200 SXM) unless --peak says otherwise.
"""
import argparse
import json
import math
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, h, nh):
        super().__init__()
        self.nh = nh
        self.ln1 = nn.LayerNorm(h)
        self.qkv = nn.Linear(h, 3 * h)
        self.proj = nn.Linear(h, h)
        self.ln2 = nn.LayerNorm(h)
        self.fc = nn.Linear(h, 4 * h)
        self.fcproj = nn.Linear(4 * h, h)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(C, dim=2)
        q, k, v = (t.view(B, T, self.nh, C // self.nh).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(y.transpose(1, 2).contiguous().view(B, T, C))
        return x + self.fcproj(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(self, L, h, nh, V, maxT):
        super().__init__()
        self.wte = nn.Embedding(V, h)
        self.wpe = nn.Embedding(maxT, h)
        self.blocks = nn.ModuleList(Block(h, nh) for _ in range(L))
        self.lnf = nn.LayerNorm(h)
        for n, p in self.named_parameters():   # GPT-2 initialisation
            if p.dim() >= 2:
                std = 0.02 / math.sqrt(2 * L) if n.endswith("proj.weight") else 0.02
                nn.init.normal_(p, 0.0, std)
            elif n.endswith("bias"):
                nn.init.zeros_(p)

    def forward(self, idx, targets):
        B, T = idx.shape
        x = self.wte(idx) + self.wpe(torch.arange(T, device=idx.device))
        for b in self.blocks:
            x = b(x)
        logits = F.linear(self.lnf(x), self.wte.weight)   # tied
        # targets is idx[:, 1:], a strided slice: reshape, not view, flattens it
        return F.cross_entropy(logits.float().reshape(-1, logits.size(-1)), targets.reshape(-1))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--layers", type=int, default=24)
    ap.add_argument("--hidden", type=int, default=2048)
    ap.add_argument("--heads", type=int, default=16)
    ap.add_argument("--vocab", type=int, default=50257)
    ap.add_argument("--seq", type=int, default=2048)
    ap.add_argument("--batch", type=int, default=8, help="micro-batch (sequences per step)")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3, help="steps left out of the timing")
    ap.add_argument("--compile", nargs="?", const="default", default=None,
                    choices=["default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs"],
                    help="torch.compile the model with this mode (bare --compile: default)")
    ap.add_argument("--peak", type=float, default=989e12, help="FLOP/s, dense bf16")
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--json", help="write the summary here")
    a = ap.parse_args()

    if not torch.cuda.is_available():
        print("pytorch_gpt: no CUDA device, skipped")
        raise SystemExit(77)
    torch.manual_seed(a.seed)
    torch.backends.cuda.matmul.allow_tf32 = True
    dev = "cuda"
    Vp = (a.vocab + 127) // 128 * 128
    model = GPT(a.layers, a.hidden, a.heads, Vp, a.seq).to(dev)
    n_params = sum(p.numel() for p in model.parameters())
    n_matmul = n_params - model.wpe.weight.numel()
    flops_tok = 6 * n_matmul + 6 * a.layers * a.seq * a.hidden
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, betas=(0.9, 0.95), eps=1e-8,
                            weight_decay=0.1, fused=True)
    step_fn = torch.compile(model, mode=a.compile) if a.compile else model
    warmup = max(a.warmup, 3) if a.compile else a.warmup
    g = torch.Generator(device=dev).manual_seed(a.seed)
    tokens = a.batch * a.seq
    print(f"pytorch_gpt: {torch.cuda.get_device_name()} torch {torch.__version__}, "
          f"{n_params / 1e9:.3f} B params, L={a.layers} h={a.hidden} heads={a.heads} "
          f"V={Vp} seq={a.seq} batch={a.batch} compile={a.compile or 'off (eager)'}, "
          f"{warmup} warm-up steps left out of the timing")
    times, losses, first_s = [], [], None
    for step in range(a.steps):
        idx = torch.randint(0, a.vocab, (a.batch, a.seq + 1), device=dev, generator=g)
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = step_fn(idx[:, :-1], idx[:, 1:])
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        torch.cuda.synchronize()
        dt = time.perf_counter() - t0
        losses.append(loss.item())
        if step == 0:
            first_s = dt
        if step >= warmup:
            times.append(dt)
        print(f"step {step + 1:3d}  loss {losses[-1]:.4f}  {dt * 1e3:8.1f} ms  "
              f"{tokens / dt:9.0f} tok/s  MFU {100 * tokens * flops_tok / dt / a.peak:5.1f} %")
    times.sort()
    med = times[len(times) // 2] if times else float("nan")
    tps = tokens / med
    out = {
        "format": "ultraplan.pytorch_ref/1", "device": torch.cuda.get_device_name(),
        "torch": torch.__version__, "compile": bool(a.compile), "compile_mode": a.compile,
        "warmup_steps": warmup, "first_step_s": first_s, "params": n_params,
        "layers": a.layers, "hidden": a.hidden, "heads": a.heads, "vocab": Vp,
        "seq": a.seq, "batch": a.batch, "steps": a.steps, "median_step_s": med,
        "tokens_per_s": tps, "flops_per_token": flops_tok, "peak": a.peak,
        "mfu": tps * flops_tok / a.peak, "losses": losses,
        "peak_mem_bytes": torch.cuda.max_memory_allocated(),
    }
    print(f"summary: median step {med * 1e3:.1f} ms, {tps:.0f} tokens/s, MFU {100 * out['mfu']:.1f} % "
          f"of {a.peak / 1e12:.0f} TFLOP/s, peak memory {out['peak_mem_bytes'] / 2**30:.1f} GiB "
          f"({'compiled, mode ' + a.compile if a.compile else 'eager'}; first step {first_s:.1f} s)")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
