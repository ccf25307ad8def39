"""`pgcdc grants`: the SQL of a least-privilege role (docs/operations.md "Least privilege")."""

from __future__ import annotations

import pytest

from connector.cli import main


def test_grants_with_an_owner_role(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["grants", "--role", "cdc", "--database", "app", "--tables",
                 "public.orders,Sales.Items", "--owner", "app_owner"]) == 0
    sql = capsys.readouterr().out
    for line in ["CREATE ROLE cdc LOGIN REPLICATION;", "GRANT CONNECT ON DATABASE app TO cdc;",
                 "GRANT USAGE ON SCHEMA public TO cdc;", 'GRANT USAGE ON SCHEMA "Sales" TO cdc;',
                 'GRANT SELECT ON public.orders, "Sales"."Items" TO cdc;',
                 "GRANT CREATE ON DATABASE app TO cdc;", "GRANT app_owner TO cdc;",
                 "GRANT SELECT, INSERT, UPDATE ON public.pgcdc_signal TO cdc; "
                 "GRANT USAGE ON SEQUENCE public.pgcdc_signal_id_seq TO cdc;"]:
        assert any(printed.startswith(line) for printed in sql.splitlines()), line
    assert 'CREATE TABLE IF NOT EXISTS "public"."pgcdc_signal"' in sql
    assert "CREATE PUBLICATION" not in sql


def test_grants_without_an_owner_role_have_the_owner_create_the_publication(
        capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["grants", "--role", "cdc", "--database", "app", "--tables", "orders",
                 "--publication", "cdc_pub", "--existing-role"]) == 0
    sql = capsys.readouterr().out
    assert "ALTER ROLE cdc REPLICATION;" in sql
    assert "CREATE PUBLICATION cdc_pub FOR TABLE public.orders;" in sql
    assert "CREATE ON DATABASE" not in sql


def test_grants_patterns_need_a_dsn(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["grants", "--role", "cdc", "--database", "app", "--tables", "public.*"]) == 1
    assert capsys.readouterr().err.strip() == (
        "pgcdc grants: --tables patterns need --dsn (to resolve them); or name tables")
