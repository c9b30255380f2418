"""Reading a file a user names, safely: the one home of "open a user file" for every loader.

Every loader of normlab that reads a path given by a user (``--template``, ``--table``, a saved
fit, a probe table, SCENE episodes, CRSEC topics and agent files, ``normlab.load`` folders, game
logs) goes through here, so each of them:

- refuses what is not a regular file -- a FIFO (which would block the reader forever), a device
  such as ``/dev/zero`` (endless), a socket, a directory where a file is expected -- without
  blocking: the file is opened with ``O_NONBLOCK`` and checked with ``fstat`` on the open
  descriptor (a link is followed; what it points to is checked);
- caps the size before reading (the size on disk, and the bytes actually read: a file that grows
  while it is read is refused too);
- caps the nesting depth of JSON before parsing it (a 100 000-deep array is one line, not a
  ``RecursionError``).

Each refusal is a one-line :class:`UserFileError` (a ``ValueError``: bad input, exit code 2 of
every command); a missing file is a ``FileNotFoundError`` naming it.

A leaf module (standard library only).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import stat
from pathlib import Path

__all__ = ["MAX_TEXT_BYTES", "TEMPLATE_MAX_BYTES", "MAX_TABLE_BYTES", "MAX_DECODED_BYTES", "MAX_JSON_DEPTH",
           "UserFileError", "open_user_file", "read_user_bytes", "read_user_text", "read_user_json", "read_user_parquet",
           "parquet_decoded_bytes", "loads_json", "check_json_depth", "user_file", "write_user_text"]

#: Largest text, JSON or CSV file a loader reads unless it says otherwise (templates, fitted
#: tables, topics, episodes: the largest shipped one is well under 1 MiB).
MAX_TEXT_BYTES = 16 * 2**20
#: Largest prompt template file read (the built-in ones are under 4 KB).
TEMPLATE_MAX_BYTES = 1 * 2**20
#: Largest Parquet table a loader reads (a game log of a million decisions is about 30 MB).
MAX_TABLE_BYTES = 2 * 2**30
#: Most bytes a Parquet table may take once decoded: checked from its metadata before any data
#: is read (every leaf column chunk's values, nested lists included, x the width of one value; the
#: pages' uncompressed sizes), then from the exact lengths of its strings before they are expanded
#: (a few kilobytes of Parquet can say a billion rows or list items, or repeat one long string
#: through a dictionary). A game log of a million decisions takes about 0.3 GiB.
MAX_DECODED_BYTES = 4 * 2**30
#: Most a Parquet table may expand once decoded, as a multiple of its file's bytes, when it decodes
#: to more than :data:`_RATIO_FLOOR` (a game log decodes to about 10x its file; a file of a few
#: kilobytes whose ``list<int64>`` column decodes to gigabytes is a bomb, refused like a zip bomb).
MAX_PARQUET_RATIO = 1000
_RATIO_FLOOR = 64 * 2**20
#: Deepest JSON nesting a loader parses (normlab's own files nest at most 6 deep).
MAX_JSON_DEPTH = 64


class UserFileError(ValueError):
    """A file a user named cannot be read safely: not a regular file, too large, too deeply
    nested, not valid JSON or text. A ``ValueError`` (bad input)."""


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a pipe (FIFO)"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def user_file(path, what: str | None = None) -> Path:
    """``path`` as a :class:`~pathlib.Path` after checking, without opening it, that it names a
    regular file (links followed). ``what`` names it in messages (default: the path)."""
    p = Path(path)
    what = what or str(p)
    try:
        st = p.stat()
    except FileNotFoundError:
        raise FileNotFoundError(f"{what}: no such file") from None
    except OSError as exc:
        raise UserFileError(f"{what}: cannot be read ({exc.strerror or exc})") from None
    if not stat.S_ISREG(st.st_mode):
        raise UserFileError(f"{what} is {_kind(st.st_mode)}, not a regular file; refused")
    return p


@contextlib.contextmanager
def open_user_file(path, what: str | None = None, *, max_bytes: int = MAX_TEXT_BYTES):
    """Open a user's file for binary reading, refusing anything but a regular file of at most
    ``max_bytes`` bytes -- before reading a byte, and without blocking on a FIFO.

    Yields
    ------
    file object
        Opened ``"rb"``; it is closed when the ``with`` block ends.

    Raises
    ------
    FileNotFoundError
        No such file.
    UserFileError
        A directory, FIFO, device or socket; larger than ``max_bytes``; unreadable.
    """
    p = Path(path)
    what = what or str(p)
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(p, flags)
    except FileNotFoundError:
        raise FileNotFoundError(f"{what}: no such file") from None
    except IsADirectoryError:
        raise UserFileError(f"{what} is a directory, not a regular file; refused") from None
    except OSError as exc:
        raise UserFileError(f"{what}: cannot be read ({exc.strerror or exc})") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise UserFileError(f"{what} is {_kind(st.st_mode)}, not a regular file; refused")
        if st.st_size > max_bytes:
            raise UserFileError(f"{what} is {st.st_size:,} bytes, more than the {max_bytes:,} allowed; refused")
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
        f = os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise
    with f:
        yield f


def read_user_bytes(path, what: str | None = None, *, max_bytes: int = MAX_TEXT_BYTES) -> bytes:
    """The bytes of a user's regular file of at most ``max_bytes`` (see :func:`open_user_file`);
    a file that grows past the cap while it is read is refused."""
    with open_user_file(path, what, max_bytes=max_bytes) as f:
        data = f.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise UserFileError(f"{what or path} grew past the {max_bytes:,} bytes allowed while being read; refused")
    return data


def read_user_text(path, what: str | None = None, *, max_bytes: int = MAX_TEXT_BYTES) -> str:
    """A user's UTF-8 text file (see :func:`read_user_bytes`)."""
    data = read_user_bytes(path, what, max_bytes=max_bytes)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UserFileError(f"{what or path} is not UTF-8 text (byte {exc.start}); refused") from None


