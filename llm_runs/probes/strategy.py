"""Strategy tables: ``p(name | memory state)`` for every memory state up to ``H`` (Table 1,
Fig. S8), exact (next-token distributions per name order) or sampled."""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np
import pandas as pd

from normlab import theory
from normlab._display import fmt, html_card, legend_outside, load_result, new_axes, plain, plotting, save_result, short_repr
from normlab.schema import memory_state_string, parse_memory_state, relabel_state, validate_names
from normlab.cli_output import show_progress

from ..backend import EndpointConfig
from ..core.sync import run_sync
from ..runner.estimate import distinct_prompts, prompt_tokens
from ..runner.mode import EXACT, mode_of
from .common import clopper_pearson, none_nan, probe_settings, reject_unknown, resolve_endpoint
from .session import ProbeSession


def enumerate_states(names: Sequence[str], memory: int) -> list[str]:
    """Every memory state of length 0..``memory`` over the pool (schema strings, oldest first).

    There are ``sum_k W^(2k)`` states (1365 for W = 2, H = 5), ordered by length, then by the
    pool order of the entries.

    References
    ----------
    Flint Ashery, Aiello, Baronchelli, Sci. Adv. 11, eadu9368 (2025): Table 1; Fig. S8.
    """
    names = validate_names(names)
    pairs = [(a, b) for a in names for b in names]
    out = []
    for k in range(memory + 1):
        for combo in itertools.product(pairs, repeat=k):
            out.append(memory_state_string(combo))
    return out


def mirror_map(names: Sequence[str]) -> dict:
    """The relabelling reversing the pool (``Q <-> M`` for ``W = 2``)."""
    return dict(zip(names, reversed(names)))



#: Most memory states a strategy-table probe asks about (W = 2: H <= 8, as the calibration's tables).
MAX_TABLE_STATES = 200_000


def check_table_size(n_names: int, memory: int) -> int:
    """The number of memory states of lengths ``0..memory`` over ``n_names`` names; a
    ``ValueError`` when a strategy table would exceed :data:`MAX_TABLE_STATES` (a probe of that
    size would enumerate for minutes before its first request)."""
    n, k = 0, 0
    while k <= memory:
        n += (n_names * n_names) ** k
        if n > MAX_TABLE_STATES:
            raise ValueError(f"a strategy table of {n_names} names up to memory H = {memory} has more than "
                             f"{MAX_TABLE_STATES:,} memory states; lower --memory (W = 2: at most 8)")
        k += 1
    return n



def ordered_prompt_text(tpl, s, memory, order) -> str:
    """The text of a probe prompt (``order``: indices of the names shown; ``None``: as listed),
    used only to order requests so that prompts sharing a prefix are asked one after another."""
    shown = list(s.names) if order is None else [s.names[k] for k in order]
    p = tpl.render(list(memory), shown, payoffs=s.payoffs)
    return "".join(m["content"] for m in p.messages(None))


