"""Restricted unpickling of plain-builtin pickles (used by the AI-norms data loader).

A pickle can execute arbitrary code when it is loaded: the ``GLOBAL`` / ``STACK_GLOBAL`` /
``INST`` / ``OBJ`` / ``EXT*`` opcodes import any callable (``os.system``, ``builtins.eval``,
``subprocess.Popen``...) and ``REDUCE`` / ``NEWOBJ`` call it. Every one of those imports goes
through :meth:`pickle.Unpickler.find_class`, so an unpickler whose ``find_class`` refuses *every*
global -- and which also refuses persistent ids -- can only build objects from the opcodes that
construct builtin values directly. :class:`RestrictedUnpickler` does that, and
:func:`restricted_loads` additionally walks the result and admits only ``dict``, ``list``,
``tuple``, ``str``, ``int``, ``float``, ``bool`` and ``None`` (no ``set``, ``bytes``...).

References
----------
.. [1] Python documentation, "pickle -- Restricting Globals",
   https://docs.python.org/3/library/pickle.html#restricting-globals
.. [2] A. Flint Ashery, L. M. Aiello, A. Baronchelli, "Emergent social conventions and collective
   bias in LLM populations", Science Advances 11(20), eadu9368 (2025); data repository
   Ariel-Flint-Ashery/AI-norms, commit e57aeef151a46108fd1521c66e345e557e57dbf6.
"""

from __future__ import annotations

import io
import pickle

__all__ = ["UnsafePickleError", "RestrictedUnpickler", "restricted_loads", "PLAIN_TYPES"]

#: The only types a restricted pickle may contain.
PLAIN_TYPES = (dict, list, tuple, str, int, float, bool, type(None))
_PLAIN_NAMES = "dict, list, tuple, str, int, float, bool, None"


class UnsafePickleError(pickle.UnpicklingError, ValueError):
    """A pickle tried to load a global, a persistent id, or held a non-plain object.

    Subclasses both :class:`pickle.UnpicklingError` and :class:`ValueError` (bad input).
    """


class RestrictedUnpickler(pickle.Unpickler):
    """An unpickler that refuses every global and every persistent id.

    Parameters
    ----------
    file : binary file-like
        As for :class:`pickle.Unpickler`.
    source : str, optional
        Name used in error messages (file or archive member).

    Notes
    -----
    Refusing :meth:`find_class` for *all* modules (rather than allow-listing "safe" ones) is
    what makes the loader safe: nothing callable can reach the unpickler's stack, so
    ``REDUCE``/``NEWOBJ``/``BUILD`` cannot run user code.
    """

    def __init__(self, file, *, source: str = "<pickle>"):
        super().__init__(file)
        self._source = source

    def find_class(self, module, name):  # noqa: D401 - pickle API
        raise UnsafePickleError(
            f"{self._source}: refused to load global {module}.{name}; AI-norms pickles may contain "
            f"only plain builtins ({_PLAIN_NAMES}) and no globals"
        )

    def persistent_load(self, pid):  # noqa: D401 - pickle API
        raise UnsafePickleError(
            f"{self._source}: refused persistent id {pid!r}; only plain builtins ({_PLAIN_NAMES}) are allowed"
        )


def _check_plain(obj, source: str) -> None:
    """Iteratively check that ``obj`` holds only :data:`PLAIN_TYPES` (cycles allowed)."""
    stack = [obj]
    seen: set[int] = set()
    plain = set(PLAIN_TYPES)
    scalars = {str, int, float, bool, type(None)}
    while stack:
        x = stack.pop()
        tx = type(x)
        if tx in scalars:
            continue
        if tx not in plain:
            raise UnsafePickleError(
                f"{source}: refused object of type {tx.__module__}.{tx.__qualname__}; only plain builtins "
                f"({_PLAIN_NAMES}) are allowed"
            )
        # fast path (C-level type scan): a container of scalars only
        if tx is dict:
            if set(map(type, x.keys())) <= scalars and set(map(type, x.values())) <= scalars:
                continue
        elif set(map(type, x)) <= scalars:
            continue
        if id(x) in seen:  # shared or recursive containers are walked once
            continue
        seen.add(id(x))
        if tx is dict:
            for k, v in x.items():
                if type(k) not in scalars:
                    stack.append(k)
                if type(v) not in scalars:
                    stack.append(v)
        else:  # list or tuple
            for v in x:
                if type(v) not in scalars:
                    stack.append(v)


def restricted_loads(data, *, source: str = "<bytes>"):
    """Unpickle ``data`` admitting plain builtins only.

    Parameters
    ----------
    data : bytes, bytearray or memoryview
        The pickle.
    source : str, optional
        Name used in error messages.

    Returns
    -------
    object
        A structure made of ``dict``, ``list``, ``tuple``, ``str``, ``int``, ``float``, ``bool``
        and ``None`` only.

    Raises
    ------
    TypeError
        If ``data`` is not bytes-like.
    UnsafePickleError
        If the pickle references any global (e.g. ``os.system``, ``builtins.eval``,
        ``subprocess.Popen``, ``numpy`` reconstructors), uses a persistent id, or produces an
        object of another type (``set``, ``bytes``...). Nothing is executed.
    ValueError
        If ``data`` is not a valid pickle (truncated, corrupt...).

    References
    ----------
    .. [1] Python documentation, "pickle -- Restricting Globals".
    """
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise TypeError(f"{source}: expected the pickle as bytes; got {type(data).__name__}")
    try:
        obj = RestrictedUnpickler(io.BytesIO(data), source=source).load()
    except UnsafePickleError:
        raise
    except MemoryError:
        raise
    except Exception as exc:  # corrupt/truncated data raises many different types
        raise ValueError(f"{source} is not a valid pickle of plain builtins: {type(exc).__name__}: {exc}") from None
    _check_plain(obj, source)
    return obj
