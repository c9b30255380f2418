"""Cost of a probe-only prediction: probing every memory state, and predicting from the table.

Run:  python benchmarks/bench_probe.py --memory 5            # 1 365 states x 2 orders (W = 2)
      python benchmarks/bench_probe.py --memory 3 --quick    # 85 states x 2 orders

On the embedded SmolLM2-135M server (one llama.cpp thread, in-process, so the process CPU time
includes the model) unless --base-url is given:

1. Cold probe: ``normlab.llm_runs.strategy_table`` in exact mode, every state of length 0..H in
   both name orders, sent as ``normlab predict --probe`` sends them (to the embedded server: one
   request at a time, in the order of the prompts' text, so each resumes from the cached prompt
   it shares most with; to ``--base-url``: concurrency 4): requests, prompt tokens, tokens the
   server evaluated (not restored from its prompt cache), wall and CPU seconds.
2. Baseline, measured in the same run: the plainest correct probe -- one request at a time, in
   no particular order, the name distribution read from it -- on ``--baseline`` prompts drawn
   from the same states, half before and half after the cold probe (so machine load hits both
   alike), against a server of its own (one slot). Ratio per request.
3. Resume: the same probe from its journal (every prompt a cache hit): requests and seconds.
4. Prediction from the table: ``ProbeFit`` -> ``normlab.calibration.predict`` at ``--n-agents``
   (200 table draws, the paper's experiment sizes) and the underlying prediction (400 runs per
   draw, 50 draws): CPU seconds.

Not a timed test: it prints figures. CPU seconds are the process's (all threads).
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import tempfile
import time
from pathlib import Path

import numpy as np


def _clock():
    return time.perf_counter(), time.process_time()


async def _baseline(base_url, prompts, s):
    """One request at a time: render, ask for the first-token logprobs, read the name distribution."""
    from normlab.llm_runs import EndpointConfig
    from normlab.llm_runs.backend import open_endpoint
    from normlab.llm_runs.exact import name_distribution

    ep = EndpointConfig(base_url=base_url, concurrency=1)
    async with open_endpoint(ep) as client:
        for pr in prompts:
            async def fetch(partial, pr=pr):
                res = await client.chat(pr.messages(pr.prefill + partial), max_tokens=1, temperature=1.0,
                                        logprobs=True, top_logprobs=s["top_logprobs"])
                return res.top

            await name_distribution(s["names"], fetch, temperature=s["temperature"], top_k=s["top_k"])


def baseline(base_url, prompts, s) -> tuple[float, float]:
    w0, c0 = _clock()
    asyncio.run(_baseline(base_url, prompts, s))
    w1, c1 = _clock()
    return w1 - w0, c1 - c0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--memory", type=int, default=5, help="memory length H (default 5: 1 365 states x 2 orders)")
    ap.add_argument("--names", default="F,J")
    ap.add_argument("--n-agents", type=int, default=24, help="population size of the prediction (default 24)")
    ap.add_argument("--baseline", type=int, default=48, help="prompts of the one-at-a-time baseline (default 48)")
    ap.add_argument("--base-url", default=None, help="an endpoint instead of the embedded SmolLM2 server")
    ap.add_argument("--out", default=None, help="probe directory (default: a temporary one; must not exist)")
    ap.add_argument("--quick", action="store_true", help="small prediction settings")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args(argv)

    from normlab.calibration import predict
    from normlab.calibration.prediction.from_probes import UNDERLYING_RUNS, probe_cost, probe_fit
    from normlab.llm_runs import EndpointConfig, journal, strategy_table
    from normlab.llm_runs.backend import EmbeddedServer
    from normlab.llm_runs.probes import enumerate_states
    from normlab.llm_runs.prompts import load_template
    from normlab.schema import parse_memory_state, validate_names

    names = validate_names(args.names)
    H = args.memory
    tmp = tempfile.TemporaryDirectory(prefix="bench-probe-")
    out = Path(args.out) if args.out else Path(tmp.name) / "probe"
    if out.exists():
        raise SystemExit(f"{out} exists: the cold probe needs a new directory")
    est = probe_cost(names, H)
    print(f"H = {H}, W = {len(names)}: {est.line()}")
    srv = None
    if args.base_url is None:
        srv = EmbeddedServer(n_parallel=1).start()  # the baseline's; the probe starts its own, as normlab does
        base_url = srv.base_url
        ep = EndpointConfig()
    else:
        base_url = args.base_url
        ep = EndpointConfig(base_url=base_url)
    try:
        s = {"names": names, "temperature": 0.5, "top_k": 10, "top_logprobs": 20}
        tpl = load_template("main")
        rng = np.random.default_rng(args.seed)
        states = enumerate_states(names, H)
        orders = list(itertools.permutations(names))
        pick = rng.choice(len(states) * len(orders), size=min(args.baseline, len(states) * len(orders)),
                          replace=False)
        prompts = [tpl.render(parse_memory_state(states[k // len(orders)]), orders[k % len(orders)]) for k in pick]
        half = len(prompts) // 2
        bw1, bc1 = baseline(base_url, prompts[:half], s)
        w0, c0 = _clock()
        probe = strategy_table(names, H, mode="exact", endpoint=ep, out=out, progress=False, rng=args.seed)
        w1, c1 = _clock()
        bw2, bc2 = baseline(base_url, prompts[half:], s)
        calls = probe.llm_calls
        requests = journal.calls(journal.read_journal(out / journal.JOURNAL_FILE))
        ptok = sum(c.prompt_tokens for c in requests)
        evaluated = ptok - sum(c.cached_tokens for c in requests)
        w2, c2 = _clock()
        again = strategy_table(names, H, mode="exact", endpoint=ep, out=out, progress=False)
        w3, c3 = _clock()
        new_calls = again.llm_calls - calls
    finally:
        if srv is not None:
            srv.close()
    bw, bc = (bw1 + bw2) / len(prompts), (bc1 + bc2) / len(prompts)
    cw, cc = (w1 - w0) / calls, (c1 - c0) / calls
    print(f"1. cold probe: {calls} requests ({ptok:,} prompt tokens, {evaluated:,} evaluated) in {w1 - w0:.1f} s wall, "
          f"{c1 - c0:.1f} s CPU: "
          f"{cw:.3f} s wall, {cc:.3f} s CPU per request")
    print(f"2. baseline (one request at a time, {len(prompts)} prompts before and after): {bw:.3f} s wall, "
          f"{bc:.3f} s CPU per request; normlab / baseline = {cw / bw:.2f} (wall), {cc / bc:.2f} (CPU)")
    print(f"3. resume from the journal: {new_calls} new requests, {len(states) * len(orders)} cache hits, "
          f"{w3 - w2:.1f} s wall, {c3 - c2:.1f} s CPU")
    fit = probe_fit(out)
    tmp.cleanup()
    D, nrc, nrf = (40, 10, 4) if args.quick else (200, 40, 16)
    c4 = time.process_time()
    predict(fit.tables(D, rng=1), n_agents=args.n_agents, n_draws=D, n_runs_consensus=nrc, n_runs_flip=nrf, rng=2)
    c5 = time.process_time()
    Du = 10 if args.quick else 50
    predict(fit.tables(Du, rng=3), n_agents=args.n_agents, n_draws=Du, n_runs_consensus=UNDERLYING_RUNS,
            n_runs_flip=4 * nrf, strength=False, rng=4)
    c6 = time.process_time()
    print(f"4. prediction at N = {args.n_agents} from the table: {D} draws x ({nrc} convergence runs, critical-mass "
          f"sweeps of {nrf} runs per count, relative strength) {c5 - c4:.1f} s CPU (Numba compilation included on a "
          f"fresh cache); underlying ({Du} draws x {UNDERLYING_RUNS} runs) {c6 - c5:.1f} s CPU")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
