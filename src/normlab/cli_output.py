"""What every ``normlab`` command tells its user, one home: the exit codes (:data:`EXIT_CODE_TABLE`,
rendered into each command's ``--help`` by :func:`exit_codes`), a summary printed as aligned
lines or JSON (:func:`emit`), the JSON form of NumPy values (:func:`json_default`), and when
progress bars show (:func:`add_progress_flags`, :func:`show_progress`: one policy for every
command -- bars on a terminal, none in a pipe or a log file unless ``--progress`` asks).

A leaf module (standard library only; NumPy is imported when a value needs it): :mod:`normlab.cli`,
which reaches every layer's ``_cli.py``, and those ``_cli.py`` modules and the LLM commands' kit
(:mod:`normlab.llm_runs.core.cli_kit`) all import it at the top, so no command imports the dispatcher
that imports it.
"""

from __future__ import annotations

import json
import sys

__all__ = ["EXIT_CODE_TABLE", "EXIT_CODES", "exit_codes", "emit", "json_default", "describe_os_error",
           "add_progress_flags", "show_progress", "announce_seed", "with_seed"]

#: Every exit code of the ``normlab`` commands, one home: ``code: (what it means for a command
#: that runs no LLM, what it means for a command that calls one)``; ``None``: it does not occur there.
EXIT_CODE_TABLE = {
    0: ("done", "done (or resumed to the end); --dry-run printed its estimate"),
    2: ("bad input: a bad flag or value, a missing or unreadable file (one line saying what is wrong; no work done)",
        "bad input: a bad flag, a missing file (one line saying what is wrong and what is allowed; nothing was sent)"),
    3: (None, "the endpoint is down, refuses, or keeps failing (completed work is kept; rerun to resume)"),
    4: ("the disk failed while writing (full, read-only, no permission; one line naming the file)",
        "the disk or the run directory failed (full, read-only, journal deleted; completed work is kept)"),
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


def emit(obj: dict, as_json: bool) -> None:
    """Print a summary: JSON when ``as_json``, else aligned ``key: value`` lines (a missing value,
    ``null`` in JSON, as ``-``)."""
    if as_json:
        print(json.dumps(_no_nan(obj), indent=2, default=json_default))
        return
    width = max((len(k) for k in obj), default=0)
    for k, v in obj.items():
        if v is None or (isinstance(v, float) and v != v):
            v = "-"
        elif isinstance(v, float):
            v = f"{v:.6g}"
        elif isinstance(v, (dict, list)):
            v = json.dumps(v, default=json_default)
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


def json_default(o):
    """The ``default=`` of :func:`json.dumps` for a command's output: NumPy integers, floats (``NaN``
    as ``null``), booleans and arrays as plain JSON; anything else as its ``str``."""
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


def describe_os_error(exc: OSError) -> str:
    """A disk error in words, naming its file: ``the disk is full (out/fit.json)`` -- what exit
    code 4 prints (full, read-only, no permission, quota; else the system's own words)."""
    import errno

    what = {errno.ENOSPC: "the disk is full", errno.EROFS: "the directory is read-only",
            errno.EACCES: "permission denied", errno.EPERM: "permission denied",
            errno.EDQUOT: "the disk quota is exceeded"}.get(exc.errno)
    if what is None:
        what = exc.strerror or " ".join(str(exc).split()) or type(exc).__name__
    return what + (f" ({exc.filename})" if exc.filename else "")


def add_progress_flags(parser, *, what: str = "progress bars") -> None:
    """``--progress`` / ``--no-progress`` (``args.progress``: ``True``, ``False`` or ``None`` when
    neither is given); :func:`show_progress` reads them with the one policy of every command."""
    g = parser.add_mutually_exclusive_group()
    g.add_argument("--progress", dest="progress", action="store_const", const=True, default=None,
                   help=f"show {what} even when stderr is not a terminal (default: only on a terminal, never in a "
                        "pipe or a log file)")
    g.add_argument("--no-progress", dest="progress", action="store_const", const=False, default=None,
                   help=f"no {what}")


def show_progress(args, stream=None) -> bool:
    """Whether a command draws progress bars: as ``--progress`` / ``--no-progress`` say, else only
    when ``stream`` (default: stderr, where the bars go) is a terminal."""
    p = getattr(args, "progress", None)
    if p is not None:
        return bool(p)
    stream = sys.stderr if stream is None else stream
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # closed or replaced streams
        return False


def announce_seed(command: str, seed: int, drawn: bool) -> None:
    """Say on stderr which seed a command drew when none was given (``normlab calibrate: seed 2718281
    (drawn; rerun with --seed 2718281)``), so the run can be repeated; silent for a given seed."""
    if drawn:
        print(f"normlab {command}: seed {seed} (drawn; rerun with --seed {seed} to repeat this run)", file=sys.stderr)


def with_seed(summary: dict, seed: int, drawn: bool) -> dict:
    """``summary`` with ``seed`` and ``seed_drawn`` first: what every seeded command's ``--json`` and
    ``--out`` summary hold (rerunning with ``--seed <seed>`` gives the same output)."""
    return {"seed": int(seed), "seed_drawn": bool(drawn), **{k: v for k, v in summary.items()
                                                              if k not in ("seed", "seed_drawn")}}
