"""The ``normlab`` command line.

Each sub-package contributes its sub-commands through a light ``_cli.py`` module with a
``register(subparsers)`` function (argparse only; heavy imports happen inside the handlers):

- ``normlab simulate ...``      -- :mod:`normlab.theory._cli`
- ``normlab critical-mass ...`` -- :mod:`normlab.theory._cli`
- ``normlab llm-run ...``       -- :mod:`normlab.llm_runs._cli`
- ``normlab llm-probe ...``     -- :mod:`normlab.llm_runs._cli`
- ``normlab calibrate ...``     -- :mod:`normlab.calibration._cli`
- ``normlab figures ...``       -- :mod:`normlab.figures._cli`
- ``normlab demo ...``          -- :mod:`normlab.demo._cli` (the top layer: probe, predict, check, report)

Every parser prints a bad flag as one line (what is wrong, where the help is), and ``main``
prints a bad value, a missing file or an interrupt as one line too, with the exit codes below.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys

from normlab import __version__

#: Every exit code of the ``normlab`` commands, one home: ``code: (what it means for a command
#: that runs no LLM, what it means for a command that calls one)``; ``None``: it does not occur there.
EXIT_CODE_TABLE = {
    0: ("done", "done (or resumed to the end); --dry-run printed its estimate"),
    2: ("bad input: a bad flag or value, a missing or unreadable file (one line saying what is wrong; no work done)",
        "bad input: a bad flag, a missing file (one line saying what is wrong and what is allowed; nothing was sent)"),
    3: (None, "the endpoint is down, refuses, or keeps failing (completed work is kept; rerun to resume)"),
    4: (None, "the disk or the run directory failed (full, read-only, journal deleted; completed work is kept)"),
    5: (None, "stopped at --budget (completed work is kept; the same command with a larger --budget continues)"),
    130: ("interrupted (Ctrl-C)", "interrupted (Ctrl-C; completed work is kept; rerun to resume)"),
}


def exit_codes(*, llm: bool = False) -> str:
    """The ``exit codes:`` block of a command's ``--help``, from :data:`EXIT_CODE_TABLE`
    (``llm``: a command that calls an LLM)."""
    rows = [(code, texts[1 if llm else 0]) for code, texts in EXIT_CODE_TABLE.items()]
    return "exit codes:\n" + "\n".join(f"  {code:<5}{text}" for code, text in rows if text is not None)


#: Exit codes of the commands that run no LLM (simulate, critical-mass, calibrate, figures).
EXIT_CODES = exit_codes()

_EPILOG = """\
examples:
  normlab demo --out report                     # from nothing to a report, offline (embedded SmolLM2)
  normlab simulate minimal --n-agents 24 --n-words 10 --runs 50 --seed 1
  normlab critical-mass --n-agents 24 --committed 1,2,3,4,5,6 --runs 40 --seed 1
  normlab llm-run --n-agents 24 --memory 5 --names Q,M --max-interactions 2000 --out runs/qm
  normlab llm-probe strategy --names Q,M --memory 3
  normlab calibrate --table llama31_70b_QM_H5 --n-agents 24
  normlab figures --small --out figs

'normlab COMMAND --help' teaches each command by example and lists its exit codes: 0 done,
2 bad input, 3 endpoint down, 4 disk or run directory failed, 5 stopped at --budget, 130 interrupted.
"""

_CLI_MODULES = ("normlab.theory._cli", "normlab.llm_runs._cli", "normlab.calibration._cli",
                "normlab.figures._cli", "normlab.demo._cli")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="normlab",
        description="Conventions and norms in populations of LLM agents: theory, LLM runs, calibration.",
        epilog=_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"normlab {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for mod_name in _CLI_MODULES:
        try:
            mod = importlib.import_module(mod_name)
        except ModuleNotFoundError as exc:  # a sub-package without commands yet
            if exc.name != mod_name:
                raise
            continue
        mod.register(sub)
    _one_line_errors(parser)
    return parser


def _one_line_errors(parser: argparse.ArgumentParser) -> None:
    """Every parser of the tree: a bad flag prints one line (what is wrong, where the help is)
    instead of the usage block, and the parser's name is kept for errors found later."""
    def error(message, parser=parser):
        parser.exit(2, f"{parser.prog}: error: {message} (see '{parser.prog} --help')\n")

    parser.error = error
    children = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if parser.prog != "normlab" and not children:
        parser.set_defaults(_prog=parser.prog, _parser=parser)
    for action in children:
        for child in action.choices.values():
            _one_line_errors(child)


