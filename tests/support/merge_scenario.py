"""One change history over four tables that exercises every rule of the merge, and the state
it must leave. Published fresh under each test's own prefix."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from typing import Any

from connector.avro import frame
from tests.support.merge import CdcPublisher

UTC = dt.UTC
TABLES = ["public/users", "public/orders", "inventory/items", "public/events"]
CORRUPT_EVENTS = 2


def publish(pub: CdcPublisher) -> None:
    users = pub.table("public", "users", [("id", "int8"), ("name", "text"),
                                          ("bio", "text"), ("score", "int4")], ["id"], 3)

    def user(i: int, name: str, bio: str | None, score: int) -> dict[str, Any]:
        return {"id": i, "name": name, "bio": bio, "score": score}

    pub.change(users, "r", 50, 0, after=user(6, "snap", "bio6", 6))  # snapshot read
    for i in range(1, 6):
        pub.change(users, "c", 100, i - 1, after=user(i, f"n{i}", f"bio{i}", i))
    # bio unchanged (TOASTed, not sent): the stored value stays
    pub.change(users, "u", 200, 0, after=user(1, "n1b", None, 10), unchanged_toast=["bio"])
    pub.change(users, "d", 300, 0, before={"id": 2, "name": None, "bio": None, "score": None})
    # primary key change 3 → 30, as the producer publishes it: a delete and a create at the
    # update's position
    pub.change(users, "d", 400, 0, before={"id": 3, "name": None, "bio": None, "score": None})
    pub.change(users, "c", 400, 0, after=user(30, "n3", "bio3", 3))
    pub.change(users, "c", 500, 0, after=user(2, "again", "b2", 20))  # re-insert after delete
    pub.change(users, "d", 550, 0, before={"id": 4, "name": None, "bio": None, "score": None})
    # two TOAST-unchanged updates of one row in one transaction
    pub.change(users, "u", 600, 0, after=user(5, "n5b", None, 5), unchanged_toast=["bio"])
    pub.change(users, "u", 600, 1, after=user(5, "n5c", None, 5), unchanged_toast=["bio"])
    # duplicates of older changes (a producer retry, a re-run): must change nothing
    pub.change(users, "c", 100, 3, after=user(4, "n4", "bio4", 4))  # deleted at 550: stays gone
    pub.change(users, "u", 200, 0, after=user(1, "n1b", None, 10), unchanged_toast=["bio"])
    # undecodable, so not the producer's (made by hand): a body Avro cannot read, and a
    # schema id the registry does not know
    pub.send(users, (None, frame(users.value_id, b"\x02")))
    pub.send(users, (None, frame(987654, b"\x00")))

    orders = pub.table("public", "orders", [("id", "int4"), ("amount", "numeric(10,2)"),
                                            ("created", "timestamptz")], ["id"], 2)

    def order(i: int, amount: str) -> dict[str, Any]:
        return {"id": i, "amount": Decimal(amount), "created": dt.datetime(2024, 1, i, tzinfo=UTC)}

    for i in range(1, 5):
        pub.change(orders, "c", 110, i - 1, after=order(i, f"{i}.50"))
    pub.change(orders, "u", 210, 0, after=order(2, "99.99"))
    pub.truncate(orders, 310, 0)
    pub.change(orders, "c", 410, 0, after=order(5, "5.00"))
    pub.change(orders, "c", 420, 0, after=order(1, "1.00"))
    pub.change(orders, "u", 510, 0, after=order(5, "5.55"))
    pub.change(orders, "c", 110, 2, after=order(3, "3.50"))  # duplicate from before the truncate

    v1 = pub.table("inventory", "items", [("sku", "text"), ("qty", "int4"),
                                          ("legacy", "text")], ["sku"])
    for n, (sku, qty) in enumerate([("a", 1), ("b", 2), ("c", 3)]):
        pub.change(v1, "c", 120, n, after={"sku": sku, "qty": qty, "legacy": f"l{sku}"})
    # ALTER TABLE items ADD COLUMN color, DROP COLUMN legacy: a new writer schema id
    v2 = pub.table("inventory", "items", [("sku", "text"), ("qty", "int4"),
                                          ("color", "text")], ["sku"])
    assert v2.value_id != v1.value_id
    pub.change(v2, "u", 220, 0, after={"sku": "b", "qty": 20, "color": "red"})
    pub.change(v2, "c", 320, 0, after={"sku": "d", "qty": 4, "color": "blue"})
    pub.change(v2, "d", 330, 0, before={"sku": "c", "qty": None, "color": None})

    log = pub.table("public", "events", [("id", "int8"), ("msg", "text")], [])  # no key
    for i in range(3):
        pub.change(log, "c", 130, i, after={"id": i, "msg": f"m{i}"})
    pub.change(log, "c", 130, 1, after={"id": 1, "msg": "m1"})  # duplicate
    pub.flush()


EXPECTED: dict[str, dict[Any, dict[str, Any]]] = {
    "public/users": {
        1: {"id": 1, "name": "n1b", "bio": "bio1", "score": 10},
        2: {"id": 2, "name": "again", "bio": "b2", "score": 20},
        5: {"id": 5, "name": "n5c", "bio": "bio5", "score": 5},
        6: {"id": 6, "name": "snap", "bio": "bio6", "score": 6},
        30: {"id": 30, "name": "n3", "bio": "bio3", "score": 3},
    },
    "public/orders": {
        # PySpark returns timestamps as naive local time; conftest pins TZ=UTC
        1: {"id": 1, "amount": Decimal("1.00"), "created": dt.datetime(2024, 1, 1)},
        5: {"id": 5, "amount": Decimal("5.55"), "created": dt.datetime(2024, 1, 5)},
    },
    "inventory/items": {  # legacy: kept where the row did not change after the drop
        "a": {"sku": "a", "qty": 1, "legacy": "la", "color": None},
        "b": {"sku": "b", "qty": 20, "legacy": None, "color": "red"},
        "d": {"sku": "d", "qty": 4, "legacy": None, "color": "blue"},
    },
    "public/events": {i: {"id": i, "msg": f"m{i}"} for i in range(3)},
}
KEYS = {"public/users": "id", "public/orders": "id", "inventory/items": "sku",
        "public/events": "id"}
