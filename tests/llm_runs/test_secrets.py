"""Secrets never reach disk or the terminal (issue 23, finding 4).

A password in ``--base-url http://user:PW@host/v1``, a key given with ``--api-key`` and a key in
the environment are planted; every command that talks to an endpoint or records a command line
runs against the local stub server, and EVERY file it writes (text, JSON, HTML, Parquet cells and
metadata) plus its stdout and stderr are searched for each secret. A key given as ``?api_key=...``
in the URL is refused in one line that does not echo it, before anything is written.

To cover one more command, add one entry to :data:`COMMANDS` (its argument list, built from the
working directory and the endpoint flags; ``needs`` names the commands whose output it reads, which
must come earlier in the dict), and its name to :data:`LLM_COMMANDS` if it takes the endpoint flags
(then a key in the URL's query must be refused by it too).
"""

from __future__ import annotations

import base64
import json
import sys
from pathlib import Path

import pytest

from normlab.cli import main

PASSWORD = "pw-Secret-41"
FLAG_KEY = "key-Secret-42"
QUERY_KEY = "q-Secret-43"
ENV_KEY = "env-Secret-44"
SECRETS = (PASSWORD, FLAG_KEY, QUERY_KEY, ENV_KEY,
           base64.b64encode(f"alice:{PASSWORD}".encode()).decode())  # the password as an HTTP Basic header holds it

SMALL_CAL = ["--draws", "4", "--runs-flip", "2", "--runs-consensus", "2", "--no-strength", "--seed", "1", "--no-progress"]

#: name -> (argument list from (work dir, endpoint flags), commands it needs first). Each LLM
#: command takes the endpoint flags; the others read what an earlier command wrote.
COMMANDS = {
    "llm-run": (lambda d, ep: ["llm-run", "--n-agents", "4", "--memory", "1", "--names", "Q,M", "--max-interactions",
                               "12", "--runs", "1", "--mode", "sample", "--seed", "1", "--no-progress", "--out",
                               f"{d}/run", *ep], ()),
    "llm-probe": (lambda d, ep: ["llm-probe", "strategy", "--memory", "1", "--names", "Q,M", "--no-progress", "--out",
                                 f"{d}/probe", *ep], ()),
    "llm-probe bias": (lambda d, ep: ["llm-probe", "bias", "--names", "Q,M", "--trials", "4", "--no-progress", "--out",
                                      f"{d}/bias", *ep], ()),
    "llm-probe meta": (lambda d, ep: ["llm-probe", "meta", "--memory", "1", "--names", "Q,M", "--states", "2",
                                      "--no-progress", "--out", f"{d}/meta", *ep], ()),
    "llm-probe neutral": (lambda d, ep: ["llm-probe", "neutral", "--max-pools", "2", "--no-progress", "--out",
                                         f"{d}/neutral", *ep], ()),
    "demo": (lambda d, ep: ["demo", "--out", f"{d}/demo", "--names", "Q,M", "--n-agents", "4", "--memory", "1", "--runs", "2",
                            "--max-rounds", "20", "--committed-runs", "1", "--sample-check", "2", "--draws", "10",
                            "--within-rounds", "8", "--no-progress", *ep], ()),
    "calibrate": (lambda d, ep: ["calibrate", "--log", f"{d}/run", "--names", "Q,M", "--fit-model", "empirical",
                                 "--fit-on", "all", "--out", f"{d}/cal", "--save-fit", f"{d}/fit.json", *SMALL_CAL],
                  ("llm-run",)),
    "predict": (lambda d, ep: ["predict", "--probe", "--n-agents", "4", "--memory", "1", "--names", "Q,M",
                               "--jitter-states", "1", "--no-underlying", "--out", f"{d}/pred", "--save-table",
                               f"{d}/table.json", *SMALL_CAL, *ep], ()),
}
LLM_COMMANDS = ("llm-run", "llm-probe", "llm-probe bias", "llm-probe meta", "llm-probe neutral", "demo", "predict")


def _found(path: Path, secret: str) -> bool:
    """Is ``secret`` anywhere in ``path``: its bytes, and for Parquet every cell and the metadata."""
    data = path.read_bytes()
    if secret.encode() in data:
        return True
    if path.suffix == ".parquet":
        import pyarrow.parquet as pq

        t = pq.read_table(path)
        meta = t.schema.metadata or {}
        if any(secret.encode() in k + v for k, v in meta.items()):
            return True
        return secret in t.to_pandas().astype(str).to_csv()
    return False


def _leaks(root: Path, text: str) -> list[str]:
    bad = [f"{s} in the terminal output" for s in SECRETS if s in text]
    for p in sorted(root.rglob("*")):
        if p.is_file():
            bad += [f"{s} in {p.relative_to(root)}" for s in SECRETS if _found(p, s)]
    return bad


def _run(argv, monkeypatch, capsys) -> tuple[int, str]:
    monkeypatch.setattr(sys, "argv", ["normlab", *argv])  # what the commands record as their command line
    try:
        rc = main(argv)
    except SystemExit as exc:
        rc = exc.code
    out, err = capsys.readouterr()
    return rc, err + out  # stderr first: the demo's first printed line


@pytest.fixture(scope="module")
def stub():
    from normlab.llm_runs.testing import StubServer

    with StubServer(["Q", "M"]) as s:
        yield s


