"""Safe loader of the published AI-norms LLM naming-game data into the tidy :mod:`normlab.schema`.

The AI-norms repository [1]_ publishes the raw game histories of Flint Ashery et al. (2025) [2]_ as Python pickles
(``llama3_data.zip``, ``llama31_data.zip``...). This module reads them **without ever running a bare
``pickle.load``**: every pickle goes through :func:`normlab.llm_runs.published._unpickle.restricted_loads`,
which refuses every global (so a crafted pickle cannot execute anything) and admits only plain
builtins.

Public functions
----------------
:func:`load_ainorms`
    Game runs (``baseline`` / ``swap`` / ``evolved``; optionally the ``probe`` files) as an
    :class:`AINormsLog` -- a :class:`normlab.schema.GameLog` with an extra ``issues`` table.
:func:`load_ainorms_probes`
    Strategy probes (``*_bias_test_*``: fixed short memory -> answers) and first-move probes
    (``*_no_memory_bias_test_*``) as one tidy frame, one row per probe answer.
:func:`load_ainorms_meta`
    The meta-prompting (comprehension) tests as a long frame.
:func:`mean_success_by_round`, :func:`first_round_reaching`
    The population success curve of Fig. 1 of Flint Ashery et al. (2025) and the round at which it first reaches a
    threshold (published: 0.95 at round 10 for Llama-3 and 13 for Llama-3.1, W = 10).

What the published files contain (checked on both archives)
-----------------------------------------------------------
File names (``<model>`` is ``llama3_70b`` / ``llama31_70b`` for game runs and ``llama3`` /
``llama31`` for probes):

- ``<model>_converged_baseline_<names>_<fail>_<success>_<H>mem_<network>_<N>ps_<T>tmp.pkl`` --
  runs from empty memory. The pool ``<names>`` is ``_``-joined in the order of the ``rules``
  prompt (e.g. ``Q_M_X_Y_F_J_P_R_C_D``, ``A_B_..._Z``, ``Alice_Bob``, ``female_male``).
- ``<model>_swap_<i>_<cm>cmtd_<X>_<Y>_..._<N>ps_<T>tmp.pkl`` -- committed-minority runs: all agents
  start with ``H`` prepared memory entries ``(X, X, +success)`` with ``X = names[i]``; ``cm``
  randomly chosen agents (``committed_tag``) always answer ``Y = names[1]``
  (``convergence['committed_to']``).
- ``<model>_evolved_from_<i>_<X>_<Y>_..._<N>ps_<K>ints_<T>tmp.pkl`` -- stability runs: prepared
  exactly like the swap files (``H`` entries of ``(X, X)`` and ``committed_to = Y``) but with no
  committed agent. ``K`` (1000 or 500) is the planned number of interactions; some runs are
  shorter (stopped early, or a 500-interaction batch stored under a ``1000ints`` name).

Run dictionaries: ``{run: {'simulation': {agent: {...}}, 'tracker': {...}, 'convergence': {...}}}``
plus an optional ``'rules'`` string (the system prompt with the pool in its original order).
Agents are numbered ``1..N`` (kept as is in ``agent``/``partner``). ``tracker['players'][t]`` is
``[p1, p2]``, ``answers[t]`` their names and ``outcome[t]`` is ``1`` iff the names match. Each
agent's ``my_history`` / ``partner_history`` / ``outcome`` (payoffs) list the same interactions in
order; in swap and evolved files they start with the ``H`` prepared entries, which this loader
turns into the *initial memory* (the memory state before the first decision is ``H`` entries of
``"X,X"``), not into decisions.

``convergence``: in baseline files ``converged_index == len(tracker)`` -- the run stopped right after
the interaction that completed a streak of consecutive successes (72 = 3N for N = 24; 72 also in the
200-agent files; 144 in the H = 3, 4 files and in 20 of the 40 Llama-3 F/J H = 5 runs), and
``committed_to`` is ``None``. In swap and evolved files ``converged_index`` is always 0 (the tracker
length when the prepared population was handed over) and ``committed_to`` is ``Y`` (even in
evolved files, where nobody is committed).

Schema mapping (see :mod:`normlab.schema`)
------------------------------------------
``decisions``: exactly :data:`normlab.schema.DECISION_COLUMNS`, two rows per interaction, with the
rows of :func:`normlab.schema.rebuild_decisions` (memory length ``H`` from the file name; built by a
row-appending twin that is tested to give identical rows, to avoid one DataFrame per run);
``agent``/``partner`` keep the published ids ``1..N``; ``t`` counts interactions from 0 (prepared
memory entries are not decisions); ``round`` is ``t // N`` from 0 -- the published figures label it
``round + 1``. All published answers are valid names, so ``valid`` is always true there.

``runs``: :data:`normlab.schema.RUN_COLUMNS` plus ``source_run`` (the run key in the pickle),
``source_archive``, ``model_key`` (file-name shorthand), ``network``, ``temperature``,
``payoff_success``, ``payoff_failure``, ``prepared_memory`` (entries prepended per agent),
``initial_index`` (``i`` in ``swap_<i>``/``evolved_from_<i>``), ``planned_interactions``
(``K``), ``converged_index``, ``committed_to`` (raw values), ``stop_streak`` (consecutive
successes at the end of the run), ``converged`` (``stop_streak >= 72``),
``committed_share_last3`` and ``flipped`` (critical-mass criterion, swap/evolved runs only: the
share of ``Y`` in the productions of uncommitted agents in each of the last three population
rounds -- the last ``3N`` interactions cut into three blocks of ``N`` -- summed, and whether the sum
is at least 2.849) and ``flip_interaction`` (the first number of interactions ``e >= 3N`` at which
the same sum over the three blocks ending at ``e`` reaches 2.849; NA if never -- a run can flip and
then drift back, and in N = 48 runs that stop after 72 successes the end-of-run window still
covers pre-consensus play). ``consensus`` is the single name played during a final streak of at least 72
successes, else ``None``. ``initial`` is ``"empty"`` (baseline) or ``"consensus:X"``.
``committed_name`` is ``Y`` when at least one agent is committed, else ``None``. Model names:
``llama3_70b``/``llama3`` -> ``Llama-3-70B-Instruct``, ``llama31_70b``/``llama31`` ->
``Llama-3.1-70B-Instruct`` (:data:`MODEL_NAMES`; unknown shorthands are kept verbatim).

References
----------
.. [1] Ariel-Flint-Ashery/AI-norms (GitHub), MIT licence: the data archives and
   ``plotter.ipynb`` at commit e57aeef; ``simulation_module.ipynb`` (``get_rules``,
   ``get_prompt``, ``converge``, ``simulate_CM``, ``get_prepared_dataframe``) and
   ``bias.ipynb`` at commit e7d8691; ``meta_prompting.ipynb`` at commit ac9e2d6 (the three
   notebooks were deleted before e57aeef).
.. [2] A. Flint Ashery, L. M. Aiello, A. Baronchelli, "Emergent social conventions and collective
   bias in LLM populations", Science Advances 11(20), eadu9368 (2025), Methods ("Naming game",
   "Committed minorities") and Supplementary Materials (individual bias, meta-prompting).
"""

from __future__ import annotations

import fnmatch
import re
from collections import Counter, deque
import warnings
import zipfile
from dataclasses import dataclass
from os import PathLike
from pathlib import Path
from typing import Callable, Iterable, Sequence

import numpy as np
import pandas as pd

from normlab.schema import (
    DECISION_COLUMNS,
    RUN_COLUMNS,
    GameLog,
    decisions_frame,
    memory_state_string,
    runs_frame,
    validate_names,
)

from ._unpickle import UnsafePickleError, restricted_loads

__all__ = [
    "AINormsLog",
    "load_ainorms",
    "load_ainorms_probes",
    "load_ainorms_meta",
    "mean_success_by_round",
    "first_round_reaching",
    "MODEL_NAMES",
    "GAME_KINDS",
    "PROBE_KINDS",
    "PROBE_COLUMNS",
    "META_COLUMNS",
    "ISSUE_COLUMNS",
    "CONVERGENCE_STREAK",
    "CRITICAL_MASS_THRESHOLD",
    "UnsafePickleError",
]

