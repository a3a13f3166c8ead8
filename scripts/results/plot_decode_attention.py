#!/usr/bin/env python3
"""Draws docs/bench/decode_attention.svg from the benchmark JSON files: the fraction of the copy
bandwidth that decode attention reaches, against the context, for PyTorch SDPA (bf16), ours in
bf16 and ours in INT2 (without OSCAR's 4-bit band, and with it), at batch 8 and 64. Plain SVG, no plotting library (none is packaged for the
machines this runs on).

Usage: scripts/results/plot_decode_attention.py [docs/bench]"""
import json
import sys

from svg_chart import LineChart

SERIES = [  # (label, file, kv, band tokens, colour)
    ("SDPA bf16 (cuDNN)", "sdpa_decode_attention.json", "bf16", 0, "#777777"),
    ("oscar bf16", "decode_attention.json", "bf16", 0, "#1f77b4"),
    ("oscar INT2", "decode_attention.json", "int2", 0, "#d62728"),
    ("oscar INT2 + band 768", "decode_attention.json", "int2", 768, "#ff9f1c"),
]
BATCHES = [(8, "4 3"), (64, "")]  # dash pattern per batch


def load(folder, name):
    with open(f"{folder}/{name}") as f:
        return json.load(f)["rows"]


def main():
    folder = sys.argv[1] if len(sys.argv) > 1 else "docs/bench"
    rows = {name: load(folder, name) for _, name, _, _, _ in SERIES}
    contexts = sorted({r["context"] for r in rows["decode_attention.json"]})
    chart = LineChart("Decode attention, Qwen3-8B shape, H100: fraction of copy bandwidth",
                      contexts, "context (tokens)", 1.1, [0, 0.2, 0.4, 0.6, 0.8, 1.0],
                      lambda tick: f"{int(tick * 100)}%")
    chart.reference(0.9, "INT2 target 90%", "#d62728")
    chart.axes(lambda context: f"{context // 1024}K")
    for label, name, kv, band, colour in SERIES:
        for batch, dash in BATCHES:
            chart.series([(r["context"], r["bw_fraction"]) for r in rows[name]
                          if r["kv"] == kv and r.get("band_tokens", 0) == band and r["batch"] == batch],
                         f"{label}, batch {batch}", colour, dash)
    chart.write(f"{folder}/decode_attention.svg")


if __name__ == "__main__":
    main()
