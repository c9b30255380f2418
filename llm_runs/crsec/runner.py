"""A thin CRSEC population runner: agents in a cafe observe, chat, think, check, synthesise and plan.

Each agent owns a :class:`~normlab.llm_runs.crsec.records.NormDatabase`. At time 0 the norm
entrepreneurs create their personal norms (CreateNorm). Every step of ``dt`` simulated minutes:

1. every agent acts on its current plan (GenerateNormativeActions; agents may re-check the plan
   against norms qualified since it was made), re-planning (GenerateNormativePlans) every
   ``plan_every`` minutes (staggered);
2. every agent present in the cafe (probability ``p_present``) observes one action of one other
   present agent; if the observation conflicts with its qualified norms (DetectConflict) and it
   decides to talk (DecideToTalk), it chats with the actor; with probability ``p_thought`` the
   observer also forms a thought (GenerateThought). The observations of one step are simultaneous:
   every observer judges with the databases as they were when the step's observations began;
3. the actor identifies normative information in the chat and the observer in its thought
   (IdentifyNormativeInformation); every identified piece enters the receiver's database as a
   candidate and goes through the sanity check at once (each receiver's in the order of the
   observations);
4. agents whose qualified utilities exceed ``threshold`` run the long-term synthesis.

What one agent does within a phase depends only on its own database, so the agents of a phase run
concurrently (up to the endpoint's ``concurrency`` requests in flight); every random draw of the
simulation is made before a phase starts, and every LLM call's sampling seed comes from the run's
seed, the step, the phase, the agent and the call's number within them
(:func:`~normlab.llm_runs.core.journaled.call_seed`), so the outcome does not depend on the concurrency.

Beliefs (a qualified norm on a topic with the standard's stance), plans and actions are recorded
per agent, topic and step, so the adoption curves of Fig. 2 follow
(:mod:`~normlab.llm_runs.crsec.analysis`). The operations are
:class:`~normlab.llm_runs.crsec.operations.RuleOperations` (``ops="rule"``, no model) or
:class:`~normlab.llm_runs.crsec.llm_operations.LLMOperations` (``ops="llm"``: the embedded model
by default, any endpoint through ``endpoint=``).

An LLM run is protected like a naming-game run (:mod:`~normlab.llm_runs.core.journaled`): with
``out=DIR`` every LLM call is journaled before its answer is used and every step when it is done;
a killed run rerun with the same arguments replays itself from the journal (no completed call is
sent again) and ends identical to an uninterrupted run; ``endpoint`` caps (tokens, USD) and
``max_requests`` stop it cleanly (:class:`~normlab.llm_runs.backend.BudgetExhausted`; the same
call with a larger cap continues); :func:`estimate_population` prints the cost before anything is
sent.

References
----------
S. Ren et al., "Emergence of Social Norms in Generative Agent Societies: Principles and
Architecture", IJCAI 2024: §2, §3.1 (ten agents with conflicting preferences, three norm
entrepreneurs), §3.2 and Fig. 2, Appendix A (5 initial norms, threshold 350).
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from normlab._display import html_card, plain, plotting
from normlab._validate import Check, Relation, validated
from normlab._rng import as_seed_sequence, seed_list
from normlab.schema import unique_names

from .. import journal as jr
from ..backend import EndpointConfig, open_endpoint
from ..core.journaled import (JournaledClient, RequestCap, RunDirectory, ScriptedClient, call_context,
                              gather_all, journaled_budget, make_estimate, replay_index, spent)
from ..core.sync import run_sync
from .analysis import adoption_curves, event_counts, norm_funnel, plot_emergence, reach_times, write_crsec_run
from .lifecycle import SYNTHESIS_THRESHOLD, _resolve_steps, aevaluate, asynthesise, maybe_await
from .llm_operations import PROMPTS, LLMOperations
from .operations import RuleOperations
from .records import NormDatabase
from .scripted import responder as scripted_responder
from .topics import classify_text, load_agents, load_topics

EVENT_COLUMNS = ("t", "kind", "agent", "other", "topic", "stance", "text", "n_identified", "n_qualified")
STATE_COLUMNS = ("t", "agent", "entrepreneur", "topic", "belief", "counter_belief", "plan", "action")
ACTION_COLUMNS = ("t", "agent", "k", "text", "topic", "stance")
#: The tables a run directory holds once a run ends (``load_population`` reads them back).
TABLES = {"states.parquet": "per step, agent and topic: belief, counter-belief, plan, action",
          "events.parquet": "one row per conflict, chat, thought and synthesis",
          "norms.parquet": "every norm record of every agent with its times and provenance",
          "actions.parquet": "each agent's actions whenever they changed",
          "adoption.parquet": "the adoption curves (Fig. 2b)",
          "summary.json": "PopulationRun.summary(): final adoption, events, norms, requests"}


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
    actions : pandas.DataFrame
        Each agent's actions at time 0 and whenever they changed (:data:`ACTION_COLUMNS`: one row
        per action text, with its topic and stance).
    settings : dict
    databases : dict
        Agent name -> final :class:`NormDatabase`.
    calls : dict
        LLM requests of the run: ``sent`` this session, ``replayed`` from the journal, ``requests``
        and tokens journaled over all sessions (zeros for rule operations).
    directory : pathlib.Path or None
        The run directory (``out=``).
    """

    agents: tuple
    entrepreneurs: tuple
    topics: tuple
    norms: pd.DataFrame = field(repr=False)
    events: pd.DataFrame = field(repr=False)
    states: pd.DataFrame = field(repr=False)
    settings: dict = field(repr=False)
    databases: dict = field(repr=False, compare=False)
    actions: pd.DataFrame = field(default=None, repr=False)
    calls: dict = field(default_factory=dict, repr=False, compare=False)
    directory: Path | None = field(default=None, repr=False, compare=False)

    def adoption(self) -> pd.DataFrame:
        """Long frame ``t, topic, measure (belief | plan | action), proportion`` (Fig. 2b)."""
        return adoption_curves(self.states)

    def to_frame(self) -> pd.DataFrame:
        """The adoption curves (:meth:`adoption`)."""
        return self.adoption()

    def event_counts(self, bin_minutes: float = 60.0) -> pd.DataFrame:
        """Conflicts, chats and thoughts per time bin (Fig. 2a)."""
        return event_counts(self.events, bin_minutes=bin_minutes, t_max=self.settings["minutes"])

    def funnel(self) -> pd.DataFrame:
        """Per agent: norms per state and rejection reason."""
        return norm_funnel(self.norms)

    def summary(self) -> dict:
        """Plain Python: the run's size, the final share of agents believing, planning and acting
        on each topic's standard, events per kind (chats and thoughts: the norm-related ones, about
        a topic of the table, as Fig. 2a counts them), norms per state and the LLM requests."""
        last = self.states[self.states["t"] == self.states["t"].max()]
        final = {tp: {m: float(g[m].mean()) for m in ("belief", "plan", "action")}
                 for tp, g in last.groupby("topic", sort=False)}
        ev = self.events
        kinds = ev[(ev["kind"].isin(["conflict", "synthesis"])) | ev["topic"].notna()]["kind"].value_counts()
        states = self.norms["state"].value_counts() if len(self.norms) else pd.Series(dtype=int)
        return plain({
            "agents": len(self.agents), "entrepreneurs": len(self.entrepreneurs), "ops": self.settings["ops"],
            "model": self.settings.get("model"), "minutes": self.settings["minutes"], "dt": self.settings["dt"],
            "final": final,
            "events": {k: int(kinds.get(k, 0)) for k in ("conflict", "chat", "thought", "synthesis")},
            "norms": {s: int(states.get(s, 0)) for s in ("qualified", "candidate", "synthesised")},
            "llm_requests": self.calls.get("requests", 0), "sent_this_session": self.calls.get("sent", 0),
            "replayed_from_journal": self.calls.get("replayed", 0),
            "prompt_tokens": self.calls.get("prompt_tokens", 0),
            "completion_tokens": self.calls.get("completion_tokens", 0),
            "answers_in_format": self.calls.get("answers_in_format"),
            "directory": None if self.directory is None else str(self.directory),
        })

    def reach_times(self, level: float = 0.5) -> dict:
        """``{(topic, measure): minutes}``: when the share of agents believing, planning and
        acting on each topic's standard first reaches ``level`` (NaN: never) -- belief before
        behaviour, read off the curves (Appendix D)."""
        return reach_times(self.adoption(), level)

    @plotting
    def plot(self, *, panels="adoption", bin_minutes: float = 60.0, measures=("belief", "action"), axes=None):
        """Fig. 2 of Ren et al.: belief vs behaviour over time, and the conflicts, chats and thoughts.

        Parameters
        ----------
        panels : {"adoption", "events", "both"}
            ``"adoption"`` (default): the share of agents believing (solid) and acting (dotted) on
            each topic's standard -- Fig. 2b; ``"events"``: conflicts, chats and thoughts per
            ``bin_minutes`` -- Fig. 2a; ``"both"``: the two panels side by side.
        bin_minutes : float
        measures : sequence of str
            Adoption measures drawn (``belief``, ``plan``, ``action``).
        axes : Axes (one panel) or two Axes ("both"), optional

        Returns
        -------
        matplotlib.axes.Axes
            One panel; ``panels="both"`` returns the ``Figure`` of the two.
        """
        if panels not in ("adoption", "events", "both"):
            raise ValueError(f"panels must be 'adoption', 'events' or 'both'; got {panels!r}")
        ad = self.adoption() if panels != "events" else None
        counts = self.event_counts(bin_minutes) if panels != "adoption" else None
        return plot_emergence(ad, counts, axes=axes, measures=measures)

    def save_crsec(self, folder) -> Path:
        """Write the run in the CRSEC storage layout (``personas/<name>/norms/...`` and the memory
        ``nodes.json``), readable by :func:`~normlab.llm_runs.load_crsec_run`.

        What the layout holds and what it cannot: the final norm databases (not when each norm
        was qualified: belief curves come back as one snapshot), the chats and thoughts, each
        agent's own actions as Smallville event nodes (so
        :func:`~normlab.llm_runs.crsec.behaviour_from_nodes` reads the behaviour back), and the
        detected conflicts as event nodes in the observer's memory tagged with the keyword
        ``"conflict"`` -- a normlab extension: published CRSEC runs record no conflicts, so their
        conflict counts are unknown, not zero (see :func:`~normlab.llm_runs.crsec.events_from_nodes`).
        """
        return write_crsec_run(self, folder)

    def __repr__(self) -> str:
        last = self.states[self.states["t"] == self.states["t"].max()]
        b = last.groupby("topic")["belief"].mean().round(2).to_dict()
        a = last.groupby("topic")["action"].mean().round(2).to_dict()
        kinds = {k: v for k, v in self.summary()["events"].items() if v}
        return (f"PopulationRun(agents={len(self.agents)}, minutes={self.settings['minutes']:g}, "
                f"final belief={b}, final action={a}, events={kinds})")

    def _repr_html_(self) -> str:
        s = self.summary()
        rows = [(f"{tp}: belief / action", f"{v['belief']:.2f} / {v['action']:.2f}", None)
                for tp, v in s["final"].items()]
        rows += [(f"{k} events", v, None) for k, v in s["events"].items()]
        return html_card("PopulationRun", rows, subtitle="CRSEC population (Ren et al. 2024)",
                         settings={"agents": s["agents"], "minutes": s["minutes"], "ops": s["ops"],
                                   "LLM requests": s["llm_requests"]},
                         note=".plot() draws belief vs behaviour; .plot(panels='both') adds the events.") \
            + self.funnel().to_html()

    @classmethod
    def _contract_example(cls) -> "PopulationRun":
        """Two agents over three steps on one topic, with :meth:`NormDatabase._contract_example` as
        each agent's norms; literal tables, no LLM (``tests/umbrella/test_contracts.py``)."""
        agents, topic = ("Carlos", "Maria"), "smoking"
        dbs = {a: NormDatabase._contract_example() for a in agents}
        norms = pd.concat([db.to_frame().assign(agent=a, topic=topic, stance="against") for a, db in dbs.items()],
                          ignore_index=True)
        events = pd.DataFrame([(10.0, "conflict", "Carlos", "Maria", topic, "against", "smoking indoors", 0, 0),
                               (20.0, "chat", "Carlos", "Maria", topic, "against", "please do not smoke", 1, 1),
                               (30.0, "thought", "Maria", None, topic, "against", "smoking bothers people", 1, 0)],
                              columns=list(EVENT_COLUMNS))
        states = pd.DataFrame([(t, a, a == "Carlos", topic, b, False, b, b and t > 0)
                               for t in (0.0, 30.0, 60.0) for a in agents for b in [a == "Carlos" or t >= 30.0]],
                              columns=list(STATE_COLUMNS))
        return cls(agents=agents, entrepreneurs=("Carlos",), topics=(topic,), norms=norms, events=events, states=states,
                   settings={"ops": "rule", "model": None, "minutes": 60.0, "dt": 30.0}, databases=dbs)


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
        return _checked_agents([known[a] for a in agents])  # an agent named twice: refused, not merged
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


