"""Arrays of any element type and any number of dimensions, as nested lists.

A NULL element is ``None``; an empty array is ``[]``. PostgreSQL's lower bounds (the
``[0:2]=`` prefix of arrays not starting at 1) are not kept: Python lists start at 0.
"""

from __future__ import annotations

import re
import struct
from functools import lru_cache
from typing import Any

from connector.errors import CdcError

from . import oids
from ._base import BinaryLoader, TextLoader, bad_value
from ._struct import INT4, error

MAXDIM = 6
_ARRAY_HEAD = INT4  # ndim; then flags and element type
_unpack_int4_from = INT4.unpack_from
_unescape = re.compile(r"\\(.)", re.DOTALL)
#: array_isspace: the only characters array_in skips (and array_out quotes)
_SPACE = " \t\n\r\v\f"


@lru_cache(maxsize=8)
def _tokenizer(delimiter: str) -> re.Pattern[str]:
    d = re.escape(delimiter)
    space = _SPACE
    return re.compile(
        rf'[{space}]*(?:(\{{)|(\}})|({d})|"((?:[^"\\]|\\.)*)"'
        rf'|((?:[^{d}{{}}"\\{space}]|\\.)(?:[^{d}{{}}"\\]|\\.)*))',
        re.DOTALL,
    )


def _parse_text(data: str, load: TextLoader, delimiter: str, rectangular: bool = True
                ) -> list[Any]:
    """array_in's grammar, over what array_out prints (quoting, backslash escapes, NULL)."""
    pos = 0
    if data.startswith("["):  # explicit bounds: [1:2][0:1]={...}
        pos = data.find("=") + 1
        if pos == 0:
            raise ValueError("dimension decoration without '='")
    token = _tokenizer(delimiter).match
    root: list[Any] | None = None
    stack: list[list[Any]] = []
    current: list[Any] | None = None
    expect_item = True  # after '{' or a delimiter; False after an element or '}'
    size = len(data)
    while pos < size:
        match = token(data, pos)
        if match is None:
            if not data[pos:].strip(_SPACE):
                break
            raise ValueError(f"unexpected character at position {pos}")
        pos = match.end()
        opening, closing, delim, quoted, bare = match.groups()
        if opening:
            if not expect_item or (current is None and root is not None):
                raise ValueError(f"unexpected '{{' at position {match.start()}")
            new: list[Any] = []
            if current is None:
                root = new
            else:
                current.append(new)
                stack.append(current)
            current = new
        elif closing:
            if current is None or (expect_item and current):
                raise ValueError(f"unexpected '}}' at position {match.start()}")
            current = stack.pop() if stack else None
            expect_item = False
            continue
        elif delim:
            if expect_item or current is None:
                raise ValueError(f"unexpected delimiter at position {match.start()}")
            expect_item = True
            continue
        elif current is None or not expect_item:
            raise ValueError(f"unexpected element at position {match.start()}")
        elif quoted is not None:
            current.append(load(_unescape.sub(r"\1", quoted) if "\\" in quoted else quoted))
        else:
            bare = bare.rstrip(_SPACE)
            if bare.upper() == "NULL":
                current.append(None)
            else:
                current.append(load(_unescape.sub(r"\1", bare) if "\\" in bare else bare))
        expect_item = opening is not None
    if root is None or current is not None:
        raise ValueError("unbalanced braces")
    if rectangular:
        _shape(root)
    return root


def _shape(node: list[Any]) -> tuple[int, ...]:
    """The dimensions of a nested list; ValueError unless it is rectangular, as arrays are."""
    if not node:
        return (0,)
    nested = [isinstance(item, list) for item in node]
    if not any(nested):
        return (len(node),)
    if not all(nested):
        raise ValueError("sub-arrays mixed with elements")
    shapes = {_shape(item) for item in node}
    if len(shapes) != 1:
        raise ValueError("sub-arrays of different dimensions")
    return (len(node), *shapes.pop())


_SPECIAL = re.compile(r'[{}"\\]')


