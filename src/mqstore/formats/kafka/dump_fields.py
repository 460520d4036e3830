"""The fields ``mqstore kafka dump`` shows for a v2 batch and for each of its records, as dicts.

One home for the shape of a dump line (the key order is the output's): the storage layer's
``dump_log`` yields these dicts, and the JSON-lines kernels (:mod:`mqstore.kernels.kafka.json_lines`)
write the same fields straight into bytes, tested against ``json.dumps`` of these dicts.
"""

from __future__ import annotations

from typing import Any

from mqstore.formats.kafka.batch import BatchHeader, Record


def batch_fields(h: BatchHeader, valid: bool) -> dict[str, Any]:
    """Every header field of the v2 batch ``h`` (``valid``: its checksum verified)."""
    return {
        "type": "batch", "baseOffset": h.base_offset, "lastOffset": h.last_offset,
        "count": h.records_count, "baseSequence": h.base_sequence, "lastSequence": h.last_sequence,
        "producerId": h.producer_id, "producerEpoch": h.producer_epoch,
        "partitionLeaderEpoch": h.partition_leader_epoch, "isTransactional": h.is_transactional,
        "isControl": h.is_control, "deleteHorizonMs": h.delete_horizon_ms,
        "hasDeleteHorizon": h.has_delete_horizon, "position": h.position,
        "timestampType": h.timestamp_type.label, "maxTimestamp": h.max_timestamp,
        "baseTimestamp": h.base_timestamp, "size": h.size, "magic": h.magic,
        "compresscodec": h.compression.name.lower(), "crc": h.crc, "isvalid": valid,
    }  # fmt: skip


def record_fields(h: BatchHeader, r: Record) -> dict[str, Any]:
    """The fields of record ``r`` of batch ``h`` (key, value and header values as bytes or None)."""
    return {
        "type": "record", "offset": r.offset, "timestampType": h.timestamp_type.label,
        "timestamp": r.timestamp, "keySize": -1 if r.key is None else len(r.key),
        "valueSize": -1 if r.value is None else len(r.value),
        "sequence": -1 if h.base_sequence == -1 else h.base_sequence + r.offset_delta,
        "headerKeys": [x.key for x in r.headers],
        "key": r.key, "value": r.value,
        "headers": [{"key": x.key, "value": x.value} for x in r.headers],
    }  # fmt: skip
