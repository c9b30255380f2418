"""SCENE metrics from judged episodes, and the paper's published results beside them.

:func:`score` turns judged episodes into a tidy metrics frame (one row per model x metric x
group): repair rate after sanctioning with Wilson 95% intervals (per model and per sanction
type), Spearman's rho between prior demonstrations and the breach rate after the first breach
with bootstrap 95% intervals, compliance under each pole of the opposing norm pairs, and the
fidelity statistics. :func:`load_published` reads the paper's numbers (a data file), and
:meth:`SceneScore.plot` places a user's model beside the six published ones.

References
----------
Jacniacki & Bilski, "SCENE: Recognizing Social Norms and Sanctioning in Group Chats",
arXiv:2605.07823 (2026), Sect. 5.2-5.4 (metrics), Sect. 6 (results).
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import numpy as np
import pandas as pd

from normlab._display import html_card, plotting
from normlab._rng import as_generator
from normlab._validate import check_int
from normlab.user_files import loads_json, read_user_text

from .episode import Episode, as_episode, episode_measures, load_episodes
from .taxonomy import TAXONOMY

COLUMNS = ("model", "metric", "group", "value", "ci_low", "ci_high", "k", "n", "ci_method", "source")
METRICS = ("repair_rate", "spearman_rho", "compliance", "sp_breach_rate", "sanction_delivered",
           "sanction_shape_match", "episodes")


def wilson(k, n, z: float = 1.96) -> tuple[float, float]:
    """Wilson score interval for ``k`` successes in ``n`` trials.

    Parameters
    ----------
    k : float
        Successes, ``0 <= k <= n`` (a non-integer ``k`` is allowed: a mean of per-episode rates
        times ``n``).
    n : int
        Trials, ``>= 0``; ``n = 0`` (an empty group) gives ``(nan, nan)``.
    z : float
        Normal quantile (1.96 for 95%).

    Returns
    -------
    (float, float)
        ``(low, high)``, within [0, 1].

    References
    ----------
    E. B. Wilson, J. Am. Stat. Assoc. 22, 209 (1927). Used for the repair rates of SCENE,
    arXiv:2605.07823 (2026), Sect. 5.2 and 6.
    """
    for name, v in (("k", k), ("n", n), ("z", z)):
        if isinstance(v, (bool, np.bool_)) or not isinstance(v, numbers.Real) or not math.isfinite(v):
            raise TypeError(f"{name} must be a finite real number; got {v!r}")
    if n < 0 or int(n) != n:
        raise ValueError(f"n must be a non-negative integer; got {n}")
    if not 0 <= k <= n:
        raise ValueError(f"k must satisfy 0 <= k <= n; got k={k}, n={n}")
    if z <= 0:
        raise ValueError(f"z must be > 0; got {z}")
    if n == 0:
        return (math.nan, math.nan)
    p = k / n
    d = 1 + z * z / n
    c = (p + z * z / (2 * n)) / d
    h = z / d * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return (max(0.0, c - h), min(1.0, c + h))


def _spearman(x: np.ndarray, y: np.ndarray) -> float:
    from scipy.stats import rankdata

    if len(x) < 3 or np.ptp(x) == 0 or np.ptp(y) == 0:
        return math.nan
    rx, ry = rankdata(x), rankdata(y)
    return float(np.corrcoef(rx, ry)[0, 1])


def spearman_bootstrap(x, y, *, n_boot: int = 2000, level: float = 0.95, rng=None) -> tuple[float, float, float]:
    """Spearman's rho of ``x`` and ``y`` with a percentile bootstrap interval over pairs.

    Resamples the pairs (episodes) with replacement; resamples in which either variable is
    constant (rho undefined) are dropped. Fewer than 3 pairs, or a constant variable, give NaN.

    Returns
    -------
    (rho, low, high)

    References
    ----------
    SCENE, arXiv:2605.07823 (2026), Sect. 5.3 ("Spearman's rho per subject model, with bootstrap
    95% confidence intervals over episodes").
    """
    x = np.asarray(x, dtype=float)
    y = np.asarray(y, dtype=float)
    if x.shape != y.shape or x.ndim != 1:
        raise ValueError(f"x and y must be 1-d of equal length; got shapes {x.shape} and {y.shape}")
    n_boot = check_int(n_boot, "n_boot", 1)
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1); got {level}")
    rho = _spearman(x, y)
    if math.isnan(rho):
        return (math.nan, math.nan, math.nan)
    g = as_generator(rng)
    idx = g.integers(0, len(x), size=(n_boot, len(x)))
    boots = np.array([_spearman(x[i], y[i]) for i in idx])
    boots = boots[np.isfinite(boots)]
    if len(boots) == 0:
        return (rho, math.nan, math.nan)
    a = (1 - level) / 2
    return (rho, float(np.quantile(boots, a)), float(np.quantile(boots, 1 - a)))


def _row(model, metric, group, value, lo=math.nan, hi=math.nan, k=math.nan, n=math.nan, method="", source="user"):
    return {"model": model, "metric": metric, "group": group, "value": value, "ci_low": lo, "ci_high": hi,
            "k": k, "n": n, "ci_method": method, "source": source}


def _rate_row(model, metric, group, k, n, method="wilson"):
    lo, hi = wilson(k, n) if n else (math.nan, math.nan)
    return _row(model, metric, group, k / n if n else math.nan, lo, hi, k, n, method if n else "")


@dataclass(frozen=True)
class SceneScore:
    """SCENE metrics of one or more subject models.

    Attributes
    ----------
    frame : pandas.DataFrame
        Tidy metrics, one row per ``model x metric x group`` (columns :data:`COLUMNS`):
        ``repair_rate`` (group ``"all"`` and each sanction ID; Wilson), ``spearman_rho``
        (``"all"``; percentile bootstrap), ``compliance`` (each norm ID; Wilson),
        ``sp_breach_rate``, ``sanction_delivered``, ``sanction_shape_match`` (``"all"``;
        Wilson), ``episodes`` (counts: ``"scored"``, ``"unjudged"``, ``"excluded_invalid"``,
        ``"breached"``, ``"sanctioned"``).
    episodes : pandas.DataFrame
        Per-episode measures (:func:`~normlab.llm_runs.scene.episode.episode_measures`).
    repair_window : int
    n_boot : int

    References
    ----------
    Jacniacki & Bilski, arXiv:2605.07823 (2026), Sect. 5.2-5.4, Sect. 6.
    """

    frame: pd.DataFrame
    episodes: pd.DataFrame
    repair_window: int = 3
    n_boot: int = 2000

    @property
    def models(self) -> tuple:
        return tuple(dict.fromkeys(self.frame["model"]))

    def to_frame(self) -> pd.DataFrame:
        """The tidy metrics frame (a copy)."""
        return self.frame.copy()

    def get(self, metric: str, group: str = "all", model: str | None = None) -> float:
        """One value, e.g. ``res.get("repair_rate")`` (``model`` needed when several were scored)."""
        f = self.frame[(self.frame["metric"] == metric) & (self.frame["group"] == group)]
        if model is not None:
            f = f[f["model"] == model]
        if len(f) != 1:
            raise ValueError(f"{len(f)} rows for metric={metric!r}, group={group!r}, model={model!r}; "
                             f"models: {self.models}")
        return float(f["value"].iloc[0])

    def __repr__(self) -> str:
        parts = []
        for m in self.models:
            def v(metric, group="all"):
                try:
                    return self.get(metric, group, m)
                except ValueError:
                    return math.nan
            parts.append(f"{m}: repair={v('repair_rate'):.3f} rho={v('spearman_rho'):.3f} "
                         f"(n={int(v('episodes', 'scored'))})")
        return "SceneScore(" + "; ".join(parts) + ")"

    def summary(self) -> dict:
        """Plain Python, per model: episode counts, ``repair_rate`` and ``spearman_rho`` as
        ``[value, low, high]`` (None where undefined), ``rho_n`` (episodes behind rho), the
        fidelity rates, and compliance per norm pole."""
        def num(x):
            return None if x is None or (isinstance(x, float) and math.isnan(x)) else float(x)

        out = {}
        for m in self.models:
            f = self.frame[self.frame["model"] == m]

            def row(metric, group="all"):
                r = f[(f["metric"] == metric) & (f["group"] == group)]
                return r.iloc[0] if len(r) else None

            ep = {g: int(row("episodes", g)["value"]) for g in ("total", "scored", "unjudged", "breached", "sanctioned")}
            rr, rho = row("repair_rate"), row("spearman_rho")
            comp = f[f["metric"] == "compliance"]
            out[m] = {**ep,
                      "repair_rate": [num(rr["value"]), num(rr["ci_low"]), num(rr["ci_high"])],
                      "spearman_rho": [num(rho["value"]), num(rho["ci_low"]), num(rho["ci_high"])],
                      "rho_n": int(rho["n"]) if num(rho["n"]) is not None else 0,
                      **{k: num(row(k)["value"]) for k in ("sp_breach_rate", "sanction_delivered",
                                                           "sanction_shape_match")},
                      "compliance": {g: num(v) for g, v in zip(comp["group"], comp["value"])}}
        return {"models": out, "repair_window": self.repair_window, "n_boot": self.n_boot}

    def _repr_html_(self) -> str:
        rows = []
        for m, v in self.summary()["models"].items():
            pre = f"{m}: " if len(self.models) > 1 else ""
            for key, label, n in (("repair_rate", "repair rate", v["sanctioned"]),
                                  ("spearman_rho", "Spearman rho", v["rho_n"])):
                x, lo, hi = (math.nan if y is None else y for y in v[key])
                rows.append((f"{pre}{label} (n = {n})", x, (lo, hi)))
            rows.append((f"{pre}episodes scored / total", f"{v['scored']} / {v['total']}"))
        return html_card("SceneScore", rows, subtitle="SCENE metrics (Jacniacki & Bilski 2026)",
                         settings={"repair window": self.repair_window, "bootstrap": self.n_boot},
                         note=".to_frame(): every metric per group; .plot(): beside the paper's six models.")

    @plotting
    def plot(self, *, published: bool = True, axes=None):
        """Repair rate, Spearman rho, per-sanction repair and opposing-pair compliance of the
        scored model(s), beside the six models published in the paper (Sect. 6).

        Parameters
        ----------
        published : bool
            Draw the paper's numbers (grey) next to the scored models (colour). Published values
            that the available paper text does not give (e.g. the rho estimates) are marked
            with their qualitative statement instead.
        axes : array of 4 matplotlib Axes, optional

        Returns
        -------
        matplotlib.figure.Figure
            The four panels (a Figure, as every multi-panel ``.plot()``).
        """
        return _plot(self, load_published() if published else None, axes)

    @classmethod
    def _contract_example(cls) -> "SceneScore":
        """Three scored episodes of one model (two sanctioned, one repaired), the metric rows written
        as :func:`score` writes them from literal per-episode measures (``tests/umbrella/test_contracts.py``)."""
        nan = math.nan
        s0, s1 = TAXONOMY.ids("sanction")[:2]
        n0 = TAXONOMY.ids("norm")[0]
        m = pd.DataFrame({"n_sanctions": [1, 1, 0], "n_breaches": [1, 1, 0], "repair_rate": [1.0, 0.0, nan],
                          "sanction": [s0, s1, None], "norm": [n0, n0, n0], "compliant": [False, False, True],
                          "demos_before_breach": [2.0, 0.0, nan], "breach_rate_after": [0.0, 0.5, nan],
                          "sp_breach": [False, False, False], "sanction_delivered": [True, True, False],
                          "shape_match": [True, False, False]})
        rows = [_row("toy", "episodes", g, v) for g, v in (("total", 3), ("unjudged", 0), ("excluded_invalid", 0),
                                                            ("scored", 3), ("breached", 2), ("sanctioned", 2))]
        rows.append(_rate_row("toy", "repair_rate", "all", 1.0, 2))
        rows += [_rate_row("toy", "repair_rate", s, float(s == s0), int(s in (s0, s1))) for s in TAXONOMY.ids("sanction")]
        rows.append(_row("toy", "spearman_rho", "all", -1.0, -1.0, -1.0, nan, 2, "bootstrap-percentile"))
        rows += [_rate_row("toy", "compliance", n, 1 if n == n0 else 0, 3 if n == n0 else 0) for n in TAXONOMY.ids("norm")]
        rows += [_rate_row("toy", "sp_breach_rate", "all", 0, 3), _rate_row("toy", "sanction_delivered", "all", 2, 2),
                 _rate_row("toy", "sanction_shape_match", "all", 1, 2)]
        return cls(frame=pd.DataFrame(rows, columns=list(COLUMNS)), episodes=m, n_boot=100)


def score(episodes, *, repair_window: int = 3, n_boot: int = 2000, exclude_invalid: bool = False,
          rng=None) -> SceneScore:
    """SCENE metrics from judged episodes, per subject model.

    Parameters
    ----------
    episodes : iterable of Episode or dict, or str / pathlib.Path
        Judged episodes (dicts as written by :meth:`Episode.to_dict`), or a JSON-lines file /
        directory of JSON files. Episodes without a judge output are counted (``episodes`` /
        ``unjudged``) and not scored.
    repair_window : int
        A sanction counts as repaired when one of the subject's next ``repair_window`` actions
        is a FACE_SAVE_REPAIR (the paper: "within one to three turns").
    n_boot : int
        Bootstrap resamples for the interval of Spearman's rho.
    exclude_invalid : bool
        Drop episodes whose fidelity audit says ``INVALID`` (Appendix B.7). Default ``False``:
        Sect. 5.4 uses the audit to qualify, not to exclude.
    rng : None, int, SeedSequence or Generator
        For the bootstrap; each model gets a child stream, so adding a model does not change
        another model's interval.

    Returns
    -------
    SceneScore

    Notes
    -----
    - Repair rate per model: the mean of the episode repair rates over sanctioned episodes
      (``|S_e| > 0``), with a Wilson interval for ``k = sum of episode rates`` out of ``n`` =
      sanctioned episodes (exact when every episode has one sanction). Per sanction type: the
      same over episodes whose tuple has that sanction.
    - Spearman's rho: over episodes with at least one subject breach and at least one later
      subject action, between the number of persona demonstrations before the first breach
      and the breach rate after it (Sect. 5.3).
    - Compliance (per norm pole): the share of episodes with no subject breach.
    - Fidelity: persona-breach rate over all scored episodes; sanction delivered and
      sanction-shape match over breached episodes.

    References
    ----------
    Jacniacki & Bilski, arXiv:2605.07823 (2026), Sect. 5.2-5.4.
    """
    repair_window = check_int(repair_window, "repair_window", 1)
    n_boot = check_int(n_boot, "n_boot", 1)
    if isinstance(episodes, (str, Path)):
        episodes = load_episodes(episodes)
    if isinstance(episodes, (Episode, dict)):
        raise TypeError("episodes must be an iterable of episodes (wrap a single episode in a list)")
    try:
        eps = [as_episode(e) for e in episodes]
    except TypeError as exc:
        raise TypeError(f"episodes must be an iterable of Episode or dict: {exc}") from None
    if not eps:
        raise ValueError("no episodes to score")
    models = list(dict.fromkeys(e.model for e in eps))
    children = np.random.SeedSequence(as_generator(rng).integers(0, 2**63 - 1)).spawn(len(models))
    rows, per_ep = [], []
    for model, child in zip(models, children):
        mine = [e for e in eps if e.model == model]
        judged = [e for e in mine if e.judge is not None]
        invalid = [e for e in judged if e.audit == "INVALID"]
        use = [e for e in judged if not (exclude_invalid and e.audit == "INVALID")]
        m = pd.DataFrame([episode_measures(e, repair_window=repair_window) for e in use])
        per_ep.append(m)
        rows += [_row(model, "episodes", "total", len(mine)),
                 _row(model, "episodes", "unjudged", len(mine) - len(judged)),
                 _row(model, "episodes", "excluded_invalid", len(invalid) if exclude_invalid else 0),
                 _row(model, "episodes", "scored", len(use))]
        if m.empty:
            m = pd.DataFrame(columns=["n_sanctions", "n_breaches", "repair_rate", "sanction", "norm", "compliant",
                                      "demos_before_breach", "breach_rate_after", "sp_breach",
                                      "sanction_delivered", "shape_match"])
        sanctioned = m[m["n_sanctions"] > 0]
        breached = m[m["n_breaches"] > 0]
        rows += [_row(model, "episodes", "breached", len(breached)),
                 _row(model, "episodes", "sanctioned", len(sanctioned))]
        rows.append(_rate_row(model, "repair_rate", "all", float(sanctioned["repair_rate"].sum()), len(sanctioned)))
        for s in TAXONOMY.ids("sanction"):
            g = sanctioned[sanctioned["sanction"] == s]
            rows.append(_rate_row(model, "repair_rate", s, float(g["repair_rate"].sum()), len(g)))
        ok = m.dropna(subset=["breach_rate_after"]) if len(m) else m
        rho, lo, hi = spearman_bootstrap(ok["demos_before_breach"].to_numpy(float),
                                         ok["breach_rate_after"].to_numpy(float), n_boot=n_boot, rng=child)
        rows.append(_row(model, "spearman_rho", "all", rho, lo, hi, math.nan, len(ok),
                         "bootstrap-percentile" if math.isfinite(lo) else ""))
        for norm in TAXONOMY.ids("norm"):
            g = m[m["norm"] == norm]
            rows.append(_rate_row(model, "compliance", norm, int(g["compliant"].astype(bool).sum()), len(g)))
        rows.append(_rate_row(model, "sp_breach_rate", "all", int(m["sp_breach"].astype(bool).sum()), len(m)))
        rows.append(_rate_row(model, "sanction_delivered", "all",
                              int(breached["sanction_delivered"].astype(bool).sum()), len(breached)))
        rows.append(_rate_row(model, "sanction_shape_match", "all",
                              int(breached["shape_match"].astype(bool).sum()), len(breached)))
    frame = pd.DataFrame(rows, columns=list(COLUMNS))
    episodes_frame = pd.concat([p for p in per_ep if not p.empty], ignore_index=True) if any(
        not p.empty for p in per_ep) else pd.DataFrame()
    return SceneScore(frame=frame, episodes=episodes_frame, repair_window=repair_window, n_boot=n_boot)


# ----------------------------------------------------------------------------- published results
@dataclass(frozen=True)
class PublishedResults:
    """The paper's results (Sect. 6) as transcribed in ``data/published_results.json``.

    Attributes
    ----------
    raw : dict
        The data file.

    References
    ----------
    Jacniacki & Bilski, arXiv:2605.07823 (2026), Sect. 6.
    """

    raw: dict

    @property
    def models(self) -> tuple:
        return tuple(r["model"] for r in self.raw["repair_rate"])

    @property
    def notes(self) -> tuple:
        return tuple(self.raw["notes"])

    def to_frame(self) -> pd.DataFrame:
        """The published numbers in the layout of :meth:`SceneScore.to_frame` (``source`` is
        ``"published"``; pooled numbers have model ``"all models"``; missing values NaN)."""
        def f(v):
            return math.nan if v is None else float(v)
        rows = []
        for r in self.raw["repair_rate"]:
            rows.append(_row(r["model"], "repair_rate", "all", f(r["value"]), f(r["ci_low"]), f(r["ci_high"]),
                             n=f(r["n"]), method="wilson" if r["ci_low"] is not None else "", source="published"))
        for r in self.raw["repair_rate_by_sanction"]:
            rows.append(_row("all models", "repair_rate", r["sanction"], f(r["value"]), source="published"))
        for r in self.raw["spearman_rho"]:
            rows.append(_row(r["model"], "spearman_rho", "all", f(r["value"]), f(r["ci_low"]), f(r["ci_high"]),
                             method="bootstrap-percentile", source="published"))
        for r in self.raw["compliance_by_norm"]:
            rows.append(_row("all models", "compliance", r["norm"], f(r["value"]), source="published"))
        for r in self.raw["fidelity"]:
            rows.append(_row("all models", r["metric"], "all", f(r["value"]), source="published"))
        return pd.DataFrame(rows, columns=list(COLUMNS))

    def __repr__(self) -> str:
        return f"PublishedResults({len(self.models)} models: {', '.join(self.models)})"

    def _repr_html_(self) -> str:
        return f"<p><code>{self!r}</code></p>" + self.to_frame().to_html(index=False)

    @classmethod
    def _contract_example(cls) -> "PublishedResults":
        """The paper's numbers as shipped (``data/published_results.json``; ``tests/umbrella/test_contracts.py``)."""
        return load_published()


def load_published(path: str | Path | None = None) -> PublishedResults:
    """The paper's results table (built-in ``data/published_results.json`` by default)."""
    if path is None:
        text = resources.files("normlab.llm_runs.scene.data").joinpath("published_results.json").read_text("utf-8")
    else:
        path = Path(path)
        if not (path.exists() or path.is_symlink()):
            raise ValueError(f"{path} does not exist")
        text = read_user_text(path, f"published results file {path}")  # a regular file, capped
    raw = loads_json(text, f"published results file {path or 'published_results.json'}")
    need = ("repair_rate", "repair_rate_by_sanction", "spearman_rho", "compliance_by_norm", "fidelity", "notes")
    missing = [k for k in need if k not in raw]
    if missing:
        raise ValueError(f"published results file lacks the sections {missing}")
    return PublishedResults(raw)


# ----------------------------------------------------------------------------- figure
def _plot(res: SceneScore, pub: PublishedResults | None, axes):
    import matplotlib.pyplot as plt

    if axes is None:
        fig, axes = plt.subplots(2, 2, figsize=(12, 8.5), constrained_layout=True)
        axes = np.asarray(axes).ravel()
    else:
        axes = np.asarray(axes).ravel()
        if axes.size != 4:
            raise ValueError(f"axes must hold 4 Axes; got {axes.size}")
        fig = axes[0].figure
    f = res.frame
    mine = list(res.models)
    colors = dict(zip(mine, plt.get_cmap("tab10").colors))
    grey = "0.55"

    def err(v, lo, hi):
        if not (math.isfinite(lo) and math.isfinite(hi)):
            return None
        return [[max(0.0, v - lo)], [max(0.0, hi - v)]]

    # (a) repair rate per model
    ax = axes[0]
    labels, y = [], 0
    if pub is not None:
        for r in pub.raw["repair_rate"]:
            lo = math.nan if r["ci_low"] is None else r["ci_low"]
            hi = math.nan if r["ci_high"] is None else r["ci_high"]
            ax.errorbar(r["value"], y, xerr=err(r["value"], lo, hi), fmt="o", color=grey, capsize=3)
            labels.append(r["model"] + ("" if math.isfinite(lo) else " (CI n/a)"))
            y += 1
    for m in mine:
        row = f[(f.model == m) & (f.metric == "repair_rate") & (f.group == "all")].iloc[0]
        if math.isfinite(row.value):
            ax.errorbar(row.value, y, xerr=err(row.value, row.ci_low, row.ci_high), fmt="D", color=colors[m], capsize=3)
        else:
            ax.text(0.02, y, "no sanctioned episode", va="center", color=colors[m], fontsize=8)
        labels.append(f"{m} (n={int(row.n)})")
        y += 1
    ax.set_yticks(range(len(labels)), labels)
    ax.invert_yaxis()
    ax.set_xlim(0, 1)
    ax.set_xlabel("repair rate after sanctioning\n(Wilson 95% CI)")
    ax.set_title("(a) Repair after sanctioning (Sect. 5.2)")

    # (b) Spearman rho per model
    ax = axes[1]
    labels, y = [], 0
    if pub is not None:
        for r in pub.raw["spearman_rho"]:
            note = "published: rho < 0, CI excludes 0" if r["ci_excludes_zero"] else "published: CI crosses 0"
            if r["value"] is None:
                ax.text(-0.97, y, note + " (value n/a)", va="center", color=grey, fontsize=7)
            else:
                ax.errorbar(r["value"], y, xerr=err(r["value"], r["ci_low"] or math.nan, r["ci_high"] or math.nan),
                            fmt="o", color=grey, capsize=3)
            labels.append(r["model"])
            y += 1
    for m in mine:
        row = f[(f.model == m) & (f.metric == "spearman_rho")].iloc[0]
        if math.isfinite(row.value):
            ax.errorbar(row.value, y, xerr=err(row.value, row.ci_low, row.ci_high), fmt="D", color=colors[m], capsize=3)
        else:
            ax.text(-0.97, y, "undefined (too few breached episodes)", va="center", color=colors[m], fontsize=7)
        labels.append(f"{m} (n={int(row.n)})")
        y += 1
    ax.axvline(0, color="k", lw=0.8)
    ax.set_yticks(range(len(labels)), labels)
    ax.invert_yaxis()
    ax.set_xlim(-1, 1)
    ax.set_xlabel("Spearman rho (bootstrap 95% CI)")
    ax.set_title("(b) Adapting to the norm (Sect. 5.3)")

    # (c) repair per sanction type
    ax = axes[2]
    sanctions = list(TAXONOMY.ids("sanction"))
    width = 0.8 / (len(mine) + (1 if pub is not None else 0))
    off = 0
    if pub is not None:
        vals = {r["sanction"]: r["value"] for r in pub.raw["repair_rate_by_sanction"]}
        xs = [i for i, s in enumerate(sanctions) if s in vals]
        ax.bar([x + off * width for x in xs], [vals[sanctions[x]] for x in xs], width, color=grey,
               label="published (all models; 2 of 6 given)")
        off += 1
    for m in mine:
        g = f[(f.model == m) & (f.metric == "repair_rate")].set_index("group")
        v = [g.loc[s, "value"] for s in sanctions]
        lo = [g.loc[s, "ci_low"] for s in sanctions]
        hi = [g.loc[s, "ci_high"] for s in sanctions]
        xs = np.arange(len(sanctions)) + off * width
        yerr = np.array([[max(0, a - b) if math.isfinite(b) else 0 for a, b in zip(v, lo)],
                         [max(0, b - a) if math.isfinite(b) else 0 for a, b in zip(v, hi)]])
        ax.bar(xs, np.nan_to_num(v), width, color=colors[m], yerr=yerr, capsize=2, label=m)
        off += 1
    ax.set_xticks(np.arange(len(sanctions)) + width * (off - 1) / 2, [s.replace("_", "\n") for s in sanctions], fontsize=8)
    ax.set_ylabel("repair rate")
    ax.set_title("(c) Repair by sanction modality")
    ax.set_ylim(0, 1.25)
    ax.legend(fontsize=7, loc="upper left", ncol=2, framealpha=0.9)

    # (d) compliance under opposing pairs
    ax = axes[3]
    pairs = TAXONOMY.pairs
    pubc = {r["norm"]: r["value"] for r in pub.raw["compliance_by_norm"]} if pub is not None else {}
    for k, (a, b) in enumerate(pairs):
        if a in pubc and b in pubc:
            ax.plot([pubc[a], pubc[b]], [k - 0.15, k - 0.15], color=grey, lw=1)
            ax.plot(pubc[a], k - 0.15, "o", color=grey, mfc="white")
            ax.plot(pubc[b], k - 0.15, "o", color=grey)
        for j, m in enumerate(mine):
            g = f[(f.model == m) & (f.metric == "compliance")].set_index("group")
            va, vb = g.loc[a, "value"], g.loc[b, "value"]
            yy = k + 0.15 * (j + 1) / len(mine)
            if math.isfinite(va) and math.isfinite(vb):
                ax.plot([va, vb], [yy, yy], color=colors[m], lw=1)
            if math.isfinite(va):
                ax.plot(va, yy, "D", color=colors[m], mfc="white")
            if math.isfinite(vb):
                ax.plot(vb, yy, "D", color=colors[m])
    ax.set_yticks(range(len(pairs)), [f"{a}\nvs {b}" for a, b in pairs], fontsize=7)
    ax.invert_yaxis()
    ax.set_xlim(-0.02, 1.05)
    ax.set_xlabel("share of episodes without a subject breach\n(open marker: first pole; filled: second)", fontsize=8)
    ax.set_title("(d) Opposing-pair compliance")
    if pub is not None:
        fig.suptitle("SCENE: scored model(s) in colour; published models (Jacniacki & Bilski 2026, Sect. 6) in grey",
                     fontsize=10)
    return fig
