"""The order `--dist loadfile` hands files to the workers (tests/support/schedule.py)."""

from __future__ import annotations

from tests.support.schedule import estimates, longest_first


def test_longest_files_first_each_files_tests_in_their_order() -> None:
    ids = ["tests/unit/test_a.py::x", "tests/unit/test_a.py::y",
           "tests/integration/producer/test_p.py::z[pg15]",
           "tests/e2e/test_merge_cuts.py::t",
           "tests/integration/producer/test_p.py::z[pg18]",
           "tests/e2e/test_wheel.py::u", "tests/e2e/test_wheel.py::v",
           "tests/unit/test_b.py::w"]
    assert longest_first(ids) == [
        "tests/e2e/test_wheel.py::u", "tests/e2e/test_wheel.py::v",  # measured: 210 s
        "tests/e2e/test_merge_cuts.py::t",  # measured: 100 s
        "tests/integration/producer/test_p.py::z[pg15]",  # 2 server tests: ~4 s
        "tests/integration/producer/test_p.py::z[pg18]",
        "tests/unit/test_a.py::x", "tests/unit/test_a.py::y",  # pure: ~0.1 s
        "tests/unit/test_b.py::w"]
    assert sorted(longest_first(ids)) == sorted(ids)  # only the order changes


def test_a_file_not_measured_is_estimated_from_its_tests() -> None:
    seconds = estimates(["tests/e2e/test_new.py::a", "tests/e2e/test_new.py::b",
                         "tests/unit/spark_jobs/test_s.py::c", "tests/unit/test_u.py::d"])
    assert seconds["tests/e2e/test_new.py"] > seconds["tests/unit/spark_jobs/test_s.py"] \
        > seconds["tests/unit/test_u.py"] > 0
