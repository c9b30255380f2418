"""Every bad flag, missing file and impossible output path of every command: one line on stderr
naming the command and the flag, exit code 2, no traceback, no work done (issue 12, CLI).

Each case below printed a traceback, a usage block, advice that did not apply, or exited 0 before
its fix; the flags keep one meaning across commands (``--out`` a directory everywhere,
``--no-progress``, ``--json``).
"""

from __future__ import annotations

import argparse
import errno
import json
import os

import pandas as pd
import pytest

from normlab.cli import build_parser, main

DEAD = "http://127.0.0.1:9/v1"  # nothing listens: every case below must fail before connecting


@pytest.fixture
def files(tmp_path):
    (tmp_path / "afile").write_text("x")
    (tmp_path / "bad.csv").write_text("a,b\n1,2\n")
    (tmp_path / "bad.json").write_text("{not json")
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "notes.txt").write_text("mine")
    # hostile inputs (issue 23): a FIFO, a device, a directory and a 100 000-deep JSON named like
    # the files the commands read, and a game log whose runs table says N = 1e12
    for name in ("fifo.json", "fifo.csv"):
        os.mkfifo(tmp_path / name)
    (tmp_path / "zero.json").symlink_to("/dev/zero")
    (tmp_path / "adir.json").mkdir()
    (tmp_path / "deep.json").write_text("[" * 100_000 + "]" * 100_000)
    return tmp_path


@pytest.fixture(scope="module")
def huge_log(tmp_path_factory):
    """A small game log whose runs table says n_agents = 1e12 (it ended in MemoryError)."""
    import normlab

    d = tmp_path_factory.mktemp("logs") / "huge"
    r = normlab.theory.strategy_game("best_response", n_agents=6, memory=2, n_runs=2, names=["Q", "M"], rng=1,
                                     stop="max", max_interactions=30, record_decisions=True)
    r.to_log().to_parquet(d)
    runs = pd.read_parquet(d / "runs.parquet")
    runs["n_agents"] = 10**12
    runs.to_parquet(d / "runs.parquet", index=False)
    fifo = d.parent / "fifolog"
    fifo.mkdir()
    (fifo / "runs.parquet").write_bytes((d / "runs.parquet").read_bytes())
    os.mkfifo(fifo / "decisions.parquet")
    return d


