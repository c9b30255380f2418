"""The demo's plan: its settings (:class:`DemoSettings`, checked before any work), the directory key, the estimate of every
step (``estimate_demo``, ``normlab demo --dry-run``) and the plan printed once the first probe
stage has timed the endpoint."""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import json
from dataclasses import dataclass, field, fields
from pathlib import Path

import numpy as np

from normlab._validate import Check, Int, check_int, check_out_dir, validate_params
from normlab.calibration import fit_kind_names
from normlab.llm_runs import EndpointConfig, RunEstimate, enumerate_states, estimate_game, load_template
from normlab.llm_runs.journal import write_json_atomic
from normlab.llm_runs.runner import (BYTES_PER_TOKEN, distinct_prompts, estimate_requests, longest_prompt_bytes,
                                     make_settings, prompt_tokens)
from normlab.llm_runs.runner.mode import EXACT, MODES, SAMPLE, mode_of
from normlab.schema import parse_memory_state, validate_names
from normlab.user_files import read_user_json

from ._common import fmt_seconds
from ._ledger import free_generation_done, journal_calls, journal_dirs, ledger

__all__ = ["DemoSettings", "DEMO_DEFAULTS", "MARKER", "PROBE_SEED", "parse_committed", "directory_key", "seed_int",
           "demo_ctx", "estimate_demo", "prompt_chars", "measure_speed", "plan_rest"]

#: Settings of the demo in its directory (marks a directory as a demo directory).
MARKER = "demo.json"
PROBE_SEED = 0  # exact tables do not depend on a seed: one fixed seed lets every demo share them
#: Sampling settings a demo passes to every probe and run (``sampling=``).
SAMPLING_KEYS = ("template", "temperature", "top_k", "max_tokens", "top_logprobs", "max_reasks", "prefill",
                 "multi_token", "wrap", "top_p", "min_p", "parse")


# ----------------------------------------------------------------------------- settings
def parse_committed(committed, n_agents: int):
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


def _names(names, name):
    if isinstance(names, str):
        names = [x.strip() for x in names.split(",")]
    names = validate_names(names)
    if len(names) != 2:
        raise ValueError(f"the demo plays the paper's two-name game (W = 2); got {len(names)} names {list(names)}")
    return names


def _fit(fit, name):
    kinds = fit_kind_names()
    if fit not in kinds:
        raise ValueError(f"{name} must be one of {kinds}; got {fit!r}")
    return fit


def _mode(mode, name):
    if mode not in MODES:
        raise ValueError(f"{name} must be 'exact' or 'sample'; got {mode!r}")
    return mode


def _endpoint(endpoint, name):
    if endpoint is None:
        endpoint = EndpointConfig.from_env()
    if not isinstance(endpoint, EndpointConfig):
        raise TypeError(f"{name} must be an EndpointConfig or None; got {type(endpoint).__name__}")
    return endpoint


def _sampling(sampling, name):
    sampling = dict(sampling or {})
    bad = sorted(set(sampling) - set(SAMPLING_KEYS))
    if bad:
        raise TypeError(f"unknown sampling setting(s) {bad}; allowed: {sorted(SAMPLING_KEYS)}")
    return sampling


