#!/usr/bin/env python3
"""Measured and predicted time per layer pass of the vTrain single-node runs.

For each (hidden, tp, mbs) cell: the slope of step time over the number of
layers (L = 12..24) at fixed GPUs, global batch, pp and dp, divided by the
(m + pp - 1) / pp layer passes on the critical path (m micro-batches per
replica). Prints measured/predicted ms per layer pass, one line per cell
(docs/accuracy/NOTES.md step 10).

usage: ultraplan validate validation/vtrain/single_node.csv --json \
           | scripts/vtrain_layer_slopes.py
"""
import collections
import json
import sys


def slope(xs, ys):
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx


def main():
    d = json.load(sys.stdin)
    runs = collections.defaultdict(list)
    for r in d["rows"]:
        runs[(r["hidden"], r["gpus"], r["gbs"], r["tp"], r["pp"], r["dp"], r["mbs"])].append(r)
    cells = collections.defaultdict(list)
    for (h, gpus, gbs, tp, pp, dp, mbs), rs in runs.items():
        if len({r["layers"] for r in rs}) < 3:
            continue
        m = gbs // (dp * mbs)
        passes = (m + pp - 1) / pp
        L = [r["layers"] for r in rs]
        meas = slope(L, [r["measured_ms"] for r in rs]) / passes
        pred = slope(L, [r["predicted_ms"] for r in rs]) / passes
        cells[(h, tp, mbs)].append((meas, pred))
    print("hidden  tp  mbs  groups  measured_ms  predicted_ms  error%")
    for (h, tp, mbs), v in sorted(cells.items()):
        meas = sum(x[0] for x in v) / len(v)
        pred = sum(x[1] for x in v) / len(v)
        print(f"{h:6d} {tp:3d} {mbs:4d} {len(v):7d} {meas:12.2f} {pred:13.2f} {100 * (pred / meas - 1):+7.1f}")


if __name__ == "__main__":
    main()
