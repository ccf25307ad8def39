"""`pgcdc verify`'s pure parts: canonical text rules, range planning, the classification of
rows, the report and its exit codes (the servers' side: tests/e2e/test_verify_e2e.py)."""

from __future__ import annotations

import hashlib
import json

import pytest

from spark_jobs.cuts.manifest import Cut
from spark_jobs.verify.canon import (
    KeyNotHashable,
    PgColumn,
    column_rule,
    key_text,
    pg_joined,
    spark_joined,
    table_canon,
)
from spark_jobs.verify.online import bucket_of, wait_for_cut
from spark_jobs.verify.report import (
    RangeSummary,
    Report,
    TableReport,
    classify,
    differing_ranges,
    direct_differences,
    drill_plan,
    exit_code,
    not_in_postgresql,
    range_count,
    render_json,
    render_text,
)


@pytest.mark.parametrize(("pg", "lake", "hashed"), [
    ("int4", "int", True), ("int8", "bigint", True), ("bool", "boolean", True),
    ("text", "string", True), ("bpchar", "string", True), ("numeric", "decimal(10,2)", True),
    ("numeric", "string", True), ("uuid", "string", True), ("bytea", "binary", True),
    ("date", "date", True), ("timestamp", "timestamp_ntz", True),
    ("timestamptz", "timestamp", True), ("time", "bigint", True), ("jsonb", "string", True),
    ("interval", "string", True), ("float8", "double", False), ("float4", "float", False),
    ("int4", "array<int>", False), ("money", "string", False),
    # a lake column of another type than the mapping gives (retyped): compared directly
    ("int4", "string", False), ("date", "string", False), ("timestamp", "timestamp", False),
])
def test_column_rule_hashes_the_types_with_one_text_on_both_sides(
        pg: str, lake: str, hashed: bool) -> None:
    assert (column_rule(PgColumn("c", pg), lake) is not None) is hashed


def test_lossy_mappings_are_in_the_postgresql_text() -> None:
    numeric = column_rule(PgColumn("c", "numeric"), "decimal(8,2)")
    assert numeric is not None and "'NaN' THEN NULL" in numeric.pg
    date = column_rule(PgColumn("c", "date"), "date")
    assert date is not None and "9999-12-31" in date.pg and "0001-01-01" in date.pg
    tstz = column_rule(PgColumn("c", "timestamptz"), "timestamp")
    assert tstz is not None and "9999-12-30 23:59:59.999999+00" in tstz.pg
    assert "0001-01-03" in tstz.pg
    time = column_rule(PgColumn("c", "time"), "bigint")
    assert time is not None and "86399999999" in time.pg
    assert "IS NULL THEN NULL" in time.pg  # least() would turn NULL into 86399999999
    pad = column_rule(PgColumn("c", "bpchar"), "string")
    assert pad is not None and "format('%s'" in pad.pg  # ::text drops the padding
    assert "IS NULL THEN NULL" in pad.pg  # format() makes NULL ''
    inet = column_rule(PgColumn("c", "inet"), "string")
    assert inet is not None and "format('%s'" in inet.pg  # ::text adds /32


def test_enum_is_its_label_text() -> None:
    assert column_rule(PgColumn("c", "mood", enum=True), "string") is not None


def _canon():  # type: ignore[no-untyped-def]
    columns = [PgColumn("id", "int4"), PgColumn("order date", "date"), PgColumn("f", "float8")]
    return table_canon(columns, ["id"], {"id": "int", "order_x0020date": "date", "f": "double"},
                       {"id": "id", "order date": "order_x0020date", "f": "f"})


def test_table_canon_splits_hashed_and_direct_columns_and_quotes_names() -> None:
    canon = _canon()
    assert canon.hashed == ("id", "order date") and canon.direct == ("f",)
    assert '"order date"' in pg_joined(canon, canon.hashed)
    assert "`order_x0020date`" in spark_joined(canon, canon.hashed)
    assert pg_joined(canon, ["id"]).count("coalesce('V' || length(") == 1


