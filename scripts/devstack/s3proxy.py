"""An S3-compatible object store for benchmarks: s3proxy 4 (Apache-2.0) on its in-memory store.

moto (s3.py) is the tests' server, but it is one Python process whose every request costs
milliseconds of CPU (and LIST grows with the bucket), so on two cores a benchmark against it
measures moto. s3proxy serves the same API from a JVM at a fraction of that cost.

Chosen with `PGCDC_STACK_S3_SERVER=s3proxy` (see `stack.s3_server`); same port, AWS variables,
path-style addressing and buckets as `S3`. Its jars are resolved from Maven Central on the
first start only (not by `scripts/stack fetch`: only benchmarks use it).

- Store `transient-nio2`: objects in the JVM's memory (a restart empties every bucket), LIST a
  snapshot, conditional puts (`If-None-Match: *`, `If-Match`) honoured, as delta-rs commits
  need. Not `filesystem-nio2`, whose LIST is not a snapshot and broke concurrent commits, and
  not s3proxy 3.x, which accepted a conditional put without checking it.
- Authorization `none`: clients sign with the fixed keys of `S3.env()` and s3proxy does not
  check the signature, like moto (so `create_bucket`'s unsigned PUT works too).
- Latency (`latency_ms`, benchmarks' `--s3-latency-ms`): s3proxy's latency middleware
  (`s3proxy.latency-blobstore.*.latency`, milliseconds added to every store operation) makes
  a request wait as on a real object store, without costing CPU. Measured through boto3 on
  this machine (load 3-9, sequential, median): 10 ms gives PUT 15-19, GET 15-17, HEAD 14-15,
  LIST 26-29 ms (without it 7-10 / 6-8 / 8 / 16-20 ms); 20 ms gives 31 / 28 / 25 / 44 ms.
- Logging: one line per request (`S3ProxyHandler`'s DEBUG `request: ...{GET@.. http://...}`,
  which benchmarks/s3_requests.py counts, as moto's request log), the rest at WARN: with no
  configuration logback logs every request at DEBUG in ~230 lines.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from .java import java
from .maven import resolve_pom
from .s3 import ACCESS_KEY, S3, SECRET_KEY

POM = "s3proxy.pom.xml"
MAIN_CLASS = "org.gaul.s3proxy.Main"

LOGBACK = """<configuration>
  <appender name="out" class="ch.qos.logback.core.ConsoleAppender">
    <encoder><pattern>%d{HH:mm:ss.SSS} %-5level %logger{36} - %msg%n</pattern></encoder>
  </appender>
  <root level="WARN"><appender-ref ref="out"/></root>
  <logger name="org.gaul.s3proxy.S3ProxyHandler" level="DEBUG"/>
</configuration>
"""


def properties(port: int, latency_ms: int = 0) -> str:
    """s3proxy's configuration file (Java properties) for a server on 127.0.0.1:`port`, each
    store operation delayed by `latency_ms` (0: none, the middleware off)."""
    if latency_ms < 0:
        raise ValueError(f"the S3 latency must not be negative, not {latency_ms} ms")
    latency = [("s3proxy.latency-blobstore.*.latency", str(latency_ms))] if latency_ms else []
    return "".join(f"{key}={value}\n" for key, value in (
        ("s3proxy.endpoint", f"http://127.0.0.1:{port}"),
        ("s3proxy.authorization", "none"),
        ("jclouds.provider", "transient-nio2"),
        # The store's own login, required by s3proxy's parser even for an in-memory store.
        ("jclouds.identity", ACCESS_KEY),
        ("jclouds.credential", SECRET_KEY),
        *latency,
    ))


def command(java_exe: str, jars: Path, conf: Path, logback: Path, heap: str) -> list[str]:
    """The JVM command line serving `conf` with the jars of `jars` (a resolved POM dir)."""
    return [java_exe, f"-Xmx{heap}", f"-Dlogback.configurationFile={logback}",
            "-cp", f"{jars}/*", MAIN_CLASS, "--properties", str(conf)]


@dataclass
class S3Proxy(S3):
    #: The stack's artifact cache, where the jars are resolved on the first start.
    cache: Path = field(kw_only=True)
    #: The JVM heap, which holds every object stored (the lake of a benchmark run).
    heap: str = field(default="2g", kw_only=True)
    #: Milliseconds added to every store operation (s3proxy's latency middleware; 0: none).
    latency_ms: int = field(default=0, kw_only=True)

    name = "S3 (s3proxy)"

    def command(self) -> list[str]:
        jars = resolve_pom(self.cache, POM)
        conf = self.base_dir / "s3proxy.conf"
        conf.write_text(properties(self.port, self.latency_ms))
        logback = self.base_dir / "logback.xml"
        logback.write_text(LOGBACK)
        return command(java(), jars, conf, logback, self.heap)