CASES = [
    # argparse's own errors: one line with the command's name, not a usage block
    (["simulate"], "normlab simulate", "required: MODEL"),
    (["simulate", "minimal"], "normlab simulate minimal", "required: --n-agents"),
    (["simulate", "minimal", "--n-agents", "10", "--foo"], "normlab simulate minimal", "unrecognized arguments: --foo"),
    (["critical-mass", "--n-agents", "10", "--seed", "x"], "normlab critical-mass", "argument --seed: invalid int"),
    (["calibrate", "--table", "llama31_70b_QM_H5", "--seed", "x"], "normlab calibrate", "invalid int value"),
    (["calibrate"], "normlab calibrate", "one of the arguments --ainorms --log --table"),
    (["demo", "--out", "{t}/d", "--fit", "foo"], "normlab demo", "argument --fit: invalid choice"),
    (["llm-probe", "bias", "--foo"], "normlab llm-probe bias", "unrecognized arguments: --foo"),
    # API checks worded as the flag the user typed
    (["simulate", "minimal", "--n-agents", "10", "--runs", "0"], "normlab simulate minimal", "--runs must be >= 1"),
    (["simulate", "minimal", "--n-agents", "10", "--seed", "-1"], "normlab simulate minimal", "--seed must be"),
    (["simulate", "minimal", "--n-agents", "10", "--initial", "consensus:x"], "normlab simulate minimal",
     "give a name index"),
    # graph specs networkx would refuse with a traceback, or accept silently
    (["simulate", "minimal", "--n-agents", "10", "--graph", "ba:0"], "normlab simulate minimal", "1 <= M < N = 10"),
    (["simulate", "minimal", "--n-agents", "10", "--graph", "ba:20"], "normlab simulate minimal", "1 <= M < N = 10"),
    (["simulate", "minimal", "--n-agents", "10", "--graph", "er:2"], "normlab simulate minimal", "P must be in [0, 1]"),
    (["simulate", "minimal", "--n-agents", "10", "--graph", "ws:3:0.1"], "normlab simulate minimal", "an even K"),
    (["simulate", "minimal", "--n-agents", "10", "--n-words", "2", "--bias", "a,b"], "normlab simulate minimal",
     "--bias takes comma-separated weights"),
    (["simulate", "strategy", "--n-agents", "10", "--memory", "2", "--strategy", "{t}/missing.csv"],
     "normlab simulate strategy", "no such file"),
    (["simulate", "strategy", "--n-agents", "10", "--memory", "2", "--strategy", "{t}/bad.csv"],
     "normlab simulate strategy", "lacks column(s) ['memory_state', 'name', 'p']"),
    # output paths that cannot be written: refused before any work, exit 2 (not 4, not a traceback)
    (["simulate", "minimal", "--n-agents", "10", "--out", "{t}/afile/sub"], "normlab simulate minimal",
     "{t}/afile is a file"),
    (["figures", "--only", "table1", "--out", "{t}/afile"], "normlab figures", "exists and is not a directory"),
    (["llm-run", "--n-agents", "4", "--memory", "2", "--names", "Q,M", "--max-interactions", "5",
      "--base-url", DEAD, "--model", "m", "--out", "{t}/afile/sub"], "normlab llm-run", "{t}/afile is a file"),
    (["demo", "--out", "{t}/afile/sub", "--base-url", DEAD, "--model", "m"], "normlab demo", "{t}/afile is a file"),
    (["critical-mass", "--n-agents", "10", "--out", "{t}/sweep.txt"], "normlab critical-mass",
     "must end in .csv or .parquet"),
    (["calibrate", "--table", "llama31_70b_QM_H5", "--save-fit", "{t}/nope/fit.json"], "normlab calibrate",
     "directory {t}/nope does not exist"),
    (["calibrate", "--table", "llama31_70b_QM_H5", "--save-fit", "{t}/fit.txt"], "normlab calibrate",
     "must end in .json"),
    (["calibrate", "--table", "llama31_70b_QM_H5", "--out", "{t}/full"], "normlab calibrate",
     "non-empty directory holding no saved result"),
    # --committed values that crashed or were silently dropped
    (["critical-mass", "--n-agents", "10", "--committed", "inf"], "normlab critical-mass", "not a finite number"),
    (["critical-mass", "--n-agents", "10", "--committed", "nan"], "normlab critical-mass", "not a finite number"),
    (["critical-mass", "--n-agents", "10", "--committed", ""], "normlab critical-mass", "--committed is empty"),
    (["critical-mass", "--n-agents", "10", "--committed", "1.0000001"], "normlab critical-mass",
     "--committed 1.0000001 is neither"),
    # fitted tables that are not there or not JSON: the file is named
    (["calibrate", "--table", "{t}/missing.json"], "normlab calibrate", "{t}/missing.json: no such file"),
    (["calibrate", "--table", "{t}/bad.json"], "normlab calibrate", "{t}/bad.json is not valid JSON"),
    # probes that hung (enumerating 22 million states; drawing names of length 0) or misnamed the flag
    (["llm-probe", "strategy", "--memory", "12", "--base-url", DEAD, "--model", "m"], "normlab llm-probe strategy",
     "more than 200,000 memory states"),
    (["llm-probe", "strategy", "--memory", "12", "--dry-run", "--base-url", DEAD, "--model", "m"],
     "normlab llm-probe strategy", "lower --memory"),
    (["llm-probe", "neutral", "--length", "0", "--base-url", DEAD, "--model", "m"], "normlab llm-probe neutral",
     "--length must be >= 1"),
    (["llm-probe", "neutral", "--n-names", "1", "--base-url", DEAD, "--model", "m"], "normlab llm-probe neutral",
     "--n-names must be >= 2"),
    (["llm-probe", "meta", "--meta-protocol", "x", "--base-url", DEAD, "--model", "m"], "normlab llm-probe meta",
     "--meta-protocol must be one of"),
    # issue 23: absurd sizes end in one line (a documented cap), not a 5.7 GB numpy traceback
    (["calibrate", "--table", "llama31_70b_QM_H5", "--n-agents", "10000000"], "normlab calibrate",
     "--n-agents must be in [2, 10,000] for a prediction"),
    (["calibrate", "--log", "{log}", "--names", "Q,M", "--n-agents", "10000000"], "normlab calibrate",
     "--n-agents must be in [2, 10,000]"),
    (["calibrate", "--log", "{log}", "--names", "Q,M", "--fit-on", "all", "--fit-model", "empirical"],
     "normlab calibrate", "run table column n_agents holds"),  # refused as the log is read (schema.runs_frame)
    (["predict", "--probe", "--n-agents", "10000000", "--memory", "1", "--names", "Q,M", "--base-url", DEAD],
     "normlab predict", "--n-agents must be in [2, 10,000]"),
    # issue 23: FIFOs, devices, directories and deep JSON where a command reads a file
    (["calibrate", "--table", "{t}/fifo.json"], "normlab calibrate", "{t}/fifo.json is a pipe (FIFO), not a regular"),
    (["calibrate", "--table", "{t}/zero.json"], "normlab calibrate", "{t}/zero.json is a device, not a regular file"),
    (["calibrate", "--table", "{t}/adir.json"], "normlab calibrate", "{t}/adir.json is a directory"),
    (["calibrate", "--table", "{t}/deep.json"], "normlab calibrate", "{t}/deep.json nests deeper than 64 levels"),
    (["calibrate", "--log", "{log}/../fifolog", "--names", "Q,M"], "normlab calibrate", "is a pipe (FIFO)"),
    (["llm-run", "--n-agents", "4", "--memory", "2", "--names", "Q,M", "--max-interactions", "5", "--base-url", DEAD,
      "--template", "{t}/fifo.json"], "normlab llm-run", "--template {t}/fifo.json is a pipe (FIFO)"),
    (["llm-run", "--n-agents", "4", "--memory", "2", "--names", "Q,M", "--max-interactions", "5", "--base-url", DEAD,
      "--template", "{t}/deep.json"], "normlab llm-run", "--template {t}/deep.json nests deeper than 64 levels"),
    (["llm-probe", "bias", "--base-url", DEAD, "--model", "m", "--template", "{t}/zero.json"],
     "normlab llm-probe bias", "is a device, not a regular file"),
    (["llm-run", "--n-agents", "4", "--memory", "2", "--names", "Q,M", "--max-interactions", "5", "--base-url", DEAD,
      "--extra-body", "[" * 100_000 + "]" * 100_000], "normlab llm-run", "--extra-body nests deeper than 64"),
    (["simulate", "strategy", "--n-agents", "10", "--memory", "2", "--strategy", "{t}/fifo.csv"],
     "normlab simulate strategy", "--strategy {t}/fifo.csv is a pipe (FIFO)"),
]


