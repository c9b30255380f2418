"""Running a game: :func:`run_game` / :func:`arun_game` validate the arguments, take the run
directory, resume from its journal, open the endpoints, play every run and write the tables."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import gc
import time
import warnings
from pathlib import Path

import numpy as np

from normlab._rng import as_seed_sequence, seed_list

from ..backend import EndpointConfig, open_endpoint
from .. import journal as jr
from ..core.sync import run_sync
from ..journal import (JOURNAL_FILE, DirectoryLock, Journal, check_new_run_dir, compare_settings, finish_session,
                       read_settings, session_outcome, write_settings)
from .game import Agents, Game, load_cache, resume
from .groups import group_prices, make_groups
from .log import TABLE_FILES, build_result, write_tables
from .mode import EXACT, mode_of
from .progress import Progress
from .prompts import load_template
from .result import LLMRunResult
from .settings import _RESUMABLE_FREE, GameSettings, longest_prompt_bytes, make_settings


async def arun_game(
    n_agents: int,
    memory: int,
    names,
    *,
    max_interactions: int,
    runs: int = 1,
    mode: str = "sample",
    committed: int = 0,
    committed_name: str | None = None,
    initial: str = "empty",
    stop: str = "streak",
    graph=None,
    template="main",
    payoffs=(100, -50),
    temperature: float = 0.5,
    top_k: int | None = 10,
    max_tokens: int = 6,
    top_logprobs: int = 20,
    max_reasks: int = 2,
    prefill: bool | None = None,
    multi_token: str = "expand",
    case_sensitive: bool = False,
    wrap: str = "chat",
    parse: str = "normlab",
    top_p: float | None = 1.0,
    min_p: float | None = 0.0,
    name_order: str = "auto",
    committed_placement: str = "last",
    committed_mode: str = "swap",
    groups=None,
    endpoint: EndpointConfig | None = None,
    out=None,
    cache=None,
    progress: bool = True,
    fsync_interval: float | None = 1.0,
    rng=None,
    restart: bool = False,
) -> LLMRunResult:
    """Coroutine version of :func:`run_game` (same arguments); use it with ``await`` in async code.

    The keywords are a convenience: :func:`make_settings` checks them and makes a
    :class:`~normlab.theory.spec.GameSpec`, a :class:`~normlab.llm_runs.runner.sampling.Sampling`
    and a :class:`~normlab.llm_runs.runner.mode.DecisionMode` into the run's settings, which
    :func:`aplay_game` plays.
    """
    if not isinstance(restart, bool):
        raise TypeError(f"restart must be a bool; got {type(restart).__name__}")
    t_start = time.perf_counter()
    endpoint = _endpoint(endpoint)
    s, tpl, nbrs = make_settings(
        n_agents, memory, names, max_interactions=max_interactions, runs=runs, mode=mode, committed=committed,
        committed_name=committed_name, initial=initial, stop=stop, graph=graph, template=template,
        payoffs=payoffs, temperature=temperature, top_k=top_k, max_tokens=max_tokens, top_logprobs=top_logprobs,
        max_reasks=max_reasks, prefill=prefill, multi_token=multi_token, case_sensitive=case_sensitive,
        embedded=endpoint.embedded, wrap=wrap, parse=parse, top_p=top_p, min_p=min_p, name_order=name_order,
        committed_placement=committed_placement, committed_mode=committed_mode,
    )
    return await aplay_game(s, tpl, nbrs, groups=groups, endpoint=endpoint, out=out, cache=cache, progress=progress,
                            fsync_interval=fsync_interval, rng=rng, restart=restart, t_start=t_start)


def _endpoint(endpoint) -> EndpointConfig:
    """The run's endpoint (default: from the environment, else the embedded server), checked."""
    if endpoint is None:
        endpoint = EndpointConfig.from_env()
    if not isinstance(endpoint, EndpointConfig):
        raise TypeError(f"endpoint must be an EndpointConfig or None; got {type(endpoint).__name__}")
    if endpoint.embedded and endpoint.model is not None:
        raise ValueError("a model name was given without a base URL; pass base_url too (the embedded server serves the "
                         "model of --embedded-model / EndpointConfig.embedded_model)")
    return endpoint


