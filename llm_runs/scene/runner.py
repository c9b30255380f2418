"""A thin SCENE episode runner on an OpenAI-compatible endpoint (the embedded SmolLM2 by default): the sweep.

Stages (prompts are data: ``prompts/*.json``; :class:`SceneSettings` and the prompts in :mod:`.settings`,
the LLM session of a run in :mod:`.session`, the lenient reading of answers in :mod:`.parsing`):

1. :func:`generate_scenario` (:mod:`.generation`) -- two-stage generation: a norm-blind scaffold from the event and
   elicitor (``scaffold_v1``), then the norm-aware hidden fields for the frozen scaffold
   (``scenario_v1``). Every answer is validated; an answer that cannot be parsed or validated
   after ``max_reasks`` re-asks is recorded as such and no scenario is returned.
2. :func:`run_episode` (:mod:`.play`) -- the opening (scaffold turns, the precedent sub-script when present,
   the elicitor), then up to ``max_turns`` ticks: the orchestrator orders the scripted personas,
   each returns message / react / no-op, and the subject is prompted after every non-silent
   persona action (once with "the floor is open" when all stay silent). The episode ends at
   ``max_turns`` or when the subject no-ops through ``max_silent_prompts`` consecutive
   all-silent prompts. Every prompt, answer, action, no-op and unparseable output is logged.
3. :func:`judge_episode` (per-turn labels, ``judge_output_v1``) and :func:`audit_episode`
   (VALID / PARTIAL / INVALID), in :mod:`.play`;
4. :func:`run_scene` (here) -- a sweep of tuples or scenarios in a resumable run directory, every
   event journaled as it happens; :func:`estimate_scene` for ``--dry-run``.

Weak models: answers are parsed leniently (first JSON object, Python-style quotes, key/value
fragments, action synonyms). What cannot be read is never guessed: an unparseable persona or
subject answer is logged as ``unparseable`` and nothing is added to the chat (a message cut
off by ``max_tokens`` keeps the words written, flagged ``truncated``); an unparseable
judge answer leaves the episode unjudged; an unparseable audit is ``"UNPARSEABLE"``. The two
documented defaults are routing ones: an unreadable orchestrator answer falls back to a seeded
shuffle of the roster, and a reaction without a valid target points at the latest turn.

References
----------
Jacniacki & Bilski, "SCENE: Recognizing Social Norms and Sanctioning in Group Chats",
arXiv:2605.07823 (2026), Sect. 4 (generation and runtime), Sect. 5.1, Appendix B.1-B.7.
"""

from __future__ import annotations

import asyncio
import warnings
from dataclasses import asdict, replace
from pathlib import Path

from normlab._rng import as_seed_sequence, seed_list
from normlab._validate import check_int

from .. import journal as jr
from ..backend import EndpointConfig, redact_url
from ..core.journaled import RequestCap, RunDirectory, ScriptedClient, call_context, gather_all, make_estimate, spent
from ..core.sync import run_sync
from .episode import Episode, as_episode, save_episodes
from .generation import GeneratedScenario, _generate, generate_scenario  # noqa: F401 (names of this module's)
from .parsing import _derive_metrics, _parse_labels, extract_json, parse_action  # noqa: F401 (names of this module's)
from .play import _play, audit_episode, judge_episode, run_episode  # noqa: F401 (names of this module's)
from .schemas import validate
from .scripted import responder as scripted_responder
from .session import _seed_sequence, _seeds, _Session
from .settings import ROLES, SceneSettings, _settings, load_example_scenario, load_prompt  # noqa: F401
from .taxonomy import SceneTuple, check_tuple

#: The episodes of a finished sweep directory (``run_scene(out=...)``).
EPISODES_FILE = "episodes.jsonl"


def _item_doc(it) -> dict:
    """An item as stored in a run's settings: a scenario dict, or a tuple's five IDs."""
    if isinstance(it, dict) and "scaffold" in it:
        return {"scenario": it}
    return {"tuple": list(check_tuple(it))}


def _check_items(items) -> list:
    if isinstance(items, (str, dict, SceneTuple)):
        raise TypeError("items must be a list of tuples or scenario dicts (wrap a single one in a list)")
    items = list(items)
    if not items:
        raise ValueError("items is empty; give tuples or scenario dicts")
    for it in items:
        if isinstance(it, dict) and "scaffold" in it:
            validate(it, "scenario_v1")
        else:
            check_tuple(it)
    return items


