"""``normlab llm-run`` / ``normlab llm-probe`` and a real kill-and-resume of a subprocess (stub server)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pandas as pd
import pytest

from normlab.cli import main
from normlab.llm_runs import StubServer
from normlab.schema import DECISION_COLUMNS, GameLog

GAME_COLS = list(DECISION_COLUMNS) + ["names_shown", "prompt_hash", "p_name", "covered_mass", "probs",
                                      "invalid_reason", "raw_text"]


def _args(url, out, *extra, n="8", h="3", t="200"):
    return ["llm-run", "--n-agents", n, "--memory", h, "--names", "Q,M", "--max-interactions", t,
            "--base-url", url, "--out", str(out), "--seed", "5", "--no-progress", *extra]


def _json(capsys):
    out = capsys.readouterr().out
    return json.loads(out)


def test_llm_run_json_summary_and_resume_without_calls(tmp_path, capsys):
    with StubServer(["Q", "M"]) as stub:
        assert main(_args(stub.base_url, tmp_path / "r", "--mode", "exact", "--runs", "2", "--json")) == 0
        s = _json(capsys)
        for key in ("decisions", "llm_calls", "invalid", "consensus", "log"):
            assert key in s
        assert len(s["consensus"]) == 2 and s["llm_calls"] < s["decisions"]
        log = GameLog.read_parquet(tmp_path / "r")
        assert s["log"].endswith("decisions.parquet") and len(pd.read_parquet(s["log"])) == len(log.decisions)
        assert s["decisions"] == int((~log.decisions["committed"]).sum())
        n = stub.n_chat
        assert main(_args(stub.base_url, tmp_path / "r", "--mode", "exact", "--runs", "2", "--json")) == 0
        again = _json(capsys)
        assert stub.n_chat == n and again["decisions"] == s["decisions"] and again["consensus"] == s["consensus"]
        # different settings are refused with exit code 2 and a clear message
        assert main(_args(stub.base_url, tmp_path / "r", "--mode", "exact", "--runs", "3")) == 2
        err = capsys.readouterr().err
        assert "holds a run with different settings" in err and "runs: stored 2 != requested 3" in err


def test_llm_run_committed_and_initial(tmp_path, capsys):
    with StubServer(["Q", "M"]) as stub:
        args = _args(stub.base_url, tmp_path / "c", "--mode", "exact", "--committed", "3", "--initial", "consensus:Q",
                     "--stop", "flip", "--json", n="10", t="2000")
        assert main(args) == 0
        s = _json(capsys)
    assert s["kind"] == "swap" and s["stop_reasons"] == ["flip"] and s["flipped"] == [True]
    runs = pd.read_parquet(tmp_path / "c" / "runs.parquet")
    assert runs["committed_name"].iloc[0] == "M" and runs["committed_count"].iloc[0] == 3
    with StubServer(["Q", "M"]) as stub:
        assert main(_args(stub.base_url, tmp_path / "c2", "--committed", "2:Q", "--initial", "consensus:M",
                          "--json", t="30", n="6")) == 0
        assert _json(capsys)["kind"] == "swap"
    assert pd.read_parquet(tmp_path / "c2" / "runs.parquet")["committed_name"].iloc[0] == "Q"


@pytest.mark.parametrize("bad, msg", [
    (["--committed", "x"], "--committed must be K or K:NAME"),
    (["--initial", "consensus:Z"], "initial must be"),
    (["--extra-body", "[1]"], "--extra-body must be a JSON object"),
    (["--wrap", "llama3"], "wrap must be one of ('chat', 'raw-llama3', 'raw-llama2')"),
    (["--reask", "forever"], "must be 'unbounded' or an int"),
    (["--top-p", "2"], "--top-p must be a number in [0, 1] or 'none'"),
    (["--min-p", "x"], "--min-p must be a number in [0, 1] or 'none'"),
    (["--name-order", "mixed"], "--name-order must be one of"),
    (["--committed-placement", "first"], "--committed-placement must be one of"),
    (["--committed-mode", "add"], "--committed-mode must be one of"),
    (["--initial", "uniform"], "initial must be"),
    (["--parse", "loose"], "parse must be one of"),
])
def test_llm_run_bad_arguments_exit_2(tmp_path, capsys, bad, msg):
    assert main(_args("http://127.0.0.1:9/v1", tmp_path / "b", *bad)) == 2
    assert msg in capsys.readouterr().err


def test_llm_run_protocol_flags(tmp_path, capsys):
    with StubServer(["Q", "M"], faults=["malformed"] * 3) as stub:
        args = _args(stub.base_url, tmp_path / "p", "--wrap", "raw-llama3", "--reask", "unbounded", "--min-p", "none",
                     "--committed", "2", "--initial", "random", "--committed-placement", "random", "--stop", "max",
                     "--parse", "authors",
                     "--json", t="16")
        assert main(args) == 0
        s = _json(capsys)
        assert all("prompt" in b for b in stub.requests) and all("min_p" not in b for b in stub.requests)
    assert s["wrap"] == "raw-llama3" and s["max_reasks"] == "unbounded" and s["reasks"] == 3 and s["invalid"] == 0
    assert s["parse"] == "authors"
    assert s["sampler"] == {"temperature": 0.5, "top_k": 10, "top_p": 1.0, "min_p": None, "max_tokens": 6}
    runs = pd.read_parquet(tmp_path / "p" / "runs.parquet")
    assert runs["name_order"].iloc[0] == "shared" and runs["committed_placement"].iloc[0] == "random"
    settings = json.loads((tmp_path / "p" / "settings.json").read_text())["settings"]
    assert settings["initial"] == "random" and settings["wrap"] == "raw-llama3"


def test_model_without_base_url_is_refused(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("NORMLAB_LLM_BASE_URL", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    args = ["llm-run", "--n-agents", "4", "--memory", "2", "--names", "Q,M", "--max-interactions", "4",
            "--model", "gpt-x", "--out", str(tmp_path / "m")]
    assert main(args) == 2
    assert "--model needs --base-url" in capsys.readouterr().err


def test_endpoint_down_prints_one_line_without_traceback(tmp_path):
    p = subprocess.run([sys.executable, "-m", "normlab.cli", *_args("http://127.0.0.1:9/v1", tmp_path / "d")],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 3
    assert "Traceback" not in p.stderr
    lines = [x for x in p.stderr.splitlines() if x.strip()]
    assert len(lines) == 1 and "cannot reach the OpenAI-compatible endpoint at http://127.0.0.1:9/v1" in lines[0]


def test_llm_probe_commands(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)  # probes without --out save llm-probe-<probe>.csv in the current directory
    with StubServer(["Q", "M"]) as stub:
        assert main(["llm-probe", "bias", "--base-url", stub.base_url, "--trials", "30", "--json", "--no-progress",
                     "--seed", "1", "--out", str(tmp_path / "b")]) == 0
        s = _json(capsys)
        # exact mode (the default): counts drawn locally from the probed probabilities, so no test on them
        assert s["llm_calls"] == 2 and sum(s["counts"]) + s["invalid"] == 30 and s["test"] == "none"
        assert pd.read_parquet(s["table"])["name"].tolist() == ["Q", "M"]
        assert main(["llm-probe", "strategy", "--base-url", stub.base_url, "--memory", "1", "--json",
                     "--no-progress", "--out", str(tmp_path / "s")]) == 0
        s = _json(capsys)
        assert s["states"] == 5 and s["llm_calls"] == 10
        assert len(pd.read_parquet(tmp_path / "s" / "strategy.parquet")) == 10
        assert main(["llm-probe", "meta", "--base-url", stub.base_url, "--memory", "2", "--states", "2", "--json",
                     "--no-progress"]) == 0
        s = _json(capsys)
        assert s["questions"] >= 10 and set(s["accuracy"]) >= {"min", "max", "round"}
        assert s["protocol"] == "authors" and s["scoring"] == "substring"
        assert main(["llm-probe", "meta", "--base-url", stub.base_url, "--memory", "2", "--states", "2", "--json",
                     "--no-progress", "--meta-protocol", "normlab", "--meta-scoring", "strict"]) == 0
        s = _json(capsys)
        assert s["protocol"] == "normlab" and s["scoring"] == "strict" and s["reasks"] == 0


def _wait_for_interactions(journal, n, proc, timeout=60.0):
    t0 = time.time()
    while time.time() - t0 < timeout:
        if proc.poll() is not None:
            raise AssertionError(f"the run finished before it could be killed:\n{proc.stderr.read()}")
        if journal.exists():
            k = journal.read_bytes().count(b'"ev":"int"')
            if k >= n:
                return k
        time.sleep(0.01)
    raise AssertionError("the run made no progress")


@pytest.mark.slow  # 7 s in the quick tier (issue 33: the default tier under 5 minutes)
@pytest.mark.parametrize("mode", ["exact", "sample"])
def test_kill_a_real_subprocess_and_resume(tmp_path, mode):
    """SIGKILL a running `normlab llm-run` mid-run, resume it, compare with an uninterrupted run."""
    with StubServer(["Q", "M"], latency=0.004) as stub:
        extra = ["--mode", mode, "--runs", "2", "--stop", "max", "--json"]
        cut = tmp_path / "cut"
        proc = subprocess.Popen([sys.executable, "-m", "normlab.cli", *_args(stub.base_url, cut, *extra, t="100")],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            n_killed = _wait_for_interactions(cut / "journal.jsonl", 40, proc)
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
        finally:
            if proc.poll() is None:
                proc.kill()
        assert proc.returncode == -signal.SIGKILL
        assert not (cut / "decisions.parquet").exists()
        p = subprocess.run([sys.executable, "-m", "normlab.cli", *_args(stub.base_url, cut, *extra, t="100")],
                           capture_output=True, text=True, timeout=300)
        assert p.returncode == 0, p.stderr
        resumed = json.loads(p.stdout)
        assert resumed["replayed_interactions"] >= n_killed - 2 and resumed["finished"]
        full = subprocess.run([sys.executable, "-m", "normlab.cli",
                               *_args(stub.base_url, tmp_path / "full", *extra, t="100")],
                              capture_output=True, text=True, timeout=300)
        assert full.returncode == 0, full.stderr
    a = GameLog.read_parquet(cut)
    b = GameLog.read_parquet(tmp_path / "full")
    assert len(a.decisions) == 2 * 2 * 100  # no interaction lost or repeated
    assert not a.decisions.duplicated(["run", "t", "agent"]).any()
    pd.testing.assert_frame_equal(a.decisions[GAME_COLS], b.decisions[GAME_COLS])


def test_extra_body_is_sent(tmp_path, capsys):
    with StubServer(["Q", "M"]) as stub:
        assert main(_args(stub.base_url, tmp_path / "e", "--mode", "exact", "--extra-body",
                          '{"continue_final_message": true, "add_generation_prompt": false}', t="3")) == 0
        assert all(b["continue_final_message"] is True and b["add_generation_prompt"] is False for b in stub.requests)