def _positive(value, name):
    if isinstance(value, bool) or not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
        raise ValueError(f"{name} must be a positive number; got {value!r}")
    return value


def _threshold(value, name, values):
    """A positive synthesis threshold; then (the durations checked) at most 100 000 steps."""
    _positive(value, name)
    if values["minutes"] / values["dt"] > 100_000:
        raise ValueError(f"minutes / dt must be at most 100000 steps; got {values['minutes'] / values['dt']:g}")
    return value


def _probability(value, name):
    if isinstance(value, bool) or not (isinstance(value, (int, float)) and 0.0 <= value <= 1.0):
        raise ValueError(f"{name} must be a probability in [0, 1]; got {value!r}")
    return value


def _n_norms(value, name):
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 100:
        raise ValueError(f"n_norms must be an int in [1, 100]; got {value!r}")
    return value


def _temperature(value, name):
    if isinstance(value, bool) or not (isinstance(value, (int, float)) and 0 <= value <= 2):
        raise ValueError(f"temperature must be a number in [0, 2]; got {value!r}")
    return value


def _max_tokens(value, name):
    if value is not None:
        if not isinstance(value, dict):
            raise TypeError(f"max_tokens must be a dict {{prompt: tokens}} or None; got {type(value).__name__}")
        bad = sorted(set(value) - set(PROMPTS))
        if bad:
            raise ValueError(f"max_tokens names unknown prompts {bad}; allowed: {PROMPTS}")
    return value


