"""The journal file: append, lock, repair, read.

Every record is one JSON line written with a single ``write`` and flushed to the OS at once, so
a killed process loses at most the interaction in flight; interaction records are also fsynced
(at most every ``fsync_interval`` seconds, and on close) against machine crashes. Every record
written to a file ends with its place (``seq``) and its run's settings fingerprint (``fp``): a
record missing, repeated or out of place, or one written by another run, raises
:class:`JournalDamaged` on reading.

Tail repair on opening: a torn last line (a kill mid-write, possibly inside a multi-byte
character) is cut off; a complete last record that lacks only its newline is kept and given
one; an unreadable last line is cut off with a warning (it would otherwise end up mid-file and
make the journal unreadable). A journal deleted or replaced while a run writes it stops the
run with a clear message, and the records of this process are saved beside it.
"""

from __future__ import annotations

import os
import time
import warnings
from array import array
from pathlib import Path

from normlab.user_files import open_user_file, user_file

from . import records as _records
from .records import (CALL, FP, INTERACTION, RUN_END, SEQ, _CALL_HEAD, _RESERVE_HEAD, Call, Decision, RunEnd, _line,
                      _parse, fingerprint_of)
from .rundir import DirectoryLock, _open_locked, read_settings

# The byte patterns of the record format, bound here by assignment: the index calls their methods once
# a line, and the compiler gives a name bound by an import no method-call fast path.
_INT_HEAD, _TAIL, _SIDE_FILLED, _CALL_FILLED = (_records._INT_HEAD, _records._TAIL, _records._SIDE_FILLED,
                                                _records._CALL_FILLED)

#: Test hook (fault matrix): seconds to pause between the two halves of every record write, so
#: that a kill lands inside journal writes. Read once at import; 0 in normal use.
_SPLIT_WRITES = float(os.environ.get("NORMLAB_TEST_SPLIT_WRITES", "0") or 0)

JOURNAL_FILE = "journal.jsonl"
#: The longest journal line, in bytes (its newline aside): a record longer is refused when written
#: (:meth:`Journal.write`) and a line longer is refused when read, before it is held whole (no
#: request or answer normlab journals comes near it; more is a damaged or foreign file).
MAX_RECORD_BYTES = 16 * 2**20


def _readable(path):
    """``path`` opened for binary reading if it is a regular file (a FIFO, device or directory is
    refused in one line naming it, without blocking: :func:`normlab.user_files.open_user_file`)."""
    return open_user_file(path, str(path), max_bytes=2**62)


def check_journal_file(path) -> None:
    """Refuse a journal path that exists but is not a regular file (a FIFO, a device, a directory),
    in one line naming it, before anything waits on it."""
    p = Path(path)
    if p.exists() or p.is_symlink():
        try:
            user_file(p, str(p))
        except FileNotFoundError:  # a dangling link: as if absent
            return


def _lines(f, path):
    """``(offset, line)`` of every line of the journal open as ``f``, each read bounded
    (:data:`MAX_RECORD_BYTES`): a longer line is refused (:class:`JournalDamaged`, at its record)
    before more of it is read."""
    pos, k, limit = 0, 0, MAX_RECORD_BYTES + 1
    readline = f.readline
    while line := readline(limit):
        if len(line) == limit and line[-1:] != b"\n":
            raise JournalDamaged(
                f"{path}: line {k + 1} (at byte {pos:,}) is longer than {MAX_RECORD_BYTES:,} bytes, more than any "
                f"record normlab writes: refused without reading it (the journal is damaged or not normlab's). "
                f"`normlab journal repair {Path(path).parent}` keeps the records before it (the rest is moved "
                "aside, not deleted)", at=k, offset=pos)
        yield pos, line
        pos += len(line)
        k += 1


