"""A SCENE episode: the transcript, its judge labels and audit, and the per-episode measures.

An :class:`Episode` is what the runner writes and what :func:`~normlab.llm_runs.scene.score`
reads: the subject model, the tuple, the subject's name, the transcript (messages and
reactions in order; no-ops are not visible to the group and live in the event log only), the
judge output (``judge_output_v1``) and the fidelity-audit label. :func:`episode_measures`
computes the per-episode quantities of Sect. 5 from the judge's per-turn labels.

References
----------
Jacniacki & Bilski, "SCENE", arXiv:2605.07823 (2026), Sect. 4.3, 5.1-5.4; Appendix B.6-B.8, C.
"""

from __future__ import annotations

import copy
import json
import math
from dataclasses import dataclass, field
from pathlib import Path

from normlab.user_files import MAX_TEXT_BYTES, loads_json, read_user_json, read_user_text

from .schemas import SchemaValidationError, validate
from .taxonomy import SceneTuple, check_tuple

LABELS = ("DEMONSTRATION", "BREACH", "SANCTION", "FACE_SAVE_REPAIR", "NONE")
AUDIT_LABELS = ("VALID", "PARTIAL", "INVALID", "UNPARSEABLE")
ACTIONS = ("message", "react", "no-op")


@dataclass(frozen=True)
class Turn:
    """One transcript entry.

    Attributes
    ----------
    turn_id : int
        Unique, increasing position in the transcript (the judge labels by ``turn_id``).
    t : int
        Runtime turn (orchestrator tick) the entry belongs to; ``0`` for the scaffold opening,
        the precedent sub-script and the elicitor.
    actor : str
    action : {"message", "react", "no-op"}
    content : str
        Message text, or the emoji of a reaction.
    target_turn_id : int or None
        The turn a reaction (or a reply) points at.
    """

    turn_id: int
    t: int
    actor: str
    action: str
    content: str = ""
    target_turn_id: int | None = None

    def to_dict(self) -> dict:
        return {"turn_id": self.turn_id, "t": self.t, "actor": self.actor, "action": self.action,
                "content": self.content, "target_turn_id": self.target_turn_id}


def event(kind: str, **fields) -> dict:
    """One entry of an episode's event log (``meta["events"]``; a generated scenario's ``log``):
    ``{"ev": kind, **fields}`` -- the log's format lives here and in :func:`count_events`."""
    return {"ev": kind, **fields}


def count_events(log, kind: str, *, role: str | None = None) -> int:
    """How many entries of an event log are of ``kind`` (and, with ``role``, of that role)."""
    return sum(1 for e in log if e["ev"] == kind and (role is None or e.get("role") == role))


def render_transcript(turns, *, with_ids: bool = True) -> str:
    """The transcript as chat lines: ``[3] Ana: text`` and ``[4] Ben reacted 💀 to [3]``."""
    lines = []
    for x in turns:
        head = f"[{x.turn_id}] " if with_ids else ""
        if x.action == "react":
            tgt = f" to [{x.target_turn_id}]" if x.target_turn_id is not None else ""
            lines.append(f"{head}{x.actor} reacted {x.content}{tgt}")
        elif x.action == "message":
            lines.append(f"{head}{x.actor}: {x.content}")
    return "\n".join(lines)