def _max_requests(value, name):
    RequestCap(value)
    return value


def _steps(value, name):
    _resolve_steps(value, None)
    return value


def _topics(value, name):
    return load_topics(value)


@validated
@dataclass(frozen=True)
class PopulationSettings:
    """How a CRSEC population runs (see :func:`run_population` for each field); checked when made,
    in this order, with :func:`run_population`'s messages.

    ``topics`` is kept as the loaded topic table; ``max_requests`` caps the LLM requests of a run
    directory (earlier sessions included) and, like the endpoint, is not part of the stored
    settings (a rerun may raise it).
    """

    minutes: float = 240.0
    dt: float = 10.0
    n_norms: int = 5
    p_present: float = 0.8
    p_thought: float = 0.3
    plan_every: float = 120.0
    threshold: float = SYNTHESIS_THRESHOLD
    steps: object = None
    topics: object = None
    temperature: float = 0.2
    max_tokens: dict | None = None
    max_requests: int | None = None

    _parameter_constraints = {
        "minutes": Check(_positive), "dt": Check(_positive), "plan_every": Check(_positive),
        "threshold": Relation(_threshold), "p_present": Check(_probability), "p_thought": Check(_probability),
        "n_norms": Check(_n_norms), "temperature": Check(_temperature), "max_tokens": Check(_max_tokens),
        "max_requests": Check(_max_requests), "steps": Check(_steps), "topics": Check(_topics),
    }


