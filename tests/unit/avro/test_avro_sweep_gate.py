"""Issue 24: the flush LSN never passes what a registry sweep vouched for (connector/avro/
sweep_gate.py), and how a sweep feeds the gate: all ids found, one gone, registry silent (the
real round trip: tests/integration/producer/test_producer_deleted.py)."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from connector.avro.registry import SchemaRegistry, gone_id_message
from connector.avro.sweep_gate import SweepGate
from connector.errors import SchemaError


def test_nothing_past_the_start_is_confirmable_before_a_sweep_passes() -> None:
    gate = SweepGate()
    gate.start(100)
    gate.offer(500)
    assert gate.limit(500) == 100
    assert gate.limit(50) == 50  # never raises a position


def test_a_passing_sweep_vouches_for_its_sample_not_for_what_came_after() -> None:
    gate = SweepGate()
    gate.start(100)
    gate.offer(200)
    sample = gate.sample()
    gate.offer(300)  # acknowledged while the sweep runs: published after it began
    gate.passed(sample)
    assert gate.limit(300) == 200
    gate.passed(gate.sample())  # the next sweep
    assert gate.limit(300) == 300


def test_a_stale_sample_never_moves_the_gate_back() -> None:
    gate = SweepGate()
    gate.start(100)
    gate.offer(200)
    old = gate.sample()
    gate.offer(300)
    gate.passed(gate.sample())
    gate.passed(old)  # a slower sweep (the last one at a stop) ending after a newer one
    assert gate.vouched == 300
    gate.offer(250)  # offers only grow
    assert gate.sample() == 300


def test_an_unanswered_sweep_pauses_confirmation_and_the_next_answer_resumes_it() -> None:
    gate = SweepGate()
    gate.start(100)
    gate.offer(200)
    gate.sample()  # this sweep cannot reach the registry: no `passed`
    gate.offer(400)
    assert gate.limit(400) == 100
    gate.passed(gate.sample())
    assert gate.limit(400) == 400


def test_a_gone_id_vouches_for_nothing_more() -> None:
    gate = SweepGate()
    gate.start(100)
    gate.offer(200)
    sample = gate.sample()
    gate.fail()
    gate.passed(sample)  # e.g. the stop's last sweep racing the watch: still nothing
    assert gate.limit(200) == 100


def test_a_new_session_starts_from_the_slot_and_keeps_what_was_vouched() -> None:
    gate = SweepGate()
    gate.start(100)
    gate.offer(300)
    gate.passed(gate.sample())
    gate.start(250)  # reconnect: the slot is at what was sent
    assert gate.vouched == 300
    gate.start(None)
    assert gate.vouched == 300


def test_limit_before_any_start_is_zero() -> None:
    assert SweepGate().limit(10) == 0


# ------------------------------------------------------------------ sweeps feeding the gate

def _registry(monkeypatch: pytest.MonkeyPatch, *answers: tuple[Any, Any]) -> SchemaRegistry:
    registry = SchemaRegistry("http://127.0.0.1:1")
    results = list(answers)
    monkeypatch.setattr(registry, "verify_ids", lambda: results.pop(0))
    return registry


def test_a_sweep_that_finds_every_id_vouches_for_the_sample_taken_before(
        monkeypatch: pytest.MonkeyPatch) -> None:
    gate = SweepGate()
    gate.start(0)
    gate.offer(200)
    registry = SchemaRegistry("http://127.0.0.1:1")

    def verify() -> tuple[None, None]:
        gate.offer(300)  # acknowledged during the sweep: not vouched for by it
        return None, None

    monkeypatch.setattr(registry, "verify_ids", verify)
    assert registry.sweep(gate)
    assert gate.vouched == 200


def test_a_gone_id_stops_and_closes_the_gate(monkeypatch: pytest.MonkeyPatch) -> None:
    gone = SchemaError(gone_id_message("http://r", 7, "a.b.c-value"))
    registry = _registry(monkeypatch, (gone, None))
    gate = SweepGate()
    gate.start(0)
    gate.offer(200)
    assert not registry.sweep(gate)
    with pytest.raises(SchemaError, match="no longer knows schema id 7"):
        registry.check_ids()
    assert gate.limit(200) == 0
    assert not registry.sweep(gate)  # no request after a gone id


def test_a_silent_registry_warns_once_pauses_and_says_when_it_answers_again(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    down = (None, "schema id 1: ConnectError: refused")
    registry = _registry(monkeypatch, down, down, down, (None, None))
    gate = SweepGate()
    gate.start(100)
    gate.offer(200)
    with caplog.at_level(logging.DEBUG, logger="connector.avro.registry"):
        assert not registry.sweep(gate)
        assert not registry.sweep(gate)
        assert not registry.sweep(gate)
        assert gate.limit(200) == 100
        registry.check_ids()  # silence is not a deletion
        assert registry.sweep(gate)
    assert gate.limit(200) == 200
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert "nothing more is confirmed to PostgreSQL until it answers" in warnings[0].message
    assert any("answers again" in r.message for r in caplog.records
               if r.levelno == logging.INFO)


def test_verify_ids_against_no_registry_is_trouble_not_a_deletion() -> None:
    registry = SchemaRegistry("http://127.0.0.1:1", timeout_s=2)
    registry._ids[("a.b.c-value", "{}")] = 7
    gone, trouble = registry.verify_ids()
    assert gone is None
    assert trouble is not None and "schema id 7" in trouble


def test_a_sweeps_request_lines_are_not_logged_whichever_thread_sweeps() -> None:
    from connector.avro import registry as module

    line = logging.LogRecord("httpx", logging.INFO, "", 0, "HTTP Request: GET", None, None)
    assert module._quiet_watch(line)
    module._SWEEPING.active = True
    try:
        assert not module._quiet_watch(line)
        line.levelno = logging.WARNING
        assert module._quiet_watch(line)
    finally:
        module._SWEEPING.active = False
