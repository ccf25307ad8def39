"""Readers of the cuts manifest without Spark: `pgcdc lake cuts` and
`read.arrow_tables_at_cut` (Delta tables written with delta-rs in a temporary directory)."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import write_deltalake

from connector.cli import main
from spark_jobs.cuts.manifest import Cut, append_cut
from spark_jobs.cuts.read import NoCut, arrow_tables_at_cut, latest_cut


def _lake(tmp_path: Path) -> str:
    """Table a at versions 0 (100) and 1 (60); b at 0 (0) and 1 (40): two cuts, sum 100."""
    for table, amounts in (("a", [100, 60]), ("b", [0, 40])):
        for amount in amounts:
            write_deltalake(str(tmp_path / "public" / table),
                            pa.table({"id": [1], "amount": [amount]}), mode="overwrite")
    append_cut(str(tmp_path), Cut(0x10, 0, {"public/a": 0, "public/b": 0}, 1_700_000_000_000),
               "app")
    append_cut(str(tmp_path), Cut(0x20, 1, {"public/a": 1, "public/b": 1}, 1_700_000_001_000),
               "app")
    return str(tmp_path)


def _total(tables: dict[str, pa.Table]) -> int:
    return sum(sum(t.column("amount").to_pylist()) for t in tables.values())


def test_tables_at_a_cut_read_each_table_at_its_version(tmp_path: Path) -> None:
    target = _lake(tmp_path)
    assert latest_cut(target).lsn == 0x20
    latest = arrow_tables_at_cut(target, columns=["amount"])
    assert sorted(latest) == ["public/a", "public/b"] and _total(latest) == 100
    first = arrow_tables_at_cut(target, Cut(0x10, 0, {"public/a": 0, "public/b": 0}))
    assert first["public/a"].column("amount").to_pylist() == [100] and _total(first) == 100
    with pytest.raises(NoCut, match="--consistent-cuts"):
        latest_cut(str(tmp_path / "empty"))


def test_pgcdc_lake_cuts_lists_them(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = _lake(tmp_path)
    assert main(["lake", "cuts", "--target", target]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split()[:2] == ["LSN", "SOURCE"]
    assert lines[1].startswith("0/10 ") and "public/a@0 public/b@0" in lines[1]
    assert lines[2].startswith("0/20 ") and "2023-11-14T22:13:21.000+00:00" in lines[2]
    assert main(["lake", "cuts", "--target", target, "--json"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [(r["lsn_text"], r["batch_id"], r["versions"]) for r in rows] == [
        ("0/10", 0, {"public/a": 0, "public/b": 0}), ("0/20", 1, {"public/a": 1, "public/b": 1})]
    assert main(["lake", "cuts", "--target", str(tmp_path / "none")]) == 0
    assert "no cuts recorded" in capsys.readouterr().err
