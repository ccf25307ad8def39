"""Change events made by the producer's own code, for the merge job's tests and benchmark.

A table is described as PostgreSQL describes it to the producer: (column name, PostgreSQL
type) pairs and its primary key become a pgoutput `Relation`; the product's `CodecFactory`
derives its schemas, registers them (`registry_ids`: in the real registry, as `pgcdc run`
does, or in a `LocalRegistry` in unit tests) and makes the `TableCodec`; changes go through
`TableCodec.change_from_tuples` / `truncate` with pgoutput tuples of text-format values. So
every byte is the producer's: tests/unit/spark_jobs/test_spark_jobs_events.py checks
that against the `Publisher`.

    table = table_events(SchemaRegistry(url), "shop", "public", "users",
                         [("id", "int8"), ("name", "text")], ["id"])
    key, value = table.change("c", 100, 0, after={"id": 1, "name": "ann"})

Row values are Python values written as PostgreSQL's text output (`pg_text`); a column missing
from a row is NULL.
"""

from __future__ import annotations

import datetime as dt
import json
import re
import zlib
from collections.abc import Mapping, Sequence
from decimal import Decimal
from typing import Any

from connector.avro import (
    CodecFactory,
    SchemaRegistry,
    SourceInfo,
    TableCodec,
    TransactionBlock,
    registry_ids,
)
from connector.avro.registry import canonical_json
from connector.pgoutput.messages import (
    UNCHANGED_TOAST,
    Relation,
    RelationColumn,
    TupleData,
)
from connector.pgtypes import TypeCatalog, oids
from connector.pgtypes.catalog import PgType
from tests.support.avro import numeric_typmod

Column = tuple[str, str]  # (column name, PostgreSQL type: "int8", "numeric(10,2)", "text[]")
TS_MS = 1_700_000_000_000  # the commit time of every event unless told otherwise
DB = "postgres"

#: Extension types a test table may use, at made-up OIDs (as a database's pg_type gives them).
EXTENSION_TYPES = {"geometry": 70001, "geography": 70002, "vector": 70003, "halfvec": 70004,
                   "sparsevec": 70005}
_OIDS = {**{name: oid for oid, name in oids.NAMES.items()}, "point": oids.POINT,
         "tsvector": oids.TSVECTOR, **EXTENSION_TYPES}
_TYPE = re.compile(r"(?P<name>[a-z0-9_]+)(?:\((?P<args>[0-9, ]+)\))?(?P<array>\[\])?")


def pg_type(spec: str) -> tuple[int, int]:
    """(type OID, typmod) of a built-in type as written in DDL, as pgoutput sends them."""
    match = _TYPE.fullmatch(spec)
    if match is None or match["name"] not in _OIDS:
        raise ValueError(f"not a built-in PostgreSQL type: {spec!r}")
    oid = _OIDS[match["name"]]
    args = [int(a) for a in match["args"].split(",")] if match["args"] else []
    typmod = -1
    if oid == oids.NUMERIC and args:
        typmod = numeric_typmod(args[0], args[1] if len(args) > 1 else 0)
    elif oid in (oids.VARCHAR, oids.BPCHAR) and args:
        typmod = args[0] + 4  # VARHDRSZ
    elif args:
        typmod = args[0]  # time/timestamp precision, bit length
    return (oids.ARRAY_OF[oid] if match["array"] else oid), typmod


def relation_id(schema: str, table: str) -> int:
    """A table's `pg_class` oid stand-in: the same for every version of the table (so a schema
    change is not a new incarnation, spark_jobs/rules/incarnation.py), above the bootstrap oids."""
    return 16384 + zlib.crc32(f"{schema}.{table}".encode()) % 1_000_000


def table_relation(schema: str, table: str, columns: Sequence[Column], key: Sequence[str]
                   ) -> Relation:
    """The Relation message pgoutput sends for the table (REPLICA IDENTITY DEFAULT: the primary
    key `key` flags its columns; no key: no flags)."""
    unknown = set(key) - {name for name, _ in columns}
    if unknown:
        raise ValueError(f"key columns {sorted(unknown)} are not columns of {schema}.{table}")
    return Relation(None, relation_id(schema, table), schema, table, "d",
                    tuple(RelationColumn(1 if name in key else 0, name, *pg_type(type_))
                          for name, type_ in columns))