#: File-name shorthand -> model name.
MODEL_NAMES = {
    "llama3_70b": "Llama-3-70B-Instruct",
    "llama3": "Llama-3-70B-Instruct",
    "llama31_70b": "Llama-3.1-70B-Instruct",
    "llama31": "Llama-3.1-70B-Instruct",
    "llama2_70b": "Llama-2-70B-Chat",
    "llama2": "Llama-2-70B-Chat",
    "claude": "Claude-3.5-Sonnet",
}
#: Run kinds stored in the game-run files, and the kind given to probe files.
GAME_KINDS = ("baseline", "swap", "evolved")
ALL_KINDS = GAME_KINDS + ("probe",)
#: Probe families of :func:`load_ainorms_probes`.
PROBE_KINDS = ("strategy", "no_memory")
#: Consecutive successes that end a published convergence run (3N for N = 24).
CONVERGENCE_STREAK = 72
#: Published critical-mass criterion: share of the committed name among uncommitted productions,
#: summed over the last 3 population rounds (about 95 % on average).
CRITICAL_MASS_THRESHOLD = 2.849
#: Name pool of the published strategy probes (``bias.ipynb``: ``options = ['Q', 'M']``).
STRATEGY_PROBE_NAMES = ("Q", "M")
#: Largest pickle (uncompressed bytes) the loader accepts by default (published: 1.5 MB). Memory
#: while unpickling stays below about 40x this (see :mod:`._unpickle`).
MAX_FILE_BYTES = 32 * 2**20
#: Largest total of uncompressed pickle bytes read from one archive.
MAX_ARCHIVE_BYTES = 1024 * 2**20
#: Highest uncompressed/compressed ratio of an archive member (published: at most 14); a zip
#: bomb is refused before it is inflated.
MAX_COMPRESSION_RATIO = 200

PROBE_COLUMNS = ("model", "probe", "names", "memory_state", "memory_len", "i", "name", "valid", "source_file")
META_COLUMNS = ("model", "source_file", "player", "question", "step", "correct", "mean", "std")
ISSUE_COLUMNS = ("source_file", "source_run", "severity", "check", "message")
RUN_EXTRA_COLUMNS = (
    "source_run", "source_archive", "model_key", "network", "temperature", "payoff_success",
    "payoff_failure", "prepared_memory", "initial_index", "planned_interactions", "converged_index",
    "committed_to", "stop_streak", "converged", "committed_share_last3", "flipped", "flip_interaction",
)
_META_QUESTION_ALIASES = {"#_actions": "no_actions", "#_points": "no_points"}
_META_HISTORY_QUESTIONS = ("action_i", "points_i", "no_actions", "no_points")
_ON_INCONSISTENCY = ("raise", "warn", "ignore")

_MODEL = r"(?P<model>[A-Za-z][A-Za-z0-9]*(?:_\d+b)?)"
_RUN_RE = re.compile(
    _MODEL
    + r"_(?:(?P<baseline>converged_baseline)|swap_(?P<swap_init>\d+)_(?P<cm>\d+)cmtd|evolved_from_(?P<evolved_init>\d+))"
    r"_(?P<names>.+?)_(?P<fail>[+-]?\d+)_(?P<succ>[+-]?\d+)_(?P<memory>\d+)mem_(?P<network>[A-Za-z]+(?:_[A-Za-z]+)?)"
    r"_(?P<n>\d+)ps(?:_(?P<ints>\d+)ints)?_(?P<tmp>\d+(?:\.\d+)?)tmp\.pkl"
)
_BIAS_RE = re.compile(_MODEL + r"_bias_test_(?P<mine>[^_]+)_(?P<partner>[^_]+)\.pkl")
_NOMEM_RE = re.compile(_MODEL + r"_no_memory_bias_test_(?P<pool>[^_]+)_(?P<memory>\d+)mem\.pkl")
_META_RE = re.compile(_MODEL + r"_meta_(?P<which>(?:prompting|test)[A-Za-z0-9_]*)\.pkl")
_RULES_NAMES_RE = re.compile(r"values:\s*\[(.*?)\]")
_RULES_PAYOFF_RE = re.compile(r"payoff\s*([+-]?\d+)\s*points")


# --------------------------------------------------------------------------------------------
# results container
# --------------------------------------------------------------------------------------------
@dataclass(frozen=True, eq=False)
class AINormsLog(GameLog):
    """A :class:`normlab.schema.GameLog` of AI-norms runs plus the loader's ``issues`` table.

    Attributes
    ----------
    decisions, runs : pandas.DataFrame
        As in :class:`normlab.schema.GameLog` (see :mod:`normlab.llm_runs.published.ainorms` for the
        extra run columns).
    issues : pandas.DataFrame
        Columns :data:`ISSUE_COLUMNS`: ``severity`` is ``"error"`` (the file contradicts itself:
        tracker vs. per-agent histories, payoffs, committed agents...) or ``"note"`` (legal but
        worth knowing: empty run, missing ``convergence`` entry, mixed-name final streak,
        stopping streak shorter than ``3N``, skipped unrecognised file).

    Notes
    -----
    :meth:`GameLog.select` and :meth:`GameLog.concat` return plain :class:`GameLog` objects.
    """

    issues: pd.DataFrame | None = None

    __repr__ = GameLog.__repr__  # short: counts, not the tables

    def __post_init__(self):
        super().__post_init__()
        issues = self.issues if self.issues is not None else pd.DataFrame(columns=list(ISSUE_COLUMNS))
        issues = pd.DataFrame(issues).reindex(columns=list(ISSUE_COLUMNS)).reset_index(drop=True)
        object.__setattr__(self, "issues", issues)


# --------------------------------------------------------------------------------------------
# sources: a .zip, a .pkl, a folder of them, or a sequence of those
# --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class _Member:
    archive: str | None  # archive file name, or None for a loose .pkl
    name: str  # base name of the pickle (the published file name)
    where: str  # human-readable location for messages
    size: int
    read: Callable[[], bytes]


def _bad_archive(zpath: Path, why: str) -> ValueError:
    return ValueError(f"{zpath}: {why}; give an intact AI-norms .zip, a .pkl or a folder of them")


def _zip_members(zpath: Path, max_bytes: int) -> list[_Member]:
    """The .pkl members of an archive, checked before anything is inflated: sizes, compression
    ratio, names (no absolute or ``..`` paths), no symbolic links, no encryption."""
    import stat

    if not _regular_file(zpath) or not zipfile.is_zipfile(zpath):
        raise ValueError(f"{zpath} is not a valid zip archive; give an AI-norms .zip, a .pkl or a folder of them")
    out = []
    total = 0
    try:
        zf = zipfile.ZipFile(zpath)
    except (zipfile.BadZipFile, OSError, ValueError, NotImplementedError) as exc:
        raise _bad_archive(zpath, f"unreadable zip archive ({exc})") from None
    with zf:
        for info in zf.infolist():
            name = info.filename
            base = name.rsplit("/", 1)[-1]
            if info.is_dir() or not base.lower().endswith(".pkl") or base.startswith("._") or "__MACOSX" in name:
                continue
            if name.startswith(("/", "\\")) or ".." in name.replace("\\", "/").split("/") or (len(name) > 1 and name[1] == ":"):
                raise _bad_archive(zpath, f"member {name!r} has an absolute or parent-directory path; refused")
            if stat.S_ISLNK(info.external_attr >> 16):
                raise _bad_archive(zpath, f"member {name!r} is a symbolic link; refused")
            if info.flag_bits & 0x1:
                raise _bad_archive(zpath, f"member {name!r} is encrypted; normlab reads unencrypted archives only")
            if info.file_size > max_bytes:
                raise ValueError(
                    f"{zpath.name}:{name} is {info.file_size} bytes uncompressed, more than the allowed "
                    f"{max_bytes}; raise max_file_bytes if this is intended"
                )
            if info.file_size > MAX_COMPRESSION_RATIO * max(info.compress_size, 1) and info.file_size > 2**20:
                raise _bad_archive(zpath, f"member {name!r} inflates {info.file_size / max(info.compress_size, 1):.0f}x "
                                          f"(more than {MAX_COMPRESSION_RATIO}x): a zip bomb; refused")
            total += info.file_size
            if total > MAX_ARCHIVE_BYTES:
                raise _bad_archive(zpath, f"more than {MAX_ARCHIVE_BYTES} bytes of pickles uncompressed; refused")

            def _read(zpath=zpath, member=name, size=info.file_size):
                try:
                    with zipfile.ZipFile(zpath) as z, z.open(member) as f:
                        data = f.read(size + 1)  # zipfile stops at the declared size and checks the CRC
                except (zipfile.BadZipFile, OSError, EOFError, ValueError, NotImplementedError, RuntimeError) as exc:
                    raise _bad_archive(zpath, f"member {member!r} is corrupt ({type(exc).__name__}: {exc})") from None
                if len(data) != size:
                    raise _bad_archive(zpath, f"member {member!r} does not match its declared size")
                return data

            out.append(_Member(zpath.name, base, f"{zpath.name}:{name}", info.file_size, _read))
    return out


