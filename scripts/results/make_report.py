#!/usr/bin/env python3
"""Turns the accuracy campaign's JSON results (scripts/results/accuracy_campaign.sh) into
docs/results/README.md and docs/results/perplexity.svg.

    usage: scripts/results/make_report.py [RAW_DIR] [OUT_DIR] [CUDA_RAW_DIR] [CUDA_PUBLISHED_DIR]

RAW_DIR holds the CPU backend's results (the reference); CUDA_RAW_DIR, where present, the same
campaign run on the CUDA backend, shown beside them so the two backends can be compared;
CUDA_PUBLISHED_DIR the published recipe's jobs run on the CUDA backend (its own calibration, its
needles), shown in that section's CUDA columns.

Perplexity is deterministic for a given build, text and rotations file, so the spread reported
beside each method is the one that decides rankings: the standard error, over the windows, of the
per-window log perplexity ratio against bf16 (windows are paired: every method sees the same
tokens). The calibration seed's effect is reported separately (oscar with a second calibration).
"""
import json
import math
import subprocess
import sys
from datetime import date
from pathlib import Path

RAW = Path(sys.argv[1] if len(sys.argv) > 1 else "docs/results/raw")
OUT = Path(sys.argv[2] if len(sys.argv) > 2 else "docs/results")
CUDA_RAW = Path(sys.argv[3] if len(sys.argv) > 3 else "docs/results/raw-cuda")
CUDA_PUBLISHED = Path(sys.argv[4] if len(sys.argv) > 4 else "docs/results/raw-cuda-published")
METHODS = ["oscar", "quarot", "kivi", "naive"]
COLORS = {"oscar": "#1b7837", "quarot": "#2166ac", "kivi": "#b2182b", "naive": "#777777"}


def load(name, raw=RAW):
    path = raw / f"{name}.json"
    return json.loads(path.read_text()) if path.exists() else None


def load_cuda(name, raw=None):
    """A CUDA result from `raw` when given and there, else from CUDA_RAW (the bf16 references the
    published folder lacks)."""
    return (load(name, raw) if raw else None) or load(name, CUDA_RAW)


def source_note(folder):
    """What built the results in `folder` (its SOURCE.txt), or None."""
    path = folder / "SOURCE.txt"
    return path.read_text().strip() if path.exists() else None


def paired(result, reference):
    """(delta %, standard error %) of the perplexity against the reference, paired by window."""
    ratios = [math.log(a / b) for a, b in zip(result["window_ppl"], reference["window_ppl"])]
    n = len(ratios)
    mean = sum(ratios) / n
    sd = math.sqrt(sum((r - mean) ** 2 for r in ratios) / (n - 1)) if n > 1 else float("nan")
    delta = 100 * (result["ppl"] / reference["ppl"] - 1)
    return delta, 100 * sd / math.sqrt(n)


def ppl_cells(result, reference):
    if result is None or reference is None:
        return "not run | "
    delta, se = paired(result, reference)
    return f"{result['ppl']:.4f} | {delta:+.2f}% ±{se:.2f}%"


def ppl_row(label, name, reference_name="ppl-bf16", cuda_raw=None):
    """CPU and CUDA results of one configuration, each against its own backend's bf16 run."""
    cpu = load(name)
    cuda = load(name, cuda_raw) if cuda_raw else load_cuda(name)
    bpe = next((r["bpe_128k"] for r in (cpu, cuda) if r is not None), None)
    agreement = f"{100 * (cuda['ppl'] / cpu['ppl'] - 1):+.3f}%" if cpu and cuda else ""
    return (f"| {label} | {ppl_cells(cpu, load(reference_name))} | "
            f"{ppl_cells(cuda, load_cuda(reference_name, cuda_raw))} | {agreement} | "
            f"{'' if bpe is None else f'{bpe:.3f}'} |")


PPL_HEADER = ["| configuration | CPU perplexity | CPU vs bf16 ± paired s.e. | CUDA perplexity | "
              "CUDA vs bf16 ± paired s.e. | CUDA vs CPU | bits/element at 128K |",
              "|---|---:|---:|---:|---:|---:|---:|"]


def perplexity_tables(lines, bf16):
    cuda = load_cuda("ppl-bf16")
    lines += [f"bf16 cache: perplexity **{bf16['ppl']:.4f}** on the CPU"
              + (f", {cuda['ppl']:.4f} on CUDA" if cuda else "")
              + f", over {bf16['windows']} windows of {bf16['context']} tokens ({bf16['tokens']} "
              "predictions), 16 bits per element.", ""]
    for regions, suffix, title in [(True, "", "with the bf16 sink (64) and recent window (256)"),
                                   (False, "-noregions", "without them: every token quantized")]:
        lines += [f"#### INT2, {title}", ""] + PPL_HEADER
        for group in (128, 64):
            for method in METHODS:
                lines.append(ppl_row(f"{method} g{group}", f"ppl-{method}-g{group}{suffix}"))
        lines.append("")


