"""The journal's record format is declared once (``normlab.llm_runs.journal.records``: the kinds and
the fields of each view) and its code generated from the tables: the lines it writes, the byte
patterns the fast index reads them by and the views' readings are those of the hand-written format
(journals written before the tables read and resume the same)."""

from __future__ import annotations

import inspect
from types import SimpleNamespace

import pytest

from normlab.llm_runs import journal as jr

RESULT = SimpleNamespace(text="Q", top=[["Q", -0.1]], tokens=["Q"], finish_reason="stop", prompt_tokens=120,
                         completion_tokens=1, cached_tokens=64, latency=0.0123456789, attempts=1, errors=[],
                         reservation=7)


def _decisions():
    ex = jr.exact_decision(shown="Q,M", prompt_hash="ab", probs=[0.7, 0.3], covered_mass=0.99, approx=False,
                           name="Q", invalid_reason=None, p_name=0.7, calls=1, latency=0.5, prompt_tokens=120,
                           completion_tokens=1)
    sm = jr.sample_decision(shown="M,Q", prompt_hash="cd", name=None, invalid_reason="no pool name", text="x",
                            reasks=2, calls=3, latency=1.25, prompt_tokens=360, completion_tokens=18)
    return ex, sm


# the lines as the hand-written writers wrote them (before the tables)
GOLDEN = [
    b'{"ev":"call","id":1,"run":0,"t":3,"agent":2,"purpose":"exact","key":"k1","ph":"ab","partial":"","text":"Q",'
    b'"top":[["Q",-0.1]],"tokens":["Q"],"finish":"stop","ptok":120,"ctok":1,"cached":64,"lat":0.012346,"attempts":1,'
    b'"errors":[],"res":7}\n',
    b'{"ev":"cached","purpose":"exact","key":"k2","top":[["M",-0.2]],"ph":"ef","partial":"","run":0,"t":4}\n',
    b'{"ev":"int","run":0,"t":3,"i":2,"j":5,"s":[{"shown":"Q,M","ph":"ab","p":[0.7,0.3],"cov":0.99,"approx":false,'
    b'"name":"Q","inv":null,"pn":0.7,"calls":1,"hit":false,"lat":0.5,"ptok":120,"ctok":1},{"shown":"M,Q","ph":"cd",'
    b'"name":null,"inv":"no pool name","text":"x","reasks":2,"calls":3,"hit":false,"lat":1.25,"ptok":360,"ctok":18}]}\n',
    b'{"ev":"int","run":1,"t":0,"i":0,"j":1,"s":[{"name":"M","committed":true,"calls":0},{"shown":"Q,M","ph":"ab",'
    b'"p":[0.7,0.3],"cov":0.99,"approx":false,"name":"Q","inv":null,"pn":0.7,"calls":1,"hit":false,"lat":0.5,'
    b'"ptok":120,"ctok":1,"order":[1,0]}]}\n',
    b'{"ev":"end","run":0,"n":4,"reason":"streak"}\n',
    b'{"ev":"error","run":1,"t":2,"message":"boom \xc3\xa9"}\n',
    b'{"ev":"probe","key":"state:QQ","side":{"shown":"M,Q","ph":"cd","name":null,"inv":"no pool name","text":"x",'
    b'"reasks":2,"calls":3,"hit":false,"lat":1.25,"ptok":360,"ctok":18}}\n',
    b'{"ev":"reserve","id":7,"tok":130.0,"usd":0.001}\n',
    b'{"ev":"step","t":15.0,"digest":"dd","counts":{"a":1}}\n',
    b'{"ev":"episode_event","episode":"ep1","i":0,"e":{"x":"\\ud800"}}\n',
    b'{"ev":"episode","episode":"ep1","data":{"turns":[]}}\n',
]


def _records():
    ex, sm = _decisions()
    return [jr.call_record(id=1, run=0, t=3, agent=2, purpose="exact", key="k1", prompt_hash="ab", partial="",
                           result=RESULT),
            jr.imported_record(key="k2", top=[["M", -0.2]], prompt_hash="ef", partial="", run=0, t=4),
            jr.interaction_record(0, 3, 2, 5, (ex, sm)),
            jr.interaction_record(1, 0, 0, 1, (jr.committed_decision("M"), ex.with_order([1, 0]))),
            jr.run_end_record(0, 4, "streak"), jr.run_error_record(1, 2, "boom \u00e9"),
            jr.probe_record("state:QQ", sm), jr.reserve_record(id=7, tokens=130.0, usd=0.001),
            jr.step_record(15.0, "dd", {"a": 1}), jr.episode_event_record("ep1", 0, {"x": "\ud800"}),
            jr.episode_record("ep1", {"turns": []})]


def test_the_writers_write_the_lines_they_always_wrote():
    assert [jr._line(r) for r in _records()] == GOLDEN


