"""Build and run the spark-submit command of the merge job, as a well-behaved process.

`pgcdc merge [SPARK OPTIONS] JOB ARGS...` calls `main(ARGS)`; `python -m
spark_jobs.runtime.submit` does the same. spark-submit's own options are taken here, in any
order among the job's: `--master`, `--conf K=V` (repeatable), `--driver-memory`, `--jars`,
`--packages` with pgcdc's defaults, and the others of `SPARK_SUBMIT_OPTIONS` /
`SPARK_SUBMIT_FLAGS` (`--deploy-mode`, `--py-files`, `--executor-memory`, ...) handed to
spark-submit unchanged; everything else belongs to the job (spark_jobs/runtime/config.py, whose
option names none of these share).

`DEFAULT_CONF` is passed as `--conf`, which wins over spark-defaults.conf: a user's `--conf`
of the same key replaces it, and so does a key set in the `--properties-file` given here.

Connectors follow Spark's convention: `--packages` with the coordinates below, resolved by Spark's
Ivy from Maven Central. Offline, `--jars` or `PGCDC_SPARK_JARS` (comma- or path-separated) names
the jars instead and no resolution happens.
"""

from __future__ import annotations

import argparse
import fcntl
import importlib.util
import os
import re
import shutil
import signal
import stat
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import FrameType
from typing import Any

MERGE_SCRIPT = Path(__file__).resolve().parent.parent / "merge.py"
LOG4J_CONFIG = Path(__file__).resolve().parent.parent / "log4j2.properties"
JARS_ENV = "PGCDC_SPARK_JARS"

# For pyspark 4.2.0 (Scala 2.13). Maven Central has no spark-avro 4.2.0, token-provider 4.2.0 or
# delta-spark_4.2 4.4.1: these are the nearest published versions that work with it (the same
# set scripts/jars/spark.pom.xml resolves for tests).
SPARK_PACKAGES = (
    "io.delta:delta-spark_4.2_2.13:4.4.0",
    "org.apache.spark:spark-sql-kafka-0-10_2.13:4.2.0",
    "org.apache.spark:spark-token-provider-kafka-0-10_2.13:4.0.0",
    "org.apache.spark:spark-avro_2.13:4.1.1",
    # S3A (s3a:// lakes): hadoop-aws of pyspark 4.2's Hadoop (3.5.0) and the AWS SDK v2 modules
    # it loads, in place of the SDK's 690 MB bundle (excluded below; why these: spark.pom.xml).
    "org.apache.hadoop:hadoop-aws:3.5.0",
    "software.amazon.awssdk:s3:2.35.4",
    "software.amazon.awssdk:s3-transfer-manager:2.35.4",
    "software.amazon.awssdk:sts:2.35.4",  # web identity (EKS) and assumed-role credentials
)

# Left out of the resolution (`--exclude-packages`): the SDK bundle, what S3A does not use, and
# libraries pyspark ships in other versions (two versions of one library on a classpath break
# Spark). The same set scripts/jars/spark.pom.xml and scripts/devstack/spark.py leave out.
SPARK_EXCLUDE_PACKAGES = (
    "software.amazon.awssdk:bundle",
    "software.amazon.awssdk:crt-core",
    "software.amazon.awssdk:http-auth-aws-eventstream",
    "software.amazon.eventstream:eventstream",
    "org.wildfly.openssl:wildfly-openssl",
    "commons-logging:commons-logging",
    "commons-codec:commons-codec",
    "org.apache.httpcomponents:httpclient",
    "org.apache.httpcomponents:httpcore",
    "org.slf4j:slf4j-api",
    # Annotations only; pyspark ships 3.0.0. Resolved through Ivy it breaks `--packages` for
    # anyone whose ~/.m2 holds its POM without the jar (Maven fetches POMs it mediates away):
    # Spark's local-m2-cache resolver finds the POM, then fails "download failed: jsr305.jar".
    "com.google.code.findbugs:jsr305",
    *(f"io.netty:netty-{name}" for name in (
        "buffer", "codec", "codec-http", "codec-http2", "common", "handler", "resolver",
        "transport", "transport-classes-epoll", "transport-native-unix-common")),
)

# spark-submit's options (`spark-submit --help`) that take a value, passed through as given.
# --driver-java-options is one: pgcdc's own (the log4j configuration) is put before it.
SPARK_SUBMIT_OPTIONS = (
    "--deploy-mode", "--py-files", "--files", "--archives", "--properties-file",
    "--driver-java-options", "--driver-library-path", "--driver-class-path", "--driver-cores",
    "--executor-memory", "--executor-cores", "--num-executors", "--total-executor-cores",
    "--queue", "--principal", "--keytab", "--proxy-user", "--repositories",
)
# spark-submit's options without a value, passed through as given.
SPARK_SUBMIT_FLAGS = ("--supervise", "--verbose")

