"""Issue 29, item 3 (and the experiment-file parts of item 9): experiment files that work for every
command and hold nothing they should not. Each test names the finding it guards; each failed on the
code before the fix."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from normlab.cli import build_parser, main
from normlab.experiment import MANIFEST_NAME, ExperimentError, read_experiment
from normlab.llm_runs.testing import StubServer

CRSEC = ["crsec", "run", "--minutes", "30", "--dt", "10", "--seed", "1", "--no-progress"]


def _printed_config(argv, capsys) -> str:
    assert main([*argv, "--print-config"]) == 0
    return capsys.readouterr().out


def _run(argv, capsys) -> tuple[int, str]:
    try:
        rc = main(argv)
    except SystemExit as exc:
        rc = exc.code
    out, err = capsys.readouterr()
    return rc, out + err


def test_a_printed_config_without_sweep_runs_a_journaled_command(tmp_path, monkeypatch, capsys):
    """Item 3: ``--print-config > study.toml; normlab run study.toml`` exited 2 for every journaled
    command (experiment.json was written into the step's run directory before the step, which then
    refused it). The manifest now lies beside the run directory; the run is the command line's."""
    monkeypatch.chdir(tmp_path)
    Path("crsec.toml").write_text(_printed_config([*CRSEC, "--out", "runs/crsec"], capsys))
    rc, text = _run(["run", "crsec.toml"], capsys)
    assert rc == 0, text[-2000:]
    assert (tmp_path / "runs" / "crsec" / "settings.json").exists()
    manifest = json.loads((tmp_path / "runs" / f"crsec.{MANIFEST_NAME}").read_text())
    assert manifest["steps"][0]["exit_code"] == 0 and not (tmp_path / "runs" / "crsec" / MANIFEST_NAME).exists()
    with StubServer(["Q", "M"]) as stub:
        Path("llm.toml").write_text(_printed_config(
            ["llm-run", "--n-agents", "2", "--memory", "1", "--names", "Q,M", "--max-interactions", "4", "--mode",
             "sample", "--seed", "1", "--no-progress", "--base-url", stub.base_url, "--model", "stub-model",
             "--out", "runs/llm"], capsys))
        rc, text = _run(["run", "llm.toml"], capsys)
        assert rc == 0, text[-2000:]
        rc, text = _run(["run", "llm.toml"], capsys)  # again: resumed from the journal, not refused
        assert rc == 0, text[-2000:]
    assert (tmp_path / "runs" / "llm" / "decisions.parquet").exists()



@pytest.mark.parametrize("command", ["llm-probe strategy", "scene run"])
def test_the_other_journaled_commands_run_from_a_printed_config(command, tmp_path, monkeypatch, capsys):
    """Item 3, the two commands the first test does not run: ``llm-probe strategy`` and ``scene run``
    from ``--print-config`` output without ``[sweep]`` (both refused their own run directory before),
    run and then resumed from their journal (the second run sends nothing new)."""
    monkeypatch.chdir(tmp_path)
    if command == "scene run":
        stub_ctx, argv = StubServer(scripted="scene"), ["scene", "run", "--tuples", "1", "--seed", "2", "--max-turns",
                                                        "2", "--no-progress", "--n-boot", "50"]
    else:
        stub_ctx, argv = StubServer(["Q", "M"]), ["llm-probe", "strategy", "--memory", "1", "--names", "Q,M",
                                                  "--no-progress"]
    with stub_ctx as stub:
        Path("exp.toml").write_text(_printed_config([*argv, "--base-url", stub.base_url, "--model", "stub-model",
                                                     "--out", "runs/step"], capsys))
        rc, text = _run(["run", "exp.toml"], capsys)
        assert rc == 0, text[-2000:]
        journal = tmp_path / "runs" / "step" / "journal.jsonl"
        lines = journal.read_text().count("\n")
        assert lines > 0 and (tmp_path / "runs" / "step" / "settings.json").exists()
        rc, text = _run(["run", "exp.toml"], capsys)
        assert rc == 0, text[-2000:]
    manifest = json.loads((tmp_path / "runs" / f"step.{MANIFEST_NAME}").read_text())
    assert [s["exit_code"] for s in manifest["steps"]] == [0] and not (tmp_path / "runs" / "step" / MANIFEST_NAME).exists()

