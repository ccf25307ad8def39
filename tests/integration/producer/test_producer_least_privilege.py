"""Least privilege (docs/operations.md "Least privilege"): a role set up with what `pgcdc grants`
prints, runs `run` (initial snapshot, streaming, a table created later), `status` and `snapshot`
without superuser; each grant missing is one line naming it, exit 1, no traceback, no
reconnect loop."""

from __future__ import annotations

import subprocess
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import psycopg
import pytest

from tests.support.cdc_checks import (
    assert_one_clear_line,
    exit_of,
    read_records,
    start_and_exit,
)
from tests.support.producer import PGCDC, ProducerRun

pytestmark = pytest.mark.integration


@dataclass
class Setup:
    admin_dsn: str  # superuser, in the test's database
    dsn: str  # the least-privilege role, same database
    role: str
    owner: str  # owns the application's tables
    database: str


def _superuser(dsn: str, *statements: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        for statement in statements:
            psycopg.ClientCursor(conn).execute(statement)  # type: ignore[arg-type]


def _owned_table(s: Setup, name: str, rows: int = 2) -> None:
    """A table of the application (owned by `s.owner`), in one transaction: a watcher never
    sees it owned by the superuser."""
    with psycopg.connect(s.admin_dsn) as conn:
        conn.execute(f"CREATE TABLE {name} (id int PRIMARY KEY, v text)")  # type: ignore[arg-type]
        conn.execute(f"INSERT INTO {name} SELECT g, 'v' || g FROM generate_series(1, {rows}) g")  # type: ignore[arg-type]
        conn.execute(f"ALTER TABLE {name} OWNER TO {s.owner}")  # type: ignore[arg-type]


def _setup(postgres: Any, *, owner_membership: bool = True, grants: bool = True) -> Setup:
    """A database of its own with table t1 (owned by an application role) and a role for
    pgcdc; with `grants`, the role gets what `pgcdc grants` prints."""
    tag = uuid.uuid4().hex[:8]
    database, role, owner = f"lp_{tag}", f"cdc_{tag}", f"app_{tag}"
    _superuser(postgres.dsn, f"CREATE DATABASE {database}", f"CREATE ROLE {owner}")
    admin_dsn = postgres.dsn.replace("dbname=postgres", f"dbname={database}")
    s = Setup(admin_dsn, admin_dsn.replace("user=postgres", f"user={role}"), role, owner,
              database)
    _owned_table(s, "t1")
    if grants:
        printed = subprocess.run(
            [PGCDC, "grants", "--role", role, "--dsn", admin_dsn, "--tables", "public.t1",
             *(["--owner", owner] if owner_membership else [])],
            capture_output=True, text=True, timeout=60, check=True).stdout
        _superuser(admin_dsn, printed)
    else:
        _superuser(admin_dsn, f"CREATE ROLE {role} LOGIN REPLICATION")
    return s


@pytest.fixture
def lp_run(producer_run) -> Iterator[Any]:
    """`producer_run` connecting as the least-privilege role; cleaned up as the superuser."""
    made: list[tuple[ProducerRun, Setup]] = []

    def make(s: Setup, tables: str, *extra: str) -> ProducerRun:
        run: ProducerRun = producer_run(tables, *extra)
        run.dsn = s.dsn
        made.append((run, s))
        return run

    yield make
    for run, s in made:
        run.dsn = s.admin_dsn


def _pgcdc(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([PGCDC, *args], capture_output=True, text=True, timeout=120)


def _one_line(out: subprocess.CompletedProcess[str], command: str, *needles: str) -> str:
    assert out.returncode == 1, out
    assert "Traceback" not in out.stderr, out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"pgcdc {command}: "), out.stderr
    for needle in needles:
        assert needle.lower() in lines[0].lower(), f"{needle!r} not in {lines[0]!r}"
    return lines[0]


def _ids(records: list[Any], table: str) -> list[int]:
    return sorted(r.value["after"]["id"] for r in records if r.value["after"])


def test_run_status_and_snapshot_as_a_least_privilege_role(postgres, lp_run,
                                                           log_dir) -> None:
    s = _setup(postgres)
    run = lp_run(s, "public.*")
    run.start(log_dir)  # the initial snapshot of t1, the publication, the slot
    _superuser(s.admin_dsn, "INSERT INTO t1 VALUES (3, 'v3')")
    t1 = f"{run.prefix}.public.t1"
    assert _ids(read_records(run.bootstrap, run.registry_url, t1, min_count=3), t1) == [1, 2, 3]

    _owned_table(s, "t2")  # created later: the watcher adds it and snapshots its rows
    _superuser(s.admin_dsn, "INSERT INTO t2 VALUES (3, 'v3')")
    t2 = f"{run.prefix}.public.t2"
    assert set(_ids(read_records(run.bootstrap, run.registry_url, t2, min_count=3), t2)) == \
        {1, 2, 3}

    common = ["--dsn", s.dsn, "--slot", run.slot, "--publication", f"pub_{run.tag}"]
    status = _pgcdc("status", *common)
    assert status.returncode == 0, status
    assert "public.t2" in status.stdout and "incremental snapshot" in status.stdout

    requested = _pgcdc("snapshot", *common, "--tables", "public.t1")
    assert requested.returncode == 0, requested
    reads = [r for r in read_records(run.bootstrap, run.registry_url, t1, min_count=6)
             if r.value["source"]["snapshot"] == "incremental"]
    assert sorted(r.value["after"]["id"] for r in reads) == [1, 2, 3]
    assert run.stop() == 0
    assert "Traceback" not in run.output()


def test_run_without_create_or_ownership_names_each(postgres, lp_run, log_dir) -> None:
    s = _setup(postgres, owner_membership=False)
    run = lp_run(s, "public.t1", "--snapshot", "never")
    code, output = start_and_exit(run, log_dir)
    assert_one_clear_line(code, output, f'role "{s.role}" lacks CREATE on database {s.database}',
                          f"GRANT CREATE ON DATABASE {s.database} TO {s.role}")
    _superuser(s.admin_dsn, f"GRANT CREATE ON DATABASE {s.database} TO {s.role}")
    code, output = start_and_exit(run, log_dir)
    assert_one_clear_line(code, output, f'role "{s.role}" lacks ownership of table t1',
                          "run as its owner: CREATE PUBLICATION", "Least privilege")


def test_a_publication_the_owner_made_streams_and_a_new_table_it_cannot_add_stops_it(
        postgres, lp_run, log_dir) -> None:
    """Used to fail with "cannot create publication: must be owner of publication"; then the
    watcher reconnected for minutes on "must be owner of table"."""
    s = _setup(postgres, owner_membership=False)
    run = lp_run(s, "public.t*", "--snapshot", "never")
    _superuser(s.admin_dsn, f"CREATE PUBLICATION pub_{run.tag} FOR TABLE t1",
               f"ALTER PUBLICATION pub_{run.tag} OWNER TO {s.owner}")
    run.start(log_dir)
    _owned_table(s, "t9")
    code, output = exit_of(run)
    assert_one_clear_line(code, output,
                          f'role "{s.role}" lacks ownership of publication pub_{run.tag}',
                          f'run as its owner: ALTER PUBLICATION "pub_{run.tag}" ADD TABLE '
                          '"public"."t9"')
    assert "reconnecting" not in output


def test_run_without_replication_names_the_attribute(postgres, lp_run, log_dir) -> None:
    s = _setup(postgres)
    _superuser(s.admin_dsn, f"ALTER ROLE {s.role} NOREPLICATION")
    run = lp_run(s, "public.t1", "--snapshot", "never")
    code, output = start_and_exit(run, log_dir)
    assert_one_clear_line(code, output, "REPLICATION")


def test_initial_snapshot_without_select_names_it(postgres, lp_run, log_dir) -> None:
    s = _setup(postgres)
    _superuser(s.admin_dsn, f"REVOKE {s.owner} FROM {s.role}",
               f"REVOKE SELECT ON t1 FROM {s.role}",
               "CREATE PUBLICATION pub_x FOR TABLE t1")
    run = lp_run(s, "public.t1")
    run.extra += ["--publication", "pub_x"]
    code, output = start_and_exit(run, log_dir)
    assert_one_clear_line(code, output, f'role "{s.role}" lacks SELECT on table t1',
                          f"GRANT SELECT ON TABLE t1 TO {s.role}")


def test_status_and_snapshot_name_the_signal_table_grants(postgres) -> None:
    s = _setup(postgres)
    common = ["--dsn", s.dsn, "--slot", "none", "--publication", "pub_x"]
    _superuser(s.admin_dsn, "CREATE PUBLICATION pub_x FOR TABLE t1",
               f"REVOKE INSERT, UPDATE, SELECT ON public.pgcdc_signal FROM {s.role}")
    _one_line(_pgcdc("snapshot", *common, "--tables", "public.t1"), "snapshot",
              f'role "{s.role}" lacks', "pgcdc_signal",
              f"GRANT SELECT, INSERT, UPDATE ON public.pgcdc_signal TO {s.role}")
    _one_line(_pgcdc("status", *common), "status", "pgcdc_signal",
              f"GRANT SELECT, INSERT, UPDATE ON public.pgcdc_signal TO {s.role}")
    _superuser(s.admin_dsn, "DROP TABLE public.pgcdc_signal")
    _one_line(_pgcdc("snapshot", *common, "--tables", "public.t1"), "snapshot",
              "lacks CREATE on schema public", "pgcdc grants")
    _superuser(s.admin_dsn, f"REVOKE CONNECT ON DATABASE {s.database} FROM PUBLIC",
               f"REVOKE CONNECT ON DATABASE {s.database} FROM {s.role}")
    _one_line(_pgcdc("status", *common), "status", f"CONNECT on database {s.database}",
              f"GRANT CONNECT ON DATABASE {s.database} TO {s.role}")


def test_run_names_the_signal_table_grant_it_lacks(postgres, lp_run, log_dir) -> None:
    """The signal table is another role's, without grants: used to be a bare "permission
    denied" (and a reconnect loop in the table watcher)."""
    s = _setup(postgres)
    _superuser(s.admin_dsn, f"REVOKE SELECT, INSERT, UPDATE ON public.pgcdc_signal FROM {s.role}")
    run = lp_run(s, "public.t1", "--snapshot", "never")
    run.start(log_dir, wait=False)
    code, output = exit_of(run)
    assert_one_clear_line(code, output, f'role "{s.role}" lacks', "pgcdc_signal",
                          f"GRANT SELECT, INSERT, UPDATE ON public.pgcdc_signal TO {s.role}")
    assert "reconnecting" not in output
