"""The result of :func:`~normlab.llm_runs.run_game`: the tidy log, the calls, the ledger."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from normlab._display import html_card, plain, plotting, short_repr
from normlab.schema import GameLog


@dataclass(frozen=True)
class LLMRunResult:
    """Runs of the LLM naming game.

    The run table is held; the decisions, calls and ledger tables are read from the run
    directory's Parquet files when first asked for (a run of a million decisions costs no
    memory until its decisions are wanted), or from memory for a run without a directory.

    Attributes
    ----------
    log : normlab.schema.GameLog
        Decisions (two rows per interaction, schema columns plus ``names_shown``,
        ``prompt_hash``, ``p_name``, ``covered_mass``, ``probs`` (pool order), ``p_approx``
        (exact mode: a normalising constant or a branch was approximated), ``cache_hit``, ``llm_calls``,
        ``invalid_reason``, ``raw_text``, ``latency_s``, ``prompt_tokens``, ``completion_tokens``,
        ``group`` (the agent's group; ``"all"`` in a homogeneous population), ``model``)
        and runs (schema columns plus ``mode``, ``template``, ``stop``, ``stop_reason``,
        ``finished``, ``decisions`` (uncommitted decisions), ``llm_calls``, ``cache_hits``,
        ``invalid``, ``prompt_tokens``, ``completion_tokens``, ``cost_usd``,
        ``memory_consensus`` (the theory's consensus reading: the name every uncommitted memory first held ``H`` successes on, or None), ``flipped``, ``flip_time``,
        ``mean_latency_s``). ``consensus`` is the name on which >= 95% of the last ``3N``
        interactions succeeded with >= 95% of the uncommitted productions (else ``None``).
        Read from ``decisions.parquet`` and ``runs.parquet`` (:meth:`normlab.schema.GameLog.read_parquet`).
    calls : pandas.DataFrame
        One row per LLM request: ``call``, ``run``, ``t``, ``agent``, ``purpose``, ``prompt_hash``,
        ``partial``, ``text``, ``top_logprobs`` (JSON), ``finish_reason``, tokens, ``latency_s``,
        ``attempts``, ``errors``.
    ledger : pandas.DataFrame
        The token/cost ledger, one row per request (:func:`build_ledger`).
    runs : pandas.DataFrame
        The run table (as in :attr:`log`), held in memory.
    settings : dict
        The run settings (see :class:`GameSettings`).
    directory : pathlib.Path or None
        Run directory (``settings.json``, ``journal.jsonl``, Parquet tables).
    elapsed : float
        Wall-clock seconds of this invocation.
    replayed : int
        Interactions replayed from the journal (resumption) rather than played now.
    stopped : str or None
        ``"budget"`` when a spending cap stopped this session (the runs left unfinished resume
        with a larger cap); ``None`` otherwise.
    totals : dict or None
        The ledger's totals (requests, tokens, cost; per group for a mixed population).
    groups : dict or None
        Per group of a mixed population: model, uncommitted decisions, invalid ones, names played.
    """

    runs: pd.DataFrame
    settings: dict
    directory: Path | None
    elapsed: float = 0.0
    replayed: int = 0
    stopped: str | None = None
    totals: dict | None = None
    groups: dict | None = None
    tables: dict = field(default_factory=dict, repr=False, compare=False)

    def _read(self, name: str) -> pd.DataFrame:
        src = self.tables.get(name)
        if src is None:
            src = self.directory / name
        else:
            src.seek(0)
        return pd.read_parquet(src)

    @property
    def log(self) -> GameLog:
        if "log" not in self.tables:
            self.tables["log"] = GameLog(self._read("decisions.parquet"), self._read("runs.parquet"))
        return self.tables["log"]

    @property
    def calls(self) -> pd.DataFrame:
        if "calls" not in self.tables:
            self.tables["calls"] = self._read("calls.parquet")
        return self.tables["calls"]

    @property
    def ledger(self) -> pd.DataFrame:
        if "ledger" not in self.tables:
            self.tables["ledger"] = self._read("ledger.parquet")
        return self.tables["ledger"]

    def to_frame(self) -> pd.DataFrame:
        """One row per run (the run table of :attr:`log`)."""
        return self.runs.copy()

    @property
    def finished(self) -> bool:
        return bool(self.runs["finished"].all())

    def summary(self) -> dict:
        """JSON-friendly summary (printed by ``normlab llm-run``)."""
        r = self.runs
        dec = int(r["decisions"].sum())
        calls = int(r["llm_calls"].sum())
        hits = int(r["cache_hits"].sum())
        out = {
            "model": self.settings.get("model"),
            "mode": self.settings.get("mode"),
            "kind": str(r["kind"].iloc[0]) if len(r) else None,
            "runs": int(len(r)),
            "finished": self.finished,
            "n_interactions": [int(x) for x in r["n_interactions"]],
            "stop_reasons": [x for x in r["stop_reason"]],
            "decisions": dec,
            "llm_calls": calls,
            "calls_per_decision": (calls / dec) if dec else None,
            "cache_hits": hits,
            "cache_hit_rate": (hits / dec) if dec else None,
            "invalid": int(r["invalid"].sum()),
            "reasks": int(r["reasks"].sum()),
            "wrap": self.settings.get("wrap"),
            "parse": self.settings.get("parse"),
            "max_reasks": self.settings.get("max_reasks"),
            "sampler": {k: self.settings.get(k) for k in ("temperature", "top_k", "top_p", "min_p", "max_tokens")},
            "consensus": [None if c is None else str(c) for c in r["consensus"]],
            "prompt_tokens": int(r["prompt_tokens"].sum()),
            "completion_tokens": int(r["completion_tokens"].sum()),
            "cost_usd": float(r["cost_usd"].sum()),
            "replayed_interactions": int(self.replayed),
            "elapsed_s": round(float(self.elapsed), 3),
        }
        if self.stopped:
            out["stopped"] = self.stopped
        if self.settings.get("groups") and self.groups is not None:
            out["groups"] = self.groups
        if self.settings.get("committed"):
            out["flipped"] = [bool(x) for x in r["flipped"]]
        if self.directory is not None:
            out["directory"] = str(self.directory)
            out["log"] = str(self.directory / "decisions.parquet")
            out["runs_table"] = str(self.directory / "runs.parquet")
            out["calls_table"] = str(self.directory / "calls.parquet")
            out["ledger"] = str(self.directory / "ledger.parquet")
            out["manifest"] = str(self.directory / "manifest.json")
        return plain(out)

    def __repr__(self) -> str:
        s, r = self.settings, self.runs
        cons = r["consensus"].astype(object).where(r["consensus"].notna(), "none").value_counts()
        return short_repr("LLMRunResult", s.get("model"), f"{s.get('mode')} mode",
                          f"{len(r)} runs of N={s.get('n_agents')}, H={s.get('memory')}, names {','.join(s.get('names', ()))}",
                          "consensus " + ", ".join(f"{k} {v}/{len(r)}" for k, v in cons.items()),
                          f"{int(r['decisions'].sum())} decisions", f"{int(r['llm_calls'].sum())} LLM calls",
                          f"{int(r['invalid'].sum())} invalid", "finished" if self.finished else "NOT finished",
                          f"{self.elapsed:.0f} s")

    def _repr_html_(self) -> str:
        s = self.summary()
        rows = [("runs", s["runs"]), ("decisions", s["decisions"]), ("LLM calls", s["llm_calls"]),
                ("calls per decision", s["calls_per_decision"]), ("cache hit rate", s["cache_hit_rate"]),
                ("invalid answers", s["invalid"]), ("re-asks", s["reasks"]),
                ("consensus per run", ", ".join("none" if c is None else c for c in s["consensus"]))]
        if "flipped" in s:
            rows.append(("flipped to the committed name", f"{sum(s['flipped'])}/{len(s['flipped'])} runs"))
        if self.stopped:
            rows.append(("stopped", f"{self.stopped} (a larger cap continues the runs)"))
        if "groups" in s:
            rows.append(("groups", "; ".join(f"{g}: {v['model']}, {v['decisions']} decisions"
                                              for g, v in s["groups"].items())))
        rows += [("tokens (prompt / completion)", f"{s['prompt_tokens']:,} / {s['completion_tokens']:,}"),
                 ("cost (USD)", s["cost_usd"]), ("elapsed (s)", s["elapsed_s"])]
        st = self.settings
        return html_card("LLMRunResult", rows, level=None,
                         subtitle=f"{st.get('model')}, {st.get('mode')} mode, N = {st.get('n_agents')}, "
                                  f"H = {st.get('memory')}, names {','.join(st.get('names', ()))}",
                         settings={"stop": st.get("stop"), "wrap": st.get("wrap"), "parse": st.get("parse"),
                                   "directory": s.get("directory")},
                         note=".plot() draws the success rate per round (kind='production' the shares); "
                              ".log holds the tidy tables.")

    @plotting
    def plot(self, kind: str = "success", *, name: str | None = None, ax=None):
        """Mean success rate (or production share of ``name``) per population round over the
        runs, with a 95% band (:meth:`normlab.schema.GameLog.plot`).

        Returns
        -------
        matplotlib.axes.Axes
        """
        ax = self.log.plot(kind, name=name, by=("model", "committed_count", "initial"), ax=ax)
        st = self.settings
        ax.set_title(f"{st.get('model')}, N = {st.get('n_agents')}, H = {st.get('memory')}", fontsize=9)
        return ax

    @classmethod
    def _contract_example(cls) -> "LLMRunResult":
        """One finished run of :meth:`GameLog._contract_example`, held in memory (no directory), with
        literal counts (``tests/umbrella/test_contracts.py``)."""
        log = GameLog._contract_example()
        runs = log.runs.assign(mode="exact", stop="streak", stop_reason="streak", finished=True, decisions=16,
                               llm_calls=5, cache_hits=11, invalid=0, reasks=0, prompt_tokens=900, completion_tokens=5,
                               cost_usd=0.0)
        settings = {"model": "stub-model", "mode": "exact", "n_agents": 4, "memory": 2, "names": ["A", "B"],
                    "stop": "streak", "wrap": None, "parse": "first", "max_reasks": 2, "committed": 0}
        return cls(runs=runs, settings=settings, directory=None, elapsed=1.5, tables={"log": log})
