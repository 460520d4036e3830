"""Pure codecs of Kafka's transaction files: the aborted-transaction index (``.txnindex``) and the
producer-state snapshot (``<20-digit offset>.snapshot``).  Bytes in, values out; no file access.

Layouts (big-endian; docs/formats/kafka-txnindex.md and kafka-snapshot.md):

* ``.txnindex``: a sequence of 34-byte entries ``version int16 (0) | producerId int64 |
  firstOffset int64 | lastOffset int64 | lastStableOffset int64``.  No header, no padding.
* ``.snapshot``: ``version int16 (1) | crc uint32 | count int32 | count × entry`` where an entry is
  ``producerId int64 | epoch int16 | lastSequence int32 | lastOffset int64 | offsetDelta int32 |
  timestamp int64 | coordinatorEpoch int32 | currentTxnFirstOffset int64`` (46 bytes) and the CRC is
  the CRC-32C of every byte after the CRC field.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from dataclasses import dataclass
from typing import NamedTuple

from mqstore.errors import CorruptIndexError, CrcMismatchError, TruncatedRecordError, UnsupportedFormatError
from mqstore.formats.kafka.batch import crc32c

ABORTED_TXN_SIZE = 34
ABORTED_TXN_VERSION = 0
_ABORTED = struct.Struct(">hqqqq")

SNAPSHOT_VERSION = 1
SNAPSHOT_HEADER_SIZE = 10  # version int16, crc uint32, entry count int32
SNAPSHOT_ENTRY_SIZE = 46
_SNAP_HEAD = struct.Struct(">hIi")
_SNAP_ENTRY = struct.Struct(">qhiqiqiq")
_CRC_FROM = 6  # the CRC covers [6, end)


class AbortedTxn(NamedTuple):
    """One entry of a ``.txnindex``: the aborted transaction of ``producer_id`` spanning
    ``[first_offset, last_offset]`` (``last_offset`` is the ABORT marker's offset) and the last
    stable offset of the partition when the marker was appended."""

    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int
    version: int = ABORTED_TXN_VERSION


def encode_aborted_txn(txn: AbortedTxn) -> bytes:
    return _ABORTED.pack(txn.version, txn.producer_id, txn.first_offset, txn.last_offset, txn.last_stable_offset)


def encode_txn_index(txns: Iterable[AbortedTxn]) -> bytes:
    return b"".join(encode_aborted_txn(t) for t in txns)


def decode_txn_index(data: bytes | bytearray | memoryview, *, path: str | None = None,
                     strict: bool = True) -> list[AbortedTxn]:
    """Every entry of a ``.txnindex``.

    A trailing partial entry (file length not a multiple of 34) raises :class:`CorruptIndexError`
    when ``strict`` (Kafka's reader silently ignores it); an entry whose version is newer than 0
    raises :class:`UnsupportedFormatError` (Kafka fails the read the same way).
    """
    n, rest = divmod(len(data), ABORTED_TXN_SIZE)
    if rest and strict:
        raise CorruptIndexError(f"transaction index length {len(data)} is not a multiple of {ABORTED_TXN_SIZE} "
                                f"({rest} trailing bytes of a partial entry)", path=path, offset=n * ABORTED_TXN_SIZE)
    out = []
    for i in range(n):
        v, pid, first, last, lso = _ABORTED.unpack_from(data, i * ABORTED_TXN_SIZE)
        if v > ABORTED_TXN_VERSION:
            raise UnsupportedFormatError(f"aborted transaction version {v} (this reader knows {ABORTED_TXN_VERSION})",
                                         path=path, offset=i * ABORTED_TXN_SIZE)
        out.append(AbortedTxn(pid, first, last, lso, v))
    return out


# ----------------------------------------------------------------------------- producer snapshots
@dataclass(frozen=True)
class ProducerSnapshotEntry:
    """The state of one producer id in a snapshot.  ``last_offset`` is −1 (and ``last_sequence``
    −1, ``offset_delta`` 0) when the producer has no retained data batch (e.g. only a marker since
    its epoch changed); ``current_txn_first_offset`` is −1 when no transaction is open."""

    producer_id: int
    epoch: int
    last_sequence: int
    last_offset: int
    offset_delta: int
    timestamp: int
    coordinator_epoch: int
    current_txn_first_offset: int


@dataclass(frozen=True)
class ProducerSnapshot:
    version: int
    crc: int
    entries: tuple[ProducerSnapshotEntry, ...]


def snapshot_crc(data: bytes | bytearray | memoryview) -> int:
    return crc32c(bytes(data[_CRC_FROM:]))


def encode_producer_snapshot(entries: Iterable[ProducerSnapshotEntry]) -> bytes:
    """Snapshot bytes (version 1) holding ``entries`` in the given order, CRC filled in."""
    items = list(entries)
    body = b"".join(_SNAP_ENTRY.pack(e.producer_id, e.epoch, e.last_sequence, e.last_offset, e.offset_delta,
                                     e.timestamp, e.coordinator_epoch, e.current_txn_first_offset) for e in items)
    tail = struct.pack(">i", len(items)) + body
    return struct.pack(">hI", SNAPSHOT_VERSION, crc32c(tail)) + tail


def decode_producer_snapshot(data: bytes | bytearray | memoryview, *, path: str | None = None) -> ProducerSnapshot:
    """Decode and check a producer-state snapshot: version 1 only (Kafka's reader refuses any other),
    CRC-32C over the bytes after the CRC field, exact length (no trailing bytes)."""
    if len(data) < SNAPSHOT_HEADER_SIZE:
        raise TruncatedRecordError(f"producer snapshot of {len(data)} bytes is shorter than its "
                                   f"{SNAPSHOT_HEADER_SIZE}-byte header", path=path, offset=0)
    version, crc, count = _SNAP_HEAD.unpack_from(data, 0)
    if version != SNAPSHOT_VERSION:
        raise UnsupportedFormatError(f"producer snapshot version {version} (known: {SNAPSHOT_VERSION})",
                                     path=path, offset=0)
    if count < 0:
        raise CorruptIndexError(f"negative producer entry count {count}", path=path, offset=6)
    need = SNAPSHOT_HEADER_SIZE + count * SNAPSHOT_ENTRY_SIZE
    if len(data) < need:
        raise TruncatedRecordError(f"producer snapshot holds {len(data)} bytes, {count} entries need {need}",
                                   path=path, offset=len(data))
    if len(data) > need:
        raise CorruptIndexError(f"{len(data) - need} bytes after the last of {count} producer entries",
                                path=path, offset=need)
    actual = snapshot_crc(data)
    if actual != crc:
        raise CrcMismatchError(f"producer snapshot CRC mismatch: stored {crc}, computed {actual}", path=path, offset=2)
    entries = tuple(ProducerSnapshotEntry(*_SNAP_ENTRY.unpack_from(data, SNAPSHOT_HEADER_SIZE + i * SNAPSHOT_ENTRY_SIZE))
                    for i in range(count))
    return ProducerSnapshot(version, crc, entries)