def _regular_file(p: Path) -> bool:
    """True for a regular file (after following links): FIFOs, devices and sockets are refused, so
    a ``.pkl`` named pipe or a link to ``/dev/zero`` cannot hang the loader or fill memory."""
    import stat

    try:
        return stat.S_ISREG(p.stat().st_mode)
    except OSError:
        return False


def _file_member(p: Path, max_bytes: int) -> _Member:
    if not _regular_file(p):
        raise ValueError(f"{p} is not a regular file (a pipe, device or dangling link); refused")
    size = p.stat().st_size
    if size > max_bytes:
        raise ValueError(f"{p} is {size} bytes, more than the allowed {max_bytes}; raise max_file_bytes if intended")

    def _read(p=p, size=size):
        with open(p, "rb") as f:
            data = f.read(max_bytes + 1)
        if len(data) > max_bytes:
            raise ValueError(f"{p} grew beyond the allowed {max_bytes} bytes while being read; refused")
        return data

    return _Member(None, p.name, str(p), size, _read)


def _collect_members(path, max_bytes: int) -> list[_Member]:
    if isinstance(path, (str, PathLike)):
        paths = [path]
    elif isinstance(path, Sequence) and not isinstance(path, (bytes, bytearray)) and len(path) > 0:
        paths = list(path)
    else:
        raise TypeError(
            f"path must be a str or os.PathLike (or a non-empty sequence of them) naming an AI-norms .zip archive, "
            f"a .pkl file or a folder of them; got {type(path).__name__}"
        )
    members: list[_Member] = []
    for raw in paths:
        if not isinstance(raw, (str, PathLike)):
            raise TypeError(f"each path must be a str or os.PathLike; got {type(raw).__name__}")
        p = Path(raw)
        if not p.exists():
            raise FileNotFoundError(f"{p} does not exist; give an AI-norms .zip archive, a .pkl file or a folder of them")
        if p.is_dir():
            found = sorted(q for q in p.rglob("*") if q.is_file() and q.suffix.lower() in (".zip", ".pkl"))
            if not found:
                raise FileNotFoundError(f"{p} holds no .zip or .pkl files")
            for q in found:
                members.extend(_zip_members(q, max_bytes) if q.suffix.lower() == ".zip" else [_file_member(q, max_bytes)])
        elif p.suffix.lower() == ".zip":
            members.extend(_zip_members(p, max_bytes))
        elif p.suffix.lower() == ".pkl":
            members.append(_file_member(p, max_bytes))
        else:
            raise ValueError(f"{p} is neither a .zip archive nor a .pkl file; give an AI-norms .zip, .pkl or a folder")
    members.sort(key=lambda m: (m.name, m.archive or "", m.where))
    return members


# --------------------------------------------------------------------------------------------
# file-name parsing and filters
# --------------------------------------------------------------------------------------------
def _model_name(key: str) -> str:
    return MODEL_NAMES.get(key, key)


def _classify(name: str) -> dict | None:
    """Parse a published file name; ``None`` if it is not an AI-norms file."""
    m = _RUN_RE.fullmatch(name)
    if m:
        g = m.groupdict()
        kind = "baseline" if g["baseline"] else ("swap" if g["swap_init"] is not None else "evolved")
        init = g["swap_init"] if kind == "swap" else g["evolved_init"]
        return {
            "family": "run", "kind": kind, "model_key": g["model"], "model": _model_name(g["model"]),
            "names": tuple(g["names"].split("_")), "payoff_failure": int(g["fail"]),
            "payoff_success": int(g["succ"]), "memory": int(g["memory"]), "network": g["network"],
            "n_agents": int(g["n"]), "planned_interactions": int(g["ints"]) if g["ints"] else None,
            "temperature": float(g["tmp"]), "initial_index": int(init) if init is not None else None,
            "cm": int(g["cm"]) if g["cm"] is not None else 0,
        }
    m = _BIAS_RE.fullmatch(name)
    if m:
        return {"family": "probe", "kind": "probe", "probe": "strategy", "model_key": m["model"],
                "model": _model_name(m["model"]), "mine": m["mine"], "partner": m["partner"]}
    m = _NOMEM_RE.fullmatch(name)
    if m:
        return {"family": "probe", "kind": "probe", "probe": "no_memory", "model_key": m["model"],
                "model": _model_name(m["model"]), "pool": m["pool"], "memory": int(m["memory"])}
    m = _META_RE.fullmatch(name)
    if m:
        return {"family": "meta", "kind": None, "model_key": m["model"], "model": _model_name(m["model"])}
    return None


def _as_list(x, what: str) -> list:
    if x is None:
        return []
    if isinstance(x, str):
        return [x]
    if isinstance(x, Iterable):
        out = list(x)
        if not all(isinstance(v, str) for v in out):
            raise TypeError(f"{what} must be a str or a sequence of str; got {out!r}")
        return out
    raise TypeError(f"{what} must be a str or a sequence of str; got {type(x).__name__}")


def _resolve_models(models) -> set[str] | None:
    if models is None:
        return None
    out = set()
    known = sorted(set(MODEL_NAMES) | set(MODEL_NAMES.values()))
    for m in _as_list(models, "models"):
        if m in MODEL_NAMES:
            out.add(MODEL_NAMES[m])
        elif m in MODEL_NAMES.values():
            out.add(m)
        else:
            raise ValueError(f"unknown model {m!r}; allowed: {known}")
    return out


def _resolve_choice(values, allowed: tuple, what: str) -> set[str] | None:
    if values is None:
        return None
    out = set(_as_list(values, what))
    bad = sorted(out - set(allowed))
    if bad:
        raise ValueError(f"unknown {what} {bad}; allowed: {list(allowed)}")
    if not out:
        raise ValueError(f"{what} is empty; give at least one of {list(allowed)} (or None for all)")
    return out


def _check_on_inconsistency(value: str) -> str:
    if value not in _ON_INCONSISTENCY:
        raise ValueError(f"on_inconsistency must be one of {_ON_INCONSISTENCY}; got {value!r}")
    return value


def _load_member(mem: _Member):
    return restricted_loads(mem.read(), source=mem.where)


# --------------------------------------------------------------------------------------------
# game runs
# --------------------------------------------------------------------------------------------
class _Issues:
    def __init__(self):
        self.rows: list[dict] = []

    def add(self, source_file, source_run, severity, check, message):
        self.rows.append(dict(source_file=source_file, source_run=source_run, severity=severity,
                              check=check, message=message))

    def frame(self) -> pd.DataFrame:
        return pd.DataFrame(self.rows, columns=list(ISSUE_COLUMNS))


def _structure_error(where: str, msg: str) -> ValueError:
    return ValueError(f"{where}: unexpected structure: {msg} (see the README of the AI-norms data for the format)")


def _rules_names(rules: str) -> tuple[str, ...] | None:
    m = _RULES_NAMES_RE.search(rules)
    if not m:
        return None
    return tuple(s.strip().strip("'\"") for s in m.group(1).split(",") if s.strip())


def _first_diff(a: list, b: list) -> int:
    for k, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return k
    return min(len(a), len(b))


