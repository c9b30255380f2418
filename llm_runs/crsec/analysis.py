"""Norm emergence over time: belief vs behaviour, conflicts, chats and thoughts, the norm funnel.

Works on normlab's own runs (:class:`~normlab.llm_runs.crsec.runner.PopulationRun`) and on
published CRSEC runs (:func:`normlab.llm_runs.load_crsec_run`):

- :func:`adoption_curves` -- proportion of agents holding the standard as a qualified norm
  (belief) and complying in plans and actions (behaviour), per topic and time (Fig. 2b);
- :func:`beliefs_from_norms` -- belief curves from any norm frame with qualification and
  deactivation times, or the snapshot shares of a published run (:func:`snapshot_beliefs`);
- :func:`behaviour_from_nodes` -- behavioural compliance over time from the agents' own action
  events in Smallville memory (published runs); :func:`beliefs_from_snapshots` -- belief curves
  from storage folders saved at several times;
- :func:`event_counts` -- conflicts and norm-related chats and thoughts per time bin (Fig. 2a);
  :func:`events_from_nodes` turns Smallville memory nodes into such events;
- :func:`norm_funnel` -- per agent, identified -> candidate / qualified / synthesised, and the
  rejection reasons;
- :func:`plot_emergence` -- the two panels of Fig. 2.

References
----------
S. Ren et al., "Emergence of Social Norms in Generative Agent Societies: Principles and
Architecture", IJCAI 2024: Fig. 2, §3.2, Appendix D (belief before compliance), Fig. D1.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd

from normlab._display import legend_outside, new_figure, plotting
from normlab.llm_runs.published.ainorms import first_position_reaching
from normlab.llm_runs.published.crsec import (NODES_FILE, NORMS_FILE, CRSECRun, load_crsec_run,  # noqa: F401
                                              norm_funnel, save_crsec_norms)

from .topics import classify_text, load_topics

MEASURES = ("belief", "plan", "action")
EVENT_KINDS = ("conflict", "chat", "thought")


def adoption_curves(states: pd.DataFrame) -> pd.DataFrame:
    """Proportion of agents with the standard in their beliefs, plans and actions, over time.

    Parameters
    ----------
    states : pandas.DataFrame
        Columns ``t, agent, topic`` and boolean ``belief``, ``plan``, ``action``
        (:attr:`PopulationRun.states`).

    Returns
    -------
    pandas.DataFrame
        Long: ``t, topic, measure, proportion, n_agents``.

    References
    ----------
    Ren et al., IJCAI 2024, Fig. 2b.
    """
    need = {"t", "agent", "topic", *MEASURES}
    if not isinstance(states, pd.DataFrame) or not need <= set(states.columns):
        raise ValueError(f"states must be a DataFrame with columns {sorted(need)}")
    g = states.groupby(["t", "topic"], sort=True)
    wide = g[list(MEASURES)].mean()
    wide["n_agents"] = g["agent"].nunique()
    long = wide.reset_index().melt(id_vars=["t", "topic", "n_agents"], value_vars=list(MEASURES),
                                   var_name="measure", value_name="proportion")
    return long[["t", "topic", "measure", "proportion", "n_agents"]]


def reach_times(adoption: pd.DataFrame, level: float = 0.5) -> dict:
    """``{(topic, measure): t}``: the first time each adoption curve reaches ``level`` (NaN:
    never), by the one rule of "the first point a curve reaches a level"
    (:func:`normlab.llm_runs.published.ainorms.first_position_reaching`).

    References
    ----------
    Ren et al., IJCAI 2024, Fig. 2b and Appendix D (belief before compliance).
    """
    if not (isinstance(level, (int, float)) and 0 < level <= 1):
        raise ValueError(f"level must be in (0, 1]; got {level!r}")
    out = {}
    for (topic, measure), g in adoption.sort_values("t").groupby(["topic", "measure"], sort=True):
        k = first_position_reaching(g["proportion"].to_numpy(float), level)
        out[(topic, measure)] = math.nan if k is None else float(g["t"].iloc[k])
    return out


def beliefs_from_norms(norms: pd.DataFrame, times, *, agents=None, topics=None) -> pd.DataFrame:
    """Belief curves from norm records with ``t_qualified`` / ``t_deactivated`` (minutes).

    An agent believes a topic's standard at time ``t`` when it holds, at ``t``, a qualified norm
    classified (:func:`~normlab.llm_runs.crsec.topics.classify_text`) on that topic with stance +1.

    Parameters
    ----------
    norms : pandas.DataFrame
        Columns ``agent, content, t_qualified, t_deactivated``.
    times : array_like
    agents : sequence of str, optional
        The population (default: the agents in ``norms``).
    topics : dict or path, optional

    Returns
    -------
    pandas.DataFrame
        ``t, topic, measure ("belief"), proportion, n_agents``.
    """
    need = {"agent", "content", "t_qualified", "t_deactivated"}
    if not need <= set(norms.columns):
        raise ValueError(f"norms needs columns {sorted(need)}")
    times = np.asarray(times, float)
    agents = list(agents) if agents is not None else sorted(norms["agent"].unique())
    lab = [classify_text(c, topics) for c in norms["content"]]
    nf = norms.assign(topic=[x[0] for x in lab], stance=[x[1] for x in lab])
    nf = nf[(nf["stance"] == 1) & nf["topic"].notna()]
    rows = []
    for topic in sorted(nf["topic"].unique()):
        sub = nf[nf["topic"] == topic]
        tq = sub["t_qualified"].to_numpy(float)
        td = sub["t_deactivated"].fillna(np.inf).to_numpy(float)
        ag = sub["agent"].to_numpy()
        for t in times:
            held = set(ag[(tq <= t) & (td > t)])
            rows.append((t, topic, "belief", len(held & set(agents)) / len(agents), len(agents)))
    return pd.DataFrame(rows, columns=["t", "topic", "measure", "proportion", "n_agents"])


def snapshot_beliefs(norms: pd.DataFrame, *, agents=None, topics=None) -> pd.DataFrame:
    """Share of agents holding each topic's standard as a qualified norm in a snapshot (a
    published run's databases): ``topic, proportion, n_agents, holders``."""
    agents = list(agents) if agents is not None else sorted(norms["agent"].dropna().unique())
    q = norms[norms["state"] == "qualified"]
    lab = [classify_text(c, topics) for c in q["content"]]
    q = q.assign(topic=[x[0] for x in lab], stance=[x[1] for x in lab])
    q = q[(q["stance"] == 1) & q["topic"].notna()]
    rows = []
    for topic, sub in q.groupby("topic"):
        holders = sorted(set(sub["agent"]) & set(agents))
        rows.append((topic, len(holders) / max(1, len(agents)), len(agents), tuple(holders)))
    return pd.DataFrame(rows, columns=["topic", "proportion", "n_agents", "holders"])


