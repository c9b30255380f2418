"""Issue 29, item 4: budgets that hold for every runner. Each request's write-ahead reservation is
journaled before it is sent and settled by its record; an unsettled one counts in full on resume
(one home: ``llm_runs/journal/budget.py``). The fault matrix kills ``crsec run``, ``scene run``
and ``tip`` with budgets in requests and tokens, and a counting proxy in front of the stub shows
that the server received no more than the budget. A server that omits ``usage`` is counted from
the text; token counts are checked wherever a journal is summed."""

from __future__ import annotations

import json

import pytest

from normlab.cli import main
from normlab.llm_runs import EndpointConfig
from normlab.llm_runs import journal as jr
from normlab.llm_runs.testing import CountingProxy, StubServer, budget_kill_trials

LLM_RUN = ["llm-run", "--n-agents", "6", "--memory", "2", "--names", "Q,M", "--max-interactions", "40", "--runs", "2",
           "--mode", "sample", "--seed", "3", "--no-progress"]
CRSEC = ["crsec", "run", "--ops", "llm", "--agents", "Bob Johnson,Carlos Gomez,Tamara Taylor,Isabella Rodriguez",
         "--minutes", "90", "--p-present", "1", "--seed", "5", "--no-progress"]
SCENE = ["scene", "run", "--tuples", "4", "--seed", "2", "--max-turns", "3", "--no-progress", "--n-boot", "100"]
TIP = ["tip", "--names", "Q,M", "--memory", "2", "--n-agents", "6", "--direction", "overturn_Q", "--runs-per-count",
       "2", "--baselines", "2", "--baseline-rounds", "5", "--window", "6", "--draws", "40", "--confirm", "0",
       "--seed", "1", "--no-progress"]


def _records(out):
    return [json.loads(x) for x in (out / "journal.jsonl").read_bytes().splitlines()]


def _lines(capsys):
    return [x for x in capsys.readouterr().err.splitlines() if x.strip()]


# ----------------------------------------------------------------------------- the fault matrix
@pytest.mark.slow
@pytest.mark.parametrize("args, stub, budget, kill_after", [
    (CRSEC, ("--scripted", "crsec"), "60req", (2, 30)),
    (CRSEC, ("--scripted", "crsec"), "12000", (2, 30)),
    (SCENE, ("--scripted", "scene"), "40req", (2, 20)),
    (SCENE, ("--scripted", "scene"), "12000", (2, 20)),
    (TIP, ("--names", "Q,M"), "60000", (10, 60)),
    (TIP, ("--names", "Q,M"), "150req", (10, 60)),
], ids=["crsec-requests", "crsec-tokens", "scene-requests", "scene-tokens", "tip-tokens", "tip-requests"])
def test_budgets_hold_through_kills(args, stub, budget, kill_after, tmp_path):
    """kill -9 three times with requests in flight, then run to the budget: the server received no
    more requests or tokens than the budget (before: 65 requests against 60req, 14 058-15 633 tokens
    against 12 000 in scene run, 63 122-63 447 against 60 000 in tip)."""
    res = budget_kill_trials(args, budget, stub_args=stub, n_trials=1, kills=3, rng=29, workdir=tmp_path,
                             kill_after=kill_after)
    assert res["failures"] == [] and res["exits"] == [5], res  # the budget was reached
    assert res["cut_off"] >= 3, res  # the kills cut off requests the server received and billed
    (requests, tokens), = res["received"]
    if budget.endswith("req"):
        assert requests <= int(budget[:-3]), res
    else:
        assert tokens <= int(budget), res


