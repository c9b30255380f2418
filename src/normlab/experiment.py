"""Experiment files: one declarative TOML file for any ``normlab`` command (``normlab run FILE``),
and the file equivalent to a command line (``normlab COMMAND ... --print-config``).

A file names the command and gives its flags as keys (dashes or underscores, without ``--``)::

    [experiment]
    command = "llm-run"            # any normlab command: "llm-probe strategy", "simulate strategy", ...
    description = "Q/M, N = 8, H = 3, committed minorities"   # optional, kept in the manifest
    n-agents = 8
    memory = 3
    names = "Q,M"
    max-interactions = 400
    api-key-env = "MY_PROVIDER_KEY"   # the NAME of the variable holding the key, never the key

    [sweep]                          # every combination becomes one step, in its own sub-folder of out
    committed = [0, 2]
    seed = [1, 2]

The keys are checked against the command's own argument parser (:mod:`argparse`), so a command
added to ``normlab`` works in a file with no code here: an unknown key is refused in one line that
names the allowed keys, a value of the wrong kind (a list for a one-value flag, ``1`` for a
true/false flag) likewise, and every step is parsed before the first one runs. A value that looks
like a credential (an API key, a password in a URL) is refused: the file names the environment
variable that holds it instead.

:func:`run_experiment` runs the steps one after the other through the ordinary command
(``main(argv)``), so each is journaled and resumable as it is on the command line; it writes
``experiment.json`` beside the results (:func:`manifest_path`: ``OUT/experiment.json`` for a sweep,
``OUT.experiment.json`` beside a single step's run directory ``OUT``, which accepts nothing else) (the file's text and SHA-256, normlab's version, every step's
command line, parsed arguments and exit code, and one entry per session; secrets redacted with
:func:`normlab.llm_runs.backend.redact_url` and the key rules below). Running the same file again
reruns every step into the same folders: LLM steps answer from their journals (no new request
for completed work), theory steps recompute the same numbers from the same seeds.

This module reads no parser of its own: the ``normlab`` dispatcher (:mod:`normlab.cli`) passes its
parser and ``main``, so it imports no command module (and ``normlab --help`` does not import it).
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import itertools
import json
import math
import os
import platform
import re
import shlex
import sys
import time
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from normlab.llm_runs.backend import redact_text, redact_url
from normlab.llm_runs.backend.config import SECRET_TOKEN
from normlab.user_files import UserFileError, read_user_bytes

__all__ = ["ExperimentError", "Experiment", "Step", "read_experiment", "run_experiment", "print_config",
           "config_text", "dumps_toml", "redact_arguments", "redact_argv", "parse_step", "arguments", "leaf_parser",
           "MANIFEST_NAME", "TABLES", "MAX_FILE_BYTES", "MAX_STEPS", "manifest_path"]

#: The manifest written beside the results: ``OUT/experiment.json`` for a sweep (each step has its own
#: folder under ``OUT``), ``OUT.experiment.json`` beside ``OUT`` for a single step (whose run
#: directory is ``OUT`` itself: a journaled run accepts nothing else in it).
MANIFEST_NAME = "experiment.json"
#: Largest experiment file read (a file is a few hundred bytes; ``/dev/zero`` or a FIFO is refused
#: without reading: :mod:`normlab.user_files`).
MAX_FILE_BYTES = 1 * 2**20
#: Most steps a ``[sweep]`` may expand to, checked before expanding (the product of its list lengths).
MAX_STEPS = 10_000
#: The tables an experiment file may hold.
TABLES = ("experiment", "sweep")
#: Keys of ``[experiment]`` that are not flags of the command (``description`` is the flag where
#: the command has a ``--description``; ``command`` always names the command).
RESERVED = ("command", "description")
#: Parsed arguments that belong to the dispatcher, not to the command.
_INTERNAL = ("func", "_parser", "_prog", "print_config")

#: Flag names that hold a secret (a ``...-env`` flag names a variable instead and is allowed).
_SECRET_NAME = re.compile(r"(api[-_]?key|access[-_]?token|auth[-_]?token|hf[-_]?token|bearer|secret|passw(or)?d"
                          r"|credential)", re.I)
#: Values that are credentials: API keys and tokens of the common providers, a bearer token
#: (:data:`~normlab.llm_runs.backend.config.SECRET_TOKEN`, the one list), and an address with a
#: password (``https://user:pw@host``, hidden by :func:`redact_url`).
_SECRET_TOKEN = SECRET_TOKEN


def _secret_name(name: str) -> bool:
    """A flag or key that holds a secret itself (``api-key``, ``token``, ``password``; not ``api-key-env``)."""
    n = _norm(name).lstrip("-")
    return not n.endswith("-env") and (n in ("token", "key") or bool(_SECRET_NAME.search(n)))


def _looks_secret(v: str) -> bool:
    return bool(_SECRET_TOKEN.search(v)) or ("://" in v and "***@" in redact_url(v) and "***@" not in v)


class ExperimentError(ValueError):
    """An experiment file that cannot be run as written (one line: the file, the key, what is allowed)."""


@dataclass(frozen=True)
class Step:
    """One command of an experiment: its sub-folder name (``""`` without a sweep), the values of
    the sweep axes, the argument list for ``normlab`` and its output folder (``None``: the command
    has no ``--out``)."""

    name: str
    axes: dict
    argv: tuple
    out: str | None

    def command_line(self) -> str:
        """The step as a shell command, secrets redacted."""
        return "normlab " + " ".join(shlex.quote(a) for a in redact_argv(self.argv))


@dataclass(frozen=True)
class Experiment:
    """A checked experiment file: the command (its words), the file's text and SHA-256, the
    output folder and the steps, each parsed once by the command's parser (``arguments``)."""

    path: str
    command: tuple
    text: str
    sha256: str
    out: str | None
    description: str | None
    steps: tuple
    arguments: tuple = field(repr=False)


