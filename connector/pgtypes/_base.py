"""What every loader module shares: the loader signatures and the error they raise."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeAlias

from connector.errors import DecodeError

#: Turns one value of the text format (pgoutput tuple kind ``t``) into a Python value.
TextLoader: TypeAlias = Callable[[str], Any]
#: Turns one value of the binary format (kind ``b``: the type's send function output) into one.
BinaryLoader: TypeAlias = Callable[[bytes], Any]

_SHOWN = 48


def bad_value(type_name: str, data: str | bytes, reason: str) -> DecodeError:
    """The error every loader raises for a malformed value: names the type and shows the value."""
    fmt = "binary" if isinstance(data, bytes | bytearray | memoryview) else "text"
    raw = bytes(data) if isinstance(data, bytearray | memoryview) else data
    shown = repr(raw[:_SHOWN]) + ("..." if len(raw) > _SHOWN else "")
    return DecodeError(f"invalid {type_name} value in {fmt} format {shown}: {reason}")


def identity(data: str) -> str:
    """Text-format loader of the string types: the value as sent."""
    return data


def utf8(type_name: str) -> BinaryLoader:
    """Binary-format loader of types whose send form is their text (text, enum, xml, json...)."""

    def load(data: bytes) -> str:
        try:
            return data.decode()
        except UnicodeDecodeError as exc:
            raise bad_value(type_name, data, f"not UTF-8 ({exc.reason})") from None

    return load