def events_from_nodes(nodes: pd.DataFrame, *, start=None, topics=None) -> pd.DataFrame:
    """Chats, thoughts and detected conflicts of Smallville memory nodes as timed events (minutes
    since ``start``).

    ``start`` defaults to the earliest timed node (for a run written by
    :meth:`~normlab.llm_runs.crsec.PopulationRun.save_crsec`: the start of the run). Chats and
    thoughts are norm-related when their text is about a topic of the table. Conflicts: the
    published CRSEC layout records none; normlab writes each conflict an agent detected as an
    ``event`` node in the observer's memory with the keyword ``"conflict"`` (its extension), read
    back here as kind ``conflict`` -- a published run has no such nodes, so its conflict counts
    are unknown rather than zero.

    Returns
    -------
    pandas.DataFrame
        ``t, kind, agent, topic, stance, text`` (norm-related chats and thoughts, and conflicts).
    """
    need = {"agent", "kind", "created", "text"}
    if not need <= set(nodes.columns):
        raise ValueError(f"nodes needs columns {sorted(need)} (see load_crsec_nodes)")
    timed = nodes[nodes["created"].notna()]
    is_conflict = (timed["kind"] == "event") & timed["keywords"].map(
        lambda k: isinstance(k, (tuple, list, np.ndarray)) and "conflict" in list(k)) if "keywords" in timed else False
    sub = timed[timed["kind"].isin(["chat", "thought"]) | is_conflict]
    cols = ["t", "kind", "agent", "topic", "stance", "text"]
    if not len(sub):
        return pd.DataFrame(columns=cols)
    start = timed["created"].min() if start is None else pd.Timestamp(start)
    lab = [classify_text(str(x), topics) for x in sub["text"]]
    kind = np.where(sub["kind"].isin(["chat", "thought"]), sub["kind"], "conflict")
    out = pd.DataFrame({"t": (sub["created"] - start).dt.total_seconds().to_numpy() / 60.0, "kind": kind,
                        "agent": sub["agent"].to_numpy(), "topic": [x[0] for x in lab],
                        "stance": [x[1] for x in lab], "text": sub["text"].to_numpy()})
    keep = out["topic"].notna() | (out["kind"] == "conflict")
    return out[keep].sort_values("t", kind="stable").reset_index(drop=True)


