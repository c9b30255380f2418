"""Reader and writer of the published CRSEC norm databases and run folders (seed 000).

CRSEC [1]_ stores one personal norm database per agent as JSON::

    {"norm_1": {"ID": 1, "type": "injunctive", "content": "No smoking indoors.",
                "subject": ..., "predicate": ..., "object": ..., "related_desc": ...,
                "utility": 90, "poi_reason": ..., "activation_state": true,
                "validity_state": true},
     "norm_2": {...}, ...}

``utility`` is the importance on a 1-100 scale; a **negative** utility encodes why a piece of
normative information was rejected (:data:`REJECTION_CODES`): ``-1`` not yet evaluated, ``-2``
failed the consistency check, ``-3`` duplicate of a qualified norm, ``-4`` names an agent.
normlab's own runs add ``-5`` (wrong type) and ``-6`` (conflicts with a qualified norm) for the two
sanity-check steps that have no published code.

The states of §2 of [1]_ follow from the two flags (:func:`norm_state`): ``qualified``
(activated, valid), ``candidate`` (deactivated, invalid: normative information that has not passed
the sanity check), ``synthesised`` (deactivated, valid: replaced by an abstract norm in the
long-term synthesis); the fourth combination (activated, invalid) does not occur in the paper and
is reported as ``activated_invalid``.

A run folder (CRSEC is built on the Smallville code of Park et al. [2]_) holds one folder per
persona, either directly or under ``personas/``::

    <run>/personas/<Name>/norms/personal_norm_database.json
    <run>/personas/<Name>/norms/personal_norm_database_validity.json      (optional)
    <run>/personas/<Name>/bootstrap_memory/associative_memory/nodes.json  (optional)

``nodes.json`` is Smallville's associative memory: ``{"node_<k>": {"node_count", "type"
("event" | "chat" | "thought"), "created" ("YYYY-MM-DD HH:MM:SS"), "subject", "predicate",
"object", "description", "poignancy", "keywords", "filling"}, ...}``. The reader is tolerant:
missing fields become missing values, unknown types are kept as they are, a list of nodes is
accepted as well as a dict, and ``filling`` (the utterances of a chat, ``[[speaker, text], ...]``)
is appended to the text. The validity file is read with the norm-database reader (its layout is
not documented beyond its name; normlab assumes the same format).

References
----------
.. [1] S. Ren, Z. Cui, R. Song, Z. Wang, S. Hu, "Emergence of Social Norms in Generative Agent
   Societies: Principles and Architecture", IJCAI 2024: §2.1 (the quintuple), §2.3 (states),
   Appendix B, Fig. B1 (the JSON format).
.. [2] J. S. Park et al., "Generative Agents: Interactive Simulacra of Human Behavior", UIST 2023.
"""

from __future__ import annotations

import json
import math
import numbers
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from normlab.user_files import read_user_json

#: Negative utilities of the published format and what they mean (-5, -6: normlab extensions).
REJECTION_CODES = {-1: "not_evaluated", -2: "inconsistent", -3: "duplicate", -4: "names_agent",
                   -5: "wrong_type", -6: "conflict"}
REJECTION_VALUES = {v: k for k, v in REJECTION_CODES.items()}
NORM_TYPES = ("descriptive", "injunctive")
_TYPE_ALIASES = {"descriptive": "descriptive", "des": "descriptive", "injunctive": "injunctive",
                 "inj": "injunctive"}
STATES = ("qualified", "candidate", "synthesised", "activated_invalid")
#: Columns of :func:`load_crsec_norms`, in order.
NORM_COLUMNS = ("agent", "key", "id", "type", "content", "subject", "predicate", "object", "related_desc",
                "utility", "poi_reason", "activated", "valid", "state", "rejection")
_OPTIONAL = ("subject", "predicate", "object", "related_desc", "poi_reason")
NODE_COLUMNS = ("agent", "node", "node_count", "kind", "created", "subject", "predicate", "object",
                "description", "text", "poignancy", "keywords")
NORMS_FILE = Path("norms") / "personal_norm_database.json"
VALIDITY_FILE = Path("norms") / "personal_norm_database_validity.json"
NODES_FILE = Path("bootstrap_memory") / "associative_memory" / "nodes.json"


def norm_type(value, where: str = "") -> str:
    """Normalise a norm type (``descriptive``/``injunctive``, also ``des``/``inj``, any case)."""
    key = str(value).strip().lower() if isinstance(value, str) else None
    if key not in _TYPE_ALIASES:
        raise ValueError(f"{where}unknown norm type {value!r}; allowed: descriptive, injunctive (or des, inj)")
    return _TYPE_ALIASES[key]