# ----------------------------------------------------------------------------------- the parser
def _subparsers(parser: argparse.ArgumentParser):
    return [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]


def _walk(parser: argparse.ArgumentParser):
    yield parser
    for action in _subparsers(parser):
        for child in action.choices.values():
            yield from _walk(child)


def leaf_parser(parser: argparse.ArgumentParser, command) -> argparse.ArgumentParser:
    """The parser of ``command`` (its words, e.g. ``("llm-probe", "strategy")``) in ``parser``'s tree."""
    words = command.split() if isinstance(command, str) else list(command)
    p, done = parser, []
    for w in words:
        subs = _subparsers(p)
        choices = {k: v for s in subs for k, v in s.choices.items()}
        if w not in choices:
            where = " ".join(["normlab", *done])
            raise ExperimentError(f"command: {where!r} has no command {w!r}; choose one of: {', '.join(choices) or '-'}")
        p = choices[w]
        done.append(w)
    subs = _subparsers(p)
    if subs:
        choices = [k for s in subs for k in s.choices]
        raise ExperimentError(f"command: {' '.join(['normlab', *done])!r} needs one more word, one of: "
                              f"{', '.join(choices)}")
    if not words:
        raise ExperimentError("command: missing; e.g. command = \"llm-run\"")
    return p


def _options(parser: argparse.ArgumentParser) -> dict:
    """``{normalised key: action}`` for every flag and positional of a leaf parser (each long
    option, each short option without its dash, and the destination name)."""
    out = {}
    for a in parser._actions:
        if isinstance(a, (argparse._HelpAction, argparse._VersionAction)) or a.dest in _INTERNAL \
                or a.dest == argparse.SUPPRESS:
            continue
        names = [o.lstrip("-") for o in a.option_strings] + [a.dest]
        for n in names:
            out.setdefault(_norm(n), a)
    return out


def _key(action: argparse.Action) -> str:
    """The key a file uses for ``action``: its first long option without dashes (``n-agents``)."""
    longs = [o for o in action.option_strings if o.startswith("--")]
    return (longs or action.option_strings or [action.dest])[0].lstrip("-") if action.option_strings \
        else action.dest.replace("_", "-")


def _norm(key: str) -> str:
    return key.replace("_", "-").lower()


def _allowed(parser) -> str:
    keys = sorted({_key(a) for a in _options(parser).values()} - {k for k in map(_key, _options(parser).values())
                                                                 if _secret_name(k)})
    return ", ".join(keys)


def _is_flag(action) -> bool:
    """A flag that takes no value (store_true/false/const, count, BooleanOptional)."""
    return action.option_strings and action.nargs == 0


def _many(action) -> bool:
    return isinstance(action, argparse._AppendAction) or action.nargs in ("+", "*") or \
        (isinstance(action.nargs, int) and action.nargs > 1)


def _scalar_text(value, where: str) -> str:
    if isinstance(value, bool):
        raise ExperimentError(f"{where}: expected a number or text, got {str(value).lower()}")
    if isinstance(value, (int, str)):
        return str(value)
    if isinstance(value, float):
        return repr(value)
    kind = "a table" if isinstance(value, dict) else type(value).__name__
    raise ExperimentError(f"{where}: expected a number or text, got {kind}")


