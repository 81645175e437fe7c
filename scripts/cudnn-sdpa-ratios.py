#!/usr/bin/env python3
"""cudnn-sdpa-ratios.py GIT_DIR [REV] — the attention figures of docs/accuracy/NOTES.md steps 57-58,
recomputed from NVIDIA's published cuDNN measurements.

GIT_DIR is a clone (bare or not) of github.com/NVIDIA/cudnn-frontend; REV defaults to 3929da2, the
commit the notes read. It prints:
  - the GB200/GB300 forward+backward time ratio of every full-attention bf16 configuration both
    chips publish, and their median (step 57: 1.12);
  - the fp8/bf16 and MXFP8/bf16 time ratios, forward and backward, per GPU and shape, as the median
    over 2K, 4K and 8K causal tokens (step 58's table, model/timing.c FP8_ATTN).
Nothing is written; only git and the Python standard library are used.
"""
import csv
import io
import statistics
import subprocess
import sys

RES = "benchmark/sdpa_benchmark_training/results/"
PAIRS = {  # model: (GB200 file, GB300 file)
    "llama3.1": ("llama3.1/gb200/llama3.1_20260424_100750.csv", "llama3.1/gb300/llama3.1_20260424_100757.csv"),
    "dsv3": ("dsv3/gb200/dsv3_20260424_101009.csv", "dsv3/gb300/dsv3_20260424_101002.csv"),
    "kimiK26": ("kimiK26/gb200/kimiK26_20260424_100953.csv", "kimiK26/gb300/kimiK26_20260424_100915.csv"),
    "gpt_oss": ("gpt_oss/gb200/gpt_oss_20260424_100011.csv", "gpt_oss/gb300/gpt_oss_20260424_100022.csv"),
}
H200 = {"llama3.1": "h200_919_only_cudnn/llama3.1_20260227_034703.csv"}


def load(git_dir, rev, path, causal_only):
    text = subprocess.run(["git", "-C", git_dir, "show", f"{rev}:{RES}{path}"], check=True,
                          capture_output=True, text=True).stdout
    out = {}
    for r in csv.DictReader(io.StringIO(text)):
        if r.get("deterministic_bwd") != "False" or r.get("success") != "True":
            continue
        if causal_only and r["attn_mask"] != "top_left":
            continue
        key = (r["data_type"], r["attn_mask"], int(r["q_seqlen"]))
        if r["profile_pass"] == "both":   # the H200 files: both passes on one line
            out[key] = {"fwd": float(r["fwd_time_ms"]), "bwd": float(r["bwd_time_ms"])}
        else:
            out.setdefault(key, {})[r["profile_pass"]] = float(r["time_ms"])
    return out


def main():
    if len(sys.argv) < 2:
        sys.exit("usage: cudnn-sdpa-ratios.py GIT_DIR [REV]")
    git_dir, rev = sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else "3929da2"
    ratios = []
    print("GB200 / GB300 forward+backward time, bf16 (step 57)")
    for model, (a, b) in PAIRS.items():
        A, B = load(git_dir, rev, a, False), load(git_dir, rev, b, False)
        for k in sorted(A):
            if k[0] != "bfloat16" or k not in B or not {"fwd", "bwd"} <= A[k].keys() <= B[k].keys():
                continue
            r = (A[k]["fwd"] + A[k]["bwd"]) / (B[k]["fwd"] + B[k]["bwd"])
            print(f"  {model:9s} {k[1]:9s} {k[2]:6d}  {r:.3f}")
            if model != "gpt_oss":   # its 128-token window is not a full-attention kernel
                ratios.append(r)
    print(f"  median of {len(ratios)} full-attention configurations: {statistics.median(ratios):.3f} "
          f"(range {min(ratios):.2f}-{max(ratios):.2f})")
    print("fp8 / bf16 time, causal, median over 2K-8K tokens: forward, backward (step 58)")
    files = {("gb200", m): p[0] for m, p in PAIRS.items()}
    files.update({("gb300", m): p[1] for m, p in PAIRS.items()})
    files.update({("h200", m): p for m, p in H200.items()})
    for (gpu, model), path in sorted(files.items()):
        d = load(git_dir, rev, path, True)
        for dt in ("fp8", "mxfp8"):
            rows = [(d[(dt, "top_left", s)], d[("bfloat16", "top_left", s)]) for s in (2048, 4096, 8192)
                    if (dt, "top_left", s) in d and ("bfloat16", "top_left", s) in d]
            if rows:
                f = statistics.median(x["fwd"] / y["fwd"] for x, y in rows)
                g = statistics.median(x["bwd"] / y["bwd"] for x, y in rows)
                print(f"  {gpu:5s} {model:9s} {dt:6s} {f:.3f} {g:.3f}")


if __name__ == "__main__":
    main()
