"""Play the naming game of Flint Ashery et al. (2025) with LLM agents through an OpenAI-compatible endpoint.

Populations of ``N`` agents with memory ``H`` meet in random pairs (complete graph or any
networkx graph); both agents of a pair are prompted concurrently; every call and interaction is
journaled (append-only JSONL) so that a killed run resumes exactly; the output is a
:class:`normlab.schema.GameLog` saved as Parquet, in the same schema as the theory simulators.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import json
import math
import numbers
import os
import time
from collections import deque
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Sequence

import numpy as np
import pandas as pd

from normlab._display import plain, plotting
from normlab._rng import as_seed_sequence
from normlab._validate import check_int
from normlab.schema import GameLog, rebuild_decisions, validate_names
from normlab.theory.criteria import FLIP_SUM

from .backend import BudgetExhausted, EndpointConfig, EndpointError, open_endpoint
from .exact import MULTI_TOKEN_MODES, choose, name_distribution
from .journal import JOURNAL_FILE, LOCK_FILE, SETTINGS_FILE, DirectoryLock, Journal, read_settings, write_settings
from .prompts import (PARSERS, WRAPS, PromptTemplate, check_wrap, load_template, parse_answer, parse_answer_authors,
                      sha256_hex)

MODES = ("exact", "sample")
STOP_RULES = ("max", "streak", "success95", "consensus", "flip")
#: Name orders: ``per_agent`` (each player of a pair sees its own shuffle: the authors'
#: ``converge``), ``shared`` (one shuffle per interaction for both: the authors' ``simulate_CM``,
#: which played every published swap and evolved run), ``auto`` (shared when the run starts from
#: a prepared memory, per_agent from empty memories -- as the authors' code did).
NAME_ORDERS = ("auto", "per_agent", "shared")
#: Where committed agents sit: ``last`` (the last K ids, as the theory simulators) or ``random``
#: (K ids drawn per run, the authors' ``swap_committed``); on a complete graph both give the same
#: distribution of outcomes.
COMMITTED_PLACEMENTS = ("last", "random")
#: ``swap``: K of the N agents become committed (the authors' ``version = 'swap'``, all published
#: committed runs); ``inject``: K committed agents are added to the N (``version = 'inject'``,
#: ``add_committed``), so the population has N + K agents.
COMMITTED_MODES = ("swap", "inject")
#: Re-ask policy value of the paper (re-ask until a pool name appears).
UNBOUNDED = "unbounded"
#: Safety limit of ``max_reasks="unbounded"``: requests per decision before the run stops.
REASK_SAFETY_LIMIT = 1000
#: Flip threshold of the live stop rule (first passage, the per-run reading of
#: :mod:`normlab.theory.criteria`): mean challenger share over the last three rounds.
FLIP_THRESHOLD = FLIP_SUM / 3.0



class ReaskLimitError(EndpointError):
    """``max_reasks="unbounded"`` reached :data:`REASK_SAFETY_LIMIT` requests for one decision."""


# Settings that may differ between a run and its resumption (not part of the settings hash).
_RESUMABLE_FREE = ("model", "seed")


# ----------------------------------------------------------------------------- settings
@dataclass(frozen=True)
class GameSettings:
    """Everything that determines an LLM naming-game run (hashed to guard resumption).

    See :func:`run_game` for the meaning of each field (``top_p``, ``min_p`` are the effective
    sampler settings sent; ``None`` = omitted, the server's default). ``seed`` is ``[entropy, *spawn_key]`` of
    the run's :class:`numpy.random.SeedSequence`; ``graph`` a digest of the edge list (``None``
    for the complete graph); ``model`` the model name the endpoint reported.
    """

    n_agents: int
    memory: int
    names: tuple
    max_interactions: int
    runs: int = 1
    mode: str = "sample"
    committed: int = 0
    committed_name: str | None = None
    initial: str = "empty"
    stop: str = "streak"
    template: str = "main"
    template_digest: str = ""
    payoffs: tuple = (100.0, -50.0)
    temperature: float = 0.5
    top_k: int | None = 10
    max_tokens: int = 6
    top_logprobs: int = 20
    max_reasks: int | str = 2
    prefill: bool = False
    multi_token: str = "expand"
    case_sensitive: bool = False
    wrap: str = "chat"
    parse: str = "normlab"
    top_p: float | None = 1.0
    min_p: float | None = 0.0
    name_order: str = "per_agent"
    committed_placement: str = "last"
    committed_mode: str = "swap"
    graph: str | None = None
    groups: tuple = ()
    model: str | None = None
    seed: tuple | None = None

    def to_dict(self) -> dict:
        d = asdict(self)
        for k, v in d.items():
            if isinstance(v, tuple):
                d[k] = list(v)
        if not d["groups"]:  # one homogeneous population: the settings of earlier versions, same hash
            del d["groups"]
        return d

    @property
    def digest(self) -> str:
        return sha256_hex(json.dumps(self.to_dict(), sort_keys=True), 32)

    @property
    def kind(self) -> str:
        """``baseline`` (empty start), ``swap`` (consensus start + committed minority) or ``evolved``."""
        if self.initial == "empty":
            return "baseline"
        return "swap" if self.committed > 0 else "evolved"

    @property
    def initial_name(self) -> str | None:
        return self.initial.split(":", 1)[1] if self.initial.startswith("consensus:") else None

    def sampler(self) -> dict:
        """The effective sampler settings sent in sample mode (``None``: omitted)."""
        return {"temperature": self.temperature, "top_k": self.top_k, "top_p": self.top_p, "min_p": self.min_p,
                "max_tokens": self.max_tokens}

    def seed_sequence(self) -> np.random.SeedSequence:
        entropy, *key = self.seed
        return np.random.SeedSequence(int(entropy), spawn_key=tuple(int(x) for x in key))


def _check_float(v, name, low=None) -> float:
    if isinstance(v, (bool, np.bool_)) or not isinstance(v, numbers.Real) or not math.isfinite(float(v)):
        raise TypeError(f"{name} must be a finite number; got {v!r}")
    v = float(v)
    if low is not None and v < low:
        raise ValueError(f"{name} must be >= {low}; got {v}")
    return v


def _graph_neighbours(graph, n_agents: int):
    """Neighbour lists (``None`` for the complete graph) and a digest of the edge list.

    Validation (networkx type, node count, undirected, no self-loop, no isolated node) is the
    theory's :func:`normlab.theory._common.graph_to_csr`, so both layers accept the same graphs.
    """
    if graph is None:
        return None, None
    from normlab.theory._common import graph_to_csr

    indptr, indices = graph_to_csr(graph, n_agents)
    nbrs = [sorted(int(v) for v in indices[indptr[a]:indptr[a + 1]]) for a in range(n_agents)]
    digest = sha256_hex(json.dumps(nbrs), 32)
    return nbrs, digest


def _check_unit(v, name) -> float | None:
    if v is None:
        return None
    v = _check_float(v, name, 0.0)
    if v > 1:
        raise ValueError(f"{name} must be in [0, 1] (or None to omit it); got {v}")
    return v


def check_reasks(max_reasks) -> int | str:
    """``"unbounded"`` (the paper: re-ask until a pool name appears) or an int cap in 0..100.

    References
    ----------
    AI-norms code (MIT): ``run_API.py`` / ``data-era/simulation_module.ipynb`` (``get_response``
    loops until a pool name appears).
    """
    if isinstance(max_reasks, str):
        if max_reasks.strip().lower() == UNBOUNDED:
            return UNBOUNDED
        try:
            max_reasks = int(max_reasks)
        except ValueError:
            raise ValueError(f"max_reasks (--reask) must be 'unbounded' or an int in 0..100; got {max_reasks!r}") from None
    if isinstance(max_reasks, bool) or not isinstance(max_reasks, (int, np.integer)):
        raise TypeError(f"max_reasks (--reask) must be 'unbounded' or an int in 0..100; got {max_reasks!r}")
    if not 0 <= int(max_reasks) <= 100:
        raise ValueError(f"max_reasks (--reask) must be 'unbounded' or an int in 0..100; got {max_reasks!r}")
    return int(max_reasks)


def make_settings(
    n_agents, memory, names, *, max_interactions, runs=1, mode="sample", committed=0, committed_name=None,
    initial="empty", stop="streak", graph=None, template="main", payoffs=(100, -50), temperature=0.5,
    top_k=10, max_tokens=6, top_logprobs=20, max_reasks=2, prefill=None, multi_token="expand",
    case_sensitive=False, embedded=True, wrap="chat", top_p=1.0, min_p=0.0, name_order="auto",
    committed_placement="last", committed_mode="swap", parse="normlab",
) -> tuple[GameSettings, PromptTemplate, list | None]:
    """Validate run arguments (before any work) and return settings, template and neighbours."""
    n_agents = check_int(n_agents, "n_agents", 2)
    if committed_mode not in COMMITTED_MODES:
        raise ValueError(f"committed_mode must be one of {COMMITTED_MODES}; got {committed_mode!r}")
    if committed_placement not in COMMITTED_PLACEMENTS:
        raise ValueError(f"committed_placement must be one of {COMMITTED_PLACEMENTS}; got {committed_placement!r}")
    if name_order not in NAME_ORDERS:
        raise ValueError(f"name_order must be one of {NAME_ORDERS}; got {name_order!r}")
    wrap = check_wrap(wrap)
    if parse not in PARSERS:
        raise ValueError(f"parse must be one of {PARSERS}; got {parse!r}")
    if committed_mode == "inject":
        k = check_int(committed, "committed", 0)
        if committed_placement != "last":
            raise ValueError("committed_mode='inject' adds the committed agents as the last K ids; "
                             "committed_placement must be 'last'")
        if graph is not None:
            raise ValueError("committed_mode='inject' adds agents and needs the complete graph (graph=None)")
        n_agents = n_agents + k
    memory = check_int(memory, "memory", 1)
    names = validate_names(names)
    if len(names) < 2:
        raise ValueError(f"the name pool needs at least 2 names; got {list(names)}")
    for n in names:
        if any(c in n for c in "'\"{}<>\n\r\t"):
            raise ValueError(f"invalid name {n!r}: names shown in prompts may not contain quotes, braces, "
                             "angle brackets or line breaks (they would break the answer format)")
    max_interactions = check_int(max_interactions, "max_interactions", 1)
    runs = check_int(runs, "runs", 1)
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}; got {mode!r}")
    committed = check_int(committed, "committed", 0)
    if committed >= n_agents:
        raise ValueError(f"committed must be < n_agents = {n_agents} (at least one agent must be uncommitted); got {committed}")
    if committed_name is None:
        committed_name = names[-1] if committed else None
    elif committed_name not in names:
        raise ValueError(f"committed name {committed_name!r} is not in the pool {list(names)}")
    if not committed:
        committed_name = None
    if not isinstance(initial, str):
        raise TypeError(f"initial must be 'empty', 'random' or 'consensus:<name>'; got {initial!r}")
    if initial not in ("empty", "random"):
        if not initial.startswith("consensus:") or initial.split(":", 1)[1] not in names:
            raise ValueError(f"initial must be 'empty', 'random' or 'consensus:<name>' with a pool name from "
                             f"{list(names)}; got {initial!r}")
    if stop not in STOP_RULES:
        raise ValueError(f"stop must be one of {STOP_RULES}; got {stop!r}")
    if stop == "flip" and not committed:
        raise ValueError("stop='flip' needs committed agents (committed >= 1)")
    tpl = load_template(template)
    if not (isinstance(payoffs, (tuple, list)) and len(payoffs) == 2):
        raise TypeError(f"payoffs must be (success, failure); got {payoffs!r}")
    payoffs = (_check_float(payoffs[0], "payoffs[0]"), _check_float(payoffs[1], "payoffs[1]"))
    temperature = _check_float(temperature, "temperature", 0.0)
    if top_k is not None:
        top_k = check_int(top_k, "top_k", 1)
    max_tokens = check_int(max_tokens, "max_tokens", 1)
    top_logprobs = check_int(top_logprobs, "top_logprobs", 1, 100)
    max_reasks = check_reasks(max_reasks)
    top_p = _check_unit(top_p, "top_p")
    min_p = _check_unit(min_p, "min_p")
    if mode == "exact" and (top_p not in (None, 1.0) or min_p not in (None, 0.0)):
        raise ValueError("exact mode applies temperature and top-k locally and needs neutral top_p (1 or None) "
                         f"and min_p (0 or None); got top_p={top_p}, min_p={min_p}")
    if name_order == "auto":
        name_order = "per_agent" if initial == "empty" else "shared"
    if multi_token not in MULTI_TOKEN_MODES:
        raise ValueError(f"multi_token must be one of {MULTI_TOKEN_MODES}; got {multi_token!r}")
    if prefill is None:
        prefill = True if mode == "exact" else bool(embedded)
    elif not isinstance(prefill, bool):
        raise TypeError(f"prefill must be True, False or None; got {prefill!r}")
    if mode == "exact" and not prefill:
        raise ValueError("exact mode reads the next-token logprobs at the answer position and needs prefill=True")
    if mode == "exact" and top_k is not None and top_k > top_logprobs:
        raise ValueError(f"exact mode needs top_logprobs >= top_k to apply the top-k sampler exactly; got top_logprobs={top_logprobs}, top_k={top_k}")
    nbrs, gdigest = _graph_neighbours(graph, n_agents)
    s = GameSettings(
        n_agents=n_agents, memory=memory, names=tuple(names), max_interactions=max_interactions, runs=runs,
        mode=mode, committed=committed, committed_name=committed_name, initial=initial, stop=stop,
        template=tpl.name, template_digest=tpl.digest, payoffs=payoffs, temperature=temperature,
        top_k=top_k, max_tokens=max_tokens, top_logprobs=top_logprobs, max_reasks=max_reasks,
        prefill=bool(prefill), multi_token=multi_token, case_sensitive=bool(case_sensitive), wrap=wrap,
        parse=parse, top_p=top_p, min_p=min_p, name_order=name_order, committed_placement=committed_placement,
        committed_mode=committed_mode, graph=gdigest,
    )
    return s, tpl, nbrs


# ----------------------------------------------------------------------------- mixed populations
#: Keys a group may set (``--group 12:model=A,temperature=0.7``); the rest come from the run.
GROUP_KEYS = ("name", "model", "base_url", "template", "temperature", "top_k", "top_p", "min_p", "max_tokens",
              "price_input", "price_output")


@dataclass(frozen=True)
class GroupSpec:
    """One group of a mixed population as run: its label, agents and effective settings.

    ``model`` / ``base_url`` are ``None`` when the group uses the run's endpoint. The endpoint's
    address and the prices are kept out of the settings hash (as the run's own ``--base-url``
    and ``--price-input``); the manifest records them per session.
    """

    name: str
    size: int
    first_agent: int
    template: str
    template_digest: str
    temperature: float
    top_k: int | None
    top_p: float | None
    min_p: float | None
    max_tokens: int
    model: str | None = None
    base_url: str | None = None
    price_input: float | None = None
    price_output: float | None = None

    def settings(self) -> dict:
        """The group as stored in the run's settings (hashed): where the endpoint lives and what
        it costs may change between sessions (they are in the manifest), the protocol may not."""
        d = asdict(self)
        for k in ("price_input", "price_output", "base_url"):
            d.pop(k)
        return d


def _parse_group_text(text: str) -> dict:
    """``"12:model=A,temperature=0.7"`` -> ``{"size": "12", "model": "A", "temperature": "0.7"}``."""
    size, sep, rest = str(text).partition(":")
    out = {"size": size.strip()}
    for item in filter(None, (x.strip() for x in rest.split(","))) if sep else ():
        key, eq, value = item.partition("=")
        if not eq:
            raise ValueError(f"--group {text!r}: {item!r} is not KEY=VALUE (keys: {', '.join(GROUP_KEYS)})")
        out[key.strip()] = value.strip()
    return out


def make_groups(groups, s: GameSettings, run_tpl: PromptTemplate, *, embedded: bool,
                n_agents: int) -> tuple[tuple, list]:
    """Validate a mixed population (before any work).

    Parameters
    ----------
    groups : sequence of str or dict, optional
        One entry per group, in agent order: ``"SIZE:key=value,..."`` or
        ``{"size": SIZE, key: value, ...}`` with keys :data:`GROUP_KEYS`. Sizes must add up to
        ``n_agents``; group ``g`` holds the next ``size`` agent ids.
    s : GameSettings
        The run's settings (defaults for every key a group leaves out).
    run_tpl : PromptTemplate
        The run's template (the default of ``template``).
    embedded : bool
        The run's endpoint is the embedded server (a group naming another model then needs
        its own ``base_url``).
    n_agents : int
        Population size as requested (injected committed agents come after and belong to no group).

    Returns
    -------
    (tuple of dict, list of GroupSpec)
        The groups as stored in the settings (hashed) and as run.
    """
    if groups is None or len(groups) == 0:
        return (), []
    if isinstance(groups, (str, dict)):
        groups = [groups]
    specs, first, labels = [], 0, set()
    for k, g in enumerate(groups):
        d = _parse_group_text(g) if isinstance(g, str) else dict(g) if isinstance(g, dict) else None
        if d is None:
            raise TypeError(f"a group must be 'SIZE:key=value,...' or a dict; got {g!r}")
        unknown = sorted(set(d) - set(GROUP_KEYS) - {"size"})
        if unknown:
            raise ValueError(f"group {k}: unknown key(s) {unknown}; allowed: size, {', '.join(GROUP_KEYS)}")
        try:
            size = int(str(d.get("size")).strip())
        except ValueError:
            raise ValueError(f"group {k}: size must be a whole number of agents; got {d.get('size')!r}") from None
        if size < 1:
            raise ValueError(f"group {k}: size must be >= 1; got {size}")
        name = str(d.get("name") or f"g{k}")
        if name in labels:
            raise ValueError(f"group name {name!r} is used twice")
        labels.add(name)

        def num(key, default, cast=float, low=None, none_words=()):
            v = d.get(key, default)
            if v is None or (isinstance(v, str) and v.strip().lower() in none_words):
                return None
            try:
                v = cast(v) if not isinstance(v, bool) else v
            except (TypeError, ValueError):
                raise ValueError(f"group {name}: {key} must be a number; got {d.get(key)!r}") from None
            if isinstance(v, bool) or (cast is float and not math.isfinite(v)):
                raise ValueError(f"group {name}: {key} must be a finite number; got {d.get(key)!r}")
            if low is not None and v < low:
                raise ValueError(f"group {name}: {key} must be >= {low}; got {v}")
            return v

        try:
            tpl = load_template(d["template"]) if d.get("template") is not None else run_tpl
        except ValueError as exc:  # a file that is not a template: say which group named it
            raise ValueError(f"group {name}: template {d['template']!r}: {exc}") from None
        top_k = num("top_k", s.top_k, int, 1, none_words=("none", "0"))
        top_p = _check_unit(num("top_p", s.top_p, none_words=("none",)), f"group {name}: top_p")
        min_p = _check_unit(num("min_p", s.min_p, none_words=("none",)), f"group {name}: min_p")
        if s.mode == "exact" and (top_p not in (None, 1.0) or min_p not in (None, 0.0)):
            raise ValueError(f"group {name}: exact mode needs neutral top_p (1) and min_p (0)")
        if s.mode == "exact" and top_k is not None and top_k > s.top_logprobs:
            raise ValueError(f"group {name}: exact mode needs top_k <= top_logprobs = {s.top_logprobs}; got {top_k}")
        base_url = d.get("base_url") or None
        if base_url is not None and not str(base_url).startswith(("http://", "https://")):
            raise ValueError(f"group {name}: base_url must start with http:// or https://; got {base_url!r}")
        model = d.get("model") or None
        if embedded and model is not None and base_url is None:
            from .backend import EMBEDDED_MODEL

            if model != EMBEDDED_MODEL:
                raise ValueError(f"group {name}: model {model!r} needs base_url= (the run has no --base-url, and the "
                                 f"embedded server serves only {EMBEDDED_MODEL})")
        specs.append(GroupSpec(
            name=name, size=size, first_agent=first, template=tpl.name, template_digest=tpl.digest,
            temperature=num("temperature", s.temperature, float, 0.0), top_k=top_k, top_p=top_p, min_p=min_p,
            max_tokens=num("max_tokens", s.max_tokens, int, 1), model=model, base_url=base_url,
            price_input=num("price_input", None, float, 0.0), price_output=num("price_output", None, float, 0.0),
        ))
        first += size
    if first != n_agents:
        raise ValueError(f"the groups hold {first} agents ({' + '.join(str(g.size) for g in specs)}) but the "
                         f"population has {n_agents}; sizes must add up to --n-agents")
    return tuple(g.settings() for g in specs), specs


def run_setup(s: GameSettings, run: int) -> tuple[set, dict | None]:
    """Committed ids and initial memories of run ``run`` (deterministic in the run's seed).

    ``committed_placement='random'`` draws the K committed ids, and ``initial='random'`` each
    uncommitted agent's ``H`` prepared entries ``(own, partner)`` -- each name uniform over the
    first two pool names, as the authors' ``set_initial_state`` (``options[random.choice(range(2))]``)
    -- from ``SeedSequence(entropy, spawn_key=(..., run, 0, 0))``, a stream distinct from the
    interactions' ``(..., run, t)``.

    Returns
    -------
    (set of int, dict or None)
        Committed ids, and ``{agent: [(own, partner), ...]}`` (``None`` for empty memories).

    References
    ----------
    AI-norms code (MIT): ``data-era/simulation_module.ipynb`` (``set_initial_state``,
    ``swap_committed``, ``add_committed``).
    """
    N, K, H = s.n_agents, s.committed, s.memory
    g = None
    if (K and s.committed_placement == "random") or s.initial == "random":
        entropy, *key = s.seed
        g = np.random.Generator(np.random.PCG64(np.random.SeedSequence(
            int(entropy), spawn_key=tuple(int(x) for x in key) + (int(run), 0, 0))))
    if K and s.committed_placement == "random":
        committed = {int(x) for x in g.choice(N, size=K, replace=False)}
    else:
        committed = set(range(N - K, N))
    init = s.initial_name
    if init is not None:
        mem = {a: [(init, init)] * H for a in range(N) if a not in committed}
    elif s.initial == "random":
        two = s.names[:2]
        mem = {}
        for a in range(N):
            if a in committed:
                continue
            picks = g.integers(2, size=(H, 2))
            mem[a] = [(two[int(x)], two[int(y)]) for x, y in picks]
    else:
        mem = None
    return committed, mem


def _seed_list(ss: np.random.SeedSequence) -> tuple:
    return (int(ss.entropy),) + tuple(int(x) for x in ss.spawn_key)


def _compare(stored: dict, requested: dict, free: Sequence[str]) -> list[str]:
    diffs = []
    for k in sorted(set(stored) | set(requested)):
        if k in free:
            continue
        a, b = stored.get(k), requested.get(k)
        if a != b:
            diffs.append(f"{k}: stored {a!r} != requested {b!r}")
    return diffs


# ----------------------------------------------------------------------------- result
@dataclass(frozen=True)
class LLMRunResult:
    """Runs of the LLM naming game.

    Attributes
    ----------
    log : normlab.schema.GameLog
        Decisions (two rows per interaction, schema columns plus ``names_shown``,
        ``prompt_hash``, ``p_name``, ``covered_mass``, ``probs`` (pool order), ``p_approx``
        (exact mode: a normalising constant or a branch was approximated), ``cache_hit``, ``llm_calls``,
        ``invalid_reason``, ``raw_text``, ``latency_s``, ``prompt_tokens``, ``completion_tokens``,
        ``group`` (the agent's group; ``"all"`` in a homogeneous population), ``model``)
        and runs (schema columns plus ``mode``, ``template``, ``stop``, ``stop_reason``,
        ``finished``, ``decisions`` (uncommitted decisions), ``llm_calls``, ``cache_hits``,
        ``invalid``, ``prompt_tokens``, ``completion_tokens``, ``cost_usd``,
        ``memory_consensus`` (the theory's consensus at the end), ``flipped``, ``flip_time``,
        ``mean_latency_s``). ``consensus`` is the name on which >= 95% of the last ``3N``
        interactions succeeded with >= 95% of the uncommitted productions (else ``None``).
    calls : pandas.DataFrame
        One row per LLM request: ``call``, ``run``, ``t``, ``agent``, ``purpose``, ``prompt_hash``,
        ``partial``, ``text``, ``top_logprobs`` (JSON), ``finish_reason``, tokens, ``latency_s``,
        ``attempts``, ``errors``.
    settings : dict
        The run settings (see :class:`GameSettings`).
    directory : pathlib.Path or None
        Run directory (``settings.json``, ``journal.jsonl``, Parquet tables).
    elapsed : float
        Wall-clock seconds of this invocation.
    replayed : int
        Interactions replayed from the journal (resumption) rather than played now.
    ledger : pandas.DataFrame
        The token/cost ledger, one row per request (:func:`build_ledger`).
    stopped : str or None
        ``"budget"`` when a spending cap stopped this session (the runs left unfinished resume
        with a larger cap); ``None`` otherwise.
    """

    log: GameLog
    calls: pd.DataFrame
    settings: dict
    directory: Path | None
    elapsed: float = 0.0
    replayed: int = 0
    ledger: pd.DataFrame | None = None
    stopped: str | None = None

    def to_frame(self) -> pd.DataFrame:
        """One row per run (the run table of :attr:`log`)."""
        return self.log.runs.copy()

    @property
    def finished(self) -> bool:
        return bool(self.log.runs["finished"].all())

    def summary(self) -> dict:
        """JSON-friendly summary (printed by ``normlab llm-run``)."""
        r = self.log.runs
        dec = int(r["decisions"].sum())
        calls = int(r["llm_calls"].sum())
        hits = int(r["cache_hits"].sum())
        out = {
            "model": self.settings.get("model"),
            "mode": self.settings.get("mode"),
            "kind": str(r["kind"].iloc[0]) if len(r) else None,
            "runs": int(len(r)),
            "finished": self.finished,
            "n_interactions": [int(x) for x in r["n_interactions"]],
            "stop_reasons": [x for x in r["stop_reason"]],
            "decisions": dec,
            "llm_calls": calls,
            "calls_per_decision": (calls / dec) if dec else None,
            "cache_hits": hits,
            "cache_hit_rate": (hits / dec) if dec else None,
            "invalid": int(r["invalid"].sum()),
            "reasks": int(r["reasks"].sum()),
            "wrap": self.settings.get("wrap"),
            "parse": self.settings.get("parse"),
            "max_reasks": self.settings.get("max_reasks"),
            "sampler": {k: self.settings.get(k) for k in ("temperature", "top_k", "top_p", "min_p", "max_tokens")},
            "consensus": [None if c is None else str(c) for c in r["consensus"]],
            "prompt_tokens": int(r["prompt_tokens"].sum()),
            "completion_tokens": int(r["completion_tokens"].sum()),
            "cost_usd": float(r["cost_usd"].sum()),
            "replayed_interactions": int(self.replayed),
            "elapsed_s": round(float(self.elapsed), 3),
        }
        if self.stopped:
            out["stopped"] = self.stopped
        if self.settings.get("groups"):
            d = self.log.decisions
            d = d[~d["committed"]]
            out["groups"] = {str(g): {"model": str(x["model"].iloc[0]), "decisions": int(len(x)),
                                      "invalid": int((~x["valid"]).sum()),
                                      "names": {str(k): int(v) for k, v in x["name"].value_counts().items()}}
                             for g, x in d.groupby("group", sort=False)}
        if self.settings.get("committed"):
            out["flipped"] = [bool(x) for x in r["flipped"]]
        if self.directory is not None:
            out["directory"] = str(self.directory)
            out["log"] = str(self.directory / "decisions.parquet")
            out["runs_table"] = str(self.directory / "runs.parquet")
            out["calls_table"] = str(self.directory / "calls.parquet")
            out["ledger"] = str(self.directory / "ledger.parquet")
            out["manifest"] = str(self.directory / "manifest.json")
        return plain(out)

    def __repr__(self) -> str:
        from normlab._display import short_repr

        s, r = self.settings, self.log.runs
        cons = r["consensus"].astype(object).where(r["consensus"].notna(), "none").value_counts()
        return short_repr("LLMRunResult", s.get("model"), f"{s.get('mode')} mode",
                          f"{len(r)} runs of N={s.get('n_agents')}, H={s.get('memory')}, names {','.join(s.get('names', ()))}",
                          "consensus " + ", ".join(f"{k} {v}/{len(r)}" for k, v in cons.items()),
                          f"{int(r['decisions'].sum())} decisions", f"{int(r['llm_calls'].sum())} LLM calls",
                          f"{int(r['invalid'].sum())} invalid", "finished" if self.finished else "NOT finished",
                          f"{self.elapsed:.0f} s")

    def _repr_html_(self) -> str:
        from normlab._display import html_card

        s = self.summary()
        rows = [("runs", s["runs"]), ("decisions", s["decisions"]), ("LLM calls", s["llm_calls"]),
                ("calls per decision", s["calls_per_decision"]), ("cache hit rate", s["cache_hit_rate"]),
                ("invalid answers", s["invalid"]), ("re-asks", s["reasks"]),
                ("consensus per run", ", ".join("none" if c is None else c for c in s["consensus"]))]
        if "flipped" in s:
            rows.append(("flipped to the committed name", f"{sum(s['flipped'])}/{len(s['flipped'])} runs"))
        if self.stopped:
            rows.append(("stopped", f"{self.stopped} (a larger cap continues the runs)"))
        if "groups" in s:
            rows.append(("groups", "; ".join(f"{g}: {v['model']}, {v['decisions']} decisions"
                                              for g, v in s["groups"].items())))
        rows += [("tokens (prompt / completion)", f"{s['prompt_tokens']:,} / {s['completion_tokens']:,}"),
                 ("cost (USD)", s["cost_usd"]), ("elapsed (s)", s["elapsed_s"])]
        st = self.settings
        return html_card("LLMRunResult", rows, level=None,
                         subtitle=f"{st.get('model')}, {st.get('mode')} mode, N = {st.get('n_agents')}, "
                                  f"H = {st.get('memory')}, names {','.join(st.get('names', ()))}",
                         settings={"stop": st.get("stop"), "wrap": st.get("wrap"), "parse": st.get("parse"),
                                   "directory": s.get("directory")},
                         note=".plot() draws the success rate per round (kind='production' the shares); "
                              ".log holds the tidy tables.")

    @plotting
    def plot(self, kind: str = "success", *, name: str | None = None, ax=None):
        """Mean success rate (or production share of ``name``) per population round over the
        runs, with a 95% band (:meth:`normlab.schema.GameLog.plot`).

        Returns
        -------
        matplotlib.axes.Axes
        """
        ax = self.log.plot(kind, name=name, by=("model", "committed_count", "initial"), ax=ax)
        st = self.settings
        ax.set_title(f"{st.get('model')}, N = {st.get('n_agents')}, H = {st.get('memory')}", fontsize=9)
        return ax


# ----------------------------------------------------------------------------- the game
class _RunState:
    """Memories and stop-rule trackers of one run (rebuilt identically by replaying the journal)."""

    def __init__(self, s: GameSettings, committed_ids: set, initial_memory: dict | None = None):
        self.s = s
        H, N = s.memory, s.n_agents
        # as the theory simulators: committed agents start with an empty memory (never consulted)
        init = initial_memory or {}
        self.mem = [deque(init.get(a, []) if a not in committed_ids else [], maxlen=H) for a in range(N)]
        self.committed_ids = committed_ids
        self.t = 0
        self.streak = 0
        self.window = deque(maxlen=3 * N)
        self.rounds = deque(maxlen=3)  # (committed-name productions, productions) of uncommitted agents
        self.cur = [0, 0]
        self.flipped = False
        self.reason: str | None = None

    def apply(self, i: int, j: int, a: str | None, b: str | None) -> None:
        success = a is not None and b is not None and a == b
        if a is not None and b is not None:
            self.mem[i].append((a, b))
            self.mem[j].append((b, a))
        for agent, name in ((i, a), (j, b)):
            if name is not None and agent not in self.committed_ids:
                self.cur[1] += 1
                self.cur[0] += name == self.s.committed_name
        self.streak = self.streak + 1 if success else 0
        self.window.append(success)
        self.t += 1
        if self.t % self.s.n_agents == 0:  # end of a population round
            self.rounds.append(tuple(self.cur))
            self.cur = [0, 0]
            if self.s.committed and len(self.rounds) == 3 and not self.flipped:
                c, u = sum(x[0] for x in self.rounds), sum(x[1] for x in self.rounds)
                self.flipped = u > 0 and c >= FLIP_THRESHOLD * u
        self.reason = self._stop()

    def _memory_consensus(self) -> bool:
        name = None
        H = self.s.memory
        for a, m in enumerate(self.mem):
            if a in self.committed_ids:
                continue
            if len(m) < H:
                return False
            for own, partner in m:
                if own != partner:
                    return False
                if name is None:
                    name = own
                elif own != name:
                    return False
        return name is not None and (not self.s.committed or name == self.s.committed_name)

    def _stop(self) -> str | None:
        s, L = self.s, 3 * self.s.n_agents
        if s.stop == "streak" and self.streak >= L:
            return "streak"
        if s.stop == "success95" and len(self.window) == L and sum(self.window) >= 0.95 * L:
            return "success95"
        if s.stop == "consensus" and self._memory_consensus():
            return "consensus"
        if s.stop == "flip" and self.flipped:
            return "flip"
        if self.t >= s.max_interactions:
            return "max"
        return None


def exact_cache_entries(records) -> dict:
    """``{key: top_logprobs}`` of the exact-mode distributions in journal records."""
    out = {}
    for r in records:
        if r.get("ev") in ("call", "cached") and r.get("purpose") == "exact" and r.get("key") and r.get("top"):
            out[r["key"]] = r["top"]
    return out


def load_cache(sources) -> dict:
    """Exact-mode distributions journaled in other run or probe directories (or journal files).

    Parameters
    ----------
    sources : path or sequence of paths

    Returns
    -------
    dict
        ``{key: top_logprobs}``; keys hash the model name, the full prompt and ``top_logprobs``,
        so only identical requests are ever reused.
    """
    from .journal import read_journal

    if sources is None:
        return {}
    if isinstance(sources, (str, os.PathLike)):
        sources = [sources]
    out = {}
    for src in sources:
        p = Path(src)
        f = p / JOURNAL_FILE if p.is_dir() else p
        if not f.exists():
            raise FileNotFoundError(f"cache source {src} holds no {JOURNAL_FILE}")
        out.update(exact_cache_entries(read_journal(f)))
    return out


@dataclass
class _Agents:
    """What the decisions of one group of agents use: template, client and sampler."""

    label: str
    tpl: PromptTemplate
    client: object
    temperature: float
    top_k: int | None
    top_p: float | None
    min_p: float | None
    max_tokens: int


class _Game:
    """One session of play: decisions (:meth:`decide`), runs (:meth:`play`), the journal.

    ``groups`` (mixed populations) is a list of ``(_Agents, first agent, size)``; by default
    every agent uses ``tpl``, ``client`` and the run's sampler. Also used by the probes (one
    agent, :meth:`decide` only).
    """

    def __init__(self, s: GameSettings, tpl: PromptTemplate, nbrs, client, journal: Journal, pbar=None,
                 imported: dict | None = None, groups: list | None = None):
        self.s, self.tpl, self.nbrs, self.client, self.journal, self.pbar = s, tpl, nbrs, client, journal, pbar
        self.names = s.names
        self._setups: dict[int, tuple] = {}
        self.inflight: dict[str, asyncio.Future] = {}
        self.n_calls = sum(1 for r in journal.records if r.get("ev") == "call")
        self.ss = s.seed_sequence()
        self.cache: dict[str, list] = exact_cache_entries(journal.records)
        self.imported = imported or {}
        if not groups:
            groups = [(_Agents("all", tpl, client, s.temperature, s.top_k, s.top_p, s.min_p, s.max_tokens),
                       0, s.n_agents)]
        self.groups = [g for g, _, _ in groups]
        self.group_of = np.full(s.n_agents, -1, dtype=np.int64)  # -1: injected committed agents
        for k, (_, first, size) in enumerate(groups):
            self.group_of[first:first + size] = k
        self.stopped: str | None = None  # "budget" when a spending cap stopped the session
        # what earlier sessions spent counts against a cap (a rerun with a larger cap continues)
        caps = {id(g.client.cap): g.client.cap for g in self.groups}
        if any(c.active for c in caps.values()):
            for r in journal.records:
                if r.get("ev") == "call":
                    a = r.get("agent")
                    gi = int(self.group_of[a]) if isinstance(a, int) and 0 <= a < s.n_agents else 0
                    c = self.groups[max(gi, 0)].client
                    c.cap.add(r.get("ptok") or 0, r.get("ctok") or 0, c.prices)
        self.write_manifest()

    def agents(self, agent: int) -> _Agents:
        return self.groups[max(int(self.group_of[agent]), 0)]

    def write_manifest(self) -> None:
        """Record this session in the directory's manifest (a file-backed journal only)."""
        if self.journal.path is None:
            return
        from .journal import record_session

        endpoints = []
        for g in self.groups:
            info = getattr(g.client, "info", None) or {"base_url": getattr(g.client, "shown_url", None),
                                                        "model": getattr(g.client, "model", None)}
            endpoints.append({"group": g.label, **info, "price_input": g.client.config.price_input,
                              "price_output": g.client.config.price_output})
        cap = self.groups[0].client.cap
        record_session(self.journal.path.parent, endpoints=endpoints,
                       budget={"tokens": cap.budget_tokens, "usd": cap.budget_usd},
                       spent_before={"tokens": cap.tokens, "usd": cap.usd} if cap.active else None)

    def setup(self, run: int) -> tuple[set, dict | None]:
        """Committed ids and initial memories of ``run`` (:func:`run_setup`, cached)."""
        if run not in self._setups:
            self._setups[run] = run_setup(self.s, run)
        return self._setups[run]

    # --- randomness: every interaction's draws come from (run seed, run, t) only
    def draws(self, run: int, t: int):
        g = np.random.Generator(np.random.PCG64(np.random.SeedSequence(
            self.ss.entropy, spawn_key=tuple(self.ss.spawn_key) + (run, t))))
        N, W = self.s.n_agents, len(self.names)
        i = int(g.integers(N))
        if self.nbrs is None:
            j = int(g.integers(N - 1))
            j += j >= i
        else:
            row = self.nbrs[i]
            j = int(row[int(g.integers(len(row)))])
        orders = (g.permutation(W), g.permutation(W))
        if self.s.name_order == "shared":  # one shuffle per interaction (the authors' simulate_CM)
            orders = (orders[0], orders[0])
        u = g.random(2)
        seeds = g.integers(0, 2**31 - 1, size=2)
        return i, j, orders, u, seeds

    def _log_call(self, run, t, agent, purpose, prompt, partial, key, res) -> None:
        self.n_calls += 1
        self.journal.write({
            "ev": "call", "id": self.n_calls, "run": run, "t": t, "agent": agent, "purpose": purpose,
            "key": key, "ph": prompt.hash, "partial": partial, "text": res.text, "top": res.top,
            "tokens": res.tokens, "finish": res.finish_reason, "ptok": res.prompt_tokens,
            "ctok": res.completion_tokens, "cached": res.cached_tokens, "lat": round(res.latency, 6),
            "attempts": res.attempts, "errors": res.errors,
        })

    async def _top(self, prompt, partial, ctx, client=None) -> list:
        client = client or self.client
        if self.s.wrap == "chat":
            msgs = prompt.messages(prompt.prefill + partial)
        else:
            msgs = prompt.text(self.s.wrap, prompt.prefill + partial)
        key = sha256_hex(json.dumps([client.model, msgs, self.s.top_logprobs], ensure_ascii=False), 32)
        if key in self.cache:
            return self.cache[key]
        if key in self.imported:  # reused from another directory: copied here, so this run is self-contained
            top = self.imported[key]
            self.journal.write({"ev": "cached", "purpose": "exact", "key": key, "top": top, "ph": prompt.hash,
                                "partial": partial, "run": ctx["run"], "t": ctx["t"]})
            self.cache[key] = top
            return top
        if key in self.inflight:
            return await asyncio.shield(self.inflight[key])
        fut = asyncio.get_running_loop().create_future()
        self.inflight[key] = fut
        try:
            res = None
            for _ in range(3):  # a response without logprobs is a transport glitch: ask again
                if self.s.wrap == "chat":
                    res = await client.chat(msgs, max_tokens=1, temperature=1.0, logprobs=True,
                                            top_logprobs=self.s.top_logprobs)
                else:
                    res = await client.complete(msgs, max_tokens=1, temperature=1.0, logprobs=True,
                                                top_logprobs=self.s.top_logprobs)
                ctx["calls"] += 1
                ctx["lat"] += res.latency
                ctx["ptok"] += res.prompt_tokens
                ctx["ctok"] += res.completion_tokens
                self._log_call(ctx["run"], ctx["t"], ctx["agent"], "exact", prompt, partial,
                               key if res.top else None, res)
                if res.top:
                    break
            if not res.top:
                raise EndpointError(
                    f"{client.base_url} returned no top_logprobs; exact mode needs an endpoint that "
                    "supports logprobs/top_logprobs (llama.cpp, vLLM, ...); use --mode sample otherwise"
                )
            self.cache[key] = res.top
            fut.set_result(res.top)
            return res.top
        except BaseException as exc:
            if not fut.done():
                fut.set_exception(exc)
                fut.exception()  # mark retrieved
            raise
        finally:
            self.inflight.pop(key, None)

    async def decide(self, run, t, agent, memory, order, u, seed) -> dict:
        s = self.s
        if agent in self.setup(run)[0]:
            return {"name": s.committed_name, "committed": True, "calls": 0}
        shown = tuple(self.names[k] for k in order)
        g = self.agents(agent)
        prompt = g.tpl.render(list(memory), shown, payoffs=s.payoffs)
        ctx = {"run": run, "t": t, "agent": agent, "calls": 0, "lat": 0.0, "ptok": 0, "ctok": 0}
        side = {"shown": ",".join(shown), "ph": prompt.hash}
        if s.mode == "exact":
            nd = await name_distribution(
                self.names, lambda partial: self._top(prompt, partial, ctx, g.client), temperature=g.temperature,
                top_k=g.top_k, multi_token=s.multi_token, case_sensitive=s.case_sensitive,
            )
            side.update(p=None if nd.probs is None else [round(x, 12) for x in nd.probs],
                        cov=nd.covered_mass, approx=nd.approx)
            if nd.probs is None:
                side.update(name=None, inv="no pool name among the top-logprob tokens")
            else:
                k = choose(nd.probs, float(u))
                side.update(name=self.names[k], inv=None, pn=nd.probs[k])
        else:
            name, reason, text = None, None, None
            unbounded = s.max_reasks == UNBOUNDED
            limit = REASK_SAFETY_LIMIT if unbounded else s.max_reasks + 1
            sampler = dict(max_tokens=g.max_tokens, temperature=g.temperature, top_k=g.top_k, top_p=g.top_p,
                           min_p=g.min_p, logprobs=True)
            attempt = 0
            for attempt in range(limit):
                if s.wrap == "chat":
                    res = await g.client.chat(prompt.messages(prompt.prefill if s.prefill else None),
                                              seed=int(seed) + attempt, **sampler)
                else:
                    res = await g.client.complete(prompt.text(s.wrap, prompt.prefill if s.prefill else None),
                                                  seed=int(seed) + attempt, **sampler)
                ctx["calls"] += 1
                ctx["lat"] += res.latency
                ctx["ptok"] += res.prompt_tokens
                ctx["ctok"] += res.completion_tokens
                self._log_call(run, t, agent, "sample", prompt, "", None, res)
                text = res.text
                if s.parse == "authors":
                    full = text
                    if s.prefill and text is not None and not text.lstrip().startswith(prompt.prefill.strip()):
                        full = prompt.prefill + text
                    parsed = parse_answer_authors(full, shown)
                else:
                    parsed = parse_answer(text, self.names, answer_key=g.tpl.answer_key,
                                          prefill=prompt.prefill if s.prefill else None,
                                          case_sensitive=s.case_sensitive)
                name, reason = parsed.name, parsed.reason
                if name is not None:
                    break
            if name is None and unbounded:
                raise ReaskLimitError(
                    f"run {run}, interaction {t}, agent {agent}: no pool name in {REASK_SAFETY_LIMIT} answers "
                    f"(last: {str(text)[:80]!r}); --reask unbounded stops at this safety limit "
                    f"(normlab.llm_runs.runner.REASK_SAFETY_LIMIT) instead of looping forever -- check the template, "
                    "--wrap and --max-tokens, or use an integer --reask cap"
                )
            side.update(name=name, inv=None if name is not None else f"{reason} (after {attempt + 1} attempts)",
                        text=text, reasks=attempt)
        side.update(calls=ctx["calls"], hit=ctx["calls"] == 0, lat=round(ctx["lat"], 6),
                    ptok=ctx["ptok"], ctok=ctx["ctok"])
        return side

    async def play(self, run: int, replay: list[dict], ended: bool) -> None:
        st = _RunState(self.s, *self.setup(run))
        for rec in replay:
            st.apply(rec["i"], rec["j"], rec["s"][0]["name"], rec["s"][1]["name"])
        if ended:
            return
        if st.reason is None:
            while True:
                t = st.t
                i, j, (oi, oj), u, seeds = self.draws(run, t)
                mi, mj = tuple(st.mem[i]), tuple(st.mem[j])
                # both sides finish (a call made is journaled) before an error or a cap stops the run
                sides = await asyncio.gather(self.decide(run, t, i, mi, oi, u[0], seeds[0]),
                                             self.decide(run, t, j, mj, oj, u[1], seeds[1]), return_exceptions=True)
                errors = [x for x in sides if isinstance(x, BaseException)]
                if errors:
                    fatal = [x for x in errors if not isinstance(x, BudgetExhausted)]
                    if not fatal:  # a spending cap: stop here, resumable (no "end" record)
                        self.stopped = "budget"
                        return
                    exc = fatal[0]
                    if isinstance(exc, EndpointError):
                        self.journal.write({"ev": "error", "run": run, "t": t, "message": str(exc)[:500]}, sync=True)
                    raise exc
                si, sj = sides
                self.journal.write({"ev": "int", "run": run, "t": t, "i": i, "j": j, "s": [si, sj]}, sync=True)
                st.apply(i, j, si["name"], sj["name"])
                if self.pbar is not None:
                    self.pbar.step(run, self.n_calls)
                if st.reason is not None:
                    break
        if self.pbar is not None:
            self.pbar.end(run, st.t)
        self.journal.write({"ev": "end", "run": run, "n": st.t, "reason": st.reason}, sync=True)


class _Progress:
    """Progress of a run in agent decisions, with an honest time estimate.

    The work left is unknown (runs stop by their stop rule), so it is estimated: a run not yet
    finished is expected to last as long as the runs that finished (before any has, a prior of
    :func:`expected_interactions`), and at least one more population round once it passes that.
    The bar's total is that estimate and is never lowered (a run that ends early does not make
    the total shrink; the bar closes at 100 % when all runs are done); the time left shown is
    the estimated decisions left at the decision rate of the last minute, which follows the
    exact-mode cache as it fills.
    """

    def __init__(self, s: GameSettings, played: dict, finished: dict):
        from tqdm.auto import tqdm

        self.s = s
        self.played = dict(played)
        self.finished = dict(finished)
        self.prior = expected_interactions(s)
        n0 = 2 * sum(self.played.values())
        self.bar = tqdm(total=2 * self._estimate(), initial=n0, desc=f"llm-run ({s.mode})", unit="decision",
                        leave=False, dynamic_ncols=True, mininterval=0.5,
                        bar_format="{desc}: {percentage:3.0f}%|{bar}| {n_fmt}/~{total_fmt} [{elapsed}{postfix}]")
        self._marks = deque([(time.monotonic(), n0)], maxlen=4096)
        self.calls = 0

    def _estimate(self) -> int:
        """Expected interactions of all runs (played, plus what unfinished runs are expected to need)."""
        s, N = self.s, self.s.n_agents
        per_run = (float(np.mean(list(self.finished.values()))) if self.finished else self.prior)
        total = 0.0
        for k in range(s.runs):
            if k in self.finished:
                total += self.finished[k]
            else:
                total += min(s.max_interactions, max(per_run, self.played.get(k, 0) + N))
        return int(math.ceil(total))

    def left_seconds(self) -> float | None:
        now, n = time.monotonic(), self.bar.n
        while len(self._marks) > 2 and now - self._marks[1][0] > 60.0:  # keep the last minute
            self._marks.popleft()
        t0, n0 = self._marks[0]
        if n <= n0 or now <= t0:
            return None
        return max(0.0, 2 * self._estimate() - n) * (now - t0) / (n - n0)

    def _refresh(self) -> None:
        est = 2 * self._estimate()
        if est > self.bar.total:
            self.bar.total = est
        left = self.left_seconds()
        eta = "?" if left is None else self.bar.format_interval(left)
        runs = f"{len(self.finished)}/{self.s.runs}"
        self.bar.set_postfix_str(f"runs done {runs}, {self.calls} calls, ~{eta} left (est.)", refresh=False)

    def step(self, run: int, calls: int) -> None:
        self.played[run] = self.played.get(run, 0) + 1
        self.calls = calls
        self._marks.append((time.monotonic(), self.bar.n + 2))
        self._refresh()
        self.bar.update(2)

    def end(self, run: int, n: int) -> None:
        self.finished[run] = n
        self._refresh()
        self.bar.refresh()

    def close(self) -> None:
        if len(self.finished) == self.s.runs:
            self.bar.total = self.bar.n
            self.bar.refresh()
        self.bar.close()


def expected_interactions(s: GameSettings) -> float:
    """A prior for the interactions a run needs before its stop rule ends it (progress and
    ``--dry-run``; no decision depends on it).

    ``max``: the cap. Otherwise 9 population rounds plus the ``3N`` streak (``12 N``), about
    what SmolLM2 needs in README's main job (N = 10: 5 to 21 rounds, 9 on average) and the
    Llama-3 populations of Flint Ashery et al. (2025) needed to agree (about 10 rounds);
    committed-minority runs (``flip``) may never flip: the cap. Never more than
    ``max_interactions``.
    """
    if s.stop in ("max", "flip"):
        return float(s.max_interactions)
    return float(min(s.max_interactions, 12 * s.n_agents))


# ----------------------------------------------------------------------------- building the log
def _check_int_record(r: dict, s) -> None:
    """A replayed interaction must be well formed and name only pool names (or no name)."""
    try:
        i, j, sides = r["i"], r["j"], r["s"]
        ok = (isinstance(r["run"], int) and isinstance(r["t"], int) and isinstance(i, int) and isinstance(j, int)
              and 0 <= i < s.n_agents and 0 <= j < s.n_agents and isinstance(sides, list) and len(sides) == 2
              and all(isinstance(x, dict) and (x.get("name") is None or x.get("name") in s.names) for x in sides))
    except (KeyError, TypeError):
        ok = False
    if not ok:
        raise ValueError(
            f"journal record {str(r)[:160]} is malformed or names something outside the pool {list(s.names)}; "
            "the journal is corrupt or was edited -- move the directory aside and start the run again"
        )


def _runs_from_journal(records: list[dict], n_runs: int, s=None):
    inter = {k: [] for k in range(n_runs)}
    ended = {}
    for r in records:
        ev = r.get("ev")
        if ev == "int":
            if s is not None:
                _check_int_record(r, s)
            k = r["run"]
            if k in inter and r["t"] == len(inter[k]):  # contiguous, first occurrence wins
                inter[k].append(r)
        elif ev == "end":
            if not isinstance(r.get("run"), int):
                raise ValueError(f"journal record {str(r)[:160]} is malformed; the journal is corrupt")
            ended[r["run"]] = r
    return inter, ended


def _consensus(dec: pd.DataFrame, n_agents: int) -> str | None:
    """Name agreed on at the end: >= 95% of the last 3N interactions succeeded and one name
    made >= 95% of the uncommitted agents' valid productions in them."""
    L = 3 * n_agents
    if dec.empty:
        return None
    t_end = int(dec["t"].max()) + 1
    if t_end < L:
        return None
    last = dec[dec["t"] >= t_end - L]
    succ = last.drop_duplicates("t")["success"].mean()
    prod = last[last["valid"] & ~last["committed"]]["name"]
    if succ < 0.95 or prod.empty:
        return None
    counts = prod.value_counts()
    return str(counts.index[0]) if counts.iloc[0] >= 0.95 * len(prod) else None


def _agent_groups(s: GameSettings) -> tuple[list, dict]:
    """Group label of every agent (``"all"`` for a homogeneous population; ``None`` for injected
    committed agents of a mixed one) and the model each group asked for (``None``: the run's)."""
    if not s.groups:
        return ["all"] * s.n_agents, {"all": None}
    labels = [None] * s.n_agents
    for g in s.groups:
        for a in range(g["first_agent"], g["first_agent"] + g["size"]):
            labels[a] = g["name"]
    return labels, {g["name"]: g.get("model") for g in s.groups}


def _prices_of(prices, label) -> tuple:
    if isinstance(prices, dict):
        return prices.get(label) or prices.get("all") or next(iter(prices.values()), (0.0, 0.0))
    return tuple(prices)


def build_ledger(s: GameSettings, calls: list[dict], prices=(0.0, 0.0), models: dict | None = None) -> pd.DataFrame:
    """The token/cost ledger: one row per LLM request, in the order they were made.

    Columns: ``call``, ``run``, ``t``, ``agent``, ``group``, ``model``, ``purpose``,
    ``prompt_tokens``, ``completion_tokens``, ``cached_tokens`` (as the server reported them),
    ``tokens`` (prompt + completion), ``cost_usd`` (at ``prices``: USD per million prompt /
    completion tokens, per group for a mixed population), and the running totals
    ``cum_prompt_tokens``, ``cum_completion_tokens``, ``cum_tokens``, ``cum_cost_usd``; then
    ``latency_s`` and ``attempts``.

    Parameters
    ----------
    s : GameSettings
    calls : list of dict
        The journal's ``call`` records.
    prices : (float, float) or dict
        Prices, or ``{group label: prices}``.
    models : dict, optional
        ``{group label: model served}``; default the run's model for every group.
    """
    labels, asked = _agent_groups(s)
    models = models or {}
    rows = []
    for c in sorted(calls, key=lambda c: c.get("id", 0)):
        a = c.get("agent")
        g = labels[a] if isinstance(a, int) and 0 <= a < len(labels) else "all"
        pi, po = _prices_of(prices, g)
        pt, ct = int(c.get("ptok") or 0), int(c.get("ctok") or 0)
        rows.append({"call": c.get("id"), "run": c.get("run"), "t": c.get("t"), "agent": a, "group": g,
                     "model": models.get(g) or asked.get(g) or s.model, "purpose": c.get("purpose"),
                     "prompt_tokens": pt, "completion_tokens": ct, "cached_tokens": int(c.get("cached") or 0),
                     "tokens": pt + ct, "cost_usd": (pt * pi + ct * po) / 1e6,
                     "latency_s": c.get("lat", np.nan), "attempts": c.get("attempts", 1)})
    cols = ["call", "run", "t", "agent", "group", "model", "purpose", "prompt_tokens", "completion_tokens",
            "cached_tokens", "tokens", "cost_usd", "cum_prompt_tokens", "cum_completion_tokens", "cum_tokens",
            "cum_cost_usd", "latency_s", "attempts"]
    df = pd.DataFrame(rows, columns=[c for c in cols if not c.startswith("cum_")])
    df["cum_prompt_tokens"] = df["prompt_tokens"].cumsum()
    df["cum_completion_tokens"] = df["completion_tokens"].cumsum()
    df["cum_tokens"] = df["tokens"].cumsum()
    df["cum_cost_usd"] = df["cost_usd"].cumsum()
    return df[cols]


def ledger_totals(ledger: pd.DataFrame) -> dict:
    """Totals of a ledger (for the manifest and summaries): requests, tokens and cost, overall
    and per group and model."""
    def tot(d):
        return {"requests": int(len(d)), "prompt_tokens": int(d["prompt_tokens"].sum()),
                "completion_tokens": int(d["completion_tokens"].sum()),
                "cached_tokens": int(d["cached_tokens"].sum()), "cost_usd": float(d["cost_usd"].sum())}

    out = tot(ledger)
    if ledger["group"].nunique() > 1:
        out["by_group"] = {str(k): {"model": str(d["model"].iloc[0]), **tot(d)}
                           for k, d in ledger.groupby("group", sort=False)}
    return out


def build_result(s: GameSettings, journal: Journal, directory: Path | None, client_prices=(0.0, 0.0),
                 *, elapsed=0.0, replayed=0, stopped: str | None = None, models: dict | None = None) -> LLMRunResult:
    """Rebuild the tidy tables of all runs from the journal records."""
    records = journal.all_records()
    inter, ended = _runs_from_journal(records, s.runs)
    calls = [r for r in records if r.get("ev") == "call"]
    calls_by_run = {}
    for c in calls:
        calls_by_run.setdefault(c["run"], []).append(c)
    labels, asked = _agent_groups(s)
    models = models or _served_models(directory)
    decs, runs = [], []
    for k in range(s.runs):
        recs = inter[k]
        committed_set, initial_memory = run_setup(s, k)
        committed_ids = sorted(committed_set)
        players = np.array([(r["i"], r["j"]) for r in recs], dtype=np.int64).reshape(-1, 2)
        answers = [(r["s"][0]["name"], r["s"][1]["name"]) for r in recs]
        d = rebuild_decisions(players, answers, run=k, n_agents=s.n_agents, memory=s.memory,
                              committed=committed_ids, initial_memory=initial_memory)
        sides = [side for r in recs for side in r["s"]]
        d["names_shown"] = [x.get("shown") for x in sides]
        d["prompt_hash"] = [x.get("ph") for x in sides]
        d["p_name"] = [x.get("pn", np.nan) if x.get("pn") is not None else np.nan for x in sides]
        d["covered_mass"] = [x.get("cov", np.nan) if x.get("cov") is not None else np.nan for x in sides]
        d["probs"] = [x.get("p") for x in sides]
        d["p_approx"] = pd.array([x.get("approx") for x in sides], dtype="boolean")
        d["cache_hit"] = pd.array([x.get("hit") for x in sides], dtype="boolean")
        d["llm_calls"] = np.array([x.get("calls", 0) for x in sides], dtype=np.int64)
        d["reasks"] = np.array([x.get("reasks", 0) for x in sides], dtype=np.int64)
        d["invalid_reason"] = [x.get("inv") for x in sides]
        d["raw_text"] = [x.get("text") for x in sides]
        d["latency_s"] = [float(x.get("lat", 0.0)) for x in sides]
        d["prompt_tokens"] = np.array([x.get("ptok", 0) for x in sides], dtype=np.int64)
        d["completion_tokens"] = np.array([x.get("ctok", 0) for x in sides], dtype=np.int64)
        d["group"] = [labels[a] for a in d["agent"]]
        d["model"] = [None if g is None else (models.get(g) or asked.get(g) or s.model) for g in d["group"]]
        decs.append(d)
        unc = d[~d["committed"]]
        st = _RunState(s, committed_set, initial_memory)
        flip_t = np.nan
        for r in recs:
            st.apply(r["i"], r["j"], r["s"][0]["name"], r["s"][1]["name"])
            if st.flipped and np.isnan(flip_t):
                flip_t = float(st.t - 1)
        rc = calls_by_run.get(k, [])
        ptok = sum(c.get("ptok", 0) for c in rc)
        ctok = sum(c.get("ctok", 0) for c in rc)
        cost = sum(c.get("ptok", 0) * _prices_of(client_prices, _label(labels, c))[0]
                   + c.get("ctok", 0) * _prices_of(client_prices, _label(labels, c))[1] for c in rc) / 1e6
        end = ended.get(k)
        runs.append({
            "run": k, "model": s.model, "kind": s.kind, "names": ",".join(s.names), "n_agents": s.n_agents,
            "memory": s.memory, "committed_count": s.committed, "committed_name": s.committed_name,
            "initial": s.initial, "n_interactions": len(recs), "consensus": _consensus(d, s.n_agents),
            "source_file": str(directory / JOURNAL_FILE) if directory is not None else None,
            "mode": s.mode, "template": s.template, "stop": s.stop,
            "stop_reason": end["reason"] if end else None, "finished": end is not None,
            "decisions": int(len(unc)), "llm_calls": len(rc),
            "cache_hits": int(unc["cache_hit"].fillna(False).sum()), "reasks": int(unc["reasks"].sum()),
            "wrap": s.wrap, "parse": s.parse, "max_reasks": str(s.max_reasks), "sampler": json.dumps(s.sampler()),
            "name_order": s.name_order, "committed_placement": s.committed_placement,
            "committed_mode": s.committed_mode, "committed_ids": ",".join(str(a) for a in committed_ids),
            "invalid": int((~unc["valid"]).sum()), "prompt_tokens": ptok, "completion_tokens": ctok,
            "cost_usd": cost,
            "memory_consensus": st._memory_consensus(), "flipped": bool(st.flipped), "flip_time": flip_t,
            "mean_latency_s": float(np.mean([c.get("lat", 0.0) for c in rc])) if rc else np.nan,
        })
    dec = pd.concat(decs, ignore_index=True)
    for c in ("names_shown", "prompt_hash", "invalid_reason", "raw_text", "probs", "group", "model"):
        dec[c] = dec[c].astype(object).where(dec[c].notna(), None)
    log = GameLog(dec, pd.DataFrame(runs))
    cf = pd.DataFrame({
        "call": [c["id"] for c in calls], "run": [c["run"] for c in calls], "t": [c["t"] for c in calls],
        "agent": [c["agent"] for c in calls], "purpose": [c["purpose"] for c in calls],
        "prompt_hash": [c.get("ph") for c in calls], "partial": [c.get("partial") for c in calls],
        "text": [c.get("text") for c in calls],
        "top_logprobs": [json.dumps(c.get("top")) if c.get("top") is not None else None for c in calls],
        "finish_reason": [c.get("finish") for c in calls],
        "prompt_tokens": [c.get("ptok", 0) for c in calls], "completion_tokens": [c.get("ctok", 0) for c in calls],
        "cached_tokens": [c.get("cached", 0) for c in calls], "latency_s": [c.get("lat", np.nan) for c in calls],
        "attempts": [c.get("attempts", 1) for c in calls],
        "errors": ["; ".join(c.get("errors") or []) or None for c in calls],
    })
    return LLMRunResult(log=log, calls=cf, settings=s.to_dict(), directory=directory, elapsed=elapsed,
                        replayed=replayed, ledger=build_ledger(s, calls, client_prices, models), stopped=stopped)


def ledger_for_directory(directory, prices=(0.0, 0.0)) -> pd.DataFrame:
    """The token/cost ledger of any run or probe directory, rebuilt from its journal
    (:func:`build_ledger`; costs at ``prices``, USD per million prompt / completion tokens)."""
    from dataclasses import fields

    from .journal import read_journal

    directory = Path(directory)
    stored = read_settings(directory)
    if stored is None:
        raise FileNotFoundError(f"{directory} holds no normlab run or probe (no {SETTINGS_FILE})")
    names = {f.name for f in fields(GameSettings)}
    st = {k: (tuple(v) if isinstance(v, list) else v) for k, v in stored["settings"].items() if k in names}
    s = GameSettings(**st)
    f = directory / JOURNAL_FILE
    calls = [r for r in read_journal(f) if r.get("ev") == "call"] if f.exists() else []
    return build_ledger(s, calls, prices, _served_models(directory))


def _label(labels, call) -> str | None:
    a = call.get("agent")
    return labels[a] if isinstance(a, int) and 0 <= a < len(labels) else "all"


def _served_models(directory) -> dict:
    """``{group label: model}`` as served in the directory's latest session (manifest)."""
    if directory is None:
        return {}
    from .journal import read_manifest

    try:
        m = read_manifest(directory)
    except (ValueError, OSError):
        return {}
    if not m or not m.get("sessions"):
        return {}
    return {e.get("group"): e.get("model") for e in m["sessions"][-1].get("endpoints") or [] if e.get("model")}


# ----------------------------------------------------------------------------- estimates (--dry-run)
#: UTF-8 bytes per token assumed by :class:`RunEstimate`. SmolLM2's tokenizer makes 3.37 bytes
#: per token of README's main job's prompts (23 203 tokens reported for 66 requests, chat
#: template included); 3.0 errs on the high side for other byte-level BPE tokenizers.
BYTES_PER_TOKEN = 3.0


@dataclass(frozen=True)
class RunEstimate:
    """What a run or probe is expected to cost, computed before anything is sent (``--dry-run``).

    Two columns: ``typical`` (runs that stop after :func:`expected_interactions`, valid answers
    without re-asks) and ``at_most`` (every run to its cap, every re-ask used; in exact mode at
    most one request per distinct prompt). Tokens are estimated from the prompts themselves:
    each prompt is rendered from the template at the memory lengths the design visits, and its
    UTF-8 bytes are divided by :data:`BYTES_PER_TOKEN`; completion tokens are ``max_tokens``
    per request (1 in exact mode). An estimate, not a measurement: tokenizers differ by about
    20 %, and exact-mode populations that converge visit far fewer memory states than the
    bound (README's main job: 66 requests of at most 170).
    """

    what: str
    rows: dict
    prices: dict
    notes: tuple = ()
    done: dict | None = None

    def to_frame(self) -> pd.DataFrame:
        """One row per quantity: ``quantity``, ``typical``, ``at_most``."""
        return pd.DataFrame([{"quantity": k, "typical": v[0], "at_most": v[1]} for k, v in self.rows.items()])

    def to_dict(self) -> dict:
        return {"estimate": self.what, "nothing_sent": True,
                **{k: {"typical": v[0], "at_most": v[1]} for k, v in self.rows.items()},
                "prices_usd_per_million": self.prices, "already_done": self.done, "how": list(self.notes)}

    def __str__(self) -> str:
        def fmt(k, v):
            if v is None:
                return "no bound"
            return f"{v:,.4f}" if k == "cost_usd" else f"{v:,.0f}"

        lines = [f"estimate (nothing was sent): {self.what}", f"  {'':<20}{'typical':>14}{'at most':>14}"]
        for k, (a, b) in self.rows.items():
            lines.append(f"  {k.replace('_', ' '):<20}{fmt(k, a):>14}{fmt(k, b):>14}")
        lines.append("  prices (USD per million prompt / completion tokens): "
                     + "; ".join(f"{g}: {p[0]:g} / {p[1]:g}" for g, p in self.prices.items()))
        if self.done:
            lines.append("  already done in this directory: " + ", ".join(f"{k} {v:,}" if isinstance(v, int) else
                                                                       f"{k} {v}" for k, v in self.done.items()))
        lines += [f"  - {n}" for n in self.notes]
        return "\n".join(lines)

    def __repr__(self) -> str:
        (rt, rm), (ct, cm) = self.rows["requests"], self.rows["cost_usd"]
        most = "no bound" if rm is None else f"{rm:,.0f}"
        cost = "no bound" if cm is None else f"${cm:,.4f}"
        return f"RunEstimate(requests ~{rt:,.0f} (at most {most}), cost ~${ct:,.4f} (at most {cost}))"

    def _repr_html_(self) -> str:
        return f"<pre>{self.__str__()}</pre>"


def distinct_prompts(names, memory: int, orders: int | None = None) -> int:
    """Distinct prompts of one template and model: memory states of length 0..H (``sum_k
    W^(2k)``) times the name orders shown (``W!``, or ``orders``)."""
    W = len(names)
    return sum((W * W) ** k for k in range(memory + 1)) * (math.factorial(W) if orders is None else orders)


def _prompt_tokens(s: GameSettings, tpl: PromptTemplate, memory_len: int) -> float:
    """Estimated tokens of a prompt with ``memory_len`` entries (half successes, half failures)."""
    a, b = s.names[0], s.names[1]
    mem = [(a, a) if k % 2 == 0 else (a, b) for k in range(memory_len)]
    p = tpl.render(mem, tuple(s.names), payoffs=s.payoffs)
    tail = p.prefill if s.prefill else None
    text = "".join(m["content"] for m in p.messages(tail)) if s.wrap == "chat" else p.text(s.wrap, tail)
    return len(text.encode("utf-8")) / BYTES_PER_TOKEN


def estimate_requests(s: GameSettings, tpl: PromptTemplate, *, requests: tuple, prompt_tokens: float,
                      what: str, prices: dict, notes=(), done=None, completion_per_request=None) -> RunEstimate:
    """A :class:`RunEstimate` from request counts ``(typical, at_most)`` (``None``: no bound)
    and the estimated prompt tokens per request."""
    per_c = completion_per_request if completion_per_request is not None else (1 if s.mode == "exact" else s.max_tokens)
    pi = max(p[0] for p in prices.values())
    po = max(p[1] for p in prices.values())

    def tok(n, per):
        return None if n is None else n * per

    pt = (tok(requests[0], prompt_tokens), tok(requests[1], prompt_tokens))
    ct = (tok(requests[0], per_c), tok(requests[1], per_c))
    cost = tuple(None if a is None else (a * pi + b * po) / 1e6 for a, b in zip(pt, ct))
    rows = {"requests": requests, "prompt_tokens": pt, "completion_tokens": ct, "cost_usd": cost}
    notes = tuple(notes) + (
        f"tokens: each prompt rendered from the template '{tpl.name}' and counted in UTF-8 bytes / {BYTES_PER_TOKEN:g} "
        f"(about {prompt_tokens:,.0f} tokens per request); completion: {per_c} token(s) per request",
        "cost at the highest price of any group" if len(prices) > 1 else "cost = tokens x the prices above",
    )
    return RunEstimate(what=what, rows=rows, prices=prices, notes=notes, done=done)


def estimate_game(n_agents: int, memory: int, names, *, max_interactions: int, groups=None,
                  endpoint: EndpointConfig | None = None, out=None, **kwargs) -> RunEstimate:
    """Expected requests, tokens and cost of :func:`run_game` with the same arguments, computed
    from the design and the prompts; nothing is sent and nothing is written (``--dry-run``).

    Returns
    -------
    RunEstimate

    Notes
    -----
    Deciding agents make ``2 (N - K) / N`` LLM decisions per interaction (committed agents make
    none). Sample mode: one request per decision typically, ``1 + max_reasks`` at most
    (unbounded re-asks have no bound). Exact mode: at most one request per distinct prompt
    (:func:`distinct_prompts` per group model and template; single-token names assumed, a
    multi-token name adds requests). A directory holding part of the run reports what its
    journal already spent.
    """
    endpoint = endpoint if endpoint is not None else EndpointConfig.from_env()
    unknown = sorted(set(kwargs) - set(inspect.signature(arun_game).parameters))
    if unknown:
        raise TypeError(f"unexpected keyword argument(s) {unknown}")
    mk = {k: v for k, v in kwargs.items() if k in inspect.signature(make_settings).parameters}
    s, tpl, _ = make_settings(n_agents, memory, names, max_interactions=max_interactions,
                              embedded=endpoint.embedded, **mk)
    stored_groups, specs = make_groups(groups, s, tpl, embedded=endpoint.embedded, n_agents=int(n_agents))
    deciding = (s.n_agents - s.committed) / s.n_agents
    inter = (s.runs * expected_interactions(s), s.runs * s.max_interactions)
    dec = tuple(2 * deciding * x for x in inter)
    tpls = {(g.template, g.model, g.base_url): (load_template(g.template) if g.template != tpl.name else tpl)
            for g in specs} or {("run", None, None): tpl}
    ptok = float(np.mean([_prompt_tokens(s, t, s.memory) for t in tpls.values()]))
    if s.mode == "exact":
        bound = distinct_prompts(s.names, s.memory) * len(tpls)
        reqs = (min(dec[0], bound), min(dec[1], bound))
        how = [f"exact mode: at most one request per distinct prompt ({bound:,} = memory states x name orders"
               f"{' x group templates/models' if len(tpls) > 1 else ''}); converging populations need far fewer"]
    else:
        extra = None if s.max_reasks == UNBOUNDED else 1 + int(s.max_reasks)
        reqs = (dec[0], None if extra is None else dec[1] * extra)
        how = ["sample mode: one request per decision; at most " + (f"{extra} (re-asks)" if extra else
                                                                      "no bound (re-asks until a name appears)")]
    how.insert(0, f"typical: {expected_interactions(s):,.0f} interactions per run "
                  f"({'the cap' if s.stop in ('max', 'flip') else '12 N: 9 population rounds plus the 3N streak'}); "
                  f"at most: the cap of {s.max_interactions:,}")
    prices = _group_prices(s, endpoint, specs)
    model = "embedded SmolLM2-135M-Instruct" if endpoint.embedded else (endpoint.model or "the endpoint's first model")
    what = (f"{s.runs} run(s) x up to {s.max_interactions:,} interactions, N = {s.n_agents} "
            f"({s.n_agents - s.committed} deciding), H = {s.memory}, names {','.join(s.names)}, {s.mode} mode, "
            f"{model}" + (f", {len(specs)} groups" if specs else ""))
    done = None
    if out is not None and (Path(out) / JOURNAL_FILE).exists():
        from .journal import read_journal

        recs = read_journal(Path(out) / JOURNAL_FILE)
        calls = [r for r in recs if r.get("ev") == "call"]
        done = {"interactions": sum(1 for r in recs if r.get("ev") == "int"), "requests": len(calls),
                "tokens": int(sum((r.get("ptok") or 0) + (r.get("ctok") or 0) for r in calls))}
    rows = {"interactions": inter, "llm_decisions": dec}
    est = estimate_requests(s, tpl, requests=reqs, prompt_tokens=ptok, what=what, prices=prices, notes=how, done=done)
    return RunEstimate(what=est.what, rows={**rows, **est.rows}, prices=est.prices, notes=est.notes, done=done)


# ----------------------------------------------------------------------------- public API
async def arun_game(
    n_agents: int,
    memory: int,
    names,
    *,
    max_interactions: int,
    runs: int = 1,
    mode: str = "sample",
    committed: int = 0,
    committed_name: str | None = None,
    initial: str = "empty",
    stop: str = "streak",
    graph=None,
    template="main",
    payoffs=(100, -50),
    temperature: float = 0.5,
    top_k: int | None = 10,
    max_tokens: int = 6,
    top_logprobs: int = 20,
    max_reasks: int = 2,
    prefill: bool | None = None,
    multi_token: str = "expand",
    case_sensitive: bool = False,
    wrap: str = "chat",
    parse: str = "normlab",
    top_p: float | None = 1.0,
    min_p: float | None = 0.0,
    name_order: str = "auto",
    committed_placement: str = "last",
    committed_mode: str = "swap",
    groups=None,
    endpoint: EndpointConfig | None = None,
    out=None,
    cache=None,
    progress: bool = True,
    fsync_interval: float | None = 1.0,
    rng=None,
) -> LLMRunResult:
    """Coroutine version of :func:`run_game` (same arguments); use it with ``await`` in async code."""
    t_start = time.perf_counter()
    if endpoint is None:
        endpoint = EndpointConfig.from_env()
    if not isinstance(endpoint, EndpointConfig):
        raise TypeError(f"endpoint must be an EndpointConfig or None; got {type(endpoint).__name__}")
    if endpoint.embedded and endpoint.model is not None:
        raise ValueError("a model name was given without a base URL; pass base_url too (the embedded server only serves SmolLM2)")
    s, tpl, nbrs = make_settings(
        n_agents, memory, names, max_interactions=max_interactions, runs=runs, mode=mode, committed=committed,
        committed_name=committed_name, initial=initial, stop=stop, graph=graph, template=template,
        payoffs=payoffs, temperature=temperature, top_k=top_k, max_tokens=max_tokens, top_logprobs=top_logprobs,
        max_reasks=max_reasks, prefill=prefill, multi_token=multi_token, case_sensitive=case_sensitive,
        embedded=endpoint.embedded, wrap=wrap, parse=parse, top_p=top_p, min_p=min_p, name_order=name_order,
        committed_placement=committed_placement, committed_mode=committed_mode,
    )
    stored_groups, group_specs = make_groups(groups, s, tpl, embedded=endpoint.embedded, n_agents=int(n_agents))
    if stored_groups:
        s = GameSettings(**{**s.__dict__, "groups": stored_groups})
    requested_seed = None if rng is None else _seed_list(as_seed_sequence(rng))
    imported = load_cache(cache)
    directory = Path(out) if out is not None else None
    # the directory lock is taken before the settings are read or written (two runs started
    # together on one new directory would otherwise mix their settings and journals)
    with DirectoryLock(directory) if directory is not None else contextlib.nullcontext():
        return await _arun_locked(s, tpl, nbrs, endpoint, directory, requested_seed, imported, fsync_interval,
                                  progress, t_start, group_specs)


async def _arun_locked(s, tpl, nbrs, endpoint, directory, requested_seed, imported, fsync_interval, progress,
                       t_start, groups=None):
    stored = None
    if directory is not None:
        if directory.exists() and not directory.is_dir():
            raise ValueError(f"--out {directory} exists and is not a directory")
        stored = read_settings(directory) if directory.exists() else None
        if stored is None and directory.exists() and any(p.name != LOCK_FILE for p in directory.iterdir()):
            raise ValueError(f"output directory {directory} is not empty and holds no normlab LLM run; "
                             "choose an empty or new directory")
        if stored is not None:
            st = stored["settings"]
            req = s.to_dict()
            free = list(_RESUMABLE_FREE)
            if requested_seed is not None:
                req["seed"] = list(requested_seed)
                free.remove("seed")
            if endpoint.model is not None:
                req["model"] = endpoint.model
                free.remove("model")
            diffs = _compare(st, req, free)
            if diffs:
                raise ValueError(
                    f"{directory} holds a run with different settings ({'; '.join(diffs)}); "
                    "resume it with the same settings or use another --out directory"
                )
            s = GameSettings(**{**s.__dict__, "seed": tuple(st["seed"]), "model": st["model"]})
    journal = Journal(directory / JOURNAL_FILE if directory is not None else None, fsync_interval=fsync_interval)
    inter, ended = _runs_from_journal(journal.records, s.runs, s)
    replayed = sum(len(v) for v in inter.values())
    prices = _group_prices(s, endpoint, groups)
    if stored is not None and len(ended) == s.runs:  # nothing left to play
        res = build_result(s, journal, directory, prices, elapsed=time.perf_counter() - t_start, replayed=replayed)
        _write_tables(res)
        return res
    tpls = [tpl] + [load_template(g.template) if g.template != tpl.name else tpl for g in (groups or [])]
    new_tokens = 1 if s.mode == "exact" else max([s.max_tokens] + [g.max_tokens for g in groups or []])
    pbytes = max(longest_prompt_bytes(s, t) for t in tpls)
    async with contextlib.AsyncExitStack() as stack:
        client = await stack.enter_async_context(open_endpoint(endpoint, prompt_bytes=pbytes,
                                                               max_new_tokens=new_tokens))
        agents = await _open_groups(stack, s, tpl, client, endpoint, groups, pbytes, new_tokens)
        if stored is not None and s.model != client.model:
            raise ValueError(f"{directory} was run with model {s.model!r} but the endpoint serves {client.model!r}")
        if stored is None:
            ss = np.random.SeedSequence() if requested_seed is None else None
            seed = requested_seed if requested_seed is not None else _seed_list(ss)
            s = GameSettings(**{**s.__dict__, "seed": tuple(seed), "model": client.model})
            if directory is not None:
                write_settings(directory, s.to_dict(), s.digest)
        pbar = None
        if progress:
            pbar = _Progress(s, {k: len(v) for k, v in inter.items()}, {k: len(inter[k]) for k in ended})
        game = _Game(s, tpl, nbrs, client, journal.open(), pbar, imported=imported, groups=agents)
        journal.forget()  # from here on records live on disk only: memory stays flat
        outcome = "error"
        try:
            await asyncio.gather(*(game.play(k, inter[k], k in ended) for k in range(s.runs)))
            outcome = "stopped: budget" if game.stopped == "budget" else "finished"
        except (KeyboardInterrupt, asyncio.CancelledError):
            outcome = "error: interrupted"
            raise
        except BaseException as exc:
            outcome = f"error: {type(exc).__name__}: {str(exc)[:200]}"
            raise
        finally:
            journal.close()
            if pbar is not None:
                pbar.close()
            if directory is not None and outcome.startswith("error"):
                with contextlib.suppress(OSError):
                    from .journal import finish_session

                    finish_session(directory, outcome=outcome)
    res = build_result(s, journal, directory, prices, elapsed=time.perf_counter() - t_start, replayed=replayed,
                       stopped=game.stopped)
    _write_tables(res, outcome)
    _warn_no_prefill(res)
    return res


async def _open_groups(stack, s, tpl, client, endpoint, groups, pbytes, new_tokens) -> list | None:
    """One ``(_Agents, first agent, size)`` per group; groups on another endpoint, model or
    prices get their own client (one per distinct endpoint), all sharing the run's spending cap."""
    if not groups:
        return None
    import dataclasses

    clients, out = {}, []
    for g in groups:
        if g.base_url is None and g.model in (None, client.model) and g.price_input is None and g.price_output is None:
            c = client
        else:
            cfg = dataclasses.replace(
                endpoint, base_url=g.base_url or endpoint.base_url, model=g.model,
                price_input=endpoint.price_input if g.price_input is None else g.price_input,
                price_output=endpoint.price_output if g.price_output is None else g.price_output)
            key = (cfg.base_url, cfg.model, cfg.price_input, cfg.price_output)
            if key not in clients:
                if cfg.embedded:  # the embedded model at other prices: the same server
                    c = type(client)(client.base_url, client.model, cfg)
                    await stack.enter_async_context(c)
                    c.info = client.info
                else:
                    c = await stack.enter_async_context(open_endpoint(cfg, prompt_bytes=pbytes,
                                                                      max_new_tokens=new_tokens))
                clients[key] = c
            c = clients[key]
        c.cap = client.cap  # one budget for the whole population
        gtpl = tpl if g.template == tpl.name and g.template_digest == tpl.digest else load_template(g.template)
        out.append((_Agents(g.name, gtpl, c, g.temperature, g.top_k, g.top_p, g.min_p, g.max_tokens),
                    g.first_agent, g.size))
    return out


def _group_prices(s: GameSettings, endpoint: EndpointConfig, groups) -> dict:
    """``{group label: (price_input, price_output)}`` (``"all"`` for a homogeneous population)."""
    base = (endpoint.price_input, endpoint.price_output)
    if not groups:
        return {"all": base}
    return {g.name: (base[0] if g.price_input is None else g.price_input,
                     base[1] if g.price_output is None else g.price_output) for g in groups}


def longest_prompt_bytes(s: GameSettings, tpl: PromptTemplate) -> int:
    """UTF-8 bytes of the longest prompt these settings can send with ``tpl`` (an upper bound).

    A full memory of ``H`` entries with the longest names, as successes and as failures (the
    score with most digits), the prefill and a partial name (multi-token expansions); for a
    raw wrap the whole text with its header tokens. Sizes the embedded server's KV cache
    (:func:`normlab.llm_runs.backend.ctx_for_prompt`) and feeds ``--dry-run``'s estimate.
    """
    by_len = sorted(s.names, key=lambda n: len(n.encode()), reverse=True)
    a, b = by_len[0], by_len[1]
    most = 0
    for mem in ([(a, a)] * s.memory, [(a, b)] * s.memory):
        p = tpl.render(mem, tuple(s.names), payoffs=s.payoffs)
        tail = p.prefill + a
        if s.wrap == "chat":
            text = "".join(m["content"] for m in p.messages(tail))
        else:
            text = p.text(s.wrap, tail)
        most = max(most, len(text.encode("utf-8")))
    return most


def _warn_no_prefill(res: LLMRunResult) -> None:
    d = res.log.decisions
    d = d[~d["committed"]]
    if res.settings.get("mode") == "exact" and len(d) >= 4 and (~d["valid"]).mean() > 0.5:
        import warnings

        warnings.warn(
            f"{(~d['valid']).mean():.0%} of the exact-mode decisions found no pool name among the top-logprob "
            "tokens. Does the endpoint continue a final assistant message (the prefill {'value': ')? llama.cpp "
            "does; vLLM needs EndpointConfig(extra_body={'continue_final_message': True, "
            "'add_generation_prompt': False}); OpenAI's hosted API does not (use mode='sample').",
            RuntimeWarning, stacklevel=3,
        )


#: What each table of a run directory holds (recorded in its manifest).
RUN_TABLES = {
    "decisions.parquet": "one row per agent decision, with the memory state before it (normlab.schema.GameLog)",
    "runs.parquet": "one row per run: outcome, stop reason, calls, tokens, cost",
    "calls.parquet": "one row per LLM request: prompt hash, answer, top logprobs, tokens, latency, retries",
    "ledger.parquet": "one row per LLM request: tokens, cost and their running totals (the token/cost ledger)",
    "journal.jsonl": "append-only record of every request and interaction (resumption replays it)",
    "settings.json": "the run's settings and their hash (a rerun must match them to resume)",
}


def _write_tables(res: LLMRunResult, outcome: str | None = None) -> None:
    if res.directory is None:
        return
    from .journal import finish_session

    res.log.to_parquet(res.directory)
    res.calls.to_parquet(res.directory / "calls.parquet", index=False)
    res.ledger.to_parquet(res.directory / "ledger.parquet", index=False)
    if outcome is not None:
        finish_session(res.directory, outcome=outcome, tables=RUN_TABLES, totals=ledger_totals(res.ledger))


def run_game(n_agents: int, memory: int, names, *, max_interactions: int, **kwargs) -> LLMRunResult:
    """Play (or resume) replicate runs of the LLM naming game of Flint Ashery et al. (2025).

    Parameters
    ----------
    n_agents : int
        Population size ``N`` (>= 2).
    memory : int
        Memory length ``H`` (>= 1): each agent's prompt shows its last ``H`` interactions.
    names : str or sequence of str
        Name pool, e.g. ``"Q,M"`` (names may not contain ``,`` or ``;``).
    max_interactions : int
        Cap on interactions per run (a population round is ``N`` interactions).
    runs : int, optional
        Replicate runs (played concurrently; run ``k`` uses child ``k`` of ``rng``).
    mode : {"sample", "exact"}, optional
        ``"sample"``: the paper's protocol -- generate (temperature, top-k, top-p, min-p,
        ``max_tokens``), parse the name, re-ask on an unparseable answer (see ``max_reasks``);
        a decision still unparseable is recorded as invalid (never a random substitute). ``"exact"``: read the next-token
        distribution over the names at the answer position (prefill ``{'value': '``) from the
        logprobs, apply the sampler's temperature and top-k, renormalise over the names (the
        covered probability mass is recorded) and sample locally with the run's seeded rng;
        distributions are cached per distinct prompt, so a run costs at most one request per
        distinct (memory state, name order) (a few more for multi-token names).
    committed : int, optional
        Number ``K`` of committed agents (placed by ``committed_placement``); they always play
        ``committed_name`` and make no LLM call.
    committed_name : str, optional
        Default: the last name of the pool.
    initial : str, optional
        ``"empty"`` memories, ``"consensus:<name>"`` (every uncommitted memory holds ``H``
        successful plays of ``<name>``: the authors' integer ``initial``), or ``"random"`` (the
        authors' ``initial = 'random'``: ``H`` entries per uncommitted agent, own and partner's
        name each drawn uniformly from the first two pool names; seeded per run, see
        :func:`run_setup`).
    stop : {"streak", "success95", "consensus", "flip", "max"}, optional
        ``"streak"``: ``3N`` consecutive successes (the published runs: 72 for N = 24);
        ``"success95"``: 95% of the last ``3N`` interactions succeeded; ``"consensus"``: every
        uncommitted memory holds ``H`` successful plays of one name (the committed name, if
        any); ``"flip"``: the committed name made >= 2.849/3 of the uncommitted agents' valid
        productions over the last 3 population rounds (checked at round ends); ``"max"``: run
        to the cap. The cap ``max_interactions`` always applies. These are the rules of
        :mod:`normlab.theory` (same names and definitions).
    graph : networkx.Graph, optional
        Interaction network (nodes in ``list(graph.nodes)`` order = agent ids); default complete.
    template : str, path, dict or PromptTemplate, optional
        ``"main"`` (default), ``"bullet"``, ``"narrative"`` or a custom JSON template.
    payoffs : (float, float), optional
        Success / failure payoffs shown in the prompt (100 / -50).
    temperature, top_k, max_tokens : optional
        Sampling settings (Table S4: 0.5, 10, 6). ``top_k=None`` omits it (OpenAI's own API).
    top_logprobs : int, optional
        Alternatives requested per position in exact mode (default 20).
    max_reasks : int or "unbounded", optional
        Sample mode: extra requests after an unparseable answer. ``"unbounded"`` is the paper's
        protocol (the authors' ``get_response`` re-asks until a pool name appears), guarded by
        :data:`REASK_SAFETY_LIMIT` requests per decision (then :class:`ReaskLimitError`, with
        the completed interactions kept in the journal). The default cap 2 (then an invalid
        decision) is normlab's choice, not the paper's. Re-asks are counted (``reasks`` in the
        decisions and runs tables and the summary).
    prefill : bool, optional
        Send the answer opening ``{'value': '`` as a final assistant message to be continued.
        Required in exact mode; default in sample mode: on for the embedded server (SmolLM2
        ignores the format otherwise), off for remote endpoints (the paper's protocol).
    multi_token : {"expand", "first_token"}, optional
        Exact-mode scoring of multi-token names (:func:`normlab.llm_runs.exact.name_distribution`).
    case_sensitive : bool, optional
        Match answers to names exactly (default: case-insensitively when unambiguous).
    wrap : {"chat", "raw-llama3", "raw-llama2"}, optional
        ``"chat"``: system and user messages to ``/chat/completions`` (the server's chat
        template adds its own tokens; Llama-3.1's adds a "Cutting Knowledge Date" block).
        ``"raw-llama3"`` / ``"raw-llama2"``: the exact text of
        :meth:`~normlab.llm_runs.prompts.Prompt.text` -- the authors' hand-written header
        tokens and whitespace -- to ``/completions`` (the authors' protocol).
    parse : {"normlab", "authors"}, optional
        Sample mode: how a name is read from an answer. ``"normlab"`` (default):
        :func:`~normlab.llm_runs.prompts.parse_answer` (the answer field must hold exactly one
        pool name). ``"authors"``: their ``get_response`` -- any pool name between single
        quotes anywhere in the generation (:func:`~normlab.llm_runs.prompts.parse_answer_authors`).
        The paper's full sample protocol is ``wrap="raw-llama3", max_reasks="unbounded",
        parse="authors"``.
    top_p, min_p : float or None, optional
        Sent in sample mode (default neutral: 1 and 0, so servers such as llama.cpp do not
        apply their own top-p 0.95 / min-p 0.05, which can remove names of small probability);
        ``None`` omits the field. Exact mode needs them neutral. The effective sampler settings
        are stored in ``settings.json`` and the runs table (``sampler``).
    name_order : {"auto", "per_agent", "shared"}, optional
        ``per_agent``: each player sees its own shuffled name list (the authors' ``converge``);
        ``shared``: one shuffle per interaction shown to both players (the authors'
        ``simulate_CM``, which played all published committed-minority and stability runs);
        ``auto`` (default): shared when ``initial`` is not ``"empty"``, as the authors' code.
    committed_placement : {"last", "random"}, optional
        Committed agents are the last ``K`` ids (default, as the theory simulators; normlab's
        choice) or ``K`` ids drawn per run from the seed (the authors' ``swap_committed``). On
        the complete graph both give the same distribution of outcomes.
    committed_mode : {"swap", "inject"}, optional
        ``swap`` (default): ``K`` of the ``n_agents`` are committed (all published runs);
        ``inject``: ``K`` committed agents are added (population ``n_agents + K``, the authors'
        ``version = 'inject'``).
    groups : sequence of str or dict, optional
        A mixed population (:func:`make_groups`): one entry per group in agent order, e.g.
        ``["12:model=A", "12:model=B,temperature=0.7"]`` or ``[{"size": 12, "model": "A"}, ...]``;
        keys ``name``, ``model``, ``base_url``, ``template``, ``temperature``, ``top_k``,
        ``top_p``, ``min_p``, ``max_tokens``, ``price_input``, ``price_output`` (the rest as the
        run). Sizes add up to ``n_agents``. Each decision records its ``group`` and ``model``;
        all groups share one spending cap.
    endpoint : EndpointConfig, optional
        Endpoint, retries, concurrency, prices and spending caps (``budget_tokens``,
        ``budget_usd``: the session stops cleanly before a request could pass them, counting
        what earlier sessions in ``out`` spent; the result's ``stopped`` is then ``"budget"``
        and the same call with a larger cap continues); default from the environment, else the
        embedded server (its KV cache sized to the longest prompt these settings can produce).
    out : str or pathlib.Path, optional
        Run directory: ``settings.json``, ``journal.jsonl`` (append-only, flushed per record),
        ``manifest.json`` (settings, environment, endpoints, one entry per session) and
        ``decisions.parquet``, ``runs.parquet``, ``calls.parquet``, ``ledger.parquet``. A directory holding an
        unfinished run with the same settings is resumed; different settings are refused.
        ``None``: nothing is written (no resumption).
    cache : path or sequence of paths, optional
        Exact mode: run or probe directories (e.g. a :func:`~normlab.llm_runs.strategy_table`
        with the same template, model and ``H``) whose journaled next-token distributions are
        reused instead of asking the endpoint again; each reused distribution is copied into
        this run's journal. Endpoints such as llama.cpp return different logprobs for the same
        prompt when other requests share its batch (the embedded server is therefore sent one
        request at a time, and reproduces a run from its seed; a remote server may not), so a
        run is reproduced exactly from its seed plus the distributions it used -- this is how to
        share them.
    progress : bool, optional
        tqdm progress bar in agent decisions, against an estimate of the decisions the runs need
        (never lowered) with the time left at the recent pace (:class:`_Progress`).
    fsync_interval : float or None, optional
        Every journal record is flushed to the OS at once (a killed process loses nothing but
        the interaction in flight); interaction records are also fsynced at most every this
        many seconds (default 1; ``0``: after every interaction; ``None``: only at the end),
        which bounds what a machine crash can lose.
    rng : None, int, SeedSequence or Generator, optional
        Seed. Interaction ``t`` of run ``k`` draws its pair, name orders, local uniforms and
        per-call sampling seeds from ``SeedSequence(entropy, spawn_key=(..., k, t))`` only, so
        runs are identical whatever the concurrency and a resumed run equals an uninterrupted
        one. ``None``: fresh entropy (stored in ``settings.json``).

    Returns
    -------
    LLMRunResult
        ``.log`` is a :class:`normlab.schema.GameLog` (``kind`` ``baseline`` / ``swap`` /
        ``evolved``; ``model`` the endpoint's model name).

    Raises
    ------
    ValueError, TypeError
        Invalid arguments, or ``out`` holding a run with different settings (before any work).
    EndpointError
        The endpoint is down or keeps failing; completed interactions stay in the journal.

    Notes
    -----
    Invalid answers are stored with ``name=None``; such an interaction is a failure and is not
    written into either memory (as :func:`normlab.schema.rebuild_decisions`). In exact mode the
    logprobs are assumed to be the model's raw log-probabilities (llama.cpp, vLLM default) and
    the temperature / top-k transform is applied locally.

    References
    ----------
    Flint Ashery, Aiello, Baronchelli, Sci. Adv. 11, eadu9368 (2025): Experimental Setup;
    Prompting; Materials and Methods (Committed Minorities: 95% of the last 3N interactions);
    Table S4 (temperature 0.5, top-k 10, max tokens 6). AI-norms code (MIT):
    ``data-era/simulation_module.ipynb`` (``get_rules``, ``get_prompt``, ``get_response``,
    ``converge``, ``simulate_CM``, ``set_initial_state``, ``swap_committed``, ``add_committed``).

    Examples
    --------
    >>> res = run_game(24, 5, "Q,M", max_interactions=2000, mode="exact", rng=1, out="runs/qm")  # doctest: +SKIP
    >>> res.log.per_round()  # doctest: +SKIP
    """
    from ._sync import run_sync

    return run_sync(lambda: arun_game(n_agents, memory, names, max_interactions=max_interactions, **kwargs))
