"""Public API of mqstore's Kafka layer (a contract: code outside the project relies on it);
``mqstore.kafka`` re-exports it.

>>> from mqstore.kafka import PartitionLog, LogSegment, LogConfig
>>> log = PartitionLog.open("/data/orders-0")                       # doctest: +SKIP
>>> log.append_records([b"hello", b"world"])                         # doctest: +SKIP
>>> seg = LogSegment.open("/data/orders-0/00000000000000000000.log") # doctest: +SKIP
>>> seg.offset_index.lookup(42), seg.time_index.lookup(1700000000000) # doctest: +SKIP

Results are small named tuples / dataclasses; "not found" is ``None``.  See ``docs/kafka.md``.
"""

from __future__ import annotations

from mqstore.formats.kafka import (
    BatchHeader,
    Compression,
    ControlRecord,
    ControlRecordType,
    Header,
    Record,
    RecordBatch,
    SimpleRecord,
    TimestampType,
    decode_batch,
    decode_batch_header,
    decode_control_record,
    encode_batch,
    encode_end_txn_marker_batch,
)
from mqstore.formats.kafka.index_entry import OffsetPosition, TimestampOffset
from mqstore.formats.kafka.txn import (
    AbortedTxn,
    ProducerSnapshot,
    ProducerSnapshotEntry,
    decode_producer_snapshot,
    decode_txn_index,
)
from mqstore.kernels.kafka.batches import scan_batches
from mqstore.kernels.kafka.records import decode_records_columnar
from mqstore.storage.kafka.index import OffsetIndex, TimeIndex
from mqstore.storage.kafka.key_query import KeyMatch, KeyQueryStats
from mqstore.storage.kafka.keyindex import KeyIndexResult, rebuild_keyindex, verify_keyindex
from mqstore.storage.kafka.log import (
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    MAX_TIMESTAMP,
    LogAppendInfo,
    OffsetLookup,
    PartitionLog,
    TimestampLookup,
)
from mqstore.storage.kafka.rebuild import RebuildResult, rebuild_indexes
from mqstore.storage.kafka.segment import (
    FetchDataInfo,
    LogConfig,
    LogOffsetMetadata,
    LogOffsetPosition,
    LogSegment,
    TimestampAndOffset,
)
from mqstore.storage.kafka.tools import VerifyProblem, VerifyReport, verify_path
from mqstore.storage.kafka.txn import (
    TxnState,
    partition_txn_state,
    read_producer_snapshot,
)
from mqstore.storage.kafka.txn_files import read_txn_index
from mqstore.storage.kafka.txn_rebuild import rebuild_txn_indexes

__all__ = [
    "EARLIEST_TIMESTAMP",
    "LATEST_TIMESTAMP",
    "MAX_TIMESTAMP",
    "AbortedTxn",
    "BatchHeader",
    "Compression",
    "ControlRecord",
    "ControlRecordType",
    "FetchDataInfo",
    "Header",
    "KeyIndexResult",
    "KeyMatch",
    "KeyQueryStats",
    "LogAppendInfo",
    "LogConfig",
    "LogOffsetMetadata",
    "LogOffsetPosition",
    "LogSegment",
    "OffsetIndex",
    "OffsetLookup",
    "OffsetPosition",
    "PartitionLog",
    "ProducerSnapshot",
    "ProducerSnapshotEntry",
    "RebuildResult",
    "Record",
    "RecordBatch",
    "SimpleRecord",
    "TimeIndex",
    "TimestampAndOffset",
    "TimestampLookup",
    "TimestampOffset",
    "TimestampType",
    "TxnState",
    "VerifyProblem",
    "VerifyReport",
    "decode_batch",
    "decode_batch_header",
    "decode_control_record",
    "decode_producer_snapshot",
    "decode_records_columnar",
    "decode_txn_index",
    "encode_batch",
    "encode_end_txn_marker_batch",
    "partition_txn_state",
    "read_producer_snapshot",
    "read_txn_index",
    "rebuild_indexes",
    "rebuild_keyindex",
    "rebuild_txn_indexes",
    "scan_batches",
    "verify_keyindex",
    "verify_path",
]
