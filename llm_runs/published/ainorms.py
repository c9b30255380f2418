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
    threshold (published: 0.95 at round 10 for Llama-3 and 13 for Llama-3.1, W = 10); the rule itself, on any
    sequence of values, is :func:`first_position_reaching` (also behind
    :func:`normlab.calibration.prediction.readings.first_round_reaching`, the simulated curves' reading).

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
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np
import pandas as pd

from normlab.schema import GameLog, decisions_frame

from ._unpickle import UnsafePickleError
# The loader's pieces (this module is the public face): the sources, file names and filters in
# ainorms_archive.py; the cross-checks and tidy tables in ainorms_tables.py. Their constants are
# re-exported here, where they were defined before the split.
from .ainorms_archive import (MAX_ARCHIVE_BYTES, MAX_COMPRESSION_RATIO, MAX_FILE_BYTES, MODEL_NAMES,  # noqa: F401
                              _as_list, _check_on_inconsistency, _classify, _collect_members, _load_member,
                              _resolve_choice, _resolve_models, ainorms_file_patterns, find_ainorms)
from .ainorms_tables import (CONVERGENCE_STREAK, CRITICAL_MASS_THRESHOLD, ISSUE_COLUMNS, PROBE_COLUMNS,  # noqa: F401
                             RUN_EXTRA_COLUMNS, STRATEGY_PROBE_NAMES, _committed_share_windows, _convert_run_file,
                             _finish_runs, _Issues, _meta_items, _meta_score, _new_columns, _probe_frame, _probe_rows,
                             _report, _structure_error)

__all__ = [
    "AINormsLog",
    "load_ainorms",
    "load_ainorms_probes",
    "load_ainorms_meta",
    "ainorms_archives_log",
    "find_ainorms",
    "ainorms_file_patterns",
    "mean_success_by_round",
    "first_round_reaching",
    "first_position_reaching",
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

#: Run kinds stored in the game-run files, and the kind given to probe files.
GAME_KINDS = ("baseline", "swap", "evolved")
ALL_KINDS = GAME_KINDS + ("probe",)
#: Probe families of :func:`load_ainorms_probes`.
PROBE_KINDS = ("strategy", "no_memory")
META_COLUMNS = ("model", "source_file", "player", "question", "step", "correct", "mean", "std")
_META_QUESTION_ALIASES = {"#_actions": "no_actions", "#_points": "no_points"}
_META_HISTORY_QUESTIONS = ("action_i", "points_i", "no_actions", "no_points")


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


def ainorms_archives_log(archives=()) -> tuple[GameLog | None, list[Path]]:
    """The AI-norms archives ``archives`` (default: every ``.zip`` in :func:`find_ainorms`) read
    as one :class:`~normlab.schema.GameLog` of their baseline, swap and evolved runs, and their
    paths; ``(None, [])`` when none are given or found. What the paper-figure checks start from."""
    paths = [Path(a) for a in archives]
    if not paths:
        root = find_ainorms()
        if root is None:
            return None, []
        paths = sorted(Path(root).glob("*.zip"))
    logs = [load_ainorms(p, kinds=["baseline", "swap", "evolved"], on_inconsistency="warn") for p in paths]
    return (logs[0] if len(logs) == 1 else GameLog.concat(logs)), paths


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
    k = first_position_reaching(curve.to_numpy(dtype=float), threshold)
    return None if k is None else int(curve.index[k])


def first_position_reaching(values, threshold: float = 0.95) -> int | None:
    """Position (from 0) of the first of ``values`` that is ``>= threshold``, with a tolerance of
    1e-9 for floating-point noise: the one rule of "the first round a success curve reaches a level",
    for published curves (:func:`first_round_reaching`) and simulated ones alike.

    Parameters
    ----------
    values : array-like of float
    threshold : float, optional

    Returns
    -------
    int or None
        ``None`` if no value reaches ``threshold``.
    """
    hit = np.flatnonzero(np.asarray(values, dtype=float) >= threshold - 1e-9)
    return int(hit[0]) if hit.size else None
