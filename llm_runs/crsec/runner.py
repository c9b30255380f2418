"""A thin CRSEC population runner: agents in a cafe observe, chat, think, check, synthesise and plan.

Each agent owns a :class:`~normlab.llm_runs.crsec.records.NormDatabase`. At time 0 the norm
entrepreneurs create their personal norms (CreateNorm). Every step of ``dt`` simulated minutes:

1. every agent acts on its current plan (GenerateNormativeActions; agents may re-check the plan
   against norms qualified since it was made);
2. every agent present in the cafe (probability ``p_present``) observes one action of one other
   present agent; if the observation conflicts with its qualified norms (DetectConflict) and it
   decides to talk (DecideToTalk), it chats with the actor, and the actor identifies normative
   information in the chat (IdentifyNormativeInformation); with probability ``p_thought`` the
   observer also forms a thought (GenerateThought) and identifies normative information in it;
3. every identified piece of information enters the receiver's database as a candidate and goes
   through the sanity check at once;
4. agents whose qualified utilities exceed ``threshold`` run the long-term synthesis;
5. an agent re-plans (GenerateNormativePlans) every ``plan_every`` minutes (staggered).

Beliefs (a qualified norm on a topic with the standard's stance), plans and actions are recorded
per agent, topic and step, so the adoption curves of Fig. 2 follow
(:mod:`~normlab.llm_runs.crsec.analysis`). The operations are
:class:`~normlab.llm_runs.crsec.operations.RuleOperations` (``ops="rule"``, no model) or
:class:`~normlab.llm_runs.crsec.llm_operations.LLMOperations` (``ops="llm"``: the embedded model
by default, any endpoint through ``endpoint=``).

References
----------
S. Ren et al., "Emergence of Social Norms in Generative Agent Societies: Principles and
Architecture", IJCAI 2024: §2, §3.1 (ten agents with conflicting preferences, three norm
entrepreneurs), §3.2 and Fig. 2, Appendix A (5 initial norms, threshold 350).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from normlab._display import plotting
from normlab._rng import as_generator, spawn
from normlab.schema import unique_names

from ..backend import EndpointConfig, open_endpoint
from ..sync import run_sync
from .analysis import adoption_curves, event_counts, norm_funnel, plot_emergence, write_crsec_run
from .lifecycle import SYNTHESIS_THRESHOLD, _resolve_steps, aevaluate, asynthesise, maybe_await
from .llm_operations import LLMOperations
from .operations import RuleOperations
from .records import NormDatabase
from .topics import classify_text, load_agents, load_topics

EVENT_COLUMNS = ("t", "kind", "agent", "other", "topic", "stance", "text", "n_identified", "n_qualified")
STATE_COLUMNS = ("t", "agent", "entrepreneur", "topic", "belief", "counter_belief", "plan", "action")


@dataclass(frozen=True)
class PopulationRun:
    """Outcome of :func:`run_population`.

    Attributes
    ----------
    agents : tuple of str
    entrepreneurs : tuple of str
    topics : tuple of str
    norms : pandas.DataFrame
        Every norm record of every agent (:meth:`NormDatabase.to_frame` columns plus ``topic``,
        ``stance``), with creation / qualification / deactivation times in minutes.
    events : pandas.DataFrame
        One row per conflict, chat, thought and synthesis (:data:`EVENT_COLUMNS`).
    states : pandas.DataFrame
        Per step, agent and topic: ``belief`` (holds a qualified norm with the standard's stance),
        ``counter_belief`` (the opposite stance), ``plan`` / ``action`` (complies in its plan /
        current action) (:data:`STATE_COLUMNS`).
    settings : dict
    databases : dict
        Agent name -> final :class:`NormDatabase`.
    """

    agents: tuple
    entrepreneurs: tuple
    topics: tuple
    norms: pd.DataFrame = field(repr=False)
    events: pd.DataFrame = field(repr=False)
    states: pd.DataFrame = field(repr=False)
    settings: dict = field(repr=False)
    databases: dict = field(repr=False, compare=False)

    def adoption(self) -> pd.DataFrame:
        """Long frame ``t, topic, measure (belief | plan | action), proportion`` (Fig. 2b)."""
        return adoption_curves(self.states)

    def to_frame(self) -> pd.DataFrame:
        """The adoption curves (:meth:`adoption`)."""
        return self.adoption()

    def event_counts(self, bin_minutes: float = 60.0) -> pd.DataFrame:
        """Conflicts, chats and thoughts per time bin (Fig. 2a)."""
        return event_counts(self.events, bin_minutes=bin_minutes)

    def funnel(self) -> pd.DataFrame:
        """Per agent: norms per state and rejection reason."""
        return norm_funnel(self.norms)

    @plotting
    def plot(self, *, bin_minutes: float = 60.0, axes=None):
        """The two panels of Fig. 2 (counts of conflicts/chats/thoughts; belief vs behaviour)."""
        return plot_emergence(self.adoption(), self.event_counts(bin_minutes), axes=axes)

    def save_crsec(self, folder) -> Path:
        """Write the run in the CRSEC storage layout (``personas/<name>/norms/...`` and the memory
        ``nodes.json`` with the chats and thoughts), readable by :func:`load_crsec_run`."""
        return write_crsec_run(self, folder)

    def __repr__(self) -> str:
        last = self.states[self.states["t"] == self.states["t"].max()]
        b = last.groupby("topic")["belief"].mean().round(2).to_dict()
        a = last.groupby("topic")["action"].mean().round(2).to_dict()
        kinds = self.events["kind"].value_counts().to_dict()
        return (f"PopulationRun(agents={len(self.agents)}, minutes={self.settings['minutes']:g}, "
                f"final belief={b}, final action={a}, events={kinds})")

    def _repr_html_(self) -> str:
        return f"<p><b>{self!r}</b></p>" + self.funnel().to_html()


def _select_agents(agents):
    if agents is None:
        return load_agents()
    if isinstance(agents, (str, Path)):
        return _checked_agents(load_agents(agents))
    agents = list(agents)
    if agents and all(isinstance(a, str) for a in agents):
        known = {a["name"]: a for a in load_agents()}
        unknown = [a for a in agents if a not in known]
        if unknown:
            raise ValueError(f"unknown agent names {unknown}; built-in agents: {sorted(known)}")
        return [known[a] for a in agents]
    for a in agents:
        if not isinstance(a, dict) or not isinstance(a.get("name"), str) or not isinstance(a.get("description", ""), str):
            raise TypeError("agents must be None, a JSON path, built-in names, or dicts with 'name' and 'description'")
    return _checked_agents(agents)


def _checked_agents(agents) -> list[dict]:
    """Agents with their names NFKC-normalised, none carrying an invisible or bidirectional control
    character, no two alike (:func:`normlab.schema.unique_names`)."""
    for a in agents:
        if not isinstance(a, dict) or not isinstance(a.get("name"), str):
            raise TypeError("each agent must be a dict with a 'name' (str)")
    names = unique_names([a["name"] for a in agents], "agent names")
    return [{**a, "name": n} for a, n in zip(agents, names)]


async def arun_population(agents=None, *, ops="rule", minutes: float = 240.0, dt: float = 10.0,
                          n_norms: int = 5, p_present: float = 0.8, p_thought: float = 0.3,
                          plan_every: float = 120.0, threshold: float = SYNTHESIS_THRESHOLD, steps=None,
                          topics=None, endpoint=None, rng=None, progress: bool = False) -> PopulationRun:
    """Async :func:`run_population`."""
    agents = _select_agents(agents)
    if len(agents) < 2:
        raise ValueError("a population needs at least 2 agents")
    for nm, v in (("minutes", minutes), ("dt", dt), ("plan_every", plan_every), ("threshold", threshold)):
        if not (isinstance(v, (int, float)) and math.isfinite(v) and v > 0):
            raise ValueError(f"{nm} must be a positive number; got {v!r}")
    for nm, p in (("p_present", p_present), ("p_thought", p_thought)):
        if not (isinstance(p, (int, float)) and 0.0 <= p <= 1.0):
            raise ValueError(f"{nm} must be a probability in [0, 1]; got {p!r}")
    if not isinstance(n_norms, int) or n_norms < 1:
        raise ValueError(f"n_norms must be an int >= 1; got {n_norms!r}")
    _resolve_steps(steps, None)
    table = load_topics(topics)
    names = [a["name"] for a in agents]
    seeds = spawn(rng, 2)
    gen = as_generator(seeds[0])
    if ops == "rule":
        ops = RuleOperations(table, names=names, rng=seeds[1])
        return await _simulate(agents, ops, table, gen, minutes, dt, n_norms, p_present, p_thought,
                               plan_every, threshold, steps, progress)
    if ops == "llm":
        cfg = endpoint if endpoint is not None else EndpointConfig.from_env(embedded_threads=1, concurrency=1)
        async with open_endpoint(cfg) as client:
            ops = LLMOperations(client, names=names, rng=seeds[1])
            return await _simulate(agents, ops, table, gen, minutes, dt, n_norms, p_present, p_thought,
                                   plan_every, threshold, steps, progress)
    if isinstance(ops, str) or not hasattr(ops, "identify"):
        raise ValueError(f"ops must be 'rule', 'llm' or a NormOperations instance; got {ops!r}")
    return await _simulate(agents, ops, table, gen, minutes, dt, n_norms, p_present, p_thought, plan_every,
                           threshold, steps, progress)


def run_population(agents=None, *, ops="rule", minutes: float = 240.0, dt: float = 10.0, n_norms: int = 5,
                   p_present: float = 0.8, p_thought: float = 0.3, plan_every: float = 120.0,
                   threshold: float = SYNTHESIS_THRESHOLD, steps=None, topics=None, endpoint=None, rng=None,
                   progress: bool = False) -> PopulationRun:
    """Run a small CRSEC population (Hobbs Cafe) and record norms, events and adoption.

    Parameters
    ----------
    agents : None, path, sequence of names or of dicts
        Default: the ten agents of Appendix A (three norm entrepreneurs).
    ops : {"rule", "llm"} or NormOperations
        ``"rule"``: :class:`RuleOperations` (no model); ``"llm"``: :class:`LLMOperations` on
        ``endpoint`` (default: the embedded SmolLM2 server, one thread).
    minutes, dt : float
        Simulated duration and step, in minutes.
    n_norms : int
        Norms created per entrepreneur (5 in Appendix A).
    p_present, p_thought : float
        Probability that an agent is in the cafe in a step / forms a thought on an observation.
    plan_every : float
        Minutes between an agent's plans.
    threshold : float
        Synthesis threshold (350).
    steps : sequence, optional
        Sanity-check steps (default the paper's four).
    topics : dict or path, optional
        Topic table for labelling behaviour (default: Hobbs Cafe).
    endpoint : EndpointConfig, optional
    rng : None, int, SeedSequence or Generator
    progress : bool
        Print one line per simulated hour.

    Returns
    -------
    PopulationRun

    References
    ----------
    Ren et al., IJCAI 2024, §2-§3 and Appendix A.
    """
    return run_sync(lambda: arun_population(
        agents, ops=ops, minutes=minutes, dt=dt, n_norms=n_norms, p_present=p_present, p_thought=p_thought,
        plan_every=plan_every, threshold=threshold, steps=steps, topics=topics, endpoint=endpoint, rng=rng,
        progress=progress))


async def _simulate(agents, ops, table, gen, minutes, dt, n_norms, p_present, p_thought, plan_every,
                    threshold, steps, progress):
    topic_names = tuple(table["topics"])
    by_name = {a["name"]: a for a in agents}
    dbs = {a["name"]: NormDatabase(a["name"]) for a in agents}
    events: list = []

    def ev(t, kind, agent, other="", text="", n_id=0, n_q=0):
        topic, stance = classify_text(text, table) if text else (None, 0)
        events.append((t, kind, agent, other, topic, stance, text, n_id, n_q))

    async def synth(name, t):
        out = await asynthesise(dbs[name], ops, t=t, threshold=threshold, steps=steps)
        if out.triggered:
            ev(t, "synthesis", name, text="; ".join(dbs[name][i].content for i in out.created),
               n_id=len(out.created) + len(out.rejected), n_q=len(out.created))

    async def receive(name, text, kind, t, other=""):
        infos = await maybe_await(ops.identify(by_name[name], text, kind)) or []
        n_q = 0
        for content, ntype, utility in infos:
            cand = dbs[name].add_candidate(content, utility, ntype, source=kind, source_text=text, t=t)
            out = await aevaluate(dbs[name], cand.id, ops, t=t, steps=steps)
            n_q += out.passed
        ev(t, kind, name, other, text, len(infos), n_q)

    # creation (§2.1)
    for a in agents:
        if a.get("entrepreneur"):
            for content, ntype, utility in (await maybe_await(ops.create_norms(a, n_norms)))[:n_norms]:
                dbs[a["name"]].add_created(content, utility, ntype, t=0.0, source_text=a.get("description", ""))
            await synth(a["name"], 0.0)
    plans = {a["name"]: list(await maybe_await(ops.plan(a, dbs[a["name"]].qualified()))) for a in agents}
    last_plan = {a["name"]: -float(gen.uniform(0.0, plan_every)) for a in agents}
    actions = {n: list(p) for n, p in plans.items()}
    states: list = []

    def record(t):
        for a in agents:
            name = a["name"]
            q = dbs[name].qualified()
            held = {tp: set() for tp in topic_names}
            for n in q:
                tp, s = classify_text(n.content, table)
                if tp in held and s:
                    held[tp].add(s)
            plan_l = [classify_text(x, table) for x in plans[name]]
            act_l = [classify_text(x, table) for x in actions[name]]
            for tp in topic_names:
                states.append((t, name, bool(a.get("entrepreneur")), tp, 1 in held[tp], -1 in held[tp],
                               (tp, 1) in plan_l, (tp, 1) in act_l))

    record(0.0)
    n_steps = int(round(minutes / dt))
    for k in range(n_steps):
        t = (k + 1) * dt
        for a in agents:
            name = a["name"]
            if t - last_plan[name] >= plan_every:
                plans[name] = list(await maybe_await(ops.plan(a, dbs[name].qualified())))
                last_plan[name] = t
            actions[name] = list(await maybe_await(ops.act(a, plans[name], dbs[name].qualified())))
        present = [a["name"] for a in agents if gen.random() < p_present]
        order = list(gen.permutation(len(present))) if present else []
        for i in order:
            observer = present[i]
            others = [p for p in present if p != observer and actions[p]]
            if not others:
                continue
            actor = others[int(gen.integers(len(others)))]
            action = actions[actor][int(gen.integers(len(actions[actor])))]
            observation = f"{actor} is {action}"
            qual = dbs[observer].qualified()
            if await maybe_await(ops.detect_conflict(by_name[observer], observation, qual)):
                ev(t, "conflict", observer, actor, observation)
                if await maybe_await(ops.decide_to_talk(by_name[observer])):
                    chat = await maybe_await(ops.converse(by_name[observer], actor, observation, qual))
                    if chat:
                        await receive(actor, chat, "chat", t, other=observer)
            if gen.random() < p_thought:
                thought = await maybe_await(ops.generate_thought(by_name[observer], observation))
                if thought:
                    await receive(observer, thought, "thought", t, other=actor)
        for a in agents:
            await synth(a["name"], t)
        record(t)
        if progress and (t % 60.0 == 0):
            print(f"t = {t:g} min: {sum(len(d.qualified()) for d in dbs.values())} qualified norms, "
                  f"{len(events)} events", flush=True)

    frames = []
    for db in dbs.values():
        f = db.to_frame()
        if len(f):
            lab = [classify_text(c, table) for c in f["content"]]
            f["topic"] = [x[0] for x in lab]
            f["stance"] = [x[1] for x in lab]
            frames.append(f)
    norms = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
    settings = dict(minutes=float(minutes), dt=float(dt), n_norms=n_norms, p_present=p_present,
                    p_thought=p_thought, plan_every=float(plan_every), threshold=float(threshold),
                    ops=type(ops).__name__, steps=None if steps is None else [s if isinstance(s, str) else s[0] for s in steps])
    return PopulationRun(
        agents=tuple(by_name), entrepreneurs=tuple(a["name"] for a in agents if a.get("entrepreneur")),
        topics=topic_names, norms=norms, events=pd.DataFrame(events, columns=list(EVENT_COLUMNS)),
        states=pd.DataFrame(states, columns=list(STATE_COLUMNS)), settings=settings, databases=dbs)


__all__ = ["run_population", "arun_population", "PopulationRun"]