def _tokens(action, value, where: str) -> list:
    """The command-line words of one key's value (``[]``: the default)."""
    opt = next((o for o in action.option_strings if o.startswith("--")), action.option_strings[0]) \
        if action.option_strings else None
    if _is_flag(action):
        if isinstance(action, argparse.BooleanOptionalAction):
            if not isinstance(value, bool):
                raise ExperimentError(f"{where}: expected true or false, got {value!r}")
            return [opt] if value else ["--no-" + opt[2:]]
        if isinstance(action, argparse._CountAction):
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ExperimentError(f"{where}: expected a count (0, 1, 2, ...), got {value!r}")
            return [opt] * value
        if not isinstance(value, bool):
            raise ExperimentError(f"{where}: expected true or false, got {value!r}")
        return [opt] if value else []  # store_true, store_false, store_const: true gives the flag
    if isinstance(value, list):
        if not _many(action):
            raise ExperimentError(f"{where}: a list, but {opt or action.dest} takes one value "
                                  f"(values to try in turn go under [sweep])")
        items = [_scalar_text(v, where) for v in value]
    else:
        items = [_scalar_text(value, where)]
    if opt is None or (_many(action) and not isinstance(action, argparse._AppendAction)):
        for v in items:  # standing alone on the command line, a word beginning with '-' is a flag
            if v.startswith("-") and not _number(v):
                raise ExperimentError(f"{where}: {v!r} begins with '-', so the command would read it as a flag "
                                      f"(e.g. --help), not as a value; write a path as './{v}'")
    if opt is None:
        return items
    if isinstance(action, argparse._AppendAction):
        return [f"{opt}={v}" for v in items]
    if len(items) == 1 and not _many(action):
        return [f"{opt}={items[0]}"]
    return [opt, *items]


def _number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _check_secret(key: str, value, where: str) -> None:
    values = value if isinstance(value, list) else [value]
    if _secret_name(key):
        raise ExperimentError(f"{where}: a secret in the file; give the name of the environment variable that "
                              f"holds it instead (e.g. api-key-env = \"MY_KEY\")")
    for v in values:
        if isinstance(v, str) and _looks_secret(v):
            raise ExperimentError(f"{where}: the value looks like a credential (a key or a password in a URL); "
                                  f"keep it in an environment variable (api-key-env names the key's variable, "
                                  f"NORMLAB_LLM_BASE_URL an address with a password), not in the file")


@contextlib.contextmanager
def _raising(parser: argparse.ArgumentParser, where: str):
    """Every parser of the tree raises :class:`ExperimentError` instead of exiting."""
    saved = []
    for p in _walk(parser):
        saved.append((p, p.__dict__.get("error")))

        def error(message, p=p):
            raise ExperimentError(f"{where}: {message}")
        p.error = error
    try:
        yield
    finally:
        for p, e in saved:
            if e is None:
                p.__dict__.pop("error", None)
            else:
                p.error = e


def parse_step(parser: argparse.ArgumentParser, argv, where: str) -> argparse.Namespace:
    """``argv`` parsed by the ``normlab`` parser, a bad value raised as :class:`ExperimentError`."""
    with _raising(parser, where):
        ns, extra = parser.parse_known_args(list(argv))
    if extra:
        raise ExperimentError(f"{where}: not understood: {' '.join(extra)}")
    return ns


def arguments(ns: argparse.Namespace) -> dict:
    """The command's parsed arguments (the dispatcher's own entries left out)."""
    return {k: v for k, v in vars(ns).items() if k not in _INTERNAL and k != "command" and not k.startswith("_")}


