"""Building the tidy tables of the AI-norms archives: game runs cross-checked and converted to the
:mod:`normlab.schema` (decisions; runs with the published convergence and critical-mass readings;
issues), and probe answers. See :mod:`normlab.llm_runs.published.ainorms` for the format."""

from __future__ import annotations

import re
import warnings
from collections import Counter, deque
from typing import Iterable

import numpy as np
import pandas as pd

from normlab.theory.criteria import FLIP_SUM, end_of_run_windows
from normlab.schema import DECISION_COLUMNS, RUN_COLUMNS, memory_state_string, runs_frame, validate_names

from .ainorms_archive import _Member

#: Consecutive successes that end a published convergence run (3N for N = 24).
CONVERGENCE_STREAK = 72
#: Published critical-mass criterion: share of the committed name among uncommitted productions,
#: summed over the last 3 population rounds (about 95 % on average): the one ``FLIP_SUM``.
CRITICAL_MASS_THRESHOLD = FLIP_SUM
#: Name pool of the published strategy probes (``bias.ipynb``: ``options = ['Q', 'M']``).
STRATEGY_PROBE_NAMES = ("Q", "M")

PROBE_COLUMNS = ("model", "probe", "names", "memory_state", "memory_len", "i", "name", "valid", "source_file")
ISSUE_COLUMNS = ("source_file", "source_run", "severity", "check", "message")
RUN_EXTRA_COLUMNS = (
    "source_run", "source_archive", "model_key", "network", "temperature", "payoff_success",
    "payoff_failure", "prepared_memory", "initial_index", "planned_interactions", "converged_index",
    "committed_to", "stop_streak", "converged", "committed_share_last3", "flipped", "flip_interaction",
)

_RULES_NAMES_RE = re.compile(r"values:\s*\[(.*?)\]")
_RULES_PAYOFF_RE = re.compile(r"payoff\s*([+-]?\d+)\s*points")


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
                             n_agents: int) -> np.ndarray:
    """The ``end_of_run`` sum at every end point ``e = 3N .. T`` of a published run
    (:func:`normlab.theory.criteria.end_of_run_windows`, the one home of the reading), from the
    run's ``(p1, p2)`` players and answers: empty if the run is shorter than ``3N``."""
    unc = ~np.isin(players, list(committed)) if committed else np.ones(players.shape, dtype=bool)
    return end_of_run_windows(((answers == name) & unc).sum(axis=1), unc.sum(axis=1), n_agents)

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
            "n_interactions": T, "consensus": consensus, "consensus_rule": "final_streak", "source_file": mem.name,
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
