"""Precompiled struct unpackers shared by the binary loaders (network byte order)."""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any, TypeAlias

Unpack: TypeAlias = Callable[[bytes], tuple[Any, ...]]
UnpackFrom: TypeAlias = Callable[..., tuple[Any, ...]]

INT2 = struct.Struct(">h")
INT4 = struct.Struct(">i")
INT8 = struct.Struct(">q")
UINT4 = struct.Struct(">I")
UINT8 = struct.Struct(">Q")
FLOAT4 = struct.Struct(">f")
FLOAT8 = struct.Struct(">d")

unpack_int2: Unpack = INT2.unpack
unpack_int4: Unpack = INT4.unpack
unpack_int8: Unpack = INT8.unpack
unpack_uint4: Unpack = UINT4.unpack
unpack_uint8: Unpack = UINT8.unpack
unpack_float4: Unpack = FLOAT4.unpack
unpack_float8: Unpack = FLOAT8.unpack
unpack_int4_from: UnpackFrom = INT4.unpack_from
unpack_uint4_from: UnpackFrom = UINT4.unpack_from

error = struct.error
