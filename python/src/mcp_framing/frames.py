"""The frame layout of SPEC.md §2 and the frame kinds of §3."""

from __future__ import annotations

import struct
import zlib

__all__ = [
    "ABORT",
    "DATA",
    "HEAD",
    "HEADER",
    "HEADER_LEN",
    "KEEPALIVE",
    "MAGIC",
    "MESSAGE_END",
    "STREAM_END",
    "VERSION",
    "header_passes",
    "kind_name",
]

MAGIC = b"\x9f\x4d"
VERSION = 0x01
HEADER_LEN = 20
#: magic, version, kind, sequence, length, payload CRC, header CRC (all big-endian, §2).
HEADER = struct.Struct(">2sBBIIII")

HEAD = 0x01
DATA = 0x02
MESSAGE_END = 0x03
STREAM_END = 0x04
ABORT = 0x05
KEEPALIVE = 0x06

_NAMES = {
    HEAD: "HEAD",
    DATA: "DATA",
    MESSAGE_END: "MESSAGE_END",
    STREAM_END: "STREAM_END",
    ABORT: "ABORT",
    KEEPALIVE: "KEEPALIVE",
}


def kind_name(kind: int) -> str:
    """The name of a frame kind (§3).

    >>> kind_name(2), kind_name(0x80), kind_name(7)
    ('DATA', 'IGNORABLE(0x80)', 'UNKNOWN(0x07)')
    """
    if kind in _NAMES:
        return _NAMES[kind]
    return ("IGNORABLE(0x%02x)" if kind >= 0x80 else "UNKNOWN(0x%02x)") % kind


def header_passes(header: bytes) -> bool:
    """§2 checks 1 and 2 on a 20-byte header: magic, version, header CRC.

    >>> header_passes(bytes.fromhex("9f4d0101a1a2a3a4000000209306db06fe94f356"))
    True
    >>> header_passes(b"{}" + bytes(18))
    False
    """
    return (
        len(header) == HEADER_LEN
        and header[0:2] == MAGIC
        and header[2] == VERSION
        and zlib.crc32(header[0:16]) == int.from_bytes(header[16:20], "big")
    )
