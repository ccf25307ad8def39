"""What a reader reports crosses a process boundary: each report pickles, and a failure comes
back as the error class the coordinator raises."""

from __future__ import annotations

import pickle

import pytest

from connector.errors import PrivilegeError, SchemaError, SinkError, SourceError
from connector.snapshot.initial.reports import (
    FINAL_REPORTS,
    ChunkProduced,
    ReaderDone,
    ReaderFailed,
    ReaderFlushed,
    ReaderStopped,
    RowsRead,
)


@pytest.mark.parametrize("report", [RowsRead(2, 2000), ChunkProduced(1, 123_456),
                                    ReaderFlushed(), ReaderDone(7), ReaderStopped(),
                                    ReaderFailed("SinkError", "boom")])
def test_reports_survive_pickling(report: object) -> None:
    assert pickle.loads(pickle.dumps(report)) == report


def test_final_reports_are_the_three_endings() -> None:
    assert isinstance(ReaderDone(0), FINAL_REPORTS)
    assert isinstance(ReaderFailed("SourceError", ""), FINAL_REPORTS)
    assert isinstance(ReaderStopped(), FINAL_REPORTS)
    assert not isinstance(RowsRead(0, 1), FINAL_REPORTS)
    assert not isinstance(ReaderFlushed(), FINAL_REPORTS)


@pytest.mark.parametrize("exc", [SourceError("no table"), SchemaError("another schema"),
                                 SinkError("not acknowledged")])
def test_a_failure_is_raised_as_its_own_class(exc: Exception) -> None:
    error = pickle.loads(pickle.dumps(ReaderFailed.of(exc))).error()
    assert type(error) is type(exc) and str(error) == str(exc)


def test_other_errors_come_back_as_source_errors_with_their_message() -> None:
    exc = PrivilegeError("app", "SELECT on table t", "GRANT SELECT ON t TO app")
    error = ReaderFailed.of(exc).error()
    assert type(error) is SourceError and str(error) == str(exc)
