#!/usr/bin/env python3
"""Draws docs/bench/decode_attention.svg from the benchmark JSON files: the fraction of the copy
bandwidth that decode attention reaches, against the context, for PyTorch SDPA (bf16), ours in
bf16 and ours in INT2 (without OSCAR's 4-bit band, and with it), at batch 8 and 64. Plain SVG, no plotting library (none is packaged for the
machines this runs on).

Usage: scripts/results/plot_decode_attention.py [docs/bench]"""
import json
import math
import sys

WIDTH, HEIGHT = 800, 420
LEFT, RIGHT, TOP, BOTTOM = 70, 260, 40, 60
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
    x_low, x_high = math.log2(contexts[0]), math.log2(contexts[-1])
    y_high = 1.1
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM

    def x_of(context):
        return LEFT + (math.log2(context) - x_low) / (x_high - x_low) * plot_w

    def y_of(fraction):
        return TOP + (1 - fraction / y_high) * plot_h

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" '
           f'font-family="sans-serif" font-size="12">',
           f'<rect width="{WIDTH}" height="{HEIGHT}" fill="white"/>',
           f'<text x="{LEFT}" y="22" font-size="14">Decode attention, Qwen3-8B shape, H100: '
           f'fraction of copy bandwidth</text>']
    for tick in [0, 0.2, 0.4, 0.6, 0.8, 1.0]:
        y = y_of(tick)
        out.append(f'<line x1="{LEFT}" y1="{y:.1f}" x2="{LEFT + plot_w}" y2="{y:.1f}" stroke="#e5e5e5"/>')
        out.append(f'<text x="{LEFT - 8}" y="{y + 4:.1f}" text-anchor="end">{int(tick * 100)}%</text>')
    target = y_of(0.9)
    out.append(f'<line x1="{LEFT}" y1="{target:.1f}" x2="{LEFT + plot_w}" y2="{target:.1f}" '
               f'stroke="#d62728" stroke-dasharray="1 3"/>')
    out.append(f'<text x="{LEFT + plot_w - 4}" y="{target - 4:.1f}" text-anchor="end" fill="#d62728">'
               f'INT2 target 90%</text>')
    for context in contexts:
        x = x_of(context)
        out.append(f'<text x="{x:.1f}" y="{TOP + plot_h + 18}" text-anchor="middle">{context // 1024}K</text>')
    out.append(f'<text x="{LEFT + plot_w / 2}" y="{HEIGHT - 18}" text-anchor="middle">context (tokens)</text>')
    out.append(f'<line x1="{LEFT}" y1="{TOP + plot_h}" x2="{LEFT + plot_w}" y2="{TOP + plot_h}" stroke="black"/>')
    out.append(f'<line x1="{LEFT}" y1="{TOP}" x2="{LEFT}" y2="{TOP + plot_h}" stroke="black"/>')
    legend_y = TOP + 10
    for label, name, kv, band, colour in SERIES:
        for batch, dash in BATCHES:
            points = sorted((r["context"], r["bw_fraction"]) for r in rows[name]
                            if r["kv"] == kv and r.get("band_tokens", 0) == band and r["batch"] == batch)
            if not points:
                continue
            path = " ".join(f"{x_of(c):.1f},{y_of(f):.1f}" for c, f in points)
            out.append(f'<polyline points="{path}" fill="none" stroke="{colour}" stroke-width="2" '
                       f'stroke-dasharray="{dash}"/>')
            for c, f in points:
                out.append(f'<circle cx="{x_of(c):.1f}" cy="{y_of(f):.1f}" r="2.5" fill="{colour}"/>')
            lx = LEFT + plot_w + 15
            out.append(f'<line x1="{lx}" y1="{legend_y}" x2="{lx + 28}" y2="{legend_y}" stroke="{colour}" '
                       f'stroke-width="2" stroke-dasharray="{dash}"/>')
            out.append(f'<text x="{lx + 34}" y="{legend_y + 4}">{label}, batch {batch}</text>')
            legend_y += 20
    out.append("</svg>")
    with open(f"{folder}/decode_attention.svg", "w") as f:
        f.write("\n".join(out) + "\n")


if __name__ == "__main__":
    main()
