"""The probe session: one endpoint session, journal and decision cache for a probe (resumable with
``out``; exact-mode distributions reused with ``cache``)."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import numpy as np

from normlab._rng import as_seed_sequence, seed_list
from normlab._validate import check_out_dir

from .. import journal as jr
from ..backend import open_endpoint
from ..journal import JOURNAL_FILE, Journal, compare_settings, read_settings, write_settings
from ..runner.game import Game, load_cache
from ..runner.settings import GameSettings, longest_prompt_bytes


class ProbeSession:
    """One endpoint session, journal and decision cache for a probe."""

    def __init__(self, kind: str, settings: GameSettings, tpl, endpoint, out, progress, rng, extra: dict,
                 cache=None):
        self.kind, self.s, self.tpl, self.endpoint = kind, settings, tpl, endpoint
        self.imported = load_cache(cache)
        self.directory = Path(out) if out is not None else None
        self.progress = progress
        self.extra = extra
        self.requested_seed = None if rng is None else seed_list(as_seed_sequence(rng))
        self.done: dict[str, jr.Decision] = {}

    def _check_dir(self):
        d = self.directory
        if d is None:
            return None
        check_out_dir(d)
        stored = read_settings(d) if d.exists() else None
        if stored is None and d.exists():
            jr.check_new_run_dir(d, "normlab probe")
        if stored is not None:
            req = {**self.s.to_dict(), "probe": self.kind, **self.extra}
            free = ["model", "seed"]
            if self.requested_seed is not None:
                req["seed"] = list(self.requested_seed)
                free.remove("seed")
            if self.endpoint.model is not None:
                req["model"] = self.endpoint.model
                free.remove("model")
            diffs = compare_settings(stored["settings"], req, free)
            if diffs:
                raise ValueError(f"{d} holds a probe with different settings ({'; '.join(diffs)}); use another directory")
            st = stored["settings"]
            self.s = GameSettings(**{**self.s.__dict__, "seed": tuple(st["seed"]), "model": st["model"]})
        return stored

    async def __aenter__(self):
        stored = self._check_dir()
        self.journal = Journal(self.directory / JOURNAL_FILE if self.directory else None,
                               fingerprint=stored["hash"] if stored is not None else None)
        for a in jr.probe_answers(self.journal.records):
            self.done[a.key] = a.decision
        # the game's own prompts (bias, strategy, neutral): the embedded server's KV cache is sized to them
        # (the embedded server answers one request at a time, EndpointConfig.embedded_parallel)
        self._ep = open_endpoint(self.endpoint, prompt_bytes=longest_prompt_bytes(self.s, self.tpl),
                                 max_new_tokens=self.s.decision.tokens_per_request(self.s))
        self.client = await self._ep.__aenter__()
        try:
            if stored is not None and self.s.model != self.client.model:
                raise ValueError(f"{self.directory} was probed with model {self.s.model!r}; the endpoint serves {self.client.model!r}")
            if stored is None:
                seed = self.requested_seed or seed_list(np.random.SeedSequence())
                self.s = GameSettings(**{**self.s.__dict__, "seed": tuple(seed), "model": self.client.model})
                if self.directory is not None:
                    write_settings(self.directory, {**self.s.to_dict(), "probe": self.kind, **self.extra}, self.s.digest)
                self.journal.fingerprint = self.s.digest
            self.game = Game(self.s, self.tpl, None, self.client, self.journal.open(), imported=self.imported)
            self.ss = self.s.seed_sequence()
        except BaseException:
            await self._ep.__aexit__(None, None, None)
            raise
        self.t0 = time.perf_counter()
        return self

    async def __aexit__(self, *exc):
        self.journal.close()
        await self._ep.__aexit__(*exc)

    @property
    def llm_calls(self) -> int:
        return jr.count(self.journal.records, jr.CALL)

    def draws(self, index: int):
        g = np.random.Generator(np.random.PCG64(np.random.SeedSequence(
            self.ss.entropy, spawn_key=tuple(self.ss.spawn_key) + (index,))))
        order = g.permutation(len(self.s.names))
        return order, float(g.random()), int(g.integers(0, 2**31 - 1))

    async def decide(self, key: str, index: int, memory, order=None) -> jr.Decision:
        """One decision (cached by ``key`` in the journal); ``order`` overrides the drawn one."""
        if key in self.done:
            return self.done[key]
        o, u, seed = self.draws(index)
        if order is not None:
            o = order
        side = (await self.game.decide(0, index, 0, memory, o, u, seed)).with_order(o)
        self.journal.write(jr.probe_record(key, side), sync=True)
        self.done[key] = side
        return side

    async def run_all(self, jobs, desc: str):
        """Run ``(key, index, memory, order)`` jobs concurrently (bounded by the client)."""
        pbar = None
        if self.progress:
            from normlab._display import tqdm

            pbar = tqdm(total=len(jobs), desc=desc, leave=False, dynamic_ncols=True)

        async def one(job):
            side = await self.decide(*job)
            if pbar is not None:
                pbar.update(1)
            return side

        try:
            # the semaphore lives in the client; gather in slices to keep memory flat
            out = []
            step = max(8, 4 * self.endpoint.concurrency)
            for k in range(0, len(jobs), step):
                out.extend(await asyncio.gather(*(one(j) for j in jobs[k:k + step])))
            return out
        finally:
            if pbar is not None:
                pbar.close()
