"""Port helpers: pick free ports for tests, refuse taken ones with a clear message."""

import socket

from .errors import StackError


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def is_listening(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(0.5)
        return sock.connect_ex((host, port)) == 0


def ensure_free(port: int, service: str, env_name: str) -> None:
    if is_listening(port):
        raise StackError(
            f"{service}: port {port} is already taken by another process; "
            f"stop it or choose another port with {env_name}=<port>"
        )
