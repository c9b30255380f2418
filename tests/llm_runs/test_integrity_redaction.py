"""Issue 29, item 6: secrets are redacted by structure, not by pattern (``backend/config.py``:
``redact_url``, ``redact_text``, ``redact_command``, ``key_masker``: the one home). Each test names
the finding it guards; each failed on the code before the fix."""

from __future__ import annotations

import json
import sys
import urllib.request
from pathlib import Path

import pytest

from normlab.cli import main
from normlab.llm_runs.backend import config, redact_command, redact_text, redact_url
from normlab.llm_runs.testing import StubServer

from _hostile_server import HostileServer, http  # the tests' own local servers (tests/: conftest.py)

KEY = "sk-test-0123456789abcdefXYZ"


@pytest.mark.parametrize("raw, secret", [
    ("http://alice:it's-Secret@h/v1", "it's-Secret"),             # a quote ended the old pattern
    ("http://alice:pa ss-Secret@h/v1", "ss-Secret"),              # so did a space
    ("http://alice:hun@ter-Secret@h:8/v1", "ter-Secret"),         # several @: all but the last are userinfo
    ("http://alice:pw-Secret＠127.0.0.1:8/v1", "pw-Secret"),       # a fullwidth ＠, folded first
    ("cannot reach 'http://a:b@c@d-Secret@127.0.0.1:9/v1' (refused)", "d-Secret"),
])
def test_userinfo_of_any_content_is_masked(raw, secret):
    """Item 6: a password holding ``'`` or a space, an unencoded ``@`` and a fullwidth ``＠`` got past
    the pattern of ``redact_url``; the address is now parsed: everything before the last ``@`` of
    its authority is masked."""
    shown = redact_url(raw)
    assert secret not in shown and "alice" not in shown and "***@" in shown, shown
    assert "127.0.0.1" in shown or "@h" in shown  # the host stays readable


def test_extra_body_fields_with_secret_looking_names_are_masked():
    """Item 6: ``--extra-body`` fields named ``api_token`` / ``access_key`` were kept (only exact
    names were masked); any field whose name holds a secret word is masked now, its neighbours
    kept."""
    body = '{"api_token": "T-Secret", "access_key": 12345678, "clientSecret": "C-Secret", "max_tokens": 5, ' \
           '"top_k": 3, "cache_prompt": true}'
    shown = redact_command(["normlab", "llm-run", "--extra-body", body])[-1]
    assert "T-Secret" not in shown and "12345678" not in shown and "C-Secret" not in shown, shown
    assert '"max_tokens": 5' in shown and '"top_k": 3' in shown and '"cache_prompt": true' in shown


@pytest.mark.parametrize("echo", [KEY.upper(), KEY.lower(), KEY[:-1] + "*", KEY[:12] + "****" + KEY[-4:],
                                  "Bearer " + KEY.swapcase()])
def test_an_altered_echo_of_the_key_is_masked(echo):
    """Item 6: a key the server echoes back altered (in case, with a masked last character)
    reached the printed line, manifest.json and journal.jsonl (only the exact key was masked)."""
    mask = config.key_masker(KEY)
    shown = mask(f"error: Incorrect API key provided: {echo}. See the docs.")
    assert KEY[8:20].lower() not in shown.lower() and "***" in shown and "See the docs." in shown, shown
    assert mask("Q") == "Q" and mask("the answer is M") == "the answer is M"


def test_tokens_in_any_text_are_masked():
    """Items 3 and 6: the one redaction recognises provider keys by their form wherever they stand."""
    text = redact_text("use sk-proj-AbCdEf0123456789xyz and ghp_0123456789abcdefghijKLMN in the comment")
    assert "AbCdEf0123456789" not in text and "0123456789abcdefghij" not in text and text.count("***") == 2


def _leaks(root: Path, text: str, secrets) -> list:
    bad = [f"{s!r} in the terminal" for s in secrets if s.lower() in text.lower()]
    for p in sorted(root.rglob("*")):
        if p.is_file():
            data = p.read_bytes().lower()
            bad += [f"{s!r} in {p.relative_to(root)}" for s in secrets if s.lower().encode() in data]
    return bad


def _llm_run(url, out, extra=(), monkeypatch=None):
    argv = ["llm-run", "--n-agents", "2", "--memory", "1", "--names", "Q,M", "--max-interactions", "4", "--runs",
            "1", "--mode", "sample", "--seed", "1", "--no-progress", "--base-url", url, "--model", "stub-model",
            "--out", str(out), *extra]
    monkeypatch.setattr(sys, "argv", ["normlab", *argv])
    try:
        return main(argv)
    except SystemExit as exc:
        return exc.code


