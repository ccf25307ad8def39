"""An S3-compatible object store: moto's server mode (in memory, Apache-2.0).

moto honours conditional puts (`If-None-Match: *`, `If-Match`), which delta-rs commits rely on,
and does not check request signatures, so any fixed keys work. Everything is held in memory:
a restart empties every bucket (`up` creates the lake's bucket again). The benchmarks'
alternative, s3proxy on the same terms, is s3proxy.py.
"""

from __future__ import annotations

import importlib.util
import sys
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from . import process
from .errors import StackError
from .ports import ensure_free

#: Fixed test credentials (moto accepts any) and the region the clients sign for.
ACCESS_KEY = "pgcdc-test-key"
SECRET_KEY = "pgcdc-test-secret"
REGION = "us-east-1"


def _request(url: str, method: str = "GET") -> int:
    req = urllib.request.Request(url, method=method)
    try:
        with urllib.request.urlopen(req, timeout=3) as resp:
            return int(resp.status)
    except urllib.error.HTTPError as exc:
        return int(exc.code)


def create_bucket(endpoint: str, bucket: str) -> None:
    """Create `bucket` (an unsigned path-style PUT: neither server here checks signatures)."""
    status = _request(f"{endpoint}/{bucket}", "PUT")
    if status not in (200, 409):  # 409: it exists already (ours)
        raise StackError(f"S3 at {endpoint}: creating bucket {bucket!r} answered HTTP {status}")


def s3_ok(endpoint: str) -> bool:
    return _request(f"{endpoint}/") == 200  # ListBuckets


@dataclass
class S3:
    base_dir: Path
    port: int
    #: Buckets created on start (the lake's); tests create one per test instead.
    buckets: tuple[str, ...] = ()

    @property
    def log_file(self) -> Path:
        return self.base_dir / "s3.log"

    @property
    def pid_file(self) -> Path:
        return self.base_dir / "s3.pid"

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def env(self) -> dict[str, str]:
        """The AWS variables every client here reads (boto3, delta-rs, Hadoop's env provider)."""
        return {
            "AWS_ACCESS_KEY_ID": ACCESS_KEY,
            "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
            "AWS_REGION": REGION,
            "AWS_ENDPOINT_URL": self.endpoint,
        }

    def running(self) -> bool:
        return process.read_pid(self.pid_file) is not None

    #: What the server is, in messages.
    name = "S3 (moto)"

    def command(self) -> list[str]:
        """The server's command line, run in `base_dir` (its files made beforehand)."""
        if importlib.util.find_spec("moto") is None:
            raise StackError(f"moto is not installed in {sys.executable}: "
                             "pip install -e '.[dev]' (it brings moto[server])")
        return [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(self.port)]

    def start(self, timeout: float = 60.0) -> None:
        if not self.running():
            ensure_free(self.port, self.name, "PGCDC_STACK_S3_PORT")
            self.base_dir.mkdir(parents=True, exist_ok=True)
            pid = process.start(self.command(), self.pid_file, self.log_file, cwd=self.base_dir)
            process.wait_until(lambda: s3_ok(self.endpoint), self.name, timeout,
                               self.log_file, pid)
        for bucket in self.buckets:
            create_bucket(self.endpoint, bucket)

    def check(self) -> None:
        try:
            s3_ok(self.endpoint)
        except OSError as exc:
            raise StackError(f"S3 at {self.endpoint} does not answer: {exc}") from None

    def stop(self) -> bool:
        return process.stop(self.pid_file)
