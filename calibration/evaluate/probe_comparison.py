"""Check a probe-only prediction: exact probes vs sampled probes vs populations.

Each decision of an LLM agent depends only on its prompt, and the prompt only on the memory state
and the name order shown, so a population is the Markov chain of its true per-state decision
distribution. What can differ between the three ways of measuring that distribution is the
*measurement*:

(1) exact next-token probes with the answer prefill (:func:`normlab.llm_runs.strategy_table`,
    ``mode="exact"``; :class:`~normlab.calibration.prediction.from_probes.ProbeFit`);
(2) sampled probes in the paper's protocol: free generation, parsing, re-asks, ``k`` samples
    per state (``mode="sample"``; every attempt is journaled and read here);
(3) populations (:func:`normlab.llm_runs.run_game`) -- in ``sample`` mode the real test; in
    ``exact`` mode they play the *same chain* as probe (1) and only check the plumbing (the
    tables say so wherever they show them).

:func:`probe_check` puts them side by side. State by state, every sampled attempt (from (2) and
from the populations' own requests) is compared with what the exact probe says about that very
prompt: the probability that an attempt names a pool name at all (the covered mass ``C``) and
the distribution of the names it gives. At the population level each group of runs (same mode,
N, H, re-ask policy, stop rule) is compared with the chain the probe predicts *for that
protocol*: re-asking until a name appears plays the renormalised table; a cap of ``R`` re-asks
leaves a decision invalid with probability ``(1 - C)^(R + 1)`` and an invalid side makes the
interaction a failed no-op (:func:`normlab.theory.invalid_answers.invalid_answer_game`). The
interval given for each observed quantity is the interval over table draws of what an
experiment with the *observed number of runs* would report, so "covered" is a fair test.

References
----------
A. Flint Ashery, L. M. Aiello, A. Baronchelli, Sci. Adv. 11, eadu9368 (2025): Methods (prompting,
answer parsing, re-asks), Table S4, Table S6, Figs. 1-2.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import math
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from normlab._display import plotting, error_bars
from normlab._rng import spawn
from normlab._validate import check_int
from normlab.llm_runs.runner.mode import EXACT, SAMPLE, mode_of
from normlab.llm_runs import enumerate_states, load_template, parse_answer, parse_answer_authors
from normlab.llm_runs import journal
from normlab.llm_runs.journal import JOURNAL_FILE, read_journal, read_settings
from normlab.theory import clopper_pearson
from normlab.schema import GameLog, parse_memory_state
from normlab.theory import invalid_answer_game
from normlab.theory.strategies import n_states

from ..fit.inputs import state_labels
from ..prediction.from_probes import ProbeFit, probe_fit
from ..prediction.readings import first_round_reaching

__all__ = ["ProbeCheck", "probe_check", "read_attempts", "read_population"]

PLUMBING = "exact mode: the same chain as the exact probe (plumbing check only)"
#: Suffix of the rows predicting a re-ask-capped group as if its invalid answers were re-asked away.
IGNORED = " [if invalid answers are ignored]"


# ----------------------------------------------------------------------------- reading directories
def _settings(directory) -> dict:
    st = read_settings(Path(directory)) if Path(directory).is_dir() else None
    if st is None:
        raise ValueError(f"{directory} holds no normlab run or probe (settings.json missing)")
    return st["settings"]


def _prompt_index(s: dict) -> dict:
    """Prompt hash -> (memory state, names shown) for every state up to H and every order."""
    tpl = load_template(s["template"])
    if tpl.digest != s.get("template_digest", tpl.digest):
        raise ValueError(f"template {s['template']!r} changed since the directory was written (digest differs)")
    names = tuple(s["names"])
    out = {}
    for st in enumerate_states(names, int(s["memory"])):
        mem = parse_memory_state(st)
        for o in itertools.permutations(names):
            out[tpl.render(mem, o, payoffs=tuple(s["payoffs"])).hash] = (st, ",".join(o), tpl)
    return out


def read_attempts(directory, *, source: str | None = None) -> pd.DataFrame:
    """Every sampled request of a run or probe directory, parsed as the run parsed it.

    Returns
    -------
    pandas.DataFrame
        One row per request: ``source``, ``directory``, ``memory_state``, ``order`` (names as
        shown), ``name`` (the pool name read, or None), ``reason`` (why not), ``text``,
        ``prefill``, ``parse``, ``top`` (first-token top logprobs, JSON, when returned).
    """
    d = Path(directory)
    s = _settings(d)
    idx = _prompt_index(s)
    names = tuple(s["names"])
    rows = []
    for c in journal.calls(read_journal(d / JOURNAL_FILE)):
        if c.purpose != "sample" or c.prompt_hash not in idx:
            continue
        st, shown, tpl = idx[c.prompt_hash]
        text = c.text
        pre = tpl.prefill if s["prefill"] else None
        if s.get("parse") == "authors":
            full = text
            if pre and text is not None and not text.lstrip().startswith(pre.strip()):
                full = pre + text
            p = parse_answer_authors(full, shown.split(","))
        else:
            p = parse_answer(text, names, answer_key=tpl.answer_key, prefill=pre, case_sensitive=s["case_sensitive"])
        rows.append({"memory_state": st, "order": shown, "name": p.name, "reason": p.reason, "text": text,
                     "top": json.dumps(c.top) if c.top else None})
    f = pd.DataFrame(rows, columns=["memory_state", "order", "name", "reason", "text", "top"])
    f.insert(0, "directory", str(d))
    f.insert(0, "source", source or _label(s))
    f["prefill"] = bool(s["prefill"])
    f["parse"] = s.get("parse", "normlab")
    return f


def _reask_label(v) -> str:
    return "re-ask until a name" if str(v) == "unbounded" else f"{v} re-asks"


def _label(s: dict) -> str:
    if s.get("probe"):
        return (f"sampled probe ({'prefill' if s['prefill'] else 'no prefill'}, {s.get('parse', 'normlab')} parser, "
                f"{_reask_label(s['max_reasks'])})")
    if mode_of(s["mode"]) is EXACT:
        return f"population N={s['n_agents']}, H={s['memory']}, exact mode"
    return f"population N={s['n_agents']}, H={s['memory']}, sample, {_reask_label(s['max_reasks'])}"


@dataclass(frozen=True)
class _Population:
    settings: dict
    runs: pd.DataFrame
    curves: np.ndarray  # (runs, rounds) success per round, NaN after a stop (1 after a streak stop)
    directories: tuple


def read_population(directories) -> "_Population":
    """Finished runs of one or more run directories with the same settings (seeds may differ)."""
    if isinstance(directories, (str, Path)):
        directories = [directories]
    base, runs, curves = None, [], []
    for d in directories:
        s = _settings(d)
        key = {k: v for k, v in s.items() if k not in ("seed", "runs")}
        if base is None:
            base = key
        elif key != base:
            diff = sorted(k for k in set(key) | set(base) if key.get(k) != base.get(k))
            raise ValueError(f"{d} has other settings than {directories[0]} ({', '.join(diff)}); group runs by settings")
        if not (Path(d) / "runs.parquet").exists():
            raise ValueError(f"{d} has no runs.parquet yet (the run is not finished; rerun it to the end)")
        log = GameLog.read_parquet(d)
        r = log.runs.copy()
        dec = log.decisions
        N = int(s["n_agents"])
        for _, row in r.iterrows():
            g = dec[dec["run"] == row["run"]].drop_duplicates("t").sort_values("t")
            succ = g["success"].to_numpy(bool)
            ok = np.flatnonzero(succ)
            stopped = row["stop_reason"] in ("streak", "consensus")
            win = str(g["name"].to_numpy()[ok[-1]]) if (stopped and ok.size) else "none"
            rows_d = dec[(dec["run"] == row["run"]) & ~dec["committed"]]
            runs.append({"directory": str(d), "run": int(row["run"]), "n_interactions": int(row["n_interactions"]),
                         "stop_reason": row["stop_reason"], "stopped": bool(stopped), "winner": win,
                         "decisions": int(len(rows_d)), "valid": int(rows_d["valid"].sum()),
                         "successes": int(succ.sum()), "llm_calls": int(row["llm_calls"]),
                         "cache_hits": int(row["cache_hits"]), "finished": bool(row["finished"])})
            n_r = -(-len(succ) // N)
            c = np.array([succ[k * N:(k + 1) * N].mean() for k in range(n_r)])
            curves.append((c, row["stop_reason"]))
    R = max(len(c) for c, _ in curves)
    T = int(base["max_interactions"])
    R = max(R, -(-T // int(base["n_agents"])))
    mat = np.full((len(curves), R), np.nan)
    for k, (c, why) in enumerate(curves):
        mat[k, :len(c)] = c
        if why == "streak":
            mat[k, len(c):] = 1.0
    rf = pd.DataFrame(runs)
    if not rf["finished"].all():
        raise ValueError(f"runs in {list(directories)} are not finished; rerun them to the end")
    return _Population(settings=base, runs=rf, curves=mat, directories=tuple(str(d) for d in directories))


# ----------------------------------------------------------------------------- result
@dataclass(frozen=True)
class ProbeCheck:
    """Exact probe vs sampled probes vs populations.

    Attributes
    ----------
    fit : ProbeFit
        The exact probe (1) with its uncertainty.
    attempts : pandas.DataFrame
        Every sampled request read (:func:`read_attempts`), with ``p_valid`` (the probe's
        covered mass for that prompt) and ``p_first`` (its probability of the first name among
        the names).
    states : pandas.DataFrame
        Per source and memory state: ``attempts``, ``valid``, ``valid_rate`` (with a
        Clopper-Pearson ``valid_low``/``valid_high``), ``valid_pred`` (mean covered mass of the
        prompts asked), ``first`` (valid answers naming the first name), ``p_first``,
        ``p_first_low``/``p_first_high``, ``p_first_pred``.
    divergences : pandas.DataFrame
        One row per source of divergence and measure: ``aspect``, ``source``, ``measure``,
        ``observed``, ``low``, ``high``, ``predicted``, ``n``, ``note``.
    population : pandas.DataFrame
        Per group of population runs and quantity: ``group``, ``mode``, ``n_agents``,
        ``memory``, ``reask``, ``runs``, ``quantity``, ``key``, ``observed``, ``predicted``
        (mean over all simulated runs), ``low``, ``high`` (interval over table draws of what
        an experiment with this many runs reports), ``covered``, ``note``. Groups with a re-ask
        cap appear twice: predicted by their own chain (invalid decisions are failed no-ops),
        and, labelled ``[if invalid answers are ignored]``, by the chain of the renormalised
        table -- the size of that gap is what invalid answers do.
    curves : dict
        Group -> (observed mean success per round, predicted mean, low, high).
    settings : dict

    References
    ----------
    Flint Ashery, Aiello, Baronchelli, Sci. Adv. 11, eadu9368 (2025): Methods, Table S4, Table S6.
    """

    fit: object
    attempts: pd.DataFrame
    states: pd.DataFrame
    divergences: pd.DataFrame
    population: pd.DataFrame
    curves: dict = field(default_factory=dict)
    settings: dict = field(default_factory=dict)

    def to_frame(self) -> pd.DataFrame:
        """Population comparison and divergences in one long frame: ``level`` (``population`` /
        ``state``), ``group`` (or source), ``quantity`` (or measure), ``key``, ``observed``,
        ``predicted``, ``low``, ``high``, ``covered``, ``note``."""
        p = self.population.assign(level="population")[
            ["level", "group", "quantity", "key", "observed", "predicted", "low", "high", "covered", "note"]]
        d = self.divergences.rename(columns={"source": "group", "measure": "quantity", "aspect": "key"})
        d = d.assign(level="state", covered=np.nan)[
            ["level", "group", "quantity", "key", "observed", "predicted", "low", "high", "covered", "note"]]
        return pd.concat([p, d], ignore_index=True)

    def invalid_reasons(self) -> pd.DataFrame:
        """Why sampled attempts named no pool name: ``source``, ``kind`` (a number such as the
        payoff; a name run on into other characters; no answer field; other text), ``attempts``,
        ``share`` (of the source's attempts), ``example``."""
        a = self.attempts[self.attempts["name"].isna()].copy()
        if a.empty:
            return pd.DataFrame(columns=["source", "kind", "attempts", "share", "example"])
        a["kind"] = [_reason_kind(r, t, self.fit.names) for r, t in zip(a["reason"], a["text"])]
        tot = self.attempts.groupby("source").size()
        out = a.groupby(["source", "kind"]).agg(attempts=("text", "size"), example=("text", "first")).reset_index()
        out["share"] = out["attempts"] / out["source"].map(tot)
        return out.sort_values(["source", "attempts"], ascending=[True, False])[
            ["source", "kind", "attempts", "share", "example"]].reset_index(drop=True)

    def __repr__(self) -> str:
        p = self.population
        own = p[~p["group"].str.endswith(IGNORED)]
        cov = own["covered"].dropna()
        n_st = self.states["memory_state"].nunique() if len(self.states) else 0
        return (f"ProbeCheck({len(self.attempts)} sampled attempts in {n_st} states; {own['group'].nunique()} "
                f"population groups, {int(cov.sum())} of {len(cov)} observed quantities inside their predicted "
                "interval)")

    def _repr_html_(self) -> str:
        f = self.to_frame()
        return (f"<p><b>{self!r}</b></p><p>{PLUMBING}.</p>"
                + f.to_html(index=False, float_format=lambda v: f"{v:.3g}", na_rep=""))

    @plotting
    def plot(self, axes=None):
        """Four panels: per-state name probability and valid-attempt rate (sampled vs exact),
        success curves (observed vs predicted band) and the population quantities against their
        intervals."""
        import matplotlib.pyplot as plt

        if axes is None:
            fig, axes = plt.subplots(2, 2, figsize=(13, 9.5), gridspec_kw={"width_ratios": [1, 1.25]})
        axes = np.asarray(axes).reshape(-1)
        st = self.states
        nm = self.fit.names[0]
        for k, (src, g) in enumerate(st.groupby("source", sort=False)):
            g = g[g["valid"] >= 10]
            axes[0].errorbar(g["p_first_pred"], g["p_first"], yerr=error_bars(g["p_first"], g["p_first_low"], g["p_first_high"]),
                             fmt="o", ms=3, lw=0.6, alpha=0.75, color=f"C{k}", label=_short(src))
        axes[0].plot([0, 1], [0, 1], color="0.5", lw=0.8)
        axes[0].set(xlabel=f"exact probe: p({nm} | state, valid)", ylabel=f"sampled: share of {nm} among valid answers",
                    title="the name chosen: (1) vs (2), (3) (states with >= 10 valid)", xlim=(-0.02, 1.02),
                    ylim=(-0.02, 1.02))
        axes[0].legend(fontsize=7, frameon=False)
        for k, (src, g) in enumerate(st.groupby("source", sort=False)):
            g = g[g["attempts"] >= 20]
            axes[1].errorbar(g["valid_pred"], g["valid_rate"], yerr=error_bars(g["valid_rate"], g["valid_low"], g["valid_high"]),
                             fmt="o", ms=3, lw=0.6, alpha=0.75, color=f"C{k}", label=_short(src))
        axes[1].plot([0, 1], [0, 1], color="0.5", lw=0.8)
        axes[1].set(xlabel="exact probe: covered mass C (pool name at the answer position)",
                    ylabel="sampled: share of attempts naming a pool name",
                    title="invalid answers (states with >= 20 attempts)",
                    xlim=(-0.02, 1.02), ylim=(-0.02, 1.02))
        longest = 10
        for obs, *_ in self.curves.values():
            ok = np.flatnonzero(~np.isnan(obs) & (obs < 0.999))
            longest = max(longest, int(ok.max(initial=0)) + 4)
        for k, (grp, (obs, mean, lo, hi)) in enumerate(self.curves.items()):
            n = int(min(len(obs), longest))
            x = np.arange(1, n + 1)
            axes[2].fill_between(x, lo[:n], hi[:n], color=f"C{k}", alpha=0.18)
            axes[2].plot(x, mean[:n], color=f"C{k}", lw=1)
            axes[2].plot(x, obs[:n], "o", ms=3, color=f"C{k}", label=_short(grp))
        axes[2].axhline(0.95, color="0.6", lw=0.8)
        axes[2].set(xlabel="population round", ylabel="success rate (mean over runs)",
                    title="success: observed (dots) vs probe-only prediction (band)")
        axes[2].legend(fontsize=7, frameon=False)
        p = self.population
        p = p[~p["quantity"].isin(["p_winner"]) | (p["key"] == nm)].reset_index(drop=True)
        y = np.arange(len(p))[::-1]
        width = (p["high"] - p["low"]).to_numpy(float)
        pos = np.where(width > 0, (p["observed"] - p["low"]) / np.where(width > 0, width, 1.0),
                       np.where(p["observed"] == p["low"], 0.5, np.sign(p["observed"] - p["low"]) * 1.5 + 0.5))
        axes[3].barh(y, 1.0, left=0.0, height=0.5, color="C0", alpha=0.2)
        axes[3].plot(np.clip(pos, -1.5, 2.5), y, "kx")
        axes[3].axvline(0, color="0.6", lw=0.6)
        axes[3].axvline(1, color="0.6", lw=0.6)
        lab = [f"{_short(g)}: {q}{' ' + k if k else ''} {o:.3g} vs [{lo:.3g}, {hi:.3g}]"
               for g, q, k, o, lo, hi in zip(p["group"], p["quantity"], p["key"], p["observed"], p["low"], p["high"])]
        axes[3].set_yticks(y, lab, fontsize=6.5)
        axes[3].set(xlim=(-1.6, 2.6), xlabel="observed within the predicted interval (0 = low end, 1 = high end)",
                    title="populations: observed vs probe-only interval")
        plt.tight_layout()
        return axes

    @classmethod
    def _contract_example(cls) -> "ProbeCheck":
        """:meth:`ProbeFit._contract_example` against one sampled probe and one population group,
        literal rows (``tests/umbrella/test_contracts.py``)."""
        src = "sampled probe (attempts)"
        attempts = pd.DataFrame({"source": [src] * 3, "memory_state": ["", "A,A", "A,A"], "order": ["A,B"] * 3,
                                 "name": ["A", "A", None], "reason": [None, None, "no 'value' field"],
                                 "text": ["A", "A", "hello"], "p_valid": [0.9, 0.9, 0.9], "p_first": [0.5, 0.8, 0.8]})
        states = pd.DataFrame({"source": [src] * 2, "memory_state": ["", "A,A"], "attempts": [30, 40], "valid": [27, 35],
                               "valid_rate": [0.9, 0.875], "valid_low": [0.73, 0.73], "valid_high": [0.98, 0.96],
                               "valid_pred": [0.9, 0.9], "first": [14, 28], "p_first": [0.52, 0.8],
                               "p_first_low": [0.32, 0.63], "p_first_high": [0.71, 0.92], "p_first_pred": [0.5, 0.8]})
        divergences = pd.DataFrame([("name chosen", src, "p_first", 0.8, 0.63, 0.92, 0.8, 35, "")],
                                   columns=["aspect", "source", "measure", "observed", "low", "high", "predicted", "n",
                                            "note"])
        population = pd.DataFrame([("population exact mode", "exact", 4, 1, None, 10, "P(consensus)", "A", 0.6, 0.58,
                                    0.3, 0.9, True, "")],
                                  columns=["group", "mode", "n_agents", "memory", "reask", "runs", "quantity", "key",
                                           "observed", "predicted", "low", "high", "covered", "note"])
        r = np.arange(1, 6)
        curves = {"population exact mode": (np.minimum(1.0, 0.5 + 0.12 * r), np.minimum(1.0, 0.5 + 0.11 * r),
                                            np.minimum(1.0, 0.4 + 0.11 * r), np.minimum(1.0, 0.6 + 0.11 * r))}
        return cls(fit=ProbeFit._contract_example(), attempts=attempts, states=states, divergences=divergences,
                   population=population, curves=curves)


def _short(label: str) -> str:
    return (label.replace("population ", "").replace("sampled probe", "probe").replace("sample, ", "")
            .replace("re-ask until a name", "re-ask∞").replace(IGNORED, " (invalid ignored)")
            .replace(" (attempts)", "").replace("exact mode", "exact"))


def _reason_kind(reason, text, names) -> str:
    r = str(reason or "")
    if r.startswith("value "):
        v = r.split("'")[1] if "'" in r else ""
        if v and v.replace(".", "").replace("-", "").isdigit():
            return "a number (payoff, round, score)"
        if v and any(v.lower().startswith(n.lower()) for n in names):
            return "a name run on into other characters"
        return "other text in the answer field"
    if r.startswith("hedged"):
        return "several names"
    if "no 'value' field" in r or "no pool name between" in r:
        return "no answer field / no quoted name"
    return r or "other"


# ----------------------------------------------------------------------------- state level
def _cp(k, n):
    return clopper_pearson(np.asarray(k, float), np.asarray(n, float))


def _with_predictions(att: pd.DataFrame, fit) -> pd.DataFrame:
    labels = {lab: k for k, lab in enumerate(state_labels(fit.names, fit.memory))}
    oi = {o: k for k, o in enumerate(fit.orders)}
    att = att[att["memory_state"].isin(labels)].copy()
    s = att["memory_state"].map(labels).to_numpy(int)
    o = att["order"].map(oi).to_numpy(int)
    po = fit.per_order()
    att["p_valid"] = fit.covered[s, o]
    att["p_first"] = po[s, o, 0]
    return att


def _state_table(att: pd.DataFrame, names) -> pd.DataFrame:
    g = att.assign(valid=att["name"].notna(), first=att["name"] == names[0],
                   pf=np.where(att["name"].notna(), att["p_first"], 0.0))
    out = g.groupby(["source", "memory_state"], sort=False).agg(
        attempts=("valid", "size"), valid=("valid", "sum"), valid_pred=("p_valid", "mean"), first=("first", "sum"),
        pf_sum=("pf", "sum")).reset_index()
    out["valid_rate"] = out["valid"] / out["attempts"]
    out["valid_low"], out["valid_high"] = _cp(out["valid"], out["attempts"])
    with np.errstate(invalid="ignore", divide="ignore"):
        out["p_first"] = out["first"] / out["valid"]
        out["p_first_pred"] = out["pf_sum"] / out["valid"]
    out["p_first_low"], out["p_first_high"] = _cp(out["first"], out["valid"])
    out["memory_len"] = [0 if not s else s.count(";") + 1 for s in out["memory_state"]]
    return out.drop(columns=["pf_sum"])


def _divergences(att: pd.DataFrame, fit, jitter_obs) -> pd.DataFrame:
    rows = []
    nm = fit.names[0]
    for src, a in att.groupby("source", sort=False):
        n = len(a)
        v = int(a["name"].notna().sum())
        lo, hi = _cp([v], [n])
        pv = float(a["p_valid"].mean())
        sd = math.sqrt(float((a["p_valid"] * (1 - a["p_valid"])).sum())) / n
        rows.append({"aspect": "invalid answers", "source": src, "measure": "share of attempts naming a pool name",
                     "observed": v / n, "low": float(lo[0]), "high": float(hi[0]), "predicted": pv, "n": n,
                     "note": f"probe: covered mass C of the prompts asked (binomial sd {sd:.3f}); "
                             f"{1 - v / n:.0%} of attempts invalid"})
        va = a[a["name"].notna()]
        if len(va):
            k = int((va["name"] == nm).sum())
            lo, hi = _cp([k], [len(va)])
            pf = float(va["p_first"].mean())
            sd = math.sqrt(float((va["p_first"] * (1 - va["p_first"])).sum())) / len(va)
            rows.append({"aspect": "name chosen", "source": src, "measure": f"share of {nm} among valid attempts",
                         "observed": k / len(va), "low": float(lo[0]), "high": float(hi[0]), "predicted": pf,
                         "n": len(va), "note": f"probe: p({nm}) of the prompts asked (binomial sd {sd:.3f})"})
            for o, vo in va.groupby("order", sort=False):
                k = int((vo["name"] == nm).sum())
                lo, hi = _cp([k], [len(vo)])
                rows.append({"aspect": "name order", "source": src, "measure": f"share of {nm} among valid, order {o}",
                             "observed": k / len(vo), "low": float(lo[0]), "high": float(hi[0]),
                             "predicted": float(vo["p_first"].mean()), "n": len(vo),
                             "note": "the probe's per-order probability of the prompts asked"})
    calls = (fit.meta.get("requests_per_prompt") or {})
    rows.append({"aspect": "multi-token names", "source": "exact probe", "measure": "requests per (state, order) prompt",
                 "observed": calls.get("mean", np.nan), "low": np.nan, "high": np.nan, "predicted": 1.0,
                 "n": calls.get("prompts", np.nan),
                 "note": ("every name is one token: the probe reads it from one next-token distribution"
                          if calls.get("mean", 1.0) == 1.0 else
                          "names of several tokens: the probe follows every prefix (more requests)")})
    if jitter_obs is not None:
        rows.append({"aspect": "endpoint jitter", "source": "sampled requests vs exact probe",
                     "measure": "sd of the first-token logprob", "observed": jitter_obs["jitter_sd"], "low": np.nan,
                     "high": np.nan, "predicted": fit.jitter_sd, "n": jitter_obs["tokens_compared"],
                     "note": f"{jitter_obs['prompts']} requests compared; largest difference "
                             f"{jitter_obs['max_abs_diff']:.3g}"})
    return pd.DataFrame(rows)


def _jitter_from_attempts(att: pd.DataFrame, exact_dir, top_k: int) -> dict | None:
    """Top logprobs returned with sampled requests vs the exact probe's for the same prompt."""
    if exact_dir is None or not (Path(exact_dir) / JOURNAL_FILE).exists():
        return None
    recs = read_journal(Path(exact_dir) / JOURNAL_FILE)
    tops = journal.first_token_tops(recs)
    key = {(ans.key.rpartition("|")[0], ans.decision.names_shown): ans.decision.prompt_hash
           for ans in journal.probe_answers(recs)}
    a = att[att["prefill"] & att["top"].notna()]
    diffs, n = [], 0
    for st, o, t in zip(a["memory_state"], a["order"], a["top"]):
        ph = key.get((st, o))
        if ph not in tops:
            continue
        old = {str(x): float(lp) for x, lp in tops[ph]}
        new = {str(x): float(lp) for x, lp in json.loads(t)}
        n += 1
        for tok in sorted(old, key=lambda x: -old[x])[:top_k]:
            if tok in new:
                diffs.append(new[tok] - old[tok])
    if not diffs:
        return None
    d = np.asarray(diffs)
    return {"prompts": n, "tokens_compared": int(d.size), "jitter_sd": float(np.sqrt(np.mean(d**2) / 2)),
            "max_abs_diff": float(np.abs(d).max())}


# ----------------------------------------------------------------------------- population level
def _protocol(fit, s: dict, n_draws: int, rng):
    """Table draws, invalid probabilities and expected requests per decision of a run's protocol."""
    reask = s["max_reasks"]
    if mode_of(s["mode"]) is EXACT:
        tab, inv = fit.sample_protocol(n_draws, rng=rng)
        return tab, inv, None, PLUMBING
    R = None if str(reask) == "unbounded" else int(reask)
    tab, inv = fit.sample_protocol(n_draws, max_reasks=R, rng=rng)
    c = np.clip(fit.covered, 1e-12, 1.0)  # (S, O)
    if R is None:
        cost = (1.0 / c).mean(axis=1)
        note = "re-asks until a pool name: the renormalised table (as exact mode)"
    else:
        cost = sum((1.0 - c) ** k for k in range(R + 1)).mean(axis=1)
        note = f"at most {R} re-asks: invalid decisions are failed no-op interactions"
    return tab, inv, np.broadcast_to(cost, inv.shape), note


def _trim(fit, H):
    """The fit restricted to memory states of length <= H."""
    if H == fit.memory:
        return fit
    if H > fit.memory:
        raise ValueError(f"the exact probe covers H <= {fit.memory}; the runs have H = {H}")
    S = n_states(len(fit.names), H)
    return dataclasses.replace(fit, memory=H, mass=fit.mass[:S], name_like=fit.name_like[:S], approx=fit.approx[:S])


def _population_rows(label, pop: _Population, fit, n_draws, level, rng, *, ignore_invalid: bool = False):
    """Observed vs predicted quantities of one group of runs (``ignore_invalid``: predicted by the
    chain of a population that re-asks until a pool name appears, whatever the group's cap)."""
    s = pop.settings
    N, H, T = int(s["n_agents"]), int(s["memory"]), int(s["max_interactions"])
    if s.get("committed") or s.get("initial") != "empty":
        raise ValueError(f"{label}: only runs from empty memories without committed agents are compared")
    if mode_of(s["mode"]) is SAMPLE and not s["prefill"]:
        raise ValueError(f"{label}: sample runs without the prefill are not what the exact probe measures")
    k = len(pop.runs)
    f = _trim(fit, H)
    seeds = spawn(rng, 2)
    tab, inv, cost, note = _protocol(f, {**s, "max_reasks": "unbounded"} if ignore_invalid else s, n_draws, seeds[0])
    if ignore_invalid:
        note = "predicted as if every decision were valid (re-asked until a pool name): what ignoring invalid answers gives"
    stop = s["stop"] if s["stop"] in ("streak", "consensus") else "max"
    sim = invalid_answer_game(tab, inv, n_agents=N, memory=H, n_runs=k, max_interactions=T, stop=stop, cost=cost,
                              names=f.names, rng=seeds[1])
    sf = sim.to_frame()
    a = (1 - level) / 2
    curves = sim.success.copy()
    if stop == "streak":
        for r in np.flatnonzero(sim.stopped):
            last = int(math.ceil(sim.stop_time[r] / N))
            curves[r, last:] = 1.0
    R = pop.curves.shape[1]
    with warnings.catch_warnings():  # rounds after every run stopped: NaN
        warnings.simplefilter("ignore", RuntimeWarning)
        per_draw = np.stack([np.nanmean(curves[sim.group == d, :R], axis=0) for d in range(n_draws)])
        obs_curve = np.nanmean(pop.curves, axis=0)
        mean_curve = np.nanmean(per_draw, axis=0)
        lo_c, hi_c = np.nanquantile(per_draw, [a, 1 - a], axis=0)
    runs = pop.runs
    base = {"group": label + (IGNORED if ignore_invalid else ""), "mode": s["mode"],
            "n_agents": N, "memory": H, "reask": str(s["max_reasks"]) if mode_of(s["mode"]) is SAMPLE else "-",
            "stop": s["stop"], "runs": k}
    rows = []

    def add(q, key, obs, draws, pooled=None, extra=""):
        d = np.asarray(draws, float)
        finite = d[~np.isnan(d)]
        lo, hi = (np.quantile(finite, [a, 1 - a]) if finite.size else (np.nan, np.nan))
        pred = float(np.nanmean(d)) if pooled is None else pooled
        cov = bool(lo - 1e-9 <= obs <= hi + 1e-9) if not (np.isnan(obs) or np.isnan(lo)) else np.nan
        rows.append({**base, "quantity": q, "key": key, "observed": obs, "predicted": pred, "low": float(lo),
                     "high": float(hi), "covered": cov, "note": "; ".join(x for x in (note, extra) if x)})

    def pooled(col):
        return sf.groupby("group").apply(lambda x: x[col].mul(x["decisions"]).sum() / x["decisions"].sum(),
                                         include_groups=False)

    g = sf.groupby("group")
    for nm in list(f.names) + ["none"]:
        add("p_winner", nm, float((runs["winner"] == nm).mean()), g["winner"].apply(lambda w: np.mean(w == nm)),
            pooled=float(np.mean(sf["winner"] == nm)))
    add("rounds_to_stop", "", float((runs["n_interactions"] / N).mean()), g["stop_rounds"].mean(),
        extra=f"{s['stop']} stop, cap {T // N} rounds; runs at the cap count at the cap")
    if stop == "streak":
        r95 = np.array([first_round_reaching(c) for c in per_draw])
        add("rounds_to_95", "", first_round_reaching(obs_curve), r95,
            extra=f"NaN draws (never within {R} rounds): {np.mean(np.isnan(r95)):.0%}")
    add("success_rate", "", float(runs["successes"].sum() / (runs["n_interactions"].sum())), pooled("success_rate"),
        extra="successes per interaction until the stop")
    if mode_of(s["mode"]) is SAMPLE:
        add("valid_share", "", float(runs["valid"].sum() / runs["decisions"].sum()), pooled("valid_share"),
            extra="decisions with a pool name")
        if not ignore_invalid:
            add("requests_per_decision", "", float(runs["llm_calls"].sum() / runs["decisions"].sum()),
                pooled("cost_per_decision"), extra="expected requests per decision from the covered mass")
    return rows, (obs_curve, mean_curve, lo_c, hi_c)


def probe_check(exact, *, sampled=(), populations=(), n_draws: int = 200, level: float = 0.95,
                rng=None) -> ProbeCheck:
    """Compare the exact probe (1) with sampled probes (2) and populations (3).

    Parameters
    ----------
    exact : ProbeFit or path
        The exact probe (a directory of ``normlab llm-probe strategy --mode exact`` or
        ``normlab predict --probe --out``), covering every H of the populations.
    sampled : sequence of paths, optional
        Sample-mode strategy probes (``--mode sample``).
    populations : sequence of paths or of sequences of paths, optional
        LLM run directories; directories with the same settings but different seeds may be
        given together as one group (a list).
    n_draws : int, optional
        Table draws; each simulates as many runs as the group holds.
    level : float, optional
    rng : optional

    Returns
    -------
    ProbeCheck

    References
    ----------
    Flint Ashery, Aiello, Baronchelli, Sci. Adv. 11, eadu9368 (2025): Methods, Table S4, Table S6.
    """
    D = check_int(n_draws, "n_draws", 1)
    if not 0 < float(level) < 1:
        raise ValueError(f"level must be in (0, 1); got {level}")
    exact_dir = None
    if not isinstance(exact, ProbeFit):
        exact_dir = Path(exact)
        exact = probe_fit(exact_dir)
    else:
        exact_dir = exact.meta.get("probe_directory")
    fit = exact
    if exact_dir is not None:
        fit = dataclasses.replace(fit, meta={**fit.meta, "requests_per_prompt": _requests_per_prompt(exact_dir)})
    groups = []
    for p in populations:
        groups.append([p] if isinstance(p, (str, Path)) else list(p))
    frames = [read_attempts(d) for d in sampled]
    pops = []
    for g in groups:
        pop = read_population(g)
        pops.append((_label(pop.settings), pop))
        for d in g:
            if mode_of(pop.settings["mode"]) is SAMPLE:
                frames.append(read_attempts(d, source=_label(pop.settings) + " (attempts)"))
    cols = ["source", "directory", "memory_state", "order", "name", "reason", "text", "top", "prefill", "parse"]
    att = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=cols)
    for d in list(sampled) + [d for g in groups for d in g]:
        if tuple(_settings(d)["names"]) != fit.names:
            raise ValueError(f"{d} uses names {_settings(d)['names']}, the exact probe {list(fit.names)}")
    att = _with_predictions(att, fit) if len(att) else att.assign(p_valid=[], p_first=[])
    states = _state_table(att, fit.names) if len(att) else pd.DataFrame()
    top_k = int(fit.meta.get("top_k") or 10)
    div = _divergences(att, fit, _jitter_from_attempts(att, exact_dir, top_k)) if len(att) else pd.DataFrame()
    rows, curves = [], {}
    seeds = spawn(rng, max(1, len(pops)))
    for (label, pop), sd in zip(pops, seeds):
        r, c = _population_rows(label, pop, fit, D, float(level), sd)
        rows += r
        curves[label] = c
        if mode_of(pop.settings["mode"]) is SAMPLE and str(pop.settings["max_reasks"]) != "unbounded":
            rows += _population_rows(label, pop, fit, D, float(level), sd, ignore_invalid=True)[0]
    cols_p = ["group", "mode", "n_agents", "memory", "reask", "stop", "runs", "quantity", "key", "observed",
              "predicted", "low", "high", "covered", "note"]
    population = pd.DataFrame(rows, columns=cols_p)
    settings = {"n_draws": D, "level": float(level), "exact": str(exact_dir) if exact_dir else None,
                "sampled": [str(d) for d in sampled], "populations": [[str(d) for d in g] for g in groups],
                "note": PLUMBING}
    return ProbeCheck(fit=fit, attempts=att, states=states, divergences=div, population=population, curves=curves,
                      settings=settings)


def _requests_per_prompt(directory) -> dict:
    f = Path(directory) / JOURNAL_FILE
    if not f.exists():
        return {}
    recs = read_journal(f)
    per = {}
    for d in journal.exact_distributions(recs):
        if d.prompt_hash:
            per[d.prompt_hash] = per.get(d.prompt_hash, 0) + 1
    if not per:
        return {}
    v = np.array(list(per.values()), float)
    return {"prompts": int(v.size), "mean": float(v.mean()), "max": int(v.max())}