@pytest.mark.parametrize("password", ["it's a-Secret", "hun@ter-Secret"])
def test_no_file_of_a_run_holds_a_password_with_a_quote_space_or_at(password, tmp_path, monkeypatch, capsys):
    """Item 6: a URL password holding ``'`` or a space (legal) landed in manifest.json (and via
    ``demo`` in report.html and summary.json); one holding an unencoded ``@`` leaked what followed
    the first ``@``."""
    monkeypatch.delenv("NORMLAB_LLM_API_KEY", raising=False)
    with StubServer(["Q", "M"]) as stub:
        url = stub.base_url.replace("http://", f"http://alice:{password}@")
        rc = _llm_run(url, tmp_path / "run", ["--extra-body", '{"api_token": "T-Secret", "access_key": "A-Secret"}'],
                      monkeypatch)
    out, err = capsys.readouterr()
    assert rc == 0, err[-2000:]
    bad = _leaks(tmp_path, out + err, [password.split("-")[0][-3:] + "-Secret", "T-Secret", "A-Secret"])
    assert not bad, bad



@pytest.mark.slow
def test_no_file_of_a_demo_holds_a_password_with_a_quote_space_or_at(tmp_path, monkeypatch, capsys):
    """Item 6 through the demo (the issue's path: report.html, summary.json and six manifests): a
    password holding ``'``, a space and an unencoded ``@`` reaches none of the demo's files nor its
    printed lines, and the recorded command shows the masked URL."""
    password = "it's hun@ter-Secret"
    monkeypatch.delenv("NORMLAB_LLM_API_KEY", raising=False)
    with StubServer(["Q", "M"]) as stub:
        url = stub.base_url.replace("http://", f"http://alice:{password}@")
        argv = ["demo", "--out", str(tmp_path / "demo"), "--names", "Q,M", "--n-agents", "4", "--memory", "1",
                "--runs", "2", "--max-rounds", "20", "--committed-runs", "1", "--sample-check", "2", "--draws", "10",
                "--within-rounds", "8", "--no-progress", "--base-url", url, "--model", "stub-model"]
        monkeypatch.setattr(sys, "argv", ["normlab", *argv])
        rc = main(argv)
    out, err = capsys.readouterr()
    assert rc == 0, err[-2000:]
    bad = _leaks(tmp_path, out + err, ["ter-Secret", "it's hun"])
    assert not bad, bad
    manifests = list((tmp_path / "demo").rglob("manifest.json"))
    assert len(manifests) >= 2 and (tmp_path / "demo" / "report.html").is_file()
    assert "http://***@" in (tmp_path / "demo" / "report.html").read_text(encoding="utf-8")

def test_a_fullwidth_at_never_reaches_the_printed_error(tmp_path, monkeypatch, capsys):
    """Item 6: a fullwidth ``＠`` in ``--base-url`` kept the password in the printed error."""
    monkeypatch.delenv("NORMLAB_LLM_API_KEY", raising=False)
    rc = _llm_run("http://alice:pw-Secret＠127.0.0.1:9/v1", tmp_path / "run", (), monkeypatch)
    out, err = capsys.readouterr()
    assert rc in (2, 3) and "pw-Secret" not in out + err and "***@" in err, err


def test_an_altered_echo_of_the_key_reaches_no_file_of_a_run(tmp_path, monkeypatch, capsys):
    """Item 6: a key the server echoes back altered reached manifest.json (its ``/models`` entry)
    and journal.jsonl (the answers): a server here puts the key, upper-cased and with its last
    character masked, in its model list and after every answer."""
    echo = KEY.upper()[:-1] + "*"
    with StubServer(["Q", "M"]) as stub:
        def reply(method, path, body, n):
            if method == "GET" and path.endswith("/models"):
                return http({"object": "list", "data": [{"id": "stub-model", "owned_by": f"key {echo}"}]})
            req = urllib.request.Request(stub.base_url + path[len("/v1"):], data=body,
                                         headers={"Content-Type": "application/json"})
            with urllib.request.urlopen(req) as r:
                answer = json.loads(r.read())
            for ch in answer.get("choices", []):
                ch["message"]["content"] = (ch["message"].get("content") or "") + f" ({echo})"
            return http(answer)

        with HostileServer(reply) as srv:
            monkeypatch.setenv("NORMLAB_LLM_API_KEY", KEY)
            rc = _llm_run(srv.url, tmp_path / "run", ("--max-reasks", "0"), monkeypatch)
    out, err = capsys.readouterr()
    assert rc == 0, err[-2000:]
    assert (tmp_path / "run" / "journal.jsonl").exists() and (tmp_path / "run" / "manifest.json").exists()
    bad = _leaks(tmp_path, out + err, [KEY[8:20], KEY[-10:-1]])
    assert not bad, bad
