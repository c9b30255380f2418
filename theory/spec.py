"""What a game is, as values: who plays (:class:`GameSpec`) and how long a run lasts (:class:`RunLength`).

A :class:`GameSpec` names the population and its set-up once -- size, memory, the name pool,
committed agents and their name, the interaction graph, the initial memories, the run length,
the order in which prompts list the names -- so that an engine takes one object instead of a
dozen keywords. :class:`RunLength` is the one vocabulary of a run's stop rule and cap: a cap in
interactions or in population rounds (``N`` interactions each), converted with ``n_agents``.

Both are frozen dataclasses checked by :func:`normlab._validate.validated` in the order their
``_parameter_constraints`` are declared, with the messages of the simulators' own checks. The
simulators users call (:func:`~normlab.theory.minimal_naming_game`,
:func:`~normlab.theory.strategy_game`) keep their keywords and build these objects.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from normlab._validate import Check, Int, NoneOr, Options, Relation, check_int, validated

from ._common import STOP_CODES, check_stop
from .criteria import PUBLISHED_FLIP_THRESHOLD
from .name_order import NAME_ORDERS, check_order
from .population import committed_mask, graph_to_csr

__all__ = ["GameSpec", "RunLength", "Network", "UNITS"]

#: Units of a run's cap: interactions, or population rounds of ``n_agents`` interactions.
UNITS = ("interactions", "rounds")


def _stop_rule(value, name):
    check_stop(value)
    return value


def _cap(value, name, values):
    """A cap named after its unit (``max_interactions`` or ``max_rounds``), at least 1."""
    if value is None:
        return None
    return check_int(value, "max_interactions" if values["unit"] == "interactions" else "max_rounds", low=1)


@validated
@dataclass(frozen=True)
class RunLength:
    """When a run ends: its stop rule, and a cap in interactions or rounds.

    Parameters
    ----------
    stop : {"consensus", "success95", "streak", "flip", "max"}
        The rule that ends a run before the cap (``"max"``: only the cap).
    cap : int, optional
        Most interactions (or rounds) a run may last; ``None``: the simulator's default.
    unit : {"interactions", "rounds"}
        What ``cap`` counts; a round is ``n_agents`` interactions.
    """

    stop: str = "consensus"
    cap: int | None = None
    unit: str = "interactions"

    _parameter_constraints = {"stop": Check(_stop_rule), "unit": Options(*UNITS), "cap": Relation(_cap)}

    @property
    def code(self) -> int:
        """The kernels' stop code (:data:`normlab.theory._common.STOP_CODES`)."""
        return STOP_CODES[self.stop]

    def interactions(self, n_agents: int, default: int | None = None) -> int | None:
        """The cap in interactions for a population of ``n_agents`` (``default`` when no cap is set)."""
        if self.cap is None:
            return default
        return self.cap if self.unit == "interactions" else self.cap * int(n_agents)

    def rounds(self, n_agents: int, default: int | None = None) -> int | None:
        """The cap in rounds (a partial last round counts) for a population of ``n_agents``."""
        if self.cap is None:
            return default
        return self.cap if self.unit == "rounds" else -(-self.cap // int(n_agents))


@dataclass(frozen=True, eq=False)
class Network:
    """An interaction graph in the kernels' form: CSR neighbour arrays (agent ``k``'s neighbours
    are ``nbrs[indptr[k]:indptr[k + 1]]``), with the type and edge count of the graph given."""

    indptr: np.ndarray
    nbrs: np.ndarray
    kind: str
    n_edges: int

    @classmethod
    def of(cls, graph, n_agents: int) -> "Network | None":
        """``graph`` (a networkx graph, checked by :func:`~normlab.theory.population.graph_to_csr`;
        ``None``: the complete graph, returned as ``None``) in its kernel form."""
        if graph is None:
            return None
        if isinstance(graph, Network):
            if graph.n_nodes != n_agents:
                raise ValueError(f"graph has {graph.n_nodes} nodes but n_agents={n_agents}; they must agree")
            return graph
        indptr, nbrs = graph_to_csr(graph, n_agents)
        return cls(indptr, nbrs, type(graph).__name__, int(graph.number_of_edges()))

    @property
    def n_nodes(self) -> int:
        return len(self.indptr) - 1


def _flip_threshold(value, name):
    if not 0.0 < float(value) <= 1.0:
        raise ValueError(f"flip_threshold must be in (0, 1]; got {value!r}")
    return float(value)


def _order_bias(value, name):
    return check_order(value, NAME_ORDERS[0])[0]


def _names(value, name):
    from normlab.schema import validate_names  # schema imports pandas: only when names are given

    return validate_names(value)


def _committed(value, name, values):
    """A count (the last ``k`` agents) or agent indices, checked by :func:`committed_mask`; kept
    as an ``int`` or a tuple of ``int``."""
    committed_mask(value, values["n_agents"])
    if isinstance(value, numbers.Integral):
        return int(value)
    return tuple(int(i) for i in np.asarray(value).reshape(-1))


def _committed_name(value, name, values):
    """A name index in the pool, or a label of ``names``."""
    if value is None:
        return None
    if isinstance(value, str):
        names = values.get("names")
        if names is not None and value not in names:
            raise ValueError(f"committed_name {value!r} is not in {names}")
        return value
    W = values.get("n_names")
    return check_int(value, name, low=0, high=None if W is None else W - 1)


def _run(value, name):
    if not isinstance(value, RunLength):
        raise TypeError(f"run must be a RunLength; got {type(value).__name__}")
    return value


def _graph(value, name, values):
    return Network.of(value, values["n_agents"])


@validated
@dataclass(frozen=True, eq=False)
class GameSpec:
    """A population and its set-up: what every game engine (theory, LLM runner, prediction) plays.

    Parameters
    ----------
    n_agents : int
        Population size ``N`` (>= 2).
    memory : int, optional
        Memory length ``H`` (>= 1); ``None``: no memory window (the minimal naming game's
        inventories).
    n_names : int, optional
        Pool size ``W``; ``None``: an unlimited pool (the minimal naming game) or the size the
        strategy plays.
    names : sequence of str, optional
        Labels of the names (checked by :func:`normlab.schema.validate_names`); ``None``: the
        game's defaults (a strategy's own labels, else ``"0"``, ``"1"``, ...).
    committed : int or sequence of int
        Number of committed agents (the last ``k``) or their indices.
    committed_name : int or str, optional
        The name committed agents play, the challenger a flip is measured on (index or label);
        ``None``: the game's default (the last name of the pool when agents are committed).
    initial : None, str, int or array_like of int
        Initial memories: ``None``/``"empty"``, ``"consensus"``, ``"consensus:<name>"``, a name
        index, or one name index per agent (``-1``: empty); read by the game.
    graph : networkx.Graph or Network, optional
        Interaction network (kept in its CSR form, :class:`Network`); ``None``: the complete graph.
    run : RunLength
        Stop rule and cap.
    flip_threshold : float
        Challenger share among uncommitted productions over the last 3 rounds counted as a flip.
    order_bias : float
        First-listed bias ``gamma`` (:mod:`normlab.theory.name_order`); 0: none.
    name_order : {"independent", "shared"}
        How the name order is drawn when ``order_bias`` is not 0.
    """

    n_agents: int
    memory: int | None = None
    n_names: int | None = None
    names: tuple | None = None
    committed: int | tuple = 0
    committed_name: int | str | None = None
    initial: object = None
    graph: object = None
    run: RunLength = RunLength()
    flip_threshold: float = PUBLISHED_FLIP_THRESHOLD
    order_bias: float = 0.0
    name_order: str = "independent"

    _parameter_constraints = {
        "n_agents": Int(2),
        "memory": NoneOr(Int(1)),
        "n_names": NoneOr(Int(1)),
        "run": Check(_run),
        "order_bias": Check(_order_bias),
        "name_order": Options(*NAME_ORDERS),
        "flip_threshold": Check(_flip_threshold),
        "names": NoneOr(Check(_names)),
        "committed": Relation(_committed),
        "committed_name": Relation(_committed_name),
        "graph": Relation(_graph),
    }

    @property
    def stop(self) -> str:
        return self.run.stop

    def committed_mask(self) -> np.ndarray:
        """Boolean mask of the committed agents (one array per spec, as the kernels and the
        result share it)."""
        return self._mask

    @cached_property
    def _mask(self) -> np.ndarray:
        return committed_mask(self.committed, self.n_agents)

    def csr(self) -> tuple[np.ndarray, np.ndarray]:
        """The graph's ``(indptr, nbrs)`` (empty arrays: the complete graph)."""
        if self.graph is None:
            return np.zeros(0, np.int64), np.zeros(0, np.int32)
        return self.graph.indptr, self.graph.nbrs
