"""Find a Java 17+ runtime for Kafka and the registry."""

import os
import re
import shutil
import subprocess

from .errors import StackError


def java() -> str:
    home = os.environ.get("JAVA_HOME")
    exe = os.path.join(home, "bin", "java") if home else shutil.which("java")
    if not exe or not os.path.exists(exe):
        raise StackError("Java not found; install a JDK 17+ "
                         "(apt-get install openjdk-17-jdk-headless)")
    out = subprocess.run([exe, "-version"], capture_output=True, text=True).stderr
    match = re.search(r'version "(\d+)', out)
    if not match or int(match.group(1)) < 17:
        raise StackError(f"Java 17+ is required, found: {out.splitlines()[0] if out else exe}")
    return exe