def pg_text(value: Any) -> str:
    """A Python value as PostgreSQL's text output writes it (what pgoutput sends); a `str` is
    taken as that text."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "t" if value else "f"
    if isinstance(value, int | Decimal):
        return str(value)
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, dt.datetime):
        text = value.strftime("%Y-%m-%d %H:%M:%S") + _micros(value.microsecond)
        return text if value.tzinfo is None else text + _offset(value.utcoffset())
    if isinstance(value, dt.date):
        return value.isoformat()
    if isinstance(value, dt.time):
        text = value.strftime("%H:%M:%S") + _micros(value.microsecond)
        return text if value.tzinfo is None else text + _offset(value.utcoffset())
    if isinstance(value, bytes):
        return "\\x" + value.hex()
    raise TypeError(f"no PostgreSQL text for {type(value).__name__} {value!r}")


def _micros(micros: int) -> str:
    return f".{micros:06d}".rstrip("0") if micros else ""


def _offset(offset: dt.timedelta | None) -> str:
    assert offset is not None
    seconds = int(offset.total_seconds())
    sign, seconds = ("-", -seconds) if seconds < 0 else ("+", seconds)
    hours, minutes = divmod(seconds // 60, 60)
    return f"{sign}{hours:02d}" + (f":{minutes:02d}" if minutes else "")


class TableEvents:
    """One table version's change events, written by its `TableCodec` (the producer's)."""

    def __init__(self, codec: TableCodec) -> None:
        self.codec = codec
        self._columns = [c.name for c in codec.schemas.relation.columns]
        self._names = frozenset(self._columns)

    @property
    def topic(self) -> str:
        return self.codec.topic

    @property
    def value_id(self) -> int:
        return self.codec.value_id

    @property
    def key_id(self) -> int | None:
        return self.codec.key_id

    def tuple_data(self, row: Mapping[str, Any], unchanged_toast: Sequence[str] = ()
                   ) -> TupleData:
        """pgoutput's tuple of a row: text values, NULL for a missing column, the
        unchanged-TOAST marker for the columns of `unchanged_toast`."""
        if not (self._names.issuperset(row) and self._names.issuperset(unchanged_toast)):
            unknown = (set(row) | set(unchanged_toast)) - self._names
            raise ValueError(f"{self.topic}: no columns {sorted(unknown)}")
        return tuple(UNCHANGED_TOAST if name in unchanged_toast
                     else None if (value := row.get(name)) is None else pg_text(value)
                     for name in self._columns)

    def change(self, op: str, commit_lsn: int, txn_index: int, *,
               before: Mapping[str, Any] | None = None, after: Mapping[str, Any] | None = None,
               unchanged_toast: Sequence[str] = (), ts_ms: int = TS_MS,
               written_ms: int | None = None, xid: int | None = None,
               change_lsn: int | None = None, transaction: TransactionBlock | None = None
               ) -> tuple[bytes | None, bytes]:
        """(key, value) of one change (op c, u, d or r); the key from `after`, or `before` for
        a delete. `before`: the old tuple pgoutput sends (the key's columns for a delete under
        REPLICA IDENTITY DEFAULT); `unchanged_toast`: columns of `after` TOASTed and unchanged
        (not sent); `ts_ms`: the commit time; `written_ms`: the Envelope's ts_ms, when the
        producer wrote the event (default: the commit time); `change_lsn`: the change's own
        LSN (default: the commit's)."""
        source = self._source(op, commit_lsn, txn_index, ts_ms, xid, change_lsn)
        old = None if before is None else self.tuple_data(before)
        new = None if after is None else self.tuple_data(after, unchanged_toast)
        return self.codec.change_from_tuples(
            op, old, new, source, ts_ms=ts_ms if written_ms is None else written_ms,
            transaction=transaction)

    def truncate(self, commit_lsn: int, txn_index: int, *, ts_ms: int = TS_MS,
                 written_ms: int | None = None, xid: int | None = None,
                 change_lsn: int | None = None, transaction: TransactionBlock | None = None
                 ) -> bytes:
        """The value of a truncate (keyless; the producer sends it to every partition)."""
        source = self._source("t", commit_lsn, txn_index, ts_ms, xid, change_lsn)
        return self.codec.truncate(source, ts_ms=ts_ms if written_ms is None else written_ms,
                                   transaction=transaction)

    @staticmethod
    def _source(op: str, commit_lsn: int, txn_index: int, ts_ms: int, xid: int | None,
                change_lsn: int | None) -> SourceInfo:
        return SourceInfo(commit_lsn, txn_index, ts_ms, xid,
                          commit_lsn if change_lsn is None else change_lsn,
                          "true" if op == "r" else "false")


def table_events(registry: SchemaRegistry, prefix: str, schema: str, table: str,
                 columns: Sequence[Column], key: Sequence[str], *, db: str = DB,
                 value_format: str = "pgcdc", truncate_records: str | None = None
                 ) -> TableEvents:
    """The events of a table version, its schemas registered in `registry` as the producer
    registers them (`registry_ids`). Calling again with other columns or key is a schema
    change (new schemas, new ids) of the same table (same relation id). `value_format`,
    `truncate_records`: the producer's settings (connector.config)."""
    relation = table_relation(schema, table, columns, key)
    catalog = TypeCatalog()
    for name, oid in EXTENSION_TYPES.items():
        catalog.add(PgType(oid, name, "public"))
    factory = CodecFactory(catalog, None, registry_ids(registry), prefix=prefix,
                           db=db, value_format=value_format, truncate_records=truncate_records)
    return TableEvents(factory.codec(relation))


class LocalRegistry(SchemaRegistry):
    """A registry in memory, for unit tests: each distinct schema gets the next id from
    `first`, the same schema the same id (as a registry does); nothing is sent anywhere.
    `schemas` (id -> schema) is what tests.support.schemas.FixedSchemas serves the merge job."""

    def __init__(self, first: int = 1) -> None:
        super().__init__("http://registry.invalid")  # never reached: register is ours
        self.schemas: dict[int, dict[str, Any]] = {}
        self._local: dict[str, int] = {}
        self._next = first

    def register(self, subject: str, schema: Mapping[str, Any] | str) -> int:
        text = canonical_json(schema)
        found = self._local.get(text)
        if found is None:
            found = self._local[text] = self._next
            self.schemas[found] = json.loads(text)
            self._next += 1
        return found

    def schema(self, schema_id: int) -> dict[str, Any]:
        return self.schemas[schema_id]
