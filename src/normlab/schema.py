"""The tidy game-log schema shared by theory simulators, LLM runners and the AI-norms loader.

A :class:`GameLog` holds two pandas tables:

``decisions`` -- one row per agent decision (two per interaction):
    ``run`` (int), ``t`` (interaction index within the run, from 0), ``round`` (population round
    ``t // n_agents``, from 0), ``agent``, ``partner`` (ints), ``name``, ``partner_name`` (str;
    ``None`` when the answer was invalid), ``valid`` (bool), ``success`` (bool), ``committed``
    (bool), ``memory_state`` (str, see below), ``memory_len`` (int).

``runs`` -- one row per run:
    ``run``, ``model``, ``kind`` (``baseline`` / ``swap`` / ``evolved`` / ``probe`` /
    ``simulation``), ``names`` (comma-joined pool, e.g. ``"Q,M"``), ``n_agents``, ``memory``,
    ``committed_count``, ``committed_name``, ``initial`` (``"empty"`` or ``"consensus:<name>"``),
    ``n_interactions``, ``consensus`` (name or ``None``), ``source_file``.
    Optional run columns (producers add them; older logs lack them): ``memory_consensus``,
    ``consensus_rule``.

Two consensus readings, two names (:data:`CONSENSUS_RULES`):

``consensus`` -- *behaviour at the end of the run*: the name the agents' answers agree on when
    the run ends, ``None`` if they do not. The rule is :func:`end_consensus` (>= 95% of the last
    ``3N`` interactions succeeded and one name made >= 95% of the uncommitted agents' valid
    productions in them; ``consensus_rule = "end_window"``), except in the published AI-norms
    runs, which keep the authors' own end-of-run reading so that the paper's counts are
    reproduced: the name of the final streak of >= 72 consecutive successes (3N for N = 24, their
    stop rule) when the streak holds one name (``consensus_rule = "final_streak"``). A run whose
    ``consensus`` is set counts as success, and as producing that name, after its end (the
    published figures' padding: :meth:`GameLog.plot`, ``llm_trajectories``).
``memory_consensus`` -- *state*: the name on which every uncommitted agent's memory held ``H``
    successes, the first time that happened (with committed agents only their name counts);
    ``None`` if never. This is the theory's consensus (the kernels' ``winner`` and
    ``consensus_time``); older normlab LLM logs hold a bool there (reached at the end or not).

Memory-state strings (stable, documented, used as table keys by :mod:`normlab.calibration`):
an agent's last ``H`` interactions, oldest first, as ``"own,partner"`` pairs joined by ``";"``;
the empty memory is ``""``. Example: ``"Q,M;M,M"`` = first Q against M (failure), then M
against M (success). Names therefore may not contain ``","`` or ``";"``.
"""

from __future__ import annotations

import functools
import os
import unicodedata
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Sequence

import numpy as np
import pandas as pd

from ._display import html_card, legend_outside, new_axes, plain, plotting, short_repr

DECISION_COLUMNS = (
    "run", "t", "round", "agent", "partner", "name", "partner_name", "valid", "success",
    "committed", "memory_state", "memory_len",
)
RUN_COLUMNS = (
    "run", "model", "kind", "names", "n_agents", "memory", "committed_count", "committed_name",
    "initial", "n_interactions", "consensus", "source_file",
)
RUN_KINDS = ("baseline", "swap", "evolved", "probe", "simulation")
#: The readings behind a run's ``consensus``, named by its optional ``consensus_rule`` column.
CONSENSUS_RULES = {
    "end_window": ">= 95% of the last 3N interactions succeeded and one name made >= 95% of the uncommitted "
                  "agents' valid productions in them (end_consensus)",
    "final_streak": "the run ends with >= 72 consecutive successes (the published runs' stop rule; 3N for "
                    "N = 24) that all name one name",
}
#: Fraction of successes and of one name's productions in the last 3N interactions (``end_window``).
END_WINDOW_SHARE = 0.95


#: Characters a name may not carry besides Unicode categories Cc, Cf, Co, Cs, Cn, Zl and Zp
#: (controls, format characters: zero-width spaces and joiners, bidirectional marks, overrides and
#: isolates, tags; private-use, surrogate and unassigned code points; line and paragraph
#: separators): the invisible fillers and selectors of other categories.
INVISIBLE_IN_NAMES = frozenset(
    [0x034F, 0x115F, 0x1160, 0x17B4, 0x17B5, 0x180B, 0x180C, 0x180D, 0x180F, 0x2800, 0x3164, 0xFFA0]
    + list(range(0xFE00, 0xFE10)) + list(range(0xE0100, 0xE01F0)))