@pytest.mark.parametrize("argv, prog, message", CASES, ids=[" ".join(c[0])[:60] for c in CASES])
def test_bad_input_is_one_line_exit_2(argv, prog, message, files, huge_log, capsys):
    t = str(files)
    argv = [a.replace("{t}", t).replace("{log}", str(huge_log)) for a in argv]
    try:
        rc = main(argv)
    except SystemExit as exc:  # argparse exits; main returns
        rc = exc.code
    out, err = capsys.readouterr()
    lines = err.strip().splitlines()
    assert rc == 2, (rc, err)
    assert len(lines) == 1 and "Traceback" not in err, err
    assert lines[0].startswith(f"{prog}: error: ") and message.replace("{t}", t) in lines[0], lines[0]
    assert out == ""


def _leaves(parser):
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs:
        yield parser
    for a in subs:
        for child in a.choices.values():
            yield from _leaves(child)


def test_every_command_documents_its_exit_codes():
    top = build_parser()
    assert "exit codes" in top.epilog and "normlab demo --out report" in top.epilog
    leaves = list(_leaves(top))
    assert len(leaves) >= 11  # simulate x3, critical-mass, llm-run, llm-probe x4, calibrate, figures, demo
    for p in leaves:
        epilog = p.epilog or ""
        assert "examples:" in epilog and "exit codes:" in epilog, p.prog
        assert epilog.rstrip().splitlines()[-1].lstrip().startswith("130"), p.prog