@pytest.mark.slow  # 29 s in the quick tier (issue 33: the default tier under 5 minutes)
@pytest.mark.parametrize("planting", ["flag", "env"])
def test_no_command_writes_or_prints_a_secret(planting, stub, tmp_path, monkeypatch, capsys):
    url = stub.base_url.replace("http://", f"http://alice:{PASSWORD}@")
    ep = ["--base-url", url, "--model", "stub-model"]
    if planting == "flag":
        ep += ["--api-key", FLAG_KEY]
        monkeypatch.delenv("NORMLAB_LLM_API_KEY", raising=False)
    else:
        monkeypatch.setenv("NORMLAB_LLM_API_KEY", ENV_KEY)
    monkeypatch.chdir(tmp_path)
    text = {}
    for name, (argv, needs) in COMMANDS.items():  # in order: a command after those whose output it reads
        assert set(needs) <= set(text), f"{name} needs {needs} earlier in COMMANDS"
        rc, text[name] = _run(argv(tmp_path, ep), monkeypatch, capsys)
        assert rc == 0, (name, text[name][-2000:])
    bad = _leaks(tmp_path, "\n".join(text.values()))
    assert not bad, bad
    # the secrets were there to leak: the server got the key, and the recorded command lines are masked
    assert "Basic " + base64.b64encode(f"alice:{PASSWORD}".encode()).decode() in stub.auth_headers

    for d in ("run", "probe", "bias"):
        cmd = json.loads((tmp_path / d / "manifest.json").read_text())["sessions"][-1]["command"]
        assert "--base-url" in cmd and cmd[cmd.index("--base-url") + 1].startswith("http://***@"), cmd
        if planting == "flag":
            assert cmd[cmd.index("--api-key") + 1] == "***", cmd
    page = (tmp_path / "demo" / "report.html").read_text(encoding="utf-8")
    assert "Command: <code>normlab demo" in page and "http://***@" in page
    assert json.loads((tmp_path / "demo" / "summary.json").read_text())["command"].startswith("normlab demo")
    first = text["demo"].splitlines()[0]
    assert first.startswith("normlab demo:") and "http://***@" in first, first


@pytest.mark.parametrize("name", LLM_COMMANDS)
def test_a_key_in_the_url_query_is_refused_without_echo(name, tmp_path, monkeypatch, capsys):
    """``?api_key=...`` cannot work with an OpenAI client (it appends its routes after the query):
    refused in one line that masks it, before anything is sent or written."""
    url = f"http://127.0.0.1:9/v1?api_key={QUERY_KEY}&sig={QUERY_KEY}"
    monkeypatch.chdir(tmp_path)
    argv, _ = COMMANDS[name]
    rc, text = _run(argv(tmp_path, ["--base-url", url, "--model", "m"]), monkeypatch, capsys)
    lines = [x for x in text.splitlines() if x.strip()]
    assert rc == 2 and len(lines) == 1 and "query" in lines[0] and "api_key=***" in lines[0], text
    assert not _leaks(tmp_path, text)


@pytest.mark.parametrize("planting", ["url", "env"])
def test_credentials_a_server_echoes_are_masked(planting, tmp_path, monkeypatch, capsys):
    """A careless server quoting the request's Authorization header (Basic for a password in the
    URL, Bearer for a key) in its error."""
    from normlab.llm_runs.testing import StubServer

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("NORMLAB_LLM_API_KEY", ENV_KEY)
    with StubServer(["Q", "M"], faults=["echo_auth"]) as stub:
        url = stub.base_url.replace("http://", f"http://alice:{PASSWORD}@") if planting == "url" else stub.base_url
        argv = COMMANDS["llm-run"][0](tmp_path, ["--base-url", url, "--model", "stub-model", "--max-retries", "0"])
        rc, text = _run(argv, monkeypatch, capsys)
    assert rc == 3 and f"Authorization: {'Basic' if planting == 'url' else 'Bearer'} ***" in text, text
    assert not _leaks(tmp_path, text)


def test_api_key_env_takes_a_name_not_a_key(tmp_path, monkeypatch, capsys):
    """``--api-key-env`` given a key by mistake: refused without echoing it."""
    argv = COMMANDS["llm-run"][0](tmp_path, ["--base-url", "http://127.0.0.1:9/v1", "--api-key-env", FLAG_KEY])
    rc, text = _run(argv, monkeypatch, capsys)
    assert rc == 2 and "--api-key-env takes the NAME" in text and FLAG_KEY not in text


@pytest.mark.parametrize("raw, shown", [
    ("http://u:p@h/v1", "http://***@h/v1"),
    ("https://h/v1?api_key=K&x=1", "https://h/v1?api_key=***&x=1"),
    ("https://h/v1?x=1&access_token=T&sig=S#f", "https://h/v1?x=1&access_token=***&sig=***#f"),
    ("https://h/v1?KEY=K;Token=T", "https://h/v1?KEY=***;Token=***"),
    ("http://h:8/v1", "http://h:8/v1"),
])
def test_redact_url(raw, shown):
    from normlab.llm_runs.backend import redact_url

    assert redact_url(raw) == shown


def test_redact_command_and_text():
    from normlab.llm_runs.backend import redact_command, redact_text

    argv = ["normlab", "llm-run", "--api-key", "K1", "--token=K2", "--password", "K3", "--api-key-env", "MYVAR",
            "--base-url", "https://u:K4@h/v1", "--extra-body", '{"api_key": "K5", "top_a": 1}', "--names", "Q,M"]
    shown = redact_command(argv)
    assert not any(f"K{i}" in " ".join(shown) for i in range(1, 6)), shown
    assert shown[shown.index("--api-key-env") + 1] == "MYVAR" and shown[-1] == "Q,M" and len(shown) == len(argv)
    assert redact_text("sent Authorization: Bearer sk-abc.def") == "sent Authorization: Bearer ***"