# ------------------------------------------------------------------------------- reading a file
def read_experiment(path, parser: argparse.ArgumentParser, *, out=None, out_anywhere: bool = False) -> Experiment:
    """Read and check an experiment file against ``parser`` (the ``normlab`` parser): the command,
    every key and value, the sweep, each step parsed once. Raises :class:`ExperimentError` (one
    line beginning with the file's name) on anything that would not run.

    The file is read through :mod:`normlab.user_files` (a regular file of at most
    :data:`MAX_FILE_BYTES`: ``/dev/zero`` or a FIFO is refused without reading); a UTF-8 byte-order
    mark is skipped; a ``[sweep]`` of more than :data:`MAX_STEPS` combinations is refused before it
    is expanded. The file's ``out`` is read from the file's folder and must stay inside it (links
    resolved) unless ``out_anywhere`` (``normlab run FILE --out-anywhere``); ``out`` given here (the
    command line's ``--out``) goes wherever it says."""
    path = Path(path)
    try:
        raw = read_user_bytes(path, str(path), max_bytes=MAX_FILE_BYTES)
    except FileNotFoundError:
        raise ExperimentError(f"{path}: No such file or directory") from None
    except UserFileError as exc:
        if path.is_dir():
            raise ExperimentError(f"{path}: a directory; give an experiment file (TOML)") from None
        raise ExperimentError(f"{exc}; give an experiment file (TOML)") from None
    try:
        text = raw.decode("utf-8")
        data = tomllib.loads(text[1:] if text.startswith("\ufeff") else text)  # a BOM some editors write
    except UnicodeDecodeError:
        raise ExperimentError(f"{path}: not a text file (UTF-8 TOML expected)") from None
    except tomllib.TOMLDecodeError as exc:
        raise ExperimentError(f"{path}: not valid TOML: {exc}") from None
    except RecursionError:
        raise ExperimentError(f"{path}: not valid TOML: nests too deeply") from None
    bad = [k for k in data if k not in TABLES]
    if bad:
        raise ExperimentError(f"{path}: unknown table or key {bad[0]!r} at the top; allowed: "
                              f"[experiment] (the command and its flags), [sweep] (lists of values to try)")
    exp = data.get("experiment")
    if not isinstance(exp, dict):
        raise ExperimentError(f"{path}: no [experiment] table; it names the command, e.g. command = \"llm-run\"")
    sweep = data.get("sweep", {})
    if not isinstance(sweep, dict):
        raise ExperimentError(f"{path}: sweep must be a table [sweep] of lists")
    command = exp.get("command")
    if isinstance(command, str):
        words = tuple(command.split())
    elif isinstance(command, list) and all(isinstance(w, str) for w in command):
        words = tuple(command)
    else:
        raise ExperimentError(f"{path}: [experiment] command: expected text such as \"llm-run\" or "
                              f"\"llm-probe strategy\"")
    if words and words[0] == "run":
        raise ExperimentError(f"{path}: [experiment] command: an experiment file runs a command, not 'run'")
    try:
        leaf = leaf_parser(parser, words)
    except ExperimentError as exc:
        raise ExperimentError(f"{path}: [experiment] {exc}") from None
    opts = _options(leaf)
    reserved = [k for k in RESERVED if k == "command" or k not in opts]
    description = exp.get("description") if "description" in reserved else None
    if description is not None and not isinstance(description, str):
        raise ExperimentError(f"{path}: [experiment] description: expected text")
    prog = " ".join(["normlab", *words])

    def action_of(table, key):
        a = opts.get(_norm(key))
        if a is None:
            raise ExperimentError(f"{path}: [{table}] unknown key {key!r} for '{prog}'; allowed: {_allowed(leaf)}")
        return a

    fixed = {}
    for key, value in exp.items():
        if key in reserved:
            continue
        where = f"{path}: [experiment] {key}"
        a = action_of("experiment", key)
        _check_secret(key, value, where)
        if a.dest in fixed:
            raise ExperimentError(f"{where}: given twice (as {fixed[a.dest][0]!r} too)")
        fixed[a.dest] = (key, a, value)
    axes = {}
    for key, values in sweep.items():
        where = f"{path}: [sweep] {key}"
        a = action_of("sweep", key)
        _check_secret(key, values, where)
        if a.dest in fixed:
            raise ExperimentError(f"{where}: also set in [experiment]; give it in one place")
        if a.dest in axes:
            raise ExperimentError(f"{where}: given twice (as {axes[a.dest][0]!r} too)")
        if not isinstance(values, list) or not values:
            raise ExperimentError(f"{where}: expected a non-empty list of values to try, e.g. {key} = [1, 2]")
        axes[a.dest] = (key, a, values)
    n_steps = math.prod(len(v) for _, _, v in axes.values())
    if n_steps > MAX_STEPS:
        raise ExperimentError(f"{path}: [sweep] makes {n_steps:,} steps ("
                              + " x ".join(str(len(v)) for _, _, v in axes.values())
                              + f"), more than the {MAX_STEPS:,} allowed; split the study into several files")
    out_action = opts.get("out")
    base_out = None
    if out_action is not None:
        if out is not None:
            base_out = str(out)
        elif out_action.dest in fixed:
            given = _scalar_text(fixed[out_action.dest][2], f"{path}: [experiment] out")
            base_out = _confined_out(path, given, out_anywhere, single=not axes)
        else:
            base_out = str(path.with_suffix("")) if path.suffix else f"{path}.out"
        if out_action.dest in axes:
            raise ExperimentError(f"{path}: [sweep] out: each step gets its own folder under out; "
                                  f"sweep other keys")
    elif out is not None:
        raise ExperimentError(f"{path}: '{prog}' has no --out; run it without --out")

    steps, parsed, names = [], [], set()
    combos = list(itertools.product(*[[(d, v) for v in vals] for d, (_, _, vals) in axes.items()]))
    for combo in combos:
        values = {d: (k, a, v) for d, (k, a, v) in fixed.items()}
        for d, v in combo:
            values[d] = (axes[d][0], axes[d][1], v)
        shown = {axes[d][0]: v for d, v in combo}
        name = "_".join(f"{_norm(k)}={_folder_text(v)}" for k, v in shown.items())
        if name in names:
            name = f"{name}_{len(steps) + 1}"
        names.add(name)
        positional, options = [], []
        for d, (k, a, v) in values.items():
            where = f"{path}: [{'sweep' if d in axes else 'experiment'}] {k}"
            if out_action is not None and d == out_action.dest:
                continue
            toks = _tokens(a, v, where)
            (options if a.option_strings else positional).extend(toks)
        step_out = None
        if out_action is not None:
            step_out = str(Path(base_out) / name) if name else base_out
            options.append(f"--{_key(out_action)}={step_out}")
        argv = (*words, *positional, *options)
        ns = parse_step(parser, argv, f"{path}" + (f" (step {name})" if name else ""))
        steps.append(Step(name=name, axes=shown, argv=argv, out=step_out))
        parsed.append(arguments(ns))
    sha = hashlib.sha256(raw).hexdigest()
    return Experiment(path=str(path), command=words, text=text, sha256=sha, out=base_out, description=description,
                      steps=tuple(steps), arguments=tuple(parsed))


