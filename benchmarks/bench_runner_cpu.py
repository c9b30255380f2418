"""The LLM runner's own CPU per decision against a zero-latency local server (issue 23).

Run:  python benchmarks/bench_runner_cpu.py [--interactions 5000] [--reps 3] [--concurrency 4]

The stub server (normlab.llm_runs.testing) runs in its own process with no simulated latency, so
its CPU is measured apart (from /proc). Each repetition runs, each in a fresh process:

1. the plainest baseline: a minimal asyncio loop that POSTs the same chat-completion body to the
   same stub over keep-alive HTTP and decodes each JSON answer -- what any client must spend per
   request (2 requests in flight, as one run has: the two players of an interaction);
2. the runner: `arun_game(200, 3, "Q,M", mode="sample", stop="max")` with a run directory,
   i.e. prompts, requests, parsing, journal (fsync'd), state, and the tables written at the end.

Reported per decision (medians over repetitions): the runner process's CPU seconds (user +
system, `time.process_time`) from the call to `arun_game` to its return -- interpreter start and
imports excluded, tables included -- split into play (prompts, requests, parsing, journal,
state) and the tables built at the end (those of the median repetition: they sum to it); separately, the whole child process's CPU (imports
included, from `resource.getrusage`); the stub's CPU in the same window; the baseline's CPU per request and per decision
(at the runner's requests per decision), and the runner's figure over the baseline's, repetition by
repetition (the machine's speed, which moves both, cancels). Not a timed test: it prints figures.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

BODY = None


def _cpu_s(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def child_runner(url: str, interactions: int, concurrency: int, transport: str = "auto") -> dict:
    import asyncio
    import tempfile

    from normlab.llm_runs import EndpointConfig, arun_game

    from normlab.llm_runs.runner import orchestration

    tables = [0.0]
    for fn in ("build_result", "write_tables"):  # the tables' CPU, told apart from play's
        real = getattr(orchestration, fn)

        def timed(*a, _real=real, **k):
            c = time.process_time()
            try:
                return _real(*a, **k)
            finally:
                tables[0] += time.process_time() - c

        setattr(orchestration, fn, timed)
    cfg = EndpointConfig(base_url=url, concurrency=concurrency, transport=transport)
    with tempfile.TemporaryDirectory() as tmp:
        asyncio.run(arun_game(200, 3, "Q,M", max_interactions=20, mode="sample", stop="max", rng=2, endpoint=cfg,
                              out=f"{tmp}/warm", progress=False))  # lazy imports, first connection
        tables[0] = 0.0
        c0, t0 = time.process_time(), time.perf_counter()
        res = asyncio.run(arun_game(200, 3, "Q,M", max_interactions=interactions, mode="sample", stop="max", rng=1,
                                    endpoint=cfg, out=f"{tmp}/run", progress=False))
        cpu, wall = time.process_time() - c0, time.perf_counter() - t0
    r = res.runs
    return {"cpu_s": cpu, "tables_cpu_s": tables[0], "wall_s": wall, "decisions": int(r["decisions"].sum()),
            "requests": int(r["llm_calls"].sum())}


def child_baseline(url: str, requests: int, in_flight: int = 2) -> dict:
    """Bare keep-alive POSTs of a naming-game body over asyncio streams, JSON decoded."""
    import asyncio
    from urllib.parse import urlsplit

    from normlab.llm_runs.prompts import load_template

    msgs = load_template("main").render([("Q", "M"), ("M", "M"), ("Q", "Q")], ("Q", "M")).messages()
    body = dict(model="stub-model", messages=msgs, max_tokens=6, temperature=0.5, top_k=10, top_p=1.0, min_p=0.0,
                logprobs=True)
    u = urlsplit(url)

    async def go():
        conns = [await asyncio.open_connection(u.hostname, u.port) for _ in range(in_flight)]

        async def one(r, w, seed):
            data = json.dumps({**body, "seed": seed}).encode()
            w.write(b"POST %s/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                    b"Content-Length: %d\r\n\r\n" % (u.path.encode(), len(data)) + data)
            await r.readline()
            n = 0
            while (h := await r.readline()) not in (b"\r\n", b""):
                k, _, v = h.partition(b":")
                if k.strip().lower() == b"content-length":
                    n = int(v)
            return json.loads(await r.readexactly(n))

        async def worker(k, r, w):
            for s in range(k, requests, in_flight):
                await one(r, w, s)

        await asyncio.gather(*(worker(k, r, w) for k, (r, w) in enumerate(conns)))
        for _, w in conns:
            w.close()

    c0, t0 = time.process_time(), time.perf_counter()
    asyncio.run(go())
    return {"cpu_s": time.process_time() - c0, "wall_s": time.perf_counter() - t0, "requests": requests}


def _child(kind: str, *args) -> tuple[dict, float, float]:
    """Run a child; (its report, its whole-process CPU seconds, the stub's CPU seconds meanwhile)."""
    cmd = [sys.executable, __file__, "--child", kind, *map(str, args)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out, err = proc.communicate()
    if proc.returncode != 0:
        raise RuntimeError(err[-2000:])
    return json.loads(out.splitlines()[-1])


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--interactions", type=int, default=5000)
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--concurrency", type=int, default=4)
    p.add_argument("--transport", default="auto", choices=("auto", "lean", "openai"),
                   help="the runner's HTTP client (default auto: lean for the stub)")
    p.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        kind, url, n = args.child[0], args.child[1], int(args.child[2])
        if kind == "runner":
            rep = child_runner(url, n, int(args.child[3]), args.child[4])
        else:
            rep = child_baseline(url, n)
        import resource

        ru = resource.getrusage(resource.RUSAGE_SELF)
        rep["process_cpu_s"] = ru.ru_utime + ru.ru_stime
        print(json.dumps(rep))
        return 0

    from normlab.llm_runs.testing import StubProcess

    runner, stub_r, base, stub_b, whole, play, tab = [], [], [], [], [], [], []
    with StubProcess("--names", "Q,M") as stub:
        pid = stub.proc.pid
        for _ in range(args.reps):
            s0 = _cpu_s(pid)
            r = _child("runner", stub.base_url, args.interactions, args.concurrency, args.transport)
            s1 = _cpu_s(pid)
            b = _child("baseline", stub.base_url, r["requests"])
            s2 = _cpu_s(pid)
            runner.append(1e3 * r["cpu_s"] / r["decisions"])
            play.append(1e3 * (r["cpu_s"] - r["tables_cpu_s"]) / r["decisions"])
            tab.append(1e3 * r["tables_cpu_s"] / r["decisions"])
            whole.append(1e3 * r["process_cpu_s"] / r["decisions"])
            stub_r.append(1e3 * (s1 - s0) / r["decisions"])
            base.append(1e3 * b["cpu_s"] / b["requests"])
            stub_b.append(1e3 * (s2 - s1) / b["requests"])
    per_dec = r["requests"] / r["decisions"]
    med = statistics.median
    # play and tables of the median repetition (the two middle ones for an even count), so that they sum
    # to the headline: the medians of the parts need not (0.674 + 0.062 against 0.674 once in CI)
    order = sorted(range(len(runner)), key=runner.__getitem__)
    mid = order[(len(order) - 1) // 2: len(order) // 2 + 1]
    out = {
        "decisions": r["decisions"], "requests_per_decision": round(per_dec, 3), "reps": args.reps,
        "concurrency": args.concurrency,
        "transport": args.transport,
        "runner_cpu_ms_per_decision": round(med(runner), 3),
        "runner_play_cpu_ms_per_decision": round(statistics.fmean(play[i] for i in mid), 3),
        "runner_tables_cpu_ms_per_decision": round(statistics.fmean(tab[i] for i in mid), 3),
        "runner_cpu_ms_per_decision_all_reps": [round(x, 3) for x in runner],
        "runner_whole_process_cpu_ms_per_decision": round(med(whole), 3),
        "stub_cpu_ms_per_decision": round(med(stub_r), 3),
        "baseline_cpu_ms_per_request": round(med(base), 3),
        "baseline_cpu_ms_per_decision": round(med(base) * per_dec, 3),
        "baseline_cpu_ms_per_decision_all_reps": [round(x * per_dec, 3) for x in base],
        "baseline_stub_cpu_ms_per_request": round(med(stub_b), 3),
        # the runner against the bare client on the same machine, same minute (machine speed cancels)
        "runner_to_baseline_ratio": round(med(r_ / (b_ * per_dec) for r_, b_ in zip(runner, base)), 2),
        "load_average": os.getloadavg()[0] if hasattr(os, "getloadavg") else None,
    }
    print(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
