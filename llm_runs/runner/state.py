"""The state of one run (memories and stop-rule trackers, rebuilt identically by replaying the
journal) and the committed agents and initial memories it starts from."""

from __future__ import annotations

import bisect
from collections import deque
from collections.abc import Mapping

import numpy as np

from normlab.theory.criteria import PUBLISHED_FLIP_THRESHOLD, flip_reached

from .settings import GameSettings

#: Flip threshold of the live stop rule (first passage, the per-run reading of
#: :mod:`normlab.theory.criteria`): mean challenger share over the last three rounds.
FLIP_THRESHOLD = PUBLISHED_FLIP_THRESHOLD


class InitialMemory(Mapping):
    """The memories a run starts with, ``{agent: [(own, partner), ...]}``, built for an agent
    when it is asked for (a population of millions costs nothing up front): ``H`` successes of
    one name for every uncommitted agent (``initial='consensus:<name>'``), or the seeded random
    entries of ``initial='random'`` kept as one byte per name (``N x H x 2`` bytes). Committed
    agents start empty (they are not keys)."""

    def __init__(self, n_agents: int, memory: int, committed: set, *, name: str | None = None,
                 picks: np.ndarray | None = None, two: tuple = ()):
        self.n_agents, self.memory, self.committed = n_agents, memory, committed
        self.name, self.picks, self.two = name, picks, two
        self._committed_sorted = sorted(committed) if picks is not None else None

    def _row(self, a: int) -> int:
        """Row of agent ``a`` in ``picks`` (drawn for the uncommitted agents, in agent order)."""
        return a - bisect.bisect_left(self._committed_sorted, a)

    def __getitem__(self, a):
        if not (isinstance(a, (int, np.integer)) and 0 <= a < self.n_agents) or a in self.committed:
            raise KeyError(a)
        if self.name is not None:
            return [(self.name, self.name)] * self.memory
        two, row = self.two, self.picks[self._row(int(a))]
        return [(two[int(x)], two[int(y)]) for x, y in row]

    def __iter__(self):
        return (a for a in range(self.n_agents) if a not in self.committed)

    def __len__(self) -> int:
        return self.n_agents - len(self.committed)

    def pure_counts(self) -> dict:
        """``{name: agents whose initial memory holds H successes of it}`` (without building any memory)."""
        if self.name is not None:
            return {self.name: len(self)} if len(self) else {}
        p = self.picks
        same = (p[:, :, 0] == p[:, :, 1]).all(axis=1) & (p[:, :, 0] == p[:, :1, 0]).all(axis=1)
        out = {}
        for k in (0, 1):
            n = int((same & (p[:, 0, 0] == k)).sum())
            if n:
                out[self.two[k]] = out.get(self.two[k], 0) + n
        return out


def run_setup(s: GameSettings, run: int) -> tuple[set, InitialMemory | None]:
    """Committed ids and initial memories of run ``run`` (deterministic in the run's seed).

    ``committed_placement='random'`` draws the K committed ids, and ``initial='random'`` each
    uncommitted agent's ``H`` prepared entries ``(own, partner)`` -- each name uniform over the
    first two pool names, as the authors' ``set_initial_state`` (``options[random.choice(range(2))]``)
    -- from ``SeedSequence(entropy, spawn_key=(..., run, 0, 0))``, a stream distinct from the
    interactions' ``(..., run, t)``. The entries are drawn for every uncommitted agent in agent
    order (one draw of ``H x 2`` per agent: the stream of earlier versions, in chunks) and kept
    as bytes; memories themselves are built only for the agents that play (:class:`InitialMemory`).

    Returns
    -------
    (set of int, InitialMemory or None)
        Committed ids, and the initial memories (a mapping ``{agent: [(own, partner), ...]}``;
        ``None`` for empty memories).

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
        return committed, InitialMemory(N, H, committed, name=init)
    if s.initial == "random":
        n = N - len(committed)
        picks = np.empty((n, H, 2), dtype=np.uint8)
        step = max(1, 2**22 // (2 * H))  # agents per draw: bounded temporary memory
        for lo in range(0, n, step):  # one call per chunk draws what one call per agent drew
            picks[lo:lo + step] = g.integers(2, size=(min(step, n - lo), H, 2))
        return committed, InitialMemory(N, H, committed, picks=picks, two=tuple(s.names[:2]))
    return committed, None


class _Memories(dict):
    """Each agent's memory, made on first use (from the initial memories; empty for committed agents)."""

    def __init__(self, memory: int, committed: set, initial):
        super().__init__()
        self.H, self.committed, self.initial = memory, committed, initial

    def __missing__(self, a):
        entries = [] if a in self.committed or self.initial is None else self.initial.get(a, [])
        m = self[a] = deque(entries, maxlen=self.H)
        return m


