"""Compression codecs of Kafka record batches (attributes bits 0-2, spec §2.2).

* gzip   – a standard gzip stream (stdlib ``zlib``/``gzip``);
* snappy – Kafka's Java producer writes the *xerial* framing (magic ``\\x82SNAPPY\\x00``, two int32
  version fields, then blocks of int32 length + raw snappy block); other clients (librdkafka, some
  Python clients) write one raw snappy block.  Both are read; xerial framing is written.
* lz4    – an LZ4 frame (``lz4.frame``);
* zstd   – a zstd frame (``zstandard``); frames without a content size are streamed.
"""

from __future__ import annotations

import gzip
import struct
import zlib
from enum import IntEnum

from mqstore.errors import CorruptDataError, UnsupportedFormatError


class Compression(IntEnum):
    """Kafka compression codec ids (low three bits of the batch attributes)."""

    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4


XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = XERIAL_MAGIC + struct.pack(">ii", 1, 1)
_XERIAL_BLOCK = 32 * 1024


def _codec(codec: int) -> Compression:
    try:
        return Compression(codec)
    except ValueError:
        raise UnsupportedFormatError(f"unknown compression codec id {codec}") from None


def compress(codec: int, data: bytes) -> bytes:
    """Compress ``data`` with the given codec (all four Kafka codecs are supported)."""
    c = _codec(codec)
    if c is Compression.NONE:
        return bytes(data)
    if c is Compression.GZIP:
        return gzip.compress(bytes(data), compresslevel=6, mtime=0)
    if c is Compression.SNAPPY:
        import cramjam

        out = bytearray(_XERIAL_HEADER)
        for i in range(0, max(len(data), 1), _XERIAL_BLOCK):
            block = bytes(cramjam.snappy.compress_raw(bytes(data[i : i + _XERIAL_BLOCK])))
            out += struct.pack(">i", len(block)) + block
        return bytes(out)
    if c is Compression.LZ4:
        import lz4.frame

        return lz4.frame.compress(bytes(data))
    import zstandard

    return zstandard.ZstdCompressor(level=3).compress(bytes(data))


def decompress(codec: int, data: bytes | memoryview, *, path: str | None = None, offset: int | None = None) -> bytes:
    """Decompress a batch body; any codec failure raises :class:`CorruptDataError`."""
    c = _codec(codec)
    raw = bytes(data)
    try:
        if c is Compression.NONE:
            return raw
        if c is Compression.GZIP:
            # wbits 47 = auto-detect gzip or zlib header
            d = zlib.decompressobj(47)
            out = d.decompress(raw)
            if not d.eof:
                raise CorruptDataError("gzip stream is truncated", path=path, offset=offset)
            return out
        if c is Compression.SNAPPY:
            return _snappy_decompress(raw)
        if c is Compression.LZ4:
            import lz4.frame

            return lz4.frame.decompress(raw)
        import zstandard

        return zstandard.ZstdDecompressor().decompressobj().decompress(raw)
    except CorruptDataError:
        raise
    except Exception as exc:  # codec libraries raise their own error types
        raise CorruptDataError(f"cannot decompress {c.name.lower()} data: {exc}", path=path, offset=offset) from exc


def _snappy_decompress(raw: bytes) -> bytes:
    import cramjam

    if not raw.startswith(XERIAL_MAGIC):
        return bytes(cramjam.snappy.decompress_raw(raw))
    if len(raw) < 16:
        raise CorruptDataError("xerial snappy header is truncated")
    pos = 16
    out = bytearray()
    while pos < len(raw):
        if pos + 4 > len(raw):
            raise CorruptDataError("xerial snappy block length is truncated")
        (n,) = struct.unpack_from(">i", raw, pos)
        pos += 4
        if n < 0 or pos + n > len(raw):
            raise CorruptDataError(f"xerial snappy block of {n} bytes runs past the data")
        out += bytes(cramjam.snappy.decompress_raw(raw[pos : pos + n]))
        pos += n
    return bytes(out)
