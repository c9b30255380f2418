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


# ----------------------------------------------------------------------------- declarative constraints
# Modelled on scikit-learn's ``_param_validation``: a value object (or a function) declares, per
# parameter, the constraints a value may meet; ``validate_params`` checks them in declaration order
# and raises the first failure in one line. The messages are the ones the hand-written checks gave.
class Constraint:
    """One rule a parameter value may meet: ``check(value, name)`` returns the value (normalised,
    e.g. ``int``) or raises ``TypeError``/``ValueError`` naming ``name``."""

    def check(self, value, name: str):  # pragma: no cover - interface
        raise NotImplementedError


class Int(Constraint):
    """An int (bools refused) in ``[low, high]``: :func:`check_int`'s messages."""

    def __init__(self, low: int | None = None, high: int | None = None):
        self.low, self.high = low, high

    def check(self, value, name):
        return check_int(value, name, self.low, self.high)


class Real(Constraint):
    """A finite real number (bools refused) in ``[low, high]`` (``open_low``: ``> low``)."""

    def __init__(self, low: float | None = None, high: float | None = None, *, open_low: bool = False):
        self.low, self.high, self.open_low = low, high, open_low

    def check(self, value, name):
        import math

        if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real) or not math.isfinite(float(value)):
            raise TypeError(f"{name} must be a finite number; got {value!r}")
        v = float(value)
        if self.low is not None and (v <= self.low if self.open_low else v < self.low):
            raise ValueError(f"{name} must be {'>' if self.open_low else '>='} {self.low}; got {v}")
        if self.high is not None and v > self.high:
            raise ValueError(f"{name} must be <= {self.high}; got {v}")
        return v


class Options(Constraint):
    """One of a fixed set of values."""

    def __init__(self, *values):
        self.values = tuple(values)

    def check(self, value, name):
        if isinstance(value, (list, dict, set)) or value not in self.values:
            raise ValueError(f"{name} must be one of {self.values}; got {value!r}")
        return value


class Boolean(Constraint):
    """``True`` or ``False`` (NumPy bools too)."""

    def check(self, value, name):
        if not isinstance(value, (bool, np.bool_)):
            raise TypeError(f"{name} must be a bool; got {type(value).__name__}")
        return bool(value)


class NoneOr(Constraint):
    """``None``, or a value meeting ``inner``."""

    def __init__(self, inner: Constraint):
        self.inner = inner

    def check(self, value, name):
        return None if value is None else self.inner.check(value, name)


class Check(Constraint):
    """Any rule as a function ``fn(value, name) -> value`` raising one-line errors."""

    def __init__(self, fn):
        self.fn = fn

    def check(self, value, name):
        return self.fn(value, name)


class Relation(Constraint):
    """A rule that reads other parameters, ``fn(value, name, values) -> value``: ``values`` maps
    every parameter to its value, those declared before this one already checked and normalised
    (a cap named after its unit, a flag that needs another parameter)."""

    def __init__(self, fn):
        self.fn = fn

    def check(self, value, name, values=None):
        return self.fn(value, name, {} if values is None else values)


def validate_params(values, constraints, *, prefix: str = "") -> dict:
    """Check ``values`` (a mapping of parameter name to value) against ``constraints`` (a mapping of
    parameter name to a :class:`Constraint`, in the order they are checked) and return the values
    normalised (ints as ``int``, reals as ``float``). The first failure raises a one-line
    ``TypeError``/``ValueError`` naming the parameter (``prefix`` + name); parameters without a
    constraint pass as they are."""
    out = dict(values)
    for name, rule in constraints.items():
        if name in out:
            if isinstance(rule, Relation):
                out[name] = rule.check(out[name], prefix + name, out)
            else:
                out[name] = rule.check(out[name], prefix + name)
    return out


def validated(cls):
    """Class decorator for a frozen dataclass with ``_parameter_constraints``: its fields are
    checked (and normalised) by :func:`validate_params` when an instance is made, in the order
    the constraints are declared (a :class:`Relation` sees every field)."""
    import dataclasses

    rules = cls._parameter_constraints
    names = tuple(f.name for f in dataclasses.fields(cls))
    unknown = set(rules) - set(names)
    if unknown:
        raise TypeError(f"{cls.__name__}._parameter_constraints names no field {sorted(unknown)}")
    init = cls.__init__

    def __init__(self, *args, **kwargs):
        init(self, *args, **kwargs)  # the dataclass's own __init__ (and its __post_init__, if any)
        checked = validate_params({n: getattr(self, n) for n in names}, rules)  # every field: Relation reads them
        for n in rules:
            object.__setattr__(self, n, checked[n])

    __init__.__doc__, __init__.__wrapped__ = init.__doc__, init
    cls.__init__ = __init__
    return cls
