"""Settings of an LLM naming-game run: what determines it (hashed to guard resumption), their
validation before any work, the seed and the longest prompt they can send.

A run is a :class:`~normlab.theory.spec.GameSpec` (who plays, how long), a
:class:`~normlab.llm_runs.runner.sampling.Sampling` (the prompt and the sampler) and a
:class:`~normlab.llm_runs.runner.mode.DecisionMode`; :func:`game_settings` makes the flat
:class:`GameSettings` record of them (its ``to_dict()`` and ``digest`` guard resumption), and
:func:`make_settings` is the same from the keywords of :func:`~normlab.llm_runs.run_game`, checked in
the order of :data:`_KEYWORD_CHECKS` (the first bad keyword is the one reported).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass

import numpy as np

from normlab._rng import seed_list  # noqa: F401 (a name of the runner's: normlab.llm_runs.runner.seed_list)
from normlab._validate import Check, Int, Options, Relation, check_int, max_agents, memory_cap_bytes, validate_params
from normlab.schema import normalise_name, validate_names
from normlab.theory.spec import GameSpec, Network, RunLength

from ..journal import compare_settings  # noqa: F401 (a name of the runner's: normlab.llm_runs.runner.compare_settings)
from .mode import EXACT, MODES, SAMPLE, DecisionMode, mode_of  # noqa: F401 (MODES: a name of the runner's)
from .prompts import PromptTemplate, sha256_hex
from .sampling import SAMPLING_KEYS, UNBOUNDED, Sampling, _check_float, _check_unit, check_reasks  # noqa: F401

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

    @property
    def decision(self) -> DecisionMode:
        """The run's :class:`~normlab.llm_runs.runner.mode.DecisionMode` (``mode`` as stored: its name)."""
        return mode_of(self.mode)

    def sampler(self) -> dict:
        """The effective sampler settings sent in sample mode (``None``: omitted)."""
        return {"temperature": self.temperature, "top_k": self.top_k, "top_p": self.top_p, "min_p": self.min_p,
                "max_tokens": self.max_tokens}

    def seed_sequence(self) -> np.random.SeedSequence:
        entropy, *key = self.seed
        return np.random.SeedSequence(int(entropy), spawn_key=tuple(int(x) for x in key))


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


# ----------------------------------------------------------------------------- checks, in the runner's order
#: The runner's name orders as :class:`~normlab.theory.spec.GameSpec` names them (and back).
_SPEC_ORDER = {"per_agent": "independent", "shared": "shared"}
_RUN_ORDER = {v: k for k, v in _SPEC_ORDER.items()}


def _inject(value, name, v):
    """``committed_mode='inject'`` adds the committed agents (a count) as the last ids of a complete graph."""
    if v["committed_mode"] == "inject":
        check_int(v["committed"], "committed", 0)
        if v["committed_placement"] != "last":
            raise ValueError("committed_mode='inject' adds the committed agents as the last K ids; "
                             "committed_placement must be 'last'")
        if v["graph"] is not None:
            raise ValueError("committed_mode='inject' adds agents and needs the complete graph (graph=None)")
    return value


def _population(v) -> int:
    """Agents in the population: ``n_agents``, plus the committed agents ``inject`` adds."""
    return v["n_agents"] + (int(v["committed"]) if v["committed_mode"] == "inject" else 0)


def _pool(value, name):
    names = validate_names(value)
    if len(names) < 2:
        raise ValueError(f"the name pool needs at least 2 names; got {list(names)}")
    for n in names:
        if any(c in n for c in "'\"{}<>\n\r\t"):
            raise ValueError(f"invalid name {n!r}: names shown in prompts may not contain quotes, braces, "
                             "angle brackets or line breaks (they would break the answer format)")
    return tuple(names)


def _committed(value, name, v):
    committed = check_int(value, "committed", 0)
    n_agents = v["n_agents"] + (committed if v["committed_mode"] == "inject" else 0)
    if committed >= n_agents:
        raise ValueError(f"committed must be < n_agents = {n_agents} (at least one agent must be uncommitted); got {committed}")
    return committed


def _committed_name(value, name, v):
    names, committed = v["names"], v["committed"]
    if value is None:
        value = names[-1] if committed else None
    elif (value := normalise_name(value, "committed name")) not in names:
        raise ValueError(f"committed name {value!r} is not in the pool {list(names)}")
    return value if committed else None


def _initial(value, name, v):
    if not isinstance(value, str):
        raise TypeError(f"initial must be 'empty', 'random' or 'consensus:<name>'; got {value!r}")
    if value.startswith("consensus:"):
        value = "consensus:" + normalise_name(value.split(":", 1)[1], "initial consensus name")
    if value not in ("empty", "random"):
        if not value.startswith("consensus:") or value.split(":", 1)[1] not in v["names"]:
            raise ValueError(f"initial must be 'empty', 'random' or 'consensus:<name>' with a pool name from "
                             f"{list(v['names'])}; got {value!r}")
    return value


