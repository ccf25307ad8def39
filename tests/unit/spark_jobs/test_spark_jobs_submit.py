"""The spark-submit command `pgcdc merge` runs."""

from __future__ import annotations

from pathlib import Path

import pytest

from spark_jobs.runtime import submit


def test_command_with_jars_from_the_environment() -> None:
    jars = submit.resolve_jars({"PGCDC_SPARK_JARS": "/j/a.jar,/j/b.jar"})
    assert jars == ["/j/a.jar", "/j/b.jar"]
    assert submit.resolve_jars({"PGCDC_SPARK_JARS": "/j/a.jar:/j/b.jar"}) == jars
    cmd = submit.spark_submit_command(["--target", "/t"], jars=jars, spark_submit="spark-submit",
                                      conf={"spark.executor.memory": "1g"})
    assert cmd[:3] == ["spark-submit", "--jars", "/j/a.jar,/j/b.jar"]
    assert cmd[-3:] == [str(submit.MERGE_SCRIPT), "--target", "/t"]
    assert "spark.executor.memory=1g" in cmd and "local[2]" in cmd
    assert Path(cmd[-3]).name == "merge.py" and Path(cmd[-3]).exists()


def test_packages_when_no_jars_are_given() -> None:
    """Spark's convention: Ivy resolves the connectors from Maven Central."""
    assert submit.resolve_jars({}) == []
    cmd = submit.spark_submit_command(["--target", "/t"], jars=[], spark_submit="spark-submit")
    assert cmd[:3] == ["spark-submit", "--packages", ",".join(submit.SPARK_PACKAGES)]
    assert "--jars" not in cmd
    assert any(p.startswith("io.delta:delta-spark_4.2_2.13:") for p in submit.SPARK_PACKAGES)
    assert any(":spark-sql-kafka-0-10_2.13:4.2.0" in p for p in submit.SPARK_PACKAGES)
    assert any(":spark-avro_2.13:" in p for p in submit.SPARK_PACKAGES)
    assert "org.apache.hadoop:hadoop-aws:3.5.0" in submit.SPARK_PACKAGES
    # Never the AWS SDK's 690 MB bundle that hadoop-aws declares.
    excluded = cmd[cmd.index("--exclude-packages") + 1].split(",")
    assert "software.amazon.awssdk:bundle" in excluded


def test_main_passes_spark_options_through(monkeypatch: pytest.MonkeyPatch) -> None:
    ran: list[list[str]] = []
    monkeypatch.setattr(submit, "run", lambda cmd, env: ran.append(list(cmd)) or 0)
    monkeypatch.setenv("PGCDC_SPARK_JARS", "")
    assert submit.main(["--master", "spark://h:7077", "--conf", "spark.a=1",
                        "--conf", "spark.b=x=y", "--driver-memory", "1g",
                        *JOB, "--target", "/t", "--trigger", "available-now"]) == 0
    cmd = ran[0]
    assert cmd[cmd.index("--master") + 1] == "spark://h:7077"
    assert cmd[cmd.index("--driver-memory") + 1] == "1g"
    assert "spark.a=1" in cmd and "spark.b=x=y" in cmd and "--packages" in cmd
    assert cmd[-4:] == ["--target", "/t", "--trigger", "available-now"]
    assert submit.main(["--jars", "/a.jar,/b.jar", *JOB, "--target", "/t"]) == 0
    assert ran[1][1:3] == ["--jars", "/a.jar,/b.jar"]