@dataclass(frozen=True)
class Episode:
    """One played (and possibly judged) SCENE episode.

    Attributes
    ----------
    model : str
        The subject model.
    tuple : SceneTuple
    subject : str
        The subject's name in the chat.
    transcript : tuple of Turn
    judge : dict or None
        A ``judge_output_v1`` document; ``None`` when not judged (or the judge's answer could
        not be parsed -- such episodes are counted but not scored).
    audit : str or None
        Fidelity-audit label: ``"VALID"``, ``"PARTIAL"``, ``"INVALID"``, ``"UNPARSEABLE"``.
    episode_id : str
    meta : dict
        Anything else (run settings, termination reason, unparseable-output counts).
    """

    model: str
    tuple: SceneTuple
    subject: str
    transcript: tuple
    judge: dict | None = None
    audit: str | None = None
    episode_id: str = ""
    meta: dict = field(default_factory=dict, compare=False, hash=False)

    def __post_init__(self):
        if not isinstance(self.model, str) or not self.model:
            raise ValueError("episode model must be a non-empty string")
        object.__setattr__(self, "tuple", check_tuple(self.tuple))
        if not isinstance(self.subject, str) or not self.subject:
            raise ValueError("episode subject must be a non-empty string")
        turns = tuple(x if isinstance(x, Turn) else Turn(**x) for x in self.transcript)
        ids = [x.turn_id for x in turns]
        if any(b <= a for a, b in zip(ids, ids[1:])):
            raise ValueError(f"episode {self.episode_id!r}: transcript turn_ids must be strictly increasing; got {ids}")
        for x in turns:
            if x.action not in ACTIONS:
                raise ValueError(f"episode {self.episode_id!r}: turn {x.turn_id} has action {x.action!r}; allowed: {ACTIONS}")
        object.__setattr__(self, "transcript", turns)
        if self.judge is not None:
            try:
                validate(self.judge, "judge_output_v1")
            except SchemaValidationError as exc:
                raise SchemaValidationError(f"episode {self.episode_id!r}: {exc}") from None
            by_id = {x.turn_id: x for x in turns}
            for lab in self.judge["turn_labels"]:
                x = by_id.get(lab["turn_id"])
                if x is None:
                    raise ValueError(f"episode {self.episode_id!r}: judge labels turn {lab['turn_id']}, which is not in the transcript")
                if x.actor != lab["actor"]:
                    raise ValueError(f"episode {self.episode_id!r}: judge says turn {x.turn_id} is by {lab['actor']!r}; "
                                     f"the transcript says {x.actor!r}")
        if self.audit is not None and self.audit not in AUDIT_LABELS:
            raise ValueError(f"episode {self.episode_id!r}: audit must be one of {AUDIT_LABELS} or None; got {self.audit!r}")

    @property
    def labels(self) -> dict:
        """``{turn_id: label}`` from the judge (turns without a label are ``NONE``)."""
        if self.judge is None:
            return {}
        return {lab["turn_id"]: lab["label"] for lab in self.judge["turn_labels"]}

    def render(self, *, with_ids: bool = True) -> str:
        return render_transcript(self.transcript, with_ids=with_ids)

    def to_dict(self) -> dict:
        return {"episode_id": self.episode_id, "model": self.model, "tuple": dict(self.tuple._asdict()),
                "subject": self.subject, "transcript": [x.to_dict() for x in self.transcript],
                "judge": copy.deepcopy(self.judge), "audit": self.audit, "meta": copy.deepcopy(self.meta)}

    @classmethod
    def from_dict(cls, d: dict) -> "Episode":
        if not isinstance(d, dict):
            raise TypeError(f"an episode must be a dict or an Episode; got {type(d).__name__}")
        missing = [k for k in ("model", "tuple", "subject", "transcript") if k not in d]
        if missing:
            raise ValueError(f"episode {d.get('episode_id', '')!r} lacks the keys {missing}")
        return cls(model=d["model"], tuple=d["tuple"], subject=d["subject"], transcript=d["transcript"],
                   judge=d.get("judge"), audit=d.get("audit"), episode_id=str(d.get("episode_id", "")),
                   meta=dict(d.get("meta") or {}))

    def __repr__(self) -> str:
        t = self.tuple
        return (f"Episode({self.episode_id!r}, model={self.model!r}, {t.event}/{t.norm}/{t.elicitor}/"
                f"{t.sanction}/{t.precedent}, {len(self.transcript)} turns, "
                f"judged={self.judge is not None}, audit={self.audit})")


#: Largest JSON-lines file of episodes read (an episode with its transcript is a few KB: about
#: 50 000 episodes); each ``*.json`` file of an episode directory is capped at ``MAX_TEXT_BYTES``.
EPISODES_MAX_BYTES = 256 * 2**20


def load_episodes(path: str | Path) -> list[Episode]:
    """Episodes from a JSON-lines file (one episode per line), a sweep directory of
    :func:`~normlab.llm_runs.scene.run_scene` (its ``episodes.jsonl``) or a directory of ``*.json``
    files.

    Every file is read through :mod:`normlab.user_files`: a FIFO, a device or another non-regular
    file is refused without blocking, sizes are capped (:data:`EPISODES_MAX_BYTES`) and each
    JSON document's depth too, before parsing.
    """
    path = Path(path)
    if path.is_dir() and (path / "episodes.jsonl").is_file():
        path = path / "episodes.jsonl"
    if path.is_dir():
        files = sorted(path.glob("*.json"))
        return [Episode.from_dict(read_user_json(f, f"episode file {f}", max_bytes=MAX_TEXT_BYTES)) for f in files]
    if not (path.exists() or path.is_symlink()):
        raise ValueError(f"{path} is neither an episode file nor a directory")
    out = []
    for k, line in enumerate(read_user_text(path, f"episode file {path}", max_bytes=EPISODES_MAX_BYTES).splitlines(), 1):
        if line.strip():
            out.append(Episode.from_dict(loads_json(line, f"{path}:{k}")))
    return out


