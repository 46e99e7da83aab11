#!/usr/bin/env python3
"""Figures for docs/performance.md from bench/run.sh's JSON lines.

  bench/plot.py RESULTS.jsonl [MORE.jsonl ...] [--out docs/images]

Reads the median lines (redlock-bench/1, "stat": "median") of every file given; for a workload
measured more than once the last file wins, except renewal_scale, whose lines are kept per number
of leases (run it with several --leases to draw its curve). Writes one PNG per figure, and
names on stdout the figures it could not draw for want of the workload behind them.
Needs matplotlib (Debian: python3-matplotlib; scripts/bootstrap.sh --plots installs it).
"""
import argparse
import json
import os
import re
import sys

import matplotlib

matplotlib.use("Agg")  # files only, no display
import matplotlib.pyplot as plt  # noqa: E402


def read_medians(paths):
    medians, renewal = {}, {}
    for path in paths:
        with open(path) as f:
            for line in f:
                if not line.startswith("{"):
                    continue
                record = json.loads(line)
                if record.get("schema") != "redlock-bench/1" or record.get("stat") != "median":
                    continue
                if record["workload"] == "renewal_scale":
                    renewal[record.get("leases_target", record.get("leases"))] = record
                else:
                    medians[record["workload"]] = record
    return medians, renewal


def series(record, pattern):
    """(x, value) pairs for the figures whose names match `pattern` (one group: x)."""
    found = []
    for name, value in record.items():
        m = re.fullmatch(pattern, name)
        if m:
            found.append((m.group(1), value))
    return found


def numeric_sorted(pairs):
    return sorted(((int(x), v) for x, v in pairs), key=lambda p: p[0])


def save(fig, out, name):
    path = os.path.join(out, name)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    print(f"plot.py: wrote {path}")


def throughput_by_inflight(medians, out):
    curve = medians.get("scale_curve")
    points = numeric_sorted(series(curve, r"pairs_per_s_at_(\d+)")) if curve else []
    if not points:
        return "scale_curve"
    fig, ax = plt.subplots(figsize=(6, 3.6))
    ax.plot([x for x, _ in points], [v for _, v in points], marker="o")
    ax.set_xscale("log", base=2)
    ax.set_xticks([x for x, _ in points])
    ax.set_xticklabels([str(x) for x, _ in points])
    ax.set_xlabel("acquire + release pairs in flight (one client)")
    ax.set_ylabel("pairs / s")
    ax.set_title(f"Throughput against work in flight, {curve['nodes']} nodes")
    ax.grid(True, alpha=0.3)
    save(fig, out, "throughput_by_inflight.png")


def latency_by_nodes(medians, out):
    curve = medians.get("scale_curve")
    p50 = numeric_sorted(series(curve, r"acquire_p50_us_n(\d+)")) if curve else []
    p99 = numeric_sorted(series(curve, r"acquire_p99_us_n(\d+)")) if curve else []
    if not p50:
        return "scale_curve"
    fig, ax = plt.subplots(figsize=(6, 3.6))
    ax.plot([x for x, _ in p50], [v for _, v in p50], marker="o", label="p50")
    ax.plot([x for x, _ in p99], [v for _, v in p99], marker="s", label="p99")
    ax.set_xlabel("Redis nodes (quorum = nodes / 2 + 1)")
    ax.set_ylabel("acquire latency, µs")
    ax.set_xticks([x for x, _ in p50])
    ax.set_title("Acquire latency against the number of nodes")
    ax.legend()
    ax.grid(True, alpha=0.3)
    save(fig, out, "latency_by_nodes.png")


def lock_against_floors(medians, out):
    latency, one = medians.get("latency"), medians.get("one_node")
    if not latency and not one:
        return "latency and one_node"
    panels = [p for p in (latency, one) if p]
    fig, axes = plt.subplots(1, len(panels), figsize=(5 * len(panels), 3.6), squeeze=False)
    column = 0
    if latency:
        ax = axes[0][column]
        column += 1
        labels = ["one SET,\none node", "SET to all,\nquorum replies", "lock acquire", "lock release"]
        values = [latency["set_rtt_p50_us"], latency["set_fanout_quorum_p50_us"],
                  latency["acquire_p50_us"], latency["release_p50_us"]]
        ax.bar(labels, values, color=["#999999", "#999999", "#1f77b4", "#1f77b4"])
        ax.set_ylabel("p50, µs")
        ax.set_title(f"Latency against the raw fan-out, {latency['nodes']} nodes")
    if one:
        ax = axes[0][column]
        labels = ["server bound\n(pipelined)", "lock"]
        values = [one["server_bound_pairs_per_s"], one["pairs_per_s"]]
        ax.bar(labels, values, color=["#999999", "#1f77b4"])
        ax.set_ylabel("acquire + release pairs / s")
        ax.set_title(f"One node: {one['lock_vs_server_bound']:.2f}× the server's bound")
    save(fig, out, "lock_against_floors.png")