def _check_run(sim: dict, players: list, answers: list, outcome: list, info: dict, *, committed: set,
               committed_to, x_name) -> list[tuple[str, str]]:
    """Cross-check the tracker against the per-agent histories; return ``(check, message)`` errors."""
    errs: list[tuple[str, str]] = []
    T = len(players)
    succ, fail = info["payoff_success"], info["payoff_failure"]
    names = set(info["names"])
    bad = [t for t in range(T) if outcome[t] != int(answers[t][0] == answers[t][1])]
    if bad:
        errs.append(("tracker_outcome", f"tracker outcome disagrees with the answers at {len(bad)} interactions (first t={bad[0]})"))
    out_of_pool = sorted({a for pair in answers for a in pair if a not in names}, key=str)
    if out_of_pool:
        errs.append(("answer_pool", f"answers outside the name pool {sorted(names)}: {out_of_pool[:5]}"))
    own: dict = {a: [] for a in sim}
    oth: dict = {a: [] for a in sim}
    part: dict = {a: [] for a in sim}
    unknown = set()
    for t, ((i, j), (ai, aj)) in enumerate(zip(players, answers)):
        if i not in own or j not in own or i == j:
            unknown.add((i, j))
            continue
        own[i].append(ai)
        oth[i].append(aj)
        part[i].append(j)
        own[j].append(aj)
        oth[j].append(ai)
        part[j].append(i)
    if unknown:
        errs.append(("tracker_players", f"tracker pairs with unknown agents or self-play: {sorted(unknown)[:5]}"))
    expected_prefix = info["memory"] if info["kind"] in ("swap", "evolved") else 0
    bad_prefix, bad_my, bad_partner, bad_inter, bad_payoff, bad_score, bad_len, bad_prep = [], [], [], [], [], [], [], []
    for a, ag in sim.items():
        mh, ph, oc = ag["my_history"], ag["partner_history"], ag["outcome"]
        if not (len(mh) == len(ph) == len(oc)):
            bad_len.append(a)
            continue
        pre = len(mh) - len(own[a])
        if pre != expected_prefix:
            bad_prefix.append((a, pre))
        if pre >= 0:
            if mh[pre:] != own[a]:
                bad_my.append((a, _first_diff(mh[pre:], own[a])))
            if ph[pre:] != oth[a]:
                bad_partner.append((a, _first_diff(ph[pre:], oth[a])))
            if expected_prefix and pre > 0 and not all(m == x_name and p == x_name and o == succ
                                                       for m, p, o in zip(mh[:pre], ph[:pre], oc[:pre])):
                bad_prep.append(a)
        if list(ag.get("interactions", part[a])) != part[a]:
            bad_inter.append(a)
        if any(o != (succ if m == p else fail) for m, p, o in zip(mh, ph, oc)):
            bad_payoff.append(a)
        if "score" in ag and ag["score"] != sum(oc):
            bad_score.append(a)
        elif "score_history" in ag and list(np.cumsum(oc, dtype=np.int64)) != list(ag["score_history"]):
            bad_score.append(a)
    if bad_len:
        errs.append(("history_lengths", f"agents with my_history/partner_history/outcome of different lengths: {bad_len[:5]}"))
    if bad_prefix:
        errs.append(("prepared_memory", f"agents whose history has a prefix of (agent, length) {bad_prefix[:5]} "
                                        f"instead of {expected_prefix} prepared entries"))
    if bad_prep:
        errs.append(("prepared_memory", f"prepared entries are not ({x_name}, {x_name}, {succ}) for agents {bad_prep[:5]}"))
    if bad_my:
        errs.append(("my_history", f"my_history differs from the agent's answers in the tracker for (agent, first index) {bad_my[:5]}"))
    if bad_partner:
        errs.append(("partner_history", f"partner_history differs from the partners' answers in the tracker for {bad_partner[:5]}"))
    if bad_inter:
        errs.append(("interactions", f"'interactions' differs from the partners in the tracker for agents {bad_inter[:5]}"))
    if bad_payoff:
        errs.append(("payoffs", f"per-agent payoffs are not {succ}/{fail} for same/different names for agents {bad_payoff[:5]}"))
    if bad_score:
        errs.append(("score", f"score/score_history disagree with the payoffs for agents {bad_score[:5]}"))
    if info["network"] == "complete":
        ids = set(sim)
        bad_nb = [a for a, ag in sim.items() if "neighbours" in ag and set(ag["neighbours"]) != ids - {a}]
        if bad_nb:
            errs.append(("neighbours", f"'neighbours' is not the complete graph for agents {bad_nb[:5]}"))
    if info["kind"] == "swap" and len(committed) != info["cm"]:
        errs.append(("committed", f"{len(committed)} committed agents, but the file name says {info['cm']}"))
    if info["kind"] == "evolved" and committed:
        errs.append(("committed", f"evolved run with committed agents {sorted(committed)[:5]}"))
    if committed and committed_to is not None:
        wrong = sorted({a for a in committed for x in own.get(a, []) if x != committed_to})
        if wrong:
            errs.append(("committed", f"committed agents {wrong[:5]} did not always answer {committed_to!r}"))
    return errs


def _new_columns() -> dict[str, list]:
    return {c: [] for c in DECISION_COLUMNS}


def _append_decisions(cols: dict[str, list], players, answers, *, run: int, n_agents: int, memory: int,
                      committed: Iterable[int] = (), initial_memory: dict | None = None) -> None:
    """Append the rows of :func:`normlab.schema.rebuild_decisions` for one run to ``cols``.

    Same rows, order and memory-state strings as ``rebuild_decisions`` (checked in the tests);
    it only avoids building one DataFrame per run, which dominates the load time otherwise.
    """
    if memory < 1:
        raise ValueError(f"memory must be >= 1; got {memory}")
    committed = {int(c) for c in committed}
    mem: dict[int, deque] = {}
    if initial_memory:
        for a, entries in initial_memory.items():
            mem[int(a)] = deque((f"{o},{p}" for o, p in entries[-memory:]), maxlen=memory)
    c_run, c_t, c_round, c_agent, c_partner, c_name, c_pname, c_valid, c_succ, c_comm, c_state, c_len = (
        cols[c] for c in DECISION_COLUMNS)
    for t, ((i, j), (ai, aj)) in enumerate(zip(players, answers)):
        i, j = int(i), int(j)
        mi = mem.get(i)
        if mi is None:
            mi = mem[i] = deque(maxlen=memory)
        mj = mem.get(j)
        if mj is None:
            mj = mem[j] = deque(maxlen=memory)
        vi, vj = ai is not None, aj is not None
        success = bool(vi and vj and ai == aj)
        r = t // n_agents
        c_run.extend((run, run))
        c_t.extend((t, t))
        c_round.extend((r, r))
        c_agent.extend((i, j))
        c_partner.extend((j, i))
        c_name.extend((ai, aj))
        c_pname.extend((aj, ai))
        c_valid.extend((vi, vj))
        c_succ.extend((success, success))
        c_comm.extend((i in committed, j in committed))
        c_state.extend((";".join(mi), ";".join(mj)))
        c_len.extend((len(mi), len(mj)))
        if vi and vj:
            mi.append(f"{ai},{aj}")
            mj.append(f"{aj},{ai}")


def _stop_streak(outcome: np.ndarray) -> int:
    if outcome.size == 0:
        return 0
    zeros = np.flatnonzero(outcome == 0)
    return int(outcome.size - (zeros[-1] + 1)) if zeros.size else int(outcome.size)


def _committed_share_windows(players: np.ndarray, answers: np.ndarray, committed: set, name: str,
                             n_agents: int, rounds: int = 3) -> np.ndarray:
    """For every end point ``e = rounds*N .. T``: the sum over the ``rounds`` blocks of ``N``
    interactions before ``e`` of the share of ``name`` among the productions of uncommitted agents
    (empty array if the run is shorter than ``rounds*N``)."""
    T = len(players)
    if T < rounds * n_agents or T == 0:
        return np.zeros(0)
    unc = ~np.isin(players, list(committed)) if committed else np.ones(players.shape, dtype=bool)
    hits = np.concatenate([[0], np.cumsum(((answers == name) & unc).sum(axis=1))])
    tot = np.concatenate([[0], np.cumsum(unc.sum(axis=1))])
    ends = np.arange(rounds * n_agents, T + 1)
    total = np.zeros(ends.size)
    for b in range(rounds):
        lo = ends - (rounds - b) * n_agents
        hi = lo + n_agents
        h, n = hits[hi] - hits[lo], tot[hi] - tot[lo]
        total += np.where(n > 0, h / np.maximum(n, 1), 0.0)
    return total


