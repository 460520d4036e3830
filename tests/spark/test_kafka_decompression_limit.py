"""The ``kafka-log`` Spark source decodes through the same capped decompressor as the library: a
gzip bomb (80 MiB of zeros in ~80 KiB) fails the query with the typed error's message instead of
inflating in an executor (the library-level bomb tests are in ``tests/faults/test_fault_bombs.py``)."""

from __future__ import annotations

import json
import struct
import zlib
from pathlib import Path

import crc32c
import pytest
from pyspark.errors import PySparkException

from mqstore.formats.kafka.batch import SimpleRecord, encode_batch
from mqstore.kafka import PartitionLog

MIB = 1024 * 1024


def _gzip_bomb_batch(size: int) -> bytes:
    c = zlib.compressobj(9, zlib.DEFLATED, 31)
    zero = b"\0" * MIB
    body = b"".join([c.compress(zero) for _ in range(size // MIB)] + [c.flush()])
    data = bytearray(encode_batch([SimpleRecord(b"x")], compression=1)[:61]) + body
    struct.pack_into(">i", data, 8, len(data) - 12)
    struct.pack_into(">I", data, 17, crc32c.crc32c(bytes(data[21:])))
    return bytes(data)


def test_kafka_log_source_refuses_a_decompression_bomb(spark, tmp_path: Path) -> None:
    d = tmp_path / "logs" / "t-0"
    with PartitionLog.open(d) as log:
        log.append_records([SimpleRecord(b"fine", b"k", timestamp=1)], compression=1)
        log.append(_gzip_bomb_batch(80 * MIB))
    reader = spark.read.format("kafka-log")
    with pytest.raises(PySparkException) as excinfo:  # Spark wraps the typed error in its own exception
        reader.load(str(tmp_path / "logs")).collect()
    text = str(excinfo.value)
    assert "DecompressionLimitError" in text and "inflates past the limit of 67108864 bytes" in text
    before = reader.option("endingOffsets", json.dumps({"t": {"0": 1}})).load(str(tmp_path / "logs"))
    assert [bytes(r.value) for r in before.select("value").collect()] == [b"fine"]  # the batch before it reads
