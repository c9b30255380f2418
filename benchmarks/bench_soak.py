"""Soak: resident memory of a long LLM run against the stub server (bounded memory, issue 15).

Run:  python benchmarks/bench_soak.py [--decisions 1000000] [--n-agents 200]

The stub runs in its own process; one `llm-run`-equivalent run (sample mode, N agents, memory 3)
plays until it has taken the requested number of decisions. Resident memory (RSS) is sampled
from /proc while it plays: at the start (after the first 1 % of decisions), the middle and the
end of play, and again after the tidy tables are built and written. Goal: flat within 50 MB
during play. Not a timed test: it prints figures.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import threading
import time


def rss_mb() -> float:
    with open("/proc/self/statm") as f:
        pages = int(f.read().split()[1])
    import os

    return pages * os.sysconf("SC_PAGE_SIZE") / 2**20


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--decisions", type=int, default=1_000_000)
    p.add_argument("--n-agents", type=int, default=200)
    args = p.parse_args(argv)
    from normlab.llm_runs import EndpointConfig, arun_game
    from normlab.llm_runs.testing import StubProcess

    interactions = args.decisions // 2
    samples = []
    stop = threading.Event()

    def sampler(t0):
        while not stop.wait(0.5):
            samples.append((time.perf_counter() - t0, rss_mb()))

    with StubProcess("--names", "Q,M") as stub, tempfile.TemporaryDirectory() as tmp:
        cfg = EndpointConfig(base_url=stub.base_url, concurrency=4)
        t0 = time.perf_counter()
        base = rss_mb()
        th = threading.Thread(target=sampler, args=(t0,), daemon=True)
        th.start()
        res = asyncio.run(arun_game(args.n_agents, 3, "Q,M", max_interactions=interactions, runs=1, mode="sample",
                                    stop="max", rng=1, endpoint=cfg, out=f"{tmp}/soak", progress=False))
        stop.set()
        th.join()
        after = rss_mb()
        wall = time.perf_counter() - t0
    play = [m for _, m in samples]
    n = len(play)
    pick = lambda q: play[min(n - 1, int(q * (n - 1)))] if n else float("nan")
    out = {
        "decisions": int(res.log.decisions.shape[0]), "n_agents": args.n_agents, "wall_s": round(wall, 1),
        "rss_mb": {"before": round(base, 1), "start": round(pick(0.01), 1), "middle": round(pick(0.5), 1),
                   "end_of_play": round(pick(0.97), 1), "after_tables": round(after, 1)},
        "growth_during_play_mb": round(pick(0.97) - pick(0.01), 1),
    }
    print(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
