"""Soak: the whole-process peak memory of a long LLM run against the stub server (issue 23).

Run:  python benchmarks/bench_soak.py [--decisions 1000000] [--n-agents 200] [--concurrency 4]
      python benchmarks/bench_soak.py --ci      # the CI size: 100 000 decisions

The stub runs in its own process; `normlab llm-run --mode sample --stop max` (N agents, memory 3,
names Q,M) runs in another until it has taken the requested number of decisions and written its
tables. Reported: the runner process's **peak resident memory over its whole life** -- start,
play, tables, exit -- as the kernel counted it: the child's `VmHWM` (the high-water mark of its
memory since it started, what `/usr/bin/time -v` calls "Maximum resident set size"), written by the
child as it exits. Not `ru_maxrss`: Linux carries the *parent's* high-water mark into a child
started by fork/vfork and exec, so from a large parent (a long pytest session) the child's
`ru_maxrss` reads the parent's size. The resident memory is also sampled from /proc at the start,
middle and end of its life for the shape; the runner's and the stub's CPU seconds; wall time.
Goal: peak <= 250 MB whatever the number of decisions. Not a timed test: it prints figures.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time


def _rss_mb(pid: int) -> float | None:
    try:
        with open(f"/proc/{pid}/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
    except (OSError, ValueError, IndexError):
        return None


def _cpu_s(pid: int) -> float:
    """User + system CPU seconds of a live process (from /proc)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


#: Runs ``normlab ARGS`` and, as the process exits, writes its VmHWM (kB) to the file ``argv[1]``.
_LAUNCH = ("import atexit, sys\n"
           "def _hwm(path=sys.argv[1]):\n"
           "    with open('/proc/self/status') as f:\n"
           "        kb = next(int(x.split()[1]) for x in f if x.startswith('VmHWM:'))\n"
           "    with open(path, 'w') as g:\n"
           "        g.write(str(kb))\n"
           "atexit.register(_hwm)\n"
           "from normlab.cli import main\n"
           "sys.exit(main(sys.argv[2:]))\n")


def soak(decisions: int, n_agents: int = 200, concurrency: int = 4) -> dict:
    from normlab.llm_runs.testing import StubProcess

    interactions = decisions // 2
    with StubProcess("--names", "Q,M") as stub, tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "soak")
        hwm_file = os.path.join(tmp, "vmhwm_kb")
        cmd = [sys.executable, "-c", _LAUNCH, hwm_file, "llm-run", "--n-agents", str(n_agents), "--memory", "3",
               "--names", "Q,M", "--max-interactions", str(interactions), "--mode", "sample", "--stop", "max",
               "--seed", "1", "--concurrency", str(concurrency), "--base-url", stub.base_url, "--out", out,
               "--no-progress", "--json"]
        stub_cpu0 = _cpu_s(stub.proc.pid)
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        samples, stop = [], threading.Event()

        def sample():
            while not stop.wait(0.2):
                r = _rss_mb(proc.pid)
                if r is not None:
                    samples.append(r)

        th = threading.Thread(target=sample, daemon=True)
        th.start()
        stdout_box = {}
        reader = threading.Thread(target=lambda: stdout_box.update(out=proc.stdout.read(), err=proc.stderr.read()),
                                  daemon=True)
        reader.start()
        _, status, usage = os.wait4(proc.pid, 0)  # the child's own rusage: its CPU time
        proc.returncode = os.waitstatus_to_exitcode(status)
        wall = time.perf_counter() - t0
        stop.set()
        th.join()
        reader.join()
        stub_cpu = _cpu_s(stub.proc.pid) - stub_cpu0
        if proc.returncode != 0:
            raise RuntimeError(f"llm-run failed ({proc.returncode}): {stdout_box.get('err', '')[-2000:]}")
        summary = json.loads(stdout_box["out"])
        with open(hwm_file) as f:
            peak_kb = int(f.read())
    n = len(samples)
    pick = (lambda q: round(samples[min(n - 1, int(q * (n - 1)))], 1)) if n else (lambda q: None)
    made = int(summary["decisions"])
    runner_cpu = usage.ru_utime + usage.ru_stime
    return {
        "decisions": made, "n_agents": n_agents, "concurrency": concurrency, "wall_s": round(wall, 1),
        "peak_rss_mb": round(peak_kb / 1024, 1),
        "rss_mb_sampled": {"start": pick(0.02), "middle": pick(0.5), "end": pick(0.98)},
        "runner_cpu_s": round(runner_cpu, 2), "stub_cpu_s": round(stub_cpu, 2),
        "runner_cpu_ms_per_decision": round(1000 * runner_cpu / max(made, 1), 3),
        "command": " ".join(["normlab"] + cmd[4:]),
    }


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--decisions", type=int, default=1_000_000)
    p.add_argument("--n-agents", type=int, default=200)
    p.add_argument("--concurrency", type=int, default=4)
    p.add_argument("--ci", action="store_true", help="the CI size: 100 000 decisions")
    args = p.parse_args(argv)
    decisions = 100_000 if args.ci else args.decisions
    print(json.dumps(soak(decisions, args.n_agents, args.concurrency), indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