def emit(obj: dict, as_json: bool) -> None:
    """Print a summary: JSON when ``as_json``, else aligned ``key: value`` lines (a missing value,
    ``null`` in JSON, as ``-``)."""
    if as_json:
        print(json.dumps(_no_nan(obj), indent=2, default=_json_default))
        return
    width = max((len(k) for k in obj), default=0)
    for k, v in obj.items():
        if v is None or (isinstance(v, float) and v != v):
            v = "-"
        elif isinstance(v, float):
            v = f"{v:.6g}"
        elif isinstance(v, (dict, list)):
            v = json.dumps(v, default=_json_default)
        print(f"{k:<{width}}  {v}")


def _no_nan(o):
    """``NaN`` (not JSON) as ``null``, at any depth."""
    if isinstance(o, float) and o != o:
        return None
    if isinstance(o, dict):
        return {k: _no_nan(v) for k, v in o.items()}
    if isinstance(o, (list, tuple)):
        return [_no_nan(v) for v in o]
    return o


def _json_default(o):
    import numpy as np

    if isinstance(o, np.integer):
        return int(o)
    if isinstance(o, np.floating):
        return None if np.isnan(o) else float(o)
    if isinstance(o, np.ndarray):
        return o.tolist()
    if isinstance(o, np.bool_):
        return bool(o)
    return str(o)


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    prog = getattr(args, "_prog", None) or f"normlab {args.command}"
    if extra:  # reported by the command that was given them, with its own help
        print(f"{prog}: error: unrecognized arguments: {' '.join(extra)} (see '{prog} --help')", file=sys.stderr)
        return 2
    import warnings

    shown = warnings.showwarning  # warnings as one line each, not Python's file:line + source
    warnings.showwarning = lambda message, category, *a, **k: print(
        f"{prog}: warning: {' '.join(str(message).split())}", file=sys.stderr)
    try:
        return int(args.func(args) or 0)
    except (ValueError, TypeError, FileNotFoundError, NotADirectoryError, IsADirectoryError) as exc:
        print(f"{prog}: error: {_as_flags(_one_line(exc), getattr(args, '_parser', None))}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"\n{prog}: interrupted", file=sys.stderr)
        return 130
    finally:
        warnings.showwarning = shown


#: Python parameter names whose command-line flag is not ``--`` + the name with dashes.
_PARAMETER_FLAGS = {"n_runs": "runs", "n_draws": "draws", "n_states": "states", "production_bias": "bias",
                    "rng seed": "seed", "max_reasks (--reask)": "reask", "protocol": "meta_protocol",
                    "scoring": "meta_scoring"}


def _as_flags(message: str, parser) -> str:
    """A check of the Python API ("n_runs must be >= 1; got 0") worded as the flag the user
    typed ("--runs must be >= 1; got 0"), where the command has that flag."""
    import re

    m = re.match(r"^([a-z_]+(?: seed| \(--reask\))?) must\b", message)
    if parser is None or not m:
        return message
    dest = _PARAMETER_FLAGS.get(m.group(1), m.group(1))
    for action in parser._actions:
        if action.dest == dest and action.option_strings:
            return action.option_strings[0] + message[m.end(1):]
    return message


def _one_line(exc: BaseException) -> str:
    """An exception as one line; an OS error names its file (``[Errno 2] ...`` is not for people)."""
    if isinstance(exc, OSError) and exc.strerror:
        return f"{exc.filename}: {exc.strerror}" if exc.filename else exc.strerror
    return " ".join(str(exc).split())


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
