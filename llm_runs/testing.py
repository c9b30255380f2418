"""The stub server assembled with the scripted stand-ins, for tests, benchmarks and the README's examples.

:class:`StubServer` (:mod:`normlab.llm_runs.core.stub`: an OpenAI-compatible HTTP server on
127.0.0.1 with fault injection) answers the naming game from a memory-following policy, and CRSEC's
and SCENE's prompts with their scripted stand-ins (``scripted="crsec"``, ``"scene"``: the modules of
:data:`STAND_INS`, which register themselves, imported on the first scripted use);
:func:`kill_resume_trials` is the crash part of the fault matrix, :func:`budget_kill_trials` its budget
part (the server behind a :class:`CountingProxy` that counts what it received); ``python -m normlab.llm_runs.testing``
serves the stub until interrupted (:func:`main`).
"""

from __future__ import annotations

import time
from typing import Sequence

from .core import stub as _stub
from .core.stub import (FAULTS, JUNK_TOKENS, SCRIPTED, CountingProxy, Faults, StubProcess, StubServer, history,
                        memory_policy, pieces, register_scripted, scripted_responder, stand_ins)

__all__ = ["FAULTS", "JUNK_TOKENS", "SCRIPTED", "STAND_INS", "CountingProxy", "Faults", "StubProcess", "StubServer",
           "budget_kill_trials", "history", "kill_resume_trials", "main", "memory_policy", "pieces", "register_scripted",
           "scripted_responder", "stand_ins"]

#: The modules of the scripted stand-ins (each registers its task with
#: :func:`~normlab.llm_runs.core.stub.register_scripted` when imported). A new stand-in: its module
#: and its line here.
STAND_INS = ("normlab.llm_runs.crsec.scripted", "normlab.llm_runs.scene.scripted")
_stub._STAND_IN_MODULES.extend(m for m in STAND_INS if m not in _stub._STAND_IN_MODULES)


