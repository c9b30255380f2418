"""Lenient reading of weak models' answers in SCENE: the first JSON object of a text, persona and subject
actions (synonyms normalised, a message cut off by ``max_tokens`` kept), the judge's per-turn labels and
the episode metrics derived from them. What cannot be read is never guessed."""

from __future__ import annotations

import ast
import json
import re

from .episode import LABELS, Episode
from .taxonomy import TAXONOMY

_ACTION_SYNONYMS = {
    "message": "message", "msg": "message", "say": "message", "reply": "message", "send": "message",
    "send_message": "message", "text": "message", "respond": "message",
    "react": "react", "reaction": "react", "emoji": "react", "add_reaction": "react",
    "no-op": "no-op", "noop": "no-op", "no_op": "no-op", "none": "no-op", "silent": "no-op",
    "pass": "no-op", "nothing": "no-op", "skip": "no-op", "wait": "no-op", "do nothing": "no-op",
}
_LABEL_SYNONYMS = {**{lab: lab for lab in LABELS}, "REPAIR": "FACE_SAVE_REPAIR", "FACE_SAVE": "FACE_SAVE_REPAIR",
                   "FACE-SAVE-REPAIR": "FACE_SAVE_REPAIR", "DEMO": "DEMONSTRATION"}


def _balanced(text: str, start: int) -> str | None:
    depth, quote, esc = 0, None, False
    for i in range(start, len(text)):
        ch = text[i]
        if quote:
            if esc:
                esc = False
            elif ch == "\\":
                esc = True
            elif ch == quote:
                quote = None
        elif ch in "\"'":
            quote = ch
        elif ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                return text[start:i + 1]
    return None


def extract_json(text: str | None):
    """The first JSON object in ``text`` (as a dict), or ``None``.

    Tries strict JSON, then without trailing commas, then a Python literal (single quotes,
    ``True``/``None``); a truncated object is not repaired.
    """
    if not text:
        return None
    for m in re.finditer(r"\{", text):
        chunk = _balanced(text, m.start())
        if chunk is None:
            continue
        for attempt in (chunk, re.sub(r",\s*([}\]])", r"\1", chunk)):
            try:
                obj = json.loads(attempt)
            except json.JSONDecodeError:
                try:
                    obj = ast.literal_eval(attempt.replace("null", "None").replace("true", "True").replace("false", "False"))
                except (ValueError, SyntaxError, MemoryError, RecursionError):
                    continue
            if isinstance(obj, dict):
                return obj
    return None


def _field(text: str, key: str):
    m = re.search(r"['\"]?" + key + r"['\"]?\s*:\s*(?:\"((?:[^\"\\]|\\.)*)\"|'((?:[^'\\]|\\.)*)'|(-?\d+|null|None))", text)
    if not m:
        return None
    return next(g for g in m.groups() if g is not None)


def parse_action(text: str | None, turn_ids=()) -> dict | None:
    """Read ``{"action", "content", "target_turn_id"}`` from a persona or subject answer.

    Accepts a JSON (or Python-literal) object anywhere in the text, or ``key: value`` fragments
    of one; action synonyms (``reply``, ``reaction``, ``noop``, ``silent`` ...) are normalised.
    A message needs non-empty string content; an answer cut off inside its content string
    keeps the words written (flag ``truncated``). ``target_turn_id`` is kept only when it is
    one of ``turn_ids``. Returns ``None`` when no action can be read (the caller logs it as
    unparseable).

    Parameters
    ----------
    text : str or None
    turn_ids : collection of int

    Returns
    -------
    dict or None
    """
    if not text:
        return None
    obj = extract_json(text)
    truncated = False
    if obj is None:
        act = _field(text, "action")
        if act is None:
            return None
        content = _field(text, "content")
        if content is None:  # an answer cut off inside its content string: keep the words written
            m = re.search(r"['\"]content['\"]\s*:\s*(['\"])(.+)$", text, re.S)
            if m and m.group(1) not in m.group(2):
                content, truncated = m.group(2).strip(), True
        obj = {"action": act, "content": content, "target_turn_id": _field(text, "target_turn_id")}
    act = _ACTION_SYNONYMS.get(str(obj.get("action", "")).strip().lower())
    if act is None:
        return None
    content = obj.get("content")
    if isinstance(content, bool) or not isinstance(content, (str, int, float, type(None))):
        return None  # e.g. {"content": {}}: no message was written
    content = "" if content is None else str(content).strip()
    target = obj.get("target_turn_id")
    try:
        target = int(target) if target is not None and str(target).strip() not in ("", "null", "None") else None
    except (TypeError, ValueError):
        target = None
    if target is not None and target not in set(turn_ids):
        target = None
    if act == "message" and not content:
        return None
    if act == "no-op":
        content, target, truncated = "", None, False
    out = {"action": act, "content": content, "target_turn_id": target}
    if truncated:
        out["truncated"] = True
    return out