def _stop(value, name, v):
    if value not in STOP_RULES:
        raise ValueError(f"stop must be one of {STOP_RULES}; got {value!r}")
    if value == "flip" and not v["committed"]:
        raise ValueError("stop='flip' needs committed agents (committed >= 1)")
    return value


def _exact_sampler(value, name, v):
    v["mode"].check_neutral(v["top_p"], v["min_p"])
    return value


def _exact_logprobs(value, name, v):
    v["mode"].check_logprobs(v["prefill"], v["top_k"], v["top_logprobs"])
    return value


def _population_size(value, name, v):
    check_population_size(_population(v), v["memory"], v["committed"], v["runs"], v["max_interactions"],
                          v["initial"], v["committed_placement"])
    return value


def _graph(value, name, v):
    """The interaction graph in its CSR form; validation (networkx type, node count, undirected, no
    self-loop, no isolated node) is the theory's :func:`normlab.theory.graph_to_csr`, so both
    layers accept the same graphs."""
    return Network.of(value, _population(v))


_S = Sampling._parameter_constraints
#: Every keyword of :func:`make_settings` in the order it is checked (the first bad one is the one
#: reported); ``inject``, ``exact_sampler``, ``exact_logprobs`` and ``population_size`` are checks
#: that read several keywords (:class:`~normlab._validate.Relation`), where they have always run.
_KEYWORD_CHECKS = {
    "n_agents": Int(2),
    "committed_mode": Options(*COMMITTED_MODES),
    "committed_placement": Options(*COMMITTED_PLACEMENTS),
    "name_order": Options(*NAME_ORDERS),
    "wrap": _S["wrap"],
    "parse": _S["parse"],
    "inject": Relation(_inject),
    "memory": Int(1),
    "names": Check(_pool),
    "max_interactions": Int(1),
    "runs": Int(1),
    "mode": Check(lambda value, name: mode_of(value)),
    "committed": Relation(_committed),
    "committed_name": Relation(_committed_name),
    "initial": Relation(_initial),
    "stop": Relation(_stop),
    **{k: _S[k] for k in ("template", "payoffs", "temperature", "top_k", "max_tokens", "top_logprobs", "max_reasks",
                          "top_p", "min_p")},
    "exact_sampler": Relation(_exact_sampler),
    "multi_token": _S["multi_token"],
    "prefill": _S["prefill"],
    "exact_logprobs": Relation(_exact_logprobs),
    "case_sensitive": _S["case_sensitive"],
    "population_size": Relation(_population_size),
    "graph": Relation(_graph),
}


def _checked(keywords: dict) -> dict:
    """``keywords`` (those of :func:`make_settings`) checked by :data:`_KEYWORD_CHECKS`, normalised."""
    v = validate_params({**keywords, "inject": None, "exact_sampler": None, "exact_logprobs": None,
                         "population_size": None}, _KEYWORD_CHECKS)
    if v["name_order"] == "auto":
        v["name_order"] = "per_agent" if v["initial"] == "empty" else "shared"
    return v


def _neighbours(network: Network | None):
    """Neighbour lists (``None`` for the complete graph) and a digest of the edge list."""
    if network is None:
        return None, None
    indptr, indices = network.indptr, network.nbrs
    nbrs = [sorted(int(v) for v in indices[indptr[a]:indptr[a + 1]]) for a in range(network.n_nodes)]
    return nbrs, sha256_hex(json.dumps(nbrs), 32)


