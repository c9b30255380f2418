"""The fault matrix (loopback only, bounded in time): kill -9 at random points including inside
journal writes, each resumed and compared record for record with an uninterrupted run; disk
errors mid-run end with one line and a resumable directory; 50 concurrent runs leak neither file
descriptors nor threads."""

from __future__ import annotations

import asyncio
import errno
import os
import threading

import pandas as pd
import pytest

from normlab.cli import main
from normlab.llm_runs import EndpointConfig, arun_game
from normlab.llm_runs.journal import Journal
from normlab.llm_runs.testing import StubServer, kill_resume_trials

ARGS = ["llm-run", "--n-agents", "6", "--memory", "2", "--names", "Q,M", "--max-interactions", "60", "--runs", "2",
        "--mode", "sample", "--seed", "3", "--no-progress"]


@pytest.mark.slow
def test_kill_and_resume_matrix(tmp_path):
    res = kill_resume_trials(20, rng=20261123, workdir=tmp_path)
    assert res["failures"] == []
    assert (res["survived"], res["lost"], res["duplicated"], res["hung"]) == (20, 0, 0, 0)
    assert res["inside_write"] >= 1  # some kills landed inside a journal write


def _table(out):
    d = pd.read_parquet(out / "decisions.parquet")
    return d.drop(columns=["latency_s"]).sort_values(["run", "t", "agent"]).reset_index(drop=True)


@pytest.mark.parametrize("err, words", [(errno.ENOSPC, "the disk is full"), (errno.EROFS, "the directory is read-only")])
def test_disk_error_mid_run_is_one_line_and_resumable(tmp_path, capsys, monkeypatch, err, words):
    with StubServer(["Q", "M"]) as stub:
        ref = tmp_path / "ref"
        assert main([*ARGS, "--base-url", stub.base_url, "--out", str(ref)]) == 0
        real = Journal.write
        calls = {"n": 0}

        def failing(self, record, *, sync=False):
            calls["n"] += 1
            if calls["n"] > 40 and self._f is not None:
                raise OSError(err, os.strerror(err), str(self.path))
            return real(self, record, sync=sync)

        monkeypatch.setattr(Journal, "write", failing)
        out = tmp_path / "run"
        capsys.readouterr()
        assert main([*ARGS, "--base-url", stub.base_url, "--out", str(out)]) == 4
        lines = [x for x in capsys.readouterr().err.splitlines() if x.strip()]
        assert len(lines) == 1 and words in lines[0] and "rerun the same command to resume" in lines[0]
        monkeypatch.setattr(Journal, "write", real)
        assert main([*ARGS, "--base-url", stub.base_url, "--out", str(out)]) == 0
    assert _table(out).equals(_table(ref))


def _fds() -> int:
    return len(os.listdir("/proc/self/fd"))


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="needs /proc")
def test_fifty_concurrent_runs_leak_nothing(tmp_path):
    with StubServer(["Q", "M"], latency=0.002) as stub:
        cfg = EndpointConfig(base_url=stub.base_url, concurrency=8)

        async def one(k):
            return await arun_game(4, 2, "Q,M", max_interactions=24, runs=1, mode="sample", stop="max", rng=k, endpoint=cfg,
                                   out=tmp_path / f"r{k}", progress=False)

        async def all_runs():
            return await asyncio.wait_for(asyncio.gather(*(one(k) for k in range(50))), timeout=240)

        asyncio.run(all_runs())  # warm-up: imports, lazy client state
        fds, threads = _fds(), threading.active_count()
        for p in tmp_path.iterdir():
            import shutil

            shutil.rmtree(p)
        results = asyncio.run(all_runs())
    assert len(results) == 50 and all(r.log.decisions.shape[0] == 48 for r in results)
    assert _fds() <= fds + 2, f"file descriptors grew from {fds} to {_fds()}"
    assert threading.active_count() <= threads + 1


def test_endpoint_dying_mid_run_is_one_line_and_resumable(tmp_path, capsys):
    with StubServer(["Q", "M"]) as stub:
        ref = tmp_path / "ref"
        assert main([*ARGS, "--base-url", stub.base_url, "--out", str(ref)]) == 0
        out = tmp_path / "run"
        stub.inject(*(["ok"] * 30 + ["500"] * 50))  # the endpoint dies after 30 requests
        capsys.readouterr()
        assert main([*ARGS, "--base-url", stub.base_url, "--out", str(out), "--max-retries", "1"]) == 3
        lines = [x for x in capsys.readouterr().err.splitlines() if x.strip()]
        assert len(lines) == 1 and "HTTP 500" in lines[0] and "rerun the same command to resume" in lines[0]
        stub._faults.clear()
        assert main([*ARGS, "--base-url", stub.base_url, "--out", str(out)]) == 0
    assert _table(out).equals(_table(ref))