def _convert_run_file(obj, mem: _Member, info: dict, next_run: int, issues: _Issues, errors: list,
                      cols: dict[str, list]) -> list[dict]:
    where = mem.where
    if not isinstance(obj, dict):
        raise _structure_error(where, f"top level is a {type(obj).__name__}, expected a dict of runs")
    rules = obj.get("rules")
    if rules is not None and not isinstance(rules, str):
        raise _structure_error(where, "'rules' is not a str")
    names = validate_names(info["names"])
    if rules:
        rn = _rules_names(rules)
        if rn is not None and rn != names:
            errors.append((mem.name, None, "rules", f"the rules prompt lists {list(rn)} but the file name says {list(names)}"))
        pays = {int(x) for x in _RULES_PAYOFF_RE.findall(rules)}
        if pays and pays != {info["payoff_success"], info["payoff_failure"]}:
            errors.append((mem.name, None, "rules", f"the rules prompt has payoffs {sorted(pays)}, the file name "
                                                   f"{info['payoff_failure']}/{info['payoff_success']}"))
    keys = [k for k in obj if k != "rules"]
    bad_keys = [k for k in keys if type(k) is not int]
    if bad_keys:
        raise _structure_error(where, f"run keys must be ints; got {bad_keys[:5]}")
    init = info["initial_index"]
    if info["kind"] != "baseline" and (init is None or init >= len(names) or len(names) < 2):
        raise ValueError(f"{where}: cannot tell the initial consensus name from the file name (index {init}, pool {names})")
    x_name = names[init] if info["kind"] != "baseline" else None
    y_default = names[1] if info["kind"] != "baseline" else None
    H, N = info["memory"], info["n_agents"]
    if H < 1:
        raise ValueError(f"{where}: memory length {H} in the file name; expected >= 1 for a game run")
    run_rows = []
    for k in sorted(keys):
        run = obj[k]
        rw = f"{where} run {k}"
        if not isinstance(run, dict) or not isinstance(run.get("simulation"), dict) or not isinstance(run.get("tracker"), dict):
            raise _structure_error(rw, "expected a dict with 'simulation' and 'tracker' dicts")
        sim, tr = run["simulation"], run["tracker"]
        for key in ("players", "answers", "outcome"):
            if not isinstance(tr.get(key), list):
                raise _structure_error(rw, f"tracker[{key!r}] is missing or not a list")
        for a, ag in sim.items():
            if type(a) is not int or not isinstance(ag, dict):
                raise _structure_error(rw, f"simulation entries must be int -> dict; got {a!r}")
            for key in ("my_history", "partner_history", "outcome"):
                if not isinstance(ag.get(key), list):
                    raise _structure_error(rw, f"agent {a} has no list {key!r}")
        players, answers, outcome = tr["players"], tr["answers"], tr["outcome"]
        if not (len(players) == len(answers) == len(outcome)):
            raise _structure_error(rw, f"tracker lists have lengths {len(players)}, {len(answers)}, {len(outcome)}")
        if any(not isinstance(p, (list, tuple)) or len(p) != 2 for p in players) or \
                any(not isinstance(p, (list, tuple)) or len(p) != 2 for p in answers):
            raise _structure_error(rw, "tracker players/answers must be pairs")
        if any(type(i) is not int for p in players for i in p):
            raise _structure_error(rw, "tracker players must be int agent ids")
        conv = run.get("convergence")
        if conv is None:
            issues.add(mem.name, k, "note", "convergence", "run has no 'convergence' entry")
            conv = {}
        elif not isinstance(conv, dict):
            raise _structure_error(rw, "'convergence' is not a dict")
        converged_index = conv.get("converged_index")
        committed_to = conv.get("committed_to")
        committed = {a for a, ag in sim.items() if ag.get("committed_tag") is True}
        T = len(players)
        if len(sim) != N:
            errors.append((mem.name, k, "n_agents", f"{len(sim)} agents, but the file name says {N}"))
        if info["kind"] == "baseline":
            if converged_index is not None and converged_index != T:
                errors.append((mem.name, k, "converged_index", f"converged_index {converged_index} != {T} interactions"))
            if committed_to is not None:
                errors.append((mem.name, k, "committed_to", f"baseline run with committed_to={committed_to!r}"))
        else:
            if committed_to is not None and committed_to != y_default:
                errors.append((mem.name, k, "committed_to", f"committed_to={committed_to!r}, expected {y_default!r} (names[1])"))
        ans = [tuple(a if isinstance(a, str) else None for a in pair) for pair in answers]
        y_name = committed_to if committed_to is not None else y_default
        for check, msg in _check_run(sim, players, ans, outcome, info, committed=committed,
                                     committed_to=y_name if committed else None, x_name=x_name):
            errors.append((mem.name, k, check, msg))
        # initial memory: the prepared prefix of each agent's history
        init_mem = None
        if info["kind"] != "baseline":
            init_mem = {}
            n_own = Counter(i for pr in players for i in pr)
            for a, ag in sim.items():
                pre = max(len(ag["my_history"]) - n_own.get(a, 0), 0)
                init_mem[a] = list(zip(ag["my_history"][:pre], ag["partner_history"][:pre]))
        run_id = next_run + len(run_rows)
        pl = np.asarray(players, dtype=np.int64).reshape(-1, 2)
        # keep invalid answers (None) out of the schema's memory; names with ',' or ';' are invalid
        clean = [tuple(a if a is not None and "," not in a and ";" not in a else None for a in pair) for pair in ans]
        _append_decisions(cols, players, clean, run=run_id, n_agents=N, memory=H, committed=committed,
                          initial_memory=init_mem)
        out = np.asarray(outcome, dtype=np.int64)
        streak = _stop_streak(out)
        consensus = None
        if T == 0:
            issues.add(mem.name, k, "note", "empty_run", "run has no interactions")
        if streak >= CONVERGENCE_STREAK:
            in_streak = {a for pair in clean[T - streak:] for a in pair}
            if len(in_streak) == 1:
                consensus = next(iter(in_streak))
            else:
                issues.add(mem.name, k, "note", "consensus", f"final streak of {streak} successes mixes names "
                                                             f"{sorted(in_streak, key=str)}; consensus set to None")
            if info["kind"] == "baseline" and streak < 3 * N:
                issues.add(mem.name, k, "note", "stop_streak",
                           f"run stopped after {streak} consecutive successes, fewer than 3N = {3 * N}")
        share, flipped, flip_at = float("nan"), pd.NA, None
        if info["kind"] != "baseline" and y_name is not None:
            arr = np.array([[a if a is not None else "" for a in pair] for pair in clean], dtype=object).reshape(-1, 2)
            windows = _committed_share_windows(pl, arr, committed, y_name, N)
            if windows.size:
                share = float(windows[-1])
                flipped = bool(share >= CRITICAL_MASS_THRESHOLD)
                hit = np.flatnonzero(windows >= CRITICAL_MASS_THRESHOLD)
                flip_at = int(3 * N + hit[0]) if hit.size else None
        run_rows.append({
            "run": run_id, "model": info["model"], "kind": info["kind"], "names": ",".join(names),
            "n_agents": N, "memory": H, "committed_count": len(committed),
            "committed_name": y_name if committed else None,
            "initial": "empty" if info["kind"] == "baseline" else f"consensus:{x_name}",
            "n_interactions": T, "consensus": consensus, "source_file": mem.name,
            "source_run": k, "source_archive": mem.archive, "model_key": info["model_key"],
            "network": info["network"], "temperature": info["temperature"],
            "payoff_success": info["payoff_success"], "payoff_failure": info["payoff_failure"],
            "prepared_memory": H if info["kind"] != "baseline" else 0,
            "initial_index": info["initial_index"], "planned_interactions": info["planned_interactions"],
            "converged_index": converged_index, "committed_to": committed_to, "stop_streak": streak,
            "converged": streak >= CONVERGENCE_STREAK, "committed_share_last3": share, "flipped": flipped,
            "flip_interaction": flip_at,
        })
    return run_rows


