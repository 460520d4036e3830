"""Decompression bombs: a Kafka batch whose records area inflates past the limit (64 MiB by default,
``MQSTORE_MAX_DECOMPRESSED_BYTES`` / ``set_max_decompressed_size`` / ``max_size=``) raises
``DecompressionLimitError`` naming the file and the batch's offset, without inflating the rest.
Real bombs for gzip, lz4 and zstd (512 MiB of zeros in a few hundred KiB) are decoded in a child
process whose peak RSS is reported back; snappy blocks declare their length and are refused before
they are inflated.  The partition reader, the dump and the Spark reader's decoding path all go
through the same capped decoder."""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
import zlib
from pathlib import Path

import crc32c
import pytest

from mqstore.errors import CorruptDataError, DecompressionLimitError, InvalidArgumentError
from mqstore.formats.kafka.batch import SimpleRecord, decode_batch, encode_batch
from mqstore.formats.kafka.compression import (
    DEFAULT_MAX_DECOMPRESSED_SIZE,
    XERIAL_MAGIC,
    Compression,
    compress,
    decompress,
    get_max_decompressed_size,
    set_max_decompressed_size,
)
from mqstore.kafka import PartitionLog, verify_path
from mqstore.storage.kafka.tools import dump_log

MIB = 1024 * 1024
BOMB_SIZE = 512 * MIB  # 8 x the default limit