@dataclass(frozen=True)
class DemoSettings:
    """Every setting of a demo, checked once before any work (:func:`normlab.demo.run_demo`
    documents each; its keywords build this object, and the demo's steps, estimate and report
    read it).

    The defaults are :data:`DEMO_DEFAULTS`. Checks, in this order (the first bad setting is the
    one reported): the two names, ``n_agents`` (3..1000), ``memory`` (1..5), ``runs``,
    ``max_rounds`` (>= 10), ``committed`` (``"auto"`` or counts in 1..N-1, kept sorted and
    distinct), ``committed_runs``, ``sample_check``, ``fit`` (a registered fit kind),
    ``n_draws`` (>= 10), ``mode``, ``within_rounds`` (>= 3), ``tip_runs``, ``probe_samples`` (>= 1: sampled
    answers per memory state and probe stage in sample mode), ``endpoint`` (None:
    :meth:`EndpointConfig.from_env`), the ``sampling`` keys, then the runner's own checks of the
    probe (exact) and the populations (``mode``), and last ``out`` (a directory that is new,
    empty or a demo's).
    """

    out: Path
    names: tuple = "X,Y"
    n_agents: int = 8
    memory: int = 2
    runs: int = 8
    max_rounds: int = 100
    committed: tuple | str = "auto"
    committed_runs: int = 4
    sample_check: int = 12
    fit: str = "empirical"
    n_draws: int = 200
    mode: str = "exact"
    within_rounds: int = 30
    tip_runs: int = 8
    probe_samples: int = 10
    endpoint: EndpointConfig | None = None
    sampling: dict = field(default=None, hash=False)

    #: The rules of single settings, checked in this order; ``committed`` (its range depends on
    #: ``n_agents``), the runner's checks and ``out`` follow (:meth:`__post_init__`).
    _parameter_constraints = {"names": Check(_names), "n_agents": Int(3, 1000), "memory": Int(1, 5), "runs": Int(1),
                              "max_rounds": Int(10)}
    _parameter_constraints_after_committed = {
        "committed_runs": Int(0), "sample_check": Int(0), "fit": Check(_fit), "n_draws": Int(10), "mode": Check(_mode),
        "within_rounds": Int(3), "tip_runs": Int(0), "probe_samples": Int(1), "endpoint": Check(_endpoint),
        "sampling": Check(_sampling)}

    def __post_init__(self):
        v = validate_params(self.to_dict(), self._parameter_constraints)
        v["committed"] = c if (c := parse_committed(v["committed"], v["n_agents"])) == "auto" else tuple(c)
        v = validate_params(v, self._parameter_constraints_after_committed)
        # the runner's own checks, before any work: the probe (exact) and the populations (mode)
        ep, smp = v["endpoint"], v["sampling"]
        make_settings(v["n_agents"], v["memory"], v["names"], max_interactions=1, mode="exact", embedded=ep.embedded,
                      **{k: x for k, x in smp.items() if k not in ("top_p", "min_p")})
        make_settings(v["n_agents"], v["memory"], v["names"], max_interactions=1, mode=v["mode"],
                      embedded=ep.embedded, **smp)
        out = v["out"] = Path(v["out"])
        check_out_dir(out)
        # a lone demo.json.tmp is the marker's first write cut short by a kill, not somebody else's file
        if out.exists() and any(p.name != MARKER + ".tmp" for p in out.iterdir()) and not (out / MARKER).exists():
            raise ValueError(f"--out {out} is not empty and holds no normlab demo; choose an empty or new directory")
        for k, x in v.items():
            object.__setattr__(self, k, x)

    @classmethod
    def of(cls, out, **settings) -> "DemoSettings":
        """``out`` when it is a :class:`DemoSettings` (with ``settings`` replaced), else the settings
        of a demo in directory ``out``; an unknown keyword is a ``TypeError``."""
        known = {f.name for f in fields(cls)} - {"out"}
        bad = sorted(set(settings) - known)
        if bad:
            raise TypeError(f"unknown demo setting(s) {bad}; allowed: {sorted(known)}")
        if isinstance(out, cls):
            return dataclasses.replace(out, **settings) if settings else out
        return cls(out, **settings)

    def to_dict(self) -> dict:
        """The settings by name, in field order (``out`` and ``endpoint`` included)."""
        return {f.name: getattr(self, f.name) for f in fields(self)}

    def stored(self) -> dict:
        """The settings ``OUT/demo.json`` records (no directory, no endpoint; lists for tuples)."""
        return {k: (list(v) if isinstance(v, tuple) else v) for k, v in self.to_dict().items()
                if k not in ("out", "endpoint")}


#: Defaults of :func:`run_demo` and ``normlab demo``: a population small enough for a 2-core laptop.
DEMO_DEFAULTS = {**{f.name: f.default for f in fields(DemoSettings) if f.name not in ("out", "endpoint", "sampling")},
                 "rng": 1}