def variants_table(lines, bf16):
    lines += ["#### OSCAR variants and a 4-bit reference", ""] + PPL_HEADER
    for name, label in [("oscar-g128", "oscar g128 (q8 parameters, clip 0.84/0.92, key and value error feedback: our default)"),
                        ("oscar-g128-clipsearch", "oscar g128 with the per-group clip search instead (the default until 2026-11-24)"),
                        ("oscar-g128-seed1", "oscar g128, calibration seed 1"),
                        ("oscar-g128-published", "oscar g128, range-scale clip 0.96/0.92, f16 parameters, nearest (not the published clipping: [below](#the-published-recipe-exactly))"),
                        ("oscar-g64-published", "oscar g64, range-scale clip 0.96/0.92, f16 parameters, nearest"),
                        ("int4-quarot-g128", "INT4 quarot g128")]:
        lines.append(ppl_row(label, f"ppl-{name}"))
    lines.append("")


def unseen_table(lines):
    lines += PPL_HEADER + [ppl_row("bf16", "ppl-unseen-bf16", "ppl-unseen-bf16")]
    for method in METHODS:
        lines.append(ppl_row(f"{method} g128", f"ppl-unseen-{method}-g128", "ppl-unseen-bf16"))
    lines.append("")


PUBLISHED_PPL = [
    ("oscar-g128", "our default: range-scale clip 0.84/0.92, q8, key and value error feedback (no band)"),
    ("oscar-g128-published-rowquantile-f32", "as published: `--kv-preset oscar-published` (row-quantile clip 0.96/0.92, f32, nearest)"),
    ("oscar-g128-published-rowquantile-f32-pt", "the same, rotations read from the published torch.save files"),
    ("oscar-g128-published-rowquantile-f16", "as published with f16 parameters"),
    ("oscar-g64-published-rowquantile-f16", "as published with f16 parameters, g64"),
    ("oscar-g128-rowquantile-f32-lloydmax", "row-quantile clip 0.96/0.92, f32, Lloyd-Max codes"),
    ("oscar-g128-rowquantile-f32-feedback", "row-quantile clip 0.96/0.92, f32, key and value error feedback"),
]
PUBLISHED_NIAH = ["oscar-g128", "oscar-g128-published-rowquantile-f32", "oscar-g128-rowquantile-f32-lloydmax",
                  "oscar-g128-rowquantile-f32-feedback"]


def published_section(lines):
    """The published OSCAR recipe measured as published, beside our defaults, and its Lloyd-Max
    option against error feedback under the same clipping and parameters."""
    lines += ["## The published recipe exactly", "",
              "The published code clips each (token, KV head) row at a quantile of its magnitudes (index "
              "int(c * 128) of the sorted |x|: 122 for keys at 0.96, 117 for values at 0.92), clamps the row, "
              "then takes plain min/max per group (`--kv-clip-mode row-quantile`); oscar's `--kv-clip-k/v` "
              "scale each group's min and max instead (`--kv-clip-mode range-scale`, the default). The rows "
              "labelled \"as published\" above used the range-scale quantizer with the published ratios. "
              "`--kv-preset oscar-published` is the published serving configuration: groups of 128, row-quantile "
              "clip 0.96/0.92, f32 scale and zero (2.5 bits per element before the bf16 regions), sink 64, "
              "recent 256, no band, rounded to nearest. Lloyd-Max (`--kv-lloyd-max`): the clipped row "
              "standardised, codes by the thresholds 0 and +-0.981 standard deviations, stored as a uniform grid "
              "centred on the row mean with a scale of 1.16 standard deviations. CPU columns: the CPU backend "
              f"(`{RAW.name}/`) with a rotations file calibrated on the CPU; the `-pt` row reads the same rotations "
              "converted to the published format (`tools/torch_save_rotations.py convert`). CUDA columns: the "
              f"CUDA backend (`{CUDA_PUBLISHED.name}/`), which quantizes these modes as the CPU does (the same "
              "codes and parameters, bit for bit, for the same bf16 inputs: `CudaKvMigrate`), with a rotations "
              "file calibrated on the GPU: the two files' calibration reports differ in the second and third "
              "decimals, so \"CUDA vs CPU\" in these tables compares rotations as well as backends.", "",
              "Perplexity on valid.xz:", ""] + PPL_HEADER
    for prefix, reference in [("ppl-", "ppl-bf16"), ("ppl-unseen-", "ppl-unseen-bf16")]:
        if prefix == "ppl-unseen-":
            lines += ["", "Perplexity on the unseen text:", ""] + PPL_HEADER
        for name, label in PUBLISHED_PPL:
            if load(prefix + name) is not None or load(prefix + name, CUDA_PUBLISHED) is not None:
                lines.append(ppl_row(label, prefix + name, reference, CUDA_PUBLISHED))
    published_niah_table(lines)
    lloyd_max_against_feedback(lines)
    for note in (RAW / "SOURCE-published.txt", CUDA_PUBLISHED / "SOURCE.txt"):
        if note.exists():
            lines += [note.read_text().strip(), ""]


def niah_against_bf16(result, bf16):
    """Correct answers, the difference to bf16 and the cells (of 40) with bf16's count."""
    if result is None:
        return "not run | | "
    same = sum(a["correct"] == b["correct"] for a, b in zip(result["cells"], bf16["cells"]))
    return (f"{result['correct']} / {result['total']} ({100 * result['accuracy']:.1f}%) | "
            f"{result['correct'] - bf16['correct']:+d} | {same}")


