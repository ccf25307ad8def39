"""The writer lease (spark_jobs/lake/lease.py): one merge job per target, on a real (local) Delta
table through delta-rs, and its pure rule."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from spark_jobs.lake.lease import Holder, LakeBusy, LakeError, Lease, free_for


def job(target: Path, host: str, **kw: float) -> Lease:
    """A lease as a job on `host` takes it (jobs of this one process may replace each other,
    so the tests give each job a host of its own)."""
    lease = Lease(str(target), **kw)
    lease.host = host
    return lease


def test_who_may_take_the_lease() -> None:
    now = 1_000_000
    held = Holder("other", "h1", 42, now - 5_000)
    assert free_for("me", None, now, 60, "h1", 7)
    assert free_for("other", held, now, 60, "h1", 42)  # its own
    assert not free_for("me", held, now, 60, "h1", 7, alive=lambda pid: True)
    assert free_for("me", held, now, 60, "h1", 7, alive=lambda pid: False)  # died on this host
    assert free_for("me", held, now, 60, "h1", 42, alive=lambda pid: True)  # this process
    assert not free_for("me", held, now, 60, "h2", 7, alive=lambda pid: False)  # another host
    assert free_for("me", held, now + 60_000, 60, "h2", 7)  # expired
    assert free_for("me", Holder("other", "h2", 1, 0), now, 60, "h2", 7)  # released


def test_a_second_job_is_refused_until_the_first_releases(tmp_path: Path) -> None:
    first, second = job(tmp_path, "h1"), job(tmp_path, "h2")
    lost: list[str] = []
    first.acquire(lost.append)
    with pytest.raises(LakeBusy, match=r"another merge job \(host .*, pid \d+\) writes the lake"):
        second.acquire(lost.append)
    first.release()
    second.acquire(lost.append)  # released: no wait
    second.release()
    assert lost == []


def test_a_job_that_stalls_past_the_ttl_loses_the_lake(tmp_path: Path) -> None:
    stalled = job(tmp_path, "h1", ttl_s=0.5, renew_s=3600)  # never renews in time
    lost: list[str] = []
    stalled.acquire(lost.append)
    time.sleep(0.7)
    taker = job(tmp_path, "h2", ttl_s=0.5, renew_s=3600)
    taker.acquire(lost.append)  # expired: taken
    with pytest.raises(LakeBusy, match="took over the lake"):
        stalled._write(1, must_own=True)  # what its renewal thread meets next
    taker.release()


def test_of_jobs_starting_together_one_takes_the_lake(tmp_path: Path) -> None:
    leases = [job(tmp_path, f"h{i}", renew_s=3600) for i in range(4)]
    results: list[str] = []

    def start(lease: Lease) -> None:
        try:
            lease.acquire(lambda message: None)
            results.append("taken")
        except LakeBusy:
            results.append("busy")
    threads = [threading.Thread(target=start, args=(lease,)) for lease in leases]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(results) == ["busy", "busy", "busy", "taken"]


def test_a_stopped_job_releases_and_a_later_one_of_the_process_takes_over(tmp_path: Path
                                                                          ) -> None:
    running = [True]
    lost: list[str] = []
    first = Lease(str(tmp_path), renew_s=0.1)
    first.acquire(lost.append, active=lambda: running[0])
    second = Lease(str(tmp_path), renew_s=3600)
    second.acquire(lost.append)  # this process: a job whose query replaced the first's
    running[0] = False
    time.sleep(0.5)  # the first's renewal meets the second quietly and stops
    assert lost == [] and first._thread is not None and not first._thread.is_alive()
    other = job(tmp_path, "elsewhere")
    with pytest.raises(LakeBusy):
        other.acquire(lost.append)  # the second still holds it
    second.release()
    other.acquire(lost.append)
    other.release()


def test_a_store_out_of_reach_is_one_line() -> None:
    lease = Lease("s3a://no-such-bucket/lake")
    from spark_jobs.lake import storage

    storage.configure({"spark.hadoop.fs.s3a.endpoint": "http://127.0.0.1:9",
                       "spark.hadoop.fs.s3a.access.key": "k",
                       "spark.hadoop.fs.s3a.secret.key": "s"})
    try:
        with pytest.raises(LakeError, match=r"cannot write the lake s3a://no-such-bucket/lake") \
                as caught:
            lease.acquire(lambda message: None)
        assert "\n" not in str(caught.value)
    finally:
        storage.configure({})