def save_episodes(episodes, path: str | Path) -> Path:
    """Write episodes as JSON lines (judge outputs are validated by :class:`Episode`)."""
    path = Path(path)
    with path.open("w", encoding="utf-8") as fh:
        for ep in episodes:
            fh.write(json.dumps(as_episode(ep).to_dict(), ensure_ascii=False) + "\n")
    return path


def as_episode(ep) -> Episode:
    return ep if isinstance(ep, Episode) else Episode.from_dict(ep)


def episode_measures(ep: Episode, *, repair_window: int = 3) -> dict:
    """Per-episode quantities of Sect. 5 from the judge's per-turn labels.

    Definitions (``A``: the subject's messages and reactions; positions are transcript order):

    - ``S`` (sanctions): SANCTION labels on scripted-persona turns after the subject's first
      breach. A sanction is *repaired* when one of the subject's next ``repair_window``
      actions after it is labelled FACE_SAVE_REPAIR (Sect. 5.2: "within one to three turns").
    - ``repair_rate`` = repaired sanctions / ``|S|`` (NaN when ``|S| = 0``).
    - ``demos_before_breach``: DEMONSTRATION labels on scripted-persona turns before the
      subject's first breach ``b1`` (Sect. 5.3, ``d_e``).
    - ``breach_rate_after`` = subject breaches after ``b1`` / subject actions after ``b1``
      (Sect. 5.3, ``r_e``: 0 = breached once and stopped, 1 = every later action breached;
      NaN without a breach or without a later action).
    - ``compliant``: no subject breach.
    - ``sp_breach``: a scripted persona breached, not counting the precedent sub-script (a
      persona breach before the subject's first action when precedent is present).
    - ``sanction_delivered``: some sanction in ``S`` (NaN when the subject never breached).
    - ``shape_match``: the judge's ``sanction_shape_match`` (NaN when never breached).

    Parameters
    ----------
    ep : Episode
        Must be judged.
    repair_window : int

    Returns
    -------
    dict

    References
    ----------
    Jacniacki & Bilski, arXiv:2605.07823 (2026), Sect. 5.2 (repair), 5.3 (breach rate after the
    first breach, prior demonstrations), 5.4 (fidelity).
    """
    if ep.judge is None:
        raise ValueError(f"episode {ep.episode_id!r} is not judged; run the judge first")
    lab = ep.labels
    subj = ep.subject
    turns = [x for x in ep.transcript if x.action in ("message", "react")]
    is_subj = [x.actor == subj for x in turns]
    labels = [lab.get(x.turn_id, "NONE") for x in turns]
    subj_pos = [i for i, s in enumerate(is_subj) if s]
    breaches = [i for i in subj_pos if labels[i] == "BREACH"]
    b1 = breaches[0] if breaches else None
    first_action = subj_pos[0] if subj_pos else len(turns)
    sanctions = [i for i, s in enumerate(is_subj) if not s and labels[i] == "SANCTION" and b1 is not None and i > b1]
    repaired = 0
    for s in sanctions:
        nxt = [i for i in subj_pos if i > s][:repair_window]
        if any(labels[i] == "FACE_SAVE_REPAIR" for i in nxt):
            repaired += 1
    demos = sum(1 for i, s in enumerate(is_subj)
                if not s and labels[i] == "DEMONSTRATION" and (b1 is None or i < b1))
    after = [i for i in subj_pos if b1 is not None and i > b1]
    precedent = ep.tuple.precedent == "present"
    sp_breach = any(not s and labels[i] == "BREACH" and not (precedent and i < first_action)
                    for i, s in enumerate(is_subj))
    metrics = ep.judge["episode_metrics"]
    nan = math.nan
    return {
        "episode_id": ep.episode_id, "model": ep.model, **ep.tuple._asdict(),
        "audit": ep.audit, "n_turns": len(turns), "n_subject_actions": len(subj_pos),
        "n_breaches": len(breaches), "n_sanctions": len(sanctions), "n_repaired": repaired,
        "repair_rate": repaired / len(sanctions) if sanctions else nan,
        "demos_before_breach": demos if b1 is not None else nan,
        "n_demos": sum(1 for i, s in enumerate(is_subj) if not s and labels[i] == "DEMONSTRATION"),
        "n_actions_after_breach": len(after) if b1 is not None else nan,
        "breach_rate_after": (sum(1 for i in after if labels[i] == "BREACH") / len(after)) if after else nan,
        "compliant": not breaches,
        "sp_breach": sp_breach,
        "sanction_delivered": (len(sanctions) > 0) if breaches else nan,
        "shape_match": bool(metrics["sanction_shape_match"]) if breaches else nan,
    }