def _confined_out(path: Path, given: str, anywhere: bool, single: bool) -> str:
    """The file's ``out``, read from the file's folder; outside it (an absolute path, ``..``, a link
    leading out) only with ``anywhere`` (``--out-anywhere``): a file from elsewhere may not write
    wherever it likes."""
    folder = path.parent
    target = Path(given).expanduser()
    out = target if target.is_absolute() else folder / target
    if anywhere:
        return str(out)
    home, where = folder.resolve(), out.resolve()
    if not where.is_relative_to(home):
        raise ExperimentError(f"{path}: [experiment] out = {given!r} leads outside the file's folder ({home}); "
                              "keep out inside it, or pass --out-anywhere (or --out DIR) to write there")
    if where == home:
        raise ExperimentError(f"{path}: [experiment] out = {given!r} is the file's own folder; name a sub-folder "
                              "for the results")
    return str(out)


def _folder_text(v) -> str:
    s = json.dumps(v) if isinstance(v, (list, bool)) else str(v)
    s = re.sub(r"[^A-Za-z0-9.+\-]+", "-", s).strip("-")
    return s or "x"


# ----------------------------------------------------------------------------------- redaction
def _redact_value(key: str, v):
    if isinstance(v, (list, tuple)):
        return [_redact_value(key, x) for x in v]
    if isinstance(v, dict):
        return {k: _redact_value(k, x) for k, x in v.items()}
    if _secret_name(key) and v not in (None, False):
        return "***"
    if isinstance(v, str):
        return redact_text(v)
    return v


def redact_arguments(args: dict) -> dict:
    """Parsed arguments for a manifest: JSON values, an address's password hidden
    (:func:`~normlab.llm_runs.backend.redact_url`), a key, token or password replaced by ``***``."""
    out = {}
    for k, v in args.items():
        if isinstance(v, Path):
            v = str(v)
        elif not isinstance(v, (str, int, float, bool, list, tuple, dict, type(None))):
            v = str(v)
        if isinstance(v, float) and not math.isfinite(v):
            v = str(v)
        out[k] = _redact_value(k, v)
    return out


def redact_argv(argv) -> list:
    """A command line with secrets hidden (the rules of :func:`redact_arguments`)."""
    out, hide_next = [], False
    for a in argv:
        if hide_next:
            out.append("***")
            hide_next = False
            continue
        if a.startswith("--") and _secret_name(a.split("=", 1)[0]):
            if "=" in a:
                out.append(a.split("=", 1)[0] + "=***")
            else:
                out.append(a)
                hide_next = True
            continue
        out.append(_redact_value("", a))
    return out