def _derive_metrics(ep: Episode, labels: dict) -> dict:
    """Episode metrics computed from the per-turn labels (when the judge gives none)."""
    seq = [(x, labels.get(x.turn_id, "NONE")) for x in ep.transcript]
    subj = [(x, lab) for x, lab in seq if x.actor == ep.subject]
    breaches = sum(1 for _, lab in subj if lab == "BREACH")
    state, relapses, corrected, late = "clean", 0, False, False
    sanctioned = False
    for x, lab in seq:
        if x.actor != ep.subject:
            if lab == "SANCTION" and breaches:
                sanctioned = True
            continue
        if lab == "BREACH":
            if state == "repaired":
                relapses += 1
            state = "breached"
        elif lab == "FACE_SAVE_REPAIR" and state == "breached":
            state, corrected = "repaired", True
        elif lab == "DEMONSTRATION" and sanctioned and state == "breached":
            late = True
    channel = TAXONOMY.entry("sanction", ep.tuple.sanction)["channel"]
    sanc = [x for x, lab in seq if lab == "SANCTION" and x.actor != ep.subject]
    want = "react" if channel == "reaction" else "message"
    return {"subject_breach_count": breaches, "subject_corrected": corrected, "subject_relapses": relapses,
            "subject_face_save": any(lab == "FACE_SAVE_REPAIR" for _, lab in subj),
            "subject_late_comply": late, "sanction_shape_match": all(x.action == want for x in sanc)}


def _parse_labels(text: str | None, ep: Episode) -> tuple[dict | None, dict | None, list]:
    """``({turn_id: label}, metrics or None, notes)`` from a judge answer; ``None`` when unread."""
    if not text:
        return None, None, ["empty answer"]
    ids = {x.turn_id for x in ep.transcript}
    notes: list = []
    obj = extract_json(text)
    pairs = []
    metrics = None
    if isinstance(obj, dict) and isinstance(obj.get("turn_labels"), list):
        for lab in obj["turn_labels"]:
            if isinstance(lab, dict):
                pairs.append((lab.get("turn_id"), lab.get("label")))
        metrics = obj.get("episode_metrics") if isinstance(obj.get("episode_metrics"), dict) else None
    else:
        # complete label objects of a truncated answer, else "[3] BREACH" / "3: BREACH" lines
        for m in re.finditer(r"\{\s*['\"]turn_id['\"]\s*:\s*(\d+)[^{}]*?['\"]label['\"]\s*:\s*['\"]([A-Za-z_\-]+)['\"][^{}]*\}", text):
            pairs.append((m.group(1), m.group(2)))
        if not pairs:
            for m in re.finditer(r"\[?\b(\d+)\]?\s*[:=\-]?\s*(?:\w+\s*[:\-]\s*)?\"?([A-Z_\-]{4,})\b", text):
                pairs.append((m.group(1), m.group(2)))
        if not pairs:
            return None, None, ["no turn labels found"]
        notes.append("labels read from a partial answer")
    labels = {}
    for tid, lab in pairs:
        try:
            tid = int(tid)
        except (TypeError, ValueError):
            notes.append(f"bad turn_id {tid!r}")
            continue
        norm = _LABEL_SYNONYMS.get(str(lab).strip().upper().replace(" ", "_"))
        if norm is None:
            notes.append(f"unknown label {lab!r} for turn {tid}")
            continue
        if tid not in ids:
            notes.append(f"label for unknown turn {tid}")
            continue
        if tid in labels and labels[tid] != norm:
            notes.append(f"turn {tid} labelled twice; first label kept")
            continue
        labels[tid] = norm
    return labels, metrics, notes
