"""Throughput of the theory kernels, with baselines measured in the same run.

Run:  python benchmarks/bench_theory.py [--quick | --tiny] [--ng | --startup]

Every comparison is interleaved (normlab, baseline, normlab, baseline, ...) and reports medians
of CPU-time rates and of paired ratios, on one core (CPU time, not wall time: the machine may
be shared); the C baselines are compiled here with the system ``cc -O3
-march=native``, consume normlab's own xoshiro256** seed words and are checked run for run
against normlab before any number is printed.

1. Minimal naming game, unlimited pool, complete graph, N = 1000, to consensus: the single-run
   kernel vs a plain C of the same rules (benchmarks/c/minimal_ng_plain.c; the older
   benchmarks/c/minimal_ng.c, with its own seeding, is shown too). Goal: within 1.3x.
2. 20 000 short runs, N = 24, W = 10, end to end (seeding, kernel, ragged outputs, GameResult)
   vs the authors' own model, ``NG_module.py`` of Flint Ashery et al. (2025), imported at run time from
   ``$NORMLAB_AINORMS_CODE`` (default ../shared/reference/ai-norms-code; never copied here) on a
   subset of runs: like for like (their rules, ``invent="discard"``, 1000 interactions per run)
   and normlab's default (to consensus). Goal: >= 40x. Memory of one normlab call: peak of
   traced allocations (numpy buffers included), in a fresh process.
3. Strategy game, N = 24, H = 5, W = 2, 100 rounds per run: a table and best response, the
   serial batch kernel vs a plain C of the same rules (benchmarks/c/strategy_game.c). Goal:
   within 1.3x. Then runs that each play their own table: one ``per_run=True`` call against one
   call per run.
4. One run at N = 100 000, unlimited pool, to consensus (wall time; skipped with --quick).
5. Start-up: ``import normlab.theory`` + a first call served from the Numba cache, in a fresh
   process (CPU seconds, bytecode cached as for an installed package), next to Numba's own
   floor (``import numba`` + its registries, which the first call of any cached function pays;
   the registries import SciPy's BLAS module when SciPy is installed, which normlab._jit
   defers). ``--startup`` runs this section alone.

``--ng`` runs section 1 alone (the minimal naming game against its plain C).

Not a timed test: it prints figures.
"""

from __future__ import annotations

import argparse
import atexit
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numba
import numpy as np

from normlab._rng import run_seeds
from normlab.theory import BestResponse, minimal_naming_game
from normlab.theory._batch import N_SCALARS
from normlab.theory.memory_game import SG_SCALARS, _sg_batch_serial
from normlab.theory.naming_game import _ng_run
from normlab.theory.criteria import PUBLISHED_FLIP_THRESHOLD
from normlab.theory.strategies import KIND_BEST_RESPONSE, KIND_TABLE

HERE = Path(__file__).resolve().parent
AUTHORS_CODE = Path(os.environ.get("NORMLAB_AINORMS_CODE", HERE.parents[1] / "shared" / "reference" / "ai-norms-code"))
if not AUTHORS_CODE.exists():  # a git worktree next to the main checkout
    AUTHORS_CODE = Path("/work/shared/reference/ai-norms-code")
TMP = Path(tempfile.mkdtemp(prefix="normlab-bench-"))  # the compiled C baselines; removed at exit
atexit.register(shutil.rmtree, TMP, ignore_errors=True)


def compile_c(name: str) -> Path | None:
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        return None
    exe = TMP / name
    subprocess.run([cc, "-O3", "-march=native", "-o", str(exe), str(HERE / "c" / f"{name}.c")], check=True)
    return exe


def run_c(cmd) -> float:
    out = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, check=True)
    total, secs = out.stdout.split()
    return int(total) / float(secs)


def med(xs) -> float:
    return float(np.median(xs))


