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
import math
import pickle

import numpy as np

from normlab._jit import njit

__all__ = ["UnsafePickleError", "RestrictedUnpickler", "restricted_loads", "scan_pickle", "PLAIN_TYPES", "MAX_NODES",
           "MAX_DEPTH", "MAX_BUILT", "MAX_COLLISION_WORK"]

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


# --------------------------------------------------------------- the work of building dicts
#: Most key comparisons the dicts of a pickle may cost beyond one per key (every key inserted into a
#: dict that already holds keys of the same hash costs one more each: distinct ints equal modulo
#: 2**61 - 1, floats 2**61 apart, tuples of them, all collide in CPython's hash and make building a
#: dict quadratic: a 184 KB zip took 62.6 s). Published files: 0 (their keys are str and small int).
MAX_COLLISION_WORK = 1_000_000

# what the stack model knows of a value: its kind, and for a hashable value of known hash the hash
_K_OTHER, _K_HASHED, _K_RANDOM, _K_DICT, _K_TEXTFLOAT, _K_LIST, _K_UNHASHABLE = range(7)
(WORK_OK, WORK_TOO_MUCH, WORK_MALFORMED) = range(3)
_P61 = (1 << 61) - 1
_XX1, _XX2, _XX5 = 11400714785074694791, 14029467366897019727, 2870177450012600261


@njit(cache=True)
def _mod_p(x):
    """``x`` (uint64) modulo 2**61 - 1."""
    p = np.uint64(_P61)
    x = (x & p) + (x >> np.uint64(61))
    if x >= p:
        x -= p
    return x


@njit(cache=True)
def _shl_mod(h, k):
    """``h * 2**k`` modulo 2**61 - 1 (``h`` < 2**61, 0 <= ``k`` < 61): a rotation within 61 bits."""
    if k == 0:
        return h
    p = np.uint64(_P61)
    kk = np.uint64(k)
    return ((h << kk) & p) | (h >> (np.uint64(61) - kk))


@njit(cache=True)
def _signed_hash(mag, negative):
    """CPython's hash of an int of magnitude ``mag`` modulo 2**61 - 1 (``-1`` becomes ``-2``)."""
    h = np.int64(mag)
    if negative:
        h = -h
    if h == -1:
        h = -2
    return h


@njit(cache=True)
def _hash_le(data, start, width):
    """CPython's hash of the little-endian two's-complement int in ``data[start:start+width]``."""
    if width == 0:
        return np.int64(0)
    negative = data[start + width - 1] >= 128
    h = np.uint64(0)
    for k in range(width - 1, -1, -1):  # most significant byte first: h = h * 256 + byte, modulo P
        b = np.uint64(data[start + k])
        if negative:
            b = np.uint64(255) - b  # ones' complement: |x| = ~u + 1
        h = _mod_p(_shl_mod(h, 8) + b)
    if negative:
        h = _mod_p(h + np.uint64(1))
    return _signed_hash(h, negative)


@njit(cache=True)
def _hash_decimal(data, start, end):
    """CPython's hash of the decimal int written in ``data[start:end]`` (a sign, digits, an ``L``);
    ``(hash, ok)``."""
    pos = start
    negative = False
    if pos < end and (data[pos] == 45 or data[pos] == 43):
        negative = data[pos] == 45
        pos += 1
    h = np.uint64(0)
    digits = 0
    while pos < end:
        c = np.int64(data[pos])
        if c == 76 and pos == end - 1:  # the L of protocol 0's LONG
            break
        if c < 48 or c > 57:
            return np.int64(0), False
        h = _mod_p(_mod_p(_shl_mod(h, 3) + _shl_mod(h, 1)) + np.uint64(c - 48))  # h * 10 + digit
        digits += 1
        pos += 1
    return _signed_hash(h, negative), digits > 0