_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.S)
_BRACKET = re.compile(r"[\[\]{}]")


def check_json_depth(text: str, what: str = "the JSON", *, max_depth: int = MAX_JSON_DEPTH) -> None:
    """Refuse JSON text nesting deeper than ``max_depth`` arrays/objects, before parsing it
    (Python's parser recurses once per level: a deep document ends in ``RecursionError``)."""
    if text.count("[") + text.count("{") <= max_depth:
        return
    depth = 0
    for m in _BRACKET.finditer(_STRING.sub('""', text)):
        if m.group() in "[{":
            depth += 1
            if depth > max_depth:
                raise UserFileError(f"{what} nests deeper than {max_depth} levels; refused")
        else:
            depth -= 1


def loads_json(text, what: str = "the JSON", *, max_depth: int = MAX_JSON_DEPTH):
    """Parse JSON text a user gave (a file's content, a flag's value) with its depth capped
    (:func:`check_json_depth`); invalid JSON is one line naming ``what``."""
    if isinstance(text, (bytes, bytearray)):
        try:
            text = bytes(text).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise UserFileError(f"{what} is not UTF-8 text (byte {exc.start}); refused") from None
    check_json_depth(text, what, max_depth=max_depth)
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise UserFileError(f"{what} is not valid JSON ({exc})") from None
    except RecursionError:  # pragma: no cover - the depth check comes first
        raise UserFileError(f"{what} nests too deeply; refused") from None


def read_user_json(path, what: str | None = None, *, max_bytes: int = MAX_TEXT_BYTES,
                   max_depth: int = MAX_JSON_DEPTH):
    """A user's JSON file: a regular file of at most ``max_bytes``, nesting at most ``max_depth``
    levels (:func:`open_user_file`, :func:`loads_json`)."""
    what = what or str(path)
    return loads_json(read_user_text(path, what, max_bytes=max_bytes), what, max_depth=max_depth)


def _size(n: float) -> str:
    return f"{n / 2**30:.1f} GiB" if n >= 2**30 / 10 else f"{n / 2**20:.1f} MiB" if n >= 2**20 / 10 else f"{int(n):,} bytes"


#: Bytes one decoded value of each Parquet physical type takes at least (a byte array: its offset).
_PHYSICAL_WIDTH = {"BOOLEAN": 1, "INT32": 4, "FLOAT": 4, "INT64": 8, "DOUBLE": 8, "INT96": 12, "BYTE_ARRAY": 8}


def parquet_decoded_bytes(meta, columns=None) -> int:
    """The least a Parquet file takes once decoded, from its column chunks' metadata alone: every
    leaf column chunk's values (``num_values`` counts the values of nested lists too: a
    ``list<int64>`` column of one row holding a billion integers says so) times the width of one
    value. ``columns``: the top-level names read."""
    total = 0
    schema = meta.schema
    for i in range(meta.num_row_groups):
        rg = meta.row_group(i)
        for j in range(rg.num_columns):
            chunk = rg.column(j)
            top = chunk.path_in_schema.split(".")[0]
            if columns is not None and top not in columns:
                continue
            leaf = schema.column(j)
            kind = chunk.physical_type
            width = leaf.length if kind == "FIXED_LEN_BYTE_ARRAY" else _PHYSICAL_WIDTH.get(kind, 8)
            total += int(chunk.num_values) * max(int(width or 1), 1)
    return total