@dataclass(frozen=True)
class StrategyProbe:
    """``p(name | memory state)`` for every memory state up to ``H`` (W = 2: Table 1, Fig. S8).

    Attributes
    ----------
    names : tuple of str
    memory : int
    mode : str
        ``"exact"`` or ``"sample"``.
    table : pandas.DataFrame
        One row per (``memory_state``, ``name``) -- see :meth:`to_frame`.
    by_order_table : pandas.DataFrame
        Exact mode: one row per (state, name order shown, name); empty in sample mode.
    model : str
    llm_calls : int

    References
    ----------
    Flint Ashery, Aiello, Baronchelli, Sci. Adv. 11, eadu9368 (2025): Table 1; Supplementary
    Text, Statistical Tests for Table 1, Characterizing Relative Strength; Fig. S8; Tables S5, S6.
    """

    names: tuple
    memory: int
    mode: str
    table: pd.DataFrame
    by_order_table: pd.DataFrame
    model: str
    llm_calls: int

    #: The type tag a saved probe carries (``normlab.load``) stays the one of the one-module layout,
    #: so folders saved before and after the split read back alike.
    __module__ = "normlab.llm_runs.probes"

    def to_frame(self) -> pd.DataFrame:
        """Tidy table, one row per (memory state, name).

        Columns: ``memory_state`` (schema string), ``memory_len``, ``name``, ``p`` (exact: the
        model's probability averaged over the name orders probed; sample: ``count / n``),
        ``covered_mass`` (exact; NaN in sample mode), ``n_orders``, ``count``, ``n``
        (sample: valid answers; exact: NA), ``n_invalid``, ``ci_low``, ``ci_high``
        (Clopper-Pearson 95%, sample mode), ``mirror_state``, ``mirror_name`` (the state and
        name with the pool relabelled in reverse, ``Q <-> M``), ``mode``, ``model``.
        """
        return self.table.copy()

    def by_order(self) -> pd.DataFrame:
        """Exact mode: one row per (state, ``order`` shown, name) before averaging over orders."""
        return self.by_order_table.copy()

    def symmetry(self) -> pd.DataFrame:
        """``p(name | state)`` next to ``p(mirror_name | mirror_state)`` and their difference (a
        label-symmetric model has ``diff == 0``; the paper's strong/weak conventions do not)."""
        t = self.table[["memory_state", "name", "p", "mirror_state", "mirror_name"]]
        m = t.rename(columns={"memory_state": "mirror_state", "name": "mirror_name", "p": "p_mirror",
                              "mirror_state": "_ms", "mirror_name": "_mn"})[["mirror_state", "mirror_name", "p_mirror"]]
        out = t.merge(m, on=["mirror_state", "mirror_name"], how="left")
        out["diff"] = out["p"] - out["p_mirror"]
        return out

    def to_strategy_table(self, *, default=None):
        """The probed probabilities as a :class:`normlab.theory.StrategyTable`, ready for
        :func:`normlab.theory.strategy_game` (states left unprobed are filled from ``default``,
        a theory strategy, or must not exist)."""
        df = self.table[["memory_state", "name", "p"]].dropna(subset=["p"])
        return theory.StrategyTable.from_frame(df, memory=self.memory, names=self.names, default=default)

    # ------------------------------------------------------------------ display, save / load
    def summary(self) -> dict:
        """What was probed and the headline probabilities, as plain Python values: p(name | empty
        memory), the largest relabelling asymmetry, the mean covered mass (exact mode)."""
        t = self.table
        first = t[t["memory_len"] == 0].set_index("name")["p"]
        sym = self.symmetry()["diff"].abs()
        return plain({"model": self.model, "mode": self.mode, "names": list(self.names), "memory": self.memory,
                      "states": int(t["memory_state"].nunique()), "llm_calls": self.llm_calls,
                      "p_empty_memory": {str(k): none_nan(float(v)) for k, v in first.items()},
                      "max_asymmetry": none_nan(float(sym.max())) if len(sym) else None,
                      "mean_covered_mass": none_nan(float(t["covered_mass"].mean())) if mode_of(self.mode) is EXACT else None,
                      "invalid": int(t.drop_duplicates("memory_state")["n_invalid"].fillna(0).sum())})

    def __repr__(self) -> str:
        s = self.summary()
        first = ", ".join(f"p({k})={fmt(v)}" for k, v in s["p_empty_memory"].items())
        return short_repr("StrategyProbe", self.model, f"{self.mode} mode", f"names {','.join(self.names)}",
                          f"H={self.memory}", f"{s['states']} states", f"empty memory: {first}",
                          f"max asymmetry {fmt(s['max_asymmetry'])}", f"{self.llm_calls} LLM calls")

    def _repr_html_(self) -> str:
        s = self.summary()
        t = self.table
        rows = []
        for L in range(self.memory + 1):  # one row per memory length and name: mean p, range over states
            sub = t[t["memory_len"] == L]
            for nm, g in sub.groupby("name", sort=False):
                rows.append((f"p({nm}), memory length {L}", float(g["p"].mean()),
                             f"{fmt(g['p'].min())} .. {fmt(g['p'].max())}", f"mean (range) over {len(g)} states"))
        rows.append(("largest |p(n|s) - p(mirror n|mirror s)|", s["max_asymmetry"]))
        if s["mean_covered_mass"] is not None:
            rows.append(("mean covered probability mass", s["mean_covered_mass"]))
        return html_card("StrategyProbe", rows, level=None,
                         subtitle=f"p(name | memory) of {self.model}, {self.mode} mode, H = {self.memory}",
                         settings={"states": s["states"], "LLM calls": self.llm_calls, "invalid": s["invalid"]},
                         note=".plot() draws the heat map (kind='symmetry': p against its relabelled mirror); "
                              ".to_frame() gives every state; .save(path) keeps it.")

    @plotting
    def plot(self, kind: str = "heatmap", *, name: str | None = None, memory_len: int | None = None, ax=None):
        """The probed strategy: a heat map of p(name | memory) over own and partner histories
        (Fig. S8), or each p(name | state) against its relabelled mirror (Table 1).

        Parameters
        ----------
        kind : {"heatmap", "symmetry"}, optional
        name : str, optional
            Heat map: the name coloured (default the last).
        memory_len : int, optional
            Heat map: memory length shown (default ``H``).
        ax : matplotlib Axes, optional

        Returns
        -------
        matplotlib.axes.Axes

        References
        ----------
        Flint Ashery, Aiello, Baronchelli, Sci. Adv. 11, eadu9368 (2025): Table 1, Fig. S8.
        """
        if kind == "heatmap":
            W = len(self.names)
            missing = set(self.table.loc[self.table["p"].isna(), "memory_state"])
            uniform = theory.StrategyTable(np.full((theory.strategies.n_states(W, self.memory), W), 1.0 / W),
                                           memory=self.memory, names=self.names)
            tab = self.to_strategy_table(default=uniform)
            unseen = np.array([tab.state_label(k) in missing for k in range(tab.table.shape[0])])
            ax = tab.plot(name=name, memory_len=memory_len, unseen=unseen if unseen.any() else None, ax=ax)
            ax.set_title(f"{self.model}: " + ax.get_title(), fontsize=9)
            return ax
        if kind != "symmetry":
            raise ValueError(f"kind must be 'heatmap' or 'symmetry'; got {kind!r}")
        sym = self.symmetry().dropna(subset=["p", "p_mirror"])
        sym = sym[sym["memory_state"] != sym["mirror_state"]]
        ax = new_axes(ax, (6.4, 4.6))
        lens = self.table.drop_duplicates("memory_state").set_index("memory_state")["memory_len"]
        sym = sym.assign(memory_len=sym["memory_state"].map(lens))
        for k, (L, g) in enumerate(sym.groupby("memory_len")):
            ax.scatter(g["p_mirror"], g["p"], s=18, alpha=0.7, color=f"C{k}", label=f"memory length {L}")
        ax.plot([0, 1], [0, 1], color="0.4", lw=1, ls="--", label="symmetric")
        ax.set(xlim=(-0.02, 1.02), ylim=(-0.02, 1.02), xlabel="p(mirror name | relabelled state)",
               ylabel="p(name | state)", title=f"{self.model}: relabelling symmetry")
        ax.title.set_fontsize(9)
        legend_outside(ax)
        return ax

    def save(self, path) -> Path:
        """Write the probe to the folder ``path`` (``result.json``, ``table.parquet``,
        ``by_order.parquet``); read it back with :meth:`load` or ``normlab.load``."""
        meta = {"names": list(self.names), "memory": self.memory, "mode": self.mode, "model": self.model,
                "llm_calls": self.llm_calls}
        return save_result(path, type(self), meta, {"table": self.table, "by_order": self.by_order_table})

    @classmethod
    def load(cls, path) -> "StrategyProbe":
        """Read a probe written by :meth:`save`."""
        meta, t = load_result(path, cls)
        return cls(names=tuple(meta["names"]), memory=int(meta["memory"]), mode=meta["mode"], table=t["table"],
                   by_order_table=t["by_order"], model=meta["model"], llm_calls=int(meta["llm_calls"]))

    @classmethod
    def _contract_example(cls) -> "StrategyProbe":
        """An exact table of two names and memory one (five states, both name orders), literal
        probabilities (``tests/umbrella/test_contracts.py``)."""
        names = ("A", "B")
        mirror = mirror_map(names)
        p_b = [0.5, 0.2, 0.6, 0.4, 0.9]  # p(B | state), in enumerate_states order
        rows, order_rows = [], []
        for st, pb in zip(enumerate_states(names, 1), p_b):
            ln = len(parse_memory_state(st))
            for order, d in (("A,B", -0.05), ("B,A", 0.05)):
                for n, p in zip(names, (1 - pb - d, pb + d)):
                    order_rows.append({"memory_state": st, "memory_len": ln, "order": order, "name": n, "p": p,
                                       "covered_mass": 0.9})
            for n, p in zip(names, (1 - pb, pb)):
                rows.append({"memory_state": st, "memory_len": ln, "name": n, "p": p, "covered_mass": 0.9,
                             "n_orders": 2, "count": pd.NA, "n": pd.NA, "n_invalid": 0})
        table = pd.DataFrame(rows)
        table["ci_low"] = table["ci_high"] = np.nan
        for c in ("count", "n", "n_orders"):
            table[c] = table[c].astype("Int64")
        table["mirror_state"] = [relabel_state(x, mirror) for x in table["memory_state"]]
        table["mirror_name"] = [mirror[x] for x in table["name"]]
        table["mode"], table["model"] = "exact", "stub-model"
        return cls(names=names, memory=1, mode="exact", table=table, by_order_table=pd.DataFrame(order_rows),
                   model="stub-model", llm_calls=10)


