"""What the demo shows while it works: the printed plan and results (stderr), a progress bar
driven by a run's journal (the theory's expected interactions as its total, so the ETA is
honest) and a spinner for the theory and calibration steps."""

from __future__ import annotations

import contextlib
import sys
import threading
from pathlib import Path

from normlab._display import elapsed_bar
from normlab.llm_runs import journal
from normlab.llm_runs.journal import JOURNAL_FILE

__all__ = ["echo_to_stderr", "JournalBar", "spinner"]


def echo_to_stderr(verbose: bool):
    """``out(text)``: print a line to stderr when ``verbose``."""
    def out(text: str = "") -> None:
        if verbose:
            print(text, file=sys.stderr, flush=True)
    return out


class JournalBar:
    """Progress of an LLM run from its journal: interactions played out of the interactions the
    theory expects (not the cap), so the ETA is honest; runs that end replace their expectation by
    what they played. Reads only complete JSONL lines; an unknown format just leaves the bar still."""

    def __init__(self, directory, runs: int, expected: float, desc: str, enabled: bool):
        self.path = Path(directory) / JOURNAL_FILE
        self.runs, self.expected, self.desc, self.enabled = runs, float(expected), desc, enabled
        self.count = [0] * runs
        self.ended: dict[int, int] = {}
        self._pos, self._buf = 0, b""
        self.bar = self._thread = None
        self._stop = threading.Event()

    def _read(self) -> None:
        if not self.path.exists():
            return
        with open(self.path, "rb") as f:
            f.seek(self._pos)
            while data := f.read(1 << 20):  # in pieces: a resumed run's journal may be long
                self._pos += len(data)
                self._lines(data)

    def _lines(self, data: bytes) -> None:
        lines = (self._buf + data).split(b"\n")
        self._buf = lines.pop()
        if len(self._buf) > journal.MAX_RECORD_BYTES:  # no record is that long: never held whole
            self._buf = b""
        for line in lines:
            r = journal.parse_line(line, (journal.INTERACTION, journal.RUN_END))
            if r is None:
                continue
            played, end = journal.as_interaction(r), journal.as_run_end(r)
            k = (played or end).run
            if not isinstance(k, int) or not 0 <= k < self.runs:
                continue
            if played is not None and isinstance(played.t, int):
                self.count[k] = max(self.count[k], played.t + 1)
            elif end is not None and isinstance(end.n, int):
                self.ended[k] = end.n

    def _total(self) -> int:
        return int(round(sum(self.ended.get(k, max(self.expected, self.count[k] + 1)) for k in range(self.runs))))

    def _tick(self) -> None:
        self._read()
        n = sum(self.count)
        self.bar.total = max(self._total(), n)
        if n > self.bar.n:
            self.bar.update(n - self.bar.n)
        else:
            self.bar.refresh()

    def __enter__(self):
        if not self.enabled:
            return self
        from tqdm.auto import tqdm

        self._read()
        self.bar = tqdm(total=max(self._total(), 1), initial=sum(self.count), desc=self.desc, unit="int",
                        leave=False, dynamic_ncols=True, mininterval=0.5)

        def loop():
            while not self._stop.wait(0.5):
                self._tick()

        self._thread = threading.Thread(target=loop, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc):
        if self.bar is not None:
            self._stop.set()
            self._thread.join()
            self._tick()
            self.bar.close()
        return False


@contextlib.contextmanager
def spinner(desc: str, enabled: bool):
    """Elapsed time of a step without a count (theory, calibration, figures)."""
    with elapsed_bar(desc, enabled=enabled):
        yield
