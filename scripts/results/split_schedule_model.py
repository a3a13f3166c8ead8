#!/usr/bin/env python3
"""Does a schedule model pick the INT2 decode split better than the plan's rule? (docs/bench (a))

The model: the plan's pieces (step_plan.cpp's cuts, q8 parameters, band 768, longest first, one per
(item, KV head)) go to 396 block slots in order; a piece waits `setup` microseconds, then streams
its bytes at min(rmax, B / blocks streaming): blocks left running alone at a launch's end go
faster. Its parameters (B, rmax, setup, a constant) are fitted on the measured split sweeps, and
each shape's pick (the split the model times fastest) is charged what that split measured against
the best measured split. Prints the best fits and, for comparison, what the plan's own split loses.

Usage: scripts/results/split_schedule_model.py [docs/bench]
"""
import heapq
import itertools
import json
import math
import sys
from pathlib import Path

SLOTS, HEADS, SINK, RECENT, BAND = 396, 8, 64, 256, 768
INT2, INT4, BF16 = 68.0, 132.0, 512.0  # bytes a position of one KV head reads
SPLITS = [4096, 5120, 6144, 8192]


def pieces(context, batch, split):
    """Bytes of each piece of the launch, in the plan's order (for_each_split's cuts)."""
    waves = math.ceil(context * batch * HEADS / (split * SLOTS))
    quarter = split // 4 // 256 * 256
    fine = quarter if quarter >= 512 else split
    out = []
    for _ in range(batch):
        band_start = context - RECENT - BAND
        out.append(SINK * BF16)
        fine_from = band_start - (band_start - SINK) // max(4, waves)
        b = SINK
        while b < band_start:
            step = fine if b >= fine_from else split
            e = min(band_start, (b // step + 1) * step)
            out.append((e - b) * INT2)
            b = e
        while b < context - RECENT:
            e = min(context - RECENT, (b // split + 1) * split)
            out.append((e - b) * INT4)
            b = e
        out.append(RECENT * BF16)
    out.sort(reverse=True)
    return [w for w in out for _ in range(HEADS)]


def launch_us(work, bandwidth, rmax, setup):
    """Processor sharing: every streaming block at min(rmax, bandwidth / streaming blocks)."""
    t = progress = 0.0
    streaming = 0
    waiting, running = [], []  # (setup end, bytes); progress at which a block's bytes are read
    queue = iter(work)
    for _ in range(min(SLOTS, len(work))):
        heapq.heappush(waiting, (setup, next(queue)))
    while waiting or running:
        rate = min(rmax, bandwidth / streaming) if streaming else 0.0
        start = waiting[0][0] if waiting else math.inf
        finish = t + (running[0] - progress) / rate if running else math.inf
        if start <= finish:
            progress += rate * (start - t)
            t = start
            heapq.heappush(running, progress + heapq.heappop(waiting)[1])
            streaming += 1
        else:
            progress, t = heapq.heappop(running), finish
            streaming -= 1
            following = next(queue, None)
            if following is not None:
                heapq.heappush(waiting, (t + setup, following))
    return t


def sweeps(folder):
    """{device: {(context, batch): ([µs per split of SPLITS], plan µs or None)}}."""
    h100 = {}
    for row in json.load(open(folder / "decode_attention_splits_5fe058d.json"))["rows"]:
        times = h100.setdefault((row["context"], row["batch"]), [None] * len(SPLITS))
        times[SPLITS.index(row["forced_split"])] = row["time_us"]
    h200 = {}
    median = lambda v: sorted(v)[len(v) // 2] if isinstance(v, list) else v
    for row in json.load(open(folder / "decode_attention_splits_h200_0906592.json"))["rows"]:
        h200[(row["context"], row["batch"])] = [median(row["time_us_by_split"][str(s)]) for s in SPLITS]
    return {"H100": h100, "H200": h200}


def main():
    folder = Path(sys.argv[1] if len(sys.argv) > 1 else "docs/bench")
    for device, data in sweeps(folder).items():
        fits = []
        for bandwidth, share, setup, constant in itertools.product(
                [2.6e6, 2.8e6, 3.0e6, 3.2e6, 3.4e6, 3.8e6, 4.3e6], [1.2, 1.5, 2, 3, 5], [1, 2, 3, 4, 6], [0, 3, 6]):
            rmax = bandwidth / SLOTS * share
            error = loss = 0.0
            for (context, batch), measured in data.items():
                model = [launch_us(pieces(context, batch, s), bandwidth, rmax, setup) + constant for s in SPLITS]
                error += sum(abs(m - x) / x for m, x in zip(model, measured)) / len(SPLITS)
                loss += measured[model.index(min(model))] / min(measured) - 1
            fits.append((loss / len(data), error / len(data), bandwidth, share, setup, constant))
        fits.sort()
        for loss, error, bandwidth, share, setup, constant in fits[:3]:
            print(f"{device}: picks lose {100 * loss:.1f}% on average (model error {100 * error:.1f}%): "
                  f"B {bandwidth / 1e6:.1f} TB/s, rmax {share} x B / slots, setup {setup} µs, constant {constant} µs")
        print(f"{device}: 4096 everywhere loses "
              f"{100 * sum(m[0] / min(m) - 1 for m in data.values()) / len(data):.1f}% on average")


if __name__ == "__main__":
    main()
