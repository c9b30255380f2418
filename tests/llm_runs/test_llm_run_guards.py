"""Issue 23, findings 3 and 9: a run directory whose journal is gone but whose results remain is
refused in one line naming ``--restart`` (never silently paid for again); absurd population sizes
are refused in one line or cost nothing up front; sizes read from a ``runs.parquet`` are checked."""

from __future__ import annotations

import os
import resource
import subprocess
import sys

import pandas as pd
import pytest

from normlab.cli import main
from normlab.llm_runs.testing import StubServer

ARGS = ["llm-run", "--n-agents", "4", "--memory", "2", "--names", "Q,M", "--max-interactions", "8", "--mode", "sample",
        "--seed", "1", "--no-progress"]


def _lines(capsys):
    return [x for x in capsys.readouterr().err.splitlines() if x.strip()]


@pytest.mark.parametrize("damage", ["deleted", "emptied"])
def test_missing_journal_next_to_results_is_refused_naming_restart(tmp_path, capsys, damage):
    with StubServer(["Q", "M"]) as stub:
        out = tmp_path / "run"
        cmd = [*ARGS, "--base-url", stub.base_url, "--out", str(out)]
        assert main(cmd) == 0
        paid = stub.n_chat
        before = pd.read_parquet(out / "decisions.parquet")
        if damage == "deleted":
            (out / "journal.jsonl").unlink()
        else:
            (out / "journal.jsonl").write_bytes(b"")
        capsys.readouterr()
        assert main(cmd) == 2
        lines = _lines(capsys)
        assert len(lines) == 1 and "--restart" in lines[0] and "journal" in lines[0], lines
        assert stub.n_chat == paid  # nothing was asked again
        assert pd.read_parquet(out / "decisions.parquet").equals(before)  # results untouched
        # the named choice: start afresh and pay again
        assert main([*cmd, "--restart"]) == 0
        assert stub.n_chat == 2 * paid
        assert (out / "journal.jsonl").stat().st_size > 0
        # and the restarted run resumes as any other (nothing asked again)
        assert main(cmd) == 0 and stub.n_chat == 2 * paid


def test_restart_discards_a_run_with_other_settings(tmp_path, capsys):
    with StubServer(["Q", "M"]) as stub:
        out = tmp_path / "run"
        assert main([*ARGS, "--base-url", stub.base_url, "--out", str(out)]) == 0
        other = [*ARGS, "--base-url", stub.base_url, "--out", str(out), "--memory", "3"]
        capsys.readouterr()
        assert main(other) == 2  # different settings: refused as before
        assert main([*other, "--restart"]) == 0
        assert int(pd.read_parquet(out / "runs.parquet")["memory"].iloc[0]) == 3


def test_restart_keeps_files_it_does_not_own(tmp_path, capsys):
    out = tmp_path / "run"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    with StubServer(["Q", "M"]) as stub:
        capsys.readouterr()
        assert main([*ARGS, "--base-url", stub.base_url, "--out", str(out), "--restart"]) == 2
    assert (out / "notes.txt").read_text() == "mine"
    assert "not empty" in _lines(capsys)[0]


_PEAK = """
import resource, sys
from normlab.cli import main
code = main(sys.argv[1:])
print("PEAK", next(int(x.split()[1]) for x in open('/proc/self/status') if x.startswith('VmHWM:')) // 1024, "CODE", code)  # VmHWM: ru_maxrss would carry the parent's high-water mark
"""


def _peak_mb(args, timeout=240):
    r = subprocess.run([sys.executable, "-c", _PEAK, *args], capture_output=True, text=True, timeout=timeout)
    line = [x for x in r.stdout.splitlines() if x.startswith("PEAK")][-1].split()
    return int(line[1]), int(line[3]), r.stderr


@pytest.mark.slow  # 4 s in the quick tier (issue 33: the default tier under 5 minutes)
def test_ten_million_agents_cost_nothing_up_front(tmp_path):
    def run(n, out):
        return _peak_mb(["llm-run", "--n-agents", str(n), "--memory", "3", "--names", "Q,M", "--max-interactions", "10",
                         "--mode", "sample", "--stop", "max", "--seed", "1", "--no-progress", "--base-url",
                         stub.base_url, "--out", str(tmp_path / out)])

    with StubServer(["Q", "M"]) as stub:
        base, code0, err0 = run(10, "small")
        peak, code, err = run(10_000_000, "big")
    assert code0 == 0 and code == 0, err0 + err
    assert peak - base < 50, f"peak {peak} MB at N = 10 000 000 vs {base} MB at N = 10"
    d = pd.read_parquet(tmp_path / "big" / "decisions.parquet")
    assert len(d) == 20 and int(pd.read_parquet(tmp_path / "big" / "runs.parquet")["n_agents"].iloc[0]) == 10_000_000


@pytest.mark.parametrize("extra", [["--initial", "random"], ["--committed", "4000000000"]])
def test_population_beyond_the_memory_cap_is_one_line(tmp_path, capsys, extra):
    capsys.readouterr()
    code = main(["llm-run", "--n-agents", "100000000000", "--memory", "3", "--names", "Q,M", "--max-interactions", "10",
                 "--mode", "sample", "--no-progress", "--base-url", "http://127.0.0.1:9/v1", "--out",
                 str(tmp_path / "x"), *extra])
    lines = _lines(capsys)
    assert code == 2 and len(lines) == 1 and "n_agents" in lines[0], lines
    assert not (tmp_path / "x").exists() or not any((tmp_path / "x").iterdir())


def test_sizes_in_a_runs_table_are_checked(tmp_path):
    from normlab.schema import GameLog

    with StubServer(["Q", "M"]) as stub:
        out = tmp_path / "run"
        assert main([*ARGS, "--base-url", stub.base_url, "--out", str(out)]) == 0
    runs = pd.read_parquet(out / "runs.parquet")
    for bad in (1e12, -3, 10**15):
        r = runs.copy()
        r["n_agents"] = bad
        r.to_parquet(out / "runs.parquet", index=False)
        with pytest.raises(ValueError, match="n_agents") as info:
            GameLog.read_parquet(out)
        assert "\n" not in str(info.value)
