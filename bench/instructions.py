#!/usr/bin/env python3
"""The client's instructions per acquire + release pair, counted by callgrind, against
bench/baseline.json.

Runs redlock_bench's `latency` and `throughput` workloads (--quick: 200 sequential pairs on one
key; 2 000 pairs, 256 in flight, on distinct keys) on five servers it starts, under
`valgrind --tool=callgrind --collect-atstart=no`. The bench turns counting on only around its
measured loop, and the servers are other processes: what is counted is the client's work for
those pairs, system calls excepted. Instruction counts do not move with the machine's load as
wall-clock figures do; a rise above the baseline by more than its `tolerance` fails.

It also fails when redlock::prometheus_observer (client_options::observer) costs more than
`observer_tolerance` (5 %) of a pair at 256 in flight. The observer's cost is counted on `latency`,
run with and without it, ten times each and interleaved: a sequential pair takes the same path
every time, so the difference is what the observer costs, its calls and the events the library
builds for it. How one run's replies are batched moves its count by a hundred or two either way:
ten runs each bring the difference's error well below the margin to the limit. At 256 in flight a slower client
also batches its replies differently, which moves the count by about 1 % either way and would be
charged to the observer; the cost is set against the `throughput` pair, the cheaper of the two.

  bench/instructions.py --bench BUILD/bench/redlock_bench           check (exit 1 on a rise)
  bench/instructions.py --bench BUILD/bench/redlock_bench --update  write the measured figures
                                                                    as the new baseline

The baseline changes only on purpose, in a commit of its own that says why.
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

WORKLOADS = {
    # workload: the JSON parameter that counts its measured pairs
    "latency": "iterations",
    "throughput": "pairs",
}
# Runs of `latency` with and without the observer whose means are compared.
OBSERVER_RUNS = 10
HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_BASELINE = os.path.join(HERE, "baseline.json")


def measure(bench, workload, scratch, observer="none"):
    out = os.path.join(scratch, f"callgrind.{workload}.{observer}")
    command = [
        "valgrind", "--tool=callgrind", "--collect-atstart=no", f"--callgrind-out-file={out}",
        bench, "--workload", workload, "--quick", "--runs", "1", "--observer", observer,
        # valgrind runs the client some fifty times slower: no per-node deadline may trip.
        "--node-timeout-ms", "10000",
    ]
    run = subprocess.run(command, capture_output=True, text=True)
    if run.returncode != 0 and "built without prometheus-cpp" in run.stderr:
        return None, None, None
    if run.returncode != 0:
        sys.exit(f"instructions.py: {workload} failed under callgrind (exit {run.returncode}):\n"
                 f"{run.stderr[-4000:]}")
    median = None
    for line in run.stdout.splitlines():
        if line.startswith("{"):
            record = json.loads(line)
            if record.get("stat") == "median":
                median = record
    if median is None:
        sys.exit(f"instructions.py: {workload} printed no result line:\n{run.stdout[-2000:]}")
    if median.get("errors", 0) != 0:
        sys.exit(f"instructions.py: {workload} had failed operations under callgrind:\n"
                 f"{run.stderr[-4000:]}")
    pairs = median[WORKLOADS[workload]]
    with open(out) as f:
        text = f.read()
    found = re.search(r"^(?:totals|summary): (\d+)", text, re.MULTILINE)
    if not found:
        sys.exit(f"instructions.py: no instruction total in {out}")
    return (int(found.group(1)) / pairs, median.get("allocations_per_pair"),
            median.get("steady_allocations_per_pair"))


def judge(ratio, limit, failure):
    """The verdict on a ratio against 1 + limit, and whether it passed."""
    if ratio > 1 + limit:
        return f"FAILED: {failure} {limit:.0%}", False
    return "ok", True


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bench", required=True, help="the redlock_bench program")
    parser.add_argument("--baseline", default=DEFAULT_BASELINE)
    parser.add_argument("--update", action="store_true",
                        help="write the measured figures as the baseline instead of checking")
    args = parser.parse_args()
    if not shutil.which("valgrind"):
        sys.exit("instructions.py: valgrind is not installed (scripts/bootstrap.sh installs it)")
    if not os.access(args.bench, os.X_OK):
        sys.exit(f"instructions.py: no program {args.bench} (build the redlock_bench target)")

    measured = {}
    with tempfile.TemporaryDirectory(prefix="redlock-instructions-") as scratch:
        for workload in WORKLOADS:
            per_pair, allocations, steady = measure(args.bench, workload, scratch)
            measured[workload] = {"instructions_per_pair": round(per_pair),
                                  "allocations_per_pair": allocations}
            if steady is not None:
                measured[workload]["steady_allocations_per_pair"] = steady
        observer_cost = None
        first_with, _, _ = measure(args.bench, "latency", scratch, observer="prometheus")
        if first_with is not None:
            withouts, withs = [], [first_with]
            for run in range(OBSERVER_RUNS):
                withouts.append(measure(args.bench, "latency", scratch)[0])
                if run > 0:
                    withs.append(measure(args.bench, "latency", scratch, observer="prometheus")[0])
            observer_cost = sum(withs) / len(withs) - sum(withouts) / len(withouts)

    if args.update:
        baseline = {"tolerance": 0.10, "observer_tolerance": 0.05}
        if os.path.exists(args.baseline):
            with open(args.baseline) as f:
                old = json.load(f)
            for key in ("tolerance", "observer_tolerance"):
                baseline[key] = old.get(key, baseline[key])
        baseline.update(measured)
        with open(args.baseline, "w") as f:
            json.dump(baseline, f, indent=2)
            f.write("\n")
        for workload, figures in measured.items():
            print(f"{workload}: {figures['instructions_per_pair']} instructions per pair "
                  f"(written to {os.path.relpath(args.baseline)})")
        return 0

    with open(args.baseline) as f:
        baseline = json.load(f)
    tolerance = baseline["tolerance"]
    failed = False
    for workload, figures in measured.items():
        now = figures["instructions_per_pair"]
        before = baseline[workload]["instructions_per_pair"]
        ratio = now / before
        verdict, passed = judge(ratio, tolerance, "more than the baseline +")
        failed = failed or not passed
        print(f"{workload}: {now} client instructions per pair, baseline {before} "
              f"({ratio:.3f}x); {figures['allocations_per_pair']} allocations per pair"
              + (f" ({figures['steady_allocations_per_pair']} in the second half)"
                 if "steady_allocations_per_pair" in figures else "")
              + f": {verdict}")
    if observer_cost is None:
        print("prometheus_observer: not measured (built without prometheus-cpp)")
    else:
        observer_limit = baseline.get("observer_tolerance", 0.05)
        pair = measured["throughput"]["instructions_per_pair"]
        observer_ratio = 1 + observer_cost / pair
        verdict, passed = judge(observer_ratio, observer_limit, "the observer costs more than")
        failed = failed or not passed
        print(f"prometheus_observer: {round(observer_cost)} client instructions per pair "
              f"(latency with and without it, means of {OBSERVER_RUNS} runs each), "
              f"{observer_ratio - 1:.1%} of a throughput pair: {verdict}")
    if failed:
        print("instructions.py: the client's cost per pair rose. If the rise is wanted, update "
              "bench/baseline.json (--update) in a commit of its own that says why.")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