def stream_bomb(codec: str, size: int) -> bytes:
    """``size`` zero bytes compressed with constant memory (1 MiB input slices)."""
    zero = b"\0" * MIB
    parts: list[bytes] = []
    if codec == "gzip":
        c = zlib.compressobj(9, zlib.DEFLATED, 31)
        parts += [c.compress(zero) for _ in range(size // MIB)]
        parts.append(c.flush())
    elif codec == "lz4":
        import lz4.frame

        lc = lz4.frame.LZ4FrameCompressor()
        parts.append(lc.begin())
        parts += [lc.compress(zero) for _ in range(size // MIB)]
        parts.append(lc.flush())
    else:  # zstd: "zstd" streams without a content size (as Kafka's Java client does), "zstd-sized" declares it
        import zstandard

        zc = zstandard.ZstdCompressor(level=3, write_content_size=codec == "zstd-sized")
        obj = zc.compressobj(size=size if codec == "zstd-sized" else -1)
        parts += [obj.compress(zero) for _ in range(size // MIB)]
        parts.append(obj.flush())
    return b"".join(parts)


CODEC_ID = {"gzip": Compression.GZIP, "lz4": Compression.LZ4, "zstd": Compression.ZSTD,
            "zstd-sized": Compression.ZSTD, "snappy": Compression.SNAPPY}


def bomb_batch(codec: str, body: bytes) -> bytes:
    """A valid v2 batch header (CRC right) over an arbitrary compressed records area."""
    head = bytearray(encode_batch([SimpleRecord(b"x")], compression=CODEC_ID[codec])[:61])
    data = head + body
    struct.pack_into(">i", data, 8, len(data) - 12)
    struct.pack_into(">I", data, 17, crc32c.crc32c(bytes(data[21:])))
    return bytes(data)


CHILD = """
import json, resource, sys
from mqstore.formats.kafka.batch import decode_batch
from mqstore.errors import MqStoreError
data = open(sys.argv[1], "rb").read()
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
try:
    decode_batch(data, path=sys.argv[1])
    out = {"error": None}
except MqStoreError as e:
    out = {"error": type(e).__name__, "message": str(e)}
out["base_kib"] = base
out["peak_kib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps(out))
"""


@pytest.mark.parametrize("codec", ["gzip", "lz4", "zstd", "zstd-sized"])
def test_real_bomb_is_refused_with_bounded_memory(tmp_path: Path, codec: str) -> None:
    body = stream_bomb(codec, BOMB_SIZE)
    assert len(body) < BOMB_SIZE // 100  # it is a bomb
    f = tmp_path / f"{codec}.bomb"
    f.write_bytes(bomb_batch(codec, body))
    p = subprocess.run([sys.executable, "-c", CHILD, str(f)], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr[-2000:]
    out = json.loads(p.stdout)
    assert out["error"] == "DecompressionLimitError", out
    assert str(f) in out["message"] and "offset 0" in out["message"]
    grown_mib = (out["peak_kib"] - out["base_kib"]) / 1024
    # the limit (64 MiB) plus the copies of the bomb and slack, far below the 512 MiB it inflates to
    assert grown_mib < 2 * DEFAULT_MAX_DECOMPRESSED_SIZE / MIB, out


def test_snappy_blocks_are_refused_by_their_declared_length() -> None:
    huge = b"\xff\xff\xff\xff\x0f" + b"\0" * 16  # a raw block claiming 4 GiB
    with pytest.raises(DecompressionLimitError, match="4294967295 bytes declared"):
        decompress(Compression.SNAPPY, huge, path="p", offset=7)
    xerial = compress(Compression.SNAPPY, b"\0" * (4 * MIB))  # 128 blocks of 32 KiB
    assert len(xerial) < 4 * MIB // 10
    assert decompress(Compression.SNAPPY, xerial) == b"\0" * (4 * MIB)
    with pytest.raises(DecompressionLimitError) as ei:
        decompress(Compression.SNAPPY, xerial, max_size=MIB, path="seg.log", offset=123)
    assert ei.value.path == "seg.log" and ei.value.offset == 123
    assert xerial.startswith(XERIAL_MAGIC)
    with pytest.raises(CorruptDataError):
        decompress(Compression.SNAPPY, b"\xff\xff\xff\xff\xff\xff")  # malformed preamble


@pytest.mark.parametrize("codec", [Compression.GZIP, Compression.SNAPPY, Compression.LZ4, Compression.ZSTD])
def test_limit_is_exact_and_configurable(codec: Compression) -> None:
    data = bytes(range(256)) * 4096  # 1 MiB
    z = compress(codec, data)
    assert decompress(codec, z, max_size=len(data)) == data
    with pytest.raises(DecompressionLimitError):
        decompress(codec, z, max_size=len(data) - 1)
    batch = encode_batch([SimpleRecord(data)], compression=codec)
    assert get_max_decompressed_size() == DEFAULT_MAX_DECOMPRESSED_SIZE
    try:
        set_max_decompressed_size(len(data) // 2)
        with pytest.raises(DecompressionLimitError):
            decode_batch(batch)
    finally:
        set_max_decompressed_size(None)
    assert decode_batch(batch).records[0].value == data


def test_truncated_frames_are_typed_errors() -> None:
    data = bytes(range(256)) * 1024
    for codec in (Compression.GZIP, Compression.LZ4, Compression.ZSTD, Compression.SNAPPY):
        z = compress(codec, data)
        with pytest.raises(CorruptDataError):
            decompress(codec, z[: len(z) - 5])
    import zstandard

    unsized = zstandard.ZstdCompressor(write_content_size=False).compress(data)
    assert decompress(Compression.ZSTD, unsized) == data
    with pytest.raises(CorruptDataError, match="truncated"):
        decompress(Compression.ZSTD, unsized[:-5])


def test_limit_from_the_environment(tmp_path: Path) -> None:
    f = tmp_path / "b"
    f.write_bytes(encode_batch([SimpleRecord(b"\0" * (2 * MIB))], compression=Compression.GZIP))
    env = dict(os.environ, MQSTORE_MAX_DECOMPRESSED_BYTES=str(MIB))
    p = subprocess.run([sys.executable, "-c", CHILD, str(f)], capture_output=True, text=True, env=env)
    assert json.loads(p.stdout)["error"] == "DecompressionLimitError", p.stdout + p.stderr
    env["MQSTORE_MAX_DECOMPRESSED_BYTES"] = "lots"
    p = subprocess.run([sys.executable, "-c", CHILD, str(f)], capture_output=True, text=True, env=env)
    assert json.loads(p.stdout)["error"] == "InvalidArgumentError", p.stdout + p.stderr
    with pytest.raises(InvalidArgumentError):
        set_max_decompressed_size(0)


def _bombed_partition(tmp_path: Path) -> tuple[Path, int]:
    d = tmp_path / "t-0"
    with PartitionLog.open(d) as log:
        log.append_records([SimpleRecord(b"before", b"k0", timestamp=1)])
        info = log.append(bomb_batch("gzip", stream_bomb("gzip", 80 * MIB)))
        log.append_records([SimpleRecord(b"after", b"k2", timestamp=3)])
    return d, info.position


def test_partition_reader_and_dump_report_the_bomb(tmp_path: Path) -> None:
    d, position = _bombed_partition(tmp_path)
    seg = str(d / "00000000000000000000.log")
    with PartitionLog.open(d, read_only=True) as log, pytest.raises(DecompressionLimitError) as ei:
        list(log.iter_records())
    assert ei.value.path == seg and ei.value.offset == position
    # verify checks CRCs, offsets and indexes, not record bodies: the bomb's CRC is right
    assert verify_path(d).ok
    with pytest.raises(DecompressionLimitError) as ei:  # the dump decodes records: same typed error
        list(dump_log(Path(seg), print_data=True))
    assert ei.value.offset == position


def test_spark_reader_decoding_path_hits_the_cap(tmp_path: Path) -> None:
    """The function Spark executors run for ``kafka-log`` (both decoders)."""
    from mqstore.spark._kafka_plan import OffsetRange
    from mqstore.spark._kafka_read import read_arrow

    d, position = _bombed_partition(tmp_path)
    for fast in (True, False):
        rng = OffsetRange("t", 0, str(d), 0, 3)
        with pytest.raises(DecompressionLimitError) as ei:
            list(read_arrow(rng, fast=fast))
        assert ei.value.offset == position and ei.value.path is not None and ei.value.path.endswith(".log")