def published_niah_table(lines):
    """The published recipe's needles beside bf16 and our default: the same 120 prompts (seed 1) each,
    so the difference to bf16 is paired, cell by cell."""
    bf16, cuda_bf16 = load("niah-bf16"), load_cuda("niah-bf16", CUDA_PUBLISHED)
    lines += ["", "Needles (seed 1, the same 120 prompts for every cache):", "",
              "| cache | CPU correct | vs bf16 | cells (of 40) with bf16's count | CUDA correct | vs bf16 | "
              "cells (of 40) with bf16's count |", "|---|---:|---:|---:|---:|---:|---:|"]
    for name in ["bf16"] + PUBLISHED_NIAH:
        cpu = load(f"niah-{name}")
        cuda = load(f"niah-{name}", CUDA_PUBLISHED) or (load_cuda("niah-bf16") if name == "bf16" else None)
        kv = (cpu or cuda)["kv"]
        lines.append(f"| {name} ({kv}) | {niah_against_bf16(cpu, bf16)} | {niah_against_bf16(cuda, cuda_bf16)} |")
    lines.append("")


def lloyd_max_against_feedback(lines):
    """Issue 45's question: under the published clipping and f32 parameters, which wins, Lloyd-Max
    codes or error feedback, on each test and backend? Perplexity: lower wins, with the paired
    standard error of their ratio (a difference under two of them is marked as such); needles: more
    correct answers win (one seed: a few prompts are within its spread)."""
    names = {"nearest": "oscar-g128-published-rowquantile-f32", "lloyd": "oscar-g128-rowquantile-f32-lloydmax",
             "feedback": "oscar-g128-rowquantile-f32-feedback"}
    lines += ["Lloyd-Max against error feedback, both under the row-quantile clip 0.96/0.92 with f32 parameters "
              "(perplexity against bf16; needles: correct of 120, seed 1):", "",
              "| test | backend | nearest (the preset) | Lloyd-Max | error feedback | Lloyd-Max vs error feedback | wins |",
              "|---|---|---:|---:|---:|---:|---|"]
    backends = [("CPU", lambda name: load(name), lambda name: load(name)),
                ("CUDA", lambda name: load(name, CUDA_PUBLISHED), lambda name: load_cuda(name, CUDA_PUBLISHED))]
    for test, prefix, reference in [("valid.xz", "ppl-", "ppl-bf16"), ("unseen text", "ppl-unseen-", "ppl-unseen-bf16")]:
        for backend, load_run, load_reference in backends:
            runs = {key: load_run(prefix + name) for key, name in names.items()}
            cells = [f"{paired(run, load_reference(reference))[0]:+.2f}%" if run else "not run" for run in runs.values()]
            verdict = ["", "not run"]
            if runs["lloyd"] and runs["feedback"]:
                delta, se = paired(runs["lloyd"], runs["feedback"])
                winner = "Lloyd-Max" if delta < 0 else "error feedback"
                verdict = [f"{delta:+.2f}% ±{se:.2f}%", winner if abs(delta) >= 2 * se else f"{winner}, within 2 standard errors"]
            lines.append(f"| {test} | {backend} | {' | '.join(cells)} | {' | '.join(verdict)} |")
    for backend, load_run, _ in backends:
        runs = {key: load_run(f"niah-{name}") for key, name in names.items()}
        cells = [str(run["correct"]) if run else "not run" for run in runs.values()]
        verdict = ["", "not run"]
        if runs["lloyd"] and runs["feedback"]:
            delta = runs["lloyd"]["correct"] - runs["feedback"]["correct"]
            verdict = [f"{delta:+d} prompts", "tie" if delta == 0 else "Lloyd-Max" if delta > 0 else "error feedback"]
        lines.append(f"| needles | {backend} | {' | '.join(cells)} | {' | '.join(verdict)} |")
    lines.append("")


def clip_search_table(lines):
    """Every method at g128 with the per-group least-squared-error clip search instead of the fixed
    ratios, on both texts: the campaign's setting until 2026-11-24."""
    lines += PPL_HEADER
    for method in METHODS:
        lines.append(ppl_row(f"{method} g128, valid.xz", f"ppl-{method}-g128-clipsearch"))
    for method in METHODS:
        lines.append(ppl_row(f"{method} g128, unseen text", f"ppl-unseen-{method}-g128-clipsearch", "ppl-unseen-bf16"))
    lines.append("")


def niah_cells(result, raw_dir, name):
    if result is None:
        return "not run | "
    return (f"{result['correct']} / {result['total']} ({100 * result['accuracy']:.1f}%) | "
            f"[svg]({raw_dir}/niah-{name}.svg)")


def niah_table(lines):
    lines += ["| cache | CPU correct | CPU heat map | CUDA correct | CUDA heat map |", "|---|---:|---|---:|---|"]
    for name in NIAH_CACHES:
        cpu, cuda = load(f"niah-{name}"), load_cuda(f"niah-{name}")
        kv = next((r["kv"] for r in (cpu, cuda) if r is not None), "")
        lines.append(f"| {name} ({kv}) | {niah_cells(cpu, RAW.name, name)} | "
                     f"{niah_cells(cuda, CUDA_RAW.name, name)} |")
    lines.append("")


