"""A single-node Apache Kafka 4 broker in KRaft mode (combined broker + controller)."""

from __future__ import annotations

import base64
import socket
import struct
import uuid
from dataclasses import dataclass
from pathlib import Path

from . import process
from .errors import StackError
from .java import java
from .ports import ensure_free


def api_versions_ok(port: int, host: str = "127.0.0.1") -> bool:
    """Send an ApiVersions v0 request and check the broker answers with error code 0."""
    client = b"pgcdc-stack"
    body = struct.pack(">hhih", 18, 0, 1, len(client)) + client
    with socket.create_connection((host, port), timeout=2) as sock:
        sock.sendall(struct.pack(">i", len(body)) + body)
        header = sock.recv(4)
        if len(header) < 4:
            return False
        payload = b""
        (size,) = struct.unpack(">i", header)
        while len(payload) < size:
            chunk = sock.recv(size - len(payload))
            if not chunk:
                return False
            payload += chunk
    correlation, error = struct.unpack_from(">ih", payload)
    return correlation == 1 and error == 0


@dataclass
class Kafka:
    jar_dir: Path
    base_dir: Path
    port: int
    controller_port: int
    heap: str = "512m"

    @property
    def log_file(self) -> Path:
        return self.base_dir / "kafka.log"

    @property
    def pid_file(self) -> Path:
        return self.base_dir / "kafka.pid"

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def _config(self) -> Path:
        path = self.base_dir / "server.properties"
        path.write_text(
            "process.roles=broker,controller\n"
            "node.id=1\n"
            f"controller.quorum.bootstrap.servers=127.0.0.1:{self.controller_port}\n"
            f"listeners=PLAINTEXT://127.0.0.1:{self.port},"
            f"CONTROLLER://127.0.0.1:{self.controller_port}\n"
            f"advertised.listeners=PLAINTEXT://127.0.0.1:{self.port}\n"
            "controller.listener.names=CONTROLLER\n"
            "listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT\n"
            f"log.dirs={self.base_dir / 'data'}\n"
            "num.partitions=1\n"
            "offsets.topic.replication.factor=1\n"
            "transaction.state.log.replication.factor=1\n"
            "transaction.state.log.min.isr=1\n"
            "share.coordinator.state.topic.replication.factor=1\n"
            "share.coordinator.state.topic.min.isr=1\n"
            "group.initial.rebalance.delay.ms=0\n"
            "log.retention.hours=-1\n"
        )
        return path

    def _java(self, main: str, *args: str) -> list[str]:
        return [java(), "-Xms128m", f"-Xmx{self.heap}", "-cp", f"{self.jar_dir}/*", main, *args]

    def running(self) -> bool:
        return process.read_pid(self.pid_file) is not None

    def start(self, timeout: float = 120.0) -> None:
        if self.running():
            return
        ensure_free(self.port, "Kafka", "PGCDC_STACK_KAFKA_PORT")
        ensure_free(self.controller_port, "Kafka controller", "PGCDC_STACK_KAFKA_PORT")
        self.base_dir.mkdir(parents=True, exist_ok=True)
        config = self._config()
        if not (self.base_dir / "data" / "meta.properties").exists():
            cluster_id = "-"
            while cluster_id.startswith("-"):  # StorageTool would read "-..." as an option
                cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
            process.run(self._java("kafka.tools.StorageTool", "format", "--standalone",
                                   "-t", cluster_id, "-c", str(config)),
                        "Kafka storage format", log=self.base_dir / "format.log")
        pid = process.start(self._java("kafka.Kafka", str(config)), self.pid_file, self.log_file)
        process.wait_until(lambda: api_versions_ok(self.port), "Kafka", timeout,
                           self.log_file, pid)

    def check(self) -> None:
        try:
            ok = api_versions_ok(self.port)
        except OSError as exc:
            raise StackError(f"Kafka on port {self.port} does not answer: {exc}") from None
        if not ok:
            raise StackError(f"Kafka on port {self.port} answered ApiVersions with an error")

    def stop(self) -> bool:
        return process.stop(self.pid_file)
