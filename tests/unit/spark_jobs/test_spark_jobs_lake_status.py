"""`pgcdc lake status`'s pure parts (spark_jobs/lake/status.py): Spark's offset log, a table's
records behind and lag, the health check's verdict and the renderings. The real round trip
(a lake in a bucket, a table left behind): tests/e2e/test_merge_object_store.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from spark_jobs.lake.status import (
    LakeStatus,
    TableStatus,
    parse_offsets,
    render_json,
    render_text,
    table_lag,
    too_late,
)

OFFSET_LOG = """v1
{"batchWatermarkMs":0,"batchTimestampMs":1795811706000,"conf":{}}
{"app.public.users":{"1":7,"0":12},"app.heartbeat":{"0":40}}
"""


def test_spark_offset_log() -> None:
    assert parse_offsets(OFFSET_LOG) == {"app.public.users": {0: 12, 1: 7},
                                         "app.heartbeat": {0: 40}}
    with pytest.raises(ValueError, match="not a Spark offset log"):
        parse_offsets('{"a": 1}')


def test_nothing_behind_is_no_lag_however_old_the_table() -> None:
    assert table_lag({0: 12, 1: 7}, {0: 12, 1: 7}, [], now_ms=10**13) == (0, 0.0)


def test_lag_is_the_age_of_the_oldest_unapplied_record() -> None:
    behind, lag = table_lag({0: 10, 1: 7}, {0: 12, 1: 9}, [5_000, 8_000], now_ms=20_000)
    assert (behind, lag) == (4, 15.0)
    # a partition the job never read (new since its last batch) counts from offset 0
    assert table_lag({0: 10}, {0: 10, 1: 3}, [19_000], now_ms=20_000) == (3, 1.0)


def test_the_health_check_fails_only_past_the_threshold() -> None:
    tables = [TableStatus("public/a", "p.public.a", behind=0, lag_s=0.0),
              TableStatus("public/b", "p.public.b", behind=5, lag_s=42.0),
              TableStatus("public/c", "p.public.c")]  # Kafka not asked: no verdict
    status = LakeStatus("s3a://lake", "s3a://lake/_pgcdc/checkpoint", 17, None, tables)
    assert [t.table for t in too_late(status, 30)] == ["public/b"]
    assert too_late(status, 60) == []


def test_renderings() -> None:
    status = LakeStatus("/lake", "/lake/_pgcdc/checkpoint", 3, "2026-11-27T20:00:00Z", [
        TableStatus("public/users", "p.public.users", 2, 1.5, 4, 6, 3_000_000,
                    "2026-11-27T19:59:58Z", 1, 2)])
    text = render_text(status).splitlines()
    assert text[0].startswith("lake /lake  checkpoint /lake/_pgcdc/checkpoint  last batch 3")
    assert text[1].split() == ["TABLE", "BEHIND", "LAG", "S", "VERSION", "FILES", "MB",
                               "LAST", "COMMIT", "TOMBSTONES", "DEAD", "LETTERS"]
    assert text[2].split() == ["public/users", "2", "1.5", "4", "6", "3.0",
                               "2026-11-27T19:59:58Z", "1", "2"]
    parsed = json.loads(render_json(status))
    assert parsed["batch"] == 3 and parsed["tables"][0]["lag_s"] == 1.5


def test_without_the_spark_extra_lake_status_is_one_line(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
        tmp_path: Path) -> None:
    """A producer-only install (no pyarrow) answers `pgcdc lake status` with the extra to
    install, not a traceback from deep in the lake reader."""
    import sys

    from connector import cli

    monkeypatch.setitem(sys.modules, "pyarrow", None)  # `import pyarrow` raises ImportError
    assert cli.main(["lake", "status", "--target", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert "pgcdc lake: reading the lake needs the spark extra" in err and "pyarrow" in err
