"""Key and Envelope schemas from Relation messages: the contract's type table, names,
determinism, and evolution (checked with fastavro's schema resolution)."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from fastavro import parse_schema, schemaless_reader, schemaless_writer

from connector.avro.fixed import fixed_schema
from connector.avro.schema import derive_table_schemas, render
from connector.errors import SchemaError
from connector.pgtypes import oids
from tests.support.avro import (
    CONTRACT,
    all_types_relation,
    catalog,
    column,
    numeric_typmod,
    relation,
)


def value_fields(schema: dict[str, Any]) -> list[dict[str, Any]]:
    before = schema["fields"][0]
    assert before["name"] == "before"
    return before["type"][1]["fields"]  # type: ignore[no-any-return]


@pytest.mark.parametrize(("label", "oid", "typmod", "expected"), CONTRACT,
                         ids=[c[0] for c in CONTRACT])
def test_contract_type_table(label: str, oid: int, typmod: int, expected: Any) -> None:
    rel = relation(column("id", oids.INT4, key=True), column("v", oid, typmod))
    schemas = derive_table_schemas(rel, catalog(), prefix="p", db="d")
    field = value_fields(schemas.value_schema)[1]
    assert field == {"name": "v", "type": ["null", expected], "default": None, "pg_name": "v"}
    parse_schema(json.loads(schemas.value_json))  # valid Avro


def test_multidimensional_arrays_nest() -> None:
    rel = relation(column("grid", oids.ARRAY_OF[oids.INT4]),
                   column("cube", oids.ARRAY_OF[oids.TEXT]))
    schemas = derive_table_schemas(rel, catalog(), prefix="p", db="d",
                                   array_dims={"grid": 2, "cube": 3})
    grid, cube = (f["type"][1] for f in value_fields(schemas.value_schema))
    assert grid == {"type": "array", "items": {"type": "array", "items": ["null", "int"]}}
    assert cube == {"type": "array", "items": {"type": "array", "items": {
        "type": "array", "items": ["null", "string"]}}}


def test_envelope_layout() -> None:
    rel = relation(column("id", oids.INT8, key=True), column("note", oids.TEXT),
                   schema="sales", table="orders")
    schemas = derive_table_schemas(rel, catalog(), prefix="shop", db="shopdb")
    envelope = schemas.value_schema
    assert schemas.topic == "shop.sales.orders"
    assert (envelope["name"], envelope["namespace"]) == ("Envelope", "shop.sales.orders")
    assert [f["name"] for f in envelope["fields"]] == [
        "before", "after", "source", "op", "ts_ms", "transaction", "unchanged_toast",
        "unparsed"]
    fields = {f["name"]: f for f in envelope["fields"]}
    value = fields["before"]["type"][1]
    assert (value["type"], value["name"], value["namespace"]) == (
        "record", "Value", "shop.sales.orders")
    assert fields["before"]["default"] is None
    assert fields["after"] == {"name": "after", "type": ["null", "shop.sales.orders.Value"],
                               "default": None}
    assert fields["source"]["type"] == fixed_schema("pgcdc.Source")
    assert fields["op"]["type"] == "string"
    assert fields["ts_ms"] == {"name": "ts_ms", "type": ["null", "long"], "default": None}
    assert fields["transaction"]["type"] == ["null", fixed_schema("pgcdc.Transaction")]
    assert [f["name"] for f in fields["transaction"]["type"][1]["fields"]] == [
        "id", "total_order", "data_collection_order"]
    assert fields["unchanged_toast"]["type"] == {"type": "array", "items": "string"}
    assert fields["unparsed"] == {"name": "unparsed",
                                  "type": ["null", {"type": "map", "values": "string"}],
                                  "default": None}
    source_fields = [f["name"] for f in fields["source"]["type"]["fields"]]
    assert {"commit_lsn", "txn_index", "version", "connector", "name", "ts_ms", "snapshot", "db",
            "sequence", "schema", "table", "txId", "lsn", "xmin"} == set(source_fields)
    assert schemas.source_constants == {"version": schemas.source_constants["version"],
                                        "connector": "postgresql", "name": "shop",
                                        "db": "shopdb", "schema": "sales", "table": "orders"}


def test_key_schema_from_identity_flags() -> None:
    rel = relation(column("a", oids.INT4, key=True), column("b", oids.TEXT),
                   column("c", oids.UUID, key=True))
    schemas = derive_table_schemas(rel, catalog(), prefix="p", db="d")
    assert schemas.key_schema == {
        "type": "record", "name": "Key", "namespace": "p.public.t",
        "fields": [
            {"name": "a", "type": ["null", "int"], "default": None, "pg_name": "a"},
            {"name": "c", "type": ["null", {"type": "string", "logicalType": "uuid"}],
             "default": None, "pg_name": "c"},
        ]}
    assert schemas.key_json == render(schemas.key_schema)
    assert [c.pg_name for c in schemas.key_columns] == ["a", "c"]


def test_no_identity_columns_no_key_schema() -> None:
    rel = relation(column("a", oids.INT4), column("b", oids.TEXT), identity="n")
    schemas = derive_table_schemas(rel, catalog(), prefix="p", db="d")
    assert schemas.key_schema is None and schemas.key_json is None
    assert schemas.key_columns == ()


def test_key_columns_override_for_replica_identity_full() -> None:
    rel = relation(column("id", oids.INT4, key=True), column("b", oids.TEXT, key=True),
                   identity="f")
    schemas = derive_table_schemas(rel, catalog(), prefix="p", db="d", key_columns=["id"])
    assert [f["name"] for f in schemas.key_schema["fields"]] == ["id"]  # type: ignore[index]
    with pytest.raises(SchemaError, match="nope"):
        derive_table_schemas(rel, catalog(), prefix="p", db="d", key_columns=["nope"])


def test_names_are_sanitized_and_keep_pg_name() -> None:
    rel = relation(column("order id", oids.INT4, key=True), column("Größe", oids.TEXT),
                   column("1st", oids.TEXT), schema="my schema", table="order-items.v2")
    schemas = derive_table_schemas(rel, catalog(), prefix="prod.cdc", db="d")
    assert schemas.topic == "prod.cdc.my_x0020schema.order-items_x002Ev2"
    assert schemas.namespace == "prod.cdc.my_x0020schema.order_x002Ditems_x002Ev2"
    fields = value_fields(schemas.value_schema)
    assert [(f["name"], f["pg_name"]) for f in fields] == [
        ("order_x0020id", "order id"), ("Gr_x00F6_x00DFe", "Größe"), ("_x0031st", "1st")]
    parse_schema(json.loads(schemas.value_json))
    assert schemas.source_constants["schema"] == "my schema"
    assert schemas.source_constants["table"] == "order-items.v2"


def test_empty_prefix_is_refused() -> None:
    with pytest.raises(SchemaError):
        derive_table_schemas(relation(column("a", oids.INT4)), catalog(), prefix="", db="d")


def test_deterministic_json_in_process() -> None:
    first = derive_table_schemas(all_types_relation(), catalog(), prefix="p", db="d")
    second = derive_table_schemas(all_types_relation(), catalog(), prefix="p", db="d")
    assert first.value_json == second.value_json
    assert first.key_json == second.key_json
    assert json.loads(first.value_json) == first.value_schema
    assert " " not in first.value_json.replace('" "', "").split('"doc"')[0]  # compact


def test_deterministic_json_across_processes() -> None:
    """Different hash seeds (set/dict ordering of anything hashed) give the same bytes."""
    here = Path(__file__).resolve().parent
    code = (  # run from the repository root, where `tests.support` is importable
        "import sys\n"
        "from tests.support.avro import all_types_relation, catalog\n"
        "from connector.avro.schema import derive_table_schemas\n"
        "s = derive_table_schemas(all_types_relation(), catalog(), prefix='p', db='d')\n"
        "sys.stdout.write(s.value_json + '\\n' + str(s.key_json))\n")
    outputs = set()
    for seed in ("1", "2", "3"):
        result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                                env={"PYTHONHASHSEED": seed, "PATH": "/usr/bin:/bin"},
                                check=True, cwd=here.parents[2])
        outputs.add(result.stdout)
    assert len(outputs) == 1


# ---------------------------------------------------------------------------- evolution

def _envelope_bytes(schema: dict[str, Any], after: dict[str, Any]) -> bytes:
    datum = {
        "before": None, "after": after,
        "source": {"version": "0", "connector": "postgresql", "name": "p", "ts_ms": 1,
                   "snapshot": "false", "db": "d", "sequence": None, "schema": "public",
                   "table": "t", "txId": 5, "lsn": 10, "xmin": None, "commit_lsn": 20,
                   "txn_index": 0},
        "op": "c", "ts_ms": 2, "transaction": None, "unchanged_toast": [],
    }
    buf = io.BytesIO()
    schemaless_writer(buf, parse_schema(schema), datum)
    return buf.getvalue()


def _read(data: bytes, writer: dict[str, Any], reader: dict[str, Any]) -> dict[str, Any]:
    result: dict[str, Any] = schemaless_reader(io.BytesIO(data), parse_schema(writer),
                                               parse_schema(reader))
    return result


V1 = relation(column("id", oids.INT4, key=True), column("name", oids.TEXT))
V2_ADDED = relation(column("id", oids.INT4, key=True), column("name", oids.TEXT),
                    column("price", oids.NUMERIC, numeric_typmod(10, 2)))
V3_DROPPED = relation(column("id", oids.INT4, key=True),
                      column("price", oids.NUMERIC, numeric_typmod(10, 2)))


def _schemas(rel: Any) -> dict[str, Any]:
    return derive_table_schemas(rel, catalog(), prefix="p", db="d").value_schema


def test_added_nullable_column_is_backward_and_forward_compatible() -> None:
    v1, v2 = _schemas(V1), _schemas(V2_ADDED)
    old = _envelope_bytes(v1, {"id": 1, "name": "a"})
    assert _read(old, v1, v2)["after"] == {"id": 1, "name": "a", "price": None}  # backward
    from decimal import Decimal
    new = _envelope_bytes(v2, {"id": 2, "name": "b", "price": Decimal("1.50")})
    assert _read(new, v2, v1)["after"] == {"id": 2, "name": "b"}  # forward


def test_dropped_column_is_backward_and_forward_compatible() -> None:
    v2, v3 = _schemas(V2_ADDED), _schemas(V3_DROPPED)
    from decimal import Decimal
    old = _envelope_bytes(v2, {"id": 1, "name": "a", "price": Decimal("2.00")})
    assert _read(old, v2, v3)["after"] == {"id": 1, "price": Decimal("2.00")}
    new = _envelope_bytes(v3, {"id": 2, "price": None})
    assert _read(new, v3, v2)["after"] == {"id": 2, "name": None, "price": None}


def test_key_schema_unchanged_by_non_key_columns() -> None:
    one = derive_table_schemas(V1, catalog(), prefix="p", db="d")
    two = derive_table_schemas(V2_ADDED, catalog(), prefix="p", db="d")
    assert one.key_json == two.key_json
    assert one.value_json != two.value_json
