"""Issue 29, item 9, the journal's side: a damaged ``settings.json`` is named, a journal that is a
FIFO is refused as one (not "missing or empty", and without waiting on it), a full disk leaves no
``.tmp`` file behind, a journal line is bounded before it is held (a 300 MB line cost 1.2 GB), and
``--restart`` refuses a folder holding an unrelated file before it deletes anything."""

from __future__ import annotations

import errno
import os
import signal
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from normlab.cli import main
from normlab.llm_runs import journal as jr
from normlab.llm_runs.testing import StubServer

ARGS = ["llm-run", "--n-agents", "4", "--memory", "2", "--names", "Q,M", "--max-interactions", "8", "--mode", "sample",
        "--seed", "1", "--no-progress"]
CRSEC = ["crsec", "run", "--ops", "llm", "--agents", "Bob Johnson,Carlos Gomez", "--minutes", "20", "--p-present",
         "1", "--seed", "5", "--no-progress"]


def _lines(capsys):
    return [x for x in capsys.readouterr().err.splitlines() if x.strip()]


@pytest.fixture(scope="module")
def stub():
    with StubServer(["Q", "M"]) as s:
        yield s


@pytest.fixture
def finished(stub, tmp_path):
    out = tmp_path / "run"
    assert main([*ARGS, "--base-url", stub.base_url, "--out", str(out)]) == 0
    return out


@pytest.mark.parametrize("name, text", [("settings.json", '{"format": "normlab.llm_run/1", "hash": '),
                                        ("settings.json", "[1, 2]"), ("manifest.json", "{not json")])
def test_a_damaged_settings_or_manifest_file_is_named(stub, tmp_path, capsys, name, text):
    """Before: ``error: Expecting value: line 1 column 41 (char 40)``, naming no file."""
    out = tmp_path / "run"
    assert main([*ARGS, "--base-url", stub.base_url, "--out", str(out), "--budget", "1200"]) == 5  # more to play
    (out / name).write_text(text)
    capsys.readouterr()
    assert main([*ARGS, "--base-url", stub.base_url, "--out", str(out)]) == 2
    err = _lines(capsys)
    assert len(err) == 1 and str(out / name) in err[0], err


@pytest.fixture
def alarm():
    """Fail instead of hanging: a FIFO opened for reading waits for a writer for ever."""
    def ring(*_):
        raise TimeoutError("blocked on the FIFO")

    old = signal.signal(signal.SIGALRM, ring)
    signal.alarm(20)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, old)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_a_fifo_journal_is_refused_as_one_without_waiting(stub, finished, capsys, tmp_path, alarm):
    """Before: llm-run said the journal was "missing or empty"; crsec run and ``journal check`` waited."""
    (finished / "journal.jsonl").unlink()
    os.mkfifo(finished / "journal.jsonl")
    capsys.readouterr()
    assert main([*ARGS, "--base-url", stub.base_url, "--out", str(finished)]) == 2
    err = _lines(capsys)
    assert len(err) == 1 and "journal.jsonl is a pipe (FIFO), not a regular file" in err[0], err
    assert "missing or empty" not in err[0]
    assert main(["journal", "check", str(finished)]) == 2
    assert "pipe (FIFO)" in _lines(capsys)[-1]
    with pytest.raises(ValueError, match="pipe"):
        jr.read_journal(finished / "journal.jsonl")
    with StubServer(scripted="crsec") as crsec_stub:  # the CRSEC/SCENE journal machinery too
        out = tmp_path / "crsec"
        assert main([*CRSEC, "--base-url", crsec_stub.base_url, "--out", str(out), "--budget", "3req"]) == 5
        (out / "journal.jsonl").unlink()
        os.mkfifo(out / "journal.jsonl")
        capsys.readouterr()
        assert main([*CRSEC, "--base-url", crsec_stub.base_url, "--out", str(out)]) == 2
        assert "pipe (FIFO)" in _lines(capsys)[-1]


def _full_disk(path):
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))