# ----------------------------------------------------------------------------- write-ahead, in process
@pytest.mark.parametrize("task, args", [("crsec", CRSEC), ("scene", SCENE)], ids=["crsec", "scene"])
def test_request_budgets_are_written_ahead_and_unsettled_reservations_count_on_resume(task, args, tmp_path, capsys):
    with StubServer(scripted=task) as stub:
        out = tmp_path / "run"
        cmd = [*args, "--base-url", stub.base_url, "--out", str(out)]
        assert main([*cmd, "--budget", "20req"]) == 5
        assert stub.n_chat == 20
        recs = _records(out)
        reserved = set()
        for r in recs:  # every request's reservation is journaled before it, and its record settles it
            if r["ev"] == "reserve":
                reserved.add(r["id"])
            elif r["ev"] == "call":
                assert r["res"] in reserved
        assert len(reserved) == sum(r["ev"] == "call" for r in recs) == 20
        # a request cut off by a kill: its reservation stays open and counts as a request on resume
        stored = jr.read_settings(out)
        with jr.Journal(out / "journal.jsonl", fingerprint=stored["hash"], load=False) as j:
            j.write(jr.reserve_record(id=21, tokens=500, usd=0.0))
        capsys.readouterr()
        assert main([*cmd, "--budget", "21req"]) == 5
        assert stub.n_chat == 20  # 20 requests journaled + 1 cut off: nothing left to send
        assert "21 of the budget of 21 requests are spent" in _lines(capsys)[-1]
        assert main([*cmd, "--budget", "22req"]) == 5
        assert stub.n_chat == 21


def test_token_budget_of_crsec_counts_unsettled_reservations_in_full(tmp_path):
    with StubServer(scripted="crsec") as stub:
        out = tmp_path / "run"
        cmd = [*CRSEC, "--base-url", stub.base_url, "--out", str(out)]
        assert main([*cmd, "--budget", "5000"]) == 5
        n = stub.n_chat
        spent = jr.journal_spent(out)
        assert spent["requests"] == n and spent["tokens"] <= 5000
        stored = jr.read_settings(out)
        with jr.Journal(out / "journal.jsonl", fingerprint=stored["hash"], load=False) as j:
            j.write(jr.reserve_record(id=n + 1, tokens=4000, usd=0.0))
        assert jr.journal_spent(out)["tokens"] == spent["tokens"] + 4000
        assert main([*cmd, "--budget", "9000"]) == 5
        assert stub.n_chat == n  # 9 000 - what was counted leaves no room for a request


# ----------------------------------------------------------------------------- usage missing or damaged
@pytest.mark.parametrize("args, stub_kw, budget", [
    (LLM_RUN, dict(names=["Q", "M"]), "3000"),
    (CRSEC, dict(scripted="crsec"), "5000"),
], ids=["llm-run", "crsec"])
def test_a_server_without_usage_is_counted_from_the_text(args, stub_kw, budget, tmp_path, capsys):
    """Before: the budget counted 0 tokens and every request of the run was sent."""
    with StubServer(**stub_kw) as stub, CountingProxy(stub.base_url, usage="omit") as px:
        out = tmp_path / "run"
        capsys.readouterr()
        assert main([*args, "--base-url", px.base_url, "--out", str(out), "--budget", budget]) == 5
        assert px.tokens <= int(budget)  # what the server billed
        assert sum("reports no token usage; tokens are counted from the text" in x for x in _lines(capsys)) == 1
    calls = [r for r in _records(out) if r["ev"] == "call"]
    assert calls and all(r.get("counted") is True and r["ptok"] > 0 and r["ctok"] > 0 for r in calls)


def test_a_negative_token_count_in_a_journal_is_refused_in_one_line(tmp_path, capsys):
    """Before: a record with -4.6 M prompt tokens drove the ledger and the budget's count negative."""
    with StubServer(["Q", "M"]) as stub:
        out = tmp_path / "run"
        cmd = [*LLM_RUN, "--base-url", stub.base_url, "--out", str(out), "--budget", "3000"]
        assert main(cmd) == 5
        j = out / "journal.jsonl"
        data = j.read_bytes()
        k = data.index(b'"ptok":', data.index(b'"ev":"call"'))
        end = data.index(b",", k)
        j.write_bytes(data[:k] + b'"ptok":-4600000' + data[end:])  # its place and fingerprint kept
        n = stub.n_chat
        capsys.readouterr()
        assert main(cmd) == 2
        err = _lines(capsys)
        assert len(err) == 1 and "ptok = -4600000 is not a token count" in err[0], err
        assert stub.n_chat == n