# Modest local defaults; a cluster user passes --master and --conf of their own (a
# `--conf spark.sql.shuffle.partitions=N` replaces the 4 here: docs/merge-cluster.md).
DEFAULT_MASTER = "local[2]"
DEFAULT_DRIVER_MEMORY = "2g"
DEFAULT_CONF = {
    "spark.sql.shuffle.partitions": "4",
    "spark.databricks.delta.snapshotPartitions": "2",
    "spark.ui.enabled": "false",
    "spark.sql.session.timeZone": "UTC",
}


class SubmitError(RuntimeError):
    pass


def resolve_jars(env: Mapping[str, str] | None = None) -> list[str]:
    """The jars named by PGCDC_SPARK_JARS; empty when unset (then --packages is used)."""
    env = os.environ if env is None else env
    listed = env.get(JARS_ENV, "").strip()
    sep = "," if "," in listed else os.pathsep
    return [j.strip() for j in listed.split(sep) if j.strip()]


def spark_submit_binary(env: Mapping[str, str] | None = None) -> str:
    env = os.environ if env is None else env
    if env.get("SPARK_HOME"):
        return str(Path(env["SPARK_HOME"]) / "bin" / "spark-submit")
    beside = Path(sys.executable).parent / "spark-submit"  # pyspark's, in this venv
    if beside.exists():
        return str(beside)
    found = shutil.which("spark-submit")
    if not found:
        raise SubmitError("spark-submit not found: install pyspark or set SPARK_HOME")
    return found


def properties_keys(path: str | Path) -> set[str]:
    """The keys a Spark properties file sets (`key value` or `key=value` lines; `#` and `!`
    comments), read as spark-submit reads `--properties-file`; empty when unreadable (then
    spark-submit itself reports it)."""
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError):
        return set()
    keys = set()
    for line in lines:
        text = line.strip()
        if text and not text.startswith(("#", "!")):
            keys.add(re.split(r"[\s=:]", text, maxsplit=1)[0])
    return keys


def _option_value(args: Sequence[str], option: str) -> str | None:
    """The last value of `option` in a spark-submit argument list (spark-submit's own rule)."""
    found = None
    for i, arg in enumerate(args):
        if arg == option and i + 1 < len(args):
            found = args[i + 1]
        elif arg.startswith(option + "="):
            found = arg.partition("=")[2]
    return found


def spark_submit_command(job_args: Sequence[str], jars: Sequence[str] | None = None,
                         master: str | None = DEFAULT_MASTER,
                         driver_memory: str | None = DEFAULT_DRIVER_MEMORY,
                         conf: Mapping[str, str] | None = None,
                         spark_submit: str | None = None,
                         packages: Sequence[str] | None = None,
                         spark_args: Sequence[str] = ()) -> list[str]:
    """`spark-submit (--jars J | --packages P --exclude-packages X) [--master M] [--conf k=v]...
    [SPARK_ARGS...] merge.py ARGS`.

    `spark_args` are spark-submit options handed through unchanged (`--py-files F`,
    `--deploy-mode cluster`, ...). `conf` wins over `DEFAULT_CONF`, and a key that the
    `--properties-file` among `spark_args` sets is not given a default either. A
    `--driver-java-options` among them keeps pgcdc's log4j setting in front of its own."""
    cmd = [spark_submit or spark_submit_binary()]
    jars = resolve_jars() if jars is None else jars
    if jars:
        cmd += ["--jars", ",".join(jars)]
    else:
        cmd += ["--packages", ",".join(packages or SPARK_PACKAGES),
                "--exclude-packages", ",".join(SPARK_EXCLUDE_PACKAGES)]
    if master:
        cmd += ["--master", master]
    if driver_memory:
        cmd += ["--driver-memory", driver_memory]
    # Spark's INFO start-up chatter would bury the job's own lines; WARN unless the user says
    # (a -Dlog4j2.configurationFile of theirs comes later in the line, and the JVM takes it).
    java_options = f"-Dlog4j2.configurationFile=file:{LOG4J_CONFIG}"
    theirs = _option_value(spark_args, "--driver-java-options")
    cmd += ["--driver-java-options", f"{java_options} {theirs}" if theirs else java_options]
    properties = _option_value(spark_args, "--properties-file")
    preset = properties_keys(properties) if properties else set()
    defaults = {k: v for k, v in DEFAULT_CONF.items() if k not in preset}
    for key, value in {**defaults, **(conf or {})}.items():
        cmd += ["--conf", f"{key}={value}"]
    rest = _without_option(spark_args, "--driver-java-options")
    return [*cmd, *rest, str(MERGE_SCRIPT), *job_args]


def _without_option(args: Sequence[str], option: str) -> list[str]:
    """`args` without any `option VALUE` / `option=VALUE` pair."""
    out: list[str] = []
    skip = False
    for arg in args:
        if skip:
            skip = False
        elif arg == option:
            skip = True
        elif not arg.startswith(option + "="):
            out.append(arg)
    return out