def test_a_key_without_canonical_text_is_refused() -> None:
    with pytest.raises(KeyNotHashable, match="'f'"):
        table_canon([PgColumn("f", "float8")], ["f"], {"f": "double"}, {"f": "f"})


def test_key_text_is_length_prefixed_and_unambiguous() -> None:
    assert key_text(["1", None]) == "V1:1|N"
    assert key_text(["a|V1:b"]) != key_text(["a", "b"])
    assert key_text([""]) != key_text([None])


def test_bucket_of_is_md5_prefix_mod_ranges() -> None:
    text = key_text(["42"])
    assert bucket_of(text, 7) == int(hashlib.md5(text.encode()).hexdigest()[:8], 16) % 7
    assert {bucket_of(key_text([str(i)]), 4) for i in range(100)} == {0, 1, 2, 3}


def test_range_count() -> None:
    assert range_count(0, 50_000) == 1
    assert range_count(-1, 50_000) == 1
    assert range_count(100_000_000, 50_000) == 2000
    assert range_count(50_001, 50_000) == 2


def test_differing_ranges_treat_an_absent_range_as_empty() -> None:
    same = RangeSummary(3, 5, 9)
    pg = {0: same, 1: RangeSummary(2, 1, 1), 2: RangeSummary(1, 7, 7)}
    lake = {0: same, 1: RangeSummary(2, 1, 2), 3: RangeSummary(1, 4, 4)}
    assert differing_ranges(pg, lake) == [1, 2, 3]
    assert differing_ranges({}, {}) == []


def test_drill_plan_keeps_to_the_row_budget_but_drills_at_least_one() -> None:
    pg = {b: RangeSummary(10, 0, 0) for b in range(5)}
    lake = {b: RangeSummary(10, 0, 0) for b in range(5)}
    assert drill_plan([0, 1, 2], pg, lake, 40) == ([0, 1], [2])
    assert drill_plan([3, 4], pg, lake, 5) == ([3], [4])


def _row(k: int, v: str | None, f: float | None = None) -> dict[str, object]:
    return {"id": str(k), "v": v, "f": f}


def test_classify_counts_each_outcome_and_names_keys_and_columns() -> None:
    pg = {"1": _row(1, "a"), "2": _row(2, "b"), "3": _row(3, "c"), "5": _row(5, None, 1.5)}
    lake = {"1": _row(1, "a"), "2": _row(2, "B"), "4": _row(4, "d"), "5": _row(5, None, 1.5)}
    report = TableReport("s.t")
    differing = classify(report, ["id"], ["id", "v", "f"], pg, lake, False, 10)
    assert (report.verified, report.missing, report.extra, report.differing) == (2, 1, 1, 1)
    assert differing == {"2"}
    kinds = {(e.kind, e.key): e for e in report.examples}
    assert kinds[("differing", "id=2")].columns == ["v"]
    assert kinds[("differing", "id=2")].postgres == {"v": "b"}
    assert ("missing", "id=3") in kinds and ("extra", "id=4") in kinds


def test_classify_a_truncate_after_the_snapshot_skips_rows_only_postgresql_has() -> None:
    report = TableReport("s.t")
    classify(report, ["id"], ["id", "v"], {"1": _row(1, "a")}, {}, True, 10)
    assert (report.skipped, report.missing) == (1, 0)
    assert report.clean


def test_classify_limits_examples_not_counts() -> None:
    report = TableReport("s.t")
    classify(report, ["id"], ["id", "v"], {str(i): _row(i, "x") for i in range(20)}, {},
             False, 3)
    assert report.missing == 20 and len(report.examples) == 3


def test_direct_differences_compare_values_through_the_normaliser() -> None:
    nan = float("nan")
    pg = {"1": _row(1, None, nan), "2": _row(2, None, 1.0), "3": _row(3, None, 2.0)}
    lake = {"1": _row(1, None, nan), "2": _row(2, None, 1.5), "4": _row(4, None, 0.0)}
    report = TableReport("s.t")
    assert direct_differences(report, ["id"], ["f"], pg, lake, 10) == {"2"}
    assert report.examples[0].columns == ["f"]


