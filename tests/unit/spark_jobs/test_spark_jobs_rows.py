"""`rows.decode_rows`: the producer's change events -> the fast path's flattened rows, the values
the lake stores. Every test runs on both decoders: the C one (connector/native/avrodec.c, when
built) and fastavro's, which stays the reference and the fallback (``PGCDC_NATIVE=off``, no
compiler); test_spark_jobs_native_rows.py compares the two directly."""

from __future__ import annotations

from collections.abc import Iterator
from decimal import Decimal

import pytest

from connector.avro import TransactionBlock
from connector.speedups import native
from spark_jobs.events import row_program
from spark_jobs.events.rows import NotForRows, WriterSchema, decode_rows
from tests.support.events import LocalRegistry, TableEvents, table_events

DECODERS = ["python", "native"] if native is not None else ["python"]
COLUMNS = [("id", "int8"), ("qty", "int4"), ("price", "numeric(12,2)"), ("big", "numeric(30,4)"),
           ("any", "numeric"), ("updated", "timestamptz"), ("day", "date"), ("note", "text"),
           ("raw", "bytea"), ("f4", "float4"), ("f8", "float8"), ("ok", "bool"),
           ("tags", "text[]"), ("nums", "int4[]"), ("u", "uuid"), ("j", "jsonb"),
           ("Odd Name", "text")]


@pytest.fixture(scope="module", params=DECODERS, autouse=True)
def decoder(request: pytest.FixtureRequest) -> Iterator[str]:
    """'python': the module's writer schemas get no C decoder, decode_rows uses fastavro."""
    saved = row_program.native
    if request.param == "python":
        row_program.native = None
    try:
        yield request.param
    finally:
        row_program.native = saved


def body(value: bytes) -> bytes:
    """The Avro body the job decodes (`wire.with_frame`: after the 5-byte header)."""
    return value[5:]


def table(registry: LocalRegistry, columns: list[tuple[str, str]] = COLUMNS) -> TableEvents:
    return table_events(registry, "p", "s", "t", columns, ["id"])


def writers(registry: LocalRegistry, original: bool = False) -> dict[int, WriterSchema]:
    return {sid: WriterSchema.of(schema, original) for sid, schema in registry.schemas.items()
            if schema.get("name") == "Envelope"}


def test_the_decoder_in_use(decoder: str) -> None:
    registry = LocalRegistry()
    t = table(registry)
    assert (writers(registry)[t.value_id].decoder is not None) == (decoder == "native")


def test_every_column_gets_its_lake_value() -> None:
    registry = LocalRegistry()
    t = table(registry)
    row = {"id": 7, "qty": -3, "price": Decimal("-1234.50"), "big": Decimal("1" * 26 + ".0001"),
           "any": "1e-7", "updated": "1969-12-31 23:59:59.999999+00", "day": "0001-01-01",
           "note": "é\u2603\U0001f600", "raw": b"\x00\xff", "f4": 1.5, "f8": -0.0, "ok": True,
           "tags": '{a,NULL,"b c"}', "nums": "{1,-2}",
           "u": "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11", "j": '{"a": [1]}', "Odd Name": "x"}
    batch = decode_rows([(t.value_id, body(t.change("c", 100, 3, after=row)[1]))],
                        writers(registry))
    (got,) = batch.rows
    assert got == {
        "id": 7, "qty": -3, "price": Decimal("-1234.50"), "big": Decimal("1" * 26 + ".0001"),
        "any": "0.0000001", "updated": -1, "day": -719162, "note": "é\u2603\U0001f600",
        "raw": b"\x00\xff", "f4": 1.5, "f8": -0.0, "ok": True, "tags": ["a", None, "b c"],
        "nums": [1, -2], "u": "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11", "j": '{"a": [1]}',
        "Odd_x0020Name": "x", "_cdc_op": "c", "_cdc_commit_lsn": 100, "_cdc_txn_index": 3,
        "_cdc_ts_ms": 1_700_000_000_000, "_cdc_toast": []}
    assert str(got["price"]) == "-1234.50" and str(got["big"]).endswith(".0001")  # the scale
    assert type(got["ok"]) is bool and type(got["raw"]) is bytes and type(got["f4"]) is float
    assert str(got["f8"]) == "-0.0"
    assert batch.columns == [c if c != "Odd Name" else "Odd_x0020Name" for c, _ in COLUMNS]
    assert (batch.truncates, batch.deletes, batch.toast) == (0, 0, set())