async def _run_item(sess, k, it, child, model_label, judge, audit) -> Episode:
    """Item ``k``: generate its scenario (a tuple) and play, judge and audit it; every event
    journaled as it happens (a session with a journal)."""
    eid = f"ep{k}"
    seeds = _seeds(child)
    log = sess.new_log(eid)
    with call_context(run=k, agent=eid):
        if isinstance(it, dict) and "scaffold" in it:
            scenario = it
        else:
            tup = check_tuple(it)
            scenario, status = await _generate(sess, tup, seeds, log)
            if scenario is None:
                return Episode(model=model_label or sess.subject_client.model or "unknown", tuple=tup,
                               subject=sess.s.subject_name, transcript=(), episode_id=eid,
                               meta={"generation": status, "end_reason": "generation failed", "events": list(log)})
        ep = await _play(sess, scenario, model_label, eid, judge, audit, seeds, log)
    return replace(ep, meta={**ep.meta, "events": list(log)})


async def _sweep(sess, items, children, model_label, judge, audit, concurrency, journal, progress) -> list:
    """Every item's episode, ``concurrency`` at a time, in item order; finished episodes of earlier
    sessions are read from the journal, unfinished ones replayed from it."""
    done = jr.episodes_done(journal.records) if journal is not None else {}
    events = jr.episode_events(journal.records) if journal is not None else {}
    out: list = [None] * len(items)
    todo = []
    for k in range(len(items)):
        d = done.get(f"ep{k}")
        if d is not None:
            data = dict(d.data)
            out[k] = Episode.from_dict({**data, "meta": {**(data.get("meta") or {}), "events": events.get(f"ep{k}", [])}})
        else:
            todo.append(k)
    sem = asyncio.Semaphore(concurrency)
    n_done = [len(items) - len(todo)]

    async def one(k):
        async with sem:
            ep = await _run_item(sess, k, items[k], children[k], model_label, judge, audit)
        if journal is not None:
            data = ep.to_dict()
            data["meta"] = {key: v for key, v in data["meta"].items() if key != "events"}
            journal.write(jr.episode_record(ep.episode_id, data), sync=True)
        out[k] = ep
        n_done[0] += 1
        if progress:
            print(f"episode {k}: {len(ep.transcript)} turns, {_end_reason(ep)} ({n_done[0]}/{len(items)} done)",
                  flush=True)

    await gather_all([one(k) for k in todo], sess.requests)
    return out


def _end_reason(ep: Episode) -> str:
    if not ep.transcript and ep.meta.get("generation"):
        return f"no turns: scenario generation failed ({ep.meta['generation']})"
    return str(ep.meta.get("end_reason", "unknown"))


def sweep_summary(episodes) -> dict:
    """What a sweep produced, in plain Python: episodes, those with no turn and why (scenario
    generation that failed: the reason, e.g. ``scaffold unparseable``), how episodes ended, how
    many were judged, the audit labels."""
    eps = [as_episode(e) for e in episodes]
    zero: dict = {}
    for e in eps:
        if not e.transcript:
            why = e.meta.get("generation") or e.meta.get("end_reason") or "unknown"
            zero[why] = zero.get(why, 0) + 1
    ends: dict = {}
    for e in eps:
        if e.transcript:
            r = str(e.meta.get("end_reason", "unknown"))
            ends[r] = ends.get(r, 0) + 1
    audits: dict = {}
    for e in eps:
        if e.audit is not None:
            audits[e.audit] = audits.get(e.audit, 0) + 1
    return {"episodes": len(eps), "played": sum(1 for e in eps if e.transcript),
            "zero_turns": sum(zero.values()), "zero_turn_reasons": zero, "end_reasons": ends,
            "judged": sum(1 for e in eps if e.judge is not None),
            "subject_unparseable": int(sum(e.meta.get("subject_unparseable", 0) for e in eps)),
            "audits": audits, "models": sorted({e.model for e in eps})}


def zero_turn_warning(episodes) -> str | None:
    """One line naming why episodes ended with no turn (``None`` when every episode was played)."""
    s = sweep_summary(episodes)
    if not s["zero_turns"]:
        return None
    why = "; ".join(f"{n} x {r}" for r, n in sorted(s["zero_turn_reasons"].items(), key=lambda kv: -kv[1]))
    return (f"{s['zero_turns']} of {s['episodes']} episodes ended with 0 turns: scenario generation failed ({why}); "
            "the generator model could not write a valid scenario (the embedded SmolLM2 cannot) -- give a capable "
            "endpoint for the personas and judge, or scenario dicts")


