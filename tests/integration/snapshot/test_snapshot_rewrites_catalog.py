"""The catalog the re-sync check reads (`resync.catalog_columns`) on a real server: each DDL
the README lists as re-synced is found, harmless DDL is not (PostgreSQL 15/18, no Kafka)."""

from __future__ import annotations

import uuid
from typing import Any

import psycopg
import pytest

from connector.names import TableName
from connector.replication.features import ServerFeatures
from connector.snapshot.incremental.catalog import catalog_columns, catalog_digests
from connector.snapshot.incremental.rewrites import reasons

pytestmark = pytest.mark.integration

# (DDL, the reasons it gives: each a substring of one reason, in order)
STEPS: list[tuple[str, list[str]]] = [
    ("ALTER TABLE {t} ADD COLUMN plain text", []),
    ("ALTER TABLE {t} ALTER COLUMN plain SET DEFAULT 'later'", []),
    ("ALTER TABLE {t} ADD COLUMN d text DEFAULT 'x'", ["column d added"]),
    ("ALTER TABLE {t} ADD COLUMN r float8 DEFAULT random()", ["column r added"]),
    ("ALTER TABLE {t} ADD COLUMN i int GENERATED ALWAYS AS IDENTITY", ["column i added"]),
    ("ALTER TABLE {t} ADD COLUMN g2 int GENERATED ALWAYS AS (id + 1) STORED", []),
    ("ALTER TABLE {t} ALTER COLUMN g DROP EXPRESSION", ["column g is no longer generated"]),
    ("ALTER TYPE {e} RENAME VALUE 'sad' TO 'blue'", ["enum value renamed 'sad' to 'blue'"]),
    ("ALTER TYPE {e} ADD VALUE 'new'", []),
    ("ALTER TABLE {t} RENAME COLUMN n TO m", ["column n renamed to m"]),
    ("ALTER TABLE {t} ALTER COLUMN m TYPE bigint", ["column m changed type from integer to "
                                                    "bigint"]),
    ("ALTER TABLE {t} ALTER COLUMN v TYPE numeric(10,0)", ["column v changed type from "
                                                           "numeric(10,2) to numeric(10,0)"]),
    ("ALTER TABLE {t} DROP COLUMN plain", []),
    ("ALTER TABLE {t} ADD PRIMARY KEY (id)", []),
]


def test_each_ddl_is_classified(postgres: Any) -> None:
    tag = uuid.uuid4().hex[:8]
    table, enum, pub = f"rw_{tag}", f"rw_mood_{tag}", f"rw_pub_{tag}"
    with psycopg.connect(postgres.dsn, autocommit=True) as conn:
        features = ServerFeatures(int(conn.execute("SHOW server_version_num").fetchone()[0]))
        conn.execute(f"CREATE TYPE {enum} AS ENUM ('sad', 'ok')")
        conn.execute(f"CREATE TABLE {table} (id int NOT NULL, n int, v numeric(10,2), "
                     f"e {enum}, es {enum}[], g int GENERATED ALWAYS AS (n * 2) STORED)")
        conn.execute(f"INSERT INTO {table} VALUES (1, 1, 1.5, 'sad', '{{sad}}')")
        conn.execute(f"CREATE PUBLICATION {pub} FOR TABLE {table}")
        try:
            oid = conn.execute("SELECT %s::regclass::oid::int8", (table,)).fetchone()[0]
            before = catalog_columns(conn, pub, features)[oid][1]
            digests, enums = catalog_digests(conn, pub, features)
            for ddl, wanted in STEPS:
                conn.execute(ddl.format(t=table, e=enum))
                # The cheap check notices every DDL that matters (it fetches the columns then).
                new_digests, new_enums = catalog_digests(conn, pub, features)
                if wanted:
                    assert (new_digests[oid], new_enums) != (digests[oid], enums), ddl
                digests, enums = new_digests, new_enums
                name, after = catalog_columns(conn, pub, features)[oid]
                assert name == TableName("public", table)
                found = reasons(before, after)
                if "RENAME VALUE" in ddl:  # the array column of the enum too
                    wanted = wanted + wanted
                assert len(found) == len(wanted), (ddl, found)
                for reason, part in zip(found, wanted, strict=True):
                    assert part in reason, (ddl, found)
                before = after
            # The one query for a single table sees the same.
            assert catalog_columns(conn, pub, features, [oid])[oid][1] == before
        finally:
            conn.execute(f"DROP PUBLICATION {pub}")
            conn.execute(f"DROP TABLE {table}")
            conn.execute(f"DROP TYPE {enum}")
