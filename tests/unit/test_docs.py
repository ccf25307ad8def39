"""The documentation: the docs/ site builds strictly (no broken link or anchor, no page missing
from mkdocs.yml's nav), the option reference is what the parsers say, and the Markdown files
outside docs/ (README.md and the others GitHub shows) link only to files that exist."""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
from pathlib import Path

import docs_index
import docs_options
import pytest

ROOT = Path(__file__).resolve().parents[2]
REGENERATE = ".venv/bin/python scripts/docs_options.py (or: make docs)"


def test_option_reference_is_generated_from_the_parsers() -> None:
    committed = docs_options.OUT.read_text()
    assert committed == docs_options.render(), (
        f"docs/reference/options.md differs from the parsers and connector.config.Config: "
        f"run {REGENERATE} and commit the result")


def test_the_site_home_page_is_generated_from_the_readme() -> None:
    """docs/index.md repeats README.md's opening and documentation table, from README.md: the
    two cannot drift apart."""
    committed = docs_index.OUT.read_text()
    assert committed == docs_index.render((ROOT / "README.md").read_text()), (
        f"docs/index.md differs from README.md: run {docs_index.COMMAND} and commit the result")
    assert "](docs/" not in committed and "[Install](install.md)" in committed


def _options(parser: argparse.ArgumentParser) -> list[str]:
    return [o for a in parser._actions if not isinstance(a, argparse._HelpAction)
            for o in a.option_strings if o not in ("-h", "--help")]


def test_the_reference_has_every_option_and_yaml_key() -> None:
    from dataclasses import fields

    from connector.config import Config

    page = docs_options.OUT.read_text()
    commands = docs_options.parsers()
    assert {name for name, _ in commands} >= {
        "run", "status", "snapshot", "grants", "merge", "merge (Spark options)", "decode",
        "lake cuts", "verify"}
    for name, parser in commands:
        section = page.split(f"\n## pgcdc {name}\n")[1].split("\n## ")[0]
        for option in _options(parser):
            assert f"`{option}" in section or f" / {option}" in section, (name, option)
    run = page.split("\n## pgcdc run\n")[1].split("\n## ")[0]
    for f in fields(Config):
        assert f"| `{f.name}` |" in run, f.name
    # the options the hand-written tables had missed
    for name, option in [("merge", "--kafka-option"), ("run", "--log-level"),
                         ("run", "--wal-warn-bytes"), ("run", "--snapshot-chunk-rows"),
                         ("status", "--wal-warn-bytes")]:
        assert f"`{option}" in page.split(f"\n## pgcdc {name}\n")[1].split("\n## ")[0]


def test_every_option_has_a_meaning() -> None:
    """The help text is the one place an option is described: none may be left without."""
    for name, parser in docs_options.parsers():
        for action in parser._actions:
            if action.option_strings and action.dest != "help":
                assert action.help, f"pgcdc {name} {action.option_strings[0]} has no help text"


def test_the_reference_shows_defaults_and_meanings() -> None:
    page = docs_options.OUT.read_text().split("\n## pgcdc run\n")[1].split("\n## ")[0]
    rows = {line.split(" | ")[0]: line for line in page.splitlines() if line.startswith("| `")}
    assert "| `slot` | `pgcdc` | replication slot name" in rows["| `--slot SLOT`"]
    assert "| 16 MiB |" in rows["| `--exactly-once-batch-bytes EXACTLY_ONCE_BATCH_BYTES`"]
    assert "| `$PGCDC_DSN` |" in rows["| `--dsn DSN`"]
    yaml_only = {line.split(" | ")[1]: line for line in page.splitlines()
                 if line.startswith("| | `")}
    assert "| `-1` | retention.ms of the topics pgcdc creates (default -1, unlimited: topics " \
           "are the replayable log)" in yaml_only["`topic_retention_ms`"]
    assert "| 64 MiB |" in yaml_only["`spill_bytes`"]


def _mkdocs() -> Path:
    mkdocs = Path(sys.executable).parent / "mkdocs"
    assert mkdocs.exists(), "mkdocs is missing: install the dev extra (scripts/bootstrap does)"
    return mkdocs


def test_docs_build_strictly(tmp_path: Path) -> None:
    """A broken link between pages, a missing anchor or a page missing from nav fails."""
    mkdocs = _mkdocs()
    done = subprocess.run([str(mkdocs), "build", "--strict", "--site-dir", str(tmp_path)],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]


@pytest.mark.parametrize("breakage", ["anchor", "page", "orphan"])
def test_a_broken_link_or_an_orphan_page_fails_the_strict_build(tmp_path: Path,
                                                                 breakage: str) -> None:
    shutil.copytree(ROOT / "docs", tmp_path / "docs", symlinks=False)
    (tmp_path / "mkdocs.yml").write_text((ROOT / "mkdocs.yml").read_text())
    page = tmp_path / "docs" / "troubleshooting.md"
    if breakage == "orphan":
        (tmp_path / "docs" / "orphan.md").write_text("# Not in nav\n")
        expected = "orphan.md"
    else:
        expected = "no-such-section" if breakage == "anchor" else "no-such-page.md"
        link = "producer.md#no-such-section" if breakage == "anchor" else "no-such-page.md"
        page.write_text(page.read_text() + f"\nSee [it]({link}).\n")
    done = subprocess.run([str(_mkdocs()), "build", "--strict", "--site-dir",
                           str(tmp_path / "site")], cwd=tmp_path, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode != 0 and expected in done.stderr, done.stderr[-2000:]


_LINK = re.compile(r"\]\(([^)\s]+)\)")


@pytest.mark.parametrize("name", ["README.md", "spark_jobs/README.md", "benchmarks/README.md",
                                  "schemas/README.md", "CHANGELOG.md",
                                  *sorted(p.relative_to(ROOT).as_posix() for p in
                                          (ROOT / "benchmarks" / "results").glob("*.md"))])
def test_markdown_outside_docs_links_to_files_that_exist(name: str) -> None:
    path = ROOT / name
    for target in _LINK.findall(path.read_text()):
        if re.match(r"[a-z]+:", target) or target.startswith("#"):
            continue
        file = target.split("#")[0]
        assert (path.parent / file).exists(), f"{name} links to {target}, which does not exist"


def test_readme_is_the_front_door() -> None:
    """About 10 KB: what it is, the two commands, two quick starts, the docs index; every docs
    page is linked from it."""
    readme = (ROOT / "README.md").read_text()
    assert len(readme.encode()) < 12_000
    assert "make demo" in readme and "make test" in readme
    for page in sorted((ROOT / "docs").rglob("*.md")):
        rel = page.relative_to(ROOT).as_posix()
        if rel in ("docs/index.md", "docs/events.md"):
            continue  # the index itself; events.md is schemas/README.md, linked as such
        assert f"]({rel})" in readme, f"README.md's index does not link {rel}"


def test_benchmarks_readme_is_a_table_of_current_figures() -> None:
    """One row per figure (what, figure, baseline, date, command, the dated runs); every file
    of dated runs is linked from it."""
    readme = (ROOT / "benchmarks" / "README.md").read_text()
    rows = [line for line in readme.splitlines() if line.startswith("| ") and "---" not in line]
    assert rows[0].startswith("| what | figure | baseline")
    for row in rows[1:]:
        assert re.search(r"\| 2026-\d\d-\d\d", row) and "| `benchmarks/" in row, row
    for result in (ROOT / "benchmarks" / "results").glob("*.md"):
        assert f"(results/{result.name})" in readme, f"{result.name} is not linked"

