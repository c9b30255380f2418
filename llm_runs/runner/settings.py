"""Settings of an LLM naming-game run: what determines it (hashed to guard resumption), their
validation before any work (:func:`make_settings`), the seed and the longest prompt they can send."""

from __future__ import annotations

import json
import math
import numbers
from dataclasses import asdict, dataclass

import numpy as np

from normlab._rng import seed_list  # noqa: F401 (a name of the runner's: normlab.llm_runs.runner.seed_list)
from normlab._validate import check_int, max_agents, memory_cap_bytes
from normlab.schema import normalise_name, validate_names
from normlab.theory import graph_to_csr

from ..journal import compare_settings  # noqa: F401 (a name of the runner's: normlab.llm_runs.runner.compare_settings)
from .exact import MULTI_TOKEN_MODES
from .prompts import PARSERS, PromptTemplate, check_wrap, load_template, sha256_hex

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
    theory's :func:`normlab.theory.graph_to_csr`, so both layers accept the same graphs.
    """
    if graph is None:
        return None, None
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


#: Bytes an agent that plays costs in a run's state (its memory: a deque, its dict entry, ``H``
#: remembered pairs), measured with tracemalloc: about 850 B at ``H = 3``.
AGENT_STATE_BYTES, ENTRY_BYTES = 900, 64


def population_bytes(n_agents: int, memory: int, committed: int, runs: int, max_interactions: int,
                     initial: str, committed_placement: str) -> int:
    """Bytes of population state a game may hold at once, all runs together: up front, the
    committed ids (about 100 B each), ``initial='random'`` memories (``2 H`` bytes per
    uncommitted agent) and a random placement's draw (8 B per agent); during play, the state of
    the agents that play (at most ``min(N, 2 T)`` per run, :data:`AGENT_STATE_BYTES` +
    ``H`` x :data:`ENTRY_BYTES` each). Nothing else grows with ``N`` (state is made for the
    agents that play)."""
    per_run = 100 * committed + min(n_agents, 2 * max_interactions) * (AGENT_STATE_BYTES + ENTRY_BYTES * memory)
    if initial == "random":
        per_run += 2 * memory * (n_agents - committed)
    if committed and committed_placement == "random":
        per_run += 8 * n_agents
    return runs * per_run


def check_population_size(n_agents: int, memory: int, committed: int, runs: int, max_interactions: int,
                          initial: str, committed_placement: str) -> None:
    """One-line ``ValueError`` when ``n_agents`` passes :func:`normlab._validate.max_agents` (its run
    table could not be analysed here) or :func:`population_bytes` passes
    :func:`normlab._validate.memory_cap_bytes`."""
    if n_agents > max_agents():
        raise ValueError(f"n_agents = {n_agents:,} is more than the {max_agents():,} agents this machine allows (8 bytes "
                         "per agent within half its memory, what an analysis of the run needs): use fewer agents")
    need = population_bytes(n_agents, memory, committed, runs, max_interactions, initial, committed_placement)
    cap = memory_cap_bytes()
    if need > cap:
        raise ValueError(
            f"n_agents = {n_agents:,} (memory {memory}, committed {committed:,}, runs {runs}, max_interactions "
            f"{max_interactions:,}, initial {initial!r}) needs about {need / 2**30:,.1f} GiB of population state, more "
            f"than the {cap / 2**30:,.1f} GiB allowed (half this machine's memory): use fewer agents, committed "
            "agents, runs or interactions")


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
    elif (committed_name := normalise_name(committed_name, "committed name")) not in names:
        raise ValueError(f"committed name {committed_name!r} is not in the pool {list(names)}")
    if not committed:
        committed_name = None
    if not isinstance(initial, str):
        raise TypeError(f"initial must be 'empty', 'random' or 'consensus:<name>'; got {initial!r}")
    if initial.startswith("consensus:"):
        initial = "consensus:" + normalise_name(initial.split(":", 1)[1], "initial consensus name")
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
    check_population_size(n_agents, memory, committed, runs, max_interactions, initial, committed_placement)
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
