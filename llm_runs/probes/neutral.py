"""Neutral names: random name pools drawn until one is neutral for empty-memory agents (JSD from
uniform below a threshold; Figs. S11, S12)."""

from __future__ import annotations

import itertools
import math
import string
from dataclasses import dataclass

import numpy as np
import pandas as pd

from normlab._display import html_card, legend_outside, new_axes, plain, plotting, short_repr
from normlab._rng import as_seed_sequence
from normlab._validate import check_int
from normlab.cli_output import show_progress

from ..backend import EndpointConfig
from ..core.sync import run_sync
from ..runner.estimate import prompt_tokens
from ..runner.sampling import SAMPLING_KEYS
from .common import bias_stats, probe_settings, reject_unknown, resolve_endpoint
from .session import ProbeSession

ALPHABET = string.digits + string.ascii_letters


@dataclass(frozen=True)
class NeutralSearch:
    """Search for a neutral pool of random names (JSD from uniform below a threshold).

    Attributes
    ----------
    names : tuple of str or None
        The first accepted pool (``None`` if none was found).
    threshold : float
    candidates : pandas.DataFrame
        One row per pool tried: ``pool`` (comma-joined), ``jsd``, ``p_first`` (probability of the
        pool's first name), ``covered_mass``, ``accepted``.
    llm_calls : int

    References
    ----------
    Flint Ashery, Aiello, Baronchelli, Sci. Adv. 11, eadu9368 (2025): Supplementary Text,
    Alternative Prompts and Effect of Fine-Tuning (JSD < 0.005); Figs. S11, S12; Table S6.
    """

    names: tuple | None
    threshold: float
    candidates: pd.DataFrame
    llm_calls: int

    def to_frame(self) -> pd.DataFrame:
        return self.candidates.copy()

    def summary(self) -> dict:
        """The accepted pool, the threshold and the JSD of every pool tried (plain Python)."""
        c = self.candidates
        return plain({"names": None if self.names is None else list(self.names), "threshold": self.threshold,
                      "pools_tried": len(c), "llm_calls": self.llm_calls,
                      "best_jsd": float(c["jsd"].min()) if len(c) else None,
                      "jsd": {str(p): float(j) for p, j in zip(c.get("pool", []), c.get("jsd", []))}})

    def __repr__(self) -> str:
        c = self.candidates
        found = f"found {','.join(self.names)}" if self.names is not None else "no neutral pool"
        best = f"best JSD {c['jsd'].min():.4f}" if len(c) else None
        return short_repr("NeutralSearch", found, f"threshold {self.threshold:g}", f"{len(c)} pools tried", best,
                          f"{self.llm_calls} LLM calls")

    def _repr_html_(self) -> str:
        rows = [(str(r["pool"]), r["jsd"], None, "accepted" if r.get("accepted") else "")
                for _, r in self.candidates.iterrows()]
        return html_card("NeutralSearch", rows, level=None,
                         subtitle=("found " + ",".join(self.names)) if self.names else "no neutral pool found",
                         settings={"threshold (JSD)": self.threshold, "LLM calls": self.llm_calls},
                         note="value = Jensen-Shannon distance from uniform; .plot() draws it per pool.")

    @plotting
    def plot(self, *, ax=None):
        """JSD from uniform of every pool tried, with the acceptance threshold.

        Returns
        -------
        matplotlib.axes.Axes

        References
        ----------
        Flint Ashery, Aiello, Baronchelli, Sci. Adv. 11, eadu9368 (2025): Figs. S11, S12 (JSD < 0.005).
        """
        c = self.candidates
        ax = new_axes(ax, (max(4.0, 0.45 * len(c) + 2.5), 3.6))
        x = np.arange(len(c))
        acc = c["accepted"].astype(bool).to_numpy() if "accepted" in c else np.zeros(len(c), bool)
        ax.scatter(x[~acc], c["jsd"].to_numpy()[~acc], color="C0", label="rejected")
        ax.scatter(x[acc], c["jsd"].to_numpy()[acc], color="C2", marker="*", s=120, label="accepted")
        ax.axhline(self.threshold, color="C3", ls="--", lw=1, label=f"threshold {self.threshold:g}")
        ax.set_xticks(x, [str(p) for p in c["pool"]], rotation=90, fontsize=7, family="monospace")
        ax.set(ylabel="JSD from uniform (base 2)", xlabel="pool tried", yscale="log" if len(c) and
               (c["jsd"] > 0).all() else "linear")
        legend_outside(ax)
        return ax

    @classmethod
    def _contract_example(cls) -> "NeutralSearch":
        """Three pools tried, the third accepted, literal numbers (``tests/umbrella/test_contracts.py``)."""
        c = pd.DataFrame({"pool": ["ab1,Xy2", "q9,Zt", "k3p,W8m"], "jsd": [0.04, 0.012, 0.003],
                          "p_first": [0.62, 0.56, 0.52], "covered_mass": [0.9, 0.8, 0.95], "accepted": [False, False, True]})
        return cls(names=("k3p", "W8m"), threshold=0.005, candidates=c, llm_calls=6)