# ----------------------------------------------------------------------------- the engine and its keywords
def game_settings(spec: GameSpec, sampling: Sampling, mode: DecisionMode | str = SAMPLE, *, runs: int = 1,
                  placement: str = "last", committed_mode: str = "swap",
                  embedded: bool = True) -> tuple[GameSettings, PromptTemplate, list | None]:
    """The settings of an LLM run of ``spec`` with ``sampling`` in ``mode``: the flat record
    (hashed), the loaded template and the neighbour lists (``None``: the complete graph).

    Parameters
    ----------
    spec : GameSpec
        The population: ``n_agents`` (committed agents included), ``memory``, ``names`` (at
        least 2), ``committed`` (a count) and ``committed_name``, ``initial`` (``None`` or
        ``"empty"``, ``"random"``, ``"consensus:<name>"``), ``graph``, ``run`` (the stop rule and a cap),
        ``name_order`` (``"independent"``: per agent; ``"shared"``). No ``order_bias``: the
        runner shows the names in uniformly shuffled orders.
    sampling : Sampling
    mode : DecisionMode or {"exact", "sample"}
    runs : int
        Replicate runs.
    placement : {"last", "random"}
        Where committed agents sit (``committed_placement`` of :func:`~normlab.llm_runs.run_game`).
    committed_mode : {"swap", "inject"}
        ``inject``: the committed agents were added to the population (``spec.n_agents`` counts them).
    embedded : bool
        The endpoint is the embedded server (the default prefill of sample mode).

    The runner's own requirements (a memory, a cap, names that fit in a prompt, exact mode's
    sampler, a population that fits in memory) are checked with :func:`make_settings`' messages.
    """
    if not isinstance(spec, GameSpec):
        raise TypeError(f"spec must be a GameSpec; got {type(spec).__name__}")
    if not isinstance(sampling, Sampling):
        raise TypeError(f"sampling must be a Sampling; got {type(sampling).__name__}")
    if spec.order_bias:
        raise ValueError(f"the LLM runner shows the names in uniformly shuffled orders; spec.order_bias must be 0, "
                         f"got {spec.order_bias}")
    committed = spec.committed
    names = spec.names
    cname = spec.committed_name
    if isinstance(cname, int) and names is not None:
        cname = names[cname]
    n_agents = spec.n_agents
    if committed_mode == "inject" and isinstance(committed, int):
        n_agents -= committed
    v = _checked(dict(
        n_agents=n_agents, memory=spec.memory, names=names, max_interactions=spec.run.interactions(spec.n_agents),
        runs=runs, mode=mode, committed=committed, committed_name=cname,
        initial="empty" if spec.initial is None else spec.initial, stop=spec.run.stop,
        graph=spec.graph, name_order=_RUN_ORDER[spec.name_order], committed_placement=placement,
        committed_mode=committed_mode, **sampling.to_kwargs()))
    mode, tpl = v["mode"], v["template"]
    nbrs, gdigest = _neighbours(v["graph"])
    s = GameSettings(
        n_agents=_population(v), memory=v["memory"], names=v["names"], max_interactions=v["max_interactions"],
        runs=v["runs"], mode=mode.value, committed=v["committed"], committed_name=v["committed_name"],
        initial=v["initial"], stop=v["stop"], template=tpl.name, template_digest=tpl.digest, payoffs=v["payoffs"],
        temperature=v["temperature"], top_k=v["top_k"], max_tokens=v["max_tokens"], top_logprobs=v["top_logprobs"],
        max_reasks=v["max_reasks"], prefill=mode.default_prefill(embedded) if v["prefill"] is None else v["prefill"],
        multi_token=v["multi_token"], case_sensitive=v["case_sensitive"], wrap=v["wrap"], parse=v["parse"],
        top_p=v["top_p"], min_p=v["min_p"], name_order=v["name_order"], committed_placement=v["committed_placement"],
        committed_mode=v["committed_mode"], graph=gdigest,
    )
    return s, tpl, nbrs


def make_settings(
    n_agents, memory, names, *, max_interactions, runs=1, mode="sample", committed=0, committed_name=None,
    initial="empty", stop="streak", graph=None, template="main", payoffs=(100, -50), temperature=0.5,
    top_k=10, max_tokens=6, top_logprobs=20, max_reasks=2, prefill=None, multi_token="expand",
    case_sensitive=False, embedded=True, wrap="chat", top_p=1.0, min_p=0.0, name_order="auto",
    committed_placement="last", committed_mode="swap", parse="normlab",
) -> tuple[GameSettings, PromptTemplate, list | None]:
    """Validate run arguments (before any work) and return settings, template and neighbours.

    The keywords of :func:`~normlab.llm_runs.run_game`, checked in the runner's order
    (:data:`_KEYWORD_CHECKS`), made into a :class:`~normlab.theory.spec.GameSpec`, a
    :class:`~normlab.llm_runs.runner.sampling.Sampling` and a
    :class:`~normlab.llm_runs.runner.mode.DecisionMode`, and given to :func:`game_settings`.
    """
    v = _checked(dict(
        n_agents=n_agents, memory=memory, names=names, max_interactions=max_interactions, runs=runs, mode=mode,
        committed=committed, committed_name=committed_name, initial=initial, stop=stop, graph=graph,
        template=template, payoffs=payoffs, temperature=temperature, top_k=top_k, max_tokens=max_tokens,
        top_logprobs=top_logprobs, max_reasks=max_reasks, prefill=prefill, multi_token=multi_token,
        case_sensitive=case_sensitive, wrap=wrap, top_p=top_p, min_p=min_p, name_order=name_order,
        committed_placement=committed_placement, committed_mode=committed_mode, parse=parse))
    spec = GameSpec(n_agents=_population(v), memory=v["memory"], n_names=len(v["names"]), names=v["names"],
                    committed=v["committed"], committed_name=v["committed_name"], initial=v["initial"],
                    graph=v["graph"], run=RunLength(v["stop"], v["max_interactions"], "interactions"),
                    name_order=_SPEC_ORDER[v["name_order"]])
    sampling = Sampling(**{k: v[k] for k in SAMPLING_KEYS})
    return game_settings(spec, sampling, v["mode"], runs=v["runs"], placement=v["committed_placement"],
                         committed_mode=v["committed_mode"], embedded=embedded)


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
