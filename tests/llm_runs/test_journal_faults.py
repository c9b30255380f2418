"""Journal tail repair and write faults: nothing completed is lost, nothing torn is used, and a
journal deleted under a writer stops the run with its records saved."""

from __future__ import annotations

import json

import pytest

from normlab.llm_runs.journal import Journal, JournalLost, read_journal


def _write(path, records, tail=b""):
    path.write_bytes(b"".join(json.dumps(r).encode() + b"\n" for r in records) + tail)


RECS = [{"ev": "int", "run": 0, "t": t, "i": 0, "j": 1, "s": [0, 0]} for t in range(5)]


def test_complete_last_record_without_newline_is_kept(tmp_path):
    p = tmp_path / "journal.jsonl"
    _write(p, RECS[:4], json.dumps(RECS[4]).encode())  # the last newline is missing
    j = Journal(p)
    assert len(j.records) == 5
    with j:
        j.write({"ev": "end", "run": 0, "n": 5, "reason": "max"})
    back = read_journal(p)
    assert back[:5] == RECS and back[5]["ev"] == "end"


def test_torn_last_line_is_cut_even_inside_a_multibyte_character(tmp_path):
    p = tmp_path / "journal.jsonl"
    torn = json.dumps({"ev": "call", "text": "caf\u00e9"}, ensure_ascii=False).encode()
    torn = torn[: torn.index(b"\xc3") + 1]  # cut between the two bytes of "é"
    _write(p, RECS, torn)
    j = Journal(p)
    assert j.records == RECS
    with j:
        j.write({"ev": "end", "run": 0, "n": 5, "reason": "max"})
    assert len(read_journal(p)) == 6


def test_garbage_last_line_is_removed_once_not_left_mid_file(tmp_path):
    p = tmp_path / "journal.jsonl"
    _write(p, RECS, b"#garbage!\n")
    with pytest.warns(UserWarning, match="not a journal record"):
        j = Journal(p)
    with j:
        j.write({"ev": "end", "run": 0, "n": 5, "reason": "max"})
    assert len(read_journal(p)) == 6  # readable again: the garbage did not end up mid-file
    assert len(Journal(p).records) == 6


@pytest.mark.parametrize("bad", [b"null", b"[1, 2]", b'{"run": 0}', b"\xff\xfe"])
def test_non_records_in_the_middle_are_a_clear_error(tmp_path, bad):
    p = tmp_path / "journal.jsonl"
    p.write_bytes(json.dumps(RECS[0]).encode() + b"\n" + bad + b"\n" + json.dumps(RECS[1]).encode() + b"\n")
    with pytest.raises(ValueError, match="line 2 is not a journal record"):
        read_journal(p)


def test_lone_surrogate_is_journaled_and_read_back(tmp_path):
    p = tmp_path / "journal.jsonl"
    with Journal(p) as j:
        j.write({"ev": "call", "text": "ok \ud83d"})
        j.write({"ev": "call", "text": "caf\u00e9"})
    back = read_journal(p)
    assert back[0]["text"] == "ok \ud83d" and back[1]["text"] == "caf\u00e9"


def test_deleted_journal_stops_the_writer_and_saves_its_records(tmp_path):
    p = tmp_path / "journal.jsonl"
    j = Journal(p).open()
    for r in RECS[:3]:
        j.write(r)
    p.unlink()
    with pytest.raises(JournalLost, match="deleted or replaced") as info:
        j.write(RECS[3])
    j.close()
    saved = list(tmp_path.glob("journal.recovered-*.jsonl"))
    assert len(saved) == 1 and str(saved[0]) in str(info.value)
    back = read_journal(saved[0])
    assert [r["seq"] for r in back] == [0, 1, 2, 3]  # each record's place in the journal
    assert [{k: v for k, v in r.items() if k != "seq"} for r in back] == RECS[:4]


def test_two_runs_started_together_on_one_directory_do_not_mix(tmp_path):
    import threading

    from normlab.llm_runs import EndpointConfig, run_game
    from normlab.llm_runs.journal import read_settings
    from normlab.llm_runs.testing import StubServer

    out = tmp_path / "shared"
    results, errors = {}, {}
    with StubServer(["Q", "M"], latency=0.01) as stub:
        cfg = EndpointConfig(base_url=stub.base_url)
        barrier = threading.Barrier(2)

        def go(temp):
            barrier.wait()
            try:
                results[temp] = run_game(4, 2, "Q,M", max_interactions=40, runs=1, mode="sample", temperature=temp,
                                         rng=1, endpoint=cfg, out=out, progress=False)
            except ValueError as exc:
                errors[temp] = str(exc)

        threads = [threading.Thread(target=go, args=(t,)) for t in (0.5, 0.7)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
    assert len(results) == 1 and len(errors) == 1, (results, errors)
    (winner,) = results
    (msg,) = errors.values()
    assert "in use by another normlab process" in msg or "different settings" in msg
    assert read_settings(out)["settings"]["temperature"] == winner  # the journal's own settings


def test_forgetful_journal_keeps_nothing_in_memory_and_still_recovers(tmp_path):
    p = tmp_path / "journal.jsonl"
    j = Journal(p).open()
    j.forget()
    for r in RECS[:3]:
        j.write(r)
    assert j.records == [] and [{k: v for k, v in r.items() if k != "seq"} for r in j.all_records()] == RECS[:3]
    p.unlink()
    with pytest.raises(JournalLost):
        j.write(RECS[3])
    j.close()
    (saved,) = tmp_path.glob("journal.recovered-*.jsonl")
    assert [{k: v for k, v in r.items() if k != "seq"} for r in read_journal(saved)] == RECS[:3]


@pytest.mark.parametrize("forge", [
    lambda r: r["s"][0].update(name="Z"),          # a name outside the pool
    lambda r: r.pop("i"),                          # a missing key
    lambda r: r.update(j=99),                      # an agent that does not exist
])
def test_forged_or_broken_records_are_refused_on_resume(tmp_path, forge):
    from normlab.llm_runs import EndpointConfig, run_game
    from normlab.llm_runs.testing import StubServer

    out = tmp_path / "run"
    with StubServer(["Q", "M"]) as stub:
        cfg = EndpointConfig(base_url=stub.base_url)
        run_game(4, 2, "Q,M", max_interactions=12, runs=1, mode="sample", stop="max", rng=1, endpoint=cfg, out=out,
                 progress=False)
        recs = read_journal(out / "journal.jsonl")
        recs = [r for r in recs if r["ev"] != "end"]  # unfinished, so that resuming replays
        k = next(n for n, r in enumerate(recs) if r["ev"] == "int")
        forge(recs[k])
        (out / "journal.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
        with pytest.raises(ValueError, match="malformed or names something outside the pool"):
            run_game(4, 2, "Q,M", max_interactions=12, runs=1, mode="sample", stop="max", rng=1, endpoint=cfg,
                     out=out, progress=False)