async def aplay_game(s: GameSettings, tpl, nbrs=None, *, groups=None, endpoint: EndpointConfig | None = None, out=None,
                     cache=None, progress: bool = True, fsync_interval: float | None = 1.0, rng=None,
                     restart: bool = False, t_start: float | None = None) -> LLMRunResult:
    """Play (or resume) the runs of settings ``s`` (:func:`game_settings` or :func:`make_settings`,
    with the template ``tpl`` and neighbour lists ``nbrs`` they return, made for ``endpoint``);
    ``groups`` and the rest as in :func:`run_game`. ``t_start``: when the call began (the result's
    elapsed time)."""
    if not isinstance(restart, bool):
        raise TypeError(f"restart must be a bool; got {type(restart).__name__}")
    t_start = time.perf_counter() if t_start is None else t_start
    endpoint = _endpoint(endpoint)
    requested = s.n_agents - (s.committed if s.committed_mode == "inject" else 0)  # injected agents join no group
    stored_groups, group_specs = make_groups(groups, s, tpl, embedded=endpoint.embedded, n_agents=requested)
    if stored_groups:
        s = GameSettings(**{**s.__dict__, "groups": stored_groups})
    requested_seed = None if rng is None else seed_list(as_seed_sequence(rng))
    imported = load_cache(cache)
    directory = Path(out) if out is not None else None
    # the directory lock is taken before the settings are read or written (two runs started
    # together on one new directory would otherwise mix their settings and journals)
    with DirectoryLock(directory) if directory is not None else contextlib.nullcontext(), _older_objects_frozen():
        if restart and directory is not None:
            discard_run(directory)
        return await _arun_locked(s, tpl, nbrs, endpoint, directory, requested_seed, imported, fsync_interval,
                                  progress, t_start, group_specs)


@contextlib.contextmanager
def _older_objects_frozen():
    """The objects alive before the run (modules, the caller's data) left out of the garbage
    collector's full passes while it plays and builds its tables, then handed back: each full pass
    walked ~130 000 objects of NumPy, pandas and pyarrow (about 4 % of the runner's CPU). Left
    alone when something else has frozen objects already."""
    if gc.get_freeze_count():
        yield
        return
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


async def _arun_locked(s, tpl, nbrs, endpoint, directory, requested_seed, imported, fsync_interval, progress,
                       t_start, groups=None):
    stored = None
    if directory is not None:
        if directory.exists() and not directory.is_dir():
            raise ValueError(f"--out {directory} exists and is not a directory")
        stored = read_settings(directory) if directory.exists() else None
        if stored is None and directory.exists():
            check_new_run_dir(directory, "normlab LLM run")
        if stored is not None:
            check_journal_kept(directory)
            st = stored["settings"]
            req = s.to_dict()
            free = list(_RESUMABLE_FREE)
            if requested_seed is not None:
                req["seed"] = list(requested_seed)
                free.remove("seed")
            if endpoint.model is not None:
                req["model"] = endpoint.model
                free.remove("model")
            diffs = compare_settings(st, req, free)
            if diffs:
                raise ValueError(
                    f"{directory} holds a run with different settings ({'; '.join(diffs)}); "
                    "resume it with the same settings or use another --out directory"
                )
            s = GameSettings(**{**s.__dict__, "seed": tuple(st["seed"]), "model": st["model"]})
    # the journal is read in one walk into each run's state (memory stays flat however long it is)
    journal = Journal(directory / JOURNAL_FILE if directory is not None else None, fsync_interval=fsync_interval,
                      load=False, fingerprint=stored["hash"] if stored is not None else None)
    prices = group_prices(s, endpoint, groups)
    start = resume(s, journal.reader(), prices) if stored is not None else None  # a new run: after its seed is drawn
    ended = start.ended if start is not None else {}
    replayed = sum(start.played.values()) if start is not None else 0
    if stored is not None and len(ended) == s.runs:  # nothing left to play
        res = build_result(s, journal, directory, prices, elapsed=time.perf_counter() - t_start, replayed=replayed)
        write_tables(res)
        return res
    tpls = [tpl] + [load_template(g.template) if g.template != tpl.name else tpl for g in (groups or [])]
    new_tokens = s.decision.tokens_per_request(s)  # the groups' max_tokens too (s.groups)
    pbytes = max(longest_prompt_bytes(s, t) for t in tpls)
    async with contextlib.AsyncExitStack() as stack:
        client = await stack.enter_async_context(open_endpoint(endpoint, prompt_bytes=pbytes,
                                                               max_new_tokens=new_tokens))
        agents = await _open_groups(stack, s, tpl, client, endpoint, groups, pbytes, new_tokens)
        if stored is not None and s.model != client.model:
            raise ValueError(f"{directory} was run with model {s.model!r} but the endpoint serves {client.model!r}")
        if stored is None:
            ss = np.random.SeedSequence() if requested_seed is None else None
            seed = requested_seed if requested_seed is not None else seed_list(ss)
            s = GameSettings(**{**s.__dict__, "seed": tuple(seed), "model": client.model})
            if directory is not None:
                write_settings(directory, s.to_dict(), s.digest)
            journal.fingerprint = s.digest
        if start is None:
            start = resume(s, journal.reader(), prices)
        pbar = None
        if progress:
            played = start.played
            pbar = Progress(s, played, {k: played[k] for k in ended})
        game = Game(s, tpl, nbrs, client, journal.open(), pbar, imported=imported, groups=agents, start=start)
        journal.forget()  # records live on disk only: memory stays flat
        outcome, failed = "error", False
        try:
            await asyncio.gather(*(game.play(k, start.states[k], k in ended) for k in range(s.runs)))
            outcome = "stopped: budget" if game.stopped == "budget" else "finished"
        except BaseException as exc:
            outcome, failed = session_outcome(exc), True
            raise
        finally:
            journal.close()
            if pbar is not None:
                pbar.close()
            if directory is not None and failed:
                with contextlib.suppress(OSError):
                    finish_session(directory, outcome=outcome)
    res = build_result(s, journal, directory, prices, elapsed=time.perf_counter() - t_start, replayed=replayed,
                       stopped=game.stopped)
    write_tables(res, outcome)
    warn_no_prefill(res)
    return res