class Journal:
    """Append-only JSON-lines log (in memory too; ``path=None`` keeps it in memory only).

    Parameters
    ----------
    path : str or pathlib.Path, optional
    fsync_interval : float or None
        fsync after a record written with ``sync=True`` when at least this many seconds passed
        since the last fsync (``0``: after every such record; ``None``: only on close). Every
        record is flushed to the OS immediately whatever this setting.
    """

    def __init__(self, path=None, *, fsync_interval: float | None = 1.0, load: bool = True,
                 fingerprint: str | None = None, repair: bool = False):
        self.path = Path(path) if path is not None else None
        self.fsync_interval = fsync_interval
        self._last_sync = 0.0
        self._keep = True
        self.records: list[dict] = []
        self._f = None
        self._identity = None
        self.fingerprint = fingerprint
        self._seq = 0
        #: Records moved aside by ``repair`` (0: none), and the file that holds them.
        self.set_aside, self.aside_path = 0, None
        if self.path is not None:
            check_journal_file(self.path)
        if self.path is not None and self.path.exists():
            try:
                self._load(load)
            except JournalDamaged as exc:
                if not repair or exc.foreign:
                    raise
                self.set_aside, self.aside_path = _cut_at(self.path, exc)
                self._load(load)
            _repair_tail(self.path)

    def _load(self, load: bool) -> None:
        fp = None if self.fingerprint is None else fingerprint_of(self.fingerprint)
        if load:
            self.records = [rec for _, rec in iter_journal(self.path, fingerprint=fp)]
            self._seq = len(self.records)
        else:  # read in bounded memory by whoever needs it (:meth:`reader`); checked the same way
            n = 0
            for _ in iter_journal(self.path, fingerprint=fp):
                n += 1
            self._seq = n
            self._keep = False

    def open(self) -> "Journal":
        """Open for appending, holding an exclusive lock (one writer per run directory)."""
        if self.path is not None and self._f is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            f = _open_locked(self.path, self.path.parent)
            self._f = f
            self._spath = os.fspath(self.path)
            st = os.fstat(f.fileno())
            self._identity = (st.st_dev, st.st_ino)
        return self

    def _check_identity(self) -> None:
        """Stop if the journal file was deleted or replaced under this writer."""
        try:
            st = os.stat(self._spath)
            same = (st.st_dev, st.st_ino) == self._identity
        except FileNotFoundError:
            same = False
        if same:
            return
        saved = self.path.with_name(f"{self.path.stem}.recovered-{os.getpid()}.jsonl")
        # the open descriptor still reaches the deleted file: copy what it holds (a forgetful
        # journal keeps nothing in memory), else the records kept in memory
        n = 0
        with open(saved, "wb") as g:
            if not self._keep and self._f is not None:
                self._f.flush()
                with open(f"/proc/self/fd/{self._f.fileno()}", "rb") as src:  # reaches a deleted file too
                    while data := src.read(1 << 20):  # in pieces: the journal may be long
                        g.write(data)
                        n += data.count(b"\n")
            else:
                for r in self.records:
                    g.write(_line(r))
                n = len(self.records)
        raise JournalLost(
            f"{self.path} was deleted or replaced while this run was writing it; stopped so that two journals "
            f"cannot mix. All {n} records of this run are saved in {saved}: move it to "
            f"{self.path.name} (if no other run has started there) and rerun the same command to resume"
        )

    def forget(self) -> None:
        """Stop keeping records in memory (a file-backed journal only): what a long run has
        written stays on disk, read back by :meth:`all_records` when the tables are built, so
        memory stays flat however long the run."""
        if self.path is not None:
            self._keep = False
            self.records = []

    def all_records(self) -> list[dict]:
        """Every record: from memory, or from the file after :meth:`forget`."""
        if self._keep:
            return self.records
        if self._f is not None:
            self._f.flush()
        return read_journal(self.path) if self.path.exists() else []

    def reader(self) -> "JournalReader":
        """The records in bounded memory (:class:`JournalReader`): the file's (flushed first) for a
        file-backed journal that does not keep them, else those kept in memory."""
        if self._keep or self.path is None:
            return JournalReader(records=self.records)
        if self._f is not None:
            self._f.flush()
        fp = None if self.fingerprint is None else fingerprint_of(self.fingerprint)
        return JournalReader(self.path if self.path.exists() else None, fingerprint=fp)

    def write(self, record: dict, *, sync: bool = False) -> None:
        if self._f is not None:  # on disk, every record says where it stands and whose it is
            record = {**record, SEQ: self._seq}
            if self.fingerprint is not None:
                record[FP] = fingerprint_of(self.fingerprint)
        if self._keep:
            self.records.append(record)
        if self._f is None:
            return
        self._check_identity()
        line = _line(record)
        if len(line) > MAX_RECORD_BYTES + 1:
            raise ValueError(f"{self.path}: a {record.get('ev')!r} record of {len(line):,} bytes is longer than the "
                             f"{MAX_RECORD_BYTES:,} a journal line may hold (an answer that large is not one an LLM "
                             "gives: the endpoint is misbehaving); not written")
        if _SPLIT_WRITES:
            half = len(line) // 2
            self._f.write(line[:half])
            self._f.flush()
            time.sleep(_SPLIT_WRITES)
            line = line[half:]
        self._f.write(line)
        self._f.flush()
        self._seq += 1
        if sync and self.fsync_interval is not None:
            now = time.monotonic()
            if now - self._last_sync >= self.fsync_interval:
                os.fsync(self._f.fileno())
                self._last_sync = now

    def close(self) -> None:
        if self._f is not None:
            try:
                self._f.flush()
                os.fsync(self._f.fileno())
            finally:
                self._f.close()
                self._f = None

    def __enter__(self):
        return self.open()

    def __exit__(self, *exc):
        self.close()


