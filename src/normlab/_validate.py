"""Argument checks shared by all sub-packages (clear errors before any work starts)."""

from __future__ import annotations

import numbers
from pathlib import Path

import numpy as np


def check_int(value, name: str, low: int | None = None, high: int | None = None) -> int:
    """Validate an integer argument (bools rejected) and return it as ``int``.

    Raises ``TypeError`` for a non-integer and ``ValueError`` outside ``[low, high]``.
    """
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an int; got {type(value).__name__} {value!r}")
    value = int(value)
    if low is not None and value < low:
        raise ValueError(f"{name} must be >= {low}; got {value}")
    if high is not None and value > high:
        raise ValueError(f"{name} must be <= {high}; got {value}")
    return value


def check_out_dir(path, flag: str = "--out") -> None:
    """Refuse an output directory that cannot be created, before any work.

    An existing file, or a path below one (``file.txt/sub``), raises ``ValueError`` naming
    ``flag``; the directory itself is created by the caller when it writes.
    """
    p = Path(path)
    if p.exists() and not p.is_dir():
        raise ValueError(f"{flag} {path} exists and is not a directory; give a new or existing directory")
    for parent in p.parents:
        if parent.exists():
            if not parent.is_dir():
                raise ValueError(f"{flag} {path}: {parent} is a file, not a directory")
            break


def check_out_file(path, flag: str, suffixes: tuple[str, ...] = ()) -> None:
    """Refuse an output file that cannot be written (a directory, a missing folder, a suffix
    other than ``suffixes``) with one ``ValueError`` naming ``flag``, before any work."""
    p = Path(path)
    if p.is_dir():
        raise ValueError(f"{flag} {path} is a directory; {flag} names a file"
                         + (f" ({' or '.join(suffixes)})" if suffixes else ""))
    if suffixes and p.suffix.lower() not in suffixes:
        raise ValueError(f"{flag} {path}: the file name must end in {' or '.join(suffixes)}")
    if not p.parent.is_dir():
        raise ValueError(f"{flag} {path}: directory {p.parent} does not exist")


def memory_cap_bytes() -> int:
    """What one population's state may take: half this machine's physical memory (8 GiB where
    the system does not say). The one memory cap of sizes read from flags and files."""
    import os

    try:
        return int(os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")) // 2
    except (AttributeError, OSError, ValueError):
        return 8 * 2**30


def max_agents() -> int:
    """Largest population a run or a run table may name: one 8-byte value per agent within
    :func:`memory_cap_bytes` (an analysis may hold one array over the population)."""
    return memory_cap_bytes() // 8