def niah_seed_counts():
    """Correct answers per NIAH cache and prompt seed on the CUDA backend: seed 1 from the campaign's
    niah jobs, the others from niah-seeds/ (NIAH_SEEDS). {cache: {seed: correct}}, empty without them."""
    folder = CUDA_RAW / "niah-seeds"
    if not folder.is_dir():
        return {}
    counts = {}
    for name in NIAH_CACHES:
        main_run = load_cuda(f"niah-{name}")
        if main_run is not None:
            counts.setdefault(name, {})[main_run["seed"]] = main_run["correct"]
        for path in sorted(folder.glob(f"{name}-seed*.json")):
            result = json.loads(path.read_text())
            counts.setdefault(name, {})[result["seed"]] = result["correct"]
    return counts


def mean_sd(values):
    """Mean and sample standard deviation."""
    mean = sum(values) / len(values)
    return mean, math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1))


def gap_to_bf16(counts, name):
    """(mean, 95% half-width) of the paired per-seed difference name - bf16, in prompts per run."""
    seeds = sorted(set(counts[name]) & set(counts["bf16"]))
    diffs = [counts[name][s] - counts["bf16"][s] for s in seeds]
    mean, sd = mean_sd(diffs)
    return mean, T95.get(len(diffs) - 1, 1.96) * sd / math.sqrt(len(diffs)), diffs


# Student's t, two-sided 95%, by degrees of freedom (the seed sweep has 19).
T95 = {2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262, 14: 2.145, 19: 2.093,
       24: 2.064, 29: 2.045}


def niah_seeds_section(lines, counts):
    if "bf16" not in counts or len(counts["bf16"]) < 3:
        return
    seeds = sorted(counts["bf16"])
    prompts = load_cuda("niah-bf16")["total"]
    lines += [f"### Over {len(seeds)} prompt seeds (CUDA backend)", "",
              f"The same {prompts} prompts per cache are one sample: the campaign's seed 1 above is one of "
              f"{len(seeds)} seeds run (`NIAH_SEEDS`, results in `{CUDA_RAW.name}/niah-seeds/`). Per cache: "
              f"the correct answers over all {len(seeds) * prompts} prompts, their mean per run of {prompts} "
              "with the standard deviation over seeds, and the paired difference to bf16 per run (every "
              "cache sees the same prompts of a seed) with its 95% confidence interval.", "",
              f"![NIAH per seed]({CUDA_RAW.name}/niah-seeds.svg)", "",
              f"| cache | correct of {len(seeds) * prompts} | per run: mean (sd) | range | vs bf16 per run (95% CI) | seeds worse / equal / better |",
              "|---|---:|---:|---:|---:|---:|"]
    for name, by_seed in counts.items():
        values = [by_seed[s] for s in seeds if s in by_seed]
        mean, sd = mean_sd(values)
        row = f"| {name} | {sum(values)} | {mean:.2f} ({sd:.2f}) | {min(values)}-{max(values)} |"
        if name == "bf16":
            lines.append(row + " | |")
            continue
        gap, half, diffs = gap_to_bf16(counts, name)
        lines.append(row + f" {gap:+.2f} ({gap - half:+.2f} to {gap + half:+.2f}) | "
                     f"{sum(d < 0 for d in diffs)} / {sum(d == 0 for d in diffs)} / {sum(d > 0 for d in diffs)} |")
    lines.append("")
    if note := source_note(CUDA_RAW / "niah-seeds"):
        lines += [note, ""]
    niah_seeds_figure(counts, seeds, prompts)


def niah_seeds_figure(counts, seeds, prompts):
    """One row of dots per cache: its correct answers per seed, the mean as a bar."""
    names = list(counts)
    low = min(min(v.values()) for v in counts.values()) - 2
    high = max(max(v.values()) for v in counts.values()) + 2
    width, left, right, row_h, top = 640, 110, 20, 34, 40
    height = top + row_h * len(names) + 40
    x = lambda v: left + (width - left - right) * (v - low) / (high - low)
    svg = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif" font-size="12">',
           f'<text x="{width / 2}" y="18" text-anchor="middle" font-size="14">NIAH: correct of {prompts} prompts per seed ({len(seeds)} seeds, CUDA)</text>']
    for v in range(low, high + 1):
        if v % 2 == 0:
            svg.append(f'<line x1="{x(v):.1f}" x2="{x(v):.1f}" y1="{top - 6}" y2="{height - 34}" stroke="#eee"/>')
            svg.append(f'<text x="{x(v):.1f}" y="{height - 20}" text-anchor="middle">{v}</text>')
    for i, name in enumerate(names):
        y = top + row_h * i + row_h / 2
        color = COLORS.get(name.split("-")[0], "#000000")
        svg.append(f'<text x="{left - 8}" y="{y + 4:.1f}" text-anchor="end">{name}</text>')
        values = [counts[name][s] for s in seeds if s in counts[name]]
        seen = {}
        for v in values:  # equal counts stack vertically
            k = seen.get(v, 0)
            seen[v] = k + 1
            svg.append(f'<circle cx="{x(v):.1f}" cy="{y - 10 + 3.5 * k:.1f}" r="3" fill="{color}" fill-opacity="0.7"/>')
        mean = sum(values) / len(values)
        svg.append(f'<line x1="{x(mean):.1f}" x2="{x(mean):.1f}" y1="{y - 14:.1f}" y2="{y + 14:.1f}" stroke="black" stroke-width="2"><title>{name}: mean {mean:.2f}</title></line>')
    svg.append("</svg>")
    (CUDA_RAW / "niah-seeds.svg").write_text("\n".join(svg) + "\n")