async def astrategy_table(names, memory: int, *, mode: str = "exact", samples: int = 20, orders="all",
                          template="main", endpoint: EndpointConfig | None = None, out=None,
                          progress: bool = True, rng=None, **kw) -> StrategyProbe:
    """Coroutine version of :func:`strategy_table`."""
    endpoint = resolve_endpoint(endpoint)
    cache = kw.pop("cache", None)
    s, tpl, _ = probe_settings(names, memory, mode, template, kw, endpoint.embedded)
    reject_unknown(kw)
    W = len(s.names)
    if isinstance(samples, bool) or not isinstance(samples, (int, np.integer)) or samples < 1:
        raise ValueError(f"samples must be an int >= 1; got {samples!r}")
    all_orders = list(itertools.permutations(range(W)))
    if orders == "all":
        order_list = all_orders
    elif isinstance(orders, (int, np.integer)) and not isinstance(orders, bool) and 1 <= orders:
        order_list = all_orders[: int(orders)]
    else:
        raise ValueError(f"orders must be 'all' or an int >= 1; got {orders!r}")
    check_table_size(W, s.memory)
    states = enumerate_states(s.names, s.memory)
    jobs = []
    exact = s.decision is EXACT  # a distribution per name order, or samples in random orders
    if exact:
        for si, st in enumerate(states):
            mem = tuple(parse_memory_state(st))
            for oi, o in enumerate(order_list):
                jobs.append((f"{st}|{oi}", si * len(order_list) + oi, mem, np.array(o)))
    else:
        for si, st in enumerate(states):
            mem = tuple(parse_memory_state(st))
            for k in range(samples):
                jobs.append((f"{st}|s{k}", si * samples + k, mem, None))
    extra = {"orders": orders if orders == "all" else int(orders), "samples": int(samples)}
    # ask in the order of the prompts' text (a depth-first walk of their prefix tree): each prompt
    # follows the one it shares most with, which a bounded prompt cache still holds
    first = [ordered_prompt_text(tpl, s, m, o) for _, _, m, o in jobs]
    perm = sorted(range(len(jobs)), key=first.__getitem__)
    async with ProbeSession("strategy", s, tpl, endpoint, out, progress, rng, extra, cache) as pr:
        done = await pr.run_all([jobs[i] for i in perm], f"strategy table H={s.memory}")
        calls, model = pr.llm_calls, pr.s.model
    sides = [None] * len(jobs)
    for i, side in zip(perm, done):
        sides[i] = side
    mirror = mirror_map(s.names)
    rows, order_rows = [], []
    per_state = len(order_list) if exact else samples
    for si, st in enumerate(states):
        chunk = sides[si * per_state:(si + 1) * per_state]
        ln = len(parse_memory_state(st))
        if exact:
            ps = [x.probs for x in chunk if x.probs is not None]
            covs = [0.0 if x.covered_mass is None else x.covered_mass for x in chunk]
            pm = np.mean(ps, axis=0) if ps else np.full(W, np.nan)
            for x, o in zip(chunk, order_list):
                shown = ",".join(s.names[k] for k in o)
                for w, n in enumerate(s.names):
                    order_rows.append({"memory_state": st, "memory_len": ln, "order": shown, "name": n,
                                       "p": x.probs[w] if x.probs is not None else np.nan,
                                       "covered_mass": np.nan if x.covered_mass is None else x.covered_mass})
            for w, n in enumerate(s.names):
                rows.append({"memory_state": st, "memory_len": ln, "name": n, "p": float(pm[w]),
                             "covered_mass": float(np.mean(covs)), "n_orders": len(ps),
                             "count": pd.NA, "n": pd.NA, "n_invalid": sum(1 for x in chunk if x.probs is None)})
        else:
            valid = [x.name for x in chunk if x.name is not None]
            nv = len(valid)
            for n in s.names:
                c = sum(1 for v in valid if v == n)
                rows.append({"memory_state": st, "memory_len": ln, "name": n, "p": c / nv if nv else np.nan,
                             "covered_mass": np.nan, "n_orders": pd.NA, "count": c, "n": nv,
                             "n_invalid": len(chunk) - nv})
    table = pd.DataFrame(rows)
    if not exact:
        lo, hi = clopper_pearson(table["count"].astype(float), table["n"].astype(float))
    else:
        lo = hi = np.full(len(table), np.nan)
    table["ci_low"], table["ci_high"] = lo, hi
    for c in ("count", "n", "n_orders"):
        table[c] = table[c].astype("Int64")
    table["mirror_state"] = [relabel_state(x, mirror) for x in table["memory_state"]]
    table["mirror_name"] = [mirror[x] for x in table["name"]]
    table["mode"] = s.mode
    table["model"] = model
    by_order = pd.DataFrame(order_rows, columns=["memory_state", "memory_len", "order", "name", "p", "covered_mass"])
    return StrategyProbe(names=s.names, memory=s.memory, mode=s.mode, table=table, by_order_table=by_order,
                         model=model, llm_calls=calls)