_REFUSED_CATEGORIES = frozenset({"Cc", "Cf", "Co", "Cs", "Cn", "Zl", "Zp"})


def _hidden_character(name: str) -> str | None:
    """The first invisible or bidirectional control character of ``name`` as ``U+XXXX NAME``."""
    for c in name:
        if ord(c) in INVISIBLE_IN_NAMES or unicodedata.category(c) in _REFUSED_CATEGORIES:
            label = unicodedata.name(c, "")
            return f"U+{ord(c):04X} {label}" if label else f"U+{ord(c):04X}, category {unicodedata.category(c)}"
    return None


def normalise_name(name, what: str = "name") -> str:
    """One name as every part of normlab compares it: NFKC-normalised, outer spaces stripped.

    A name carrying an invisible or bidirectional control character (Unicode categories Cc, Cf,
    Co, Cs, Cn, Zl, Zp: zero-width spaces and joiners, right-to-left overrides and isolates, BOM,
    soft hyphen, tags; and the fillers and variation selectors of :data:`INVISIBLE_IN_NAMES`) is
    refused in one line: two names that print alike must be one name. Compatibility forms are
    folded (``"Ｑ"`` -> ``"Q"``, ``"ﬁ"`` -> ``"fi"``, a no-break space -> a space).

    Parameters
    ----------
    name : str
    what : str
        How the message names it (e.g. ``"--committed name"``).

    Returns
    -------
    str

    References
    ----------
    Unicode Standard Annex #15 (normalisation forms, NFKC); UAX #9 (bidirectional controls);
    Unicode Technical Standard #39 (security mechanisms: invisible characters).
    """
    raw = str(name)
    if raw.isascii() and raw.isprintable():  # the common case: NFKC leaves printable ASCII as it is
        return raw.strip()
    hidden = _hidden_character(raw.strip(" "))
    if hidden is not None:
        raise ValueError(f"invalid {what} {ascii(raw)}: it carries an invisible or bidirectional control character "
                         f"({hidden}); names may hold only visible characters")
    return unicodedata.normalize("NFKC", raw).strip()


#: Environment variable naming the scripts whose look-alike names a pool may mix on purpose
#: (``"Latin,Greek"``): the default of ``allow_scripts`` for every command and function.
ENV_ALLOW_SCRIPTS = "NORMLAB_ALLOW_SCRIPTS"
# Unicode's "augmented script sets" (UTS #39, 5.1): a Japanese or Korean name mixes scripts on its own
_AUGMENTED = {"HAN": {"HAN", "JPAN", "KORE", "HANB"}, "HIRAGANA": {"HIRAGANA", "JPAN"},
              "KATAKANA": {"KATAKANA", "JPAN"}, "HANGUL": {"HANGUL", "KORE"}, "BOPOMOFO": {"BOPOMOFO", "HANB"}}


@functools.lru_cache(maxsize=1)
def _prototypes() -> dict:
    """Each confusable character's prototype (Unicode's confusables.txt, UTS #39: ``"А"`` (Cyrillic)
    -> ``"A"``, ``"ο"`` (Greek) -> ``"o"``), from the data the ``confusable-homoglyphs`` package
    ships (pinned): it lists each source beside its prototype both ways, in the file's order, so a
    source is the key listing one character -- its prototype -- that does not list it back alone
    from earlier in the file."""
    import json
    from importlib.resources import files

    data = json.loads(files("confusable_homoglyphs").joinpath("confusables.json").read_text(encoding="utf-8"))
    order = {k: i for i, k in enumerate(data)}
    out = {}
    for k, entries in data.items():
        if len(k) != 1 or len(entries) != 1:
            continue  # sequences are never sources; a key listing several is a prototype
        t = entries[0]["c"]
        back = data.get(t, [])
        if len(t) == 1 and len(back) == 1 and back[0]["c"] == k and order[t] < order[k]:
            continue  # k is the prototype of its one source t (t came first)
        out[k] = t
    return out


def skeleton(text: str) -> str:
    """The confusables skeleton of ``text`` (Unicode Technical Standard #39, 4): NFD, each
    character replaced by its prototype (Unicode's confusables data), NFD again. Two strings that
    look alike have the same skeleton: ``skeleton("А") == skeleton("A")`` (Cyrillic and Latin),
    ``skeleton("ο") == skeleton("o")`` (Greek and Latin)."""
    table = _prototypes()
    return unicodedata.normalize("NFD", "".join(table.get(c, c) for c in unicodedata.normalize("NFD", text)))


def scripts(text: str) -> set:
    """The scripts of ``text``'s letters (upper-case names: ``{"LATIN", "CYRILLIC"}``); Common and
    Inherited characters (digits, punctuation, combining marks) belong to none."""
    from confusable_homoglyphs import categories

    return {a for a in map(categories.alias, text) if a not in ("COMMON", "INHERITED", "Unknown")}