def behaviour_from_nodes(nodes: pd.DataFrame, times, *, start=None, agents=None, topics=None) -> pd.DataFrame:
    """Behavioural compliance over time from Smallville memory: each agent's own action events.

    An event node is the agent's own action when its ``subject`` (or, failing that, the start of
    its description) names the agent, e.g. ``"Carlos Gomez is smoking outside"``. At time ``t``
    an agent complies with a topic's standard when its latest own action on that topic (by
    :func:`~normlab.llm_runs.crsec.topics.classify_text`) has stance +1.

    Parameters
    ----------
    nodes : pandas.DataFrame
        :func:`normlab.llm_runs.published.crsec.load_crsec_nodes` columns.
    times : array_like
        Minutes since ``start`` (default: the earliest timed node).
    agents : sequence of str, optional
    topics : dict or path, optional

    Returns
    -------
    pandas.DataFrame
        ``t, topic, measure ("action"), proportion, n_agents``.

    References
    ----------
    Ren et al., IJCAI 2024, Fig. 2b ("adhered to a standard of behavior in their plans and actions").
    """
    need = {"agent", "kind", "created", "subject", "description"}
    if not need <= set(nodes.columns):
        raise ValueError(f"nodes needs columns {sorted(need)} (see load_crsec_nodes)")
    times = np.asarray(times, float)
    agents = list(agents) if agents is not None else sorted(nodes["agent"].dropna().unique())
    ev = nodes[(nodes["kind"] == "event") & nodes["created"].notna()]
    t0 = (nodes["created"].min() if start is None else pd.Timestamp(start))
    own = []
    for _, r in ev.iterrows():
        who = r["subject"] if isinstance(r["subject"], str) and r["subject"] else None
        desc = str(r["description"] or "")
        if who != r["agent"] and not (who is None and desc.startswith(str(r["agent"]))):
            continue
        topic, stance = classify_text(desc, topics)
        if topic is not None and stance != 0:
            own.append(((r["created"] - t0).total_seconds() / 60.0, r["agent"], topic, stance))
    own = pd.DataFrame(own, columns=["t", "agent", "topic", "stance"]).sort_values("t", kind="stable")
    table = _topic_names(topics)
    rows = []
    for topic in table:
        sub = own[own["topic"] == topic]
        for t in times:
            last = sub[sub["t"] <= t].groupby("agent")["stance"].last()
            n = int((last.reindex(agents) == 1).sum())
            rows.append((t, topic, "action", n / len(agents), len(agents)))
    return pd.DataFrame(rows, columns=["t", "topic", "measure", "proportion", "n_agents"])


def _topic_names(topics=None) -> list:
    return list(load_topics(topics)["topics"])


def beliefs_from_snapshots(snapshots, *, topics=None) -> pd.DataFrame:
    """Belief curves from several snapshots of one run (published storage folders saved at
    different times): ``{t: CRSECRun or folder}`` -> ``t, topic, measure, proportion, n_agents``."""
    if not isinstance(snapshots, dict) or not snapshots:
        raise ValueError("snapshots must be a non-empty dict {time: CRSECRun or run folder}")
    rows = []
    for t in sorted(snapshots):
        run = snapshots[t]
        run = run if isinstance(run, CRSECRun) else load_crsec_run(run)
        snap = snapshot_beliefs(run.norms, agents=run.agents, topics=topics)
        for name in _topic_names(topics):
            hit = snap[snap["topic"] == name]
            rows.append((float(t), name, "belief", float(hit["proportion"].iloc[0]) if len(hit) else 0.0,
                         len(run.agents)))
    return pd.DataFrame(rows, columns=["t", "topic", "measure", "proportion", "n_agents"])


