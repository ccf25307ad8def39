"""Apicurio Registry 3 with its Confluent-compatible API, storing schemas in an H2 file."""

from __future__ import annotations

import urllib.request
from dataclasses import dataclass
from pathlib import Path

from . import process
from .errors import StackError
from .java import java
from .ports import ensure_free

CCOMPAT_PATH = "/apis/ccompat/v7"


def ccompat_ok(url: str) -> bool:
    with urllib.request.urlopen(f"{url}/subjects", timeout=3) as resp:
        return bool(resp.status == 200)


@dataclass
class Registry:
    app_dir: Path
    base_dir: Path
    port: int
    heap: str = "512m"

    @property
    def log_file(self) -> Path:
        return self.base_dir / "registry.log"

    @property
    def pid_file(self) -> Path:
        return self.base_dir / "registry.pid"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}{CCOMPAT_PATH}"

    def _runner_jar(self) -> Path:
        # Quarkus "fast-jar" layout (quarkus-run.jar) or legacy layout (*-runner.jar).
        for candidate in [self.app_dir / "quarkus-run.jar", *self.app_dir.glob("*-runner.jar")]:
            if candidate.exists():
                return candidate
        raise StackError(f"no registry runner jar in {self.app_dir}; delete it and run up again")

    def running(self) -> bool:
        return process.read_pid(self.pid_file) is not None

    def start(self, timeout: float = 180.0) -> None:
        if self.running():
            return
        ensure_free(self.port, "Schema Registry", "PGCDC_STACK_REGISTRY_PORT")
        self.base_dir.mkdir(parents=True, exist_ok=True)
        cmd = [
            java(), "-Xms128m", f"-Xmx{self.heap}",
            f"-Dquarkus.http.port={self.port}",
            "-Dquarkus.http.host=127.0.0.1",
            # Persist schemas so ids stay valid for the events already in Kafka across restarts.
            f"-Dapicurio.datasource.url=jdbc:h2:file:{self.base_dir / 'h2' / 'registry'}",
            "-Dapicurio.datasource.jdbc.initial-size=2",
            "-Dapicurio.datasource.jdbc.min-size=2",
            "-Dapicurio.datasource.jdbc.max-size=20",
            "-Dapicurio.storage.snapshot.location=" + str(self.base_dir),
            "-jar", str(self._runner_jar()),
        ]
        pid = process.start(cmd, self.pid_file, self.log_file, cwd=self.base_dir)
        process.wait_until(lambda: ccompat_ok(self.url), "Schema Registry", timeout,
                           self.log_file, pid)

    def check(self) -> None:
        try:
            ccompat_ok(self.url)
        except OSError as exc:
            raise StackError(f"Schema Registry at {self.url} does not answer: {exc}") from None

    def stop(self) -> bool:
        return process.stop(self.pid_file)
