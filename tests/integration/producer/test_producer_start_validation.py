"""A start of `pgcdc run` checks names and settings before it creates anything, leaves nothing
behind when it fails, and gives two tables two destinations whatever their names."""

from __future__ import annotations

import socket
from pathlib import Path

import httpx
import psycopg
import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from connector.names import table_topic
from tests.support.cdc_checks import (
    assert_one_clear_line,
    execute,
    read_records,
    start_and_exit,
    stream_run,
)
from tests.support.producer import ProducerRun

pytestmark = pytest.mark.integration


def _assert_nothing_created(run: ProducerRun, publication: str | None = None) -> None:
    """No slot, no publication, no topic and no subject of this run exist."""
    with psycopg.connect(run.dsn, autocommit=True) as conn:
        assert conn.execute("SELECT slot_name FROM pg_replication_slots WHERE slot_name LIKE %s",
                            (f"%{run.tag}%",)).fetchall() == []
        assert conn.execute("SELECT pubname FROM pg_publication WHERE pubname IN (%s, %s)",
                            (f"pub_{run.tag}", publication or "")).fetchall() == []
    topics = AdminClient({"bootstrap.servers": run.bootstrap}).list_topics(timeout=10).topics
    assert [t for t in topics if t.startswith(run.prefix)] == []
    subjects = httpx.get(f"{run.registry_url}/subjects", timeout=10).json()
    assert [s for s in subjects if s.startswith(run.prefix)] == []


def _table(run: ProducerRun, dsn: str, name: str = "") -> str:
    table = name or f"v_{run.tag}"
    execute(dsn, f'CREATE TABLE "{table}" (id int PRIMARY KEY)',
            f'INSERT INTO "{table}" VALUES (1)')
    return table


def test_tables_whose_names_differ_only_in_punctuation_get_their_own_topics(
        postgres, producer_run, log_dir) -> None:
    """Used to be silent data loss: "x y" and x_y shared one topic, subject and Delta table."""
    run = stream_run(producer_run)
    names = [f"x y{run.tag}", f"x_y{run.tag}", f"a.b{run.tag}", f"a_b{run.tag}",
             f"größe{run.tag}", f"gr__e{run.tag}"]
    for name in names:
        execute(postgres.dsn, f'CREATE TABLE "{name}" (id int PRIMARY KEY, n int)')
    run.start(log_dir)
    for i, name in enumerate(names):
        execute(postgres.dsn, f'INSERT INTO "{name}" VALUES (1, {i})')
    topics = [table_topic(run.prefix, "public", name) for name in names]
    assert len(set(topics)) == len(names)
    for i, (name, topic) in enumerate(zip(names, topics, strict=True)):
        records = read_records(run.bootstrap, run.registry_url, topic, min_count=1)
        assert [(r.value["source"]["table"], r.value["after"]["n"]) for r in records] == \
            [(name, i)], topic
    subjects = httpx.get(f"{run.registry_url}/subjects", timeout=10).json()
    assert {f"{t}-value" for t in topics} <= set(subjects)
    assert run.stop() == 0


def test_a_publication_name_with_a_comma_and_a_quote_streams(postgres, producer_run,
                                                             log_dir) -> None:
    """START_REPLICATION used to split such a name after the slot was made (WAL held forever)."""
    run = stream_run(producer_run)
    publication = f'p,"{run.tag}'
    run.extra += ["--publication", publication]
    table = f"comma_{run.tag}"
    execute(postgres.dsn, f"CREATE TABLE {table} (id int PRIMARY KEY)")
    try:
        run.start(log_dir)
        execute(postgres.dsn, f"INSERT INTO {table} VALUES (7)")
        records = read_records(run.bootstrap, run.registry_url, f"{run.prefix}.public.{table}",
                               min_count=1)
        assert [r.value["after"]["id"] for r in records] == [7]
        assert run.stop() == 0
    finally:
        quoted = publication.replace('"', '""')
        execute(postgres.dsn, f'DROP PUBLICATION IF EXISTS "{quoted}"')


