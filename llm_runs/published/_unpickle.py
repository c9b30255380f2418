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

__all__ = ["UnsafePickleError", "RestrictedUnpickler", "restricted_loads", "PLAIN_TYPES", "MAX_NODES", "MAX_DEPTH"]

#: Most container elements a loaded pickle may hold when expanded as a tree (a container shared
#: through the pickle memo counts once per reference, so memo amplification is refused before any
#: code walks it). The largest published AI-norms file holds 0.67 M.
MAX_NODES = 20_000_000
#: Deepest nesting admitted (published files: 5).
MAX_DEPTH = 64

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


def _check_plain(obj, source: str, *, max_nodes: int = MAX_NODES, max_depth: int = MAX_DEPTH) -> None:
    """Check that ``obj`` holds only :data:`PLAIN_TYPES`, at most ``max_nodes`` elements when
    expanded as a tree and at most ``max_depth`` levels.

    Shared containers are counted once per reference (what a consumer walking the data would
    touch); a reference back to a container on the current path (a cycle) counts once and is
    not followed.
    """
    plain = set(PLAIN_TYPES)
    scalars = {str, int, float, bool, type(None)}
    if type(obj) in scalars:
        return
    nodes = 0
    on_path: set[int] = set()
    stack: list = [(obj, 1)]
    while stack:
        x, depth = stack.pop()
        if depth < 0:  # exit marker: leave the container
            on_path.discard(id(x))
            continue
        tx = type(x)
        if tx not in plain:
            raise UnsafePickleError(
                f"{source}: refused object of type {tx.__module__}.{tx.__qualname__}; only plain builtins "
                f"({_PLAIN_NAMES}) are allowed"
            )
        if id(x) in on_path:  # a cycle: no code involved, but not walked again
            continue
        if depth > max_depth:
            raise ValueError(f"{source}: nesting deeper than {max_depth} levels; refused (published files nest 5 deep)")
        items = (*x.keys(), *x.values()) if tx is dict else x
        nodes += len(items)
        if nodes > max_nodes:
            raise ValueError(
                f"{source}: holds more than {max_nodes:,} elements when expanded (shared references count each "
                "time); refused as a memory bomb"
            )
        kinds = set(map(type, items))
        if kinds <= scalars:  # fast path (C-level type scan): a container of scalars only
            continue
        on_path.add(id(x))
        stack.append((x, -1))
        stack.extend((v, depth + 1) for v in items if type(v) not in scalars)


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
        If ``data`` is not a valid pickle (truncated, corrupt...), nests deeper than
        :data:`MAX_DEPTH`, or expands to more than :data:`MAX_NODES` elements (memo references).

    Notes
    -----
    Memory while unpickling is bounded by the size of ``data`` (at most about 40 bytes of objects
    per pickle byte, for a pickle made only of tiny containers): callers cap the input size
    (:data:`normlab.llm_runs.published.ainorms.MAX_FILE_BYTES`).

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
        raise ValueError(f"{source}: ran out of memory while unpickling; refused") from None
    except RecursionError:
        raise ValueError(f"{source}: nests too deeply to unpickle; refused") from None
    except Exception as exc:  # corrupt/truncated data raises many different types
        raise ValueError(f"{source} is not a valid pickle of plain builtins: {type(exc).__name__}: {exc}") from None
    _check_plain(obj, source)
    return obj