#: What a run directory holds of its run (``restart`` removes these and nothing else).
RUN_FILES = (jr.SETTINGS_FILE, JOURNAL_FILE, jr.MANIFEST_FILE, *TABLE_FILES)


def check_journal_kept(directory: Path) -> None:
    """Refuse a run directory whose results remain but whose journal is gone (deleted, or
    emptied): resuming it would start over and pay for every request again, silently. The one
    line names the choice: restore the journal, or ``--restart`` (``restart=True``) to pay again."""
    j = directory / JOURNAL_FILE
    jr.check_journal_file(j)  # a FIFO or a directory is not "missing or empty": one line naming it
    try:
        empty = j.stat().st_size == 0
    except FileNotFoundError:
        empty = True
    if empty and any((directory / f).exists() for f in TABLE_FILES):
        raise ValueError(
            f"{directory} holds the results of a run but its journal ({JOURNAL_FILE}) is missing or empty: resuming "
            "would start over and pay for every request again; restore the journal, or rerun with --restart "
            "(restart=True) to start the run afresh and pay again")


def discard_run(directory: Path) -> None:
    """``restart``: remove the run's own files (:data:`RUN_FILES`, their temporary copies) from
    ``directory`` so that the run starts afresh. A directory holding anything else is refused
    first, with nothing deleted: a new run there would be refused after the deletion."""
    if not directory.is_dir():
        return
    own = {jr.LOCK_FILE, *RUN_FILES, *(f + ".tmp" for f in RUN_FILES)}
    other = sorted(p.name for p in directory.iterdir() if p.name not in own)
    if other:
        shown = ", ".join(repr(x) for x in other[:3]) + (f" and {len(other) - 3} more" if len(other) > 3 else "")
        raise ValueError(f"output directory {directory} is not empty: it holds {shown} besides a run's own files, so "
                         "the restarted run would be refused there; nothing was deleted (move those aside or choose "
                         "another directory)")
    for f in RUN_FILES:
        for p in (directory / f, directory / (f + ".tmp")):
            with contextlib.suppress(FileNotFoundError):
                p.unlink()


