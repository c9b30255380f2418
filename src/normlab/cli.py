"""The ``normlab`` command line.

Each sub-package contributes its sub-commands through a light ``_cli.py`` module with a
``register(subparsers)`` function (argparse only; heavy imports happen inside the handlers):

- ``normlab simulate ...``      -- :mod:`normlab.theory._cli`
- ``normlab critical-mass ...`` -- :mod:`normlab.theory._cli`
- ``normlab llm-run ...``       -- :mod:`normlab.llm_runs._cli`
- ``normlab calibrate ...``     -- :mod:`normlab.calibration._cli`
- ``normlab figures ...``       -- :mod:`normlab.figures._cli`
- ``normlab demo ...``          -- :mod:`normlab.demo._cli` (the top layer: probe, predict, check, report)
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys

from normlab import __version__

_CLI_MODULES = ("normlab.theory._cli", "normlab.llm_runs._cli", "normlab.calibration._cli",
                "normlab.figures._cli", "normlab.demo._cli")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="normlab",
        description="Conventions and norms in populations of LLM agents: theory, LLM runs, calibration.",
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
    return parser


def emit(obj: dict, as_json: bool) -> None:
    """Print a summary: JSON when ``as_json``, else aligned ``key: value`` lines."""
    if as_json:
        print(json.dumps(obj, indent=2, default=_json_default))
        return
    width = max((len(k) for k in obj), default=0)
    for k, v in obj.items():
        if isinstance(v, float):
            v = f"{v:.6g}"
        elif isinstance(v, (dict, list)):
            v = json.dumps(v, default=_json_default)
        print(f"{k:<{width}}  {v}")


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
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except (ValueError, TypeError, FileNotFoundError) as exc:
        print(f"normlab {args.command}: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
