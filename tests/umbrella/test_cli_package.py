"""The umbrella package and the `normlab` command line."""

import json
import subprocess
import sys
from importlib.metadata import version

import pandas as pd
import pytest

import normlab
from normlab.cli import main
import _paths  # the repository's and tests/' folders (tests/_paths.py)


def test_import_is_light():
    code = "import sys, normlab; print(sorted(m for m in ('numba', 'pandas', 'scipy', 'openai') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
    assert normlab.__version__ == version("normlab")


@pytest.mark.slow  # 3 s in the quick tier (issue 33: the default tier under 5 minutes)
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


@pytest.mark.slow  # 2 s in the quick tier (issue 33: the default tier under 5 minutes)
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


# ----------------------------------------------------------------------------- seeds (issue 32, section 6)
#: Every command taking --seed, in one place, by what it does without one. A new command taking --seed fails
#: test_every_command_with_a_seed_is_listed until it is put here (and, if it draws one, tested below).
SEEDED_DRAWN = ("simulate minimal", "simulate binary", "simulate strategy", "critical-mass", "calibrate", "predict",
                "tip")
#: Journaled runs: a seed drawn once and stored in OUT/settings.json (the run directory's manifest), which a
#: rerun resumes from.
SEEDED_RUN_DIRECTORY = ("llm-run", "llm-probe bias", "llm-probe strategy", "llm-probe meta", "llm-probe neutral",
                        "crsec run", "scene run")
#: A fixed default seed, or none drawn at all.
SEEDED_FIXED = ("demo", "study", "scene score", "crsec analyse", "crsec analyze")


def _commands_with_seed():
    import argparse

    from normlab.cli import build_parser

    def walk(p, path=()):
        out = []
        for a in p._actions:
            if isinstance(a, argparse._SubParsersAction):
                for n, sp in a.choices.items():
                    out += walk(sp, path + (n,))
        if any("--seed" in a.option_strings for a in p._actions):
            out.append(" ".join(path))
        return out

    return walk(build_parser())


def test_every_command_with_a_seed_is_listed():
    assert sorted(_commands_with_seed()) == sorted(SEEDED_DRAWN + SEEDED_RUN_DIRECTORY + SEEDED_FIXED)


def _strip(o):
    """A summary without what may differ between identical runs: timings and whether the seed was drawn."""
    if isinstance(o, dict):
        return {k: _strip(v) for k, v in o.items() if "seconds" not in k and k not in ("seed_drawn", "out")}
    if isinstance(o, list):
        return [_strip(v) for v in o]
    return o


@pytest.fixture(scope="module")
def tiny_log_dir(tmp_path_factory):
    from normlab.schema import GameLog
    from normlab.theory import strategy_game

    logs = []
    for i, (c, init) in enumerate(((0, None), (1, "consensus:M"), (3, "consensus:M"))):
        kw = dict(committed=c, committed_name="Q", initial=init) if init else {}
        r = strategy_game("best_response", n_agents=8, memory=2, n_runs=3, names=("Q", "M"), max_interactions=160,
                          stop="max", record_decisions=True, rng=i, **kw)
        logs.append(r.to_log())
    d = tmp_path_factory.mktemp("seedlog") / "log"
    GameLog.concat(logs).to_parquet(d)
    return d


SEED_CASES = {
    "simulate minimal": ["simulate", "minimal", "--n-agents", "10", "--n-words", "3", "--runs", "3", "--json"],
    "simulate strategy": ["simulate", "strategy", "--n-agents", "10", "--memory", "2", "--runs", "3", "--names", "Q,M",
                          "--json"],
    "critical-mass": ["critical-mass", "--n-agents", "10", "--committed", "1,3", "--runs", "4", "--json"],
    "calibrate --table": ["calibrate", "--table", "llama3_70b_QM_H3", "--n-agents", "8", "--draws", "4",
                          "--runs-consensus", "4", "--runs-flip", "2", "--no-strength", "--no-progress", "--json"],
    "calibrate --log": ["calibrate", "--log", "{log}", "--names", "Q,M", "--fit-on", "all", "--fit-model", "empirical",
                        "--draws", "4", "--runs-flip", "2", "--runs-consensus", "2", "--max-round", "10",
                        "--no-strength", "--no-sensitivity", "--no-progress", "--json"],
}