def _resolved(text: str) -> set | None:
    """UTS #39's resolved script set of ``text`` (augmented: Han with Hiragana is one Japanese
    script): the scripts every letter of it belongs to; ``None`` means every script (no letters)."""
    out = None
    for sc in scripts(text):
        aug = _AUGMENTED.get(sc, {sc})
        out = set(aug) if out is None else out & aug
    return out


def _allowed_scripts(allow_scripts) -> set:
    if allow_scripts is None:
        allow_scripts = os.environ.get(ENV_ALLOW_SCRIPTS, "")
    if isinstance(allow_scripts, str):
        allow_scripts = allow_scripts.replace("+", ",").split(",")
    return {str(a).strip().upper() for a in allow_scripts if str(a).strip()}


def _check_look_alikes(names: Sequence[str], what: str, allow_scripts) -> None:
    """Refuse a name mixing scripts (``"Pаris"``: Latin with a Cyrillic ``а``) and two names that
    look alike across scripts (``"A"``/``"А"``, ``"o"``/``"ο"``: the same confusables skeleton, no
    script in common), unless every script involved is in ``allow_scripts`` (or
    ``$NORMLAB_ALLOW_SCRIPTS``). Names that look alike within one script (``l``/``1``) are kept."""
    if all(n.isascii() for n in names):
        return  # ASCII letters are all Latin
    allowed = _allowed_scripts(allow_scripts)
    one = what[:-1] if what.endswith("s") else what
    hint = (f"; to mix these scripts on purpose, allow them (allow_scripts=..., or {ENV_ALLOW_SCRIPTS}="
            "Latin,Greek for every command)")
    for n in names:
        if _resolved(n) == set() and not scripts(n) <= allowed:
            raise ValueError(f"{one} {n!r} mixes scripts ({', '.join(sorted(s.title() for s in scripts(n)))}): it can "
                             f"look like a name of one script{hint}")
    seen: dict = {}
    for n in names:
        key = skeleton(n)
        other = seen.get(key)
        if other is not None and other != n:
            both = _resolved(other + n)
            involved = scripts(other) | scripts(n)
            if both == set() and not involved <= allowed:
                raise ValueError(f"{what} {other!r} and {n!r} look alike ({', '.join(sorted(s.title() for s in involved))} "
                                 f"letters with the same Unicode confusables skeleton, UTS #39); give names that "
                                 f"differ visibly{hint}")
        seen.setdefault(key, n)


def validate_names(names: Sequence[str], *, allow_scripts=None) -> tuple[str, ...]:
    """Check a name pool: at least one name, unique non-empty strings without ``,`` or ``;``.

    The one home of name parsing: every command's ``--names`` flag, every function taking a pool
    and every pool read from a file (fit documents, published archives) goes through it. Each name
    passes :func:`normalise_name` (NFKC; invisible and bidirectional control characters refused),
    and two names equal after normalisation are refused as one name given twice.

    Names that look alike across scripts are refused too (``A`` and Cyrillic ``А``, ``o`` and
    Greek ``ο``: the same confusables skeleton, UTS #39), and so is a name mixing scripts, unless
    ``allow_scripts`` names every script involved.

    Parameters
    ----------
    names : sequence of str
        Or one comma-separated string (``"Q,M"``).
    allow_scripts : str or sequence of str, optional
        Scripts a pool may mix on purpose (``("Latin", "Greek")`` or ``"Latin,Greek"``); default
        ``$NORMLAB_ALLOW_SCRIPTS`` (none when unset).

    Returns
    -------
    tuple of str
        The normalised names, in the order given.

    References
    ----------
    Unicode Standard Annex #15 (NFKC); Unicode Technical Standard #39 (confusable and invisible
    characters; the skeleton, from Unicode's confusables data as the pinned
    ``confusable-homoglyphs`` package ships it).
    """
    if isinstance(names, str):
        names = [s for s in names.split(",")]
    raw = tuple(str(n) for n in names)
    if len(raw) < 1:
        raise ValueError("the name pool is empty; give at least one name")
    for r in raw:
        n = normalise_name(r)
        if not n or "," in n or ";" in n:
            shown = repr(n) if n == r.strip() else f"{r!r} (NFKC: {n!r})"
            raise ValueError(f"invalid name {shown}: names must be non-empty and contain no ',' or ';'")
    return unique_names(raw, allow_scripts=allow_scripts)