def event_counts(events: pd.DataFrame, *, bin_minutes: float = 60.0, t_max: float | None = None) -> pd.DataFrame:
    """Number of conflicts and norm-related chats and thoughts per time bin (Fig. 2a).

    Parameters
    ----------
    events : pandas.DataFrame
        Columns ``t`` (minutes) and ``kind``; with a ``topic`` column, chats and thoughts count
        only when they are about a topic of the table (norm-related), as in the paper's figure.
    bin_minutes : float
    t_max : float, optional
        The end of the time covered: a run of ``t_max`` minutes gives ``ceil(t_max / bin_minutes)``
        bins (its last step starts before ``t_max``, so no empty bin follows it; an event at
        ``t_max`` counts in the last bin). Default: the last event, which opens the last bin.

    Returns
    -------
    pandas.DataFrame
        Long: ``t`` (bin start), ``kind``, ``count`` -- every bin and kind, zeros included.
    """
    if not (isinstance(bin_minutes, (int, float)) and bin_minutes > 0):
        raise ValueError(f"bin_minutes must be positive; got {bin_minutes!r}")
    if not {"t", "kind"} <= set(events.columns):
        raise ValueError("events needs columns t and kind")
    if "topic" in events.columns:
        events = events[(events["kind"] == "conflict") | events["topic"].notna()]
    t = events["t"].to_numpy(float)
    if t_max is None:
        n_bins = int(np.floor((t.max() if len(t) else 0.0) / bin_minutes)) + 1
    else:
        n_bins = max(1, int(np.ceil(float(t_max) / bin_minutes - 1e-9)))
    bins = np.minimum(np.floor(np.maximum(t, 0) / bin_minutes).astype(int), n_bins - 1) if len(t) else t.astype(int)
    rows = []
    for kind in EVENT_KINDS:
        c = np.bincount(bins[events["kind"].to_numpy() == kind], minlength=n_bins) if len(t) else np.zeros(n_bins, int)
        rows.append(pd.DataFrame({"t": np.arange(n_bins) * float(bin_minutes), "kind": kind, "count": c[:n_bins]}))
    return pd.concat(rows, ignore_index=True)


@plotting
def plot_emergence(adoption: pd.DataFrame | None, counts: pd.DataFrame | None = None, *, axes=None,
                   measures=("belief", "action")):
    """Fig. 2 of Ren et al.: (a) conflicts, chats, thoughts per bin; (b) belief vs behaviour.

    Parameters
    ----------
    adoption : pandas.DataFrame or None
        :func:`adoption_curves` output (``t`` in minutes; plotted in hours); ``None``: panel (a) only.
    counts : pandas.DataFrame, optional
        :func:`event_counts` output; without it only panel (b) is drawn.
    axes : Axes, or two Axes when both panels are drawn, optional
    measures : sequence of str
        Adoption measures to draw (solid: belief, dashed: plan, dotted: action).

    Returns
    -------
    matplotlib.axes.Axes
        The one panel drawn; when both are drawn, the ``Figure`` holding them.
    """
    if adoption is None and counts is None:
        raise ValueError("give adoption curves, event counts or both")
    n = (adoption is not None) + (counts is not None)
    if axes is None:
        fig, axes = new_figure(1, n, figsize=(5.4 * n, 3.8))
        axes = axes[0]
    else:
        axes = np.atleast_1d(axes)
        if len(axes) != n:
            raise ValueError(f"axes must hold {n} Axes for the panels asked; got {len(axes)}")
        fig = axes[0].figure
    if counts is not None:
        ax = axes[0]
        for kind, sub in counts.groupby("kind", sort=False):
            ax.plot(sub["t"] / 60.0, sub["count"], marker="o", ms=3, label=kind)
        ax.set(xlabel="time (h)", ylabel="count per bin", title="(a) conflicts, chats, thoughts")
        if counts.empty or not counts["count"].sum():  # say so rather than draw an empty panel
            ax.text(0.5, 0.5, "no conflicts, norm-related chats or thoughts in this run", transform=ax.transAxes,
                    ha="center", va="center", fontsize=9, color="0.3")
        else:
            ax.legend(frameon=False)
    if adoption is not None:
        ax = axes[-1]
        styles = {"belief": "-", "plan": "--", "action": ":"}
        colors = {}
        for (topic, measure), sub in adoption[adoption["measure"].isin(measures)].groupby(["topic", "measure"]):
            c = colors.setdefault(topic, f"C{len(colors)}")
            ax.plot(sub["t"] / 60.0, sub["proportion"], styles.get(measure, "-"), color=c, label=f"{topic}: {measure}")
        names = " vs ".join(f"{m} ({'solid' if styles.get(m) == '-' else 'dashed' if styles.get(m) == '--' else 'dotted'})"
                            for m in measures)
        ax.set(xlabel="time (h)", ylabel="proportion of agents", ylim=(-0.03, 1.03), title=f"(b) {names}")
        legend_outside(ax)
    return fig if n == 2 else axes[0]


