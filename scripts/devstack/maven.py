"""Resolve jars and archives from Maven Central into the stack cache (once; offline after)."""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import tarfile
import tempfile
import zipfile
from pathlib import Path

from .errors import StackError

JARS_DIR = Path(__file__).resolve().parent.parent / "jars"


def _maven_home() -> Path:
    mvn = shutil.which("mvn")
    if mvn is None:
        raise StackError("Maven (mvn) not found; install it (apt-get install maven) and retry")
    return Path(os.path.realpath(mvn)).parent.parent


def _central_url() -> str:
    """Maven Central's address, read from Maven's own super POM (so none is hard-coded)."""
    for jar in (_maven_home() / "lib").glob("maven-model-builder-*.jar"):
        with zipfile.ZipFile(jar) as zf:
            pom = zf.read("org/apache/maven/model/pom-4.0.0.xml").decode()
        match = re.search(r"<url>(.*?)</url>", pom)
        if match:
            return match.group(1)
    raise StackError("cannot find Maven's super POM to read the central repository URL")


def _settings(cache: Path) -> Path:
    """Route every repository a POM declares (some name unreachable mirrors) to Central."""
    path = cache / "maven-settings.xml"
    if not path.exists():
        cache.mkdir(parents=True, exist_ok=True)
        path.write_text(
            "<settings><mirrors><mirror><id>central-only</id><mirrorOf>*</mirrorOf>"
            f"<url>{_central_url()}</url></mirror></mirrors></settings>\n"
        )
    return path


def _mvn(cache: Path, args: list[str], what: str) -> None:
    cmd = ["mvn", "-B", "-q", "-s", str(_settings(cache)), *args]
    result = subprocess.run(cmd, capture_output=True, text=True)
    if result.returncode != 0:
        errors = [ln for ln in result.stdout.splitlines() if "[ERROR]" in ln] or ["(no output)"]
        raise StackError(
            f"Maven could not resolve {what}: {errors[0].replace('[ERROR] ', '')[:300]} "
            "(is Maven Central reachable? a proxy goes in ~/.m2/settings.xml)"
        )


def pom_dir(cache: Path, pom_name: str) -> Path:
    """Where `resolve_pom` puts the jars of scripts/jars/<pom_name> (resolved or not yet)."""
    digest = hashlib.sha256((JARS_DIR / pom_name).read_bytes()).hexdigest()[:12]
    return cache / f"{pom_name.removesuffix('.pom.xml')}-{digest}"


def resolve_pom(cache: Path, pom_name: str) -> Path:
    """Copy the runtime dependencies of scripts/jars/<pom_name> into cache/<stem>-<hash>/.

    The directory is named by the POM's content, so editing a POM resolves it afresh (a cache
    made from an older POM is never taken for it), and worktrees with different POMs sharing
    one cache do not disturb each other. Resolution goes to a private temporary directory,
    renamed into place when complete: concurrent resolvers of one POM cannot see half a set.
    """
    pom = JARS_DIR / pom_name
    out = pom_dir(cache, pom_name)
    if (out / ".complete").exists():
        return out
    cache.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f"{out.name}.", suffix=".partial", dir=cache))
    tmp.chmod(0o755)  # as a plain directory would be (mkdtemp makes it private)
    try:
        _mvn(cache, ["-f", str(pom), "dependency:copy-dependencies",
                     f"-DoutputDirectory={tmp}", "-DincludeScope=runtime"],
             f"{pom_name.removesuffix('.pom.xml')} jars")
        (tmp / ".complete").touch()
        try:
            tmp.rename(out)  # only ever a complete set is renamed into place
        except OSError:
            if not (out / ".complete").exists():  # else a concurrent resolver was first
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return out


def resolve_archive(cache: Path, coordinate: str, name: str) -> Path:
    """Download a tar.gz artifact (group:artifact:version:tar.gz:classifier) and unpack it."""
    out = cache / name
    if (out / ".complete").exists():
        return out
    download = cache / f"{name}.download"
    shutil.rmtree(download, ignore_errors=True)
    _mvn(cache, ["dependency:copy", f"-Dartifact={coordinate}",
                 f"-DoutputDirectory={download}"], coordinate)
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    for archive in download.glob("*.tar.gz"):
        with tarfile.open(archive) as tar:
            tar.extractall(out, filter="data")
    shutil.rmtree(download)
    (out / ".complete").touch()
    return out