# OSCAR as `oscar` runs it by default: g128 with the 4-bit band of 768 tokens (the campaign's
# oscar-g128 jobs have no band, like the other methods: the comparison of the methods alone).
DEFAULT = "oscar-g128-band768"
NIAH_CACHES = ["bf16"] + [f"{m}-g128" for m in METHODS] + [DEFAULT]
BAND_METHODS = ["oscar", "quarot", "naive"]  # KIVI's keys are grouped over tokens: no band


def target_summary(lines, seed_counts):
    """OSCAR's default configuration against the issue's targets, from the CUDA campaign, which holds
    every job (the CPU campaign agrees within 0.06% where both ran). The other methods are compared
    with the band too where they can have one (KIVI cannot)."""
    def delta(name, reference):
        result, ref = load_cuda(name), load_cuda(reference)
        return None if result is None or ref is None else 100 * (result["ppl"] / ref["ppl"] - 1)
    oscar = load_cuda(f"ppl-{DEFAULT}")
    if oscar is None:
        return
    def others(kind):
        prefix = "ppl-" if kind == "valid" else "ppl-unseen-"
        reference = "ppl-bf16" if kind == "valid" else "ppl-unseen-bf16"
        table = {m: delta(f"{prefix}{m}-g128-band768", reference) for m in BAND_METHODS if m != "oscar"}
        table["kivi"] = delta(f"{prefix}kivi-g128", reference)
        return delta(f"{prefix}{DEFAULT}", reference), delta(f"{prefix}oscar-g128", reference), table
    def verdict(ok):
        return "**met**" if ok else "**missed**"
    lines += ["## Against the targets (OSCAR g128 at our defaults, CUDA campaign)", "",
              "OSCAR's defaults include a 4-bit band of 768 tokens behind the bf16 window (`--kv-band-tokens 768`, "
              "[its section](#a-4-bit-band-behind-the-recent-window)); QuaRot and naive are given the same band "
              "here, KIVI cannot have one.", "",
              "| target | reached | |", "|---|---|---|",
              f"| at most 2.30 bits per element at 128K | {oscar['bpe_128k']:.3f} | {verdict(oscar['bpe_128k'] <= 2.30)} |"]
    without = {}
    for label, kind in [("valid.xz", "valid"), ("unseen text", "unseen")]:
        mine, without[label], table = others(kind)
        if mine is None:
            continue
        lines.append(f"| perplexity within 1.0% of bf16 on {label} | {mine:+.2f}% | {verdict(mine <= 1.0)} |")
        known = {m: d for m, d in table.items() if d is not None}
        beaten = [m for m, d in known.items() if d <= mine]
        lines.append(f"| ranked above naive, QuaRot and KIVI on {label} | " +
                     ", ".join(f"{m} {d:+.2f}%" for m, d in known.items()) + f" | {verdict(not beaten)} |")
    if DEFAULT in seed_counts and len(seed_counts["bf16"]) >= 3:
        gap, half, diffs = gap_to_bf16(seed_counts, DEFAULT)
        total = load_cuda("niah-bf16")["total"]
        lines.append(f"| NIAH within 1-2 prompts of bf16 | {-gap:.2f} fewer per {total} prompts on average over "
                     f"{len(diffs)} seeds (95% CI {-gap - half:.2f} to {-gap + half:.2f}); per seed "
                     f"{min(diffs):+d} to {max(diffs):+d} against bf16 | {verdict(-gap <= 2)} on average, "
                     f"on {sum(d >= -2 for d in diffs)} of {len(diffs)} seeds |")
        rivals = {n.split("-")[0]: gap_to_bf16(seed_counts, n)[0] for n in seed_counts
                  if n not in ("bf16", DEFAULT, "oscar-g128")}
        beaten = [m for m, g in rivals.items() if g >= gap]
        lines.append("| ranked above naive, QuaRot and KIVI on NIAH | per run vs bf16: OSCAR " f"{gap:+.2f}, " +
                     ", ".join(f"{m} {g:+.2f}" for m, g in rivals.items()) + " (these without a band) | "
                     f"{verdict(not beaten)} |")
    lines.append("")
    if "oscar-g128" in seed_counts and all(v is not None for v in without.values()):
        gap, half, _ = gap_to_bf16(seed_counts, "oscar-g128")
        lines += [f"Without the band (`--kv-band-tokens 0`, the layout of the tables below, where OSCAR ranks first "
                  f"too): valid.xz {without['valid.xz']:+.2f}%, unseen text {without['unseen text']:+.2f}%, NIAH "
                  f"{gap:+.2f} per run (95% CI {gap - half:+.2f} to {gap + half:+.2f}) at "
                  f"{load_cuda('ppl-oscar-g128')['bpe_128k']:.3f} bits per element at 128K.", ""]


