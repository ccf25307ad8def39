"""Least privilege: which grant a refused statement lacked, said in one line, and the SQL
that sets up a role for pgcdc (`pgcdc grants`, docs/operations.md "Least privilege").

The server says what it refused in SQLSTATE 42501 (insufficient_privilege): "permission
denied for table t", "must be owner of table t", "permission denied for schema s", ... The
point where pgcdc does admin work knows why it ran the statement and what the owner could run
instead; `lacking` turns both into a `PrivilegeError` naming the grant and the SQL giving it.
A privilege error is never transient: `pgcdc run` stops at once instead of reconnecting.
"""

from __future__ import annotations

import getpass
import os
import re
from collections.abc import Sequence

import psycopg

from connector.errors import PrivilegeError, first_line

__all__ = ["connect_refusal", "dsn_role", "grants_sql", "ident", "lacking"]

_OWNER = re.compile(r"must be owner of (table|publication|relation|schema|database) (.+)$")
_DENIED = re.compile(r"permission denied for (table|relation|schema|database|sequence) (.+)$")
_REPLICATION = ("replication role", "WAL sender", "replication slots",
                "REPLICATION attribute")

_SIMPLE = re.compile(r"[a-z_][a-z0-9_$]*$")


def ident(name: str) -> str:
    """`name` as an SQL identifier (quoted unless plain lower case)."""
    return name if _SIMPLE.match(name) else '"' + name.replace('"', '""') + '"'


def qualified(schema: str, table: str) -> str:
    return f"{ident(schema)}.{ident(table)}"


def replication_attribute(role: str, detail: str = "") -> PrivilegeError:
    return PrivilegeError(role, "the REPLICATION attribute", f"run ALTER ROLE {ident(role)} "
                          "REPLICATION as a superuser", detail=detail)


def lacking(exc: BaseException, role: str, *, table_privilege: str = "SELECT",
            schema_privilege: str = "USAGE", owner_sql: str = "",
            also: str = "") -> PrivilegeError:
    """The `PrivilegeError` for `exc` (SQLSTATE 42501). `table_privilege`: what the statement
    needed on a table it was refused; `schema_privilege`: on a schema; `owner_sql`: what the
    owner of a table or publication can run instead of giving ownership; `also`: more SQL of
    the same fix (the signal table's sequence)."""
    detail = first_line(exc)
    more = f"; {also}" if also else ""
    if any(text in detail for text in _REPLICATION):
        return replication_attribute(role, detail)
    owner = _OWNER.search(detail)
    if owner:
        kind, name = owner.group(1), owner.group(2)
        kind = "table" if kind == "relation" else kind
        member = f"GRANT <its owner> TO {ident(role)}"
        fix = f"run as its owner: {owner_sql}" if owner_sql else \
            f"run as a superuser: {member} (or ALTER {kind.upper()} {name} OWNER TO " \
            f"{ident(role)})"
        if owner_sql and kind == "table":  # membership: pgcdc adds such tables itself
            fix += f"; or, as a superuser, {member}"
        return PrivilegeError(role, f"ownership of {kind} {name}", fix + more)
    denied = _DENIED.search(detail)
    if denied:
        kind, name = denied.group(1), denied.group(2)
        kind = "table" if kind == "relation" else kind
        privilege = {"table": table_privilege, "schema": schema_privilege,
                     "database": "CREATE", "sequence": "USAGE"}[kind]
        if kind == "database" and "CONNECT" in str(exc):
            privilege = "CONNECT"
        return PrivilegeError(role, f"{privilege} on {kind} {name}",
                              f"run GRANT {privilege} ON {kind.upper()} {ident(name)} TO "
                              f"{ident(role)}{more}")
    return PrivilegeError(role, "a privilege", f"{detail}{more}")


def dsn_role(dsn: str) -> str:
    """The role a connection string logs in as (libpq's defaults: PGUSER, the OS user)."""
    user = psycopg.conninfo.conninfo_to_dict(dsn).get("user")
    return str(user or os.environ.get("PGUSER") or getpass.getuser())


def connect_refusal(detail: str, role: str) -> PrivilegeError | None:
    """A refused connection (libpq's message `detail`) that a grant would let in, or None."""
    if any(text in detail for text in _REPLICATION) or "walsender" in detail:
        return replication_attribute(role, first_line(Exception(detail)))
    match = re.search(r'permission denied for database "?([^"\s]+)"?', detail)
    if match:
        return PrivilegeError(role, f"CONNECT on database {match.group(1)}",
                              f"run GRANT CONNECT ON DATABASE {ident(match.group(1))} TO "
                              f"{ident(role)}")
    return None


SIGNAL_GRANTS = ("SELECT, INSERT, UPDATE", "USAGE")


def signal_grant_sql(role: str, schema: str, table: str) -> str:
    """The grants on the signal table (and its id sequence) that `run` and `snapshot` use."""
    return (f"GRANT SELECT, INSERT, UPDATE ON {qualified(schema, table)} TO {ident(role)}; "
            f"GRANT USAGE ON SEQUENCE {qualified(schema, table + '_id_seq')} TO {ident(role)}")


def grants_sql(role: str, database: str, tables: Sequence[tuple[str, str]], *,
               publication: str, signal_table: tuple[str, str], signal_ddl: str,
               owner: str | None = None, create_role: bool = True) -> str:
    """The SQL an administrator runs once so that `role` can run `pgcdc run` (streaming, the
    initial snapshot, new tables), `status` and `snapshot` without superuser
    (docs/operations.md "Least privilege"). `owner`: the role owning the tables (pgcdc must own
    a table to add it to a publication: membership in the owner role gives that); None: the
    owner pre-creates the publication instead."""
    r = ident(role)
    schemas = sorted({s for s, _ in tables} | {signal_table[0]})
    names = ", ".join(qualified(s, t) for s, t in tables) or "<schema.table, ...>"
    lines = ["-- as a superuser (or a role with CREATEROLE and the tables' owner)"]
    if create_role:
        lines.append(f"CREATE ROLE {r} LOGIN REPLICATION;  -- REPLICATION: the slot and the "
                     "stream (PASSWORD '...' as you authenticate)")
    else:
        lines.append(f"ALTER ROLE {r} REPLICATION;  -- the slot and the stream")
    lines.append(f"GRANT CONNECT ON DATABASE {ident(database)} TO {r};")
    lines += [f"GRANT USAGE ON SCHEMA {ident(s)} TO {r};" for s in schemas]
    lines.append(f"GRANT SELECT ON {names} TO {r};  -- the snapshots read them")
    if owner:
        lines += [
            f"GRANT CREATE ON DATABASE {ident(database)} TO {r};  -- pgcdc creates the "
            "publication",
            f"GRANT {ident(owner)} TO {r};  -- a table joins a publication only by its owner: "
            "membership lets pgcdc add tables created later"]
    else:
        lines += [
            "-- as the tables' owner: the publication (pgcdc then keeps its table list as it is;"
            " tables created later must be added by the owner too)",
            f"CREATE PUBLICATION {ident(publication)} FOR TABLE {names};"]
    lines += [
        "-- the signal table of `pgcdc snapshot` and of new tables' snapshots, made by an admin",
        signal_ddl.strip() + ";",
        signal_grant_sql(role, *signal_table) + ";",
    ]
    return "\n".join(lines)