# ----------------------------------------------------------------------------------- running
def manifest_path(exp: Experiment) -> Path:
    """Where the manifest of ``exp`` goes: ``OUT/experiment.json`` when each step has a folder of its
    own under ``OUT`` (a sweep), else beside ``OUT`` (``OUT.experiment.json``): a single step's run
    directory is ``OUT`` itself, and a journaled run (llm-run, llm-probe, crsec run, scene run)
    accepts nothing but its own files there; without ``out``, the file's name without .toml."""
    if exp.out is None:
        return Path(exp.path).with_suffix("") / MANIFEST_NAME
    base = Path(exp.out)
    if any(s.name for s in exp.steps):
        return base / MANIFEST_NAME
    return base.parent / f"{base.name}.{MANIFEST_NAME}"


def run_experiment(path, *, parser: argparse.ArgumentParser, main: Callable[[list], int], out=None,
                   plan: bool = False, dry_run: bool = False, as_json: bool = False,
                   out_anywhere: bool = False) -> int:
    """Run every step of the experiment file at ``path`` with ``main`` (``normlab.cli.main``), in
    order, writing the manifest (:data:`MANIFEST_NAME`) into the output folder after each step.

    Returns 0 when every step exited 0, else the first failing step's exit code (the later steps
    are not started; completed work is kept and the same command resumes). ``plan``: print the
    steps' command lines and run nothing. ``dry_run``: each step whose command has ``--dry-run``
    prints its own estimate (requests, tokens, cost; nothing is sent), the others their command
    line; no manifest is written. Every step is parsed before the first one runs.
    """
    from normlab import __version__
    from normlab.cli_output import emit

    exp = read_experiment(path, parser, out=out, out_anywhere=out_anywhere)
    n = len(exp.steps)
    if plan:
        rows = [{"step": s.name or "-", "out": s.out, "command": s.command_line()} for s in exp.steps]
        if as_json:
            emit({"file": exp.path, "sha256": exp.sha256, "out": exp.out, "steps": rows}, True)
        else:
            for r in rows:
                print(r["command"])
        return 0
    if dry_run:
        code = 0
        for i, step in enumerate(exp.steps, 1):
            has = "--dry-run" in leaf_parser(parser, exp.command)._option_string_actions
            print(f"normlab run: step {i}/{n}{' ' + step.name if step.name else ''}: {step.command_line()}"
                  + ("" if has else " (no --dry-run: not estimated)"), file=sys.stderr)
            if has and "--dry-run" not in step.argv:
                rc = int(main([*step.argv, "--dry-run"]) or 0)
                code = code or rc
        return code
    manifest_file = manifest_path(exp)
    manifest_dir = manifest_file.parent
    if manifest_dir.exists() and not manifest_dir.is_dir():
        raise ExperimentError(f"{manifest_dir}: exists and is not a directory; give another out")
    manifest_dir.mkdir(parents=True, exist_ok=True)
    sessions = []
    if manifest_file.exists():
        try:
            old = json.loads(manifest_file.read_text(encoding="utf-8"))
            sessions = list(old.get("sessions", []))
            if old.get("sha256") and old["sha256"] != exp.sha256:
                print(f"normlab run: note: {exp.path} changed since the last run into {manifest_dir} "
                      f"(sha256 {old['sha256'][:12]} -> {exp.sha256[:12]}); each step checks its own settings",
                      file=sys.stderr)
        except (OSError, ValueError):
            sessions = []
    session = {"started": _now(), "finished": None, "sha256": exp.sha256, "exit_code": None, "steps": []}
    sessions.append(session)
    manifest = {
        "normlab_version": __version__, "python": platform.python_version(), "platform": platform.platform(),
        # the file's text and description through the command line's redaction: a key in a comment
        # or a description (sk-..., ghp_..., an address with a password) never reaches the manifest
        "file": exp.path, "sha256": exp.sha256, "file_text": redact_text(exp.text),
        "description": None if exp.description is None else redact_text(exp.description),
        "command": " ".join(exp.command), "out": exp.out,
        "steps": [{"name": s.name, "axes": s.axes, "out": s.out, "command_line": s.command_line(),
                   "argv": redact_argv(s.argv), "arguments": redact_arguments(a),
                   "exit_code": None, "seconds": None}
                  for s, a in zip(exp.steps, exp.arguments)],
        "sessions": sessions,
    }
    _write_manifest(manifest_file, manifest)
    code = 0
    for i, (step, entry) in enumerate(zip(exp.steps, manifest["steps"]), 1):
        print(f"normlab run: step {i}/{n}{' ' + step.name if step.name else ''}: {step.command_line()}",
              file=sys.stderr)
        t0 = time.perf_counter()
        try:
            rc = int(main(list(step.argv)) or 0)
        except SystemExit as exc:  # a command that exits instead of returning
            rc = exc.code if isinstance(exc.code, int) else 1
        entry["exit_code"], entry["seconds"] = rc, round(time.perf_counter() - t0, 3)
        session["steps"].append({"name": step.name, "exit_code": rc, "seconds": entry["seconds"]})
        _write_manifest(manifest_file, manifest)
        if rc != 0:
            code = rc
            print(f"normlab run: step {i}/{n} exited {rc}; later steps not started (completed work is kept: "
                  f"'normlab run {exp.path}{' --out ' + str(out) if out is not None else ''}"
                  f"{' --out-anywhere' if out_anywhere else ''}' resumes)", file=sys.stderr)
            break
    session["finished"], session["exit_code"] = _now(), code
    _write_manifest(manifest_file, manifest)
    summary = {"file": exp.path, "sha256": exp.sha256, "steps": n,
               "done": sum(1 for s in manifest["steps"] if s["exit_code"] == 0), "exit_code": code,
               "manifest": str(manifest_file)}
    if as_json:
        emit(summary, True)
    else:
        print(f"normlab run: {summary['done']}/{n} steps done; manifest {manifest_file}", file=sys.stderr)
    return code


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def _write_manifest(path: Path, manifest: dict) -> None:
    tmp = path.with_name(path.name + ".tmp")
    try:
        tmp.write_text(json.dumps(manifest, indent=2, default=str) + "\n", encoding="utf-8")
        os.replace(tmp, path)
    except BaseException:  # a full disk: no empty or half copy left behind
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise


