"""The SCENE taxonomy (events, norms, elicitors, sanctions, precedent) and its valid tuples.

The axes and their IDs are the paper's (Appendix A.2-A.6); the ``applies_to`` lists are
normlab's, written from the paper's descriptions (the paper does not publish its lists), and
live in one data file, ``data/taxonomy.json``. A tuple is valid iff its event is in the
``applies_to`` lists of its norm, its elicitor and its sanction (Appendix A.7).

References
----------
M. Jacniacki, M. Bilski, "SCENE: Recognizing Social Norms and Sanctioning in Group Chats",
arXiv:2605.07823 (2026), Sect. 3; Appendix A.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import NamedTuple

import numpy as np
import pandas as pd

from normlab._rng import as_generator
from normlab._validate import check_int
from normlab.user_files import loads_json, read_user_text

AXES = ("event", "norm", "elicitor", "sanction", "precedent")
_SECTIONS = {"event": "events", "norm": "norms", "elicitor": "elicitors", "sanction": "sanctions",
             "precedent": "precedent"}


@dataclass(frozen=True)
class AxisEntry:
    """One entry of a taxonomy axis.

    Attributes
    ----------
    axis : str
        One of :data:`AXES`.
    id : str
    description : str
    applies_to : tuple of str or None
        Events under which the entry applies (norms, elicitors, sanctions); ``None`` for events
        and precedent.
    extra : dict
        The remaining fields of the data file (``pair``, ``opposite``, ``compliance_signal``,
        ``breach_signal``, ``channel``, ``features``, ``value``).
    """

    axis: str
    id: str
    description: str
    applies_to: tuple | None = None
    extra: dict = field(default_factory=dict, compare=False, hash=False)

    def __getitem__(self, key):
        return self.extra[key]


class SceneTuple(NamedTuple):
    """A scenario tuple ``(event, norm, elicitor, sanction, precedent)``; precedent is
    ``"present"`` or ``"absent"`` (Appendix A.6)."""

    event: str
    norm: str
    elicitor: str
    sanction: str
    precedent: str

    @property
    def precedent_flag(self) -> int:
        """``1`` when precedent is present, else ``0`` (the integer of ``scenario_v1``)."""
        return 1 if self.precedent == "present" else 0


@dataclass(frozen=True)
class Taxonomy:
    """The five axes of SCENE.

    Attributes
    ----------
    events, norms, elicitors, sanctions, precedent : tuple of AxisEntry
    source : str
        Where the taxonomy was read from.

    References
    ----------
    Jacniacki & Bilski, arXiv:2605.07823 (2026), Appendix A.1-A.7.
    """

    events: tuple
    norms: tuple
    elicitors: tuple
    sanctions: tuple
    precedent: tuple
    source: str = ""

    def ids(self, axis: str) -> tuple:
        """The IDs of one axis, in file order."""
        return tuple(e.id for e in self._axis(axis))

    def _axis(self, axis: str) -> tuple:
        if axis not in AXES:
            raise ValueError(f"unknown axis {axis!r}; allowed: {AXES}")
        return getattr(self, _SECTIONS[axis])

    def entry(self, axis: str, id: str) -> AxisEntry:
        """The entry ``id`` of ``axis``; ``ValueError`` naming the allowed IDs otherwise."""
        for e in self._axis(axis):
            if e.id == id:
                return e
        raise ValueError(f"unknown {axis} {id!r}; allowed: {', '.join(self.ids(axis))}")

    def opposite(self, norm: str) -> str:
        """The other pole of ``norm``'s opposing pair (Appendix A.3)."""
        return self.entry("norm", norm)["opposite"]

    @property
    def pairs(self) -> tuple:
        """The opposing norm pairs ``(pole_a, pole_b)`` in the paper's order (Appendix A.3)."""
        out = {}
        for e in self.norms:
            out.setdefault(e["pair"], []).append(e.id)
        return tuple(tuple(v) for _, v in sorted(out.items()))

    @property
    def sizes(self) -> dict:
        """Cardinality of each axis (13, 14, 7, 6, 2 for the built-in taxonomy)."""
        return {a: len(self._axis(a)) for a in AXES}

    def to_frame(self) -> pd.DataFrame:
        """One row per entry: ``axis``, ``id``, ``description``, ``applies_to`` (``;``-joined,
        empty for events and precedent), ``n_events``, ``pair``, ``opposite``."""
        rows = []
        for a in AXES:
            for e in self._axis(a):
                rows.append({"axis": a, "id": e.id, "description": e.description,
                             "applies_to": ";".join(e.applies_to) if e.applies_to is not None else "",
                             "n_events": len(e.applies_to) if e.applies_to is not None else np.nan,
                             "pair": e.extra.get("pair", np.nan), "opposite": e.extra.get("opposite")})
        return pd.DataFrame(rows)

    def __repr__(self) -> str:
        s = self.sizes
        return (f"Taxonomy({s['event']} events, {s['norm']} norms in {len(self.pairs)} pairs, "
                f"{s['elicitor']} elicitors, {s['sanction']} sanctions, {s['precedent']} precedent; "
                f"{len(valid_tuples(self))} valid tuples)")

    def _repr_html_(self) -> str:
        return f"<p><code>{self!r}</code></p>" + self.to_frame().to_html(index=False)

    @classmethod
    def _contract_example(cls) -> "Taxonomy":
        """The built-in taxonomy (``data/taxonomy.json``, as shipped; ``tests/umbrella/test_contracts.py``)."""
        return load_taxonomy()


