"""The layering of the packages, read from their imports (AST, nothing is imported):
product code never imports the dev tooling in scripts/, and the pure core (types, decoder,
assembler) reaches no server, so it stays testable without one."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PRODUCT = ("connector", "spark_jobs")
PURE_CORE = ("connector/pgtypes", "connector/pgoutput", "connector/assembler")
# What talks to a server or a process; the pure core must not import any of it.
IO_MODULES = ("socket", "ssl", "subprocess", "http", "urllib", "httpx", "psycopg",
              "confluent_kafka", "pyspark", "prometheus_client", "connector.replication",
              "connector.sink", "connector.snapshot", "connector.pipeline",
              "connector.publisher", "connector.tools", "connector.cli")


def imported_modules(path: Path, repo: Path = REPO) -> Iterator[str]:
    package = ".".join(path.relative_to(repo).with_suffix("").parts[:-1])
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                yield ".".join([*base, *([node.module] if node.module else [])])
            else:
                yield node.module or ""


def offending(roots: tuple[str, ...], banned: tuple[str, ...], repo: Path = REPO) -> list[str]:
    found = []
    for root in roots:
        for path in sorted((repo / root).rglob("*.py")):
            for module in imported_modules(path, repo):
                if any(module == b or module.startswith(b + ".") for b in banned):
                    found.append(f"{path.relative_to(repo)} imports {module}")
    return found


def test_product_never_imports_scripts() -> None:
    assert offending(PRODUCT, ("scripts", "devstack")) == []


def test_pure_core_imports_no_io() -> None:
    assert offending(PURE_CORE, IO_MODULES) == []


@pytest.mark.parametrize("source, expected", [
    ("import scripts.devstack", ["scripts.devstack"]),
    ("from devstack.spark import spark_jars", ["devstack.spark"]),
    ("from ..replication import stream", ["connector.replication"]),
])
def test_the_import_reader_sees_each_form(tmp_path: Path, source: str,
                                          expected: list[str]) -> None:
    # A copy of the layout under tmp_path: nothing is written into the source tree.
    module = tmp_path / "connector" / "pgtypes" / "_layering_probe.py"
    module.parent.mkdir(parents=True)
    module.write_text(source + "\n")
    assert list(imported_modules(module, tmp_path)) == expected
    # The checks themselves flag it: each would fail on such an import in the product.
    found = offending(PURE_CORE, IO_MODULES, tmp_path) + offending(PRODUCT, ("scripts",
                                                                            "devstack"), tmp_path)
    assert found == [f"connector/pgtypes/_layering_probe.py imports {expected[0]}"]