# ------------------------------------------------------------------------------ --print-config
def print_config(parser: argparse.ArgumentParser, argv) -> int:
    """``normlab COMMAND [FLAGS] --print-config``: print the experiment file equivalent to the other
    flags (the given ones as keys, the defaults as comments) and exit 0. A flag the command requires
    but the line lacks is printed as a comment to fill in; a value that looks like a credential is
    left out with a note."""
    argv = [a for a in argv if a != "--print-config"]
    given: dict = {}
    path: list = []
    required_ids = set()
    for p in _walk(parser):
        for a in p._actions:
            if a.option_strings and a.required:
                required_ids.add(id(a))
                a.required = False  # a template may leave required flags to fill in
        for g in p._mutually_exclusive_groups:
            if g.required:
                required_ids.add(id(g))
                g.required = False
        orig = p._get_values

        def record(action, strings, orig=orig):
            if isinstance(action, argparse._SubParsersAction):
                path.append(strings[0])
            elif isinstance(action, argparse._AppendAction):
                given.setdefault(action, []).append(list(strings))
            else:
                given[action] = list(strings)
            return orig(action, strings)
        p._get_values = record
    ns, extra = parser.parse_known_args(argv)
    prog = getattr(ns, "_prog", None) or "normlab"
    if extra:
        print(f"{prog}: error: unrecognized arguments: {' '.join(extra)} (see '{prog} --help')", file=sys.stderr)
        return 2
    leaf = getattr(ns, "_parser", None)
    if leaf is None:
        print("normlab: error: --print-config goes after a command (e.g. normlab llm-run ... --print-config)",
              file=sys.stderr)
        return 2
    sys.stdout.write(config_text(path, leaf, given, ns, required_ids))
    return 0


def _toml_value(action, strings):
    """A value as given on the command line, as the TOML value a file writes (numbers as numbers)."""
    def one(s):
        if action.type in (int, float):
            try:
                v = action.type(s)
                if isinstance(v, float) and not math.isfinite(v):
                    return s
                return v
            except ValueError:
                return s
        return s
    if isinstance(action, argparse._AppendAction):
        return [one(s[0]) if len(s) == 1 else [one(x) for x in s] for s in strings]
    if _many(action):
        return [one(s) for s in strings]
    return one(strings[0]) if strings else None


