"""Strategies of the memory-H game: p(name | memory state), and the stable memory-state encoding.

A memory is an agent's last ``H`` interactions, oldest first, each an ``(own, partner)`` pair of
name indices. **State encoding** (stable; used by tables, logs and calibration): entry code
``e = own * W + partner`` in ``[0, W**2)``; a memory of ``k`` entries ``e_1 .. e_k`` (oldest
first) has index ``offset(k) + sum_i e_i * (W**2) ** (k - i)`` with
``offset(k) = sum_{j<k} (W**2) ** j``. So the empty memory is state 0; for ``W = 2`` the four
one-entry states are 1..4 (``(0,0)``, ``(0,1)``, ``(1,0)``, ``(1,1)``), the 16 two-entry states
5..20, and ``H = 5`` has ``(4**6 - 1) / 3 = 1365`` states. The string form is the schema's
``"own,partner;own,partner"`` with name labels (:mod:`normlab.schema`).

Built-in strategies: :class:`StrategyTable` (any table), :class:`BestResponse` (Centola et al.
2018), :class:`WinStayLoseShift` and :class:`LogitStrategy` (multinomial logit on interpretable
memory features, the model family the calibration layer fits). :class:`FunctionStrategy` wraps a
user function compiled by Numba.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from normlab._jit import njit

from normlab._display import html_card, new_axes, plotting, short_repr


# Strategy kinds understood by the cached strategy-game kernel.
KIND_TABLE, KIND_BEST_RESPONSE, KIND_WSLS, KIND_LOGIT, KIND_USER = 0, 1, 2, 3, 4

#: Names of the memory features of :class:`LogitStrategy` (per candidate name ``n``).
FEATURE_NAMES = (
    "partner_share",     # recency-weighted share of entries where the partner played n
    "own_share",         # recency-weighted share of entries where the agent itself played n
    "success_share",     # recency-weighted share of successful entries on n
    "last_partner",      # 1 if the partner played n in the latest entry
    "last_success",      # 1 if the latest entry was a success on n
    "streak",            # trailing run of successes on n, divided by H
)
N_FEATURES = len(FEATURE_NAMES)


# ----------------------------------------------------------------------------- state encoding
def _validate_names(names):
    from normlab.schema import validate_names  # schema imports pandas: only when names are given

    return validate_names(names)


def n_states(n_names: int, memory: int) -> int:
    """Number of memory states with up to ``memory`` entries: ``sum_{k<=H} (W**2)**k``.

    Parameters
    ----------
    n_names : int
    memory : int

    Returns
    -------
    int
    """
    B = n_names * n_names
    return sum(B**k for k in range(memory + 1))


def state_offsets(n_names: int, memory: int) -> np.ndarray:
    """``offset(k)`` for ``k = 0 .. memory`` (int64)."""
    B = n_names * n_names
    return np.array([sum(B**j for j in range(k)) for k in range(memory + 1)], dtype=np.int64)


def encode_state(entries, n_names: int) -> int:
    """Index of a memory given as ``(own, partner)`` name-index pairs, oldest first.

    Parameters
    ----------
    entries : sequence of (int, int)
    n_names : int

    Returns
    -------
    int
    """
    B = n_names * n_names
    v = 0
    for own, partner in entries:
        if not (0 <= own < n_names and 0 <= partner < n_names):
            raise ValueError(f"memory entry ({own}, {partner}) outside the pool of {n_names} names")
        v = v * B + own * n_names + partner
    k = len(entries)
    return sum(B**j for j in range(k)) + v


def decode_state(index: int, n_names: int, memory: int) -> list[tuple[int, int]]:
    """Inverse of :func:`encode_state` (``memory`` bounds the length).

    Parameters
    ----------
    index : int
    n_names, memory : int

    Returns
    -------
    list of (int, int)
    """
    offs = state_offsets(n_names, memory)
    total = n_states(n_names, memory)
    if not 0 <= index < total:
        raise ValueError(f"state index {index} outside [0, {total}) for W={n_names}, H={memory}")
    k = int(np.searchsorted(offs, index, side="right") - 1)
    v = index - int(offs[k])
    out = []
    for _ in range(k):
        e = v % (n_names * n_names)
        v //= n_names * n_names
        out.append((e // n_names, e % n_names))
    return out[::-1]


def _check_probs(p: np.ndarray, what: str) -> None:
    if not np.all(np.isfinite(p)) or p.min() < 0 or p.max() > 1:
        raise ValueError(f"{what} must hold probabilities in [0, 1]")
    bad = np.flatnonzero(np.abs(p.sum(axis=-1) - 1.0) > 1e-9) if p.ndim > 1 else ([] if abs(p.sum() - 1) <= 1e-9 else [0])
    if len(bad):
        raise ValueError(f"{what}: each row must sum to 1 (first bad row: {int(bad[0])})")


# ----------------------------------------------------------------------------- strategy types
@dataclass(frozen=True)
class Strategy:
    """Base class: a rule giving p(name | memory). Subclasses fix ``kind`` and ``params``."""

    n_names: int

    kind = KIND_USER

    def kernel_params(self, memory: int) -> np.ndarray:  # pragma: no cover - overridden
        return np.zeros(0)

    def probs(self, memory_entries, memory: int) -> np.ndarray:
        """p(name | memory) for one memory (``(own, partner)`` index pairs, oldest first).

        Pure Python; this is the reference used by the kernel's twin and by tests.
        """
        raise NotImplementedError

    def to_table(self, memory: int, names=None) -> "StrategyTable":
        """Tabulate the strategy over every memory state up to ``memory`` entries.

        Parameters
        ----------
        memory : int
        names : sequence of str, optional

        Returns
        -------
        StrategyTable
        """
        W = self.n_names
        S = n_states(W, memory)
        if S > 2_000_000:
            raise ValueError(f"{S} states for W={W}, H={memory} is too many to tabulate (limit 2,000,000)")
        tab = np.empty((S, W))
        for s in range(S):
            tab[s] = self.probs(decode_state(s, W, memory), memory)
        return StrategyTable(tab, n_names=W, memory=memory, names=names)


@dataclass(frozen=True, init=False)
class StrategyTable(Strategy):
    """A full strategy table: ``table[s, n]`` = p(name n | memory state s) (see module encoding).

    Parameters
    ----------
    table : array_like of float, shape (n_states(W, H), W)
        Rows are probability vectors. For ``W = 2`` a 1-D array of p(name 1 | s) is accepted.
    n_names : int, optional
        Pool size ``W`` (default: inferred from the table's columns).
    memory : int
        Memory length ``H``.
    names : sequence of str, optional
        Labels of the names (default ``"0"``, ``"1"``, ...).

    References
    ----------
    The strategy tables of Flint Ashery et al., Sci. Adv. 11, eadu9368 (2025), Table 1 and
    Fig. S8 (W = 2, H = 5: 1365 memory states).
    """

    table: np.ndarray = field(default=None)
    memory: int = 0
    names: tuple = ()

    kind = KIND_TABLE

    def __init__(self, table, *, n_names=None, memory, names=None):
        t = np.asarray(table, dtype=np.float64)
        if t.ndim == 1:
            if n_names not in (None, 2):
                raise ValueError("a 1-D table gives p(name 1 | s) and is only valid for W = 2")
            t = np.column_stack([1.0 - t, t])
        if t.ndim != 2:
            raise ValueError(f"table must be 2-D (n_states, W); got shape {t.shape}")
        W = t.shape[1] if n_names is None else int(n_names)
        if W < 2 or t.shape[1] != W:
            raise ValueError(f"table must have one column per name (W >= 2); got shape {t.shape} for W={W}")
        if isinstance(memory, bool) or not isinstance(memory, (int, np.integer)) or memory < 1:
            raise ValueError(f"memory must be an int >= 1; got {memory!r}")
        S = n_states(W, int(memory))
        if t.shape[0] != S:
            raise ValueError(f"a table for W={W}, H={memory} needs {S} rows (one per memory state); got {t.shape[0]}")
        _check_probs(t, "strategy table")
        names = _validate_names(names) if names is not None else tuple(str(k) for k in range(W))
        if len(names) != W:
            raise ValueError(f"got {len(names)} names for a table with W={W}")
        t = t.copy()
        t.setflags(write=False)
        object.__setattr__(self, "n_names", W)
        object.__setattr__(self, "table", t)
        object.__setattr__(self, "memory", int(memory))
        object.__setattr__(self, "names", names)

    def kernel_params(self, memory: int) -> np.ndarray:
        if memory != self.memory:
            raise ValueError(f"this table is for memory H={self.memory}; the game was asked for H={memory}")
        return np.ascontiguousarray(self.table).reshape(-1)

    def probs(self, memory_entries, memory: int) -> np.ndarray:
        return self.table[encode_state(list(memory_entries)[-self.memory:], self.n_names)].copy()

    def state_label(self, index: int) -> str:
        """Schema string (``"own,partner;..."`` with name labels) of state ``index``."""
        from normlab.schema import memory_state_string

        return memory_state_string((self.names[o], self.names[p]) for o, p in decode_state(index, self.n_names, self.memory))

    def state_index(self, state: str) -> int:
        """Index of a schema memory-state string (inverse of :meth:`state_label`)."""
        from normlab.schema import parse_memory_state

        pos = {n: k for k, n in enumerate(self.names)}
        try:
            entries = [(pos[o], pos[p]) for o, p in parse_memory_state(state)]
        except KeyError as exc:
            raise ValueError(f"memory state {state!r} uses a name outside {self.names}") from exc
        if len(entries) > self.memory:
            raise ValueError(f"memory state {state!r} is longer than H={self.memory}")
        return encode_state(entries, self.n_names)

    def to_frame(self):
        """Long table: one row per (memory state, name) with ``memory_state``, ``memory_len``, ``name``, ``p``."""
        import pandas as pd

        S, W = self.table.shape
        labels = [self.state_label(s) for s in range(S)]
        lens = [len(decode_state(s, W, self.memory)) for s in range(S)]
        return pd.DataFrame(
            {
                "state": np.repeat(np.arange(S), W),
                "memory_state": np.repeat(np.asarray(labels, dtype=object), W),
                "memory_len": np.repeat(lens, W),
                "name": np.tile(np.asarray(self.names, dtype=object), S),
                "p": self.table.reshape(-1),
            }
        )

    @classmethod
    def from_frame(cls, frame, *, memory: int, names, default=None) -> "StrategyTable":
        """Build a table from a long frame with ``memory_state``, ``name`` and ``p`` columns.

        Parameters
        ----------
        frame : pandas.DataFrame
        memory : int
        names : sequence of str
        default : StrategyTable or Strategy, optional
            Fills states absent from ``frame``; without it every state must be present.

        Returns
        -------
        StrategyTable
        """
        names = _validate_names(names)
        missing = {"memory_state", "name", "p"} - set(frame.columns)
        if missing:
            raise ValueError(f"frame is missing columns {sorted(missing)}")
        W = len(names)
        S = n_states(W, memory)
        proto = cls(np.full((S, W), 1.0 / W), memory=memory, names=names)
        tab = np.full((S, W), np.nan)
        pos = {n: k for k, n in enumerate(names)}
        for st, nm, p in zip(frame["memory_state"], frame["name"], frame["p"]):
            if nm not in pos:
                raise ValueError(f"name {nm!r} is not in the pool {names}")
            tab[proto.state_index(st), pos[nm]] = p
        holes = np.isnan(tab).any(axis=1)
        if holes.any():
            if default is None:
                raise ValueError(f"{int(holes.sum())} of {S} memory states have no probabilities; pass default=")
            for s in np.flatnonzero(holes):
                tab[s] = default.probs(decode_state(s, W, memory), memory)
        return cls(tab, memory=memory, names=names)

    def relabel(self, perm) -> "StrategyTable":
        """The table after renaming name ``n`` to ``perm[n]`` (e.g. ``[1, 0]`` swaps two names).

        ``relabel(perm).table[perm(s), perm(n)] == table[s, n]``: a symmetric strategy satisfies
        ``table.relabel(perm)`` == ``table`` (Table 1 of Flint Ashery et al. 2025 tests exactly this symmetry).
        """
        perm = np.asarray(perm, dtype=np.int64)
        W, H = self.n_names, self.memory
        if sorted(perm.tolist()) != list(range(W)):
            raise ValueError(f"perm must be a permutation of 0..{W - 1}")
        S = self.table.shape[0]
        out = np.empty_like(self.table)
        for s in range(S):
            ent = [(int(perm[o]), int(perm[p])) for o, p in decode_state(s, W, H)]
            out[encode_state(ent, W)][perm] = self.table[s]
        return StrategyTable(out, memory=H, names=self.names)


    # ------------------------------------------------------------------ display
    def summary(self) -> dict:
        """Pool, memory, p(name | empty memory) and the largest relabelling asymmetry (W = 2),
        as plain Python values."""
        asym = None
        if self.n_names == 2:
            asym = float(np.abs(self.table - self.relabel([1, 0]).table).max())
        return {"names": list(self.names), "memory": int(self.memory), "states": int(self.table.shape[0]),
                "p_empty_memory": {n: float(v) for n, v in zip(self.names, self.table[0])},
                "max_asymmetry": asym}

    def __repr__(self) -> str:
        W = self.n_names
        p_first = self.table[0]
        return short_repr("StrategyTable", f"names {','.join(self.names)}", f"H={self.memory}",
                          f"{self.table.shape[0]} memory states",
                          "empty memory: " + ", ".join(f"p({n})={v:.3f}" for n, v in zip(self.names, p_first)),
                          f"max |p - 1/W| = {np.abs(self.table - 1.0 / W).max():.3f}")

    def _repr_html_(self) -> str:
        rows = [(f"p({n} | empty memory)", float(v)) for n, v in zip(self.names, self.table[0])]
        if self.n_names == 2 and self.memory >= 1:
            a, b = self.names
            for L in range(1, self.memory + 1):  # unanimous memories of each name
                sa = encode_state([(0, 0)] * L, 2)
                sb = encode_state([(1, 1)] * L, 2)
                rows.append((f"p({a} | {L}x {a}{a}), p({b} | {L}x {b}{b})",
                             f"{self.table[sa, 0]:.3f}, {self.table[sb, 1]:.3f}"))
        return html_card("StrategyTable", rows, level=None,
                         subtitle=f"p(name | memory), names {','.join(self.names)}, H = {self.memory}, "
                                  f"{self.table.shape[0]} states",
                         note=".plot() draws the heat map over own and partner histories; .to_frame() the table.")

    @plotting
    def plot(self, *, name: str | None = None, memory_len: int | None = None, unseen=None, ax=None,
             cmap: str = "viridis"):
        """Heat map of p(name | memory) over own (rows) and partner (columns) histories (Fig. S8).

        Parameters
        ----------
        name : str, optional
            The name whose probability is coloured (default: the last name, e.g. ``M``).
        memory_len : int, optional
            Memory length shown (default: the full memory ``H``). Two-name pools only.
        unseen : array_like of bool, optional
            One flag per memory state: marked with a white cross (e.g. states without training
            decisions).
        ax : matplotlib Axes, optional
        cmap : str, optional

        Returns
        -------
        matplotlib.axes.Axes

        References
        ----------
        Flint Ashery, Aiello & Baronchelli, Sci. Adv. 11, eadu9368 (2025), Fig. S8.
        """
        import pandas as pd
        import seaborn as sns

        names, H = self.names, self.memory
        if len(names) != 2:
            raise ValueError("the heat map layout is for two-name pools; use .to_frame() for larger pools")
        L = H if memory_len is None else int(memory_len)
        if not 1 <= L <= H:
            raise ValueError(f"memory_len must be in 1..{H}")
        name = names[-1] if name is None else name
        if name not in names:
            raise ValueError(f"name must be one of {names}; got {name!r}")
        j = names.index(name)
        seqs = [[(v >> (L - 1 - i)) & 1 for i in range(L)] for v in range(2**L)]
        lab = ["".join(names[b] for b in q) if all(len(n) == 1 for n in names) else "-".join(names[b] for b in q)
               for q in seqs]
        M = np.zeros((len(seqs), len(seqs)))
        U = np.zeros_like(M, dtype=bool)
        un = None if unseen is None else np.asarray(unseen, dtype=bool)
        for a, own in enumerate(seqs):
            for b, part in enumerate(seqs):
                st = encode_state(list(zip(own, part)), 2)
                M[a, b] = self.table[st, j]
                U[a, b] = un is not None and un[st]
        n = len(seqs)
        size = {1: (4.2, 3.4), 2: (4.8, 3.9), 3: (5.6, 4.6), 4: (6.6, 5.6)}.get(L, (8.5, 7.2))
        ax = new_axes(ax, size)
        step = 1 if L <= 5 else 2 ** (L - 5)  # at most 32 labels per axis
        sns.heatmap(pd.DataFrame(M, index=lab, columns=lab), vmin=0, vmax=1, cmap=cmap, ax=ax, square=L <= 5,
                    cbar_kws={"label": f"p({name} | memory)", "shrink": 0.8}, xticklabels=step, yticklabels=step)
        fs = 9 if L <= 3 else (7 if L == 4 else 6)
        ax.tick_params(axis="both", labelsize=fs, length=0)
        ax.set_xticklabels(ax.get_xticklabels(), rotation=0 if L <= 3 else 90, family="monospace")
        ax.set_yticklabels(ax.get_yticklabels(), rotation=0, family="monospace")
        title = f"p({name} | memory), H = {H}" + (f", last {L} plays" if L < H else "")
        if U.any():
            ys, xs = np.nonzero(U)
            ax.scatter(xs + 0.5, ys + 0.5, marker="x", s=max(4, 900 / n**1.2), c="white", linewidths=0.6)
            title += f"\n× = not observed in training ({int(U.sum())} of {U.size})"
        ax.set_title(title, fontsize=10)
        ax.set_xlabel("partner's plays (oldest first)")
        ax.set_ylabel("own plays (oldest first)")
        return ax

    @classmethod
    def _contract_example(cls) -> "StrategyTable":
        """A two-name table of memory one (five states), literal numbers (``tests/umbrella/test_contracts.py``)."""
        return cls([0.5, 0.9, 0.2, 0.7, 0.1], memory=1, names=("A", "B"))


@dataclass(frozen=True)
class BestResponse(Strategy):
    """Play the partner name seen most often in memory, ties at random (Centola et al. 2018).

    Empty memory: uniform over the ``W`` names. Only partners' plays count.

    References
    ----------
    D. Centola, J. Becker, D. Brackbill, A. Baronchelli, Science 360, 1116 (2018): agents best
    respond to their memory of partners' last M plays; mean-field critical mass ``C*_M``
    (see :func:`normlab.theory.centola_critical_mass`).
    """

    n_names: int = 2
    kind = KIND_BEST_RESPONSE

    def kernel_params(self, memory: int) -> np.ndarray:
        return np.zeros(1)

    def probs(self, memory_entries, memory: int) -> np.ndarray:
        W = self.n_names
        counts = [0] * W
        for _, partner in memory_entries:
            counts[partner] += 1
        top = max(counts)
        if not memory_entries:
            return np.full(W, 1.0 / W)
        winners = [n for n in range(W) if counts[n] == top]
        p = np.zeros(W)
        p[winners] = 1.0 / len(winners)
        return p


@dataclass(frozen=True)
class WinStayLoseShift(Strategy):
    """Repeat the last name after a success; switch to the partner's last name after a failure.

    Empty memory: uniform. This is the rule LLM agents follow after their first interaction in
    Flint Ashery et al. (2025, Table 1: 99.4% stay after success, 97.3% switch after failure).
    """

    n_names: int = 2
    kind = KIND_WSLS

    def kernel_params(self, memory: int) -> np.ndarray:
        return np.zeros(1)

    def probs(self, memory_entries, memory: int) -> np.ndarray:
        W = self.n_names
        if not memory_entries:
            return np.full(W, 1.0 / W)
        own, partner = memory_entries[-1]
        p = np.zeros(W)
        p[own if own == partner else partner] = 1.0
        return p


@dataclass(frozen=True, init=False)
class LogitStrategy(Strategy):
    """Multinomial logit over names on interpretable memory features.

    ``p(n | m) ∝ exp(b_n + sum_f theta[n, f] x_f(n, m))`` with the features :data:`FEATURE_NAMES`
    computed with recency weights ``decay**(age)`` (newest entry weight 1, normalised to sum 1).
    The empty memory has all features 0, so ``p ∝ exp(b)``. With name-specific coefficients
    (``coef`` of shape ``(W, 6)``) the strategy can respond differently to the same history
    under a relabelling of the names -- the asymmetry behind collective bias (Flint Ashery et al. 2025, Table 1).

    Parameters
    ----------
    coef : array_like of float, shape (6,) or (W, 6)
        ``theta`` for the features, in :data:`FEATURE_NAMES` order; shared by all names or one
        row per name.
    bias : array_like of float, length W
        Name intercepts ``b`` (only differences matter).
    decay : float, optional
        Recency decay in (0, 1].
    """

    coef: np.ndarray = field(default=None)
    bias: np.ndarray = field(default=None)
    decay: float = 0.7
    kind = KIND_LOGIT

    def __init__(self, coef, bias, *, decay: float = 0.7):
        coef = np.asarray(coef, dtype=np.float64)
        bias = np.asarray(bias, dtype=np.float64)
        if bias.ndim != 1 or bias.size < 2:
            raise ValueError("bias must be a 1-D array with one intercept per name (W >= 2)")
        W = bias.size
        if coef.shape == (N_FEATURES,):
            coef = np.tile(coef, (W, 1))
        if coef.shape != (W, N_FEATURES):
            raise ValueError(
                f"coef must have shape ({N_FEATURES},) or ({W}, {N_FEATURES}) for features "
                f"({', '.join(FEATURE_NAMES)}); got shape {coef.shape}"
            )
        if not (np.all(np.isfinite(coef)) and np.all(np.isfinite(bias))):
            raise ValueError("coef and bias must be finite")
        if not 0.0 < float(decay) <= 1.0:
            raise ValueError(f"decay must be in (0, 1]; got {decay}")
        coef.setflags(write=False)
        bias.setflags(write=False)
        object.__setattr__(self, "n_names", int(W))
        object.__setattr__(self, "coef", coef)
        object.__setattr__(self, "bias", bias)
        object.__setattr__(self, "decay", float(decay))

    def kernel_params(self, memory: int) -> np.ndarray:
        # layout: [decay, coef (W x 6, row-major), bias (W)]
        return np.concatenate([[self.decay], self.coef.reshape(-1), self.bias])

    def probs(self, memory_entries, memory: int) -> np.ndarray:
        # same accumulation order as the kernel, so that the two agree to the last bit
        th = [[float(c) for c in row] for row in self.coef]
        u = [float(b) for b in self.bias]
        k = len(memory_entries)
        if k:
            tot = sum(self.decay ** (k - 1 - i) for i in range(k))
            for i, (own, partner) in enumerate(memory_entries):
                w = self.decay ** (k - 1 - i) / tot
                u[partner] += th[partner][0] * w
                u[own] += th[own][1] * w
                if own == partner:
                    u[own] += th[own][2] * w
            own, partner = memory_entries[-1]
            u[partner] += th[partner][3]
            if own == partner:
                u[own] += th[own][4]
                run = 0
                for o, p in reversed(memory_entries):
                    if o == p == own:
                        run += 1
                    else:
                        break
                u[own] += th[own][5] * run / memory
        top = max(u)
        e = [math.exp(v - top) for v in u]
        tot = sum(e)
        return np.array([v / tot for v in e])


def memory_features(memory_entries, n_names: int, memory: int, decay: float) -> list[list[float]]:
    """Features :data:`FEATURE_NAMES` of each name for one memory (pure Python reference).

    Parameters
    ----------
    memory_entries : sequence of (int, int)
        ``(own, partner)`` name indices, oldest first.
    n_names, memory : int
    decay : float

    Returns
    -------
    list of list of float
        ``x[n][f]``.
    """
    k = len(memory_entries)
    x = [[0.0] * N_FEATURES for _ in range(n_names)]
    if k == 0:
        return x
    wts = [decay ** (k - 1 - i) for i in range(k)]
    tot = sum(wts)
    for (own, partner), w in zip(memory_entries, wts):
        x[partner][0] += w / tot
        x[own][1] += w / tot
        if own == partner:
            x[own][2] += w / tot
    own, partner = memory_entries[-1]
    x[partner][3] = 1.0
    if own == partner:
        x[own][4] = 1.0
        run = 0
        for o, p in reversed(memory_entries):
            if o == p == own:
                run += 1
            else:
                break
        x[own][5] = run / memory
    return x


@dataclass(frozen=True, init=False)
class FunctionStrategy(Strategy):
    """A user strategy: a Numba-compiled function ``fn(own, partner, n_names, params, out)``.

    ``own`` and ``partner`` are int64 arrays of the memory, oldest first (length 0..H);
    ``fn`` must write a probability vector into ``out`` (float64, length ``n_names``).
    The game kernel is compiled for each distinct function (about 10 s, once per process; not
    cached on disk). For repeated use on small pools, :meth:`to_table` gives a
    :class:`StrategyTable`, which runs on the cached kernel.

    Parameters
    ----------
    fn : numba.core.registry.CPUDispatcher
        A function decorated with ``numba.njit``.
    n_names : int
    params : array_like of float, optional
        Passed to ``fn`` unchanged.
    """

    fn: object = None
    params: np.ndarray = field(default=None)
    kind = KIND_USER

    def __init__(self, fn, n_names: int, params=None):
        if not hasattr(fn, "py_func") or not hasattr(fn, "compile"):
            raise TypeError("fn must be a Numba-compiled function (decorate it with numba.njit)")
        if isinstance(n_names, bool) or not isinstance(n_names, (int, np.integer)) or n_names < 2:
            raise ValueError(f"n_names must be an int >= 2; got {n_names!r}")
        object.__setattr__(self, "n_names", int(n_names))
        object.__setattr__(self, "fn", fn)
        object.__setattr__(self, "params", np.asarray([] if params is None else params, dtype=np.float64))

    def kernel_params(self, memory: int) -> np.ndarray:
        return self.params

    def check(self, memory: int, n_samples: int = 32) -> None:
        """Evaluate the pure-Python function on the empty memory and random memories; raise a
        ``ValueError`` if it does not return probability vectors (before any compilation)."""
        rng = np.random.default_rng(0)
        mems = [[]] + [
            [tuple(rng.integers(0, self.n_names, 2)) for _ in range(rng.integers(1, memory + 1))]
            for _ in range(n_samples)
        ]
        for m in mems:
            try:
                p = self.probs([(int(o), int(q)) for o, q in m], memory)
            except Exception as exc:  # noqa: BLE001 - report any failure of user code
                raise ValueError(f"strategy function failed on memory {m}: {exc!r}") from exc
            if not (np.all(np.isfinite(p)) and p.min() >= 0 and abs(p.sum() - 1) <= 1e-6):
                raise ValueError(f"strategy function returned an invalid probability vector {p} for memory {m}")

    def probs(self, memory_entries, memory: int) -> np.ndarray:
        own = np.array([o for o, _ in memory_entries], dtype=np.int64)
        partner = np.array([p for _, p in memory_entries], dtype=np.int64)
        out = np.zeros(self.n_names)
        self.fn.py_func(own, partner, self.n_names, self.params, out)
        return out


BUILTIN = {
    "best_response": BestResponse,
    "centola": BestResponse,
    "wsls": WinStayLoseShift,
    "win_stay_lose_shift": WinStayLoseShift,
}


def resolve_strategy(strategy, n_names: int | None) -> Strategy:
    """A :class:`Strategy` from an object or a built-in name (``"best_response"``, ``"wsls"``)."""
    if isinstance(strategy, str):
        if strategy not in BUILTIN:
            raise ValueError(f"unknown strategy {strategy!r}; built-ins are {sorted(BUILTIN)}, or pass a Strategy object")
        W = 2 if n_names is None else int(n_names)
        if W < 2:
            raise ValueError(f"n_names must be >= 2; got {W}")
        return BUILTIN[strategy](n_names=W)
    if not isinstance(strategy, Strategy):
        raise TypeError(f"strategy must be a Strategy object or a built-in name; got {type(strategy).__name__}")
    if n_names is not None and int(n_names) != strategy.n_names:
        raise ValueError(f"n_names={n_names} disagrees with the strategy's {strategy.n_names} names")
    return strategy


# ----------------------------------------------------------------------------- Numba versions
@njit(cache=True)
def _strategy_probs(kind, own, partner, k, code, W, H, params, out):
    """Kernel-side p(name | memory) for the built-in kinds; writes ``out``."""
    if kind == KIND_TABLE:
        base = code * W
        for q in range(W):
            out[q] = params[base + q]
    elif kind == KIND_BEST_RESPONSE:
        if k == 0:
            for q in range(W):
                out[q] = 1.0 / W
            return
        for q in range(W):
            out[q] = 0.0
        for i in range(k):
            out[partner[i]] += 1.0
        top = 0.0
        for q in range(W):
            if out[q] > top:
                top = out[q]
        n_top = 0
        for q in range(W):
            if out[q] == top:
                n_top += 1
        for q in range(W):
            out[q] = 1.0 / n_top if out[q] == top else 0.0
    elif kind == KIND_WSLS:
        if k == 0:
            for q in range(W):
                out[q] = 1.0 / W
            return
        for q in range(W):
            out[q] = 0.0
        o = own[k - 1]
        p = partner[k - 1]
        out[o if o == p else p] = 1.0
    elif kind == KIND_LOGIT:
        _logit_probs(own, partner, k, W, H, params, out)


@njit(cache=True)
def _logit_probs(own, partner, k, W, H, params, out):
    """Kernel version of :meth:`LogitStrategy.probs`; ``params = [decay, coef (W x 6), bias (W)]``."""
    decay = params[0]
    F = N_FEATURES
    nb = 1 + W * F  # start of the intercepts
    for q in range(W):
        out[q] = params[nb + q]
    if k > 0:
        tot = 0.0
        for i in range(k):
            tot += decay ** (k - 1 - i)
        for i in range(k):
            w = decay ** (k - 1 - i) / tot
            out[partner[i]] += params[1 + partner[i] * F + 0] * w
            out[own[i]] += params[1 + own[i] * F + 1] * w
            if own[i] == partner[i]:
                out[own[i]] += params[1 + own[i] * F + 2] * w
        o = own[k - 1]
        p = partner[k - 1]
        out[p] += params[1 + p * F + 3]
        if o == p:
            out[o] += params[1 + o * F + 4]
            run = 0
            for i in range(k - 1, -1, -1):
                if own[i] == o and partner[i] == o:
                    run += 1
                else:
                    break
            out[o] += params[1 + o * F + 5] * run / H
    top = out[0]
    for q in range(1, W):
        if out[q] > top:
            top = out[q]
    s = 0.0
    for q in range(W):
        out[q] = math.exp(out[q] - top)
        s += out[q]
    for q in range(W):
        out[q] /= s