def directory_key(cfg: DemoSettings) -> str:
    """Directory key: the endpoint (the embedded model), the pool and every sampling setting (what changes
    the answers)."""
    ep = cfg.endpoint
    where = ep.base_url or ("embedded" if ep.embedded_model == "smollm2" else f"embedded:{ep.embedded_model}")
    blob = json.dumps({"endpoint": where, "model": ep.model, "names": list(cfg.names),
                       "sampling": {k: cfg.sampling[k] for k in sorted(cfg.sampling)}},
                      sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:10]


def seed_int(rng) -> int:
    """An int seed for the demo (fresh entropy when ``rng`` is None)."""
    if rng is None:
        return int(np.random.SeedSequence().entropy % (2**63))
    if isinstance(rng, (int, np.integer)) and not isinstance(rng, bool):
        return int(rng)
    raise TypeError(f"rng must be an int or None (the demo stores it in {MARKER}); got {type(rng).__name__}")


def demo_ctx(cfg: DemoSettings) -> int:
    """KV tokens per slot for the longest prompt any step sends, with its longest answer."""
    smp = cfg.sampling
    need = []
    for mode in (EXACT, SAMPLE):
        kw = smp if mode is SAMPLE else {k: v for k, v in smp.items() if k not in ("top_p", "min_p", "parse")}
        s, tpl, _ = make_settings(cfg.n_agents, cfg.memory, cfg.names, max_interactions=1, mode=mode,
                                  embedded=True, **kw)
        need.append(mode.context_tokens(longest_prompt_bytes(s, tpl), s))
    return max(need)


