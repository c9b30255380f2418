"""The umbrella package and the `normlab` command line."""

import json
import subprocess
import sys
from importlib.metadata import version

import pandas as pd
import pytest

import normlab
from normlab.cli import main


def test_import_is_light():
    code = "import sys, normlab; print(sorted(m for m in ('numba', 'pandas', 'scipy', 'openai') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
    assert normlab.__version__ == version("normlab")


def test_kernels_load_without_scipy_linalg():
    """Numba's start-up would import scipy.linalg (0.15-0.2 s) only to test for BLAS; normlab's
    kernels load without it, and BLAS in a kernel and SciPy itself still work afterwards."""
    code = (
        "import sys, numpy as np, normlab.theory as t\n"
        "t.minimal_naming_game(8, n_words=3, n_runs=2, rng=1, progress=False)\n"
        "print('scipy.linalg' in sys.modules)\n"
        "from numba import njit\n"
        "a = np.arange(9.0).reshape(3, 3) + np.eye(3)\n"
        "print(bool(np.allclose(njit(lambda x: np.dot(x, x))(a), a @ a)))\n"
        "import scipy.linalg, scipy.optimize\n"
        "print(bool(np.allclose(a @ scipy.linalg.solve(a, np.ones(3)), 1.0)))\n"
        "print(type(sys.modules['scipy.linalg.cython_blas']).__name__)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["False", "True", "True", "module"]


def test_subpackages_importable_from_any_directory(tmp_path):
    code = "import normlab.theory, normlab.llm_runs, normlab.calibration; print(normlab.theory.__name__)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, check=True)
    assert out.stdout.strip() == "normlab.theory"


def test_simulate_minimal_json(capsys):
    assert main(["simulate", "minimal", "--n-agents", "24", "--n-words", "10", "--runs", "50", "--seed", "1", "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["runs"] == 50 and summary["consensus_fraction"] == 1.0
    assert sum(summary["winners"].values()) == 50
    assert 10 <= summary["rounds_to_95"] <= 25


def test_simulate_strategy_writes_tables(tmp_path, capsys):
    out = tmp_path / "sg"
    rc = main(["simulate", "strategy", "--n-agents", "30", "--memory", "3", "--runs", "4", "--seed", "2",
               "--names", "Q,M", "--out", str(out), "--format", "csv"])
    assert rc == 0
    runs = pd.read_csv(out / "runs.csv")
    assert len(runs) == 4 and set(runs["winner"]) <= {"Q", "M"}
    assert (out / "rounds.csv").exists() and (out / "success_rate.csv").exists()


def test_critical_mass_cli(capsys):
    rc = main(["critical-mass", "--model", "binary_agreement", "--n-agents", "100", "--committed", "0.04,0.2",
               "--runs", "5", "--within-rounds", "60", "--seed", "1", "--json"])
    assert rc == 0
    res = json.loads(capsys.readouterr().out)
    assert res["points"]["p_flip"] == [0.0, 1.0] and res["critical_mass"] == 20


@pytest.mark.parametrize(
    "argv, match",
    [
        (["simulate", "minimal", "--n-agents", "1"], "--n-agents must be >= 2"),
        (["simulate", "strategy", "--n-agents", "10", "--memory", "0"], "memory"),
        (["simulate", "minimal", "--n-agents", "10", "--graph", "tree:3"], "graph spec"),
        (["simulate", "binary", "--n-agents", "10"], "committed"),
    ],
)
def test_cli_errors_are_clear(argv, match, capsys):
    assert main(argv) == 2
    assert match in capsys.readouterr().err


def test_console_script():
    out = subprocess.run([sys.executable, "-m", "normlab.cli", "simulate", "minimal", "--n-agents", "10",
                          "--runs", "3", "--seed", "1", "--json"], capture_output=True, text=True, check=True)
    assert json.loads(out.stdout)["runs"] == 3


@pytest.mark.parametrize("pkg", ["normlab.theory", "normlab.llm_runs", "normlab.calibration", "normlab.llm_runs.scene",
                                 "normlab.figures", "normlab.llm_runs.runner", "normlab.calibration.prediction",
                                 "normlab.calibration.tip"])
def test_lazy_exports_are_never_shadowed_by_submodules(pkg):
    # Importing every submodule first must not replace an exported function by a module of the
    # same name (regression: normlab.theory.strategy_game once became the module).
    import importlib
    import pkgutil
    import types

    package = importlib.import_module(pkg)
    for info in pkgutil.iter_modules(package.__path__):
        if info.name not in ("_cli",):
            importlib.import_module(f"{pkg}.{info.name}")
    submodules = getattr(package, "_SUBMODULES", set())
    for name in package.__all__:
        value = getattr(package, name)
        assert (name in submodules) == isinstance(value, types.ModuleType), (pkg, name, value)