@pytest.mark.parametrize(("extra", "needles"), [
    (["--slot", "s" * 80], ["slot name", "63"]),
    (["--topic-prefix", "bad prefix"], ["topic prefix"]),
    (["--kafka", "foo.bar=1"], ["kafka settings", "foo.bar"]),
    (["--dsn", "host=127.0.0.1 dbname"], ["malformed dsn", "dbname"]),
], ids=["slot-80-chars", "topic-prefix", "unknown-librdkafka-property", "malformed-dsn"])
def test_bad_names_and_settings_create_nothing(postgres, producer_run, log_dir, extra,
                                               needles) -> None:
    run = producer_run("public.v_*")
    run.extra += extra
    _table(run, postgres.dsn)
    code, out = start_and_exit(run, log_dir)
    assert_one_clear_line(code, out, *needles)
    _assert_nothing_created(run)


def test_wrong_yaml_types_are_one_line(postgres, producer_run, log_dir, tmp_path: Path) -> None:
    run = producer_run("public.v_*")
    config = tmp_path / "pgcdc.yaml"
    config.write_text("topic_partitions: lots\n")
    run.extra += ["--config", str(config)]
    code, out = start_and_exit(run, log_dir)
    assert_one_clear_line(code, out, "topic_partitions", "integer", "lots")
    _assert_nothing_created(run)


def test_metrics_port_in_use_creates_nothing(postgres, producer_run, log_dir) -> None:
    run = producer_run("public.v_*")
    _table(run, postgres.dsn)
    with socket.socket() as taken:
        taken.bind(("0.0.0.0", 0))
        taken.listen()
        run.extra += ["--metrics-port", str(taken.getsockname()[1])]
        code, out = start_and_exit(run, log_dir)
    assert_one_clear_line(code, out, "metrics", "in use")
    _assert_nothing_created(run)


def test_registry_url_without_the_api_path_creates_nothing(postgres, producer_run,
                                                           log_dir) -> None:
    run = producer_run("public.v_*")
    _table(run, postgres.dsn)
    run.registry_url = run.registry_url.split("/apis/")[0]  # a common mistake with Apicurio
    code, out = start_and_exit(run, log_dir)
    assert_one_clear_line(code, out, "404", f"{run.registry_url}/subjects")
    run.registry_url += "/apis/ccompat/v7"
    _assert_nothing_created(run)


def test_a_topic_longer_than_kafka_allows_is_refused_before_anything(postgres, producer_run,
                                                                     log_dir) -> None:
    run = producer_run("public.long_*")
    run.extra += ["--topic-prefix", f"{run.prefix}" + "p" * 180]
    table = f"long_{run.tag}_" + "é" * 20
    execute(postgres.dsn, f'CREATE TABLE "{table}" (id int PRIMARY KEY)')
    code, out = start_and_exit(run, log_dir)
    assert_one_clear_line(code, out, "more than kafka's 249", table)
    _assert_nothing_created(run)


def test_a_start_that_fails_after_creating_the_publication_drops_it(postgres, kafka,
                                                                    producer_run,
                                                                    log_dir) -> None:
    """Kafka refuses the table's topic (its name collides with an existing one in Kafka's
    metric names) during the snapshot: the publication this start made is dropped, and the
    slot, made only after a complete snapshot, does not exist."""
    run = producer_run("public.c_*")
    table = _table(run, postgres.dsn, f"c_{run.tag}_x")
    clash = f"{run.prefix}.public.c_{run.tag}.x"  # '.' and '_' are one character to Kafka
    admin = AdminClient({"bootstrap.servers": kafka.bootstrap})
    admin.create_topics([NewTopic(clash, 1, 1)])[clash].result(30)
    run.tables = f"public.{table}"
    code, out = start_and_exit(run, log_dir)
    assert_one_clear_line(code, out, "collides")
    with psycopg.connect(run.dsn, autocommit=True) as conn:
        assert conn.execute("SELECT 1 FROM pg_replication_slots WHERE slot_name = %s",
                            (run.slot,)).fetchone() is None
        assert conn.execute("SELECT 1 FROM pg_publication WHERE pubname = %s",
                            (f"pub_{run.tag}",)).fetchone() is None


def test_no_dependency_warning_on_start(postgres, producer_run, log_dir) -> None:
    run = producer_run("public.v_*")
    run.extra += ["--slot", "s" * 80]
    code, out = start_and_exit(run, log_dir)
    assert code == 1
    assert "Warning" not in out, out