def run_scene(items, *, endpoint=None, subject=None, model_label: str | None = None,
              settings: SceneSettings | None = None, judge: bool = True, audit: bool = True, out=None,
              concurrency: int | None = None, max_requests: int | None = None, rng=None,
              progress: bool = False) -> list[Episode]:
    """Run a sweep of episodes: tuples are first generated into scenarios, scenarios are played,
    judged and audited.

    Parameters
    ----------
    items : iterable of SceneTuple / tuple / scenario dict
        A tuple whose generation fails is recorded as an unjudged episode with no transcript
        and ``meta["generation"]`` giving the reason (it is counted by
        :func:`~normlab.llm_runs.scene.score` as unjudged, and named in a warning).
    endpoint, subject, model_label, settings, judge, audit
        As in :func:`run_episode`; ``endpoint`` and ``subject`` carry the spending caps
        (``budget_tokens``, ``budget_usd``) and ``concurrency`` (requests in flight).
    out : str or pathlib.Path, optional
        Run directory: ``settings.json``, ``journal.jsonl`` (every LLM call before its answer is
        used, every event of every episode as it happens, each finished episode), ``manifest.json``
        and, at the end, ``episodes.jsonl`` (:func:`~normlab.llm_runs.scene.load_episodes`,
        :func:`~normlab.llm_runs.scene.score` read it, or the directory). A directory holding the
        same sweep resumes it: finished episodes are read back, an unfinished one is replayed from
        the journal (no answered call is sent again), so the result equals an uninterrupted sweep
        (each call's measured ``latency`` in the event log aside); different settings are refused.
    concurrency : int, optional
        Episodes played at once (default: the endpoint's ``concurrency``; 1 on the embedded
        server). Results do not depend on it (measured latencies aside).
    max_requests : int, optional
        Cap on the LLM requests of the run directory (earlier sessions included).
    rng : None, int, SeedSequence or Generator
        Item ``k`` uses child ``k`` of this seed, so results depend neither on the list's length
        nor on the concurrency.
    progress : bool
        One line per finished episode.

    Returns
    -------
    list of Episode

    Raises
    ------
    BudgetExhausted
        A cap was reached: finished episodes and every answered call are in the journal; the
        same call with a larger cap continues.

    Warns
    -----
    UserWarning
        When episodes ended with no turn, naming the reasons (:func:`zero_turn_warning`).
    """
    settings = _settings(settings)
    items = _check_items(items)
    if concurrency is not None:
        concurrency = check_int(concurrency, "concurrency", 1)
    RequestCap(max_requests)
    endpoint = endpoint if endpoint is not None else EndpointConfig.from_env()
    if not isinstance(endpoint, EndpointConfig):
        raise TypeError(f"endpoint must be an EndpointConfig; got {type(endpoint).__name__}")
    stored = {"items": [_item_doc(it) for it in items], "settings": asdict(settings), "judge": bool(judge),
              "audit": bool(audit), "model_label": model_label,
              "subject_model": None if subject is None else (subject.model or redact_url(subject.base_url or "embedded"))}

    async def go():
        with RunDirectory(out, "scene run", stored) as rd:
            ss = as_seed_sequence(rng) if rd.seed is None else _seed_sequence(rd.seed)
            if rd.seed is not None and rng is not None and list(seed_list(as_seed_sequence(rng))) != list(rd.seed):
                raise ValueError(f"{out} holds a sweep with seed {rd.seed}; resume it without a seed or with the same one")
            children = ss.spawn(len(items))
            async with _Session(endpoint, subject, settings, ss) as sess:
                info = [sess.client.info] + ([sess.subject_client.info] if sess.subject_client is not sess.client else [])
                rd.begin(seed=seed_list(ss), model=sess.client.model, endpoints=[x for x in info if x],
                         budget={"tokens": endpoint.budget_tokens, "usd": endpoint.budget_usd, "requests": max_requests})
                sess.journaled(rd.journal, max_requests=max_requests)
                conc = concurrency or (1 if endpoint.embedded else endpoint.concurrency)
                with rd.unfinished():
                    eps = await _sweep(sess, items, children, model_label, judge, audit, conc, rd.journal, progress)
            if rd.directory is not None:
                save_episodes(eps, rd.directory / EPISODES_FILE)
                rd.finish("finished", tables={EPISODES_FILE: "one judged episode per line (scene.score reads it)",
                                              "journal.jsonl": "every LLM call and every episode event, append-only "
                                                               "(a rerun resumes from it)"},
                          totals={**spent(rd.journal.records), **sweep_summary(eps)})
            return eps

    eps = run_sync(go)
    msg = zero_turn_warning(eps)
    if msg:
        warnings.warn(msg, UserWarning, stacklevel=2)
    return eps


