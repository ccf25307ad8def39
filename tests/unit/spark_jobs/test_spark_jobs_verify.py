"""The PostgreSQL-vs-lake comparison bridges representations only."""

from __future__ import annotations

import datetime as dt
import struct

from spark_jobs.verify.compare import TableRows, _widened, compare, lake_names, normalize


def test_a_time_compares_as_the_lakes_microseconds_since_midnight() -> None:
    assert normalize(dt.time(13, 14, 15, 123456)) == 47_655_123_456
    assert normalize(47_655_123_456) == 47_655_123_456
    zoned = dt.time(10, tzinfo=dt.timezone(dt.timedelta(hours=2)))
    assert normalize(zoned) == zoned  # timetz (a string in the lake) is left as it is


def test_json_text_in_the_lake_compares_as_json_an_empty_array_too() -> None:
    assert normalize("[]", like=[]) == []  # an empty jsonb array
    assert normalize('["a"]', like=["a"]) == '["a"]'  # a text[] compares as a list
    assert normalize('{"a": 1}', like={"a": 1}) == {"a": 1}


def test_escaped_lake_names_are_found_through_the_name_mapping() -> None:
    pg_columns = ["id", "order date", "_cdc_op", "a_x0020b", "a b"]
    # without column mapping: the names the merge job gives (spark_jobs.rules.names.column_names)
    lake_columns = ["id", "order_x0020date", "_x005Fcdc_x005Fop", "a_x005Fx0020b", "a_x0020b"]
    assert lake_names(pg_columns, lake_columns) == {
        "id": "id", "order date": "order_x0020date", "_cdc_op": "_x005Fcdc_x005Fop",
        "a_x0020b": "a_x005Fx0020b", "a b": "a_x0020b"}
    pg = TableRows(pg_columns, {(1,): dict(zip(pg_columns, [1, "d", "x", "p", "q"],
                                                strict=True))})
    lake = TableRows(lake_columns, {(1,): dict(zip(lake_columns, [1, "d", "x", "p", "q"],
                                                    strict=True))})
    assert compare("s.t", pg, lake).differences == []
    lake.rows[(1,)]["a_x0020b"] = "other"
    assert compare("s.t", pg, lake).differences == [
        "row (1,) column a b: PostgreSQL 'q', lake 'other'"]
    # with column mapping the lake has the PostgreSQL names
    mapped = ["id", "order date", "_x005Fcdc_x005Fop", "a_x005Fx0020b", "a b"]
    assert lake_names(pg_columns, mapped) == {
        "id": "id", "order date": "order date", "_cdc_op": "_x005Fcdc_x005Fop",
        "a_x0020b": "a_x005Fx0020b", "a b": "a b"}
    assert compare("s.t", TableRows(["id", "gone"], {}), TableRows(["id"], {})).differences == [
        "columns missing in the lake: ['gone']"]


def test_a_real_and_each_element_of_a_real_array_compare_as_the_lakes_float32() -> None:
    as_float32 = struct.unpack("f", struct.pack("f", 3.4e38))[0]
    assert as_float32 != 3.4e38
    assert _widened(3.4e38) == as_float32
    assert _widened([[3.4e38, None], [0.5]]) == [[as_float32, None], [0.5]]
    assert _widened(None) is None