def _entries(axis: str, items, events) -> tuple:
    if not isinstance(items, list) or not items:
        raise ValueError(f"taxonomy: {_SECTIONS[axis]!r} must be a non-empty list")
    out, seen = [], set()
    for item in items:
        if not isinstance(item, dict) or not isinstance(item.get("id"), str) or not item["id"]:
            raise ValueError(f"taxonomy: every {axis} needs a non-empty string 'id'; got {item!r}")
        if item["id"] in seen:
            raise ValueError(f"taxonomy: duplicate {axis} id {item['id']!r}")
        seen.add(item["id"])
        applies = None
        if axis in ("norm", "elicitor", "sanction"):
            applies = item.get("applies_to")
            if not isinstance(applies, list) or not applies:
                raise ValueError(f"taxonomy: {axis} {item['id']!r} needs a non-empty 'applies_to' list of events")
            unknown = [ev for ev in applies if ev not in events]
            if unknown:
                raise ValueError(f"taxonomy: {axis} {item['id']!r} applies to unknown events {unknown}")
            applies = tuple(applies)
        desc = item.get("description", item.get("setting", ""))
        extra = {k: v for k, v in item.items() if k not in ("id", "description", "setting", "applies_to")}
        out.append(AxisEntry(axis, item["id"], str(desc), applies, extra))
    return tuple(out)


def load_taxonomy(path: str | Path | None = None) -> Taxonomy:
    """Read a taxonomy file (default: the built-in ``data/taxonomy.json``) and check it.

    Parameters
    ----------
    path : str or pathlib.Path, optional
        A JSON file with ``events``, ``norms``, ``elicitors``, ``sanctions`` and ``precedent``
        lists (see the built-in file for the fields).

    Returns
    -------
    Taxonomy

    Raises
    ------
    ValueError
        Duplicate IDs, unknown events in an ``applies_to`` list, norms whose ``opposite`` is not
        a norm pointing back, or a precedent axis other than ``present``/``absent``.
    """
    if path is None:
        text = resources.files("normlab.llm_runs.scene.data").joinpath("taxonomy.json").read_text("utf-8")
        source = "normlab.llm_runs.scene/data/taxonomy.json"
    else:
        path = Path(path)
        if not (path.exists() or path.is_symlink()):
            raise ValueError(f"taxonomy file {path} does not exist")
        text, source = read_user_text(path, f"taxonomy file {path}"), str(path)  # a regular file, capped
    raw = loads_json(text, f"taxonomy file {source}")
    missing = [s for s in _SECTIONS.values() if s not in raw]
    if missing:
        raise ValueError(f"taxonomy file {source} lacks the sections {missing}")
    events = _entries("event", raw["events"], set())
    ev_ids = {e.id for e in events}
    tax = Taxonomy(events=events, norms=_entries("norm", raw["norms"], ev_ids),
                   elicitors=_entries("elicitor", raw["elicitors"], ev_ids),
                   sanctions=_entries("sanction", raw["sanctions"], ev_ids),
                   precedent=_entries("precedent", raw["precedent"], ev_ids), source=source)
    norm_ids = set(tax.ids("norm"))
    for e in tax.norms:
        opp = e.extra.get("opposite")
        if opp not in norm_ids or tax.entry("norm", opp).extra.get("opposite") != e.id:
            raise ValueError(f"taxonomy: norm {e.id!r} must name an opposite norm that names it back; got {opp!r}")
        if tax.entry("norm", opp).extra.get("pair") != e.extra.get("pair"):
            raise ValueError(f"taxonomy: norms {e.id!r} and {opp!r} must share one 'pair' number")
    if set(tax.ids("precedent")) != {"present", "absent"}:
        raise ValueError("taxonomy: the precedent axis must be exactly 'present' and 'absent'")
    return tax


#: The built-in taxonomy (paper's IDs, normlab's ``applies_to`` lists).
TAXONOMY = load_taxonomy()


def _tax(taxonomy) -> Taxonomy:
    if taxonomy is None:
        return TAXONOMY
    if not isinstance(taxonomy, Taxonomy):
        raise TypeError(f"taxonomy must be a Taxonomy (see load_taxonomy); got {type(taxonomy).__name__}")
    return taxonomy