def _check(agents, ops, **population) -> tuple[list, PopulationSettings]:
    """The agents (:func:`_select_agents`), the :class:`PopulationSettings` of the keywords
    ``population`` and ``ops``, checked in this order before any work."""
    agents = _select_agents(agents)
    if len(agents) < 2:
        raise ValueError("a population needs at least 2 agents")
    pop = PopulationSettings(**population)
    if isinstance(ops, str) and ops not in ("rule", "llm"):
        raise ValueError(f"ops must be 'rule', 'llm' or a NormOperations instance; got {ops!r}")
    if not isinstance(ops, str) and not hasattr(ops, "identify"):
        raise ValueError(f"ops must be 'rule', 'llm' or a NormOperations instance; got {ops!r}")
    return agents, pop


def _settings(agents, ops, pop: PopulationSettings) -> dict:
    """The run's stored settings (hashed: a rerun with other settings is refused)."""
    return {"agents": agents, "ops": ops if isinstance(ops, str) else type(ops).__name__,
            "minutes": float(pop.minutes), "dt": float(pop.dt), "n_norms": int(pop.n_norms),
            "p_present": float(pop.p_present), "p_thought": float(pop.p_thought),
            "plan_every": float(pop.plan_every), "threshold": float(pop.threshold),
            "steps": None if pop.steps is None else [s if isinstance(s, str) else s[0] for s in pop.steps],
            "topics": pop.topics, "temperature": float(pop.temperature) if ops == "llm" else None,
            "max_tokens": dict(sorted((pop.max_tokens or {}).items())) if ops == "llm" else None}


async def arun_population(agents=None, *, ops="rule", minutes: float = 240.0, dt: float = 10.0,
                          n_norms: int = 5, p_present: float = 0.8, p_thought: float = 0.3,
                          plan_every: float = 120.0, threshold: float = SYNTHESIS_THRESHOLD, steps=None,
                          topics=None, endpoint=None, temperature: float = 0.2, max_tokens: dict | None = None,
                          out=None, max_requests: int | None = None, rng=None, progress: bool = False,
                          fsync_interval: float | None = 1.0) -> PopulationRun:
    """Async :func:`run_population` (its keywords make the :class:`PopulationSettings`)."""
    agents, pop = _check(agents, ops, minutes=minutes, dt=dt, n_norms=n_norms, p_present=p_present,
                         p_thought=p_thought, plan_every=plan_every, threshold=threshold, steps=steps,
                         topics=topics, temperature=temperature, max_tokens=max_tokens, max_requests=max_requests)
    return await _arun(agents, ops, pop, endpoint=endpoint, out=out, rng=rng, progress=progress,
                       fsync_interval=fsync_interval)


async def _arun(agents, ops, pop: PopulationSettings, *, endpoint, out, rng, progress,
                fsync_interval) -> PopulationRun:
    """Run the checked ``agents`` with ``ops`` as ``pop`` says (resuming ``out``)."""
    if out is not None and not isinstance(ops, str):
        raise ValueError("out= needs ops='rule' or ops='llm' (a run directory stores its settings; an operations "
                         "object cannot be stored)")
    if endpoint is not None and not isinstance(endpoint, EndpointConfig):
        raise TypeError(f"endpoint must be an EndpointConfig or None; got {type(endpoint).__name__}")
    settings = _settings(agents, ops, pop)
    table = pop.topics
    with RunDirectory(out, "crsec run", settings, fsync_interval=fsync_interval) as rd:
        ss = as_seed_sequence(rng) if rd.seed is None else _seed_sequence(rd.seed)
        if rd.seed is not None and rng is not None and list(seed_list(as_seed_sequence(rng))) != list(rd.seed):
            raise ValueError(f"{out} holds a run with seed {rd.seed}; resume it without a seed or with the same one")
        sim = _Sim(agents, table, settings, ss, pop.steps, progress)
        if ops == "rule":
            rd.begin(seed=seed_list(ss), model=None, endpoints=[])
            sim.ops = RuleOperations(table, names=sim.names, rng=sim.seeds[1])
            return await _finish(rd, sim, None)
        if ops == "llm":
            cfg = endpoint if endpoint is not None else EndpointConfig.from_env(embedded_threads=1, concurrency=1)
            if cfg.embedded and cfg.model is not None:
                raise ValueError("a model name was given without a base URL; pass base_url too (the embedded server "
                                 "serves the model of --embedded-model)")
            async with open_endpoint(cfg) as client:
                rd.begin(seed=seed_list(ss), model=client.model, endpoints=[client.info],
                         budget={"tokens": cfg.budget_tokens, "usd": cfg.budget_usd, "requests": pop.max_requests})
                journaled_budget([client], rd.journal, pop.max_requests)  # write-ahead, earlier sessions counted
                jc = JournaledClient(client, rd.journal, replay=replay_index(rd.journal.records),
                                     requests=RequestCap(pop.max_requests))
                sim.ops = LLMOperations(jc, names=sim.names, temperature=pop.temperature, max_tokens=pop.max_tokens,
                                        rng=sim.seeds[1])
                sim.requests = jc.requests
                settings["model"] = client.model
                return await _finish(rd, sim, jc)
        rd.begin(seed=seed_list(ss), model=None, endpoints=[])
        sim.ops = ops
        return await _finish(rd, sim, None)


