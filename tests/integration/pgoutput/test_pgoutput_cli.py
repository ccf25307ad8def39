"""`pgcdc decode` end to end: the installed console script on captures of real PostgreSQL 15/18
(committed under tests/data/captures, made by scripts/capture_pgoutput.py) and on fresh ones."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import capture_pgoutput
import pytest

from connector.pgoutput import Decoder, str_to_lsn

ROOT = Path(__file__).resolve().parents[3]
CAPTURES = ROOT / "tests" / "data" / "captures"


def pgcdc() -> str:
    beside = Path(sys.executable).parent / "pgcdc"
    found = str(beside) if beside.exists() else shutil.which("pgcdc")
    assert found, "the pgcdc console script is not installed (pip install -e .)"
    return found


def decode(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([pgcdc(), "decode", *args], input=stdin, capture_output=True,
                          text=True, timeout=60)


def decoded(path: Path, *flags: str) -> list[dict[str, Any]]:
    result = decode(*flags, str(path))
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    return [json.loads(line) for line in result.stdout.splitlines()]


@pytest.mark.parametrize("major", ["pg15", "pg18"])
def test_basic_capture(major: str) -> None:
    path = CAPTURES / f"{major}_basic.jsonl"
    out = decoded(path)
    assert len(out) == len(path.read_text().splitlines()) - 1  # all but the options line
    assert Counter(o["type"] for o in out) == {
        "message": 2, "begin": 7, "commit": 7, "type": 2, "relation": 4, "insert": 3,
        "update": 3, "delete": 2, "truncate": 1}
    assert out[0] == {"type": "message", "xid": None, "flags": 0, "lsn": out[0]["lsn"],
                      "prefix": "heartbeat", "content": b"tick".hex(), "content_text": "tick",
                      "transactional": False}
    items = next(o for o in out if o["type"] == "relation" and o["name"] == "items")
    assert [(c["name"], c["type_oid"], c["type_modifier"], c["key"]) for c in items["columns"]
            ] == [("id", 23, -1, True), ("name", 25, -1, False), ("price", 1700, 655366, False),
                  ("seen", 1184, -1, False), ("tags", 1009, -1, False),
                  ("m", items["columns"][5]["type_oid"], -1, False), ("blob", 17, -1, False)]
    inserts = [o for o in out if o["type"] == "insert"]
    assert inserts[0]["new"] == ["1", "caf\u00e9", "12.50", "2024-03-01 12:34:56.789+00",
                                 '{a,"b c"}', "happy", "\\x00ff"]
    assert inserts[1]["new"] == ["2", None, "-0.01", None, None, "sad", None]
    updates = [o for o in out if o["type"] == "update"]
    assert [u["old_kind"] for u in updates] == [None, "K", "O"]
    assert updates[1]["old"] == ["2", None, None, None, None, None, None]
    assert [d["old_kind"] for d in [o for o in out if o["type"] == "delete"]] == ["K", "O"]
    (trunc,) = [o for o in out if o["type"] == "truncate"]
    assert (trunc["options"], trunc["restart_identity"], trunc["cascade"]) == (2, True, False)
    begin = next(o for o in out if o["type"] == "begin")
    commit = next(o for o in out if o["type"] == "commit")
    assert begin["final_lsn"] == commit["commit_lsn"]
    assert commit["commit_timestamp"].endswith("+00:00")


@pytest.mark.parametrize("major", ["pg15", "pg18"])
def test_binary_capture_and_typed(major: str) -> None:
    out = decoded(CAPTURES / f"{major}_binary.jsonl")
    first = next(o for o in out if o["type"] == "insert")
    assert first["new"][0] == {"binary": "00000001"}
    assert first["new"][1] == {"binary": "caf\u00e9".encode().hex()}
    typed = decoded(CAPTURES / f"{major}_binary.jsonl", "--typed")
    first = next(o for o in typed if o["type"] == "insert")
    assert first["new"][:5] == [1, "caf\u00e9", "12.50", "2024-03-01T12:34:56.789000+00:00",
                                ["a", "b c"]]
    assert first["new"][6] == "\\x00ff"
    # an enum is not described by the stream alone: flagged, raw value kept
    assert first["new"][5]["binary"] == b"happy".hex() and "unknown_type" in first["new"][5]
    # the text capture types to the same values (but the enum)
    text_typed = decoded(CAPTURES / f"{major}_basic.jsonl", "--typed")
    assert [o["new"][:5] + o["new"][6:] for o in text_typed if o["type"] == "insert"] == [
        o["new"][:5] + o["new"][6:] for o in typed if o["type"] == "insert"]


@pytest.mark.parametrize("major", ["pg15", "pg18"])
def test_streaming_capture(major: str) -> None:
    out = decoded(CAPTURES / f"{major}_streaming.jsonl")
    kinds = Counter(o["type"] for o in out)
    assert kinds["stream_start"] == kinds["stream_stop"] >= 1
    assert kinds["stream_abort"] == 1 and kinds["stream_commit"] == 1
    (start, *_) = [o for o in out if o["type"] == "stream_start"]
    assert start["first_segment"] is True
    inserts = [o for o in out if o["type"] == "insert"]
    assert all(i["xid"] is not None for i in inserts)
    (abort,) = [o for o in out if o["type"] == "stream_abort"]
    assert abort["xid"] == start["xid"] and abort["subxid"] != abort["xid"]
    if major == "pg18":  # parallel streaming: protocol 4 abort LSN and time
        assert abort["abort_lsn"] and abort["abort_timestamp"].endswith("+00:00")
    else:
        assert abort["abort_lsn"] is None and abort["abort_timestamp"] is None


def _without_options_line(major: str, tmp_path: Path) -> tuple[Path, int]:
    """The streaming capture without its options line, and the line number of its abort."""
    lines = (CAPTURES / f"{major}_streaming.jsonl").read_text().splitlines()[1:]
    path = tmp_path / f"{major}_bare_streaming.jsonl"
    path.write_text("\n".join(lines) + "\n")
    abort = next(i for i, line in enumerate(lines, start=1) if '"\\\\x41' in line)
    return path, abort


def test_streaming_mode_comes_from_the_user_without_an_options_line(tmp_path: Path) -> None:
    """A Stream Abort's length is what the stream was started with: `--streaming` says it when
    the capture does not, and a length that does not match it is an error naming the line."""
    bare, abort_line = _without_options_line("pg18", tmp_path)
    with_flag = decoded(bare, "--streaming", "parallel", "--proto-version", "4")
    assert with_flag == decoded(CAPTURES / "pg18_streaming.jsonl")
    result = decode(str(bare))  # default: not parallel, so a 25-byte abort is malformed
    assert result.returncode == 1 and "Traceback" not in result.stderr
    (error,) = result.stderr.splitlines()
    assert error.startswith(f"pgcdc decode: {bare} line {abort_line} (lsn ")
    assert "byte offset 9: Stream Abort without parallel streaming must be 9 bytes, got 25" \
        in error

    bare15, abort15 = _without_options_line("pg15", tmp_path)
    result = decode("--streaming", "parallel", str(bare15))
    assert result.returncode == 1
    assert f"line {abort15} " in result.stderr
    assert "Stream Abort with parallel streaming must be 25 bytes, got 9" in result.stderr


def test_flags_override_the_options_line_and_impossible_settings_are_refused(tmp_path: Path
                                                                           ) -> None:
    result = decode("--streaming", "on", str(CAPTURES / "pg18_streaming.jsonl"))
    assert result.returncode == 1 and "must be 9 bytes, got 25" in result.stderr
    result = decode("--proto-version", "3", str(CAPTURES / "pg18_streaming.jsonl"))
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert result.stderr.splitlines() == [
        f"pgcdc decode: {CAPTURES / 'pg18_streaming.jsonl'} line 1: parallel streaming "
        "needs protocol 4, not 3"]


@pytest.mark.parametrize("major", ["pg15", "pg18"])
def test_two_phase_capture(major: str) -> None:
    out = decoded(CAPTURES / f"{major}_two_phase.jsonl")
    assert [o["type"] for o in out] == [
        "begin_prepare", "relation", "insert", "prepare", "commit_prepared",
        "begin_prepare", "insert", "prepare", "rollback_prepared"]
    assert out[0]["gid"] == out[3]["gid"] == out[4]["gid"]
    assert out[8]["prepare_end_lsn"] == out[7]["end_lsn"]


def test_stdin_and_bare_hex(tmp_path: Path) -> None:
    options, *lines = (CAPTURES / "pg15_basic.jsonl").read_text().splitlines()
    bare = [options] + [json.dumps({**json.loads(line), "data": json.loads(line)["data"][2:]})
                        for line in lines]
    result = decode("-", stdin="\n".join(bare) + "\n")
    assert result.returncode == 0, result.stderr
    assert result.stdout == decode(str(CAPTURES / "pg15_basic.jsonl")).stdout


@pytest.mark.parametrize(("corrupt", "message"), [
    (lambda rec: {**rec, "data": rec["data"][:-6]}, "byte offset"),
    (lambda rec: {**rec, "data": rec["data"] + "00"}, "trailing"),
    (lambda rec: {**rec, "data": "\\x5a00"}, "unknown message type byte b'Z'"),
    (lambda rec: {**rec, "data": rec["data"][:-1]}, "not hex"),
    (lambda rec: "{not json", "not valid JSON"),
])
def test_corrupt_input_one_line_no_traceback(tmp_path: Path, corrupt: Any, message: str
                                             ) -> None:
    lines = (CAPTURES / "pg18_basic.jsonl").read_text().splitlines()
    bad_index = next(i for i, line in enumerate(lines) if '"\\\\x49' in line)  # an Insert
    record = corrupt(json.loads(lines[bad_index]))
    lines[bad_index] = record if isinstance(record, str) else json.dumps(record)
    path = tmp_path / "corrupt.jsonl"
    path.write_text("\n".join(lines) + "\n")
    result = decode(str(path))
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    (error,) = result.stderr.splitlines()
    assert error.startswith(f"pgcdc decode: {path} line {bad_index + 1}")
    assert message in error
    # everything before it but the options line was printed
    assert len(result.stdout.splitlines()) == bad_index - 1


def test_missing_file_and_usage() -> None:
    result = decode("/nonexistent/capture.jsonl")
    assert result.returncode == 1 and "cannot read" in result.stderr
    assert "Traceback" not in result.stderr
    usage = subprocess.run([pgcdc(), "decode"], capture_output=True, text=True, timeout=60)
    assert usage.returncode == 2 and "FILE" in usage.stderr


@pytest.mark.integration
@pytest.mark.parametrize("scenario", sorted(capture_pgoutput.SCENARIOS))
def test_fresh_capture_matches_in_process_decoding(postgres: Any, tmp_path: Path,
                                                   scenario: str) -> None:
    lines = capture_pgoutput.capture(postgres.dsn, scenario)
    path = tmp_path / f"{scenario}.jsonl"
    path.write_text("".join(line + "\n" for line in lines))
    out = decoded(path)
    options = json.loads(lines[0])["options"]
    decoder = Decoder(int(options["proto_version"]),
                      parallel_streaming=options.get("streaming") == "parallel")
    expected = [decoder.decode(bytes.fromhex(json.loads(line)["data"][2:]),
                               lsn=str_to_lsn(json.loads(line)["lsn"])) for line in lines[1:]]
    assert len(out) == len(expected) > 0
    for obj, msg in zip(out, expected, strict=True):
        assert obj["type"].replace("_", "") == type(msg).__name__.lower()
        if "xid" in msg._fields:
            assert obj["xid"] == msg.xid  # type: ignore[union-attr]
