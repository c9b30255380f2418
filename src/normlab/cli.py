"""The ``normlab`` command line.

Each sub-package contributes its sub-commands through a light ``_cli.py`` module with a
``register(subparsers)`` function (argparse only; heavy imports happen inside the handlers):

- ``normlab simulate ...``      -- :mod:`normlab.theory._cli`
- ``normlab critical-mass ...`` -- :mod:`normlab.theory._cli`
- ``normlab llm-run ...``       -- :mod:`normlab.llm_runs._cli`
- ``normlab llm-probe ...``     -- :mod:`normlab.llm_runs._cli`
- ``normlab calibrate ...``     -- :mod:`normlab.calibration._cli`
- ``normlab tip ...``           -- :mod:`normlab.calibration._cli_tip` (registered by ``_cli``)
- ``normlab figures ...``       -- :mod:`normlab.figures._cli`
- ``normlab demo ...``          -- :mod:`normlab.demo._cli` (the top layer: probe, predict, check, report)

Every parser prints a bad flag as one line (what is wrong, where the help is), and ``main``
prints a bad value, a missing file or an interrupt as one line too, with the exit codes of
:data:`EXIT_CODE_TABLE`. The exit codes, :func:`emit` and the JSON of NumPy values live in the leaf
:mod:`normlab.cli_output` (the ``_cli.py`` modules import them from there; their names here stay).
"""

from __future__ import annotations

import argparse
import importlib
import sys

from normlab import __version__
from normlab.cli_output import EXIT_CODE_TABLE, EXIT_CODES, emit, exit_codes  # noqa: F401  (their names here too)

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