def _string_bytes(array) -> int:
    """The bytes the strings of ``array`` (a pyarrow array, nested or not) take once expanded from
    their dictionaries, counted without expanding them."""
    import pyarrow as pa
    import pyarrow.compute as pc

    t = array.type
    if pa.types.is_dictionary(t):
        if not len(array):
            return 0
        return int(pc.sum(pc.binary_length(array.dictionary).take(array.indices)).as_py() or 0)
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        return _string_bytes(array.flatten())
    if pa.types.is_struct(t):
        return sum(_string_bytes(array.field(k)) for k in range(t.num_fields))
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_binary(t) or pa.types.is_large_binary(t):
        return int(pc.sum(pc.binary_length(array)).as_py() or 0) if len(array) else 0
    return 0


def read_user_parquet(path, what: str | None = None, *, max_bytes: int = MAX_TABLE_BYTES,
                      max_decoded: int = MAX_DECODED_BYTES, columns=None):
    """A user's Parquet table as a ``pandas.DataFrame``: a regular file of at most ``max_bytes``
    (:func:`open_user_file`) that takes at most ``max_decoded`` bytes once decoded -- checked from
    its column chunks' metadata before reading any data (:func:`parquet_decoded_bytes`: nested
    columns such as ``list<int64>`` included), then from the exact lengths of its strings (nested
    ones too) before they are expanded from their dictionaries. ``columns`` (names) reads only
    those. A file that is not Parquet is one line naming it."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    what = what or str(path)

    def too_big(amount: str) -> UserFileError:
        return UserFileError(f"{what} would take {amount} once read, more than the {_size(max_decoded)} "
                             "allowed; refused")

    with open_user_file(path, what, max_bytes=max_bytes) as f:
        try:
            pf = pq.ParquetFile(f)
            schema, meta = pf.schema_arrow, pf.metadata
            names = schema.names if columns is None else [c for c in columns if c in schema.names]
            least = parquet_decoded_bytes(meta, set(names))
            encoded = sum(meta.row_group(i).total_byte_size for i in range(meta.num_row_groups))
            if least > max_decoded or encoded > max_decoded:
                raise too_big(f"{meta.num_rows:,} rows, at least {_size(max(least, encoded))}")
            size = os.fstat(f.fileno()).st_size
            if least > _RATIO_FLOOR and least > MAX_PARQUET_RATIO * max(size, 1):
                raise UserFileError(f"{what} is {size:,} bytes but would take at least {_size(least)} once read "
                                    f"({least / max(size, 1):,.0f}x, more than {MAX_PARQUET_RATIO}x): a Parquet bomb; "
                                    "refused")
            # every byte-array leaf (top-level or nested) read as a dictionary: its strings stay compact
            leaves = [meta.schema.column(j) for j in range(meta.num_columns)]
            strings = [c.path for c in leaves if c.physical_type == "BYTE_ARRAY" and c.path.split(".")[0] in names]
            f.seek(0)
            table = pq.read_table(f, columns=columns, read_dictionary=strings)
            total = table.nbytes
            for name in table.schema.names:
                if not any(p.split(".")[0] == name for p in strings):
                    continue
                for chunk in table.column(name).chunks:
                    total += _string_bytes(chunk)
                    if total > max_decoded:
                        raise too_big(f"{_size(total)} with its strings")
            for name in table.schema.names:
                if any(p.split(".")[0] == name for p in strings):
                    i = table.schema.get_field_index(name)
                    table = table.set_column(i, schema.field(name), pc.cast(table.column(i), schema.field(name).type))
            return table.to_pandas()
        except (OSError, ValueError, pa.ArrowNotImplementedError) as exc:  # ArrowInvalid (ValueError), ArrowIOError
            if isinstance(exc, UserFileError) or (isinstance(exc, OSError) and exc.errno is not None):
                raise
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise UserFileError(f"{what} is not a readable Parquet table ({first})") from None


def write_user_text(path, text: str) -> Path:
    """Write ``text`` (UTF-8) to a file a user named; a disk error (full, read-only) raised while
    writing or closing names the file (``OSError.filename``), so the command's one line says which
    file failed (exit code 4)."""
    p = Path(path)
    try:
        p.write_text(text, encoding="utf-8")
    except OSError as exc:
        if exc.filename is None:
            exc.filename = str(p)
        raise
    return p
