"""The LLM session of a SCENE run: the endpoints of the personas and judge and of the subject, the seeds,
every call journaled (through :class:`~normlab.llm_runs.core.journaled.JournaledClient` when the run has a
directory) and the event log of each episode."""

from __future__ import annotations

import copy
import itertools

import numpy as np

from normlab._rng import as_seed_sequence

from .. import journal as jr
from ..backend import EndpointConfig, open_endpoint
from ..core.journaled import JournaledClient, RequestCap, call_context, journaled_budget, replay_index
from .episode import event
from .settings import SceneSettings


class _Session:
    """Endpoints (personas/judge and subject), seeds and the event log of one run."""

    def __init__(self, endpoint, subject, settings: SceneSettings, rng, *, clients=None):
        self.endpoint = endpoint if endpoint is not None else EndpointConfig.from_env()
        if not isinstance(self.endpoint, EndpointConfig):
            raise TypeError(f"endpoint must be an EndpointConfig; got {type(self.endpoint).__name__}")
        if subject is not None and not isinstance(subject, EndpointConfig):
            raise TypeError(f"subject must be an EndpointConfig or None; got {type(subject).__name__}")
        self.subject_cfg = subject
        self.s = settings
        self.ss = as_seed_sequence(rng)
        self.events: list[dict] = []
        self._given = clients  # (client, subject client): prepared clients (dry runs), no endpoint opened
        self.journal = None
        self.requests = RequestCap()
        self._ev_next: dict = {}
        self._ev_skip: dict = {}

    async def __aenter__(self):
        self._ep = self._sep = None
        if self._given is not None:
            self.client, self.subject_client = self._given
            return self
        self._ep = open_endpoint(self.endpoint)
        self.client = await self._ep.__aenter__()
        self.subject_client = self.client
        if self.subject_cfg is not None:
            try:
                self._sep = open_endpoint(self.subject_cfg)
                self.subject_client = await self._sep.__aenter__()
                self.subject_client.cap = self.client.cap  # one budget for the whole sweep
            except BaseException:
                await self._ep.__aexit__(None, None, None)
                raise
        return self

    async def __aexit__(self, *exc):
        if self._sep is not None:
            await self._sep.__aexit__(*exc)
        if self._ep is not None:
            await self._ep.__aexit__(*exc)

    def journaled(self, journal, *, max_requests=None) -> None:
        """Route every call through the run's journal (:class:`~normlab.llm_runs.core.journaled.JournaledClient`),
        earlier sessions' calls answered from it and counted against the caps."""
        self.journal = journal
        replay, ids = replay_index(journal.records), itertools.count(jr.count(journal.records, jr.CALL) + 1)
        requests = self.requests = RequestCap(max_requests)
        # one budget for the sweep: write-ahead, earlier sessions counted
        journaled_budget([self.client, self.subject_client], journal, max_requests)
        same = self.subject_client is self.client
        self.client = JournaledClient(self.client, journal, replay=replay, ids=ids, requests=requests)
        self.subject_client = self.client if same else JournaledClient(self.subject_client, journal, replay=replay,
                                                                       ids=ids, requests=requests)
        self._ev_skip = {k: len(v) for k, v in jr.episode_events(journal.records).items()}

    def new_log(self, episode_id: str) -> list:
        """The event log of an episode: a list whose entries are also journaled as they are
        appended (those a resumed episode replays are journaled already and not written again)."""
        return _EventLog(self, episode_id) if self.journal is not None else []

    def _journal_event(self, episode_id: str, ev: dict) -> None:
        i = self._ev_next.get(episode_id, 0)
        self._ev_next[episode_id] = i + 1
        if i >= self._ev_skip.get(episode_id, 0):
            self.journal.write(jr.episode_event_record(episode_id, i, ev), sync=True)

    def prefill_on(self, cfg) -> bool:
        return cfg.embedded if self.s.prefill is None else bool(self.s.prefill)

    async def ask(self, role: str, system: str, user: str, prefill: str, *, seed: int, max_tokens: int,
                  temperature: float, subject: bool = False, log: list) -> str | None:
        client = self.subject_client if subject else self.client
        cfg = self.subject_cfg if (subject and self.subject_cfg is not None) else self.endpoint
        msgs = [{"role": "system", "content": system}, {"role": "user", "content": user}]
        pre = prefill if self.prefill_on(cfg) else None
        if pre:
            msgs.append({"role": "assistant", "content": pre})
        with call_context(purpose=f"scene:{role}"):
            res = await client.chat(msgs, max_tokens=max_tokens, temperature=temperature, seed=seed)
        text = res.text
        if pre and text is not None and not text.lstrip().startswith("{"):
            text = pre + text  # servers that return only the continuation (llama.cpp echoes nothing)
        log.append(event("call", role=role, model=client.model, seed=seed, system=system,
                         user=user, prefill=pre, text=text, finish_reason=res.finish_reason,
                         prompt_tokens=res.prompt_tokens, completion_tokens=res.completion_tokens,
                         latency=round(res.latency, 3)))
        return text


class _EventLog(list):
    """An episode's event log whose appends are journaled (see :meth:`_Session.new_log`)."""

    def __init__(self, sess: _Session, episode_id: str):
        super().__init__()
        self._sess, self._id = sess, episode_id

    def append(self, ev) -> None:
        super().append(ev)
        self._sess._journal_event(self._id, ev)

    def __deepcopy__(self, memo):
        return copy.deepcopy(list(self), memo)


def _seeds(ss: np.random.SeedSequence):
    g = np.random.default_rng(ss)
    while True:
        yield int(g.integers(0, 2**31 - 1))


def _seed_sequence(seed) -> np.random.SeedSequence:
    entropy, *key = seed
    return np.random.SeedSequence(int(entropy), spawn_key=tuple(int(x) for x in key))
