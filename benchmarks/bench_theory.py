"""Throughput of the theory kernels, with baselines measured in the same run.

Run:  python benchmarks/bench_theory.py [--quick]

1. Minimal naming game, unlimited pool, complete graph, N = 1000, one core: interactions per
   second of the Numba kernel vs a straightforward C implementation of the same rules
   (benchmarks/c/minimal_ng.c, compiled here with the system cc -O3).
2. Many short runs (N = 24, W = 10, 20 000 runs to consensus) on one core, batched in one
   kernel call, vs the published pure-Python model of seed 003 (re-implemented below in its
   plain-Python style; measured on a subset of runs).
3. One run at N = 100 000, unlimited pool, to consensus (wall time).
4. Strategy game (best response, N = 24, H = 5), one core.

Not a timed test: it prints figures; targets are >= 20 M interactions/s for 1 and 2, within
1.5x of C for 1, and N = 100 000 well under a minute.
"""

from __future__ import annotations

import argparse
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numba
import numpy as np

from normlab.theory import minimal_naming_game, strategy_game
from normlab.theory._batch import N_SCALARS
from normlab.theory.naming_game import _ng_run
from normlab._rng import run_seeds

HERE = Path(__file__).resolve().parent


def numba_single_core(N: int, runs: int) -> float:
    """Interactions/s of the single-run kernel (N agents, unlimited pool), best of 3 repeats."""
    _, seeds = run_seeds(3, runs)
    T = 10**9
    R = -(-T // N)
    e64, e32 = np.zeros(0, np.int64), np.zeros(0, np.int32)
    committed, init = np.zeros(N, np.bool_), np.full(N, -1, np.int64)

    def bufs():
        return (np.empty(R, np.int32), np.empty(R, np.int32), np.empty(R, np.int64), np.empty(R, np.int32),
                np.empty((R, 0), np.int32), np.empty((R, 0), np.int32), np.empty(0, np.int8), np.empty(N_SCALARS, np.int64))

    _ng_run(seeds[0], N, 0, e64, e32, committed, -1, np.zeros(0), 1.0, init, T, 1, 0.95, True, *bufs())  # compile
    best = 0.0
    for _ in range(3):
        total, elapsed = 0, 0.0
        for k in range(runs):
            b = bufs()
            t0 = time.perf_counter()
            _ng_run(seeds[k], N, 0, e64, e32, committed, -1, np.zeros(0), 1.0, init, T, 1, 0.95, True, *b)
            elapsed += time.perf_counter() - t0
            total += b[-1][0]
        best = max(best, total / elapsed)
    return best


def batch_kernel_rate(n_runs: int) -> float:
    """Interactions/s of one serial batch-kernel call running every N = 24, W = 10 run to consensus."""
    from normlab.theory.naming_game import _ng_batch_serial

    N, W, T = 24, 10, 24_000
    R = T // N
    _, seeds = run_seeds(5, n_runs)
    args = (N, W, np.zeros(0, np.int64), np.zeros(0, np.int32), np.zeros(N, np.bool_), -1, np.zeros(0), 1.0,
            np.full(N, -1, np.int64), T, 1, 0.95, True)
    best = 0.0
    # buffers allocated once and pre-touched, so that page faults are not timed
    bufs = (np.zeros((n_runs, R), np.int32), np.zeros((n_runs, R), np.int32), np.zeros((n_runs, R), np.int64),
            np.zeros((n_runs, R), np.int32), np.zeros((n_runs, R, W), np.int32), np.zeros((n_runs, R, W), np.int32),
            np.zeros((n_runs, 0), np.int8), np.zeros((n_runs, N_SCALARS), np.int64))
    for _ in range(3):
        t0 = time.perf_counter()
        _ng_batch_serial(seeds, *args, *bufs)
        best = max(best, bufs[-1][:, 0].sum() / (time.perf_counter() - t0))
    return best


def c_single_core(N: int, runs: int) -> float | None:
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        print("  (no C compiler found: skipping the C baseline)")
        return None
    with tempfile.TemporaryDirectory() as d:
        exe = Path(d) / "minimal_ng"
        subprocess.run([cc, "-O3", "-march=native", "-o", str(exe), str(HERE / "c" / "minimal_ng.c")], check=True)
        best = 0.0
        for rep in range(3):
            out = subprocess.run([str(exe), str(N), str(runs), str(rep + 1)], capture_output=True, text=True, check=True)
            total, secs = out.stdout.split()
            best = max(best, int(total) / float(secs))
    return best


def seed003_python_model(N: int, W: int, rng: random.Random) -> int:
    """Minimal naming game with a finite pool in plain Python, as in the published model code
    (lists of words per agent, random.choice); returns the interactions to consensus."""
    inventories = [[] for _ in range(N)]
    t = 0
    while True:
        speaker, hearer = rng.sample(range(N), 2)
        if not inventories[speaker]:
            inventories[speaker].append(rng.randrange(W))
        word = rng.choice(inventories[speaker])
        if word in inventories[hearer]:
            inventories[speaker] = [word]
            inventories[hearer] = [word]
        else:
            inventories[hearer].append(word)
        t += 1
        if t % N == 0 and all(len(inv) == 1 for inv in inventories) and len({inv[0] for inv in inventories}) == 1:
            return t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="smaller workloads")
    args = ap.parse_args()
    numba.set_num_threads(1)
    print(f"normlab theory benchmarks (numba {numba.__version__}, 1 thread)\n")

    runs = 5 if args.quick else 20
    print("1. Minimal NG, unlimited pool, complete graph, N = 1000, one core")
    nb = numba_single_core(1000, runs)
    c = c_single_core(1000, runs)
    print(f"   numba kernel : {nb / 1e6:6.1f} M interactions/s")
    if c:
        print(f"   C baseline   : {c / 1e6:6.1f} M interactions/s   (C / numba = {c / nb:.2f}x)")

    n_runs = 2000 if args.quick else 20_000
    print(f"\n2. Many short runs: N = 24, W = 10, {n_runs} runs to consensus, one core, one call")
    minimal_naming_game(24, n_words=10, n_runs=10, rng=0, progress=False)  # compile / load cache
    best = None
    for rep in range(5):
        t0 = time.perf_counter()
        res = minimal_naming_game(24, n_words=10, n_runs=n_runs, rng=rep, progress=False)
        dt = time.perf_counter() - t0
        rate = res.n_interactions.sum() / dt
        best = rate if best is None or rate > best else best
    print(f"   normlab (end to end, incl. seeding and tidy outputs): {best / 1e6:6.1f} M interactions/s")
    print(f"   the batch kernel alone (one call, warm buffers):      {batch_kernel_rate(n_runs) / 1e6:6.1f} M interactions/s")
    rng = random.Random(1)
    n_py = 200 if args.quick else 1000
    t0 = time.perf_counter()
    tot = sum(seed003_python_model(24, 10, rng) for _ in range(n_py))
    py_rate = tot / (time.perf_counter() - t0)
    print(f"   plain-Python model ({n_py} runs):                    {py_rate / 1e6:6.2f} M interactions/s"
          f"   (normlab / Python = {best / py_rate:.0f}x)")

    print("\n3. One run, N = 100 000, unlimited pool, to consensus")
    if args.quick:
        print("   (skipped with --quick)")
    else:
        t0 = time.perf_counter()
        res = minimal_naming_game(100_000, rng=7, progress=False)
        dt = time.perf_counter() - t0
        print(f"   {dt:6.1f} s  ({res.n_interactions[0] / 1e6:.0f} M interactions, "
              f"{res.n_interactions[0] / dt / 1e6:.1f} M/s; t_conv/N^1.5 = {res.consensus_time[0] / 1e5**1.5:.2f})")

    print("\n4. Strategy game, best response, N = 24, H = 5, to consensus, one core")
    strategy_game("best_response", n_agents=24, memory=5, n_runs=10, rng=0, progress=False)
    t0 = time.perf_counter()
    res = strategy_game("best_response", n_agents=24, memory=5, n_runs=n_runs // 4, rng=1, progress=False)
    dt = time.perf_counter() - t0
    print(f"   {res.n_interactions.sum() / dt / 1e6:6.1f} M interactions/s ({2 * res.n_interactions.sum() / dt / 1e6:.1f} M decisions/s)")


if __name__ == "__main__":
    sys.exit(main())