def array_text_loader(element: TextLoader, type_name: str, delimiter: str = ",",
                      nested: bool = False) -> TextLoader:
    """Text-format loader of an array type whose elements ``element`` loads.

    ``nested``: the elements are arrays themselves (an array of an array domain, of
    ``oidvector``...), each its own length: the result is not checked to be rectangular."""
    rectangular = not nested
    special = _SPECIAL.search

    def load(data: str) -> list[Any]:
        # the common case: one dimension, nothing quoted or escaped
        if data[:1] == "{" and data[-1:] == "}":
            inner = data[1:-1]
            if not inner:
                return []
            if special(inner) is None:
                items = inner.split(delimiter)
                if "" not in items:
                    if "NULL" in items:
                        return [None if item == "NULL" else element(item) for item in items]
                    return list(map(element, items))
        try:
            return _parse_text(data, element, delimiter, rectangular)
        except ValueError as exc:
            raise bad_value(type_name, data, str(exc)) from None

    return load


def vector_text_loader(element: TextLoader, type_name: str) -> TextLoader:
    """Text-format loader of ``int2vector`` / ``oidvector``: elements separated by spaces
    (``1 2 3``; empty: ``""``), never quoted nor NULL (int2vectorout, oidvectorout)."""

    def load(data: str) -> list[Any]:
        try:
            return [element(item) for item in data.split()]
        except CdcError as exc:
            raise bad_value(type_name, data, str(exc)) from None

    return load


_DIMS = [struct.Struct(f">{2 * ndim}i").unpack_from for ndim in range(MAXDIM + 1)]

#: struct codes of the element types whose binary value is one fixed-size integer or double:
#: arrays of them without NULLs are unpacked in one call
FIXED_WIDTH = {oids.INT2: "h", oids.INT4: "i", oids.INT8: "q", oids.FLOAT8: "d", oids.OID: "I"}


def array_binary_loader(
    element: BinaryLoader, type_name: str, fixed: str | None = None
) -> BinaryLoader:
    """array_send: int32 ndim, int32 has-nulls flag, uint32 element type, (int32 size,
    int32 lower bound) per dimension, then each element as int32 length (-1: NULL) + bytes.

    ``fixed``: the struct code of the element when it is in :data:`FIXED_WIDTH`.
    """
    unpack_int4_from = _unpack_int4_from
    pair = f"i{fixed}" if fixed else ""
    size = struct.calcsize(f">{fixed}") if fixed else 0
    unpack_from = struct.unpack_from

    def load(data: bytes) -> list[Any]:
        try:
            ndim: int = unpack_int4_from(data)[0]
            if ndim == 0:
                if len(data) != 12:
                    raise ValueError("an empty array has no dimensions nor elements")
                return []
            if not 0 < ndim <= MAXDIM:
                raise ValueError(f"{ndim} dimensions")
            dims = _DIMS[ndim](data, 12)[::2]
            total = 1
            for dim in dims:
                if dim < 0:
                    raise ValueError(f"dimension of size {dim}")
                total *= dim
            pos = 12 + 8 * ndim
            end = len(data)
            if total > end - pos:  # every element takes 4 bytes at least
                raise ValueError(f"{total} elements do not fit {end} bytes")
            if size and total and end - pos == total * (4 + size):
                values = unpack_from(f">{pair * total}", data, pos)
                if values[0::2].count(size) == total:  # no NULL: every length is the size
                    items: list[Any] = list(values[1::2])
                    pos = end
            if pos != end:
                items = []
                append = items.append
                for _ in range(total):
                    length: int = unpack_int4_from(data, pos)[0]
                    pos += 4
                    if length < 0:
                        if length != -1:
                            raise ValueError(f"element length {length}")
                        append(None)
                        continue
                    stop = pos + length
                    if stop > end:
                        raise ValueError(f"element of {length} bytes past the end")
                    append(element(data[pos:stop]))
                    pos = stop
                if pos != end:
                    raise ValueError(f"{end - pos} bytes after the last element")
            if not total:
                return []
        except (error, ValueError) as exc:
            reason = "truncated" if isinstance(exc, error) else str(exc)
            raise bad_value(type_name, data, reason) from None
        for dim in reversed(dims[1:]):
            items = [items[i : i + dim] for i in range(0, len(items), dim)]
        return items

    return load
