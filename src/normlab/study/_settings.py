"""The study's settings: what the design fixes before anything runs (:class:`StudySettings`), checked
in one place, stored in ``OUT/study.json`` and compared on every rerun (a study resumes only with the
settings it was registered with).

A small leaf of the study package: it imports nothing else of the package.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from normlab._validate import check_int, check_out_dir
from normlab.schema import validate_names
from normlab.user_files import read_user_json

__all__ = ["StudySettings", "STUDY_DEFAULTS", "MARKER", "STAGES", "STAGE_MODES", "SAMPLING_KEYS", "FLIP_BAND",
           "seed_int", "check_directory", "check_stored"]

#: Marker of a study directory: the settings and the seed (written at the first start).
MARKER = "study.json"
#: The stages, in the order they run; each runs once and is journaled in ``OUT/stages.jsonl``.
STAGES = ("measure", "probe", "register", "populations", "committed", "exact", "tip", "score", "report")
#: How each stage reaches the model (printed in the plan).
STAGE_MODES = {
    "measure": "exact (strategy table, memories <= 1) + sample (one timed population)",
    "probe": "exact (next-token probabilities of every memory state, both name orders) + jitter re-asks",
    "register": "theory only (no request): predictions written to predictions.json before any population",
    "populations": "sample (the paper's protocol: generate, parse, re-ask)",
    "committed": "sample (committed-minority runs, the full grid in one direction)",
    "exact": "exact (the same designs answered from the probe's cache: 0 requests; the consistency check)",
    "tip": "sample (adaptive committed-minority search, live)",
    "score": "theory only (no request): scores, rivals, coverage, adequacy",
    "report": "no request: figures, report.html, summary.json",
}
#: Sampling keys a study passes to every probe and run (the runner's; ``mode`` is the study's per stage).
SAMPLING_KEYS = ("template", "temperature", "top_k", "max_tokens", "top_logprobs", "max_reasks", "prefill",
                 "multi_token", "wrap", "top_p", "min_p", "parse")
#: Predicted per-run flip probabilities between these bounds mark a committed count that "matters".
FLIP_BAND = (0.05, 0.95)

#: Defaults of :func:`normlab.study.run_study` and ``normlab study`` (a small study: see README for
#: the size chosen for Qwen2.5-Coder-1.5B on 2 cores).
STUDY_DEFAULTS = {
    "names": ("X", "Y"), "n_agents": 4, "memory": 1, "populations": 20, "max_rounds": 40, "runs_per_count": 4,
    "window": 20, "max_counts": 3, "tip_runs": 8, "n_draws": 200, "jitter_states": 8, "measure_interactions": 12,
    "seed": 1,
}


@dataclass(frozen=True)
class StudySettings:
    """The design of a blind study, fixed before it runs.

    Attributes
    ----------
    names : tuple of str
        The two-name pool (the runs show each player both orders at random, the authors' protocol).
    n_agents, memory : int
        Population size ``N`` (3..12) and memory length ``H`` (1..3).
    populations : int
        Populations played from empty memories in sample mode (the issue asks for at least 20).
    max_rounds : int
        Cap of a population in rounds (a run without a ``3N`` success streak by then: no consensus).
    runs_per_count : int
        Committed-minority runs per direction and count (``R``).
    window : int
        Rounds of a committed run (its cap), of the per-run flip reading and of the published rule.
    max_counts : int
        Most committed counts tested against the convention that is not searched (the counts whose
        predicted flip probability lies in :data:`FLIP_BAND`, and one either side).
    tip_runs : int
        Committed runs the tip search may play (0: no tip stage).
    n_draws : int
        Table draws of every prediction.
    jitter_states : int
        Prompts of the probe re-asked without normlab's cache to measure the endpoint's logprob jitter.
    measure_interactions : int
        Interactions of the timed sample-mode population of the first stage.
    seed : int
        Seed of every run and simulation.
    sampling : dict
        Runner settings (template, temperature, top_k, max_tokens, max_reasks, prefill, ...).
    """

    names: tuple = STUDY_DEFAULTS["names"]
    n_agents: int = STUDY_DEFAULTS["n_agents"]
    memory: int = STUDY_DEFAULTS["memory"]
    populations: int = STUDY_DEFAULTS["populations"]
    max_rounds: int = STUDY_DEFAULTS["max_rounds"]
    runs_per_count: int = STUDY_DEFAULTS["runs_per_count"]
    window: int = STUDY_DEFAULTS["window"]
    max_counts: int = STUDY_DEFAULTS["max_counts"]
    tip_runs: int = STUDY_DEFAULTS["tip_runs"]
    n_draws: int = STUDY_DEFAULTS["n_draws"]
    jitter_states: int = STUDY_DEFAULTS["jitter_states"]
    measure_interactions: int = STUDY_DEFAULTS["measure_interactions"]
    seed: int = STUDY_DEFAULTS["seed"]
    sampling: dict = field(default_factory=dict)

    def __post_init__(self):
        names = self.names
        if isinstance(names, str):
            names = [x.strip() for x in names.split(",")]
        names = validate_names(list(names))
        if len(names) != 2:
            raise ValueError(f"the study plays the paper's two-name game; got {len(names)} names {list(names)}")
        checks = {"n_agents": (3, 12), "memory": (1, 3), "populations": (1, 1000), "max_rounds": (5, 10_000),
                  "runs_per_count": (1, 100), "window": (3, 1000), "max_counts": (1, 11), "tip_runs": (0, 1000),
                  "n_draws": (20, 100_000), "jitter_states": (0, 1000), "measure_interactions": (1, 10_000)}
        for name, (lo, hi) in checks.items():
            object.__setattr__(self, name, check_int(getattr(self, name), name.replace("_", "-"), lo, hi))
        if isinstance(self.seed, bool) or not isinstance(self.seed, (int, np.integer)):
            raise TypeError(f"seed must be an int; got {type(self.seed).__name__}")
        sampling = dict(self.sampling or {})
        bad = sorted(set(sampling) - set(SAMPLING_KEYS))
        if bad:
            raise TypeError(f"unknown sampling setting(s) {bad}; allowed: {list(SAMPLING_KEYS)}")
        if "mode" in sampling:
            raise TypeError("the study fixes each stage's mode (the probe exact, the runs sample and their exact twins)")
        object.__setattr__(self, "names", tuple(names))
        object.__setattr__(self, "seed", int(self.seed))
        object.__setattr__(self, "sampling", sampling)

    # ------------------------------------------------------------------ readings
    @property
    def population_cap(self) -> int:
        """Interactions of a population at most."""
        return self.max_rounds * self.n_agents

    @property
    def committed_cap(self) -> int:
        """Interactions of a committed-minority run at most (``window`` rounds)."""
        return self.window * self.n_agents

    def exact_sampling(self) -> dict:
        """The sampling settings of the exact probe (no sample-only keys)."""
        return {k: v for k, v in self.sampling.items() if k not in ("top_p", "min_p", "parse")}

    def to_dict(self) -> dict:
        d = dataclasses.asdict(self)
        d["names"] = list(self.names)
        return d

    @classmethod
    def from_dict(cls, d: dict) -> "StudySettings":
        known = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: (tuple(v) if k == "names" else v) for k, v in d.items() if k in known})

    def differences(self, other: "StudySettings") -> list[str]:
        """The settings that differ from ``other`` (``name: stored -> given``)."""
        a, b = json.loads(json.dumps(self.to_dict(), default=str)), json.loads(json.dumps(other.to_dict(), default=str))
        return [f"{k}: {a[k]!r} -> {b.get(k)!r}" for k in a if a[k] != b.get(k)]


def seed_int(rng) -> int:
    """An int seed (fresh entropy for None)."""
    if rng is None:
        return int(np.random.SeedSequence().entropy % (2**63))
    if isinstance(rng, (int, np.integer)) and not isinstance(rng, bool):
        return int(rng)
    raise TypeError(f"seed must be an int or None; got {type(rng).__name__}")


def check_directory(out) -> Path:
    """``out`` as a Path, refused when it cannot be a study directory: a file, or a non-empty
    directory that holds no study (a lone ``study.json.tmp`` is a first write cut short)."""
    out = Path(out)
    check_out_dir(out)
    if out.exists() and not (out / MARKER).exists() and any(p.name not in (MARKER + ".tmp", ".normlab.lock")
                                                              for p in out.iterdir()):
        raise ValueError(f"--out {out} is not empty and holds no normlab study; choose an empty or new directory")
    return out


def check_stored(out: Path, st: StudySettings, model: dict) -> dict | None:
    """The settings stored in ``OUT/study.json`` (None for a new directory); other settings or another
    model than the stored ones are refused: the predictions are registered for those."""
    f = Path(out) / MARKER
    if not f.exists():
        return None
    stored = read_user_json(f)
    diff = StudySettings.from_dict(stored["settings"]).differences(st)
    if stored.get("model") != model:
        diff.append(f"model: {stored.get('model')} -> {model}")
    if diff:
        raise ValueError(f"{out} holds a study with other settings ({'; '.join(diff)}); its predictions are "
                         "registered for those: rerun with them, or start a new study in a new directory")
    return stored
