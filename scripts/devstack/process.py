"""Background processes with pid files, so `down` stops exactly what `up` started."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from .errors import StackError


def as_service_user() -> list[str]:
    """PostgreSQL refuses to run as root: run it as the `postgres` user when we are root."""
    if os.geteuid() != 0:
        return []
    return ["runuser", "-u", "postgres", "--"]


def chown_to_service_user(path: Path) -> None:
    if os.geteuid() == 0:
        import pwd

        entry = pwd.getpwnam("postgres")
        for root, dirs, files in os.walk(path):
            os.chown(root, entry.pw_uid, entry.pw_gid)
            for name in dirs + files:
                os.chown(os.path.join(root, name), entry.pw_uid, entry.pw_gid)


def run(cmd: Sequence[str], what: str, log: Path | None = None, **kwargs: object) -> None:
    """Run a command to completion; on failure raise one line naming the step and its log."""
    try:
        result = subprocess.run(list(cmd), capture_output=True, text=True, **kwargs)  # type: ignore[call-overload]
    except FileNotFoundError as exc:
        raise StackError(f"{what}: {exc.filename} not found") from None
    if result.returncode != 0:
        detail = (result.stderr or result.stdout).strip().splitlines()
        last = detail[-1] if detail else f"exit code {result.returncode}"
        if log is not None:
            log.write_text(result.stdout + result.stderr)
            last += f" (full output: {log})"
        raise StackError(f"{what} failed: {last}")


def start(cmd: Sequence[str], pid_file: Path, log_file: Path, env: dict[str, str] | None = None,
          cwd: Path | None = None) -> int:
    log_file.parent.mkdir(parents=True, exist_ok=True)
    with open(log_file, "ab") as log:
        try:
            proc = subprocess.Popen(
                list(cmd), stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                env=env, cwd=cwd, start_new_session=True,
            )
        except FileNotFoundError as exc:
            raise StackError(f"cannot start {cmd[0]}: {exc.filename} not found") from None
    pid_file.write_text(str(proc.pid))
    return proc.pid


def read_pid(pid_file: Path) -> int | None:
    try:
        pid = int(pid_file.read_text().strip())
    except (FileNotFoundError, ValueError):
        return None
    return pid if alive(pid) else None


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie counts as dead: reap it if it is our child, else read its state (a container's
    # init may never reap processes orphaned by an earlier `scripts/stack up`).
    try:
        if os.waitpid(pid, os.WNOHANG)[0] != 0:
            return False
    except ChildProcessError:
        pass
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, IndexError):
        return True


def stop(pid_file: Path, timeout: float = 30.0) -> bool:
    """SIGTERM the process group, SIGKILL after `timeout`; True if something was stopped."""
    pid = read_pid(pid_file)
    pid_file.unlink(missing_ok=True)
    if pid is None:
        return False
    for sig, wait in ((signal.SIGTERM, timeout), (signal.SIGKILL, 10.0)):
        try:
            os.killpg(pid, sig)
        except ProcessLookupError:
            return True
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            if not alive(pid):
                return True
            time.sleep(0.1)
    return True


def wait_until(check: Callable[[], bool], service: str, timeout: float, log_file: Path,
               pid: int | None = None) -> None:
    """Poll `check` until true; fail naming the service and its log if it dies or times out."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if check():
                return
        except Exception:  # noqa: BLE001 - any failure of a readiness probe means "not yet"
            pass
        if pid is not None and not alive(pid):
            raise StackError(f"{service} exited during startup; see its log: {log_file}")
        time.sleep(0.5)
    raise StackError(f"{service} did not answer within {timeout:.0f}s; see its log: {log_file}")