def test_shared_flags_keep_one_meaning():
    """--out, --seed, --json and --no-progress: every command that computes has them, --out is a
    directory everywhere (critical-mass also takes a .csv/.parquet file)."""
    for p in _leaves(build_parser()):
        opts = {o: a for a in p._actions for o in a.option_strings}
        name = p.prog.split(" ", 1)[1]
        if name == "run":  # an experiment file: its steps' flags (seeds, bars) come from the file
            assert "--json" in opts and "DIR" in opts["--out"].metavar
            continue
        if name == "data":  # checks files: nothing drawn, nothing long
            assert "--json" in opts and "--seed" not in opts
            continue
        if name == "journal":  # reads or cuts a journal: nothing drawn, nothing long
            assert "--json" in opts and "--seed" not in opts
            continue
        if name != "figures":  # figures are deterministic, written to files, no bars
            assert {"--seed", "--json"} <= set(opts), name
        if name not in ("figures",):
            assert "--no-progress" in opts, name
        if "--out" in opts:
            assert "DIR" in (opts["--out"].metavar or "") or "directory" in opts["--out"].help, name
        if "--runs" in opts:
            assert opts["--runs"].type is int, name


def test_critical_mass_out_directory_and_no_progress(tmp_path, capsys):
    rc = main(["critical-mass", "--n-agents", "10", "--committed", "1,3", "--runs", "2", "--within-rounds", "5",
               "--seed", "1", "--no-progress", "--out", str(tmp_path / "cm"), "--format", "csv", "--json"])
    out, err = capsys.readouterr()
    assert rc == 0 and err == ""
    s = json.loads(out)
    t = pd.read_csv(tmp_path / "cm" / "critical_mass.csv")
    assert s["out"] == str(tmp_path / "cm" / "critical_mass.csv")
    assert t["committed"].tolist() == [1, 3] and (t["n_runs"] == 2).all()


@pytest.mark.slow  # 2 s in the quick tier (issue 33: the default tier under 5 minutes)
def test_a_probed_table_plays_in_simulate(tmp_path, capsys, monkeypatch):
    """llm-probe strategy writes a CSV whose empty memory state is ""; simulate reads it back."""
    from normlab.llm_runs import StubServer

    monkeypatch.chdir(tmp_path)
    with StubServer(["Q", "M"]) as stub:
        assert main(["llm-probe", "strategy", "--memory", "1", "--base-url", stub.base_url, "--no-progress"]) == 0
    capsys.readouterr()
    rc = main(["simulate", "strategy", "--n-agents", "10", "--memory", "1", "--strategy", "llm-probe-strategy.csv",
               "--runs", "3", "--seed", "1", "--json"])
    out = capsys.readouterr().out
    assert rc == 0 and json.loads(out)["runs"] == 3


