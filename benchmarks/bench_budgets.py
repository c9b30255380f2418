"""Budgets against kills and servers without usage, and a journal's longest line (issue 29, items 4 and 9).

Run:  python benchmarks/bench_budgets.py [--trials 3] [--seed 29] [--only CASE,...]

Kill cases (``crsec-requests``, ``crsec-tokens``, ``scene-requests``, ``scene-tokens``,
``tip-tokens``): :func:`normlab.llm_runs.testing.budget_kill_trials` -- the command against the stub
server (its own process, 0.1 s a request) behind a counting proxy, killed (``kill -9``) three times
with requests in flight, then run to its budget; prints what the server received per trial
against the budget, and the requests the kills cut off (received, never journaled).
``usage-omitted``: ``llm-run`` and ``crsec run`` with a token budget behind a proxy that drops every
answer's ``usage``: requests and tokens the server received against the budget, and the requests of
the whole run. ``long-line``: a journal holding a 300 MB line read in a child process: its peak
resident memory above its start (VmHWM) and the one line it ends with. Not a timed test.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CRSEC = ["crsec", "run", "--ops", "llm", "--agents", "Bob Johnson,Carlos Gomez,Tamara Taylor,Isabella Rodriguez",
         "--minutes", "90", "--p-present", "1", "--seed", "5", "--no-progress"]
SCENE = ["scene", "run", "--tuples", "4", "--seed", "2", "--max-turns", "3", "--no-progress", "--n-boot", "100"]
TIP = ["tip", "--names", "Q,M", "--memory", "2", "--n-agents", "6", "--direction", "overturn_Q", "--runs-per-count",
       "2", "--baselines", "2", "--baseline-rounds", "5", "--window", "6", "--draws", "40", "--confirm", "0",
       "--seed", "1", "--no-progress"]
LLM_RUN = ["llm-run", "--n-agents", "6", "--memory", "2", "--names", "Q,M", "--max-interactions", "40", "--runs", "2",
           "--mode", "sample", "--seed", "3", "--no-progress"]
#: name: (command, stub flags, budget, requests after which each session is killed)
KILLS = {
    "crsec-requests": (CRSEC, ("--scripted", "crsec"), "60req", (2, 30)),
    "crsec-tokens": (CRSEC, ("--scripted", "crsec"), "12000", (2, 30)),
    "scene-requests": (SCENE, ("--scripted", "scene"), "40req", (2, 20)),
    "scene-tokens": (SCENE, ("--scripted", "scene"), "12000", (2, 20)),
    "tip-tokens": (TIP, ("--names", "Q,M"), "60000", (10, 60)),
}
CASES = (*KILLS, "usage-omitted", "long-line")

_PEAK = """
import sys
from normlab.llm_runs import journal as jr
def peak():
    return next(int(x.split()[1]) for x in open('/proc/self/status') if x.startswith('VmHWM:')) // 1024
base = peak()
try:
    jr.read_journal(sys.argv[1])
    print("message: read whole")
except ValueError as exc:
    print("message:", str(exc).replace(chr(10), " ")[:160])
print("peak_mb_above_start:", peak() - base)
"""


def _kills(name, trials, seed, work) -> dict:
    from normlab.llm_runs.testing import budget_kill_trials

    args, stub, budget, after = KILLS[name]
    t0 = time.perf_counter()
    res = budget_kill_trials(args, budget, stub_args=stub, n_trials=trials, kills=3, rng=seed, workdir=work / name,
                             kill_after=after)
    k = 0 if budget.endswith("req") else 1
    cap = int(budget[:-3] if k == 0 else budget)
    got = [r[k] for r in res["received"]]
    return {"budget": budget, "received": [list(r) for r in res["received"]], "most": max(got, default=None),
            "within": all(x <= cap for x in got), "cut_off_by_kills": res["cut_off"], "exits": res["exits"],
            "failures": res["failures"], "wall_s": round(time.perf_counter() - t0, 1)}


def _usage_omitted(work) -> dict:
    import contextlib
    import io

    from normlab.cli import main
    from normlab.llm_runs.testing import CountingProxy, StubServer

    out = {}
    for name, args, kw, budget in (("llm-run", LLM_RUN, dict(names=["Q", "M"]), "3000"),
                                   ("crsec run", CRSEC, dict(scripted="crsec"), "5000")):
        with StubServer(**kw) as stub:
            with CountingProxy(stub.base_url) as px, contextlib.redirect_stdout(io.StringIO()):
                main([*args, "--base-url", px.base_url, "--out", str(work / f"{name}-whole")])
                whole = px.requests
            with CountingProxy(stub.base_url, usage="omit") as px, contextlib.redirect_stdout(io.StringIO()):
                code = main([*args, "--base-url", px.base_url, "--out", str(work / f"{name}-omit"), "--budget",
                             budget])
                out[name] = {"budget_tokens": int(budget), "exit": code, "requests_received": px.requests,
                             "tokens_billed": px.tokens, "requests_of_the_whole_run": whole}
    return out


def _long_line(work) -> dict:
    j = work / "long" / "journal.jsonl"
    j.parent.mkdir(parents=True, exist_ok=True)
    with open(j, "wb") as f:
        f.write(b'{"ev":"reserve","id":1,"tok":5,"usd":0.0}\n')
        f.write(b'{"ev":"call","text":"' + b"x" * (300 * 2**20) + b'"}\n')
    r = subprocess.run([sys.executable, "-c", _PEAK, str(j)], capture_output=True, text=True, timeout=600)
    j.unlink()
    return dict(x.split(": ", 1) for x in r.stdout.splitlines() if ": " in x)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--trials", type=int, default=3, help="trials per kill case (default 3)")
    p.add_argument("--seed", type=int, default=29)
    p.add_argument("--only", default=None, help=f"comma-separated cases of {', '.join(CASES)}")
    args = p.parse_args(argv)
    only = CASES if args.only is None else tuple(args.only.split(","))
    bad = [c for c in only if c not in CASES]
    if bad:
        p.error(f"unknown case(s) {bad}; choose from {', '.join(CASES)}")
    res = {}
    with tempfile.TemporaryDirectory(prefix="normlab-bench-budgets-") as tmp:
        work = Path(tmp)
        for c in only:
            if c in KILLS:
                res[c] = _kills(c, args.trials, args.seed, work)
            elif c == "usage-omitted":
                res[c] = _usage_omitted(work)
            else:
                res[c] = _long_line(work)
            print(json.dumps({c: res[c]}), flush=True)
    ok = all(v.get("within", True) and not v.get("failures") for v in res.values() if isinstance(v, dict))
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