# ----------------------------------------------------------------------------- estimates
def estimate_demo(out, **settings):
    """Requests, tokens and cost of :func:`run_demo` with the same settings, before anything
    is sent (``normlab demo --dry-run``): nothing is sent and nothing is written.

    Parameters
    ----------
    out : DemoSettings, str or pathlib.Path
        The demo's settings, or its directory with :func:`run_demo`'s setting keywords
        (``names``, ``n_agents``, ``memory``, ``runs``, ``max_rounds``, ``committed``,
        ``committed_runs``, ``sample_check``, ``fit``, ``n_draws``, ``mode``, ``within_rounds``,
        ``tip_runs``, ``endpoint``, ``sampling``; defaults :data:`DEMO_DEFAULTS`).

    Returns
    -------
    normlab.llm_runs.RunEstimate
        ``typical`` and ``at_most`` per quantity, summed over the steps that call the model:
        the strategy table (one exact request per memory state and name order, less what
        ``out`` already journaled), the free-generation check (``sample_check`` requests), and
        in sample mode the populations, the committed-minority runs and the tip search's at most
        ``tip_runs`` runs (:func:`normlab.llm_runs.estimate_game`; in exact mode they are answered
        from the table's cache). Tokens are estimated from the rendered prompts (UTF-8 bytes / 3).
    """
    cfg = DemoSettings.of(out, **settings)
    out, names, N, H = cfg.out, cfg.names, cfg.n_agents, cfg.memory
    ep, smp = cfg.endpoint, cfg.sampling
    llm_dir = out / "llm" / directory_key(cfg)
    prices = {"all": (ep.price_input, ep.price_output)}
    parts, notes = [], []

    counts = [4 ** k for k in range(H + 1)]
    if mode_of(cfg.mode).uses_cache:
        # 1. the strategy table, exact: one request per memory state and name order
        s, tpl, _ = make_settings(N, H, names, max_interactions=1, mode="exact", embedded=ep.embedded,
                                  **{k: v for k, v in smp.items() if k not in ("top_p", "min_p", "parse")})
        ptok = sum(c * prompt_tokens(s, tpl, k) for k, c in enumerate(counts)) / sum(counts)
        total = distinct_prompts(names, H)
        done = sum(1 for d in llm_dir.glob("probe-H*") for c in journal_calls(d) if c.purpose == "exact")
        left = max(total - done, 0)
        parts.append(estimate_requests(s, tpl, requests=(left, left), prompt_tokens=ptok, what="", prices=prices))
        notes.append(f"strategy table: {total:,} exact requests ({sum(counts):,} memory states x 2 name orders; a "
                     f"name of several tokens adds requests){f', {done:,} already journaled' if done else ''}; exact "
                     "mode needs an endpoint that returns logprobs (--mode sample needs none)")
    else:
        # 1. the strategy table from sampled answers: probe_samples per state, memories <= 1 first, then all
        s, tpl, _ = make_settings(N, H, names, max_interactions=1, mode="sample", embedded=ep.embedded, **smp)
        ptok = sum(c * prompt_tokens(s, tpl, k) for k, c in enumerate(counts)) / sum(counts)
        states = sum(counts) + (5 if H > 1 else 0)
        done = sum(len(journal_calls(d)) for d in llm_dir.glob("probe-sample-H*"))
        n = max(cfg.probe_samples * states - done, 0)
        reqs = s.decision.requests((n, n), None, s.max_reasks)
        parts.append(estimate_requests(s, tpl, requests=reqs, prompt_tokens=ptok, what="", prices=prices))
        notes.append(f"strategy table from sampled answers (sample mode: no logprobs needed): {cfg.probe_samples} "
                     f"answers in each of {states:,} memory-state probes (the 5 of length <= 1 first, then all "
                     f"{sum(counts):,}), re-asks as the runs{f'; {done:,} requests already journaled' if done else ''}")
    # 2. free generation at an empty memory, no re-ask
    if cfg.sample_check:
        s2, tpl2, _ = make_settings(N, H, names, max_interactions=1, mode="sample", embedded=ep.embedded,
                                    **{**smp, "max_reasks": 0})
        n = cfg.sample_check
        parts.append(estimate_requests(s2, tpl2, requests=(n, n), prompt_tokens=prompt_tokens(s2, tpl2, 0),
                                       what="", prices=prices))
        notes.append(f"free-generation check: {n} requests (sample mode, no re-ask)")
    # 3. populations and committed-minority runs
    tip_note = (f"tip search: at most {cfg.tip_runs} committed-minority runs of at most {cfg.within_rounds} "
                f"rounds against the convention the populations reach" if cfg.tip_runs else "tip search: off (--tip-runs 0)")
    if mode_of(cfg.mode).uses_cache:
        notes.append("populations, committed-minority runs and the tip search (exact mode): answered from the strategy "
                     "table's cache, no request")
        notes.append(tip_note)
    else:
        run_kw = dict(mode="sample", endpoint=ep, **smp)
        parts.append(estimate_game(N, H, names, max_interactions=cfg.max_rounds * N, runs=cfg.runs,
                                   stop="streak", **run_kw))
        notes.append(f"populations: {cfg.runs} runs, sample mode (typical: 12 N interactions per run)")
        if cfg.committed_runs:
            cs = [1] if cfg.committed == "auto" else cfg.committed
            for (x, y), c in itertools.product(itertools.permutations(names), cs):
                parts.append(estimate_game(N, H, names, max_interactions=cfg.within_rounds * N,
                                           runs=cfg.committed_runs, committed=int(c), committed_name=y,
                                           initial=f"consensus:{x}", stop="flip", **run_kw))
            notes.append(f"committed-minority runs: {cfg.committed_runs} per direction and count, each to its "
                         f"cap of {cfg.within_rounds} rounds"
                         + ("; counts 'auto' come from the prediction: estimated with one count per direction"
                            if cfg.committed == "auto" else ""))
        if cfg.tip_runs:
            # the direction and counts come from the runs: one committed agent (the most uncommitted
            # decisions a run can ask), each run to its cap (a run stops early at a 3N streak)
            x, y = names
            parts.append(estimate_game(N, H, names, max_interactions=cfg.within_rounds * N, runs=cfg.tip_runs,
                                       committed=1, committed_name=y, initial=f"consensus:{x}", stop="streak",
                                       **run_kw))
        notes.append(tip_note + ("; estimated at one committed agent (the most uncommitted decisions)"
                                 if cfg.tip_runs else ""))
    keys = ("requests", "prompt_tokens", "completion_tokens", "cost_usd")
    rows = {k: tuple(None if any(p.rows[k][i] is None for p in parts) else float(sum(p.rows[k][i] for p in parts))
                     for i in (0, 1)) for k in keys}
    notes.append(f"tokens: prompts rendered from the template, UTF-8 bytes / {BYTES_PER_TOKEN:g} (tokenizers differ "
                 "by about 20 %)")
    done_before = None
    if llm_dir.exists():
        dirs = journal_dirs(out / "llm")
        led = ledger(dirs)
        if led["calls"]:
            done_before = {"requests": led["calls"], "tokens": led["prompt_tokens"] + led["completion_tokens"]}
    model = ep.model_label
    what = (f"normlab demo: N = {N}, H = {H}, names {','.join(names)}, {cfg.runs} populations, "
            f"{cfg.mode} mode, {model}")
    return RunEstimate(what=what, rows=rows, prices=prices, notes=tuple(notes), done=done_before)


