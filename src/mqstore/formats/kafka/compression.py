"""Compression codecs of Kafka record batches (attributes bits 0-2, spec §2.2).

* gzip   – a standard gzip stream (stdlib ``zlib``/``gzip``);
* snappy – Kafka's Java producer writes the *xerial* framing (magic ``\\x82SNAPPY\\x00``, two int32
  version fields, then blocks of int32 length + raw snappy block); other clients (librdkafka, some
  Python clients) write one raw snappy block.  Both are read; xerial framing is written.
* lz4    – an LZ4 frame (``lz4.frame``);
* zstd   – a zstd frame (``zstandard``); frames without a content size are streamed.

Decompression is capped: a batch whose records area inflates past ``max_size`` bytes (default
:data:`DEFAULT_MAX_DECOMPRESSED_SIZE`, 64 MiB; process-wide with :func:`set_max_decompressed_size`
or the ``MQSTORE_MAX_DECOMPRESSED_BYTES`` environment variable, which Spark executors inherit)
raises :class:`DecompressionLimitError` without inflating the rest.  gzip and lz4 stop at the
limit exactly (bounded output); zstd input is fed in slices sized to the remaining budget at zstd's maximum ratio,
so at most about 2 MiB are produced past it; snappy blocks declare their length and are
refused before they are inflated.  64 MiB is 64 times the largest batch a broker accepts by default
(``message.max.bytes`` ≈ 1 MiB, measured compressed) and far above what producers batch
(``batch.size`` 16 KiB), while keeping one hostile batch's memory bounded.
"""

from __future__ import annotations

import gzip
import os
import struct
import zlib
from collections.abc import Callable
from enum import IntEnum

from mqstore.errors import (
    CorruptDataError,
    DecompressionLimitError,
    InvalidArgumentError,
    UnsupportedFormatError,
)


class Compression(IntEnum):
    """Kafka compression codec ids (low three bits of the batch attributes)."""

    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4


DEFAULT_MAX_DECOMPRESSED_SIZE = 64 * 1024 * 1024
MAX_DECOMPRESSED_ENV = "MQSTORE_MAX_DECOMPRESSED_BYTES"
_TooBig = Callable[[str], DecompressionLimitError]
_ZSTD_RATIO = 32 * 1024  # most output one compressed zstd byte can produce
_ZSTD_MIN_SLICE = 64  # compressed bytes fed per call near the limit (≤ 2 MiB past it)
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


def _limit_from_env() -> int:
    v = os.environ.get(MAX_DECOMPRESSED_ENV)
    if not v:
        return DEFAULT_MAX_DECOMPRESSED_SIZE
    try:
        n = int(v)
    except ValueError:
        raise InvalidArgumentError(f"{MAX_DECOMPRESSED_ENV}={v!r} is not a number of bytes") from None
    if n <= 0:
        raise InvalidArgumentError(f"{MAX_DECOMPRESSED_ENV} must be positive, got {n}")
    return n


_max_size: int | None = None


def get_max_decompressed_size() -> int:
    """The process-wide cap on one batch's decompressed size (bytes)."""
    global _max_size
    if _max_size is None:
        _max_size = _limit_from_env()
    return _max_size


def set_max_decompressed_size(n: int | None) -> None:
    """Set the process-wide cap (``None``: back to the environment variable or the default)."""
    global _max_size
    if n is not None and (not isinstance(n, int) or n <= 0):
        raise InvalidArgumentError(f"the decompressed-size limit must be a positive int, got {n!r}")
    _max_size = n