def _finish_runs(rows: list[dict]) -> pd.DataFrame:
    cols = list(RUN_COLUMNS) + list(RUN_EXTRA_COLUMNS)
    df = pd.DataFrame(rows, columns=cols)
    for c in ("source_run", "initial_index", "planned_interactions", "converged_index", "payoff_success",
              "payoff_failure", "prepared_memory", "stop_streak", "flip_interaction"):
        df[c] = pd.array(df[c].astype(object).where(df[c].notna(), None).tolist(), dtype="Int64")
    df["flipped"] = pd.array(df["flipped"].astype(object).where(df["flipped"].notna(), None).tolist(), dtype="boolean")
    df["converged"] = df["converged"].astype(bool)
    df["temperature"] = df["temperature"].astype(float)
    df["committed_share_last3"] = df["committed_share_last3"].astype(float)
    for c in ("committed_to", "source_archive"):
        df[c] = df[c].astype(object).where(df[c].notna(), None)
    return runs_frame(df)


# --------------------------------------------------------------------------------------------
# probes
# --------------------------------------------------------------------------------------------
def _probe_rows(obj, mem: _Member, info: dict, errors: list) -> list[dict]:
    where = mem.where
    if not isinstance(obj, dict) or not isinstance(obj.get("simulation"), dict) or not isinstance(obj.get("tracker"), dict):
        raise _structure_error(where, "expected {'simulation': {...}, 'tracker': {'answers': [...]}}")
    player, answers = obj["simulation"], obj["tracker"].get("answers")
    if not isinstance(answers, list):
        raise _structure_error(where, "tracker['answers'] is missing or not a list")
    mh, ph = player.get("my_history", []), player.get("partner_history", [])
    if not isinstance(mh, list) or not isinstance(ph, list) or len(mh) != len(ph):
        raise _structure_error(where, "the probe player needs my_history and partner_history lists of equal length")
    if info["probe"] == "strategy":
        if "".join(map(str, mh)) != info["mine"] or "".join(map(str, ph)) != info["partner"]:
            errors.append((mem.name, None, "probe_memory", f"memory {mh}/{ph} does not match the file name "
                                                           f"({info['mine']}_{info['partner']})"))
        symbols = set(mh) | set(ph) | {a for a in answers if isinstance(a, str)}
        if symbols <= set(STRATEGY_PROBE_NAMES):
            names = STRATEGY_PROBE_NAMES
        else:  # fallback: order of first appearance
            names = tuple(dict.fromkeys([*mh, *ph, *(a for a in answers if isinstance(a, str))]))
    else:
        if mh or ph or info["memory"] != 0:
            errors.append((mem.name, None, "probe_memory", f"no-memory probe with memory {mh}/{ph} ({info['memory']}mem)"))
        names = tuple(info["pool"])  # published pools are single letters, e.g. "QMXYFJPRCD"
    names = validate_names(names)
    state = memory_state_string(zip(mh, ph))
    pool = set(names)
    rows = []
    for i, a in enumerate(answers):
        valid = isinstance(a, str) and a in pool
        rows.append({"model": info["model"], "probe": info["probe"], "names": ",".join(names), "memory_state": state,
                     "memory_len": len(mh), "i": i, "name": a if valid else None, "valid": valid,
                     "source_file": mem.name, "source_archive": mem.archive, "model_key": info["model_key"],
                     "raw_answer": a if isinstance(a, str) else None})
    n_bad = sum(1 for r in rows if not r["valid"])
    if n_bad:
        errors.append((mem.name, None, "answer_pool", f"{n_bad} answers outside the pool {list(names)} (kept as invalid)"))
    return rows


def _probe_frame(rows: list[dict]) -> pd.DataFrame:
    cols = list(PROBE_COLUMNS) + ["source_archive", "model_key", "raw_answer"]
    df = pd.DataFrame(rows, columns=cols)
    df["memory_len"] = df["memory_len"].astype(np.int64)
    df["i"] = df["i"].astype(np.int64)
    df["valid"] = df["valid"].astype(bool)
    for c in ("name", "raw_answer", "source_archive"):
        df[c] = df[c].astype(object).where(df[c].notna(), None)
    return df


def _report(errors: list, issues: _Issues, on_inconsistency: str) -> None:
    if not errors:
        return
    if on_inconsistency == "raise":
        lines = [f"{f} run {r}: [{c}] {m}" if r is not None else f"{f}: [{c}] {m}" for f, r, c, m in errors[:5]]
        more = f" (and {len(errors) - 5} more)" if len(errors) > 5 else ""
        raise ValueError("inconsistent AI-norms data: " + "; ".join(lines) + more +
                         "; pass on_inconsistency='warn' (or 'ignore') to load anyway and inspect .issues")
    for f, r, c, m in errors:
        issues.add(f, r, "error", c, m)
    if on_inconsistency == "warn":
        warnings.warn(f"{len(errors)} inconsistencies in the AI-norms data (see the 'issues' table); first: "
                      f"{errors[0][0]} run {errors[0][1]}: [{errors[0][2]}] {errors[0][3]}", stacklevel=3)


