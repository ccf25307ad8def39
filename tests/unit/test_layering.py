"""The layering of the packages, read from their imports (AST, nothing is imported):
product code never imports the dev tooling in scripts/, and the pure core (types, decoder,
assembler) reaches no server, so it stays testable without one; no import circle in the product;
and spark_jobs' packages import only downwards (SPARK_FLOORS)."""

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


def import_graph(repo: Path = REPO) -> dict[str, set[str]]:
    """Product module → the product modules it imports, at any depth of the file (an import
    inside a function closes a circle as surely as one at the top, only later). A module's
    own enclosing packages are left out: Python initializes them first whatever it imports."""
    modules: dict[str, Path] = {}
    for root in PRODUCT:
        for path in sorted((repo / root).rglob("*.py")):
            parts = path.relative_to(repo).with_suffix("").parts
            modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        found = set(imported_modules(path, repo))
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom):  # `from . import x`: the module x
                base = next((m for m in imported_modules_of(node, path, repo)), "")
                found |= {f"{base}.{alias.name}" for alias in node.names}
        graph[name] = {m for m in found if m in modules and m != name
                       and not name.startswith(m + ".")}
    return graph


def imported_modules_of(node: ast.ImportFrom, path: Path, repo: Path) -> Iterator[str]:
    package = ".".join(path.relative_to(repo).with_suffix("").parts[:-1])
    if node.level:
        base = package.split(".")[: len(package.split(".")) - node.level + 1]
        yield ".".join([*base, *([node.module] if node.module else [])])
    else:
        yield node.module or ""


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The import circles of `graph`: its strongly connected components of two or more."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = stack[stack.index(v):]
            del stack[stack.index(v):]
            if len(component) > 1:
                found.append(sorted(component))
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_no_import_cycles() -> None:
    assert cycles(import_graph()) == []


def test_a_circle_through_a_function_level_import_is_found(tmp_path: Path) -> None:
    sink = tmp_path / "connector" / "sink"
    sink.mkdir(parents=True)
    (tmp_path / "spark_jobs").mkdir()
    (sink / "__init__.py").write_text("")
    (sink / "a.py").write_text("from .b import x\n")
    (sink / "b.py").write_text("def f():\n    from . import a\n")
    assert cycles(import_graph(tmp_path)) == [["connector.sink.a", "connector.sink.b"]]


# spark_jobs' packages, lowest floor first: one step of a batch's data flow each (the layout is
# in spark_jobs/README.md). A package imports only itself and packages on a lower floor; the
# modules directly in spark_jobs/ (merge.py, the spark-submit entry point) are above them all.
SPARK_FLOORS = ("rules", "events", "lake", "cuts", "sinks", "history", "verify", "runtime")


def spark_floor(module: str, repo: Path = REPO) -> tuple[int, str]:
    """(floor, package) of a spark_jobs module; a package not in SPARK_FLOORS has floor -1 (it
    must be given one), a module directly in spark_jobs/ the floor above every package."""
    package = module.split(".")[1]
    if not (repo / "spark_jobs" / package).is_dir():  # spark_jobs.merge
        return len(SPARK_FLOORS), ""
    return (SPARK_FLOORS.index(package) if package in SPARK_FLOORS else -1), package


def upward_imports(repo: Path = REPO) -> list[str]:
    """Each import, in spark_jobs, of a package on a higher floor than the importer's (or of a
    module directly in spark_jobs/), and each package that has no floor."""
    found = []
    for name, imports in sorted(import_graph(repo).items()):
        if not name.startswith("spark_jobs."):
            continue
        floor, package = spark_floor(name, repo)
        if floor < 0:
            found.append(f"{name} is in a package without a floor (add it to SPARK_FLOORS)")
            continue
        for module in sorted(imports):
            if not module.startswith("spark_jobs."):
                continue
            other_floor, other = spark_floor(module, repo)
            if other != package and other_floor > floor:
                found.append(f"{name} imports {module}: {other or 'spark_jobs/'} is above "
                             f"{package or 'spark_jobs/'}")
    return found


def test_no_upward_import_between_spark_jobs_packages() -> None:
    assert upward_imports() == []


def test_every_spark_jobs_package_has_a_floor() -> None:
    packages = {p.parent.name for p in (REPO / "spark_jobs").glob("*/__init__.py")}
    assert packages == set(SPARK_FLOORS)


@pytest.mark.parametrize("source, expected", [
    ("from ..sinks.delta_sink import DeltaTableSink",
     ["spark_jobs.rules.changes imports spark_jobs.sinks.delta_sink: sinks is above rules"]),
    ("def f():\n    from ..sinks import delta_sink\n",  # at any depth, `from .. import` form
     ["spark_jobs.rules.changes imports spark_jobs.sinks: sinks is above rules",
      "spark_jobs.rules.changes imports spark_jobs.sinks.delta_sink: sinks is above rules"]),
    ("import spark_jobs.merge",
     ["spark_jobs.rules.changes imports spark_jobs.merge: spark_jobs/ is above rules"]),
    ("from .fold import key_of", []),  # its own package
])
def test_an_upward_import_is_found(tmp_path: Path, source: str, expected: list[str]) -> None:
    (tmp_path / "connector").mkdir()
    for package in ("rules", "sinks"):
        (tmp_path / "spark_jobs" / package).mkdir(parents=True)
        (tmp_path / "spark_jobs" / package / "__init__.py").write_text("")
    (tmp_path / "spark_jobs" / "__init__.py").write_text("")
    (tmp_path / "spark_jobs" / "merge.py").write_text("from spark_jobs.sinks import delta_sink\n")
    (tmp_path / "spark_jobs" / "sinks" / "delta_sink.py").write_text(
        "from ..rules.changes import q\n")  # downward: allowed
    (tmp_path / "spark_jobs" / "rules" / "fold.py").write_text("")
    (tmp_path / "spark_jobs" / "rules" / "changes.py").write_text(source + "\n")
    assert upward_imports(tmp_path) == expected


def test_a_package_without_a_floor_is_found(tmp_path: Path) -> None:
    (tmp_path / "connector").mkdir()
    (tmp_path / "spark_jobs" / "formats").mkdir(parents=True)
    (tmp_path / "spark_jobs" / "formats" / "__init__.py").write_text("")
    assert upward_imports(tmp_path) == [
        "spark_jobs.formats is in a package without a floor (add it to SPARK_FLOORS)"]
