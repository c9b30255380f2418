"""Progress of a run in agent decisions, and the prior of how long a run lasts."""

from __future__ import annotations

import math
import time
from collections import deque

import numpy as np

from .settings import GameSettings


class Progress:
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
        from normlab._display import tqdm

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