@njit(cache=True)
def _hash_float(v):
    """CPython's hash of a finite or infinite float (``_Py_HashDouble``); NaN: ``(0, False)``."""
    if v != v:
        return np.int64(0), False
    if v == np.inf:
        return np.int64(314159), True
    if v == -np.inf:
        return np.int64(-314159), True
    m, e = math.frexp(v)
    negative = m < 0
    if negative:
        m = -m
    x = np.uint64(0)
    while m != 0.0:
        x = _shl_mod(x, 28)
        m *= 268435456.0
        e -= 28
        y = np.uint64(np.int64(m))
        m -= np.float64(y)
        x = _mod_p(x + y)
    e = e % 61 if e >= 0 else 60 - ((-1 - e) % 61)
    x = _shl_mod(x, e)
    return _signed_hash(x, negative), True


@njit(cache=True)
def _tuple_hash(lanes, n):
    """CPython's tuple hash (xxHash-based) of the hashes ``lanes[:n]``."""
    acc = np.uint64(_XX5)
    for i in range(n):
        acc += np.uint64(lanes[i]) * np.uint64(_XX2)
        acc = (acc << np.uint64(31)) | (acc >> np.uint64(33))
        acc *= np.uint64(_XX1)
    acc += np.uint64(n) ^ (np.uint64(_XX5) ^ np.uint64(3527539))
    if acc == np.uint64(0xFFFFFFFFFFFFFFFF):
        return np.int64(1546275796)
    return np.int64(acc)


@njit(cache=True)
def _grow(a, need):
    if need < a.shape[0]:
        return a
    b = np.empty(max(2 * a.shape[0], need + 1), a.dtype)
    b[:a.shape[0]] = a
    return b


@njit(cache=True)
def _count_key(keys_d, keys_h, counts, used, d, h):
    """Count one insertion of a key of hash ``h`` into dict ``d``: the insertions it follows in that
    dict under that hash (open addressing over ``(d, h)``; the table is grown by the caller)."""
    mask = keys_d.shape[0] - 1
    i = np.int64((np.uint64(d) * np.uint64(0x9E3779B97F4A7C15) ^ np.uint64(h) * np.uint64(0xC2B2AE3D27D4EB4F))
                 >> np.uint64(20)) & mask
    while True:
        if counts[i] == 0:
            keys_d[i], keys_h[i], counts[i] = d, h, 1
            used[0] += 1
            return 0
        if keys_d[i] == d and keys_h[i] == h:
            counts[i] += 1
            return counts[i] - 1
        i = (i + 1) & mask