def test_exit_codes_and_rendering() -> None:
    clean = TableReport("s.a", lake_version=3, verified=5, skipped=1, ranges=1)
    report = Report("0/10", "0/20", [clean])
    assert exit_code(report) == 0
    text = render_text(report)
    assert "s.a: equal: 5 verified, 1 skipped, 0 missing, 0 extra, 0 differing" in text[1]
    bad = TableReport("s.b", verified=1, differing=1)
    classify(bad, ["id"], ["id", "v"], {"7": _row(7, "x")}, {"7": _row(7, "y")}, False, 5)
    report.tables.append(bad)
    assert exit_code(report) == 3
    text = render_text(report)
    assert any("differing id=7: v: PostgreSQL 'x', lake 'y'" in line for line in text)
    data = json.loads(render_json(report))
    assert data["clean"] is False
    assert data["tables"][1]["examples"][0]["key"] == "id=7"
    report.tables.append(TableReport("s.c", error="columns missing in the lake: ['x']"))
    assert exit_code(report) == 1
    assert "s.c: ERROR: columns missing in the lake" in "\n".join(render_text(report))


def test_a_table_dropped_upstream_is_equal_only_when_its_lake_table_is_empty() -> None:
    emptied, kept, never = TableReport("s.d", lake_version=4), TableReport("s.e"), \
        TableReport("s.f")
    not_in_postgresql(emptied, lake_has_rows=False)
    not_in_postgresql(kept, lake_has_rows=True)
    not_in_postgresql(never, lake_has_rows=None)
    assert emptied.clean and exit_code(Report("0/10", "0/20", [emptied])) == 0
    assert "s.d: equal: dropped upstream, its lake table is empty (lake version 4)" in \
        render_text(Report("0/10", "0/20", [emptied]))
    assert kept.error == "not found in PostgreSQL (dropped?), but its lake table holds rows"
    assert never.error == "not found in PostgreSQL"
    assert exit_code(Report("0/10", "0/20", [emptied, kept])) == 1


def test_unresolved_ranges_are_not_clean() -> None:
    assert not TableReport("s.t", unresolved_ranges=1).clean


def test_wait_for_cut_names_the_merge_option_when_none_comes(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from connector.errors import SinkError

    with pytest.raises(SinkError, match="--consistent-cuts"):
        wait_for_cut(str(tmp_path), 100, timeout_s=0, poll_s=0)


def test_wait_for_cut_takes_the_first_cut_at_or_after(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from spark_jobs.cuts.manifest import append_cut

    append_cut(str(tmp_path), Cut(50, 0, {"s/t": 1}), "app")
    append_cut(str(tmp_path), Cut(150, 1, {"s/t": 2}), "app")
    append_cut(str(tmp_path), Cut(250, 2, {"s/t": 3}), "app")
    assert wait_for_cut(str(tmp_path), 100, timeout_s=0).versions == {"s/t": 2}
    assert wait_for_cut(str(tmp_path), 150, timeout_s=0).lsn == 150


def test_cli_verify_options_and_no_spark_at_start_up() -> None:
    import subprocess
    import sys

    from connector.cli import build_parser

    args = build_parser().parse_args(["verify", "--target", "/lake", "--tables", "a.*,b.c",
                                      "--json", "--max-examples", "3", "--timeout-s", "5"])
    assert (args.target, args.tables, args.json, args.max_examples, args.timeout_s) == (
        "/lake", "a.*,b.c", True, 3, 5.0)
    code = ("import sys, connector.cli; connector.cli.build_parser();"
            " sys.exit('pyspark' in sys.modules)")
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0


def test_cli_verify_without_dsn_is_one_line_and_exit_1(capsys, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from connector.cli import main

    monkeypatch.delenv("PGCDC_DSN", raising=False)
    assert main(["verify", "--target", "/lake"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["pgcdc verify: missing dsn (--dsn or PGCDC_DSN)"]
