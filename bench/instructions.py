#!/usr/bin/env python3
"""The client's instructions per acquire + release pair, counted by callgrind, against
bench/baseline.json.

Runs redlock_bench's `latency` and `throughput` workloads (--quick: 200 sequential pairs on one
key; 2 000 pairs, 256 in flight, on distinct keys) on five servers it starts, under
`valgrind --tool=callgrind --collect-atstart=no`. The bench turns counting on only around its
measured loop, and the servers are other processes: what is counted is the client's work for
those pairs, system calls excepted. Instruction counts do not move with the machine's load as
wall-clock figures do; a rise above the baseline by more than its `tolerance` fails. `throughput`
runs three times; its figure is the median.

It also fails when redlock::prometheus_observer (client_options::observer) costs more than
`observer_tolerance` (5 %) of a pair at 256 in flight in steady state: the difference of a full
`throughput` run (20 000 pairs) and a quick one, per pair, as docs/performance.md counts the pair.
The observer's cost is counted in the call graph of those runs with it: the library's two calls
that tell the observer of an acquire and of a release (acquire_machine::report_to,
lease_state::report_to: the event built, the observer called) and prometheus_observer's own
entries, everything they call included. Counted so, it does not move from run to run. The
difference of runs with and without the observer is printed beside it (means of three
interleaved pairs of runs): it also carries how a run's replies happened to be batched, 50 to 100
instructions per pair either way. When that difference exceeds the count by more than
`UNCOUNTED_LIMIT`, work for the observer was added outside the counted calls, and the check
fails too: the count would no longer show what the observer costs.

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
# Full and quick `throughput` runs, without and with the observer, interleaved.
THROUGHPUT_RUNS = 3
# What the observer costs the library: the calls that tell it of an acquire and a release, and
# prometheus_observer's entries (events of other kinds, should a run have any).
OBSERVER_WORK = re.compile(
    r"acquire_machine::report_to\(|lease_state::report_to\(|prometheus_observer::on_")
# How much more than the call graph's count the difference of runs with and without the observer
# may show per pair before the check says the count misses some of the observer's work: three
# times the noise of a mean of three differences.
UNCOUNTED_LIMIT = 150
HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_BASELINE = os.path.join(HERE, "baseline.json")


class run_figures:
    """One run under callgrind: its instructions and measured pairs, the bench's allocation
    counts, and the instructions counted in the observer's calls (with an observer)."""

    def __init__(self, instructions, pairs, record, observer_work):
        self.instructions = instructions
        self.pairs = pairs
        self.allocations = record.get("allocations_per_pair")
        self.steady_allocations = record.get("steady_allocations_per_pair")
        self.observer_work = observer_work

    def per_pair(self):
        return self.instructions / self.pairs


def measure(bench, workload, scratch, observer="none", quick=True):
    """Runs `workload` once under callgrind; None when the bench was built without the observer
    asked for."""
    out = os.path.join(scratch, f"callgrind.{workload}.{observer}.{'quick' if quick else 'full'}")
    command = [
        "valgrind", "--tool=callgrind", "--collect-atstart=no", f"--callgrind-out-file={out}",
        bench, "--workload", workload, "--runs", "1", "--observer", observer,
        # valgrind runs the client some fifty times slower: no per-node deadline may trip.
        "--node-timeout-ms", "10000",
    ] + (["--quick"] if quick else [])
    run = subprocess.run(command, capture_output=True, text=True)
    if run.returncode != 0 and "built without prometheus-cpp" in run.stderr:
        return None
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
    with open(out) as f:
        text = f.read()
    found = re.search(r"^(?:totals|summary): (\d+)", text, re.MULTILINE)
    if not found:
        sys.exit(f"instructions.py: no instruction total in {out}")
    observer_work = calls_into(text, OBSERVER_WORK) if observer != "none" else None
    return run_figures(int(found.group(1)), median[WORKLOADS[workload]], median, observer_work)


def steady(full, quick, value):
    """Per pair of the pairs a full run has beyond a quick one: the steady state."""
    return (value(full) - value(quick)) / (full.pairs - quick.pairs)


def median(values):
    ordered = sorted(values)
    return ordered[len(ordered) // 2]


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

    with tempfile.TemporaryDirectory(prefix="redlock-instructions-") as scratch:
        latency = measure(args.bench, "latency", scratch)
        without, with_observer = [], []  # (full, quick) pairs of `throughput` runs
        for _ in range(THROUGHPUT_RUNS):
            without.append((measure(args.bench, "throughput", scratch, quick=False),
                            measure(args.bench, "throughput", scratch)))
            full = measure(args.bench, "throughput", scratch, "prometheus", quick=False)
            if full is not None:
                with_observer.append((full, measure(args.bench, "throughput", scratch,
                                                    "prometheus")))

    quick_runs = sorted((quick for _, quick in without), key=run_figures.per_pair)
    throughput = quick_runs[len(quick_runs) // 2]
    measured = {}
    for workload, run in (("latency", latency), ("throughput", throughput)):
        measured[workload] = {"instructions_per_pair": round(run.per_pair()),
                              "allocations_per_pair": run.allocations}
        if run.steady_allocations is not None:
            measured[workload]["steady_allocations_per_pair"] = run.steady_allocations

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

    def instructions(run):
        return run.instructions

    steady_pairs = [steady(full, quick, instructions) for full, quick in without]
    pair = median(steady_pairs)
    print(f"throughput in steady state: {round(pair)} client instructions per pair "
          f"(median of {len(steady_pairs)}: {', '.join(str(round(p)) for p in steady_pairs)})")
    if not with_observer:
        print("prometheus_observer: not measured (built without prometheus-cpp)")
    else:
        limit = baseline.get("observer_tolerance", 0.05)
        counted = median([steady(full, quick, lambda run: run.observer_work)
                          for full, quick in with_observer])
        share = counted / pair
        verdict, passed = judge(1 + share, limit, "the observer costs more than")
        failed = failed or not passed
        with_pairs = [steady(full, quick, instructions) for full, quick in with_observer]
        difference = sum(with_pairs) / len(with_pairs) - sum(steady_pairs) / len(steady_pairs)
        print(f"prometheus_observer: {round(counted)} client instructions per pair in steady "
              f"state (its calls, counted in the call graph), {share:.1%} of a pair: {verdict}; "
              f"runs with and without it differ by {round(difference)} "
              f"({difference / pair:.1%}, means of {len(with_pairs)})")
        if difference - counted > UNCOUNTED_LIMIT:
            failed = True
            print(f"FAILED: runs with the observer cost {round(difference - counted)} per pair "
                  f"more than its counted calls (at most {UNCOUNTED_LIMIT}): the observer's work "
                  f"must stay inside acquire_machine::report_to and lease_state::report_to")
    if failed:
        print("instructions.py: the client's cost per pair rose. If the rise is wanted, update "
              "bench/baseline.json (--update) in a commit of its own that says why.")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
