"""Restricted unpickling of plain-builtin pickles (used by the AI-norms data loader).

A pickle can execute arbitrary code when it is loaded: the ``GLOBAL`` / ``STACK_GLOBAL`` /
``INST`` / ``OBJ`` / ``EXT*`` opcodes import any callable (``os.system``, ``builtins.eval``,
``subprocess.Popen``...) and ``REDUCE`` / ``NEWOBJ`` call it. Every one of those imports goes
through :meth:`pickle.Unpickler.find_class`, so an unpickler whose ``find_class`` refuses *every*
global -- and which also refuses persistent ids -- can only build objects from the opcodes that
construct builtin values directly. :class:`RestrictedUnpickler` does that, and
:func:`restricted_loads` additionally walks the result and admits only ``dict``, ``list``,
``tuple``, ``str``, ``int``, ``float``, ``bool`` and ``None`` (no ``set``, ``bytes``...).

Memory is bounded before anything is built: :func:`scan_pickle` walks the opcodes (a compiled
pass over the bytes, :func:`_scan_ops`, with its pure-Python twin ``_scan_ops.py_func``) and
counts the values the pickle would build -- each opcode builds at most one -- stopping at
:data:`MAX_BUILT`; it refuses set, bytes and buffer opcodes and memo indices that jump ahead (a
10-byte pickle with ``LONG_BINPUT 2**28`` makes CPython's unpickler allocate and clear a 4 GB
memo table). Only a pickle that passes is built, by the C unpickler, so a refused one costs its
bytes and nothing more, whatever its compression ratio (a 32 MB pickle of fresh empty lists and
dicts in a 229 KB zip cost 3.1 GB before, with every node built, then counted).

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

import numpy as np

from normlab._jit import njit

__all__ = ["UnsafePickleError", "RestrictedUnpickler", "restricted_loads", "scan_pickle", "PLAIN_TYPES", "MAX_NODES",
           "MAX_DEPTH", "MAX_BUILT"]

#: Most container elements a loaded pickle may hold when expanded as a tree (a container shared
#: through the pickle memo counts once per reference, so memo amplification is refused before any
#: code walks it). The largest published AI-norms file holds 0.67 M.
MAX_NODES = 20_000_000
#: Deepest nesting admitted (published files: 5).
MAX_DEPTH = 64
#: Most opcodes a pickle may hold, each building at most one value (the largest published file
#: holds 0.8 M; the C unpickler needs at most about 100 bytes per opcode -- an empty dict on its
#: stack and a memo slot -- so a refused or admitted pickle costs at most about 400 MB).
MAX_BUILT = 4_000_000

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
    stack: list = [obj]  # containers to visit, and beside them their depths (two flat lists: 16 bytes
    depths: list = [1]   # an entry, where a tuple per entry took 72: 300 MB for 4 M nodes)
    while stack:
        x, depth = stack.pop(), depths.pop()
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
        stack.append(x)
        depths.append(-1)
        n_before = len(stack)
        stack.extend(v for v in items if type(v) not in scalars)
        depths.extend([depth + 1] * (len(stack) - n_before))


# ----------------------------------------------------------------------------- the opcode scan
# Argument layout of every pickle opcode (protocols 0-5, :mod:`pickletools`): 0 none; 1, 2, 4, 8
# fixed bytes; 10 one newline-terminated line; 11 two lines; 21, 24, 28 a 1-, 4- or 8-byte
# little-endian length then that many bytes; -1 not an opcode.
_ARGS = np.full(256, -1, np.int8)
for _code, _kind in {
        "I": 10, "J": 4, "K": 1, "M": 2, "L": 10, "\x8a": 21, "\x8b": 24, "S": 10, "T": 24, "U": 21, "B": 24, "C": 21,
        "\x8e": 28, "\x96": 28, "\x97": 0, "\x98": 0, "N": 0, "\x88": 0, "\x89": 0, "V": 10, "\x8c": 21, "X": 24,
        "\x8d": 28, "F": 10, "G": 8, "]": 0, "a": 0, "e": 0, "l": 0, ")": 0, "t": 0, "\x85": 0, "\x86": 0, "\x87": 0,
        "}": 0, "d": 0, "s": 0, "u": 0, "\x8f": 0, "\x90": 0, "\x91": 0, "0": 0, "2": 0, "(": 0, "1": 0, "g": 10,
        "h": 1, "j": 4, "p": 10, "q": 1, "r": 4, "\x94": 0, "\x82": 1, "\x83": 2, "\x84": 4, "c": 11, "\x93": 0,
        "R": 0, "b": 0, "i": 11, "o": 0, "\x81": 0, "\x92": 0, "\x80": 1, ".": 0, "\x95": 8, "P": 10, "Q": 0}.items():
    _ARGS[ord(_code)] = _kind
#: Opcodes building a value of a type no restricted pickle may hold, refused before building.
_REFUSED_TYPES = {0x8F: "builtins.set", 0x90: "builtins.set", 0x91: "builtins.frozenset", 0x42: "builtins.bytes",
                  0x43: "builtins.bytes", 0x8E: "builtins.bytes", 0x96: "builtins.bytearray",
                  0x97: "an out-of-band buffer", 0x98: "an out-of-band buffer"}
_EXTENSIONS = (0x82, 0x83, 0x84)  # EXT1, EXT2, EXT4: a global by number (copyreg's registry)
#: 0: admitted; 1: refused (a type above or an extension code); 2: loads a global or a persistent
#: id (GLOBAL, STACK_GLOBAL, INST, PERSID, BINPERSID): the scan stops there and the unpickler's
#: ``find_class``/``persistent_load`` refuses it, naming it, before anything runs.
_REFUSED = np.zeros(256, np.int8)
_REFUSED[[*_REFUSED_TYPES, *_EXTENSIONS]] = 1
_REFUSED[[0x63, 0x93, 0x69, 0x50, 0x51]] = 2

(SCAN_OK, SCAN_TOO_MANY, SCAN_MEMO_JUMP, SCAN_REFUSED_TYPE, SCAN_TRUNCATED, SCAN_UNKNOWN, SCAN_NO_STOP,
 SCAN_GLOBAL) = range(8)


@njit(cache=True)
def _scan_ops(data, args, refused, max_ops):
    """Walk the opcodes of ``data`` (uint8) without building anything: ``(status, byte offset,
    opcodes counted, detail)``; status ``SCAN_*`` (detail: the opcode refused or unknown).
    ``args``: :data:`_ARGS`; ``refused``: :data:`_REFUSED`; stops at ``STOP``, at the first
    opcode loading a global, or after ``max_ops`` opcodes."""
    n = data.shape[0]
    pos = 0
    ops = 0
    memo = 0  # memo slots in use: a PUT may refill one or add the next, never jump ahead
    while pos < n:
        op = np.int64(data[pos])
        start = pos
        kind = np.int64(args[op])
        if kind < 0:
            return SCAN_UNKNOWN, start, ops, op
        if refused[op] == 1:
            return SCAN_REFUSED_TYPE, start, ops, op
        if refused[op] == 2:
            return SCAN_GLOBAL, start, ops, op
        ops += 1
        if ops > max_ops:
            return SCAN_TOO_MANY, start, ops, 0
        pos += 1
        if op == 46:  # STOP
            return SCAN_OK, start, ops, 0
        if kind == 0:
            if op == 148:  # MEMOIZE
                memo += 1
            continue
        if kind <= 8:  # fixed-size argument
            if pos + kind > n:
                return SCAN_TRUNCATED, start, ops, op
            pos += kind
            if op == 113 or op == 114:  # BINPUT, LONG_BINPUT: a 1- or 4-byte memo index
                idx = np.int64(0)
                for k in range(kind - 1, -1, -1):
                    idx = idx * 256 + np.int64(data[pos - kind + k])
                if idx > memo:
                    return SCAN_MEMO_JUMP, start, ops, op
                if idx == memo:
                    memo += 1
            continue
        if kind == 10 or kind == 11:  # newline-terminated line(s)
            lines = kind - 9
            idx = np.int64(0)
            digits = True
            first = pos
            while lines > 0:
                if pos >= n:
                    return SCAN_TRUNCATED, start, ops, op
                c = np.int64(data[pos])
                pos += 1
                if c == 10:
                    lines -= 1
                elif lines == 1 and kind == 10:
                    if 48 <= c <= 57 and idx < (np.int64(1) << 40):
                        idx = idx * 10 + (c - 48)
                    else:
                        digits = False
            if op == 112:  # PUT: a decimal memo index
                if not digits or pos - 1 == first:
                    return SCAN_TRUNCATED, start, ops, op
                if idx > memo:
                    return SCAN_MEMO_JUMP, start, ops, op
                if idx == memo:
                    memo += 1
            continue
        width = kind - 20  # length-prefixed
        if pos + width > n:
            return SCAN_TRUNCATED, start, ops, op
        size = np.int64(0)
        for k in range(width - 1, -1, -1):
            size = size * 256 + np.int64(data[pos + k])
            if size > n:  # larger than the whole pickle: no need to read further bytes
                return SCAN_TRUNCATED, start, ops, op
        pos += width
        if size > n - pos:
            return SCAN_TRUNCATED, start, ops, op
        pos += size
    return SCAN_NO_STOP, n, ops, 0


def scan_pickle(data, *, source: str = "<bytes>", max_built: int = MAX_BUILT) -> int:
    """Count the values a pickle would build, before building any; refuse what could take
    memory out of proportion to its bytes.

    Parameters
    ----------
    data : bytes-like
        The pickle.
    source : str
        Name used in error messages.
    max_built : int
        Most opcodes admitted (each builds at most one value), :data:`MAX_BUILT` by default.

    Returns
    -------
    int
        The opcodes up to ``STOP``.

    Raises
    ------
    UnsafePickleError
        A set, frozenset, bytes, bytearray, out-of-band buffer or extension-code opcode (refused
        before building). The scan stops at an opcode loading a global or a persistent id: the
        unpickler refuses it there, naming it.
    ValueError
        More than ``max_built`` opcodes (a memory bomb), a memo index jumping ahead of the memo,
        an unknown opcode, an argument running past the end, no ``STOP``.
    """
    buf = np.frombuffer(memoryview(data).cast("B"), dtype=np.uint8)
    status, where, ops, detail = _scan_ops(buf, _ARGS, _REFUSED, np.int64(max_built))
    if status == SCAN_OK or status == SCAN_GLOBAL:  # a global: the unpickler refuses it there, naming it
        return int(ops)
    if status == SCAN_TOO_MANY:
        raise ValueError(f"{source}: builds more than {max_built:,} values (stopped counting at byte {where:,} of "
                         f"{len(buf):,}); refused as a memory bomb before building any")
    if status == SCAN_REFUSED_TYPE and int(detail) in _EXTENSIONS:
        raise UnsafePickleError(f"{source}: refused to load a global by extension code (opcode at byte {where:,}); "
                                f"AI-norms pickles may contain only plain builtins ({_PLAIN_NAMES}) and no globals")
    if status == SCAN_REFUSED_TYPE:
        raise UnsafePickleError(f"{source}: refused object of type {_REFUSED_TYPES[int(detail)]} (opcode at byte "
                                f"{where:,}); only plain builtins ({_PLAIN_NAMES}) are allowed")
    if status == SCAN_MEMO_JUMP:
        raise ValueError(f"{source}: a memo index jumps ahead of the memo at byte {where:,} (it would make the "
                         "unpickler allocate a table of that size); refused as a memory bomb")
    why = {SCAN_TRUNCATED: f"the argument of opcode {int(detail):#04x} at byte {where:,} runs past the end or is "
                           "malformed",
           SCAN_UNKNOWN: f"unknown opcode {int(detail):#04x} at byte {where:,}",
           SCAN_NO_STOP: "no STOP opcode (truncated)"}[int(status)]
    raise ValueError(f"{source} is not a valid pickle of plain builtins: {why}")


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
    :func:`scan_pickle` counts the opcodes first and refuses more than :data:`MAX_BUILT`, set and
    bytes opcodes and memo jumps, so memory while unpickling stays below about 100 bytes per
    admitted opcode whatever the pickle holds; the tree-expanded count (:data:`MAX_NODES`, memo
    references counted per use) and the depth are checked on the result.

    References
    ----------
    .. [1] Python documentation, "pickle -- Restricting Globals".
    """
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise TypeError(f"{source}: expected the pickle as bytes; got {type(data).__name__}")
    scan_pickle(data, source=source)  # bounded before anything is built
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