def _seed_sequence(seed) -> np.random.SeedSequence:
    entropy, *key = seed
    return np.random.SeedSequence(int(entropy), spawn_key=tuple(int(x) for x in key))


async def _finish(rd: RunDirectory, sim: "_Sim", jc) -> PopulationRun:
    with rd.unfinished():
        await sim.run(rd.journal)
    totals = spent(rd.journal.records)
    calls = {**totals, "sent": 0 if jc is None else jc.n_sent, "replayed": 0 if jc is None else jc.n_replayed}
    if isinstance(sim.ops, LLMOperations):
        calls["answers_in_format"] = {k: f"{a}/{n}" for k, (a, n) in sorted(sim.ops.formats.items())}
    run = sim.result(calls, rd.directory)
    if rd.directory is not None:
        _write_tables(run, rd.directory)
        rd.finish("finished", tables={**TABLES, "journal.jsonl": "every LLM call and population step, append-only "
                                      "(a rerun resumes from it)"}, totals=totals)
    return run


def run_population(agents=None, *, ops="rule", minutes: float = 240.0, dt: float = 10.0, n_norms: int = 5,
                   p_present: float = 0.8, p_thought: float = 0.3, plan_every: float = 120.0,
                   threshold: float = SYNTHESIS_THRESHOLD, steps=None, topics=None, endpoint=None,
                   temperature: float = 0.2, max_tokens: dict | None = None, out=None,
                   max_requests: int | None = None, rng=None, progress: bool = False) -> PopulationRun:
    """Run a small CRSEC population (Hobbs Cafe) and record norms, events and adoption.

    Parameters
    ----------
    agents : None, path, sequence of names or of dicts
        Default: the ten agents of Appendix A (three norm entrepreneurs).
    ops : {"rule", "llm"} or NormOperations
        ``"rule"``: :class:`RuleOperations` (no model); ``"llm"``: :class:`LLMOperations` on
        ``endpoint`` (default: the embedded SmolLM2 server, one thread -- which cannot do these
        tasks: it echoes the prompts instead of writing norms; a capable endpoint, or the scripted
        local one of :mod:`~normlab.llm_runs.crsec.scripted`, runs them).
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
        ``ops="llm"``: the endpoint, its ``concurrency`` (requests in flight) and its spending
        caps (``budget_tokens``, ``budget_usd``: counting what earlier sessions in ``out`` spent).
    temperature : float
        ``ops="llm"``: sampling temperature of every prompt (0.2).
    max_tokens : dict, optional
        ``ops="llm"``: per-prompt overrides of the prompt files' ``max_tokens``.
    out : str or pathlib.Path, optional
        Run directory: ``settings.json``, ``journal.jsonl`` (every LLM call before its answer is
        used, every step when done), ``manifest.json`` and, at the end, the tables of
        :data:`TABLES`. A directory holding the same run resumes it (nothing answered is asked
        again); different settings are refused. ``None``: nothing is written.
    max_requests : int, optional
        Cap on the LLM requests of the run directory (earlier sessions included).
    rng : None, int, SeedSequence or Generator
        The run's seed (stored in ``out``; ``None``: fresh entropy).
    progress : bool
        Print one line per simulated hour.

    Returns
    -------
    PopulationRun

    Raises
    ------
    BudgetExhausted
        A cap was reached: the completed calls and steps are in the journal; the same call with
        a larger cap continues.

    References
    ----------
    Ren et al., IJCAI 2024, §2-§3 and Appendix A.
    """
    return run_sync(lambda: arun_population(
        agents, ops=ops, minutes=minutes, dt=dt, n_norms=n_norms, p_present=p_present, p_thought=p_thought,
        plan_every=plan_every, threshold=threshold, steps=steps, topics=topics, endpoint=endpoint,
        temperature=temperature, max_tokens=max_tokens, out=out, max_requests=max_requests, rng=rng,
        progress=progress))