def strategy_table(names, memory: int, *, mode: str = "exact", samples: int = 20, orders="all",
                   template="main", endpoint: EndpointConfig | None = None, out=None, progress: bool = True,
                   rng=None, **kw) -> StrategyProbe:
    """Measure ``p(name | memory state)`` for every memory state up to ``memory``.

    Parameters
    ----------
    names : str or sequence of str
        Name pool (W = 2 in the paper: ``sum_k 4^k`` states, 1365 for H = 5).
    memory : int
        Largest memory length ``H``; all states of length ``0..H`` are probed.
    mode : {"exact", "sample"}
        ``"exact"``: the model's distribution for each state and each name order in ``orders``
        (one request per (state, order) for single-token names), averaged over orders in
        :meth:`StrategyProbe.to_frame` and kept per order in :meth:`StrategyProbe.by_order`.
        ``"sample"``: ``samples`` generations per state (random orders), with Clopper-Pearson
        intervals.
    samples : int
        Sample mode: generations per state.
    orders : "all" or int
        Exact mode: all ``W!`` orders (default) or the first ``k`` of them.
    template, endpoint, out, progress, rng, **kw
        As in :func:`individual_bias`; ``out`` makes long tables resumable; ``cache=DIR``
        reuses exact-mode distributions journaled there (e.g. a smaller table or a run).

    Returns
    -------
    StrategyProbe
        Tidy ``to_frame()`` for :mod:`normlab.calibration`; ``symmetry()`` compares
        ``p(A | s)`` with ``p(B | relabel(s))``.

    References
    ----------
    Flint Ashery, Aiello, Baronchelli, Sci. Adv. 11, eadu9368 (2025): Table 1; Fig. S8;
    Supplementary Text, Statistical Tests for Table 1 and Characterizing Relative Strength.
    """
    return run_sync(lambda: astrategy_table(names, memory, mode=mode, samples=samples, orders=orders,
                                            template=template, endpoint=endpoint, out=out, progress=progress,
                                            rng=rng, **kw))


