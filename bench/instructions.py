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
`observer_tolerance` (5 %) of a pair at 256 in flight, the cheaper of the two pairs. The observer's
cost is counted in the call graph of a `latency` run with it: the library's calls into the
observer (call_user_callback<call_observer<...>>, once per acquire and once per release) and the
building of the events it is given (acquire_machine::event, lease_state::report_to), everything
they call included, per pair. Counted so, it does not move from run to run. For comparison the
difference of `latency` with and without it (means of three interleaved runs each) is printed
too; it also carries how a run's replies happened to be batched, a hundred or two instructions
either way, which near the limit would decide the check by chance.

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
# Runs of `latency` with and without the observer whose means are compared (for comparison).
OBSERVER_RUNS = 3
# What the observer costs the library: its calls into the observer, and the events it builds for it.
OBSERVER_WORK = re.compile(r"call_observer<|acquire_machine::event\(|lease_state::report_to\(")
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
    if observer != "none":
        # The total, and what went to the observer's work.
        return int(found.group(1)) / pairs, calls_into(text, OBSERVER_WORK) / pairs, None
    return (int(found.group(1)) / pairs, median.get("allocations_per_pair"),
            median.get("steady_allocations_per_pair"))


def calls_into(text, callee):
    """The instructions spent in calls to functions whose names match `callee`, made from functions
    whose names do not (so that each entry is counted once, with all it calls), read from a
    callgrind output file's text."""
    names = {}  # callgrind's name compression: "(id) name" the first time, "(id)" after

    def name_of(spec):
        found = re.match(r"\((\d+)\)(?: (.*))?", spec)
        if not found:
            return spec
        if found.group(2) is not None:
            names[found.group(1)] = found.group(2)
        return names.get(found.group(1), "")

    caller, target, total, entries, take_next = "", None, 0, 0, False
    for line in text.splitlines():
        if line.startswith("fn="):
            caller = name_of(line[3:])
        elif line.startswith("cfn="):
            target = name_of(line[4:])
        elif line.startswith("calls="):
            take_next = (target is not None and callee.search(target) is not None
                         and callee.search(caller) is None)
            if take_next:
                entries += int(line[6:].split()[0])
        elif take_next and line and (line[0].isdigit() or line[0] in "+-*"):
            total += int(line.split()[1])  # the call's inclusive cost
            take_next = False
    if entries == 0:
        sys.exit("instructions.py: no call into the observer's work was found in the call graph "
                 f"(no function matching {callee.pattern!r} was called)")
    return total


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
        observer_cost = observer_difference = None
        first_with, observer_cost, _ = measure(args.bench, "latency", scratch,
                                               observer="prometheus")
        if first_with is not None:
            withouts, withs = [], [first_with]
            for run in range(OBSERVER_RUNS):
                withouts.append(measure(args.bench, "latency", scratch)[0])
                if run > 0:
                    withs.append(measure(args.bench, "latency", scratch, observer="prometheus")[0])
            observer_difference = sum(withs) / len(withs) - sum(withouts) / len(withouts)

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
              f"(its calls and events, counted in latency's call graph), "
              f"{observer_ratio - 1:.1%} of a throughput pair: {verdict}; latency with and "
              f"without it differs by {round(observer_difference)} "
              f"(means of {OBSERVER_RUNS} runs each)")
    if failed:
        print("instructions.py: the client's cost per pair rose. If the rise is wanted, update "
              "bench/baseline.json (--update) in a commit of its own that says why.")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