# --------------------------------------------------------------------------------------------
# public API
# --------------------------------------------------------------------------------------------
def load_ainorms(path, *, models=None, kinds=None, files: str | Sequence[str] | None = None,
                 on_inconsistency: str = "raise", max_file_bytes: int = MAX_FILE_BYTES) -> AINormsLog:
    """Load published AI-norms game runs into the tidy schema, with a restricted unpickler.

    Parameters
    ----------
    path : str, os.PathLike or sequence of them
        A published archive (``llama3_data.zip``...), a single ``.pkl`` file, or a folder holding
        archives and/or pickles (searched recursively).
    models : str or sequence of str, optional
        Keep these models: full names (``"Llama-3.1-70B-Instruct"``) or file shorthands
        (``"llama31_70b"``, ``"llama31"``). Default: all.
    kinds : str or sequence of str, optional
        Subset of ``("baseline", "swap", "evolved", "probe")``. Default: the three game kinds.
        ``"probe"`` adds one run per probe file (``n_agents = 1``, ``memory`` = length of the fixed
        memory, ``initial`` = ``"empty"`` or ``"memory:<state>"``; its decisions have
        ``agent = 0``, ``partner = -1``, ``partner_name = None``, ``success = False``) -- for
        analyses prefer :func:`load_ainorms_probes`.
    files : str or sequence of str, optional
        Shell-style patterns (:func:`fnmatch.fnmatch`) on the published file name, e.g.
        ``"*_converged_baseline_Q_M_-50_100_5mem_*_24ps_*"``. Only matching files are unpickled.
    on_inconsistency : {"raise", "warn", "ignore"}, optional
        What to do when a file contradicts itself (tracker vs. ``my_history``/``partner_history``/
        ``interactions``, payoffs, prepared memory, committed agents, rules prompt vs. file name):
        raise a :class:`ValueError` (default), or record the problems in ``.issues`` (and warn).
    max_file_bytes : int, optional
        Refuse pickles larger than this (uncompressed).

    Returns
    -------
    AINormsLog
        ``.decisions`` (:data:`normlab.schema.DECISION_COLUMNS`), ``.runs``
        (:data:`normlab.schema.RUN_COLUMNS` plus the extra columns documented in
        :mod:`normlab.llm_runs.published.ainorms`) with ``run`` = 0..R-1 in file-name then run-key order,
        and ``.issues``.

    Raises
    ------
    FileNotFoundError
        ``path`` does not exist, or a folder holds no ``.zip``/``.pkl``.
    ValueError
        Not a zip/pkl; unknown ``models``/``kinds``; no matching file; a pickle is unsafe
        (:class:`UnsafePickleError`, also a ``ValueError``) or malformed; inconsistent data with
        ``on_inconsistency="raise"``.
    TypeError
        ``path``/``models``/``kinds``/``files`` of the wrong type.

    Notes
    -----
    Memory states follow :func:`normlab.schema.rebuild_decisions` applied to the tracker
    (``players``, ``answers``) with memory length ``H`` from the file name; in swap and evolved
    files the ``H`` prepared ``(X, X, +100)`` entries of every agent become its initial memory.
    Before conversion every run is cross-checked: tracker outcome vs. answers, each agent's
    ``my_history``/``partner_history``/``interactions`` vs. its answers/partners in the tracker (in
    order, after the prepared prefix), prepared entries, payoffs, scores, complete-graph
    neighbours, committed agents (count vs. file name, always answering ``committed_to``),
    ``converged_index`` and the ``rules`` prompt vs. the file name. Loading both published
    archives takes about 7 s (2 shared cores).
    The order in which names were shown in each prompt was not recorded (the published code
    shuffles the pool for every prompt), so it cannot be recovered.

    References
    ----------
    .. [1] Ariel-Flint-Ashery/AI-norms, commit e7d8691
       (``simulation_module.ipynb``: ``converge``, ``simulate_CM``, ``get_prepared_dataframe``).
    .. [2] Flint Ashery, Aiello & Baronchelli, Sci. Adv. 11, eadu9368 (2025), Methods and
       Supplementary Materials.

    Examples
    --------
    >>> log = load_ainorms("/work/shared/data/ai-norms", kinds="baseline")  # doctest: +SKIP
    >>> log.select(names="Q,M", memory=5, n_agents=24).runs["consensus"].value_counts()  # doctest: +SKIP
    """
    model_set = _resolve_models(models)
    kind_set = _resolve_choice(kinds, ALL_KINDS, "kinds") or set(GAME_KINDS)
    patterns = _as_list(files, "files") if files is not None else None
    _check_on_inconsistency(on_inconsistency)
    members = _collect_members(path, max_file_bytes)
    issues, errors = _Issues(), []
    run_rows, probe_runs = [], []
    cols = _new_columns()
    matched = 0
    for mem in members:
        info = _classify(mem.name)
        if info is None:
            issues.add(mem.name, None, "note", "skipped", f"{mem.where}: not a recognised AI-norms file name")
            continue
        if info["family"] == "meta" or info["kind"] not in kind_set:
            continue
        if model_set is not None and info["model"] not in model_set:
            continue
        if patterns is not None and not any(fnmatch.fnmatchcase(mem.name, p) for p in patterns):
            continue
        matched += 1
        obj = _load_member(mem)
        if info["family"] == "run":
            run_rows.extend(_convert_run_file(obj, mem, info, len(run_rows), issues, errors, cols))
        else:
            probe_runs.append((mem, info, _probe_rows(obj, mem, info, errors)))
    if matched == 0:
        raise ValueError(f"no AI-norms file in {path!s} matches models={models!r}, kinds={sorted(kind_set)}, files={files!r}")
    for mem, info, rows in probe_runs:
        run_id = len(run_rows)
        state = rows[0]["memory_state"] if rows else ""
        mlen = rows[0]["memory_len"] if rows else 0
        names = rows[0]["names"] if rows else ""
        run_rows.append({
            "run": run_id, "model": info["model"], "kind": "probe", "names": names, "n_agents": 1, "memory": mlen,
            "committed_count": 0, "committed_name": None, "initial": "empty" if mlen == 0 else f"memory:{state}",
            "n_interactions": len(rows), "consensus": None, "source_file": mem.name, "source_run": None,
            "source_archive": mem.archive, "model_key": info["model_key"], "network": None, "temperature": float("nan"),
            "payoff_success": None, "payoff_failure": None, "prepared_memory": 0, "initial_index": None,
            "planned_interactions": None, "converged_index": None, "committed_to": None, "stop_streak": None,
            "converged": False, "committed_share_last3": float("nan"), "flipped": None, "flip_interaction": None,
        })
        n = len(rows)
        for c, vals in (("run", [run_id] * n), ("t", range(n)), ("round", range(n)), ("agent", [0] * n),
                        ("partner", [-1] * n), ("name", (r["name"] for r in rows)), ("partner_name", [None] * n),
                        ("valid", (r["valid"] for r in rows)), ("success", [False] * n), ("committed", [False] * n),
                        ("memory_state", [state] * n), ("memory_len", [mlen] * n)):
            cols[c].extend(vals)
    _report(errors, issues, on_inconsistency)
    runs = _finish_runs(run_rows)
    return AINormsLog(decisions_frame(cols), runs, issues.frame())


def load_ainorms_probes(path, *, models=None, probes=None, on_inconsistency: str = "raise",
                        max_file_bytes: int = MAX_FILE_BYTES) -> pd.DataFrame:
    """Load the individual-bias probes: one row per probe answer.

    Two probe families are published:

    - ``strategy`` (``<model>_bias_test_<mine>_<partner>.pkl``, Llama-3.1 only): a single agent with
      a fixed memory of 1 or 2 rounds (``my_history = list(<mine>)``, ``partner_history =
      list(<partner>)``; e.g. ``MQ_QM`` is the memory ``"M,Q;Q,M"``) asked 1000 times which name to
      play from the pool ``Q, M`` (shuffled in each prompt; order not recorded).
    - ``no_memory`` (``<model>_no_memory_bias_test_<pool>_0mem.pkl``): first moves with empty
      memory for the pools ``QM`` and ``QMXYFJPRCD`` (5000/15000 answers for Llama-3, 10000/10000
      for Llama-3.1).

    Parameters
    ----------
    path : str, os.PathLike or sequence of them
        As for :func:`load_ainorms`.
    models : str or sequence of str, optional
        As for :func:`load_ainorms`.
    probes : str or sequence of str, optional
        Subset of :data:`PROBE_KINDS` (``"strategy"``, ``"no_memory"``). Default: both.
    on_inconsistency : {"raise", "warn", "ignore"}, optional
        Fixed memory contradicting the file name, or answers outside the pool.
    max_file_bytes : int, optional
        As for :func:`load_ainorms`.

    Returns
    -------
    pandas.DataFrame
        Columns :data:`PROBE_COLUMNS` -- ``model``, ``probe``, ``names`` (pool, comma-joined),
        ``memory_state`` (the fixed memory in the :mod:`normlab.schema` string format, ``""``
        if empty), ``memory_len``, ``i`` (answer index within the file), ``name`` (the answer;
        ``None`` if outside the pool), ``valid``, ``source_file`` -- plus ``source_archive``,
        ``model_key`` and ``raw_answer``.

    Raises
    ------
    FileNotFoundError, ValueError, TypeError
        As for :func:`load_ainorms`; ``ValueError`` also when no probe file matches.

    References
    ----------
    .. [1] Ariel-Flint-Ashery/AI-norms, commit e7d8691,
       ``bias.ipynb`` (``get_configuration_dataframe``, ``simulate``).
    .. [2] Flint Ashery, Aiello & Baronchelli, Sci. Adv. 11, eadu9368 (2025), Supplementary
       Materials (individual bias).
    """
    model_set = _resolve_models(models)
    probe_set = _resolve_choice(probes, PROBE_KINDS, "probes") or set(PROBE_KINDS)
    _check_on_inconsistency(on_inconsistency)
    members = _collect_members(path, max_file_bytes)
    errors, issues, rows = [], _Issues(), []
    matched = 0
    for mem in members:
        info = _classify(mem.name)
        if info is None or info["family"] != "probe" or info["probe"] not in probe_set:
            continue
        if model_set is not None and info["model"] not in model_set:
            continue
        matched += 1
        rows.extend(_probe_rows(_load_member(mem), mem, info, errors))
    if matched == 0:
        raise ValueError(f"no AI-norms probe file in {path!s} matches models={models!r}, probes={sorted(probe_set)}")
    _report(errors, issues, on_inconsistency)
    return _probe_frame(rows)


def _meta_items(val) -> list | None:
    """The 0/1 items of one question: a list, or a dict ``{'outcome': list}``; ``None`` otherwise."""
    if isinstance(val, list):
        return val
    if isinstance(val, dict) and set(val) == {"outcome"} and isinstance(val["outcome"], list):
        return val["outcome"]
    return None


