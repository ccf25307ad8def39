"""Kafka Connect standalone for the tests: the Kafka distribution's worker (connect-runtime is
in the broker's classpath, scripts/jars/kafka.pom.xml) with the Debezium JDBC sink and
Apicurio's AvroConverter as plugins (scripts/jars/connect-*.pom.xml, resolved from Maven
Central into the stack cache once, like Kafka's jars)."""

from __future__ import annotations

import json
import subprocess
import time
import zipfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from devstack.java import java
from devstack.maven import resolve_pom
from devstack.ports import free_port
from devstack.registry import CCOMPAT_PATH
from devstack.stack import cache_dir

WORKER_CLASS = "org.apache.kafka.connect.cli.ConnectStandalone"
PLUGINS = {"debezium-jdbc": "connect-jdbc.pom.xml",
           "apicurio-converter": "connect-apicurio.pom.xml"}

#: ServiceLoader manifests a plugin lacks (plugin.discovery=service_load finds nothing else).
MANIFESTS = {"apicurio-converter": {
    "org.apache.kafka.connect.storage.Converter": [
        "io.apicurio.registry.utils.converter.AvroConverter"]}}


def converter_settings(registry_url: str, side: str) -> dict[str, str]:
    """Apicurio's AvroConverter reading Confluent framing (magic byte, 4-byte id = the ccompat
    API's id, which Apicurio 3 makes the content id) from our registry."""
    v2 = registry_url.replace(CCOMPAT_PATH, "/apis/registry/v2")
    return {f"{side}.converter": "io.apicurio.registry.utils.converter.AvroConverter",
            f"{side}.converter.apicurio.registry.url": v2,
            f"{side}.converter.apicurio.registry.as-confluent": "true",
            f"{side}.converter.apicurio.registry.headers.enabled": "false",
            f"{side}.converter.apicurio.registry.use-id": "contentId"}


@dataclass
class ConnectStandalone:
    """One standalone worker running one connector; `start`, then `stop`."""

    base_dir: Path
    bootstrap: str
    connector: Mapping[str, str]
    proc: subprocess.Popen[bytes] | None = None
    rest_port: int = field(default_factory=free_port)

    @property
    def log_file(self) -> Path:
        return self.base_dir / "connect.log"

    def _plugin_path(self) -> Path:
        """One directory per plugin, of links to its cached jars. Apicurio's converter jar has
        no ServiceLoader manifest: a small jar of one adds it, so the worker can find plugins
        by their manifests (``plugin.discovery=service_load``) instead of scanning every class
        of every jar, which took about 50 s of the test's time."""
        plugins = self.base_dir / "plugins"
        for name, pom in PLUGINS.items():
            directory = plugins / name
            directory.mkdir(parents=True, exist_ok=True)
            for jar in resolve_pom(cache_dir(), pom).glob("*.jar"):
                link = directory / jar.name
                if not link.exists():
                    link.symlink_to(jar)
            for service, classes in MANIFESTS.get(name, {}).items():
                with zipfile.ZipFile(directory / f"pgcdc-test-{name}-services.jar", "w") as jar:
                    jar.writestr(f"META-INF/services/{service}", "\n".join(classes) + "\n")
        return plugins

    def start(self) -> None:
        self.base_dir.mkdir(parents=True, exist_ok=True)
        worker = {
            "bootstrap.servers": self.bootstrap,
            "plugin.path": str(self._plugin_path()),
            "plugin.discovery": "service_load",
            "offset.storage.file.filename": str(self.base_dir / "offsets"),
            "offset.flush.interval.ms": "500",
            "listeners": f"http://127.0.0.1:{self.rest_port}",
            "key.converter": "org.apache.kafka.connect.json.JsonConverter",
            "value.converter": "org.apache.kafka.connect.json.JsonConverter",
            "consumer.auto.offset.reset": "earliest",
            "consumer.metadata.max.age.ms": "1000",
        }
        worker_file = self.base_dir / "worker.properties"
        worker_file.write_text("".join(f"{k}={v}\n" for k, v in worker.items()))
        connector_file = self.base_dir / "connector.json"
        connector_file.write_text(json.dumps(
            {"name": self.connector["name"], "config": dict(self.connector)}))
        # the worker's own classpath: Kafka's jars, with an SLF4J 2 API ahead of its 1.7 one so
        # that the slf4j-simple 2 binding there logs (scripts/jars/connect-worker.pom.xml)
        logging = resolve_pom(cache_dir(), "connect-worker.pom.xml")
        kafka_jars = resolve_pom(cache_dir(), "kafka.pom.xml")
        with open(self.log_file, "ab") as log:
            self.proc = subprocess.Popen(
                # UTC: the JDBC sink writes MicroTimestamp (our timestamptz, UTC microseconds)
                # as a timestamp its connection's time zone reads (schemas/README.md)
                [java(), "-Xmx512m", "-Duser.timezone=UTC",
                 "-Dorg.slf4j.simpleLogger.showDateTime=true",
                 "-Dorg.slf4j.simpleLogger.dateTimeFormat=HH:mm:ss.SSS",
                 "-cp", f"{logging}/*:{kafka_jars}/*", WORKER_CLASS,
                 str(worker_file),
                 str(connector_file)], stdout=log, stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL, start_new_session=True)

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def log_tail(self, lines: int = 60) -> str:
        text = self.log_file.read_text(errors="replace") if self.log_file.exists() else ""
        return "\n".join(text.splitlines()[-lines:])

    def task_state(self) -> Any:
        import httpx

        name = self.connector["name"]
        try:
            return httpx.get(f"http://127.0.0.1:{self.rest_port}/connectors/{name}/status",
                             timeout=2).json()
        except (httpx.HTTPError, ValueError):
            return None

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def wait_for(check: Any, what: str, connect: ConnectStandalone, timeout: float = 60.0) -> None:
    """Until `check()` is true; on timeout (or a dead worker) fail with the worker's log."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        last = check()
        if last:
            return
        if not connect.alive():
            break
        time.sleep(0.3)
    raise AssertionError(f"{what}: not reached (last: {last!r}); connector status "
                         f"{connect.task_state()}\n--- connect log ---\n{connect.log_tail()}")