@pytest.mark.slow  # 4 s in the quick tier (issue 33: the default tier under 5 minutes)
@pytest.mark.parametrize("case", list(SEED_CASES))
def test_every_seeded_command_records_its_seed(case, tiny_log_dir, tmp_path, capsys):
    """Without --seed a command draws one, says so on stderr and records it in --json and --out; rerun with
    it, the output is the same (issue 32, section 6: three calibrate runs gave three intervals)."""
    argv = [a.replace("{log}", str(tiny_log_dir)) for a in SEED_CASES[case]]
    runs = []
    for _ in range(2):
        assert main(argv) == 0
        cap = capsys.readouterr()
        s = json.loads(cap.out)
        assert s["seed_drawn"] is True and isinstance(s["seed"], int)
        assert f"rerun with --seed {s['seed']}" in cap.err
        runs.append(s)
    assert runs[0]["seed"] != runs[1]["seed"]
    out = tmp_path / "out"
    extra = ["--out", str(out)] if case.startswith("calibrate") or case.startswith("simulate") else []
    assert main(argv + ["--seed", str(runs[0]["seed"])] + extra) == 0
    cap = capsys.readouterr()
    again = json.loads(cap.out)
    assert again["seed_drawn"] is False and "rerun with" not in cap.err
    assert _strip(again) == _strip(runs[0])
    if extra:
        saved = json.loads((out / "summary.json").read_text())
        assert saved["seed"] == runs[0]["seed"]
        if case.startswith("calibrate"):  # the saved result's own settings (its manifest) record the seed too
            res = json.loads((out / "result.json").read_text())
            blob = json.dumps(res)
            assert f'"entropy": {runs[0]["seed"]}' in blob


def test_critical_mass_out_file_records_its_seed(tmp_path, capsys):
    path = tmp_path / "cm.csv"
    assert main(["critical-mass", "--n-agents", "10", "--committed", "1,3", "--runs", "4", "--out", str(path)]) == 0
    err = capsys.readouterr().err
    seed = int(err.split("rerun with --seed ")[1].split()[0])
    assert json.loads(path.with_suffix(".json").read_text())["seed"] == seed


@pytest.mark.slow  # 7 s in the quick tier (issue 33: the default tier under 5 minutes)
def test_predict_probe_records_its_seed(tmp_path):
    """``normlab predict --probe`` (exact probes through the stub) without --seed: the seed drawn is printed
    and in --json; rerun with it, the same prediction."""
    from normlab.llm_runs.testing import StubProcess

    def cli(*extra):
        return subprocess.run([sys.executable, "-m", "normlab.cli", "predict", "--probe", "--n-agents", "4", "--memory",
                               "1", "--names", "Q,M", "--base-url", stub.base_url, "--draws", "6",
                               "--runs-consensus", "4", "--runs-flip", "2", "--no-strength", "--no-underlying",
                               "--jitter-states", "0", "--no-progress", "--json", *extra],
                              capture_output=True, text=True, timeout=300)

    with StubProcess("--names", "Q,M") as stub:
        r = cli()
        assert r.returncode == 0, r.stderr
        s = json.loads(r.stdout)
        assert s["seed_drawn"] is True and f"rerun with --seed {s['seed']}" in r.stderr
        r2 = cli("--seed", str(s["seed"]))
        assert r2.returncode == 0, r2.stderr
    assert _strip({k: v for k, v in json.loads(r2.stdout).items() if k != "probe"}) == \
        _strip({k: v for k, v in s.items() if k != "probe"})


@pytest.mark.slow
@pytest.mark.data
def test_tip_replay_records_its_seed(capsys):
    import os
    from pathlib import Path

    zip_ = Path(os.environ.get("NORMLAB_AINORMS", _paths.REPO.parent / "shared/data/ai-norms")) \
        / "llama31_data.zip"
    if not zip_.is_file():
        pytest.skip("published AI-norms data not present")
    argv = ["tip", "--ainorms", str(zip_), "--names", "Q,M", "--memory", "5", "--n-agents", "24", "--direction",
            "overturn_Q", "--json", "--no-progress", "--draws", "40", "--budget", "6runs"]
    assert main(argv) in (0, 5)
    cap = capsys.readouterr()
    s = json.loads(cap.out)
    assert s["seed_drawn"] is True and f"rerun with --seed {s['seed']}" in cap.err
    assert main(argv + ["--seed", str(s["seed"])]) in (0, 5)
    assert _strip(json.loads(capsys.readouterr().out)) == _strip(s)
