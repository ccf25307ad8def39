"""The spark-submit command `pgcdc merge` runs."""

from __future__ import annotations

from pathlib import Path

import pytest

from spark_jobs import submit


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


def test_jars_resolved_from_the_checkout_cache(spark_jar_paths: list[Path]) -> None:
    jars = submit.resolve_jars({})
    assert sorted(jars) == sorted(str(p) for p in spark_jar_paths)
    assert any("delta-spark" in j for j in jars) and any("spark-avro" in j for j in jars)


def test_spark_submit_binary() -> None:
    assert submit.spark_submit_binary({"SPARK_HOME": "/opt/spark"}) == "/opt/spark/bin/spark-submit"
    assert Path(submit.spark_submit_binary({})).name == "spark-submit"


def test_main_reports_a_missing_jar_list(monkeypatch: pytest.MonkeyPatch,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    def fail(env: object = None) -> list[str]:
        raise submit.SubmitError("set PGCDC_SPARK_JARS")
    monkeypatch.setattr(submit, "resolve_jars", fail)
    assert submit.main(["--help"]) == 2
    assert "pgcdc merge: set PGCDC_SPARK_JARS" in capsys.readouterr().err