def band_section(lines, seed_counts):
    """The 4-bit band of 768 tokens behind the bf16 window (--kv-band-tokens 768, OSCAR's default),
    per method that can have one, on both texts and backends, and what it changes for the needles."""
    oscar = load("ppl-oscar-g128-band768")
    if oscar is None:
        return
    lines += ["## A 4-bit band behind the recent window", "",
              "`--kv-band-tokens 768` (OSCAR's default at INT2): the 768 tokens behind the bf16 window are also held "
              "at 4 bits (INT4 over the same groups and rotation, f16 scale and zero, no clipping, rounded to nearest) "
              "and read from there; each token still gets its 2-bit codes when it leaves the window, and its 4-bit "
              "copy is dropped when it falls behind the band, so at long context the band costs a fixed 768 tokens "
              "of 4-bit pages per sequence. Both backends read it (CUDA: the decode kernel's INT4 items, the "
              "prefill kernel and the migration). KIVI quantizes keys over groups of tokens and has no band. "
              "Every other flag as in the campaign; perplexity against bf16 ± the paired standard error.", "",
              "| configuration | valid.xz CPU | valid.xz CUDA | unseen text CPU | unseen text CUDA | "
              "bits/element at 128K |", "|---|---:|---:|---:|---:|---:|"]
    def cell(name, reference, loader):
        result, ref = loader(name), loader(reference)
        if result is None or ref is None:
            return "not run"
        d, se = paired(result, ref)
        return f"{result['ppl']:.4f} ({d:+.2f}% ±{se:.2f}%)"
    for method in BAND_METHODS:
        for suffix, label in [("", f"{method} g128"), ("-band768", f"{method} g128, band 768")]:
            name = f"{method}-g128{suffix}"
            result = load(f"ppl-{name}")
            bpe = "" if result is None else f"{result['bpe_128k']:.3f}"
            lines.append(f"| {label} | {cell(f'ppl-{name}', 'ppl-bf16', load)} | "
                         f"{cell(f'ppl-{name}', 'ppl-bf16', load_cuda)} | "
                         f"{cell(f'ppl-unseen-{name}', 'ppl-unseen-bf16', load)} | "
                         f"{cell(f'ppl-unseen-{name}', 'ppl-unseen-bf16', load_cuda)} | {bpe} |")
    lines.append("")
    bf16, banded, default = load_cuda("niah-bf16"), load_cuda(f"niah-{DEFAULT}"), load_cuda("niah-oscar-g128")
    if bf16 and banded and default and DEFAULT in seed_counts and "oscar-g128" in seed_counts:
        # Prompts lost against bf16 with seed 1, and those whose needle (at depth x context) lies behind the band.
        lost = [(c, b["correct"] - c["correct"]) for c, b in zip(banded["cells"], bf16["cells"]) if b["correct"] > c["correct"]]
        behind = sum(n for c, n in lost if c["depth"] * c["context"] < c["context"] - 256 - 768)
        seeds = sorted(set(seed_counts[DEFAULT]) & set(seed_counts["oscar-g128"]))
        diffs = [seed_counts[DEFAULT][s] - seed_counts["oscar-g128"][s] for s in seeds]
        mean, sd = mean_sd(diffs)
        half = T95.get(len(diffs) - 1, 1.96) * sd / math.sqrt(len(diffs))
        lines += [f"Needles (CUDA, {bf16['total']} prompts per seed): with the band {mean:+.2f} per run against OSCAR "
                  f"without it over {len(seeds)} seeds (95% CI {mean - half:+.2f} to {mean + half:+.2f}; better on "
                  f"{sum(d > 0 for d in diffs)}, worse on {sum(d < 0 for d in diffs)}). With seed 1 it answers "
                  f"{banded['correct']} of {banded['total']} ([svg]({CUDA_RAW.name}/niah-{DEFAULT}.svg)), as without "
                  f"the band, bf16 {bf16['correct']}: {behind} of the {sum(n for _, n in lost)} prompts it loses "
                  "against bf16 have their needle behind the band, in 2-bit keys.", ""]


def niah_agreement_table(lines):
    """The same 40 needle prompts per cache on both backends (NIAH_PROMPTS=1), cell by cell."""
    root = OUT / "niah-agreement"
    lines += ["| cache | CPU correct | CUDA correct | cells with the same answers |", "|---|---:|---:|---:|"]
    for name in ["bf16"] + [f"{m}-g128" for m in METHODS]:
        cpu, cuda = load(f"niah-{name}", root / "cpu"), load(f"niah-{name}", root / "cuda")
        if cpu is None or cuda is None:
            lines.append(f"| {name} | not run | | |")
            continue
        same = sum(a["correct"] == b["correct"] for a, b in zip(cpu["cells"], cuda["cells"]))
        main_run = load_cuda(f"niah-{name}")
        label = name if main_run is None or main_run.get("kv") == cpu.get("kv") else f"{name}, as `{cpu['kv']}`"
        lines.append(f"| {label} | {cpu['correct']} / {cpu['total']} | {cuda['correct']} / {cuda['total']} | "
                     f"{same} / {len(cpu['cells'])} |")
    lines.append("")


