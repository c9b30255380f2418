"""Crash figures of the fault matrix: kill -9 at random points, resume, compare (issue 15).

Run:  python benchmarks/bench_faults.py [--trials 20] [--seed N] [--kill-window 0.3,0.95]

Each trial starts `normlab llm-run` against the stub server (its own process), kills it with
SIGKILL at a random point (journal records are written in two halves with a short pause, so
many kills land inside a write), reruns the same command and compares the decisions table record
for record with an uninterrupted run. Prints trials, survived, lost, duplicated, hung, kills
inside a write, and the peak resident memory of this process and its children. Each kill comes
at a uniform fraction (``--kill-window``) of the uninterrupted run's wall time, start-up included:
``--kill-window 0.05,0.6`` aims at the start (directory, settings, first requests). The same
harness runs in CI (tests/llm_runs/test_fault_matrix.py). Not a timed test.
"""

from __future__ import annotations

import argparse
import json
import resource
import time


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--trials", type=int, default=20)
    p.add_argument("--seed", type=int, default=20261123)
    p.add_argument("--kill-window", default="0.3,0.95",
                   help="LO,HI: kills at a uniform fraction of the uninterrupted run's wall time (default 0.3,0.95)")
    args = p.parse_args(argv)
    try:
        lo, hi = (float(x) for x in args.kill_window.split(","))
    except ValueError:
        p.error(f"--kill-window must be LO,HI (two numbers); got {args.kill_window!r}")
    if not 0 <= lo < hi:
        p.error(f"--kill-window needs 0 <= LO < HI; got {args.kill_window!r}")
    from normlab.llm_runs.testing import kill_resume_trials

    t0 = time.perf_counter()
    res = kill_resume_trials(args.trials, rng=args.seed, kill_window=(lo, hi))
    res["wall_s"] = round(time.perf_counter() - t0, 1)
    res["peak_rss_mb"] = {
        "self": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "children": round(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024, 1),
    }
    print(json.dumps(res, indent=1))
    return 0 if not res["failures"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
