"""The layering rule of ARCHITECTURE.md, checked on the source: ``theory`` imports neither
``llm_runs`` nor ``calibration``; ``llm_runs`` does not import ``calibration``; none of them
imports the top layers ``figures``, ``demo`` and ``study``; no layer imports another's private modules or
names; and every module that exists is named in ARCHITECTURE.md (the map stays complete)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
import _paths  # the repository's and tests/' folders (tests/_paths.py)

REPO = _paths.REPO
FORBIDDEN = {
    "theory": ("normlab.llm_runs", "normlab.calibration", "normlab.figures", "normlab.demo", "normlab.study"),
    "llm_runs": ("normlab.calibration", "normlab.figures", "normlab.demo", "normlab.study"),
    "calibration": ("normlab.figures", "normlab.demo", "normlab.study"),
}
RELATIVE_ROOT = {"theory": "normlab.theory", "llm_runs": "normlab.llm_runs", "calibration": "normlab.calibration"}


def _imports(path: Path, package: str) -> list[str]:
    """Absolute names of every module imported by ``path`` (relative imports resolved)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    rel = path.relative_to(REPO / package).with_suffix("")
    parts = [RELATIVE_ROOT[package], *rel.parts]
    if parts[-1] == "__init__":
        parts = parts[:-1]
    pkg_parts = parts if path.name == "__init__.py" else parts[:-1]
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = pkg_parts[: len(pkg_parts) - node.level + 1]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            out.append(mod)
            out += [f"{mod}.{a.name}" for a in node.names]
    return out


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_layers_do_not_import_upwards(package):
    bad = []
    for path in sorted((REPO / package).rglob("*.py")):
        for mod in _imports(path, package):
            if mod.startswith(FORBIDDEN[package]):
                bad.append(f"{path.relative_to(REPO)} imports {mod}")
    assert not bad, "layering rule broken:\n" + "\n".join(bad)


#: The umbrella's modules every layer may import, private names of theirs excepted (ARCHITECTURE.md;
#: ``normlab._jit`` is the one import of Numba).
SHARED = ("normlab._rng", "normlab._validate", "normlab._lazy", "normlab._display", "normlab.schema", "normlab._jit",
          "normlab._cores")
SOURCES = {"theory": "normlab.theory", "llm_runs": "normlab.llm_runs", "calibration": "normlab.calibration",
           "src/normlab": "normlab"}