def estimate_scene(items, *, endpoint=None, subject=None, settings: SceneSettings | None = None,
                   judge: bool = True, audit: bool = True, out=None, rng=None):
    """Requests, tokens and cost of :func:`run_scene` with the same arguments, before anything is
    sent (``--dry-run``); nothing is written.

    ``typical``: the sweep played offline against the scripted stand-in of capable models
    (:mod:`~normlab.llm_runs.scene.scripted`, same seed): its requests and their prompts' tokens
    (UTF-8 bytes / 3), its answers' tokens; ``at_most``: every episode to ``max_turns`` with every
    persona acting each tick and every re-ask used, each request generating its ``max_tokens``
    (generated scenarios assumed to have the scripted cast of 3 personas; the prompt tokens per
    request as typical).

    Returns
    -------
    RunEstimate
    """
    settings = _settings(settings)
    items = _check_items(items)
    endpoint = endpoint if endpoint is not None else EndpointConfig.from_env()
    client = ScriptedClient(scripted_responder(), model="scripted")

    async def go():
        async with _Session(endpoint, subject, settings, rng, clients=(client, client)) as sess:
            return await _sweep(sess, items, as_seed_sequence(rng).spawn(len(items)), None, judge, audit, 4, None,
                                False)

    run_sync(go)
    s = settings
    most_req, most_ct = 0, 0.0
    for it in items:
        n_p = len(it["hidden"]["personas"]) if isinstance(it, dict) and "scaffold" in it else 3
        gen = 0 if isinstance(it, dict) and "scaffold" in it else 2 * (s.max_reasks + 1)
        ticks = s.max_turns * (1 + 2 * n_p + 1) + 1
        lab = (s.max_reasks + 1 if s.judge_temperature > 0 else 1) * bool(judge) + bool(audit)
        most_req += gen + ticks + lab
        most_ct += (gen * s.generator_max_tokens + s.max_turns * s.orchestrator_max_tokens
                    + (ticks - s.max_turns) * s.max_tokens
                    + (lab - bool(audit)) * s.judge_max_tokens + bool(audit) * s.max_tokens)
    per_prompt = client.prompt_tokens / max(1, client.n_requests)
    done = None
    if out is not None and (Path(out) / jr.JOURNAL_FILE).exists():
        recs = jr.read_journal(Path(out) / jr.JOURNAL_FILE)
        done = {**spent(recs), "episodes_finished": len(jr.episodes_done(recs))}
    model = ("the " if endpoint.embedded else "") + endpoint.model_label
    what = (f"SCENE sweep of {len(items)} item(s), up to {s.max_turns} ticks each, personas and judge on {model}"
            + ("" if subject is None else f", subject {subject.model or redact_url(subject.base_url or 'embedded')}"))
    notes = [f"typical: this sweep played offline against the scripted stand-in of capable models "
             f"(normlab.llm_runs.scene.scripted, same seed; {client.n_requests:,} requests)",
             "at most: every tick, every persona acting and the subject answering each, every re-ask, each request "
             "generating its max_tokens (3 personas assumed for generated scenarios)",
             "tokens: prompts and answers in UTF-8 bytes / 3",
             *(["the embedded SmolLM2 cannot write scenarios or judge: its tuples end after the generation requests"]
               if endpoint.embedded and endpoint.embedded_model == "smollm2" else [])]
    return make_estimate(what, requests=(client.n_requests, most_req),
                         prompt_tokens=(client.prompt_tokens, most_req * per_prompt),
                         completion_tokens=(client.completion_tokens, most_ct),
                         prices=(endpoint.price_input, endpoint.price_output), notes=notes, done=done)
