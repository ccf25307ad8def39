"""The stack's choice of S3 server (moto or s3proxy) and s3proxy's configuration, without
starting either (benchmarks run s3proxy; the tests' server is moto)."""

from __future__ import annotations

from pathlib import Path

import pytest
from devstack.errors import StackError
from devstack.s3 import S3
from devstack.s3proxy import MAIN_CLASS, S3Proxy, command, properties
from devstack.stack import cache_dir, s3_server

from benchmarks.s3_requests import count, count_phases


def _java_properties(text: str) -> dict[str, str]:
    return dict(line.split("=", 1) for line in text.splitlines() if line)


def test_s3proxy_serves_the_in_memory_store_on_loopback_without_checking_signatures() -> None:
    conf = _java_properties(properties(19123))
    assert conf["s3proxy.endpoint"] == "http://127.0.0.1:19123"
    assert conf["jclouds.provider"] == "transient-nio2"  # not filesystem-nio2 (LIST no snapshot)
    assert conf["s3proxy.authorization"] == "none"  # clients sign with S3.env()'s fixed keys


def test_s3proxy_adds_no_latency_unless_asked() -> None:
    assert not any(k.startswith("s3proxy.latency-blobstore")
                   for k in _java_properties(properties(19123)))


def test_s3proxy_delays_every_store_operation_by_the_latency_asked(tmp_path: Path) -> None:
    conf = _java_properties(properties(19123, latency_ms=10))
    # s3proxy 4's LatencyBlobStore: `s3proxy.latency-blobstore.<operation>.latency` in ms,
    # `*` for every operation (a benchmark's stand-in for a real store's round trips)
    assert conf["s3proxy.latency-blobstore.*.latency"] == "10"
    assert conf["jclouds.provider"] == "transient-nio2"  # the store behind it is unchanged
    server = s3_server("s3proxy", tmp_path, 19001, latency_ms=25)
    assert isinstance(server, S3Proxy) and server.latency_ms == 25
    with pytest.raises(ValueError, match="must not be negative"):
        properties(19123, latency_ms=-1)


def test_only_s3proxy_takes_a_latency(tmp_path: Path) -> None:
    with pytest.raises(StackError, match="needs the s3proxy server"):
        s3_server("moto", tmp_path, 19001, latency_ms=10)


def test_s3proxy_command_line_runs_its_main_on_the_resolved_jars() -> None:
    cmd = command("/jdk/bin/java", Path("/cache/s3proxy-abc"), Path("/run/s3proxy.conf"),
                  Path("/run/logback.xml"), "2g")
    assert cmd[0] == "/jdk/bin/java"
    assert "-Xmx2g" in cmd and "-Dlogback.configurationFile=/run/logback.xml" in cmd
    assert cmd[cmd.index("-cp") + 1] == "/cache/s3proxy-abc/*"
    assert cmd[-3:] == [MAIN_CLASS, "--properties", "/run/s3proxy.conf"]


def test_either_server_is_reached_the_same_way(tmp_path: Path) -> None:
    moto = s3_server("moto", tmp_path, 19001, ("lake",))
    proxy = s3_server("s3proxy", tmp_path, 19001, ("lake",))
    assert type(moto) is S3 and isinstance(proxy, S3Proxy)
    assert proxy.env() == moto.env()  # AWS variables, endpoint: clients cannot tell them apart
    assert proxy.buckets == ("lake",) and proxy.cache == cache_dir()


def test_an_unknown_server_is_refused_naming_the_choices(tmp_path: Path) -> None:
    with pytest.raises(StackError, match=r"moto, s3proxy, got 'minio' \(PGCDC_STACK_S3_SERVER\)"):
        s3_server("minio", tmp_path, 19001)


def test_requests_are_counted_alike_from_either_servers_log() -> None:
    moto = ['127.0.0.1 - - [28/Nov/2026 09:00:00] "GET /bench/w/t0?list-type=2&prefix='
            't0%2F_delta_log%2F HTTP/1.1" 200 -',
            '127.0.0.1 - - [28/Nov/2026 09:00:00] "PUT /bench/w/t0/_delta_log/'
            '00000000000000000001.json HTTP/1.1" 200 -']
    proxy = ["09:00:00.000 DEBUG o.gaul.s3proxy.S3ProxyHandler - request: ogsoeje10s.Servlet"
             "ApiRequest@7b{ogsoeje10s.ServletContextRequest@6e{ogsoejsh.GracefulHandler$Shut"
             "downTrackingRequest@10{GET@5c http://127.0.0.1:19000/bench/w/t0?list-type=2&"
             "prefix=t0%2F_delta_log%2F HTTP/1.1}}}",
             "09:00:00.000 DEBUG o.gaul.s3proxy.S3ProxyHandler - sendSimpleErrorResponse: 412",
             "09:00:00.000 DEBUG o.gaul.s3proxy.S3ProxyHandler - request: ...{PUT@68f0 "
             "http://127.0.0.1:19000/bench/w/t0/_delta_log/00000000000000000001.json HTTP/1.1}}}"]
    assert count(proxy) == count(moto) == {"LIST _delta_log": 1, "PUT commit": 1}


def test_requests_are_counted_by_the_step_of_a_tables_batch_they_serve() -> None:
    def line(method: str, target: str) -> str:
        return f'127.0.0.1 - - [28/Nov/2026 09:00:00] "{method} {target} HTTP/1.1" 200 -'

    log = [line("GET", "/bench/w/public/t0/_delta_log/_last_checkpoint"),
           line("GET", "/bench?list-type=2&prefix=w%2Fpublic%2Ft0%2F_delta_log%2F"),
           line("GET", "/bench/w/public/t0/_delta_log/00000000000000000001.json"),
           line("GET", "/bench/w/public/t0/part-0.snappy.parquet"),
           line("PUT", "/bench/w/public/t0/part-1.snappy.parquet"),
           line("PUT", "/bench/w/public/t0/_delta_log/00000000000000000002.json"),
           line("PUT", "/bench/w/_pgcdc/tombstones/public/t0/_delta_log/0000.json"),
           line("GET", "/bench?list-type=2&prefix=w%2F_pgcdc%2Ftombstones%2Fpublic%2Ft0%2F"),
           line("HEAD", "/bench/w/_pgcdc/checkpoint/offsets/3"),
           line("GET", "/bench?list-type=2&prefix=w%2F_pgcdc%2Fcheckpoint%2Foffsets%2F"),
           line("GET", "/bench/w/_pgcdc/writer/_delta_log/00000000000000000001.json"),
           line("PUT", "/bench/w/public/t0/_delta_log/00000000000000000010.checkpoint.parquet")]
    assert count_phases(log) == {"open": 3, "read": 1, "write": 1, "commit": 1,
                                 "tombstones": 2, "checkpoint": 3, "lease": 1}