def _layer(module: str) -> str:
    """``theory``, ``llm_runs``, ``calibration``, ``figures``, ``demo``, ``study`` or the umbrella ``normlab``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in ("theory", "llm_runs", "calibration", "figures",
                                                        "demo", "study") else "normlab"


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


@pytest.mark.slow  # 2 s in the quick tier (issue 33: the default tier under 5 minutes)
def test_no_private_imports_across_layers():
    """No module imports a ``_``-prefixed module or name of another layer (the umbrella's shared
    modules excepted): what one layer offers another has a public name."""
    bad = []
    for folder, root in SOURCES.items():
        for path in sorted((REPO / folder).rglob("*.py")):
            rel = path.relative_to(REPO / folder).with_suffix("")
            parts = [root, *rel.parts]
            if parts[-1] == "__init__":
                parts = parts[:-1]
            here = _layer(".".join(parts))
            pkg = parts if path.name == "__init__.py" else parts[:-1]
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.Import):
                    targets = [(a.name, None) for a in node.names]
                elif isinstance(node, ast.ImportFrom):
                    mod = (".".join(pkg[: len(pkg) - node.level + 1] + ([node.module] if node.module else []))
                           if node.level else node.module or "")
                    targets = [(mod, a.name) for a in node.names]
                else:
                    continue
                for mod, name in targets:
                    if not mod.startswith("normlab") or _layer(mod) == here:
                        continue
                    private_mod = mod not in SHARED and any(_private(p) for p in mod.split(".")[1:])
                    private_name = name is not None and _private(name)
                    what = mod + (f".{name}" if name else "")
                    if private_mod or private_name:
                        bad.append(f"{folder}/{rel.as_posix()}.py:{node.lineno} imports {what}")
    assert not bad, "private names imported across layers:\n" + "\n".join(bad)


def test_every_lazy_export_resolves():
    """Each public name of the three sub-packages still imports after moves (the public API)."""
    import normlab.calibration as ca
    import normlab.demo as de
    import normlab.figures as fg
    import normlab.llm_runs as lr
    import normlab.study as sd
    import normlab.theory as th

    for pkg in (th, lr, ca, fg, de, sd):
        for name in pkg.__all__:
            assert getattr(pkg, name) is not None, f"{pkg.__name__}.{name}"


def _plugin_modules() -> set:
    """Files of the plug-in modules a registry names (ARCHITECTURE.md's recipes add a probe, a fit
    kind or a figure in two files, the module and its registry line): the ``"module:ATTR"`` families
    of ``FIT_KINDS``, the ``ProbeSpec`` modules and the figure modules."""
    from normlab.calibration.fit.registry import FIT_KINDS
    from normlab.figures.registry import FIGURE_MODULES
    from normlab.llm_runs.probes.registry import PROBES

    names = {k.family.partition(":")[0] if isinstance(k.family, str) else type(k.family).__module__
             for k in FIT_KINDS.values()}
    names |= {f"normlab.llm_runs.probes.{s.module}" for s in PROBES.values()}
    names |= {f"normlab.figures.{m}" for m in FIGURE_MODULES}
    paths = _module_paths()
    return {REPO / paths[n][0] / paths[n][1] for n in names if n in paths}


def test_architecture_names_every_module():
    """Every module is named in ARCHITECTURE.md, or by a registry (a plug-in module)."""
    text = (REPO / "ARCHITECTURE.md").read_text(encoding="utf-8")
    plugins = _plugin_modules()
    missing = []
    for folder in ("theory", "llm_runs", "calibration", "src/normlab"):
        for path in sorted((REPO / folder).rglob("*.py")):
            if path.name == "__init__.py" and path.parent == REPO / folder:
                continue
            if path in plugins:
                continue
            rel = path.relative_to(REPO / folder)
            # a module is named by its file name, a sub-package by "folder/"; nested modules
            # need their sub-package named too
            tokens = [f"{p}/" for p in rel.parent.parts]
            if path.name != "__init__.py":
                tokens.append(path.name)
            if not all(f"`{t}" in text or f" {t}" in text or f"({t}" in text or f"/{t}" in text for t in tokens):
                missing.append(f"{folder}/{rel.as_posix()}")
    assert not missing, "modules not named in ARCHITECTURE.md: " + ", ".join(missing)


def test_figures_registry_covers_every_paper_figure_and_a_script():
    """Every figure and table the paper numbers has a registry entry, and every entry a script."""
    from normlab.figures import FIGURES

    want = {"fig1a", "fig1b", "fig2a", "fig2b", "fig3a", "fig3b", *(f"figS{k}" for k in range(1, 11)),
            "table1", "tableS1", "tableS2", "tableS3", "tableS5"}
    assert want <= set(FIGURES)
    scripts = "\n".join(p.read_text(encoding="utf-8") for p in (REPO / "paper_figures").glob("*.py"))
    for key in FIGURES:
        assert f'"{key}"' in scripts, f"no paper_figures/ script makes {key}"


# ----------------------------------------------------------------------------- the import graph
def _module_imports():
    """``{module: [(imported module, lineno, in_function), ...]}`` over normlab's source, relative
    imports resolved and ``from pkg import name`` resolved to the module ``pkg.name`` when it is one;
    imports under ``if TYPE_CHECKING`` left out."""
    paths = {}
    for folder, root in SOURCES.items():
        for path in sorted((REPO / folder).rglob("*.py")):
            rel = path.relative_to(REPO / folder).with_suffix("")
            parts = [root, *rel.parts]
            if parts[-1] == "__init__":
                parts = parts[:-1]
            paths[".".join(parts)] = path
    out = {}
    for name, path in paths.items():
        pkg = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
        found = []

        def visit(node, in_func):
            for ch in ast.iter_child_nodes(node):
                if isinstance(ch, ast.If) and "TYPE_CHECKING" in ast.dump(ch.test):
                    continue
                if isinstance(ch, ast.Import):
                    found.extend((a.name, ch.lineno, in_func) for a in ch.names)
                elif isinstance(ch, ast.ImportFrom):
                    mod = (".".join(pkg[: len(pkg) - ch.level + 1] + ([ch.module] if ch.module else []))
                           if ch.level else ch.module or "")
                    for a in ch.names:
                        sub = f"{mod}.{a.name}"
                        found.append((sub if sub in paths else mod, ch.lineno, in_func))
                else:
                    visit(ch, in_func or isinstance(ch, (ast.FunctionDef, ast.AsyncFunctionDef)))

        visit(ast.parse(path.read_text(encoding="utf-8")), False)
        out[name] = [(m, ln, f) for m, ln, f in found if m in paths and m != name]
    return out


@pytest.mark.slow  # 2 s in the quick tier (issue 33: the default tier under 5 minutes)
def test_no_import_cycles():
    """No circle in normlab's import graph, counting every import (module top and deferred): a
    circle means code that belongs in a leaf module lives in one of its users."""
    graph = {m: sorted({t for t, _, _ in imps}) for m, imps in _module_imports().items()}
    index, low, stack, on, cycles, counter = {}, {}, [], set(), [], [0]

    def strong(v):  # Tarjan's strongly connected components
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                cycles.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            strong(v)
    assert not cycles, "import circles:\n" + "\n".join(" <-> ".join(c) for c in cycles)


@pytest.mark.slow  # 2 s in the quick tier (issue 33: the default tier under 5 minutes)
def test_imports_between_layers_at_module_top():
    """A module imports the other layers at its top, so the code draws its own graph; only the
    light command modules (``_cli.py``, which keep ``normlab --help`` fast) import the work modules
    inside their handlers."""
    bad = []
    for mod, imps in _module_imports().items():
        if mod.rsplit(".", 1)[-1].startswith("_cli"):  # _cli.py, _cli_predict.py, _cli_format.py
            continue
        for target, line, in_func in imps:
            if in_func and _layer(target) != _layer(mod) and _layer(target) != "normlab":
                bad.append(f"{mod}:{line} imports {target} inside a function")
    assert not bad, "deferred imports between layers:\n" + "\n".join(bad)


def _definitions():
    """Every module-level assignment ``NAME = <literal>`` and every ``def``/``class`` at module
    level, as ``(module path, name, value or None)``."""
    out = []
    for folder in SOURCES:
        for path in sorted((REPO / folder).rglob("*.py")):
            for node in ast.parse(path.read_text(encoding="utf-8")).body:
                if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
                    out.append((path, node.name, None))
                elif isinstance(node, ast.Assign) and isinstance(node.value, (ast.Constant, ast.BinOp, ast.Dict, ast.Tuple)):
                    for t in node.targets:
                        if isinstance(t, ast.Name):
                            out.append((path, t.id, ast.unparse(node.value)))
    return out


def test_each_shared_idea_has_one_home():
    """The published flip rule's constant, its per-round threshold, the exit-code texts, the
    Clopper-Pearson interval, the end-of-run and running flip readings and the consensus reading
    are each defined in one module (ARCHITECTURE.md, "One home per idea")."""
    defs = _definitions()
    literals = [(p, n, v) for p, n, v in defs if v is not None and "2.849" in v]
    assert [n for _, n, _ in literals] == ["FLIP_SUM"], f"2.849 written in: {literals}"
    assert literals[0][0] == REPO / "theory" / "criteria.py"
    for name in ("clopper_pearson", "end_of_run_windows", "flip_reached", "end_consensus", "first_position_reaching",
                 "parse_line", "interval_crossing", "firth_logistic", "EXIT_CODE_TABLE", "exit_codes",
                 "BudgetBook", "arm_budget", "journal_spent", "prompt_tokens_bound", "count_of", "resolve_seed",
                 "seed_record", "announce_seed"):
        homes = sorted({str(p.relative_to(REPO)) for p, n, v in defs if n == name})
        assert len(homes) == 1, f"{name} defined in {homes}"
    thresholds = [(str(p.relative_to(REPO)), n) for p, n, v in defs if v is not None and "FLIP_SUM / 3" in v]
    assert thresholds == [("theory/criteria.py", "PUBLISHED_FLIP_THRESHOLD")], thresholds


from collections import defaultdict

#: Folders (sub-packages) of each layer, in the order they may import one another: a module may import
#: its own folder and folders of strictly lower rank; a layer's root modules ("") are its top (commands,
#: workflows, assembled objects) and nothing in a folder imports them.
RANKS = {
    "calibration": {"fit": 0, "prediction": 1, "evaluate": 2, "tip": 3, "": 9},
    "llm_runs": {"backend": 0, "published": 0, "templates": 0, "journal": 1, "core": 2, "runner": 3, "crsec": 3,
                 "scene": 3, "probes": 4, "": 9},
}
#: Modules over 1 000 lines (ratchet: remove each entry when its split lands).
OVER_1000: set = set()
#: Functions users call from notebooks that keep today's keywords as a documented convenience (each builds
#: the value objects and calls an engine of at most 12 parameters), and compiled kernels with their
#: pure-Python twins (bit-identical contract; grouped into tuples only by the kernel owner).
PUBLIC_CONVENIENCES = {
    "calibrate", "predict", "probe_predict", "tip", "LLMSource.__init__", "arun_game", "run_game", "make_settings",
    "meta_prompting", "ameta_prompting", "run_population", "arun_population", "estimate_population", "run_demo",
    "strategy_game", "minimal_naming_game", "simulate_ltrha", "StubServer.__init__", "fit_logit",
}
KERNELS = {"_ng_steps", "_remember", "_sg_run_py", "_lean_remember", "_sg_lean_play_py", "_lean", "_sg_lean_run_py",
           "ng_run_reference", "sg_run_reference"}
#: Engine functions still over 12 parameters (ratchet).
WIDE: set = set()


def _module_paths():
    out = {}
    for folder, root in SOURCES.items():
        for path in sorted((REPO / folder).rglob("*.py")):
            rel = path.relative_to(REPO / folder).with_suffix("")
            parts = [root, *rel.parts]
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out[".".join(parts)] = (folder, path.relative_to(REPO / folder))
    return out


def _folder(module, paths):
    """``(layer, sub-package)``: ``("llm_runs", "core")`` for ``normlab.llm_runs.core.stub``, ``("llm_runs", "")``
    for a root module of the layer; the umbrella's figures/ and demo/ are layers of their own."""
    layer = _layer(module)
    folder, rel = paths[module]
    parts = rel.parts
    if folder == "src/normlab" and layer in ("figures", "demo", "study"):
        parts = parts[1:]
    return layer, (parts[0] if len(parts) > 1 else "")


