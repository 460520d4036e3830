"""Pure codecs of the Kafka log format: record batches v2 (and legacy v0/v1), compression,
varints and index entries.  No file access here.

The names below are imported from their submodules on first use (PEP 562): a one-shot command that
needs one codec module (say ``formats.kafka.decoders``) does not pay for the others."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mqstore.formats.kafka.batch import (
        CRC_START,
        LOG_OVERHEAD,
        RECORD_BATCH_OVERHEAD,
        BatchHeader,
        BatchRef,
        ControlRecord,
        ControlRecordType,
        Header,
        LegacyMessage,
        Record,
        RecordBatch,
        SimpleRecord,
        TimestampType,
        batch_crc,
        decode_batch,
        decode_batch_header,
        decode_control_record,
        decode_legacy_message,
        encode_batch,
        encode_end_txn_marker_batch,
        encode_legacy_message,
        iter_legacy_records,
        iter_records,
        peek_batch,
        set_base_offset,
        validate_any,
        validate_batch,
        walk_batches,
    )
    from mqstore.formats.kafka.compression import Compression, compress, decompress
    from mqstore.formats.kafka.index_entry import (
        OFFSET_ENTRY_SIZE,
        TIME_ENTRY_SIZE,
        OffsetPosition,
        TimestampOffset,
        decode_offset_entry,
        decode_time_entry,
        encode_offset_entry,
        encode_time_entry,
    )
    from mqstore.formats.kafka.varint import decode_varint, decode_varlong, encode_varint, encode_varlong

_HOMES: dict[str, str] = {
    **dict.fromkeys(
        (
            "BatchHeader",
            "BatchRef",
            "CRC_START",
            "ControlRecord",
            "ControlRecordType",
            "Header",
            "LOG_OVERHEAD",
            "LegacyMessage",
            "RECORD_BATCH_OVERHEAD",
            "Record",
            "RecordBatch",
            "SimpleRecord",
            "TimestampType",
            "batch_crc",
            "decode_batch",
            "decode_batch_header",
            "decode_control_record",
            "decode_legacy_message",
            "encode_batch",
            "encode_end_txn_marker_batch",
            "encode_legacy_message",
            "iter_legacy_records",
            "iter_records",
            "peek_batch",
            "set_base_offset",
            "validate_any",
            "validate_batch",
            "walk_batches",
        ),
        "mqstore.formats.kafka.batch",
    ),
    **dict.fromkeys(("Compression", "compress", "decompress"), "mqstore.formats.kafka.compression"),
    **dict.fromkeys(
        (
            "OFFSET_ENTRY_SIZE",
            "OffsetPosition",
            "TIME_ENTRY_SIZE",
            "TimestampOffset",
            "decode_offset_entry",
            "decode_time_entry",
            "encode_offset_entry",
            "encode_time_entry",
        ),
        "mqstore.formats.kafka.index_entry",
    ),
    **dict.fromkeys(
        ("decode_varint", "decode_varlong", "encode_varint", "encode_varlong"), "mqstore.formats.kafka.varint"
    ),
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_HOMES))


__all__ = [
    "CRC_START",
    "LOG_OVERHEAD",
    "OFFSET_ENTRY_SIZE",
    "RECORD_BATCH_OVERHEAD",
    "TIME_ENTRY_SIZE",
    "BatchHeader",
    "BatchRef",
    "Compression",
    "ControlRecord",
    "ControlRecordType",
    "Header",
    "LegacyMessage",
    "OffsetPosition",
    "Record",
    "RecordBatch",
    "SimpleRecord",
    "TimestampOffset",
    "TimestampType",
    "batch_crc",
    "compress",
    "decode_batch",
    "decode_batch_header",
    "decode_control_record",
    "decode_legacy_message",
    "decode_offset_entry",
    "decode_time_entry",
    "decode_varint",
    "decode_varlong",
    "decompress",
    "encode_batch",
    "encode_end_txn_marker_batch",
    "encode_legacy_message",
    "encode_offset_entry",
    "encode_time_entry",
    "encode_varint",
    "encode_varlong",
    "iter_legacy_records",
    "iter_records",
    "peek_batch",
    "set_base_offset",
    "validate_any",
    "validate_batch",
    "walk_batches",
]
