"""Which PostgreSQL majors a directory's server tests run on.

The `postgres` fixture (tests/conftest.py) runs a test on PostgreSQL 15 and on 18. That matters
where the server version changes what is tested: pgoutput protocol 3 vs 4 (streaming, two-phase),
type output, failover slots (17+), generated columns published (18+) -- connector/replication/
features.py lists every such fact. Most producer and snapshot tests check `pgcdc run`'s own
behaviour (its failures, validation, metrics, restarts) through the same code on either server,
and each run starts a producer subprocess: there one server, PostgreSQL 18, suffices.

A directory opts in from its conftest.py with

    def pytest_generate_tests(metafunc):
        one_pg_version(metafunc, keep_both={"test_x.py"})

Both versions still run for the files in `keep_both` (except their tests marked
``@pytest.mark.one_pg_version``: the version changes nothing for them), for tests marked
``@pytest.mark.all_pg_versions`` (or a module's ``pytestmark``), and for every test when
``PGCDC_TEST_ALL_PG=1`` is set (`PGCDC_TEST_ALL_PG=1 make test`).
"""

from __future__ import annotations

import os
from collections.abc import Collection
from pathlib import Path

import pytest

__all__ = ["ALL_PG_ENV", "ONE_PG", "one_pg_version"]

ALL_PG_ENV = "PGCDC_TEST_ALL_PG"
ONE_PG = "pg18"  # protocol 4, failover slots: the newest server covers the most code


def one_pg_version(metafunc: pytest.Metafunc, keep_both: Collection[str] = ()) -> None:
    """Parametrize `postgres` with PostgreSQL 18 alone for this test, unless it must see both."""
    if "postgres" not in metafunc.fixturenames or os.environ.get(ALL_PG_ENV, "") not in ("", "0"):
        return
    definition = metafunc.definition
    if (Path(definition.path).name in keep_both
            and not definition.get_closest_marker("one_pg_version")) \
            or definition.get_closest_marker("all_pg_versions"):
        return
    for mark in definition.iter_markers("parametrize"):
        names = mark.args[0] if mark.args else mark.kwargs.get("argnames", "")
        if "postgres" in (names.replace(" ", "").split(",") if isinstance(names, str) else names):
            return  # the test chose its servers itself
    # A parametrize mark takes precedence over the fixture's own params (pytest's
    # FixtureManager.pytest_generate_tests), so the caller's hook must be tryfirst; indirect
    # keeps the session-scoped servers shared. Appended: ids keep their form (`[name-pg18]`).
    definition.add_marker(pytest.mark.parametrize("postgres", [ONE_PG], indirect=True,
                                                  scope="session"))
