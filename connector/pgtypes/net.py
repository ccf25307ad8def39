"""Network address types: inet, cidr (as :mod:`ipaddress` objects), macaddr, macaddr8 (str).

inet with a full-length prefix (``/32``, ``/128``, which PostgreSQL does not print) is an
``IPv4Address``/``IPv6Address``, otherwise an ``IPv4Interface``/``IPv6Interface``; cidr is an
``IPv4Network``/``IPv6Network``. ``address_text()`` of each gives PostgreSQL's text (``str()``
does too, except for IPv6 addresses with an embedded IPv4 one: Python 3.11 prints
``::ffff:102:304`` where PostgreSQL prints ``::ffff:1.2.3.4``).
"""

from __future__ import annotations

import struct
from ipaddress import (
    IPv4Address,
    IPv4Interface,
    IPv4Network,
    IPv6Address,
    IPv6Interface,
    IPv6Network,
    ip_address,
    ip_interface,
    ip_network,
)

from . import oids
from ._base import BinaryLoader, TextLoader, bad_value

_V4_IN_V6 = struct.Struct(">6H4B")

InetValue = IPv4Address | IPv6Address | IPv4Interface | IPv6Interface
CidrValue = IPv4Network | IPv6Network

PGSQL_AF_INET = 2
PGSQL_AF_INET6 = 3


def _ipv6_text(address: IPv6Address) -> str:
    """PostgreSQL's text of an IPv6 address (its inet_net_ntop): Python's compressed form, but
    IPv4-compatible ``::a.b.c.d`` and IPv4-mapped ``::ffff:a.b.c.d`` in dotted form."""
    *words, a, b, c, d = _V4_IN_V6.unpack(address.packed)
    if words[:5] == [0, 0, 0, 0, 0] and (words[5] == 0xFFFF or (words[5] == 0 and a | b)):
        return f"::{'ffff:' if words[5] else ''}{a}.{b}.{c}.{d}"
    return str(address)


def address_text(value: InetValue | CidrValue) -> str:
    """PostgreSQL's text of a loaded inet or cidr value."""
    if isinstance(value, IPv6Interface):  # before IPv6Address: it is a subclass
        return f"{_ipv6_text(value.ip)}/{value.network.prefixlen}"
    if isinstance(value, IPv6Address):
        return _ipv6_text(value)
    if isinstance(value, IPv6Network):
        return f"{_ipv6_text(value.network_address)}/{value.prefixlen}"
    return str(value)


def load_inet_text(data: str) -> InetValue:
    try:
        if "/" not in data:
            return ip_address(data)
        interface = ip_interface(data)
    except ValueError as exc:
        raise bad_value("inet", data, str(exc)) from None
    if interface.network.prefixlen == interface.max_prefixlen:
        return interface.ip
    return interface


def load_cidr_text(data: str) -> CidrValue:
    try:
        return ip_network(data)
    except ValueError as exc:
        raise bad_value("cidr", data, str(exc)) from None


def _inet_header(type_name: str, data: bytes) -> tuple[int, int, bytes]:
    """inet_send/cidr_send: family, bits, is_cidr, address length, address bytes."""
    if len(data) < 4:
        raise bad_value(type_name, data, "shorter than its 4-byte header")
    family, bits, _is_cidr, size = data[0], data[1], data[2], data[3]
    expected = 4 if family == PGSQL_AF_INET else 16 if family == PGSQL_AF_INET6 else 0
    if not expected:
        raise bad_value(type_name, data, f"unknown address family {family}")
    if size != expected or len(data) != 4 + size:
        raise bad_value(type_name, data, f"address of {len(data) - 4} bytes, expected {expected}")
    if bits > 8 * size:
        raise bad_value(type_name, data, f"prefix length {bits} is too long")
    return family, bits, data[4:]


def load_inet_binary(data: bytes) -> InetValue:
    family, bits, address = _inet_header("inet", data)
    if family == PGSQL_AF_INET:
        return IPv4Address(address) if bits == 32 else IPv4Interface((address, bits))
    return IPv6Address(address) if bits == 128 else IPv6Interface((address, bits))


def load_cidr_binary(data: bytes) -> CidrValue:
    family, bits, address = _inet_header("cidr", data)
    try:
        if family == PGSQL_AF_INET:
            return IPv4Network((address, bits))
        return IPv6Network((address, bits))
    except ValueError as exc:  # host bits set
        raise bad_value("cidr", data, str(exc)) from None


def load_macaddr_text(data: str) -> str:
    """PostgreSQL already prints the canonical ``08:00:2b:01:02:03``."""
    return data


def _mac_binary(type_name: str, size: int) -> BinaryLoader:
    def load(data: bytes) -> str:
        if len(data) != size:
            raise bad_value(type_name, data, f"expected {size} bytes, got {len(data)}")
        return data.hex(":")

    return load


load_macaddr_binary = _mac_binary("macaddr", 6)
load_macaddr8_binary = _mac_binary("macaddr8", 8)

TEXT_LOADERS: dict[int, TextLoader] = {
    oids.INET: load_inet_text,
    oids.CIDR: load_cidr_text,
    oids.MACADDR: load_macaddr_text,
    oids.MACADDR8: load_macaddr_text,
}

BINARY_LOADERS: dict[int, BinaryLoader] = {
    oids.INET: load_inet_binary,
    oids.CIDR: load_cidr_binary,
    oids.MACADDR: load_macaddr_binary,
    oids.MACADDR8: load_macaddr8_binary,
}