def prompt_chars(names, states, sampling) -> list[int]:
    """Characters of every probe prompt (each state in each name order), as sent."""
    tpl = load_template(sampling.get("template", "main"))
    out = []
    for st in states:
        mem = parse_memory_state(st)
        for order in itertools.permutations(names):
            p = tpl.render(mem, list(order))
            out.append(sum(len(m["content"]) for m in p.messages(p.prefill)))
    return out


def measure_speed(stage_dir, states, cfg, wall_s: float, new_calls: int, speed_file: Path) -> dict | None:
    """Measured speed of the endpoint from the first probe stage (or stored from an earlier run)."""
    calls = journal_calls(stage_dir)
    chars = prompt_chars(cfg.names, states, cfg.sampling)
    if new_calls > 0 and calls:
        new = calls[-new_calls:]
        ptok = sum(c.prompt_tokens for c in new)
        sp = {"calls": new_calls, "prompt_tokens": int(ptok), "wall_s": round(wall_s, 3),
              "tokens_per_s": ptok / wall_s if wall_s > 0 else None, "s_per_call": wall_s / new_calls,
              "tokens_per_char": (sum(c.prompt_tokens for c in calls) / len(calls)) / (sum(chars) / len(chars)),
              "measured": "now"}
        write_json_atomic(speed_file, sp)  # whole or not at all: a resumed demo reads it
        return sp
    if speed_file.exists():
        sp = read_user_json(speed_file)  # the demo directory is the user's: a regular file, capped
        sp["measured"] = "on an earlier run of this demo directory"
        return sp
    return None


def plan_rest(cfg, seed, ep, llm_dir: Path, states_b, dir_b: Path, speed: dict | None, echo) -> dict:
    """What is left after the timed first probe stage, in requests, tokens and minutes (from the
    measured speed); printed, and returned as the report's ``estimate``."""
    names, smp = cfg.names, cfg.sampling
    if mode_of(cfg.mode).uses_cache:
        left_b = max(0, 2 * len(states_b) - len([c for c in journal_calls(dir_b) if c.purpose == "exact"]))
        chars_b = sum(prompt_chars(names, states_b, smp)) * (left_b / max(2 * len(states_b), 1))
    else:  # sampled answers: every state up to H again (pooled with the first stage), one request each at least
        every = states_b + [st for st in enumerate_states(names, 1)] if states_b else []
        left_b = max(0, cfg.probe_samples * len(every) - len(journal_calls(dir_b)))
        chars_b = (sum(prompt_chars(names, every, smp)) / max(2 * len(every), 1)) * left_b
    tok_b = chars_b * speed["tokens_per_char"] if speed else None
    left_s = cfg.sample_check - free_generation_done(llm_dir, cfg, seed)
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
             + (f" = {est['prompt_tokens']:,} prompt tokens, expected {fmt_seconds(est['seconds'])} of model time"
                if est["seconds"] is not None else "")
             + (f", ~${cost:.4f}" if cost else ""))
    tip = (f" and the tip search (at most {cfg.tip_runs} committed runs)" if cfg.tip_runs else "")
    if mode_of(cfg.mode).uses_cache:
        echo(f"        populations, committed runs{tip} (exact mode) are answered from the table's cache: 0 requests")
    else:
        echo(f"        populations, committed runs{tip} (sample mode): estimated after the theory prediction")
    echo("        theory simulations: seconds (a first run after installation also compiles them, ~1 min)")
    return est
