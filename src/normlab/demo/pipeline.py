"""The demo pipeline: probe -> predict -> play -> check -> calibrate -> report.

A thin orchestration of public APIs, one step after the other, each journaled in its own
directory under ``DIR/llm/<key>/`` (``key`` hashes the endpoint, the pool and the sampling
settings, so changing any of them starts fresh directories and never mixes runs):

1. **strategy table** (:func:`normlab.llm_runs.strategy_table`, exact mode): ``p(name | memory)``
   for every memory state up to ``H``, in two stages -- memories of length <= 1 first, whose
   measured speed (prompt tokens per second) gives the time estimate printed before the rest.
2. **free-generation check** (:func:`normlab.llm_runs.individual_bias`, sample mode, no re-ask):
   how often the model, asked to write its answer, names no pool name at all.
3. **theory prediction** from the probed table (:func:`normlab.calibration.predict`): collective
   bias, time to consensus and critical masses, with intervals for an experiment of the size
   the demo then runs (so the intervals include that experiment's noise).
4. **LLM populations** (:func:`normlab.llm_runs.run_game`, from empty memories, the paper's
   ``3N`` success streak). In exact mode every prompt is one the probe already asked, so they are
   answered from its cache.
5. **committed-minority check**: runs starting from a consensus attacked by committed agents
   (``stop="flip"``), compared with the predicted flip probability.
6. **calibration from the population's log** (:func:`normlab.calibration.calibrate`): what the
   game logs alone say, with the parameter uncertainty of the states they never visited.
7. **report** (:mod:`normlab.demo.report`).

References
----------
A. Flint Ashery, L. M. Aiello, A. Baronchelli, Sci. Adv. 11, eadu9368 (2025): Experimental
setup, Methods "Committed Minorities", Figs. 1-3, Table 1, Fig. S8, Table S3.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import sys
import threading
import time
import dataclasses
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from normlab._rng import spawn
from normlab._validate import check_int, check_out_dir

__all__ = ["run_demo", "estimate_demo", "DemoResult", "DEMO_DEFAULTS"]

#: Defaults of :func:`run_demo` and ``normlab demo``: a population small enough for a 2-core laptop.
DEMO_DEFAULTS = {
    "names": "X,Y", "n_agents": 8, "memory": 2, "runs": 8, "max_rounds": 100, "committed": "auto",
    "committed_runs": 4, "sample_check": 12, "fit": "empirical", "n_draws": 200, "mode": "exact",
    "within_rounds": 30, "rng": 1,
}
#: Settings of the demo in its directory (marks a directory as a demo directory).
MARKER = "demo.json"
#: Groups of simulated experiments behind every predictive interval of a trajectory.
_GROUPS = 200
_PROBE_SEED = 0  # exact tables do not depend on a seed: one fixed seed lets every demo share them


# ----------------------------------------------------------------------------- result
@dataclass(frozen=True)
class DemoResult:
    """What ``normlab demo`` produced.

    Attributes
    ----------
    directory : pathlib.Path
        ``DIR``: ``report.html``, ``summary.json``, the figures, ``tables/`` and ``llm/`` (the
        journaled LLM runs and probes, reused by a rerun).
    summary : dict
        The content of ``summary.json`` (schema :data:`normlab.demo.report.SUMMARY_SCHEMA`).
    checks : pandas.DataFrame
        Predicted vs observed, one row per comparison (see :meth:`to_frame`).
    probe, population, committed, prediction, calibration :
        The objects behind the report: :class:`~normlab.llm_runs.StrategyProbe`,
        :class:`~normlab.llm_runs.LLMRunResult`, a list of them (one per committed-minority
        setting), :class:`~normlab.calibration.Prediction` (from the probed table) and
        :class:`~normlab.calibration.Calibration` (from the population's log).
    """

    directory: Path
    summary: dict
    checks: pd.DataFrame
    probe: object = None
    population: object = None
    committed: tuple = ()
    prediction: object = None
    calibration: object = None

    @property
    def report(self) -> Path:
        return self.directory / "report.html"

    def to_frame(self) -> pd.DataFrame:
        """Predicted vs observed in long format: ``quantity``, ``key``, ``source``
        (``probe`` / ``log`` prediction), ``predicted``, ``low``, ``high`` (interval for an
        experiment of the size run), ``observed``, ``observed_low``, ``observed_high``
        (Clopper-Pearson 95% where the observation is a count), ``consistent``."""
        return self.checks.copy()

    def __repr__(self) -> str:
        s = self.summary
        t = s["timing"]
        return (f"DemoResult({s['endpoint']['model']}, N={s['settings']['n_agents']}, H={s['settings']['memory']}, "
                f"{len(self.checks)} checks ({int(self.checks['consistent'].fillna(True).sum())} consistent), "
                f"{s['cost']['llm_calls']} LLM calls, {t['wall_s']:.0f} s; report: {self.report})")

    def _repr_html_(self) -> str:
        from .report import checks_html

        return (f"<p><b>normlab demo</b> -- {self.summary['endpoint']['model']}; report: "
                f"<code>{self.report}</code></p>" + checks_html(self.checks))


# ----------------------------------------------------------------------------- small helpers
def _echo(verbose: bool):
    def out(text: str = "") -> None:
        if verbose:
            print(text, file=sys.stderr, flush=True)
    return out


class _Clock:
    """Wall and CPU time (all threads of this process, the embedded server included) per step."""

    def __init__(self):
        self.steps: list[dict] = []
        self.t0, self.c0 = time.perf_counter(), time.process_time()

    @contextlib.contextmanager
    def step(self, name: str, journals=()):
        t, c = time.perf_counter(), time.process_time()
        before = _ledger(journals)
        row = {"step": name}
        try:
            yield row
        finally:
            after = _ledger(journals)
            row.update(wall_s=round(time.perf_counter() - t, 3), cpu_s=round(time.process_time() - c, 3),
                       llm_calls=after["calls"] - before["calls"],
                       prompt_tokens=after["prompt_tokens"] - before["prompt_tokens"],
                       completion_tokens=after["completion_tokens"] - before["completion_tokens"])
            self.steps.append(row)

    def total(self) -> dict:
        return {"wall_s": round(time.perf_counter() - self.t0, 3), "cpu_s": round(time.process_time() - self.c0, 3)}


def _journal_calls(directory) -> list[dict]:
    """The LLM requests journaled in a run or probe directory (none if it does not exist yet)."""
    from normlab.llm_runs.journal import read_journal

    f = Path(directory) / "journal.jsonl"
    if not f.exists():
        return []
    return [r for r in read_journal(f) if r.get("ev") == "call"]


def _ledger(directories) -> dict:
    calls = [c for d in directories for c in _journal_calls(d)]
    return {"calls": len(calls), "prompt_tokens": int(sum(c.get("ptok") or 0 for c in calls)),
            "completion_tokens": int(sum(c.get("ctok") or 0 for c in calls)),
            "cached_tokens": int(sum(c.get("cached") or 0 for c in calls))}


def _fmt_s(sec: float | None) -> str:
    if sec is None or not np.isfinite(sec):
        return "unknown"
    return f"{sec:.0f} s" if sec < 90 else f"{sec / 60:.1f} min"


def _parse_committed(committed, n_agents: int):
    if isinstance(committed, str):
        if committed.strip().lower() == "auto":
            return "auto"
        try:
            committed = [int(x) for x in committed.split(",") if x.strip()]
        except ValueError:
            raise ValueError(f"committed must be 'auto', K or a comma-separated list of counts; got {committed!r}") from None
    vals = [committed] if not isinstance(committed, (list, tuple, np.ndarray)) else list(committed)
    if not vals:
        raise ValueError("committed must be 'auto' or at least one count")
    out = sorted({check_int(v, "committed", 1, n_agents - 1) for v in vals})
    return out


class _JournalBar:
    """Progress of an LLM run from its journal: interactions played out of the interactions the
    theory expects (not the cap), so the ETA is honest; runs that end replace their expectation by
    what they played. Reads only complete JSONL lines; an unknown format just leaves the bar still."""

    def __init__(self, directory, runs: int, expected: float, desc: str, enabled: bool):
        self.path = Path(directory) / "journal.jsonl"
        self.runs, self.expected, self.desc, self.enabled = runs, float(expected), desc, enabled
        self.count = [0] * runs
        self.ended: dict[int, int] = {}
        self._pos, self._buf = 0, b""
        self.bar = self._thread = None
        self._stop = threading.Event()

    def _read(self) -> None:
        if not self.path.exists():
            return
        with open(self.path, "rb") as f:
            f.seek(self._pos)
            data = f.read()
            self._pos += len(data)
        lines = (self._buf + data).split(b"\n")
        self._buf = lines.pop()
        for line in lines:
            if b'"int"' not in line and b'"end"' not in line:
                continue
            try:
                r = json.loads(line)
            except ValueError:
                continue
            k = r.get("run")
            if not isinstance(k, int) or not 0 <= k < self.runs:
                continue
            if r.get("ev") == "int" and isinstance(r.get("t"), int):
                self.count[k] = max(self.count[k], r["t"] + 1)
            elif r.get("ev") == "end" and isinstance(r.get("n"), int):
                self.ended[k] = r["n"]

    def _total(self) -> int:
        return int(round(sum(self.ended.get(k, max(self.expected, self.count[k] + 1)) for k in range(self.runs))))

    def _tick(self) -> None:
        self._read()
        n = sum(self.count)
        self.bar.total = max(self._total(), n)
        if n > self.bar.n:
            self.bar.update(n - self.bar.n)
        else:
            self.bar.refresh()

    def __enter__(self):
        if not self.enabled:
            return self
        from tqdm.auto import tqdm

        self._read()
        self.bar = tqdm(total=max(self._total(), 1), initial=sum(self.count), desc=self.desc, unit="int",
                        leave=False, dynamic_ncols=True, mininterval=0.5)

        def loop():
            while not self._stop.wait(0.5):
                self._tick()

        self._thread = threading.Thread(target=loop, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc):
        if self.bar is not None:
            self._stop.set()
            self._thread.join()
            self._tick()
            self.bar.close()
        return False


@contextlib.contextmanager
def _spinner(desc: str, enabled: bool):
    from normlab.calibration.pipeline import elapsed_bar

    with elapsed_bar(desc, enabled=enabled):
        yield


# ----------------------------------------------------------------------------- validation
def _validate(out, names, n_agents, memory, runs, max_rounds, committed, committed_runs, sample_check, fit,
              n_draws, mode, within_rounds, endpoint, sampling):
    from normlab.calibration.bayes import MODELS
    from normlab.llm_runs.backend import EndpointConfig
    from normlab.llm_runs.runner import make_settings
    from normlab.schema import validate_names

    if isinstance(names, str):
        names = [x.strip() for x in names.split(",")]
    names = validate_names(names)
    if len(names) != 2:
        raise ValueError(f"the demo plays the paper's two-name game (W = 2); got {len(names)} names {list(names)}")
    n_agents = check_int(n_agents, "n_agents", 3, 1000)
    memory = check_int(memory, "memory", 1, 5)
    runs = check_int(runs, "runs", 1)
    max_rounds = check_int(max_rounds, "max_rounds", 10)
    committed = _parse_committed(committed, n_agents)
    committed_runs = check_int(committed_runs, "committed_runs", 0)
    sample_check = check_int(sample_check, "sample_check", 0)
    if fit not in MODELS:
        raise ValueError(f"fit must be one of {MODELS}; got {fit!r}")
    n_draws = check_int(n_draws, "n_draws", 10)
    if mode not in ("exact", "sample"):
        raise ValueError(f"mode must be 'exact' or 'sample'; got {mode!r}")
    within_rounds = check_int(within_rounds, "within_rounds", 3)
    if endpoint is None:
        endpoint = EndpointConfig.from_env()
    if not isinstance(endpoint, EndpointConfig):
        raise TypeError(f"endpoint must be an EndpointConfig or None; got {type(endpoint).__name__}")
    sampling = dict(sampling or {})
    known = {"template", "temperature", "top_k", "max_tokens", "top_logprobs", "max_reasks", "prefill",
             "multi_token", "wrap", "top_p", "min_p", "parse"}
    bad = sorted(set(sampling) - known)
    if bad:
        raise TypeError(f"unknown sampling setting(s) {bad}; allowed: {sorted(known)}")
    # the runner's own checks, before any work: the probe (exact) and the populations (mode)
    make_settings(n_agents, memory, names, max_interactions=1, mode="exact", embedded=endpoint.embedded,
                  **{k: v for k, v in sampling.items() if k not in ("top_p", "min_p")})
    make_settings(n_agents, memory, names, max_interactions=1, mode=mode, embedded=endpoint.embedded, **sampling)
    out = Path(out)
    check_out_dir(out)
    if out.exists() and any(out.iterdir()) and not (out / MARKER).exists():
        raise ValueError(f"--out {out} is not empty and holds no normlab demo; choose an empty or new directory")
    return dict(out=out, names=names, n_agents=n_agents, memory=memory, runs=runs, max_rounds=max_rounds,
                committed=committed, committed_runs=committed_runs, sample_check=sample_check, fit=fit,
                n_draws=n_draws, mode=mode, within_rounds=within_rounds, endpoint=endpoint, sampling=sampling)


def _key(cfg) -> str:
    """Directory key: the endpoint, the pool and every sampling setting (what changes the answers)."""
    ep = cfg["endpoint"]
    blob = json.dumps({"endpoint": ep.base_url or "embedded", "model": ep.model, "names": list(cfg["names"]),
                       "sampling": {k: cfg["sampling"][k] for k in sorted(cfg["sampling"])}},
                      sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:10]


def _seed_int(rng) -> int:
    """An int seed for the demo (fresh entropy when ``rng`` is None)."""
    if rng is None:
        return int(np.random.SeedSequence().entropy % (2**63))
    if isinstance(rng, (int, np.integer)) and not isinstance(rng, bool):
        return int(rng)
    raise TypeError(f"rng must be an int or None (the demo stores it in {MARKER}); got {type(rng).__name__}")


# ----------------------------------------------------------------------------- estimates
def _journal_dirs(root) -> list[Path]:
    """Every run or probe directory with a journal under ``root`` (``OUT/llm``)."""
    return sorted({j.parent for j in Path(root).rglob("journal.jsonl")})


def _spent(directories, ep) -> tuple[float, float]:
    """Tokens (prompt + completion) and USD journaled in ``directories``, at ``ep``'s prices."""
    led = _ledger(directories)
    usd = (led["prompt_tokens"] * ep.price_input + led["completion_tokens"] * ep.price_output) / 1e6
    return float(led["prompt_tokens"] + led["completion_tokens"]), usd


def _budget_text(ep) -> str:
    return (f"{ep.budget_tokens:,.0f} tokens" if ep.budget_tokens is not None else "") + \
        (" / " if ep.budget_tokens is not None and ep.budget_usd is not None else "") + \
        (f"${ep.budget_usd:,.4f}" if ep.budget_usd is not None else "")


def _stage_endpoint(ep, llm_root: Path, own: Path):
    """``ep`` with what is left of the demo's budget for one step.

    The demo's ``budget_tokens`` / ``budget_usd`` cap everything journaled under ``OUT/llm``
    (earlier runs of the demo included). Each step's own client already counts its own journal
    (so a rerun with a larger budget continues it), so the step gets the budget less what the
    *other* steps spent.
    """
    from normlab.llm_runs.backend import BudgetExhausted

    if ep.budget_tokens is None and ep.budget_usd is None:
        return ep
    others = [d for d in _journal_dirs(llm_root) if d != Path(own)]
    tok, usd = _spent(others, ep)
    kw = {}
    for key, spent in (("budget_tokens", tok), ("budget_usd", usd)):
        cap = getattr(ep, key)
        if cap is not None:
            if cap - spent <= 0:
                raise BudgetExhausted(f"the demo's budget of {_budget_text(ep)} is spent")
            kw[key] = cap - spent
    return dataclasses.replace(ep, **kw)


def _demo_ctx(cfg) -> int:
    """KV tokens per slot for the longest prompt any step sends, with its longest answer."""
    from normlab.llm_runs.backend import ctx_for_prompt
    from normlab.llm_runs.runner import longest_prompt_bytes, make_settings

    ep, smp = cfg["endpoint"], cfg["sampling"]
    need = []
    for mode in ("exact", "sample"):
        kw = smp if mode == "sample" else {k: v for k, v in smp.items() if k not in ("top_p", "min_p", "parse")}
        s, tpl, _ = make_settings(cfg["n_agents"], cfg["memory"], cfg["names"], max_interactions=1, mode=mode,
                                  embedded=True, **kw)
        need.append(ctx_for_prompt(longest_prompt_bytes(s, tpl), 1 if mode == "exact" else s.max_tokens))
    return max(need)


def _stopped_at_budget(res) -> None:
    """A run the cap stopped returns (its completed runs kept); the demo stops there too."""
    from normlab.llm_runs.backend import BudgetExhausted

    if getattr(res, "stopped", None) == "budget":
        raise BudgetExhausted("a step reached the budget")


@contextlib.contextmanager
def _demo_budget(ep, llm_root: Path):
    """Turn a step's :class:`BudgetExhausted` into one message about the demo's whole budget."""
    from normlab.llm_runs.backend import BudgetExhausted

    try:
        yield
    except BudgetExhausted:
        if ep.budget_tokens is None and ep.budget_usd is None:
            raise
        dirs = _journal_dirs(llm_root)
        tok, usd = _spent(dirs, ep)
        raise BudgetExhausted(
            f"the demo's budget of {_budget_text(ep)} is reached: {tok:,.0f} tokens"
            + (f" (${usd:,.4f})" if ep.price_input or ep.price_output else "")
            + f" in {_ledger(dirs)['calls']:,} requests are journaled under {llm_root}") from None


def estimate_demo(out, *, names=DEMO_DEFAULTS["names"], n_agents: int = DEMO_DEFAULTS["n_agents"],
                  memory: int = DEMO_DEFAULTS["memory"], runs: int = DEMO_DEFAULTS["runs"],
                  max_rounds: int = DEMO_DEFAULTS["max_rounds"], committed=DEMO_DEFAULTS["committed"],
                  committed_runs: int = DEMO_DEFAULTS["committed_runs"],
                  sample_check: int = DEMO_DEFAULTS["sample_check"], fit: str = DEMO_DEFAULTS["fit"],
                  n_draws: int = DEMO_DEFAULTS["n_draws"], mode: str = DEMO_DEFAULTS["mode"],
                  within_rounds: int = DEMO_DEFAULTS["within_rounds"], endpoint=None, sampling: dict | None = None):
    """Requests, tokens and cost of :func:`run_demo` with the same arguments, before anything
    is sent (``normlab demo --dry-run``): nothing is sent and nothing is written.

    Returns
    -------
    normlab.llm_runs.RunEstimate
        ``typical`` and ``at_most`` per quantity, summed over the steps that call the model:
        the strategy table (one exact request per memory state and name order, less what
        ``out`` already journaled), the free-generation check (``sample_check`` requests), and
        in sample mode the populations and committed-minority runs
        (:func:`normlab.llm_runs.estimate_game`; in exact mode they are answered from the
        table's cache). Tokens are estimated from the rendered prompts (UTF-8 bytes / 3).
    """
    import itertools

    from normlab.llm_runs.runner import (BYTES_PER_TOKEN, RunEstimate, _prompt_tokens, distinct_prompts,
                                         estimate_game, estimate_requests, make_settings)

    cfg = _validate(out, names, n_agents, memory, runs, max_rounds, committed, committed_runs, sample_check, fit,
                    n_draws, mode, within_rounds, endpoint, sampling)
    out, names, N, H = cfg["out"], cfg["names"], cfg["n_agents"], cfg["memory"]
    ep, smp = cfg["endpoint"], cfg["sampling"]
    llm_dir = out / "llm" / _key(cfg)
    prices = {"all": (ep.price_input, ep.price_output)}
    parts, notes = [], []

    # 1. the strategy table, exact: one request per memory state and name order
    s, tpl, _ = make_settings(N, H, names, max_interactions=1, mode="exact", embedded=ep.embedded,
                              **{k: v for k, v in smp.items() if k not in ("top_p", "min_p", "parse")})
    counts = [4 ** k for k in range(H + 1)]
    ptok = sum(c * _prompt_tokens(s, tpl, k) for k, c in enumerate(counts)) / sum(counts)
    total = distinct_prompts(names, H)
    done = sum(1 for d in llm_dir.glob("probe-H*") for c in _journal_calls(d) if c.get("purpose") == "exact")
    left = max(total - done, 0)
    parts.append(estimate_requests(s, tpl, requests=(left, left), prompt_tokens=ptok, what="", prices=prices,
                                   completion_per_request=1))
    notes.append(f"strategy table: {total:,} exact requests ({sum(counts):,} memory states x 2 name orders; a name "
                 f"of several tokens adds requests){f', {done:,} already journaled' if done else ''}")
    # 2. free generation at an empty memory, no re-ask
    if cfg["sample_check"]:
        s2, tpl2, _ = make_settings(N, H, names, max_interactions=1, mode="sample", embedded=ep.embedded,
                                    **{**smp, "max_reasks": 0})
        n = cfg["sample_check"]
        parts.append(estimate_requests(s2, tpl2, requests=(n, n), prompt_tokens=_prompt_tokens(s2, tpl2, 0),
                                       what="", prices=prices))
        notes.append(f"free-generation check: {n} requests (sample mode, no re-ask)")
    # 3. populations and committed-minority runs
    if cfg["mode"] == "exact":
        notes.append("populations and committed-minority runs (exact mode): answered from the strategy table's "
                     "cache, no request")
    else:
        run_kw = dict(mode="sample", endpoint=ep, **smp)
        parts.append(estimate_game(N, H, names, max_interactions=cfg["max_rounds"] * N, runs=cfg["runs"],
                                   stop="streak", **run_kw))
        notes.append(f"populations: {cfg['runs']} runs, sample mode (typical: 12 N interactions per run)")
        if cfg["committed_runs"]:
            cs = [1] if cfg["committed"] == "auto" else cfg["committed"]
            for (x, y), c in itertools.product(itertools.permutations(names), cs):
                parts.append(estimate_game(N, H, names, max_interactions=cfg["within_rounds"] * N,
                                           runs=cfg["committed_runs"], committed=int(c), committed_name=y,
                                           initial=f"consensus:{x}", stop="flip", **run_kw))
            notes.append(f"committed-minority runs: {cfg['committed_runs']} per direction and count, each to its "
                         f"cap of {cfg['within_rounds']} rounds"
                         + ("; counts 'auto' come from the prediction: estimated with one count per direction"
                            if cfg["committed"] == "auto" else ""))
    keys = ("requests", "prompt_tokens", "completion_tokens", "cost_usd")
    rows = {k: tuple(None if any(p.rows[k][i] is None for p in parts) else float(sum(p.rows[k][i] for p in parts))
                     for i in (0, 1)) for k in keys}
    notes.append(f"tokens: prompts rendered from the template, UTF-8 bytes / {BYTES_PER_TOKEN:g} (tokenizers differ "
                 "by about 20 %)")
    spent = None
    if llm_dir.exists():
        dirs = _journal_dirs(out / "llm")
        led = _ledger(dirs)
        if led["calls"]:
            spent = {"requests": led["calls"], "tokens": led["prompt_tokens"] + led["completion_tokens"]}
    model = "embedded SmolLM2-135M-Instruct" if ep.embedded else (ep.model or "the endpoint's first model")
    what = (f"normlab demo: N = {N}, H = {H}, names {','.join(names)}, {cfg['runs']} populations, "
            f"{cfg['mode']} mode, {model}")
    return RunEstimate(what=what, rows=rows, prices=prices, notes=tuple(notes), done=spent)


def _prompt_chars(names, states, sampling) -> list[int]:
    """Characters of every probe prompt (each state in each name order), as sent."""
    import itertools

    from normlab.llm_runs.prompts import load_template
    from normlab.schema import parse_memory_state

    tpl = load_template(sampling.get("template", "main"))
    out = []
    for st in states:
        mem = parse_memory_state(st)
        for order in itertools.permutations(names):
            p = tpl.render(mem, list(order))
            out.append(sum(len(m["content"]) for m in p.messages(p.prefill)))
    return out


def _speed(stage_dir, states, cfg, wall_s: float, new_calls: int, speed_file: Path) -> dict | None:
    """Measured speed of the endpoint from the first probe stage (or stored from an earlier run)."""
    calls = _journal_calls(stage_dir)
    chars = _prompt_chars(cfg["names"], states, cfg["sampling"])
    if new_calls > 0 and calls:
        new = calls[-new_calls:]
        ptok = sum(c.get("ptok") or 0 for c in new)
        sp = {"calls": new_calls, "prompt_tokens": int(ptok), "wall_s": round(wall_s, 3),
              "tokens_per_s": ptok / wall_s if wall_s > 0 else None, "s_per_call": wall_s / new_calls,
              "tokens_per_char": (sum(c.get("ptok") or 0 for c in calls) / len(calls)) / (sum(chars) / len(chars)),
              "measured": "now"}
        speed_file.write_text(json.dumps(sp, indent=1))
        return sp
    if speed_file.exists():
        sp = json.loads(speed_file.read_text())
        sp["measured"] = "on an earlier run of this demo directory"
        return sp
    return None


# ----------------------------------------------------------------------------- steps
def _expected_interactions(pred, n_agents: int, cap: int) -> float:
    """Expected interactions per run from empty memories: converging runs stop at their streak,
    the others at the cap (mean over the predicted draws)."""
    st = pred.draw_stats
    conv = st["converged"].to_numpy(float)
    cr = np.nan_to_num(st["consensus_rounds"].to_numpy(float), nan=cap / n_agents)
    return float(np.mean(conv * cr * n_agents + (1 - conv) * cap))


def _committed_theory(table, x, y, c, cfg, seed):
    """Challenger share per round of committed-minority runs of the probed table: ``_GROUPS``
    simulated experiments of ``committed_runs`` runs each (stop at the flip, padded with 1 after
    it as the published rule does). Returns (curves frame, mean run length in interactions)."""
    from normlab.theory import strategy_game
    from normlab.theory.criteria import shares_from_result

    N, H, wr, n = cfg["n_agents"], cfg["memory"], cfg["within_rounds"], max(cfg["committed_runs"], 1)
    r = strategy_game(table, n_agents=N, memory=H, n_runs=_GROUPS * n, committed=int(c), committed_name=y,
                      initial=f"consensus:{x}", stop="flip", max_interactions=wr * N, progress=False, rng=seed)
    sh = shares_from_result(r, y)
    M = np.full((len(sh), wr), np.nan)
    for k, s in enumerate(sh):
        M[k, :min(len(s), wr)] = s[:wr]
        if r.stop_reason[k] == "flip":
            M[k, len(s):] = 1.0
    G = M.reshape(_GROUPS, n, wr)
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN rounds of empty groups
        gm = np.nanmean(G, axis=1)
        frame = pd.DataFrame({"round": np.arange(1, wr + 1), "mean": np.nanmean(M, axis=0),
                              "low": np.nanquantile(gm, 0.025, axis=0), "high": np.nanquantile(gm, 0.975, axis=0)})
    return frame, float(np.mean(r.n_interactions))


def _llm_committed_shares(res, wr: int) -> pd.DataFrame:
    """Challenger share per run and round of LLM committed-minority runs (padded with 1 after a flip)."""
    from normlab.calibration import challenger_shares

    sh = challenger_shares(res.log)
    runs = res.log.runs.set_index("run")
    rows = []
    for k, g in sh.groupby("run"):
        v = np.full(wr, np.nan)
        s = g.sort_values("round")["share"].to_numpy(float)[:wr]
        v[:len(s)] = s
        if bool(runs.loc[k, "flipped"]):
            v[len(s):] = 1.0
        rows.append(pd.DataFrame({"run": k, "round": np.arange(1, wr + 1), "share": v}))
    return pd.concat(rows, ignore_index=True) if rows else pd.DataFrame(columns=["run", "round", "share"])


def _cp(k: int, n: int) -> tuple[float, float]:
    from normlab.llm_runs.probes import clopper_pearson

    lo, hi = clopper_pearson([k], [n])
    return float(lo[0]), float(hi[0])


def _finite(v):
    return None if v is None or (isinstance(v, float) and not math.isfinite(v)) else v


def _population_observed(res, names, n_agents) -> dict:
    r = res.log.runs
    win = [(str(c) if (s == "streak" and isinstance(c, str)) else "none") for c, s in zip(r["consensus"], r["stop_reason"])]
    n = len(win)
    share = {}
    for nm in list(names) + ["none"]:
        k = sum(w == nm for w in win)
        lo, hi = _cp(k, n)
        share[nm] = {"runs": k, "estimate": k / n, "low": lo, "high": hi}
    conv = r[r["stop_reason"] == "streak"]
    d = res.log.decisions
    u = d[~d["committed"]]
    return {"runs": n, "winners": win, "consensus": share,
            "consensus_rounds": _finite(float((conv["n_interactions"] / n_agents).mean())) if len(conv) else None,
            "invalid_share": float((~u["valid"]).mean()) if len(u) else None,
            "covered_mass": float(u["covered_mass"].mean()) if "covered_mass" in u and u["covered_mass"].notna().any() else None,
            "decisions": int(len(u)), "interactions": int(r["n_interactions"].sum())}


def _prediction_facts(pred) -> dict:
    cs = pred.consensus_summary().set_index("name")
    cons = {nm: {"estimate": float(cs.loc[nm, "probability"]), "low": float(cs.loc[nm, "low"]),
                 "high": float(cs.loc[nm, "high"])} for nm in cs.index}
    cm = pred.critical_mass()
    crit = {}
    for k, v in cm.items():
        crit[k] = {"majority": v["majority"], "challenger": v["challenger"],
                   "per_run": {kk: _finite(v["per_run"][kk]) for kk in ("estimate", "low", "high", "p_not_reached", "pooled")},
                   "published": {kk: _finite(v["published"][kk]) for kk in ("estimate", "low", "high", "p_not_reached")}}
    cr = pred.consensus_rounds()
    r95 = pred.rounds_to_95()
    return {"consensus": cons, "consensus_rounds": {k: _finite(float(v)) for k, v in cr.items()},
            "rounds_to_95": {k: _finite(float(v)) for k, v in r95.items()}}, crit


def _check_row(quantity, key, source, pred, obs, olo=None, ohi=None, note=""):
    lo, hi = pred.get("low"), pred.get("high")
    est = pred.get("estimate")
    ok = None
    if obs is not None and lo is not None and hi is not None and np.isfinite(lo) and np.isfinite(hi):
        ok = bool(lo - 1e-9 <= obs <= hi + 1e-9)
    return {"quantity": quantity, "key": key, "source": source, "predicted": _finite(est), "low": _finite(lo),
            "high": _finite(hi), "observed": obs, "observed_low": olo, "observed_high": ohi, "consistent": ok,
            "note": note}


# ----------------------------------------------------------------------------- entry point
def run_demo(out, *, names=DEMO_DEFAULTS["names"], n_agents: int = DEMO_DEFAULTS["n_agents"],
             memory: int = DEMO_DEFAULTS["memory"], runs: int = DEMO_DEFAULTS["runs"],
             max_rounds: int = DEMO_DEFAULTS["max_rounds"], committed=DEMO_DEFAULTS["committed"],
             committed_runs: int = DEMO_DEFAULTS["committed_runs"], sample_check: int = DEMO_DEFAULTS["sample_check"],
             fit: str = DEMO_DEFAULTS["fit"], n_draws: int = DEMO_DEFAULTS["n_draws"],
             mode: str = DEMO_DEFAULTS["mode"], within_rounds: int = DEMO_DEFAULTS["within_rounds"],
             endpoint=None, sampling: dict | None = None, rng=DEMO_DEFAULTS["rng"], progress: bool = True,
             verbose: bool = True, command: str | None = None) -> DemoResult:
    """Probe an LLM, predict its populations with the theory, check with LLM runs, write a report.

    Parameters
    ----------
    out : str or pathlib.Path
        Demo directory (created). Rerunning into it reuses every journaled LLM call.
    names : str or sequence of str, optional
        The two-name pool (default ``X,Y``: SmolLM2 has almost no individual bias between them).
    n_agents, memory : int, optional
        Population size ``N`` (>= 3) and memory length ``H`` (1..5; the probe asks
        ``2 * sum_k 4^k`` prompts: 42 for H = 2, 170 for H = 3, 2730 for H = 5).
    runs : int, optional
        LLM populations played from empty memories.
    max_rounds : int, optional
        Cap of those runs in population rounds (a run without a ``3N`` success streak by then
        counts as "no consensus", in the LLM runs and in the prediction alike).
    committed : "auto", int or sequence of int, optional
        Committed counts of the committed-minority check, tried against both conventions.
        ``"auto"``: per direction, the predicted critical mass (pooled ``per_run`` reading),
        at least 1; where none is reached, ``N // 2``.
    committed_runs : int, optional
        LLM runs per direction and count (0 skips the check); also the runs per count of the
        predicted ``per_run`` reading, so its interval is that of an experiment of this size.
    sample_check : int, optional
        Free-generation answers asked at an empty memory (sample mode, no re-ask; 0 skips).
    fit : {"empirical", "logit_symmetric", "logit", "hierarchical"}, optional
        Strategy model fitted on the population's log (:func:`normlab.calibration.calibrate`).
    n_draws : int, optional
        Draws of every prediction (posterior draws for the log fit; repeated simulated
        experiments for the probed table, which has no parameter uncertainty).
    mode : {"exact", "sample"}, optional
        How the LLM populations and committed runs decide: ``"exact"`` (next-token probabilities,
        answered from the probe's cache: no new request) or ``"sample"`` (the paper's generation
        and parsing, one request per decision and re-ask).
    within_rounds : int, optional
        Window of the flip criterion (30 rounds, Flint Ashery et al. 2025, Methods) and length of committed runs.
    endpoint : normlab.llm_runs.EndpointConfig, optional
        Default: ``NORMLAB_LLM_BASE_URL`` if set, else the embedded SmolLM2 server.
    sampling : dict, optional
        Run settings passed to every probe and run (``template``, ``temperature``, ``top_k``,
        ``max_tokens``, ``top_logprobs``, ``max_reasks``, ``prefill``, ``multi_token``,
        ``wrap``, ``top_p``, ``min_p``, ``parse``; see :func:`normlab.llm_runs.run_game`).
    rng : int or None, optional
        Seed of every run and simulation (stored; ``None``: fresh).
    progress : bool, optional
        Progress bars.
    verbose : bool, optional
        Print the plan, the step results and the time estimate (to stderr).
    command : str, optional
        The command line, recorded in the report.

    Returns
    -------
    DemoResult

    Raises
    ------
    ValueError, TypeError
        Bad settings (before any work), or ``out`` holding something that is not a demo.
    normlab.llm_runs.EndpointError
        The endpoint is down or keeps failing (completed calls stay journaled in ``out``).

    References
    ----------
    Flint Ashery, Aiello & Baronchelli, Sci. Adv. 11, eadu9368 (2025): Figs. 1-3, Table 1,
    Fig. S8, Table S3, Methods "Committed Minorities".
    """
    from normlab.llm_runs.backend import shared_embedded_server

    with shared_embedded_server():  # one embedded server (and prompt cache) for every step
        return _run_demo(out, names=names, n_agents=n_agents, memory=memory, runs=runs, max_rounds=max_rounds,
                         committed=committed, committed_runs=committed_runs, sample_check=sample_check, fit=fit,
                         n_draws=n_draws, mode=mode, within_rounds=within_rounds, endpoint=endpoint,
                         sampling=sampling, rng=rng, progress=progress, verbose=verbose, command=command)


def _run_demo(out, *, names, n_agents, memory, runs, max_rounds, committed, committed_runs, sample_check, fit,
              n_draws, mode, within_rounds, endpoint, sampling, rng, progress, verbose, command) -> DemoResult:
    from normlab import __version__
    from normlab.calibration import calibrate, llm_trajectories, predict, theory_trajectories
    from normlab.llm_runs import individual_bias, run_game, strategy_table
    from normlab.llm_runs.probes import enumerate_states

    cfg = _validate(out, names, n_agents, memory, runs, max_rounds, committed, committed_runs, sample_check, fit,
                    n_draws, mode, within_rounds, endpoint, sampling)
    seed = _seed_int(rng)
    out, names, N, H = cfg["out"], cfg["names"], cfg["n_agents"], cfg["memory"]
    ep, smp = cfg["endpoint"], cfg["sampling"]
    if ep.embedded:
        # one server for every step (shared_embedded_server), its KV sized for the longest prompt of
        # any step; one slot and one request at a time: llama.cpp's logits change when two
        # sequences share a batch (measured: p(X) 0.945 alone, 1.0 beside another prompt), so
        # concurrent requests would make the probed table depend on timing. One CPU thread gains
        # nothing from concurrency (same CPU time measured).
        ep = dataclasses.replace(ep, embedded_ctx=ep.embedded_ctx or _demo_ctx(cfg), embedded_parallel=1,
                                 concurrency=1)
    echo = _echo(verbose)
    clock = _Clock()
    out.mkdir(parents=True, exist_ok=True)
    stored = json.loads((out / MARKER).read_text()) if (out / MARKER).exists() else None
    if rng is None and stored is not None:
        seed = int(stored["seed"])
    (out / MARKER).write_text(json.dumps({"normlab_version": __version__, "seed": seed,
                                          "settings": {k: (list(v) if isinstance(v, tuple) else v)
                                                       for k, v in cfg.items() if k not in ("out", "endpoint")}},
                                         indent=1, default=str))
    llm_dir = out / "llm" / _key(cfg)
    llm_dir.mkdir(parents=True, exist_ok=True)
    seeds = spawn(seed, 8)
    where = "the embedded SmolLM2-135M-Instruct server" if ep.embedded else f"{ep.base_url} ({ep.model or 'its first model'})"
    echo(f"normlab demo: {N} agents, memory {H}, names {','.join(names)}, {where}; report in {out}")

    # --- 1. strategy table: short memories first (they time the endpoint), then the rest
    L_a = 1  # 10 requests: enough to time the endpoint (for H = 1 it is the whole table)
    dir_a, dir_b = llm_dir / f"probe-H{L_a}", llm_dir / f"probe-H{H}"
    states_a = enumerate_states(names, L_a)
    states_b = [s for s in enumerate_states(names, H) if s not in set(states_a)]
    probe_kw = dict(mode="exact", endpoint=ep, progress=progress, rng=_PROBE_SEED,
                    **{k: v for k, v in smp.items() if k not in ("top_p", "min_p", "parse")})
    with clock.step(f"strategy table, memories of length <= {L_a} (timed)", [dir_a]):
        before = len(_journal_calls(dir_a))
        t = time.perf_counter()
        with _demo_budget(ep, out / "llm"):
            strategy_table(names, L_a, out=dir_a, **{**probe_kw, "endpoint": _stage_endpoint(ep, out / "llm", dir_a)})
        wall_a = time.perf_counter() - t
    speed = _speed(dir_a, states_a, cfg, wall_a, len(_journal_calls(dir_a)) - before, llm_dir / "speed.json")
    # plan: what is left, in requests, tokens and minutes (from the measured speed)
    left_b = max(0, 2 * len(states_b) - len([c for c in _journal_calls(dir_b) if c.get("purpose") == "exact"]))
    chars_b = sum(_prompt_chars(names, states_b, smp)) * (left_b / max(2 * len(states_b), 1))
    tok_b = chars_b * speed["tokens_per_char"] if speed else None
    left_s = cfg["sample_check"] - _bias_done(llm_dir, cfg, seed)
    est = {"calls": left_b + max(left_s, 0), "prompt_tokens": None, "seconds": None,
           "tokens_per_s": speed["tokens_per_s"] if speed else None, "measured": speed["measured"] if speed else None}
    if speed:
        tok_s = max(left_s, 0) * speed["prompt_tokens"] / max(speed["calls"], 1)
        est["prompt_tokens"] = int(round(tok_b + tok_s))
        est["seconds"] = est["prompt_tokens"] / speed["tokens_per_s"] if speed["tokens_per_s"] else None
        echo(f"  measured: {speed['calls']} requests, {speed['prompt_tokens']} prompt tokens in {speed['wall_s']:.1f} s "
             f"= {speed['tokens_per_s']:.0f} tokens/s (server start included; {speed['measured']})")
    cost = (est["prompt_tokens"] or 0) * ep.price_input / 1e6
    if est["calls"] == 0:
        echo(f"  plan: nothing left to ask for the strategy table and the free-generation check (journaled in {llm_dir})")
    else:
        echo(f"  plan: {left_b} more strategy-table requests + {max(left_s, 0)} free-generation answers"
             + (f" = {est['prompt_tokens']:,} prompt tokens, expected {_fmt_s(est['seconds'])} of model time"
                if est["seconds"] is not None else "")
             + (f", ~${cost:.4f}" if cost else ""))
    if cfg["mode"] == "exact":
        echo("        populations and committed runs (exact mode) are answered from the table's cache: 0 requests")
    else:
        echo("        populations and committed runs (sample mode): estimated after the theory prediction")
    echo("        theory simulations: seconds (a first run after installation also compiles them, ~1 min)")
    with clock.step(f"strategy table (H = {H})", [dir_b]):
        with _demo_budget(ep, out / "llm"):
            probe = strategy_table(names, H, out=dir_b, cache=[dir_a],
                                   **{**probe_kw, "endpoint": _stage_endpoint(ep, out / "llm", dir_b)})
    ptab = probe.to_frame()
    holes = int(ptab.groupby("memory_state")["p"].apply(lambda v: v.isna().any()).sum())
    table = probe.to_strategy_table(default=_uniform(names, H))  # states with no name in reach: uniform
    if holes:
        echo(f"  note: in {holes} memory states no pool name was among the top logprobs in either order; "
             "the theory plays them uniformly, the LLM runs record an invalid answer there")
    p_empty = ptab[(ptab["memory_state"] == "") & (ptab["name"] == names[0])]
    echo(f"  strategy table: {ptab['memory_state'].nunique()} memory states; empty memory: "
         f"p({names[0]}) = {float(p_empty['p'].iloc[0]):.2f}, p({names[1]}) = {1 - float(p_empty['p'].iloc[0]):.2f}")

    # --- 2. free generation: how often does the model name no pool name at all?
    bias = None
    if cfg["sample_check"]:
        sdir = llm_dir / f"free-generation-T{cfg['sample_check']}-seed{seed}"
        with clock.step("free-generation check", [sdir]):
            skw = {k: v for k, v in smp.items()}
            skw["max_reasks"] = 0
            with _demo_budget(ep, out / "llm"):
                bias = individual_bias(names, trials=cfg["sample_check"], mode="sample",
                                       endpoint=_stage_endpoint(ep, out / "llm", sdir), out=sdir,
                                       progress=progress, rng=seeds[1], **skw)
        echo(f"  free generation at an empty memory: {bias.invalid} of {bias.trials} answers name no pool name")

    # --- 3. theory prediction from the probed table (intervals for an experiment of the demo's size)
    nrf = max(cfg["committed_runs"], 1)
    with clock.step("theory prediction (probed table)"):
        with _spinner("theory: predicting from the probed table", progress):
            pred = predict(table, n_agents=N, n_draws=cfg["n_draws"], within_rounds=cfg["within_rounds"],
                           n_runs_consensus=cfg["runs"], n_runs_flip=nrf, max_rounds=cfg["max_rounds"], rng=seeds[4])
            traj_th = theory_trajectories(table, n_agents=N, n_rounds=cfg["max_rounds"], n_draws=cfg["n_draws"],
                                          n_runs=cfg["runs"], rng=seeds[5])
    pfacts, pcrit = _prediction_facts(pred)
    winner = max(names, key=lambda nm: pfacts["consensus"].get(nm, {}).get("estimate", 0))
    echo(f"  predicted: consensus on {winner} with probability {pfacts['consensus'][winner]['estimate']:.2f}; "
         + "; ".join(f"critical mass to overturn {v['majority']}: {_cm_text(v['per_run'])}" for v in pcrit.values()))

    # --- 4. LLM populations from empty memories
    cap = cfg["max_rounds"] * N
    pop_dir = llm_dir / f"population-N{N}-H{H}-R{cfg['runs']}-cap{cfg['max_rounds']}-{cfg['mode']}-seed{seed}"
    exp_int = _expected_interactions(pred, N, cap)
    if cfg["mode"] == "sample":
        cov = float(ptab.drop_duplicates("memory_state")["covered_mass"].mean())
        reasks = smp.get("max_reasks", 2)
        per = sum((1 - cov) ** k for k in range((reasks if isinstance(reasks, int) else 10) + 1))
        n_req = 2 * exp_int * cfg["runs"] * per
        echo(f"  populations (sample mode): about {exp_int * cfg['runs']:.0f} interactions expected -> "
             f"~{n_req:.0f} requests" + (f", ~{_fmt_s(n_req * speed['s_per_call'])}" if speed else ""))
    cache = [dir_a, dir_b] if cfg["mode"] == "exact" else None
    run_kw = dict(mode=cfg["mode"], endpoint=ep, progress=False, **smp)
    with clock.step("LLM populations", [pop_dir]):
        with _JournalBar(pop_dir, cfg["runs"], exp_int, f"LLM populations ({cfg['mode']})", progress):
            with _demo_budget(ep, out / "llm"):
                pop = run_game(N, H, names, max_interactions=cap, runs=cfg["runs"], stop="streak", out=pop_dir,
                               cache=cache, rng=seeds[2], **{**run_kw, "endpoint": _stage_endpoint(ep, out / "llm", pop_dir)})
                _stopped_at_budget(pop)
    obs = _population_observed(pop, names, N)
    echo(f"  LLM populations: winners {', '.join(obs['winners'])}")

    # --- 5. committed-minority check
    wr = cfg["within_rounds"]
    fc = pred.flip_curve()
    tests = []
    if cfg["committed_runs"]:
        for key, v in pcrit.items():
            x, y = v["majority"], v["challenger"]
            if cfg["committed"] == "auto":
                pooled = v["per_run"]["pooled"]
                counts = [min(max(int(pooled), 1), N - 1)] if pooled is not None else [N // 2]
            else:
                counts = cfg["committed"]
            for c in counts:
                tests.append((x, y, int(c)))
    committed_res, cm_rows, cm_curves = [], [], []
    for i, (x, y, c) in enumerate(tests):
        cdir = llm_dir / f"committed-{x}-by-{y}-c{c}-N{N}-H{H}-R{cfg['committed_runs']}-w{wr}-{cfg['mode']}-seed{seed}"
        th_curve, th_len = _committed_theory(table, x, y, c, cfg, spawn(seeds[7], len(tests))[i])
        with clock.step(f"committed minority: {c} committed to {y} vs a consensus on {x}", [cdir]):
            with _JournalBar(cdir, cfg["committed_runs"], th_len, f"committed {c}x{y} vs {x} ({cfg['mode']})", progress):
                with _demo_budget(ep, out / "llm"):
                    r = run_game(N, H, names, max_interactions=wr * N, runs=cfg["committed_runs"], committed=c,
                                 committed_name=y, initial=f"consensus:{x}", stop="flip", out=cdir, cache=cache,
                                 rng=spawn(seeds[3], len(tests))[i],
                                 **{**run_kw, "endpoint": _stage_endpoint(ep, out / "llm", cdir)})
                    _stopped_at_budget(r)
        committed_res.append(r)
        k = int(r.log.runs["flipped"].sum())
        n = int(len(r.log.runs))
        row = fc[(fc["majority"] == x) & (fc["committed"] == c)]
        p = float(row["p_flip"].iloc[0]) if len(row) else float("nan")
        lo, hi = (float(row["low"].iloc[0]), float(row["high"].iloc[0])) if len(row) else (float("nan"),) * 2
        olo, ohi = _cp(k, n)
        cm_rows.append({"majority": x, "challenger": y, "committed": c, "runs": n, "flips": k,
                        "observed": k / n, "observed_low": olo, "observed_high": ohi,
                        "predicted": p, "low": lo, "high": hi, "consistent": bool(lo - 1e-9 <= k / n <= hi + 1e-9)})
        shares = _llm_committed_shares(r, wr)
        cm_curves.append({"majority": x, "challenger": y, "committed": c, "theory": th_curve, "llm": shares})
        a_, b_ = round(lo * n), round(hi * n)
        echo(f"  committed minority: {c} committed to {y} against a consensus on {x}: {k} of {n} runs flipped "
             f"(predicted flip probability {p:.2f}: {a_ if a_ == b_ else f'{a_} to {b_}'} of {n} in 95% of such experiments)")

    # --- 6. calibration from the population's log alone
    with clock.step(f"calibration from the population log ({cfg['fit']})"):
        with _spinner(f"calibrating ({cfg['fit']}) from the population log and predicting", progress and cfg["fit"] == "empirical"):
            cal = calibrate(pop.log, names=names, memory=H, n_agents=N, model=cfg["fit"], n_draws=cfg["n_draws"],
                            within_rounds=wr, predict_kwargs=dict(n_runs_consensus=cfg["runs"],
                                                                  max_rounds=cfg["max_rounds"], n_runs_flip=nrf),
                            source="normlab demo population", rng=seeds[6], progress=progress and cfg["fit"] != "empirical")
    lfacts, lcrit = _prediction_facts(cal.prediction)

    # --- checks: predicted vs observed
    checks = []
    for src, facts in (("probe", pfacts), ("log", lfacts)):
        for nm in list(names) + ["none"]:
            o = obs["consensus"][nm]
            checks.append(_check_row("P(consensus)", nm, src, facts["consensus"].get(nm, {"estimate": 0.0, "low": 0.0, "high": 0.0}),
                                     o["estimate"], o["low"], o["high"]))
        checks.append(_check_row("rounds to consensus", "", src, facts["consensus_rounds"], obs["consensus_rounds"]))
    llm_curve = llm_trajectories(pop.log, n_rounds=cfg["max_rounds"], rng=seeds[5])
    s_llm = llm_curve[(llm_curve["quantity"] == "success_rate")].sort_values("round")
    hit = np.flatnonzero(s_llm["mean"].to_numpy() >= 0.95 - 1e-9)
    r95_obs = float(hit[0] + 1) if hit.size else None
    for src, facts in (("probe", pfacts), ("log", lfacts)):
        checks.append(_check_row("rounds to 95% success", "", src, facts["rounds_to_95"], r95_obs))
    for row in cm_rows:
        checks.append(_check_row("P(flip)", f"{row['committed']} committed to {row['challenger']} vs {row['majority']}",
                                 "probe", {"estimate": row["predicted"], "low": row["low"], "high": row["high"]},
                                 row["observed"], row["observed_low"], row["observed_high"]))
    if bias is not None:
        cov_empty = float(ptab.loc[ptab["memory_state"] == "", "covered_mass"].iloc[0])
        lo, hi = _binom_interval(bias.trials, 1 - cov_empty)
        olo, ohi = _cp(bias.invalid, bias.trials)
        checks.append(_check_row("invalid free answers", "empty memory", "probe",
                                 {"estimate": 1 - cov_empty, "low": lo, "high": hi}, bias.invalid / bias.trials, olo, ohi,
                                 note="predicted: 1 - probability mass of the pool names at the answer position"))
    checks = pd.DataFrame(checks)

    # --- 7. report
    from .report import write_figures, write_report

    ctx = dict(cfg=cfg, seed=seed, command=command, version=__version__, clock=clock, estimate=est, speed=speed,
               probe=probe, bias=bias, pred=pred, pfacts=pfacts, pcrit=pcrit, traj_th=traj_th, llm_curve=llm_curve,
               pop=pop, obs=obs, cm_rows=cm_rows, cm_curves=cm_curves, cal=cal, lfacts=lfacts, lcrit=lcrit,
               checks=checks, llm_dir=llm_dir, ledger=_ledger([p for p in llm_dir.iterdir() if p.is_dir()]))
    with clock.step("figures and tables"):
        with _spinner("drawing the figures", progress):
            figs = write_figures(out, ctx)
    summary = write_report(out, ctx, figs)
    t = clock.total()
    echo(f"  done in {_fmt_s(t['wall_s'])} ({t['cpu_s']:.0f} s CPU); {summary['cost']['llm_calls']} LLM requests this "
         f"run ({summary['cost']['llm_calls_total']} journaled); report: {out / 'report.html'}")
    return DemoResult(directory=out, summary=summary, checks=checks, probe=probe, population=pop,
                      committed=tuple(committed_res), prediction=pred, calibration=cal)


def _bias_done(llm_dir: Path, cfg, seed) -> int:
    d = llm_dir / f"free-generation-T{cfg['sample_check']}-seed{seed}"
    from normlab.llm_runs.journal import read_journal

    f = d / "journal.jsonl"
    return sum(1 for r in read_journal(f) if r.get("ev") == "probe") if f.exists() else 0


def _uniform(names, memory: int):
    from normlab.theory import StrategyTable
    from normlab.theory.strategies import n_states

    return StrategyTable(np.full((n_states(len(names), memory), len(names)), 1.0 / len(names)), memory=memory,
                         names=names)


def _binom_interval(n: int, p: float, level: float = 0.95) -> tuple[float, float]:
    """Equal-tailed interval of ``k / n`` for ``k ~ Binomial(n, p)`` (what an experiment of ``n`` shows)."""
    from scipy.stats import binom

    a = (1 - level) / 2
    return float(binom.ppf(a, n, p) / n), float(binom.ppf(1 - a, n, p) / n)


def _cm_text(v: dict) -> str:
    if v.get("pooled") is None:
        return "not reached"
    lo, hi = v.get("low"), v.get("high")
    return f"{v['pooled']:.0f}" + (f" [{lo:.0f}, {hi:.0f}]" if lo is not None and hi is not None else " [-, not reached]")
