"""Snapshot progress: lines, terminal redraws, periodic log lines."""

from __future__ import annotations

import io
import logging

import pytest

from connector.snapshot.initial.progress import Progress, TableProgress, format_line


def test_line_with_estimate_shows_bar_rate_and_eta() -> None:
    table = TableProgress("public.t", 1000, 2, rows=250, started=0.0)
    line = format_line(table, 10.0)
    assert line == ("snapshot public.t: [#####---------------] 250 / ~1,000 rows  25%"
                    "  25 rows/s  ETA 0:30")


def test_line_without_estimate_and_when_done() -> None:
    assert format_line(TableProgress("t", None, 1, rows=5, started=0.0), 1.0) == \
        "snapshot t: 5 rows  5 rows/s  ETA ?"
    done = TableProgress("t", 10, 0, rows=7200, started=0.0, finished=3600.0)
    assert format_line(done, 9999.0) == "snapshot t: 7,200 rows in 1:00:00 (2 rows/s) done"


def test_terminal_redraws_the_active_block_and_keeps_finished_lines() -> None:
    out = io.StringIO()
    progress = Progress([TableProgress("a", 100, 1), TableProgress("b", 100, 2)], stream=out,
                        tty=True)
    progress.add(0, 10)
    progress.add(1, 20)
    progress.render()
    first = out.getvalue()
    assert first.count("\n") == 2 and "\x1b[" in first and "snapshot a:" in first
    progress.chunk_done(0)
    progress.render()
    second = out.getvalue()[len(first):]
    assert second.startswith("\x1b[2F\x1b[J")  # back over the two lines drawn before
    assert "snapshot a: 10 rows in" in second and second.count("snapshot b:") == 1
    assert progress.rows == 30


def test_without_a_terminal_it_logs(caplog: pytest.LogCaptureFixture) -> None:
    progress = Progress([TableProgress("a", None, 1)], stream=io.StringIO(), tty=False,
                        log_interval_s=0.0)
    with caplog.at_level(logging.INFO, logger="connector.snapshot.initial.progress"):
        progress.add(0, 3)
        progress.render()
        progress.chunk_done(0)
        progress.render()
        progress.render()
    lines = [r.getMessage() for r in caplog.records]
    assert lines[0].startswith("snapshot a: 3 rows") and "done" in lines[1] and len(lines) == 2