def test_restart_never_deletes_a_run_it_then_refuses(tmp_path, monkeypatch, capsys):
    """Item 3: with ``restart = true`` and ``out`` naming an existing run, the restart deleted the
    run's journal, settings, manifest and tables and then failed anyway (the experiment's own
    manifest stood in the directory). Now the restart starts the run afresh and it completes."""
    monkeypatch.chdir(tmp_path)
    with StubServer(["Q", "M"]) as stub:
        argv = ["llm-run", "--n-agents", "2", "--memory", "1", "--names", "Q,M", "--max-interactions", "4",
                "--mode", "sample", "--seed", "1", "--no-progress", "--base-url", stub.base_url, "--model",
                "stub-model", "--out", "runs/llm"]
        text = _printed_config(argv, capsys)
        Path("study.toml").write_text(text)
        rc, out = _run(["run", "study.toml"], capsys)
        assert rc == 0, out[-2000:]
        Path("study.toml").write_text(text.replace("[experiment]", "[experiment]\nrestart = true"))
        rc, out = _run(["run", "study.toml"], capsys)
    assert rc == 0, out[-2000:]
    for f in ("settings.json", "journal.jsonl", "manifest.json", "decisions.parquet"):
        assert (tmp_path / "runs" / "llm" / f).exists(), f


@pytest.mark.parametrize("out", ["../outside", "/ABS", "link/inside"])
def test_out_is_confined_to_the_files_folder_unless_asked(out, tmp_path, monkeypatch, capsys):
    """Item 3: ``out`` was accepted anywhere (``../../x``, an absolute path, a link leading out); a
    file's out now stays under the file's folder unless ``--out-anywhere`` is given."""
    home = tmp_path / "study"
    home.mkdir()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (home / "link").symlink_to(elsewhere)
    out = out.replace("/ABS", str(elsewhere / "x"))
    f = home / "s.toml"
    f.write_text(f'[experiment]\ncommand = "crsec run"\nminutes = 30\nseed = 1\nout = "{out}"\n')
    with pytest.raises(ExperimentError, match="leads outside the file's folder.*--out-anywhere"):
        read_experiment(f, build_parser())
    rc, text = _run(["run", str(f), "--plan"], capsys)
    assert rc == 2 and "--out-anywhere" in text
    rc, text = _run(["run", str(f), "--plan", "--out-anywhere"], capsys)
    assert rc == 0 and "--out=" in text
    inside = home / "runs"
    f.write_text('[experiment]\ncommand = "crsec run"\nminutes = 30\nseed = 1\nout = "runs"\n')
    assert read_experiment(f, build_parser()).out == str(inside)  # read from the file's folder
    assert "--out-anywhere" in _help(capsys)


def _help(capsys) -> str:
    with pytest.raises(SystemExit):
        main(["run", "--help"])
    return capsys.readouterr().out


def _cli_child(*args, timeout=60):
    """``normlab ARGS`` in a child capped at 2 GB of address space: ``(exit code, stderr)``, or
    ``(None, "timeout")`` when it did not end within ``timeout`` seconds (it is then killed)."""
    import resource

    def limit():
        resource.setrlimit(resource.RLIMIT_AS, (2 * 2**30, 2 * 2**30))

    try:
        r = subprocess.run([sys.executable, "-m", "normlab.cli", *map(str, args)], capture_output=True, text=True,
                           timeout=timeout, preexec_fn=limit)
    except subprocess.TimeoutExpired:
        return None, "timeout"
    return r.returncode, r.stderr


