#!/usr/bin/env python3
"""Summarizes what `bench/cuda_suite.sh profile-kv-kernels` brings back as one JSON file: each
kernel's median time over its launches (kv_kernels_ncu.csv, Nsight Compute's raw page), and the
error-feedback kernel's occupancy, pipes and stall reasons (feedback_ncu_raw.csv).

    usage: scripts/results/kv_kernels_json.py FOLDER COMMIT OUT.json [NOTE]
"""
import csv
import datetime
import json
import re
import statistics
import sys


def raw_rows(path):
    """Nsight's raw CSV: a header, a row of units, then one row per launch, as dicts."""
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    return [dict(zip(rows[0], row)) for row in rows[2:]]


def number(text):
    return float(text.replace(",", ""))


def short_name(name):
    """Without arguments, return type and namespaces (the two reports abbreviate them apart)."""
    name = re.sub(r"\(.*", "", name).removeprefix("void ").replace("<unnamed>", "unnamed")
    base, bracket, arguments = name.partition("<")
    return base.rsplit("::", 1)[-1] + bracket + arguments


def kernels(launches):
    by_name = {}
    for launch in launches:
        by_name.setdefault(short_name(launch["Kernel Name"]), []).append(launch)
    return [{"kernel": name, "launches": len(runs),
             "median_us": round(statistics.median(number(r["gpu__time_duration.sum"])
                                                  for r in runs) * 1e3, 1),
             "grid": int(number(runs[0]["launch__grid_size"])), "block": runs[0]["Block Size"],
             "registers": int(number(runs[0]["launch__registers_per_thread"]))}
            for name, runs in by_name.items()]


def feedback(launch):
    value = lambda key: number(launch[key])
    stall = re.compile(r"smsp__average_warps_issue_stalled_(\w+)_per_issue_active\.ratio")
    stalls = {m.group(1): round(value(k), 3) for k in launch
              if (m := stall.fullmatch(k)) and value(k) >= 0.01}
    pct = "pct_of_peak_sustained_active"
    return {"kernel": short_name(launch["Kernel Name"]), "launch": "its fourth (--launch-skip 3)",
            "duration_us": value("gpu__time_duration.sum"),
            "sm_clock_ghz": round(value("gpc__cycles_elapsed.avg.per_second"), 3),
            "warp_instructions": int(value("smsp__inst_executed.sum")),
            "issue_active_pct": round(value(f"smsp__issue_active.avg.{pct}"), 1),
            "warps_per_scheduler": round(value("smsp__warps_active.avg.per_cycle_active"), 2),
            "eligible_warps_per_scheduler":
                round(value("smsp__warps_eligible.avg.per_cycle_active"), 2),
            "fma_pipe_pct": round(value(f"sm__inst_executed_pipe_fma.avg.{pct}"), 1),
            "lsu_pipe_pct": round(value(f"sm__inst_executed_pipe_lsu.avg.{pct}"), 1),
            "spill_instructions": int(value("sass__inst_executed_register_spilling")),
            "stall_cycles_per_issue": stalls}


def main():
    folder, commit, out = sys.argv[1:4]
    note = "medians over each kernel's launches, one kernel at a time (ncu serializes them)"
    launches = raw_rows(f"{folder}/kv_kernels_ncu.csv")
    summary = {
        "command": "bench/cuda_suite.sh profile-kv-kernels",
        "commit": commit,
        "date": datetime.date.today().isoformat(),
        "device": launches[0]["device__attribute_display_name"],
        "note": note + ("; " + sys.argv[4] if len(sys.argv) > 4 else ""),
        "kernels": kernels(launches),
        "feedback_kernel": feedback(raw_rows(f"{folder}/feedback_ncu_raw.csv")[0]),
    }
    with open(out, "w") as f:
        json.dump(summary, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