def norm_state(activated: bool, valid: bool) -> str:
    """State of a norm from its flags (§2 of Ren et al. 2024)."""
    if activated and valid:
        return "qualified"
    if not activated and not valid:
        return "candidate"
    if valid:
        return "synthesised"
    return "activated_invalid"


def check_utility(value, where: str = "") -> float:
    """A utility on the paper's 1-100 scale, as float (``ValueError`` outside, ``TypeError`` if not a number)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{where}utility must be a number in [1, 100]; got {value!r}")
    u = float(value)
    if not (math.isfinite(u) and 1.0 <= u <= 100.0):
        raise ValueError(f"{where}utility must be in [1, 100] (negative codes {sorted(REJECTION_CODES)} mark "
                         f"rejections); got {value!r}")
    return u


def _flag(value, name: str, where: str) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    if isinstance(value, numbers.Integral) and value in (0, 1):
        return bool(value)
    raise ValueError(f"{where}{name} must be true or false; got {value!r}")


def _read_json(path: Path, what: str):
    path = Path(path)
    if not (path.exists() or path.is_symlink()):
        raise FileNotFoundError(f"{what} not found: {path}")
    return read_user_json(path, f"{path} ({what})")  # a regular file, capped in size and depth


def norms_from_dict(data, *, agent: str | None = None, source: str = "") -> pd.DataFrame:
    """Tidy frame of one norm database given as a parsed JSON object (see :func:`load_crsec_norms`)."""
    if not isinstance(data, dict):
        raise ValueError(f"{source}a CRSEC norm database is a JSON object {{'norm_1': {{...}}, ...}}; "
                         f"got a {type(data).__name__}")
    rows = []
    for key, rec in data.items():
        where = f"{source}{key}: "
        if not isinstance(rec, dict):
            raise ValueError(f"{where}each norm must be a JSON object; got {type(rec).__name__}")
        for req in ("type", "content", "utility", "activation_state", "validity_state"):
            if req not in rec:
                raise ValueError(f"{where}missing field {req!r}")
        util = rec["utility"]
        if isinstance(util, str):
            try:
                util = float(util)
            except ValueError:
                raise ValueError(f"{where}utility must be a number; got {util!r}") from None
        rejection = None
        if isinstance(util, numbers.Real) and not isinstance(util, bool) and util < 0:
            if float(util) not in REJECTION_CODES:
                raise ValueError(f"{where}negative utility {util!r} is not a rejection code; "
                                 f"allowed codes: {sorted(REJECTION_CODES)}")
            rejection, utility = REJECTION_CODES[int(util)], math.nan
        else:
            utility = check_utility(util, where)
        activated = _flag(rec["activation_state"], "activation_state", where)
        valid = _flag(rec["validity_state"], "validity_state", where)
        content = rec["content"]
        if not isinstance(content, str):
            raise ValueError(f"{where}content must be a string; got {type(content).__name__}")
        row = {"agent": agent, "key": str(key), "id": rec.get("ID", key), "type": norm_type(rec["type"], where),
               "content": content, "utility": utility, "activated": activated, "valid": valid,
               "state": norm_state(activated, valid), "rejection": rejection}
        for opt in _OPTIONAL:
            row[opt] = rec.get(opt)
        rows.append(row)
    frame = pd.DataFrame(rows, columns=list(NORM_COLUMNS))
    frame["utility"] = frame["utility"].astype(float)
    frame["activated"] = frame["activated"].astype(bool)
    frame["valid"] = frame["valid"].astype(bool)
    return frame


def load_crsec_norms(path, *, agent: str | None = None) -> pd.DataFrame:
    """Read one agent's published CRSEC norm database into a tidy frame (one row per norm).

    Parameters
    ----------
    path : str or pathlib.Path
        ``personal_norm_database.json`` (or its ``_validity`` twin).
    agent : str, optional
        Value of the ``agent`` column (default: the persona folder name when ``path`` sits in
        ``<persona>/norms/``, else the file stem).

    Returns
    -------
    pandas.DataFrame
        Columns :data:`NORM_COLUMNS`: ``key`` (``"norm_1"``), ``id`` (``ID`` as stored), ``type``
        (``descriptive``/``injunctive``), ``content``, the optional ``subject``, ``predicate``,
        ``object``, ``related_desc``, ``poi_reason``, ``utility`` (1-100; NaN for rejected
        information), ``activated``, ``valid``, ``state`` (:func:`norm_state`) and ``rejection``
        (:data:`REJECTION_CODES` name, or None).

    Raises
    ------
    FileNotFoundError
        The file does not exist.
    ValueError
        Malformed JSON, a missing field, an unknown type, a utility outside 1-100 that is not a
        rejection code, or a flag that is not a boolean.

    References
    ----------
    Ren et al., IJCAI 2024, §2.1 (the quintuple ⟨c, u, α, s_act, s_val⟩) and Fig. B1.
    """
    path = Path(path)
    data = _read_json(path, "CRSEC norm database")
    if agent is None:
        agent = path.parent.parent.name if path.parent.name == "norms" else path.stem
    return norms_from_dict(data, agent=agent, source=f"{path.name}: ")


def norms_to_dict(frame: pd.DataFrame) -> dict:
    """The published JSON object of one norm database (inverse of :func:`norms_from_dict`)."""
    if not isinstance(frame, pd.DataFrame):
        raise TypeError(f"frame must be a pandas DataFrame; got {type(frame).__name__}")
    missing = [c for c in ("type", "content", "activated", "valid") if c not in frame.columns]
    if missing or ("utility" not in frame.columns and "rejection" not in frame.columns):
        raise ValueError(f"frame lacks columns {missing or ['utility']}; it needs type, content, utility, "
                         "activated, valid (and optionally key, id, rejection, subject, ...)")
    out = {}
    for k, (_, row) in enumerate(frame.iterrows(), start=1):
        key = row["key"] if "key" in frame.columns and isinstance(row["key"], str) else f"norm_{k}"
        where = f"{key}: "
        rej = row.get("rejection") if "rejection" in frame.columns else None
        if isinstance(rej, str):
            if rej not in REJECTION_VALUES:
                raise ValueError(f"{where}unknown rejection {rej!r}; allowed: {sorted(REJECTION_VALUES)}")
            utility = REJECTION_VALUES[rej]
        else:
            u = check_utility(row["utility"], where)
            utility = int(u) if u == int(u) else u
        ident = row["id"] if "id" in frame.columns else k
        if isinstance(ident, numbers.Integral):
            ident = int(ident)
        rec = {"ID": ident, "type": norm_type(row["type"], where), "content": str(row["content"])}
        for opt in ("subject", "predicate", "object", "related_desc"):
            val = row[opt] if opt in frame.columns else None
            rec[opt] = None if _missing(val) else val
        rec["utility"] = utility
        val = row["poi_reason"] if "poi_reason" in frame.columns else None
        rec["poi_reason"] = None if _missing(val) else val
        rec["activation_state"] = bool(row["activated"])
        rec["validity_state"] = bool(row["valid"])
        if key in out:
            raise ValueError(f"duplicate norm key {key!r}")
        out[key] = rec
    return out


def _missing(val) -> bool:
    return val is None or (isinstance(val, float) and math.isnan(val))


def save_crsec_norms(frame: pd.DataFrame, path) -> Path:
    """Write a norm frame (as from :func:`load_crsec_norms`) in the published CRSEC JSON format.

    Rejected information gets its negative utility code back; ``key`` and ``id`` are kept when
    present (else ``norm_1, norm_2, ...`` and ``1, 2, ...``). Parent folders are created.

    Parameters
    ----------
    frame : pandas.DataFrame
        One agent's norms; needs ``type``, ``content``, ``utility``, ``activated``, ``valid``.
    path : str or pathlib.Path

    Returns
    -------
    pathlib.Path

    References
    ----------
    Ren et al., IJCAI 2024, Fig. B1.
    """
    data = norms_to_dict(frame)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8") as fh:
        json.dump(data, fh, indent=2, ensure_ascii=False)
    return path


def nodes_from_obj(data, *, agent: str | None = None, source: str = "") -> pd.DataFrame:
    """Tidy frame of a Smallville associative memory (``nodes.json``), tolerant of missing fields."""
    if isinstance(data, dict):
        items = list(data.items())
    elif isinstance(data, list):
        items = [(f"node_{k + 1}", v) for k, v in enumerate(data)]
    else:
        raise ValueError(f"{source}nodes.json must hold a JSON object or list of nodes; got {type(data).__name__}")
    rows = []
    for key, node in items:
        if not isinstance(node, dict):
            raise ValueError(f"{source}{key}: each node must be a JSON object; got {type(node).__name__}")
        desc = node.get("description")
        text = "" if desc is None else str(desc)
        filling = node.get("filling")
        if isinstance(filling, list):
            lines = []
            for item in filling:
                if isinstance(item, (list, tuple)) and len(item) == 2 and all(isinstance(x, str) for x in item):
                    lines.append(f"{item[0]}: {item[1]}")
            if lines:
                text = (text + "\n" if text else "") + "\n".join(lines)
        kw = node.get("keywords")
        rows.append({"agent": agent, "node": str(key), "node_count": node.get("node_count"),
                     "kind": str(node.get("type", "event")).lower(), "created": node.get("created"),
                     "subject": node.get("subject"), "predicate": node.get("predicate"),
                     "object": node.get("object"), "description": desc, "text": text,
                     "poignancy": node.get("poignancy"),
                     "keywords": tuple(kw) if isinstance(kw, (list, tuple)) else ()})
    frame = pd.DataFrame(rows, columns=list(NODE_COLUMNS))
    frame["created"] = pd.to_datetime(frame["created"], errors="coerce", format="mixed")
    frame["poignancy"] = pd.to_numeric(frame["poignancy"], errors="coerce")
    return frame.sort_values(["created", "node"], kind="stable", na_position="last").reset_index(drop=True)


def load_crsec_nodes(path, *, agent: str | None = None) -> pd.DataFrame:
    """Read a Smallville ``nodes.json`` (timed events, chats, thoughts) into a tidy frame.

    Columns :data:`NODE_COLUMNS`; ``kind`` is the node ``type`` (``event``/``chat``/``thought``),
    ``created`` a timestamp (NaT when missing or unparseable) and ``text`` the description
    followed by the chat's utterances. Rows are sorted by time.
    """
    path = Path(path)
    return nodes_from_obj(_read_json(path, "Smallville associative memory"), agent=agent, source=f"{path}: ")


def norm_funnel(norms: pd.DataFrame) -> pd.DataFrame:
    """Per agent: identified information and where it ended (wide, one row per agent).

    Columns: ``n_norms``, ``qualified``, ``candidate``, ``synthesised``, one ``rejected_<reason>``
    per rejection reason present, and ``pass_rate`` (qualified + synthesised over the checked
    candidates, created norms excluded when a ``source`` column says so).

    References
    ----------
    Ren et al., IJCAI 2024, §2.3; published rejection codes (:data:`REJECTION_CODES`).
    """
    if not {"agent", "state"} <= set(norms.columns):
        raise ValueError("norms needs columns agent and state")
    if not len(norms):
        return pd.DataFrame(columns=["agent", "n_norms", "qualified", "candidate", "synthesised", "pass_rate"])
    st = pd.crosstab(norms["agent"], norms["state"])
    for s in ("qualified", "candidate", "synthesised"):
        if s not in st.columns:
            st[s] = 0
    out = st[["qualified", "candidate", "synthesised"]].copy()
    out.insert(0, "n_norms", norms.groupby("agent").size())
    if "rejection" in norms.columns and norms["rejection"].notna().any():
        rej = pd.crosstab(norms["agent"], norms["rejection"]).add_prefix("rejected_")
        out = out.join(rej, how="left").fillna(0).astype(int)
    checked = norms if "source" not in norms.columns else norms[norms["source"] != "creation"]
    if len(checked):
        passed = checked["state"].isin(["qualified", "synthesised"]).groupby(checked["agent"]).mean()
        out["pass_rate"] = passed.reindex(out.index)
    else:
        out["pass_rate"] = np.nan
    return out.reset_index()



@dataclass(frozen=True)
class CRSECRun:
    """One published (or normlab-written) CRSEC run folder, read into tidy frames.

    Attributes
    ----------
    folder : pathlib.Path
    agents : tuple of str
        Persona names (folder names), sorted.
    norms : pandas.DataFrame
        All agents' norm databases (:func:`load_crsec_norms` columns; agents x norms x states).
    validity : pandas.DataFrame
        The ``_validity`` databases where present (same columns; empty otherwise).
    nodes : pandas.DataFrame
        All agents' timed memory nodes (:func:`load_crsec_nodes` columns).
    """

    folder: Path
    agents: tuple
    norms: pd.DataFrame
    validity: pd.DataFrame
    nodes: pd.DataFrame

    def to_frame(self) -> pd.DataFrame:
        """The norms frame (one row per agent and norm)."""
        return self.norms.copy()

    def state_counts(self) -> pd.DataFrame:
        """Per agent: number of norms in each state and each rejection reason (wide)."""
        return norm_funnel(self.norms)

    def __repr__(self) -> str:
        kinds = self.nodes["kind"].value_counts().to_dict() if len(self.nodes) else {}
        return (f"CRSECRun({self.folder.name!r}, agents={len(self.agents)}, norms={len(self.norms)}, "
                f"qualified={int((self.norms['state'] == 'qualified').sum())}, nodes={kinds})")

    def _repr_html_(self) -> str:
        return f"<p><b>{self!r}</b></p>" + self.state_counts().to_html()

    @classmethod
    def _contract_example(cls) -> "CRSECRun":
        """Two personas with two norms each and one memory node, literal rows (no folder read;
        ``tests/umbrella/test_contracts.py``)."""
        norms = pd.DataFrame([(a, f"n{k}", k, "injunctive", text, None, None, None, None, u, None, act, act,
                               "qualified" if act else "candidate", None if act else "duplicate")
                              for a in ("Carlos", "Maria")
                              for k, (text, u, act) in enumerate((("No smoking indoors.", 90, True),
                                                                  ("Shout at night.", 10, False)))],
                             columns=list(NORM_COLUMNS))
        nodes = pd.DataFrame([("Carlos", 1, 1, "chat", "2023-02-13 08:00:00", "Carlos", "chat with", "Maria", "a chat",
                               "please do not smoke", 3, "smoking")], columns=list(NODE_COLUMNS))
        return cls(folder=Path("crsec-example"), agents=("Carlos", "Maria"), norms=norms,
                   validity=pd.DataFrame(columns=list(NORM_COLUMNS)), nodes=nodes)


def _persona_dirs(folder: Path) -> list[Path]:
    root = folder / "personas" if (folder / "personas").is_dir() else folder
    out = [p for p in sorted(root.iterdir()) if p.is_dir() and ((p / "norms").is_dir() or (p / "bootstrap_memory").is_dir())]
    return out


def load_crsec_run(folder, *, missing: str = "raise") -> CRSECRun:
    """Read a CRSEC run folder: every persona's norm database, validity database and memory nodes.

    Parameters
    ----------
    folder : str or pathlib.Path
        The run's storage folder, holding persona folders directly or under ``personas/``
        (a persona folder is one with a ``norms/`` or ``bootstrap_memory/`` sub-folder).
    missing : {"raise", "skip"}
        What to do when a persona lacks ``norms/personal_norm_database.json``: raise a
        ``FileNotFoundError`` naming it, or skip its norms (its memory nodes are still read).
        The validity file and ``nodes.json`` are optional either way.

    Returns
    -------
    CRSECRun

    References
    ----------
    Ren et al., IJCAI 2024, §2 and §3.1; Park et al., UIST 2023 (the Smallville memory layout).
    """
    if missing not in ("raise", "skip"):
        raise ValueError(f"missing must be 'raise' or 'skip'; got {missing!r}")
    folder = Path(folder)
    if not folder.is_dir():
        raise FileNotFoundError(f"CRSEC run folder not found: {folder}")
    personas = _persona_dirs(folder)
    if not personas:
        raise ValueError(f"{folder} holds no persona folder (a folder with norms/ or bootstrap_memory/), "
                         "neither directly nor under personas/")
    norms, validity, nodes = [], [], []
    for p in personas:
        f = p / NORMS_FILE
        if f.is_file():
            norms.append(load_crsec_norms(f, agent=p.name))
        elif missing == "raise":
            raise FileNotFoundError(f"persona {p.name!r} has no norm database: {f} is missing "
                                    "(use missing='skip' to read the run without it)")
        if (p / VALIDITY_FILE).is_file():
            validity.append(load_crsec_norms(p / VALIDITY_FILE, agent=p.name))
        if (p / NODES_FILE).is_file():
            nodes.append(load_crsec_nodes(p / NODES_FILE, agent=p.name))
    empty_n = pd.DataFrame(columns=list(NORM_COLUMNS))
    cat = lambda parts, empty: pd.concat(parts, ignore_index=True) if parts else empty  # noqa: E731
    return CRSECRun(folder=folder, agents=tuple(p.name for p in personas), norms=cat(norms, empty_n),
                    validity=cat(validity, empty_n.copy()),
                    nodes=cat(nodes, pd.DataFrame(columns=list(NODE_COLUMNS))))