def test_calibrate_out_saves_tidy_tables(tmp_path, capsys):
    import normlab

    d, f = tmp_path / "cal", tmp_path / "fit.json"
    argv = ["calibrate", "--table", "llama31_70b_QM_H5", "--n-agents", "24", "--draws", "4", "--runs-flip", "2",
            "--runs-consensus", "2", "--no-strength", "--seed", "1", "--no-progress", "--out", str(d),
            "--save-fit", str(f)]
    assert main(argv) == 0
    text = capsys.readouterr().out
    assert f"saved in {d}" in text
    s = json.loads((d / "summary.json").read_text())
    pred = pd.read_parquet(d / "predictions.parquet")
    assert s["n_agents"] == 24 and {"quantity", "key", "estimate", "low", "high"} <= set(pred.columns)
    assert "p_consensus" in set(pred["quantity"]) and normlab.load(d).n_agents == 24
    assert normlab.calibration.load_fit(f).names == ("Q", "M")
    assert main(argv) == 0  # a rerun overwrites its own result


@pytest.mark.parametrize("call, error, message", [
    (lambda: __import__("normlab.theory", fromlist=["x"]).critical_mass("minimal", "abc", n_agents=10), TypeError,
     "committed must be finite numbers"),
    (lambda: __import__("normlab.calibration", fromlist=["x"]).load_fit(3), TypeError, "a shipped table's name or a path"),
    (lambda: __import__("normlab.theory", fromlist=["x"]).strategy_mean_field(
        __import__("normlab.calibration", fromlist=["x"]).load_fit("llama31_70b_QM_H5")), TypeError, "fit.mean_table()"),
])
def test_api_errors_say_what_is_allowed(call, error, message):
    with pytest.raises(error) as info:
        call()
    assert message in str(info.value) and "\n" not in str(info.value)


# ----------------------------------------------------------------------------- disk errors: exit 4
def _calibrate_table(d, *extra):
    return ["calibrate", "--table", "llama31_70b_QM_H5", "--n-agents", "12", "--draws", "4", "--runs-flip", "2",
            "--runs-consensus", "2", "--no-strength", "--seed", "1", "--no-progress", *extra]


def _fail_writes(monkeypatch, err: int):
    """Every file write fails with ``err`` (a read-only or full disk), as the OS would say it."""
    import builtins
    import io
    import pathlib

    def deny(path):
        raise OSError(err, os.strerror(err), str(path))

    real_open = builtins.open

    def fake_open(file, mode="r", *a, **k):
        if any(c in mode for c in "wax+") and not str(file).startswith("/dev/"):
            deny(file)
        return real_open(file, mode, *a, **k)

    monkeypatch.setattr(builtins, "open", fake_open)
    monkeypatch.setattr(io, "open", fake_open)
    monkeypatch.setattr(pathlib.Path, "write_text", lambda self, *a, **k: deny(self))
    monkeypatch.setattr(pathlib.Path, "write_bytes", lambda self, *a, **k: deny(self))
    monkeypatch.setattr(pd.DataFrame, "to_parquet", lambda self, path, *a, **k: deny(path))


#: (name, arguments from the work dir, how the disk fails, words): every command that writes.
DISK_CASES = [
    ("calibrate --save-fit on /dev/full", lambda d: _calibrate_table(d, "--save-fit", f"{d}/full.json"), "devfull",
     "the disk is full ({d}/full.json)"),
    ("calibrate --out, ENOSPC", lambda d: _calibrate_table(d, "--out", f"{d}/cal"), errno.ENOSPC, "the disk is full"),
    ("calibrate --out, read-only", lambda d: _calibrate_table(d, "--out", f"{d}/cal"), errno.EROFS,
     "the directory is read-only"),
    ("calibrate --save-fit, read-only", lambda d: _calibrate_table(d, "--save-fit", f"{d}/fit.json"), errno.EROFS,
     "the directory is read-only ({d}/fit.json)"),
    ("figures --out, read-only", lambda d: ["figures", "--only", "itcmas_fig6", "--out", f"{d}/figs"], errno.EROFS,
     "the directory is read-only"),
    ("figures --out, ENOSPC", lambda d: ["figures", "--only", "itcmas_fig6", "--out", f"{d}/figs"], errno.ENOSPC,
     "the disk is full"),
    ("simulate --out, ENOSPC", lambda d: ["simulate", "minimal", "--n-agents", "10", "--runs", "2", "--seed", "1",
                                          "--out", f"{d}/sim"], errno.ENOSPC, "the disk is full"),
    ("critical-mass --out, read-only", lambda d: ["critical-mass", "--n-agents", "10", "--committed", "1", "--runs", "2",
                                                  "--within-rounds", "5", "--no-progress", "--out", f"{d}/cm"],
     errno.EROFS, "the directory is read-only"),
]