def test_null_columns_and_every_kind_of_change() -> None:
    registry = LocalRegistry()
    t = table(registry)
    records = [
        t.change("r", 10, 0, after={"id": 1}),
        t.change("u", 11, 0, after={"id": 1, "note": "n"}, unchanged_toast=["j"],
                 transaction=TransactionBlock("5:11", 1, 1), xid=5),
        t.change("d", 12, 1, before={"id": 1}),
        (None, t.truncate(13, 0)),
    ]
    batch = decode_rows([(t.value_id, body(v)) for _, v in records], writers(registry))
    meta = [(r["_cdc_op"], r["_cdc_commit_lsn"], r["_cdc_txn_index"], r["_cdc_toast"], r["id"])
            for r in batch.rows]
    assert meta == [("r", 10, 0, [], 1), ("u", 11, 0, ["j"], 1), ("d", 12, 1, [], 1),
                    ("t", 13, 0, [], None)]
    assert batch.rows[1]["note"] == "n" and batch.rows[0]["note"] is None
    assert all(v is None for r in batch.rows[2:] for c, v in r.items()
               if c not in ("id", "_cdc_op", "_cdc_commit_lsn", "_cdc_txn_index", "_cdc_ts_ms",
                            "_cdc_toast"))
    assert (batch.truncates, batch.deletes, batch.toast) == (1, 1, {"j"})


def test_unchanged_toast_names_the_lake_column() -> None:
    """Under column mapping (`original`) a column keeps its PostgreSQL name, also where an
    event lists it as unchanged TOAST (which carries the Avro name)."""
    registry = LocalRegistry()
    t = table(registry)
    value = body(t.change("u", 10, 0, after={"id": 1}, unchanged_toast=["Odd Name"])[1])
    for original, column in ((False, "Odd_x0020Name"), (True, "Odd Name")):
        batch = decode_rows([(t.value_id, value)], writers(registry, original))
        assert batch.rows[0]["_cdc_toast"] == [column] and batch.toast == {column}
        assert column in batch.rows[0]


def test_a_schema_change_within_the_batch() -> None:
    """Rows of two writer schemas (a column added): each row has its schema's columns, the
    batch the union, first seen first."""
    registry = LocalRegistry()
    old = table(registry, [("id", "int8"), ("a", "text")])
    new = table(registry, [("id", "int8"), ("a", "text"), ("b", "int4")])
    records = [(old.value_id, body(old.change("c", 1, 0, after={"id": 1, "a": "x"})[1])),
               (new.value_id, body(new.change("c", 2, 0, after={"id": 2, "b": 5})[1])),
               (old.value_id, body(old.change("c", 3, 0, after={"id": 3})[1]))]
    batch = decode_rows(records, writers(registry))
    assert [r["id"] for r in batch.rows] == [1, 2, 3]
    assert "b" not in batch.rows[0] and batch.rows[1]["b"] == 5
    assert batch.columns == ["id", "a", "b"]


def test_an_empty_batch() -> None:
    batch = decode_rows([], {})
    assert (batch.rows, batch.columns, batch.truncates) == ([], [], 0)


@pytest.mark.parametrize("cut", [1, 10, -1])
def test_a_truncated_body_is_not_for_rows(cut: int) -> None:
    """An undecodable body (here cut short) raises NotForRows, whichever decoder runs: the
    Spark path dead-letters it."""
    registry = LocalRegistry()
    t = table(registry)
    good = body(t.change("c", 10, 0, after={"id": 1, "note": "abc"})[1])
    with pytest.raises(NotForRows, match="undecodable body"):
        decode_rows([(t.value_id, good), (t.value_id, good[:cut])], writers(registry))


def test_invalid_utf8_is_not_for_rows() -> None:
    registry = LocalRegistry()
    t = table(registry)
    good = body(t.change("c", 10, 0, after={"id": 1, "note": "abc"})[1])
    bad = good.replace(b"abc", b"a\xffc")
    assert bad != good
    with pytest.raises(NotForRows):
        decode_rows([(t.value_id, bad)], writers(registry))
