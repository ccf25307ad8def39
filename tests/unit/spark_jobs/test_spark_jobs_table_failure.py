"""Which errors make a table `not written` (dead letters) and which fail the batch."""

from __future__ import annotations

from py4j.protocol import Py4JNetworkError

from spark_jobs.runtime.job import table_failure


def test_a_tables_own_error_is_a_table_failure() -> None:
    assert table_failure(ValueError("s/t: no column(s) ['region'] to partition by"))
    assert table_failure(RuntimeError("[DELTA_CAST_OVERFLOW_IN_TABLE_WRITE] Cannot write"))


def test_a_stopping_job_is_not() -> None:
    assert not table_failure(RuntimeError("[SPARK_JOB_CANCELLED] Job 12 cancelled part of "
                                          "cancelled job group"))
    assert not table_failure(RuntimeError("Job 3 cancelled because SparkContext was shut down"))
    assert not table_failure(RuntimeError("java.lang.InterruptedException"))
    assert not table_failure(Py4JNetworkError("Answer from Java side is empty"))