def _meta_score(c, where: str, question) -> int:
    if isinstance(c, (bool, int, np.integer)) and int(c) in (0, 1):
        return int(c)
    raise _structure_error(where, f"question {question!r} holds {c!r}; scores must be 0 or 1")


def load_ainorms_meta(path, *, models=None, max_file_bytes: int = MAX_FILE_BYTES) -> pd.DataFrame:
    """Load the meta-prompting (game comprehension) tests as a long frame.

    Published structures:

    - ``llama31_meta_test_final.pkl``: ``{player: {question: [0/1, ...]}}`` for players 1-8 of run 0
      of the Llama-3.1 Q/M baseline (H = 5); one entry per interaction ``t`` of that player for the
      questions ``min``, ``max``, ``actions``, ``payoff``, ``round`` and one per ``t >= 1`` for the
      history questions ``action_i``, ``points_i``, ``no_actions``, ``no_points`` (not asked with
      an empty memory).
    - ``llama3_meta_prompting.pkl``: a summary ``{question: {'mean': float, 'std': float}}``
      (``#_actions``/``#_points`` are renamed ``no_actions``/``no_points``).
    - ``claude_meta_prompting_final.pkl`` (AI-norms ``plotter.ipynb``): the per-player layout above
      under a ``..._meta_prompting_<suffix>`` name.
    - ``{player: {question: {'outcome': [0/1, ...]}}}`` (``llama2_meta_test.pkl`` as read by
      ``plotter.ipynb``) and ``{question: {'outcome': [0/1, ...]}}`` (no player level): the
      outcomes are the per-item scores.
    - ``{question: [0/1, ...]}`` (the authors' ``simulate_meta_prompting``: random players, no
      player level).

    Rows without a player level have ``player`` NA and ``step`` the item's position.

    Parameters
    ----------
    path : str, os.PathLike or sequence of them
        As for :func:`load_ainorms`.
    models : str or sequence of str, optional
        As for :func:`load_ainorms`.
    max_file_bytes : int, optional
        As for :func:`load_ainorms`.

    Returns
    -------
    pandas.DataFrame
        Columns :data:`META_COLUMNS`: ``model``, ``source_file``, ``player`` (Int64, NA for
        summaries), ``question``, ``step`` (the player's interaction index ``t`` at which the
        question was asked; NA for summaries), ``correct`` (Int64 0/1; NA for summaries),
        ``mean``, ``std`` (NaN for per-item rows).

    References
    ----------
    .. [1] Ariel-Flint-Ashery/AI-norms, commit ac9e2d6,
       ``meta_prompting.ipynb`` (``get_question``, ``gold_sim``, ``run``).
    .. [2] Flint Ashery, Aiello & Baronchelli, Sci. Adv. 11, eadu9368 (2025), Supplementary
       Materials (meta-prompting).
    """
    model_set = _resolve_models(models)
    members = _collect_members(path, max_file_bytes)
    rows = []
    matched = 0
    for mem in members:
        info = _classify(mem.name)
        if info is None or info["family"] != "meta":
            continue
        if model_set is not None and info["model"] not in model_set:
            continue
        matched += 1
        obj = _load_member(mem)
        if not isinstance(obj, dict):
            raise _structure_error(mem.where, "expected a dict")
        for key, val in obj.items():
            if isinstance(val, dict) and set(val) >= {"mean", "std"}:  # summary: question -> stats
                rows.append({"model": info["model"], "source_file": mem.name, "player": None,
                             "question": _META_QUESTION_ALIASES.get(key, key), "step": None, "correct": None,
                             "mean": float(val["mean"]), "std": float(val["std"])})
            elif _meta_items(val) is not None:  # no player level: question -> list or {'outcome': list}
                q = _META_QUESTION_ALIASES.get(key, key)
                for k, c in enumerate(_meta_items(val)):
                    rows.append({"model": info["model"], "source_file": mem.name, "player": None, "question": q,
                                 "step": k, "correct": _meta_score(c, mem.where, key), "mean": float("nan"),
                                 "std": float("nan")})
            elif isinstance(val, dict):  # per player: question -> list of 0/1 (or {'outcome': list})
                if isinstance(key, str) and not key.lstrip("-").isdigit():
                    raise _structure_error(mem.where, f"entry {key!r} is neither a player nor a question's items")
                for q, seq in val.items():
                    items = _meta_items(seq)
                    if items is None:
                        raise _structure_error(mem.where, f"player {key} question {q!r} is not a list "
                                                          "(or a dict with an 'outcome' list)")
                    q = _META_QUESTION_ALIASES.get(q, q)
                    offset = 1 if q in _META_HISTORY_QUESTIONS else 0
                    for k, c in enumerate(items):
                        rows.append({"model": info["model"], "source_file": mem.name, "player": int(key),
                                     "question": q, "step": k + offset, "correct": _meta_score(c, mem.where, q),
                                     "mean": float("nan"), "std": float("nan")})
            else:
                raise _structure_error(mem.where, f"entry {key!r} is neither a per-player dict nor a summary")
    if matched == 0:
        raise ValueError(f"no AI-norms meta-prompting file in {path!s} matches models={models!r}")
    df = pd.DataFrame(rows, columns=list(META_COLUMNS))
    for c in ("player", "step", "correct"):
        df[c] = pd.array(df[c].astype(object).where(df[c].notna(), None).tolist(), dtype="Int64")
    df["mean"] = df["mean"].astype(float)
    df["std"] = df["std"].astype(float)
    return df


def mean_success_by_round(log: GameLog, *, pad_finished: bool = True) -> pd.Series:
    """Mean success rate per population round across the runs of ``log`` (Flint Ashery et al. 2025, Fig. 1).

    Parameters
    ----------
    log : normlab.schema.GameLog
        E.g. ``load_ainorms(...).select(kind="baseline", names="Q,M,X,Y,F,J,P,R,C,D")``.
    pad_finished : bool, optional
        Count a run that has already stopped (converged) as fully successful in later rounds, as
        the published ``plotter.ipynb`` does (trajectories padded with 1). Otherwise average only
        over the runs still going.

    Returns
    -------
    pandas.Series
        Indexed by the published round label ``round + 1`` (label ``r`` covers interactions
        ``(r - 1) N ... r N - 1``; a final partial round is averaged over its interactions), named
        ``success_rate``.

    References
    ----------
    .. [1] Ariel-Flint-Ashery/AI-norms, commit e57aeef151a46108fd1521c66e345e557e57dbf6,
       ``plotter.ipynb`` (``success_rate``: bins of ``N`` outcomes from ``t = 0``, plotted at
       ``(i + 1) N / N``; average over runs padded with 1).
    """
    if not isinstance(log, GameLog):
        raise TypeError(f"log must be a normlab.schema.GameLog; got {type(log).__name__}")
    inter = log.decisions.drop_duplicates(["run", "t"])
    tab = inter.groupby(["run", "round"])["success"].mean().unstack("round")
    tab = tab.reindex(index=log.runs["run"].to_numpy())
    if tab.shape[1] == 0:
        return pd.Series(dtype=float, name="success_rate")
    if pad_finished:
        tab = tab.fillna(1.0)
    curve = tab.mean(axis=0, skipna=True)
    curve.index = curve.index.astype(np.int64) + 1
    curve.index.name = "round"
    return curve.rename("success_rate")


def first_round_reaching(curve: pd.Series, threshold: float = 0.95) -> int | None:
    """First round label at which ``curve`` (from :func:`mean_success_by_round`) is ``>= threshold``.

    A tolerance of 1e-9 absorbs floating-point noise (the Llama-3, W = 10 curve is exactly 0.95 at
    round 10).

    Parameters
    ----------
    curve : pandas.Series
    threshold : float, optional

    Returns
    -------
    int or None
        ``None`` if never reached.
    """
    if not isinstance(curve, pd.Series):
        raise TypeError(f"curve must be a pandas Series; got {type(curve).__name__}")
    hit = curve.index[curve.to_numpy(dtype=float) >= threshold - 1e-9]
    return int(hit[0]) if len(hit) else None
