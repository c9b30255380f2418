"""The JSON schemas that flow between SCENE stages: ``scaffold_v1``, ``scenario_v1``, ``judge_output_v1``.

The schemas are data (``data/<name>.schema.json``, JSON Schema 2020-12, checked with
``jsonschema``); :func:`validate` adds the checks a schema cannot express (the tuple is a valid
tuple of the taxonomy, hidden personas are cast members, turn IDs are unique, the required
sanction modality is the tuple's). :func:`read_json` and :func:`write_json` validate on every
read and write.

References
----------
Jacniacki & Bilski, "SCENE", arXiv:2605.07823 (2026), Appendix B.8 (JSON schemas).
"""

from __future__ import annotations

import json
from functools import lru_cache
from importlib import resources
from pathlib import Path

from normlab.user_files import UserFileError, read_user_json

SCHEMAS = ("scaffold_v1", "scenario_v1", "judge_output_v1")


class SchemaValidationError(ValueError):
    """A document does not conform to a SCENE schema (the message names the field)."""


@lru_cache(maxsize=None)
def _raw(name: str) -> dict:
    text = resources.files("normlab.llm_runs.scene.data").joinpath(f"{name}.schema.json").read_text("utf-8")
    return json.loads(text)


def load_schema(name: str) -> dict:
    """The JSON schema ``name`` (one of :data:`SCHEMAS`) as a dict (a copy)."""
    if name not in SCHEMAS:
        raise ValueError(f"unknown schema {name!r}; allowed: {SCHEMAS}")
    return json.loads(json.dumps(_raw(name)))


@lru_cache(maxsize=None)
def _validator(name: str):
    from jsonschema import Draft202012Validator
    from referencing import Registry, Resource

    registry = Registry().with_resources(
        (_raw(n)["$id"], Resource.from_contents(_raw(n))) for n in SCHEMAS
    )
    return Draft202012Validator(_raw(name), registry=registry)


def _where(path) -> str:
    out = ""
    for p in path:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else str(p))
    return out or "<root>"


def validate(obj, name: str) -> dict:
    """Check ``obj`` against schema ``name`` and the cross-field rules; return ``obj``.

    Parameters
    ----------
    obj : dict
    name : {"scaffold_v1", "scenario_v1", "judge_output_v1"}

    Returns
    -------
    dict
        ``obj`` itself.

    Raises
    ------
    SchemaValidationError
        (a ``ValueError``) with one line naming the schema, the field and the problem.
    """
    if name not in SCHEMAS:
        raise ValueError(f"unknown schema {name!r}; allowed: {SCHEMAS}")
    if not isinstance(obj, dict):
        raise SchemaValidationError(f"{name}: expected a JSON object; got {type(obj).__name__}")
    errors = sorted(_validator(name).iter_errors(obj), key=lambda e: (len(e.absolute_path), list(map(str, e.absolute_path))))
    if errors:
        e = errors[0]
        more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
        raise SchemaValidationError(f"{name}: {_where(e.absolute_path)}: {e.message}{more}")
    if name in ("scaffold_v1", "scenario_v1"):
        _check_scaffold(obj if name == "scaffold_v1" else obj["scaffold"], name)
    if name == "scenario_v1":
        _check_scenario(obj)
    if name == "judge_output_v1":
        ids = [t["turn_id"] for t in obj["turn_labels"]]
        if len(ids) != len(set(ids)):
            dup = sorted({i for i in ids if ids.count(i) > 1})
            raise SchemaValidationError(f"{name}: turn_labels: a turn carries at most one label; turn_ids {dup} repeat")
    return obj


def _check_scaffold(sc: dict, name: str) -> None:
    cast = [c["name"] for c in sc["channel"]["cast"]]
    if len(cast) != len(set(cast)):
        raise SchemaValidationError(f"{name}: channel.cast: names must be unique; got {cast}")
    subject = (sc["channel"].get("subject") or {}).get("name")
    if subject is not None and subject in cast:
        raise SchemaValidationError(f"{name}: channel.subject: the subject {subject!r} must not be in the cast")
    turns = sc["transcript"]["opening_turns"] + [sc["transcript"]["elicitor_turn"]]
    ids = [t["turn_id"] for t in turns]
    if len(ids) != len(set(ids)):
        raise SchemaValidationError(f"{name}: transcript: turn_ids must be unique; got {ids}")
    for t in turns:
        if t["actor"] not in cast:
            raise SchemaValidationError(f"{name}: transcript: actor {t['actor']!r} of turn {t['turn_id']} is not in the cast {cast}")


def _check_scenario(obj: dict) -> None:
    from .taxonomy import check_tuple

    try:
        t = check_tuple(obj["tuple"])
    except (TypeError, ValueError) as exc:
        raise SchemaValidationError(f"scenario_v1: tuple: {exc}") from None
    cast = [c["name"] for c in obj["scaffold"]["channel"]["cast"]]
    for p in obj["hidden"]["personas"]:
        if p["name"] not in cast:
            raise SchemaValidationError(f"scenario_v1: hidden.personas: {p['name']!r} is not in the cast {cast}")
    req = obj["hidden"]["fidelity_criteria"]["sanction_required_modality"]
    if req != t.sanction:
        raise SchemaValidationError(
            f"scenario_v1: hidden.fidelity_criteria.sanction_required_modality is {req!r}; the tuple's sanction is {t.sanction!r}")


def read_json(path: str | Path, name: str) -> dict:
    """Read a JSON file and validate it against schema ``name`` (:func:`validate`)."""
    path = Path(path)
    if not (path.exists() or path.is_symlink()):
        raise ValueError(f"{path} does not exist")
    try:  # a regular file, capped in size and depth (normlab.user_files)
        obj = read_user_json(path, str(path))
    except UserFileError as exc:
        raise SchemaValidationError(f"{name}: {exc}") from None
    return validate(obj, name)


def write_json(obj: dict, path: str | Path, name: str) -> Path:
    """Validate ``obj`` against schema ``name``, then write it as indented UTF-8 JSON."""
    validate(obj, name)
    path = Path(path)
    path.write_text(json.dumps(obj, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return path