def test_the_loader_reads_only_small_regular_files(tmp_path):
    """Item 3: ``normlab run /dev/zero`` grew to 2.66 GB and a FIFO hung; the file is read through
    normlab.user_files (a regular file of at most 1 MiB)."""
    rc, err = _cli_child("run", "/dev/zero")
    assert rc == 2 and "a device" in err, err[-2000:]
    fifo = tmp_path / "s.toml"
    os.mkfifo(fifo)
    rc, err = _cli_child("run", fifo, timeout=20)
    assert rc == 2 and "pipe (FIFO)" in err, err[-2000:]
    big = tmp_path / "big.toml"
    big.write_text('[experiment]\ncommand = "crsec run"\n' + "# padding\n" * 200_000)
    with pytest.raises(ExperimentError, match="more than the 1,048,576 allowed"):
        read_experiment(big, build_parser())


def test_a_huge_sweep_is_refused_before_it_is_expanded(tmp_path):
    """Item 3: an 8 KB file with a 10^6-combination [sweep] parsed for minutes (683 MB and
    growing); the number of steps is computed from the list lengths first (at most 10 000)."""
    f = tmp_path / "s.toml"
    values = ", ".join(str(i) for i in range(100))
    f.write_text(f'[experiment]\ncommand = "crsec run"\nminutes = 30\n[sweep]\nseed = [{values}]\n'
                 f'dt = [{values}]\nthreshold = [{values}]\n')
    assert f.stat().st_size < 8192
    proc = subprocess.run([sys.executable, "-m", "normlab.cli", "run", str(f), "--plan"], capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 2 and "makes 1,000,000 steps (100 x 100 x 100), more than the 10,000 allowed" in \
        proc.stderr, proc.stderr[-2000:]


def test_comments_and_descriptions_are_redacted_in_the_manifest(tmp_path, monkeypatch, capsys):
    """Item 3: comments and ``description`` were copied into experiment.json unredacted (an
    ``sk-proj-`` key, a ``ghp_`` token); the file's text and every string value now pass through
    the command line's redaction."""
    monkeypatch.chdir(tmp_path)
    key, token = "sk-proj-AbCdEf0123456789ghij", "ghp_0123456789abcdefghijKLMN"
    Path("s.toml").write_text(f'# my key: {key}\n[experiment]\ncommand = "crsec run"\n'
                              f'description = "runs for token {token}; pw in http://me:hunter2@host/v1"\n'
                              'minutes = 30\nseed = 1\nno-progress = true\nout = "runs/c"\n')
    rc, text = _run(["run", "s.toml"], capsys)
    assert rc == 0, text[-2000:]
    data = (tmp_path / "runs" / f"c.{MANIFEST_NAME}").read_text()
    for secret in (key, token, "AbCdEf0123456789", "0123456789abcdefghij", "hunter2"):
        assert secret not in data and secret not in text, secret
    assert "# my key: ***" in json.loads(data)["file_text"]


def test_a_value_beginning_with_a_dash_is_not_taken_as_a_flag(tmp_path, capsys):
    """Item 9: a positional value ``--help`` in an experiment file was taken as a flag (the step
    printed its help instead of running); such a value is refused in one line."""
    f = tmp_path / "s.toml"
    f.write_text('[experiment]\ncommand = "crsec analyse"\npath = "--help"\n')
    with pytest.raises(ExperimentError, match="'--help' begins with '-'.*flag.*'./--help'"):
        read_experiment(f, build_parser())
    rc, text = _run(["run", str(f)], capsys)
    assert rc == 2 and "usage:" not in text
    f.write_text('[experiment]\ncommand = "crsec analyse"\npath = "./--help"\n')
    assert "./--help" in read_experiment(f, build_parser()).steps[0].argv


def test_a_byte_order_mark_is_read_as_nothing(tmp_path, capsys):
    """Item 9: a UTF-8 byte-order mark (some editors write one) gave a confusing TOML error
    ("Invalid statement (at line 1, column 1)"); the file reads as without it."""
    f = tmp_path / "s.toml"
    f.write_bytes(b'\xef\xbb\xbf[experiment]\ncommand = "crsec run"\nminutes = 30\nseed = 1\n')
    exp = read_experiment(f, build_parser())
    assert exp.command == ("crsec", "run") and "--seed=1" in exp.steps[0].argv
    rc, text = _run(["run", str(f), "--plan"], capsys)
    assert rc == 0 and "Invalid statement" not in text