class RunState:
    """Memories and stop-rule trackers of one run (rebuilt identically by replaying the journal).

    State is kept for the agents that have played only (their memories are made from the
    initial ones on first use), so its size follows the run, not the population.
    """

    def __init__(self, s: GameSettings, committed_ids: set, initial_memory=None):
        self.s = s
        N = s.n_agents
        # as the theory simulators: committed agents start with an empty memory (never consulted)
        self.mem = _Memories(s.memory, committed_ids, initial_memory or None)
        self.committed_ids = committed_ids
        self.t = 0
        self.streak = 0
        self.window = deque(maxlen=3 * N)
        self.rounds = deque(maxlen=3)  # (committed-name productions, productions) of uncommitted agents
        self.cur = [0, 0]
        self.flipped = False
        self.reason: str | None = None
        # memory consensus kept up to date per interaction: the name each uncommitted memory is
        # "pure" on (H successes of one name) and how many memories are pure on each name; agents
        # that have not played keep their initial purity (counted once, up front)
        self._n_uncommitted = N - len(committed_ids)
        self._pure: dict = {}
        if isinstance(initial_memory, InitialMemory):
            self._pure_count = initial_memory.pure_counts()
        else:
            self._pure_count = {}
            for a, entries in (initial_memory or {}).items():
                if a not in committed_ids:
                    x = self._pure_of(entries)
                    if x is not None:
                        self._pure_count[x] = self._pure_count.get(x, 0) + 1

    def apply(self, i: int, j: int, a: str | None, b: str | None) -> None:
        success = a is not None and b is not None and a == b
        if a is not None and b is not None:
            self.mem[i].append((a, b))
            self.mem[j].append((b, a))
            for agent in (i, j):
                if agent not in self.committed_ids:
                    self._update_pure(agent)
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
                self.flipped = flip_reached(c, u)
        self.reason = self._stop()

    def _initial_pure(self, agent: int) -> str | None:
        init = self.mem.initial
        return None if init is None else self._pure_of(init.get(agent, []))

    def _memory_consensus(self) -> bool:
        return self.memory_consensus_name() is not None

    def memory_consensus_name(self) -> str | None:
        """The name every uncommitted memory holds ``H`` successes on (with committed agents: only
        their name counts), the schema's ``memory_consensus``; ``None`` when the state is not there."""
        for name, k in self._pure_count.items():
            if k == self._n_uncommitted and (not self.s.committed or name == self.s.committed_name):
                return name
        return None

    def _pure_of(self, m) -> str | None:
        if len(m) < self.s.memory or not m:
            return None
        name = m[0][0]
        for own, partner in m:
            if own != partner or own != name:
                return None
        return name

    def _update_pure(self, agent: int) -> None:
        # before its first update an agent is pure on what its initial memory was pure on
        old = self._pure[agent] if agent in self._pure else self._initial_pure(agent)
        new = self._pure[agent] = self._pure_of(self.mem[agent])
        if old == new:
            return
        if old is not None:
            self._pure_count[old] -= 1
        if new is not None:
            self._pure_count[new] = self._pure_count.get(new, 0) + 1

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
