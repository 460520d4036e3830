"""Interop with an independent implementation: kafka-python's ``kafka.record`` module."""

from __future__ import annotations

import pytest
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from mqstore.formats.kafka import (
    Compression,
    Header,
    SimpleRecord,
    TimestampType,
    decode_batch,
    encode_batch,
    encode_end_txn_marker_batch,
)

KP_CODECS = {Compression.NONE: 0, Compression.GZIP: 1, Compression.LZ4: 3, Compression.ZSTD: 4}
RECORDS = [
    SimpleRecord(value=b"hello", key=b"k1", headers=[Header("h", b"v"), Header("n", None)], timestamp=1_700_000_000_000),
    SimpleRecord(value=None, key=b"tombstone", timestamp=1_700_000_000_005),
    SimpleRecord(value=b"x" * 3000, key=None, timestamp=1_699_999_999_990),
    SimpleRecord(value=b"", key=b"", timestamp=1_700_000_000_001, offset_delta=7),
]


@pytest.mark.parametrize("codec", list(KP_CODECS))
def test_mqstore_batches_read_by_kafka_python(codec: Compression) -> None:
    data = encode_batch(RECORDS, base_offset=100, compression=codec, producer_id=42, producer_epoch=3,
                        base_sequence=9, is_transactional=True, partition_leader_epoch=5)
    kb = DefaultRecordBatch(data)
    assert kb.validate_crc()
    assert (kb.base_offset, kb.last_offset_delta, kb.compression_type) == (100, 7, KP_CODECS[codec])
    assert (kb.producer_id, kb.producer_epoch, kb.base_sequence, kb.is_transactional) == (42, 3, 9, True)
    assert kb.leader_epoch == 5
    assert kb.first_timestamp == RECORDS[0].timestamp and kb.max_timestamp == 1_700_000_000_005
    recs = list(kb)
    assert [r.offset for r in recs] == [100, 101, 102, 107]
    assert [r.key for r in recs] == [r.key for r in RECORDS]
    assert [r.value for r in recs] == [r.value for r in RECORDS]
    assert [r.timestamp for r in recs] == [r.timestamp for r in RECORDS]
    assert recs[0].headers == [("h", b"v"), ("n", None)]


@pytest.mark.parametrize("codec", list(KP_CODECS))
def test_kafka_python_batches_read_by_mqstore(codec: Compression) -> None:
    b = DefaultRecordBatchBuilder(magic=2, compression_type=KP_CODECS[codec], is_transactional=False,
                                  producer_id=-1, producer_epoch=-1, base_sequence=-1, batch_size=1 << 20)
    rows = [(i, 1_700_000_000_000 + i, f"k{i}".encode() if i % 3 else None, (b"v%d" % i) * (i + 1),
             [("a", b"1")] if i % 2 else []) for i in range(50)]
    for off, ts, k, v, h in rows:
        b.append(off, ts, k, v, h)
    data = bytes(b.build())
    rb = decode_batch(data)
    assert rb.crc_valid and int(rb.header.compression) == int(codec)
    assert rb.header.records_count == 50 and rb.header.last_offset == 49
    for r, (_, ts, k, v, h) in zip(rb.records, rows, strict=True):
        assert (r.timestamp, r.key, r.value) == (ts, k, v)
        assert [(x.key, x.value) for x in r.headers] == h


def test_control_batch_and_log_append_time_interop() -> None:
    data = encode_end_txn_marker_batch(commit=False, producer_id=7, producer_epoch=1, base_offset=10,
                                       timestamp=123, coordinator_epoch=4)
    kb = DefaultRecordBatch(data)
    assert kb.is_control_batch and kb.is_transactional and kb.validate_crc()
    (rec,) = list(kb)
    assert rec.abort and rec.version == 0
    lat = encode_batch(RECORDS[:2], timestamp_type=TimestampType.LOG_APPEND_TIME, max_timestamp=555)
    kb = DefaultRecordBatch(lat)
    assert kb.timestamp_type == 1 and [r.timestamp for r in kb] == [555, 555]
    assert [r.timestamp for r in decode_batch(lat).records] == [555, 555]