class JournalLost(RuntimeError):
    """The journal file was deleted or replaced while a run was writing it."""


class JournalDamaged(ValueError):
    """A journal that is not whole (a record missing, repeated or out of place: ``at`` is the
    first record out of place, ``offset`` where its line starts) or not this run's
    (``foreign``: its records carry another run's settings fingerprint)."""

    def __init__(self, message: str, *, at: int = 0, offset: int = 0, foreign: bool = False):
        super().__init__(message)
        self.at, self.offset, self.foreign = at, offset, foreign


class _Continuity:
    """Checks, record after record, that a journal is whole and one run's: a record's ``seq`` is its
    place among the records (records of earlier versions carry none and are not checked), and
    every ``fp`` is the same -- the expected one when given."""

    def __init__(self, path, fingerprint: str | None = None):
        self.path, self.expected, self.seen, self.n = path, fingerprint, None, 0

    def see(self, seq, fp, offset: int) -> None:
        k = self.n
        if seq is not None and seq != k:
            if isinstance(seq, int) and seq > k:
                what = f"{seq - k} record(s) before it are missing"
            else:
                what = "it is repeated or out of place"
            raise JournalDamaged(
                f"{self.path}: record {k + 1} carries place {seq + 1 if isinstance(seq, int) else seq!r}: {what} "
                f"(the journal was edited or damaged). `normlab journal repair {Path(self.path).parent}` keeps the "
                f"{k} records before it (the rest is moved aside, not deleted) and a rerun plays on from there; "
                "or restore the journal", at=k, offset=offset)
        if fp is not None:
            want = self.expected if self.expected is not None else self.seen
            if want is not None and fp != want:
                whose = "this directory's settings" if self.expected is not None else "its first records"
                raise JournalDamaged(
                    f"{self.path}: record {k + 1} was written by a run with other settings (fingerprint {fp}, "
                    f"{whose}: {want}): the journal was copied or moved here from another run; put it back "
                    "in its own directory, or use another --out", at=k, offset=offset, foreign=True)
            self.seen = fp
        self.n += 1


def _cut_at(path: Path, exc: JournalDamaged) -> tuple[int, Path]:
    """Move the records from the first one out of place on into a file beside the journal
    (``journal.after-gap-<n>.jsonl``), keeping those before it: ``(records moved, that file)``."""
    aside = path.with_name(f"{path.stem}.after-gap-{exc.at}.jsonl")
    k = 1
    while aside.exists():
        aside = path.with_name(f"{path.stem}.after-gap-{exc.at}-{k}.jsonl")
        k += 1
    with open(path, "rb+") as f, open(aside, "wb") as g:
        f.seek(exc.offset)
        moved = 0
        while chunk := f.read(1 << 20):
            g.write(chunk)
            moved += chunk.count(b"\n")
        g.flush()
        os.fsync(g.fileno())
        f.truncate(exc.offset)
        f.flush()
        os.fsync(f.fileno())
    warnings.warn(f"{path}: kept the {exc.at} records before the damage; the {moved} lines from there on are in "
                  f"{aside.name}", stacklevel=4)
    return moved, aside


