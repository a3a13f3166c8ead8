#!/usr/bin/env python3
"""Draws docs/bench/prefill.svg from the JSON files of docs/bench/prefill: oscar's time to first
token with the bf16 and the INT2 cache as a fraction of transformers' on the same weights, against
the prompt length, with issue 40's target (0.8) and parity. Each oscar row is divided by the peer's
row of the same length in the same call; at each length the first call listed that has both wins.

Usage: scripts/results/plot_prefill.py [docs/bench]"""
import json
import sys

from svg_chart import LineChart

# (oscar's rows, the peer's rows) of one call each, newest first.
CALLS = [("prefill_qwen3-8b_h200_6411bd6.json", "prefill_peer_qwen3-8b_h200_6411bd6.json"),
         ("prefill_qwen3-8b_h200_84b469e.json", "prefill_peer_qwen3-8b_h200_84b469e.json"),
         ("prefill_qwen3-8b_h200_fe365f5.json", "prefill_peer_qwen3-8b_h200_fe365f5.json")]
SERIES = [("oscar, bf16 cache", "bf16", "#1f77b4"), ("oscar, INT2 cache", "int2", "#d62728")]


def load(folder, name):
    with open(f"{folder}/prefill/{name}") as f:
        return json.load(f)["rows"]


def main():
    folder = sys.argv[1] if len(sys.argv) > 1 else "docs/bench"
    ratios = {}  # (kv, tokens) -> oscar's TTFT / the peer's, of one call
    for ours, peer in CALLS:
        peer_ttft = {r["prompt_tokens"]: r["ttft_s"] for r in load(folder, peer)
                     if r["kernel"] == "transformers_prefill"}
        for r in load(folder, ours):
            if r["prompt_tokens"] in peer_ttft:
                ratios.setdefault((r["kv"], r["prompt_tokens"]),
                                  r["ttft_s"] / peer_ttft[r["prompt_tokens"]])
    lengths = sorted({tokens for _, tokens in ratios})
    chart = LineChart("Prefill, Qwen3-8B shape, H200: time to first token / transformers'",
                      lengths, "prompt (tokens)", 1.3, [0, 0.2, 0.4, 0.6, 0.8, 1.0, 1.2],
                      lambda tick: f"{tick:.1f}x")
    chart.reference(1.0, "transformers (sdpa)", "#777777")
    chart.reference(0.8, "target 0.8x", "#2ca02c")
    chart.axes(lambda tokens: f"{tokens // 1024 if tokens % 1024 == 0 else tokens // 1000}K")
    for label, kv, colour in SERIES:
        chart.series([(tokens, ratios[(kv, tokens)]) for tokens in lengths
                      if (kv, tokens) in ratios], label, colour)
    chart.write(f"{folder}/prefill.svg")


if __name__ == "__main__":
    main()
