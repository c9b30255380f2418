"""The stub's scripted stand-ins register themselves (``core/stub.py`` knows no task): the public
face :mod:`normlab.llm_runs.testing` names their modules and imports them on the first scripted use."""

from __future__ import annotations

import subprocess
import sys

import pytest

from normlab.llm_runs import testing
from normlab.llm_runs.core import stub


def test_stand_ins_register_themselves():
    assert testing.stand_ins() == ("crsec", "scene")
    from normlab.llm_runs.crsec.scripted import responder as crsec
    from normlab.llm_runs.scene.scripted import responder as scene

    assert stub.SCRIPTED == {"crsec": crsec, "scene": scene}
    with testing.StubServer(scripted="scene") as s:
        assert s.responder is not None
    with pytest.raises(ValueError, match=r"^scripted must be one of \('crsec', 'scene'\); got 'nope'$"):
        testing.StubServer(scripted="nope")


@pytest.mark.slow  # 2 s in the quick tier (issue 33: the default tier under 5 minutes)
def test_the_stub_command_loads_the_stand_ins_only_when_asked():
    code = ("import sys; from normlab.llm_runs import testing; "
            "print('normlab.llm_runs.crsec.scripted' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False"]
    out = subprocess.run([sys.executable, "-m", "normlab.llm_runs.testing", "--help"], capture_output=True, text=True,
                         check=True).stdout
    assert "{crsec,scene}" in out
    bad = subprocess.run([sys.executable, "-m", "normlab.llm_runs.testing", "--scripted", "nope"], capture_output=True,
                         text=True)
    assert bad.returncode == 2 and "invalid choice: 'nope' (choose from 'crsec', 'scene')" in bad.stderr