@pytest.mark.parametrize("name, argv, how, words", DISK_CASES, ids=[c[0] for c in DISK_CASES])
def test_disk_errors_are_one_line_exit_4(name, argv, how, words, tmp_path, monkeypatch, capsys):
    if how == "devfull":
        if not os.path.exists("/dev/full"):
            pytest.skip("no /dev/full")
        (tmp_path / "full.json").symlink_to("/dev/full")  # a real ENOSPC from the kernel
    else:
        _fail_writes(monkeypatch, how)
    rc = main(argv(tmp_path))
    err = capsys.readouterr().err
    lines = [x for x in err.splitlines() if x.strip() and "warning:" not in x]
    assert rc == 4, (rc, err)
    assert len(lines) == 1 and "Traceback" not in err, err
    assert lines[0].startswith(f"normlab {name.split()[0]}") and words.replace("{d}", str(tmp_path)) in lines[0], lines[0]


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only directories")
def test_a_real_read_only_directory_is_exit_4(tmp_path, capsys):
    d = tmp_path / "ro"
    d.mkdir()
    d.chmod(0o555)
    try:
        rc = main(_calibrate_table(tmp_path, "--save-fit", f"{d}/fit.json"))
    finally:
        d.chmod(0o755)
    err = capsys.readouterr().err
    assert rc == 4 and "permission denied" in err and len(err.strip().splitlines()) == 1, err


def test_help_states_the_prediction_cap():
    from normlab.calibration.prediction import MAX_PREDICTED_AGENTS

    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    text = sub.choices["calibrate"].format_help()
    assert f"2 .. {MAX_PREDICTED_AGENTS:,}" in " ".join(text.split())


@pytest.mark.slow  # 14 s in the quick tier (issue 33: the default tier under 5 minutes)
def test_arviz_daily_notice_never_makes_a_second_line(tmp_path):
    """ArviZ warns on the first import of each day ("ArviZ is undergoing a major refactor ...",
    stamped in the user's cache): CI's run that crossed midnight printed it as a second line of
    `normlab calibrate`'s one-line error. PyMC and ArviZ are imported through
    calibration.logit.import_pymc / import_arviz, which silence it."""
    import subprocess
    import sys

    def run(*argv, cache):
        env = {**os.environ, "XDG_CACHE_HOME": str(cache), "PYTHONWARNINGS": "default"}
        return subprocess.run([sys.executable, *argv], capture_output=True, text=True, timeout=300, env=env)

    raw = run("-c", "import pymc", cache=tmp_path / "c0")  # a fresh cache: the notice is due
    if "ArviZ is undergoing" not in raw.stderr:
        pytest.skip("this ArviZ prints no daily notice")
    ours = run("-c", "from normlab.calibration.logit import import_pymc, import_arviz; import_arviz(); import_pymc()",
               cache=tmp_path / "c1")
    assert ours.returncode == 0 and "ArviZ" not in ours.stderr, ours.stderr
    r = run("-m", "normlab.cli", "calibrate", "--log", str(tmp_path / "none"), "--names", "Q,M", cache=tmp_path / "c2")
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "holds no decisions.parquet" in r.stderr, r.stderr
