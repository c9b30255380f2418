"""Norm records and the per-agent personal norm database of CRSEC, as a checked state machine.

A personal norm is the quintuple ⟨c, u, α, s_act, s_val⟩ of §2.1 of [1]_ -- content, utility
(1-100), type (descriptive or injunctive), activated, valid -- plus its provenance (the chat or
thought it was identified from, the time and the agent). Its state follows from the two flags:

=============  =========  =====  ==============================================================
state          activated  valid  how a norm gets there
=============  =========  =====  ==============================================================
candidate      F          F      normative information identified from a chat or thought
                                 (§2.2); stays here when a sanity-check step fails (§2.3)
qualified      T          T      created by a norm entrepreneur (§2.1), or a candidate / abstract
                                 norm that passed the sanity check
synthesised    F          T      a qualified norm replaced by an abstract one (long-term synthesis)
=============  =========  =====  ==============================================================

:class:`NormDatabase` allows exactly these transitions (candidate -> qualified, qualified ->
synthesised, a failed check recorded on a candidate) and raises ``ValueError`` for any other.

References
----------
.. [1] S. Ren et al., "Emergence of Social Norms in Generative Agent Societies: Principles and
   Architecture", IJCAI 2024, §2.1-§2.3.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import pandas as pd
from normlab.llm_runs.published.crsec import (
    NORM_TYPES,
    REJECTION_CODES,
    check_utility,
    norm_state,
    norm_type,
    norms_to_dict,
)

SOURCES = ("creation", "chat", "thought", "synthesis", "published")
#: Reasons a candidate can carry (the sanity-check steps, plus the published "not evaluated").
REJECTIONS = tuple(REJECTION_CODES.values())


@dataclass(frozen=True)
class NormRecord:
    """One personal norm (the quintuple of §2.1 of Ren et al. 2024) with its provenance.

    Attributes
    ----------
    id : int
        Number within the agent's database (1, 2, ...).
    content : str
        The norm in natural language (``c``).
    utility : float
        Importance on the 1-100 scale (``u``).
    type : str
        ``"descriptive"`` or ``"injunctive"`` (``α``).
    activated, valid : bool
        ``s_act``, ``s_val``.
    agent : str
    source : str
        One of :data:`SOURCES`.
    source_text : str
        The chat or thought it was identified from (synthesis: the member norms).
    t : float
        Time of creation (simulated minutes since the start).
    rejection : str or None
        The failed sanity-check step of a candidate (one of :data:`REJECTIONS`), else None.
    t_qualified, t_deactivated : float
        When it became qualified / was synthesised away (NaN if never).
    parents : tuple of int
        Synthesis: the ids of the norms it abstracts.
    """

    id: int
    content: str
    utility: float
    type: str
    activated: bool = False
    valid: bool = False
    agent: str = ""
    source: str = "chat"
    source_text: str = ""
    t: float = 0.0
    rejection: str | None = None
    t_qualified: float = math.nan
    t_deactivated: float = math.nan
    parents: tuple = ()

    def __post_init__(self):
        if not isinstance(self.content, str) or not self.content.strip():
            raise ValueError("norm content must be a non-empty string")
        if not (self.rejection is not None and isinstance(self.utility, float) and math.isnan(self.utility)):
            # published rejected information lost its utility to the negative code: NaN allowed there
            object.__setattr__(self, "utility", check_utility(self.utility, f"norm {self.content[:40]!r}: "))
        object.__setattr__(self, "type", norm_type(self.type, f"norm {self.content[:40]!r}: "))
        if self.source not in SOURCES:
            raise ValueError(f"source must be one of {SOURCES}; got {self.source!r}")
        if self.rejection is not None and self.rejection not in REJECTIONS:
            raise ValueError(f"rejection must be one of {REJECTIONS} or None; got {self.rejection!r}")

    @property
    def state(self) -> str:
        """``qualified``, ``candidate``, ``synthesised`` (or ``activated_invalid``)."""
        return norm_state(self.activated, self.valid)

    @property
    def qualified(self) -> bool:
        return self.activated and self.valid

    def __repr__(self) -> str:
        extra = f", rejected: {self.rejection}" if self.rejection else ""
        return f"Norm#{self.id}({self.content!r}, u={self.utility:g}, {self.type}, {self.state}{extra})"


class NormDatabase:
    """One agent's personal norm database with the transitions of §2 of Ren et al. 2024.

    Parameters
    ----------
    agent : str

    Examples
    --------
    >>> db = NormDatabase("Carlos")
    >>> n = db.add_candidate("No smoking indoors.", 90, "injunctive", t=12.0)
    >>> db.qualify(n.id, t=17.0).state
    'qualified'
    """

    def __init__(self, agent: str):
        if not isinstance(agent, str) or not agent:
            raise ValueError("agent must be a non-empty string")
        self.agent = agent
        self._norms: dict[int, NormRecord] = {}

    # ----------------------------------------------------------------- reading
    def __len__(self) -> int:
        return len(self._norms)

    def __iter__(self):
        return iter(self._norms.values())

    def __getitem__(self, norm_id: int) -> NormRecord:
        try:
            return self._norms[norm_id]
        except KeyError:
            raise KeyError(f"agent {self.agent!r} has no norm {norm_id!r}") from None

    def qualified(self) -> list[NormRecord]:
        """Qualified (activated and valid) norms, in id order."""
        return [n for n in self._norms.values() if n.qualified]

    def candidates(self) -> list[NormRecord]:
        return [n for n in self._norms.values() if n.state == "candidate"]

    def utility_sum(self) -> float:
        """Sum of the utilities of the qualified norms (the synthesis trigger of §2.3)."""
        return float(sum(n.utility for n in self.qualified()))

    # ----------------------------------------------------------------- transitions
    def _add(self, **kw) -> NormRecord:
        rec = NormRecord(id=len(self._norms) + 1, agent=self.agent, **kw)
        self._norms[rec.id] = rec
        return rec

    def add_created(self, content: str, utility: float, type: str, *, t: float = 0.0,
                    source_text: str = "") -> NormRecord:
        """A norm created by a norm entrepreneur (CreateNorm, §2.1): qualified at once."""
        return self._add(content=content, utility=utility, type=type, activated=True, valid=True,
                         source="creation", source_text=source_text, t=float(t), t_qualified=float(t))

    def add_candidate(self, content: str, utility: float, type: str, *, source: str = "chat",
                      source_text: str = "", t: float = 0.0, parents=()) -> NormRecord:
        """Normative information identified from a chat or thought (§2.2), or an abstract norm
        (§2.3): deactivated and invalid until it passes the sanity check."""
        if source == "creation":
            raise ValueError("created norms are qualified at once: use add_created")
        return self._add(content=content, utility=utility, type=type, source=source,
                         source_text=source_text, t=float(t), parents=tuple(int(p) for p in parents))

    def qualify(self, norm_id: int, *, t: float) -> NormRecord:
        """candidate -> qualified (the candidate passed the sanity check)."""
        n = self[norm_id]
        if n.state != "candidate" or n.rejection is not None:
            why = f"was rejected ({n.rejection})" if n.rejection else f"is {n.state}"
            raise ValueError(f"norm {norm_id} of {self.agent!r} {why}; only an unchecked candidate can be qualified")
        return self._set(n, activated=True, valid=True, t_qualified=float(t))

    def reject(self, norm_id: int, reason: str) -> NormRecord:
        """Record the failed sanity-check step of a candidate (it stays a candidate)."""
        n = self[norm_id]
        if n.state != "candidate":
            raise ValueError(f"norm {norm_id} of {self.agent!r} is {n.state}; only a candidate can be rejected")
        if reason not in REJECTIONS:
            raise ValueError(f"reason must be one of {REJECTIONS}; got {reason!r}")
        return self._set(n, rejection=reason)

    def deactivate(self, norm_id: int, *, t: float) -> NormRecord:
        """qualified -> synthesised (replaced by an abstract norm in the long-term synthesis)."""
        n = self[norm_id]
        if not n.qualified:
            raise ValueError(f"norm {norm_id} of {self.agent!r} is {n.state}; only a qualified norm can be synthesised away")
        return self._set(n, activated=False, t_deactivated=float(t))

    def _set(self, n: NormRecord, **changes) -> NormRecord:
        new = dataclasses.replace(n, **changes)
        self._norms[n.id] = new
        return new

    # ----------------------------------------------------------------- export
    def to_frame(self) -> pd.DataFrame:
        """One row per norm: the record's fields plus ``state``."""
        cols = [f.name for f in dataclasses.fields(NormRecord)]
        rows = [{**{c: getattr(n, c) for c in cols}, "state": n.state} for n in self._norms.values()]
        return pd.DataFrame(rows, columns=cols + ["state"])

    @classmethod
    def from_frame(cls, frame: pd.DataFrame, agent: str) -> "NormDatabase":
        """Rebuild a database from :meth:`to_frame` rows (one agent's; times and provenance kept),
        e.g. the ``norms.parquet`` of a population run directory."""
        db = cls(agent)
        names = [f.name for f in dataclasses.fields(NormRecord)]
        for row in frame.to_dict("records"):
            kw = {k: row[k] for k in names if k in row}
            if not isinstance(kw.get("rejection"), str):
                kw["rejection"] = None
            kw["parents"] = tuple(int(p) for p in (kw.get("parents") if kw.get("parents") is not None else ()))
            for k in ("id",):
                kw[k] = int(kw[k])
            for k in ("utility", "t", "t_qualified", "t_deactivated"):
                kw[k] = float(kw[k]) if kw.get(k) is not None else math.nan
            for k in ("activated", "valid"):
                kw[k] = bool(kw[k])
            kw["source_text"] = kw.get("source_text") or ""
            rec = NormRecord(**kw)
            db._norms[rec.id] = rec
        return db

    def to_crsec_frame(self) -> pd.DataFrame:
        """The norms in the columns of :func:`normlab.llm_runs.load_crsec_norms`."""
        rows = []
        for n in self._norms.values():
            rows.append({"agent": self.agent, "key": f"norm_{n.id}", "id": n.id, "type": n.type,
                         "content": n.content, "subject": None, "predicate": None, "object": None,
                         "related_desc": n.source_text or None, "utility": n.utility, "poi_reason": None,
                         "activated": n.activated, "valid": n.valid, "state": n.state, "rejection": n.rejection})
        return pd.DataFrame(rows)

    def to_crsec_dict(self) -> dict:
        """The database in the published CRSEC JSON format (rejections as negative utilities)."""
        return norms_to_dict(self.to_crsec_frame()) if len(self) else {}

    @classmethod
    def from_crsec_frame(cls, frame: pd.DataFrame, agent: str | None = None) -> "NormDatabase":
        """Rebuild a database from a published-format frame (one agent); times are unknown (NaN)."""
        agents = frame["agent"].dropna().unique() if "agent" in frame.columns else []
        if agent is None:
            if len(agents) != 1:
                raise ValueError(f"the frame holds {len(agents)} agents; pass agent=")
            agent = str(agents[0])
        db = cls(agent)
        sub = frame[frame["agent"] == agent] if len(agents) else frame
        for _, row in sub.iterrows():
            rej = row.get("rejection")
            rej = rej if isinstance(rej, str) else None
            u = row["utility"]
            rec = NormRecord(id=len(db) + 1, content=row["content"], utility=math.nan if rej else u, type=row["type"],
                             activated=bool(row["activated"]), valid=bool(row["valid"]), agent=agent,
                             source="published", source_text=row.get("related_desc") or "", t=math.nan,
                             rejection=rej)
            db._norms[rec.id] = rec
        return db

    def __repr__(self) -> str:
        counts = pd.Series([n.state for n in self]).value_counts().to_dict() if len(self) else {}
        return f"NormDatabase({self.agent!r}, {counts}, utility_sum={self.utility_sum():g})"

    def _repr_html_(self) -> str:
        return f"<p><b>{self!r}</b></p>" + self.to_frame()[["id", "content", "utility", "type", "state",
                                                               "rejection", "source"]].to_html(index=False)

    @classmethod
    def _contract_example(cls) -> "NormDatabase":
        """The class docstring's agent: one created norm, one candidate qualified, one rejected
        (``tests/umbrella/test_contracts.py``)."""
        db = cls("Carlos")
        db.add_created("Greet guests at the door.", 60, "descriptive", t=1.0)
        n = db.add_candidate("No smoking indoors.", 90, "injunctive", t=12.0)
        db.qualify(n.id, t=17.0)
        m = db.add_candidate("Shout at night.", 10, "injunctive", t=20.0)
        db.reject(m.id, REJECTIONS[0])
        return db


__all__ = ["NormRecord", "NormDatabase", "SOURCES", "REJECTIONS", "NORM_TYPES"]
