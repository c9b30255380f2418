"""The ``normlab`` command line.

Each sub-package contributes its sub-commands through a light ``_cli.py`` module with a
``register(subparsers)`` function (argparse only; heavy imports happen inside the handlers):

- ``normlab simulate ...``      -- :mod:`normlab.theory._cli`
- ``normlab critical-mass ...`` -- :mod:`normlab.theory._cli`
- ``normlab llm-run ...``       -- :mod:`normlab.llm_runs._cli`
- ``normlab llm-probe ...``     -- :mod:`normlab.llm_runs._cli`
- ``normlab crsec run|analyse`` -- :mod:`normlab.llm_runs.crsec._cli`
- ``normlab scene run|score``   -- :mod:`normlab.llm_runs.scene._cli`
- ``normlab calibrate ...``     -- :mod:`normlab.calibration._cli`
- ``normlab tip ...``           -- :mod:`normlab.calibration._cli_tip` (registered by ``_cli``)
- ``normlab figures ...``       -- :mod:`normlab.figures._cli`
- ``normlab demo ...``          -- :mod:`normlab.demo._cli` (the top layer: probe, predict, check, report)
- ``normlab data``              -- :mod:`normlab.llm_runs.published._cli` (find and check the published archives)
- ``normlab study ...``         -- :mod:`normlab.study._cli` (a top layer: a blind test, predictions registered first)
- ``normlab run FILE``          -- here: an experiment file (TOML) naming any of the commands above
  (:mod:`normlab.experiment`); every command takes ``--print-config`` (the file equal to its flags)

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
from normlab.cli_output import EXIT_CODE_TABLE, EXIT_CODES, describe_os_error, emit, exit_codes  # noqa: F401  (their names here too)

_EPILOG = """\
examples:
  normlab demo --out report                     # from nothing to a report, offline (embedded SmolLM2)
  normlab simulate minimal --n-agents 24 --n-words 10 --runs 50 --seed 1
  normlab critical-mass --n-agents 24 --committed 1,2,3,4,5,6 --runs 40 --seed 1
  normlab llm-run --n-agents 24 --memory 5 --names Q,M --max-interactions 2000 --out runs/qm
  normlab llm-probe strategy --names Q,M --memory 3
  normlab crsec run --out runs/crsec --seed 1              # CRSEC norm emergence (rule-based; --ops llm)
  normlab scene score runs/scene                           # SCENE: repair rate, Spearman rho, compliance
  normlab calibrate --table llama31_70b_QM_H5 --n-agents 24
  normlab figures --small --out figs
  normlab data                                  # where the published AI-norms archives are, checked; what is missing
  normlab llm-run --n-agents 24 --memory 5 --names Q,M --max-interactions 2000 --print-config > qm.toml
  normlab run qm.toml                           # the same run from the file; [sweep] lists values to try

