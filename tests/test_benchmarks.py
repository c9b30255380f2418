"""The benchmark scripts behind README's "Speed" numbers run in their tiny form and print every
line README quotes (their timings mean nothing at this size; the runs are still checked run for
run against the plain-C baselines, and the two prediction engines against each other)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "benchmarks"


def _run(*args, timeout=600):
    r = subprocess.run([sys.executable, str(BENCH / args[0]), *args[1:]], capture_output=True, text=True,
                       timeout=timeout)
    assert r.returncode == 0, r.stderr[-3000:]
    return r.stdout


@pytest.mark.slow
def test_bench_theory_tiny():
    out = _run("bench_theory.py", "--tiny")
    for head in ("1. Minimal NG", "2. Many short runs", "3. Strategy game", "4. One run", "5. Start-up"):
        assert head in out
    assert "disagree" not in out
    if "no C compiler" not in out:
        assert "each run for run identical to the plain C" in out
        assert out.count("run for run identical: True") == 2
        assert out.count("goal <= 1.3x") == 3
    assert "goal >= 40x" in out or "authors' code not found" in out
    assert "(mixed-population path)" in out and "same runs: True" in out
    assert "import normlab.theory + first call (Numba cache)" in out and "normlab's share" in out


@pytest.mark.slow
def test_bench_theory_startup_alone():
    out = _run("bench_theory.py", "--startup", "--tiny")
    assert "5. Start-up" in out and "1. Minimal NG" not in out
    assert "deferring SciPy's BLAS module" in out and "normlab's share" in out


@pytest.mark.slow
def test_bench_calibration_engines_tiny():
    res = json.loads(_run("bench_calibration.py", "--engines", "--draws", "4", "--reps", "1"))
    assert res["predict"]["same_critical_mass"] is True
    for k in ("predict", "mean_table", "table_draws"):
        assert res[k]["old_cpu_s"] > 0 and res[k]["new_cpu_s"] >= 0
    assert res["design_kernel"]["interactions"] > 0
    assert res["predict_run_effects"]["identical"] is True and res["predict_llama31_200_draws_cpu_s"] > 0


@pytest.mark.slow
def test_bench_faults_aims_kills_at_the_start_and_checks_its_window():
    """Kills early in the run (start-up, the first settings write; CI's trial 17 landed in that
    write and stranded its directory before the fix): every trial resumes to the reference table."""
    res = json.loads(_run("bench_faults.py", "--trials", "3", "--seed", "5", "--kill-window", "0.05,0.5"))
    assert res["failures"] == [] and (res["trials"], res["survived"], res["lost"], res["hung"]) == (3, 3, 0, 0)
    assert res["peak_rss_mb"]["children"] > 0
    r = subprocess.run([sys.executable, str(BENCH / "bench_faults.py"), "--kill-window", "0.5"], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 2 and "--kill-window must be LO,HI" in r.stderr and "Traceback" not in r.stderr