async def _open_groups(stack, s, tpl, client, endpoint, groups, pbytes, new_tokens) -> list | None:
    """One ``(Agents, first agent, size)`` per group; groups on another endpoint, model or
    prices get their own client (one per distinct endpoint), all sharing the run's spending cap."""
    if not groups:
        return None
    clients, out = {}, []
    for g in groups:
        if g.base_url is None and g.model in (None, client.model) and g.price_input is None and g.price_output is None:
            c = client
        else:
            cfg = dataclasses.replace(
                endpoint, base_url=g.base_url or endpoint.base_url, model=g.model,
                price_input=endpoint.price_input if g.price_input is None else g.price_input,
                price_output=endpoint.price_output if g.price_output is None else g.price_output)
            key = (cfg.base_url, cfg.model, cfg.price_input, cfg.price_output)
            if key not in clients:
                if cfg.embedded:  # the embedded model at other prices: the same server
                    c = type(client)(client.base_url, client.model, cfg)
                    await stack.enter_async_context(c)
                    c.info = client.info
                else:
                    c = await stack.enter_async_context(open_endpoint(cfg, prompt_bytes=pbytes,
                                                                      max_new_tokens=new_tokens))
                clients[key] = c
            c = clients[key]
        c.cap = client.cap  # one budget for the whole population
        gtpl = tpl if g.template == tpl.name and g.template_digest == tpl.digest else load_template(g.template)
        out.append((Agents(g.name, gtpl, c, g.temperature, g.top_k, g.top_p, g.min_p, g.max_tokens),
                    g.first_agent, g.size))
    return out



def warn_no_prefill(res: LLMRunResult) -> None:
    n, bad = int(res.runs["decisions"].sum()), int(res.runs["invalid"].sum())  # uncommitted decisions
    if mode_of(res.settings.get("mode", "sample")) is EXACT and n >= 4 and bad / n > 0.5:
        warnings.warn(
            f"{bad / n:.0%} of the exact-mode decisions found no pool name among the top-logprob "
            "tokens. Does the endpoint continue a final assistant message (the prefill {'value': ')? llama.cpp "
            "does; vLLM needs EndpointConfig(extra_body={'continue_final_message': True, "
            "'add_generation_prompt': False}); OpenAI's hosted API does not (use mode='sample').",
            RuntimeWarning, stacklevel=3,
        )