def _cycles(graph):
    index, low, stack, on, found, counter = {}, {}, [], set(), [], [0]

    def strong(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            strong(v)
    return found


def _folder_edges():
    paths = _module_paths()
    edges = defaultdict(set)
    for mod, imps in _module_imports().items():
        a = _folder(mod, paths)
        for tgt, line, _ in imps:
            b = _folder(tgt, paths)
            if a != b and a[0] == b[0]:
                edges[(a, b)].add(f"{mod}:{line} -> {tgt}")
    return edges


@pytest.mark.slow  # 2 s in the quick tier (issue 33: the default tier under 5 minutes)
def test_no_circle_between_folders():
    """Within each layer, the sub-packages and the root modules import one another without a circle."""
    graph = defaultdict(set)
    for a, b in _folder_edges():
        graph[a].add(b)
    assert not _cycles(graph), "folder circles: " + "; ".join(" <-> ".join("/".join(x) for x in c) for c in _cycles(graph))


def _against_the_order(layers=None):
    """Imports from a folder to one of the same or a higher rank (``RANKS``), in ``layers`` (default: all)."""
    bad = []
    for (a, b), where in sorted(_folder_edges().items()):
        ranks = RANKS.get(a[0])
        if ranks is None or (layers is not None and a[0] not in layers):
            continue
        ra, rb = ranks.get(a[1]), ranks.get(b[1])
        if ra is None or rb is None:
            bad.append(f"{a[0]}/{a[1] or '(root)'} or {b[1] or '(root)'} has no rank in RANKS")
        elif rb >= ra:
            bad += sorted(where)
    return bad


@pytest.mark.slow  # 2 s in the quick tier (issue 33: the default tier under 5 minutes)
def test_sub_packages_import_downwards_only():
    bad = _against_the_order()
    assert not bad, "imports against the sub-package order:\n" + "\n".join(bad)


@pytest.mark.slow  # 2 s in the quick tier (issue 33: the default tier under 5 minutes)
def test_calibration_sub_packages_import_downwards_only():
    """calibration's folders (fit < prediction < evaluate < tip < the root modules) import downwards only
    (the layer regrouped already; the test above covers every layer)."""
    bad = _against_the_order({"calibration"})
    assert not bad, "imports against the sub-package order:\n" + "\n".join(bad)


#: Sub-packages whose ``__init__.py`` stays light: a docstring and lazy exports only, so that importing one
#: module of the folder does not import the others (folders still to come are skipped).
LIGHT_INITS = ("llm_runs/core", "llm_runs/runner", "calibration/fit", "calibration/prediction", "calibration/evaluate",
               "calibration/tip")


def test_sub_package_inits_stay_light():
    bad = []
    for folder in LIGHT_INITS:
        path = REPO / folder / "__init__.py"
        if not path.exists():
            continue
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
                continue  # the docstring
            if isinstance(node, ast.ImportFrom) and node.module in ("__future__", "normlab._lazy"):
                continue
            targets = [n.id for t in getattr(node, "targets", ()) for n in ast.walk(t) if isinstance(n, ast.Name)]
            if isinstance(node, ast.Assign) and set(targets) <= {"_EXPORTS", "_SUBMODULES", "__getattr__", "__dir__",
                                                                 "__all__"}:
                continue
            bad.append(f"{folder}/__init__.py:{node.lineno}: {ast.unparse(node)[:80]}")
    assert not bad, "sub-package __init__.py that import eagerly:\n" + "\n".join(bad)


def test_no_module_over_1000_lines():
    over = set()
    for folder in SOURCES:
        for path in (REPO / folder).rglob("*.py"):
            if len(path.read_text(encoding="utf-8").splitlines()) > 1000:
                over.add(path.relative_to(REPO).as_posix())
    assert over <= OVER_1000, f"new modules over 1 000 lines: {sorted(over - OVER_1000)}"
    assert not (OVER_1000 - over), f"split already: remove {sorted(OVER_1000 - over)} from OVER_1000"


@pytest.mark.slow  # 3 s in the quick tier (issue 33: the default tier under 5 minutes)
def test_engine_functions_take_at_most_12_parameters():
    wide = set()
    for folder in SOURCES:
        for path in (REPO / folder).rglob("*.py"):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            for cls in [None, *(n for n in ast.walk(tree) if isinstance(n, ast.ClassDef))]:
                body = tree.body if cls is None else cls.body
                for fn in (n for n in body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))):
                    a = fn.args
                    names = [x.arg for x in a.posonlyargs + a.args + a.kwonlyargs if x.arg not in ("self", "cls")]
                    n = len(names) + (a.vararg is not None) + (a.kwarg is not None)
                    if n > 12:
                        wide.add(fn.name if cls is None else f"{cls.name}.{fn.name}")
    wide -= PUBLIC_CONVENIENCES | KERNELS
    assert wide <= WIDE, f"engine functions over 12 parameters: {sorted(wide - WIDE)} (take a value object)"
    assert not (WIDE - wide), f"narrowed already: remove {sorted(WIDE - wide)} from WIDE"


