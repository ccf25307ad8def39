"""Count the S3 requests a run makes, from the request log of the benchmark's S3 server.

moto's server logs one line per request (``"GET /bench/work/...?list-type=2 HTTP/1.1" 200``),
and so does s3proxy as the stack runs it (``request: ...{GET@1a2b http://127.0.0.1:9000/bench/
work/...?list-type=2 HTTP/1.1}}}``, scripts/devstack/s3proxy.py).
`RequestLog.since_last()` reads the lines written since its previous call and counts them by
what they do to a Delta table, so a benchmark can report requests per table per batch: the
figure that decides the speed of a lake in a bucket (each request is a round trip, tens of ms
on a real store), and which does not depend on how busy this machine is.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

_LINE = re.compile(r'(?:"(?:\x1b\[[0-9;]*m)*|\{)(GET|PUT|HEAD|POST|DELETE)'
                   r'(?: |@[0-9a-f]+ https?://[^/\s]+)(/\S*) HTTP/[0-9.]+')


def kind(method: str, target: str) -> str:
    """What one request does: `LIST _delta_log`, `PUT commit`, `GET data`, ..."""
    path, _, query = target.partition("?")
    if method == "GET" and ("list-type" in query or "prefix=" in query or path.count("/") <= 1):
        area = "_delta_log" if "_delta_log" in query else "other"
        return f"LIST {area}"
    if "/_pgcdc/" in path and not any(p in path for p in ("/tombstones/", "/history/")):
        area = path.split("/_pgcdc/", 1)[1].split("/", 1)[0]  # checkpoint, writer, ...
        return f"{method} _pgcdc/{area}"
    if "_last_checkpoint" in path:
        thing = "last_checkpoint"
    elif "/_delta_log/" in path and path.endswith(".json"):
        thing = "commit"
    elif "/_delta_log/" in path:
        thing = "log other"
    elif path.endswith(".parquet"):
        thing = "data"
    else:
        thing = "directory/other"
    if method == "POST" or "uploadId" in query or "uploads" in query:
        return f"{method} multipart {thing}"
    return f"{method} {thing}"


# What a request kind is for, by step of a table's batch (`phase`)
_PHASES = {"LIST _delta_log": "open", "GET last_checkpoint": "open", "GET commit": "open",
           "HEAD commit": "open", "GET data": "read", "PUT data": "write",
           "PUT commit": "commit"}


def phase(request_kind: str, target: str) -> str:
    """The step a request belongs to: `open` (a table's log read: opening a handle, bringing
    it up to date, delta-rs's checks before and reloads after a commit, transaction ids),
    `read` (data files a MERGE or the tombstone filter reads), `write` (data files), `commit`
    (the commit's conditional put), `tombstones` (any request of the tombstone tables),
    `checkpoint` (Spark's streaming checkpoint and Delta's log checkpoints), `lease` (the
    writer lease), `other`."""
    path = target.partition("?")[0]
    if "/_pgcdc/tombstones/" in target or "%2F_pgcdc%2Ftombstones%2F" in target:
        return "tombstones"
    listed = target.partition("?")[2].replace("%2F", "/")  # a LIST's prefix
    if (request_kind.endswith("_pgcdc/checkpoint") or request_kind.endswith("log other")
            or "/_pgcdc/checkpoint" in listed):
        return "checkpoint"
    if request_kind.endswith("_pgcdc/writer") or "/_pgcdc/writer" in listed:
        return "lease"
    if "multipart" in request_kind:
        return "write"
    return _PHASES.get(request_kind, "other" if "/_pgcdc/" in path else
                       "open" if request_kind.startswith("HEAD") else "other")


def count_phases(lines: list[str]) -> Counter[str]:
    """Requests by `phase`."""
    counts: Counter[str] = Counter()
    for line in lines:
        match = _LINE.search(line)
        if match:
            counts[phase(kind(match.group(1), match.group(2)), match.group(2))] += 1
    return counts


def count(lines: list[str]) -> Counter[str]:
    counts: Counter[str] = Counter()
    for line in lines:
        match = _LINE.search(line)
        if match:
            counts[kind(match.group(1), match.group(2))] += 1
    return counts


class RequestLog:
    """The requests appended to the server's log file since the previous `since_last()`."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._offset = path.stat().st_size if path.exists() else 0
        self.phases: Counter[str] = Counter()  # the last `since_last`'s requests by phase

    def since_last(self) -> Counter[str]:
        """Requests by `kind` since the previous call (by `phase`: `self.phases`)."""
        with self.path.open("rb") as f:
            f.seek(self._offset)
            data = f.read()
        self._offset += len(data)
        lines = data.decode(errors="replace").splitlines()
        self.phases = count_phases(lines)
        return count(lines)


def per_table(counts: Counter[str], tables: int) -> str:
    """`counts` divided by `tables`, biggest first, as one line."""
    total = sum(counts.values())
    parts = [f"{k} {v / tables:.1f}" for k, v in counts.most_common()]
    return f"{total / tables:.1f} requests/table ({', '.join(parts)})"
