"""The state of one run (memories and stop-rule trackers, rebuilt identically by replaying the
journal) and the committed agents and initial memories it starts from."""

from __future__ import annotations

from collections import deque

import numpy as np

from normlab.theory.criteria import PUBLISHED_FLIP_THRESHOLD, flip_reached

from .settings import GameSettings

#: Flip threshold of the live stop rule (first passage, the per-run reading of
#: :mod:`normlab.theory.criteria`): mean challenger share over the last three rounds.
FLIP_THRESHOLD = PUBLISHED_FLIP_THRESHOLD


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


class RunState:
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
        # memory consensus kept up to date per interaction: the name each uncommitted memory is
        # "pure" on (H successes of one name) and how many memories are pure on each name
        self._n_uncommitted = sum(1 for a in range(N) if a not in committed_ids)
        self._pure = [None if a in committed_ids else self._pure_name(a) for a in range(N)]
        self._pure_count: dict = {}
        for x in self._pure:
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

    def _memory_consensus(self) -> bool:
        return self.memory_consensus_name() is not None

    def memory_consensus_name(self) -> str | None:
        """The name every uncommitted memory holds ``H`` successes on (with committed agents: only
        their name counts), the schema's ``memory_consensus``; ``None`` when the state is not there."""
        for name, k in self._pure_count.items():
            if k == self._n_uncommitted and (not self.s.committed or name == self.s.committed_name):
                return name
        return None

    def _pure_name(self, agent: int) -> str | None:
        m = self.mem[agent]
        if len(m) < self.s.memory or not m:
            return None
        name = m[0][0]
        for own, partner in m:
            if own != partner or own != name:
                return None
        return name

    def _update_pure(self, agent: int) -> None:
        old, new = self._pure[agent], self._pure_name(agent)
        if old == new:
            return
        if old is not None:
            self._pure_count[old] -= 1
        if new is not None:
            self._pure_count[new] = self._pure_count.get(new, 0) + 1
        self._pure[agent] = new

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