def write_crsec_run(run, folder, *, start: str = "2023-02-13 08:00:00") -> Path:
    """Write a :class:`PopulationRun` in the CRSEC storage layout, readable by :func:`load_crsec_run`.

    Each persona folder gets its final norm database and a Smallville ``nodes.json`` timed from
    ``start``: the agent's own actions (event nodes ``"<name> is <action>"`` whenever they
    changed, as Smallville stores them), the chats it received and its thoughts, and the conflicts
    it detected (event nodes naming the observed actor, keyword ``"conflict"``: normlab's
    extension; the published layout has no record of them). Not kept: when each norm was
    qualified (the layout holds the final databases only), so belief curves come back as one
    snapshot (:func:`snapshot_beliefs`).
    """
    folder = Path(folder)
    t0 = pd.Timestamp(start)
    acts = getattr(run, "actions", None)
    for name, db in run.databases.items():
        pdir = folder / "personas" / name
        frame = db.to_crsec_frame()
        if len(frame):
            save_crsec_norms(frame, pdir / NORMS_FILE)
        else:
            (pdir / NORMS_FILE).parent.mkdir(parents=True, exist_ok=True)
            (pdir / NORMS_FILE).write_text("{}", encoding="utf-8")
        rows = []
        if acts is not None and len(acts):
            for _, a in acts[acts["agent"] == name].iterrows():
                rows.append((float(a["t"]), 0, "event", name, "is", str(a["text"]), f"{name} is {a['text']}", [], None))
        ev = run.events[(run.events["agent"] == name) & run.events["kind"].isin(["conflict", "chat", "thought"])]
        for _, e in ev.iterrows():
            if e["kind"] == "conflict":
                actor, _, what = str(e["text"]).partition(" is ")
                rows.append((float(e["t"]), 1, "event", actor, "is", what, str(e["text"]),
                             ["conflict"] + ([e["topic"]] if e["topic"] else []), None))
            elif e["kind"] == "chat":
                filling = [line.split(": ", 1) for line in str(e["text"]).splitlines() if ": " in line]
                rows.append((float(e["t"]), 2, "chat", name, "chat with", e["other"] or None,
                             f"conversing with {e['other']}", [e["topic"]] if e["topic"] else [], filling))
            else:
                rows.append((float(e["t"]), 2, "thought", name, "thinks", e["other"] or None, str(e["text"]),
                             [e["topic"]] if e["topic"] else [], None))
        rows.sort(key=lambda r: (r[0], r[1]))
        nodes = {}
        for k, (t, _, kind, subj, pred, obj, desc, kw, filling) in enumerate(rows, start=1):
            created = (t0 + pd.Timedelta(minutes=t)).strftime("%Y-%m-%d %H:%M:%S")
            nodes[f"node_{k}"] = {"node_count": k, "type": kind, "created": created, "subject": subj,
                                  "predicate": pred, "object": obj, "description": desc, "poignancy": 5,
                                  "keywords": kw, "filling": filling}
        path = pdir / NODES_FILE
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(nodes, indent=1), encoding="utf-8")
    return folder