def read_journal(path, *, fingerprint: str | None = None) -> list[dict]:
    """All records of a journal file (in memory: for small journals; long runs read theirs with
    :func:`iter_journal` or :class:`JournalReader`).

    A torn or unreadable *last* line is skipped (a kill mid-write; :class:`Journal` cuts it off
    before appending). Any other unreadable line, or a line that is valid JSON but not a record
    (``null``, a list, an object without ``"ev"``), makes the journal corrupt: ValueError.
    """
    return [rec for _, rec in iter_journal(path, fingerprint=fingerprint)]


def iter_journal(path, *, fingerprint: str | None = None):
    """``(offset, record)`` for every record of a journal file, one line at a time (memory stays
    flat whatever the journal's size), with the rules of :func:`read_journal`; ``offset`` is
    where the record's line starts (:meth:`JournalReader.at` reads it again).

    Every record's place and settings fingerprint are checked (:class:`JournalDamaged` for a
    record missing, repeated or out of place, or one written by another run -- ``fingerprint``:
    the run's, when known)."""
    cont = _Continuity(path, fingerprint)
    with _readable(path) as f:
        bad = None
        for k, (start, line) in enumerate(_lines(f, path)):
            if not line.strip():
                continue
            if bad is not None:  # an unreadable line with a record after it: not a torn tail
                raise _corrupt(path, bad)
            rec = _parse(line)
            if rec is None:
                bad = k
                continue
            if not isinstance(rec.get("ev"), str):
                raise _corrupt(path, k)
            cont.see(rec.get(SEQ), rec.get(FP), start)
            yield start, rec


def _corrupt(path, k: int) -> ValueError:
    return ValueError(
        f"{path}: line {k + 1} is not a journal record; the journal is corrupt (move the directory "
        "aside and start the run again, or remove that line by hand if you know why it is there)"
    )


class JournalIndex:
    """Where the records a table builder needs are, from one cheap walk over a journal
    (:meth:`JournalReader.index`): per run, the keys of the interactions replay counts (its
    rule: contiguous from ``t = 0``, first occurrence wins); the run ends; the keys of the
    requests in journal order; the :class:`Decision` fields (``name``, ``names_shown``,
    ``prompt_hash``, ``probs``, ``invalid_reason``, ``text``) and :class:`Call` fields
    (``purpose``, ``prompt_hash``, ``partial``, ``text``, ``top``, ``finish_reason``,
    ``errors``) that hold a value in at least one of them; and the lowest agent that played."""

    def __init__(self, n_runs: int):
        self.inter = {k: array("q") for k in range(n_runs)}
        self.ended: dict = {}
        self.calls = array("q")
        self.side_filled: set = set()
        self.call_filled: set = set()
        self.min_agent: int | None = None

    def _count(self, key, run, t, i, j) -> bool:
        keys = self.inter.get(run)
        if keys is None or t != len(keys):
            return False
        keys.append(key)
        lo = min(i, j)
        if self.min_agent is None or lo < self.min_agent:
            self.min_agent = lo
        return True

    def _side_record(self, r: dict) -> None:
        for side in r["s"]:
            d = Decision(side)
            for f in _SIDE_FILLED:
                if getattr(d, f) is not None:
                    self.side_filled.add(f)

    def _call_record(self, r: dict) -> None:
        c = Call(r)
        for f in _CALL_FILLED:
            v = getattr(c, f)
            if v is not None and (f != "errors" or "; ".join(v)):
                self.call_filled.add(f)