def attention_error_table(lines):
    result, raw_dir, backend = load("attn-error-all"), RAW.name, "CPU"
    if result is None:
        result, raw_dir, backend = load_cuda("attn-error-all"), CUDA_RAW.name, "CUDA"
    if result is None:
        lines += ["Attention error: not run.", ""]
        return
    by_method = {}
    for row in result["rows"]:
        by_method.setdefault(row["method"], []).append(row)
    lines += [f"{backend} backend, over {result['tokens']} tokens of valid.xz; mean over the layers of the relative error "
              "against the float32 reference (per-layer bars in the figure). The errors are unweighted: OSCAR's "
              "error feedback moves key errors away from the directions queries take and value errors away from "
              "those the output projection weighs, which perplexity rewards and these norms need not "
              "(docs/results/notes/2026-11-25-accuracy-experiments.md). Each method runs at its own defaults (the baselines: f16 parameters, "
              "no clipping; OSCAR: q8, clip 0.84/0.92, error feedback): clipping adds to these norms what it "
              "saves in perplexity (OSCAR g128 outputs, with the rotations of 2048-token sequences: 0.384 with the "
              "clip search of the previous default, 0.479 with the fixed ratios).", "",
              "| cache | attention logits | attention outputs |", "|---|---:|---:|"]
    for method, rows in by_method.items():
        logits = sum(r["logits"] for r in rows) / len(rows)
        outputs = sum(r["outputs"] for r in rows) / len(rows)
        lines.append(f"| {method} | {logits:.4f} | {outputs:.4f} |")
    lines += ["", f"![per-layer attention error]({raw_dir}/attn-error-all.svg)", ""]


def perplexity_figure(bf16):
    """Grouped bars: perplexity increase over bf16 per method, for the four configurations."""
    configs = [("g128", ""), ("g64", ""), ("g128", "-noregions"), ("g64", "-noregions")]
    labels = ["g128", "g64", "g128, no bf16 regions", "g64, no bf16 regions"]
    values = {}
    for (group, suffix) in configs:
        for method in METHODS:
            r = load(f"ppl-{method}-{group}{suffix}")
            if r is not None:
                values[(group + suffix, method)] = paired(r, bf16)
    if not values:
        return False
    top = max(d + se for d, se in values.values()) * 1.1
    width, height, left, bottom, plot_h = 760, 360, 60, 60, 250
    group_w = (width - left - 20) / len(configs)
    bar_w = group_w / (len(METHODS) + 1)
    y = lambda v: height - bottom - plot_h * v / top
    svg = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif" font-size="12">',
           f'<text x="{width / 2}" y="18" text-anchor="middle" font-size="14">INT2 KV cache: perplexity increase over bf16 (testbed, valid.xz)</text>']
    ticks = 5
    for i in range(ticks + 1):
        v = top * i / ticks
        svg.append(f'<line x1="{left}" x2="{width - 20}" y1="{y(v):.1f}" y2="{y(v):.1f}" stroke="#ddd"/>')
        svg.append(f'<text x="{left - 6}" y="{y(v) + 4:.1f}" text-anchor="end">{v:.1f}%</text>')
    for g, ((group, suffix), label) in enumerate(zip(configs, labels)):
        x0 = left + g * group_w + bar_w / 2
        for m, method in enumerate(METHODS):
            if (group + suffix, method) not in values:
                continue
            d, se = values[(group + suffix, method)]
            x = x0 + m * bar_w
            svg.append(f'<rect x="{x:.1f}" y="{y(d):.1f}" width="{bar_w * 0.9:.1f}" height="{y(0) - y(d):.1f}" fill="{COLORS[method]}"><title>{method} {label}: {d:+.2f}% ± {se:.2f}%</title></rect>')
            xc = x + bar_w * 0.45
            svg.append(f'<line x1="{xc:.1f}" x2="{xc:.1f}" y1="{y(d - se):.1f}" y2="{y(d + se):.1f}" stroke="black"/>')
        svg.append(f'<text x="{left + g * group_w + group_w / 2:.1f}" y="{height - bottom + 18}" text-anchor="middle">{label}</text>')
    for m, method in enumerate(METHODS):
        svg.append(f'<rect x="{left + 10 + m * 110}" y="{height - 24}" width="12" height="12" fill="{COLORS[method]}"/>')
        svg.append(f'<text x="{left + 28 + m * 110}" y="{height - 14}">{method}</text>')
    svg.append("</svg>")
    (OUT / "perplexity.svg").write_text("\n".join(svg) + "\n")
    return True


