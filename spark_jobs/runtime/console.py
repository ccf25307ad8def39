"""The merge job's own lines: where they go, what they say, and the checks before Spark starts.

spark-submit runs the Python driver as a child of its JVM and copies the child's stdout *and* stderr
into the JVM's stdout (PythonRunner redirects the error stream), so a plain print to ``sys.stderr``
would land on stdout. Under spark-submit the JVM's own stderr is ``/proc/<parent>/fd/2`` (Linux):
the job writes there, next to Spark's warnings, as docs/merge-job.md says. Anywhere else (a test
calling the job in-process, another OS) it is ``sys.stderr``.

Reopening ``/proc/<parent>/fd/2`` gives the job a file offset of its own: when the JVM's stderr
is a regular file opened without ``O_APPEND`` (a shell's ``2> file`` or ``> file 2>&1``), the
JVM's next writes (log4j) land at its own offset, over the job's lines. The job then writes
through ``sys.stderr`` instead, which the JVM copies to its stdout: one process writes, at one
offset per open file, and every line survives (on stdout). `pgcdc merge`
(spark_jobs/runtime/submit.py) sets ``O_APPEND`` on its own stdout and stderr when they are
regular files, so under it the JVM appends and the job's lines stay on stderr.
"""

from __future__ import annotations

import os
import re
import socket
import stat
import sys
from typing import TextIO

from connector.avro import SchemaRegistry
from connector.errors import SchemaError

PREFIX = "pgcdc merge:"

# "... terminated with exception: org.apache.kafka...TimeoutException: Timed out ... SQLSTATE: X"
_CAUSE = re.compile(r"terminated with exception: (?P<cause>.*?)(?:\s+SQLSTATE: \w+)?\s*$")
_KAFKA_UNREACHABLE = ("Timed out waiting for a node assignment", "TimeoutException")


class SourceUnreachable(Exception):
    """Kafka or the registry does not answer before the job starts."""


def job_stderr() -> TextIO:
    """The stream for the job's own lines (see the module docstring)."""
    if "PYSPARK_GATEWAY_PORT" in os.environ:  # set by spark-submit's PythonRunner
        jvm = os.getppid()
        try:
            if (stat.S_ISREG(os.stat(f"/proc/{jvm}/fd/2").st_mode)
                    and not appends(f"/proc/{jvm}/fdinfo/2")):
                return sys.stderr  # the JVM would overwrite lines written beside it
            # "a": never truncate the JVM's stderr when it is a log file.
            return open(f"/proc/{jvm}/fd/2", "a", buffering=1)  # noqa: SIM115
        except OSError:  # not Linux, or a socket: fall back to the merged stream
            pass
    return sys.stderr


def appends(fdinfo: str) -> bool:
    """Whether the open file a /proc/<pid>/fdinfo/<fd> describes has O_APPEND."""
    with open(fdinfo) as info:
        for line in info:
            if line.startswith("flags:"):
                return bool(int(line.split()[1], 8) & os.O_APPEND)
    return False


def say(stream: TextIO, message: str) -> None:
    print(f"{PREFIX} {message}", file=stream, flush=True)


def query_failure(text: str, bootstrap_servers: str) -> str:
    """One line from a StreamingQueryException's text: the cause, with a hint for the usual
    one (Kafka gone)."""
    first = text.strip().splitlines()[0] if text.strip() else "unknown error"
    match = _CAUSE.search(first)
    reason = match.group("cause") if match else first
    if any(marker in reason for marker in _KAFKA_UNREACHABLE):
        reason += f" (is Kafka reachable at {bootstrap_servers}?)"
    return reason[:500]


def _bootstrap_addresses(servers: str) -> list[tuple[str, int]]:
    addresses = []
    for server in servers.split(","):
        server = server.strip().split("://")[-1]  # a listener name: SASL_SSL://host:port
        host, _, port = server.rpartition(":")
        if host and port.isdigit():
            addresses.append((host.strip("[]"), int(port)))
    return addresses


def check_kafka(servers: str, timeout_s: float = 10.0) -> None:
    """At least one bootstrap server accepts a TCP connection. (Only TCP: security settings
    are the Kafka source's, in Java property form, and it reports their errors itself.)"""
    errors = []
    for host, port in _bootstrap_addresses(servers):
        try:
            with socket.create_connection((host, port), timeout=timeout_s):
                return
        except OSError as exc:
            errors.append(f"{host}:{port}: {exc.strerror or exc}")
    tried = "; ".join(errors) or "no host:port in it"
    raise SourceUnreachable(f"cannot connect to Kafka at {servers} ({tried})")


def check_registry(url: str) -> None:
    """The registry answers (the producer's own check, with its retries and its 404 hint)."""
    try:
        SchemaRegistry(url, attempts=3).check_reachable()
    except SchemaError as exc:
        raise SourceUnreachable(str(exc)) from None
