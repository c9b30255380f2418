"""The embedded server's prompt cache on the exact strategy probe, before and after, per model (issue 31).

Run:  python benchmarks/bench_prompt_cache.py [--models smollm2,qwen2.5-coder-1.5b] [--memory 2] [--names X,Y]

For each embedded model, the exact strategy probe of every memory state up to H in both name
orders (``normlab llm-probe strategy --names X,Y --memory 2``: 42 prompts at H = 2, asked in the
order of their text so that each follows the one it shares most with) is run twice, each time on
a fresh in-process server (default threads: 1 on up to 2 cores):

- **before** (prompt cache off): ``cache_prompt: false`` on every request and no host-memory
  prompt cache (``--embedded-cache-mib 0``): every prompt token is evaluated;
- **after** (normlab's default): the slot's KV reused for the common prefix and a 256 MiB host
  cache from which every request resumes at the cached state sharing the longest prefix, so a
  prompt pays only the tail after the prefix it shares with an earlier one;
- **again**: the same prompts once more on that warm server (a new probe directory, so nothing
  comes from normlab's journal): every prompt is a full hit and only its last token is evaluated
  -- the largest change of batch shape, so the largest logit jitter.

Printed per model: prompt tokens (the server's count) and how many came from the cache, wall and
process CPU seconds (the server runs in this process, so its threads count), **prompt tokens per
second** (wall and CPU) before and after, and their ratio. Then the **logit jitter** of prefix
reuse: a cached evaluation of a prompt can differ from a cold one in the last digits (the final
logits come from a batch of another size), so ``max |dp|`` over every (state, order, name) of
the tables -- the same prompts, cold against cached (after) and against fully cached (again) --
says how far "answers do not change" holds. One run each; on a machine other jobs share, wall seconds move with the load and the CPU
columns are the steadier reading.
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import tempfile
import time
from pathlib import Path


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def probe_once(model: str, cache: bool, names, memory: int, directory: Path) -> dict:
    """One exact strategy probe (a fresh embedded server unless inside ``shared_embedded_server``);
    its tokens, seconds and table."""
    from normlab.llm_runs import EndpointConfig, strategy_table
    from normlab.llm_runs import journal
    from normlab.llm_runs.journal import JOURNAL_FILE, read_journal

    kw = {} if cache else {"embedded_cache_mib": 0, "extra_body": {"cache_prompt": False}}
    ep = EndpointConfig(embedded_model=model, concurrency=1, **kw)
    c0, t0 = _cpu(), time.perf_counter()
    probe = strategy_table(list(names), memory, mode="exact", endpoint=ep, out=directory, progress=False, rng=1)
    wall, cpu = time.perf_counter() - t0, _cpu() - c0
    calls = journal.calls(read_journal(directory / JOURNAL_FILE))
    ptok = sum(c.prompt_tokens for c in calls)
    cached = sum(c.cached_tokens for c in calls)
    return {"requests": len(calls), "prompt_tokens": ptok, "cached_tokens": cached, "wall_s": wall, "cpu_s": cpu,
            "tok_per_s": ptok / wall, "tok_per_cpu_s": ptok / cpu, "by_order": probe.by_order(), "model": probe.model}


def jitter(a, b) -> dict:
    """max and mean |dp| between two by-order tables of the same prompts (state, order, name)."""
    keys = ["memory_state", "order", "name"]
    m = a.merge(b, on=keys, suffixes=("_a", "_b"))
    d = (m["p_a"] - m["p_b"]).abs()
    return {"compared": int(d.notna().sum()), "max_abs_dp": float(d.max()), "mean_abs_dp": float(d.mean()),
            "differing": int((d > 1e-9).sum())}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="smollm2,qwen2.5-coder-1.5b")
    ap.add_argument("--memory", type=int, default=2)
    ap.add_argument("--names", default="X,Y")
    args = ap.parse_args(argv)
    from normlab.llm_runs.backend import default_threads, shared_embedded_server

    names = args.names.split(",")
    print(f"exact strategy probe, names {args.names}, H = {args.memory}, {default_threads()} thread(s), "
          f"{os.cpu_count()} cores; before = prompt cache off, after = normlab's default")
    with tempfile.TemporaryDirectory(prefix="nl-bench-cache-") as tmp:
        for model in args.models.split(","):
            res = {"before": probe_once(model, False, names, args.memory, Path(tmp) / f"{model}-before")}
            with shared_embedded_server():  # after and again: one server, its prompt cache warm for "again"
                for label in ("after", "again"):
                    res[label] = probe_once(model, True, names, args.memory, Path(tmp) / f"{model}-{label}")
            for label in ("before", "after", "again"):
                r = res[label]
                print(f"  {model:20s} {label:6s}: {r['requests']} requests, {r['prompt_tokens']:,} prompt tokens "
                      f"({r['cached_tokens']:,} from the cache), {r['wall_s']:.1f} s wall, {r['cpu_s']:.1f} s CPU: "
                      f"{r['tok_per_s']:.1f} prompt tokens/s ({r['tok_per_cpu_s']:.1f} per CPU second)", flush=True)
            b, a = res["before"], res["after"]
            print(f"  {model:20s} ratio : {a['tok_per_s'] / b['tok_per_s']:.2f}x prompt tokens/s wall, "
                  f"{a['tok_per_cpu_s'] / b['tok_per_cpu_s']:.2f}x per CPU second; "
                  f"{a['cached_tokens'] / max(a['prompt_tokens'], 1):.0%} of the prompt tokens cached")
            for label in ("after", "again"):
                j = jitter(b["by_order"], res[label]["by_order"])
                print(f"  {model:20s} jitter: max |dp| = {j['max_abs_dp']:.4f} (mean {j['mean_abs_dp']:.4f}) between the "
                      f"cold and the {'cached' if label == 'after' else 'fully cached'} ({label}) evaluation of the same "
                      f"{j['compared']} (state, order, name) probabilities; {j['differing']} differ", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