class _Sim:
    """One population: its databases, plans and actions, the step loop, and the records."""

    def __init__(self, agents, table, settings, ss, steps, progress):
        self.agents = agents
        self.table = table
        self.s = settings
        self.ss = ss
        self.seeds = ss.spawn(2)
        self.gen = np.random.default_rng(self.seeds[0])
        self.steps = steps
        self.progress = progress
        self.names = tuple(a["name"] for a in agents)
        self.by_name = {a["name"]: a for a in agents}
        self.dbs = {n: NormDatabase(n) for n in self.names}
        self.topic_names = tuple(table["topics"])
        self.events: list = []
        self.states: list = []
        self.actions_rows: list = []
        self.ops = None
        self.requests = RequestCap()  # the run's request cap (LLM runs: the journaled client's)

    # --- records
    def ev(self, t, kind, agent, other="", text="", n_id=0, n_q=0):
        topic, stance = classify_text(text, self.table) if text else (None, 0)
        return (t, kind, agent, other, topic, stance, text, n_id, n_q)

    def record(self, t, plans, actions, previous):
        rows = []
        for a in self.agents:
            name = a["name"]
            held = {tp: set() for tp in self.topic_names}
            for n in self.dbs[name].qualified():
                tp, s = classify_text(n.content, self.table)
                if tp in held and s:
                    held[tp].add(s)
            plan_l = [classify_text(x, self.table) for x in plans[name]]
            act_l = [classify_text(x, self.table) for x in actions[name]]
            for tp in self.topic_names:
                rows.append((t, name, bool(a.get("entrepreneur")), tp, 1 in held[tp], -1 in held[tp],
                             (tp, 1) in plan_l, (tp, 1) in act_l))
            if previous is None or previous.get(name) != actions[name]:
                for k, x in enumerate(actions[name]):
                    self.actions_rows.append((t, name, k, x, *act_l[k]))
        self.states.extend(rows)
        return rows

    # --- phases
    async def _synth(self, i, name, t, step):
        with call_context(scope=(step, "synth", i), agent=name):
            out = await asynthesise(self.dbs[name], self.ops, t=t, threshold=self.s["threshold"], steps=self.steps)
        if out.triggered:
            db = self.dbs[name]
            return [self.ev(t, "synthesis", name, text="; ".join(db[k].content for k in out.created),
                            n_id=len(out.created) + len(out.rejected), n_q=len(out.created))]
        return []

    async def _receive(self, name, text, kind, t, other):
        infos = await maybe_await(self.ops.identify(self.by_name[name], text, kind)) or []
        n_q = 0
        for content, ntype, utility in infos:
            cand = self.dbs[name].add_candidate(content, utility, ntype, source=kind, source_text=text, t=t)
            out = await aevaluate(self.dbs[name], cand.id, self.ops, t=t, steps=self.steps)
            n_q += out.passed
        return self.ev(t, kind, name, other, text, len(infos), n_q)

    async def _observe(self, idx, observer, actor, observation, think, step):
        ops, a = self.ops, self.by_name[observer]
        with call_context(scope=(step, "observe", idx), agent=observer):
            qual = self.dbs[observer].qualified()
            conflict = bool(await maybe_await(ops.detect_conflict(a, observation, qual)))
            chat = None
            if conflict and await maybe_await(ops.decide_to_talk(a)):
                chat = await maybe_await(ops.converse(a, actor, observation, qual)) or None
            thought = (await maybe_await(ops.generate_thought(a, observation)) or None) if think else None
        return conflict, chat, thought

    async def run(self, journal) -> None:
        ops, gen, s = self.ops, self.gen, self.s
        done = {round(x.t, 9): x for x in jr.steps(journal.records)}
        warned = [False]

        async def create(i, a):
            with call_context(scope=(0, "create", i), agent=a["name"]):
                made = (await maybe_await(ops.create_norms(a, s["n_norms"])))[: s["n_norms"]]
            for content, ntype, utility in made:
                self.dbs[a["name"]].add_created(content, utility, ntype, t=0.0, source_text=a.get("description", ""))

        async def first_plan(i, a):
            with call_context(scope=(0, "plan", i), agent=a["name"]):
                return list(await maybe_await(ops.plan(a, self.dbs[a["name"]].qualified())))

        ents = [(i, a) for i, a in enumerate(self.agents) if a.get("entrepreneur")]
        with call_context(t=0.0):
            await gather_all([create(i, a) for i, a in ents], self.requests)
            for evs in await gather_all([self._synth(i, a["name"], 0.0, 0) for i, a in ents], self.requests):
                self.events.extend(evs)
            plans = dict(zip(self.names, await gather_all([first_plan(i, a) for i, a in enumerate(self.agents)],
                                                                        self.requests)))
        last_plan = {n: -float(gen.uniform(0.0, s["plan_every"])) for n in self.names}
        actions = {n: list(p) for n, p in plans.items()}
        self._step_done(journal, done, 0.0, self.record(0.0, plans, actions, None), warned)
        n_steps = int(round(s["minutes"] / s["dt"]))
        for k in range(n_steps):
            t = (k + 1) * s["dt"]
            step = k + 1
            previous = {n: list(v) for n, v in actions.items()}
            with call_context(t=t):
                # 1. plans and actions
                async def act(i, a):
                    name = a["name"]
                    with call_context(scope=(step, "act", i), agent=name):
                        if t - last_plan[name] >= s["plan_every"]:
                            plans[name] = list(await maybe_await(ops.plan(a, self.dbs[name].qualified())))
                            last_plan[name] = t
                        actions[name] = list(await maybe_await(ops.act(a, plans[name], self.dbs[name].qualified())))

                await gather_all([act(i, a) for i, a in enumerate(self.agents)], self.requests)
                # 2. observations: every draw first, then the observers at once
                present = [n for n in self.names if gen.random() < s["p_present"]]
                order = list(gen.permutation(len(present))) if present else []
                seen = []
                for i in order:
                    observer = present[i]
                    others = [p for p in present if p != observer and actions[p]]
                    if not others:
                        continue
                    actor = others[int(gen.integers(len(others)))]
                    action = actions[actor][int(gen.integers(len(actions[actor])))]
                    seen.append((observer, actor, f"{actor} is {action}", bool(gen.random() < s["p_thought"])))
                outs = await gather_all([self._observe(j, o, a, obs, think, step)
                                         for j, (o, a, obs, think) in enumerate(seen)], self.requests)
                # 3. the chats and thoughts received: each receiver's in the order of the observations
                todo: dict = {}
                for j, ((observer, actor, obs, _), (conflict, chat, thought)) in enumerate(zip(seen, outs)):
                    if chat:
                        todo.setdefault(actor, []).append((j, "chat", chat, observer))
                    if thought:
                        todo.setdefault(observer, []).append((j, "thought", thought, actor))

                async def receive_all(name, items):
                    with call_context(scope=(step, "receive", self.names.index(name)), agent=name):
                        return [((j, kind), await self._receive(name, text, kind, t, other))
                                for j, kind, text, other in items]

                got = dict(itertools.chain.from_iterable(
                    await gather_all([receive_all(n, items) for n, items in todo.items()], self.requests)))
                for j, ((observer, actor, obs, _), (conflict, chat, thought)) in enumerate(zip(seen, outs)):
                    if conflict:
                        self.events.append(self.ev(t, "conflict", observer, actor, obs))
                    for kind in ("chat", "thought"):
                        if (j, kind) in got:
                            self.events.append(got[(j, kind)])
                # 4. synthesis
                for evs in await gather_all([self._synth(i, n, t, step) for i, n in enumerate(self.names)],
                                            self.requests):
                    self.events.extend(evs)
            self._step_done(journal, done, t, self.record(t, plans, actions, previous), warned)
            if self.progress and (t % 60.0 == 0):
                print(f"t = {t:g} min: {sum(len(d.qualified()) for d in self.dbs.values())} qualified norms, "
                      f"{len(self.events)} events", flush=True)

    def _step_done(self, journal, done, t, rows, warned) -> None:
        digest = hashlib.sha256(json.dumps([rows, len(self.events)], default=str).encode()).hexdigest()[:16]
        before = done.get(round(t, 9))
        if before is not None:
            if before.digest != digest and not warned[0]:
                import warnings

                warnings.warn(f"the replay of the journal differs from the journaled run at t = {t:g} min (was the "
                              "code or a prompt file changed?); calls still answered from the journal where the "
                              "requests are the same", RuntimeWarning, stacklevel=2)
                warned[0] = True
            return
        journal.write(jr.step_record(t, digest, {"qualified": sum(len(d.qualified()) for d in self.dbs.values()),
                                                 "events": len(self.events)}), sync=True)

    def result(self, calls, directory) -> PopulationRun:
        frames = []
        for db in self.dbs.values():
            f = db.to_frame()
            if len(f):
                lab = [classify_text(c, self.table) for c in f["content"]]
                f["topic"] = [x[0] for x in lab]
                f["stance"] = [x[1] for x in lab]
                frames.append(f)
        norms = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
        return PopulationRun(
            agents=self.names, entrepreneurs=tuple(a["name"] for a in self.agents if a.get("entrepreneur")),
            topics=self.topic_names, norms=norms, events=pd.DataFrame(self.events, columns=list(EVENT_COLUMNS)),
            states=pd.DataFrame(self.states, columns=list(STATE_COLUMNS)),
            settings={**self.s, "ops": self.s["ops"] if self.s["ops"] in ("rule", "llm") else type(self.ops).__name__,
                      "seed": list(seed_list(self.ss))},
            databases=self.dbs, actions=pd.DataFrame(self.actions_rows, columns=list(ACTION_COLUMNS)),
            calls=calls, directory=directory)