def test_tip_counts_every_journal_under_its_folder_open_reservations_included(tmp_path):
    """The live source's budget: what the probe and the other steps count (requests cut off by a kill
    in full), the step's own journal left to its run. Before: only the runs' tokens of this process."""
    from normlab.calibration.tip.sources import LLMSource

    for where, tok in (("probe", 1500), ("baselines", 2000), ("step01_c2", 700)):
        d = tmp_path / where
        d.mkdir()
        (d / "journal.jsonl").write_text(json.dumps({"ev": "reserve", "id": 1, "tok": tok, "usd": 0.0}) + "\n")
    src = LLMSource(names=["Q", "M"], majority="Q", memory=2, n_agents=6, out=tmp_path,
                    endpoint=EndpointConfig(base_url="http://127.0.0.1:9/v1", budget_tokens=5000))
    assert src._endpoint("step01_c2").budget_tokens == 5000 - 1500 - 2000
    assert src._endpoint("step02_c3").budget_tokens == 5000 - 1500 - 2000 - 700
    assert src._endpoint("step02_c3") is not None
    src.endpoint = EndpointConfig(base_url="http://127.0.0.1:9/v1", budget_tokens=4200)
    assert src._endpoint("step02_c3") is None  # nothing left: the search stops at its budget


def test_tip_request_budget_counts_every_journal_under_its_folder(tmp_path):
    """``tip --budget 300req``: the requests of the probe and the other steps (a reservation never
    settled counts as one) come off what a step may send. Before: tip had no request budget."""
    from normlab.calibration.tip.sources import LLMSource

    for where, n in (("probe", 3), ("baselines", 5), ("step01_c2", 2)):
        d = tmp_path / where
        d.mkdir()
        (d / "journal.jsonl").write_text("".join(json.dumps({"ev": "reserve", "id": i, "tok": 10, "usd": 0.0}) + "\n"
                                                 for i in range(1, n + 1)))
    src = LLMSource(names=["Q", "M"], majority="Q", memory=2, n_agents=6, out=tmp_path,
                    endpoint=EndpointConfig(base_url="http://127.0.0.1:9/v1", budget_requests=12))
    assert src._endpoint("step01_c2").budget_requests == 12 - 3 - 5
    assert src._endpoint("step02_c3").budget_requests == 12 - 3 - 5 - 2
    src.endpoint = EndpointConfig(base_url="http://127.0.0.1:9/v1", budget_requests=10)
    assert src._endpoint("step02_c3") is None  # nothing left: the search stops at its budget
    with pytest.raises(ValueError, match="budget_requests must be an int >= 1"):
        EndpointConfig(budget_requests=0)


def test_tip_request_budget_sends_exactly_what_is_left(tmp_path, capsys):
    """A live ``tip --budget 40req`` sends 40 requests and exits 5; the same budget again sends none,
    and 45req five more (every request of every step journaled with its reservation)."""
    with StubServer(["Q", "M"]) as stub:
        out = tmp_path / "tip"
        cmd = [*TIP, "--base-url", stub.base_url, "--out", str(out)]
        assert main([*cmd, "--budget", "40req"]) == 5
        assert stub.n_chat == 40
        assert main([*cmd, "--budget", "40req"]) == 5
        assert stub.n_chat == 40
        assert main([*cmd, "--budget", "45req"]) == 5
        assert stub.n_chat == 45
    spent = [jr.journal_spent(j.parent)["requests"] for j in out.glob("*/journal.jsonl")]
    assert sum(spent) == 45, spent
    capsys.readouterr()
    assert main(["tip", "--ainorms", str(tmp_path), "--names", "Q,M", "--memory", "2", "--n-agents", "6",
                 "--direction", "overturn_Q", "--budget", "30req"]) == 2
    err = _lines(capsys)
    assert len(err) == 1 and "a replay sends no request" in err[0], err
