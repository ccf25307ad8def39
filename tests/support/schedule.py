"""The order in which `pytest -n 2 --dist loadfile` hands test files to its workers: the
longest first (longest-processing-time scheduling), so the run ends on short files and both
workers finish together.

xdist's own order sorts files by their number of tests, which puts the files of one or two
slow end-to-end tests last: a worker could still run two of them, queued ahead, while the
other had nothing left (a worker takes a new file while it has two or fewer tests pending).
The seconds below are one test file's share of a CI run (runs 9 and 10, 2 cores); a file not
listed is estimated from its tests' count and kind. Only the order changes, never which tests
run; a wrong estimate costs balance, not coverage."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence

# Measured (s) for files that take about 25 s or more.
SECONDS = {
    "tests/e2e/test_wheel.py": 210,
    "tests/e2e/test_merge_submit.py": 190,
    "tests/e2e/test_acceptance.py": 160,
    "tests/e2e/test_merge_e2e.py": 130,
    "tests/e2e/test_merge_object_store.py": 110,
    "tests/e2e/test_merge_cuts.py": 100,
    "tests/integration/producer/test_producer_exactly_once.py": 135,
    "tests/integration/producer/test_producer_publication_settings.py": 115,
    "tests/integration/snapshot/test_snapshot_incremental_run.py": 100,
    "tests/e2e/test_merge_ddl.py": 80,
    "tests/e2e/test_verify_e2e.py": 70,
    "tests/e2e/test_primary_failover.py": 70,
    "tests/integration/producer/test_producer_deleted.py": 70,
    "tests/unit/spark_jobs/test_spark_jobs_history_keys.py": 90,
    "tests/unit/spark_jobs/test_spark_jobs_key_schemas.py": 85,
    "tests/unit/spark_jobs/test_spark_jobs_delta_sink.py": 70,
    "tests/e2e/test_merge_history.py": 55,
    "tests/unit/spark_jobs/test_spark_jobs_fast_sink.py": 45,
    "tests/integration/producer/test_producer_standby.py": 40,
    "tests/e2e/test_flink_debezium.py": 38,
    "tests/unit/spark_jobs/test_spark_jobs_debezium.py": 35,
    "tests/integration/stack/test_stack_cli.py": 30,
    "tests/unit/test_docs.py": 20,  # three strict mkdocs builds
}

# Estimated seconds per test of a file not listed, by where it lives (first match).
PER_TEST = (("tests/e2e/", 25.0), ("tests/unit/spark_jobs/", 6.0), ("tests/integration/", 2.0),
            ("tests/", 0.05))


def file_of(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


def estimates(nodeids: Iterable[str]) -> dict[str, float]:
    """Each file's estimated seconds."""
    counts = Counter(file_of(n) for n in nodeids)
    return {path: SECONDS.get(path, count * next(s for prefix, s in PER_TEST
                                                 if path.startswith(prefix)))
            for path, count in counts.items()}


def longest_first(nodeids: Sequence[str]) -> list[str]:
    """`nodeids` with the files in decreasing estimated time (ties: first seen first), each
    file's tests in their collected order."""
    seconds = estimates(nodeids)
    first = {}
    for index, nodeid in enumerate(nodeids):
        first.setdefault(file_of(nodeid), index)
    return sorted(nodeids, key=lambda n: (-seconds[file_of(n)], first[file_of(n)]))
