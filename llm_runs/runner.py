"""Play the naming game of seed 003 with LLM agents through an OpenAI-compatible endpoint.

Populations of ``N`` agents with memory ``H`` meet in random pairs (complete graph or any
networkx graph); both agents of a pair are prompted concurrently; every call and interaction is
journaled (append-only JSONL) so that a killed run resumes exactly; the output is a
:class:`normlab.schema.GameLog` saved as Parquet, in the same schema as the theory simulators.
"""

from __future__ import annotations

import asyncio
import contextlib
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

from .backend import EndpointConfig, EndpointError, open_endpoint
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
    model: str | None = None
    seed: tuple | None = None

    def to_dict(self) -> dict:
        d = asdict(self)
        for k, v in d.items():
            if isinstance(v, tuple):
                d[k] = list(v)
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
        ``invalid_reason``, ``raw_text``, ``latency_s``, ``prompt_tokens``, ``completion_tokens``)
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
    """

    log: GameLog
    calls: pd.DataFrame
    settings: dict
    directory: Path | None
    elapsed: float = 0.0
    replayed: int = 0

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
        if self.settings.get("committed"):
            out["flipped"] = [bool(x) for x in r["flipped"]]
        if self.directory is not None:
            out["directory"] = str(self.directory)
            out["log"] = str(self.directory / "decisions.parquet")
            out["runs_table"] = str(self.directory / "runs.parquet")
            out["calls_table"] = str(self.directory / "calls.parquet")
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


class _Game:
    def __init__(self, s: GameSettings, tpl: PromptTemplate, nbrs, client, journal: Journal, pbar=None,
                 imported: dict | None = None):
        self.s, self.tpl, self.nbrs, self.client, self.journal, self.pbar = s, tpl, nbrs, client, journal, pbar
        self.names = s.names
        self._setups: dict[int, tuple] = {}
        self.inflight: dict[str, asyncio.Future] = {}
        self.n_calls = sum(1 for r in journal.records if r.get("ev") == "call")
        self.ss = s.seed_sequence()
        self.cache: dict[str, list] = exact_cache_entries(journal.records)
        self.imported = imported or {}

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

    async def _top(self, prompt, partial, ctx) -> list:
        if self.s.wrap == "chat":
            msgs = prompt.messages(prompt.prefill + partial)
        else:
            msgs = prompt.text(self.s.wrap, prompt.prefill + partial)
        key = sha256_hex(json.dumps([self.client.model, msgs, self.s.top_logprobs], ensure_ascii=False), 32)
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
                    res = await self.client.chat(msgs, max_tokens=1, temperature=1.0, logprobs=True,
                                                 top_logprobs=self.s.top_logprobs)
                else:
                    res = await self.client.complete(msgs, max_tokens=1, temperature=1.0, logprobs=True,
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
                    f"{self.client.base_url} returned no top_logprobs; exact mode needs an endpoint that "
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
        prompt = self.tpl.render(list(memory), shown, payoffs=s.payoffs)
        ctx = {"run": run, "t": t, "agent": agent, "calls": 0, "lat": 0.0, "ptok": 0, "ctok": 0}
        side = {"shown": ",".join(shown), "ph": prompt.hash}
        if s.mode == "exact":
            nd = await name_distribution(
                self.names, lambda partial: self._top(prompt, partial, ctx), temperature=s.temperature,
                top_k=s.top_k, multi_token=s.multi_token, case_sensitive=s.case_sensitive,
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
            sampler = dict(max_tokens=s.max_tokens, temperature=s.temperature, top_k=s.top_k, top_p=s.top_p,
                           min_p=s.min_p, logprobs=True)
            attempt = 0
            for attempt in range(limit):
                if s.wrap == "chat":
                    res = await self.client.chat(prompt.messages(prompt.prefill if s.prefill else None),
                                                 seed=int(seed) + attempt, **sampler)
                else:
                    res = await self.client.complete(prompt.text(s.wrap, prompt.prefill if s.prefill else None),
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
                    parsed = parse_answer(text, self.names, answer_key=self.tpl.answer_key,
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
                try:
                    si, sj = await asyncio.gather(self.decide(run, t, i, mi, oi, u[0], seeds[0]),
                                                  self.decide(run, t, j, mj, oj, u[1], seeds[1]))
                except EndpointError as exc:
                    self.journal.write({"ev": "error", "run": run, "t": t, "message": str(exc)[:500]}, sync=True)
                    raise
                self.journal.write({"ev": "int", "run": run, "t": t, "i": i, "j": j, "s": [si, sj]}, sync=True)
                st.apply(i, j, si["name"], sj["name"])
                if self.pbar is not None:
                    self.pbar.update(1)
                    self.pbar.set_postfix(calls=self.n_calls, refresh=False)
                if st.reason is not None:
                    break
        if self.pbar is not None and st.t < self.s.max_interactions:
            self.pbar.total -= self.s.max_interactions - st.t
            self.pbar.refresh()
        self.journal.write({"ev": "end", "run": run, "n": st.t, "reason": st.reason}, sync=True)


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


def build_result(s: GameSettings, journal: Journal, directory: Path | None, client_prices=(0.0, 0.0),
                 *, elapsed=0.0, replayed=0) -> LLMRunResult:
    """Rebuild the tidy tables of all runs from the journal records."""
    records = journal.all_records()
    inter, ended = _runs_from_journal(records, s.runs)
    calls = [r for r in records if r.get("ev") == "call"]
    calls_by_run = {}
    for c in calls:
        calls_by_run.setdefault(c["run"], []).append(c)
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
            "cost_usd": (ptok * client_prices[0] + ctok * client_prices[1]) / 1e6,
            "memory_consensus": st._memory_consensus(), "flipped": bool(st.flipped), "flip_time": flip_t,
            "mean_latency_s": float(np.mean([c.get("lat", 0.0) for c in rc])) if rc else np.nan,
        })
    dec = pd.concat(decs, ignore_index=True)
    for c in ("names_shown", "prompt_hash", "invalid_reason", "raw_text", "probs"):
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
                        replayed=replayed)


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
    requested_seed = None if rng is None else _seed_list(as_seed_sequence(rng))
    imported = load_cache(cache)
    directory = Path(out) if out is not None else None
    # the directory lock is taken before the settings are read or written (two runs started
    # together on one new directory would otherwise mix their settings and journals)
    with DirectoryLock(directory) if directory is not None else contextlib.nullcontext():
        return await _arun_locked(s, tpl, nbrs, endpoint, directory, requested_seed, imported, fsync_interval,
                                  progress, t_start)


async def _arun_locked(s, tpl, nbrs, endpoint, directory, requested_seed, imported, fsync_interval, progress,
                       t_start):
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
    prices = (endpoint.price_input, endpoint.price_output)
    if stored is not None and len(ended) == s.runs:  # nothing left to play
        res = build_result(s, journal, directory, prices, elapsed=time.perf_counter() - t_start, replayed=replayed)
        _write_tables(res)
        return res
    async with open_endpoint(endpoint) as client:
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
            from tqdm.auto import tqdm

            pbar = tqdm(total=s.runs * s.max_interactions, initial=replayed, desc=f"llm-run ({s.mode})",
                        unit="int", leave=False, dynamic_ncols=True, mininterval=0.5)
            for k, v in inter.items():
                if k in ended:
                    pbar.total -= s.max_interactions - len(v)
        game = _Game(s, tpl, nbrs, client, journal.open(), pbar, imported=imported)
        journal.forget()  # from here on records live on disk only: memory stays flat
        try:
            await asyncio.gather(*(game.play(k, inter[k], k in ended) for k in range(s.runs)))
        finally:
            journal.close()
            if pbar is not None:
                pbar.close()
    res = build_result(s, journal, directory, prices, elapsed=time.perf_counter() - t_start, replayed=replayed)
    _write_tables(res)
    _warn_no_prefill(res)
    return res


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


def _write_tables(res: LLMRunResult) -> None:
    if res.directory is None:
        return
    res.log.to_parquet(res.directory)
    res.calls.to_parquet(res.directory / "calls.parquet", index=False)


def run_game(n_agents: int, memory: int, names, *, max_interactions: int, **kwargs) -> LLMRunResult:
    """Play (or resume) replicate runs of the LLM naming game of seed 003.

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
    endpoint : EndpointConfig, optional
        Endpoint, retries, concurrency; default from the environment, else the embedded server.
    out : str or pathlib.Path, optional
        Run directory: ``settings.json``, ``journal.jsonl`` (append-only, flushed per record)
        and ``decisions.parquet``, ``runs.parquet``, ``calls.parquet``. A directory holding an
        unfinished run with the same settings is resumed; different settings are refused.
        ``None``: nothing is written (no resumption).
    cache : path or sequence of paths, optional
        Exact mode: run or probe directories (e.g. a :func:`~normlab.llm_runs.strategy_table`
        with the same template, model and ``H``) whose journaled next-token distributions are
        reused instead of asking the endpoint again; each reused distribution is copied into
        this run's journal. Endpoints such as llama.cpp return slightly different logprobs for
        the same prompt from call to call (batching, prompt cache), so a run is reproduced
        exactly from its seed plus the distributions it used -- this is how to share them.
    progress : bool, optional
        tqdm progress bar.
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