def test_help_starts_no_jvm(tmp_path: Path) -> None:
    """`pgcdc merge --help` answers from the parsers; a spark-submit that fails proves none ran."""
    import subprocess
    import sys
    import time

    env = {"PATH": "/usr/bin:/bin", "SPARK_HOME": str(tmp_path / "no-spark")}
    start = time.monotonic()
    out = subprocess.run([sys.executable, "-m", "connector.cli", "merge", "--help"], env=env,
                         capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    assert "--master" in out.stdout and "--bootstrap-servers" in out.stdout
    assert time.monotonic() - start < 10


def test_spark_submit_binary() -> None:
    assert submit.spark_submit_binary({"SPARK_HOME": "/opt/spark"}) == "/opt/spark/bin/spark-submit"
    assert Path(submit.spark_submit_binary({})).name == "spark-submit"


# The job's required arguments: `pgcdc merge` checks them before starting spark-submit.
JOB = ["--bootstrap-servers", "k:9092", "--schema-registry-url", "http://r", "--topic-prefix", "p"]


def test_main_refuses_a_usage_error_before_spark_submit(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(submit, "run", lambda cmd, env: pytest.fail("spark-submit started"))
    with pytest.raises(SystemExit) as exited:
        submit.main([*JOB, "--target", "/t", "--trigger", "soon"])
    assert exited.value.code == 2
    assert "pgcdc merge: error: --trigger must be an interval" in capsys.readouterr().err


def test_main_reports_a_missing_spark_submit(monkeypatch: pytest.MonkeyPatch,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    def fail(env: object = None) -> str:
        raise submit.SubmitError("spark-submit not found: install pyspark or set SPARK_HOME")
    monkeypatch.setattr(submit, "spark_submit_binary", fail)
    assert submit.main([*JOB, "--target", "/t"]) == 2
    assert "pgcdc merge: spark-submit not found" in capsys.readouterr().err


def submitted(monkeypatch: pytest.MonkeyPatch, args: list[str]) -> list[str]:
    """The spark-submit command `pgcdc merge ARGS` runs (nothing is started)."""
    ran: list[list[str]] = []
    monkeypatch.setattr(submit, "run", lambda cmd, env: ran.append(list(cmd)) or 0)
    monkeypatch.setenv("PGCDC_SPARK_JARS", "")
    assert submit.main(args) == 0
    return ran[0]


def test_spark_submit_options_reach_spark_submit_before_the_script(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """`--py-files`, `--deploy-mode`, `--executor-memory`... are spark-submit's, not the job's
    (whose parser would refuse them), wherever they stand among the job's arguments."""
    cmd = submitted(monkeypatch, [
        "--master", "yarn", "--py-files", "/w/pgcdc.whl", *JOB, "--deploy-mode", "client",
        "--executor-memory", "4g", "--num-executors=3", "--verbose", "--target", "/t"])
    script = cmd.index(str(submit.MERGE_SCRIPT))
    spark, job = cmd[:script], cmd[script + 1:]
    for pair in (["--py-files", "/w/pgcdc.whl"], ["--deploy-mode", "client"],
                 ["--executor-memory", "4g"], ["--num-executors", "3"]):
        assert spark[spark.index(pair[0]) + 1] == pair[1]
    assert "--verbose" in spark
    assert job == [*JOB, "--target", "/t"]


def test_a_users_conf_replaces_the_default_shuffle_partitions(
        monkeypatch: pytest.MonkeyPatch) -> None:
    default = submitted(monkeypatch, [*JOB, "--target", "/t"])
    assert "spark.sql.shuffle.partitions=4" in default
    cmd = submitted(monkeypatch, ["--conf", "spark.sql.shuffle.partitions=64", *JOB,
                                  "--target", "/t"])
    confs = [cmd[i + 1] for i, a in enumerate(cmd) if a == "--conf"]
    assert "spark.sql.shuffle.partitions=64" in confs
    assert not any(c.startswith("spark.sql.shuffle.partitions=4") for c in confs)


def test_a_properties_file_key_is_not_overridden_by_a_default(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """`--conf` wins over a properties file in spark-submit: pgcdc gives no default for a key
    the user's `--properties-file` sets."""
    props = tmp_path / "cluster.conf"
    props.write_text("# cluster\nspark.sql.shuffle.partitions 96\n"
                     "spark.executor.memory=8g\n")
    assert submit.properties_keys(props) == {"spark.sql.shuffle.partitions",
                                             "spark.executor.memory"}
    cmd = submitted(monkeypatch, ["--properties-file", str(props), *JOB, "--target", "/t"])
    assert cmd[cmd.index("--properties-file") + 1] == str(props)
    confs = [cmd[i + 1] for i, a in enumerate(cmd) if a == "--conf"]
    assert not any(c.startswith("spark.sql.shuffle.partitions=") for c in confs)
    assert "spark.sql.session.timeZone=UTC" in confs


def test_driver_java_options_keep_the_log4j_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    cmd = submitted(monkeypatch, ["--driver-java-options=-Dx=1 -Dy=2", *JOB, "--target", "/t"])
    assert cmd.count("--driver-java-options") == 1
    value = cmd[cmd.index("--driver-java-options") + 1]
    assert value.startswith("-Dlog4j2.configurationFile=file:") and value.endswith(" -Dx=1 -Dy=2")


def test_the_executors_code_needs_only_pyspark_and_the_wheel() -> None:
    """What Spark executors run of pgcdc (the Debezium-format decoders, Python UDFs) imports with
    pyspark alone, so `--py-files pgcdc.whl` is enough for them: none of the producer's
    dependencies is needed on the cluster's nodes."""
    import subprocess
    import sys

    blocked = ("authlib", "confluent_kafka", "fastavro", "psycopg", "httpx", "yaml",
               "prometheus_client", "deltalake", "pyarrow", "delta")
    code = ("import sys\n"
            f"for name in {blocked!r}: sys.modules[name] = None\n"
            "import spark_jobs.events.debezium\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]