def check_tuple(tup, taxonomy: Taxonomy | None = None) -> SceneTuple:
    """Return ``tup`` as a :class:`SceneTuple` after checking that it is valid.

    Parameters
    ----------
    tup : SceneTuple, sequence of 5 str, or dict with the five axis keys
        ``precedent`` may also be ``0``/``1`` (as in ``scenario_v1``).
    taxonomy : Taxonomy, optional

    Raises
    ------
    ValueError
        Unknown IDs, or an event outside the ``applies_to`` list of the norm, elicitor or
        sanction (the message names which).
    """
    tax = _tax(taxonomy)
    if isinstance(tup, dict):
        missing = [a for a in AXES if a not in tup]
        if missing:
            raise ValueError(f"tuple lacks the keys {missing}; needs {AXES}")
        values = [tup[a] for a in AXES]
    elif isinstance(tup, (tuple, list)) and len(tup) == 5:
        values = list(tup)
    else:
        raise TypeError(f"a tuple must be a SceneTuple, a 5-sequence or a dict with keys {AXES}; got {tup!r}")
    if values[4] in (0, 1) and not isinstance(values[4], str):
        values[4] = "present" if int(values[4]) == 1 else "absent"
    for a, v in zip(AXES, values):
        if not isinstance(v, str):
            raise TypeError(f"tuple {a} must be a string ID; got {v!r}")
        tax.entry(a, v)
    t = SceneTuple(*values)
    for a in ("norm", "elicitor", "sanction"):
        if t.event not in tax.entry(a, getattr(t, a)).applies_to:
            raise ValueError(f"invalid tuple: event {t.event!r} is not in the applies_to list of {a} "
                             f"{getattr(t, a)!r} (Appendix A.7)")
    return t


def is_valid(tup, taxonomy: Taxonomy | None = None) -> bool:
    """True when ``tup`` passes the applicability filter of Appendix A.7 (unknown IDs: False)."""
    try:
        check_tuple(tup, taxonomy)
    except (TypeError, ValueError):
        return False
    return True


def valid_tuples(taxonomy: Taxonomy | None = None) -> list[SceneTuple]:
    """Every valid tuple, in axis order (event, norm, elicitor, sanction, precedent).

    A tuple is valid iff its event is in the ``applies_to`` lists of its norm, its elicitor and
    its sanction; precedent doubles every such combination.

    Parameters
    ----------
    taxonomy : Taxonomy, optional
        Default :data:`TAXONOMY`.

    Returns
    -------
    list of SceneTuple

    References
    ----------
    Jacniacki & Bilski, arXiv:2605.07823 (2026), Sect. 3 (valid tuple space); Appendix A.7.
    """
    tax = _tax(taxonomy)
    out = []
    for ev in tax.ids("event"):
        norms = [n.id for n in tax.norms if ev in n.applies_to]
        elic = [e.id for e in tax.elicitors if ev in e.applies_to]
        sanc = [s.id for s in tax.sanctions if ev in s.applies_to]
        for n in norms:
            for e in elic:
                for s in sanc:
                    for p in tax.ids("precedent"):
                        out.append(SceneTuple(ev, n, e, s, p))
    return out


def sample_tuples(n: int, *, method: str = "greedy", rng=None, taxonomy: Taxonomy | None = None) -> list[SceneTuple]:
    """Draw ``n`` distinct valid tuples.

    ``method="greedy"`` (coverage-greedy): each draw takes, among the tuples not drawn yet, one
    with the most axis values never drawn before; among those, one whose values have been
    used least (smallest sum over the five axes of how often its value was already drawn);
    remaining ties are broken uniformly at random. Every draw thus covers a new value while
    one is left, and usage stays balanced afterwards. ``method="uniform"``: a uniform sample without replacement (the
    paper's main sweep, Sect. 6).

    Parameters
    ----------
    n : int
        1 <= n <= number of valid tuples.
    method : {"greedy", "uniform"}
    rng : None, int, SeedSequence or Generator
    taxonomy : Taxonomy, optional

    Returns
    -------
    list of SceneTuple
        In draw order; the same ``rng`` gives the same list.

    References
    ----------
    Jacniacki & Bilski, arXiv:2605.07823 (2026), Appendix A.7 (coverage-greedy sampler,
    ``scripts/sweep.py``); Sect. 6 (200 tuples sampled uniformly).
    """
    tuples = valid_tuples(taxonomy)
    n = check_int(n, "n", 1, len(tuples))
    if method not in ("greedy", "uniform"):
        raise ValueError(f"method must be 'greedy' or 'uniform'; got {method!r}")
    g = as_generator(rng)
    if method == "uniform":
        idx = g.choice(len(tuples), size=n, replace=False)
        return [tuples[i] for i in idx]
    tax = _tax(taxonomy)
    codes = np.array([[tax.ids(a).index(v) for a, v in zip(AXES, t)] for t in tuples])
    usage = [np.zeros(len(tax.ids(a)), dtype=np.int64) for a in AXES]
    free = np.ones(len(tuples), dtype=bool)
    out = []
    big = np.int64(len(tuples) * len(AXES) + 1)
    for _ in range(n):
        new = sum((usage[k][codes[:, k]] == 0).astype(np.int64) for k in range(len(AXES)))
        used = sum(usage[k][codes[:, k]] for k in range(len(AXES)))
        score = np.where(free, used - big * new, np.iinfo(np.int64).max)
        best = np.flatnonzero(score == score.min())
        pick = int(best[g.integers(len(best))])
        free[pick] = False
        for k in range(len(AXES)):
            usage[k][codes[pick, k]] += 1
        out.append(tuples[pick])
    return out
