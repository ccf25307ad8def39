"""Fixtures of the pgoutput integration tests: a sandbox schema per test, live walsenders."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from psycopg import pq, sql

from tests.support.pgoutput_pg import Sandbox
from tests.support.walsender import WalSender


@pytest.fixture
def sandbox(postgres: Any) -> Iterator[Sandbox]:
    schema = f"t{uuid.uuid4().hex[:10]}"
    with psycopg.connect(postgres.dsn, autocommit=True) as conn:
        conn.execute("SET synchronous_commit = on")  # a committed change is peekable at once
        conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
        conn.execute(sql.SQL("SET search_path = {}").format(sql.Identifier(schema)))
        box = Sandbox(conn, postgres.dsn, schema)
        try:
            yield box
        finally:
            conn.rollback() if conn.info.transaction_status != pq.TransactionStatus.IDLE else None
            for gid, in conn.execute("SELECT gid FROM pg_prepared_xacts WHERE gid LIKE %s",
                                     (f"%{schema}%",)).fetchall():
                conn.execute(sql.SQL("ROLLBACK PREPARED {}").format(sql.Literal(gid)))
            for slot in box.slots:
                # A closed walsender's backend may not have exited yet: its slot stays
                # active (and undroppable) for a moment.
                deadline = time.monotonic() + 10
                while conn.execute("SELECT active FROM pg_replication_slots WHERE "
                                   "slot_name = %s AND active", (slot,)).fetchone():
                    if time.monotonic() > deadline:
                        break  # the drop below reports it
                    time.sleep(0.05)
                conn.execute("SELECT pg_drop_replication_slot(slot_name) FROM "
                             "pg_replication_slots WHERE slot_name = %s", (slot,))
            for pub in box.publications:
                conn.execute(sql.SQL("DROP PUBLICATION IF EXISTS {}").format(sql.Identifier(pub)))
            conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(schema)))


@pytest.fixture
def walsender_factory(sandbox: Sandbox) -> Iterator[Any]:
    senders: list[WalSender] = []

    def start(slot: str, options: dict[str, str]) -> WalSender:
        sender = WalSender(sandbox.dsn, slot, options)
        senders.append(sender)
        return sender

    yield start
    for sender in senders:
        sender.close()