# ----------------------------------------------------------------------------- command line (normlab llm-probe strategy; see registry.py)
def command_design(args) -> tuple:
    """The pool and the longest memory the probe's prompts show."""
    return args.names, args.memory


def command_run(args, sampling: dict, endpoint, mode: str) -> tuple:
    """Run the probe for ``normlab llm-probe strategy``: ``(result, full table, summary)``."""
    r = strategy_table(args.names, args.memory, mode=mode, samples=args.samples, endpoint=endpoint,
                       out=args.out, progress=show_progress(args), rng=args.seed, cache=args.cache,
                       **sampling)
    frame = r.to_frame()
    summary = {"probe": "strategy", "model": r.model, "mode": r.mode, "names": list(r.names),
               "memory": r.memory, "states": int(frame["memory_state"].nunique()), "llm_calls": r.llm_calls}
    return r, frame, summary


def command_table(result, frame) -> pd.DataFrame:
    """p(name | memory state), one row per state."""
    t = frame.pivot_table(index="memory_state", columns="name", values="p", sort=False)
    t = t[[n for n in result.names if n in t.columns]]
    t.columns = [f"p({n})" for n in t.columns]
    return t.reset_index().replace({"memory_state": {"": "(empty)"}})


def command_estimate(args, s, tpl, per) -> tuple:
    """``--dry-run``: ``(requests (typical, at most), prompt tokens per request, what, notes)``."""
    W, memory = len(s.names), args.memory
    check_table_size(W, memory)
    counts = [(W * W) ** k for k in range(memory + 1)]
    ptok = sum(c * prompt_tokens(s, tpl, k) for k, c in enumerate(counts)) / sum(counts)
    n = distinct_prompts(s.names, memory) if s.decision is EXACT else sum(counts) * args.samples  # decisions
    reqs = s.decision.requests((n, n), n, s.max_reasks)
    what = f"strategy table: {sum(counts):,} memory states up to H = {memory}, {s.mode} mode"
    return reqs, ptok, what, []
