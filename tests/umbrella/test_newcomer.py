"""What a newcomer hit (issue 12): each fix with a test that failed before it.

Notebook extra with ipywidgets; critical-mass --committed refuses non-integer counts; simulate
--out on a file is a one-line error; the interpolated critical mass lies in its interval; runs
without a winner are "none"; probes print or save their table; calibrate prints a readable
summary; --help documents every option with examples; a non-OpenAI server is named as such; the
Fig. S3 docstring and the theory tour say what the code shows.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import re
import sys
import threading
import tomllib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import pytest

from normlab.cli import build_parser, main
import _paths  # the repository's and tests/' folders (tests/_paths.py)

ROOT = _paths.REPO


# ----------------------------------------------------------------------------- 1. notebooks extra
def test_notebooks_extra_has_ipywidgets():
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert any(re.match(r"ipywidgets\b", d) for d in extras["notebooks"]), extras["notebooks"]


# ----------------------------------------------------------------------------- 2. --committed 1.5
@pytest.mark.parametrize("value, message", [
    ("1.5", "--committed 1.5 is neither a whole count"),
    ("2,2.5", "--committed 2.5 is neither a whole count"),
    ("0.1,3", "mixes fractions of N in (0, 1) with counts"),
    ("abc", "'abc' is not a number"),
])
def test_critical_mass_refuses_fractional_counts(value, message, capsys):
    rc = main(["critical-mass", "--n-agents", "20", "--committed", value, "--runs", "2", "--json"])
    err = capsys.readouterr().err
    assert rc == 2 and message in err and len(err.strip().splitlines()) == 1, err


def test_critical_mass_parses_counts_and_fractions():
    from normlab.theory._cli import _parse_committed

    assert _parse_committed("1,2,3") == [1, 2, 3] and all(type(v) is int for v in _parse_committed("1,2.0"))
    assert _parse_committed("0.1,0.25") == [0.1, 0.25]


# ----------------------------------------------------------------------------- 3. simulate --out file
def test_simulate_out_existing_file_is_one_line_error(tmp_path, capsys):
    f = tmp_path / "taken.txt"
    f.write_text("x")
    rc = main(["simulate", "minimal", "--n-agents", "10", "--n-words", "2", "--seed", "1", "--out", str(f)])
    err = capsys.readouterr().err
    assert rc == 2 and "exists and is not a directory" in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1 and f.read_text() == "x"


def test_critical_mass_out_in_missing_directory_is_refused_before_work(tmp_path, capsys):
    rc = main(["critical-mass", "--n-agents", "10", "--committed", "1,2", "--runs", "2", "--json",
               "--out", str(tmp_path / "nope" / "sweep.csv")])
    assert rc == 2 and "does not exist" in capsys.readouterr().err


# ----------------------------------------------------------------------------- 4. interval
def test_interpolated_critical_mass_lies_in_its_interval():
    from normlab.theory import clopper_pearson, locate_critical_mass

    # flip counts 2/20 at 4 and 18/20 at 6: the crossing 5 lies below the first count (6) whose
    # upper CI bound reaches 1/2 -- the old grid bound put the estimate outside its interval
    c, k = np.array([2, 4, 6, 8]), np.array([0, 2, 18, 20])
    lo, hi = clopper_pearson(k, np.full(4, 20))
    est, interp, low, high = locate_critical_mass(c, k / 20, lo, hi, 0.5)
    assert np.isclose(interp, 5.0) and est == 6 and high == 6
    assert low <= interp <= est <= high
    # low is where the linear upper-bound curve crosses 1/2, by hand
    assert np.isclose(low, 4 + (0.5 - hi[1]) / (hi[2] - hi[1]) * 2)


def test_interval_invariant_on_random_curves():
    from normlab.theory import clopper_pearson, locate_critical_mass

    gen = np.random.default_rng(0)
    for _ in range(300):
        n = gen.integers(3, 30)
        c = np.sort(gen.choice(np.arange(1, 60), size=gen.integers(2, 8), replace=False))
        k = np.sort(gen.integers(0, n + 1, size=c.size))
        lo, hi = clopper_pearson(k, np.full(c.size, n))
        est, interp, low, high = locate_critical_mass(c, k / n, lo, hi, 0.5)
        if np.isfinite(est):
            assert low <= interp + 1e-12 and interp <= est <= high if np.isfinite(high) else low <= interp <= est


# ----------------------------------------------------------------------------- 5. winners
@pytest.mark.filterwarnings("ignore:.*reached max_interactions:RuntimeWarning")
def test_runs_without_winner_are_none_in_json_and_text(capsys):
    from normlab.theory import minimal_naming_game

    res = minimal_naming_game(30, n_words=2, n_runs=3, max_interactions=40, stop="consensus", rng=1,
                              progress=False)
    assert res.consensus_counts()["name"].tolist() == [None]
    assert res.summary()["winners"] == {"none": 3}
    for extra in (["--json"], []):
        rc = main(["simulate", "minimal", "--n-agents", "30", "--n-words", "2", "--runs", "3",
                   "--max-interactions", "40", "--seed", "1", *extra])
        out = capsys.readouterr().out
        assert rc == 0 and "nan" not in out.lower() and '"none": 3' in out


# ----------------------------------------------------------------------------- 9. non-OpenAI server
class _Html(BaseHTTPRequestHandler):
    status = 404

    def log_message(self, *a):
        pass

    def do_GET(self):
        body = b"<!DOCTYPE html><html><body>Not Found</body></html>"
        self.send_response(self.status)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_POST = do_GET


class _Html200(_Html):
    status = 200


class _OtherJson(_Html):
    def do_GET(self):
        body = json.dumps({"models": ["a", "b"]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def _serve(handler):
    srv = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv, f"http://127.0.0.1:{srv.server_address[1]}/v1"


@pytest.mark.parametrize("handler, answered", [(_Html, "HTTP 404, text/html"), (_Html200, "HTTP 200, text/html"),
                                               (_OtherJson, "HTTP 200, application/json")])
@pytest.mark.parametrize("model", [None, "gpt-x"])
def test_non_openai_server_is_named_as_such(handler, answered, model):
    from normlab.llm_runs.backend import EndpointConfig, LLMClient, NotOpenAICompatible

    srv, url = _serve(handler)
    try:
        config = EndpointConfig(base_url=url, max_retries=0)

        async def go():
            async with LLMClient(url, model, config) as c:
                return await c.check()

        with pytest.raises(NotOpenAICompatible) as info:
            asyncio.run(go())
    finally:
        srv.shutdown()
    msg = str(info.value)
    assert "does not look like an OpenAI-compatible server (GET /models answered " + answered in msg
    assert "pass --model" not in msg and len(msg.splitlines()) == 1


def test_cli_gives_no_resume_advice_for_a_non_openai_server(tmp_path, capsys):
    srv, url = _serve(_Html)
    try:
        rc = main(["llm-probe", "bias", "--base-url", url, "--trials", "2", "--out", str(tmp_path / "p"),
                   "--no-progress"])
    finally:
        srv.shutdown()
    err = capsys.readouterr().err
    assert rc == 3 and "does not look like an OpenAI-compatible server" in err, err
    assert "rerun" not in err and "resume" not in err and "pass --model" not in err
    assert len(err.strip().splitlines()) == 1


# ----------------------------------------------------------------------------- 10. Fig. S3 docstring
def test_figS3_docstring_says_what_the_script_prints():
    spec = importlib.util.spec_from_file_location("figS3", ROOT / "paper_figures" / "figS3_production_bias.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    claimed = float(re.search(r"at b = 0\.55: (0\.\d+) for N = 24", " ".join(mod.__doc__.split())).group(1))
    df = mod.curves(np.array([0.5, 0.55]), runs=4000, rounds=3, seed=3)
    got = df.loc[df["bias"] == 0.55, "p_consensus_1"].iloc[0]
    assert abs(got - claimed) < 0.025, (got, claimed)  # SE ~ 0.008 with 4000 runs


# ----------------------------------------------------------------------------- 11. theory tour
def test_theory_tour_plot_shows_the_p010_flip():
    from normlab.theory import binary_agreement_ode

    nb = json.loads((ROOT / "notebooks" / "theory_tour.ipynb").read_text())
    src = next("".join(c["source"]) for c in nb["cells"] if "binary_agreement_ode(" in "".join(c["source"]))
    assert "0.10" in src
    t_max = float(re.search(r"binary_agreement_ode\(p, t_max=([\d.]+)\)", src).group(1))
    a = binary_agreement_ode(0.10, t_max=t_max).to_frame().query("state == 'A_total'")
    assert a["density"].iloc[-1] > 0.9  # the flip is inside the plotted window
    assert all(not c.get("outputs") for c in nb["cells"] if c["cell_type"] == "code")  # stripped


# ----------------------------------------------------------------------------- 6. probes show or save
@pytest.mark.parametrize("probe, extra, shown", [
    ("bias", ["--trials", "20"], "p_exact"),
    ("strategy", ["--memory", "2"], "p(Q)"),
    ("meta", ["--memory", "2", "--states", "2"], "accuracy"),
    ("neutral", ["--max-pools", "2", "--length", "4"], "accepted"),
])
def test_every_probe_prints_and_saves_its_table(probe, extra, shown, tmp_path, capsys, monkeypatch):
    import pandas as pd

    from normlab.llm_runs import StubServer

    monkeypatch.chdir(tmp_path)
    (tmp_path / f"llm-probe-{probe}.csv").write_text("an earlier table\n")  # never overwritten
    with StubServer(["Q", "M"]) as stub:
        assert main(["llm-probe", probe, *extra, "--base-url", stub.base_url, "--no-progress", "--seed", "1"]) == 0
        out = capsys.readouterr().out
        assert shown in out and f"llm-probe-{probe}-2.csv" in out and "pass --out DIR" in out
        saved = pd.read_csv(tmp_path / f"llm-probe-{probe}-2.csv")
        assert len(saved) >= 2 and f"full table ({len(saved)} rows)" in out
        assert (tmp_path / f"llm-probe-{probe}.csv").read_text() == "an earlier table\n"
        # --json: the saved table is named in the JSON
        assert main(["llm-probe", probe, *extra, "--base-url", stub.base_url, "--no-progress", "--seed", "1",
                     "--json"]) == 0
        s = json.loads(capsys.readouterr().out)
        assert s["table"] == f"llm-probe-{probe}-3.csv" and (tmp_path / s["table"]).exists()


def test_strategy_probe_table_shows_the_probabilities(tmp_path, capsys, monkeypatch):
    import pandas as pd

    from normlab.llm_runs import StubServer

    monkeypatch.chdir(tmp_path)
    with StubServer(["Q", "M"]) as stub:
        assert main(["llm-probe", "strategy", "--memory", "1", "--base-url", stub.base_url, "--no-progress"]) == 0
    out = capsys.readouterr().out
    f = pd.read_csv(tmp_path / "llm-probe-strategy.csv", keep_default_na=False)
    p = f[(f["memory_state"] == "Q,M") & (f["name"] == "M")]["p"].iloc[0]
    row = next(line for line in out.splitlines() if line.strip().startswith("Q,M "))
    assert f"{p:.3f}" in row.split() and "(empty)" in out


# ----------------------------------------------------------------------------- 8. --help
def _subparsers(parser):
    import argparse

    for a in parser._actions:
        if isinstance(a, argparse._SubParsersAction):
            return a
    return None


def _command(name):
    return _subparsers(build_parser()).choices[name]


@pytest.mark.parametrize("command", ["simulate", "llm-run", "llm-probe", "calibrate", "critical-mass", "figures",
                                     "demo", "predict"])
def test_every_command_help_has_examples(command):
    import argparse

    p = _command(command)
    assert p.formatter_class is argparse.RawDescriptionHelpFormatter
    assert "examples:\n  normlab " + command in (p.epilog or "")


def test_critical_mass_options_documented_and_stop_explained():
    p = _command("critical-mass")
    undocumented = [a.option_strings for a in p._actions if a.option_strings and not a.help]
    assert undocumented == []
    stop = next(a for a in _subparsers(_command("simulate")).choices["minimal"]._actions if "--stop" in a.option_strings)
    assert all(choice + " (" in stop.help for choice in stop.choices)


def test_each_probe_has_its_own_help():
    probes = _subparsers(_command("llm-probe")).choices
    assert set(probes) == {"bias", "strategy", "meta", "neutral"}
    descriptions = {p.description for p in probes.values()}
    assert len(descriptions) == 4 and all(p.epilog.startswith("examples:") for p in probes.values())
    opts = {k: {o for a in p._actions for o in a.option_strings} for k, p in probes.items()}
    assert "--trials" in opts["bias"] and "--trials" not in opts["strategy"]
    assert "--max-pools" in opts["neutral"] and "--memory" not in opts["neutral"]


def test_no_seed_003_in_cli_help():
    texts = []

    def walk(parser):
        texts.extend([parser.description or "", parser.epilog or ""])
        for a in parser._actions:
            texts.append(a.help or "")
        for g in parser._action_groups:
            texts.append(g.title or "")
        sub = _subparsers(parser)
        if sub is not None:
            texts.extend(ca.help or "" for ca in sub._choices_actions)
            for child in sub.choices.values():
                walk(child)

    walk(build_parser())
    bad = [t for t in texts if "seed 003" in t.lower()]
    assert bad == [] and sum("Flint Ashery" in t for t in texts) >= 5


# ----------------------------------------------------------------------------- 7. calibrate output
def _table_summary(capsys, *extra):
    rc = main(["calibrate", "--table", "llama31_70b_QM_H5", "--n-agents", "24", "--draws", "6", "--runs-flip", "3",
               "--runs-consensus", "3", "--no-strength", "--seed", "1", *extra])
    assert rc == 0
    return capsys.readouterr()


def test_calibrate_prints_a_readable_summary(capsys):
    text = _table_summary(capsys).out
    lines = text.splitlines()
    assert len(lines) >= 10 and max(map(len, lines)) <= 120, text
    assert not text.lstrip().startswith("{") and "null" not in text and "None" not in text
    assert "P(consensus on M)" in text and "overturn_M" in text and "rounds to 95% success" in text
    s = json.loads(_table_summary(capsys, "--json").out)  # --json unchanged: the whole object
    assert {"critical_mass", "flip_curve", "settings"} <= set(s)


def test_null_estimates_are_explained():
    from normlab.calibration._cli import format_summary

    s = {"llm": "m", "names": ["Q", "M"], "memory": 3, "n_agents": 24, "draws": 10, "level": 0.95,
         "within_rounds": 30, "model": "empirical", "p_consensus": {"Q": 0.3, "M": 0.5}, "p_no_consensus": 0.2,
         "p_consensus_interval": {"Q": [0.1, 0.5], "M": [0.3, 0.7]},
         "rounds_to_95": {"estimate": None, "low": 40.0, "high": None, "p_not_reached": 0.6},
         "consensus_rounds": {"estimate": 30.0, "low": 20.0, "high": 50.0},
         "critical_mass": {"overturn_M": {"estimate": None, "majority": "M", "challenger": "Q",
                                          "published": {"estimate": None, "low": 8.0, "high": None,
                                                        "p_not_reached": 0.7},
                                          "per_run": {"estimate": 9.0, "low": 7.0, "high": None,
                                                      "p_not_reached": 0.2}}},
         "settings": {"max_rounds": 200}}
    text = format_summary(s)
    assert "None" not in text and "null" not in text
    assert "published not reached with up to 23 committed" in text
    assert "per-run 9 [7, not reached with up to 23 committed]" in text
    assert "rounds to 95% success  not reached within 200 rounds (60% of draws" in text
    assert "70% of draws did not flip with up to 23 committed agents" in text


def test_calibrate_shows_progress_on_a_terminal(capsys, monkeypatch):
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True, raising=False)
    err = _table_summary(capsys).err
    assert "predicting (6 posterior draws)" in err and "elapsed" in err
    assert "predicting" not in _table_summary(capsys, "--no-progress").err


def test_divergences_become_one_warning_line(capsys):
    import warnings

    from normlab.calibration._cli import _warnings_as_lines
    from normlab.calibration.bayes import divergence_warning

    assert divergence_warning({"divergences": 0, "chains": 2, "draws": 500}) is None
    msg = divergence_warning({"divergences": 7, "chains": 2, "draws": 500})
    assert "7 divergent transitions of 1000 draws" in msg and "target_accept" in msg
    with _warnings_as_lines():
        warnings.warn(msg, RuntimeWarning)
        warnings.warn(msg, RuntimeWarning)  # printed once
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"normlab calibrate: warning: {msg}"]


@pytest.mark.slow  # 2 s in the quick tier (issue 33: the default tier under 5 minutes)
def test_every_help_example_parses():
    import shlex

    def examples(parser, out):
        text = (parser.epilog or "").split("examples:", 1)
        if len(text) == 2:
            block = text[1].replace("\\\n", " ")
            mine = []
            for line in block.splitlines():
                line = line.split("#", 1)[0].strip()
                if not line.startswith("normlab "):
                    if mine and not line:
                        break
                    continue
                words = shlex.split(line)[1:]
                if ">" in words:  # a shell redirection (`--print-config > study.toml`) is not an argument
                    words = words[:words.index(">")]
                mine.append(words)
            assert mine, parser.prog
            out.extend(mine)
        sub = _subparsers(parser)
        for child in (sub.choices.values() if sub else []):
            examples(child, out)
        return out

    found = examples(build_parser(), [])
    assert len(found) >= 15
    for argv in found:
        build_parser().parse_args(argv)  # SystemExit (a usage error) fails the test


# ----------------------------------------------------------------------------- 12. legends over data
def test_demo_figures_put_one_legend_below_the_panels():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from normlab.demo.report import _legend_below

    fig, axes = plt.subplots(1, 2)
    for ax in axes:
        ax.plot([0, 1], [0, 1], label="theory")
        ax.plot([0, 1], [1, 0], label="LLM")
    _legend_below(fig, axes)
    assert all(ax.get_legend() is None for ax in axes)  # nothing drawn over the data
    (leg,) = fig.legends
    assert [t.get_text() for t in leg.get_texts()] == ["theory", "LLM"]  # each label once
    assert leg.get_window_extent().y1 <= min(ax.get_window_extent().y0 for ax in axes) + 1  # under the axes
    plt.close(fig)


# ----------------------------------------------------------------------------- 13. plots: path=, whole rounds
def test_every_plot_is_drawn_in_style_and_saves_with_path():
    """Every ``plot``/``plot_*`` of the packages goes through ``_display.plotting`` (the style,
    ``path=`` to save); six did not (mean field, group size, scores, transfer, SCENE, CRSEC)."""
    missing = []
    for folder in ("theory", "calibration", "llm_runs", "src/normlab"):
        for f in (ROOT / folder).rglob("*.py"):
            lines = f.read_text().splitlines()
            for i, line in enumerate(lines):
                if re.match(r"\s*def plot(_\w+)?\(", line):
                    j, decorators = i - 1, []
                    while j >= 0 and lines[j].strip().startswith("@"):
                        decorators.append(lines[j])
                        j -= 1
                    if not any("plotting" in d for d in decorators):
                        missing.append(f"{f.relative_to(ROOT)}:{i + 1}")
    assert missing == []


def test_round_axes_tick_whole_rounds():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import pandas as pd

    from normlab.calibration import compare_trajectories

    rounds = np.arange(1, 5)
    curve = pd.DataFrame({"round": rounds, "quantity": "success_rate", "name": "", "mean": rounds / 5,
                          "low": rounds / 6, "high": rounds / 4})
    ax = compare_trajectories(curve, curve).plot()
    ax.figure.canvas.draw()
    lo, hi = ax.get_xlim()
    ticks = [t for t in ax.get_xticks() if lo <= t <= hi]
    assert ticks and all(float(t).is_integer() for t in ticks), ticks  # was 1.5, 2.5, 3.5
    plt.close(ax.figure)
    with pytest.raises(TypeError, match="llm_trajectories"):
        compare_trajectories(object(), curve)


def test_no_seed_003_in_user_facing_text():
    """'seed 003' means nothing to a user: README, the docs pages, docstrings, templates, notebooks,
    scripts and benchmarks name the paper (Flint Ashery et al. 2025) instead."""
    found = []
    for folder in ("README.md", "ARCHITECTURE.md", "docs", "theory", "calibration", "llm_runs", "src/normlab", "paper_figures",
                   "notebooks", "benchmarks"):
        path = ROOT / folder
        for f in ([path] if path.is_file() else path.rglob("*")):
            if (f.suffix in (".py", ".md", ".ipynb", ".json", ".txt") and "__pycache__" not in f.parts
                    and "_build" not in f.parts):
                found += [f"{f.relative_to(ROOT)}:{k + 1}" for k, line in enumerate(f.read_text().splitlines())
                          if re.search(r"(?i)seed[ -]?0?03\b", line)]
    assert found == []


def test_critical_mass_text_says_what_a_missing_bound_means(capsys):
    argv = ["critical-mass", "--n-agents", "10", "--committed", "1,2", "--runs", "2", "--seed", "1", "--no-progress"]
    assert main(argv) == 0
    text = capsys.readouterr().out
    assert "None" not in text and "above 2, the largest count swept" in text  # 2 of 2 runs cannot bound it
    assert main([*argv, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["high"] is None