@njit(cache=True)
def _dict_work(data, args, max_work, cap):
    """Model the pickle's stack without building anything: each value's kind and, for ints, floats,
    booleans, None and tuples of them, the hash CPython gives it; at every dict insertion
    (``SETITEM``, ``SETITEMS``, ``DICT``) count the keys already in that dict under the same hash
    (strings: their hash is salted per process, they cannot be made to collide). Returns
    ``(status, byte offset, work)``: ``WORK_TOO_MUCH`` past ``max_work`` comparisons. ``cap``: the
    opcodes counted by :func:`_scan_ops` (no stack, memo or mark list can be longer)."""
    n = data.shape[0]
    sk = np.empty(cap + 1, np.int8)   # stack: kind
    sh = np.empty(cap + 1, np.int64)  # hash (or a unique stand-in for salted values)
    sid = np.empty(cap + 1, np.int64)  # container id (dicts)
    top = 0
    marks = np.empty(cap + 1, np.int64)
    nm = 0
    mk = np.empty(cap + 1, np.int8)
    mh = np.empty(cap + 1, np.int64)
    mid = np.empty(cap + 1, np.int64)
    nmemo = 0
    lanes = np.empty(16, np.int64)
    keys_d = np.zeros(1024, np.int64)
    keys_h = np.zeros(1024, np.int64)
    counts = np.zeros(1024, np.int64)
    used = np.zeros(1, np.int64)
    next_id = 1
    work = 0
    pos = 0
    while pos < n:
        op = np.int64(data[pos])
        start = pos
        kind = np.int64(args[op])
        pos += 1
        arg0 = pos
        alen = 0
        if kind > 0 and kind <= 8:
            alen = kind
            pos += kind
        elif kind == 10 or kind == 11:
            lines = kind - 9
            while lines > 0 and pos < n:
                if data[pos] == 10:
                    lines -= 1
                pos += 1
            alen = pos - arg0 - 1  # the first (or only) line without its newline
        elif kind >= 21:
            width = kind - 20
            size = np.int64(0)
            for k in range(width - 1, -1, -1):
                size = size * 256 + np.int64(data[arg0 + k])
            arg0 = pos + width
            alen = size
            pos = arg0 + size
        if pos > n:
            return WORK_MALFORMED, start, work
        # ---------------------------------------------------------------- values pushed
        pk = -1
        ph = np.int64(0)
        if op == 73 or op == 76:  # INT, LONG (text)
            h, ok = _hash_decimal(data, arg0, arg0 + alen)
            if not ok:
                return WORK_MALFORMED, start, work
            pk, ph = _K_HASHED, h
        elif op == 74:  # BININT: 4-byte signed
            pk, ph = _K_HASHED, _hash_le(data, arg0, 4)
        elif op == 75 or op == 77:  # BININT1, BININT2: unsigned
            v = np.int64(data[arg0])
            if op == 77:
                v += np.int64(data[arg0 + 1]) * 256
            pk, ph = _K_HASHED, v
        elif op == 138 or op == 139:  # LONG1, LONG4
            pk, ph = _K_HASHED, _hash_le(data, arg0, alen)
        elif op == 71:  # BINFLOAT: 8-byte big-endian double
            u = np.uint64(0)
            for k in range(8):
                u = (u << np.uint64(8)) | np.uint64(data[arg0 + k])
            v = np.array([u]).view(np.float64)[0]
            h, ok = _hash_float(v)
            pk, ph = (_K_HASHED, h) if ok else (_K_RANDOM, np.int64(start))
        elif op == 70:  # FLOAT (text): its hash is not computed here
            pk, ph = _K_TEXTFLOAT, np.int64(0)
        elif op == 83 or op == 84 or op == 85 or op == 86 or op == 88 or op == 140 or op == 141:  # strings
            pk, ph = _K_RANDOM, np.int64(start)
        elif op == 78:  # NONE
            pk, ph = _K_HASHED, np.int64(0x3C5A7E91)
        elif op == 136 or op == 137:  # NEWTRUE, NEWFALSE
            pk, ph = _K_HASHED, np.int64(1 if op == 136 else 0)
        elif op == 93:  # EMPTY_LIST
            pk = _K_LIST
        elif op == 125:  # EMPTY_DICT
            pk, ph = _K_DICT, np.int64(0)
        elif op == 41:  # EMPTY_TUPLE
            pk, ph = _K_HASHED, _tuple_hash(lanes, 0)
        if pk >= 0:
            sk[top], sh[top] = pk, ph
            if pk == _K_DICT:
                sid[top] = next_id
                next_id += 1
            else:
                sid[top] = 0
            top += 1
            continue
        base = marks[nm - 1] if nm > 0 else 0
        if op == 40:  # MARK
            marks[nm] = top
            nm += 1
        elif op == 46:  # STOP
            return WORK_OK, start, work
        elif op == 128 or op == 149:  # PROTO, FRAME
            pass
        elif op == 99 or op == 147 or op == 105 or op == 80 or op == 81:  # a global: the unpickler refuses it
            return WORK_OK, start, work
        elif op == 48:  # POP: an item, or a mark
            if top > base:
                top -= 1
            elif nm > 0:
                nm -= 1
            else:
                return WORK_MALFORMED, start, work
        elif op == 50:  # DUP
            if top <= base:
                return WORK_MALFORMED, start, work
            sk[top], sh[top], sid[top] = sk[top - 1], sh[top - 1], sid[top - 1]
            top += 1
        elif op == 49:  # POP_MARK
            if nm == 0:
                return WORK_MALFORMED, start, work
            top = base
            nm -= 1
        elif op == 103 or op == 104 or op == 106:  # GET, BINGET, LONG_BINGET
            if op == 103:
                idx = np.int64(0)
                for k in range(alen):
                    idx = idx * 10 + (np.int64(data[arg0 + k]) - 48)
            elif op == 104:
                idx = np.int64(data[arg0])
            else:  # LONG_BINGET: 4 bytes, unsigned
                idx = np.int64(data[arg0]) + np.int64(data[arg0 + 1]) * 256 + \
                    np.int64(data[arg0 + 2]) * 65536 + np.int64(data[arg0 + 3]) * 16777216
            if idx < 0 or idx >= nmemo or mk[idx] < 0:
                return WORK_MALFORMED, start, work
            sk[top], sh[top], sid[top] = mk[idx], mh[idx], mid[idx]
            top += 1
        elif op == 112 or op == 113 or op == 114 or op == 148:  # PUT, BINPUT, LONG_BINPUT, MEMOIZE
            if top <= base:
                return WORK_MALFORMED, start, work
            if op == 148:
                idx = nmemo
            elif op == 112:
                idx = np.int64(0)
                for k in range(alen):
                    idx = idx * 10 + (np.int64(data[arg0 + k]) - 48)
            elif op == 113:
                idx = np.int64(data[arg0])
            else:
                idx = np.int64(data[arg0]) + np.int64(data[arg0 + 1]) * 256 + \
                    np.int64(data[arg0 + 2]) * 65536 + np.int64(data[arg0 + 3]) * 16777216
            if idx < 0 or idx > nmemo:  # the opcode scan refused memo jumps already
                return WORK_MALFORMED, start, work
            if idx == nmemo:
                nmemo += 1
            mk[idx], mh[idx], mid[idx] = sk[top - 1], sh[top - 1], sid[top - 1]
        elif op == 97:  # APPEND
            if top - 1 <= base:
                return WORK_MALFORMED, start, work
            top -= 1
        elif op == 101:  # APPENDS: pop to the mark
            if nm == 0 or base < 1:
                return WORK_MALFORMED, start, work
            top = base
            nm -= 1
        elif op == 108 or op == 116 or op == 133 or op == 134 or op == 135 or op == 111:
            # LIST, TUPLE (to the mark), TUPLE1/2/3 (the top 1-3), OBJ (to the mark): one value replaces them
            if op == 133 or op == 134 or op == 135:
                first = top - (op - 132)
                if first < base:
                    return WORK_MALFORMED, start, work
            else:
                if nm == 0:
                    return WORK_MALFORMED, start, work
                first = base
                nm -= 1
            count = top - first
            if op == 108:
                vk, vh = _K_LIST, np.int64(0)
            elif op == 111:
                vk, vh = _K_OTHER, np.int64(0)
            else:
                vk = _K_HASHED
                if count >= lanes.shape[0]:
                    lanes = _grow(lanes, count)
                for i in range(count):
                    ki = sk[first + i]
                    if ki == _K_HASHED:
                        lanes[i] = sh[first + i]
                    elif ki == _K_RANDOM and vk == _K_HASHED:
                        vk = _K_RANDOM
                    elif ki == _K_TEXTFLOAT and vk != _K_UNHASHABLE:
                        vk = _K_TEXTFLOAT
                    elif ki != _K_RANDOM and ki != _K_TEXTFLOAT:
                        vk = _K_UNHASHABLE
                vh = _tuple_hash(lanes, count) if vk == _K_HASHED else np.int64(start)
            top = first
            sk[top], sh[top], sid[top] = vk, vh, 0
            top += 1
        elif op == 115 or op == 117 or op == 100:  # SETITEM, SETITEMS, DICT
            if op == 115:
                first = top - 2
                if first - 1 < base:
                    return WORK_MALFORMED, start, work
                target = first - 1
            else:
                if nm == 0:
                    return WORK_MALFORMED, start, work
                first = base
                nm -= 1
                if (top - first) % 2:
                    return WORK_MALFORMED, start, work
                if op == 117:
                    target = first - 1
                    if target < 0:
                        return WORK_MALFORMED, start, work
                else:
                    target = -1
            d = sid[target] if target >= 0 and sk[target] == _K_DICT else next_id
            if op == 100:
                next_id += 1
            for i in range(first, top, 2):
                ki = sk[i]
                if ki == _K_HASHED or ki == _K_TEXTFLOAT:  # salted and unhashable keys are never counted
                    if 2 * (used[0] + 1) > keys_d.shape[0]:  # keep the table at most half full
                        old_d, old_h, old_c = keys_d, keys_h, counts
                        keys_d = np.zeros(2 * old_d.shape[0], np.int64)
                        keys_h = np.zeros(2 * old_d.shape[0], np.int64)
                        counts = np.zeros(2 * old_d.shape[0], np.int64)
                        used[0] = 0
                        for j in range(old_d.shape[0]):
                            if old_c[j] > 0:
                                _count_key(keys_d, keys_h, counts, used, old_d[j], old_h[j])
                                _fix_count(keys_d, keys_h, counts, old_d[j], old_h[j], old_c[j])
                    work += _count_key(keys_d, keys_h, counts, used, d, sh[i] if ki == _K_HASHED else -7)
                    if work > max_work:
                        return WORK_TOO_MUCH, start, work
            top = first
            if op == 100:
                sk[top], sh[top], sid[top] = _K_DICT, 0, d
                top += 1
        elif op == 82 or op == 129:  # REDUCE, NEWOBJ: two values -> one
            if top - 2 < base:
                return WORK_MALFORMED, start, work
            top -= 1
            sk[top - 1], sh[top - 1], sid[top - 1] = _K_OTHER, 0, 0
        elif op == 146:  # NEWOBJ_EX: three values -> one
            if top - 3 < base:
                return WORK_MALFORMED, start, work
            top -= 2
            sk[top - 1], sh[top - 1], sid[top - 1] = _K_OTHER, 0, 0
        elif op == 98:  # BUILD: pops the state
            if top - 2 < base:
                return WORK_MALFORMED, start, work
            top -= 1
        else:  # an opcode the opcode scan refuses (sets, bytes, extensions): not reached
            return WORK_MALFORMED, start, work
    return WORK_MALFORMED, n, work


