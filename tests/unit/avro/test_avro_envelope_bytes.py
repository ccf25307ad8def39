"""The hand-written Envelope frame (Source, op, ts_ms, transaction, unchanged_toast from
pre-encoded pieces; fastavro only for the Value rows) is byte for byte what fastavro writes for
the whole Envelope, for any source block, transaction block and TOAST list."""

from __future__ import annotations

import io
from typing import Any

import pytest
from avro_helpers import catalog, column, relation
from fastavro import parse_schema, schemaless_writer
from hypothesis import given, settings
from hypothesis import strategies as st

from connector.avro import SourceInfo, TableCodec, TransactionBlock, derive_table_schemas, frame
from connector.errors import SchemaError
from connector.pgtypes import oids

LONG = st.integers(-(2**63), 2**63 - 1)
NAMES = st.lists(st.sampled_from(["v", "big", "Größe", "a_x0041"]), max_size=3)


def _codec(prefix: str = "p", db: str = "d", table: str = "t") -> TableCodec:
    schemas = derive_table_schemas(
        relation(column("id", oids.INT8, key=True), column("v", oids.TEXT), table=table),
        catalog(), prefix=prefix, db=db)
    return TableCodec(schemas, 11, 12, catalog())


def _fastavro(codec: TableCodec, op: str, before: Any, after: Any, toast: list[str],
              source: SourceInfo, ts_ms: int, block: TransactionBlock | None) -> bytes:
    datum = {"before": before, "after": after,
             "source": {**codec.schemas.source_constants, "ts_ms": source.ts_ms,
                        "snapshot": source.snapshot, "sequence": source.sequence,
                        "txId": source.xid, "lsn": source.lsn, "xmin": source.xmin,
                        "commit_lsn": source.commit_lsn, "txn_index": source.txn_index},
             "op": op, "ts_ms": ts_ms,
             "transaction": None if block is None else block._asdict(),
             "unchanged_toast": toast}
    buf = io.BytesIO()
    schemaless_writer(buf, parse_schema(codec.schemas.value_schema), datum)
    return frame(codec.value_id, buf.getvalue())


@settings(max_examples=300, deadline=None)
@given(st.sampled_from("cudrt"), st.one_of(st.none(), LONG), st.one_of(st.none(), LONG),
       st.builds(SourceInfo, commit_lsn=LONG, txn_index=LONG, ts_ms=LONG,
                 xid=st.one_of(st.none(), LONG), lsn=st.one_of(st.none(), LONG),
                 snapshot=st.sampled_from(["false", "true", "last", "incremental"]),
                 xmin=st.one_of(st.none(), LONG), sequence=st.one_of(st.none(), st.text())),
       st.one_of(st.none(), st.builds(TransactionBlock, st.text(), LONG, LONG)), LONG, NAMES)
def test_envelope_bytes_equal_fastavro(op: str, before_id: int | None, after_id: int | None,
                                       source: SourceInfo, block: TransactionBlock | None,
                                       ts_ms: int, toast: list[str]) -> None:
    codec = _codec()
    before = None if before_id is None else {"id": ("long", before_id), "v": None}
    after = None if after_id is None else {"id": ("long", after_id), "v": ("string", "x")}
    plain_before = None if before is None else {"id": before_id, "v": None}
    plain_after = None if after is None else {"id": after_id, "v": "x"}
    ours = codec._envelope(op, before, after, toast, source, ts_ms, block)
    assert ours == _fastavro(codec, op, plain_before, plain_after, toast, source, ts_ms, block)


def test_consecutive_events_of_a_transaction_reuse_nothing_stale() -> None:
    codec = _codec(prefix="pre.fix", db="shop", table="Order Items")
    for commit_lsn, xid, index in [(100, 7, 0), (100, 7, 1), (200, 8, 0), (200, None, 1),
                                   (300, 9, 20_000), (300, 9, -1)]:
        source = SourceInfo(commit_lsn, index, 1_700_000_000_000 + commit_lsn, xid, commit_lsn)
        block = TransactionBlock(f"{xid}:{commit_lsn}", index + 2, index + 2)
        for ts_ms in (5, 5, 6):
            row = {"id": ("long", index), "v": None}
            ours = codec._envelope("c", None, row, ["v"], source, ts_ms, block)
            assert ours == _fastavro(codec, "c", None, {"id": index, "v": None}, ["v"], source,
                                     ts_ms, block)


def test_a_long_out_of_range_is_a_schema_error() -> None:
    codec = _codec()
    source = SourceInfo(2**63, 0, 0)
    with pytest.raises(SchemaError, match="cannot encode"):
        codec.truncate(source, ts_ms=0)