def main():
    bf16 = load("ppl-bf16")
    if bf16 is None:
        sys.exit(f"{RAW}/ppl-bf16.json: missing; run scripts/results/accuracy_campaign.sh first")
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    lines = ["# Accuracy of the INT2 KV cache on the testbed model", "",
             f"Generated by `scripts/results/make_report.py` at commit {commit} on {date.today()} from the JSON "
             "files in `raw/`, `raw-cuda/` and `raw-cuda-published/`; the table below says which builds made them. Each configuration ran on the CPU backend (the reference, "
             "`raw/`) and on the CUDA backend on an H100 (`raw-cuda/`) with the same rotations file; "
             "every result is deterministic for a given build, device, text and rotations file.", "",
             "## How to reproduce", "", "```sh",
             "cmake --build build -j && scripts/results/accuracy_campaign.sh docs/results/raw build/src/cli/oscar",
             "# on the GPU machine, with the CPU campaign's rotations file copied into docs/results/raw-cuda/",
             "NIAH_SEEDS=\"$(seq 2 20)\" DEVICE=cuda scripts/results/accuracy_campaign.sh docs/results/raw-cuda build-gpu/src/cli/oscar",
             "scripts/results/make_report.py docs/results/raw docs/results docs/results/raw-cuda", "```", "",
             "The campaign script holds every command. In short: `oscar calibrate --data models/testbed/calib.xz "
             "--out rotations.safetensors` (30000 tokens in sequences of 4096, per-head rotations), then "
             "`oscar eval ppl --windows 8 --kv-cache-dtype int2 --kv-method M --kv-group-size G "
             "--kv-scale-format q8 --kv-clip-k 0.84 --kv-clip-v 0.92 --kv-band-tokens 0 [--kv-rotations FILE]` per "
             "method (the band's jobs: `--kv-band-tokens 768`, OSCAR's default), and "
             "`oscar eval niah --prompts-per-cell 3` (4 context lengths x 5 depths x 2 formats x 3 = 120 prompts).",
             "All INT2 methods get the same group parameters (q8 scale and zero, 2 bytes per group) and the same "
             "clip ratios (OSCAR's defaults: 0.84 for keys, 0.92 for values), so the tables compare the methods, "
             "not their parameter storage; a last table gives every method the per-group clip search instead.", ""]
    lines += ["| folder | backend | what built each file |", "|---|---|---|",
              "| `raw/` | CPU (the reference) | [raw/SOURCE.txt](raw/SOURCE.txt): commits de8d50e, 2d47616, a121d47, "
              "82e3bf2, b7ff5a2; 2026-11-22 to 2026-11-25 |",
              "| `raw-cuda/` | CUDA, NVIDIA H100 80GB HBM3 | [raw-cuda/SOURCE.txt](raw-cuda/SOURCE.txt): commits "
              "de8d50e, 2d47616, fb38c00, a121d47, d313ce4, b7ff5a2; 2026-11-23 to 2026-11-25 |",
              "| `raw-cuda-published/` | CUDA, NVIDIA H200 | [raw-cuda-published/SOURCE.txt](raw-cuda-published/SOURCE.txt): "
              "the published recipe's jobs, commit 5ca0320, 2026-11-28 |", ""]
    seed_counts = niah_seed_counts()
    target_summary(lines, seed_counts)
    lines += ["## Perplexity on valid.xz", "", "![perplexity increase](perplexity.svg)", ""]
    perplexity_figure(bf16)
    perplexity_tables(lines, bf16)
    variants_table(lines, bf16)
    lines += ["## Perplexity on text the testbed never saw", "",
              "NVIDIA's CUDA runtime headers (`cuda_runtime_api.h`, `driver_types.h`, `cuda.h` of CUDA 13.0): "
              "English API documentation in C comments; the testbed was trained on other text.", ""]
    unseen_table(lines)
    published_section(lines)
    lines += ["## Every method with the per-group clip search", "",
              "Each group's clip ratio chosen among 1.00, 0.96, ..., 0.72 for the least squared error "
              "(`--kv-clip-search`), the campaign's setting for every method until 2026-11-24. It fits the text "
              "the model was trained on: the best on valid.xz for every method, and worse than the fixed ratios on "
              "the unseen text for every method (docs/results/notes/2026-11-25-accuracy-experiments.md: how the fixed ratios were chosen "
              "without looking at the unseen text).", ""]
    clip_search_table(lines)
    lines += ["## Needle in a haystack", "",
              "Prompts in the testbed's two formats (models/testbed/README.md) at 1024-4000 tokens and depths "
              "0-100%, prefilled in bf16, then answered greedily against the quantized cache.", ""]
    niah_table(lines)
    niah_seeds_section(lines, seed_counts)
    lines += ["The full 120-prompt run is too slow for the CPU backend in this campaign's time (over 6 minutes "
              "per cache on 3 threads); the backends were compared on 40 prompts per cache instead (one per "
              "format and cell: `NIAH_PROMPTS=1`, results in `niah-agreement/`):", ""]
    niah_agreement_table(lines)
    if note := source_note(OUT / "niah-agreement"):
        lines += [note, ""]
    band_section(lines, seed_counts)
    lines += ["## Attention error per layer", ""]
    attention_error_table(lines)
    calibration = RAW / "rotations.txt"
    if calibration.exists():
        lines += ["## Calibration report", "", "```", calibration.read_text().rstrip(), "```", ""]
    notes = sorted((OUT / "notes").glob("*.md"))
    if notes:
        lines += ["## Notes", "",
                  "The experiments behind the defaults, dated: what was tried, what was kept and why.", ""]
        lines += [f"- [{note.name}](notes/{note.name})" for note in notes]
        lines += [""]
    (OUT / "README.md").write_text("\n".join(lines))


if __name__ == "__main__":
    main()
