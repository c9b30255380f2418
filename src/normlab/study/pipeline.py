"""``normlab study``: a blind test of normlab's predictions on one model, written down before it is run.

Stages, each run once and journaled in ``OUT/stages.jsonl`` (a rerun resumes at the first stage not
done; a stage that is done never runs again):

1. ``measure`` -- the timed first stage: the exact strategy table of memories <= 1 and one short
   sample-mode population on the study's own prompts; their requests give the cost per decision in
   each mode (``--dry-run`` then prints the time of every stage).
2. ``probe`` -- the exact strategy table of every memory state, both name orders, and the endpoint's
   logprob jitter.
3. ``register`` -- (a) the predictions from the probed table (convention and its probability,
   rounds to consensus, P(flip) per count, both critical masses, each with its interval for the
   design about to be run), the design itself (counts, runs per count, cap, stop rule, the tip
   search's budget: nothing an outcome sets), the normlab version and commit, the model's identity
   (GGUF SHA-256), the probe table's hash and the time, in ``predictions.json``; its SHA-256 in
   ``predictions.sha256`` and the manifest. Every later stage refuses to run if it changed.
4. ``populations`` -- (b) the populations in the paper's sample mode (answers generated, parsed,
   re-asked; each player sees its own shuffle of the pool, so both name orders).
5. ``committed`` -- (b) the committed-minority runs: the full grid of counts against the convention
   the probe predicts, the counts that matter against the other.
6. ``exact`` -- the same runs in exact mode with the same seeds, answered from the probe's cache
   (0 requests): the consistency check of the theory and the runner.
7. ``tip`` -- (d) the adaptive search (``normlab tip``) in sample mode against the searched
   convention, compared with the full grid played once.
8. ``score`` -- (c) every prediction against what happened, beside the rivals (direction rule,
   base rate, committed-fraction logistic, coin): Brier and log scores, coverage, and the
   adequacy check that explains what missed.
9. ``report`` -- ``report.html``, ``summary.json``, the figures and ``tables/``.

References
----------
A. Flint Ashery, L. M. Aiello, A. Baronchelli, "Emergent social conventions and collective bias in
LLM populations", Sci. Adv. 11, eadu9368 (2025): Figs. 1-3, Table S3, Methods.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from normlab import __version__
from normlab.llm_runs.backend import ctx_for_prompt
from normlab.llm_runs.journal import DirectoryLock, write_json_atomic
from normlab.llm_runs.runner import longest_prompt_bytes, make_settings
from normlab.user_files import read_user_json

from ._model import ModelHandle, prepare
from ._play import (StudyRun, committed_stage, committed_tests, exact_stage, measure_stage, populations_stage,
                    probe_dirs, probe_stage, register_stage, tip_stage)
from ._plan import estimate_study
from ._register import verify_registration
from ._score import score_stage
from ._settings import MARKER, STAGES, StudySettings, check_directory, check_stored
from ._stages import StageBook, now_iso, write_manifest

__all__ = ["run_study", "estimate_study", "StudyResult", "StudySettings", "prepare", "study_ctx"]


@dataclass(frozen=True)
class StudyResult:
    """What ``normlab study`` produced.

    Attributes
    ----------
    directory : pathlib.Path
        ``OUT``: ``predictions.json`` (+ ``.sha256``), ``stages.jsonl``, ``manifest.json``,
        ``report.html``, ``summary.json``, ``figures/``, ``tables/``, ``llm/`` (every request).
    stages : dict
        Stage -> its ``done`` record (timings, requests, a small result); stages not run yet are absent.
    summary : dict or None
        ``summary.json`` (None until the report stage has run).
    """

    directory: Path
    stages: dict
    summary: dict | None = None

    @property
    def report(self) -> Path:
        return self.directory / "report.html"

    @property
    def finished(self) -> bool:
        return "report" in self.stages

    def to_frame(self) -> pd.DataFrame:
        """Predicted vs observed, one row per registered prediction (empty before scoring)."""
        f = self.directory / "tables" / "predicted_vs_observed.parquet"
        return pd.read_parquet(f) if f.exists() else pd.DataFrame()

    def __repr__(self) -> str:
        done = [s for s in STAGES if s in self.stages]
        if self.summary:
            g = self.summary["glance"]
            return (f"StudyResult({self.summary['model']['label']}: {g['inside']} of {g['checked']} predictions inside "
                    f"their registered interval; report: {self.report})")
        return f"StudyResult({self.directory}: stages done {', '.join(done) or 'none'})"


def study_ctx(st: StudySettings) -> int:
    """KV tokens per slot for the longest prompt any stage sends, with its longest answer."""
    need = []
    for mode in ("exact", "sample"):
        kw = st.sampling if mode == "sample" else {**st.exact_sampling(), "prefill": True}
        s, tpl, _ = make_settings(st.n_agents, st.memory, st.names, max_interactions=1, mode=mode, embedded=True, **kw)
        need.append(ctx_for_prompt(longest_prompt_bytes(s, tpl), 1 if mode == "exact" else s.max_tokens))
    return max(need)


def run_study(out, settings: StudySettings | None = None, *, embedded_model: str | None = None, endpoint=None,
              model_file=None, until: str | None = None, progress: bool = True, verbose: bool = True,
              command: str | None = None) -> StudyResult:
    """Run (or resume) the blind study in ``out``.

    Parameters
    ----------
    out : path
        The study directory (created). A rerun resumes at the first stage not done.
    settings : StudySettings, optional
        The design (default :data:`~normlab.study.STUDY_DEFAULTS`). A directory keeps the settings it
        was started with: others are refused.
    embedded_model : str, optional
        A registered embedded model (``smollm2``, ...) or the path of a GGUF file, served in-process
        for the whole study; default: the endpoint of ``endpoint`` / ``NORMLAB_LLM_BASE_URL``, else
        ``smollm2``.
    endpoint : EndpointConfig, optional
        Endpoint, retries, prices and ``budget_tokens`` / ``budget_usd`` (the study's budget:
        everything journaled under ``OUT/llm``).
    model_file : path, optional
        With an endpoint: the GGUF file it serves (its SHA-256 goes into ``predictions.json``).
    until : str, optional
        Stop after this stage (e.g. ``"measure"``: the speed for ``--dry-run``; ``"register"``: the
        predictions written, nothing played).
    progress, verbose : bool
        Progress bars; the plan and each stage's result on stderr.
    command : str, optional
        The command line (recorded in the manifest).

    Returns
    -------
    StudyResult

    Raises
    ------
    ValueError
        Bad settings, a directory holding something else or another study's settings, or a
        registration that changed (``predictions.json`` edited: the study refuses to go on).
    normlab.llm_runs.BudgetExhausted
        The budget is reached (completed work kept; a larger budget continues).
    normlab.llm_runs.EndpointError
        The endpoint is down.
    """
    st, endpoint, choice = prepare(settings, embedded_model, endpoint, model_file)
    if until is not None and until not in STAGES:
        raise ValueError(f"until must be one of {list(STAGES)}; got {until!r}")
    out = check_directory(out)
    echo = (lambda msg: print(msg, file=__import__("sys").stderr, flush=True)) if verbose else (lambda msg: None)
    with DirectoryLock(out):
        _marker(out, st, choice)
        book = StageBook(out)
        session = f"{now_iso()}-{os.getpid()}"
        m = write_manifest(out, book, {})
        sessions = list(m.get("sessions", [])) + [{"started": now_iso(), "command": command, "pid": os.getpid(),
                                                   "normlab_version": __version__}]
        write_manifest(out, book, {"sessions": sessions, "normlab_version": __version__})
        echo(f"normlab study: {choice.label}, N = {st.n_agents}, H = {st.memory}, names {','.join(st.names)}, "
             f"{st.populations} populations; directory {out}")
        with ModelHandle(choice, endpoint, ctx=study_ctx(st), out=out) as handle:
            run = StudyRun(st=st, out=out, model=handle, book=book, echo=echo, progress=progress, session=session)
            _run_stages(run, until, echo)
        summary = None
        if (out / "summary.json").exists() and book.done("report"):
            summary = read_user_json(out / "summary.json")
        return StudyResult(directory=out, stages={r["stage"]: r for r in book.timings()}, summary=summary)


def _marker(out: Path, st: StudySettings, choice) -> None:
    """``OUT/study.json``: written at the first start; a rerun with other settings or model is refused."""
    model = {"embedded": choice.embedded, "alias": choice.alias}
    if check_stored(out, st, model) is not None:
        return
    out.mkdir(parents=True, exist_ok=True)
    write_json_atomic(out / MARKER, {"schema": "normlab.study/1", "normlab_version": __version__, "created": now_iso(),
                                     "settings": st.to_dict(), "model": model})


def _run_stages(run: StudyRun, until, echo) -> None:
    book, out, llm = run.book, run.out, run.llm
    results = {r["stage"]: r.get("result") for r in book.timings()}
    reg = None
    t_all = time.perf_counter()

    def stage(name, dirs, fn):
        if name in results:
            return results[name]
        echo(f"stage {name}: " + ("resuming" if any(r["stage"] == name for r in book.records()) else "starting"))
        with book.run(name, dirs, session=run.session) as row:
            row["result"] = fn()
        results[name] = book.done(name)["result"]
        extra = {}
        if name == "register":
            extra = {"predictions_sha256": results[name]["sha256"], "predictions_registered": book.done(name)["time"]}
        write_manifest(out, book, extra)
        return results[name]

    for name in STAGES:
        if name == "measure":
            stage(name, [llm / "probe-H1", llm / "measure-sample"], lambda: measure_stage(run))
        elif name == "probe":
            stage(name, probe_dirs(run.st, llm), lambda: probe_stage(run))
        elif name == "register":
            stage(name, [], lambda: register_stage(run, results["probe"]))
            reg = verify_registration(out, results["register"]["sha256"])
        else:
            reg = verify_registration(out, results["register"]["sha256"])  # refuse to go on after an edit
            tests = committed_tests(reg)
            if name == "populations":
                stage(name, [llm / "populations-sample"], lambda: populations_stage(run, "sample"))
            elif name == "committed":
                stage(name, [llm / "committed-sample"], lambda: committed_stage(run, tests, "sample"))
            elif name == "exact":
                stage(name, [llm / "populations-exact", llm / "committed-exact"], lambda: exact_stage(run, tests))
            elif name == "tip":
                stage(name, [llm / "tip-sample"], lambda: tip_stage(run, reg))
            elif name == "score":
                stage(name, [], lambda: _score_summary(run, reg, results["tip"]))
            elif name == "report":
                from .report import write_report

                stage(name, [], lambda: write_report(run, reg, results))
        if until == name:
            echo(f"normlab study: stopped after stage {name}, as asked (--until); the same command without --until "
                 "goes on")
            return
    echo(f"normlab study: done ({time.perf_counter() - t_all:.0f} s this session); report: {out / 'report.html'}")


def _score_summary(run, reg, tip_info) -> dict:
    """The score stage: everything written to ``OUT/stages/score.json``; the record keeps the headline."""
    res = score_stage(run, reg, tip_info)
    write_json_atomic(run.stages / "score.json", res)
    return {"inside": res["inside"], "outside": res["outside"], "checked": res["checked"],
            "exact_inside": res["exact_inside"], "exact_checked": res["exact_checked"]}