'normlab COMMAND --help' teaches each command by example and lists its exit codes: 0 done,
2 bad input, 3 endpoint down, 4 disk or run directory failed, 5 stopped at --budget, 130 interrupted.
"""

_CLI_MODULES = ("normlab.theory._cli", "normlab.llm_runs._cli", "normlab.llm_runs.crsec._cli",
                "normlab.llm_runs.scene._cli", "normlab.llm_runs.published._cli", "normlab.calibration._cli",
                "normlab.figures._cli", "normlab.demo._cli", "normlab.study._cli")


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
    _add_print_config(parser)
    _register_run(sub)
    _one_line_errors(parser)
    return parser


_RUN_EPILOG = """\
An experiment file names one normlab command and its flags (keys: the flags without '--',
dashes or underscores); lists under [sweep] are tried in every combination, each in its own
folder under out (default: the file's name without .toml). Every key is checked against the
command's own flags before anything runs. An API key is never written in the file: name the
environment variable that holds it (api-key-env = "MY_KEY").

  [experiment]
  command = "llm-run"
  n-agents = 8
  memory = 3
  names = "Q,M"
  max-interactions = 400
  mode = "exact"
  [sweep]
  committed = [0, 2]
  seed = [1, 2]

examples:
  normlab llm-run --n-agents 8 --memory 3 --names Q,M --max-interactions 400 --print-config > study.toml
  normlab run study.toml               # runs every step; writes study.experiment.json (the manifest)
  normlab run study.toml --plan        # the command line of each step; runs nothing
  normlab run study.toml --dry-run     # each step's estimate: requests, tokens, cost (nothing sent)
  normlab run study.toml               # again: completed LLM work answered from the journals

The manifest (OUT/experiment.json for a sweep; OUT.experiment.json beside OUT for a single step,
whose run directory OUT accepts nothing else) holds the file's text and SHA-256, normlab's version,
each step's command line, parsed arguments and exit code (secrets redacted: comments and
descriptions too), one entry per session. The file's out is read from the file's folder and must
stay inside it unless --out-anywhere is given; a [sweep] may make at most 10 000 steps.
A failing step stops the file with its exit code; completed work is kept and the same command
resumes.
"""


def _register_run(sub) -> None:
    """``normlab run FILE``: an experiment file (:mod:`normlab.experiment`, imported by the handler)."""
    p = sub.add_parser("run", help="run an experiment file (TOML): any command, its flags, sweeps; writes a manifest",
                       description="Run an experiment file: one normlab command, its flags and the values to "
                                   "sweep, with a manifest beside the results.",
                       epilog=_RUN_EPILOG + "\n" + exit_codes(llm=True),
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("file", metavar="FILE", help="the experiment file (TOML)")
    p.add_argument("--out", default=None, metavar="DIR",
                   help="output directory (default: the file's out, read from the file's folder, else the file's "
                        "name without .toml)")
    p.add_argument("--out-anywhere", action="store_true",
                   help="let the file's out lead outside the file's folder (an absolute path, '..', a link "
                        "leading out); without it such a file is refused before anything runs")
    p.add_argument("--plan", action="store_true", help="print each step's command line and run nothing")
    p.add_argument("--dry-run", action="store_true",
                   help="each step's own --dry-run estimate (requests, tokens, cost; nothing sent), where the "
                        "command has one; no manifest")
    p.add_argument("--json", action="store_true", help="print the summary (or with --plan the steps) as JSON")
    p.set_defaults(func=_run_file)


def _run_file(args) -> int:
    from normlab.experiment import run_experiment

    return run_experiment(args.file, parser=build_parser(), main=main, out=args.out, plan=args.plan,
                          dry_run=args.dry_run, as_json=args.json, out_anywhere=args.out_anywhere)


def _add_print_config(parser: argparse.ArgumentParser) -> None:
    """``--print-config`` on every command (a leaf of the tree), read by :func:`main`."""
    for action in [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]:
        for child in action.choices.values():
            if any(isinstance(a, argparse._SubParsersAction) for a in child._actions):
                _add_print_config(child)
            elif "--print-config" not in child._option_string_actions:
                child.add_argument("--print-config", action="store_true",
                                   help="print the experiment file (TOML) equal to the other flags and exit; "
                                        "'normlab run FILE' runs it")


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
    argv = sys.argv[1:] if argv is None else list(argv)
    if "--print-config" in argv and "-h" not in argv and "--help" not in argv:
        from normlab.experiment import print_config

        return print_config(parser, argv)
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
    except OSError as exc:  # writing failed: disk full, read-only, no permission (exit code 4)
        print(f"{prog}: error: {describe_os_error(exc)}", file=sys.stderr)
        return 4
    except (MemoryError, RecursionError) as exc:  # a last guard: every size and depth is checked first
        what = "more memory than this machine has" if isinstance(exc, MemoryError) else "nesting deeper than Python allows"
        print(f"{prog}: error: the input or settings need {what}; use smaller sizes", file=sys.stderr)
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