def test_a_full_disk_leaves_no_tmp_files(stub, tmp_path, capsys, monkeypatch):
    """Before: ``manifest.json.tmp`` (empty) and the tables' ``.tmp`` copies stayed in the run folder."""
    import normlab.llm_runs.runner.log as log

    real = Path.write_text

    def write_text(self, *a, **k):  # the file is created, then the disk is full
        if self.name.endswith(".tmp"):
            real(self, "")
            _full_disk(self)
        return real(self, *a, **k)

    out = tmp_path / "run"
    monkeypatch.setattr(Path, "write_text", write_text)
    capsys.readouterr()
    assert main([*ARGS, "--base-url", stub.base_url, "--out", str(out)]) == 4
    assert "the disk is full" in _lines(capsys)[-1]
    assert not list(out.glob("*.tmp")) if out.exists() else True
    monkeypatch.undo()

    def calls_fail(*a, **k):  # the decisions table is written, the next one meets a full disk
        _full_disk(out / "calls.parquet.tmp")

    monkeypatch.setattr(log, "_write_calls", calls_fail)
    assert main([*ARGS, "--base-url", stub.base_url, "--out", str(out)]) == 4
    assert not list(out.glob("*.tmp")), sorted(p.name for p in out.iterdir())
    monkeypatch.undo()
    assert main([*ARGS, "--base-url", stub.base_url, "--out", str(out)]) == 0  # and it resumes
    assert len(pd.read_parquet(out / "decisions.parquet")) == 16


_PEAK = """
import sys
from normlab.llm_runs import journal as jr
def peak():
    return next(int(x.split()[1]) for x in open('/proc/self/status') if x.startswith('VmHWM:')) // 1024
base = peak()
try:
    jr.read_journal(sys.argv[1])
    print("READ")
except ValueError as exc:
    print("ERR", str(exc).replace(chr(10), " "))
print("PEAK", peak() - base)
"""


@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="needs /proc (VmHWM)")
def test_a_huge_journal_line_is_refused_without_being_held(finished, tmp_path, capsys, stub):
    """Before: a 300 MB line cost 1.2 GB (here 120 MB: read whole, decoded, parsed, ~4x)."""
    j = finished / "journal.jsonl"
    lines = j.read_bytes().splitlines(keepends=True)
    with open(j, "wb") as f:
        f.write(lines[0])
        f.write(b'{"ev":"call","text":"' + b"x" * (120 * 2**20) + b'"}\n')
        f.writelines(lines[1:])
    r = subprocess.run([sys.executable, "-c", _PEAK, str(j)], capture_output=True, text=True, timeout=120)
    out = dict(x.split(" ", 1) for x in r.stdout.splitlines())
    assert "ERR" in out, r.stdout + r.stderr
    assert str(j) in out["ERR"] and "line 2" in out["ERR"] and "longer than" in out["ERR"]
    assert int(out["PEAK"]) < 64, out  # MiB above the start: one bounded read (31 here), not the line
    capsys.readouterr()
    assert main([*ARGS, "--base-url", stub.base_url, "--out", str(finished)]) == 2
    err = _lines(capsys)
    assert len(err) == 1 and str(j) in err[0] and "line 2" in err[0], err


def test_a_record_too_long_for_a_journal_is_not_written(tmp_path):
    with jr.Journal(tmp_path / "journal.jsonl") as j:
        j.write({"ev": "call", "text": "ok"})
        with pytest.raises(ValueError, match="longer than the 16,777,216 a journal line may hold"):
            j.write({"ev": "call", "text": "x" * (jr.MAX_RECORD_BYTES + 1)})
    assert len(jr.read_journal(tmp_path / "journal.jsonl")) == 1


def test_restart_refuses_a_folder_with_an_unrelated_file_before_deleting(stub, finished, capsys):
    """Before: ``--restart`` deleted the run's settings, journal, manifest and tables, then refused."""
    (finished / "notes.txt").write_text("mine")
    before = sorted(p.name for p in finished.iterdir())
    capsys.readouterr()
    assert main([*ARGS, "--base-url", stub.base_url, "--out", str(finished), "--restart"]) == 2
    err = _lines(capsys)
    assert len(err) == 1 and "'notes.txt'" in err[0] and "nothing was deleted" in err[0], err
    assert sorted(p.name for p in finished.iterdir()) == before
    assert main([*ARGS, "--base-url", stub.base_url, "--out", str(finished)]) == 0  # the run is whole