def random_names(n_names: int = 2, length: int = 6, *, alphabet: str = ALPHABET, rng=None) -> tuple:
    """A pool of distinct random strings (digits, lower- and upper-case letters by default)."""
    n_names = check_int(n_names, "n_names", low=2)
    length = check_int(length, "length", low=1)
    if len(set(alphabet)) ** length < n_names:
        raise ValueError(f"only {len(set(alphabet)) ** length} distinct names of length {length}; "
                         f"cannot draw {n_names}")
    g = np.random.default_rng(as_seed_sequence(rng)) if not isinstance(rng, np.random.Generator) else rng
    out: list[str] = []
    while len(out) < n_names:
        s = "".join(alphabet[int(k)] for k in g.integers(len(alphabet), size=length))
        if s not in out:
            out.append(s)
    return tuple(out)


def find_neutral_names(*, n_names: int = 2, length: int = 6, threshold: float = 0.005, max_pools: int = 20,
                       template="main", endpoint: EndpointConfig | None = None, progress: bool = True,
                       rng=None, **kw) -> NeutralSearch:
    """Draw random name pools until one is neutral for empty-memory agents (exact mode).

    For each candidate pool the exact next-token distribution is averaged over all name orders
    (``W!``, at most 24 random orders for larger pools) and its Jensen-Shannon distance (base
    2) from uniform is compared with ``threshold``.

    Parameters
    ----------
    n_names, length : int
        Pool size ``W`` and characters per name (6 in Flint Ashery et al. 2025).
    threshold : float
        Maximum JSD from uniform (0.005 in Flint Ashery et al. 2025).
    max_pools : int
        Pools tried at most.
    template, endpoint, progress, rng, **kw
        As in :func:`individual_bias`.

    Returns
    -------
    NeutralSearch

    References
    ----------
    Flint Ashery, Aiello, Baronchelli, Sci. Adv. 11, eadu9368 (2025): Supplementary Text,
    Alternative Prompts; Effect of Fine-Tuning; Figs. S11, S12.
    """
    if not (isinstance(threshold, (int, float)) and threshold > 0):
        raise ValueError(f"threshold must be > 0; got {threshold!r}")
    if not isinstance(max_pools, int) or max_pools < 1:
        raise ValueError(f"max_pools must be an int >= 1; got {max_pools!r}")
    random_names(n_names, length, rng=0)  # n_names >= 2 and length >= 1, before any work
    endpoint = resolve_endpoint(endpoint)
    ss = as_seed_sequence(rng)
    name_rng, run_rng = ss.spawn(2)
    g = np.random.default_rng(name_rng)
    pools = [random_names(n_names, length, rng=g) for _ in range(max_pools)]
    n_orders = math.factorial(n_names)

    async def main():
        rows, calls, found = [], 0, None
        for pool in pools:
            orders = list(itertools.permutations(range(n_names))) if n_orders <= 24 else None
            k = len(orders) if orders is not None else 24
            s, tpl, _ = probe_settings(pool, 1, "exact", template, dict(kw), endpoint.embedded)
            async with ProbeSession("neutral", s, tpl, endpoint, None, progress, run_rng, {}) as pr:
                sides = await pr.run_all(
                    [(f"o{i}", i, (), None if orders is None else np.array(orders[i])) for i in range(k)],
                    f"neutral? {','.join(pool)}")
                calls += pr.llm_calls
            ps = [x.probs for x in sides if x.probs is not None]
            p = np.mean(ps, axis=0) if ps else None
            _, _, _, jsd = bias_stats(pool, [0] * n_names, p) if p is not None else (None, None, None, np.nan)
            ok = bool(p is not None and jsd < threshold)
            rows.append({"pool": ",".join(pool), "jsd": jsd, "p_first": float(p[0]) if p is not None else np.nan,
                         "covered_mass": float(np.mean([0.0 if x.covered_mass is None else x.covered_mass
                                                        for x in sides])), "accepted": ok})
            if ok:
                found = pool
                break
        return NeutralSearch(names=found, threshold=float(threshold), candidates=pd.DataFrame(rows), llm_calls=calls)

    reject_unknown({k: v for k, v in kw.items() if k not in SAMPLING_KEYS})
    return run_sync(main)


# ----------------------------------------------------------------------------- command line (normlab llm-probe neutral; see registry.py)
def command_design(args) -> tuple:
    """The pool and the longest memory the probe's prompts show (placeholder names of the size drawn)."""
    return ",".join(f"n{k}" for k in range(args.n_names)), 1


def command_run(args, sampling: dict, endpoint, mode: str) -> tuple:
    """Run the probe for ``normlab llm-probe neutral``: ``(result, full table, summary)``."""
    kw = dict(sampling)
    kw.pop("template")
    r = find_neutral_names(n_names=args.n_names, length=args.length, threshold=args.threshold,
                           max_pools=args.max_pools, template=args.template, endpoint=endpoint,
                           progress=show_progress(args), rng=args.seed, **kw)
    frame = r.to_frame()
    summary = {"probe": "neutral", "names": list(r.names) if r.names else None,
               "pools_tried": int(len(frame)), "llm_calls": r.llm_calls}
    return r, frame, summary


def command_table(result, frame) -> pd.DataFrame:
    """The pools tried."""
    return frame[[c for c in ("pool", "jsd", "p_first", "accepted") if c in frame.columns]]


def command_estimate(args, s, tpl, per) -> tuple:
    """``--dry-run``: ``(requests (typical, at most), prompt tokens per request, what, notes)``."""
    orders = min(math.factorial(args.n_names), 24)
    n = args.max_pools * orders
    ptok = prompt_tokens(s, tpl, 0)
    reqs = (orders, n)
    what = f"neutral names: up to {args.max_pools} pools of {args.n_names} names x {orders} orders (exact)"
    return reqs, ptok, what, ["typical: the first pool is accepted; at most: every pool is tried"]