def unique_names(names: Sequence[str], what: str = "names", *, allow_scripts=None) -> tuple[str, ...]:
    """Names that must differ (a pool, a cast of agents), each through :func:`normalise_name`; two
    names that are one after normalisation are refused in one line.

    Parameters
    ----------
    names : sequence of str
    what : str
        How the message names them (e.g. ``"agent names"``).
    allow_scripts : str or sequence of str, optional
        As for :func:`validate_names`: look-alikes across these scripts are accepted.

    Returns
    -------
    tuple of str
        The normalised names, in the order given.
    """
    raw = tuple(str(n) for n in names)
    one = what[:-1] if what.endswith("s") else what
    out = tuple(normalise_name(r, one) for r in raw)
    if len(set(out)) != len(out):
        seen: dict[str, str] = {}
        for n, r in zip(out, raw):
            if n in seen:
                if seen[n].strip() == r.strip():
                    raise ValueError(f"{what} must be unique; got {out}")
                raise ValueError(f"{what} {seen[n].strip()!r} and {r.strip()!r} are one name after NFKC "
                                 f"normalisation ({n!r}); give names that differ visibly")
            seen[n] = r
    _check_look_alikes(out, what, allow_scripts)
    return out


def memory_state_string(entries: Iterable[tuple[str, str]]) -> str:
    """Canonical string of a memory: ``"own,partner;own,partner"`` oldest first (``""`` if empty).

    Parameters
    ----------
    entries : iterable of (str, str)

    Returns
    -------
    str
    """
    return ";".join(f"{o},{p}" for o, p in entries)


def parse_memory_state(state: str) -> list[tuple[str, str]]:
    """Inverse of :func:`memory_state_string`.

    Parameters
    ----------
    state : str

    Returns
    -------
    list of (str, str)
    """
    if not isinstance(state, str):
        raise TypeError(f"a memory state must be a str; got {type(state).__name__}")
    if state == "":
        return []
    out = []
    for part in state.split(";"):
        pair = part.split(",")
        if len(pair) != 2 or not pair[0] or not pair[1]:
            raise ValueError(f"malformed memory state {state!r}: expected 'own,partner;own,partner'")
        out.append((pair[0], pair[1]))
    return out


def relabel_state(state: str, mapping: dict[str, str]) -> str:
    """Apply a name relabelling (e.g. ``{"Q": "M", "M": "Q"}``) to a memory-state string.

    Parameters
    ----------
    state : str
    mapping : dict of str to str

    Returns
    -------
    str
    """
    return memory_state_string((mapping.get(o, o), mapping.get(p, p)) for o, p in parse_memory_state(state))