def kill_resume_trials(n_trials: int = 20, *, rng=0, workdir=None, split_writes: float = 0.004,
                       run_args: Sequence[str] = ("--n-agents", "6", "--memory", "2", "--names", "Q,M",
                                                  "--max-interactions", "90", "--runs", "2", "--mode", "sample",
                                                  "--seed", "7"),
                       timeout: float = 120.0, kill_window: tuple[float, float] = (0.3, 0.95)) -> dict:
    """The crash part of the fault matrix: ``kill -9`` an ``llm-run`` at random points, resume it,
    and compare the result record for record with an uninterrupted run.

    A stub server runs in its own process (deterministic answers from per-request seeds). With
    ``split_writes`` every journal record is written in two halves with that pause between them
    (:data:`normlab.llm_runs.journal.files._SPLIT_WRITES`), so many kills land inside a write. Each kill
    comes at a uniform fraction ``kill_window`` of the uninterrupted run's wall time (start-up,
    the first settings write and play included).

    Returns
    -------
    dict
        ``trials``, ``survived`` (resumed to a table identical to the reference), ``lost`` and
        ``duplicated`` decision rows summed over trials, ``hung`` resumptions (past ``timeout``),
        ``inside_write`` (kills that left a torn last journal line), ``failures`` (messages).
    """
    import os
    import shutil
    import signal
    import subprocess
    import sys
    import tempfile
    from pathlib import Path

    import numpy as np
    import pandas as pd

    gen = np.random.default_rng(rng)
    work = Path(workdir or tempfile.mkdtemp(prefix="normlab-faults-"))
    work.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "NORMLAB_TEST_SPLIT_WRITES": str(split_writes)}
    key = ["run", "t", "agent"]

    def cmd(base_url, out):
        return [sys.executable, "-m", "normlab.cli", "llm-run", *run_args, "--base-url", base_url, "--out", str(out),
                "--no-progress"]

    def table(out):
        d = pd.read_parquet(Path(out) / "decisions.parquet")
        return d.drop(columns=[c for c in ("latency_s",) if c in d]).sort_values(key).reset_index(drop=True)

    out = dict(trials=n_trials, survived=0, lost=0, duplicated=0, hung=0, inside_write=0, failures=[])
    try:
        with StubProcess() as stub:
            ref_dir = work / "reference"
            t0 = time.perf_counter()
            subprocess.run(cmd(stub.base_url, ref_dir), env=env, check=True, capture_output=True, timeout=timeout)
            wall = time.perf_counter() - t0
            ref = table(ref_dir)
            for k in range(n_trials):
                d = work / f"trial{k}"
                proc = subprocess.Popen(cmd(stub.base_url, d), env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                time.sleep(float(gen.uniform(*kill_window)) * wall)
                proc.send_signal(signal.SIGKILL)
                proc.wait()
                j = d / "journal.jsonl"
                if j.exists() and j.stat().st_size and not j.read_bytes().endswith(b"\n"):
                    out["inside_write"] += 1
                try:
                    r = subprocess.run(cmd(stub.base_url, d), env=env, capture_output=True, text=True, timeout=timeout)
                except subprocess.TimeoutExpired:
                    out["hung"] += 1
                    continue
                if r.returncode != 0:
                    out["failures"].append(f"trial {k}: exit {r.returncode}: {r.stderr.strip()[-300:]}")
                    continue
                got = table(d)
                merged = ref[key].merge(got[key], how="outer", on=key, indicator=True)
                out["lost"] += int((merged["_merge"] == "left_only").sum())
                out["duplicated"] += int(got.duplicated(key).sum())
                if len(got) == len(ref) and got.equals(ref):
                    out["survived"] += 1
                else:
                    out["failures"].append(f"trial {k}: table differs from the uninterrupted run")
                shutil.rmtree(d, ignore_errors=True)
    finally:  # a folder of our own (no workdir given) is removed; the result holds no path into it
        if workdir is None:
            shutil.rmtree(work, ignore_errors=True)
    return out


def budget_kill_trials(args: Sequence[str], budget: str, *, stub_args: Sequence[str] = (), n_trials: int = 2,
                       kills: int = 2, rng=0, workdir=None, latency: float = 0.1, usage: str | None = None,
                       kill_after: tuple[int, int] = (2, 30), timeout: float = 300.0) -> dict:
    """The budget part of the fault matrix: ``normlab ARGS --budget BUDGET`` on the stub server
    behind a :class:`CountingProxy`, killed (``kill -9``) ``kills`` times with requests in flight,
    then run to its end; the proxy counts what the server received.

    The stub runs in its own process with ``--latency`` ``latency`` (so requests are in flight
    most of the time); each session is killed as soon as the proxy has passed on a uniform
    ``kill_after`` number of its requests (the last one still being answered), so every kill
    cuts off at least one request the server received and billed.

    Parameters
    ----------
    args : sequence of str
        The command after ``normlab`` (``crsec run ...``, ``scene run ...``, ``tip ...``,
        ``llm-run ...``) without ``--base-url``, ``--out`` and ``--budget``.
    budget : str
        ``--budget`` (``300req``, ``50k``, ...).
    stub_args : sequence of str
        The stub's flags (``--scripted crsec``, ``--names Q,M``).
    usage : {None, "omit", "negative"}, optional
        What the proxy does to the answers' ``usage`` (:class:`CountingProxy`).

    Returns
    -------
    dict
        ``trials``; ``received``: ``[(requests, tokens), ...]`` the server received per trial
        (all its sessions); ``cut_off``: requests received but never journaled, summed over
        trials (the kills' victims); ``exits``: each trial's last exit code; ``failures``.
    """
    import shutil
    import signal
    import subprocess
    import sys
    import tempfile
    from pathlib import Path

    import numpy as np

    from . import journal as jr

    gen = np.random.default_rng(rng)
    work = Path(workdir or tempfile.mkdtemp(prefix="normlab-budget-faults-"))
    work.mkdir(parents=True, exist_ok=True)
    out = dict(trials=n_trials, received=[], cut_off=0, exits=[], failures=[])
    try:
        with StubProcess(*stub_args, "--latency", str(latency)) as stub:
            for k in range(n_trials):
                d = work / f"trial{k}"
                with CountingProxy(stub.base_url, usage=usage) as px:
                    cmd = [sys.executable, "-m", "normlab.cli", *args, "--budget", str(budget), "--base-url", px.base_url,
                           "--out", str(d)]
                    for _ in range(kills):
                        n0 = px.requests
                        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                        target = n0 + int(gen.integers(kill_after[0], kill_after[1] + 1))
                        t0 = time.monotonic()
                        while px.requests < target and proc.poll() is None and time.monotonic() - t0 < timeout:
                            time.sleep(0.002)
                        proc.send_signal(signal.SIGKILL)
                        proc.wait()
                    try:
                        r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
                    except subprocess.TimeoutExpired:
                        out["failures"].append(f"trial {k}: the last session hung")
                        continue
                    time.sleep(2 * latency + 0.2)  # requests of the killed sessions still being answered are billed too
                    out["received"].append((px.requests, px.tokens))
                    out["exits"].append(r.returncode)
                    if r.returncode not in (0, 5):
                        out["failures"].append(f"trial {k}: exit {r.returncode}: {r.stderr.strip()[-300:]}")
                    journals = list(d.rglob(jr.JOURNAL_FILE))
                    out["cut_off"] += px.requests - sum(len(jr.calls(jr.read_journal(j))) for j in journals)
                shutil.rmtree(d, ignore_errors=True)
    finally:  # a folder of our own (no workdir given) is removed; the result holds no path into it
        if workdir is None:
            shutil.rmtree(work, ignore_errors=True)
    return out


def main(argv=None) -> int:
    """``python -m normlab.llm_runs.testing --names Q,M``: serve the stub until interrupted.

    Prints the base URL on the first line of stdout (for scripts and benchmarks that run the
    stub in a separate process).
    """
    import argparse
    import sys

    # the stand-ins are imported only when a command line names one (or asks for help): serving the
    # naming game starts as fast as before
    pre = argparse.ArgumentParser(add_help=False)
    pre.add_argument("--scripted", nargs="?", const="")
    pre.add_argument("-h", "--help", action="store_true")
    first, _ = pre.parse_known_args(argv)
    tasks = stand_ins() if first.scripted is not None or first.help else tuple(sorted(SCRIPTED))
    p = argparse.ArgumentParser(prog="python -m normlab.llm_runs.testing", description=StubServer.__doc__.splitlines()[0])
    p.add_argument("--names", default=None, help="name pool, e.g. Q,M (default: read from the prompt)")
    p.add_argument("--latency", type=float, default=0.0, help="seconds added to every response")
    p.add_argument("--junk-mass", type=float, default=0.1)
    p.add_argument("--beta", type=float, default=1.5, help="memory-following strength of the default policy")
    p.add_argument("--scripted", default=None, choices=tasks,
                   help="answer CRSEC's or SCENE's prompts with a scripted stand-in of a capable model (rules and "
                        "seeded choices, not a language model)")
    p.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (default: a free one)")
    p.add_argument("--bias", default=None, metavar="NAME=W,...",
                   help="the memory-less weight of each name (e.g. X=1,Y=0.0001: a strong individual bias)")
    p.add_argument("--no-logprobs", action="store_true",
                   help="never return logprobs (a hosted API without them: exact mode refuses, sample mode works)")
    args = p.parse_args(argv)
    beta = args.beta
    bias = None
    if args.bias:
        bias = {k.strip(): float(v) for k, _, v in (x.partition("=") for x in args.bias.split(","))}
    stub = StubServer(args.names.split(",") if args.names else None, latency=args.latency, junk_mass=args.junk_mass,
                      policy=lambda system, names: memory_policy(system, names, beta=beta, bias=bias),
                      scripted=args.scripted, port=args.port, logprobs=not args.no_logprobs)
    try:
        stub.start()
    except OSError as e:  # the port is taken (or not ours to bind): one line, as every normlab command says it
        print(f"error: cannot serve on 127.0.0.1:{args.port}: {e.strerror or e} (pass another --port, or "
              "leave it out for a free one)", file=sys.stderr)
        return 2
    try:
        print(stub.base_url, flush=True)
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        pass
    finally:
        stub.close()
    sys.stdout.flush()
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