class JournalReader:
    """A journal read in bounded memory: :meth:`scan` walks every record once, :meth:`at` reads
    chosen ones again by the key :meth:`scan` gave them (a file offset; an index for records
    held in memory), so a builder keeps keys (8 bytes a record), never the records.

    Parameters
    ----------
    path : path, optional
        The journal file (``None`` with ``records=None``: an empty journal).
    records : list of dict, optional
        Records held in memory instead (a journal without a file).
    """

    def __init__(self, path=None, *, records: list | None = None, fingerprint: str | None = None):
        self.path = None if path is None else Path(path)
        self.records = records
        self.fingerprint = fingerprint

    def scan(self):
        """``(key, record)`` for every record, in journal order."""
        if self.records is not None:
            yield from enumerate(self.records)
        elif self.path is not None:
            yield from iter_journal(self.path, fingerprint=self.fingerprint)

    def index(self, n_runs: int) -> JournalIndex:
        """A :class:`JournalIndex` of the journal (runs ``0 .. n_runs - 1``), read in one walk
        that decodes only the lines it must: interaction and request lines are recognised by
        their opening, the fields that hold values by their bytes (a journal written by this
        module); other lines, and the last one (it may be torn), are decoded."""
        ix = JournalIndex(n_runs)
        if self.records is not None:
            for key, r in enumerate(self.records):
                self._index_record(ix, key, r)
            return ix
        if self.path is None:
            return ix
        cont = _Continuity(self.path, self.fingerprint)
        with _readable(self.path) as f:
            held = None
            for k, (start, line) in enumerate(_lines(f, self.path)):
                if not line.strip():
                    continue
                if held is not None:  # a line with another after it
                    self._index_line(ix, *held, cont)
                held = (start, line, k)
            if held is not None:  # the last line: decoded (a torn one is skipped, as by read_journal)
                start, line, k = held
                rec = _parse(line)
                if rec is not None:
                    if not isinstance(rec.get("ev"), str):
                        raise _corrupt(self.path, k)
                    cont.see(rec.get(SEQ), rec.get(FP), start)
                    self._index_record(ix, start, rec)
        return ix

    def _index_line(self, ix: JournalIndex, key: int, line: bytes, k: int, cont: _Continuity) -> None:
        m = _INT_HEAD.match(line)
        if m is not None:
            _see_tail(cont, line, key)
            run, t, i, j = (int(x) for x in m.groups())
            if ix._count(key, run, t, i, j):
                for f, b in _SIDE_FILLED.items():
                    if f not in ix.side_filled and b in line:
                        ix.side_filled.add(f)
            return
        if line.startswith(_RESERVE_HEAD):
            _see_tail(cont, line, key)
            return
        if line.startswith(_CALL_HEAD):
            _see_tail(cont, line, key)
            ix.calls.append(key)
            for f, b in _CALL_FILLED.items():
                if f not in ix.call_filled and b in line:
                    ix.call_filled.add(f)
            return
        rec = _parse(line)
        if rec is None or not isinstance(rec.get("ev"), str):
            raise _corrupt(self.path, k)
        cont.see(rec.get(SEQ), rec.get(FP), key)
        self._index_record(ix, key, rec)

    @staticmethod
    def _index_record(ix: JournalIndex, key, r: dict) -> None:
        ev = r.get("ev")
        if ev == INTERACTION:
            if ix._count(key, r["run"], r["t"], r["i"], r["j"]):
                ix._side_record(r)
        elif ev == CALL:
            ix.calls.append(key)
            ix._call_record(r)
        elif ev == RUN_END:
            if not isinstance(r.get("run"), int):
                raise ValueError(f"journal record {str(r)[:160]} is malformed; the journal is corrupt")
            ix.ended[r["run"]] = RunEnd(r)

    def at(self, keys):
        """The records at ``keys`` (from :meth:`scan`), in the order given."""
        if self.records is not None:
            for k in keys:
                yield self.records[k]
            return
        if self.path is None:
            return
        with _readable(self.path) as f:
            for k in keys:
                f.seek(k)
                line = f.readline(MAX_RECORD_BYTES + 2)
                rec = _parse(line) if len(line) <= MAX_RECORD_BYTES + 1 else None
                if rec is None and len(line) > MAX_RECORD_BYTES + 1:
                    raise ValueError(f"{self.path}: the record at byte {k} is longer than {MAX_RECORD_BYTES:,} "
                                     "bytes; is another process writing this journal?")
                if rec is None:
                    raise ValueError(f"{self.path}: the record at byte {k} changed while it was read; "
                                     "is another process writing this journal?")
                yield rec