# ------------------------------------------------------------------ 1. minimal NG vs C
def minimal_ng_vs_c(N: int, runs: int, reps: int) -> None:
    _, seeds = run_seeds(3, runs)
    seed_file = TMP / "ng_seeds.bin"
    seeds.tofile(seed_file)
    T = 10**9
    R = -(-T // N)
    e64, e32 = np.zeros(0, np.int64), np.zeros(0, np.int32)
    committed, init = np.zeros(N, np.bool_), np.full(N, -1, np.int64)

    def bufs():
        return (np.empty(R, np.int32), np.empty(R, np.int32), np.empty(R, np.int64), np.empty(R, np.int32),
                np.empty((R, 0), np.int32), np.empty((R, 0), np.int32), np.empty(0, np.int8),
                np.empty(N_SCALARS, np.int64))

    def numba_run(k):
        b = bufs()
        t0 = time.process_time()
        _ng_run(seeds[k], (N, 0, e64, e32, committed, -1, np.zeros(0), 1.0, init, True, False), (T, 1, 0.95), b[:6],
                b[6], b[7])
        dt = time.process_time() - t0
        n = b[-1][0]
        return n / dt, [n, b[-1][3], b[-1][4], b[-1][5], int(b[1][:-(-n // N)].sum())]

    numba_run(0)  # compile / load the cache
    plain, old = compile_c("minimal_ng_plain"), compile_c("minimal_ng")
    if plain is None:
        print("   (no C compiler found: skipping the C baselines)")
        return
    nb, cp, ratio, co, rows = [], [], [], [], {}
    for rep in range(reps):  # pairs: the same run in numba, then in C
        for k in range(runs):
            r, rows[k] = numba_run(k)
            seeds[k:k + 1].tofile(seed_file)
            c = run_c([plain, N, seed_file, TMP / "ng_out.txt"])
            same = np.array_equal(np.loadtxt(TMP / "ng_out.txt", dtype=np.int64), rows[k])
            if not same:
                print(f"   run {k}: normlab and the plain C disagree: {rows[k]} vs {np.loadtxt(TMP / 'ng_out.txt')}")
                return
            nb.append(r)
            cp.append(c)
            ratio.append(c / r)
        co.append(run_c([old, N, runs, rep + 1]))
    print(f"   {runs} runs x {reps}, each run for run identical to the plain C (t_conv, t_max, N_w max, distinct max, successes)")
    print(f"   numba kernel          : {med(nb) / 1e6:6.1f} M interactions/s")
    print(f"   plain C (same stream) : {med(cp) / 1e6:6.1f} M interactions/s   (C / numba, median of paired runs = "
          f"{med(ratio):.2f}x, quartiles {np.percentile(ratio, 25):.2f}-{np.percentile(ratio, 75):.2f}; goal <= 1.3x)")
    print(f"   older minimal_ng.c    : {med(co) / 1e6:6.1f} M interactions/s   (its own seeds and runs, wall time)")


# ------------------------------------------------------------------ 2. many short runs vs the authors' model
def authors_rate(n_runs: int, seed: int) -> float | None:
    """Interactions/s of the authors' NG_module.py (N = 24, 1000 interactions, no committed agents)."""
    if not (AUTHORS_CODE / "NG_module.py").exists():
        return None
    if str(AUTHORS_CODE) not in sys.path:
        sys.path.insert(0, str(AUTHORS_CODE))
    from NG_module import NamingGame  # the published model, imported from the authors' checkout

    random.seed(seed)
    t0 = time.process_time()
    total = 0
    for _ in range(n_runs):
        df = NamingGame({"N": 24, "interactions": 1000, "cm": 0, "bias": 0}).simulate()
        total += len(df["tracker"]["outcome"])
    return total / (time.process_time() - t0)


MEMORY_PROBE = """
import sys, tracemalloc
from normlab.theory import minimal_naming_game
minimal_naming_game(24, n_words=10, n_runs=10, rng=0, progress=False)
tracemalloc.start()
res = minimal_naming_game(24, n_words=10, n_runs=int(sys.argv[1]), rng=99, progress=False)
peak = tracemalloc.get_traced_memory()[1]
kept = sum(getattr(res, k).nbytes for k in ("round_count", "round_success", "round_n_words", "round_n_distinct",
                                              "round_production", "round_production_uncommitted"))
print(peak / 2**20, kept / 2**20)
"""


def many_runs(n_runs: int, n_authors: int, reps: int) -> None:
    like = dict(n_words=10, n_runs=n_runs, invent="discard", stop="max", max_interactions=1000, progress=False)
    default = dict(n_words=10, n_runs=n_runs, progress=False)
    minimal_naming_game(24, n_words=10, n_runs=10, rng=0, progress=False, invent="discard")  # load the cache
    r_like, r_def, r_auth = [], [], []
    for rep in range(reps):
        for kw, acc in ((like, r_like), (default, r_def)):
            t0 = time.process_time()
            res = minimal_naming_game(24, rng=rep, **kw)
            acc.append(res.n_interactions.sum() / (time.process_time() - t0))
            del res
        a = authors_rate(n_authors, rep)
        if a is not None:
            r_auth.append(a)
    mem = subprocess.run([sys.executable, "-c", MEMORY_PROBE, str(n_runs)], capture_output=True, text=True, check=True)
    peak, kept = (float(v) for v in mem.stdout.split())
    print(f"   normlab, the authors' rules (invent='discard', 1000 interactions): {med(r_like) / 1e6:6.1f} M interactions/s")
    print(f"   normlab, default rules, to consensus:                              {med(r_def) / 1e6:6.1f} M interactions/s")
    if r_auth:
        print(f"   authors' NG_module.py ({n_authors} runs, imported from {AUTHORS_CODE}): {med(r_auth) / 1e6:6.3f} M interactions/s"
              f"   (normlab / authors = {med(r_like) / med(r_auth):.0f}x like for like, {med(r_def) / med(r_auth):.0f}x default; goal >= 40x)")
    else:
        print(f"   (authors' code not found at {AUTHORS_CODE}: set NORMLAB_AINORMS_CODE)")
    print(f"   memory of one default call (fresh process): peak of traced allocations {peak:.0f} MiB, of which "
          f"{kept:.0f} MiB are the per-round outputs it returns")


# ------------------------------------------------------------------ 3. strategy game vs C
def _sg_groups(bufs):
    """The batch kernel's output groups from nine flat buffers: (rounds, decisions, scalars)."""
    return bufs[:6], bufs[6:8], bufs[8]


def strategy_vs_c(n_runs: int, reps: int) -> None:
    exe = compile_c("strategy_game")
    if exe is None:
        print("   (no C compiler found: skipping)")
        return
    N, W, H, T = 24, 2, 5, 2400
    R = T // N
    _, seeds = run_seeds(1, n_runs)
    seeds.tofile(TMP / "sg_seeds.bin")
    table = np.ascontiguousarray((0.9 * BestResponse(2).to_table(H).table + 0.05).reshape(-1))  # noisy best response
    table.tofile(TMP / "sg_table.bin")
    for label, kind, params, tfile in (("a table (noisy best response)", KIND_TABLE, table, TMP / "sg_table.bin"),
                                       ("best response", KIND_BEST_RESPONSE, np.zeros(1), "-")):
        args = ((N, W, H, np.zeros(0, np.int64), np.zeros(0, np.int32), np.zeros(N, np.bool_), -1,
                 np.full(N, kind, np.int64), np.zeros(N, np.int64), params,
                 np.zeros((N, H), np.int64), np.zeros(N, np.int64)), (T, 0, PUBLISHED_FLIP_THRESHOLD, 0))  # (game, rule: no order bias)
        bufs = (np.zeros((n_runs, R), np.int32), np.zeros((n_runs, R), np.int32), np.zeros((n_runs, R), np.int64),
                np.zeros((n_runs, R), np.int32), np.zeros((n_runs, R, W), np.int32), np.zeros((n_runs, R, W), np.int32),
                np.zeros((n_runs, 0, 2), np.int32), np.zeros((n_runs, 0, 2), np.int32),
                np.zeros((n_runs, SG_SCALARS), np.int64))
        _sg_batch_serial(seeds[:2], *args, *_sg_groups(tuple(b[:2] for b in bufs)))  # compile / load the cache
        nb, cc = [], []
        for _ in range(reps):  # pairs: the same runs in numba, then in C
            t0 = time.process_time()
            _sg_batch_serial(seeds, *args, *_sg_groups(bufs))
            nb.append(bufs[-1][:, 0].sum() / (time.process_time() - t0))
            cc.append(run_c([exe, N, W, H, T, 0, -1, 0, -1, tfile, TMP / "sg_seeds.bin", TMP / "sg_out.txt"]))
        ratio = np.array(cc) / np.array(nb)
        c_out = np.loadtxt(TMP / "sg_out.txt", dtype=np.int64).reshape(-1, 10)
        scal = bufs[-1]
        same = np.array_equal(c_out[:, :9], scal[:, :9])
        succ = bufs[1].sum(axis=1)
        r = np.arange(1, R + 1)
        chk = (bufs[1] * r + bufs[2] + 7 * bufs[3] + 11 * bufs[4][:, :, W - 1] + 13 * bufs[5][:, :, 0]).sum(axis=1)
        same &= np.array_equal(c_out[:, 9], succ + 1000003 * (chk % 1000003))
        print(f"   {label}: numba {med(nb) / 1e6:5.1f} M/s, plain C {med(cc) / 1e6:5.1f} M/s (C / numba, median of "
              f"{reps} pairs = {med(ratio):.2f}x, range {ratio.min():.2f}-{ratio.max():.2f}; goal <= 1.3x); "
              f"run for run identical: {same}")
    mixed_vs_single(n_runs, reps, seeds, table)


def mixed_vs_single(n_runs: int, reps: int, seeds, table) -> None:
    """The mixed-population machinery (per-agent strategy offsets) against one table, same kernel,
    alternately: two groups of 12 agents holding two copies of the same table play the same runs."""
    N, W, H, T = 24, 2, 5, 2400
    R = T // N
    common = (N, W, H, np.zeros(0, np.int64), np.zeros(0, np.int32), np.zeros(N, np.bool_), -1,
              np.full(N, KIND_TABLE, np.int64))
    start, rule = (np.zeros((N, H), np.int64), np.zeros(N, np.int64)), (T, 0, PUBLISHED_FLIP_THRESHOLD, 0)
    single = (common + (np.zeros(N, np.int64), table) + start, rule)
    mixed = (common + (np.repeat([0, table.size], N // 2).astype(np.int64), np.concatenate([table, table])) + start,
             rule)

    def bufs():
        return (np.zeros((n_runs, R), np.int32), np.zeros((n_runs, R), np.int32), np.zeros((n_runs, R), np.int64),
                np.zeros((n_runs, R), np.int32), np.zeros((n_runs, R, W), np.int32),
                np.zeros((n_runs, R, W), np.int32), np.zeros((n_runs, 0, 2), np.int32),
                np.zeros((n_runs, 0, 2), np.int32), np.zeros((n_runs, SG_SCALARS), np.int64))

    bs, bm = bufs(), bufs()
    rs, rm = [], []
    for _ in range(reps):
        for args, b, acc in ((single, bs, rs), (mixed, bm, rm)):
            t0 = time.process_time()
            _sg_batch_serial(seeds, *args, *_sg_groups(b))
            acc.append(b[-1][:, 0].sum() / (time.process_time() - t0))
    same = all(np.array_equal(x, y) for x, y in zip(bs, bm))
    print(f"   two groups of 12 agents with two copies of the table (mixed-population path): {med(rm) / 1e6:5.1f} M/s, "
          f"one table {med(rs) / 1e6:5.1f} M/s (one table / mixed = {med(np.array(rs) / np.array(rm)):.2f}x); "
          f"same runs: {same}")


def per_run_vs_calls(n_runs: int, reps: int) -> None:
    """Runs that each play their own table (a shift of one table's logits per run, the run effects of
    normlab.calibration): ``strategy_game(tables, per_run=True)``, one compiled call, against the plainest
    way to give runs their own tables, one ``strategy_game`` call per run; end to end, alternately."""
    from normlab.theory import BestResponse, StrategyTable, strategy_game

    H, N = 5, 24
    p = BestResponse(2).to_table(H).table[:, 1] * 0.9 + 0.05
    g = np.random.default_rng(7)
    q = 1 / (1 + np.exp(-(np.log(p / (1 - p))[None, :] + g.normal(0.0, 0.5, (n_runs, 1)))))
    tabs = [StrategyTable(np.column_stack([1 - x, x]), memory=H, names=("Q", "M")) for x in q]
    kw = dict(n_agents=N, memory=H, committed=4, committed_name="M", initial="consensus:Q", stop="flip",
              max_interactions=N * 30, progress=False)
    seeds = g.integers(2**62, size=n_runs)
    rb, rc = [], []
    for _ in range(reps):
        t0 = time.process_time()
        one = strategy_game(tabs, per_run=True, rng=11, **kw)
        rb.append(n_runs / (time.process_time() - t0))
        t0 = time.process_time()
        for t, sd in zip(tabs, seeds):
            strategy_game(t, rng=int(sd), **kw)
        rc.append(n_runs / (time.process_time() - t0))
    same = all(strategy_game(tabs[k], n_runs=n_runs, rng=11, **kw).n_interactions[k] == one.n_interactions[k]
               for k in (0, n_runs // 2, n_runs - 1))
    print(f"   {n_runs} runs, each its own table (H = {H}, to a flip or 30 rounds): one call {med(rb):8.0f} runs/s, "
          f"one call per run {med(rc):6.0f} runs/s ({med(np.array(rb) / np.array(rc)):.1f}x); "
          f"run for run as its own table: {same}")


# ------------------------------------------------------------------ 5. start-up
STARTUP = {
    "normlab": "import normlab",
    "all": "import normlab.theory as th; th.minimal_naming_game(24, n_words=10, n_runs=10, rng=1, progress=False)",
    "numba_import": "import numba",
    "numba_floor": "import numba; from numba.core.registry import cpu_target; cpu_target.target_context.refresh()",
    "numba_floor_deferred": "import normlab._jit; from numba.core.registry import cpu_target; "
                            "cpu_target.target_context.refresh()",
    "numpy": "import numpy",
    "scipy_blas": "import numpy, scipy.linalg.cython_blas",
}


def startup(reps: int) -> None:
    """CPU seconds of each statement in a fresh process, bytecode cached (as an installed package)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}

    def cpu(stmt):
        code = f"import time; c = time.process_time(); {stmt}; print(time.process_time() - c)"
        return float(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                                    env=env).stdout)

    cpu(STARTUP["all"])  # writes normlab's bytecode caches
    t = {k: [] for k in STARTUP}
    for _ in range(reps):
        for k, stmt in STARTUP.items():
            t[k].append(cpu(stmt))
    m = {k: med(v) for k, v in t.items()}
    print(f"   import normlab: {m['normlab']:.3f} s CPU")
    print(f"   import normlab.theory + first call (Numba cache): {m['all']:.2f} s CPU (goal < 0.5 s)")
    print(f"   Numba's own floor, paid by the first call of any cached function: {m['numba_floor']:.2f} s "
          f"(import numba {m['numba_import']:.2f} s, its registries {m['numba_floor'] - m['numba_import']:.2f} s, "
          f"of which SciPy {m['scipy_blas'] - m['numpy']:.2f} s: Numba's BLAS probe imports scipy.linalg)")
    print(f"   the same floor with normlab._jit deferring SciPy's BLAS module: {m['numba_floor_deferred']:.2f} s")
    print(f"   normlab's share: {m['all'] - m['numba_floor_deferred']:.2f} s (its modules and loading one cached kernel)")


SIZES = {  # (NG runs, NG reps, many runs, authors' runs, many reps, strategy runs, strategy reps, start-up reps)
    "full": (10, 5, 20_000, 200, 7, 1000, 9, 3),
    "quick": (4, 3, 2000, 50, 3, 500, 5, 3),
    "tiny": (2, 1, 200, 5, 1, 50, 1, 1),  # for the test suite: every line printed, no meaningful timing
}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="smaller workloads")
    ap.add_argument("--tiny", action="store_true", help="tiny workloads (tests only: the numbers mean nothing)")
    ap.add_argument("--startup", action="store_true", help="only section 5 (start-up in a fresh process)")
    ap.add_argument("--ng", action="store_true", help="only section 1 (the minimal naming game against plain C)")
    args = ap.parse_args(argv)
    numba.set_num_threads(1)
    mode = "tiny" if args.tiny else "quick" if args.quick else "full"
    ng_runs, ng_reps, n_runs, n_auth, m_reps, sg_runs, sg_reps, su_reps = SIZES[mode]
    print(f"normlab theory benchmarks (numba {numba.__version__}, 1 thread; interleaved, medians; {mode})\n")
    if args.startup:
        print("5. Start-up in a fresh process")
        startup(1 if args.tiny else 5)
        return

    print("1. Minimal NG, unlimited pool, complete graph, N = 1000, to consensus, one core")
    minimal_ng_vs_c(1000, ng_runs, ng_reps)
    if args.ng:
        shutil.rmtree(TMP, ignore_errors=True)
        return

    print(f"\n2. Many short runs: N = 24, W = 10, {n_runs} runs end to end, one core")
    many_runs(n_runs, n_auth, m_reps)

    print("\n3. Strategy game, N = 24, H = 5, W = 2, 100 rounds per run, serial batch kernel, one core")
    strategy_vs_c(sg_runs, sg_reps)
    per_run_vs_calls(max(20, sg_runs * 2), sg_reps)

    print("\n4. One run, N = 100 000, unlimited pool, to consensus")
    if mode != "full":
        print(f"   (skipped with --{mode})")
    else:
        t0 = time.perf_counter()
        res = minimal_naming_game(100_000, rng=7, progress=False)
        dt = time.perf_counter() - t0
        print(f"   {dt:6.1f} s wall  ({res.n_interactions[0] / 1e6:.0f} M interactions, "
              f"{res.n_interactions[0] / dt / 1e6:.1f} M/s; t_conv/N^1.5 = {res.consensus_time[0] / 1e5**1.5:.2f})")

    print("\n5. Start-up in a fresh process")
    startup(su_reps)
    shutil.rmtree(TMP, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
