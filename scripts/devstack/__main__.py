"""scripts/stack up | down | status | env | fetch"""

from __future__ import annotations

import shlex
import sys

from .errors import StackError
from .stack import Stack

USAGE = "usage: scripts/stack up | down | status | env | fetch"


def main(argv: list[str]) -> int:
    if len(argv) != 1 or argv[0] not in {"up", "down", "status", "env", "fetch"}:
        print(USAGE, file=sys.stderr)
        return 2
    command = argv[0]
    try:
        stack = Stack.from_env()
        if command == "up":
            try:
                stack.up()
            except StackError:
                print("stack up failed; stopping what was started", file=sys.stderr)
                stack.down(log=lambda _msg: None)
                raise
            print("stack is up; run `eval \"$(scripts/stack env)\"` to use it")
        elif command == "down":
            stack.down()
        elif command == "fetch":
            stack.fetch()
            print("all artifacts are cached")
        elif command == "status":
            down = 0
            for name, service in stack.services():
                state = "running" if service.running() else "stopped"
                down += state == "stopped"
                print(f"{name:9} {state:8} log: {service.log_file}")
            return 1 if down else 0
        else:
            for key, value in stack.env().items():
                print(f"export {key}={shlex.quote(value)}")
    except StackError as exc:
        print(f"stack: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