def _write_tables(run: PopulationRun, directory: Path) -> None:
    run.states.to_parquet(directory / "states.parquet", index=False)
    run.events.to_parquet(directory / "events.parquet", index=False)
    norms = run.norms.copy()
    if "parents" in norms:
        norms["parents"] = norms["parents"].map(list)
    norms.to_parquet(directory / "norms.parquet", index=False)
    run.actions.to_parquet(directory / "actions.parquet", index=False)
    run.adoption().to_parquet(directory / "adoption.parquet", index=False)
    (directory / "summary.json").write_text(json.dumps(run.summary(), indent=1), encoding="utf-8")


def load_population(directory) -> PopulationRun:
    """A finished run directory of :func:`run_population` (``out=``) read back from its tables.

    Raises
    ------
    FileNotFoundError
        No such directory, or it holds no finished CRSEC run (an unfinished one resumes with
        :func:`run_population` and the same arguments).
    """
    directory = Path(directory)
    stored = jr.read_settings(directory) if directory.is_dir() else None
    if stored is None or stored["settings"].get("kind") != "crsec run":
        raise FileNotFoundError(f"{directory} holds no normlab CRSEC run (no settings.json of kind 'crsec run')")
    missing = [t for t in TABLES if not (directory / t).is_file()]
    if missing:
        raise FileNotFoundError(f"{directory} holds an unfinished CRSEC run (no {missing[0]}); rerun "
                                "'normlab crsec run' with the same arguments to resume it")
    st = stored["settings"]
    states = pd.read_parquet(directory / "states.parquet")
    events = pd.read_parquet(directory / "events.parquet")
    norms = pd.read_parquet(directory / "norms.parquet")
    if "parents" in norms:
        norms["parents"] = norms["parents"].map(lambda p: tuple(int(x) for x in (p if p is not None else ())))
    names = tuple(a["name"] for a in st["agents"])
    dbs = {n: NormDatabase.from_frame(norms[norms["agent"] == n] if len(norms) else norms, n) for n in names}
    recs = jr.read_journal(directory / jr.JOURNAL_FILE) if (directory / jr.JOURNAL_FILE).exists() else []
    calls = spent(recs)
    if (directory / "summary.json").is_file():
        fmt = json.loads((directory / "summary.json").read_text(encoding="utf-8")).get("answers_in_format")
        if fmt:
            calls["answers_in_format"] = fmt
    return PopulationRun(agents=names, entrepreneurs=tuple(a["name"] for a in st["agents"] if a.get("entrepreneur")),
                         topics=tuple(dict.fromkeys(states["topic"])), norms=norms, events=events, states=states,
                         settings={k: v for k, v in st.items() if k != "kind"}, databases=dbs,
                         actions=pd.read_parquet(directory / "actions.parquet"), calls=calls,
                         directory=directory)