def decompress(codec: int, data: bytes | memoryview, *, path: str | None = None, offset: int | None = None,
               max_size: int | None = None) -> bytes:
    """Decompress a batch body; any codec failure raises :class:`CorruptDataError`, output past
    ``max_size`` bytes (default: :func:`get_max_decompressed_size`) :class:`DecompressionLimitError`."""
    c = _codec(codec)
    raw = bytes(data)
    if c is Compression.NONE:
        return raw
    limit = get_max_decompressed_size() if max_size is None else max_size

    def too_big(produced: str) -> DecompressionLimitError:
        return DecompressionLimitError(
            f"{c.name.lower()} data of {len(raw)} bytes inflates past the limit of {limit} bytes "
            f"({produced}; see {MAX_DECOMPRESSED_ENV})", path=path, offset=offset)

    try:
        if c is Compression.GZIP:
            # wbits 47 = auto-detect gzip or zlib header
            d = zlib.decompressobj(47)
            out = d.decompress(raw, limit + 1)
            if len(out) > limit:
                raise too_big(f"more than {limit} bytes produced")
            if not d.eof:
                raise CorruptDataError("gzip stream is truncated", path=path, offset=offset)
            return out
        if c is Compression.SNAPPY:
            return _snappy_decompress(raw, limit, too_big)
        if c is Compression.LZ4:
            import lz4.frame

            ld = lz4.frame.LZ4FrameDecompressor()
            out = ld.decompress(raw, max_length=limit + 1)
            if len(out) > limit:
                raise too_big(f"more than {limit} bytes produced")
            if not ld.eof:
                raise CorruptDataError("lz4 frame is truncated", path=path, offset=offset)
            return out
        return _zstd_decompress(raw, limit, too_big, path, offset)
    except CorruptDataError:
        raise
    except MemoryError as exc:  # a hostile header asked a codec for more than the process may have
        raise too_big("the codec could not allocate its output") from exc
    except Exception as exc:  # codec libraries raise their own error types
        raise CorruptDataError(f"cannot decompress {c.name.lower()} data: {exc}", path=path, offset=offset) from exc


def _zstd_decompress(raw: bytes, limit: int, too_big: _TooBig, path: str | None, offset: int | None) -> bytes:
    import zstandard

    declared = zstandard.frame_content_size(raw)
    if declared > limit:
        raise too_big(f"{declared} bytes declared")
    # A window larger than the output is never needed: refuse frames asking for more memory than
    # the limit (but at least 8 MiB, so small limits still read frames of the usual levels).
    window = 1 << max(23, min(31, (limit - 1).bit_length()))
    d = zstandard.ZstdDecompressor(max_window_size=window).decompressobj()
    if declared >= 0:  # libzstd refuses to produce more than a frame declares: one call
        out = d.decompress(raw)
        if not d.eof:
            raise CorruptDataError("zstd frame is truncated", path=path, offset=offset)
        if len(out) > limit:
            raise too_big(f"{len(out)} bytes produced")
        return out
    parts: list[bytes] = []
    total = pos = 0
    view = memoryview(raw)
    while pos < len(raw) and not d.eof:
        # One compressed byte yields at most _ZSTD_RATIO bytes (a 4-byte RLE block makes 128 KiB),
        # so a slice sized to the remaining budget cannot overshoot it by more than one block.
        step = max(_ZSTD_MIN_SLICE, (limit - total) // _ZSTD_RATIO)
        chunk = d.decompress(view[pos : pos + step])
        pos += step
        if chunk:
            total += len(chunk)
            if total > limit:
                raise too_big(f"more than {limit} bytes produced")
            parts.append(chunk)
    if not d.eof:
        raise CorruptDataError("zstd frame is truncated", path=path, offset=offset)
    return b"".join(parts)


def _snappy_length(block: bytes | memoryview) -> int:
    """The uncompressed length a raw snappy block declares (its varint preamble)."""
    n = shift = 0
    for i in range(min(5, len(block))):
        b = block[i]
        n |= (b & 0x7F) << shift
        if not b & 0x80:
            return n
        shift += 7
    raise CorruptDataError("snappy block length preamble is malformed")


def _snappy_decompress(raw: bytes, limit: int, too_big: _TooBig) -> bytes:
    import cramjam

    if not raw.startswith(XERIAL_MAGIC):
        n = _snappy_length(raw)
        if n > limit:
            raise too_big(f"{n} bytes declared")
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
        declared = _snappy_length(raw[pos : pos + n])
        if len(out) + declared > limit:
            raise too_big(f"{len(out) + declared} bytes declared")
        out += bytes(cramjam.snappy.decompress_raw(raw[pos : pos + n]))
        pos += n
    return bytes(out)