def pyspark_home() -> str | None:
    """pyspark's own Spark distribution, found without importing pyspark."""
    spec = importlib.util.find_spec("pyspark")
    return str(Path(spec.origin).parent) if spec and spec.origin else None


def submit_env(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment: Python workers run the same interpreter as this process, and
    spark-submit finds its distribution even when this venv's bin/ is not on PATH."""
    out = dict(os.environ if env is None else env)
    home = pyspark_home()
    if home and not out.get("SPARK_HOME"):
        out["SPARK_HOME"] = home
    out.setdefault("PYSPARK_PYTHON", sys.executable)
    out.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    return out


def _conf_pair(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"--conf wants KEY=VALUE, got {text!r}")
    return key, value


class _PassThrough(argparse.Action):
    """Collects a spark-submit option, with its value if it takes one, in `spark_args`."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: Any, option_string: str | None = None) -> None:
        collected = list(getattr(namespace, self.dest) or [])
        collected.append(str(option_string))
        if isinstance(values, str):
            collected.append(values)
        setattr(namespace, self.dest, collected)


def spark_options_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="pgcdc merge", add_help=False,
        description="Spark options of `pgcdc merge`; the rest go to the job.")
    p.add_argument("--master", default=DEFAULT_MASTER,
                   help=f"Spark master (default {DEFAULT_MASTER})")
    p.add_argument("--conf", action="append", type=_conf_pair, default=[], metavar="KEY=VALUE",
                   help="a Spark property (repeatable); replaces pgcdc's default of the same "
                        "key (spark.sql.shuffle.partitions=4, ...)")
    p.add_argument("--driver-memory", default=DEFAULT_DRIVER_MEMORY,
                   help=f"driver memory (default {DEFAULT_DRIVER_MEMORY})")
    p.add_argument("--jars", help=f"comma-separated connector jars (offline; or ${JARS_ENV})")
    p.add_argument("--packages", help="Maven coordinates instead of the built-in ones")
    for option in SPARK_SUBMIT_OPTIONS:
        p.add_argument(option, dest="spark_args", action=_PassThrough, default=[],
                       metavar="VALUE", help="spark-submit's own, passed to it as given")
    for flag in SPARK_SUBMIT_FLAGS:
        p.add_argument(flag, dest="spark_args", action=_PassThrough, nargs=0,
                       help="spark-submit's own, passed to it as given")
    p.add_argument("-h", "--help", action="store_true")
    return p


def print_help() -> None:
    """Both parsers' help, without starting a JVM (spark_jobs.runtime.config imports no pyspark)."""
    from spark_jobs.runtime.config import parser

    spark_options_parser().print_help()
    print()
    parser("pgcdc merge").print_help()


def append_to_files(fds: Sequence[int] = (1, 2)) -> None:
    """Give our stdout and stderr O_APPEND when they are regular files (a shell's `> log`).

    spark-submit's JVM and the job's Python driver write the same file through different open
    files (spark_jobs/runtime/console.py): without O_APPEND each writes at its own offset, and
    Spark's log4j lines overwrite the job's. With it every write lands at the end of the file. The
    flag is on the open file the shell made for this command; nothing else changes for it."""
    for fd in fds:
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                continue  # a terminal, a pipe, /dev/null: no offsets to clash
            flags = fcntl.fcntl(fd, fcntl.F_GETFL)
            if not flags & os.O_APPEND:
                fcntl.fcntl(fd, fcntl.F_SETFL, flags | os.O_APPEND)
        except OSError:
            continue  # closed, or a file system that refuses: write as before


def run(cmd: Sequence[str], env: Mapping[str, str]) -> int:
    """Run spark-submit in its own process group; SIGTERM/SIGINT reach every JVM it started."""
    proc = subprocess.Popen(list(cmd), env=dict(env), start_new_session=True)

    def forward(signum: int, frame: FrameType | None) -> None:
        try:
            os.killpg(proc.pid, signum)
        except ProcessLookupError:
            pass

    previous = {s: signal.signal(s, forward) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        code = proc.wait()
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
    return 128 - code if code < 0 else code  # killed by signal N: the shell's 128+N


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    options, job_args = spark_options_parser().parse_known_args(args)
    if options.help:
        print_help()
        return 0
    from spark_jobs.runtime.config import parse_args

    parse_args(job_args, prog="pgcdc merge")  # a usage error in a second, before any JVM
    try:
        jars = options.jars.split(",") if options.jars else resolve_jars()
        packages = options.packages.split(",") if options.packages else None
        cmd = spark_submit_command(job_args, jars=jars, master=options.master,
                                   driver_memory=options.driver_memory,
                                   conf=dict(options.conf), packages=packages,
                                   spark_args=options.spark_args)
    except SubmitError as exc:
        print(f"pgcdc merge: {exc}", file=sys.stderr)
        return 2
    sys.stdout.flush()
    sys.stderr.flush()
    append_to_files()
    return run(cmd, submit_env())


if __name__ == "__main__":
    sys.exit(main())