def test_every_kind_is_written_in_its_declared_key_order():
    declared = {code: ["ev"] + [s.partition("=")[0].rstrip("?") for s in k.keys] for code, k in jr.KINDS.items()}
    optional = {s.partition("=")[0].rstrip("?") for k in jr.KINDS.values() for s in k.keys
                if s.partition("=")[0].endswith("?")}
    assert optional == {"res", "counted"}
    for rec in _records():  # the optional keys only when they hold a value (RESULT: a reservation, usage reported)
        assert list(rec) == [k for k in declared[rec["ev"]] if k not in optional or k in rec], rec["ev"]
    assert "res" in _records()[0] and "counted" not in _records()[0]
    # a request without a reservation has no "res"; one whose answer carried no usage says its tokens were counted
    rec = jr.call_record(id=1, run=0, t=0, agent=0, purpose="sample", key=None, prompt_hash="ab", partial=None,
                         result=SimpleNamespace(**{**vars(RESULT), "reservation": None}))
    assert list(rec) == declared[jr.CALL][:-2]
    rec = jr.call_record(id=1, run=0, t=0, agent=0, purpose="sample", key=None, prompt_hash="ab", partial=None,
                         result=SimpleNamespace(**{**vars(RESULT), "usage_missing": True}))
    assert list(rec) == declared[jr.CALL] and rec["counted"] is True and jr.Call(rec).usage_counted
    assert set(jr.KINDS) == {jr.CALL, jr.IMPORTED, jr.INTERACTION, jr.RUN_END, jr.RUN_ERROR, jr.PROBE, jr.RESERVE,
                             jr.STEP, jr.EPISODE_EVENT, jr.EPISODE}


def test_decisions_write_only_declared_keys():
    keys = {f.key for f in jr.DECISION_VIEW}
    ex, sm = _decisions()
    for d in (ex, sm, jr.committed_decision("Q"), ex.with_order([0, 1])):
        assert set(d.record) <= keys


def test_the_index_patterns_are_the_hand_written_ones():
    assert jr._INT_HEAD.pattern == rb'\{"ev":"int","run":(\d+),"t":(\d+),"i":(\d+),"j":(\d+),"s":\['
    assert jr._TAIL.pattern == rb',"seq":(\d+)(?:,"fp":"([0-9a-f]*)")?\}\s*$'
    assert jr._CALL_HEAD == b'{"ev":"call",' and jr._RESERVE_HEAD == b'{"ev":"reserve",'
    assert jr._SIDE_FILLED == {"name": b'"name":"', "names_shown": b'"shown":"', "prompt_hash": b'"ph":"',
                               "probs": b'"p":[', "invalid_reason": b'"inv":"', "text": b'"text":"'}
    assert jr._CALL_FILLED == {"purpose": b'"purpose":"', "prompt_hash": b'"ph":"', "partial": b'"partial":"',
                               "top": b'"top":[', "text": b'"text":"', "finish_reason": b'"finish":"',
                               "errors": b'"errors":["'}
    assert [bool(jr._INT_HEAD.match(line)) for line in GOLDEN] == [False, False, True, True] + [False] * 7


@pytest.mark.parametrize("view, fields", [(jr.Decision, jr.DECISION_VIEW), (jr.Call, jr.DISTRIBUTION_VIEW + jr.CALL_VIEW),
                                          (jr.Reservation, jr.RESERVATION_VIEW), (jr.Interaction, jr.INTERACTION_VIEW),
                                          (jr.RunEnd, jr.RUN_END_VIEW), (jr.ProbeAnswer, jr.PROBE_ANSWER_VIEW),
                                          (jr.Step, jr.STEP_VIEW), (jr.EpisodeEvent, jr.EPISODE_EVENT_VIEW),
                                          (jr.EpisodeDone, jr.EPISODE_DONE_VIEW)])
def test_views_read_their_fields_with_the_declared_defaults(view, fields):
    empty = view({})
    for f in fields:
        if f.read == "required":
            with pytest.raises(KeyError):
                getattr(empty, f.attr)
        else:
            assert getattr(empty, f.attr) == (bool(f.default) if f.read == "bool" else f.default), f.attr
        if f.read == "count":  # a token count or amount: checked (issue 29: usage validated wherever summed)
            assert getattr(view({f.key: 7}), f.attr) == 7, f.attr
            for bad in ("v", -5, float("nan"), 1e400, True):
                with pytest.raises(ValueError, match="not a token count"):
                    getattr(view({f.key: bad}), f.attr)
        else:
            assert getattr(view({f.key: "v"}), f.attr) == (True if f.read == "bool" else "v"), f.attr
    assert not hasattr(empty, "__dict__")  # slots only: a view stays one pointer


def test_the_bulk_readers_agree_with_the_views():
    recs = _records()
    calls = [r for r in recs if r["ev"] == jr.CALL]
    cols = jr.call_columns(calls)
    assert list(cols) == list(jr.CALL_FIELDS)
    for f in jr.CALL_FIELDS:
        assert cols[f] == [getattr(jr.Call(r), f) for r in calls], f
    sides = jr.interaction_sides([r for r in recs if r["ev"] == jr.INTERACTION]) + [{}]
    cols = jr.decision_columns(sides)
    assert list(cols) == list(jr.DECISION_FIELDS)
    for f in jr.DECISION_FIELDS:
        assert cols[f] == [getattr(jr.Decision(s), f) for s in sides], f


def test_generated_code_is_readable():
    src = jr.generated_source()
    assert "def interaction_record(run: int, t: int, i: int, j: int, sides) -> dict:" in src
    assert 'return {"ev": INTERACTION, "run": run, "t": t, "i": i, "j": j, "s": [si.record, sj.record]}' in src
    assert inspect.getsource(jr.interaction_record).startswith("def interaction_record(")
    assert jr.Decision.name.fget.__qualname__ == "Decision.name"
    assert jr.Call.cached_tokens.__doc__ == "Prompt tokens the server reported as served from its cache."
