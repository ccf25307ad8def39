"""Pure naming and quoting of `--column-mapping` and `--database`: column names, catalog
names, SQL quoting, the settings and their pass-through by `pgcdc merge`."""

from __future__ import annotations

import itertools
import re

import pytest

from connector.names import to_avro_name
from spark_jobs.events.decode import TopicPlan
from spark_jobs.rules.changes import q
from spark_jobs.rules.names import (
    TableId,
    catalog_name_parts,
    catalog_table_name,
    column_names,
    table_of,
)
from spark_jobs.rules.plan import merge_plan, sql_string
from spark_jobs.runtime.config import parse_args
from spark_jobs.runtime.submit import spark_options_parser, spark_submit_command
from spark_jobs.sinks.delta import DeltaMirror
from spark_jobs.sinks.delta.state import MAPPING_PROPERTIES

ODD = ["order id", "Größe", "a.b", "we`ird", "CamelCase", "x=y,(z);{}", "tab\there"]
BASE = ["--bootstrap-servers", "k:9092", "--schema-registry-url", "http://r", "--topic-prefix",
        "shop", "--target", "/lake"]


def _record(names: list[str]) -> dict[str, object]:
    return {"type": "record", "name": "Value",
            "fields": [{"name": to_avro_name(n), "type": "long", "pg_name": n} for n in names]}


def test_with_column_mapping_every_postgres_name_is_kept() -> None:
    record = _record(ODD)
    assert list(column_names(record, original=True).values()) == ODD
    # Without mapping, the names Delta refuses keep their Avro names (the old rule, unchanged).
    assert column_names(record) == {
        "order_x0020id": "order_x0020id", "Gr_x00F6_x00DFe": "Größe", "a_x002Eb": "a.b",
        "we_x0060ird": "we`ird", "CamelCase": "CamelCase",
        "x_x003Dy_x002C_x0028z_x0029_x003B_x007B_x007D": (
            "x_x003Dy_x002C_x0028z_x0029_x003B_x007B_x007D"),
        "tab_x0009here": "tab_x0009here"}


def test_with_column_mapping_a_case_collision_still_keeps_the_avro_name() -> None:
    # Spark and Delta compare column names case-insensitively, mapping or not.
    record = _record(["Name", "NAME!"])
    record["fields"][1]["pg_name"] = "name"  # type: ignore[index]
    assert column_names(record, original=True) == {"Name": "Name", "NAME_x0021": "NAME_x0021"}


def test_key_columns_follow_the_table_naming() -> None:
    plan = TopicPlan(key_record=_record(["order id", "Größe"]))
    assert plan.key_columns() == ["order_x0020id", "Größe"]
    assert plan.key_columns(original=True) == ["order id", "Größe"]
    assert TopicPlan().key_columns(True) is None


def test_merge_sql_quotes_every_name() -> None:
    assert q("we`ird") == "`we``ird`" and q("a.b") == "`a.b`"
    plan = merge_plan(["order id"], ODD, ODD, toast=["we`ird", "it's"])
    assert plan.on == "s.`order id` <=> t.`order id`"
    assert plan.update_set["`we``ird`"] == (
        "CASE WHEN array_contains(s.`_cdc_toast`, 'we`ird') THEN t.`we``ird` "
        "ELSE s.`we``ird` END")
    assert plan.update_set["`a.b`"] == "s.`a.b`"
    assert plan.insert_values["`x=y,(z);{}`"] == "s.`x=y,(z);{}`"
    assert sql_string("it's a \\ path") == "it\\'s a \\\\ path"


def test_catalog_names_keep_snake_case_and_escape_the_rest() -> None:
    assert catalog_table_name("public", "orders") == "public__orders"
    assert catalog_table_name("sales", "order_items") == "sales__order_items"
    assert catalog_table_name("public", "Order Items") == "public___x004frder_x0020_x0049tems"
    assert catalog_table_name("pub", "größe") == "pub__gr_x00f6_x00dfe"
    assert catalog_table_name("p", "😀") == "p___u01f600"
    assert TableId("public", "Order_x0020Items").catalog_name == (
        "public___x004frder_x0020_x0049tems")
    assert table_of("shop.a_x002Eb.t").catalog_name == "a_x002eb__t"


def test_catalog_names_are_injective_even_folded_to_lower_case() -> None:
    # Look-alikes: the separator inside a name, case, an escape written out, edge underscores.
    names = ["a", "b", "a__b", "b__c", "a_b", "A", "Users", "users", "_p", "p_", "a_x0041",
             "aA", "a b", "a.b", "1st", "x__", "__", "größe", "GRÖSSE", "a_x005fb"]
    seen: dict[str, tuple[str, str]] = {}
    for schema, table in itertools.product(names, repeat=2):
        name = catalog_table_name(schema, table)
        assert re.fullmatch(r"[a-z0-9_]+", name), name
        assert catalog_name_parts(name) == (schema, table)
        assert seen.setdefault(name.lower(), (schema, table)) == (schema, table), name
    with pytest.raises(ValueError):
        catalog_name_parts("orders")


def test_flags_parse_and_refuse_parquet(capsys: pytest.CaptureFixture[str]) -> None:
    c = parse_args([*BASE, "--column-mapping", "--database", "lake"])
    assert c.column_mapping and c.database == "lake"
    default = parse_args(BASE)
    assert not default.column_mapping and default.database is None
    with pytest.raises(SystemExit) as exit_info:
        parse_args([*BASE, "--format", "parquet", "--column-mapping"])
    assert exit_info.value.code == 2
    assert "apply to Delta tables" in capsys.readouterr().err


def test_pgcdc_merge_passes_the_flags_to_the_job() -> None:
    args = ["--conf", "spark.x=1", *BASE, "--column-mapping", "--database", "lake"]
    options, job_args = spark_options_parser().parse_known_args(args)
    assert options.conf == [("spark.x", "1")]
    assert job_args == [*BASE, "--column-mapping", "--database", "lake"]
    cmd = spark_submit_command(job_args, jars=["a.jar"], spark_submit="spark-submit")
    assert cmd[-3:] == ["--column-mapping", "--database", "lake"]


def test_new_tables_get_column_mapping_properties_user_versions_win() -> None:
    sink = DeltaMirror.at("/lake", "s/t", "app", column_mapping=True,
                             properties={"delta.minWriterVersion": "7"})
    assert sink.state.properties == {**MAPPING_PROPERTIES, "delta.minWriterVersion": "7"}
    assert DeltaMirror.at("/lake", "s/t", "app").state.properties == {}


def test_mapping_asked_as_a_table_property_also_means_original_names() -> None:
    sink = DeltaMirror.at("/lake", "s/t", "app",
                             properties={"delta.columnMapping.mode": "name"})
    assert sink.state.column_mapping