def test_moved_paths_are_the_same_modules():
    """Every old path of a moved module imports the very module of its new path."""
    import importlib

    import normlab.calibration  # noqa: F401 (fills the tables)
    import normlab.llm_runs  # noqa: F401
    from normlab._lazy import _MOVED

    for old, new in _MOVED.items():
        assert importlib.import_module(old) is importlib.import_module(new), old


def test_old_paths_run_with_python_m():
    """``python -m`` of an old path runs the moved module (an old path: ``python -m normlab.calibration.group_size``),
    its relative imports resolved from its new place."""
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-m", "normlab.calibration.group_size", "--help"], capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0 and "--sizes" in out.stdout, out.stderr[-2000:]


@pytest.mark.slow  # 2 s in the quick tier (issue 33: the default tier under 5 minutes)
def test_sources_use_current_module_paths():
    """normlab's own modules import moved modules by their new paths (an import of an old path would
    hide an edge from the cycle and folder checks)."""
    import normlab.calibration  # noqa: F401
    import normlab.llm_runs  # noqa: F401
    from normlab._lazy import _MOVED

    bad = []
    for folder, root in SOURCES.items():
        for path in (REPO / folder).rglob("*.py"):
            rel = path.relative_to(REPO / folder).with_suffix("")
            pkg = [*root.split("."), *rel.parts[:-1]]
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.Import):
                    names = [a.name for a in node.names]
                elif isinstance(node, ast.ImportFrom):
                    mod = ".".join(pkg[: len(pkg) - node.level + 1] + [node.module or ""]).strip(".") \
                        if node.level else node.module or ""
                    names = [mod] + [f"{mod}.{a.name}" for a in node.names]
                else:
                    continue
                bad += [f"{path.relative_to(REPO)}: {n}" for n in names if n in _MOVED]
    assert not bad, "imports of old module paths: " + "; ".join(bad)


@pytest.mark.slow  # 3 s in the quick tier (issue 33: the default tier under 5 minutes)
def test_architecture_table_is_current():
    """ARCHITECTURE.md's module table is the one its generator writes from the module docstrings
    (`python tools/architecture.py --write` after adding or renaming a module)."""
    import subprocess
    import sys

    r = subprocess.run([sys.executable, str(REPO / "tools" / "architecture.py"), "--check"], capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    text = (REPO / "ARCHITECTURE.md").read_text(encoding="utf-8")
    block = text.split("<!-- BEGIN generated module table", 1)[1].split("<!-- END generated module table", 1)[0]
    rows = [ln for ln in block.splitlines() if ln.startswith("|")]
    assert len(rows) > 100 and max(len(r) for r in rows) <= 600, "a row of the map is too long to read: shorten its docstring's first paragraph"
