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


def imported_modules(path: Path) -> Iterator[str]:
    package = ".".join(path.relative_to(REPO).with_suffix("").parts[:-1])
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                yield ".".join([*base, *([node.module] if node.module else [])])
            else:
                yield node.module or ""


def offending(roots: tuple[str, ...], banned: tuple[str, ...]) -> list[str]:
    found = []
    for root in roots:
        for path in sorted((REPO / root).rglob("*.py")):
            for module in imported_modules(path):
                if any(module == b or module.startswith(b + ".") for b in banned):
                    found.append(f"{path.relative_to(REPO)} imports {module}")
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
    module = REPO / "connector" / "pgtypes" / "_layering_probe.py"
    module.write_text(source + "\n")
    try:
        assert list(imported_modules(module)) == expected
    finally:
        module.unlink()