def config_text(command, leaf: argparse.ArgumentParser, given: dict, ns=None, required_ids=()) -> str:
    """The TOML text of an experiment file: ``command`` (its words), the ``given`` flags
    (``{action: command-line strings}``; a flag's value read from the parsed ``ns``) as keys, every
    other flag's default as a comment (``required_ids``: the flags the command requires)."""
    words = " ".join(command)
    lines = [f"# normlab experiment file: run it with 'normlab run FILE' (same as 'normlab {words} ...')",
             "# Lists of values to try go under [sweep] (each combination: one step in its own folder under out).",
             "[experiment]", f"command = {_toml(words)}"]
    skipped, defaults, required = [], [], []
    for a in leaf._actions:
        if isinstance(a, (argparse._HelpAction, argparse._VersionAction)) or a.dest in _INTERNAL \
                or a.dest.startswith("_") or a.dest == argparse.SUPPRESS:
            continue
        key = _key(a)
        if _norm(key) == "command":  # the file's own key: a flag of that name cannot be written
            if a in given:
                skipped.append("# --command: left out, 'command' names the command in an experiment file")
            continue
        if a in given:
            strings = given[a]
            if _is_flag(a):  # --x/--no-x: its value; a count; the others: true = the flag given
                value = getattr(ns, a.dest) if ns is not None and isinstance(
                    a, (argparse._CountAction, argparse.BooleanOptionalAction)) else True
            else:
                value = _toml_value(a, strings)
            flat = value if isinstance(value, list) else [value]
            if _secret_name(key) or any(
                    isinstance(v, str) and _looks_secret(v) for v in flat):
                skipped.append(f"# {key}: left out, it holds a credential: keep it in an environment variable "
                               f"(api-key-env names the key's; NORMLAB_LLM_BASE_URL an address with a password)")
                continue
            lines.append(f"{_toml_key(key)} = {_toml(value)}")
        elif a.required or id(a) in required_ids or (not a.option_strings and a.nargs not in ("?", "*")):
            required.append(f"# {_toml_key(key)} =   # required: {_help_line(a)}")
        else:
            d = a.default
            if _is_flag(a):
                if isinstance(a, argparse._CountAction):
                    defaults.append(f"# {_toml_key(key)} = {d or 0}")
                else:
                    defaults.append(f"# {_toml_key(key)} = "
                                    f"{_toml(d) if isinstance(a, argparse.BooleanOptionalAction) else 'false'}")
            elif isinstance(d, (str, int, float)) and not isinstance(d, bool) and d != "" and \
                    not (isinstance(d, float) and not math.isfinite(d)):
                defaults.append(f"# {_toml_key(key)} = {_toml(d)}")
    for g in leaf._mutually_exclusive_groups:
        if (g.required or id(g) in required_ids) and not any(a in given for a in g._group_actions):
            required.append(f"# one of these is required: {', '.join(_key(a) for a in g._group_actions)}")
    out = lines + skipped
    if required:
        out += ["", "# required, still to fill in:"] + required
    if defaults:
        out += ["", "# defaults (uncomment to change):"] + defaults
    return "\n".join(out) + "\n"


def _help_line(action) -> str:
    text = " ".join((action.help or "").split())
    if "%(" in text:
        try:
            text = text % {"default": action.default, "prog": "", "dest": action.dest}
        except (KeyError, ValueError, TypeError):
            pass
    return text[:100] or action.dest


# ------------------------------------------------------------------------------------- TOML
_BARE = re.compile(r"^[A-Za-z0-9_-]+$")


def _toml_key(key: str) -> str:
    return key if _BARE.match(key) else json.dumps(key, ensure_ascii=False)


def _toml(v) -> str:
    """One TOML value: text, a number, true/false, or a list of them."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if math.isnan(v):
            return "nan"
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v, ensure_ascii=False)  # a TOML basic string (JSON's escapes are TOML's)
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_toml(x) for x in v) + "]"
    if isinstance(v, Path):
        return _toml(str(v))
    raise TypeError(f"no TOML form for {type(v).__name__} {v!r}")


def dumps_toml(tables: dict) -> str:
    """``{table: {key: value}}`` (values: text, numbers, true/false, lists of them) as TOML text."""
    out = []
    for name, body in tables.items():
        if not isinstance(body, dict):
            raise TypeError(f"dumps_toml: {name!r} must be a table (dict); got {type(body).__name__}")
        if out:
            out.append("")
        out.append(f"[{_toml_key(name)}]")
        out += [f"{_toml_key(k)} = {_toml(v)}" for k, v in body.items()]
    return "\n".join(out) + "\n"
