"""Zero-copy protobuf framing for the file-data messages.

A 1 MiB data message otherwise costs three copies on the way in (grpc's
buffer to bytes, bytes to the protobuf message, the message's field to a
new bytes) and three on the way out, each touching fresh memory. These
helpers read the data field as a memoryview of the message grpc handed
over, and write a data-only message as a header plus the caller's buffer.
Every other field still goes through the generated classes.
"""

from __future__ import annotations

from typing import Any, Callable, Optional, Tuple

_LEN = 2  # wire type: length-delimited


def _varint(buf: memoryview, i: int) -> Tuple[int, int]:
    shift = result = 0
    while True:
        if i >= len(buf):
            raise ValueError("truncated varint")
        b = buf[i]
        i += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, i
        shift += 7
        if shift > 63:
            raise ValueError("varint too long")


def _encode_varint(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def data_message(field: int, chunk: Any) -> bytes:
    """A message whose only field is bytes field number `field`."""
    return b"".join((_encode_varint(field << 3 | _LEN), _encode_varint(len(chunk)), chunk))


class Split:
    """A received message: `data` is a memoryview of the bytes field, `rest`
    the message parsed from every other field (None if there were none)."""

    __slots__ = ("data", "rest")

    def __init__(self, data: Optional[memoryview], rest: Any) -> None:
        self.data = data
        self.rest = rest


def splitter(cls: Any, field: int) -> Callable[[bytes], Split]:
    """A response deserializer that keeps bytes field `field` as a view and
    parses the remaining fields with the generated class `cls`."""

    def parse(raw: bytes) -> Split:
        buf = memoryview(raw)
        i, n = 0, len(buf)
        data: Optional[memoryview] = None
        others: list = []
        while i < n:
            start = i
            key, i = _varint(buf, i)
            wt = key & 7
            if wt == 0:
                _, i = _varint(buf, i)
            elif wt == 1:
                i += 8
            elif wt == 5:
                i += 4
            elif wt == _LEN:
                ln, i = _varint(buf, i)
                if i + ln > n:
                    raise ValueError("truncated length-delimited field")
                if key >> 3 == field:
                    data = buf[i:i + ln]
                    i += ln
                    continue
                i += ln
            else:
                raise ValueError(f"unsupported wire type {wt}")
            if i > n:
                raise ValueError("truncated message")
            others.append(buf[start:i])
        rest = cls.FromString(b"".join(others)) if others else None
        return Split(data, rest)

    return parse