def rebuild_decisions(
    players: np.ndarray,
    answers: Sequence[tuple[str | None, str | None]],
    *,
    run: int,
    n_agents: int,
    memory: int,
    committed: Iterable[int] = (),
    initial_memory: dict[int, list[tuple[str, str]]] | None = None,
    t0: int = 0,
) -> pd.DataFrame:
    """Rebuild one run's decision table (with each decision's memory state) from its interactions.

    Parameters
    ----------
    players : array_like of int, shape (T, 2)
        Agent ids of each interaction, in order.
    answers : sequence of (str or None, str or None)
        Names played by the two agents (``None`` = invalid answer; such an entry is not stored
        in memory, and the interaction counts as a failure).
    run : int
        Run identifier written to the ``run`` column.
    n_agents, memory : int
        Population size (defines ``round = t // n_agents``) and memory length ``H``.
    committed : iterable of int, optional
        Ids of committed agents.
    initial_memory : dict of int to list of (str, str), optional
        Memory each agent starts with (e.g. ``H`` entries of ``(X, X)`` for a consensus start).
    t0 : int, optional
        Interaction index of the first row (for resumed or windowed logs).

    Returns
    -------
    pandas.DataFrame
        Columns :data:`DECISION_COLUMNS`, two rows per interaction.
    """
    players = np.asarray(players, dtype=np.int64).reshape(-1, 2)
    if len(players) != len(answers):
        raise ValueError(f"players has {len(players)} interactions but answers has {len(answers)}")
    if memory < 1:
        raise ValueError(f"memory must be >= 1; got {memory}")
    committed = set(int(c) for c in committed)
    mem: dict[int, deque] = {}
    if initial_memory:
        for a, entries in initial_memory.items():
            mem[int(a)] = deque(entries[-memory:], maxlen=memory)
    rows = {c: [] for c in DECISION_COLUMNS}
    for k, ((i, j), (ai, aj)) in enumerate(zip(players, answers)):
        t = t0 + k
        valid_i, valid_j = ai is not None, aj is not None
        success = bool(valid_i and valid_j and ai == aj)
        for agent, partner, own, other, valid in ((i, j, ai, aj, valid_i), (j, i, aj, ai, valid_j)):
            m = mem.setdefault(int(agent), deque(maxlen=memory))
            rows["run"].append(run)
            rows["t"].append(t)
            rows["round"].append(t // n_agents)
            rows["agent"].append(int(agent))
            rows["partner"].append(int(partner))
            rows["name"].append(own)
            rows["partner_name"].append(other)
            rows["valid"].append(valid)
            rows["success"].append(success)
            rows["committed"].append(int(agent) in committed)
            rows["memory_state"].append(memory_state_string(m))
            rows["memory_len"].append(len(m))
        for agent, own, other in ((i, ai, aj), (j, aj, ai)):
            if own is not None and other is not None:
                mem[int(agent)].append((own, other))
    return decisions_frame(rows)


def end_consensus(decisions: pd.DataFrame, n_agents: int) -> str | None:
    """The ``consensus`` of one run (rule ``"end_window"``): the name agreed on at the end.

    >= 95% of the last ``3N`` interactions succeeded and one name made >= 95% of the uncommitted
    agents' valid productions in them; ``None`` otherwise, and for a run shorter than ``3N``.

    Parameters
    ----------
    decisions : pandas.DataFrame
        One run's decisions (:data:`DECISION_COLUMNS`).
    n_agents : int
        Population size ``N``.

    Returns
    -------
    str or None
    """
    L = 3 * n_agents
    if decisions.empty:
        return None
    t_end = int(decisions["t"].max()) + 1
    if t_end < L:
        return None
    last = decisions[decisions["t"] >= t_end - L]
    succ = last.drop_duplicates("t")["success"].mean()
    prod = last[last["valid"] & ~last["committed"]]["name"]
    if succ < END_WINDOW_SHARE or prod.empty:
        return None
    counts = prod.value_counts()
    return str(counts.index[0]) if counts.iloc[0] >= END_WINDOW_SHARE * len(prod) else None


def decisions_frame(rows: dict | pd.DataFrame) -> pd.DataFrame:
    """Coerce a mapping or frame to the decision schema (column order and dtypes).

    Parameters
    ----------
    rows : dict or pandas.DataFrame

    Returns
    -------
    pandas.DataFrame
    """
    df = pd.DataFrame(rows)
    missing = [c for c in DECISION_COLUMNS if c not in df.columns]
    if missing:
        raise ValueError(f"decision table is missing columns {missing}; required: {list(DECISION_COLUMNS)}")
    for c in ("run", "t", "round", "agent", "partner", "memory_len"):
        df[c] = df[c].astype(np.int64)
    for c in ("valid", "success", "committed"):
        df[c] = df[c].astype(bool)
    for c in ("name", "partner_name"):
        df[c] = df[c].astype(object).where(df[c].notna(), None)
    df["memory_state"] = df["memory_state"].astype(str)
    extra = [c for c in df.columns if c not in DECISION_COLUMNS]
    for c in extra:  # text columns read back from Parquet (pandas' str dtype, NaN) hold None, as built in memory
        if pd.api.types.is_string_dtype(df[c]) and df[c].dtype != object:
            df[c] = df[c].astype(object).where(df[c].notna(), None)
    return df[list(DECISION_COLUMNS) + extra].reset_index(drop=True)


def runs_frame(rows: dict | pd.DataFrame) -> pd.DataFrame:
    """Coerce a mapping or frame to the run schema (column order and dtypes).

    Parameters
    ----------
    rows : dict or pandas.DataFrame

    Returns
    -------
    pandas.DataFrame
    """
    df = pd.DataFrame(rows)
    missing = [c for c in RUN_COLUMNS if c not in df.columns]
    if missing:
        raise ValueError(f"run table is missing columns {missing}; required: {list(RUN_COLUMNS)}")
    _check_sizes(df)
    for c in ("run", "n_agents", "memory", "committed_count", "n_interactions"):
        df[c] = df[c].astype(np.int64)
    bad = set(df["kind"]) - set(RUN_KINDS)
    if bad:
        raise ValueError(f"unknown run kind(s) {sorted(bad)}; allowed: {RUN_KINDS}")
    for c in ("consensus", "committed_name"):
        df[c] = df[c].astype(object).where(df[c].notna(), None)
    if "consensus_rule" in df.columns:
        df["consensus_rule"] = df["consensus_rule"].astype(object).where(df["consensus_rule"].notna(), None)
        bad = set(df["consensus_rule"].dropna()) - set(CONSENSUS_RULES)
        if bad:
            raise ValueError(f"unknown consensus rule(s) {sorted(bad)}; allowed: {sorted(CONSENSUS_RULES)}")
    if "memory_consensus" in df.columns and df["memory_consensus"].dtype == object:
        df["memory_consensus"] = df["memory_consensus"].where(df["memory_consensus"].notna(), None)
    extra = [c for c in df.columns if c not in RUN_COLUMNS]
    return df[list(RUN_COLUMNS) + extra].reset_index(drop=True)


def _check_sizes(df: pd.DataFrame) -> None:
    """The sizes of a run table, in one line each: integers, ``n_agents`` in ``[1, max_agents()]``
    (:func:`normlab._validate.max_agents`: what this machine's memory allows; a probe's runs
    have one agent, and may have no memory), ``memory >= 0``, ``committed_count >= 0``, ``n_interactions >= 0``."""
    from normlab._validate import max_agents

    cap = max_agents()
    for c, lo, hi in (("n_agents", 1, cap), ("memory", 0, None), ("committed_count", 0, None),
                      ("n_interactions", 0, None)):
        v = pd.to_numeric(df[c], errors="coerce").astype("float64")
        bad = v.isna() | (v < lo) | (v != np.floor(v)) | ~np.isfinite(v) | (v > 2.0**62)
        if hi is not None:
            bad |= v > hi
        if bad.any():
            x = df[c][bad].iloc[0]
            rng = f">= {lo}" if hi is None else f"in [{lo}, {hi:,}] (the most this machine's memory allows)"
            raise ValueError(f"run table column {c} holds {x!r}; expected an integer {rng}")


@dataclass(frozen=True)
class GameLog:
    """Decisions and runs of naming-game runs, in the tidy schema of :mod:`normlab.schema`.

    Attributes
    ----------
    decisions : pandas.DataFrame
        One row per agent decision (:data:`DECISION_COLUMNS`, plus optional extra columns).
    runs : pandas.DataFrame
        One row per run (:data:`RUN_COLUMNS`, plus optional extra columns).
    """

    decisions: pd.DataFrame
    runs: pd.DataFrame

    def __post_init__(self):
        object.__setattr__(self, "decisions", decisions_frame(self.decisions))
        object.__setattr__(self, "runs", runs_frame(self.runs))
        unknown = set(self.decisions["run"].unique()) - set(self.runs["run"])
        if unknown:
            raise ValueError(f"decisions refer to runs missing from the run table: {sorted(unknown)[:5]}")
        if self.runs["run"].duplicated().any():
            raise ValueError("run identifiers in the run table must be unique")

    def select(self, **conditions) -> "GameLog":
        """Keep the runs whose columns equal the given values (a list means "any of").

        Examples
        --------
        >>> log.select(kind="baseline", names="Q,M", memory=5)  # doctest: +SKIP
        """
        mask = np.ones(len(self.runs), dtype=bool)
        for col, val in conditions.items():
            if col not in self.runs.columns:
                raise ValueError(f"unknown run column {col!r}; available: {list(self.runs.columns)}")
            vals = val if isinstance(val, (list, tuple, set)) else [val]
            mask &= self.runs[col].isin(list(vals)).to_numpy()
        runs = self.runs[mask]
        return GameLog(self.decisions[self.decisions["run"].isin(runs["run"])], runs)

    def per_round(self) -> pd.DataFrame:
        """Success rate and production shares per run and population round (long format).

        Returns
        -------
        pandas.DataFrame
            Columns ``run``, ``round``, ``name``, ``share`` (share of valid productions of
            ``name`` by uncommitted agents), ``share_all`` (all agents) and ``success_rate``
            (successful interactions / interactions in the round).
        """
        d = self.decisions
        inter = d.drop_duplicates(["run", "t"])
        succ = inter.groupby(["run", "round"])["success"].mean().rename("success_rate")
        valid = d[d["valid"]]
        names_by_run = self.runs.set_index("run")["names"].str.split(",")
        frames = []
        for col, sub in (("share", valid[~valid["committed"]]), ("share_all", valid)):
            cnt = sub.groupby(["run", "round", "name"]).size().rename("n").reset_index()
            tot = cnt.groupby(["run", "round"])["n"].transform("sum")
            cnt[col] = cnt["n"] / tot
            frames.append(cnt.set_index(["run", "round", "name"])[col])
        # complete the (run, round, name) grid so that absent names get share 0
        keys = []
        for (run, rnd) in succ.index:
            for nm in names_by_run.get(run, []):
                keys.append((run, rnd, nm))
        idx = pd.MultiIndex.from_tuples(keys, names=["run", "round", "name"])
        out = pd.concat(frames, axis=1).reindex(idx).fillna(0.0).reset_index()
        return out.merge(succ.reset_index(), on=["run", "round"], how="left")

    def to_parquet(self, directory: str | Path) -> Path:
        """Write ``decisions.parquet`` and ``runs.parquet`` into ``directory``.

        Returns
        -------
        pathlib.Path
            The directory.
        """
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        self.decisions.to_parquet(directory / "decisions.parquet", index=False)
        self.runs.to_parquet(directory / "runs.parquet", index=False)
        return directory

    @classmethod
    def read_parquet(cls, directory: str | Path) -> "GameLog":
        """Read a log written by :meth:`to_parquet`.

        Parameters
        ----------
        directory : str or pathlib.Path

        Returns
        -------
        GameLog
        """
        from normlab.user_files import read_user_parquet

        directory = Path(directory)
        for f in ("decisions.parquet", "runs.parquet"):
            if not ((directory / f).exists() or (directory / f).is_symlink()):
                raise FileNotFoundError(f"{directory} holds no {f}; expected a directory written by GameLog.to_parquet")
        # regular files only (a FIFO or device is refused without blocking), their sizes capped
        return cls(read_user_parquet(directory / "decisions.parquet"), read_user_parquet(directory / "runs.parquet"))

    # ------------------------------------------------------------------ display
    def _groups(self) -> pd.DataFrame:
        """Runs per (model, kind, names, N, H, committed count) with their consensus names."""
        r = self.runs.assign(consensus=self.runs["consensus"].astype(object).where(self.runs["consensus"].notna(), "none"))
        keys = ["model", "kind", "names", "n_agents", "memory", "committed_count"]
        g = r.groupby(keys, sort=False, dropna=False)
        out = g.size().rename("runs").reset_index()
        out["consensus"] = [", ".join(f"{k}: {v}" for k, v in grp["consensus"].value_counts().items())
                            for _, grp in g]
        return out

    def summary(self) -> dict:
        """Runs, decisions and the runs per group (model, kind, names, N, H, committed count) with
        their consensus names, as plain Python values."""
        g = self._groups()
        return plain({"runs": len(self.runs), "decisions": len(self.decisions),
                      "valid_share": float(self.decisions["valid"].mean()) if len(self.decisions) else None,
                      "groups": g.to_dict(orient="records")})

    def __repr__(self) -> str:
        r = self.runs
        kinds = ", ".join(f"{k}: {v}" for k, v in r["kind"].value_counts().items())
        models = r["model"].astype(str).unique()
        models = ", ".join(models[:3]) + (f" +{len(models) - 3}" if len(models) > 3 else "")
        pools = r["names"].astype(str).unique()

        def vals(col):
            v = sorted(int(x) for x in r[col].dropna().unique())
            return "/".join(map(str, v[:6])) + ("/..." if len(v) > 6 else "")

        issues = getattr(self, "issues", None)  # the published-data loader's table
        iss = None
        if issues is not None and len(issues):
            sev = issues["severity"].value_counts()
            iss = f"loader issues: {int(sev.get('error', 0))} errors, {int(sev.get('note', 0))} notes"
        return short_repr(type(self).__name__, f"{len(r)} runs ({kinds})", f"{len(self.decisions):,} decisions",
                          f"models {models}", f"names {'; '.join(pools[:3])}{' ...' if len(pools) > 3 else ''}",
                          f"N={vals('n_agents')}", f"H={vals('memory')}", iss)

    def _repr_html_(self) -> str:
        g = self._groups()
        head = html_card(type(self).__name__, [("runs", len(self.runs)), ("decisions", len(self.decisions)),
                                                 ("valid decisions", float(self.decisions["valid"].mean())
                                                  if len(self.decisions) else None, None, "share")],
                         level=None, subtitle="tidy game log (normlab.schema)",
                         note=".plot() draws the success rate per round; .decisions and .runs are the tables; "
                              ".select(kind=..., names=...) narrows it.")
        return head + g.head(30).to_html(index=False) + (f"<p>… {len(g) - 30} more groups</p>" if len(g) > 30 else "")

    @plotting
    def plot(self, kind: str = "success", *, name: str | None = None, by=("model", "n_agents", "memory", "kind"),
             max_rounds: int | None = None, ax=None):
        """Mean success rate (or production share of a name) per population round, one line per
        group of runs, with a 95% confidence band over runs.

        Runs that stopped in a consensus count as successes (and as producing their consensus
        name) after their stop, as in the published figures; runs that stopped otherwise drop out,
        and a round is drawn while at least half of the group's runs contribute to it.

        Parameters
        ----------
        kind : {"success", "production"}, optional
        name : str, optional
            The name whose production share is drawn (``production``; default: the first name of
            the first run's pool).
        by : sequence of str, optional
            Run columns whose distinct values get their own line (those with one value are dropped
            from the labels).
        max_rounds : int, optional
            Rounds shown (default: up to the longest run).
        ax : matplotlib Axes, optional

        Returns
        -------
        matplotlib.axes.Axes

        References
        ----------
        Flint Ashery, Aiello & Baronchelli, Sci. Adv. 11, eadu9368 (2025), Figs. 1A and 3A.
        """
        if kind not in ("success", "production"):
            raise ValueError(f"kind must be 'success' or 'production'; got {kind!r}")
        by = [c for c in by if c in self.runs.columns]
        if not len(self.runs):
            raise ValueError("the log holds no runs")
        pr = self.per_round()
        if kind == "production":
            name = str(self.runs["names"].iloc[0]).split(",")[0] if name is None else name
            pr = pr[pr["name"] == name][["run", "round", "share"]].rename(columns={"share": "y"})
        else:
            pr = pr.drop_duplicates(["run", "round"])[["run", "round", "success_rate"]].rename(columns={"success_rate": "y"})
        R = int(pr["round"].max()) if len(pr) else 0
        R = R if max_rounds is None else int(max_rounds)
        cons = self.runs.set_index("run")["consensus"]
        wide = pr.pivot(index="run", columns="round", values="y").reindex(columns=range(1, R + 1))
        for run in wide.index:  # pad runs that stopped in a consensus
            c = cons.get(run)
            if c is not None and not (isinstance(c, float) and np.isnan(c)):
                fill = 1.0 if kind == "success" else float(c == name)
                row = wide.loc[run]
                last = row.last_valid_index()
                if last is not None:
                    wide.loc[run, [k for k in wide.columns if k > last]] = fill
        varying = [c for c in by if self.runs[c].nunique() > 1]
        rt = self.runs.set_index("run")
        groups = rt.groupby(varying, sort=True) if varying else [((), rt)]
        ax = new_axes(ax, (7.2, 3.8) if varying else (5.5, 3.8))
        for k, (key, grp) in enumerate(groups):
            lab = ", ".join(map(str, key if isinstance(key, tuple) else (key,))) if varying else ""
            m = wide.loc[wide.index.intersection(grp.index)]
            n = m.notna().sum()
            mean = m.mean()
            h = 1.96 * m.std(ddof=1) / np.sqrt(n.clip(lower=1))
            ok = n >= max(1, len(m) / 2)  # runs that stop without a consensus drop out: need half of them
            x = np.asarray(m.columns)[ok.to_numpy()]
            ax.fill_between(x, (mean - h.fillna(0))[ok].clip(0, 1), (mean + h.fillna(0))[ok].clip(0, 1),
                            alpha=0.2, lw=0, color=f"C{k % 10}")
            ax.plot(x, mean[ok], marker="o", ms=2.5, color=f"C{k % 10}",
                    label=f"{lab + ': ' if lab else ''}{len(m)} runs")
        ax.set(xlabel="population round (N interactions)",
               ylabel="success rate" if kind == "success" else f"share of {name} (uncommitted)", ylim=(-0.02, 1.02))
        ax.xaxis.get_major_locator().set_params(integer=True)
        if varying:
            legend_outside(ax, title=", ".join(varying))
        else:
            ax.legend(fontsize=8, loc="lower right")
        return ax

    @classmethod
    def concat(cls, logs: Sequence["GameLog"]) -> "GameLog":
        """Concatenate logs, renumbering runs so identifiers stay unique.

        Parameters
        ----------
        logs : sequence of GameLog

        Returns
        -------
        GameLog
        """
        decs, runs, offset = [], [], 0
        for lg in logs:
            ids = {r: offset + k for k, r in enumerate(lg.runs["run"])}
            d = lg.decisions.copy()
            d["run"] = d["run"].map(ids)
            r = lg.runs.copy()
            r["run"] = r["run"].map(ids)
            decs.append(d)
            runs.append(r)
            offset += len(ids)
        if not runs:
            raise ValueError("nothing to concatenate")
        return cls(pd.concat(decs, ignore_index=True), pd.concat(runs, ignore_index=True))

    @classmethod
    def _contract_example(cls) -> "GameLog":
        """One run of four agents on two names, eight interactions that settle on ``A``, rebuilt
        from literal pairs and answers (``tests/umbrella/test_contracts.py``)."""
        players = np.array([[0, 1], [2, 3], [0, 2], [1, 3], [0, 3], [1, 2], [0, 1], [2, 3]])
        answers = [("A", "B"), ("B", "B"), ("A", "A"), ("B", "A"), ("A", "A"), ("A", "A"), ("A", "A"), ("A", "A")]
        dec = rebuild_decisions(players, answers, run=0, n_agents=4, memory=2)
        runs = pd.DataFrame([{"run": 0, "model": "toy", "kind": "simulation", "names": "A,B", "n_agents": 4, "memory": 2,
                              "committed_count": 0, "committed_name": None, "initial": "empty", "n_interactions": 8,
                              "consensus": "A", "source_file": None}])
        return cls(dec, runs)
