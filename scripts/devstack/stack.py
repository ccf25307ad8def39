"""The whole local stack: where it lives, which ports, and up/down/status/env."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from . import flink
from .errors import StackError
from .kafka import Kafka
from .maven import pom_dir, resolve_archive, resolve_pom
from .postgres import Postgres, default_bin
from .registry import Registry
from .s3 import S3
from .s3proxy import S3Proxy
from .spark import spark_jars

REPO = Path(__file__).resolve().parent.parent.parent
#: Kafka Connect (tests only): the worker's logging API and the plugins (scripts/jars/).
CONNECT_POMS = ("connect-worker.pom.xml", "connect-jdbc.pom.xml", "connect-apicurio.pom.xml")
APICURIO = "io.apicurio:apicurio-registry-app:3.0.9:tar.gz:all"
#: The object store's bucket for the lake, and the lake's root in it (`PGCDC_LAKE`).
LAKE_BUCKET = "lake"
LAKE_URL = f"s3a://{LAKE_BUCKET}/delta"


def _port(name: str, default: int) -> int:
    value = os.environ.get(name, str(default))
    if not value.isdigit():
        raise StackError(f"{name} must be a port number, got {value!r}")
    return int(value)


def cache_dir() -> Path:
    return Path(os.environ.get("PGCDC_STACK_CACHE", REPO / ".stack" / "cache"))


#: The S3 servers the stack can run: moto (the default, the tests') or s3proxy (benchmarks).
S3_SERVERS = ("moto", "s3proxy")


def s3_server(server: str, base_dir: Path, port: int, buckets: tuple[str, ...] = (),
              latency_ms: int = 0) -> S3:
    """The S3 server named `server` (one of `S3_SERVERS`; `PGCDC_STACK_S3_SERVER` for `up`),
    each store operation delayed by `latency_ms` (s3proxy only: moto has no such setting)."""
    if server == "moto":
        if latency_ms:
            raise StackError("an S3 latency needs the s3proxy server (moto has none)")
        return S3(base_dir, port, buckets)
    if server == "s3proxy":
        return S3Proxy(base_dir, port, buckets, cache=cache_dir(), latency_ms=latency_ms)
    raise StackError(f"the S3 server must be one of {', '.join(S3_SERVERS)}, got {server!r} "
                     "(PGCDC_STACK_S3_SERVER)")


@dataclass
class Stack:
    root: Path
    postgres: Postgres
    kafka: Kafka
    registry: Registry
    s3: S3

    @classmethod
    def from_env(cls) -> Stack:
        root = Path(os.environ.get("PGCDC_STACK_DIR", REPO / ".stack"))
        cache = cache_dir()
        kafka_port = _port("PGCDC_STACK_KAFKA_PORT", 19092)
        return cls(
            root=root,
            postgres=Postgres(default_bin(), root / "postgres",
                              _port("PGCDC_STACK_PG_PORT", 15432)),
            kafka=Kafka(pom_dir(cache, "kafka.pom.xml"), root / "kafka", kafka_port,
                        kafka_port + 1),
            registry=Registry(cache / "apicurio", root / "registry",
                              _port("PGCDC_STACK_REGISTRY_PORT", 18081)),
            s3=s3_server(os.environ.get("PGCDC_STACK_S3_SERVER", "moto"), root / "s3",
                         _port("PGCDC_STACK_S3_PORT", 19000), (LAKE_BUCKET,)),
        )

    def fetch(self) -> list[Path]:
        """Resolve every artifact into the cache (no-op when cached); returns the Spark jars."""
        cache = cache_dir()
        resolve_pom(cache, "kafka.pom.xml")
        resolve_archive(cache, APICURIO, "apicurio")
        for pom in CONNECT_POMS:  # Kafka Connect plugins of tests/e2e/test_connect_jdbc_sink.py
            resolve_pom(cache, pom)
        flink.fetch(cache)  # PyFlink and its SQL jars (tests/e2e/test_flink_debezium.py)
        return spark_jars(cache)

    def up(self, log: callable = print) -> None:  # type: ignore[valid-type]
        self.fetch()
        for name, service in self.services():
            log(f"starting {name} ...")
            service.start()
            log(f"{name} is up")

    def down(self, log: callable = print) -> None:  # type: ignore[valid-type]
        # Reverse order; keep going so one failure does not leave the others running.
        errors = []
        for name, service in reversed(self.services()):
            try:
                stopped = service.stop()
                log(f"{name} {'stopped' if stopped else 'was not running'}")
            except StackError as exc:
                errors.append(str(exc))
        if errors:
            raise StackError("; ".join(errors))

    def services(self) -> list[tuple[str, Postgres | Kafka | Registry | S3]]:
        return [("postgres", self.postgres), ("kafka", self.kafka), ("registry", self.registry),
                ("s3", self.s3)]

    def env(self) -> dict[str, str]:
        return {
            "PGCDC_DSN": self.postgres.dsn,
            "KAFKA_BOOTSTRAP_SERVERS": self.kafka.bootstrap,
            "SCHEMA_REGISTRY_URL": self.registry.url,
            "PGCDC_SPARK_JARS": ",".join(str(p) for p in spark_jars(cache_dir())),
            # The object store (moto or s3proxy, in memory): the AWS variables delta-rs and
            # boto3 read.
            # Spark's S3A takes the keys from them too (its default credentials chain), but
            # not the endpoint: give it fs.s3a.endpoint and path.style.access.
            **self.s3.env(),
            "PGCDC_LAKE": LAKE_URL,
        }