def estimate_population(agents=None, *, ops="llm", minutes: float = 240.0, dt: float = 10.0, n_norms: int = 5,
                        p_present: float = 0.8, p_thought: float = 0.3, plan_every: float = 120.0,
                        threshold: float = SYNTHESIS_THRESHOLD, steps=None, topics=None, endpoint=None,
                        temperature: float = 0.2, max_tokens: dict | None = None, out=None,
                        max_requests: int | None = None, rng=None):
    """Requests, tokens and cost of :func:`run_population` with the same arguments, before anything
    is sent (``--dry-run``); nothing is written.

    ``typical``: the run played offline against the scripted stand-in of a capable model
    (:mod:`~normlab.llm_runs.crsec.scripted`, same seed): its requests, their prompts' tokens
    (UTF-8 bytes / 3) and its answers' tokens. ``at_most``: the same requests, each generating its
    ``max_tokens``. A model that talks more, or identifies more norms, makes more requests (no
    bound holds for every model: synthesis and re-planning depend on the answers).

    Returns
    -------
    RunEstimate
    """
    agents, pop = _check(agents, ops, minutes=minutes, dt=dt, n_norms=n_norms, p_present=p_present,
                         p_thought=p_thought, plan_every=plan_every, threshold=threshold, steps=steps,
                         topics=topics, temperature=temperature, max_tokens=max_tokens, max_requests=max_requests)
    return _estimate(agents, ops, pop, endpoint=endpoint, out=out, rng=rng)


def _estimate(agents, ops, pop: PopulationSettings, *, endpoint, out, rng):
    """:func:`estimate_population` of the checked ``agents``, ``ops`` and ``pop``."""
    table = pop.topics
    endpoint = endpoint if endpoint is not None else EndpointConfig.from_env()
    prices = (endpoint.price_input, endpoint.price_output)
    done = None
    if out is not None and (Path(out) / jr.JOURNAL_FILE).exists():
        done = spent(jr.read_journal(Path(out) / jr.JOURNAL_FILE))
    what = (f"CRSEC population of {len(agents)} agents, {pop.minutes:g} simulated minutes in steps of {pop.dt:g}, "
            f"{'rule operations (no model)' if ops == 'rule' else 'LLM operations on ' + _model_name(endpoint)}")
    if ops != "llm":
        return make_estimate(what, requests=(0, 0), prompt_tokens=(0, 0), completion_tokens=(0, 0), prices=prices,
                             notes=("rule operations make no LLM request",), done=done)
    settings = _settings(agents, ops, pop)
    ss = as_seed_sequence(rng)
    stored = jr.read_settings(Path(out)) if out is not None and Path(out).is_dir() else None
    if stored is not None and stored["settings"].get("seed"):
        ss = _seed_sequence(stored["settings"]["seed"])
    client = ScriptedClient(scripted_responder(topics=table, agents=agents), model="scripted")

    async def go():
        sim = _Sim(agents, table, settings, ss, pop.steps, False)
        sim.ops = LLMOperations(client, names=sim.names, temperature=pop.temperature, max_tokens=pop.max_tokens,
                                rng=sim.seeds[1])
        await sim.run(jr.Journal(None))
        return sim

    run_sync(go)
    n = client.n_requests
    notes = [f"typical: the requests of this run played offline against the scripted stand-in of a capable model "
             f"(normlab.llm_runs.crsec.scripted, same seed; {n:,} requests)",
             "at most: the same requests, each generating its prompt's max_tokens; a model that talks more or "
             "identifies more norms makes more requests (no bound holds for every model)",
             "tokens: prompts and answers in UTF-8 bytes / 3",
             *(["the embedded SmolLM2 cannot do these tasks: it writes no norms, so its runs make fewer requests"]
               if endpoint.embedded and endpoint.embedded_model == "smollm2" else [])]
    return make_estimate(what, requests=(n, n), prompt_tokens=(client.prompt_tokens, client.prompt_tokens),
                         completion_tokens=(client.completion_tokens, client.max_completion_tokens), prices=prices,
                         notes=notes, done=done)


def _model_name(endpoint) -> str:
    return ("the " if endpoint.embedded else "") + endpoint.model_label


__all__ = ["run_population", "arun_population", "PopulationRun", "PopulationSettings", "load_population", "estimate_population",
           "TABLES", "EVENT_COLUMNS", "STATE_COLUMNS", "ACTION_COLUMNS"]