@njit(cache=True)
def _fix_count(keys_d, keys_h, counts, d, h, c):
    """Set the count of ``(d, h)`` (just re-inserted with count 1 while the table grew) to ``c``."""
    mask = keys_d.shape[0] - 1
    i = np.int64((np.uint64(d) * np.uint64(0x9E3779B97F4A7C15) ^ np.uint64(h) * np.uint64(0xC2B2AE3D27D4EB4F))
                 >> np.uint64(20)) & mask
    while True:
        if keys_d[i] == d and keys_h[i] == h and counts[i] > 0:
            counts[i] = c
            return
        i = (i + 1) & mask


def _check_work(buf, source: str, max_work: int, ops: int) -> None:
    status, where, work = _dict_work(buf, _ARGS, np.int64(max_work), np.int64(ops))
    if status == WORK_TOO_MUCH:
        raise ValueError(f"{source}: its dict keys collide in Python's hash (more than {max_work:,} extra comparisons "
                         f"by byte {where:,} of {len(buf):,}: building it would take time quadratic in its keys); "
                         "refused before building any")
    if status == WORK_MALFORMED:
        raise ValueError(f"{source} is not a valid pickle of plain builtins: its stack does not add up at byte "
                         f"{where:,}")


def scan_pickle(data, *, source: str = "<bytes>", max_built: int = MAX_BUILT,
                max_work: int = MAX_COLLISION_WORK) -> int:
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
    max_work : int
        Most extra key comparisons the pickle's dicts may cost (keys of one dict sharing a hash:
        :func:`_dict_work` computes CPython's hash of every int, float, bool, None and tuple of
        them), :data:`MAX_COLLISION_WORK` by default.

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
        More than ``max_built`` opcodes (a memory bomb), dict keys colliding past ``max_work``
        comparisons (a CPU bomb), a memo index jumping ahead of the memo, an unknown opcode, an
        argument running past the end, a stack that does not add up, no ``STOP``.
    """
    buf = np.frombuffer(memoryview(data).cast("B"), dtype=np.uint8)
    status, where, ops, detail = _scan_ops(buf, _ARGS, _REFUSED, np.int64(max_built))
    if status == SCAN_OK or status == SCAN_GLOBAL:  # a global: the unpickler refuses it there, naming it
        _check_work(buf, source, max_work, int(ops))
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