def _see_tail(cont: _Continuity, line: bytes, key: int) -> None:
    """:meth:`_Continuity.see` for a line read without decoding it (its place and fingerprint are
    the last keys :meth:`Journal.write` put on it; a line of an earlier version has none)."""
    m = _TAIL.search(line, max(0, len(line) - 64))
    if m is None:
        cont.see(None, None, key)
    else:
        cont.see(int(m.group(1)), None if m.group(2) is None else m.group(2).decode(), key)


def _repair_tail(path: Path) -> None:
    """Make the file end with a complete record and a newline, so appended records start on a
    fresh line: a complete last record without its newline gets one; a torn or unreadable last
    line is cut off."""
    with open(path, "rb+") as f:
        f.seek(0, os.SEEK_END)
        size = f.tell()
        if size == 0:
            return
        # the last non-empty line and where it starts
        end = size
        f.seek(max(0, size - 1))
        ends_nl = f.read(1) == b"\n"
        if ends_nl:
            end = size - 1
        pos, start = end, 0
        while pos > 0:
            lo = max(0, pos - 65536)
            f.seek(lo)
            buf = f.read(pos - lo)
            idx = buf.rfind(b"\n")
            if idx >= 0:
                start = lo + idx + 1
                break
            pos = lo
        if end - start > MAX_RECORD_BYTES:  # not a record normlab writes: never held whole
            raise ValueError(f"{path}: its last line (at byte {start:,}) is longer than {MAX_RECORD_BYTES:,} bytes, "
                             "more than any record normlab writes; refused without reading it")
        f.seek(start)
        line = f.read(end - start)
        if not line.strip():
            return
        rec = _parse(line)
        if rec is not None and isinstance(rec.get("ev"), str):
            if not ends_nl:
                f.seek(size)
                f.write(b"\n")
            return
        if ends_nl:
            warnings.warn(f"{path}: the last line was not a journal record and was removed ({line[:80]!r})", stacklevel=3)
        f.truncate(start)


def check_journal(directory) -> dict:
    """Whether the journal of a run directory is whole and the directory's (``normlab journal
    check``): ``{"journal", "records", "whole", "problem"}`` (``problem``: the first damage, or
    ``None``). The journal is only read."""
    directory = Path(directory)
    path = directory / JOURNAL_FILE
    check_journal_file(path)
    if not path.is_file():
        raise FileNotFoundError(f"{directory} holds no {JOURNAL_FILE}")
    stored = read_settings(directory)
    fp = fingerprint_of(stored["hash"]) if stored and stored.get("hash") else None
    n, problem = 0, None
    try:
        for _ in iter_journal(path, fingerprint=fp):
            n += 1
    except JournalDamaged as exc:
        n, problem = exc.at, str(exc)
    return {"journal": str(path), "records": n, "whole": problem is None, "problem": problem}


def repair_journal(directory) -> dict:
    """Keep the records of a damaged journal before its first damage and move the rest into
    ``journal.after-gap-<n>.jsonl`` beside it (``normlab journal repair``), so that a rerun of
    the same command replays what is whole and plays on from there. A journal written by another
    run is refused, not cut. Returns ``{"journal", "kept", "moved", "aside"}``."""
    directory = Path(directory)
    path = directory / JOURNAL_FILE
    check_journal_file(path)
    if not path.is_file():
        raise FileNotFoundError(f"{directory} holds no {JOURNAL_FILE}")
    with DirectoryLock(directory):
        stored = read_settings(directory)
        j = Journal(path, load=False, fingerprint=stored.get("hash") if stored else None, repair=True)
        return {"journal": str(path), "kept": j._seq, "moved": j.set_aside,
                "aside": None if j.aside_path is None else str(j.aside_path)}


