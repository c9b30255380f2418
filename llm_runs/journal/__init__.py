"""Append-only JSONL journal of LLM calls and game interactions, its record format, and the
run-directory settings and manifest.

- :mod:`.records` -- the record format, one owner of the keys (``ev``, ``ph``, ``ptok``, ...): the
  kinds of record declared once in a table, the views (:class:`Call`, :class:`Decision`,
  :class:`Interaction`, ...), writers (:func:`call_record`, :func:`interaction_record`, ...) and
  readers (:func:`calls`, :func:`replay`, :func:`probe_answers`, ...) generated from it;
- :mod:`.files` -- the journal file: append under a lock (:class:`Journal`), tail repair, reading in
  bounded memory (:func:`iter_journal`, :class:`JournalReader`, :class:`JournalIndex`), the
  integrity checks (``seq``/``fp``: :class:`JournalDamaged`, :func:`check_journal`,
  :func:`repair_journal`);
- :mod:`.rundir` -- the run directory: its lock, ``settings.json`` and ``manifest.json``;
- :mod:`.budget` -- write-ahead budgets, every runner's: what a journal counts against a budget
  (:class:`BudgetBook`), a session's cap started from it and its reservations journaled before
  each request (:func:`arm_budget`), a directory's count (:func:`journal_spent`).

Every record is one JSON line written with a single ``write`` and flushed to the OS at once, so
a killed process loses at most the interaction in flight; interaction records are also fsynced
(at most every ``fsync_interval`` seconds, and on close) against machine crashes.

Tail repair on opening: a torn last line (a kill mid-write, possibly inside a multi-byte
character) is cut off; a complete last record that lacks only its newline is kept and given
one; an unreadable last line is cut off with a warning (it would otherwise end up mid-file and
make the journal unreadable). A journal deleted or replaced while a run writes it stops the
run with a clear message, and the records of this process are saved beside it.

The rest of normlab writes records with the writers of :mod:`.records` and reads them through its
views and readers; the format on disk is unchanged by them. Every name is imported here (the
modules need only the standard library, :mod:`normlab.user_files` and the redaction of
:mod:`..backend.config`): ``from normlab.llm_runs import journal as jr; jr.interaction_record(...)``.
"""

from __future__ import annotations

from .records import (CALL, CALL_FIELDS, CALL_VIEW, DECISION_VIEW, DECISION_FIELDS, DISTRIBUTION_VIEW, EPISODE, EPISODE_DONE_VIEW,
                      EPISODE_EVENT, EPISODE_EVENT_VIEW, FP, IMPORTED, INTERACTION, INTERACTION_VIEW, KINDS, PROBE,
                      PROBE_ANSWER_VIEW, RESERVATION_VIEW, RESERVE, RUN_END, RUN_END_VIEW, RUN_ERROR, SEQ, STEP, STEP_VIEW,
                      MAX_COUNT, Call, Decision, EpisodeDone, EpisodeEvent, Field, Imported, Interaction, Kind,
                      OpenReservations, count_of,
                      ProbeAnswer, Reservation, RunEnd, Step, as_interaction, as_run_end, call_columns, call_record,
                      calls, check_interaction, committed_decision, count, decision_columns, episode_event_record,
                      episode_events, episode_record, episodes_done, exact_decision, exact_distributions,
                      fingerprint_of, first_token_tops, generated_source, imported_record, interaction_record,
                      interaction_sides, parse_line, probe_answers, probe_record, record_kind, replay, replayed,
                      reserve_record, run_end_record, run_error_record, sample_decision, step_record, steps,
                      _CALL_FILLED, _CALL_HEAD, _ENCODE, _ENCODE_ASCII, _INT_HEAD, _RESERVE_HEAD, _SIDE_FILLED, _TAIL,
                      _Distribution, _View, _line, _parse)
from .files import (JOURNAL_FILE, MAX_RECORD_BYTES, Journal, JournalDamaged, JournalIndex, JournalLost, JournalReader,
                    check_journal, check_journal_file, iter_journal, read_journal, repair_journal, _SPLIT_WRITES, _Continuity, _corrupt, _cut_at,
                    _repair_tail, _see_tail)
from .rundir import (FORMAT, LOCK_FILE, MANIFEST_FILE, MANIFEST_FORMAT, MANIFEST_PACKAGES, SETTINGS_FILE,
                     DirectoryLock, check_new_run_dir, compare_settings, environment, finish_session, read_manifest,
                     read_settings, record_session, session_outcome, write_json_atomic, write_settings,
                     _MANIFEST_ORDER, _git, _now, _open_locked, _package_versions)
from .budget import BudgetBook, arm_budget, journal_spent, spent_under