def waits_under_contention(medians, out):
    bars = []  # (label, p50, p99)
    if "contention" in medians:
        m = medians["contention"]
        bars.append(("mutex", m["wait_p50_us"], m["wait_p99_us"]))
    if "semaphore" in medians:
        m = medians["semaphore"]
        for permits, p50 in numeric_sorted(series(m, r"wait_p50_us_permits_(\d+)")):
            bars.append((f"semaphore({permits})", p50, m[f"wait_p99_us_permits_{permits}"]))
    if "rw_lock" in medians:
        m = medians["rw_lock"]
        for percent, p50 in numeric_sorted(series(m, r"read_wait_p50_us_reads_(\d+)")):
            bars.append((f"rw read\n{percent} % reads", p50, m[f"read_wait_p99_us_reads_{percent}"]))
            bars.append((f"rw write\n{percent} % reads", m[f"write_wait_p50_us_reads_{percent}"],
                         m[f"write_wait_p99_us_reads_{percent}"]))
    if "multi" in medians:
        m = medians["multi"]
        for tag, p50 in series(m, r"contended_wait_p50_us_(.+)"):
            bars.append((f"set {tag}", p50, m[f"contended_wait_p99_us_{tag}"]))
    if not bars:
        return "contention, semaphore, rw_lock and multi"
    fig, ax = plt.subplots(figsize=(max(6, 1.1 * len(bars)), 4))
    xs = range(len(bars))
    ax.bar([x - 0.2 for x in xs], [b[1] / 1000 for b in bars], width=0.4, label="p50")
    ax.bar([x + 0.2 for x in xs], [b[2] / 1000 for b in bars], width=0.4, label="p99")
    ax.set_xticks(list(xs))
    ax.set_xticklabels([b[0] for b in bars], fontsize=8)
    ax.set_ylabel("wait for the lock, ms")
    ax.set_title("Waiting under contention (16 contenders, 1 ms holds)")
    ax.legend()
    ax.grid(True, axis="y", alpha=0.3)
    save(fig, out, "waits_under_contention.png")


def renewal_cost(renewal, out):
    if not renewal:
        return "renewal_scale"
    points = sorted(renewal.values(), key=lambda r: r["leases"])
    leases = [r["leases"] for r in points]
    fig, cpu = plt.subplots(figsize=(6, 3.6))
    cpu.plot(leases, [r["client_cpu_pct"] for r in points], marker="o", color="#1f77b4")
    cpu.set_xscale("log")
    cpu.set_xlabel("leases held, each renewed at half its TTL")
    cpu.set_ylabel("client CPU, % of one core", color="#1f77b4")
    memory = cpu.twinx()
    memory.plot(leases, [r["per_lease_bytes"] for r in points], marker="s", color="#d62728")
    memory.set_ylabel("memory per lease, bytes", color="#d62728")
    for r in points:
        if r.get("leases_lost", 0) > 0:  # the renewals fell behind: say so on the curve
            cpu.annotate(f"{r['leases_lost']:.0f} of {r['leases']:.0f}\nleases lost",
                         (r["leases"], r["client_cpu_pct"]), textcoords="offset points",
                         xytext=(-90, -10), fontsize=8, color="#1f77b4")
    cpu.set_title("What renewing many leases costs the client")
    cpu.grid(True, alpha=0.3)
    save(fig, out, "renewal_cost.png")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", nargs="+", help="JSON lines of bench/run.sh or redlock_bench")
    parser.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "docs",
                                                      "images"))
    args = parser.parse_args()
    medians, renewal = read_medians(args.results)
    os.makedirs(args.out, exist_ok=True)
    missing = [throughput_by_inflight(medians, args.out), latency_by_nodes(medians, args.out),
               lock_against_floors(medians, args.out), waits_under_contention(medians, args.out),
               renewal_cost(renewal, args.out)]
    for what in filter(None, missing):
        print(f"plot.py: a figure was left out: no median line of {what} in the input")
    return 0


if __name__ == "__main__":
    sys.exit(main())