def run_game(n_agents: int, memory: int, names, *, max_interactions: int, **kwargs) -> LLMRunResult:
    """Play (or resume) replicate runs of the LLM naming game of Flint Ashery et al. (2025).

    Parameters
    ----------
    n_agents : int
        Population size ``N`` (>= 2).
    memory : int
        Memory length ``H`` (>= 1): each agent's prompt shows its last ``H`` interactions.
    names : str or sequence of str
        Name pool, e.g. ``"Q,M"`` (names may not contain ``,`` or ``;``).
    max_interactions : int
        Cap on interactions per run (a population round is ``N`` interactions).
    runs : int, optional
        Replicate runs (played concurrently; run ``k`` uses child ``k`` of ``rng``).
    mode : {"sample", "exact"}, optional
        ``"sample"``: the paper's protocol -- generate (temperature, top-k, top-p, min-p,
        ``max_tokens``), parse the name, re-ask on an unparseable answer (see ``max_reasks``);
        a decision still unparseable is recorded as invalid (never a random substitute). ``"exact"``: read the next-token
        distribution over the names at the answer position (prefill ``{'value': '``) from the
        logprobs, apply the sampler's temperature and top-k, renormalise over the names (the
        covered probability mass is recorded) and sample locally with the run's seeded rng;
        distributions are cached per distinct prompt, so a run costs at most one request per
        distinct (memory state, name order) (a few more for multi-token names).
    committed : int, optional
        Number ``K`` of committed agents (placed by ``committed_placement``); they always play
        ``committed_name`` and make no LLM call.
    committed_name : str, optional
        Default: the last name of the pool.
    initial : str, optional
        ``"empty"`` memories, ``"consensus:<name>"`` (every uncommitted memory holds ``H``
        successful plays of ``<name>``: the authors' integer ``initial``), or ``"random"`` (the
        authors' ``initial = 'random'``: ``H`` entries per uncommitted agent, own and partner's
        name each drawn uniformly from the first two pool names; seeded per run, see
        :func:`run_setup`).
    stop : {"streak", "success95", "consensus", "flip", "max"}, optional
        ``"streak"``: ``3N`` consecutive successes (the published runs: 72 for N = 24);
        ``"success95"``: 95% of the last ``3N`` interactions succeeded; ``"consensus"``: every
        uncommitted memory holds ``H`` successful plays of one name (the committed name, if
        any); ``"flip"``: the committed name made >= 2.849/3 of the uncommitted agents' valid
        productions over the last 3 population rounds (checked at round ends); ``"max"``: run
        to the cap. The cap ``max_interactions`` always applies. These are the rules of
        :mod:`normlab.theory` (same names and definitions).
    graph : networkx.Graph, optional
        Interaction network (nodes in ``list(graph.nodes)`` order = agent ids); default complete.
    template : str, path, dict or PromptTemplate, optional
        ``"main"`` (default), ``"bullet"``, ``"narrative"`` or a custom JSON template.
    payoffs : (float, float), optional
        Success / failure payoffs shown in the prompt (100 / -50).
    temperature, top_k, max_tokens : optional
        Sampling settings (Table S4: 0.5, 10, 6). ``top_k=None`` omits it (OpenAI's own API).
    top_logprobs : int, optional
        Alternatives requested per position in exact mode (default 20).
    max_reasks : int or "unbounded", optional
        Sample mode: extra requests after an unparseable answer. ``"unbounded"`` is the paper's
        protocol (the authors' ``get_response`` re-asks until a pool name appears), guarded by
        :data:`REASK_SAFETY_LIMIT` requests per decision (then :class:`ReaskLimitError`, with
        the completed interactions kept in the journal). The default cap 2 (then an invalid
        decision) is normlab's choice, not the paper's. Re-asks are counted (``reasks`` in the
        decisions and runs tables and the summary).
    prefill : bool, optional
        Send the answer opening ``{'value': '`` as a final assistant message to be continued.
        Required in exact mode; default in sample mode: on for the embedded server (SmolLM2
        ignores the format otherwise), off for remote endpoints (the paper's protocol).
    multi_token : {"expand", "first_token"}, optional
        Exact-mode scoring of multi-token names (:func:`normlab.llm_runs.runner.exact.name_distribution`).
    case_sensitive : bool, optional
        Match answers to names exactly (default: case-insensitively when unambiguous).
    wrap : {"chat", "raw-llama3", "raw-llama2"}, optional
        ``"chat"``: system and user messages to ``/chat/completions`` (the server's chat
        template adds its own tokens; Llama-3.1's adds a "Cutting Knowledge Date" block).
        ``"raw-llama3"`` / ``"raw-llama2"``: the exact text of
        :meth:`~normlab.llm_runs.runner.prompts.Prompt.text` -- the authors' hand-written header
        tokens and whitespace -- to ``/completions`` (the authors' protocol).
    parse : {"normlab", "authors"}, optional
        Sample mode: how a name is read from an answer. ``"normlab"`` (default):
        :func:`~normlab.llm_runs.runner.prompts.parse_answer` (the answer field must hold exactly one
        pool name). ``"authors"``: their ``get_response`` -- any pool name between single
        quotes anywhere in the generation (:func:`~normlab.llm_runs.runner.prompts.parse_answer_authors`).
        The paper's full sample protocol is ``wrap="raw-llama3", max_reasks="unbounded",
        parse="authors"``.
    top_p, min_p : float or None, optional
        Sent in sample mode (default neutral: 1 and 0, so servers such as llama.cpp do not
        apply their own top-p 0.95 / min-p 0.05, which can remove names of small probability);
        ``None`` omits the field. Exact mode needs them neutral. The effective sampler settings
        are stored in ``settings.json`` and the runs table (``sampler``).
    name_order : {"auto", "per_agent", "shared"}, optional
        ``per_agent``: each player sees its own shuffled name list (the authors' ``converge``);
        ``shared``: one shuffle per interaction shown to both players (the authors'
        ``simulate_CM``, which played all published committed-minority and stability runs);
        ``auto`` (default): shared when ``initial`` is not ``"empty"``, as the authors' code.
    committed_placement : {"last", "random"}, optional
        Committed agents are the last ``K`` ids (default, as the theory simulators; normlab's
        choice) or ``K`` ids drawn per run from the seed (the authors' ``swap_committed``). On
        the complete graph both give the same distribution of outcomes.
    committed_mode : {"swap", "inject"}, optional
        ``swap`` (default): ``K`` of the ``n_agents`` are committed (all published runs);
        ``inject``: ``K`` committed agents are added (population ``n_agents + K``, the authors'
        ``version = 'inject'``).
    groups : sequence of str or dict, optional
        A mixed population (:func:`make_groups`): one entry per group in agent order, e.g.
        ``["12:model=A", "12:model=B,temperature=0.7"]`` or ``[{"size": 12, "model": "A"}, ...]``;
        keys ``name``, ``model``, ``base_url``, ``template``, ``temperature``, ``top_k``,
        ``top_p``, ``min_p``, ``max_tokens``, ``price_input``, ``price_output`` (the rest as the
        run). Sizes add up to ``n_agents``. Each decision records its ``group`` and ``model``;
        all groups share one spending cap.
    endpoint : EndpointConfig, optional
        Endpoint, retries, concurrency, prices and spending caps (``budget_tokens``,
        ``budget_usd``: the session stops cleanly before a request could pass them, counting
        what earlier sessions in ``out`` spent; the result's ``stopped`` is then ``"budget"``
        and the same call with a larger cap continues); default from the environment, else the
        embedded server (its KV cache sized to the longest prompt these settings can produce).
    out : str or pathlib.Path, optional
        Run directory: ``settings.json``, ``journal.jsonl`` (append-only, flushed per record),
        ``manifest.json`` (settings, environment, endpoints, one entry per session) and
        ``decisions.parquet``, ``runs.parquet``, ``calls.parquet``, ``ledger.parquet``. A directory holding an
        unfinished run with the same settings is resumed; different settings are refused.
        ``None``: nothing is written (no resumption).
    cache : path or sequence of paths, optional
        Exact mode: run or probe directories (e.g. a :func:`~normlab.llm_runs.strategy_table`
        with the same template, model and ``H``) whose journaled next-token distributions are
        reused instead of asking the endpoint again; each reused distribution is copied into
        this run's journal. Endpoints such as llama.cpp return different logprobs for the same
        prompt when other requests share its batch (the embedded server is therefore sent one
        request at a time, and reproduces a run from its seed; a remote server may not), so a
        run is reproduced exactly from its seed plus the distributions it used -- this is how to
        share them.
    progress : bool, optional
        tqdm progress bar in agent decisions, against an estimate of the decisions the runs need
        (never lowered) with the time left at the recent pace (:class:`Progress`).
    fsync_interval : float or None, optional
        Every journal record is flushed to the OS at once (a killed process loses nothing but
        the interaction in flight); interaction records are also fsynced at most every this
        many seconds (default 1; ``0``: after every interaction; ``None``: only at the end),
        which bounds what a machine crash can lose.
    rng : None, int, SeedSequence or Generator, optional
        Seed. Interaction ``t`` of run ``k`` draws its pair, name orders, local uniforms and
        per-call sampling seeds from ``SeedSequence(entropy, spawn_key=(..., k, t))`` only, so
        runs are identical whatever the concurrency and a resumed run equals an uninterrupted
        one. ``None``: fresh entropy (stored in ``settings.json``).
    restart : bool, optional
        Start the run in ``out`` afresh (``--restart``): its settings, journal, manifest and
        tables are removed first (other files stay) and every request is paid again. Without
        it, a directory whose tables remain but whose journal is missing or empty is refused
        (:func:`check_journal_kept`), never silently repaid.

    Returns
    -------
    LLMRunResult
        ``.log`` is a :class:`normlab.schema.GameLog` (``kind`` ``baseline`` / ``swap`` /
        ``evolved``; ``model`` the endpoint's model name).

    Raises
    ------
    ValueError, TypeError
        Invalid arguments, or ``out`` holding a run with different settings (before any work).
    EndpointError
        The endpoint is down or keeps failing; completed interactions stay in the journal.

    Notes
    -----
    Invalid answers are stored with ``name=None``; such an interaction is a failure and is not
    written into either memory (as :func:`normlab.schema.rebuild_decisions`). In exact mode the
    logprobs are assumed to be the model's raw log-probabilities (llama.cpp, vLLM default) and
    the temperature / top-k transform is applied locally.

    References
    ----------
    Flint Ashery, Aiello, Baronchelli, Sci. Adv. 11, eadu9368 (2025): Experimental Setup;
    Prompting; Materials and Methods (Committed Minorities: 95% of the last 3N interactions);
    Table S4 (temperature 0.5, top-k 10, max tokens 6). AI-norms code (MIT):
    ``data-era/simulation_module.ipynb`` (``get_rules``, ``get_prompt``, ``get_response``,
    ``converge``, ``simulate_CM``, ``set_initial_state``, ``swap_committed``, ``add_committed``).

    Examples
    --------
    >>> res = run_game(24, 5, "Q,M", max_interactions=2000, mode="exact", rng=1, out="runs/qm")  # doctest: +SKIP
    >>> res.log.per_round()  # doctest: +SKIP
    """
    return run_sync(lambda: arun_game(n_agents, memory, names, max_interactions=max_interactions, **kwargs))
